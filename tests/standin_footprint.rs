//! The stand-in's footprint (issue 34), as the gate will sample it: a real stand-in process,
//! real chat completions over HTTP on loopback, and its memory read from its own
//! /proc/PID/status (RssAnon), its device memory from the file it keeps and its first tokens
//! from its own send trace. Memory is held to floors with room for the allocator's own noise
//! (a few hundred KiB against MiB leaked); timing to lower bounds alone, which a slow box only
//! helps: no upper bound on any wall-clock figure.

use std::path::Path;
use std::time::Duration;

use npu_serve_smoke::standin::TraceLine;
use serde_json::json;

use crate::util::{gate, Running};

/// Bound on every wait here: a hang guard, wide, so a loaded 2-core box cannot flip a test.
const WAIT: Duration = Duration::from_secs(30);

/// A MiB, in the KiB /proc/PID/status counts in.
const MIB_IN_KIB: u64 = 1024;

/// A stand-in process and a client that talks to it over one keep-alive connection.
struct Serve {
    running: Running,
    url: String,
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Serve {
    /// Start `stand-in --port 0 <script>` (a short reply, quickly sent) and wait until it
    /// listens.
    fn start(script: &[&str]) -> Serve {
        let mut args = vec!["stand-in", "--port", "0", "--tokens", "4", "--gaps-ms", "1"];
        args.extend_from_slice(script);
        let mut running = Running::start(&args);
        let url = running.stand_in_url(WAIT);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        Serve {
            running,
            url,
            rt,
            client,
        }
    }

    /// One streamed chat completion, read whole: the stand-in has ended the reply (and left
    /// its footprint) before the body's end reaches us.
    fn reply(&self) {
        let req = self
            .client
            .post(format!("{}/v1/chat/completions", self.url))
            .header("content-type", "application/json")
            .body(
                json!({"messages": [{"role": "user", "content": "hi"}], "stream": true,
                       "max_tokens": 16})
                .to_string(),
            );
        let (status, text) = self.rt.block_on(async {
            tokio::time::timeout(WAIT, async {
                let resp = req.send().await.unwrap();
                let status = resp.status().as_u16();
                (status, resp.text().await.unwrap())
            })
            .await
            .expect("a reply within the hang guard")
        });
        assert_eq!(status, 200, "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    }

    /// `n` replies, one after another.
    fn replies(&self, n: usize) {
        for _ in 0..n {
            self.reply();
        }
    }

    /// The stand-in's resident anonymous memory, KiB (RssAnon in /proc/PID/status).
    fn rss_anon_kib(&self) -> u64 {
        let pid = self.running.pid();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .unwrap_or_else(|| panic!("no RssAnon in /proc/{pid}/status:\n{status}"));
        line.trim()
            .strip_suffix("kB")
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

#[test]
fn a_leak_grows_rss_anon_by_its_size_at_every_reply() {
    let serve = Serve::start(&["--leak", "4MiB"]);
    let before = serve.rss_anon_kib();
    serve.replies(10);
    let grew = serve.rss_anon_kib().saturating_sub(before);
    // 40 MiB leaked; 4 MiB of room for memory the serve itself gave back.
    assert!(
        grew >= 36 * MIB_IN_KIB,
        "RssAnon grew by {grew} KiB over 10 replies leaking 4 MiB each"
    );
}

#[test]
fn a_leak_of_the_first_replies_only_settles() {
    let serve = Serve::start(&["--leak", "4MiB", "--leak-replies", "2"]);
    let before = serve.rss_anon_kib();
    serve.replies(2);
    let leaking = serve.rss_anon_kib();
    let grew = leaking.saturating_sub(before);
    assert!(
        grew >= 8 * MIB_IN_KIB,
        "RssAnon grew by {grew} KiB over the 2 replies that leak 4 MiB each"
    );
    serve.replies(8);
    let settled = serve.rss_anon_kib().saturating_sub(leaking);
    // Were one more reply to leak, it would be 4 MiB.
    assert!(
        settled < 4 * MIB_IN_KIB,
        "RssAnon grew by {settled} KiB over 8 replies that do not leak"
    );
}

#[test]
fn a_cache_filled_at_the_first_reply_grows_rss_anon_once() {
    let serve = Serve::start(&["--first-reply-alloc", "16MiB"]);
    let before = serve.rss_anon_kib();
    serve.reply();
    let filled = serve.rss_anon_kib();
    let grew = filled.saturating_sub(before);
    assert!(
        grew >= 15 * MIB_IN_KIB,
        "the first reply grew RssAnon by {grew} KiB"
    );
    serve.replies(8);
    let after = serve.rss_anon_kib().saturating_sub(filled);
    assert!(
        after < 4 * MIB_IN_KIB,
        "RssAnon grew by {after} KiB over 8 replies after the cache was filled"
    );
}

/// The device memory file's number, or a panic naming what it holds when that is not a whole
/// number and its newline.
fn device_bytes(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    text.strip_suffix('\n')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{} holds {text:?}", path.display()))
}

#[test]
fn the_device_memory_file_reads_the_base_and_a_leak_for_each_reply_never_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("device-memory");
    let serve = Serve::start(&[
        "--device-memory-file",
        file.to_str().unwrap(),
        "--device-memory-base",
        "1MiB",
        "--device-leak",
        "64KiB",
    ]);
    // There by the time the stand-in says it listens.
    assert_eq!(device_bytes(&file), 1 << 20);
    // A reader beside the replies sees a whole number every time (renamed into place).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (file, stop) = (file.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                device_bytes(&file);
                reads += 1;
            }
            reads
        })
    };
    for n in 1..=5u64 {
        serve.reply();
        assert_eq!(
            device_bytes(&file),
            (1 << 20) + n * 65536,
            "after {n} replies"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "FILE.tmp is renamed away: {left:?}");
}

/// Each chat completion request's wait for its first event, ms, in arrival order, from the
/// stand-in's own trace (replies made one after another, so a request's first event is the
/// first after its line).
fn first_token_waits_ms(trace: &Path) -> Vec<u64> {
    let mut waits = Vec::new();
    let mut received = None;
    for line in std::fs::read_to_string(trace).unwrap().lines() {
        match serde_json::from_str(line).unwrap() {
            TraceLine::Request { received_ns, .. } => received = Some(received_ns),
            TraceLine::Event { sent_ns, .. } => {
                if let Some(r) = received.take() {
                    waits.push((sent_ns - r) / 1_000_000);
                }
            }
            TraceLine::Altered { .. } => {}
        }
    }
    waits
}

#[test]
fn the_first_reply_s_first_token_is_cold() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let serve = Serve::start(&[
        "--ttft-ms",
        "10",
        "--cold-first-token-ms",
        "800",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    serve.replies(3);
    let waits = first_token_waits_ms(&trace);
    assert_eq!(waits.len(), 3, "{waits:?}");
    // 810 ms asked for; a lower bound only (that later replies are not cold is the unit
    // tests': an upper bound on a wall clock would flip on a loaded box).
    assert!(waits[0] >= 750, "the first reply's first token: {waits:?}");
}

#[test]
fn a_request_after_idle_gets_its_first_token_later() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let serve = Serve::start(&[
        "--ttft-ms",
        "10",
        "--idle-after-ms",
        "300",
        "--idle-first-token-ms",
        "800",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    serve.reply();
    // Idle for three times --idle-after-ms: a slow box only lengthens it.
    std::thread::sleep(Duration::from_millis(900));
    serve.reply();
    let waits = first_token_waits_ms(&trace);
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert!(waits[1] >= 750, "the reply after idle: {waits:?}");
}

#[test]
fn a_leak_size_without_its_unit_below_0_or_over_1_gib_is_refused_in_one_line() {
    for bad in ["5", "-1MiB", "2GiB"] {
        let o = gate()
            .args(["stand-in", "--port", "0", "--leak", bad])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {stderr}");
        // clap's value error, as every bounded flag's: one line, and its pointer to --help.
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
            .collect();
        assert_eq!(lines.len(), 1, "{bad}: {stderr}");
        assert!(lines[0].contains("--leak"), "{bad}: {stderr}");
        assert!(lines[0].contains(bad), "{bad}: {stderr}");
    }
}
