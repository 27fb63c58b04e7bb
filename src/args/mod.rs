//! The settings a run and a re-judging are given, before anything is held, started or
//! created: [`run`]: `run`'s arguments ([`run::RunArgs`], the clap struct: every setting
//! declared once, with its flag, default, help and bounds), which a profile fills in and the
//! live run is given as they are (no copy of them kept in step by hand); [`profile`]: gate
//! profiles, whose keys are those flags, read by their parsers and laid under the command line;
//! [`judged`]: the flags a verdict is judged by, one group each, flattened into `run` and `judge`
//! alike and laid over the recorded floors in one place ([`judged::Judged::over`]); the flags of each family of lines,
//! shared by `run` and `judge`: [`reference`](self::reference) (the reference's agreement and noise),
//! [`output_checks`] (degenerate output), [`footprint`] (memory) and [`context`] (`--depths`);
//! [`lines`]: the flags of the lines that are modules of their own ([`crate::lines`], each
//! declaring its flags: the goodput line's `--slo`); [`duration`]: durations read with their
//! unit.
//!
//! It may use the archive's types and judging's bounds and defaults, and the report's output
//! flags; live, `judge` and the stand-in use it, and it uses none of them (`tests/layers.rs`
//! checks this).

pub mod context;
pub mod duration;
pub mod footprint;
pub mod judged;
pub mod lines;
pub mod output_checks;
pub mod profile;
pub mod reference;
pub mod run;
