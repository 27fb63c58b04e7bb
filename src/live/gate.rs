//! `run`: the live gate. Checks what was asked ([`crate::live::plan`]), launches (or attaches
//! to) the serve, waits for it to be ready and streams the replies
//! ([`crate::live::measure_serve`]), stops the serve, and judges what was recorded.
//!
//! Everything measured goes into the run directory as it happens; the verdict is computed from
//! the same [`Archive`] shape `judge` reads back.

use crate::archive::record::{InterruptSignal, LogSource};
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use futures_util::FutureExt;
use nix::sys::signal::Signal;

use crate::archive::digest::Integrity;
use crate::archive::record::{
    ClockInfo, Limits, LogprobsAsked, NotArchived, ReplyRecord, RouteRecord, RunManifest,
    SoakRecord, Startup, StopRecord, UnaskedEnd, UnaskedWhen, SCHEMA,
};
use crate::archive::rundir::{self, Archive, ResultFile, RunDir};
use crate::args::run::RunArgs;
use crate::judging::archived::{judge_with_log, walk_noise};
use crate::judging::serve_log::LogScan;
use crate::judging::verdict::route_matches;
use crate::live::log_pipe::LogPipe;
use crate::live::measure_serve::{measure_serve, Progress};
use crate::live::plan::{Launch, Plan};
use crate::live::recorder::Recorder;
use crate::live::serve::ServeProcess;
use crate::live::serve_log_read::{finish_serve_log, read_serve_log};
use crate::live::signals::Interrupts;
use crate::report::RunInfo;
use crate::report::{html, timeline};
use crate::{clock, exit_codes};

/// The name of a default run directory, e.g. 20261129T201104Z, under runs/.
fn default_out_name() -> String {
    utc_now()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect()
}

fn utc_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Run the gate; the exit code for its result.
pub fn run(args: RunArgs) -> Result<u8> {
    let plan = Plan::new(args)?;
    crate::live::supervise::not_reachable_through_proc();
    // One thread: the gate must stay near idle beside a serve that needs the CPU.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let code = rt.block_on(execute(plan));
    // A serve log still being read after a signal must not hold the exit: the run is recorded.
    rt.shutdown_background();
    code
}

async fn execute(plan: Plan) -> Result<u8> {
    // Registered first, so a signal in any phase is a recorded interruption, not a lost run.
    let mut interrupts = Interrupts::register()?;
    let base_ns = clock::now_ns();
    let dir = match &plan.out {
        Some(out) => RunDir::create(out)?,
        None => RunDir::create_new_under(Path::new(rundir::DEFAULT_PARENT), &default_out_name())?,
    };
    crate::say!("run directory {}", dir.path().display());
    let mut manifest = new_manifest(&plan, base_ns);
    // Before run.json is first written, so a run killed later still says what it ran on.
    manifest.provenance = Some(crate::live::provenance::gather(&manifest, plan.max_tokens));
    // The first write of run.json and the serve's log file are made here, before anything is
    // held or started: a run directory that cannot take them is exit 2 with nothing started.
    dir.write_json(rundir::MANIFEST, &manifest)?;
    let serve_log_pipe = match &plan.launch {
        Launch::Spawn { .. } => Some(LogPipe::start(dir.open_serve_log()?)?),
        Launch::Attach { .. } => None,
    };
    let dir_path = dir.path().to_path_buf();
    // From here on every write of the run goes through the writer thread: nothing blocks on
    // the disk where the serve's sockets are read, and a write that fails is said at the end,
    // never a lost run.
    let rec = Recorder::start(dir)?;
    let client = &plan.client;

    // The serve, the hold and what was recorded live out here, so that an interruption, which
    // drops the work wherever it is, loses none of them.
    let mut serve = None;
    let mut progress = Progress {
        serve_log: serve_log_pipe,
        ..Progress::default()
    };
    let work = measure_serve(
        &plan,
        client,
        &rec,
        base_ns,
        &mut manifest,
        &mut serve,
        &mut progress,
    );
    let (recorded, mut interrupted) = tokio::select! {
        r = work => (r, None),
        sig = interrupts.recv() => (Ok(()), Some(sig)),
    };
    if let Some(sig) = interrupted {
        crate::say!("{sig}: stopping (a second signal kills the serve at once)");
    }
    if let Some(p) = serve.as_mut() {
        manifest.stop =
            Some(stop_serve(p, plan.grace, base_ns, &mut interrupts, &mut interrupted).await);
    }
    if let Some(hold) = progress.hold.take() {
        let checks = hold.release();
        if let Some(h) = manifest.hold.as_mut() {
            h.released_ns = Some(clock::now_ns());
            h.checks = checks;
        }
    }
    // Once the serve's tree is gone: what the pipe still holds goes into serve.log.
    let copied = match progress.serve_log.take() {
        Some(pipe) => Some(finish_serve_log(pipe, &rec, &mut manifest).await),
        None => None,
    };
    let route = finish_sampler(&plan, &rec, &mut progress);
    recorded?;
    if interrupted.is_none() {
        interrupted = interrupts.recv().now_or_never();
    }
    let serve_log = read_serve_log(
        &plan,
        &rec,
        copied.as_ref(),
        &mut interrupted,
        &mut interrupts,
    )
    .await;
    if manifest.startup.is_none() && interrupted.is_some() {
        manifest.startup = Some(Startup::Interrupted);
    }
    manifest.logprobs = logprobs_said(&plan, &progress.replies);
    manifest.interrupted = interrupted.map(InterruptSignal);
    manifest.ended_utc = Some(utc_now());
    if let Some((cpu, rss)) = own_usage() {
        manifest.gate_cpu_s = Some(cpu);
        manifest.gate_max_rss_kib = Some(rss);
    }
    manifest.not_archived = rec.flush().await;
    rec.json(rundir::MANIFEST, &manifest);
    let archive = Archive {
        manifest,
        replies: progress.replies,
        serve_log: None,
        load: progress.load,
        load_problem: None,
        replies_problem: None,
        route,
        route_problem: None,
        metrics: progress.metrics,
        metrics_problem: None,
        reanchors: progress.reanchors,
        reanchors_problem: None,
        not_archived: Vec::new(),
        integrity: Integrity::Intact,
    };
    Ok(judge_and_archive(&plan, &archive, serve_log.as_ref(), rec, &dir_path).await)
}

/// Once the replies are done: the route sampler's record, matched against the criteria and
/// written, and the load it saw during the replies added to load.json.
fn finish_sampler(plan: &Plan, rec: &Recorder, progress: &mut Progress) -> Option<RouteRecord> {
    let sampler = progress.sampler.take()?;
    let mut record = sampler.route();
    record.matched = route_matches(&record, &plan.criteria);
    rec.json(rundir::ROUTE, &record);
    let during = sampler.finish();
    if let Some(load) = progress.load.as_mut() {
        load.during = Some(during);
        rec.json(rundir::LOAD, load);
    }
    Some(record)
}

/// What the run asked of logprobs and what came back, said once a run from every reply's
/// tally, and kept in run.json for `judge`.
fn logprobs_said(plan: &Plan, replies: &[ReplyRecord]) -> Option<LogprobsAsked> {
    let asked = plan.client.logprobs_asked()?;
    let with_text = replies
        .iter()
        .filter(|r| r.chunks.iter().any(|c| c.has_text()))
        .count();
    for line in asked.said(with_text) {
        crate::say!("{line}");
    }
    Some(asked)
}

/// run.json as it is first written: what the plan says the run will do, nothing done yet.
fn new_manifest(plan: &Plan, base_ns: u64) -> RunManifest {
    RunManifest {
        schema: SCHEMA,
        tool_version: crate::build_info::VERSION.to_string(),
        tool_commit: Some(crate::build_info::COMMIT.to_string()),
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
            reply_limit_s: plan.reply_limit.map(|d| d.as_secs_f64()),
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
        serve_log_kept: None,
        serve_log_source: match &plan.launch {
            Launch::Spawn { .. } => LogSource::Captured,
            Launch::Attach { serve_log: None } => LogSource::None,
            Launch::Attach { serve_log: Some(p) } => LogSource::CopiedFrom(p.display().to_string()),
        },
        startup: None,
        stop: None,
        interrupted: None,
        hold: None,
        serve_died: None,
        extra_body: plan.extra_body.clone(),
        sampling_sent: Some(plan.sampling),
        gate_cpu_s: None,
        gate_max_rss_kib: None,
        settings: Some(plan.settings.clone()),
        provenance: None,
        concurrency: plan.concurrency.clone(),
        soak: plan.soak.map(|d| SoakRecord {
            seconds: d.as_secs_f64(),
            replies: None,
            ended: None,
        }),
        device_freq: plan.device.freq.as_ref().map(|p| p.display().to_string()),
        device_temp: plan.device.temp.as_ref().map(|p| p.display().to_string()),
        warmup: plan.warmup,
        not_archived: Vec::new(),
        digests: None,
        logprobs: plan.client.logprobs_asked(),
        context: plan.context.clone(),
    }
}

/// Stop the serve: gracefully within `grace`, or at once on a second signal (a first one
/// while stopping is the run's interruption). The stop record, with how the serve ended if
/// it did so without the gate.
async fn stop_serve(
    p: &mut ServeProcess,
    grace: Duration,
    base_ns: u64,
    interrupts: &mut Interrupts,
    interrupted: &mut Option<Signal>,
) -> StopRecord {
    // Before the stop is asked: a serve that ended by itself (exited, or crashed right
    // after its last reply) did so without the gate.
    let ended_before = p.exited().map(|status| UnaskedEnd {
        status: status.to_string(),
        when: UnaskedWhen::BeforeStop {
            seen_ns: clock::now_ns().saturating_sub(base_ns),
        },
    });
    let graceful = {
        let stop = p.stop(grace);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                r = &mut stop => break Some(r),
                sig = interrupts.recv() => {
                    if interrupted.is_none() {
                        // The first signal while stopping: the stop is what it asks for.
                        crate::say!("{sig}: stopping (a second signal kills the serve at once)");
                        *interrupted = Some(sig);
                    } else {
                        crate::say!("{sig} again: killing the serve now");
                        break None;
                    }
                }
            }
        }
    };
    let mut record = match graceful {
        Some(r) => r,
        None => p.kill_now().await,
    };
    record.unasked_end = ended_before.or_else(|| crashed_while_stopping(p));
    record
}

/// Judge the run from what the gate holds in memory, write timeline.svg, result.json and
/// report.html, seal the archive and report: the exit code for the verdict.
async fn judge_and_archive(
    plan: &Plan,
    archive: &Archive,
    serve_log: Option<&LogScan>,
    rec: Recorder,
    dir_path: &Path,
) -> u8 {
    // The verdict stands on what the gate holds in memory, whatever the disk took of it. The
    // known-good builds, checked before the run, are read again: one changed since is said.
    let noise = walk_noise(
        &plan.noise,
        archive,
        plan.reference.as_ref(),
        &plan.criteria,
    );
    let verdict = judge_with_log(
        archive,
        &plan.criteria,
        serve_log,
        plan.baseline.as_ref(),
        plan.reference.as_ref(),
        &noise,
    );
    // From here on nothing changes the verdict or the exit code: result.json says it.
    let title = format!("{} (RESULT: {})", dir_path.display(), verdict.outcome);
    let context = timeline::TimelineContext::of_run(plan.criteria.floors(), archive.load.as_ref());
    // The picture is for people: failing to draw it never changes the verdict.
    let svg = match timeline::svg(&archive.replies, &context, &title) {
        Ok(svg) => {
            rec.file(rundir::TIMELINE, svg.clone().into_bytes());
            Some(svg)
        }
        Err(e) => {
            crate::say!("no timeline.svg: {e:#}");
            None
        }
    };
    let mut result = ResultFile::new(verdict);
    result.not_archived = rec.flush().await;
    // The page before result.json, so result.json can say if the page could not be written;
    // both before the seal, so run.json's digests hold them.
    let mut files = html::run::archived_files(archive);
    files.extend(svg.is_some().then(|| rundir::TIMELINE.to_string()));
    let files: Vec<html::run::RunFile> = files
        .iter()
        .map(|f| html::run::RunFile::linked(f))
        .collect();
    let page = html::run::render(&html::run::RunPage {
        title: &dir_path.display().to_string(),
        judged_by: "run, as it ran",
        result: &result,
        archive,
        timeline: svg.as_deref(),
        files: &files,
        files_href: Ok(""),
    });
    rec.file(rundir::REPORT, page.into_bytes());
    result.not_archived = rec.flush().await;
    rec.json(rundir::RESULT, &result);
    // What result.json can say: a file lost after it (the sealed run.json) is not in it.
    let in_result: Vec<String> = result.not_archived.iter().map(|f| f.file.clone()).collect();
    let sealed = rec.finish_sealed();
    result.not_archived = sealed.not_archived;
    let title = dir_path.display().to_string();
    plan.output.emit(
        &result,
        &archive.replies,
        &RunInfo::of_archive(archive, &title),
    );
    say_not_archived(
        &result,
        &in_result,
        dir_path,
        archive.replies.len(),
        sealed.manifest_sha256.as_deref(),
    );
    exit_codes::for_outcome(&result.verdict.outcome)
}

/// After the verdict: where the run is archived, or what the run directory lacks, a line for
/// each file it failed to write and why. The verdict printed stands either way: it was judged
/// from what the gate held in memory. The sealed run.json's sha256 is said with it: run.json
/// holds the digest of every other file, but not its own, so the CI log keeps that one.
/// `in_result`: the files result.json names as not archived, written before the seal.
fn say_not_archived(
    result: &ResultFile,
    in_result: &[String],
    dir: &Path,
    replies: usize,
    sealed: Option<&str>,
) {
    if result.not_archived.is_empty() {
        match sealed {
            Some(sha) => crate::say!("archived in {} (run.json sha256 {sha})", dir.display()),
            None => crate::say!("archived in {}", dir.display()),
        }
        return;
    }
    for missing in &result.not_archived {
        if missing.file == rundir::REPLIES {
            crate::say!(
                "not archived: {missing}; the verdict above stands on the {replies} {} held in memory",
                if replies == 1 { "reply" } else { "replies" }
            );
        } else {
            crate::say!("not archived: {missing}");
        }
    }
    crate::say!(
        "the archive in {} is incomplete ({}); the verdict above is the run's",
        dir.display(),
        what_result_says(&result.not_archived, in_result)
    );
}

/// Whether result.json names what was not archived: not when it is itself lost; and a file
/// lost after it was written (the sealed run.json) is one it cannot name.
fn what_result_says(lost: &[NotArchived], in_result: &[String]) -> String {
    if lost.iter().any(|f| f.file == rundir::RESULT) {
        return "result.json could not say so".to_string();
    }
    let mut after: Vec<&str> = lost
        .iter()
        .map(|f| f.file.as_str())
        .filter(|f| !in_result.iter().any(|said| said == f))
        .collect();
    after.dedup();
    if after.is_empty() {
        "result.json says so".to_string()
    } else {
        format!(
            "result.json says so but for {}, lost after it was written",
            after.join(", ")
        )
    }
}

/// The serve's end when it died of a signal the gate never sends while the gate stopped it
/// (SIGSEGV, SIGABRT, ...): the gate sends SIGTERM, then SIGKILL, and nothing else.
fn crashed_while_stopping(p: &mut ServeProcess) -> Option<UnaskedEnd> {
    use std::os::unix::process::ExitStatusExt;
    let status = p.exited()?;
    let sig = status.signal()?;
    let gates = [
        nix::sys::signal::Signal::SIGTERM as i32,
        nix::sys::signal::Signal::SIGKILL as i32,
    ];
    (!gates.contains(&sig)).then(|| UnaskedEnd {
        status: status.to_string(),
        when: UnaskedWhen::WhileStopping,
    })
}

/// CPU seconds (user + system) this process has used, and its peak resident set (KiB).
///
/// The peak is VmHWM from /proc/self/status, not getrusage's ru_maxrss: ru_maxrss is inherited
/// across fork and kept across exec, so a gate started by a large parent (a Python CI
/// script holding its results) would report the parent's peak as its own.
fn own_usage() -> Option<(f64, u64)> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(u.max_rss().max(0) as u64);
    Some((secs(u.user_time()) + secs(u.system_time()), peak))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(files: &[&str]) -> Vec<NotArchived> {
        files
            .iter()
            .map(|f| NotArchived {
                file: f.to_string(),
                error: "No space left on device (os error 28)".to_string(),
                from_reply: None,
                replies_archived: None,
                replies_made: None,
            })
            .collect()
    }

    /// The last line after a cut archive says what result.json names: all of it, all but a
    /// file lost after it was written (the sealed run.json, issue 54: a busier run's bigger
    /// files moved the cut there), or nothing when it is lost itself.
    #[test]
    fn the_line_says_which_losses_result_json_names() {
        let named = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let both = ["timeline.svg", "report.html"];
        assert_eq!(
            what_result_says(&lost(&both), &named(&both)),
            "result.json says so"
        );
        assert_eq!(
            what_result_says(
                &lost(&["timeline.svg", "report.html", "run.json"]),
                &named(&both)
            ),
            "result.json says so but for run.json, lost after it was written"
        );
        assert_eq!(
            what_result_says(
                &lost(&["report.html", "result.json", "run.json"]),
                &named(&["report.html"])
            ),
            "result.json could not say so"
        );
    }
}
