//! The tools line (issue 36): every reply to a prompt with tools or a response format, held to
//! what its prompt asked ([`crate::tool_spec`]). Judged: never timing, never excused by load.
//!
//! Agents call serves with tools and schemas, and that is where serves regress between builds
//! without failing a plain chat: arguments streamed as invalid JSON (openvinotoolkit/
//! model_server#3838), the call left as markup in the content with `tool_calls: []`
//! (model_server#4268), every streamed call at index 0 (ggml-org/llama.cpp#18591), arguments
//! dropped after a call with empty ones (vllm-project/vllm#47901). The rules are those of
//! lemonade-sdk/lemonade's test/server_tool_calling.py and a few more, each named in a FAIL:
//!
//! - `markup`: no tool call markup of a chat template left in the content ([`MARKERS`]);
//! - `no call`, `unexpected call`, `wrong tool`, `not offered`: the calls made are the ones
//!   expected (`expect_tool`), each of a function the prompt offered;
//! - `arguments`: each call's arguments parse as JSON and satisfy its function's own
//!   `parameters`; `expected arguments`: and the expectation's schema or values;
//! - `finish_reason`: a reply that calls ends with `tool_calls`;
//! - `index`, `id`: each call streamed with an index and an id of its own;
//! - `json`: the content of a reply that must be JSON (`expect_json`) parses, and satisfies
//!   its schema and the `json_schema` response format's.
//!
//! A reply that failed is the content line's; it is left out here.

use serde_json::Value;

use crate::archive::check::Check;
use crate::archive::record::{Line, ReplyRecord, RunManifest, Status, ToolCallRecord};
use crate::judging::verdict::content::quote;
use crate::prompts::Prompt;
use crate::tool_spec::{same_json, ArgsExpect, CallExpect, Expected, JsonExpect, Spec};

/// The markers of tool calls in the chat templates llama.cpp parses, each with the model
/// family it is of and where it is read: a serve that leaves one in `content` did not parse
/// the call it made. Each is a literal in ggml-org/llama.cpp `common/chat-parser.cpp` (the
/// function named), except where said.
pub const MARKERS: [(&str, &str); 13] = [
    // common_chat_parse_hermes_2_pro
    ("<tool_call>", "Hermes 2 Pro, Qwen 2.5"),
    // common_chat_parse_hermes_2_pro, common_chat_parse_functionary_v3_1_llama_3_1
    ("<function=", "Functionary v3.1, Hermes 2 Pro"),
    // common_chat_parse_mistral_nemo, common_chat_parse_magistral
    ("[TOOL_CALLS]", "Mistral Nemo, Magistral"),
    // common_chat_parse_llama_3_1
    ("<|python_tag|>", "Llama 3.1"),
    // common_chat_parse_deepseek_r1
    ("<｜tool▁calls▁begin｜>", "DeepSeek R1"),
    ("<｜tool▁call▁begin｜>", "DeepSeek R1"),
    // common_chat_parse_granite; models/templates/llama-cpp-microsoft-Phi-4-mini-instruct.jinja
    ("<|tool_call|>", "Granite, Phi-4-mini"),
    // common_chat_parse_firefunction_v2
    (" functools[", "FireFunction v2"),
    // common_chat_parse_kimi_k2
    ("<|tool_calls_section_begin|>", "Kimi K2"),
    // common_chat_parse_glm_4_5
    ("<arg_key>", "GLM 4.5"),
    // common_chat_parse_gpt_oss
    (" to=functions.", "gpt-oss"),
    // common_chat_parse_command_r7b
    ("<|START_ACTION|>", "Command R7B"),
    // google-ai-edge/LiteRT-LM runtime/components/constrained_decoding/llguidance_schema_utils.h
    ("<start_function_call>", "FunctionGemma"),
];

/// Faults named in the line; the rest are counted.
const NAMED: usize = 4;
/// Characters of arguments or content quoted in a fault.
const QUOTED: usize = 80;

/// What one reply was held to, for the line's summary.
#[derive(Default)]
struct Tally {
    replies: usize,
    calls: usize,
    json: usize,
    no_call: usize,
    failed: usize,
}

/// The tools line, when a prompt of the run has tools or a response format (or a reply is
/// marked as answering one).
pub fn tools_line(replies: &[ReplyRecord], manifest: Option<&RunManifest>) -> Option<Line> {
    let prompts = manifest.map_or(&[][..], |m| &m.prompts[..]);
    let asked = prompts.iter().any(Prompt::asks_tools);
    let marked: Vec<&ReplyRecord> = replies
        .iter()
        .filter(|r| r.tools_prompt.is_some())
        .collect();
    if !asked && marked.is_empty() {
        return None;
    }
    let specs: Vec<Option<Result<Spec, String>>> = prompts
        .iter()
        .map(|p| Spec::of(p.tool_fields()).transpose())
        .collect();
    let mut faults = Vec::new();
    let mut tally = Tally::default();
    for r in marked {
        if r.error.is_some() {
            tally.failed += 1;
            continue;
        }
        let at = r.tools_prompt.unwrap_or_default();
        let spec = match specs.get(at) {
            Some(Some(Ok(spec))) if prompts[at].prompt == r.prompt => spec,
            Some(Some(Err(e))) => {
                faults.push(format!(
                    "{}: its prompt's tools cannot be read: {e}",
                    r.name()
                ));
                continue;
            }
            _ => {
                faults.push(format!(
                    "{}: run.json holds no prompt with tools at its place {} (the archive does not match)",
                    r.name(),
                    at + 1
                ));
                continue;
            }
        };
        tally.replies += 1;
        tally.calls += r.tool_calls.len();
        tally.json += usize::from(spec.expect_json.is_some());
        tally.no_call += usize::from(matches!(spec.expect_tool, Some(CallExpect::NoCall)));
        faults.extend(reply_faults(r, spec));
    }
    Some(line_of(&faults, &tally))
}

fn line_of(faults: &[String], t: &Tally) -> Line {
    let failed = match t.failed {
        0 => String::new(),
        n => format!("; {n} failed, left to the content line"),
    };
    if !faults.is_empty() {
        let mut text = faults[..faults.len().min(NAMED)].join("; ");
        if faults.len() > NAMED {
            text.push_str(&format!("; and {} more", faults.len() - NAMED));
        }
        return Line::new(Check::Tools, Status::Fail, text);
    }
    if t.replies == 0 {
        return Line::new(
            Check::Tools,
            Status::Info,
            format!("no reply to a prompt with tools or a format was judged{failed}"),
        );
    }
    let replies = match t.replies {
        1 => "1 reply".to_string(),
        n => format!("{n} replies"),
    };
    let mut said = match t.calls {
        0 => Vec::new(),
        1 => vec!["1 tool call, named and its arguments valid".to_string()],
        n => vec![format!(
            "{n} tool calls, each named and its arguments valid"
        )],
    };
    if t.no_call > 0 {
        said.push(format!("{} without a call as expected", t.no_call));
    }
    if t.json > 0 {
        said.push(match t.json {
            1 => "1 JSON answer valid".to_string(),
            n => format!("{n} JSON answers valid"),
        });
    }
    if said.is_empty() {
        said.push("no call made and none expected".to_string());
    }
    Line::new(
        Check::Tools,
        Status::Ok,
        format!(
            "{replies} to prompts with tools or formats: {}{failed}",
            said.join("; ")
        ),
    )
}

/// What is wrong with one reply against its prompt's spec, each fault naming the reply and
/// the rule.
fn reply_faults(r: &ReplyRecord, spec: &Spec) -> Vec<String> {
    let mut faults = Vec::new();
    let name = r.name();
    if !spec.functions.is_empty() {
        if let Some((marker, family)) = MARKERS.iter().find(|(m, _)| r.content.contains(m)) {
            faults.push(format!(
                "{name} [markup]: its content holds the tool call marker {} ({family}) and {} tool calls: {}",
                quote(marker.trim(), QUOTED),
                r.tool_calls.len(),
                quote(&r.content, QUOTED)
            ));
        }
    }
    faults.extend(expectation_faults(r, spec));
    for call in &r.tool_calls {
        faults.extend(call_faults(&name, call, spec));
    }
    faults.extend(stream_faults(r, spec));
    if let Some(JsonExpect::Schemas(schemas)) = &spec.expect_json {
        faults.extend(json_fault(r, schemas));
    }
    faults
}

/// The calls against `expect_tool`.
fn expectation_faults(r: &ReplyRecord, spec: &Spec) -> Vec<String> {
    let name = r.name();
    let calls = &r.tool_calls;
    let named = |c: &ToolCallRecord| quote(&c.name, 60);
    let content = || match r.content.trim() {
        "" => String::new(),
        text => format!(" (it said {})", quote(text, QUOTED)),
    };
    match &spec.expect_tool {
        None => Vec::new(),
        Some(CallExpect::NoCall) => calls
            .first()
            .map(|c| {
                format!(
                    "{name} [unexpected call]: it called {} where no call was expected",
                    named(c)
                )
            })
            .into_iter()
            .collect(),
        Some(CallExpect::Every(e)) if calls.is_empty() => vec![format!(
            "{name} [no call]: it called no tool; {} was expected{}",
            quote(&e.name, 60),
            content()
        )],
        Some(CallExpect::Every(e)) => calls
            .iter()
            .filter_map(|c| match matches(c, e) {
                Ok(()) => None,
                Err(why) => Some(format!("{name} {why}")),
            })
            .collect(),
        Some(CallExpect::Each(list)) => each_faults(r, list),
    }
}

/// A list of expected calls: each matched by a call of its own, and no call left over.
fn each_faults(r: &ReplyRecord, list: &[Expected]) -> Vec<String> {
    let name = r.name();
    let mut free: Vec<&ToolCallRecord> = r.tool_calls.iter().collect();
    let mut faults = Vec::new();
    for e in list {
        match free.iter().position(|c| matches(c, e).is_ok()) {
            Some(i) => {
                free.remove(i);
            }
            None => {
                // Say why the likeliest call (one of the name) did not do.
                let why = free
                    .iter()
                    .find(|c| c.name == e.name)
                    .and_then(|c| matches(c, e).err())
                    .unwrap_or_else(|| {
                        format!("[no call]: no call of {} as expected", quote(&e.name, 60))
                    });
                faults.push(format!("{name} {why}"));
            }
        }
    }
    faults.extend(free.iter().map(|c| {
        format!(
            "{name} [unexpected call]: it called {} beyond the {} calls expected",
            quote(&c.name, 60),
            list.len()
        )
    }));
    faults
}

/// Whether a call is the expected one; the rule and why when it is not.
fn matches(c: &ToolCallRecord, e: &Expected) -> Result<(), String> {
    if c.name != e.name {
        return Err(format!(
            "[wrong tool]: it called {}; {} was expected",
            quote(&c.name, 60),
            quote(&e.name, 60)
        ));
    }
    let Some(want) = &e.arguments else {
        return Ok(());
    };
    // Arguments that are not JSON, or JSON of another kind than an object, are the arguments
    // rule's, said once.
    let args = match serde_json::from_str::<Value>(&c.arguments) {
        Ok(args) if not_an_object(&args).is_none() => args,
        _ => return Ok(()),
    };
    let why = match want {
        ArgsExpect::Schema(s) => s.problem(&args),
        ArgsExpect::Exact(v) if same_json(v, &args) => None,
        ArgsExpect::Exact(v) => Some(format!("they are not {}", quote(&v.to_string(), QUOTED))),
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "[expected arguments]: its call of {} has arguments {} that are not as expected: {why}",
            quote(&c.name, 60),
            quote(&c.arguments, QUOTED)
        )),
    }
}

/// One call against the functions offered: offered, its arguments JSON that satisfies its
/// function's `parameters`.
fn call_faults(name: &str, c: &ToolCallRecord, spec: &Spec) -> Option<String> {
    let called = quote(&c.name, 60);
    let Some(f) = spec.function(&c.name) else {
        return Some(format!(
            "{name} [not offered]: it called {called}, which its prompt did not offer"
        ));
    };
    if c.arguments.trim().is_empty() {
        return Some(format!(
            "{name} [arguments]: its call of {called} has empty arguments (not JSON; a call without arguments sends {{}})"
        ));
    }
    let args = match serde_json::from_str::<Value>(&c.arguments) {
        Ok(v) => v,
        Err(e) => {
            return Some(format!(
            "{name} [arguments]: its call of {called} has arguments that are not JSON ({e}): {}",
            quote(&c.arguments, QUOTED)
        ))
        }
    };
    // OpenAI's `arguments` is the JSON text of an object, whatever the function's parameters
    // say. A parser that hands over the model's bare value (vLLM's hermes parser gave
    // `"\"Paris\""` for SmolLM2, issue 51) or encodes the object twice made JSON of another
    // kind: named as that, not as a schema's complaint about a type.
    if let Some(kind) = not_an_object(&args) {
        return Some(format!(
            "{name} [arguments]: its call of {called} has arguments that are {kind}, not a JSON object: {}",
            quote(&c.arguments, QUOTED)
        ));
    }
    let problem = f.parameters.as_ref().and_then(|p| p.problem(&args))?;
    Some(format!(
        "{name} [arguments]: its call of {called} has arguments {} that do not satisfy its parameters: {problem}",
        quote(&c.arguments, QUOTED)
    ))
}

/// What a call's arguments are where they are JSON but not an object: a JSON string holding an
/// object's text is an object encoded twice.
fn not_an_object(args: &Value) -> Option<&'static str> {
    Some(match args {
        Value::Object(_) => return None,
        Value::String(s) if matches!(serde_json::from_str(s), Ok(Value::Object(_))) => {
            "an object encoded twice (a JSON string holding its text)"
        }
        Value::String(_) => "a JSON string",
        Value::Array(_) => "a JSON array",
        Value::Number(_) => "a JSON number",
        Value::Bool(_) => "a JSON boolean",
        Value::Null => "JSON null",
    })
}

/// How the calls were streamed: `finish_reason` `tool_calls` (or `stop` for a call forced by a
/// `tool_choice` that names its function, as OpenAI's API ends one), an index and an id each,
/// none shared.
fn stream_faults(r: &ReplyRecord, spec: &Spec) -> Vec<String> {
    let name = r.name();
    let calls = &r.tool_calls;
    let mut faults = Vec::new();
    if calls.is_empty() {
        return faults;
    }
    let finish = r.finish_reason.as_deref();
    let forced_stop = spec.forced.is_some() && finish == Some("stop");
    if finish != Some("tool_calls") && !forced_stop {
        let said = finish.map_or("no finish_reason".to_string(), |f| {
            format!("finish_reason {}", quote(f, 40))
        });
        faults.push(format!(
            "{name} [finish_reason]: it called {} but ended with {said}, not \"tool_calls\"",
            quote(&calls[0].name, 60)
        ));
    }
    if let Some(c) = calls.iter().find(|c| c.index.is_none()) {
        faults.push(format!(
            "{name} [index]: its call of {} was streamed without an index",
            quote(&c.name, 60)
        ));
    }
    let mut indexes: Vec<u64> = calls.iter().filter_map(|c| c.index).collect();
    indexes.sort_unstable();
    if let Some(w) = indexes.windows(2).find(|w| w[0] == w[1]) {
        let at = w[0];
        let names: Vec<String> = calls
            .iter()
            .filter(|c| c.index == Some(at))
            .map(|c| quote(&c.name, 60))
            .collect();
        faults.push(format!(
            "{name} [index]: it streamed {} calls at index {at} ({})",
            names.len(),
            names.join(", ")
        ));
    }
    if let Some(c) = calls.iter().find(|c| c.id.is_none()) {
        faults.push(format!(
            "{name} [id]: its call of {} has no id",
            quote(&c.name, 60)
        ));
    }
    let ids: Vec<&str> = calls.iter().filter_map(|c| c.id.as_deref()).collect();
    if let Some(dup) = ids
        .iter()
        .enumerate()
        .find_map(|(i, id)| ids[..i].contains(id).then_some(id))
    {
        faults.push(format!(
            "{name} [id]: it gave {} calls the id {}",
            ids.iter().filter(|i| *i == dup).count(),
            quote(dup, 60)
        ));
    }
    faults
}

/// The content of a reply that must be JSON.
fn json_fault(r: &ReplyRecord, schemas: &[crate::tool_spec::Schema]) -> Option<String> {
    let name = r.name();
    let text = r.content.trim();
    let value = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(e) => {
            let fenced = if text.starts_with("```") {
                " (in a code fence)"
            } else {
                ""
            };
            let cut = if r.finish_reason.as_deref() == Some("length") {
                " (it was cut at max_tokens: finish_reason \"length\")"
            } else {
                ""
            };
            return Some(format!(
                "{name} [json]: its content is not JSON{fenced}{cut} ({e}): {}",
                quote(text, QUOTED)
            ));
        }
    };
    let problem = schemas.iter().find_map(|s| s.problem(&value))?;
    Some(format!(
        "{name} [json]: its content does not satisfy its schema: {problem}: {}",
        quote(text, QUOTED)
    ))
}

#[cfg(test)]
mod tests {
    //! Each rule failing on its own fault and passing the right reply beside it; the mutant
    //! each catches is the rule's condition turned.
    use super::*;
    use serde_json::json;

    const TOOLS: &str = r#"[{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"]}}}, {"type": "function", "function": {"name": "get_time",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}]"#;

    /// A manifest of these prompts.
    fn manifest(prompts: Value) -> RunManifest {
        serde_json::from_value(json!({
            "schema": 1, "tool_version": "t", "argv": [], "url": "http://127.0.0.1:1",
            "prompts": prompts, "replies_planned": 1,
            "floors": {"floor": 1.0, "first_token_ms": 1.0},
            "limits": {"ready_timeout_s": 1.0, "grace_s": 1.0, "reply_timeout_s": 1.0},
            "host": "h", "started_utc": "", "clock": {"name": "CLOCK_MONOTONIC", "base_ns": 0},
            "serve_log_source": "none",
        }))
        .unwrap()
    }

    /// One prompt offering the two tools, with `fields` beside.
    fn weather(fields: Value) -> RunManifest {
        let mut p = json!({"prompt": "What is the weather in Paris?",
            "tools": serde_json::from_str::<Value>(TOOLS).unwrap()});
        p.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        manifest(json!([p]))
    }

    fn call(index: u64, id: &str, name: &str, arguments: &str) -> ToolCallRecord {
        ToolCallRecord {
            index: Some(index),
            id: Some(id.into()),
            name: name.into(),
            arguments: arguments.into(),
            fragments: 3,
        }
    }

    fn reply(calls: Vec<ToolCallRecord>, content: &str, finish: &str) -> ReplyRecord {
        let mut r = ReplyRecord::new(1, "What is the weather in Paris?", None);
        r.tools_prompt = Some(0);
        r.tool_calls = calls;
        r.content = content.into();
        r.finish_reason = Some(finish.into());
        r
    }

    fn paris() -> ReplyRecord {
        reply(
            vec![call(0, "call_1", "get_weather", r#"{"city": "Paris"}"#)],
            "",
            "tool_calls",
        )
    }

    fn judged(r: &ReplyRecord, m: &RunManifest) -> Line {
        tools_line(std::slice::from_ref(r), Some(m)).expect("a tools line")
    }

    /// The line fails naming the reply and the rule, with `says` in it.
    fn fails(r: &ReplyRecord, m: &RunManifest, rule: &str, says: &str) {
        let l = judged(r, m);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(l.text.contains(&format!("reply 1 [{rule}]")), "{}", l.text);
        assert!(l.text.contains(says), "{}", l.text);
    }

    #[test]
    fn no_line_without_tools_and_a_right_call_passes() {
        let plain = manifest(json!([{"prompt": "p"}]));
        assert!(tools_line(&[ReplyRecord::new(1, "p", None)], Some(&plain)).is_none());
        let m = weather(json!({"expect_tool": "get_weather"}));
        let l = judged(&paris(), &m);
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert_eq!(
            l.text,
            "1 reply to prompts with tools or formats: 1 tool call, named and its arguments valid"
        );
    }

    #[test]
    fn markup_in_the_content_fails_with_its_family() {
        let m = weather(json!({}));
        let r = reply(
            vec![],
            "<tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>",
            "stop",
        );
        fails(
            &r,
            &m,
            "markup",
            "\"<tool_call>\" (Hermes 2 Pro, Qwen 2.5) and 0 tool calls",
        );
        // The same words about tools, without a marker, pass.
        let r = reply(vec![], "I would call a tool for the weather.", "stop");
        assert_eq!(judged(&r, &m).status, Status::Ok);
    }

    #[test]
    fn the_calls_are_held_to_the_expectation() {
        let m = weather(json!({"expect_tool": "get_weather"}));
        fails(
            &reply(vec![], "It is sunny.", "stop"),
            &m,
            "no call",
            "it said \"It is sunny.\"",
        );
        let wrong = reply(vec![call(0, "c", "get_time", "{}")], "", "tool_calls");
        fails(
            &wrong,
            &m,
            "wrong tool",
            "it called \"get_time\"; \"get_weather\" was expected",
        );
        let m = weather(json!({"expect_tool": "none"}));
        fails(
            &paris(),
            &m,
            "unexpected call",
            "it called \"get_weather\" where no call",
        );
        assert_eq!(
            judged(&reply(vec![], "Sunny.", "stop"), &m).status,
            Status::Ok
        );
        let unknown = reply(vec![call(0, "c", "get_news", "{}")], "", "tool_calls");
        fails(
            &unknown,
            &weather(json!({})),
            "not offered",
            "\"get_news\", which its prompt did not offer",
        );
    }

    #[test]
    fn a_list_of_expected_calls_is_matched_one_to_one() {
        let m = weather(json!({"expect_tool": ["get_weather", "get_time"]}));
        let both = reply(
            vec![
                call(0, "a", "get_time", "{}"),
                call(1, "b", "get_weather", r#"{"city": "Paris"}"#),
            ],
            "",
            "tool_calls",
        );
        assert_eq!(
            judged(&both, &m).status,
            Status::Ok,
            "{}",
            judged(&both, &m).text
        );
        fails(&paris(), &m, "no call", "no call of \"get_time\"");
        let m = weather(json!({"expect_tool": ["get_weather"]}));
        fails(
            &both,
            &m,
            "unexpected call",
            "\"get_time\" beyond the 1 calls expected",
        );
    }

    #[test]
    fn arguments_parse_and_satisfy_the_functions_parameters() {
        let m = weather(json!({}));
        let cut = reply(
            vec![call(0, "c", "get_weather", r#"{"city": "Paris""#)],
            "",
            "tool_calls",
        );
        fails(
            &cut,
            &m,
            "arguments",
            "arguments that are not JSON (EOF while parsing",
        );
        let empty = reply(vec![call(0, "c", "get_weather", "")], "", "tool_calls");
        fails(&empty, &m, "arguments", "has empty arguments");
        let off = reply(
            vec![call(0, "c", "get_weather", r#"{"town": "Paris"}"#)],
            "",
            "tool_calls",
        );
        fails(
            &off,
            &m,
            "arguments",
            "do not satisfy its parameters: \"city\" is a required property",
        );
        // JSON, but not an object: named as what it is, whatever the parameters allow.
        for (arguments, kind) in [
            (r#""Paris""#, "a JSON string"),
            (r#""{\"city\": \"Paris\"}""#, "an object encoded twice"),
            (r#"["Paris"]"#, "a JSON array"),
            ("7", "a JSON number"),
            ("true", "a JSON boolean"),
            ("null", "JSON null"),
        ] {
            let r = reply(
                vec![call(0, "c", "get_weather", arguments)],
                "",
                "tool_calls",
            );
            fails(
                &r,
                &m,
                "arguments",
                &format!("has arguments that are {kind}"),
            );
            fails(&r, &m, "arguments", "not a JSON object");
        }
        let free = manifest(
            json!([{"prompt": "What is the weather in Paris?", "tools": [{"type": "function",
            "function": {"name": "get_weather"}}]}]),
        );
        let bare = reply(
            vec![call(0, "c", "get_weather", r#""Paris""#)],
            "",
            "tool_calls",
        );
        fails(
            &bare,
            &free,
            "arguments",
            "a JSON string, not a JSON object",
        );
    }

    #[test]
    fn arguments_are_held_to_the_expectations_schema_or_values() {
        let m = weather(
            json!({"expect_tool": {"name": "get_weather", "arguments": {"city": "Paris"}}}),
        );
        assert_eq!(judged(&paris(), &m).status, Status::Ok);
        let rome = reply(
            vec![call(0, "c", "get_weather", r#"{"city": "Rome"}"#)],
            "",
            "tool_calls",
        );
        fails(
            &rome,
            &m,
            "expected arguments",
            "they are not \"{\\\"city\\\":\\\"Paris\\\"}\"",
        );
        let m = weather(json!({"expect_tool": {"name": "get_weather",
            "arguments": {"properties": {"city": {"enum": ["Paris", "paris"]}}}}}));
        assert_eq!(judged(&paris(), &m).status, Status::Ok);
        fails(&rome, &m, "expected arguments", "\"Rome\" is not one of");
    }

    #[test]
    fn a_reply_that_calls_ends_with_tool_calls_each_with_an_index_and_id_of_its_own() {
        let m = weather(json!({}));
        let mut stop = paris();
        stop.finish_reason = Some("stop".into());
        fails(
            &stop,
            &m,
            "finish_reason",
            "ended with finish_reason \"stop\", not \"tool_calls\"",
        );
        // A call forced by a tool_choice that names its function may end "stop", as OpenAI's
        // API ends one; "length" may not.
        let named =
            json!({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}});
        assert_eq!(judged(&stop, &weather(named.clone())).status, Status::Ok);
        let mut cut = stop.clone();
        cut.finish_reason = Some("length".into());
        fails(
            &cut,
            &weather(named),
            "finish_reason",
            "finish_reason \"length\"",
        );
        let two = |i: u64, id: &str| {
            reply(
                vec![
                    call(0, "a", "get_weather", r#"{"city": "Paris"}"#),
                    call(i, id, "get_time", "{}"),
                ],
                "",
                "tool_calls",
            )
        };
        assert_eq!(judged(&two(1, "b"), &m).status, Status::Ok);
        fails(
            &two(0, "b"),
            &m,
            "index",
            "2 calls at index 0 (\"get_weather\", \"get_time\")",
        );
        fails(&two(1, "a"), &m, "id", "gave 2 calls the id \"a\"");
        let mut bare = paris();
        bare.tool_calls[0].index = None;
        bare.tool_calls[0].id = None;
        fails(&bare, &m, "index", "streamed without an index");
        fails(&bare, &m, "id", "has no id");
    }

    #[test]
    fn json_content_parses_and_satisfies_both_schemas() {
        let format = json!({"type": "json_schema", "json_schema": {"name": "a", "schema":
            {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}}});
        let m = manifest(json!([{"prompt": "What is the weather in Paris?",
            "response_format": format, "expect_json": true}]));
        let good = reply(vec![], " {\"capital\": \"Paris\"}\n", "stop");
        let l = judged(&good, &m);
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(l.text.ends_with("1 JSON answer valid"), "{}", l.text);
        fails(
            &reply(vec![], "```json\n{}\n```", "stop"),
            &m,
            "json",
            "is not JSON (in a code fence)",
        );
        fails(
            &reply(vec![], "{\"city\": \"Paris\"}", "stop"),
            &m,
            "json",
            "does not satisfy its schema: \"capital\" is a required property",
        );
        let m = manifest(json!([{"prompt": "What is the weather in Paris?",
            "expect_json": {"type": "array"}}]));
        fails(&good, &m, "json", "is not of type \"array\"");
    }

    #[test]
    fn a_json_format_alone_asks_for_json_and_tools_without_an_expectation_ask_nothing_more() {
        let m = manifest(json!([{"prompt": "What is the weather in Paris?",
            "response_format": {"type": "json_object"}}]));
        fails(
            &reply(vec![], "Sunny.", "stop"),
            &m,
            "json",
            "its content is not JSON",
        );
        let l = judged(&reply(vec![], "{}", "stop"), &m);
        assert!(l.text.ends_with(": 1 JSON answer valid"), "{}", l.text);
        let l = judged(&reply(vec![], "Sunny.", "stop"), &weather(json!({})));
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text.ends_with(": no call made and none expected"),
            "{}",
            l.text
        );
    }

    #[test]
    fn failed_replies_are_the_content_lines_and_a_reply_off_its_archive_fails() {
        let m = weather(json!({"expect_tool": "get_weather"}));
        let mut failed = reply(vec![], "", "stop");
        failed.error = Some("the serve closed the stream".into());
        let l = judged(&failed, &m);
        assert_eq!(l.status, Status::Info, "{}", l.text);
        assert!(
            l.text.contains("1 failed, left to the content line"),
            "{}",
            l.text
        );
        let mut moved = paris();
        moved.tools_prompt = Some(3);
        let l = judged(&moved, &m);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text.contains("holds no prompt with tools at its place 4"),
            "{}",
            l.text
        );
    }

    #[test]
    fn the_lines_edges_unmarked_replies_unreadable_or_other_prompts_counts_and_cuts() {
        let m = weather(json!({"expect_tool": "get_weather"}));
        // A run that asked, whose replies are none of them marked: said, not dropped.
        let l = tools_line(&[ReplyRecord::new(1, "p", None)], Some(&m)).unwrap();
        assert_eq!(l.status, Status::Info, "{}", l.text);
        // A reply whose place holds another prompt's text.
        let mut other = paris();
        other.prompt = "What is the time in Tokyo?".into();
        let l = judged(&other, &m);
        assert!(
            l.text.contains("holds no prompt with tools at its place 1"),
            "{}",
            l.text
        );
        // An archived prompt the prompts file would have refused.
        let mut bad = weather(json!({}));
        bad.prompts[0].expect_tool = Some(json!("get_news"));
        let l = judged(&paris(), &bad);
        assert!(
            l.text
                .contains("its prompt's tools cannot be read: expect_tool names"),
            "{}",
            l.text
        );
        // Counts: two JSON answers, one reply without a call as expected.
        let json_prompt = json!({"prompt": "What is the weather in Paris?",
            "response_format": {"type": "json_object"}});
        let none = json!({"prompt": "Tell me about Paris.", "tools": weather(json!({})).prompts[0].tools, "expect_tool": "none"});
        let m = manifest(json!([json_prompt, none]));
        let mut replies = vec![reply(vec![], "{}", "stop"), reply(vec![], "[]", "stop")];
        let mut words = reply(vec![], "Paris is lovely.", "stop");
        (words.index, words.prompt, words.tools_prompt) =
            (3, "Tell me about Paris.".into(), Some(1));
        replies.push(words);
        let l = tools_line(&replies, Some(&m)).unwrap();
        assert!(
            l.text
                .ends_with(": 1 without a call as expected; 2 JSON answers valid"),
            "{}",
            l.text
        );
        // A JSON answer cut at max_tokens says so.
        let cut = reply(vec![], "{\"a\": ", "length");
        fails(
            &cut,
            &manifest(json!([json_prompt])),
            "json",
            "(it was cut at max_tokens",
        );
    }

    #[test]
    fn a_listed_call_of_the_name_with_other_arguments_says_why() {
        let m = weather(
            json!({"expect_tool": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}),
        );
        let rome = reply(
            vec![call(0, "c", "get_weather", r#"{"city": "Rome"}"#)],
            "",
            "tool_calls",
        );
        fails(
            &rome,
            &m,
            "expected arguments",
            "arguments \"{\\\"city\\\": \\\"Rome\\\"}\"",
        );
    }

    /// The tools line of `n` replies in words where a call is expected.
    fn words_for_a_call(n: usize) -> Line {
        let m = weather(json!({"expect_tool": "get_weather"}));
        let replies: Vec<ReplyRecord> = (1..=n)
            .map(|i| {
                let mut r = reply(vec![], "Sunny.", "stop");
                r.index = i;
                r
            })
            .collect();
        tools_line(&replies, Some(&m)).unwrap()
    }

    #[test]
    fn four_faults_are_all_named_with_none_more() {
        let l = words_for_a_call(4);
        assert_eq!(l.text.matches("[no call]").count(), 4, "{}", l.text);
        assert!(!l.text.contains("more"), "{}", l.text);
    }

    #[test]
    fn many_faults_name_four_and_count_the_rest() {
        let l = words_for_a_call(6);
        assert_eq!(l.text.matches("[no call]").count(), 4, "{}", l.text);
        assert!(l.text.ends_with("; and 2 more"), "{}", l.text);
    }
}
