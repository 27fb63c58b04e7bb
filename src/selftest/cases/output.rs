//! The output line (issue 32): degenerate text, each rule failing and its look-alike not.

use crate::archive::check::Check;
use crate::archive::record::ReplyRecord;
use crate::judging::verdict::{Outcome, Status};

use super::case::Case;
use super::parts::{base, good, greedy_manifest, numbered};

/// The output line (issue 32): degenerate text, each rule failing and its look-alike not.
pub(crate) fn cases() -> Vec<Case> {
    let mut cases = loops_and_stutters();
    cases.extend(text_answers_and_stops());
    cases
}

/// Loops and stutters, and the lists, tables and repeated words that are neither.
fn loops_and_stutters() -> Vec<Case> {
    use Status::{Fail, Ok};
    let mut cases = Vec::new();
    let mut c = base("a reply that loops to max_tokens fails output");
    c.replies = numbered(vec![
        good(),
        said(&format!("Paris.{}", " Paris is the capital.".repeat(8))),
        good(),
    ]);
    c.expect = vec![(
        Check::Output,
        Fail,
        "loop: 1 of 3 replies (a tail repeated 3+ times over 50%+ of the reply): reply 2 loops",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("a numbered list, whose items differ, is no loop");
    let list: String = ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn"]
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}. {p}\n", i + 1))
        .collect();
    c.replies = numbered(vec![said(&list), said(&list), said(&list)]);
    c.expect = vec![(Check::Output, Ok, "0 loops, 0 stutters")];
    cases.push(c);
    let mut c = base("table rows and code lines, whose units differ, are no loop");
    let table: String = (1..=12).map(|i| format!("| {i} | {} |\n", i * i)).collect();
    let code: String = (1..=12).map(|i| format!("let x{i} = f({i});\n")).collect();
    c.replies = numbered(vec![said(&table), said(&code), good()]);
    c.expect = vec![(Check::Output, Ok, "0 loops")];
    cases.push(c);
    let mut c = base("a word four times in a row is a stutter");
    c.replies = numbered(vec![
        said("It is very very very very cold."),
        good(),
        good(),
    ]);
    c.expect = vec![(
        Check::Output,
        Fail,
        "reply 1 stutters (\"very\" 4 times in a row)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("a word three times in a row is no stutter");
    c.replies = numbered(vec![said("It is very very very cold."), good(), good()]);
    c.expect = vec![(Check::Output, Ok, "0 stutters")];
    cases.push(c);
    cases
}

/// Not text, one answer for all, never stopping, and --output-checks off.
fn text_answers_and_stops() -> Vec<Case> {
    use Status::{Fail, Info, Ok};
    let mut cases = Vec::new();
    let mut c = base("replacement characters in a reply are not text");
    c.replies = numbered(vec![said("Pa\u{fffd}\u{fffd}ris\u{1}."), good(), good()]);
    c.expect = vec![(
        Check::Output,
        Fail,
        "reply 1 is not text (3 replacement or control characters",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("newlines and tabs are text");
    c.replies = numbered(vec![said("Paris.\n\tThe capital.\r\n"), good(), good()]);
    c.expect = vec![(Check::Output, Ok, "0 not text")];
    cases.push(c);
    let mut c = base("one answer to prompts that expect different ones fails");
    let asked = |prompt: &str, expect: &str| {
        let mut r = said("Paris 4 cold");
        r.prompt = prompt.to_string();
        r.expect = Some(expect.to_string());
        r
    };
    c.replies = numbered(vec![
        asked("France?", "(?i)paris"),
        asked("2 + 2?", "4"),
        asked("Opposite of hot?", "(?i)cold"),
    ]);
    c.expect = vec![(
        Check::Output,
        Fail,
        "one answer to different questions (3 pairs of prompts at similarity 0.90+)",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("prompts that expect the same answer may share it");
    c.replies = numbered(vec![
        asked("France?", "(?i)paris"),
        asked("Capital of France?", "(?i)paris"),
        asked("Where is the Louvre?", "(?i)paris"),
    ]);
    c.expect = vec![(Check::Output, Ok, "0 pairs of prompts answered alike")];
    cases.push(c);
    let mut c = base("every reply cut at max_tokens where prompts should stop never stops");
    let mut m = greedy_manifest();
    m.prompts[0].stops = Some(true);
    c.manifest = Some(m.clone());
    for r in &mut c.replies {
        r.finish_reason = Some("length".into());
    }
    c.expect = vec![(
        Check::Output,
        Fail,
        "never stops: all 3 replies to prompts marked to stop",
    )];
    c.outcome = Outcome::Fail;
    cases.push(c);
    let mut c = base("one reply of three cut where prompts should stop is said, not failed");
    c.manifest = Some(m);
    c.replies[0].finish_reason = Some("length".into());
    c.expect = vec![(
        Check::Output,
        Ok,
        "1 of 3 replies to prompts marked to stop were cut at max_tokens",
    )];
    cases.push(c);
    let mut c = base("--output-checks off says a loop as info");
    c.replies = numbered(vec![said(&"!".repeat(64)), good(), good()]);
    c.floors.output.off = true;
    c.expect = vec![(
        Check::Output,
        Info,
        "--output-checks off: loop: 1 of 3 replies",
    )];
    cases.push(c);
    cases
}

/// A good reply that said `content`.
fn said(content: &str) -> ReplyRecord {
    let mut r = good();
    r.content = content.to_string();
    r
}
