//! What `--version` and run.json say of the gate's own build (issue 38, item 5): the git
//! commit it was built from and the date of the build, as `NPU_SERVE_SMOKE_COMMIT` and
//! `NPU_SERVE_SMOKE_BUILD_DATE` for `src/build_info.rs`.
//!
//! The commit comes from, in order: `NPU_SERVE_SMOKE_COMMIT` in the build's environment (a
//! packager building from a tarball that knows it); `git rev-parse HEAD` in a checkout;
//! `.cargo_vcs_info.json`, which `cargo package` writes into a published crate (so a
//! `cargo install` from crates.io still names its commit); else `unknown`.
//!
//! The date honours `SOURCE_DATE_EPOCH` (reproducible-builds.org), which Debian's and most
//! distributions' builders set, so a rebuilt package is byte for byte the same; else it is
//! today, UTC. No dependency: the civil date is computed from the day count (Hinnant's
//! `civil_from_days`).

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-env-changed=NPU_SERVE_SMOKE_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let commit = std::env::var("NPU_SERVE_SMOKE_COMMIT")
        .ok()
        .filter(|c| is_commit(c))
        .or_else(|| from_git(Path::new(&dir)))
        .or_else(|| from_vcs_info(Path::new(&dir)))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NPU_SERVE_SMOKE_COMMIT={commit}");
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    println!("cargo:rustc-env=NPU_SERVE_SMOKE_BUILD_DATE={y:04}-{m:02}-{d:02}");
}

/// 7 to 64 hex digits: a git object name, full or abbreviated (SHA-1 or SHA-256).
fn is_commit(s: &str) -> bool {
    (7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// HEAD of the checkout at `dir`, and the files to watch so a new commit rebuilds with it.
fn from_git(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    // Only a checkout whose top is this crate: a crate unpacked inside some other repository
    // (cargo's registry cache under a dotfiles repo, say) must not take that repository's HEAD.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let head = git(&["rev-parse", "HEAD"]).filter(|c| is_commit(c))?;
    // What moves when HEAD does: HEAD itself on a checkout, its branch's ref (loose or packed)
    // on a commit, and the reflog on either. `--git-path` finds each in a worktree too.
    let mut watched = vec!["HEAD".to_string(), "logs/HEAD".into(), "packed-refs".into()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    Some(head)
}

/// The commit `cargo package` recorded: `{"git": {"sha1": "..."}, ...}`.
fn from_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let at = text.find("\"sha1\"")?;
    let rest = &text[at + "\"sha1\"".len()..];
    let start = rest.find('"')? + 1;
    let end = start + rest[start..].find('"')?;
    Some(rest[start..end].to_string()).filter(|c| is_commit(c))
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant, "chrono-
/// Compatible Low-Level Date Algorithms", `civil_from_days`).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}
