//! The stand-in's context (issue 35): the gate's `--depths` sends long prompts
//! (`depth_prompt.rs`) and must tell a serve that refuses one past its context, as
//! llama-server does, from one that garbles it, answers it anyway, cuts it or crashes on it;
//! and a prompt's prefill time from its first token's. The stand-in plays each.
//!
//! It counts a token a word: the user messages' whitespace-separated words, all messages
//! summed, which is near what a BPE tokenizer counts of the depth prompts' plain English.
//! [`fate`] says what a prompt of that many words meets; [`take`] does it (refuses, crashes,
//! or takes the prompt whole, cut or garbled); a depth prompt is answered from its fact
//! ([`depth_answer`]), a reply's first token waits for its prefill ([`prefill`]) and its usage
//! says the prompt's tokens ([`prompt_tokens`]). The flags are `ContextArgs` (`args.rs`).

use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;

use super::args::ContextArgs;
use crate::depth_prompt;

/// The largest chat request the stand-in reads. The deepest prompt `--depths` asks
/// ([`depth_prompt::MAX_DEPTH`] tokens) is about 5 MiB of words: axum's own limit, 2 MiB,
/// would refuse it (413) before the context had a say, which no serve with that context does.
pub(crate) const MOST_REQUEST_BYTES: usize = 32 << 20;

/// A depth prompt's reply when its fact is not found (cut away, forgotten, or not there): a
/// normal-looking answer, and wrong, as a model's that never saw the fact.
pub(crate) const NOT_FOUND: &str = "I could not find a secret code in the text.";

/// The token a garbled reply is made of: what broken NPU kernels stream past ~2k tokens of
/// prompt (openvino.genai#3255), where the vocabulary's first tokens are punctuation.
pub(crate) const GARBAGE_TOKEN: &str = "!!!!";

/// The most tokens a garbled reply streams: nothing in broken kernels stops the garbage but a
/// limit, and a request's max_tokens of billions must not make the stand-in allocate them.
pub(crate) const MOST_GARBAGE_TOKENS: usize = 1 << 16;

/// The prompt's tokens as the stand-in counts them: the words of `texts` (the user messages),
/// summed.
pub(crate) fn words<'a>(texts: impl IntoIterator<Item = &'a str>) -> u64 {
    texts
        .into_iter()
        .map(|t| t.split_whitespace().count() as u64)
        .sum()
}

/// What a prompt meets, by its words against the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Within the context (or there is none): answered.
    Fits,
    /// Past it: a 400, `exceed_context_size_error`, as llama-server's.
    Refused,
    /// Past it, `--garble-past-context`: 200 and garbage.
    Garbled,
    /// Past it, `--answer-past-context`: 200 and the reply it would get if it fitted.
    AnsweredAnyway,
    /// Past it, `--truncate-past-context`: its last N words answered.
    Truncated,
    /// Past it, `--crash-past-context`: the process exits.
    Crashes,
}

/// What a prompt of `words` meets under `args`.
pub(crate) fn fate(args: &ContextArgs, words: u64) -> Fate {
    match args.n_ctx {
        Some(n) if words > n => {
            if args.garble_past_context {
                Fate::Garbled
            } else if args.answer_past_context {
                Fate::AnsweredAnyway
            } else if args.truncate_past_context {
                Fate::Truncated
            } else if args.crash_past_context {
                Fate::Crashes
            } else {
                Fate::Refused
            }
        }
        _ => Fate::Fits,
    }
}

/// A prompt as the stand-in takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taken {
    /// The text the reply answers: the last user message, or a cut prompt's last N words.
    pub(crate) prompt: String,
    /// The words the stand-in prefilled: all of the prompt's, or a cut one's N.
    pub(crate) words: u64,
    /// The reply is garbage (`--garble-past-context`).
    pub(crate) garbled: bool,
}

/// A prompt refused for being past the context, as llama-server refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The prompt's words.
    pub(crate) words: u64,
    /// The context.
    pub(crate) n_ctx: u64,
}

impl IntoResponse for Refused {
    /// 400, JSON, sent whole (never a stream).
    fn into_response(self) -> Response {
        (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            refusal_body(self.words, self.n_ctx),
        )
            .into_response()
    }
}

/// Take a chat request's prompt, `texts` its user messages' and `last` the last one's: the
/// prompt to answer, or its refusal to send instead (before anything else: a refused request
/// takes no `--serial` turn and leaves no footprint). With `--crash-past-context`, a prompt
/// past the context ends the process here.
pub(crate) fn take(args: &ContextArgs, texts: &[&str], last: String) -> Result<Taken, Refused> {
    let words = words(texts.iter().copied());
    let whole = |garbled| Taken {
        prompt: last.clone(),
        words,
        garbled,
    };
    let n_ctx = args.n_ctx.unwrap_or(u64::MAX);
    match fate(args, words) {
        Fate::Fits | Fate::AnsweredAnyway => Ok(whole(false)),
        Fate::Garbled => Ok(whole(true)),
        Fate::Refused => Err(Refused { words, n_ctx }),
        Fate::Truncated => Ok(Taken {
            prompt: last_words(texts, n_ctx),
            words: n_ctx,
            garbled: false,
        }),
        Fate::Crashes => {
            let _ = crate::console::err_line(&format!(
                "stand-in: crashing as scripted on a prompt of {words} words past its context of {n_ctx}"
            ));
            std::process::exit(1)
        }
    }
}

/// The last `n` words of `texts` taken as one text, joined by single spaces: what a serve that
/// cuts its prompt to its context keeps.
pub(crate) fn last_words(texts: &[&str], n: u64) -> String {
    let all: Vec<&str> = texts.iter().flat_map(|t| t.split_whitespace()).collect();
    let from = all
        .len()
        .saturating_sub(usize::try_from(n).unwrap_or(usize::MAX));
    all[from..].join(" ")
}

/// llama-server's refusal of a prompt past its context (measured on the real one): its error
/// object, its fields in its order.
#[derive(Serialize)]
struct Refusal {
    error: RefusalError,
}

#[derive(Serialize)]
struct RefusalError {
    code: u16,
    message: String,
    #[serde(rename = "type")]
    kind: &'static str,
    n_prompt_tokens: u64,
    n_ctx: u64,
}

/// The body of the refusal of a prompt of `words` tokens past a context of `n_ctx`, as
/// llama-server sends it.
pub(crate) fn refusal_body(words: u64, n_ctx: u64) -> String {
    let refusal = Refusal {
        error: RefusalError {
            code: 400,
            message: format!(
                "request ({words} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"
            ),
            kind: "exceed_context_size_error",
            n_prompt_tokens: words,
            n_ctx,
        },
    };
    serde_json::to_string(&refusal).expect("a struct of strings and numbers serialises")
}

/// How long a prompt of `words` takes to prefill: `--prefill-us` a word.
pub(crate) fn prefill(args: &ContextArgs, words: u64) -> Duration {
    Duration::from_micros(args.prefill_us.saturating_mul(words))
}

/// The prompt's tokens as the usage reports them: its `words` times `--prompt-tokens-times`,
/// rounded (the words themselves without it).
pub(crate) fn prompt_tokens(args: &ContextArgs, words: u64) -> u64 {
    // Exact for any count of words a request body holds: f64 counts whole numbers to 2^53.
    (words as f64 * args.prompt_tokens_times).round() as u64
}

/// The reply to a depth prompt (one that ends with its question): the fact's code, or
/// [`NOT_FOUND`] when the prompt holds no fact or, with `--forget-deeper-than M`, the fact lies
/// more than M words before the prompt's end. `None` for any other prompt.
pub(crate) fn depth_answer(args: &ContextArgs, prompt: &str) -> Option<String> {
    if !prompt.ends_with(depth_prompt::QUESTION) {
        return None;
    }
    let found = depth_prompt::find_fact(prompt)
        .filter(|f| args.forget_deeper_than.is_none_or(|m| f.words_after <= m));
    Some(match found {
        Some(f) => format!("The secret code is {}.", f.code),
        None => NOT_FOUND.to_string(),
    })
}

/// `n` tokens of garbage, as a garbled reply streams them.
pub(crate) fn garbage(n: usize) -> Vec<String> {
    vec![GARBAGE_TOKEN.to_string(); n]
}

/// GET /props with `--context`: the context as llama-server says it (`n_ctx` of its default
/// generation settings) and its one slot.
pub(crate) async fn props(n_ctx: u64) -> Json<serde_json::Value> {
    Json(json!({"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": 1}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standin::args::parse;

    fn context(extra: &[&str]) -> ContextArgs {
        parse(extra).context
    }

    #[test]
    fn a_prompt_s_tokens_are_its_user_messages_words_summed() {
        assert_eq!(words(["What is  the\tcapital\nof France?"]), 6);
        assert_eq!(words(["one two", "", "  three  "]), 3);
        assert_eq!(words(Vec::<&str>::new()), 0);
        let p = depth_prompt::make(512, 0);
        assert_eq!(
            words([p.text.as_str()]),
            depth_prompt::find_fact(&p.text).unwrap().words
        );
    }

    #[test]
    fn a_prompt_past_the_context_meets_the_refusal_or_the_one_fault_given() {
        let plain = context(&["--context", "10"]);
        assert_eq!(fate(&plain, 10), Fate::Fits, "exactly the context fits");
        assert_eq!(fate(&plain, 11), Fate::Refused);
        assert_eq!(fate(&context(&[]), u64::MAX), Fate::Fits, "no context");
        for (flag, past) in [
            ("--garble-past-context", Fate::Garbled),
            ("--answer-past-context", Fate::AnsweredAnyway),
            ("--truncate-past-context", Fate::Truncated),
            ("--crash-past-context", Fate::Crashes),
        ] {
            let a = context(&["--context", "10", flag]);
            assert_eq!(fate(&a, 10), Fate::Fits, "{flag}");
            assert_eq!(fate(&a, 11), past, "{flag}");
        }
    }

    #[test]
    fn the_refusal_is_llama_server_s_body_byte_for_byte() {
        assert_eq!(
            refusal_body(4476, 4096),
            r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#
        );
    }

    #[test]
    fn a_prompt_is_taken_whole_cut_or_garbled_as_its_fate_says() {
        let texts = ["a b c", "d e f g"];
        let taken = |extra: &[&str]| {
            let mut given = vec!["--context", "5"];
            given.extend_from_slice(extra);
            take(&context(&given), &texts, "d e f g".into())
        };
        let refused = taken(&[]).unwrap_err();
        assert_eq!(refused, Refused { words: 7, n_ctx: 5 });
        let refused = refused.into_response();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        assert_eq!(refused.headers()[header::CONTENT_TYPE], "application/json");
        let whole = Taken {
            prompt: "d e f g".into(),
            words: 7,
            garbled: false,
        };
        assert_eq!(taken(&["--answer-past-context"]).unwrap(), whole);
        assert_eq!(
            taken(&["--garble-past-context"]).unwrap(),
            Taken {
                garbled: true,
                ..whole.clone()
            }
        );
        assert_eq!(
            taken(&["--truncate-past-context"]).unwrap(),
            Taken {
                prompt: "c d e f g".into(),
                words: 5,
                garbled: false,
            }
        );
        let fits = take(&context(&["--context", "7"]), &texts, "d e f g".into());
        assert_eq!(fits.unwrap(), whole);
    }

    #[test]
    fn a_cut_prompt_keeps_its_last_words_across_messages() {
        assert_eq!(last_words(&["a b", "c\n\nd"], 3), "b c d");
        assert_eq!(last_words(&["a b"], 9), "a b");
        assert_eq!(last_words(&["a b"], 0), "");
        assert_eq!(last_words(&[], 4), "");
    }

    #[test]
    fn a_depth_prompt_is_answered_with_its_code_unless_its_fact_is_cut_or_too_deep() {
        let p = depth_prompt::make(1024, 0);
        let fact = depth_prompt::find_fact(&p.text).unwrap();
        let right = format!("The secret code is {}.", p.code);
        assert_eq!(depth_answer(&context(&[]), &p.text), Some(right.clone()));
        assert_eq!(depth_answer(&context(&[]), "What is 2 + 2?"), None);
        // A sliding window of M: the fact M words from the end is still in it.
        let at = fact.words_after.to_string();
        let deeper = (fact.words_after - 1).to_string();
        let window = |m: &str| context(&["--forget-deeper-than", m]);
        assert_eq!(depth_answer(&window(&at), &p.text), Some(right.clone()));
        assert_eq!(
            depth_answer(&window(&deeper), &p.text),
            Some(NOT_FOUND.into())
        );
        // Cut as --truncate-past-context cuts it: the fact's sentence whole, or gone.
        let keep = fact.words_after + 5;
        let kept = last_words(&[&p.text], keep);
        assert_eq!(depth_answer(&context(&[]), &kept), Some(right));
        let cut = last_words(&[&p.text], keep - 1);
        assert_eq!(
            depth_answer(&context(&[]), &cut),
            Some(NOT_FOUND.into()),
            "the question, no fact"
        );
    }

    #[test]
    fn prefill_and_the_prompt_s_tokens_follow_the_words() {
        let a = context(&["--prefill-us", "500", "--prompt-tokens-times", "0.3"]);
        assert_eq!(prefill(&a, 2000), Duration::from_secs(1));
        assert_eq!(prefill(&context(&[]), 2000), Duration::ZERO);
        assert_eq!(
            prefill(&context(&["--prefill-us", "1000000"]), u64::MAX),
            Duration::from_micros(u64::MAX),
            "no overflow"
        );
        assert_eq!(prompt_tokens(&a, 10), 3);
        assert_eq!(prompt_tokens(&a, 15), 5, "4.5 rounds away from zero");
        assert_eq!(prompt_tokens(&context(&[]), 123_457), 123_457);
    }

    #[test]
    fn the_deepest_depth_prompt_is_a_request_the_stand_in_reads() {
        let p = depth_prompt::make(depth_prompt::MAX_DEPTH, 0);
        let body = json!({"messages": [{"role": "user", "content": p.text}]}).to_string();
        assert!(
            body.len() * 2 < MOST_REQUEST_BYTES,
            "{} bytes against {MOST_REQUEST_BYTES}",
            body.len()
        );
    }

    #[test]
    fn garbage_is_n_tokens_of_it() {
        assert_eq!(garbage(3).concat(), "!!!!!!!!!!!!");
        assert!(garbage(0).is_empty());
        assert_eq!(
            MOST_GARBAGE_TOKENS, 65536,
            "--garble-past-context's help says it"
        );
    }
}
