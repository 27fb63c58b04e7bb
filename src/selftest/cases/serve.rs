//! The serve's life: its startup, how it and the run ended, an interrupted run.

use crate::archive::check::Check;
use crate::archive::record::InterruptSignal;
use crate::archive::record::{Startup, StopRecord};
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, good, numbered};

/// A serve that exited before ready, or was never ready, and what its FAIL says.
pub(crate) fn startup() -> Vec<Case> {
    use Status::Fail;
    let mut cases = Vec::new();
    let mut c = base("a serve that exited before ready fails, quoting its log");
    c.replies = vec![];
    c.planned = Some(3);
    c.startup = Startup::Exited {
        status: "exit status: 3".into(),
    };
    c.log = Some("route: npu-fast\nerror: no device\n");
    c.expect = vec![(Check::Serve, Fail, "\"error: no device\"")];
    c.absent = vec![Check::Rate, Check::FirstToken, Check::Content];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a serve never ready fails");
    c.replies = vec![];
    c.planned = Some(3);
    c.startup = Startup::NotReady {
        timeout_s: 120.0,
        url: None,
        not_ready_answers: None,
        last_probe: None,
    };
    c.expect = vec![
        (Check::Serve, Fail, "not ready after 120 s"),
        (
            Check::Serve,
            Fail,
            "; if it was still starting, raise --ready-timeout (ready_timeout in a profile)",
        ),
    ];
    c.absent = vec![Check::Rate];
    c.outcome = Outcome::Fail;
    cases.push(c);

    // vLLM's CPU worker compiling its graphs when the limit ran out (issue 51): the warm-up is
    // named, with the flag that covers it, though later lines followed it.
    let mut c = base("a serve not ready while it warmed up is named as warming up");
    c.replies = vec![];
    c.planned = Some(3);
    c.startup = Startup::NotReady {
        timeout_s: 60.0,
        url: None,
        not_ready_answers: Some(0),
        last_probe: None,
    };
    c.log = Some(
        "(Worker pid=10348) INFO 12-06 01:29:21 [default_loader.py:501] Loading weights took 2.20 seconds\n\
         (Worker pid=10348) INFO 12-06 01:29:23 [cpu_model_runner.py:87] Warming up model for the compilation...\n\
         (EngineCore pid=10130) INFO 12-06 01:30:24 [shm_broadcast.py:871] No available shared memory broadcast block found in 60 seconds.\n",
    );
    c.expect = vec![(Check::Serve,
        Fail,
        "it was still warming up, its log's last warm-up line \"(Worker pid=10348) INFO 12-06 01:29:23 [cpu_model_runner.py:87] Warming up model for the compilation...\": raise --ready-timeout (ready_timeout in a profile) to cover its warm-up",
    )];
    c.refuse = vec![(Check::Serve, "if it was still starting")];
    c.absent = vec![Check::Rate];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base("a never-ready FAIL names the URL it polled and the answers it got");
    c.replies = vec![];
    c.planned = Some(3);
    c.startup = Startup::NotReady {
        timeout_s: 5.0,
        url: Some("http://127.0.0.1:8123/".into()),
        not_ready_answers: Some(48),
        last_probe: None,
    };
    c.expect = vec![(Check::Serve,
        Fail,
        "not ready after 5 s (neither http://127.0.0.1:8123/health nor http://127.0.0.1:8123/v1/models answered 200; it gave 48 not-ready answers)",
    )];
    c.absent = vec![Check::Rate];
    c.outcome = Outcome::Fail;
    cases.push(c);

    let mut c = base(
        "an attached serve that never answered says what the probe got, not that a log is empty",
    );
    c.replies = vec![];
    c.planned = Some(3);
    c.log = None;
    c.startup = Startup::NotReady {
        timeout_s: 2.0,
        url: Some("http://127.0.0.1:9".into()),
        not_ready_answers: Some(0),
        last_probe: Some(
            "the request failed: connecting to 127.0.0.1:9: Connection refused (os error 111)"
                .into(),
        ),
    };
    c.expect = vec![(Check::Serve,
        Fail,
        "not ready after 2 s (neither http://127.0.0.1:9/health nor http://127.0.0.1:9/v1/models answered 200; it gave no HTTP answer: the request failed: connecting to 127.0.0.1:9: Connection refused (os error 111))",
    )];
    c.refuse = vec![(Check::Serve, "log")];
    c.absent = vec![Check::Rate];
    c.outcome = Outcome::Fail;
    cases.push(c);

    cases
}

/// How the serve and the run ended: died during the replies, killed after its grace, processes
/// that left its group, a clean stop; a hold not acquired.
pub(crate) fn ending() -> Vec<Case> {
    use Status::{Fail, Info};
    let mut cases = Vec::new();
    let mut c = base("a serve that died during the replies fails content, saying so");
    c.replies = numbered(vec![good()]);
    c.planned = Some(3);
    c.serve_died = Some("the serve exited (exit status: 3) during reply 2");
    c.expect = vec![(
        Check::Content,
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
        ..StopRecord::default()
    });
    c.expect = vec![(
        Check::Stop,
        Info,
        "did not exit within the 10 s grace after SIGTERM",
    )];
    cases.push(c);

    let mut c = base("processes that left the serve's group are stopped and noted");
    c.stop = Some(StopRecord {
        killed: false,
        cut_short: false,
        escaped_killed: 1,
        exit_status: Some("exit status: 0".into()),
        ..StopRecord::default()
    });
    c.expect = vec![(
        Check::Stop,
        Info,
        "1 process(es) had left the serve's process group and were killed after it stopped",
    )];
    c.refuse = vec![(Check::Stop, "grace")];
    cases.push(c);

    let mut c = base("a clean stop adds no line");
    c.stop = Some(StopRecord {
        killed: false,
        cut_short: false,
        escaped_killed: 0,
        exit_status: Some("exit status: 0".into()),
        ..StopRecord::default()
    });
    c.expect = vec![];
    c.absent = vec![Check::Stop, Check::Serve];
    cases.push(c);

    let mut c = base("a hold not acquired is SKIP, never PASS or FAIL");
    c.replies = vec![];
    c.hold_not_acquired = Some("hold not acquired in 600 s; held by PID 4242");
    c.expect = vec![
        (Check::Hold, Info, "held by PID 4242"),
        (Check::Load, Info, "on 32 CPUs"),
    ];
    c.absent = vec![Check::Rate, Check::Route, Check::Content];
    c.outcome = Outcome::Skip {
        reason: "hold not acquired in 600 s; held by PID 4242".into(),
        advice: None,
    };
    cases.push(c);

    cases
}

/// An interrupted run.
pub(crate) fn interrupted() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut c = base("an interrupted run is INTERRUPTED, never PASS");
    c.interrupted = Some(InterruptSignal::TERM);
    c.expect = vec![];
    c.outcome = Outcome::Interrupted {
        signal: InterruptSignal::TERM,
    };
    cases.push(c);

    cases
}
