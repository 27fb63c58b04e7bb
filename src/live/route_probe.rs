//! Route evidence from the serve's own processes, read from /proc while the replies stream: the
//! files each process of the serve's tree maps, the files it holds open, and the device's busy
//! counter. What a release names in its log can change; what its processes map and hold open
//! cannot be renamed.
//!
//! The tree is the launched process and every descendant: its children, theirs, and the
//! orphans the supervisor adopted as their subreaper (a daemon that forked twice leaves its
//! parent's tree but is reparented to the supervisor, which launched only the serve). It is
//! walked on every sample through `/proc/PID/task/TID/children`, which costs a few small
//! reads. `/proc/PID/maps` is read only when a process is first seen, when the tree changes, and
//! once after the replies: a serve maps its backends while it loads, and re-reading a large
//! maps file every 250 ms would cost the gate what it must leave to the serve. Open files are
//! read on every sample, so a device held only while the replies stream is seen.
//!
//! Everything kept is bounded: [`MAX_PROCESSES`], and [`MAX_PATHS`] per process for maps and
//! for open files. Evidence that cannot be read is recorded as a problem, never guessed: the
//! verdict then FAILs the check with the reason.
//!
//! The /proc parsing is procfs's (maps, fd links, task children, stat); fdinfo keys of DRM
//! drivers (`drm-engine-<name>: N ns`) are not among procfs's typed fields, so an fdinfo file is
//! read as text here.

use std::collections::{BTreeSet, HashMap, HashSet};

use procfs::process::{FDTarget, MMapPath, Process};
use regex::Regex;

use crate::archive::record::{CounterReading, CounterRecord, ProcessRecord, RouteRecord};
use crate::judging::verdict::BusySource;

/// The most processes of a tree recorded; a serve that forks more is recorded up to here.
pub const MAX_PROCESSES: usize = 256;
/// The most paths recorded per process, for maps and for open files each.
pub const MAX_PATHS: usize = 4096;
/// The most problems recorded.
const MAX_PROBLEMS: usize = 32;
/// The most fds of one process looked at in one sample.
const MAX_FDS: usize = 16_384;
/// The most bytes of a counter or fdinfo file read.
const COUNTER_FILE_MAX: u64 = 64 * 1024;

/// What is known of one process of the tree.
#[derive(Debug)]
struct Seen {
    record: ProcessRecord,
    maps: HashSet<String>,
    open: HashSet<String>,
    /// Its fds whose file matched `--route-device` when last read.
    device_fds: Vec<i32>,
}

/// Reads the serve tree's route evidence, sample by sample.
#[derive(Debug)]
pub struct RouteProbe {
    /// The launched process; `None` when the gate attached to a running serve.
    root: Option<u32>,
    /// The subreaper of the serve's orphans (the supervisor), itself not part of the tree.
    subreaper: Option<u32>,
    base_ns: u64,
    device: Option<Regex>,
    busy: Option<BusySource>,
    seen: Vec<Seen>,
    index: HashMap<u32, usize>,
    tree: BTreeSet<u32>,
    problems: Vec<String>,
    counter: Option<CounterRecord>,
    read_after_replies: bool,
}

impl RouteProbe {
    /// Start: walk the tree under `root`, read every process's maps and open files, and take
    /// the busy counter's first reading.
    pub fn start(
        root: Option<u32>,
        subreaper: Option<u32>,
        base_ns: u64,
        device: Option<&Regex>,
        busy: Option<&BusySource>,
    ) -> RouteProbe {
        let mut probe = RouteProbe {
            root,
            subreaper,
            base_ns,
            device: device.cloned(),
            busy: busy.cloned(),
            seen: Vec::new(),
            index: HashMap::new(),
            tree: BTreeSet::new(),
            problems: Vec::new(),
            counter: busy.map(|b| CounterRecord {
                source: b.to_string(),
                unit: None,
                before: None,
                after: None,
                problem: None,
            }),
            read_after_replies: false,
        };
        if root.is_none() {
            probe.problem(
                "the gate attached to a serve already running and launched no process to look at",
            );
        }
        probe.look(true);
        let reading = probe.read_counter();
        if let Some(c) = probe.counter.as_mut() {
            match reading {
                Ok((value, unit)) => {
                    c.before = Some(value);
                    c.unit = unit;
                }
                Err(why) => c.problem = Some(format!("before the replies: {why}")),
            }
        }
        probe
    }

    /// One sample: walk the tree again; read the maps of processes not seen before (of every
    /// process, when the tree changed), and every process's open files.
    pub fn sample(&mut self) {
        self.look(false);
    }

    /// The replies are over: read everything once more, maps included, and the counter's
    /// second reading.
    pub fn replies_done(&mut self) {
        self.look(true);
        let reading = self.read_counter();
        if let Some(c) = self.counter.as_mut() {
            match reading {
                Ok((value, unit)) => {
                    c.after = Some(value);
                    if c.unit.is_none() {
                        c.unit = unit;
                    }
                }
                Err(why) => {
                    c.problem.get_or_insert(format!("after the replies: {why}"));
                }
            }
        }
        self.read_after_replies = true;
    }

    /// The processes this probe has found in the tree now (for the conditions sampler's
    /// per-thread CPU figures).
    pub fn tree(&self) -> &BTreeSet<u32> {
        &self.tree
    }

    /// What was found, for route.json.
    pub fn record(&self) -> RouteRecord {
        RouteRecord {
            root_pid: self.root,
            processes: self.seen.iter().map(|s| s.record.clone()).collect(),
            counter: self.counter.clone(),
            problems: self.problems.clone(),
            read_after_replies: self.read_after_replies,
            matched: Vec::new(),
        }
    }

    fn problem(&mut self, what: impl Into<String>) {
        let what = what.into();
        if self.problems.len() < MAX_PROBLEMS && !self.problems.contains(&what) {
            self.problems.push(what);
        }
    }

    /// Walk the tree and read what it shows; maps of every process when `all_maps`.
    fn look(&mut self, all_maps: bool) {
        let Some(root) = self.root else {
            return;
        };
        let tree = match walk_tree(root, self.subreaper) {
            Ok(tree) => tree,
            Err(why) => {
                self.problem(why);
                return;
            }
        };
        let changed = tree != self.tree;
        self.tree = tree;
        let pids: Vec<u32> = self.tree.iter().copied().collect();
        for pid in pids {
            // One handle a process a look: its directory opened once for all its reads. One
            // gone since the walk has nothing more to show; what it showed before stays.
            let Ok(process) = Process::new(pid as i32) else {
                continue;
            };
            let (i, new) = match self.index.get(&pid) {
                Some(&i) => (i, false),
                None => match self.add(pid, &process) {
                    Some(i) => (i, true),
                    None => continue,
                },
            };
            if new || changed || all_maps {
                self.read_maps(i, &process);
            }
            self.read_open(i, &process);
        }
    }

    /// Start keeping `pid`: its index in `seen`; `None` when the cap is reached or it is gone
    /// already.
    fn add(&mut self, pid: u32, process: &Process) -> Option<usize> {
        if self.seen.len() >= MAX_PROCESSES {
            self.problem(format!(
                "the serve's tree has more than {MAX_PROCESSES} processes; the rest were not looked at"
            ));
            return None;
        }
        let (comm, parent) = match process.stat() {
            Ok(stat) => (stat.comm, u32::try_from(stat.ppid).ok()),
            Err(_) => return None,
        };
        let exe = process.exe().ok().map(|p| p.display().to_string());
        self.index.insert(pid, self.seen.len());
        self.seen.push(Seen {
            record: ProcessRecord {
                pid,
                parent,
                comm,
                exe,
                ..ProcessRecord::default()
            },
            maps: HashSet::new(),
            open: HashSet::new(),
            device_fds: Vec::new(),
        });
        Some(self.seen.len() - 1)
    }

    fn read_maps(&mut self, i: usize, process: &Process) {
        match process.maps() {
            Ok(maps) => {
                let seen = &mut self.seen[i];
                for map in maps {
                    if let MMapPath::Path(path) = map.pathname {
                        keep(
                            &mut seen.maps,
                            &mut seen.record.maps,
                            &mut seen.record.truncated,
                            path.display().to_string(),
                        );
                    }
                }
            }
            // Gone between the walk and the read: what it showed before stays.
            Err(procfs::ProcError::NotFound(_)) => {}
            Err(e) => {
                let pid = self.seen[i].record.pid;
                self.problem(format!("/proc/{pid}/maps: {e}"));
            }
        }
    }

    fn read_open(&mut self, i: usize, process: &Process) {
        let fds = match process.fd() {
            Ok(fds) => fds,
            Err(procfs::ProcError::NotFound(_)) => return,
            Err(e) => {
                let pid = self.seen[i].record.pid;
                self.problem(format!("/proc/{pid}/fd: {e}"));
                return;
            }
        };
        let seen = &mut self.seen[i];
        seen.device_fds.clear();
        for fd in fds.take(MAX_FDS).flatten() {
            // Sockets, pipes and anonymous inodes name no device.
            let FDTarget::Path(path) = fd.target else {
                continue;
            };
            let path = path.display().to_string();
            if self.device.as_ref().is_some_and(|re| re.is_match(&path)) {
                seen.device_fds.push(fd.fd);
            }
            keep(
                &mut seen.open,
                &mut seen.record.open,
                &mut seen.record.truncated,
                path,
            );
        }
    }

    /// The busy counter now, with its unit where known; `None` source, nothing to read.
    fn read_counter(&mut self) -> Result<(CounterReading, Option<String>), String> {
        let at_ns = crate::clock::now_ns().saturating_sub(self.base_ns);
        match self.busy.clone() {
            None => Err("no counter was asked for".to_string()),
            Some(BusySource::File(path)) => {
                let value = read_counter_file(&path)?;
                Ok((CounterReading { at_ns, value }, unit_of_name(&path)))
            }
            Some(BusySource::Fdinfo(key)) => {
                let mut total = 0u64;
                let mut unit = None;
                let mut problems = Vec::new();
                for s in &self.seen {
                    for fd in &s.device_fds {
                        let path = format!("/proc/{}/fdinfo/{fd}", s.record.pid);
                        match read_small(&path).map(|t| fdinfo_value(&t, &key)) {
                            Ok(Some((v, u))) => {
                                total = total.saturating_add(v);
                                unit = unit.or(u);
                            }
                            Ok(None) => problems.push(format!("{path} has no {key} line")),
                            Err(why) => problems.push(why),
                        }
                    }
                }
                // A device not opened yet reads 0: a DRM client's counters start at 0 when
                // its file is opened. One that is open but lacks the key cannot be read.
                match problems.first() {
                    Some(why) => Err(why.clone()),
                    None => Ok((
                        CounterReading {
                            at_ns,
                            value: total,
                        },
                        unit,
                    )),
                }
            }
        }
    }
}

/// Keep `path` once in `list`, up to [`MAX_PATHS`].
fn keep(set: &mut HashSet<String>, list: &mut Vec<String>, truncated: &mut bool, path: String) {
    if set.contains(&path) {
        return;
    }
    if list.len() >= MAX_PATHS {
        *truncated = true;
        return;
    }
    set.insert(path.clone());
    list.push(path);
}

/// `root` and every descendant; the subreaper's other children are orphaned descendants of
/// the serve (the subreaper launched only the serve) and belong to the tree too.
fn walk_tree(root: u32, subreaper: Option<u32>) -> Result<BTreeSet<u32>, String> {
    if !std::path::Path::new("/proc/self/task").exists() {
        return Err("/proc is not mounted: the serve's processes cannot be looked at".into());
    }
    let mut found = BTreeSet::from([root]);
    let mut queue = vec![root];
    if let Some(reaper) = subreaper {
        for orphan in children(reaper)? {
            if found.insert(orphan) {
                queue.push(orphan);
            }
        }
    }
    while let Some(pid) = queue.pop() {
        if found.len() >= MAX_PROCESSES * 4 {
            break;
        }
        for child in children(pid)? {
            if found.insert(child) {
                queue.push(child);
            }
        }
    }
    Ok(found)
}

/// The children of `pid`, from every one of its threads (a child belongs to the thread that
/// forked it). A process that is gone has none.
fn children(pid: u32) -> Result<Vec<u32>, String> {
    let Ok(process) = Process::new(pid as i32) else {
        return Ok(Vec::new());
    };
    let Ok(tasks) = process.tasks() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        match task.children() {
            Ok(c) => out.extend(c),
            Err(procfs::ProcError::NotFound(Some(path))) if path.ends_with("children") => {
                return Err(
                    "this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): the serve's descendants cannot be found".into(),
                )
            }
            Err(_) => {}
        }
    }
    Ok(out)
}

/// A small file's text, at most [`COUNTER_FILE_MAX`] bytes.
fn read_small(path: &str) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut text = String::new();
    file.take(COUNTER_FILE_MAX)
        .read_to_string(&mut text)
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(text)
}

/// The number a counter file holds now (`run` checks the file with this before anything
/// starts, and the probe reads it with this before and after the replies).
pub fn read_counter_file(path: &str) -> Result<u64, String> {
    let text = read_small(path)?;
    parse_counter(&text).ok_or_else(|| format!("{path} does not hold a number: {:?}", cut(&text)))
}

fn cut(text: &str) -> String {
    text.trim().chars().take(40).collect()
}

/// The number a counter file holds: its first word.
pub fn parse_counter(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// A counter's unit from its file's name: `npu_busy_time_us` counts microseconds.
pub fn unit_of_name(path: &str) -> Option<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    ["us", "ns", "ms"]
        .into_iter()
        .find(|u| name.ends_with(&format!("_{u}")))
        .map(str::to_string)
}

/// `KEY: N [unit]` from the text of an fdinfo file: the value and its unit.
pub fn fdinfo_value(text: &str, key: &str) -> Option<(u64, Option<String>)> {
    text.lines().find_map(|line| {
        let (k, rest) = line.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        let mut words = rest.split_whitespace();
        let value = words.next()?.parse().ok()?;
        Some((value, words.next().map(str::to_string)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_fdinfo_lines_parse_and_refuse_garbage() {
        assert_eq!(parse_counter("123456\n"), Some(123456));
        assert_eq!(parse_counter("busy\n"), None);
        assert_eq!(parse_counter(""), None);
        assert_eq!(
            unit_of_name("/sys/class/accel/accel0/device/npu_busy_time_us").as_deref(),
            Some("us")
        );
        assert_eq!(unit_of_name("/tmp/busy"), None);
        // The shape of a DRM client's fdinfo (Documentation/gpu/drm-usage-stats.rst).
        let fdinfo = "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1074\ndrm-driver:\tintel_vpu\ndrm-client-id:\t7\ndrm-engine-npu:\t8402000 ns\n";
        assert_eq!(
            fdinfo_value(fdinfo, "drm-engine-npu"),
            Some((8_402_000, Some("ns".to_string())))
        );
        assert_eq!(fdinfo_value(fdinfo, "pos"), Some((0, None)));
        assert_eq!(fdinfo_value(fdinfo, "drm-engine"), None, "whole keys only");
        assert_eq!(fdinfo_value(fdinfo, "drm-driver"), None, "not a number");
    }

    #[test]
    fn this_process_is_walked_and_its_maps_and_files_read() {
        // This test process as the serve: it maps its own executable and holds this file open.
        let me = std::process::id();
        let held = tempfile::NamedTempFile::new().unwrap();
        let held_path = held.path().display().to_string();
        let device = Regex::new(&regex::escape(&held_path)).unwrap();
        let mut p = RouteProbe::start(Some(me), None, 0, Some(&device), None);
        p.replies_done();
        let r = p.record();
        assert!(r.read_after_replies);
        assert_eq!(r.processes[0].pid, me);
        let exe = std::env::current_exe().unwrap().display().to_string();
        assert!(
            r.processes[0].maps.contains(&exe),
            "{:?}",
            r.processes[0].maps
        );
        assert!(r.processes[0].open.contains(&held_path), "{r:?}");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}
