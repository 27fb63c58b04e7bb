//! Context depth (issue 35; docs/context.md): the fact at each depth within the serve's
//! context, what the serve did with the prompt past it, and the rates at depth against their
//! floors. The context line is never timing; context-rate is.

use crate::archive::check::Check;
use crate::archive::record::{ContextPlan, ContextSaid, DepthSlot, ReplyRecord, RunManifest};
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, greedy_manifest, numbered, reply, serve_waited};

/// The serve's context in these runs, as its /props says it.
const CONTEXT: u64 = 4096;
/// Where the serve said it.
const SAID_BY: &str = "GET /props default_generation_settings.n_ctx";
/// The depths asked: two within the context, one past it (so the limit is probed, at 1.5 times
/// the context).
const DEPTHS: [u32; 3] = [1024, 2048, 8192];
/// The probe's depth: 1.5 times the context.
const PROBE: u32 = 6144;

/// The fact's number at `depth` for its `replica`: one of its own, as a live run's prompts have.
fn code(depth: u32, replica: u32) -> String {
    format!("{}", 5000 + depth % 1000 + replica)
}

/// Reply `replica` at `depth`: the serve counted `depth` prompt tokens (the gate's estimate
/// too), its first token came `first_ms` after the send and 10 more `gap_ms` apart, saying
/// `content`.
fn deep(depth: u32, replica: u32, first_ms: u64, gap_ms: u64, content: &str) -> ReplyRecord {
    let at: Vec<u64> = (0..11).map(|i| first_ms + gap_ms * i).collect();
    ReplyRecord {
        depth: Some(DepthSlot {
            depth,
            replica,
            estimate: depth.into(),
            code: code(depth, replica),
            fact_at: u64::from(depth) / 2,
            limit_probe: false,
        }),
        usage_prompt_tokens: Some(depth.into()),
        ..reply(&at, content)
    }
}

/// [`deep`], giving its fact.
fn found(depth: u32, replica: u32, first_ms: u64, gap_ms: u64) -> ReplyRecord {
    let said = format!("The secret code is {}.", code(depth, replica));
    deep(depth, replica, first_ms, gap_ms, &said)
}

/// Three replies at 1,024 tokens, first token at 250 ms (prefill 4,096 tok/s), 100 tok/s; then
/// three at 2,048, first tokens at 900, 1,000 and 1,100 ms (prefill 2,276, 2,048 and 1,862
/// tok/s: a median of 2,048, exactly), 50 tok/s. Each gives its fact.
fn within() -> Vec<ReplyRecord> {
    let mut replies: Vec<ReplyRecord> = (0..3).map(|i| found(1024, i, 250, 10)).collect();
    replies.extend(
        [900, 1000, 1100]
            .into_iter()
            .zip(0..)
            .map(|(ms, i)| found(2048, i, ms, 20)),
    );
    replies
}

/// The probe of the limit, answered as if the prompt fitted: the serve counted all of it and
/// gave the fact.
fn probe() -> ReplyRecord {
    let mut r = found(PROBE, 0, 2000, 20);
    if let Some(s) = r.depth.as_mut() {
        s.limit_probe = true;
    }
    r
}

/// The probe refused as llama-server refuses it: HTTP 400 with its message.
fn refused() -> ReplyRecord {
    ReplyRecord {
        error: Some(
            "HTTP 400: \"the request exceeds the available context size, try increasing it\""
                .into(),
        ),
        content: String::new(),
        chunks: Vec::new(),
        usage_prompt_tokens: None,
        ..probe()
    }
}

/// The probe failed with `error`, nothing streamed.
fn probe_failed(error: &str) -> ReplyRecord {
    ReplyRecord {
        error: Some(error.into()),
        ..refused()
    }
}

/// run.json planning `depths`, three replies each at max_tokens 64, the serve's context
/// `context` as its /props said it (`None`: it said none, and no --max-context was given).
fn planned(depths: &[u32], context: Option<u64>) -> RunManifest {
    let mut m = greedy_manifest();
    m.context = Some(ContextPlan {
        depths: depths.to_vec(),
        replies_each: 3,
        serve_says: context.map(|tokens| ContextSaid {
            tokens,
            by: SAID_BY.into(),
        }),
        given: None,
        max_tokens: 64,
    });
    m
}

/// The base case's three replies, then `deep` (a live run makes the depth replies last), with
/// run.json planning [`DEPTHS`] against [`CONTEXT`]. The base case's lines still hold: the
/// replies at depth are set apart from rate, first-token and content.
fn context_case(name: &'static str, deep: Vec<ReplyRecord>) -> Case {
    let mut c = base(name);
    let mut replies = c.replies.clone();
    replies.extend(deep);
    c.replies = numbered(replies);
    c.planned = Some(3);
    c.manifest = Some(planned(&DEPTHS, Some(CONTEXT)));
    c
}

/// Every reply within the context and the probe `probe`.
fn with_probe(name: &'static str, probe: ReplyRecord) -> Case {
    let mut replies = within();
    replies.push(probe);
    context_case(name, replies)
}

/// The context line: the fact at every depth and missed in one reply, a failed reply, the
/// depths not asked, the context unknown, the serve's token count far from the estimate.
pub(crate) fn fact() -> Vec<Case> {
    use Status::{Fail, Inconclusive, Info, Ok};
    let mut cases = Vec::new();
    let mut c = with_probe(
        "the fact at every depth and the limit refused with a message pass context",
        refused(),
    );
    c.expect.extend([
        (Check::Context,
            Ok,
            "1,024 tokens: prefill 4,096 tok/s, decode 100.0 tok/s, the fact found; 2,048 tokens: prefill 2,048 tok/s, decode 50.0 tok/s, the fact found; past the context (4,096 tokens), a prompt of about 6,144 was refused: HTTP 400: \"the request exceeds",
        ),
        (Check::ContextRate,
            Info,
            "no --prefill-floor, --depth-floor or --baseline: the rates are the context line's, not judged",
        ),
    ]);
    c.refuse = vec![(Check::Context, "estimate")];
    cases.push(c);

    let mut replies = within();
    replies[4] = deep(
        2048,
        1,
        1000,
        20,
        "I could not find a secret code in the text.",
    );
    replies.push(refused());
    let mut c = context_case(
        "a reply at depth that did not give the fact fails context, quoted",
        replies,
    );
    c.expect = vec![(Check::Context,
        Fail,
        "reply 8 did not give the fact (5049): \"I could not find a secret code in the text.\"; 1,024 tokens: prefill 4,096 tok/s, decode 100.0 tok/s, the fact found; 2,048 tokens: prefill 2,048 tok/s, decode 50.0 tok/s, the fact found in 2 of 3",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut replies = within();
    replies[2] = ReplyRecord {
        error: Some("no whole answer within 60 s".into()),
        ..found(1024, 2, 250, 10)
    };
    replies.push(refused());
    let mut c = context_case(
        "a failed reply at depth fails context, even with the fact in its part",
        replies,
    );
    c.expect = vec![(Check::Context,
        Fail,
        "reply 6 failed: no whole answer within 60 s; 1,024 tokens: prefill 4,096 tok/s, decode 100.0 tok/s, the fact found in 2 of 3",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // The run ended after the first depth: the second was planned, within the context, and
    // never asked. No depth is past the context, so no probe was planned.
    let mut c = context_case(
        "a depth within the context with no replies leaves context inconclusive",
        within().into_iter().take(3).collect(),
    );
    c.manifest = Some(planned(&[1024, 2048], Some(CONTEXT)));
    c.expect = vec![(Check::Context,
        Inconclusive,
        "1,024 tokens: prefill 4,096 tok/s, decode 100.0 tok/s, the fact found; the limit (4,096 tokens, GET /props default_generation_settings.n_ctx) was not probed: no depth is past it; not asked (the run ended first): 2,048",
    )];
    c.outcome = Outcome::Inconclusive {
        reason: "context inconclusive".into(),
    };
    cases.push(c);

    let mut c = context_case(
        "a limit probe planned and not made leaves context inconclusive",
        within(),
    );
    c.expect = vec![(Check::Context,
        Inconclusive,
        "the fact found; not asked (the run ended first): the limit probe (about 6,144 tokens, past the context of 4,096)",
    )];
    c.refuse = vec![(Check::Context, "no depth is past it")];
    c.outcome = Outcome::Inconclusive {
        reason: "context inconclusive".into(),
    };
    cases.push(c);

    cases.extend(fact_counted());
    cases
}

/// The context line when the serve says no context or miscounts the prompt, and on a busy box.
fn fact_counted() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    // A serve that says no context and sends no usage: every depth is asked, the rates rest on
    // the gate's estimate, and nothing is probed.
    let mut replies = within();
    for r in &mut replies {
        r.usage_prompt_tokens = None;
    }
    let mut c = context_case(
        "with no context known the limit is said not probed and context passes",
        replies,
    );
    c.manifest = Some(planned(&DEPTHS[..2], None));
    c.expect = vec![(Check::Context,
        Ok,
        "2,048 tokens: prefill 2,048 tok/s, decode 50.0 tok/s, the fact found (prompt tokens estimated: the serve sent no usage.prompt_tokens); the limit was not probed: the serve does not say its context and no --max-context was given",
    )];
    cases.push(c);

    // At 1,024 the serve counted 512, exactly half the estimate: its count is believed
    // (prefill 2,048 tok/s, not the estimate's 4,096). At 2,048 it counted 1,023, under half:
    // a tokenizer or template problem, and the estimate carries the rates (2,048 tok/s, not
    // 1,023).
    let mut replies = within();
    for r in &mut replies {
        let at_1024 = r.depth.as_ref().is_some_and(|s| s.depth == 1024);
        r.usage_prompt_tokens = Some(if at_1024 { 512 } else { 1023 });
    }
    replies.push(refused());
    let mut c = context_case(
        "prompt tokens under half the estimate are not believed: the rates use the estimate and say so",
        replies,
    );
    c.expect = vec![(Check::Context,
        Ok,
        "1,024 tokens: prefill 2,048 tok/s, decode 100.0 tok/s, the fact found; 2,048 tokens: prefill 2,048 tok/s, decode 50.0 tok/s, the fact found (the serve counted 1,023 prompt tokens for about 2,048 by the gate's estimate, under half: a tokenizer or template problem; the rates use the estimate); past the context",
    )];
    cases.push(c);

    let mut replies = within();
    replies[4] = deep(
        2048,
        1,
        1000,
        20,
        "I could not find a secret code in the text.",
    );
    replies.push(refused());
    let mut c = context_case(
        "a missed fact on a busy box stays FAIL: context is never excused",
        replies,
    );
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![
        (Check::Context, Fail, "reply 8 did not give the fact (5049)"),
        (Check::Load, Info, "31% of the time it was ready to run"),
    ];
    c.refuse = vec![(Check::Load, "busy box")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases
}

/// What the serve did with the prompt past its context: refused with a message (HTTP or an
/// error event) or cut passes; refused without a message, answered as if it fitted, garbled,
/// crashed fail.
pub(crate) fn limit() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = with_probe(
        "the limit probe refused with no body fails context",
        probe_failed("HTTP 400: (no body)"),
    );
    c.expect = vec![(Check::Context,
        Fail,
        "past the context (4,096 tokens), a prompt of about 6,144 was refused without a message: HTTP 400: (no body)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = with_probe(
        "the limit probe refused by an error event with a message passes context",
        probe_failed("the serve reported an error: \"context length exceeded\""),
    );
    c.expect = vec![(Check::Context,
        Ok,
        "a prompt of about 6,144 was refused: the serve reported an error: \"context length exceeded\"",
    )];
    cases.push(c);

    let mut c = with_probe(
        "the limit probe refused by an error event with no data fails context",
        probe_failed("the serve reported an error (an `event: error` with no data)"),
    );
    c.expect = vec![(Check::Context,
        Fail,
        "a prompt of about 6,144 was refused without a message: the serve reported an error (an `event: error` with no data)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // One token past the context, counted by the serve: it did not cut the prompt.
    let mut c = with_probe(
        "the limit probe answered as if it fitted fails context",
        ReplyRecord {
            usage_prompt_tokens: Some(CONTEXT + 1),
            ..probe()
        },
    );
    c.expect = vec![(Check::Context,
        Fail,
        "past the context (4,096 tokens), a prompt of about 6,144 was answered as if it fitted: \"The secret code is 5144.\"",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = with_probe(
        "the limit probe answered with garbled text fails context",
        ReplyRecord {
            content: "!!!!".repeat(16),
            ..probe()
        },
    );
    c.expect = vec![(
        Check::Context,
        Fail,
        "a prompt of about 6,144 was answered with garbled text: \"!!!!!!!!",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // The serve counted the context's tokens exactly: it cut the prompt to fit, and said so.
    let mut c = with_probe(
        "the limit probe answered with the prompt cut to the context passes context",
        ReplyRecord {
            usage_prompt_tokens: Some(CONTEXT),
            content: "I could not find a secret code in the text.".into(),
            ..probe()
        },
    );
    c.expect = vec![(Check::Context,
        Ok,
        "a prompt of about 6,144 was answered with the prompt cut to 4,096 tokens (the serve's count)",
    )];
    cases.push(c);

    // The serve died of the probe, its last reply: content says the death, context its cause.
    let died = "the serve exited (signal: 11) during reply 10";
    let mut c = with_probe(
        "the limit probe that crashed the serve fails context",
        probe_failed("the stream ended without a finish_reason or [DONE]"),
    );
    c.serve_died = Some(died);
    c.expect = vec![
        (Check::Context,
            Fail,
            "past the context (4,096 tokens), a prompt of about 6,144 crashed the serve: the serve exited (signal: 11) during reply 10",
        ),
        (Check::Content, Fail, died),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases
}

/// context-rate: --prefill-floor at every depth (its median), --depth-floor at the deepest,
/// each on its boundary; timing, so a busy box may excuse it.
pub(crate) fn rates() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = with_probe(
        "a prefill floor just over the slowest depth's median fails context-rate",
        refused(),
    );
    c.floors.context.prefill_floor = Some(2049.0);
    c.expect = vec![
        (
            Check::ContextRate,
            Fail,
            "prefill under the floor 2,049 tok/s: 2,048 tok/s at 2,048 tokens",
        ),
        (Check::Context, Ok, "the fact found"),
    ];
    c.refuse = vec![(Check::ContextRate, "1,024 tokens")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // One reply at 2,048 is at 1,862 tok/s, under the floor: the depth's median is judged.
    let mut c = with_probe(
        "a prefill floor at the slowest depth's median passes context-rate",
        refused(),
    );
    c.floors.context.prefill_floor = Some(2048.0);
    c.expect = vec![(
        Check::ContextRate,
        Ok,
        "prefill at every depth over the floor 2,048 tok/s",
    )];
    cases.push(c);

    // 1,024 tokens decode at 100 tok/s, over the floor; the deepest, 2,048, at 50.
    let mut c = with_probe(
        "a depth floor over the deepest depth's decode fails context-rate",
        refused(),
    );
    c.floors.context.depth_floor = Some(60.0);
    c.expect = vec![(
        Check::ContextRate,
        Fail,
        "decode at 2,048 tokens 50.0 tok/s, under the floor 60.0 tok/s",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = with_probe(
        "a depth floor at the deepest depth's decode passes context-rate",
        refused(),
    );
    c.floors.context.depth_floor = Some(50.0);
    c.expect = vec![(
        Check::ContextRate,
        Ok,
        "decode at 2,048 tokens 50.0 tok/s over the floor 50.0 tok/s",
    )];
    cases.push(c);

    // Every depth past the context: the probe alone, and nothing for the floors to judge.
    let mut c = context_case(
        "floors with no depth within the context to judge fail context-rate",
        vec![refused()],
    );
    c.manifest = Some(planned(&[8192], Some(CONTEXT)));
    c.floors.context.prefill_floor = Some(1000.0);
    c.expect = vec![
        (
            Check::ContextRate,
            Fail,
            "no depth within the context was asked: the floors judge nothing",
        ),
        (Check::Context, Ok, "a prompt of about 6,144 was refused"),
    ];
    c.refuse = vec![(Check::ContextRate, "every depth")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = with_probe(
        "a prefill floor missed on a busy box is timing: with --busy-skip it is a SKIP",
        refused(),
    );
    c.floors.context.prefill_floor = Some(2049.0);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![
        (
            Check::ContextRate,
            Fail,
            "prefill under the floor 2,049 tok/s",
        ),
        (Check::Context, Ok, "the fact found"),
    ];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    cases
}
