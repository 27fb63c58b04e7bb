//! The HTTP client: readiness probes, the model list, and streamed replies timed as their bytes
//! arrive.
//!
//! One request at a time, each on a fresh connection, through hyper's connection API. Each read
//! from the socket is stamped on the monotonic clock the moment it returns, before any parsing
//! ([`crate::live::stamped`]); every SSE event carries the stamp of the read that completed it.
//!
//! Why hyper's connection API and not a pooled client: the gate polls the connection and the
//! reply's body in one loop of its own (see [`crate::live::stream_read`]). A client that runs the connection
//! in a task of its own hands every chunk across tasks, and a stall timer polled beside each
//! hand-off costs as much again: at 20,000 tokens a second that is CPU the serve needs.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1;
use hyper::{header, Method, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpStream;

use crate::archive::record::{BurstSlot, LogprobsAsked, ReplyRecord, MAX_TOP_LOGPROBS};
use crate::clock;
use crate::live::http_link::{error_chain, Link};
use crate::live::stamped::{StampedStream, Stamps};
use crate::live::stream_read::{read_stream, LogprobsSeen, ReplyBounds};
use crate::prompts::Prompt;

pub use crate::live::first_text::FirstText;
pub use crate::live::stream_read::{ERROR_BODY_KEPT, MAX_REPLY_TEXT};

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
    /// The prompt's place in the run's prompts (from 0) and the prompt, for its tools,
    /// `tool_choice` and `response_format` (issue 36): sent as given, and the place recorded
    /// with the reply when it carries any of them.
    pub asks: Option<(usize, &'a Prompt)>,
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
        Ok((Link::new(conn), sender.send_request(request), stamps))
    }

    /// GET `path` (below the serve's URL, not the API's prefix: `/props`) as JSON, within 10 s
    /// and [`MODELS_BODY_MAX`] bytes; `None` for no answer, another status or another body.
    pub async fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        let body = self
            .get_body(path, Duration::from_secs(10), MODELS_BODY_MAX)
            .await?;
        serde_json::from_slice(&body).ok()
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
        let tools_prompt = req.asks.filter(|(_, p)| p.asks_tools());
        if let (Some((_, p)), Some(fields)) = (tools_prompt, body.as_object_mut()) {
            for (key, value) in [
                ("tools", &p.tools),
                ("tool_choice", &p.tool_choice),
                ("response_format", &p.response_format),
            ] {
                if let Some(v) = value {
                    fields.insert(key.into(), v.clone());
                }
            }
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
        rec.tools_prompt = tools_prompt.map(|(at, _)| at);
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
                Ok((link, resp, stamps))
            };
            let outcome = read_stream(
                start,
                &mut rec,
                base_ns,
                &bounds,
                first_text.as_ref(),
                &mut logprobs,
            )
            .await;
            rec.end_ns = since_base(clock::now_ns());
            if let Some(ask) = &client.logprobs {
                logprobs.settle(&mut rec, &ask.tally);
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
                tools_prompt: tools_prompt.map(|(at, _)| at),
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

/// Bytes of each text channel a failed reply keeps: its text is quoted (80 characters), never
/// judged, and a run whose every reply failed after 15 MiB must not keep them all.
pub const FAILED_TEXT_KEPT: usize = 64 << 10;

/// Cut a failed reply's text to its first [`FAILED_TEXT_KEPT`] bytes a channel, recording
/// how much there was.
fn cut_failed_text(rec: &mut ReplyRecord) {
    rec.cut_text(FAILED_TEXT_KEPT);
}

/// The largest /v1/models answer read: a list of models is a few KiB.
pub const MODELS_BODY_MAX: usize = 1 << 20;

/// Aborts the task when dropped: an interrupted gate drops the reply it waits for, and the
/// stream must close with it, not run on unseen.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::stream_read::{record_chunk, LogprobsSeen, ReplyBounds};

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
        seen.settle(&mut rec, &ask.tally);
        assert_eq!(rec.logprobs, None);
        // A reply with text and no logprobs at all: the serve sent none.
        let mut plain = ReplyRecord::new(5, "p", None);
        let no_lp = br#"{"choices":[{"delta":{"content":"c"},"logprobs":null}]}"#;
        let mut seen = LogprobsSeen::default();
        record_chunk(&mut plain, no_lp, 0, &bounds, &mut seen).unwrap();
        seen.settle(&mut plain, &ask.tally);
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
