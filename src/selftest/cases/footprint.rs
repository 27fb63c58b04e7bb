//! The serve's footprint (issue 34; docs/footprint.md): its memory and the device's a reply,
//! their peaks, its startup, its cold reply and the reply after an idle wait.

use crate::archive::check::Check;
use crate::archive::record::{MemoryReading, ReplyRecord, Sample, Startup};
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, good, numbered, reply, serve_waited, MS};

/// A MiB, in bytes.
const MIB: u64 = 1 << 20;

/// A deterministic jitter of up to 512 KiB: an allocator's noise.
fn jitter(i: usize) -> u64 {
    ((i * 7919) % 512) as u64 * 1024
}

/// `n` good replies whose serve memory (RssAnon) at their end is `anon(i)` bytes (i from 0),
/// with a model of 1 GiB mapped (RssFile, never counted).
fn with_memory(n: usize, anon: impl Fn(usize) -> u64) -> Vec<ReplyRecord> {
    let replies = (0..n)
        .map(|i| ReplyRecord {
            memory: Some(MemoryReading {
                processes: 2,
                rss_anon: anon(i),
                rss_file: 1024 * MIB,
                ..MemoryReading::default()
            }),
            ..good()
        })
        .collect();
    numbered(replies)
}

/// The base case over `replies` whose memory was read, its rate and first-token lines over
/// all of them.
fn memory_case(name: &'static str, replies: Vec<ReplyRecord>) -> Case {
    let mut c = base(name);
    c.replies = replies;
    c.expect = vec![];
    c
}

/// `r` sent `sent_ms` after the replies began, its events shifted with it.
fn sent_at(mut r: ReplyRecord, sent_ms: u64) -> ReplyRecord {
    let shift = sent_ms * MS;
    r.sent_ns += shift;
    r.end_ns += shift;
    for c in &mut r.chunks {
        c.at_ns += shift;
    }
    r
}

/// A good reply (100 tok/s) whose first token comes `first_ms` after its send.
fn first_token_at(first_ms: u64) -> ReplyRecord {
    let at: Vec<u64> = (0..11).map(|i| first_ms + 10 * i).collect();
    reply(&at, "Paris.")
}

/// Ready `after_ms` after launch.
fn ready_after(after_ms: f64) -> Startup {
    Startup::Ready {
        after_ms,
        probe: "/health".into(),
        not_ready_answers: 0,
    }
}

/// The memory line: flat, a leak, a cache filled while warm, a leak in swap, a noisy growth
/// under the limit, too few replies, the peak against --max-serve-memory.
pub(crate) fn memory() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    let mut c = memory_case(
        "flat serve memory passes, the model's mapped pages not counted",
        with_memory(12, |i| 400 * MIB + jitter(i)),
    );
    c.expect = vec![
        (Check::Memory, Ok, "serve memory 400 MiB peak; "),
        (Check::Memory, Ok, "over 9 replies after 3 warm: no growth"),
        (Check::Memory, Ok, "mapped files 1.00 GiB peak, not counted"),
        (Check::Memory, Ok, "device memory not exposed"),
        (Check::Rate, Ok, "over 12 replies"),
    ];
    c.absent = vec![
        Check::DeviceMemory,
        Check::Startup,
        Check::ColdReply,
        Check::Idle,
    ];
    cases.push(c);

    let mut c = memory_case(
        "a leak of 4 MiB a reply fails memory",
        with_memory(12, |i| 400 * MIB + 4 * MIB * i as u64),
    );
    c.expect = vec![
        (Check::Memory, Fail, "+4.00 MiB a reply"),
        (Check::Memory, Fail, "grows by more than 1.00 MiB a reply"),
        (Check::Rate, Ok, "over 12 replies"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // A cache filled over the first 6 replies, then flat: counted from the first reply its 6
    // steps would read as a leak of over 8 MiB a reply.
    let mut c = memory_case(
        "a cache filled in the warm replies passes",
        with_memory(12, |i| {
            if i < 6 {
                50 * MIB * (i as u64 + 1)
            } else {
                350 * MIB
            }
        }),
    );
    c.floors.footprint.memory_warm = Some(6);
    c.expect = vec![(Check::Memory,
        Ok,
        "serve memory 350 MiB peak; +0.0 KiB a reply (95% interval +0.0 to +0.0) over 6 replies after 6 warm: no growth",
    )];
    cases.push(c);

    // RssAnon stays; the leak is swapped out as it is written. RssAnon + VmSwap sees it.
    let mut replies = with_memory(12, |_| 400 * MIB);
    for (i, r) in replies.iter_mut().enumerate() {
        if let Some(m) = r.memory.as_mut() {
            m.swap = 4 * MIB * i as u64;
        }
    }
    let mut c = memory_case("a leak hidden in swap fails memory", replies);
    c.expect = vec![(Check::Memory,
        Fail,
        "+4.00 MiB a reply (95% interval +4.00 to +4.00) over 9 replies after 3 warm: grows by more than 1.00 MiB a reply",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // 0.8 MiB a reply, every other reply 2 MiB higher: the interval holds 1 MiB, so the
    // replies do not make sure of growth over the limit.
    let mut c = memory_case(
        "a noisy growth whose interval holds the limit is said, not failed",
        with_memory(12, |i| {
            400 * MIB + i as u64 * 4 * MIB / 5 + if i % 2 == 1 { 2 * MIB } else { 0 }
        }),
    );
    c.expect = vec![(Check::Memory, Ok, "grows, by less than 1.00 MiB a reply")];
    cases.push(c);

    let mut c = memory_case(
        "too few counted replies leave growth unjudged",
        with_memory(8, |i| 400 * MIB + 100 * MIB * i as u64),
    );
    c.expect = vec![(
        Check::Memory,
        Info,
        "growth not judged: 5 replies after 3 warm, 6 needed",
    )];
    cases.push(c);

    cases.extend(peaks());
    cases
}

/// The peak against --max-serve-memory, a reading between replies included.
fn peaks() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = memory_case(
        "a peak over --max-serve-memory fails memory, flat or not",
        with_memory(12, |_| 600 * MIB),
    );
    c.floors.footprint.max_serve_memory = Some(512.0 * MIB as f64);
    c.expect = vec![
        (
            Check::Memory,
            Fail,
            "serve memory 600 MiB peak (over the limit of 512 MiB)",
        ),
        (Check::Memory, Fail, "no growth"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = memory_case(
        "a peak within --max-serve-memory passes",
        with_memory(12, |_| 400 * MIB),
    );
    c.floors.footprint.max_serve_memory = Some(512.0 * MIB as f64);
    c.expect = vec![(
        Check::Memory,
        Ok,
        "serve memory 400 MiB peak (within the limit of 512 MiB)",
    )];
    cases.push(c);

    // Every reply ends at 400 MiB; a conditions sample between two replies read 700.
    let mut c = memory_case(
        "a peak between replies, in a conditions sample, fails memory",
        with_memory(12, |_| 400 * MIB),
    );
    let mut load = serve_waited(0);
    if let Some(d) = load.during.as_mut() {
        d.samples.push(Sample {
            memory: Some(MemoryReading {
                processes: 2,
                rss_anon: 700 * MIB,
                ..MemoryReading::default()
            }),
            ..Sample::bare(1500.0)
        });
    }
    c.load = Some(load);
    c.floors.footprint.max_serve_memory = Some(512.0 * MIB as f64);
    c.expect = vec![(
        Check::Memory,
        Fail,
        "serve memory 700 MiB peak (over the limit of 512 MiB)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases
}

/// The device-memory line from DRM fdinfo keys.
pub(crate) fn device() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    // amdxdna's keys: no drm-resident-memory, so drm-total-memory is judged.
    let mut replies = with_memory(12, |_| 400 * MIB);
    for (i, r) in replies.iter_mut().enumerate() {
        if let Some(m) = r.memory.as_mut() {
            m.drm = [
                (
                    "drm-total-memory".to_string(),
                    64 * MIB + 2 * MIB * i as u64,
                ),
                ("drm-shared-memory".to_string(), 7 * MIB),
            ]
            .into();
        }
    }
    let mut c = memory_case(
        "device memory from DRM keys leaking fails device-memory",
        replies,
    );
    c.expect = vec![
        (Check::Memory, Ok, "no growth"),
        (Check::DeviceMemory,
            Fail,
            "device memory 86.0 MiB peak; +2.00 MiB a reply (95% interval +2.00 to +2.00) over 9 replies after 3 warm: grows by more than 1.00 MiB a reply",
        ),
    ];
    c.refuse = vec![(Check::Memory, "not exposed")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // amdgpu: resident keys per region, and the legacy alias beside one of them, counted once.
    let mut replies = with_memory(12, |_| 400 * MIB);
    for r in &mut replies {
        if let Some(m) = r.memory.as_mut() {
            m.drm = [
                ("drm-total-vram".to_string(), 900 * MIB),
                ("drm-resident-vram".to_string(), 300 * MIB),
                ("drm-memory-vram".to_string(), 300 * MIB),
                ("drm-resident-gtt".to_string(), 20 * MIB),
            ]
            .into();
        }
    }
    let mut c = memory_case(
        "flat device memory passes, each region's resident counted once",
        replies,
    );
    c.floors.footprint.max_device_memory = Some(512.0 * MIB as f64);
    c.expect = vec![(
        Check::DeviceMemory,
        Ok,
        "device memory 320 MiB peak (within the limit of 512 MiB)",
    )];
    cases.push(c);

    cases
}

/// Startup, the cold reply and the idle probe: timing, so a busy box may excuse them; memory
/// never.
pub(crate) fn readiness() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    let mut c = base("a slow startup over --ready-limit fails startup");
    c.startup = ready_after(95_000.0);
    c.floors.footprint.ready_limit_ms = Some(60_000.0);
    c.expect = vec![(Check::Startup, Fail, "ready 95 s after launch (limit 60 s)")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a startup within --ready-limit passes");
    c.startup = ready_after(42_000.0);
    c.floors.footprint.ready_limit_ms = Some(60_000.0);
    c.expect = vec![(Check::Startup, Ok, "ready 42 s after launch (limit 60 s)")];
    cases.push(c);

    let mut c = base("a slow startup is timing: with --busy-skip on a busy box it is a SKIP");
    c.startup = ready_after(95_000.0);
    c.floors.footprint.ready_limit_ms = Some(60_000.0);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![(Check::Startup, Fail, "ready 95 s after launch")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    // The first reply made is a warm-up: it is the cold one, and rate and first-token leave
    // it out.
    let mut c = base("a cold reply over --cold-first-token-ms fails cold-reply");
    let cold = ReplyRecord {
        warmup: true,
        ..first_token_at(2500)
    };
    c.replies = numbered(vec![cold, good(), good(), good()]);
    c.floors.footprint.cold_first_token_ms = Some(1000.0);
    c.expect = vec![
        (
            Check::ColdReply,
            Fail,
            "cold first token 2.5 s, a warm median of 200 ms over 3 replies (limit 1 s)",
        ),
        (Check::FirstToken, Ok, "median 200 ms over 3 replies"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases.extend(idle());

    let mut c = memory_case(
        "a memory FAIL on a busy box stays FAIL: memory is never excused",
        with_memory(12, |i| 400 * MIB + 4 * MIB * i as u64),
    );
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![
        (Check::Memory, Fail, "grows by more than 1.00 MiB a reply"),
        (Check::Load, Info, "31% of the time it was ready to run"),
    ];
    c.refuse = vec![(Check::Load, "busy box")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases
}

/// The idle probe: judged by the idle line, never by rate or first-token.
fn idle() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    // Three replies sent 1 s apart, then the probe 30 s after the last ended, slow at 900 ms
    // and 25 tok/s: rate and first-token over the three are untouched.
    let probe_at = |first_ms: u64| {
        let at: Vec<u64> = (0..11).map(|i| first_ms + 40 * i).collect();
        ReplyRecord {
            idle_probe: true,
            ..sent_at(reply(&at, "Paris."), 32_300)
        }
    };
    let judged = || {
        (0..3)
            .map(|i| sent_at(good(), 1000 * i))
            .collect::<Vec<_>>()
    };
    let mut c =
        base("an idle probe slow beyond --first-token-ms fails idle, not rate or first-token");
    let mut replies = judged();
    replies.push(probe_at(900));
    c.replies = numbered(replies);
    c.planned = Some(3);
    c.expect = vec![
        (Check::Idle,
            Fail,
            "first token 900 ms after 30 s idle, a warm median of 200 ms over 3 replies (limit 600 ms)",
        ),
        (Check::Rate,
            Ok,
            "median 100.0 tok/s over 3 replies (floor 60.0",
        ),
        (Check::FirstToken,
            Ok,
            "median 200 ms over 3 replies (limit 600)",
        ),
        (Check::Content, Ok, "3 replies, all with content"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an idle probe within --first-token-ms passes");
    let mut replies = judged();
    replies.push(probe_at(450));
    c.replies = numbered(replies);
    c.planned = Some(3);
    c.expect =
        vec![(Check::Idle,
        Ok,
        "first token 450 ms after 30 s idle, a warm median of 200 ms over 3 replies (limit 600 ms)",
    )];
    cases.push(c);

    cases
}
