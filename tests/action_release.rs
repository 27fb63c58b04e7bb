//! The Action on a released, checksum-verified binary (issue 38, item 3): `tools/ci/gate.sh`
//! given a `version` fetches this runner's tarball and the release's SHA256SUMS from
//! `release-url` (here a file server on loopback, in this file), checks the tarball's sum and
//! runs the gate inside it. A sum that does not match, a missing line, a failed download, a
//! malformed version or a member out of place stops it with one line and exit 2 before anything
//! from the tarball runs: the tarballs of those tests hold a "gate" that would leave a marker
//! file, and the marker must not be there.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::ci::{script, stderr, Script};
use crate::util::*;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

const VERSION: &str = "0.2.0";

/// This machine's release target, as the release workflow names it.
fn target() -> String {
    format!("{}-unknown-linux-musl", std::env::consts::ARCH)
}

/// The tarball's one top directory.
fn top() -> String {
    format!("npu-serve-smoke-{VERSION}-{}", target())
}

/// The tarball's name, as SHA256SUMS lists it.
fn asset() -> String {
    format!("{}.tar.gz", top())
}

/// A file's sha256, in hex.
fn sha256_of(path: &Path) -> String {
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path).unwrap(), &mut hasher).unwrap();
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A member of a hand-made tarball: its name, its type (`b'0'` a file, `b'2'` a symbolic link,
/// `b'5'` a directory) and a file's bytes or a link's target.
type Member<'a> = (&'a str, u8, &'a [u8]);

/// A file server on 127.0.0.1 for one test: `GET /PATH` answers ROOT/PATH, else 404. One
/// connection at a time, each bounded by its read and write timeouts; stopped when dropped.
struct FileServer {
    addr: SocketAddr,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FileServer {
    fn start(root: &Path) -> FileServer {
        // Port 0: the kernel picks a free port and this listener has it from the start.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (root, asked, stop) = (root.to_path_buf(), asked.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        // A client that goes away mid-answer is the client's business.
                        let _ = answer(&root, stream, &asked);
                    }
                }
            })
        };
        FileServer {
            addr,
            asked,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The paths asked for so far, in order.
    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept, which then sees the stop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One HTTP/1.1 exchange: the request's head (at most 16 KiB), then the file or a 404.
fn answer(root: &Path, mut stream: TcpStream, asked: &Mutex<Vec<String>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(LONG))?;
    let mut head = BufReader::new(stream.try_clone()?.take(16 << 10));
    let mut request = String::new();
    head.read_line(&mut request)?;
    loop {
        let mut line = String::new();
        if head.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
    }
    let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
    asked.lock().unwrap().push(path.clone());
    let file = path
        .strip_prefix('/')
        .filter(|p| !p.split('/').any(|c| c == ".."))
        .map(|p| root.join(p))
        .filter(|f| f.is_file());
    match file {
        Some(f) => {
            let mut f = std::fs::File::open(f)?;
            let len = f.metadata()?.len();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
                 Content-Length: {len}\r\nConnection: close\r\n\r\n"
            )?;
            std::io::copy(&mut f, &mut stream)?;
        }
        None => stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n",
        )?,
    }
    stream.flush()
}

/// A release as the release workflow publishes it, served on loopback (`SERVER/v0.2.0/` holds
/// the tarball and SHA256SUMS), and the rest of one test's files: the runner's temporary
/// directory, the run directory, the marker.
struct Release {
    dir: tempfile::TempDir,
    server: FileServer,
}

impl Release {
    fn new() -> Release {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(format!("release/v{VERSION}"))).unwrap();
        std::fs::create_dir(dir.path().join("runner-temp")).unwrap();
        let server = FileServer::start(&dir.path().join("release"));
        Release { dir, server }
    }

    /// Where the release's files are served from.
    fn files(&self) -> PathBuf {
        self.dir.path().join(format!("release/v{VERSION}"))
    }

    fn tarball(&self) -> PathBuf {
        self.files().join(asset())
    }

    /// The URL SHA256SUMS is fetched from.
    fn sums_url(&self) -> String {
        format!("{}/v{VERSION}/SHA256SUMS", self.server.url())
    }

    /// The line that refuses the tarball for its sum: `actual`, not `expected` as the sums
    /// `from` say.
    fn mismatch(&self, from: &str, actual: &str, expected: &str) -> String {
        format!(
            "gate.sh: {} does not match SHA256SUMS from {from} (sha256 {actual}, expected {expected}): not running it",
            asset()
        )
    }

    /// The URL the tarball is fetched from.
    fn tarball_url(&self) -> String {
        format!("{}/v{VERSION}/{}", self.server.url(), asset())
    }

    fn runner_temp(&self) -> PathBuf {
        self.dir.path().join("runner-temp")
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// The file that exists once anything from a tarball has run.
    fn marker(&self) -> PathBuf {
        self.dir.path().join("it-ran")
    }

    /// A "gate" that only leaves the marker (`variant` makes its bytes differ).
    fn marker_gate(&self, variant: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(format!("marker-gate{variant}"));
        let text = format!(
            "#!/bin/sh\n# {variant}\ntouch '{}'\n",
            self.marker().display()
        );
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// The tarball in the release's layout, made by tar as the release workflow makes it, with
    /// `gate` as its binary.
    fn put_tarball(&self, gate: &Path) {
        let stage = self.dir.path().join("stage");
        let _ = std::fs::remove_dir_all(&stage);
        let top_dir = stage.join(top());
        for sub in ["man", "complete"] {
            std::fs::create_dir_all(top_dir.join(sub)).unwrap();
        }
        let binary = top_dir.join("npu-serve-smoke");
        // The debug gate is large: a link where the file systems allow one.
        if std::fs::hard_link(gate, &binary).is_err() {
            std::fs::copy(gate, &binary).unwrap();
        }
        std::fs::write(
            top_dir.join("man/npu-serve-smoke.1"),
            ".TH NPU-SERVE-SMOKE 1\n",
        )
        .unwrap();
        std::fs::write(top_dir.join("complete/npu-serve-smoke.bash"), "complete\n").unwrap();
        for file in ["LICENSE-MIT", "LICENSE-APACHE", "README.md"] {
            std::fs::copy(Path::new(REPO).join(file), top_dir.join(file)).unwrap();
        }
        let tar = self.files().join(format!("{}.tar", top()));
        run_ok(
            Command::new("tar")
                .arg("-cf")
                .arg(&tar)
                .arg("-C")
                .arg(&stage)
                .arg(top()),
        );
        gzip(&tar);
    }

    /// A tarball of `members` written by hand (ustar headers), so it can hold what tar itself
    /// will not write: absolute names, `..`, links.
    fn put_hand_made_tarball(&self, members: &[Member]) {
        let mut tar = Vec::new();
        for &(name, kind, body) in members {
            let mut h = [0u8; 512];
            h[..name.len()].copy_from_slice(name.as_bytes());
            let size = if kind == b'0' { body.len() } else { 0 };
            h[100..108].copy_from_slice(b"0000755\0");
            h[108..116].copy_from_slice(b"0000000\0");
            h[116..124].copy_from_slice(b"0000000\0");
            h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
            h[136..148].copy_from_slice(b"00000000000\0");
            h[148..156].copy_from_slice(b"        ");
            h[156] = kind;
            if kind == b'2' {
                h[157..157 + body.len()].copy_from_slice(body);
            }
            h[257..263].copy_from_slice(b"ustar\0");
            h[263..265].copy_from_slice(b"00");
            let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
            h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
            tar.extend_from_slice(&h);
            if kind == b'0' {
                tar.extend_from_slice(body);
                tar.resize(tar.len().next_multiple_of(512), 0);
            }
        }
        tar.resize(tar.len() + 1024, 0);
        let path = self.files().join(format!("{}.tar", top()));
        std::fs::write(&path, tar).unwrap();
        gzip(&path);
    }

    /// The tarball's line of SHA256SUMS, as sha256sum writes it.
    fn sum_line(&self) -> String {
        format!("{}  {}\n", sha256_of(&self.tarball()), asset())
    }

    fn put_sums(&self, text: &str) {
        std::fs::write(self.files().join("SHA256SUMS"), text).unwrap();
    }

    /// gate.sh as the Action runs it with `version`, this release's URL as `release-url`, this
    /// test's runner temporary directory, and the stand-in as the serve.
    fn script(&self, version: &str) -> Script {
        let out = self.out().display().to_string();
        let url = self.server.url();
        let mut s = script(&[
            ("GATE_VERSION", version),
            ("GATE_RELEASE_URL", url.as_str()),
            ("GATE_ARGS", "--stand-in"),
            ("GATE_OUT", out.as_str()),
        ]);
        s.cmd
            .env("RUNNER_TEMP", self.runner_temp())
            // Never github.com, whatever this test's own environment holds.
            .env_remove("GITHUB_ACTION_REPOSITORY");
        s
    }

    /// The one line a refusal says, after holding it to exit 2, that line alone on stderr, and
    /// nothing run: no marker, no run directory, no outputs, no download left behind.
    fn refused(&self, s: &Script, o: &Output) -> String {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.ends_with('\n'), "{err:?}");
        assert!(
            !self.marker().exists(),
            "something from the tarball ran: {err}"
        );
        assert!(!self.out().exists(), "a run directory was made: {err}");
        assert_eq!(std::fs::read_to_string(&s.output).unwrap(), "", "{err}");
        let left: Vec<_> = std::fs::read_dir(self.runner_temp())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "left behind: {left:?} ({err})");
        err.trim_end().to_string()
    }
}

fn run_ok(cmd: &mut Command) {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}", stderr(&o));
}

/// FILE.tar made FILE.tar.gz.
fn gzip(tar: &Path) {
    run_ok(Command::new("gzip").args(["-1", "-n", "-f"]).arg(tar));
}

#[test]
fn a_release_whose_sum_matches_runs_as_the_gate_and_says_which() {
    let r = Release::new();
    r.put_tarball(Path::new(BIN));
    let sum = sha256_of(&r.tarball());
    // SHA256SUMS lists every asset; the other target's line comes first.
    r.put_sums(&format!(
        "{}  npu-serve-smoke-{VERSION}-riscv64gc-unknown-linux-musl.tar.gz\n{}",
        "0".repeat(64),
        r.sum_line()
    ));
    let mut s = r.script(&format!("v{VERSION}"));
    let o = s.run();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let said = format!(
        "gate.sh: running npu-serve-smoke {VERSION} ({}), sha256 {sum}, from {}",
        target(),
        r.tarball_url()
    );
    assert!(err.lines().any(|l| l == said), "{said}\nnot in:\n{err}");
    assert_eq!(s.output("result").as_deref(), Some("pass"));
    assert_eq!(s.output("gate-version").as_deref(), Some(VERSION));
    assert_eq!(json(&r.out().join("result.json"))["result"], "PASS");
    // The stand-in is the running gate itself (its own path): the unpacked binary ran, not the
    // debug gate first on PATH.
    let run = json(&r.out().join("run.json"));
    let serve = run["serve_argv"][0].as_str().unwrap();
    let unpacked = Path::new(serve);
    assert!(unpacked.starts_with(r.runner_temp()), "{serve}");
    assert!(
        unpacked.ends_with(format!("{}/npu-serve-smoke", top())),
        "{serve}"
    );
    assert_ne!(serve, BIN);
    // Both files fetched once, and the download gone with the run.
    assert_eq!(
        r.server.asked(),
        [
            format!("/v{VERSION}/SHA256SUMS"),
            format!("/v{VERSION}/{}", asset())
        ]
    );
    assert_eq!(std::fs::read_dir(r.runner_temp()).unwrap().count(), 0);
}

#[test]
fn a_sum_one_digit_off_stops_it_before_anything_runs() {
    let r = Release::new();
    r.put_tarball(&r.marker_gate(""));
    let sum = sha256_of(&r.tarball());
    let first = if sum.starts_with('0') { "1" } else { "0" };
    let wrong = format!("{first}{}", &sum[1..]);
    r.put_sums(&format!("{wrong}  {}\n", asset()));
    let mut s = r.script(VERSION);
    let o = s.run();
    assert_eq!(r.refused(&s, &o), r.mismatch(&r.sums_url(), &sum, &wrong));
}

#[test]
fn a_tarball_changed_after_it_was_summed_stops_it_before_anything_runs() {
    let r = Release::new();
    r.put_tarball(&r.marker_gate("summed"));
    let summed = sha256_of(&r.tarball());
    r.put_sums(&r.sum_line());
    r.put_tarball(&r.marker_gate("swapped"));
    let swapped = sha256_of(&r.tarball());
    assert_ne!(summed, swapped);
    let mut s = r.script(VERSION);
    let o = s.run();
    assert_eq!(
        r.refused(&s, &o),
        r.mismatch(&r.sums_url(), &swapped, &summed)
    );
}

/// `sha256sums` pinned in the workflow: the server's SHA256SUMS is never asked for, so a mirror
/// that serves another build with sums to match is caught, and a release the pin matches runs.
#[test]
fn pinned_sums_are_used_instead_of_the_servers_and_a_build_they_do_not_pin_never_runs() {
    let r = Release::new();
    r.put_tarball(&r.marker_gate("pinned"));
    let pinned = r.sum_line();
    let pinned_sum = sha256_of(&r.tarball());
    // The server now serves another build, and sums that match it.
    r.put_tarball(&r.marker_gate("served"));
    let served = sha256_of(&r.tarball());
    r.put_sums(&r.sum_line());
    let mut s = r.script(VERSION);
    s.cmd.env("GATE_SHA256SUMS", pinned.trim_end());
    let o = s.run();
    assert_eq!(
        r.refused(&s, &o),
        r.mismatch("the workflow's sha256sums", &served, &pinned_sum)
    );
    assert_eq!(r.server.asked(), [format!("/v{VERSION}/{}", asset())]);

    // The pinned build, served: it runs (the marker "gate" leaves its marker), and the server's
    // SHA256SUMS, now wrong, was never read.
    let r = Release::new();
    r.put_tarball(&r.marker_gate("pinned"));
    let pinned = r.sum_line();
    r.put_sums(&format!("{}  {}\n", "0".repeat(64), asset()));
    let mut s = r.script(VERSION);
    s.cmd.env("GATE_SHA256SUMS", &pinned);
    let o = s.run();
    assert!(r.marker().exists(), "{}", stderr(&o));
    assert_eq!(r.server.asked(), [format!("/v{VERSION}/{}", asset())]);
}

#[test]
fn sha256sums_without_exactly_one_well_formed_line_for_the_tarball_stops_it() {
    let r = Release::new();
    r.put_tarball(&r.marker_gate(""));
    let line = r.sum_line();
    let other = format!(
        "{}  npu-serve-smoke-{VERSION}-riscv64gc-unknown-linux-musl.tar.gz\n",
        "a".repeat(64)
    );
    let sums_url = r.sums_url();
    let asset = asset();
    let no_line = format!("has no line for {asset}");
    for (sums, says) in [
        (other.clone(), no_line.clone()),
        (String::new(), no_line.clone()),
        // The name must be the file's, whole.
        (line.replace(&asset, &format!("./{asset}")), no_line.clone()),
        (line.replace(".tar.gz", ".tar.gz.sig"), no_line.clone()),
        (
            format!("{line}{other}{line}"),
            format!("has 2 lines for {asset}, not one"),
        ),
        (
            "<!doctype html><title>Not here</title>\n".into(),
            "is not sha256sum's output (line 1)".into(),
        ),
        (
            format!("{other}{}", line.replace('\n', "\r\n")),
            "is not sha256sum's output (line 2)".into(),
        ),
        (
            format!("{other}{}", &line[1..]),
            "is not sha256sum's output (line 2)".into(),
        ),
        (
            format!("{line}\0{other}"),
            "is not sha256sum's output (it holds a NUL byte)".into(),
        ),
    ] {
        r.put_sums(&sums);
        let mut s = r.script(VERSION);
        let o = s.run();
        assert_eq!(
            r.refused(&s, &o),
            format!("gate.sh: SHA256SUMS from {sums_url} {says}: not running it"),
            "{sums:?}"
        );
    }
}

#[test]
fn a_failed_download_stops_it() {
    let r = Release::new();
    // No tarball: its download answers 404.
    r.put_sums(&format!("{}  {}\n", "0".repeat(64), asset()));
    let mut s = r.script(VERSION);
    let o = s.run();
    let line = r.refused(&s, &o);
    let start = format!(
        "gate.sh: failed to download {} (curl: (22) ",
        r.tarball_url()
    );
    assert!(line.starts_with(&start), "{line}");
    assert!(line.contains("404"), "{line}");
    assert!(line.ends_with("): not running it"), "{line}");

    // No SHA256SUMS either: the tarball is never asked for.
    std::fs::remove_file(r.files().join("SHA256SUMS")).unwrap();
    let before = r.server.asked().len();
    let mut s = r.script(VERSION);
    let o = s.run();
    let line = r.refused(&s, &o);
    let sums_url = r.sums_url();
    assert!(
        line.starts_with(&format!(
            "gate.sh: failed to download {sums_url} (curl: (22) "
        )),
        "{line}"
    );
    assert_eq!(
        r.server.asked()[before..],
        [format!("/v{VERSION}/SHA256SUMS")]
    );
}

#[test]
fn a_malformed_version_is_refused_before_any_download() {
    let r = Release::new();
    r.put_tarball(&r.marker_gate(""));
    r.put_sums(&r.sum_line());
    for (version, shown) in [
        ("0.2", "0.2"),
        ("latest", "latest"),
        ("vv0.2.0", "vv0.2.0"),
        ("0.2.0/../../x", "0.2.0/../../x"),
        ("0.2.0 ", "0.2.0 "),
        ("0.2.0+build.1", "0.2.0+build.1"),
        ("0.2.0\n--stand-in", "0.2.0?--stand-in"),
    ] {
        let mut s = r.script(version);
        let o = s.run();
        assert_eq!(
            r.refused(&s, &o),
            format!("gate.sh: version must be a release's, like 0.2.0 or v0.2.0, not '{shown}'"),
            "{version:?}"
        );
    }
    assert_eq!(r.server.asked(), Vec::<String>::new());
}

#[test]
fn a_tarball_with_a_member_outside_its_directory_or_a_link_is_refused() {
    let r = Release::new();
    let top = top();
    let asset = asset();
    let gate = std::fs::read(r.marker_gate("")).unwrap();
    let dir = format!("{top}/");
    let binary = format!("{top}/npu-serve-smoke");
    let climbs = format!("{top}/../../escape");
    let absolute = r.dir.path().join("escape").display().to_string();
    let marker_gate = r.marker_gate("linked").display().to_string();
    let cases: [(Vec<Member>, String); 4] = [
        (
            vec![
                (&dir, b'5', b""),
                (&binary, b'0', &gate),
                (&climbs, b'0', b"x"),
            ],
            format!("has a member with .. in its name ('{climbs}')"),
        ),
        (
            vec![
                (&dir, b'5', b""),
                (&binary, b'0', &gate),
                (&absolute, b'0', b"x"),
            ],
            format!("has a member outside {top}/ ('{absolute}')"),
        ),
        (
            vec![
                (&dir, b'5', b""),
                (&binary, b'0', &gate),
                ("npu-serve-smoke-0.1.0/README.md", b'0', b"x"),
            ],
            format!("has a member outside {top}/ ('npu-serve-smoke-0.1.0/README.md')"),
        ),
        (
            vec![(&dir, b'5', b""), (&binary, b'2', marker_gate.as_bytes())],
            "has a member that is neither a file nor a directory (a link or a device)".into(),
        ),
    ];
    for (members, says) in cases {
        r.put_hand_made_tarball(&members);
        // Summed right: it is the listing that refuses it.
        r.put_sums(&r.sum_line());
        let mut s = r.script(VERSION);
        let o = s.run();
        assert_eq!(
            r.refused(&s, &o),
            format!("gate.sh: {asset} {says}: not running it")
        );
        assert!(!r.dir.path().join("escape").exists());
    }
}

#[test]
fn a_runner_that_is_not_linux_on_x86_64_or_aarch64_is_refused_before_any_download() {
    use std::os::unix::fs::PermissionsExt;
    let r = Release::new();
    for (os, machine) in [
        ("Linux", "riscv64"),
        ("Darwin", "arm64"),
        ("Linux", "armv7l"),
    ] {
        // An uname that says this runner is another kind.
        let fake = r.dir.path().join(format!("uname-{os}-{machine}"));
        std::fs::create_dir(&fake).unwrap();
        let uname = fake.join("uname");
        std::fs::write(
            &uname,
            format!("#!/bin/sh\ncase $1 in -m) echo {machine} ;; *) echo {os} ;; esac\n"),
        )
        .unwrap();
        std::fs::set_permissions(&uname, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut s = r.script(VERSION);
        let path = format!(
            "{}:{}:{}",
            fake.display(),
            Path::new(BIN).parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        s.cmd.env("PATH", path);
        let o = s.run();
        assert_eq!(
            r.refused(&s, &o),
            format!(
                "gate.sh: no npu-serve-smoke release runs on {os} {machine} (Linux on x86_64 or \
                 aarch64 only): leave version empty to build the gate here"
            )
        );
    }
    assert_eq!(r.server.asked(), Vec::<String>::new());
}

#[test]
fn a_version_with_gate_bin_or_without_a_release_url_to_use_is_refused() {
    let r = Release::new();
    let mut s = r.script(VERSION);
    s.cmd.env("GATE_BIN", BIN);
    let o = s.run();
    assert_eq!(
        r.refused(&s, &o),
        "gate.sh: GATE_BIN and version both name the gate to run: give one"
    );

    // The default URL is the action's own repository's releases; outside an action there is
    // none (GitLab, a local run): release-url must say where.
    let mut s = r.script(VERSION);
    s.cmd.env_remove("GATE_RELEASE_URL");
    let o = s.run();
    assert_eq!(
        r.refused(&s, &o),
        format!(
            "gate.sh: no release-url, and no GITHUB_ACTION_REPOSITORY to download version \
             {VERSION} from: give release-url"
        )
    );

    let mut s = r.script(VERSION);
    s.cmd.env("GATE_RELEASE_URL", "file:///srv/releases");
    let o = s.run();
    assert_eq!(
        r.refused(&s, &o),
        "gate.sh: release-url must be an https:// or http:// URL, not 'file:///srv/releases'"
    );
    assert_eq!(r.server.asked(), Vec::<String>::new());
}
