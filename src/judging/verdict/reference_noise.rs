//! The reference line held to known-good builds' own noise (`--reference-noise DIR`, issue
//! 52; docs/reference.md). A real NPU build differs from the CPU reference in every kernel,
//! so "how much difference is normal" is the whole question, and it depends on the model, its
//! quantisation and the prompts. AWS Neuron's logit validation answers it with three runs: a
//! baseline, a known-good build and the device under test, and passes the device when it
//! drifts from the baseline no more than the known-good build does. Here the known-good builds'
//! archives, run against the same reference, are walked as the candidate is, and each of the
//! candidate's figures over every position is held to the worst usable build's times a factor.
//!
//! Pure: the figures in, the rules' findings (and what the line says of the noise) out. The
//! walks are the reference line's ([`super::reference`]); a noise archive that cannot be
//! compared with the reference at all is refused before anything starts
//! ([`super::reference::noise_mismatch`]).

use super::words::plural;
use crate::archive::record::{NoiseFigures, PositionFigures, ReferenceFigures};
use crate::inert::one_line;
use crate::judging::latency::percentile;

/// `--noise-factor` when not given: a candidate's figure may reach twice the worst known-good
/// build's. The ladder in docs/reference.md puts the benign rungs within 1.2x of two noise
/// builds and every broken one past 4x on some figure.
pub const DEFAULT_NOISE_FACTOR: f64 = 2.0;

/// A known-good build's top token is the reference's at this share of positions or more: the
/// benign rungs of the ladder (docs/reference.md) are at 95.5% or more, the broken ones at
/// 91.7% or less, so a build under this one is no known-good build, whatever it is called.
pub const NOISE_LEAST_SAME_TOP: f64 = 0.90;

/// A known-good build goes hard at this many positions in 100 or fewer: the ladder's benign
/// rungs at none, its broken ones from 2.1.
pub const NOISE_MOST_HARD_PER_100: f64 = 5.0;

/// A side's figures over every position: `positions` judged, `agreed` on the top token,
/// `hard` divergences, and the KL divergence and |Δ logprob| of the reference's token at each
/// position measured (the same number of each).
pub fn position_figures(
    positions: usize,
    agreed: usize,
    hard: usize,
    kls: &[f64],
    deltas: &[f64],
) -> PositionFigures {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let per = |n: usize| (positions > 0).then(|| n as f64 / positions as f64);
    PositionFigures {
        positions,
        measured: kls.len().min(deltas.len()),
        same_top: per(agreed),
        kl_mean: mean(kls),
        kl_p99: percentile(kls, 99.0),
        delta_mean: mean(deltas),
        delta_p99: percentile(deltas, 99.0),
        hard_per_100: per(hard).map(|s| s * 100.0),
    }
}

/// Why a noise build's own figures are not a known-good build's noise, or `None`: it computed
/// what the reference did bit for bit (it measures no noise: any difference at all would
/// fail), or it is far outside what a known-good build shows (it is itself broken).
pub fn unusable_figures(f: &PositionFigures) -> Option<String> {
    if f.positions == 0 {
        return Some("no position judged".into());
    }
    if f.measured == 0 {
        return Some("no position with its logprobs at the reference's token starts".into());
    }
    let zero = |v: Option<f64>| v.is_some_and(|x| x == 0.0);
    if f.same_top == Some(1.0)
        && zero(f.hard_per_100)
        && zero(f.kl_mean)
        && zero(f.kl_p99)
        && zero(f.delta_mean)
        && zero(f.delta_p99)
    {
        return Some(
            "it computed what the reference did, bit for bit: it measures no noise (a known-good build on other kernels differs a little)".into(),
        );
    }
    if let Some(s) = f.same_top.filter(|&s| s < NOISE_LEAST_SAME_TOP) {
        return Some(format!(
            "its top token was the reference's at {:.1}% of positions, under the {:.0}% a known-good build shows: it is itself broken",
            s * 100.0,
            NOISE_LEAST_SAME_TOP * 100.0
        ));
    }
    if let Some(h) = f.hard_per_100.filter(|&h| h > NOISE_MOST_HARD_PER_100) {
        return Some(format!(
            "{h:.1} hard divergences per 100 positions, over the {NOISE_MOST_HARD_PER_100:.0} a known-good build shows: it is itself broken"
        ));
    }
    None
}

/// One figure the noise rules hold: its name as the line says it, how to read it from a side's
/// figures, the unit shown after it, and how many decimals.
struct Rule {
    name: &'static str,
    read: fn(&PositionFigures) -> Option<f64>,
    unit: &'static str,
    decimals: usize,
    /// Higher is better (the share of top tokens the reference's): the rule holds the share
    /// missed, `1 - x`, to the factor.
    higher_better: bool,
}

const RULES: [Rule; 6] = [
    Rule {
        name: "same top token",
        read: |f| f.same_top,
        unit: "%",
        decimals: 1,
        higher_better: true,
    },
    Rule {
        name: "KL mean",
        read: |f| f.kl_mean,
        unit: " nats",
        decimals: 4,
        higher_better: false,
    },
    Rule {
        name: "KL p99",
        read: |f| f.kl_p99,
        unit: " nats",
        decimals: 4,
        higher_better: false,
    },
    Rule {
        name: "|Δ logprob| of the reference's token, mean",
        read: |f| f.delta_mean,
        unit: " nats",
        decimals: 3,
        higher_better: false,
    },
    Rule {
        name: "|Δ logprob| of the reference's token, p99",
        read: |f| f.delta_p99,
        unit: " nats",
        decimals: 3,
        higher_better: false,
    },
    Rule {
        name: "hard divergences per 100 positions",
        read: |f| f.hard_per_100,
        unit: "",
        decimals: 2,
        higher_better: false,
    },
];

impl Rule {
    /// `x` as the line shows it.
    fn show(&self, x: f64) -> String {
        let x = if self.unit == "%" { x * 100.0 } else { x };
        format!("{x:.d$}{}", self.unit, d = self.decimals)
    }
}

/// The worst of the usable `noise` builds' figures, figure by figure (the lowest share of top
/// tokens, the highest of the rest): what the candidate's are held to, before the factor.
/// `None` when no build is usable.
pub fn worst_noise(noise: &[NoiseFigures]) -> Option<PositionFigures> {
    let usable: Vec<&PositionFigures> = noise
        .iter()
        .filter(|n| n.unusable.is_none())
        .filter_map(|n| n.figures.as_ref())
        .collect();
    let first = **usable.first()?;
    let worst = |pick: fn(&PositionFigures) -> Option<f64>, higher_better: bool| {
        let values = usable.iter().filter_map(|f| pick(f));
        if higher_better {
            values.reduce(f64::min)
        } else {
            values.reduce(f64::max)
        }
    };
    Some(PositionFigures {
        positions: first.positions,
        measured: usable.iter().map(|f| f.measured).min().unwrap_or(0),
        same_top: worst(|f| f.same_top, true),
        kl_mean: worst(|f| f.kl_mean, false),
        kl_p99: worst(|f| f.kl_p99, false),
        delta_mean: worst(|f| f.delta_mean, false),
        delta_p99: worst(|f| f.delta_p99, false),
        hard_per_100: worst(|f| f.hard_per_100, false),
    })
}

/// What the noise rules found: the figures that fail, and the candidate's figures set beside
/// the noise's, for the line.
#[derive(Debug, Clone, PartialEq)]
pub struct AgainstNoise {
    /// Each figure worse than the factor allows, said with both sides' values.
    pub fails: Vec<String>,
    /// Each figure, the candidate's beside the worst usable build's and the limit.
    pub beside: Vec<String>,
}

/// Hold the candidate's figures to the worst of the usable `noise` builds' (each without an
/// `unusable` reason) times `factor`: a figure past that fails. The share of top tokens is held
/// by the share missed (1 - x), so 96% against a noise of 98% at factor 2 is the limit. A
/// figure the candidate did not measure (no logprobs) where the noise did fails too: a missing
/// measurement is never a pass. `None` when no build is usable.
pub fn against_noise(
    candidate: &PositionFigures,
    noise: &[NoiseFigures],
    factor: f64,
) -> Option<AgainstNoise> {
    let usable: Vec<(&str, &PositionFigures)> = noise
        .iter()
        .filter(|n| n.unusable.is_none())
        .filter_map(|n| n.figures.as_ref().map(|f| (n.run.as_str(), f)))
        .collect();
    if usable.is_empty() {
        return None;
    }
    let mut out = AgainstNoise {
        fails: Vec::new(),
        beside: Vec::new(),
    };
    for rule in &RULES {
        // The worst usable build's value of this figure, as the share missed where higher is
        // better, and which build it was.
        let bad = |x: f64| if rule.higher_better { 1.0 - x } else { x };
        let Some((worst, run)) = usable
            .iter()
            .filter_map(|(run, f)| (rule.read)(f).map(|x| (bad(x), *run)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
        else {
            continue;
        };
        let limit = factor * worst;
        // Shown as the figure is, not as the share missed.
        let shown = |x: f64| rule.show(bad(x));
        match (rule.read)(candidate) {
            Some(x) if bad(x) <= limit => out.beside.push(format!(
                "{} {} (noise {}, {run})",
                rule.name,
                rule.show(x),
                shown(worst)
            )),
            Some(x) => out.fails.push(format!(
                "{} {} beyond the limit {}, {factor}x the noise's {}{} ({run})",
                rule.name,
                rule.show(x),
                shown(limit),
                if rule.higher_better { "distance from 100%, " } else { "" },
                shown(worst)
            )),
            None => out.fails.push(format!(
                "{} not measured here (no logprobs from the candidate at the reference's token starts), {} in the noise ({run})",
                rule.name,
                shown(worst)
            )),
        }
    }
    Some(out)
}

/// What the line says of the noise (`--reference-noise`): the candidate's figures beside the
/// worst usable build's and the builds not used, or why none could be; empty without noise.
pub(crate) fn noise_said(
    f: &ReferenceFigures,
    judged: Option<&AgainstNoise>,
    factor: f64,
) -> String {
    let unused: Vec<String> = f
        .noise
        .iter()
        .filter_map(|n| {
            n.unusable
                .as_ref()
                .map(|why| format!("{}: {why}", one_line(&n.run)))
        })
        .collect();
    match judged {
        Some(n) => {
            let mut said = format!(
                "; held to {factor}x the worst of {} (--reference-noise): {}",
                plural(f.noise.len() - unused.len(), "known-good build", "known-good builds"),
                n.beside.join(", ")
            );
            if !unused.is_empty() {
                said.push_str(&format!("; noise not used: {}", unused.join("; ")));
            }
            said
        }
        None if !f.noise.is_empty() => format!(
            "; the noise cannot be used ({}), so the line is judged by the tie margin alone and is at best inconclusive",
            unused.join("; ")
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    //! Each rule's boundary on figures made by hand, with the mutant the test catches named.
    use super::*;

    fn figures(same_top: f64, kl: f64, delta: f64, hard: f64) -> PositionFigures {
        PositionFigures {
            positions: 100,
            measured: 100,
            same_top: Some(same_top),
            kl_mean: Some(kl),
            kl_p99: Some(kl * 10.0),
            delta_mean: Some(delta),
            delta_p99: Some(delta * 10.0),
            hard_per_100: Some(hard),
        }
    }

    fn noise(run: &str, f: PositionFigures) -> NoiseFigures {
        NoiseFigures {
            run: run.into(),
            figures: Some(f),
            unusable: unusable_figures(&f),
        }
    }

    #[test]
    fn position_figures_are_means_p99_and_shares_of_every_position() {
        // Hyndman & Fan definition 7 over 1..=100: p99 = 99.01.
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let f = position_figures(200, 150, 3, &v, &v);
        assert_eq!(f.positions, 200);
        assert_eq!(f.measured, 100);
        assert_eq!(f.same_top, Some(0.75));
        assert_eq!(f.kl_mean, Some(50.5));
        assert!((f.kl_p99.unwrap() - 99.01).abs() < 1e-9);
        assert_eq!(f.delta_mean, Some(50.5));
        assert_eq!(f.hard_per_100, Some(1.5));
        let none = position_figures(0, 0, 0, &[], &[]);
        assert_eq!(none.same_top, None);
        assert_eq!(none.kl_mean, None);
        assert_eq!(none.hard_per_100, None);
    }

    #[test]
    fn a_candidate_inside_the_noise_is_ok_and_at_three_times_it_fails() {
        let n = [
            noise("a", figures(0.97, 0.004, 0.02, 0.5)),
            noise("b", figures(0.98, 0.003, 0.03, 0.0)),
        ];
        assert!(n.iter().all(|n| n.unusable.is_none()));
        let ok = against_noise(&figures(0.965, 0.005, 0.04, 0.8), &n, 2.0).unwrap();
        assert!(ok.fails.is_empty(), "{:?}", ok.fails);
        assert_eq!(ok.beside.len(), RULES.len());
        // The worst of the two builds is each figure's bound: b's |Δ| 0.03, a's KL 0.004.
        assert!(
            ok.beside[1].contains("noise 0.0040 nats, a"),
            "{:?}",
            ok.beside
        );
        assert!(
            ok.beside[3].contains("noise 0.030 nats, b"),
            "{:?}",
            ok.beside
        );
        // Three times the noise on every figure: each one fails.
        let bad = against_noise(&figures(0.91, 0.012, 0.09, 1.5), &n, 2.0).unwrap();
        assert_eq!(bad.fails.len(), RULES.len(), "{:?}", bad.fails);
        assert!(
            bad.fails[0]
                == "same top token 91.0% beyond the limit 94.0%, 2x the noise's distance from 100%, 97.0% (a)",
            "{:?}",
            bad.fails
        );
    }

    #[test]
    fn the_limit_is_the_factor_times_the_worst_and_reaching_it_is_ok() {
        // Catches `<=` -> `<` in the rule, and the factor left out.
        let n = [noise("a", figures(0.98, 0.004, 0.02, 0.5))];
        let at = against_noise(&figures(0.96, 0.008, 0.04, 1.0), &n, 2.0).unwrap();
        assert!(at.fails.is_empty(), "{:?}", at.fails);
        let past = against_noise(&figures(0.96, 0.00801, 0.04, 1.0), &n, 2.0).unwrap();
        assert_eq!(past.fails.len(), 2, "KL mean and p99: {:?}", past.fails);
        let wider = against_noise(&figures(0.96, 0.00801, 0.04, 1.0), &n, 3.0).unwrap();
        assert!(wider.fails.is_empty(), "{:?}", wider.fails);
    }

    #[test]
    fn the_worst_noise_is_each_figures_worst_of_the_usable_builds() {
        let n = [
            noise("a", figures(0.97, 0.004, 0.02, 0.5)),
            noise("b", figures(0.98, 0.003, 0.03, 0.0)),
            noise("broken", figures(0.5, 1.0, 1.0, 50.0)),
        ];
        let w = worst_noise(&n).unwrap();
        assert_eq!(w.same_top, Some(0.97));
        assert_eq!(w.kl_mean, Some(0.004));
        assert_eq!(w.delta_mean, Some(0.03));
        assert_eq!(w.hard_per_100, Some(0.5));
        assert_eq!(worst_noise(&n[2..]), None);
    }

    #[test]
    fn a_wider_noise_still_catches_a_hard_divergence_it_never_shows() {
        let n = [noise("wide", figures(0.95, 0.05, 0.2, 0.0))];
        let f = against_noise(&figures(0.99, 0.001, 0.01, 0.35), &n, 2.0).unwrap();
        assert_eq!(f.fails.len(), 1, "{:?}", f.fails);
        assert!(
            f.fails[0]
                == "hard divergences per 100 positions 0.35 beyond the limit 0.00, 2x the noise's 0.00 (wide)",
            "{:?}",
            f.fails
        );
    }

    #[test]
    fn a_figure_the_candidate_did_not_measure_fails() {
        let n = [noise("a", figures(0.97, 0.004, 0.02, 0.5))];
        let mut c = figures(0.97, 0.004, 0.02, 0.5);
        c.kl_mean = None;
        let f = against_noise(&c, &n, 2.0).unwrap();
        assert_eq!(f.fails.len(), 1);
        assert!(
            f.fails[0].contains("KL mean not measured here"),
            "{:?}",
            f.fails
        );
    }

    #[test]
    fn unusable_noise_is_said_and_never_a_bound() {
        let same = noise("same", figures(1.0, 0.0, 0.0, 0.0));
        assert!(same.unusable.as_deref().unwrap().contains("bit for bit"));
        // One figure off zero is noise (catches `&&` -> `||` in the bit-for-bit test).
        assert_eq!(unusable_figures(&figures(1.0, 0.0, 0.001, 0.0)), None);
        let broken = noise("broken", figures(0.899, 0.01, 0.1, 1.0));
        assert!(broken.unusable.as_deref().unwrap().contains("89.9%"));
        assert_eq!(unusable_figures(&figures(0.90, 0.01, 0.1, 5.0)), None);
        let hard = noise("hard", figures(0.95, 0.01, 0.1, 5.01));
        assert!(hard.unusable.as_deref().unwrap().contains("5.0 hard"));
        assert_eq!(
            against_noise(&figures(0.5, 1.0, 1.0, 9.0), &[same, broken, hard], 2.0),
            None
        );
        let empty = PositionFigures::default();
        assert!(unusable_figures(&empty).is_some());
    }
}
