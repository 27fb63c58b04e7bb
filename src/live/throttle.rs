//! Throttling evidence, read beside the replies (issue 20, item 3): the CPUs' thermal throttle
//! counts, their current clocks, the thermal zones' temperatures, and the device's own clock
//! and temperature where `--device-freq` and `--device-temp` name them.
//!
//! A decode rate that falls over a run is a regression only if the box held still; a CPU or an
//! NPU that throttled explains it. What the box does not expose is left out, never guessed: a
//! missing file, one that cannot be read, an empty one or one that does not read as a number is
//! no reading, never a zero.
//!
//! The sources and their units, as the kernel documents them:
//! - `/sys/devices/system/cpu/cpu*/thermal_throttle/{core,package}_throttle_count`: the number
//!   of times the core (the package) entered a thermal throttle state
//!   (Documentation/ABI/testing/sysfs-devices-system-cpu; x86 only, and
//!   Documentation/arch/x86/intel-thermal-throttle.rst). Every CPU of a package shows its
//!   package's count, so the sum counts a package event once per CPU: a rise says throttling
//!   happened, not how many times.
//! - `/sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq`: the CPU's current clock in kHz
//!   (Documentation/admin-guide/pm/cpufreq.rst).
//! - `/sys/class/thermal/thermal_zone*/temp`: the zone's temperature in millidegrees Celsius
//!   (Documentation/ABI/testing/sysfs-class-thermal). A zone whose sensor is not ready answers
//!   the read with an error: left out.
//! - `--device-freq`: devfreq's `cur_freq` (Documentation/ABI/testing/sysfs-class-devfreq), in Hz
//!   as every devfreq frequency is (its OPP tables are in Hz).
//! - `--device-temp`: hwmon's `temp[1-*]_input`, millidegrees Celsius
//!   (Documentation/hwmon/sysfs-interface.rst); a thermal zone's `temp` has the same unit.
//!
//! The files to read are found once, when sampling starts (a directory listing of each CPU and
//! zone); each sample then reads only those, a few KiB at most each.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes read of one file: a sysfs number is a few bytes; anything longer is not one.
pub const MAX_FILE_BYTES: usize = 4096;

/// The most CPUs, and the most thermal zones, read: a bound on the work of each sample.
pub const MAX_ENTRIES: usize = 4096;

/// A file's text as a whole number: trimmed, then parsed. `None` for an empty file or
/// anything else, never a zero.
pub fn parse_integer(text: &str) -> Option<i64> {
    text.trim().parse().ok()
}

/// A counter's text as a count (a counter is never negative).
pub fn parse_count(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Up to [`MAX_FILE_BYTES`] of `path` as text; `Err` when it cannot be read, or is longer than
/// a number could be (a device node given by mistake is not read forever).
pub fn read_small(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, so a FIFO given by mistake is refused at once rather than waited on for
    // a writer that never comes (sysfs and regular files read the same either way).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| format!("cannot be read: {e}"))?;
    let mut bytes = Vec::with_capacity(64);
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(format!(
            "holds more than {MAX_FILE_BYTES} bytes, which no single number does"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "is not text".to_string())
}

/// A file's number, where it can be read and is one.
fn read_integer(path: &Path) -> Option<i64> {
    read_small(path).ok().as_deref().and_then(parse_integer)
}

fn read_count(path: &Path) -> Option<u64> {
    read_small(path).ok().as_deref().and_then(parse_count)
}

/// The device's own files, as `--device-freq` and `--device-temp` name them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceFiles {
    /// The device's current clock, Hz (devfreq `cur_freq`).
    pub freq: Option<PathBuf>,
    /// The device's temperature, millidegrees Celsius (hwmon `temp*_input`).
    pub temp: Option<PathBuf>,
}

/// What one look at the device's files found: (MHz, degrees Celsius), each where it read.
pub fn read_device(files: &DeviceFiles) -> (Option<f64>, Option<f64>) {
    (
        files.freq.as_deref().and_then(read_integer).map(hz_to_mhz),
        files
            .temp
            .as_deref()
            .and_then(read_integer)
            .map(millidegrees_to_c),
    )
}

/// Whether `path` can serve as `flag`'s file: it exists, reads, and holds a number now. One
/// line saying what is wrong and what to give instead, for exit 2 before anything starts.
pub fn check_device_file(flag: &str, path: &Path) -> Result<(), String> {
    let example = match flag {
        "--device-freq" => "a file holding the device's clock in Hz, e.g. /sys/class/devfreq/fdab0000.npu/cur_freq",
        _ => "a file holding the device's temperature in millidegrees Celsius, e.g. /sys/class/hwmon/hwmon0/temp1_input",
    };
    let text = read_small(path)
        .map_err(|why| format!("{flag} {} {why}; give {example}", path.display()))?;
    if parse_integer(&text).is_none() {
        let shown: String = text.trim().chars().take(40).collect();
        return Err(format!(
            "{flag} {} does not read as a number ({shown:?}); give {example}",
            path.display()
        ));
    }
    Ok(())
}

/// Hz to MHz.
pub fn hz_to_mhz(hz: i64) -> f64 {
    hz as f64 / 1e6
}

/// kHz (cpufreq's unit) to MHz.
pub fn khz_to_mhz(khz: i64) -> f64 {
    khz as f64 / 1e3
}

/// Millidegrees Celsius (thermal's and hwmon's unit) to degrees.
pub fn millidegrees_to_c(m: i64) -> f64 {
    m as f64 / 1e3
}

/// One look at the box's throttling evidence, each figure where the box gave it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoxReading {
    /// Sum over CPUs of their core and package throttle counts.
    pub throttle_count: Option<u64>,
    /// The CPUs' mean current clock, MHz.
    pub cpu_mhz: Option<f64>,
    /// The slowest CPU's current clock, MHz.
    pub cpu_mhz_min: Option<f64>,
    /// The hottest thermal zone, degrees Celsius.
    pub temp_c: Option<f64>,
}

/// The box's throttling files, found once under a root (`/`, or a fake tree in a test).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoxSources {
    /// Every `thermal_throttle/*_throttle_count` file there was.
    throttle_counts: Vec<PathBuf>,
    /// Every `cpufreq/scaling_cur_freq` file there was.
    cpu_freqs: Vec<PathBuf>,
    /// Every thermal zone's `temp` file there was.
    zone_temps: Vec<PathBuf>,
}

/// The entries of `dir` whose names are `prefix` and a number, at most [`MAX_ENTRIES`], in
/// numeric order; none where `dir` cannot be listed.
fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n = name.to_str()?.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .take(MAX_ENTRIES)
        .collect();
    found.sort_by_key(|(n, _)| *n);
    found.into_iter().map(|(_, p)| p).collect()
}

impl BoxSources {
    /// Find the files under `root` (the real box: `/`). A CPU or zone without a file is left
    /// out; a box with none of them gives no readings.
    pub fn discover(root: &Path) -> BoxSources {
        let cpus = numbered(&root.join("sys/devices/system/cpu"), "cpu");
        let zones = numbered(&root.join("sys/class/thermal"), "thermal_zone");
        let existing = |paths: Vec<PathBuf>| -> Vec<PathBuf> {
            paths.into_iter().filter(|p| p.is_file()).collect()
        };
        BoxSources {
            throttle_counts: existing(
                cpus.iter()
                    .flat_map(|c| {
                        ["core_throttle_count", "package_throttle_count"]
                            .map(|f| c.join("thermal_throttle").join(f))
                    })
                    .collect(),
            ),
            cpu_freqs: existing(
                cpus.iter()
                    .map(|c| c.join("cpufreq/scaling_cur_freq"))
                    .collect(),
            ),
            zone_temps: existing(zones.iter().map(|z| z.join("temp")).collect()),
        }
    }

    /// Read them all now.
    pub fn read(&self) -> BoxReading {
        let counts: Vec<u64> = self
            .throttle_counts
            .iter()
            .filter_map(|p| read_count(p))
            .collect();
        let khz: Vec<i64> = self
            .cpu_freqs
            .iter()
            .filter_map(|p| read_integer(p))
            .collect();
        let temps: Vec<i64> = self
            .zone_temps
            .iter()
            .filter_map(|p| read_integer(p))
            .collect();
        summarize_reading(&counts, &khz, &temps)
    }
}

/// The figures of one look from the numbers the files gave (pure): counts summed, clocks
/// (kHz) averaged and their least, zones (millidegrees) their hottest.
pub fn summarize_reading(counts: &[u64], cpu_khz: &[i64], zone_millidegrees: &[i64]) -> BoxReading {
    let mean_khz = (!cpu_khz.is_empty())
        .then(|| cpu_khz.iter().map(|&k| k as f64).sum::<f64>() / cpu_khz.len() as f64);
    BoxReading {
        throttle_count: (!counts.is_empty())
            .then(|| counts.iter().fold(0u64, |a, &c| a.saturating_add(c))),
        cpu_mhz: mean_khz.map(|k| k / 1e3),
        cpu_mhz_min: cpu_khz.iter().copied().min().map(khz_to_mhz),
        temp_c: zone_millidegrees
            .iter()
            .copied()
            .max()
            .map(millidegrees_to_c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_trimmed_and_garbage_is_no_reading() {
        assert_eq!(parse_integer("1800000\n"), Some(1_800_000));
        assert_eq!(parse_integer("  -5000 \n"), Some(-5000), "a cold zone");
        assert_eq!(parse_integer(""), None, "empty is no reading, not a zero");
        assert_eq!(parse_integer("\n"), None);
        assert_eq!(parse_integer("48.5"), None);
        assert_eq!(parse_integer("<unsupported>"), None);
        assert_eq!(parse_integer("12 34"), None);
        assert_eq!(parse_count("17\n"), Some(17));
        assert_eq!(parse_count("-1"), None, "a counter is never negative");
    }

    #[test]
    fn units_convert_as_the_kernel_gives_them() {
        assert_eq!(hz_to_mhz(1_000_000_000), 1000.0);
        assert_eq!(khz_to_mhz(2_400_000), 2400.0);
        assert_eq!(millidegrees_to_c(71_500), 71.5);
    }

    #[test]
    fn one_look_sums_counts_averages_clocks_and_takes_the_hottest_zone() {
        let r = summarize_reading(&[3, 4, 0, 1], &[2_400_000, 1_800_000], &[45_000, 78_000]);
        assert_eq!(r.throttle_count, Some(8));
        assert_eq!(r.cpu_mhz, Some(2100.0));
        assert_eq!(r.cpu_mhz_min, Some(1800.0));
        assert_eq!(r.temp_c, Some(78.0));
        assert_eq!(summarize_reading(&[], &[], &[]), BoxReading::default());
        let saturated = summarize_reading(&[u64::MAX, 5], &[], &[]);
        assert_eq!(saturated.throttle_count, Some(u64::MAX));
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A fake sysfs: cpu0 and cpu1 with throttle counts and clocks, cpu2 with neither, a
    /// directory that is no CPU, two zones that read and one that does not.
    fn fake_box() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        for (cpu, core, package, khz) in [
            (0, "2\n", "5\n", "2400000\n"),
            (1, "1\n", "5\n", "1600000\n"),
        ] {
            write(
                r,
                &format!("sys/devices/system/cpu/cpu{cpu}/thermal_throttle/core_throttle_count"),
                core,
            );
            write(
                r,
                &format!("sys/devices/system/cpu/cpu{cpu}/thermal_throttle/package_throttle_count"),
                package,
            );
            write(
                r,
                &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"),
                khz,
            );
        }
        std::fs::create_dir_all(r.join("sys/devices/system/cpu/cpu2")).unwrap();
        write(r, "sys/devices/system/cpu/cpufreq/boost", "1\n");
        write(r, "sys/devices/system/cpu/cpuidle/current_driver", "none\n");
        write(r, "sys/class/thermal/thermal_zone0/temp", "45000\n");
        write(r, "sys/class/thermal/thermal_zone1/temp", "78250\n");
        write(r, "sys/class/thermal/thermal_zone2/temp", "garbage\n");
        write(r, "sys/class/thermal/thermal_zone3/temp", "");
        write(r, "sys/class/thermal/cooling_device0/cur_state", "99000\n");
        d
    }

    #[test]
    fn a_fake_sysfs_tree_reads_as_the_box_it_describes() {
        let d = fake_box();
        let sources = BoxSources::discover(d.path());
        assert_eq!(sources.throttle_counts.len(), 4, "{sources:?}");
        assert_eq!(sources.cpu_freqs.len(), 2);
        assert_eq!(
            sources.zone_temps.len(),
            4,
            "found; the garbage ones read as nothing"
        );
        let r = sources.read();
        assert_eq!(r.throttle_count, Some(2 + 5 + 1 + 5));
        assert_eq!(r.cpu_mhz, Some(2000.0));
        assert_eq!(r.cpu_mhz_min, Some(1600.0));
        assert_eq!(r.temp_c, Some(78.25), "the cooling device is no zone");

        // The counts rise between looks: the files are read again, not remembered.
        write(
            d.path(),
            "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count",
            "9\n",
        );
        assert_eq!(sources.read().throttle_count, Some(2 + 5 + 9 + 5));
    }

    #[test]
    fn a_box_without_the_files_gives_no_readings() {
        let d = tempfile::tempdir().unwrap();
        let sources = BoxSources::discover(d.path());
        assert_eq!(sources, BoxSources::default());
        assert_eq!(sources.read(), BoxReading::default());
        // Only zones: the CPUs' figures stay absent, never zero.
        write(d.path(), "sys/class/thermal/thermal_zone0/temp", "51000\n");
        let r = BoxSources::discover(d.path()).read();
        assert_eq!(
            (r.throttle_count, r.cpu_mhz, r.temp_c),
            (None, None, Some(51.0))
        );
    }

    #[test]
    fn the_devices_files_read_in_their_units_and_are_checked_up_front() {
        let d = tempfile::tempdir().unwrap();
        let freq = d.path().join("cur_freq");
        let temp = d.path().join("temp1_input");
        std::fs::write(&freq, "300000000\n").unwrap();
        std::fs::write(&temp, "71000\n").unwrap();
        let files = DeviceFiles {
            freq: Some(freq.clone()),
            temp: Some(temp.clone()),
        };
        assert_eq!(read_device(&files), (Some(300.0), Some(71.0)));
        assert_eq!(read_device(&DeviceFiles::default()), (None, None));
        assert!(check_device_file("--device-freq", &freq).is_ok());

        let missing = d.path().join("missing");
        let e = check_device_file("--device-freq", &missing).unwrap_err();
        assert!(
            e.starts_with("--device-freq ") && e.contains("cannot be read") && e.contains("Hz"),
            "{e}"
        );
        let e = check_device_file("--device-temp", d.path()).unwrap_err();
        assert!(
            e.contains("cannot be read") && e.contains("millidegrees"),
            "a directory: {e}"
        );
        std::fs::write(&temp, "N/A\n").unwrap();
        let e = check_device_file("--device-temp", &temp).unwrap_err();
        assert!(
            e.contains("does not read as a number") && e.contains("N/A"),
            "{e}"
        );
        assert_eq!(
            read_device(&files),
            (Some(300.0), None),
            "gone bad mid-run: left out"
        );
        std::fs::write(&temp, vec![b'7'; MAX_FILE_BYTES + 1]).unwrap();
        let e = check_device_file("--device-temp", &temp).unwrap_err();
        assert!(e.contains("more than 4096 bytes"), "{e}");
        assert!(!e.contains("7777"), "the file is not quoted whole: {e}");
    }
}
