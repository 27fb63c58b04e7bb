//! The house in layers (issue 16), checked: every source file's imports are read and held to
//! what its folder's `//!` doc says it may use. A break names the file and the line.
//!
//! The layers are the folders under `src/` (`src/lib.rs`'s `# Layout`); the files directly in
//! `src/` are the top. Only shipped code is held to the rules: a file's `#[cfg(test)]` module
//! (at its end, as in every file here) may borrow judging cases from the self-test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::util::rust_files;

/// The folders that are layers, and the crates and std modules the pure ones may not touch.
const PURE: [&str; 3] = ["wire", "judging", "lines"];
const IMPURE: [&str; 5] = ["tokio", "std::fs", "std::net", "std::process", "nix"];

/// What a layer may not use: (layer, the module it may not reach, why).
const FORBIDDEN: &[(&str, &str, &str)] = &[
    (
        "archive",
        "judging",
        "the archive is the bottom: judging imports it, never the reverse",
    ),
    (
        "archive",
        "live",
        "the archive is the bottom: live imports it, never the reverse",
    ),
    (
        "archive",
        "report",
        "the archive is the bottom: report imports it, never the reverse",
    ),
    (
        "judging",
        "live",
        "judging is pure: it never reaches the run's I/O",
    ),
    (
        "judging",
        "report",
        "judging decides, report renders: never the reverse",
    ),
    ("wire", "archive", "the wire is bytes only"),
    ("wire", "judging", "the wire is bytes only"),
    ("wire", "live", "the wire is bytes only"),
    ("wire", "report", "the wire is bytes only"),
    (
        "standin",
        "live::client",
        "the stand-in is the other side of the wire",
    ),
    (
        "standin",
        "judging",
        "the stand-in is the other side of the wire",
    ),
    (
        "standin",
        "report",
        "the stand-in is the other side of the wire",
    ),
    (
        "report",
        "live",
        "report renders a verdict; it never runs anything",
    ),
    (
        "args",
        "live",
        "the settings are checked before anything runs: live imports them, never the reverse",
    ),
    (
        "args",
        "standin",
        "the settings are the gate's: the stand-in imports their parsers, never the reverse",
    ),
    (
        "args",
        "selftest",
        "the settings are the gate's: the self-test imports them, never the reverse",
    ),
    (
        "archive",
        "args",
        "the archive is the bottom: the settings import it, never the reverse",
    ),
    (
        "judging",
        "args",
        "judging is pure over recorded data: the settings import its bounds, never the reverse",
    ),
    ("wire", "args", "the wire is bytes only"),
    (
        "lines",
        "live",
        "a line is judged from recorded data: it never reaches the run's I/O",
    ),
    (
        "lines",
        "standin",
        "a line is judged from recorded data: it never reaches the stand-in",
    ),
    (
        "report",
        "args",
        "report renders a verdict; the settings import its output flags, never the reverse",
    ),
];

/// The folders under src/ that are layers (each a module). `lines/` (issue 53) is not among
/// them as a target: every layer reaches the line modules through the registry they expand,
/// as they reach the top's files, while a line module's own imports are held to `PURE` and
/// `FORBIDDEN` above; tests/house.rs holds the files to no circle through the registry.
const LAYERS: [&str; 8] = [
    "wire", "archive", "args", "judging", "live", "report", "standin", "selftest",
];

/// One use of another module: where, and the module path after `crate::`.
#[derive(Debug)]
struct Use {
    file: String,
    line: usize,
    text: String,
    target: String,
}

/// The layer a file under src/ belongs to: its folder, or `top`.
fn layer_of(rel: &Path) -> String {
    let mut parts = rel.components();
    let first = parts
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    if parts.next().is_some() {
        first
    } else {
        "top".into()
    }
}

/// The layer a `crate::` path reaches: its first segment when that is a layer, else `top`.
fn layer_reached(target: &str) -> &str {
    let first = target.split("::").next().unwrap_or("");
    if LAYERS.contains(&first) {
        first
    } else {
        "top"
    }
}

/// The shipped lines of a file: up to its `#[cfg(test)]` module, comments left out; a `use`
/// spread over lines joined into one, numbered by its first line.
fn shipped_lines(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]" && lines.get(i + 1).is_some_and(|next| test_module(next)) {
            break;
        }
        if trimmed.starts_with("//") {
            i += 1;
            continue;
        }
        let mut joined = line.to_string();
        let start = i;
        if trimmed.starts_with("use ") || trimmed.starts_with("pub use ") {
            while !joined.trim_end().ends_with(';') && i + 1 < lines.len() {
                i += 1;
                joined.push(' ');
                joined.push_str(lines[i].trim());
            }
        }
        out.push((start + 1, joined));
        i += 1;
    }
    out
}

/// Whether a line opens a module (`mod tests {`, `pub(crate) mod tests {`).
fn test_module(line: &str) -> bool {
    let line = line.trim_start();
    let line = ["pub(crate) ", "pub(super) ", "pub "]
        .iter()
        .find_map(|p| line.strip_prefix(p))
        .unwrap_or(line);
    line.starts_with("mod ")
}

/// Every module path a line reaches through `crate::`, grouped imports spelled out one level.
fn crate_paths(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = &rest[..at];
        rest = &rest[at + "crate::".len()..];
        if before.ends_with('$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                if !name.is_empty() {
                    out.push(name.trim_end_matches(':').to_string());
                }
            }
            continue;
        }
        let path: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        out.push(path.trim_end_matches(':').to_string());
    }
    out
}

/// Whether a line touches one of the crates or std modules pure layers may not: `tokio::`,
/// `nix::`, `std::fs`, `std::net`, `std::process`, also inside `use std::{...}`.
fn impure_use(line: &str) -> Option<&'static str> {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    for word in words(line) {
        for bad in IMPURE {
            if word == bad
                || word.starts_with(&format!("{bad}::"))
                || word.starts_with(&format!("::{bad}"))
            {
                return Some(bad);
            }
        }
    }
    if let Some(at) = line.find("std::{") {
        let group = &line[at + "std::{".len()..];
        for word in words(group) {
            for bad in ["fs", "net", "process"] {
                if word == bad || word.starts_with(&format!("{bad}::")) {
                    return Some(match bad {
                        "fs" => "std::fs",
                        "net" => "std::net",
                        _ => "std::process",
                    });
                }
            }
        }
    }
    None
}

/// Every break of the layering in the tree under `src`, one line each.
fn breaks(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    let mut edges: BTreeMap<(String, String), Vec<Use>> = BTreeMap::new();
    for path in &files {
        let rel = path.strip_prefix(src).unwrap();
        let layer = layer_of(rel);
        let shown = format!("src/{}", rel.display());
        let text = std::fs::read_to_string(path).unwrap();
        for (line, code) in shipped_lines(&text) {
            if PURE.contains(&layer.as_str()) {
                if let Some(bad) = impure_use(&code) {
                    found.push(format!(
                        "{shown}:{line}: {layer} is pure but uses {bad}: {}",
                        code.trim()
                    ));
                }
            }
            for target in crate_paths(&code) {
                let reached = layer_reached(&target);
                let is_cli = target == "cli" || target.starts_with("cli::");
                if is_cli && !["src/cli.rs", "src/main.rs", "src/lib.rs"].contains(&shown.as_str())
                {
                    found.push(format!(
                        "{shown}:{line}: imports the command line back: {}",
                        code.trim()
                    ));
                }
                for (from, to, why) in FORBIDDEN {
                    if *from == layer && (target == *to || target.starts_with(&format!("{to}::"))) {
                        found.push(format!(
                            "{shown}:{line}: {layer} uses {to} ({why}): {}",
                            code.trim()
                        ));
                    }
                }
                if reached != "top" && layer != "top" && reached != layer {
                    edges
                        .entry((layer.clone(), reached.to_string()))
                        .or_default()
                        .push(Use {
                            file: shown.clone(),
                            line,
                            text: code.trim().to_string(),
                            target,
                        });
                }
            }
        }
    }
    // An import circle between folders: an edge a -> b where b also reaches a.
    let graph: BTreeMap<&str, BTreeSet<&str>> =
        edges.keys().fold(BTreeMap::new(), |mut g, (a, b)| {
            g.entry(a.as_str()).or_default().insert(b.as_str());
            g
        });
    let reaches = |from: &str, to: &str| -> bool {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(at) = stack.pop() {
            if at == to {
                return true;
            }
            if seen.insert(at) {
                stack.extend(graph.get(at).into_iter().flatten().copied());
            }
        }
        false
    };
    for ((a, b), uses) in &edges {
        if reaches(b, a) {
            let u = &uses[0];
            found.push(format!(
                "{}:{}: an import circle between folders: {a} uses {b} (crate::{}), and {b} \
                 reaches {a}: {}",
                u.file, u.line, u.target, u.text
            ));
        }
    }
    found
}

#[test]
fn the_layers_keep_to_their_imports() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = breaks(&src);
    assert!(
        found.is_empty(),
        "the layering is broken (src/lib.rs `# Layout`, issue 16):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_break_is_named_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    for folder in ["judging", "archive", "args", "live", "standin", "report"] {
        std::fs::create_dir(src.join(folder)).unwrap();
    }
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).unwrap();
    write("lib.rs", "pub mod cli;\n");
    write("cli.rs", "use crate::live::gate;\n");
    write(
        "judging/verdict.rs",
        "//! pure\n\nuse std::{fmt, fs};\nuse tokio;\nuse crate::archive::record::Verdict;\n\n\
         #[cfg(test)]\nmod tests {\n    use std::fs::File;\n}\n",
    );
    write("archive/record.rs", "use crate::judging::verdict::judge;\n");
    write("live/gate.rs", "use crate::cli::RunArgs;\n");
    write("standin/mod.rs", "use crate::live::client::Client;\n");
    write("report/mod.rs", "fn f() { crate::live::gate::run(); }\n");
    write("args/run.rs", "use crate::live::plan::Plan;\n");
    let found = breaks(src);
    let has = |what: &str| found.iter().any(|f| f.starts_with(what));
    assert!(
        has("src/judging/verdict.rs:3: judging is pure but uses std::fs"),
        "{found:#?}"
    );
    assert!(
        has("src/judging/verdict.rs:4: judging is pure but uses tokio"),
        "{found:#?}"
    );
    assert!(
        has("src/archive/record.rs:1: archive uses judging"),
        "{found:#?}"
    );
    assert!(
        has("src/archive/record.rs:1: an import circle between folders"),
        "{found:#?}"
    );
    assert!(
        has("src/live/gate.rs:1: imports the command line back"),
        "{found:#?}"
    );
    assert!(
        has("src/standin/mod.rs:1: standin uses live::client"),
        "{found:#?}"
    );
    assert!(has("src/report/mod.rs:1: report uses live"), "{found:#?}");
    assert!(has("src/args/run.rs:1: args uses live"), "{found:#?}");
    assert!(
        !has("src/judging/verdict.rs:9"),
        "the test module's std::fs is not shipped: {found:#?}"
    );
}
