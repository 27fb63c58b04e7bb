//! The box's conditions (load.json): its load averages before the serve, and what was sampled
//! of the box and the serve during the replies (CPU wait, pressure, throttling, clocks,
//! temperatures, the other processes that used the CPU).

use serde::{Deserialize, Serialize};

/// The box's load, as the kernel's load averages give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSnapshot {
    /// 1-minute load average.
    pub load1: f64,
    /// 5-minute load average.
    pub load5: f64,
    /// 15-minute load average.
    pub load15: f64,
    /// CPUs the box has.
    pub ncpu: usize,
    /// When it was taken, e.g. `before-serve`.
    pub taken: String,
    /// The box and the serve during the replies, where they were sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<DuringReplies>,
}

/// One look at the box and the serve during the replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Milliseconds since the replies began.
    pub t_ms: f64,
    /// The box's 1-minute load average.
    pub load1: f64,
    /// `/proc/pressure/cpu` `some avg10` (percent), where the kernel has it.
    pub cpu_some_avg10: Option<f64>,
    /// CPU time of the serve's threads since the replies began, ns.
    pub serve_cpu_ns: Option<u64>,
    /// Run-queue wait of the serve's threads since the replies began, ns.
    pub serve_wait_ns: Option<u64>,
    /// The CPUs' thermal throttle events so far: the sum over CPUs of
    /// `thermal_throttle/core_throttle_count` and `package_throttle_count`, where the box has
    /// them (x86 only). A rise between two samples is a throttle event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle_count: Option<u64>,
    /// The CPUs' mean current frequency (cpufreq `scaling_cur_freq`), MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<f64>,
    /// The slowest CPU's current frequency, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_min: Option<f64>,
    /// The hottest thermal zone (`/sys/class/thermal/thermal_zone*/temp`), degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f64>,
    /// `--device-freq`'s reading, MHz (devfreq `cur_freq` is in Hz).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz: Option<f64>,
    /// `--device-temp`'s reading, degrees Celsius (hwmon `temp*_input` is in millidegrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_temp_c: Option<f64>,
    /// The serve's memory (and the device's) at this look (issue 34); absent where nothing
    /// was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::archive::record::footprint::MemoryReading>,
}

impl Sample {
    /// A look at `t_ms` with a load of 0.5 and nothing else read: the blank hand-made runs
    /// (tests, the self-test's cases) fill in.
    pub fn bare(t_ms: f64) -> Sample {
        Sample {
            t_ms,
            load1: 0.5,
            cpu_some_avg10: None,
            serve_cpu_ns: None,
            serve_wait_ns: None,
            throttle_count: None,
            cpu_mhz: None,
            cpu_mhz_min: None,
            temp_c: None,
            device_mhz: None,
            device_temp_c: None,
            memory: None,
        }
    }
}

#[cfg(test)]
impl DuringReplies {
    /// One second of `samples` at 250 ms on a quiet box, nothing summarised: the tests' blank.
    pub fn of(samples: Vec<Sample>) -> DuringReplies {
        DuringReplies {
            interval_ms: 250,
            started_ns: None,
            seconds: 1.0,
            load1_max: 0.5,
            cpu_some_avg10_max: None,
            serve_cpu_s: None,
            serve_wait_s: None,
            wait_fraction: None,
            top: vec![],
            others_cpu_pct: None,
            throttle: None,
            samples,
        }
    }
}

/// A process name that used CPU during the replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopProcess {
    /// Process name.
    pub name: String,
    /// How many processes of that name.
    pub count: usize,
    /// CPU used, percent of one CPU, over the replies.
    pub cpu_pct: f64,
}

/// What the replies ran beside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DuringReplies {
    /// Sampling interval, ms.
    pub interval_ms: u64,
    /// When sampling began, ns since the run's clock base (the replies' clock): a sample at
    /// `t_ms` was taken at `started_ns + t_ms * 1e6`. Absent in runs from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ns: Option<u64>,
    /// Seconds the replies took.
    pub seconds: f64,
    /// Highest 1-minute load average seen.
    pub load1_max: f64,
    /// Highest CPU pressure (`some avg10`, percent) seen, where the kernel has it.
    pub cpu_some_avg10_max: Option<f64>,
    /// CPU seconds the serve's threads used.
    pub serve_cpu_s: Option<f64>,
    /// Seconds the serve's threads waited for a CPU while ready to run.
    pub serve_wait_s: Option<f64>,
    /// serve_wait / (serve_wait + serve_cpu): of the time the serve was ready to run, the share
    /// it spent waiting for a CPU.
    pub wait_fraction: Option<f64>,
    /// Other processes that used the most CPU (not the serve, not the gate), most first.
    pub top: Vec<TopProcess>,
    /// The CPU every process outside the serve's tree and the gate used over the replies,
    /// percent of one CPU (all of them, not only `top`): what a busy box took from the serve.
    /// Absent in runs from before it; the sum of `top` then stands for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cpu_pct: Option<f64>,
    /// What the samples showed of throttling, where they showed any (for readers; the
    /// verdict recomputes it from `samples`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<ThrottleSummary>,
    /// Every sample.
    pub samples: Vec<Sample>,
}

/// What the samples of a run showed of throttling: each figure only where some sample had it.
/// "first" and "last" are the first and last samples that had the figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThrottleSummary {
    /// The rise of the CPUs' throttle count ([`Sample::throttle_count`]) from the first
    /// sample that had it to the last; from two samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle_events: Option<u64>,
    /// The CPUs' mean clock at the first sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_first: Option<f64>,
    /// The lowest mean clock of any sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_lowest: Option<f64>,
    /// The mean clock at the last sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_last: Option<f64>,
    /// The slowest any one CPU ran at any sample, MHz (an idle CPU's clock drops too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_slowest: Option<f64>,
    /// The hottest thermal zone at any sample, degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c_max: Option<f64>,
    /// The device's clock at the first sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz_first: Option<f64>,
    /// The device's lowest clock at any sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz_lowest: Option<f64>,
    /// The device's clock at the last sample, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mhz_last: Option<f64>,
    /// The device's highest temperature at any sample, degrees Celsius.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_temp_c_max: Option<f64>,
}
