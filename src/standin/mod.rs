//! The stand-in serve: an OpenAI-compatible server on loopback, scripted for tests and for a
//! first gate on a machine with no real serve.
//!
//! It knows the built-in prompts and answers them right, so `run --stand-in` passes out of the
//! box. Its timing and its faults are scripted, and with `--trace FILE` it records when each
//! request arrived and when each SSE event's bytes were written to the socket (stamped in the
//! socket's `poll_write`, on CLOCK_MONOTONIC), so tests can compare what the gate reports with
//! what was really sent rather than with what was asked for. Each line names its connection
//! (numbered from 1 in accept order) and a request's line its `x-request-id`, so the events of
//! concurrent streams can be told apart. `--fault-request K` puts the faults in the K-th chat
//! completion request alone (counted in arrival order), so one bad reply can be put among
//! good ones. `--serial` serves one chat completion at a time, as a serve without batching.
//! `--change-word SHARE` (seeded) and `--batch-variant` (a reply started beside another) change
//! one word of a reply's answer, as a nondeterministic serve or a kernel that is not
//! batch-invariant does; each change is an `altered` line in the trace, so a test can hold the
//! gate's determinism check to what was really changed.
//!
//! It is the other side of the wire: it may use the wire's chunk fields, the prompts and the
//! clock, never the gate's client, judging or report (`tests/layers.rs` checks this), so the
//! gate is never tested against itself.
//!
//! For the gate's route evidence read from /proc, it can leave what a real serve leaves there
//! (`route.rs`): `--map-file FILE` (mapped at start, listed in /proc/PID/maps; `--map-exec
//! FILE` maps it as code, `r-xp`, as the loader maps a library), `--hold-open
//! FILE` (held open, a link in /proc/PID/fd), `--held-pos-per-token N` (each token moves the
//! held files' positions on by N bytes: `pos:` in /proc/PID/fdinfo/FD grows as it streams) and
//! `--busy-counter FILE` (the microseconds spent on replies, rewritten atomically per token,
//! like intel_vpu's sysfs `npu_busy_time_us`). `--wrap` (`wrap.rs`) runs it under a wrapper
//! process of its own that does not exec, so that evidence is only in a child of the serve the
//! gate launched. A bad path is refused (exit 2, one line) before it listens.
//!
//! For the gate's footprint lines (issue 34), it can misbehave as a serve does over its life
//! (`footprint.rs`): `--leak SIZE` keeps SIZE more resident at each reply's end
//! (`--leak-replies N`: the first N only), `--first-reply-alloc SIZE` fills a cache once,
//! `--device-memory-file FILE` keeps a pretend device memory that `--device-leak` grows a
//! reply at a time, `--cold-first-token-ms` makes the first reply's first token late and
//! `--idle-after-ms` with `--idle-first-token-ms` one that comes after idle; `--startup-ms`
//! is its slow load.
//!
//! For the gate's `--depths` (issue 35), it can have a context as a serve does (`context.rs`):
//! `--context N` (a token a word of the prompt) answers GET /props as llama-server does and
//! refuses a prompt past N with llama-server's 400, unless `--garble-past-context`,
//! `--answer-past-context`, `--truncate-past-context` or `--crash-past-context` meets it as a
//! broken serve would; `--prefill-us` makes a long prompt's first token later,
//! `--prompt-tokens-times` its usage's count wrong, and `--forget-deeper-than M` a deep fact
//! forgotten. A depth prompt is answered with its fact's code.
//!
//! # Layout
//! This file assembles the stand-in and runs its server; its children hold the rest, and none
//! reaches back into this file. `args.rs`: the script, as clap reads it, and its checks;
//! `mix.rs`: the mixing function the script's seeded draws and the filler share; `state.rs`:
//! what the handlers share; `reply.rs`: the chat handler, which plans a scripted reply;
//! `body.rs`: the body that sends it on time; `frames.rs`: the chunks and SSE events a reply is sent in; `info.rs`: GET
//! /v1/models and /metrics; `words.rs`: an answer's words, the filler after them, the
//! degenerate answers and a changed word; `scored.rs`: the scripted logprobs; `trace.rs`: the
//! send trace and the socket that stamps it; `route.rs`: the route evidence; `footprint.rs`:
//! the memory it leaves and its late first tokens; `context.rs`: the context, the prefill and
//! the answers to depth prompts; `wrap.rs`: `--wrap`; `tools.rs`: tool calls and JSON content,
//! and the faults that break their rules.

mod args;
mod body;
mod context;
mod footprint;
mod frames;
mod info;
mod mix;
mod reply;
mod route;
mod scored;
mod state;
mod tools;
mod trace;
mod words;
mod wrap;

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tokio::net::TcpListener;

pub use args::{AfterDone, ContextArgs, EndBy, FootprintArgs, OtherChoiceIn, StandInArgs};
use footprint::Footprint;
pub use frames::MODEL;
use info::{metrics, models};
use reply::chat;
use route::Route;
use state::Script;
pub use tools::ToolArgs;
pub use trace::{AlteredBy, TraceLine};
use trace::{ConnId, Trace, TracedListener};

/// Run the stand-in until it is killed; its exit code. With `--wrap`, run it as a child and
/// return the child's exit code once it has exited.
pub fn run(args: StandInArgs) -> Result<u8> {
    args.check()?;
    if args.wrap {
        return wrap::run();
    }
    if args.ignore_term {
        // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
        unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGTERM,
                nix::sys::signal::SigHandler::SigIgn,
            )
        }
        .context("failed to ignore SIGTERM")?;
    }
    // Mapped for the life of the process: kept here, where serving blocks until the end.
    let _mapped = route::map_files(&args.map_file, false)?;
    let _code = route::map_files(&args.map_exec, true)?;
    let route = Route::open(&args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    rt.block_on(serve(args, route))?;
    Ok(0)
}

async fn serve(args: StandInArgs, route: Route) -> Result<()> {
    let _ = crate::console::err_line(&args.route_line);
    if args.startup_ms > 0 {
        let _ =
            crate::console::err_line(&format!("stand-in: starting up for {} ms", args.startup_ms));
        tokio::time::sleep(Duration::from_millis(args.startup_ms)).await;
    }
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("failed to listen on 127.0.0.1:{}", args.port))?;
    // Before it says it listens: the device memory is there by the time a gate reads it.
    let footprint = Footprint::start(&args.footprint)?;
    let _ = crate::console::err_line(&format!(
        "stand-in: listening on http://{}",
        listener.local_addr()?
    ));
    serve_with(listener, args, route, footprint).await
}

/// Serve on `listener` until the process ends. Taking the listener lets tests bind
/// 127.0.0.1:0 and run the stand-in in-process (`--map-file` and `--wrap` are `run`'s alone).
pub async fn serve_on(listener: TcpListener, args: StandInArgs) -> Result<()> {
    let route = Route::open(&args)?;
    let footprint = Footprint::start(&args.footprint)?;
    serve_with(listener, args, route, footprint).await
}

async fn serve_with(
    listener: TcpListener,
    args: StandInArgs,
    route: Route,
    footprint: Footprint,
) -> Result<()> {
    let trace = match &args.trace {
        Some(path) => Some(Arc::new(Trace(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("failed to open the trace {}", path.display()))?,
        )))),
        None => None,
    };
    let never_ready = args.never_ready;
    let ignore_term = args.ignore_term;
    let serves_metrics = args.metrics;
    let n_ctx = args.context.n_ctx;
    let state = Arc::new(Script {
        serial: args.serial.then(|| Arc::new(tokio::sync::Mutex::new(()))),
        clean: args.without_faults(),
        args,
        requests: AtomicU64::new(0),
        counts: Arc::default(),
        under_way: Arc::new(AtomicUsize::new(0)),
        trace: trace.clone(),
        route: Arc::new(route),
        footprint: Arc::new(footprint),
    });
    let mut app = Router::new()
        .route(
            "/health",
            get(move || async move {
                if never_ready {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        Json(json!({"error": {"message": "Loading model", "code": 503}})),
                    )
                } else {
                    (StatusCode::OK, Json(json!({"status": "ok"})))
                }
            }),
        )
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat));
    if serves_metrics {
        app = app.route("/metrics", get(metrics));
    }
    // Without a context, /props stays 404, as before it had one.
    if let Some(n_ctx) = n_ctx {
        app = app.route("/props", get(move || context::props(n_ctx)));
    }
    let app = app
        .layer(DefaultBodyLimit::max(context::MOST_REQUEST_BYTES))
        .with_state(state);
    let listener = TracedListener::new(listener, trace);
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<ConnId>(),
    );
    if ignore_term {
        return server.await.context("the stand-in server failed");
    }
    // SIGTERM is handled, not left to its default action: on this one-thread runtime the
    // handler runs only between task polls, so a write and its trace line are never split by
    // the stop (the gate may read the bytes and stop us before we stamp them).
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("failed to handle SIGTERM")?;
    tokio::select! {
        r = server => r.context("the stand-in server failed"),
        _ = term.recv() => {
            let _ = crate::console::err_line("stand-in: SIGTERM, exiting");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::BUILT_IN;
    use args::parse as args;

    fn http() -> reqwest::Client {
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    /// A stand-in on 127.0.0.1:0 in this process; its base URL.
    async fn start(extra: &[&str]) -> String {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve_on(listener, args(extra)));
        url
    }

    /// POST a chat request; the status and the whole body.
    async fn post(url: &str, body: serde_json::Value) -> (u16, String) {
        post_as(url, None, body).await
    }

    /// POST a chat request with this `x-request-id`, on a connection of its own (a new
    /// client); the status and the whole body.
    async fn post_as(url: &str, id: Option<&str>, body: serde_json::Value) -> (u16, String) {
        let mut req = http()
            .post(format!("{url}/v1/chat/completions"))
            .header("content-type", "application/json");
        if let Some(id) = id {
            req = req.header("x-request-id", id);
        }
        let resp = req.body(body.to_string()).send().await.unwrap();
        let status = resp.status().as_u16();
        let text = match resp.bytes().await {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => format!("BODY ERROR: {e}"),
        };
        (status, text)
    }

    fn stream_req(prompt: &str, max_tokens: usize) -> serde_json::Value {
        json!({"messages": [{"role": "user", "content": prompt}], "stream": true,
               "max_tokens": max_tokens, "stream_options": {"include_usage": true}})
    }

    /// GET `path`: the status and the body.
    async fn get_text(url: &str, path: &str) -> (u16, String) {
        let resp = http().get(format!("{url}{path}")).send().await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    #[tokio::test]
    async fn metrics_count_the_tokens_sent_lie_when_told_and_are_404_unless_asked() {
        let url = start(&["--tokens", "5", "--gaps-ms", "0"]).await;
        assert_eq!(get_text(&url, "/metrics").await.0, 404);
        let url = start(&["--tokens", "5", "--gaps-ms", "0", "--metrics"]).await;
        let (status, before) = get_text(&url, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            before.contains("\nllamacpp:tokens_predicted_total 0\n"),
            "{before}"
        );
        assert!(
            before.contains("# TYPE llamacpp:requests_processing gauge\n"),
            "{before}"
        );
        post(&url, stream_req("p", 64)).await;
        post(&url, stream_req("p", 3)).await;
        let (_, after) = get_text(&url, "/metrics").await;
        // 5 tokens, then 3 (cut at max_tokens); nothing under way once the bodies are read.
        assert!(
            after.contains("\nllamacpp:tokens_predicted_total 8\n"),
            "{after}"
        );
        assert!(
            after.contains("\nllamacpp:requests_processing 0\n"),
            "{after}"
        );
        let url = start(&[
            "--tokens",
            "5",
            "--metrics",
            "--metrics-extra-tokens",
            "100",
        ])
        .await;
        post(&url, stream_req("p", 64)).await;
        let (_, lie) = get_text(&url, "/metrics").await;
        assert!(
            lie.contains("\nllamacpp:tokens_predicted_total 105\n"),
            "{lie}"
        );
        let url = start(&["--metrics", "--metrics-garbage"]).await;
        let (status, page) = get_text(&url, "/metrics").await;
        assert_eq!(status, 200);
        assert!(page.starts_with("<html>"), "{page}");
    }

    #[tokio::test]
    async fn a_non_streaming_completion_is_one_json_answer() {
        let url = start(&["--tokens", "3", "--ttft-ms", "1"]).await;
        let body = json!({"messages": [{"role": "user", "content": BUILT_IN[1].prompt}]});
        let (status, text) = post(&url, body).await;
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "2 + 2");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["completion_tokens"], 3);
    }

    #[tokio::test]
    async fn a_stream_is_chunks_then_finish_usage_and_done() {
        let url = start(&["--tokens", "2", "--ttft-ms", "1", "--gaps-ms", "1"]).await;
        let (_, text) = post(&url, stream_req("hi", 2)).await;
        let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events.len(), 5, "{text}");
        assert!(events[0].contains(r#""content":"I""#), "{text}");
        assert!(events[1].contains(r#""content":" am""#), "{text}");
        assert!(events[2].contains(r#""finish_reason":"length""#), "{text}");
        assert!(events[3].contains(r#""completion_tokens":2"#), "{text}");
        assert_eq!(events[4], "data: [DONE]");
        let health = http().get(format!("{url}/health")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        let models = http().get(format!("{url}/v1/models")).send().await.unwrap();
        assert!(models.text().await.unwrap().contains(MODEL));
    }

    #[tokio::test]
    async fn role_chunk_reasoning_empty_and_no_usage() {
        let url = start(&[
            "--tokens",
            "2",
            "--ttft-ms",
            "1",
            "--gaps-ms",
            "1",
            "--role-chunk",
            "--reasoning-tokens",
            "1",
            "--empty",
            "--no-usage",
        ])
        .await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert!(events[0].contains(r#""role":"assistant""#), "{text}");
        assert!(
            events[1].contains(r#""reasoning_content":" think""#),
            "{text}"
        );
        assert!(events[2].contains(r#""content":"""#), "{text}");
        assert!(!text.contains("usage"), "{text}");
    }

    #[tokio::test]
    async fn scripted_faults() {
        let url = start(&["--http-status", "503"]).await;
        let (status, text) = post(&url, stream_req("hi", 8)).await;
        assert_eq!(status, 503);
        assert!(text.contains("scripted error"), "{text}");

        let url = start(&[
            "--tokens",
            "5",
            "--ttft-ms",
            "1",
            "--gaps-ms",
            "1",
            "--garbage-after",
            "2",
        ])
        .await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        let events: Vec<&str> = text.split("\n\n").collect();
        assert!(events[2].starts_with("this line is not SSE"), "{text}");

        let url = start(&[
            "--tokens",
            "5",
            "--ttft-ms",
            "1",
            "--gaps-ms",
            "1",
            "--die-after",
            "2",
        ])
        .await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        assert!(text.contains("BODY ERROR"), "{text}");

        let url = start(&["--never-ready"]).await;
        let health = http().get(format!("{url}/health")).send().await.unwrap();
        assert_eq!(health.status(), 503);
    }

    #[tokio::test]
    async fn scripted_faults_in_the_stream() {
        let fast = ["--tokens", "4", "--ttft-ms", "1", "--gaps-ms", "1"];
        let with = |extra: &[&'static str]| -> Vec<&'static str> {
            fast.iter().chain(extra).copied().collect()
        };
        let url = start(&with(&["--error-event-after", "2"])).await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        assert!(
            text.ends_with("event: error\ndata: {\"error\":{\"message\":\"CUDA out of memory\",\"code\":500}}\n\ndata: [DONE]\n\n"),
            "{text}"
        );
        assert_eq!(text.matches("\"content\"").count(), 2, "{text}");

        let url = start(&with(&[
            "--error-chunk-after",
            "0",
            "--error-data",
            "{\"error\":\"x\"}",
        ]))
        .await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        assert_eq!(text, "data: {\"error\":\"x\"}\n\ndata: [DONE]\n\n");

        let url = start(&with(&[
            "--usage-claims",
            "1000000",
            "--finish-reason",
            "error",
            "--no-done",
        ]))
        .await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        assert!(text.contains("\"completion_tokens\":1000000"), "{text}");
        assert!(text.contains("\"finish_reason\":\"error\""), "{text}");
        assert!(!text.contains("[DONE]"), "{text}");

        let url = start(&with(&["--not-sse"])).await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        assert!(
            text.starts_with('{') && text.contains("chat.completion"),
            "{text}"
        );

        let url = start(&with(&["--big-chunk", "1000", "--wrong-shape-after", "1"])).await;
        let (_, text) = post(&url, stream_req("hi", 8)).await;
        let events: Vec<&str> = text.split("\n\n").collect();
        assert!(events[0].len() > 1000, "{text}");
        assert_eq!(events[1], "data: {\"choices\":{\"delta\":\"Paris\"}}");
    }

    #[tokio::test]
    async fn the_trace_has_the_request_and_every_event_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let p = path.to_str().unwrap();
        let url = start(&[
            "--tokens",
            "3",
            "--chunk-tokens",
            "2",
            "--ttft-ms",
            "1",
            "--gaps-ms",
            "1",
            "--trace",
            p,
        ])
        .await;
        post(&url, stream_req("hi", 8)).await;
        let lines: Vec<TraceLine> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1 + 2 + 3, "{lines:?}");
        let TraceLine::Request {
            received_ns,
            conn: 1,
            request_id: None,
            ..
        } = lines[0]
        else {
            panic!("{lines:?}")
        };
        let mut last = received_ns;
        let mut shape = Vec::new();
        for l in &lines[1..] {
            let TraceLine::Event {
                sent_ns,
                content_chars,
                usage_tokens,
                done,
                ..
            } = l
            else {
                panic!("{l:?}")
            };
            assert!(*sent_ns >= last, "events are stamped in order");
            last = *sent_ns;
            shape.push((*content_chars, *usage_tokens, *done));
        }
        assert_eq!(
            shape,
            vec![
                (4, None, false),
                (4, None, false),
                (0, None, false),
                (0, Some(3), false),
                (0, None, true)
            ]
        );
    }

    #[tokio::test]
    async fn trace_lines_name_their_connection_and_request_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let p = path.to_str().unwrap();
        let url = start(&["--ttft-ms", "1", "--gaps-ms", "1", "--trace", p]).await;
        let long = "x".repeat(300);
        // One request a connection, in turn, each with a different length, so its events
        // can be told from the others' by their count alone.
        post_as(&url, Some("npu-serve-smoke-0"), stream_req("hi", 1)).await;
        post_as(&url, None, stream_req("hi", 2)).await;
        post_as(&url, Some(&long), stream_req("hi", 3)).await;
        let lines: Vec<TraceLine> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let requests: Vec<(u64, Option<String>)> = lines
            .iter()
            .filter_map(|l| match l {
                TraceLine::Request {
                    conn, request_id, ..
                } => Some((*conn, request_id.clone())),
                TraceLine::Event { .. } | TraceLine::Altered { .. } => None,
            })
            .collect();
        assert_eq!(
            requests,
            vec![
                (1, Some("npu-serve-smoke-0".to_string())),
                (2, None),
                (3, Some(long[..trace::REQUEST_ID_MAX].to_string())),
            ]
        );
        for (conn, tokens) in [(1, 1), (2, 2), (3, 3)] {
            let content = lines
                .iter()
                .filter(|l| {
                    matches!(l, TraceLine::Event { conn: c, content_chars, .. }
                        if *c == conn && *content_chars > 0)
                })
                .count();
            assert_eq!(content, tokens, "connection {conn}: {lines:?}");
        }
        assert!(
            lines.iter().all(|l| matches!(
                l,
                TraceLine::Event { conn: 1..=3, .. } | TraceLine::Request { .. }
            )),
            "{lines:?}"
        );
    }

    #[tokio::test]
    async fn only_the_request_fault_request_picks_gets_the_faults() {
        let fast = ["--tokens", "5", "--ttft-ms", "1", "--gaps-ms", "1"];
        let with = |extra: &[&'static str]| -> Vec<&'static str> {
            fast.iter().chain(extra).copied().collect()
        };
        // Each post is a connection of its own: the count runs across connections.
        let url = start(&with(&["--fault-request", "2", "--error-event-after", "3"])).await;
        let mut errors = Vec::new();
        for _ in 0..3 {
            let (status, text) = post(&url, stream_req("hi", 8)).await;
            assert_eq!(status, 200, "{text}");
            assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
            errors.push(text.contains("event: error"));
            let tokens = text.matches("\"content\"").count();
            assert_eq!(
                tokens,
                if text.contains("event: error") { 3 } else { 5 },
                "{text}"
            );
        }
        assert_eq!(errors, [false, true, false]);

        let url = start(&with(&["--fault-request", "2", "--http-status", "500"])).await;
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(post(&url, stream_req("hi", 8)).await.0);
        }
        assert_eq!(statuses, [200, 500, 200]);
    }

    /// The answer (`delta.content`) and the reasoning of a streamed reply, each in one piece.
    fn answer_and_reasoning(text: &str) -> (String, String) {
        let (mut answer, mut reasoning) = (String::new(), String::new());
        for data in text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                continue;
            };
            let delta = &v["choices"][0]["delta"];
            answer.push_str(delta["content"].as_str().unwrap_or(""));
            reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or(""));
        }
        (answer, reasoning)
    }

    /// The places (from 0) where `a` and `b`, split at each space, differ; None when they do
    /// not have the same spaces at all (more than words differ).
    fn differing_words(a: &str, b: &str) -> Option<Vec<usize>> {
        let (a, b): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
        (a.len() == b.len()).then(|| (0..a.len()).filter(|i| a[*i] != b[*i]).collect())
    }

    /// The trace's `altered` lines: (nth, word, from, to, why).
    fn altered(path: &std::path::Path) -> Vec<(u64, usize, String, String, AlteredBy)> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter_map(|l| match serde_json::from_str(l).unwrap() {
                TraceLine::Altered {
                    nth,
                    word,
                    from,
                    to,
                    why,
                    ..
                } => Some((nth, word, from, to, why)),
                _ => None,
            })
            .collect()
    }

    const FAST: [&str; 6] = ["--tokens", "8", "--ttft-ms", "1", "--gaps-ms", "0"];

    /// `FAST` and these.
    fn fast(extra: &[&'static str]) -> Vec<&'static str> {
        FAST.iter().chain(extra).copied().collect()
    }

    #[tokio::test]
    async fn change_word_1_changes_one_answer_word_of_every_reply_and_0_none() {
        let prompts = [BUILT_IN[0].prompt, BUILT_IN[1].prompt, "hi"];
        let reasoning = ["--reasoning-tokens", "2"];
        let clean_url = start(&fast(&reasoning)).await;
        let mut clean = Vec::new();
        for p in prompts {
            clean.push(answer_and_reasoning(
                &post(&clean_url, stream_req(p, 64)).await.1,
            ));
        }
        let all = start(&fast(&["--reasoning-tokens", "2", "--change-word", "1"])).await;
        let none = start(&fast(&["--reasoning-tokens", "2", "--change-word", "0"])).await;
        for round in 0..4 {
            for (p, (answer, thinking)) in prompts.iter().zip(&clean) {
                let (got, got_thinking) =
                    answer_and_reasoning(&post(&all, stream_req(p, 64)).await.1);
                let diff = differing_words(answer, &got);
                assert_eq!(
                    diff.map(|d| d.len()),
                    Some(1),
                    "round {round}, {p:?}: {answer:?} against {got:?}"
                );
                assert_eq!(&got_thinking, thinking, "the reasoning is never changed");
                let (same, _) = answer_and_reasoning(&post(&none, stream_req(p, 64)).await.1);
                assert_eq!(&same, answer, "a share of 0 changes nothing");
            }
        }
    }

    /// 40 replies to one prompt from a stand-in with these faults, tracing into `trace`: which
    /// (from 1) differ from `clean`, and each one's answer.
    async fn forty_replies(
        extra: &[&'static str],
        trace: &std::path::Path,
        clean: &str,
    ) -> Vec<(u64, String)> {
        let mut given = fast(extra);
        given.extend(["--trace", trace.to_str().unwrap()]);
        let url = start(&given).await;
        let mut changed = Vec::new();
        for nth in 1..=40 {
            let (answer, _) =
                answer_and_reasoning(&post(&url, stream_req(BUILT_IN[0].prompt, 64)).await.1);
            if answer != clean {
                let diff = differing_words(clean, &answer);
                assert_eq!(
                    diff.map(|d| d.len()),
                    Some(1),
                    "{clean:?} against {answer:?}"
                );
                changed.push((nth, answer));
            }
        }
        changed
    }

    #[tokio::test]
    async fn change_word_picks_the_same_requests_on_two_fresh_stand_ins_and_the_trace_names_them() {
        let dir = tempfile::tempdir().unwrap();
        let clean_url = start(&FAST).await;
        let (clean, _) =
            answer_and_reasoning(&post(&clean_url, stream_req(BUILT_IN[0].prompt, 64)).await.1);
        let faults = ["--change-word", "0.3", "--jitter-seed", "5"];
        let first = forty_replies(&faults, &dir.path().join("a.jsonl"), &clean).await;
        let second = forty_replies(&faults, &dir.path().join("b.jsonl"), &clean).await;
        assert_eq!(first, second, "the same seed, the same requests and words");
        // 12 expected of 40 at 0.3 (binomial sd 2.9): 3 to 24 is a wide band, not a bound on
        // luck. The seed is fixed, so the count is too: pinned, so a change to the draw shows.
        assert!((3..=24).contains(&first.len()), "{first:?}");
        assert_eq!(first.len(), PINNED_CHANGED_OF_40, "{first:?}");
        let other = forty_replies(
            &["--change-word", "0.3", "--jitter-seed", "6"],
            &dir.path().join("c.jsonl"),
            &clean,
        )
        .await;
        assert_ne!(
            first.iter().map(|c| c.0).collect::<Vec<_>>(),
            other.iter().map(|c| c.0).collect::<Vec<_>>(),
            "another seed, other requests"
        );
        // The trace names exactly the changed requests, and each one's word as the reply has
        // it.
        let clean_words: Vec<&str> = clean.split(' ').collect();
        let lines = altered(&dir.path().join("a.jsonl"));
        assert_eq!(lines.len(), first.len(), "{lines:?}");
        for ((nth, answer), (t_nth, word, from, to, why)) in first.iter().zip(&lines) {
            assert_eq!(nth, t_nth, "{lines:?}");
            assert_eq!(*why, AlteredBy::ChangeWord);
            let diff = differing_words(&clean, answer).unwrap();
            assert_eq!(diff, vec![word - 1], "{answer:?}: {lines:?}");
            let got: Vec<&str> = answer.split(' ').collect();
            assert_eq!(
                (from.as_str(), to.as_str()),
                (clean_words[word - 1], got[word - 1])
            );
        }
    }

    /// What `change_word_picks_the_same_requests_on_two_fresh_stand_ins_and_the_trace_names_them`
    /// saw with --change-word 0.3 --seed 5 over 40 requests: a regression pin of the seeded
    /// draw, not a figure of chance.
    const PINNED_CHANGED_OF_40: usize = 14;

    #[tokio::test]
    async fn batch_variant_changes_the_last_word_of_a_reply_started_beside_another_only() {
        // Every wait here is a bound on a hang, not a measurement.
        const HANG: Duration = Duration::from_secs(20);
        let dir = tempfile::tempdir().unwrap();
        // 10 tokens 100 ms apart: the first reply is under way for about 0.9 s after its first
        // token, and the second request needs a few ms of it.
        let slow = ["--tokens", "10", "--ttft-ms", "1", "--gaps-ms", "100"];
        for serial in [false, true] {
            let trace = dir.path().join(format!("serial-{serial}.jsonl"));
            let mut given: Vec<&str> = slow.to_vec();
            given.extend(["--batch-variant", "--trace", trace.to_str().unwrap()]);
            if serial {
                given.push("--serial");
            }
            let url = start(&given).await;
            let alone = post(&url, stream_req("hi", 64)).await.1;
            let client = http();
            let mut first = client
                .post(format!("{url}/v1/chat/completions"))
                .header("content-type", "application/json")
                .body(stream_req("hi", 64).to_string())
                .send()
                .await
                .unwrap();
            let mut first_text = String::new();
            while !first_text.contains("content") {
                let chunk = tokio::time::timeout(HANG, first.chunk()).await.unwrap();
                first_text.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap()));
            }
            let second = tokio::spawn({
                let url = url.clone();
                async move { post(&url, stream_req("hi", 64)).await.1 }
            });
            while let Some(chunk) = tokio::time::timeout(HANG, first.chunk())
                .await
                .unwrap()
                .unwrap()
            {
                first_text.push_str(&String::from_utf8_lossy(&chunk));
            }
            let second = tokio::time::timeout(HANG, second).await.unwrap().unwrap();
            let after = post(&url, stream_req("hi", 64)).await.1;
            let [alone, first, second, after] =
                [alone, first_text, second, after].map(|t| answer_and_reasoning(&t).0);
            assert_eq!(alone.split(' ').count(), 10, "{alone:?}");
            assert_eq!(first, alone, "serial {serial}: the first started alone");
            assert_eq!(after, alone, "serial {serial}: alone again, clean again");
            let lines = altered(&trace);
            if serial {
                assert_eq!(
                    second, alone,
                    "a serial stand-in starts none beside another"
                );
                assert_eq!(lines, vec![], "serial");
            } else {
                assert_eq!(
                    differing_words(&alone, &second),
                    Some(vec![9]),
                    "{second:?}"
                );
                assert_eq!(
                    lines,
                    vec![(
                        3,
                        10,
                        "wood".to_string(),
                        "doow".to_string(),
                        AlteredBy::BatchVariant
                    )]
                );
            }
        }
    }

    #[tokio::test]
    async fn a_change_word_share_out_of_range_stops_the_stand_in_before_it_listens() {
        for bad in ["NaN", "-0.5", "2"] {
            let e = run(args(&["--change-word", bad])).unwrap_err();
            let line = format!("{e:#}");
            assert!(line.starts_with("--change-word is a share"), "{line}");
            assert_eq!(line.lines().count(), 1, "{line}");
        }
    }

    #[tokio::test]
    async fn a_serial_slot_is_held_until_the_replys_connection_goes_and_health_never_waits() {
        use std::time::Duration;
        // Every wait here is a bound on a hang, not a measurement.
        const HANG: Duration = Duration::from_secs(20);
        // The first reply stays open after [DONE] (as a serve that never closes), so it holds
        // the slot until its client goes.
        let url = start(&[
            "--serial",
            "--tokens",
            "2",
            "--ttft-ms",
            "1",
            "--gaps-ms",
            "1",
            "--fault-request",
            "1",
            "--after-done",
            "silent",
        ])
        .await;
        let first_client = http();
        let mut first = first_client
            .post(format!("{url}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(stream_req("hi", 8).to_string())
            .send()
            .await
            .unwrap();
        let mut seen = String::new();
        while !seen.contains("[DONE]") {
            let chunk = tokio::time::timeout(HANG, first.chunk()).await.unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap()));
        }
        // Not streamed, and waiting all the same.
        let body = json!({"messages": [{"role": "user", "content": BUILT_IN[1].prompt}]});
        let mut second = tokio::spawn({
            let url = url.clone();
            async move { post(&url, body).await }
        });
        for path in ["/health", "/v1/models"] {
            let got = tokio::time::timeout(HANG, http().get(format!("{url}{path}")).send()).await;
            assert_eq!(got.unwrap().unwrap().status(), 200, "{path} waited");
        }
        // Held, it cannot end however long it is given; without the slot it would end within
        // a few milliseconds of its 1 ms first token.
        let held = tokio::time::timeout(Duration::from_millis(500), &mut second).await;
        assert!(held.is_err(), "the second request did not wait: {held:?}");
        drop(first);
        drop(first_client);
        let (status, text) = tokio::time::timeout(HANG, second).await.unwrap().unwrap();
        assert_eq!(status, 200);
        assert!(text.contains("\"content\":\"2 +\""), "{text}");
    }
}
