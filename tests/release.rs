//! The release workflow and the tarballs it makes (issue 38, item 2).
//!
//! The workflow itself cannot run here (no musl or aarch64 standard library can be fetched,
//! no GitHub): it is held to actionlint and GitHub's workflow schema, and read for the scripts
//! and targets it must name. Its logic lives in `tools/release/*.sh`, which run here for real:
//! a tarball of the debug gate with the pages and completions `tools/package-assets.sh` makes,
//! listed, unpacked and run; SHA256SUMS checked by `sha256sum -c`, and refused once tampered.
//!
//! The linters come from `tools/install-report-tools.sh`. Without them those tests say they
//! skipped; under CI=true they fail.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

use crate::ci::{actionlint, check_schema, linters};
use crate::util::{edited_copy, BIN};

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");
const WORKFLOW: &str = ".github/workflows/release.yml";
const TARGETS: [&str; 2] = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];
const COMPLETIONS: [&str; 3] = [
    "npu-serve-smoke.bash",
    "_npu-serve-smoke",
    "npu-serve-smoke.fish",
];
/// 2023-11-14T22:13:20Z: any fixed time, for the tarball's mtimes.
const EPOCH: &str = "1700000000";

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn script(name: &str) -> PathBuf {
    Path::new(REPO).join("tools/release").join(name)
}

/// `bash tools/release/<name> <args>`, with SOURCE_DATE_EPOCH at [`EPOCH`].
fn run_script<S: AsRef<std::ffi::OsStr>>(name: &str, args: &[S]) -> Output {
    Command::new("bash")
        .arg(script(name))
        .args(args)
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .output()
        .unwrap()
}

/// What `tools/package-assets.sh BIN <dir>/assets` makes, in a fresh directory.
fn assets() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let assets = d.path().join("assets");
    let o = Command::new("bash")
        .arg(Path::new(REPO).join("tools/package-assets.sh"))
        .arg(BIN)
        .arg(&assets)
        .output()
        .unwrap();
    assert!(o.status.success(), "package-assets.sh: {}", stderr(&o));
    (d, assets)
}

/// `tarball.sh` over `binary`; the path it printed.
fn tarball(binary: &Path, target: &str, assets: &Path, out: &Path) -> PathBuf {
    let o = run_script(
        "tarball.sh",
        &[
            VERSION.as_ref(),
            target.as_ref(),
            binary.as_os_str(),
            assets.as_os_str(),
            REPO.as_ref(),
            out.as_os_str(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "tarball.sh: {}", stderr(&o));
    let printed = PathBuf::from(stdout(&o).trim_end());
    assert_eq!(
        printed,
        out.join(format!("npu-serve-smoke-{VERSION}-{target}.tar.gz"))
    );
    printed
}

/// One entry of `tar -tzv --numeric-owner`: mode, owner, date and name.
#[derive(Debug)]
struct Entry {
    mode: String,
    owner: String,
    date: String,
    name: String,
}

fn listing(tarball: &Path) -> Vec<Entry> {
    let o = Command::new("tar")
        .args(["--numeric-owner", "-tzvf"])
        .arg(tarball)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(o.status.success(), "tar: {}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| {
            // -rwxr-xr-x 0/0  190488552 2023-11-14 22:13 top/npu-serve-smoke
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 6, "a name with a space, or a link: {l}");
            Entry {
                mode: f[0].into(),
                owner: f[1].into(),
                date: format!("{} {}", f[3], f[4]),
                name: f[5].into(),
            }
        })
        .collect()
}

fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[test]
fn tarball_sh_makes_the_layout_the_actions_download_path_unpacks() {
    let (d, assets) = assets();
    let target = TARGETS[0];
    let out = d.path().join("dist");
    let made = tarball(Path::new(BIN), target, &assets, &out);

    // Exactly the layout: one top directory; the binary, 755; the pages and completions
    // package-assets.sh wrote, no more and no fewer; the licences and the README.
    let top = format!("npu-serve-smoke-{VERSION}-{target}");
    let pages = names_in(&assets.join("man"));
    assert!(pages.contains("npu-serve-smoke.1"), "{pages:?}");
    assert!(pages.iter().all(|p| p.ends_with(".1")), "{pages:?}");
    let mut expected: BTreeSet<String> = ["", "npu-serve-smoke", "man/", "complete/"]
        .iter()
        .chain(&["LICENSE-MIT", "LICENSE-APACHE", "README.md"])
        .map(|n| format!("{top}/{n}"))
        .collect();
    expected.extend(pages.iter().map(|p| format!("{top}/man/{p}")));
    expected.extend(COMPLETIONS.iter().map(|c| format!("{top}/complete/{c}")));
    assert_eq!(names_in(&assets.join("complete")).len(), COMPLETIONS.len());
    let entries = listing(&made);
    let listed: BTreeSet<String> = entries.iter().map(|e| e.name.clone()).collect();
    assert_eq!(listed, expected);
    assert_eq!(entries.len(), listed.len(), "an entry twice: {entries:?}");
    for e in &entries {
        let want = if e.name.ends_with('/') {
            "drwxr-xr-x"
        } else if e.name.ends_with("/npu-serve-smoke") {
            "-rwxr-xr-x"
        } else {
            "-rw-r--r--"
        };
        assert_eq!(e.mode, want, "{e:?}");
        // Owned by root and dated SOURCE_DATE_EPOCH, whoever and whenever made it.
        assert_eq!(e.owner, "0/0", "{e:?}");
        assert_eq!(e.date, "2023-11-14 22:13", "{e:?}");
    }

    // Unpacked, the binary runs and is this crate's version; the rest is its sources, byte
    // for byte.
    let unpacked = d.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let o = Command::new("tar")
        .arg("-xzf")
        .arg(&made)
        .arg("-C")
        .arg(&unpacked)
        .output()
        .unwrap();
    assert!(o.status.success(), "tar -x: {}", stderr(&o));
    let root = unpacked.join(&top);
    let o = Command::new(root.join("npu-serve-smoke"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with(&format!("npu-serve-smoke {VERSION} (commit ")),
        "{}",
        stdout(&o)
    );
    let same = |unpacked: PathBuf, source: PathBuf| {
        assert!(
            std::fs::read(&unpacked).unwrap() == std::fs::read(&source).unwrap(),
            "{} is not {}",
            unpacked.display(),
            source.display()
        );
    };
    for doc in ["LICENSE-MIT", "LICENSE-APACHE", "README.md"] {
        same(root.join(doc), Path::new(REPO).join(doc));
    }
    for p in &pages {
        same(root.join("man").join(p), assets.join("man").join(p));
    }
    for c in COMPLETIONS {
        same(
            root.join("complete").join(c),
            assets.join("complete").join(c),
        );
    }

    // The same inputs at the same SOURCE_DATE_EPOCH make the same bytes.
    let again = tarball(Path::new(BIN), target, &assets, &d.path().join("again"));
    assert!(
        std::fs::read(&made).unwrap() == std::fs::read(&again).unwrap(),
        "two tarballs of the same inputs differ"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256sum_check(dir: &Path) -> Output {
    Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn sums_sh_covers_every_tarball_and_deb_and_sha256sum_checks_it() {
    // Tarballs for both targets from tarball.sh, of a small executable rather than the
    // 190 MB debug gate (the test above makes that one; here only the sums are under test),
    // and a stand-in .deb under cargo-deb's name: sums.sh reads no file's contents.
    let (d, assets) = assets();
    let small = d.path().join("gate");
    std::fs::write(&small, "#!/bin/sh\necho npu-serve-smoke\n").unwrap();
    std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dist = d.path().join("dist");
    for target in TARGETS {
        tarball(&small, target, &assets, &dist);
    }
    let deb = format!("npu-serve-smoke_{VERSION}-1_amd64.deb");
    std::fs::write(dist.join(&deb), b"!<arch>\nnot really a package\n").unwrap();
    // Not a release file: left out.
    std::fs::write(dist.join("notes.txt"), "x").unwrap();

    let o = run_script("sums.sh", &[&dist]);
    assert_eq!(o.status.code(), Some(0), "sums.sh: {}", stderr(&o));
    let sums = dist.join("SHA256SUMS");
    assert_eq!(stdout(&o).trim_end(), sums.display().to_string());
    let text = std::fs::read_to_string(&sums).unwrap();
    let mut covered = BTreeSet::new();
    for line in text.lines() {
        // sha256sum's own format: 64 lowercase hex digits, two spaces, the bare name.
        let (digest, name) = line.split_once("  ").unwrap_or_else(|| panic!("{line}"));
        assert!(
            digest.len() == 64
                && digest
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{line}"
        );
        assert!(
            !name.contains('/') && !name.starts_with(['*', '\\']),
            "{line}"
        );
        // Computed here too, not only by the sha256sum the script ran.
        let bytes = std::fs::read(dist.join(name)).unwrap();
        assert_eq!(digest, hex(&Sha256::digest(&bytes)), "{name}");
        covered.insert(name.to_string());
    }
    let mut expected: BTreeSet<String> = TARGETS
        .iter()
        .map(|t| format!("npu-serve-smoke-{VERSION}-{t}.tar.gz"))
        .collect();
    expected.insert(deb.clone());
    assert_eq!(covered, expected, "{text}");
    assert_eq!(text.lines().count(), expected.len(), "{text}");

    let o = sha256sum_check(&dist);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));

    // One byte changed in a download, and the check fails on that file.
    let mut bytes = std::fs::read(dist.join(&deb)).unwrap();
    bytes[10] ^= 1;
    std::fs::write(dist.join(&deb), bytes).unwrap();
    let o = sha256sum_check(&dist);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(&format!("{deb}: FAILED")),
        "{}",
        stdout(&o)
    );
}

/// `name args` fails with exit 2 and one line starting `name: ` that contains `says`.
fn refused(name: &str, args: &[&str], says: &str) {
    let o = run_script(name, args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{name} {args:?}: {err}");
    assert!(err.starts_with(&format!("{name}: ")), "{err}");
    assert!(err.contains(says), "{name} {args:?}: {err}");
    assert!(o.stdout.is_empty(), "{name} {args:?}: {}", stdout(&o));
}

#[test]
fn the_release_scripts_refuse_bad_arguments_in_one_line_with_exit_2() {
    let (d, assets) = assets();
    let a = assets.to_str().unwrap();
    let out_dir = d.path().join("dist");
    let out = out_dir.to_str().unwrap();
    let t = TARGETS[1];
    refused("tarball.sh", &[], "expected 6 arguments, got 0");
    refused(
        "tarball.sh",
        &[&format!("v{VERSION}"), t, BIN, a, REPO, out],
        "without the tag's v",
    );
    refused(
        "tarball.sh",
        &[VERSION, "aarch64", BIN, a, REPO, out],
        "not a target triple",
    );
    refused(
        "tarball.sh",
        &[VERSION, t, "/nonexistent/gate", a, REPO, out],
        "is not an executable file",
    );
    refused(
        "tarball.sh",
        &[VERSION, t, BIN, a, "/nonexistent", out],
        "has no LICENSE-MIT",
    );
    std::fs::remove_file(assets.join("complete/_npu-serve-smoke")).unwrap();
    refused(
        "tarball.sh",
        &[VERSION, t, BIN, a, REPO, out],
        "has no complete/_npu-serve-smoke",
    );
    // Refused before anything was written.
    assert!(!out_dir.exists());

    refused("sums.sh", &[], "expected 1 argument, got 0");
    refused("sums.sh", &["/nonexistent"], "is not a directory");
    refused("sums.sh", &[a], "holds no .tar.gz or .deb");
    refused("version.sh", &["v1.0.0"], "expected 2 arguments, got 1");
}

#[test]
fn version_sh_passes_the_tag_of_cargo_tomls_version_and_refuses_any_other() {
    let o = run_script("version.sh", &[&format!("v{VERSION}"), REPO]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{VERSION}\n"));
    for tag in ["v99.0.0", VERSION, "nightly"] {
        let o = run_script("version.sh", &[tag, REPO]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{tag}: {err}");
        assert_eq!(
            err,
            format!(
                "version.sh: the tag {tag} is not v{VERSION}, Cargo.toml's version: tag \
                 v{VERSION}, or bump Cargo.toml's version and tag that\n"
            )
        );
        assert!(o.stdout.is_empty());
    }
}

/// Where a shell linter is wanted: shellcheck, or `None` (skip) outside CI.
fn shellcheck() -> Option<Command> {
    let here = Command::new("shellcheck")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    match here {
        true => Some(Command::new("shellcheck")),
        false if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("shellcheck must be on PATH in CI: eval \"$(tools/install-report-tools.sh)\"")
        }
        false => {
            eprintln!("skipped: no shellcheck (run: eval \"$(tools/install-report-tools.sh)\")");
            None
        }
    }
}

#[test]
fn the_release_scripts_pass_shellcheck() {
    let Some(mut check) = shellcheck() else {
        return;
    };
    let scripts = ["tarball.sh", "sums.sh", "version.sh"].map(script);
    // And the packaging scripts the workflow and the Debian package share.
    let packaging =
        ["tools/build-deb.sh", "tools/package-assets.sh"].map(|s| Path::new(REPO).join(s));
    let o = check.args(&scripts).args(&packaging).output().unwrap();
    assert!(o.status.success(), "shellcheck: {}", stdout(&o));

    // It reads them: the tarball's path unquoted is word splitting (SC2086).
    let (_d, broken) = edited_copy(&scripts[0], "echo \"$tarball\"", "echo $tarball");
    let o = shellcheck().unwrap().arg(&broken).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("SC2086"), "{}", stdout(&o));
}

#[test]
fn the_release_workflow_passes_actionlint_and_githubs_workflow_schema() {
    let Some(l) = linters() else { return };
    let workflow = Path::new(REPO).join(WORKFLOW);
    let o = actionlint(&l, &workflow);
    assert!(
        o.status.success(),
        "actionlint: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = check_schema(&l, "vendor.github-workflows", &workflow);
    assert!(o.status.success(), "schema: {}{}", stdout(&o), stderr(&o));

    // Both checks read this file: a job's output misspelt where another job uses it is
    // refused by actionlint; a job with no runner, by the schema.
    let (_d, broken) = edited_copy(
        &workflow,
        "VERSION: ${{ needs.version.outputs.version }}",
        "VERSION: ${{ needs.version.outputs.verison }}",
    );
    let o = actionlint(&l, &broken);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("verison"), "{}", stdout(&o));

    let text = std::fs::read_to_string(&workflow).unwrap();
    let runnerless = text.replacen("    runs-on: ubuntu-latest\n", "", 1);
    assert_ne!(runnerless, text);
    std::fs::write(&broken, runnerless).unwrap();
    assert!(!check_schema(&l, "vendor.github-workflows", &broken)
        .status
        .success());
}

/// The workflow's lines, comments left out, so a name only mentioned in a comment counts for
/// nothing.
fn workflow_lines() -> Vec<String> {
    std::fs::read_to_string(Path::new(REPO).join(WORKFLOW))
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.trim().to_string())
        .collect()
}

/// The one line that contains `text`.
fn one_line_with<'a>(lines: &'a [String], text: &str) -> &'a str {
    let found: Vec<&String> = lines.iter().filter(|l| l.contains(text)).collect();
    assert_eq!(found.len(), 1, "{text}: {found:?}");
    found[0]
}

#[test]
fn the_release_workflow_runs_on_a_version_tag_and_calls_the_scripts_for_both_targets() {
    let lines = workflow_lines();
    let text = lines.join("\n");
    assert!(text.contains("on:\npush:\ntags:\n- \"v*\"\n"), "{text}");

    // Both targets in the build matrix, and both awaited before anything is published.
    for target in TARGETS {
        one_line_with(&lines, &format!("- target: {target}"));
    }
    one_line_with(
        &lines,
        &format!("for target in {} {}; do", TARGETS[0], TARGETS[1]),
    );
    for arch in ["amd64", "arm64"] {
        one_line_with(&lines, &format!("deb-arch: {arch}"));
    }

    // The scripts tested above, with their arguments in order.
    one_line_with(&lines, "version=$(tools/release/version.sh \"$TAG\" .)");
    one_line_with(
        &lines,
        "run: tools/package-assets.sh target/debug/npu-serve-smoke assets",
    );
    one_line_with(
        &lines,
        "tools/release/tarball.sh \"$VERSION\" \"$TARGET\" \"$BIN\" assets . dist",
    );
    one_line_with(&lines, "tools/release/sums.sh dist");
    one_line_with(
        &lines,
        "deb=$(tools/build-deb.sh --target \"$TARGET\" --no-build --assets assets --output dist)",
    );

    // cargo-deb and cross pinned to one version each.
    let pinned = |name: &str, prefix: &str| {
        let key = format!("{name}: {prefix}");
        let line = one_line_with(&lines, &key);
        let v = line.strip_prefix(&key).unwrap_or_else(|| panic!("{line}"));
        let parts: Vec<&str> = v.split('.').collect();
        assert!(
            parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
            "{line}"
        );
    };
    pinned("CARGO_DEB_VERSION", "");
    pinned("CROSS_VERSION", "v");
    one_line_with(
        &lines,
        "run: cargo install cargo-deb --locked --version \"$CARGO_DEB_VERSION\"",
    );
    one_line_with(&lines, "releases/download/$CROSS_VERSION/");

    // Every file goes up: the tarballs, the .debs and their sums.
    one_line_with(
        &lines,
        "--generate-notes dist/*.tar.gz dist/*.deb dist/SHA256SUMS",
    );
}
