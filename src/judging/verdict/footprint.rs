//! The footprint's lines of a run (issue 34; docs/footprint.md), put together: startup,
//! cold-reply and idle ([`super::readiness`]), then memory, device-memory and baseline-memory
//! ([`super::memory`]). Each reads the run's replies whole, warm-ups and the idle probe included:
//! the cold reply is the first made, and memory is read at every reply's end.

use crate::archive::byte_size::said;
use crate::archive::record::{Check, Line, LoadSnapshot, ReplyRecord, Sample, Status};
use crate::judging::verdict::criteria::Criteria;
use crate::judging::verdict::evidence::{BaselineEvidence, Evidence};
use crate::judging::verdict::memory::{
    baseline_memory_line, memory_line, not_read_line, Memory, DEVICE_NOT_EXPOSED,
};
use crate::judging::verdict::readiness::{cold_reply_line, idle_line, startup_line};

/// The samples a run's load.json holds, or none.
fn samples(load: Option<&LoadSnapshot>) -> &[Sample] {
    load.and_then(|l| l.during.as_ref())
        .map_or(&[], |d| d.samples.as_slice())
}

/// The footprint lines of a run whose serve came up; `all` is every reply the run made, in
/// order (warm-ups and the idle probe included). A hand-made run (no run.json) has the lines
/// its settings or readings call for, and no others.
pub fn footprint_lines(e: &Evidence<'_>, all: &[ReplyRecord], c: &Criteria) -> Vec<Line> {
    let floors = &c.floors().footprint;
    let mut lines = Vec::new();
    let recorded = e.manifest.is_some();
    let launched = e
        .manifest
        .is_none_or(|m| m.serve_pid.is_some() || m.serve_argv.is_some());
    let baseline = match e.baseline {
        BaselineEvidence::Recorded { baseline, .. } => Some(baseline),
        _ => None,
    };
    if recorded || floors.ready_limit_ms.is_some() {
        let theirs = baseline.and_then(|b| b.manifest.startup.as_ref());
        lines.extend(startup_line(e.startup, launched, theirs, floors));
    }
    if recorded || floors.cold_first_token_ms.is_some() {
        lines.extend(cold_reply_line(all, floors));
    }
    lines.extend(idle_line(all, c.floors().first_token_ms));
    let ours = samples(e.load);
    match memory_line(Memory::Serve, all, ours, floors) {
        Some(mut line) => {
            match memory_line(Memory::Device, all, ours, floors) {
                Some(device) => {
                    lines.push(line);
                    lines.push(device);
                }
                None => {
                    line.text.push_str(&format!("; {DEVICE_NOT_EXPOSED}"));
                    lines.push(line);
                    // A device limit nobody could check is inconclusive, never a pass.
                    if let Some(m) = floors.max_device_memory {
                        lines.push(Line::new(
                            Check::DeviceMemory,
                            Status::Inconclusive,
                            format!(
                                "{DEVICE_NOT_EXPOSED}: --max-device-memory {} could not be held to",
                                said(m)
                            ),
                        ));
                    }
                }
            }
            if let Some(b) = baseline {
                lines.extend(baseline_memory_line(
                    (all, ours),
                    (b.replies, samples(b.load)),
                    floors,
                ));
            }
        }
        None if recorded => lines.push(not_read_line(launched, floors)),
        None => {}
    }
    lines
}
