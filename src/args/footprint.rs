//! The footprint's settings as flags (issue 34; docs/footprint.md): what the memory, startup
//! and cold-reply lines are held to, which `run` records and `judge` overrides
//! ([`FootprintArgs`]), and what only a live run does: the device's memory counter and the
//! reply after idle ([`FootprintRunArgs`]). Every value is checked by its parser, before
//! anything is held, started or created.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::archive::byte_size::parse_bytes;
use crate::archive::record::FootprintFloors;
use crate::args::duration::{duration_in, parse_millis, BareUnit};

/// `--memory-warm`'s most: a run that leaves out more judged replies than this judges no
/// growth worth the name.
pub const MAX_MEMORY_WARM: usize = 1000;
/// `--idle-probe`'s most: a day.
pub const MAX_IDLE_PROBE: Duration = Duration::from_secs(24 * 3600);

/// What the footprint lines are held to; each absent takes the run's recorded value (`judge`),
/// else its default.
#[derive(Debug, Clone, Default, Args)]
pub struct FootprintArgs {
    /// The most the serve's memory (RssAnon + VmSwap over its processes) may grow a reply,
    /// with a unit (1MiB, 512KiB, 300MB): the memory line FAILs when the 95% interval of
    /// Sen's slope lies above it [default: 1MiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub max_memory_growth: Option<f64>,
    /// The highest the serve's memory may peak, with a unit (8GiB)
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub max_serve_memory: Option<f64>,
    /// The highest the device's memory may peak, with a unit, where it is sampled
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub max_device_memory: Option<f64>,
    /// Judged replies left out before memory growth is counted (after the warm-ups):
    /// allocators and drivers settle, 0 to 1000 [default: 3]
    #[arg(long, value_name = "N", value_parser = parse_memory_warm, allow_hyphen_values = true)]
    pub memory_warm: Option<usize>,
    /// With --baseline: the largest rise of the serve's peak memory over the baseline's, a
    /// share (0.2 is 20%); without it the comparison is information
    #[arg(long, value_name = "SHARE", value_parser = parse_share_above_zero, allow_hyphen_values = true)]
    pub max_memory_regression: Option<f64>,
    /// The longest the launched serve may take from launch to ready (90s, 2m); --ready-timeout
    /// only ends the wait
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_millis, allow_hyphen_values = true)]
    pub ready_limit: Option<f64>,
    /// With --baseline: the largest rise of the time to ready over the baseline's, a share
    /// [default: 0.5]
    #[arg(long, value_name = "SHARE", value_parser = parse_share_above_zero, allow_hyphen_values = true)]
    pub max_startup_regression: Option<f64>,
    /// The longest the first reply's first token may take (the cold reply: the first warm-up
    /// when there are warm-ups); without it the cold reply is information
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_millis, allow_hyphen_values = true)]
    pub cold_first_token_ms: Option<f64>,
}

impl FootprintArgs {
    /// Lay these settings over `floors` (a run's recorded ones, or none): each given one wins.
    pub fn over(&self, floors: FootprintFloors) -> FootprintFloors {
        let FootprintArgs {
            max_memory_growth,
            max_serve_memory,
            max_device_memory,
            memory_warm,
            max_memory_regression,
            ready_limit,
            max_startup_regression,
            cold_first_token_ms,
        } = self.clone();
        FootprintFloors {
            max_memory_growth: max_memory_growth.or(floors.max_memory_growth),
            max_serve_memory: max_serve_memory.or(floors.max_serve_memory),
            max_device_memory: max_device_memory.or(floors.max_device_memory),
            memory_warm: memory_warm.or(floors.memory_warm),
            max_memory_regression: max_memory_regression.or(floors.max_memory_regression),
            ready_limit_ms: ready_limit.or(floors.ready_limit_ms),
            max_startup_regression: max_startup_regression.or(floors.max_startup_regression),
            cold_first_token_ms: cold_first_token_ms.or(floors.cold_first_token_ms),
        }
    }
}

/// What a device memory counter's number counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Serialize)]
pub enum MemoryUnit {
    /// Bytes (Intel's ivpu `npu_memory_utilization`).
    #[default]
    #[value(name = "bytes")]
    #[serde(rename = "bytes")]
    Bytes,
    /// Kibibytes, as /proc's `kB`.
    #[value(name = "KiB")]
    #[serde(rename = "KiB")]
    Kib,
}

impl MemoryUnit {
    /// Bytes in one of it.
    pub fn bytes(self) -> u64 {
        match self {
            MemoryUnit::Bytes => 1,
            MemoryUnit::Kib => 1024,
        }
    }
}

/// What only a live run does for the footprint.
#[derive(Debug, Clone, Default, Args)]
pub struct FootprintRunArgs {
    /// A file holding the device's memory in use (e.g. ivpu's
    /// /sys/class/accel/accel0/device/npu_memory_utilization), read on every sample and at
    /// each reply's end; it must read as a number when the run starts. Without it, the DRM
    /// fdinfo memory keys of the serve's /dev/dri and /dev/accel fds, where there are any
    #[arg(long, value_name = "FILE")]
    pub device_memory: Option<PathBuf>,
    /// What --device-memory's number counts
    #[arg(
        long,
        value_name = "UNIT",
        default_value = "bytes",
        requires = "device_memory"
    )]
    pub device_memory_unit: MemoryUnit,
    /// After the judged replies, wait DURATION with the serve idle (10s, 1m; at most 24h),
    /// then make one more reply, the probe: its first token is held to --first-token-ms and
    /// set beside the warm median in the idle line, never counted by rate or first-token
    #[arg(long, value_name = "DURATION", value_parser = parse_idle_probe, allow_hyphen_values = true)]
    pub idle_probe: Option<Duration>,
}

/// `--memory-warm`: 0 to [`MAX_MEMORY_WARM`].
pub fn parse_memory_warm(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if (0..=MAX_MEMORY_WARM as i64).contains(&n) => Ok(n as usize),
        _ => Err(format!(
            "{s:?} is not a count of replies from 0 to {MAX_MEMORY_WARM}"
        )),
    }
}

/// A share above 0, finite (a rise of 20% is 0.2; several times over is allowed).
pub fn share_above_zero(x: f64) -> Result<f64, String> {
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(format!("a share above 0, e.g. 0.2 for 20% (got {x})"))
    }
}

pub fn parse_share_above_zero(s: &str) -> Result<f64, String> {
    let x = s
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("{s:?} is not a number"))?;
    share_above_zero(x)
}

/// A duration above 0 in ms, finite.
pub fn parse_positive_millis(s: &str) -> Result<f64, String> {
    let ms = parse_millis(s)?;
    if ms.is_finite() && ms > 0.0 {
        Ok(ms)
    } else {
        Err(format!("{s:?} is not a duration above 0 (e.g. 500ms, 90s)"))
    }
}

/// `--idle-probe`: above 0, at most [`MAX_IDLE_PROBE`]; a bare number is seconds.
fn parse_idle_probe(s: &str) -> Result<Duration, String> {
    let seconds = duration_in(s, BareUnit::Seconds)?;
    idle_probe_in_bounds(s, seconds)
}

/// `--idle-probe`'s bounds, for the flag and the profile's key: `value` as `duration_in` read
/// it (seconds).
pub fn idle_probe_in_bounds(given: &str, seconds: f64) -> Result<Duration, String> {
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("{given:?} is not a wait above 0 (e.g. 10s, 1m)"));
    }
    let d = Duration::from_secs_f64(seconds);
    if d > MAX_IDLE_PROBE {
        return Err(format!(
            "{given:?} is over a day: the idle probe waits at most 24h"
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_of_each_flag() {
        assert_eq!(parse_memory_warm("0"), Ok(0));
        assert_eq!(parse_memory_warm("1000"), Ok(1000));
        for bad in ["-1", "1001", "x", "2.5"] {
            assert!(parse_memory_warm(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_share_above_zero("0.2"), Ok(0.2));
        for bad in ["0", "-0.1", "NaN", "inf", "x"] {
            assert!(parse_share_above_zero(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_positive_millis("90s"), Ok(90_000.0));
        for bad in ["0", "-5s", "NaN", "x"] {
            assert!(parse_positive_millis(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_idle_probe("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_idle_probe("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_idle_probe("24h"), Ok(MAX_IDLE_PROBE));
        let e = parse_idle_probe("25h").unwrap_err();
        assert!(e.contains("over a day"), "{e}");
        for bad in ["0", "-1s", "NaN", "x"] {
            assert!(parse_idle_probe(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn given_settings_lay_over_recorded_ones() {
        let recorded = FootprintFloors {
            max_memory_growth: Some(2.0),
            memory_warm: Some(5),
            ready_limit_ms: Some(1000.0),
            ..FootprintFloors::default()
        };
        let given = FootprintArgs {
            max_memory_growth: Some(4.0),
            cold_first_token_ms: Some(300.0),
            ..FootprintArgs::default()
        };
        let f = given.over(recorded);
        assert_eq!(f.max_memory_growth, Some(4.0));
        assert_eq!(f.memory_warm, Some(5));
        assert_eq!(f.ready_limit_ms, Some(1000.0));
        assert_eq!(f.cold_first_token_ms, Some(300.0));
        assert_eq!(f.max_serve_memory, None);
    }
}
