//! The reference a candidate's tokens are held to (`--reference`, issue 31; docs/reference.md),
//! and the bounds of its settings: `run` records them, `judge` overrides what a run recorded.
//! Kept apart from [`super::run`] so the reference's flags are one flattened struct.

use std::path::PathBuf;

use clap::Args;

/// The reference run and what its line holds the candidate to.
#[derive(Debug, Clone, Default, Args)]
pub struct ReferenceArgs {
    /// The archived run of a trusted build (llama.cpp's CPU backend with the same model, run
    /// with --logprobs K at temperature 0): each prompt's answer is compared with its answer,
    /// token by token, re-anchored past each divergence (--reference-reanchor).
    #[arg(long, value_name = "DIR")]
    pub reference: Option<PathBuf>,
    /// The margin in nats under which a divergence is a near-tie, not a FAIL [default: 0.5]
    #[arg(long, value_name = "NATS", value_parser = parse_tie, allow_negative_numbers = true)]
    pub reference_tie: Option<f64>,
    /// The lowest share of positions where both sides' first choice must be the same token,
    /// 0 to 1.
    #[arg(long, value_name = "SHARE", value_parser = parse_share, allow_negative_numbers = true)]
    pub min_agreement: Option<f64>,
    /// The highest p90 of the chosen tokens' |Δ logprob| against the reference, nats.
    #[arg(long, value_name = "NATS", value_parser = parse_drift, allow_negative_numbers = true)]
    pub max_logprob_drift: Option<f64>,
    /// The most re-anchors a prompt is judged past, 0 to 64: at a divergence the candidate is
    /// asked to go on from the reference's own answer through it, so the rest of the answer
    /// is judged too. 0 judges each prompt up to its first divergence [default: 8]
    #[arg(long, value_name = "N", value_parser = parse_reanchor, allow_negative_numbers = true)]
    pub reference_reanchor: Option<usize>,
    /// The archived run of a known-good build against the same reference (same prompts,
    /// max_tokens, temperature 0 and --logprobs K), repeatable: the candidate's figures over
    /// every position are held to the worst build's times --noise-factor, in place of the tie
    /// margin's rule. A build that is the reference bit for bit, or itself broken, is not used.
    #[arg(long, value_name = "DIR")]
    pub reference_noise: Vec<PathBuf>,
    /// How many times the worst --reference-noise build's figure the candidate's may reach,
    /// 1 or more [default: 2]
    #[arg(long, value_name = "X", value_parser = parse_noise_factor, allow_negative_numbers = true)]
    pub noise_factor: Option<f64>,
}

impl ReferenceArgs {
    /// The known-good builds asked for (`--reference-noise`), as the archive records them.
    pub fn noise_dirs(&self) -> Vec<String> {
        self.reference_noise
            .iter()
            .map(|dir| dir.display().to_string())
            .collect()
    }
}

use crate::judging::verdict::reference::MOST_REANCHOR;

/// `--reference-reanchor`: 0 to [`MOST_REANCHOR`].
pub fn reanchor(n: i64) -> Result<usize, String> {
    match usize::try_from(n) {
        Ok(n) if n <= MOST_REANCHOR => Ok(n),
        _ => Err(format!(
            "--reference-reanchor is a count of re-anchors a prompt, 0 to {MOST_REANCHOR} (got {n})"
        )),
    }
}

/// `--reference-tie`: nats, 0 or more.
pub fn tie(x: f64) -> Result<f64, String> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(format!(
            "--reference-tie is a margin in nats, 0 or more, e.g. 0.5 (got {x})"
        ))
    }
}

/// `--min-agreement`: a share from 0 to 1.
pub fn agreement_in_bounds(x: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!(
            "--min-agreement is a share from 0 to 1, e.g. 0.95 (got {x})"
        ))
    }
}

/// `--max-logprob-drift`: nats, 0 or more.
pub fn drift(x: f64) -> Result<f64, String> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(format!(
            "--max-logprob-drift is a p90 of |Δ logprob| in nats, 0 or more, e.g. 0.1 (got {x})"
        ))
    }
}

/// `--noise-factor`: a factor, 1 or more (under 1 a candidate would have to beat the noise).
pub fn noise_factor(x: f64) -> Result<f64, String> {
    if x.is_finite() && x >= 1.0 {
        Ok(x)
    } else {
        Err(format!(
            "--noise-factor is how many times the worst noise build's figure the candidate's may reach, 1 or more, e.g. 2 (got {x})"
        ))
    }
}

fn parse_noise_factor(s: &str) -> Result<f64, String> {
    noise_factor(number(s)?)
}

fn number(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .map_err(|_| format!("{s:?} is not a number"))
}

fn parse_reanchor(s: &str) -> Result<usize, String> {
    let n = s
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    reanchor(n)
}

fn parse_tie(s: &str) -> Result<f64, String> {
    tie(number(s)?)
}

fn parse_share(s: &str) -> Result<f64, String> {
    agreement_in_bounds(number(s)?)
}

fn parse_drift(s: &str) -> Result<f64, String> {
    drift(number(s)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_of_each_flag() {
        assert_eq!(parse_tie("0"), Ok(0.0));
        assert_eq!(parse_tie("0.5"), Ok(0.5));
        for bad in ["-0.1", "NaN", "inf", "x"] {
            assert!(parse_tie(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_share("0"), Ok(0.0));
        assert_eq!(parse_share("1"), Ok(1.0));
        for bad in ["-0.01", "1.01", "NaN"] {
            assert!(parse_share(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_drift("0.1"), Ok(0.1));
        assert!(parse_drift("-1").is_err());
        assert!(parse_drift("NaN").is_err());
        assert_eq!(parse_reanchor("0"), Ok(0));
        assert_eq!(parse_reanchor("64"), Ok(64));
        for bad in ["65", "-1", "1.5", "x"] {
            assert!(parse_reanchor(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_noise_factor("1"), Ok(1.0));
        assert_eq!(parse_noise_factor("2.5"), Ok(2.5));
        for bad in ["0.99", "-2", "NaN", "inf", "x"] {
            assert!(parse_noise_factor(bad).is_err(), "{bad}");
        }
    }
}
