//! A judging case: a hand-made run, what its verdict must say, and the check of one against
//! the other.

use crate::archive::check::Check;
use crate::archive::record::InterruptSignal;
use crate::archive::record::{
    ConcurrencyPlan, LoadSnapshot, ReanchorRecord, ReplyRecord, RouteRecord, RunManifest, Startup,
    StopRecord,
};
use crate::judging::verdict::{
    self, Baseline, Criteria, Evidence, Floors, NoiseBuild, Outcome, ProcessEvidence,
    ReferenceEvidence, Status, Verdict,
};

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

impl Case {
    /// The verdict on this case's hand-made run.
    pub fn verdict(&self) -> Result<Verdict, String> {
        let criteria = Criteria::new(self.floors.clone()).map_err(|e| format!("{e:#}"))?;
        let log = self.log.map(|l| criteria.scan_log_text(l));
        let hand_made = Evidence::of(&self.replies, &self.startup);
        let noise: Vec<NoiseBuild<'_>> = self.reference.as_ref().map_or(Vec::new(), |r| {
            r.noise
                .iter()
                .map(|n| NoiseBuild::Recorded {
                    name: n.name,
                    manifest: &n.manifest,
                    replies: &n.replies,
                    reanchors: &[],
                })
                .collect()
        });
        let evidence = Evidence {
            replies_planned: self.planned.unwrap_or(self.replies.len()),
            serve_log: log.as_ref(),
            load: self.load.as_ref(),
            interrupted: self.interrupted,
            hold_not_acquired: self.hold_not_acquired,
            stop: self.stop.as_ref().map(|s| (s, 10.0)),
            serve_died: self.serve_died,
            processes: self
                .route
                .as_ref()
                .map_or(hand_made.processes, ProcessEvidence::Recorded),
            concurrency: self.concurrency.as_ref(),
            reference: match &self.reference {
                Some(r) => ReferenceEvidence::Recorded {
                    candidate: &r.candidate,
                    reference: Baseline {
                        name: "runs/reference",
                        manifest: &r.reference,
                        replies: &r.replies,
                        load: None,
                    },
                    noise: &noise,
                },
                None => ReferenceEvidence::NotAsked,
            },
            reanchors: self.reference.as_ref().map_or(&[], |r| &r.reanchors),
            manifest: self.manifest.as_ref(),
            ..hand_made
        };
        Ok(verdict::judge(&evidence, &criteria))
    }

    /// Judge the case; `Err` says what the verdict got wrong.
    pub fn check(&self) -> Result<(), String> {
        let v = self.verdict()?;
        let mut problems = Vec::new();
        for (check, status, fragment) in &self.expect {
            match find(&v, *check) {
                None => problems.push(format!("no {check} line")),
                Some(l) if l.status != *status || !l.text.contains(fragment) => problems.push(
                    format!("{check} should be {status} with {fragment:?}, got: {l}"),
                ),
                Some(_) => {}
            }
        }
        for (check, fragment) in &self.refuse {
            if let Some(l) = find(&v, *check).filter(|l| l.text.contains(fragment)) {
                problems.push(format!("{check} must not say {fragment:?}, got: {l}"));
            }
        }
        for check in &self.absent {
            if let Some(l) = find(&v, *check) {
                problems.push(format!("{check} should have no line, got: {l}"));
            }
        }
        if v.outcome != self.outcome {
            problems.push(format!(
                "RESULT should be {}, got {}",
                self.outcome, v.outcome
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
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

/// The line `check` in `v`, if it has one.
fn find(v: &Verdict, check: Check) -> Option<&verdict::Line> {
    v.lines.iter().find(|l| l.check == check)
}
