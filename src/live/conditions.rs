//! The box's conditions while a run measures: its load before the serve starts, and during the
//! replies the box's load and CPU pressure and the serve's own wait for a CPU.
//!
//! A timing figure without the load it was taken under reads as a regression when the box was
//! merely busy. The load average is the box as a whole; it does not say whether the serve got a
//! CPU. The serve's run-queue wait does: of the time its threads were ready to run, how much
//! they spent waiting for a CPU.
//!
//! Sources: sysinfo for the load average, the process tree and the top CPU consumers; /proc for
//! what sysinfo does not give: CPU pressure (`/proc/pressure/cpu`) and per-thread run-queue wait
//! (`/proc/PID/task/TID/schedstat`), whose CPU-time field is used beside it so both terms of the
//! wait fraction come from one source. A figure the kernel does not give is left out, never
//! guessed. Beside them, each sample reads the throttling evidence ([`super::throttle`]): the
//! CPUs' throttle counts and clocks, the thermal zones, and the device's own clock and
//! temperature where `--device-freq` and `--device-temp` name them.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use sysinfo::{CpuRefreshKind, ProcessRefreshKind, ProcessesToUpdate, RefreshKind, System};

use crate::archive::record::{LoadSnapshot, RouteRecord};
use crate::judging::verdict::conditions::summarize;
use crate::judging::verdict::Criteria;
use crate::live::footprint::{self, DeviceMemoryFile};
use crate::live::proc_scan;
use crate::live::route_probe::RouteProbe;
use crate::live::throttle::{self, BoxSources, DeviceFiles};

/// The conditions as a run records them; the archive owns the types.
pub use crate::archive::record::{DuringReplies, Sample, TopProcess};

/// How often the sampler looks during the replies.
pub const INTERVAL_MS: u64 = 250;

/// The load averages and CPU count now; `None` where the OS gives no CPU count.
pub fn load_snapshot(taken: &str) -> Option<LoadSnapshot> {
    let sys =
        System::new_with_specifics(RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing()));
    let ncpu = sys.cpus().len();
    if ncpu == 0 {
        return None;
    }
    let avg = System::load_average();
    Some(LoadSnapshot {
        load1: avg.one,
        load5: avg.five,
        load15: avg.fifteen,
        ncpu,
        taken: taken.to_string(),
        during: None,
    })
}

/// `some avg10` from the text of /proc/pressure/cpu.
pub fn parse_pressure(text: &str) -> Option<f64> {
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// (CPU time ns, run-queue wait ns) from the text of a schedstat file.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    let cpu = fields.next()?.parse().ok()?;
    let wait = fields.next()?.parse().ok()?;
    Some((cpu, wait))
}

/// A thread's (CPU time, run-queue wait), ns, from its schedstat.
type CpuWait = (u64, u64);

/// The serve a sampler looks at: the launched process and the supervisor that is the
/// subreaper of its orphans.
#[derive(Debug, Clone, Copy)]
pub struct ServeTree {
    /// The launched process.
    pub root: u32,
    /// Its supervisor.
    pub subreaper: Option<u32>,
}

/// Samples the box, the serve's threads and its route evidence while the replies run.
#[derive(Debug)]
pub struct Sampler {
    start: Instant,
    /// Every process of the serve's tree seen so far.
    serve_tree: HashSet<u32>,
    route: RouteProbe,
    /// Per thread: (cpu, wait) when first seen, and when last seen. Threads that exit keep
    /// their last reading, so their work is not lost from the sum.
    threads: HashMap<u32, (CpuWait, CpuWait)>,
    schedstat_readable: bool,
    cpu_at_start: HashMap<u32, (String, u64)>,
    samples: Kept,
    /// When sampling began, ns since the run's clock base.
    started_ns: u64,
    /// The box's throttling files, found when sampling began.
    box_sources: BoxSources,
    /// The device's clock and temperature files, where given.
    device: DeviceFiles,
    /// Whether a serve was launched: its memory is read on each sample (issue 34).
    launched: bool,
    /// `--device-memory`'s counter, where given.
    device_memory: Option<DeviceMemoryFile>,
    /// What the tree's reads have cost so far, against what they may.
    budget: TreeBudget,
}

/// What one sample reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// The box and the serve's tree.
    Tree,
    /// The box alone: the tree's reads were over their budget.
    BoxOnly,
    /// The run's last look, once the serve is stopped: the box and the threads' CPU (a
    /// thread's figures stay with it), never its memory, whose pids may be another's by then.
    Last,
}

/// The share of one core (per mille: 0.2%) the serve's tree's reads may take, over the
/// sampling so far.
///
/// The tree's reads grow with the serve: a walk of every thread's children, every thread's
/// schedstat, every open file's link. Against vLLM's 4 processes, 72 threads and 172 open
/// files they cost 2.5 ms of CPU a look on a 2-core VM whose system calls are slow, 1% of a
/// core at 250 ms, the gate's whole budget beside the serve it measures (issue 51); an
/// 8-worker device serve holds several times as many. Past this share the tree is looked at on fewer samples
/// (the box still on every one), as the kernel lowers perf's sampling rate when its samples
/// take more than `kernel.perf_cpu_time_max_percent` of a CPU.
pub const TREE_PER_MILLE_OF_A_CORE: u64 = 2;

/// The CPU the tree's reads have taken, and whether the next may be taken now (pure but for
/// what it is told).
#[derive(Debug, Default)]
pub struct TreeBudget {
    /// CPU the looks at the tree have taken, ns.
    spent_ns: u64,
}

impl TreeBudget {
    /// Whether a look fits now, `elapsed_ns` into the sampling: what the looks took so far is
    /// within [`TREE_PER_MILLE_OF_A_CORE`] of the time.
    pub fn due(&self, elapsed_ns: u64) -> bool {
        u128::from(self.spent_ns) * 1000
            <= u128::from(elapsed_ns) * u128::from(TREE_PER_MILLE_OF_A_CORE)
    }

    /// A look took `ns` of CPU.
    pub fn spend(&mut self, ns: u64) {
        self.spent_ns = self.spent_ns.saturating_add(ns);
    }
}

/// This thread's CPU time, ns: the sampler's own cost (it runs on the gate's one thread).
fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

impl Sampler {
    /// Start sampling: walk the serve's process tree (if a serve was launched), read its route
    /// evidence, and take the baseline of every process's CPU time. `base_ns` is the run's
    /// clock base; `criteria` say which device file and busy counter to read; `device`, which
    /// files hold the device's clock and temperature; `device_memory`, the device's memory
    /// counter.
    pub fn start(
        serve: Option<ServeTree>,
        base_ns: u64,
        criteria: &Criteria,
        device: &DeviceFiles,
        device_memory: Option<&DeviceMemoryFile>,
    ) -> Sampler {
        let route = RouteProbe::start(
            serve.map(|s| s.root),
            serve.and_then(|s| s.subreaper),
            base_ns,
            criteria.route_device(),
            criteria.device_busy(),
            criteria.route_patterns(),
        );
        let procs = process_cpu();
        let mut s = Sampler {
            start: Instant::now(),
            serve_tree: route.tree().iter().copied().collect(),
            route,
            threads: HashMap::new(),
            schedstat_readable: false,
            cpu_at_start: procs
                .into_iter()
                .map(|(pid, (name, _, cpu))| (pid, (name, cpu)))
                .collect(),
            samples: Kept::default(),
            started_ns: crate::clock::now_ns().saturating_sub(base_ns),
            box_sources: BoxSources::discover(std::path::Path::new("/")),
            device: device.clone(),
            launched: serve.is_some(),
            device_memory: device_memory.cloned(),
            budget: TreeBudget::default(),
        };
        s.read_threads();
        s
    }

    fn read_threads(&mut self) {
        for &pid in &self.serve_tree {
            let Ok(tids) = proc_scan::thread_ids(pid) else {
                continue;
            };
            for tid in tids {
                let path = format!("/proc/{pid}/task/{tid}/schedstat");
                let Some(now) = proc_scan::read_small(&path)
                    .ok()
                    .and_then(|text| parse_schedstat(&text))
                else {
                    continue;
                };
                self.schedstat_readable = true;
                self.threads
                    .entry(tid)
                    .and_modify(|(_, last)| *last = now)
                    .or_insert((now, now));
            }
        }
    }

    /// The serve's threads' (cpu, wait) since the start, ns; `None` where not measurable.
    fn serve_totals(&self) -> Option<(u64, u64)> {
        if !self.schedstat_readable {
            return None;
        }
        Some(self.threads.values().fold((0, 0), |(c, w), (first, last)| {
            (
                c + last.0.saturating_sub(first.0),
                w + last.1.saturating_sub(first.1),
            )
        }))
    }

    /// Take one sample now: the box every time; the serve's tree (its route evidence, its
    /// threads' CPU and wait, its memory) when its reads fit the [`TreeBudget`].
    pub fn sample(&mut self) {
        let elapsed = self.start.elapsed().as_nanos() as u64;
        if self.budget.due(elapsed) {
            let spent = thread_cpu_ns();
            self.route.sample();
            self.serve_tree.extend(self.route.tree());
            self.sample_conditions_kept(Look::Tree);
            self.budget.spend(thread_cpu_ns().saturating_sub(spent));
        } else {
            self.sample_conditions_kept(Look::BoxOnly);
        }
    }

    /// One sample: the box, and the serve's threads and memory as `look` says.
    fn sample_conditions_kept(&mut self, look: Look) {
        if look != Look::BoxOnly {
            self.read_threads();
        }
        let totals = self.serve_totals().filter(|_| look != Look::BoxOnly);
        let throttling = self.box_sources.read();
        let (device_mhz, device_temp_c) = throttle::read_device(&self.device);
        self.samples.push(
            Sample {
                t_ms: self.start.elapsed().as_secs_f64() * 1e3,
                load1: System::load_average().one,
                cpu_some_avg10: std::fs::read_to_string("/proc/pressure/cpu")
                    .ok()
                    .and_then(|t| parse_pressure(&t)),
                serve_cpu_ns: totals.map(|t| t.0),
                serve_wait_ns: totals.map(|t| t.1),
                throttle_count: throttling.throttle_count,
                cpu_mhz: throttling.cpu_mhz,
                cpu_mhz_min: throttling.cpu_mhz_min,
                temp_c: throttling.temp_c,
                device_mhz,
                device_temp_c,
                // The tree as the route evidence walked it last: never a pid seen once and
                // since gone, whose number another process may have taken. The last look
                // comes once the serve is stopped: its pids may be another's by then.
                memory: if self.launched && look == Look::Tree {
                    footprint::read_processes(
                        self.route.tree(),
                        self.device_memory.as_ref(),
                        |pid| self.route.drm_fds(pid),
                    )
                } else {
                    None
                },
            },
            look == Look::Last,
        );
    }

    /// The replies are over, the serve still running: a last sample, and the route evidence
    /// read once more (maps, open files, the busy counter's second reading).
    pub fn replies_done(&mut self) {
        self.route.replies_done();
        self.serve_tree.extend(self.route.tree());
        self.sample_conditions_kept(Look::Tree);
    }

    /// The route evidence so far, for route.json.
    pub fn route(&self) -> RouteRecord {
        self.route.record()
    }

    /// Stop: a last sample, the top CPU consumers over the window, and the summary.
    pub fn finish(mut self) -> DuringReplies {
        // The serve may be gone by now: its route evidence was read when the replies ended.
        self.sample_conditions_kept(Look::Last);
        let window_ms = self.start.elapsed().as_secs_f64() * 1e3;
        let me = std::process::id();
        let mut by_name: HashMap<String, (usize, u64)> = HashMap::new();
        for (pid, (name, _, cpu_ms)) in process_cpu() {
            if pid == me || self.serve_tree.contains(&pid) {
                continue;
            }
            let before = self.cpu_at_start.get(&pid).map_or(0, |(_, c)| *c);
            let used = cpu_ms.saturating_sub(before);
            if used > 0 {
                let e = by_name.entry(name).or_default();
                e.0 += 1;
                e.1 += used;
            }
        }
        // Percent of one CPU over the window.
        let share_pct = |ms: u64| {
            if window_ms > 0.0 {
                ms as f64 / window_ms * 100.0
            } else {
                0.0
            }
        };
        let others_ms: u64 = by_name.values().map(|(_, ms)| ms).sum();
        let mut top: Vec<TopProcess> = by_name
            .into_iter()
            .map(|(name, (count, ms))| TopProcess {
                name,
                count,
                cpu_pct: share_pct(ms),
            })
            .filter(|t| t.cpu_pct >= 1.0)
            .collect();
        top.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
        top.truncate(5);
        let totals = self.serve_totals();
        let interval_ms = INTERVAL_MS * self.samples.stride;
        DuringReplies {
            started_ns: Some(self.started_ns),
            others_cpu_pct: Some(share_pct(others_ms)),
            ..summarize(
                &self.samples.samples,
                window_ms / 1e3,
                totals,
                top,
                interval_ms,
            )
        }
    }
}

/// The most samples a run keeps. At 250 ms that is 17 minutes; a longer soak keeps every
/// other sample each time the limit is reached (the interval doubles), so a day's soak keeps
/// between 2,048 and 4,096 samples, at most a megabyte of load.json, where every sample would
/// be 345,600.
pub const MAX_SAMPLES: usize = 4096;

/// The samples kept so far, thinned to at most [`MAX_SAMPLES`] (pure). Thinning loses no
/// throttle event (the counts are cumulative: a rise shows between any two samples kept) and no
/// CPU time (the serve's are totals); a brief peak of load or temperature between two kept
/// samples can be missed.
#[derive(Debug)]
pub struct Kept {
    /// The samples kept, in order.
    pub samples: Vec<Sample>,
    /// Every how many looks one is kept: 1, then 2, 4, ... after each thinning.
    pub stride: u64,
    /// Looks taken, kept or not.
    looks: u64,
}

impl Default for Kept {
    fn default() -> Self {
        Kept {
            samples: Vec::new(),
            stride: 1,
            looks: 0,
        }
    }
}

impl Kept {
    /// Take a look: kept when it falls on the stride, or when it is the `last`.
    pub fn push(&mut self, sample: Sample, last: bool) {
        let on_stride = self.looks.is_multiple_of(self.stride);
        self.looks += 1;
        if !(on_stride || last) {
            return;
        }
        if self.samples.len() >= MAX_SAMPLES {
            // Keep the 1st, 3rd, 5th, ...: the first look stays, the spacing doubles.
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
        }
        self.samples.push(sample);
    }
}

/// Every process: pid -> (name, parent, accumulated CPU ms).
fn process_cpu() -> HashMap<u32, (String, Option<u32>, u64)> {
    let mut sys = System::new();
    sys.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing().with_cpu(),
    );
    sys.processes()
        .iter()
        .filter(|(_, p)| p.thread_kind().is_none())
        .map(|(pid, p)| {
            (
                pid.as_u32(),
                (
                    p.name().to_string_lossy().into_owned(),
                    p.parent().map(|pp| pp.as_u32()),
                    p.accumulated_cpu_time(),
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_and_schedstat_parse_and_refuse_garbage() {
        let psi = "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure(psi), Some(12.5));
        assert_eq!(parse_pressure("full avg10=1.00\n"), None);
        assert_eq!(parse_pressure(""), None);
        assert_eq!(parse_schedstat("1000 250 7\n"), Some((1000, 250)));
        assert_eq!(parse_schedstat("1000\n"), None);
        assert_eq!(parse_schedstat("x y z"), None);
    }

    fn look(t_ms: f64) -> Sample {
        Sample::bare(t_ms)
    }

    #[test]
    fn a_long_run_keeps_evenly_thinned_samples_within_the_limit_and_its_last() {
        let mut kept = Kept::default();
        let looks = 345_600u64; // a day at 250 ms
        for i in 0..looks {
            kept.push(look(i as f64), i == looks - 1);
            assert!(kept.samples.len() <= MAX_SAMPLES + 1, "at look {i}");
        }
        let t: Vec<f64> = kept.samples.iter().map(|s| s.t_ms).collect();
        assert!(t.len() >= MAX_SAMPLES / 2, "{}", t.len());
        assert_eq!(t[0], 0.0, "the first look stays");
        assert_eq!(
            *t.last().unwrap(),
            (looks - 1) as f64,
            "the last look is kept"
        );
        // Every kept look but the last falls on the final stride, one stride apart.
        let stride = kept.stride as f64;
        assert_eq!(kept.stride, 128, "345,600 looks over at most 4,096: 2^7");
        for w in t[..t.len() - 1].windows(2) {
            assert_eq!(w[1] - w[0], stride, "{w:?}");
        }
        // A short run keeps every look.
        let mut short = Kept::default();
        for i in 0..10 {
            short.push(look(i as f64), false);
        }
        assert_eq!(short.samples.len(), 10);
        assert_eq!(short.stride, 1);
    }

    #[test]
    fn the_tree_is_looked_at_while_its_reads_fit_their_share_of_a_core() {
        let ms = 1_000_000u64;
        let mut budget = TreeBudget::default();
        // A look every 250 ms costing twice its share: past the first two (the first at no
        // cost so far, the second exactly at its share), every other one fits.
        let twice = 2 * 250 * ms * TREE_PER_MILLE_OF_A_CORE / 1000;
        let looked: Vec<bool> = (1..=8)
            .map(|i| {
                let due = budget.due(i * 250 * ms);
                if due {
                    budget.spend(twice);
                }
                due
            })
            .collect();
        assert_eq!(looked, [true, true, false, true, false, true, false, true]);
        // A look at its share exactly fits; a nanosecond more waits.
        let mut at = TreeBudget::default();
        at.spend(250 * ms * TREE_PER_MILLE_OF_A_CORE / 1000);
        assert!(at.due(250 * ms));
        at.spend(1);
        assert!(!at.due(250 * ms));
        // A cheap tree (llama-server's: a few reads, 0.1 ms) is looked at on every sample.
        let mut cheap = TreeBudget::default();
        assert!((1..=100).all(|i| {
            let due = cheap.due(i * 250 * ms);
            cheap.spend(ms / 10);
            due
        }));
    }

    #[test]
    fn the_wait_fraction_is_wait_over_ready_time() {
        let d = summarize(
            &[],
            1.0,
            Some((3_000_000_000, 1_000_000_000)),
            vec![],
            INTERVAL_MS,
        );
        assert_eq!(d.wait_fraction, Some(0.25));
        assert_eq!(d.serve_cpu_s, Some(3.0));
        let idle = summarize(&[], 1.0, Some((0, 0)), vec![], INTERVAL_MS);
        assert_eq!(
            idle.wait_fraction, None,
            "no ready time, no fraction; never a zero"
        );
        assert_eq!(
            summarize(&[], 1.0, None, vec![], INTERVAL_MS).serve_cpu_s,
            None
        );
    }

    fn criteria() -> Criteria {
        Criteria::new(crate::archive::record::Floors {
            first_token_ms: 1.0,
            ..Default::default()
        })
        .unwrap()
    }

    /// A sampler with this test process as the launched "serve".
    fn this_process_sampler() -> Sampler {
        let me = ServeTree {
            root: std::process::id(),
            subreaper: None,
        };
        Sampler::start(Some(me), 0, &criteria(), &DeviceFiles::default(), None)
    }

    /// Work for this thread's CPU time to rise by (no timing figure is asserted of it).
    fn burn_cpu() {
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn the_sampler_measures_this_process_tree() {
        // This test process as the "serve": it burns CPU between samples, so its CPU time
        // must rise (no timing figure is asserted).
        let mut s = this_process_sampler();
        burn_cpu();
        s.sample();
        let d = s.finish();
        assert_eq!(d.samples.len(), 2);
        // A launched serve's memory is read on each sample (this process's), never on the
        // last look, which comes once the serve is stopped and its pids may be another's.
        let m = d.samples[0].memory.as_ref().expect("memory read");
        assert!(m.processes >= 1 && m.rss_anon > 0, "{m:?}");
        assert_eq!(d.samples[1].memory, None);
        if std::path::Path::new("/proc/self/schedstat").exists() {
            assert!(d.serve_cpu_s.unwrap() > 0.0, "{d:?}");
            assert!(d.wait_fraction.is_some());
        }
    }

    #[test]
    fn a_tree_over_its_budget_is_left_for_a_later_sample_and_the_box_is_read_all_the_same() {
        let mut s = this_process_sampler();
        // Looks so costly so far that none fits for an hour.
        s.budget.spend(3_600_000_000_000);
        s.sample();
        let d = s.finish();
        let skipped = &d.samples[0];
        assert_eq!(
            (skipped.serve_cpu_ns, skipped.memory.as_ref()),
            (None, None),
            "{skipped:?}"
        );
        assert!(skipped.load1 >= 0.0);
        if std::path::Path::new("/proc/self/schedstat").exists() {
            // The run's last look reads the threads whatever the budget: no CPU is lost.
            assert!(d.samples[1].serve_cpu_ns.is_some(), "{:?}", d.samples[1]);
            assert!(d.serve_cpu_s.is_some());
        }
    }

    #[test]
    fn the_sampler_s_own_cpu_is_read_from_its_thread() {
        let before = thread_cpu_ns();
        burn_cpu();
        assert!(thread_cpu_ns() > before, "{before}");
    }

    #[test]
    fn every_sample_reads_the_devices_files_in_their_units() {
        let dir = tempfile::tempdir().unwrap();
        let freq = dir.path().join("cur_freq");
        let temp = dir.path().join("temp1_input");
        std::fs::write(&freq, "1000000000\n").unwrap();
        std::fs::write(&temp, "55000\n").unwrap();
        let device = DeviceFiles {
            freq: Some(freq.clone()),
            temp: Some(temp.clone()),
        };
        let mut s = Sampler::start(None, 0, &criteria(), &device, None);
        s.sample();
        // The NPU slows and heats between looks; the last look sees it.
        std::fs::write(&freq, "300000000\n").unwrap();
        std::fs::write(&temp, "71500\n").unwrap();
        let d = s.finish();
        let seen: Vec<_> = d
            .samples
            .iter()
            .map(|x| (x.device_mhz, x.device_temp_c))
            .collect();
        assert_eq!(
            seen,
            [(Some(1000.0), Some(55.0)), (Some(300.0), Some(71.5))]
        );
        let t = d.throttle.expect("the device was seen");
        assert_eq!(
            (t.device_mhz_first, t.device_mhz_lowest, t.device_mhz_last),
            (Some(1000.0), Some(300.0), Some(300.0))
        );
        assert_eq!(t.device_temp_c_max, Some(71.5));
    }
}
