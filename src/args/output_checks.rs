//! The output line's settings (issue 32; docs/output.md) as flags: `run` records them, `judge`
//! overrides what a run recorded, a profile fills them in. Bounds are the judging code's own
//! ([`output::check`]), so a profile's or an archive's values are held to the same.

use clap::{Args, ValueEnum};

use crate::archive::record::OutputFloors;
use crate::judging::verdict::output;

/// Whether the output line judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputChecks {
    /// Degenerate text FAILs.
    On,
    /// The line is info: for a serve meant to repeat (a benchmark mode ignoring end tokens).
    Off,
}

/// The output line's thresholds.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputCheckArgs {
    /// Whether degenerate answers (loops, stutters, text that is not text, one answer to
    /// different questions, never stopping) FAIL the output line, or are only said
    /// [default: on]
    #[arg(long, value_name = "on|off")]
    pub output_checks: Option<OutputChecks>,
    /// The least share of a reply a loop at its tail covers to fail it, 0 to 1 [default: 0.5]
    #[arg(long, value_name = "SHARE", value_parser = parse_share, allow_negative_numbers = true)]
    pub loop_share: Option<f64>,
    /// The least whole repeats of a loop's unit, 2 to 100 [default: 3]
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub loop_repeats: Option<usize>,
    /// The least run of one word back to back that is a stutter, 2 to 100 [default: 4]
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub stutter_run: Option<usize>,
    /// The largest share of a reply's characters that may be U+FFFD or control characters,
    /// 0 to 1 [default: 0.01]
    #[arg(long, value_name = "SHARE", value_parser = parse_share, allow_negative_numbers = true)]
    pub not_text_share: Option<f64>,
    /// The similarity (word-trigram Jaccard, 1 for the same text) from which two prompts'
    /// answers are one answer, 0 to 1 [default: 0.9]
    #[arg(long, value_name = "SHARE", value_parser = parse_share, allow_negative_numbers = true)]
    pub same_answer: Option<f64>,
    /// With --reference or --baseline: the largest relative difference of the mean answer
    /// length from theirs, 0 to 1, MLPerf TEST09's [default: 0.10]
    #[arg(long, value_name = "SHARE", value_parser = parse_share, allow_negative_numbers = true)]
    pub length_share: Option<f64>,
    /// With --reference or --baseline: the largest fall of the share of replies that stopped
    /// by themselves against theirs, 0 to 1 [default: 0.2]
    #[arg(long, value_name = "SHARE", value_parser = parse_share, allow_negative_numbers = true)]
    pub stop_margin: Option<f64>,
}

impl OutputCheckArgs {
    /// Lay these settings over `floors` (a run's recorded ones, or the defaults): each given
    /// one wins.
    pub fn over(&self, mut floors: OutputFloors) -> OutputFloors {
        if let Some(c) = self.output_checks {
            floors.off = c == OutputChecks::Off;
        }
        let OutputCheckArgs {
            output_checks: _,
            loop_share,
            loop_repeats,
            stutter_run,
            not_text_share,
            same_answer,
            length_share,
            stop_margin,
        } = self.clone();
        floors.loop_share = loop_share.or(floors.loop_share);
        floors.loop_repeats = loop_repeats.or(floors.loop_repeats);
        floors.stutter_run = stutter_run.or(floors.stutter_run);
        floors.not_text_share = not_text_share.or(floors.not_text_share);
        floors.same_answer = same_answer.or(floors.same_answer);
        floors.length_share = length_share.or(floors.length_share);
        floors.stop_margin = stop_margin.or(floors.stop_margin);
        floors
    }
}

/// A share from 0 to 1.
pub fn share_in_bounds(x: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("a share from 0 to 1, e.g. 0.5 (got {x})"))
    }
}

/// A count from 2 to 100.
pub fn count(n: i64) -> Result<usize, String> {
    match usize::try_from(n) {
        Ok(n) if (2..=100).contains(&n) => Ok(n),
        _ => Err(format!("a count from 2 to 100 (got {n})")),
    }
}

fn parse_share(s: &str) -> Result<f64, String> {
    let x = s
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("{s:?} is not a number"))?;
    share_in_bounds(x)
}

fn parse_count(s: &str) -> Result<usize, String> {
    let n = s
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    count(n)
}

/// The bounds of recorded or profile settings, as the flags hold them: the first one out.
pub fn check(f: &OutputFloors) -> Result<(), String> {
    output::check(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_of_each_flag() {
        assert_eq!(parse_share("0"), Ok(0.0));
        assert_eq!(parse_share("1"), Ok(1.0));
        for bad in ["-0.1", "1.5", "NaN", "x"] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_count("2"), Ok(2));
        assert_eq!(parse_count("100"), Ok(100));
        for bad in ["1", "101", "-3", "2.5"] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn given_settings_lay_over_recorded_ones() {
        let recorded = OutputFloors {
            loop_share: Some(0.7),
            stutter_run: Some(6),
            ..OutputFloors::default()
        };
        let given = OutputCheckArgs {
            output_checks: Some(OutputChecks::Off),
            stutter_run: Some(5),
            ..OutputCheckArgs::default()
        };
        let f = given.over(recorded);
        assert!(f.off);
        assert_eq!((f.loop_share, f.stutter_run), (Some(0.7), Some(5)));
    }
}
