//! How sure the rate is: its median's interval, a marginal floor, a thin figure.

use crate::archive::check::Check;
use crate::archive::record::ReplyRecord;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, good, numbered, reply};

/// The rate's 95% interval, a floor inside it (marginal), and a thin figure.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
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
        Check::Rate,
        Ok,
        "median 41.7 tok/s over 6 replies, 95% interval 20.0 to 100.0 (floor 10.0",
    )];
    c.refuse = vec![(Check::Rate, "marginal")];
    cases.push(c);

    let mut c = base(
        "a floor inside the median's interval is marginal; the verdict still follows the median",
    );
    c.replies = numbered(spread);
    c.floors.floor = 45.0;
    c.expect =
        vec![(Check::Rate,
        Fail,
        "; marginal: the floor is inside the median's 95% interval, so a re-run may flip this line",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("fewer than 3 timed replies make a thin figure");
    c.replies = numbered(vec![good(), good()]);
    c.expect = vec![
        (
            Check::Rate,
            Ok,
            "over 2 replies (floor 60.0; each: 100.0, 100.0); thin: fewer than 3 timed replies",
        ),
        (Check::FirstToken, Ok, "; thin: fewer than 3 timed replies"),
    ];
    cases.push(c);

    cases
}
