//! What a run records: the data the verdict is a function of, as it is kept in the run directory.
//!
//! Raw observations (arrival times, text, the serve's own reports) are the record; figures
//! derived from them (`metrics`) are written beside them for readers but recomputed by the
//! verdict, so a re-judged archive never trusts an older build's arithmetic.

use serde::{Deserialize, Serialize};

use crate::conditions::DuringReplies;
use crate::hold::HoldRecord;
use crate::measure::ReplyMetrics;
use crate::prompts::Prompt;
use crate::verdict::Floors;

/// Version of the run directory's file formats. Bumped when a field changes meaning.
pub const SCHEMA: u32 = 1;

/// One SSE event of a reply: when the bytes that completed it arrived, and what text it carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkArrival {
    /// Nanoseconds since the run's clock base (run.json `clock.base_ns`).
    pub at_ns: u64,
    /// Characters of answer text (`delta.content`).
    pub content_chars: u32,
    /// Characters of reasoning text (`delta.reasoning_content`).
    pub reasoning_chars: u32,
    /// Tokens this event is counted as (derived: 1 per text event, or usage / text events).
    #[serde(default)]
    pub tokens: f64,
}

impl ChunkArrival {
    /// Whether this event carried any text, answer or reasoning: only those are tokens.
    pub fn has_text(&self) -> bool {
        self.content_chars > 0 || self.reasoning_chars > 0
    }
}

/// One reply as the gate received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyRecord {
    /// 1-based position in the run.
    pub index: usize,
    /// The prompt sent.
    pub prompt: String,
    /// The pattern the answer must match, when the prompt says what it is.
    pub expect: Option<String>,
    /// Answer text, concatenated.
    pub content: String,
    /// Reasoning text, concatenated.
    pub reasoning: String,
    /// When the request was sent (ns since the clock base).
    pub sent_ns: u64,
    /// When the stream ended, cleanly or not (ns since the clock base).
    pub end_ns: u64,
    /// Every data event except `[DONE]`, in arrival order.
    pub chunks: Vec<ChunkArrival>,
    /// `usage.completion_tokens`, when the serve reported it.
    pub usage_completion_tokens: Option<u64>,
    /// The last `finish_reason` the serve sent.
    pub finish_reason: Option<String>,
    /// The serve's own timings (llama-server's `timings`), as sent, for cross-checking.
    pub server_timings: Option<serde_json::Value>,
    /// Prompt tokens the serve took from its prompt cache, when it said (a cached prompt's
    /// first token skips prompt processing).
    #[serde(default)]
    pub cached_prompt_tokens: Option<u64>,
    /// What went wrong, when the reply did not complete cleanly.
    pub error: Option<String>,
    /// Figures derived from the above when the reply was recorded (informational).
    #[serde(default)]
    pub metrics: Option<ReplyMetrics>,
}

impl ReplyRecord {
    /// A reply to `prompt` with nothing received yet.
    pub fn new(index: usize, prompt: &str, expect: Option<&str>) -> Self {
        ReplyRecord {
            index,
            prompt: prompt.to_string(),
            expect: expect.map(str::to_string),
            content: String::new(),
            reasoning: String::new(),
            sent_ns: 0,
            end_ns: 0,
            chunks: Vec::new(),
            usage_completion_tokens: None,
            finish_reason: None,
            server_timings: None,
            cached_prompt_tokens: None,
            error: None,
            metrics: None,
        }
    }
}

/// The box's load, as the kernel's load averages give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSnapshot {
    /// 1-minute load average.
    pub load1: f64,
    /// 5-minute load average.
    pub load5: f64,
    /// 15-minute load average.
    pub load15: f64,
    /// CPUs the box has.
    pub ncpu: usize,
    /// When it was taken, e.g. `before-serve`.
    pub taken: String,
    /// The box and the serve during the replies, where they were sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<DuringReplies>,
}

/// How the serve came up, or did not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Startup {
    /// Answered its readiness probe.
    Ready {
        /// Milliseconds from launch (or from the first probe, when attached) to ready.
        after_ms: f64,
        /// The path that answered 200.
        probe: String,
        /// HTTP answers other than 200 before that (a serve loading its model answers 503).
        #[serde(default)]
        not_ready_answers: u32,
    },
    /// The process exited before it was ready.
    Exited {
        /// Its exit status, as text.
        status: String,
    },
    /// Still not ready when the ready timeout ran out.
    NotReady {
        /// The timeout, in seconds.
        timeout_s: f64,
    },
    /// The process could not be started at all.
    SpawnFailed {
        /// Why.
        error: String,
    },
    /// A signal stopped the run before the serve was ready.
    Interrupted,
}

impl Startup {
    /// Whether replies could be requested.
    pub fn is_ready(&self) -> bool {
        matches!(self, Startup::Ready { .. })
    }
}

/// How the serve was stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// Whether SIGKILL was sent: the serve outlived the grace period, or a second signal cut
    /// the grace short.
    pub killed: bool,
    /// SIGKILL came from a second signal, not from the grace running out.
    #[serde(default)]
    pub cut_short: bool,
    /// Processes that had left the serve's process group and were killed after it stopped.
    #[serde(default)]
    pub escaped_killed: usize,
    /// The serve's exit status, as text, when it was reaped.
    pub exit_status: Option<String>,
}

/// The serve binary that was gated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinaryInfo {
    /// Resolved absolute path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256, hex.
    pub sha256: String,
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
    /// File format version ([`SCHEMA`]).
    pub schema: u32,
    /// npu-serve-smoke's version.
    pub tool_version: String,
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
    pub serve_log_source: String,
    /// How the serve came up.
    pub startup: Option<Startup>,
    /// How the serve was stopped (absent when nothing was launched).
    pub stop: Option<StopRecord>,
    /// The signal that interrupted the run, e.g. `SIGTERM`.
    #[serde(default)]
    pub interrupted: Option<String>,
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
}
