//! Tool calls and structured output through real runs (issue 36): the stand-in as a real child
//! process answering prompts with tools and response formats, right and then broken one rule
//! at a time; each break is the tools line's FAIL naming its rule, `judge` gives the same
//! lines from the archive, result.json, JUnit and `--prom` carry the line, and a bad prompts
//! file is refused naming its line before anything starts. No timing is asserted.

use std::path::Path;

use serde_json::{json, Value};

use crate::util::*;

/// The prompts: a call with exact arguments, two calls, no call, and a JSON answer.
fn prompts() -> Vec<Value> {
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}},
    ]);
    vec![
        json!({"prompt": "What is the weather in Paris?", "tools": tools,
            "expect_tool": {"name": "get_weather", "arguments": {"city": "Paris"}}}),
        json!({"prompt": "What is the weather in Paris and the time in Tokyo?", "tools": tools,
            "expect_tool": ["get_weather", {"name": "get_time", "arguments": {"properties": {"zone": {"const": "Tokyo"}}}}]}),
        json!({"prompt": "Tell me about Paris.", "tools": tools, "tool_choice": "none",
            "expect_tool": "none"}),
        json!({"prompt": "What is the capital of France? Answer in JSON.",
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema":
                {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}}},
            "expect_json": true}),
    ]
}

/// Write prompts as JSONL in `dir`; its path.
fn prompts_file(dir: &Path, prompts: &[Value]) -> String {
    let path = dir.join("prompts.jsonl");
    let text: Vec<String> = prompts.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    path.to_str().unwrap().to_string()
}

/// A stand-in run of the four prompts once each, with `script`'s breaks: exit code, stdout,
/// the temp dir (the run is `run/` in it).
fn run(gate_args: &[&str], script: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let (d, out) = scratch();
    let file = prompts_file(d.path(), &prompts());
    let args = [
        &["--prompts", &file, "--replies", "4", "--max-drift", "0.99"][..],
        gate_args,
    ]
    .concat();
    let (code, stdout) = stand_in_run(&out, &args, script);
    (code, stdout, d)
}

#[test]
fn a_serve_whose_calls_and_json_are_right_passes_and_every_output_carries_the_line() {
    let (d, out) = scratch();
    let file = prompts_file(d.path(), &prompts());
    let prom = d.path().join("gate.prom");
    let junit = d.path().join("junit.xml");
    let (code, stdout) = stand_in_run(
        &out,
        &[
            "--prompts",
            &file,
            "--replies",
            "4",
            "--max-drift",
            "0.99",
            "--prom",
            prom.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let tools = line(&stdout, "tools");
    assert!(
        tools.contains("ok    4 replies to prompts with tools or formats: 3 tool calls, each named and its arguments valid; 1 without a call as expected; 1 JSON answer valid"),
        "{tools}"
    );
    // A reply that calls has its first token at its first call fragment, and content passes.
    assert!(
        line(&stdout, "content").contains("ok    4 replies, all with content"),
        "{stdout}"
    );
    let all = replies(&out);
    let calls = all[1]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{}", all[1]);
    assert_eq!(calls[1]["name"], "get_time");
    assert_eq!(
        serde_json::from_str::<Value>(calls[1]["arguments"].as_str().unwrap()).unwrap(),
        json!({"zone": "Tokyo"})
    );
    assert!(
        calls[0]["fragments"].as_u64().unwrap() > 2,
        "streamed in pieces: {}",
        all[1]
    );
    assert_eq!(all[1]["tools_prompt"], 1);
    assert!(all[1]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["tool_chars"].as_u64() > Some(0)));
    // judge gives the same lines; result.json, JUnit and --prom carry the line.
    assert_eq!(gate_judge_lines(&out), verdict_lines(&stdout));
    let result = json(&out.join("result.json"));
    let l = result["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["check"] == "tools")
        .unwrap();
    assert_eq!(l["status"], "ok", "{l}");
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("name=\"tools\""), "{junit}");
    let prom = std::fs::read_to_string(&prom).unwrap();
    assert!(prom.contains(r#"check="tools",status="ok"} 1"#), "{prom}");
}

#[test]
fn each_broken_rule_fails_the_tools_line_naming_it_and_judge_agrees() {
    for (flag, rule, says) in [
        (
            "--tool-args-not-json",
            "arguments",
            "arguments that are not JSON",
        ),
        (
            "--tool-markup-in-content",
            "markup",
            "the tool call marker \"<tool_call>\"",
        ),
        (
            "--tool-index-zero",
            "index",
            "2 calls at index 0 (\"get_weather\", \"get_time\")",
        ),
        ("--tool-args-dropped", "arguments", "has empty arguments"),
        (
            "--tool-wrong-name",
            "wrong tool",
            "it called \"get_time\"; \"get_weather\" was expected",
        ),
        (
            "--tool-finish-stop",
            "finish_reason",
            "ended with finish_reason \"stop\", not \"tool_calls\"",
        ),
        ("--tool-same-id", "id", "gave 2 calls the id"),
        (
            "--tool-no-call",
            "no call",
            "it called no tool; \"get_weather\" was expected",
        ),
        (
            "--json-off-schema",
            "json",
            "does not satisfy its schema: \"capital\" is a required property",
        ),
        ("--json-not-json", "json", "its content is not JSON"),
    ] {
        let (code, stdout, d) = run(&[], &[flag]);
        assert_eq!(code, Some(1), "{flag}: {stdout}");
        let tools = line(&stdout, "tools");
        assert!(tools.contains("FAIL"), "{flag}: {tools}");
        assert!(
            tools.contains(&format!("[{rule}]")) && tools.contains(says),
            "{flag}: {tools}"
        );
        // Never excused as timing, and judged the same from the archive.
        assert!(stdout.contains("RESULT: FAIL"), "{flag}: {stdout}");
        assert_eq!(
            gate_judge_lines(&d.path().join("run")),
            verdict_lines(&stdout),
            "{flag}"
        );
    }
}

#[test]
fn a_bad_prompts_file_exits_2_naming_its_line_before_anything_starts() {
    let good = json!({"prompt": "What is 2 + 2?"});
    let tool = |f: Value| {
        let mut p = json!({"prompt": "What is the weather in Paris?"});
        p.as_object_mut()
            .unwrap()
            .extend(f.as_object().unwrap().clone());
        p
    };
    for (bad, says) in [
        (
            tool(json!({"tools": {"name": "get_weather"}})),
            "line 2: tools is {\"name\":\"get_weather\"}: it is a list of function definitions",
        ),
        (
            tool(
                json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": "city"}}}]}),
            ),
            "line 2: the parameters of the function \"f\" is not a valid JSON Schema",
        ),
        (
            tool(json!({"expect_tool": "get_weather"})),
            "line 2: expect_tool without tools",
        ),
        (
            tool(json!({"expect_json": {"type": "objet"}})),
            "line 2: expect_json is not a valid JSON Schema",
        ),
        (
            tool(
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {"minLength": -1}}}}),
            ),
            "line 2: response_format's json_schema.schema is not a valid JSON Schema",
        ),
    ] {
        let (d, out) = scratch();
        let file = prompts_file(d.path(), &[good.clone(), bad]);
        let o = gate()
            .args(["run", "--stand-in", "--prompts", &file, "--out"])
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!out.exists(), "a run directory was made: {stderr}");
    }
}

/// The real llama-server with `--jinja` and SmolLM2-135M-Instruct (tests/llama.rs): its
/// `json_schema` and `json_object` formats are grammar-constrained, so their answers parse and
/// satisfy the schema. SmolLM2's chat template has no tools: llama-server takes the tools and
/// the model answers in words (chat format "peg-native" at -lv 4; the prompt is as long with
/// the tools as without), so a prompt that expects a call fails `[no call]`, as the reference
/// build does it, and one that expects none passes. docs/tools.md has what it sent.
#[test]
fn llama_server_answers_json_formats_by_their_schema_and_smollm2_makes_no_tool_call() {
    let _alone = exclusive();
    let (d, out) = scratch();
    let schema = json!({"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]});
    let tools = prompts()[0]["tools"].clone();
    let file = prompts_file(
        d.path(),
        &[
            json!({"prompt": "Name the capital of France as JSON.", "max_tokens": 48,
                "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
                "expect_json": true}),
            json!({"prompt": "What is the capital of France? Answer in JSON.", "max_tokens": 48,
                "response_format": {"type": "json_object"}, "expect_json": true}),
            json!({"prompt": "What is the weather in Paris?", "max_tokens": 32, "tools": tools,
                "expect_tool": "get_weather"}),
            json!({"prompt": "Tell me about Paris.", "max_tokens": 32, "tools": tools,
                "expect_tool": "none"}),
        ],
    );
    let gate = [
        &UNFLIPPABLE[..],
        &["--prompts", &file, "--replies", "4", "--max-drift", "0.99"],
    ]
    .concat();
    let Some((code, stdout)) = crate::llama::llama_run(&out, &gate, &["--jinja"]) else {
        return;
    };
    assert_eq!(code, Some(1), "{stdout}");
    let tools = line(&stdout, "tools");
    // The one fault: reply 3 answered in words.
    assert!(
        tools.contains(
            "FAIL  reply 3 [no call]: it called no tool; \"get_weather\" was expected (it said "
        ),
        "{tools}"
    );
    assert_eq!(tools.matches(" [").count(), 1, "{tools}");
    let all = replies(&out);
    for r in &all[..2] {
        let answer: Value = serde_json::from_str(r["content"].as_str().unwrap().trim()).unwrap();
        assert!(answer.is_object(), "{r}");
    }
    assert!(all.iter().all(|r| r["tool_calls"].is_null()), "{all:?}");
}

/// docs/tools-prompts.jsonl, the example docs/tools.md gives, passes against the stand-in.
#[test]
fn the_documented_example_prompts_pass_against_the_stand_in() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/tools-prompts.jsonl");
    let (_d, out) = scratch();
    let (code, stdout) = stand_in_run(
        &out,
        &[
            "--prompts",
            file.to_str().unwrap(),
            "--replies",
            "4",
            "--max-drift",
            "0.99",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(line(&stdout, "tools").contains(" ok "), "{stdout}");
}
