//! The figures the peers' reports give (issue 21, item 5): TTFT, ITL, TPOT and E2EL, each as
//! count, mean and the 50th, 90th and 99th percentiles, so that a run's numbers can be set
//! beside vLLM's `vllm bench serve` (vllm-project/vllm, `vllm/benchmarks/serve.py`,
//! `calculate_metrics`) or guidellm's for the same serve.
//!
//! The definitions are vLLM's, per reply that finished without error:
//! - TTFT: from the request's send to its first token (here, its first text event).
//! - TTFO: from the request's send to its first content token, the first event with content
//!   or a tool call's fragment, reasoning left out: aiperf's "time to first output token"
//!   (ai-dynamo/aiperf#359, `time_to_first_output_token`), guidellm's TTFOT
//!   (vllm-project/guidellm#760). One a reply that had a content token; equal to TTFT for a
//!   reply that does not reason first.
//! - ITL: every gap between consecutive text events of a reply, pooled over all the replies
//!   (vLLM's `itls += outputs[i].itl`), so a long reply weighs more than a short one.
//! - E2EL: from the request's send to its last data event (vLLM's `latency` is
//!   `most_recent_timestamp - st`, the last chunk before `[DONE]`).
//! - TPOT: per reply, (E2EL - TTFT) / (output tokens - 1); a reply of one token or none has
//!   none (vLLM appends a TPOT only when `output_len > 1`). Output tokens are
//!   [`measure`]'s: the serve's usage count where believed, else the text events.
//!
//! Percentiles interpolate linearly between order statistics: Hyndman & Fan (1996), "Sample
//! quantiles in statistical packages", The American Statistician 50(4), definition 7; numpy's
//! default (`method="linear"`), which vLLM's `np.percentile` uses.
//!
//! Pure: replies in, figures out.

use crate::archive::record::{Percentiles, ReplyRecord};
use crate::judging::measure::measure;

/// The `q`-th percentile (0 to 100) of `values` by Hyndman & Fan's definition 7: with the
/// values sorted, x at h = (n - 1) q / 100, interpolated linearly between x[floor h] and
/// x[floor h + 1]. `None` when there are no values or `q` is outside 0..=100.
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile_of_sorted(&sorted, q)
}

fn percentile_of_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&q) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q / 100.0;
    let below = h.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    let fraction = h - below as f64;
    Some(sorted[below] + fraction * (sorted[above] - sorted[below]))
}

impl Percentiles {
    /// The count, mean, p50, p90 and p99 of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Percentiles> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q| percentile_of_sorted(&sorted, q);
        Some(Percentiles {
            count: sorted.len(),
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            p50: at(50.0)?,
            p90: at(90.0)?,
            p99: at(99.0)?,
        })
    }
}

/// The four distributions over a run's replies, and what they rest on.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyFigures {
    /// Time to first token, ms, one a reply with text.
    pub ttft_ms: Option<Percentiles>,
    /// Time to first content token (TTFO), ms, one a reply with content or a tool call.
    pub ttfo_ms: Option<Percentiles>,
    /// The timed replies whose first content token came after their first token (they
    /// reasoned first).
    pub reasoned_first: usize,
    /// Inter-token latency, ms, every gap between text events, pooled.
    pub itl_ms: Option<Percentiles>,
    /// Time per output token after the first, ms, one a reply of two tokens or more.
    pub tpot_ms: Option<Percentiles>,
    /// End-to-end latency, ms, one a reply with any data event.
    pub e2el_ms: Option<Percentiles>,
    /// The replies timed: those that finished without error.
    pub timed: usize,
    /// Of them, a burst's streams (`--concurrency`).
    pub burst_streams: usize,
    /// All the replies given, failed ones included.
    pub replies: usize,
}

/// The latency figures of `replies` (warm-ups already left out by the caller). A reply that
/// failed is left out, as vLLM leaves out a request that did not succeed: its times are of a
/// stream cut short, not of the serve's answer. Single-stream replies and a burst's streams are
/// pooled, as vLLM pools every request of a benchmark whatever its concurrency.
pub fn latency_figures(replies: &[ReplyRecord]) -> LatencyFigures {
    let mut ttft = Vec::new();
    let mut ttfo = Vec::new();
    let mut reasoned_first = 0;
    let mut itl = Vec::new();
    let mut tpot = Vec::new();
    let mut e2el = Vec::new();
    let mut timed = 0;
    let mut burst_streams = 0;
    for r in replies.iter().filter(|r| r.error.is_none()) {
        timed += 1;
        burst_streams += usize::from(r.burst.is_some());
        let t = reply_times(r);
        itl.extend(t.gaps_ms);
        e2el.extend(t.e2el_ms);
        ttft.extend(t.ttft_ms);
        ttfo.extend(t.ttfo_ms);
        reasoned_first += usize::from(matches!(
            (t.ttft_ms, t.ttfo_ms),
            (Some(any), Some(content)) if content > any
        ));
        tpot.extend(t.tpot_ms);
    }
    LatencyFigures {
        ttft_ms: Percentiles::of(&ttft),
        ttfo_ms: Percentiles::of(&ttfo),
        reasoned_first,
        itl_ms: Percentiles::of(&itl),
        tpot_ms: Percentiles::of(&tpot),
        e2el_ms: Percentiles::of(&e2el),
        timed,
        burst_streams,
        replies: replies.len(),
    }
}

/// One reply's latency figures, ms, each `None` where the reply has none: what the latency
/// line pools over the replies and the goodput line holds each reply to (its SLO).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplyTimes {
    /// Time to first token.
    pub ttft_ms: Option<f64>,
    /// Time to first content token (TTFO).
    pub ttfo_ms: Option<f64>,
    /// Every gap between consecutive text events, in order (the latency line pools them).
    pub gaps_ms: Vec<f64>,
    /// Their mean, (last text event - first) / (text events - 1), two text events or more:
    /// aiperf's per-request inter-token latency.
    pub itl_ms: Option<f64>,
    /// Time per output token after the first, (E2EL - TTFT) / (tokens - 1), two output tokens
    /// or more.
    pub tpot_ms: Option<f64>,
    /// Send to the last data event.
    pub e2el_ms: Option<f64>,
}

/// `reply`'s latency figures, as the module's head defines them.
pub fn reply_times(reply: &ReplyRecord) -> ReplyTimes {
    let ms = |ns: u64| ns as f64 / 1e6;
    let m = measure(reply);
    let texts: Vec<u64> = reply
        .chunks
        .iter()
        .filter(|c| c.has_text())
        .map(|c| c.at_ns)
        .collect();
    let gaps_ms: Vec<f64> = texts
        .windows(2)
        .map(|w| ms(w[1].saturating_sub(w[0])))
        .collect();
    let itl_ms = match (texts.first(), texts.last()) {
        (Some(&first), Some(&last)) if texts.len() >= 2 => {
            Some(ms(last.saturating_sub(first)) / (texts.len() - 1) as f64)
        }
        _ => None,
    };
    let e2el_ms = reply
        .chunks
        .iter()
        .map(|c| c.at_ns)
        .max()
        .map(|last| ms(last.saturating_sub(reply.sent_ns)));
    let tpot_ms = match (e2el_ms, m.first_token_ms) {
        (Some(latency), Some(first)) if m.tokens > 1.0 => {
            Some((latency - first) / (m.tokens - 1.0))
        }
        _ => None,
    };
    ReplyTimes {
        ttft_ms: m.first_token_ms,
        ttfo_ms: m.first_content_token_ms,
        gaps_ms,
        itl_ms,
        tpot_ms,
        e2el_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::measure::tests::reply_at;

    #[test]
    fn percentiles_match_numpys_documented_examples() {
        // numpy.percentile's docs: a = [[10, 7, 4], [3, 2, 1]]; np.percentile(a, 50) is 3.5,
        // along axis 0 [6.5, 4.5, 2.5], along axis 1 [7, 2].
        assert_eq!(
            percentile(&[10.0, 7.0, 4.0, 3.0, 2.0, 1.0], 50.0),
            Some(3.5)
        );
        for (column, want) in [([10.0, 3.0], 6.5), ([7.0, 2.0], 4.5), ([4.0, 1.0], 2.5)] {
            assert_eq!(percentile(&column, 50.0), Some(want));
        }
        assert_eq!(percentile(&[10.0, 7.0, 4.0], 50.0), Some(7.0));
        assert_eq!(percentile(&[3.0, 2.0, 1.0], 50.0), Some(2.0));
    }

    #[test]
    fn percentiles_match_excels_inclusive_percentile() {
        // Definition 7 is also Excel's PERCENTILE.INC; Microsoft's documented example: the
        // 30th percentile of {1, 3, 2, 4} is 1.9 (h = 0.3 x 3 = 0.9, 1 + 0.9 x (2 - 1)).
        let x = percentile(&[1.0, 3.0, 2.0, 4.0], 30.0).unwrap();
        assert!((x - 1.9).abs() < 1e-12, "{x}");
    }

    #[test]
    fn percentiles_at_the_edges() {
        // One value is every percentile; p0 and p100 are the extremes; two values interpolate.
        for q in [0.0, 50.0, 99.0, 100.0] {
            assert_eq!(percentile(&[42.0], q), Some(42.0));
        }
        let v = [5.0, 1.0, 3.0];
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(5.0));
        assert_eq!(percentile(&[10.0, 20.0], 90.0), Some(19.0));
        assert_eq!(percentile(&[10.0, 20.0], 99.0), Some(19.9));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, -1.0), None);
        assert_eq!(percentile(&v, 100.5), None);
        assert_eq!(percentile(&v, f64::NAN), None);
    }

    #[test]
    fn percentiles_of_one_to_a_hundred() {
        // 1..=100: h = 99 q / 100, so p50 = 50.5, p90 = 90.1, p99 = 99.01; mean 50.5.
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let p = Percentiles::of(&v).unwrap();
        assert_eq!((p.count, p.mean, p.p50), (100, 50.5, 50.5));
        assert!((p.p90 - 90.1).abs() < 1e-9, "{p:?}");
        assert!((p.p99 - 99.01).abs() < 1e-9, "{p:?}");
        assert_eq!(Percentiles::of(&[]), None);
    }

    #[test]
    fn the_four_figures_of_known_replies() {
        // Reply 1: first token at 100 ms, 4 more 10 ms apart (last at 140); reply 2: first at
        // 300, 2 more 20 ms apart (last at 340). Both sent at 0.
        let a = reply_at(&[100, 110, 120, 130, 140], None);
        let b = reply_at(&[300, 320, 340], None);
        let f = latency_figures(&[a, b]);
        let ttft = f.ttft_ms.unwrap();
        assert_eq!((ttft.count, ttft.mean, ttft.p50), (2, 200.0, 200.0));
        assert!((ttft.p90 - 280.0).abs() < 1e-9, "{ttft:?}");
        // ITL pooled: four gaps of 10 and two of 20.
        let itl = f.itl_ms.unwrap();
        assert_eq!(itl.count, 6);
        assert!((itl.mean - 40.0 / 3.0).abs() < 1e-9, "{itl:?}");
        assert_eq!(itl.p50, 10.0);
        assert_eq!(itl.p99, 20.0);
        // TPOT per reply: (140 - 100) / 4 = 10 and (340 - 300) / 2 = 20.
        let tpot = f.tpot_ms.unwrap();
        assert_eq!((tpot.count, tpot.mean, tpot.p50), (2, 15.0, 15.0));
        // E2EL: 140 and 340.
        let e2el = f.e2el_ms.unwrap();
        assert_eq!((e2el.count, e2el.mean), (2, 240.0));
        assert_eq!((f.timed, f.burst_streams, f.replies), (2, 0, 2));
    }

    #[test]
    fn tpot_counts_the_serves_tokens_and_e2el_ends_at_the_last_event() {
        // 3 text events carrying 9 tokens (usage) and a usage event 60 ms after the last text:
        // E2EL runs to the usage event (vLLM's last chunk), TPOT is (260 - 100) / 8 = 20.
        let mut r = reply_at(&[100, 150, 200], Some(9));
        r.content = " ok ok ok".repeat(3);
        let mut usage = r.chunks[0].clone();
        usage.at_ns = 260_000_000;
        usage.content_chars = 0;
        r.chunks.push(usage);
        // Each reply's own figures, as the goodput line holds them: ITL its mean gap between
        // text events, (200 - 100) / 2 = 50.
        let t = reply_times(&r);
        assert_eq!(
            (t.tpot_ms, t.itl_ms, t.e2el_ms),
            (Some(20.0), Some(50.0), Some(260.0))
        );
        let f = latency_figures(&[r]);
        assert_eq!(f.e2el_ms.unwrap().p50, 260.0);
        assert_eq!(f.tpot_ms.unwrap().p50, 20.0);
        assert_eq!(f.itl_ms.unwrap().count, 2, "the usage event is no token");
    }

    #[test]
    fn one_token_replies_have_no_tpot_and_failed_replies_are_not_timed() {
        let one = reply_at(&[100], None);
        let mut failed = reply_at(&[900, 950, 1000], None);
        failed.error = Some("the stream broke".into());
        let f = latency_figures(&[one, failed]);
        assert_eq!(f.tpot_ms, None);
        assert_eq!(f.itl_ms, None);
        assert_eq!(f.ttft_ms.unwrap().count, 1);
        assert_eq!(f.e2el_ms.unwrap().p99, 100.0);
        assert_eq!((f.timed, f.replies), (1, 2));
        // No reply with text: no figure, never a zero.
        let f = latency_figures(&[reply_at(&[], None)]);
        assert_eq!((f.ttft_ms, f.tpot_ms, f.e2el_ms), (None, None, None));
    }
}
