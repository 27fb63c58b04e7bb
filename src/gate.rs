//! `run`: the live gate. Checks what was asked, launches (or attaches to) the serve, waits for
//! it to be ready, streams the replies, stops the serve, and judges what was recorded.
//!
//! Everything measured goes into the run directory as it happens; the verdict is computed from
//! the same [`Archive`] shape `judge` reads back.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use crate::cli::RunArgs;
use crate::client::{Client, Probe, ReplyRequest};
use crate::prompts::{self, Prompt};
use crate::record::{BinaryInfo, ClockInfo, Limits, ReplyRecord, RunManifest, Startup, SCHEMA};
use crate::rundir::{self, Archive, ResultFile, RunDir};
use crate::serve::{self, ServeProcess};
use crate::signals::Interrupts;
use crate::verdict::{Criteria, Floors};
use crate::{clock, conditions, exit_codes, measure};

/// How the gate reaches the serve.
#[derive(Debug)]
enum Launch {
    /// Start this command; it serves at `url`.
    Spawn {
        argv: Vec<String>,
        binary: BinaryInfo,
    },
    /// A serve already running at `url`; its log, if given, is copied into the run.
    Attach { serve_log: Option<PathBuf> },
}

/// A run, checked and ready to go: every argument error is found before anything starts.
#[derive(Debug)]
struct Plan {
    out: PathBuf,
    criteria: Criteria,
    prompts: Vec<Prompt>,
    replies: usize,
    max_tokens: u32,
    model: Option<String>,
    url: String,
    launch: Launch,
    ready_timeout: Duration,
    grace: Duration,
    reply_timeout: Duration,
}

impl Plan {
    fn new(args: RunArgs) -> Result<Plan> {
        let criteria = Criteria::new(Floors {
            floor: args.floor,
            first_token_ms: args.first_token_ms,
            fast_route: args.fast_route,
            slow_route: args.slow_route,
        })?;
        let prompts = match &args.prompts {
            Some(path) => prompts::load(path)?,
            None => prompts::built_in(),
        };
        let mut serve_argv = args.serve;
        if args.stand_in {
            let me = std::env::current_exe()
                .context("failed to find this program's own path for --stand-in")?;
            let mut argv = vec![
                me.display().to_string(),
                "stand-in".to_string(),
                "--port".to_string(),
                serve::PORT_PLACEHOLDER.to_string(),
            ];
            argv.append(&mut serve_argv);
            serve_argv = argv;
        }
        let (url, launch) = if serve_argv.is_empty() {
            let Some(url) = args.url else {
                bail!("nothing to gate: give a serve command after --, --stand-in, or --url URL");
            };
            (
                url,
                Launch::Attach {
                    serve_log: args.serve_log,
                },
            )
        } else {
            if args.serve_log.is_some() {
                bail!("--serve-log is for a serve that is already running; a launched serve's log is captured");
            }
            let port = match &args.url {
                Some(url) => reqwest::Url::parse(url)
                    .with_context(|| format!("--url {url} is not a URL"))?
                    .port_or_known_default()
                    .with_context(|| format!("--url {url} has no port"))?,
                None => serve::pick_port()?,
            };
            let url = args
                .url
                .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
            let argv = serve::fill_port(&serve_argv, port);
            let path = serve::resolve_binary(&argv[0])?;
            let binary = serve::fingerprint(&path)?;
            (url, Launch::Spawn { argv, binary })
        };
        reqwest::Url::parse(&url).with_context(|| format!("--url {url} is not a URL"))?;
        let out = args.out.unwrap_or_else(default_out);
        Ok(Plan {
            out,
            criteria,
            prompts,
            replies: args.replies as usize,
            max_tokens: args.max_tokens,
            model: args.model,
            url,
            launch,
            ready_timeout: args.ready_timeout,
            grace: args.grace,
            reply_timeout: args.reply_timeout,
        })
    }
}

/// runs/<UTC time>, e.g. runs/20261129T201104Z.
fn default_out() -> PathBuf {
    let stamp: String = utc_now()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    PathBuf::from("runs").join(stamp)
}

fn utc_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Run the gate; the exit code for its result.
pub fn run(args: RunArgs) -> Result<u8> {
    let plan = Plan::new(args)?;
    // One thread: the gate must stay near idle beside a serve that needs the CPU, and the serve
    // is spawned from this long-lived thread, which PDEATHSIG is tied to.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    rt.block_on(execute(plan))
}

async fn execute(plan: Plan) -> Result<u8> {
    // Registered first, so a signal in any phase is a recorded interruption, not a lost run.
    let mut interrupts = Interrupts::register()?;
    let base_ns = clock::now_ns();
    let dir = RunDir::create(&plan.out)?;
    eprintln!("npu-serve-smoke: run directory {}", dir.path().display());
    let mut manifest = RunManifest {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        argv: std::env::args().collect(),
        serve_argv: match &plan.launch {
            Launch::Spawn { argv, .. } => Some(argv.clone()),
            Launch::Attach { .. } => None,
        },
        serve_binary: match &plan.launch {
            Launch::Spawn { binary, .. } => Some(binary.clone()),
            Launch::Attach { .. } => None,
        },
        serve_pid: None,
        url: plan.url.clone(),
        model: None,
        prompts: plan.prompts.clone(),
        replies_planned: plan.replies,
        floors: plan.criteria.floors().clone(),
        limits: Limits {
            ready_timeout_s: plan.ready_timeout.as_secs_f64(),
            grace_s: plan.grace.as_secs_f64(),
            reply_timeout_s: plan.reply_timeout.as_secs_f64(),
        },
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_utc: utc_now(),
        ended_utc: None,
        clock: ClockInfo {
            name: "CLOCK_MONOTONIC".to_string(),
            base_ns,
        },
        serve_log_source: match &plan.launch {
            Launch::Spawn { .. } => "captured".to_string(),
            Launch::Attach { serve_log: None } => "none".to_string(),
            Launch::Attach { serve_log: Some(p) } => format!("copied from {}", p.display()),
        },
        startup: None,
        stop: None,
        interrupted: None,
    };
    dir.write_json(rundir::MANIFEST, &manifest)?;
    let load = conditions::load_snapshot("before-serve");
    if let Some(l) = &load {
        dir.write_json(rundir::LOAD, l)?;
    }
    let client = Client::new(&plan.url)?;

    // The serve and what was recorded live out here, so that an interruption, which drops the
    // work wherever it is, loses neither.
    let mut serve = None;
    let mut progress = Progress::default();
    let work = measure_serve(&plan, &client, &dir, base_ns, &mut serve, &mut progress);
    let (recorded, interrupted) = tokio::select! {
        r = work => (r, None),
        sig = interrupts.recv() => (Ok(()), Some(sig)),
    };
    if let Some(sig) = interrupted {
        eprintln!("npu-serve-smoke: {sig}: stopping the serve (a second signal kills it at once)");
    }
    manifest.serve_pid = serve.as_ref().map(ServeProcess::pid);
    if let Some(p) = serve.as_mut() {
        let record = tokio::select! {
            r = p.stop(plan.grace) => r,
            sig = interrupts.recv() => {
                eprintln!("npu-serve-smoke: {sig} again: killing the serve now");
                p.kill_now().await
            }
        };
        manifest.stop = Some(record);
    }
    recorded?;
    let Progress {
        startup,
        model,
        replies,
    } = progress;
    manifest.startup = Some(match (startup, interrupted) {
        (Some(s), _) => s,
        (None, Some(_)) => Startup::Interrupted,
        (None, None) => bail!("internal error: the run ended with no startup recorded"),
    });
    manifest.model = model;
    manifest.interrupted = interrupted.map(|s| s.to_string());

    let serve_log = match &plan.launch {
        Launch::Spawn { .. } => Some(read_lossy(&dir.path().join(rundir::SERVE_LOG))?),
        Launch::Attach { serve_log: None } => None,
        Launch::Attach {
            serve_log: Some(path),
        } => {
            let text = read_lossy(path)?;
            rundir::write_atomic(&dir.path().join(rundir::SERVE_LOG), text.as_bytes())?;
            Some(text)
        }
    };
    manifest.ended_utc = Some(utc_now());
    dir.write_json(rundir::MANIFEST, &manifest)?;
    let archive = Archive {
        manifest,
        replies,
        serve_log,
        load,
        load_problem: None,
    };
    let verdict = archive.judge(&plan.criteria);
    dir.write_json(rundir::RESULT, &ResultFile::new(verdict.clone()))?;
    print!("{verdict}");
    eprintln!("npu-serve-smoke: archived in {}", dir.path().display());
    Ok(exit_codes::for_outcome(&verdict.outcome))
}

/// What the measuring phase has recorded so far.
#[derive(Debug, Default)]
struct Progress {
    startup: Option<Startup>,
    model: Option<String>,
    replies: Vec<ReplyRecord>,
}

/// Launch (or attach), wait until ready, and make the replies. Everything it learns goes into
/// `serve` and `progress` as it happens.
async fn measure_serve(
    plan: &Plan,
    client: &Client,
    dir: &RunDir,
    base_ns: u64,
    serve: &mut Option<ServeProcess>,
    progress: &mut Progress,
) -> Result<()> {
    let startup = match &plan.launch {
        Launch::Spawn { argv, .. } => {
            let log = dir.open_serve_log()?;
            match ServeProcess::spawn(argv, &log) {
                Ok(p) => {
                    eprintln!("npu-serve-smoke: started the serve (pid {})", p.pid());
                    let p = serve.insert(p);
                    wait_ready(client, Some(p), plan.ready_timeout).await
                }
                Err(e) => Startup::SpawnFailed {
                    error: format!("{}: {e}", argv[0]),
                },
            }
        }
        Launch::Attach { .. } => wait_ready(client, None, plan.ready_timeout).await,
    };
    let ready = startup.is_ready();
    if let Startup::Ready { after_ms, probe } = &startup {
        eprintln!("npu-serve-smoke: the serve is ready after {after_ms:.0} ms (GET {probe})");
    }
    progress.startup = Some(startup);
    if !ready {
        return Ok(());
    }
    let model = match &plan.model {
        Some(m) => m.clone(),
        None => client
            .first_model()
            .await
            .unwrap_or_else(|| "default".to_string()),
    };
    progress.model = Some(model.clone());
    make_replies(
        plan,
        client,
        &model,
        base_ns,
        dir,
        serve,
        &mut progress.replies,
    )
    .await
}

fn read_lossy(path: &std::path::Path) -> Result<String> {
    let bytes =
        std::fs::read(path).with_context(|| format!("failed to read {}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Poll GET /health (falling back to /v1/models where /health is 404) until it answers 200,
/// the serve exits, or `timeout` runs out. A serve loading its model may answer 503 with its
/// socket already open; that is not ready. Polls are 100 ms apart: the gate stays near idle
/// while the serve, which may need every core, loads.
async fn wait_ready(
    client: &Client,
    mut serve: Option<&mut ServeProcess>,
    timeout: Duration,
) -> Startup {
    let start = Instant::now();
    let mut path = "/health";
    loop {
        if let Some(p) = serve.as_deref_mut() {
            if let Some(status) = p.exited() {
                return Startup::Exited {
                    status: status.to_string(),
                };
            }
        }
        match client.probe(path).await {
            Probe::Status(200) => {
                return Startup::Ready {
                    after_ms: start.elapsed().as_secs_f64() * 1e3,
                    probe: path.to_string(),
                }
            }
            Probe::Status(404) if path == "/health" => {
                path = "/v1/models";
                continue;
            }
            _ => {}
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            return Startup::NotReady {
                timeout_s: timeout.as_secs_f64(),
            };
        }
        tokio::time::sleep((timeout - elapsed).min(Duration::from_millis(100))).await;
    }
}

/// Stream the planned replies one at a time, rewriting replies.jsonl after each. Stops early
/// when the serve has died: replies are not sent to a dead serve.
async fn make_replies(
    plan: &Plan,
    client: &Client,
    model: &str,
    base_ns: u64,
    dir: &RunDir,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
) -> Result<()> {
    for i in 0..plan.replies {
        let prompt = &plan.prompts[i % plan.prompts.len()];
        let req = ReplyRequest {
            index: i + 1,
            prompt: &prompt.prompt,
            expect: prompt.expect.as_deref(),
            model,
            max_tokens: prompt.max_tokens.unwrap_or(plan.max_tokens),
        };
        let mut reply = client.stream_reply(&req, base_ns, plan.reply_timeout).await;
        let m = measure::measure(&reply);
        let tokens = measure::chunk_tokens(&reply, &m);
        for (c, t) in reply.chunks.iter_mut().zip(tokens) {
            c.tokens = t;
        }
        eprintln!("npu-serve-smoke: {}", progress(&reply, &m, plan.replies));
        reply.metrics = Some(m);
        let failed = reply.error.is_some();
        replies.push(reply);
        dir.write_replies(replies)?;
        if failed {
            if let Some(status) = serve.as_mut().and_then(|p| p.exited()) {
                eprintln!("npu-serve-smoke: the serve exited ({status}); no more replies sent");
                break;
            }
        }
    }
    Ok(())
}

fn progress(r: &ReplyRecord, m: &measure::ReplyMetrics, of: usize) -> String {
    let first = m.first_token_ms.map_or("no first token".to_string(), |f| {
        format!("first token {f:.0} ms")
    });
    let rate = m
        .rate_tok_s
        .map_or("no rate".to_string(), |r| format!("{r:.1} tok/s"));
    let err = r
        .error
        .as_deref()
        .map_or(String::new(), |e| format!("; error: {e}"));
    format!(
        "reply {}/{of}: {} tokens, {first}, {rate}{err}",
        r.index, m.tokens
    )
}
