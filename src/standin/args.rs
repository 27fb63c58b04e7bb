//! The stand-in's script: its command line, as clap reads it.

use std::path::PathBuf;

use clap::Args;

/// The stand-in's script.
#[derive(Debug, Clone, Args)]
pub struct StandInArgs {
    /// Port to listen on, on 127.0.0.1 (0: any free port, printed at start).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Milliseconds from receiving a request to sending its first token.
    #[arg(long, default_value_t = 50, value_name = "MS")]
    pub ttft_ms: u64,
    /// Milliseconds between chunks, cycled (e.g. 40,10).
    #[arg(
        long,
        default_value = "10",
        value_delimiter = ',',
        value_name = "MS,..."
    )]
    pub gaps_ms: Vec<f64>,
    /// Tokens a reply has (capped by the request's max_tokens).
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
    /// Send a final usage chunk when the request asks for it (the default).
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
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub work_ms: u64,
    /// Exit (status 3) after N tokens: a serve that dies mid-stream.
    #[arg(long, value_name = "N")]
    pub crash_after: Option<usize>,
    /// Ignore SIGTERM (a serve that has to be killed).
    #[arg(long)]
    pub ignore_term: bool,
    /// Wait this long before listening.
    #[arg(long, default_value_t = 0, value_name = "MS")]
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
    /// The reply's first words, instead of the right answer to a built-in prompt.
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
    #[arg(long, value_name = "MS", help_heading = "Faults in the stream")]
    pub trickle_ms: Option<u64>,
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
    /// The first token's chunk carries BYTES more content (" ok" repeated): one huge chunk.
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
pub(super) fn parse(extra: &[&str]) -> StandInArgs {
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

    #[test]
    fn gaps_parse_as_a_list_and_usage_flags_override() {
        assert_eq!(args(&["--gaps-ms", "40,0.05"]).gaps_ms, vec![40.0, 0.05]);
        assert!(args(&["--usage", "--no-usage"]).no_usage);
        assert!(!args(&["--no-usage", "--usage"]).no_usage);
    }
}
