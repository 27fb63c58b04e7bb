//! The serve's footprint as a run records it (issue 34; docs/footprint.md): its memory and the
//! device's at one look, on each conditions sample (load.json) and at each reply's end
//! (replies.jsonl), and what the footprint lines are judged against.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The serve's memory at one look, summed over the processes of its tree (each read once from
/// /proc/PID/status: threads share one address space), in bytes; and the device's, where the
/// box exposes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryReading {
    /// The processes of the serve's tree whose status was read.
    pub processes: u32,
    /// RssAnon summed: resident anonymous memory (the heap, where a leak lands).
    pub rss_anon: u64,
    /// VmSwap summed: anonymous memory swapped out (a leak the kernel swaps out is invisible
    /// in RSS, ollama#18106).
    pub swap: u64,
    /// RssFile summed: resident file mappings (a model mapped with mmap: not a leak).
    pub rss_file: u64,
    /// RssShmem summed: resident shared memory (SysV shm, tmpfs, shared anonymous mappings,
    /// a device's buffers mapped by some drivers).
    pub rss_shmem: u64,
    /// The DRM fdinfo memory keys (`drm-total-<region>`, `drm-resident-<region>`,
    /// `drm-memory-<region>`, ...) of the fds the serve's processes hold on /dev/dri/* and
    /// /dev/accel/*, in bytes, summed over the DRM clients (each client once); empty where no
    /// such fd shows one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub drm: BTreeMap<String, u64>,
    /// `--device-memory`'s counter, bytes; absent without it or where it did not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_file: Option<u64>,
}

impl MemoryReading {
    /// The serve memory a leak is judged on: RssAnon + VmSwap.
    pub fn serve_bytes(&self) -> u64 {
        self.rss_anon.saturating_add(self.swap)
    }

    /// The device memory judged: `--device-memory`'s counter where given, else the resident
    /// DRM keys summed over regions (`drm-memory-<region>` standing for a region's resident
    /// where the driver prints only that deprecated alias), else the total keys. `None` where
    /// nothing was exposed: never a zero for "not seen".
    pub fn device_bytes(&self) -> Option<u64> {
        if self.device_file.is_some() {
            return self.device_file;
        }
        let region_sum = |prefix: &str| -> Option<u64> {
            let mut found = false;
            let mut sum = 0u64;
            for (key, v) in &self.drm {
                if let Some(region) = key.strip_prefix(prefix) {
                    // drm-memory-<region> is an alias of drm-resident-<region>: count a
                    // region once.
                    if prefix == "drm-memory-"
                        && self.drm.contains_key(&format!("drm-resident-{region}"))
                    {
                        continue;
                    }
                    found = true;
                    sum = sum.saturating_add(*v);
                }
            }
            found.then_some(sum)
        };
        let resident = match (region_sum("drm-resident-"), region_sum("drm-memory-")) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        resident.or_else(|| region_sum("drm-total-"))
    }
}

/// What the footprint lines are held to (issue 34): each absent where the run took its default
/// or gave none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FootprintFloors {
    /// `--max-memory-growth`: the most the serve's memory may grow a reply, bytes (1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory_growth: Option<f64>,
    /// `--max-serve-memory`: the highest the serve's memory may peak, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_serve_memory: Option<f64>,
    /// `--max-device-memory`: the highest the device's memory may peak, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_device_memory: Option<f64>,
    /// `--memory-warm`: the judged replies left out before growth is counted (3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_warm: Option<usize>,
    /// `--max-memory-regression`: the largest rise of the peak over the baseline's, a share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory_regression: Option<f64>,
    /// `--ready-limit`: the longest the serve may take from launch to ready, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_limit_ms: Option<f64>,
    /// `--max-startup-regression`: the largest rise of the time to ready over the baseline's,
    /// a share (0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_startup_regression: Option<f64>,
    /// `--cold-first-token-ms`: the longest the first reply's first token may take, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_first_token_ms: Option<f64>,
}

impl FootprintFloors {
    /// Whether every setting is its default (nothing to write).
    pub fn is_default(&self) -> bool {
        *self == FootprintFloors::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drm(keys: &[(&str, u64)]) -> MemoryReading {
        MemoryReading {
            drm: keys.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..MemoryReading::default()
        }
    }

    #[test]
    fn device_memory_is_the_counter_else_resident_else_total_and_never_a_zero_for_nothing() {
        assert_eq!(MemoryReading::default().device_bytes(), None);
        let total_only = drm(&[("drm-total-memory", 100), ("drm-shared-memory", 7)]);
        assert_eq!(total_only.device_bytes(), Some(100));
        let resident = drm(&[
            ("drm-total-vram", 500),
            ("drm-resident-vram", 300),
            ("drm-resident-gtt", 20),
        ]);
        assert_eq!(resident.device_bytes(), Some(320));
        // amdgpu's deprecated alias stands for a region's resident, once.
        let alias = drm(&[("drm-memory-vram", 40), ("drm-memory-gtt", 2)]);
        assert_eq!(alias.device_bytes(), Some(42));
        let both = drm(&[("drm-memory-vram", 40), ("drm-resident-vram", 40)]);
        assert_eq!(both.device_bytes(), Some(40));
        let counted = MemoryReading {
            device_file: Some(9),
            ..resident
        };
        assert_eq!(counted.device_bytes(), Some(9));
        // A region of zero bytes is a zero the driver said, not nothing.
        assert_eq!(drm(&[("drm-total-memory", 0)]).device_bytes(), Some(0));
    }

    #[test]
    fn serve_memory_is_anonymous_and_swapped_never_file_mappings() {
        let r = MemoryReading {
            processes: 2,
            rss_anon: 10,
            swap: 5,
            rss_file: 1000,
            rss_shmem: 100,
            ..MemoryReading::default()
        };
        assert_eq!(r.serve_bytes(), 15);
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            !text.contains("drm") && !text.contains("device_file"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<MemoryReading>(&text).unwrap(), r);
    }

    /// Floors left at their defaults are not written to run.json; any one given is. Catches
    /// `is_default` replaced with `true` or `false`, and `==` made `!=`.
    #[test]
    fn floors_are_default_until_one_is_given() {
        assert!(FootprintFloors::default().is_default());
        let given = FootprintFloors {
            memory_warm: Some(0),
            ..FootprintFloors::default()
        };
        assert!(!given.is_default());
    }
}
