//! The house, file by file (issue 33, item 2): no import circle between files, no function in
//! src/ over 120 lines, no source file over 1,000 lines before its tests. `tests/layers.rs`
//! holds the folders to their layers; this holds the files inside them.
//!
//! The imports are read from the shipped code (all but a file's `#[cfg(test)]` modules): every
//! `crate::`, `super::` and `self::` path, and every use of a child module a file declares
//! (`mod bursts;` then `bursts::line(..)`), resolved to the file that holds the module. A
//! parent that calls its children while a child imports `super::X` is a circle too: what both
//! need belongs in a leaf. A file that expands the registry of line modules
//! (`lines/mod.rs`, issue 53) names `crate::lines::$module::...`: read as naming that path
//! in every module under `src/lines/`, as the expansion does, so a line module that imports a
//! file which calls it is a circle too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::util::rust_files;

/// The longest a function may be, in lines, and a file before its tests.
const MOST_FUNCTION_LINES: usize = 120;
const MOST_FILE_LINES: usize = 1000;

/// The text with comments, strings and characters blanked to spaces (newlines kept), so that
/// braces and paths are only the code's.
fn blank_literals(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let closing: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let rest: String = b[j + 1..].iter().collect();
            let len = rest
                .find(&closing)
                .map_or(rest.len(), |at| at + closing.len());
            let end = j + 1 + rest[..len].chars().count();
            for &ch in &b[i..end.min(b.len())] {
                out.push(blank(ch));
            }
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let close = (i + 2..b.len())
                    .find(|&k| b[k] == '\'')
                    .unwrap_or(b.len() - 1);
                out.extend(std::iter::repeat_n(' ', close - i + 1));
                i = close + 1;
            } else if b.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The shipped lines of a blanked file: all but its `#[cfg(test)]` modules, an inline one to
/// its closing brace and a declared one (`mod svg_check;`, its file read apart) its two lines.
/// Reading up to the first of them left 370 shipped lines of report/mod.rs unread, past a
/// declared test module (issue 53).
fn shipped(blanked: &str) -> Vec<&str> {
    let lines: Vec<&str> = blanked.lines().collect();
    let test_module = |i: usize| {
        lines[i].trim() == "#[cfg(test)]"
            && lines.get(i + 1).is_some_and(|n| {
                let n = n.trim_start();
                let n = ["pub(crate) ", "pub(super) ", "pub "]
                    .iter()
                    .find_map(|p| n.strip_prefix(p))
                    .unwrap_or(n);
                n.starts_with("mod ")
            })
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !test_module(i) {
            out.push(lines[i]);
            i += 1;
            continue;
        }
        i += 1;
        if lines[i].trim_end().ends_with(';') {
            i += 1;
            continue;
        }
        // Braces only the code's (literals blanked): to the one that closes the module's.
        let mut depth = 0i64;
        let mut opened = false;
        while i < lines.len() {
            for c in lines[i].chars() {
                match c {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            i += 1;
            if opened && depth <= 0 {
                break;
            }
        }
    }
    out
}

/// A file's module path under the crate: `judging/verdict/mod.rs` -> [judging, verdict].
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    parts
}

/// Every module path a piece of code names: `crate::a::b`, `super::c`, `self::d`, and groups
/// (`crate::a::{b, c::d}`) spelled out, as segments from the crate's root.
fn named_paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(root) {
            // A root only where a path starts: not `$crate::`, not `a::super::`.
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| ident(c) || c == ':' || c == '$') {
                continue;
            }
            let mut base = match root {
                "crate::" => Vec::new(),
                "self::" => me.to_vec(),
                _ => me[..me.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = &code[at + root.len()..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let path: String = rest
                .chars()
                .take_while(|c| ident(*c) || *c == ':')
                .collect();
            let segs = |p: &str| -> Vec<String> {
                let mut s = base.clone();
                s.extend(p.split("::").filter(|x| !x.is_empty()).map(str::to_string));
                s
            };
            match rest[path.len()..].strip_prefix('{') {
                Some(group) if path.is_empty() || path.ends_with("::") => {
                    for item in group_items(group) {
                        out.push(segs(&format!("{path}{item}")));
                    }
                }
                _ => out.push(segs(&path)),
            }
        }
    }
    out
}

/// The paths a `{...}` group names (its text after the `{`), nested groups spelled out:
/// `b::{c, d}, e}` gives `b::c`, `b::d`, `e`.
fn group_items(group: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    // The group's own text, up to its matching `}`.
    let mut depth = 0usize;
    let end = group
        .char_indices()
        .find(|&(_, c)| match c {
            '{' => {
                depth += 1;
                false
            }
            '}' if depth == 0 => true,
            '}' => {
                depth -= 1;
                false
            }
            _ => false,
        })
        .map_or(group.len(), |(i, _)| i);
    let inner = &group[..end];
    // Its items, split at the commas outside nested groups.
    let (mut items, mut from, mut depth) = (Vec::new(), 0, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&inner[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[from..]);
    let mut out = Vec::new();
    for item in items {
        let item = item.trim();
        let path: String = item
            .chars()
            .take_while(|c| ident(*c) || *c == ':')
            .collect();
        match item[path.len()..].strip_prefix('{') {
            Some(nested) => out.extend(
                group_items(nested)
                    .into_iter()
                    .map(|inner| format!("{path}{inner}")),
            ),
            None if !path.is_empty() => out.push(path),
            None => {}
        }
    }
    out
}

/// The paths a registry expansion names (`crate::lines::$module::record::$figures`, or
/// `crate::lines::$module::judge`): the same path in each of `modules`, the folders under
/// `src/lines/`, up to the first part left to the expansion (`$figures`).
fn line_module_paths(code: &str, modules: &[String]) -> Vec<Vec<String>> {
    const EXPANDED: &str = "crate::lines::$module::";
    let mut out = Vec::new();
    for (at, _) in code.match_indices(EXPANDED) {
        let rest: String = code[at + EXPANDED.len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        for module in modules {
            let mut segs = vec!["lines".to_string(), module.clone()];
            segs.extend(
                rest.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            out.push(segs);
        }
    }
    out
}

/// The file of the longest prefix of `segs` that is a module.
fn resolve<'a>(segs: &[String], modules: &'a BTreeMap<Vec<String>, String>) -> Option<&'a str> {
    (0..=segs.len())
        .rev()
        .find_map(|n| modules.get(&segs[..n]).map(String::as_str))
}

/// Each file's imports of other files under `src`.
fn file_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let rel_of = |p: &Path| p.strip_prefix(src).unwrap().to_path_buf();
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|p| rel_of(p))
        .filter(|r| r != Path::new("main.rs"))
        .map(|r| (module_of(&r), format!("src/{}", r.display())))
        .collect();
    let line_modules: Vec<String> = std::fs::read_dir(src.join("lines"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let rel = rel_of(path);
        if rel == Path::new("main.rs") {
            continue;
        }
        let me = module_of(&rel);
        let shown = format!("src/{}", rel.display());
        let text = std::fs::read_to_string(path).unwrap();
        let blanked = blank_literals(&text);
        let code = shipped(&blanked).join("\n");
        let mut targets = named_paths(&code, &me);
        targets.extend(line_module_paths(&code, &line_modules));
        // Children declared here and named as `child::`.
        for line in code.lines() {
            let t = line.trim_start();
            let t = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|p| t.strip_prefix(p))
                .unwrap_or(t);
            if let Some(name) = t.strip_prefix("mod ").and_then(|n| n.strip_suffix(';')) {
                let used = code.match_indices(&format!("{name}::")).any(|(i, _)| {
                    code[..i]
                        .chars()
                        .next_back()
                        .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'))
                });
                if used {
                    let mut child = me.clone();
                    child.push(name.trim().to_string());
                    targets.push(child);
                }
            }
        }
        let entry = graph.entry(shown.clone()).or_default();
        for t in targets {
            if let Some(file) = resolve(&t, &modules) {
                if file != shown {
                    entry.insert(file.to_string());
                }
            }
        }
    }
    graph
}

/// The circles of a graph: its strongly connected components of more than one file (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// Every circle, one line each: the files and who imports whom inside it.
fn circle_breaks(src: &Path) -> Vec<String> {
    let graph = file_graph(src);
    circles(&graph)
        .into_iter()
        .map(|c| {
            let inside: Vec<String> = c
                .iter()
                .map(|f| {
                    let uses: Vec<&str> = graph[f]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("{f} -> {}", uses.join(", "))
                })
                .collect();
            format!("an import circle between files: {}", inside.join("; "))
        })
        .collect()
}

/// Every function over the limit and every file over its limit before its tests.
fn size_breaks(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for path in &files {
        let shown = format!("src/{}", path.strip_prefix(src).unwrap().display());
        let blanked = blank_literals(&std::fs::read_to_string(path).unwrap());
        let lines = shipped(&blanked);
        if lines.len() > MOST_FILE_LINES {
            found.push(format!(
                "{shown}: {} lines before its tests, more than {MOST_FILE_LINES}",
                lines.len()
            ));
        }
        for (start, line) in lines.iter().enumerate() {
            let Some(name) = fn_name(line) else { continue };
            let mut depth = 0usize;
            // Brackets and parentheses of the signature: `-> [u8; 32]` holds a `;`.
            let mut nesting = 0usize;
            let mut opened = false;
            let mut end = None;
            'scan: for (k, l) in lines.iter().enumerate().skip(start) {
                let from = if k == start {
                    l.find("fn ").unwrap_or(0)
                } else {
                    0
                };
                for c in l[from..].chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => {
                            depth = depth.saturating_sub(1);
                            if opened && depth == 0 {
                                end = Some(k);
                                break 'scan;
                            }
                        }
                        '(' | '[' if !opened => nesting += 1,
                        ')' | ']' if !opened => nesting = nesting.saturating_sub(1),
                        ';' if !opened && nesting == 0 => break 'scan,
                        _ => {}
                    }
                }
            }
            if let Some(end) = end {
                let n = end - start + 1;
                if n > MOST_FUNCTION_LINES {
                    found.push(format!(
                        "{shown}:{}: fn {name} is {n} lines, more than {MOST_FUNCTION_LINES}",
                        start + 1
                    ));
                }
            }
        }
    }
    found
}

/// The function a line opens, if it opens one.
fn fn_name(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let before_ok = words[..at].iter().all(|w| {
        w.starts_with("pub")
            || ["async", "const", "unsafe", "extern", "default"].contains(w)
            || w.starts_with('"')
    });
    let name: String = words
        .get(at + 1)?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (before_ok && !name.is_empty()).then_some(name)
}

#[test]
fn no_import_circle_between_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = circle_breaks(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_function_over_120_lines_and_no_file_over_1000_before_its_tests() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = size_breaks(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_circle_and_an_oversize_are_each_named() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("verdict")).unwrap();
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).unwrap();
    write(
        "lib.rs",
        "pub mod verdict;\npub mod prompts;\npub mod leaf;\npub mod a;\npub mod c;\npub mod d;\npub mod e;\n",
    );
    // A parent calling its child while the child imports the parent: a circle.
    write(
        "verdict/mod.rs",
        "mod rate;\npub struct Line;\npub fn judge() { rate::line(); }\n",
    );
    write(
        "verdict/rate.rs",
        "use super::Line;\n// crate::leaf in a comment is no import\npub fn line() {}\n",
    );
    // Two files through `crate::` and a nested group.
    write(
        "prompts.rs",
        "use crate::{leaf::X, verdict::{Line, judge}};\n",
    );
    // A circle seen only past a nested group: a -> c after `b::{..}`, and c -> a.
    write("a.rs", "use crate::{leaf::{X, Y}, c::Z};\npub struct A;\n");
    // A long function whose signature holds a `;` (an array's length).
    let body = "    let _ = 1;\n".repeat(MOST_FUNCTION_LINES);
    write(
        "c.rs",
        &format!("use crate::a::A;\npub struct Z;\nfn key() -> [u8; 32] {{\n{body}}}\n"),
    );
    // A leaf that names others only in strings and its tests.
    let body = "    let _ = 1;\n".repeat(MOST_FUNCTION_LINES);
    write(
        "leaf.rs",
        &format!(
            "pub struct X;\nconst S: &str = \"crate::prompts::P {{\";\nfn long() {{\n{body}}}\n\
             #[cfg(test)]\nmod tests {{\n    use crate::verdict::Line;\n}}\n"
        ),
    );
    // A circle seen only past a test module declared in its file (`mod d_check;`), and one
    // past an inline test module.
    write(
        "d.rs",
        "#[cfg(test)]\npub(crate) mod d_check;\nuse crate::e::E;\npub struct D;\n",
    );
    write(
        "e.rs",
        "#[cfg(test)]\nmod tests {\n    fn t() { if true { } }\n}\nuse crate::d::D;\npub struct E;\n",
    );
    let circles = circle_breaks(src);
    assert_eq!(circles.len(), 3, "{circles:#?}");
    assert!(
        circles
            .iter()
            .any(|c| c.contains("src/d.rs -> src/e.rs") && c.contains("src/e.rs -> src/d.rs")),
        "{circles:#?}"
    );
    let verdict = circles.iter().find(|c| c.contains("verdict")).unwrap();
    assert!(
        verdict.contains("src/verdict/mod.rs -> src/verdict/rate.rs")
            && verdict.contains("src/verdict/rate.rs -> src/verdict/mod.rs"),
        "{circles:#?}"
    );
    assert!(
        circles
            .iter()
            .any(|c| c.contains("src/a.rs -> src/c.rs") && c.contains("src/c.rs -> src/a.rs")),
        "{circles:#?}"
    );
    assert!(!circles.iter().any(|c| c.contains("leaf")), "{circles:#?}");
    let sizes = size_breaks(src);
    let over = MOST_FUNCTION_LINES + 2;
    assert_eq!(
        sizes,
        vec![
            format!("src/c.rs:3: fn key is {over} lines, more than {MOST_FUNCTION_LINES}"),
            format!("src/leaf.rs:3: fn long is {over} lines, more than {MOST_FUNCTION_LINES}"),
        ]
    );
}

/// A registry expansion names every line module: a line module that imports the file which
/// calls it is a circle, and one that imports only leaves is not (issue 53).
#[test]
fn a_line_module_that_imports_what_calls_it_is_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    for d in ["lines/slow", "lines/quiet", "verdict"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).unwrap();
    write(
        "lines/mod.rs",
        "pub mod quiet;\npub mod slow;\nmacro_rules! every_line { () => {} }\n",
    );
    write(
        "verdict/mod.rs",
        "macro_rules! calls {\n    ($($module:ident)*) => { $(crate::lines::$module::judge();)* };\n}\n",
    );
    write("verdict/line.rs", "pub struct Line;\n");
    write(
        "lines/slow/mod.rs",
        "use crate::verdict::Floors;\npub fn judge() {}\n",
    );
    write(
        "lines/quiet/mod.rs",
        "use crate::verdict::line::Line;\npub fn judge() {}\n",
    );
    let circles = circle_breaks(src);
    assert_eq!(circles.len(), 1, "{circles:#?}");
    assert!(
        circles[0].contains("src/verdict/mod.rs -> src/lines/slow/mod.rs")
            && circles[0].contains("src/lines/slow/mod.rs -> src/verdict/mod.rs"),
        "{circles:#?}"
    );
    assert!(!circles[0].contains("quiet"), "{circles:#?}");
}
