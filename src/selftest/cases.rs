//! Judging cases: the verdict function over hand-made runs, each line ok and FAIL, the
//! boundaries, and the load line. Shipped in the binary so `self-test` can run them on any
//! box; `cargo test` runs the same table.

use crate::record::{ChunkArrival, LoadSnapshot, ReplyRecord, Startup, StopRecord};
use crate::verdict::{self, Criteria, Evidence, Floors, Outcome, Status, Verdict};

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
    interrupted: Option<&'static str>,
    hold_not_acquired: Option<&'static str>,
    stop: Option<StopRecord>,
    serve_died: Option<&'static str>,
    floors: Floors,
    /// Lines that must be there: check, status, and a fragment of the text.
    expect: Vec<(&'static str, Status, &'static str)>,
    /// Checks that must have no line.
    absent: Vec<&'static str>,
    outcome: Outcome,
}

impl Case {
    /// Judge the case; `Err` says what the verdict got wrong.
    pub fn check(&self) -> Result<(), String> {
        let evidence = Evidence {
            replies: &self.replies,
            replies_planned: self.planned.unwrap_or(self.replies.len()),
            startup: &self.startup,
            serve_log: self.log,
            load: self.load.as_ref(),
            interrupted: self.interrupted,
            hold_not_acquired: self.hold_not_acquired,
            stop: self.stop.as_ref().map(|s| (s, 10.0)),
            serve_died: self.serve_died,
        };
        let criteria = Criteria::new(self.floors.clone()).map_err(|e| format!("{e:#}"))?;
        let v = verdict::judge(&evidence, &criteria);
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

fn find<'a>(v: &'a Verdict, check: &str) -> Option<&'a verdict::Line> {
    v.lines.iter().find(|l| l.check == check)
}

/// A reply sent at 0 whose text events arrive at `at_ms`, saying `content`.
fn reply(at_ms: &[u64], content: &str) -> ReplyRecord {
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
        error: None,
        metrics: None,
    }
}

/// 100 tok/s with the first token at 200 ms: 11 events, 10 ms apart after the first.
fn good() -> ReplyRecord {
    let at: Vec<u64> = (0..11).map(|i| 200 + 10 * i).collect();
    reply(&at, "Paris.")
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
    }
}

fn ready() -> Startup {
    Startup::Ready {
        after_ms: 1.0,
        probe: "/health".into(),
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
        floors: floors(),
        expect: vec![
            ("route", Status::Ok, "names the fast route"),
            ("rate", Status::Ok, "median 100.0 tok/s (floor 60.0"),
            ("first-token", Status::Ok, "median 200 ms (limit 600)"),
            ("content", Status::Ok, "3 replies, all with content"),
        ],
        absent: vec!["serve"],
        outcome: Outcome::Pass,
    }
}

/// Every judging case.
pub fn all() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = vec![base("a good run passes")];

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
    c.expect = vec![("rate", Ok, "median 100.0 tok/s (floor 100.0")];
    cases.push(c);

    let mut c = base("rate under the floor fails");
    c.floors.floor = 100.5;
    c.expect = vec![("rate", Fail, "median 100.0 tok/s (floor 100.5")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("rate is the median, not the best reply");
    let slow: Vec<u64> = (0..11).map(|i| 200 + 100 * i).collect();
    c.replies = numbered(vec![reply(&slow, "a"), reply(&slow, "b"), good()]);
    c.expect = vec![("rate", Fail, "median 10.0 tok/s")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("first-token exactly at the limit is ok");
    c.floors.first_token_ms = 200.0;
    c.expect = vec![("first-token", Ok, "median 200 ms (limit 200)")];
    cases.push(c);

    let mut c = base("first-token over the limit fails");
    c.floors.first_token_ms = 199.0;
    c.expect = vec![("first-token", Fail, "median 200 ms (limit 199)")];
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
    let mut multi = reply(&[100, 150, 200, 250, 300, 350], "Paris");
    multi.usage_completion_tokens = Some(24);
    c.replies = vec![multi];
    c.expect = vec![("rate", Ok, "median 80.0 tok/s")];
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
    c.startup = Startup::NotReady { timeout_s: 120.0 };
    c.expect = vec![("serve", Fail, "not ready after 120 s")];
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
    });
    c.expect = vec![(
        "stop",
        Info,
        "did not exit within the 10 s grace after SIGTERM",
    )];
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
    };
    cases.push(c);

    let mut c = base("an interrupted run is INTERRUPTED, never PASS");
    c.interrupted = Some("SIGTERM");
    c.expect = vec![];
    c.outcome = Outcome::Interrupted {
        signal: "SIGTERM".into(),
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
