//! Judging an archived run: the evidence an [`Archive`] holds, put to the verdict. The live run,
//! `judge DIR` and `compare` all come through here, so the same evidence and criteria always
//! give the same lines.

use crate::archive::check::Check;
use std::io::Read;

use anyhow::{Context, Result};

use std::path::Path;

use crate::archive::record::{
    Line, NoiseFigures, Outcome, ReanchorRecord, ReplyRecord, RunManifest, Startup, Status,
};
use crate::archive::rundir::{load_archive_with, load_manifest, Archive, BaselineRun};
use crate::judging::serve_log::LogScan;
use crate::judging::verdict::reference::{noise_mismatch, NoiseScope, NoiseWalk};
use crate::judging::verdict::{
    self, Baseline, BaselineEvidence, Criteria, Evidence, NoiseBuild, ProcessEvidence,
    ReferenceEvidence, Verdict,
};

/// Judge an archived run, scanning its serve log from `log` (the archive's serve.log, opened by
/// the caller with [`Archive::read_serve_log`]). `judge DIR` and `compare` come through here.
pub fn judge_archive(
    archive: &Archive,
    criteria: &Criteria,
    log: Option<impl Read>,
    baseline: Option<&BaselineRun>,
    reference: Option<&BaselineRun>,
    noise: &[NoiseRun],
) -> Result<Verdict> {
    let log = match log {
        Some(file) => {
            let name = archive
                .serve_log
                .as_ref()
                .map_or_else(|| "the serve log".to_string(), |p| p.display().to_string());
            Some(
                criteria
                    .scan_log(file)
                    .with_context(|| format!("failed to read {name}"))?,
            )
        }
        None => None,
    };
    Ok(judge_with_log(
        archive,
        criteria,
        log.as_ref(),
        baseline,
        reference,
        noise,
    ))
}

/// Judge an archived run with its serve log already scanned (with the same criteria), against
/// its baseline and its reference (`--reference`, read as a baseline is) where asked, with the
/// known-good builds' runs against that reference (`--reference-noise`).
pub fn judge_with_log(
    archive: &Archive,
    criteria: &Criteria,
    log: Option<&LogScan>,
    baseline: Option<&BaselineRun>,
    reference: Option<&BaselineRun>,
    noise: &[NoiseRun],
) -> Verdict {
    let manifest = &archive.manifest;
    let hold_reason = manifest.hold.as_ref().filter(|h| !h.acquired).map(|h| {
        format!(
            "hold not acquired in {} s; held by {}",
            h.timeout_s,
            h.waited_for.as_deref().unwrap_or("an unknown process")
        )
    });
    let never_started = Startup::SpawnFailed {
        error: "the run recorded no startup: it ended before the serve was launched".into(),
    };
    let processes = match (&archive.route, &archive.route_problem) {
        (Some(record), _) => ProcessEvidence::Recorded(record),
        (None, Some(problem)) => ProcessEvidence::Missing(problem),
        (None, None) if manifest.serve_argv.is_none() => ProcessEvidence::Missing(
            "the gate attached to a serve already running and launched no process to look at",
        ),
        (None, None) if manifest.startup.as_ref().is_some_and(|s| !s.is_ready()) => {
            ProcessEvidence::Missing("no route.json: the serve never came up")
        }
        (None, None) => ProcessEvidence::Missing(
            "no route.json: the run is from before route evidence, or ended before the replies",
        ),
    };
    let noise: Vec<NoiseBuild<'_>> = noise
        .iter()
        .map(|n| match &n.walked {
            Ok(figures) => NoiseBuild::Walked(figures),
            Err(why) => NoiseBuild::Missing { name: &n.name, why },
        })
        .collect();
    let evidence = Evidence {
        replies: &archive.replies,
        replies_planned: manifest.replies_planned
            + manifest.concurrency.as_ref().map_or(0, |c| c.total()),
        startup: manifest.startup.as_ref().unwrap_or(&never_started),
        serve_log: log,
        load: archive.load.as_ref(),
        interrupted: manifest.interrupted,
        hold_not_acquired: hold_reason.as_deref(),
        stop: manifest.stop.as_ref().map(|s| (s, manifest.limits.grace_s)),
        hold: manifest.hold.as_ref(),
        serve_died: manifest.serve_died.as_deref(),
        processes,
        baseline: match baseline {
            None => BaselineEvidence::NotAsked,
            Some(BaselineRun {
                archive: Err(why), ..
            }) => BaselineEvidence::Missing(why),
            Some(BaselineRun {
                name,
                archive: Ok(b),
            }) => BaselineEvidence::Recorded {
                candidate: manifest,
                baseline: Baseline {
                    name,
                    manifest: &b.manifest,
                    replies: &b.replies,
                    load: b.load.as_ref(),
                },
            },
        },
        reference: match reference {
            None => ReferenceEvidence::NotAsked,
            Some(BaselineRun {
                archive: Err(why), ..
            }) => ReferenceEvidence::Missing(why),
            Some(BaselineRun {
                name,
                archive: Ok(r),
            }) => ReferenceEvidence::Recorded {
                candidate: manifest,
                reference: Baseline {
                    name,
                    manifest: &r.manifest,
                    replies: &r.replies,
                    load: r.load.as_ref(),
                },
                noise: &noise,
            },
        },
        manifest: Some(manifest),
        reanchors: &archive.reanchors,
        reanchors_problem: archive.reanchors_problem.as_deref(),
        concurrency: manifest.concurrency.as_ref(),
        serve_metrics: match (&archive.metrics, &archive.metrics_problem) {
            (Some(record), _) => Some(Ok(record)),
            (None, Some(problem)) => Some(Err(problem.as_str())),
            (None, None) => None,
        },
    };
    let judged = verdict::judge(&evidence, criteria);
    match archive.integrity.changed_line() {
        Some(line) => changed(judged, line),
        None => judged,
    }
}

/// A known-good build's run (`--reference-noise`) as judging takes it: its figures, walked as
/// its replies were read, or why it cannot be used.
#[derive(Debug, Clone)]
pub struct NoiseRun {
    /// Its directory, as given or recorded.
    pub name: String,
    /// Its figures against the reference, or why it could not be read.
    pub walked: std::result::Result<NoiseFigures, String>,
}

/// The known-good builds' runs at `dirs`, each checked before anything starts (`flag` names
/// them): one whose prompts, max_tokens, temperature, sampling or logprobs K are not the
/// `reference`'s is refused with one line, and, read `whole` (the live run, which walks them
/// only at its end, [`walk_noise`]), one that cannot be read, was changed since its run or
/// holds no replies. Read as a stream, never held.
pub fn check_noise(
    flag: &str,
    dirs: &[String],
    reference: Option<&BaselineRun>,
    whole: bool,
) -> Result<()> {
    for dir in dirs {
        let read = if whole {
            read_noise(Path::new(dir), &mut |_, _| {})
        } else {
            load_manifest(Path::new(dir)).map_err(|e| format!("{e:#}"))
        };
        let manifest =
            read.map_err(|why| anyhow::anyhow!("{flag} {dir} is not a readable run: {why}"))?;
        if let Some(Ok(r)) = reference.map(|r| &r.archive) {
            let why = noise_mismatch(&manifest, &r.manifest);
            if !why.is_empty() {
                anyhow::bail!(
                    "{flag} {dir} was not run as the reference {} was, so its figures are no noise around it: {}",
                    reference.map_or("", |r| r.name.as_str()),
                    why.join("; ")
                );
            }
        }
    }
    Ok(())
}

/// Read the run at `dir` as a baseline is read (its digests held, and refused when it holds
/// no replies), handing each reply to `take` and keeping none: its run.json, or why not.
fn read_noise(
    dir: &Path,
    take: &mut dyn FnMut(&[ReanchorRecord], ReplyRecord),
) -> std::result::Result<RunManifest, String> {
    let mut replies = 0usize;
    let a = load_archive_with(dir, &mut |reanchors, r| {
        replies += 1;
        take(reanchors, r);
    })
    .map_err(|e| format!("{e:#}"))?;
    if let Some(changed) = a.integrity.changed_line() {
        return Err(format!("{}: {changed}", dir.display()));
    }
    if replies == 0 {
        return Err(format!("{} holds no replies", dir.display()));
    }
    Ok(a.manifest)
}

/// Walk the known-good builds' runs at `dirs`, recorded by the run, against the candidate
/// (`archive`) and its `reference` under `criteria` ([`walk_each`]); one that cannot be read
/// now is said so by the line.
pub fn walk_noise(
    dirs: &[String],
    archive: &Archive,
    reference: Option<&BaselineRun>,
    criteria: &Criteria,
) -> Vec<NoiseRun> {
    dirs.iter()
        .zip(walk_each(dirs, archive, reference, criteria))
        .map(|(dir, walked)| NoiseRun {
            name: dir.clone(),
            walked: walked
                .map_err(|why| format!("the run's noise build {dir} cannot be read now ({why})")),
        })
        .collect()
}

/// [`walk_noise`] for builds asked for now (`flag`): one that cannot be read is refused with
/// one line.
pub fn walk_asked_noise(
    flag: &str,
    dirs: &[String],
    archive: &Archive,
    reference: Option<&BaselineRun>,
    criteria: &Criteria,
) -> Result<Vec<NoiseRun>> {
    dirs.iter()
        .zip(walk_each(dirs, archive, reference, criteria))
        .map(|(dir, walked)| match walked {
            Ok(figures) => Ok(NoiseRun {
                name: dir.clone(),
                walked: Ok(figures),
            }),
            Err(why) => anyhow::bail!("{flag} {dir} is not a readable run: {why}"),
        })
        .collect()
}

/// Each build at `dirs` walked as its replies are read (a thread a build, as many at once as
/// the box has cores), none held whole: its figures, or why it cannot be read.
fn walk_each(
    dirs: &[String],
    archive: &Archive,
    reference: Option<&BaselineRun>,
    criteria: &Criteria,
) -> Vec<std::result::Result<NoiseFigures, String>> {
    let scope = match reference.map(|r| &r.archive) {
        Some(Ok(r)) => NoiseScope::of(
            &archive.replies,
            &archive.manifest,
            &Baseline {
                name: reference.map_or("", |r| r.name.as_str()),
                manifest: &r.manifest,
                replies: &r.replies,
                load: r.load.as_ref(),
            },
            verdict::reference_rules(criteria),
        ),
        _ => None,
    };
    let walk_one = |dir: &String| -> std::result::Result<NoiseFigures, String> {
        // Not held to the reference at all (the line says why): read, not walked.
        let mut walk = scope.as_ref().map(NoiseWalk::new);
        let manifest = read_noise(Path::new(dir), &mut |reanchors, r| {
            if let Some(w) = walk.as_mut() {
                w.add(reanchors, &r);
            }
        })?;
        Ok(match walk {
            Some(w) => w.finish(dir, &manifest),
            None => NoiseFigures {
                run: dir.clone(),
                figures: None,
                unusable: Some("the candidate is not held to the reference".into()),
            },
        })
    };
    // As many builds at once as the box has cores, not every build at once: each walk holds
    // its figures per prompt (some 13 MB for 2,000 prompts of 200 tokens), so twenty builds at
    // once would hold twenty times that.
    let at_once = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut walked = Vec::with_capacity(dirs.len());
    for some in dirs.chunks(at_once) {
        std::thread::scope(|s| {
            let walks: Vec<_> = some.iter().map(|dir| s.spawn(|| walk_one(dir))).collect();
            walked.extend(walks.into_iter().map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("its walk panicked".to_string()))
            }));
        });
    }
    walked
}

/// The verdict of an archive whose files are not what the gate wrote: its lines as they
/// judge, after a FAIL line that says what changed, and a FAIL whatever they say (a serve that
/// rewrote replies.jsonl on SIGTERM once made a live FAIL into a `judge` PASS; issue 30).
pub fn changed(mut judged: Verdict, line: String) -> Verdict {
    judged
        .lines
        .insert(0, Line::new(Check::Archive, Status::Fail, line));
    judged.outcome = Outcome::Fail;
    judged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_archive_is_a_fail_whatever_its_lines_say() {
        for outcome in [
            Outcome::Pass,
            Outcome::Interrupted {
                signal: "SIGTERM".into(),
            },
            Outcome::Skip {
                reason: "busy box".into(),
                advice: None,
            },
        ] {
            let judged = Verdict {
                lines: vec![Line::new(Check::Rate, Status::Ok, "fine")],
                outcome,
            };
            let v = changed(judged, "the archive was changed after the run: x".into());
            assert_eq!(v.outcome, Outcome::Fail);
            assert_eq!(v.lines.len(), 2);
            assert_eq!(v.lines[0].check, "archive");
            assert_eq!(v.lines[0].status, Status::Fail);
            assert_eq!(v.lines[1].text, "fine");
        }
    }
}
