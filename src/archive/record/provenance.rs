//! What a run ran on and with (run.json `provenance`, issue 18): the model files hashed, the
//! serve's arguments with the port put back as a placeholder, the workload's hash and the box.

use serde::{Deserialize, Serialize};

/// The placeholder in the serve's arguments that becomes the port the gate picked; the port is
/// recorded back as it in provenance's `serve_argv`.
pub const PORT_PLACEHOLDER: &str = "{port}";

/// A run's provenance: what it ran, with what, on which box. Two runs whose model files,
/// serve arguments or workload differ measure different things; two whose box differs measure
/// the same thing on different hardware or software. Gathered once, before run.json is first
/// written; whatever could not be read is left out and named in `problems`, never guessed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// npu-serve-smoke's version.
    pub tool_version: String,
    /// The serve binary's sha256, hex (as `serve_binary.sha256`); absent when attached.
    #[serde(default)]
    pub serve_binary_sha256: Option<String>,
    /// Each file named in the serve's arguments (a model, a config), hashed: an argument (or
    /// the value after `=` in `--opt=VALUE`) that is an existing regular file other than the
    /// programs run. At most 16.
    #[serde(default)]
    pub model_files: Vec<HashedFile>,
    /// The serve's command line as launched (with the `--hold-cmd` prefix, if any), with the
    /// port the gate picked put back as `{port}`, so runs on different ports compare equal;
    /// absent when attached.
    #[serde(default)]
    pub serve_argv: Option<Vec<String>>,
    /// Where in `serve_argv` the serve's own program is (0, or after the `--hold-cmd`
    /// prefix): its path is the release candidate's, compared by `serve_binary_sha256`, not as
    /// an argument.
    #[serde(default)]
    pub serve_program_at: Option<usize>,
    /// sha256, hex, of the workload as canonical JSON (keys sorted, no spaces):
    /// `{"extra_body":...,"max_tokens":N,"prompts":[...]}`, the prompts as run.json has them.
    pub workload_sha256: String,
    /// Host name (gethostname).
    #[serde(default)]
    pub host: Option<String>,
    /// /etc/machine-id (or /var/lib/dbus/machine-id): the installation, whatever its name.
    #[serde(default)]
    pub machine_id: Option<String>,
    /// The CPU's model (/proc/cpuinfo `model name`; on Arm boards its `Model` or the device
    /// tree's model).
    #[serde(default)]
    pub cpu_model: Option<String>,
    /// CPUs online (`processor` entries in /proc/cpuinfo).
    #[serde(default)]
    pub ncpu: Option<usize>,
    /// Memory, KiB (/proc/meminfo `MemTotal`).
    #[serde(default)]
    pub mem_total_kib: Option<u64>,
    /// Kernel release (uname -r, from /proc/sys/kernel/osrelease).
    #[serde(default)]
    pub kernel: Option<String>,
    /// Accelerator kernel modules present, name -> /sys/module/NAME/version (or `srcversion
    /// X`, `loaded, no version`, `built in, no version` for a module that declares none).
    #[serde(default)]
    pub modules: std::collections::BTreeMap<String, String>,
    /// Device firmware versions from sysfs and procfs, `DRIVER DEVICE ATTRIBUTE` -> value,
    /// e.g. `amdxdna 0000:c5:00.1 fw_version` -> `1.5.2.380`.
    #[serde(default)]
    pub firmware: std::collections::BTreeMap<String, String>,
    /// What could not be read or hashed, in words.
    #[serde(default)]
    pub problems: Vec<String>,
}

/// A file the serve was given, hashed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashedFile {
    /// Its resolved absolute path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256, hex.
    pub sha256: String,
    /// Whether the hash came from the gate's hash cache (the file's path, size, times, inode
    /// and device unchanged since it was hashed) rather than from reading the file.
    #[serde(default)]
    pub cached: bool,
}
