//! Properties of the verdict, over generated runs (proptest): what must hold for every run,
//! not just the hand-made judging cases.
//!
//! A generated run is one of two kinds of single-stream replies: a short run (1 to 5 replies of
//! any timing) or a long one (8 to 16 replies with a steady decode, its rate and first token
//! drifting by a generated share over the run: enough for the drift lines, `drift::MIN_REPLIES`).
//! Either may add concurrent bursts (`--concurrency`: 1 to 3 bursts of 2 to 4 streams, each
//! burst's streams together or one after another, with or without `--aggregate-floor` and
//! `--min-speedup`), a baseline (none, one gone, a comparable one, one of another model, of
//! another host, or from before provenance, its own replies and load), `--deterministic` trials
//! (the replies spread over 1 to 3 prompts, answering each prompt the same every time or not;
//! `--baseline-answers` info or exact), a `--max-drift` (0.01 to 0.9: the flag takes a share
//! above 0 and below 1), and faults or none (failed, empty or wrong replies).
//!
//! Each property names, in its comment, a mutant of the judging code it catches: a change
//! that breaks the rule it states. The ones marked "tried" were applied by hand and seen to
//! fail the property.

use proptest::collection::vec;
use proptest::prelude::*;

use crate::archive::check::{Check, Kind};
use crate::archive::record::{
    AnswerPolicy, BurstSlot, ConcurrencyPlan, LoadSnapshot, ReplyRecord, RunManifest, Startup,
    TopProcess,
};
use crate::archive::rundir;
use crate::judging::drift;
use crate::judging::verdict::conditions::summarize;
use crate::judging::verdict::{
    judge, Baseline, BaselineEvidence, Criteria, Evidence, Floors, Outcome, Status, Verdict,
};
use crate::live::conditions::INTERVAL_MS;
use crate::selftest::cases::reply;

const MS: u64 = 1_000_000;

const LOGS: [&str; 4] = [
    "route: npu-fast\n",
    "route: cpu-fallback\n",
    "route: npu-fast\nlayer 3: route: cpu-fallback\n",
    "",
];

/// The prompts a run's replies are spread over (a run uses the first 1 to 3).
const PROMPTS: [&str; 3] = ["What is the capital of France?", "Name a river.", "p"];

/// What a reply may say: nothing (a failure), or one of four answers that differ word for
/// word (two prompts answered with the same text are the output line's failure, not chance).
const ANSWERS: [&str; 5] = [
    "",
    "Paris.",
    "London.",
    "The Danube flows east.",
    "Rome, they say.",
];

/// Where a baseline is named from: its lines say it.
const BASELINE_NAME: &str = "runs/base";

/// An answer's index into [`ANSWERS`]: the empty one is rarer than any other.
fn arb_answer() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 8 => 1usize..ANSWERS.len()]
}

/// One reply's shape, before it is put in a run: its first token's time, its gaps, what it
/// said, its usage count, whether it expects Paris, its prompt, and whether it failed.
#[derive(Debug, Clone)]
struct Shape {
    first: u64,
    gaps: Vec<u64>,
    said: usize,
    usage: Option<u64>,
    expects: bool,
    prompt: usize,
    error: bool,
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    (
        1u64..3000,
        vec(1u64..400, 0..12),
        arb_answer(),
        proptest::option::of(0u64..40),
        prop_oneof![3 => Just(false), 1 => Just(true)],
        0usize..PROMPTS.len(),
        prop_oneof![11 => Just(false), 1 => Just(true)],
    )
        .prop_map(|(first, gaps, said, usage, expects, prompt, error)| Shape {
            first,
            gaps,
            said,
            usage,
            expects,
            prompt,
            error,
        })
}

/// How a run says things: each reply its own answer, or each prompt always the same one.
#[derive(Debug, Clone)]
struct Answers {
    /// How many of [`PROMPTS`] the run uses.
    prompts: usize,
    /// `Some(shift)`: every reply to prompt `p` says the same, every time (what
    /// `--deterministic` wants): `ANSWERS[1 + (p + shift) % 4]`, no two prompts alike (or with
    /// faults and an even shift, nothing at all to prompt 0); `None`: each reply says its
    /// shape's answer.
    same: Option<usize>,
    /// Whether replies may fail, say nothing, or miss their expected answer. A run without
    /// faults can pass (with 16 replies, one in ten faulty would leave almost none that do).
    faulty: bool,
}

impl Answers {
    fn prompt(&self, s: &Shape) -> usize {
        s.prompt % self.prompts
    }

    fn said(&self, s: &Shape) -> &'static str {
        let p = self.prompt(s);
        match self.same {
            Some(shift) if self.faulty && p == 0 && shift % 2 == 0 => ANSWERS[0],
            Some(shift) => ANSWERS[1 + (p + shift) % 4],
            // Without faults, each prompt's own answer where the shape said nothing.
            None if s.said == 0 && !self.faulty => ANSWERS[1 + p],
            None => ANSWERS[s.said],
        }
    }
}

fn arb_answers() -> impl Strategy<Value = Answers> {
    (
        1usize..=PROMPTS.len(),
        proptest::option::weighted(0.6, 0usize..4),
        any::<bool>(),
    )
        .prop_map(|(prompts, same, faulty)| Answers {
            prompts,
            same,
            faulty,
        })
}

/// A reply of `shape` sent at `sent_ms`, its text events at `at_ms` after it (none when it said
/// nothing).
fn made(shape: &Shape, answers: &Answers, sent_ms: u64, at_ms: &[u64]) -> ReplyRecord {
    let said = answers.said(shape);
    let at: Vec<u64> = if said.is_empty() {
        Vec::new()
    } else {
        at_ms.iter().map(|t| sent_ms + t).collect()
    };
    let mut r = reply(&at, said);
    r.sent_ns = sent_ms * MS;
    r.end_ns = r.end_ns.max(r.sent_ns);
    r.prompt = PROMPTS[answers.prompt(shape)].to_string();
    r.usage_completion_tokens = shape.usage;
    // Without faults, only a reply that says Paris expects it.
    if shape.expects && (answers.faulty || said == ANSWERS[1]) {
        r.expect = Some("(?i)paris".into());
    }
    if shape.error && answers.faulty {
        r.error = Some("the stream ended before [DONE]".into());
        r.finish_reason = None;
    }
    r
}

/// A short run's reply: its first token and gaps as generated, any timing at all.
fn short_reply(shape: &Shape, answers: &Answers, sent_ms: u64) -> ReplyRecord {
    let mut at = vec![shape.first];
    for g in &shape.gaps {
        at.push(at.last().unwrap() + g);
    }
    made(shape, answers, sent_ms, &at)
}

/// How a long run's decode and first token go over it.
#[derive(Debug, Clone)]
struct Course {
    /// The gap between text events at the start, ms.
    gap_ms: f64,
    /// The decode rate's change over the run, a share (-0.6: it falls 60%).
    rate_change: f64,
    /// The first token's change over the run, a share.
    first_change: f64,
    /// Each reply's rate, times this (noise).
    jitter: Vec<f64>,
}

fn arb_course() -> impl Strategy<Value = Course> {
    (
        10.0f64..60.0,
        -0.6f64..0.6,
        -0.6f64..1.0,
        vec(0.9f64..1.1, 16),
    )
        .prop_map(|(gap_ms, rate_change, first_change, jitter)| Course {
            gap_ms,
            rate_change,
            first_change,
            jitter,
        })
}

/// Reply `i` of `n` of a long run, sent 5 s after the one before: 5 to 12 evenly spaced text
/// events, its rate and first token moved by the course's share at its place in the run. Even
/// spacing keeps every reply's rate (none is bunched): a drift needs the rates.
fn long_reply(
    shape: &Shape,
    answers: &Answers,
    course: &Course,
    i: usize,
    n: usize,
) -> ReplyRecord {
    let t = i as f64 / (n - 1) as f64;
    let rate = (1.0 + course.rate_change).powf(t) * course.jitter[i % course.jitter.len()];
    let gap = course.gap_ms / rate;
    let first = (50 + shape.first % 250) as f64 * (1.0 + course.first_change).powf(t);
    let events = 5 + shape.gaps.len() % 8;
    let at: Vec<u64> = (0..events)
        .map(|k| (first + k as f64 * gap).round() as u64)
        .collect();
    let mut r = made(shape, answers, i as u64 * 5_000, &at);
    // Counted by its events: a usage claim of 0 tokens would leave it no rate to drift.
    r.usage_completion_tokens = None;
    r
}

/// The bursts: the plan, and for each burst whether its streams ran together.
#[derive(Debug, Clone)]
struct Bursts {
    plan: ConcurrencyPlan,
    together: Vec<bool>,
    shapes: Vec<Shape>,
}

impl Bursts {
    fn together(&self, round: usize) -> bool {
        self.together[(round - 1) % self.together.len()]
    }
}

fn arb_bursts() -> impl Strategy<Value = Bursts> {
    (
        2usize..=4,
        1usize..=3,
        vec(prop_oneof![7 => Just(true), 1 => Just(false)], 3),
        vec(arb_shape(), 6),
    )
        .prop_map(|(streams, rounds, together, shapes)| Bursts {
            plan: ConcurrencyPlan { streams, rounds },
            together,
            shapes,
        })
}

/// The bursts' streams, each released at its burst's start (1000 s apart, after every
/// single-stream reply) and written 0.2 ms later; one after another, a stream's text starts
/// 10 ms after the one before it ended.
fn burst_replies(b: &Bursts, answers: &Answers) -> Vec<ReplyRecord> {
    let mut out = Vec::new();
    for round in 1..=b.plan.rounds {
        let released = 1_000_000 * round as u64;
        let mut after = 0u64;
        for stream in 1..=b.plan.streams {
            let shape = &b.shapes[((round - 1) * b.plan.streams + stream - 1) % b.shapes.len()];
            // 2 to 8 text events, 1 to 40 ms apart, the first within 40 ms of the release:
            // each stream has a decode window, and together they overlap.
            let first = 50 + shape.first % 40;
            let mut at = vec![first];
            for k in 0..1 + shape.gaps.len() % 7 {
                let gap = shape.gaps.get(k).copied().unwrap_or(7 * k as u64);
                at.push(at.last().unwrap() + 1 + gap % 40);
            }
            if !b.together(round) {
                at.iter_mut().for_each(|t| *t += after);
                after = at.last().unwrap() + 10;
            }
            let mut r = made(shape, answers, released, &at);
            r.burst = Some(BurstSlot { round, stream });
            r.written_ns = Some(r.sent_ns + 200_000);
            out.push(r);
        }
    }
    out
}

/// What baseline the run is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BaselineKind {
    /// None asked for.
    NotAsked,
    /// Asked for, and gone.
    Missing,
    /// The same model, workload and box.
    Comparable,
    /// Another model's files: not comparable.
    OtherModel,
    /// Another host: inconclusive unless `--baseline-allow host`.
    OtherHost,
    /// A baseline from before provenance: it cannot show it is comparable.
    NoProvenance,
}

fn arb_baseline_kind() -> impl Strategy<Value = BaselineKind> {
    prop_oneof![
        3 => Just(BaselineKind::NotAsked),
        1 => Just(BaselineKind::Missing),
        3 => Just(BaselineKind::Comparable),
        1 => Just(BaselineKind::OtherModel),
        1 => Just(BaselineKind::OtherHost),
        1 => Just(BaselineKind::NoProvenance),
    ]
}

/// A run.json: greedy, seed 42, model `m`, its model file hashed `model_sha` on `host` (no
/// provenance at all when `model_sha` is `None`).
fn manifest(model_sha: Option<&str>, host: &str) -> RunManifest {
    let mut m: RunManifest = serde_json::from_value(serde_json::json!({
        "schema": 1, "tool_version": "t", "argv": [], "url": "http://127.0.0.1:1",
        "prompts": [], "replies_planned": 1,
        "floors": {"floor": 1.0, "first_token_ms": 1.0},
        "limits": {"ready_timeout_s": 1.0, "grace_s": 1.0, "reply_timeout_s": 1.0},
        "host": host, "started_utc": "", "clock": {"name": "CLOCK_MONOTONIC", "base_ns": 0},
        "serve_log_source": "none", "model": "m",
        "sampling_sent": {"temperature": 0.0, "seed": 42},
    }))
    .unwrap();
    if let Some(sha) = model_sha {
        m.provenance = Some(
            serde_json::from_value(serde_json::json!({
                "tool_version": "t", "workload_sha256": "w", "host": host,
                "model_files": [{"path": "/m.gguf", "size": 1, "sha256": sha}],
            }))
            .unwrap(),
        );
    }
    m
}

#[derive(Debug, Clone)]
struct BaselineRun {
    kind: BaselineKind,
    candidate: RunManifest,
    manifest: RunManifest,
    replies: Vec<ReplyRecord>,
    load: Option<LoadSnapshot>,
}

fn arb_load() -> impl Strategy<Value = Option<LoadSnapshot>> {
    proptest::option::of(
        (
            0.0f64..64.0,
            1usize..64,
            proptest::option::of(0u64..1000),
            proptest::option::of(0.0f64..1500.0),
        )
            .prop_map(|(load1, ncpu, wait, others)| {
                // Others' CPU, as the top users during the replies: enough of it lets a busy
                // box excuse a timing failure, too little blames the serve.
                let top = others
                    .map(|cpu_pct| {
                        vec![TopProcess {
                            name: "cc1plus".into(),
                            count: 4,
                            cpu_pct,
                        }]
                    })
                    .unwrap_or_default();
                LoadSnapshot {
                    load1,
                    load5: load1,
                    load15: load1,
                    ncpu,
                    taken: "before-serve".into(),
                    during: wait
                        .map(|w| summarize(&[], 1.0, Some((1000 - w, w)), top, INTERVAL_MS)),
                }
            }),
    )
}

#[derive(Debug, Clone)]
struct Run {
    replies: Vec<ReplyRecord>,
    /// Whether the single-stream replies are a long run's (enough for a drift line).
    long: bool,
    /// Whether every reply to a prompt says the same.
    same_answers: bool,
    plan: Option<ConcurrencyPlan>,
    /// Whether every burst's streams ran one after another.
    serial: bool,
    baseline: BaselineRun,
    log: &'static str,
    load: Option<LoadSnapshot>,
    floors: Floors,
}

impl Run {
    fn single_stream(&self) -> impl Iterator<Item = &ReplyRecord> {
        self.replies.iter().filter(|r| r.burst.is_none())
    }

    fn serial_bursts(&self) -> bool {
        self.serial
    }
}

/// The floors a run is judged by, beyond the first ones: bursts', drift's, the baseline's and
/// determinism's.
#[derive(Debug, Clone)]
struct MoreFloors {
    aggregate_floor: Option<f64>,
    min_speedup: Option<f64>,
    max_drift: Option<f64>,
    deterministic: bool,
    baseline_answers: Option<AnswerPolicy>,
    allow_host: bool,
}

fn arb_more_floors() -> impl Strategy<Value = MoreFloors> {
    (
        proptest::option::of(1.0f64..150.0),
        proptest::option::of(0.5f64..4.0),
        proptest::option::of(0.01f64..0.9),
        any::<bool>(),
        proptest::option::of(prop_oneof![
            Just(AnswerPolicy::Info),
            Just(AnswerPolicy::Exact)
        ]),
        any::<bool>(),
    )
        .prop_map(
            |(
                aggregate_floor,
                min_speedup,
                max_drift,
                deterministic,
                baseline_answers,
                allow_host,
            )| {
                MoreFloors {
                    aggregate_floor,
                    min_speedup,
                    max_drift,
                    deterministic,
                    baseline_answers,
                    allow_host,
                }
            },
        )
}

fn arb_run() -> impl Strategy<Value = Run> {
    let singles = prop_oneof![
        // A short run, any timing.
        vec(arb_shape(), 1..6).prop_map(|s| (s, None)),
        // A long run: enough replies for the drift lines.
        (vec(arb_shape(), drift::MIN_REPLIES..=16), arb_course()).prop_map(|(s, c)| (s, Some(c))),
    ];
    let replies = (
        singles,
        arb_answers(),
        proptest::option::of(arb_bursts()),
        arb_baseline_kind(),
        vec(arb_shape(), 1..16),
        arb_load(),
    );
    let judging = (
        prop_oneof![5 => Just(0usize), 1 => 1usize..LOGS.len()],
        arb_load(),
        prop_oneof![3 => 0.0f64..5.0, 1 => 0.0f64..200.0],
        1.0f64..4000.0,
        proptest::option::of(0.0f64..=1.0),
        any::<bool>(),
        arb_more_floors(),
    );
    (replies, judging).prop_map(
        |(
            ((shapes, course), answers, bursts, kind, baseline_shapes, baseline_load),
            (log, load, floor, limit, busy_skip, patterns, more),
        )| {
            let n = shapes.len();
            let mut replies: Vec<ReplyRecord> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| match &course {
                    Some(c) => long_reply(s, &answers, c, i, n),
                    None => short_reply(s, &answers, i as u64 * 5_000),
                })
                .collect();
            if let Some(b) = &bursts {
                replies.extend(burst_replies(b, &answers));
            }
            number(&mut replies);
            // The baseline's replies are made as the candidate's single-stream ones are.
            let nb = baseline_shapes.len();
            let mut baseline_replies: Vec<ReplyRecord> = baseline_shapes
                .iter()
                .enumerate()
                .map(|(i, s)| match &course {
                    Some(c) if nb > 1 => long_reply(s, &answers, c, i, nb),
                    _ => short_reply(s, &answers, i as u64 * 5_000),
                })
                .collect();
            number(&mut baseline_replies);
            let candidate = manifest(Some("abc"), "h");
            let baseline_manifest = match kind {
                BaselineKind::OtherModel => manifest(Some("def"), "h"),
                BaselineKind::OtherHost => manifest(Some("abc"), "other"),
                BaselineKind::NoProvenance => manifest(None, "h"),
                _ => candidate.clone(),
            };
            Run {
                replies,
                long: course.is_some(),
                same_answers: answers.same.is_some(),
                serial: bursts
                    .as_ref()
                    .is_some_and(|b| (1..=b.plan.rounds).all(|r| !b.together(r))),
                plan: bursts.map(|b| b.plan),
                baseline: BaselineRun {
                    kind,
                    candidate,
                    manifest: baseline_manifest,
                    replies: baseline_replies,
                    load: baseline_load,
                },
                log: LOGS[log],
                load,
                floors: Floors {
                    floor,
                    first_token_ms: limit,
                    fast_route: patterns.then(|| "route: npu-fast".to_string()),
                    slow_route: patterns.then(|| "route: cpu-fallback".to_string()),
                    busy_skip,
                    aggregate_floor: more.aggregate_floor,
                    min_speedup: more.min_speedup,
                    max_drift: more.max_drift,
                    deterministic: more.deterministic,
                    baseline_answers: more.baseline_answers,
                    baseline: (kind != BaselineKind::NotAsked).then(|| BASELINE_NAME.into()),
                    baseline_allow: if more.allow_host {
                        vec!["host".into()]
                    } else {
                        Vec::new()
                    },
                    ..Floors::default()
                },
            }
        },
    )
}

fn number(replies: &mut [ReplyRecord]) {
    for (i, r) in replies.iter_mut().enumerate() {
        r.index = i + 1;
    }
}

/// The verdict on `run`'s evidence with these floors, replies and load.
fn judge_as(
    run: &Run,
    floors: &Floors,
    replies: &[ReplyRecord],
    load: Option<&LoadSnapshot>,
) -> Verdict {
    let startup = Startup::Ready {
        after_ms: 1.0,
        probe: "/health".into(),
        not_ready_answers: 0,
    };
    let criteria = Criteria::new(floors.clone()).unwrap();
    let log = criteria.scan_log_text(run.log);
    let b = &run.baseline;
    let baseline = match b.kind {
        BaselineKind::NotAsked => BaselineEvidence::NotAsked,
        BaselineKind::Missing => BaselineEvidence::Missing("runs/base is gone"),
        _ => BaselineEvidence::Recorded {
            candidate: &b.candidate,
            baseline: Baseline {
                name: BASELINE_NAME,
                manifest: &b.manifest,
                replies: &b.replies,
                load: b.load.as_ref(),
            },
        },
    };
    let e = Evidence {
        serve_log: Some(&log),
        load,
        concurrency: run.plan.as_ref(),
        baseline,
        manifest: (b.kind != BaselineKind::NotAsked).then_some(&b.candidate),
        ..Evidence::of(replies, &startup)
    };
    judge(&e, &criteria)
}

fn verdict_of(run: &Run, floors: &Floors, replies: &[ReplyRecord]) -> Verdict {
    judge_as(run, floors, replies, run.load.as_ref())
}

/// Whether the run's single-stream replies give the drift lines: a long run's replies that said
/// something and did not fail each have a rate and a first token (their text evenly spaced,
/// never bunched), and a short run's are fewer than the drift's [`drift::MIN_REPLIES`]. Burst
/// streams never count.
fn drift_expected(run: &Run) -> bool {
    let timed = run
        .single_stream()
        .filter(|r| r.error.is_none() && !r.content.is_empty())
        .count();
    run.long && timed >= drift::MIN_REPLIES
}

fn has(v: &Verdict, check: Check) -> bool {
    v.lines.iter().any(|l| l.check == check)
}

fn statuses(v: &Verdict, check: Check) -> impl Iterator<Item = Status> + '_ {
    v.lines
        .iter()
        .filter(move |l| l.check == check)
        .map(|l| l.status)
}

/// Cases for the properties that judge a run: each judgement of a rich run costs some ms in
/// a debug build, and `cargo test --lib properties` must stay well under a minute on a loaded
/// 2-core box (512 cases, the count before the runs had bursts, baselines and drift, took it
/// past one).
const CASES: u32 = 256;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// An empty reply is never excused: no PASS, whatever the floors, load or policy. Catches:
    /// the content line taking a reply of nothing for one with content, or content counted
    /// among the timing checks a busy box excuses.
    #[test]
    fn no_pass_when_any_reply_is_empty(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        if run.replies.iter().any(|r| r.content.trim().is_empty()) {
            prop_assert_ne!(&v.outcome, &Outcome::Pass, "{}", v);
            prop_assert!(!matches!(v.outcome, Outcome::Skip { .. }), "{}", v);
        }
    }

    /// The slow route in the log is never excused. Catches: the route line passing a log that
    /// names the fast route and later the slow one.
    #[test]
    fn no_pass_when_the_slow_route_is_in_the_log(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        if run.floors.slow_route.is_some() && run.log.contains("cpu-fallback") {
            prop_assert_eq!(&v.outcome, &Outcome::Fail, "{}", v);
        }
    }

    /// Raising the floor never turns a FAIL into a PASS. Catches: the rate line failing a
    /// median above the floor rather than below it.
    #[test]
    fn raising_the_floor_never_passes_a_fail(run in arb_run(), more in 0.0f64..500.0) {
        let before = verdict_of(&run, &run.floors, &run.replies);
        let raised = Floors { floor: run.floors.floor + more, ..run.floors.clone() };
        let after = verdict_of(&run, &raised, &run.replies);
        if before.outcome == Outcome::Fail {
            prop_assert_ne!(&after.outcome, &Outcome::Pass, "{}\nthen\n{}", before, after);
        }
    }

    /// Lowering the first-token limit never turns a FAIL into a PASS. Catches: the
    /// first-token line failing a median under the limit rather than over it.
    #[test]
    fn lowering_the_limit_never_passes_a_fail(run in arb_run(), cut in 0.0f64..1.0) {
        let before = verdict_of(&run, &run.floors, &run.replies);
        let lowered = Floors {
            first_token_ms: (run.floors.first_token_ms * (1.0 - cut)).max(0.001),
            ..run.floors.clone()
        };
        let after = verdict_of(&run, &lowered, &run.replies);
        if before.outcome == Outcome::Fail {
            prop_assert_ne!(&after.outcome, &Outcome::Pass, "{}\nthen\n{}", before, after);
        }
    }

    /// A run judged live and again from its archived replies gives the same lines, to the
    /// text and the last bit of each figure (it found the output line naming a prompt in a
    /// hash set's order; fixed). Catches (tried): a reply field the archive
    /// drops, `#[serde(default, skip)]` on `ReplyRecord::burst` in archive/record.rs (the burst
    /// lines change); the short runs alone, without bursts, could not see it.
    #[test]
    fn the_archive_round_trip_gives_the_same_lines(run in arb_run()) {
        let mut jsonl = Vec::new();
        for r in &run.replies {
            serde_json::to_writer(&mut jsonl, r).unwrap();
            jsonl.push(b'\n');
        }
        let archived = rundir::parse_replies(&jsonl).unwrap();
        prop_assert_eq!(
            verdict_of(&run, &run.floors, &run.replies),
            verdict_of(&run, &run.floors, &archived)
        );
    }
}

proptest! {
    // No verdict here: cheap cases, as many as before.
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The readers of untrusted bytes never panic: chunks, prompts, load.json, profiles.
    #[test]
    fn the_loaders_never_panic_on_garbage(bytes in vec(any::<u8>(), 0..400)) {
        let _ = crate::wire::openai::Chunk::parse(&bytes);
        let text = String::from_utf8_lossy(&bytes);
        let _ = crate::prompts::parse(&text);
        let _ = serde_json::from_slice::<LoadSnapshot>(&bytes);
        if let Ok(profile) = crate::args::profile::read_text(&text, "p.toml") {
            let _ = crate::args::profile::merge(&["run".into()], profile, std::path::Path::new("/"));
        }
    }

    /// Truncated archive files are errors, never panics.
    #[test]
    fn truncated_replies_are_errors_not_panics(run in arb_run(), cut in 0.0f64..1.0) {
        let mut jsonl = Vec::new();
        for r in &run.replies {
            serde_json::to_writer(&mut jsonl, r).unwrap();
            jsonl.push(b'\n');
        }
        let at = (jsonl.len() as f64 * cut) as usize;
        let _ = rundir::parse_replies(&jsonl[..at]);
    }
}

/// The baseline's lines.
const BASELINE_CHECKS: [Check; 3] = [
    Check::BaselineRate,
    Check::BaselineFirstToken,
    Check::BaselineAnswers,
];

proptest! {
    // Half as many: each run here is judged as above, by eight properties more.
    #![proptest_config(ProptestConfig::with_cases(CASES / 2))]

    /// A line of a check that is information only is always `info`, whatever the run: it never
    /// changes the result. Catches (tried): the first-token-drift line judged as the drift line is
    /// (`judge_drift(-change, up, max_drift)` for `Status::Info` in drift.rs); also the load
    /// line made `ok` (not tried).
    #[test]
    fn an_info_line_is_always_info(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        for l in &v.lines {
            if l.check.kind() == Kind::Info {
                prop_assert_eq!(l.status, Status::Info, "{}\n{}", l, v);
            }
        }
    }

    /// `--busy-skip` and load excuse only the timing checks (`Check::TIMING`): a failed line
    /// of any other check is a FAIL whatever the load and `--busy-skip`. Catches (tried): the
    /// busy-box rule in `judge` taking every check for timing (`let timing = |_: &Line| true`).
    #[test]
    fn a_failure_outside_timing_is_a_fail_whatever_the_load(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        if v.lines.iter().any(|l| l.status == Status::Fail && !l.check.is_timing()) {
            prop_assert_eq!(&v.outcome, &Outcome::Fail, "{}", v);
        }
    }

    /// The load never turns a FAIL into a PASS: judged with no load recorded a run FAILs, so
    /// with its load (and its `--busy-skip`) it may be a SKIP or inconclusive, never a PASS.
    /// Catches (tried): a busy-box SKIP made a PASS (`Outcome::Pass` in `judge`'s busy_skip
    /// arm); also a baseline FAIL on a busier box than the baseline's made `ok` instead of
    /// inconclusive (not tried).
    #[test]
    fn load_never_turns_a_fail_into_a_pass(run in arb_run()) {
        let quiet = judge_as(&run, &run.floors, &run.replies, None);
        let loaded = verdict_of(&run, &run.floors, &run.replies);
        if quiet.outcome == Outcome::Fail {
            prop_assert_ne!(&loaded.outcome, &Outcome::Pass, "{}\nthen\n{}", quiet, loaded);
        }
    }

    /// The baseline lines are there exactly when a baseline was asked for (baseline-answers
    /// with `--deterministic` only); one that is inconclusive or failed never lets the run
    /// PASS; a baseline of another model, or from before provenance, or of another host not
    /// allowed, is never `ok`. Catches (tried): a baseline that is gone giving no lines
    /// (`Missing(_) => return Vec::new()` in verdict/baseline.rs); also (not tried) an
    /// inconclusive line left out of the outcome, or another box's difference not made
    /// inconclusive.
    #[test]
    fn the_baseline_lines_are_there_when_asked_and_hold_back_a_pass(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        let kind = run.baseline.kind;
        let asked = kind != BaselineKind::NotAsked;
        prop_assert_eq!(has(&v, Check::BaselineRate), asked, "{}", v);
        prop_assert_eq!(has(&v, Check::BaselineFirstToken), asked, "{}", v);
        prop_assert_eq!(
            has(&v, Check::BaselineAnswers),
            asked && run.floors.deterministic,
            "{}",
            v
        );
        let held_back = v.lines.iter().any(|l| {
            BASELINE_CHECKS.contains(&l.check)
                && matches!(l.status, Status::Inconclusive | Status::Fail)
        });
        if held_back {
            prop_assert_ne!(&v.outcome, &Outcome::Pass, "{}", v);
        }
        let never_ok = match kind {
            BaselineKind::OtherModel | BaselineKind::NoProvenance | BaselineKind::Missing => true,
            BaselineKind::OtherHost => run.floors.baseline_allow.is_empty(),
            BaselineKind::NotAsked | BaselineKind::Comparable => false,
        };
        if never_ok {
            for check in [Check::BaselineRate, Check::BaselineFirstToken] {
                prop_assert!(statuses(&v, check).all(|s| s != Status::Ok), "{:?}: {}", kind, v);
            }
        }
    }

    /// The overlap and aggregate lines are there exactly when bursts were recorded; an
    /// aggregate FAIL never lets the run PASS; bursts whose streams all ran one after another
    /// FAIL overlap. Catches (tried): overlap read from the streams' release rather than their
    /// text (`windows.push((r.sent_ns, last))` in verdict/bursts.rs: every stream of a burst
    /// shares its release); also (not tried) the aggregate line given only with
    /// `--aggregate-floor` or `--min-speedup`, or an aggregate FAIL left out of the outcome.
    #[test]
    fn the_burst_lines_are_there_with_bursts_and_hold_back_a_pass(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        let bursts = run.replies.iter().any(|r| r.burst.is_some());
        prop_assert_eq!(bursts, run.plan.is_some());
        prop_assert_eq!(has(&v, Check::Overlap), bursts, "{}", v);
        prop_assert_eq!(has(&v, Check::Aggregate), bursts, "{}", v);
        if statuses(&v, Check::Aggregate).any(|s| s == Status::Fail) {
            prop_assert_ne!(&v.outcome, &Outcome::Pass, "{}", v);
        }
        if run.serial_bursts() {
            prop_assert!(statuses(&v, Check::Overlap).all(|s| s == Status::Fail), "{}", v);
        }
    }

    /// With `--deterministic` the determinism line is there (and only then); a determinism
    /// FAIL never lets the run PASS; when every reply to a prompt says the same, the line is
    /// not FAIL. Catches (tried): each reply held to the first reply of another prompt
    /// (`references.values_mut().next()` for `references.get_mut(prompt)` in
    /// verdict/determinism.rs).
    #[test]
    fn determinism_fails_only_on_different_answers_and_then_never_passes(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        prop_assert_eq!(has(&v, Check::Determinism), run.floors.deterministic, "{}", v);
        if statuses(&v, Check::Determinism).any(|s| s == Status::Fail) {
            prop_assert_ne!(&v.outcome, &Outcome::Pass, "{}", v);
        }
        if run.same_answers {
            prop_assert!(
                statuses(&v, Check::Determinism).all(|s| s != Status::Fail),
                "{}",
                v
            );
        }
    }

    /// A run long enough gives the drift and first-token-drift lines, and a shorter one does
    /// not: at least `drift::MIN_REPLIES` single-stream replies with a rate, burst streams not
    /// counted. Catches (tried): the drift reading the bursts' streams instead of the
    /// single-stream replies (`r.burst.is_some()` for `r.burst.is_none()` in `drift_lines`);
    /// also a `MIN_REPLIES` raised above 16 (not tried).
    #[test]
    fn the_drift_lines_are_there_when_the_run_is_long_enough(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        let expected = drift_expected(&run);
        prop_assert_eq!(has(&v, Check::Drift), expected, "{}", v);
        prop_assert_eq!(has(&v, Check::FirstTokenDrift), expected, "{}", v);
    }

    /// Raising `--max-drift` (within its bounds, below 1) never turns a PASS into a FAIL: it
    /// only lets a larger fall pass. Nor does it turn the drift line itself from info to FAIL:
    /// a fall near the limit is generated far more often than one in a run whose every other
    /// line is ok (by hand, the outcome alone missed the mutant below in one run of four).
    /// Each long run is judged at its `--max-drift` and three raised ones, in order; a short
    /// run has no drift line for the limit to move. Catches (tried): the limit read the wrong
    /// way round (`1.0 - max_drift` passed to `drift_lines` in `judge`).
    #[test]
    fn raising_max_drift_never_fails_a_pass(run in arb_run(), ups in vec(0.0f64..1.0, 3)) {
        if !run.long {
            return Ok(());
        }
        let max = run.floors.max_drift.unwrap_or(drift::DEFAULT_MAX_DRIFT);
        let mut levels: Vec<f64> = ups.iter().map(|u| max + (0.99 - max) * u).collect();
        levels.sort_by(f64::total_cmp);
        let mut before = verdict_of(&run, &run.floors, &run.replies);
        for level in levels {
            let raised = Floors {
                max_drift: Some(level),
                ..run.floors.clone()
            };
            let after = verdict_of(&run, &raised, &run.replies);
            if before.outcome == Outcome::Pass {
                prop_assert_eq!(&after.outcome, &Outcome::Pass, "{}\nthen\n{}", before, after);
            }
            if statuses(&before, Check::Drift).all(|s| s != Status::Fail) {
                prop_assert!(
                    statuses(&after, Check::Drift).all(|s| s != Status::Fail),
                    "at --max-drift {}:\n{}\nthen\n{}",
                    level,
                    before,
                    after
                );
            }
            before = after;
        }
    }
}
