//! The HTTP client: readiness probes, the model list, and streamed replies timed as their bytes
//! arrive.
//!
//! One request at a time, each on a fresh connection, through hyper's connection API. Each read
//! from the socket is stamped on the monotonic clock the moment it returns, before any parsing
//! ([`crate::live::stamped`]); every SSE event carries the stamp of the read that completed it.
//!
//! Why hyper's connection API and not a pooled client: the gate polls the connection and the
//! reply's body in one loop of its own (see [`read_stream`]). A client that runs the connection
//! in a task of its own hands every chunk across tasks, and a stall timer polled beside each
//! hand-off costs as much again: at 20,000 tokens a second that is CPU the serve needs.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Bytes, Incoming};
use hyper::client::conn::http1::{self, Connection};
use hyper::{header, Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::archive::record::{
    BurstSlot, ChunkArrival, LogprobsAsked, ReplyRecord, TokenLogprob, TopLogprob,
    LOGPROB_TOKEN_BYTES, MAX_TOP_LOGPROBS,
};
use crate::clock;
use crate::judging::verdict::quote;
use crate::live::stamped::{StampedStream, Stamps};
use crate::wire::logprobs as wire_logprobs;
use crate::wire::openai::{self, Chunk};
use crate::wire::sse::{FeedError, SseItem, SseParser, Unfinished};

/// What a readiness probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// An HTTP answer with this status.
    Status(u16),
    /// No HTTP answer, and why (connection refused, reset, timed out).
    Unreachable(String),
}

/// What to send for one reply.
#[derive(Debug, Clone)]
pub struct ReplyRequest<'a> {
    /// 1-based position in the run.
    pub index: usize,
    /// The user message.
    pub prompt: &'a str,
    /// The pattern the answer must match, recorded with the reply.
    pub expect: Option<&'a str>,
    /// The model name.
    pub model: &'a str,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// Fields merged into the request body, over the gate's own (`--extra-body`).
    pub extra_body: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// For a burst's stream: its place, and the burst's release (ns on the gate's clock),
    /// which its first token is counted from.
    pub burst: Option<(BurstSlot, u64)>,
    /// Told when the reply's first text arrives.
    pub first_text: Option<FirstText>,
    /// A final assistant message for the serve to continue (a re-anchor past a divergence
    /// from the reference, `--reference-reanchor`).
    pub continue_from: Option<&'a str>,
}

/// Counts the streams of a burst whose first text has arrived, and wakes whoever waits for
/// all of them (the scrape of the serve's metrics halfway through a burst).
#[derive(Debug, Clone)]
pub struct FirstText {
    seen: Arc<AtomicUsize>,
    of: usize,
    all: Arc<Notify>,
}

impl FirstText {
    /// For a burst of `of` streams.
    pub fn new(of: usize) -> Self {
        FirstText {
            seen: Arc::default(),
            of,
            all: Arc::new(Notify::new()),
        }
    }

    /// One more stream has its first text.
    fn seen(&self) {
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.of {
            self.all.notify_one();
        }
    }

    /// Wake the waiter now, whatever the count: a stream has ended before all had begun.
    pub fn wake(&self) {
        self.all.notify_one();
    }

    /// Wait until every stream has its first text, or [`FirstText::wake`].
    pub async fn wait(&self) {
        self.all.notified().await;
    }
}

/// What [`Client::fetch`] got: the status, and the body's head.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The HTTP status.
    pub status: u16,
    /// The body, at most the bytes asked for.
    pub body: Vec<u8>,
    /// Whether there was more body than that.
    pub cut: bool,
}

/// A client for one serve.
#[derive(Debug, Clone)]
pub struct Client {
    /// `host:port`, to connect to and to name in the Host header.
    authority: String,
    /// The port in `authority`.
    port: u16,
    /// The URL's path without its trailing slash ("" for `http://host:port/`).
    prefix: String,
    /// The OpenAI-compatible API's path prefix, after the URL's own: `/v1` unless the serve
    /// puts it elsewhere (`--api-base`).
    api: String,
    /// `--logprobs K`: asked of every reply, and what came of it over the run (shared by the
    /// client's copies: the bursts' streams are the run's replies too).
    logprobs: Option<Arc<LogprobsAsk>>,
}

/// `--logprobs K` as the client asks it, and what the serve's logprobs were like so far.
#[derive(Debug)]
struct LogprobsAsk {
    top: usize,
    tally: std::sync::Mutex<LogprobsAsked>,
}

/// One request's connection, polled by whoever waits for the request, which no other task
/// runs. Once it has ended it is dropped, not polled again.
struct Link(Option<Pin<Box<Conn>>>);

type Conn = Connection<TokioIo<StampedStream>, Full<Bytes>>;

impl Link {
    /// Let the connection read, write and decode what it can. Its end is not the request's:
    /// hyper reports that, or the error, through the response and its body.
    fn poll(&mut self, cx: &mut std::task::Context<'_>) {
        if let Some(conn) = self.0.as_mut() {
            if conn.as_mut().poll(cx).is_ready() {
                self.0 = None;
            }
        }
    }

    /// Wait for `work` while polling the connection it needs.
    async fn alongside<T>(&mut self, work: impl Future<Output = T>) -> T {
        let mut work = pin!(work);
        poll_fn(|cx| {
            self.poll(cx);
            work.as_mut().poll(cx)
        })
        .await
    }
}

impl Client {
    /// A client for the serve at `base` (e.g. `http://127.0.0.1:8080`). Proxies from the
    /// environment are ignored: the serve is on this box.
    ///
    /// Every request opens a fresh connection. A serve may close an idle keep-alive connection
    /// just as a client reuses it (llama-server did, under load: "connection closed before
    /// message completed"), and a gate never retries a reply, so a pooled connection would turn
    /// that race into a failed reply. A loopback connect costs far less than a millisecond, the
    /// same for every reply.
    pub fn new(base: &str) -> Result<Self> {
        let url = url::Url::parse(base).with_context(|| format!("{base} is not a URL"))?;
        let Some(host) = url.host_str() else {
            // `localhost:8080` parses, as the scheme "localhost" and no host.
            bail!("{base} names no host: a serve's URL looks like http://127.0.0.1:8080");
        };
        if url.scheme() != "http" {
            bail!(
                "{base}: the gate speaks plain HTTP to a serve on this box, not {}",
                url.scheme()
            );
        }
        // What the URL says beyond the serve's address would be dropped without a word: the
        // gate sends no credentials, and its requests have paths of their own.
        if !url.username().is_empty() || url.password().is_some() {
            bail!("{base}: the gate sends no user name or password to a serve");
        }
        if url.query().is_some() || url.fragment().is_some() {
            bail!("{base}: a serve's URL for the gate has no query or fragment");
        }
        let port = url
            .port_or_known_default()
            .with_context(|| format!("{base} has no port"))?;
        Ok(Client {
            authority: format!("{host}:{port}"),
            port,
            prefix: url.path().trim_end_matches('/').to_string(),
            api: "/v1".to_string(),
            logprobs: None,
        })
    }

    /// This client asking every reply for its tokens' logprobs and `top` alternatives each
    /// (`"logprobs": true, "top_logprobs": top`), and recording them in the reply's
    /// `logprobs` ([`crate::archive::record::TokenLogprob`]). `top` is 1 to
    /// [`MAX_TOP_LOGPROBS`] (`--logprobs` is held to it).
    pub fn with_logprobs(mut self, top: usize) -> Self {
        let top = top.clamp(1, MAX_TOP_LOGPROBS);
        self.logprobs = Some(Arc::new(LogprobsAsk {
            top,
            tally: std::sync::Mutex::new(LogprobsAsked {
                top,
                replies_without: 0,
                replies_unreadable: 0,
                first_unreadable: None,
                dropped: 0,
            }),
        }));
        self
    }

    /// What the serve's logprobs were like over the replies so far, when they were asked for.
    pub fn logprobs_asked(&self) -> Option<LogprobsAsked> {
        let ask = self.logprobs.as_ref()?;
        let tally = ask.tally.lock().unwrap_or_else(|e| e.into_inner());
        Some(tally.clone())
    }

    /// This client with the OpenAI-compatible API under `api` (e.g. `/v3`) instead of `/v1`.
    pub fn with_api_base(mut self, api: &str) -> Self {
        self.api = api.trim_end_matches('/').to_string();
        self
    }

    /// The path of the API's list of models, e.g. `/v1/models`.
    pub fn models_path(&self) -> String {
        format!("{}/models", self.api)
    }

    /// The serve's port, as the URL gives it or its scheme implies.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Open a connection and send a request on it; the connection comes back with the request's
    /// response future, for the caller to poll together, and the stamps of its reads and
    /// writes. A body goes with the index of the reply it asks for.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(String, usize)>,
    ) -> Result<
        (
            Link,
            impl Future<Output = hyper::Result<Response<Incoming>>>,
            Stamps,
        ),
        String,
    > {
        let tcp = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| format!("the request failed: connecting to {}: {e}", self.authority))?;
        // Each event is small and the request is one write; waiting to coalesce helps nothing.
        tcp.set_nodelay(true).ok();
        let (tcp, stamps) = StampedStream::new(tcp);
        let (mut sender, conn) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("the request failed: {}", error_chain(&e)))?;
        let uri = match format!("{}{path}", self.prefix) {
            uri if uri.is_empty() => "/".to_string(),
            uri => uri,
        };
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, &self.authority);
        let body = match body {
            Some((body, index)) => {
                // Names the reply in a serve's log (vLLM takes it as the request's id) and in
                // the stand-in's trace, where concurrent streams interleave.
                request = request
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::ACCEPT, "text/event-stream")
                    .header("x-request-id", format!("npu-serve-smoke-{index}"));
                body
            }
            None => String::new(),
        };
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("the request failed: {e}"))?;
        Ok((
            Link(Some(Box::pin(conn))),
            sender.send_request(request),
            stamps,
        ))
    }

    /// GET `path` and read the whole answer's body, within `limit` and at most `max` bytes: a
    /// body without end is no answer.
    async fn get_body(&self, path: &str, limit: Duration, max: usize) -> Option<Bytes> {
        let work = async {
            let (mut link, response, _) = self.send(Method::GET, path, None).await.ok()?;
            let body = link.alongside(response).await.ok()?.into_body();
            let body = link
                .alongside(Limited::new(body, max).collect())
                .await
                .ok()?;
            Some(body.to_bytes())
        };
        tokio::time::timeout(limit, work).await.ok().flatten()
    }

    /// GET the URL this client was made for (its own path: no API prefix), reading at most
    /// `max` bytes of the answer's body within `limit`: a serve's metrics. A longer body is
    /// cut, and says so.
    pub async fn fetch(&self, limit: Duration, max: usize) -> Result<Fetched, String> {
        let work = async {
            let (mut link, response, _) = self.send(Method::GET, "", None).await?;
            let resp = link
                .alongside(response)
                .await
                .map_err(|e| format!("the request failed: {}", error_chain(&e)))?;
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            let mut fetched = Fetched {
                status,
                body: Vec::new(),
                cut: false,
            };
            let reading = async {
                while let Some(frame) = body.frame().await {
                    let frame =
                        frame.map_err(|e| format!("the answer broke: {}", error_chain(&e)))?;
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let room = max - fetched.body.len();
                    if data.len() > room {
                        fetched.body.extend_from_slice(&data[..room]);
                        fetched.cut = true;
                        break;
                    }
                    fetched.body.extend_from_slice(&data);
                }
                Ok::<_, String>(())
            };
            link.alongside(reading).await?;
            Ok(fetched)
        };
        match tokio::time::timeout(limit, work).await {
            Ok(r) => r,
            Err(_) => Err(format!("no whole answer within {} s", limit.as_secs_f64())),
        }
    }

    /// GET `path` once, with a short timeout.
    pub async fn probe(&self, path: &str) -> Probe {
        let work = async {
            let (mut link, response, _) = self.send(Method::GET, path, None).await?;
            link.alongside(response)
                .await
                .map_err(|e| format!("the request failed: {}", error_chain(&e)))
        };
        match tokio::time::timeout(Duration::from_secs(2), work).await {
            Ok(Ok(resp)) => Probe::Status(resp.status().as_u16()),
            Ok(Err(e)) => Probe::Unreachable(e),
            Err(_) => Probe::Unreachable("no answer within 2 s".to_string()),
        }
    }

    /// The first model id from the API's list of models (/v1/models), if the serve lists one (in at most
    /// [`MODELS_BODY_MAX`] bytes).
    pub async fn first_model(&self) -> Option<String> {
        let body = self
            .get_body(
                &self.models_path(),
                Duration::from_secs(10),
                MODELS_BODY_MAX,
            )
            .await?;
        let body: serde_json::Value = serde_json::from_slice(&body).ok()?;
        body.get("data")?
            .get(0)?
            .get("id")?
            .as_str()
            .map(str::to_string)
    }

    /// Stream one reply. Never fails: what went wrong is recorded in the reply's `error`, with
    /// everything that arrived before it. `base_ns` is the run's clock base; `stall` bounds the
    /// wait for any next bytes, `limit` the whole reply (`None`: [`default_reply_limit`]).
    pub async fn stream_reply(
        &self,
        req: &ReplyRequest<'_>,
        base_ns: u64,
        stall: Duration,
        limit: Option<Duration>,
    ) -> ReplyRecord {
        let mut body = json!({
            "model": req.model,
            "messages": [{"role": "user", "content": req.prompt}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": 0,
            "max_tokens": req.max_tokens,
        });
        if let Some(prefix) = req.continue_from {
            body["messages"] = json!([
                {"role": "user", "content": req.prompt},
                {"role": "assistant", "content": prefix},
            ]);
        }
        if let (Some(ask), Some(fields)) = (&self.logprobs, body.as_object_mut()) {
            fields.insert("logprobs".into(), true.into());
            fields.insert("top_logprobs".into(), ask.top.into());
        }
        if let (Some(extra), Some(fields)) = (req.extra_body, body.as_object_mut()) {
            fields.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let bounds = ReplyBounds {
            stall,
            whole: limit.unwrap_or_else(|| default_reply_limit(stall, req.max_tokens)),
            max_events: max_events(req.max_tokens),
            max_tokens: req.max_tokens,
            top_logprobs: self.logprobs.as_ref().map(|a| a.top),
        };
        let since_base = move |ns: u64| ns.saturating_sub(base_ns);
        let mut rec = ReplyRecord::new(req.index, req.prompt, req.expect);
        rec.burst = req.burst.map(|(slot, _)| slot);
        let released = req.burst.map(|(_, at)| at);
        let first_text = req.first_text.clone();
        let client = self.clone();
        let body = body.to_string();
        // The stream is read in a task of its own, so that the bytes arriving wake only the
        // reader, not the gate's whole future (signals, the sampler's timer, the serve's watch).
        let mut reader = AbortOnDrop(tokio::spawn(async move {
            // A burst's streams are timed from their common release: any wait before this
            // stream's request left (the gate's dispatch) or at the serve is in its figures.
            rec.sent_ns = since_base(released.unwrap_or_else(clock::now_ns));
            let mut logprobs = LogprobsSeen::default();
            let outcome = read_stream(
                &client,
                body,
                &mut rec,
                base_ns,
                &bounds,
                first_text.as_ref(),
                &mut logprobs,
            )
            .await;
            rec.end_ns = since_base(clock::now_ns());
            if let Some(ask) = &client.logprobs {
                logprobs.settle(&mut rec, ask);
            }
            if let Err(e) = outcome {
                rec.error = Some(e);
                cut_failed_text(&mut rec);
            }
            rec
        }));
        match (&mut reader.0).await {
            Ok(rec) => rec,
            Err(e) => ReplyRecord {
                error: Some(format!("the reply's reader failed: {e}")),
                burst: req.burst.map(|(slot, _)| slot),
                ..ReplyRecord::new(req.index, req.prompt, req.expect)
            },
        }
    }
}

/// The wall-clock limit of a whole reply when `--reply-limit` is not given: the stall timeout
/// for the first token, and then a second for each token max_tokens allows. The slow route of
/// a real serve (1.9 tok/s) finishes well inside it; a serve trickling bytes, or streaming
/// without end, does not.
pub fn default_reply_limit(stall: Duration, max_tokens: u32) -> Duration {
    stall + Duration::from_secs(u64::from(max_tokens))
}

/// The most events (data events other than `[DONE]`) a reply may have: four for each token
/// max_tokens allows, and 64 more for role, finish and usage chunks. A serve sends one event
/// a token or fewer (several tokens to a chunk); one that sends more than four times as many
/// does not stop at max_tokens, and its events would hold the gate's memory without end.
pub fn max_events(max_tokens: u32) -> usize {
    (max_tokens as usize).saturating_mul(4).saturating_add(64)
}

/// The most text (answer and reasoning, bytes) one reply may have: 16 MiB. A real chunk of
/// 10 MB passes; text without end does not get the gate's memory.
pub const MAX_REPLY_TEXT: usize = 16 << 20;

/// Bytes of each text channel a failed reply keeps: its text is quoted (80 characters), never
/// judged, and a run whose every reply failed after 15 MiB must not keep them all.
pub const FAILED_TEXT_KEPT: usize = 64 << 10;

/// Cut a failed reply's text to its first [`FAILED_TEXT_KEPT`] bytes a channel, recording
/// how much there was.
fn cut_failed_text(rec: &mut ReplyRecord) {
    rec.cut_text(FAILED_TEXT_KEPT);
}

/// Bytes kept of the body of an HTTP error answer, to quote it.
pub const ERROR_BODY_KEPT: usize = 4096;

/// The largest /v1/models answer read: a list of models is a few KiB.
pub const MODELS_BODY_MAX: usize = 1 << 20;

/// Bytes of an `event: error`'s data read as JSON for its message; a longer one is quoted as
/// it came.
const ERROR_DATA_PARSED: usize = 64 << 10;

/// Bytes of a `finish_reason` kept: the real ones are a word.
const FINISH_REASON_KEPT: usize = 64;

/// What bounds one reply.
#[derive(Debug, Clone, Copy)]
struct ReplyBounds {
    /// The longest wait for any next bytes (`--reply-timeout`).
    stall: Duration,
    /// The longest the whole reply may take, from the request to its end (`--reply-limit`).
    whole: Duration,
    /// The most events it may have.
    max_events: usize,
    /// The request's max_tokens, to say what the event cap was derived from.
    max_tokens: u32,
    /// K, when the reply's logprobs were asked for (`--logprobs`).
    top_logprobs: Option<usize>,
}

/// What a reply's logprobs were like, while it streams: set into the reply and the run's tally
/// once it has ended.
#[derive(Debug, Default)]
struct LogprobsSeen {
    /// Why a chunk's logprobs could not be read, the first time; the reply then keeps none.
    unreadable: Option<String>,
    /// Records and alternatives not kept.
    dropped: usize,
}

impl LogprobsSeen {
    /// The reply has ended: an unreadable reply keeps no logprobs (the records after the one
    /// that could not be read would stand at the wrong place in the text), and the run's
    /// tally counts what the reply had.
    fn settle(self, rec: &mut ReplyRecord, ask: &LogprobsAsk) {
        let mut tally = ask.tally.lock().unwrap_or_else(|e| e.into_inner());
        tally.dropped += self.dropped;
        if let Some(why) = self.unreadable {
            rec.logprobs = None;
            tally.replies_unreadable += 1;
            tally
                .first_unreadable
                .get_or_insert_with(|| format!("{}: {why}", rec.name()));
            return;
        }
        if rec.logprobs.is_none() && rec.chunks.iter().any(|c| c.has_text()) {
            tally.replies_without += 1;
        }
    }
}

/// Aborts the task when dropped: an interrupted gate drops the reply it waits for, and the
/// stream must close with it, not run on unseen.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Chunks the reader takes in one turn before it lets the gate's other tasks run. A read brings
/// a dozen at 20,000 tokens a second; a serve that sends a long reply at once, thousands.
const CHUNKS_PER_TURN: u32 = 64;

/// Why the reader stopped taking events from a read.
enum Halt {
    /// `[DONE]`: the reply is complete; nothing after it is read.
    Done,
    /// The reply failed, for this reason.
    Fail(String),
}

/// How the body's reading ended, when it did not fail.
enum Ended {
    /// At `[DONE]`.
    Done,
    /// At the end of the body.
    Eof,
}

/// `bytes` quoted, as text, cut to `max` characters: only the bytes that can show are read, so
/// quoting 16 MiB costs no more than quoting 100 bytes.
fn quote_bytes(bytes: &[u8], max: usize) -> String {
    let head = &bytes[..bytes.len().min(4 * max + 4)];
    quote(&String::from_utf8_lossy(head), max)
}

/// The FAIL text of an answer that is not an event stream.
fn not_an_event_stream(content_type: Option<&str>) -> String {
    match content_type {
        Some(t) if t.contains("json") => format!(
            "the serve's answer is not an event stream but JSON (Content-Type {}), as a serve that ignores \"stream\": true sends",
            quote(t, 80)
        ),
        Some(t) if t.starts_with("text/event-stream") => format!(
            "the serve's answer is labelled an event stream (Content-Type {}) but is not one",
            quote(t, 80)
        ),
        Some(t) => format!(
            "the serve's answer is not an event stream (Content-Type {})",
            quote(t, 80)
        ),
        None => "the serve's answer is not an event stream (it has no Content-Type)".to_string(),
    }
}

/// The FAIL text of an `event: error`, from its data.
fn reported_error(data: &[u8]) -> String {
    if data.is_empty() {
        return "the serve reported an error (an `event: error` with no data)".to_string();
    }
    let text = match serde_json::from_slice::<serde_json::Value>(
        &data[..data.len().min(ERROR_DATA_PARSED)],
    ) {
        Ok(v) => openai::error_text(&v),
        Err(_) => return format!("the serve reported an error: {}", quote_bytes(data, 200)),
    };
    format!("the serve reported an error: {}", quote(&text, 200))
}

/// Read one streamed reply into `rec`, each chunk stamped with the read that completed it.
///
/// The connection and the body are polled in one loop: the connection decodes a chunk from
/// what it read, the body hands it over, the loop asks for the next, and only when neither has
/// more (the socket is empty) does the task sleep, with one deadline armed: the stall's or the
/// whole reply's, whichever is first. So a chunk costs no task switch and no timer poll; a
/// wake-up, one of each. A turn takes at most [`CHUNKS_PER_TURN`] chunks, then yields to the
/// gate's other tasks, and checks the whole reply's limit, which a serve that never lets the
/// socket empty would otherwise never meet.
async fn read_stream(
    client: &Client,
    body: String,
    rec: &mut ReplyRecord,
    base_ns: u64,
    bounds: &ReplyBounds,
    first_text: Option<&FirstText>,
    logprobs: &mut LogprobsSeen,
) -> Result<(), String> {
    let mut first_text = first_text;
    let started_ns = clock::now_ns();
    let limit_ns = started_ns.saturating_add(bounds.whole.as_nanos() as u64);
    let stall = bounds.stall;
    let stall_msg = || format!("the stream stalled: no bytes for {} s", stall.as_secs_f64());
    let over_limit = |what: String| {
        format!(
            "the reply did not end within {} s (--reply-limit); {what}",
            bounds.whole.as_secs_f64()
        )
    };
    let index = rec.index;
    let start = async {
        let (mut link, response, stamps) = client
            .send(
                Method::POST,
                &format!("{}/chat/completions", client.api),
                Some((body, index)),
            )
            .await?;
        let resp = link
            .alongside(response)
            .await
            .map_err(|e| format!("the request failed: {}", error_chain(&e)))?;
        Ok::<_, String>((link, resp, stamps))
    };
    let (mut link, resp, stamps) = match tokio::time::timeout(stall.min(bounds.whole), start).await
    {
        Ok(started) => started?,
        Err(_) if bounds.whole <= stall => {
            return Err(over_limit("the serve had not answered".to_string()))
        }
        Err(_) => return Err(stall_msg()),
    };
    if rec.burst.is_some() {
        // The answer has begun: the request's writes are over.
        rec.written_ns = Some(stamps.write.get().saturating_sub(base_ns));
    }
    let stamp = stamps.read;
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut body = resp.into_body();
    if !status.is_success() {
        let left = Duration::from_nanos(limit_ns.saturating_sub(clock::now_ns()));
        let head = read_head(&mut link, &mut body, ERROR_BODY_KEPT, stall.min(left)).await;
        let shown = if head.is_empty() {
            "(no body)".to_string()
        } else {
            quote_bytes(&head, 200)
        };
        return Err(format!("HTTP {}: {shown}", status.as_u16()));
    }
    let mut parser = SseParser::new();
    let mut received: u64 = 0;
    let so_far = |rec: &ReplyRecord, received: u64| {
        let text = rec.chunks.iter().filter(|c| c.has_text()).count();
        let finish = match &rec.finish_reason {
            Some(reason) => format!(
                "; it had sent its finish_reason ({}) but no [DONE]",
                quote(reason, 40)
            ),
            None => String::new(),
        };
        format!(
            "by then the serve had sent {received} bytes, {} events ({text} with text){finish}",
            rec.chunks.len()
        )
    };
    // One deadline for the whole stream, polled only when the task is about to sleep and
    // re-armed only when it fires early, from the stamp of the last read.
    let waiting_since = clock::now_ns();
    let first_wake = Duration::from_nanos(limit_ns.saturating_sub(waiting_since)).min(stall);
    let mut deadline = pin!(tokio::time::sleep(first_wake));
    let ended = poll_fn(|cx| {
        let mut chunks_this_turn = 0;
        loop {
            if chunks_this_turn == CHUNKS_PER_TURN {
                if clock::now_ns() >= limit_ns {
                    return Poll::Ready(Err(over_limit(so_far(rec, received))));
                }
                // A serve (or a proxy) that dumps a long reply at once would keep this loop busy
                // for as long as the bytes last, and the gate's other work (signals, the sampler)
                // would wait for it: let it have a turn.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            link.poll(cx);
            let frame = match Pin::new(&mut body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Err(format!("the stream broke: {}", error_chain(&e))))
                }
                Poll::Ready(None) => return Poll::Ready(Ok(Ended::Eof)),
                Poll::Pending => {
                    if deadline.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let now = clock::now_ns();
                    if now >= limit_ns {
                        return Poll::Ready(Err(over_limit(so_far(rec, received))));
                    }
                    let last_bytes_ns = stamp.get().max(waiting_since);
                    let quiet = Duration::from_nanos(now.saturating_sub(last_bytes_ns));
                    if quiet >= stall {
                        if let Some(reason) = &rec.finish_reason {
                            return Poll::Ready(Err(format!(
                                "the serve sent its finish_reason ({}) but then neither [DONE] nor the end of the stream: no bytes for {} s",
                                quote(reason, 40),
                                stall.as_secs_f64()
                            )));
                        }
                        return Poll::Ready(Err(stall_msg()));
                    }
                    let to_limit = Duration::from_nanos(limit_ns - now);
                    deadline
                        .as_mut()
                        .reset(tokio::time::Instant::now() + (stall - quiet).min(to_limit));
                    continue;
                }
            };
            let Ok(read) = frame.into_data() else {
                continue; // trailers: nothing the gate reads
            };
            chunks_this_turn += 1;
            received += read.len() as u64;
            // When the read that completed this chunk returned.
            let at_ns = stamp.get().saturating_sub(base_ns);
            let fed = parser.feed(&read, &mut |item| match item {
                SseItem::Event { kind: b"error", data } => Err(Halt::Fail(reported_error(data))),
                SseItem::Event {
                    data: b"[DONE]", ..
                } => Err(Halt::Done),
                // A typed event with no data (a ping): nothing the gate reads.
                SseItem::Event { kind, data: b"" } if !kind.is_empty() => Ok(()),
                SseItem::Event { data, .. } => {
                    record_chunk(rec, data, at_ns, bounds, logprobs).map_err(Halt::Fail)?;
                    if rec.chunks.last().is_some_and(|c| c.has_text()) {
                        if let Some(told) = first_text.take() {
                            told.seen();
                        }
                    }
                    Ok(())
                }
                SseItem::Malformed(line) if rec.chunks.is_empty() => Err(Halt::Fail(format!(
                    "{}: {}",
                    not_an_event_stream(content_type.as_deref()),
                    quote_bytes(line, 120)
                ))),
                SseItem::Malformed(line) => Err(Halt::Fail(format!(
                    "a line of the stream is not SSE: {}",
                    quote_bytes(line, 120)
                ))),
            });
            match fed {
                Ok(()) => {}
                Err(FeedError::Item(Halt::Done)) => return Poll::Ready(Ok(Ended::Done)),
                Err(FeedError::Item(Halt::Fail(e))) => return Poll::Ready(Err(e)),
                Err(FeedError::Stream(e)) => return Poll::Ready(Err(e.to_string())),
            }
        }
    })
    .await?;
    // After [DONE] nothing more is read, and the connection is dropped: a serve that keeps it
    // open, or sends comments after it, has still completed its reply.
    if let Ended::Done = ended {
        return Ok(());
    }
    match parser.finish() {
        Some(Unfinished::NotSse(head)) if rec.chunks.is_empty() => {
            return Err(format!(
                "{}: {}",
                not_an_event_stream(content_type.as_deref()),
                quote_bytes(&head, 120)
            ))
        }
        Some(Unfinished::NotSse(head)) => {
            return Err(format!(
                "the stream ended mid-event, in a line that is not SSE: {}",
                quote_bytes(&head, 120)
            ))
        }
        Some(Unfinished::Event(data)) if data.is_empty() => {
            return Err("the stream ended mid-event".to_string())
        }
        Some(Unfinished::Event(data)) => {
            return Err(format!(
                "the stream ended mid-event: {}",
                quote_bytes(&data, 120)
            ))
        }
        None => {}
    }
    if rec.finish_reason.is_none() {
        return Err("the stream ended without a finish_reason or [DONE]".to_string());
    }
    Ok(())
}

/// The first `max` bytes of `body`, read for at most `within`: whatever arrived by then, when
/// the body is slow or has no end.
async fn read_head(link: &mut Link, body: &mut Incoming, max: usize, within: Duration) -> Vec<u8> {
    let mut head = Vec::new();
    let reading = async {
        while head.len() < max {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let room = max - head.len();
                        head.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(within, link.alongside(reading)).await;
    head
}

/// Add one parsed data event to the reply.
fn record_chunk(
    rec: &mut ReplyRecord,
    data: &[u8],
    at_ns: u64,
    bounds: &ReplyBounds,
    logprobs: &mut LogprobsSeen,
) -> Result<(), String> {
    let chunk = Chunk::parse(data).map_err(|e| {
        // Valid JSON of another shape is not "not JSON": say which it is.
        let what = match e.classify() {
            serde_json::error::Category::Data => "a chunk is JSON but not a chat completion chunk",
            _ => "a chunk is not JSON",
        };
        format!("{what} ({e}): {}", quote_bytes(data, 120))
    })?;
    if let Some(error) = chunk.error() {
        return Err(format!(
            "the serve reported an error: {}",
            quote(&openai::error_text(error), 200)
        ));
    }
    if rec.chunks.len() >= bounds.max_events {
        let text = rec.chunks.iter().filter(|c| c.has_text()).count();
        return Err(format!(
            "the serve sent more than {} events ({text} with text) for max_tokens {}: it does not stop at max_tokens",
            bounds.max_events, bounds.max_tokens
        ));
    }
    // Noted, not a failure of the reply: the stream is read to its end and the content line
    // names the choice (its text is in no figure).
    if let Some(index) = chunk.other_choice() {
        rec.unrequested_choice.get_or_insert(index);
    }
    let (content, reasoning) = (chunk.content(), chunk.reasoning());
    let text_len = rec.content.len() + rec.reasoning.len() + content.len() + reasoning.len();
    if text_len > MAX_REPLY_TEXT {
        return Err(format!(
            "the reply's text passed {} MiB (the gate's cap on one reply's text)",
            MAX_REPLY_TEXT >> 20
        ));
    }
    rec.content.push_str(content);
    rec.reasoning.push_str(reasoning);
    rec.chunks.push(ChunkArrival {
        at_ns,
        content_chars: content.chars().count() as u32,
        reasoning_chars: reasoning.chars().count() as u32,
        tokens: 0.0,
    });
    if let Some(n) = chunk.usage.and_then(|u| u.completion_tokens) {
        rec.usage_completion_tokens = Some(n);
    }
    if let Some(n) = chunk.cached_prompt_tokens() {
        rec.cached_prompt_tokens = Some(n);
    }
    let failed = match chunk.finish_reason() {
        Some(reason) => {
            let mut cut = reason.len().min(FINISH_REASON_KEPT);
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            rec.finish_reason = Some(reason[..cut].to_string());
            reason == "error"
        }
        None => false,
    };
    // Read after the chunk's text and stamps, and only when asked: a run without logprobs
    // reads nothing more than their place.
    if let (Some(top), Some(raw)) = (bounds.top_logprobs, chunk.logprobs()) {
        record_logprobs(rec, raw, top, bounds.max_events, logprobs);
    }
    if chunk.timings.is_some() {
        rec.server_timings = chunk.timings;
    }
    if failed {
        return Err("the serve ended the reply with finish_reason \"error\"".to_string());
    }
    Ok(())
}

/// Add one chunk's logprobs to the reply, within its bounds: at most `max_records` token records
/// a reply (its event cap: a serve cannot make them hold more of the gate's memory than its
/// events may), `top` alternatives each, every text cut to [`LOGPROB_TOKEN_BYTES`]. Once a
/// chunk's logprobs could not be read, the reply's later ones are not read either.
fn record_logprobs(
    rec: &mut ReplyRecord,
    raw: &str,
    top: usize,
    max_records: usize,
    seen: &mut LogprobsSeen,
) {
    if seen.unreadable.is_some() {
        return;
    }
    let kept = rec.logprobs.as_ref().map_or(0, Vec::len);
    let bounds = wire_logprobs::Bounds {
        tokens: max_records.saturating_sub(kept),
        top: top.min(MAX_TOP_LOGPROBS),
        token_bytes: LOGPROB_TOKEN_BYTES,
    };
    match wire_logprobs::read(raw, bounds) {
        Ok(read) => {
            seen.dropped += read.dropped;
            if read.tokens.is_empty() {
                return;
            }
            let records = rec.logprobs.get_or_insert_with(Vec::new);
            records.extend(read.tokens.into_iter().map(|t| {
                TokenLogprob {
                    token: t.token,
                    logprob: t.logprob,
                    top: t
                        .top
                        .into_iter()
                        .map(|a| TopLogprob {
                            token: a.token,
                            logprob: a.logprob,
                        })
                        .collect(),
                }
            }));
        }
        Err(why) => {
            let chunk = rec.chunks.len();
            seen.unreadable = Some(format!("event {chunk}: {}", quote(&why.0, 200)));
        }
    }
}

/// An error and its causes on one line: hyper's top-level message alone says little.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_allows_the_stall_and_a_second_a_token() {
        let stall = Duration::from_secs(60);
        assert_eq!(default_reply_limit(stall, 64), Duration::from_secs(124));
        // The slow route, 1.9 tok/s, finishes its 64 tokens inside it.
        assert!(
            Duration::from_secs_f64(64.0 / 1.9) + Duration::from_secs(5) < Duration::from_secs(124)
        );
        assert_eq!(max_events(64), 320);
        assert_eq!(max_events(u32::MAX), 4 * u32::MAX as usize + 64);
    }

    #[test]
    fn an_error_event_says_the_serves_message_or_its_data() {
        assert_eq!(
            reported_error(br#"{"error":{"message":"CUDA out of memory"}}"#),
            "the serve reported an error: \"CUDA out of memory\""
        );
        assert_eq!(
            reported_error(b"out of memory, not JSON"),
            "the serve reported an error: \"out of memory, not JSON\""
        );
        assert_eq!(
            reported_error(b""),
            "the serve reported an error (an `event: error` with no data)"
        );
        let huge = format!(r#"{{"message":"{}"}}"#, "m".repeat(1 << 20));
        assert!(reported_error(huge.as_bytes()).len() < 300);
    }

    #[test]
    fn quoting_bytes_reads_only_what_can_show() {
        let big = vec![b'a'; 10 << 20];
        assert_eq!(quote_bytes(&big, 3), "\"aaa…\"");
        assert_eq!(quote_bytes(b"\xff\xfeok", 10), "\"\u{fffd}\u{fffd}ok\"");
        let emoji = "\u{1f600}".repeat(50);
        assert_eq!(
            quote_bytes(emoji.as_bytes(), 2),
            format!("\"{}…\"", "\u{1f600}".repeat(2))
        );
    }

    #[test]
    fn only_choice_0_makes_the_reply_and_the_first_other_index_is_kept() {
        let bounds = ReplyBounds {
            stall: Duration::from_secs(1),
            whole: Duration::from_secs(1),
            max_events: 100,
            max_tokens: 16,
            top_logprobs: None,
        };
        let mut rec = ReplyRecord::new(1, "p", Some("(?i)paris"));
        for (at, data) in [
            &br#"{"choices":[{"index":0,"delta":{"content":"London"}}]}"#[..],
            br#"{"choices":[{"index":2,"delta":{"content":"Paris"},"finish_reason":"stop"}]}"#,
            br#"{"choices":[{"index":1,"delta":{"content":" Paris"}},{"index":0,"delta":{"content":" ok"}}]}"#,
            br#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        ]
        .iter()
        .enumerate()
        {
            record_chunk(&mut rec, data, at as u64, &bounds, &mut LogprobsSeen::default())
                .unwrap();
        }
        assert_eq!(rec.content, "London ok");
        assert_eq!(rec.finish_reason.as_deref(), Some("length"));
        assert_eq!(
            rec.unrequested_choice,
            Some(2),
            "the first seen, not the last"
        );
        let text: Vec<u32> = rec.chunks.iter().map(|c| c.content_chars).collect();
        assert_eq!(
            text,
            [6, 0, 3, 0],
            "choice 2's chunk carried none of the reply"
        );
    }

    fn logprob_chunk(token: &str, alternatives: usize) -> String {
        let top: Vec<String> = (0..alternatives)
            .map(|i| format!(r#"{{"token":"{token}{i}","logprob":-{i}.5}}"#))
            .collect();
        format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":"{token}"}},"logprobs":{{"content":[{{"token":"{token}","logprob":-0.25,"top_logprobs":[{}]}}]}},"finish_reason":null}}]}}"#,
            top.join(",")
        )
    }

    #[test]
    fn logprobs_are_recorded_only_when_asked_k_each_and_no_more_records_than_events() {
        let bounds = |top| ReplyBounds {
            stall: Duration::from_secs(1),
            whole: Duration::from_secs(1),
            max_events: 3,
            max_tokens: 16,
            top_logprobs: top,
        };
        let mut seen = LogprobsSeen::default();
        let mut rec = ReplyRecord::new(1, "p", None);
        let data = logprob_chunk(" Paris", 30);
        record_chunk(&mut rec, data.as_bytes(), 1, &bounds(None), &mut seen).unwrap();
        assert_eq!(rec.logprobs, None, "not asked: not read");
        assert_eq!(rec.content, " Paris");
        let mut rec = ReplyRecord::new(1, "p", None);
        for at in 0..3 {
            record_chunk(&mut rec, data.as_bytes(), at, &bounds(Some(5)), &mut seen).unwrap();
        }
        let lp = rec.logprobs.as_ref().unwrap();
        assert_eq!(lp.len(), 3);
        assert_eq!((lp[0].token.as_str(), lp[0].logprob), (" Paris", -0.25));
        assert_eq!(lp[0].top.len(), 5, "K of the serve's 30");
        assert_eq!(seen.dropped, 3 * 25);
        // A fourth record would pass the reply's event cap: not kept (the event itself fails
        // the reply, as it does without logprobs).
        let mut room = LogprobsSeen::default();
        record_logprobs(
            &mut rec,
            r#"{"content":[{"token":"a","logprob":-1}]}"#,
            5,
            3,
            &mut room,
        );
        assert_eq!(rec.logprobs.as_ref().unwrap().len(), 3);
        assert_eq!(room.dropped, 1);
    }

    #[test]
    fn a_reply_whose_logprobs_cannot_be_read_keeps_none_and_the_run_says_why() {
        let client = Client::new("http://127.0.0.1:1").unwrap().with_logprobs(2);
        let ask = client.logprobs.clone().unwrap();
        let mut rec = ReplyRecord::new(4, "p", None);
        let mut seen = LogprobsSeen::default();
        let good = logprob_chunk("a", 2);
        let bad = r#"{"choices":[{"delta":{"content":"b"},"logprobs":{"content":[{"token":"b","logprob":null}]}}]}"#;
        let bounds = ReplyBounds {
            stall: Duration::from_secs(1),
            whole: Duration::from_secs(1),
            max_events: 100,
            max_tokens: 16,
            top_logprobs: Some(2),
        };
        for data in [good.as_str(), bad, good.as_str()] {
            record_chunk(&mut rec, data.as_bytes(), 0, &bounds, &mut seen).unwrap();
        }
        assert_eq!(rec.content, "aba", "the text is read whatever its logprobs");
        seen.settle(&mut rec, &ask);
        assert_eq!(rec.logprobs, None);
        // A reply with text and no logprobs at all: the serve sent none.
        let mut plain = ReplyRecord::new(5, "p", None);
        let no_lp = br#"{"choices":[{"delta":{"content":"c"},"logprobs":null}]}"#;
        let mut seen = LogprobsSeen::default();
        record_chunk(&mut plain, no_lp, 0, &bounds, &mut seen).unwrap();
        seen.settle(&mut plain, &ask);
        let asked = client.logprobs_asked().unwrap();
        assert_eq!(
            (asked.top, asked.replies_without, asked.replies_unreadable),
            (2, 1, 1)
        );
        let why = asked.first_unreadable.unwrap();
        assert!(why.starts_with("reply 4: event 2: "), "{why}");
        assert!(why.contains("token record 1"), "{why}");
    }

    #[test]
    fn a_failed_replys_text_is_cut_to_its_head_and_its_size_recorded() {
        let mut rec = ReplyRecord::new(1, "p", None);
        rec.content = "é".repeat(FAILED_TEXT_KEPT); // two bytes each
        rec.reasoning = "r".into();
        cut_failed_text(&mut rec);
        assert_eq!(rec.content.len(), FAILED_TEXT_KEPT);
        assert_eq!(rec.reasoning, "r");
        assert_eq!(
            rec.text_cut,
            Some(crate::archive::record::TextCut {
                content_bytes: 2 * FAILED_TEXT_KEPT,
                reasoning_bytes: 1
            })
        );
        assert_eq!(rec.text_bytes(), 2 * FAILED_TEXT_KEPT + 1);
        let mut small = ReplyRecord::new(1, "p", None);
        small.content = "Paris".into();
        cut_failed_text(&mut small);
        assert_eq!((small.content.as_str(), small.text_cut), ("Paris", None));
    }
}
