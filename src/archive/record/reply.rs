//! One reply as the gate received it (replies.jsonl): its chunks' arrival times and text, the
//! hand-written writer of those chunks, the tokens' logprobs, the re-anchors past a divergence
//! from the reference (reanchors.json), and the figures measured from a reply when it was
//! recorded. What judging keeps of a reply in memory ([`JUDGED_TEXT`]) is decided here too.

use crate::archive::record::token_text::TokenText;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use std::collections::HashSet;

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
    /// Characters of tool call text (`delta.tool_calls[]`: names and argument pieces, issue
    /// 36). Absent, 0, in an event without any, as in archives from before it was recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_chars: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ChunkArrival {
    /// Whether this event carried any text, answer, reasoning or a tool call's: only those
    /// are tokens (a reply that calls a tool is timed by its calls' fragments).
    pub fn has_text(&self) -> bool {
        self.content_chars > 0 || self.reasoning_chars > 0 || self.tool_chars > 0
    }

    /// Whether this event carried any of the answer: content, or a tool call's fragment (the
    /// answer of a reply that calls a tool, what its client acts on), never reasoning alone.
    /// The first such event is the reply's first content token (issue 37, item 5).
    pub fn has_answer(&self) -> bool {
        self.content_chars > 0 || self.tool_chars > 0
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
        if c.tool_chars > 0 {
            text.extend_from_slice(b",\"tool_chars\":");
            text.extend_from_slice(int.format(c.tool_chars).as_bytes());
        }
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
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "tokens_held"
    )]
    pub logprobs: Option<Vec<TokenLogprob>>,
    /// The serve's memory (and the device's) read when the reply ended (issue 34); absent
    /// where nothing was read (an attached serve, a hand-made run, an older archive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::archive::record::footprint::MemoryReading>,
    /// The reply made after `--idle-probe`'s wait with the serve idle: judged by the idle
    /// line alone (and content), never by rate, first-token, drift or memory. Absent, false,
    /// in every other reply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle_probe: bool,
    /// A reply of `--depths` (issue 35): its depth, its fact, whether it probed the context's
    /// limit. Judged by the context lines alone (and never by rate, first-token, drift, memory
    /// or content). Absent in every other reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<crate::archive::record::context::DepthSlot>,
    /// `usage.prompt_tokens`, when the serve reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_prompt_tokens: Option<u64>,
    /// The tool calls the reply streamed, gathered from their fragments (issue 36); absent
    /// when it made none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::archive::record::tool_call::ToolCallRecord>,
    /// The place (from 0) in run.json's prompts of the prompt this reply answered, for a
    /// prompt with tools or a response format (issue 36): the tools line holds the reply to
    /// what that prompt asked. Absent for every other reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_prompt: Option<usize>,
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
    pub token: TokenText,
    /// Its logprob, nats.
    pub logprob: f64,
    /// The top alternatives, at most [`MAX_TOP_LOGPROBS`].
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exactly_held"
    )]
    pub top: Vec<TopLogprob>,
}

/// A token's alternatives read from an archive, held in exactly the room they take: read one
/// by one into a `Vec`, it grows by doubling, so ten alternatives took the room of sixteen and
/// shrinking left the rest as holes (a judge holds millions of them, issue 52). They are read
/// into this thread's scratch list and copied out once.
fn exactly_held<'de, D>(d: D) -> Result<Vec<TopLogprob>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Exactly;
    impl<'de> serde::de::Visitor<'de> for Exactly {
        type Value = Vec<TopLogprob>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of alternatives")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            thread_local! {
                static SCRATCH: std::cell::RefCell<Vec<TopLogprob>> =
                    const { std::cell::RefCell::new(Vec::new()) };
            }
            SCRATCH.with(|scratch| {
                // An alternative holds no list, so nothing read here comes back to the scratch.
                let mut scratch = scratch.borrow_mut();
                scratch.clear();
                while let Some(a) = seq.next_element::<TopLogprob>()? {
                    scratch.push(a);
                }
                Ok(scratch.to_vec())
            })
        }
    }
    d.deserialize_seq(Exactly)
}

/// A reply's token records, in the room they take (a reply's tokens are read as its
/// alternatives are, [`exactly_held`]; the room a `Vec` grew by is given back). An archive's
/// line of the shape the gate writes is read by hand instead ([`super::logprob_read`]).
fn tokens_held<'de, D>(d: D) -> Result<Option<Vec<TokenLogprob>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let mut tokens = Option::<Vec<TokenLogprob>>::deserialize(d)?;
    if let Some(t) = tokens.as_mut() {
        t.shrink_to_fit();
    }
    Ok(tokens)
}

/// One alternative at a token's position. Packed, 12 bytes, not 16: a judge against a
/// reference holds two archives' alternatives, ten a token at K=10 (issue 52's 2,000 replies
/// of 200 tokens: 38 MB less; docs/performance.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[repr(C, packed(4))]
pub struct TopLogprob {
    /// Its text, cut to [`LOGPROB_TOKEN_BYTES`].
    pub token: TokenText,
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

    /// Whether the reply is set apart from the judged single-stream replies: a warm-up, the
    /// idle probe, a reply at depth (`--depths`). Each is judged by its own line, never by
    /// rate, first-token, drift, memory, output or the baseline's and reference's lines.
    pub fn set_apart(&self) -> bool {
        self.warmup || self.idle_probe || self.depth.is_some()
    }

    /// Keep in memory only what judging reads of this reply's text ([`JUDGED_TEXT`]).
    pub fn keep_judged_text(&mut self) {
        self.cut_text(JUDGED_TEXT);
    }

    /// Whether judging reads this reply at all: a single-stream reply that did not fail, warm-ups
    /// left out.
    fn judged(&self) -> bool {
        self.error.is_none() && self.burst.is_none() && !self.set_apart()
    }

    /// Keep in memory only what judging reads of this reply, made after `earlier`: its text
    /// ([`Self::keep_judged_text`]), and its logprobs only where the reference line reads
    /// them, the first judged reply to each prompt's. A reply's logprobs can be a few kB a
    /// token; a long run's would hold the gate's memory for nothing. The archive keeps them all.
    pub fn keep_judged(&mut self, earlier: &[ReplyRecord]) {
        let first = !earlier
            .iter()
            .any(|r| r.judged() && r.prompt == self.prompt);
        self.keep_judged_where(first);
    }

    /// [`Self::keep_judged`] for a reader of a whole archive, in order: `judged_prompts` holds
    /// the prompts of the judged replies before this one, and takes this one's. The same rule
    /// without a pass over every earlier reply for each (2,000 replies were two million
    /// comparisons of their prompts).
    pub fn keep_judged_after(&mut self, judged_prompts: &mut HashSet<String>) {
        let first = !judged_prompts.contains(self.prompt.as_str());
        if first && self.judged() {
            judged_prompts.insert(self.prompt.clone());
        }
        self.keep_judged_where(first);
    }

    /// What [`Self::keep_judged`] keeps, `first` where no judged reply before it had its prompt.
    fn keep_judged_where(&mut self, first: bool) {
        self.keep_judged_text();
        if self.logprobs.is_some() && !(first && self.judged()) {
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
            memory: None,
            idle_probe: false,
            depth: None,
            usage_prompt_tokens: None,
            tool_calls: Vec::new(),
            tools_prompt: None,
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
    /// The first content token (content or a tool call's fragment, not reasoning) minus
    /// sent, in ms: TTFO, aiperf's "time to first output token". `None` for a reply with no
    /// content token, and in archives from before it was measured (judging measures again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_content_token_ms: Option<f64>,
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
        let mut warm = scored(1, "p");
        warm.warmup = true;
        let mut failed = scored(2, "p");
        failed.error = Some("cut".into());
        let mut burst = scored(6, "r");
        burst.burst = Some(BurstSlot {
            round: 1,
            stream: 1,
        });
        let replies = [
            warm,
            failed,
            scored(3, "p"),
            scored(4, "p"),
            scored(5, "q"),
            burst,
            scored(7, "r"),
            scored(8, "q"),
        ];
        // Live, each reply against the ones before it; read back, against the prompts seen.
        let mut kept: Vec<ReplyRecord> = Vec::new();
        let mut judged_prompts = HashSet::new();
        for r in &replies {
            let mut live = r.clone();
            live.keep_judged(&kept);
            let mut read = r.clone();
            read.keep_judged_after(&mut judged_prompts);
            assert_eq!(live, read, "reply {}", r.index);
            kept.push(live);
        }
        let with: Vec<usize> = kept
            .iter()
            .filter(|r| r.logprobs.is_some())
            .map(|r| r.index)
            .collect();
        // The warm-up, the failed reply and the burst are never read; replies 4 and 8 repeat
        // 3's and 5's prompts; 7 is the first judged reply to the burst's.
        assert_eq!(with, vec![3, 5, 7]);
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
                (any::<u64>(), any::<u32>(), any::<u32>(), arb_tokens(), prop_oneof![Just(0u32), any::<u32>()]).prop_map(
                    |(at_ns, content_chars, reasoning_chars, tokens, tool_chars)| ChunkArrival {
                        at_ns,
                        content_chars,
                        reasoning_chars,
                        tokens,
                        tool_chars,
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
                prop_assert_eq!((b.at_ns, b.content_chars, b.reasoning_chars, b.tool_chars), (c.at_ns, c.content_chars, c.reasoning_chars, c.tool_chars));
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
                tool_chars: 0,
            },
            ChunkArrival {
                at_ns: 9,
                content_chars: 0,
                reasoning_chars: 2,
                tokens: 0.5,
                tool_chars: 0,
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
