//! The service level as flags (issue 37, item 4; docs/goodput.md): `--slo` and
//! `--min-goodput`, which `run` records in run.json's floors and `judge` overrides. Every value
//! is checked by its parser, before anything is held, started or created.

use clap::Args;

use super::record::{SloFloors, SloMetric, DEFAULT_MIN_GOODPUT, MOST_TARGET_MS};
use crate::args::duration::{duration_in, BareUnit};

/// The service level each reply is held to; each absent takes the run's recorded value
/// (`judge`), else none.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Floors and limits")]
pub struct SloArgs {
    /// The service level each judged reply is held to: a target for any of ttft, itl, tpot
    /// and e2el (as the latency line defines them; names in any case), each with its unit,
    /// e.g. ttft=600ms,tpot=50ms. A reply meets a target at or under it; the goodput line
    /// says the share of replies that met every target
    #[arg(long, value_name = "TARGETS", value_parser = parse_slo, allow_hyphen_values = true)]
    pub slo: Option<SloFloors>,
    /// With --slo: the least share of the judged replies that must meet every target, above 0
    /// and at most 1; the goodput line FAILs under it [default: 0.9]
    #[arg(long, value_name = "SHARE", value_parser = parse_min_goodput, allow_hyphen_values = true)]
    pub min_goodput: Option<f64>,
}

impl SloArgs {
    /// Lay these settings over `floors` (a run's recorded ones, or none): `--slo` replaces the
    /// targets as a whole, `--min-goodput` the share; with targets, the share is recorded
    /// whether given or not, so `judge` reads the run's own.
    pub fn over(&self, floors: SloFloors) -> SloFloors {
        let mut slo = match &self.slo {
            Some(given) => SloFloors {
                min_goodput: floors.min_goodput,
                ..given.clone()
            },
            None => floors,
        };
        if self.min_goodput.is_some() {
            slo.min_goodput = self.min_goodput;
        }
        if !slo.targets().is_empty() && slo.min_goodput.is_none() {
            slo.min_goodput = Some(DEFAULT_MIN_GOODPUT);
        }
        slo
    }
}

/// `--slo`: comma-separated `NAME=DURATION` targets, each name once, each duration with its
/// unit (a bare number could be read as seconds or milliseconds: the peers take ms, the gate's
/// old flags took either), above 0 and at most a day.
pub fn parse_slo(s: &str) -> Result<SloFloors, String> {
    if s.trim().is_empty() {
        return Err("--slo needs targets, e.g. ttft=600ms,tpot=50ms".to_string());
    }
    let mut slo = SloFloors::default();
    for item in s.split(',') {
        let (name, value) = item.split_once('=').ok_or_else(|| {
            format!(
                "{:?} is not a target: give NAME=DURATION, e.g. tpot=50ms",
                item.trim()
            )
        })?;
        let metric = SloMetric::from_name(name).ok_or_else(|| {
            format!(
                "{:?} is not a figure an SLO holds replies to: give ttft, itl, tpot or e2el",
                name.trim()
            )
        })?;
        let value = value.trim();
        if value.parse::<f64>().is_ok() {
            return Err(format!(
                "{metric}={value} has no unit: give one, e.g. {metric}={value}ms"
            ));
        }
        let bad = || {
            format!("{metric}={value}: a target is a time above 0 and at most 24h with its unit, e.g. {metric}=600ms")
        };
        if value.starts_with('-') {
            return Err(bad());
        }
        let ms = duration_in(value, BareUnit::Millis).map_err(|_| bad())?;
        if !(ms > 0.0 && ms <= MOST_TARGET_MS) {
            return Err(bad());
        }
        let slot = slo.target_mut(metric);
        if slot.is_some() {
            return Err(format!("{metric} is given twice: give each target once"));
        }
        *slot = Some(ms);
    }
    Ok(slo)
}

/// `--min-goodput`: a share above 0 and at most 1.
pub fn parse_min_goodput(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!(
            "{s:?} is not a share of replies above 0 and at most 1 (0.9 is 90%)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_with_their_units_in_any_case() {
        let s = parse_slo("TTFT=600ms, tpot=0.05s,E2el=2m,itl = 3.4ms").unwrap();
        assert_eq!(
            (s.ttft_ms, s.tpot_ms, s.e2el_ms, s.itl_ms, s.min_goodput),
            (Some(600.0), Some(50.0), Some(120_000.0), Some(3.4), None)
        );
        assert_eq!(parse_slo("e2el=24h").unwrap().e2el_ms, Some(MOST_TARGET_MS));
    }

    #[test]
    fn a_bad_slo_is_refused_with_what_to_give() {
        for (bad, says) in [
            ("", "needs targets"),
            ("ttft", "not a target: give NAME=DURATION"),
            (
                "speed=5ms",
                "\"speed\" is not a figure an SLO holds replies to",
            ),
            (
                "ttft=600",
                "ttft=600 has no unit: give one, e.g. ttft=600ms",
            ),
            ("ttft=0ms", "a target is a time above 0"),
            ("ttft=-5ms", "a target is a time above 0"),
            ("ttft=25h", "at most 24h"),
            ("ttft=soon", "a target is a time above 0"),
            ("ttft=600ms,TTFT=700ms", "ttft is given twice"),
            ("ttft=600ms,", "\"\" is not a target"),
        ] {
            let e = parse_slo(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains('\n'), "{bad:?}: one line: {e}");
        }
    }

    #[test]
    fn min_goodput_is_a_share_above_0_and_at_most_1() {
        assert_eq!(parse_min_goodput("1"), Ok(1.0));
        assert_eq!(parse_min_goodput("0.9"), Ok(0.9));
        for bad in ["0", "-0.1", "1.01", "NaN", "90%"] {
            assert!(parse_min_goodput(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_flags_lay_over_what_a_run_recorded() {
        let recorded = SloFloors {
            ttft_ms: Some(600.0),
            min_goodput: Some(0.8),
            ..SloFloors::default()
        };
        let none = SloArgs::default();
        assert_eq!(none.over(recorded.clone()), recorded);
        assert_eq!(none.over(SloFloors::default()), SloFloors::default());
        let replace = SloArgs {
            slo: Some(parse_slo("tpot=50ms").unwrap()),
            min_goodput: None,
        };
        let s = replace.over(recorded.clone());
        assert_eq!(
            (s.ttft_ms, s.tpot_ms, s.min_goodput),
            (None, Some(50.0), Some(0.8))
        );
        let fresh = replace.over(SloFloors::default());
        assert_eq!(fresh.min_goodput, Some(DEFAULT_MIN_GOODPUT));
        let min = SloArgs {
            slo: None,
            min_goodput: Some(0.5),
        };
        assert_eq!(min.over(recorded).min_goodput, Some(0.5));
        // Without targets the share stays as given, for the verdict's criteria to refuse.
        assert_eq!(min.over(SloFloors::default()).min_goodput, Some(0.5));
    }
}
