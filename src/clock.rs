//! The gate's clock: CLOCK_MONOTONIC in nanoseconds.
//!
//! Read directly (not through `Instant`) so the absolute figure can be compared with timestamps
//! another process took on the same clock, such as the stand-in's send trace.

use nix::time::{clock_gettime, ClockId};

/// Nanoseconds on CLOCK_MONOTONIC now.
pub fn now_ns() -> u64 {
    // CLOCK_MONOTONIC cannot fail on Linux for a valid clock id; fall back to 0 rather than
    // panic, which would show as an impossible timestamp in the records.
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => (ts.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec() as u64),
        Err(_) => 0,
    }
}

/// Nanoseconds to milliseconds, for figures shown to people.
pub fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
