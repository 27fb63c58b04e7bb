//! `run`'s arguments: what a live run is given, as the command line and a profile set it, with
//! the bounds both are held to. The `run` command owns them; the command line composes them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::archive::record::AnswerPolicy;
use crate::archive::record::FirstTokenOf;
pub use crate::args::duration::{duration_in, parse_millis, BareUnit};
use crate::report::output::OutputArgs;

/// Default floor for the median decode rate, tok/s.
pub const DEFAULT_FLOOR: f64 = 60.0;
/// Default limit for the median first-token time, ms.
pub const DEFAULT_FIRST_TOKEN_MS: f64 = 600.0;

/// `run`: gate a serve.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// A gate profile (TOML): its keys are these flags' names with underscores, and `serve`,
    /// the serve command as an array. Flags given here override it.
    #[arg(long, value_name = "FILE", help_heading = "Outputs")]
    pub profile: Option<PathBuf>,
    /// The run directory; it must be new or empty [default: runs/<UTC time>]
    #[arg(long, value_name = "DIR", help_heading = "Outputs")]
    pub out: Option<PathBuf>,
    /// The rate floor, the first-token limit, the route patterns and the busy-box policy.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// The route evidence asked of the serve's processes.
    #[command(flatten, next_help_heading = "Route evidence")]
    pub route: RouteEvidenceArgs,
    /// The accepted baseline to compare with.
    #[command(flatten, next_help_heading = "Baseline and reference")]
    pub baseline: BaselineArgs,
    /// Concurrent bursts after the single-stream replies.
    #[command(flatten, next_help_heading = "Bursts")]
    pub bursts: BurstArgs,
    /// What the bursts are held to.
    #[command(flatten, next_help_heading = "Bursts")]
    pub burst_floors: BurstFloorArgs,
    /// Keep making single-stream replies, after the planned ones, until DURATION of replies
    /// has passed from the first one's send (e.g. 10m, 1h30m; at most 24h): rate and
    /// first-token are judged over all of them, and the drift line reads them in order.
    #[arg(long, value_name = "DURATION", value_parser = parse_soak, help_heading = "Soak and drift")]
    pub soak: Option<Duration>,
    /// What the drift line holds the run to.
    #[command(flatten, next_help_heading = "Soak and drift")]
    pub drift: DriftArgs,
    /// The sampling every request asks for.
    #[command(flatten, next_help_heading = "Determinism and output checks")]
    pub sampling: SamplingArgs,
    /// Whether the same prompt must get the same answer.
    #[command(flatten, next_help_heading = "Determinism and output checks")]
    pub determinism: DeterminismArgs,
    /// The reference the candidate's tokens are held to.
    #[command(flatten, next_help_heading = "Baseline and reference")]
    pub reference: crate::args::reference::ReferenceArgs,
    /// What degenerate answers the output line fails.
    #[command(flatten, next_help_heading = "Determinism and output checks")]
    pub output_checks: crate::args::output_checks::OutputCheckArgs,
    /// What the serve's memory, its time to ready and its cold reply are held to.
    #[command(flatten, next_help_heading = "Footprint")]
    pub footprint: crate::args::footprint::FootprintArgs,
    /// The device's memory counter and the reply after idle.
    #[command(flatten, next_help_heading = "Footprint")]
    pub footprint_run: crate::args::footprint::FootprintRunArgs,
    /// What the depths' rates are held to.
    #[command(flatten, next_help_heading = "Context depth")]
    pub context: crate::args::context::ContextArgs,
    /// The depths, their replies and the context.
    #[command(flatten, next_help_heading = "Context depth")]
    pub context_run: crate::args::context::ContextRunArgs,
    /// The flags of the lines that are modules of their own (`lines/mod.rs`), each under
    /// its own heading: the service level each reply is held to.
    #[command(flatten)]
    pub lines: crate::args::lines::LineArgs,
    /// The serve's base URL, instead of http://127.0.0.1:{port}. With no serve command, the
    /// gate measures a serve that is already running (nothing is launched or stopped).
    #[arg(long, value_name = "URL", help_heading = "Launch, hold and stop")]
    pub url: Option<String>,
    /// The readiness probe: GET PATH until it answers 200, e.g. /v2/health/ready for OpenVINO
    /// Model Server [default: /health, else the API's /models where /health is 404]
    #[arg(long, value_name = "PATH", value_parser = parse_url_path, help_heading = "Launch, hold and stop")]
    pub ready_path: Option<String>,
    /// The path prefix of the serve's OpenAI-compatible API: /v1 (llama-server, vLLM), /v3
    /// (OpenVINO Model Server), /api/v1 (Lemonade).
    #[arg(long, value_name = "PATH", default_value = "/v1", value_parser = parse_url_path, help_heading = "Requests")]
    pub api_base: String,
    /// The log of an already running serve, to judge the route by (with --url and no serve
    /// command).
    #[arg(
        long,
        value_name = "FILE",
        requires = "url",
        help_heading = "Launch, hold and stop"
    )]
    pub serve_log: Option<PathBuf>,
    /// Gate the built-in stand-in serve; arguments after -- go to the stand-in.
    #[arg(long, help_heading = "Launch, hold and stop")]
    pub stand_in: bool,
    /// Prompts as JSONL: {"prompt": "...", "expect": "regex", "max_tokens": N} per line.
    #[arg(long, value_name = "FILE", help_heading = "Requests")]
    pub prompts: Option<PathBuf>,
    /// Replies to make, cycling the prompts.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = parse_replies, allow_negative_numbers = true, help_heading = "Requests")]
    pub replies: u32,
    /// Warm-up replies made first, one at a time, before the judged ones: recorded in
    /// replies.jsonl (flagged `warmup`), never judged, so a serve's cold first reply does not
    /// move the figures. A warm-up that fails still fails content. 0 to 100.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = parse_warmup, allow_negative_numbers = true, help_heading = "Requests")]
    pub warmup: u32,
    /// max_tokens of each request (a prompt's own max_tokens wins).
    #[arg(long, default_value_t = 64, value_name = "N", value_parser = parse_max_tokens, allow_negative_numbers = true, help_heading = "Requests")]
    pub max_tokens: u32,
    /// A JSON object merged into every request body, e.g. '{"cache_prompt": false}' to measure
    /// llama-server without its prompt cache.
    #[arg(long, value_name = "JSON", help_heading = "Requests")]
    pub extra_body: Option<String>,
    /// Ask every request for its tokens' logprobs and K alternatives each ("logprobs": true,
    /// "top_logprobs": K), 1 to 20, and record them in replies.jsonl (`logprobs`). A serve
    /// that sends none is said; the figures are measured as without.
    #[arg(long, value_name = "K", value_parser = parse_logprobs, allow_negative_numbers = true, help_heading = "Requests")]
    pub logprobs: Option<u32>,
    /// A JSON object merged into the body of each re-anchor request (--reference-reanchor)
    /// so the serve continues the final assistant message: vLLM and SGLang need
    /// '{"continue_final_message": true, "add_generation_prompt": false}'; llama-server
    /// continues one as it is (unless started with --no-prefill-assistant).
    #[arg(long, value_name = "JSON", help_heading = "Baseline and reference")]
    pub continue_body: Option<String>,
    /// The model name to request [default: the first id from /v1/models, else "default"]
    #[arg(long, help_heading = "Requests")]
    pub model: Option<String>,
    /// Take an exclusive lock (flock) on FILE before the serve starts and keep it until the
    /// serve is gone, so gates on one box never share the device.
    #[arg(long, value_name = "FILE", help_heading = "Launch, hold and stop")]
    pub hold: Option<PathBuf>,
    /// How long to wait for the hold (30s, 10m; a bare number is seconds); past it the run is
    /// SKIP (exit 3).
    #[arg(long, default_value = "600", value_name = "DURATION", value_parser = parse_seconds, help_heading = "Time limits")]
    pub hold_timeout: Duration,
    /// Run the serve under an external hold program instead, given as an argv prefix in shell
    /// quoting, e.g. 'npu-hold --ticket 4s --'.
    #[arg(long, value_name = "PREFIX", help_heading = "Launch, hold and stop")]
    pub hold_cmd: Option<String>,
    /// How long to wait for the serve to answer GET /health (or /v1/models) with 200 (a bare
    /// number is seconds).
    #[arg(long, default_value = "120", value_name = "DURATION", value_parser = parse_seconds, help_heading = "Time limits")]
    pub ready_timeout: Duration,
    /// How long between SIGTERM and SIGKILL when stopping the serve (a bare number is seconds).
    #[arg(long, default_value = "10", value_name = "DURATION", value_parser = parse_seconds, help_heading = "Time limits")]
    pub grace: Duration,
    /// How long a reply's stream may go without any bytes before it is abandoned (a bare
    /// number is seconds).
    #[arg(long, default_value = "60", value_name = "DURATION", value_parser = parse_seconds, help_heading = "Time limits")]
    pub reply_timeout: Duration,
    /// How long one whole reply may take (a bare number is seconds), from its request to its
    /// end, however steadily its bytes come; past it the reply FAILs, saying how much it had
    /// sent; a serve at 1.9 tok/s still finishes inside [default: --reply-timeout
    /// plus 1s for each token max_tokens allows, 124s at the defaults]
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds, help_heading = "Time limits")]
    pub reply_limit: Option<Duration>,
    /// The device's current clock, read beside the replies to explain a drift: a file holding
    /// it in Hz, e.g. an RK3588 NPU's devfreq /sys/class/devfreq/fdab0000.npu/cur_freq.
    #[arg(long, value_name = "PATH", help_heading = "Route evidence")]
    pub device_freq: Option<PathBuf>,
    /// The device's temperature, read beside the replies: a file holding it in millidegrees
    /// Celsius, e.g. an accelerator's hwmon /sys/class/hwmon/hwmon3/temp1_input.
    #[arg(long, value_name = "PATH", help_heading = "Route evidence")]
    pub device_temp: Option<PathBuf>,
    /// How to report the verdict.
    #[command(flatten, next_help_heading = "Outputs")]
    pub output: OutputArgs,
    /// The serve command as one string in shell quoting, split as a shell would (never run
    /// by one), instead of the words after --: for a CI system that has it as one setting.
    #[arg(
        long,
        value_name = "COMMAND",
        conflicts_with = "serve",
        help_heading = "Launch, hold and stop"
    )]
    pub serve_cmd: Option<String>,
    /// The serve command, run directly (no shell); {port} becomes the port the gate picked (a
    /// command without {port} is refused, unless --url names the port the serve picks itself).
    #[arg(
        last = true,
        value_name = "SERVE",
        help_heading = "Launch, hold and stop"
    )]
    pub serve: Vec<String>,
}

/// The rate floor, the first-token limit, the serve log's route patterns and the busy-box
/// policy. Each is absent unless given: `run` starts from [`run_floors`](super::judged::run_floors)' defaults (said in
/// the help as clap says a default; a test in `judged` holds the two equal), `judge` from what
/// the run recorded.
#[derive(Debug, Clone, Default, Args)]
pub struct LimitArgs {
    /// Lowest acceptable median decode rate, tok/s [default: 60]
    #[arg(long, value_name = "TOK_S", help_heading = "Floors and limits")]
    pub floor: Option<f64>,
    /// Highest acceptable median time to the first token (600ms, 0.6s; a bare number is
    /// milliseconds) [default: 600]
    #[arg(long, value_name = "DURATION", value_parser = parse_millis, help_heading = "Floors and limits")]
    pub first_token_ms: Option<f64>,
    /// Which first token --first-token-ms holds: any (the first token of any channel,
    /// reasoning included) or content (the first content token: what a reasoning model's user
    /// waits for before the answer starts, TTFO) [default: any]
    #[arg(long, value_name = "CHANNEL", value_parser = parse_first_token_of, help_heading = "Floors and limits")]
    pub first_token_of: Option<FirstTokenOf>,
    /// A regex the serve log must match: the line that names the fast route.
    #[arg(long, value_name = "REGEX", help_heading = "Route evidence")]
    pub fast_route: Option<String>,
    /// A regex the serve log must not match: the line that names the slow fallback.
    #[arg(long, value_name = "REGEX", help_heading = "Route evidence")]
    pub slow_route: Option<String>,
    /// Busy-box policy: a failure of the timing lines alone (rate, first-token, drift,
    /// aggregate, startup, cold-reply, idle, context-rate, goodput), with the serve's CPU-wait
    /// fraction (or, where not measurable, the load per CPU) at or above THRESHOLD, is a SKIP
    /// (exit 3) instead of a FAIL. 0.2 means 20%. Any other failure (route, content, output,
    /// ...) stays FAIL.
    #[arg(long, value_name = "THRESHOLD", help_heading = "Floors and limits")]
    pub busy_skip: Option<f64>,
}

/// The route evidence asked of the serve's own processes (docs/route.md): `run` records it
/// with the floors, `judge` overrides what a run recorded.
#[derive(Debug, Clone, Default, Args)]
pub struct RouteEvidenceArgs {
    /// A regex over the paths the serve's processes map (/proc/PID/maps of the launched
    /// process and every descendant): some process must map a matching file as executable
    /// code, and the file must be an ELF shared object, e.g. the fast backend's library
    /// 'libggml-cuda\.so'.
    #[arg(long, value_name = "REGEX")]
    pub route_lib: Option<String>,
    /// A regex over the paths the serve's processes map: none may map a matching file in any
    /// way, as code or as data, e.g. the slow backend's library.
    #[arg(long, value_name = "REGEX")]
    pub no_route_lib: Option<String>,
    /// A regex over the files the serve's processes hold open during the replies: some
    /// process must hold a matching one that is a character device, e.g.
    /// '^/dev/accel/accel[0-9]+$'.
    #[arg(long, value_name = "REGEX")]
    pub route_device: Option<String>,
    /// A busy counter that must advance during the replies: a file holding a number (e.g.
    /// intel_vpu's npu_busy_time_us in sysfs), or fdinfo:KEY for a key in
    /// /proc/PID/fdinfo/FD of the character devices --route-device matched (e.g.
    /// fdinfo:drm-engine-npu).
    #[arg(long, value_name = "SOURCE")]
    pub device_busy: Option<String>,
}

/// The accepted baseline a candidate is compared with, and how (docs/baseline.md): `run`
/// records it, `judge` overrides what a run recorded.
#[derive(Debug, Clone, Default, Args)]
pub struct BaselineArgs {
    /// An accepted baseline run directory (a run of the last release on this box): the
    /// candidate's decode rate and first-token are compared with it, reply by reply.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// The change against the baseline that is noise, a share: a FAIL needs the whole 90%
    /// interval of the change beyond it [default: 0.03]
    #[arg(long, value_name = "SHARE")]
    pub baseline_noise: Option<f64>,
    /// The largest acceptable regression against the baseline, a share: ok needs the whole
    /// 90% interval within it [default: 0.10]
    #[arg(long, value_name = "SHARE")]
    pub max_regression: Option<f64>,
    /// Differences of the box from the baseline's that are accepted, comma-separated: host,
    /// cpu, memory, kernel, modules, firmware, tool (the gate's own version).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub baseline_allow: Option<Vec<String>>,
}

/// Concurrent bursts (docs/concurrency.md): after the single-stream replies, `rounds` bursts
/// of `concurrency` streams released together, each stream on its own connection.
#[derive(Debug, Clone, Default, Args)]
pub struct BurstArgs {
    /// Streams released together in each burst, after the --replies single-stream replies
    /// (1: no bursts). At most 1024.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = parse_concurrency, allow_negative_numbers = true)]
    pub concurrency: u32,
    /// Bursts of --concurrency streams [default: 3]
    #[arg(long, value_name = "R", value_parser = parse_rounds, allow_negative_numbers = true)]
    pub rounds: Option<u32>,
    /// The serve's Prometheus metrics, scraped before, once during and after the bursts: http
    /// on loopback or the serve's own host (llama-server needs --metrics) [default: the
    /// serve's /metrics, where it answers]
    #[arg(long, value_name = "URL")]
    pub metrics_url: Option<String>,
}

/// What the concurrent bursts are held to: `run` records it, `judge` overrides what a run
/// recorded. Without either, the aggregate line is information.
#[derive(Debug, Clone, Default, Args)]
pub struct BurstFloorArgs {
    /// Lowest acceptable median aggregate decode rate of the bursts, tok/s (all of a burst's
    /// tokens after each stream's first, over the latest last token less the earliest first).
    #[arg(long, value_name = "TOK_S", allow_negative_numbers = true)]
    pub aggregate_floor: Option<f64>,
    /// Lowest acceptable speedup of the bursts' median aggregate rate over the single-stream
    /// median rate, e.g. 1.5.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub min_speedup: Option<f64>,
}

/// What the drift line holds a run to (docs/soak.md): `run` records it, `judge` overrides
/// what a run recorded.
#[derive(Debug, Clone, Default, Args)]
pub struct DriftArgs {
    /// The largest fall of the decode rate over the run that passes, a share: the drift line
    /// FAILs when the rate fell by more (Sen's slope) and surely (Mann-Kendall p < 0.01), from
    /// 8 replies [default: 0.10]
    #[arg(long, value_name = "SHARE", allow_negative_numbers = true)]
    pub max_drift: Option<f64>,
}

/// The sampling every request asks for (docs/determinism.md): recorded in run.json's
/// `sampling`.
#[derive(Debug, Clone, Default, Args)]
pub struct SamplingArgs {
    /// The temperature every request asks for, 0 to 2. With --deterministic it must be given,
    /// as 0: greedy decoding, the one reproducible answer [default: 0]
    #[arg(long, value_name = "T", value_parser = parse_temperature, allow_negative_numbers = true)]
    pub temperature: Option<f64>,
    /// The seed every request sends (`seed` in its body), 0 to 4294967294: llama.cpp reads
    /// 4294967295 (LLAMA_DEFAULT_SEED) as "pick a random seed".
    #[arg(long, value_name = "N", value_parser = parse_seed, allow_negative_numbers = true)]
    pub seed: Option<u64>,
}

/// Whether the same prompt must get the same answer (docs/determinism.md): `run` records it,
/// `judge` overrides what a run recorded.
#[derive(Debug, Clone, Default, Args)]
pub struct DeterminismArgs {
    /// The serve must answer the same prompt identically every time at temperature 0: every
    /// reply is compared with the first reply to its prompt, and each burst's streams with it
    /// (batch invariance). Any trial that differs FAILs the determinism line; none is
    /// retried. Needs a run made with --temperature 0.
    #[arg(long)]
    pub deterministic: bool,
    /// With --deterministic and --baseline: what an answer that differs from the baseline's
    /// answer to the same prompt is: info (said: a release may change a greedy answer) or
    /// exact (a FAIL) [default: info]
    #[arg(long, value_name = "POLICY", value_parser = parse_answer_policy)]
    pub baseline_answers: Option<AnswerPolicy>,
}

/// The highest `--temperature`: OpenAI's API takes 0 to 2.
pub const MAX_TEMPERATURE: f64 = 2.0;

/// A sampling temperature: 0 to [`MAX_TEMPERATURE`].
pub fn temperature(t: f64) -> Result<f64, String> {
    if !t.is_finite() || !(0.0..=MAX_TEMPERATURE).contains(&t) {
        return Err(format!(
            "temperature {t} is out of range (0 to {MAX_TEMPERATURE}; 0 is greedy)"
        ));
    }
    Ok(t)
}

fn parse_temperature(s: &str) -> Result<f64, String> {
    let t: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a temperature (a number, 0 to {MAX_TEMPERATURE})"))?;
    temperature(t)
}

/// The highest `--seed`: one below llama.cpp's LLAMA_DEFAULT_SEED (0xFFFFFFFF, "pick a random
/// seed" in include/llama.h), the one value a serve may read as "no seed".
pub const MAX_SEED: u64 = 0xFFFF_FFFE;

/// A request's seed: 0 to [`MAX_SEED`].
pub fn seed(n: i128) -> Result<u64, String> {
    match u64::try_from(n) {
        Ok(n) if n <= MAX_SEED => Ok(n),
        _ => Err(format!(
            "seed {n} is out of range (0 to {MAX_SEED}; llama.cpp reads 4294967295 as a random seed)"
        )),
    }
}

fn parse_seed(s: &str) -> Result<u64, String> {
    let n: i128 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a seed (a whole number, 0 to {MAX_SEED})"))?;
    seed(n)
}

fn parse_answer_policy(s: &str) -> Result<AnswerPolicy, String> {
    AnswerPolicy::parse(s)
}

/// `--first-token-of`: `any` or `content`, refused in one line otherwise.
pub fn parse_first_token_of(s: &str) -> Result<FirstTokenOf, String> {
    FirstTokenOf::parse(s)
}

/// The longest soak: a day.
pub const MAX_SOAK: Duration = Duration::from_secs(86_400);

/// The most single-stream replies a soak keeps: past it the soak ends, saying so. At 4 s a
/// reply that is 22 hours; it bounds what the run holds and what `judge` reads back.
pub const MAX_SOAK_REPLIES: usize = 20_000;

/// A soak's duration: humantime's `10m`, `1h30m`, `90s`; above 0 and at most [`MAX_SOAK`].
pub fn soak(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("{s:?} is not a duration ({e}); give e.g. 90s, 10m or 1h30m"))?;
    if d.is_zero() || d > MAX_SOAK {
        return Err(format!("{s:?} is out of range (above 0, at most 24h)"));
    }
    Ok(d)
}

fn parse_soak(s: &str) -> Result<Duration, String> {
    soak(s)
}

/// The most streams one burst may have.
pub const MAX_CONCURRENCY: u32 = 1024;

/// The most bursts a run may make.
pub const MAX_ROUNDS: u32 = 1000;

/// Bursts when `--concurrency` is given without `--rounds`.
pub const DEFAULT_ROUNDS: u32 = 3;

/// Streams in a burst: 1 to [`MAX_CONCURRENCY`].
pub fn concurrency(n: i64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(n) if (1..=MAX_CONCURRENCY).contains(&n) => Ok(n),
        _ => Err(format!(
            "concurrency {n} is out of range (1 to {MAX_CONCURRENCY} streams at once)"
        )),
    }
}

/// Bursts: 1 to [`MAX_ROUNDS`].
pub fn rounds(n: i64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(n) if (1..=MAX_ROUNDS).contains(&n) => Ok(n),
        _ => Err(format!("{n} rounds is out of range (1 to {MAX_ROUNDS})")),
    }
}

fn parse_concurrency(s: &str) -> Result<u32, String> {
    parse_count(s, concurrency)
}

fn parse_rounds(s: &str) -> Result<u32, String> {
    parse_count(s, rounds)
}

/// The most seconds any phase may be given: a day. Larger values (a profile's `grace = 1e19`)
/// would overflow the clock arithmetic they feed.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The most replies a run may make.
pub const MAX_REPLIES: u32 = 10_000;

/// A number of seconds as a duration: above 0 and at most [`MAX_SECONDS`]. The command line
/// and profiles are held to the same bounds.
pub fn seconds(secs: f64) -> Result<Duration, String> {
    if !secs.is_finite() || secs <= 0.0 || secs > MAX_SECONDS {
        return Err(format!(
            "{secs} s is out of range (above 0, at most {MAX_SECONDS})"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--grace 2.5` and friends: a duration with its unit, as `--soak` takes one (`500ms`,
/// `2.5s`, `2m`), or a bare number of seconds as these flags always took; either held to
/// [`seconds`]'s bounds.
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    seconds(duration_in(s, BareUnit::Seconds)?)
}

/// The stand-in's whole-millisecond flags (`--ttft-ms 50`, `--startup-ms 2s`): a bare whole
/// number of ms as before, or a duration with its unit that comes to a whole number of ms.
pub fn parse_whole_millis(s: &str) -> Result<u64, String> {
    if let Ok(n) = s.trim().parse::<u64>() {
        return Ok(n);
    }
    let ms = duration_in(s, BareUnit::Millis)?;
    if ms < 0.0 || ms.fract() != 0.0 || ms > u64::MAX as f64 {
        return Err(format!(
            "{s:?} is not a whole number of milliseconds, 0 or more (e.g. 50, 50ms, 2s)"
        ));
    }
    Ok(ms as u64)
}

/// A count of replies: 1 to [`MAX_REPLIES`].
pub fn replies(n: i64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(n) if (1..=MAX_REPLIES).contains(&n) => Ok(n),
        _ => Err(format!("{n} replies is out of range (1 to {MAX_REPLIES})")),
    }
}

/// The most warm-up replies: a serve that is not warm after a hundred is not cold.
pub const MAX_WARMUP: u32 = 100;

/// A count of warm-up replies: 0 to [`MAX_WARMUP`].
pub fn warmup(n: i64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(n) if n <= MAX_WARMUP => Ok(n),
        _ => Err(format!(
            "{n} warm-up replies is out of range (0 to {MAX_WARMUP})"
        )),
    }
}

/// A request's max_tokens: 1 or more.
pub fn max_tokens(n: i64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "max_tokens {n} is out of range (1 to {})",
            u32::MAX
        )),
    }
}

fn parse_count(s: &str, check: fn(i64) -> Result<u32, String>) -> Result<u32, String> {
    let n: i64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    check(n)
}

fn parse_replies(s: &str) -> Result<u32, String> {
    parse_count(s, replies)
}

fn parse_warmup(s: &str) -> Result<u32, String> {
    parse_count(s, warmup)
}

/// The alternatives a token's logprobs may ask for: 1 to
/// [`MAX_TOP_LOGPROBS`](crate::archive::record::MAX_TOP_LOGPROBS) (OpenAI's API takes 0 to 20;
/// 0 would ask for no alternative to judge against).
pub fn logprobs(n: i64) -> Result<u32, String> {
    use crate::archive::record::MAX_TOP_LOGPROBS;
    match u32::try_from(n) {
        Ok(k) if (1..=MAX_TOP_LOGPROBS as u32).contains(&k) => Ok(k),
        _ => Err(format!(
            "logprobs {n} is out of range (1 to {MAX_TOP_LOGPROBS} alternatives a token)"
        )),
    }
}

fn parse_logprobs(s: &str) -> Result<u32, String> {
    parse_count(s, logprobs)
}

fn parse_max_tokens(s: &str) -> Result<u32, String> {
    parse_count(s, max_tokens)
}

/// A URL path for `--ready-path` and `--api-base`: it starts with `/` and holds no spaces,
/// query or fragment, so it joins the serve's base URL as it is.
pub fn url_path(s: &str) -> Result<String, String> {
    if !s.starts_with('/') {
        return Err(format!("{s:?} is not a URL path: it must start with /"));
    }
    if let Some(bad) = s
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '?' | '#'))
    {
        return Err(format!(
            "{s:?} is not a URL path: {bad:?} has no place in one"
        ));
    }
    Ok(s.trim_end_matches('/').to_string())
}

fn parse_url_path(s: &str) -> Result<String, String> {
    url_path(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_number_keeps_the_unit_each_flag_always_took() {
        assert_eq!(parse_millis("600"), Ok(600.0));
        assert_eq!(parse_millis("2.5"), Ok(2.5));
        assert_eq!(parse_seconds("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds(" 10 "), Ok(Duration::from_secs(10)));
        assert_eq!(parse_whole_millis("50"), Ok(50));
        assert_eq!(parse_whole_millis("0"), Ok(0));
    }

    #[test]
    fn a_unit_is_read_whatever_the_flag_s_bare_unit() {
        for v in ["600ms", "0.6s", "0.6 s", "600000us", "0.01m"] {
            let ms = parse_millis(v).unwrap();
            assert!((ms - 600.0).abs() < 1e-9, "{v}: {ms}");
        }
        assert_eq!(parse_millis("0.6s"), Ok(600.0));
        assert_eq!(parse_seconds("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_seconds("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_seconds("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_whole_millis("2s"), Ok(2000));
        assert_eq!(parse_whole_millis("50ms"), Ok(50));
        assert_eq!(
            parse_whole_millis("1500us"),
            Err(
                "\"1500us\" is not a whole number of milliseconds, 0 or more (e.g. 50, 50ms, 2s)"
                    .to_string()
            )
        );
    }

    #[test]
    fn bad_input_is_one_error_that_says_what_to_give() {
        for v in [
            "soon",
            "",
            "5 fortnights",
            "-5ms",
            "1.2.3s",
            "ms",
            "1e400ms",
        ] {
            let e = parse_millis(v).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "{v:?} is not a duration: give a unit (500ms, 0.6s, 30s, 2m) or a bare number of milliseconds"
                )
            );
            assert!(!e.contains('\n'), "{e}");
            let e = parse_seconds(v).unwrap_err();
            assert!(e.ends_with("or a bare number of seconds"), "{e}");
            assert!(parse_whole_millis(v).is_err(), "{v}");
        }
        // The bounds stay each flag's own: seconds' range, the verdict's for first-token.
        assert!(parse_seconds("0ms").unwrap_err().contains("out of range"));
        assert!(parse_seconds("25h").unwrap_err().contains("out of range"));
        assert!(parse_whole_millis("-1").is_err());
    }
}
