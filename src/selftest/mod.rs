//! `self-test`: the gate proves, without hardware, that it judges right and measures right.
//!
//! Three parts: the judging cases ([`cases`]) run the verdict over hand-made runs; the verdict
//! runs start the gate as a real child process against the stand-in with one scripted fault
//! each, plus a SIGTERM mid-request; the accuracy runs compare every reported figure with the
//! stand-in's own send trace ([`runs`]).
//!
//! It sits above the layers it checks: it may use the archive, judging, the stand-in and the
//! conditions' summary, and runs the gate itself only as a child process.

pub mod cases;
pub mod runs;

use anyhow::{Context, Result};

use crate::exit_codes;

/// Run every check; exit 0 when all pass, 1 naming each that failed.
pub fn run() -> Result<u8> {
    let exe = std::env::current_exe().context("failed to find this program's own path")?;
    let tmp = tempfile::Builder::new()
        .prefix("npu-serve-smoke-self-test.")
        .tempdir()
        .context("failed to create a temporary directory")?;
    let mut failed: Vec<String> = Vec::new();

    let cases = cases::all();
    for c in &cases {
        if let Err(e) = c.check() {
            failed.push(format!("judging case {:?}: {e}", c.name));
        }
    }
    let verdict_runs = runs::verdict_runs(&exe, tmp.path());
    let accuracy = runs::accuracy(&exe, tmp.path());
    for (name, outcome) in verdict_runs.iter().chain(&accuracy) {
        if let Err(e) = outcome {
            failed.push(format!("{name}: {e}"));
        }
    }
    if let Err(e) = runs::term_mid_request(&exe, tmp.path()) {
        failed.push(format!("a TERM mid-request: {e}"));
    }

    let summary = format!(
        "{} judging cases, {} runs against a stand-in serve, {} metric checks against its send trace and a TERM mid-request",
        cases.len(),
        verdict_runs.len(),
        accuracy.len()
    );
    if failed.is_empty() {
        crate::console::out(&format!("self-test: {summary} ok\n"));
        return Ok(exit_codes::PASS);
    }
    for f in &failed {
        crate::console::out(&format!("self-test FAIL  {f}\n"));
    }
    crate::console::out(&format!(
        "self-test: {} failed of {summary}\n",
        failed.len()
    ));
    // Keep the evidence of a failed self-test for whoever reads the report.
    let kept = tmp.keep();
    crate::say!("the failed runs are kept in {}", kept.display());
    Ok(exit_codes::FAIL)
}
