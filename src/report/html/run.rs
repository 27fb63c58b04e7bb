//! A run's page: the RESULT first; the verdict's lines as a table, each with its status
//! spelled out and its own figures; the run's figures (rate, first token, the latency
//! percentiles, load); the timeline; the replies; the conditions and provenance; and the run's
//! files, linked by relative path.

use std::fmt::Write as _;

use super::{figure, inline_svg, outcome_class, page, status_cell, table_head, text};
use crate::archive::check::Check;
use crate::archive::record::{Figures, Line, Percentiles, ReplyRecord};
use crate::archive::rundir::{self, Archive, ResultFile};
use crate::judging::verdict::words::grouped;

/// The most replies the page lists one a row: past this the rest are counted, and
/// replies.jsonl (linked) has them all; a soak's 20,000 rows would be a page of megabytes.
pub const MOST_REPLY_ROWS: usize = 200;

/// What a run's page shows.
#[derive(Debug, Clone, Copy)]
pub struct RunPage<'a> {
    /// The run's directory as it was named (foreign: a path).
    pub title: &'a str,
    /// Who judged what the page shows, in a few words: `run, as it ran`, or `judge, from the
    /// archive`.
    pub judged_by: &'a str,
    /// The verdict and what was not archived.
    pub result: &'a ResultFile,
    /// The run's records.
    pub archive: &'a Archive,
    /// timeline.svg's text, where it was drawn.
    pub timeline: Option<&'a str>,
    /// The run's files, by name, each linked unless it says why not: see [`archived_files`].
    pub files: &'a [RunFile],
    /// What goes before a file's name in its link: empty on a page inside the run directory,
    /// the way there (ending in `/`) on one elsewhere; `Err` says why there is no way (then no
    /// file is linked).
    pub files_href: Result<&'a str, &'a str>,
}

/// A file of the run, as the page lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFile {
    /// Its name in the run directory.
    pub name: String,
    /// Why it is not linked (`None`: linked): absent, or changed after the run.
    pub unlinked: Option<String>,
}

impl RunFile {
    /// A file to link.
    pub fn linked(name: &str) -> Self {
        RunFile {
            name: name.to_string(),
            unlinked: None,
        }
    }
}

/// The run's files its records say it has, in the order a reader wants them: run.json,
/// result.json, replies.jsonl, serve.log, then the others. The timeline and the page itself are
/// the caller's to add (they are drawn, not recorded); so is looking whether each is there.
pub fn archived_files(archive: &Archive) -> Vec<String> {
    let has = [
        (rundir::MANIFEST, true),
        (rundir::RESULT, true),
        (rundir::REPLIES, true),
        (
            rundir::SERVE_LOG,
            archive.manifest.serve_log_source.has_log(),
        ),
        (
            rundir::LOAD,
            archive.load.is_some() || archive.load_problem.is_some(),
        ),
        (
            rundir::ROUTE,
            archive.route.is_some() || archive.route_problem.is_some(),
        ),
        (
            rundir::METRICS,
            archive.metrics.is_some() || archive.metrics_problem.is_some(),
        ),
        (
            rundir::REANCHORS,
            !archive.reanchors.is_empty() || archive.reanchors_problem.is_some(),
        ),
    ];
    has.iter()
        .filter(|(_, has)| *has)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The page of a run.
pub fn render(p: &RunPage) -> String {
    let verdict = &p.result.verdict;
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<header class=\"result {}\">\n<h1>RESULT: {}</h1>\n<p><code>{}</code>: judged by {}</p>\n</header>",
        outcome_class(&verdict.outcome),
        text(&verdict.outcome.to_string()),
        text(p.title),
        text(p.judged_by),
    );
    if !p.result.not_archived.is_empty() {
        body.push_str("<p class=\"note\">The archive is incomplete; the verdict stands on what the gate held in memory:</p>\n<ul>\n");
        for missing in &p.result.not_archived {
            let _ = writeln!(body, "<li>{}</li>", text(&missing.to_string()));
        }
        body.push_str("</ul>\n");
    }
    body.push_str(&lines_table(&verdict.lines));
    body.push_str(&figures_section(&verdict.lines));
    if let Some(svg) = p.timeline {
        body.push_str("<h2 id=\"timeline\">Timeline</h2>\n<figure>\n");
        body.push_str(&inline_svg(svg));
        body.push_str("\n</figure>\n");
    }
    body.push_str(&replies_table(&p.archive.replies));
    body.push_str(&conditions(p.archive));
    body.push_str(&provenance(p.archive));
    body.push_str(&files(p));
    page(&format!("{}: RESULT: {}", p.title, verdict.outcome), &body)
}

/// The verdict's lines: check, status (a word and a colour), what it says, and its figures
/// folded under it.
fn lines_table(lines: &[Line]) -> String {
    let mut out = String::from("<h2 id=\"verdict\">Verdict</h2>\n");
    out.push_str(&table_head("verdict", &["check", "status", "detail"]));
    for l in lines {
        let _ = write!(
            out,
            "<tr><td>{}</td>{}<td><div class=\"detail\">{}</div>",
            text(l.check.name()),
            status_cell(l.status),
            text(&l.text)
        );
        if let Some(f) = &l.figures {
            out.push_str(&figures_details(f));
        }
        out.push_str("</td></tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// A line's own figures, every one it recorded, folded: (name, value) as result.json names
/// them, nested ones by their path (`reference.agreement`).
fn figures_details(f: &Figures) -> String {
    let Ok(value) = serde_json::to_value(f) else {
        return String::new();
    };
    let mut rows = Vec::new();
    flatten("", &value, &mut rows);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<details><summary>figures</summary><table class=\"figures\">");
    for (name, v) in rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td></tr>",
            text(&name),
            text(&v)
        );
    }
    out.push_str("</table></details>");
    out
}

/// The most numbers a figure that is a list shows inline; past it, how many.
const MOST_LISTED: usize = 8;

/// `value`'s leaves as (path, value text): objects by their keys, short lists inline, long
/// ones counted, nulls left out.
fn flatten(path: &str, value: &serde_json::Value, rows: &mut Vec<(String, String)>) {
    use serde_json::Value;
    match value {
        Value::Null => {}
        Value::Object(map) => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(&p, v, rows);
            }
        }
        Value::Array(items) if items.len() > MOST_LISTED => {
            rows.push((
                path.to_string(),
                format!("{} values (result.json)", items.len()),
            ));
        }
        Value::Array(items) if items.iter().any(|i| i.is_object()) => {
            for (k, v) in items.iter().enumerate() {
                flatten(&format!("{path}[{k}]"), v, rows);
            }
        }
        Value::String(s) => rows.push((path.to_string(), s.clone())),
        v => rows.push((path.to_string(), v.to_string())),
    }
}

/// The figures of `check`'s line, where it has one with figures.
fn figures_of(lines: &[Line], check: Check) -> Option<&Figures> {
    lines
        .iter()
        .find(|l| l.check == check)
        .and_then(|l| l.figures.as_ref())
}

/// The run's headline figures: the rate and the first token against their floor and limit,
/// the latency percentiles, and the load.
fn figures_section(lines: &[Line]) -> String {
    let mut out = String::from("<h2 id=\"figures\">Figures</h2>\n");
    let mut rows = String::new();
    let mut row = |what: &str, f: Option<&Figures>, unit: &str, bound: &str, digits: usize| {
        let Some(f) = f else { return };
        let shown = |v: Option<f64>| match (v, digits) {
            (Some(v), 0) if v.is_finite() && v >= 0.0 => grouped(v.round() as u64),
            (v, _) => figure(v, digits),
        };
        let _ = writeln!(
            rows,
            "<tr><td>{what}</td><td class=\"num\">{} {unit}</td><td>{bound} {} {unit}</td><td class=\"num\">{}</td></tr>",
            shown(f.median),
            shown(f.floor.or(f.limit)),
            f.values.or(f.replies).map_or("-".to_string(), |n| n.to_string()),
        );
    };
    row(
        "decode rate (median)",
        figures_of(lines, Check::Rate),
        "tok/s",
        "floor",
        1,
    );
    row(
        "first token (median)",
        figures_of(lines, Check::FirstToken),
        "ms",
        "limit",
        0,
    );
    if !rows.is_empty() {
        out.push_str(&table_head(
            "figures",
            &["figure", "value", "held to", "values"],
        ));
        out.push_str(&rows);
        out.push_str("</tbody>\n</table>\n");
    }
    if let Some(f) = figures_of(lines, Check::Latency) {
        out.push_str(&latency_table(f));
    }
    if let Some(f) = figures_of(lines, Check::Load) {
        let _ = writeln!(
            out,
            "<p>Load during the run: 1-minute load average {} on {} CPUs; the serve's CPU wait {}; CPU pressure {} %.</p>",
            figure(f.load1, 2),
            f.ncpu.map_or("-".to_string(), |n| n.to_string()),
            figure(f.serve_cpu_wait, 3),
            figure(f.cpu_pressure_pct, 1),
        );
    }
    out
}

/// The latency percentiles (ms), as the step summary has them, with the time to the first
/// output (a reasoning model's first answer token) after the first token's.
fn latency_table(f: &Figures) -> String {
    let ttfo = f
        .ttfo_ms
        .as_ref()
        .map(|p| ("TTFO (time to first output)", p));
    let mut rows: Vec<(&str, &Percentiles)> = crate::report::latency_rows(f).collect();
    if let Some(ttfo) = ttfo {
        let after_ttft = usize::from(f.ttft_ms.is_some());
        rows.insert(after_ttft, ttfo);
    }
    let mut body = String::new();
    for (name, p) in rows {
        let _ = writeln!(
            body,
            "<tr><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td><td class=\"num\">{:.1}</td></tr>",
            p.count, p.mean, p.p50, p.p90, p.p99
        );
    }
    if body.is_empty() {
        return body;
    }
    let names = ["latency (ms)", "values", "mean", "p50", "p90", "p99"];
    format!(
        "{}{body}</tbody>\n</table>\n",
        table_head("latency", &names)
    )
}

/// A row a reply, up to [`MOST_REPLY_ROWS`].
fn replies_table(replies: &[ReplyRecord]) -> String {
    let mut out = format!(
        "<h2 id=\"replies\">Replies</h2>\n<p>{} {}.</p>\n",
        replies.len(),
        if replies.len() == 1 {
            "reply"
        } else {
            "replies"
        }
    );
    if replies.is_empty() {
        return out;
    }
    out.push_str(&table_head(
        "replies",
        &[
            "reply",
            "tokens",
            "first token (ms)",
            "rate (tok/s)",
            "finish",
            "error",
        ],
    ));
    for r in replies.iter().take(MOST_REPLY_ROWS) {
        let [reply, tokens, first, rate, finish, error] =
            crate::report::reply_cells(r).map(|c| text(&c));
        let _ = writeln!(
            out,
            "<tr><td>{reply}</td><td class=\"num\">{tokens}</td><td class=\"num\">{first}</td><td class=\"num\">{rate}</td><td>{finish}</td><td class=\"detail\">{error}</td></tr>",
        );
    }
    out.push_str("</tbody>\n</table>\n");
    if replies.len() > MOST_REPLY_ROWS {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more replies are in replies.jsonl.</p>",
            replies.len() - MOST_REPLY_ROWS
        );
    }
    out
}

/// The box the run ran on and what it did meanwhile.
fn conditions(archive: &Archive) -> String {
    let m = &archive.manifest;
    let mut rows: Vec<(&str, String)> = vec![
        ("host", m.host.clone()),
        ("started (UTC)", m.started_utc.clone()),
        (
            "ended (UTC)",
            m.ended_utc.clone().unwrap_or_else(|| "not recorded".into()),
        ),
    ];
    if let Some(load) = &archive.load {
        rows.push((
            "load average",
            format!(
                "{:.2} / {:.2} / {:.2} (1, 5, 15 min) on {} CPUs, {}",
                load.load1, load.load5, load.load15, load.ncpu, load.taken
            ),
        ));
        if let Some(during) = &load.during {
            rows.push((
                "sampled during the replies",
                format!("{} samples", during.samples.len()),
            ));
        }
    }
    if let Some(problem) = &archive.load_problem {
        rows.push(("load.json", problem.clone()));
    }
    if let Some(hold) = &m.hold {
        rows.push((
            "device hold",
            format!(
                "{} ({}, waited {:.0} ms)",
                hold.file,
                if hold.acquired { "held" } else { "not held" },
                hold.waited_ms
            ),
        ));
    }
    if let Some(interrupted) = &m.interrupted {
        rows.push(("interrupted by", interrupted.to_string()));
    }
    if let Some(died) = &m.serve_died {
        rows.push(("the serve", died.clone()));
    }
    let mut out = String::from("<h2 id=\"conditions\">Conditions</h2>\n");
    out.push_str(&key_values(&rows));
    out
}

/// What was run and with what: the serve, the model, the gate, the settings.
fn provenance(archive: &Archive) -> String {
    let m = &archive.manifest;
    let mut rows: Vec<(&str, String)> = vec![
        (
            "gate",
            format!(
                "npu-serve-smoke {} (commit {})",
                m.tool_version,
                m.tool_commit.as_deref().unwrap_or("not recorded")
            ),
        ),
        ("serve URL", m.url.clone()),
        (
            "model",
            m.model.clone().unwrap_or_else(|| "not recorded".into()),
        ),
    ];
    if let Some(b) = &m.serve_binary {
        rows.push((
            "serve binary",
            format!("{} ({} bytes, sha256 {})", b.path, b.size, b.sha256),
        ));
    }
    if let Some(argv) = &m.serve_argv {
        rows.push((
            "serve command",
            shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" ")),
        ));
    }
    rows.push((
        "gate command",
        shlex::try_join(m.argv.iter().map(String::as_str)).unwrap_or_else(|_| m.argv.join(" ")),
    ));
    rows.push((
        "replies planned",
        format!("{} over {} prompts", m.replies_planned, m.prompts.len()),
    ));
    let mut out = String::from("<h2 id=\"provenance\">Provenance</h2>\n");
    out.push_str(&key_values(&rows));
    for (what, value) in [
        ("settings", m.settings.clone()),
        (
            "provenance",
            m.provenance
                .as_ref()
                .and_then(|p| serde_json::to_value(p).ok()),
        ),
    ] {
        if let Some(v) = value {
            let pretty = serde_json::to_string_pretty(&v).unwrap_or_default();
            let _ = writeln!(
                out,
                "<details><summary>{what} (run.json)</summary><pre>{}</pre></details>",
                text(&pretty)
            );
        }
    }
    out
}

/// A two-column table of (what, value), the values foreign.
fn key_values(rows: &[(&str, String)]) -> String {
    let mut out = String::from("<table class=\"facts\">\n<tbody>\n");
    for (k, v) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td class=\"detail\">{}</td></tr>",
            text(k),
            text(v)
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// The run's files, each linked by its relative path; one the run could not write, one absent
/// or changed, or every one where there is no way to them from the page, named with why.
fn files(p: &RunPage) -> String {
    let mut out = String::from("<h2 id=\"files\">Files</h2>\n<ul class=\"files\">\n");
    if let Err(why) = p.files_href {
        let _ = writeln!(out, "<li class=\"note\">Not linked: {}</li>", text(why));
    }
    for file in p.files {
        let missing = p.result.not_archived.iter().find(|m| m.file == file.name);
        let why = match (missing, &file.unlinked) {
            (Some(m), _) => Some(format!("not archived ({})", m.error)),
            (None, Some(why)) => Some(why.clone()),
            (None, None) => None,
        };
        let _ = match (why, p.files_href) {
            (Some(why), _) => writeln!(out, "<li>{}: {}</li>", text(&file.name), text(&why)),
            (None, Ok(href)) => writeln!(
                out,
                "<li><a href=\"{}{}\">{}</a></li>",
                text(href),
                super::percent_encoded(file.name.as_bytes()),
                text(&file.name)
            ),
            (None, Err(_)) => writeln!(out, "<li>{}</li>", text(&file.name)),
        };
    }
    out.push_str("</ul>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::NotArchived;
    use crate::selftest::cases::{self, reply};

    fn archive(replies: Vec<ReplyRecord>) -> Archive {
        cases::archive_of(replies)
    }

    fn verdict_of(case: &str) -> ResultFile {
        ResultFile::new(cases::named(case).unwrap().verdict().unwrap())
    }

    fn page_of(result: &ResultFile, archive: &Archive, title: &str, files: &[RunFile]) -> String {
        render(&RunPage {
            title,
            judged_by: "run, as it ran",
            result,
            archive,
            timeline: Some("<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\"></svg>"),
            files,
            files_href: Ok("../runs/rc3/"),
        })
    }

    #[test]
    fn the_result_comes_first_then_each_line_with_its_status_spelled_out() {
        let failed = verdict_of(
            "the busy-box row is named: fast route, right answers, 50 tok/s under 60, load 10 per CPU",
        );
        let page = page_of(
            &failed,
            &archive(vec![reply(&[100, 110], "Paris")]),
            "runs/a",
            &[],
        );
        let result = page.find("<h1>RESULT: FAIL</h1>").expect("the RESULT");
        let verdict = page.find("<h2 id=\"verdict\">").expect("the lines");
        assert!(result < verdict);
        assert!(
            page.contains("<td class=\"status status-fail\">FAIL</td>"),
            "{page}"
        );
        assert!(page.contains("class=\"result outcome-fail\""), "{page}");
        // The rate line's own figures, and the headline figures with their floor.
        assert!(page.contains("<td>median</td>"), "{page}");
        assert!(page.contains("floor 60.0 tok/s"), "{page}");
        // The picture inline, without its XML prolog.
        assert!(page.contains("<figure>\n<svg width=\"10\""), "{page}");
        assert!(!page.contains("<?xml"));
    }

    #[test]
    fn foreign_strings_are_text_and_links_are_the_run_files_relative_path() {
        let hostile = "<script>alert(1)</script>\u{202e}&\"";
        let mut r = reply(&[100, 110], hostile);
        r.error = Some(hostile.into());
        r.finish_reason = Some(hostile.into());
        let mut a = archive(vec![r]);
        a.manifest.model = Some(hostile.into());
        a.manifest.host = hostile.into();
        let mut result = verdict_of("a good run passes");
        result.not_archived.push(NotArchived {
            file: rundir::LOAD.into(),
            error: hostile.into(),
            from_reply: None,
            replies_archived: None,
            replies_made: None,
        });
        let files = [
            RunFile::linked(rundir::REPLIES),
            RunFile::linked(rundir::LOAD),
            RunFile {
                name: rundir::REPORT.into(),
                unlinked: Some("changed after the run".into()),
            },
        ];
        let page = page_of(&result, &a, hostile, &files);
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains('\u{202e}'), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;\\u{202e}&amp;&quot;"));
        assert!(page.contains("<a href=\"../runs/rc3/replies.jsonl\">replies.jsonl</a>"));
        // What the run could not write is named, not linked.
        assert!(!page.contains("href=\"../runs/rc3/load.json\""), "{page}");
        assert!(page.contains("load.json: not archived"), "{page}");
        assert!(
            page.contains("<li>report.html: changed after the run</li>"),
            "{page}"
        );
    }

    #[test]
    fn a_soak_of_5000_replies_lists_the_first_and_counts_the_rest() {
        let replies: Vec<ReplyRecord> = (0..5000)
            .map(|i| {
                let mut r = reply(&[100, 110, 120], "Paris");
                r.index = i + 1;
                r
            })
            .collect();
        let page = page_of(
            &verdict_of("a good run passes"),
            &archive(replies),
            "runs/s",
            &[],
        );
        assert!(page.contains(&format!("<tr><td>{MOST_REPLY_ROWS}</td>")));
        assert!(!page.contains(&format!("<tr><td>{}</td>", MOST_REPLY_ROWS + 1)));
        assert!(page.contains(&format!(
            "{} more replies are in replies.jsonl",
            5000 - MOST_REPLY_ROWS
        )));
        assert!(page.len() < 200_000, "{} bytes", page.len());
    }

    #[test]
    fn long_lists_of_figures_are_counted_and_nested_ones_named_by_their_path() {
        let mut rows = Vec::new();
        let value = serde_json::json!({
            "median": 1.5, "none": null, "interval_95": [1.0, 2.0],
            "footprint": {"reply_end_bytes": (0..100).collect::<Vec<_>>(), "peak_bytes": 7},
        });
        flatten("", &value, &mut rows);
        let rows: Vec<String> = rows.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            rows,
            [
                "footprint.peak_bytes=7",
                "footprint.reply_end_bytes=100 values (result.json)",
                "interval_95=[1.0,2.0]",
                "median=1.5"
            ]
        );
    }
}
