//! A judging case: a hand-made run and what its verdict must say (data only, built of the
//! archive's types, so a line module can make its cases; `judged.rs` checks one against the
//! other).

use crate::archive::check::Check;
use crate::archive::record::InterruptSignal;
use crate::archive::record::{
    ConcurrencyPlan, LoadSnapshot, ReanchorRecord, ReplyRecord, RouteRecord, RunManifest, Startup,
    StopRecord,
};
use crate::archive::record::{Floors, Outcome, Status};

/// One hand-made run and what its verdict must say.
pub struct Case {
    /// What the case shows.
    pub name: &'static str,
    pub(crate) replies: Vec<ReplyRecord>,
    pub(crate) planned: Option<usize>,
    pub(crate) startup: Startup,
    pub(crate) log: Option<&'static str>,
    pub(crate) load: Option<LoadSnapshot>,
    pub(crate) interrupted: Option<InterruptSignal>,
    pub(crate) hold_not_acquired: Option<&'static str>,
    pub(crate) stop: Option<StopRecord>,
    pub(crate) serve_died: Option<&'static str>,
    /// route.json; `None`: the run recorded none.
    pub(crate) route: Option<RouteRecord>,
    /// The concurrent bursts the run planned; `None`: one stream at a time.
    pub(crate) concurrency: Option<ConcurrencyPlan>,
    /// A reference run to hold the answers to (`--reference`); `None`: none asked for.
    pub(crate) reference: Option<ReferenceCase>,
    /// The run's run.json (its prompts' `stops`); `None`: a hand-made run without one.
    pub(crate) manifest: Option<RunManifest>,
    pub(crate) floors: Floors,
    /// Lines that must be there: check, status, and a fragment of the text.
    pub(crate) expect: Vec<(Check, Status, &'static str)>,
    /// Checks that must have no line.
    pub(crate) absent: Vec<Check>,
    /// Lines whose text must not contain a fragment.
    pub(crate) refuse: Vec<(Check, &'static str)>,
    pub(crate) outcome: Outcome,
}

/// A reference run (a trusted build's answers with their logprobs) and the candidate's run.json.
pub struct ReferenceCase {
    pub(crate) candidate: RunManifest,
    pub(crate) reference: RunManifest,
    pub(crate) replies: Vec<ReplyRecord>,
    /// The re-anchors the candidate's run made past divergences (reanchors.json).
    pub(crate) reanchors: Vec<ReanchorRecord>,
    /// Known-good builds' runs against the same reference (`--reference-noise`).
    pub(crate) noise: Vec<NoiseCase>,
}

/// A known-good build's run against the reference: its name, run.json and replies (none
/// re-anchored: its answers are the reference's text).
pub struct NoiseCase {
    pub(crate) name: &'static str,
    pub(crate) manifest: RunManifest,
    pub(crate) replies: Vec<ReplyRecord>,
}
