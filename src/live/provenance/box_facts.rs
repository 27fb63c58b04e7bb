//! The box's facts from /proc and /sys: the CPU, memory, kernel, host and machine id, the
//! versions of accelerator and GPU kernel modules, and the firmware versions their devices
//! show. The parsing is pure; the reads take their roots as arguments, so the tests give them
//! a made-up /sys.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

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

/// The box's facts, as [`Provenance`](crate::archive::record::Provenance) records them.
pub(crate) struct BoxFacts {
    pub host: Option<String>,
    pub machine_id: Option<String>,
    pub cpu_model: Option<String>,
    pub ncpu: Option<usize>,
    pub mem_total_kib: Option<u64>,
    pub kernel: Option<String>,
    pub modules: BTreeMap<String, String>,
    pub firmware: BTreeMap<String, String>,
}

/// Read the box's facts from /proc and /sys; what cannot be read is left out and named in
/// `problems`.
pub(crate) fn read(problems: &mut Vec<String>) -> BoxFacts {
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
    let modules = modules_under(Path::new("/sys/module"), MODULES, problems);
    let mut firmware = BTreeMap::new();
    accel_firmware(Path::new("/sys/class/accel"), &mut firmware, problems);
    drm_firmware(Path::new("/sys/class/drm"), &mut firmware, problems);
    nvidia_firmware(Path::new("/proc/driver/nvidia"), &mut firmware, problems);
    BoxFacts {
        host,
        machine_id,
        cpu_model,
        ncpu,
        mem_total_kib,
        kernel,
        modules,
        firmware,
    }
}

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
