//! The reference line's figures over every position as a Markdown table for the step summary
//! (issue 52): the candidate's beside the worst usable noise build's and the limit the factor
//! sets (`--reference-noise`), so a reviewer sees how far inside or outside the noise it was.

use std::fmt::Write as _;

use crate::archive::check::Check;
use crate::archive::record::{PositionFigures, ReferenceFigures};
use crate::judging::verdict::reference_noise::worst_noise;
use crate::judging::verdict::Verdict;

/// Each figure's name in the table, how to read it, whether higher is better, and how it is
/// shown.
type Row = (
    &'static str,
    fn(&PositionFigures) -> Option<f64>,
    bool,
    fn(f64) -> String,
);

const ROWS: [Row; 6] = [
    (
        "same top token",
        |f| f.same_top,
        true,
        |x| format!("{:.1}%", x * 100.0),
    ),
    (
        "KL mean (nats)",
        |f| f.kl_mean,
        false,
        |x| format!("{x:.4}"),
    ),
    ("KL p99 (nats)", |f| f.kl_p99, false, |x| format!("{x:.4}")),
    (
        "\\|Δ logprob\\| of the reference's token, mean (nats)",
        |f| f.delta_mean,
        false,
        |x| format!("{x:.3}"),
    ),
    (
        "\\|Δ logprob\\| of the reference's token, p99 (nats)",
        |f| f.delta_p99,
        false,
        |x| format!("{x:.3}"),
    ),
    (
        "hard divergences per 100 positions",
        |f| f.hard_per_100,
        false,
        |x| format!("{x:.2}"),
    ),
];

/// The table, or empty without the reference line's figures over every position.
pub fn reference_table(v: &Verdict) -> String {
    let Some(r) = v
        .lines
        .iter()
        .find(|l| l.check == Check::Reference)
        .and_then(|l| l.figures.as_ref())
        .and_then(|f| f.reference.as_ref())
    else {
        return String::new();
    };
    let Some(every) = r.every_position else {
        return String::new();
    };
    table(r, &every)
}

fn table(r: &ReferenceFigures, every: &PositionFigures) -> String {
    let noise = worst_noise(&r.noise);
    let factor = r.noise_factor;
    let dash = || "-".to_string();
    let mut md = match (&noise, factor) {
        (Some(_), Some(k)) => format!(
            "\n| reference, over every position | candidate | worst noise build | limit ({k}x) |\n| --- | --- | --- | --- |\n"
        ),
        _ => String::from("\n| reference, over every position | candidate |\n| --- | --- |\n"),
    };
    for (name, read, higher_better, show) in ROWS {
        let here = read(every).map_or_else(dash, show);
        match (&noise, factor) {
            (Some(n), Some(k)) => {
                let worst = read(n);
                let limit = worst.map(|w| {
                    if higher_better {
                        1.0 - k * (1.0 - w)
                    } else {
                        k * w
                    }
                });
                let _ = writeln!(
                    md,
                    "| {name} | {here} | {} | {} |",
                    worst.map_or_else(dash, show),
                    limit.map_or_else(dash, show)
                );
            }
            _ => {
                let _ = writeln!(md, "| {name} | {here} |");
            }
        }
    }
    let _ = writeln!(
        md,
        "\n{} of {} positions measured; {} of {} noise builds usable.",
        every.measured,
        every.positions,
        r.noise.iter().filter(|n| n.unusable.is_none()).count(),
        r.noise.len()
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::NoiseFigures;

    fn f(same_top: f64, kl: f64) -> PositionFigures {
        PositionFigures {
            positions: 100,
            measured: 90,
            same_top: Some(same_top),
            kl_mean: Some(kl),
            kl_p99: Some(kl * 10.0),
            delta_mean: Some(0.1),
            delta_p99: Some(0.5),
            hard_per_100: Some(1.0),
        }
    }

    #[test]
    fn the_candidate_beside_the_worst_noise_and_the_limit() {
        let r = ReferenceFigures {
            noise: vec![
                NoiseFigures {
                    run: "a".into(),
                    figures: Some(f(0.98, 0.002)),
                    unusable: None,
                },
                NoiseFigures {
                    run: "b".into(),
                    figures: None,
                    unusable: Some("no logprobs".into()),
                },
            ],
            noise_factor: Some(2.0),
            ..ReferenceFigures::default()
        };
        let md = table(&r, &f(0.97, 0.003));
        assert!(
            md.contains("| same top token | 97.0% | 98.0% | 96.0% |"),
            "{md}"
        );
        assert!(
            md.contains("| KL mean (nats) | 0.0030 | 0.0020 | 0.0040 |"),
            "{md}"
        );
        assert!(
            md.contains("90 of 100 positions measured; 1 of 2 noise builds usable."),
            "{md}"
        );
        let alone = table(&ReferenceFigures::default(), &f(0.97, 0.003));
        assert!(alone.contains("| same top token | 97.0% |\n"), "{alone}");
    }
}
