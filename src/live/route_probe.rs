//! Route evidence from the serve's own processes, read from /proc while the replies stream: the
//! files each process of the serve's tree maps, the files it holds open, and the device's busy
//! counter. What a release names in its log can change; what its processes map and hold open
//! cannot be renamed.
//!
//! The tree is the launched process and every descendant: its children, theirs, and the
//! orphans the supervisor adopted as their subreaper (a daemon that forked twice leaves its
//! parent's tree but is reparented to the supervisor, which launched only the serve). It is
//! walked on every look through `/proc/PID/task/TID/children`, which costs a small read a
//! thread (the conditions sampler looks as often as its budget allows). `/proc/PID/maps` is
//! read only when a process is first seen, when the tree changes, and once after the replies:
//! a serve maps its backends while it loads, and re-reading a large maps file every 250 ms
//! would cost the gate what it must leave to the serve. Open files are read on every look, so
//! a device held while the replies stream is seen.
//!
//! What each file is is recorded with it (issue 30), as a name proves nothing: for a mapped
//! file, its mappings' permissions and, once one is executable, its ELF header; for an open
//! file, its kind from stat(2) of its /proc/PID/fd link.
//!
//! Everything kept is bounded: [`MAX_PROCESSES`], and [`MAX_PATHS`] per process for maps and
//! for open files. Evidence that cannot be read is recorded as a problem, never guessed: the
//! verdict then FAILs the check with the reason.
//!
//! The /proc parsing is procfs's for maps and stat; fd links and task children are read by
//! hand ([`crate::live::proc_scan`], a system call an fd instead of four); fdinfo keys of DRM
//! drivers (`drm-engine-<name>: N ns`) are not among procfs's typed fields, so an fdinfo file is
//! read as text here.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use procfs::process::{MMPermissions, MMapPath, MemoryMap, Process};
use regex::Regex;

use crate::archive::record::{
    CounterReading, CounterRecord, FileKind, Header, MapKind, ProcessRecord, RouteRecord,
};
use crate::judging::verdict::BusySource;
use crate::live::proc_scan::{is_drm_node, open_files, read_small, OpenFile};
use crate::live::serve_tree::walk_tree;

/// The most processes of a tree recorded; a serve that forks more is recorded up to here.
pub const MAX_PROCESSES: usize = 256;
/// The most paths recorded per process, for maps and for open files each.
pub const MAX_PATHS: usize = 4096;
/// The most bytes of names (mapped and open paths) kept over the whole tree, the names the
/// route patterns match aside: a serve whose helpers hold many files, each with a long name,
/// once made these lists 426 MiB (17 GB by the per-process caps alone). Past it a process is
/// marked `truncated`, and keeps the names the patterns match.
pub const MAX_NAME_BYTES: usize = 2 << 20;
/// The most names a process keeps that the route patterns match, past [`MAX_NAME_BYTES`].
const MAX_MATCHING: usize = 256;
/// The most problems recorded.
const MAX_PROBLEMS: usize = 32;
/// The most fds of one process looked at in one sample.
const MAX_FDS: usize = 16_384;

/// What is known of one process of the tree.
#[derive(Debug)]
struct Seen {
    record: ProcessRecord,
    /// Names it keeps that the route patterns match, for [`MAX_MATCHING`].
    matching: usize,
    /// Its fds whose file matched `--route-device` when last read.
    device_fds: Vec<i32>,
    /// Its fds on a DRM node when last read, for the footprint's device memory.
    drm_fds: Vec<OpenFile>,
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
    /// The route patterns: names they match are kept past the budget.
    patterns: Vec<Regex>,
    /// Bytes of names that may still be kept ([`MAX_NAME_BYTES`]).
    name_bytes_left: usize,
    seen: Vec<Seen>,
    index: HashMap<u32, usize>,
    tree: BTreeSet<u32>,
    problems: Vec<String>,
    counter: Option<CounterRecord>,
    read_after_replies: bool,
}

impl RouteProbe {
    /// Start: walk the tree under `root`, read every process's maps and open files, and take
    /// the busy counter's first reading. Names `patterns` match are kept first.
    pub fn start(
        root: Option<u32>,
        subreaper: Option<u32>,
        base_ns: u64,
        device: Option<&Regex>,
        busy: Option<&BusySource>,
        patterns: Vec<Regex>,
    ) -> RouteProbe {
        let mut probe = RouteProbe {
            root,
            subreaper,
            base_ns,
            device: device.cloned(),
            busy: busy.cloned(),
            patterns,
            name_bytes_left: MAX_NAME_BYTES,
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
            self.read_open(i);
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
                map_kinds: Some(Default::default()),
                open_kinds: Some(Default::default()),
                ..ProcessRecord::default()
            },
            matching: 0,
            device_fds: Vec::new(),
            drm_fds: Vec::new(),
        });
        Some(self.seen.len() - 1)
    }

    fn read_maps(&mut self, i: usize, process: &Process) {
        match process.maps() {
            Ok(maps) => {
                let seen = &mut self.seen[i];
                let pid = seen.record.pid;
                let kinds = seen.record.map_kinds.get_or_insert_with(Default::default);
                for map in maps {
                    let MMapPath::Path(path) = &map.pathname else {
                        continue;
                    };
                    let path = path.display().to_string();
                    let mut budget = Budget {
                        bytes_left: &mut self.name_bytes_left,
                        matching: &mut seen.matching,
                        patterns: &self.patterns,
                    };
                    if !kinds.contains_key(&path)
                        && !budget.keep(&mut seen.record.maps, &mut seen.record.truncated, &path)
                    {
                        continue;
                    }
                    let kind = kinds.entry(path.clone()).or_default();
                    note_mapping(kind, pid, &map, &path);
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

    fn read_open(&mut self, i: usize) {
        let pid = self.seen[i].record.pid;
        let files = match open_files(pid, MAX_FDS) {
            Ok(files) => files,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.problem(format!("/proc/{pid}/fd: {e}"));
                return;
            }
        };
        let seen = &mut self.seen[i];
        let kinds = seen.record.open_kinds.get_or_insert_with(Default::default);
        seen.device_fds.clear();
        seen.drm_fds.clear();
        for OpenFile { fd, path } in files {
            let mut budget = Budget {
                bytes_left: &mut self.name_bytes_left,
                matching: &mut seen.matching,
                patterns: &self.patterns,
            };
            if is_drm_node(Path::new(&path)) {
                seen.drm_fds.push(OpenFile {
                    fd,
                    path: path.clone(),
                });
            }
            if !kinds.contains_key(&path)
                && !budget.keep(&mut seen.record.open, &mut seen.record.truncated, &path)
            {
                continue;
            }
            // Stat'ed once a path; again while it could not be (closed between the link's read
            // and the stat, say).
            if matches!(kinds.get(&path), None | Some(FileKind::Unread(_))) {
                kinds.insert(path.clone(), open_file_kind(pid, fd));
            }
            // Only a character device is a device, and only a device's fdinfo is its busy
            // counter: a regular file whose name matches could advance its own position while
            // the device beside it sits idle (issue 30).
            if kinds.get(&path) == Some(&FileKind::CharDevice)
                && self.device.as_ref().is_some_and(|re| re.is_match(&path))
            {
                seen.device_fds.push(fd);
            }
        }
    }

    /// The fds `pid` held on a DRM node at this probe's last look, for its memory keys; `None`
    /// where the probe does not look at `pid` (past [`MAX_PROCESSES`]).
    pub fn drm_fds(&self, pid: u32) -> Option<&[OpenFile]> {
        self.index
            .get(&pid)
            .map(|&i| self.seen[i].drm_fds.as_slice())
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

/// What a new name may take of the bounds on what is kept.
struct Budget<'a> {
    /// Bytes of names left over the whole tree.
    bytes_left: &'a mut usize,
    /// Names the process keeps that the patterns match.
    matching: &'a mut usize,
    patterns: &'a [Regex],
}

impl Budget<'_> {
    /// Keep `path`, not kept before, in `list`: up to [`MAX_PATHS`] names a list and
    /// [`MAX_NAME_BYTES`] over the tree, and past those, up to [`MAX_MATCHING`] names a
    /// process that the route patterns match (the evidence the verdict looks for is never
    /// crowded out). Whether it was kept; a name left out marks the process `truncated`.
    fn keep(&mut self, list: &mut Vec<String>, truncated: &mut bool, path: &str) -> bool {
        if list.len() < MAX_PATHS && path.len() <= *self.bytes_left {
            *self.bytes_left -= path.len();
        } else if *self.matching < MAX_MATCHING && self.patterns.iter().any(|p| p.is_match(path)) {
            *self.matching += 1;
        } else {
            *truncated = true;
            return false;
        }
        list.push(path.to_string());
        true
    }
}

/// Add one mapping of `path` to what is known of how it is mapped: its permissions, and once a
/// mapping of it is executable, its ELF header (read again while it could not be).
fn note_mapping(kind: &mut MapKind, pid: u32, map: &MemoryMap, path: &str) {
    let perms = map.perms.as_str();
    if !kind.perms.contains(&perms) {
        kind.perms.push(perms);
    }
    let unread = matches!(kind.header, None | Some(Header::Unread(_)));
    if map.perms.contains(MMPermissions::EXECUTE) && unread {
        let (header, via) = mapped_header(pid, map, path);
        kind.header = Some(header);
        kind.header_via = via.map(str::to_string);
    }
}

/// Bytes of an ELF header that say what it is: the magic, class, data, version, OS ABI and
/// padding (16), then e_type (2).
const ELF_TYPE_END: usize = 18;
/// e_type of a shared object.
const ET_DYN: u16 = 3;

/// What the file of `map` is, by its ELF header, and how it was read: through
/// /proc/PID/map_files, the very file mapped, where the gate may (it needs
/// CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN); else through `path`, checked to be the file
/// mapped by its inode.
fn mapped_header(pid: u32, map: &MemoryMap, path: &str) -> (Header, Option<&'static str>) {
    let (start, end) = map.address;
    let exact = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
    let by_map_files = match read_header(&exact, None) {
        Ok(header) => return (header, Some("map_files")),
        Err(why) => why,
    };
    match read_header(path, Some(map.inode)) {
        Ok(header) => (header, Some("path")),
        Err(why) => (
            Header::Unread(format!("{exact}: {by_map_files}; {path}: {why}")),
            None,
        ),
    }
}

/// The header of the file at `path`, at most [`ELF_TYPE_END`] bytes read; with `inode`, the file
/// must be that inode. Only a regular file is opened (a device is never opened by the gate, and
/// a FIFO never read), and without blocking.
fn read_header(path: &str, inode: Option<u64>) -> Result<Header, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(format!("it is {}, not a regular file", file_kind(&meta)));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if let Some(want) = inode.filter(|&i| i != meta.ino()) {
        return Err(format!(
            "the file there now is not the one mapped (inode {}, the mapping's {want})",
            meta.ino()
        ));
    }
    let mut head = Vec::with_capacity(ELF_TYPE_END);
    file.take(ELF_TYPE_END as u64)
        .read_to_end(&mut head)
        .map_err(|e| e.to_string())?;
    Ok(header_of(&head))
}

/// What a file's first bytes say it is. e_type is in the file's own byte order (EI_DATA:
/// 1 little-endian, 2 big-endian).
pub fn header_of(head: &[u8]) -> Header {
    if head.len() < ELF_TYPE_END || !head.starts_with(b"\x7fELF") {
        return Header::NotElf;
    }
    let bytes = [head[16], head[17]];
    let e_type = match head[5] {
        2 => u16::from_be_bytes(bytes),
        _ => u16::from_le_bytes(bytes),
    };
    match e_type {
        ET_DYN => Header::ElfSharedObject,
        other => Header::ElfOfType(other),
    }
}

/// What fd `fd` of process `pid` is open on: stat(2) of its /proc link, which follows it to the
/// open file itself without opening anything.
fn open_file_kind(pid: u32, fd: i32) -> FileKind {
    match std::fs::metadata(format!("/proc/{pid}/fd/{fd}")) {
        Ok(meta) => file_kind(&meta),
        Err(e) => FileKind::Unread(e.to_string()),
    }
}

fn file_kind(meta: &std::fs::Metadata) -> FileKind {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_char_device() {
        FileKind::CharDevice
    } else if t.is_block_device() {
        FileKind::BlockDevice
    } else if t.is_file() {
        FileKind::Regular
    } else if t.is_dir() {
        FileKind::Directory
    } else if t.is_fifo() {
        FileKind::Fifo
    } else if t.is_socket() {
        FileKind::Socket
    } else {
        FileKind::Other
    }
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
        let mut p = RouteProbe::start(Some(me), None, 0, Some(&device), None, Vec::new());
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
        // Its own executable is mapped as code (r-xp) and is ELF; the held file is a regular
        // file (issue 30).
        let kind = &r.processes[0].map_kinds.as_ref().unwrap()[&exe];
        assert!(kind.executable(), "{kind:?}");
        assert!(
            matches!(
                kind.header,
                Some(Header::ElfSharedObject | Header::ElfOfType(2))
            ),
            "{kind:?}"
        );
        assert_eq!(
            r.processes[0].open_kinds.as_ref().unwrap()[&held_path],
            FileKind::Regular
        );
    }

    #[test]
    fn elf_headers_are_told_by_magic_and_e_type_in_their_byte_order() {
        let mut head = b"\x7fELF\x02\x01\x01".to_vec();
        head.resize(16, 0);
        let with_type = |head: &[u8], t: [u8; 2]| [head, &t[..], &[0; 46][..]].concat();
        assert_eq!(
            header_of(&with_type(&head, [3, 0])),
            Header::ElfSharedObject
        );
        assert_eq!(header_of(&with_type(&head, [2, 0])), Header::ElfOfType(2));
        head[5] = 2; // big-endian
        assert_eq!(
            header_of(&with_type(&head, [0, 3])),
            Header::ElfSharedObject
        );
        assert_eq!(
            header_of(&with_type(&head, [3, 0])),
            Header::ElfOfType(0x300)
        );
        assert_eq!(header_of(&head), Header::NotElf, "too short for e_type");
        assert_eq!(header_of(b"libggml-cuda.so: a text file\n"), Header::NotElf);
        assert_eq!(header_of(b""), Header::NotElf);
    }

    #[test]
    fn a_header_read_by_path_must_be_the_inode_mapped_and_a_device_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libx.so");
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(64, 0);
        elf[16] = 3;
        std::fs::write(&path, &elf).unwrap();
        let p = path.to_str().unwrap();
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(p).unwrap().ino();
        assert_eq!(read_header(p, Some(ino)), Ok(Header::ElfSharedObject));
        let e = read_header(p, Some(ino + 1)).unwrap_err();
        assert!(
            e.starts_with("the file there now is not the one mapped"),
            "{e}"
        );
        let e = read_header("/dev/null", None).unwrap_err();
        assert_eq!(e, "it is a character device, not a regular file");
        assert!(read_header(dir.path().join("gone").to_str().unwrap(), None).is_err());
    }

    #[test]
    fn only_a_character_device_held_open_gives_the_fdinfo_counter() {
        // This test process holds /dev/null and a regular file both named by the pattern; only
        // the device's fdinfo is read.
        let null = std::fs::File::open("/dev/null").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("null");
        std::fs::write(&fake, b"").unwrap();
        let held_fake = std::fs::File::open(&fake).unwrap();
        let device = Regex::new("/null$").unwrap();
        let busy = BusySource::Fdinfo("pos".into());
        let mut p = RouteProbe::start(
            Some(std::process::id()),
            None,
            0,
            Some(&device),
            Some(&busy),
            Vec::new(),
        );
        let me = &p.seen[0];
        let fd = |f: &std::fs::File| std::os::fd::AsRawFd::as_raw_fd(f);
        assert!(me.device_fds.contains(&fd(&null)), "{:?}", me.device_fds);
        assert!(
            !me.device_fds.iter().any(|&d| d == fd(&held_fake)),
            "{:?}",
            me.device_fds
        );
        let kinds = me.record.open_kinds.as_ref().unwrap();
        assert_eq!(kinds["/dev/null"], FileKind::CharDevice);
        assert_eq!(kinds[fake.to_str().unwrap()], FileKind::Regular);
        p.replies_done();
        assert_eq!(p.record().counter.unwrap().problem, None);
    }

    #[test]
    fn names_past_the_budget_are_left_out_but_those_the_patterns_match_are_kept() {
        let patterns = [Regex::new("libggml-npu").unwrap()];
        let mut bytes_left = 40;
        let mut matching = 0;
        let mut list = Vec::new();
        let mut truncated = false;
        let mut take = |path: &str, list: &mut Vec<String>, truncated: &mut bool| {
            Budget {
                bytes_left: &mut bytes_left,
                matching: &mut matching,
                patterns: &patterns,
            }
            .keep(list, truncated, path)
        };
        let long = "/tmp/".to_string() + &"x".repeat(30);
        assert!(take(&long, &mut list, &mut truncated));
        assert!(!truncated);
        // 35 of 40 bytes taken: the next ordinary name is left out, and says so.
        assert!(!take("/tmp/another-file", &mut list, &mut truncated));
        assert!(truncated);
        // A name the route patterns match is kept all the same, up to MAX_MATCHING of them.
        for n in 0..MAX_MATCHING {
            assert!(take(
                &format!("/opt/libggml-npu-{n}.so"),
                &mut list,
                &mut truncated
            ));
        }
        assert!(!take("/opt/libggml-npu-last.so", &mut list, &mut truncated));
        assert_eq!(list.len(), 1 + MAX_MATCHING);
        assert_eq!(list[0], long);
    }
}
