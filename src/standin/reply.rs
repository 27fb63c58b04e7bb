//! The scripted reply to a chat completion request: its tokens, its chunks, its faults, and
//! the body that sends them on time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::OwnedMutexGuard;

use super::args::{AfterDone, EndBy, StandInArgs};
use super::frames::{
    chunk_envelope, chunk_frames, chunk_json, scored_chunk_frames, sse, sse_response, usage_json,
    MODEL,
};
use super::route::Reply;
use super::scored;
use super::state::{Script, ServeCounts};
use super::trace::{request_id, traced_number, AlteredBy, ConnId, TraceLine};
use super::words::{answer_stream, changed_token, filler_text, Degenerate};
use crate::clock;
use crate::prompts::BUILT_IN;

#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    stream: bool,
    max_tokens: Option<usize>,
    stream_options: Option<StreamOptions>,
    /// Read only for the trace: the stand-in's answer is the same whatever it asks.
    temperature: Option<serde_json::Value>,
    seed: Option<serde_json::Value>,
    /// `true` asks for each token's logprob (answered unless --no-logprobs).
    #[serde(default)]
    logprobs: Option<bool>,
    /// The alternatives asked for a token, with `logprobs` (OpenAI's 0 to 20).
    #[serde(default)]
    top_logprobs: Option<usize>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Message {
    #[serde(default)]
    role: String,
    #[serde(default)]
    content: serde_json::Value,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// The stand-in's own answer to a prompt it does not know.
const OWN_ANSWER: &str = "I am the stand-in serve.";

/// The answer's own text (--answer's, else the built-in prompt's right answer, else
/// [`OWN_ANSWER`]) and the text its filler follows from: the answer's, but the prompt's for
/// [`OWN_ANSWER`], so prompts the stand-in does not know get different replies, not one
/// answer to different questions. --answer gives every prompt the same reply.
fn answer_text<'a>(args: &'a StandInArgs, prompt: &'a str) -> (&'a str, &'a str) {
    if let Some(a) = &args.answer {
        return (a, a);
    }
    match BUILT_IN.iter().find(|b| b.prompt == prompt) {
        Some(b) => (b.stand_in_answer, b.stand_in_answer),
        None => (OWN_ANSWER, prompt),
    }
}

/// The answer's tokens: its words, then filler up to `n`, made degenerate as the script says.
fn answer_tokens(args: &StandInArgs, prompt: &str, n: usize) -> Vec<String> {
    let (text, seed) = answer_text(args, prompt);
    answer_stream(text, seed, args.degenerate())
        .take(n)
        .collect()
}

/// The text of the final message when it is the assistant's (a message to continue).
fn final_assistant(messages: &[Message]) -> Option<&str> {
    messages
        .last()
        .filter(|m| m.role == "assistant")
        .and_then(|m| m.content.as_str())
}

/// How many of `tokens` spell `given` exactly, or 0 when no run of them from the first does.
fn tokens_through(tokens: &[String], given: &str) -> usize {
    let mut text = String::new();
    for (i, t) in tokens.iter().enumerate() {
        text.push_str(t);
        if text == given {
            return i + 1;
        }
        if !given.starts_with(&text) {
            break;
        }
    }
    0
}

/// `text`'s words as tokens (each but the first with the space before it), then filler up to
/// `n` (never degenerate).
fn tokens_of(text: &str, n: usize) -> Vec<String> {
    answer_stream(text, text, Degenerate::default())
        .take(n)
        .collect()
}

/// The answer words a reply changes, from 0, each with the fault that changes it: the one
/// --change-word draws for the K-th request (from 1), and with --batch-variant the last when
/// the reply starts beside another (`batched`). A word both pick is listed for each.
fn alterations(
    args: &StandInArgs,
    nth: u64,
    answer_words: usize,
    batched: bool,
) -> Vec<(usize, AlteredBy)> {
    let mut changes = Vec::new();
    // Content that is not sent has no word to change.
    if args.empty {
        return changes;
    }
    if let Some(w) = args.changed_word(nth, answer_words) {
        changes.push((w, AlteredBy::ChangeWord));
    }
    if args.batch_variant && batched && answer_words > 0 {
        changes.push((answer_words - 1, AlteredBy::BatchVariant));
    }
    changes
}

/// What one chunk of a reply carries.
#[derive(Debug, Clone, PartialEq)]
struct ScriptedChunk {
    reasoning: String,
    content: String,
    /// Tokens sent up to and including this chunk.
    tokens_so_far: usize,
}

/// A reply's chunks: `r` reasoning tokens, then the `answer` tokens, grouped `chunk_tokens` a
/// chunk without mixing the two channels.
fn reply_chunks(args: &StandInArgs, r: usize, answer: &[String]) -> Vec<ScriptedChunk> {
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

/// Spin on the CPU for `d` of wall time: scripted host work.
fn burn(d: Duration) {
    let start = std::time::Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// The most alternatives a token is scored with: OpenAI's API takes `top_logprobs` 0 to 20.
const MOST_TOP_LOGPROBS: usize = 20;

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
    /// Wait, then send a chunk's bytes that carry this many tokens (the route evidence counts
    /// them).
    Token(Duration, Bytes, usize),
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

/// A reply under way, and with `--serial` the turn it holds. Both live as long as the reply's
/// body: the route evidence counts it busy, and the next request waits, until the body ends
/// or its connection goes.
struct Serving {
    reply: Reply,
    /// Before `_turn`, so dropped first: the next --serial reply, let in when the turn goes,
    /// must not count this one as under way (--batch-variant would call it batched).
    under_way: UnderWay,
    _turn: Option<OwnedMutexGuard<()>>,
    /// What /metrics reports: the tokens this reply streams are counted.
    counts: Arc<ServeCounts>,
    /// `--end-after-replies`: how the process ends once this reply's body has ended.
    end_after: Option<EndBy>,
}

impl Drop for Serving {
    /// The body has ended (or its connection gone): with `--end-after-replies`, the process
    /// ends a moment later, once the last bytes have left.
    fn drop(&mut self) {
        let Some(end_by) = self.end_after else { return };
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let _ = crate::console::err_line(&format!("stand-in: ending as scripted ({end_by:?})"));
            match end_by {
                EndBy::Exit => std::process::exit(0),
                EndBy::Segv => {
                    use nix::sys::signal::{raise, signal, SigHandler, Signal};
                    // Rust's own SIGSEGV handler is for stack overflows: the default action
                    // is the crash a broken serve has.
                    // SAFETY: SIG_DFL installs no handler code.
                    let _ = unsafe { signal(Signal::SIGSEGV, SigHandler::SigDfl) };
                    let _ = raise(Signal::SIGSEGV);
                    std::process::abort();
                }
            }
        });
    }
}

impl Serving {
    fn tokens(&self, n: usize) {
        self.reply.tokens(n);
        self.counts.tokens.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// One reply counted among those under way, for as long as this lives.
struct UnderWay(Arc<AtomicUsize>);

impl UnderWay {
    /// Count one more reply in `count`.
    fn enter(count: &Arc<AtomicUsize>) -> UnderWay {
        count.fetch_add(1, Ordering::Relaxed);
        UnderWay(Arc::clone(count))
    }

    /// No other reply is under way.
    fn alone(&self) -> bool {
        self.0.load(Ordering::Relaxed) <= 1
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Wait `wait`, under tokio's 1 ms timer. Alone, the stand-in spins, which keeps a 20,000
/// tok/s stream's gaps to the microsecond and costs only the stand-in. Beside other replies
/// it yields to them between looks at the clock instead: the one thread serves every
/// connection, and hyper polls a body again as soon as it gives a chunk, so a spinning stream
/// sent its whole reply before any other got a turn (four streams at 0.2 ms gaps went one
/// after another, at a quarter of the rate asked). Each stream's gap is kept as its own.
///
/// It yields once before anything else, alone or not: a stream spinning alone would keep the
/// requests of a burst from being accepted at all, and so stay alone to its end.
async fn short_wait(wait: Duration, under_way: &UnderWay) {
    let until = std::time::Instant::now() + wait;
    tokio::task::yield_now().await;
    while std::time::Instant::now() < until {
        if under_way.alone() {
            std::hint::spin_loop();
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// The body of `steps`, each written after its wait (and, with `trickle`, a byte at a time).
/// `reply` lives as long as the body.
fn body_of(steps: Steps, work: Duration, trickle: Option<Duration>, reply: Serving) -> Body {
    let stream =
        futures_util::stream::unfold((steps, reply), move |(mut steps, reply)| async move {
            let (wait, item, tokens) = match steps.next()? {
                Step::Send(wait, bytes) => (wait, Ok(bytes), 0),
                Step::Token(wait, bytes, tokens) => (wait, Ok(bytes), tokens),
                Step::Die(wait) => (
                    wait,
                    Err(std::io::Error::other("the stand-in drops the connection")),
                    0,
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
                // tokio's timer counts whole milliseconds.
                short_wait(wait, &reply.under_way).await;
            }
            if !work.is_zero() {
                burn(work);
            }
            if tokens > 0 {
                reply.tokens(tokens);
            }
            let stop = item.is_err();
            // After an error the stream ends: hyper aborts the connection mid-body.
            let rest: Steps = if stop {
                Box::new(std::iter::empty())
            } else {
                steps
            };
            Some((item, (rest, reply)))
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

pub(crate) async fn chat(
    State(script): State<Arc<Script>>,
    ConnectInfo(ConnId(conn)): ConnectInfo<ConnId>,
    headers: HeaderMap,
    Json(req): Json<ChatRequest>,
) -> Response {
    let (args, nth) = script.next_request();
    let scale = args.gap_scale(nth);
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
            conn,
            request_id: request_id(&headers),
            prompt: prompt.clone(),
            temperature: req.temperature.as_ref().map(traced_number),
            seed: req.seed.as_ref().map(traced_number),
        });
    }
    // With --serial, wait for the reply under way to end. A serve without batching only
    // starts a request when its slot is free: the first token, and the time the route
    // evidence counts busy, run from then, not from the arrival.
    let counts = Arc::clone(&script.counts);
    if let Some(extra) = script.args.metrics_extra_tokens {
        counts.tokens.fetch_add(extra, Ordering::Relaxed);
    }
    let turn = match &script.serial {
        Some(slot) => {
            counts.deferred.fetch_add(1, Ordering::Relaxed);
            let turn = Arc::clone(slot).lock_owned().await;
            counts.deferred.fetch_sub(1, Ordering::Relaxed);
            Some(turn)
        }
        None => None,
    };
    let started = tokio::time::Instant::now();
    let reply = Serving {
        reply: script.route.reply(started.into_std()),
        _turn: turn,
        counts,
        under_way: UnderWay::enter(&script.under_way),
        end_after: (script.args.end_after_replies == Some(nth)).then_some(script.args.end_by),
    };
    let trickle = args.trickle_ms.map(Duration::from_millis);
    if let Some(code) = args.http_status {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({"error": {"message": "scripted error from the stand-in", "code": code}});
        if args.endless_body {
            let mut text = body.to_string().into_bytes();
            text.resize(ENDLESS_PIECE, b' ');
            let steps = forever(Duration::ZERO, Bytes::from(text));
            let body = body_of(Box::new(steps), Duration::ZERO, trickle, reply);
            return (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        return (status, Json(body)).into_response();
    }
    let max_tokens = req.max_tokens.unwrap_or(usize::MAX);
    // A final assistant message that is the start of the stand-in's answer, token for token:
    // it goes on from there, as llama-server continues one (unless --no-continue).
    let skip = match final_assistant(&req.messages) {
        Some(given) if !args.no_continue => {
            tokens_through(&answer_tokens(args, &prompt, args.tokens), given)
        }
        _ => 0,
    };
    let n = (args.tokens - skip).min(max_tokens);
    let natural = if n == max_tokens { "length" } else { "stop" };
    let finish = args.finish_reason.as_deref().unwrap_or(natural);
    let r = if skip > 0 {
        0
    } else {
        args.reasoning_tokens.min(n)
    };
    let mut answer = answer_tokens(args, &prompt, skip + n - r).split_off(skip);
    // Read now, after the --serial turn is taken: a serial stand-in starts none beside another.
    let batched = !reply.under_way.alone();
    // Each changed word's clean form, so a word both faults pick is changed once (twice
    // reversed would be the clean word again) and both lines name its clean form.
    let mut clean: Vec<(usize, String)> = Vec::new();
    for (i, why) in alterations(args, nth, answer.len(), batched) {
        let from = match clean.iter().find(|(w, _)| *w == i) {
            Some((_, from)) => from.clone(),
            None => {
                let from = std::mem::take(&mut answer[i]);
                answer[i] = changed_token(&from);
                clean.push((i, from.clone()));
                from
            }
        };
        if let Some(trace) = &script.trace {
            trace.write(&TraceLine::Altered {
                conn,
                nth,
                word: i + 1,
                from: from.trim().to_string(),
                to: answer[i].trim().to_string(),
                why,
            });
        }
    }
    // --other-choice's text, a chunk of it beside each of choice 0's answer chunks.
    let other: Vec<String> = match &args.other_choice {
        Some(text) => tokens_of(text, answer.len())
            .chunks(args.chunk_tokens as usize)
            .map(<[String]>::concat)
            .collect(),
        None => Vec::new(),
    };
    // --logprob-flip: the runner-up in place of the usual token, which its logprobs still name.
    let usual = answer.clone();
    for &w in &args.logprob_flip {
        // Positions count from the answer's start; a continuation starts at `skip`.
        if let Some(i) = w.checked_sub(skip).filter(|&i| i < answer.len()) {
            answer[i] = scored::runner_up(&usual[i]);
        }
    }
    // K when the request asks for logprobs and the script answers them (empty content has no
    // tokens to score).
    let top_k = match (req.logprobs, args.no_logprobs || args.empty) {
        (Some(true), false) => Some(req.top_logprobs.unwrap_or(0).min(MOST_TOP_LOGPROBS)),
        _ => None,
    };
    let mut chunks = reply_chunks(args, r, &answer);
    // --echo-prefix: the continued message sent back before the continuation, in the first
    // chunk's text (its logprobs stay the new tokens'), as llama-server sends it.
    if let (true, Some(given), Some(first)) = (
        args.echo_prefix && skip > 0,
        final_assistant(&req.messages),
        chunks.first_mut(),
    ) {
        first.content.insert_str(0, given);
    }
    if let Some(extra) = args.big_chunk {
        // The filler's words past the reply's own, so the chunk is big, not a loop.
        let pad = filler_text(answer_text(args, &prompt).1, skip + answer.len(), extra);
        for chunk in chunks.iter_mut().take(args.big_chunks) {
            chunk.content.push_str(&pad);
        }
    }
    let ttft = Duration::from_millis(args.ttft_ms);
    if !req.stream || args.not_sse {
        tokio::time::sleep_until(started + ttft).await;
        // The whole answer goes at once; `reply`, and its turn, end when this returns.
        reply.tokens(n);
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
    let gap =
        |i: usize| Duration::from_secs_f64(args.gaps_ms[i % args.gaps_ms.len()] * scale / 1e3);
    if args.error_event_after == Some(0) || args.error_chunk_after == Some(0) {
        // After 0 tokens: in place of the first, a stream of nothing but the error.
        let wait = ttft.saturating_sub(started.elapsed());
        return stream_answer(steps, error_frame(args, wait), args, trickle, reply);
    }
    for (i, c) in chunks.iter().enumerate() {
        // The first token waits for ttft from the request's start, not from this point.
        let wait = if i == 0 {
            ttft.saturating_sub(started.elapsed())
        } else {
            gap(i - 1)
        };
        let mut delta = serde_json::Map::new();
        if !c.reasoning.is_empty() {
            delta.insert("reasoning_content".into(), json!(c.reasoning));
        } else {
            delta.insert("content".into(), json!(c.content));
        }
        let before = if i == 0 {
            0
        } else {
            chunks[i - 1].tokens_so_far
        };
        // Answer chunks follow the reasoning's, one for each group of chunk_tokens.
        let answer_chunk = i.checked_sub(r.div_ceil(args.chunk_tokens as usize));
        let beside = answer_chunk
            .and_then(|k| other.get(k))
            .map(|text| json!({"content": text}));
        let ct = args.chunk_tokens as usize;
        let logprobs = answer_chunk.zip(top_k).map(|(k, top)| {
            let records: Vec<serde_json::Value> = (k * ct..((k + 1) * ct).min(answer.len()))
                .map(|w| {
                    scored::token_record(&answer[w], &usual[w], skip + w, top, args.flip_margin)
                })
                .collect();
            json!({"content": records})
        });
        let (bytes, own) = scored_chunk_frames(args, delta.into(), None, beside, logprobs);
        steps.push(Step::Token(wait, bytes, c.tokens_so_far - before));
        if let Some(own) = own {
            steps.push(Step::Send(Duration::ZERO, own));
        }
        // "After N tokens": right after the chunk that brings the count to N or past it.
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
            return stream_answer(
                steps,
                error_frame(args, Duration::ZERO),
                args,
                trickle,
                reply,
            );
        }
        if reaches(args.endless_line_after) {
            let pieces = forever(Duration::ZERO, Bytes::from(vec![b'x'; ENDLESS_PIECE]));
            let line = std::iter::once(Step::Send(
                Duration::ZERO,
                Bytes::from_static(ENDLESS_LINE_START),
            ));
            let steps: Steps = Box::new(steps.into_iter().chain(line).chain(pieces));
            return sse_response(body_of(steps, Duration::ZERO, trickle, reply));
        }
    }
    if args.endless {
        // Past the scripted tokens, the answer's stream goes on for ever, as from a serve
        // that ignores max_tokens.
        let gaps = args.gaps_ms.clone();
        let (text, seed) = answer_text(args, &prompt);
        let words = answer_stream(text, seed, args.degenerate()).skip(skip + answer.len());
        let more = (chunks.len()..).zip(words).map(move |(i, word)| {
            let gap = Duration::from_secs_f64(gaps[i % gaps.len()] / 1e3);
            Step::Token(gap, sse(chunk_json(json!({"content": word}), None)), 1)
        });
        let steps: Steps = Box::new(steps.into_iter().chain(more));
        return sse_response(body_of(
            steps,
            Duration::from_millis(args.work_ms),
            trickle,
            reply,
        ));
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
    let beside = args.other_choice.as_ref().map(|_| json!({}));
    let (last, own) = chunk_frames(args, json!({}), Some(finish), beside);
    steps.push(Step::Send(Duration::ZERO, last));
    if let Some(own) = own {
        steps.push(Step::Send(Duration::ZERO, own));
    }
    if include_usage {
        let mut usage = chunk_envelope(json!([]));
        usage["usage"] = usage_json(usage_tokens);
        steps.push(Step::Send(Duration::ZERO, sse(usage)));
    }
    stream_answer(steps, None, args, trickle, reply)
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

/// `--held-back`: the whole answer's time is spent before its first event, and the rest follow
/// 0.1 ms apart (in a few reads, more than one), as from a serve that makes its tokens at their
/// pace and does not flush.
fn hold_back(steps: &mut [Step]) {
    fn wait_of(s: &mut Step) -> Option<&mut Duration> {
        match s {
            Step::Send(w, _) | Step::Token(w, _, _) | Step::Die(w) => Some(w),
            Step::Crash | Step::Hang => None,
        }
    }
    let mut total = Duration::ZERO;
    for s in steps.iter_mut() {
        if let Some(w) = wait_of(s) {
            total += std::mem::replace(w, Duration::from_micros(100));
        }
    }
    if let Some(w) = steps.iter_mut().find_map(wait_of) {
        *w = total;
    }
}

/// The streamed answer: `steps`, then `last` (a scripted error frame), then [DONE], and what
/// --after-done asks for after it.
fn stream_answer(
    mut steps: Vec<Step>,
    last: Option<Step>,
    args: &StandInArgs,
    trickle: Option<Duration>,
    reply: Serving,
) -> Response {
    steps.extend(last);
    if args.held_back {
        hold_back(&mut steps);
    }
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
    sse_response(body_of(
        steps,
        Duration::from_millis(args.work_ms),
        trickle,
        reply,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standin::args::parse as args;

    #[test]
    fn a_final_assistant_message_is_continued_only_where_it_spells_the_answers_start() {
        let t: Vec<String> = ["Paris", ".", " ok"].map(String::from).to_vec();
        assert_eq!(tokens_through(&t, "Paris"), 1);
        assert_eq!(tokens_through(&t, "Paris."), 2);
        assert_eq!(tokens_through(&t, "Paris. ok"), 3);
        // Not on a token's edge, or not the answer's start: begun anew.
        assert_eq!(tokens_through(&t, "Par"), 0);
        assert_eq!(tokens_through(&t, "Lyon"), 0);
        assert_eq!(tokens_through(&t, ""), 0);
    }

    #[test]
    fn built_in_prompts_get_their_right_answer_then_filler() {
        let a = args(&[]);
        assert_eq!(
            answer_tokens(&a, BUILT_IN[0].prompt, 4).concat(),
            "Paris. wool ocean star"
        );
        assert_eq!(
            answer_tokens(&args(&["--answer", "London is it"]), "x", 2).concat(),
            "London is"
        );
    }

    #[test]
    fn degenerate_answers_follow_the_script_and_a_fault_request_spares_the_others() {
        let p = BUILT_IN[0].prompt;
        let clean = answer_tokens(&args(&[]), p, 10);
        let looped = answer_tokens(&args(&["--loop-period", "2"]), p, 10);
        assert_eq!(looped[..3], clean[..3]);
        for i in 3..10 {
            assert_eq!(looped[i], clean[1 + (i - 1) % 2], "{looped:?}");
        }
        let stutter = answer_tokens(&args(&["--stutter", "2"]), p, 5);
        assert_eq!(
            stutter,
            ["Paris.", " Paris.", &clean[1], &clean[1], &clean[2]]
        );
        let garbled = answer_tokens(&args(&["--not-text", "1"]), p, 3);
        assert_eq!(garbled, ["Paris.", "\u{fffd}\u{fffd}", "\u{1}\u{7}"]);
        // One answer for every prompt: --answer's words and the filler that follows from them.
        let one = args(&["--answer", "Paris 4 cold"]);
        let replies: Vec<Vec<String>> = BUILT_IN
            .iter()
            .map(|b| answer_tokens(&one, b.prompt, 32))
            .collect();
        assert!(replies.iter().all(|r| *r == replies[0]), "{replies:?}");
        // The stand-in's own answer to prompts it does not know: its filler follows the prompt.
        let (hi, bye) = (
            answer_tokens(&args(&[]), "hi", 32),
            answer_tokens(&args(&[]), "bye", 32),
        );
        assert_eq!(hi[..5].concat(), "I am the stand-in serve.");
        assert_eq!(hi[..5], bye[..5]);
        let same = (5..32).filter(|i| hi[*i] == bye[*i]).count();
        assert!(same < 8, "{hi:?}\n{bye:?}");
        // The requests --fault-request does not pick get the clean reply.
        let a = args(&["--loop-period", "2", "--fault-request", "2"]);
        assert_eq!(answer_tokens(&a.without_faults(), p, 10), clean);
    }

    #[test]
    fn alterations_name_the_drawn_word_and_in_a_batch_the_last() {
        let a = args(&["--change-word", "1", "--seed", "5"]);
        let w = a.changed_word(3, 6).unwrap();
        assert_eq!(
            alterations(&a, 3, 6, false),
            vec![(w, AlteredBy::ChangeWord)]
        );
        assert_eq!(alterations(&a, 3, 0, true), vec![], "no words");
        let b = args(&["--batch-variant"]);
        assert_eq!(alterations(&b, 3, 6, false), vec![], "alone: clean");
        assert_eq!(
            alterations(&b, 3, 6, true),
            vec![(5, AlteredBy::BatchVariant)]
        );
        assert_eq!(alterations(&b, 3, 0, true), vec![]);
        let both = args(&["--change-word", "1", "--seed", "5", "--batch-variant"]);
        assert_eq!(
            alterations(&both, 3, 6, true),
            vec![(w, AlteredBy::ChangeWord), (5, AlteredBy::BatchVariant)]
        );
        // --empty sends no content: no word to change.
        let empty = args(&["--change-word", "1", "--batch-variant", "--empty"]);
        assert_eq!(alterations(&empty, 3, 6, true), vec![]);
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
        let c = reply_chunks(&a, 4, &answer_tokens(&a, "x", 6));
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
}
