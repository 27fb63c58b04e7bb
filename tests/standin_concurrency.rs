//! The stand-in under concurrent streams, as the gate's `--concurrency N` bursts will meet it:
//! four requests sent together, each on its own connection with its own `x-request-id`, to a
//! real stand-in process over real HTTP on loopback. With `--serial` it serves them one after
//! another, each first token counted from the request's start; without, all at once. Every
//! figure is read from the stand-in's own send trace, whose lines name the connection they
//! were written on: no clock of the client's is asserted.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use npu_serve_smoke::standin::TraceLine;
use serde_json::json;

use crate::util::Running;

/// Bound on every wait here: a hang guard, wide, so a loaded 2-core box cannot flip a test.
const WAIT: Duration = Duration::from_secs(30);

/// The script of both runs: a 50 ms first token, then 20 ms gaps, so a reply of 10 tokens is
/// under way for about 230 ms.
const SCRIPT: [&str; 6] = ["--ttft-ms", "50", "--gaps-ms", "20", "--tokens", "10"];

/// The burst's requests: their `x-request-id` and `max_tokens`. The lengths differ, so each
/// connection's events can be matched to its request by their count alone.
const BURST: [(&str, usize); 4] = [
    ("npu-serve-smoke-0", 7),
    ("npu-serve-smoke-1", 8),
    ("npu-serve-smoke-2", 9),
    ("npu-serve-smoke-3", 10),
];

/// One connection's part of the trace.
#[derive(Debug, Default)]
struct Stream {
    /// The `x-request-id` of each request that came on it.
    ids: Vec<Option<String>>,
    /// When its request arrived, CLOCK_MONOTONIC ns.
    received_ns: u64,
    /// When each of its events was sent, in order.
    sent_ns: Vec<u64>,
    /// Its events that carried content.
    content: usize,
    /// Its `[DONE]` events.
    done: usize,
}

impl Stream {
    fn first(&self) -> u64 {
        self.sent_ns[0]
    }

    fn last(&self) -> u64 {
        *self.sent_ns.last().unwrap()
    }
}

/// The trace's streams, one a connection, in the order their first events were sent.
fn streams(trace: &Path) -> Vec<Stream> {
    let mut by_conn: BTreeMap<u64, Stream> = BTreeMap::new();
    for line in std::fs::read_to_string(trace).unwrap().lines() {
        match serde_json::from_str(line).unwrap() {
            TraceLine::Request {
                received_ns,
                conn,
                request_id,
                ..
            } => {
                let s = by_conn.entry(conn).or_default();
                s.ids.push(request_id);
                s.received_ns = received_ns;
            }
            TraceLine::Event {
                sent_ns,
                conn,
                content_chars,
                done,
                ..
            } => {
                let s = by_conn.entry(conn).or_default();
                s.sent_ns.push(sent_ns);
                s.content += usize::from(content_chars > 0);
                s.done += usize::from(done);
            }
            TraceLine::Altered { .. } => {}
        }
    }
    let mut streams: Vec<Stream> = by_conn.into_values().collect();
    assert!(
        streams.iter().all(|s| !s.sent_ns.is_empty()),
        "a connection without events: {streams:?}"
    );
    streams.sort_by_key(Stream::first);
    streams
}

/// A burst of long streams, for sub-millisecond gaps: each under way for about 200 ms at 0.5
/// ms gaps, far longer than the spread of the requests' arrivals.
const LONG_BURST: [(&str, usize); 4] = [
    ("npu-serve-smoke-0", 400),
    ("npu-serve-smoke-1", 401),
    ("npu-serve-smoke-2", 402),
    ("npu-serve-smoke-3", 403),
];

/// When a burst's requests are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// All at once, as the gate releases a burst.
    Together,
    /// Each once the stream before it has sent its first bytes: the stand-in is already
    /// streaming when the next request comes.
    EachMidStream,
}

/// Start the stand-in with `script` and a trace, send the burst of `requests` as `start`
/// says, each on a connection of its own, read every reply whole, stop the stand-in and read
/// its trace.
fn burst(script: &[&str], requests: &[(&str, usize)], start: Start) -> Vec<Stream> {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut args = vec![
        "stand-in",
        "--port",
        "0",
        "--trace",
        trace.to_str().unwrap(),
    ];
    args.extend_from_slice(script);
    let mut stand_in = Running::start(&args);
    let url = stand_in.stand_in_url(WAIT);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let replies = rt.block_on(async {
        let mut sends = Vec::new();
        for &(id, max_tokens) in requests {
            // A client each: one connection a request, as the gate's burst opens them.
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            let req = client
                .post(format!("{url}/v1/chat/completions"))
                .header("content-type", "application/json")
                .header("x-request-id", id)
                .body(
                    json!({"messages": [{"role": "user", "content": "hi"}],
                           "stream": true, "max_tokens": max_tokens,
                           "stream_options": {"include_usage": true}})
                    .to_string(),
                );
            let (first, got_first) = tokio::sync::oneshot::channel();
            sends.push(tokio::spawn(async move {
                let mut resp = req.send().await.unwrap();
                let status = resp.status().as_u16();
                let mut text = String::new();
                let mut first = Some(first);
                while let Some(bytes) = resp.chunk().await.unwrap() {
                    text.push_str(&String::from_utf8_lossy(&bytes));
                    if let Some(first) = first.take() {
                        let _ = first.send(());
                    }
                }
                (status, text)
            }));
            if start == Start::EachMidStream {
                tokio::time::timeout(WAIT, got_first)
                    .await
                    .unwrap()
                    .unwrap();
            }
        }
        let mut replies = Vec::new();
        for send in sends {
            replies.push(tokio::time::timeout(WAIT, send).await.unwrap().unwrap());
        }
        replies
    });
    for (status, text) in &replies {
        assert_eq!(*status, 200, "{text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    }
    // Stopped before the trace is read: its SIGTERM handler runs between task polls, so no
    // event's bytes are out without their line (the client may read them first).
    stand_in.signal(Signal::SIGTERM);
    assert_eq!(stand_in.wait(WAIT), Some(0), "{}", stand_in.said);
    let streams = streams(&trace);
    assert_eq!(streams.len(), requests.len(), "{streams:?}");
    for s in &streams {
        // The events on this connection are those of the request that came on it.
        let [Some(id)] = &s.ids[..] else {
            panic!("one request with an id on each connection: {streams:?}")
        };
        let (_, max_tokens) = requests.iter().find(|(i, _)| i == id).unwrap();
        assert_eq!(s.content, *max_tokens, "{id}: {streams:?}");
        assert_eq!(s.done, 1, "{id}: {streams:?}");
    }
    streams
}

#[test]
fn serial_serves_a_burst_one_stream_after_another() {
    let mut script = vec!["--serial"];
    script.extend_from_slice(&SCRIPT);
    let streams = burst(&script, &BURST, Start::Together);
    // Without this the test would pass for a client that happened to send one at a time.
    assert!(
        streams[1..]
            .iter()
            .any(|s| s.received_ns < streams[0].last()),
        "no request arrived while the first stream was under way: {streams:?}"
    );
    for pair in streams.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert!(
            after.first() > before.last(),
            "two streams overlap: {streams:?}"
        );
        // The next first token is --ttft-ms (50 ms) from the start, which is after the last
        // stream ended: from the arrival, the ones that waited would have come at once.
        // Half of it, for the width of the clock readings; a slow box only lengthens it.
        assert!(
            after.first() - before.last() >= 25_000_000,
            "a first token came {} ms after the stream before it ended: {streams:?}",
            (after.first() - before.last()) / 1_000_000
        );
    }
}

#[test]
fn without_serial_a_burst_streams_at_once() {
    let streams = burst(&SCRIPT, &BURST, Start::Together);
    // Some stream's first event was sent before another's last: they were under way together,
    // and each connection's events, matched to its request by `burst`, interleaved. Sorted by
    // first events, any overlap shows in a neighbouring pair.
    assert!(
        streams.windows(2).any(|p| p[1].first() < p[0].last()),
        "the streams were sent one after another: {streams:?}"
    );
}

#[test]
fn sub_millisecond_gaps_keep_a_burst_together() {
    // Under tokio's 1 ms timer the gaps are kept by the stand-in's own waiting; a stream that
    // spun them out held the one thread, and the four went one after another.
    let script = ["--ttft-ms", "50", "--gaps-ms", "0.5", "--tokens", "500"];
    let streams = burst(&script, &LONG_BURST, Start::Together);
    let last_to_begin = streams.iter().map(Stream::first).max().unwrap();
    let first_to_end = streams.iter().map(Stream::last).min().unwrap();
    assert!(
        last_to_begin < first_to_end,
        "the four streams were never all under way at once (first and last sent_ns): {:?}",
        streams
            .iter()
            .map(|s| (s.first(), s.last()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_request_that_comes_mid_stream_at_sub_millisecond_gaps_is_served_beside_it() {
    // The stream under way is alone when the next request comes: were it to spin out its gaps
    // alone, the request would not even be accepted until it ended.
    let script = ["--ttft-ms", "1", "--gaps-ms", "0.5", "--tokens", "500"];
    let streams = burst(&script, &LONG_BURST[..2], Start::EachMidStream);
    let (first, second) = (&streams[0], &streams[1]);
    assert!(
        second.first() < first.last(),
        "the second stream began only after the first ended (first and last sent_ns): {:?}",
        [
            (first.first(), first.last()),
            (second.first(), second.last())
        ]
    );
}
