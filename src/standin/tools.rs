//! Tool calls and structured output: what a chat request's `tools`, `tool_choice` and
//! `response_format` ask for, the calls and the JSON the stand-in answers with, and the faults
//! that break one rule of them each, as real serves have broken them.
//!
//! The stand-in calls every tool the last user message mentions (by its name, its name with
//! `_` read as spaces, or its name's last `_`-part, as a whole word), or the one `tool_choice`
//! names; arguments and JSON-schema content are [`instance_of`] the schema, filled from the
//! prompt. A call is streamed as OpenAI and llama-server stream one: a first delta with its
//! index, id, name and empty arguments, then the arguments in pieces of at most 4 characters,
//! each a token of its own. The request's `max_tokens` does not cut a call or JSON content.
//! Anything malformed in the request is ignored as if absent.

use std::fmt;

use clap::Args;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{json, Number, Value};

/// How the stand-in breaks the rules of tool calls and structured output: one rule a flag,
/// each as a public bug report shows a serve breaking it. Faults: `--fault-request` picks the
/// request they apply to.
#[derive(Debug, Clone, Default, PartialEq, Args)]
pub struct ToolArgs {
    /// Fault: each call's arguments are its JSON with the last character dropped: invalid
    /// JSON in streamed tool arguments (openvinotoolkit/model_server#3838).
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_args_not_json: bool,
    /// Fault: no `tool_calls` deltas; each call is written in the content as Hermes/Qwen
    /// markup (`<tool_call>\n{"name": N, "arguments": {..}}\n</tool_call>`), the finish
    /// chunk's delta says `"tool_calls": []` and its finish_reason is stop
    /// (openvinotoolkit/model_server#4268).
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_markup_in_content: bool,
    /// Fault: every call is streamed with index 0, each still with its own id and name
    /// (ggml-org/llama.cpp#18591).
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_index_zero: bool,
    /// Fault: every call after the first streams no argument fragments (its arguments stay
    /// ""); with one call, that call's (vllm-project/vllm#47901).
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_args_dropped: bool,
    /// Fault: each call names another function: the next in the tools list (wrapping), or
    /// with one tool, its name with `_v2` appended.
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_wrong_name: bool,
    /// Fault: a reply that calls tools ends with finish_reason stop, not tool_calls.
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_finish_stop: bool,
    /// Fault: every call carries the id of the first.
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_same_id: bool,
    /// Fault: never call a tool; answer the usual text.
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub tool_no_call: bool,
    /// Fault: JSON-mode content parses but does not satisfy the schema: the instance without
    /// its required properties, or `[]` when the schema requires none (json_object: `[]`).
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub json_off_schema: bool,
    /// Fault: JSON-mode content is not JSON: the instance's text with its last character
    /// dropped.
    #[arg(long, help_heading = "Faults in tool calls and JSON")]
    pub json_not_json: bool,
}

/// A JSON value that keeps its objects' keys in the order they came (serde_json's own map
/// sorts them without its `preserve_order` feature), so arguments follow the schema's order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OrderedJson {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<OrderedJson>),
    Object(Vec<(String, OrderedJson)>),
}

impl OrderedJson {
    /// The value at `key` of an object (the first, if given twice).
    fn get(&self, key: &str) -> Option<&OrderedJson> {
        match self {
            OrderedJson::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            OrderedJson::String(s) => Some(s),
            _ => None,
        }
    }

    fn as_array(&self) -> &[OrderedJson] {
        match self {
            OrderedJson::Array(items) => items,
            _ => &[],
        }
    }

    /// Compact text, as serde_json writes it.
    pub(crate) fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for OrderedJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            OrderedJson::Null => s.serialize_unit(),
            OrderedJson::Bool(b) => s.serialize_bool(*b),
            OrderedJson::Number(n) => n.serialize(s),
            OrderedJson::String(t) => s.serialize_str(t),
            OrderedJson::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            OrderedJson::Object(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for OrderedJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OrderedJson, D::Error> {
        d.deserialize_any(OrderedVisitor)
    }
}

struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = OrderedJson;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Null)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Number(n.into()))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<OrderedJson, E> {
        Ok(OrderedJson::Number(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<OrderedJson, E> {
        Ok(Number::from_f64(n).map_or(OrderedJson::Null, OrderedJson::Number))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<OrderedJson, E> {
        Ok(OrderedJson::String(s.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OrderedJson, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(OrderedJson::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedJson, A::Error> {
        let mut fields = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, OrderedJson>()? {
            fields.push((k, v));
        }
        Ok(OrderedJson::Object(fields))
    }
}

/// A function the request offers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tool {
    name: String,
    /// Its `parameters` schema (Null when absent).
    parameters: OrderedJson,
}

/// Which tools the request lets the reply call (`tool_choice`).
#[derive(Debug, Clone, PartialEq)]
enum Choice {
    None,
    Auto,
    Required,
    Named(String),
}

/// The content the request asks for (`response_format`).
#[derive(Debug, Clone, PartialEq)]
enum Format {
    Text,
    JsonObject,
    JsonSchema(OrderedJson),
}

/// What a request asks of tools and structured output, malformed parts read as absent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Asked {
    tools: Vec<Tool>,
    choice: Choice,
    format: Format,
}

impl Asked {
    /// Read from the request's `tools`, `tool_choice` and `response_format`.
    pub(crate) fn read(
        tools: Option<&OrderedJson>,
        choice: Option<&OrderedJson>,
        format: Option<&OrderedJson>,
    ) -> Asked {
        let tools = tools
            .map(OrderedJson::as_array)
            .unwrap_or_default()
            .iter()
            .filter(|t| t.get("type").is_none_or(|k| k.as_str() == Some("function")))
            .filter_map(|t| {
                let f = t.get("function")?;
                let name = f.get("name")?.as_str().filter(|n| !n.is_empty())?;
                Some(Tool {
                    name: name.to_string(),
                    parameters: f.get("parameters").cloned().unwrap_or(OrderedJson::Null),
                })
            })
            .collect();
        let named = |c: &OrderedJson| {
            let name = c.get("function")?.get("name")?.as_str()?;
            Some(Choice::Named(name.to_string()))
        };
        let choice = match choice {
            Some(OrderedJson::String(s)) if s == "none" => Choice::None,
            Some(OrderedJson::String(s)) if s == "required" => Choice::Required,
            Some(c) => named(c).unwrap_or(Choice::Auto),
            None => Choice::Auto,
        };
        let format = match format
            .and_then(|f| f.get("type"))
            .and_then(OrderedJson::as_str)
        {
            Some("json_object") => Format::JsonObject,
            Some("json_schema") => format
                .and_then(|f| f.get("json_schema")?.get("schema").cloned())
                .map_or(Format::Text, Format::JsonSchema),
            _ => Format::Text,
        };
        Asked {
            tools,
            choice,
            format,
        }
    }
}

/// Whether `phrase` is in `text` as a whole word (or words), case aside.
fn has_word(text: &str, phrase: &str) -> bool {
    let (text, phrase) = (text.to_lowercase(), phrase.trim().to_lowercase());
    if phrase.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(&phrase).any(|(at, _)| {
        !word(text[..at].chars().next_back()) && !word(text[at + phrase.len()..].chars().next())
    })
}

/// Whether the prompt mentions the tool: its name, its name with `_` read as spaces, or its
/// name's last `_`-part (`weather` of `get_weather`), as a whole word.
pub(crate) fn mentioned(name: &str, prompt: &str) -> bool {
    let last = name.rsplit('_').next().unwrap_or(name);
    [name, &name.replace('_', " "), last]
        .iter()
        .any(|p| has_word(prompt, p))
}

/// The tools the reply calls, in the tools list's order.
fn called<'a>(asked: &'a Asked, prompt: &str) -> Vec<&'a Tool> {
    let tools = &asked.tools;
    match &asked.choice {
        Choice::None => Vec::new(),
        Choice::Named(n) => tools.iter().filter(|t| t.name == *n).take(1).collect(),
        choice => {
            let some: Vec<&Tool> = tools
                .iter()
                .filter(|t| mentioned(&t.name, prompt))
                .collect();
            match (some.is_empty(), choice, tools.first()) {
                (true, Choice::Required, Some(first)) => vec![first],
                _ => some,
            }
        }
    }
}

/// The prompt's last capitalized word that is not its first, stripped of punctuation.
fn last_capitalized(prompt: &str) -> Option<&str> {
    prompt
        .split_whitespace()
        .skip(1)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
        .last()
}

/// The prompt's first number (`-`, digits, and a fraction after a `.`), as its text.
fn first_number(prompt: &str) -> Option<&str> {
    let start = prompt.find(|c: char| c.is_ascii_digit())?;
    let start = if prompt[..start].ends_with('-') {
        start - 1
    } else {
        start
    };
    let digits = |from: usize| {
        prompt[from..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(prompt.len(), |n| from + n)
    };
    let end = digits(start + 1);
    let fraction = prompt[end..].strip_prefix('.');
    match fraction.filter(|f| f.starts_with(|c: char| c.is_ascii_digit())) {
        Some(_) => Some(&prompt[start..digits(end + 1)]),
        None => Some(&prompt[start..end]),
    }
}

/// The type a schema says (the first of a list that is not "null"); "object" for a schema
/// with `properties` and no type.
fn type_of(schema: &OrderedJson) -> Option<&str> {
    match schema.get("type") {
        Some(OrderedJson::String(t)) => Some(t),
        Some(OrderedJson::Array(ts)) => ts
            .iter()
            .filter_map(OrderedJson::as_str)
            .find(|t| *t != "null"),
        _ => schema.get("properties").map(|_| "object"),
    }
}

/// An instance of `schema`, filled from `prompt`: its `const`, else its `default`, else the
/// first of its `enum`, else by type: a string is the prompt's last capitalized word (not its
/// first), a number its first number (else 1), a boolean true, an array empty, an object its
/// required properties (all without `required`) in the schema's order; no type is null.
pub(crate) fn instance_of(schema: &OrderedJson, prompt: &str) -> OrderedJson {
    instance_named(schema, prompt, "answer")
}

/// [`instance_of`], a string without a capitalized word being `name`, the property's name.
fn instance_named(schema: &OrderedJson, prompt: &str, name: &str) -> OrderedJson {
    if let Some(v) = schema.get("const").or_else(|| schema.get("default")) {
        return v.clone();
    }
    if let Some(first) = schema.get("enum").and_then(|e| e.as_array().first()) {
        return first.clone();
    }
    let number = first_number(prompt);
    match type_of(schema) {
        Some("string") => OrderedJson::String(last_capitalized(prompt).unwrap_or(name).to_string()),
        Some("integer") => {
            let whole = number.map(|n| n.split('.').next().unwrap_or(n));
            let n: i64 = whole.and_then(|n| n.parse().ok()).unwrap_or(1);
            OrderedJson::Number(n.into())
        }
        Some("number") => {
            let n = number.and_then(|n| serde_json::from_str::<Number>(n).ok());
            OrderedJson::Number(n.unwrap_or_else(|| 1.into()))
        }
        Some("boolean") => OrderedJson::Bool(true),
        Some("array") => OrderedJson::Array(Vec::new()),
        Some("object") => {
            let Some(OrderedJson::Object(properties)) = schema.get("properties") else {
                return OrderedJson::Object(Vec::new());
            };
            let required = schema.get("required").map(|r| r.as_array());
            let fields = properties
                .iter()
                .filter(|(k, _)| required.is_none_or(|r| r.iter().any(|n| n.as_str() == Some(k))))
                .map(|(k, s)| (k.clone(), instance_named(s, prompt, k)))
                .collect();
            OrderedJson::Object(fields)
        }
        _ => OrderedJson::Null,
    }
}

/// `text` cut into pieces of at most `most` characters.
fn pieces(text: &str, most: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(most).map(|c| c.iter().collect()).collect()
}

/// `text` with its last character dropped.
fn less_one(text: &str) -> String {
    let mut t = text.to_string();
    t.pop();
    t
}

/// The most characters a streamed piece of arguments or JSON content holds.
const PIECE: usize = 4;

/// What a reply that calls tools or answers in JSON sends in place of its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolReply {
    /// Its tokens' text: the content's pieces, or a call's name and its arguments' pieces.
    pub tokens: Vec<String>,
    /// For calls streamed as `tool_calls`, each token's delta (empty: the tokens are content).
    pub deltas: Vec<Value>,
    /// Its finish_reason.
    pub finish: &'static str,
    /// The finish chunk's delta.
    pub finish_delta: Value,
    /// The calls whole, for `message.tool_calls` when not streamed.
    pub calls: Option<Value>,
}

/// What the `nth` request's reply (from 1) sends instead of `answer`, its usual text, when
/// it calls tools or answers in JSON; None when it answers the usual text.
pub(crate) fn reply(
    f: &ToolArgs,
    asked: &Asked,
    prompt: &str,
    answer: &str,
    nth: u64,
) -> Option<ToolReply> {
    let tools = if f.tool_no_call {
        Vec::new()
    } else {
        called(asked, prompt)
    };
    if !tools.is_empty() {
        return Some(calls_reply(f, asked, &tools, prompt, nth));
    }
    let instance = match &asked.format {
        Format::Text => return None,
        Format::JsonObject => OrderedJson::Object(vec![("answer".into(), answer.trim().into())]),
        Format::JsonSchema(schema) => instance_of(schema, prompt),
    };
    let mut content = instance.text();
    if f.json_off_schema {
        content = match (&instance, &asked.format) {
            (OrderedJson::Object(fields), Format::JsonSchema(schema)) => {
                let required = schema
                    .get("required")
                    .map_or(&[][..], OrderedJson::as_array);
                let kept: Vec<(String, OrderedJson)> = fields
                    .iter()
                    .filter(|(k, _)| !required.iter().any(|r| r.as_str() == Some(k)))
                    .cloned()
                    .collect();
                match required.is_empty() {
                    true => "[]".into(),
                    false => OrderedJson::Object(kept).text(),
                }
            }
            _ => "[]".into(),
        };
    }
    if f.json_not_json {
        content = less_one(&content);
    }
    Some(content_reply(content, "stop", json!({}), None))
}

impl From<&str> for OrderedJson {
    fn from(s: &str) -> OrderedJson {
        OrderedJson::String(s.to_string())
    }
}

/// A reply whose tokens are `content`'s pieces.
fn content_reply(
    content: String,
    finish: &'static str,
    finish_delta: Value,
    calls: Option<Value>,
) -> ToolReply {
    ToolReply {
        tokens: pieces(&content, PIECE),
        deltas: Vec::new(),
        finish,
        finish_delta,
        calls,
    }
}

/// The reply that calls `tools` (`asked`'s), with the faults `f` scripts.
fn calls_reply(f: &ToolArgs, asked: &Asked, tools: &[&Tool], prompt: &str, nth: u64) -> ToolReply {
    let mut tokens = Vec::new();
    let mut deltas = Vec::new();
    let mut whole = Vec::new();
    let mut markup = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let name = if f.tool_wrong_name {
            let at = asked.tools.iter().position(|t| t == *tool).unwrap_or(0);
            match asked.tools.len() {
                1 => format!("{}_v2", tool.name),
                n => asked.tools[(at + 1) % n].name.clone(),
            }
        } else {
            tool.name.clone()
        };
        let mut arguments = match instance_of(&tool.parameters, prompt) {
            args @ OrderedJson::Object(_) => args.text(),
            _ => "{}".to_string(),
        };
        if f.tool_args_not_json {
            arguments = less_one(&arguments);
        }
        let index = if f.tool_index_zero { 0 } else { i };
        let id = format!("call_{nth}_{}", if f.tool_same_id { 0 } else { i });
        markup.push(format!(
            "<tool_call>\n{{\"name\": {}, \"arguments\": {arguments}}}\n</tool_call>",
            json!(name)
        ));
        tokens.push(name.clone());
        deltas.push(
            json!({"content": null, "tool_calls": [{"index": index, "id": id,
            "type": "function", "function": {"name": name, "arguments": ""}}]}),
        );
        if f.tool_args_dropped && (i > 0 || tools.len() == 1) {
            arguments.clear();
        }
        for piece in pieces(&arguments, PIECE) {
            deltas
                .push(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}));
            tokens.push(piece);
        }
        whole.push(json!({"id": id, "type": "function",
            "function": {"name": name, "arguments": arguments}}));
    }
    if f.tool_markup_in_content {
        return content_reply(markup.join("\n"), "stop", json!({"tool_calls": []}), None);
    }
    ToolReply {
        tokens,
        deltas,
        finish: if f.tool_finish_stop {
            "stop"
        } else {
            "tool_calls"
        },
        finish_delta: json!({}),
        calls: Some(Value::Array(whole)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> OrderedJson {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_tool_is_mentioned_by_its_name_its_words_or_its_last_part_as_a_whole_word() {
        assert!(mentioned("get_weather", "What is the Weather in Paris?"));
        assert!(mentioned("get_weather", "please get weather"));
        assert!(mentioned("get_weather", "call get_weather now"));
        assert!(mentioned("get_current_time", "the time in Tokyo"));
        assert!(!mentioned("get_current_time", "sometimes in Tokyo"));
        assert!(!mentioned("get_weather", "weathered rocks"));
        assert!(!mentioned("search", "research it"));
        // A trailing `_` read as a space is trimmed: the word before it.
        assert!(mentioned("odd_", "an odd one"));
    }

    #[test]
    fn an_instance_follows_const_default_enum_then_type_in_the_schemas_order() {
        let schema = parse(
            r#"{"type":"object","properties":{
                "zone":{"type":"string"},"days":{"type":"integer"},"temp":{"type":"number"},
                "unit":{"type":"string","enum":["celsius","fahrenheit"]},
                "kind":{"const":"k"},"n":{"type":"integer","default":7},
                "ok":{"type":["boolean","null"]},"list":{"type":"array"},"x":{},
                "at":{"type":"object","properties":{"city":{"type":"string"}}}}}"#,
        );
        let text = |prompt: &str| instance_of(&schema, prompt).text();
        assert_eq!(
            text("What is the weather in Paris, Texas for 3.5 days?"),
            r#"{"zone":"Texas","days":3,"temp":3.5,"unit":"celsius","kind":"k","n":7,"ok":true,"list":[],"x":null,"at":{"city":"Texas"}}"#
        );
        // No capitalized word past the first, no number: the property's name, and 1.
        assert_eq!(
            text("What now?"),
            r#"{"zone":"zone","days":1,"temp":1,"unit":"celsius","kind":"k","n":7,"ok":true,"list":[],"x":null,"at":{"city":"city"}}"#
        );
        assert_eq!(text("time in Tokyo"), text("What time is it in -Tokyo?"));
        let negative = instance_of(&parse(r#"{"type":"integer"}"#), "minus -12 or 4");
        assert_eq!(negative.text(), "-12");
        assert_eq!(instance_of(&parse("[1]"), "x"), OrderedJson::Null);
    }

    #[test]
    fn arguments_hold_the_required_properties_alone() {
        let asked = Asked::read(
            Some(&parse(
                r#"[{"type":"function","function":{"name":"get_weather","parameters":{
                "type":"object","properties":{"unit":{"type":"string"},"city":{"type":"string"}},
                "required":["city"]}}}]"#,
            )),
            None,
            None,
        );
        let r = reply(&ToolArgs::default(), &asked, "Weather in Oslo", "", 3).unwrap();
        let calls = r.calls.unwrap();
        assert_eq!(calls[0]["function"]["arguments"], r#"{"city":"Oslo"}"#);
        assert_eq!(calls[0]["id"], "call_3_0");
        assert_eq!(r.finish, "tool_calls");
        // The first delta names the call; the rest are its arguments, 4 characters at most.
        assert_eq!(r.tokens.len(), r.deltas.len());
        assert_eq!(r.tokens[1..].concat(), r#"{"city":"Oslo"}"#);
        assert!(r.tokens.iter().skip(1).all(|t| t.chars().count() <= 4));
    }

    #[test]
    fn tool_choice_picks_none_one_the_mentioned_or_the_first_when_required() {
        let tools = parse(
            r#"[{"type":"function","function":{"name":"get_weather"}},
                {"function":{"name":"get_current_time"}},{"type":"function"},"junk"]"#,
        );
        let names = |choice: &str, prompt: &str| {
            let choice: Option<OrderedJson> = serde_json::from_str(choice).ok();
            let asked = Asked::read(Some(&tools), choice.as_ref(), None);
            called(&asked, prompt)
                .iter()
                .map(|t| t.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("null", "time and weather"),
            ["get_weather", "get_current_time"]
        );
        assert_eq!(names(r#""none""#, "time and weather"), Vec::<String>::new());
        assert_eq!(names(r#""auto""#, "hello"), Vec::<String>::new());
        assert_eq!(names(r#""required""#, "hello"), ["get_weather"]);
        let named = r#"{"type":"function","function":{"name":"get_current_time"}}"#;
        assert_eq!(names(named, "weather"), ["get_current_time"]);
        // Malformed: read as absent.
        assert_eq!(names("7", "weather"), ["get_weather"]);
        let bad = Asked::read(Some(&parse(r#"{"a":1}"#)), None, Some(&parse("[1]")));
        assert!(reply(&ToolArgs::default(), &bad, "weather", "x", 1).is_none());
    }

    #[test]
    fn json_mode_content_and_its_faults() {
        let schema = parse(
            r#"{"type":"json_schema","json_schema":{"name":"c","schema":{"type":"object",
            "properties":{"city":{"type":"string"},"pop":{"type":"integer"}},"required":["city"]}}}"#,
        );
        let content = |f: &ToolArgs, format: &OrderedJson| {
            let asked = Asked::read(None, None, Some(format));
            reply(f, &asked, "Capital of France?", " Paris. ", 1)
                .unwrap()
                .tokens
                .concat()
        };
        let object = parse(r#"{"type":"json_object"}"#);
        let clean = ToolArgs::default();
        assert_eq!(content(&clean, &object), r#"{"answer":"Paris."}"#);
        assert_eq!(content(&clean, &schema), r#"{"city":"France"}"#);
        let off = ToolArgs {
            json_off_schema: true,
            ..ToolArgs::default()
        };
        assert_eq!(content(&off, &schema), "{}");
        assert_eq!(content(&off, &object), "[]");
        let broken = ToolArgs {
            json_not_json: true,
            ..ToolArgs::default()
        };
        assert_eq!(content(&broken, &schema), r#"{"city":"France""#);
    }

    #[test]
    fn pieces_are_cut_at_char_boundaries() {
        assert_eq!(pieces("héllo wörld", 4), ["héll", "o wö", "rld"]);
        assert!(pieces("", 4).is_empty());
    }
}
