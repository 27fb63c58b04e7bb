//! Properties of the verdict, over generated runs (proptest): what must hold for every run,
//! not just the hand-made judging cases.

use proptest::collection::vec;
use proptest::prelude::*;

use crate::archive::record::{LoadSnapshot, ReplyRecord, Startup};
use crate::archive::rundir;
use crate::judging::verdict::{judge, Criteria, Evidence, Floors, Outcome, Verdict};
use crate::live::conditions::summarize;
use crate::selftest::cases::reply;

const LOGS: [&str; 4] = [
    "route: npu-fast\n",
    "route: cpu-fallback\n",
    "route: npu-fast\nlayer 3: route: cpu-fallback\n",
    "",
];

/// A reply: its first token's time, its gaps, what it said, and its usage count.
fn arb_reply() -> impl Strategy<Value = ReplyRecord> {
    (
        1u64..3000,
        vec(1u64..400, 0..12),
        prop_oneof![Just(""), Just("Paris."), Just("London.")],
        proptest::option::of(0u64..40),
        any::<bool>(),
    )
        .prop_map(|(first, gaps, said, usage, expects)| {
            let mut at = vec![first];
            for g in gaps {
                at.push(at.last().unwrap() + g);
            }
            let at: Vec<u64> = if said.is_empty() { Vec::new() } else { at };
            let mut r = reply(&at, said);
            r.usage_completion_tokens = usage;
            if expects {
                r.expect = Some("(?i)paris".into());
            }
            r
        })
}

fn arb_load() -> impl Strategy<Value = Option<LoadSnapshot>> {
    proptest::option::of(
        (0.0f64..64.0, 1usize..64, proptest::option::of(0u64..1000)).prop_map(
            |(load1, ncpu, wait)| LoadSnapshot {
                load1,
                load5: load1,
                load15: load1,
                ncpu,
                taken: "before-serve".into(),
                during: wait.map(|w| summarize(&[], 1.0, Some((1000 - w, w)), vec![])),
            },
        ),
    )
}

#[derive(Debug, Clone)]
struct Run {
    replies: Vec<ReplyRecord>,
    log: &'static str,
    load: Option<LoadSnapshot>,
    floors: Floors,
}

fn arb_run() -> impl Strategy<Value = Run> {
    (
        vec(arb_reply(), 1..6),
        0usize..LOGS.len(),
        arb_load(),
        0.0f64..200.0,
        1.0f64..4000.0,
        proptest::option::of(0.0f64..=1.0),
        any::<bool>(),
    )
        .prop_map(
            |(mut replies, log, load, floor, limit, busy_skip, patterns)| {
                for (i, r) in replies.iter_mut().enumerate() {
                    r.index = i + 1;
                }
                Run {
                    replies,
                    log: LOGS[log],
                    load,
                    floors: Floors {
                        floor,
                        first_token_ms: limit,
                        fast_route: patterns.then(|| "route: npu-fast".to_string()),
                        slow_route: patterns.then(|| "route: cpu-fallback".to_string()),
                        busy_skip,
                        ..Floors::default()
                    },
                }
            },
        )
}

fn verdict_of(run: &Run, floors: &Floors, replies: &[ReplyRecord]) -> Verdict {
    let startup = Startup::Ready {
        after_ms: 1.0,
        probe: "/health".into(),
        not_ready_answers: 0,
    };
    let criteria = Criteria::new(floors.clone()).unwrap();
    let log = criteria.scan_log_text(run.log);
    let e = Evidence {
        serve_log: Some(&log),
        load: run.load.as_ref(),
        ..Evidence::of(replies, &startup)
    };
    judge(&e, &criteria)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// An empty reply is never excused: no PASS, whatever the floors, load or policy.
    #[test]
    fn no_pass_when_any_reply_is_empty(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        if run.replies.iter().any(|r| r.content.trim().is_empty()) {
            prop_assert_ne!(&v.outcome, &Outcome::Pass, "{}", v);
            prop_assert!(!matches!(v.outcome, Outcome::Skip { .. }), "{}", v);
        }
    }

    /// The slow route in the log is never excused.
    #[test]
    fn no_pass_when_the_slow_route_is_in_the_log(run in arb_run()) {
        let v = verdict_of(&run, &run.floors, &run.replies);
        if run.floors.slow_route.is_some() && run.log.contains("cpu-fallback") {
            prop_assert_eq!(&v.outcome, &Outcome::Fail, "{}", v);
        }
    }

    /// Raising the floor never turns a FAIL into a PASS.
    #[test]
    fn raising_the_floor_never_passes_a_fail(run in arb_run(), more in 0.0f64..500.0) {
        let before = verdict_of(&run, &run.floors, &run.replies);
        let raised = Floors { floor: run.floors.floor + more, ..run.floors.clone() };
        let after = verdict_of(&run, &raised, &run.replies);
        if before.outcome == Outcome::Fail {
            prop_assert_ne!(&after.outcome, &Outcome::Pass, "{}\nthen\n{}", before, after);
        }
    }

    /// Lowering the first-token limit never turns a FAIL into a PASS.
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

    /// A run judged live and again from its archived replies gives the same lines.
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

    /// The readers of untrusted bytes never panic: chunks, prompts, load.json, profiles.
    #[test]
    fn the_loaders_never_panic_on_garbage(bytes in vec(any::<u8>(), 0..400)) {
        let _ = crate::wire::openai::Chunk::parse(&bytes);
        let text = String::from_utf8_lossy(&bytes);
        let _ = crate::prompts::parse(&text);
        let _ = serde_json::from_slice::<LoadSnapshot>(&bytes);
        let _ = toml::from_str::<crate::profile::Profile>(&text);
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
