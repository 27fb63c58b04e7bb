//! report.html as a person sees it (issue 39): every run directory has one, sealed with the
//! rest; `judge --html` and `compare --html` write theirs elsewhere. Each page is parsed by
//! html5lib (the HTML standard's parsing algorithm, as a browser parses) and must have no parse
//! error, nothing that loads or runs, and links that reach the run's files; each is rendered by
//! headless Chromium (Debian's) to a PNG, with no console message (the page writes none: any is
//! a blocked load, a script, an error) and a sane size. A hostile serve's strings are text.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::util::*;

/// The page readers: Chromium and the tests' Python with html5lib.
struct Readers {
    chromium: PathBuf,
    python: PathBuf,
}

fn readers() -> Option<Readers> {
    let [chromium, python] =
        <[PathBuf; 2]>::try_from(report_tools(&["CHROMIUM", "REPORT_TOOLS_PYTHON"])?).ok()?;
    Some(Readers { chromium, python })
}

/// The page as html5lib reads it: tests/data/html_check.py's JSON.
fn parsed(r: &Readers, page: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/html_check.py");
    let o = Command::new(&r.python)
        .arg(script)
        .arg(page)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "html_check.py {}: {}",
        page.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// What Chromium made of the page: the console's messages, and the PNG's width, height and
/// the height its content reaches (the last row with a pixel that is not the page's white).
struct Rendered {
    console: Vec<String>,
    width: u32,
    height: u32,
    content_height: u32,
    /// Whether the page's right margin is white from top to bottom: nothing wider than the
    /// window (a cut table) reaches it.
    right_margin_white: bool,
}

const WINDOW: (u32, u32) = (1280, 6000);

/// Render `page` in headless Chromium to `png` at [`WINDOW`]. Chromium logs each console
/// message on stderr as `...:CONSOLE:N] "message", source: ...`.
fn render(r: &Readers, page: &Path, png: &Path) -> Rendered {
    let profile = tempfile::tempdir().unwrap();
    let page = std::fs::canonicalize(page).unwrap();
    let o = Command::new("timeout")
        .arg("120")
        .arg(&r.chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && png.is_file(), "chromium: {stderr}");
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let row_bytes = info.line_size;
    let white = |px: &[u8]| px[..3] == [255, 255, 255];
    let content_height = (0..info.height)
        .rev()
        .find(|&y| {
            let row = &buf[y as usize * row_bytes..(y as usize + 1) * row_bytes];
            row.chunks(channels).any(|px| !white(px))
        })
        .map_or(0, |y| y + 1);
    let right_margin_white = (0..info.height).all(|y| {
        let row = &buf[y as usize * row_bytes..(y as usize + 1) * row_bytes];
        row.chunks(channels).rev().take(6).all(white)
    });
    Rendered {
        right_margin_white,
        console,
        width: info.width,
        height: info.height,
        content_height,
    }
}

/// The page parses without error, has nothing that loads or runs, every link reaches a file
/// from the page's directory, and it renders with no console message to a page of content.
fn check_page(r: &Readers, page: &Path) -> Value {
    let doc = parsed(r, page);
    assert_eq!(
        strings(&doc["errors"]),
        Vec::<String>::new(),
        "{}",
        page.display()
    );
    // The one kind of <meta> and nothing else that loads or acts.
    let active: Vec<String> = strings(&doc["active"])
        .into_iter()
        .filter(|e| e != "meta")
        .collect();
    assert_eq!(active, Vec::<String>::new(), "{}", page.display());
    assert_eq!(strings(&doc["acting"]), Vec::<String>::new());
    assert_eq!(
        strings(&doc["csp"]),
        ["default-src 'none'; style-src 'unsafe-inline'"],
        "{}: nothing may load or run",
        page.display()
    );
    let dir = page.parent().unwrap();
    for link in strings(&doc["links"]) {
        assert!(!link.contains(':'), "{link}: not a relative path");
        let decoded = percent_decoded(&link);
        assert!(dir.join(&decoded).exists(), "{link} from {}", dir.display());
    }
    let png = page.with_extension("png");
    let seen = render(r, page, &png);
    assert_eq!(seen.console, Vec::<String>::new(), "{}", page.display());
    assert_eq!((seen.width, seen.height), WINDOW);
    assert!(
        seen.right_margin_white,
        "{}: wider than the window",
        page.display()
    );
    assert!(
        seen.content_height > 400 && seen.content_height < WINDOW.1,
        "{}: content {} px high",
        page.display(),
        seen.content_height
    );
    doc
}

/// `%XX` back to its byte (the page's links are percent-encoded names).
fn percent_decoded(link: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = link.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// A run's report.html is in its directory, sealed by run.json's digests, and reads as a page
/// should: the RESULT first, the lines with their statuses spelled out, the timeline inline.
#[test]
fn every_run_directory_has_a_sealed_report_that_parses_and_renders() {
    let Some(r) = readers() else { return };
    let (d, out) = scratch();
    let (code, stdout) = stand_in_run(&out, &["--replies", "6"], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let page = out.join("report.html");
    let run = json(&out.join("run.json"));
    let digest = run["digests"]["report.html"].as_str().unwrap().to_string();
    let o = Command::new("sha256sum").arg(&page).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).starts_with(&digest));
    let doc = check_page(&r, &page);
    let text = doc["text"].as_str().unwrap();
    assert!(text.trim_start().starts_with("RESULT: PASS"), "{text}");
    assert!(strings(&doc["elements"]).contains(&"svg".to_string()));
    for word in [
        "first-token",
        "TTFT",
        "p99",
        "load average",
        "replies.jsonl",
    ] {
        assert!(text.contains(word), "{word} not in {text}");
    }
    let statuses = doc["statuses"].as_array().unwrap();
    assert!(statuses.len() >= 5, "{statuses:?}");
    for s in statuses {
        let (class, word) = (s[0].as_str().unwrap(), s[1].as_str().unwrap());
        assert_eq!(
            class,
            format!("status status-{word}"),
            "a status is its word"
        );
    }
    assert_eq!(
        doc["title"].as_str().unwrap(),
        format!("{}: RESULT: PASS", out.display())
    );

    // A failed run: FAIL first, spelled out in its line's cell.
    let out = d.path().join("failed");
    let (code, stdout) = stand_in_run(&out, &["--replies", "3"], &["--answer", "Berlin"]);
    assert_eq!(code, Some(1), "{stdout}");
    let doc = check_page(&r, &out.join("report.html"));
    let text = doc["text"].as_str().unwrap();
    assert!(text.trim_start().starts_with("RESULT: FAIL"), "{text}");
    assert!(text.contains("contentFAIL"), "{text}");
    let statuses: Vec<String> = doc["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}={}", s[0].as_str().unwrap(), s[1].as_str().unwrap()))
        .collect();
    assert!(
        statuses.contains(&"status status-fail=FAIL".to_string()),
        "{statuses:?}"
    );
}

/// judge --html writes the page elsewhere, linking back into the run by relative path; never
/// into the run directory.
#[test]
fn judge_writes_its_page_elsewhere_with_links_into_the_run() {
    let Some(r) = readers() else { return };
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("runs").join("rc 3#?");
    let (code, stdout) = stand_in_run(&out, &["--replies", "3"], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let pages = d.path().join("pages");
    std::fs::create_dir(&pages).unwrap();
    let page = pages.join("judged.html");
    // Both named relative to the working directory, as a CI step names them.
    let o = gate()
        .current_dir(d.path())
        .args(["judge", "runs/rc 3#?", "--html", "pages/judged.html"])
        .args(["--floor", "100000"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = check_page(&r, &page);
    let links = strings(&doc["links"]);
    assert!(
        links.contains(&"../runs/rc%203%23%3F/replies.jsonl".to_string()),
        "{links:?}"
    );
    assert!(
        links.iter().any(|l| l.ends_with("/report.html")),
        "{links:?}"
    );
    let text = doc["text"].as_str().unwrap();
    assert!(text.trim_start().starts_with("RESULT: FAIL"), "{text}");
    assert!(text.contains("judge, from the archive"), "{text}");

    // A file gone since the run is named, not linked: no link on the page reaches nothing.
    std::fs::remove_file(out.join("timeline.svg")).unwrap();
    let o = gate()
        .arg("judge")
        .arg(&out)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "a changed archive fails");
    let doc = check_page(&r, &page);
    assert!(!strings(&doc["links"])
        .iter()
        .any(|l| l.ends_with("timeline.svg")));
    let text = doc["text"].as_str().unwrap();
    assert!(
        text.contains("timeline.svg: changed after the run (timeline.svg is gone)"),
        "{text}"
    );

    let o = gate()
        .arg("judge")
        .arg(&out)
        .arg("--html")
        .arg(out.join("again.html"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--html"));
    assert!(!out.join("again.html").exists());
}

/// compare --html: the table, the picture, and each run linking to its own page.
#[test]
fn compare_writes_a_page_linking_each_run_to_its_own_report() {
    let Some(r) = readers() else { return };
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    for dir in [&a, &b] {
        let (code, stdout) = stand_in_run(dir, &["--replies", "3"], &[]);
        assert_eq!(code, Some(0), "{stdout}");
    }
    let page = d.path().join("fleet").join("compare.html");
    std::fs::create_dir(page.parent().unwrap()).unwrap();
    let o = gate()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = check_page(&r, &page);
    let links = strings(&doc["links"]);
    assert_eq!(links, vec!["../a/report.html", "../b/report.html"]);
    let text = doc["text"].as_str().unwrap();
    assert!(text.contains("2 runs compared"), "{text}");
    assert!(text.matches("PASS").count() >= 2, "a row a run: {text}");
}

/// A serve whose every string is hostile (tests/data/hostile_serve.py): its markup, its
/// script and its bidi controls are text on the page, never elements, and nothing acts.
#[test]
fn a_hostile_serves_strings_are_text_on_the_page() {
    let Some(r) = readers() else { return };
    let serve = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile_serve.py");
    let d = tempfile::tempdir().unwrap();
    // The run's own name is foreign too: whatever CI named it.
    let out = d.path().join("run <script>alert(1)\u{202e}");
    let o = gate()
        .args(["run", "--replies", "3", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .arg("--")
        .arg(&serve)
        .arg("{port}")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = out.join("report.html");
    let doc = check_page(&r, &page);
    let text = doc["text"].as_str().unwrap();
    // The serve's markup is on the page as its characters: it reached the page, as text.
    assert!(text.contains("<img src=x onerror=alert(1)>"), "{text}");
    assert!(text.contains("\\u{202e}gnp.exe\\u{2066}"), "{text}");
    assert!(text.contains("\\u{1b}]52;"), "{text}");
    assert!(text.contains("run <script>alert(1)\\u{202e}"), "{text}");
    for c in text.chars() {
        assert!(
            !npu_serve_smoke::inert::acts(c) || matches!(c, '\n' | '\t'),
            "{c:?} raw on the page"
        );
    }
    let raw = std::fs::read_to_string(&page).unwrap();
    assert!(
        !raw.contains("<img"),
        "an element of the serve's in the page"
    );
    assert!(
        !raw.contains("<script"),
        "an element of the run's name in the page"
    );
}

/// The checks can fail: a page with a script's console message, a parse error, a link that
/// reaches nothing, each is caught.
#[test]
fn the_page_checks_catch_a_console_message_a_parse_error_and_a_dead_link() {
    let Some(r) = readers() else { return };
    let d = tempfile::tempdir().unwrap();
    let page = d.path().join("p.html");
    let tall = "<p>line</p>".repeat(40);
    std::fs::write(
        &page,
        format!("<!DOCTYPE html><html><head><title>t</title></head><body>{tall}<script>console.error('boom')</script></body></html>"),
    )
    .unwrap();
    let seen = render(&r, &page, &d.path().join("p.png"));
    assert!(
        seen.console.iter().any(|l| l.contains("boom")),
        "{:?}",
        seen.console
    );
    assert!(seen.content_height > 400, "{}", seen.content_height);

    std::fs::write(&page, "<html><body><p>a</b></td></body></html>").unwrap();
    assert!(!strings(&parsed(&r, &page)["errors"]).is_empty());
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><title>t</title></head><body><a href=\"gone.json\">x</a></body></html>",
    )
    .unwrap();
    let caught = std::panic::catch_unwind(|| check_page(&r, &page));
    assert!(caught.is_err(), "a dead link passed");
}
