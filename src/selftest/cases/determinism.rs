//! The determinism line (issue 22): greedy answers held to each other, in and out of bursts.

use crate::archive::check::Check;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, load_per_cpu, with_burst};

/// The determinism line (issue 22).
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    // ---- Determinism (issue 22) ------------------------------------------------------------

    let mut c = base("identical greedy answers are deterministic");
    c.floors.deterministic = true;
    c.expect.push((Check::Determinism,
        Ok,
        "2 trials (2 repeats of 1 prompt), all identical to the first reply to their prompt: 0 differed, q = 0, 95% interval 0.000 to 0.842; these trials would have caught, with probability 0.95, a fault that shows in 78% of trials or more",
    ));
    cases.push(c);

    let mut c = base("determinism is judged only when asked");
    c.replies[2].content = "Paris!".into();
    c.absent = vec![Check::Serve, Check::Determinism];
    cases.push(c);

    let mut c = base("one answer that differs fails determinism, naming it and where");
    c.floors.deterministic = true;
    c.replies[2].content = "Paris!".into();
    c.expect = vec![(Check::Determinism,
        Fail,
        "1 of 2 trials (2 repeats of 1 prompt) differed from the first reply to their prompt: q = 0.5, 95% interval 0.013 to 0.987; first reply 3 (trial 2 of \"p\") differs from reply 1 at character 6 of the content: \"Paris!\" against \"Paris.\"",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("reasoning that differs fails determinism");
    c.floors.deterministic = true;
    for r in &mut c.replies {
        r.reasoning = "hm, France".into();
    }
    c.replies[1].reasoning = "hm, Spain".into();
    c.expect = vec![(
        Check::Determinism,
        Fail,
        "reply 2 (trial 1 of \"p\") differs from reply 1 at character 5 of the reasoning",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a burst that answers otherwise than alone fails batch invariance");
    c.floors.deterministic = true;
    with_burst(&mut c, true);
    c.replies[4].content = "Paris?".into();
    c.expect = vec![(Check::Determinism,
        Fail,
        "1 of 4 trials (2 repeats and 2 streams in bursts, over 1 prompt) differed from the first reply to their prompt: q = 0.25, 95% interval 0.006 to 0.806 (1 of the 2 in bursts); first burst 1 stream 2 (reply 5; trial 4 of \"p\", in a batch) differs from reply 1",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a determinism failure is never timing: --busy-skip on a busy box keeps it");
    c.floors.deterministic = true;
    c.floors.busy_skip = Some(0.5);
    c.load = Some(load_per_cpu(10.0));
    c.replies[2].content = "Paris!".into();
    c.expect = vec![(Check::Determinism, Fail, "1 of 2 trials")];
    c.refuse = vec![(Check::Load, "busy box")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a failed reply is no trial of determinism");
    c.floors.deterministic = true;
    c.replies[1].error = Some("the stream stalled".into());
    c.replies[1].content = "Pa".into();
    c.expect = vec![(Check::Determinism,
        Ok,
        "1 trial (1 repeat of 1 prompt), all identical to the first reply to their prompt: 0 differed, q = 0, 95% interval 0.000 to 0.975; these trials would have caught, with probability 0.95, a fault that shows in 95% of trials or more; 1 failed reply not compared",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("no prompt answered twice leaves determinism inconclusive");
    c.floors.deterministic = true;
    c.replies.truncate(1);
    c.expect = vec![(
        Check::Determinism,
        Status::Inconclusive,
        "no prompt was answered twice",
    )];
    c.outcome = Outcome::Inconclusive {
        reason: "determinism inconclusive".into(),
    };
    cases.push(c);

    cases
}
