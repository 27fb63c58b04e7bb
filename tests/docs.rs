//! The README as a front door and the docs behind it (issue 33): short, with the commands CI
//! runs; a row for every line the gate can print (docs/lines.md's table, made from the code);
//! the timing lines as the verdict has them; every link resolving; and the help saying what
//! the code does.

use std::path::{Path, PathBuf};

use crate::util::*;
use npu_serve_smoke::archive::check::Check;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(REPO).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The Markdown files a reader reaches from the README: it and docs/*.md.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![Path::new(REPO).join("README.md")];
    for entry in std::fs::read_dir(Path::new(REPO).join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

/// A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn the_readme_is_a_front_door_of_at_most_150_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines; move detail to docs/"
    );
}

#[test]
fn the_readme_shows_the_commands_ci_runs() {
    let ci = read(".ci/run");
    let readme = read("README.md");
    let test = ci
        .lines()
        .find(|l| l.contains("cargo test --locked"))
        .expect(".ci/run runs the tests");
    assert!(readme.contains(test.trim()), "README lacks {test:?}");
    let run = ci
        .lines()
        .find(|l| l.contains("-- run --stand-in"))
        .expect(".ci/run runs a gate");
    // CI names its own directory; the README says DIR.
    let run = run.trim().replace("\"$out\"", "DIR");
    assert!(readme.contains(&run), "README lacks {run:?}");
}

#[test]
fn every_line_the_gate_can_print_has_a_row_in_the_readme_and_in_docs_lines() {
    let schema: serde_json::Value = serde_json::from_str(&read("docs/result-schema.json")).unwrap();
    let listed = schema["$defs"]["line"]["properties"]["check"]["enum"]
        .as_array()
        .expect("result-schema.json lists the checks")
        .clone();
    // The schema lists the checks the code has: no more, no fewer.
    let mut schema_names: Vec<&str> = listed.iter().map(|c| c.as_str().unwrap()).collect();
    let mut code_names: Vec<&str> = Check::ALL.iter().map(|c| c.name()).collect();
    schema_names.sort();
    code_names.sort();
    assert_eq!(
        schema_names, code_names,
        "docs/result-schema.json against Check::ALL"
    );
    let checks = Check::ALL.map(|c| c.name());
    let lines = read("docs/lines.md");
    for check in checks {
        let row = lines.lines().any(|l| {
            l.starts_with("| `")
                && l.split(" | ")
                    .next()
                    .unwrap()
                    .contains(&format!("`{check}`"))
        });
        assert!(row, "docs/lines.md has no row for {check}");
    }
}

/// docs/lines.md's table of the lines is what the code makes (`report::lines_table`), so it
/// lists every line, in order, and says info exactly of the info lines. `UPDATE_DOCS=1`
/// rewrites the page instead of failing, as a check that a changed summary is written down.
#[test]
fn the_table_of_lines_is_what_the_code_makes() {
    use npu_serve_smoke::report::lines_table;
    let path = Path::new(REPO).join("docs/lines.md");
    let page = read("docs/lines.md");
    let made = lines_table::rewrite(&page)
        .expect("docs/lines.md holds the table's two markers, once each, in order");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &made).unwrap();
        return;
    }
    assert!(
        made == page,
        "docs/lines.md's table of lines is not what the code makes; rewrite it with \
         `UPDATE_DOCS=1 cargo test --test integration -- docs::`"
    );
    // The README links the table and lists no line of its own (it had a hand-kept copy).
    let readme = read("README.md");
    assert!(readme.contains("docs/lines.md#every-line-in-one-row"));
    for check in Check::ALL {
        assert!(
            !readme.contains(&format!("| `{check}` |")),
            "README.md has a row for {check}: the table is docs/lines.md's"
        );
    }
}

#[test]
fn the_timing_lines_are_named_as_the_verdict_has_them() {
    // --busy-skip once said rate and first-token, while the verdict excused drift and
    // aggregate too (issue 33).
    let named = Check::TIMING.map(|c| format!("`{c}`")).join(", ");
    for page in ["README.md", "docs/lines.md", "docs/hw-gate.md"] {
        let text = read(page).split_whitespace().collect::<Vec<_>>().join(" ");
        let plain = text.replace('`', "");
        let bare = Check::TIMING.map(Check::name).join(", ");
        assert!(
            text.contains(&named) || plain.contains(&bare),
            "{page} does not name the timing lines {bare}"
        );
    }
    let help = gate().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains(&Check::TIMING.map(Check::name).join(", ")),
        "{help}"
    );
    assert!(
        help.contains("host, cpu, memory, kernel, modules, firmware, tool"),
        "--baseline-allow's help lists every difference it takes: {help}"
    );
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let heading = regex::Regex::new(r"(?m)^#+ (.*)$").unwrap();
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for m in link.captures_iter(&text) {
            let target = &m[1];
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                dir.join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target}", page.display()));
                continue;
            }
            if !fragment.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let body = std::fs::read_to_string(&file).unwrap();
                if !heading
                    .captures_iter(&body)
                    .any(|h| anchor(&h[1]) == fragment)
                {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_source_file_the_docs_name_exists() {
    // Code moves (issue 33); a page that names a file the code left sends a reader nowhere.
    let path = regex::Regex::new(r"src/[A-Za-z0-9_/]+\.rs").unwrap();
    let mut missing = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for m in path.find_iter(&text) {
            if !Path::new(REPO).join(m.as_str()).is_file() {
                missing.push(format!("{}: {}", page.display(), m.as_str()));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
