//! The concurrent bursts' lines: whether a burst's streams ran together (`overlap`), and what
//! they made together (`aggregate`), against `--aggregate-floor` and `--min-speedup`.
//!
//! A serve that runs the streams one after another is the fault this catches: each stream on
//! its own looks healthy, and content and the per-stream rate pass. So overlap is read from
//! the streams' own stamps (their decode windows, first text to last), never from what the
//! serve says, and it is never put down to a busy box: a busy box slows streams, it does not
//! queue them. The aggregate is timing, and may be.

use crate::archive::check::Check;
use crate::archive::record::Unit;
use crate::archive::record::{ConcurrencyPlan, Figures, Line, ReplyRecord, Status};
use crate::judging::measure::{measure, median};

/// What one burst's streams show, from their stamps.
#[derive(Debug, Clone, PartialEq)]
pub struct BurstFigures {
    /// The burst, from 1.
    pub round: usize,
    /// Its streams that were recorded.
    pub streams: usize,
    /// Its streams with a decode window: text in at least two reads.
    pub windows: usize,
    /// The most streams decoding at once: inside their windows (first text to last) at the
    /// same moment. 1 when each began after the one before had ended.
    pub peak: usize,
    /// The burst's decode rate: every stream's tokens after its first, over the latest last
    /// text less the earliest first text (tok/s); `None` without two reads of text.
    pub aggregate_tok_s: Option<f64>,
    /// The longest a request of the burst took to be written after the release, ms: the
    /// gate's own dispatch delay.
    pub dispatch_ms: Option<f64>,
}

/// The figures of each burst `replies` hold, in burst order.
pub fn burst_figures(replies: &[ReplyRecord]) -> Vec<BurstFigures> {
    let mut rounds: Vec<usize> = replies
        .iter()
        .filter_map(|r| r.burst.map(|b| b.round))
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds
        .into_iter()
        .map(|round| {
            let streams: Vec<&ReplyRecord> = replies
                .iter()
                .filter(|r| r.burst.is_some_and(|b| b.round == round))
                .collect();
            figures_of(round, &streams)
        })
        .collect()
}

fn figures_of(round: usize, streams: &[&ReplyRecord]) -> BurstFigures {
    let mut windows = Vec::new();
    let mut decoded = 0.0;
    let (mut earliest, mut latest) = (u64::MAX, 0u64);
    for r in streams {
        let m = measure(r);
        if let (Some(first), Some(last)) = (m.first_ns, m.last_ns) {
            earliest = earliest.min(first);
            latest = latest.max(last);
            decoded += m.tokens - m.first_chunk_tokens;
            if last > first {
                windows.push((first, last));
            }
        }
    }
    let aggregate_tok_s = (latest > earliest && earliest != u64::MAX)
        .then(|| decoded / ((latest - earliest) as f64 / 1e9));
    let dispatch_ms = streams
        .iter()
        .filter_map(|r| {
            r.written_ns
                .map(|w| w.saturating_sub(r.sent_ns) as f64 / 1e6)
        })
        .reduce(f64::max);
    BurstFigures {
        round,
        streams: streams.len(),
        windows: windows.len(),
        peak: peak_at_once(&windows),
        aggregate_tok_s,
        dispatch_ms,
    }
}

/// The most of `windows` (start, end) open at one moment. A window that ends where another
/// starts does not overlap it.
pub fn peak_at_once(windows: &[(u64, u64)]) -> usize {
    // Ends sort before starts at the same moment (false < true).
    let mut edges: Vec<(u64, bool)> = windows
        .iter()
        .flat_map(|&(start, end)| [(start, true), (end, false)])
        .collect();
    edges.sort_unstable();
    let (mut open, mut peak) = (0usize, 0usize);
    for (_, starts) in edges {
        if starts {
            open += 1;
            peak = peak.max(open);
        } else {
            open = open.saturating_sub(1);
        }
    }
    peak
}

/// The overlap line: FAIL when a burst's streams ran one after another, or when no burst had
/// two streams to tell by.
pub(crate) fn overlap_line(bursts: &[BurstFigures], plan: &ConcurrencyPlan) -> Line {
    let judged: Vec<&BurstFigures> = bursts.iter().filter(|b| b.windows >= 2).collect();
    let figures = Figures {
        values: Some(judged.len()),
        peak_streams: judged.iter().map(|b| b.peak).max(),
        ..Figures::default()
    };
    if judged.is_empty() {
        return Line::new(
            Check::Overlap,
            Status::Fail,
            format!(
                "no burst had two streams whose text came in at least two reads ({} of {} bursts recorded): whether the serve runs {} streams together is unknown",
                bursts.len(),
                plan.rounds,
                plan.streams
            ),
        )
        .with(figures);
    }
    let serial: Vec<String> = judged
        .iter()
        .filter(|b| b.peak <= 1)
        .map(|b| b.round.to_string())
        .collect();
    if !serial.is_empty() {
        let which = match serial.len() {
            n if n == judged.len() => format!("in every burst ({n})"),
            _ => format!("in burst {}", serial.join(", ")),
        };
        return Line::new(
            Check::Overlap,
            Status::Fail,
            format!(
                "the serve ran the streams one after another, not together: {which}, no two of the {} streams were decoding at once (each began after the one before had ended)",
                plan.streams
            ),
        )
        .with(figures);
    }
    let low = judged.iter().map(|b| b.peak).min().unwrap_or(0);
    let high = judged.iter().map(|b| b.peak).max().unwrap_or(0);
    let at_once = if low == high {
        format!("{high}")
    } else {
        format!("{low} to {high}")
    };
    let over = if judged.len() == bursts.len() {
        format!("in each of the {} bursts", judged.len())
    } else {
        format!(
            "in each of the {} bursts with two streams to tell by (of {})",
            judged.len(),
            bursts.len()
        )
    };
    Line::new(
        Check::Overlap,
        Status::Ok,
        format!(
            "the streams ran together: {at_once} of {} streams decoding at once {over}",
            plan.streams
        ),
    )
    .with(figures)
}

/// The aggregate line: the bursts' median aggregate rate, and its speedup over the
/// single-stream median rate. FAIL below `floor` or `min_speedup` where given; ok where given
/// and met; info where neither is given.
pub(crate) fn aggregate_line(
    bursts: &[BurstFigures],
    replies: &[ReplyRecord],
    plan: &ConcurrencyPlan,
    floor: Option<f64>,
    min_speedup: Option<f64>,
) -> Line {
    let aggregates: Vec<f64> = bursts.iter().filter_map(|b| b.aggregate_tok_s).collect();
    let single: Vec<f64> = replies
        .iter()
        .filter(|r| r.burst.is_none())
        .filter_map(|r| measure(r).rate_tok_s)
        .collect();
    let single_median = median(&single);
    let agg_median = median(&aggregates);
    let speedup = match (agg_median, single_median) {
        (Some(a), Some(s)) if s > 0.0 => Some(a / s),
        _ => None,
    };
    let dispatch = bursts.iter().filter_map(|b| b.dispatch_ms).reduce(f64::max);
    let figures = Figures {
        unit: Some(Unit::TokensPerSecond),
        median: agg_median,
        values: Some(aggregates.len()),
        floor,
        speedup,
        min_speedup,
        dispatch_ms: dispatch,
        ..Figures::default()
    };
    let asked = floor.is_some() || min_speedup.is_some();
    let Some(agg) = agg_median else {
        let status = if asked { Status::Fail } else { Status::Info };
        return Line::new(
            Check::Aggregate,
            status,
            format!(
                "no burst has an aggregate rate: its streams' text did not come in at least two reads ({} of {} bursts recorded)",
                bursts.len(),
                plan.rounds
            ),
        )
        .with(figures);
    };
    let mut text = format!(
        "median {agg:.1} tok/s over {} {} of {} streams",
        aggregates.len(),
        if aggregates.len() == 1 {
            "burst"
        } else {
            "bursts"
        },
        plan.streams
    );
    let mut failed = Vec::new();
    match (speedup, single_median) {
        (Some(x), Some(s)) => {
            text.push_str(&format!(", {x:.2}x the single-stream median {s:.1} tok/s"));
            if x <= 1.0 {
                text.push_str(&format!(
                    ": no better than one stream, so the serve gained nothing by running {} at once",
                    plan.streams
                ));
            }
        }
        _ => text.push_str(", with no single-stream rate to compare it with"),
    }
    if let Some(f) = floor {
        text.push_str(&format!(" (floor {f:.1}"));
        if agg < f {
            failed.push("below the floor");
        }
        if let Some(m) = min_speedup {
            text.push_str(&format!("; speedup at least {m:.2}x"));
        }
        text.push(')');
    } else if let Some(m) = min_speedup {
        text.push_str(&format!(" (speedup at least {m:.2}x)"));
    }
    if let Some(m) = min_speedup {
        match speedup {
            Some(x) if x >= m => {}
            Some(_) => failed.push("short of the speedup"),
            None => failed.push("no speedup to hold to --min-speedup"),
        }
    }
    if let Some(d) = dispatch {
        text.push_str(&format!(
            "; the gate wrote every request within {d:.1} ms of its burst's release"
        ));
    }
    if !failed.is_empty() {
        text = format!("{}: {text}", failed.join(" and "));
    }
    let status = match (failed.is_empty(), asked) {
        (false, _) => Status::Fail,
        (true, true) => Status::Ok,
        (true, false) => Status::Info,
    };
    Line::new(Check::Aggregate, status, text).with(figures)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::BurstSlot;
    use crate::judging::measure::tests::reply_at;

    /// A burst's stream released at 0 whose text arrives at `at_ms`.
    fn stream(round: usize, stream: usize, at_ms: &[u64]) -> ReplyRecord {
        let mut r = reply_at(at_ms, None);
        r.burst = Some(BurstSlot { round, stream });
        r.written_ns = Some(500_000);
        r
    }

    const PLAN: ConcurrencyPlan = ConcurrencyPlan {
        streams: 2,
        rounds: 1,
    };

    #[test]
    fn windows_that_only_touch_do_not_overlap() {
        assert_eq!(peak_at_once(&[]), 0);
        assert_eq!(peak_at_once(&[(0, 10), (10, 20)]), 1);
        assert_eq!(peak_at_once(&[(0, 10), (9, 20)]), 2);
        assert_eq!(peak_at_once(&[(0, 30), (5, 10), (8, 20), (25, 40)]), 3);
    }

    #[test]
    fn two_streams_decoding_together_overlap_and_add_up() {
        // Each: 11 text events 10 ms apart from 100 ms: 10 tokens after its first over 100 ms.
        let times: Vec<u64> = (0..11).map(|i| 100 + 10 * i).collect();
        let replies = [stream(1, 1, &times), stream(1, 2, &times)];
        let b = burst_figures(&replies);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].windows, b[0].peak), (2, 2));
        // 20 tokens over 100 ms.
        assert!((b[0].aggregate_tok_s.unwrap() - 200.0).abs() < 1e-9);
        assert_eq!(b[0].dispatch_ms, Some(0.5));
        let line = overlap_line(&b, &PLAN);
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        assert!(
            line.text.contains("2 of 2 streams decoding at once"),
            "{}",
            line.text
        );
    }

    #[test]
    fn streams_one_after_another_fail_overlap_in_plain_words() {
        let first: Vec<u64> = (0..11).map(|i| 100 + 10 * i).collect();
        let second: Vec<u64> = (0..11).map(|i| 300 + 10 * i).collect();
        let replies = [stream(1, 1, &first), stream(1, 2, &second)];
        let b = burst_figures(&replies);
        assert_eq!(b[0].peak, 1);
        let line = overlap_line(&b, &PLAN);
        assert_eq!(line.status, Status::Fail);
        assert!(line.text.contains("one after another"), "{}", line.text);
        // 20 tokens from 100 to 400 ms: 66.7 tok/s, against one stream's 100.
        assert!((b[0].aggregate_tok_s.unwrap() - 20.0 / 0.3).abs() < 1e-9);
    }

    #[test]
    fn without_two_windows_overlap_cannot_tell_and_fails() {
        let replies = [stream(1, 1, &[100]), stream(1, 2, &[100, 110])];
        let line = overlap_line(&burst_figures(&replies), &PLAN);
        assert_eq!(line.status, Status::Fail);
        assert!(line.text.contains("unknown"), "{}", line.text);
    }

    /// Single-stream replies at 100 tok/s, and one burst of two at `burst_gap_ms` a token.
    fn run(burst_gap_ms: u64) -> Vec<ReplyRecord> {
        let single: Vec<u64> = (0..11).map(|i| 100 + 10 * i).collect();
        let burst: Vec<u64> = (0..11).map(|i| 100 + burst_gap_ms * i).collect();
        vec![
            reply_at(&single, None),
            stream(1, 1, &burst),
            stream(1, 2, &burst),
        ]
    }

    #[test]
    fn the_aggregate_is_information_until_a_floor_or_speedup_is_asked() {
        // Two streams at 12 ms a token: 20 tokens over 120 ms together, 1.67x one stream's 100.
        let replies = run(12);
        let b = burst_figures(&replies);
        let info = aggregate_line(&b, &replies, &PLAN, None, None);
        assert_eq!(info.status, Status::Info, "{}", info.text);
        let f = info.figures.as_ref().unwrap();
        let x = f.speedup.unwrap();
        assert!(x > 1.0, "{x}");
        let ok = aggregate_line(&b, &replies, &PLAN, Some(100.0), Some(x));
        assert_eq!(ok.status, Status::Ok, "{}", ok.text);
        let short = aggregate_line(&b, &replies, &PLAN, None, Some(x + 0.01));
        assert_eq!(short.status, Status::Fail, "{}", short.text);
        assert!(
            short.text.starts_with("short of the speedup"),
            "{}",
            short.text
        );
        let agg = f.median.unwrap();
        let below = aggregate_line(&b, &replies, &PLAN, Some(agg + 0.1), None);
        assert_eq!(below.status, Status::Fail, "{}", below.text);
        assert!(below.text.starts_with("below the floor"), "{}", below.text);
        assert_eq!(
            aggregate_line(&b, &replies, &PLAN, Some(agg), None).status,
            Status::Ok,
            "a floor met exactly"
        );
    }

    #[test]
    fn an_aggregate_no_better_than_one_stream_says_so() {
        // Two streams at 20 ms a token: 100 tok/s together, what one stream made alone.
        let replies = run(20);
        let b = burst_figures(&replies);
        let line = aggregate_line(&b, &replies, &PLAN, None, None);
        assert!(
            line.text.contains("no better than one stream"),
            "{}",
            line.text
        );
        let faster = run(10);
        let line = aggregate_line(&burst_figures(&faster), &faster, &PLAN, None, None);
        assert!(!line.text.contains("no better"), "{}", line.text);
    }

    #[test]
    fn a_speedup_asked_of_a_run_without_single_stream_rates_fails() {
        let burst: Vec<u64> = (0..11).map(|i| 100 + 10 * i).collect();
        let replies = [stream(1, 1, &burst), stream(1, 2, &burst)];
        let b = burst_figures(&replies);
        let line = aggregate_line(&b, &replies, &PLAN, None, Some(1.5));
        assert_eq!(line.status, Status::Fail, "{}", line.text);
        assert!(line.text.contains("no single-stream rate"), "{}", line.text);
    }
}
