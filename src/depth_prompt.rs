//! The prompts of `--depths` (issue 35): a long prompt of about a given number of tokens, made
//! of filler text generated here (seeded, no data set), with one short fact inside it and a
//! question at its end that asks for the fact.
//!
//! What the prompt must be, and how it is:
//! - **About the depth's tokens, on any tokenizer.** The filler is common English words in
//!   plain sentences, which a BPE tokenizer takes as a token a word (with its leading space)
//!   and a token a full stop; [`estimate_tokens`] counts them so (SmolLM2's tokenizer counted
//!   1.15 of its tokens for each of ours with the chat template, docs/context.md).
//! - **Not compressible, not cacheable.** The words are drawn by a seeded generator, so the
//!   same depth and replica give the same prompt in every run (a baseline asks what the
//!   candidate asks), and every depth and every replica starts with other words: no prompt
//!   cache reuses another's prefix.
//! - **A fact that only reading finds.** The filler holds no digit; the fact is the one number
//!   in the prompt ("The secret code is 4821."), placed at a share of the filler that varies
//!   by depth, and the question asks for the number alone. A reply has found it when the
//!   number stands in its text as a number ([`found`]).
//!
//! The stand-in reads the same prompts back ([`find_fact`]), to answer them as a serve with a
//! context would.

/// The deepest prompt `--depths` asks, in approximate tokens.
pub const MAX_DEPTH: u32 = 1_000_000;

/// The sentence the fact is told in, before its number.
const FACT_LEAD: &str = "The secret code is ";
/// The question at the prompt's end.
pub const QUESTION: &str =
    "What is the secret code in the text above? Answer with the number only.";

/// Nouns of the filler: common words, one token each on the usual tokenizers.
const NOUNS: &[&str] = &[
    "time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child", "world",
    "school", "state", "family", "student", "group", "country", "problem", "hand", "part", "place",
    "case", "week", "company", "system", "program", "question", "work", "number", "night", "point",
    "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right",
    "study", "book", "eye", "job", "word", "business", "issue", "side", "kind", "head", "house",
    "service", "friend", "father", "power", "hour", "game", "line", "end", "member", "law", "car",
    "city", "name", "team", "minute", "idea", "kid", "body", "back", "parent", "face", "level",
    "office", "door", "health", "person", "art", "history", "party", "result", "change", "morning",
    "reason", "girl", "moment", "air", "teacher", "force", "river", "stone", "tree", "field",
    "road", "garden", "window", "table", "letter", "bridge", "market", "island", "forest",
    "village", "station", "music", "paper", "horse",
];
/// Adjectives of the filler.
const ADJECTIVES: &[&str] = &[
    "old", "new", "green", "small", "large", "quiet", "bright", "dark", "warm", "cold", "early",
    "late", "long", "short", "soft", "hard", "red", "blue", "brown", "white", "young", "heavy",
    "light", "busy", "empty", "full", "open", "clean", "simple", "strange",
];
/// Verbs of the filler, third person.
const VERBS: &[&str] = &[
    "sees", "finds", "keeps", "moves", "holds", "takes", "gives", "makes", "leaves", "brings",
    "turns", "opens", "follows", "carries", "watches", "builds", "reads", "paints",
];

/// One prompt of `--depths`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepthPrompt {
    /// The user message: filler with the fact inside, then the question.
    pub text: String,
    /// The fact's number, as the answer must give it.
    pub code: String,
    /// The whole prompt's tokens as [`estimate_tokens`] counts them.
    pub estimate: u64,
    /// The estimated tokens before the fact.
    pub fact_at: u64,
}

/// A small, seeded generator (SplitMix64, Steele, Lea and Flood 2014): the same seed gives the
/// same prompt on every box and in every version that keeps this function.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

/// Tokens as the gate estimates them: a token a word (a run of non-space characters) and one
/// more for each punctuation mark in it. Close to a BPE tokenizer's count of plain English,
/// which is all the filler is; the serve's own count (`usage.prompt_tokens`) is preferred where
/// it is near this.
pub fn estimate_tokens(text: &str) -> u64 {
    text.split_whitespace()
        .map(|w| 1 + w.chars().filter(|c| c.is_ascii_punctuation()).count() as u64)
        .sum()
}

/// The share of the filler before the fact at `depth`: between a tenth and nine tenths, varied
/// by depth so that no two depths hold it at the same place.
fn fact_share(depth: u32) -> f64 {
    let spread = u64::from(depth).wrapping_mul(2_654_435_761) % 1000;
    0.1 + 0.8 * spread as f64 / 1000.0
}

/// The prompt for `depth` (approximate tokens, at least 1) and its `replica` (0 for the first
/// reply at that depth): the same arguments give the same prompt.
pub fn make(depth: u32, replica: u32) -> DepthPrompt {
    let mut rng = SplitMix(u64::from(depth) << 20 ^ u64::from(replica) ^ 0x5EED_0035);
    let code = format!("{}", 1000 + rng.below(9000));
    let fact = format!("{FACT_LEAD}{code}.");
    let closing = format!("\n\n{QUESTION}");
    let fixed = estimate_tokens(&fact) + estimate_tokens(&closing);
    let filler_goal = u64::from(depth).saturating_sub(fixed).max(1);
    let fact_goal = (filler_goal as f64 * fact_share(depth)) as u64;
    let mut text = String::with_capacity(filler_goal as usize * 7 + 128);
    let (mut filler, mut fact_at) = (0u64, None);
    while filler < filler_goal {
        if fact_at.is_none() && filler >= fact_goal {
            fact_at = Some(filler);
            push_sentence(&mut text, &fact);
        }
        let s = sentence(&mut rng);
        filler += estimate_tokens(&s);
        push_sentence(&mut text, &s);
    }
    let fact_at = match fact_at {
        Some(at) => at,
        None => {
            push_sentence(&mut text, &fact);
            filler
        }
    };
    text.push_str(&closing);
    DepthPrompt {
        estimate: estimate_tokens(&text),
        text,
        code,
        fact_at,
    }
}

fn push_sentence(text: &mut String, s: &str) {
    if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(s);
}

/// One sentence of filler: "The quiet river holds a table of music." and the like, 6 to 11
/// words, no digit.
fn sentence(rng: &mut SplitMix) -> String {
    let mut s = String::with_capacity(80);
    let opener = ["The", "A", "Every", "One", "That", "This"][rng.below(6)];
    s.push_str(opener);
    for w in [rng.pick(ADJECTIVES), rng.pick(NOUNS), rng.pick(VERBS)] {
        s.push(' ');
        s.push_str(w);
    }
    let more = 2 + rng.below(6);
    for i in 0..more {
        s.push(' ');
        s.push_str(match i % 3 {
            0 => ["the", "a", "its", "some"][rng.below(4)],
            1 if rng.below(2) == 0 => rng.pick(ADJECTIVES),
            _ => rng.pick(NOUNS),
        });
    }
    // A sentence ends on a noun, never on an article.
    if more % 3 == 1 {
        s.push(' ');
        s.push_str(rng.pick(NOUNS));
    }
    s.push('.');
    s
}

/// Whether a reply's text gives the fact: `code` standing as a number of its own (not inside a
/// longer one).
pub fn found(content: &str, code: &str) -> bool {
    content.match_indices(code).any(|(at, _)| {
        let before = content[..at].chars().next_back();
        let after = content[at + code.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit()) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// Where a depth prompt's fact is, as the stand-in reads it: a token a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactInPrompt {
    /// The fact's number.
    pub code: String,
    /// Words of the prompt after the fact's sentence: how deep in the context it lies, read
    /// back from the question.
    pub words_after: u64,
    /// Words in the whole prompt.
    pub words: u64,
}

/// Find a depth prompt's fact in a user message: `None` when it holds no fact (any other
/// prompt).
pub fn find_fact(prompt: &str) -> Option<FactInPrompt> {
    if !prompt.ends_with(QUESTION) {
        return None;
    }
    let at = prompt.find(FACT_LEAD)?;
    let rest = &prompt[at + FACT_LEAD.len()..];
    let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if code.is_empty() {
        return None;
    }
    let after = rest[code.len()..].trim_start_matches('.');
    Some(FactInPrompt {
        code,
        words_after: after.split_whitespace().count() as u64,
        words: prompt.split_whitespace().count() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_is_about_its_depth_with_its_fact_inside_and_the_question_last() {
        for depth in [1, 64, 256, 1024, 4096, 32_768] {
            let p = make(depth, 0);
            let est = p.estimate as f64;
            // A sentence is at most 13 estimated tokens: the prompt overshoots by less.
            let over = est - f64::from(depth);
            assert!(depth < 40 || (0.0..=14.0).contains(&over), "{depth}: {est}");
            assert!(p.text.ends_with(QUESTION), "{depth}");
            assert_eq!(p.text.matches(FACT_LEAD).count(), 1, "{depth}");
            assert_eq!(
                p.text.chars().filter(char::is_ascii_digit).count(),
                4,
                "the fact is the only number: {depth}"
            );
            assert_eq!(p.code.len(), 4);
            let f = find_fact(&p.text).unwrap();
            assert_eq!(f.code, p.code);
            assert!(p.fact_at < p.estimate, "{depth}");
        }
    }

    #[test]
    fn the_same_depth_and_replica_give_the_same_prompt_and_others_start_differently() {
        assert_eq!(make(1024, 0), make(1024, 0));
        let starts: Vec<String> = [(256, 0), (256, 1), (1024, 0), (1024, 1), (4096, 0)]
            .iter()
            .map(|&(d, r)| {
                make(d, r)
                    .text
                    .split_whitespace()
                    .take(6)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        for (i, a) in starts.iter().enumerate() {
            for b in &starts[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn the_fact_lies_at_a_share_that_varies_by_depth() {
        let shares: Vec<f64> = [512, 1024, 2048, 4096]
            .iter()
            .map(|&d| {
                let p = make(d, 0);
                p.fact_at as f64 / p.estimate as f64
            })
            .collect();
        for s in &shares {
            assert!((0.05..=0.95).contains(s), "{shares:?}");
        }
        let (lo, hi) = shares
            .iter()
            .fold((1.0f64, 0.0f64), |(l, h), s| (l.min(*s), h.max(*s)));
        assert!(hi - lo > 0.1, "{shares:?}");
    }

    #[test]
    fn the_filler_is_varied_not_a_repeated_block() {
        let p = make(8192, 0);
        let sentences: Vec<&str> = p.text.split(". ").collect();
        let distinct: std::collections::BTreeSet<&&str> = sentences.iter().collect();
        assert!(
            distinct.len() * 10 >= sentences.len() * 9,
            "{} distinct of {}",
            distinct.len(),
            sentences.len()
        );
    }

    #[test]
    fn tokens_are_words_and_marks() {
        assert_eq!(estimate_tokens("The river runs."), 4);
        assert_eq!(estimate_tokens("  What is it?  Answer."), 6);
        assert_eq!(estimate_tokens(""), 0);
    }

    #[test]
    fn a_fact_is_found_as_a_number_of_its_own() {
        assert!(found("The secret code is 4821.", "4821"));
        assert!(found("\"4821\"", "4821"));
        assert!(found("4821", "4821"));
        assert!(!found("48210", "4821"));
        assert!(!found("14821", "4821"));
        assert!(!found("4 8 2 1", "4821"));
        assert!(found("14821 or 4821", "4821"));
    }

    #[test]
    fn find_fact_reads_how_deep_the_fact_lies() {
        let p = format!("Alpha beta. The secret code is 1234. Gamma delta eps.\n\n{QUESTION}");
        let f = find_fact(&p).unwrap();
        assert_eq!(f.code, "1234");
        assert_eq!(
            f.words_after,
            3 + QUESTION.split_whitespace().count() as u64
        );
        assert_eq!(f.words, p.split_whitespace().count() as u64);
        assert_eq!(find_fact("What is the capital of France?"), None);
        assert_eq!(
            find_fact(&format!("The secret code is x.\n\n{QUESTION}")),
            None
        );
    }
}
