//! What a verdict is a function of, besides the criteria: the recorded run as [`Evidence`],
//! with the baseline, the reference and the route evidence it may be set against. Hand-made runs
//! (tests, the self-test's cases, properties) start from [`Evidence::of`].

use crate::archive::record::{
    ConcurrencyPlan, HoldRecord, InterruptSignal, LoadSnapshot, MetricsRecord, ReanchorRecord,
    ReplyRecord, RouteRecord, RunManifest, Startup, StopRecord,
};
use crate::judging::serve_log::LogScan;

/// Everything a verdict is a function of, besides the criteria.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The replies made, in order, warm-ups (`--warmup`) included: [`judge`] leaves them out.
    pub replies: &'a [ReplyRecord],
    /// How many judged replies were to be made (warm-ups not counted).
    pub replies_planned: usize,
    /// How the serve came up.
    pub startup: &'a Startup,
    /// What the serve's log says, scanned with these criteria's patterns; `None` when there is
    /// no log to judge (attached without `--serve-log`).
    pub serve_log: Option<&'a LogScan>,
    /// The box's load before the serve started; `None` when not recorded.
    pub load: Option<&'a LoadSnapshot>,
    /// The signal that interrupted the run, e.g. `SIGTERM`.
    pub interrupted: Option<InterruptSignal>,
    /// Why the device hold was not acquired (the run is then a SKIP).
    pub hold_not_acquired: Option<&'a str>,
    /// How the serve was stopped, and the grace it had (s).
    pub stop: Option<(&'a StopRecord, f64)>,
    /// The device hold the run took, with what the gate found each time it looked whether
    /// the hold was still there; `None` without `--hold`.
    pub hold: Option<&'a HoldRecord>,
    /// The serve's exit during the replies.
    pub serve_died: Option<&'a str>,
    /// What the serve's processes showed of the route (route.json).
    pub processes: ProcessEvidence<'a>,
    /// The accepted baseline to compare with, when one was asked for.
    pub baseline: BaselineEvidence<'a>,
    /// The trusted build's run the candidate's tokens are held to, when one was asked for.
    pub reference: ReferenceEvidence<'a>,
    /// The run's run.json, where judging has it (its prompts' `stops`); `None` for a hand-made
    /// run.
    pub manifest: Option<&'a RunManifest>,
    /// The re-anchors made past divergences from the reference (reanchors.json).
    pub reanchors: &'a [ReanchorRecord],
    /// Why reanchors.json could not be read, when it is there and could not.
    pub reanchors_problem: Option<&'a str>,
    /// The concurrent bursts the run planned after its single-stream replies; `None` for a run
    /// of one stream at a time (no burst lines).
    pub concurrency: Option<&'a ConcurrencyPlan>,
    /// The serve's metrics scraped around the bursts (metrics.json), or why they cannot be
    /// read; `None` when none were scraped.
    pub serve_metrics: Option<Result<&'a MetricsRecord, &'a str>>,
}

/// An accepted baseline run, as its archive holds it.
#[derive(Debug, Clone, Copy)]
pub struct Baseline<'a> {
    /// How to name it: its directory, as given.
    pub name: &'a str,
    /// Its run.json.
    pub manifest: &'a RunManifest,
    /// Its replies.
    pub replies: &'a [ReplyRecord],
    /// Its load.json.
    pub load: Option<&'a LoadSnapshot>,
}

/// The baseline a run is compared with.
#[derive(Debug, Clone, Copy)]
pub enum BaselineEvidence<'a> {
    /// No baseline was asked for: no baseline lines.
    NotAsked,
    /// The candidate's run.json, and the baseline.
    Recorded {
        /// The candidate's run.json (its provenance and settings).
        candidate: &'a RunManifest,
        /// The baseline.
        baseline: Baseline<'a>,
    },
    /// A baseline was asked for but cannot be read now (a recorded one that is gone): why.
    Missing(&'a str),
}

impl<'a> Evidence<'a> {
    /// A run that made `replies` (all it planned) after `startup`, with nothing else recorded:
    /// no serve log, load, interruption, hold, stop, process evidence or baseline. Hand-made
    /// runs (tests, the self-test's cases, properties) start from it and set what they need.
    pub fn of(replies: &'a [ReplyRecord], startup: &'a Startup) -> Self {
        Evidence {
            replies,
            replies_planned: replies.iter().filter(|r| !r.set_apart()).count(),
            startup,
            serve_log: None,
            load: None,
            interrupted: None,
            hold_not_acquired: None,
            stop: None,
            hold: None,
            serve_died: None,
            processes: ProcessEvidence::Missing("no route.json: a hand-made run"),
            baseline: BaselineEvidence::NotAsked,
            reference: ReferenceEvidence::NotAsked,
            manifest: None,
            reanchors: &[],
            reanchors_problem: None,
            concurrency: None,
            serve_metrics: None,
        }
    }
}

/// The route evidence of the serve's own processes, or why the run has none.
#[derive(Debug, Clone, Copy)]
pub enum ProcessEvidence<'a> {
    /// route.json, as recorded.
    Recorded(&'a RouteRecord),
    /// Why there is none, e.g. `no route.json: the run is from before route evidence`.
    Missing(&'a str),
}

/// The reference a run is compared with.
#[derive(Debug, Clone, Copy)]
pub enum ReferenceEvidence<'a> {
    /// No reference was asked for: no reference line.
    NotAsked,
    /// The candidate's run.json, and the reference run (read as a baseline is).
    Recorded {
        /// The candidate's run.json.
        candidate: &'a RunManifest,
        /// The reference run.
        reference: Baseline<'a>,
        /// Known-good builds' runs against the same reference (`--reference-noise`), whose
        /// figures the candidate's are held to; empty without.
        noise: &'a [NoiseBuild<'a>],
    },
    /// A reference was asked for but cannot be read now: why.
    Missing(&'a str),
}

/// A known-good build's run against the same reference (`--reference-noise`), as its archive
/// holds it, or why it cannot be read now.
#[derive(Debug, Clone, Copy)]
pub enum NoiseBuild<'a> {
    /// Its archive.
    Recorded {
        /// How to name it: its directory, as given.
        name: &'a str,
        /// Its run.json.
        manifest: &'a RunManifest,
        /// Its replies.
        replies: &'a [ReplyRecord],
        /// Its re-anchors past its divergences from the reference.
        reanchors: &'a [ReanchorRecord],
    },
    /// Walked as its replies are read and dropped, never held whole (issue 52), from
    /// [`super::reference::NoiseWalk`] as a recorded one's are: its figures, or why it cannot
    /// be read now. The walk may still be under way on a thread of its own while the
    /// candidate's other lines are judged; the reference line waits for it (whoever fills the
    /// cell fills it on every path, a panic included, so the wait ends).
    Walked {
        /// How to name it: its directory, as given or recorded.
        name: &'a str,
        /// Its figures, or why not, once walked.
        walked: &'a std::sync::OnceLock<Result<crate::archive::record::NoiseFigures, String>>,
    },
}
