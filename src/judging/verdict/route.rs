//! The route line: whether the serve's log names the fast route and not the slow fallback.

use super::content::quote;
use super::Criteria;
use crate::archive::record::{Line, Status};
use crate::judging::serve_log::LogScan;

/// "; last log lines: ..." for a FAIL line: the log's last non-blank lines, quoted. Nothing
/// for a run with no log (a serve already running, attached without `--serve-log`): there is
/// no log to call empty.
pub(super) fn log_tail(log: Option<&LogScan>) -> String {
    let Some(log) = log else {
        return String::new();
    };
    if log.tail.is_empty() {
        return "; its log is empty".to_string();
    }
    let quoted: Vec<String> = log.tail.iter().map(|l| quote(l, 200)).collect();
    format!("; last log lines: {}", quoted.join(" | "))
}

pub(super) fn route_line(log: Option<&LogScan>, c: &Criteria, interrupted: bool) -> Line {
    if c.fast.is_none() && c.slow.is_none() {
        return Line::new(
            "route",
            Status::Info,
            "no route patterns given (--fast-route, --slow-route)",
        );
    }
    let Some(log) = log else {
        return Line::new(
            "route",
            Status::Info,
            "no serve log to judge the route by (attached to a running serve: give --serve-log FILE)",
        );
    };
    if let Some(why) = &log.unread {
        // A log that could not be read never passes the route; one left unread because the
        // run was stopped is not judged, as nothing else of an interrupted run is.
        let status = if interrupted {
            Status::Info
        } else {
            Status::Fail
        };
        return Line::new("route", status, format!("not judged: {why}"));
    }
    let mut problems = Vec::new();
    if let Some(fast) = &c.fast {
        if !log.fast_matched {
            problems.push(format!(
                "the serve log does not name the fast route /{}/",
                fast.as_str()
            ));
        }
    }
    if let (Some(slow), Some(line)) = (&c.slow, &log.slow_line) {
        problems.push(format!(
            "the serve log names the slow route /{}/: {}",
            slow.as_str(),
            quote(line, 120)
        ));
    }
    if !problems.is_empty() {
        return Line::new("route", Status::Fail, problems.join("; "));
    }
    let text = match (&c.fast, &c.slow) {
        (Some(_), Some(_)) => "the serve log names the fast route, not the slow one",
        (Some(_), None) => "the serve log names the fast route",
        _ => "the serve log does not name the slow route",
    };
    Line::new("route", Status::Ok, text)
}
