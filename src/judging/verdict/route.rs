//! The route line: whether the serve took the fast route, by the evidence of its log (it names
//! the fast route and not the slow fallback) and of its own processes (the libraries they map,
//! the device they hold open, the device's busy counter), as route.json recorded them.
//!
//! Process evidence is judged only from what the archive holds: a pattern asked of a run that
//! recorded none is a FAIL that says so, never ok. Each piece of evidence is named in the line,
//! passed or failed, with what was found instead. A name is not evidence (issue 30): a library
//! is an executable mapping of an ELF shared object, a device a character device held open.

use crate::archive::check::Check;
use regex::Regex;

use super::content::quote;
use super::criteria::{BusySource, Criteria};
use super::evidence::ProcessEvidence;
use crate::archive::record::{
    CounterRecord, FileKind, Header, Line, ProcessRecord, RouteMatch, RouteRecord, Status,
};
use crate::judging::serve_log::LogScan;

/// "; last log lines: ..." for a FAIL line: the log's last non-blank lines, quoted. Nothing
/// for a run with no log (a serve already running, attached without `--serve-log`): there is
/// no log to call empty.
pub(crate) fn log_tail(log: Option<&LogScan>) -> String {
    let Some(log) = log else {
        return String::new();
    };
    if log.tail.is_empty() {
        return "; its log is empty".to_string();
    }
    let quoted: Vec<String> = log.tail.iter().map(|l| quote(l, 200)).collect();
    format!("; last log lines: {}", quoted.join(" | "))
}

pub(crate) fn route_line(
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
    if c.fast().is_some() || c.slow().is_some() {
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
    Line::new(Check::Route, status, text)
}

/// Each process check asked for, as (passed, what was found).
fn process_checks(r: &RouteRecord, c: &Criteria) -> Vec<(bool, String)> {
    if r.root_pid.is_none() {
        return attached_checks(r, c);
    }
    let mut out = Vec::new();
    let unread = unread_note(r);
    if let Some(re) = c.route_lib() {
        out.push(route_lib_check(r, re, &unread));
    }
    if let Some(re) = c.no_route_lib() {
        out.push(no_route_lib_check(r, re, &unread));
    }
    if let Some(re) = c.route_device() {
        out.push(route_device_check(r, re, &unread));
    }
    if let Some(source) = c.device_busy() {
        out.push(counter_check(r.counter.as_ref(), source));
    }
    out
}

/// The process checks of a run attached to a serve already running: there is no tree, only a
/// counter file to read, so each pattern asked of the tree fails saying so.
fn attached_checks(r: &RouteRecord, c: &Criteria) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let asked = [
        ("--route-lib", c.route_lib()),
        ("--no-route-lib", c.no_route_lib()),
        ("--route-device", c.route_device()),
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
    if let Some(source) = c.device_busy() {
        out.push(counter_check(r.counter.as_ref(), source));
    }
    out
}

/// `--route-lib`: some process of the serve maps a matching library as code.
fn route_lib_check(r: &RouteRecord, re: &Regex, unread: &str) -> (bool, String) {
    match find(r, re, |p| &p.maps, library) {
        Found::Evidence(p, path, counts) => (
            true,
            format!(
                "{} maps {} (/{}/{})",
                who(p),
                base_name(path),
                re.as_str(),
                counts.note()
            ),
        ),
        Found::NotEvidence { p, path, why, more } => (
            false,
            format!(
                "no process of the serve maps /{}/ as code: {} maps {}, but {why}{}{unread}",
                re.as_str(),
                who(p),
                base_name(path),
                more_matched(more)
            ),
        ),
        Found::Nothing => (
            false,
            format!(
                "no process of the serve maps /{}/ (mapped: {}){unread}",
                re.as_str(),
                mapped_libraries(r, re.as_str())
            ),
        ),
    }
}

/// `--no-route-lib`: no process of the serve maps a matching file. Conservative, as a release
/// gate must be: a forbidden library mapped in any way (as data, or a file that only bears its
/// name) still fails, with what it was (issue 30).
fn no_route_lib_check(r: &RouteRecord, re: &Regex, unread: &str) -> (bool, String) {
    match first_match(r, re, |p| &p.maps) {
        Some((p, path)) => (
            false,
            format!(
                "{} maps /{}/: {}{}",
                who(p),
                re.as_str(),
                plain(path, 200),
                match library(p, path) {
                    Counts::No(why) =>
                        format!(" ({why}; any mapping of a forbidden library counts)"),
                    _ => String::new(),
                }
            ),
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
    }
}

/// `--route-device`: some process of the serve held a matching character device open during
/// the replies.
fn route_device_check(r: &RouteRecord, re: &Regex, unread: &str) -> (bool, String) {
    match find(r, re, |p| &p.open, device) {
        Found::Evidence(p, path, counts) => (
            true,
            format!(
                "{} held {} open (/{}/{})",
                who(p),
                plain(path, 200),
                re.as_str(),
                counts.note()
            ),
        ),
        Found::NotEvidence { p, path, why, more } => (
            false,
            format!(
                "no process of the serve held open a character device matching /{}/ during the replies: {} held {} open, but {why}{}{unread}",
                re.as_str(),
                who(p),
                plain(path, 200),
                more_matched(more)
            ),
        ),
        Found::Nothing => (
            false,
            format!(
                "no process of the serve held open a file matching /{}/ during the replies (held: {}){unread}",
                re.as_str(),
                held_files(r, re.as_str())
            ),
        ),
    }
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

/// Whether one file a pattern matched is evidence of the route.
enum Counts {
    /// It is; with how it was checked, where that is worth saying.
    Yes(Option<&'static str>),
    /// The run recorded no kinds (a route.json from before issue 30): counted as it was
    /// then, and the line says it was not checked.
    Unrecorded,
    /// It is not, and what it is instead ("not as executable code (r--p)").
    No(String),
}

impl Counts {
    /// What an ok line adds after the pattern.
    fn note(&self) -> String {
        match self {
            Counts::Yes(None) => String::new(),
            Counts::Yes(Some(how)) => format!("; {how}"),
            Counts::Unrecorded => {
                "; its kind was not checked: this route.json is from before kinds were recorded"
                    .to_string()
            }
            Counts::No(_) => String::new(),
        }
    }
}

/// Library evidence is an executable mapping of an ELF shared object; a file mapped only as
/// data, or code that is not a shared object, bears the library's name and nothing more.
fn library(p: &ProcessRecord, path: &str) -> Counts {
    let Some(kinds) = &p.map_kinds else {
        return Counts::Unrecorded;
    };
    let Some(kind) = kinds.get(path) else {
        return Counts::No("how it was mapped was not recorded".into());
    };
    if !kind.executable() {
        return Counts::No(format!(
            "not as executable code ({})",
            kind.perms.join(", ")
        ));
    }
    match (&kind.header, kind.header_via.as_deref()) {
        (Some(Header::ElfSharedObject), Some("path")) => Counts::Yes(Some(
            "its ELF header read by its path, the inode checked: /proc/PID/map_files was not readable",
        )),
        (Some(Header::ElfSharedObject), _) => Counts::Yes(None),
        (Some(Header::ElfOfType(t)), _) => Counts::No(format!(
            "it is an ELF {}, not a shared object",
            match t {
                1 => "relocatable file (ET_REL)".to_string(),
                2 => "executable (ET_EXEC)".to_string(),
                4 => "core file (ET_CORE)".to_string(),
                t => format!("of type {t}"),
            }
        )),
        (Some(Header::NotElf), _) => Counts::No("it is not an ELF shared object".into()),
        (Some(Header::Unread(why)), _) => Counts::No(format!(
            "its ELF header could not be read ({})",
            plain(why, 200)
        )),
        (None, _) => Counts::No("its ELF header was not read".into()),
    }
}

/// Device evidence is a character device held open; a regular file or FIFO at a path that
/// matches is not one.
fn device(p: &ProcessRecord, path: &str) -> Counts {
    let Some(kinds) = &p.open_kinds else {
        return Counts::Unrecorded;
    };
    match kinds.get(path) {
        Some(FileKind::CharDevice) => Counts::Yes(None),
        Some(kind) => Counts::No(format!("it is {kind}, not a character device")),
        None => Counts::No("its kind was not recorded".into()),
    }
}

/// What the files a pattern matched show.
enum Found<'a> {
    /// The first that is evidence.
    Evidence(&'a ProcessRecord, &'a str, Counts),
    /// None is: the first, what it is instead, and how many more matched.
    NotEvidence {
        p: &'a ProcessRecord,
        path: &'a str,
        why: String,
        more: usize,
    },
    /// None matched.
    Nothing,
}

fn find<'a>(
    r: &'a RouteRecord,
    re: &Regex,
    paths: impl Fn(&'a ProcessRecord) -> &'a Vec<String>,
    counts: fn(&ProcessRecord, &str) -> Counts,
) -> Found<'a> {
    let mut first = None;
    let mut more = 0;
    for p in &r.processes {
        for path in paths(p).iter().filter(|path| re.is_match(path)) {
            match counts(p, path) {
                Counts::No(why) if first.is_none() => first = Some((p, path.as_str(), why)),
                Counts::No(_) => more += 1,
                yes => return Found::Evidence(p, path, yes),
            }
        }
    }
    match first {
        Some((p, path, why)) => Found::NotEvidence { p, path, why, more },
        None => Found::Nothing,
    }
}

/// "; 2 more matched, none evidence"
fn more_matched(more: usize) -> String {
    match more {
        0 => String::new(),
        n => format!(" ({n} more matched, none of them evidence either)"),
    }
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
        ("route-lib", c.route_lib(), false),
        ("no-route-lib", c.no_route_lib(), false),
        ("route-device", c.route_device(), true),
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

/// How like `pattern` a name is: the longest run of characters it shares with one of the
/// pattern's literal words (letters, digits and `_`, 3 or more), case aside and a leading
/// "lib" left off both (every library shares it); 0 for none.
fn likeness(name: &str, pattern: &str) -> usize {
    let name = name.to_lowercase();
    let name: Vec<char> = name.strip_prefix("lib").unwrap_or(&name).chars().collect();
    pattern
        .to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map(|w| w.strip_prefix("lib").unwrap_or(w).to_string())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| {
            let w: Vec<char> = w.chars().collect();
            let mut best = 0;
            for i in 0..name.len() {
                for j in 0..w.len() {
                    let run = name[i..]
                        .iter()
                        .zip(&w[j..])
                        .take_while(|(a, b)| a == b)
                        .count();
                    best = best.max(run);
                }
            }
            best
        })
        .max()
        .unwrap_or(0)
}

/// `names` (each with its tier: 0 first) in the order a reader needs them: those most like
/// `pattern` first (a run of 3 or more characters of its words), then by tier, each in the
/// order found.
fn ranked(mut names: Vec<(String, u8)>, pattern: &str) -> Vec<String> {
    names.sort_by_key(|(n, tier)| {
        let like = likeness(n, pattern);
        (std::cmp::Reverse(if like >= 3 { like } else { 0 }), *tier)
    });
    names.into_iter().map(|(n, _)| n).collect()
}

/// The shared libraries the tree mapped, by name: those most like `pattern` first, then those
/// outside the system's library folders and the interpreter's extension modules (the serve's
/// own backends), then the interpreter's, then the system's, at most [`SHOWN`] (issue 33: a
/// Python serve maps dozens of extension modules before its backend).
fn mapped_libraries(r: &RouteRecord, pattern: &str) -> String {
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
    // CPython's extension modules: its lib-dynload, and any `*.cpython-*.so`.
    let interpreter = |p: &str| p.contains("/lib-dynload/") || base_name(p).contains(".cpython-");
    let is_library = |p: &str| {
        let name = p.rsplit('/').next().unwrap_or(p);
        name.ends_with(".so") || name.contains(".so.")
    };
    let mut names: Vec<(String, u8)> = Vec::new();
    for path in r.processes.iter().flat_map(|p| &p.maps) {
        if !is_library(path) {
            continue;
        }
        let name = base_name(path);
        let tier = if interpreter(path) {
            1
        } else if system(path) {
            2
        } else {
            0
        };
        if !names.iter().any(|(n, _)| *n == name) {
            names.push((name, tier));
        }
    }
    shown(ranked(names, pattern), "no shared library")
}

/// The files the tree held open: those most like `pattern` first, then device files, then
/// the rest, at most [`SHOWN`].
fn held_files(r: &RouteRecord, pattern: &str) -> String {
    let mut names: Vec<(String, u8)> = Vec::new();
    for path in r.processes.iter().flat_map(|p| &p.open) {
        let q = plain(path, 120);
        let tier = u8::from(!path.starts_with("/dev/"));
        if !names.iter().any(|(n, _)| *n == q) {
            names.push((q, tier));
        }
    }
    shown(ranked(names, pattern), "no file")
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
    if c.fast().is_none() && c.slow().is_none() {
        return Line::new(
            Check::Route,
            Status::Info,
            "no route patterns given (--fast-route, --slow-route)",
        );
    }
    let Some(log) = log else {
        return Line::new(
            Check::Route,
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
        return Line::new(Check::Route, status, format!("not judged: {why}"));
    }
    let mut problems = Vec::new();
    if let Some(fast) = c.fast() {
        if !log.fast_matched {
            problems.push(format!(
                "the serve log does not name the fast route /{}/",
                fast.as_str()
            ));
        }
    }
    if let (Some(slow), Some(line)) = (c.slow(), &log.slow_line) {
        problems.push(format!(
            "the serve log names the slow route /{}/: {}",
            slow.as_str(),
            quote(line, 120)
        ));
    }
    if !problems.is_empty() {
        return Line::new(Check::Route, Status::Fail, problems.join("; "));
    }
    let text = match (c.fast(), c.slow()) {
        (Some(_), Some(_)) => "the serve log names the fast route, not the slow one",
        (Some(_), None) => "the serve log names the fast route",
        _ => "the serve log does not name the slow route",
    };
    Line::new(Check::Route, Status::Ok, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{CounterReading, Floors, MapKind};

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

    /// `p` with kinds recorded: each map as `(path, perms, header)`, each open file as
    /// `(path, kind)`.
    fn kinded(
        mut p: ProcessRecord,
        maps: &[(&str, &str, Option<Header>)],
        open: &[(&str, FileKind)],
    ) -> ProcessRecord {
        p.maps = maps.iter().map(|m| m.0.to_string()).collect();
        p.map_kinds = Some(
            maps.iter()
                .map(|(path, perms, header)| {
                    let kind = MapKind {
                        perms: perms.split(',').map(str::to_string).collect(),
                        header: header.clone(),
                        header_via: header.as_ref().map(|_| "map_files".to_string()),
                    };
                    (path.to_string(), kind)
                })
                .collect(),
        );
        p.open = open.iter().map(|o| o.0.to_string()).collect();
        p.open_kinds = Some(
            open.iter()
                .map(|(path, kind)| (path.to_string(), kind.clone()))
                .collect(),
        );
        p
    }

    /// The route line's status and text for one process.
    fn judged(p: ProcessRecord, c: &Criteria) -> (Status, String) {
        let r = RouteRecord {
            processes: vec![p],
            ..launched()
        };
        let l = line(&r, c, false);
        (l.status, l.text)
    }

    #[test]
    fn route_lib_counts_only_executable_code_of_an_elf_shared_object() {
        let c = criteria(|f| f.route_lib = Some("libggml-cuda".into()));
        let lib = "/opt/l/libggml-cuda.so";
        let with = |perms: &str, header: Option<Header>| {
            judged(
                kinded(process(7, &[], &[]), &[(lib, perms, header)], &[]),
                &c,
            )
        };
        // Issue 30: a text file bearing the backend's name, mapped read-only.
        assert_eq!(
            with("r--p", None),
            (
                Status::Fail,
                "no process of the serve maps /libggml-cuda/ as code: process 7 (serve) maps libggml-cuda.so, but not as executable code (r--p)".into()
            )
        );
        let (status, text) = with("r-xp", Some(Header::NotElf));
        assert_eq!(status, Status::Fail);
        assert!(
            text.ends_with("but it is not an ELF shared object"),
            "{text}"
        );
        let (status, text) = with("r-xp", Some(Header::ElfOfType(2)));
        assert_eq!(status, Status::Fail);
        assert!(
            text.ends_with("it is an ELF executable (ET_EXEC), not a shared object"),
            "{text}"
        );
        let (status, text) = with("r-xp", Some(Header::Unread("denied".into())));
        assert_eq!(status, Status::Fail);
        assert!(
            text.ends_with("its ELF header could not be read (denied)"),
            "{text}"
        );
        // The real thing, among its other mappings.
        assert_eq!(
            with("r--p,r-xp,rw-p", Some(Header::ElfSharedObject)),
            (
                Status::Ok,
                "process 7 (serve) maps libggml-cuda.so (/libggml-cuda/)".into()
            )
        );
        // Read by its path, where map_files was out of reach: said so.
        let mut p = kinded(
            process(7, &[], &[]),
            &[(lib, "r-xp", Some(Header::ElfSharedObject))],
            &[],
        );
        if let Some(k) = p.map_kinds.as_mut().and_then(|k| k.get_mut(lib)) {
            k.header_via = Some("path".into());
        }
        let (status, text) = judged(p, &c);
        assert_eq!(status, Status::Ok);
        assert!(
            text.contains("; its ELF header read by its path, the inode checked"),
            "{text}"
        );
        // A data mapping beside the code mapping of another matching file: the code counts, and
        // the data mapping is counted as a further match when none does.
        let (status, text) = judged(
            kinded(
                process(7, &[], &[]),
                &[
                    ("/m/libggml-cuda.so.txt", "r--p", None),
                    (lib, "r-xp", Some(Header::ElfSharedObject)),
                ],
                &[],
            ),
            &c,
        );
        assert_eq!(status, Status::Ok, "{text}");
        let (status, text) = judged(
            kinded(
                process(7, &[], &[]),
                &[
                    ("/m/libggml-cuda.so.txt", "r--p", None),
                    (lib, "rw-p", None),
                ],
                &[],
            ),
            &c,
        );
        assert_eq!(status, Status::Fail);
        assert!(
            text.ends_with("(r--p) (1 more matched, none of them evidence either)"),
            "{text}"
        );
    }

    #[test]
    fn no_route_lib_counts_any_mapping_and_says_what_it_was() {
        let c = criteria(|f| f.no_route_lib = Some("libggml-cuda".into()));
        let (status, text) = judged(
            kinded(
                process(7, &[], &[]),
                &[("/opt/libggml-cuda.so", "r--p", None)],
                &[],
            ),
            &c,
        );
        assert_eq!(status, Status::Fail);
        assert_eq!(
            text,
            "process 7 (serve) maps /libggml-cuda/: /opt/libggml-cuda.so (not as executable code (r--p); any mapping of a forbidden library counts)"
        );
        let (status, text) = judged(
            kinded(
                process(7, &[], &[]),
                &[(
                    "/opt/libggml-cuda.so",
                    "r-xp",
                    Some(Header::ElfSharedObject),
                )],
                &[],
            ),
            &c,
        );
        assert_eq!(status, Status::Fail);
        assert_eq!(
            text,
            "process 7 (serve) maps /libggml-cuda/: /opt/libggml-cuda.so"
        );
    }

    #[test]
    fn route_device_counts_only_a_character_device() {
        let c = criteria(|f| f.route_device = Some("accel0$".into()));
        for kind in [
            FileKind::Regular,
            FileKind::Fifo,
            FileKind::Unread("gone".into()),
        ] {
            let (status, text) = judged(
                kinded(
                    process(7, &[], &[]),
                    &[],
                    &[("/tmp/x/accel0", kind.clone())],
                ),
                &c,
            );
            assert_eq!(status, Status::Fail, "{kind:?}");
            assert!(
                text.starts_with(&format!(
                    "no process of the serve held open a character device matching /accel0$/ during the replies: process 7 (serve) held /tmp/x/accel0 open, but it is {kind}, not a character device"
                )),
                "{text}"
            );
        }
        let (status, text) = judged(
            kinded(
                process(7, &[], &[]),
                &[],
                &[
                    ("/tmp/x/accel0", FileKind::Regular),
                    ("/dev/accel/accel0", FileKind::CharDevice),
                ],
            ),
            &c,
        );
        assert_eq!(
            (status, text.as_str()),
            (
                Status::Ok,
                "process 7 (serve) held /dev/accel/accel0 open (/accel0$/)"
            )
        );
    }

    #[test]
    fn a_record_from_before_kinds_is_judged_as_then_and_says_it_was_not_checked() {
        let c = criteria(|f| {
            f.route_lib = Some("libggml-cuda".into());
            f.route_device = Some("accel0$".into());
        });
        let old = process(7, &["/opt/libggml-cuda.so"], &["/tmp/x/accel0"]);
        assert_eq!(old.map_kinds, None);
        let (status, text) = judged(old, &c);
        assert_eq!(status, Status::Ok, "{text}");
        assert_eq!(
            text,
            "process 7 (serve) maps libggml-cuda.so (/libggml-cuda/; its kind was not checked: this route.json is from before kinds were recorded); process 7 (serve) held /tmp/x/accel0 open (/accel0$/; its kind was not checked: this route.json is from before kinds were recorded)"
        );
        // As it is read from an old route.json: no kinds fields at all.
        let json = r#"{"pid": 7, "parent": null, "comm": "serve", "exe": null, "maps": ["/opt/libggml-cuda.so"], "open": []}"#;
        let p: ProcessRecord = serde_json::from_str(json).unwrap();
        assert_eq!((p.map_kinds, p.open_kinds), (None, None));
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

    #[test]
    fn a_python_serves_backend_is_named_before_its_extension_modules() {
        // A serve that is a Python program (vllm-ascend is one) maps dozens of CPython
        // extension modules before its backend; the pattern asked is not matched.
        let mut maps: Vec<String> = (0..30)
            .map(|i| {
                format!("/usr/lib/python3.11/lib-dynload/_mod{i}.cpython-311-x86_64-linux-gnu.so")
            })
            .collect();
        maps.push("/opt/venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so".into());
        maps.push("/usr/lib/x86_64-linux-gnu/libc.so.6".into());
        maps.push("/usr/local/Ascend/driver/lib64/driver/libascend_hal.so".into());
        maps.push("/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so".into());
        let maps: Vec<&str> = maps.iter().map(String::as_str).collect();
        let r = RouteRecord {
            processes: vec![process(7, &maps, &[])],
            ..launched()
        };
        let c = criteria(|f| f.route_lib = Some("libascendcl".into()));
        let l = line(&r, &c, false);
        assert_eq!(l.status, Status::Fail);
        // Most like the pattern first, then the serve's own, then the interpreter's; the
        // system's last, counted.
        assert!(
            l.text
                .contains("(mapped: libascend_hal.so, libtorch_cpu.so, _mod0.cpython-311"),
            "{l}"
        );
        assert!(l.text.contains(" and 26 more)"), "{l}");
        // No name like the pattern: the serve's own first all the same.
        let c = criteria(|f| f.route_lib = Some("rknn".into()));
        let l = line(&r, &c, false);
        assert!(
            l.text
                .contains("(mapped: libascend_hal.so, libtorch_cpu.so, _mod0"),
            "{l}"
        );
    }

    #[test]
    fn held_files_most_like_the_device_pattern_come_first() {
        let r = RouteRecord {
            processes: vec![process(
                7,
                &[],
                &[
                    "/tmp/a.log",
                    "/dev/null",
                    "/dev/urandom",
                    "/dev/dri/renderD128",
                ],
            )],
            ..launched()
        };
        let c = criteria(|f| f.route_device = Some("^/dev/accel/accel0$".into()));
        let l = line(&r, &c, false);
        assert!(
            l.text
                .contains("(held: /dev/null, /dev/urandom, /dev/dri/renderD128, /tmp/a.log)"),
            "{l}"
        );
        let c = criteria(|f| f.route_device = Some("renderD129".into()));
        let l = line(&r, &c, false);
        assert!(
            l.text.contains("(held: /dev/dri/renderD128, /dev/null"),
            "{l}"
        );
    }

    #[test]
    fn likeness_is_the_longest_shared_run_of_a_patterns_word() {
        assert_eq!(likeness("libascend_hal.so", r"libascendcl\.so"), 6);
        assert_eq!(likeness("libc.so.6", r"libascendcl\.so"), 1);
        assert_eq!(likeness("libnpu.so", "npu"), 3);
        assert_eq!(
            likeness("x", "ab"),
            0,
            "words under 3 characters are not read"
        );
    }
}
