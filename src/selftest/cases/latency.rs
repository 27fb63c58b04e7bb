//! The latency line's percentiles, warm-up replies, and the first content token.

use crate::archive::check::Check;
use crate::archive::record::{FirstTokenOf, ReplyRecord};
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, numbered, reply};

/// The latency line, and the warm-up reply.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Info};
    let mut cases = Vec::new();
    let mut c = base("the latency line gives the peers' percentiles");
    // First tokens at 100, 200 and 300 ms, then 10 tokens 10 ms apart: by definition 7 the
    // TTFT p90 is 280 (h = 2 x 0.9 = 1.8), where a nearest-rank p90 would be 300.
    let spread: Vec<ReplyRecord> = [100, 200, 300]
        .iter()
        .map(|&first| reply(&(0..11).map(|i| first + 10 * i).collect::<Vec<_>>(), "a"))
        .collect();
    c.replies = numbered(spread);
    c.expect = vec![(
        Check::Latency,
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
        Check::Latency,
        Info,
        "TTFT p50 200 ms, p90 200, p99 200; ITL p50 10.0 ms",
    ));
    c.refuse = vec![(Check::Rate, "10.0"), (Check::Latency, "2000")];
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
        Check::Content,
        Fail,
        "the warm-up reply 1 failed: the serve answered 503; 3 replies, all with content",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases.extend(first_content_token());
    cases
}

/// A reply that reasons at 200, 210 and 220 ms, then answers from 800 ms, 10 ms a token.
fn reasoning_first() -> ReplyRecord {
    let mut at = vec![200, 210, 220];
    at.extend((0..10).map(|i| 800 + 10 * i));
    let mut r = reply(&at, "Paris.");
    for c in &mut r.chunks[..3] {
        (c.content_chars, c.reasoning_chars) = (0, 6);
    }
    r
}

/// The first content token (issue 37, item 5): TTFO on the latency line where replies reason
/// first, and `--first-token-of content` holding it, not the reasoning's first token, to the
/// limit.
fn first_content_token() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    let mut c = base("first-token of any holds the first token, reasoning included");
    c.replies = numbered(vec![reasoning_first(); 3]);
    // The wait for the answer is no decode: the rate is not this case's business.
    c.floors.floor = 10.0;
    c.expect = vec![
        (
            Check::FirstToken,
            Ok,
            "median 200 ms over 3 replies (limit 600)",
        ),
        (
            Check::Latency,
            Info,
            "TTFT p50 200 ms, p90 200, p99 200; TTFO p50 800 ms, p90 800, p99 800; ITL",
        ),
        (
            Check::Latency,
            Info,
            "; TTFO is to the first content token: 3 of 3 replies reasoned first",
        ),
    ];
    cases.push(c);

    let mut c = base("first-token of content holds the first content token to the limit");
    c.replies = numbered(vec![reasoning_first(); 3]);
    c.floors.floor = 10.0;
    c.floors.first_token_of = FirstTokenOf::Content;
    c.expect = vec![(
        Check::FirstToken,
        Fail,
        "first content token median 800 ms over 3 replies (limit 600)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("first-token of content of a reply without reasoning is its first token");
    c.floors.first_token_of = FirstTokenOf::Content;
    c.expect = vec![(
        Check::FirstToken,
        Ok,
        "first content token median 200 ms over 3 replies (limit 600)",
    )];
    c.refuse = vec![(Check::Latency, "TTFO")];
    cases.push(c);
    cases
}
