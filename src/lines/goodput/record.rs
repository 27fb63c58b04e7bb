//! What the archive keeps of the goodput line (issue 37, item 4): the service level each reply
//! is held to (run.json `floors.slo`, the archive's `LineFloors`) and what the line found
//! (result.json `figures.goodput`, the archive's `LineFigures`). The rules are
//! [`super::attainment`]'s; docs/goodput.md says them. A leaf: the archive holds these.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `--min-goodput`'s default where `--slo` is given: 90% of the replies must meet every target.
pub const DEFAULT_MIN_GOODPUT: f64 = 0.9;

/// The longest SLO target: a day, ms.
pub const MOST_TARGET_MS: f64 = 86_400_000.0;

/// A per-reply figure an SLO can hold replies to, named as vLLM's `--goodput` names them
/// (`ttft`, `tpot`, `e2el`; vllm-project/vllm benchmarks/benchmark_serving.py) and as the
/// latency line names its figures, with ITL added as aiperf's `--goodput` takes
/// `inter_token_latency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SloMetric {
    /// Time to first token.
    Ttft,
    /// Inter-token latency: the reply's mean gap between text events.
    Itl,
    /// Time per output token after the first.
    Tpot,
    /// End-to-end latency.
    E2el,
}

impl SloMetric {
    /// Every metric, in the order the line and `--slo` write them.
    pub const ALL: [SloMetric; 4] = [
        SloMetric::Ttft,
        SloMetric::Itl,
        SloMetric::Tpot,
        SloMetric::E2el,
    ];

    /// As `--slo` and the line write it: `ttft`, `itl`, `tpot`, `e2el`.
    pub const fn name(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Itl => "itl",
            SloMetric::Tpot => "tpot",
            SloMetric::E2el => "e2el",
        }
    }

    /// The metric of this name, whatever its case (`TTFT` as the latency line writes it,
    /// `ttft` as vLLM's `--goodput` does).
    pub fn from_name(name: &str) -> Option<SloMetric> {
        SloMetric::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl fmt::Display for SloMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The service level each judged reply is held to (`--slo`, `--min-goodput`): a target in ms
/// for any of the four figures, and the least share of replies that must meet every target.
/// All absent: no SLO, no goodput line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloFloors {
    /// The longest first token a reply may take, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// The longest mean inter-token gap a reply may have, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<f64>,
    /// The longest time per output token after the first a reply may have, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// The longest a reply may take from its send to its last event, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_ms: Option<f64>,
    /// The least share of judged replies that must meet every target, above 0 and at most 1.
    /// A run with an SLO records it whether given or not, so `judge` reads the run's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_goodput: Option<f64>,
}

impl SloFloors {
    /// Whether nothing is set (nothing to write).
    pub fn is_default(&self) -> bool {
        *self == SloFloors::default()
    }

    /// The targets given, ms, in [`SloMetric::ALL`]'s order.
    pub fn targets(&self) -> Vec<(SloMetric, f64)> {
        SloMetric::ALL
            .into_iter()
            .filter_map(|m| self.target(m).map(|ms| (m, ms)))
            .collect()
    }

    /// The target for `metric`, ms, where given.
    pub fn target(&self, metric: SloMetric) -> Option<f64> {
        match metric {
            SloMetric::Ttft => self.ttft_ms,
            SloMetric::Itl => self.itl_ms,
            SloMetric::Tpot => self.tpot_ms,
            SloMetric::E2el => self.e2el_ms,
        }
    }

    /// A place for `metric`'s target.
    pub fn target_mut(&mut self, metric: SloMetric) -> &mut Option<f64> {
        match metric {
            SloMetric::Ttft => &mut self.ttft_ms,
            SloMetric::Itl => &mut self.itl_ms,
            SloMetric::Tpot => &mut self.tpot_ms,
            SloMetric::E2el => &mut self.e2el_ms,
        }
    }
}

/// The goodput line's figures (result.json `figures.goodput`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoodputFigures {
    /// The judged replies held to the SLO: single-stream replies and burst streams, failed
    /// ones included.
    pub replies: usize,
    /// Of them, those that met every target.
    pub met: usize,
    /// `met / replies`, guidellm's `slo_attainment`; absent without replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_attainment: Option<f64>,
    /// Its exact (Clopper-Pearson) 95% interval, low and high.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_95: Option<[f64; 2]>,
    /// The least share required (`--min-goodput`).
    pub min_goodput: f64,
    /// Replies that failed: each met no target.
    pub failed: usize,
    /// Replies that ended without error and without a token: each met no target.
    pub no_token: usize,
    /// Each target, with the replies that missed it.
    pub targets: Vec<TargetFigures>,
}

/// One target of the SLO and the replies that missed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetFigures {
    /// Which figure.
    pub metric: SloMetric,
    /// The target, ms.
    pub target_ms: f64,
    /// Replies whose figure was over it (failed replies and replies with no token are counted
    /// apart, in `failed` and `no_token`).
    pub missed: usize,
    /// The reply furthest over it, and its figure in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_reply: Option<usize>,
    /// Its figure, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_ms: Option<f64>,
}
