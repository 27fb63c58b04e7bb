//! The content line: whether each reply answered, and the helpers that quote a reply's text
//! visibly.

use crate::archive::check::Check;
use regex::Regex;
use std::cell::RefCell;
use std::collections::HashMap;

use crate::archive::record::{Line, ReplyRecord, Status};

/// The most failing replies the content line names, the rest counted: a soak of 20,000 replies
/// that all fail would otherwise make one line of megabytes, on the terminal and in
/// result.json and JUnit alike.
const NAMED: usize = 10;

pub(crate) fn content_line(
    replies: &[ReplyRecord],
    planned: usize,
    serve_died: Option<&str>,
) -> Line {
    if replies.is_empty() {
        return Line::new(Check::Content, Status::Fail, "no replies were made");
    }
    let mut problems = Vec::new();
    let mut expected = 0;
    for r in replies {
        match check_reply(r) {
            ReplyCheck::Good { expected: e } => expected += usize::from(e),
            ReplyCheck::Bad { text, .. } => problems.push(text),
        }
    }
    if problems.len() > NAMED {
        let more = problems.len() - NAMED;
        problems.truncate(NAMED);
        problems.push(format!(
            "{more} more {} (each in replies.jsonl)",
            if more == 1 {
                "reply like these"
            } else {
                "replies like these"
            }
        ));
    }
    if let Some(died) = serve_died {
        problems.push(died.to_string());
    }
    if replies.len() < planned {
        problems.push(format!(
            "only {} of {planned} replies were made",
            replies.len()
        ));
    }
    if !problems.is_empty() {
        return Line::new(Check::Content, Status::Fail, problems.join("; "));
    }
    let n = replies.len();
    let all = if n == 1 {
        "1 reply, with content".to_string()
    } else {
        format!("{n} replies, all with content")
    };
    let text = match expected {
        0 => all,
        e if e == n => format!("{all} and the expected answer"),
        e => format!("{all}; {e} with the expected answer"),
    };
    Line::new(Check::Content, Status::Ok, text)
}

/// One reply as the content line judges it.
pub(crate) enum ReplyCheck {
    /// Nothing is wrong; `expected` when its prompt said what the answer must match.
    Good { expected: bool },
    /// Something is: in a few words (for the timeline's mark) and in a sentence.
    Bad { word: &'static str, text: String },
}

/// Judge one reply's content: it failed, it streamed a choice the gate did not ask for, it has
/// none, or its answer does not match what its prompt expects. A reply cut at max_tokens says
/// so, where that is the likely reason.
pub(crate) fn check_reply(r: &ReplyRecord) -> ReplyCheck {
    let said = quote(&r.content, 80);
    let cut = if r.finish_reason.as_deref() == Some("length") {
        " (it was cut at max_tokens: finish_reason \"length\")"
    } else {
        ""
    };
    if let Some(err) = &r.error {
        let so_far = if r.content.is_empty() {
            String::new()
        } else {
            format!(" after saying {said}")
        };
        return ReplyCheck::Bad {
            word: "error",
            text: format!("{} failed{so_far}: {err}", r.name()),
        };
    }
    // Before the text is judged: which choice's words would pass is not the gate's to guess.
    if let Some(index) = r.unrequested_choice {
        return ReplyCheck::Bad {
            word: "unrequested choice",
            text: format!(
                "{} streamed choice index {index}, which the gate did not ask for (it asks for one choice, n=1)",
                r.name()
            ),
        };
    }
    // A reply that called a tool answered with its calls (issue 36): the tools line judges them.
    if r.content.trim().is_empty() && r.tool_calls.is_empty() {
        let only = if r.reasoning.trim().is_empty() {
            ""
        } else {
            " (only reasoning)"
        };
        return ReplyCheck::Bad {
            word: "no content",
            text: format!("{} has no content{only}{cut}", r.name()),
        };
    }
    let Some(pattern) = &r.expect else {
        return ReplyCheck::Good { expected: false };
    };
    match matches(pattern, &r.content) {
        Some(true) => ReplyCheck::Good { expected: true },
        Some(false) => {
            // A text past what is judged is judged by its head, in `run` and `judge` alike.
            let head = match r.text_cut {
                Some(c) if c.content_bytes > r.content.len() => format!(
                    " in its first {} KiB (the most of a reply's text the gate judges; it sent {} bytes)",
                    crate::archive::record::JUDGED_TEXT >> 10,
                    c.content_bytes
                ),
                _ => String::new(),
            };
            ReplyCheck::Bad {
                word: "wrong answer",
                text: format!(
                    "{} said {said}, which does not match /{pattern}/{head}{cut}",
                    r.name()
                ),
            }
        }
        None => ReplyCheck::Bad {
            word: "bad expected pattern",
            text: format!(
                "{}: the expected pattern /{pattern}/ is not a valid regex",
                r.name()
            ),
        },
    }
}

/// The most patterns a thread keeps made: a run's prompts have a few dozen.
const PATTERNS_KEPT: usize = 256;

thread_local! {
    /// Each prompt's pattern made once, not once a reply: 2,000 replies made 2,000 regexes, a
    /// sixth of a judge's time after its files were read (issue 52). `None` for one that is
    /// not a regex.
    static PATTERNS: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
}

/// Whether `text` matches `pattern`; `None` when the pattern is not a regex.
fn matches(pattern: &str, text: &str) -> Option<bool> {
    PATTERNS.with(|kept| {
        let mut kept = kept.borrow_mut();
        if !kept.contains_key(pattern) {
            if kept.len() >= PATTERNS_KEPT {
                kept.clear();
            }
            kept.insert(pattern.to_string(), Regex::new(pattern).ok());
        }
        kept[pattern].as_ref().map(|re| re.is_match(text))
    })
}

/// What is wrong with one reply, in a few words, as the content line judges it; `None` when
/// nothing is.
pub fn reply_problem(r: &ReplyRecord) -> Option<&'static str> {
    match check_reply(r) {
        ReplyCheck::Good { .. } => None,
        ReplyCheck::Bad { word, .. } => Some(word),
    }
}

// The quoting of foreign text is the crate's one module for it (issue 30, item 5).
pub(crate) use crate::inert::push_quoted;
pub use crate::inert::terminal as visible;
pub use crate::inert::{push_escape, push_visible, quote};
