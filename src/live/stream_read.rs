//! Reading one streamed reply: the loop that polls the connection and the body together, the
//! bounds it holds the serve to (the stall, the whole reply's limit, the events, the text), and
//! each SSE event recorded into the reply with the stamp of the read that completed it.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use hyper::{header, Response};

use crate::archive::record::{
    gather_tool_call, ChunkArrival, LogprobsAsked, ReplyRecord, TokenLogprob, ToolCallFragment,
    TopLogprob, LOGPROB_TOKEN_BYTES, MAX_TOP_LOGPROBS,
};
use crate::clock;
use crate::judging::verdict::quote;
use crate::live::first_text::FirstText;
use crate::live::http_link::{error_chain, Link};
use crate::live::stamped::Stamps;
use crate::wire::logprobs as wire_logprobs;
use crate::wire::openai::{self, Chunk};
use crate::wire::sse::{FeedError, SseItem, SseParser, Unfinished};

/// The most text (answer and reasoning, bytes) one reply may have: 16 MiB. A real chunk of
/// 10 MB passes; text without end does not get the gate's memory.
pub const MAX_REPLY_TEXT: usize = 16 << 20;

/// Bytes kept of the body of an HTTP error answer, to quote it.
pub const ERROR_BODY_KEPT: usize = 4096;

/// Bytes of an `event: error`'s data read as JSON for its message; a longer one is quoted as
/// it came.
const ERROR_DATA_PARSED: usize = 64 << 10;

/// Bytes of a `finish_reason` kept: the real ones are a word.
const FINISH_REASON_KEPT: usize = 64;

/// What bounds one reply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplyBounds {
    /// The longest wait for any next bytes (`--reply-timeout`).
    pub stall: Duration,
    /// The longest the whole reply may take, from the request to its end (`--reply-limit`).
    pub whole: Duration,
    /// The most events it may have.
    pub max_events: usize,
    /// The request's max_tokens, to say what the event cap was derived from.
    pub max_tokens: u32,
    /// K, when the reply's logprobs were asked for (`--logprobs`).
    pub top_logprobs: Option<usize>,
}

/// What a reply's logprobs were like, while it streams: set into the reply and the run's tally
/// once it has ended.
#[derive(Debug, Default)]
pub(crate) struct LogprobsSeen {
    /// Why a chunk's logprobs could not be read, the first time; the reply then keeps none.
    unreadable: Option<String>,
    /// Records and alternatives not kept.
    dropped: usize,
}

impl LogprobsSeen {
    /// The reply has ended: an unreadable reply keeps no logprobs (the records after the one
    /// that could not be read would stand at the wrong place in the text), and the run's
    /// tally counts what the reply had.
    pub(crate) fn settle(self, rec: &mut ReplyRecord, tally: &Mutex<LogprobsAsked>) {
        let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
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

/// How the reply's request went out: its connection, the response's head, and the stamps of
/// the connection's reads and writes; or why it failed.
pub(crate) type Started = Result<(Link, Response<Incoming>, Stamps), String>;

/// Read one streamed reply into `rec`, each chunk stamped with the read that completed it.
/// `start` sends the request and waits for the response's head; its wait is bounded here.
///
/// The connection and the body are polled in one loop: the connection decodes a chunk from
/// what it read, the body hands it over, the loop asks for the next, and only when neither has
/// more (the socket is empty) does the task sleep, with one deadline armed: the stall's or the
/// whole reply's, whichever is first. So a chunk costs no task switch and no timer poll; a
/// wake-up, one of each. A turn takes at most [`CHUNKS_PER_TURN`] chunks, then yields to the
/// gate's other tasks, and checks the whole reply's limit, which a serve that never lets the
/// socket empty would otherwise never meet.
pub(crate) async fn read_stream(
    start: impl Future<Output = Started>,
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
    let over_limit = |what: String| over_limit(bounds, what);
    let (mut link, resp, stamps) = answered(start, bounds).await?;
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
        return Err(http_error(status.as_u16(), &mut link, &mut body, stall.min(left)).await);
    }
    let mut parser = SseParser::new();
    let mut received: u64 = 0;
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
                    return Poll::Ready(Err(over_limit(sent_so_far(rec, received))));
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
                        return Poll::Ready(Err(over_limit(sent_so_far(rec, received))));
                    }
                    let last_bytes_ns = stamp.get().max(waiting_since);
                    let quiet = Duration::from_nanos(now.saturating_sub(last_bytes_ns));
                    if quiet >= stall {
                        return Poll::Ready(Err(stalled(rec, stall)));
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
            let mut event = EventContext {
                rec: &mut *rec,
                at_ns,
                bounds,
                logprobs: &mut *logprobs,
                first_text: &mut first_text,
                content_type: content_type.as_deref(),
            };
            match parser.feed(&read, &mut |item| event.take(item)) {
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
    check_stream_end(parser.finish(), rec, content_type.as_deref())
}

/// The request sent and the response's head come, within the stall's bound (or the whole
/// reply's, when shorter).
async fn answered(start: impl Future<Output = Started>, bounds: &ReplyBounds) -> Started {
    let stall = bounds.stall;
    match tokio::time::timeout(stall.min(bounds.whole), start).await {
        Ok(started) => started,
        Err(_) if bounds.whole <= stall => {
            Err(over_limit(bounds, "the serve had not answered".to_string()))
        }
        Err(_) => Err(stalled_text(stall)),
    }
}

/// The FAIL text of a reply that outlived `--reply-limit`, with `what` it had sent by then.
fn over_limit(bounds: &ReplyBounds, what: String) -> String {
    format!(
        "the reply did not end within {} s (--reply-limit); {what}",
        bounds.whole.as_secs_f64()
    )
}

fn stalled_text(stall: Duration) -> String {
    format!("the stream stalled: no bytes for {} s", stall.as_secs_f64())
}

/// The FAIL text of a stream quiet for the stall's bound: after a finish_reason, a serve that
/// said it was done but never ended the stream.
fn stalled(rec: &ReplyRecord, stall: Duration) -> String {
    match &rec.finish_reason {
        Some(reason) => format!(
            "the serve sent its finish_reason ({}) but then neither [DONE] nor the end of the stream: no bytes for {} s",
            quote(reason, 40),
            stall.as_secs_f64()
        ),
        None => stalled_text(stall),
    }
}

/// The FAIL text of an HTTP answer other than success, quoting the head of its body.
async fn http_error(status: u16, link: &mut Link, body: &mut Incoming, within: Duration) -> String {
    let head = read_head(link, body, ERROR_BODY_KEPT, within).await;
    let shown = if head.is_empty() {
        "(no body)".to_string()
    } else {
        quote_bytes(&head, 200)
    };
    format!("HTTP {status}: {shown}")
}

/// What the serve had sent of a reply cut short by its limit: bytes, events, and a
/// finish_reason given without the [DONE] after it.
fn sent_so_far(rec: &ReplyRecord, received: u64) -> String {
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
}

/// What an SSE item is taken into: the reply, and what it is held to.
struct EventContext<'a, 'b> {
    rec: &'a mut ReplyRecord,
    /// When the read that completed the item returned (ns from the run's clock base).
    at_ns: u64,
    bounds: &'a ReplyBounds,
    logprobs: &'a mut LogprobsSeen,
    /// Told, once, when the reply's first text arrives.
    first_text: &'a mut Option<&'b FirstText>,
    content_type: Option<&'a str>,
}

impl EventContext<'_, '_> {
    /// Take one SSE item into the reply; `Err` to stop reading, at `[DONE]` or a failure.
    fn take(&mut self, item: SseItem<'_>) -> Result<(), Halt> {
        match item {
            SseItem::Event {
                kind: b"error",
                data,
            } => Err(Halt::Fail(reported_error(data))),
            SseItem::Event {
                data: b"[DONE]", ..
            } => Err(Halt::Done),
            // A typed event with no data (a ping): nothing the gate reads.
            SseItem::Event { kind, data: b"" } if !kind.is_empty() => Ok(()),
            SseItem::Event { data, .. } => {
                record_chunk(self.rec, data, self.at_ns, self.bounds, self.logprobs)
                    .map_err(Halt::Fail)?;
                if self.rec.chunks.last().is_some_and(|c| c.has_text()) {
                    if let Some(told) = self.first_text.take() {
                        told.seen();
                    }
                }
                Ok(())
            }
            SseItem::Malformed(line) if self.rec.chunks.is_empty() => Err(Halt::Fail(format!(
                "{}: {}",
                not_an_event_stream(self.content_type),
                quote_bytes(line, 120)
            ))),
            SseItem::Malformed(line) => Err(Halt::Fail(format!(
                "a line of the stream is not SSE: {}",
                quote_bytes(line, 120)
            ))),
        }
    }
}

/// Whether a stream that ended without `[DONE]` completed its reply: no event left half-read,
/// and a finish_reason given.
fn check_stream_end(
    unfinished: Option<Unfinished>,
    rec: &ReplyRecord,
    content_type: Option<&str>,
) -> Result<(), String> {
    match unfinished {
        Some(Unfinished::NotSse(head)) if rec.chunks.is_empty() => {
            return Err(format!(
                "{}: {}",
                not_an_event_stream(content_type),
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
pub(crate) fn record_chunk(
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
    // Tool calls' fragments (issue 36), gathered by their index; their text makes the event a
    // token as content does.
    let mut tool_chars = 0usize;
    for t in chunk.tool_calls() {
        let function = t.function.as_ref();
        let fragment = ToolCallFragment {
            index: t.index,
            id: t.id.as_deref(),
            name: function.and_then(|f| f.name.as_deref()),
            arguments: function.and_then(|f| f.arguments.as_deref()),
        };
        tool_chars += fragment.chars();
        gather_tool_call(&mut rec.tool_calls, fragment)?;
    }
    rec.chunks.push(ChunkArrival {
        at_ns,
        content_chars: content.chars().count() as u32,
        reasoning_chars: reasoning.chars().count() as u32,
        tokens: 0.0,
        tool_chars: u32::try_from(tool_chars).unwrap_or(u32::MAX),
    });
    if let Some(n) = chunk.usage.and_then(|u| u.completion_tokens) {
        rec.usage_completion_tokens = Some(n);
    }
    if let Some(n) = chunk.usage.and_then(|u| u.prompt_tokens) {
        rec.usage_prompt_tokens = Some(n);
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
                    token: t.token.into(),
                    logprob: t.logprob,
                    top: t
                        .top
                        .into_iter()
                        .map(|a| TopLogprob {
                            token: a.token.into(),
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A reply of at most 16 tokens and 100 events, a second to stall and a second in all.
    fn test_bounds() -> ReplyBounds {
        ReplyBounds {
            stall: Duration::from_secs(1),
            whole: Duration::from_secs(1),
            max_events: 100,
            max_tokens: 16,
            top_logprobs: None,
        }
    }

    #[test]
    fn tool_call_fragments_are_gathered_and_timed_as_tokens() {
        let bounds = test_bounds();
        let mut rec = ReplyRecord::new(1, "p", None);
        for (at, data) in [
            &br#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#[..],
            br#"{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#,
            br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}"#,
            br#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]
        .iter()
        .enumerate()
        {
            record_chunk(&mut rec, data, at as u64, &bounds, &mut LogprobsSeen::default())
                .unwrap();
        }
        assert_eq!(rec.tool_calls.len(), 1);
        let call = &rec.tool_calls[0];
        assert_eq!((call.index, call.id.as_deref()), (Some(0), Some("call_1")));
        assert_eq!(
            (call.name.as_str(), call.arguments.as_str()),
            ("get_weather", "{\"city\":\"Paris\"}")
        );
        let tool_chars: Vec<u32> = rec.chunks.iter().map(|c| c.tool_chars).collect();
        assert_eq!(tool_chars, [0, 11, 8, 8, 0]);
        assert_eq!(rec.chunks.iter().filter(|c| c.has_text()).count(), 3);
        // An index that is no whole number is a bad chunk, as a choice's is.
        let bad = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"0"}]}}]}"#;
        let e = record_chunk(&mut rec, bad, 9, &bounds, &mut LogprobsSeen::default()).unwrap_err();
        assert!(e.contains("JSON but not a chat completion chunk"), "{e}");
    }

    #[test]
    fn only_choice_0_makes_the_reply_and_the_first_other_index_is_kept() {
        let bounds = test_bounds();
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
}
