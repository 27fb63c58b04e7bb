//! The settings a run and a re-judging are given, before anything is held, started or
//! created: [`run`]: `run`'s arguments (the clap struct), their bounds, and the plain settings
//! ([`run::RunSettings`]) a profile fills in and the live run is given; [`profile`]: gate
//! profiles, read and applied under the command line; the flags of each family of lines,
//! shared by `run` and `judge`: [`reference`](self::reference) (the reference's agreement and noise),
//! [`output_checks`] (degenerate output), [`footprint`] (memory), [`context`] (`--depths`)
//! and [`slo`] (the service level and goodput); [`duration`]: durations read with their unit.
//!
//! It may use the archive's types and judging's bounds and defaults, and the report's output
//! flags; live, `judge` and the stand-in use it, and it uses none of them (`tests/layers.rs`
//! checks this).

pub mod context;
pub mod duration;
pub mod footprint;
pub mod output_checks;
pub mod profile;
pub mod reference;
pub mod run;
pub mod slo;
