//! The goodput line (issue 37, item 4): the share of judged replies, burst streams included,
//! that met every target of `--slo`, with its exact 95% interval, against `--min-goodput`; and
//! which target was missed most. No line without an SLO. The rules are
//! [`crate::judging::goodput`]'s; docs/goodput.md says them with the peers' sources.
//!
//! A timing line ([`Check::TIMING`]): a reply over its targets is slow, as a rate under its
//! floor is, and a busy box slows both alike. A failed reply counts as a miss here, but it
//! fails the content line too, which no busy box excuses.

use super::words::{plural, trimmed};
use crate::archive::check::Check;
use crate::archive::record::{
    Figures, GoodputFigures, Line, ReplyRecord, SloFloors, Status, TargetFigures,
    DEFAULT_MIN_GOODPUT, MOST_TARGET_MS,
};
use crate::judging::goodput::{goodput, GoodputTally, TargetMisses};
use crate::judging::proportion::clopper_pearson;

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
        Line::new(Check::Goodput, status, goodput_text(&t, interval, min)).with(Figures {
            goodput: Some(figures),
            ..Figures::default()
        }),
    )
}

/// The SLO as the flags hold it, for a profile's or a run.json edited by hand: each target
/// above 0 and at most a day, `--min-goodput` above 0 and at most 1, and only with a target.
pub(crate) fn check(slo: &SloFloors) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{BurstSlot, SloMetric};
    use crate::judging::measure::tests::reply_at;

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
        let f = l.figures.unwrap().goodput.unwrap();
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
        let f = l.figures.unwrap().goodput.unwrap();
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
