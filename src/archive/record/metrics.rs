//! metrics.json: the serve's own metrics (Prometheus text), scraped around the concurrent
//! bursts, each answer's body kept up to a cap.

use crate::archive::tags::Phase;
use serde::{Deserialize, Serialize};

/// The serve's own metrics (Prometheus text), scraped around the bursts: metrics.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsRecord {
    /// The URL scraped.
    pub url: String,
    /// Whether it was given (`--metrics-url`) or the serve's `/metrics` was tried.
    pub given: bool,
    /// Each scrape, in order: before the bursts, at most one during, after.
    pub scrapes: Vec<MetricsScrape>,
}

/// One scrape of the serve's metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsScrape {
    /// `before`, `during` or `after` the bursts.
    pub phase: Phase,
    /// When the answer was read (ns since the clock base).
    pub at_ns: u64,
    /// The HTTP status, when the serve answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The answer's body as text (invalid UTF-8 replaced), at most
    /// [`METRICS_BODY_KEPT`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Whether the body was longer than what is kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Why there is no answer (refused, timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The most bytes of one metrics answer kept: a serve's metrics are a few KiB.
pub const METRICS_BODY_KEPT: usize = 1 << 20;
