//! The stand-in serve: an OpenAI-compatible server on loopback, scripted for tests and for a
//! first gate on a machine with no real serve.
//!
//! It knows the built-in prompts and answers them right, so `run --stand-in` passes out of the
//! box; its timing is scripted (`--ttft-ms`, `--gaps-ms`) so tests can compare what the gate
//! reports with what was sent.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use serde::Deserialize;
use serde_json::json;

use crate::prompts::BUILT_IN;

/// The model id the stand-in lists.
pub const MODEL: &str = "stand-in";

/// The stand-in's script.
#[derive(Debug, Clone, Args)]
pub struct StandInArgs {
    /// Port to listen on, on 127.0.0.1 (0: any free port, printed at start).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Milliseconds from receiving a request to sending its first token.
    #[arg(long, default_value_t = 50, value_name = "MS")]
    pub ttft_ms: u64,
    /// Milliseconds between tokens, cycled (e.g. 40,10).
    #[arg(
        long,
        default_value = "10",
        value_delimiter = ',',
        value_name = "MS,..."
    )]
    pub gaps_ms: Vec<u64>,
    /// Tokens a reply has (capped by the request's max_tokens).
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub tokens: usize,
    /// A line printed to the log at start, naming the route (for --fast-route/--slow-route).
    #[arg(
        long,
        default_value = "route: stand-in (scripted)",
        value_name = "TEXT"
    )]
    pub route_line: String,
    /// The reply's first words, instead of the right answer to a built-in prompt.
    #[arg(long, value_name = "TEXT")]
    pub answer: Option<String>,
}

/// Run the stand-in until it is killed.
pub fn run(args: StandInArgs) -> Result<()> {
    if args.gaps_ms.is_empty() {
        bail!("--gaps-ms needs at least one number");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    rt.block_on(serve(args))
}

async fn serve(args: StandInArgs) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("failed to listen on 127.0.0.1:{}", args.port))?;
    let addr = listener.local_addr()?;
    eprintln!("{}", args.route_line);
    eprintln!("stand-in: listening on http://{addr}");
    serve_on(listener, args).await
}

/// Serve on `listener` until the process ends. Taking the listener lets tests bind
/// 127.0.0.1:0 and run the stand-in in-process.
pub async fn serve_on(listener: tokio::net::TcpListener, args: StandInArgs) -> Result<()> {
    let app = Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .with_state(Arc::new(args));
    axum::serve(listener, app)
        .await
        .context("the stand-in server failed")
}

async fn models() -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "owned_by": "npu-serve-smoke"}],
    }))
}

#[derive(Debug, Deserialize)]
struct ChatRequest {
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    stream: bool,
    max_tokens: Option<usize>,
    stream_options: Option<StreamOptions>,
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    role: String,
    #[serde(default)]
    content: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// The tokens of a reply: the answer's words, then filler up to the token count.
fn reply_tokens(args: &StandInArgs, prompt: &str, max_tokens: usize) -> (Vec<String>, bool) {
    let answer = match &args.answer {
        Some(a) => a.as_str(),
        None => BUILT_IN
            .iter()
            .find(|b| b.prompt == prompt)
            .map_or("I am the stand-in serve.", |b| b.stand_in_answer),
    };
    let n = args.tokens.min(max_tokens);
    let words = answer.split_whitespace().enumerate().map(|(i, w)| {
        if i == 0 {
            w.to_string()
        } else {
            format!(" {w}")
        }
    });
    let filler = std::iter::repeat(" ok".to_string());
    let tokens: Vec<String> = words.chain(filler).take(n).collect();
    (tokens, n == max_tokens)
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> Bytes {
    let v = json!({
        "id": "chatcmpl-stand-in",
        "object": "chat.completion.chunk",
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    Bytes::from(format!("data: {v}\n\n"))
}

async fn chat(State(args): State<Arc<StandInArgs>>, Json(req): Json<ChatRequest>) -> Response {
    let prompt = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.as_str())
        .unwrap_or("")
        .to_string();
    let max_tokens = req.max_tokens.unwrap_or(usize::MAX);
    let (tokens, hit_limit) = reply_tokens(&args, &prompt, max_tokens);
    let finish = if hit_limit { "length" } else { "stop" };
    let ttft = Duration::from_millis(args.ttft_ms);
    if !req.stream {
        tokio::time::sleep(ttft).await;
        let body = json!({
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": tokens.concat()}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": tokens.len(), "total_tokens": tokens.len() + 1},
        });
        return Json(body).into_response();
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    let mut frames: Vec<(Duration, Bytes)> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let wait = if i == 0 {
            ttft
        } else {
            Duration::from_millis(args.gaps_ms[(i - 1) % args.gaps_ms.len()])
        };
        frames.push((wait, chunk(json!({"content": t}), None)));
    }
    frames.push((Duration::ZERO, chunk(json!({}), Some(finish))));
    if include_usage {
        let usage = json!({
            "id": "chatcmpl-stand-in",
            "object": "chat.completion.chunk",
            "model": MODEL,
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": tokens.len(), "total_tokens": tokens.len() + 1},
        });
        frames.push((Duration::ZERO, Bytes::from(format!("data: {usage}\n\n"))));
    }
    frames.push((Duration::ZERO, Bytes::from_static(b"data: [DONE]\n\n")));
    let stream = futures_util::stream::unfold(frames.into_iter(), |mut frames| async move {
        let (wait, bytes) = frames.next()?;
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Some((Ok::<_, Infallible>(bytes), frames))
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: StandInArgs,
    }

    fn args(extra: &[&str]) -> StandInArgs {
        T::parse_from(std::iter::once("t").chain(extra.iter().copied())).a
    }

    #[test]
    fn built_in_prompts_get_their_right_answer_then_filler() {
        let (t, hit) = reply_tokens(&args(&["--tokens", "4"]), BUILT_IN[0].prompt, 64);
        assert_eq!(t.concat(), "Paris. ok ok ok");
        assert!(!hit);
    }

    #[test]
    fn max_tokens_caps_the_reply() {
        let (t, hit) = reply_tokens(&args(&["--answer", "London is it"]), "x", 2);
        assert_eq!(t.concat(), "London is");
        assert!(hit);
    }

    fn http() -> reqwest::Client {
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    /// A stand-in on 127.0.0.1:0 in this process; its base URL.
    async fn start(extra: &[&str]) -> String {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve_on(listener, args(extra)));
        url
    }

    #[tokio::test]
    async fn a_non_streaming_completion_is_one_json_answer() {
        let url = start(&["--tokens", "3", "--ttft-ms", "1"]).await;
        let body = json!({"messages": [{"role": "user", "content": BUILT_IN[1].prompt}]});
        let resp = http()
            .post(format!("{url}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let v: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "2 + 2");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["completion_tokens"], 3);
    }

    #[tokio::test]
    async fn a_stream_is_role_free_chunks_then_finish_usage_and_done() {
        let url = start(&["--tokens", "2", "--ttft-ms", "1", "--gaps-ms", "1"]).await;
        let body = json!({"messages": [{"role": "user", "content": "hi"}], "stream": true,
                          "max_tokens": 2, "stream_options": {"include_usage": true}});
        let resp = http()
            .post(format!("{url}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let text = String::from_utf8(resp.bytes().await.unwrap().to_vec()).unwrap();
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

    #[test]
    fn gaps_parse_as_a_list() {
        assert_eq!(args(&["--gaps-ms", "40,10"]).gaps_ms, vec![40, 10]);
    }
}
