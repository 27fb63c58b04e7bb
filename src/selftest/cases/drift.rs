//! The drift lines over a soak of replies.

use crate::archive::check::Check;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, drifting, numbered, serve_waited, slow};

/// The drift line, and --busy-skip's threshold against the load line.
pub(crate) fn cases() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    let mut c = base("a rate that falls 20% over 12 replies fails drift");
    c.replies = drifting(12, -0.2);
    c.expect = vec![
        (Check::Rate, Ok, "over 12 replies"),
        (Check::Drift,
            Fail,
            "the decode rate fell 20.0% over 12 replies in 11 s (Sen's slope; Mann-Kendall p < 0.0001 reply by reply): beyond the 10% --max-drift",
        ),
        (Check::FirstTokenDrift, Info, "no drift: +0.0%"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a real fall within --max-drift is information");
    c.replies = drifting(12, -0.2);
    c.floors.max_drift = Some(0.21);
    c.expect = vec![(Check::Drift,
        Info,
        "the decode rate fell 20.0% over 12 replies in 11 s (Sen's slope; Mann-Kendall p < 0.0001 reply by reply): a real fall, within the 21% --max-drift",
    )];
    cases.push(c);

    let mut c = base("a rising rate is no drift failure");
    c.replies = drifting(12, 0.25);
    c.expect = vec![(
        Check::Drift,
        Info,
        "the decode rate rose 25.0% over 12 replies",
    )];
    cases.push(c);

    let mut c = base("seven replies are too few for a drift line");
    c.replies = drifting(7, -0.5);
    c.expect = vec![];
    c.absent = vec![Check::Drift, Check::FirstTokenDrift];
    cases.push(c);

    let mut c = base("a drift is timing: with --busy-skip on a busy box it is a SKIP");
    c.replies = drifting(12, -0.2);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![(Check::Drift, Fail, "the decode rate fell 20.0%")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    let mut c = base("with --busy-skip under its threshold a busy-box run stays FAIL");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.5);
    c.outcome = Outcome::Fail;
    // The load line reads the same threshold as the policy: 31% is under 50%.
    c.expect = vec![(
        Check::Load,
        Info,
        "the box was quiet (under the busy level of 50%), so the slowness is the serve's own",
    )];
    c.refuse = vec![(Check::Load, "likely cause")];
    cases.push(c);

    let mut c = base(
        "with --busy-skip under the default busy level, its threshold decides the load line too",
    );
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(60));
    c.floors.busy_skip = Some(0.02);
    c.expect = vec![(
        Check::Load,
        Info,
        "a busy box is the likely cause (at or above the busy level of 2%)",
    )];
    c.refuse = vec![(Check::Load, "the box was quiet")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 6% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    let mut c = base("with --busy-skip a pass stays a pass");
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![];
    cases.push(c);

    cases
}
