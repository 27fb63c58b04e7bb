//! The serve's log after the replies: serve.log finished once the serve's tree is gone (what
//! the pipe kept, and what it dropped of a flood), and the log read for the verdict (the
//! launched serve's serve.log, or the attached serve's `--serve-log` copied into the run) on a
//! thread of its own, while signals are still heard.

use anyhow::{Context, Result};

use crate::archive::record::{RunManifest, ServeLogKept};
use crate::archive::rundir;
use crate::judging::serve_log::LogScan;
use crate::live::log_pipe::{self, Copied, LogPipe};
use crate::live::plan::{Launch, Plan};
use crate::live::recorder::Recorder;
use crate::live::signals::Interrupts;

/// Finish serve.log once the serve's tree is gone, and record what it kept: the counts in
/// run.json, a line when the middle of a flood was dropped, and a failed write as a file not
/// archived.
pub(crate) async fn finish_serve_log(
    pipe: LogPipe,
    rec: &Recorder,
    manifest: &mut RunManifest,
) -> Copied {
    let copied = tokio::task::spawn_blocking(move || pipe.finish())
        .await
        .unwrap_or_else(|_| Copied::failed());
    manifest.serve_log_kept = Some(ServeLogKept {
        bytes: copied.seen,
        dropped: copied.dropped,
    });
    if copied.dropped > 0 {
        crate::say!(
            "the serve wrote {} MiB of output; serve.log keeps its first {} MiB and its last {} MiB, with a marker where the {} MiB between were dropped",
            copied.seen >> 20,
            log_pipe::HEAD_BYTES >> 20,
            (copied.seen - log_pipe::HEAD_BYTES - copied.dropped) >> 20,
            copied.dropped >> 20
        );
    }
    if let Some(error) = &copied.error {
        rec.not_archived(rundir::SERVE_LOG, error.clone());
    }
    copied
}

/// A serve log at least this large is announced before it is read.
const LARGE_LOG_BYTES: u64 = 16 << 20;

/// Read the serve's log for the verdict, after the serve is gone: the launched serve's
/// serve.log, or the attached serve's `--serve-log`, copied into the run first. Both are read
/// as streams on a thread of their own (a log can be a gigabyte), while signals are still
/// heard: one that comes meanwhile is the run's interruption, and the log is left unread.
/// `None` when the run has no log to judge the route by.
pub(crate) async fn read_serve_log(
    plan: &Plan,
    rec: &Recorder,
    copied: Option<&Copied>,
    interrupted: &mut Option<nix::sys::signal::Signal>,
    interrupts: &mut Interrupts,
) -> Option<LogScan> {
    // The launched serve's log is read through the descriptor the gate wrote it with.
    let copy_from = match &plan.launch {
        Launch::Attach { serve_log: None } => return None,
        Launch::Attach {
            serve_log: Some(path),
        } => path.clone(),
        Launch::Spawn { .. } => {
            let copied = copied?;
            let reader = match copied.reader() {
                Ok(r) => r,
                Err(e) => return Some(LogScan::unread(format!("{e:#}"))),
            };
            let kept = copied.seen - copied.dropped;
            return scan_serve_log(plan, reader, kept, "serve.log", interrupted, interrupts).await;
        }
    };
    let unread = "the run was interrupted before the serve log was read";
    if interrupted.is_some() {
        return Some(LogScan::unread(unread));
    }
    let archived = rec.path().join(rundir::SERVE_LOG);
    // The attached serve's log is copied into the run by the writer, and read from the copy,
    // as `judge` will read it; a copy that failed is not the verdict's concern: the log is
    // read where it is.
    rec.copy_serve_log(&copy_from);
    let copied = tokio::select! {
        failed = rec.flush() => !failed.iter().any(|f| f.file == rundir::SERVE_LOG),
        sig = interrupts.recv() => {
            crate::say!("{sig}: stopping");
            *interrupted = Some(sig);
            return Some(LogScan::unread(unread));
        }
    };
    let path = if copied { archived } else { copy_from };
    let file = match crate::archive::safe_open::open_read(&path) {
        Ok(f) => f,
        Err(e) => return Some(LogScan::unread(format!("{e:#}"))),
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    // Never past what a copy keeps: a log that grows while it is read is not followed.
    let reader = std::io::Read::take(file, log_pipe::readable_bytes());
    let name = path.display().to_string();
    scan_serve_log(plan, reader, size, &name, interrupted, interrupts).await
}

/// Scan the serve's log for the verdict on a thread of its own, while signals are still heard:
/// one that comes meanwhile is the run's interruption, and the log is left unread. `size`
/// bytes (a large log is announced first: reading it takes a while).
async fn scan_serve_log(
    plan: &Plan,
    reader: impl std::io::Read + Send + 'static,
    size: u64,
    name: &str,
    interrupted: &mut Option<nix::sys::signal::Signal>,
    interrupts: &mut Interrupts,
) -> Option<LogScan> {
    let unread = "the run was interrupted before the serve log was read";
    if interrupted.is_some() {
        return Some(LogScan::unread(unread));
    }
    if size >= LARGE_LOG_BYTES {
        // Reading takes a while at this size: say what the gate is doing.
        crate::say!("reading the serve log ({} MiB)", size >> 20);
    }
    let criteria = plan.criteria.clone();
    let name = name.to_string();
    let read = tokio::task::spawn_blocking(move || -> Result<Option<LogScan>> {
        let scan = criteria
            .scan_log(reader)
            .with_context(|| format!("failed to read {name}"))?;
        Ok(Some(scan))
    });
    tokio::select! {
        r = read => match r {
            Ok(Ok(scan)) => scan,
            Ok(Err(e)) => Some(LogScan::unread(format!("{e:#}"))),
            Err(e) => Some(LogScan::unread(format!("the serve log's reader failed: {e}"))),
        },
        sig = interrupts.recv() => {
            crate::say!("{sig}: stopping");
            *interrupted = Some(sig);
            Some(LogScan::unread(unread))
        }
    }
}
