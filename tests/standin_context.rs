//! The stand-in's context (issue 35), as the gate's `--depths` will meet it: a real stand-in
//! process, real chat completions over HTTP on loopback with the depth prompts the gate makes
//! (`depth_prompt::make`), and what comes back read whole: llama-server's /props and its
//! refusal of a prompt past the context, the faults that meet such a prompt instead, the
//! answers to depth prompts and the usage's count of the prompt. The prefill's delay is read
//! from the stand-in's own send trace, held to a lower bound alone: no upper bound on any
//! wall-clock figure.

use std::path::Path;
use std::time::Duration;

use npu_serve_smoke::depth_prompt::{self, DepthPrompt, FactInPrompt};
use npu_serve_smoke::standin::TraceLine;
use serde_json::{json, Value};

use crate::util::{gate, Running};

/// Bound on every wait here: a hang guard, wide, so a loaded 2-core box cannot flip a test.
const WAIT: Duration = Duration::from_secs(30);

/// What a depth prompt's reply says when the stand-in did not find its fact.
const NOT_FOUND: &str = "I could not find a secret code in the text.";

/// A stand-in process and a client that talks to it over loopback.
struct Serve {
    running: Running,
    url: String,
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
}

/// A reply read whole: its status, its content type and its body.
struct Reply {
    status: u16,
    content_type: String,
    text: String,
}

impl Serve {
    /// Start `stand-in --port 0 <script>` (short replies, quickly sent) and wait until it
    /// listens.
    fn start(script: &[&str]) -> Serve {
        let mut args = vec![
            "stand-in",
            "--port",
            "0",
            "--tokens",
            "16",
            "--ttft-ms",
            "1",
            "--gaps-ms",
            "0",
        ];
        args.extend_from_slice(script);
        let mut running = Running::start(&args);
        let url = running.stand_in_url(WAIT);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        Serve {
            running,
            url,
            rt,
            client,
        }
    }

    /// POST `body` to the chat completions; the reply read whole, or the error that ended it.
    fn try_post(&self, body: &Value) -> Result<Reply, reqwest::Error> {
        let req = self
            .client
            .post(format!("{}/v1/chat/completions", self.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        self.rt.block_on(async {
            tokio::time::timeout(WAIT, async {
                let resp = req.send().await?;
                let status = resp.status().as_u16();
                let content_type = resp
                    .headers()
                    .get("content-type")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                let text = resp.text().await?;
                Ok(Reply {
                    status,
                    content_type,
                    text,
                })
            })
            .await
            .expect("a reply within the hang guard")
        })
    }

    /// POST `body`; the reply, read whole.
    fn post(&self, body: &Value) -> Reply {
        self.try_post(body).unwrap()
    }

    /// GET `path`: the status and the body.
    fn get(&self, path: &str) -> (u16, String) {
        let req = self.client.get(format!("{}{path}", self.url));
        self.rt.block_on(async {
            let resp = tokio::time::timeout(WAIT, req.send())
                .await
                .unwrap()
                .unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        })
    }
}

/// A streamed chat request for `prompt` that asks for the usage, at most `max_tokens`.
fn streamed(prompt: &str, max_tokens: usize) -> Value {
    json!({"messages": [{"role": "user", "content": prompt}], "stream": true,
           "max_tokens": max_tokens, "stream_options": {"include_usage": true}})
}

/// The data of each SSE event of a streamed reply that is JSON.
fn events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// A streamed reply's answer, its content in one piece.
fn answer(text: &str) -> String {
    events(text)
        .iter()
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// A streamed reply's usage chunk's `usage`.
fn usage(text: &str) -> Value {
    events(text)
        .into_iter()
        .find_map(|v| v.get("usage").cloned())
        .unwrap_or_else(|| panic!("no usage chunk in {text}"))
}

/// The finish_reason a streamed reply ends with.
fn finish(text: &str) -> String {
    events(text)
        .iter()
        .find_map(|v| {
            v["choices"][0]["finish_reason"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no finish_reason in {text}"))
}

/// A depth prompt of about `depth` tokens and where its fact lies, as the stand-in reads it.
fn depth(depth: u32) -> (DepthPrompt, FactInPrompt) {
    let p = depth_prompt::make(depth, 0);
    let fact = depth_prompt::find_fact(&p.text).unwrap();
    (p, fact)
}

/// A prompt of `n` words (and no fact).
fn words(n: usize) -> String {
    vec!["word"; n].join(" ")
}

/// What a depth prompt's reply says when the stand-in found its fact.
fn right(p: &DepthPrompt) -> String {
    format!("The secret code is {}.", p.code)
}

#[test]
fn props_say_the_context_as_llama_server_does_and_are_404_without_one() {
    let serve = Serve::start(&[]);
    assert_eq!(serve.get("/props").0, 404);
    let serve = Serve::start(&["--context", "4096"]);
    let (status, body) = serve.get("/props");
    assert_eq!(status, 200, "{body}");
    let props: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        props,
        json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1})
    );
}

#[test]
fn a_depth_prompt_within_the_context_is_answered_with_its_code_and_its_words_counted() {
    let (p, fact) = depth(512);
    let serve = Serve::start(&["--context", "1000"]);
    let reply = serve.post(&streamed(&p.text, 16));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        answer(&reply.text).starts_with(&right(&p)),
        "{}",
        reply.text
    );
    let usage = usage(&reply.text);
    assert_eq!(usage["prompt_tokens"], fact.words, "{usage}");
    assert_eq!(usage["total_tokens"], fact.words + 16, "{usage}");
    // Not streamed: the same answer, the same count.
    let whole = serve.post(&json!({"messages": [{"role": "user", "content": p.text}]}));
    let v: Value = serde_json::from_str(&whole.text).unwrap();
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.starts_with(&right(&p)), "{content}");
    assert_eq!(v["usage"]["prompt_tokens"], fact.words);
}

#[test]
fn a_prompt_past_the_context_is_refused_with_llama_server_s_400_before_any_stream() {
    let (p, fact) = depth(512);
    let serve = Serve::start(&["--context", "100"]);
    let reply = serve.post(&streamed(&p.text, 16));
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.content_type, "application/json");
    let w = fact.words;
    assert_eq!(
        reply.text,
        format!(
            r#"{{"error":{{"code":400,"message":"request ({w} tokens) exceeds the available context size (100 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":{w},"n_ctx":100}}}}"#
        )
    );
    // The words of every user message count: two that fit alone do not fit together.
    let sixty = words(60);
    let two = json!({"messages": [
        {"role": "user", "content": sixty},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": sixty}]});
    let reply = serve.post(&two);
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(
        reply.text.contains(r#""n_prompt_tokens":120"#),
        "{}",
        reply.text
    );
    assert_eq!(serve.post(&streamed(&sixty, 4)).status, 200);
}

#[test]
fn garble_past_context_streams_garbage_to_max_tokens() {
    let (p, fact) = depth(512);
    let serve = Serve::start(&["--context", "100", "--garble-past-context"]);
    let reply = serve.post(&streamed(&p.text, 40));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(answer(&reply.text), "!!!!".repeat(40));
    assert_eq!(finish(&reply.text), "length");
    assert_eq!(usage(&reply.text)["prompt_tokens"], fact.words);
    // Within the context: a clean reply.
    let (short, _) = depth(64);
    let reply = serve.post(&streamed(&short.text, 16));
    assert!(
        answer(&reply.text).starts_with(&right(&short)),
        "{}",
        reply.text
    );
}

#[test]
fn answer_past_context_answers_as_if_the_prompt_fitted() {
    let (p, fact) = depth(512);
    let serve = Serve::start(&["--context", "100", "--answer-past-context"]);
    let reply = serve.post(&streamed(&p.text, 16));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        answer(&reply.text).starts_with(&right(&p)),
        "{}",
        reply.text
    );
    assert_eq!(usage(&reply.text)["prompt_tokens"], fact.words);
}

#[test]
fn truncate_past_context_answers_from_the_last_words_and_says_it_cut() {
    let (p, fact) = depth(2000);
    // The fact's sentence is five words ("The secret code is 4821."), then words_after.
    let kept = fact.words_after + 5;
    assert!(
        kept < fact.words,
        "the prompt is past both contexts: {fact:?}"
    );
    let serve = Serve::start(&["--context", &kept.to_string(), "--truncate-past-context"]);
    let reply = serve.post(&streamed(&p.text, 16));
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(
        answer(&reply.text).starts_with(&right(&p)),
        "{}",
        reply.text
    );
    assert_eq!(usage(&reply.text)["prompt_tokens"], kept);
    let cut = fact.words_after;
    let serve = Serve::start(&["--context", &cut.to_string(), "--truncate-past-context"]);
    let reply = serve.post(&streamed(&p.text, 16));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let said = answer(&reply.text);
    assert!(said.starts_with(NOT_FOUND), "{said}");
    assert!(!depth_prompt::found(&said, &p.code), "{said}");
    assert_eq!(usage(&reply.text)["prompt_tokens"], cut);
}

#[test]
fn crash_past_context_ends_the_stand_in_on_such_a_prompt() {
    let (p, _) = depth(512);
    let mut serve = Serve::start(&["--context", "100", "--crash-past-context"]);
    assert_eq!(serve.post(&streamed("hi", 4)).status, 200, "a short prompt");
    assert!(!serve.running.exited());
    let got = serve.try_post(&streamed(&p.text, 16));
    assert!(got.is_err(), "a reply came: {:?}", got.map(|r| r.text));
    assert_eq!(serve.running.wait(WAIT), Some(1), "{}", serve.running.said);
    assert!(
        serve.running.said.contains("past its context of 100"),
        "{}",
        serve.running.said
    );
}

#[test]
fn forget_deeper_than_forgets_a_deep_fact_and_finds_a_shallow_one() {
    let (shallow, near) = depth(100);
    let (deep, far) = depth(4000);
    // A window as long as the shallow prompt: its fact is inside, the deep one's is not.
    let window = near.words;
    assert!(near.words_after <= window && far.words_after > window);
    let serve = Serve::start(&["--forget-deeper-than", &window.to_string()]);
    let reply = serve.post(&streamed(&shallow.text, 16));
    assert!(
        answer(&reply.text).starts_with(&right(&shallow)),
        "{}",
        reply.text
    );
    let reply = serve.post(&streamed(&deep.text, 16));
    assert_eq!(reply.status, 200, "{}", reply.text);
    let said = answer(&reply.text);
    assert!(said.starts_with(NOT_FOUND), "{said}");
    assert!(!depth_prompt::found(&said, &deep.code), "{said}");
}

/// Each chat completion request's wait for its first event, in arrival order, from the
/// stand-in's own trace, once it holds `replies` whole replies (replies made one after
/// another, so a request's first event is the first after its line).
fn first_event_waits(trace: &Path, replies: usize) -> Vec<Duration> {
    // A trace line is written once its write has returned, which may be after the client has
    // read the bytes: waited for, bounded, rather than read at once.
    let start = std::time::Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(trace).unwrap();
        if text.matches(r#""done":true"#).count() >= replies {
            break text;
        }
        assert!(
            start.elapsed() < WAIT,
            "{replies} replies not traced: {text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut waits = Vec::new();
    let mut received = None;
    for line in text.lines() {
        match serde_json::from_str(line).unwrap() {
            TraceLine::Request { received_ns, .. } => received = Some(received_ns),
            TraceLine::Event { sent_ns, .. } => {
                if let Some(r) = received.take() {
                    waits.push(Duration::from_nanos(sent_ns - r));
                }
            }
            TraceLine::Altered { .. } => {}
        }
    }
    waits
}

#[test]
fn prefill_makes_a_long_prompt_s_first_token_later_than_a_short_one_s() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let serve = Serve::start(&["--prefill-us", "500", "--trace", trace.to_str().unwrap()]);
    let short = words(10);
    let long = words(2000);
    for prompt in [&short, &long] {
        assert_eq!(serve.post(&streamed(prompt, 4)).status, 200);
    }
    let waits = first_event_waits(&trace, 2);
    assert_eq!(waits.len(), 2, "{waits:?}");
    // 1 s of prefill against 5 ms: a lower bound on the difference only, which a slow box
    // cannot close (it would have to slow the short reply alone by 0.7 s).
    assert!(
        waits[1].saturating_sub(waits[0]) >= Duration::from_millis(300),
        "{waits:?}"
    );
}

#[test]
fn prompt_tokens_times_reports_a_count_far_from_the_words() {
    let (p, fact) = depth(512);
    let serve = Serve::start(&["--prompt-tokens-times", "0.3"]);
    let reply = serve.post(&streamed(&words(10), 4));
    assert_eq!(usage(&reply.text)["prompt_tokens"], 3);
    let reply = serve.post(&streamed(&p.text, 16));
    let want = (fact.words as f64 * 0.3).round() as u64;
    assert_eq!(usage(&reply.text)["prompt_tokens"], want);
    // The answer itself is untouched.
    assert!(
        answer(&reply.text).starts_with(&right(&p)),
        "{}",
        reply.text
    );
    // --no-usage still sends none.
    let quiet = Serve::start(&["--no-usage"]);
    let reply = quiet.post(&streamed("hi", 4));
    assert!(!reply.text.contains("prompt_tokens"), "{}", reply.text);
}

#[test]
fn bad_context_settings_are_refused_in_one_line() {
    for bad in [
        &["--context", "0"][..],
        &["--context", "-5"],
        &["--context", "many"],
        &["--prefill-us", "1000001"],
        &["--prefill-us", "-1"],
        &["--prompt-tokens-times", "0"],
        &["--prompt-tokens-times", "-0.5"],
        &["--prompt-tokens-times", "NaN"],
        &["--prompt-tokens-times", "inf"],
        &["--forget-deeper-than", "-1"],
        &["--garble-past-context"],
        &["--crash-past-context"],
        &[
            "--context",
            "10",
            "--truncate-past-context",
            "--answer-past-context",
        ],
    ] {
        let o = gate()
            .args(["stand-in", "--port", "0"])
            .args(bad)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {stderr}");
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
            .collect();
        assert_eq!(lines.len(), 1, "{bad:?}: {stderr}");
        let flag = bad.iter().rev().find(|a| a.starts_with("--")).unwrap();
        assert!(lines[0].contains(flag), "{bad:?}: {stderr}");
    }
}
