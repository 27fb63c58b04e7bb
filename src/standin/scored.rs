//! The stand-in's scripted logprobs (issue 31): for each answer token it sends, a logprob and
//! K alternatives with lower ones, in the OpenAI shape (`choices[0].logprobs.content[]`), all
//! derived from the token's text and position, so two stand-ins given the same script score
//! the same answer the same way, as a reference and a candidate of one model would.
//!
//! At each position the usual token comes first; the runner-up (the usual token changed as
//! --change-word changes a word) is `margin` nats below it; then common words, a nat apart.
//! With --logprob-flip the stand-in sends the runner-up at that position, and its own list
//! still ranks the usual token `margin` above the one it sent.

use serde_json::{json, Value};

use super::words::changed_token;

/// Words after the runner-up in a token's list, each with the token's leading whitespace.
const COMMON: [&str; 20] = [
    "the", "a", "of", "and", "to", "in", "is", "it", "that", "on", "was", "for", "with", "as",
    "at", "by", "an", "be", "this", "or",
];

/// The usual token's scripted logprob at `pos`: from -0.01 to -0.30 nats, from its text and
/// position (FNV-1a), so a reader can tell positions apart and a rerun gives the same.
pub(crate) fn usual_logprob(token: &str, pos: usize) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ pos as u64;
    for b in token.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    -(0.01 + (h % 30) as f64 / 100.0)
}

/// The token --logprob-flip sends in place of `usual`.
pub(crate) fn runner_up(usual: &str) -> String {
    changed_token(usual)
}

/// The scored list at a position whose usual token is `usual`: (text, logprob), most likely
/// first, `k` of them.
fn top_list(usual: &str, pos: usize, k: usize, margin: f64) -> Vec<(String, f64)> {
    let lp = usual_logprob(usual, pos);
    let runner = runner_up(usual);
    let lead = &usual[..usual.len() - usual.trim_start().len()];
    let mut list = vec![(usual.to_string(), lp), (runner.clone(), lp - margin)];
    let others = COMMON
        .iter()
        .map(|w| format!("{lead}{w}"))
        .filter(|w| *w != usual && *w != runner);
    for (i, w) in others.enumerate() {
        list.push((w, lp - margin - 1.0 - i as f64));
    }
    list.truncate(k);
    list
}

/// One token record: `sent` (the text the chunk carries) at `pos`, whose usual token is
/// `usual` (the same unless the stand-in flipped it there), with `k` alternatives.
pub(crate) fn token_record(sent: &str, usual: &str, pos: usize, k: usize, margin: f64) -> Value {
    let lp = usual_logprob(usual, pos);
    let own = if sent == usual { lp } else { lp - margin };
    let top: Vec<Value> = top_list(usual, pos, k, margin)
        .into_iter()
        .map(|(t, l)| json!({"token": t, "logprob": l, "bytes": t.as_bytes()}))
        .collect();
    json!({"token": sent, "logprob": own, "bytes": sent.as_bytes(), "top_logprobs": top})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_token_leads_the_runner_up_follows_by_the_margin() {
        let r = token_record(" Paris", " Paris", 3, 5, 0.2);
        let top = r["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 5);
        assert_eq!(top[0]["token"], " Paris");
        assert_eq!(top[1]["token"], " siraP");
        let lp = |v: &Value| v["logprob"].as_f64().unwrap();
        assert!((lp(&top[0]) - lp(&top[1]) - 0.2).abs() < 1e-9);
        assert_eq!(lp(&r), lp(&top[0]));
        assert!(top.windows(2).all(|w| lp(&w[0]) > lp(&w[1])));
        assert!(lp(&top[0]) < 0.0 && lp(&top[0]) >= -0.3);
        assert_eq!(top[2]["token"], " the");
        assert_eq!(r["bytes"], json!(" Paris".as_bytes()));
        // A flip sends the runner-up, scored the margin below the usual token it displaced.
        let f = token_record(" siraP", " Paris", 3, 5, 9.6);
        assert!((lp(&f) - (lp(&top[0]) - 9.6)).abs() < 1e-9);
        assert_eq!(f["top_logprobs"][0]["token"], " Paris");
        assert_eq!(
            token_record("a", "a", 0, 1, 1.0)["top_logprobs"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(token_record("a", "a", 0, 0, 1.0)["top_logprobs"], json!([]));
    }

    #[test]
    fn scores_follow_the_text_and_the_position_and_nothing_else() {
        assert_eq!(usual_logprob(" ok", 4), usual_logprob(" ok", 4));
        let spread: std::collections::BTreeSet<u64> = (0..40)
            .map(|p| (-usual_logprob(" ok", p) * 100.0).round() as u64)
            .collect();
        assert!(spread.len() > 5, "{spread:?}");
        // Twenty alternatives are there to ask for, whatever the word.
        for w in ["the", " the", " a", "x"] {
            assert_eq!(top_list(w, 0, 20, 1.0).len(), 20, "{w}");
        }
    }
}
