//! The Debian package (issue 38, item 1), built by `tools/build-deb.sh` with cargo-deb, held
//! to lintian, installed by dpkg and used as installed: the binary from /usr/bin runs a gate
//! against the stand-in, `man` finds each command's page, and a fresh bash, zsh and fish each
//! complete from the script in their own system directory.
//!
//! dpkg installs into a root of the test's own (`dpkg --root`), whose database holds this
//! box's entries for the packages the .deb depends on: dpkg checks the dependencies against
//! what this box has, and the box's /usr is left alone.
//!
//! cargo-deb, lintian, man-db and bash-completion come from `tools/install-report-tools.sh`.
//! Without them the test says it skipped; under CI=true it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::*;

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `tools/build-deb.sh`, run as a release runs it: without what cargo put in this test's
/// environment from the gate's build script (`NPU_SERVE_SMOKE_COMMIT`, its build date,
/// `OUT_DIR`). The script's `cargo build --release` would see the commit as a changed setting
/// of build.rs (`rerun-if-env-changed`) and build the release binary again, and the next plain
/// `cargo build --release` (CI's gate command) again after it: two release builds for nothing.
fn build_deb() -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(Path::new(REPO).join("tools/build-deb.sh"))
        .env_remove("NPU_SERVE_SMOKE_COMMIT")
        .env_remove("NPU_SERVE_SMOKE_BUILD_DATE")
        .env_remove("OUT_DIR");
    cmd
}

fn run_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// cargo-deb, or `None` (skip) outside CI when the packaging tools are not installed.
fn cargo_deb() -> Option<PathBuf> {
    let have = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let tools = ["dpkg", "dpkg-deb", "lintian", "man", "bash", "zsh", "fish"];
    match std::env::var("CARGO_DEB") {
        Ok(deb)
            if tools.iter().all(|t| have(t))
                && Path::new("/usr/share/bash-completion/bash_completion").exists() =>
        {
            Some(deb.into())
        }
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "CARGO_DEB must name cargo-deb in CI, with {tools:?} and bash-completion installed: \
             eval \"$(tools/install-report-tools.sh)\""
        ),
        _ => {
            eprintln!(
                "skipped: no packaging tools (run: eval \"$(tools/install-report-tools.sh)\")"
            );
            None
        }
    }
}

/// Every file the package must ship, as `dpkg-deb -c` lists them.
fn shipped() -> Vec<String> {
    let mut files: Vec<String> = [
        "usr/bin/npu-serve-smoke",
        "usr/share/bash-completion/completions/npu-serve-smoke",
        "usr/share/zsh/vendor-completions/_npu-serve-smoke",
        "usr/share/fish/vendor_completions.d/npu-serve-smoke.fish",
        "usr/share/doc/npu-serve-smoke/copyright",
        "usr/share/doc/npu-serve-smoke/changelog.Debian.gz",
        "usr/share/doc/npu-serve-smoke/README.md",
        "usr/share/doc/npu-serve-smoke/docs/running.md",
        "usr/share/doc/npu-serve-smoke/docs/result-schema.json",
        "usr/share/npu-serve-smoke/profiles/llama-server.toml",
        "usr/share/npu-serve-smoke/profiles/stand-in.toml",
        "usr/share/lintian/overrides/npu-serve-smoke",
    ]
    .map(String::from)
    .into();
    for page in [
        "",
        "-run",
        "-judge",
        "-stand-in",
        "-self-test",
        "-compare",
        "-completions",
        "-man",
    ] {
        files.push(format!("usr/share/man/man1/npu-serve-smoke{page}.1.gz"));
    }
    files
}

/// A dpkg root whose database holds this box's entries for the packages `deb` depends on.
fn dpkg_root(deb: &Path, root: &Path) {
    let db = root.join("var/lib/dpkg");
    for sub in ["info", "updates", "triggers"] {
        std::fs::create_dir_all(db.join(sub)).unwrap();
    }
    std::fs::write(db.join("available"), "").unwrap();
    let depends = run_ok(
        Command::new("dpkg-deb")
            .args(["-f"])
            .arg(deb)
            .arg("Depends"),
    );
    let mut status = String::new();
    for dep in depends.split(',').filter(|d| !d.trim().is_empty()) {
        let name = dep
            .split_whitespace()
            .next()
            .unwrap()
            .split(':')
            .next()
            .unwrap();
        status += &run_ok(Command::new("dpkg-query").args(["-s", name]));
        status += "\n";
    }
    std::fs::write(db.join("status"), status).unwrap();
}

/// What a fresh bash with bash-completion offers at `npu-serve-smoke WORDS<TAB>`: the
/// completion is loaded by bash-completion's own loader (`complete -D`'s handler, which bash
/// calls on the first TAB for a command with no completion) from the system directories.
fn fresh_bash_completes(root: &Path, words: &[&str]) -> Vec<String> {
    let program = format!(
        "source /usr/share/bash-completion/bash_completion\n\
         _completion_loader npu-serve-smoke\n\
         f=$(complete -p npu-serve-smoke | sed -n 's/.* -F \\([^ ]*\\) .*/\\1/p')\n\
         [ -n \"$f\" ] || {{ echo 'no completion loaded' >&2; exit 1; }}\n{}",
        bash_tab("\"$f\"", words)
    );
    let usr = root.join("usr");
    let out = run_ok(
        Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &program])
            .env_clear()
            .env("HOME", root)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", usr.join("bin").display()),
            )
            .env(
                "XDG_DATA_DIRS",
                format!("{}:/usr/share", usr.join("share").display()),
            ),
    );
    out.lines().map(str::to_string).collect()
}

#[test]
fn the_debian_package_passes_lintian_installs_with_dpkg_and_works_as_installed() {
    let Some(cargo_deb) = cargo_deb() else { return };
    let d = tempfile::tempdir().unwrap();
    let built = d.path().join("built");

    // Built as a release would build it (a release build: quick where CI built it already).
    let printed = run_ok(
        build_deb()
            .arg("--output")
            .arg(&built)
            .env("CARGO_DEB", &cargo_deb),
    );
    let deb = PathBuf::from(printed.trim());
    let arch = run_ok(Command::new("dpkg").arg("--print-architecture"));
    assert_eq!(
        deb,
        built.join(format!("npu-serve-smoke_{VERSION}-1_{}.deb", arch.trim()))
    );
    let field = |name: &str| {
        run_ok(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name))
            .trim()
            .to_string()
    };
    assert_eq!(field("Package"), "npu-serve-smoke");
    assert_eq!(field("Version"), format!("{VERSION}-1"));
    assert!(
        field("Depends").starts_with("libc6 (>= "),
        "{}",
        field("Depends")
    );
    let listing = run_ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    for file in shipped() {
        assert!(
            listing.lines().any(|l| l.ends_with(&format!("./{file}"))),
            "{file} is not in the package:\n{listing}"
        );
    }
    // The changelog's newest entry is this version: a release that forgot it would ship a
    // package saying it is the last one.
    let changelog = std::fs::read_to_string(Path::new(REPO).join("pkg/debian/changelog")).unwrap();
    assert!(
        changelog.starts_with(&format!("npu-serve-smoke ({VERSION}-1) ")),
        "pkg/debian/changelog's first entry is not {VERSION}-1"
    );

    // lintian: no error and no warning; what is overridden is in the package, with its reason.
    let lintian = |extra: &str| {
        Command::new("lintian")
            .args(["--fail-on", "error,warning", extra])
            .arg(&deb)
            .output()
            .unwrap()
    };
    let o = lintian("--pedantic");
    let said = text(&o);
    assert!(o.status.success(), "lintian: {said}");
    assert!(
        !said
            .lines()
            .any(|l| l.starts_with("E: ") || l.starts_with("W: ")),
        "lintian: {said}"
    );
    // And it reads this package: without the package's overrides, the warning they answer is
    // back and fails it.
    let o = lintian("--no-override");
    assert!(!o.status.success(), "lintian --no-override: {}", text(&o));
    assert!(
        text(&o).contains("W: npu-serve-smoke: initial-upload-closes-no-bugs"),
        "{}",
        text(&o)
    );

    // Installed by dpkg, its dependencies checked against this box's.
    let root = d.path().join("root");
    dpkg_root(&deb, &root);
    run_ok(
        Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args(["--log=/dev/null", "--install"])
            .arg(&deb),
    );
    let status = run_ok(
        Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                root.join("var/lib/dpkg").display()
            ))
            .args(["-W", "-f", "${Status} ${Version}", "npu-serve-smoke"]),
    );
    assert_eq!(status, format!("install ok installed {VERSION}-1"));
    let installed = root.join("usr/bin/npu-serve-smoke");
    let version = run_ok(Command::new(&installed).arg("--version"));
    assert!(
        version.starts_with(&format!("npu-serve-smoke {VERSION} (commit ")),
        "{version}"
    );

    // `man npu-serve-smoke-run` finds its page (as MANPATH points man at the root's).
    let man = |page: &str| {
        run_ok(
            Command::new("man")
                .args(["-P", "cat", page])
                .env("MANPATH", root.join("usr/share/man"))
                .env("MANWIDTH", "100"),
        )
    };
    let run_page = man("npu-serve-smoke-run");
    assert!(
        run_page.contains("npu-serve-smoke-run - Launch a serve"),
        "{run_page}"
    );
    assert!(
        run_page.contains("--first-token-ms <DURATION>"),
        "{run_page}"
    );
    assert!(man("npu-serve-smoke").contains("npu-serve-smoke-judge(1)"));

    // The gate from /usr/bin, against the stand-in (itself, as installed).
    let out = d.path().join("run");
    let o = Command::new(&installed)
        .args(["run", "--stand-in", "--replies", "2", "--out"])
        .arg(&out)
        .args(UNFLIPPABLE)
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("RESULT: PASS"));
    let manifest = json(&out.join("run.json"));
    assert_eq!(manifest["argv"][0], installed.display().to_string());

    // Completion, each shell from its own system directory.
    let completes = fresh_bash_completes(&root, &["run", "--fl"]);
    assert_eq!(completes, ["--floor"]);
    assert!(fresh_bash_completes(&root, &["ju"]).contains(&"judge".to_string()));
    let share = root.join("usr/share");
    let zsh = run_ok(Command::new("zsh").args(["-f", "-c"]).arg(format!(
        "fpath=({} $fpath); autoload -U compinit; compinit -u -d {}; print $_comps[npu-serve-smoke]",
        share.join("zsh/vendor-completions").display(),
        d.path().join("zcompdump").display()
    )));
    assert_eq!(zsh.trim(), "_npu-serve-smoke");
    let fish = run_ok(
        Command::new("fish")
            .args(["--no-config", "-c"])
            .arg(format!(
                "set -p fish_complete_path {}; complete -C 'npu-serve-smoke ru'",
                share.join("fish/vendor_completions.d").display()
            ))
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", root.join("usr/bin").display()),
            ),
    );
    assert!(fish.starts_with("run\t"), "{fish}");
}

/// The release workflow's .deb step, as it runs there (`tools/build-deb.sh --target TRIPLE
/// --no-build --assets assets`) but on this box's binary in a cross build's place: the pages
/// and completions handed to it land where Cargo.toml's assets read them for that target, and
/// the package ships them with the binary stripped. The cross build itself cannot run here.
#[test]
fn the_release_workflows_deb_step_packages_a_built_binary_with_the_assets_it_is_given() {
    let Some(cargo_deb) = cargo_deb() else { return };
    let d = tempfile::tempdir().unwrap();
    let triple = "x86_64-unknown-linux-musl";
    let target_dir = d.path().join("target");
    let release = target_dir.join(triple).join("release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(BIN, release.join("npu-serve-smoke")).unwrap();
    let assets = d.path().join("assets");
    run_ok(
        Command::new("bash")
            .arg(Path::new(REPO).join("tools/package-assets.sh"))
            .arg(BIN)
            .arg(&assets),
    );
    let build_deb = |args: &[&str]| {
        build_deb()
            .args(args)
            .env("CARGO_DEB", &cargo_deb)
            .env("CARGO_TARGET_DIR", &target_dir)
            .output()
            .unwrap()
    };
    let out = d.path().join("dist");
    let (assets_s, out_s) = (assets.to_str().unwrap(), out.to_str().unwrap());
    let o = build_deb(&[
        "--target",
        triple,
        "--no-build",
        "--assets",
        assets_s,
        "--output",
        out_s,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let deb = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert_eq!(
        deb,
        out.join(format!("npu-serve-smoke_{VERSION}-1_amd64.deb"))
    );
    let listing = run_ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    for file in shipped() {
        assert!(listing.contains(&format!("./{file}")), "{file}:\n{listing}");
    }
    // The pages it was given, gzipped as policy asks; the given directory left as it was.
    assert!(assets.join("man/npu-serve-smoke-run.1").exists());
    assert!(release.join("assets/man/npu-serve-smoke-run.1.gz").exists());
    // Stripped: the debug binary's DWARF is not in the package's copy.
    let unpacked = d.path().join("unpacked");
    run_ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked));
    let sections = run_ok(
        Command::new("readelf")
            .arg("-S")
            .arg(unpacked.join("usr/bin/npu-serve-smoke")),
    );
    assert!(!sections.contains(".debug_info"), "{sections}");

    // Wrong hands: one line, exit 2, no package.
    for (args, says) in [
        (
            vec!["--assets", "/nonexistent", "--no-build", "--target", triple],
            "build-deb.sh: /nonexistent holds no pages and completions",
        ),
        (
            vec![
                "--target",
                "aarch64-unknown-linux-musl",
                "--no-build",
                "--assets",
                assets_s,
            ],
            "build-deb.sh: no binary at ",
        ),
        (vec!["--output"], "build-deb.sh: --output needs a value"),
        (
            vec!["--frobnicate"],
            "build-deb.sh: unknown argument '--frobnicate'",
        ),
    ] {
        let o = build_deb(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(says), "{args:?}: {err}");
    }
}
