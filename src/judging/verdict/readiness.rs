//! The lines of a serve's readiness (issue 34; docs/footprint.md): how long it took from launch
//! to ready (`startup`), how slow its first reply's first token was beside the warm ones
//! (`cold-reply`), and how slow a reply after an idle wait was (`idle`). All three are timing:
//! a busy box may explain them.

use crate::archive::record::{
    Check, Figures, FootprintFigures, FootprintFloors, Line, ReplyRecord, Startup, Status, Unit,
};
use crate::judging::measure::{measure, median};
use crate::judging::verdict::words::{plural, trimmed};

/// `--max-startup-regression`'s default: half again the baseline's time to ready.
pub const DEFAULT_MAX_STARTUP_REGRESSION: f64 = 0.5;

/// A time in ms as it reads best: `850 ms`, `2.1 s`, `95 s`.
fn time_said(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if ms < 10_000.0 {
        format!("{} s", trimmed(ms / 1000.0, 2))
    } else {
        format!("{} s", trimmed(ms / 1000.0, 1))
    }
}

/// The startup line: launch to ready, held to `--ready-limit` where given and to the
/// baseline's time to ready (`baseline`, where it was launched and ready) as a ratio, one
/// launch a side. `launched` says whether the gate launched the serve: an attached one's time
/// is from the gate's first probe, not a launch, and is information. `None` where the serve
/// was never ready (the serve line says why).
pub fn startup_line(
    startup: &Startup,
    launched: bool,
    baseline: Option<&Startup>,
    floors: &FootprintFloors,
) -> Option<Line> {
    let Startup::Ready {
        after_ms,
        not_ready_answers,
        ..
    } = startup
    else {
        return None;
    };
    let ready = *after_ms;
    let answers = match not_ready_answers {
        0 => String::new(),
        n => format!(
            ", {} first",
            plural(*n as usize, "not-ready answer", "not-ready answers")
        ),
    };
    if !launched {
        let text = format!(
            "attached: the serve answered its first probe in {}{answers}; its launch was not the gate's to time",
            time_said(ready)
        );
        return Some(Line::new(Check::Startup, Status::Info, text));
    }
    let mut text = format!("ready {} after launch{answers}", time_said(ready));
    let mut status = Status::Info;
    let limit = floors.ready_limit_ms;
    if let Some(l) = limit {
        let over = ready > l;
        text.push_str(&format!(" (limit {})", time_said(l)));
        status = if over { Status::Fail } else { Status::Ok };
    }
    let theirs = match baseline {
        Some(Startup::Ready { after_ms, .. }) if *after_ms > 0.0 => Some(*after_ms),
        _ => None,
    };
    let most = floors
        .max_startup_regression
        .unwrap_or(DEFAULT_MAX_STARTUP_REGRESSION);
    let ratio = theirs.map(|t| ready / t);
    if let (Some(t), Some(r)) = (theirs, ratio) {
        let over = r > 1.0 + most;
        text.push_str(&format!(
            "; {}x the baseline's {} (one launch a side; limit {}x)",
            trimmed(r, 2),
            time_said(t),
            trimmed(1.0 + most, 2)
        ));
        status = match (status, over) {
            (_, true) | (Status::Fail, _) => Status::Fail,
            _ => Status::Ok,
        };
    }
    Some(Line::new(Check::Startup, status, text).with(Figures {
        unit: Some(Unit::Milliseconds),
        limit,
        ratio,
        footprint: Some(FootprintFigures {
            ready_ms: Some(ready),
            baseline_ready_ms: theirs,
            max_regression: theirs.map(|_| most),
            ..FootprintFigures::default()
        }),
        ..Figures::default()
    }))
}

/// The median first token of the judged `replies` other than `except` (the reply set beside
/// them), and how many it rests on.
fn warm_median(replies: &[ReplyRecord], except: usize) -> (Option<f64>, usize) {
    let warm: Vec<f64> = replies
        .iter()
        .filter(|r| !r.set_apart() && r.index != except)
        .filter_map(|r| measure(r).first_token_ms)
        .collect();
    (median(&warm), warm.len())
}

/// `then a median of 120 ms over 9 replies`, or that there is none.
fn beside(median: Option<f64>, n: usize) -> String {
    match median {
        Some(m) => format!(
            "a warm median of {} over {}",
            time_said(m),
            plural(n, "reply", "replies")
        ),
        None => "no warm reply to set it beside".to_string(),
    }
}

/// The cold-reply line: the run's first reply (the first warm-up where there are warm-ups),
/// its first token beside the warm median of the judged replies; held to
/// `--cold-first-token-ms` where given, else information. `None` without replies.
pub fn cold_reply_line(replies: &[ReplyRecord], floors: &FootprintFloors) -> Option<Line> {
    let first = replies.iter().min_by_key(|r| r.index)?;
    let cold = measure(first).first_token_ms;
    let (warm, n) = warm_median(replies, first.index);
    let limit = floors.cold_first_token_ms;
    let (status, said) = match (cold, limit) {
        (None, Some(_)) => (
            Status::Fail,
            format!("the first reply ({}) gave no token", first.index),
        ),
        (None, None) => (
            Status::Info,
            format!("the first reply ({}) gave no token", first.index),
        ),
        (Some(c), Some(l)) => (
            if c <= l { Status::Ok } else { Status::Fail },
            format!(
                "cold first token {}, {} (limit {})",
                time_said(c),
                beside(warm, n),
                time_said(l)
            ),
        ),
        (Some(c), None) => (
            Status::Info,
            format!("cold first token {}, {}", time_said(c), beside(warm, n)),
        ),
    };
    Some(Line::new(Check::ColdReply, status, said).with(Figures {
        unit: Some(Unit::Milliseconds),
        median: warm,
        values: Some(n),
        limit,
        footprint: Some(FootprintFigures {
            cold_ms: cold,
            ..FootprintFigures::default()
        }),
        ..Figures::default()
    }))
}

/// The idle line: the idle probe's first token held to `--first-token-ms` (`limit_ms`), beside
/// the warm median, with how long the serve had been idle. `None` without a probe.
pub fn idle_line(replies: &[ReplyRecord], limit_ms: f64) -> Option<Line> {
    let probe = replies.iter().find(|r| r.idle_probe)?;
    let idle_ms = replies
        .iter()
        .filter(|r| r.index < probe.index)
        .map(|r| r.end_ns)
        .max()
        .map(|end| probe.sent_ns.saturating_sub(end) as f64 / 1e6);
    let (warm, n) = warm_median(replies, probe.index);
    let after = idle_ms.map_or(String::new(), |ms| format!(" after {} idle", time_said(ms)));
    let first = measure(probe).first_token_ms;
    let (status, text) = match first {
        Some(f) => (
            if f <= limit_ms {
                Status::Ok
            } else {
                Status::Fail
            },
            format!(
                "first token {}{after}, {} (limit {})",
                time_said(f),
                beside(warm, n),
                time_said(limit_ms)
            ),
        ),
        None => (
            Status::Fail,
            format!(
                "the idle probe (reply {}){after} gave no token",
                probe.index
            ),
        ),
    };
    Some(Line::new(Check::Idle, status, text).with(Figures {
        unit: Some(Unit::Milliseconds),
        median: warm,
        values: Some(n),
        limit: Some(limit_ms),
        footprint: Some(FootprintFigures {
            idle_ms: first,
            idle_wait_ms: idle_ms,
            ..FootprintFigures::default()
        }),
        ..Figures::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::cases::reply;

    fn ready(ms: f64) -> Startup {
        Startup::Ready {
            after_ms: ms,
            probe: "/health".into(),
            not_ready_answers: 3,
        }
    }

    /// Reply `index` whose first token comes `first_ms` after its send at `sent_ms`.
    fn at(index: usize, sent_ms: u64, first_ms: u64) -> ReplyRecord {
        let mut r = reply(&[first_ms, first_ms + 10, first_ms + 20], "Paris.");
        r.index = index;
        let shift = sent_ms * 1_000_000;
        r.sent_ns = shift;
        r.end_ns += shift;
        for c in &mut r.chunks {
            c.at_ns += shift;
        }
        r
    }

    #[test]
    fn startup_is_held_to_its_limit_and_the_baseline_s_as_a_stated_ratio() {
        let none = FootprintFloors::default();
        let l = startup_line(&ready(2100.0), true, None, &none).unwrap();
        assert_eq!(l.status, Status::Info);
        assert_eq!(
            l.text,
            "ready 2.1 s after launch, 3 not-ready answers first"
        );
        let limited = FootprintFloors {
            ready_limit_ms: Some(2000.0),
            ..FootprintFloors::default()
        };
        let l = startup_line(&ready(2100.0), true, None, &limited).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(l.text.ends_with("(limit 2 s)"), "{}", l.text);
        assert_eq!(
            startup_line(&ready(2000.0), true, None, &limited)
                .unwrap()
                .status,
            Status::Ok
        );
        // Against the baseline: 1.6x its time over the default 1.5x fails; 1.4x passes.
        let l = startup_line(&ready(1600.0), true, Some(&ready(1000.0)), &none).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text
                .ends_with("; 1.6x the baseline's 1 s (one launch a side; limit 1.5x)"),
            "{}",
            l.text
        );
        assert_eq!(l.figures.as_ref().unwrap().ratio, Some(1.6));
        let l = startup_line(&ready(1400.0), true, Some(&ready(1000.0)), &none).unwrap();
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        // Within the ratio, over the limit: still a FAIL.
        let l = startup_line(&ready(2100.0), true, Some(&ready(2000.0)), &limited).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        // An attached serve's time is not a launch's: information whatever the limit.
        let l = startup_line(&ready(50.0), false, Some(&ready(10.0)), &limited).unwrap();
        assert_eq!(l.status, Status::Info, "{}", l.text);
        assert!(l.text.starts_with("attached: "), "{}", l.text);
        let exited = Startup::Exited {
            status: "exit status: 1".into(),
        };
        assert_eq!(startup_line(&exited, true, None, &limited), None);
    }

    #[test]
    fn the_cold_reply_is_the_first_made_and_set_beside_the_warm_median() {
        let replies = vec![
            at(1, 0, 290),
            at(2, 1000, 120),
            at(3, 2000, 100),
            at(4, 3000, 140),
        ];
        let none = FootprintFloors::default();
        let l = cold_reply_line(&replies, &none).unwrap();
        assert_eq!(l.status, Status::Info);
        assert_eq!(
            l.text,
            "cold first token 290 ms, a warm median of 120 ms over 3 replies"
        );
        let held = FootprintFloors {
            cold_first_token_ms: Some(250.0),
            ..FootprintFloors::default()
        };
        let l = cold_reply_line(&replies, &held).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(l.text.ends_with("(limit 250 ms)"), "{}", l.text);
        let f = l.figures.as_ref().unwrap();
        assert_eq!((f.median, f.values), (Some(120.0), Some(3)));
        assert_eq!(f.footprint.as_ref().unwrap().cold_ms, Some(290.0));
        // With a warm-up, the warm-up is the cold reply; the warm median is of judged replies.
        let mut warmed = replies.clone();
        warmed[0].warmup = true;
        warmed[0]
            .chunks
            .iter_mut()
            .for_each(|c| c.at_ns += 10_000_000);
        let l = cold_reply_line(&warmed, &held).unwrap();
        assert!(l.text.starts_with("cold first token 300 ms"), "{}", l.text);
        assert_eq!(cold_reply_line(&[], &held), None);
    }

    #[test]
    fn the_idle_probe_is_held_to_the_first_token_limit_with_its_wait() {
        let mut replies = vec![at(1, 0, 100), at(2, 1000, 120), at(3, 2000, 140)];
        assert_eq!(idle_line(&replies, 600.0), None, "no probe, no line");
        // The last reply ends at 2160 ms; the probe is sent 10 s later.
        let mut probe = at(4, 12_160, 900);
        probe.idle_probe = true;
        replies.push(probe);
        let l = idle_line(&replies, 600.0).unwrap();
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert_eq!(
            l.text,
            "first token 900 ms after 10 s idle, a warm median of 120 ms over 3 replies (limit 600 ms)"
        );
        let f = l.figures.as_ref().unwrap().footprint.clone().unwrap();
        assert_eq!((f.idle_ms, f.idle_wait_ms), (Some(900.0), Some(10_000.0)));
        assert_eq!(idle_line(&replies, 900.0).unwrap().status, Status::Ok);
    }

    // The tests below each name the cargo mutant they catch (docs/testing.md).

    /// Under 10 s a time keeps two decimals, from 10 s one. Catches `ms < 10_000.0` made `==`
    /// or `>` (2.34 s said as 2.3 s). Made `<=` it is equivalent: at exactly 10 000 ms both
    /// branches say "10 s".
    #[test]
    fn times_keep_two_decimals_under_ten_seconds_and_one_after() {
        assert_eq!(time_said(999.0), "999 ms");
        assert_eq!(time_said(1000.0), "1 s");
        assert_eq!(time_said(2340.0), "2.34 s");
        assert_eq!(time_said(12_340.0), "12.3 s");
        assert_eq!(time_said(10_000.0), "10 s");
    }

    /// Exactly the default limit of 1.5x the baseline's time to ready is within it. Catches
    /// `r > 1.0 + most` made `>=`.
    #[test]
    fn startup_exactly_at_its_ratio_limit_is_within_it() {
        let none = FootprintFloors::default();
        let l = startup_line(&ready(1500.0), true, Some(&ready(1000.0)), &none).unwrap();
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(l.text.contains("; 1.5x the baseline's 1 s"), "{}", l.text);
    }

    /// A baseline ready after 0 ms (a hand-edited or broken run.json) has no ratio to hold:
    /// the line is its own time alone, not an infinite ratio's FAIL. Catches the guard
    /// `*after_ms > 0.0` made `true` or `>=`.
    #[test]
    fn a_baseline_ready_after_nothing_gives_no_ratio() {
        let none = FootprintFloors::default();
        let l = startup_line(&ready(1500.0), true, Some(&ready(0.0)), &none).unwrap();
        assert_eq!(l.status, Status::Info, "{}", l.text);
        assert!(!l.text.contains("baseline"), "{}", l.text);
        let f = l.figures.as_ref().unwrap();
        assert_eq!(f.ratio, None);
        assert_eq!(f.footprint.as_ref().unwrap().baseline_ready_ms, None);
    }

    /// The figures result.json keeps of each line. Catches the deletion of each field of the
    /// startup, cold-reply and idle lines' figures.
    #[test]
    fn the_readiness_lines_keep_their_figures() {
        let limited = FootprintFloors {
            ready_limit_ms: Some(2000.0),
            ..FootprintFloors::default()
        };
        let l = startup_line(&ready(1600.0), true, Some(&ready(1000.0)), &limited).unwrap();
        let f = l.figures.as_ref().unwrap();
        assert_eq!(f.unit, Some(Unit::Milliseconds));
        assert_eq!(f.limit, Some(2000.0));
        assert_eq!(f.ratio, Some(1.6));
        let fp = f.footprint.as_ref().unwrap();
        assert_eq!(fp.ready_ms, Some(1600.0));
        assert_eq!(fp.baseline_ready_ms, Some(1000.0));
        assert_eq!(fp.max_regression, Some(DEFAULT_MAX_STARTUP_REGRESSION));

        let replies = vec![at(1, 0, 290), at(2, 1000, 120), at(3, 2000, 100)];
        let held = FootprintFloors {
            cold_first_token_ms: Some(250.0),
            ..FootprintFloors::default()
        };
        let f = cold_reply_line(&replies, &held).unwrap().figures.unwrap();
        assert_eq!((f.unit, f.limit), (Some(Unit::Milliseconds), Some(250.0)));

        let mut replies = replies;
        let mut probe = at(4, 12_000, 300);
        probe.idle_probe = true;
        replies.push(probe);
        let f = idle_line(&replies, 600.0).unwrap().figures.unwrap();
        assert_eq!(f.unit, Some(Unit::Milliseconds));
        assert_eq!(f.limit, Some(600.0));
        // The warm median is of the judged replies but the probe: 290, 120 and 100 make 120.
        assert_eq!((f.median, f.values), (Some(120.0), Some(3)));
    }
}
