//! Judging: what a recorded run means. Measurement of a recorded reply and the statistics
//! (median and its interval) in [`measure`]; the peers' latency figures (TTFT, ITL, TPOT,
//! E2EL percentiles) in [`latency`]; a candidate against an accepted baseline (the
//! Hodges-Lehmann shift, its interval and the decision) in [`baseline`], the order statistics
//! of its pairwise differences selected without making them in [`pairwise`]; whether a figure
//! drifted over the run (Mann-Kendall, Sen's slope, blocks) in [`drift`]; how fast a
//! figure grows per reply (Sen's slope with its interval, for a leak) in [`growth`]; a rate
//! of trials with its exact interval (Clopper-Pearson) in [`proportion`]; the serve's log
//! scanned as a stream in [`serve_log`]; the verdict in [`verdict`], one file per line family;
//! an archived run judged in [`archived`]; what differs between two runs' provenance in
//! [`provenance`]; the serve's own Prometheus metrics set against what the gate counted over
//! the concurrent bursts in [`verdict::metrics`] (the text read by
//! [`crate::wire::prom_text`]).
//!
//! Pure: it reads archive types and returns values. No tokio, `std::fs`, `std::net`,
//! `std::process` or nix; never live or report. `tests/layers.rs` checks this.

pub mod archived;
pub mod baseline;
pub mod drift;
pub mod growth;
pub mod latency;
pub mod measure;
pub(crate) mod pairwise;
pub mod prompt_cache;
pub mod proportion;
pub mod provenance;
pub mod serve_log;
#[cfg(test)]
pub(crate) mod test_rng;
pub mod verdict;
