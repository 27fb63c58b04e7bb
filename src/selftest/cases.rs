//! Judging cases: the verdict function over hand-made runs, each line ok and FAIL, the
//! boundaries, and the load line. Shipped in the binary so `self-test` can run them on any
//! box; `cargo test` runs the same table.

use crate::archive::record::InterruptSignal;
use crate::archive::record::{
    BurstSlot, ChunkArrival, ConcurrencyPlan, CounterReading, CounterRecord, FileKind, Header,
    LoadSnapshot, MapKind, ProcessRecord, ReanchorRecord, ReplyRecord, RouteRecord, RunManifest,
    Sampling, Startup, StopRecord, TokenLogprob, TopLogprob,
};
use crate::judging::verdict::{
    self, Baseline, Criteria, Evidence, Floors, Outcome, ProcessEvidence, ReferenceEvidence,
    Status, Verdict,
};
use crate::live::conditions::{summarize, TopProcess};

const MS: u64 = 1_000_000;

/// One hand-made run and what its verdict must say.
pub struct Case {
    /// What the case shows.
    pub name: &'static str,
    replies: Vec<ReplyRecord>,
    planned: Option<usize>,
    startup: Startup,
    log: Option<&'static str>,
    load: Option<LoadSnapshot>,
    interrupted: Option<InterruptSignal>,
    hold_not_acquired: Option<&'static str>,
    stop: Option<StopRecord>,
    serve_died: Option<&'static str>,
    /// route.json; `None`: the run recorded none.
    route: Option<RouteRecord>,
    /// The concurrent bursts the run planned; `None`: one stream at a time.
    concurrency: Option<ConcurrencyPlan>,
    /// A reference run to hold the answers to (`--reference`); `None`: none asked for.
    reference: Option<ReferenceCase>,
    /// The run's run.json (its prompts' `stops`); `None`: a hand-made run without one.
    manifest: Option<RunManifest>,
    floors: Floors,
    /// Lines that must be there: check, status, and a fragment of the text.
    expect: Vec<(&'static str, Status, &'static str)>,
    /// Checks that must have no line.
    absent: Vec<&'static str>,
    /// Lines whose text must not contain a fragment.
    refuse: Vec<(&'static str, &'static str)>,
    outcome: Outcome,
}

impl Case {
    /// The verdict on this case's hand-made run.
    pub fn verdict(&self) -> Result<Verdict, String> {
        let criteria = Criteria::new(self.floors.clone()).map_err(|e| format!("{e:#}"))?;
        let log = self.log.map(|l| criteria.scan_log_text(l));
        let hand_made = Evidence::of(&self.replies, &self.startup);
        let evidence = Evidence {
            replies_planned: self.planned.unwrap_or(self.replies.len()),
            serve_log: log.as_ref(),
            load: self.load.as_ref(),
            interrupted: self.interrupted,
            hold_not_acquired: self.hold_not_acquired,
            stop: self.stop.as_ref().map(|s| (s, 10.0)),
            serve_died: self.serve_died,
            processes: self
                .route
                .as_ref()
                .map_or(hand_made.processes, ProcessEvidence::Recorded),
            concurrency: self.concurrency.as_ref(),
            reference: match &self.reference {
                Some(r) => ReferenceEvidence::Recorded {
                    candidate: &r.candidate,
                    reference: Baseline {
                        name: "runs/reference",
                        manifest: &r.reference,
                        replies: &r.replies,
                        load: None,
                    },
                },
                None => ReferenceEvidence::NotAsked,
            },
            reanchors: self.reference.as_ref().map_or(&[], |r| &r.reanchors),
            manifest: self.manifest.as_ref(),
            ..hand_made
        };
        Ok(verdict::judge(&evidence, &criteria))
    }

    /// Judge the case; `Err` says what the verdict got wrong.
    pub fn check(&self) -> Result<(), String> {
        let v = self.verdict()?;
        let mut problems = Vec::new();
        for (check, status, fragment) in &self.expect {
            match find(&v, check) {
                None => problems.push(format!("no {check} line")),
                Some(l) if l.status != *status || !l.text.contains(fragment) => problems.push(
                    format!("{check} should be {status} with {fragment:?}, got: {l}"),
                ),
                Some(_) => {}
            }
        }
        for (check, fragment) in &self.refuse {
            if let Some(l) = find(&v, check).filter(|l| l.text.contains(fragment)) {
                problems.push(format!("{check} must not say {fragment:?}, got: {l}"));
            }
        }
        for check in &self.absent {
            if let Some(l) = find(&v, check) {
                problems.push(format!("{check} should have no line, got: {l}"));
            }
        }
        if v.outcome != self.outcome {
            problems.push(format!(
                "RESULT should be {}, got {}",
                self.outcome, v.outcome
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// A reference run (a trusted build's answers with their logprobs) and the candidate's run.json.
pub struct ReferenceCase {
    candidate: RunManifest,
    reference: RunManifest,
    replies: Vec<ReplyRecord>,
    /// The re-anchors the candidate's run made past divergences (reanchors.json).
    reanchors: Vec<ReanchorRecord>,
}

/// A run.json of the hand-made runs: prompt "p", greedy (temperature 0).
fn greedy_manifest() -> RunManifest {
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
fn scored(margins: [f64; 3], took: Option<usize>) -> Vec<TokenLogprob> {
    let tokens = [("Par", "Mar"), ("is", "ys"), (".", "!")];
    tokens
        .iter()
        .zip(margins)
        .enumerate()
        .map(|(i, (&(usual, other), margin))| {
            let top = vec![
                TopLogprob {
                    token: usual.to_string(),
                    logprob: -0.01,
                },
                TopLogprob {
                    token: other.to_string(),
                    logprob: -0.01 - margin,
                },
            ];
            let (token, logprob) = if took == Some(i) {
                (other, -0.01 - margin)
            } else {
                (usual, -0.01)
            };
            TokenLogprob {
                token: token.to_string(),
                logprob,
                top,
            }
        })
        .collect()
}

/// The base case with a reference whose answer is "Paris." (runners-up `margins` below), the
/// candidate's three answers scored as `candidate` says.
fn against_reference(
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
    });
    c
}

fn find<'a>(v: &'a Verdict, check: &str) -> Option<&'a verdict::Line> {
    v.lines.iter().find(|l| l.check.name() == check)
}

/// A reply sent at 0 whose text events arrive at `at_ms`, saying `content`.
pub(crate) fn reply(at_ms: &[u64], content: &str) -> ReplyRecord {
    ReplyRecord {
        index: 1,
        prompt: "p".into(),
        expect: None,
        content: content.into(),
        reasoning: String::new(),
        sent_ns: 0,
        end_ns: at_ms.last().copied().unwrap_or(0) * MS,
        chunks: at_ms
            .iter()
            .map(|&t| ChunkArrival {
                at_ns: t * MS,
                content_chars: 1,
                reasoning_chars: 0,
                tokens: 0.0,
            })
            .collect(),
        usage_completion_tokens: None,
        finish_reason: Some("stop".into()),
        server_timings: None,
        cached_prompt_tokens: None,
        error: None,
        text_cut: None,
        metrics: None,
        burst: None,
        written_ns: None,
        warmup: false,
        unrequested_choice: None,
        logprobs: None,
    }
}

/// 100 tok/s with the first token at 200 ms: 11 events, 10 ms apart after the first.
fn good() -> ReplyRecord {
    let at: Vec<u64> = (0..11).map(|i| 200 + 10 * i).collect();
    reply(&at, "Paris.")
}

/// `n` replies sent 1 s apart whose decode rates go from 100 tok/s to 100 (1 + `change`)
/// geometrically (their logs on a line, so Sen's slope reads `change` exactly), the first token
/// at 200 ms.
fn drifting(n: usize, change: f64) -> Vec<ReplyRecord> {
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
fn streamed(round: usize, stream: usize, at_ms: &[u64]) -> ReplyRecord {
    ReplyRecord {
        burst: Some(BurstSlot { round, stream }),
        written_ns: Some(200_000),
        ..reply(at_ms, "Paris.")
    }
}

/// The base case's three replies, then one burst of two streams: at 100 tok/s each from 200
/// ms when `together`, else the second starting 100 ms after the first has ended.
fn with_burst(c: &mut Case, together: bool) {
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

fn numbered(mut replies: Vec<ReplyRecord>) -> Vec<ReplyRecord> {
    for (i, r) in replies.iter_mut().enumerate() {
        r.index = i + 1;
    }
    replies
}

fn floors() -> Floors {
    Floors {
        floor: 60.0,
        first_token_ms: 600.0,
        fast_route: Some("route: npu-fast".into()),
        slow_route: Some("route: cpu-fallback".into()),
        busy_skip: None,
        ..Floors::default()
    }
}

const FAST_LOG: &str = "loading\nroute: npu-fast\nready\n";

fn load() -> LoadSnapshot {
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
fn load_per_cpu(per_cpu: f64) -> LoadSnapshot {
    LoadSnapshot {
        load1: per_cpu * 32.0,
        ..load()
    }
}

/// A quiet load average, and the serve waiting `per_mille` thousandths of its ready time
/// during the replies, beside a 10-job build. (Whole numbers of ns, so 100 is exactly 10%.)
fn serve_waited(per_mille: u64) -> LoadSnapshot {
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
        during: Some(summarize(&[], 2.0, Some((cpu, wait_ns)), top)),
        ..load()
    }
}

/// 50 tok/s with the first token at 200 ms: 11 events, 20 ms apart after the first.
fn slow() -> ReplyRecord {
    let at: Vec<u64> = (0..11).map(|i| 200 + 20 * i).collect();
    reply(&at, "Paris.")
}

/// The kinds a real serve's files have: its executable and libraries mapped as code (ELF
/// shared objects: both are ET_DYN when position-independent), anything else (a model) mapped
/// read-only; files under /dev held open are character devices, the rest regular files.
fn with_kinds(mut p: ProcessRecord) -> ProcessRecord {
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
fn llama_cpu_route() -> RouteRecord {
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
fn npu_wrapped_route() -> RouteRecord {
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

const BUSY: &str = "/sys/class/accel/accel0/device/npu_busy_time_us";

fn ready() -> Startup {
    Startup::Ready {
        after_ms: 1.0,
        probe: "/health".into(),
        not_ready_answers: 0,
    }
}

/// A passing case; each case below changes one thing.
fn base(name: &'static str) -> Case {
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
            ("route", Status::Ok, "names the fast route"),
            (
                "rate",
                Status::Ok,
                "median 100.0 tok/s over 3 replies (floor 60.0",
            ),
            (
                "first-token",
                Status::Ok,
                "median 200 ms over 3 replies (limit 600)",
            ),
            ("content", Status::Ok, "3 replies, all with content"),
        ],
        absent: vec!["serve"],
        refuse: vec![],
        outcome: Outcome::Pass,
    }
}

/// The judging case named `name`.
pub fn named(name: &str) -> Option<Case> {
    all().into_iter().find(|c| c.name == name)
}

/// Every judging case.
pub fn all() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = vec![base("a good run passes")];

    // The reference line (issue 31): the candidate's tokens against a trusted build's.
    let margins = [3.0, 2.9, 0.25];
    let mut c = against_reference(
        "an answer token for token the reference's is identical",
        margins,
        scored(margins, None),
        true,
    );
    c.expect = vec![(
        "reference",
        Ok,
        "top-1 agreement 100.0%; 0 near-ties, 0 hard",
    )];
    cases.push(c);
    let mut c = against_reference(
        "a token the reference nearly chose (0.25 nats) is a near-tie, not a failure",
        margins,
        scored(margins, Some(2)),
        true,
    );
    c.expect = vec![("reference", Ok, "1 near-tie (margins 0.25 nats), 0 hard")];
    cases.push(c);
    let mut c = against_reference(
        "a token the reference ruled out (2.9 nats) is a hard divergence",
        margins,
        scored(margins, Some(1)),
        true,
    );
    c.expect = vec![("reference", Fail, "the reference's margin 2.90 nats")];
    c.outcome = Outcome::Fail;
    cases.push(c);
    // Re-anchored past a near-tie at "Par" (0.25 nats), the candidate goes on "ys": a token
    // the reference ruled out by 2.9 nats, which judging up to the first divergence never
    // sees.
    let torn = [0.25, 2.9, 3.0];
    let mut c = against_reference(
        "re-anchored past a near-tie, the hard divergence behind it fails",
        torn,
        scored(torn, Some(0)),
        true,
    );
    if let Some(r) = c.reference.as_mut() {
        let mut rest = scored(torn, Some(1));
        rest.remove(0);
        r.reanchors = vec![ReanchorRecord {
            prompt: c.replies[0].prompt.clone(),
            at_token: 0,
            prefix: "Par".into(),
            content: rest.iter().map(|t| t.token.as_str()).collect(),
            logprobs: Some(rest),
            finish_reason: Some("stop".into()),
            error: None,
        }];
    }
    c.expect = vec![(
        "reference",
        Fail,
        "at token 1 (byte 3, after 1 re-anchor): \"ys\" here, \"is\" at the reference; the reference's margin 2.90 nats",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = against_reference(
        "a reference without logprobs cannot be compared",
        margins,
        scored(margins, None),
        false,
    );
    c.expect = vec![("reference", Fail, "logprobs")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // The output line (issue 32): degenerate text, each rule failing and its look-alike not.
    let said = |content: &str| {
        let mut r = good();
        r.content = content.to_string();
        r
    };
    let mut c = base("a reply that loops to max_tokens fails output");
    c.replies = numbered(vec![
        good(),
        said(&format!("Paris.{}", " Paris is the capital.".repeat(8))),
        good(),
    ]);
    c.expect = vec![(
        "output",
        Fail,
        "loop: 1 of 3 replies (a tail repeated 3+ times over 50%+ of the reply): reply 2 loops",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("a numbered list, whose items differ, is no loop");
    let list: String = ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn"]
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}. {p}\n", i + 1))
        .collect();
    c.replies = numbered(vec![said(&list), said(&list), said(&list)]);
    c.expect = vec![("output", Ok, "0 loops, 0 stutters")];
    cases.push(c);
    let mut c = base("table rows and code lines, whose units differ, are no loop");
    let table: String = (1..=12).map(|i| format!("| {i} | {} |\n", i * i)).collect();
    let code: String = (1..=12).map(|i| format!("let x{i} = f({i});\n")).collect();
    c.replies = numbered(vec![said(&table), said(&code), good()]);
    c.expect = vec![("output", Ok, "0 loops")];
    cases.push(c);
    let mut c = base("a word four times in a row is a stutter");
    c.replies = numbered(vec![
        said("It is very very very very cold."),
        good(),
        good(),
    ]);
    c.expect = vec![(
        "output",
        Fail,
        "reply 1 stutters (\"very\" 4 times in a row)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("a word three times in a row is no stutter");
    c.replies = numbered(vec![said("It is very very very cold."), good(), good()]);
    c.expect = vec![("output", Ok, "0 stutters")];
    cases.push(c);
    let mut c = base("replacement characters in a reply are not text");
    c.replies = numbered(vec![said("Pa\u{fffd}\u{fffd}ris\u{1}."), good(), good()]);
    c.expect = vec![(
        "output",
        Fail,
        "reply 1 is not text (3 replacement or control characters",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("newlines and tabs are text");
    c.replies = numbered(vec![said("Paris.\n\tThe capital.\r\n"), good(), good()]);
    c.expect = vec![("output", Ok, "0 not text")];
    cases.push(c);
    let mut c = base("one answer to prompts that expect different ones fails");
    let asked = |prompt: &str, expect: &str| {
        let mut r = said("Paris 4 cold");
        r.prompt = prompt.to_string();
        r.expect = Some(expect.to_string());
        r
    };
    c.replies = numbered(vec![
        asked("France?", "(?i)paris"),
        asked("2 + 2?", "4"),
        asked("Opposite of hot?", "(?i)cold"),
    ]);
    c.expect = vec![(
        "output",
        Fail,
        "one answer to different questions (3 pairs of prompts at similarity 0.90+)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("prompts that expect the same answer may share it");
    c.replies = numbered(vec![
        asked("France?", "(?i)paris"),
        asked("Capital of France?", "(?i)paris"),
        asked("Where is the Louvre?", "(?i)paris"),
    ]);
    c.expect = vec![("output", Ok, "0 pairs of prompts answered alike")];
    cases.push(c);
    let mut c = base("every reply cut at max_tokens where prompts should stop never stops");
    let mut m = greedy_manifest();
    m.prompts[0].stops = Some(true);
    c.manifest = Some(m.clone());
    for r in &mut c.replies {
        r.finish_reason = Some("length".into());
    }
    c.expect = vec![(
        "output",
        Fail,
        "never stops: all 3 replies to prompts marked to stop",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("one reply of three cut where prompts should stop is said, not failed");
    c.manifest = Some(m);
    c.replies[0].finish_reason = Some("length".into());
    c.expect = vec![(
        "output",
        Ok,
        "1 of 3 replies to prompts marked to stop were cut at max_tokens",
    )];
    cases.push(c);
    let mut c = base("--output-checks off says a loop as info");
    c.replies = numbered(vec![said(&"!".repeat(64)), good(), good()]);
    c.floors.output.off = true;
    c.expect = vec![("output", Info, "--output-checks off: loop: 1 of 3 replies")];
    cases.push(c);

    let mut c = base("the load line states the run's load");
    c.expect = vec![("load", Info, "1-minute load average 3.1 on 32 CPUs")];
    cases.push(c);

    let mut c = base("no load recorded, no load line");
    c.load = None;
    c.expect = vec![];
    c.absent = vec!["load"];
    cases.push(c);

    let mut c = base("rate exactly at the floor is ok");
    c.floors.floor = 100.0;
    c.expect = vec![("rate", Ok, "median 100.0 tok/s over 3 replies (floor 100.0")];
    cases.push(c);

    let mut c = base("rate under the floor fails");
    c.floors.floor = 100.5;
    c.expect = vec![(
        "rate",
        Fail,
        "median 100.0 tok/s over 3 replies (floor 100.5",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("rate is the median, not the best reply");
    let ten_tok_s: Vec<u64> = (0..11).map(|i| 200 + 100 * i).collect();
    c.replies = numbered(vec![reply(&ten_tok_s, "a"), reply(&ten_tok_s, "b"), good()]);
    c.expect = vec![("rate", Fail, "median 10.0 tok/s")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("first-token exactly at the limit is ok");
    c.floors.first_token_ms = 200.0;
    c.expect = vec![(
        "first-token",
        Ok,
        "median 200 ms over 3 replies (limit 200)",
    )];
    cases.push(c);

    let mut c = base("first-token over the limit fails");
    c.floors.first_token_ms = 199.0;
    c.expect = vec![(
        "first-token",
        Fail,
        "median 200 ms over 3 replies (limit 199)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a log without the fast route fails route");
    c.log = Some("loading\nready\n");
    c.expect = vec![("route", Fail, "does not name the fast route")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a log naming the slow route fails route");
    c.log = Some("route: npu-fast\nlayer 7: route: cpu-fallback\n");
    c.expect = vec![("route", Fail, "\"layer 7: route: cpu-fallback\"")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no route patterns make route info");
    c.floors.fast_route = None;
    c.floors.slow_route = None;
    c.log = Some("route: cpu-fallback\n");
    c.expect = vec![("route", Info, "no route patterns given")];
    cases.push(c);

    let mut c = base("an empty reply fails content and is no zero first-token");
    c.replies = numbered(vec![good(), reply(&[], ""), good()]);
    c.expect = vec![
        ("content", Fail, "reply 2 has no content"),
        ("first-token", Ok, "over 2 of 3 replies"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a wrong answer fails content, quoted");
    let mut wrong = good();
    wrong.content = "London.".into();
    wrong.expect = Some("(?i)paris".into());
    c.replies = numbered(vec![good(), good(), wrong]);
    c.expect = vec![(
        "content",
        Fail,
        "reply 3 said \"London.\", which does not match /(?i)paris/",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a wrong answer cut at max_tokens says it was cut");
    let mut cut = good();
    cut.content = "The capital of France is".into();
    cut.expect = Some("(?i)paris".into());
    cut.finish_reason = Some("length".into());
    let mut stopped = good();
    stopped.content = "London.".into();
    stopped.expect = Some("(?i)paris".into());
    c.replies = numbered(vec![cut, stopped, good()]);
    c.expect = vec![(
        "content",
        Fail,
        "reply 1 said \"The capital of France is\", which does not match /(?i)paris/ (it was cut at max_tokens: finish_reason \"length\"); reply 2 said \"London.\", which does not match /(?i)paris/",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a reply that streamed another choice fails content, whatever its text");
    let mut two = good();
    two.expect = Some("(?i)paris".into());
    two.unrequested_choice = Some(1);
    c.replies = numbered(vec![good(), two, good()]);
    c.expect = vec![(
        "content",
        Fail,
        "reply 2 streamed choice index 1, which the gate did not ask for (it asks for one choice, n=1)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a rate on few tokens says what it rests on");
    c.replies = numbered(vec![
        reply(&[200, 210, 220, 230, 240, 250, 260], "Paris."),
        reply(&[200, 210, 220, 230, 240, 250, 260], "Paris."),
        good(),
    ]);
    c.expect = vec![(
        "rate",
        Ok,
        "; few tokens: each rate rests on a median of 6 gaps between tokens, under 10",
    )];
    c.outcome = Outcome::Pass;
    cases.push(c);

    let mut c = base("a rate on ten gaps or more has no few-tokens note");
    c.refuse = vec![("rate", "few tokens")];
    c.expect = vec![("rate", Ok, "median 100.0 tok/s")];
    c.outcome = Outcome::Pass;
    cases.push(c);

    let mut c = base("a reply that broke fails content");
    let mut broke = good();
    broke.error = Some("the stream broke: connection reset".into());
    c.replies = numbered(vec![good(), broke, good()]);
    c.expect = vec![("content", Fail, "reply 2 failed after saying")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("fewer replies than planned fail content");
    c.planned = Some(5);
    c.expect = vec![("content", Fail, "only 3 of 5 replies were made")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a one-chunk reply has no rate, and the line says so");
    c.replies = numbered(vec![good(), reply(&[150], "Paris")]);
    c.expect = vec![("rate", Ok, "over 1 of 2 replies")];
    cases.push(c);

    let mut c = base("multi-token chunks rate on the usage count");
    // 6 events 50 ms apart, 4 tokens each: 20 tokens after the first event over 250 ms.
    let mut multi = reply(
        &[100, 150, 200, 250, 300, 350],
        "Paris is the capital of France, and has been for a while.",
    );
    multi.usage_completion_tokens = Some(24);
    c.replies = vec![multi];
    c.expect = vec![("rate", Ok, "median 80.0 tok/s")];
    cases.push(c);

    let mut c =
        base("usage the streamed text cannot hold is not believed: the rate is from the chunks");
    // 5 one-word events over 2 s claimed as 1,000,000 tokens: 399,633 tok/s on the claim.
    let mut lie = reply(&[100, 600, 1100, 1600, 2100], "Paris is the capital ok.");
    lie.usage_completion_tokens = Some(1_000_000);
    c.replies = numbered(vec![good(), lie, good()]);
    c.expect = vec![(
        "rate",
        Ok,
        "each: 100.0, 2.0, 100.0); usage not believed for reply 2: it claimed 1000000 tokens for 5 chunks of 24 bytes of text; the rate is from the chunks",
    )];
    cases.push(c);

    let mut c = base("a lying usage count cannot lift a slow serve over the floor");
    let mut slow_lie = reply(&[100, 600, 1100, 1600, 2100], "Paris is the capital ok.");
    slow_lie.usage_completion_tokens = Some(1_000_000);
    c.replies = numbered(vec![slow_lie.clone(), slow_lie.clone(), slow_lie]);
    c.expect = vec![("rate", Fail, "median 2.0 tok/s over 3 replies (floor 60.0")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an error the serve reported mid-stream fails content, quoting it");
    let mut oom = good();
    oom.error = Some("the serve reported an error: \"CUDA out of memory\"".into());
    let mut only_error = reply(&[], "");
    only_error.error = Some("the serve reported an error: \"CUDA out of memory\"".into());
    c.replies = numbered(vec![good(), oom, only_error]);
    c.expect = vec![(
        "content",
        Fail,
        "reply 2 failed after saying \"Paris.\": the serve reported an error: \"CUDA out of memory\"; reply 3 failed: the serve reported an error: \"CUDA out of memory\"",
    )];
    c.refuse = vec![("content", "has no content")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a reasoning-first reply times its first reasoning token");
    let mut thinking = good();
    thinking.chunks[0].content_chars = 0;
    thinking.chunks[0].reasoning_chars = 5;
    thinking.chunks[0].at_ns = 50 * MS;
    c.replies = vec![thinking];
    c.floors.floor = 0.0; // the longer span lowers the rate; this case is about first-token
    c.expect = vec![("first-token", Ok, "median 50 ms")];
    cases.push(c);

    let mut c = base("a role-only first chunk is not the first token");
    let mut role = good();
    role.chunks.insert(
        0,
        ChunkArrival {
            at_ns: 5 * MS,
            content_chars: 0,
            reasoning_chars: 0,
            tokens: 0.0,
        },
    );
    c.replies = vec![role];
    c.expect = vec![("first-token", Ok, "median 200 ms")];
    cases.push(c);

    let mut c = base("a serve that exited before ready fails, quoting its log");
    c.replies = vec![];
    c.planned = Some(3);
    c.startup = Startup::Exited {
        status: "exit status: 3".into(),
    };
    c.log = Some("route: npu-fast\nerror: no device\n");
    c.expect = vec![("serve", Fail, "\"error: no device\"")];
    c.absent = vec!["rate", "first-token", "content"];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a serve never ready fails");
    c.replies = vec![];
    c.planned = Some(3);
    c.startup = Startup::NotReady {
        timeout_s: 120.0,
        url: None,
        not_ready_answers: None,
        last_probe: None,
    };
    c.expect = vec![("serve", Fail, "not ready after 120 s")];
    c.absent = vec!["rate"];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a never-ready FAIL names the URL it polled and the answers it got");
    c.replies = vec![];
    c.planned = Some(3);
    c.startup = Startup::NotReady {
        timeout_s: 5.0,
        url: Some("http://127.0.0.1:8123/".into()),
        not_ready_answers: Some(48),
        last_probe: None,
    };
    c.expect = vec![(
        "serve",
        Fail,
        "not ready after 5 s (neither http://127.0.0.1:8123/health nor http://127.0.0.1:8123/v1/models answered 200; it gave 48 not-ready answers)",
    )];
    c.absent = vec!["rate"];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base(
        "an attached serve that never answered says what the probe got, not that a log is empty",
    );
    c.replies = vec![];
    c.planned = Some(3);
    c.log = None;
    c.startup = Startup::NotReady {
        timeout_s: 2.0,
        url: Some("http://127.0.0.1:9".into()),
        not_ready_answers: Some(0),
        last_probe: Some(
            "the request failed: connecting to 127.0.0.1:9: Connection refused (os error 111)"
                .into(),
        ),
    };
    c.expect = vec![(
        "serve",
        Fail,
        "not ready after 2 s (neither http://127.0.0.1:9/health nor http://127.0.0.1:9/v1/models answered 200; it gave no HTTP answer: the request failed: connecting to 127.0.0.1:9: Connection refused (os error 111))",
    )];
    c.refuse = vec![("serve", "log")];
    c.absent = vec!["rate"];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a serve that died during the replies fails content, saying so");
    c.replies = numbered(vec![good()]);
    c.planned = Some(3);
    c.serve_died = Some("the serve exited (exit status: 3) during reply 2");
    c.expect = vec![(
        "content",
        Fail,
        "the serve exited (exit status: 3) during reply 2; only 1 of 3 replies were made",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a serve killed after its grace is noted, not failed");
    c.stop = Some(StopRecord {
        killed: true,
        cut_short: false,
        escaped_killed: 0,
        exit_status: Some("signal: 9 (SIGKILL)".into()),
        ..StopRecord::default()
    });
    c.expect = vec![(
        "stop",
        Info,
        "did not exit within the 10 s grace after SIGTERM",
    )];
    cases.push(c);

    let mut c = base("processes that left the serve's group are stopped and noted");
    c.stop = Some(StopRecord {
        killed: false,
        cut_short: false,
        escaped_killed: 1,
        exit_status: Some("exit status: 0".into()),
        ..StopRecord::default()
    });
    c.expect = vec![(
        "stop",
        Info,
        "1 process(es) had left the serve's process group and were killed after it stopped",
    )];
    c.refuse = vec![("stop", "grace")];
    cases.push(c);

    let mut c = base("a clean stop adds no line");
    c.stop = Some(StopRecord {
        killed: false,
        cut_short: false,
        escaped_killed: 0,
        exit_status: Some("exit status: 0".into()),
        ..StopRecord::default()
    });
    c.expect = vec![];
    c.absent = vec!["stop", "serve"];
    cases.push(c);

    let mut c = base("a hold not acquired is SKIP, never PASS or FAIL");
    c.replies = vec![];
    c.hold_not_acquired = Some("hold not acquired in 600 s; held by PID 4242");
    c.expect = vec![
        ("hold", Info, "held by PID 4242"),
        ("load", Info, "on 32 CPUs"),
    ];
    c.absent = vec!["rate", "route", "content"];
    c.outcome = Outcome::Skip {
        reason: "hold not acquired in 600 s; held by PID 4242".into(),
        advice: None,
    };
    cases.push(c);

    let mut c = base("a pass states the load and blames nothing");
    c.load = Some(serve_waited(310));
    c.expect = vec![(
        "load",
        Info,
        "during the replies the serve waited for a CPU 31% of the time it was ready to run",
    )];
    c.refuse = vec![("load", "busy box"), ("load", "quiet")];
    cases.push(c);

    let mut c = base(
        "the busy-box row is named: fast route, right answers, 50 tok/s under 60, load 10 per CPU",
    );
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(load_per_cpu(10.0));
    c.expect = vec![
        ("rate", Fail, "median 50.0 tok/s over 3 replies (floor 60.0"),
        ("load", Info, "a busy box is the likely cause (the load was 10.0 per CPU, at or above the busy level of 1.0 per CPU): re-run on a quiet box"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a busy box by the serve's own wait names what used the CPU");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(310));
    c.expect = vec![(
        "load",
        Info,
        "31% of the time it was ready to run; a busy box is the likely cause (at or above the busy level of 10%): re-run on a quiet box; most CPU during the replies: cc1plus x10 850%, ld 40%",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("the wait level is a boundary: 10% is busy");
    c.replies = numbered(vec![slow()]);
    c.load = Some(serve_waited(100));
    c.expect = vec![("load", Info, "a busy box is the likely cause")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("the wait level is a boundary: 9.9% is quiet");
    c.replies = numbered(vec![slow()]);
    c.load = Some(serve_waited(99));
    c.expect = vec![(
        "load",
        Info,
        "the box was quiet (under the busy level of 10%), so the slowness is the serve's own",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("first-token alone over its limit counts as timing-only");
    c.floors.first_token_ms = 150.0;
    c.load = Some(load_per_cpu(10.0));
    c.expect = vec![
        (
            "first-token",
            Fail,
            "median 200 ms over 3 replies (limit 150)",
        ),
        ("load", Info, "a busy box is the likely cause"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("timing alone failing on a quiet box blames the serve");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(load_per_cpu(0.1));
    c.expect = vec![(
        "load",
        Info,
        "the box was quiet (the load was 0.1 per CPU, under the busy level of 1.0 per CPU), so the slowness is the serve's own",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("the slow route is never excused by a busy box");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.log = Some("route: npu-fast\nroute: cpu-fallback\n");
    c.load = Some(load_per_cpu(10.0));
    c.floors.busy_skip = Some(0.5);
    c.expect = vec![("route", Fail, "names the slow route")];
    c.refuse = vec![("load", "busy box"), ("load", "quiet")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("empty content is never excused by a busy box");
    c.replies = numbered(vec![slow(), reply(&[], ""), slow()]);
    c.load = Some(load_per_cpu(10.0));
    c.floors.busy_skip = Some(0.5);
    c.expect = vec![("content", Fail, "reply 2 has no content")];
    c.refuse = vec![("load", "busy box")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("with --busy-skip the busy-box run is SKIP");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![("rate", Fail, "median 50.0 tok/s")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    // The serve waited for a CPU, but nothing outside its tree used one: its own spinning
    // helpers took it (issue 30). No excuse, and the load line says whose the slowness is.
    let mut c = base("a serve kept from a CPU by its own processes is never excused");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    let mut own = serve_waited(310);
    if let Some(d) = own.during.as_mut() {
        d.top.clear();
        d.others_cpu_pct = Some(12.0);
    }
    c.load = Some(own);
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![
        ("rate", Fail, "median 50.0 tok/s"),
        (
            "load",
            Info,
            "but processes outside the serve's tree used only 12% of one CPU during the replies (a busy box takes 320%): the serve's own processes kept it from a CPU, so the slowness is the serve's own",
        ),
    ];
    c.refuse = vec![("load", "likely cause")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a rate that falls 20% over 12 replies fails drift");
    c.replies = drifting(12, -0.2);
    c.expect = vec![
        ("rate", Ok, "over 12 replies"),
        (
            "drift",
            Fail,
            "the decode rate fell 20.0% over 12 replies in 11 s (Sen's slope; Mann-Kendall p < 0.0001 reply by reply): beyond the 10% --max-drift",
        ),
        ("first-token-drift", Info, "no drift: +0.0%"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a real fall within --max-drift is information");
    c.replies = drifting(12, -0.2);
    c.floors.max_drift = Some(0.21);
    c.expect = vec![(
        "drift",
        Info,
        "the decode rate fell 20.0% over 12 replies in 11 s (Sen's slope; Mann-Kendall p < 0.0001 reply by reply): a real fall, within the 21% --max-drift",
    )];
    cases.push(c);

    let mut c = base("a rising rate is no drift failure");
    c.replies = drifting(12, 0.25);
    c.expect = vec![("drift", Info, "the decode rate rose 25.0% over 12 replies")];
    cases.push(c);

    let mut c = base("seven replies are too few for a drift line");
    c.replies = drifting(7, -0.5);
    c.expect = vec![];
    c.absent = vec!["drift", "first-token-drift"];
    cases.push(c);

    let mut c = base("a drift is timing: with --busy-skip on a busy box it is a SKIP");
    c.replies = drifting(12, -0.2);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![("drift", Fail, "the decode rate fell 20.0%")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    let mut c = base("with --busy-skip under its threshold a busy-box run stays FAIL");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.5);
    c.outcome = Outcome::Fail;
    // The load line reads the same threshold as the policy: 31% is under 50%.
    c.expect = vec![(
        "load",
        Info,
        "the box was quiet (under the busy level of 50%), so the slowness is the serve's own",
    )];
    c.refuse = vec![("load", "likely cause")];
    cases.push(c);

    let mut c = base(
        "with --busy-skip under the default busy level, its threshold decides the load line too",
    );
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(60));
    c.floors.busy_skip = Some(0.02);
    c.expect = vec![(
        "load",
        Info,
        "a busy box is the likely cause (at or above the busy level of 2%)",
    )];
    c.refuse = vec![("load", "the box was quiet")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 6% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    let mut c = base("with --busy-skip a pass stays a pass");
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![];
    cases.push(c);

    let mut c = base("with 6 replies the rate gives its median's 95% interval");
    let spread: Vec<ReplyRecord> = [50u64, 40, 30, 20, 15, 10]
        .iter()
        .map(|gap| {
            reply(
                &(0..11).map(|i| 200 + gap * i).collect::<Vec<_>>(),
                "Paris.",
            )
        })
        .collect();
    c.replies = numbered(spread.clone());
    c.floors.floor = 10.0;
    c.expect = vec![(
        "rate",
        Ok,
        "median 41.7 tok/s over 6 replies, 95% interval 20.0 to 100.0 (floor 10.0",
    )];
    c.refuse = vec![("rate", "marginal")];
    cases.push(c);

    let mut c = base(
        "a floor inside the median's interval is marginal; the verdict still follows the median",
    );
    c.replies = numbered(spread);
    c.floors.floor = 45.0;
    c.expect = vec![(
        "rate",
        Fail,
        "; marginal: the floor is inside the median's 95% interval, so a re-run may flip this line",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("fewer than 3 timed replies make a thin figure");
    c.replies = numbered(vec![good(), good()]);
    c.expect = vec![
        (
            "rate",
            Ok,
            "over 2 replies (floor 60.0; each: 100.0, 100.0); thin: fewer than 3 timed replies",
        ),
        ("first-token", Ok, "; thin: fewer than 3 timed replies"),
    ];
    cases.push(c);

    let mut c = base("route-lib: a library the serve maps is named");
    c.route = Some(llama_cpu_route());
    c.floors.route_lib = Some("libggml-cpu".into());
    c.expect = vec![(
        "route",
        Ok,
        "process 812 (llama-server) maps libggml-cpu.so.0.26.0 (/libggml-cpu/); log ok",
    )];
    cases.push(c);

    let mut c = base("route-lib: a library no process maps fails, naming what was mapped");
    c.route = Some(llama_cpu_route());
    c.floors.route_lib = Some("libggml-cuda".into());
    c.expect = vec![(
        "route",
        Fail,
        "no process of the serve maps /libggml-cuda/ (mapped: libggml-cpu.so.0.26.0, libggml-base.so.0.26.0, libggml.so.0.26.0, libc.so.6",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("route-lib: a passing log never excuses the library");
    c.route = Some(llama_cpu_route());
    c.floors.route_lib = Some("libggml-cuda".into());
    c.floors.busy_skip = Some(0.0);
    c.load = Some(serve_waited(900));
    c.expect = vec![("route", Fail, "; log ok")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no-route-lib: the slow backend's library fails route");
    c.route = Some(llama_cpu_route());
    c.floors.no_route_lib = Some(r"libggml-cpu\.so".into());
    c.expect = vec![(
        "route",
        Fail,
        r"process 812 (llama-server) maps /libggml-cpu\.so/: /opt/llama/lib/libggml-cpu.so.0.26.0",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no-route-lib: maps that could not be read prove nothing");
    let mut unread = llama_cpu_route();
    unread.processes[0].maps.clear();
    unread.problems = vec!["/proc/812/maps: Permission denied (os error 13)".into()];
    c.route = Some(unread);
    c.floors.no_route_lib = Some("libggml-cpu".into());
    c.expect = vec![(
        "route",
        Fail,
        "could not show that no process maps /libggml-cpu/; could not read: \"/proc/812/maps: Permission denied",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("route-lib and route-device: the wrapper's child is looked at");
    c.route = Some(npu_wrapped_route());
    c.floors.route_lib = Some("libopenvino_intel_npu_plugin".into());
    c.floors.route_device = Some("^/dev/accel/accel[0-9]+$".into());
    c.expect = vec![(
        "route",
        Ok,
        "process 901 (ovms) maps libopenvino_intel_npu_plugin.so (/libopenvino_intel_npu_plugin/); process 901 (ovms) held /dev/accel/accel0 open",
    )];
    cases.push(c);

    let mut c = base("route-device: no device held fails, naming what was held");
    c.route = Some(llama_cpu_route());
    c.floors.route_device = Some("^/dev/nvidia[0-9]+$".into());
    c.expect = vec![(
        "route",
        Fail,
        "no process of the serve held open a file matching /^/dev/nvidia[0-9]+$/ during the replies (held: /dev/null, /runs/a/serve.log)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("device-busy: the share of the replies the device was busy");
    c.route = Some(npu_wrapped_route());
    c.floors.device_busy = Some(BUSY.into());
    c.expect = vec![(
        "route",
        Ok,
        "the device was busy 71% of the replies (/sys/class/accel/accel0/device/npu_busy_time_us advanced 2130000 us in 3.0 s)",
    )];
    cases.push(c);

    let mut c = base("device-busy: a counter that did not advance fails");
    let mut idle = npu_wrapped_route();
    if let Some(k) = idle.counter.as_mut() {
        k.after = k.before.map(|b| CounterReading {
            at_ns: 4_000_000_000,
            ..b
        });
    }
    c.route = Some(idle);
    c.floors.device_busy = Some(BUSY.into());
    c.expect = vec![(
        "route",
        Fail,
        "busy counter /sys/class/accel/accel0/device/npu_busy_time_us did not advance during the replies (it read 5000000 before and after)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("device-busy: a counter the run did not read fails");
    c.route = Some(llama_cpu_route());
    c.floors.device_busy = Some(BUSY.into());
    c.expect = vec![(
        "route",
        Fail,
        "the run recorded no readings of the busy counter",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("route evidence asked of a run without route.json fails");
    c.floors.route_lib = Some("libggml-cpu".into());
    c.expect = vec![(
        "route",
        Fail,
        "the run recorded no process evidence (no route.json",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an interrupted run is INTERRUPTED, never PASS");
    c.interrupted = Some(InterruptSignal::TERM);
    c.expect = vec![];
    c.outcome = Outcome::Interrupted {
        signal: InterruptSignal::TERM,
    };
    cases.push(c);

    let mut c = base("streams of a burst decoding together pass overlap");
    with_burst(&mut c, true);
    c.expect = vec![
        (
            "overlap",
            Ok,
            "the streams ran together: 2 of 2 streams decoding at once",
        ),
        // 20 tokens after the firsts over 100 ms: 200 tok/s, twice one stream's 100.
        (
            "aggregate",
            Info,
            "median 200.0 tok/s over 1 burst of 2 streams, 2.00x the single-stream median 100.0 tok/s",
        ),
        ("content", Ok, "5 replies, all with content"),
    ];
    cases.push(c);

    let mut c = base("streams run one after another fail overlap, and a busy box excuses it never");
    with_burst(&mut c, false);
    c.load = Some(serve_waited(900));
    c.floors.busy_skip = Some(0.1);
    c.expect = vec![
        (
            "overlap",
            Fail,
            "the serve ran the streams one after another, not together",
        ),
        ("rate", Ok, "over 5 replies"),
    ];
    c.refuse = vec![("load", "likely cause")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an aggregate under its floor fails, as timing a busy box may explain");
    with_burst(&mut c, true);
    c.floors.aggregate_floor = Some(200.5);
    c.load = Some(serve_waited(310));
    c.expect = vec![
        ("aggregate", Fail, "below the floor: median 200.0 tok/s"),
        ("load", Info, "a busy box is the likely cause"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an aggregate exactly at its floor and speedup is ok");
    with_burst(&mut c, true);
    c.floors.aggregate_floor = Some(200.0);
    c.floors.min_speedup = Some(2.0);
    c.expect = vec![("aggregate", Ok, "(floor 200.0; speedup at least 2.00x)")];
    cases.push(c);

    let mut c = base("an aggregate short of its speedup fails");
    with_burst(&mut c, true);
    c.floors.min_speedup = Some(2.01);
    c.expect = vec![("aggregate", Fail, "short of the speedup")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("the latency line gives the peers' percentiles");
    // First tokens at 100, 200 and 300 ms, then 10 tokens 10 ms apart: by definition 7 the
    // TTFT p90 is 280 (h = 2 x 0.9 = 1.8), where a nearest-rank p90 would be 300.
    let spread: Vec<ReplyRecord> = [100, 200, 300]
        .iter()
        .map(|&first| reply(&(0..11).map(|i| first + 10 * i).collect::<Vec<_>>(), "a"))
        .collect();
    c.replies = numbered(spread);
    c.expect = vec![(
        "latency",
        Info,
        "TTFT p50 200 ms, p90 280, p99 298; ITL p50 10.0 ms, p90 10.0, p99 10.0; \
         TPOT mean 10.0 ms, p50 10.0, p90 10.0, p99 10.0; E2EL p50 300 ms, p90 380, p99 398; \
         over 3 replies",
    )];
    cases.push(c);

    let mut c = base("a warm-up reply is recorded and not judged");
    // A cold first reply (first token at 2 s, 10 tok/s) flagged as a warm-up, before the
    // base case's three: every judged line is of the three alone.
    let cold: Vec<u64> = (0..11).map(|i| 2000 + 100 * i).collect();
    let mut warm_up = reply(&cold, "Paris");
    warm_up.warmup = true;
    let mut replies = vec![warm_up];
    replies.extend(c.replies.clone());
    c.replies = numbered(replies);
    c.planned = Some(3);
    c.expect.push((
        "latency",
        Info,
        "TTFT p50 200 ms, p90 200, p99 200; ITL p50 10.0 ms",
    ));
    c.refuse = vec![("rate", "10.0"), ("latency", "2000")];
    cases.push(c);

    let mut c = base("a failed warm-up reply fails content");
    let mut warm_up = reply(&[], "");
    warm_up.warmup = true;
    warm_up.error = Some("the serve answered 503".into());
    let mut replies = vec![warm_up];
    replies.extend(c.replies.clone());
    c.replies = numbered(replies);
    c.planned = Some(3);
    c.expect = vec![(
        "content",
        Fail,
        "the warm-up reply 1 failed: the serve answered 503; 3 replies, all with content",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a failed stream fails content naming its burst and stream");
    with_burst(&mut c, true);
    c.replies[4].error = Some("the stream broke: connection reset".into());
    c.expect = vec![(
        "content",
        Fail,
        "burst 1 stream 2 (reply 5) failed after saying \"Paris.\": the stream broke",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // ---- Determinism (issue 22) ------------------------------------------------------------

    let mut c = base("identical greedy answers are deterministic");
    c.floors.deterministic = true;
    c.expect.push((
        "determinism",
        Ok,
        "2 trials (2 repeats of 1 prompt), all identical to the first reply to their prompt: 0 differed, q = 0, 95% interval 0.000 to 0.842; these trials would have caught, with probability 0.95, a fault that shows in 78% of trials or more",
    ));
    cases.push(c);

    let mut c = base("determinism is judged only when asked");
    c.replies[2].content = "Paris!".into();
    c.absent = vec!["serve", "determinism"];
    cases.push(c);

    let mut c = base("one answer that differs fails determinism, naming it and where");
    c.floors.deterministic = true;
    c.replies[2].content = "Paris!".into();
    c.expect = vec![(
        "determinism",
        Fail,
        "1 of 2 trials (2 repeats of 1 prompt) differed from the first reply to their prompt: q = 0.5, 95% interval 0.013 to 0.987; first reply 3 (trial 2 of \"p\") differs from reply 1 at character 6 of the content: \"Paris!\" against \"Paris.\"",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("reasoning that differs fails determinism");
    c.floors.deterministic = true;
    for r in &mut c.replies {
        r.reasoning = "hm, France".into();
    }
    c.replies[1].reasoning = "hm, Spain".into();
    c.expect = vec![(
        "determinism",
        Fail,
        "reply 2 (trial 1 of \"p\") differs from reply 1 at character 5 of the reasoning",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a burst that answers otherwise than alone fails batch invariance");
    c.floors.deterministic = true;
    with_burst(&mut c, true);
    c.replies[4].content = "Paris?".into();
    c.expect = vec![(
        "determinism",
        Fail,
        "1 of 4 trials (2 repeats and 2 streams in bursts, over 1 prompt) differed from the first reply to their prompt: q = 0.25, 95% interval 0.006 to 0.806 (1 of the 2 in bursts); first burst 1 stream 2 (reply 5; trial 4 of \"p\", in a batch) differs from reply 1",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a determinism failure is never timing: --busy-skip on a busy box keeps it");
    c.floors.deterministic = true;
    c.floors.busy_skip = Some(0.5);
    c.load = Some(load_per_cpu(10.0));
    c.replies[2].content = "Paris!".into();
    c.expect = vec![("determinism", Fail, "1 of 2 trials")];
    c.refuse = vec![("load", "busy box")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a failed reply is no trial of determinism");
    c.floors.deterministic = true;
    c.replies[1].error = Some("the stream stalled".into());
    c.replies[1].content = "Pa".into();
    c.expect = vec![(
        "determinism",
        Ok,
        "1 trial (1 repeat of 1 prompt), all identical to the first reply to their prompt: 0 differed, q = 0, 95% interval 0.000 to 0.975; these trials would have caught, with probability 0.95, a fault that shows in 95% of trials or more; 1 failed reply not compared",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no prompt answered twice leaves determinism inconclusive");
    c.floors.deterministic = true;
    c.replies.truncate(1);
    c.expect = vec![(
        "determinism",
        Status::Inconclusive,
        "no prompt was answered twice",
    )];
    c.outcome = Outcome::Inconclusive {
        reason: "determinism inconclusive".into(),
    };
    cases.push(c);

    cases
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_judging_case_passes() {
        let failed: Vec<String> = super::all()
            .iter()
            .filter_map(|c| c.check().err().map(|e| format!("{}: {e}", c.name)))
            .collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }
}
