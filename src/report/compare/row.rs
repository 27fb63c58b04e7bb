//! A run's row in `compare` (the table, `--json`, `--csv` and `--svg` all read it): its group
//! (host, serve, model), its figures and its result; and the two small readings it rests on,
//! the model's hash from provenance and a start as Unix seconds. A leaf: it imports nothing of
//! `compare`.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::archive::record::{Percentiles, Provenance, Verdict};
use crate::judging::provenance::Difference;

/// What a run ran on and with: its group. Runs of one group measure the same thing on the same
/// box; a trend within one is the serve's.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupKey {
    /// Host name (run.json `host`).
    pub host: String,
    /// The serve binary's sha256, hex; `None` when attached to a serve already running.
    pub serve_sha256: Option<String>,
    /// The model's hash ([`model_hash`]); `None` where provenance records no model file.
    pub model_sha256: Option<String>,
}

impl GroupKey {
    /// The group's line in the table: `host H / serve 0123456789ab / model 0123456789ab`.
    pub fn header(&self) -> String {
        let short = |s: &Option<String>, none: &str| {
            s.as_ref()
                .map_or_else(|| none.to_string(), |h| h.chars().take(12).collect())
        };
        format!(
            "host {} / serve {} / model {}",
            self.host,
            short(&self.serve_sha256, "not recorded (attached)"),
            short(&self.model_sha256, "not recorded"),
        )
    }
}

/// The model a run's provenance names: the sha256 of its one hashed file, or, where it hashed
/// several (a model and its config), the sha256 of their sorted hashes one a line, so the key
/// is the same whatever the files' paths or order. `None` where it hashed none.
pub fn model_hash(p: &Provenance) -> Option<String> {
    let mut hashes: Vec<&str> = p.model_files.iter().map(|f| f.sha256.as_str()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    match hashes.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => {
            let digest = Sha256::digest(many.join("\n").as_bytes());
            Some(digest.iter().map(|b| format!("{b:02x}")).collect())
        }
    }
}

/// The latency percentiles the verdict's lines carry (issue 21, item 5), each where it has
/// them: filled by the latency line once the gate judges one; empty before.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct Latency {
    /// Time to first token, ms.
    pub ttft_ms: Option<Percentiles>,
    /// Inter-token latency, ms.
    pub itl_ms: Option<Percentiles>,
    /// Time per output token after the first, ms.
    pub tpot_ms: Option<Percentiles>,
    /// End-to-end latency per reply, ms.
    pub e2el_ms: Option<Percentiles>,
}

impl Latency {
    /// The first figure of each kind among `verdict`'s lines (the latency line's).
    pub fn of(verdict: &Verdict) -> Latency {
        let mut l = Latency::default();
        for f in verdict
            .lines
            .iter()
            .filter_map(|line| line.figures.as_ref())
        {
            l.ttft_ms = l.ttft_ms.or(f.ttft_ms);
            l.itl_ms = l.itl_ms.or(f.itl_ms);
            l.tpot_ms = l.tpot_ms.or(f.tpot_ms);
            l.e2el_ms = l.e2el_ms.or(f.e2el_ms);
        }
        l
    }
}

/// One run's row. A run directory that cannot be read has its `dir`, `result` and
/// `unreadable` only.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Row {
    /// The run directory, as given.
    pub dir: String,
    /// What the run ran on and with; `None` for a directory that cannot be read.
    pub group: Option<GroupKey>,
    /// Start, UTC.
    pub started_utc: Option<String>,
    /// Host name.
    pub host: Option<String>,
    /// The serve binary's sha256, hex (the table shows its first 12 digits).
    pub serve_sha256: Option<String>,
    /// 1-minute load average before the serve started.
    pub load1: Option<f64>,
    /// CPUs of the box.
    pub ncpu: Option<usize>,
    /// The serve's CPU-wait fraction during the replies.
    pub serve_cpu_wait: Option<f64>,
    /// Median decode rate, tok/s.
    pub median_rate_tok_s: Option<f64>,
    /// Median first-token time, ms.
    pub median_first_token_ms: Option<f64>,
    /// The rate floor the run recorded (of the median), tok/s.
    pub rate_floor_tok_s: Option<f64>,
    /// The first-token limit the run recorded (of the median), ms.
    pub first_token_limit_ms: Option<f64>,
    /// The latency percentiles of the verdict's lines, where it has them.
    pub latency: Latency,
    /// The determinism line's trials and how many differed (`--deterministic`), where the
    /// verdict has it.
    pub determinism_trials: Option<usize>,
    /// How many of those trials differed.
    pub determinism_mismatches: Option<usize>,
    /// The reference line's positions judged (`--reference`), where the verdict has it.
    pub reference_positions: Option<usize>,
    /// Its top-1 agreement, a share.
    pub reference_agreement: Option<f64>,
    /// Its hard divergences.
    pub reference_hard_divergences: Option<usize>,
    /// Its figures over every position (issue 52), where the verdict has them.
    pub reference_every: Option<crate::archive::record::PositionFigures>,
    /// The worst usable noise build's figures, figure by figure (`--reference-noise`).
    pub reference_noise: Option<crate::archive::record::PositionFigures>,
    /// The RESULT, judged again as `judge DIR` judges it (the run's own floors and recorded
    /// baseline), in result.json's words: `PASS`, `FAIL`, `SKIP`, `INCONCLUSIVE`,
    /// `INTERRUPTED`; `UNREADABLE` for a directory that cannot be read.
    pub result: String,
    /// The RESULT line as printed, e.g. `RESULT: SKIP (hold not acquired ...)`.
    pub summary: Option<String>,
    /// Why the directory could not be read.
    pub unreadable: Option<String>,
    /// `the archive was changed after the run: ...` when its files are not what the gate
    /// wrote (its result is then FAIL); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<String>,
    /// Whether run.json records the run's provenance.
    pub provenance: bool,
    /// For a run after the oldest, what in its provenance differs from the oldest run's;
    /// `None` for the oldest run, and where either run has no provenance.
    pub differences: Option<Vec<Difference>>,
    /// The provenance itself, to compare with.
    #[serde(skip)]
    pub recorded: Option<Provenance>,
    /// The start as seconds since the Unix epoch, for the picture; `None` where `started_utc`
    /// is not RFC 3339.
    #[serde(skip)]
    pub started_unix_s: Option<f64>,
    /// Whether this is the oldest run, the one the others' provenance is compared with (of
    /// runs started in the same second, the one given first).
    #[serde(skip)]
    pub oldest: bool,
}

/// `result` of a run directory that cannot be read.
pub const UNREADABLE: &str = "UNREADABLE";

/// An RFC 3339 time as seconds since the Unix epoch.
pub fn unix_seconds(rfc3339: &str) -> Option<f64> {
    let t = humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z')).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::HashedFile;

    fn hashed(path: &str, sha: &str) -> HashedFile {
        HashedFile {
            path: path.into(),
            size: 1,
            sha256: sha.repeat(64),
            cached: false,
        }
    }

    #[test]
    fn the_model_is_its_one_file_or_its_files_whatever_their_paths_and_order() {
        let p = |files: Vec<HashedFile>| Provenance {
            model_files: files,
            ..Provenance::default()
        };
        assert_eq!(model_hash(&p(vec![])), None);
        assert_eq!(
            model_hash(&p(vec![hashed("/m/x.gguf", "a")])),
            Some("a".repeat(64))
        );
        let two = model_hash(&p(vec![hashed("/m/x", "a"), hashed("/m/cfg", "b")])).unwrap();
        assert_eq!(two.len(), 64);
        assert_ne!(two, "a".repeat(64));
        let moved = model_hash(&p(vec![hashed("/n/cfg", "b"), hashed("/n/x", "a")])).unwrap();
        assert_eq!(two, moved, "moved and listed the other way: the same model");
        let other = model_hash(&p(vec![hashed("/m/x", "a"), hashed("/m/cfg", "c")])).unwrap();
        assert_ne!(two, other);
    }

    #[test]
    fn a_start_reads_as_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:01:00Z"), Some(60.0));
        assert_eq!(unix_seconds("yesterday"), None);
    }
}
