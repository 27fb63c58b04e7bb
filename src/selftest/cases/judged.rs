//! A judging case judged: the verdict on its hand-made run, and the check of what it must say
//! against what the verdict said.

use crate::archive::check::Check;
use crate::judging::verdict::{
    self, Baseline, Criteria, Evidence, NoiseBuild, ProcessEvidence, ReferenceEvidence, Verdict,
};

use super::case::Case;

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

/// The line `check` in `v`, if it has one.
fn find(v: &Verdict, check: Check) -> Option<&verdict::Line> {
    v.lines.iter().find(|l| l.check == check)
}
