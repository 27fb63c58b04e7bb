//! The frames the stand-in sends, in the OpenAI shapes: a streamed chunk (`chat.completion.chunk`)
//! with its choices, the usage chunk, an SSE event, and the SSE response they go in.

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::args::{OtherChoiceIn, StandInArgs};

/// The model id the stand-in lists.
pub const MODEL: &str = "stand-in";

/// `v` as one SSE event.
pub(crate) fn sse(v: serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// A streamed chunk of choice 0 alone.
pub(crate) fn chunk_json(delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    chunk_envelope(json!([choice_json(0, delta, finish)]))
}

/// One choice of a streamed chunk.
fn choice_json(index: u64, delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    json!({"index": index, "delta": delta, "finish_reason": finish})
}

/// One chunk of choice 0 (`delta`, `finish`) as frames: with --other-choice, choice 1's
/// `other` delta goes beside it as --other-choice-in says, in the same chunk or in a second
/// frame of its own (the second of the pair).
pub(crate) fn chunk_frames(
    args: &StandInArgs,
    delta: serde_json::Value,
    finish: Option<&str>,
    other: Option<serde_json::Value>,
) -> (Bytes, Option<Bytes>) {
    scored_chunk_frames(args, delta, finish, other, None)
}

/// [`chunk_frames`], choice 0 with these `logprobs` when it has them.
pub(crate) fn scored_chunk_frames(
    args: &StandInArgs,
    delta: serde_json::Value,
    finish: Option<&str>,
    other: Option<serde_json::Value>,
    logprobs: Option<serde_json::Value>,
) -> (Bytes, Option<Bytes>) {
    let mut reply = choice_json(0, delta, finish);
    if let Some(logprobs) = logprobs {
        reply["logprobs"] = logprobs;
    }
    let Some(other) = other else {
        return (sse(chunk_envelope(json!([reply]))), None);
    };
    let other = choice_json(1, other, finish);
    match args.other_choice_in {
        OtherChoiceIn::OwnChunk => (
            sse(chunk_envelope(json!([reply]))),
            Some(sse(chunk_envelope(json!([other])))),
        ),
        OtherChoiceIn::Before => (sse(chunk_envelope(json!([other, reply]))), None),
        OtherChoiceIn::After => (sse(chunk_envelope(json!([reply, other]))), None),
    }
}

/// A streamed chunk with these choices (none, for the usage chunk).
pub(crate) fn chunk_envelope(choices: serde_json::Value) -> serde_json::Value {
    json!({
        "id": "chatcmpl-stand-in",
        "object": "chat.completion.chunk",
        "model": MODEL,
        "choices": choices,
    })
}

/// The usage of a reply of `n` tokens to a prompt of `prompt` tokens.
pub(crate) fn usage_json(prompt: u64, n: usize) -> serde_json::Value {
    let total = prompt.saturating_add(n as u64);
    json!({"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": total})
}

/// A 200 answer whose body is the SSE stream `body`.
pub(crate) fn sse_response(body: Body) -> Response {
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
    use crate::standin::args::parse as args;

    #[test]
    fn another_choice_goes_where_other_choice_in_says() {
        // The indexes of each frame's choices, in order, and what choice 0 says.
        let frames = |given: &[&str]| {
            let (first, own) = chunk_frames(
                &args(given),
                json!({"content": "London"}),
                None,
                given.first().map(|_| json!({"content": "Paris"})),
            );
            let mut out = Vec::new();
            for frame in std::iter::once(first).chain(own) {
                let data = frame.strip_prefix(b"data: ").unwrap().trim_ascii_end();
                let v: serde_json::Value = serde_json::from_slice(data).unwrap();
                let indexes: Vec<u64> = v["choices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["index"].as_u64().unwrap())
                    .collect();
                let chunk = crate::wire::openai::Chunk::parse(data).unwrap();
                out.push((indexes, chunk.content().to_string()));
            }
            out
        };
        let london = |i: Vec<u64>| (i, "London".to_string());
        let nothing = |i: Vec<u64>| (i, String::new());
        assert_eq!(frames(&[]), [london(vec![0])]);
        assert_eq!(
            frames(&["--other-choice", "Paris."]),
            [london(vec![0]), nothing(vec![1])]
        );
        let before = ["--other-choice", "Paris.", "--other-choice-in", "before"];
        assert_eq!(frames(&before), [london(vec![1, 0])]);
        let after = ["--other-choice", "Paris.", "--other-choice-in", "after"];
        assert_eq!(frames(&after), [london(vec![0, 1])]);
    }
}
