//! The gate's own build: its version, the git commit it was built from and the date of the
//! build (set by `build.rs`). `--version` prints them, and run.json records the version and
//! commit so an archive names the gate that made it.

/// The crate's version, e.g. `0.1.0`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the gate was built from (40 hex digits), or `unknown`.
pub const COMMIT: &str = env!("NPU_SERVE_SMOKE_COMMIT");

/// The build's date, UTC, `YYYY-MM-DD` (`SOURCE_DATE_EPOCH`'s when the build set it).
pub const BUILD_DATE: &str = env!("NPU_SERVE_SMOKE_BUILD_DATE");

/// What `--version` prints after the name: `0.1.0 (commit 0123456789ab, built 2026-12-04)`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("NPU_SERVE_SMOKE_COMMIT"),
    ", built ",
    env!("NPU_SERVE_SMOKE_BUILD_DATE"),
    ")"
);

/// A commit as people quote it: its first 12 hex digits.
pub fn short_commit(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
