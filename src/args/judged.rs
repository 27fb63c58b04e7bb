//! The settings a verdict is judged by, declared once for `run` and `judge` alike: each flag's
//! group is flattened into both commands (so its name, help, bounds and profile key are one
//! declaration), and [`Judged::over`] is the one place each lands in the recorded
//! [`Floors`]. `run` lays them over [`run_floors`] (the defaults) and records the result in
//! run.json; `judge` lays them over what a run recorded, so a flag given to either means the
//! same. What only `judge` refuses (a burst floor for a run without bursts, `--deterministic`
//! for sampled answers) is checked where `judge` reads the archive.

use crate::archive::record::Floors;
use crate::args::context::ContextArgs;
use crate::args::footprint::FootprintArgs;
use crate::args::lines::LineArgs;
use crate::args::output_checks::OutputCheckArgs;
use crate::args::reference::ReferenceArgs;
use crate::args::run::{
    BaselineArgs, BurstFloorArgs, DeterminismArgs, DriftArgs, LimitArgs, RouteEvidenceArgs,
    RunArgs, DEFAULT_FIRST_TOKEN_MS, DEFAULT_FLOOR,
};

/// The floors a run starts from before its flags are laid over them: the rate floor and the
/// first-token limit at their defaults, and the drift limit recorded whether given or not, so
/// `judge` reads the run's own limit.
pub fn run_floors() -> Floors {
    Floors {
        floor: DEFAULT_FLOOR,
        first_token_ms: DEFAULT_FIRST_TOKEN_MS,
        max_drift: Some(crate::judging::drift::DEFAULT_MAX_DRIFT),
        ..Floors::default()
    }
}

/// Every group of flags a verdict is judged by, as `run` and `judge` each hold them.
pub struct Judged<'a> {
    pub limits: &'a LimitArgs,
    pub route: &'a RouteEvidenceArgs,
    pub baseline: &'a BaselineArgs,
    pub burst_floors: &'a BurstFloorArgs,
    pub drift: &'a DriftArgs,
    pub determinism: &'a DeterminismArgs,
    pub reference: &'a ReferenceArgs,
    pub output_checks: &'a OutputCheckArgs,
    pub footprint: &'a FootprintArgs,
    pub context: &'a ContextArgs,
    pub lines: &'a LineArgs,
}

/// The [`Judged`] view of a command's arguments (`run`'s or `judge`'s), whose groups carry the
/// same field names: the list of groups is written once, here.
macro_rules! judged_of {
    ($args:expr) => {
        $crate::args::judged::Judged {
            limits: &$args.limits,
            route: &$args.route,
            baseline: &$args.baseline,
            burst_floors: &$args.burst_floors,
            drift: &$args.drift,
            determinism: &$args.determinism,
            reference: &$args.reference,
            output_checks: &$args.output_checks,
            footprint: &$args.footprint,
            context: &$args.context,
            lines: &$args.lines,
        }
    };
}
pub(crate) use judged_of;

impl RunArgs {
    /// The flags the verdict is judged by, as `judge` overrides them.
    pub fn judged(&self) -> Judged<'_> {
        judged_of!(self)
    }
}

impl Judged<'_> {
    /// Lay the given settings over `floors` (the defaults, or a run's recorded ones): each one
    /// given wins, each one not given leaves what was there. Paths are as given.
    pub fn over(&self, mut floors: Floors) -> Floors {
        let Judged {
            limits,
            route,
            baseline,
            burst_floors,
            drift,
            determinism,
            reference,
            output_checks,
            footprint,
            context,
            lines,
        } = self;
        limits.over(&mut floors);
        route.over(&mut floors);
        baseline.over(&mut floors);
        burst_floors.over(&mut floors);
        drift.over(&mut floors);
        determinism.over(&mut floors);
        reference.over(&mut floors);
        floors.output = output_checks.over(floors.output);
        floors.footprint = footprint.over(std::mem::take(&mut floors.footprint));
        floors.context = context.over(std::mem::take(&mut floors.context));
        floors.lines = lines.over(std::mem::take(&mut floors.lines));
        floors
    }
}

/// `given`, where it was, over `field`.
fn set<T: Clone>(field: &mut T, given: &Option<T>) {
    if let Some(v) = given {
        *field = v.clone();
    }
}

/// `given`, where it was, over `field`, which records absence too.
fn set_some<T: Clone>(field: &mut Option<T>, given: &Option<T>) {
    if given.is_some() {
        field.clone_from(given);
    }
}

impl LimitArgs {
    fn over(&self, floors: &mut Floors) {
        let LimitArgs {
            floor,
            first_token_ms,
            first_token_of,
            fast_route,
            slow_route,
            busy_skip,
        } = self;
        set(&mut floors.floor, floor);
        set(&mut floors.first_token_ms, first_token_ms);
        set(&mut floors.first_token_of, first_token_of);
        set_some(&mut floors.fast_route, fast_route);
        set_some(&mut floors.slow_route, slow_route);
        set_some(&mut floors.busy_skip, busy_skip);
    }
}

impl RouteEvidenceArgs {
    fn over(&self, floors: &mut Floors) {
        let RouteEvidenceArgs {
            route_lib,
            no_route_lib,
            route_device,
            device_busy,
        } = self;
        set_some(&mut floors.route_lib, route_lib);
        set_some(&mut floors.no_route_lib, no_route_lib);
        set_some(&mut floors.route_device, route_device);
        set_some(&mut floors.device_busy, device_busy);
    }
}

impl BaselineArgs {
    fn over(&self, floors: &mut Floors) {
        let BaselineArgs {
            baseline,
            baseline_noise,
            max_regression,
            baseline_allow,
        } = self;
        if let Some(dir) = baseline {
            floors.baseline = Some(dir.display().to_string());
        }
        set_some(&mut floors.baseline_noise, baseline_noise);
        set_some(&mut floors.max_regression, max_regression);
        set(&mut floors.baseline_allow, baseline_allow);
    }
}

impl BurstFloorArgs {
    fn over(&self, floors: &mut Floors) {
        let BurstFloorArgs {
            aggregate_floor,
            min_speedup,
        } = self;
        set_some(&mut floors.aggregate_floor, aggregate_floor);
        set_some(&mut floors.min_speedup, min_speedup);
    }
}

impl DriftArgs {
    fn over(&self, floors: &mut Floors) {
        let DriftArgs { max_drift } = self;
        set_some(&mut floors.max_drift, max_drift);
    }
}

impl DeterminismArgs {
    fn over(&self, floors: &mut Floors) {
        let DeterminismArgs {
            deterministic,
            baseline_answers,
        } = self;
        // A switch: given, it holds; not given, the run's (or the default's) stands.
        if *deterministic {
            floors.deterministic = true;
        }
        set_some(&mut floors.baseline_answers, baseline_answers);
    }
}

impl ReferenceArgs {
    fn over(&self, floors: &mut Floors) {
        let ReferenceArgs {
            reference,
            reference_tie,
            min_agreement,
            max_logprob_drift,
            reference_reanchor,
            reference_noise,
            noise_factor,
        } = self;
        if let Some(dir) = reference {
            floors.reference = Some(dir.display().to_string());
        }
        set_some(&mut floors.reference_tie, reference_tie);
        set_some(&mut floors.min_agreement, min_agreement);
        set_some(&mut floors.max_logprob_drift, max_logprob_drift);
        // Past what the run recorded, no re-anchor is there to judge: the line says so.
        set_some(&mut floors.reference_reanchor, reference_reanchor);
        if !reference_noise.is_empty() {
            floors.reference_noise = reference_noise
                .iter()
                .map(|p| p.display().to_string())
                .collect();
        }
        set_some(&mut floors.noise_factor, noise_factor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::FirstTokenOf;
    use clap::{CommandFactory, FromArgMatches, Parser};

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        args: RunArgs,
    }

    fn run(argv: &[&str]) -> RunArgs {
        let m = Run::command()
            .try_get_matches_from(std::iter::once("run").chain(argv.iter().copied()))
            .unwrap();
        Run::from_arg_matches(&m).unwrap().args
    }

    /// The help's `[default: X]` is written by hand (the flag is absent unless given, so
    /// `judge` can tell); it must say what `run_floors` starts from.
    #[test]
    fn the_help_says_the_defaults_the_run_starts_from() {
        let command = Run::command();
        let help = |id: &str| {
            let arg = command.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.get_help().unwrap().to_string()
        };
        let f = run_floors();
        assert!(help("floor").ends_with(&format!("[default: {}]", f.floor)));
        assert!(help("first_token_ms").ends_with(&format!("[default: {}]", f.first_token_ms)));
        assert!(
            help("first_token_of").ends_with(&format!("[default: {}]", f.first_token_of.name()))
        );
    }

    /// Run with no flag records the defaults; each flag given lands in its own field, and
    /// laid over a run's recorded floors (as `judge` does) a flag not given leaves the run's.
    #[test]
    fn a_flag_given_wins_and_one_not_given_leaves_what_was_there() {
        let none = run(&[]);
        assert_eq!(none.judged().over(run_floors()), run_floors());
        let given = run(&[
            "--floor",
            "70",
            "--first-token-ms",
            "1s",
            "--first-token-of",
            "content",
            "--busy-skip",
            "0.2",
            "--route-lib",
            "npu",
            "--baseline-allow",
            "host,cpu",
            "--max-drift",
            "0.3",
            "--deterministic",
            "--min-agreement",
            "0.9",
            "--reference-noise",
            "a",
            "--reference-noise",
            "b",
        ]);
        let f = given.judged().over(run_floors());
        assert_eq!(f.floor, 70.0);
        assert_eq!(f.first_token_ms, 1000.0);
        assert_eq!(f.first_token_of, FirstTokenOf::Content);
        assert_eq!(f.busy_skip, Some(0.2));
        assert_eq!(f.route_lib.as_deref(), Some("npu"));
        assert_eq!(f.baseline_allow, ["host", "cpu"]);
        assert_eq!(f.max_drift, Some(0.3));
        assert!(f.deterministic);
        assert_eq!(f.min_agreement, Some(0.9));
        assert_eq!(f.reference_noise, ["a", "b"]);
        // Over that run's floors, nothing given changes nothing; one flag changes one field.
        assert_eq!(none.judged().over(f.clone()), f);
        let mut expected = f.clone();
        expected.floor = 5.0;
        assert_eq!(run(&["--floor", "5"]).judged().over(f), expected);
    }
}
