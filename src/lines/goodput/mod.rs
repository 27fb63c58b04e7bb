//! The goodput line (issue 37, item 4), as one module (issue 53): the share of judged
//! replies, burst streams included, that met every target of `--slo`, with its exact 95%
//! interval, against `--min-goodput`; and which target was missed most. No line without an
//! SLO. docs/goodput.md says the rules with the peers' sources.
//!
//! - [`flags`]: `--slo` and `--min-goodput`, and how they lay over a run's recorded SLO;
//! - [`record`]: what the archive keeps: the SLO (run.json `floors.slo`) and the line's
//!   figures (result.json `figures.goodput`);
//! - [`attainment`]: whether each reply met its targets, and the tally (pure);
//! - here: the line ([`judge`]), the bounds of a recorded SLO ([`check`]), its Markdown table
//!   ([`summary_table`]), its Prometheus families ([`prom_families`]) and its self-test cases
//!   ([`cases`]).
//!
//! A timing line ([`Check::TIMING`]): a reply over its targets is slow, as a rate under its
//! floor is, and a busy box slows both alike. A failed reply counts as a miss here, but it
//! fails the content line too, which no busy box excuses.

use std::fmt::Write as _;

use crate::archive::check::Check;
use crate::archive::record::{Line, LineFigures, Outcome, ReplyRecord, Status, Verdict};
use crate::judging::proportion::clopper_pearson;
use crate::judging::verdict::evidence::Evidence;
use crate::judging::verdict::words::{plural, trimmed};
use crate::report::exposition::{figures_of, one_sample, Exposition, Sample};
use crate::selftest::cases::case::Case;
use crate::selftest::cases::parts::{base, good, numbered, reply, serve_waited, slow};
use attainment::{goodput, GoodputTally, TargetMisses};
use record::{GoodputFigures, SloFloors, TargetFigures, DEFAULT_MIN_GOODPUT, MOST_TARGET_MS};

pub mod attainment;
pub mod flags;
pub mod record;

pub use flags::SloArgs;

/// The `goodput` line over the judged replies of `e`, or none where `slo` has no target.
pub fn judge(e: &Evidence<'_>, slo: &SloFloors) -> Option<Line> {
    goodput_line(e.replies, slo)
}

/// The `goodput` line over `replies` (the judged ones), or none where `slo` has no target.
pub(crate) fn goodput_line(replies: &[ReplyRecord], slo: &SloFloors) -> Option<Line> {
    if slo.targets().is_empty() {
        return None;
    }
    let min = slo.min_goodput.unwrap_or(DEFAULT_MIN_GOODPUT);
    let t = goodput(replies, slo);
    let share = (t.replies > 0).then(|| t.met as f64 / t.replies as f64);
    let interval = clopper_pearson(t.met, t.replies, 0.95);
    // The share as a quotient, so that 9 of 10 is exactly the 0.9 a user wrote.
    let status = match share {
        Some(s) if s >= min => Status::Ok,
        _ => Status::Fail,
    };
    let figures = GoodputFigures {
        replies: t.replies,
        met: t.met,
        slo_attainment: share,
        interval_95: interval.map(|(lo, hi)| [lo, hi]),
        min_goodput: min,
        failed: t.failed,
        no_token: t.no_token,
        targets: t.targets.iter().map(target_figures).collect(),
    };
    Some(
        Line::new(Check::Goodput, status, goodput_text(&t, interval, min))
            .with(LineFigures::goodput(figures)),
    )
}

/// The SLO as the flags hold it, for a profile's or a run.json edited by hand: each target
/// above 0 and at most a day, `--min-goodput` above 0 and at most 1, and only with a target.
pub fn check(slo: &SloFloors) -> Result<(), String> {
    for (metric, target) in slo.targets() {
        if !(target > 0.0 && target <= MOST_TARGET_MS) {
            return Err(format!(
                "--slo {metric}: a target is a time above 0 and at most 24h, e.g. {metric}=600ms (got {target} ms)"
            ));
        }
    }
    if let Some(x) = slo.min_goodput {
        if !(x > 0.0 && x <= 1.0) {
            return Err(format!(
                "--min-goodput is a share of replies above 0 and at most 1, e.g. 0.9 (got {x})"
            ));
        }
        if slo.targets().is_empty() {
            return Err(
                "--min-goodput is the share of replies that must meet the SLO: give it with --slo, e.g. --slo ttft=600ms,tpot=50ms"
                    .to_string(),
            );
        }
    }
    Ok(())
}

fn target_figures(t: &TargetMisses) -> TargetFigures {
    TargetFigures {
        metric: t.metric,
        target_ms: t.target_ms,
        missed: t.missed,
        worst_reply: t.worst.map(|(i, _)| i),
        worst_ms: t.worst.map(|(_, ms)| ms),
    }
}

/// A share as a percentage without needless zeros: 91.7%, 90%, 100%.
fn pct(x: f64) -> String {
    format!("{}%", trimmed(x * 100.0, 1))
}

/// A time in ms with the digits that matter, as the latency line gives them: 1053, 63.2, 0.85.
fn ms(x: f64) -> String {
    let decimals = if x >= 100.0 {
        0
    } else if x >= 1.0 {
        1
    } else {
        2
    };
    trimmed(x, decimals)
}

fn goodput_text(t: &GoodputTally, interval: Option<(f64, f64)>, min: f64) -> String {
    let required = format!("at least {} required", pct(min));
    if t.replies == 0 {
        return format!("no replies to hold to the SLO ({required})");
    }
    let bursts = match t.burst_streams {
        0 => String::new(),
        n => format!(" ({n} of them burst streams)"),
    };
    let (lo, hi) = interval.unwrap_or((0.0, 1.0));
    let mut text = format!(
        "{} of {}{bursts} met every target ({}, 95% interval {} to {}; {required})",
        t.met,
        plural(t.replies, "reply", "replies"),
        pct(t.met as f64 / t.replies as f64),
        pct(lo),
        pct(hi),
    );
    let mut missed: Vec<&TargetMisses> = t.targets.iter().filter(|m| m.missed > 0).collect();
    // The target missed most first; ties in the order --slo's names go.
    missed.sort_by_key(|m| std::cmp::Reverse(m.missed));
    if missed.is_empty() {
        let targets: Vec<String> = t
            .targets
            .iter()
            .map(|m| format!("{} {} ms", m.metric, ms(m.target_ms)))
            .collect();
        text.push_str(&format!("; targets {}", targets.join(", ")));
    } else {
        let parts: Vec<String> = missed.iter().map(|m| missed_text(m)).collect();
        text.push_str(&format!("; missed: {}", parts.join(", ")));
    }
    if t.failed > 0 {
        text.push_str(&format!(
            "; {} met no target",
            plural(t.failed, "failed reply", "failed replies")
        ));
    }
    if t.no_token > 0 {
        text.push_str(&format!(
            "; {} with no token met no target",
            plural(t.no_token, "reply", "replies")
        ));
    }
    text
}

/// `tpot 50 ms by 1 (reply 7, 63.2 ms)`; with more than one, the worst.
fn missed_text(m: &TargetMisses) -> String {
    let worst = match m.worst {
        Some((i, v)) if m.missed == 1 => format!(" (reply {i}, {} ms)", ms(v)),
        Some((i, v)) => format!(" (worst reply {i}, {} ms)", ms(v)),
        None => String::new(),
    };
    format!("{} {} ms by {}{worst}", m.metric, ms(m.target_ms), m.missed)
}

/// The goodput line's targets as a Markdown table (`--slo`): each target, the replies over
/// it and the worst; empty without the line.
pub fn summary_table(v: &Verdict) -> String {
    let Some(g) = v
        .lines
        .iter()
        .find(|l| l.check == Check::Goodput)
        .and_then(|l| l.figures.as_ref())
        .and_then(|f| f.lines.goodput.as_ref())
    else {
        return String::new();
    };
    let mut md =
        String::from("\n| SLO target | met by | missed by | worst |\n| --- | --- | --- | --- |\n");
    for t in &g.targets {
        let worst = match (t.worst_reply, t.worst_ms) {
            (Some(i), Some(ms)) => format!("reply {i}, {ms:.1} ms"),
            _ => "-".to_string(),
        };
        let met_by = g.replies - t.missed - g.failed - g.no_token;
        let _ = writeln!(
            md,
            "| {} <= {} ms | {met_by} of {} | {} | {worst} |",
            t.metric, t.target_ms, g.replies, t.missed
        );
    }
    if g.failed + g.no_token > 0 {
        let _ = writeln!(
            md,
            "| (every target) | - | {} failed, {} with no token | - |",
            g.failed, g.no_token
        );
    }
    md
}

/// The goodput line's figures (`--slo`, issue 37): the share of replies that met every target,
/// named as guidellm names it (`slo_attainment`; vLLM's `request_goodput` is a rate of good
/// requests a second, which a paced gate's share is not), and each target's misses.
pub(crate) fn prom_families(out: &mut Exposition, v: &Verdict) {
    let g = figures_of(v, Check::Goodput).and_then(|f| f.lines.goodput.as_ref());
    let interval = g.and_then(|g| g.interval_95);
    let share: Vec<Sample> = [
        ("rate", g.and_then(|g| g.slo_attainment)),
        ("interval_95_low", interval.map(|i| i[0])),
        ("interval_95_high", interval.map(|i| i[1])),
        ("min", g.map(|g| g.min_goodput)),
    ]
    .into_iter()
    .filter_map(|(q, x)| Some((vec![("quantity", q.to_string())], x?)))
    .collect();
    out.gauge(
        "slo_attainment_ratio",
        "The share of replies that met every target of the SLO, its exact 95% interval, and the least share required.",
        &share,
    );
    out.gauge(
        "slo_replies",
        "The replies held to the SLO, failed ones included.",
        &one_sample(g, |g| Some(g.replies as f64)),
    );
    out.gauge(
        "slo_met_replies",
        "Of them, the replies that met every target.",
        &one_sample(g, |g| Some(g.met as f64)),
    );
    let targets = g.map(|g| g.targets.as_slice()).unwrap_or_default();
    let per_target = |pick: fn(&TargetFigures) -> f64| -> Vec<Sample> {
        targets
            .iter()
            .map(|t| (vec![("target", t.metric.name().to_string())], pick(t)))
            .collect()
    };
    out.gauge(
        "slo_target_seconds",
        "Each target of the SLO (ttft, itl, tpot, e2el), in seconds.",
        &per_target(|t| t.target_ms / 1e3),
    );
    out.gauge(
        "slo_missed_replies",
        "The replies over each target (failed replies and replies without a token apart).",
        &per_target(|t| t.missed as f64),
    );
}

/// The base case's replies have a TPOT of (300 - 200) / 10 = 10 ms; `slow()`'s is 20 ms.
fn tpot(ms: f64, min: f64) -> SloFloors {
    SloFloors {
        tpot_ms: Some(ms),
        min_goodput: Some(min),
        ..SloFloors::default()
    }
}

/// The goodput line's self-test cases (`--slo`): a reply at its target meets it, the share
/// against `--min-goodput` at and under it, a failed reply a miss, and a busy box that may
/// excuse it.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = base("goodput: a reply exactly at its target meets it");
    c.floors.lines.slo = tpot(10.0, 1.0);
    c.expect.push((Check::Goodput,
        Ok,
        "3 of 3 replies met every target (100%, 95% interval 29.2% to 100%; at least 100% required); targets tpot 10 ms",
    ));
    cases.push(c);

    let mut c = base("goodput: a share under --min-goodput FAILs and names the target missed");
    c.replies = numbered(vec![good(), good(), slow()]);
    c.floors.lines.slo = tpot(10.0, 0.9);
    c.expect = vec![(Check::Goodput,
        Fail,
        "2 of 3 replies met every target (66.7%, 95% interval 9.4% to 99.2%; at least 90% required); missed: tpot 10 ms by 1 (reply 3, 20 ms)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("goodput: a share exactly at --min-goodput passes");
    c.replies = numbered(vec![good(), slow(), good(), slow()]);
    c.floors.lines.slo = tpot(10.0, 0.5);
    c.expect = vec![(Check::Goodput, Ok, "2 of 4 replies met every target (50%")];
    cases.push(c);

    let mut c = base("goodput: a failed reply met no target");
    let mut failed = reply(&[200], "Paris.");
    failed.error = Some("the stream broke".into());
    c.replies = numbered(vec![good(), good(), failed]);
    c.floors.lines.slo = tpot(10.0, 0.5);
    c.expect = vec![(Check::Goodput,
        Ok,
        "2 of 3 replies met every target (66.7%, 95% interval 9.4% to 99.2%; at least 50% required); targets tpot 10 ms; 1 failed reply met no target",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c =
        base("goodput: alone over its SLO on a busy box it is timing, and --busy-skip a SKIP");
    c.replies = numbered(vec![good(), good(), slow()]);
    c.floors.lines.slo = tpot(10.0, 0.9);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![(Check::Goodput, Fail, "2 of 3 replies met every target")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    let mut c = base("goodput: no --slo, no line");
    c.absent = vec![Check::Goodput];
    cases.push(c);
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::BurstSlot;
    use crate::judging::measure::tests::reply_at;
    use record::SloMetric;

    /// `n` replies, first token at 100 ms and 10 tokens 10 ms apart (TPOT 10), the ones in
    /// `slow` with gaps of `slow_gap` ms instead; numbered from 1.
    fn replies(n: usize, slow: &[usize], slow_gap: u64) -> Vec<ReplyRecord> {
        (1..=n)
            .map(|i| {
                let gap = if slow.contains(&i) { slow_gap } else { 10 };
                let times: Vec<u64> = (0..11).map(|k| 100 + gap * k).collect();
                let mut r = reply_at(&times, None);
                r.index = i;
                r
            })
            .collect()
    }

    fn slo(tpot: f64, min: Option<f64>) -> SloFloors {
        SloFloors {
            tpot_ms: Some(tpot),
            min_goodput: min,
            ..SloFloors::default()
        }
    }

    #[test]
    fn the_line_reads_as_the_issue_writes_it() {
        let mut r = replies(12, &[7], 60);
        // Reply 7's TPOT: 10 gaps of 60 ms over 10 tokens after the first = 60 ms; make it
        // 63.2 by a later last event.
        r[6].chunks.last_mut().unwrap().at_ns = (100 + 632) * 1_000_000;
        let l = goodput_line(&r, &slo(50.0, None)).unwrap();
        assert_eq!(l.check, Check::Goodput);
        assert_eq!(l.status, Status::Ok);
        assert_eq!(
            l.text,
            "11 of 12 replies met every target (91.7%, 95% interval 61.5% to 99.8%; \
             at least 90% required); missed: tpot 50 ms by 1 (reply 7, 63.2 ms)"
        );
        let f = l.figures.unwrap().lines.goodput.unwrap();
        assert_eq!((f.replies, f.met, f.failed, f.no_token), (12, 11, 0, 0));
        assert_eq!(f.min_goodput, 0.9);
        assert_eq!(f.targets[0].worst_reply, Some(7));
        let [lo, hi] = f.interval_95.unwrap();
        assert!(
            (lo - 0.6152).abs() < 1e-3 && (hi - 0.9979).abs() < 1e-3,
            "{lo} {hi}"
        );
    }

    #[test]
    fn a_share_exactly_at_the_minimum_passes_and_one_reply_fewer_fails() {
        // 9 of 10 is 0.9 exactly; 8 of 10 is under it.
        let at = goodput_line(&replies(10, &[3], 60), &slo(50.0, Some(0.9))).unwrap();
        assert_eq!(at.status, Status::Ok, "{}", at.text);
        let under = goodput_line(&replies(10, &[3, 4], 60), &slo(50.0, Some(0.9))).unwrap();
        assert_eq!(under.status, Status::Fail, "{}", under.text);
        assert!(under
            .text
            .starts_with("8 of 10 replies met every target (80%"));
        assert!(under
            .text
            .contains("tpot 50 ms by 2 (worst reply 3, 60 ms)"));
        // 7 of 10 against 0.7: a share a float product would put a hair under.
        let seven = goodput_line(&replies(10, &[1, 2, 3], 60), &slo(50.0, Some(0.7))).unwrap();
        assert_eq!(seven.status, Status::Ok, "{}", seven.text);
    }

    #[test]
    fn a_reply_exactly_at_the_target_meets_it() {
        let l = goodput_line(&replies(3, &[], 10), &slo(10.0, Some(1.0))).unwrap();
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(l.text.ends_with("; targets tpot 10 ms"), "{}", l.text);
        let l = goodput_line(&replies(3, &[], 10), &slo(9.99, Some(1.0))).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
    }

    #[test]
    fn failed_replies_and_replies_without_a_token_are_misses() {
        let mut r = replies(4, &[], 10);
        r[1].error = Some("the stream broke".into());
        r[2] = reply_at(&[], None);
        r[2].index = 3;
        let l = goodput_line(&r, &slo(50.0, Some(0.5))).unwrap();
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text
                .starts_with("2 of 4 replies met every target (50%, 95% interval 6.8% to 93.2%"),
            "{}",
            l.text
        );
        assert!(
            l.text.ends_with(
                "; targets tpot 50 ms; 1 failed reply met no target; 1 reply with no token met no target"
            ),
            "{}",
            l.text
        );
        let f = l.figures.unwrap().lines.goodput.unwrap();
        assert_eq!((f.failed, f.no_token, f.targets[0].missed), (1, 1, 0));
    }

    #[test]
    fn burst_streams_count_and_are_said_and_the_most_missed_target_comes_first() {
        let mut r = replies(4, &[2, 3], 60);
        r[3].burst = Some(BurstSlot {
            round: 1,
            stream: 1,
        });
        r[3].chunks[0].at_ns = 900 * 1_000_000;
        let s = SloFloors {
            ttft_ms: Some(600.0),
            tpot_ms: Some(50.0),
            min_goodput: Some(0.25),
            ..SloFloors::default()
        };
        let l = goodput_line(&r, &s).unwrap();
        assert!(
            l.text
                .starts_with("1 of 4 replies (1 of them burst streams) met every target (25%"),
            "{}",
            l.text
        );
        assert!(
            l.text
                .ends_with("missed: tpot 50 ms by 2 (worst reply 2, 60 ms), ttft 600 ms by 1 (reply 4, 900 ms)"),
            "{}",
            l.text
        );
        assert_eq!(l.status, Status::Ok);
    }

    #[test]
    fn no_slo_no_line_and_no_replies_fail() {
        assert!(goodput_line(&replies(3, &[], 10), &SloFloors::default()).is_none());
        let min_only = SloFloors {
            min_goodput: Some(0.5),
            ..SloFloors::default()
        };
        assert!(goodput_line(&replies(3, &[], 10), &min_only).is_none());
        let l = goodput_line(&[], &slo(50.0, None)).unwrap();
        assert_eq!(l.status, Status::Fail);
        assert_eq!(
            l.text,
            "no replies to hold to the SLO (at least 90% required)"
        );
        let _ = SloMetric::ALL;
    }
}
