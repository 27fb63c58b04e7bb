//! The stand-in's degenerate answers (issue 32), through a real run: what replies.jsonl records
//! for --loop-period, --stutter, --not-text, one --answer for every prompt, --tokens past
//! max_tokens and --endless, against the stand-in's normal answers. Only the recorded text is
//! held here, never the verdict: judging degenerate text is the output line's, tested with it.

use serde_json::Value;

use crate::util::*;

/// The replies of a stand-in run of `replies` replies (the built-in prompts in turn) with
/// these gate options and this script.
fn run(replies_n: &str, gate_args: &[&str], script: &[&str]) -> Vec<Value> {
    let (_d, out) = scratch();
    let mut args = vec!["--replies", replies_n];
    args.extend_from_slice(gate_args);
    let (code, stdout) = stand_in_run(&out, &args, script);
    assert!(code.is_some(), "{stdout}");
    replies(&out)
}

/// A reply's text.
fn content(reply: &Value) -> &str {
    reply["content"].as_str().unwrap()
}

/// A reply's text as words.
fn words(reply: &Value) -> Vec<&str> {
    content(reply).split_whitespace().collect()
}

/// The stand-in's normal replies to the three built-in prompts, made once for the binary.
fn clean() -> &'static [Value] {
    static CLEAN: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    CLEAN.get_or_init(|| run("3", &[], &[]))
}

#[test]
fn the_normal_answer_repeats_no_word_and_differs_from_prompt_to_prompt() {
    let clean = clean();
    for r in clean {
        let w = words(r);
        assert_eq!(w.len(), 32, "{r}");
        assert!(w.windows(2).all(|p| p[0] != p[1]), "{r}");
        assert_eq!(r["finish_reason"], "stop");
    }
    assert!(content(&clean[0]).starts_with("Paris. "));
    assert!(content(&clean[1]).starts_with("2 + 2 = 4. "));
    assert!(content(&clean[2]).starts_with("Cold. "));
    // Past the first word, the three replies share few words at the same place.
    let (a, b) = (words(&clean[0]), words(&clean[2]));
    let same = (1..32).filter(|i| a[*i] == b[*i]).count();
    assert!(same < 8, "{a:?}\n{b:?}");
}

#[test]
fn a_loop_repeats_the_first_filler_words_to_the_end_of_the_reply() {
    let looped = run("3", &[], &["--loop-period", "3"]);
    for (r, c) in looped.iter().zip(clean()) {
        let (w, clean) = (words(r), words(c));
        // "2 + 2 = 4." is five words: the loop starts after the answer's own.
        let own = if content(c).starts_with("2 + 2") {
            5
        } else {
            1
        };
        assert_eq!(w.len(), 32, "{r}");
        assert_eq!(w[..own + 3], clean[..own + 3], "{r}");
        for i in own..32 {
            assert_eq!(w[i], clean[own + (i - own) % 3], "{r}");
        }
    }
}

#[test]
fn a_stutter_says_every_word_n_times_in_the_same_tokens() {
    let stutter = run("3", &[], &["--stutter", "4"]);
    for (r, c) in stutter.iter().zip(clean()) {
        let (w, clean) = (words(r), words(c));
        assert_eq!(w.len(), 32, "{r}");
        for (i, word) in w.iter().enumerate() {
            assert_eq!(*word, clean[i / 4], "{r}");
        }
    }
    assert!(content(&stutter[0]).starts_with("Paris. Paris. Paris. Paris. "));
}

#[test]
fn not_text_puts_replacement_and_control_characters_among_the_answers_words() {
    let garbled = run("3", &[], &["--not-text", "0.5"]);
    for (r, c) in garbled.iter().zip(clean()) {
        let text = content(r);
        let first = words(c)[0];
        assert!(text.starts_with(first), "{r}");
        // Half of the filler's tokens (31 or 27 of them), in turn the two kinds.
        let fffd = text.matches("\u{fffd}\u{fffd}").count();
        let control = text.matches("\u{1}\u{7}").count();
        let filler = if first == "2" { 27 } else { 31 };
        assert_eq!(fffd + control, filler / 2, "{r}");
        assert!(fffd >= control && fffd - control <= 1, "{r}");
    }
    assert!(content(&garbled[1]).starts_with("2 + 2 = 4."));
}

#[test]
fn one_answer_is_given_to_every_prompt() {
    let same = run("3", &[], &["--answer", "Paris 4 cold"]);
    assert!(content(&same[0]).starts_with("Paris 4 cold "));
    for r in &same {
        assert_eq!(content(r), content(&same[0]));
    }
    let prompts: std::collections::BTreeSet<&str> =
        same.iter().map(|r| r["prompt"].as_str().unwrap()).collect();
    assert_eq!(prompts.len(), 3);
}

#[test]
fn a_reply_that_never_stops_is_cut_at_max_tokens() {
    let cut = run("3", &["--max-tokens", "16"], &["--tokens", "200"]);
    for (r, c) in cut.iter().zip(clean()) {
        assert_eq!(r["finish_reason"], "length", "{r}");
        assert_eq!(words(r), words(c)[..16], "{r}");
    }
    // Ignoring max_tokens: the same words go on past the scripted ones, never " ok".
    let endless = run("1", &[], &["--endless", "--gaps-ms", "0"]);
    let w = words(&endless[0]);
    assert!(w.len() > 64, "{}", endless[0]);
    assert_eq!(w[..32], words(&clean()[0])[..]);
    assert!(w.windows(2).all(|p| p[0] != p[1]), "{}", endless[0]);
}

#[test]
fn a_fault_request_makes_only_that_reply_degenerate() {
    let one = run("3", &[], &["--stutter", "3", "--fault-request", "2"]);
    assert_eq!(content(&one[0]), content(&clean()[0]));
    assert_eq!(content(&one[2]), content(&clean()[2]));
    assert!(
        content(&one[1]).starts_with("2 2 2 + + + 2 2 2 "),
        "{}",
        one[1]
    );
}
