//! `judge DIR`: re-judge an archived run from its files alone, with floors overridden where
//! asked. The load line is the run's own load.json, never today's box; nothing is written
//! into DIR.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::archive::digest::Integrity;
use crate::archive::record::Floors;
use crate::archive::rundir::{self, Archive, BaselineRun, ResultFile};
use crate::archive::safe_open::Want;
use crate::args::judged::{judged_of, Judged};
use crate::args::reference::ReferenceArgs;
use crate::args::run::{
    BaselineArgs, BurstFloorArgs, DeterminismArgs, DriftArgs, RouteEvidenceArgs,
};
use crate::judging::archived::{check_noise, judge_archive, judged_beside_noise};
use crate::judging::verdict::Criteria;
use crate::report::output::{self, OutputArgs, OutputFile, Outputs, Writing};
use crate::report::RunInfo;
use crate::report::{html, timeline};
use crate::{build_info, exit_codes, inert};

/// `judge`: re-judge an archive.
#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// The run directory to judge. Nothing is written into it.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The rate floor, the first-token limit, the route patterns and the busy-box policy,
    /// instead of what the run recorded.
    #[command(flatten)]
    pub limits: crate::args::run::LimitArgs,
    /// Process evidence to judge by (from the run's route.json), instead of what the run
    /// recorded.
    #[command(flatten, next_help_heading = "Route evidence")]
    pub route: RouteEvidenceArgs,
    /// A baseline to compare with, or how, instead of what the run recorded.
    #[command(flatten, next_help_heading = "Baseline and reference")]
    pub baseline: BaselineArgs,
    /// What the concurrent bursts are held to, instead of what the run recorded.
    #[command(flatten, next_help_heading = "Bursts")]
    pub burst_floors: BurstFloorArgs,
    /// What the drift line holds the run to, instead of what the run recorded.
    #[command(flatten, next_help_heading = "Soak and drift")]
    pub drift: DriftArgs,
    /// Whether the same prompt must have got the same answer, instead of what the run
    /// recorded (the run must have sent temperature 0).
    #[command(flatten, next_help_heading = "Determinism and output checks")]
    pub determinism: DeterminismArgs,
    /// A reference to hold the tokens to, or how, instead of what the run recorded.
    #[command(flatten, next_help_heading = "Baseline and reference")]
    pub reference: ReferenceArgs,
    /// The output line's settings, instead of what the run recorded.
    #[command(flatten, next_help_heading = "Determinism and output checks")]
    pub output_checks: crate::args::output_checks::OutputCheckArgs,
    /// What the footprint lines are held to, instead of what the run recorded.
    #[command(flatten, next_help_heading = "Footprint")]
    pub footprint: crate::args::footprint::FootprintArgs,
    /// What the depths' rates are held to.
    #[command(flatten, next_help_heading = "Context depth")]
    pub context: crate::args::context::ContextArgs,
    /// The flags of the lines that are modules of their own (`lines/mod.rs`), each under
    /// its own heading, instead of what the run recorded: the service level.
    #[command(flatten)]
    pub lines: crate::args::lines::LineArgs,
    /// Draw the run's timeline to FILE (SVG); never into the archive.
    #[arg(long, value_name = "FILE", help_heading = "Outputs")]
    pub svg: Option<PathBuf>,
    /// Write the verdict as one self-contained HTML page to FILE (the run's report.html as
    /// judged now), linking to the run's files by relative path; never into the archive.
    #[arg(long, value_name = "FILE", help_heading = "Outputs")]
    pub html: Option<PathBuf>,
    /// How to report the verdict.
    #[command(flatten, next_help_heading = "Outputs")]
    pub output: OutputArgs,
}

/// Judge the archive; the exit code for its result.
pub fn run(args: JudgeArgs) -> Result<u8> {
    let outputs = Outputs::check(&args.output)?;
    let svg = args
        .svg
        .as_deref()
        .map(|p| OutputFile::open(p, Writing::Replace, Want::Output).context("--svg"))
        .transpose()?;
    let html = args
        .html
        .as_deref()
        .map(|p| OutputFile::open(p, Writing::Replace, Want::Output).context("--html"))
        .transpose()?;
    refuse_writing_into(
        &args.dir,
        [
            ("--svg", args.svg.as_deref()),
            ("--html", args.html.as_deref()),
        ],
        &outputs,
    )?;
    // A reference asked for now is read beside the run (the two are the largest files a judge
    // reads, issue 52); what is wrong with either is said in the order it always was.
    let (archive, asked_reference) = std::thread::scope(|s| {
        let reference = args
            .reference
            .reference
            .as_deref()
            .map(|dir| s.spawn(move || BaselineRun::load(dir)));
        let archive = rundir::load_archive(&args.dir);
        let reference = reference.map(|r| {
            r.join().unwrap_or_else(|_| BaselineRun {
                name: String::new(),
                archive: Err("reading it panicked".to_string()),
            })
        });
        (archive, reference)
    });
    let archive = archive?;
    say_what_the_archive_lacks(&archive, &args.dir);
    if let Some(note) = made_by_another_gate(
        &archive.manifest.tool_version,
        archive.manifest.tool_commit.as_deref(),
        (build_info::VERSION, build_info::COMMIT),
    ) {
        crate::say!("{}: {note}", args.dir.display());
    }
    let criteria = Criteria::new(floors_asked(&args, &archive)?)?;
    let reference = compared_run(
        "reference",
        args.reference.reference.as_deref().zip(asked_reference),
        criteria.floors().reference.as_deref(),
    )?;
    let baseline = compared_run(
        "baseline",
        args.baseline
            .baseline
            .as_deref()
            .map(|dir| (dir, BaselineRun::load(dir))),
        criteria.floors().baseline.as_deref(),
    )?;
    // Asked for now, each noise build must be a readable run held beside the reference; recorded
    // by the run and gone since, the line says so. Each is walked as it is read, never held,
    // while the candidate's other lines are judged.
    let asked = args.reference.noise_dirs();
    let (flag, noise) = if asked.is_empty() {
        (None, &criteria.floors().reference_noise)
    } else {
        let flag = "--reference-noise";
        check_noise(flag, &asked, reference.as_ref(), false)?;
        (Some(flag), &asked)
    };
    let verdict = judged_beside_noise(
        flag,
        noise,
        &archive,
        reference.as_ref(),
        &criteria,
        |noise| {
            judge_archive(
                &archive,
                &criteria,
                archive.read_serve_log()?,
                baseline.as_ref(),
                reference.as_ref(),
                noise,
            )
        },
    )??;
    let picture = if svg.is_some() || html.is_some() {
        let title = format!("{} (RESULT: {})", args.dir.display(), verdict.outcome);
        let context = timeline::TimelineContext::of_run(criteria.floors(), archive.load.as_ref());
        Some(timeline::svg(&archive.replies, &context, &title)?)
    } else {
        None
    };
    if let (Some(out), Some(picture)) = (&svg, &picture) {
        out.write(picture.as_bytes())?;
    }
    let title = args.dir.display().to_string();
    let mut result = ResultFile::new(verdict);
    // Said again in judge's own result: what it judged is not all the run had.
    result.not_archived = archive.not_archived.clone();
    if let Some(out) = &html {
        let page = judged_page(&args.dir, out.path(), &archive, &result, picture.as_deref());
        out.write(page.as_bytes())?;
    }
    outputs.emit(
        &result,
        &archive.replies,
        &RunInfo::of_archive(&archive, &title),
    );
    // The process ends with this judge (`cli` calls it once): the run's and the reference's
    // replies are left for the system to take back whole, not freed a token's alternatives
    // at a time (issue 52's 2,000 replies of 200 tokens: 800,000 blocks, some 60 ms).
    std::mem::forget(archive);
    std::mem::forget(reference);
    Ok(exit_codes::for_outcome(&result.verdict.outcome))
}

/// The page of the archive in `dir` as judged now, for the file `page` (outside it): its links
/// reach the run's files from where the page is.
fn judged_page(
    dir: &Path,
    page: &Path,
    archive: &Archive,
    result: &ResultFile,
    picture: Option<&str>,
) -> String {
    let way = html::way_to(page, dir);
    let judged_by = format!(
        "judge, from the archive (npu-serve-smoke {}, commit {})",
        build_info::VERSION,
        build_info::short_commit(build_info::COMMIT)
    );
    html::run::render(&html::run::RunPage {
        title: &dir.display().to_string(),
        judged_by: &judged_by,
        result,
        archive,
        timeline: picture,
        files: &judged_files(dir, archive),
        files_href: way.as_deref().map_err(String::as_str),
    })
}

/// The archive's files as its page lists them: what its records say it has, and its own
/// picture and page where it made them; each linked only where it is a file in the directory
/// now and is what the gate wrote (a page rewritten after the run is no page of the run's).
fn judged_files(dir: &Path, archive: &Archive) -> Vec<html::run::RunFile> {
    let mut names = html::run::archived_files(archive);
    let recorded = |name: &str| {
        let digests = archive.manifest.digests.as_ref();
        digests.is_some_and(|d| d.contains_key(name)) || dir.join(name).exists()
    };
    names.extend(
        [rundir::TIMELINE, rundir::REPORT]
            .into_iter()
            .filter(|name| recorded(name))
            .map(str::to_string),
    );
    let changed: &[String] = match &archive.integrity {
        Integrity::Changed(what) => what,
        _ => &[],
    };
    names
        .into_iter()
        .map(|name| {
            let is_file = std::fs::symlink_metadata(dir.join(&name)).is_ok_and(|m| m.is_file());
            let clause = changed.iter().find(|c| c.starts_with(&format!("{name} ")));
            let unlinked = if let Some(clause) = clause {
                Some(format!("changed after the run ({clause})"))
            } else if !is_file {
                Some("not in the run directory as a file".to_string())
            } else {
                None
            };
            html::run::RunFile { name, unlinked }
        })
        .collect()
}

/// Refuse an output asked for inside the run directory `dir`. The archive is evidence: judging
/// it never changes it (an --svg over its timeline.svg once redrew a passing run as FAIL; a
/// --junit over its result.json replaced it).
fn refuse_writing_into<'p>(
    dir: &Path,
    drawn: [(&'static str, Option<&'p Path>); 2],
    outputs: &'p Outputs,
) -> Result<()> {
    let asked = drawn
        .into_iter()
        .chain(outputs.files().map(|(what, p)| (what, Some(p))));
    for (what, path) in asked {
        if let Some(path) = path.filter(|p| inside(p, dir)) {
            bail!(
                "{what} {} is inside the run directory being judged, and judge writes nothing into {}: give a path outside it",
                path.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// Say what the archive in `dir` lacks, and that judge judges what is there.
fn say_what_the_archive_lacks(archive: &Archive, dir: &Path) {
    if archive.integrity == Integrity::NotRecorded {
        // Judged as before: there is nothing to hold its files to.
        crate::say!(
            "{} carries no digest of its files (a run from before digests, or one that never finished): its files are judged as they are, unchecked",
            dir.display()
        );
    }
    if let Some(problem) = &archive.load_problem {
        crate::say!("{problem}; judging without a load line");
    }
    if let Some(problem) = &archive.replies_problem {
        crate::say!("{problem}");
    }
    if archive.manifest.ended_utc.is_none() && archive.manifest.interrupted.is_none() {
        // The last write of run.json says when the run ended; a run whose disk filled, or that
        // was killed outright, never made it.
        crate::say!(
            "{} never recorded its end: the run was killed, or its last writes failed; its archive may be incomplete, and this judges what is there",
            dir.display()
        );
    }
    for missing in &archive.not_archived {
        crate::say!(
            "the archive is incomplete: the run could not write {missing}; judging what is there"
        );
    }
}

/// What to say when another build of the gate made the archive than the one judging it: its
/// lines are this build's rules over that build's records, and may differ from what it said
/// then. `None` for the same version and commit, and for the same version where either
/// commit is unknown (nothing to tell them apart by). The archive's words are shown inert: a
/// rewritten run.json is text like any other.
fn made_by_another_gate(
    version: &str,
    commit: Option<&str>,
    (this_version, this_commit): (&str, &str),
) -> Option<String> {
    let known = |c: &str| c != "unknown";
    let made = match commit.filter(|c| known(c)) {
        Some(c) => format!(
            "npu-serve-smoke {} (commit {})",
            shown(version),
            shown(build_info::short_commit(c))
        ),
        None => format!("npu-serve-smoke {} (commit not recorded)", shown(version)),
    };
    let this = format!(
        "{this_version} (commit {})",
        build_info::short_commit(this_commit)
    );
    if version != this_version {
        return Some(format!(
            "made by {made}, judged by {this}: this version's rules over that version's records, which may differ from what it said then"
        ));
    }
    match commit {
        Some(c) if known(c) && known(this_commit) && c != this_commit => Some(format!(
            "made by another build of the same version, {made}, judged by {this}: this build's rules, which may differ from what it said then"
        )),
        _ => None,
    }
}

/// A version or commit as the archive has it: as it is where it looks like one, else quoted
/// and cut short.
fn shown(word: &str) -> String {
    let plain = word.len() <= 40
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".+-_~".contains(&b));
    if plain && !word.is_empty() {
        word.to_string()
    } else {
        inert::quote(word, 40)
    }
}

/// The floors the run recorded, with what the command line overrides; refused where the run
/// cannot be judged as asked.
fn floors_asked(args: &JudgeArgs, archive: &Archive) -> Result<Floors> {
    let floors = args.judged().over(archive.manifest.floors.clone());
    refuse_bursts(&args.burst_floors, archive, &args.dir)?;
    refuse_determinism(&floors, archive, &args.dir)?;
    Ok(floors)
}

impl JudgeArgs {
    /// The flags the verdict is judged by, as `run` declares and records them.
    fn judged(&self) -> Judged<'_> {
        judged_of!(self)
    }
}

/// What the concurrent bursts are held to, refused for a run (in `dir`) that had none.
fn refuse_bursts(bursts: &BurstFloorArgs, archive: &Archive, dir: &Path) -> Result<()> {
    if archive.manifest.concurrency.is_some() {
        return Ok(());
    }
    for (flag, given) in [
        ("--aggregate-floor", bursts.aggregate_floor.is_some()),
        ("--min-speedup", bursts.min_speedup.is_some()),
    ] {
        if given {
            bail!(
                "{flag} judges concurrent bursts, and {} has none (it was run without --concurrency)",
                dir.display()
            );
        }
    }
    Ok(())
}

/// --deterministic refused for a run (in `dir`) whose answers were sampled, and
/// --baseline-answers without the baseline it speaks of.
fn refuse_determinism(floors: &Floors, archive: &Archive, dir: &Path) -> Result<()> {
    if floors.deterministic {
        // Greedy answers can be held to each other; sampled ones cannot.
        match archive.manifest.sampling().temperature {
            Some(0.0) => {}
            sent => bail!(
                "--deterministic holds every answer to a prompt to the first, and {} sent temperature {}: its answers were sampled, not greedy",
                dir.display(),
                sent.map_or("that is not a number".to_string(), |t| t.to_string())
            ),
        }
    }
    if floors.baseline_answers.is_some() && !(floors.deterministic && floors.baseline.is_some()) {
        bail!("--baseline-answers says what an answer that differs from the baseline's is: the run must be judged with --deterministic and a baseline (--baseline DIR, or the run's own)");
    }
    Ok(())
}

/// The run the `what` line ("baseline" or "reference") compares with. Asked for now
/// (`asked`: its directory, read), it must be a readable run, or judge cannot do what it was
/// asked; recorded by the run and gone since, the line says so (the comparison is
/// inconclusive).
fn compared_run(
    what: &str,
    asked: Option<(&Path, BaselineRun)>,
    recorded: Option<&str>,
) -> Result<Option<BaselineRun>> {
    match (asked, recorded) {
        (Some((dir, run)), _) => {
            if let Err(why) = &run.archive {
                bail!("--{what} {} is not a readable run: {why}", dir.display());
            }
            Ok(Some(run))
        }
        (None, Some(recorded)) => {
            let mut run = BaselineRun::load(Path::new(recorded));
            if let Err(why) = &run.archive {
                run.archive = Err(format!(
                    "the run's {what} {recorded} cannot be read now ({why}); give --{what} DIR"
                ));
            }
            Ok(Some(run))
        }
        (None, None) => Ok(None),
    }
}

/// Whether `path` (a file that may not exist yet) is inside `dir`, links resolved.
fn inside(path: &Path, dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    let resolved = match path.canonicalize() {
        Ok(p) => p,
        Err(_) => match (output::dir_of(path).canonicalize(), path.file_name()) {
            (Ok(p), Some(name)) => p.join(name),
            _ => PathBuf::from(path),
        },
    };
    resolved.starts_with(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const THIS: (&str, &str) = ("0.2.0", "1111111111111111111111111111111111111111");

    #[test]
    fn another_version_is_said_with_both_versions_and_commits() {
        let note = made_by_another_gate(
            "0.1.0",
            Some("2222222222222222222222222222222222222222"),
            THIS,
        )
        .unwrap();
        assert_eq!(
            note,
            "made by npu-serve-smoke 0.1.0 (commit 222222222222), judged by 0.2.0 (commit \
             111111111111): this version's rules over that version's records, which may differ \
             from what it said then"
        );
        // An archive from before commits were recorded is still another version.
        let note = made_by_another_gate("0.1.0", None, THIS).unwrap();
        assert!(
            note.starts_with(
                "made by npu-serve-smoke 0.1.0 (commit not recorded), judged by 0.2.0"
            ),
            "{note}"
        );
        let note = made_by_another_gate("0.1.0", Some("unknown"), THIS).unwrap();
        assert!(note.contains("(commit not recorded)"), "{note}");
    }

    #[test]
    fn another_build_of_the_same_version_is_said_only_where_both_commits_are_known() {
        let note = made_by_another_gate(
            "0.2.0",
            Some("2222222222222222222222222222222222222222"),
            THIS,
        )
        .unwrap();
        assert!(note.starts_with("made by another build of the same version, npu-serve-smoke 0.2.0 (commit 222222222222), judged by 0.2.0 (commit 111111111111)"), "{note}");
        assert_eq!(made_by_another_gate("0.2.0", Some(THIS.1), THIS), None);
        assert_eq!(made_by_another_gate("0.2.0", None, THIS), None);
        assert_eq!(made_by_another_gate("0.2.0", Some("unknown"), THIS), None);
        assert_eq!(
            made_by_another_gate("0.2.0", Some("2222222"), ("0.2.0", "unknown")),
            None
        );
    }

    #[test]
    fn the_archives_words_are_shown_inert() {
        let note = made_by_another_gate("0.1.0\u{1b}[2J\nRESULT: PASS", None, THIS).unwrap();
        assert!(!note.contains('\u{1b}') && !note.contains('\n'), "{note}");
        assert!(
            note.starts_with("made by npu-serve-smoke \"0.1.0"),
            "{note}"
        );
    }
}
