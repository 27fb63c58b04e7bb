//! Judging an archived run: the evidence an [`Archive`] holds, put to the verdict. The live run,
//! `judge DIR` and `compare` all come through here, so the same evidence and criteria always
//! give the same lines.

use crate::archive::check::Check;
use std::io::Read;

use anyhow::{Context, Result};

use std::path::Path;
use std::sync::OnceLock;

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
        .map(|n| NoiseBuild::Walked {
            name: &n.name,
            walked: &n.walked,
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
/// its replies are read, or why it cannot be used; the walk may still be under way
/// ([`judged_beside_noise`]).
#[derive(Debug, Clone)]
pub struct NoiseRun {
    /// Its directory, as given or recorded.
    pub name: String,
    /// Its figures against the reference, or why it could not be read, once walked.
    pub walked: OnceLock<std::result::Result<NoiseFigures, String>>,
}

impl NoiseRun {
    /// The run at `name`, not walked yet.
    fn pending(name: &str) -> NoiseRun {
        NoiseRun {
            name: name.to_string(),
            walked: OnceLock::new(),
        }
    }
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
    let runs: Vec<NoiseRun> = dirs.iter().map(|d| NoiseRun::pending(d)).collect();
    walk_each(&runs, archive, reference, criteria, recorded_unreadable);
    runs
}

/// Why the run's noise build `dir` is not used: it cannot be read now (`why`).
fn recorded_unreadable(dir: &str, why: String) -> String {
    format!("the run's noise build {dir} cannot be read now ({why})")
}

/// `judge` handed the known-good builds at `dirs` (asked for now with `flag`, or recorded by
/// the run where `flag` is `None`) while they are walked on threads of their own: the
/// candidate's other lines are judged meanwhile, and the reference line waits for the walks
/// (they are most of a judge's time once its files are read: issue 52's 2,000 replies against
/// a reference and two builds took 0.8 s more walked first). Asked for now, one that cannot be
/// read is refused with one line, whatever `judge` made.
pub fn judged_beside_noise<R>(
    flag: Option<&str>,
    dirs: &[String],
    archive: &Archive,
    reference: Option<&BaselineRun>,
    criteria: &Criteria,
    judge: impl FnOnce(&[NoiseRun]) -> R,
) -> Result<R> {
    let runs: Vec<NoiseRun> = dirs.iter().map(|d| NoiseRun::pending(d)).collect();
    // Asked for now, why is said by the one line below; recorded, by the reference line.
    let unreadable: fn(&str, String) -> String = match flag {
        Some(_) => |_, why| why,
        None => recorded_unreadable,
    };
    let judged = std::thread::scope(|s| {
        let runs = &runs;
        // Filled on every path, a panic included, before the scope ends.
        let walks = s.spawn(move || walk_each(runs, archive, reference, criteria, unreadable));
        let judged = judge(runs);
        let _ = walks.join();
        judged
    });
    if let Some(flag) = flag {
        for run in &runs {
            if let Some(Err(why)) = run.walked.get() {
                anyhow::bail!("{flag} {} is not a readable run: {why}", run.name);
            }
        }
    }
    Ok(judged)
}

/// Each build of `runs` walked as its replies are read (a thread a build, as many at once as
/// the box has cores), none held whole: its figures, or why it cannot be read (said by
/// `unreadable`), set in its cell. Every cell is set when this returns or unwinds.
fn walk_each(
    runs: &[NoiseRun],
    archive: &Archive,
    reference: Option<&BaselineRun>,
    criteria: &Criteria,
    unreadable: fn(&str, String) -> String,
) {
    /// Sets what is still unset when the walks end, however they end: a judge waiting on a
    /// cell never waits for ever.
    struct Unfinished<'r>(&'r [NoiseRun]);
    impl Drop for Unfinished<'_> {
        fn drop(&mut self) {
            for run in self.0 {
                let _ = run.walked.set(Err("its walk did not finish".to_string()));
            }
        }
    }
    let _unfinished = Unfinished(runs);
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
    let walk_one = |dir: &str| -> std::result::Result<NoiseFigures, String> {
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
                run: dir.to_string(),
                figures: None,
                unusable: Some("the candidate is not held to the reference".into()),
            },
        })
    };
    // As many builds at once as the box has cores, not every build at once: each walk holds
    // its figures per prompt (some 13 MB for 2,000 prompts of 200 tokens), so twenty builds at
    // once would hold twenty times that.
    let at_once = std::thread::available_parallelism().map_or(1, |n| n.get());
    for some in runs.chunks(at_once) {
        std::thread::scope(|s| {
            let walks: Vec<_> = some
                .iter()
                .map(|run| (run, s.spawn(|| walk_one(&run.name))))
                .collect();
            for (run, walk) in walks {
                let walked = walk
                    .join()
                    .unwrap_or_else(|_| Err("its walk panicked".to_string()))
                    .map_err(|why| unreadable(&run.name, why));
                let _ = run.walked.set(walked);
            }
        });
    }
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
    use crate::selftest::cases::{archive_of, floors};

    #[test]
    fn the_judge_beside_the_walks_finds_every_build_walked_and_an_unreadable_one_said() {
        let gone = tempfile::tempdir().unwrap();
        let dirs: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|n| gone.path().join(n).display().to_string())
            .collect();
        let (a, c) = (archive_of(Vec::new()), Criteria::new(floors()).unwrap());
        // Recorded by the run: each cell is filled with why, and the judge waits for them all.
        let seen = judged_beside_noise(None, &dirs, &a, None, &c, |runs| {
            runs.iter()
                .map(|r| r.walked.wait().clone().unwrap_err())
                .collect::<Vec<_>>()
        })
        .unwrap();
        assert_eq!(seen.len(), 3);
        for (why, dir) in seen.iter().zip(&dirs) {
            assert!(
                why.starts_with(&format!("the run's noise build {dir} cannot be read now (")),
                "{why}"
            );
        }
        // Asked for now: one line naming the first, whatever the judge made.
        let refused = judged_beside_noise(Some("--reference-noise"), &dirs, &a, None, &c, |runs| {
            runs.len()
        })
        .unwrap_err()
        .to_string();
        assert!(
            refused.starts_with(&format!(
                "--reference-noise {} is not a readable run: ",
                dirs[0]
            )),
            "{refused}"
        );
    }

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
