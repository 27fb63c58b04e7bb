//! The criteria a run is judged by: [`Floors`] checked, with the route patterns compiled
//! ([`Criteria`]), and where `--device-busy` reads the device's busy counter ([`BusySource`]).

use std::fmt;

use anyhow::{bail, Result};
use regex::Regex;

use super::{output, reference};
use crate::archive::record::Floors;
use crate::judging::serve_log::LogScan;
use crate::prompts::regex_problem;

/// The largest `--min-speedup`: a burst has at most 1,024 streams.
pub const MAX_SPEEDUP: f64 = 1024.0;

/// [`Floors`], checked and with the route patterns compiled.
#[derive(Debug, Clone)]
pub struct Criteria {
    floors: Floors,
    fast: Option<Regex>,
    slow: Option<Regex>,
    route_lib: Option<Regex>,
    no_route_lib: Option<Regex>,
    route_device: Option<Regex>,
    device_busy: Option<BusySource>,
}

/// Where `--device-busy` reads the device's busy counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusySource {
    /// A file holding a number, e.g. intel_vpu's `npu_busy_time_us` in sysfs.
    File(String),
    /// `fdinfo:KEY`: the number after `KEY:` in /proc/PID/fdinfo/FD of each file
    /// `--route-device` matched, summed (DRM's `drm-engine-<name>: N ns`).
    Fdinfo(String),
}

/// As `--device-busy` takes it, and as route.json's `counter.source` records it: the path, or
/// `fdinfo:KEY`.
impl fmt::Display for BusySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusySource::File(path) => f.write_str(path),
            BusySource::Fdinfo(key) => write!(f, "fdinfo:{key}"),
        }
    }
}

impl BusySource {
    /// Read `--device-busy SOURCE`.
    pub fn parse(source: &str) -> Result<BusySource> {
        match source.strip_prefix("fdinfo:") {
            Some(key) => {
                let key = key.trim();
                if key.is_empty() || key.contains(char::is_whitespace) || key.contains(':') {
                    bail!("--device-busy fdinfo:KEY needs the key of an fdinfo line, e.g. fdinfo:drm-engine-npu (got {source:?})");
                }
                Ok(BusySource::Fdinfo(key.to_string()))
            }
            None if source.trim().is_empty() => {
                bail!("--device-busy needs a counter file or fdinfo:KEY (got an empty value)")
            }
            None => Ok(BusySource::File(source.to_string())),
        }
    }
}

impl Criteria {
    /// Check the floors make sense and compile the route patterns.
    pub fn new(floors: Floors) -> Result<Self> {
        check_run_floors(&floors)?;
        check_comparison_bounds(&floors)?;
        check_line_bounds(&floors)?;
        check_reference_bounds(&floors)?;
        if let (Some(lib), Some(no_lib)) = (&floors.route_lib, &floors.no_route_lib) {
            if lib == no_lib {
                bail!("--route-lib and --no-route-lib are the same pattern /{lib}/: no serve could pass the route");
            }
        }
        let compile = |flag: &str, p: &Option<String>| -> Result<Option<Regex>> {
            p.as_deref()
                .map(|p| {
                    Regex::new(p).map_err(|e| {
                        anyhow::anyhow!("{flag} {p:?} is not a valid regex: {}", regex_problem(&e))
                    })
                })
                .transpose()
        };
        let device_busy = floors
            .device_busy
            .as_deref()
            .map(BusySource::parse)
            .transpose()?;
        if let (Some(BusySource::Fdinfo(key)), None) = (&device_busy, &floors.route_device) {
            bail!("--device-busy fdinfo:{key} reads the fdinfo of the device file the serve holds open: give --route-device REGEX to say which file");
        }
        Ok(Criteria {
            fast: compile("--fast-route", &floors.fast_route)?,
            slow: compile("--slow-route", &floors.slow_route)?,
            route_lib: compile("--route-lib", &floors.route_lib)?,
            no_route_lib: compile("--no-route-lib", &floors.no_route_lib)?,
            route_device: compile("--route-device", &floors.route_device)?,
            device_busy,
            floors,
        })
    }

    /// The floors these criteria were built from.
    pub fn floors(&self) -> &Floors {
        &self.floors
    }

    /// The pattern the serve log must name for the fast route (`--fast-route`).
    pub fn fast(&self) -> Option<&Regex> {
        self.fast.as_ref()
    }

    /// The pattern the serve log must not name: the slow route (`--slow-route`).
    pub fn slow(&self) -> Option<&Regex> {
        self.slow.as_ref()
    }

    /// The pattern a library the serve maps must match (`--route-lib`).
    pub fn route_lib(&self) -> Option<&Regex> {
        self.route_lib.as_ref()
    }

    /// The pattern no library the serve maps may match (`--no-route-lib`).
    pub fn no_route_lib(&self) -> Option<&Regex> {
        self.no_route_lib.as_ref()
    }

    /// The pattern a file held open must match to be the device (`--route-device`).
    pub fn route_device(&self) -> Option<&Regex> {
        self.route_device.as_ref()
    }

    /// The patterns the route evidence is matched against (`--route-lib`, `--no-route-lib`,
    /// `--route-device`): names that match are kept first in what a process is seen to hold.
    pub fn route_patterns(&self) -> Vec<Regex> {
        [&self.route_lib, &self.no_route_lib, &self.route_device]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// Where the device's busy counter is read (`--device-busy`).
    pub fn device_busy(&self) -> Option<&BusySource> {
        self.device_busy.as_ref()
    }

    /// Whether any route evidence is asked of the serve's processes.
    pub fn wants_process_evidence(&self) -> bool {
        self.route_lib.is_some()
            || self.no_route_lib.is_some()
            || self.route_device.is_some()
            || self.device_busy.is_some()
    }

    /// Scan a serve log for these criteria's route patterns, as a stream.
    pub fn scan_log(&self, log: impl std::io::Read) -> std::io::Result<LogScan> {
        LogScan::read(log, self.fast.as_ref(), self.slow.as_ref())
    }

    /// Scan a serve log already in memory (hand-made runs).
    pub fn scan_log_text(&self, log: &str) -> LogScan {
        LogScan::of_text(log, self.fast.as_ref(), self.slow.as_ref())
    }
}

/// The run's own floors (decode rate, first token, busy-skip, the bursts', drift) and the
/// log's two route patterns apart. These and the checks after them run in the order the
/// flags always were, so that of several wrong the one named is the same.
fn check_run_floors(floors: &Floors) -> Result<()> {
    if !floors.floor.is_finite() || floors.floor < 0.0 {
        bail!(
            "--floor must be a number of tok/s, 0 or more (got {})",
            floors.floor
        );
    }
    if !floors.first_token_ms.is_finite() || floors.first_token_ms <= 0.0 {
        bail!(
            "--first-token-ms must be a number of ms above 0 (got {})",
            floors.first_token_ms
        );
    }
    if let Some(t) = floors.busy_skip {
        if !t.is_finite() || !(0.0..=1.0).contains(&t) {
            bail!(
                "--busy-skip is a share from 0 to 1 (got {t}): 0.2 means 20% of the time the serve was ready to run"
            );
        }
    }
    if let (Some(fast), Some(slow)) = (&floors.fast_route, &floors.slow_route) {
        if fast == slow {
            bail!("--fast-route and --slow-route are the same pattern /{fast}/: no log could pass the route");
        }
    }
    if let Some(x) = floors.aggregate_floor {
        if !x.is_finite() || x <= 0.0 {
            bail!("--aggregate-floor must be a number of tok/s above 0 (got {x})");
        }
    }
    if let Some(x) = floors.min_speedup {
        if !x.is_finite() || x <= 0.0 || x > MAX_SPEEDUP {
            bail!("--min-speedup is how many times the single-stream rate the bursts must reach, above 0 and at most {MAX_SPEEDUP} (got {x})");
        }
    }
    if let Some(x) = floors.max_drift {
        if !(x > 0.0 && x < 1.0) {
            bail!("--max-drift is a share above 0 and below 1, e.g. 0.10 for a fall of 10% over the run (got {x})");
        }
    }
    Ok(())
}

/// The bounds of the comparisons with a baseline (noise, largest regression, the box
/// differences allowed) and with a reference (tie margin, agreement).
fn check_comparison_bounds(floors: &Floors) -> Result<()> {
    let noise = floors
        .baseline_noise
        .unwrap_or(crate::judging::baseline::DEFAULT_NOISE);
    let max = floors
        .max_regression
        .unwrap_or(crate::judging::baseline::DEFAULT_MAX_REGRESSION);
    for (flag, x) in [("--baseline-noise", noise), ("--max-regression", max)] {
        if !(x > 0.0 && x < 0.5) {
            bail!("{flag} is a share above 0 and below 0.5, e.g. 0.03 for 3% (got {x})");
        }
    }
    if noise >= max {
        bail!("--baseline-noise {noise} must be below --max-regression {max}: a change beyond noise is what a regression is measured from");
    }
    if let Some(bad) = floors
        .baseline_allow
        .iter()
        .find(|a| crate::judging::provenance::BoxFact::from_name(a).is_none())
    {
        bail!(
            "--baseline-allow {bad:?} is not a difference the gate knows; give some of {}",
            crate::judging::provenance::BoxFact::ALL
                .map(|f| f.name())
                .join(", ")
        );
    }
    // Bounds as the flags hold them (args::reference), for a profile's or an archive's.
    if let Some(x) = floors.reference_tie {
        if !(x.is_finite() && x >= 0.0) {
            bail!("--reference-tie is a margin in nats, 0 or more, e.g. 0.5 (got {x})");
        }
    }
    if let Some(x) = floors.min_agreement {
        if !(0.0..=1.0).contains(&x) {
            bail!("--min-agreement is a share from 0 to 1, e.g. 0.95 (got {x})");
        }
    }
    Ok(())
}

/// The bounds of each line module's recorded settings ([`crate::lines`]), in the registry's
/// order: the first out of bounds, said as its flag would say it.
macro_rules! line_module_bounds {
    ($($module:ident: $check:ident after $after:ident {
        floors: $key:ident $floors:ident, figures: $figures:ident, flags: $flags:ident
    };)*) => {
        fn line_module_bounds(floors: &Floors) -> std::result::Result<(), String> {
            $(crate::lines::$module::check(&floors.lines.$key)?;)*
            Ok(())
        }
    };
}
crate::lines::every_line!(line_module_bounds);

/// The bounds of the output, footprint, goodput and context lines' own thresholds.
fn check_line_bounds(floors: &Floors) -> Result<()> {
    if let Err(why) = output::check(&floors.output) {
        bail!("{why}");
    }
    if let Err(why) = footprint_bounds(&floors.footprint) {
        bail!("{why}");
    }
    if let Err(why) = line_module_bounds(floors) {
        bail!("{why}");
    }
    for (flag, x) in [
        ("--prefill-floor", floors.context.prefill_floor),
        ("--depth-floor", floors.context.depth_floor),
    ] {
        if let Some(x) = x.filter(|x| !(x.is_finite() && *x > 0.0)) {
            bail!("{flag} is a rate above 0 in tok/s (got {x})");
        }
    }
    Ok(())
}

/// The reference's re-anchors, its noise builds and their factor, and the logprob drift.
fn check_reference_bounds(floors: &Floors) -> Result<()> {
    if let Some(n) = floors.reference_reanchor {
        if n > reference::MOST_REANCHOR {
            bail!(
                "--reference-reanchor is a count of re-anchors a prompt, 0 to {} (got {n})",
                reference::MOST_REANCHOR
            );
        }
    }
    if !floors.reference_noise.is_empty() && floors.reference.is_none() {
        bail!("--reference-noise is known-good builds' runs against a reference, whose noise the candidate is held to: give --reference DIR with it");
    }
    if let Some(x) = floors.noise_factor {
        if !(x.is_finite() && x >= 1.0) {
            bail!("--noise-factor is how many times the worst noise build's figure the candidate's may reach, 1 or more, e.g. 2 (got {x})");
        }
        if floors.reference_noise.is_empty() {
            bail!("--noise-factor scales the noise of --reference-noise builds: give --reference-noise DIR with it");
        }
    }
    if let Some(x) = floors.max_logprob_drift {
        if !(x.is_finite() && x >= 0.0) {
            bail!("--max-logprob-drift is a p90 of |Δ logprob| in nats, 0 or more (got {x})");
        }
    }
    Ok(())
}

/// The footprint's settings as the flags hold them (a profile's, or a run.json edited by
/// hand, to the same bounds): the first one out, in the flag's words.
fn footprint_bounds(f: &crate::archive::record::FootprintFloors) -> Result<(), String> {
    let size = |flag: &str, x: Option<f64>| match x {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(format!(
            "{flag} is a size, 0 or more, e.g. 1MiB (got {x} bytes)"
        )),
        _ => Ok(()),
    };
    let above_zero = |flag: &str, what: &str, x: Option<f64>| match x {
        Some(x) if !(x.is_finite() && x > 0.0) => Err(format!("{flag} is {what} (got {x})")),
        _ => Ok(()),
    };
    size("--max-memory-growth", f.max_memory_growth)?;
    size("--max-serve-memory", f.max_serve_memory)?;
    size("--max-device-memory", f.max_device_memory)?;
    above_zero(
        "--max-memory-regression",
        "a share above 0, e.g. 0.2",
        f.max_memory_regression,
    )?;
    above_zero(
        "--max-startup-regression",
        "a share above 0, e.g. 0.5",
        f.max_startup_regression,
    )?;
    above_zero("--ready-limit", "a time above 0 in ms", f.ready_limit_ms)?;
    above_zero(
        "--cold-first-token-ms",
        "a time above 0 in ms",
        f.cold_first_token_ms,
    )?;
    match f.memory_warm {
        Some(n) if n > 1000 => Err(format!(
            "--memory-warm is a count of replies from 0 to 1000 (got {n})"
        )),
        _ => Ok(()),
    }
}
