//! The content line, and how the figures read what the replies carried.

use crate::archive::check::Check;
use crate::archive::record::ChunkArrival;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, good, numbered, reply, MS};

/// What the replies said: empty, wrong, cut, another choice, broken, too few; a rate on few
/// tokens or on one chunk.
pub(crate) fn answers() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = base("an empty reply fails content and is no zero first-token");
    c.replies = numbered(vec![good(), reply(&[], ""), good()]);
    c.expect = vec![
        (Check::Content, Fail, "reply 2 has no content"),
        (Check::FirstToken, Ok, "over 2 of 3 replies"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a wrong answer fails content, quoted");
    let mut wrong = good();
    wrong.content = "London.".into();
    wrong.expect = Some("(?i)paris".into());
    c.replies = numbered(vec![good(), good(), wrong]);
    c.expect = vec![(
        Check::Content,
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
    c.expect = vec![(Check::Content,
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
    c.expect = vec![(Check::Content,
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
        Check::Rate,
        Ok,
        "; few tokens: each rate rests on a median of 6 gaps between tokens, under 10",
    )];
    c.outcome = Outcome::Pass;
    cases.push(c);

    let mut c = base("a rate on ten gaps or more has no few-tokens note");
    c.refuse = vec![(Check::Rate, "few tokens")];
    c.expect = vec![(Check::Rate, Ok, "median 100.0 tok/s")];
    c.outcome = Outcome::Pass;
    cases.push(c);

    let mut c = base("a reply that broke fails content");
    let mut broke = good();
    broke.error = Some("the stream broke: connection reset".into());
    c.replies = numbered(vec![good(), broke, good()]);
    c.expect = vec![(Check::Content, Fail, "reply 2 failed after saying")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("fewer replies than planned fail content");
    c.planned = Some(5);
    c.expect = vec![(Check::Content, Fail, "only 3 of 5 replies were made")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a one-chunk reply has no rate, and the line says so");
    c.replies = numbered(vec![good(), reply(&[150], "Paris")]);
    c.expect = vec![(Check::Rate, Ok, "over 1 of 2 replies")];
    cases.push(c);

    cases
}

/// How the chunks are read: usage counts the text can and cannot hold, an error mid-stream, a
/// reasoning-first reply, a role-only first chunk.
pub(crate) fn chunks() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = base("multi-token chunks rate on the usage count");
    // 6 events 50 ms apart, 4 tokens each: 20 tokens after the first event over 250 ms.
    let mut multi = reply(
        &[100, 150, 200, 250, 300, 350],
        "Paris is the capital of France, and has been for a while.",
    );
    multi.usage_completion_tokens = Some(24);
    c.replies = vec![multi];
    c.expect = vec![(Check::Rate, Ok, "median 80.0 tok/s")];
    cases.push(c);

    let mut c =
        base("usage the streamed text cannot hold is not believed: the rate is from the chunks");
    // 5 one-word events over 2 s claimed as 1,000,000 tokens: 399,633 tok/s on the claim.
    let mut lie = reply(&[100, 600, 1100, 1600, 2100], "Paris is the capital ok.");
    lie.usage_completion_tokens = Some(1_000_000);
    c.replies = numbered(vec![good(), lie, good()]);
    c.expect = vec![(Check::Rate,
        Ok,
        "each: 100.0, 2.0, 100.0); usage not believed for reply 2: it claimed 1000000 tokens for 5 chunks of 24 bytes of text; the rate is from the chunks",
    )];
    cases.push(c);

    let mut c = base("a lying usage count cannot lift a slow serve over the floor");
    let mut slow_lie = reply(&[100, 600, 1100, 1600, 2100], "Paris is the capital ok.");
    slow_lie.usage_completion_tokens = Some(1_000_000);
    c.replies = numbered(vec![slow_lie.clone(), slow_lie.clone(), slow_lie]);
    c.expect = vec![(
        Check::Rate,
        Fail,
        "median 2.0 tok/s over 3 replies (floor 60.0",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an error the serve reported mid-stream fails content, quoting it");
    let mut oom = good();
    oom.error = Some("the serve reported an error: \"CUDA out of memory\"".into());
    let mut only_error = reply(&[], "");
    only_error.error = Some("the serve reported an error: \"CUDA out of memory\"".into());
    c.replies = numbered(vec![good(), oom, only_error]);
    c.expect = vec![(Check::Content,
        Fail,
        "reply 2 failed after saying \"Paris.\": the serve reported an error: \"CUDA out of memory\"; reply 3 failed: the serve reported an error: \"CUDA out of memory\"",
    )];
    c.refuse = vec![(Check::Content, "has no content")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a reasoning-first reply times its first reasoning token");
    let mut thinking = good();
    thinking.chunks[0].content_chars = 0;
    thinking.chunks[0].reasoning_chars = 5;
    thinking.chunks[0].at_ns = 50 * MS;
    c.replies = vec![thinking];
    c.floors.floor = 0.0; // the longer span lowers the rate; this case is about first-token
    c.expect = vec![(Check::FirstToken, Ok, "median 50 ms")];
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
            tool_chars: 0,
        },
    );
    c.replies = vec![role];
    c.expect = vec![(Check::FirstToken, Ok, "median 200 ms")];
    cases.push(c);

    cases
}
