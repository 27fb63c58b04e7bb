//! The load line, the rate floor, the first-token limit and the log's route patterns, each at
//! and past its boundary.

use crate::archive::check::Check;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, good, numbered, reply};

/// The plain lines, one thing changed from the good run: the load line, the rate at and under
/// its floor, the first-token limit, the log's route patterns.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    let mut c = base("the load line states the run's load");
    c.expect = vec![(Check::Load, Info, "1-minute load average 3.1 on 32 CPUs")];
    cases.push(c);

    let mut c = base("no load recorded, no load line");
    c.load = None;
    c.expect = vec![];
    c.absent = vec![Check::Load];
    cases.push(c);

    let mut c = base("rate exactly at the floor is ok");
    c.floors.floor = 100.0;
    c.expect = vec![(
        Check::Rate,
        Ok,
        "median 100.0 tok/s over 3 replies (floor 100.0",
    )];
    cases.push(c);

    let mut c = base("rate under the floor fails");
    c.floors.floor = 100.5;
    c.expect = vec![(
        Check::Rate,
        Fail,
        "median 100.0 tok/s over 3 replies (floor 100.5",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("rate is the median, not the best reply");
    let ten_tok_s: Vec<u64> = (0..11).map(|i| 200 + 100 * i).collect();
    c.replies = numbered(vec![reply(&ten_tok_s, "a"), reply(&ten_tok_s, "b"), good()]);
    c.expect = vec![(Check::Rate, Fail, "median 10.0 tok/s")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("first-token exactly at the limit is ok");
    c.floors.first_token_ms = 200.0;
    c.expect = vec![(
        Check::FirstToken,
        Ok,
        "median 200 ms over 3 replies (limit 200)",
    )];
    cases.push(c);

    let mut c = base("first-token over the limit fails");
    c.floors.first_token_ms = 199.0;
    c.expect = vec![(
        Check::FirstToken,
        Fail,
        "median 200 ms over 3 replies (limit 199)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a log without the fast route fails route");
    c.log = Some("loading\nready\n");
    c.expect = vec![(Check::Route, Fail, "does not name the fast route")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a log naming the slow route fails route");
    c.log = Some("route: npu-fast\nlayer 7: route: cpu-fallback\n");
    c.expect = vec![(Check::Route, Fail, "\"layer 7: route: cpu-fallback\"")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no route patterns make route info");
    c.floors.fast_route = None;
    c.floors.slow_route = None;
    c.log = Some("route: cpu-fallback\n");
    c.expect = vec![(Check::Route, Info, "no route patterns given")];
    cases.push(c);

    cases
}
