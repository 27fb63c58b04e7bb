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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{
        Check, DuringReplies, Floors, FootprintFloors, MemoryReading, RunManifest, Startup, Status,
    };
    use crate::judging::verdict::evidence::Baseline;
    use crate::selftest::cases::{greedy_manifest, reply};

    const MB: u64 = 1 << 20;

    static READY: Startup = Startup::Ready {
        after_ms: 1500.0,
        probe: String::new(),
        not_ready_answers: 0,
    };

    /// A run.json of a serve the gate launched (its argv recorded, its pid not), ready after
    /// 1.5 s.
    fn launched() -> RunManifest {
        let mut m = greedy_manifest();
        m.serve_argv = Some(vec!["serve".into()]);
        m.startup = Some(READY.clone());
        m
    }

    /// 20 replies at 100 tok/s (indexes from 1), each read at its end at `mib` MiB of serve
    /// memory where given.
    fn replies(mib: Option<u64>) -> Vec<ReplyRecord> {
        (0..20)
            .map(|i| {
                let at: Vec<u64> = (0..11).map(|t| 200 + 10 * t).collect();
                let mut r = reply(&at, "Paris.");
                r.index = i + 1;
                r.memory = mib.map(|m| MemoryReading {
                    processes: 1,
                    rss_anon: m * MB,
                    ..MemoryReading::default()
                });
                r
            })
            .collect()
    }

    fn criteria(footprint: FootprintFloors) -> Criteria {
        Criteria::new(Floors {
            floor: 60.0,
            first_token_ms: 600.0,
            footprint,
            ..Floors::default()
        })
        .unwrap()
    }

    fn checks(lines: &[Line]) -> Vec<Check> {
        lines.iter().map(|l| l.check).collect()
    }

    /// A load.json whose conditions samples read the serve at `mib` MiB.
    fn load_at(mib: u64) -> LoadSnapshot {
        let mut sample = Sample::bare(1.0);
        sample.memory = Some(MemoryReading {
            processes: 1,
            rss_anon: mib * MB,
            ..MemoryReading::default()
        });
        LoadSnapshot {
            load1: 0.5,
            load5: 0.5,
            load15: 0.5,
            ncpu: 2,
            taken: String::new(),
            during: Some(DuringReplies::of(vec![sample])),
        }
    }

    // The tests below each name the cargo mutant they catch (docs/testing.md).

    /// A hand-made run (no run.json) with no footprint setting and no reading has no footprint
    /// line. Catches `footprint_lines` replaced with one default line, and the guard
    /// `recorded` of the not-read line made `true`.
    #[test]
    fn a_hand_made_run_without_readings_or_settings_has_no_footprint_line() {
        let all = replies(None);
        let e = Evidence::of(&all, &READY);
        let lines = footprint_lines(&e, &all, &criteria(FootprintFloors::default()));
        assert_eq!(checks(&lines), Vec::<Check>::new());
    }

    /// A hand-made run given `--ready-limit` and `--cold-first-token-ms` has the startup and
    /// cold-reply lines. Catches `recorded || floors.ready_limit_ms.is_some()` and
    /// `recorded || floors.cold_first_token_ms.is_some()` made `&&`, and `footprint_lines`
    /// replaced with no lines.
    #[test]
    fn a_hand_made_run_has_the_lines_its_settings_ask_for() {
        let all = replies(None);
        let e = Evidence::of(&all, &READY);
        let c = criteria(FootprintFloors {
            ready_limit_ms: Some(2000.0),
            cold_first_token_ms: Some(500.0),
            ..FootprintFloors::default()
        });
        let lines = footprint_lines(&e, &all, &c);
        assert_eq!(checks(&lines), vec![Check::Startup, Check::ColdReply]);
        assert_eq!(lines[0].status, Status::Ok, "{}", lines[0].text);
    }

    /// A recorded run of a launched serve (its argv recorded, no pid) times its launch, and
    /// where no memory was read says so once. Catches `m.serve_pid.is_some() ||
    /// m.serve_argv.is_some()` made `&&` (the launch said to be an attach), and the guard
    /// `recorded` made `false` (the not-read line left out).
    #[test]
    fn a_recorded_launch_is_timed_and_memory_not_read_is_said() {
        let all = replies(None);
        let m = launched();
        let e = Evidence {
            manifest: Some(&m),
            ..Evidence::of(&all, &READY)
        };
        let lines = footprint_lines(&e, &all, &criteria(FootprintFloors::default()));
        assert_eq!(
            checks(&lines),
            vec![Check::Startup, Check::ColdReply, Check::Memory]
        );
        assert_eq!(lines[0].text, "ready 1.5 s after launch");
        assert_eq!(lines[2], not_read_line(true, &FootprintFloors::default()));
    }

    /// The memory line's peak counts the conditions samples (load.json), the device's memory
    /// not exposed is said on it once, and a recorded baseline gives the baseline-memory
    /// line. Catches `samples` replaced with no samples or one default sample, and the
    /// deletion of the `BaselineEvidence::Recorded` arm.
    #[test]
    fn samples_count_in_the_peak_and_a_baseline_is_set_beside() {
        let all = replies(Some(400));
        let load = load_at(700);
        let m = launched();
        let theirs = replies(Some(400));
        let e = Evidence {
            manifest: Some(&m),
            load: Some(&load),
            baseline: BaselineEvidence::Recorded {
                candidate: &m,
                baseline: Baseline {
                    name: "base",
                    manifest: &m,
                    replies: &theirs,
                    load: None,
                },
            },
            ..Evidence::of(&all, &READY)
        };
        let lines = footprint_lines(&e, &all, &criteria(FootprintFloors::default()));
        assert_eq!(
            checks(&lines),
            vec![
                Check::Startup,
                Check::ColdReply,
                Check::Memory,
                Check::BaselineMemory
            ]
        );
        let memory = &lines[2];
        assert!(
            memory.text.starts_with("serve memory 700 MiB peak; ")
                && memory.text.ends_with(&format!("; {DEVICE_NOT_EXPOSED}")),
            "{}",
            memory.text
        );
        assert!(
            lines[3]
                .text
                .starts_with("peak 700 MiB against the baseline's 400 MiB (+75%)"),
            "{}",
            lines[3].text
        );
        // The baseline's startup is set beside the candidate's: 1.5 s against 1.5 s.
        assert!(
            lines[0].text.contains("1x the baseline's 1.5 s"),
            "{}",
            lines[0].text
        );
    }

    /// Where the device's memory was read, it has its own line and the serve's says nothing
    /// of it.
    #[test]
    fn device_memory_read_has_its_own_line() {
        let mut all = replies(Some(400));
        for r in &mut all {
            r.memory.as_mut().unwrap().drm = [("drm-total-memory".to_string(), 64 * MB)].into();
        }
        let e = Evidence::of(&all, &READY);
        let lines = footprint_lines(&e, &all, &criteria(FootprintFloors::default()));
        assert_eq!(checks(&lines), vec![Check::Memory, Check::DeviceMemory]);
        assert!(
            !lines[0].text.contains("device memory"),
            "{}",
            lines[0].text
        );
    }
}
