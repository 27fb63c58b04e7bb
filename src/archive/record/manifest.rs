//! run.json: what was run, where, with which settings, and how the serve came and went. The
//! manifest itself and its smaller parts (the programs gated, the phases' limits, the clock, the
//! sampling asked for, the logprobs asked for, serve.log's cap, the files not archived, the soak
//! and the concurrent bursts planned); the floors, the serve's life, the hold and the
//! provenance it holds each have their own file.

use crate::archive::tags::{InterruptSignal, LogSource};
use serde::{Deserialize, Serialize};

use super::floors::Floors;
use super::hold::HoldRecord;
use super::lifecycle::{Startup, StopRecord};
use super::provenance::Provenance;
use crate::prompts::Prompt;

/// A program that was gated: the serve binary, or a script or interpreter beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinaryInfo {
    /// Resolved absolute path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256, hex.
    pub sha256: String,
    /// For an interpreter started on a script (`python3 serve.py`, `node x.js`, `sh run.sh`):
    /// the script, the first argument after the interpreter's options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Box<BinaryInfo>>,
    /// For a `#!` script: the interpreter its `#!` line names (for `#!/usr/bin/env NAME`, the
    /// NAME env finds on PATH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<Box<BinaryInfo>>,
}

/// Limits that bound the run's phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Seconds to wait for the serve to be ready.
    pub ready_timeout_s: f64,
    /// Seconds between SIGTERM and SIGKILL when stopping the serve.
    pub grace_s: f64,
    /// Seconds a stream may stall (no bytes) before the reply is abandoned.
    pub reply_timeout_s: f64,
    /// Seconds one whole reply may take (`--reply-limit`); `None`: derived from each reply's
    /// max_tokens (`--reply-timeout` plus 1 s a token).
    #[serde(default)]
    pub reply_limit_s: Option<f64>,
}

/// The clock the run's ns offsets are on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    /// Always `CLOCK_MONOTONIC`.
    pub name: String,
    /// The absolute reading every offset is relative to.
    pub base_ns: u64,
}

/// run.json: what was run, where, with which settings, and how the serve came and went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunManifest {
    /// File format version ([`SCHEMA`](super::SCHEMA)).
    pub schema: u32,
    /// npu-serve-smoke's version.
    pub tool_version: String,
    /// The git commit that npu-serve-smoke was built from (`unknown` where its build could not
    /// tell); absent in runs from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_commit: Option<String>,
    /// The gate's own command line.
    pub argv: Vec<String>,
    /// The serve's command line, after `{port}` was filled in; `None` when attached to a running serve.
    pub serve_argv: Option<Vec<String>>,
    /// The serve binary, when one was launched.
    pub serve_binary: Option<BinaryInfo>,
    /// The serve's process id (and process group id), once launched.
    #[serde(default)]
    pub serve_pid: Option<u32>,
    /// The serve's base URL.
    pub url: String,
    /// The model name sent with each request (known once the serve is ready).
    pub model: Option<String>,
    /// The prompts, cycled over the replies.
    pub prompts: Vec<Prompt>,
    /// How many replies were to be made.
    pub replies_planned: usize,
    /// Floors, limits and route patterns the run was judged with.
    pub floors: Floors,
    /// Time limits of the phases.
    pub limits: Limits,
    /// Host name of the box.
    pub host: String,
    /// Start, UTC, RFC 3339.
    pub started_utc: String,
    /// End, UTC, RFC 3339 (absent while the run is going).
    pub ended_utc: Option<String>,
    /// The clock of every ns offset.
    pub clock: ClockInfo,
    /// Where serve.log came from: `captured`, `copied from PATH`, or `none`.
    pub serve_log_source: LogSource,
    /// How much the serve wrote, and how much of its middle serve.log dropped to keep its head
    /// and its tail (absent for runs from before the cap, and while the run is going).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_log_kept: Option<ServeLogKept>,
    /// How the serve came up.
    pub startup: Option<Startup>,
    /// How the serve was stopped (absent when nothing was launched).
    pub stop: Option<StopRecord>,
    /// The signal that interrupted the run, e.g. `SIGTERM`.
    #[serde(default)]
    pub interrupted: Option<InterruptSignal>,
    /// The device hold, when `--hold` was given.
    #[serde(default)]
    pub hold: Option<HoldRecord>,
    /// The serve's exit during the replies, e.g. `the serve exited (exit status: 3) during reply 2`.
    #[serde(default)]
    pub serve_died: Option<String>,
    /// Fields merged into every request body (`--extra-body`).
    #[serde(default)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// CPU seconds the gate itself used (user + system): it must stay near idle beside a serve
    /// that needs the CPU.
    #[serde(default)]
    pub gate_cpu_s: Option<f64>,
    /// The gate's own peak resident set, KiB.
    #[serde(default)]
    pub gate_max_rss_kib: Option<u64>,
    /// Every `run` setting as the run used it: the command line over the profile over the
    /// defaults.
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
    /// What the run ran on and with, for telling which runs can be compared (issue 18): the
    /// model files, the serve's arguments, the workload and the box. Absent in runs from
    /// before it was recorded.
    #[serde(default)]
    pub provenance: Option<Provenance>,
    /// The concurrent bursts planned after the single-stream replies (`--concurrency`);
    /// absent for a run of one stream at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyPlan>,
    /// The soak (`--soak`): single-stream replies kept up, after the planned ones, until the
    /// duration was spent; absent for a run without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakRecord>,
    /// The device's clock file the conditions sampler read (`--device-freq`, Hz), as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_freq: Option<String>,
    /// The device's temperature file it read (`--device-temp`, millidegrees Celsius), as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_temp: Option<String>,
    /// How many warm-up replies were planned before the judged ones (`--warmup`); absent, 0,
    /// for a run without them. `replies_planned` counts the judged replies alone.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup: usize,
    /// The sampling every request asked for (`--temperature`, `--seed`, or `--extra-body`'s);
    /// absent in runs from before it was recorded: see [`RunManifest::sampling`].
    #[serde(default, rename = "sampling", skip_serializing_if = "Option::is_none")]
    pub sampling_sent: Option<Sampling>,
    /// The files of the run directory the gate failed to write, as far as run.json's last
    /// write knew them; absent when every write so far went through (and in runs from before
    /// it was recorded). result.json's list is the whole one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_archived: Vec<NotArchived>,
    /// The sha256 (hex) of each other file of the run as the gate wrote it, by name: written
    /// with the last run.json, once every other file is written and the serve is stopped
    /// ([`crate::archive::digest`]). Absent in runs from before it, and in a run killed before
    /// its last write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digests: Option<std::collections::BTreeMap<String, String>>,
    /// `--logprobs K`: the top alternatives every request asked for, and what the serve's
    /// logprobs were like over the run (issue 31). Absent when the run asked for none, and in
    /// runs from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<LogprobsAsked>,
    /// `--depths` (issue 35): the depths asked and the serve's context; absent for a run
    /// without depths. The serve's word on its context is filled in once it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<crate::archive::record::context::ContextPlan>,
}

/// What a run asked of the serve's logprobs (`--logprobs K`) and what came of it, as run.json
/// records it: `judge` says from it what `run` said. The tokens themselves are each reply's
/// [`ReplyRecord::logprobs`](super::reply::ReplyRecord::logprobs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogprobsAsked {
    /// K: every request asked for `"logprobs": true, "top_logprobs": K`.
    pub top: usize,
    /// Replies that streamed text but no logprobs: the serve sent none (its reply's
    /// `logprobs` is absent, never guessed).
    #[serde(default)]
    pub replies_without: usize,
    /// Replies whose logprobs could not be read whole (a token without its text or its
    /// logprob, a `logprobs` that is not an object): they keep none, since a gap would shift
    /// every later token's place in the text.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replies_unreadable: usize,
    /// Why the first of them could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_unreadable: Option<String>,
    /// Token records and alternatives the serve sent past the bounds (a reply's event cap, K
    /// alternatives a token) or that were malformed, and so not kept; token texts cut to
    /// [`LOGPROB_TOKEN_BYTES`](super::reply::LOGPROB_TOKEN_BYTES) are not counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: usize,
}

impl LogprobsAsked {
    /// What a run says of its serve's logprobs, when it has something to say: that the serve
    /// sent none (for some replies or all), that some could not be read, that some were
    /// dropped. Each once a run.
    pub fn said(&self, replies_with_text: usize) -> Vec<String> {
        let mut lines = Vec::new();
        if self.replies_without > 0 {
            if self.replies_without >= replies_with_text {
                lines.push(format!(
                    "the serve sent no logprobs (--logprobs {} asked for them in every request)",
                    self.top
                ));
            } else {
                lines.push(format!(
                    "the serve sent no logprobs in {} of {replies_with_text} replies (--logprobs {} asked for them in every request)",
                    self.replies_without, self.top
                ));
            }
        }
        if self.replies_unreadable > 0 {
            lines.push(format!(
                "the serve's logprobs could not be read in {} replies, which keep none (first: {})",
                self.replies_unreadable,
                self.first_unreadable
                    .as_deref()
                    .unwrap_or("no reason recorded")
            ));
        }
        if self.dropped > 0 {
            lines.push(format!(
                "the serve's logprobs: {} token records or alternatives past the bounds, or malformed, were not kept",
                self.dropped
            ));
        }
        lines
    }
}

/// What serve.log kept of what the serve (or the attached serve's log) wrote: the head and the
/// tail, with a marker line between them where bytes were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeLogKept {
    /// Every byte written.
    pub bytes: u64,
    /// The bytes dropped from the middle (0 when serve.log is whole).
    pub dropped: u64,
}

/// A file of the run directory the gate failed to write (no space, a read-only or removed
/// directory, an I/O error): what is missing from the archive and why. The verdict never
/// depends on it: the gate judged what it held in memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotArchived {
    /// The file's name in the run directory, e.g. `replies.jsonl`.
    pub file: String,
    /// Why, as the system said it, e.g. `No space left on device (os error 28)`.
    pub error: String,
    /// For replies.jsonl: the first reply (its index) that was not appended; the file holds
    /// the replies before it, whole, and nothing after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_reply: Option<usize>,
    /// For replies.jsonl: how many replies the file holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies_archived: Option<usize>,
    /// For replies.jsonl: how many replies the run made in all (judged from memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies_made: Option<usize>,
}

impl std::fmt::Display for NotArchived {
    /// `replies.jsonl: No space left on device (os error 28) from reply 29 on (it holds 28 of
    /// 40 replies)`, `load.json: Read-only file system (os error 30)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.error)?;
        if let Some(from) = self.from_reply {
            write!(f, " from reply {from} on")?;
        }
        if let (Some(kept), Some(made)) = (self.replies_archived, self.replies_made) {
            write!(f, " (it holds {kept} of {made} replies)")?;
        }
        Ok(())
    }
}

impl RunManifest {
    /// The max_tokens `prompt` was asked with: its own, else the run's setting; `None` when
    /// the run recorded neither.
    pub fn max_tokens_for(&self, prompt: &str) -> Option<u64> {
        self.prompts
            .iter()
            .find(|p| p.prompt == prompt)
            .and_then(|p| p.max_tokens.map(u64::from))
            .or_else(|| {
                self.settings
                    .as_ref()
                    .and_then(|s| s.get("max_tokens"))
                    .and_then(serde_json::Value::as_u64)
            })
    }

    /// The sampling the run's requests asked for: as recorded, or for a run from before it
    /// was, what its body sent (the gate's temperature 0, under `extra_body`).
    pub fn sampling(&self) -> Sampling {
        self.sampling_sent
            .unwrap_or_else(|| Sampling::of_body(self.extra_body.as_ref()))
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A soak: how long it was asked to last and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakRecord {
    /// `--soak`, seconds: the replies' time in all, from the first reply's send.
    pub seconds: f64,
    /// Single-stream replies made in all (the planned ones and the soak's), when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<usize>,
    /// How it ended: `duration` (spent), `reply cap` (the most replies a run keeps), `serve
    /// died`, `reply failed`; absent while it runs or when the run was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

/// The concurrent bursts a run plans: `rounds` bursts of `streams` streams released together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencyPlan {
    /// Streams in each burst (`--concurrency`).
    pub streams: usize,
    /// Bursts (`--rounds`).
    pub rounds: usize,
}

impl ConcurrencyPlan {
    /// Every stream the bursts plan.
    pub fn total(&self) -> usize {
        self.streams.saturating_mul(self.rounds)
    }
}

/// The sampling every request of a run asked for, as its body carried it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// `temperature` (the gate's 0, unless `--temperature` or `--extra-body` said otherwise);
    /// absent when the body's was not a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// `seed` (`--seed`, or `--extra-body`'s); absent when none was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Sampling {
    /// What a request body with these `fields` over the gate's own (`"temperature": 0`)
    /// asks for.
    pub fn of_body(fields: Option<&serde_json::Map<String, serde_json::Value>>) -> Sampling {
        let field = |k: &str| fields.and_then(|f| f.get(k));
        Sampling {
            temperature: match field("temperature") {
                Some(t) => t.as_f64(),
                None => Some(0.0),
            },
            seed: field("seed").and_then(serde_json::Value::as_u64),
        }
    }
}
