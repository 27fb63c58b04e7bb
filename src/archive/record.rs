//! What a run records: the data the verdict is a function of, as it is kept in the run directory.
//!
//! Raw observations (arrival times, text, the serve's own reports) are the record; figures
//! derived from them (`metrics`) are written beside them for readers but recomputed by the
//! verdict, so a re-judged archive never trusts an older build's arithmetic.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

pub use crate::archive::check::{Check, Kind};
pub use crate::archive::tags::{InterruptSignal, LogSource, Phase, Unit};
use crate::prompts::Prompt;

/// Version of the run directory's file formats. Bumped when a field changes meaning.
pub const SCHEMA: u32 = 1;

/// The placeholder in the serve's arguments that becomes the port the gate picked; the port is
/// recorded back as it in provenance's `serve_argv`.
pub const PORT_PLACEHOLDER: &str = "{port}";

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

/// `chunks` as serde_json writes them, written here by hand. replies.jsonl holds one per token,
/// and the derived path spent about 1,300 instructions on each (it escapes every key, a byte at
/// a time): at 20,000 tokens a second, a tenth of all the gate did per token. A test holds the
/// two to the same bytes. They are the bytes of serde_json's compact writer, the only one a
/// reply is written with (`rundir::write_replies`): a pretty writer would leave them compact,
/// and another format would get serde_json's raw-value wrapper.
fn write_chunks<S: Serializer>(chunks: &[ChunkArrival], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::Error;
    let mut text = Vec::with_capacity(2 + chunks.len() * 80);
    let mut int = itoa::Buffer::new();
    text.push(b'[');
    for (i, c) in chunks.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        text.extend_from_slice(b"{\"at_ns\":");
        text.extend_from_slice(int.format(c.at_ns).as_bytes());
        text.extend_from_slice(b",\"content_chars\":");
        text.extend_from_slice(int.format(c.content_chars).as_bytes());
        text.extend_from_slice(b",\"reasoning_chars\":");
        text.extend_from_slice(int.format(c.reasoning_chars).as_bytes());
        text.extend_from_slice(b",\"tokens\":");
        serde_json::to_writer(&mut text, &c.tokens).map_err(S::Error::custom)?;
        text.push(b'}');
    }
    text.push(b']');
    let text = String::from_utf8(text).map_err(S::Error::custom)?;
    // SAFETY: the text is one JSON array, made above of literal keys and punctuation, integers
    // and serde_json's own text for a float, with no whitespace around it: the contract of
    // from_string_unchecked (which checks it in debug builds, so in every test that writes a
    // reply). It skips the re-parse that from_string would do, which would cost more than the
    // hand-writing saves.
    let raw = unsafe { RawValue::from_string_unchecked(text) };
    raw.serialize(s)
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
    #[serde(serialize_with = "write_chunks")]
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
    /// How much text a reply had before `content` and `reasoning` were cut to their heads: a
    /// failed reply's in the archive too (its text is quoted, never judged, and must not hold
    /// the gate's memory for the rest of the run), any reply's in memory once archived
    /// ([`JUDGED_TEXT`]); absent when nothing was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_cut: Option<TextCut>,
    /// Figures derived from the above when the reply was recorded (informational).
    #[serde(default)]
    pub metrics: Option<ReplyMetrics>,
    /// Where the reply stood in the concurrent bursts (`--concurrency`); absent for the
    /// single-stream replies. A burst's streams share its release as `sent_ns`, so their
    /// first-token times include any queueing at the serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<BurstSlot>,
    /// When the request's last bytes were written to the socket (ns since the clock base),
    /// for a burst's stream: `written_ns - sent_ns` is the gate's own dispatch delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_ns: Option<u64>,
    /// A warm-up reply (`--warmup N`): made first, before the judged replies, to wake a cold
    /// serve, and recorded but never judged (a failed one fails content all the same: a serve
    /// that errors is not cold, it is broken). Absent, false, in every other reply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warmup: bool,
    /// The first choice index other than 0 the serve streamed: the gate asks for one choice
    /// (n=1) and reads choice 0 alone, so another is a fault the content line names (issue
    /// 30). Absent when every chunk carried choice 0 alone, as in archives from before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrequested_choice: Option<u64>,
    /// Each streamed token's logprob and its top alternatives, in order, when `--logprobs K`
    /// asked for them and the serve sent them (`choices[0].logprobs.content[]`, as
    /// llama-server, vLLM and the OpenAI API stream them). Absent when none were asked for or
    /// none came (the run says which), and in archives from before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
}

/// The most bytes of a token's text kept in a logprob record (a real token is a few bytes; a
/// serve's claim of a longer one is cut, never held whole).
pub const LOGPROB_TOKEN_BYTES: usize = 256;
/// The most alternatives a token keeps: `--logprobs` is at most this.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// One streamed token as the serve scored it: its text, its logprob (natural log, nats), and
/// the serve's top alternatives at that position, most likely first (it among them, as the
/// OpenAI API sends them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text, cut to [`LOGPROB_TOKEN_BYTES`].
    pub token: String,
    /// Its logprob, nats.
    pub logprob: f64,
    /// The top alternatives, at most [`MAX_TOP_LOGPROBS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<TopLogprob>,
}

/// One alternative at a token's position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// Its text, cut to [`LOGPROB_TOKEN_BYTES`].
    pub token: String,
    /// Its logprob, nats.
    pub logprob: f64,
}

/// One re-anchor (`--reference-reanchor`, issue 31): past a divergence from the reference, the
/// candidate was asked to go on from the reference's own answer through the diverging token
/// (a final assistant message it continues), so the rest of the reference's answer is judged
/// too. Recorded apart from the replies (reanchors.json), judged by the reference line alone,
/// never timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReanchorRecord {
    /// The prompt.
    pub prompt: String,
    /// The reference's token the prefix ends with, from 0: the divergence re-anchored.
    pub at_token: usize,
    /// The assistant message sent: the reference's answer through that token.
    pub prefix: String,
    /// The candidate's continuation, as streamed.
    pub content: String,
    /// Its tokens' logprobs, when the serve sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
    /// Its last `finish_reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// What went wrong with the request, when it did not complete cleanly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A stream's place in the concurrent bursts: burst `round` of the run, stream `stream` of
/// its burst, both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BurstSlot {
    /// The burst, from 1.
    pub round: usize,
    /// The stream within its burst, from 1.
    pub stream: usize,
}

impl ReplyRecord {
    /// How a line names this reply: `reply 3`, or for a burst's stream `burst 2 stream 4
    /// (reply 9)`.
    pub fn name(&self) -> String {
        match self.burst {
            None => format!("reply {}", self.index),
            Some(b) => format!(
                "burst {} stream {} (reply {})",
                b.round, b.stream, self.index
            ),
        }
    }
}

/// The sizes of a reply's text before it was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextCut {
    /// Bytes of answer text received.
    pub content_bytes: usize,
    /// Bytes of reasoning text received.
    pub reasoning_bytes: usize,
}

/// Bytes of each text channel (answer, reasoning) a reply's record keeps in memory once it is
/// archived, and all that judging reads of it, in `run` and in `judge` alike: every check
/// (the expected pattern, the comparison of repeats, the quotes) is decided far inside it,
/// and twelve replies of 10 MB no longer hold 165 MiB of the gate's memory (issue 30). The
/// archive keeps the whole text.
pub const JUDGED_TEXT: usize = 256 << 10;

impl ReplyRecord {
    /// Cut `content` and `reasoning` to their first `keep` bytes each (at a character's
    /// boundary), recording in `text_cut` how much there was; nothing when both fit.
    pub fn cut_text(&mut self, keep: usize) {
        if self.content.len() <= keep && self.reasoning.len() <= keep {
            return;
        }
        let before = self.text_cut.unwrap_or(TextCut {
            content_bytes: self.content.len(),
            reasoning_bytes: self.reasoning.len(),
        });
        self.text_cut = Some(before);
        for text in [&mut self.content, &mut self.reasoning] {
            if text.len() > keep {
                let mut cut = keep;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                // A new string, not a truncated one: truncating keeps the whole allocation.
                *text = text[..cut].to_string();
            }
        }
    }

    /// Keep in memory only what judging reads of this reply's text ([`JUDGED_TEXT`]).
    pub fn keep_judged_text(&mut self) {
        self.cut_text(JUDGED_TEXT);
    }

    /// Whether judging reads this reply's logprobs: the reference line reads those of the
    /// first single-stream reply to each prompt that did not fail (warm-ups left out), and no
    /// other's.
    fn logprobs_judged(&self, earlier: &[ReplyRecord]) -> bool {
        let judged = |r: &ReplyRecord| r.error.is_none() && r.burst.is_none() && !r.warmup;
        judged(self) && !earlier.iter().any(|r| judged(r) && r.prompt == self.prompt)
    }

    /// Keep in memory only what judging reads of this reply, made after `earlier`: its text
    /// ([`Self::keep_judged_text`]), and its logprobs only where the reference line reads
    /// them. A reply's logprobs can be a few kB a token; a long run's would hold the gate's
    /// memory for nothing. The archive keeps them all.
    pub fn keep_judged(&mut self, earlier: &[ReplyRecord]) {
        self.keep_judged_text();
        if self.logprobs.is_some() && !self.logprobs_judged(earlier) {
            self.logprobs = None;
        }
    }

    /// Why this record cannot be of a run the gate made, if it cannot: the gate stamps the send
    /// before the request goes, each chunk as its read returns and the end after the stream, all
    /// on one monotonic clock. A chunk before the send gave a first token of 0 ms (the reply
    /// edited to pass); chunks out of order or an end before the last chunk are as untrue.
    pub fn impossible(&self) -> Option<String> {
        let mut last = self.sent_ns;
        for (i, c) in self.chunks.iter().enumerate() {
            if c.at_ns < self.sent_ns {
                return Some(format!(
                    "its chunk {} arrived at {} ns, before the request was sent at {} ns",
                    i + 1,
                    c.at_ns,
                    self.sent_ns
                ));
            }
            if c.at_ns < last {
                return Some(format!(
                    "its chunk {} arrived at {} ns, before chunk {} at {last} ns",
                    i + 1,
                    c.at_ns,
                    i
                ));
            }
            last = c.at_ns;
        }
        (self.end_ns < last).then(|| {
            format!(
                "it ended at {} ns, before its last stamp at {last} ns",
                self.end_ns
            )
        })
    }

    /// Bytes of text (answer and reasoning) the reply received, cut or not.
    pub fn text_bytes(&self) -> usize {
        match self.text_cut {
            Some(cut) => cut.content_bytes + cut.reasoning_bytes,
            None => self.content.len() + self.reasoning.len(),
        }
    }

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
            text_cut: None,
            metrics: None,
            burst: None,
            written_ns: None,
            warmup: false,
            unrequested_choice: None,
            logprobs: None,
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
        /// The serve's base URL the probes went to (absent in runs from before it was kept).
        #[serde(default)]
        url: Option<String>,
        /// HTTP answers other than 200 it gave meanwhile (absent in runs from before).
        #[serde(default)]
        not_ready_answers: Option<u32>,
        /// What the last probe got instead of an answer, when none was an HTTP answer (e.g.
        /// `connection refused`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_probe: Option<String>,
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

/// How the serve was stopped: only what happened, as the supervisor saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// Whether the serve itself was still running when the grace ran out (or a second signal
    /// cut it short), and was killed with SIGKILL.
    pub killed: bool,
    /// A second signal cut the stop short: whatever was left got SIGKILL at once.
    #[serde(default)]
    pub cut_short: bool,
    /// Processes that had left the serve's process group and were still running after it
    /// stopped; they were stopped too (SIGTERM, SIGKILL after the grace). Zombies are not
    /// counted: they were already gone.
    #[serde(default)]
    pub escaped_killed: usize,
    /// The serve's exit status, as text, when it was reaped.
    pub exit_status: Option<String>,
    /// Other processes of the serve's group still running when SIGKILL went to it (the serve
    /// may have exited on SIGTERM while they did not).
    #[serde(default)]
    pub group_killed: usize,
    /// Processes of the serve's tree still running 5 s after SIGKILL (stuck in the kernel):
    /// the gate could not stop them.
    #[serde(default)]
    pub left_running: usize,
    /// The serve's end, when it was not the gate's doing: it exited or died before the gate
    /// asked it to stop, or died of a signal the gate never sends while it stopped. Absent when
    /// the serve ended as the gate stopped it (and in runs from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unasked_end: Option<UnaskedEnd>,
    /// The gate's supervisor did not see the stop through: something killed it or stopped it
    /// (SIGSTOP), or it stopped answering (issue 30: a serve can signal a process of its own
    /// user). The gate then killed the serve's tree itself. Absent when the supervisor stopped
    /// the serve as asked (and in runs from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor_lost: Option<SupervisorLost>,
    /// Processes of the serve's tree the gate itself found running and killed (SIGKILL) once
    /// its supervisor was gone or no longer trusted: the serve's group and every process whose
    /// ancestry reaches the gate (it is their child subreaper, so the supervisor's orphans come
    /// to it).
    #[serde(default)]
    pub gate_killed: usize,
}

/// What became of the gate's supervisor, when it did not stop the serve as asked
/// ([`StopRecord::supervisor_lost`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisorLost {
    /// What the gate found.
    pub what: SupervisorFault,
    /// Whether it happened before the gate asked for the stop (else during it).
    pub before_stop: bool,
    /// How the supervisor ended, as the system says it (`signal: 9 (SIGKILL)`), when the gate
    /// reaped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// How the gate's supervisor failed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupervisorFault {
    /// It exited without reporting the stop: killed, or crashed.
    Died,
    /// It was stopped (SIGSTOP, SIGTSTP; continued since or not): it could not have acted.
    Stopped,
    /// It ran but did not report the stop within the time the stop may take.
    Silent,
}

/// A serve's end that the gate did not ask for ([`StopRecord::unasked_end`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnaskedEnd {
    /// As the system says it: `exit status: 0`, `signal: 11 (SIGSEGV) (core dumped)`.
    pub status: String,
    /// When the gate saw it.
    pub when: UnaskedWhen,
}

/// When a serve's unasked end was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum UnaskedWhen {
    /// It had ended before the gate asked it to stop: seen at `seen_ns` (since the clock
    /// base), after its replies.
    BeforeStop {
        /// When the gate found it gone, ns since the clock base.
        seen_ns: u64,
    },
    /// It died of a signal the gate does not send (not SIGTERM, not SIGKILL) while the gate
    /// stopped it: a crash on the way down.
    WhileStopping,
}

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
}

/// What a run asked of the serve's logprobs (`--logprobs K`) and what came of it, as run.json
/// records it: `judge` says from it what `run` said. The tokens themselves are each reply's
/// [`ReplyRecord::logprobs`].
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
    /// [`LOGPROB_TOKEN_BYTES`] are not counted.
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

/// The serve's own metrics (Prometheus text), scraped around the bursts: metrics.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsRecord {
    /// The URL scraped.
    pub url: String,
    /// Whether it was given (`--metrics-url`) or the serve's `/metrics` was tried.
    pub given: bool,
    /// Each scrape, in order: before the bursts, at most one during, after.
    pub scrapes: Vec<MetricsScrape>,
}

/// One scrape of the serve's metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsScrape {
    /// `before`, `during` or `after` the bursts.
    pub phase: Phase,
    /// When the answer was read (ns since the clock base).
    pub at_ns: u64,
    /// The HTTP status, when the serve answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The answer's body as text (invalid UTF-8 replaced), at most
    /// [`METRICS_BODY_KEPT`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Whether the body was longer than what is kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Why there is no answer (refused, timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The most bytes of one metrics answer kept: a serve's metrics are a few KiB.
pub const METRICS_BODY_KEPT: usize = 1 << 20;

/// Floors, limits and route patterns: what a run is judged against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Floors {
    /// Lowest acceptable median decode rate, tok/s.
    pub floor: f64,
    /// Highest acceptable median first-token time, ms.
    pub first_token_ms: f64,
    /// A regex the serve log must match: it names the fast route.
    pub fast_route: Option<String>,
    /// A regex the serve log must not match: it names the slow fallback.
    pub slow_route: Option<String>,
    /// The busy-box SKIP policy: a timing-only failure with contention at or above this (the
    /// serve's CPU-wait fraction, or the load per CPU where that is not measurable) is a SKIP.
    #[serde(default)]
    pub busy_skip: Option<f64>,
    /// A regex some process of the serve's tree must map a matching file of, as executable
    /// code of an ELF shared object (route.json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_lib: Option<String>,
    /// A regex no process of the serve's tree may map a matching file of, in any way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_route_lib: Option<String>,
    /// A regex some process of the serve's tree must hold a matching character device open
    /// by, during the replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_device: Option<String>,
    /// The busy counter that must advance during the replies: a file, or `fdinfo:KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_busy: Option<String>,
    /// The accepted baseline run directory the candidate is compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// The change against the baseline that is noise, as a share (default 0.03).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_noise: Option<f64>,
    /// The largest regression against the baseline that is acceptable, as a share (default
    /// 0.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_regression: Option<f64>,
    /// Differences of the box from the baseline's that are accepted (`host`, `kernel`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_allow: Vec<String>,
    /// Lowest acceptable median aggregate decode rate of the concurrent bursts, tok/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate_floor: Option<f64>,
    /// Lowest acceptable speedup of the bursts' median aggregate rate over the single-stream
    /// median rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speedup: Option<f64>,
    /// The largest fall of the decode rate over the run that passes the drift line, a share
    /// (`--max-drift`; absent: 0.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drift: Option<f64>,
    /// `--deterministic`: every reply to a prompt must be the first reply to it, and every
    /// burst's stream the single-stream reply to its prompt (the determinism line). Absent,
    /// false, for a run that does not ask it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deterministic: bool,
    /// `--baseline-answers`: what a greedy answer that differs from the baseline's is
    /// (absent: info).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_answers: Option<AnswerPolicy>,
    /// `--reference`: the archived run of a trusted build whose tokens the candidate's are
    /// held to (issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// `--reference-tie`, nats: a divergence within it is a near-tie (absent: 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_tie: Option<f64>,
    /// `--min-agreement`: the lowest top-1 agreement with the reference, a share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_agreement: Option<f64>,
    /// `--max-logprob-drift`, nats: the highest p90 of the chosen tokens' |Δ logprob|.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_logprob_drift: Option<f64>,
    /// `--reference-reanchor`: the most re-anchors a prompt is judged past (absent: 8; 0 judges
    /// each prompt up to its first divergence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_reanchor: Option<usize>,
    /// The output line's settings (issue 32); absent: its defaults.
    #[serde(default, skip_serializing_if = "OutputFloors::is_default")]
    pub output: OutputFloors,
}

/// What the output line holds replies to (issue 32, docs/output.md): each threshold absent
/// where the run took its default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFloors {
    /// `--output-checks off`: the line is info, for a serve meant to repeat (a benchmark mode
    /// that ignores end tokens).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub off: bool,
    /// `--loop-share`: the least share of a reply a loop covers (0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_share: Option<f64>,
    /// `--loop-repeats`: the least repeats of a loop's unit (3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_repeats: Option<usize>,
    /// `--stutter-run`: the least run of one word that is a stutter (4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stutter_run: Option<usize>,
    /// `--not-text-share`: the largest share of a reply's characters that may be not text
    /// (0.01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_text_share: Option<f64>,
    /// `--same-answer`: the similarity from which two prompts' answers are one (0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_answer: Option<f64>,
    /// `--length-share`: the largest relative difference of the mean answer length from the
    /// reference's or baseline's (0.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_share: Option<f64>,
    /// `--stop-margin`: the largest fall of the share of replies that stopped by themselves
    /// against the reference's or baseline's (0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_margin: Option<f64>,
}

impl OutputFloors {
    /// Whether every setting is its default (nothing to write).
    pub fn is_default(&self) -> bool {
        *self == OutputFloors::default()
    }
}

/// What an answer that differs from the baseline's answer to the same prompt is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerPolicy {
    /// Said, never failed: a new release may legitimately change a greedy answer.
    #[default]
    Info,
    /// A FAIL: the candidate must answer every prompt exactly as the baseline did.
    Exact,
}

impl AnswerPolicy {
    /// As `--baseline-answers` and run.json write it.
    pub fn name(self) -> &'static str {
        match self {
            AnswerPolicy::Info => "info",
            AnswerPolicy::Exact => "exact",
        }
    }

    /// `info` or `exact`.
    pub fn parse(s: &str) -> Result<AnswerPolicy, String> {
        match s.trim() {
            "info" => Ok(AnswerPolicy::Info),
            "exact" => Ok(AnswerPolicy::Exact),
            _ => Err(format!(
                "{s:?} is not a policy for the baseline's answers: give info (an answer that differs is said) or exact (it FAILs)"
            )),
        }
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

/// Where a reply's token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// `usage.completion_tokens`, as the serve reported it.
    Usage,
    /// `usage.completion_tokens` less one end-of-generation token that was counted but never
    /// streamed (llama-server: 7 content chunks, completion_tokens 8, finish_reason "stop").
    UsageLessEndOfGeneration,
    /// The number of events that carried text.
    Chunks,
    /// The number of events that carried text, because `usage.completion_tokens` claimed more
    /// tokens than the streamed text could hold (see [`usage_ceiling`](crate::judging::measure::usage_ceiling)).
    ChunksUsageNotBelieved,
    /// Neither: no usage and no text.
    None,
}

/// What a reply measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyMetrics {
    /// Tokens generated.
    pub tokens: f64,
    /// Where `tokens` came from.
    pub token_source: TokenSource,
    /// Events that carried text (answer or reasoning).
    pub text_chunks: usize,
    /// Tokens counted for the first text event (decode rate excludes them).
    pub first_chunk_tokens: f64,
    /// When the request was sent (ns since the clock base).
    pub sent_ns: u64,
    /// Arrival of the first text event.
    pub first_ns: Option<u64>,
    /// Arrival of the last text event.
    pub last_ns: Option<u64>,
    /// First token minus sent, in ms.
    pub first_token_ms: Option<f64>,
    /// Decode rate in tokens per second, from the first to the last text event.
    pub rate_tok_s: Option<f64>,
    /// The serve's own figure for the same, where it reports one (llama-server's
    /// `timings.predicted_per_second`), for cross-checking.
    #[serde(default)]
    pub server_rate_tok_s: Option<f64>,
    /// The usage count the gate did not believe, and what the streamed text could hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_not_believed: Option<UsageNotBelieved>,
    /// Why the reply has no rate though its text came in two reads or more: most of it arrived
    /// within a small share of the reply's time, held back and sent at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bunched: Option<Bunched>,
}

/// A reply whose text arrived bunched: `events` of its `of` text events within `window_ns`, a
/// small share of the `span_ns` from its send to its last text. The gaps between them say how
/// the bytes were sent, not how fast the tokens were made: no rate can be read from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bunched {
    /// Text events in the window.
    pub events: usize,
    /// Text events in all.
    pub of: usize,
    /// The shortest time that held `events` of them, ns.
    pub window_ns: u64,
    /// From the reply's send to its last text event, ns.
    pub span_ns: u64,
}

/// A usage count claiming more tokens than the streamed text could hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageNotBelieved {
    /// `usage.completion_tokens`, as the serve sent it.
    pub claimed: u64,
    /// Events that carried text.
    pub text_chunks: usize,
    /// Bytes of text they carried (answer and reasoning).
    pub text_bytes: usize,
}

/// What the run records of its hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldRecord {
    /// The lock file.
    pub file: String,
    /// Whether it was acquired.
    pub acquired: bool,
    /// How long the gate waited, ms.
    pub waited_ms: f64,
    /// Who held it while the gate waited, if anyone said.
    pub waited_for: Option<String>,
    /// The timeout, s.
    pub timeout_s: f64,
    /// CLOCK_MONOTONIC ns when it was acquired.
    pub acquired_ns: Option<u64>,
    /// CLOCK_MONOTONIC ns when it was released.
    pub released_ns: Option<u64>,
    /// Each look at whether the locked file was still the file at the hold's path (before and
    /// after the replies, and at the release): a hold file removed or replaced lets a second
    /// gate take "the same" hold while this one runs. Empty in runs from before it was checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<HoldCheck>,
}

/// One look at the hold's path ([`HoldRecord::checks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldCheck {
    /// When the gate looked.
    pub at: HoldCheckAt,
    /// What the path was then.
    pub found: HoldFound,
}

impl HoldCheck {
    /// Whether the hold was still there: a second gate opening the path would wait for it.
    pub fn held(&self) -> bool {
        self.found == HoldFound::LockedFile
    }
}

/// When the hold's path was looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldCheckAt {
    /// The serve was ready; the replies were about to start.
    BeforeReplies,
    /// The replies were over; the stop was about to start.
    AfterReplies,
    /// The serve's tree was gone; the hold was about to be released.
    Release,
}

/// What the hold's path was when the gate looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldFound {
    /// The file the gate locked (same device and inode).
    LockedFile,
    /// Nothing: the file was removed.
    Nothing,
    /// Another file (or a symlink planted there, which is not followed).
    AnotherFile,
    /// The path could not be looked at (its directory made unreadable): the hold cannot be
    /// vouched for.
    Unreachable,
}

/// One look at the box and the serve during the replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Milliseconds since the replies began.
    pub t_ms: f64,
    /// The box's 1-minute load average.
    pub load1: f64,
    /// `/proc/pressure/cpu` `some avg10` (percent), where the kernel has it.
    pub cpu_some_avg10: Option<f64>,
    /// CPU time of the serve's threads since the replies began, ns.
    pub serve_cpu_ns: Option<u64>,
    /// Run-queue wait of the serve's threads since the replies began, ns.
    pub serve_wait_ns: Option<u64>,
    /// The CPUs' thermal throttle events so far: the sum over CPUs of
    /// `thermal_throttle/core_throttle_count` and `package_throttle_count`, where the box has
    /// them (x86 only). A rise between two samples is a throttle event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle_count: Option<u64>,
    /// The CPUs' mean current frequency (cpufreq `scaling_cur_freq`), MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<f64>,
    /// The slowest CPU's current frequency, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_min: Option<f64>,
    /// The hottest thermal zone (`/sys/class/thermal/thermal_zone*/temp`), degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f64>,
    /// `--device-freq`'s reading, MHz (devfreq `cur_freq` is in Hz).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz: Option<f64>,
    /// `--device-temp`'s reading, degrees Celsius (hwmon `temp*_input` is in millidegrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_temp_c: Option<f64>,
}

#[cfg(test)]
impl Sample {
    /// A look at `t_ms` with a load of 0.5 and nothing else read: the tests' blank to fill in.
    pub fn bare(t_ms: f64) -> Sample {
        Sample {
            t_ms,
            load1: 0.5,
            cpu_some_avg10: None,
            serve_cpu_ns: None,
            serve_wait_ns: None,
            throttle_count: None,
            cpu_mhz: None,
            cpu_mhz_min: None,
            temp_c: None,
            device_mhz: None,
            device_temp_c: None,
        }
    }
}

/// A process name that used CPU during the replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopProcess {
    /// Process name.
    pub name: String,
    /// How many processes of that name.
    pub count: usize,
    /// CPU used, percent of one CPU, over the replies.
    pub cpu_pct: f64,
}

/// What the replies ran beside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DuringReplies {
    /// Sampling interval, ms.
    pub interval_ms: u64,
    /// When sampling began, ns since the run's clock base (the replies' clock): a sample at
    /// `t_ms` was taken at `started_ns + t_ms * 1e6`. Absent in runs from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ns: Option<u64>,
    /// Seconds the replies took.
    pub seconds: f64,
    /// Highest 1-minute load average seen.
    pub load1_max: f64,
    /// Highest CPU pressure (`some avg10`, percent) seen, where the kernel has it.
    pub cpu_some_avg10_max: Option<f64>,
    /// CPU seconds the serve's threads used.
    pub serve_cpu_s: Option<f64>,
    /// Seconds the serve's threads waited for a CPU while ready to run.
    pub serve_wait_s: Option<f64>,
    /// serve_wait / (serve_wait + serve_cpu): of the time the serve was ready to run, the share
    /// it spent waiting for a CPU.
    pub wait_fraction: Option<f64>,
    /// Other processes that used the most CPU (not the serve, not the gate), most first.
    pub top: Vec<TopProcess>,
    /// The CPU every process outside the serve's tree and the gate used over the replies,
    /// percent of one CPU (all of them, not only `top`): what a busy box took from the serve.
    /// Absent in runs from before it; the sum of `top` then stands for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cpu_pct: Option<f64>,
    /// What the samples showed of throttling, where they showed any (for readers; the
    /// verdict recomputes it from `samples`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<ThrottleSummary>,
    /// Every sample.
    pub samples: Vec<Sample>,
}

/// What the samples of a run showed of throttling: each figure only where some sample had it.
/// "first" and "last" are the first and last samples that had the figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThrottleSummary {
    /// The rise of the CPUs' throttle count ([`Sample::throttle_count`]) from the first
    /// sample that had it to the last; from two samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle_events: Option<u64>,
    /// The CPUs' mean clock at the first sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_first: Option<f64>,
    /// The lowest mean clock of any sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_lowest: Option<f64>,
    /// The mean clock at the last sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_last: Option<f64>,
    /// The slowest any one CPU ran at any sample, MHz (an idle CPU's clock drops too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_slowest: Option<f64>,
    /// The hottest thermal zone at any sample, degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c_max: Option<f64>,
    /// The device's clock at the first sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz_first: Option<f64>,
    /// The device's lowest clock at any sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz_lowest: Option<f64>,
    /// The device's clock at the last sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz_last: Option<f64>,
    /// The device's highest temperature at any sample, degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_temp_c_max: Option<f64>,
}

/// route.json: what the serve's own processes showed of its route while the replies ran: the
/// files each process of its tree mapped and held open, and the device's busy counter. Read
/// from /proc, which a release cannot rename the way it renames a log line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteRecord {
    /// The launched process, the root of the tree.
    pub root_pid: Option<u32>,
    /// Every process of the tree seen during the replies, in the order first seen.
    pub processes: Vec<ProcessRecord>,
    /// The busy counter's readings, when `--device-busy` was given.
    #[serde(default)]
    pub counter: Option<CounterRecord>,
    /// Evidence that could not be read, in words (e.g. `/proc/812/maps: Permission denied`).
    #[serde(default)]
    pub problems: Vec<String>,
    /// Whether the evidence was read again once the replies were over (false when the run was
    /// interrupted before then).
    #[serde(default)]
    pub read_after_replies: bool,
    /// Which of the run's patterns matched what, for readers; judging recomputes it.
    #[serde(default)]
    pub matched: Vec<RouteMatch>,
}

/// One process of the serve's tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid.
    pub parent: Option<u32>,
    /// Its name (`comm`).
    pub comm: String,
    /// The executable it runs (`/proc/PID/exe`), where readable.
    pub exe: Option<String>,
    /// Every file it mapped, deduplicated, in the order first seen.
    pub maps: Vec<String>,
    /// Files it held open during the replies (no sockets, pipes or anonymous inodes),
    /// deduplicated.
    pub open: Vec<String>,
    /// Whether `maps` or `open` reached their cap and more were left out.
    #[serde(default)]
    pub truncated: bool,
    /// How each file of `maps` was mapped and, when executable, what its header says (issue
    /// 30: only an executable mapping of an ELF shared object is library evidence). `None` in
    /// a route.json from before this was recorded: its mappings are judged as they were then,
    /// and the route line says their kind was not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_kinds: Option<std::collections::BTreeMap<String, MapKind>>,
    /// What each file of `open` is, as stat(2) of /proc/PID/fd/N says (issue 30: only a
    /// character device is device evidence). `None` in a route.json from before this was
    /// recorded, as for `map_kinds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_kinds: Option<std::collections::BTreeMap<String, FileKind>>,
}

/// How one file was mapped by a process, and what its first bytes say it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MapKind {
    /// The distinct permissions of its mappings, as /proc/PID/maps writes them (`r--p`,
    /// `r-xp`), in the order first seen.
    pub perms: Vec<String>,
    /// Its ELF header, read when some mapping of it is executable; `None` when none is (a
    /// file mapped only as data is not code, whatever it holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Header>,
    /// How the header was read: `map_files` (/proc/PID/map_files, the very file mapped) or
    /// `path` (its path, with the inode checked against the mapping's, where map_files could
    /// not be read: it needs CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_via: Option<String>,
}

impl MapKind {
    /// Whether some mapping of the file is executable (the `x` of `r-xp`).
    pub fn executable(&self) -> bool {
        self.perms
            .iter()
            .any(|p| p.as_bytes().get(2) == Some(&b'x'))
    }
}

/// What a mapped file's first 64 bytes say it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Header {
    /// ELF with e_type ET_DYN (3): a shared object (or a position-independent executable).
    ElfSharedObject,
    /// ELF with another e_type (ET_REL 1, ET_EXEC 2, ET_CORE 4, ...).
    ElfOfType(u16),
    /// Not ELF: no `\x7fELF` magic, or too short to hold an ELF header.
    NotElf,
    /// It could not be read, and why.
    Unread(String),
}

/// The kind of an open file, from its mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// A character device (S_IFCHR): what /dev/accel/accel0, /dev/dri/renderD128 and
    /// /dev/nvidia0 are.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A FIFO.
    Fifo,
    /// A socket with a path.
    Socket,
    /// Another kind.
    Other,
    /// It could not be stat'ed, and why.
    Unread(String),
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileKind::CharDevice => f.write_str("a character device"),
            FileKind::BlockDevice => f.write_str("a block device"),
            FileKind::Regular => f.write_str("a regular file"),
            FileKind::Directory => f.write_str("a directory"),
            FileKind::Fifo => f.write_str("a FIFO"),
            FileKind::Socket => f.write_str("a socket"),
            FileKind::Other => f.write_str("of an unknown kind"),
            FileKind::Unread(why) => write!(f, "of a kind that could not be read ({why})"),
        }
    }
}

/// A busy counter read before and after the replies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterRecord {
    /// What was read: a file path, or `fdinfo:KEY`.
    pub source: String,
    /// The counter's unit where known: `us`, `ns`, `ms`.
    pub unit: Option<String>,
    /// The reading as the replies began.
    pub before: Option<CounterReading>,
    /// The reading once they were over.
    pub after: Option<CounterReading>,
    /// Why a reading is missing.
    pub problem: Option<String>,
}

/// One reading of a busy counter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CounterReading {
    /// When, ns on the run's clock (as the replies' times).
    pub at_ns: u64,
    /// The value (for `fdinfo:KEY`, summed over the matching files held open).
    pub value: u64,
}

/// What one route pattern matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteMatch {
    /// The flag: `route-lib`, `no-route-lib` or `route-device`.
    pub check: String,
    /// The pattern.
    pub pattern: String,
    /// `PID PATH` for each match.
    pub found: Vec<String>,
}

/// How a line came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// The check passed.
    #[serde(rename = "ok")]
    Ok,
    /// The check failed.
    #[serde(rename = "FAIL")]
    Fail,
    /// Information only; never changes the result.
    #[serde(rename = "info")]
    Info,
    /// The check could not decide (a comparison with a baseline whose interval straddles the
    /// limits, or whose conditions differ): the result is INCONCLUSIVE unless something failed.
    #[serde(rename = "inconclusive")]
    Inconclusive,
}

/// One line of the verdict: a check, how it came out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Which check (result.json has its name).
    pub check: Check,
    /// How it came out.
    pub status: Status,
    /// What a reader needs to know.
    pub text: String,
    /// The line's figures as numbers, for CI to read without parsing the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<Figures>,
}

/// A line's figures as numbers (each only where the line has it), with their unit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    /// The unit of `median`, `interval_95`, `floor` and `limit`: `tok/s` or `ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// The median over the replies that have the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    /// How many replies the median rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<usize>,
    /// How many replies were made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<usize>,
    /// The median's distribution-free 95% interval, low and high (from 6 values); on the
    /// determinism line, the mismatch rate's exact (Clopper-Pearson) 95% interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_95: Option<[f64; 2]>,
    /// The floor the median is held to (rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<f64>,
    /// The limit the median is held to (first-token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// The box's 1-minute load average before the serve started (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load1: Option<f64>,
    /// The box's CPUs (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ncpu: Option<usize>,
    /// The share of the time it was ready to run that the serve waited for a CPU during the
    /// replies, 0 to 1 (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_cpu_wait: Option<f64>,
    /// The highest CPU pressure (some, avg10) during the replies, percent (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure_pct: Option<f64>,
    /// Against the baseline: the Hodges-Lehmann ratio, candidate / baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Against the baseline: the ratio's 90% interval (Mann-Whitney).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_90: Option<[f64; 2]>,
    /// Against the baseline: how many of the baseline's replies the comparison rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_values: Option<usize>,
    /// The bursts' median aggregate rate over the single-stream median rate (aggregate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// The speedup the aggregate is held to (`--min-speedup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speedup: Option<f64>,
    /// The longest any burst's request took to be written after its release, ms: the gate's
    /// own dispatch delay (aggregate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_ms: Option<f64>,
    /// The most streams decoding at once in any burst (overlap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_streams: Option<usize>,
    /// The serve's own count of tokens generated over the bursts: its token counter after
    /// them less before them (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_tokens: Option<f64>,
    /// The tokens the gate counted over the bursts' streams (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_tokens: Option<f64>,
    /// The most requests the serve's metrics showed being processed at one scrape, summed over
    /// their label sets (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_processing: Option<f64>,
    /// The most requests the serve's metrics showed waiting (deferred, queued) at one scrape,
    /// summed over their label sets (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_deferred: Option<f64>,
    /// The change over the run by Sen's slope, as a share of the first reply's fitted figure:
    /// -0.183 for a fall of 18.3% (drift, first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<f64>,
    /// The Mann-Kendall one-sided p-value in the bad direction: for a fall of the rate (drift),
    /// for a rise of the first-token time (first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_p: Option<f64>,
    /// How many blocks of consecutive replies the test ran on (drift, first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<usize>,
    /// How many replies a block holds (the shortest; a block may hold one more where the
    /// replies do not divide evenly) (drift, first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_length: Option<usize>,
    /// The largest fall over the run that passes (`--max-drift`), a share (drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drift: Option<f64>,
    /// Time to first token over the judged replies, ms (latency): TTFT, as vLLM's and
    /// guidellm's reports name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<Percentiles>,
    /// Inter-token latency, ms (latency): every gap between consecutive text events of every
    /// judged reply, pooled (ITL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<Percentiles>,
    /// Time per output token after the first, ms (latency): per reply, (end - first token) /
    /// (tokens - 1) (TPOT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<Percentiles>,
    /// End-to-end latency per reply, ms (latency): from the request's send to its last event
    /// (E2EL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_ms: Option<Percentiles>,
    /// The trials compared (determinism: each reply after the first to its prompt, and each
    /// burst's stream with a single-stream reply to its prompt; baseline-answers: the prompts
    /// compared with the baseline's answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trials: Option<usize>,
    /// How many of them differed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatches: Option<usize>,
    /// `mismatches / trials` (determinism); its exact 95% interval (Clopper-Pearson) is
    /// `interval_95`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch_rate: Option<f64>,
    /// The smallest per-trial mismatch rate these trials would have shown at least once with
    /// probability 0.95, `1 - 0.05^(1/trials)` (determinism).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectable_rate: Option<f64>,
    /// The reference line's figures (`--reference`, issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceFigures>,
    /// The output line's figures (issue 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputFigures>,
}

/// What the output line found, rule by rule (docs/output.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFigures {
    /// Replies judged: those that did not fail and have content.
    pub replies: usize,
    /// Replies whose tail loops.
    pub loops: usize,
    /// The largest share of a reply a loop covered, where one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_share_max: Option<f64>,
    /// Replies that stutter.
    pub stutters: usize,
    /// The longest run of one word (0 under the threshold).
    pub stutter_run_max: usize,
    /// Replies over the share of characters that are not text.
    pub not_text: usize,
    /// The largest share of a reply's characters that are not text.
    pub not_text_share_max: f64,
    /// Pairs of prompts answered alike.
    pub same_answers: usize,
    /// The largest similarity of two prompts' answers that should differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_answer_max: Option<f64>,
    /// The share of judged replies that stopped by themselves (`finish_reason` `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_share: Option<f64>,
    /// The mean answer length over the reference's or baseline's, where held to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_ratio: Option<f64>,
}

/// What the reference line rests on and found: the candidate's tokens against a trusted
/// build's, judged past each divergence where re-anchored (docs/reference.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceFigures {
    /// Prompts whose first answers were compared.
    pub prompts: usize,
    /// Reference positions judged: every token of an identical answer, and of a diverging one
    /// the tokens before the divergence and the divergence itself.
    pub positions: usize,
    /// Positions where both sides chose the same text.
    pub agreed: usize,
    /// `agreed / positions`; absent when no position was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<f64>,
    /// Divergences within the tie margin on every side that could be read.
    pub near_ties: usize,
    /// Divergences past the tie margin, or to a token outside the other side's top-K.
    pub hard_divergences: usize,
    /// Divergences whose margin could not be read (the reference ended where the candidate
    /// went on: no logprob is recorded for its end).
    pub unmeasured: usize,
    /// Re-anchors judged past a divergence (`--reference-reanchor`).
    pub reanchored: usize,
    /// Prompts left with a divergence unjudged past it: the re-anchor bound was spent, none
    /// was recorded, or the serve did not continue the assistant message.
    #[serde(default)]
    pub stopped_short: usize,
    /// The K the positions were judged on: the smaller of the two sides' top-K.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
    /// The tie margin, nats (`--reference-tie`).
    pub tie: f64,
    /// The chosen tokens' |Δ logprob| (nats) at positions both sides tokenised alike, where
    /// the candidate sent logprobs: how many, median, p90 (Hyndman & Fan definition 7) and max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprob_delta: Option<DeltaFigures>,
    /// The mean KL divergence (nats) of the candidate from the reference over the reference's
    /// top-K, renormalised: truncation to K understates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_mean: Option<f64>,
    /// `--min-agreement`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_agreement: Option<f64>,
    /// `--max-logprob-drift` (held to the p90 of |Δ logprob|), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_logprob_drift: Option<f64>,
}

/// A distribution of |Δ logprob|, nats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaFigures {
    /// How many positions.
    pub count: usize,
    /// The median.
    pub median: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The largest.
    pub max: f64,
}

/// A distribution's figures as the peers' reports give them: vLLM's benchmark_serving prints
/// mean, median and p99; guidellm p50, p90, p99. Percentiles by linear interpolation between
/// order statistics (Hyndman & Fan 1996, definition 7: numpy's default, which vLLM uses).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    /// How many values.
    pub count: usize,
    /// Their mean.
    pub mean: f64,
    /// The 50th percentile (the median).
    pub p50: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The 99th percentile.
    pub p99: f64,
}

/// The run's result. Interrupted is not failed: nobody judged the serve to the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// Every line that is not info is ok.
    Pass,
    /// At least one line failed.
    Fail,
    /// The gate decided not to judge.
    Skip {
        /// Why.
        reason: String,
        /// What to do about it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        advice: Option<String>,
    },
    /// A signal stopped the run.
    Interrupted {
        /// Which signal, e.g. `SIGTERM`.
        signal: InterruptSignal,
    },
    /// Nothing failed, but a comparison with the baseline could not decide: never a PASS.
    Inconclusive {
        /// Why, from the inconclusive lines.
        reason: String,
    },
}

/// The lines and the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// One line per check, in a fixed order.
    pub lines: Vec<Line>,
    /// The result.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A run's provenance: what it ran, with what, on which box. Two runs whose model files,
/// serve arguments or workload differ measure different things; two whose box differs measure
/// the same thing on different hardware or software. Gathered once, before run.json is first
/// written; whatever could not be read is left out and named in `problems`, never guessed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// npu-serve-smoke's version.
    pub tool_version: String,
    /// The serve binary's sha256, hex (as `serve_binary.sha256`); absent when attached.
    #[serde(default)]
    pub serve_binary_sha256: Option<String>,
    /// Each file named in the serve's arguments (a model, a config), hashed: an argument (or
    /// the value after `=` in `--opt=VALUE`) that is an existing regular file other than the
    /// programs run. At most 16.
    #[serde(default)]
    pub model_files: Vec<HashedFile>,
    /// The serve's command line as launched (with the `--hold-cmd` prefix, if any), with the
    /// port the gate picked put back as `{port}`, so runs on different ports compare equal;
    /// absent when attached.
    #[serde(default)]
    pub serve_argv: Option<Vec<String>>,
    /// Where in `serve_argv` the serve's own program is (0, or after the `--hold-cmd`
    /// prefix): its path is the release candidate's, compared by `serve_binary_sha256`, not as
    /// an argument.
    #[serde(default)]
    pub serve_program_at: Option<usize>,
    /// sha256, hex, of the workload as canonical JSON (keys sorted, no spaces):
    /// `{"extra_body":...,"max_tokens":N,"prompts":[...]}`, the prompts as run.json has them.
    pub workload_sha256: String,
    /// Host name (gethostname).
    #[serde(default)]
    pub host: Option<String>,
    /// /etc/machine-id (or /var/lib/dbus/machine-id): the installation, whatever its name.
    #[serde(default)]
    pub machine_id: Option<String>,
    /// The CPU's model (/proc/cpuinfo `model name`; on Arm boards its `Model` or the device
    /// tree's model).
    #[serde(default)]
    pub cpu_model: Option<String>,
    /// CPUs online (`processor` entries in /proc/cpuinfo).
    #[serde(default)]
    pub ncpu: Option<usize>,
    /// Memory, KiB (/proc/meminfo `MemTotal`).
    #[serde(default)]
    pub mem_total_kib: Option<u64>,
    /// Kernel release (uname -r, from /proc/sys/kernel/osrelease).
    #[serde(default)]
    pub kernel: Option<String>,
    /// Accelerator kernel modules present, name -> /sys/module/NAME/version (or `srcversion
    /// X`, `loaded, no version`, `built in, no version` for a module that declares none).
    #[serde(default)]
    pub modules: std::collections::BTreeMap<String, String>,
    /// Device firmware versions from sysfs and procfs, `DRIVER DEVICE ATTRIBUTE` -> value,
    /// e.g. `amdxdna 0000:c5:00.1 fw_version` -> `1.5.2.380`.
    #[serde(default)]
    pub firmware: std::collections::BTreeMap<String, String>,
    /// What could not be read or hashed, in words.
    #[serde(default)]
    pub problems: Vec<String>,
}

/// A file the serve was given, hashed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashedFile {
    /// Its resolved absolute path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256, hex.
    pub sha256: String,
    /// Whether the hash came from the gate's hash cache (the file's path, size, times, inode
    /// and device unchanged since it was hashed) rather than from reading the file.
    #[serde(default)]
    pub cached: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_judged_reply_to_a_prompt_keeps_its_logprobs_in_memory() {
        let scored = |index: usize, prompt: &str| {
            let mut r = ReplyRecord::new(index, prompt, None);
            r.logprobs = Some(vec![TokenLogprob {
                token: "x".into(),
                logprob: -0.1,
                top: Vec::new(),
            }]);
            r
        };
        let mut kept: Vec<ReplyRecord> = Vec::new();
        let mut warm = scored(1, "p");
        warm.warmup = true;
        let mut failed = scored(2, "p");
        failed.error = Some("cut".into());
        for mut r in [warm, failed, scored(3, "p"), scored(4, "p"), scored(5, "q")] {
            r.keep_judged(&kept);
            kept.push(r);
        }
        let with: Vec<usize> = kept
            .iter()
            .filter(|r| r.logprobs.is_some())
            .map(|r| r.index)
            .collect();
        // The warm-up and the failed reply are never read; reply 4 repeats reply 3's prompt.
        assert_eq!(with, vec![3, 5]);
        let mut burst = scored(6, "r");
        burst.burst = Some(BurstSlot {
            round: 1,
            stream: 1,
        });
        burst.keep_judged(&kept);
        assert!(burst.logprobs.is_none());
    }
    use proptest::prelude::*;

    fn by_hand(chunks: &[ChunkArrival]) -> Vec<u8> {
        let mut out = Vec::new();
        write_chunks(chunks, &mut serde_json::Serializer::new(&mut out)).unwrap();
        out
    }

    fn arb_tokens() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(1.0),
            Just(0.0),
            Just(-0.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(1.0 / 3.0),
            Just(1e21),
            any::<f64>(),
        ]
    }

    proptest! {
        /// The hand-written chunks are the bytes serde_json's derived writer gives, for any
        /// chunks, and read back as they were (where their tokens are finite).
        #[test]
        fn chunks_by_hand_are_the_bytes_serde_writes(
            chunks in proptest::collection::vec(
                (any::<u64>(), any::<u32>(), any::<u32>(), arb_tokens()).prop_map(
                    |(at_ns, content_chars, reasoning_chars, tokens)| ChunkArrival {
                        at_ns,
                        content_chars,
                        reasoning_chars,
                        tokens,
                    },
                ),
                0..6,
            )
        ) {
            let hand = by_hand(&chunks);
            let derived = serde_json::to_vec(&chunks).unwrap();
            prop_assert_eq!(String::from_utf8_lossy(&hand), String::from_utf8_lossy(&derived));
            if chunks.iter().any(|c| !c.tokens.is_finite()) {
                return Ok(()); // serde_json writes those as null, and cannot read null as f64
            }
            let back: Vec<ChunkArrival> = serde_json::from_slice(&hand).unwrap();
            prop_assert_eq!(back.len(), chunks.len());
            for (b, c) in back.iter().zip(&chunks) {
                prop_assert_eq!((b.at_ns, b.content_chars, b.reasoning_chars), (c.at_ns, c.content_chars, c.reasoning_chars));
            }
        }
    }

    #[test]
    fn a_reply_line_keeps_its_chunks() {
        let mut r = ReplyRecord::new(1, "What is \"2+2\"?", None);
        r.chunks = vec![
            ChunkArrival {
                at_ns: 5,
                content_chars: 1,
                reasoning_chars: 0,
                tokens: 1.0,
            },
            ChunkArrival {
                at_ns: 9,
                content_chars: 0,
                reasoning_chars: 2,
                tokens: 0.5,
            },
        ];
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.contains(r#""chunks":[{"at_ns":5,"content_chars":1,"reasoning_chars":0,"tokens":1.0},{"at_ns":9,"content_chars":0,"reasoning_chars":2,"tokens":0.5}]"#),
            "{line}"
        );
        let back: ReplyRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn an_unrequested_choice_is_kept_and_a_reply_without_one_reads_as_before() {
        let mut r = ReplyRecord::new(1, "p", None);
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains("unrequested_choice"), "{line}");
        // A line from before the field: none seen.
        let back: ReplyRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back.unrequested_choice, None);
        r.unrequested_choice = Some(1);
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(r#""unrequested_choice":1"#), "{line}");
        assert_eq!(serde_json::from_str::<ReplyRecord>(&line).unwrap(), r);
    }
}
