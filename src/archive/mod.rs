//! The archive: the run's data, at the bottom of the house. Every type that goes into a run
//! directory ([`record`]: the on-disk format and its schema version) and the run directory
//! itself ([`rundir`]: written atomically, read back, loaded leniently; [`reply_stream`]: its
//! replies read as a stream); [`check`]: the checks the
//! verdict's lines are named by; [`safe_open`]: opening
//! a file someone else named without blocking on a FIFO, and reading it with a cap; [`digest`]:
//! the sha256 of each file the gate wrote, and the check that an archive still holds them;
//! [`tags`]: the small closed sets an archive names by a word (a unit, a phase, a signal).
//!
//! It may use the wire's types and the top-level prompts, clock and console; never judging,
//! live or report, which all import it. `tests/layers.rs` checks this.

pub mod byte_size;
pub mod check;
pub mod digest;
pub mod record;
pub mod reply_stream;
pub mod rundir;
pub mod safe_open;
pub mod tags;
