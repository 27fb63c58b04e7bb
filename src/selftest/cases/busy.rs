//! The busy box: what the load line blames, and what a busy box may excuse.

use crate::archive::check::Check;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, load_per_cpu, numbered, reply, serve_waited, slow};

/// The busy box: the load line says whose the slowness is, what a busy box excuses (timing) and
/// what it never does, and --busy-skip.
pub(crate) fn cases() -> Vec<Case> {
    let mut cases = blamed();
    cases.extend(excused());
    cases
}

/// What the load line blames: nothing on a pass, the busy box or the serve on a timing failure,
/// at the wait level's boundary.
fn blamed() -> Vec<Case> {
    use Status::{Fail, Info};
    let mut cases = Vec::new();
    let mut c = base("a pass states the load and blames nothing");
    c.load = Some(serve_waited(310));
    c.expect = vec![(
        Check::Load,
        Info,
        "during the replies the serve waited for a CPU 31% of the time it was ready to run",
    )];
    c.refuse = vec![(Check::Load, "busy box"), (Check::Load, "quiet")];
    cases.push(c);

    let mut c = base(
        "the busy-box row is named: fast route, right answers, 50 tok/s under 60, load 10 per CPU",
    );
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(load_per_cpu(10.0));
    c.expect = vec![
        (Check::Rate, Fail, "median 50.0 tok/s over 3 replies (floor 60.0"),
        (Check::Load, Info, "a busy box is the likely cause (the load was 10.0 per CPU, at or above the busy level of 1.0 per CPU): re-run on a quiet box"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a busy box by the serve's own wait names what used the CPU");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(310));
    c.expect = vec![(Check::Load,
        Info,
        "31% of the time it was ready to run; a busy box is the likely cause (at or above the busy level of 10%): re-run on a quiet box; most CPU during the replies: cc1plus x10 850%, ld 40%",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("the wait level is a boundary: 10% is busy");
    c.replies = numbered(vec![slow()]);
    c.load = Some(serve_waited(100));
    c.expect = vec![(Check::Load, Info, "a busy box is the likely cause")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("the wait level is a boundary: 9.9% is quiet");
    c.replies = numbered(vec![slow()]);
    c.load = Some(serve_waited(99));
    c.expect = vec![(
        Check::Load,
        Info,
        "the box was quiet (under the busy level of 10%), so the slowness is the serve's own",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("first-token alone over its limit counts as timing-only");
    c.floors.first_token_ms = 150.0;
    c.load = Some(load_per_cpu(10.0));
    c.expect = vec![
        (
            Check::FirstToken,
            Fail,
            "median 200 ms over 3 replies (limit 150)",
        ),
        (Check::Load, Info, "a busy box is the likely cause"),
    ];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("timing alone failing on a quiet box blames the serve");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(load_per_cpu(0.1));
    c.expect = vec![(Check::Load,
        Info,
        "the box was quiet (the load was 0.1 per CPU, under the busy level of 1.0 per CPU), so the slowness is the serve's own",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    cases
}

/// What a busy box never excuses (the route, content, a serve kept from a CPU by its own
/// processes), and --busy-skip.
fn excused() -> Vec<Case> {
    use Status::{Fail, Info};
    let mut cases = Vec::new();
    let mut c = base("the slow route is never excused by a busy box");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.log = Some("route: npu-fast\nroute: cpu-fallback\n");
    c.load = Some(load_per_cpu(10.0));
    c.floors.busy_skip = Some(0.5);
    c.expect = vec![(Check::Route, Fail, "names the slow route")];
    c.refuse = vec![(Check::Load, "busy box"), (Check::Load, "quiet")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("empty content is never excused by a busy box");
    c.replies = numbered(vec![slow(), reply(&[], ""), slow()]);
    c.load = Some(load_per_cpu(10.0));
    c.floors.busy_skip = Some(0.5);
    c.expect = vec![(Check::Content, Fail, "reply 2 has no content")];
    c.refuse = vec![(Check::Load, "busy box")];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("with --busy-skip the busy-box run is SKIP");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    c.load = Some(serve_waited(310));
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![(Check::Rate, Fail, "median 50.0 tok/s")];
    c.outcome = Outcome::Skip {
        reason: "busy box: the serve waited for a CPU 31% of the time it was ready to run".into(),
        advice: Some("re-run on a quiet box".into()),
    };
    cases.push(c);

    // The serve waited for a CPU, but nothing outside its tree used one: its own spinning
    // helpers took it (issue 30). No excuse, and the load line says whose the slowness is.
    let mut c = base("a serve kept from a CPU by its own processes is never excused");
    c.replies = numbered(vec![slow(), slow(), slow()]);
    let mut own = serve_waited(310);
    if let Some(d) = own.during.as_mut() {
        d.top.clear();
        d.others_cpu_pct = Some(12.0);
    }
    c.load = Some(own);
    c.floors.busy_skip = Some(0.2);
    c.expect = vec![
        (Check::Rate, Fail, "median 50.0 tok/s"),
        (Check::Load,
            Info,
            "but processes outside the serve's tree used only 12% of one CPU during the replies (a busy box takes 320%): the serve's own processes kept it from a CPU, so the slowness is the serve's own",
        ),
    ];
    c.refuse = vec![(Check::Load, "likely cause")];
    c.outcome = Outcome::Fail;
    cases.push(c);
    cases
}
