//! `compare --html` (issue 39): the runs as the table has them (a line a group above its
//! runs), each RESULT spelled out and coloured, each run linking to its own report.html; the
//! picture of the fleet; then the notes the printed table has below it (changed archives,
//! unreadable directories, provenance differences).

use std::fmt::Write as _;

use super::row::{GroupKey, Row};
use super::table::differs;
use crate::report::html::{figure, inline_svg, page, result_class, table_head, text};

/// Where each run's own page is, from the page being written, or why it is not linked.
pub type RunLinks = [Result<String, String>];

/// The page of `rows` (in the table's order), with `links[i]` the way to row `i`'s report and
/// `picture` compare's SVG where it was drawn.
pub fn render(rows: &[Row], links: &RunLinks, picture: Option<&str>) -> String {
    let readable = rows.iter().filter(|r| r.group.is_some()).count();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<header>\n<h1>{readable} {} compared</h1>\n<p>Each RESULT is the run judged again as <code>judge DIR</code> judges it, with the floors its run.json records.</p>\n</header>",
        if readable == 1 { "run" } else { "runs" }
    );
    body.push_str(&table(rows, links));
    if let Some(svg) = picture {
        body.push_str("<h2 id=\"history\">Over time</h2>\n<figure>\n");
        body.push_str(&inline_svg(svg));
        body.push_str("\n</figure>\n");
    }
    let notes = notes(rows);
    if !notes.is_empty() {
        body.push_str("<h2 id=\"notes\">Notes</h2>\n<ul class=\"notes\">\n");
        for n in notes {
            let _ = writeln!(body, "<li class=\"detail\">{}</li>", text(&n));
        }
        body.push_str("</ul>\n");
    }
    page(
        &format!(
            "npu-serve-smoke: {readable} {} compared",
            if readable == 1 { "run" } else { "runs" }
        ),
        &body,
    )
}

/// The table: a group's line above its runs, a row a run.
fn table(rows: &[Row], links: &RunLinks) -> String {
    let mut out = table_head(
        "compare",
        &[
            "started (UTC)",
            "RESULT",
            "median rate (tok/s)",
            "floor",
            "median first token (ms)",
            "limit",
            "load before",
            "serve CPU wait",
            "run",
        ],
    );
    let mut current: Option<&GroupKey> = None;
    for (i, r) in rows.iter().enumerate() {
        let Some(group) = &r.group else { continue };
        if current != Some(group) {
            let _ = writeln!(
                out,
                "<tr class=\"group\"><th colspan=\"9\">{}</th></tr>",
                text(&group.header())
            );
            current = Some(group);
        }
        let number = |v: Option<f64>, d: usize| figure(v, d);
        let load = match (r.load1, r.ncpu) {
            (Some(l), Some(n)) => format!("{l:.1} on {n} CPUs"),
            _ => "-".to_string(),
        };
        let wait = r
            .serve_cpu_wait
            .map_or("-".to_string(), |w| format!("{:.0}%", w * 100.0));
        let run = match links.get(i) {
            Some(Ok(href)) => format!("<a href=\"{}\">{}</a>", text(href), text(&r.dir)),
            Some(Err(why)) => format!(
                "{} <span class=\"note\">({})</span>",
                text(&r.dir),
                text(why)
            ),
            None => text(&r.dir),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"status {}\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{load}</td><td class=\"num\">{wait}</td><td>{run}</td></tr>",
            text(r.started_utc.as_deref().unwrap_or("-")),
            result_class(&r.result),
            text(&r.result),
            number(r.median_rate_tok_s, 1),
            number(r.rate_floor_tok_s, 1),
            number(r.median_first_token_ms, 0),
            number(r.first_token_limit_ms, 0),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// What the printed table says below itself: archives changed after their run, directories
/// that could not be read, and what later runs' provenance differs in.
fn notes(rows: &[Row]) -> Vec<String> {
    let mut notes = Vec::new();
    for r in rows {
        if let Some(changed) = &r.changed {
            notes.push(format!("{}: {changed}", r.dir));
        }
        if r.group.is_none() {
            let why = r.unreadable.as_deref().unwrap_or("no run.json");
            notes.push(format!("{}: unreadable: {why}", r.dir));
        }
    }
    notes.extend(
        differs(rows)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string),
    );
    notes
}
