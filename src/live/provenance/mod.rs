//! Provenance (issue 18): what a run ran on and with, gathered once before run.json is first
//! written. The files named in the serve's arguments are hashed (`model_files.rs`), a large one
//! once and then taken from a cache outside the run directory (`hash_cache.rs`: a 4 GB model is
//! not read again on every run); the workload is hashed (`workload.rs`); the box's facts come
//! from /proc and /sys (`box_facts.rs`). Nothing here fails a run: whatever cannot be read is
//! left out and named in `problems`.
//!
//! The parsing is pure and tested beside it; the reads around it are thin, and take their
//! roots as arguments so the tests give them a made-up /sys.
//!
//! It runs on the gate's thread before anything is held or started. The signal handlers are
//! registered by then, so a signal during the first hash of a large model is not lost: the run
//! is recorded as interrupted once the hash is done (a few seconds a GB, once).

mod box_facts;
mod hash_cache;
mod model_files;
mod workload;

use crate::archive::record::{Provenance, RunManifest};
use crate::judging::provenance::without_port;

pub use box_facts::{
    cpu_count, cpu_model, firmware_key, labelled, mem_total_kib, module_value, ACCEL_FIRMWARE,
    MODULES,
};
pub use hash_cache::{cache_path, CACHE_FROM_BYTES, CACHE_MAX_ENTRIES};
pub use model_files::{path_candidates, MAX_MODEL_FILES};
pub use workload::{canonical_json, workload_sha256};

/// Gather the run's provenance from its manifest (the serve's argv, binary, URL, prompts and
/// extra body) and `--max-tokens`.
pub fn gather(manifest: &RunManifest, max_tokens: u32) -> Provenance {
    let mut problems = Vec::new();
    let (serve_argv, serve_program_at, model_files) =
        match (&manifest.serve_argv, &manifest.serve_binary) {
            (Some(argv), Some(binary)) => {
                let at = model_files::program_index(argv, binary);
                let files = model_files::hash_model_files(
                    argv,
                    at,
                    binary,
                    &mut hash_cache::Cache::closed(),
                    &mut problems,
                );
                (Some(without_port(argv, &manifest.url)), Some(at), files)
            }
            _ => (None, None, Vec::new()),
        };
    let facts = box_facts::read(&mut problems);
    Provenance {
        tool_version: manifest.tool_version.clone(),
        serve_binary_sha256: manifest.serve_binary.as_ref().map(|b| b.sha256.clone()),
        model_files,
        serve_argv,
        serve_program_at,
        workload_sha256: workload_sha256(
            &manifest.prompts,
            max_tokens,
            manifest.extra_body.as_ref(),
            manifest.sampling_sent.as_ref(),
        ),
        host: facts.host,
        machine_id: facts.machine_id,
        cpu_model: facts.cpu_model,
        ncpu: facts.ncpu,
        mem_total_kib: facts.mem_total_kib,
        kernel: facts.kernel,
        modules: facts.modules,
        firmware: facts.firmware,
        problems,
    }
}
