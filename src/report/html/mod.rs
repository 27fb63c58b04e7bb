//! report.html: the verdict as a person opens it from a CI artifact (issue 39). One
//! self-contained page a run ([`run`]), written into every run directory and by `judge --html`;
//! here too what every page shares, which `compare --html` ([`crate::report::compare::html`])
//! uses for runs side by side.
//!
//! Self-contained: the styles and the pictures are inline, nothing is fetched, and no script is
//! needed (or allowed: the page's Content-Security-Policy lets nothing load and nothing run, so
//! a serve's string that escaped its escaping would still be inert). GitLab and Jenkins show an
//! artifact's HTML page in the browser; a page that needed the network would show blank there.
//!
//! Every string the gate did not write (a serve's replies and errors, a model id, a path, an
//! archive's words) goes through [`crate::inert::html`]. A status is spelled out beside its
//! colour (`FAIL`, `ok`), so a reader without colour reads the same.
//!
//! Pure: text in, text out; where each page goes is the caller's ([`crate::live`], `judge`,
//! `compare`).

pub mod run;

use std::fmt::Write as _;
use std::path::{Component, Path};

use crate::archive::record::{Outcome, Status};

/// `s` as HTML text or a double-quoted attribute value.
pub fn text(s: &str) -> String {
    crate::inert::html(s)
}

/// A page: the document around `body`, titled `title` (foreign: escaped here).
pub fn page(title: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + STYLE.len() + 512);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    // Nothing loads and nothing runs: the styles are inline, the pictures are inline SVG.
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n",
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>{}</title>", text(title));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>");
    out.push_str(body);
    out.push_str("</body>\n</html>\n");
    out
}

/// The page's styles: readable without them (every status is a word), coloured with them.
const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif;
  margin: 1.5em auto; max-width: 78em; padding: 0 1em; color: #1d1d1d; line-height: 1.4; }
h1 { font-size: 1.6em; margin: 0; }
h2 { font-size: 1.2em; margin: 1.6em 0 0.5em; border-bottom: 1px solid #ddd; }
.result { padding: 0.8em 1em; border-radius: 6px; border: 2px solid; }
.result p { margin: 0.3em 0 0; }
.outcome-pass { background: #e6f4ea; border-color: #1b7f3a; }
.outcome-fail { background: #fdecea; border-color: #b3261e; }
.outcome-other { background: #fff4e0; border-color: #b36b00; }
table { border-collapse: collapse; margin: 0.4em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { font-weight: bold; white-space: nowrap; }
.status-ok { background: #e6f4ea; color: #14632c; }
.status-fail { background: #fdecea; color: #8c1d18; }
.status-inconclusive { background: #fff4e0; color: #7a4a00; }
.status-info { color: #555; }
.detail { white-space: pre-wrap; overflow-wrap: anywhere; }
details summary { cursor: pointer; color: #444; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; }
figure { margin: 0.5em 0; overflow-x: auto; }
figure svg { max-width: none; height: auto; }
.note { color: #555; }
code { overflow-wrap: anywhere; }
";

/// The class and the word of a line's status: the word is the status as the human lines
/// print it, so the page says what the terminal said.
pub fn status_cell(status: Status) -> String {
    let class = match status {
        Status::Ok => "status-ok",
        Status::Fail => "status-fail",
        Status::Inconclusive => "status-inconclusive",
        Status::Info => "status-info",
    };
    format!("<td class=\"status {class}\">{status}</td>")
}

/// The class of the RESULT's box.
pub fn outcome_class(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "outcome-pass",
        Outcome::Fail => "outcome-fail",
        _ => "outcome-other",
    }
}

/// A result word of an archive (compare's rows hold it as text) as its class.
pub fn result_class(result: &str) -> &'static str {
    match result {
        "PASS" => "status-ok",
        "FAIL" => "status-fail",
        _ => "status-inconclusive",
    }
}

/// An SVG picture to put inside the page: the XML prolog dropped (an HTML parser reads it as a
/// bogus comment), and any character HTML's parser calls an error (a control, a noncharacter:
/// the picture's texts are a serve's words too) shown as its escape.
pub fn inline_svg(svg: &str) -> String {
    let svg = match svg.find("<svg") {
        Some(at) => &svg[at..],
        None => svg,
    };
    let mut out = String::with_capacity(svg.len());
    for c in svg.chars() {
        if crate::inert::is_noncharacter(c) || (crate::inert::acts(c) && !matches!(c, '\n' | '\t'))
        {
            crate::inert::push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// The way from the page to be written at `page` to the directory `dir`, ending in `/`, as a
/// browser resolves it from where the page was opened: both made absolute against the working
/// directory and their `..` folded by name, never by following a link, so a page and the runs
/// it links, copied together as one artifact, keep their links (a canonical path would climb
/// out through a link to where it pointed on this box). `Err` says why there is no way.
pub fn way_to(page: &Path, dir: &Path) -> Result<String, String> {
    let absolute = |p: &Path| {
        std::path::absolute(p)
            .map(|p| folded(&p))
            .map_err(|e| format!("the working directory could not be read ({e})"))
    };
    let page = absolute(page)?;
    let from = page.parent().unwrap_or(Path::new("/"));
    let to = absolute(dir)?;
    Ok(format!("{}/", relative_href(from, &to)))
}

/// `p` (absolute) with `.` dropped and each `..` taking away the name before it.
fn folded(p: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// The relative address of `to` as seen from a page in the directory `from`: both absolute
/// and with no `.` or `..` (canonical), each name percent-encoded (RFC 3986's unreserved
/// characters kept), so a name with `#`, `?`, a space or a quote is still the file's.
pub fn relative_href(from: &Path, to: &Path) -> String {
    let names = |p: &Path| -> Vec<Vec<u8>> {
        use std::os::unix::ffi::OsStrExt;
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.as_bytes().to_vec()),
                _ => None,
            })
            .collect()
    };
    let (from, to) = (names(from), names(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(to[common..].iter().map(|n| percent_encoded(n)));
    if parts.is_empty() {
        return ".".to_string();
    }
    parts.join("/")
}

/// `name` percent-encoded but for RFC 3986's unreserved characters.
pub fn percent_encoded(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A table's opening, of class `class`, with its head row of `names` (the gate's words), up
/// to its body's first row.
pub fn table_head(class: &str, names: &[&str]) -> String {
    let mut out = format!("<table class=\"{class}\">\n<thead><tr>");
    for name in names {
        let _ = write!(out, "<th>{}</th>", text(name));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    out
}

/// A figure as the page shows it: `-` where absent, else to `digits` decimals.
pub fn figure(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_href_climbs_to_the_common_directory_and_encodes_each_name() {
        let href = |a: &str, b: &str| relative_href(Path::new(a), Path::new(b));
        assert_eq!(
            href("/w/out", "/w/runs/rc3/report.html"),
            "../runs/rc3/report.html"
        );
        assert_eq!(
            href("/w/runs/rc3", "/w/runs/rc3/replies.jsonl"),
            "replies.jsonl"
        );
        assert_eq!(href("/a/b/c", "/a"), "../..");
        assert_eq!(href("/a", "/a"), ".");
        assert_eq!(
            href("/w", "/w/r #1?\"x\"/report.html"),
            "r%20%231%3F%22x%22/report.html"
        );
    }

    #[test]
    fn the_way_to_a_run_is_told_by_name_from_where_the_page_is() {
        let cwd = std::env::current_dir().unwrap();
        let way = |page: &str, dir: &str| way_to(Path::new(page), Path::new(dir)).unwrap();
        assert_eq!(way("page.html", "runs/rc3"), "runs/rc3/");
        assert_eq!(way("out/page.html", "runs/./rc3"), "../runs/rc3/");
        assert_eq!(way("out/x/../page.html", "runs/rc3/.."), "../runs/");
        assert_eq!(way("/w/pages/p.html", "/w/runs/rc3"), "../runs/rc3/");
        // An absolute run and a page by a relative name meet where the working directory is.
        let run = cwd.join("runs/rc3");
        assert_eq!(way("p.html", run.to_str().unwrap()), "runs/rc3/");
        assert_eq!(way("p.html", "."), "./");
    }

    #[test]
    fn an_inlined_picture_loses_its_prolog_and_shows_what_html_calls_an_error() {
        let svg =
            "<?xml version=\"1.0\"?>\n<svg>\n\t<text>a\u{202e}b\u{fdd0}\u{7}\u{1fffe}</text></svg>";
        assert_eq!(
            inline_svg(svg),
            "<svg>\n\t<text>a\\u{202e}b\\u{fdd0}\\u{7}\\u{1fffe}</text></svg>"
        );
        assert_eq!(inline_svg("<svg>\u{fffd}é</svg>"), "<svg>\u{fffd}é</svg>");
    }

    #[test]
    fn the_page_lets_nothing_load_or_run_and_escapes_its_title() {
        let p = page("runs/<b>x</b>", "<p>body</p>\n");
        assert!(p.starts_with("<!DOCTYPE html>"));
        assert!(p.contains("default-src 'none'"), "{p}");
        assert!(
            p.contains("<title>runs/&lt;b&gt;x&lt;/b&gt;</title>"),
            "{p}"
        );
        assert!(!p.contains("<script"), "{p}");
    }

    #[test]
    fn each_status_is_a_word_beside_its_colour() {
        assert_eq!(
            status_cell(Status::Fail),
            "<td class=\"status status-fail\">FAIL</td>"
        );
        assert!(status_cell(Status::Ok).ends_with(">ok</td>"));
        assert!(status_cell(Status::Inconclusive).ends_with(">inconclusive</td>"));
        assert!(status_cell(Status::Info).ends_with(">info</td>"));
    }
}
