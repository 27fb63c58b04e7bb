//! Judging cases: the verdict function over hand-made runs, each line ok and FAIL, the
//! boundaries, and the load line. Shipped in the binary so `self-test` can run them on any
//! box; `cargo test` runs the same table.
//!
//! # Layout
//! `case.rs`: a case (data only); `judged.rs`: its check against the verdict; `parts.rs`:
//! what the hand-made runs are built of, and the base case. `case.rs` and `parts.rs` never
//! reach the verdict, so a line module ([`crate::lines`]) makes its cases of them. Each other
//! file a family of cases, a function each, which [`all`] puts in one table in a fixed order
//! with the line modules' (the self-test's and the report's tests name cases from it).

mod bursts;
mod busy;
pub(crate) mod case;
mod content;
mod context;
mod determinism;
mod drift;
mod floors;
mod footprint;
mod interval;
mod judged;
mod latency;
mod output;
pub(crate) mod parts;
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

/// The cases of the lines that are modules of their own ([`crate::lines`]), in the
/// registry's order.
macro_rules! registered_cases {
    ($($module:ident: $check:ident after $after:ident { $($entry:tt)* };)*) => {
        fn registered_cases() -> Vec<Case> {
            let mut cases = Vec::new();
            $(cases.extend(crate::lines::$module::cases());)*
            cases
        }
    };
}
crate::lines::every_line!(registered_cases);

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
        registered_cases(),
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
