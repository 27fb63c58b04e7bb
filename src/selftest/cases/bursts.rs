//! Concurrent bursts: overlap, the aggregate rate, a failed stream.

use crate::archive::check::Check;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, serve_waited, with_burst};

/// Concurrent bursts: the overlap and aggregate lines.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    let mut c = base("streams of a burst decoding together pass overlap");
    with_burst(&mut c, true);
    c.expect = vec![
        (Check::Overlap,
            Ok,
            "the streams ran together: 2 of 2 streams decoding at once",
        ),
        // 20 tokens after the firsts over 100 ms: 200 tok/s, twice one stream's 100.
        (Check::Aggregate,
            Info,
            "median 200.0 tok/s over 1 burst of 2 streams, 2.00x the single-stream median 100.0 tok/s",
        ),
        (Check::Content, Ok, "5 replies, all with content"),
    ];
    cases.push(c);

    let mut c = base("streams run one after another fail overlap, and a busy box excuses it never");
    with_burst(&mut c, false);
    c.load = Some(serve_waited(900));
    c.floors.busy_skip = Some(0.1);
    c.expect = vec![
        (
            Check::Overlap,
            Fail,
            "the serve ran the streams one after another, not together",
        ),
        (Check::Rate, Ok, "over 5 replies"),
    ];
    c.refuse = vec![(Check::Load, "likely cause")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an aggregate under its floor fails, as timing a busy box may explain");
    with_burst(&mut c, true);
    c.floors.aggregate_floor = Some(200.5);
    c.load = Some(serve_waited(310));
    c.expect = vec![
        (
            Check::Aggregate,
            Fail,
            "below the floor: median 200.0 tok/s",
        ),
        (Check::Load, Info, "a busy box is the likely cause"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("an aggregate exactly at its floor and speedup is ok");
    with_burst(&mut c, true);
    c.floors.aggregate_floor = Some(200.0);
    c.floors.min_speedup = Some(2.0);
    c.expect = vec![(
        Check::Aggregate,
        Ok,
        "(floor 200.0; speedup at least 2.00x)",
    )];
    cases.push(c);

    let mut c = base("an aggregate short of its speedup fails");
    with_burst(&mut c, true);
    c.floors.min_speedup = Some(2.01);
    c.expect = vec![(Check::Aggregate, Fail, "short of the speedup")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases
}

/// A failed stream of a burst.
pub(crate) fn failed_stream() -> Vec<Case> {
    use Status::Fail;
    let mut cases = Vec::new();
    let mut c = base("a failed stream fails content naming its burst and stream");
    with_burst(&mut c, true);
    c.replies[4].error = Some("the stream broke: connection reset".into());
    c.expect = vec![(
        Check::Content,
        Fail,
        "burst 1 stream 2 (reply 5) failed after saying \"Paris.\": the stream broke",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases
}
