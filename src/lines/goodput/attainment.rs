//! SLO attainment (issue 37, item 4): whether each reply met every target of a service level,
//! and the share of replies that did, as the peers count it.
//!
//! The peers:
//! - vLLM's `benchmark_serving.py --goodput ttft:MS tpot:MS e2el:MS` (vllm-project/vllm,
//!   `calculate_metrics`): a request is good when every metric given is at or under its
//!   target (`all([s >= r for s, r in zip(slo_values, req_metric)])`); `request_goodput` is
//!   the good requests a second. A request of one output token has a TPOT of 0 "for goodput".
//! - guidellm (vllm-project/guidellm PR #1085, `GoodputSLO`): the same `ttft_ms`, `tpot_ms`,
//!   `e2el_ms`; `slo_attainment` is the share of requests meeting every objective, and
//!   `request_goodput` their rate. Errored requests count against attainment: a request that
//!   failed did not deliver a response within its objective.
//! - aiperf and genai-perf (`--goodput "time_to_first_token:100 inter_token_latency:3.40"`)
//!   take a per-request inter-token latency target: the request's mean gap after its first
//!   token.
//!
//! A gate reports a share, not a rate: its replies are paced by the gate, so good replies a
//! second would measure the gate's pacing. The share is guidellm's `slo_attainment`; the line
//! is called `goodput`, as the flags of all three peers are.
//!
//! Per reply, each figure as the latency line defines it ([`crate::judging::latency`]):
//! - TTFT: send to the first text event (the first token `measure` finds);
//! - E2EL: send to the last data event;
//! - TPOT: (E2EL - TTFT) / (output tokens - 1), output tokens as `measure` counts them;
//! - ITL: the mean of the reply's gaps between consecutive text events, (last text event -
//!   first) / (text events - 1): aiperf's per-request inter-token latency, and guidellm's,
//!   which its `tpot_ms` objective is compared against ("to the last token received").
//!
//! A reply meets a target when its figure is at or under it (vLLM's `>=`). A reply of one
//! token has no TPOT or ITL and meets those targets, as vLLM counts its TPOT as 0. A reply
//! that failed, or that ended without a token, met no target (guidellm's rule for errors;
//! a reply with no token delivered nothing in time either).
//!
//! Pure: replies in, tallies out.

use super::record::{SloFloors, SloMetric};
use crate::archive::record::ReplyRecord;
pub use crate::judging::latency::{reply_times, ReplyTimes};

/// The figure of `times` for `metric`.
fn figure(times: &ReplyTimes, metric: SloMetric) -> Option<f64> {
    match metric {
        SloMetric::Ttft => times.ttft_ms,
        SloMetric::Itl => times.itl_ms,
        SloMetric::Tpot => times.tpot_ms,
        SloMetric::E2el => times.e2el_ms,
    }
}

/// What one reply did against the SLO.
#[derive(Debug, Clone, PartialEq)]
pub enum Attainment {
    /// Every target met.
    Met,
    /// The reply failed: it met no target.
    Failed,
    /// The reply ended without error and without a token: it met no target.
    NoToken,
    /// Over these targets, with its figure for each, ms.
    Missed(Vec<(SloMetric, f64)>),
}

/// Whether `reply` met every target of `slo`: each figure at or under its target.
pub fn attainment(reply: &ReplyRecord, slo: &SloFloors) -> Attainment {
    if reply.error.is_some() {
        return Attainment::Failed;
    }
    let times = reply_times(reply);
    if times.ttft_ms.is_none() {
        return Attainment::NoToken;
    }
    // A figure the reply cannot have (TPOT or ITL of one token) is met, as vLLM counts it.
    let missed: Vec<(SloMetric, f64)> = slo
        .targets()
        .into_iter()
        .filter_map(|(metric, target)| {
            figure(&times, metric)
                .filter(|&value| value > target)
                .map(|value| (metric, value))
        })
        .collect();
    if missed.is_empty() {
        Attainment::Met
    } else {
        Attainment::Missed(missed)
    }
}

/// One target and the replies over it.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetMisses {
    /// Which figure.
    pub metric: SloMetric,
    /// Its target, ms.
    pub target_ms: f64,
    /// Replies over it.
    pub missed: usize,
    /// The reply furthest over it (its index) and its figure, ms.
    pub worst: Option<(usize, f64)>,
}

/// The replies against the SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct GoodputTally {
    /// Replies held to the SLO.
    pub replies: usize,
    /// Of them, burst streams (`--concurrency`).
    pub burst_streams: usize,
    /// Replies that met every target.
    pub met: usize,
    /// Replies that failed.
    pub failed: usize,
    /// Replies that ended without error and without a token.
    pub no_token: usize,
    /// Each target of the SLO, in [`SloMetric::ALL`]'s order.
    pub targets: Vec<TargetMisses>,
}

/// `replies` (the judged ones: no warm-ups, idle probe or replies at depth) against `slo`.
pub fn goodput(replies: &[ReplyRecord], slo: &SloFloors) -> GoodputTally {
    let mut tally = GoodputTally {
        replies: replies.len(),
        burst_streams: replies.iter().filter(|r| r.burst.is_some()).count(),
        met: 0,
        failed: 0,
        no_token: 0,
        targets: slo
            .targets()
            .into_iter()
            .map(|(metric, target_ms)| TargetMisses {
                metric,
                target_ms,
                missed: 0,
                worst: None,
            })
            .collect(),
    };
    for r in replies {
        match attainment(r, slo) {
            Attainment::Met => tally.met += 1,
            Attainment::Failed => tally.failed += 1,
            Attainment::NoToken => tally.no_token += 1,
            Attainment::Missed(over) => {
                for (metric, value) in over {
                    if let Some(t) = tally.targets.iter_mut().find(|t| t.metric == metric) {
                        t.missed += 1;
                        if t.worst.is_none_or(|(_, worst)| value > worst) {
                            t.worst = Some((r.index, value));
                        }
                    }
                }
            }
        }
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::measure::tests::reply_at;

    fn slo(targets: &[(SloMetric, f64)]) -> SloFloors {
        let mut s = SloFloors::default();
        for &(m, ms) in targets {
            *s.target_mut(m) = Some(ms);
        }
        s
    }

    #[test]
    fn the_figures_of_one_reply_are_the_latency_lines() {
        // First token at 100 ms, 4 more 10 ms apart: TTFT 100, ITL 10, TPOT (140 - 100) / 4,
        // E2EL 140 (latency.rs's `the_four_figures_of_known_replies`, reply 1).
        let t = reply_times(&reply_at(&[100, 110, 120, 130, 140], None));
        assert_eq!(
            t,
            ReplyTimes {
                ttft_ms: Some(100.0),
                ttfo_ms: Some(100.0),
                gaps_ms: vec![10.0; 4],
                itl_ms: Some(10.0),
                tpot_ms: Some(10.0),
                e2el_ms: Some(140.0),
            }
        );
    }

    #[test]
    fn a_figure_exactly_at_its_target_meets_it_and_one_over_misses() {
        let r = reply_at(&[100, 110, 120, 130, 140], None);
        for m in SloMetric::ALL {
            let at = figure(&reply_times(&r), m).unwrap();
            assert_eq!(attainment(&r, &slo(&[(m, at)])), Attainment::Met, "{m}");
            let under = at - 1e-9;
            assert_eq!(
                attainment(&r, &slo(&[(m, under)])),
                Attainment::Missed(vec![(m, at)]),
                "{m}"
            );
        }
    }

    #[test]
    fn one_token_meets_tpot_and_itl_and_no_token_or_an_error_meets_nothing() {
        let all = slo(&[
            (SloMetric::Ttft, 1000.0),
            (SloMetric::Itl, 0.001),
            (SloMetric::Tpot, 0.001),
            (SloMetric::E2el, 1000.0),
        ]);
        assert_eq!(attainment(&reply_at(&[100], None), &all), Attainment::Met);
        assert_eq!(attainment(&reply_at(&[], None), &all), Attainment::NoToken);
        let mut failed = reply_at(&[100], None);
        failed.error = Some("cut".into());
        assert_eq!(attainment(&failed, &all), Attainment::Failed);
    }

    #[test]
    fn the_tally_counts_each_target_and_keeps_the_worst() {
        let mut replies = vec![
            reply_at(&[100, 110], None),
            reply_at(&[700, 710], None),
            reply_at(&[900, 960], None),
            reply_at(&[], None),
            reply_at(&[100], None),
        ];
        replies[4].error = Some("the stream broke".into());
        for (i, r) in replies.iter_mut().enumerate() {
            r.index = i + 1;
        }
        let t = goodput(
            &replies,
            &slo(&[(SloMetric::Ttft, 600.0), (SloMetric::Tpot, 50.0)]),
        );
        assert_eq!(
            (t.replies, t.met, t.failed, t.no_token),
            (5, 1, 1, 1),
            "{t:?}"
        );
        assert_eq!(t.targets[0].metric, SloMetric::Ttft);
        assert_eq!(
            (t.targets[0].missed, t.targets[0].worst),
            (2, Some((3, 900.0)))
        );
        assert_eq!(
            (t.targets[1].missed, t.targets[1].worst),
            (1, Some((3, 60.0)))
        );
    }
}
