//! The verdict: a pure function from a recorded run and its floors to the lines a user reads.
//!
//! No I/O here. `run` calls [`judge`] on what it just recorded; `judge DIR` calls it on what an
//! archive holds; both print the same lines for the same evidence and floors.
//!
//! Here [`judge`], which puts the lines together and decides RESULT. Each line family's rules
//! are in a file of its own: [`route`]; [`rate`] (rate and first-token); [`latency`] (the
//! peers' TTFT, ITL, TPOT and E2EL, information); [`goodput`] (`--slo`: the share of replies
//! that met a service level); [`content`]; [`conditions`] (the box's
//! conditions and the busy-box note); [`serve`] (serve and stop; a hold not acquired is judged
//! here); [`determinism`] (`--deterministic`: the same prompt's
//! answers against each other, and against the baseline's); [`reference`] (`--reference`: the
//! candidate's tokens against a trusted build's, with its logprobs; one answer compared in
//! [`reference_compare`], walked past its re-anchors in [`reference_walk`]); [`drift`];
//! [`metrics`] (the serve's own metrics over the bursts); [`footprint`] (issue 34: the serve's
//! memory and the device's in [`memory`], its readiness, cold and idle replies in
//! [`readiness`]); [`context`] (issue 35: the replies at depth and the context's limit); [`tools`] (issue 36:
//! tool calls and JSON answers against their prompts).
//!
//! What the families share is in leaves they and this file both import, never this file:
//! [`criteria`], [`evidence`], [`line`] (how a line is made and printed) and [`words`].
//!
//! Warm-up replies (`--warmup`) are left out once, at the top of [`judge`]: every line sees
//! only the judged replies. A warm-up that failed still fails content.

use std::borrow::Cow;

use crate::archive::record::{LoadSnapshot, ReplyRecord};
use crate::judging::drift::DEFAULT_MAX_DRIFT;
use crate::judging::measure::{measure, ReplyMetrics};

pub mod baseline;
pub mod bursts;
pub mod conditions;
pub mod content;
pub mod context;
pub mod criteria;
pub mod determinism;
pub mod drift;
pub mod evidence;
pub mod footprint;
pub mod latency;
pub mod line;
pub mod memory;
pub mod metrics;
pub mod output;
pub mod rate;
pub mod readiness;
pub mod reference;
pub mod reference_compare;
pub mod reference_noise;
pub mod reference_walk;
pub mod route;
pub mod serve;
pub mod tools;
pub mod words;

use conditions::{busy_note, Contention};
pub use conditions::{BUSY_LOAD_PER_CPU, BUSY_WAIT_FRACTION};
use content::content_line;
pub use content::{push_escape, push_visible, quote, reply_problem, visible};
pub use criteria::{BusySource, Criteria, MAX_SPEEDUP};
pub use evidence::{
    Baseline, BaselineEvidence, Evidence, NoiseBuild, ProcessEvidence, ReferenceEvidence,
};
use latency::latency_line;
use rate::{first_token_line, rate_line};
use route::route_line;
pub use route::route_matches;
use serve::{hold_line, serve_line, stop_line};

/// The floors as a run records them; the archive owns the type.
pub use crate::archive::record::{Check, Figures, Floors, Line, Outcome, Status, Verdict};

/// The replies a verdict judges: all but the warm-ups, the idle probe and the replies at
/// depth. A live run makes its warm-ups first and the others last, so the rest is a slice of
/// the same replies; an archive edited to interleave them is still judged right, by a copy.
fn judged_replies(replies: &[ReplyRecord]) -> Cow<'_, [ReplyRecord]> {
    let set_apart = ReplyRecord::set_apart;
    let leading = replies.iter().take_while(|r| r.warmup).count();
    let trailing = replies[leading..]
        .iter()
        .rev()
        .take_while(|r| r.idle_probe || r.depth.is_some())
        .count();
    let rest = &replies[leading..replies.len() - trailing];
    if rest.iter().any(set_apart) {
        Cow::Owned(rest.iter().filter(|r| !set_apart(r)).cloned().collect())
    } else {
        Cow::Borrowed(rest)
    }
}

/// What a failed warm-up reply adds to the content line: a serve whose warm-up errors is not
/// cold, it is broken. A slow warm-up is what warm-ups are for, and never fails. An idle probe
/// is held to content as every judged reply is: only its timing is the idle line's.
fn warmup_problems(replies: &[ReplyRecord]) -> Vec<String> {
    let warmups = replies.iter().filter(|r| r.warmup).filter_map(|r| {
        r.error
            .as_deref()
            .map(|e| format!("the warm-up reply {} failed: {e}", r.index))
    });
    let probes = replies.iter().filter(|r| r.idle_probe).filter_map(|r| {
        content::reply_problem(r).map(|p| format!("the idle probe (reply {}): {p}", r.index))
    });
    warmups.chain(probes).collect()
}

/// What the output line holds the answers' lengths to: the reference's, else the baseline's.
fn output_against<'a>(e: &Evidence<'a>) -> Option<output::Against<'a>> {
    let (kind, r) = match (e.reference, e.baseline) {
        (ReferenceEvidence::Recorded { reference: r, .. }, _) => ("reference", r),
        (_, BaselineEvidence::Recorded { baseline: r, .. }) => ("baseline", r),
        _ => return None,
    };
    Some(output::Against {
        kind,
        name: r.name,
        manifest: r.manifest,
        replies: r.replies,
    })
}

/// Judge a run. RESULT is PASS exactly when every line that is not info is ok (and nothing
/// interrupted the run).
pub fn judge(e: &Evidence<'_>, c: &Criteria) -> Verdict {
    let warmup_failed = warmup_problems(e.replies);
    let all = e.replies;
    let judged = judged_replies(e.replies);
    let e = &Evidence {
        replies: &judged,
        ..*e
    };
    let mut lines = Vec::new();
    if let Some(reason) = e.hold_not_acquired {
        // Nothing was launched: there is nothing to judge but the wait.
        lines.push(Line::new(Check::Hold, Status::Info, reason));
    } else {
        lines.extend(hold_line(e.hold));
        if let Some(line) = serve_line(e) {
            lines.push(line);
        }
        lines.push(route_line(
            e.serve_log,
            e.processes,
            c,
            e.interrupted.is_some(),
        ));
        if e.startup.is_ready() {
            lines.extend(reply_lines(e, c, &warmup_failed));
            lines.extend(footprint::footprint_lines(e, all, c));
            lines.extend(context::context_lines(e, all, c));
        }
        if let Some(line) = stop_line(e.stop) {
            lines.push(line);
        }
    }
    // Only a failure of timing alone can be put down to the box; route, content, streams run
    // one after another and a serve that did not come up are never excused.
    let timing = |l: &Line| l.check.is_timing();
    let timing_failed = lines.iter().any(|l| l.status == Status::Fail && timing(l));
    let timing_only = timing_failed && lines.iter().all(|l| l.status != Status::Fail || timing(l));
    let contention = e.load.and_then(Contention::of);
    if let Some(load) = e.load {
        lines.push(load_line(
            load,
            timing_only,
            &contention,
            c.floors().busy_skip,
        ));
    }
    let busy_skip = match (timing_only, &contention, c.floors().busy_skip) {
        // Only a box busy with others' work excuses: the serve's own processes never do.
        (true, Some(c), Some(threshold))
            if c.value() >= threshold && e.load.is_some_and(conditions::outsiders_took_it) =>
        {
            Some(c)
        }
        _ => None,
    };
    let outcome = outcome(e, &lines, busy_skip);
    Verdict { lines, outcome }
}

/// The lines of a run whose serve came up: its replies' timing, content and output, the
/// bursts, determinism, and the baseline and reference they are held to. A warm-up that failed
/// (`warmup_failed`) fails content.
fn reply_lines(e: &Evidence<'_>, c: &Criteria, warmup_failed: &[String]) -> Vec<Line> {
    let mut lines = Vec::new();
    let metrics: Vec<ReplyMetrics> = e.replies.iter().map(measure).collect();
    lines.push(rate_line(&metrics, c.floors().floor, e.replies));
    lines.push(first_token_line(
        &metrics,
        c.floors().first_token_ms,
        c.floors().first_token_of,
        e.replies,
    ));
    lines.push(latency_line(e.replies));
    let max_drift = c.floors().max_drift.unwrap_or(DEFAULT_MAX_DRIFT);
    lines.extend(drift::drift_lines(e.replies, max_drift));
    // Beside the drift: what the box's clocks and temperatures did meanwhile.
    if let Some(line) = e
        .load
        .and_then(|l| l.during.as_ref())
        .and_then(conditions::throttle_line)
    {
        lines.push(line);
    }
    let mut content = content_line(e.replies, e.replies_planned, e.serve_died);
    if !warmup_failed.is_empty() {
        content.text = format!("{}; {}", warmup_failed.join("; "), content.text);
        content.status = Status::Fail;
    }
    lines.push(content);
    lines.push(output::output_line(
        e.replies,
        e.manifest,
        output_against(e),
        &c.floors().output,
    ));
    lines.extend(tools::tools_line(e.replies, e.manifest));
    if let Some(plan) = e.concurrency {
        let figures = bursts::burst_figures(e.replies);
        lines.push(bursts::overlap_line(&figures, plan));
        lines.push(bursts::aggregate_line(
            &figures,
            e.replies,
            plan,
            c.floors().aggregate_floor,
            c.floors().min_speedup,
        ));
        if let Some(metrics) = e.serve_metrics {
            lines.push(metrics::serve_metrics_line(metrics, e.replies));
        }
    }
    if c.floors().deterministic {
        lines.push(determinism::determinism_line(e.replies));
    }
    lines.extend(baseline::baseline_lines(e, c));
    if c.floors().deterministic {
        let policy = c.floors().baseline_answers.unwrap_or_default();
        lines.extend(determinism::baseline_answers_line(e, policy));
    }
    lines.extend(reference::reference_line(
        e,
        e.reference,
        reference_rules(c),
    ));
    place_after(&mut lines, line_module_lines(e, c.floors()));
    lines
}

/// Each line module's line, with the check it follows (the registry's `after`), placed in the
/// registry's order just after the last line of that check (a module's own included), past
/// those already placed after the same check; at the end where there is no such line.
fn place_after(lines: &mut Vec<Line>, placed: Vec<(Check, Line)>) {
    // The check each line was placed after: none for the verdict's own.
    let mut anchors: Vec<Option<Check>> = vec![None; lines.len()];
    for (after, line) in placed {
        let mut at = lines
            .iter()
            .rposition(|l| l.check == after)
            .map_or(lines.len(), |i| i + 1);
        while anchors.get(at) == Some(&Some(after)) {
            at += 1;
        }
        lines.insert(at, line);
        anchors.insert(at, Some(after));
    }
}

/// The lines of the line modules ([`crate::lines`]), in the registry's order, each with the
/// check it follows: each judges the judged replies by its own recorded settings, and says
/// nothing where it was not asked for.
macro_rules! line_module_lines {
    ($($module:ident: $check:ident after $after:ident {
        floors: $key:ident $floors:ident, figures: $figures:ident, flags: $flags:ident
    };)*) => {
        fn line_module_lines(e: &Evidence<'_>, floors: &Floors) -> Vec<(Check, Line)> {
            let mut lines = Vec::new();
            $(lines.extend(
                crate::lines::$module::judge(e, &floors.lines.$key).map(|l| (Check::$after, l)),
            );)*
            lines
        }
    };
}
crate::lines::every_line!(line_module_lines);

/// The reference line's rules under `c`: its floors where set, the defaults where not.
pub fn reference_rules(c: &Criteria) -> reference::ReferenceRules {
    reference::ReferenceRules {
        tie: c.floors().reference_tie.unwrap_or(reference::DEFAULT_TIE),
        min_agreement: c.floors().min_agreement,
        max_drift: c.floors().max_logprob_drift,
        most: c
            .floors()
            .reference_reanchor
            .unwrap_or(reference::DEFAULT_REANCHOR),
        noise_factor: c
            .floors()
            .noise_factor
            .unwrap_or(reference_noise::DEFAULT_NOISE_FACTOR),
    }
}

/// The load line: the box's load before the run and what the serve waited for a CPU during it;
/// when a failure is of timing alone (`timing_only`) and the box was busy, the note that says
/// so.
fn load_line(
    load: &LoadSnapshot,
    timing_only: bool,
    contention: &Option<Contention>,
    busy_skip: Option<f64>,
) -> Line {
    let mut text = format!(
        "1-minute load average {:.1} on {} CPUs",
        load.load1, load.ncpu
    );
    if let Some(d) = &load.during {
        if let Some(w) = d.wait_fraction {
            text.push_str(&format!(
                "; during the replies the serve waited for a CPU {:.0}% of the time it was ready to run",
                w * 100.0
            ));
        } else if let Some(p) = d.cpu_some_avg10_max {
            text.push_str(&format!(
                "; during the replies CPU pressure (some, avg10) peaked at {p:.1}%"
            ));
        }
    }
    if let (true, Some(busy)) = (timing_only, &contention) {
        text.push_str(&busy_note(busy, load, busy_skip));
    }
    let during = load.during.as_ref();
    Line::new(Check::Load, Status::Info, text).with(Figures {
        load1: Some(load.load1),
        ncpu: Some(load.ncpu),
        serve_cpu_wait: during.and_then(|d| d.wait_fraction),
        cpu_pressure_pct: during.and_then(|d| d.cpu_some_avg10_max),
        ..Figures::default()
    })
}

/// RESULT: interrupted, a hold not acquired, a busy box that excuses a timing failure
/// (`busy_skip`), FAIL, INCONCLUSIVE, else PASS.
fn outcome(e: &Evidence<'_>, lines: &[Line], busy_skip: Option<&Contention>) -> Outcome {
    if let Some(signal) = e.interrupted {
        Outcome::Interrupted { signal }
    } else if let Some(reason) = e.hold_not_acquired {
        Outcome::Skip {
            reason: reason.to_string(),
            advice: None,
        }
    } else if let Some(c) = busy_skip {
        Outcome::Skip {
            reason: format!("busy box: {}", c.describe()),
            advice: Some("re-run on a quiet box".to_string()),
        }
    } else if lines.iter().any(|l| l.status == Status::Fail) {
        Outcome::Fail
    } else if let Some(l) = lines.iter().find(|l| l.status == Status::Inconclusive) {
        Outcome::Inconclusive {
            reason: format!("{} inconclusive", l.check),
        }
    } else {
        Outcome::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{
        HoldCheck, HoldCheckAt, HoldFound, HoldRecord, LoadSnapshot, Startup, StopRecord,
        SupervisorFault, SupervisorLost, UnaskedEnd, UnaskedWhen,
    };
    use crate::judging::measure::tests::reply_at;
    use crate::judging::serve_log::LogScan;

    /// A line module's line goes just after the last line of the check it follows; two after
    /// the same check keep the registry's order; one can follow another's; one whose check is
    /// not there goes last.
    #[test]
    fn a_line_modules_line_goes_after_the_check_it_follows() {
        let line = |check| Line::new(check, Status::Ok, "");
        let mut lines = vec![
            line(Check::Rate),
            line(Check::Latency),
            line(Check::Drift),
            line(Check::Content),
        ];
        place_after(
            &mut lines,
            vec![
                (Check::Latency, line(Check::Goodput)),
                (Check::Latency, line(Check::Tools)),
                (Check::Reference, line(Check::Idle)),
                (Check::Content, line(Check::Output)),
                (Check::Goodput, line(Check::Memory)),
                (Check::Reference, line(Check::Stop)),
            ],
        );
        let checks: Vec<Check> = lines.iter().map(|l| l.check).collect();
        assert_eq!(
            checks,
            [
                Check::Rate,
                Check::Latency,
                Check::Goodput,
                Check::Memory,
                Check::Tools,
                Check::Drift,
                Check::Content,
                Check::Output,
                Check::Idle,
                Check::Stop,
            ]
        );
    }

    static READY: Startup = Startup::Ready {
        after_ms: 1.0,
        probe: String::new(),
        not_ready_answers: 0,
    };

    fn floors() -> Floors {
        Floors {
            floor: 60.0,
            first_token_ms: 600.0,
            fast_route: Some("route: npu-fast".into()),
            slow_route: Some("route: cpu-fallback".into()),
            busy_skip: None,
            ..Floors::default()
        }
    }

    fn criteria(f: Floors) -> Criteria {
        Criteria::new(f).unwrap()
    }

    /// The test floors with no route patterns: a serve line or a hold line judged alone.
    fn without_route_patterns() -> Criteria {
        criteria(Floors {
            fast_route: None,
            slow_route: None,
            ..floors()
        })
    }

    const LOAD: LoadSnapshot = LoadSnapshot {
        load1: 3.1,
        load5: 2.0,
        load15: 1.0,
        ncpu: 32,
        taken: String::new(),
        during: None,
    };

    /// Replies at 100 tok/s with first token at 200 ms: 11 tokens, 10 ms apart after the first.
    fn good() -> ReplyRecord {
        let times: Vec<u64> = (0..11).map(|i| 200 + 10 * i).collect();
        reply_at(&times, None)
    }

    fn judge_with(replies: &[ReplyRecord], log: Option<&str>, f: Floors) -> Verdict {
        let c = criteria(f);
        let log = log.map(|l| c.scan_log_text(l));
        let e = Evidence {
            serve_log: log.as_ref(),
            load: Some(&LOAD),
            ..Evidence::of(replies, &READY)
        };
        judge(&e, &c)
    }

    /// `log` as the verdict sees it, scanned with the usual floors' patterns.
    fn scanned(log: &str) -> LogScan {
        criteria(floors()).scan_log_text(log)
    }

    fn line<'a>(v: &'a Verdict, check: &str) -> &'a Line {
        v.lines
            .iter()
            .find(|l| l.check == check)
            .unwrap_or_else(|| panic!("no {check} line in {v}"))
    }

    const LOG: &str = "loading\nroute: npu-fast\nready\n";

    /// Held back, a reply reaches the gate bunched in a few reads or in one: with no rate in
    /// any reply, the rate line names every one and why (a reply in one read was once left
    /// unnamed when another was bunched).
    #[test]
    fn with_no_rate_anywhere_bunched_and_single_read_replies_are_each_named() {
        // 20 text events: one at 1 ms, the other 19 within 1 ms at the end of 1000 ms.
        let mut times = vec![1];
        times.extend((0..19).map(|i| 999 + i / 19));
        let bunched = crate::judging::measure::tests::reply_at(&times, None);
        let mut one_read = crate::judging::measure::tests::reply_at(&[500; 20], None);
        one_read.index = 2;
        let v = judge_with(&[bunched, one_read], Some(LOG), floors());
        let rate = line(&v, "rate");
        assert_eq!(rate.status, Status::Fail, "{}", rate.text);
        assert!(
            rate.text
                .contains("no rate for reply 2: its text did not arrive in at least two reads")
                && rate.text.contains("no rate for reply 1: 9")
                && rate.text.contains("held back and sent at once"),
            "{}",
            rate.text
        );
    }

    #[test]
    fn the_outcome_word_is_result_jsons() {
        for o in [
            Outcome::Pass,
            Outcome::Fail,
            Outcome::Skip {
                reason: "r".into(),
                advice: None,
            },
            Outcome::Interrupted {
                signal: "SIGTERM".into(),
            },
        ] {
            assert_eq!(serde_json::to_value(&o).unwrap()["result"], o.word());
        }
    }

    /// A serve that ended without the gate asking (issue 30): the serve line FAILs saying how
    /// and when, a busy box never excuses it, and a death during the replies is said once, by
    /// the content line.
    #[test]
    fn a_serve_that_ended_without_the_gate_fails_the_serve_line_saying_how_and_when() {
        let replies = [good()];
        let last_end = replies[0].end_ns;
        let segv = "signal: 11 (SIGSEGV) (core dumped)";
        let stop = |when| StopRecord {
            unasked_end: Some(UnaskedEnd {
                status: segv.to_string(),
                when,
            }),
            ..StopRecord::default()
        };
        let busy = LoadSnapshot {
            load1: 50.0,
            ncpu: 2,
            ..LOAD
        };
        let judged = |s: &StopRecord, died: Option<&str>| {
            let e = Evidence {
                stop: Some((s, 10.0)),
                serve_died: died,
                load: Some(&busy),
                ..Evidence::of(&replies, &READY)
            };
            let lenient = Floors {
                fast_route: None,
                slow_route: None,
                busy_skip: Some(0.0),
                ..floors()
            };
            judge(&e, &criteria(lenient))
        };
        let before = stop(UnaskedWhen::BeforeStop {
            seen_ns: last_end + 400_000_000,
        });
        let v = judged(&before, None);
        assert_eq!(v.outcome, Outcome::Fail, "{v}");
        let serve = line(&v, "serve");
        assert_eq!(serve.status, Status::Fail);
        assert_eq!(
            serve.text,
            format!("the serve ended by itself ({segv}) before the gate stopped it: found gone 0.4 s after its last reply ended")
        );
        // Only the serve line fails: the replies themselves were fine.
        assert_eq!(
            v.lines.iter().filter(|l| l.status == Status::Fail).count(),
            1,
            "{v}"
        );
        // Seen before the last reply's end (a hand-made record; the clock never gives it): said
        // as a time into the run, never a negative wait.
        assert!(last_end > 100_000_000);
        let early = stop(UnaskedWhen::BeforeStop {
            seen_ns: 100_000_000,
        });
        let text = line(&judged(&early, None), "serve").text.clone();
        assert!(text.ends_with("found gone 0.1 s into the run"), "{text}");
        let v = judged(&stop(UnaskedWhen::WhileStopping), None);
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(
            line(&v, "serve").text,
            format!("the serve died ({segv}) while the gate stopped it, of a signal the gate does not send: a crash, not a clean stop")
        );
        // Died during the replies: the content line names the reply; no second line.
        let v = judged(
            &before,
            Some("the serve exited (signal: 11) during reply 1"),
        );
        assert!(v.lines.iter().all(|l| l.check != "serve"), "{v}");
        // Stopped by the gate: no serve line, and the run passes.
        let v = judged(&StopRecord::default(), None);
        assert!(v.lines.iter().all(|l| l.check != "serve"), "{v}");
        assert_eq!(v.outcome, Outcome::Pass, "{v}");
    }

    /// The gate's supervisor lost (issue 30: a serve can SIGKILL or SIGSTOP it): the serve line
    /// FAILs saying what became of it and what the gate killed itself, whatever the replies; the
    /// stop line does not claim a grace the gate never gave.
    #[test]
    fn a_supervisor_that_died_or_was_stopped_fails_the_serve_line_saying_what_the_gate_did() {
        let replies = [good()];
        let judged = |s: &StopRecord| {
            let e = Evidence {
                stop: Some((s, 10.0)),
                load: Some(&LOAD),
                ..Evidence::of(&replies, &READY)
            };
            judge(&e, &without_route_patterns())
        };
        let died = StopRecord {
            killed: true,
            exit_status: Some("signal: 9 (SIGKILL)".into()),
            gate_killed: 2,
            supervisor_lost: Some(SupervisorLost {
                what: SupervisorFault::Died,
                before_stop: true,
                status: Some("signal: 9 (SIGKILL)".into()),
            }),
            ..StopRecord::default()
        };
        let v = judged(&died);
        assert_eq!(v.outcome, Outcome::Fail, "{v}");
        assert_eq!(
            line(&v, "serve").text,
            "the gate's supervisor of the serve died (signal: 9 (SIGKILL)) before the gate asked it to stop the serve; the gate killed 2 process(es) of the serve's tree itself (SIGKILL)"
        );
        assert!(
            v.lines.iter().all(|l| l.check != "stop"),
            "no grace was given, none is said: {v}"
        );
        let stopped = StopRecord {
            gate_killed: 0,
            supervisor_lost: Some(SupervisorLost {
                what: SupervisorFault::Stopped,
                before_stop: false,
                status: None,
            }),
            unasked_end: Some(UnaskedEnd {
                status: "signal: 9 (SIGKILL)".into(),
                when: UnaskedWhen::BeforeStop { seen_ns: 1 },
            }),
            ..StopRecord::default()
        };
        let v = judged(&stopped);
        assert_eq!(v.outcome, Outcome::Fail, "{v}");
        assert_eq!(
            line(&v, "serve").text,
            "the gate's supervisor of the serve was stopped (SIGSTOP) while it stopped the serve; nothing of the serve's tree was left for the gate to kill; the serve had ended (signal: 9 (SIGKILL)) before the stop"
        );
        let silent = StopRecord {
            left_running: 1,
            gate_killed: 1,
            supervisor_lost: Some(SupervisorLost {
                what: SupervisorFault::Silent,
                before_stop: false,
                status: None,
            }),
            ..StopRecord::default()
        };
        let v = judged(&silent);
        assert!(line(&v, "serve")
            .text
            .starts_with("the gate's supervisor of the serve did not report the stop in time while it stopped the serve"));
        assert_eq!(
            line(&v, "stop").text,
            "1 process(es) of the serve were still running 5 s after SIGKILL (stuck in the kernel?); the gate could not stop them"
        );
        // Leftovers the gate killed after a supervisor that stopped the serve as asked: said,
        // not failed.
        let swept = StopRecord {
            gate_killed: 1,
            ..StopRecord::default()
        };
        let v = judged(&swept);
        assert_eq!(v.outcome, Outcome::Pass, "{v}");
        assert_eq!(
            line(&v, "stop").text,
            "1 process(es) of the serve were still running after its supervisor exited, and the gate killed them (SIGKILL)"
        );
        // A run.json from before the field reads as a supervisor that did its job.
        let old: StopRecord =
            serde_json::from_str(r#"{"killed": false, "exit_status": "exit status: 0"}"#).unwrap();
        assert_eq!(old.supervisor_lost, None);
        assert_eq!(old.gate_killed, 0);
    }

    /// A hold pulled away while the gate had it (issue 30: the hold file removed or replaced, so
    /// a second gate could take "the same" hold) is a FAIL of the run, first of its lines.
    #[test]
    fn a_hold_file_removed_or_replaced_is_a_hold_fail_line() {
        let replies = [good()];
        let record = |checks: Vec<HoldCheck>| HoldRecord {
            file: "/run/npu.hold".into(),
            acquired: true,
            waited_ms: 0.0,
            waited_for: None,
            timeout_s: 600.0,
            acquired_ns: Some(1),
            released_ns: Some(2),
            checks,
        };
        let judged = |h: &HoldRecord| {
            let e = Evidence {
                hold: Some(h),
                load: Some(&LOAD),
                ..Evidence::of(&replies, &READY)
            };
            judge(&e, &without_route_patterns())
        };
        let check = |at, found| HoldCheck { at, found };
        let kept = record(vec![
            check(HoldCheckAt::BeforeReplies, HoldFound::LockedFile),
            check(HoldCheckAt::AfterReplies, HoldFound::LockedFile),
            check(HoldCheckAt::Release, HoldFound::LockedFile),
        ]);
        let v = judged(&kept);
        assert_eq!(v.outcome, Outcome::Pass, "{v}");
        assert!(v.lines.iter().all(|l| l.check != "hold"), "{v}");
        for (at, found, says) in [
            (
                HoldCheckAt::BeforeReplies,
                HoldFound::Nothing,
                "was removed before the replies",
            ),
            (
                HoldCheckAt::AfterReplies,
                HoldFound::AnotherFile,
                "was replaced by another file by the end of the replies",
            ),
            (
                HoldCheckAt::Release,
                HoldFound::Unreachable,
                "could not be looked at by the time the serve's tree was gone",
            ),
        ] {
            let mut checks = kept.checks.clone();
            checks.retain(|c| c.at != at);
            checks.push(check(at, found));
            let v = judged(&record(checks));
            assert_eq!(v.outcome, Outcome::Fail, "{v}");
            let first = &v.lines[0];
            assert_eq!((first.check.name(), first.status), ("hold", Status::Fail));
            assert_eq!(
                first.text,
                format!("the hold file /run/npu.hold {says}: the lock no longer kept another gate off the device, which this run may have shared")
            );
        }
        // Older runs recorded no checks: nothing to judge.
        let v = judged(&record(Vec::new()));
        assert_eq!(v.outcome, Outcome::Pass, "{v}");
    }

    #[test]
    fn busy_skip_is_a_share_and_twenty_is_refused_saying_so() {
        for bad in [20.0, 1.01, -0.1, f64::NAN] {
            let e = Criteria::new(Floors {
                busy_skip: Some(bad),
                ..floors()
            })
            .unwrap_err();
            assert!(e.to_string().contains("0.2 means 20%"), "{bad}: {e}");
        }
        for good in [0.0, 0.2, 1.0] {
            assert!(Criteria::new(Floors {
                busy_skip: Some(good),
                ..floors()
            })
            .is_ok());
        }
    }

    /// A cold first reply: first token at 2 s, then 10 tok/s.
    fn cold() -> ReplyRecord {
        let times: Vec<u64> = (0..11).map(|i| 2000 + 100 * i).collect();
        reply_at(&times, None)
    }

    fn numbered(mut replies: Vec<ReplyRecord>) -> Vec<ReplyRecord> {
        for (i, r) in replies.iter_mut().enumerate() {
            r.index = i + 1;
        }
        replies
    }

    #[test]
    fn a_warm_up_reply_moves_no_judged_figure() {
        // Two good replies after a cold one: flagged a warm-up, the cold one is recorded and
        // not judged; unflagged, it pulls the medians and the latency figures.
        let mut flagged = numbered(vec![cold(), good(), good()]);
        flagged[0].warmup = true;
        let v = judge_with(&flagged, Some(LOG), floors());
        assert_eq!(
            line(&v, "rate").figures.as_ref().unwrap().values,
            Some(2),
            "{v}"
        );
        assert!(
            line(&v, "rate")
                .text
                .starts_with("median 100.0 tok/s over 2 replies"),
            "{v}"
        );
        assert!(
            line(&v, "first-token")
                .text
                .starts_with("median 200 ms over 2 replies"),
            "{v}"
        );
        let latency = line(&v, "latency").figures.clone().unwrap();
        assert_eq!(latency.ttft_ms.unwrap().p99, 200.0, "{v}");
        assert_eq!(latency.e2el_ms.unwrap().count, 2);
        assert_eq!(line(&v, "content").text, "2 replies, all with content");
        assert_eq!(v.outcome, Outcome::Pass);

        let unflagged = numbered(vec![cold(), good(), good()]);
        let v = judge_with(&unflagged, Some(LOG), floors());
        assert!(line(&v, "rate").text.contains("over 3 replies"), "{v}");
        assert!(
            line(&v, "rate").text.contains("each: 10.0, 100.0, 100.0"),
            "{v}"
        );
        let latency = line(&v, "latency").figures.clone().unwrap();
        assert!(latency.ttft_ms.unwrap().p99 > 1900.0, "{v}");
        // One slow of three moves the median no further than the middle one; the mean shows it.
        assert!(latency.tpot_ms.unwrap().mean > 30.0, "{v}");
    }

    #[test]
    fn warm_ups_out_of_order_are_left_out_all_the_same() {
        let mut replies = numbered(vec![good(), cold(), good()]);
        replies[1].warmup = true;
        let v = judge_with(&replies, Some(LOG), floors());
        assert!(line(&v, "rate").text.contains("each: 100.0, 100.0"), "{v}");
        let e = Evidence::of(&replies, &READY);
        assert_eq!(
            e.replies_planned, 2,
            "warm-ups are not planned judged replies"
        );
    }

    #[test]
    fn a_failed_warm_up_fails_content_and_a_slow_one_does_not() {
        let mut replies = numbered(vec![cold(), good(), good()]);
        replies[0].warmup = true;
        replies[0].error = Some("the serve answered 500".into());
        let v = judge_with(&replies, Some(LOG), floors());
        let content = line(&v, "content");
        assert_eq!(content.status, Status::Fail);
        assert_eq!(
            content.text,
            "the warm-up reply 1 failed: the serve answered 500; 2 replies, all with content"
        );
        assert_eq!(v.outcome, Outcome::Fail);
        // The failure is content's alone: the timing lines are of the judged replies.
        assert_eq!(line(&v, "rate").status, Status::Ok);
    }

    #[test]
    fn a_good_run_reads_as_the_card_shows() {
        let v = judge_with(&[good(), good(), good()], Some(LOG), floors());
        assert_eq!(
            v.to_string(),
            "\
route        ok    the serve log names the fast route, not the slow one
rate         ok    median 100.0 tok/s over 3 replies (floor 60.0; each: 100.0, 100.0, 100.0)
first-token  ok    median 200 ms over 3 replies (limit 600)
latency      info  TTFT p50 200 ms, p90 200, p99 200; ITL p50 10.0 ms, p90 10.0, p99 10.0; TPOT mean 10.0 ms, p50 10.0, p90 10.0, p99 10.0; E2EL p50 300 ms, p90 300, p99 300; over 3 replies
content      ok    3 replies, all with content
output       ok    3 replies judged: 0 loops, 0 stutters, 0 not text, 0 pairs of prompts answered alike; 100% stopped by themselves
load         info  1-minute load average 3.1 on 32 CPUs
RESULT: PASS
"
        );
    }

    #[test]
    fn rate_exactly_at_the_floor_is_ok_and_just_under_fails() {
        let at = Floors {
            floor: 100.0,
            ..floors()
        };
        assert_eq!(
            line(&judge_with(&[good()], Some(LOG), at), "rate").status,
            Status::Ok
        );
        let over = Floors {
            floor: 100.001,
            ..floors()
        };
        let v = judge_with(&[good()], Some(LOG), over);
        assert_eq!(line(&v, "rate").status, Status::Fail);
        assert_eq!(v.outcome, Outcome::Fail);
        // Rounding must not show a failing median equal to its floor.
        assert!(
            line(&v, "rate")
                .text
                .contains("median 100.000 tok/s over 1 reply (floor 100.001"),
            "{v}"
        );
    }

    #[test]
    fn only_empty_replies_fail_every_timing_line() {
        let v = judge_with(&[reply_at(&[], None)], Some(LOG), floors());
        assert_eq!(line(&v, "rate").status, Status::Fail);
        assert_eq!(line(&v, "first-token").status, Status::Fail);
    }

    #[test]
    fn a_one_chunk_reply_has_no_rate_and_the_line_says_so() {
        // A reply is named by its index, whatever its place in the list.
        let second = ReplyRecord {
            index: 2,
            ..reply_at(&[150], None)
        };
        let v = judge_with(&[good(), second], Some(LOG), floors());
        let rate = line(&v, "rate");
        assert_eq!(rate.status, Status::Ok);
        assert!(rate.text.contains("over 1 of 2 replies"), "{rate:?}");
        assert!(rate.text.contains("each: 100.0, -"), "{rate:?}");
        assert!(rate.text.contains("no rate for reply 2"), "{rate:?}");
        let v = judge_with(&[reply_at(&[150], None)], Some(LOG), floors());
        assert_eq!(line(&v, "rate").status, Status::Fail);
    }

    #[test]
    fn a_reply_sent_all_at_once_has_no_rate_and_fails_the_rate_line() {
        // Ten chunks stamped by the one read that brought them all (a serve, or a proxy in
        // front of it, that buffers the reply): no time between them to take a rate from. An
        // infinite rate would pass any floor.
        let at_once = reply_at(&[150; 10], Some(10));
        let v = judge_with(&[at_once.clone(), at_once], Some(LOG), floors());
        let rate = line(&v, "rate");
        assert_eq!(rate.status, Status::Fail, "{rate:?}");
        assert!(rate.text.contains("sent all at once"), "{rate:?}");
        assert_eq!(line(&v, "first-token").status, Status::Ok);
    }

    #[test]
    fn usage_the_text_cannot_hold_is_not_believed_and_the_rate_line_says_so() {
        // 5 one-word events over 2 s claimed as 1,000,000 tokens: at the claim, 399,633 tok/s.
        let mut lie = reply_at(&[100, 600, 1100, 1600, 2100], Some(1_000_000));
        lie.content = "Paris is the capital ok.".into(); // 24 bytes
        lie.index = 2;
        let v = judge_with(&[good(), lie], Some(LOG), floors());
        let rate = line(&v, "rate");
        assert!(rate.text.contains("each: 100.0, 2.0"), "{rate:?}");
        assert!(
            rate.text.ends_with("; usage not believed for reply 2: it claimed 1000000 tokens for 5 chunks of 24 bytes of text; the rate is from the chunks"),
            "{rate:?}"
        );
        // Believed usage adds nothing.
        let v = judge_with(&[good()], Some(LOG), floors());
        assert!(!line(&v, "rate").text.contains("not believed"), "{v}");
        // With no rate at all, the note is still there.
        let v = judge_with(&[reply_at(&[100], Some(50))], Some(LOG), floors());
        assert!(
            line(&v, "rate").text.contains(
                "usage not believed for reply 1: it claimed 50 tokens for 1 chunk of 1 bytes"
            ),
            "{v}"
        );
    }

    #[test]
    fn multi_token_chunks_with_usage_rate_on_the_usage_count() {
        // 6 events 50 ms apart, 4 tokens each: 20 tokens after the first event over 250 ms.
        let mut r = reply_at(&[100, 150, 200, 250, 300, 350], Some(24));
        r.content = " ok ok ok ok".repeat(6);
        let v = judge_with(&[r], Some(LOG), floors());
        assert!(
            line(&v, "rate").text.starts_with("median 80.0 tok/s"),
            "{v}"
        );
    }

    #[test]
    fn a_first_token_just_over_its_limit_shows_the_digits_that_differ() {
        let f = Floors {
            first_token_ms: 199.999,
            ..floors()
        };
        let v = judge_with(&[good()], Some(LOG), f);
        assert_eq!(
            line(&v, "first-token").text,
            "median 200.000 ms over 1 reply (limit 199.999); thin: fewer than 3 timed replies, use --replies 6 or more for an interval"
        );
    }

    #[test]
    fn content_names_ten_failing_replies_and_counts_the_rest() {
        let wrong = |i: usize| {
            let mut r = good();
            r.index = i;
            r.content = "Lyon.".into();
            r.expect = Some("(?i)paris".into());
            r
        };
        let eleven: Vec<ReplyRecord> = (1..=11).map(wrong).collect();
        let content = |replies: &[ReplyRecord]| {
            line(&judge_with(replies, Some(LOG), floors()), "content").clone()
        };
        let t = content(&eleven).text;
        assert!(
            t.contains("reply 10 said") && !t.contains("reply 11 said"),
            "{t}"
        );
        assert!(
            t.ends_with("; 1 more reply like these (each in replies.jsonl)"),
            "{t}"
        );
        let t = content(&eleven[..10]).text;
        assert!(t.contains("reply 10 said") && !t.contains("more"), "{t}");
        let many: Vec<ReplyRecord> = (1..=2000).map(wrong).collect();
        let l = content(&many);
        assert_eq!(l.status, Status::Fail);
        assert!(l.text.len() < 2000, "{}", l.text.len());
        assert!(l
            .text
            .ends_with("; 1990 more replies like these (each in replies.jsonl)"));
    }

    #[test]
    fn content_says_how_many_replies_had_an_expected_answer() {
        let mut checked = good();
        checked.content = "Paris.".into();
        checked.expect = Some("(?i)paris".into());
        let v = judge_with(&[checked, good()], Some(LOG), floors());
        assert_eq!(
            line(&v, "content").text,
            "2 replies, all with content; 1 with the expected answer"
        );
    }

    #[test]
    fn first_token_says_which_replies_reused_a_cached_prompt() {
        let mut cached = good();
        cached.cached_prompt_tokens = Some(11);
        let mut fresh = good();
        fresh.cached_prompt_tokens = Some(0);
        let v = judge_with(&[fresh.clone(), cached, good()], Some(LOG), floors());
        assert_eq!(
            line(&v, "first-token").text,
            "median 200 ms over 3 replies (limit 600); 1 of 3 replies reused a cached prompt"
        );
        let v = judge_with(&[fresh], Some(LOG), floors());
        assert!(line(&v, "first-token")
            .text
            .ends_with("; no reply reused a cached prompt"));
        let v = judge_with(&[good()], Some(LOG), floors());
        assert_eq!(line(&v, "first-token").text, "median 200 ms over 1 reply (limit 600); thin: fewer than 3 timed replies, use --replies 6 or more for an interval");
    }

    #[test]
    fn first_token_says_when_its_median_is_of_cold_and_cached_prompts_far_apart() {
        // A reply whose first token came at `ms`, its prompt served whole from the cache
        // (40 of 41 tokens) or cold (the template's 24 alone).
        let at = |ms: u64, hit: bool| {
            let times: Vec<u64> = (0..11).map(|i| ms + 10 * i).collect();
            let mut r = reply_at(&times, None);
            r.usage_prompt_tokens = Some(41);
            r.cached_prompt_tokens = Some(if hit { 40 } else { 24 });
            r
        };
        let text = |replies: &[ReplyRecord]| {
            line(&judge_with(replies, Some(LOG), floors()), "first-token")
                .text
                .clone()
        };
        let t = text(&[at(200, false), at(40, true), at(210, false), at(50, true)]);
        assert!(
            t.ends_with("; 4 of 4 replies reused a cached prompt; whole from the cache: 2 replies (median 45 ms), cold: 2 replies (median 205 ms), 4.6x apart: the median of the mixture describes neither"),
            "{t}"
        );
        // Twice apart is far enough; just under it is not said.
        let t = text(&[at(200, false), at(100, true)]);
        assert!(t.contains("2.0x apart"), "{t}");
        let t = text(&[at(200, false), at(101, true)]);
        assert!(
            t.ends_with("; 2 of 2 replies reused a cached prompt"),
            "{t}"
        );
        // One kind alone is no mixture.
        let t = text(&[at(200, false), at(40, false)]);
        assert!(
            t.ends_with("; 2 of 2 replies reused a cached prompt"),
            "{t}"
        );
    }

    #[test]
    fn a_reasoning_first_reply_times_its_first_reasoning_token() {
        let mut r = good();
        r.chunks[0].content_chars = 0;
        r.chunks[0].reasoning_chars = 5;
        r.chunks[0].at_ns = 50_000_000;
        let v = judge_with(&[r], Some(LOG), floors());
        assert_eq!(line(&v, "first-token").text, "median 50 ms over 1 reply (limit 600); thin: fewer than 3 timed replies, use --replies 6 or more for an interval");
    }

    #[test]
    fn route_fails_without_the_fast_route_and_with_the_slow_one() {
        let v = judge_with(&[good()], Some("route: cpu-fallback\n"), floors());
        let route = line(&v, "route");
        assert_eq!(route.status, Status::Fail);
        assert!(
            route.text.contains("does not name the fast route"),
            "{route:?}"
        );
        assert!(
            route
                .text
                .contains("names the slow route /route: cpu-fallback/: \"route: cpu-fallback\""),
            "{route:?}"
        );
        assert_eq!(v.outcome, Outcome::Fail);

        let both = "route: npu-fast\nlater: route: cpu-fallback for layer 3\n";
        let v = judge_with(&[good()], Some(both), floors());
        assert_eq!(line(&v, "route").status, Status::Fail);
        assert!(line(&v, "route")
            .text
            .contains("\"later: route: cpu-fallback for layer 3\""));
    }

    #[test]
    fn route_with_one_pattern_or_none() {
        let fast_only = Floors {
            slow_route: None,
            ..floors()
        };
        let v = judge_with(&[good()], Some(LOG), fast_only.clone());
        assert_eq!(line(&v, "route").status, Status::Ok);
        assert_eq!(line(&v, "route").text, "the serve log names the fast route");
        assert_eq!(
            line(&judge_with(&[good()], Some("x"), fast_only), "route").status,
            Status::Fail
        );
        let slow_only = Floors {
            fast_route: None,
            ..floors()
        };
        let v = judge_with(&[good()], Some("x"), slow_only.clone());
        assert_eq!(
            line(&v, "route").text,
            "the serve log does not name the slow route"
        );
        assert_eq!(
            line(
                &judge_with(&[good()], Some(LOG), slow_only.clone()),
                "route"
            )
            .status,
            Status::Ok
        );
        let none = Floors {
            fast_route: None,
            slow_route: None,
            ..floors()
        };
        let v = judge_with(&[good()], Some("route: cpu-fallback"), none);
        assert_eq!(line(&v, "route").status, Status::Info);
        assert_eq!(v.outcome, Outcome::Pass);
    }

    #[test]
    fn no_serve_log_makes_route_info_not_ok() {
        let v = judge_with(&[good()], None, floors());
        assert_eq!(line(&v, "route").status, Status::Info);
        assert!(line(&v, "route").text.contains("--serve-log"));
    }

    #[test]
    fn a_wrong_answer_fails_content_quoting_it() {
        let mut r = good();
        r.content = "The capital of France is London, and it has been for a very long time indeed, they say.".into();
        r.expect = Some("(?i)paris".into());
        let v = judge_with(&[r], Some(LOG), floors());
        let content = line(&v, "content");
        assert_eq!(content.status, Status::Fail);
        assert!(
            content.text.starts_with(
                "reply 1 said \"The capital of France is London, and it has been for a very long time indeed, th…\", which does not match /(?i)paris/"
            ),
            "{content:?}"
        );
    }

    #[test]
    fn a_right_answer_passes_content() {
        let mut r = good();
        r.content = "Paris.".into();
        r.expect = Some("(?i)paris".into());
        let v = judge_with(&[r], Some(LOG), floors());
        assert_eq!(
            line(&v, "content").text,
            "1 reply, with content and the expected answer"
        );
    }

    #[test]
    fn a_reply_that_errored_fails_content_even_with_text() {
        let mut r = good();
        r.error = Some("the stream ended before [DONE]".into());
        let v = judge_with(&[r], Some(LOG), floors());
        let content = line(&v, "content");
        assert_eq!(content.status, Status::Fail);
        assert!(
            content.text.contains("reply 1 failed after saying"),
            "{content:?}"
        );
        assert!(
            content.text.ends_with("the stream ended before [DONE]"),
            "{content:?}"
        );
    }

    #[test]
    fn fewer_replies_than_planned_fail_content() {
        let replies = [good()];
        let scanned_log = scanned(LOG);
        let e = Evidence {
            replies_planned: 3,
            serve_log: Some(&scanned_log),
            ..Evidence::of(&replies, &READY)
        };
        let v = judge(&e, &criteria(floors()));
        assert_eq!(line(&v, "content").text, "only 1 of 3 replies were made");
    }

    #[test]
    fn a_serve_that_exited_fails_with_its_status_and_log_tail() {
        let startup = Startup::Exited {
            status: "exit status: 3".into(),
        };
        let log = "a\nb\n\nc\nd\ne\nf\nerror: no device\n";
        let scanned_log = scanned(log);
        let e = Evidence {
            replies_planned: 3,
            serve_log: Some(&scanned_log),
            load: Some(&LOAD),
            ..Evidence::of(&[], &startup)
        };
        let v = judge(&e, &criteria(floors()));
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(
            line(&v, "serve").text,
            "the serve exited (exit status: 3) before it was ready; last log lines: \"c\" | \"d\" | \"e\" | \"f\" | \"error: no device\""
        );
        assert!(v.lines.iter().all(|l| l.check != "rate"));
    }

    #[test]
    fn the_load_line_is_info_and_absent_without_a_load() {
        let v = judge_with(&[good()], Some(LOG), floors());
        assert_eq!(line(&v, "load").status, Status::Info);
        let replies = [good()];
        let scanned_log = scanned(LOG);
        let e = Evidence {
            replies_planned: 1,
            serve_log: Some(&scanned_log),
            ..Evidence::of(&replies, &READY)
        };
        let v = judge(&e, &criteria(floors()));
        assert!(v.lines.iter().all(|l| l.check != "load"));
        assert_eq!(v.outcome, Outcome::Pass);
    }

    #[test]
    fn an_interrupted_run_is_interrupted_not_passed() {
        let replies = [good()];
        let scanned_log = scanned(LOG);
        let e = Evidence {
            replies_planned: 1,
            serve_log: Some(&scanned_log),
            interrupted: Some("SIGTERM".into()),
            ..Evidence::of(&replies, &READY)
        };
        let v = judge(&e, &criteria(floors()));
        assert_eq!(
            v.outcome,
            Outcome::Interrupted {
                signal: "SIGTERM".into()
            }
        );
        assert!(v
            .to_string()
            .ends_with("RESULT: INTERRUPTED (by SIGTERM)\n"));
    }

    #[test]
    fn bad_floors_and_patterns_are_errors() {
        assert!(Criteria::new(Floors {
            floor: -1.0,
            ..floors()
        })
        .is_err());
        assert!(Criteria::new(Floors {
            floor: f64::NAN,
            ..floors()
        })
        .is_err());
        assert!(Criteria::new(Floors {
            first_token_ms: 0.0,
            ..floors()
        })
        .is_err());
        assert!(Criteria::new(Floors {
            fast_route: Some("(".into()),
            ..floors()
        })
        .is_err());
    }

    #[test]
    fn quote_cuts_and_escapes() {
        assert_eq!(quote("a\"b\nc", 80), "\"a\\\"b\\nc\"");
        assert_eq!(quote("abcdef", 3), "\"abc…\"");
        // A colour escape, BEL, \x01, DEL and a C1 control are shown, never passed on.
        assert_eq!(
            quote("\u{1b}[31mred\u{7}\u{1}\u{7f}\u{9b}é", 80),
            "\"\\u{1b}[31mred\\u{7}\\u{1}\\u{7f}\\u{9b}é\""
        );
        assert_eq!(visible("a\tb\nc\u{1b}"), "a\\u{9}b\nc\\u{1b}");
        assert_eq!(visible("plain\ntext"), "plain\ntext");
    }

    #[test]
    fn the_stop_line_says_only_what_happened() {
        let said = |s: StopRecord| stop_line(Some((&s, 10.0))).map(|l| l.text);
        assert_eq!(
            said(StopRecord::default()),
            None,
            "a clean stop adds no line"
        );
        assert_eq!(
            said(StopRecord {
                killed: true,
                group_killed: 2,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve did not exit within the 10 s grace after SIGTERM and was killed (SIGKILL) with 2 other process(es) of its group"
        );
        assert_eq!(
            said(StopRecord {
                group_killed: 1,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve exited, but 1 other process(es) of its group did not within the 10 s grace after SIGTERM and were killed (SIGKILL)"
        );
        assert_eq!(
            said(StopRecord {
                group_killed: 1,
                cut_short: true,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve exited, but 1 other process(es) of its group were killed (SIGKILL) at a second signal"
        );
        assert_eq!(
            said(StopRecord {
                escaped_killed: 1,
                cut_short: true,
                ..StopRecord::default()
            })
            .unwrap(),
            "1 process(es) had left the serve's process group and were killed after it stopped (SIGKILL at a second signal, before their grace ran out)"
        );
        assert_eq!(
            said(StopRecord {
                killed: true,
                cut_short: true,
                escaped_killed: 3,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve was killed (SIGKILL) at a second signal, before its grace ran out; 3 process(es) had left the serve's process group and were killed after it stopped"
        );
        assert_eq!(
            said(StopRecord {
                left_running: 1,
                ..StopRecord::default()
            })
            .unwrap(),
            "1 process(es) of the serve were still running 5 s after SIGKILL (stuck in the kernel?); the gate could not stop them"
        );
        // A second signal that came when nothing was left to cut adds nothing.
        assert_eq!(
            said(StopRecord {
                cut_short: true,
                ..StopRecord::default()
            }),
            None
        );
    }
}
