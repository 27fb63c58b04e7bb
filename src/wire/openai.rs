//! The fields of an OpenAI-compatible streaming chat chunk that the gate needs, and no others.
//!
//! Servers differ: llama-server sends `"content": null` in its first chunk, reasoning models put
//! their thinking on `reasoning_content`, a final chunk may carry only `usage` with no choices.
//! Every field is optional here; what a chunk means is decided by the caller. A serve that fails
//! mid-stream may say so in a chunk of its own, `{"error": ...}`: that member is read too, so
//! the caller can fail the reply with the serve's own words rather than take it for an empty
//! chunk.
//!
//! The reply is choice 0, found by its `index`, not by its place in `choices` (a choice without
//! `index` is choice 0: llama-server and the stand-in always send `"index": 0`). The gate asks
//! for one choice, so any other index is noted for the caller to fail the reply on, never read
//! as the reply's text: a serve whose choice 0 said "London" and whose choice 1 said "Paris"
//! once passed on choice 1's words (issue 30). An index that is not a whole number 0 or more
//! (a string, a negative number) makes the chunk a bad one, as any field of the wrong type does.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::wire::chunk_scan;

/// One parsed `data:` payload of a chat completion stream: what the gate reads of it. Its text
/// borrows from the payload where it can (no escapes), so a chunk costs no string copies.
#[derive(Debug, Default)]
pub struct Chunk<'a> {
    /// Choice 0's `delta.content`.
    content: Option<Cow<'a, str>>,
    /// Choice 0's `delta.reasoning_content`.
    reasoning: Option<Cow<'a, str>>,
    /// Choice 0's `finish_reason`.
    finish_reason: Option<Cow<'a, str>>,
    /// Choice 0's `delta.tool_calls` fragments, in their order (issue 36).
    tool_calls: Vec<ToolCallDelta<'a>>,
    /// Choice 0's `logprobs`, as its JSON text, when it is there and not `null`: read by
    /// [`crate::wire::logprobs::read`] only when the run asked for logprobs.
    logprobs: Option<&'a str>,
    /// The first index other than 0 among the chunk's choices, in their order: a choice the
    /// gate did not ask for.
    other_choice: Option<u64>,
    /// Token counts, when the serve reports them (usually in a final chunk).
    pub usage: Option<Usage>,
    /// llama-server's own timings (`predicted_per_second` and friends), kept as it sent them.
    pub timings: Option<serde_json::Value>,
    /// The chunk's `error` member, when it has one that is not `null`.
    error: Option<serde_json::Value>,
}

/// A chunk as serde reads it, for the chunks the fast path leaves to it.
#[derive(Debug, Default, Deserialize)]
struct Wire<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    usage: Option<Usage>,
    timings: Option<serde_json::Value>,
    error: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice<'a> {
    /// Which choice this is; absent (or `null`) is choice 0.
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Delta<'a>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    logprobs: Option<&'a RawValue>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    /// `null` and `[]` are none.
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

/// One fragment of a streamed tool call (`delta.tool_calls[]`), as the OpenAI API streams it:
/// the call's `index` in every fragment, its `id` and `function.name` in the first, and its
/// `function.arguments` text a piece at a time. Every member is optional here; what is
/// missing is the tools line's to judge. An `index` that is not a whole number 0 or more
/// makes the chunk a bad one, as any field of the wrong type does.
#[derive(Debug, Default, Deserialize)]
pub struct ToolCallDelta<'a> {
    /// Which call of the reply this fragment belongs to.
    pub index: Option<u64>,
    /// The call's id.
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    /// The function's name and a piece of its arguments.
    #[serde(default, borrow)]
    pub function: Option<FunctionDelta<'a>>,
}

/// A tool call fragment's `function`.
#[derive(Debug, Default, Deserialize)]
pub struct FunctionDelta<'a> {
    /// The function's name (in the call's first fragment).
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    /// A piece of the arguments' JSON text.
    #[serde(default, borrow)]
    pub arguments: Option<Cow<'a, str>>,
}

/// Token counts reported by the serve.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Usage {
    /// Tokens the serve says it generated.
    pub completion_tokens: Option<u64>,
    /// Tokens the serve says the prompt was (with its chat template).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// OpenAI's breakdown of the prompt's tokens.
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

impl<'a> Chunk<'a> {
    /// Parse one `data:` payload. The error is serde's, for quoting in a FAIL line.
    ///
    /// The usual chunk is read by [`chunk_scan`], the rest (escapes, `usage`, `error`, anything
    /// unusual, anything broken) by serde_json, which gives the same answer where both can.
    pub fn parse(data: &'a [u8]) -> Result<Chunk<'a>, serde_json::Error> {
        if let Some(plain) = chunk_scan::scan(data) {
            return Ok(Chunk {
                content: plain.content.map(Cow::Borrowed),
                reasoning: plain.reasoning.map(Cow::Borrowed),
                finish_reason: plain.finish_reason.map(Cow::Borrowed),
                tool_calls: Vec::new(),
                logprobs: plain.logprobs,
                other_choice: None,
                usage: None,
                timings: None,
                error: None,
            });
        }
        Self::by_serde(data)
    }

    /// Parse one payload with serde_json alone: the authority the fast path answers to.
    pub(crate) fn by_serde(data: &'a [u8]) -> Result<Chunk<'a>, serde_json::Error> {
        let wire: Wire<'a> = serde_json::from_slice(data)?;
        let (mut reply, mut other_choice) = (None, None);
        for choice in wire.choices {
            match choice.index.unwrap_or(0) {
                0 if reply.is_none() => reply = Some(choice),
                // Two texts for one choice in one chunk: which comes first is anyone's guess.
                0 => {
                    return Err(serde::de::Error::custom(
                        "two choices of index 0 in one chunk",
                    ))
                }
                other => {
                    other_choice.get_or_insert(other);
                }
            }
        }
        let reply = reply.unwrap_or_default();
        Ok(Chunk {
            content: reply.delta.content,
            reasoning: reply.delta.reasoning_content,
            finish_reason: reply.finish_reason,
            tool_calls: reply.delta.tool_calls.unwrap_or_default(),
            logprobs: reply.logprobs.map(RawValue::get),
            other_choice,
            usage: wire.usage,
            timings: wire.timings,
            error: wire.error,
        })
    }

    /// The serve's error, when the chunk is one (`{"error": ...}`, not `null`).
    pub fn error(&self) -> Option<&serde_json::Value> {
        self.error.as_ref()
    }

    /// The first choice index other than 0 the chunk carries (in the order of its `choices`),
    /// when it carries one: a choice the gate did not ask for. Its text is in none of the other
    /// accessors.
    pub fn other_choice(&self) -> Option<u64> {
        self.other_choice
    }

    /// The answer text this chunk adds (choice 0), empty when none.
    pub fn content(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }

    /// The tool call fragments this chunk adds (choice 0), in order; empty when none.
    pub fn tool_calls(&self) -> &[ToolCallDelta<'a>] {
        &self.tool_calls
    }

    /// The reasoning text this chunk adds (choice 0), empty when none.
    pub fn reasoning(&self) -> &str {
        self.reasoning.as_deref().unwrap_or("")
    }

    /// Prompt tokens the serve took from its prompt cache, when it says: OpenAI's
    /// `usage.prompt_tokens_details.cached_tokens`, or llama-server's `timings.cache_n`.
    pub fn cached_prompt_tokens(&self) -> Option<u64> {
        self.usage
            .and_then(|u| u.prompt_tokens_details)
            .and_then(|d| d.cached_tokens)
            .or_else(|| self.timings.as_ref()?.get("cache_n")?.as_u64())
    }

    /// Choice 0's `logprobs` as its JSON text, when the chunk has them (not `null`).
    pub fn logprobs(&self) -> Option<&'a str> {
        self.logprobs
    }

    /// Why choice 0's generation stopped, when this chunk says so.
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }
}

/// Bytes of an error's JSON kept when it has no message to say instead.
const ERROR_JSON_KEPT: usize = 512;

/// What a serve's error says, for a FAIL line: its message where it gives one, else its JSON.
///
/// Serves shape errors differently: OpenAI's `{"error": {"message": ...}}`, a bare
/// `{"error": "..."}`, `{"message": ...}` under `event: error`, or an object with only a code.
/// `value` is the error itself or an object holding it in `error`.
pub fn error_text(value: &serde_json::Value) -> String {
    let error = match value.get("error") {
        Some(inner) if !inner.is_null() => inner,
        _ => value,
    };
    if let Some(text) = error.as_str() {
        return text.to_string();
    }
    if let Some(text) = error.get("message").and_then(|m| m.as_str()) {
        return text.to_string();
    }
    let mut json = error.to_string();
    if json.len() > ERROR_JSON_KEPT {
        let mut cut = ERROR_JSON_KEPT;
        while !json.is_char_boundary(cut) {
            cut -= 1;
        }
        json.truncate(cut);
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_server_first_chunk_with_null_content_has_no_text() {
        let c = Chunk::parse(br#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"x","model":"m","object":"chat.completion.chunk"}"#).unwrap();
        assert_eq!(c.content(), "");
        assert_eq!(c.reasoning(), "");
        assert_eq!(c.finish_reason(), None);
    }

    #[test]
    fn content_reasoning_and_finish_reason_are_read() {
        let c = Chunk::parse(
            br#"{"choices":[{"delta":{"content":"Pa","reasoning_content":"hm"},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
        assert_eq!(c.content(), "Pa");
        assert_eq!(c.reasoning(), "hm");
        assert_eq!(c.finish_reason(), Some("stop"));
    }

    #[test]
    fn a_usage_only_chunk_has_no_choices() {
        let c = Chunk::parse(br#"{"choices":[],"usage":{"completion_tokens":8,"prompt_tokens":3},"timings":{"predicted_per_second":171.2}}"#).unwrap();
        assert_eq!(c.content(), "");
        assert_eq!(c.usage.and_then(|u| u.completion_tokens), Some(8));
        assert_eq!(c.usage.and_then(|u| u.prompt_tokens), Some(3));
        assert!(c.timings.is_some());
    }

    #[test]
    fn cached_prompt_tokens_from_openai_usage_or_llama_timings() {
        let openai = Chunk::parse(br#"{"choices":[],"usage":{"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":12}}}"#).unwrap();
        assert_eq!(openai.cached_prompt_tokens(), Some(12));
        let llama =
            Chunk::parse(br#"{"choices":[],"timings":{"cache_n":9,"prompt_n":1}}"#).unwrap();
        assert_eq!(llama.cached_prompt_tokens(), Some(9));
        let neither = Chunk::parse(br#"{"choices":[],"usage":{"completion_tokens":3}}"#).unwrap();
        assert_eq!(neither.cached_prompt_tokens(), None);
    }

    #[test]
    fn an_error_chunk_is_read_as_the_serves_error() {
        let c = Chunk::parse(br#"{"error":{"message":"CUDA out of memory","code":500}}"#).unwrap();
        assert_eq!(error_text(c.error().unwrap()), "CUDA out of memory");
        let c = Chunk::parse(br#"{"choices":[{"delta":{"content":"a"}}],"error":null}"#).unwrap();
        assert!(c.error().is_none(), "a null error is no error");
        assert_eq!(c.content(), "a");
    }

    #[test]
    fn an_errors_text_is_its_message_else_its_json() {
        let text = |s: &str| error_text(&serde_json::from_str(s).unwrap());
        assert_eq!(text(r#"{"error":{"message":"boom"}}"#), "boom");
        assert_eq!(text(r#"{"error":"plain words"}"#), "plain words");
        assert_eq!(
            text(r#"{"message":"under event: error"}"#),
            "under event: error"
        );
        assert_eq!(text(r#"{"error":{"code":500}}"#), r#"{"code":500}"#);
        assert_eq!(text(r#""just a string""#), "just a string");
        assert_eq!(text(r#"{"error":{"message":7}}"#), r#"{"message":7}"#);
        let long = format!(r#"{{"error":{{"detail":"{}"}}}}"#, "é".repeat(1000));
        assert!(text(&long).len() <= ERROR_JSON_KEPT);
    }

    #[test]
    fn choice_0_is_read_by_its_index_not_its_place() {
        // Index 1 first: its words are not the reply's, and its index is noted.
        let c = Chunk::parse(br#"{"choices":[{"index":1,"delta":{"content":"Paris"},"finish_reason":"stop"},{"index":0,"delta":{"content":"London"}}]}"#).unwrap();
        assert_eq!(c.content(), "London");
        assert_eq!(
            c.finish_reason(),
            None,
            "choice 1's finish is not the reply's"
        );
        assert_eq!(c.other_choice(), Some(1));
        // A chunk of choice 1 alone adds nothing to the reply.
        let c = Chunk::parse(
            br#"{"choices":[{"index":1,"delta":{"content":"Paris","reasoning_content":"hm"},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
        assert_eq!((c.content(), c.reasoning()), ("", ""));
        assert_eq!((c.finish_reason(), c.other_choice()), (None, Some(1)));
        // The first other index in the chunk's order is the one noted.
        let c = Chunk::parse(br#"{"choices":[{"index":3,"delta":{}},{"index":0,"delta":{"content":"a"}},{"index":2}]}"#).unwrap();
        assert_eq!((c.content(), c.other_choice()), ("a", Some(3)));
    }

    #[test]
    fn a_choice_without_an_index_or_with_a_null_one_is_choice_0() {
        for data in [
            &br#"{"choices":[{"delta":{"content":"Paris"},"finish_reason":"stop"}]}"#[..],
            br#"{"choices":[{"index":null,"delta":{"content":"Paris"},"finish_reason":"stop"}]}"#,
            br#"{"choices":[{"index":1,"delta":{}},{"delta":{"content":"Paris"},"finish_reason":"stop"}]}"#,
        ] {
            let c = Chunk::parse(data).unwrap();
            assert_eq!(c.content(), "Paris");
            assert_eq!(c.finish_reason(), Some("stop"));
        }
    }

    #[test]
    fn an_index_that_is_not_a_whole_number_is_a_bad_chunk() {
        for (why, data) in [
            (
                "a string",
                &br#"{"choices":[{"index":"1","delta":{}}]}"#[..],
            ),
            ("a string 0", br#"{"choices":[{"index":"0","delta":{}}]}"#),
            ("negative", br#"{"choices":[{"index":-1,"delta":{}}]}"#),
            ("a fraction", br#"{"choices":[{"index":0.5,"delta":{}}]}"#),
            (
                "past u64",
                br#"{"choices":[{"index":18446744073709551616}]}"#,
            ),
            ("twice", br#"{"choices":[{"index":0,"index":1}]}"#),
            (
                "choice 0 twice",
                br#"{"choices":[{"index":0,"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#,
            ),
        ] {
            let e = Chunk::parse(data).expect_err(why);
            // Read as the client reads it: JSON, but not a chat completion chunk.
            assert_eq!(
                e.classify(),
                serde_json::error::Category::Data,
                "{why}: {e}"
            );
        }
    }

    #[test]
    fn non_json_is_an_error_not_a_panic() {
        assert!(Chunk::parse(b"{garbage").is_err());
        assert!(Chunk::parse(b"[1,2]").is_err());
    }

    use proptest::prelude::*;

    proptest! {
        /// Wherever choice 0 stands among other choices, and whether it says its index or
        /// not, the reply is its text and its finish, and the other index noted is the first
        /// in the chunk's order; the fast path and serde agree on it.
        #[test]
        fn choice_0_is_found_wherever_it_stands(
            others in proptest::collection::vec((1u64..5, "[a-z ]{0,6}", any::<bool>()), 0..4),
            at in any::<usize>(),
            text in "[A-Za-z .]{0,8}",
            says_index in any::<bool>(),
            finish in any::<bool>(),
        ) {
            let mut choices: Vec<String> = others
                .iter()
                .map(|(i, t, f)| {
                    let reason = if *f { r#""stop""# } else { "null" };
                    format!(r#"{{"index":{i},"delta":{{"content":"{t}"}},"finish_reason":{reason}}}"#)
                })
                .collect();
            let index = if says_index { r#""index":0,"# } else { "" };
            let reason = if finish { r#""length""# } else { "null" };
            let at = at % (choices.len() + 1);
            choices.insert(
                at,
                format!(r#"{{{index}"delta":{{"content":"{text}"}},"finish_reason":{reason}}}"#),
            );
            let data = format!(r#"{{"choices":[{}]}}"#, choices.join(","));
            let want_other = others.first().map(|o| o.0);
            for c in [Chunk::parse(data.as_bytes()), Chunk::by_serde(data.as_bytes())] {
                let c = c.map_err(|e| TestCaseError::fail(format!("{e}: {data}")))?;
                prop_assert_eq!(c.content(), text.as_str());
                prop_assert_eq!(c.finish_reason(), finish.then_some("length"));
                prop_assert_eq!(c.other_choice(), want_other);
            }
        }
    }
}
