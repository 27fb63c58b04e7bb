//! Tools and formats (issue 36): each reply to a prompt with tools or a response format held to
//! what its prompt asked. A run of four such prompts answered right passes; each case after it
//! breaks one reply by one rule, and the tools line fails naming that rule alone while every
//! other line reads as the right run's. The tools line is never timing: a busy box with
//! --busy-skip does not excuse it.

use crate::archive::check::Check;
use serde_json::{json, Value};

use crate::archive::record::{ReplyRecord, RunManifest, ToolCallRecord};
use crate::judging::verdict::{Outcome, Status};
use crate::prompts::Prompt;

use super::case::Case;
use super::parts::{base, good, greedy_manifest, load_per_cpu, numbered, slow};

/// The prompts' places in run.json, each answered by the reply one above it (reply 1 answers
/// place 0). WEATHER offers the tools and expects `get_weather` with `{"city": "Paris"}`.
const WEATHER: usize = 0;
/// Offers the tools and expects no call.
const GREETING: usize = 1;
/// Offers the tools with `tool_choice` "auto" and expects nothing in particular.
const TIME: usize = 2;
/// Asks for JSON by a `json_schema` response format: `{"capital": string}`.
const CAPITAL: usize = 3;

/// The prompts' texts, by place.
const PROMPTS: [&str; 4] = [
    "What is the weather in Paris?",
    "Say hello.",
    "What time is it in Tokyo?",
    "What is the capital of France? Answer in JSON.",
];

/// Right arguments for the weather.
const PARIS: &str = r#"{"city": "Paris"}"#;

/// The two functions the tool prompts offer: `get_weather` needs a city, `get_time` takes a
/// zone.
fn tools() -> Value {
    let function = |name: &str, property: &str, required: Value| {
        json!({"type": "function", "function": {"name": name, "parameters": {"type": "object",
            "properties": {property: {"type": "string"}}, "required": required}}})
    };
    json!([
        function("get_weather", "city", json!(["city"])),
        function("get_time", "zone", json!([])),
    ])
}

/// The prompt at place `at`, its fields as a prompts file gives them.
fn prompt(at: usize) -> Prompt {
    let fields = match at {
        WEATHER => json!({"tools": tools(),
            "expect_tool": {"name": "get_weather", "arguments": {"city": "Paris"}}}),
        GREETING => json!({"tools": tools(), "expect_tool": "none"}),
        TIME => json!({"tools": tools(), "tool_choice": "auto"}),
        _ => json!({"response_format": {"type": "json_schema", "json_schema": {"name": "capital",
            "schema": {"type": "object", "properties": {"capital": {"type": "string"}},
            "required": ["capital"]}}}, "expect_json": true}),
    };
    let mut p = json!({"prompt": PROMPTS[at]});
    if let (Some(p), Value::Object(fields)) = (p.as_object_mut(), fields) {
        p.extend(fields);
    }
    serde_json::from_value(p).expect("a hand-made prompt")
}

/// run.json of the four prompts, one reply each.
fn manifest() -> RunManifest {
    let mut m = greedy_manifest();
    m.prompts = (0..PROMPTS.len()).map(prompt).collect();
    m.replies_planned = PROMPTS.len();
    m
}

/// A call streamed right: an index of its own and an id of its own, in three fragments.
fn call(index: u64, name: &str, arguments: &str) -> ToolCallRecord {
    ToolCallRecord {
        index: Some(index),
        id: Some(format!("call_{index}")),
        name: name.into(),
        arguments: arguments.into(),
        fragments: 3,
    }
}

/// The reply to the prompt at `at`, timed as the base case's (100 tok/s, first token at 200
/// ms): `content` and `calls`, ending with `finish`. A reply of calls alone streamed its calls'
/// fragments as its text events.
fn answer(at: usize, content: &str, calls: Vec<ToolCallRecord>, finish: &str) -> ReplyRecord {
    let mut r = good();
    r.prompt = PROMPTS[at].into();
    r.tools_prompt = Some(at);
    r.content = content.into();
    if content.is_empty() {
        for c in &mut r.chunks {
            c.content_chars = 0;
            c.tool_chars = 1;
        }
    }
    r.tool_calls = calls;
    r.finish_reason = Some(finish.into());
    r
}

/// The right reply to a call prompt: `calls`, ending with "tool_calls".
fn calls(at: usize, calls: Vec<ToolCallRecord>) -> ReplyRecord {
    answer(at, "", calls, "tool_calls")
}

/// The right reply to each prompt, in order: the weather asked for, a greeting without a call,
/// the time asked for, and the capital as JSON of its schema.
fn right() -> Vec<ReplyRecord> {
    vec![
        calls(WEATHER, vec![call(0, "get_weather", PARIS)]),
        answer(GREETING, "Hello!", vec![], "stop"),
        calls(TIME, vec![call(0, "get_time", r#"{"zone": "Asia/Tokyo"}"#)]),
        answer(CAPITAL, r#"{"capital": "Paris"}"#, vec![], "stop"),
    ]
}

/// The base case with `replies` to the four prompts: every line but tools as the base case's,
/// over four replies.
fn tools_case(name: &'static str, replies: Vec<ReplyRecord>) -> Case {
    let mut c = base(name);
    c.replies = numbered(replies);
    c.manifest = Some(manifest());
    c.expect = vec![
        (Check::Route, Status::Ok, "names the fast route"),
        (
            Check::Rate,
            Status::Ok,
            "median 100.0 tok/s over 4 replies (floor 60.0",
        ),
        (
            Check::FirstToken,
            Status::Ok,
            "median 200 ms over 4 replies (limit 600)",
        ),
        (Check::Content, Status::Ok, "4 replies, all with content"),
    ];
    c
}

/// The right replies with the one to the prompt at `at` replaced by `wrong`: the tools line
/// fails saying `says` (which names the reply and the rule), and nothing else.
fn broken(name: &'static str, at: usize, wrong: ReplyRecord, says: &'static str) -> Case {
    let mut replies = right();
    replies[at] = wrong;
    let mut c = tools_case(name, replies);
    c.expect.push((Check::Tools, Status::Fail, says));
    // A second fault would follow the first as "; reply N [...]".
    c.refuse = vec![(Check::Tools, "; reply")];
    c.outcome = Outcome::Fail;
    c
}

/// The tools line: the right run passes, and each rule fails on its own fault.
pub(crate) fn cases() -> Vec<Case> {
    let mut c = tools_case(
        "right tool calls, no call where none is expected and a right JSON answer pass tools",
        right(),
    );
    c.expect.push((Check::Tools,
        Status::Ok,
        "4 replies to prompts with tools or formats: 2 tool calls, each named and its arguments valid; 1 without a call as expected; 1 JSON answer valid",
    ));
    let mut cases = vec![c];
    cases.extend(calls_made());
    cases.extend(arguments());
    cases.extend(streamed());
    cases.extend(json_answers());
    cases
}

/// The calls made against the ones expected and offered, and markup left in the content.
fn calls_made() -> Vec<Case> {
    vec![
        broken(
            "a tool call left as markup in the content fails tools [markup]",
            GREETING,
            answer(
                GREETING,
                "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
                vec![],
                "stop",
            ),
            "reply 2 [markup]: its content holds the tool call marker \"<tool_call>\" (Hermes 2 Pro, Qwen 2.5) and 0 tool calls",
        ),
        broken(
            "an answer in words where a call is expected fails tools [no call]",
            WEATHER,
            answer(WEATHER, "It is sunny in Paris.", vec![], "stop"),
            "reply 1 [no call]: it called no tool; \"get_weather\" was expected (it said \"It is sunny in Paris.\")",
        ),
        broken(
            "a call where none is expected fails tools [unexpected call]",
            GREETING,
            calls(GREETING, vec![call(0, "get_time", "{}")]),
            "reply 2 [unexpected call]: it called \"get_time\" where no call was expected",
        ),
        broken(
            "a call of another function offered fails tools [wrong tool]",
            WEATHER,
            calls(WEATHER, vec![call(0, "get_time", "{}")]),
            "reply 1 [wrong tool]: it called \"get_time\"; \"get_weather\" was expected",
        ),
        broken(
            "a call of a function not offered fails tools [not offered]",
            TIME,
            calls(TIME, vec![call(0, "get_news", "{}")]),
            "reply 3 [not offered]: it called \"get_news\", which its prompt did not offer",
        ),
    ]
}

/// Each call's arguments: JSON, of its function's parameters, and as expected.
fn arguments() -> Vec<Case> {
    vec![
        broken(
            "arguments cut short of JSON fail tools [arguments]",
            WEATHER,
            calls(WEATHER, vec![call(0, "get_weather", r#"{"city": "Paris""#)]),
            "reply 1 [arguments]: its call of \"get_weather\" has arguments that are not JSON (EOF while parsing",
        ),
        broken(
            "empty arguments fail tools [arguments]",
            TIME,
            calls(TIME, vec![call(0, "get_time", "")]),
            "reply 3 [arguments]: its call of \"get_time\" has empty arguments (not JSON; a call without arguments sends {})",
        ),
        broken(
            "arguments off the function's parameters fail tools [arguments]",
            TIME,
            calls(TIME, vec![call(0, "get_weather", r#"{"town": "Tokyo"}"#)]),
            "reply 3 [arguments]: its call of \"get_weather\" has arguments \"{\\\"town\\\": \\\"Tokyo\\\"}\" that do not satisfy its parameters: \"city\" is a required property",
        ),
        // vLLM's hermes parser with SmolLM2 (issue 51): the model's bare value as arguments.
        broken(
            "arguments that are a JSON string where an object is due fail tools [arguments]",
            WEATHER,
            calls(WEATHER, vec![call(0, "get_weather", r#""Paris""#)]),
            "reply 1 [arguments]: its call of \"get_weather\" has arguments that are a JSON string, not a JSON object: \"\\\"Paris\\\"\"",
        ),
        broken(
            "arguments other than the values expected fail tools [expected arguments]",
            WEATHER,
            calls(WEATHER, vec![call(0, "get_weather", r#"{"city": "Rome"}"#)]),
            "reply 1 [expected arguments]: its call of \"get_weather\" has arguments \"{\\\"city\\\": \\\"Rome\\\"}\" that are not as expected: they are not \"{\\\"city\\\":\\\"Paris\\\"}\"",
        ),
    ]
}

/// How the calls were streamed: the finish_reason, an index and an id each, none shared.
fn streamed() -> Vec<Case> {
    let weather = |a: ToolCallRecord, b: ToolCallRecord| calls(WEATHER, vec![a, b]);
    let bare = |index: Option<u64>, id: Option<String>| ToolCallRecord {
        index,
        id,
        ..call(0, "get_weather", PARIS)
    };
    vec![
        broken(
            "a reply that calls ending with \"stop\" fails tools [finish_reason]",
            WEATHER,
            answer(WEATHER, "", vec![call(0, "get_weather", PARIS)], "stop"),
            "reply 1 [finish_reason]: it called \"get_weather\" but ended with finish_reason \"stop\", not \"tool_calls\"",
        ),
        broken(
            "two calls streamed at one index fail tools [index]",
            WEATHER,
            weather(
                call(0, "get_weather", PARIS),
                ToolCallRecord {
                    id: Some("call_1".into()),
                    ..call(0, "get_weather", PARIS)
                },
            ),
            "reply 1 [index]: it streamed 2 calls at index 0 (\"get_weather\", \"get_weather\")",
        ),
        broken(
            "a call streamed without an index fails tools [index]",
            WEATHER,
            calls(WEATHER, vec![bare(None, Some("call_0".into()))]),
            "reply 1 [index]: its call of \"get_weather\" was streamed without an index",
        ),
        broken(
            "a call without an id fails tools [id]",
            WEATHER,
            calls(WEATHER, vec![bare(Some(0), None)]),
            "reply 1 [id]: its call of \"get_weather\" has no id",
        ),
        broken(
            "two calls of one id fail tools [id]",
            WEATHER,
            weather(
                call(0, "get_weather", PARIS),
                ToolCallRecord {
                    index: Some(1),
                    ..call(0, "get_weather", PARIS)
                },
            ),
            "reply 1 [id]: it gave 2 calls the id \"call_0\"",
        ),
    ]
}

/// A JSON answer: JSON, of its schema; and a busy box, which excuses none of it.
fn json_answers() -> Vec<Case> {
    let fenced = "```json\n{\"capital\": \"Paris\"}\n```";
    let off = r#"{"city": "Paris"}"#;
    let mut cases = vec![
        broken(
            "a JSON answer in a code fence fails tools [json]",
            CAPITAL,
            answer(CAPITAL, fenced, vec![], "stop"),
            "reply 4 [json]: its content is not JSON (in a code fence)",
        ),
        broken(
            "a JSON answer off its schema fails tools [json]",
            CAPITAL,
            answer(CAPITAL, off, vec![], "stop"),
            "reply 4 [json]: its content does not satisfy its schema: \"capital\" is a required property",
        ),
    ];

    // Slow as well as broken, on a box busy enough that --busy-skip would excuse the slowness
    // alone: the tools line is not timing, so the run fails and the load line blames nothing.
    let mut replies = right();
    replies[CAPITAL] = answer(CAPITAL, fenced, vec![], "stop");
    let slow_at = slow();
    for r in &mut replies {
        for (c, s) in r.chunks.iter_mut().zip(&slow_at.chunks) {
            c.at_ns = s.at_ns;
        }
        r.end_ns = slow_at.end_ns;
    }
    let mut c = tools_case(
        "a tools failure is never excused by a busy box, even with --busy-skip",
        replies,
    );
    c.load = Some(load_per_cpu(10.0));
    c.floors.busy_skip = Some(0.5);
    c.expect = vec![
        (
            Check::Rate,
            Status::Fail,
            "median 50.0 tok/s over 4 replies",
        ),
        (
            Check::Tools,
            Status::Fail,
            "reply 4 [json]: its content is not JSON (in a code fence)",
        ),
    ];
    c.refuse = vec![(Check::Load, "busy box"), (Check::Load, "quiet")];
    c.outcome = Outcome::Fail;
    cases.push(c);
    cases
}
