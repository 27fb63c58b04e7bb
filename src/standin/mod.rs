//! The stand-in serve: an OpenAI-compatible server on loopback, scripted for tests and for a
//! first gate on a machine with no real serve.
//!
//! It knows the built-in prompts and answers them right, so `run --stand-in` passes out of the
//! box. Its timing and its faults are scripted, and with `--trace FILE` it records when each
//! request arrived and when each SSE event's bytes were written to the socket (stamped in the
//! socket's `poll_write`, on CLOCK_MONOTONIC), so tests can compare what the gate reports with
//! what was really sent rather than with what was asked for.
//!
//! It is the other side of the wire: it may use the wire's chunk fields, the prompts and the
//! clock, never the gate's client, judging or report (`tests/layers.rs` checks this), so the
//! gate is never tested against itself.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::clock;
use crate::prompts::BUILT_IN;
use crate::wire::openai::Chunk;

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
    /// Milliseconds between chunks, cycled (e.g. 40,10).
    #[arg(
        long,
        default_value = "10",
        value_delimiter = ',',
        value_name = "MS,..."
    )]
    pub gaps_ms: Vec<f64>,
    /// Tokens a reply has (capped by the request's max_tokens).
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub tokens: usize,
    /// Tokens a chunk carries.
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub chunk_tokens: u32,
    /// The first R tokens go on `delta.reasoning_content`, as a reasoning model sends them.
    #[arg(long, default_value_t = 0, value_name = "R")]
    pub reasoning_tokens: usize,
    /// Send an immediate first chunk with the role and empty content, as some servers do.
    #[arg(long)]
    pub role_chunk: bool,
    /// Send a final usage chunk when the request asks for it (the default).
    #[arg(long, overrides_with = "no_usage")]
    pub usage: bool,
    /// Never send a usage chunk.
    #[arg(long, overrides_with = "usage")]
    pub no_usage: bool,
    /// Every chunk's content is empty.
    #[arg(long)]
    pub empty: bool,
    /// Drop the connection after N tokens.
    #[arg(long, value_name = "N")]
    pub die_after: Option<usize>,
    /// Answer completions with this HTTP status and a JSON error body.
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(100..=599))]
    pub http_status: Option<u16>,
    /// Send a line that is not SSE after N tokens.
    #[arg(long, value_name = "N")]
    pub garbage_after: Option<usize>,
    /// Send a `data:` event that is not JSON after N tokens.
    #[arg(long, value_name = "N")]
    pub bad_json_after: Option<usize>,
    /// Burn this much CPU before each chunk, as a serve's host work per token does.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub work_ms: u64,
    /// Exit (status 3) after N tokens: a serve that dies mid-stream.
    #[arg(long, value_name = "N")]
    pub crash_after: Option<usize>,
    /// Ignore SIGTERM (a serve that has to be killed).
    #[arg(long)]
    pub ignore_term: bool,
    /// Wait this long before listening.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub startup_ms: u64,
    /// Listen, but answer GET /health with 503 forever.
    #[arg(long)]
    pub never_ready: bool,
    /// Append a JSONL trace: each request's arrival and each event's send time.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
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
    /// Fault: after N tokens, an `event: error` frame whose data is --error-data, then
    /// [DONE].
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub error_event_after: Option<usize>,
    /// Fault: after N tokens, a data chunk that is --error-data, then [DONE].
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub error_chunk_after: Option<usize>,
    /// The error that --error-event-after and --error-chunk-after send.
    #[arg(
        long,
        default_value = r#"{"error":{"message":"CUDA out of memory","code":500}}"#,
        value_name = "DATA",
        help_heading = "Faults in the stream"
    )]
    pub error_data: String,
    /// Fault: the final chunk's finish_reason is TEXT (e.g. "error"), not "stop" or "length".
    #[arg(long, value_name = "TEXT", help_heading = "Faults in the stream")]
    pub finish_reason: Option<String>,
    /// Fault: the usage chunk claims N completion tokens, whatever was sent.
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub usage_claims: Option<u64>,
    /// Fault: the answer's body is written one byte at a time, MS apart.
    #[arg(long, value_name = "MS", help_heading = "Faults in the stream")]
    pub trickle_ms: Option<u64>,
    /// Fault: tokens without end (--gaps-ms apart), ignoring max_tokens; no finish, no [DONE].
    #[arg(long, help_heading = "Faults in the stream")]
    pub endless: bool,
    /// Fault: after [DONE], keep the connection open, silent or sending comments (--gaps-ms
    /// apart).
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        help_heading = "Faults in the stream"
    )]
    pub after_done: Option<AfterDone>,
    /// Fault: no [DONE] after the finish and usage chunks (with --after-done, the connection
    /// then stays open).
    #[arg(long, help_heading = "Faults in the stream")]
    pub no_done: bool,
    /// Fault: with --http-status, an error body without end.
    #[arg(long, requires = "http_status", help_heading = "Faults in the stream")]
    pub endless_body: bool,
    /// Fault: after N tokens, a `data:` line that never ends.
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub endless_line_after: Option<usize>,
    /// The first token's chunk carries BYTES more content (" ok" repeated): one huge chunk.
    #[arg(long, value_name = "BYTES", help_heading = "Faults in the stream")]
    pub big_chunk: Option<usize>,
    /// How many chunks, from the first, --big-chunk makes huge.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        requires = "big_chunk",
        help_heading = "Faults in the stream"
    )]
    pub big_chunks: usize,
    /// Fault: a streaming request is answered with one JSON completion, as a server that does
    /// not stream would.
    #[arg(long, help_heading = "Faults in the stream")]
    pub not_sse: bool,
    /// Fault: after N tokens, a chunk that is JSON of the wrong shape.
    #[arg(long, value_name = "N", help_heading = "Faults in the stream")]
    pub wrong_shape_after: Option<usize>,
    /// Fault: these bytes, as given, are written into the stream after --inject-after N tokens
    /// (a frame of a test's own making).
    #[arg(
        long,
        value_name = "BYTES",
        requires = "inject_after",
        help_heading = "Faults in the stream"
    )]
    pub inject: Option<String>,
    /// When --inject's bytes are written: after N tokens.
    #[arg(
        long,
        value_name = "N",
        requires = "inject",
        help_heading = "Faults in the stream"
    )]
    pub inject_after: Option<usize>,
}

/// What the stand-in does after [DONE], or where it would have sent it (`--after-done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AfterDone {
    /// Keep the connection open and send nothing more.
    Silent,
    /// Keep the connection open and send SSE comments without end.
    Comments,
}

/// One line of the stand-in's trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TraceLine {
    /// A chat completion request reached the handler.
    Request {
        /// CLOCK_MONOTONIC ns.
        received_ns: u64,
        /// The last user message.
        prompt: String,
    },
    /// An SSE event's last byte was written to the socket.
    Event {
        /// CLOCK_MONOTONIC ns, taken right after the write returned.
        sent_ns: u64,
        /// Characters of `delta.content`.
        content_chars: u32,
        /// Characters of `delta.reasoning_content`.
        reasoning_chars: u32,
        /// `usage.completion_tokens`, on a usage event.
        usage_tokens: Option<u64>,
        /// `[DONE]`.
        done: bool,
        /// Not JSON (the scripted garbage).
        garbage: bool,
    },
}

/// Where trace lines go. Each line is written as it happens: the stand-in is usually ended
/// by a signal, and a buffered trace would be lost.
#[derive(Debug)]
struct Trace(Mutex<File>);

impl Trace {
    fn write(&self, line: &TraceLine) {
        if let (Ok(mut f), Ok(mut text)) = (self.0.lock(), serde_json::to_vec(line)) {
            text.push(b'\n');
            let _ = f.write_all(&text);
        }
    }

    /// Record an event from the bytes between two blank lines, as written.
    fn event(&self, sent_ns: u64, raw: &[u8]) {
        let data = raw
            .windows(6)
            .rposition(|w| w == b"data: ")
            .map(|i| raw[i + 6..].trim_ascii_end());
        let mut line = TraceLine::Event {
            sent_ns,
            content_chars: 0,
            reasoning_chars: 0,
            usage_tokens: None,
            done: false,
            garbage: false,
        };
        if let TraceLine::Event {
            content_chars,
            reasoning_chars,
            usage_tokens,
            done,
            garbage,
            ..
        } = &mut line
        {
            match data.map(|d| (d, Chunk::parse(d))) {
                Some((b"[DONE]", _)) => *done = true,
                Some((_, Ok(c))) => {
                    *content_chars = c.content().chars().count() as u32;
                    *reasoning_chars = c.reasoning().chars().count() as u32;
                    *usage_tokens = c.usage.and_then(|u| u.completion_tokens);
                }
                _ => *garbage = true,
            }
        }
        self.write(&line);
    }
}

/// Run the stand-in until it is killed.
pub fn run(args: StandInArgs) -> Result<()> {
    // A day at most: a larger gap would overflow the Duration it becomes (a panic, not a
    // scripted serve).
    if args
        .gaps_ms
        .iter()
        .any(|g| !g.is_finite() || *g < 0.0 || *g > 86_400_000.0)
    {
        bail!("--gaps-ms takes numbers of ms, 0 to 86400000");
    }
    if args.gaps_ms.is_empty() {
        bail!("--gaps-ms needs at least one number");
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    rt.block_on(serve(args))
}

async fn serve(args: StandInArgs) -> Result<()> {
    let _ = crate::console::err_line(&args.route_line);
    if args.startup_ms > 0 {
        let _ =
            crate::console::err_line(&format!("stand-in: starting up for {} ms", args.startup_ms));
        tokio::time::sleep(Duration::from_millis(args.startup_ms)).await;
    }
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("failed to listen on 127.0.0.1:{}", args.port))?;
    let _ = crate::console::err_line(&format!(
        "stand-in: listening on http://{}",
        listener.local_addr()?
    ));
    serve_on(listener, args).await
}

/// Serve on `listener` until the process ends. Taking the listener lets tests bind
/// 127.0.0.1:0 and run the stand-in in-process.
pub async fn serve_on(listener: TcpListener, args: StandInArgs) -> Result<()> {
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
    let state = Arc::new(Script {
        args,
        trace: trace.clone(),
    });
    let app = Router::new()
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
        .route("/v1/chat/completions", post(chat))
        .with_state(state);
    let listener = TracedListener {
        inner: listener,
        trace,
    };
    let server = axum::serve(listener, app);
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

struct Script {
    args: StandInArgs,
    trace: Option<Arc<Trace>>,
}

/// Accepts connections whose writes are traced.
struct TracedListener {
    inner: TcpListener,
    trace: Option<Arc<Trace>>,
}

impl axum::serve::Listener for TracedListener {
    type Io = TracedStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    // Small writes must leave at once, as a real serve's tokens do.
                    let _ = stream.set_nodelay(true);
                    let io = TracedStream {
                        inner: stream,
                        trace: self.trace.clone(),
                        event: Vec::new(),
                    };
                    return (io, addr);
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that stamps each SSE event when the write holding its last byte returns.
struct TracedStream {
    inner: TcpStream,
    trace: Option<Arc<Trace>>,
    /// Bytes written since the last event ended (HTTP framing included).
    event: Vec<u8>,
}

impl TracedStream {
    fn written(&mut self, bytes: &[u8]) {
        let Some(trace) = &self.trace else { return };
        let now = clock::now_ns();
        for &b in bytes {
            self.event.push(b);
            if b == b'\n' && self.event.ends_with(b"\n\n") {
                trace.event(now, &self.event);
                self.event.clear();
            }
        }
        if self.event.len() > 1 << 20 {
            self.event.clear(); // a large non-SSE body; nothing to trace in it
        }
    }
}

impl AsyncRead for TracedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TracedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.written(&buf[..n]);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(mut n)) = r {
            for b in bufs {
                let take = n.min(b.len());
                self.written(&b[..take]);
                n -= take;
                if n == 0 {
                    break;
                }
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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

/// The answer's tokens: its words, then filler up to `n`.
fn answer_tokens(args: &StandInArgs, prompt: &str, n: usize) -> Vec<String> {
    let answer = match &args.answer {
        Some(a) => a.as_str(),
        None => BUILT_IN
            .iter()
            .find(|b| b.prompt == prompt)
            .map_or("I am the stand-in serve.", |b| b.stand_in_answer),
    };
    let words = answer.split_whitespace().enumerate().map(|(i, w)| {
        if i == 0 {
            w.to_string()
        } else {
            format!(" {w}")
        }
    });
    words
        .chain(std::iter::repeat(" ok".to_string()))
        .take(n)
        .collect()
}

/// What one chunk of a reply carries.
#[derive(Debug, Clone, PartialEq)]
struct ScriptedChunk {
    reasoning: String,
    content: String,
    /// Tokens sent up to and including this chunk.
    tokens_so_far: usize,
}

/// A reply's chunks: `n` tokens, the first `reasoning_tokens` of them reasoning, grouped
/// `chunk_tokens` a chunk without mixing the two channels.
fn reply_chunks(args: &StandInArgs, prompt: &str, n: usize) -> Vec<ScriptedChunk> {
    let r = args.reasoning_tokens.min(n);
    let answer = answer_tokens(args, prompt, n - r);
    let k = args.chunk_tokens as usize;
    let mut chunks = Vec::new();
    let mut sent = 0;
    for group in std::iter::repeat_n(" think".to_string(), r)
        .collect::<Vec<_>>()
        .chunks(k)
    {
        sent += group.len();
        chunks.push(ScriptedChunk {
            reasoning: group.concat(),
            content: String::new(),
            tokens_so_far: sent,
        });
    }
    for group in answer.chunks(k) {
        sent += group.len();
        chunks.push(ScriptedChunk {
            reasoning: String::new(),
            content: if args.empty {
                String::new()
            } else {
                group.concat()
            },
            tokens_so_far: sent,
        });
    }
    chunks
}

fn sse(v: serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn chunk_json(delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    chunk_envelope(json!([{"index": 0, "delta": delta, "finish_reason": finish}]))
}

/// A streamed chunk with these choices (none, for the usage chunk).
fn chunk_envelope(choices: serde_json::Value) -> serde_json::Value {
    json!({
        "id": "chatcmpl-stand-in",
        "object": "chat.completion.chunk",
        "model": MODEL,
        "choices": choices,
    })
}

/// The usage of a reply of `n` tokens.
fn usage_json(n: usize) -> serde_json::Value {
    json!({"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1})
}

/// Spin on the CPU for `d` of wall time: scripted host work.
fn burn(d: Duration) {
    let start = std::time::Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// The scripted line that is not SSE.
const GARBAGE: &[u8] = b"this line is not SSE {\n\n";
/// The scripted event that is not JSON.
const BAD_JSON: &[u8] = b"data: {\"choices\": [not json\n\n";
/// The scripted event that is JSON, but not of a chunk's shape.
const WRONG_SHAPE: &[u8] = b"data: {\"choices\":{\"delta\":\"Paris\"}}\n\n";
/// The start of the scripted line that never ends.
const ENDLESS_LINE_START: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"";
/// A piece of a body without end.
const ENDLESS_PIECE: usize = 64 << 10;

/// What the body stream does next.
enum Step {
    /// Wait, then send these bytes.
    Send(Duration, Bytes),
    /// Wait, then drop the connection.
    Die(Duration),
    /// Give the last bytes time to leave, then end the process.
    Crash,
    /// Keep the connection open, sending nothing, until the client goes.
    Hang,
}

/// The steps of a body, in order; without end for the endless faults.
type Steps = Box<dyn Iterator<Item = Step> + Send>;

/// `bytes` over and over, without end.
fn forever(wait: Duration, bytes: Bytes) -> impl Iterator<Item = Step> + Send {
    std::iter::repeat_with(move || Step::Send(wait, bytes.clone()))
}

/// The body of `steps`, each written after its wait (and, with `trickle`, a byte at a time).
fn body_of(steps: Steps, work: Duration, trickle: Option<Duration>) -> Body {
    let stream = futures_util::stream::unfold(steps, move |mut steps| async move {
        let (wait, item) = match steps.next()? {
            Step::Send(wait, bytes) => (wait, Ok(bytes)),
            Step::Die(wait) => (
                wait,
                Err(std::io::Error::other("the stand-in drops the connection")),
            ),
            Step::Crash => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = crate::console::err_line("stand-in: crashing as scripted");
                std::process::exit(3);
            }
            Step::Hang => {
                futures_util::future::pending::<()>().await;
                return None;
            }
        };
        if wait >= Duration::from_millis(1) {
            tokio::time::sleep(wait).await;
        } else if !wait.is_zero() {
            // tokio's timer counts whole milliseconds: shorter gaps (a 20,000 tok/s stream)
            // are kept by spinning, which only the stand-in pays for.
            let until = std::time::Instant::now() + wait;
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        if !work.is_zero() {
            burn(work);
        }
        let stop = item.is_err();
        // After an error the stream ends: hyper aborts the connection mid-body.
        let rest: Steps = if stop {
            Box::new(std::iter::empty())
        } else {
            steps
        };
        Some((item, rest))
    });
    let Some(gap) = trickle else {
        return Body::from_stream(stream);
    };
    // A byte at a time: each item's bytes are held and let out one by one.
    let trickled = futures_util::stream::unfold(
        (Box::pin(stream), Bytes::new()),
        move |(mut stream, mut held)| async move {
            use futures_util::StreamExt;
            while held.is_empty() {
                match stream.next().await? {
                    Ok(bytes) => held = bytes,
                    Err(e) => return Some((Err(e), (stream, held))),
                }
            }
            tokio::time::sleep(gap).await;
            let byte = held.split_to(1);
            Some((Ok(byte), (stream, held)))
        },
    );
    Body::from_stream(trickled)
}

async fn chat(State(script): State<Arc<Script>>, Json(req): Json<ChatRequest>) -> Response {
    let received = tokio::time::Instant::now();
    let args = &script.args;
    let prompt = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.as_str())
        .unwrap_or("")
        .to_string();
    if let Some(trace) = &script.trace {
        trace.write(&TraceLine::Request {
            received_ns: clock::now_ns(),
            prompt: prompt.clone(),
        });
    }
    let trickle = args.trickle_ms.map(Duration::from_millis);
    if let Some(code) = args.http_status {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({"error": {"message": "scripted error from the stand-in", "code": code}});
        if args.endless_body {
            let mut text = body.to_string().into_bytes();
            text.resize(ENDLESS_PIECE, b' ');
            let steps = forever(Duration::ZERO, Bytes::from(text));
            let body = body_of(Box::new(steps), Duration::ZERO, trickle);
            return (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        return (status, Json(body)).into_response();
    }
    let max_tokens = req.max_tokens.unwrap_or(usize::MAX);
    let n = args.tokens.min(max_tokens);
    let natural = if n == max_tokens { "length" } else { "stop" };
    let finish = args.finish_reason.as_deref().unwrap_or(natural);
    let mut chunks = reply_chunks(args, &prompt, n);
    if let Some(extra) = args.big_chunk {
        let mut pad = " ok".repeat(extra.div_ceil(3));
        pad.truncate(extra);
        for chunk in chunks.iter_mut().take(args.big_chunks) {
            chunk.content.push_str(&pad);
        }
    }
    let ttft = Duration::from_millis(args.ttft_ms);
    if !req.stream || args.not_sse {
        tokio::time::sleep_until(received + ttft).await;
        let content: String = chunks.iter().map(|c| c.content.as_str()).collect();
        let body = json!({
            "id": "chatcmpl-stand-in",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": usage_json(n),
        });
        return Json(body).into_response();
    }
    let usage_tokens = args.usage_claims.map_or(n, |c| c as usize);
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage) && !args.no_usage;
    let mut steps = Vec::new();
    if args.role_chunk {
        steps.push(Step::Send(
            Duration::ZERO,
            sse(chunk_json(
                json!({"role": "assistant", "content": ""}),
                None,
            )),
        ));
    }
    let gap = |i: usize| Duration::from_secs_f64(args.gaps_ms[i % args.gaps_ms.len()] / 1e3);
    if args.error_event_after == Some(0) || args.error_chunk_after == Some(0) {
        // After 0 tokens: in place of the first, a stream of nothing but the error.
        let wait = ttft.saturating_sub(received.elapsed());
        return stream_answer(steps, error_frame(args, wait), args, trickle);
    }
    for (i, c) in chunks.iter().enumerate() {
        // The first token waits for ttft from the request's arrival, not from this point.
        let wait = if i == 0 {
            ttft.saturating_sub(received.elapsed())
        } else {
            gap(i - 1)
        };
        let mut delta = serde_json::Map::new();
        if !c.reasoning.is_empty() {
            delta.insert("reasoning_content".into(), json!(c.reasoning));
        } else {
            delta.insert("content".into(), json!(c.content));
        }
        steps.push(Step::Send(wait, sse(chunk_json(delta.into(), None))));
        // "After N tokens": right after the chunk that brings the count to N or past it.
        let before = if i == 0 {
            0
        } else {
            chunks[i - 1].tokens_so_far
        };
        let reaches =
            |limit: Option<usize>| limit.is_some_and(|l| before < l && l <= c.tokens_so_far);
        if reaches(args.garbage_after) {
            steps.push(Step::Send(Duration::ZERO, Bytes::from_static(GARBAGE)));
        }
        if reaches(args.bad_json_after) {
            steps.push(Step::Send(Duration::ZERO, Bytes::from_static(BAD_JSON)));
        }
        if reaches(args.wrong_shape_after) {
            steps.push(Step::Send(Duration::ZERO, Bytes::from_static(WRONG_SHAPE)));
        }
        if let (true, Some(bytes)) = (reaches(args.inject_after), &args.inject) {
            steps.push(Step::Send(Duration::ZERO, Bytes::from(bytes.clone())));
        }
        if reaches(args.crash_after) {
            steps.push(Step::Crash);
        }
        if reaches(args.die_after) {
            steps.push(Step::Die(Duration::ZERO));
        }
        if reaches(args.error_event_after) || reaches(args.error_chunk_after) {
            return stream_answer(steps, error_frame(args, Duration::ZERO), args, trickle);
        }
        if reaches(args.endless_line_after) {
            let pieces = forever(Duration::ZERO, Bytes::from(vec![b'x'; ENDLESS_PIECE]));
            let line = std::iter::once(Step::Send(
                Duration::ZERO,
                Bytes::from_static(ENDLESS_LINE_START),
            ));
            let steps: Steps = Box::new(steps.into_iter().chain(line).chain(pieces));
            return sse_response(body_of(steps, Duration::ZERO, trickle));
        }
    }
    if args.endless {
        // Past the scripted tokens, " ok" for ever, as a serve that ignores max_tokens.
        let gaps = args.gaps_ms.clone();
        let more = (chunks.len()..).map(move |i| {
            let gap = Duration::from_secs_f64(gaps[i % gaps.len()] / 1e3);
            Step::Send(gap, sse(chunk_json(json!({"content": " ok"}), None)))
        });
        let steps: Steps = Box::new(steps.into_iter().chain(more));
        return sse_response(body_of(steps, Duration::from_millis(args.work_ms), trickle));
    }
    // After 0 tokens: in place of the first token.
    let first = usize::from(args.role_chunk);
    if args.garbage_after == Some(0) {
        steps.insert(first, Step::Send(ttft, Bytes::from_static(GARBAGE)));
    }
    if let (Some(0), Some(bytes)) = (args.inject_after, &args.inject) {
        steps.insert(first, Step::Send(ttft, Bytes::from(bytes.clone())));
    }
    if args.die_after == Some(0) {
        steps.insert(first, Step::Die(ttft));
    }
    steps.push(Step::Send(
        Duration::ZERO,
        sse(chunk_json(json!({}), Some(finish))),
    ));
    if include_usage {
        let mut usage = chunk_envelope(json!([]));
        usage["usage"] = usage_json(usage_tokens);
        steps.push(Step::Send(Duration::ZERO, sse(usage)));
    }
    stream_answer(steps, None, args, trickle)
}

/// The scripted error, as --error-event-after or --error-chunk-after sends it, after `wait`.
fn error_frame(args: &StandInArgs, wait: Duration) -> Option<Step> {
    let frame = if args.error_event_after.is_some() {
        format!("event: error\ndata: {}\n\n", args.error_data)
    } else {
        format!("data: {}\n\n", args.error_data)
    };
    Some(Step::Send(wait, Bytes::from(frame)))
}

/// The streamed answer: `steps`, then `last` (a scripted error frame), then [DONE], and what
/// --after-done asks for after it.
fn stream_answer(
    mut steps: Vec<Step>,
    last: Option<Step>,
    args: &StandInArgs,
    trickle: Option<Duration>,
) -> Response {
    steps.extend(last);
    if !args.no_done {
        steps.push(Step::Send(
            Duration::ZERO,
            Bytes::from_static(b"data: [DONE]\n\n"),
        ));
    }
    let gap = Duration::from_secs_f64(args.gaps_ms[0] / 1e3).max(Duration::from_millis(1));
    let after: Steps = match args.after_done {
        None => Box::new(std::iter::empty()),
        Some(AfterDone::Silent) => Box::new(std::iter::once(Step::Hang)),
        Some(AfterDone::Comments) => {
            Box::new(forever(gap, Bytes::from_static(b": keep-alive\n\n")))
        }
    };
    let steps: Steps = Box::new(steps.into_iter().chain(after));
    sse_response(body_of(steps, Duration::from_millis(args.work_ms), trickle))
}

fn sse_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
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
        let resp = http()
            .post(format!("{url}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
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

    #[test]
    fn built_in_prompts_get_their_right_answer_then_filler() {
        let a = args(&[]);
        assert_eq!(
            answer_tokens(&a, BUILT_IN[0].prompt, 4).concat(),
            "Paris. ok ok ok"
        );
        assert_eq!(
            answer_tokens(&args(&["--answer", "London is it"]), "x", 2).concat(),
            "London is"
        );
    }

    #[test]
    fn chunks_group_tokens_and_keep_reasoning_apart() {
        let a = args(&[
            "--chunk-tokens",
            "3",
            "--reasoning-tokens",
            "4",
            "--answer",
            "a b c d e f",
        ]);
        let c = reply_chunks(&a, "x", 10);
        let shape: Vec<(usize, usize, usize)> = c
            .iter()
            .map(|c| {
                (
                    c.reasoning.split_whitespace().count(),
                    c.content.split_whitespace().count(),
                    c.tokens_so_far,
                )
            })
            .collect();
        assert_eq!(shape, vec![(3, 0, 3), (1, 0, 4), (0, 3, 7), (0, 3, 10)]);
    }

    #[test]
    fn gaps_parse_as_a_list_and_usage_flags_override() {
        assert_eq!(args(&["--gaps-ms", "40,0.05"]).gaps_ms, vec![40.0, 0.05]);
        assert!(args(&["--usage", "--no-usage"]).no_usage);
        assert!(!args(&["--no-usage", "--usage"]).no_usage);
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
        let TraceLine::Request { received_ns, .. } = lines[0] else {
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
}
