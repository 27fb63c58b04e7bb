//! The goodput line (`--slo`, issue 37): a reply at its target meets it, the share against
//! `--min-goodput` at and under it, a failed reply a miss, and a busy box that may excuse it.

use crate::archive::check::Check;
use crate::archive::record::SloFloors;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, good, numbered, reply, serve_waited, slow};

/// The base case's replies have a TPOT of (300 - 200) / 10 = 10 ms; `slow()`'s is 20 ms.
fn tpot(ms: f64, min: f64) -> SloFloors {
    SloFloors {
        tpot_ms: Some(ms),
        min_goodput: Some(min),
        ..SloFloors::default()
    }
}

/// The goodput line's rules.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = base("goodput: a reply exactly at its target meets it");
    c.floors.slo = tpot(10.0, 1.0);
    c.expect.push((Check::Goodput,
        Ok,
        "3 of 3 replies met every target (100%, 95% interval 29.2% to 100%; at least 100% required); targets tpot 10 ms",
    ));
    cases.push(c);

    let mut c = base("goodput: a share under --min-goodput FAILs and names the target missed");
    c.replies = numbered(vec![good(), good(), slow()]);
    c.floors.slo = tpot(10.0, 0.9);
    c.expect = vec![(Check::Goodput,
        Fail,
        "2 of 3 replies met every target (66.7%, 95% interval 9.4% to 99.2%; at least 90% required); missed: tpot 10 ms by 1 (reply 3, 20 ms)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("goodput: a share exactly at --min-goodput passes");
    c.replies = numbered(vec![good(), slow(), good(), slow()]);
    c.floors.slo = tpot(10.0, 0.5);
    c.expect = vec![(Check::Goodput, Ok, "2 of 4 replies met every target (50%")];
    cases.push(c);

    let mut c = base("goodput: a failed reply met no target");
    let mut failed = reply(&[200], "Paris.");
    failed.error = Some("the stream broke".into());
    c.replies = numbered(vec![good(), good(), failed]);
    c.floors.slo = tpot(10.0, 0.5);
    c.expect = vec![(Check::Goodput,
        Ok,
        "2 of 3 replies met every target (66.7%, 95% interval 9.4% to 99.2%; at least 50% required); targets tpot 10 ms; 1 failed reply met no target",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c =
        base("goodput: alone over its SLO on a busy box it is timing, and --busy-skip a SKIP");
    c.replies = numbered(vec![good(), good(), slow()]);
    c.floors.slo = tpot(10.0, 0.9);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![(Check::Goodput, Fail, "2 of 3 replies met every target")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    let mut c = base("goodput: no --slo, no line");
    c.absent = vec![Check::Goodput];
    cases.push(c);
    cases
}
