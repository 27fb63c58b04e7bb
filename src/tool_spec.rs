//! Tool calls and structured output (issue 36): what a prompt with `tools`, `tool_choice` or
//! `response_format` asks of the serve, what it expects back (`expect_tool`, `expect_json`),
//! and the JSON Schemas both are held to.
//!
//! Here, at the top, below the prompts file (which refuses a prompt [`Spec::of`] refuses, naming
//! its line, before anything starts), the live client (which sends the fields as given) and
//! judging (the tools line, which holds each reply to its prompt's spec). Schemas are read and
//! checked by the `jsonschema` crate, built without its HTTP and file resolvers: a `$ref` the
//! schema does not hold itself is a bad schema, never a fetch.

use serde_json::Value;

/// A JSON Schema, checked to be one, with its validator.
pub struct Schema {
    /// The schema as given.
    pub json: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Schema({})", self.json)
    }
}

/// The most characters of a schema's or a validator's message kept in a line: a message may
/// quote the instance, which is the serve's text.
const MESSAGE_KEPT: usize = 200;

/// `text` cut to `max` characters (marked with …) and on one line: a validator's message may
/// hold a key of the serve's arguments as it is, newline and escapes and all, and a line of
/// the verdict must never be broken by the serve (a forged `RESULT: PASS`).
fn cut(text: &str, max: usize) -> String {
    let kept = match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    };
    crate::inert::one_line(&kept).into_owned()
}

impl Schema {
    /// `json` as a schema, or why it is none; `what` names it in the reason.
    pub fn new(json: &Value, what: &str) -> Result<Schema, String> {
        match jsonschema::validator_for(json) {
            Ok(validator) => Ok(Schema {
                json: json.clone(),
                validator,
            }),
            Err(e) => Err(format!(
                "{what} is not a valid JSON Schema: {}",
                cut(&e.to_string(), MESSAGE_KEPT)
            )),
        }
    }

    /// Where `instance` breaks the schema, in a few words (the first break, by its place in
    /// the instance), or `None` when it satisfies it.
    pub fn problem(&self, instance: &Value) -> Option<String> {
        let e = self.validator.iter_errors(instance).next()?;
        let at = e.instance_path().to_string();
        let at = if at.is_empty() {
            String::new()
        } else {
            format!(" at {at}")
        };
        Some(cut(&format!("{e}{at}"), MESSAGE_KEPT))
    }
}

/// One function a prompt offers.
#[derive(Debug)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// Its `parameters`, where it gives them.
    pub parameters: Option<Schema>,
}

/// What a reply's arguments must be.
#[derive(Debug)]
pub enum ArgsExpect {
    /// Satisfy this schema.
    Schema(Schema),
    /// Equal these values (numbers by value: 1 and 1.0 are one).
    Exact(Value),
}

/// One call a reply is expected to make.
#[derive(Debug)]
pub struct Expected {
    /// The function's name.
    pub name: String,
    /// What its arguments must be, beyond its function's own `parameters`.
    pub arguments: Option<ArgsExpect>,
}

/// What `expect_tool` asks.
#[derive(Debug)]
pub enum CallExpect {
    /// `"none"`: the reply calls no tool.
    NoCall,
    /// A name or one object: the reply calls at least once, and every call is this one.
    Every(Expected),
    /// A list: the reply makes exactly these calls, each matched by its own, in any order.
    Each(Vec<Expected>),
}

/// What `expect_json` asks of the content.
#[derive(Debug)]
pub enum JsonExpect {
    /// It parses as JSON, and satisfies every schema here: `expect_json`'s own, and the
    /// `json_schema` response format's (the serve was told that one).
    Schemas(Vec<Schema>),
}

/// Everything a prompt's tool and format fields ask, checked.
#[derive(Debug)]
pub struct Spec {
    /// The functions offered, in order.
    pub functions: Vec<Function>,
    /// `expect_tool`.
    pub expect_tool: Option<CallExpect>,
    /// `expect_json`.
    pub expect_json: Option<JsonExpect>,
    /// The function `tool_choice` names, when it names one: OpenAI's API ends such a forced
    /// call with `finish_reason` `stop`, and vLLM does as it does (vllm-project/vllm#25054).
    pub forced: Option<String>,
}

/// The keywords of JSON Schema (draft 2020-12 and the drafts before it), to tell an
/// expectation's arguments given as a schema from arguments given as values.
const SCHEMA_KEYWORDS: [&str; 45] = [
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "$comment",
    "definitions",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "contains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "description",
    "title",
    "default",
    "examples",
    "dependentRequired",
    "unevaluatedProperties",
    "dependentSchemas",
];

/// A prompt's fields of issue 36, as the prompts file gave them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fields<'a> {
    /// `tools`.
    pub tools: Option<&'a Value>,
    /// `tool_choice`.
    pub tool_choice: Option<&'a Value>,
    /// `response_format`.
    pub response_format: Option<&'a Value>,
    /// `expect_tool`.
    pub expect_tool: Option<&'a Value>,
    /// `expect_json`.
    pub expect_json: Option<&'a Value>,
}

impl Fields<'_> {
    /// Whether any is given.
    pub fn any(&self) -> bool {
        self.tools.is_some()
            || self.tool_choice.is_some()
            || self.response_format.is_some()
            || self.expect_tool.is_some()
            || self.expect_json.is_some()
    }
}

impl Spec {
    /// What `p` asks and expects, checked; `None` when it carries none of the fields. The
    /// reason is one line, for the prompts file to put its line number before.
    pub fn of(p: Fields<'_>) -> Result<Option<Spec>, String> {
        if !p.any() {
            return Ok(None);
        }
        let functions = match p.tools {
            Some(tools) => functions(tools)?,
            None => Vec::new(),
        };
        let forced = match p.tool_choice {
            Some(choice) => tool_choice(choice, &functions)?,
            None => None,
        };
        let (json_mode, format_schema) = match p.response_format {
            Some(f) => response_format(f)?,
            None => (false, None),
        };
        let expect_tool = match p.expect_tool {
            Some(e) => Some(call_expect(e, &functions, p.tools.is_some())?),
            None => None,
        };
        let expect_json = match p.expect_json {
            // A JSON response format asks for JSON: without tools to call instead, the content
            // is held to it as `expect_json: true` would hold it.
            None if json_mode && functions.is_empty() => {
                Some(JsonExpect::Schemas(format_schema.into_iter().collect()))
            }
            None => None,
            Some(e) => {
                if !matches!(expect_tool, None | Some(CallExpect::NoCall)) {
                    return Err(
                        "expect_json with an expect_tool that calls: a reply that calls a tool has no JSON content to judge (expect_tool \"none\" may go with it)"
                            .into(),
                    );
                }
                let mut schemas = Vec::new();
                match e {
                    Value::Bool(true) => {}
                    Value::Object(_) => schemas.push(Schema::new(e, "expect_json")?),
                    _ => {
                        return Err(format!(
                            "expect_json is {}: it is true (any JSON) or a JSON Schema (an object)",
                            cut(&e.to_string(), 60)
                        ))
                    }
                }
                if let Some(s) = format_schema {
                    schemas.push(s);
                }
                Some(JsonExpect::Schemas(schemas))
            }
        };
        Ok(Some(Spec {
            functions,
            expect_tool,
            expect_json,
            forced,
        }))
    }

    /// The function offered by this name.
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// `tools`: a non-empty list of `{"type": "function", "function": {"name": ..., "parameters":
/// schema}}`, the names distinct.
fn functions(tools: &Value) -> Result<Vec<Function>, String> {
    let Some(list) = tools.as_array().filter(|l| !l.is_empty()) else {
        return Err(format!(
            "tools is {}: it is a list of function definitions ({{\"type\": \"function\", \"function\": {{\"name\": ...}}}})",
            cut(&tools.to_string(), 60)
        ));
    };
    let mut out: Vec<Function> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let not_one = || {
            format!(
                "tools[{i}] is not a function definition ({{\"type\": \"function\", \"function\": {{\"name\": ...}}}}): {}",
                cut(&t.to_string(), 60)
            )
        };
        let (Some(kind), Some(f)) = (t.get("type"), t.get("function")) else {
            return Err(not_one());
        };
        if kind != "function" || !f.is_object() {
            return Err(not_one());
        }
        let name = match f.get("name").and_then(Value::as_str) {
            Some(name) if !name.trim().is_empty() => name.to_string(),
            _ => return Err(format!("tools[{i}] has no name")),
        };
        if out.iter().any(|o| o.name == name) {
            return Err(format!(
                "tools[{i}]: the function {name:?} is offered twice"
            ));
        }
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => None,
            Some(p) => Some(Schema::new(
                p,
                &format!("the parameters of the function {name:?}"),
            )?),
        };
        out.push(Function { name, parameters });
    }
    Ok(out)
}

/// `tool_choice`: "none", "auto", "required", or `{"type": "function", "function": {"name":
/// N}}` naming an offered function (returned); with tools.
fn tool_choice(choice: &Value, functions: &[Function]) -> Result<Option<String>, String> {
    if functions.is_empty() {
        return Err("tool_choice without tools".into());
    }
    let name = choice
        .get("function")
        .and_then(|f| f.get("name"))
        .and_then(Value::as_str);
    match (choice, name) {
        (Value::String(s), _) if ["none", "auto", "required"].contains(&s.as_str()) => Ok(None),
        (Value::Object(_), Some(n)) if functions.iter().any(|f| f.name == n) => {
            Ok(Some(n.to_string()))
        }
        (Value::Object(_), Some(n)) => Err(format!(
            "tool_choice names the function {n:?}, which tools do not offer"
        )),
        _ => Err(format!(
            "tool_choice is {}: it is \"none\", \"auto\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
            cut(&choice.to_string(), 60)
        )),
    }
}

/// `response_format`: `{"type": "text"}`, `{"type": "json_object"}` or `{"type":
/// "json_schema", "json_schema": {"schema": ...}}`: whether it asks for JSON, and the schema of
/// the last, checked.
fn response_format(f: &Value) -> Result<(bool, Option<Schema>), String> {
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok((false, None)),
        Some("json_object") => Ok((true, None)),
        Some("json_schema") => match f.get("json_schema").and_then(|j| j.get("schema")) {
            Some(s) => Schema::new(s, "response_format's json_schema.schema")
                .map(|s| (true, Some(s))),
            None => Err(
                "response_format json_schema has no json_schema.schema (the schema the content must satisfy)"
                    .into(),
            ),
        },
        _ => Err(format!(
            "response_format is {}: its type is \"text\", \"json_object\" or \"json_schema\"",
            cut(&f.to_string(), 60)
        )),
    }
}

/// `expect_tool`: "none", a name, `{"name": ..., "arguments": ...}`, or a list of names and
/// objects; every name one the tools offer.
fn call_expect(e: &Value, functions: &[Function], has_tools: bool) -> Result<CallExpect, String> {
    if !has_tools {
        return Err("expect_tool without tools: a reply can only call a tool it is offered".into());
    }
    match e {
        Value::String(s) if s == "none" => Ok(CallExpect::NoCall),
        Value::Array(list) if !list.is_empty() => list
            .iter()
            .map(|one| expected(one, functions))
            .collect::<Result<_, _>>()
            .map(CallExpect::Each),
        _ => expected(e, functions).map(CallExpect::Every),
    }
}

fn expected(e: &Value, functions: &[Function]) -> Result<Expected, String> {
    let shape = || {
        format!(
            "expect_tool is {}: it is \"none\", a function's name, {{\"name\": ..., \"arguments\": ...}}, or a list of names and such objects",
            cut(&e.to_string(), 60)
        )
    };
    let (name, arguments) = match e {
        Value::String(name) => (name.as_str(), None),
        Value::Object(o) => {
            if o.keys().any(|k| k != "name" && k != "arguments") {
                return Err(shape());
            }
            match o.get("name").and_then(Value::as_str) {
                Some(name) => (name, o.get("arguments")),
                None => return Err(shape()),
            }
        }
        _ => return Err(shape()),
    };
    if !functions.iter().any(|f| f.name == name) {
        return Err(format!(
            "expect_tool names the function {name:?}, which tools do not offer"
        ));
    }
    let arguments = match arguments {
        None => None,
        Some(a) if reads_as_schema(a) => Some(ArgsExpect::Schema(Schema::new(
            a,
            &format!("expect_tool's arguments for {name:?}"),
        )?)),
        Some(a) => Some(ArgsExpect::Exact(a.clone())),
    };
    Ok(Expected {
        name: name.to_string(),
        arguments,
    })
}

/// Whether an expectation's `arguments` is a schema: an object whose every key is a JSON
/// Schema keyword. Anything else is values (`{"city": "Paris"}`); values that would read as
/// a schema are written `{"const": {...}}`, the schema that is exactly them.
fn reads_as_schema(a: &Value) -> bool {
    a.as_object()
        .is_some_and(|o| !o.is_empty() && o.keys().all(|k| SCHEMA_KEYWORDS.contains(&k.as_str())))
}

/// Whether two JSON values are the same: objects by their members whatever their order,
/// numbers by value (1 and 1.0 are one).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::Prompt;
    use serde_json::json;

    fn prompt(fields: Value) -> Prompt {
        let mut p = json!({"prompt": "What is the weather in Paris?"});
        p.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        serde_json::from_value(p).unwrap()
    }

    fn spec(fields: Value) -> Result<Option<Spec>, String> {
        Spec::of(prompt(fields).tool_fields())
    }

    const WEATHER: &str = r#"[{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"]}}}, {"type": "function", "function": {"name": "get_time"}}]"#;

    fn tools() -> Value {
        serde_json::from_str(WEATHER).unwrap()
    }

    fn refused(fields: Value) -> String {
        spec(fields).unwrap_err()
    }

    #[test]
    fn a_prompt_without_the_fields_has_no_spec_and_one_with_them_is_read() {
        assert!(spec(json!({})).unwrap().is_none());
        let s = spec(json!({"tools": tools(), "expect_tool": "get_weather"}))
            .unwrap()
            .unwrap();
        assert_eq!(s.functions.len(), 2);
        assert!(s.function("get_weather").unwrap().parameters.is_some());
        assert!(s.function("get_time").unwrap().parameters.is_none());
        assert!(matches!(s.expect_tool, Some(CallExpect::Every(ref e)) if e.name == "get_weather"));
    }

    #[test]
    fn every_allowed_choice_and_format_is_taken_and_a_schema_says_itself() {
        for choice in [
            json!("none"),
            json!("auto"),
            json!("required"),
            json!({"type": "function", "function": {"name": "get_time"}}),
        ] {
            let s = spec(json!({"tools": tools(), "tool_choice": choice}))
                .unwrap()
                .unwrap();
            assert_eq!(s.forced.is_some(), choice.is_object(), "{choice}");
        }
        for format in ["text", "json_object"] {
            let f = json!({"response_format": {"type": format}});
            assert!(spec(f).unwrap().is_some(), "{format}");
        }
        let s = Schema::new(&json!({"type": "object"}), "s").unwrap();
        assert_eq!(format!("{s:?}"), r#"Schema({"type":"object"})"#);
        // A key of the serve's, newline and escape and all, stays on one line.
        let closed = json!({"type": "object", "additionalProperties": {"type": "string"}});
        let s = Schema::new(&closed, "s").unwrap();
        let said = s.problem(&json!({"a\nRESULT: PASS\u{1b}[2J": 1})).unwrap();
        assert!(said.contains("RESULT: PASS"), "the key is quoted: {said}");
        assert!(!said.contains('\n') && !said.contains('\u{1b}'), "{said}");
    }

    #[test]
    fn arguments_of_schema_keywords_are_a_schema_and_others_are_values() {
        let s = spec(json!({"tools": tools(), "expect_tool": [
            {"name": "get_weather", "arguments": {"properties": {"city": {"const": "Paris"}}}},
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_weather", "arguments": {"const": {"type": "object"}}},
        ]}))
        .unwrap()
        .unwrap();
        let Some(CallExpect::Each(list)) = s.expect_tool else {
            panic!("a list")
        };
        assert!(matches!(list[0].arguments, Some(ArgsExpect::Schema(_))));
        assert!(matches!(list[1].arguments, Some(ArgsExpect::Exact(_))));
        let Some(ArgsExpect::Schema(exact)) = &list[2].arguments else {
            panic!("const is a schema")
        };
        assert!(exact.problem(&json!({"type": "object"})).is_none());
        assert!(exact.problem(&json!({"type": "array"})).is_some());
    }

    #[test]
    fn bad_fields_are_refused_each_with_its_reason() {
        for (fields, says) in [
            (
                json!({"tools": {"a": 1}}),
                "tools is {\"a\":1}: it is a list",
            ),
            (json!({"tools": []}), "tools is []"),
            (
                json!({"tools": [{"name": "f"}]}),
                "tools[0] is not a function definition",
            ),
            (
                json!({"tools": [{"type": "tool", "function": {"name": "f"}}]}),
                "tools[0] is not a function definition",
            ),
            (
                json!({"tools": [{"type": "function", "function": "f"}]}),
                "tools[0] is not a function definition",
            ),
            (
                json!({"tools": tools(), "expect_tool": []}),
                "expect_tool is []",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": ""}}]}),
                "has no name",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "celsius"}}}]}),
                "the parameters of the function \"f\" is not a valid JSON Schema",
            ),
            (
                json!({"expect_tool": "get_weather"}),
                "expect_tool without tools",
            ),
            (
                json!({"tools": tools(), "expect_tool": "get_wether"}),
                "names the function \"get_wether\", which tools do not offer",
            ),
            (
                json!({"tools": tools(), "expect_tool": {"name": "get_weather", "args": {}}}),
                "expect_tool is",
            ),
            (
                json!({"tools": tools(), "expect_tool": {"name": "get_weather", "arguments": {"type": 3}}}),
                "expect_tool's arguments for \"get_weather\" is not a valid JSON Schema",
            ),
            (json!({"expect_json": false}), "expect_json is false"),
            (
                json!({"expect_json": {"required": "a"}}),
                "expect_json is not a valid JSON Schema",
            ),
            (
                json!({"tools": tools(), "expect_tool": "get_time", "expect_json": true}),
                "expect_json with an expect_tool that calls",
            ),
            (json!({"tool_choice": "auto"}), "tool_choice without tools"),
            (
                json!({"tools": tools(), "tool_choice": "always"}),
                "tool_choice is \"always\"",
            ),
            (
                json!({"tools": tools(), "tool_choice": {"type": "function", "function": {"name": "f"}}}),
                "names the function \"f\"",
            ),
            (
                json!({"response_format": {"type": "xml"}}),
                "its type is \"text\", \"json_object\" or \"json_schema\"",
            ),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "a"}}}),
                "has no json_schema.schema",
            ),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "http://127.0.0.1:1/s.json"}}}}),
                "response_format's json_schema.schema is not a valid JSON Schema",
            ),
        ] {
            let e = refused(fields.clone());
            assert!(e.contains(says), "{fields}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn the_json_format_schema_joins_expect_json_and_the_first_break_is_said_with_its_place() {
        let s = spec(json!({
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema":
                {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}},
            "expect_json": {"type": "object", "required": ["m"]},
        }))
        .unwrap()
        .unwrap();
        let Some(JsonExpect::Schemas(schemas)) = s.expect_json else {
            panic!("schemas")
        };
        assert_eq!(schemas.len(), 2);
        assert_eq!(
            schemas[1].problem(&json!({"n": "x", "m": 1})).unwrap(),
            "\"x\" is not of type \"integer\" at /n"
        );
        assert!(schemas[1].problem(&json!({"n": 2})).is_none());
        assert!(schemas[0].problem(&json!({"n": 2})).is_some());
        // A JSON format alone asks for JSON; beside tools, a reply may call instead.
        let format = json!({"type": "json_object"});
        let s = spec(json!({"response_format": format})).unwrap().unwrap();
        assert!(matches!(s.expect_json, Some(JsonExpect::Schemas(ref v)) if v.is_empty()));
        let s = spec(json!({"response_format": format, "tools": tools()}))
            .unwrap()
            .unwrap();
        assert!(s.expect_json.is_none());
        let text = json!({"type": "text"});
        let s = spec(json!({"response_format": text})).unwrap().unwrap();
        assert!(s.expect_json.is_none());
    }

    #[test]
    fn the_same_json_is_the_same_whatever_the_order_and_the_number_spelling() {
        assert!(same_json(
            &json!({"a": 1, "b": [1.0, "x"]}),
            &json!({"b": [1, "x"], "a": 1.0})
        ));
        assert!(!same_json(&json!({"a": 1}), &json!({"a": 1, "b": null})));
        assert!(!same_json(&json!({"a": 1}), &json!({"a": "1"})));
        assert!(!same_json(&json!([1, 2]), &json!([2, 1])));
    }
}
