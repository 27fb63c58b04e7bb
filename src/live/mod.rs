//! Live: all the I/O of a run. Its orchestration ([`gate`]), the plan it runs, checked in two
//! steps: the settings as pure functions ([`checked_args`]), then against the system
//! ([`plan`]), with run.json's settings ([`settings_record`]); the measuring phase
//! ([`measure_serve`]), its single-stream replies ([`single_reply`]), the soak ([`soak`]) and
//! the progress lines ([`progress_line`]); the serve's log read after it ([`serve_log_read`]);
//! the serve's process ([`serve`]), its supervisor ([`supervise`]), the /proc process reads
//! and the PATH lookup they share ([`proc_stat`], [`exec_path`]) and the pipe its output is
//! copied from ([`log_pipe`]), the device hold ([`hold`]), signals ([`signals`]), the HTTP
//! client ([`client`]), the streamed reply's reader ([`stream_read`]), the connection
//! ([`http_link`]), the count of a burst's first texts ([`first_text`]) and the stamped socket
//! under them ([`stamped`]), and the sampler of the box's conditions ([`conditions`]), which
//! also reads the route evidence of the serve's process tree ([`route_probe`]) and the
//! throttling evidence of the CPUs and the device ([`throttle`]); the run's provenance, the
//! files it was given hashed and the box's facts ([`provenance`]); the replies of `--depths`
//! and the probe of the context's limit ([`depth`]). Its settings come from
//! [`crate::args`], the layer below it.
//!
//! The leaves ([`proc_stat`], [`exec_path`], [`progress_line`], [`first_text`],
//! [`http_link`]) import nothing above them here: the files of live/ import each other
//! without a circle (issue 33).
//!
//! It uses the wire, the archive, the settings (args), judging and report; none of them uses it.
//! `tests/layers.rs` checks this.

pub mod bursts;
pub mod checked_args;
pub mod client;
pub mod conditions;
pub mod depth;
pub mod exec_path;
pub mod first_text;
pub mod footprint;
pub mod gate;
pub mod hold;
pub mod http_link;
pub mod log_pipe;
pub mod measure_serve;
pub mod plan;
pub mod proc_scan;
pub mod proc_stat;
pub mod progress_line;
pub mod provenance;
pub mod reanchor;
pub mod recorder;
pub mod route_probe;
pub mod serve;
pub mod serve_log_read;
pub mod serve_tree;
pub mod settings_record;
pub mod signals;
pub mod single_reply;
pub mod soak;
pub mod stamped;
pub mod stream_read;
pub mod supervise;
pub mod throttle;
