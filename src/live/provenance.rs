//! Provenance (issue 18): what a run ran on and with, gathered once before run.json is first
//! written. The files named in the serve's arguments are hashed, a large one once and then
//! taken from a cache outside the run directory (a 4 GB model is not read again on every run);
//! the box's facts come from /proc and /sys. Nothing here fails a run: whatever cannot be read
//! is left out and named in `problems`.
//!
//! The parsing is pure and tested here; the reads around it are thin, and take their roots as
//! arguments so the tests give them a made-up /sys.
//!
//! It runs on the gate's thread before anything is held or started. The signal handlers are
//! registered by then, so a signal during the first hash of a large model is not lost: the run
//! is recorded as interrupted once the hash is done (a few seconds a GB, once).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::archive::record::{BinaryInfo, HashedFile, Provenance, RunManifest, Sampling};
use crate::archive::rundir;
use crate::judging::provenance::without_port;
use crate::live::serve;
use crate::prompts::Prompt;

/// At most this many files of the serve's arguments are hashed; the rest are named in
/// `problems`.
pub const MAX_MODEL_FILES: usize = 16;

/// Files at least this large are hashed once and their hash kept in the cache; smaller ones
/// take less time to hash than the cache takes to read.
pub const CACHE_FROM_BYTES: u64 = 64 << 20;

/// The cache keeps at most this many files, dropping the least recently used.
pub const CACHE_MAX_ENTRIES: usize = 1000;

/// A cache file larger than this is not a cache this gate wrote (1,000 entries are ~300 KB).
const CACHE_MAX_BYTES: u64 = 4 << 20;

/// A sysfs or procfs value is at most a page; longer is not a version.
const ATTR_MAX_BYTES: usize = 4096;

/// Accelerator kernel modules whose versions are recorded, where present. Each is the name the
/// kernel gives the module (`/sys/module/NAME`), from its source:
/// - `amdxdna`: AMD Ryzen AI NPU (drivers/accel/amdxdna; out of tree, amd/xdna-driver, with
///   MODULE_VERSION).
/// - `intel_vpu`: Intel NPU (drivers/accel/ivpu, DRIVER_NAME "intel_vpu", MODULE_VERSION).
/// - `rknpu`: Rockchip's vendor NPU driver (MODULE_VERSION); `rocket`: the upstream Rockchip
///   NPU driver (drivers/accel/rocket).
/// - `ethosu` (Arm Ethos-U, drivers/accel/ethosu), `qaic` (Qualcomm Cloud AI,
///   drivers/accel/qaic), `habanalabs` (Intel Gaudi, drivers/accel/habanalabs).
/// - `hailo_pci`: Hailo-8 (hailort-drivers, MODULE_VERSION(HAILO_DRV_VER)); `apex` and
///   `gasket`: Google Coral Edge TPU; `galcore`: VeriSilicon Vivante NPUs (i.MX 8M Plus,
///   Amlogic).
/// - `drv_davinci_intf_host`, `drv_devmng_host`: Huawei Ascend's host driver.
/// - GPUs a serve may fall back to or offload to: `nvidia` and `nvidia_uvm`
///   (MODULE_VERSION(NV_VERSION_STRING)), `amdgpu`, `i915`, `xe`, `panthor`.
pub const MODULES: &[&str] = &[
    "amdxdna",
    "intel_vpu",
    "rknpu",
    "rocket",
    "ethosu",
    "qaic",
    "habanalabs",
    "hailo_pci",
    "apex",
    "gasket",
    "galcore",
    "drv_davinci_intf_host",
    "drv_devmng_host",
    "nvidia",
    "nvidia_uvm",
    "amdgpu",
    "i915",
    "xe",
    "panthor",
];

/// Firmware attributes of an accel device (`/sys/class/accel/accelN/device/ATTR`):
/// `fw_version` (amdxdna, drivers/accel/amdxdna/amdxdna_sysfs.c: `major.minor.sub.build`);
/// `sched_mode` (intel_vpu, ivpu_sysfs.c: whether the firmware schedules, `HW`, or the driver,
/// `OS`; the driver shows no firmware version in sysfs); the firmware versions habanalabs
/// shows (Documentation/ABI/testing/sysfs-driver-habanalabs: cpucp_ver, cpucp_kernel_ver,
/// fw_os_ver, preboot_btl_ver, uboot_ver, cpld_ver, fuse_ver, thermal_ver, vrm_ver).
pub const ACCEL_FIRMWARE: &[&str] = &[
    "fw_version",
    "sched_mode",
    "cpucp_ver",
    "cpucp_kernel_ver",
    "fw_os_ver",
    "preboot_btl_ver",
    "uboot_ver",
    "cpld_ver",
    "fuse_ver",
    "thermal_ver",
    "vrm_ver",
];

/// At most this many accel or DRM devices, and firmware files of one device, are read.
const MAX_DEVICES: usize = 16;
const MAX_FIRMWARE_FILES: usize = 64;

/// Gather the run's provenance from its manifest (the serve's argv, binary, URL, prompts and
/// extra body) and `--max-tokens`.
pub fn gather(manifest: &RunManifest, max_tokens: u32) -> Provenance {
    let mut problems = Vec::new();
    let (serve_argv, serve_program_at, model_files) =
        match (&manifest.serve_argv, &manifest.serve_binary) {
            (Some(argv), Some(binary)) => {
                let at = program_index(argv, binary);
                let files = hash_model_files(argv, at, binary, &mut Cache::closed(), &mut problems);
                (Some(without_port(argv, &manifest.url)), Some(at), files)
            }
            _ => (None, None, Vec::new()),
        };
    let cpuinfo = read_text(Path::new("/proc/cpuinfo"), 1 << 20);
    let devicetree = read_text(
        Path::new("/sys/firmware/devicetree/base/model"),
        ATTR_MAX_BYTES,
    )
    .ok();
    let (cpu_model, ncpu) = match &cpuinfo {
        Ok(text) => (
            cpu_model(text, devicetree.as_deref()),
            Some(cpu_count(text)).filter(|&n| n > 0),
        ),
        Err(e) => {
            problems.push(format!("{e:#}"));
            (devicetree.as_deref().map(clean), None)
        }
    };
    let mut fact = |what: Result<String>| match what {
        Ok(v) if !v.trim().is_empty() => Some(clean(&v)),
        Ok(_) => None,
        Err(e) => {
            problems.push(format!("{e:#}"));
            None
        }
    };
    let host = fact(
        nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .context("failed to read the host name"),
    );
    let machine_id = fact(
        read_text(Path::new("/etc/machine-id"), ATTR_MAX_BYTES)
            .or_else(|_| read_text(Path::new("/var/lib/dbus/machine-id"), ATTR_MAX_BYTES))
            .context("no machine id: neither /etc/machine-id nor /var/lib/dbus/machine-id"),
    );
    let kernel = fact(read_text(
        Path::new("/proc/sys/kernel/osrelease"),
        ATTR_MAX_BYTES,
    ));
    let mem_total_kib = match read_text(Path::new("/proc/meminfo"), 1 << 20) {
        Ok(text) => {
            let kib = mem_total_kib(&text);
            if kib.is_none() {
                problems.push("/proc/meminfo has no MemTotal line".to_string());
            }
            kib
        }
        Err(e) => {
            problems.push(format!("{e:#}"));
            None
        }
    };
    if ncpu.is_none() && cpuinfo.is_ok() {
        problems.push("/proc/cpuinfo lists no processor".to_string());
    }
    let modules = modules_under(Path::new("/sys/module"), MODULES, &mut problems);
    let mut firmware = BTreeMap::new();
    accel_firmware(Path::new("/sys/class/accel"), &mut firmware, &mut problems);
    drm_firmware(Path::new("/sys/class/drm"), &mut firmware, &mut problems);
    nvidia_firmware(
        Path::new("/proc/driver/nvidia"),
        &mut firmware,
        &mut problems,
    );
    Provenance {
        tool_version: manifest.tool_version.clone(),
        serve_binary_sha256: manifest.serve_binary.as_ref().map(|b| b.sha256.clone()),
        model_files,
        serve_argv,
        serve_program_at,
        workload_sha256: workload_sha256(
            &manifest.prompts,
            max_tokens,
            manifest.extra_body.as_ref(),
            manifest.sampling_sent.as_ref(),
        ),
        host,
        machine_id,
        cpu_model,
        ncpu,
        mem_total_kib,
        kernel,
        modules,
        firmware,
        problems,
    }
}

// ---- The serve's arguments -------------------------------------------------------------

/// The paths an argument may name: itself, and for `--opt=VALUE` (or `-o=VALUE`) the value.
pub fn path_candidates(arg: &str) -> Vec<&str> {
    let mut out = Vec::new();
    if !arg.is_empty() && arg != "-" {
        out.push(arg);
    }
    if arg.starts_with('-') {
        if let Some((_, value)) = arg.split_once('=') {
            if !value.is_empty() {
                out.push(value);
            }
        }
    }
    out
}

/// Where the serve's own program stands in the launched argv: 0, or after a `--hold-cmd`
/// prefix, the first argument that resolves to the serve binary.
fn program_index(argv: &[String], binary: &BinaryInfo) -> usize {
    let target = Path::new(&binary.path);
    argv.iter()
        .position(|a| resolve_program(a).is_some_and(|p| p == target))
        .unwrap_or(0)
}

/// An argument as exec would find it as a program: a path, or a name on PATH; canonical.
fn resolve_program(arg: &str) -> Option<PathBuf> {
    if arg.is_empty() {
        return None;
    }
    let found = if arg.contains('/') {
        PathBuf::from(arg)
    } else {
        serve::on_path(arg)?
    };
    std::fs::canonicalize(found).ok()
}

/// The programs the launch runs (the serve, its script and interpreters, the hold program):
/// they are fingerprinted as the binary, never as model files.
fn programs(argv: &[String], binary: &BinaryInfo) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![binary];
    while let Some(b) = stack.pop() {
        out.push(PathBuf::from(&b.path));
        stack.extend(b.script.as_deref());
        stack.extend(b.interpreter.as_deref());
    }
    if let Some(first) = argv.first().and_then(|a| resolve_program(a)) {
        out.push(first);
    }
    out
}

/// Hash every regular file the serve's arguments name (not the programs, not twice).
fn hash_model_files(
    argv: &[String],
    program_at: usize,
    binary: &BinaryInfo,
    cache: &mut Cache,
    problems: &mut Vec<String>,
) -> Vec<HashedFile> {
    let skip = programs(argv, binary);
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut files = Vec::new();
    let mut dirs = 0;
    for (i, arg) in argv.iter().enumerate() {
        if i == 0 || i == program_at {
            continue;
        }
        for candidate in path_candidates(arg) {
            let Ok(meta) = std::fs::metadata(candidate) else {
                continue;
            };
            if meta.is_dir() {
                // A model given as a directory (a Hugging Face or OpenVINO folder): say that
                // its files are not covered, once for the first few.
                dirs += 1;
                if dirs <= 4 {
                    problems.push(format!(
                        "{candidate} is a directory: the files in it are not hashed"
                    ));
                }
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let Ok(path) = std::fs::canonicalize(candidate) else {
                continue;
            };
            if skip.contains(&path) || seen.contains(&path) {
                continue;
            }
            seen.push(path.clone());
            if files.len() == MAX_MODEL_FILES {
                problems.push(format!(
                    "{}: more than {MAX_MODEL_FILES} files in the serve's arguments; the rest are not hashed",
                    path.display()
                ));
                continue;
            }
            match hash_file(&path, cache, problems) {
                Ok(f) => files.push(f),
                Err(e) => problems.push(format!("{e:#}")),
            }
        }
    }
    cache.save(problems);
    files
}

/// One file's size and sha256: from the cache when it is large and unchanged since it was
/// hashed, else read (and, when large, kept in the cache).
fn hash_file(path: &Path, cache: &mut Cache, problems: &mut Vec<String>) -> Result<HashedFile> {
    let shown = path.display().to_string();
    let before = std::fs::metadata(path).with_context(|| format!("failed to read {shown}"))?;
    let key = CacheKey::of(&shown, &before);
    let large = before.len() >= CACHE_FROM_BYTES;
    if large {
        if let Some(sha256) = cache.get(&key, problems) {
            return Ok(HashedFile {
                path: shown,
                size: before.len(),
                sha256,
                cached: true,
            });
        }
        crate::say!(
            "hashing {shown} ({}), once: cached after",
            human_size(before.len())
        );
    }
    let info = serve::fingerprint(path)?;
    let after = std::fs::metadata(path).with_context(|| format!("failed to read {shown}"))?;
    if CacheKey::of(&shown, &after) != key || info.size != before.len() {
        problems.push(format!(
            "{shown} changed while it was hashed: its hash is of what was read, and not cached"
        ));
    } else if large {
        cache.put(key, &info.sha256);
    }
    Ok(HashedFile {
        path: shown,
        size: info.size,
        sha256: info.sha256,
        cached: false,
    })
}

fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

// ---- The hash cache ------------------------------------------------------------------

/// What must be unchanged for a cached hash to stand: the file's resolved path, size,
/// modification and change times (ns) and inode and device. The change time cannot be set
/// back by a program (`touch -d` moves it on), so content rewritten with its mtime restored
/// is hashed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CacheKey {
    path: String,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
    dev: u64,
}

impl CacheKey {
    fn of(path: &str, meta: &std::fs::Metadata) -> CacheKey {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        CacheKey {
            path: path.to_string(),
            size: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

/// One cached hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CacheEntry {
    #[serde(flatten)]
    key: CacheKey,
    sha256: String,
}

/// file-hashes.json: least recently used first.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    entries: Vec<CacheEntry>,
}

const CACHE_VERSION: u32 = 1;

/// The cache, opened when the first large file needs it (a run without one never touches it).
#[derive(Debug)]
struct Cache {
    path: Option<PathBuf>,
    opened: bool,
    entries: Vec<CacheEntry>,
    changed: bool,
}

/// `$XDG_CACHE_HOME/npu-serve-smoke/file-hashes.json`, else under `$HOME/.cache`. A relative
/// XDG_CACHE_HOME is ignored, as the XDG base directory spec says.
pub fn cache_path(xdg_cache_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let base = match xdg_cache_home.map(PathBuf::from) {
        Some(x) if x.is_absolute() => x,
        _ => PathBuf::from(home.filter(|h| !h.is_empty())?).join(".cache"),
    };
    Some(base.join("npu-serve-smoke").join("file-hashes.json"))
}

impl Cache {
    fn closed() -> Cache {
        Cache::at(cache_path(
            std::env::var_os("XDG_CACHE_HOME"),
            std::env::var_os("HOME"),
        ))
    }

    fn at(path: Option<PathBuf>) -> Cache {
        Cache {
            path,
            opened: false,
            entries: Vec::new(),
            changed: false,
        }
    }

    fn open(&mut self, problems: &mut Vec<String>) {
        if self.opened {
            return;
        }
        self.opened = true;
        let Some(path) = &self.path else {
            problems.push("no hash cache: neither XDG_CACHE_HOME nor HOME is set".to_string());
            return;
        };
        match read_cache(path) {
            Ok(entries) => self.entries = entries,
            Err(e) => problems.push(format!("{e:#}; starting a new cache")),
        }
    }

    /// The cached hash of a file with this key, marking it most recently used.
    fn get(&mut self, key: &CacheKey, problems: &mut Vec<String>) -> Option<String> {
        self.open(problems);
        let at = self.entries.iter().position(|e| &e.key == key)?;
        if at + 1 != self.entries.len() {
            let e = self.entries.remove(at);
            self.entries.push(e);
            self.changed = true;
        }
        self.entries.last().map(|e| e.sha256.clone())
    }

    fn put(&mut self, key: CacheKey, sha256: &str) {
        // Another version of the same file (same path) is stale now.
        self.entries.retain(|e| e.key.path != key.path);
        self.entries.push(CacheEntry {
            key,
            sha256: sha256.to_string(),
        });
        let over = self.entries.len().saturating_sub(CACHE_MAX_ENTRIES);
        self.entries.drain(..over);
        self.changed = true;
    }

    /// Write the cache back (atomically: a temporary file renamed over it), if it changed. A
    /// cache that cannot be written costs the next run a hash, never this run its result.
    fn save(&mut self, problems: &mut Vec<String>) {
        let Some(path) = self.path.as_ref().filter(|_| self.changed) else {
            return;
        };
        let file = CacheFile {
            version: CACHE_VERSION,
            entries: std::mem::take(&mut self.entries),
        };
        let written = (|| -> Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("failed to create {}", dir.display()))?;
            }
            rundir::write_atomic(path, &serde_json::to_vec(&file)?)
        })();
        if let Err(e) = written {
            problems.push(format!("the hash cache was not saved: {e:#}"));
        }
        self.entries = file.entries;
        self.changed = false;
    }
}

fn read_cache(path: &Path) -> Result<Vec<CacheEntry>> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("failed to read the hash cache {shown}")),
    };
    if meta.len() > CACHE_MAX_BYTES {
        bail!(
            "the hash cache {shown} is {} bytes, more than a cache of {CACHE_MAX_ENTRIES} files",
            meta.len()
        );
    }
    let text =
        std::fs::read(path).with_context(|| format!("failed to read the hash cache {shown}"))?;
    let file: CacheFile = serde_json::from_slice(&text)
        .with_context(|| format!("the hash cache {shown} is not one this gate wrote"))?;
    if file.version != CACHE_VERSION {
        bail!(
            "the hash cache {shown} has version {}, not {CACHE_VERSION}",
            file.version
        );
    }
    Ok(file.entries)
}

// ---- The workload --------------------------------------------------------------------

/// sha256 of the workload as canonical JSON: the prompts (as run.json has them, less `stops`), the default
/// max_tokens and the extra body, keys sorted at every level, no whitespace. Canonical by hand
/// rather than by serde_json's map order, which a feature elsewhere in the build could change.
///
/// The sampling sent (`--temperature`, `--seed`) is hashed as the body fields it is: a seed,
/// and a temperature other than the gate's 0, as if the extra body had held them. So
/// `--seed 42` and `--extra-body '{"seed": 42}'` (the one way before the flag) are the same
/// workload, and a run that asks for nothing new hashes as it always did.
pub fn workload_sha256(
    prompts: &[Prompt],
    max_tokens: u32,
    extra_body: Option<&serde_json::Map<String, serde_json::Value>>,
    sampling: Option<&Sampling>,
) -> String {
    let mut body = extra_body.cloned().unwrap_or_default();
    if let Some(s) = sampling {
        if let Some(seed) = s.seed {
            body.entry("seed").or_insert(seed.into());
        }
        if let Some(t) = s.temperature.filter(|t| *t != 0.0) {
            body.entry("temperature").or_insert(t.into());
        }
    }
    let body = (extra_body.is_some() || !body.is_empty()).then_some(body);
    // What is sent: a prompt's `stops` (issue 32) says how its answer is judged, not what the
    // serve is asked, so a run of the built-in prompts hashes as it did before they had it.
    let sent: Vec<Prompt> = prompts
        .iter()
        .map(|p| Prompt {
            stops: None,
            ..p.clone()
        })
        .collect();
    let workload = serde_json::json!({
        "prompts": sent,
        "max_tokens": max_tokens,
        "extra_body": body,
    });
    let mut text = String::new();
    canonical_json(&workload, &mut text);
    hex(&Sha256::digest(text.as_bytes()))
}

/// `value` as JSON with every object's keys sorted and no whitespace.
pub fn canonical_json(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut fields: Vec<_> = map.iter().collect();
            fields.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in fields.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---- The box ---------------------------------------------------------------------------

/// The CPU's model from /proc/cpuinfo: x86's `model name`; on Arm boards the board's `Model`
/// or `Hardware` line, else the device tree's model, else the first core's implementer and
/// part numbers (all an arm64 kernel says of the core).
pub fn cpu_model(cpuinfo: &str, devicetree_model: Option<&str>) -> Option<String> {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name && !v.trim().is_empty()).then(|| clean(v))
        })
    };
    ["model name", "Model", "Hardware", "cpu model"]
        .iter()
        .find_map(|k| field(k))
        .or_else(|| devicetree_model.map(clean).filter(|m| !m.is_empty()))
        .or_else(|| {
            let implementer = field("CPU implementer")?;
            let part = field("CPU part")?;
            Some(format!("CPU implementer {implementer} part {part}"))
        })
}

/// How many `processor` entries /proc/cpuinfo lists: the CPUs online.
pub fn cpu_count(cpuinfo: &str) -> usize {
    cpuinfo
        .lines()
        .filter(|l| {
            l.split_once(':')
                .is_some_and(|(k, _)| k.trim() == "processor")
        })
        .count()
}

/// /proc/meminfo's `MemTotal`, KiB.
pub fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// A value as recorded: trimmed (a device tree string ends in NUL), inner whitespace one
/// space, at most 200 characters.
fn clean(text: &str) -> String {
    let words: Vec<&str> = text
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .split_whitespace()
        .collect();
    words.join(" ").chars().take(200).collect()
}

/// What a module's entry says of its version: its `version` (MODULE_VERSION), else its
/// `srcversion`, else whether it was loaded or built in.
pub fn module_value(version: Option<&str>, srcversion: Option<&str>, loadable: bool) -> String {
    let given = |v: Option<&str>| v.map(clean).filter(|v| !v.is_empty());
    if let Some(v) = given(version) {
        v
    } else if let Some(s) = given(srcversion) {
        format!("srcversion {s}")
    } else if loadable {
        "loaded, no version".to_string()
    } else {
        "built in, no version".to_string()
    }
}

/// The modules of `names` present under `sys_module` (/sys/module), each with its version.
fn modules_under(
    sys_module: &Path,
    names: &[&str],
    problems: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in names {
        let dir = sys_module.join(name);
        if !dir.is_dir() {
            continue;
        }
        let mut attr = |file: &str| match read_text(&dir.join(file), ATTR_MAX_BYTES) {
            Ok(v) => Some(v),
            Err(e) if not_found(&e) => None,
            Err(e) => {
                problems.push(format!("{e:#}"));
                None
            }
        };
        let version = attr("version");
        let srcversion = attr("srcversion");
        // Only a loaded module has an initstate; a built-in one's entry lacks it.
        let loadable = dir.join("initstate").exists();
        out.insert(
            name.to_string(),
            module_value(version.as_deref(), srcversion.as_deref(), loadable),
        );
    }
    out
}

/// The firmware key of a device's attribute: `DRIVER DEVICE ATTRIBUTE`, the device by its bus
/// address (stable across boots, where `accel0` and `card1` are not).
pub fn firmware_key(driver: &str, device: &str, attribute: &str) -> String {
    format!("{driver} {device} {attribute}")
}

/// The driver and bus address of a class device's `device` link.
fn device_names(class_dev: &Path) -> Option<(String, String)> {
    let device = std::fs::canonicalize(class_dev.join("device")).ok()?;
    let address = device.file_name()?.to_string_lossy().into_owned();
    let driver = std::fs::canonicalize(device.join("driver"))
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown-driver".to_string());
    Some((driver, address))
}

/// The class devices under `class` whose names `keep` accepts, sorted, at most MAX_DEVICES.
fn class_devices(class: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(class) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| keep(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out.truncate(MAX_DEVICES);
    out
}

/// Read one firmware attribute into `out`, if the device has it.
fn firmware_attr(
    file: &Path,
    key: String,
    out: &mut BTreeMap<String, String>,
    problems: &mut Vec<String>,
) {
    match read_text(file, ATTR_MAX_BYTES) {
        Ok(v) => {
            let v = clean(&v);
            if !v.is_empty() {
                out.insert(key, v);
            }
        }
        Err(e) if not_found(&e) => {}
        Err(e) => problems.push(format!("{e:#}")),
    }
}

/// Firmware versions of accel devices (`/sys/class/accel/accelN/device/`).
fn accel_firmware(class: &Path, out: &mut BTreeMap<String, String>, problems: &mut Vec<String>) {
    for dev in class_devices(class, |n| n.starts_with("accel")) {
        let Some((driver, address)) = device_names(&dev) else {
            continue;
        };
        for attr in ACCEL_FIRMWARE {
            let key = firmware_key(&driver, &address, attr);
            firmware_attr(&dev.join("device").join(attr), key, out, problems);
        }
    }
}

/// Firmware versions of GPUs (`/sys/class/drm/cardN/device/`): amdgpu's `vbios_version` and
/// the files of its `fw_version/` folder (amdgpu_ucode.c: `mec_fw_version`, `sos_fw_version`,
/// ..., each `0x%08x`).
fn drm_firmware(class: &Path, out: &mut BTreeMap<String, String>, problems: &mut Vec<String>) {
    let is_card = |n: &str| {
        n.strip_prefix("card")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    for dev in class_devices(class, is_card) {
        let Some((driver, address)) = device_names(&dev) else {
            continue;
        };
        let device = dev.join("device");
        let key = firmware_key(&driver, &address, "vbios_version");
        firmware_attr(&device.join("vbios_version"), key, out, problems);
        let Ok(entries) = std::fs::read_dir(device.join("fw_version")) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        files.truncate(MAX_FIRMWARE_FILES);
        for file in files {
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            let key = firmware_key(&driver, &address, &format!("fw_version/{name}"));
            firmware_attr(&file, key, out, problems);
        }
    }
}

/// The NVIDIA driver's own account (`/proc/driver/nvidia/version`'s first line) and each
/// GPU's video BIOS (`/proc/driver/nvidia/gpus/ADDRESS/information`, `Video BIOS:`).
fn nvidia_firmware(root: &Path, out: &mut BTreeMap<String, String>, problems: &mut Vec<String>) {
    if !root.is_dir() {
        return;
    }
    match read_text(&root.join("version"), ATTR_MAX_BYTES) {
        Ok(text) => {
            if let Some(line) = text.lines().map(clean).find(|l| !l.is_empty()) {
                out.insert(firmware_key("nvidia", "driver", "version"), line);
            }
        }
        Err(e) if not_found(&e) => {}
        Err(e) => problems.push(format!("{e:#}")),
    }
    for gpu in class_devices(&root.join("gpus"), |_| true) {
        let address = gpu
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        match read_text(&gpu.join("information"), ATTR_MAX_BYTES) {
            Ok(text) => {
                if let Some(v) = labelled(&text, "Video BIOS") {
                    out.insert(firmware_key("nvidia", &address, "video_bios"), v);
                }
            }
            Err(e) if not_found(&e) => {}
            Err(e) => problems.push(format!("{e:#}")),
        }
    }
}

/// The value of a `Label: value` line.
pub fn labelled(text: &str, label: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim().eq_ignore_ascii_case(label) && !v.trim().is_empty()).then(|| clean(v))
    })
}

/// A small text file, whole (at most `max` bytes), lossily as UTF-8.
fn read_text(path: &Path, max: usize) -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max as u64).read_to_end(&mut bytes))
        .with_context(|| format!("failed to read {}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn not_found(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_option_value_is_a_path_candidate_too() {
        assert_eq!(path_candidates("-m"), vec!["-m"]);
        assert_eq!(
            path_candidates("--model=/m/x.gguf"),
            vec!["--model=/m/x.gguf", "/m/x.gguf"]
        );
        assert_eq!(path_candidates("/m/a=b.gguf"), vec!["/m/a=b.gguf"]);
        assert_eq!(path_candidates("--flag="), vec!["--flag="]);
        assert!(path_candidates("-").is_empty());
        assert!(path_candidates("").is_empty());
    }

    #[test]
    fn cpuinfo_gives_the_model_and_the_count() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM) Ultra 7 155H\n\nprocessor\t: 1\nmodel name\t: Intel(R) Core(TM) Ultra 7 155H\n";
        assert_eq!(
            cpu_model(x86, None).as_deref(),
            Some("Intel(R) Core(TM) Ultra 7 155H")
        );
        assert_eq!(cpu_count(x86), 2);
        // A Raspberry Pi: no model name, a board Model line.
        let pi = "processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0b\n\nprocessor\t: 1\nCPU implementer\t: 0x41\n\nRevision\t: d04170\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n";
        assert_eq!(
            cpu_model(pi, None).as_deref(),
            Some("Raspberry Pi 5 Model B Rev 1.0")
        );
        assert_eq!(cpu_count(pi), 2);
        // A Rockchip board: only the core's numbers in cpuinfo; the device tree names it.
        let rk = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd05\n";
        assert_eq!(
            cpu_model(rk, Some("Radxa ROCK 5B\0")).as_deref(),
            Some("Radxa ROCK 5B")
        );
        assert_eq!(
            cpu_model(rk, None).as_deref(),
            Some("CPU implementer 0x41 part 0xd05")
        );
        assert_eq!(cpu_model("", None), None);
        assert_eq!(cpu_count("garbage\nprocessors: 3\n"), 0);
    }

    #[test]
    fn meminfo_gives_mem_total() {
        let text = "MemTotal:       16318412 kB\nMemFree:         1234 kB\n";
        assert_eq!(mem_total_kib(text), Some(16318412));
        assert_eq!(mem_total_kib("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total_kib("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn a_module_without_a_version_says_what_it_is() {
        assert_eq!(module_value(Some("1.0.0\n"), Some("ABC"), true), "1.0.0");
        assert_eq!(
            module_value(None, Some("A1B2C3\n"), true),
            "srcversion A1B2C3"
        );
        assert_eq!(module_value(Some(" \n"), None, true), "loaded, no version");
        assert_eq!(module_value(None, None, false), "built in, no version");
    }

    #[test]
    fn labelled_values_and_clean_text() {
        let info = "Model: \t\t NVIDIA GeForce RTX 4090\nVideo BIOS: \t 95.02.3c.00.8f\nBus Type: \t PCIe\n";
        assert_eq!(
            labelled(info, "Video BIOS").as_deref(),
            Some("95.02.3c.00.8f")
        );
        assert_eq!(labelled(info, "IRQ"), None);
        assert_eq!(
            clean("  NVRM version:  NVIDIA   UNIX\t x86_64 \n"),
            "NVRM version: NVIDIA UNIX x86_64"
        );
    }

    #[test]
    fn the_workload_hash_is_canonical() {
        let prompts = vec![Prompt {
            prompt: "What is 2+2?".into(),
            expect: Some("4".into()),
            max_tokens: None,
            stops: None,
        }];
        let a: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "é"}}"#).unwrap();
        let b: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"a": {"x": "é", "y": [1, 2]}, "b": 1}"#).unwrap();
        let h = workload_sha256(&prompts, 64, Some(&a), None);
        assert_eq!(
            h,
            workload_sha256(&prompts, 64, Some(&b), None),
            "key order"
        );
        assert_eq!(h.len(), 64);
        assert_ne!(
            h,
            workload_sha256(&prompts, 65, Some(&a), None),
            "max_tokens"
        );
        assert_ne!(h, workload_sha256(&prompts, 64, None, None), "extra body");
        let mut other = prompts.clone();
        other[0].expect = None;
        assert_ne!(
            h,
            workload_sha256(&other, 64, Some(&a), None),
            "the expected answer"
        );
        // Sampling the body always sent (temperature 0, no seed) hashes as before it was
        // recorded; a seed or another temperature is another workload.
        let greedy = Sampling {
            temperature: Some(0.0),
            seed: None,
        };
        assert_eq!(h, workload_sha256(&prompts, 64, Some(&a), Some(&greedy)));
        for other in [
            Sampling {
                temperature: Some(0.0),
                seed: Some(42),
            },
            Sampling {
                temperature: Some(0.7),
                seed: None,
            },
        ] {
            assert_ne!(
                h,
                workload_sha256(&prompts, 64, Some(&a), Some(&other)),
                "{other:?}"
            );
        }
        // A seed and a temperature hash as the body fields they are sent as.
        let plain = workload_sha256(&prompts, 64, None, None);
        assert_eq!(plain, workload_sha256(&prompts, 64, None, Some(&greedy)));
        let seeded: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"seed": 42, "temperature": 0.7}"#).unwrap();
        assert_eq!(
            workload_sha256(
                &prompts,
                64,
                Some(&seeded),
                Some(&Sampling::of_body(Some(&seeded)))
            ),
            workload_sha256(
                &prompts,
                64,
                None,
                Some(&Sampling {
                    temperature: Some(0.7),
                    seed: Some(42),
                })
            ),
            "--seed 42 --temperature 0.7 is --extra-body's seed and temperature"
        );

        let mut text = String::new();
        canonical_json(
            &serde_json::json!({"b": [true, null, 1.5], "a": "q\"", "c": {}}),
            &mut text,
        );
        assert_eq!(text, r#"{"a":"q\"","b":[true,null,1.5],"c":{}}"#);
        // The bytes hashed, pinned: a change here changes every run's workload hash.
        let mut text = String::new();
        canonical_json(
            &serde_json::json!({"prompts": prompts, "max_tokens": 64, "extra_body": null}),
            &mut text,
        );
        assert_eq!(
            text,
            r#"{"extra_body":null,"max_tokens":64,"prompts":[{"expect":"4","prompt":"What is 2+2?"}]}"#
        );
    }

    #[test]
    fn the_cache_path_follows_xdg() {
        let p = |x: Option<&str>, h: Option<&str>| {
            cache_path(x.map(OsString::from), h.map(OsString::from))
        };
        assert_eq!(
            p(Some("/c"), Some("/home/u")),
            Some(PathBuf::from("/c/npu-serve-smoke/file-hashes.json"))
        );
        assert_eq!(
            p(Some("rel"), Some("/home/u")),
            Some(PathBuf::from(
                "/home/u/.cache/npu-serve-smoke/file-hashes.json"
            ))
        );
        assert_eq!(
            p(Some(""), Some("/home/u")),
            Some(PathBuf::from(
                "/home/u/.cache/npu-serve-smoke/file-hashes.json"
            ))
        );
        assert_eq!(p(None, None), None);
    }

    fn binary(path: &Path) -> BinaryInfo {
        BinaryInfo {
            path: std::fs::canonicalize(path).unwrap().display().to_string(),
            size: 0,
            sha256: String::new(),
            script: None,
            interpreter: None,
        }
    }

    #[test]
    fn model_files_are_the_files_among_the_arguments() {
        let d = tempfile::tempdir().unwrap();
        let serve = d.path().join("serve");
        std::fs::write(&serve, "#!/bin/sh\n").unwrap();
        let model = d.path().join("m.gguf");
        std::fs::write(&model, b"weights").unwrap();
        let config = d.path().join("c.toml");
        std::fs::write(&config, b"x = 1").unwrap();
        let argv = vec![
            serve.display().to_string(),
            "-m".into(),
            model.display().to_string(),
            format!("--config={}", config.display()),
            model.display().to_string(),
            d.path().display().to_string(),
            serve.display().to_string(),
            "/dev/null".into(),
            "--port".into(),
            "8080".into(),
        ];
        let mut problems = Vec::new();
        let mut cache = Cache::at(None);
        let files = hash_model_files(&argv, 0, &binary(&serve), &mut cache, &mut problems);
        let paths: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
        assert_eq!(paths, vec![canon(&model), canon(&config)], "{problems:?}");
        assert_eq!(files[0].size, 7);
        assert_eq!(files[0].sha256, hex(&Sha256::digest(b"weights")));
        assert!(!files[0].cached);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("is a directory"), "{problems:?}");
    }

    #[test]
    fn a_serve_under_a_hold_program_is_found_after_its_prefix() {
        let d = tempfile::tempdir().unwrap();
        let serve = d.path().join("serve");
        std::fs::write(&serve, "").unwrap();
        let argv = strings(&["npu-hold", "--ticket", "4s", "--"])
            .into_iter()
            .chain([serve.display().to_string(), "--x".into()])
            .collect::<Vec<_>>();
        assert_eq!(program_index(&argv, &binary(&serve)), 4);
        assert_eq!(program_index(&strings(&["nope"]), &binary(&serve)), 0);
    }

    fn key(path: &str, ino: u64) -> CacheKey {
        CacheKey {
            path: path.into(),
            size: 1,
            mtime_ns: 2,
            ctime_ns: 3,
            ino,
            dev: 5,
        }
    }

    #[test]
    fn the_cache_keeps_the_most_recently_used_and_survives_corruption() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("sub/file-hashes.json");
        let mut problems = Vec::new();
        let mut cache = Cache::at(Some(path.clone()));
        assert_eq!(cache.get(&key("/a", 1), &mut problems), None);
        for i in 0..(CACHE_MAX_ENTRIES as u64 + 5) {
            cache.put(key(&format!("/f{i}"), i), &format!("h{i}"));
        }
        cache.put(key("/a", 1), "ha");
        // Used again: now the most recent, so the next puts drop others first.
        let first_kept = 6;
        assert_eq!(
            cache.get(&key(&format!("/f{first_kept}"), first_kept), &mut problems),
            Some(format!("h{first_kept}"))
        );
        cache.save(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");

        let mut again = Cache::at(Some(path.clone()));
        assert_eq!(again.get(&key("/a", 1), &mut problems), Some("ha".into()));
        assert_eq!(
            again.get(&key("/a", 2), &mut problems),
            None,
            "another inode"
        );
        assert_eq!(again.get(&key("/f0", 0), &mut problems), None, "dropped");
        assert_eq!(again.entries.len(), CACHE_MAX_ENTRIES);
        // A newer version of the same path replaces the old.
        again.put(key("/a", 2), "ha2");
        assert_eq!(again.get(&key("/a", 1), &mut problems), None);
        assert!(problems.is_empty(), "{problems:?}");

        std::fs::write(&path, b"{not json").unwrap();
        let mut corrupt = Cache::at(Some(path.clone()));
        assert_eq!(corrupt.get(&key("/a", 1), &mut problems), None);
        assert!(
            problems[0].contains("not one this gate wrote")
                && problems[0].contains("starting a new cache"),
            "{problems:?}"
        );
        corrupt.put(key("/a", 1), "ha");
        corrupt.save(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            Cache::at(Some(path)).get(&key("/a", 1), &mut problems),
            Some("ha".into())
        );

        // Unwritable: the cache's folder is a file.
        let blocked = d.path().join("blocked");
        std::fs::write(&blocked, b"").unwrap();
        let mut cache = Cache::at(Some(blocked.join("file-hashes.json")));
        cache.put(key("/a", 1), "ha");
        let mut problems = Vec::new();
        cache.save(&mut problems);
        assert!(
            problems[0].starts_with("the hash cache was not saved"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_large_file_is_hashed_once_then_taken_from_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(CACHE_FROM_BYTES)
            .unwrap();
        let cache_file = d.path().join("cache.json");
        let mut problems = Vec::new();
        let mut cache = Cache::at(Some(cache_file.clone()));
        let first = hash_file(&big, &mut cache, &mut problems).unwrap();
        assert!(!first.cached);
        cache.save(&mut problems);
        let mut cache = Cache::at(Some(cache_file.clone()));
        let second = hash_file(&big, &mut cache, &mut problems).unwrap();
        assert!(second.cached);
        assert_eq!(second.sha256, first.sha256);
        // Rewritten (same size): its times move on, and it is read again.
        std::fs::write(&big, vec![1u8; CACHE_FROM_BYTES as usize]).unwrap();
        let third = hash_file(&big, &mut cache, &mut problems).unwrap();
        assert!(!third.cached);
        assert_ne!(third.sha256, first.sha256);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn modules_and_firmware_from_a_made_up_sys() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let mk = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        mk("module/intel_vpu/version", "1.0.\n");
        mk("module/intel_vpu/initstate", "live\n");
        mk("module/amdxdna/initstate", "live\n");
        mk("module/amdxdna/srcversion", "5D2A\n");
        mk("module/i915/parameters/x", "1\n");
        let mut problems = Vec::new();
        let modules = modules_under(&root.join("module"), MODULES, &mut problems);
        assert_eq!(
            modules.into_iter().collect::<Vec<_>>(),
            vec![
                ("amdxdna".to_string(), "srcversion 5D2A".to_string()),
                ("i915".to_string(), "built in, no version".to_string()),
                ("intel_vpu".to_string(), "1.0.".to_string()),
            ]
        );

        // An accel device whose PCI device is bound to amdxdna, and an amdgpu card.
        mk("devices/0000:c5:00.1/fw_version", "1.5.2.380\n");
        mk("devices/0000:c5:00.1/vbnv", "RyzenAI-npu4\n");
        mk("devices/0000:c4:00.0/vbios_version", "113-PHXGENERIC-001\n");
        mk(
            "devices/0000:c4:00.0/fw_version/mec_fw_version",
            "0x0000001f\n",
        );
        mk("drivers/amdxdna/x", "");
        mk("drivers/amdgpu/x", "");
        let link = |to: &str, at: &str| {
            let at = root.join(at);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(root.join(to), at).unwrap();
        };
        link("drivers/amdxdna", "devices/0000:c5:00.1/driver");
        link("drivers/amdgpu", "devices/0000:c4:00.0/driver");
        link("devices/0000:c5:00.1", "class/accel/accel0/device");
        link("devices/0000:c4:00.0", "class/drm/card1/device");
        link("devices/0000:c4:00.0", "class/drm/card1-eDP-1/device");
        mk("nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\nGCC version: gcc 12\n");
        mk(
            "nvidia/gpus/0000:01:00.0/information",
            "Model: \t RTX\nVideo BIOS: \t 95.02.3c.00.8f\n",
        );
        let mut firmware = BTreeMap::new();
        accel_firmware(&root.join("class/accel"), &mut firmware, &mut problems);
        drm_firmware(&root.join("class/drm"), &mut firmware, &mut problems);
        nvidia_firmware(&root.join("nvidia"), &mut firmware, &mut problems);
        assert_eq!(
            firmware.into_iter().collect::<Vec<_>>(),
            vec![
                ("amdgpu 0000:c4:00.0 fw_version/mec_fw_version".to_string(), "0x0000001f".to_string()),
                ("amdgpu 0000:c4:00.0 vbios_version".to_string(), "113-PHXGENERIC-001".to_string()),
                ("amdxdna 0000:c5:00.1 fw_version".to_string(), "1.5.2.380".to_string()),
                ("nvidia 0000:01:00.0 video_bios".to_string(), "95.02.3c.00.8f".to_string()),
                ("nvidia driver version".to_string(), "NVRM version: NVIDIA UNIX x86_64 Kernel Module 550.54.14 Thu Feb 22 01:44:30 UTC 2024".to_string()),
            ]
        );
        assert!(problems.is_empty(), "{problems:?}");
        // Nothing there: nothing recorded, nothing wrong.
        let mut none = BTreeMap::new();
        accel_firmware(&root.join("absent"), &mut none, &mut problems);
        nvidia_firmware(&root.join("absent"), &mut none, &mut problems);
        assert!(none.is_empty() && problems.is_empty());
    }
}
