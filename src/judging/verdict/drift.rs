//! The `drift` and `first-token-drift` lines (issue 20, item 2): whether the decode rate fell,
//! or the first-token time rose, over a run, said from the statistics of
//! [`crate::judging::drift`] (Mann-Kendall on blocks, Sen's slope) over the per-reply figures in
//! their order.

use crate::archive::check::Check;
use crate::archive::record::{Figures, Line, ReplyRecord, Status};
use crate::judging::drift::{judge_drift, trend, Trend, LEVEL};
use crate::judging::measure::measure;

/// Which figure a drift line reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Figure {
    /// The decode rate: a fall is the bad direction, and the line can FAIL.
    Rate,
    /// The first-token time: a rise is the bad direction; information only.
    FirstToken,
}

/// The `drift` and `first-token-drift` lines of a run: over its single-stream replies (no
/// burst) without errors, in their order by index, the logs of each reply's decode rate and of
/// its first-token time ([`measure`]). A figure fewer than
/// [`MIN_REPLIES`](crate::judging::drift::MIN_REPLIES) replies have gives no line; a reply
/// without the figure (or with one that is not positive) is left out of that figure's series,
/// never counted as zero.
///
/// `drift` FAILs by [`judge_drift`] with `max_drift` (`--max-drift`); `first-token-drift` is
/// always information, the same figures with a rise as the bad direction.
pub fn drift_lines(replies: &[ReplyRecord], max_drift: f64) -> Vec<Line> {
    let mut single: Vec<&ReplyRecord> = replies
        .iter()
        // A warm-up (`--warmup`) is the cold start the drift must not read as a fall.
        .filter(|r| r.burst.is_none() && r.error.is_none() && !r.warmup)
        .collect();
    single.sort_by_key(|r| r.index);
    // Each figure's series: the replies that have it (positive and finite), in order.
    let mut rates: Vec<(&ReplyRecord, f64)> = Vec::new();
    let mut firsts: Vec<(&ReplyRecord, f64)> = Vec::new();
    let usable = |v: Option<f64>| v.filter(|v| v.is_finite() && *v > 0.0);
    for r in &single {
        let m = measure(r);
        if let Some(v) = usable(m.rate_tok_s) {
            rates.push((r, v));
        }
        if let Some(v) = usable(m.first_token_ms) {
            firsts.push((r, v));
        }
    }
    let mut lines = Vec::new();
    for (figure, kept) in [(Figure::Rate, rates), (Figure::FirstToken, firsts)] {
        let logs: Vec<f64> = kept.iter().map(|(_, v)| v.ln()).collect();
        let Some(t) = trend(&logs) else {
            continue;
        };
        let first = kept.first().map(|(r, _)| r.sent_ns);
        let last = kept.last().map(|(r, _)| r.end_ns);
        let span_ns = match (first, last) {
            (Some(f), Some(l)) if l > f => Some(l - f),
            _ => None,
        };
        lines.push(drift_line(figure, &t, span_ns, single.len(), max_drift));
    }
    lines
}

/// One drift line from its trend.
fn drift_line(
    figure: Figure,
    t: &Trend,
    span_ns: Option<u64>,
    replies: usize,
    max_drift: f64,
) -> Line {
    let over = match span_ns {
        Some(ns) => format!("over {} replies in {}", t.values, duration(ns)),
        None => format!("over {} replies", t.values),
    };
    let how = if t.blocks == t.values {
        "reply by reply".to_string()
    } else if t.longest_block == t.block_length {
        format!("over {} blocks of {}", t.blocks, t.block_length)
    } else {
        format!(
            "over {} blocks of {} or {}",
            t.blocks, t.block_length, t.longest_block
        )
    };
    let change = t.change;
    let size = format!("{:.1}%", change.abs() * 100.0);
    let limit = percent(max_drift);
    let (check, bad_p, status, text) = match figure {
        Figure::Rate => {
            let (down, up) = (t.test.p_decrease, t.test.p_increase);
            let status = judge_drift(change, down, max_drift);
            let text = if status == Status::Fail {
                format!(
                    "the decode rate fell {size} {over} (Sen's slope; Mann-Kendall {} {how}): beyond the {limit} --max-drift",
                    p_text(down)
                )
            } else if change < -max_drift {
                format!(
                    "the decode rate fell {size} {over}, beyond the {limit} --max-drift, but not surely (Sen's slope; Mann-Kendall {} {how}; a drift FAILs only below p = {LEVEL})",
                    p_text(down)
                )
            } else if down < LEVEL && change < 0.0 {
                format!(
                    "the decode rate fell {size} {over} (Sen's slope; Mann-Kendall {} {how}): a real fall, within the {limit} --max-drift",
                    p_text(down)
                )
            } else if up < LEVEL && change > 0.0 {
                format!(
                    "the decode rate rose {size} {over} (Sen's slope; Mann-Kendall {} {how}): faster as the run went on",
                    p_text(up)
                )
            } else {
                format!("no drift: {} {over}, {}", signed(change), p_text(down))
            };
            (Check::Drift, down, status, text)
        }
        Figure::FirstToken => {
            let (up, down) = (t.test.p_increase, t.test.p_decrease);
            let text = if up < LEVEL && change > 0.0 {
                let beyond = if change > max_drift {
                    format!(", beyond the {limit} --max-drift (information: first-token drift never fails)")
                } else {
                    String::new()
                };
                format!(
                    "the first-token time rose {size} {over} (Sen's slope; Mann-Kendall {} {how}){beyond}",
                    p_text(up)
                )
            } else if down < LEVEL && change < 0.0 {
                format!(
                    "the first-token time fell {size} {over} (Sen's slope; Mann-Kendall {} {how}): faster as the run went on",
                    p_text(down)
                )
            } else {
                format!("no drift: {} {over}, {}", signed(change), p_text(up))
            };
            (Check::FirstTokenDrift, up, Status::Info, text)
        }
    };
    Line::new(check, status, text).with(Figures {
        values: Some(t.values),
        replies: Some(replies),
        drift: Some(change),
        drift_p: Some(bad_p),
        blocks: Some(t.blocks),
        block_length: Some(t.block_length),
        max_drift: (figure == Figure::Rate).then_some(max_drift),
        ..Figures::default()
    })
}

/// A p-value as the lines print it: `p = 0.41`, `p = 0.032`, `p = 0.0004`, `p < 0.0001`.
fn p_text(p: f64) -> String {
    if p < 0.0001 {
        "p < 0.0001".to_string()
    } else if p < 0.01 {
        format!("p = {p:.4}")
    } else if p < 0.1 {
        format!("p = {p:.3}")
    } else {
        format!("p = {p:.2}")
    }
}

/// A change with its sign: `-1.2%`, `+0.4%`.
fn signed(change: f64) -> String {
    format!("{:+.1}%", change * 100.0)
}

/// A share as a percentage, without a needless decimal: `10%`, `12.5%`.
fn percent(x: f64) -> String {
    let pct = x * 100.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{pct:.0}%")
    } else {
        format!("{pct:.1}%")
    }
}

/// A span of the run's clock: `45 s`, `10 min`, `2.5 h`.
fn duration(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 120.0 * 60.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{BurstSlot, ChunkArrival};
    use crate::judging::drift::DEFAULT_MAX_DRIFT;
    use crate::judging::measure::tests::reply_at;
    use crate::judging::test_rng::SplitMix;

    const MS: f64 = 1e6;

    /// Reply `index`, sent at `sent_s` s, its first token `first_ms` later and then 10 more at
    /// `rate` tok/s.
    fn reply(index: usize, sent_s: f64, rate: f64, first_ms: f64) -> ReplyRecord {
        let mut r = reply_at(&[], None);
        r.index = index;
        r.sent_ns = (sent_s * 1e9) as u64;
        let first = r.sent_ns + (first_ms * MS) as u64;
        let gap = (1e9 / rate) as u64;
        r.chunks = (0..11)
            .map(|i| ChunkArrival {
                at_ns: first + i * gap,
                content_chars: 1,
                reasoning_chars: 0,
                tokens: 0.0,
                tool_chars: 0,
            })
            .collect();
        r.content = "x".repeat(11);
        r.end_ns = first + 10 * gap;
        r
    }

    /// `n` replies 20 s apart at `rate(i)` tok/s and `first(i)` ms.
    fn run(
        n: usize,
        rate: impl Fn(usize) -> f64,
        first: impl Fn(usize) -> f64,
    ) -> Vec<ReplyRecord> {
        (0..n)
            .map(|i| reply(i + 1, 20.0 * i as f64, rate(i), first(i)))
            .collect()
    }

    fn line<'a>(lines: &'a [Line], check: &str) -> &'a Line {
        lines
            .iter()
            .find(|l| l.check == check)
            .unwrap_or_else(|| panic!("no {check} line in {lines:?}"))
    }

    #[test]
    fn a_twenty_percent_fall_over_thirty_replies_fails() {
        // The gaps grow by a quarter over the run (what the stand-in's slowing does): the rate
        // falls to 0.8 of its start. 3% seeded jitter on top.
        let mut rng = SplitMix(0x5EED_0025);
        let jitter: Vec<f64> = (0..30).map(|_| (0.03 * rng.normal()).exp()).collect();
        let replies = run(
            30,
            |i| 100.0 / (1.0 + 0.25 * i as f64 / 29.0) * jitter[i],
            |_| 200.0,
        );
        let lines = drift_lines(&replies, DEFAULT_MAX_DRIFT);
        let drift = line(&lines, "drift");
        assert_eq!(drift.status, Status::Fail, "{}", drift.text);
        assert!(
            drift.text.starts_with("the decode rate fell "),
            "{}",
            drift.text
        );
        assert!(
            drift
                .text
                .contains("over 30 replies in 10 min (Sen's slope; Mann-Kendall p ")
                && drift.text.ends_with("): beyond the 10% --max-drift"),
            "{}",
            drift.text
        );
        let f = drift.figures.as_ref().unwrap();
        let change = f.drift.unwrap();
        assert!((-0.25..-0.15).contains(&change), "{change}");
        assert!(f.drift_p.unwrap() < LEVEL);
        assert_eq!(
            (f.values, f.replies, f.max_drift),
            (Some(30), Some(30), Some(0.10))
        );
        assert!(f.blocks.unwrap() * f.block_length.unwrap() <= 30);
        // The same fall passes a --max-drift of 30%, said as a real fall within it.
        let lenient = drift_lines(&replies, 0.30);
        let drift = line(&lenient, "drift");
        assert_eq!(drift.status, Status::Info);
        assert!(
            drift
                .text
                .contains("a real fall, within the 30% --max-drift"),
            "{}",
            drift.text
        );
        // The first-token time did not move: no drift, information.
        let ft = line(&lines, "first-token-drift");
        assert_eq!(ft.status, Status::Info);
        assert!(
            ft.text.starts_with("no drift: +0.0% over 30 replies"),
            "{}",
            ft.text
        );
        assert_eq!(ft.figures.as_ref().unwrap().max_drift, None);
    }

    #[test]
    fn a_steady_serve_with_seeded_jitter_does_not_drift() {
        let mut rng = SplitMix(0x5EED_0026);
        let rates: Vec<f64> = (0..30)
            .map(|_| 100.0 * (0.03 * rng.normal()).exp())
            .collect();
        let firsts: Vec<f64> = (0..30)
            .map(|_| 200.0 * (0.05 * rng.normal()).exp())
            .collect();
        let replies = run(30, |i| rates[i], |i| firsts[i]);
        let lines = drift_lines(&replies, DEFAULT_MAX_DRIFT);
        assert_eq!(lines.len(), 2);
        for l in &lines {
            assert_eq!(l.status, Status::Info, "{}", l.text);
            assert!(l.text.starts_with("no drift: "), "{}", l.text);
            assert!(
                l.text.contains("% over 30 replies in 10 min, p "),
                "{}",
                l.text
            );
        }
    }

    #[test]
    fn fewer_than_eight_replies_with_a_figure_give_no_line() {
        let replies = run(7, |_| 100.0, |_| 200.0);
        assert!(drift_lines(&replies, DEFAULT_MAX_DRIFT).is_empty());
        // Eight, but one without a rate (its text in one read): no drift line, a first-token
        // one. Burst streams and failed replies are not counted.
        let mut replies = run(8, |_| 100.0, |_| 200.0);
        replies[3].chunks.truncate(1);
        let mut burst = reply(9, 200.0, 100.0, 200.0);
        burst.burst = Some(BurstSlot {
            round: 1,
            stream: 1,
        });
        let mut failed = reply(10, 220.0, 100.0, 200.0);
        failed.error = Some("connection reset".into());
        replies.extend([burst, failed]);
        let lines = drift_lines(&replies, DEFAULT_MAX_DRIFT);
        let checks: Vec<&str> = lines.iter().map(|l| l.check.name()).collect();
        assert_eq!(checks, ["first-token-drift"]);
        let f = lines[0].figures.as_ref().unwrap();
        assert_eq!((f.values, f.replies), (Some(8), Some(8)));
    }

    #[test]
    fn replies_are_read_in_their_order_by_index() {
        // A clean fall, handed over backwards: still a fall.
        let mut replies = run(12, |i| 100.0 * (1.0 - 0.02 * i as f64), |_| 200.0);
        replies.reverse();
        let lines = drift_lines(&replies, DEFAULT_MAX_DRIFT);
        let drift = line(&lines, "drift");
        assert_eq!(drift.status, Status::Fail, "{}", drift.text);
        assert!(drift.text.contains("reply by reply"), "{}", drift.text);
    }

    #[test]
    fn a_fall_beyond_the_limit_that_is_not_sure_is_information() {
        // 8 replies that end lower but swing widely: Sen's slope says more than 10%, the test
        // cannot be sure of it.
        let rates = [100.0, 130.0, 70.0, 120.0, 65.0, 110.0, 60.0, 95.0];
        let replies = run(8, |i| rates[i], |_| 200.0);
        let lines = drift_lines(&replies, DEFAULT_MAX_DRIFT);
        let drift = line(&lines, "drift");
        let f = drift.figures.as_ref().unwrap();
        assert!(f.drift.unwrap() < -0.10, "{:?}", f.drift);
        assert!(f.drift_p.unwrap() >= LEVEL);
        assert_eq!(drift.status, Status::Info);
        assert!(
            drift
                .text
                .contains("beyond the 10% --max-drift, but not surely"),
            "{}",
            drift.text
        );
    }

    #[test]
    fn a_rising_rate_and_a_rising_first_token_are_said_as_such() {
        let replies = run(
            20,
            |i| 100.0 * (1.0 + 0.02 * i as f64),
            |i| 200.0 * (1.0 + 0.03 * i as f64),
        );
        let lines = drift_lines(&replies, DEFAULT_MAX_DRIFT);
        let drift = line(&lines, "drift");
        assert_eq!(drift.status, Status::Info);
        assert!(
            drift.text.starts_with("the decode rate rose ")
                && drift.text.ends_with("faster as the run went on"),
            "{}",
            drift.text
        );
        let ft = line(&lines, "first-token-drift");
        assert_eq!(ft.status, Status::Info);
        assert!(
            ft.text.starts_with("the first-token time rose ")
                && ft
                    .text
                    .contains("(information: first-token drift never fails)"),
            "{}",
            ft.text
        );
        // Falling first-token times: faster.
        let replies = run(20, |_| 100.0, |i| 200.0 * (1.0 - 0.01 * i as f64));
        let ft = drift_lines(&replies, DEFAULT_MAX_DRIFT)
            .into_iter()
            .find(|l| l.check == "first-token-drift")
            .unwrap();
        assert!(
            ft.text.starts_with("the first-token time fell "),
            "{}",
            ft.text
        );
    }

    #[test]
    fn the_figures_read_back_and_print_as_the_lines_say() {
        assert_eq!(p_text(0.41), "p = 0.41");
        assert_eq!(p_text(0.032), "p = 0.032");
        assert_eq!(p_text(0.0004), "p = 0.0004");
        assert_eq!(p_text(0.00001), "p < 0.0001");
        assert_eq!(percent(0.10), "10%");
        assert_eq!(percent(0.125), "12.5%");
        assert_eq!(signed(-0.012), "-1.2%");
        assert_eq!(signed(0.004), "+0.4%");
        assert_eq!(duration(45_000_000_000), "45 s");
        assert_eq!(duration(600_000_000_000), "10 min");
        assert_eq!(duration(9_000_000_000_000), "2.5 h");
        // Without a span of the run's clock (every reply sent at 0), no time is said.
        let mut replies = run(10, |i| 100.0 - i as f64, |_| 200.0);
        for r in &mut replies {
            let shift = r.sent_ns;
            r.sent_ns = 0;
            r.end_ns -= shift;
            for c in &mut r.chunks {
                c.at_ns -= shift;
            }
        }
        let lines = drift_lines(&replies, DEFAULT_MAX_DRIFT);
        let drift = line(&lines, "drift");
        assert!(
            drift.text.contains("over 10 replies in 0 s")
                || drift.text.contains("over 10 replies ("),
            "{}",
            drift.text
        );
        let json = serde_json::to_string(&drift.figures).unwrap();
        let back: Figures = serde_json::from_str(&json).unwrap();
        assert_eq!(Some(back), drift.figures);
    }
}
