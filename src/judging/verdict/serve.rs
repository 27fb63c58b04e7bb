//! The serve's own lines: whether it came up and stayed up (`serve`), and how it stopped
//! (`stop`). A hold not acquired is judged in [`super::judge`].

use super::evidence::Evidence;
use crate::archive::check::Check;
use crate::archive::record::{
    HoldCheckAt, HoldFound, HoldRecord, Line, Startup, Status, StopRecord, SupervisorFault,
    UnaskedWhen,
};

use super::route::log_tail;

/// An info line when the serve had to be killed: a serve that ignores SIGTERM holds the
/// device past its stop, and the reader should know.
pub(crate) fn stop_line(stop: Option<(&StopRecord, f64)>) -> Option<Line> {
    let (s, grace_s) = stop?;
    if s.supervisor_lost.is_some() {
        // The gate killed the tree itself, without a grace: the serve line says so; only
        // what even that could not stop is said here.
        return left_running(s).map(|n| Line::new(Check::Stop, Status::Info, n));
    }
    let mut notes = Vec::new();
    let others = match s.group_killed {
        0 => String::new(),
        n => format!(" with {n} other process(es) of its group"),
    };
    if s.killed && s.cut_short {
        notes.push(format!(
            "the serve was killed (SIGKILL){others} at a second signal, before its grace ran out"
        ));
    } else if s.killed {
        notes.push(format!(
            "the serve did not exit within the {grace_s} s grace after SIGTERM and was killed (SIGKILL){others}"
        ));
    } else if s.group_killed > 0 && s.cut_short {
        notes.push(format!(
            "the serve exited, but {} other process(es) of its group were killed (SIGKILL) at a second signal",
            s.group_killed
        ));
    } else if s.group_killed > 0 {
        notes.push(format!(
            "the serve exited, but {} other process(es) of its group did not within the {grace_s} s grace after SIGTERM and were killed (SIGKILL)",
            s.group_killed
        ));
    }
    if s.escaped_killed > 0 {
        let mut note = format!(
            "{} process(es) had left the serve's process group and were killed after it stopped",
            s.escaped_killed
        );
        if s.cut_short && !s.killed && s.group_killed == 0 {
            note.push_str(" (SIGKILL at a second signal, before their grace ran out)");
        }
        notes.push(note);
    }
    if s.gate_killed > 0 {
        notes.push(format!(
            "{} process(es) of the serve were still running after its supervisor exited, and the gate killed them (SIGKILL)",
            s.gate_killed
        ));
    }
    notes.extend(left_running(s));
    if notes.is_empty() {
        return None;
    }
    Some(Line::new(Check::Stop, Status::Info, notes.join("; ")))
}

fn left_running(s: &StopRecord) -> Option<String> {
    (s.left_running > 0).then(|| format!(
        "{} process(es) of the serve were still running 5 s after SIGKILL (stuck in the kernel?); the gate could not stop them",
        s.left_running
    ))
}

/// What became of the gate's supervisor, when it did not stop the serve as asked: always a
/// failure of the run, since the serve's tree was then out of the supervisor's hands (a serve
/// runs as the gate's user and can signal the supervisor; issue 30).
fn supervisor_lost(s: &StopRecord) -> Option<String> {
    let lost = s.supervisor_lost.as_ref()?;
    let what = match (lost.what, &lost.status) {
        (SupervisorFault::Died, Some(status)) => format!("died ({status})"),
        (SupervisorFault::Died, None) => "died".to_string(),
        (SupervisorFault::Stopped, _) => "was stopped (SIGSTOP)".to_string(),
        (SupervisorFault::Silent, _) => "did not report the stop in time".to_string(),
    };
    let when = if lost.before_stop {
        "before the gate asked it to stop the serve"
    } else {
        "while it stopped the serve"
    };
    let killed = match s.gate_killed {
        0 => "; nothing of the serve's tree was left for the gate to kill".to_string(),
        n => format!("; the gate killed {n} process(es) of the serve's tree itself (SIGKILL)"),
    };
    Some(format!(
        "the gate's supervisor of the serve {what} {when}{killed}"
    ))
}

/// The `hold` line when the hold was pulled away while the gate had it: the hold file removed
/// or replaced, so a second gate could take "the same" hold and share the device. A FAIL:
/// the run did not have the device to itself, whatever its replies say.
pub(crate) fn hold_line(hold: Option<&HoldRecord>) -> Option<Line> {
    let hold = hold?;
    let check = hold.checks.iter().find(|c| !c.held())?;
    let what = match check.found {
        HoldFound::LockedFile => return None,
        HoldFound::Nothing => "was removed",
        HoldFound::AnotherFile => "was replaced by another file",
        HoldFound::Unreachable => "could not be looked at",
    };
    let when = match check.at {
        HoldCheckAt::BeforeReplies => "before the replies",
        HoldCheckAt::AfterReplies => "by the end of the replies",
        HoldCheckAt::Release => "by the time the serve's tree was gone",
    };
    Some(Line::new(
        Check::Hold,
        Status::Fail,
        format!(
            "the hold file {} {what} {when}: the lock no longer kept another gate off the device, which this run may have shared",
            hold.file
        ),
    ))
}

/// The serve's line: FAIL when it did not come up (with the end of its log), or when, once up,
/// it ended without the gate asking: a serve that exits or crashes right after its last reply
/// is not a release, whatever its replies said. A death during the replies is the content
/// line's (it names the reply).
pub(crate) fn serve_line(e: &Evidence<'_>) -> Option<Line> {
    let Some(lost) = e.stop.and_then(|(s, _)| supervisor_lost(s)) else {
        return startup_or_end_line(e);
    };
    // The supervisor's loss leads: the serve's own end then may be its doing (PDEATHSIG).
    let text = match startup_or_end_line(e) {
        Some(l) if l.status == Status::Fail => format!("{lost}; {}", l.text),
        _ => lost,
    };
    Some(Line::new(Check::Serve, Status::Fail, text))
}

fn startup_or_end_line(e: &Evidence<'_>) -> Option<Line> {
    let tail = || log_tail(e.serve_log);
    let text = match e.startup {
        Startup::Ready { .. } => return unasked_end_line(e),
        Startup::Exited { status } => {
            format!("the serve exited ({status}) before it was ready{}", tail())
        }
        Startup::NotReady {
            timeout_s,
            url,
            not_ready_answers,
            last_probe,
        } => {
            let polled = match url.as_deref() {
                Some(u) => {
                    let u = u.trim_end_matches('/');
                    format!("neither {u}/health nor {u}/v1/models answered 200")
                }
                None => "neither /health nor /v1/models answered 200".to_string(),
            };
            let answers = match not_ready_answers {
                Some(0) => match last_probe {
                    Some(why) => format!("; it gave no HTTP answer: {why}"),
                    None => "; it gave no HTTP answer".to_string(),
                },
                Some(1) => "; it gave 1 not-ready answer".to_string(),
                Some(n) => format!("; it gave {n} not-ready answers"),
                None => String::new(),
            };
            format!(
                "the serve was not ready after {timeout_s} s ({polled}{answers}){}{}",
                warming_up(e.serve_log),
                tail()
            )
        }
        Startup::SpawnFailed { error } => format!("the serve could not be started: {error}"),
        Startup::Interrupted => {
            return Some(Line::new(
                Check::Serve,
                Status::Info,
                "interrupted before the serve was ready",
            ))
        }
    };
    Some(Line::new(Check::Serve, Status::Fail, text))
}

/// What to do about a serve not ready in time: where its log shows a warm-up (graph compiling
/// or capture, [`crate::judging::serve_log::WARMUP`]), that line, and the flag that gives it
/// longer. Said for every serve, since one that compiles before it serves (vLLM: 136 s cold on a
/// 2-core box, issue 51) looks like one that hangs until its log is read.
fn warming_up(log: Option<&crate::judging::serve_log::LogScan>) -> String {
    const RAISE: &str = "raise --ready-timeout (ready_timeout in a profile)";
    match log.and_then(|l| l.warmup_line.as_deref()) {
        Some(line) => format!(
            "; it was still warming up, its log's last warm-up line {}: {RAISE} to cover its warm-up",
            crate::judging::verdict::content::quote(line, 200)
        ),
        None => format!("; if it was still starting, {RAISE}"),
    }
}

/// A serve that was ready and ended without the gate asking: how, and when.
fn unasked_end_line(e: &Evidence<'_>) -> Option<Line> {
    if e.serve_died.is_some() {
        return None;
    }
    let stop = e.stop?.0;
    let end = stop.unasked_end.as_ref()?;
    if stop.supervisor_lost.is_some() {
        // Not "by itself": the supervisor's death kills the serve (PDEATHSIG).
        return Some(Line::new(
            Check::Serve,
            Status::Fail,
            format!("the serve had ended ({}) before the stop", end.status),
        ));
    }
    let text = match end.when {
        UnaskedWhen::BeforeStop { seen_ns } => {
            let last_end = e.replies.iter().map(|r| r.end_ns).max();
            let when = match last_end {
                Some(last) if seen_ns >= last => format!(
                    "found gone {:.1} s after its last reply ended",
                    (seen_ns - last) as f64 / 1e9
                ),
                _ => format!(
                    "found gone {:.1} s into the run",
                    seen_ns as f64 / 1e9
                ),
            };
            format!(
                "the serve ended by itself ({}) before the gate stopped it: {when}",
                end.status
            )
        }
        UnaskedWhen::WhileStopping => format!(
            "the serve died ({}) while the gate stopped it, of a signal the gate does not send: a crash, not a clean stop",
            end.status
        ),
    };
    Some(Line::new(Check::Serve, Status::Fail, text))
}
