//! The words of the stand-in's answers: an answer's own words and the filler after them up
//! to --tokens.
//!
//! The filler is text a judge of degenerate output must pass: no word follows itself, and no
//! stretch of it repeats back to back (the " ok ok ok" it replaced was a loop of period 3 and a
//! stutter). Each filler word is a function of the answer's text and its position alone, so
//! every reply to a prompt is the same and two stand-ins given the same script answer, and
//! score, alike; different answers get different filler, so the replies to different prompts
//! are not near-identical either.

use super::args::splitmix64;

/// The filler's words: at even positions from the first list, at odd ones from the second, so
/// no word follows itself. Common nouns, none a palindrome (a word --change-word reverses
/// must differ), none holding a digit or a word a built-in prompt's pattern (or a test's)
/// looks for, and none "ok", the line status the tests look for.
const WORDS: [[&str; 32]; 2] = [
    [
        "apple", "bread", "chair", "cloud", "field", "grass", "horse", "lemon", "maple", "music",
        "ocean", "paper", "river", "stone", "sugar", "table", "tiger", "train", "water", "bird",
        "boat", "corn", "desk", "fish", "frog", "hill", "lamp", "leaf", "milk", "road", "sand",
        "wolf",
    ],
    [
        "bell", "cake", "coat", "door", "farm", "gate", "king", "lake", "moon", "nest", "pear",
        "rain", "rock", "rose", "salt", "seed", "ship", "shoe", "silk", "snow", "song", "star",
        "tree", "wind", "wood", "wool", "garden", "window", "candle", "forest", "island", "pencil",
    ],
];

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a of `bytes`, on from `h`.
fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// The filler word at position `pos` (from 0, counting the answer's own words) of an answer
/// whose text hashes to `key`, as its place in [`WORDS`]: (list, word).
fn filler_index(key: u64, pos: usize) -> (usize, usize) {
    // SplitMix64 of the position, not FNV-1a's bytes of it: FNV over a number's bytes mixes
    // its low bits poorly, and the filler it made came round every few words.
    let h = splitmix64(key ^ splitmix64(pos as u64));
    let list = &WORDS[pos % 2];
    (pos % 2, (h % list.len() as u64) as usize)
}

/// A reply's tokens, without end: `text`'s words (each but the first with the space before
/// it), then the filler. Take as many as the reply has.
pub(super) fn answer_stream(text: &str) -> impl Iterator<Item = String> + Send {
    let own: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let key = fnv1a(FNV_OFFSET, text.as_bytes());
    let first_filler = own.len();
    let last_own = own.last().cloned();
    let filler = (first_filler..).map(move |pos| {
        let (list, mut i) = filler_index(key, pos);
        // Filler words follow one another from alternate lists; only where they follow the
        // answer's own last word can one be that word: then the next in its list.
        if pos == first_filler && last_own.as_deref() == Some(WORDS[list][i]) {
            i = (i + 1) % WORDS[list].len();
        }
        WORDS[list][i].to_string()
    });
    own.into_iter()
        .chain(filler)
        .enumerate()
        .map(|(t, w)| if t == 0 { w } else { format!(" {w}") })
}

/// `bytes` of filler text (each word with the space before it), from position `from` of the
/// filler after `text`'s words: the padding of --big-chunk.
pub(super) fn filler_text(text: &str, from: usize, bytes: usize) -> String {
    let key = fnv1a(FNV_OFFSET, text.as_bytes());
    let mut pad = String::with_capacity(bytes + 8);
    let mut pos = from;
    while pad.len() < bytes {
        pad.push(' ');
        let (list, i) = filler_index(key, pos);
        pad.push_str(WORDS[list][i]);
        pos += 1;
    }
    // The words are ASCII: any byte is a character's edge.
    pad.truncate(bytes);
    pad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::BUILT_IN;

    fn tokens(text: &str, n: usize) -> Vec<String> {
        answer_stream(text).take(n).collect()
    }

    /// Per period `p` (1 to `most`), characters: the longest run of consecutive positions `j`
    /// with `t[j] == t[j - p]` anywhere, and the run that ends the text. A run of `r` is a
    /// stretch of `r + p` characters with period `p`: `(r + p) / p` repeats of its unit.
    fn runs(t: &[char], most: usize) -> Vec<(usize, usize, usize)> {
        (1..=most.min(t.len().saturating_sub(1)))
            .map(|p| {
                let (mut longest, mut run) = (0, 0);
                for j in p..t.len() {
                    run = if t[j] == t[j - p] { run + 1 } else { 0 };
                    longest = longest.max(run);
                }
                (p, longest, run)
            })
            .collect()
    }

    #[test]
    fn the_word_list_is_fit_for_filler() {
        let mut seen = std::collections::BTreeSet::new();
        for w in WORDS.concat() {
            assert!(seen.insert(w), "{w} twice");
            let reversed: String = w.chars().rev().collect();
            assert_ne!(reversed, w, "{w} is a palindrome");
            assert!(w.chars().all(|c| c.is_ascii_lowercase()), "{w}");
            assert!(!w.contains("ok"), "{w}");
        }
        for b in BUILT_IN {
            let pattern = regex::Regex::new(b.expect).unwrap();
            let filler = tokens("", 2000).concat();
            assert!(!pattern.is_match(&filler), "{} in the filler", b.expect);
        }
    }

    #[test]
    fn a_long_filler_has_no_loop_and_no_stutter() {
        let mut answers: Vec<&str> = BUILT_IN.iter().map(|b| b.stand_in_answer).collect();
        answers.extend([
            "I am the stand-in serve.",
            "London.",
            "",
            "tree",
            "Paris a b c d",
        ]);
        for answer in answers {
            let t = tokens(answer, 2000);
            // No word three times in a row; no word follows itself at all.
            for w in t.windows(2) {
                assert_ne!(w[0].trim(), w[1].trim(), "{answer:?}: {w:?}");
            }
            // Every word drawn, none much more than its share (31 of 2000): well mixed.
            let mut counts = std::collections::BTreeMap::new();
            for w in &t {
                *counts.entry(w.trim()).or_insert(0) += 1;
            }
            for w in WORDS.concat() {
                let n = counts.get(w).copied().unwrap_or(0);
                assert!((10..=60).contains(&n), "{answer:?}: {w} {n} times");
            }
            let text: Vec<char> = t.concat().chars().collect();
            for (p, longest, tail) in runs(&text, 400) {
                // No unit of 1 to 400 characters three times back to back anywhere.
                assert!(
                    longest < 2 * p,
                    "{answer:?}: period {p}, a run of {longest}"
                );
                // And at the tail no repeated stretch over 20% of the text.
                assert!(
                    (tail + p) * 5 <= text.len(),
                    "{answer:?}: period {p}, the tail's run {tail}"
                );
            }
        }
    }

    #[test]
    fn the_filler_follows_the_answers_words_is_the_same_each_time_and_differs_by_answer() {
        let paris = tokens("Paris.", 32);
        assert_eq!(paris[0], "Paris.");
        assert!(paris[1..]
            .iter()
            .all(|t| t.starts_with(' ') && WORDS.concat().contains(&t.trim())));
        assert_eq!(paris, tokens("Paris.", 32));
        let cold = tokens("Cold.", 32);
        let same = (1..32).filter(|i| paris[*i] == cold[*i]).count();
        assert!(same < 8, "{paris:?}\n{cold:?}");
        assert_eq!(tokens("a  b", 1), ["a"]);
        assert_eq!(tokens("a  b", 2), ["a", " b"]);
        // An answer's last word that is a filler word is not followed by itself.
        for w in WORDS.concat() {
            let t = tokens(w, 2);
            assert_ne!(t[1].trim(), w);
        }
        // The padding goes on with the same words.
        let pad = filler_text("Paris.", 1, 40);
        assert_eq!(pad.len(), 40);
        assert!(paris[1..].concat().starts_with(&pad));
    }
}
