//! The report: the verdict as people and CI systems read it. It renders a verdict and decides
//! nothing. Here the pure renderers: human lines, JUnit XML, a Markdown summary; in
//! [`output`] where each output goes, in [`timeline`] timeline.svg, in [`compare`] runs side
//! by side, drawn over time in [`compare::svg`] and as CSV in [`compare::csv`]; in
//! [`lines_table`] the table of the lines docs/lines.md shows.
//!
//! It uses the archive and judging; never live. `tests/layers.rs` checks this.

pub mod compare;
pub mod exposition;
pub mod html;
pub mod lines_table;
pub mod output;
pub mod prom;
pub mod reference_table;
#[cfg(test)]
pub(crate) mod svg_check;
pub mod timeline;

use crate::archive::check::Check;
use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use crate::archive::record::ReplyRecord;
use crate::archive::rundir::Archive;
use crate::judging::measure::measure;
use crate::judging::verdict::{visible, Line, Outcome, Status, Verdict};

/// Whether to colour the verdict words: stdout is a terminal that can show colour (TERM is
/// not `dumb`) and NO_COLOR is unset.
pub fn colour_wanted() -> bool {
    use std::io::IsTerminal;
    colour_allowed(
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    ) && std::io::stdout().is_terminal()
}

/// What the environment allows: NO_COLOR unset or empty (no-color.org), and a TERM other
/// than `dumb` (Emacs' shell and some CI logs set it where escapes show as garbage).
fn colour_allowed(no_color: Option<&std::ffi::OsStr>, term: Option<&std::ffi::OsStr>) -> bool {
    no_color.is_none_or(|v| v.is_empty()) && term.is_none_or(|t| t != "dumb")
}

/// The human lines and the RESULT line, the status words coloured when `colour`.
pub fn human(v: &Verdict, colour: bool) -> String {
    if !colour {
        return v.to_string();
    }
    let paint = |style: Style, text: &str| format!("{style}{text}{style:#}");
    let mut out = String::new();
    for l in &v.lines {
        let word = format!("{:<5}", l.status);
        let style = match l.status {
            Status::Ok => AnsiColor::Green.on_default(),
            Status::Fail => AnsiColor::Red.on_default().bold(),
            Status::Info => Style::new().dimmed(),
            Status::Inconclusive => AnsiColor::Yellow.on_default(),
        };
        let _ = writeln!(
            out,
            "{:<12} {} {}",
            l.check,
            paint(style, &word),
            visible(&l.text)
        );
    }
    let style = match v.outcome {
        Outcome::Pass => AnsiColor::Green.on_default().bold(),
        Outcome::Fail => AnsiColor::Red.on_default().bold(),
        Outcome::Skip { .. } | Outcome::Interrupted { .. } | Outcome::Inconclusive { .. } => {
            AnsiColor::Yellow.on_default().bold()
        }
    };
    let _ = writeln!(out, "RESULT: {}", paint(style, &v.outcome.to_string()));
    out
}

/// Lines that are judged (ok or FAIL): each is a JUnit testcase. Info lines are properties.
fn judged(v: &Verdict) -> impl Iterator<Item = &Line> {
    v.lines.iter().filter(|l| l.status != Status::Info)
}

/// What a report says of the run besides its verdict: its name and when and where it ran.
#[derive(Debug, Clone, Copy)]
pub struct RunInfo<'a> {
    /// The run's name: its directory.
    pub title: &'a str,
    /// The host it ran on.
    pub host: &'a str,
    /// Its start, UTC, RFC 3339.
    pub started_utc: &'a str,
    /// Its end, UTC, RFC 3339, when it ended.
    pub ended_utc: Option<&'a str>,
    /// The gate's version that ran it.
    pub tool_version: &'a str,
    /// The serve binary's sha256, hex, when one was launched.
    pub serve_sha256: Option<&'a str>,
    /// The model the requests named, when the serve got that far.
    pub model: Option<&'a str>,
}

impl<'a> RunInfo<'a> {
    /// What a report says of an archived run besides its verdict; `title` names it.
    pub fn of_archive(archive: &'a Archive, title: &'a str) -> Self {
        RunInfo {
            title,
            host: &archive.manifest.host,
            started_utc: &archive.manifest.started_utc,
            ended_utc: archive.manifest.ended_utc.as_deref(),
            tool_version: &archive.manifest.tool_version,
            serve_sha256: archive
                .manifest
                .serve_binary
                .as_ref()
                .map(|b| b.sha256.as_str()),
            model: archive.manifest.model.as_deref(),
        }
    }

    /// Seconds from start to end, where both are known.
    fn seconds(&self) -> Option<f64> {
        let at = |t: &str| humantime::parse_rfc3339(t).ok();
        let (start, end) = (at(self.started_utc)?, at(self.ended_utc?)?);
        Some(end.duration_since(start).ok()?.as_secs_f64())
    }

    /// The start as JUnit's `timestamp` has it: ISO 8601 without a zone.
    fn timestamp(&self) -> &str {
        self.started_utc.trim_end_matches('Z')
    }
}

/// JUnit XML: one testcase per judged line, and one for the RESULT itself. A FAIL line is a
/// failure with its text; under a SKIP, failed lines and the result are skipped with the
/// reason; an interruption is an error; info lines (load, hold, stop) are properties.
///
/// It validates against the Surefire/Jenkins JUnit schema (junit-10.xsd, as pytest's tests
/// carry it): `skipped` only on the testsuite, `time`, `timestamp` and `hostname` set, each
/// testcase's line in its `system-out`, so CI shows the figure beside the check.
pub fn junit(v: &Verdict, run: &RunInfo<'_>) -> Vec<u8> {
    let suite = run.title;
    let cases: Vec<&Line> = judged(v).collect();
    // A skipped run's failed checks, and every check of an interrupted run, were not judged to
    // the end: they are skipped with the reason, so a cancelled job never reads in test
    // history as a rate regression. Only a judged check fails.
    let interrupted = format!("not judged: RESULT: {}", v.outcome);
    let (skip_reason, skip_all) = match &v.outcome {
        Outcome::Skip { reason, .. } => (Some(reason.as_str()), false),
        Outcome::Inconclusive { reason } => (Some(reason.as_str()), false),
        Outcome::Interrupted { .. } => (Some(interrupted.as_str()), true),
        _ => (None, false),
    };
    // An inconclusive line is skipped with its own text: CI shows it as neither pass nor fail.
    let skips = |l: &Line| {
        l.status == Status::Inconclusive
            || (skip_reason.is_some() && (skip_all || l.status == Status::Fail))
    };
    let failures = cases
        .iter()
        .filter(|l| l.status == Status::Fail && !skips(l))
        .count()
        + usize::from(v.outcome == Outcome::Fail);
    let skipped = cases.iter().filter(|l| skips(l)).count()
        + usize::from(matches!(
            v.outcome,
            Outcome::Skip { .. } | Outcome::Inconclusive { .. }
        ));
    let errors = usize::from(matches!(v.outcome, Outcome::Interrupted { .. }));
    let tests = cases.len() + 1;
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    let counts = [
        ("tests", tests.to_string()),
        ("failures", failures.to_string()),
        ("errors", errors.to_string()),
        ("skipped", skipped.to_string()),
    ];
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let time = format!("{:.3}", run.seconds().unwrap_or(0.0));
    let mut suites = BytesStart::new("testsuites");
    suites.push_attribute(("name", "npu-serve-smoke"));
    // The schema has no `skipped` on testsuites: only on each testsuite.
    for (k, val) in counts.iter().filter(|(k, _)| *k != "skipped") {
        suites.push_attribute((*k, val.as_str()));
    }
    suites.push_attribute(("time", time.as_str()));
    let _ = w.write_event(Event::Start(suites));
    let mut suite_el = BytesStart::new("testsuite");
    suite_el.push_attribute(("name", xml_text(suite).as_ref()));
    for (k, val) in &counts {
        suite_el.push_attribute((*k, val.as_str()));
    }
    suite_el.push_attribute(("time", time.as_str()));
    suite_el.push_attribute(("timestamp", xml_text(run.timestamp()).as_ref()));
    suite_el.push_attribute(("hostname", xml_text(run.host).as_ref()));
    let _ = w.write_event(Event::Start(suite_el));
    let _ = w.write_event(Event::Start(BytesStart::new("properties")));
    let result = format!("RESULT: {}", v.outcome);
    let info = v
        .lines
        .iter()
        .filter(|l| l.status == Status::Info)
        .map(|l| (l.check.name(), l.text.as_str()))
        .chain(std::iter::once(("result", result.as_str())));
    for (name, value) in info {
        let mut p = BytesStart::new("property");
        p.push_attribute(("name", xml_text(name).as_ref()));
        p.push_attribute(("value", xml_text(value).as_ref()));
        let _ = w.write_event(Event::Empty(p));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("properties")));
    let case = |w: &mut Writer<Vec<u8>>, name: &str, inner: Option<(&str, &str)>, out: &str| {
        let mut c = BytesStart::new("testcase");
        c.push_attribute(("classname", "npu-serve-smoke"));
        c.push_attribute(("name", xml_text(name).as_ref()));
        c.push_attribute(("time", "0"));
        let _ = w.write_event(Event::Start(c));
        if let Some((kind, text)) = inner {
            let text = xml_text(text);
            let mut el = BytesStart::new(kind);
            el.push_attribute(("message", text.as_ref()));
            let _ = w.write_event(Event::Start(el));
            let _ = w.write_event(Event::Text(BytesText::new(&text)));
            let _ = w.write_event(Event::End(BytesEnd::new(kind)));
        }
        let _ = w.write_event(Event::Start(BytesStart::new("system-out")));
        let _ = w.write_event(Event::Text(BytesText::new(&xml_text(out))));
        let _ = w.write_event(Event::End(BytesEnd::new("system-out")));
        let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
    };
    for l in &cases {
        let inner = match (skips(l), skip_reason, l.status) {
            (true, _, Status::Inconclusive) => Some(("skipped", l.text.as_str())),
            (true, Some(reason), _) => Some(("skipped", reason)),
            (_, _, Status::Fail) => Some(("failure", l.text.as_str())),
            _ => None,
        };
        case(&mut w, l.check.name(), inner, &l.to_string());
    }
    let inner = match &v.outcome {
        Outcome::Pass => None,
        Outcome::Fail => Some(("failure", result.as_str())),
        Outcome::Skip { .. } | Outcome::Inconclusive { .. } => Some(("skipped", result.as_str())),
        Outcome::Interrupted { .. } => Some(("error", result.as_str())),
    };
    case(&mut w, "result", inner, &result);
    let _ = w.write_event(Event::End(BytesEnd::new("testsuite")));
    let _ = w.write_event(Event::End(BytesEnd::new("testsuites")));
    let mut out = w.into_inner();
    out.push(b'\n');
    out
}

/// The latency line's percentiles as a Markdown table, named as vLLM's and guidellm's reports
/// name them; empty when the verdict has no latency figures.
/// The latency percentiles a line's figures have, each with its name as the reports print it:
/// TTFT, ITL, TPOT, E2EL.
pub(crate) fn latency_rows(
    f: &crate::archive::record::Figures,
) -> impl Iterator<Item = (&'static str, &crate::archive::record::Percentiles)> {
    [
        ("TTFT (time to first token)", &f.ttft_ms),
        ("ITL (inter-token latency)", &f.itl_ms),
        ("TPOT (time per output token)", &f.tpot_ms),
        ("E2EL (end-to-end latency)", &f.e2el_ms),
    ]
    .into_iter()
    .filter_map(|(name, p)| Some((name, p.as_ref()?)))
}

fn latency_table(v: &Verdict) -> String {
    let Some(f) = v
        .lines
        .iter()
        .find(|l| l.check == Check::Latency)
        .and_then(|l| l.figures.as_ref())
    else {
        return String::new();
    };
    let mut md = String::new();
    for (name, p) in latency_rows(f) {
        let _ = writeln!(
            md,
            "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            p.count, p.mean, p.p50, p.p90, p.p99
        );
    }
    if md.is_empty() {
        return md;
    }
    format!(
        "\n| latency (ms) | values | mean | p50 | p90 | p99 |\n| --- | --- | --- | --- | --- | --- |\n{md}"
    )
}

/// The Markdown tables of the lines that are modules of their own ([`crate::lines`]), in the
/// registry's order; each empty without its line.
macro_rules! registered_tables {
    ($($module:ident: $check:ident after $after:ident { $($entry:tt)* };)*) => {
        fn registered_tables(v: &Verdict) -> String {
            [$(crate::lines::$module::summary_table(v)),*].concat()
        }
    };
}
crate::lines::every_line!(registered_tables);

/// A Markdown summary (for GitHub's step summary): the lines, the latency percentiles, then
/// each reply's figures (a warm-up marked, since it is not judged).
pub fn markdown(v: &Verdict, replies: &[ReplyRecord], title: &str) -> String {
    let cell = |s: &str| md_inert(s);
    let mut md = format!(
        "### {} — RESULT: {}\n\n",
        cell(title),
        cell(&v.outcome.to_string())
    );
    md.push_str("| check | status | detail |\n| --- | --- | --- |\n");
    for l in &v.lines {
        let _ = writeln!(md, "| {} | {} | {} |", l.check, l.status, cell(&l.text));
    }
    md.push_str(&latency_table(v));
    md.push_str(&registered_tables(v));
    md.push_str(&reference_table::reference_table(v));
    if !replies.is_empty() {
        md.push_str("\n| reply | tokens | first token (ms) | rate (tok/s) | finish | error |\n");
        md.push_str("| --- | --- | --- | --- | --- | --- |\n");
        for r in replies {
            let cells = reply_cells(r).map(|c| cell(&c));
            let _ = writeln!(md, "| {} |", cells.join(" | "));
        }
    }
    md.push('\n');
    md
}

/// `s` as inert Markdown for a table cell: [`crate::inert::markdown`].
/// A reply's row as the reports list it, unescaped: the reply (marked if a warm-up), its
/// tokens, first token (ms), rate (tok/s), finish_reason and error (the last two foreign).
pub(crate) fn reply_cells(r: &ReplyRecord) -> [String; 6] {
    let m = measure(r);
    let figure = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
    [
        format!("{}{}", r.index, if r.warmup { " (warm-up)" } else { "" }),
        m.tokens.to_string(),
        figure(m.first_token_ms, 0),
        figure(m.rate_tok_s, 1),
        r.finish_reason.as_deref().unwrap_or("-").to_string(),
        r.error.as_deref().unwrap_or("").to_string(),
    ]
}

pub fn md_inert(s: &str) -> String {
    crate::inert::markdown(s)
}

/// `s` safe in XML text or an attribute: [`crate::inert::xml`].
fn xml_text(s: &str) -> std::borrow::Cow<'_, str> {
    crate::inert::xml(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::cases;
    use quick_xml::events::Event;
    use quick_xml::Reader;

    fn verdict(case: &str) -> Verdict {
        cases::named(case)
            .unwrap_or_else(|| panic!("no case {case:?}"))
            .verdict()
            .unwrap()
    }

    /// A run named `title` that ran for 5 s on `box1`.
    fn info(title: &str) -> RunInfo<'_> {
        RunInfo {
            title,
            host: "box1",
            started_utc: "2026-12-01T10:00:00Z",
            ended_utc: Some("2026-12-01T10:00:05Z"),
            tool_version: "0.1.0",
            serve_sha256: None,
            model: None,
        }
    }

    const PASS: &str = "a good run passes";
    const FAIL: &str =
        "the busy-box row is named: fast route, right answers, 50 tok/s under 60, load 10 per CPU";
    const SKIP: &str = "with --busy-skip the busy-box run is SKIP";
    const INTERRUPTED: &str = "an interrupted run is INTERRUPTED, never PASS";

    #[test]
    fn human_lines_for_each_result() {
        insta::assert_snapshot!("pass", human(&verdict(PASS), false));
        insta::assert_snapshot!("fail", human(&verdict(FAIL), false));
        insta::assert_snapshot!("skip", human(&verdict(SKIP), false));
        insta::assert_snapshot!("interrupted", human(&verdict(INTERRUPTED), false));
    }

    #[test]
    fn no_color_and_a_dumb_terminal_turn_colour_off() {
        use std::ffi::OsStr;
        let os = |s: &'static str| Some(OsStr::new(s));
        assert!(colour_allowed(None, os("xterm-256color")));
        assert!(colour_allowed(os(""), None));
        assert!(!colour_allowed(os("1"), os("xterm")));
        assert!(!colour_allowed(None, os("dumb")));
    }

    #[test]
    fn colour_paints_only_the_status_words() {
        let v = verdict(FAIL);
        let coloured = human(&v, true);
        assert!(coloured.contains("\u{1b}["), "{coloured}");
        let plain: String = strip_ansi(&coloured);
        assert_eq!(plain, human(&v, false));
    }

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for d in chars.by_ref() {
                    if d == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    /// (testcase name, its failure/skipped/error element, if any).
    type Case = (String, Option<String>);

    /// Each testcase, and the suite's counts.
    fn parse_junit(xml: &[u8]) -> (Vec<Case>, Vec<(String, String)>) {
        let mut reader = Reader::from_reader(xml);
        let mut cases: Vec<Case> = Vec::new();
        let mut counts = Vec::new();
        let mut buf = Vec::new();
        loop {
            match reader.read_event_into(&mut buf).expect("well-formed XML") {
                Event::Eof => break,
                Event::Start(e) | Event::Empty(e) => {
                    let attr = |name: &str| {
                        e.attributes()
                            .flatten()
                            .find(|a| a.key.as_ref() == name.as_bytes())
                            .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                    };
                    match e.name().as_ref() {
                        b"testsuite" => {
                            for k in ["tests", "failures", "errors", "skipped"] {
                                counts.push((k.to_string(), attr(k).unwrap()));
                            }
                        }
                        b"testcase" => cases.push((attr("name").unwrap(), None)),
                        kind @ (b"failure" | b"skipped" | b"error") => {
                            cases.last_mut().unwrap().1 =
                                Some(String::from_utf8_lossy(kind).into_owned());
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
            buf.clear();
        }
        (cases, counts)
    }

    fn counts(t: &str, f: &str, e: &str, s: &str) -> Vec<(String, String)> {
        [("tests", t), ("failures", f), ("errors", e), ("skipped", s)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn junit_has_a_testcase_per_judged_line_and_parses_back() {
        let (cases, c) = parse_junit(&junit(&verdict(PASS), &info("runs/a")));
        let names: Vec<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "route",
                "rate",
                "first-token",
                "content",
                "output",
                "result"
            ]
        );
        assert!(cases.iter().all(|(_, k)| k.is_none()));
        assert_eq!(c, counts("6", "0", "0", "0"));

        let (cases, c) = parse_junit(&junit(&verdict(FAIL), &info("runs/a")));
        assert_eq!(cases[1], ("rate".to_string(), Some("failure".to_string())));
        assert_eq!(cases.last().unwrap().1.as_deref(), Some("failure"));
        assert_eq!(c, counts("6", "2", "0", "0"));

        let (cases, c) = parse_junit(&junit(&verdict(SKIP), &info("runs/a")));
        assert_eq!(cases[1], ("rate".to_string(), Some("skipped".to_string())));
        assert_eq!(c, counts("6", "0", "0", "2"));

        // An interrupted run's checks were not judged to the end: skipped, never failed; the
        // result itself is the error.
        let (cases, c) = parse_junit(&junit(&verdict(INTERRUPTED), &info("runs/a")));
        assert_eq!(cases.last().unwrap().1.as_deref(), Some("error"));
        assert!(
            cases[..cases.len() - 1]
                .iter()
                .all(|(_, k)| k.as_deref() == Some("skipped")),
            "{cases:?}"
        );
        assert_eq!(c, counts("6", "0", "1", "5"));

        // Interrupted before any reply: the FAILs of "no replies to measure" are skipped too.
        let mut v = verdict(FAIL);
        v.outcome = Outcome::Interrupted {
            signal: "SIGTERM".into(),
        };
        let xml = String::from_utf8(junit(&v, &info("runs/a"))).unwrap();
        let (cases, c) = parse_junit(xml.as_bytes());
        assert_eq!(cases[1], ("rate".to_string(), Some("skipped".to_string())));
        assert_eq!(c, counts("6", "0", "1", "5"));
        assert!(
            xml.contains("<skipped message=\"not judged: RESULT: INTERRUPTED (by SIGTERM)\">"),
            "{xml}"
        );
        assert!(!xml.contains("<failure"), "{xml}");
    }

    #[test]
    fn junit_keeps_info_lines_as_properties_and_escapes_text() {
        let xml = String::from_utf8(junit(&verdict(FAIL), &info("runs/<rc3> & \"x\""))).unwrap();
        assert!(
            xml.contains("<property name=\"load\" value=\"1-minute load average 320.0 on 32 CPUs"),
            "{xml}"
        );
        assert!(
            xml.contains("runs/&lt;rc3&gt; &amp; &quot;x&quot;"),
            "{xml}"
        );
        insta::assert_snapshot!("junit_fail", xml);
    }

    /// A verdict whose lines quote a serve that printed garbage: raw, as a line's text can
    /// hold it (error messages and patterns are not all quoted).
    fn garbage_verdict() -> Verdict {
        let mut v = verdict(FAIL);
        v.lines[1].text =
            "reply 1 said \u{1b}[31m<b>*hi*</b> `x` [a](http://e) &amp; \u{7}\u{1}\u{fffe}|\r\nend"
                .into();
        v
    }

    #[test]
    fn junit_stays_well_formed_whatever_the_serve_printed() {
        let xml = junit(&garbage_verdict(), &info("runs/\u{1b}x"));
        let text = String::from_utf8(xml.clone()).unwrap();
        for c in ['\u{1b}', '\u{7}', '\u{1}', '\u{fffe}'] {
            assert!(!text.contains(c), "{c:?} raw in {text}");
        }
        assert!(
            text.contains("\\u{1b}[31m&lt;b&gt;*hi*&lt;/b&gt;"),
            "{text}"
        );
        let (cases, _) = parse_junit(&xml);
        assert_eq!(cases[1].1.as_deref(), Some("failure"));
    }

    #[test]
    fn serve_text_is_inert_in_the_terminal_and_in_markdown() {
        let v = garbage_verdict();
        for out in [human(&v, false), human(&v, true)] {
            let first = out.lines().nth(1).unwrap();
            assert!(
                !first.contains('\u{7}') && !first.contains('\u{1}'),
                "{first:?}"
            );
            assert!(first.contains("\\u{1b}[31m"), "{first:?}");
            // The only escapes left are the gate's own colour around the status word.
            let serve_part = &first[first.find("reply 1").unwrap()..];
            assert!(!serve_part.contains('\u{1b}'), "{serve_part:?}");
        }
        let md = markdown(&v, &[], "runs/a");
        let row = md.lines().find(|l| l.starts_with("| rate ")).unwrap();
        assert!(
            row.contains("\\<b\\>\\*hi\\*\\</b\\> \\`x\\` \\[a\\](http://e) \\&amp; \\u{7}\\u{1}\u{fffe}\\|  end |"),
            "{row}"
        );
        assert_eq!(md_inert("a_b"), "a\\_b");
    }

    #[test]
    fn markdown_has_the_lines_and_the_replies() {
        let md = markdown(&verdict(FAIL), &[], "runs/a|b");
        assert!(md.starts_with("### runs/a\\|b — RESULT: FAIL\n"), "{md}");
        assert!(md.contains("| rate | FAIL | median 50.0 tok/s"), "{md}");
        let replies = [crate::selftest::cases::reply(&[100, 200, 300], "Paris")];
        let md = markdown(&verdict(PASS), &replies, "r");
        assert!(md.contains("| 1 | 3 | 100 | 10.0 | stop |  |"), "{md}");
    }

    #[test]
    fn markdown_has_the_latency_percentiles_and_marks_warm_ups() {
        let mut warm = crate::selftest::cases::reply(&[100, 200, 300], "Paris");
        warm.warmup = true;
        let md = markdown(&verdict(PASS), &[warm], "r");
        assert!(
            md.contains("| latency (ms) | values | mean | p50 | p90 | p99 |\n"),
            "{md}"
        );
        // PASS's replies: first token at 200 ms, 10 ms apart, 11 tokens.
        assert!(
            md.contains("| TTFT (time to first token) | 3 | 200.0 | 200.0 | 200.0 | 200.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| TPOT (time per output token) | 3 | 10.0 | 10.0 | 10.0 | 10.0 |"),
            "{md}"
        );
        assert!(md.contains("| 1 (warm-up) | 3 |"), "{md}");
        // A verdict without a latency line (a serve that never came up) has no table.
        let mut bare = verdict(PASS);
        bare.lines.retain(|l| l.check != "latency");
        assert!(!markdown(&bare, &[], "r").contains("latency (ms)"));
    }

    /// The goodput line (`--slo`) is a judged testcase in JUnit and a table in the summary.
    #[test]
    fn goodput_is_a_junit_testcase_and_a_summary_table() {
        use crate::lines::goodput::record::SloFloors;
        let mut replies: Vec<ReplyRecord> = [100, 700, 120]
            .iter()
            .map(|&first| cases::reply(&[first, first + 10], "a"))
            .collect();
        for (i, r) in replies.iter_mut().enumerate() {
            r.index = i + 1;
        }
        replies[2].error = Some("cut".into());
        let slo = SloFloors {
            ttft_ms: Some(600.0),
            tpot_ms: Some(50.0),
            min_goodput: Some(0.9),
            ..SloFloors::default()
        };
        let mut v = verdict(PASS);
        v.lines
            .extend(crate::lines::goodput::goodput_line(&replies, &slo));
        let (cases, _) = parse_junit(&junit(&v, &info("runs/a")));
        assert!(
            cases.contains(&("goodput".to_string(), Some("failure".to_string()))),
            "{cases:?}"
        );
        let md = markdown(&v, &[], "r");
        assert!(
            md.contains(
                "| SLO target | met by | missed by | worst |\n| --- | --- | --- | --- |\n\
                 | ttft <= 600 ms | 1 of 3 | 1 | reply 2, 700.0 ms |\n\
                 | tpot <= 50 ms | 2 of 3 | 0 | - |\n\
                 | (every target) | - | 1 failed, 0 with no token | - |\n"
            ),
            "{md}"
        );
        assert!(!markdown(&verdict(PASS), &[], "r").contains("SLO target"));
    }
}
