//! Judging cases: the verdict function over hand-made runs, each line ok and FAIL, the
//! boundaries, and the load line. Shipped in the binary so `self-test` can run them on any
//! box; `cargo test` runs the same table.
//!
//! # Layout
//! `case.rs`: a case and its check; `parts.rs`: what the hand-made runs are built of, and the
//! base case; each other file a family of cases, a function each, which [`all`] puts in one
//! table in a fixed order (the self-test's and the report's tests name cases from it).

mod bursts;
mod busy;
mod case;
mod content;
mod context;
mod determinism;
mod drift;
mod floors;
mod footprint;
mod goodput;
mod interval;
mod latency;
mod output;
mod parts;
mod reference;
mod route;
mod serve;
mod tools;

pub use case::{Case, ReferenceCase};
use parts::base;

#[cfg(test)]
pub(crate) use parts::archive_of;
/// The hand-made reply and run.json other modules' tests build their runs of.
#[cfg(test)]
pub(crate) use parts::{floors, greedy_manifest, reply};

/// The judging case named `name`.
pub fn named(name: &str) -> Option<Case> {
    all().into_iter().find(|c| c.name == name)
}

/// Every judging case, family by family.
pub fn all() -> Vec<Case> {
    [
        vec![base("a good run passes")],
        reference::cases(),
        output::cases(),
        floors::cases(),
        content::answers(),
        content::chunks(),
        serve::startup(),
        serve::ending(),
        busy::cases(),
        drift::cases(),
        interval::cases(),
        route::cases(),
        serve::interrupted(),
        bursts::cases(),
        latency::cases(),
        goodput::cases(),
        bursts::failed_stream(),
        determinism::cases(),
        footprint::memory(),
        footprint::device(),
        footprint::readiness(),
        context::fact(),
        context::limit(),
        context::rates(),
        tools::cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_judging_case_passes() {
        let failed: Vec<String> = super::all()
            .iter()
            .filter_map(|c| c.check().err().map(|e| format!("{}: {e}", c.name)))
            .collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }
}
