//! The fixed prompts a gate sends, built in or from a JSONL file; and [`regex_problem`], a bad
//! pattern's fault on one line, for a prompt's `expect` and the verdict's route patterns alike.
//! It is here, below both the archive (which records prompts) and judging, so that neither
//! reaches the other through it.

use std::path::Path;

use anyhow::{bail, Context, Result};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// One prompt, with what its answer must match where that is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// The user message.
    pub prompt: String,
    /// A regex the answer must match (use `(?i)` for case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// Overrides `--max-tokens` for this prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The answer is short and should end by itself: every reply to such prompts cut at
    /// max_tokens is the output line's "never stops" (issue 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stops: Option<bool>,
    /// OpenAI function definitions offered to the serve, sent as given (issue 36).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<serde_json::Value>,
    /// `tool_choice`, sent as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<serde_json::Value>,
    /// `response_format` (`json_object`, or `json_schema` with a schema), sent as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<serde_json::Value>,
    /// The call the reply must make: a function's name, `"none"`, `{"name", "arguments"}`
    /// (a schema or exact values), or a list of those ([`crate::tool_spec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_tool: Option<serde_json::Value>,
    /// The reply's content is JSON: `true`, or a JSON Schema it must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_json: Option<serde_json::Value>,
}

impl Prompt {
    /// Its tool and format fields (issue 36), for [`crate::tool_spec::Spec::of`].
    pub fn tool_fields(&self) -> crate::tool_spec::Fields<'_> {
        crate::tool_spec::Fields {
            tools: self.tools.as_ref(),
            tool_choice: self.tool_choice.as_ref(),
            response_format: self.response_format.as_ref(),
            expect_tool: self.expect_tool.as_ref(),
            expect_json: self.expect_json.as_ref(),
        }
    }

    /// Whether it carries tools, a tool choice, a response format or their expectations.
    pub fn asks_tools(&self) -> bool {
        self.tool_fields().any()
    }

    /// A prompt of this text and nothing else.
    pub fn plain(prompt: &str) -> Prompt {
        Prompt {
            prompt: prompt.to_string(),
            expect: None,
            max_tokens: None,
            stops: None,
            tools: None,
            tool_choice: None,
            response_format: None,
            expect_tool: None,
            expect_json: None,
        }
    }
}

/// A built-in prompt and the answer the stand-in gives it.
pub struct BuiltIn {
    /// The user message.
    pub prompt: &'static str,
    /// The pattern its answer must match.
    pub expect: &'static str,
    /// The stand-in's answer: right, so `run --stand-in` passes.
    pub stand_in_answer: &'static str,
}

/// The three prompts a gate sends when `--prompts` is not given. Short answers that even
/// SmolLM2-135M-Instruct gets right at temperature 0 (checked against llama-server), each
/// with a pattern that tells a right answer from a wrong one.
pub const BUILT_IN: [BuiltIn; 3] = [
    BuiltIn {
        prompt: "What is the capital of France? Answer in one word.",
        expect: "(?i)paris",
        stand_in_answer: "Paris.",
    },
    BuiltIn {
        prompt: "What is 2 + 2? Answer with a number.",
        expect: r"\b4\b",
        stand_in_answer: "2 + 2 = 4.",
    },
    BuiltIn {
        prompt: "What is the opposite of hot? Answer in one word.",
        expect: "(?i)cold",
        stand_in_answer: "Cold.",
    },
];

/// The built-in prompts as [`Prompt`]s.
pub fn built_in() -> Vec<Prompt> {
    BUILT_IN
        .iter()
        .map(|b| Prompt {
            expect: Some(b.expect.to_string()),
            stops: Some(true),
            ..Prompt::plain(b.prompt)
        })
        .collect()
}

/// The most of a prompts file read, bytes (issue 30): thousands of prompts take a few MiB, and
/// `--prompts /dev/zero` once took a GiB of memory before it was refused.
pub const PROMPTS_MAX_BYTES: u64 = 16 << 20;

/// Read prompts from a JSONL file: one `{"prompt": "...", "expect": "regex", "max_tokens": N,
/// "stops": true}` per line, all but the prompt optional, with the tool and format fields of
/// [`crate::tool_spec`]; blank lines are skipped.
pub fn load(path: &Path) -> Result<Vec<Prompt>> {
    let bytes =
        crate::archive::safe_open::read_capped(path, PROMPTS_MAX_BYTES).context("--prompts")?;
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "--prompts: the prompts file {} is not UTF-8 text",
            path.display()
        )
    })?;
    parse(&text).with_context(|| format!("in the prompts file {}", path.display()))
}

/// Parse prompts from JSONL text, checking every expected pattern compiles.
pub fn parse(text: &str) -> Result<Vec<Prompt>> {
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let p: Prompt = serde_json::from_str(line)
            .with_context(|| format!("line {}: not a prompt object", i + 1))?;
        if p.prompt.trim().is_empty() {
            bail!("line {}: the prompt is empty", i + 1);
        }
        if let Some(e) = &p.expect {
            // One line, as a bad route pattern's: the regex crate's own text draws the pattern
            // with a caret over several lines.
            if let Err(err) = Regex::new(e) {
                bail!(
                    "line {}: the expect pattern {e:?} is not a valid regex: {}",
                    i + 1,
                    regex_problem(&err)
                );
            }
        }
        if p.max_tokens == Some(0) {
            bail!("line {}: max_tokens must be at least 1", i + 1);
        }
        // Tools and formats (issue 36): every schema compiled, every name offered.
        if let Err(e) = crate::tool_spec::Spec::of(p.tool_fields()) {
            bail!("line {}: {e}", i + 1);
        }
        prompts.push(p);
    }
    if prompts.is_empty() {
        bail!("no prompts");
    }
    Ok(prompts)
}

/// What is wrong with a pattern, on one line: the regex crate's message is a drawing of the
/// pattern with a caret under the fault, over several lines.
pub(crate) fn regex_problem(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map_or_else(
            || text.split_whitespace().collect::<Vec<_>>().join(" "),
            str::to_string,
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_answers_match_their_patterns() {
        for b in BUILT_IN {
            assert!(Regex::new(b.expect).unwrap().is_match(b.stand_in_answer));
        }
    }

    #[test]
    fn jsonl_with_optional_fields_parses() {
        let p = parse(
            "{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\", \"expect\": \"x\", \"max_tokens\": 5}\n",
        )
        .unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].expect.as_deref(), Some("x"));
        assert_eq!(p[1].max_tokens, Some(5));
    }

    #[test]
    fn bad_lines_name_their_line_number() {
        let e = parse("{\"prompt\": \"a\"}\nnot json\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
        let e = parse("{\"prompt\": \"a\", \"expect\": \"(\"}").unwrap_err();
        assert!(
            format!("{e:#}").contains("is not a valid regex: unclosed group"),
            "{e:#}"
        );
        assert_eq!(format!("{e:#}").lines().count(), 1, "{e:#}");
        assert!(parse("{\"prompt\": \"a\", \"typo\": 1}").is_err());
        assert!(parse("\n\n").is_err());
        assert!(parse("{\"prompt\": \"  \"}").is_err());
    }
}
