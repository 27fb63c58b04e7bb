//! A reply's tool calls (issue 36), as the gate gathered them from their streamed fragments
//! (`delta.tool_calls[]`): each call's `index`, `id`, `function.name` and the `arguments` text
//! its fragments carried, in replies.jsonl beside the reply's text.
//!
//! The fragments are gathered by their `index`, as the OpenAI API streams them and its own
//! client reads them: a call's first fragment brings its id and name, the rest pieces of its
//! arguments. A fragment with an id other than its index's call's starts a new call at that
//! index: a serve that streams every call at index 0 (llama.cpp#18591) is recorded as the
//! calls it sent, two at index 0, for the tools line to name, not as one call whose arguments
//! run two objects together. Names arriving in pieces are joined, as the OpenAI client joins
//! them.
//!
//! Bounded, as everything a serve sends: at most [`MAX_TOOL_CALLS`] calls a reply, names and
//! ids cut to [`TOOL_NAME_BYTES`], and all the arguments of a reply at most
//! [`TOOL_ARGUMENTS_BYTES`]: past a bound, the reply fails with what the serve did.

use serde::{Deserialize, Serialize};

/// The most tool calls a reply may stream.
pub const MAX_TOOL_CALLS: usize = 128;
/// The most bytes of a call's name or id kept (a real one is a few dozen).
pub const TOOL_NAME_BYTES: usize = 256;
/// The most bytes of arguments text a reply's calls may stream in all: what judging reads of
/// a reply's text (`JUDGED_TEXT`, held equal by a test), kept whole so that the arguments
/// judged are the arguments sent.
pub const TOOL_ARGUMENTS_BYTES: usize = 256 << 10;

/// One tool call of a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Its `index`, as streamed; absent when its fragments carried none.
    pub index: Option<u64>,
    /// Its `id`, when a fragment gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function.name`, its pieces joined.
    pub name: String,
    /// `function.arguments`, its pieces joined: the JSON text of the arguments, when the serve
    /// is right.
    pub arguments: String,
    /// How many fragments it came in.
    pub fragments: u32,
}

/// One fragment as the wire read it: its fields, borrowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolCallFragment<'a> {
    /// `index`.
    pub index: Option<u64>,
    /// `id`, when given and not empty.
    pub id: Option<&'a str>,
    /// `function.name`, when given and not empty.
    pub name: Option<&'a str>,
    /// `function.arguments`, when given.
    pub arguments: Option<&'a str>,
}

impl ToolCallFragment<'_> {
    /// The characters of text it carries (name and arguments): what makes it a token.
    pub fn chars(&self) -> usize {
        self.name.map_or(0, |n| n.chars().count()) + self.arguments.map_or(0, |a| a.chars().count())
    }
}

/// `text` cut to at most `max` bytes at a character's boundary.
fn cut_to(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Add one fragment to a reply's calls; the reason the reply fails when it passes a bound.
pub fn gather_tool_call(
    calls: &mut Vec<ToolCallRecord>,
    f: ToolCallFragment<'_>,
) -> Result<(), String> {
    let id =
        f.id.filter(|i| !i.is_empty())
            .map(|i| cut_to(i, TOOL_NAME_BYTES));
    let name = f.name.filter(|n| !n.is_empty());
    let args = f.arguments.unwrap_or("");
    let sent: usize = calls.iter().map(|c| c.arguments.len()).sum();
    if sent + args.len() > TOOL_ARGUMENTS_BYTES {
        return Err(format!(
            "the reply's tool call arguments passed {} KiB (the gate's cap on a reply's arguments)",
            TOOL_ARGUMENTS_BYTES >> 10
        ));
    }
    // The call at this index that the fragment goes on: the last one there, unless the
    // fragment's id says it is another.
    let at = calls.iter().rposition(|c| c.index == f.index);
    let target = match (at, id) {
        (Some(i), Some(id)) if calls[i].id.as_deref().is_some_and(|own| own != id) => None,
        (at, _) => at,
    };
    let call = match target {
        Some(i) => &mut calls[i],
        None => {
            if calls.len() >= MAX_TOOL_CALLS {
                return Err(format!(
                    "the serve streamed more than {MAX_TOOL_CALLS} tool calls in one reply"
                ));
            }
            calls.push(ToolCallRecord {
                index: f.index,
                id: None,
                name: String::new(),
                arguments: String::new(),
                fragments: 0,
            });
            calls.last_mut().expect("just pushed")
        }
    };
    call.fragments = call.fragments.saturating_add(1);
    if call.id.is_none() {
        call.id = id.map(str::to_string);
    }
    if let Some(name) = name {
        // A name repeated in a later fragment is the same name; a piece of one is joined.
        if call.name != name {
            let room = TOOL_NAME_BYTES.saturating_sub(call.name.len());
            call.name.push_str(cut_to(name, room));
        }
    }
    call.arguments.push_str(args);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag<'a>(
        index: Option<u64>,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: Option<&'a str>,
    ) -> ToolCallFragment<'a> {
        ToolCallFragment {
            index,
            id,
            name,
            arguments,
        }
    }

    #[test]
    fn fragments_gather_by_index_into_calls_as_openai_streams_them() {
        let mut calls = Vec::new();
        for f in [
            frag(Some(0), Some("call_a"), Some("get_weather"), Some("")),
            frag(Some(1), Some("call_b"), Some("get_time"), Some("")),
            frag(Some(0), None, None, Some("{\"city\":")),
            frag(Some(1), None, None, Some("{}")),
            frag(Some(0), None, None, Some("\"Paris\"}")),
        ] {
            gather_tool_call(&mut calls, f).unwrap();
        }
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, "{\"city\":\"Paris\"}");
        assert_eq!((calls[0].fragments, calls[1].fragments), (3, 2));
        assert_eq!(calls[1].id.as_deref(), Some("call_b"));
    }

    #[test]
    fn a_second_id_at_one_index_is_a_second_call_and_a_repeated_one_is_not() {
        let mut calls = Vec::new();
        for f in [
            frag(Some(0), Some("call_a"), Some("get_weather"), Some("{}")),
            frag(Some(0), Some("call_a"), Some("get_weather"), Some("")),
            frag(Some(0), Some("call_b"), Some("get_time"), Some("{")),
            frag(Some(0), None, None, Some("}")),
        ] {
            gather_tool_call(&mut calls, f).unwrap();
        }
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!((calls[0].index, calls[1].index), (Some(0), Some(0)));
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(
            (calls[1].name.as_str(), calls[1].arguments.as_str()),
            ("get_time", "{}")
        );
    }

    #[test]
    fn a_name_in_pieces_is_joined_and_fragments_without_an_index_are_one_call() {
        let mut calls = Vec::new();
        for f in [
            frag(None, None, Some("get_"), None),
            frag(None, None, Some("weather"), Some("{}")),
        ] {
            gather_tool_call(&mut calls, f).unwrap();
        }
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].index, None);
    }

    #[test]
    fn calls_names_and_arguments_are_bounded() {
        assert_eq!(TOOL_ARGUMENTS_BYTES, crate::archive::record::JUDGED_TEXT);
        let mut calls = Vec::new();
        let long = "x".repeat(TOOL_NAME_BYTES * 2);
        gather_tool_call(
            &mut calls,
            frag(Some(0), Some(&long), Some(&long), Some("")),
        )
        .unwrap();
        assert_eq!(calls[0].name.len(), TOOL_NAME_BYTES);
        // Cut at a character's boundary: "é" takes two bytes, from an odd place here.
        let mut wide = Vec::new();
        let name = format!("a{}", "é".repeat(TOOL_NAME_BYTES));
        gather_tool_call(&mut wide, frag(Some(0), None, Some(&name), None)).unwrap();
        assert_eq!(wide[0].name.len(), TOOL_NAME_BYTES - 1);
        assert_eq!(calls[0].id.as_ref().unwrap().len(), TOOL_NAME_BYTES);
        for i in 1..MAX_TOOL_CALLS as u64 {
            gather_tool_call(&mut calls, frag(Some(i), None, Some("f"), None)).unwrap();
        }
        let e = gather_tool_call(&mut calls, frag(Some(999), None, Some("f"), None)).unwrap_err();
        assert!(e.contains("more than 128 tool calls"), "{e}");
        let big = "a".repeat(TOOL_ARGUMENTS_BYTES);
        gather_tool_call(&mut calls, frag(Some(0), None, None, Some(&big))).unwrap();
        let e = gather_tool_call(&mut calls, frag(Some(0), None, None, Some("b"))).unwrap_err();
        assert!(e.contains("arguments passed 256 KiB"), "{e}");
    }
}
