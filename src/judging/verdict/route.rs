//! The route line: whether the serve took the fast route, by the evidence of its log (it names
//! the fast route and not the slow fallback) and of its own processes (the libraries they map,
//! the device they hold open, the device's busy counter), as route.json recorded them.
//!
//! Process evidence is judged only from what the archive holds: a pattern asked of a run that
//! recorded none is a FAIL that says so, never ok. Each piece of evidence is named in the line,
//! passed or failed, with what was found instead.

use regex::Regex;

use super::content::quote;
use super::{BusySource, Criteria, ProcessEvidence};
use crate::archive::record::{CounterRecord, Line, ProcessRecord, RouteMatch, RouteRecord, Status};
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

pub(super) fn route_line(
    log: Option<&LogScan>,
    processes: ProcessEvidence<'_>,
    c: &Criteria,
    interrupted: bool,
) -> Line {
    if !c.wants_process_evidence() {
        return log_line(log, c, interrupted);
    }
    let mut failed = Vec::new();
    let mut passed = Vec::new();
    match processes {
        ProcessEvidence::Missing(why) => {
            failed.push(format!("the run recorded no process evidence ({why})"));
        }
        ProcessEvidence::Recorded(record) => {
            for (ok, text) in process_checks(record, c) {
                if ok {
                    passed.push(text);
                } else {
                    failed.push(text);
                }
            }
        }
    }
    if c.fast.is_some() || c.slow.is_some() {
        let log = log_line(log, c, interrupted);
        match log.status {
            Status::Ok => passed.push("log ok".to_string()),
            Status::Fail => failed.push(format!("log: {}", log.text)),
            Status::Info | Status::Inconclusive => passed.push(format!("log {}", log.text)),
        }
    }
    let status = match (failed.is_empty(), interrupted) {
        (true, _) => Status::Ok,
        // A run stopped early may have been stopped before its evidence was read: what it
        // lacks is not judged, as nothing else of an interrupted run is.
        (false, true) => Status::Info,
        (false, false) => Status::Fail,
    };
    let text = failed
        .into_iter()
        .chain(passed)
        .collect::<Vec<_>>()
        .join("; ");
    Line::new("route", status, text)
}

/// Each process check asked for, as (passed, what was found).
fn process_checks(r: &RouteRecord, c: &Criteria) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    if r.root_pid.is_none() {
        // Attached to a serve already running: there is no tree, only a counter file to read.
        let asked = [
            ("--route-lib", &c.route_lib),
            ("--no-route-lib", &c.no_route_lib),
            ("--route-device", &c.route_device),
        ];
        for (flag, re) in asked {
            if let Some(re) = re {
                out.push((
                    false,
                    format!(
                        "{flag} /{}/ cannot be judged: the gate attached to a serve already running and launched no process to look at",
                        re.as_str()
                    ),
                ));
            }
        }
        if let Some(source) = &c.device_busy {
            out.push(counter_check(r.counter.as_ref(), source));
        }
        return out;
    }
    let unread = unread_note(r);
    if let Some(re) = &c.route_lib {
        out.push(match first_match(r, re, |p| &p.maps) {
            Some((p, path)) => (
                true,
                format!("{} maps {} (/{}/)", who(p), base_name(path), re.as_str()),
            ),
            None => (
                false,
                format!(
                    "no process of the serve maps /{}/ (mapped: {}){unread}",
                    re.as_str(),
                    mapped_libraries(r)
                ),
            ),
        });
    }
    if let Some(re) = &c.no_route_lib {
        out.push(match first_match(r, re, |p| &p.maps) {
            Some((p, path)) => (
                false,
                format!("{} maps /{}/: {}", who(p), re.as_str(), plain(path, 200)),
            ),
            None if !unread.is_empty() => (
                false,
                format!(
                    "could not show that no process maps /{}/{unread}",
                    re.as_str()
                ),
            ),
            None if r.processes.is_empty() => (
                false,
                format!(
                    "could not show that no process maps /{}/: no process of the serve was seen",
                    re.as_str()
                ),
            ),
            None => (
                true,
                format!("no process of the serve maps /{}/", re.as_str()),
            ),
        });
    }
    if let Some(re) = &c.route_device {
        out.push(match first_match(r, re, |p| &p.open) {
            Some((p, path)) => (
                true,
                format!("{} held {} open (/{}/)", who(p), plain(path, 200), re.as_str()),
            ),
            None => (
                false,
                format!(
                    "no process of the serve held open a file matching /{}/ during the replies (held: {}){unread}",
                    re.as_str(),
                    held_files(r)
                ),
            ),
        });
    }
    if let Some(source) = &c.device_busy {
        out.push(counter_check(r.counter.as_ref(), source));
    }
    out
}

/// The counter check: the busy counter advanced during the replies.
fn counter_check(counter: Option<&CounterRecord>, source: &BusySource) -> (bool, String) {
    let name = source.to_string();
    let Some(counter) = counter.filter(|k| k.source == name) else {
        return (
            false,
            format!("the run recorded no readings of the busy counter {name}"),
        );
    };
    let (Some(before), Some(after)) = (counter.before, counter.after) else {
        let why = counter.problem.as_deref().unwrap_or("a reading is missing");
        return (
            false,
            format!("the busy counter {name} was not read: {why}"),
        );
    };
    if after.value < before.value {
        return (
            false,
            format!(
                "the busy counter {name} went back during the replies, from {} to {}: it is not a counter",
                before.value, after.value
            ),
        );
    }
    if after.value == before.value {
        return (
            false,
            format!(
                "the device's busy counter {name} did not advance during the replies (it read {} before and after)",
                before.value
            ),
        );
    }
    let delta = after.value - before.value;
    let wall_ns = after.at_ns.saturating_sub(before.at_ns);
    let unit = counter.unit.as_deref().unwrap_or("");
    let per_ns = match unit {
        "ns" => Some(1.0),
        "us" => Some(1e3),
        "ms" => Some(1e6),
        _ => None,
    };
    match per_ns.filter(|_| wall_ns > 0) {
        Some(per_ns) => (
            true,
            format!(
                "the device was busy {:.0}% of the replies ({name} advanced {delta} {unit} in {:.1} s)",
                delta as f64 * per_ns / wall_ns as f64 * 100.0,
                wall_ns as f64 / 1e9
            ),
        ),
        None => (
            true,
            format!("the busy counter {name} advanced by {delta} during the replies"),
        ),
    }
}

/// "; could not read: ..." when some evidence could not be read, else nothing.
fn unread_note(r: &RouteRecord) -> String {
    if r.problems.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = r.problems.iter().take(3).map(|p| quote(p, 160)).collect();
    let more = match r.problems.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    format!("; could not read: {}{more}", shown.join(", "))
}

/// The first process and path of `paths` that `re` matches.
fn first_match<'a>(
    r: &'a RouteRecord,
    re: &Regex,
    paths: impl Fn(&'a ProcessRecord) -> &'a Vec<String>,
) -> Option<(&'a ProcessRecord, &'a str)> {
    r.processes.iter().find_map(|p| {
        paths(p)
            .iter()
            .find(|path| re.is_match(path))
            .map(|path| (p, path.as_str()))
    })
}

/// Which patterns matched what, for route.json's readers (judging recomputes it).
pub fn route_matches(r: &RouteRecord, c: &Criteria) -> Vec<RouteMatch> {
    let checks = [
        ("route-lib", &c.route_lib, false),
        ("no-route-lib", &c.no_route_lib, false),
        ("route-device", &c.route_device, true),
    ];
    checks
        .into_iter()
        .filter_map(|(check, re, open)| {
            let re = re.as_ref()?;
            let found = r
                .processes
                .iter()
                .flat_map(|p| {
                    let paths = if open { &p.open } else { &p.maps };
                    paths
                        .iter()
                        .filter(|path| re.is_match(path))
                        .map(move |path| format!("{} {path}", p.pid))
                })
                .take(64)
                .collect();
            Some(RouteMatch {
                check: check.to_string(),
                pattern: re.as_str().to_string(),
                found,
            })
        })
        .collect()
}

/// "process 812 (llama-server)"
fn who(p: &ProcessRecord) -> String {
    format!("process {} ({})", p.pid, plain(&p.comm, 40))
}

fn base_name(path: &str) -> String {
    plain(path.rsplit('/').next().unwrap_or(path), 120)
}

/// `s` cut to `max` characters, unquoted: a path in a list. (The line's text is shown with its
/// control characters made visible, whatever a path holds.)
fn plain(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_string(),
    }
}

/// How many names a list of what was found instead shows.
const SHOWN: usize = 8;

/// The shared libraries the tree mapped, by name, those from outside the system's library
/// folders first (the serve's own backends), at most [`SHOWN`].
fn mapped_libraries(r: &RouteRecord) -> String {
    let system = |p: &str| {
        [
            "/lib/",
            "/lib32/",
            "/lib64/",
            "/usr/lib/",
            "/usr/lib32/",
            "/usr/lib64/",
        ]
        .iter()
        .any(|d| p.starts_with(d))
    };
    let is_library = |p: &str| {
        let name = p.rsplit('/').next().unwrap_or(p);
        name.ends_with(".so") || name.contains(".so.")
    };
    let mut own = Vec::new();
    let mut sys = Vec::new();
    for path in r.processes.iter().flat_map(|p| &p.maps) {
        if !is_library(path) {
            continue;
        }
        let name = base_name(path);
        let list = if system(path) { &mut sys } else { &mut own };
        if !list.contains(&name) {
            list.push(name);
        }
    }
    shown(own.into_iter().chain(sys).collect(), "no shared library")
}

/// The files the tree held open, device files first, at most [`SHOWN`].
fn held_files(r: &RouteRecord) -> String {
    let mut devices = Vec::new();
    let mut others = Vec::new();
    for path in r.processes.iter().flat_map(|p| &p.open) {
        let list = if path.starts_with("/dev/") {
            &mut devices
        } else {
            &mut others
        };
        let q = plain(path, 120);
        if !list.contains(&q) {
            list.push(q);
        }
    }
    shown(devices.into_iter().chain(others).collect(), "no file")
}

fn shown(names: Vec<String>, none: &str) -> String {
    if names.is_empty() {
        return none.to_string();
    }
    let more = names.len().saturating_sub(SHOWN);
    let mut text = names.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// The route by the serve log alone: the line as it was before process evidence.
fn log_line(log: Option<&LogScan>, c: &Criteria, interrupted: bool) -> Line {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{CounterReading, Floors};

    fn criteria(f: impl FnOnce(&mut Floors)) -> Criteria {
        let mut floors = Floors {
            first_token_ms: 600.0,
            ..Floors::default()
        };
        f(&mut floors);
        Criteria::new(floors).unwrap()
    }

    fn process(pid: u32, maps: &[&str], open: &[&str]) -> ProcessRecord {
        ProcessRecord {
            pid,
            comm: "serve".into(),
            maps: maps.iter().map(|s| s.to_string()).collect(),
            open: open.iter().map(|s| s.to_string()).collect(),
            ..ProcessRecord::default()
        }
    }

    fn counter(before: u64, after: u64, unit: Option<&str>) -> CounterRecord {
        CounterRecord {
            source: "/tmp/busy".into(),
            unit: unit.map(str::to_string),
            before: Some(CounterReading {
                at_ns: 0,
                value: before,
            }),
            after: Some(CounterReading {
                at_ns: 2_000_000_000,
                value: after,
            }),
            problem: None,
        }
    }

    /// A record of a launched serve (an attached one has no root).
    fn launched() -> RouteRecord {
        RouteRecord {
            root_pid: Some(7),
            ..RouteRecord::default()
        }
    }

    fn line(r: &RouteRecord, c: &Criteria, interrupted: bool) -> Line {
        route_line(None, ProcessEvidence::Recorded(r), c, interrupted)
    }

    #[test]
    fn a_counter_that_goes_back_or_has_no_unit_is_said_so() {
        let c = criteria(|f| f.device_busy = Some("/tmp/busy".into()));
        let mut r = RouteRecord {
            counter: Some(counter(900, 100, Some("us"))),
            ..launched()
        };
        let l = line(&r, &c, false);
        assert_eq!(l.status, Status::Fail);
        assert!(
            l.text
                .contains("went back during the replies, from 900 to 100"),
            "{l}"
        );
        r.counter = Some(counter(100, 150, None));
        let l = line(&r, &c, false);
        assert_eq!(l.status, Status::Ok);
        assert_eq!(
            l.text,
            "the busy counter /tmp/busy advanced by 50 during the replies"
        );
        r.counter = Some(CounterRecord {
            after: None,
            problem: Some("after the replies: /tmp/busy: Permission denied".into()),
            ..counter(1, 1, None)
        });
        let l = line(&r, &c, false);
        assert_eq!(l.status, Status::Fail);
        assert!(
            l.text
                .ends_with("was not read: after the replies: /tmp/busy: Permission denied"),
            "{l}"
        );
    }

    #[test]
    fn the_libraries_shown_are_capped_and_a_clean_tree_passes_no_route_lib() {
        let maps: Vec<String> = (0..12).map(|i| format!("/opt/s/lib{i}.so")).collect();
        let maps: Vec<&str> = maps.iter().map(String::as_str).collect();
        let r = RouteRecord {
            processes: vec![process(7, &maps, &[])],
            ..launched()
        };
        let c = criteria(|f| f.route_lib = Some("libcuda".into()));
        let l = line(&r, &c, false);
        assert!(l.text.contains("lib7.so and 4 more)"), "{l}");
        let c = criteria(|f| f.no_route_lib = Some("libcuda".into()));
        let l = line(&r, &c, false);
        assert_eq!(
            (l.status, l.text.as_str()),
            (Status::Ok, "no process of the serve maps /libcuda/")
        );
        // An empty tree proves nothing.
        let l = line(&launched(), &c, false);
        assert_eq!(l.status, Status::Fail, "{l}");
    }

    #[test]
    fn an_interrupted_run_is_not_judged_on_missing_evidence_and_a_pass_stays_ok() {
        let c = criteria(|f| f.route_lib = Some("libcuda".into()));
        let empty = launched();
        assert_eq!(line(&empty, &c, true).status, Status::Info);
        let r = RouteRecord {
            processes: vec![process(7, &["/opt/libcuda.so.1"], &[])],
            ..launched()
        };
        assert_eq!(line(&r, &c, true).status, Status::Ok);
    }

    #[test]
    fn a_counters_unit_gives_the_busy_share_and_no_time_gives_none() {
        let c = criteria(|f| f.device_busy = Some("/tmp/busy".into()));
        // 2 s of replies: 1 s busy, in each unit.
        for (unit, delta) in [("ns", 1_000_000_000), ("us", 1_000_000), ("ms", 1_000)] {
            let r = RouteRecord {
                counter: Some(counter(0, delta, Some(unit))),
                ..launched()
            };
            let l = line(&r, &c, false);
            assert!(
                l.text.starts_with("the device was busy 50% of the replies"),
                "{unit}: {l}"
            );
        }
        // Both readings at the same instant: no share to give, never a division by zero.
        let mut same_time = counter(0, 10, Some("us"));
        same_time.after.as_mut().unwrap().at_ns = 0;
        let r = RouteRecord {
            counter: Some(same_time),
            ..launched()
        };
        assert_eq!(
            line(&r, &c, false).text,
            "the busy counter /tmp/busy advanced by 10 during the replies"
        );
    }

    #[test]
    fn problems_past_three_are_counted_not_listed() {
        let c = criteria(|f| f.route_lib = Some("libcuda".into()));
        let r = RouteRecord {
            problems: (1..=5).map(|i| format!("/proc/{i}/maps: denied")).collect(),
            ..launched()
        };
        let l = line(&r, &c, false);
        assert!(l.text.contains("/proc/3/maps: denied\" and 2 more"), "{l}");
        assert!(!l.text.contains("/proc/4/"), "{l}");
        let three = RouteRecord {
            problems: (1..=3).map(|i| format!("/proc/{i}/maps: denied")).collect(),
            ..launched()
        };
        let l = line(&three, &c, false);
        assert!(l.text.ends_with("/proc/3/maps: denied\""), "{l}");
    }

    #[test]
    fn a_log_pattern_beside_process_evidence_is_judged_too() {
        // One log pattern (the fast one alone) beside a process check: the log still counts.
        let c = criteria(|f| {
            f.route_lib = Some("libcuda".into());
            f.fast_route = Some("route: npu".into());
        });
        let r = RouteRecord {
            processes: vec![process(7, &["/opt/libcuda.so.1"], &[])],
            ..launched()
        };
        let log = c.scan_log_text("route: cpu\n");
        let l = route_line(Some(&log), ProcessEvidence::Recorded(&r), &c, false);
        assert_eq!(l.status, Status::Fail, "{l}");
        assert!(
            l.text
                .starts_with("log: the serve log does not name the fast route"),
            "{l}"
        );
        let c = criteria(|f| {
            f.route_lib = Some("libcuda".into());
            f.slow_route = Some("route: cpu".into());
        });
        let log = c.scan_log_text("route: cpu\n");
        let l = route_line(Some(&log), ProcessEvidence::Recorded(&r), &c, false);
        assert_eq!(l.status, Status::Fail, "{l}");
    }

    #[test]
    fn route_matches_lists_what_each_pattern_found() {
        let r = RouteRecord {
            processes: vec![
                process(7, &["/opt/libggml-cpu.so"], &["/dev/null"]),
                process(8, &["/opt/libggml-cpu.so"], &["/dev/accel/accel0"]),
            ],
            ..launched()
        };
        let c = criteria(|f| {
            f.route_lib = Some("ggml-cpu".into());
            f.route_device = Some("^/dev/accel".into());
        });
        let m = route_matches(&r, &c);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0].found,
            ["7 /opt/libggml-cpu.so", "8 /opt/libggml-cpu.so"]
        );
        assert_eq!(
            (m[1].check.as_str(), m[1].found.as_slice()),
            ("route-device", &["8 /dev/accel/accel0".to_string()][..])
        );
    }

    #[test]
    fn bad_route_evidence_settings_are_refused() {
        let bad = |f: fn(&mut Floors)| {
            let mut floors = Floors {
                first_token_ms: 600.0,
                ..Floors::default()
            };
            f(&mut floors);
            format!("{:#}", Criteria::new(floors).unwrap_err())
        };
        assert!(bad(|f| f.route_lib = Some("(".into()))
            .contains("--route-lib \"(\" is not a valid regex: unclosed group"));
        assert!(bad(|f| f.route_device = Some("[".into())).contains("is not a valid regex"));
        assert!(
            bad(|f| f.device_busy = Some("fdinfo:drm-engine-npu".into()))
                .contains("give --route-device")
        );
        assert!(bad(|f| f.device_busy = Some("fdinfo:".into())).contains("needs the key"));
        assert!(bad(|f| {
            f.route_lib = Some("x".into());
            f.no_route_lib = Some("x".into());
        })
        .contains("the same pattern"));
    }
}
