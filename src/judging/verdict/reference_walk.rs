//! One prompt's answers walked along the whole of the reference's (`--reference`, issue 31):
//! past each divergence the candidate is re-anchored, asked to go on from the reference's own
//! answer through the diverging token, and its continuation compared with the reference's rest
//! ([`walk`]). Which re-anchor a prompt needs next is decided from the records alone: the live
//! run makes the requests it names (`live::reanchor`), and `judge` walks the same records to the
//! same lines.

use super::reference_compare::{around, compare, spans, streamed, Answer, Divergence};
use crate::archive::record::{ReanchorRecord, TokenLogprob};
use crate::inert::{one_line, quote};

/// Why a prompt's walk along the reference's answer ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WalkEnd {
    /// Every position was judged: no divergence was left, or the reference's answer ended.
    Whole,
    /// A divergence was left past the bound of re-anchors.
    Bound,
    /// A divergence whose re-anchor is not recorded: the reference's token it ends with and
    /// the prefix it sends (the reference's answer through that token).
    Unrecorded {
        /// The reference's token the prefix ends with, from 0.
        at_token: usize,
        /// The reference's answer through it.
        prefix: String,
    },
    /// The serve did not continue the assistant message it was given: how it showed.
    NotContinued(String),
}

/// One prompt's answers compared along the whole of the reference's, re-anchored past each
/// divergence where a re-anchor is recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Walk {
    /// Reference positions judged.
    pub positions: usize,
    /// Of them, where both sides chose the same text.
    pub agreed: usize,
    /// Every divergence met, in order; token and byte counted along the reference's answer.
    pub divergences: Vec<Divergence>,
    /// The last part judged was one answer's start, the shorter cut by max_tokens.
    pub cut_short: bool,
    /// |Δ logprob| of the chosen tokens at positions tokenised alike.
    pub deltas: Vec<f64>,
    /// The KL divergence over the reference's top-K at those positions.
    pub kls: Vec<f64>,
    /// The KL divergence over both top-Ks and the rest of the mass, at every position judged
    /// where the candidate's logprobs start a token where the reference's does.
    pub every_kl: Vec<f64>,
    /// |Δ logprob| of the reference's token at the same positions.
    pub every_delta: Vec<f64>,
    /// Re-anchors judged.
    pub reanchored: usize,
    /// Why the walk ended.
    pub end: WalkEnd,
}

/// The text an answer spells: its tokens' where it has them, else its content.
fn text_of(a: &Answer<'_>) -> String {
    match a.logprobs {
        Some(tokens) => tokens.iter().map(|t| t.token.as_str()).collect(),
        None => a.content.to_string(),
    }
}

/// The start of an answer that a serve beginning anew would say again: its first 16
/// characters, when it has at least 8 (a shorter start would be met by chance).
fn opening(s: &str) -> Option<&str> {
    let end = s.char_indices().nth(16).map_or(s.len(), |(i, _)| i);
    (s[..end].trim().chars().count() >= 8).then_some(&s[..end])
}

/// A re-anchor's continuation as the comparison reads it: what follows the prefix. llama-server
/// sends the prefix back before its continuation (its content is the prefix and the new text;
/// its logprobs the new tokens alone): a content, or a run of tokens, that opens with the whole
/// prefix, where the reference's `rest` does not, is read past it.
fn continuation<'a>(r: &'a ReanchorRecord, rest: &str) -> Answer<'a> {
    let prefix = r.prefix.as_str();
    let echoed = !prefix.is_empty() && !rest.starts_with(prefix);
    let content = match r.content.strip_prefix(prefix) {
        Some(after) if echoed => after,
        _ => r.content.as_str(),
    };
    let logprobs = r.logprobs.as_deref().map(|tokens| {
        let mut spelled = 0;
        for (i, t) in tokens.iter().enumerate() {
            if !echoed || !prefix[spelled..].starts_with(t.token.as_str()) || t.token.is_empty() {
                break;
            }
            spelled += t.token.len();
            if spelled == prefix.len() {
                return &tokens[i + 1..];
            }
        }
        tokens
    });
    Answer {
        content,
        logprobs: logprobs.map(|t| streamed(t, content)),
        cut: r.finish_reason.as_deref() == Some("length"),
    }
}

/// How a re-anchor shows that the serve did not continue the assistant message it was given,
/// or `None` when it did: the request failed, or it began its answer anew (its continuation,
/// `went_on`, opens as its first answer `first` did, where the reference's `rest` does not).
pub fn not_continued(r: &ReanchorRecord, went_on: &str, first: &str, rest: &str) -> Option<String> {
    if let Some(e) = &r.error {
        return Some(format!("the request failed: {}", one_line(e)));
    }
    let open = opening(first)?;
    (went_on.starts_with(open) && !rest.starts_with(open)).then(|| {
        format!(
            "it began its answer anew ({} after the prefix {})",
            quote(went_on, 32),
            quote(&r.prefix, 32)
        )
    })
}

/// Walk a prompt's answers along the reference's (`reference_cut`: its answer was cut by
/// max_tokens): compare the candidate's first answer; at each divergence, find the re-anchor
/// recorded there among `reanchors` (this prompt's) and compare its continuation with the
/// reference's rest, up to `most` re-anchors. Judged on top-`k` with the tie margin `tie`.
pub fn walk<'a>(
    first: Answer<'a>,
    reference: &[TokenLogprob],
    reference_cut: bool,
    k: usize,
    tie: f64,
    most: usize,
    reanchors: &[&'a ReanchorRecord],
) -> Walk {
    let (full, _) = spans(reference);
    let mut w = Walk {
        positions: 0,
        agreed: 0,
        divergences: Vec::new(),
        cut_short: false,
        deltas: Vec::new(),
        kls: Vec::new(),
        every_kl: Vec::new(),
        every_delta: Vec::new(),
        reanchored: 0,
        end: WalkEnd::Whole,
    };
    let mut answer = first;
    // The reference's token where this part starts, and the byte.
    let (mut from, mut lead) = (0, 0);
    loop {
        let c = compare(answer, &reference[from..], reference_cut, k, tie);
        w.positions += c.positions;
        w.agreed += c.agreed;
        w.cut_short = c.cut_short;
        w.deltas.extend(c.deltas);
        w.kls.extend(c.kls);
        w.every_kl.extend(c.every_kl);
        w.every_delta.extend(c.every_delta);
        let Some(mut d) = c.divergence else {
            w.end = WalkEnd::Whole;
            return w;
        };
        // (`>=` here is an equivalent mutant: at 0 the sums add nothing and the quotes are
        // made again from the same texts.)
        if from > 0 {
            // Counted along the reference's whole answer, quoted with the prefix before it.
            d.token += from;
            d.byte += lead;
            let candidate = format!("{}{}", &full[..lead], text_of(&answer));
            d.reference_quote = around(&full, d.byte);
            d.candidate_quote = around(&candidate, d.byte);
        }
        d.reanchors = w.reanchored;
        let at = d.token;
        let ended = d.reference_token.is_none();
        w.divergences.push(d);
        // Where the reference ended, or its last token is the one diverged from and its
        // answer was cut there, nothing of it is left to judge.
        if ended || (at + 1 == reference.len() && reference_cut) {
            w.end = WalkEnd::Whole;
            return w;
        }
        if w.reanchored >= most {
            w.end = WalkEnd::Bound;
            return w;
        }
        let prefix: String = reference[..=at].iter().map(|t| t.token.as_str()).collect();
        let Some(r) = reanchors
            .iter()
            .find(|r| r.at_token == at && r.prefix == prefix)
        else {
            w.end = WalkEnd::Unrecorded {
                at_token: at,
                prefix,
            };
            return w;
        };
        let rest = &full[prefix.len()..];
        let next = continuation(r, rest);
        if let Some(why) = not_continued(r, &text_of(&next), first.content, rest) {
            w.end = WalkEnd::NotContinued(why);
            return w;
        }
        answer = next;
        from = at + 1;
        lead = prefix.len();
        w.reanchored += 1;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::judging::verdict::reference_compare::tests::{reference, text, tok, TIE};
    use crate::judging::verdict::reference_compare::Kind;

    pub(crate) const PROMPT: &str = "What is the capital of France?";

    pub(crate) fn anchor(at: usize, content: &str) -> ReanchorRecord {
        let prefix: String = reference()[..=at]
            .iter()
            .map(|t| t.token.as_str())
            .collect();
        ReanchorRecord {
            prompt: PROMPT.to_string(),
            at_token: at,
            prefix,
            content: content.to_string(),
            logprobs: None,
            finish_reason: Some("stop".into()),
            error: None,
        }
    }

    #[test]
    fn a_walk_goes_on_past_a_divergence_to_the_one_behind_it() {
        // "The city" at token 1 (margin 3.94: hard), then, re-anchored, " was" at token 2
        // (margin 5): two hard divergences, the second counted along the whole answer.
        let r = reference();
        let first = text("The city is Paris");
        let a = anchor(1, " was Paris");
        let w = walk(first, &r, false, 5, TIE, 8, &[&a]);
        assert_eq!(w.divergences.len(), 2, "{w:?}");
        assert_eq!(w.divergences[0].token, 1);
        assert_eq!(w.divergences[0].reanchors, 0);
        let second = &w.divergences[1];
        assert_eq!(second.token, 2);
        // Byte 12 of "The capital was Paris": the space after the prefix "The capital" agrees.
        assert_eq!(second.byte, 12);
        assert_eq!(second.reanchors, 1);
        assert_eq!(second.kind, Kind::Hard);
        assert!(
            second.candidate_quote.contains("The capital was"),
            "{second:?}"
        );
        assert_eq!(w.reanchored, 1);
        // Positions: 1 agreed and the divergence, then the divergence at 2: three of four,
        // the walk stopped for want of the next re-anchor.
        assert_eq!((w.positions, w.agreed), (3, 1));
        assert_eq!(
            w.end,
            WalkEnd::Unrecorded {
                at_token: 2,
                prefix: "The capital is".into()
            }
        );
        // With it, the rest agrees: every position judged, the walk whole. (Mutant: `from =
        // at` re-compares the diverging token and never ends whole.)
        let b = anchor(2, " Paris");
        let w = walk(first, &r, false, 5, TIE, 8, &[&a, &b]);
        assert_eq!((w.positions, w.agreed, w.reanchored), (4, 2, 2));
        assert_eq!(w.end, WalkEnd::Whole);
    }

    #[test]
    fn the_bound_of_re_anchors_stops_the_walk_and_zero_judges_the_first_divergence_alone() {
        let r = reference();
        let first = text("The city is Paris");
        let a = anchor(1, " is Paris");
        // Mutant: `>` for `>=` in the bound makes one more re-anchor than asked.
        let w = walk(first, &r, false, 5, TIE, 0, &[&a]);
        assert_eq!(
            (w.positions, w.reanchored, w.end.clone()),
            (2, 0, WalkEnd::Bound)
        );
        let w = walk(first, &r, false, 5, TIE, 1, &[&a]);
        assert_eq!((w.positions, w.reanchored, w.end), (4, 1, WalkEnd::Whole));
        // A re-anchor made at another prefix (another reference) is not this one's.
        let mut other = anchor(1, " is Paris");
        other.prefix = "The cap".into();
        let w = walk(first, &r, false, 5, TIE, 8, &[&other]);
        assert!(matches!(w.end, WalkEnd::Unrecorded { at_token: 1, .. }));
    }

    #[test]
    fn a_serve_that_does_not_continue_stops_the_walk_and_says_how() {
        let r = reference();
        let first = text("The city is Paris");
        // It began anew: its continuation opens as its first answer did.
        let anew = anchor(1, "The city is Paris");
        let w = walk(first, &r, false, 5, TIE, 8, &[&anew]);
        let WalkEnd::NotContinued(why) = &w.end else {
            panic!("{w:?}")
        };
        assert!(why.contains("began its answer anew"), "{why}");
        assert_eq!(w.reanchored, 0);
        // The prefix sent back, then the answer begun anew.
        let echo = anchor(1, "The capitalThe city is Paris");
        let w = walk(first, &r, false, 5, TIE, 8, &[&echo]);
        assert!(
            matches!(&w.end, WalkEnd::NotContinued(why) if why.contains("began its answer anew")),
            "{w:?}"
        );
        // The prefix sent back, then the continuation (llama-server's way): read past it.
        let echo = anchor(1, "The capital is Paris");
        let w = walk(first, &r, false, 5, TIE, 8, &[&echo]);
        assert_eq!((w.positions, w.reanchored, w.end), (4, 1, WalkEnd::Whole));
        // The request failed.
        let mut failed = anchor(1, "");
        failed.error = Some("HTTP 400: assistant prefill unsupported".into());
        let w = walk(first, &r, false, 5, TIE, 8, &[&failed]);
        assert!(
            matches!(&w.end, WalkEnd::NotContinued(why) if why.contains("HTTP 400")),
            "{w:?}"
        );
        // A continuation that goes on as the reference does is continued, whatever it shares
        // with the start of the first answer.
        let a = anchor(1, " is Paris");
        assert_eq!(
            not_continued(&a, " is Paris", "The city is Paris", " is Paris"),
            None
        );
        // An opening under 8 characters is met by chance, never read as a restart.
        assert_eq!(not_continued(&a, "Par", "Par", " is Paris"), None);
    }

    #[test]
    fn an_echoed_prefix_is_read_past_in_the_content_and_in_the_tokens() {
        let mut a = anchor(1, "The capital is Paris");
        assert_eq!(continuation(&a, " is Paris").content, " is Paris");
        // Where the reference's rest itself opens with the prefix, nothing is taken as echo.
        assert_eq!(
            continuation(&a, "The capital is").content,
            "The capital is Paris"
        );
        a.logprobs = Some(vec![
            tok("The", -0.1, &[]),
            tok(" capital", -0.1, &[]),
            tok(" is", -0.1, &[]),
        ]);
        assert_eq!(continuation(&a, " is Paris").logprobs.unwrap().len(), 1);
        // Tokens that only start like the prefix are the continuation's own.
        a.logprobs = Some(vec![tok("The", -0.1, &[]), tok(" cap", -0.1, &[])]);
        assert_eq!(continuation(&a, " is Paris").logprobs.unwrap().len(), 2);
    }

    #[test]
    fn a_divergence_at_the_last_token_of_a_cut_reference_leaves_nothing_to_re_anchor() {
        let r = reference();
        // " Lyon" at the last token of a reference cut by max_tokens: nothing after it.
        let w = walk(text("The capital is Lyon"), &r, true, 5, TIE, 8, &[]);
        assert_eq!((w.positions, w.end), (4, WalkEnd::Whole));
        // Not cut, the reference ended there too: nothing left either.
        let w = walk(text("The capital is Lyon"), &r, false, 5, TIE, 8, &[]);
        assert!(
            matches!(w.end, WalkEnd::Unrecorded { at_token: 3, .. }),
            "{w:?}"
        );
    }

    #[test]
    fn a_re_anchor_cut_by_max_tokens_short_of_the_reference_is_no_divergence() {
        // Mutant: `!=` for `==` in the continuation's cut.
        let r = reference();
        let mut a = anchor(1, " is");
        a.finish_reason = Some("length".into());
        let w = walk(text("The city is Paris"), &r, false, 5, TIE, 8, &[&a]);
        assert_eq!(
            (w.end, w.divergences.len(), w.cut_short),
            (WalkEnd::Whole, 1, true)
        );
    }
}
