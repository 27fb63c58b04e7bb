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
    /// Map FILE read-only (whole, MAP_PRIVATE) at start and keep it mapped, so /proc/PID/maps
    /// lists it, as a serve's mapped model or device library is listed. Give it again for more
    /// files. An empty file cannot be mapped and is refused.
    #[arg(long, value_name = "FILE", help_heading = "Route evidence")]
    pub map_file: Vec<PathBuf>,
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
    /// Keep FILE holding the microseconds spent producing replies (from a request's arrival to
    /// its last event, summed over requests) as a number and a newline, like intel_vpu's sysfs
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
}

impl StandInArgs {
    /// Refuse a script that cannot run, before anything is opened or started.
    pub(super) fn check(&self) -> anyhow::Result<()> {
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
        // Not clap's `requires`: its error takes several lines, and a bad value here gets one.
        if self.held_pos_per_token.is_some() && self.hold_open.is_empty() {
            anyhow::bail!("--held-pos-per-token moves the --hold-open files: give at least one --hold-open FILE");
        }
        Ok(())
    }
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
