//! The judged lines that are each one module (issue 53): a line's settings (its flags and the
//! record run.json keeps of them), its pure verdict, its figures (a typed record of its own in
//! result.json), its Markdown summary table and Prometheus families, and its self-test cases,
//! in one folder. They are listed once, here ([`every_line`]), and every place that goes over
//! the lines expands that list. docs/adding-a-line.md is the recipe.
//!
//! What a line module may use: the archive, the verdict's leaves (`judging::verdict::{evidence,
//! line, words, conditions}`, never `judging::verdict` itself), `judging`'s measures, the
//! argument layer's parsers, the report's leaves (`report::exposition`) and the self-test's
//! case data (`selftest::cases::{case, parts}`, which never reach the verdict either).
//! It is pure, as `judging` is: no I/O. It never imports a file that expands the registry
//! (`tests/house.rs` holds it to that), since each of those calls it.
//!
//! A line's `record.rs` holds what the archive keeps (its recorded settings and its figures)
//! and imports nothing but the archive's leaves: the archive's `Floors` and `Figures` hold it.
//!
//! The lines so far: [`goodput`] (`--slo`, issue 37).
//!
//! # The registry
//!
//! [`every_line`] hands the list to a macro of the caller's, which makes of it what that place
//! needs: the archive's `LineFloors` (run.json `floors`) and `LineFigures` (result.json
//! `figures`), the argument layer's `LineArgs` (flattened into `run` and `judge`) and the
//! landing of each in the floors, the criteria's bounds, the verdict's calls, the Markdown
//! summary's tables, the Prometheus families and the self-test's cases. A line added here is
//! in all of them; one left out is in none, and nothing else names it.
//!
//! An entry, in the order of the verdict's lines where two follow the same line:
//!
//! ```text
//! module: Check after Anchor { floors: key Type, figures: Type, flags: Type };
//! ```
//!
//! - `module`: the folder under `src/lines/`, and the field of `LineFigures` and `LineArgs`;
//! - `Check`: the [`crate::archive::check::Check`] variant its line is named by;
//! - `after Anchor`: the check whose line it follows in the verdict (goodput's, `Latency`);
//!   where that line is not there, it goes after the replies' other lines;
//! - `floors: key Type`: run.json's `floors.key`, of `record::Type` (`Default` and
//!   `PartialEq`: a run that left it at its default records nothing for it);
//! - `figures: Type`: result.json's `figures.module` on its line, of `record::Type`;
//! - `flags: Type`: its `clap::Args`, of the module itself, with `over(&self, recorded) ->
//!   recorded` laying what was given over the recorded (or default) settings.
//!
//! The module itself provides `judge(&Evidence, &record::Floors) -> Option<Line>`,
//! `check(&record::Floors) -> Result<(), String>` (the bounds of a profile's or a run.json's
//! settings), `summary_table(&Verdict) -> String` (empty without its line) and
//! `prom_families(&mut Exposition, &Verdict)` and `cases() -> Vec<Case>` (its self-test
//! cases, built of `selftest::cases::{case, parts}`, which are data and never reach the
//! verdict). A name left out, or of the wrong type, does not compile.

pub mod goodput;

/// Whether a line's recorded settings are their default, so a run without the line records
/// nothing for it (run.json's `floors` skips them).
pub fn is_default<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}

/// Hands the list of line modules to `$then`, a macro of the caller's.
macro_rules! every_line {
    ($then:ident) => {
        $then! {
            goodput: Goodput after Latency {
                floors: slo SloFloors, figures: GoodputFigures, flags: SloArgs
            };
        }
    };
}
pub(crate) use every_line;
