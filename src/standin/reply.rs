//! The scripted reply to a chat completion request: its tokens, its chunks, its faults, and
//! the steps of its body, which `body.rs` sends on time.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::args::{AfterDone, StandInArgs};
use super::body::{body_of, forever, hold_back, Serving, Step, Steps, UnderWay};
use super::context::{self, Taken};
use super::footprint::InFlight;
use super::frames::{
    chunk_envelope, chunk_frames, chunk_json, scored_chunk_frames, sse, sse_response, usage_json,
    MODEL,
};
use super::scored;
use super::state::Script;
use super::tools::{self, Asked, OrderedJson, ToolReply};
use super::trace::{request_id, traced_number, AlteredBy, ConnId, Trace, TraceLine};
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
    /// The functions it offers, which it lets the reply call, and the content it asks for:
    /// read leniently by `tools.rs`.
    tools: Option<OrderedJson>,
    tool_choice: Option<OrderedJson>,
    response_format: Option<OrderedJson>,
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

/// The answer's own text (--answer's, else the built-in prompt's right answer, else a depth
/// prompt's, else [`OWN_ANSWER`]) and the text its filler follows from: the answer's, but the
/// prompt's for [`OWN_ANSWER`], so prompts the stand-in does not know get different replies,
/// not one answer to different questions. --answer gives every prompt the same reply.
fn answer_text<'a>(args: &'a StandInArgs, prompt: &'a str) -> (Cow<'a, str>, Cow<'a, str>) {
    if let Some(a) = &args.answer {
        return (a.into(), a.into());
    }
    if let Some(b) = BUILT_IN.iter().find(|b| b.prompt == prompt) {
        return (b.stand_in_answer.into(), b.stand_in_answer.into());
    }
    match context::depth_answer(&args.context, prompt) {
        Some(depth) => (depth.clone().into(), depth.into()),
        None => (OWN_ANSWER.into(), prompt.into()),
    }
}

/// The answer's tokens: its words, then filler up to `n`, made degenerate as the script says.
fn answer_tokens(args: &StandInArgs, prompt: &str, n: usize) -> Vec<String> {
    let (text, seed) = answer_text(args, prompt);
    answer_stream(&text, &seed, args.degenerate())
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
    /// A tool call's delta, sent in place of the content.
    tool: Option<serde_json::Value>,
    /// Tokens sent up to and including this chunk.
    tokens_so_far: usize,
}

/// A reply's chunks: `r` reasoning tokens, then the `answer` tokens, grouped `chunk_tokens` a
/// chunk without mixing the two channels; or with tool `deltas`, one a token, a chunk each.
fn reply_chunks(
    args: &StandInArgs,
    r: usize,
    answer: &[String],
    deltas: &[serde_json::Value],
) -> Vec<ScriptedChunk> {
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
            tool: None,
            tokens_so_far: sent,
        });
    }
    for (text, delta) in answer.iter().zip(deltas) {
        sent += 1;
        chunks.push(ScriptedChunk {
            reasoning: String::new(),
            content: text.clone(),
            tool: Some(delta.clone()),
            tokens_so_far: sent,
        });
    }
    if !deltas.is_empty() {
        return chunks;
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
            tool: None,
            tokens_so_far: sent,
        });
    }
    chunks
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

/// POST /v1/chat/completions: the reply the script gives this request (its faults only when
/// `--fault-request` picks it), sent on time.
pub(crate) async fn chat(
    State(script): State<Arc<Script>>,
    ConnectInfo(ConnId(conn)): ConnectInfo<ConnId>,
    headers: HeaderMap,
    Json(req): Json<ChatRequest>,
) -> Response {
    let (args, nth) = script.next_request();
    // In flight from its arrival: whether it comes after idle is read before anything waits.
    let (in_flight, later) = script.footprint.arrive(nth);
    let scale = args.gap_scale(nth);
    let prompt = last_user_prompt(&req.messages);
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
    // Against the context: a prompt past it is refused (or crashed on) before a reply starts.
    let taken = match context::take(&args.context, &user_texts(&req.messages), prompt) {
        Ok(taken) => taken,
        Err(refused) => return refused.into_response(),
    };
    let (reply, started) = start_reply(&script, nth, in_flight).await;
    let trickle = args.trickle_ms.map(Duration::from_millis);
    if let Some(code) = args.http_status {
        return scripted_status(args, code, trickle, reply);
    }
    let mut tokens = reply_tokens(args, &req, &taken);
    // Read now, after the --serial turn is taken: a serial stand-in starts none beside another.
    let batched = !reply.under_way.alone();
    let trace = script.trace.as_deref();
    alter_words(args, &mut tokens.answer, nth, batched, trace, conn);
    let asked = Asked::read(
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.response_format.as_ref(),
    );
    let text = tokens.answer.concat();
    let tooled = (!taken.garbled)
        .then(|| tools::reply(&args.tools, &asked, &taken.prompt, &text, nth))
        .flatten();
    let planned = plan_chunks(args, &req, &taken.prompt, tokens, tooled);
    // A cold first reply, or one after idle, is later by the footprint's delay; every reply by
    // its prompt's prefill.
    let ttft =
        Duration::from_millis(args.ttft_ms) + later + context::prefill(&args.context, taken.words);
    if !req.stream || args.not_sse {
        return whole_answer(&planned, started + ttft, reply).await;
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage) && !args.no_usage;
    let timing = Timing {
        started,
        ttft,
        scale,
        trickle,
    };
    streamed_answer(args, &taken.prompt, &planned, include_usage, &timing, reply)
}

/// The text of every user message, in order: the prompt the context counts.
fn user_texts(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .filter(|m| m.role == "user")
        .filter_map(|m| m.content.as_str())
        .collect()
}

/// The text of the last user message: what the reply answers.
fn last_user_prompt(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| m.content.as_str())
        .unwrap_or("")
        .to_string()
}

/// The reply counted under way, and the time it started. With --serial, first wait for the
/// reply under way to end: a serve without batching only starts a request when its slot is
/// free, so the first token, and the time the route evidence counts busy, run from then, not
/// from the arrival. The reply holds the request `in_flight` until it ends.
async fn start_reply(
    script: &Script,
    nth: u64,
    in_flight: InFlight,
) -> (Serving, tokio::time::Instant) {
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
        in_flight,
    };
    (reply, started)
}

/// `--http-status`: the scripted error status with its JSON body; with `--endless-body`, that
/// body padded and sent over and over without end.
fn scripted_status(
    args: &StandInArgs,
    code: u16,
    trickle: Option<Duration>,
    reply: Serving,
) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": "scripted error from the stand-in", "code": code}});
    if args.endless_body {
        let mut text = body.to_string().into_bytes();
        text.resize(ENDLESS_PIECE, b' ');
        let steps = forever(Duration::ZERO, Bytes::from(text));
        let body = body_of(Box::new(steps), Duration::ZERO, trickle, reply);
        return (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    }
    (status, Json(body)).into_response()
}

/// How many tokens a reply makes, and its answer's.
struct ReplyTokens<'a> {
    /// The answer's tokens a continued assistant message already holds (0: not a continuation).
    skip: usize,
    /// The tokens the reply makes, reasoning included.
    n: usize,
    /// Its reasoning tokens, before the answer's.
    r: usize,
    /// Its finish_reason.
    finish: &'a str,
    /// The answer's tokens, as sent.
    answer: Vec<String>,
    /// The prompt's tokens, as the usage says them.
    prompt: u64,
}

/// The reply's tokens, as the script and the request say, before any word is changed: to the
/// prompt as `taken`, garbage to max_tokens when it is garbled.
fn reply_tokens<'a>(args: &'a StandInArgs, req: &ChatRequest, taken: &Taken) -> ReplyTokens<'a> {
    let prompt_tokens = context::prompt_tokens(&args.context, taken.words);
    if taken.garbled {
        // Broken kernels stream garbage until a limit stops them: the request's, else the
        // script's, and the stand-in's own.
        let n = req
            .max_tokens
            .unwrap_or(args.tokens)
            .min(context::MOST_GARBAGE_TOKENS);
        return ReplyTokens {
            skip: 0,
            n,
            r: 0,
            finish: args.finish_reason.as_deref().unwrap_or("length"),
            answer: context::garbage(n),
            prompt: prompt_tokens,
        };
    }
    let prompt = taken.prompt.as_str();
    let max_tokens = req.max_tokens.unwrap_or(usize::MAX);
    // A final assistant message that is the start of the stand-in's answer, token for token:
    // it goes on from there, as llama-server continues one (unless --no-continue).
    let skip = match final_assistant(&req.messages) {
        Some(given) if !args.no_continue => {
            tokens_through(&answer_tokens(args, prompt, args.tokens), given)
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
    let answer = answer_tokens(args, prompt, skip + n - r).split_off(skip);
    ReplyTokens {
        skip,
        n,
        r,
        finish,
        answer,
        prompt: prompt_tokens,
    }
}

/// Change the words of `answer` that --change-word and --batch-variant pick for the `nth`
/// request's reply, each change an `altered` line in the trace.
fn alter_words(
    args: &StandInArgs,
    answer: &mut [String],
    nth: u64,
    batched: bool,
    trace: Option<&Trace>,
    conn: u64,
) {
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
        if let Some(trace) = trace {
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
}

/// What a reply says, planned before its first byte: its tokens and the chunks they go in.
struct Planned<'a> {
    /// Its tokens; the answer's after --logprob-flip.
    tokens: ReplyTokens<'a>,
    /// The answer's tokens before --logprob-flip: the usual token at each position.
    usual: Vec<String>,
    /// --other-choice's text, a piece beside each of choice 0's answer chunks.
    other: Vec<String>,
    /// The alternatives each token is scored with, when logprobs are asked for and answered.
    top_k: Option<usize>,
    /// The reply's chunks.
    chunks: Vec<ScriptedChunk>,
    /// The finish chunk's delta.
    finish_delta: serde_json::Value,
    /// The tool calls whole, for a reply not streamed.
    calls: Option<serde_json::Value>,
}

/// The chunks of a reply of `tokens`, with what goes beside them: --other-choice's text,
/// --logprob-flip's runners-up and the logprobs asked for, --echo-prefix and --big-chunk; its
/// tool calls or JSON content in place of its text when `tooled`.
fn plan_chunks<'a>(
    args: &'a StandInArgs,
    req: &ChatRequest,
    prompt: &str,
    mut tokens: ReplyTokens<'a>,
    tooled: Option<ToolReply>,
) -> Planned<'a> {
    let mut deltas = Vec::new();
    let (mut finish_delta, mut calls) = (json!({}), None);
    if let Some(t) = tooled {
        tokens.answer = t.tokens;
        tokens.skip = 0;
        tokens.n = tokens.r + tokens.answer.len();
        tokens.finish = args.finish_reason.as_deref().unwrap_or(t.finish);
        (deltas, finish_delta, calls) = (t.deltas, t.finish_delta, t.calls);
    }
    let answer = &mut tokens.answer;
    let skip = tokens.skip;
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
    let top_k = match (
        req.logprobs,
        args.no_logprobs || args.empty || !deltas.is_empty(),
    ) {
        (Some(true), false) => Some(req.top_logprobs.unwrap_or(0).min(MOST_TOP_LOGPROBS)),
        _ => None,
    };
    let mut chunks = reply_chunks(args, tokens.r, answer, &deltas);
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
        let pad = filler_text(&answer_text(args, prompt).1, skip + answer.len(), extra);
        for chunk in chunks.iter_mut().take(args.big_chunks) {
            chunk.content.push_str(&pad);
        }
    }
    Planned {
        tokens,
        usual,
        other,
        top_k,
        chunks,
        finish_delta,
        calls,
    }
}

/// The whole answer at once, as one JSON body, when its first token is due at `at`. The
/// reply, and its turn, end when this returns.
async fn whole_answer(p: &Planned<'_>, at: tokio::time::Instant, reply: Serving) -> Response {
    tokio::time::sleep_until(at).await;
    let n = p.tokens.n;
    reply.tokens(n);
    let content: String = p.chunks.iter().map(|c| c.content.as_str()).collect();
    let mut message = json!({"role": "assistant", "content": content});
    if let Some(calls) = &p.calls {
        message = json!({"role": "assistant", "content": null, "tool_calls": calls});
    }
    let body = json!({
        "id": "chatcmpl-stand-in",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": p.tokens.finish}],
        "usage": usage_json(p.tokens.prompt, n),
    });
    Json(body).into_response()
}

/// When a streamed reply's chunks are sent.
struct Timing {
    /// When the reply started (after its --serial turn): its first token is due `ttft` after.
    started: tokio::time::Instant,
    ttft: Duration,
    /// The factor on --gaps-ms for this request (--slow-by, --jitter).
    scale: f64,
    /// --trickle-ms: the body a byte at a time, this far apart.
    trickle: Option<Duration>,
}

/// How the chunks' stream ends early, after the chunk that reaches a fault's count.
enum CutShort {
    /// --error-event-after or --error-chunk-after: the error frame, then [DONE].
    ErrorFrame,
    /// --endless-line-after: a line that never ends.
    EndlessLine,
}

/// The streamed reply: the role chunk, the chunks on time with the faults the script puts
/// among them, the finish and usage chunks, [DONE] and what --after-done sends after it.
fn streamed_answer(
    args: &StandInArgs,
    prompt: &str,
    p: &Planned<'_>,
    include_usage: bool,
    timing: &Timing,
    reply: Serving,
) -> Response {
    let (ttft, trickle) = (timing.ttft, timing.trickle);
    let usage_tokens = args.usage_claims.map_or(p.tokens.n, |c| c as usize);
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
    if args.error_event_after == Some(0) || args.error_chunk_after == Some(0) {
        // After 0 tokens: in place of the first, a stream of nothing but the error.
        let wait = ttft.saturating_sub(timing.started.elapsed());
        return stream_answer(steps, error_frame(args, wait), args, trickle, reply);
    }
    match chunk_steps(args, p, timing, &mut steps) {
        Some(CutShort::ErrorFrame) => {
            let last = error_frame(args, Duration::ZERO);
            return stream_answer(steps, last, args, trickle, reply);
        }
        Some(CutShort::EndlessLine) => {
            let pieces = forever(Duration::ZERO, Bytes::from(vec![b'x'; ENDLESS_PIECE]));
            let line = std::iter::once(Step::Send(
                Duration::ZERO,
                Bytes::from_static(ENDLESS_LINE_START),
            ));
            let steps: Steps = Box::new(steps.into_iter().chain(line).chain(pieces));
            return sse_response(body_of(steps, Duration::ZERO, trickle, reply));
        }
        None => {}
    }
    if args.endless {
        return endless_answer(args, prompt, p, steps, trickle, reply);
    }
    in_place_of_the_first_token(args, ttft, &mut steps);
    let beside = args.other_choice.as_ref().map(|_| json!({}));
    let (last, own) = chunk_frames(args, p.finish_delta.clone(), Some(p.tokens.finish), beside);
    steps.push(Step::Send(Duration::ZERO, last));
    if let Some(own) = own {
        steps.push(Step::Send(Duration::ZERO, own));
    }
    if include_usage {
        let mut usage = chunk_envelope(json!([]));
        usage["usage"] = usage_json(p.tokens.prompt, usage_tokens);
        steps.push(Step::Send(Duration::ZERO, sse(usage)));
    }
    stream_answer(steps, None, args, trickle, reply)
}

/// Push the steps of the reply's chunks onto `steps`, each after its wait, with the faults
/// the script puts right after the chunk that brings the count of tokens to theirs; stop at a
/// fault that ends the stream, and say which.
fn chunk_steps(
    args: &StandInArgs,
    p: &Planned<'_>,
    timing: &Timing,
    steps: &mut Vec<Step>,
) -> Option<CutShort> {
    let gap = |i: usize| {
        Duration::from_secs_f64(args.gaps_ms[i % args.gaps_ms.len()] * timing.scale / 1e3)
    };
    for (i, c) in p.chunks.iter().enumerate() {
        // The first token waits for ttft from the request's start, not from this point.
        let wait = if i == 0 {
            timing.ttft.saturating_sub(timing.started.elapsed())
        } else {
            gap(i - 1)
        };
        let before = if i == 0 {
            0
        } else {
            p.chunks[i - 1].tokens_so_far
        };
        let (bytes, own) = chunk_bytes(args, p, i);
        steps.push(Step::Token(wait, bytes, c.tokens_so_far - before));
        if let Some(own) = own {
            steps.push(Step::Send(Duration::ZERO, own));
        }
        if let Some(cut) = faults_after(args, before, c.tokens_so_far, steps) {
            return Some(cut);
        }
    }
    None
}

/// The frames of the reply's chunk `i`: its delta, --other-choice's piece beside it and its
/// tokens' logprobs when asked for.
fn chunk_bytes(args: &StandInArgs, p: &Planned<'_>, i: usize) -> (Bytes, Option<Bytes>) {
    let c = &p.chunks[i];
    let mut delta = serde_json::Map::new();
    if let Some(serde_json::Value::Object(tool)) = &c.tool {
        delta = tool.clone();
    } else if !c.reasoning.is_empty() {
        delta.insert("reasoning_content".into(), json!(c.reasoning));
    } else {
        delta.insert("content".into(), json!(c.content));
    }
    // Answer chunks follow the reasoning's, one for each group of chunk_tokens.
    let answer_chunk = i.checked_sub(p.tokens.r.div_ceil(args.chunk_tokens as usize));
    let beside = answer_chunk
        .and_then(|k| p.other.get(k))
        .map(|text| json!({"content": text}));
    let ct = args.chunk_tokens as usize;
    let answer = &p.tokens.answer;
    let logprobs = answer_chunk.zip(p.top_k).map(|(k, top)| {
        let records: Vec<serde_json::Value> = (k * ct..((k + 1) * ct).min(answer.len()))
            .map(|w| {
                let (sent, usual) = (&answer[w], &p.usual[w]);
                scored::token_record(sent, usual, p.tokens.skip + w, top, args.flip_margin)
            })
            .collect();
        json!({"content": records})
    });
    scored_chunk_frames(args, delta.into(), None, beside, logprobs)
}

/// The faults scripted "after N tokens", pushed right after the chunk that brings the count
/// from `before` to `so_far` past N; the one that ends the stream, if any.
fn faults_after(
    args: &StandInArgs,
    before: usize,
    so_far: usize,
    steps: &mut Vec<Step>,
) -> Option<CutShort> {
    let reaches = |limit: Option<usize>| limit.is_some_and(|l| before < l && l <= so_far);
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
        return Some(CutShort::ErrorFrame);
    }
    if reaches(args.endless_line_after) {
        return Some(CutShort::EndlessLine);
    }
    None
}

/// `--endless`: past the scripted tokens, the answer's stream goes on for ever, as from a
/// serve that ignores max_tokens.
fn endless_answer(
    args: &StandInArgs,
    prompt: &str,
    p: &Planned<'_>,
    steps: Vec<Step>,
    trickle: Option<Duration>,
    reply: Serving,
) -> Response {
    let gaps = args.gaps_ms.clone();
    let (text, seed) = answer_text(args, prompt);
    let words =
        answer_stream(&text, &seed, args.degenerate()).skip(p.tokens.skip + p.tokens.answer.len());
    let more = (p.chunks.len()..).zip(words).map(move |(i, word)| {
        let gap = Duration::from_secs_f64(gaps[i % gaps.len()] / 1e3);
        Step::Token(gap, sse(chunk_json(json!({"content": word}), None)), 1)
    });
    let steps: Steps = Box::new(steps.into_iter().chain(more));
    sse_response(body_of(
        steps,
        Duration::from_millis(args.work_ms),
        trickle,
        reply,
    ))
}

/// The faults scripted after 0 tokens, put in place of the first token (after the role
/// chunk), each after the first token's wait.
fn in_place_of_the_first_token(args: &StandInArgs, ttft: Duration, steps: &mut Vec<Step>) {
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
        let c = reply_chunks(&a, 4, &answer_tokens(&a, "x", 6), &[]);
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
