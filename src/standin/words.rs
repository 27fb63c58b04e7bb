//! The words of the stand-in's answers: an answer's own words, the filler after them up to
//! --tokens, and the degenerate answers a broken serve gives (--loop-period, --stutter,
//! --not-text; issue 32).
//!
//! The filler is text a judge of degenerate output must pass: no word follows itself, and no
//! stretch of it repeats back to back (the " ok ok ok" it replaced was a loop of period 3 and a
//! stutter). Each filler word is a function of the answer's text (for the stand-in's own
//! answer to a prompt it does not know, the prompt's) and its position alone, so every reply
//! to a prompt is the same and two stand-ins given the same script answer, and score, alike;
//! different answers get different filler, so the replies to different prompts are not
//! near-identical either.

use super::mix::splitmix64;

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

/// The replacement tokens of --not-text, taken in turn: U+FFFD replacement characters, as a
/// detokenizer gives for bytes that are not UTF-8, and control characters.
pub(crate) const NOT_TEXT: [&str; 2] = ["\u{fffd}\u{fffd}", "\u{1}\u{7}"];

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

/// How a reply's words are made degenerate (none by default).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Degenerate {
    /// --loop-period: the filler is its first N words over and over.
    pub loop_period: Option<usize>,
    /// --stutter: each word said N times back to back.
    pub stutter: Option<usize>,
    /// --not-text: this share of the tokens after the answer's own replaced by [`NOT_TEXT`].
    pub not_text: Option<f64>,
}

/// A reply's tokens, without end: `text`'s words (each but the first with the space before
/// it), then the filler that follows from `seed` (the answer's text, or what else tells its
/// replies apart), shaped as `d` says. Take as many as the reply has.
pub(crate) fn answer_stream(
    text: &str,
    seed: &str,
    d: Degenerate,
) -> impl Iterator<Item = String> + Send {
    let own: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let key = fnv1a(FNV_OFFSET, seed.as_bytes());
    let first_filler = own.len();
    let last_own = own.last().cloned();
    let filler = (first_filler..).map(move |pos| {
        // A loop of period N: the first N filler words again and again.
        let pos = match d.loop_period {
            Some(n) => first_filler + (pos - first_filler) % n.max(1),
            None => pos,
        };
        let (list, mut i) = filler_index(key, pos);
        // Filler words follow one another from alternate lists; only where they follow the
        // answer's own last word can one be that word: then the next in its list.
        if pos == first_filler && last_own.as_deref() == Some(WORDS[list][i]) {
            i = (i + 1) % WORDS[list].len();
        }
        WORDS[list][i].to_string()
    });
    let times = d.stutter.unwrap_or(1).max(1);
    let words = own
        .into_iter()
        .chain(filler)
        .flat_map(move |w| std::iter::repeat_n(w, times));
    let own_tokens = first_filler * times;
    words.enumerate().map(move |(t, w)| {
        if let Some(share) = d.not_text {
            if let Some(j) = t.checked_sub(own_tokens) {
                // Spread evenly: the j-th filler token is replaced where the count of
                // replacements due by then, floor((j + 1) * share), goes up.
                let due = |k: usize| (k as f64 * share).floor() as usize;
                if due(j + 1) > due(j) {
                    return NOT_TEXT[(due(j + 1) - 1) % NOT_TEXT.len()].to_string();
                }
            }
        }
        if t == 0 {
            w
        } else {
            format!(" {w}")
        }
    })
}

/// `bytes` of filler text (each word with the space before it), from position `from` of the
/// filler that follows from `seed`: the padding of --big-chunk.
pub(crate) fn filler_text(seed: &str, from: usize, bytes: usize) -> String {
    let key = fnv1a(FNV_OFFSET, seed.as_bytes());
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

/// `token` (an answer token: a word, with the space before it) changed into another word of
/// the same kind, its whitespace kept, so a reply with it differs from the clean one by that
/// word alone: its letters and digits reversed in place, its punctuation left where it was
/// ("Paris." becomes "siraP."); when that is the same word (one letter, a palindrome, "4."),
/// each ASCII letter and digit moved on by one within its kind and case ("a" becomes "b", "z"
/// "a", "Z" "A", "9" "0"); when there is none to move ("+", "é"), the word twice ("++"). Each
/// step leaves a word it cannot return unchanged, so the result always differs.
pub(crate) fn changed_token(token: &str) -> String {
    let start = token.len() - token.trim_start().len();
    let end = token.trim_end().len().max(start);
    let (lead, word, tail) = (&token[..start], &token[start..end], &token[end..]);
    let mut reversed: Vec<char> = word.chars().filter(|c| c.is_alphanumeric()).collect();
    let changed: String = word
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                reversed.pop().unwrap_or(c)
            } else {
                c
            }
        })
        .collect();
    let changed = if changed != word {
        changed
    } else if word.chars().any(|c| c.is_ascii_alphanumeric()) {
        word.chars().map(moved_on).collect()
    } else {
        word.repeat(2)
    };
    format!("{lead}{changed}{tail}")
}

/// An ASCII letter or digit moved on by one within its kind and case, wrapping; any other
/// character as it is.
fn moved_on(c: char) -> char {
    let (first, len) = match c {
        'a'..='z' => (b'a', 26),
        'A'..='Z' => (b'A', 26),
        '0'..='9' => (b'0', 10),
        _ => return c,
    };
    char::from(first + (c as u8 - first + 1) % len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::BUILT_IN;

    fn tokens(text: &str, d: Degenerate, n: usize) -> Vec<String> {
        answer_stream(text, text, d).take(n).collect()
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
            let filler = tokens("", Degenerate::default(), 2000).concat();
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
            let t = tokens(answer, Degenerate::default(), 2000);
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
        let paris = tokens("Paris.", Degenerate::default(), 32);
        assert_eq!(paris[0], "Paris.");
        assert!(paris[1..]
            .iter()
            .all(|t| t.starts_with(' ') && WORDS.concat().contains(&t.trim())));
        assert_eq!(paris, tokens("Paris.", Degenerate::default(), 32));
        let cold = tokens("Cold.", Degenerate::default(), 32);
        let same = (1..32).filter(|i| paris[*i] == cold[*i]).count();
        assert!(same < 8, "{paris:?}\n{cold:?}");
        assert_eq!(tokens("a  b", Degenerate::default(), 1), ["a"]);
        assert_eq!(tokens("a  b", Degenerate::default(), 2), ["a", " b"]);
        // An answer's last word that is a filler word is not followed by itself.
        for w in WORDS.concat() {
            let t = tokens(w, Degenerate::default(), 2);
            assert_ne!(t[1].trim(), w);
        }
        // The padding goes on with the same words.
        let pad = filler_text("Paris.", 1, 40);
        assert_eq!(pad.len(), 40);
        assert!(paris[1..].concat().starts_with(&pad));
    }

    #[test]
    fn a_loop_repeats_the_first_n_filler_words_after_the_answer() {
        let clean = tokens("2 + 2 = 4.", Degenerate::default(), 8);
        let d = Degenerate {
            loop_period: Some(3),
            ..Degenerate::default()
        };
        let t = tokens("2 + 2 = 4.", d, 20);
        assert_eq!(t[..8], clean[..]);
        for i in 5..20 {
            assert_eq!(t[i], t[5 + (i - 5) % 3], "{t:?}");
        }
        let one = tokens(
            "Paris.",
            Degenerate {
                loop_period: Some(1),
                ..d
            },
            5,
        );
        assert_eq!(one[1..], [&one[1]; 4].map(String::as_str));
        // The text's tail is one unit again and again: the loop a judge must find.
        let text: Vec<char> = t[5..].concat().chars().collect();
        let unit = t[5..8].concat().chars().count();
        let (_, _, tail) = runs(&text, unit)[unit - 1];
        assert_eq!(tail + unit, text.len());
    }

    #[test]
    fn a_stutter_says_each_word_n_times_in_the_same_number_of_tokens() {
        let clean = tokens("2 + 2 = 4.", Degenerate::default(), 12);
        let d = Degenerate {
            stutter: Some(3),
            ..Degenerate::default()
        };
        let t = tokens("2 + 2 = 4.", d, 12);
        assert_eq!(t.len(), 12);
        assert_eq!(t[..9].concat(), "2 2 2 + + + 2 2 2");
        let words: Vec<&str> = t.iter().map(|w| w.trim()).collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(*w, clean[i / 3].trim(), "{t:?}");
        }
        let paris = tokens(
            "Paris.",
            Degenerate {
                stutter: Some(4),
                ..d
            },
            9,
        );
        assert_eq!(paris[..4].concat(), "Paris. Paris. Paris. Paris.");
        assert_eq!(paris[4], paris[7]);
        assert_ne!(paris[4], paris[8]);
    }

    #[test]
    fn not_text_replaces_a_share_of_the_filler_spread_evenly_and_keeps_the_answer() {
        let clean = tokens("2 + 2 = 4.", Degenerate::default(), 25);
        let d = |share| Degenerate {
            not_text: Some(share),
            ..Degenerate::default()
        };
        let t = tokens("2 + 2 = 4.", d(0.5), 25);
        assert_eq!(t[..5], clean[..5], "the answer's words kept");
        let replaced: Vec<usize> = (0..25).filter(|i| t[*i] != clean[*i]).collect();
        assert_eq!(replaced, [6, 8, 10, 12, 14, 16, 18, 20, 22, 24]);
        assert_eq!(t[6], "\u{fffd}\u{fffd}");
        assert_eq!(t[8], "\u{1}\u{7}");
        assert_eq!(t[10], "\u{fffd}\u{fffd}");
        // A quarter: one filler token in four; all of it: every filler token; none: the clean.
        let quarter = tokens("Paris.", d(0.25), 41);
        let n = quarter
            .iter()
            .filter(|w| NOT_TEXT.contains(&w.as_str()))
            .count();
        assert_eq!(n, 10);
        let all = tokens("Paris.", d(1.0), 9);
        assert_eq!(all[0], "Paris.");
        assert!(all[1..].iter().all(|w| NOT_TEXT.contains(&w.as_str())));
        assert_eq!(
            tokens("Paris.", d(0.0), 9),
            tokens("Paris.", Degenerate::default(), 9)
        );
    }

    #[test]
    fn a_changed_word_is_reversed_its_punctuation_and_whitespace_kept() {
        assert_eq!(changed_token("Paris."), "siraP.");
        // The letters reversed over the hyphen, which stays where it was.
        assert_eq!(changed_token(" stand-in"), " nidna-ts");
        assert_eq!(changed_token(" ok"), " ko");
        assert_eq!(changed_token(" Cold."), " dloC.");
        assert_eq!(changed_token(" serve."), " evres.");
    }

    #[test]
    fn a_word_that_reverses_to_itself_is_moved_on_and_one_without_letters_doubled() {
        // One letter, palindromes, digits: each ASCII letter and digit moved on by one.
        assert_eq!(changed_token(" a"), " b");
        assert_eq!(changed_token("I"), "J");
        assert_eq!(changed_token(" z"), " a");
        assert_eq!(changed_token(" Z"), " A");
        assert_eq!(changed_token(" 9"), " 0");
        assert_eq!(changed_token(" level"), " mfwfm");
        assert_eq!(changed_token(" 4."), " 5.");
        // Only the ASCII letters move: "é" has no next letter of its kind here.
        assert_eq!(changed_token(" été"), " éué");
        // Nothing to reverse or move: the word twice.
        assert_eq!(changed_token(" +"), " ++");
        assert_eq!(changed_token(" é"), " éé");
        // Whatever the word, the change is never the word itself and keeps its whitespace.
        for t in [
            "x", " 2", " =", " ok", " 2 ", "\tab", " Ada", " é.é", " ...",
        ] {
            let c = changed_token(t);
            assert_ne!(c, t);
            assert_eq!(c.split_whitespace().count(), 1, "{t:?} -> {c:?}");
            assert_eq!(
                c.len() - c.trim_start().len(),
                t.len() - t.trim_start().len(),
                "{t:?} -> {c:?}"
            );
            assert_eq!(
                c.len() - c.trim_end().len(),
                t.len() - t.trim_end().len(),
                "{t:?} -> {c:?}"
            );
        }
    }
}
