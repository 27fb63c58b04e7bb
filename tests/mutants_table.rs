//! The mutant tables follow the code (issue 33, item 6): every self-test mutant in
//! tools/mutants/mutants.json names a file that holds its exact text once, and every glob
//! `.cargo/mutants.toml` gives cargo mutants matches a file. A move that left a mutant behind
//! would make `tools/self-test-mutants.sh` break nothing, and a mutant that breaks nothing proves
//! nothing.

use std::path::Path;

#[test]
fn every_self_test_mutant_names_the_file_that_holds_its_text_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let table: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tools/mutants/mutants.json")).unwrap(),
    )
    .unwrap();
    let mutants = table.as_array().expect("mutants.json is a list");
    assert!(!mutants.is_empty());
    let mut problems = Vec::new();
    for m in mutants {
        let name = m["name"].as_str().unwrap_or("?");
        let (Some(file), Some(old)) = (m["file"].as_str(), m["old"].as_str()) else {
            problems.push(format!("{name}: no file or old text"));
            continue;
        };
        match std::fs::read_to_string(root.join(file)) {
            Err(e) => problems.push(format!("{name}: {file}: {e}")),
            Ok(text) => {
                // Only the shipped code: a mutant of a file's tests breaks nothing it gates.
                let shipped = text.split("\n#[cfg(test)]\nmod ").next().unwrap_or("");
                let n = shipped.matches(old).count();
                if n != 1 {
                    problems.push(format!(
                        "{name}: its old text is in {file}'s shipped code {n} times, not once"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether the glob `parts` (its path's parts, each a name or with one `*`, as
/// `src/lines/*/mod.rs`) names a file under `dir`.
fn matches_a_file(dir: &Path, parts: &[&str]) -> bool {
    let Some((pattern, rest)) = parts.split_first() else {
        return dir.is_file();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let named = match pattern.split_once('*') {
            Some((pre, post)) => name.starts_with(pre) && name.ends_with(post),
            None => name == *pattern,
        };
        named && matches_a_file(&e.path(), rest)
    })
}

#[test]
fn every_cargo_mutants_glob_matches_a_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = std::fs::read_to_string(root.join(".cargo/mutants.toml")).unwrap();
    let line = config
        .lines()
        .find(|l| l.starts_with("examine_globs"))
        .expect("examine_globs in .cargo/mutants.toml");
    let globs: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
    assert!(!globs.is_empty(), "{line}");
    for glob in globs {
        let parts: Vec<&str> = glob.split('/').collect();
        assert!(
            matches_a_file(root, &parts),
            "{glob} in .cargo/mutants.toml matches no file"
        );
    }
    // The busy-box set moved out of the verdict once (issue 33): where it lives is examined.
    assert!(
        line.contains("\"src/archive/check.rs\"") || line.contains("\"src/archive/*.rs\""),
        "archive/check.rs (Check::TIMING) is not examined: {line}"
    );
}
