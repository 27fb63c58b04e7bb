//! The files the serve's arguments name, hashed: a model's weights, a config, whatever a path
//! among the arguments is (never the programs the launch runs), a large one once and then
//! taken from the hash cache (`hash_cache.rs`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::archive::record::{BinaryInfo, HashedFile};
use crate::live::exec_path::on_path;
use crate::live::provenance::hash_cache::{Cache, CacheKey, CACHE_FROM_BYTES};
use crate::live::serve;

/// At most this many files of the serve's arguments are hashed; the rest are named in
/// `problems`.
pub const MAX_MODEL_FILES: usize = 16;

/// The paths an argument may name: itself, and for `--opt=VALUE` (or `-o=VALUE`) the value.
pub fn path_candidates(arg: &str) -> Vec<&str> {
    let mut out = Vec::new();
    if !arg.is_empty() && arg != "-" {
        out.push(arg);
    }
    if arg.starts_with('-') {
        if let Some((_, value)) = arg.split_once('=') {
            if !value.is_empty() {
                out.push(value);
            }
        }
    }
    out
}

/// Where the serve's own program stands in the launched argv: 0, or after a `--hold-cmd`
/// prefix, the first argument that resolves to the serve binary.
pub(crate) fn program_index(argv: &[String], binary: &BinaryInfo) -> usize {
    let target = Path::new(&binary.path);
    argv.iter()
        .position(|a| resolve_program(a).is_some_and(|p| p == target))
        .unwrap_or(0)
}

/// An argument as exec would find it as a program: a path, or a name on PATH; canonical.
fn resolve_program(arg: &str) -> Option<PathBuf> {
    if arg.is_empty() {
        return None;
    }
    let found = if arg.contains('/') {
        PathBuf::from(arg)
    } else {
        on_path(arg)?
    };
    std::fs::canonicalize(found).ok()
}

/// The programs the launch runs (the serve, its script and interpreters, the hold program):
/// they are fingerprinted as the binary, never as model files.
fn programs(argv: &[String], binary: &BinaryInfo) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![binary];
    while let Some(b) = stack.pop() {
        out.push(PathBuf::from(&b.path));
        stack.extend(b.script.as_deref());
        stack.extend(b.interpreter.as_deref());
    }
    if let Some(first) = argv.first().and_then(|a| resolve_program(a)) {
        out.push(first);
    }
    out
}

/// Hash every regular file the serve's arguments name (not the programs, not twice).
pub(crate) fn hash_model_files(
    argv: &[String],
    program_at: usize,
    binary: &BinaryInfo,
    cache: &mut Cache,
    problems: &mut Vec<String>,
) -> Vec<HashedFile> {
    let skip = programs(argv, binary);
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut files = Vec::new();
    let mut dirs = 0;
    for (i, arg) in argv.iter().enumerate() {
        if i == 0 || i == program_at {
            continue;
        }
        for candidate in path_candidates(arg) {
            let Ok(meta) = std::fs::metadata(candidate) else {
                continue;
            };
            if meta.is_dir() {
                // A model given as a directory (a Hugging Face or OpenVINO folder): say that
                // its files are not covered, once for the first few.
                dirs += 1;
                if dirs <= 4 {
                    problems.push(format!(
                        "{candidate} is a directory: the files in it are not hashed"
                    ));
                }
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let Ok(path) = std::fs::canonicalize(candidate) else {
                continue;
            };
            if skip.contains(&path) || seen.contains(&path) {
                continue;
            }
            seen.push(path.clone());
            if files.len() == MAX_MODEL_FILES {
                problems.push(format!(
                    "{}: more than {MAX_MODEL_FILES} files in the serve's arguments; the rest are not hashed",
                    path.display()
                ));
                continue;
            }
            match hash_file(&path, cache, problems) {
                Ok(f) => files.push(f),
                Err(e) => problems.push(format!("{e:#}")),
            }
        }
    }
    cache.save(problems);
    files
}

/// One file's size and sha256: from the cache when it is large and unchanged since it was
/// hashed, else read (and, when large, kept in the cache).
fn hash_file(path: &Path, cache: &mut Cache, problems: &mut Vec<String>) -> Result<HashedFile> {
    let shown = path.display().to_string();
    let before = std::fs::metadata(path).with_context(|| format!("failed to read {shown}"))?;
    let key = CacheKey::of(&shown, &before);
    let large = before.len() >= CACHE_FROM_BYTES;
    if large {
        if let Some(sha256) = cache.get(&key, problems) {
            return Ok(HashedFile {
                path: shown,
                size: before.len(),
                sha256,
                cached: true,
            });
        }
        crate::say!(
            "hashing {shown} ({}), once: cached after",
            human_size(before.len())
        );
    }
    let info = serve::fingerprint(path)?;
    let after = std::fs::metadata(path).with_context(|| format!("failed to read {shown}"))?;
    if CacheKey::of(&shown, &after) != key || info.size != before.len() {
        problems.push(format!(
            "{shown} changed while it was hashed: its hash is of what was read, and not cached"
        ));
    } else if large {
        cache.put(key, &info.sha256);
    }
    Ok(HashedFile {
        path: shown,
        size: info.size,
        sha256: info.sha256,
        cached: false,
    })
}

fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::provenance::workload::hex;
    use sha2::{Digest, Sha256};

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_option_value_is_a_path_candidate_too() {
        assert_eq!(path_candidates("-m"), vec!["-m"]);
        assert_eq!(
            path_candidates("--model=/m/x.gguf"),
            vec!["--model=/m/x.gguf", "/m/x.gguf"]
        );
        assert_eq!(path_candidates("/m/a=b.gguf"), vec!["/m/a=b.gguf"]);
        assert_eq!(path_candidates("--flag="), vec!["--flag="]);
        assert!(path_candidates("-").is_empty());
        assert!(path_candidates("").is_empty());
    }

    fn binary(path: &Path) -> BinaryInfo {
        BinaryInfo {
            path: std::fs::canonicalize(path).unwrap().display().to_string(),
            size: 0,
            sha256: String::new(),
            script: None,
            interpreter: None,
        }
    }

    #[test]
    fn model_files_are_the_files_among_the_arguments() {
        let d = tempfile::tempdir().unwrap();
        let serve = d.path().join("serve");
        std::fs::write(&serve, "#!/bin/sh\n").unwrap();
        let model = d.path().join("m.gguf");
        std::fs::write(&model, b"weights").unwrap();
        let config = d.path().join("c.toml");
        std::fs::write(&config, b"x = 1").unwrap();
        let argv = vec![
            serve.display().to_string(),
            "-m".into(),
            model.display().to_string(),
            format!("--config={}", config.display()),
            model.display().to_string(),
            d.path().display().to_string(),
            serve.display().to_string(),
            "/dev/null".into(),
            "--port".into(),
            "8080".into(),
        ];
        let mut problems = Vec::new();
        let mut cache = Cache::at(None);
        let files = hash_model_files(&argv, 0, &binary(&serve), &mut cache, &mut problems);
        let paths: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
        assert_eq!(paths, vec![canon(&model), canon(&config)], "{problems:?}");
        assert_eq!(files[0].size, 7);
        assert_eq!(files[0].sha256, hex(&Sha256::digest(b"weights")));
        assert!(!files[0].cached);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("is a directory"), "{problems:?}");
    }

    #[test]
    fn a_serve_under_a_hold_program_is_found_after_its_prefix() {
        let d = tempfile::tempdir().unwrap();
        let serve = d.path().join("serve");
        std::fs::write(&serve, "").unwrap();
        let argv = strings(&["npu-hold", "--ticket", "4s", "--"])
            .into_iter()
            .chain([serve.display().to_string(), "--x".into()])
            .collect::<Vec<_>>();
        assert_eq!(program_index(&argv, &binary(&serve)), 4);
        assert_eq!(program_index(&strings(&["nope"]), &binary(&serve)), 0);
    }

    #[test]
    fn a_large_file_is_hashed_once_then_taken_from_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(CACHE_FROM_BYTES)
            .unwrap();
        let cache_file = d.path().join("cache.json");
        let mut problems = Vec::new();
        let mut cache = Cache::at(Some(cache_file.clone()));
        let first = hash_file(&big, &mut cache, &mut problems).unwrap();
        assert!(!first.cached);
        cache.save(&mut problems);
        let mut cache = Cache::at(Some(cache_file.clone()));
        let second = hash_file(&big, &mut cache, &mut problems).unwrap();
        assert!(second.cached);
        assert_eq!(second.sha256, first.sha256);
        // Rewritten (same size): its times move on, and it is read again.
        std::fs::write(&big, vec![1u8; CACHE_FROM_BYTES as usize]).unwrap();
        let third = hash_file(&big, &mut cache, &mut problems).unwrap();
        assert!(!third.cached);
        assert_ne!(third.sha256, first.sha256);
        assert!(problems.is_empty(), "{problems:?}");
    }
}
