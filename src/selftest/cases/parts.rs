//! What the hand-made runs are built of: replies and their timing, loads, route records, the
//! floors, and the base case, a passing run each case changes one thing of.

use crate::archive::check::Check;
use crate::archive::record::{
    BurstSlot, ChunkArrival, ConcurrencyPlan, CounterReading, CounterRecord, FileKind, Header,
    LoadSnapshot, MapKind, ProcessRecord, ReplyRecord, RouteRecord, RunManifest, Sampling, Startup,
    TokenLogprob, TopLogprob,
};
use crate::archive::record::{Floors, Outcome, Status, TopProcess};
use crate::judging::verdict::conditions::summarize;

use super::case::{Case, NoiseCase, ReferenceCase};

/// How often a hand-made run's conditions were sampled, ms: the live sampler's first interval.
const SAMPLED_EVERY_MS: u64 = 250;

/// A millisecond, in ns.
pub(crate) const MS: u64 = 1_000_000;

/// A run.json of the hand-made runs: prompt "p", greedy (temperature 0).
pub(crate) fn greedy_manifest() -> RunManifest {
    let mut m: RunManifest = serde_json::from_value(serde_json::json!({
        "schema": 1, "tool_version": "self-test", "argv": [], "url": "http://127.0.0.1:1",
        "prompts": [{"prompt": "p"}], "replies_planned": 1,
        "floors": {"floor": 60.0, "first_token_ms": 600.0},
        "limits": {"ready_timeout_s": 1.0, "grace_s": 1.0, "reply_timeout_s": 1.0},
        "host": "self-test", "started_utc": "", "clock": {"name": "CLOCK_MONOTONIC", "base_ns": 0},
        "serve_log_source": "none", "model": "m",
        "serve_binary": {"path": "/serve", "size": 1, "sha256": "0123456789abcdef"},
    }))
    .expect("a hand-made run.json");
    m.sampling_sent = Some(Sampling {
        temperature: Some(0.0),
        seed: None,
    });
    m
}

/// "Paris." as three scored tokens, each with its runner-up `margins[i]` nats below it; with
/// `took` at position `i`, the runner-up was taken there instead (its text and logprob).
pub(crate) fn scored(margins: [f64; 3], took: Option<usize>) -> Vec<TokenLogprob> {
    let tokens = [("Par", "Mar"), ("is", "ys"), (".", "!")];
    tokens
        .iter()
        .zip(margins)
        .enumerate()
        .map(|(i, (&(usual, other), margin))| {
            let top = vec![
                TopLogprob {
                    token: usual.into(),
                    logprob: -0.01,
                },
                TopLogprob {
                    token: other.into(),
                    logprob: -0.01 - margin,
                },
            ];
            let (token, logprob) = if took == Some(i) {
                (other, -0.01 - margin)
            } else {
                (usual, -0.01)
            };
            TokenLogprob {
                token: token.into(),
                logprob,
                top,
            }
        })
        .collect()
}

/// The base case with a reference whose answer is "Paris." (runners-up `margins` below), the
/// candidate's three answers scored as `candidate` says.
pub(crate) fn against_reference(
    name: &'static str,
    margins: [f64; 3],
    candidate: Vec<TokenLogprob>,
    reference_logprobs: bool,
) -> Case {
    let mut c = base(name);
    let text: String = candidate.iter().map(|t| t.token.as_str()).collect();
    for r in &mut c.replies {
        r.content = text.clone();
        r.logprobs = Some(candidate.clone());
    }
    let mut theirs = reply(&[200, 210, 220], "Paris.");
    theirs.logprobs = reference_logprobs.then(|| scored(margins, None));
    c.reference = Some(ReferenceCase {
        candidate: greedy_manifest(),
        reference: greedy_manifest(),
        replies: vec![theirs],
        reanchors: Vec::new(),
        noise: Vec::new(),
    });
    c
}

/// "Paris." as the reference answers it (runners-up `margins` below), each token's logprob
/// `shift` nats lower and its runner-up's `shift` higher: the same text, other numerics, as a
/// build on other kernels computes it.
pub(crate) fn shifted(margins: [f64; 3], shift: f64) -> Vec<TokenLogprob> {
    let mut tokens = scored(margins, None);
    for t in &mut tokens {
        t.logprob -= shift;
        t.top[0].logprob -= shift;
        t.top[1].logprob += shift;
    }
    tokens
}

/// A known-good build named `name` that answered "Paris." with `tokens`.
pub(crate) fn noise_build(name: &'static str, tokens: Vec<TokenLogprob>) -> NoiseCase {
    let mut r = reply(&[200, 210, 220], "Paris.");
    r.logprobs = Some(tokens);
    NoiseCase {
        name,
        manifest: greedy_manifest(),
        replies: vec![r],
    }
}

/// A reply sent at 0 whose text events arrive at `at_ms`, saying `content`.
pub(crate) fn reply(at_ms: &[u64], content: &str) -> ReplyRecord {
    ReplyRecord {
        content: content.into(),
        end_ns: at_ms.last().copied().unwrap_or(0) * MS,
        chunks: at_ms
            .iter()
            .map(|&t| ChunkArrival {
                at_ns: t * MS,
                content_chars: 1,
                reasoning_chars: 0,
                tokens: 0.0,
                tool_chars: 0,
            })
            .collect(),
        finish_reason: Some("stop".into()),
        ..ReplyRecord::new(1, "p", None)
    }
}

/// 100 tok/s with the first token at 200 ms: 11 events, 10 ms apart after the first.
pub(crate) fn good() -> ReplyRecord {
    let at: Vec<u64> = (0..11).map(|i| 200 + 10 * i).collect();
    reply(&at, "Paris.")
}

/// `n` replies sent 1 s apart whose decode rates go from 100 tok/s to 100 (1 + `change`)
/// geometrically (their logs on a line, so Sen's slope reads `change` exactly), the first token
/// at 200 ms.
pub(crate) fn drifting(n: usize, change: f64) -> Vec<ReplyRecord> {
    let replies = (0..n)
        .map(|i| {
            let rate = 100.0 * (1.0 + change).powf(i as f64 / (n - 1) as f64);
            let sent = i as u64 * 1_000 * MS;
            let mut r = good();
            for (k, c) in r.chunks.iter_mut().enumerate() {
                c.at_ns = sent + 200 * MS + (k as f64 * 1e9 / rate).round() as u64;
            }
            r.sent_ns = sent;
            r.end_ns = r.chunks.last().map_or(sent, |c| c.at_ns);
            r
        })
        .collect();
    numbered(replies)
}

/// Stream `stream` of burst `round`, released at 0 and written 0.2 ms later, whose text
/// events arrive at `at_ms`.
pub(crate) fn streamed(round: usize, stream: usize, at_ms: &[u64]) -> ReplyRecord {
    ReplyRecord {
        burst: Some(BurstSlot { round, stream }),
        written_ns: Some(200_000),
        ..reply(at_ms, "Paris.")
    }
}

/// The base case's three replies, then one burst of two streams: at 100 tok/s each from 200
/// ms when `together`, else the second starting 100 ms after the first has ended.
pub(crate) fn with_burst(c: &mut Case, together: bool) {
    let first: Vec<u64> = (0..11).map(|i| 200 + 10 * i).collect();
    let second: Vec<u64> = if together {
        first.clone()
    } else {
        (0..11).map(|i| 400 + 10 * i).collect()
    };
    let mut replies = c.replies.clone();
    replies.push(streamed(1, 1, &first));
    replies.push(streamed(1, 2, &second));
    c.replies = numbered(replies);
    c.concurrency = Some(ConcurrencyPlan {
        streams: 2,
        rounds: 1,
    });
}

pub(crate) fn numbered(mut replies: Vec<ReplyRecord>) -> Vec<ReplyRecord> {
    for (i, r) in replies.iter_mut().enumerate() {
        r.index = i + 1;
    }
    replies
}

pub(crate) fn floors() -> Floors {
    Floors {
        floor: 60.0,
        first_token_ms: 600.0,
        fast_route: Some("route: npu-fast".into()),
        slow_route: Some("route: cpu-fallback".into()),
        busy_skip: None,
        ..Floors::default()
    }
}

pub(crate) const FAST_LOG: &str = "loading\nroute: npu-fast\nready\n";

pub(crate) fn load() -> LoadSnapshot {
    LoadSnapshot {
        load1: 3.1,
        load5: 2.0,
        load15: 1.0,
        ncpu: 32,
        taken: "before-serve".into(),
        during: None,
    }
}

/// A load of `per_cpu` per CPU before the serve started, nothing sampled during.
pub(crate) fn load_per_cpu(per_cpu: f64) -> LoadSnapshot {
    LoadSnapshot {
        load1: per_cpu * 32.0,
        ..load()
    }
}

/// A quiet load average, and the serve waiting `per_mille` thousandths of its ready time
/// during the replies, beside a 10-job build. (Whole numbers of ns, so 100 is exactly 10%.)
pub(crate) fn serve_waited(per_mille: u64) -> LoadSnapshot {
    let (cpu, wait_ns) = ((1000 - per_mille) * 1_000_000, per_mille * 1_000_000);
    let top = vec![
        TopProcess {
            name: "cc1plus".into(),
            count: 10,
            cpu_pct: 850.0,
        },
        TopProcess {
            name: "ld".into(),
            count: 1,
            cpu_pct: 40.0,
        },
    ];
    LoadSnapshot {
        load1: 0.5,
        during: Some(summarize(
            &[],
            2.0,
            Some((cpu, wait_ns)),
            top,
            SAMPLED_EVERY_MS,
        )),
        ..load()
    }
}

/// 50 tok/s with the first token at 200 ms: 11 events, 20 ms apart after the first.
pub(crate) fn slow() -> ReplyRecord {
    let at: Vec<u64> = (0..11).map(|i| 200 + 20 * i).collect();
    reply(&at, "Paris.")
}

/// The kinds a real serve's files have: its executable and libraries mapped as code (ELF
/// shared objects: both are ET_DYN when position-independent), anything else (a model) mapped
/// read-only; files under /dev held open are character devices, the rest regular files.
pub(crate) fn with_kinds(mut p: ProcessRecord) -> ProcessRecord {
    let code = |p: &str| p.contains(".so") || p.contains("/bin/");
    p.map_kinds = Some(
        p.maps
            .iter()
            .map(|m| {
                let kind = if code(m) {
                    MapKind {
                        perms: vec!["r--p".into(), "r-xp".into(), "rw-p".into()],
                        header: Some(Header::ElfSharedObject),
                        header_via: Some("map_files".into()),
                    }
                } else {
                    MapKind {
                        perms: vec!["r--s".into()],
                        ..MapKind::default()
                    }
                };
                (m.clone(), kind)
            })
            .collect(),
    );
    p.open_kinds = Some(
        p.open
            .iter()
            .map(|o| {
                let kind = match o.starts_with("/dev/") {
                    true => FileKind::CharDevice,
                    false => FileKind::Regular,
                };
                (o.clone(), kind)
            })
            .collect(),
    );
    p
}

/// What a llama-server built for the CPU maps, beside its C runtime (its libggml files are
/// in its install, outside the system's library folders).
pub(crate) fn llama_cpu_route() -> RouteRecord {
    let maps = [
        "/opt/llama/bin/llama-server",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33",
        "/opt/llama/lib/libggml-cpu.so.0.26.0",
        "/opt/llama/lib/libggml-base.so.0.26.0",
        "/opt/llama/lib/libggml.so.0.26.0",
        "/models/smollm2.gguf",
    ];
    RouteRecord {
        root_pid: Some(812),
        processes: vec![with_kinds(ProcessRecord {
            pid: 812,
            parent: Some(811),
            comm: "llama-server".into(),
            exe: Some(maps[0].into()),
            maps: maps.iter().map(|m| m.to_string()).collect(),
            open: vec!["/dev/null".into(), "/runs/a/serve.log".into()],
            truncated: false,
            ..ProcessRecord::default()
        })],
        read_after_replies: true,
        ..RouteRecord::default()
    }
}

/// An NPU serve run by a wrapper that does not exec: only the child maps the plugin and holds
/// the device, and the device's busy counter advanced 2.13 s in 3 s.
pub(crate) fn npu_wrapped_route() -> RouteRecord {
    let wrapper = with_kinds(ProcessRecord {
        pid: 900,
        parent: Some(899),
        comm: "python3".into(),
        exe: Some("/usr/bin/python3.11".into()),
        maps: vec!["/usr/bin/python3.11".into()],
        open: vec!["/dev/null".into()],
        truncated: false,
        ..ProcessRecord::default()
    });
    let child = with_kinds(ProcessRecord {
        pid: 901,
        parent: Some(900),
        comm: "ovms".into(),
        exe: Some("/ovms/bin/ovms".into()),
        maps: vec![
            "/ovms/bin/ovms".into(),
            "/ovms/lib/libopenvino_intel_npu_plugin.so".into(),
        ],
        open: vec!["/dev/accel/accel0".into()],
        truncated: false,
        ..ProcessRecord::default()
    });
    RouteRecord {
        root_pid: Some(900),
        processes: vec![wrapper, child],
        counter: Some(CounterRecord {
            source: BUSY.into(),
            unit: Some("us".into()),
            before: Some(CounterReading {
                at_ns: 1_000_000_000,
                value: 5_000_000,
            }),
            after: Some(CounterReading {
                at_ns: 4_000_000_000,
                value: 7_130_000,
            }),
            problem: None,
        }),
        read_after_replies: true,
        ..RouteRecord::default()
    }
}

pub(crate) const BUSY: &str = "/sys/class/accel/accel0/device/npu_busy_time_us";

pub(crate) fn ready() -> Startup {
    Startup::Ready {
        after_ms: 1.0,
        probe: "/health".into(),
        not_ready_answers: 0,
    }
}

/// A passing case; each case below changes one thing.
pub(crate) fn base(name: &'static str) -> Case {
    Case {
        name,
        replies: numbered(vec![good(), good(), good()]),
        planned: None,
        startup: ready(),
        log: Some(FAST_LOG),
        load: Some(load()),
        interrupted: None,
        hold_not_acquired: None,
        stop: None,
        serve_died: None,
        route: None,
        concurrency: None,
        reference: None,
        manifest: None,
        floors: floors(),
        expect: vec![
            (Check::Route, Status::Ok, "names the fast route"),
            (
                Check::Rate,
                Status::Ok,
                "median 100.0 tok/s over 3 replies (floor 60.0",
            ),
            (
                Check::FirstToken,
                Status::Ok,
                "median 200 ms over 3 replies (limit 600)",
            ),
            (Check::Content, Status::Ok, "3 replies, all with content"),
        ],
        absent: vec![Check::Serve],
        refuse: vec![],
        outcome: Outcome::Pass,
    }
}

/// An archive of `replies` under the greedy manifest, its files whole and nothing else read:
/// for tests that judge or draw an archive without a run directory.
#[cfg(test)]
pub(crate) fn archive_of(replies: Vec<ReplyRecord>) -> crate::archive::rundir::Archive {
    crate::archive::rundir::Archive {
        manifest: greedy_manifest(),
        replies,
        serve_log: None,
        load: None,
        load_problem: None,
        replies_problem: None,
        route: None,
        route_problem: None,
        metrics: None,
        metrics_problem: None,
        reanchors: Vec::new(),
        reanchors_problem: None,
        not_archived: Vec::new(),
        integrity: crate::archive::digest::Integrity::Intact,
    }
}
