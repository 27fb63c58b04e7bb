//! The stand-in's tool calls and structured output, as a client meets them: a real stand-in
//! process, streamed chat completions with `tools`, `tool_choice` and `response_format` over
//! HTTP on loopback, the SSE read back and the `tool_calls` deltas put together as a client
//! does (by index: the first delta's id and name, then the arguments' fragments); and each
//! flag that breaks a rule, shown breaking it on the wire.

use std::time::Duration;

use serde_json::{json, Value};

use crate::util::Running;

/// Bound on every wait here: a hang guard, wide, so a loaded box cannot flip a test.
const WAIT: Duration = Duration::from_secs(30);

/// The prompt the calls answer: it mentions the weather and the time, and Paris last.
const PROMPT: &str = "What is the weather and the time in Paris?";

/// A stand-in process on loopback.
struct Serve {
    _running: Running,
    url: String,
}

/// Start `stand-in --port 0 <flags>`, quickly sent, and wait until it listens.
fn serve(flags: &[&str]) -> Serve {
    let mut args = vec![
        "stand-in",
        "--port",
        "0",
        "--ttft-ms",
        "1",
        "--gaps-ms",
        "0",
    ];
    args.extend_from_slice(flags);
    let mut running = Running::start(&args);
    let url = running.stand_in_url(WAIT);
    Serve {
        _running: running,
        url,
    }
}

/// Two functions: `get_weather` (a city and a unit required) and `get_current_time`.
fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather",
          "parameters": {"type": "object", "properties": {
            "location": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}},
          "required": ["location", "unit"]}}},
        {"type": "function", "function": {"name": "get_current_time",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    ])
}

/// A streamed request for `prompt` asking for the usage, with `extra`'s fields.
fn request(prompt: &str, extra: Value) -> Value {
    let mut body = json!({"messages": [{"role": "user", "content": prompt}], "stream": true,
                          "stream_options": {"include_usage": true}});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

/// A streamed reply, read whole: its events (the JSON of each `data:` line before [DONE]).
struct Streamed {
    events: Vec<Value>,
}

impl Streamed {
    /// Every choice 0 delta, in order.
    fn deltas(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter_map(|e| e["choices"].get(0).map(|c| &c["delta"]))
            .collect()
    }

    /// Every `tool_calls` entry of the deltas, in order.
    fn call_parts(&self) -> Vec<&Value> {
        self.deltas()
            .into_iter()
            .filter_map(|d| d["tool_calls"].as_array())
            .flatten()
            .collect()
    }

    /// The calls put together by index: (id, name, arguments text), in index order.
    fn calls(&self) -> Vec<(String, String, String)> {
        let mut calls: Vec<(u64, String, String, String)> = Vec::new();
        for part in self.call_parts() {
            let index = part["index"]
                .as_u64()
                .expect("every tool_calls entry has an index");
            let at = match calls.iter().position(|c| c.0 == index) {
                Some(at) => at,
                None => {
                    calls.push((index, String::new(), String::new(), String::new()));
                    calls.len() - 1
                }
            };
            let call = &mut calls[at];
            if let Some(id) = part["id"].as_str() {
                call.1 = id.to_string();
            }
            if let Some(name) = part["function"]["name"].as_str() {
                call.2 = name.to_string();
            }
            call.3 += part["function"]["arguments"].as_str().unwrap_or("");
        }
        calls.sort_by_key(|c| c.0);
        calls.into_iter().map(|(_, id, n, a)| (id, n, a)).collect()
    }

    /// The content the deltas carry, joined.
    fn content(&self) -> String {
        self.deltas()
            .iter()
            .filter_map(|d| d["content"].as_str())
            .collect()
    }

    /// The finish chunk's choice: its delta and finish_reason.
    fn finish(&self) -> (&Value, &str) {
        let last = self
            .events
            .iter()
            .filter_map(|e| e["choices"].get(0))
            .find(|c| c["finish_reason"].is_string())
            .expect("a finish chunk");
        (&last["delta"], last["finish_reason"].as_str().unwrap())
    }
}

impl Serve {
    /// POST `body` to the chat completions; the JSON body (not streamed) or the text.
    fn post_text(&self, body: &Value) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let req = client
            .post(format!("{}/v1/chat/completions", self.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        rt.block_on(async {
            tokio::time::timeout(WAIT, async { req.send().await?.text().await })
                .await
                .expect("a reply within the hang guard")
                .unwrap()
        })
    }

    /// POST a streamed `body`; its events, up to [DONE].
    fn stream(&self, body: &Value) -> Streamed {
        let text = self.post_text(body);
        assert!(text.contains("data: [DONE]"), "{text}");
        let events = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .take_while(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
            .collect();
        Streamed { events }
    }
}

/// A call as (id, name, arguments parsed).
fn parsed(calls: Vec<(String, String, String)>) -> Vec<(String, String, Value)> {
    calls
        .into_iter()
        .map(|(id, name, args)| {
            let v = serde_json::from_str(&args).unwrap_or_else(|e| panic!("{e}: {args}"));
            (id, name, v)
        })
        .collect()
}

fn weather() -> Value {
    json!({"location": "Paris", "unit": "celsius"})
}

#[test]
fn the_mentioned_tools_are_called_in_deltas_a_client_puts_back_together() {
    let s = serve(&[]);
    let r = s.stream(&request(PROMPT, json!({"tools": tools()})));
    assert_eq!(
        parsed(r.calls()),
        [
            ("call_1_0".into(), "get_weather".into(), weather()),
            (
                "call_1_1".into(),
                "get_current_time".into(),
                json!({"city": "Paris"})
            ),
        ]
    );
    // Each call opens with its id, type and name and empty arguments; fragments follow, 4
    // characters at most, a chunk (and a token) each.
    let parts = r.call_parts();
    assert_eq!(parts[0]["type"], "function");
    assert_eq!(parts[0]["function"]["arguments"], "");
    assert!(r.deltas()[0]["content"].is_null());
    assert!(parts.iter().all(|p| {
        p["function"]["arguments"]
            .as_str()
            .is_some_and(|a| a.chars().count() <= 4)
    }));
    assert_eq!(r.finish().1, "tool_calls");
    let usage = &r.events.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], parts.len());
    // Not streamed: the calls whole, no content.
    let mut whole = request(PROMPT, json!({"tools": tools(), "stream": false}));
    whole.as_object_mut().unwrap().remove("stream_options");
    let body: Value = serde_json::from_str(&s.post_text(&whole)).unwrap();
    let message = &body["choices"][0]["message"];
    assert!(message["content"].is_null(), "{body}");
    assert_eq!(message["tool_calls"][0]["id"], "call_2_0");
    let args = message["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(args).unwrap(), weather());
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn tool_choice_calls_none_the_named_one_or_the_first_when_required() {
    let s = serve(&[]);
    let names = |prompt: &str, choice: Value| {
        let r = s.stream(&request(
            prompt,
            json!({"tools": tools(), "tool_choice": choice}),
        ));
        let names: Vec<String> = r.calls().into_iter().map(|c| c.1).collect();
        (names, r.finish().1.to_string(), r.content())
    };
    let (none, finish, content) = names(PROMPT, json!("none"));
    assert!(none.is_empty());
    assert_eq!(finish, "stop");
    assert!(content.starts_with("I am the stand-in serve."), "{content}");
    let named = json!({"type": "function", "function": {"name": "get_current_time"}});
    assert_eq!(names(PROMPT, named).0, ["get_current_time"]);
    assert_eq!(names("Hello there", json!("required")).0, ["get_weather"]);
    assert!(names("Hello there", json!("auto")).0.is_empty());
    // Malformed: read as absent, never refused.
    let junk = json!({"tools": "junk", "tool_choice": 7, "response_format": [1]});
    assert_eq!(s.stream(&request(PROMPT, junk)).finish().1, "stop");
}

#[test]
fn json_mode_content_parses_and_a_call_wins_over_it() {
    let s = serve(&[]);
    let object = json!({"response_format": {"type": "json_object"}});
    let r = s.stream(&request("Hello there", object));
    let v: Value = serde_json::from_str(&r.content()).unwrap();
    let answer = v["answer"].as_str().unwrap();
    assert!(answer.starts_with("I am the stand-in serve."), "{v}");
    assert_eq!(r.finish().1, "stop");
    let r = s.stream(&request(PROMPT, json!({"response_format": schema()})));
    let v: Value = serde_json::from_str(&r.content()).unwrap();
    assert_eq!(v, json!({"city": "Paris", "days": 1}));
    let both = json!({"tools": tools(), "response_format": schema()});
    assert_eq!(s.stream(&request(PROMPT, both)).calls().len(), 2);
}

/// A json_schema response_format: a city and days, both required.
fn schema() -> Value {
    json!({"type": "json_schema", "json_schema": {"name": "trip", "schema": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"]}}})
}

/// The stream of `PROMPT`'s calls from a stand-in with `flags`.
fn broken(flags: &[&str]) -> Streamed {
    serve(flags).stream(&request(PROMPT, json!({"tools": tools()})))
}

#[test]
fn tool_args_not_json_sends_arguments_that_do_not_parse() {
    let calls = broken(&["--tool-args-not-json"]).calls();
    assert_eq!(calls[0].2, r#"{"location":"Paris","unit":"celsius""#);
    assert!(calls
        .iter()
        .all(|c| serde_json::from_str::<Value>(&c.2).is_err()));
}

#[test]
fn tool_markup_in_content_writes_the_call_as_text() {
    let r = broken(&["--tool-markup-in-content"]);
    assert!(r.call_parts().is_empty());
    let content = r.content();
    assert!(
        content.starts_with("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {"),
        "{content}"
    );
    assert_eq!(content.matches("</tool_call>").count(), 2);
    let (delta, finish) = r.finish();
    assert_eq!((delta["tool_calls"].clone(), finish), (json!([]), "stop"));
}

#[test]
fn tool_index_zero_streams_every_call_at_index_zero() {
    let r = broken(&["--tool-index-zero"]);
    let parts = r.call_parts();
    assert!(parts.iter().all(|p| p["index"] == 0));
    let ids: Vec<&str> = parts.iter().filter_map(|p| p["id"].as_str()).collect();
    assert_eq!(ids, ["call_1_0", "call_1_1"]);
    // Put together by index, the two calls are one, with both calls' arguments run together.
    assert_eq!(r.calls().len(), 1);
}

#[test]
fn tool_args_dropped_leaves_later_calls_without_arguments() {
    let calls = broken(&["--tool-args-dropped"]).calls();
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).unwrap(),
        weather()
    );
    assert_eq!(calls[1].2, "");
    // With one call, that call's.
    let named = json!({"type": "function", "function": {"name": "get_weather"}});
    let one = serve(&["--tool-args-dropped"]).stream(&request(
        PROMPT,
        json!({"tools": tools(), "tool_choice": named}),
    ));
    assert_eq!(one.calls()[0].2, "");
}

#[test]
fn tool_wrong_name_names_the_next_function() {
    let names: Vec<String> = broken(&["--tool-wrong-name"])
        .calls()
        .into_iter()
        .map(|c| c.1)
        .collect();
    assert_eq!(names, ["get_current_time", "get_weather"]);
    let one = json!({"tools": [tools()[0].clone()]});
    let r = serve(&["--tool-wrong-name"]).stream(&request(PROMPT, one));
    assert_eq!(r.calls()[0].1, "get_weather_v2");
}

#[test]
fn tool_finish_stop_ends_a_call_with_stop() {
    let r = broken(&["--tool-finish-stop"]);
    assert_eq!(r.calls().len(), 2);
    assert_eq!(r.finish().1, "stop");
}

#[test]
fn tool_same_id_gives_every_call_the_first_calls_id() {
    let ids: Vec<String> = broken(&["--tool-same-id"])
        .calls()
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(ids, ["call_1_0", "call_1_0"]);
}

#[test]
fn tool_no_call_answers_text_and_fault_request_spares_the_others() {
    let s = serve(&["--tool-no-call", "--fault-request", "2"]);
    let body = request(PROMPT, json!({"tools": tools()}));
    assert_eq!(s.stream(&body).calls().len(), 2, "request 1 is clean");
    let r = s.stream(&body);
    assert!(r.call_parts().is_empty());
    assert_eq!(r.finish().1, "stop");
    assert!(r.content().starts_with("I am the stand-in serve."));
}

#[test]
fn json_off_schema_parses_but_leaves_the_schema() {
    let s = serve(&["--json-off-schema"]);
    let r = s.stream(&request(PROMPT, json!({"response_format": schema()})));
    assert_eq!(
        serde_json::from_str::<Value>(&r.content()).unwrap(),
        json!({})
    );
    let object = json!({"response_format": {"type": "json_object"}});
    let r = s.stream(&request(PROMPT, object));
    assert_eq!(
        serde_json::from_str::<Value>(&r.content()).unwrap(),
        json!([])
    );
}

#[test]
fn json_not_json_sends_content_that_does_not_parse() {
    let r =
        serve(&["--json-not-json"]).stream(&request(PROMPT, json!({"response_format": schema()})));
    assert_eq!(r.content(), r#"{"city":"Paris","days":1"#);
    assert!(serde_json::from_str::<Value>(&r.content()).is_err());
}
