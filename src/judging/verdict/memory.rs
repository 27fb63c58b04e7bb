//! The memory lines (issue 34; docs/footprint.md): whether the serve's memory, and the
//! device's where it was sampled, grows a reply after a warm baseline (Sen's slope and its 95%
//! interval over the readings at the counted replies' ends), how high it peaked, and how both
//! compare with the baseline's. Never excused by load: a busy box does not allocate memory.

use crate::archive::byte_size::{said, MIB};
use crate::archive::record::{
    Check, Figures, FootprintFigures, FootprintFloors, Line, MemoryReading, ReplyRecord, Sample,
    Status,
};
use crate::judging::growth::{sen_interval, thin_evenly, SenFit, MIN_VALUES};
use crate::judging::verdict::words::plural;

/// `--max-memory-growth`'s default: 1 MiB a reply. Public leak reports run from about 3 MB a
/// request (llama.cpp#27725) to 126 MiB (llama.cpp#27894); an allocator's noise over a run
/// of replies is far below it.
pub const DEFAULT_MAX_GROWTH: f64 = MIB;
/// `--memory-warm`'s default: the judged replies left out before growth is counted.
pub const DEFAULT_WARM: usize = 3;
/// The most readings a slope is fitted on: a day's soak is thinned evenly to these (its
/// pairwise slopes are n^2 / 2).
pub const MOST_VALUES: usize = 1000;
/// The confidence of the slope's interval.
const CONFIDENCE: f64 = 0.95;

/// Which memory a line judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// The serve's: RssAnon + VmSwap over its processes.
    Serve,
    /// The device's: `--device-memory`'s counter, else the DRM fdinfo keys.
    Device,
}

impl Memory {
    fn of(self, r: &MemoryReading) -> Option<f64> {
        match self {
            Memory::Serve => Some(r.serve_bytes() as f64),
            Memory::Device => r.device_bytes().map(|b| b as f64),
        }
    }

    fn check(self) -> Check {
        match self {
            Memory::Serve => Check::Memory,
            Memory::Device => Check::DeviceMemory,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Memory::Serve => "serve memory",
            Memory::Device => "device memory",
        }
    }
}

/// What a run's readings show of one memory: every reading's peak, and the readings at the
/// counted replies' ends (after the warm-ups and `warm` judged replies, the idle probe left
/// out) as (reply index, bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The highest reading of any sample or reply end.
    pub peak: Option<f64>,
    /// The highest RssFile of any reading (the serve's; the model's mapped pages).
    pub file_peak: Option<f64>,
    /// Every reply's reading at its end, warm ones and the probe included, in order.
    pub reply_ends: Vec<[f64; 2]>,
    /// The counted replies' readings, in order.
    pub counted: Vec<(f64, f64)>,
    /// The judged replies left out as warm.
    pub warm: usize,
}

impl Series {
    /// The series of `memory` in a run's `replies` (all of them: warm-ups and the probe are
    /// told by their flags) and conditions `samples`.
    pub fn of(memory: Memory, replies: &[ReplyRecord], samples: &[Sample], warm: usize) -> Self {
        let readings = samples
            .iter()
            .filter_map(|s| s.memory.as_ref())
            .chain(replies.iter().filter_map(|r| r.memory.as_ref()));
        let peak = readings
            .clone()
            .filter_map(|r| memory.of(r))
            .reduce(f64::max);
        let file_peak = match memory {
            Memory::Serve => readings.map(|r| r.rss_file as f64).reduce(f64::max),
            Memory::Device => None,
        };
        let reading = |r: &ReplyRecord| r.memory.as_ref().and_then(|m| memory.of(m));
        let reply_ends = replies
            .iter()
            .filter_map(|r| reading(r).map(|b| [r.index as f64, b]))
            .collect();
        let counted = replies
            .iter()
            .filter(|r| !r.set_apart())
            .skip(warm)
            .filter_map(|r| reading(r).map(|b| (r.index as f64, b)))
            .collect();
        Series {
            peak,
            file_peak,
            reply_ends,
            counted,
            warm,
        }
    }

    /// Sen's slope a reply and its interval, over at most [`MOST_VALUES`] of the counted
    /// readings; `None` with fewer than the fit needs.
    pub fn fit(&self) -> Option<SenFit> {
        let keep = thin_evenly(self.counted.len(), MOST_VALUES);
        let (t, x): (Vec<f64>, Vec<f64>) = keep.iter().map(|&i| self.counted[i]).unzip();
        sen_interval(&t, &x, CONFIDENCE)
    }
}

/// A growth in `unit` (bytes in one), signed, without the unit's name: `+0.02`, `-12.5`.
fn signed(x: f64, unit: f64) -> String {
    let decimals = if unit >= MIB { 2 } else { 1 };
    format!("{:+.decimals$}", x / unit)
}

/// The unit growth figures are said in: MiB where any is a hundredth of one, else KiB.
fn growth_unit(values: &[f64]) -> (f64, &'static str) {
    if values.iter().any(|v| v.abs() >= 0.01 * MIB) {
        (MIB, "MiB")
    } else {
        (1024.0, "KiB")
    }
}

/// The memory line, or the device-memory line (`memory`), of a run's `replies` and `samples`;
/// `None` for device memory where none was sampled.
pub fn memory_line(
    memory: Memory,
    replies: &[ReplyRecord],
    samples: &[Sample],
    floors: &FootprintFloors,
) -> Option<Line> {
    let warm = floors.memory_warm.unwrap_or(DEFAULT_WARM);
    let series = Series::of(memory, replies, samples, warm);
    let peak = series.peak?;
    let max_growth = floors.max_memory_growth.unwrap_or(DEFAULT_MAX_GROWTH);
    let max_peak = match memory {
        Memory::Serve => floors.max_serve_memory,
        Memory::Device => floors.max_device_memory,
    };
    let over_peak = max_peak.is_some_and(|m| peak > m);
    let mut text = format!("{} {} peak", memory.name(), said(peak));
    if let Some(m) = max_peak {
        text.push_str(&format!(
            " ({} the limit of {})",
            if over_peak { "over" } else { "within" },
            said(m)
        ));
    }
    let fit = series.fit();
    let mut status = if over_peak { Status::Fail } else { Status::Ok };
    match &fit {
        Some(f) => {
            let (unit, name) = growth_unit(&[f.slope, f.low, f.high]);
            let grows = f.low > max_growth;
            let verdict = if grows {
                status = Status::Fail;
                format!("grows by more than {} a reply", said(max_growth))
            } else if f.low > 0.0 {
                format!("grows, by less than {} a reply", said(max_growth))
            } else {
                "no growth".to_string()
            };
            text.push_str(&format!(
                "; {} {name} a reply (95% interval {} to {}) over {} after {} warm: {verdict}",
                signed(f.slope, unit),
                signed(f.low, unit),
                signed(f.high, unit),
                plural(series.counted.len(), "reply", "replies"),
                series.warm,
            ));
        }
        None => {
            if !over_peak {
                status = Status::Info;
            }
            text.push_str(&format!(
                "; growth not judged: {} after {} warm, {MIN_VALUES} needed",
                plural(series.counted.len(), "reply", "replies"),
                series.warm
            ));
        }
    }
    if let Some(file) = series.file_peak.filter(|f| *f > 0.0) {
        text.push_str(&format!("; mapped files {} peak, not counted", said(file)));
    }
    let figures = FootprintFigures {
        peak_bytes: Some(peak),
        file_peak_bytes: series.file_peak,
        growth_bytes_per_reply: fit.map(|f| f.slope),
        growth_interval_95: fit.map(|f| [f.low, f.high]),
        counted: Some(series.counted.len()),
        warm: Some(series.warm),
        max_growth: Some(max_growth),
        max_peak,
        reply_end_bytes: series.reply_ends,
        ..FootprintFigures::default()
    };
    Some(Line::new(memory.check(), status, text).with(Figures {
        footprint: Some(figures),
        ..Figures::default()
    }))
}

/// The serve memory line where nothing was read: why, said once. `launched` says whether the
/// gate launched the serve (an attached one's processes are not its to read). Information,
/// unless a peak limit was given (`--max-serve-memory`): a limit nobody could check is
/// inconclusive, never a pass.
pub fn not_read_line(launched: bool, floors: &FootprintFloors) -> Line {
    let why = if launched {
        "serve memory not read: none is recorded (a run from before it was, or /proc showed none of the serve's processes)"
    } else {
        "serve memory not read: the serve was attached, not launched, so its processes are not the gate's to find"
    };
    match floors.max_serve_memory {
        Some(m) => Line::new(
            Check::Memory,
            Status::Inconclusive,
            format!("{why}; --max-serve-memory {} could not be held to", said(m)),
        ),
        None => Line::new(Check::Memory, Status::Info, why),
    }
}

/// What the memory line adds when the device's memory was not sampled: said once, never a
/// zero.
pub const DEVICE_NOT_EXPOSED: &str = "device memory not exposed (no DRM fdinfo memory keys on the serve's /dev/dri or /dev/accel fds, no --device-memory)";

/// The baseline-memory line: the candidate's serve memory peak and growth beside the
/// baseline's; info, or FAIL over `--max-memory-regression` where given.
pub fn baseline_memory_line(
    candidate: (&[ReplyRecord], &[Sample]),
    baseline: (&[ReplyRecord], &[Sample]),
    floors: &FootprintFloors,
) -> Option<Line> {
    let warm = floors.memory_warm.unwrap_or(DEFAULT_WARM);
    let ours = Series::of(Memory::Serve, candidate.0, candidate.1, warm);
    let peak = ours.peak?;
    let theirs = Series::of(Memory::Serve, baseline.0, baseline.1, warm);
    let Some(their_peak) = theirs.peak else {
        return Some(Line::new(
            Check::BaselineMemory,
            Status::Info,
            format!(
                "serve memory {} peak; the baseline recorded no serve memory to compare with",
                said(peak)
            ),
        ));
    };
    let (slope, their_slope) = (ours.fit().map(|f| f.slope), theirs.fit().map(|f| f.slope));
    let ratio = (their_peak > 0.0).then(|| peak / their_peak);
    let limit = floors.max_memory_regression;
    let over = matches!((ratio, limit), (Some(r), Some(m)) if r - 1.0 > m);
    let status = match (limit, over) {
        (None, _) => Status::Info,
        (Some(_), true) => Status::Fail,
        (Some(_), false) => Status::Ok,
    };
    let mut text = format!(
        "peak {} against the baseline's {}",
        said(peak),
        said(their_peak)
    );
    if let Some(r) = ratio {
        text.push_str(&format!(" ({:+.0}%", (r - 1.0) * 100.0));
        if let Some(m) = limit {
            text.push_str(&format!("; limit +{:.0}%", m * 100.0));
        }
        text.push(')');
    }
    let growth = |s: Option<f64>| {
        s.map_or("not judged".to_string(), |v| {
            let (unit, name) = growth_unit(&[v]);
            format!("{} {name}", signed(v, unit))
        })
    };
    text.push_str(&format!(
        "; growth {} a reply against {}",
        growth(slope),
        growth(their_slope)
    ));
    Some(
        Line::new(Check::BaselineMemory, status, text).with(Figures {
            ratio,
            footprint: Some(FootprintFigures {
                peak_bytes: Some(peak),
                growth_bytes_per_reply: slope,
                baseline_peak_bytes: Some(their_peak),
                baseline_growth_bytes_per_reply: their_slope,
                max_regression: limit,
                ..FootprintFigures::default()
            }),
            ..Figures::default()
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::cases::reply;

    /// 100 tok/s, the first token at 200 ms.
    fn good() -> ReplyRecord {
        let at: Vec<u64> = (0..11).map(|i| 200 + 10 * i).collect();
        reply(&at, "Paris.")
    }

    const MB: u64 = 1 << 20;

    /// `n` replies (indexes from 1) whose serve memory at their end is `bytes(i)` (i from 0),
    /// with a model of 1 GiB mapped.
    fn run(n: usize, bytes: impl Fn(usize) -> u64) -> Vec<ReplyRecord> {
        (0..n)
            .map(|i| {
                let mut r = good();
                r.index = i + 1;
                r.memory = Some(MemoryReading {
                    processes: 1,
                    rss_anon: bytes(i),
                    rss_file: 1024 * MB,
                    ..MemoryReading::default()
                });
                r
            })
            .collect()
    }

    fn line(replies: &[ReplyRecord], floors: &FootprintFloors) -> Line {
        memory_line(Memory::Serve, replies, &[], floors).expect("memory read")
    }

    fn figures(l: &Line) -> &FootprintFigures {
        l.figures.as_ref().unwrap().footprint.as_ref().unwrap()
    }

    /// A deterministic jitter of up to +-256 KiB: an allocator's noise.
    fn jitter(i: usize) -> u64 {
        ((i * 7919) % 512) as u64 * 1024
    }

    #[test]
    fn a_flat_serve_passes_with_its_peak_and_what_it_rests_on() {
        let replies = run(60, |i| 400 * MB + jitter(i));
        let l = line(&replies, &FootprintFloors::default());
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text.starts_with("serve memory 400 MiB peak; ")
                && l.text.contains(" a reply (95% interval ")
                && l.text.contains("over 57 replies after 3 warm: no growth")
                && l.text.contains("mapped files 1.00 GiB peak, not counted"),
            "{}",
            l.text
        );
        let f = figures(&l);
        assert_eq!(f.counted, Some(57));
        assert_eq!(f.max_growth, Some(MIB));
        assert_eq!(f.reply_end_bytes.len(), 60);
        assert_eq!(f.reply_end_bytes[0], [1.0, 400.0 * MIB]);
        let [lo, hi] = f.growth_interval_95.unwrap();
        assert!(lo <= 0.0 && hi >= 0.0, "{lo} {hi}");
    }

    #[test]
    fn a_leak_over_the_limit_fails_and_one_under_it_is_said_as_growth() {
        let leak = run(20, |i| 400 * MB + 4 * MB * i as u64 + jitter(i));
        let l = line(&leak, &FootprintFloors::default());
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        let slope = figures(&l).growth_bytes_per_reply.unwrap() / MIB;
        assert!((3.9..4.1).contains(&slope), "{slope}");
        assert!(
            l.text.ends_with(
                "grows by more than 1.00 MiB a reply; mapped files 1.00 GiB peak, not counted"
            ),
            "{}",
            l.text
        );
        // The same leak under a limit of 8 MiB a reply: growth, said, not failed.
        let loose = FootprintFloors {
            max_memory_growth: Some(8.0 * MIB),
            ..FootprintFloors::default()
        };
        let l = line(&leak, &loose);
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text.contains("grows, by less than 8.00 MiB a reply"),
            "{}",
            l.text
        );
        // Exactly at the limit is within it: the interval's low end must be over it.
        let at = run(20, |i| 400 * MB + MB * i as u64);
        assert_eq!(line(&at, &FootprintFloors::default()).status, Status::Ok);
    }

    #[test]
    fn memory_filled_once_at_the_start_or_a_swapped_leak_are_told_apart() {
        // A cache filled at the first replies (warm) and flat after: no growth.
        let settle = run(30, |i| {
            if i < 3 {
                100 * MB * (i as u64 + 1)
            } else {
                300 * MB
            }
        });
        let l = line(&settle, &FootprintFloors::default());
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text.contains("over 27 replies after 3 warm: no growth"),
            "{}",
            l.text
        );
        assert_eq!(figures(&l).growth_interval_95, Some([0.0, 0.0]));
        // Counted from the first reply, the fill is 3 steps among 30 values: Sen's slope's
        // interval still holds 0, so it is never called a leak.
        let cold = FootprintFloors {
            memory_warm: Some(0),
            ..FootprintFloors::default()
        };
        let l = line(&settle, &cold);
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text.contains("over 30 replies after 0 warm: no growth"),
            "{}",
            l.text
        );
        // A leak the kernel swaps out: RSS stays, swap grows; RssAnon + VmSwap sees it.
        let mut swapped = run(20, |_| 400 * MB);
        for (i, r) in swapped.iter_mut().enumerate() {
            r.memory.as_mut().unwrap().swap = 4 * MB * i as u64;
        }
        assert_eq!(
            line(&swapped, &FootprintFloors::default()).status,
            Status::Fail
        );
    }

    #[test]
    fn warm_ups_the_probe_and_the_warm_replies_are_not_counted() {
        let mut replies = run(12, |i| 400 * MB + 50 * MB * (i < 2) as u64);
        replies[0].warmup = true;
        replies[1].warmup = true;
        // A probe far above the rest is in the peak, never in the slope.
        replies[11].idle_probe = true;
        replies[11].memory.as_mut().unwrap().rss_anon = 900 * MB;
        let s = Series::of(Memory::Serve, &replies, &[], 3);
        assert_eq!(
            s.counted.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
        );
        assert_eq!(s.peak, Some(900.0 * MIB));
        let l = line(&replies, &FootprintFloors::default());
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(l.text.contains("over 6 replies after 3 warm"), "{}", l.text);
    }

    #[test]
    fn too_few_replies_is_information_unless_the_peak_is_over_its_limit() {
        let replies = run(8, |i| 400 * MB + 100 * MB * i as u64);
        let l = line(&replies, &FootprintFloors::default());
        assert_eq!(l.status, Status::Info, "{}", l.text);
        assert!(
            l.text
                .contains("growth not judged: 5 replies after 3 warm, 6 needed"),
            "{}",
            l.text
        );
        let capped = FootprintFloors {
            max_serve_memory: Some(512.0 * MIB),
            ..FootprintFloors::default()
        };
        let l = line(&replies, &capped);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text
                .starts_with("serve memory 1.07 GiB peak (over the limit of 512 MiB)"),
            "{}",
            l.text
        );
        assert_eq!(figures(&l).max_peak, Some(512.0 * MIB));
        // The peak is every reading's: a sample between replies counts.
        let mut sample = Sample::bare(1.0);
        sample.memory = Some(MemoryReading {
            rss_anon: 2048 * MB,
            ..MemoryReading::default()
        });
        let flat = run(20, |_| 100 * MB);
        let l = memory_line(Memory::Serve, &flat, &[sample], &capped).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert_eq!(figures(&l).peak_bytes, Some(2048.0 * MIB));
    }

    #[test]
    fn memory_not_read_is_said_and_a_limit_nobody_could_check_is_inconclusive() {
        let l = not_read_line(false, &FootprintFloors::default());
        assert_eq!(l.status, Status::Info);
        assert!(l.text.contains("attached, not launched"), "{}", l.text);
        let capped = FootprintFloors {
            max_serve_memory: Some(512.0 * MIB),
            ..FootprintFloors::default()
        };
        let l = not_read_line(true, &capped);
        assert_eq!(l.status, Status::Inconclusive);
        assert!(
            l.text.ends_with(
                "none of the serve's processes); --max-serve-memory 512 MiB could not be held to"
            ),
            "{}",
            l.text
        );
    }

    #[test]
    fn device_memory_has_its_line_only_where_it_was_sampled() {
        let replies = run(20, |_| 100 * MB);
        assert_eq!(
            memory_line(Memory::Device, &replies, &[], &FootprintFloors::default()),
            None
        );
        let mut leaking = replies.clone();
        for (i, r) in leaking.iter_mut().enumerate() {
            r.memory.as_mut().unwrap().drm =
                [("drm-total-memory".to_string(), 64 * MB + 2 * MB * i as u64)].into();
        }
        let l = memory_line(Memory::Device, &leaking, &[], &FootprintFloors::default()).unwrap();
        assert_eq!(l.check, Check::DeviceMemory);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text
                .starts_with("device memory 102 MiB peak; +2.00 MiB a reply"),
            "{}",
            l.text
        );
    }

    #[test]
    fn against_the_baseline_the_peak_and_growth_are_set_side_by_side() {
        let ours = run(20, |_| 600 * MB);
        let theirs = run(20, |_| 400 * MB);
        let l = baseline_memory_line((&ours, &[]), (&theirs, &[]), &FootprintFloors::default())
            .unwrap();
        assert_eq!(l.status, Status::Info, "{}", l.text);
        assert_eq!(
            l.text,
            "peak 600 MiB against the baseline's 400 MiB (+50%); growth +0.0 KiB a reply against +0.0 KiB"
        );
        let held = FootprintFloors {
            max_memory_regression: Some(0.2),
            ..FootprintFloors::default()
        };
        let l = baseline_memory_line((&ours, &[]), (&theirs, &[]), &held).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(l.text.contains("(+50%; limit +20%)"), "{}", l.text);
        let l = baseline_memory_line((&theirs, &[]), (&ours, &[]), &held).unwrap();
        assert_eq!(
            l.status,
            Status::Ok,
            "smaller than the baseline's: {}",
            l.text
        );
        let none: Vec<ReplyRecord> = vec![good()];
        let l = baseline_memory_line((&ours, &[]), (&none, &[]), &held).unwrap();
        assert_eq!(l.status, Status::Info);
        assert!(
            l.text.contains("the baseline recorded no serve memory"),
            "{}",
            l.text
        );
    }

    // The tests below each name the cargo mutant they catch (docs/testing.md).

    /// `growth_unit`'s threshold is a hundredth of a MiB (10 485.76 bytes): 100 KiB a reply
    /// is said in MiB ("+0.10"), 5 KiB a reply in KiB ("+5.0"). Exact linear readings make
    /// Sen's slope exact (every pairwise slope is the step). Catches `* with +` (100 KiB said
    /// in KiB) and `* with /` (5 KiB said in MiB) there, and each baseline figure's deletion.
    #[test]
    fn growth_is_said_in_mib_from_a_hundredth_of_one_and_the_baseline_figures_are_kept() {
        let ours = run(20, |i| 400 * MB + 100 * 1024 * i as u64);
        let theirs = run(20, |i| 400 * MB + 5 * 1024 * i as u64);
        let held = FootprintFloors {
            max_memory_regression: Some(0.2),
            ..FootprintFloors::default()
        };
        let l = baseline_memory_line((&ours, &[]), (&theirs, &[]), &held).unwrap();
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text
                .ends_with("; growth +0.10 MiB a reply against +5.0 KiB"),
            "{}",
            l.text
        );
        let (peak, their_peak) = (400.0 * MIB + 1900.0 * 1024.0, 400.0 * MIB + 95.0 * 1024.0);
        let fig = l.figures.as_ref().unwrap();
        assert_eq!(fig.ratio, Some(peak / their_peak));
        let f = fig.footprint.as_ref().unwrap();
        assert_eq!(f.peak_bytes, Some(peak));
        assert_eq!(f.baseline_peak_bytes, Some(their_peak));
        assert_eq!(f.growth_bytes_per_reply, Some(100.0 * 1024.0));
        assert_eq!(f.baseline_growth_bytes_per_reply, Some(5.0 * 1024.0));
        assert_eq!(f.max_regression, Some(0.2));
    }

    /// A baseline whose serve memory read zero has no ratio to be over: the line is not failed
    /// on a division by zero. Catches `their_peak > 0.0` made `>=` (an infinite ratio, FAIL).
    #[test]
    fn a_baseline_that_read_zero_gives_no_ratio() {
        let ours = run(20, |_| 600 * MB);
        let theirs = run(20, |_| 0);
        let held = FootprintFloors {
            max_memory_regression: Some(0.2),
            ..FootprintFloors::default()
        };
        let l = baseline_memory_line((&ours, &[]), (&theirs, &[]), &held).unwrap();
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert_eq!(l.figures.as_ref().unwrap().ratio, None);
        assert!(
            l.text
                .starts_with("peak 600 MiB against the baseline's 0 B; growth"),
            "{}",
            l.text
        );
    }

    /// `--max-serve-memory` is the highest the memory may peak: a peak exactly at it is within
    /// it. Catches `peak > m` made `>=`.
    #[test]
    fn a_peak_exactly_at_its_limit_is_within_it() {
        let replies = run(20, |_| 512 * MB);
        let capped = FootprintFloors {
            max_serve_memory: Some(512.0 * MIB),
            ..FootprintFloors::default()
        };
        let l = line(&replies, &capped);
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text
                .starts_with("serve memory 512 MiB peak (within the limit of 512 MiB); "),
            "{}",
            l.text
        );
    }

    /// Mapped files are named only where some were resident (a serve that loaded its model
    /// into anonymous memory maps none), and the figures keep the file peak and the warm
    /// replies left out. Catches `*f > 0.0` made `>=`, and the deletion of `file_peak_bytes`
    /// and of `warm`.
    #[test]
    fn mapped_files_are_named_only_where_resident_and_the_warm_count_is_a_figure() {
        let mut replies = run(20, |_| 300 * MB);
        let warm5 = FootprintFloors {
            memory_warm: Some(5),
            ..FootprintFloors::default()
        };
        let l = line(&replies, &warm5);
        assert_eq!(figures(&l).file_peak_bytes, Some(1024.0 * MIB));
        assert_eq!(figures(&l).warm, Some(5));
        assert!(
            l.text.contains("over 15 replies after 5 warm"),
            "{}",
            l.text
        );
        for r in &mut replies {
            r.memory.as_mut().unwrap().rss_file = 0;
        }
        let l = line(&replies, &warm5);
        assert_eq!(figures(&l).file_peak_bytes, Some(0.0));
        assert!(!l.text.contains("mapped files"), "{}", l.text);
    }

    /// Nothing read is said once, as information, saying why. Catches `not_read_line` replaced
    /// with a default line.
    #[test]
    fn memory_not_read_is_information_saying_why() {
        let launched = not_read_line(true, &FootprintFloors::default());
        assert_eq!(
            (launched.check, launched.status),
            (Check::Memory, Status::Info)
        );
        assert_eq!(
            launched.text,
            "serve memory not read: none is recorded (a run from before it was, or /proc showed none of the serve's processes)"
        );
        let attached = not_read_line(false, &FootprintFloors::default());
        assert_eq!(attached.check, Check::Memory);
        assert!(
            attached
                .text
                .contains("the serve was attached, not launched"),
            "{}",
            attached.text
        );
    }
}
