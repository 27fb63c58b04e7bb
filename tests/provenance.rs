//! Provenance in run.json (issue 18), from real runs: the box's facts, the files given to the
//! serve hashed (checked against sha256sum), a large one taken from the hash cache on the next
//! run, the port put back as `{port}`, and `compare` naming what differs between runs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

/// A file's sha256 as coreutils' sha256sum gives it.
fn sha256sum(path: &Path) -> String {
    let o = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum (coreutils) runs");
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap().display().to_string()
}

/// A stand-in run with one reply that maps `files` (each a serve argument), with the hash
/// cache under `cache`; its exit code and stderr.
fn run_mapping(out: &Path, cache: &Path, files: &[&Path]) -> (Option<i32>, String) {
    let mut gate = gate();
    gate.env("XDG_CACHE_HOME", cache)
        .args(["run", "--stand-in", "--replies", "1", "--out"])
        .arg(out)
        .args(UNFLIPPABLE)
        .args(["--", "--tokens", "4"]);
    for f in files {
        gate.arg("--map-file").arg(f);
    }
    let o = gate.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn provenance(out: &Path) -> Value {
    json(&out.join("run.json"))["provenance"].clone()
}

fn model_file<'a>(p: &'a Value, path: &str) -> &'a Value {
    p["model_files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("no model file {path} in {p:#}"))
}

#[test]
fn a_run_records_the_box_and_hashes_the_files_its_serve_was_given() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let small = d.path().join("tokenizer.json");
    std::fs::write(&small, b"{\"vocab\": [1, 2, 3]}").unwrap();
    // At the size from which a hash is cached; sparse, so neither writing nor mapping it costs.
    let big = d.path().join("model.gguf");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let (small_path, big_path) = (canonical(&small), canonical(&big));

    let first = d.path().join("first");
    let (code, said) = run_mapping(&first, &cache, &[&small, &big]);
    assert_eq!(code, Some(0), "{said}");
    let manifest = json(&first.join("run.json"));
    let p = &manifest["provenance"];
    for fact in ["host", "kernel", "cpu_model"] {
        assert!(
            p[fact].as_str().is_some_and(|v| !v.trim().is_empty()),
            "{fact}: {p:#}"
        );
    }
    assert!(p["ncpu"].as_u64().is_some_and(|n| n >= 1), "{p:#}");
    assert!(p["mem_total_kib"].as_u64().is_some_and(|n| n > 0), "{p:#}");
    assert_eq!(p["tool_version"], manifest["tool_version"]);
    assert_eq!(p["serve_binary_sha256"], manifest["serve_binary"]["sha256"]);
    assert_eq!(p["workload_sha256"].as_str().unwrap().len(), 64);
    assert!(
        p["modules"].is_object() && p["firmware"].is_object(),
        "{p:#}"
    );

    // The port the gate picked is `{port}` again; run.json's own serve_argv has the number.
    let port = manifest["url"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let argv: Vec<&str> = p["serve_argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = argv.iter().position(|a| *a == "--port").unwrap();
    assert_eq!(argv[at + 1], "{port}", "{argv:?}");
    assert!(!argv.contains(&port.as_str()), "{argv:?}");
    assert!(manifest["serve_argv"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == port.as_str()));

    // The two files, and not the program (the gate's own binary runs the stand-in).
    assert_eq!(p["model_files"].as_array().unwrap().len(), 2, "{p:#}");
    let f = model_file(p, &small_path);
    assert_eq!(f["sha256"], sha256sum(&small).as_str());
    assert_eq!(f["size"], 20);
    assert_eq!(f["cached"], false);
    let f = model_file(p, &big_path);
    let big_sha = sha256sum(&big);
    assert_eq!(f["sha256"], big_sha.as_str());
    assert_eq!(f["size"], 64 << 20);
    assert_eq!(f["cached"], false);
    assert!(
        said.contains(&format!("hashing {big_path} (64 MiB), once: cached after")),
        "{said}"
    );
    assert!(p["problems"].as_array().unwrap().is_empty(), "{p:#}");

    // The cache, outside the run directory, names the large file only.
    let cache_file = cache.join("npu-serve-smoke/file-hashes.json");
    let kept = json(&cache_file);
    let entries = kept["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{kept:#}");
    assert_eq!(entries[0]["path"], big_path.as_str());
    assert_eq!(entries[0]["sha256"], big_sha.as_str());

    // The next run takes the large file's hash from the cache and says nothing of hashing.
    let second = d.path().join("second");
    let (code, said) = run_mapping(&second, &cache, &[&small, &big]);
    assert_eq!(code, Some(0), "{said}");
    assert!(!said.contains("hashing"), "{said}");
    let p = provenance(&second);
    let f = model_file(&p, &big_path);
    assert_eq!(
        (&f["sha256"], &f["cached"]),
        (&big_sha.as_str().into(), &true.into())
    );
    assert_eq!(model_file(&p, &small_path)["cached"], false);

    // It is the cache's word that is taken: a hash put there by hand comes back, for the
    // same file unchanged.
    let mut edited = kept.clone();
    edited["entries"][0]["sha256"] = "0".repeat(64).into();
    std::fs::write(&cache_file, serde_json::to_vec(&edited).unwrap()).unwrap();
    let third = d.path().join("third");
    assert_eq!(run_mapping(&third, &cache, &[&big]).0, Some(0));
    assert_eq!(
        model_file(&provenance(&third), &big_path)["sha256"],
        "0".repeat(64).as_str()
    );

    // A corrupt cache fails nothing: the file is hashed again, and the cache written anew.
    std::fs::write(&cache_file, b"{\"version\": 1, \"entries\": [").unwrap();
    let fourth = d.path().join("fourth");
    let (code, said) = run_mapping(&fourth, &cache, &[&big]);
    assert_eq!(code, Some(0), "{said}");
    let p = provenance(&fourth);
    assert_eq!(model_file(&p, &big_path)["sha256"], big_sha.as_str());
    assert!(
        p["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q.as_str().unwrap().contains("starting a new cache")),
        "{p:#}"
    );
    assert_eq!(json(&cache_file)["entries"][0]["sha256"], big_sha.as_str());
}

#[test]
fn an_attached_run_records_the_box_and_no_serve() {
    let d = tempfile::tempdir().unwrap();
    let serve = StandIn::start(&[], &d.path().join("stand-in.log"));
    let out = d.path().join("run");
    let o = gate()
        .env("XDG_CACHE_HOME", d.path().join("cache"))
        .args(["run", "--replies", "1", "--url", &serve.url, "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let p = provenance(&out);
    assert!(
        p["serve_argv"].is_null() && p["serve_binary_sha256"].is_null(),
        "{p:#}"
    );
    assert_eq!(p["model_files"], serde_json::json!([]));
    assert!(p["host"].as_str().is_some_and(|h| !h.is_empty()), "{p:#}");
    assert!(p["ncpu"].as_u64().is_some_and(|n| n >= 1), "{p:#}");
}

/// Copy a run directory's files (it has no subfolders).
fn copy_run(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn compare_says_what_differs_from_the_first_run() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let model = d.path().join("weights.bin");
    std::fs::write(&model, b"release 3 weights").unwrap();
    let before = sha256sum(&model);
    let first: PathBuf = d.path().join("first");
    assert_eq!(run_mapping(&first, &cache, &[&model]).0, Some(0));
    std::fs::write(&model, b"release 4 weights, retrained").unwrap();
    let after = sha256sum(&model);
    let second = d.path().join("second");
    assert_eq!(run_mapping(&second, &cache, &[&model]).0, Some(0));

    let o = gate()
        .arg("compare")
        .arg(&first)
        .arg(&second)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!(
            "differs from the first run ({}):",
            first.display()
        )),
        "{text}"
    );
    let line = format!(
        "  {}: model file {}: {} (first run: {}), not comparable",
        second.display(),
        canonical(&model),
        &after[..12],
        &before[..12]
    );
    assert!(text.lines().any(|l| l == line), "{line}\n{text}");
    // Same box, same arguments, same workload: that is all that differs.
    assert_eq!(
        text.lines().filter(|l| l.starts_with("  ")).count(),
        1,
        "{text}"
    );

    let o = gate()
        .args(["compare", "--json"])
        .arg(&first)
        .arg(&second)
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["provenance"], true);
    assert!(rows[0]["differences"].is_null());
    assert_eq!(
        rows[1]["differences"],
        serde_json::json!([{
            "field": format!("model file {}", canonical(&model)),
            "kind": "not-comparable",
            "allow": null,
            "candidate": &after[..12],
            "baseline": &before[..12],
        }])
    );

    // A run compared with itself: nothing below the table.
    let o = gate()
        .arg("compare")
        .arg(&first)
        .arg(&first)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("differs"), "{text}");

    // A run from before provenance was recorded is named as such.
    let old = d.path().join("old");
    copy_run(&second, &old);
    let mut manifest = json(&old.join("run.json"));
    manifest.as_object_mut().unwrap().remove("provenance");
    std::fs::write(
        old.join("run.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let o = gate()
        .arg("compare")
        .arg(&first)
        .arg(&old)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!(
            "  {}: no provenance recorded (a run from before it was)",
            old.display()
        )),
        "{text}"
    );
}
