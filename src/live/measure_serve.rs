//! The measuring phase of a run: the hold taken, the serve launched (or attached to) and
//! waited for until ready, then the replies (single-stream, the soak, the bursts, the
//! re-anchors) made while the box and the serve are sampled beside them. What it learns goes
//! into run.json as it happens.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::archive::record::{
    HoldCheckAt, LoadSnapshot, MetricsRecord, ReanchorRecord, ReplyRecord, RunManifest, Startup,
};
use crate::archive::rundir;
use crate::judging::verdict::reference;
use crate::live::bursts::{make_bursts, BurstWork};
use crate::live::client::{Client, Probe};
use crate::live::conditions::{self, Sampler, ServeTree};
use crate::live::depth::{self, DepthWork};
use crate::live::hold::{self, Hold, Taken};
use crate::live::log_pipe::LogPipe;
use crate::live::plan::{Launch, Plan};
use crate::live::progress_line::figures_said;
use crate::live::reanchor::{reanchor, ReanchorWork};
use crate::live::recorder::Recorder;
use crate::live::serve::{self, ServeProcess};
use crate::live::single_reply::{keep_reply, make_replies, one_reply};
use crate::live::soak::Soak;

/// What the measuring phase has that run.json does not hold.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The pipe the launched serve's output comes through into serve.log, made (and serve.log
    /// opened) before anything was held or started.
    pub serve_log: Option<LogPipe>,
    pub hold: Option<Hold>,
    pub load: Option<LoadSnapshot>,
    pub sampler: Option<Sampler>,
    pub replies: Vec<ReplyRecord>,
    /// The serve's metrics scraped around the bursts.
    pub metrics: Option<MetricsRecord>,
    /// The re-anchors made past divergences from the reference.
    pub reanchors: Vec<ReanchorRecord>,
}

/// Take the hold, launch (or attach), wait until ready, and make the replies. What it learns
/// goes into `manifest`, `serve` and `progress` as it happens, and run.json is rewritten at each
/// step, so a run killed outright still says how far it got.
pub(crate) async fn measure_serve(
    plan: &Plan,
    client: &Client,
    rec: &Recorder,
    base_ns: u64,
    manifest: &mut RunManifest,
    serve: &mut Option<ServeProcess>,
    progress: &mut Progress,
) -> Result<()> {
    if let Some(path) = &plan.hold {
        let taken = hold::take(path, plan.hold_timeout, &manifest.argv).await?;
        let acquired = matches!(taken, Taken::Acquired(..));
        match taken {
            Taken::Acquired(h, record) => {
                progress.hold = Some(h);
                manifest.hold = Some(record);
            }
            Taken::TimedOut(record) => manifest.hold = Some(record),
        }
        rec.json(rundir::MANIFEST, manifest);
        if !acquired {
            progress.load = record_load(rec);
            return Ok(());
        }
    }
    // The load right before the serve starts: after any wait for the hold.
    progress.load = record_load(rec);
    let startup = start_serve(plan, client, rec, manifest, serve, progress).await?;
    let ready = startup.is_ready();
    if let Startup::Ready {
        after_ms,
        probe,
        not_ready_answers,
    } = &startup
    {
        let loading = match not_ready_answers {
            0 => String::new(),
            n => format!(" after {n} not-ready answers"),
        };
        crate::say!("the serve is ready after {after_ms:.0} ms (GET {probe}{loading})");
    }
    manifest.startup = Some(startup);
    rec.json(rundir::MANIFEST, manifest);
    if !ready {
        return Ok(());
    }
    if let Some(h) = progress.hold.as_mut() {
        h.check(HoldCheckAt::BeforeReplies);
    }
    let model = match &plan.model {
        Some(m) => m.clone(),
        None => client
            .first_model()
            .await
            .unwrap_or_else(|| "default".to_string()),
    };
    manifest.model = Some(model.clone());
    // The box and the serve are sampled beside the replies, on the same thread: a few /proc
    // reads every 250 ms, so the gate stays near idle.
    let tree = serve.as_ref().map(|p| ServeTree {
        root: p.pid(),
        subreaper: Some(p.supervisor_pid()),
    });
    let sampler = progress.sampler.insert(Sampler::start(
        tree,
        base_ns,
        &plan.criteria,
        &plan.device,
        plan.device_memory.as_ref(),
    ));
    progress.metrics = plan.metrics.as_ref().map(|m| MetricsRecord {
        url: m.url.clone(),
        given: m.given,
        scrapes: Vec::new(),
    });
    let replying = Replying {
        plan,
        client,
        model: &model,
        base_ns,
        rec,
    };
    let made = Made {
        replies: &mut progress.replies,
        metrics: &mut progress.metrics,
        reanchors: &mut progress.reanchors,
    };
    let replies = make_all_replies(&replying, serve, manifest, made);
    let sampling = async {
        let mut every = tokio::time::interval(Duration::from_millis(conditions::INTERVAL_MS));
        every.tick().await;
        loop {
            every.tick().await;
            sampler.sample();
        }
    };
    let died = tokio::select! {
        died = replies => died,
        never = sampling => never,
    };
    // Before the serve is stopped: what its processes map and hold once the replies are over.
    sampler.replies_done();
    if let Some(h) = progress.hold.as_mut() {
        h.check(HoldCheckAt::AfterReplies);
    }
    manifest.serve_died = died?;
    Ok(())
}

/// Launch the serve (or attach to the running one) and wait until it is ready: how it came
/// up, or did not.
async fn start_serve(
    plan: &Plan,
    client: &Client,
    rec: &Recorder,
    manifest: &mut RunManifest,
    serve: &mut Option<ServeProcess>,
    progress: &mut Progress,
) -> Result<Startup> {
    let startup = match &plan.launch {
        Launch::Spawn { argv, port, .. } => {
            if !serve::port_is_free(*port) {
                Startup::SpawnFailed {
                    error: format!(
                        "port {port} is already taken by another process; the gate would measure that process, not the serve"
                    ),
                }
            } else {
                let log = progress
                    .serve_log
                    .as_ref()
                    .and_then(LogPipe::serve_end)
                    .context("the serve's log pipe was not made before the launch")?;
                let spawned = ServeProcess::spawn(argv, log, progress.hold.as_mut());
                // The supervisor has its own copy: the pipe ends when the serve's tree is gone.
                if let Some(pipe) = progress.serve_log.as_mut() {
                    pipe.close_serve_end();
                }
                match spawned {
                    Ok(p) => {
                        crate::say!("started the serve (pid {})", p.pid());
                        manifest.serve_pid = Some(p.pid());
                        rec.json(rundir::MANIFEST, manifest);
                        let p = serve.insert(p);
                        wait_ready(
                            client,
                            &plan.url,
                            plan.ready_path.as_deref(),
                            Some(p),
                            plan.ready_timeout,
                        )
                        .await
                    }
                    Err(e) => Startup::SpawnFailed {
                        error: format!("{}: {e}", argv[0]),
                    },
                }
            }
        }
        Launch::Attach { .. } => {
            wait_ready(
                client,
                &plan.url,
                plan.ready_path.as_deref(),
                None,
                plan.ready_timeout,
            )
            .await
        }
    };
    Ok(startup)
}

/// What the replies are made with.
struct Replying<'a> {
    plan: &'a Plan,
    client: &'a Client,
    model: &'a str,
    base_ns: u64,
    rec: &'a Recorder,
}

/// What the replies add to the run as they are made.
struct Made<'a> {
    replies: &'a mut Vec<ReplyRecord>,
    metrics: &'a mut Option<MetricsRecord>,
    reanchors: &'a mut Vec<ReanchorRecord>,
}

/// Make the run's replies in order: the single-stream ones, the soak, the bursts, then the
/// re-anchors past divergences from the reference, each after the last only while the serve
/// lives. How the serve died, if it did.
async fn make_all_replies(
    r: &Replying<'_>,
    serve: &mut Option<ServeProcess>,
    manifest: &mut RunManifest,
    made: Made<'_>,
) -> Result<Option<String>> {
    let Replying {
        plan,
        client,
        model,
        base_ns,
        rec,
    } = *r;
    let mut died = make_replies(plan, client, model, base_ns, rec, serve, made.replies).await?;
    if let (Some(duration), None) = (plan.soak, &died) {
        let soak = Soak {
            plan,
            client,
            model,
            base_ns,
            rec,
            duration,
        };
        let (ended, serve_died) = soak.run(serve, made.replies).await?;
        died = serve_died;
        // Said in run.json, so an archive tells a soak that ran its time from one cut short.
        if let Some(record) = manifest.soak.as_mut() {
            record.replies = Some(made.replies.len());
            record.ended = Some(ended.to_string());
        }
        rec.json(rundir::MANIFEST, &*manifest);
    }
    if let Some(bursts) = plan.concurrency.as_ref().filter(|_| died.is_none()) {
        let work = BurstWork {
            client,
            plan: bursts,
            prompts: &plan.prompts,
            model,
            max_tokens: plan.max_tokens,
            extra_body: plan.request_fields.as_ref(),
            stall: plan.reply_timeout,
            limit: plan.reply_limit,
            metrics: plan.metrics.as_ref().map(|m| &m.client),
            device_memory: plan.device_memory.as_ref(),
        };
        died = make_bursts(&work, base_ns, rec, serve, made.replies, made.metrics).await?;
    }
    if let (Some(wait), None) = (plan.idle_probe, &died) {
        died = idle_probe(r, wait, serve, made.replies).await?;
    }
    // After every timed reply: the re-anchors are judged by the reference line alone.
    if let (None, Some(Ok(reference))) = (&died, plan.reference.as_ref().map(|r| &r.archive)) {
        let work = ReanchorWork {
            client,
            model,
            manifest,
            reference,
            prompts: &plan.prompts,
            max_tokens: plan.max_tokens,
            fields: plan.continue_fields.as_ref(),
            most: plan
                .criteria
                .floors()
                .reference_reanchor
                .unwrap_or(reference::DEFAULT_REANCHOR),
            tie: plan
                .criteria
                .floors()
                .reference_tie
                .unwrap_or(reference::DEFAULT_TIE),
            stall: plan.reply_timeout,
            limit: plan.reply_limit,
        };
        *made.reanchors = reanchor(&work, base_ns, made.replies, rec).await;
    }
    // Last of all: the prompts at depth, and the probe past the context that may end the serve.
    if let (Some(mut context), None) = (manifest.context.clone(), &died) {
        let cache_off = depth::read_context(client, &mut context).await;
        manifest.context = Some(context.clone());
        rec.json(rundir::MANIFEST, &*manifest);
        let work = DepthWork {
            plan,
            client,
            model,
            base_ns,
            rec,
        };
        died = depth::make_depth_replies(&work, &context, cache_off, serve, made.replies).await?;
    }
    Ok(died)
}

/// `--idle-probe`: wait `wait` with the serve idle (the sampler goes on looking), then make one
/// more reply, flagged as the probe: the idle line judges its first token, nothing else times
/// it. How the serve died, if it did.
async fn idle_probe(
    r: &Replying<'_>,
    wait: Duration,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
) -> Result<Option<String>> {
    crate::say!(
        "idle probe: waiting {} with the serve idle",
        humantime::format_duration(wait)
    );
    tokio::time::sleep(wait).await;
    let i = replies.len().saturating_sub(r.plan.warmup);
    let (mut reply, m) = one_reply(r.plan, r.client, r.model, r.base_ns, i, false).await;
    reply.idle_probe = true;
    crate::say!("idle probe: {}", figures_said(&reply, &m));
    keep_reply(reply, r.rec, serve, replies, r.plan.device_memory.as_ref()).await
}

fn record_load(rec: &Recorder) -> Option<LoadSnapshot> {
    let load = conditions::load_snapshot("before-serve");
    if let Some(l) = &load {
        rec.json(rundir::LOAD, l);
    }
    load
}

/// Poll GET /health (falling back to /v1/models where /health is 404), or the profile's
/// `ready_path` alone, until it answers 200,
/// the serve exits, or `timeout` runs out. A serve loading its model may answer 503 with its
/// socket already open; that is not ready. Polls are 100 ms apart: the gate stays near idle
/// while the serve, which may need every core, loads.
async fn wait_ready(
    client: &Client,
    url: &str,
    ready_path: Option<&str>,
    mut serve: Option<&mut ServeProcess>,
    timeout: Duration,
) -> Startup {
    let start = Instant::now();
    // A probe the profile names is the only one asked; the default falls back once.
    let mut path = ready_path.unwrap_or("/health").to_string();
    let mut may_fall_back = ready_path.is_none();
    let mut not_ready_answers = 0;
    // Why the last probe got no HTTP answer, for a serve that never gave one.
    let mut unreachable = None;
    let mut next_word = Duration::from_secs(10);
    crate::say!(
        "waiting for the serve to be ready (GET {path}, up to {} s)",
        timeout.as_secs_f64()
    );
    loop {
        if start.elapsed() >= next_word {
            crate::say!(
                "still waiting for the serve after {} s ({not_ready_answers} not-ready answers)",
                next_word.as_secs()
            );
            next_word += Duration::from_secs(10);
        }
        if let Some(p) = serve.as_deref_mut() {
            if let Some(status) = p.exited() {
                return Startup::Exited {
                    status: status.to_string(),
                };
            }
        }
        match client.probe(&path).await {
            Probe::Status(200) => {
                return Startup::Ready {
                    after_ms: start.elapsed().as_secs_f64() * 1e3,
                    probe: path,
                    not_ready_answers,
                }
            }
            Probe::Status(404) if may_fall_back => {
                path = client.models_path();
                may_fall_back = false;
                continue;
            }
            Probe::Status(_) => not_ready_answers += 1,
            Probe::Unreachable(why) => unreachable = Some(why),
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            return Startup::NotReady {
                timeout_s: timeout.as_secs_f64(),
                url: Some(url.to_string()),
                not_ready_answers: Some(not_ready_answers),
                last_probe: (not_ready_answers == 0).then_some(unreachable).flatten(),
            };
        }
        tokio::time::sleep((timeout - elapsed).min(Duration::from_millis(100))).await;
    }
}
