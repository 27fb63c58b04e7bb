//! The HTTP client: readiness probes, the model list, and streamed replies timed as their bytes
//! arrive.
//!
//! One request at a time. Each read from the socket is stamped on the monotonic clock the
//! moment it returns, before any parsing; every SSE event it completes carries that stamp.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::clock;
use crate::openai::Chunk;
use crate::record::{ChunkArrival, ReplyRecord};
use crate::sse::{SseItem, SseParser};
use crate::verdict::quote;

/// What a readiness probe saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// An HTTP answer with this status.
    Status(u16),
    /// No HTTP answer (connection refused, reset, timed out).
    Unreachable,
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
}

/// A client for one serve.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
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
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .http1_only()
            .build()
            .context("failed to set up the HTTP client")?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_string(),
        })
    }

    /// GET `path` once, with a short timeout.
    pub async fn probe(&self, path: &str) -> Probe {
        let req = self
            .http
            .get(format!("{}{path}", self.base))
            .timeout(Duration::from_secs(2));
        match req.send().await {
            Ok(resp) => Probe::Status(resp.status().as_u16()),
            Err(_) => Probe::Unreachable,
        }
    }

    /// The first model id from /v1/models, if the serve lists one.
    pub async fn first_model(&self) -> Option<String> {
        let resp = self
            .http
            .get(format!("{}/v1/models", self.base))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .ok()?;
        let body: serde_json::Value = serde_json::from_slice(&resp.bytes().await.ok()?).ok()?;
        body.get("data")?
            .get(0)?
            .get("id")?
            .as_str()
            .map(str::to_string)
    }

    /// Stream one reply. Never fails: what went wrong is recorded in the reply's `error`, with
    /// everything that arrived before it. `base_ns` is the run's clock base; `stall` bounds the
    /// wait for any next bytes.
    pub async fn stream_reply(
        &self,
        req: &ReplyRequest<'_>,
        base_ns: u64,
        stall: Duration,
    ) -> ReplyRecord {
        let mut body = json!({
            "model": req.model,
            "messages": [{"role": "user", "content": req.prompt}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": 0,
            "max_tokens": req.max_tokens,
        });
        if let (Some(extra), Some(fields)) = (req.extra_body, body.as_object_mut()) {
            fields.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let since_base = move |ns: u64| ns.saturating_sub(base_ns);
        let mut rec = ReplyRecord::new(req.index, req.prompt, req.expect);
        let request = self
            .http
            .post(format!("{}/v1/chat/completions", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body.to_string());
        // The stream is read in a task of its own. hyper hands each HTTP chunk from its
        // connection task to the body's reader; were the reader the gate's whole future, every
        // chunk would poll it all again (signals, the sampler's timer, the serve's watch) and, as
        // the runtime's `block_on` future, cost a trip to the kernel for each hand-off. In a task
        // of its own, the hand-off stays in the runtime's queue.
        let mut reader = AbortOnDrop(tokio::spawn(async move {
            rec.sent_ns = since_base(clock::now_ns());
            let outcome = read_stream(request, &mut rec, base_ns, stall).await;
            rec.end_ns = since_base(clock::now_ns());
            if let Err(e) = outcome {
                rec.error = Some(e);
            }
            rec
        }));
        match (&mut reader.0).await {
            Ok(rec) => rec,
            Err(e) => ReplyRecord {
                error: Some(format!("the reply's reader failed: {e}")),
                ..ReplyRecord::new(req.index, req.prompt, req.expect)
            },
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

/// Read one streamed reply into `rec`, stamping each read as it returns.
async fn read_stream(
    request: reqwest::RequestBuilder,
    rec: &mut ReplyRecord,
    base_ns: u64,
    stall: Duration,
) -> Result<(), String> {
    let stall_msg = || format!("the stream stalled: no bytes for {} s", stall.as_secs_f64());
    let mut resp = match tokio::time::timeout(stall, request.send()).await {
        Err(_) => return Err(stall_msg()),
        Ok(Err(e)) => return Err(format!("the request failed: {}", error_chain(&e))),
        Ok(Ok(resp)) => resp,
    };
    let status = resp.status();
    if !status.is_success() {
        let head = match tokio::time::timeout(stall, resp.bytes()).await {
            Ok(Ok(b)) => quote(&String::from_utf8_lossy(&b), 200),
            _ => "(no body)".to_string(),
        };
        return Err(format!("HTTP {}: {head}", status.as_u16()));
    }
    let mut parser = SseParser::new();
    let mut done = false;
    // One deadline for the whole stream, re-armed only when it fires early: a timer per
    // read would cost more than the read at 20,000 tokens a second. The stamp each read takes
    // anyway tells when bytes last came, so the deadline costs no clock reading of its own.
    let mut last_bytes_ns = clock::now_ns();
    let deadline = tokio::time::sleep(stall);
    tokio::pin!(deadline);
    loop {
        let read = tokio::select! {
            biased;
            r = resp.chunk() => r,
            () = &mut deadline => {
                let quiet = Duration::from_nanos(clock::now_ns().saturating_sub(last_bytes_ns));
                if quiet >= stall {
                    return Err(stall_msg());
                }
                deadline.as_mut().reset(tokio::time::Instant::now() + (stall - quiet));
                continue;
            }
        };
        let read = match read {
            Err(e) => return Err(format!("the stream broke: {}", error_chain(&e))),
            Ok(None) => break,
            Ok(Some(bytes)) => bytes,
        };
        last_bytes_ns = clock::now_ns();
        let at_ns = last_bytes_ns.saturating_sub(base_ns);
        parser.feed(&read, &mut |item| match item {
            SseItem::Data(b"[DONE]") => {
                done = true;
                Ok(())
            }
            SseItem::Data(data) => record_chunk(rec, data, at_ns),
            SseItem::Malformed(line) => Err(format!(
                "a line of the stream is not SSE: {}",
                quote(&String::from_utf8_lossy(line), 120)
            )),
        })?;
    }
    if let Some(rest) = parser.finish() {
        return Err(format!(
            "the stream ended mid-event: {}",
            quote(&String::from_utf8_lossy(&rest), 120)
        ));
    }
    if !done && rec.finish_reason.is_none() {
        return Err("the stream ended without a finish_reason or [DONE]".to_string());
    }
    Ok(())
}

/// Add one parsed data event to the reply.
fn record_chunk(rec: &mut ReplyRecord, data: &[u8], at_ns: u64) -> Result<(), String> {
    let chunk = Chunk::parse(data).map_err(|e| {
        format!(
            "a chunk is not JSON ({e}): {}",
            quote(&String::from_utf8_lossy(data), 120)
        )
    })?;
    let (content, reasoning) = (chunk.content(), chunk.reasoning());
    rec.content.push_str(content);
    rec.reasoning.push_str(reasoning);
    rec.chunks.push(ChunkArrival {
        at_ns,
        content_chars: content.chars().count() as u32,
        reasoning_chars: reasoning.chars().count() as u32,
        tokens: 0.0,
    });
    if let Some(reason) = chunk.finish_reason() {
        rec.finish_reason = Some(reason.to_string());
    }
    if let Some(n) = chunk.usage.and_then(|u| u.completion_tokens) {
        rec.usage_completion_tokens = Some(n);
    }
    if let Some(n) = chunk.cached_prompt_tokens() {
        rec.cached_prompt_tokens = Some(n);
    }
    if chunk.timings.is_some() {
        rec.server_timings = chunk.timings;
    }
    Ok(())
}

/// An error and its causes on one line: reqwest's top-level message alone says little.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}
