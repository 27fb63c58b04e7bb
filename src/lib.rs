//! npu-serve-smoke: a release gate for LLM inference servers.
//!
//! # Layout
//! The crate is in layers; each folder opens with what it is and what it may use, and
//! `tests/layers.rs` checks that the imports keep to it; `tests/house.rs` that no two files
//! import each other, round any circle, and that no function or file outgrows a reader.
//! - [`archive`] (the bottom): the run's data. [`archive::record`]: every type a run directory
//!   holds, with the schema version, one file a concern; [`archive::check`]: the checks the
//!   verdict's lines are named by (judged or info, the timing set); [`archive::tags`]: the
//!   small closed sets an archive names by a word (a unit, a scrape's phase, serve.log's
//!   source, the interrupting signal); [`archive::byte_size`]: sizes read with their unit and
//!   said in the unit that reads best; [`archive::rundir`]: the run directory, written
//!   atomically, read back, loaded leniently.
//! - [`wire`]: the bytes of a streamed reply, pure. [`wire::sse`]: the SSE parser;
//!   [`wire::openai`]: the chunk fields the gate needs; [`wire::chunk_scan`]: the fast path
//!   that reads the usual chunk without serde; [`wire::prom_text`]: a serve's Prometheus
//!   metrics read as text.
//! - [`judging`]: pure, over archive types. [`judging::measure`]: tokens, first-token time,
//!   decode rate and the median with its interval; [`judging::drift`]: whether the rate or
//!   first-token time drifted over the run (Mann-Kendall on blocks, Sen's slope); the drift
//!   lines are the verdict's; [`judging::growth`]: Sen's slope with its 95% interval, for the
//!   memory lines; [`judging::serve_log`]: the serve's log
//!   scanned as a stream; [`judging::verdict`]: recorded run + floors -> lines and RESULT, one
//!   file per line family, what they share in leaves (criteria, evidence, line, words) that
//!   the families and `judge` both import; [`judging::provenance`]: what differs between two runs'
//!   provenance, and whether it makes them not comparable or runs on another box.
//! - [`live`]: all the I/O of a run. [`live::gate`]: `run`, from settings to a judged, archived
//!   run; [`live::checked_args`] and [`live::plan`]: the plan in two steps, the settings
//!   checked as pure functions, then made real against the system; [`live::settings_record`]:
//!   run.json's settings; [`live::measure_serve`], [`live::single_reply`], [`live::soak`] and
//!   [`live::serve_log_read`]: the measuring phase, its replies, the soak and the serve's log
//!   read after it; [`live::serve`] and [`live::supervise`]: the serve's process and the
//!   supervisor that stops its whole tree, with [`live::proc_stat`] (/proc's processes) and
//!   [`live::exec_path`] (programs on PATH) under both; [`live::hold`]: the device hold;
//!   [`live::signals`]: TERM, INT and HUP; [`live::client`], [`live::stream_read`],
//!   [`live::http_link`] and [`live::stamped`]: the HTTP client, the streamed reply's reader,
//!   the connection, and the socket whose reads carry their times; [`live::conditions`]: the
//!   box's load; [`live::footprint`]: the serve's and the device's memory, read over the
//!   serve's tree ([`live::serve_tree`]);
//!   [`live::route_probe`]: the route evidence of the serve's process tree (maps,
//!   open files, the busy counter, into route.json); [`live::provenance`]: the run's
//!   provenance (files hashed, with their cache; the workload's hash; the box's facts).
//! - [`args`]: the settings, checked before anything is held or started. [`args::run`]:
//!   `run`'s arguments (the clap struct, the one declaration of each setting) and their
//!   bounds; [`args::profile`]: gate profiles; the flags each family of lines shares
//!   between `run` and `judge` ([`args::reference`], [`args::output_checks`],
//!   [`args::footprint`], [`args::context`]), and those of the line modules ([`args::lines`]);
//!   durations read by [`args::duration`].
//! - [`lines`]: the judged lines that are each one module (issue 53): a line's flags, its
//!   record in the archive, its pure verdict, its summary table, Prometheus families and
//!   self-test cases in one folder, listed once in [`lines`], whose list every
//!   place that goes over the lines expands (docs/adding-a-line.md). Pure; every layer
//!   reaches it through the registry, and a line module imports only the others' leaves.
//! - [`report`]: renders a verdict, decides nothing. Human lines, JUnit and Markdown in
//!   [`report`] itself; [`report::output`]: where each goes; [`report::timeline`]:
//!   timeline.svg; [`report::compare`]: runs side by side (read into rows; the table, CSV and
//!   SVG writers take rows and return text); [`report::prom`]: Prometheus metrics.
//! - [`standin`]: the scripted stand-in serve, the other side of the wire; [`selftest`]:
//!   `self-test`, judging cases (a file a family under `selftest/cases/`) and runs against the
//!   stand-in.
//! - At the top: [`cli`]: the command line and the dispatch to each command; [`judge`]: `judge DIR`; [`prompts`]: the fixed prompts; [`depth_prompt`]: the long prompts of `--depths`, made here; [`tool_spec`]: what a prompt's tools and formats ask and expect; [`exit_codes`]: the exit
//!   codes; [`build_info`]: the gate's own version, commit and build date; [`manual`]: the
//!   manual pages, made from the command line; [`clock`]: CLOCK_MONOTONIC; [`inert`]: foreign text made safe for each output;
//!   [`console`]: stdout and stderr, written without ever
//!   failing the run (`say!`).

pub mod archive;
pub mod args;
pub mod build_info;
pub mod cli;
pub mod clock;
pub mod console;
pub mod depth_prompt;
pub mod exit_codes;
pub mod inert;
pub mod judge;
pub mod judging;
pub mod lines;
pub mod live;
pub mod manual;
pub mod prompts;
#[cfg(test)]
mod properties;
pub mod report;
pub mod selftest;
pub mod standin;
pub mod tool_spec;
pub mod wire;
