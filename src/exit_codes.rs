//! Exit codes, as plain data: one constant per outcome a user or CI script can act on.
//!
//! Documented in `--help` and the README; every user-facing outcome maps to exactly one.

/// Every judged line is ok: the release candidate passes.
pub const PASS: u8 = 0;
/// At least one judged line failed.
pub const FAIL: u8 = 1;
/// The gate could not run as asked: bad arguments, unreadable files, serve binary not found,
/// an output directory that is not empty, an archive that cannot be read.
pub const COULD_NOT_RUN: u8 = 2;
/// The gate did not judge: the device hold was not acquired in time, or (with `--busy-skip`)
/// only timing failed, on a busy box.
pub const SKIP: u8 = 3;
/// Nothing failed, but a comparison with the accepted baseline could not decide (too few
/// replies, a busier or quieter box, another host): never a PASS.
pub const INCONCLUSIVE: u8 = 4;
/// Interrupted by a signal: 128 + the signal's number (143 for TERM, 130 for INT, 129 for HUP).
pub const INTERRUPTED_BASE: u8 = 128;

/// The text `--help` and the README show for the exit codes.
pub const HELP: &str = "\
Exit codes:
  0  PASS: every judged line is ok
  1  FAIL: at least one judged line failed
  2  the gate could not run as asked (bad arguments, unreadable files, serve binary not found)
  3  SKIP: the hold was not acquired in time, or only timing failed on a busy box (--busy-skip)
  4  INCONCLUSIVE: nothing failed, but a comparison with the baseline could not decide
  128+N  interrupted by signal N";

use crate::judging::verdict::Outcome;

/// The exit code for a result.
pub fn for_outcome(outcome: &Outcome) -> u8 {
    match outcome {
        Outcome::Pass => PASS,
        Outcome::Fail => FAIL,
        Outcome::Skip { .. } => SKIP,
        Outcome::Inconclusive { .. } => INCONCLUSIVE,
        Outcome::Interrupted { signal } => {
            INTERRUPTED_BASE.saturating_add(u8::try_from(signal.number()).unwrap_or(u8::MAX))
        }
    }
}
