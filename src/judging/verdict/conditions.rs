//! The box's conditions: how contended the box was while the replies ran, and the busy-box
//! note (and SKIP policy) a timing-only failure on a busy box gets. The load line itself is
//! built in [`super::judge`]. And the throttle line: what the samples showed of the CPUs' and
//! the device's throttling, which explains a drift but never excuses or fails anything.

use super::words::trimmed;
use crate::archive::check::Check;
use crate::archive::record::{
    DuringReplies, Line, LoadSnapshot, Sample, Status, ThrottleSummary, TopProcess,
};

/// The serve's CPU-wait fraction at or above which a box counts as busy.
pub const BUSY_WAIT_FRACTION: f64 = 0.10;
/// The load per CPU at or above which a box counts as busy, where the wait is not measurable.
pub const BUSY_LOAD_PER_CPU: f64 = 1.0;

/// The CPU, in percent of one CPU, that processes outside the serve's tree must have used over
/// the replies for a busy box to be blamed: half a CPU, or a tenth of the box's, whichever is
/// more. Less than that cannot have kept the serve from a CPU; its own processes did (a serve
/// whose 8 helpers spin waits for a CPU 90% of the time on a quiet box, and was once SKIPped).
pub fn outsiders_busy_pct(ncpu: usize) -> f64 {
    (10.0 * ncpu as f64).max(50.0)
}

/// The CPU the processes outside the serve's tree (and the gate) used over the replies, percent
/// of one CPU: as recorded, or for a run from before it was, the sum of its top users (a lower
/// bound). `None` when the run sampled nothing during the replies.
pub(crate) fn outsiders_pct(load: &LoadSnapshot) -> Option<f64> {
    let d = load.during.as_ref()?;
    Some(
        d.others_cpu_pct
            .unwrap_or_else(|| d.top.iter().map(|t| t.cpu_pct).sum()),
    )
}

/// Whether processes outside the serve's tree took enough CPU to blame the box: only then may
/// a busy box excuse a timing failure. A run that sampled nothing during the replies (one from
/// before the samples) is judged by its load alone, as it always was.
pub(crate) fn outsiders_took_it(load: &LoadSnapshot) -> bool {
    outsiders_pct(load).is_none_or(|pct| pct >= outsiders_busy_pct(load.ncpu))
}

/// How contended the box was, by the best measure the run has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Contention {
    /// The serve's CPU-wait fraction during the replies.
    Wait(f64),
    /// The highest 1-minute load per CPU, before or during the replies.
    LoadPerCpu(f64),
}

impl Contention {
    pub(crate) fn of(load: &LoadSnapshot) -> Option<Contention> {
        if let Some(w) = load.during.as_ref().and_then(|d| d.wait_fraction) {
            return Some(Contention::Wait(w));
        }
        if load.ncpu == 0 {
            return None;
        }
        let peak = load
            .during
            .as_ref()
            .map_or(load.load1, |d| d.load1_max.max(load.load1));
        Some(Contention::LoadPerCpu(peak / load.ncpu as f64))
    }

    pub(crate) fn value(&self) -> f64 {
        match *self {
            Contention::Wait(v) | Contention::LoadPerCpu(v) => v,
        }
    }

    /// The level at or above which this measure counts as busy: the `--busy-skip` threshold
    /// when one is given (one threshold decides both the note and the SKIP), else the
    /// default for the measure.
    pub(crate) fn busy_level(&self, busy_skip: Option<f64>) -> f64 {
        match (busy_skip, self) {
            (Some(t), _) => t,
            (None, Contention::Wait(_)) => BUSY_WAIT_FRACTION,
            (None, Contention::LoadPerCpu(_)) => BUSY_LOAD_PER_CPU,
        }
    }

    pub(crate) fn busy(&self, busy_skip: Option<f64>) -> bool {
        self.value() >= self.busy_level(busy_skip)
    }

    pub(crate) fn describe(&self) -> String {
        match *self {
            Contention::Wait(w) => format!(
                "the serve waited for a CPU {:.0}% of the time it was ready to run",
                w * 100.0
            ),
            Contention::LoadPerCpu(l) => format!("the load was {l:.1} per CPU"),
        }
    }

    pub(crate) fn level(&self, busy_skip: Option<f64>) -> String {
        let level = self.busy_level(busy_skip);
        match self {
            Contention::Wait(_) => format!("{}%", trimmed(level * 100.0, 2)),
            Contention::LoadPerCpu(_) => format!("{level:.1} per CPU"),
        }
    }
}

/// What the load line adds when only timing failed: whether the box or the serve is to blame.
pub(crate) fn busy_note(c: &Contention, load: &LoadSnapshot, busy_skip: Option<f64>) -> String {
    // The wait fraction is already on the line; the load fallback is not.
    let measure = match c {
        Contention::Wait(_) => String::new(),
        Contention::LoadPerCpu(_) => format!("{}, ", c.describe()),
    };
    if !c.busy(busy_skip) {
        return format!(
            "; the box was quiet ({measure}under the busy level of {}), so the slowness is the serve's own",
            c.level(busy_skip)
        );
    }
    if !outsiders_took_it(load) {
        return format!(
            "; {measure}but processes outside the serve's tree used only {:.0}% of one CPU during the replies (a busy box takes {:.0}%): the serve's own processes kept it from a CPU, so the slowness is the serve's own",
            outsiders_pct(load).unwrap_or(0.0),
            outsiders_busy_pct(load.ncpu)
        );
    }
    let mut note = format!(
        "; a busy box is the likely cause ({measure}at or above the busy level of {}): re-run on a quiet box",
        c.level(busy_skip)
    );
    let top: Vec<String> = load
        .during
        .iter()
        .flat_map(|d| d.top.iter().take(3))
        .map(|t| {
            let count = if t.count > 1 {
                format!(" x{}", t.count)
            } else {
                String::new()
            };
            format!("{}{count} {:.0}%", t.name, t.cpu_pct)
        })
        .collect();
    if !top.is_empty() {
        note.push_str(&format!(
            "; most CPU during the replies: {}",
            top.join(", ")
        ));
    }
    note
}

/// What `samples` showed of throttling (pure); `None` when no sample had any of it. The
/// sampler records it beside the samples, and the verdict recomputes it from them.
pub fn throttle_summary(samples: &[Sample]) -> Option<ThrottleSummary> {
    let counts: Vec<u64> = samples.iter().filter_map(|s| s.throttle_count).collect();
    let cpu: Vec<f64> = samples.iter().filter_map(|s| s.cpu_mhz).collect();
    let device: Vec<f64> = samples.iter().filter_map(|s| s.device_mhz).collect();
    let lowest = |v: &[f64]| v.iter().copied().reduce(f64::min);
    let highest = |v: Vec<f64>| v.into_iter().reduce(f64::max);
    let summary = ThrottleSummary {
        throttle_events: match (counts.first(), counts.last()) {
            (Some(first), Some(last)) if counts.len() >= 2 => Some(last.saturating_sub(*first)),
            _ => None,
        },
        cpu_mhz_first: cpu.first().copied(),
        cpu_mhz_lowest: lowest(&cpu),
        cpu_mhz_last: cpu.last().copied(),
        cpu_mhz_slowest: samples
            .iter()
            .filter_map(|s| s.cpu_mhz_min)
            .reduce(f64::min),
        temp_c_max: highest(samples.iter().filter_map(|s| s.temp_c).collect()),
        device_mhz_first: device.first().copied(),
        device_mhz_lowest: lowest(&device),
        device_mhz_last: device.last().copied(),
        device_temp_c_max: highest(samples.iter().filter_map(|s| s.device_temp_c).collect()),
    };
    (summary != ThrottleSummary::default()).then_some(summary)
}

/// A clock's course over the replies in words: `2400 -> 1800 MHz (lowest 1750)`, or
/// `2400 MHz throughout` when it held.
fn clock_words(first: f64, lowest: f64, last: f64) -> String {
    let mhz = |x: f64| format!("{x:.0}");
    let (first, lowest, last) = (mhz(first), mhz(lowest), mhz(last));
    if first == last && lowest == first {
        return format!("{first} MHz throughout");
    }
    let dip = if lowest == first || lowest == last {
        String::new()
    } else {
        format!(" (lowest {lowest})")
    };
    format!("{first} -> {last} MHz{dip}")
}

/// The `throttle` line (issue 20, item 3): what the samples during the replies showed of the
/// CPUs' throttle counters, their clock, the hottest thermal zone and the device's clock and
/// temperature, only what was seen. Always info: throttling explains a drift, it neither
/// excuses nor fails a run. `None` when nothing was seen at all.
pub fn throttle_line(during: &DuringReplies) -> Option<Line> {
    let t = throttle_summary(&during.samples)?;
    let mut parts = Vec::new();
    match t.throttle_events {
        Some(0) => {
            parts.push("the CPUs' thermal throttle counters did not rise during the replies".into())
        }
        Some(n) => parts.push(format!(
            "the CPUs' thermal throttle counters rose by {n} during the replies"
        )),
        None => {}
    }
    if let (Some(first), Some(lowest), Some(last)) =
        (t.cpu_mhz_first, t.cpu_mhz_lowest, t.cpu_mhz_last)
    {
        let slowest = t
            .cpu_mhz_slowest
            .map_or(String::new(), |s| format!(", slowest CPU {s:.0} MHz"));
        parts.push(format!(
            "CPU clock {}{slowest}",
            clock_words(first, lowest, last)
        ));
    }
    if let Some(c) = t.temp_c_max {
        parts.push(format!("hottest zone {c:.0} °C"));
    }
    let mut device = Vec::new();
    if let (Some(first), Some(lowest), Some(last)) =
        (t.device_mhz_first, t.device_mhz_lowest, t.device_mhz_last)
    {
        device.push(format!("device clock {}", clock_words(first, lowest, last)));
    }
    if let Some(c) = t.device_temp_c_max {
        device.push(format!("device {c:.0} °C"));
    }
    if !device.is_empty() {
        parts.push(device.join(", "));
    }
    Some(Line {
        check: Check::Throttle,
        status: Status::Info,
        text: parts.join("; "),
        figures: None,
    })
}

/// The summary of a window's samples, taken every `interval_ms`: the highest load and CPU
/// pressure, the serve's CPU time and wait (`serve_totals`, ns), the busiest processes and the
/// throttling seen. The sampler's window is summed up here, and so is a hand-made run's.
pub fn summarize(
    samples: &[Sample],
    seconds: f64,
    serve_totals: Option<(u64, u64)>,
    top: Vec<TopProcess>,
    interval_ms: u64,
) -> DuringReplies {
    let load1_max = samples.iter().map(|s| s.load1).fold(0.0, f64::max);
    let cpu_some_avg10_max = samples
        .iter()
        .filter_map(|s| s.cpu_some_avg10)
        .reduce(f64::max);
    let (serve_cpu_s, serve_wait_s, wait_fraction) = match serve_totals {
        Some((cpu, wait)) if cpu + wait > 0 => (
            Some(cpu as f64 / 1e9),
            Some(wait as f64 / 1e9),
            Some(wait as f64 / (cpu + wait) as f64),
        ),
        Some((cpu, wait)) => (Some(cpu as f64 / 1e9), Some(wait as f64 / 1e9), None),
        None => (None, None, None),
    };
    DuringReplies {
        interval_ms,
        started_ns: None,
        seconds,
        load1_max,
        cpu_some_avg10_max,
        serve_cpu_s,
        serve_wait_s,
        wait_fraction,
        top,
        others_cpu_pct: None,
        throttle: throttle_summary(samples),
        samples: samples.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: f64) -> Sample {
        Sample::bare(t_ms)
    }

    fn during(samples: Vec<Sample>) -> DuringReplies {
        DuringReplies::of(samples)
    }

    /// A run that throttled: counts 100 -> 112, the CPUs' mean clock 2400 -> 1750 -> 1800,
    /// the zones up to 78 °C, the NPU 1000 -> 300 MHz and 71 °C.
    fn throttled() -> Vec<Sample> {
        [
            (Some(100), 2400.0, 2200.0, 61.0, Some(1000.0), Some(55.0)),
            (Some(105), 1750.0, 800.0, 78.4, Some(300.0), Some(71.2)),
            (None, 1800.0, 1700.0, 77.0, None, None),
            (Some(112), 1800.0, 1600.0, 76.0, Some(300.0), Some(70.0)),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (count, mean, min, zone, dev_mhz, dev_c))| Sample {
            throttle_count: count,
            cpu_mhz: Some(mean),
            cpu_mhz_min: Some(min),
            temp_c: Some(zone),
            device_mhz: dev_mhz,
            device_temp_c: dev_c,
            ..sample(i as f64 * 250.0)
        })
        .collect()
    }

    #[test]
    fn the_summary_takes_first_lowest_last_and_the_highest() {
        let t = throttle_summary(&throttled()).unwrap();
        assert_eq!(t.throttle_events, Some(12), "last count less first");
        assert_eq!(
            (t.cpu_mhz_first, t.cpu_mhz_lowest, t.cpu_mhz_last),
            (Some(2400.0), Some(1750.0), Some(1800.0))
        );
        assert_eq!(t.cpu_mhz_slowest, Some(800.0));
        assert_eq!(t.temp_c_max, Some(78.4));
        assert_eq!(
            (t.device_mhz_first, t.device_mhz_lowest, t.device_mhz_last),
            (Some(1000.0), Some(300.0), Some(300.0))
        );
        assert_eq!(t.device_temp_c_max, Some(71.2));
    }

    #[test]
    fn the_summary_says_only_what_was_seen() {
        assert_eq!(throttle_summary(&[]), None);
        assert_eq!(
            throttle_summary(&[sample(0.0), sample(250.0)]),
            None,
            "no figures, no summary"
        );
        // One count is no rise: no events rather than a zero.
        let one = [
            Sample {
                throttle_count: Some(7),
                ..sample(0.0)
            },
            sample(250.0),
        ];
        let t = throttle_summary(&one);
        assert_eq!(t, None, "{t:?}");
        let device_only = [Sample {
            device_temp_c: Some(60.0),
            ..sample(0.0)
        }];
        let t = throttle_summary(&device_only).unwrap();
        assert_eq!(t.device_temp_c_max, Some(60.0));
        assert_eq!(
            (t.throttle_events, t.cpu_mhz_first, t.temp_c_max),
            (None, None, None)
        );
        // A counter that went back (a CPU went offline) is no negative count of events.
        let back = [
            Sample {
                throttle_count: Some(9),
                ..sample(0.0)
            },
            Sample {
                throttle_count: Some(4),
                ..sample(250.0)
            },
        ];
        assert_eq!(throttle_summary(&back).unwrap().throttle_events, Some(0));
    }

    #[test]
    fn the_throttle_line_says_in_plain_words_what_throttled() {
        let l = throttle_line(&during(throttled())).unwrap();
        assert_eq!(l.check, "throttle");
        assert_eq!(l.status, Status::Info, "throttling explains, never fails");
        assert_eq!(
            l.text,
            "the CPUs' thermal throttle counters rose by 12 during the replies; \
             CPU clock 2400 -> 1800 MHz (lowest 1750), slowest CPU 800 MHz; hottest zone 78 °C; \
             device clock 1000 -> 300 MHz, device 71 °C"
        );
        // The recorded summary is not trusted: the line is the samples'.
        let mut d = during(throttled());
        d.throttle = Some(ThrottleSummary {
            throttle_events: Some(999),
            ..Default::default()
        });
        assert_eq!(throttle_line(&d).unwrap().text, l.text);
    }

    #[test]
    fn a_steady_box_reads_as_steady_and_an_empty_one_has_no_line() {
        let steady: Vec<Sample> = (0..3)
            .map(|i| Sample {
                throttle_count: Some(4),
                cpu_mhz: Some(2400.0),
                ..sample(i as f64 * 250.0)
            })
            .collect();
        assert_eq!(
            throttle_line(&during(steady)).unwrap().text,
            "the CPUs' thermal throttle counters did not rise during the replies; CPU clock 2400 MHz throughout"
        );
        let device = vec![
            Sample {
                device_mhz: Some(800.0),
                ..sample(0.0)
            },
            Sample {
                device_mhz: Some(1000.0),
                ..sample(250.0)
            },
        ];
        assert_eq!(
            throttle_line(&during(device)).unwrap().text,
            "device clock 800 -> 1000 MHz"
        );
        assert_eq!(
            throttle_line(&during(vec![sample(0.0), sample(250.0)])),
            None
        );
        assert_eq!(throttle_line(&during(vec![])), None);
    }
}
