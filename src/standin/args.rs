//! The stand-in's script: its command line, as clap reads it.

use std::path::PathBuf;

use clap::Args;

use super::mix::splitmix64;
use super::tools::ToolArgs;
use super::words::Degenerate;

/// The stand-in's script.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct StandInArgs {
    /// Port to listen on, on 127.0.0.1 (0: any free port, printed at start).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Milliseconds from receiving a request to sending its first token.
    #[arg(long, default_value_t = 50, value_name = "MS", value_parser = crate::args::run::parse_whole_millis)]
    pub ttft_ms: u64,
    /// Milliseconds between chunks, cycled (e.g. 40,10).
    #[arg(
        long,
        default_value = "10",
        value_delimiter = ',',
        value_name = "MS,...",
        value_parser = crate::args::run::parse_millis
    )]
    pub gaps_ms: Vec<f64>,
    /// Lengthen the gaps of later requests, step by step, as a throttling serve slows: the
    /// K-th chat completion request's gaps are (1 + SHARE (K - 1) / (N - 1)) times --gaps-ms
    /// up to the N-th (--slow-over), and (1 + SHARE) times from then on. 0.25 makes the
    /// decode rate fall by 20% (1 / 1.25) over N replies.
    #[arg(
        long,
        value_name = "SHARE",
        requires = "slow_over",
        allow_negative_numbers = true,
        help_heading = "Pacing"
    )]
    pub slow_by: Option<f64>,
    /// The request by which --slow-by's lengthening is complete (2 or more).
    #[arg(long, value_name = "N", requires = "slow_by", help_heading = "Pacing")]
    pub slow_over: Option<u64>,
    /// Scale each request's gaps by a factor drawn uniformly from 1 - SHARE to 1 + SHARE, from
    /// --jitter-seed and the request's number: the same run of factors for the same seed, whatever
    /// the requests' timing.
    #[arg(
        long,
        value_name = "SHARE",
        allow_negative_numbers = true,
        help_heading = "Pacing"
    )]
    pub jitter: Option<f64>,
    /// The seed of --jitter's factors and of --change-word's draws (each a stream of its own).
    /// Named apart from `run --seed`, the requests' seed; `--seed` is still read here.
    #[arg(
        long = "jitter-seed",
        alias = "seed",
        default_value_t = 0,
        value_name = "N",
        help_heading = "Pacing"
    )]
    pub seed: u64,
    /// Tokens a reply has (capped by the request's max_tokens): the answer's words, then filler
    /// words, common nouns drawn from the answer's text and their position (the same for the
    /// same answer, none twice in a row, no stretch repeated). Past the request's max_tokens,
    /// every reply is cut there (finish_reason "length"): a serve that never stops.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub tokens: usize,
    /// Tokens a chunk carries.
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub chunk_tokens: u32,
    /// The first R tokens go on `delta.reasoning_content`, as a reasoning model sends them.
    #[arg(long, default_value_t = 0, value_name = "R")]
    pub reasoning_tokens: usize,
    /// Send an immediate first chunk with the role and empty content, as some servers do.
    #[arg(long)]
    pub role_chunk: bool,
    /// Send a final usage chunk when the request asks for it [default: sent; --no-usage never]
    #[arg(long, overrides_with = "no_usage")]
    pub usage: bool,
    /// Never send a usage chunk.
    #[arg(long, overrides_with = "usage")]
    pub no_usage: bool,
    /// Every chunk's content is empty.
    #[arg(long)]
    pub empty: bool,
    /// Drop the connection after N tokens.
    #[arg(long, value_name = "N")]
    pub die_after: Option<usize>,
    /// Answer completions with this HTTP status and a JSON error body.
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(100..=599))]
    pub http_status: Option<u16>,
    /// Send a line that is not SSE after N tokens.
    #[arg(long, value_name = "N")]
    pub garbage_after: Option<usize>,
    /// Send a `data:` event that is not JSON after N tokens.
    #[arg(long, value_name = "N")]
    pub bad_json_after: Option<usize>,
    /// Burn this much CPU before each chunk, as a serve's host work per token does.
    #[arg(long, default_value_t = 0, value_name = "MS", value_parser = crate::args::run::parse_whole_millis)]
    pub work_ms: u64,
    /// Exit (status 3) after N tokens: a serve that dies mid-stream.
    #[arg(long, value_name = "N")]
    pub crash_after: Option<usize>,
    /// End the process once the Nth reply's stream has ended whole (counted over all requests),
    /// as `--end-by` says: a serve that crashes, or exits, right after its last reply.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub end_after_replies: Option<u64>,
    /// How `--end-after-replies` ends the process: `segv` (dies of SIGSEGV) or `exit` (exits 0).
    #[arg(long, value_enum, default_value_t = EndBy::Segv, requires = "end_after_replies")]
    pub end_by: EndBy,
    /// Ignore SIGTERM (a serve that has to be killed).
    #[arg(long)]
    pub ignore_term: bool,
    /// Wait this long before listening.
    #[arg(long, default_value_t = 0, value_name = "MS", value_parser = crate::args::run::parse_whole_millis)]
    pub startup_ms: u64,
    /// Listen, but answer GET /health with 503 forever.
    #[arg(long)]
    pub never_ready: bool,
    /// Append a JSONL trace: each request's arrival and each event's send time.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// A line printed to the log at start, naming the route (for --fast-route/--slow-route).
    #[arg(
        long,
        default_value = "route: stand-in (scripted)",
        value_name = "TEXT"
    )]
    pub route_line: String,
    /// Serve one chat completion at a time, as a serve without batching does (llama-server
    /// with one slot): a request that arrives while another reply is under way waits until
    /// that reply's body has ended or its connection has gone, and its --ttft-ms (and the
    /// --busy-counter's time) count from when it starts. /health and /v1/models never wait.
    #[arg(long)]
    pub serial: bool,
    /// Answer GET /metrics as llama-server with --metrics does (Prometheus text): the tokens
    /// streamed (`llamacpp:tokens_predicted_total`), the replies under way
    /// (`llamacpp:requests_processing`) and those waiting for the --serial slot
    /// (`llamacpp:requests_deferred`). Without it /metrics is 404.
    #[arg(long, help_heading = "Metrics")]
    pub metrics: bool,
    /// Fault: the tokens counter counts N more for each chat request, as a serve whose metrics
    /// lie.
    #[arg(long, value_name = "N", requires = "metrics", help_heading = "Metrics")]
    pub metrics_extra_tokens: Option<u64>,
    /// Fault: GET /metrics answers 200 with an HTML page, not Prometheus text.
    #[arg(long, requires = "metrics", help_heading = "Metrics")]
    pub metrics_garbage: bool,
    /// The reply's first words, instead of the right answer to a built-in prompt. The filler
    /// after them follows from them, so every prompt gets the same reply: one answer to
    /// different questions.
    #[arg(long, value_name = "TEXT")]
    pub answer: Option<String>,
    /// Fault: after N tokens, an `event: error` frame whose data is --error-data, then
    /// [DONE].
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub error_event_after: Option<usize>,
    /// Fault: after N tokens, a data chunk that is --error-data, then [DONE].
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub error_chunk_after: Option<usize>,
    /// The error that --error-event-after and --error-chunk-after send.
    #[arg(
        long,
        default_value = r#"{"error":{"message":"CUDA out of memory","code":500}}"#,
        value_name = "DATA",
        help_heading = "Faults in the stream"
    )]
    pub error_data: String,
    /// Fault: the final chunk's finish_reason is TEXT (e.g. "error"), not "stop" or "length".
    #[arg(long, value_name = "TEXT", help_heading = "Faults in the stream")]
    pub finish_reason: Option<String>,
    /// Fault: the usage chunk claims N completion tokens, whatever was sent.
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub usage_claims: Option<u64>,
    /// Fault: the answer's body is written one byte at a time, MS apart.
    #[arg(long, value_name = "MS", value_parser = crate::args::run::parse_whole_millis, help_heading = "Faults in the stream")]
    pub trickle_ms: Option<u64>,
    /// Fault: make the answer at its pace (first token and gaps as scripted), but hold every
    /// event back and send them all at the end, as a serve (or a proxy) that does not flush.
    #[arg(long, help_heading = "Faults in the stream")]
    pub held_back: bool,
    /// Fault: tokens without end (--gaps-ms apart), ignoring max_tokens; no finish, no [DONE].
    #[arg(long, help_heading = "Faults in the stream")]
    pub endless: bool,
    /// Fault: after [DONE], keep the connection open, silent or sending comments (--gaps-ms
    /// apart).
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        help_heading = "Faults in the stream"
    )]
    pub after_done: Option<AfterDone>,
    /// Fault: no [DONE] after the finish and usage chunks (with --after-done, the connection
    /// then stays open).
    #[arg(long, help_heading = "Faults in the stream")]
    pub no_done: bool,
    /// Fault: with --http-status, an error body without end.
    #[arg(long, requires = "http_status", help_heading = "Faults in the stream")]
    pub endless_body: bool,
    /// Fault: after N tokens, a `data:` line that never ends.
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub endless_line_after: Option<usize>,
    /// The first token's chunk carries BYTES more content (the filler's words on past the
    /// reply's own): one huge chunk.
    #[arg(long, value_name = "BYTES", help_heading = "Faults in the stream")]
    pub big_chunk: Option<usize>,
    /// How many chunks, from the first, --big-chunk makes huge.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        requires = "big_chunk",
        help_heading = "Faults in the stream"
    )]
    pub big_chunks: usize,
    /// Fault: a second choice, index 1, streamed beside the reply's choice 0, as a serve that
    /// sends choices the gate did not ask for (it asks for one, n=1): TEXT's words, then its
    /// filler, as many tokens and chunks as choice 0's answer, and a finish of its own.
    /// With --answer, choice 0 can say a wrong answer while choice 1 says the right one.
    #[arg(long, value_name = "TEXT", help_heading = "Faults in the stream")]
    pub other_choice: Option<String>,
    /// Where --other-choice's choice goes: in chunks of its own, each after choice 0's
    /// (`own-chunk`, as a serve streaming n choices sends them), or in choice 0's chunks,
    /// before it (`before`) or after it (`after`).
    #[arg(
        long,
        value_enum,
        default_value_t = OtherChoiceIn::OwnChunk,
        value_name = "WHERE",
        requires = "other_choice",
        help_heading = "Faults in the stream"
    )]
    pub other_choice_in: OtherChoiceIn,
    /// Fault: a streaming request is answered with one JSON completion, as a server that does
    /// not stream would.
    #[arg(long, help_heading = "Faults in the stream")]
    pub not_sse: bool,
    /// Fault: after N tokens, a chunk that is JSON of the wrong shape.
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub wrong_shape_after: Option<usize>,
    /// Fault: these bytes, as given, are written into the stream after --inject-after N tokens
    /// (a frame of a test's own making).
    #[arg(
        long,
        value_name = "BYTES",
        requires = "inject_after",
        help_heading = "Faults in the stream"
    )]
    pub inject: Option<String>,
    /// When --inject's bytes are written: after N tokens.
    #[arg(
        long,
        value_name = "N",
        requires = "inject",
        help_heading = "Faults in the stream"
    )]
    pub inject_after: Option<usize>,
    /// Fault: each chat completion request, with probability SHARE (0 to 1), gets a reply with
    /// one word of its answer (`content`, never the reasoning; the --answer or built-in answer's
    /// words, then the filler) changed, at a place drawn uniformly over those words: its
    /// letters and digits reversed in place ("Paris." becomes "siraP."); when that is the same
    /// word (one letter, a palindrome), each ASCII letter and digit moved on by one ("a" becomes
    /// "b", "z" "a", "9" "0"); with nothing to move ("+", "é"), the word twice ("++").
    /// Whitespace is kept, so the reply differs by that word alone. Both draws come from --jitter-seed
    /// and the request's number, on a stream of their own (not --jitter's): the same requests
    /// are changed for the same seed, whatever their timing. A nondeterministic serve.
    #[arg(
        long,
        value_name = "SHARE",
        allow_negative_numbers = true,
        help_heading = "Faults in the stream"
    )]
    pub change_word: Option<f64>,
    /// Fault: never send logprobs, whatever the request asks (a serve that ignores
    /// `"logprobs": true`). Without it, a request with `"logprobs": true, "top_logprobs": K`
    /// gets, for each answer token, its logprob and K scripted alternatives with lower ones.
    #[arg(long, help_heading = "Faults in the stream")]
    pub no_logprobs: bool,
    /// Fault: at answer token POS (from 0) send the runner-up instead of the usual token (the
    /// usual one's letters reversed, as --change-word changes a word), its logprobs saying the
    /// usual token was --flip-margin nats more likely: a build whose numerics took a token
    /// the reference ranked lower. A small margin is a near-tie, a large one a hard flip.
    /// Give it again for more positions.
    #[arg(long, value_name = "POS", help_heading = "Faults in the stream")]
    pub logprob_flip: Vec<usize>,
    /// Fault: a final assistant message in the request is not continued: the answer begins
    /// anew, as a serve that cannot continue one answers (llama-server with
    /// --no-prefill-assistant). Without it, a final assistant message that is the start of
    /// the stand-in's usual answer, token for token, is continued from there.
    #[arg(long, help_heading = "Faults in the stream")]
    pub no_continue: bool,
    /// A continued assistant message is sent back before the continuation, in the first
    /// chunk's text (its logprobs are the new tokens' alone), as llama-server sends it.
    #[arg(long)]
    pub echo_prefix: bool,
    /// Nats between the usual token and the runner-up (the token --logprob-flip sends), at
    /// every position: give a reference stand-in the same margin as its flipped candidate, and
    /// the reference ranks the flipped token that much lower there too.
    #[arg(
        long,
        value_name = "NATS",
        default_value_t = DEFAULT_FLIP_MARGIN,
        allow_negative_numbers = true,
        help_heading = "Faults in the stream"
    )]
    pub flip_margin: f64,
    /// Fault: a reply that starts while another chat completion reply is under way has the
    /// last word of its answer changed as --change-word changes a word; a reply made alone is
    /// the clean one. A kernel that is not batch-invariant: the same prompt answers otherwise
    /// inside a batch than alone. With --serial, which serves one at a time, no reply starts
    /// beside another.
    #[arg(long, help_heading = "Faults in the stream")]
    pub batch_variant: bool,
    /// Fault: after the answer's own words, the reply's tokens are the first N filler words
    /// over and over, up to --tokens: a decoding loop of period N tokens. With --tokens past
    /// the request's max_tokens the reply is cut there (finish_reason "length"), as a loop's
    /// is; with --answer TEXT every prompt gets the same looping answer.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Faults in the stream"
    )]
    pub loop_period: Option<u64>,
    /// Fault: every word of the reply (the answer's and the filler's) is said N times back to
    /// back (2 to 20), in the same number of tokens (--tokens): a stutter, with fewer words.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(2..=20),
        help_heading = "Faults in the stream"
    )]
    pub stutter: Option<u64>,
    /// Fault: SHARE (0 to 1) of the filler's tokens (those after the answer's own words, which
    /// are kept), spread evenly, are not text: U+FFFD replacement characters and control
    /// characters in turn ("\u{fffd}\u{fffd}", "\u{1}\u{7}"), as from a serve that
    /// detokenizes garbage.
    #[arg(
        long,
        value_name = "SHARE",
        allow_negative_numbers = true,
        help_heading = "Faults in the stream"
    )]
    pub not_text: Option<f64>,
    /// The faults (every option above under this heading, those in tool calls and JSON, and
    /// --empty, --die-after, --http-status, --garbage-after, --bad-json-after, --crash-after) apply to the K-th chat
    /// completion request alone, counted from 1 in arrival order across connections; every
    /// other request gets the clean scripted reply. One bad reply among good ones, as a
    /// concurrent burst may meet it.
    #[arg(long, value_name = "K", help_heading = "Faults in the stream")]
    pub fault_request: Option<u64>,
    /// Map FILE read-only (whole, MAP_PRIVATE) at start and keep it mapped, so /proc/PID/maps
    /// lists it, as a serve's mapped model or device library is listed. Give it again for more
    /// files. An empty file cannot be mapped and is refused.
    #[arg(long, value_name = "FILE", help_heading = "Route evidence")]
    pub map_file: Vec<PathBuf>,
    /// Map FILE executable (PROT_READ | PROT_EXEC, whole, MAP_PRIVATE) at start and keep it
    /// mapped, as the loader maps a library's code: /proc/PID/maps lists it `r-xp`. Give it
    /// again for more files. The file must be on a filesystem not mounted noexec.
    #[arg(long, value_name = "FILE", help_heading = "Route evidence")]
    pub map_exec: Vec<PathBuf>,
    /// Open FILE read-only at start and keep it open, so a link in /proc/PID/fd names it, as a
    /// serve holds its device file (/dev/accel/accel0) during the replies. Give it again for
    /// more files.
    #[arg(long, value_name = "FILE", help_heading = "Route evidence")]
    pub hold_open: Vec<PathBuf>,
    /// For each token streamed, move every --hold-open file's position on by N bytes, so
    /// `pos:` in /proc/PID/fdinfo/FD is a kernel busy counter that grows while the stand-in
    /// streams (read with `--device-busy fdinfo:pos`).
    #[arg(long, value_name = "N", help_heading = "Route evidence")]
    pub held_pos_per_token: Option<u32>,
    /// Keep FILE holding the microseconds spent producing replies (from a request's arrival,
    /// or with --serial its start, to its last event, summed over requests) as a number and a
    /// newline, like intel_vpu's sysfs
    /// `npu_busy_time_us`; rewritten whole (a temporary file renamed over it) for each token.
    /// It counts on from the number FILE holds at start, else 0.
    #[arg(long, value_name = "FILE", help_heading = "Route evidence")]
    pub busy_counter: Option<PathBuf>,
    /// Run as a wrapper that starts this stand-in (without --wrap) as its child, forwards TERM,
    /// INT and HUP to it and exits as it did (128+N when killed by signal N). Only the child
    /// listens, maps and holds files, as llama-server under Lemonade or a binary under a Python
    /// launcher: the gate must walk the serve's whole process tree to find them.
    #[arg(long, help_heading = "Route evidence")]
    pub wrap: bool,
    /// How the stand-in's memory, start and first replies misbehave (issue 34).
    #[command(flatten)]
    pub footprint: FootprintArgs,
    /// The stand-in's context and prefill, and how it fails past them (issue 35).
    #[command(flatten)]
    pub context: ContextArgs,
    /// How its tool calls and JSON content break the rules (`tools.rs`).
    #[command(flatten)]
    pub tools: ToolArgs,
}

/// The most `--leak` and `--first-reply-alloc` take at once: a gate's leak line needs a few
/// MiB a reply, and a test must not take the box's memory by a slip of the unit.
pub(crate) const MOST_PER_REPLY: u64 = 1 << 30;

/// The stand-in's footprint, as a serve's that a gate samples: memory that grows reply by
/// reply (in the process and on its pretend device), a cache filled once, a cold first reply
/// and a slow reply after idle. `footprint.rs` does what these say.
#[derive(Debug, Clone, Default, PartialEq, Args)]
pub struct FootprintArgs {
    /// At the end of each reply (after its last event is sent, or its connection gone),
    /// allocate SIZE of anonymous memory, write to each of its pages (so RssAnon grows by
    /// SIZE) and keep it until exit: a serve that leaks. At most 1GiB a reply; leaking stops,
    /// said once on stderr, once 8GiB is held.
    #[arg(
        long,
        value_name = "SIZE",
        value_parser = parse_reply_size,
        allow_hyphen_values = true,
        help_heading = "Footprint"
    )]
    pub leak: Option<u64>,
    /// Only the first N replies (in the order they end) leak --leak's SIZE: an allocator that
    /// settles. Without it every reply leaks.
    #[arg(long, value_name = "N", help_heading = "Footprint")]
    pub leak_replies: Option<u64>,
    /// At the end of the first reply, allocate SIZE, write to each of its pages and keep it:
    /// a cache filled once, which is no leak. At most 1GiB.
    #[arg(
        long,
        value_name = "SIZE",
        value_parser = parse_reply_size,
        allow_hyphen_values = true,
        help_heading = "Footprint"
    )]
    pub first_reply_alloc: Option<u64>,
    /// Keep FILE holding the pretend device memory in use, in bytes, as a decimal number and a
    /// newline: --device-memory-base plus --device-leak for each reply ended so far. Written
    /// when the stand-in starts listening and after each reply, whole (FILE.tmp beside it,
    /// renamed over it), so a reader never sees half a number.
    #[arg(long, value_name = "FILE", help_heading = "Footprint")]
    pub device_memory_file: Option<PathBuf>,
    /// The device memory in use before any reply [default: 64MiB].
    #[arg(
        long,
        value_name = "SIZE",
        value_parser = parse_size,
        allow_hyphen_values = true,
        help_heading = "Footprint"
    )]
    pub device_memory_base: Option<u64>,
    /// The device memory each reply adds for good [default: 0B].
    #[arg(
        long,
        value_name = "SIZE",
        value_parser = parse_size,
        allow_hyphen_values = true,
        help_heading = "Footprint"
    )]
    pub device_leak: Option<u64>,
    /// The first reply's first token comes MS later than --ttft-ms says, as a serve's first
    /// reply waits for its kernels to compile and its caches to warm; later replies do not.
    #[arg(long, default_value_t = 0, value_name = "MS", value_parser = crate::args::run::parse_whole_millis, help_heading = "Footprint")]
    pub cold_first_token_ms: u64,
    /// A request that arrives when none has been in flight for MS (since the end of the last
    /// reply; the first reply is never after idle) gets its first token --idle-first-token-ms
    /// later, as from a serve whose device powered down while idle.
    #[arg(long, value_name = "MS", value_parser = crate::args::run::parse_whole_millis, help_heading = "Footprint")]
    pub idle_after_ms: Option<u64>,
    /// How much later than --ttft-ms the first token of a reply after idle (--idle-after-ms)
    /// comes.
    #[arg(long, value_name = "MS", value_parser = crate::args::run::parse_whole_millis, help_heading = "Footprint")]
    pub idle_first_token_ms: Option<u64>,
}

/// The most --prefill-us takes: a second a word already makes a 2,000-word prompt wait over
/// half an hour, and a slip of the unit must not hang a test for days.
pub(crate) const MOST_PREFILL_US: u64 = 1_000_000;

/// The most --prompt-tokens-times takes: a count a thousand times the truth is already no
/// count at all, and the product must stay a number.
const MOST_TIMES: f64 = 1000.0;

/// The stand-in's context, as a serve's (llama-server's `--ctx-size`): prompts past it are
/// refused, or met by the faults of a serve that does not refuse them, and every prompt takes
/// its prefill time. The stand-in counts a token a word of the prompt (the user messages'
/// words, summed). `context.rs` does what these say.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct ContextArgs {
    /// The context, in tokens (a word of the prompt each): GET /props says it as
    /// llama-server does, and a chat request whose prompt has more words is refused as
    /// llama-server refuses it (400, `exceed_context_size_error`) before any streaming
    /// [default: none, every prompt fits and /props is 404]
    #[arg(long = "context", value_name = "N", value_parser = parse_context, allow_hyphen_values = true, help_heading = "Context")]
    pub n_ctx: Option<u64>,
    /// Fault: a prompt past --context gets 200 and tokens of garbage ("!!!!") up to the
    /// request's max_tokens (else --tokens; at most 65536), finish_reason "length", as NPU
    /// kernels that break past ~2k tokens answer (openvino.genai#3255).
    #[arg(long, help_heading = "Context")]
    pub garble_past_context: bool,
    /// Fault: a prompt past --context gets 200 and the reply it would get if it fitted (a
    /// depth prompt's right code), as a serve that claims a context it does not have.
    #[arg(long, help_heading = "Context")]
    pub answer_past_context: bool,
    /// Fault: a prompt past --context is cut to its last N words and answered from them (a
    /// depth prompt whose fact was cut away, wrongly), its usage.prompt_tokens N: a serve that
    /// truncates its prompt.
    #[arg(long, help_heading = "Context")]
    pub truncate_past_context: bool,
    /// Fault: the stand-in exits (status 1) as soon as it reads a prompt past --context, as a
    /// serve that crashes on one.
    #[arg(long, help_heading = "Context")]
    pub crash_past_context: bool,
    /// Microseconds of prefill a prompt token (word), slept before a reply's first token on
    /// top of --ttft-ms (a cut prompt's kept words only), 0 to 1000000
    #[arg(long, default_value_t = 0, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=MOST_PREFILL_US), allow_hyphen_values = true, help_heading = "Context")]
    pub prefill_us: u64,
    /// The usage's prompt_tokens is the prompt's words times F, rounded: a fault, for F other
    /// than 1, of a serve whose tokenizer or template count is far from the truth; above 0, at
    /// most 1000
    #[arg(long, default_value_t = 1.0, value_name = "F", value_parser = parse_times, allow_hyphen_values = true, help_heading = "Context")]
    pub prompt_tokens_times: f64,
    /// Fault: a depth prompt's fact more than M words before the prompt's end is not found (a
    /// sliding window of M): the reply says, in good order, that there is no secret code
    /// [default: none, a fact at any depth is found]
    #[arg(
        long,
        value_name = "M",
        allow_hyphen_values = true,
        help_heading = "Context"
    )]
    pub forget_deeper_than: Option<u64>,
}

impl ContextArgs {
    /// Refuse a fault that would do nothing, or two at once, in one line.
    fn check(&self) -> anyhow::Result<()> {
        let past = [
            ("--garble-past-context", self.garble_past_context),
            ("--answer-past-context", self.answer_past_context),
            ("--truncate-past-context", self.truncate_past_context),
            ("--crash-past-context", self.crash_past_context),
        ];
        let given: Vec<&str> = past.iter().filter(|(_, on)| *on).map(|(f, _)| *f).collect();
        if let (Some(first), None) = (given.first(), self.n_ctx) {
            anyhow::bail!("{first} says what a prompt past --context gets: give --context N too");
        }
        if let [first, second, ..] = given[..] {
            anyhow::bail!(
                "{first} and {second} are two ways to meet a prompt past the context: give one"
            );
        }
        Ok(())
    }
}

/// --context's tokens: a whole number, 1 or more (no serve has a context of none).
fn parse_context(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} is not a context of 1 token or more")),
    }
}

/// --prompt-tokens-times's factor: a number above 0 and at most [`MOST_TIMES`].
fn parse_times(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f > 0.0 && f <= MOST_TIMES => Ok(f),
        _ => Err(format!(
            "{s:?} is not a factor above 0 and at most {MOST_TIMES} (0.3: a count under a third of the words)"
        )),
    }
}

/// The longest a footprint delay may be: a day, as for the gaps, so the instant it adds up to
/// stays one a clock can hold.
const MOST_DELAY_MS: u64 = 86_400_000;

impl FootprintArgs {
    /// Refuse a setting that would do nothing, in one line: a test that meant it would pass
    /// without it (clap's `requires` would say so in several lines).
    fn check(&self) -> anyhow::Result<()> {
        if self.leak_replies.is_some() && self.leak.is_none() {
            anyhow::bail!("--leak-replies N says which replies leak: give --leak SIZE too");
        }
        if self.device_memory_file.is_none()
            && (self.device_memory_base.is_some() || self.device_leak.is_some())
        {
            anyhow::bail!(
                "--device-memory-base and --device-leak are written to --device-memory-file: give it too"
            );
        }
        if self.idle_first_token_ms.is_some() != self.idle_after_ms.is_some() {
            anyhow::bail!(
                "--idle-after-ms and --idle-first-token-ms go together: when a reply is after idle, and how much later its first token comes"
            );
        }
        let delays = [
            ("--cold-first-token-ms", Some(self.cold_first_token_ms)),
            ("--idle-after-ms", self.idle_after_ms),
            ("--idle-first-token-ms", self.idle_first_token_ms),
        ];
        for (flag, ms) in delays {
            if ms.is_some_and(|ms| ms > MOST_DELAY_MS) {
                anyhow::bail!("{flag} is at most a day, {MOST_DELAY_MS} ms");
            }
        }
        Ok(())
    }
}

/// A size with its unit (`4MiB`), in whole bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    // Rounded down: half a byte cannot be allocated, and a size comes to whole bytes anyway.
    crate::archive::byte_size::parse_bytes(s).map(|b| b as u64)
}

/// A size allocated at a reply's end: with its unit, at most [`MOST_PER_REPLY`].
fn parse_reply_size(s: &str) -> Result<u64, String> {
    let bytes = parse_size(s)?;
    if bytes > MOST_PER_REPLY {
        return Err(format!("{s:?} is more than the 1GiB a reply may allocate"));
    }
    Ok(bytes)
}

/// The script `$from` taken apart whole and made again with each of `faults` at its default
/// (off, none, empty): a field named in neither list, or in both, does not compile.
macro_rules! sorted_fields {
    ($from:expr, kept: [$($k:ident),* $(,)?], faults: [$($f:ident),* $(,)?] $(,)?) => {{
        let StandInArgs { $($k,)* $($f: _,)* } = $from;
        StandInArgs { $($k,)* $($f: Default::default(),)* }
    }};
}

impl StandInArgs {
    /// Refuse a script that cannot run, before anything is opened or started.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        // A day at most: a larger gap would overflow the Duration it becomes (a panic, not a
        // scripted serve).
        if self
            .gaps_ms
            .iter()
            .any(|g| !g.is_finite() || *g < 0.0 || *g > 86_400_000.0)
        {
            anyhow::bail!("--gaps-ms takes numbers of ms, 0 to 86400000");
        }
        if self.gaps_ms.is_empty() {
            anyhow::bail!("--gaps-ms needs at least one number");
        }
        if let Some(x) = self.slow_by {
            if !x.is_finite() || !(0.0..=10.0).contains(&x) {
                anyhow::bail!(
                    "--slow-by is a share, 0 to 10 (0.25: gaps a quarter longer), got {x}"
                );
            }
        }
        if self.slow_over.is_some_and(|n| n < 2) {
            anyhow::bail!("--slow-over is the request by which the slowing is complete: 2 or more");
        }
        if let Some(x) = self.not_text {
            if !(0.0..=1.0).contains(&x) {
                anyhow::bail!(
                    "--not-text is a share of the filler's tokens, 0 to 1 (0.5: every other one), got {x}"
                );
            }
        }
        if let Some(x) = self.change_word {
            if !(0.0..=1.0).contains(&x) {
                anyhow::bail!(
                    "--change-word is a share of the requests, 0 to 1 (0.3: about three in ten), got {x}"
                );
            }
        }
        // Logprobs are at most 0, and the runner-up's must stay a number a serve could send.
        if !self.flip_margin.is_finite() || !(0.0..=50.0).contains(&self.flip_margin) {
            anyhow::bail!(
                "--flip-margin is in nats, 0 to 50 (0.05: a near-tie, 5: a hard flip), got {}",
                self.flip_margin
            );
        }
        if let Some(x) = self.jitter {
            if !x.is_finite() || !(0.0..1.0).contains(&x) {
                anyhow::bail!("--jitter is a share, 0 or more and below 1 (0.05: gaps 5% shorter or longer), got {x}");
            }
        }
        // Not clap's `requires`: its error takes several lines, and a bad value here gets one.
        if self.held_pos_per_token.is_some() && self.hold_open.is_empty() {
            anyhow::bail!("--held-pos-per-token moves the --hold-open files: give at least one --hold-open FILE");
        }
        if let Some(k) = self.fault_request {
            if k == 0 {
                anyhow::bail!(
                    "--fault-request counts chat completion requests from 1: give K of 1 or more"
                );
            }
            // Without a fault every reply would be clean, and a test meaning to put one bad
            // reply among good ones would pass without the bad one.
            if self.without_faults() == *self {
                anyhow::bail!(
                    "--fault-request K picks which request gets the faults: give a fault too"
                );
            }
        }
        self.footprint.check()?;
        self.context.check()
    }

    /// What the K-th chat completion request's (from 1) gaps are multiplied by: --slow-by's
    /// lengthening so far times its --jitter factor; 1 without either.
    pub fn gap_scale(&self, nth: u64) -> f64 {
        let slow = match (self.slow_by, self.slow_over) {
            (Some(share), Some(over)) if over >= 2 => {
                let done = (nth.saturating_sub(1) as f64 / (over - 1) as f64).min(1.0);
                1.0 + share * done
            }
            _ => 1.0,
        };
        let jitter = self.jitter.map_or(1.0, |share| {
            let unit = (splitmix64(self.seed ^ splitmix64(nth)) >> 11) as f64 / (1u64 << 53) as f64;
            1.0 + share * (2.0 * unit - 1.0)
        });
        slow * jitter
    }

    /// This script with every fault taken out: the clean reply that `--fault-request` gives
    /// the requests it does not pick. What shapes a clean reply (its timing, tokens, reasoning,
    /// role chunk, usage, `--answer`) is kept, and so are a fault's own settings
    /// (`--error-data`, `--big-chunks`), which do nothing without it; so are the faults of the
    /// process rather than of a reply (`--never-ready`, `--ignore-term`, `--startup-ms`, the
    /// footprint's), and the context's: how a serve meets a long prompt is the serve's, not one
    /// bad reply's among good ones. Taken apart whole, so a field added to the script does not
    /// compile until it is sorted here: a fault, cleared, or not, kept.
    pub fn without_faults(&self) -> StandInArgs {
        // Every field is named once, kept or a fault; each fault is cleared to its default
        // (off, none, empty), which is the clean reply's.
        sorted_fields!(self.clone(),
            kept: [
                port, ttft_ms, gaps_ms, slow_by, slow_over, jitter, seed, tokens, chunk_tokens,
                reasoning_tokens, role_chunk, usage, no_usage, work_ms, end_after_replies, end_by,
                ignore_term, startup_ms, never_ready, trace, route_line, serial, metrics,
                metrics_extra_tokens, metrics_garbage, answer, error_data, big_chunks,
                other_choice_in, echo_prefix, flip_margin, fault_request, map_file, map_exec,
                hold_open, held_pos_per_token, busy_counter, wrap, footprint, context,
            ],
            faults: [
                empty, die_after, http_status, garbage_after, bad_json_after, crash_after,
                error_event_after, error_chunk_after, finish_reason, usage_claims, trickle_ms,
                held_back, endless, after_done, no_done, endless_body, endless_line_after,
                big_chunk, other_choice, not_sse, wrong_shape_after, inject, inject_after,
                change_word, no_logprobs, logprob_flip, no_continue, batch_variant, loop_period,
                stutter, not_text, tools,
            ],
        )
    }
}

/// The stand-in's margin between the usual token and the runner-up, nats, without
/// --flip-margin: over the 0.5 a reference's tie margin defaults to, so a flip of it is hard.
pub const DEFAULT_FLIP_MARGIN: f64 = 2.5;

/// Mixed into --jitter-seed for --change-word's draws, so they are a stream of their own: with the
/// same seed, which requests --jitter slows and which --change-word changes are unrelated.
const CHANGE_WORD_STREAM: u64 = 0x6368_616e_6765_2d77; // "change-w"

impl StandInArgs {
    /// How this script makes its replies' words degenerate.
    pub(crate) fn degenerate(&self) -> Degenerate {
        Degenerate {
            loop_period: self.loop_period.map(|n| n as usize),
            stutter: self.stutter.map(|n| n as usize),
            not_text: self.not_text,
        }
    }

    /// Which of its `answer_words` answer words (from 0) the K-th chat completion request's
    /// (from 1) reply changes under --change-word; none when the draw spares it, without
    /// --change-word, or with no answer words to change. Pure of the seed and K: the same
    /// requests are changed whatever their timing.
    pub(crate) fn changed_word(&self, nth: u64, answer_words: usize) -> Option<usize> {
        let share = self.change_word?;
        if answer_words == 0 {
            return None;
        }
        let base = splitmix64(splitmix64(self.seed ^ CHANGE_WORD_STREAM) ^ splitmix64(nth));
        let unit = (base >> 11) as f64 / (1u64 << 53) as f64;
        if unit >= share {
            return None;
        }
        // The second draw, from the first: multiply-shift (Lemire 2019, "Fast random integer
        // generation in an interval") maps it onto the words, as good as uniform for so few.
        let place = splitmix64(base);
        Some(((place as u128 * answer_words as u128) >> 64) as usize)
    }
}

/// How `--end-after-replies` ends the stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EndBy {
    /// Die of SIGSEGV, as a serve that crashes does.
    Segv,
    /// Exit with status 0, as a serve that quits by itself does.
    Exit,
}

/// Where `--other-choice`'s choice goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OtherChoiceIn {
    /// In chunks of its own, each right after choice 0's.
    OwnChunk,
    /// In choice 0's chunks, before it: `[index 1, index 0]`.
    Before,
    /// In choice 0's chunks, after it: `[index 0, index 1]`.
    After,
}

/// What the stand-in does after [DONE], or where it would have sent it (`--after-done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AfterDone {
    /// Keep the connection open and send nothing more.
    Silent,
    /// Keep the connection open and send SSE comments without end.
    Comments,
}

#[cfg(test)]
/// The script these arguments give, as `stand-in` would parse them.
pub(crate) fn parse(extra: &[&str]) -> StandInArgs {
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: StandInArgs,
    }
    T::parse_from(std::iter::once("t").chain(extra.iter().copied())).a
}

#[cfg(test)]
mod tests {
    use super::parse as args;
    use super::StandInArgs;

    /// Every fault, as given on the command line. The heading's options that are not faults
    /// themselves are in `NOT_FAULTS`.
    const FAULTS: &[(&str, &[&str])] = &[
        ("empty", &["--empty"]),
        ("die_after", &["--die-after", "2"]),
        ("http_status", &["--http-status", "500"]),
        ("garbage_after", &["--garbage-after", "2"]),
        ("bad_json_after", &["--bad-json-after", "2"]),
        ("crash_after", &["--crash-after", "2"]),
        ("error_event_after", &["--error-event-after", "2"]),
        ("error_chunk_after", &["--error-chunk-after", "2"]),
        ("finish_reason", &["--finish-reason", "error"]),
        ("usage_claims", &["--usage-claims", "9"]),
        ("trickle_ms", &["--trickle-ms", "1"]),
        ("held_back", &["--held-back"]),
        ("endless", &["--endless"]),
        ("after_done", &["--after-done", "silent"]),
        ("no_done", &["--no-done"]),
        ("endless_body", &["--endless-body"]),
        ("endless_line_after", &["--endless-line-after", "2"]),
        ("big_chunk", &["--big-chunk", "100"]),
        ("other_choice", &["--other-choice", "Paris."]),
        ("not_sse", &["--not-sse"]),
        ("wrong_shape_after", &["--wrong-shape-after", "2"]),
        ("inject", &["--inject", "data: x\n\n"]),
        ("inject_after", &["--inject-after", "2"]),
        ("change_word", &["--change-word", "0.5"]),
        ("no_logprobs", &["--no-logprobs"]),
        ("logprob_flip", &["--logprob-flip", "2"]),
        ("no_continue", &["--no-continue"]),
        ("batch_variant", &["--batch-variant"]),
        ("loop_period", &["--loop-period", "3"]),
        ("stutter", &["--stutter", "4"]),
        ("not_text", &["--not-text", "0.5"]),
    ];

    /// Under the faults' heading, but settings of a fault or of which request gets them.
    const NOT_FAULTS: &[&str] = &[
        "error_data",
        "big_chunks",
        "other_choice_in",
        "fault_request",
        "flip_margin",
    ];

    /// What shapes a clean reply, and a fault's own setting: all kept by `without_faults`.
    const CLEAN: &[&str] = &[
        "--tokens",
        "5",
        "--ttft-ms",
        "7",
        "--gaps-ms",
        "3,4",
        "--chunk-tokens",
        "2",
        "--reasoning-tokens",
        "1",
        "--role-chunk",
        "--no-usage",
        "--answer",
        "London",
        "--error-data",
        "{}",
        "--never-ready",
        "--serial",
        "--slow-by",
        "0.25",
        "--slow-over",
        "30",
        "--jitter",
        "0.05",
        "--seed",
        "7",
        "--flip-margin",
        "0.2",
        "--fault-request",
        "2",
    ];

    #[test]
    fn slowing_lengthens_the_gaps_request_by_request_then_holds() {
        let a = args(&["--slow-by", "0.25", "--slow-over", "5"]);
        let scales: Vec<f64> = (1..=7).map(|k| a.gap_scale(k)).collect();
        let want = [1.0, 1.0625, 1.125, 1.1875, 1.25, 1.25, 1.25];
        for (got, want) in scales.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{scales:?}");
        }
        assert_eq!(args(&[]).gap_scale(9), 1.0, "no pacing, no change");
    }

    #[test]
    fn jitter_is_seeded_bounded_and_not_constant() {
        let a = args(&["--jitter", "0.1", "--jitter-seed", "3"]);
        let f: Vec<f64> = (1..=200).map(|k| a.gap_scale(k)).collect();
        assert!(f.iter().all(|x| (0.9..=1.1).contains(x)), "{f:?}");
        let mean = f.iter().sum::<f64>() / f.len() as f64;
        assert!((mean - 1.0).abs() < 0.02, "centred on 1: {mean}");
        assert!(f.iter().any(|x| *x < 0.95) && f.iter().any(|x| *x > 1.05));
        assert_eq!(f, (1..=200).map(|k| a.gap_scale(k)).collect::<Vec<_>>());
        // --seed, the old spelling, is still read.
        let other = args(&["--jitter", "0.1", "--seed", "4"]);
        assert_ne!(
            a.gap_scale(1),
            other.gap_scale(1),
            "another seed, other factors"
        );
    }

    #[test]
    fn pacing_out_of_range_is_refused() {
        for bad in [
            &["--slow-by", "-0.1", "--slow-over", "5"][..],
            &["--slow-by", "11", "--slow-over", "5"],
            &["--slow-by", "0.2", "--slow-over", "1"],
            &["--jitter", "1"],
            &["--jitter", "NaN"],
        ] {
            assert!(args(bad).check().is_err(), "{bad:?}");
        }
        assert!(
            args(&["--slow-by", "0.2", "--slow-over", "2", "--jitter", "0.5"])
                .check()
                .is_ok()
        );
    }

    #[test]
    fn a_change_word_share_outside_0_to_1_is_refused_in_one_line() {
        for bad in ["NaN", "-0.1", "1.5", "inf"] {
            let e = args(&["--change-word", bad])
                .check()
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--change-word is a share"), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
        for good in ["0", "0.3", "1"] {
            assert!(args(&["--change-word", good]).check().is_ok(), "{good}");
        }
    }

    #[test]
    fn degenerate_answers_are_read_and_bounded() {
        for bad in ["NaN", "-0.1", "1.5", "inf"] {
            let e = args(&["--not-text", bad]).check().unwrap_err().to_string();
            assert!(e.starts_with("--not-text is a share"), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
        for good in ["0", "0.3", "1"] {
            assert!(args(&["--not-text", good]).check().is_ok(), "{good}");
        }
        // Out of clap's ranges: refused as it parses.
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: StandInArgs,
        }
        for bad in [
            &["--loop-period", "0"][..],
            &["--stutter", "1"],
            &["--stutter", "21"],
        ] {
            let given = std::iter::once("t").chain(bad.iter().copied());
            assert!(T::try_parse_from(given).is_err(), "{bad:?}");
        }
        let d = args(&[
            "--loop-period",
            "3",
            "--stutter",
            "20",
            "--not-text",
            "0.25",
        ])
        .degenerate();
        assert_eq!(
            (d.loop_period, d.stutter, d.not_text),
            (Some(3), Some(20), Some(0.25))
        );
        assert_eq!(args(&[]).degenerate(), Default::default());
    }

    #[test]
    fn change_word_draws_are_seeded_and_span_every_word() {
        let all = args(&["--change-word", "1", "--seed", "5"]);
        let none = args(&["--change-word", "0", "--seed", "5"]);
        let mut hits = [0usize; 5];
        for k in 1..=1000 {
            let w = all
                .changed_word(k, 5)
                .expect("a share of 1 changes every reply");
            hits[w] += 1;
            assert_eq!(none.changed_word(k, 5), None, "a share of 0 changes none");
            assert_eq!(all.changed_word(k, 0), None, "no words, nothing to change");
        }
        // 200 expected at each place; binomial sd about 12.6, so 150..250 is 4 sd either way.
        assert!(hits.iter().all(|h| (150..=250).contains(h)), "{hits:?}");
        assert_eq!(args(&[]).changed_word(1, 5), None);
        let third = args(&["--change-word", "0.3", "--seed", "5"]);
        let picked: Vec<u64> = (1..=1000)
            .filter(|k| third.changed_word(*k, 5).is_some())
            .collect();
        assert!((240..=360).contains(&picked.len()), "{}", picked.len());
        let again: Vec<u64> = (1..=1000)
            .filter(|k| third.changed_word(*k, 5).is_some())
            .collect();
        assert_eq!(picked, again);
        let other = args(&["--change-word", "0.3", "--seed", "6"]);
        assert_ne!(
            picked,
            (1..=1000)
                .filter(|k| other.changed_word(*k, 5).is_some())
                .collect::<Vec<_>>(),
            "another seed, other requests"
        );
    }

    #[test]
    fn change_word_draws_do_not_follow_the_jitter_of_the_same_seed() {
        // Were the two streams one, the requests --change-word picks (a low draw) would be
        // those --jitter makes fastest (a low draw too): their jitter would average below 1.
        let a = args(&[
            "--change-word",
            "0.5",
            "--jitter",
            "0.5",
            "--jitter-seed",
            "9",
        ]);
        let (mut picked, mut spared) = (Vec::new(), Vec::new());
        for k in 1..=2000 {
            let f = a.gap_scale(k);
            match a.changed_word(k, 3) {
                Some(_) => picked.push(f),
                None => spared.push(f),
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        // Each factor is uniform on 0.5..1.5 (sd 0.29); a mean of ~1000 has sd about 0.009, so
        // 0.04 is more than 4 sd; one stream would put the two means 0.5 apart.
        assert!((mean(&picked) - 1.0).abs() < 0.04, "{}", mean(&picked));
        assert!((mean(&spared) - 1.0).abs() < 0.04, "{}", mean(&spared));
    }

    #[test]
    fn without_faults_clears_every_fault_and_keeps_the_rest() {
        use clap::Args;
        let cmd = StandInArgs::augment_args(clap::Command::new("t"));
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.get_help_heading() == Some("Faults in the stream") {
                assert!(
                    FAULTS.iter().any(|(f, _)| *f == id) || NOT_FAULTS.contains(&id),
                    "--{id} is under the faults' heading: add it to FAULTS (and clear it in \
                     without_faults) or to NOT_FAULTS"
                );
            }
        }
        let mut all: Vec<&str> = CLEAN.to_vec();
        for (_, given) in FAULTS {
            all.extend_from_slice(given);
        }
        let faulty = args(&all);
        assert_ne!(faulty, args(CLEAN));
        assert_eq!(faulty.without_faults(), args(CLEAN));
    }

    #[test]
    fn a_fault_request_needs_a_fault_and_counts_from_one() {
        let e = args(&["--fault-request", "1"]).check().unwrap_err();
        assert_eq!(
            e.to_string(),
            "--fault-request K picks which request gets the faults: give a fault too"
        );
        // A fault's setting alone is no fault.
        assert!(args(&["--fault-request", "1", "--error-data", "{}"])
            .check()
            .is_err());
        let e = args(&["--fault-request", "0", "--empty"])
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("from 1"), "{e}");
        for (id, given) in FAULTS {
            let mut a = vec!["--fault-request", "3"];
            a.extend_from_slice(given);
            // --endless-body and --inject need their companions to parse at all.
            match *id {
                "endless_body" => a.extend_from_slice(&["--http-status", "500"]),
                "inject" => a.extend_from_slice(&["--inject-after", "1"]),
                "inject_after" => a.extend_from_slice(&["--inject", "x"]),
                _ => {}
            }
            assert!(args(&a).check().is_ok(), "--{id} is a fault: {a:?}");
        }
    }

    #[test]
    fn a_position_counter_needs_a_held_file_and_gaps_need_sane_numbers() {
        let e = args(&["--held-pos-per-token", "4"]).check().unwrap_err();
        assert!(e.to_string().contains("--hold-open"), "{e}");
        assert!(args(&["--held-pos-per-token", "4", "--hold-open", "f"])
            .check()
            .is_ok());
        assert!(args(&["--gaps-ms=-1"]).check().is_err());
        assert!(args(&["--gaps-ms", "1e12"]).check().is_err());
    }

    #[test]
    fn gaps_parse_as_a_list_and_usage_flags_override() {
        assert_eq!(args(&["--gaps-ms", "40,0.05"]).gaps_ms, vec![40.0, 0.05]);
        assert!(args(&["--usage", "--no-usage"]).no_usage);
        assert!(!args(&["--no-usage", "--usage"]).no_usage);
    }
}
