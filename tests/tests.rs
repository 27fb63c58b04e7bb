//! Integration tests: the real binary, the stand-in as a real child process, real HTTP on
//! loopback. Timing verdicts are only asserted with scripted delays and 10x margins; plumbing
//! tests use floors that cannot flip.

mod util;

mod action_release;
mod baseline;
mod ci;
mod compare;
mod concurrency;
mod conditions;
mod consumers;
mod context;
mod determinism;
mod digests;
mod docs;
mod faults;
mod footprint;
mod goodput;
mod hold;
mod house;
mod inputs;
mod install;
mod judge;
mod latency;
mod launch;
mod layers;
mod llama;
mod logprobs;
mod mutants_table;
mod output;
mod output_checks;
mod package;
mod profiles;
mod provenance;
mod record;
mod reference;
mod reference_llama;
mod release;
mod report_html;
mod route;
mod route_logs;
mod run;
mod run_dir;
mod safety;
mod self_test;
mod serve_log;
mod soak;
mod standin_concurrency;
mod standin_context;
mod standin_degenerate;
mod standin_footprint;
mod standin_route;
mod standin_tools;
mod supervise;
mod tools;
mod version;
