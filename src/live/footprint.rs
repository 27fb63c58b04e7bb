//! The serve's footprint read from /proc (issue 34; docs/footprint.md): its memory summed over
//! its process tree, and the device's memory where the box exposes it, at one look. The
//! conditions sampler reads it at each look at the serve's tree and the replies at each end.
//!
//! - Memory: /proc/PID/status of each process of the tree, once per process (its threads share
//!   one address space, and summing /proc/PID/task/*/status would count it once a thread).
//!   RssAnon + VmSwap is the figure judged: a leak lands in anonymous memory, and one the
//!   kernel swaps out leaves RSS (ollama#18106). RssFile (the model mapped with mmap) and
//!   RssShmem are kept apart. These are the kernel's counters, not a page walk: cheap enough
//!   for every sample (proc(5): "the value may not be very precise", a few pages at most).
//! - Device memory: the DRM fdinfo memory keys of every fd the tree holds on /dev/dri/* or
//!   /dev/accel/* (Documentation/gpu/drm-usage-stats.rst: `drm-total-<region>`,
//!   `drm-resident-<region>`, `drm-memory-<region>`, ...), each DRM client once (by
//!   `drm-pdev` and `drm-client-id`: dup'd fds and forked children share one); or the counter
//!   file `--device-memory` names, which wins where given.
//!
//! The fd's link is read, never followed: the serve cannot make the gate open a path of its
//! choosing. Every read is bounded: 16,384 fds a process, 64 KiB an fdinfo file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use procfs::process::Process;

use crate::archive::record::MemoryReading;
use crate::args::footprint::MemoryUnit;
use crate::live::proc_scan::{self, is_drm_node, open_files, OpenFile};
use crate::live::serve_tree::walk_tree;
use crate::live::throttle::{parse_integer, read_small};

/// The most fds of one process looked at in one read.
const MAX_FDS: usize = 16_384;

/// `--device-memory`: a counter file and the unit it counts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMemoryFile {
    /// The file, e.g. /sys/class/accel/accel0/device/npu_memory_utilization.
    pub path: PathBuf,
    /// What its number counts.
    pub unit: MemoryUnit,
}

impl DeviceMemoryFile {
    /// Its reading now, bytes; `None` where it did not read as a number.
    pub fn read(&self) -> Option<u64> {
        let text = read_small(&self.path).ok()?;
        let n = u64::try_from(parse_integer(&text)?).ok()?;
        Some(n.saturating_mul(self.unit.bytes()))
    }

    /// Whether it reads as a number now: one line saying what is wrong, for exit 2 before
    /// anything starts.
    pub fn check(&self) -> Result<(), String> {
        let example = "a file holding the device's memory in use, e.g. /sys/class/accel/accel0/device/npu_memory_utilization";
        let text = read_small(&self.path).map_err(|why| {
            format!(
                "--device-memory {} {why}; give {example}",
                self.path.display()
            )
        })?;
        match parse_integer(&text) {
            Some(n) if n >= 0 => Ok(()),
            _ => {
                let shown: String = text.trim().chars().take(40).collect();
                Err(format!(
                    "--device-memory {} does not read as a number ({shown:?}); give {example}",
                    self.path.display()
                ))
            }
        }
    }
}

/// The serve's memory now: its tree walked from `root` (and the orphans `subreaper` adopted),
/// each process's status and DRM fds read, and `device` read where given. `None` where /proc
/// shows none of the tree (the serve is gone, or /proc is not there).
pub fn read_tree(
    root: u32,
    subreaper: Option<u32>,
    device: Option<&DeviceMemoryFile>,
) -> Option<MemoryReading> {
    let tree = walk_tree(root, subreaper).ok()?;
    read_processes(&tree, device, |_| None)
}

/// The memory of the processes `pids` (a tree already walked), and `device` where given.
/// `None` where none of them could be read.
/// `drm_fds` gives a process's fds on DRM nodes where they were just listed (by the route
/// evidence, in the same sample); a process it gives `None` for has its fds listed here.
pub fn read_processes<'a>(
    pids: &BTreeSet<u32>,
    device: Option<&DeviceMemoryFile>,
    drm_fds: impl Fn(u32) -> Option<&'a [OpenFile]>,
) -> Option<MemoryReading> {
    let mut reading = MemoryReading::default();
    let mut clients = DrmClients::default();
    let drm_box = box_has_drm_nodes();
    for &pid in pids {
        let Ok(process) = Process::new(pid as i32) else {
            continue;
        };
        let Ok(status) = process.status() else {
            continue;
        };
        // A thread's own entry is never in the tree (children are processes), but a pid
        // reused by a thread of another process would be: count a process once, by its tgid.
        if status.tgid != status.pid {
            continue;
        }
        reading.processes += 1;
        let kib = |v: Option<u64>| v.unwrap_or(0).saturating_mul(1024);
        reading.rss_anon = reading.rss_anon.saturating_add(kib(status.rssanon));
        reading.swap = reading.swap.saturating_add(kib(status.vmswap));
        reading.rss_file = reading.rss_file.saturating_add(kib(status.rssfile));
        reading.rss_shmem = reading.rss_shmem.saturating_add(kib(status.rssshmem));
        match drm_fds(pid) {
            Some(fds) => read_drm_fds(pid, fds, &mut clients),
            // A box with no DRM node has none for the serve to hold: its fds are not listed
            // (172 links for vLLM, each a system call, on every reply).
            None if !drm_box => {}
            None => {
                let fds = open_files(pid, MAX_FDS).unwrap_or_default();
                let on_drm: Vec<OpenFile> = fds
                    .into_iter()
                    .filter(|f| is_drm_node(Path::new(&f.path)))
                    .collect();
                read_drm_fds(pid, &on_drm, &mut clients);
            }
        }
    }
    if reading.processes == 0 {
        return None;
    }
    reading.drm = clients.summed();
    reading.device_file = device.and_then(DeviceMemoryFile::read);
    Some(reading)
}

/// Whether the box has a DRM node directory: /dev/dri or /dev/accel.
fn box_has_drm_nodes() -> bool {
    Path::new("/dev/dri").exists() || Path::new("/dev/accel").exists()
}

/// The fdinfo of each of `pid`'s fds on a DRM node, into `clients`.
fn read_drm_fds(pid: u32, on_drm: &[OpenFile], clients: &mut DrmClients) {
    for file in on_drm {
        let fdinfo = format!("/proc/{pid}/fdinfo/{}", file.fd);
        if let Ok(text) = proc_scan::read_small(&fdinfo) {
            clients.add(&file.path, &text);
        }
    }
}

/// The DRM clients seen in one read, each once, with their memory keys.
#[derive(Debug, Default)]
pub struct DrmClients {
    /// (device, client id) -> its memory keys in bytes.
    by_client: BTreeMap<(String, String), BTreeMap<String, u64>>,
}

impl DrmClients {
    /// One fd's fdinfo `text`, of an fd linked to `node`: its memory keys under its client, a
    /// client seen before (a dup'd fd, a forked child's copy) counted once. An fd with no
    /// memory key adds nothing.
    pub fn add(&mut self, node: &str, text: &str) {
        let keys = drm_memory_keys(text);
        if keys.is_empty() {
            return;
        }
        let value_of = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        // The client id is unique per device (drm-pdev, else the node); without one, the fd
        // stands for itself (a driver that prints memory keys prints the id too).
        let device = value_of("drm-pdev").unwrap_or_else(|| node.to_string());
        let client =
            value_of("drm-client-id").unwrap_or_else(|| format!("fd {}", self.by_client.len()));
        self.by_client.entry((device, client)).or_insert(keys);
    }

    /// Each key summed over the clients.
    pub fn summed(&self) -> BTreeMap<String, u64> {
        let mut sum: BTreeMap<String, u64> = BTreeMap::new();
        for keys in self.by_client.values() {
            for (k, v) in keys {
                let e = sum.entry(k.clone()).or_default();
                *e = e.saturating_add(*v);
            }
        }
        sum
    }
}

/// The memory keys of a DRM client's fdinfo text (drm-usage-stats.rst: `drm-<kind>-<region>:
/// <uint> [KiB|MiB]`, bytes without a unit), in bytes. Only the memory kinds: the engine keys
/// (`drm-engine-*`, `drm-cycles-*`) are times, not sizes.
pub fn drm_memory_keys(text: &str) -> BTreeMap<String, u64> {
    const KINDS: [&str; 6] = [
        "drm-total-",
        "drm-shared-",
        "drm-resident-",
        "drm-purgeable-",
        "drm-active-",
        "drm-memory-",
    ];
    let mut keys = BTreeMap::new();
    for line in text.lines().take(4096) {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let Some(kind) = KINDS.iter().find(|k| key.starts_with(**k)) else {
            continue;
        };
        // `drm-total-cycles-<engine>` (xe) counts GPU cycles, not bytes.
        if key.len() == kind.len() || key.len() > 128 || key.starts_with("drm-total-cycles-") {
            continue;
        }
        let mut words = rest.split_whitespace();
        let Some(Ok(n)) = words.next().map(str::parse::<u64>) else {
            continue;
        };
        let per = match words.next() {
            None => 1,
            Some("KiB") => 1024,
            Some("MiB") => 1024 * 1024,
            Some(_) => continue,
        };
        keys.insert(key.to_string(), n.saturating_mul(per));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a DRM client's fdinfo, as drm-usage-stats.rst and xe's documented output
    /// (kernel.org xe-drm-usage-stats) give it: units none, KiB and MiB.
    const XE: &str = "pos:\t0\nflags:\t0100002\nmnt_id:\t26\nino:\t685\ndrm-driver:\txe\ndrm-client-id:\t3\ndrm-pdev:\t0000:03:00.0\ndrm-total-system0:\t0\ndrm-shared-system0:\t0\ndrm-active-system0:\t0\ndrm-resident-system0:\t0\ndrm-purgeable-system0:\t0\ndrm-total-gtt:\t192 KiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\ndrm-resident-gtt:\t192 KiB\ndrm-total-vram0:\t23992 KiB\ndrm-shared-vram0:\t16 MiB\ndrm-active-vram0:\t0\ndrm-resident-vram0:\t23992 KiB\ndrm-purgeable-vram0:\t0\ndrm-cycles-rcs:\t28257900\ndrm-total-cycles-rcs:\t7655183225\ndrm-engine-render:\t12345 ns\n";

    #[test]
    fn memory_keys_read_in_their_units_and_engine_keys_are_not_sizes() {
        let keys = drm_memory_keys(XE);
        assert_eq!(keys["drm-resident-vram0"], 23992 * 1024);
        assert_eq!(keys["drm-shared-vram0"], 16 * 1024 * 1024);
        assert_eq!(keys["drm-total-gtt"], 192 * 1024);
        assert_eq!(keys["drm-total-system0"], 0);
        assert!(!keys.contains_key("drm-cycles-rcs"));
        assert!(!keys.contains_key("drm-total-cycles-rcs"));
        assert!(!keys.keys().any(|k| k.starts_with("drm-engine")));
        // Garbage and unknown units are left out, never guessed.
        let odd = drm_memory_keys("drm-total-memory: lots\ndrm-resident-memory: 5 GiB\ndrm-total-: 4\ndrm-memory-vram: 7\n");
        assert_eq!(odd, BTreeMap::from([("drm-memory-vram".to_string(), 7)]));
    }

    #[test]
    fn a_client_is_counted_once_however_many_fds_hold_it() {
        let mut c = DrmClients::default();
        c.add(
            "/dev/accel/accel0",
            "drm-client-id: 7\ndrm-total-memory: 10 MiB\n",
        );
        // The same client through a dup'd fd, and a forked child's copy.
        c.add(
            "/dev/accel/accel0",
            "drm-client-id: 7\ndrm-total-memory: 10 MiB\n",
        );
        c.add(
            "/dev/accel/accel0",
            "drm-client-id: 8\ndrm-total-memory: 1 MiB\n",
        );
        // Client 7 of another device is another client.
        c.add(
            "/dev/dri/renderD128",
            "drm-pdev: 0000:c4:00.1\ndrm-client-id: 7\ndrm-total-memory: 2 MiB\n",
        );
        // An fd without memory keys adds nothing.
        c.add("/dev/dri/card0", "drm-client-id: 9\ndrm-engine-gfx: 5 ns\n");
        assert_eq!(
            c.summed(),
            BTreeMap::from([("drm-total-memory".to_string(), 13 * 1024 * 1024)])
        );
    }

    #[test]
    fn only_drm_nodes_are_read() {
        assert!(is_drm_node(Path::new("/dev/accel/accel0")));
        assert!(is_drm_node(Path::new("/dev/dri/renderD128")));
        assert!(!is_drm_node(Path::new("/dev/null")));
        assert!(!is_drm_node(Path::new("/tmp/dev/dri/card0")));
        assert!(!is_drm_node(Path::new("/dev/driver")));
    }

    #[test]
    fn this_process_memory_is_read_once_and_anonymous_memory_shows() {
        let me = std::process::id();
        let before = read_tree(me, None, None).expect("this process reads");
        assert!(before.processes >= 1);
        assert!(before.rss_anon > 0 && before.rss_file > 0, "{before:?}");
        // 64 MiB written page by page is resident anonymous memory.
        let mut held = vec![0u8; 64 << 20];
        for i in (0..held.len()).step_by(4096) {
            held[i] = 1;
        }
        let after = read_tree(me, None, None).unwrap();
        std::hint::black_box(&held);
        assert!(
            after.rss_anon >= before.rss_anon + (48 << 20),
            "{} then {}",
            before.rss_anon,
            after.rss_anon
        );
        assert_eq!(read_tree(u32::MAX - 1, None, None), None, "no such process");
    }

    #[test]
    fn a_device_counter_reads_in_its_unit_and_is_checked_before_the_run() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("npu_memory_utilization");
        std::fs::write(&path, "4096\n").unwrap();
        let bytes = DeviceMemoryFile {
            path: path.clone(),
            unit: MemoryUnit::Bytes,
        };
        assert_eq!(bytes.read(), Some(4096));
        assert!(bytes.check().is_ok());
        let kib = DeviceMemoryFile {
            path: path.clone(),
            unit: MemoryUnit::Kib,
        };
        assert_eq!(kib.read(), Some(4096 * 1024));
        std::fs::write(&path, "N/A\n").unwrap();
        let e = bytes.check().unwrap_err();
        assert!(
            e.starts_with("--device-memory ") && e.contains("does not read as a number"),
            "{e}"
        );
        assert_eq!(bytes.read(), None);
        std::fs::write(&path, "-5\n").unwrap();
        assert!(bytes.check().is_err());
        let gone = DeviceMemoryFile {
            path: d.path().join("missing"),
            unit: MemoryUnit::Bytes,
        };
        assert!(gone.check().unwrap_err().contains("missing"));
    }

    // The tests below each name the cargo mutant they catch (docs/testing.md).

    /// An fdinfo file is read whole up to 64 KiB, and no further (the serve's driver is not
    /// trusted to keep it small), through the bounded read of /proc's small files.
    #[test]
    fn an_fdinfo_file_is_read_whole_up_to_its_bound() {
        let d = tempfile::tempdir().unwrap();
        let small = d.path().join("small");
        std::fs::write(&small, "drm-client-id:\t3\ndrm-total-gtt:\t192 KiB\n").unwrap();
        assert_eq!(
            proc_scan::read_small(small.to_str().unwrap())
                .ok()
                .as_deref(),
            Some("drm-client-id:\t3\ndrm-total-gtt:\t192 KiB\n")
        );
        let big = d.path().join("big");
        std::fs::write(&big, "x".repeat(100 * 1024)).unwrap();
        assert_eq!(
            proc_scan::read_small(big.to_str().unwrap())
                .ok()
                .map(|t| t.len()),
            Some(64 * 1024)
        );
        assert!(proc_scan::read_small(d.path().join("gone").to_str().unwrap()).is_err());
    }

    /// In the kernel's order (drm-usage-stats.rst, xe: `drm-driver` first, then
    /// `drm-client-id`, then `drm-pdev`) a client is told by its own id and device keys, not
    /// by the first line: client 3 of two devices is two clients. Catches `k.trim() == key`
    /// made `!=` (both fds read as device "xe", client "xe": one client).
    #[test]
    fn clients_are_told_apart_by_their_id_and_device_lines_wherever_they_stand() {
        let mut c = DrmClients::default();
        c.add(
            "/dev/dri/renderD128",
            "drm-driver:\txe\ndrm-client-id:\t3\ndrm-pdev:\t0000:03:00.0\ndrm-total-gtt:\t1 MiB\n",
        );
        c.add(
            "/dev/dri/renderD129",
            "drm-driver:\txe\ndrm-client-id:\t3\ndrm-pdev:\t0000:04:00.0\ndrm-total-gtt:\t1 MiB\n",
        );
        assert_eq!(
            c.summed(),
            BTreeMap::from([("drm-total-gtt".to_string(), 2 * 1024 * 1024)])
        );
    }

    /// A key name is bounded at 128 bytes: one of 128 is read, one of 129 left out. Catches
    /// `key.len() > 128` made `==` or `>=`.
    #[test]
    fn a_key_of_128_bytes_is_read_and_a_longer_one_is_not() {
        let at = format!("drm-total-{}", "v".repeat(128 - "drm-total-".len()));
        let over = format!("{at}w");
        assert_eq!(at.len(), 128);
        let keys = drm_memory_keys(&format!("{at}: 5\n{over}: 6\n"));
        assert_eq!(keys, BTreeMap::from([(at, 5)]));
    }
}
