//! The run directories read into rows: each run loaded and judged again as `judge DIR` judges
//! it (its recorded baseline loaded once for all the runs that name it), its figures measured,
//! its provenance compared with the oldest run's; a directory that cannot be read is a row
//! saying why.

use crate::archive::check::Check;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::row::{model_hash, unix_seconds, GroupKey, Latency, Row, UNREADABLE};
use super::table::grouped;
use crate::archive::rundir::{self, BaselineRun};
use crate::judging::archived::{judge_archive, walk_noise};
use crate::judging::measure::{measure, median};
use crate::judging::provenance::differences;
use crate::judging::verdict::reference_noise::worst_noise;
use crate::judging::verdict::Criteria;

/// Read each run and build its row, in groups ([`grouped`]), then the directories that could
/// not be read, in the order given. One bad directory never hides the others.
pub fn rows(dirs: &[PathBuf]) -> Vec<Row> {
    let mut baselines = HashMap::new();
    let mut rows: Vec<Row> = dirs
        .iter()
        .map(|dir| {
            row(dir, &mut baselines).unwrap_or_else(|e| Row {
                dir: dir.display().to_string(),
                result: UNREADABLE.to_string(),
                unreadable: Some(format!("{e:#}")),
                ..Row::default()
            })
        })
        .collect();
    // Against the oldest run of all (issue 18), whichever group it is in: across groups the
    // differences are what tells them apart.
    // min_by gives the first of equal starts: the one given first.
    let oldest = rows
        .iter_mut()
        .filter(|r| r.group.is_some())
        .min_by(|a, b| a.started_utc.cmp(&b.started_utc));
    if let Some(oldest) = oldest {
        oldest.oldest = true;
        if let Some(baseline) = oldest.recorded.clone() {
            for r in rows.iter_mut().filter(|r| r.group.is_some() && !r.oldest) {
                r.differences = r
                    .recorded
                    .as_ref()
                    .map(|candidate| differences(candidate, &baseline));
            }
        }
    }
    rows = grouped(rows);
    rows
}

/// The run's row. Its result is judged again rather than read from result.json: a run killed
/// before it wrote result.json still has one, a result.json edited or from an older build
/// cannot disagree with the table's figures, and `compare` says what `judge DIR` says. The
/// run's recorded baseline is loaded once for all the runs that name it.
fn row(dir: &Path, baselines: &mut HashMap<String, BaselineRun>) -> Result<Row> {
    let a = rundir::load_archive(dir)?;
    let criteria = Criteria::new(a.manifest.floors.clone())?;
    let baseline = criteria.floors().baseline.as_ref().map(|recorded| {
        baselines.entry(recorded.clone()).or_insert_with(|| {
            let mut run = BaselineRun::load(Path::new(recorded));
            if let Err(why) = &run.archive {
                run.archive = Err(format!(
                    "the run's baseline {recorded} cannot be read now ({why})"
                ));
            }
            run
        }) as &BaselineRun
    });
    // The recorded reference too, so the row's result is `judge DIR`'s (read per run: a
    // reference is compared token by token, not shared figures).
    let reference = criteria.floors().reference.as_ref().map(|recorded| {
        let mut run = BaselineRun::load(Path::new(recorded));
        if let Err(why) = &run.archive {
            run.archive = Err(format!(
                "the run's reference {recorded} cannot be read now ({why})"
            ));
        }
        run
    });
    let verdict = judge_archive(
        &a,
        &criteria,
        a.read_serve_log()?,
        baseline,
        reference.as_ref(),
        &walk_noise(
            &criteria.floors().reference_noise,
            &a,
            reference.as_ref(),
            &criteria,
        ),
    )?;
    // Warm-ups (`--warmup`) are not judged, and are no part of the run's figures.
    let metrics: Vec<_> = a
        .replies
        .iter()
        .filter(|r| !r.set_apart())
        .map(measure)
        .collect();
    let rates: Vec<f64> = metrics.iter().filter_map(|m| m.rate_tok_s).collect();
    let firsts: Vec<f64> = metrics.iter().filter_map(|m| m.first_token_ms).collect();
    let serve_sha256 = a.manifest.serve_binary.as_ref().map(|b| b.sha256.clone());
    let started = &a.manifest.started_utc;
    let determinism = verdict
        .lines
        .iter()
        .find(|l| l.check == Check::Determinism)
        .and_then(|l| l.figures.as_ref());
    let reference = verdict
        .lines
        .iter()
        .find(|l| l.check == Check::Reference)
        .and_then(|l| l.figures.as_ref())
        .and_then(|f| f.reference.as_ref());
    Ok(Row {
        dir: dir.display().to_string(),
        group: Some(GroupKey {
            host: a.manifest.host.clone(),
            serve_sha256: serve_sha256.clone(),
            model_sha256: a.manifest.provenance.as_ref().and_then(model_hash),
        }),
        started_utc: Some(started.clone()),
        host: Some(a.manifest.host.clone()),
        serve_sha256,
        load1: a.load.as_ref().map(|l| l.load1),
        ncpu: a.load.as_ref().map(|l| l.ncpu),
        serve_cpu_wait: a
            .load
            .as_ref()
            .and_then(|l| l.during.as_ref())
            .and_then(|d| d.wait_fraction),
        median_rate_tok_s: median(&rates),
        median_first_token_ms: median(&firsts),
        rate_floor_tok_s: Some(a.manifest.floors.floor),
        first_token_limit_ms: Some(a.manifest.floors.first_token_ms),
        latency: Latency::of(&verdict),
        determinism_trials: determinism.and_then(|f| f.trials),
        determinism_mismatches: determinism.and_then(|f| f.mismatches),
        reference_positions: reference.map(|f| f.positions),
        reference_agreement: reference.and_then(|f| f.agreement),
        reference_hard_divergences: reference.map(|f| f.hard_divergences),
        reference_every: reference.and_then(|f| f.every_position),
        reference_noise: reference.and_then(|f| worst_noise(&f.noise)),
        result: verdict.outcome.word().to_string(),
        summary: Some(format!("RESULT: {}", verdict.outcome)),
        unreadable: None,
        changed: a.integrity.changed_line(),
        provenance: a.manifest.provenance.is_some(),
        differences: None,
        recorded: a.manifest.provenance.clone(),
        started_unix_s: unix_seconds(started),
        oldest: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_directories_are_rows_saying_why() {
        let d = tempfile::tempdir().unwrap();
        let garbage = d.path().join("garbage");
        std::fs::create_dir(&garbage).unwrap();
        std::fs::write(garbage.join("run.json"), b"{not json").unwrap();
        let file = d.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let missing = d.path().join("missing");
        // A replies.jsonl over its cap, or no file at all, is the loader's to refuse
        // (tests/compare.rs runs_whose_replies_are_no_file_or_too_large_are_unreadable_rows).
        let rows = rows(&[garbage.clone(), file.clone(), missing.clone()]);
        assert_eq!(rows.len(), 3);
        assert!(rows
            .iter()
            .all(|r| r.result == UNREADABLE && r.group.is_none()));
        let why = |i: usize| rows[i].unreadable.clone().unwrap();
        assert!(why(0).contains("run.json"), "{}", why(0));
        assert!(why(1).contains("a-file/run.json"), "{}", why(1));
        assert!(why(2).contains("missing/run.json"), "{}", why(2));
    }
}
