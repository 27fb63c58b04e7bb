//! npu-serve-smoke: a release gate for LLM inference servers.
//!
//! # Layout
//! - [`cli`]: the command line and the dispatch to each command; [`profile`]: gate profiles.
//! - [`gate`]: `run`, the live gate, from checked arguments to a judged, archived run.
//! - [`judge`]: `judge DIR`, re-judging an archive; [`compare`]: runs side by side.
//! - [`timeline`]: timeline.svg, one row per reply.
//! - [`serve`]: launching and stopping the serve, and what was launched (path, sha256, script);
//!   [`supervise`]: the supervisor process that starts the serve, stops its whole tree and keeps
//!   the hold until it is gone, even when the gate is killed.
//! - [`hold`]: the device hold (flock), and who holds it.
//! - [`client`]: the HTTP client: readiness probes and streamed replies, timed as bytes arrive;
//!   [`stamped`]: the socket whose reads carry those times.
//! - [`sse`]: the SSE parser, pure over bytes; [`serve_log`]: the serve's log, scanned as a
//!   stream for the route patterns and its last lines.
//! - [`openai`]: the fields of a streaming chat chunk the gate needs; [`chunk_scan`]: the fast
//!   path that reads the usual chunk without serde.
//! - [`measure`]: tokens, first-token time and decode rate of a recorded reply.
//! - [`verdict`]: the pure verdict: recorded run + floors -> lines and RESULT.
//! - [`report`]: the verdict as text, JUnit XML and Markdown; [`output`]: where they go.
//! - [`record`]: what a run records; [`rundir`]: the run directory, written atomically, read back.
//! - [`signals`]: TERM, INT and HUP as recorded interruptions.
//! - [`conditions`]: the box's load.
//! - [`prompts`]: the fixed prompts; [`standin`]: the scripted stand-in serve.
//! - [`selftest`]: `self-test`, judging cases and runs against the stand-in.
//! - [`clock`]: CLOCK_MONOTONIC; [`exit_codes`]: the exit codes; [`console`]: stdout and stderr,
//!   written without ever failing the run (`say!`).

pub mod chunk_scan;
pub mod cli;
pub mod client;
pub mod clock;
pub mod compare;
pub mod conditions;
pub mod console;
pub mod exit_codes;
pub mod gate;
pub mod hold;
pub mod judge;
pub mod measure;
pub mod openai;
pub mod output;
pub mod profile;
pub mod prompts;
#[cfg(test)]
mod properties;
pub mod record;
pub mod report;
pub mod rundir;
pub mod selftest;
pub mod serve;
pub mod serve_log;
pub mod signals;
pub mod sse;
pub mod stamped;
pub mod standin;
pub mod supervise;
pub mod timeline;
pub mod verdict;
