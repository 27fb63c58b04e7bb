//! The reference line (`--reference DIR`, issue 31): does the candidate compute what a trusted
//! build computes? Each prompt's first judged single-stream answer is set against the
//! reference run's first answer to it, token by token, with the reference's logprobs saying
//! how sure it was where the two part.
//!
//! Tokens are aligned by their text, never by their index: two serves may tokenise the same
//! text differently, so the answers diverge at the first byte where their texts differ, and
//! the tokens compared are those where the two token streams part: on each side the token
//! starting at the last byte at or before it where both sides start a token (" a" against
//! " attributed", though the texts part a byte past " a"). The margin there is
//! the reference's logprob of its own token less its logprob of the candidate's, read from the
//! reference's top-K; a candidate token outside that top-K has a margin of *at least* the
//! reference's own logprob less its K-th alternative's. Where the candidate sent logprobs too
//! the check runs both ways, as vLLM's `check_logprobs_close` does (vllm-project/vllm
//! tests/models/utils.py): each side's token must be in the other's top-K within the tie
//! margin (RBLN-SW/vllm-rbln tests/native/utils.py adds the margin in nats). Within it on every
//! side read, a near-tie that greedy decoding under other arithmetic may take either way;
//! otherwise a hard divergence, and the line FAILs.
//!
//! Past a divergence the candidate is re-anchored: asked to go on from the reference's own
//! answer through the diverging token (a final assistant message it continues), so every
//! position of the reference's answer is judged, up to `--reference-reanchor` re-anchors a
//! prompt. [`walk`] decides, from the records alone, which re-anchor a prompt needs next: the
//! live run makes the requests it names ([`crate::live::reanchor`]), and `judge` walks the
//! same records to the same lines.
//!
//! Pure: the two runs' records and the settings in, the line out.

use crate::archive::check::Check;
use std::collections::HashMap;

use super::determinism::first_answers;
use super::evidence::{Evidence, ReferenceEvidence};
use super::words::plural;
use crate::archive::record::{
    DeltaFigures, ReanchorRecord, ReferenceFigures, ReplyRecord, RunManifest, TokenLogprob,
    TopLogprob,
};
use crate::archive::record::{Figures, Line, Status};
use crate::inert::{one_line, quote};
use crate::judging::latency::percentile;

/// The default tie margin, nats: vLLM-rbln's margin for bf16 NPU kernels, under which two
/// greedy choices cannot be told apart by other arithmetic.
pub const DEFAULT_TIE: f64 = 0.5;

/// The re-anchors a prompt is judged past when `--reference-reanchor` is not given.
pub const DEFAULT_REANCHOR: usize = 8;
/// The most `--reference-reanchor` takes: each re-anchor is a request to the candidate.
pub const MOST_REANCHOR: usize = 64;

/// Characters quoted on either side of a divergence.
const CONTEXT: usize = 24;

/// The most hard divergences a FAIL names.
const NAMED: usize = 3;

/// One side's answer as the comparison reads it.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// The answer's text as streamed (read only when the side sent no logprobs).
    pub content: &'a str,
    /// Its tokens, when the side sent logprobs: their texts spell the answer.
    pub logprobs: Option<&'a [TokenLogprob]>,
    /// Whether the answer was cut by max_tokens (`finish_reason` `length`): a shorter text
    /// cut so is no divergence, only a tokenisation that spent its tokens sooner.
    pub cut: bool,
}

impl<'a> Answer<'a> {
    /// A recorded reply's answer.
    pub fn of(r: &'a ReplyRecord) -> Answer<'a> {
        Answer {
            content: &r.content,
            logprobs: r.logprobs.as_deref(),
            cut: r.finish_reason.as_deref() == Some("length"),
        }
    }
}

/// A margin in nats, exact or a lower bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Margin {
    /// Nats.
    pub nats: f64,
    /// The other token was not in the top-K: the margin is at least `nats`.
    pub at_least: bool,
}

impl Margin {
    /// Within the tie margin: an exact margin at or under it. A token outside the top-K never
    /// is, whatever its bound (vLLM's rule: each side's token must be in the other's top-K).
    fn within(self, tie: f64) -> bool {
        !self.at_least && self.nats <= tie
    }

    fn said(self) -> String {
        if self.at_least {
            format!("at least {:.2} nats", self.nats)
        } else {
            format!("{:.2} nats", self.nats)
        }
    }
}

/// What a divergence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Within the tie margin on every side read.
    NearTie,
    /// Past it on some side, or to a token outside the other's top-K.
    Hard,
    /// No margin could be read: the reference ended where the candidate went on.
    Unmeasured,
}

/// Where a prompt's answers first part.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The reference's token there, from 0 (its token count when it ended there).
    pub token: usize,
    /// The byte of the answer where the texts first differ, from 0.
    pub byte: usize,
    /// The reference's token text there; `None`: its answer ended.
    pub reference_token: Option<String>,
    /// The candidate's token text there; `None`: its answer ended.
    pub candidate_token: Option<String>,
    /// The candidate sent no logprobs: its token is inferred from the reference's top-K (the
    /// longest alternative its text goes on with), and the check is one way.
    pub inferred: bool,
    /// The reference's margin between its token and the candidate's.
    pub margin: Option<Margin>,
    /// The candidate's margin between its token and the reference's (its logprobs only).
    pub candidate_margin: Option<Margin>,
    /// What the divergence is.
    pub kind: Kind,
    /// The reference's text around the byte, quoted.
    pub reference_quote: String,
    /// The candidate's text around the byte, quoted.
    pub candidate_quote: String,
    /// Re-anchors made before it on this prompt: past the first, the candidate's text is the
    /// reference's through the last re-anchored token, then its continuation.
    pub reanchors: usize,
}

/// One prompt's comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    /// Reference positions judged.
    pub positions: usize,
    /// Of them, where both sides chose the same text.
    pub agreed: usize,
    /// The first divergence, if any.
    pub divergence: Option<Divergence>,
    /// One answer is the other's start and the shorter was cut by max_tokens: judged up to
    /// its end.
    pub cut_short: bool,
    /// |Δ logprob| of the chosen tokens at positions tokenised alike (both sides' logprobs).
    pub deltas: Vec<f64>,
    /// The KL divergence over the reference's top-K at those positions.
    pub kls: Vec<f64>,
}

/// The candidate's token where the answers part, as the comparison knows it.
enum Theirs {
    /// From its logprobs: its token's index, `None` where its answer ended.
    Read(Option<usize>),
    /// Without logprobs, one of the reference's alternatives its text goes on with.
    Inferred(String),
    /// Without logprobs and among none of the alternatives: its text there, for the reader
    /// (`None` where its answer ended).
    Unlisted(Option<String>),
}

/// The byte span of each token in the text its tokens spell.
fn spans(tokens: &[TokenLogprob]) -> (String, Vec<(usize, usize)>) {
    let mut text = String::new();
    let mut spans = Vec::with_capacity(tokens.len());
    for t in tokens {
        let start = text.len();
        text.push_str(&t.token);
        spans.push((start, text.len()));
    }
    (text, spans)
}

/// The token whose text holds `byte`: a token of no text holds none.
fn holding(spans: &[(usize, usize)], byte: usize) -> Option<usize> {
    spans.iter().position(|&(s, e)| s <= byte && byte < e)
}

/// The top-K alternatives of a token, K at most `k`.
fn top(t: &TokenLogprob, k: usize) -> &[TopLogprob] {
    &t.top[..t.top.len().min(k)]
}

/// `own`'s margin over `other` (a token's text, `None` for the end of the answer) in `own`'s
/// top-K; `None` when `own` has no alternatives to read a bound from.
fn margin_over(own: &TokenLogprob, other: Option<&str>, k: usize) -> Option<Margin> {
    let alternatives = top(own, k);
    if let Some(found) = other.and_then(|o| alternatives.iter().find(|a| a.token == o)) {
        return Some(Margin {
            nats: own.logprob - found.logprob,
            at_least: false,
        });
    }
    // Outside the top-K, the other token's logprob is at most the K-th's.
    alternatives.last().map(|kth| Margin {
        nats: own.logprob - kth.logprob,
        at_least: true,
    })
}

/// `s` around byte `at`: [`CONTEXT`] characters either side, quoted on one line.
fn around(s: &str, at: usize) -> String {
    let at = floor_boundary(s, at.min(s.len()));
    let before: Vec<char> = s[..at].chars().collect();
    let start = before.len().saturating_sub(CONTEXT);
    let head: String = before[start..].iter().collect();
    let tail: String = s[at..].chars().take(CONTEXT).collect();
    let mut q = quote(&format!("{head}{tail}"), 2 * CONTEXT + 1);
    if start > 0 {
        q.insert(1, '…');
    }
    if s[at..].chars().nth(CONTEXT).is_some() {
        q.insert(q.len() - 1, '…');
    }
    q
}

/// The largest char boundary at or below `i` (`str::floor_char_boundary` is unstable).
fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The KL divergence of `c` from `r` over `r`'s top-K, both renormalised over that set; a
/// token missing from `c`'s top-K is given `c`'s K-th logprob, the most it can have. `None`
/// when either side has no alternatives.
fn kl_top(r: &TokenLogprob, c: &TokenLogprob, k: usize) -> Option<f64> {
    let (rs, cs) = (top(r, k), top(c, k));
    let floor = cs.last()?.logprob;
    if rs.is_empty() {
        return None;
    }
    let p: Vec<f64> = rs.iter().map(|a| a.logprob.exp()).collect();
    let q: Vec<f64> = rs
        .iter()
        .map(|a| {
            cs.iter()
                .find(|b| b.token == a.token)
                .map_or(floor, |b| b.logprob)
                .exp()
        })
        .collect();
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if !(sp > 0.0 && sq > 0.0) {
        return None;
    }
    let kl: f64 = p
        .iter()
        .zip(&q)
        .filter(|(p, _)| **p > 0.0)
        .map(|(p, q)| (p / sp) * ((p / sp) / (q / sq)).ln())
        .sum();
    kl.is_finite().then_some(kl.max(0.0))
}

/// Compare the candidate's answer with the reference's tokens (`reference_cut`: its answer
/// was cut by max_tokens), judging on top-`k` alternatives with the tie margin `tie`.
pub fn compare(
    candidate: Answer<'_>,
    reference: &[TokenLogprob],
    reference_cut: bool,
    k: usize,
    tie: f64,
) -> Compared {
    let (rtext, rspans) = spans(reference);
    let (ctext, cspans) = match candidate.logprobs {
        Some(tokens) => {
            let (t, s) = spans(tokens);
            (t, Some(s))
        }
        None => (candidate.content.to_string(), None),
    };
    let d = rtext
        .bytes()
        .zip(ctext.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    // Pairs of tokens tokenised alike (the same span) wholly before `end`: where both sides
    // chose the same token, and their logprobs can be set side by side.
    let paired = |end: usize| -> (Vec<f64>, Vec<f64>) {
        let (Some(ctoks), Some(cspans)) = (candidate.logprobs, cspans.as_ref()) else {
            return (Vec::new(), Vec::new());
        };
        let by_span: HashMap<(usize, usize), usize> =
            cspans.iter().enumerate().map(|(j, s)| (*s, j)).collect();
        let mut deltas = Vec::new();
        let mut kls = Vec::new();
        for (i, span) in rspans.iter().enumerate() {
            if span.1 > end || span.0 == span.1 {
                continue;
            }
            if let Some(&j) = by_span.get(span) {
                let (r, c) = (&reference[i], &ctoks[j]);
                let delta = (c.logprob - r.logprob).abs();
                if delta.is_finite() {
                    deltas.push(delta);
                }
                kls.extend(kl_top(r, c, k));
            }
        }
        (deltas, kls)
    };
    let before = |end: usize| rspans.iter().filter(|s| s.1 <= end).count();
    let shorter_cut = if d == rtext.len() && d < ctext.len() {
        Some(reference_cut)
    } else if d == ctext.len() && d < rtext.len() {
        Some(candidate.cut)
    } else {
        None
    };
    if d == rtext.len() && d == ctext.len() || shorter_cut == Some(true) {
        let (deltas, kls) = paired(d);
        let n = before(d);
        return Compared {
            positions: n,
            agreed: n,
            divergence: None,
            cut_short: shorter_cut == Some(true),
            deltas,
            kls,
        };
    }
    // They part at byte `d`. The tokens compared are those where the two token streams part:
    // on each side the token that starts at the last byte at or before `d` where both sides
    // start a token (a side that ended at `d`, where the other starts a token there, offers
    // the end of its answer). A near-tie onto a token that is the start of the other side's
    // (" a" where the reference said " attributed") parts the texts a byte past that token,
    // inside the next one: the token holding `d` would compare " classic" with " attributed".
    let (ri, theirs) = match (candidate.logprobs, cspans.as_ref()) {
        (Some(_), Some(cspans)) => {
            let starts = |spans: &[(usize, usize)], at: usize| spans.iter().position(|s| s.0 == at);
            let b = if d == rtext.len() && starts(cspans, d).is_some()
                || d == ctext.len() && starts(&rspans, d).is_some()
            {
                d
            } else {
                rspans
                    .iter()
                    .map(|s| s.0)
                    .filter(|&x| x <= d && starts(cspans, x).is_some())
                    .max()
                    .unwrap_or(0)
            };
            (starts(&rspans, b), Theirs::Read(starts(cspans, b)))
        }
        _ => {
            // No logprobs: the candidate's token is the longest of the reference's
            // alternatives at the reference's token holding `d` that the candidate's text goes
            // on with and that reaches `d`; else, where that token starts at `d`, the longest
            // at the token before it that the text goes on with past `d` (" attributed" where
            // the reference said " a", " classic").
            let guess_at = |i: usize, reach: usize| {
                let (r, s) = (&reference[i], rspans[i].0);
                top(r, k)
                    .iter()
                    .filter(|a| a.token != r.token && s + a.token.len() >= reach)
                    .filter(|a| ctext.as_bytes()[s..].starts_with(a.token.as_bytes()))
                    .max_by_key(|a| a.token.len())
                    .map(|a| a.token.clone())
            };
            let held = holding(&rspans, d);
            let found = held
                .and_then(|i| guess_at(i, d).map(|g| (i, g)))
                .or_else(|| {
                    held.filter(|&i| i > 0 && rspans[i].0 == d)
                        .and_then(|i| guess_at(i - 1, d + 1).map(|g| (i - 1, g)))
                });
            match found {
                Some((i, g)) => (Some(i), Theirs::Inferred(g)),
                None => {
                    // Not among the alternatives: the candidate's text there, for the reader.
                    let shown = (d < ctext.len()).then(|| {
                        let s = floor_boundary(&ctext, held.map_or(d, |i| rspans[i].0));
                        ctext[s..].chars().take(8).collect::<String>()
                    });
                    (held, Theirs::Unlisted(shown))
                }
            }
        }
    };
    let rtok = ri.map(|i| &reference[i]);
    let ctoks = candidate.logprobs.unwrap_or(&[]);
    let (ctok, cj, looked_up, inferred) = match theirs {
        Theirs::Read(j) => (j.map(|j| ctoks[j].token.clone()), j, true, false),
        Theirs::Inferred(t) => (Some(t), None, true, true),
        Theirs::Unlisted(shown) => (shown, None, false, true),
    };
    let margin = rtok.and_then(|r| margin_over(r, ctok.as_deref().filter(|_| looked_up), k));
    // The candidate's own margin, where it sent logprobs: its token over the reference's. Where
    // the reference ended there is no token of its to look up (an end has no text in a top-K):
    // unmeasured on both sides, never "at least 0".
    let candidate_margin =
        rtok.and_then(|r| cj.and_then(|j| margin_over(&ctoks[j], Some(r.token.as_str()), k)));
    let kind = match (margin, candidate_margin) {
        (Some(m), _) if !m.within(tie) => Kind::Hard,
        (_, Some(c)) if !c.within(tie) => Kind::Hard,
        (Some(_), _) => Kind::NearTie,
        (None, _) => Kind::Unmeasured,
    };
    // Agreed: the reference's tokens before the one compared (all of them where it ended). A
    // token that starts the candidate's (" the" for " their") is the divergence, not agreed,
    // though the texts part past it.
    let compared_at = ri.map_or(rtext.len(), |i| rspans[i].0);
    let agreed = before(compared_at);
    let (deltas, kls) = paired(compared_at);
    Compared {
        positions: agreed + 1,
        agreed,
        divergence: Some(Divergence {
            token: ri.unwrap_or(reference.len()),
            byte: d,
            reference_token: rtok.map(|r| r.token.clone()),
            candidate_token: ctok,
            inferred,
            margin,
            candidate_margin,
            kind,
            reference_quote: around(&rtext, d),
            candidate_quote: around(&ctext, d),
            reanchors: 0,
        }),
        cut_short: false,
        deltas,
        kls,
    }
}

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
        logprobs,
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

/// The largest top-K among `replies`' tokens: the K the side was recorded at.
fn recorded_k(replies: &[&ReplyRecord]) -> Option<usize> {
    replies
        .iter()
        .filter_map(|r| r.logprobs.as_deref())
        .flat_map(|t| t.iter().map(|t| t.top.len()))
        .max()
}

/// The sampling fields of a request body besides temperature: set differently on the two
/// sides, they make other greedy answers whatever the arithmetic.
const SAMPLING_KEYS: [&str; 11] = [
    "seed",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "mirostat",
    "logit_bias",
];

/// Why the two runs cannot be compared token by token, or an empty list.
pub fn incomparable(candidate: &RunManifest, reference: &RunManifest) -> Vec<String> {
    let mut why = Vec::new();
    let theirs: Vec<&str> = reference
        .prompts
        .iter()
        .map(|p| p.prompt.as_str())
        .collect();
    let other: Vec<&str> = candidate
        .prompts
        .iter()
        .map(|p| p.prompt.as_str())
        .filter(|p| !theirs.contains(p))
        .collect();
    if let Some(p) = other.first() {
        why.push(format!(
            "other prompts: {} prompts the reference never asked, e.g. {}",
            other.len(),
            quote(p, 40)
        ));
    }
    let max_tokens = |m: &RunManifest, prompt: &str| m.max_tokens_for(prompt);
    let show = |n: Option<u64>| n.map_or("unrecorded".to_string(), |n| n.to_string());
    if let Some(p) = candidate.prompts.iter().find(|p| {
        theirs.contains(&p.prompt.as_str())
            && max_tokens(candidate, &p.prompt) != max_tokens(reference, &p.prompt)
    }) {
        why.push(format!(
            "max_tokens of {} {} here, {} at the reference",
            quote(&p.prompt, 40),
            show(max_tokens(candidate, &p.prompt)),
            show(max_tokens(reference, &p.prompt))
        ));
    }
    for (side, m) in [("here", candidate), ("at the reference", reference)] {
        match m.sampling().temperature {
            Some(0.0) => {}
            Some(t) => why.push(format!("temperature {t} {side}: greedy answers need 0")),
            None => why.push(format!("a temperature that is not a number {side}")),
        }
    }
    let field = |m: &RunManifest, key: &str| {
        let v = m.extra_body.as_ref().and_then(|b| b.get(key)).cloned();
        match (key, v) {
            ("seed", None) => m.sampling().seed.map(serde_json::Value::from),
            (_, v) => v,
        }
    };
    for key in SAMPLING_KEYS {
        let (a, b) = (field(candidate, key), field(reference, key));
        if a != b {
            let show =
                |v: Option<serde_json::Value>| v.map_or("unset".to_string(), |v| v.to_string());
            why.push(format!(
                "{key} {} here, {} at the reference",
                one_line(&show(a)),
                one_line(&show(b))
            ));
        }
    }
    why
}

/// A side's model and serve binary, as the line names them: `model m (serve sha256
/// 0123456789ab)`.
fn named(m: &RunManifest) -> String {
    let model = m.model.as_deref().map_or("unnamed".into(), one_line);
    let sha = m
        .serve_binary
        .as_ref()
        .map_or("unrecorded".to_string(), |b| {
            one_line(&b.sha256[..b.sha256.len().min(12)]).into_owned()
        });
    format!("model {model}, serve sha256 {sha}")
}

/// The |Δ logprob| figures of `deltas`: median and p90 by Hyndman & Fan's definition 7
/// ([`percentile`], the project's one percentile), and the max.
pub fn delta_figures(deltas: &[f64]) -> Option<DeltaFigures> {
    Some(DeltaFigures {
        count: deltas.len(),
        median: percentile(deltas, 50.0)?,
        p90: percentile(deltas, 90.0)?,
        max: deltas.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// A divergence as a FAIL names it.
fn describe(prompt: &str, d: &Divergence, k: usize, tie: f64) -> String {
    let token = |t: &Option<String>| {
        t.as_deref()
            .map_or("the end of the answer".to_string(), |t| quote(t, 16))
    };
    let margin = match (d.margin, d.candidate_margin) {
        (Some(m), None) => format!("the reference's margin {}", m.said()),
        (Some(m), Some(c)) => format!(
            "the reference's margin {}, the candidate's {}",
            m.said(),
            c.said()
        ),
        (None, Some(c)) => format!(
            "no reference margin (its answer ended), the candidate's {}",
            c.said()
        ),
        (None, None) => "no margin readable".to_string(),
    };
    let outside =
        if d.margin.is_some_and(|m| m.at_least) || d.candidate_margin.is_some_and(|m| m.at_least) {
            format!(", outside the top-{k}")
        } else {
            String::new()
        };
    let after = match d.reanchors {
        0 => String::new(),
        n => format!(", after {}", plural(n, "re-anchor", "re-anchors")),
    };
    format!(
        "{} at token {} (byte {}{after}): {}{} here, {} at the reference; {margin}{outside} against the tie {tie} nats; here {} against the reference {}",
        quote(prompt, 40),
        d.token,
        d.byte,
        token(&d.candidate_token),
        if d.inferred && d.candidate_token.is_some() { " (inferred: no logprobs here)" } else { "" },
        token(&d.reference_token),
        d.candidate_quote,
        d.reference_quote,
    )
}

/// The reference line, when a reference was asked for.
pub(crate) fn reference_line(
    e: &Evidence<'_>,
    reference_evidence: ReferenceEvidence<'_>,
    tie: f64,
    min_agreement: Option<f64>,
    max_drift: Option<f64>,
    most: usize,
) -> Option<Line> {
    let (candidate, reference) = match reference_evidence {
        ReferenceEvidence::NotAsked => return None,
        ReferenceEvidence::Missing(why) => {
            return Some(Line::new(
                Check::Reference,
                Status::Fail,
                format!("not judged: {why}"),
            ))
        }
        ReferenceEvidence::Recorded {
            candidate,
            reference,
        } => (candidate, reference),
    };
    let sides = format!(
        "the reference {} ({}; here {})",
        one_line(reference.name),
        named(reference.manifest),
        named(candidate)
    );
    let theirs_all = first_answers(reference.replies);
    let ours = first_answers(e.replies);
    let mut why = incomparable(candidate, reference.manifest);
    let Some(k_ref) = recorded_k(&theirs_all).filter(|&k| k > 0) else {
        why.insert(
            0,
            "the reference recorded no logprobs (make it with --logprobs K)".to_string(),
        );
        return Some(Line::new(
            Check::Reference,
            Status::Fail,
            format!("not comparable with {sides}: {}", why.join("; ")),
        ));
    };
    if !why.is_empty() {
        return Some(Line::new(
            Check::Reference,
            Status::Fail,
            format!("not comparable with {sides}: {}", why.join("; ")),
        ));
    }
    let k_here = recorded_k(&ours).filter(|&k| k > 0);
    let k = k_here.map_or(k_ref, |h| h.min(k_ref));
    let theirs: HashMap<&str, &ReplyRecord> =
        theirs_all.iter().map(|r| (r.prompt.as_str(), *r)).collect();
    let mut notes = Vec::new();
    let mut figures = ReferenceFigures {
        top_k: Some(k),
        tie,
        min_agreement,
        max_logprob_drift: max_drift,
        ..ReferenceFigures::default()
    };
    let (mut deltas, mut kls) = (Vec::new(), Vec::new());
    let (mut unanswered, mut without, mut cut, mut one_way) = (0, 0, 0, 0);
    let mut hard: Vec<String> = Vec::new();
    let mut ties: Vec<String> = Vec::new();
    let mut unmeasured: Vec<String> = Vec::new();
    // Prompts left with a divergence unjudged past it, by why.
    let (mut bound, mut unrecorded) = (0, 0);
    let mut not_continued: Vec<(String, String)> = Vec::new();
    for r in &ours {
        let Some(base) = theirs.get(r.prompt.as_str()) else {
            unanswered += 1;
            continue;
        };
        let Some(tokens) = base.logprobs.as_deref() else {
            without += 1;
            continue;
        };
        let answer = Answer::of(r);
        if answer.logprobs.is_none() {
            one_way += 1;
        }
        let recorded: Vec<&ReanchorRecord> = e
            .reanchors
            .iter()
            .filter(|a| a.prompt == r.prompt)
            .collect();
        let w = walk(
            answer,
            tokens,
            base.finish_reason.as_deref() == Some("length"),
            k,
            tie,
            most,
            &recorded,
        );
        figures.prompts += 1;
        figures.positions += w.positions;
        figures.agreed += w.agreed;
        figures.reanchored += w.reanchored;
        cut += usize::from(w.cut_short);
        deltas.extend(w.deltas);
        kls.extend(w.kls);
        for d in &w.divergences {
            match d.kind {
                Kind::Hard => hard.push(describe(&r.prompt, d, k, tie)),
                Kind::NearTie => {
                    ties.push(d.margin.map_or("?".into(), |m| format!("{:.2}", m.nats)))
                }
                Kind::Unmeasured => unmeasured.push(quote(&r.prompt, 40)),
            }
        }
        match w.end {
            WalkEnd::Whole => {}
            WalkEnd::Bound => bound += 1,
            WalkEnd::Unrecorded { .. } => unrecorded += 1,
            WalkEnd::NotContinued(why) => not_continued.push((r.prompt.clone(), why)),
        }
    }
    figures.stopped_short = bound + unrecorded + not_continued.len();
    figures.near_ties = ties.len();
    figures.hard_divergences = hard.len();
    figures.unmeasured = unmeasured.len();
    figures.agreement =
        (figures.positions > 0).then(|| figures.agreed as f64 / figures.positions as f64);
    figures.logprob_delta = delta_figures(&deltas);
    figures.kl_mean = (!kls.is_empty()).then(|| kls.iter().sum::<f64>() / kls.len() as f64);
    if k_here.is_some_and(|h| h != k_ref) {
        notes.push(format!(
            "judged on the smaller top-K, {k} (top-{} here, top-{k_ref} at the reference)",
            k_here.unwrap_or(0)
        ));
    }
    if one_way > 0 {
        notes.push(format!(
            "{} sent no logprobs here: checked one way, from the reference's top-{k}, the candidate's token inferred",
            plural(one_way, "answer", "answers")
        ));
    }
    if cut > 0 {
        notes.push(format!(
            "{} judged up to the shorter answer, cut by max_tokens",
            plural(cut, "prompt", "prompts")
        ));
    }
    if unanswered > 0 {
        notes.push(format!(
            "{} the reference did not answer",
            plural(unanswered, "prompt", "prompts")
        ));
    }
    if without > 0 {
        notes.push(format!(
            "{} whose reference answer has no logprobs",
            plural(without, "prompt", "prompts")
        ));
    }
    if !unmeasured.is_empty() {
        notes.push(format!(
            "{} where the reference ended and the candidate went on, a margin no logprob shows ({})",
            plural(unmeasured.len(), "divergence", "divergences"),
            unmeasured.join(", ")
        ));
    }
    if let Some(why) = e.reanchors_problem {
        notes.push(format!("re-anchors not read: {}", one_line(why)));
    }
    if bound > 0 {
        notes.push(format!(
            "{} left with a divergence past --reference-reanchor {most}, judged up to it",
            plural(bound, "prompt", "prompts")
        ));
    }
    if let Some((prompt, why)) = not_continued.first() {
        notes.push(format!(
            "the serve did not continue the assistant message it was given ({}: {why}): {} judged up to the divergence where it was asked; if it can continue one, give --continue-body the fields it needs (vLLM's: {{\"continue_final_message\": true, \"add_generation_prompt\": false}})",
            quote(prompt, 40),
            plural(not_continued.len() + unrecorded, "prompt", "prompts")
        ));
    } else if unrecorded > 0 {
        notes.push(format!(
            "{} judged up to a divergence no re-anchor was recorded for ({})",
            plural(unrecorded, "prompt", "prompts"),
            if e.reanchors.is_empty() {
                "the run made none: it ran with --reference-reanchor 0, against another reference, or before re-anchoring"
            } else {
                "the run's re-anchors were made against another reference, or it stopped re-anchoring"
            }
        ));
    }
    let f = &figures;
    let mut text = format!(
        "against {sides}: {}, {} judged, {}",
        plural(f.prompts, "prompt", "prompts"),
        plural(f.positions, "position", "positions"),
        plural(f.reanchored, "re-anchor", "re-anchors")
    );
    if let Some(a) = f.agreement {
        text.push_str(&format!("; top-1 agreement {:.1}%", a * 100.0));
    }
    text.push_str(&format!(
        "; {}{}, {}",
        plural(ties.len(), "near-tie", "near-ties"),
        if ties.is_empty() {
            String::new()
        } else {
            format!(" (margins {} nats)", ties.join(", "))
        },
        plural(hard.len(), "hard divergence", "hard divergences"),
    ));
    match &f.logprob_delta {
        Some(d) => text.push_str(&format!(
            "; |Δ logprob| median {:.3}, p90 {:.3}, max {:.3} nats over {} positions",
            d.median, d.p90, d.max, d.count
        )),
        None => text.push_str("; no |Δ logprob| (no position with both sides' logprobs)"),
    }
    if let Some(kl) = f.kl_mean {
        text.push_str(&format!(
            "; KL over the reference's top-{k}, renormalised, mean {kl:.4} nats over {} positions (truncation to {k} understates it)",
            kls.len()
        ));
    }
    for n in &notes {
        text.push_str(&format!("; {n}"));
    }
    let mut fails = Vec::new();
    if !hard.is_empty() {
        let more = hard.len().saturating_sub(NAMED);
        fails.push(format!(
            "hard {}: {}{}",
            if hard.len() == 1 {
                "divergence"
            } else {
                "divergences"
            },
            hard.iter()
                .take(NAMED)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if let Some(min) = min_agreement {
        match f.agreement {
            Some(a) if a >= min => {}
            Some(a) => fails.push(format!(
                "top-1 agreement {:.1}% under --min-agreement {:.1}%",
                a * 100.0,
                min * 100.0
            )),
            None => fails.push("no position judged to hold to --min-agreement".to_string()),
        }
    }
    if let Some(max) = max_drift {
        match &f.logprob_delta {
            Some(d) if d.p90 <= max => {}
            Some(d) => fails.push(format!("|Δ logprob| p90 {:.3} nats over --max-logprob-drift {max}", d.p90)),
            None => fails.push(
                "--max-logprob-drift needs the candidate's logprobs at positions tokenised alike, and there are none".to_string(),
            ),
        }
    }
    let status = if !fails.is_empty() {
        text = format!("{}; {text}", fails.join("; "));
        Status::Fail
    } else if f.prompts == 0 || !unmeasured.is_empty() {
        if f.prompts == 0 {
            text =
                format!("no prompt answered on both sides with the reference's logprobs; {text}");
        }
        Status::Inconclusive
    } else {
        Status::Ok
    };
    Some(Line::new(Check::Reference, status, text).with(Figures {
        reference: Some(figures),
        ..Figures::default()
    }))
}

#[cfg(test)]
mod tests {
    //! Each verdict rule's boundary, with the mutant of it the test catches named (issue 31
    //! item 5 asks that no survivor go unexplained).
    use super::*;
    use crate::archive::record::{Sampling, Startup};
    use crate::judging::verdict::evidence::Baseline;

    const TIE: f64 = DEFAULT_TIE;

    /// A token with its alternatives, most likely first.
    fn tok(text: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: text.to_string(),
            logprob,
            top: top
                .iter()
                .map(|&(t, l)| TopLogprob {
                    token: t.to_string(),
                    logprob: l,
                })
                .collect(),
        }
    }

    /// "The capital is Paris": the reference, sure of all but " Paris" (" Lyon" 0.5 behind in
    /// binary-exact nats, " Nice" 2 behind).
    fn reference() -> Vec<TokenLogprob> {
        vec![
            tok("The", -0.125, &[("The", -0.125), ("A", -3.0)]),
            tok(
                " capital",
                -0.0625,
                &[(" capital", -0.0625), (" city", -4.0)],
            ),
            tok(" is", -0.0, &[(" is", 0.0), (" was", -5.0)]),
            tok(
                " Paris",
                -0.25,
                &[(" Paris", -0.25), (" Lyon", -0.75), (" Nice", -2.25)],
            ),
        ]
    }

    fn text(content: &str) -> Answer<'_> {
        Answer {
            content,
            logprobs: None,
            cut: false,
        }
    }

    fn tokens(t: &[TokenLogprob]) -> Answer<'_> {
        Answer {
            content: "",
            logprobs: Some(t),
            cut: false,
        }
    }

    #[test]
    fn identical_answers_judge_every_position_and_the_drift_of_each() {
        let r = reference();
        let mut c = reference();
        for (t, d) in c.iter_mut().zip([0.0, 0.25, 0.5, 0.125]) {
            t.logprob -= d;
        }
        let got = compare(tokens(&c), &r, false, 20, TIE);
        assert_eq!(got.divergence, None);
        assert_eq!((got.positions, got.agreed), (4, 4));
        assert_eq!(got.deltas, vec![0.0, 0.25, 0.5, 0.125]);
        // The same alternatives on both sides: no divergence of the distributions past the
        // moved chosen token's own share.
        assert_eq!(got.kls.len(), 4);
        assert!(got.kls.iter().all(|k| *k >= 0.0), "{:?}", got.kls);
    }

    #[test]
    fn the_same_text_tokenised_otherwise_is_identical() {
        // Mutant caught: aligning by token index instead of by text (" cap" + "ital" against
        // " capital" would diverge at token 1).
        let r = reference();
        let c = vec![
            tok("The", -0.125, &[("The", -0.125)]),
            tok(" cap", -0.5, &[(" cap", -0.5)]),
            tok("ital", -0.0, &[("ital", 0.0)]),
            tok(" is", -0.0, &[(" is", 0.0)]),
            tok(" Paris", -0.25, &[(" Paris", -0.25)]),
        ];
        let got = compare(tokens(&c), &r, false, 20, TIE);
        assert_eq!(got.divergence, None);
        assert_eq!((got.positions, got.agreed), (4, 4));
        // Only the tokens tokenised alike are set side by side: "The", " is", " Paris".
        assert_eq!(got.deltas.len(), 3);
        // And the candidate's content, without logprobs, is read the same way.
        let got = compare(text("The capital is Paris"), &r, false, 20, TIE);
        assert_eq!(got.divergence, None);
        assert!(got.deltas.is_empty());
    }

    #[test]
    fn a_margin_exactly_at_the_tie_is_a_near_tie() {
        // Mutant caught: `<=` to `<` in Margin::within (0.5 is exact in binary).
        let got = compare(text("The capital is Lyon"), &reference(), false, 20, TIE);
        let d = got.divergence.unwrap();
        assert_eq!(d.kind, Kind::NearTie);
        assert_eq!(
            d.margin,
            Some(Margin {
                nats: 0.5,
                at_least: false
            })
        );
        assert_eq!((d.token, d.byte), (3, 15));
        assert_eq!(d.reference_token.as_deref(), Some(" Paris"));
        assert_eq!(d.candidate_token.as_deref(), Some(" Lyon"));
        assert!(d.inferred);
        assert_eq!((got.positions, got.agreed), (4, 3));
    }

    #[test]
    fn a_margin_just_over_the_tie_is_hard() {
        // Mutant caught: `<=` to `>=`, or the tie ignored.
        let got = compare(
            text("The capital is Lyon"),
            &reference(),
            false,
            20,
            0.499_999,
        );
        assert_eq!(got.divergence.unwrap().kind, Kind::Hard);
        // A tie of 0 makes any divergence the reference saw as a margin hard.
        let got = compare(text("The capital is Lyon"), &reference(), false, 20, 0.0);
        assert_eq!(got.divergence.unwrap().kind, Kind::Hard);
    }

    #[test]
    fn a_token_outside_the_reference_top_k_is_hard_with_a_margin_of_at_least() {
        // Mutant caught: an "at least" bound under the tie taken as a near-tie (vLLM's rule:
        // outside the other's top-K is never benign), and the bound read from another rank
        // than the K-th.
        let got = compare(text("The capital is Rome"), &reference(), false, 20, TIE);
        let d = got.divergence.unwrap();
        assert_eq!(d.kind, Kind::Hard);
        assert_eq!(
            d.margin,
            Some(Margin {
                nats: 2.0,
                at_least: true
            })
        );
        assert_eq!(d.margin.unwrap().said(), "at least 2.00 nats");
        // With a tie of 5 nats the bound is under it, and still hard.
        let got = compare(text("The capital is Rome"), &reference(), false, 20, 5.0);
        assert_eq!(got.divergence.unwrap().kind, Kind::Hard);
    }

    #[test]
    fn a_smaller_k_judges_on_the_first_k_alternatives_alone() {
        // " Nice" is the 3rd alternative: in the top-3 an exact 2 nats, in the top-2 outside,
        // at least 0.5. Mutant caught: `k` ignored in `top`.
        let d = compare(text("The capital is Nice"), &reference(), false, 3, 5.0)
            .divergence
            .unwrap();
        assert_eq!((d.kind, d.margin.unwrap().at_least), (Kind::NearTie, false));
        assert_eq!(d.margin.unwrap().nats, 2.0);
        let d = compare(text("The capital is Nice"), &reference(), false, 2, 5.0)
            .divergence
            .unwrap();
        assert_eq!(d.kind, Kind::Hard);
        assert_eq!(
            d.margin,
            Some(Margin {
                nats: 0.5,
                at_least: true
            })
        );
    }

    #[test]
    fn with_the_candidate_logprobs_the_check_runs_both_ways() {
        // The reference sees " Lyon" 0.5 behind (a near-tie), but the candidate is sure of
        // " Lyon" and ranks " Paris" 3 nats behind: hard. Mutant caught: the candidate's
        // margin ignored.
        let mut c = reference();
        c[3] = tok(" Lyon", -0.05, &[(" Lyon", -0.05), (" Paris", -3.05)]);
        let d = compare(tokens(&c), &reference(), false, 20, TIE)
            .divergence
            .unwrap();
        assert_eq!(d.margin.unwrap().nats, 0.5);
        assert!((d.candidate_margin.unwrap().nats - 3.0).abs() < 1e-12);
        assert_eq!(d.kind, Kind::Hard);
        assert!(!d.inferred);
        // Both within the tie: a near-tie.
        c[3] = tok(" Lyon", -0.6, &[(" Lyon", -0.6), (" Paris", -0.7)]);
        let d = compare(tokens(&c), &reference(), false, 20, TIE)
            .divergence
            .unwrap();
        assert_eq!(d.kind, Kind::NearTie);
        // The reference's token outside the candidate's top-K: hard, at least.
        c[3] = tok(" Lyon", -0.6, &[(" Lyon", -0.6), (" Nice", -0.7)]);
        let d = compare(tokens(&c), &reference(), false, 20, TIE)
            .divergence
            .unwrap();
        assert_eq!(d.kind, Kind::Hard);
        assert!(d.candidate_margin.unwrap().at_least);
    }

    #[test]
    fn an_empty_answer_on_one_side() {
        // The candidate said nothing: its end against the reference's first token, which the
        // reference's top-K does not hold: hard.
        let d = compare(text(""), &reference(), false, 20, TIE)
            .divergence
            .unwrap();
        assert_eq!((d.token, d.byte, d.kind), (0, 0, Kind::Hard));
        assert_eq!(d.candidate_token, None);
        // The reference said nothing and the candidate went on: no logprob shows the
        // reference's end, so no margin can be read.
        let d = compare(text("The"), &[], false, 20, TIE)
            .divergence
            .unwrap();
        assert_eq!((d.token, d.kind), (0, Kind::Unmeasured));
        assert_eq!(d.reference_token, None);
        // Both empty: identical, with nothing judged.
        let got = compare(text(""), &[], false, 20, TIE);
        assert_eq!((got.divergence, got.positions), (None, 0));
    }

    #[test]
    fn a_shorter_answer_cut_by_max_tokens_is_no_divergence() {
        // Mutant caught: the `cut` flag ignored (a tokenisation that spent its tokens sooner
        // would read as the candidate stopping).
        let r = reference();
        let cut = Answer {
            cut: true,
            ..text("The capital")
        };
        let got = compare(cut, &r, false, 20, TIE);
        assert!(got.cut_short);
        assert_eq!(got.divergence, None);
        assert_eq!(got.positions, 2);
        // Stopped there (not cut): a divergence.
        assert!(compare(text("The capital"), &r, false, 20, TIE)
            .divergence
            .is_some());
        // The reference cut, the candidate longer: judged up to the reference's end.
        let got = compare(text("The capital is Paris, in France"), &r, true, 20, TIE);
        assert_eq!((got.divergence, got.positions), (None, 4));
    }

    #[test]
    fn a_divergence_inside_a_token_and_inside_a_character() {
        // " Par" is common to " Paris" and " Parma": byte 19 is inside both tokens, and the
        // token compared is the one holding it on each side.
        let mut r = reference();
        r[3] = tok(" Paris", -0.25, &[(" Paris", -0.25), (" Parma", -0.5)]);
        let d = compare(text("The capital is Parma"), &r, false, 20, TIE)
            .divergence
            .unwrap();
        assert_eq!((d.token, d.byte), (3, 18));
        assert_eq!(d.candidate_token.as_deref(), Some(" Parma"));
        assert_eq!(d.kind, Kind::NearTie);
        // "é" and "è" share their first byte: the divergence is at the second, inside the
        // character, and the quotes cut at a character's edge (no panic).
        let r = vec![
            tok("caf", -0.1, &[("caf", -0.1)]),
            tok("é", -0.1, &[("é", -0.1), ("è", -4.0)]),
        ];
        let d = compare(text("cafè"), &r, false, 20, TIE)
            .divergence
            .unwrap();
        assert_eq!((d.token, d.byte, d.kind), (1, 4, Kind::Hard));
        assert_eq!(d.candidate_token.as_deref(), Some("è"));
        assert_eq!(d.reference_quote, "\"café\"");
        assert_eq!(d.candidate_quote, "\"cafè\"");
    }

    #[test]
    fn delta_figures_are_the_projects_percentiles() {
        // Hyndman & Fan definition 7 (judging::latency::percentile, numpy's default): for
        // 1..=10, h = 9 q / 100, so p50 = 5.5 and p90 = 9.1.
        let d: Vec<f64> = (1..=10).map(f64::from).collect();
        let f = delta_figures(&d).unwrap();
        assert_eq!(f.count, 10);
        assert!((f.median - 5.5).abs() < 1e-12);
        assert!((f.p90 - 9.1).abs() < 1e-12);
        assert_eq!(f.max, 10.0);
        assert_eq!(delta_figures(&[]), None);
        assert_eq!(delta_figures(&[0.25]).unwrap().p90, 0.25);
    }

    #[test]
    fn kl_over_the_top_k_is_zero_for_the_same_distribution_and_grows_with_the_gap() {
        let r = tok("a", -0.1, &[("a", -0.1), ("b", -2.0)]);
        assert_eq!(kl_top(&r, &r, 20), Some(0.0));
        let c = tok("a", -0.5, &[("a", -0.5), ("b", -1.0)]);
        let near = kl_top(&r, &c, 20).unwrap();
        let far = kl_top(&r, &tok("a", -0.01, &[("a", -0.01), ("b", -6.0)]), 20).unwrap();
        assert!(near > 0.0 && far > 0.0, "{near} {far}");
        // No alternatives on the candidate's side: no estimate, never a zero.
        assert_eq!(kl_top(&r, &tok("a", -0.1, &[]), 20), None);
    }

    // ---- The line -------------------------------------------------------------------

    const PROMPT: &str = "What is the capital of France?";

    fn manifest(temperature: f64) -> RunManifest {
        let mut m: RunManifest = serde_json::from_value(serde_json::json!({
            "schema": 1, "tool_version": "t", "argv": [], "url": "http://127.0.0.1:1",
            "prompts": [{"prompt": PROMPT}], "replies_planned": 1,
            "floors": {"floor": 1.0, "first_token_ms": 1.0},
            "limits": {"ready_timeout_s": 1.0, "grace_s": 1.0, "reply_timeout_s": 1.0},
            "host": "h", "started_utc": "", "clock": {"name": "CLOCK_MONOTONIC", "base_ns": 0},
            "serve_log_source": "none", "model": "m",
            "serve_binary": {"path": "/s", "size": 1, "sha256": "0123456789abcdef"},
        }))
        .unwrap();
        m.sampling_sent = Some(Sampling {
            temperature: Some(temperature),
            seed: None,
        });
        m
    }

    fn reply(content: &str, logprobs: Option<Vec<TokenLogprob>>) -> ReplyRecord {
        let mut r = ReplyRecord::new(1, PROMPT, None);
        r.content = content.to_string();
        r.logprobs = logprobs;
        r.finish_reason = Some("stop".into());
        r
    }

    fn line(
        ours: &[ReplyRecord],
        theirs: &[ReplyRecord],
        cand: &RunManifest,
        refm: &RunManifest,
        min_agreement: Option<f64>,
        max_drift: Option<f64>,
    ) -> Line {
        let startup = Startup::Ready {
            after_ms: 1.0,
            probe: String::new(),
            not_ready_answers: 0,
        };
        let e = Evidence::of(ours, &startup);
        let evidence = ReferenceEvidence::Recorded {
            candidate: cand,
            reference: Baseline {
                name: "runs/cpu",
                manifest: refm,
                replies: theirs,
                load: None,
            },
        };
        reference_line(
            &e,
            evidence,
            TIE,
            min_agreement,
            max_drift,
            DEFAULT_REANCHOR,
        )
        .unwrap()
    }

    #[test]
    fn a_hard_divergence_fails_naming_prompt_position_tokens_margin_and_quotes() {
        let theirs = [reply("The capital is Paris", Some(reference()))];
        let ours = [reply("The capital is Rome", None)];
        let m = manifest(0.0);
        let l = line(&ours, &theirs, &m, &m, None, None);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        let t = &l.text;
        for said in [
            "hard divergence: \"What is the capital of France?\" at token 3 (byte 15)",
            "\" Rom",
            "\" Paris\" at the reference",
            "margin at least 2.00 nats, outside the top-3",
            "\"The capital is Rome\" against the reference \"The capital is Paris\"",
            "model m, serve sha256 0123456789ab",
            "checked one way",
            "4 positions judged, 0 re-anchors",
            "1 prompt judged up to a divergence no re-anchor was recorded for (the run made none",
        ] {
            assert!(t.contains(said), "{said:?} not in {t}");
        }
        let f = l.figures.unwrap().reference.unwrap();
        assert_eq!(
            (f.prompts, f.positions, f.agreed, f.hard_divergences),
            (1, 4, 3, 1)
        );
        assert_eq!(f.agreement, Some(0.75));
        assert_eq!(f.reanchored, 0);
    }

    #[test]
    fn a_near_tie_is_ok_with_its_margin() {
        let theirs = [reply("The capital is Paris", Some(reference()))];
        let ours = [reply("The capital is Lyon", None)];
        let m = manifest(0.0);
        let l = line(&ours, &theirs, &m, &m, None, None);
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text
                .contains("1 near-tie (margins 0.50 nats), 0 hard divergences"),
            "{}",
            l.text
        );
    }

    #[test]
    fn the_figures_carry_the_settings_they_were_judged_with() {
        // Mutants: each of these fields deleted from the figures.
        let theirs = [reply("The capital is Paris", Some(reference()))];
        let ours = [reply("The capital is Paris", Some(reference()))];
        let m = manifest(0.0);
        let l = line(&ours, &theirs, &m, &m, Some(0.9), Some(0.2));
        let f = l.figures.unwrap().reference.unwrap();
        assert_eq!(
            (f.tie, f.min_agreement, f.max_logprob_drift),
            (TIE, Some(0.9), Some(0.2))
        );
    }

    #[test]
    fn min_agreement_and_max_logprob_drift_fail_past_their_bound_only() {
        let theirs = [reply("The capital is Paris", Some(reference()))];
        let ours = [reply("The capital is Lyon", None)];
        let m = manifest(0.0);
        // 3 of 4 positions agree: 0.75 passes 0.75 and fails 0.76. Mutant caught: `>=` to `>`.
        assert_eq!(
            line(&ours, &theirs, &m, &m, Some(0.75), None).status,
            Status::Ok
        );
        let l = line(&ours, &theirs, &m, &m, Some(0.76), None);
        assert_eq!(l.status, Status::Fail);
        assert!(
            l.text
                .starts_with("top-1 agreement 75.0% under --min-agreement 76.0%"),
            "{}",
            l.text
        );
        // No candidate logprobs: a drift limit cannot be held, and that is a FAIL, never a 0.
        let l = line(&ours, &theirs, &m, &m, None, Some(1.0));
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        // With them: p90 of |Δ| over 4 positions of 0, 0, 0, 0.25 is 0.7 x 0.25 = 0.175 (H&F
        // 7), in floating point a hair over it: the bounds either side of it.
        let mut c = reference();
        c[3].logprob -= 0.25;
        let ours = [reply("The capital is Paris", Some(c))];
        let l = line(&ours, &theirs, &m, &m, None, Some(0.18));
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        let l = line(&ours, &theirs, &m, &m, None, Some(0.17));
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        let d = l.figures.unwrap().reference.unwrap().logprob_delta.unwrap();
        assert_eq!((d.count, d.max), (4, 0.25));
    }

    #[test]
    fn not_comparable_fails_saying_why() {
        let m = manifest(0.0);
        let ours = [reply("The capital is Paris", None)];
        // A reference without logprobs.
        let l = line(
            &ours,
            &[reply("The capital is Paris", None)],
            &m,
            &m,
            None,
            None,
        );
        assert_eq!(l.status, Status::Fail);
        assert!(
            l.text.contains("the reference recorded no logprobs"),
            "{}",
            l.text
        );
        // A sampled side.
        let theirs = [reply("The capital is Paris", Some(reference()))];
        let l = line(&ours, &theirs, &manifest(0.7), &m, None, None);
        assert_eq!(l.status, Status::Fail);
        assert!(l.text.contains("temperature 0.7 here"), "{}", l.text);
        // Other prompts, and another max_tokens.
        let mut other = manifest(0.0);
        other.prompts[0].prompt = "Elsewhere?".into();
        let l = line(&ours, &theirs, &other, &m, None, None);
        assert!(l.text.contains("other prompts"), "{}", l.text);
        let mut longer = manifest(0.0);
        longer.prompts[0].max_tokens = Some(99);
        let l = line(&ours, &theirs, &longer, &m, None, None);
        assert!(l.text.contains("max_tokens of"), "{}", l.text);
        // Another sampling setting.
        let mut top_k = manifest(0.0);
        top_k.extra_body = Some(serde_json::from_str(r#"{"top_k": 1}"#).unwrap());
        let l = line(&ours, &theirs, &top_k, &m, None, None);
        assert_eq!(l.status, Status::Fail);
        assert!(
            l.text.contains("top_k 1 here, unset at the reference"),
            "{}",
            l.text
        );
    }

    #[test]
    fn another_k_is_judged_on_the_smaller_and_said() {
        let theirs = [reply("The capital is Paris", Some(reference()))];
        let c: Vec<TokenLogprob> = reference()
            .into_iter()
            .map(|mut t| {
                t.top.truncate(1);
                t
            })
            .collect();
        let ours = [reply("The capital is Paris", Some(c))];
        let m = manifest(0.0);
        let l = line(&ours, &theirs, &m, &m, None, None);
        assert!(
            l.text
                .contains("judged on the smaller top-K, 1 (top-1 here, top-3 at the reference)"),
            "{}",
            l.text
        );
        assert_eq!(l.figures.unwrap().reference.unwrap().top_k, Some(1));
    }

    /// A re-anchor recorded at the reference's token `at` (its prefix the reference's text
    /// through it), the candidate going on with `content`.
    fn anchor(at: usize, content: &str) -> ReanchorRecord {
        let prefix: String = reference()[..=at].iter().map(|t| t.token.clone()).collect();
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
    fn the_line_names_re_anchors_and_what_stopped_short() {
        let cand = manifest(0.0);
        let r = reply("The capital is Paris", Some(reference()));
        let ours = [reply("The city is Paris", None)];
        let startup = Startup::Ready {
            after_ms: 1.0,
            probe: String::new(),
            not_ready_answers: 0,
        };
        let theirs = [r];
        let judge = |reanchors: &[ReanchorRecord], most: usize| {
            let mut e = Evidence::of(&ours, &startup);
            e.reanchors = reanchors;
            let evidence = ReferenceEvidence::Recorded {
                candidate: &cand,
                reference: Baseline {
                    name: "runs/cpu",
                    manifest: &cand,
                    replies: &theirs,
                    load: None,
                },
            };
            reference_line(&e, evidence, TIE, None, None, most).unwrap()
        };
        let a = [anchor(1, " is Paris")];
        let l = judge(&a, 8);
        let f = l
            .figures
            .as_ref()
            .and_then(|f| f.reference.clone())
            .unwrap();
        assert_eq!(
            (f.positions, f.reanchored, f.stopped_short),
            (4, 1, 0),
            "{}",
            l.text
        );
        assert!(
            l.text.contains("4 positions judged, 1 re-anchor"),
            "{}",
            l.text
        );
        let l = judge(&[], 8);
        assert!(l.text.contains("the run made none"), "{}", l.text);
        let l = judge(&a, 0);
        assert!(l.text.contains("past --reference-reanchor 0"), "{}", l.text);
        let anew = [anchor(1, "The city is Paris")];
        let l = judge(&anew, 8);
        assert!(
            l.text.contains("did not continue the assistant message"),
            "{}",
            l.text
        );
        assert!(l.text.contains("--continue-body"), "{}", l.text);
    }

    #[test]
    fn a_near_tie_onto_a_token_that_starts_the_others_is_compared_where_the_tokens_part() {
        // Measured on the real llama-server (docs/reference.md's ladder): the reference said
        // " attributed", the candidate " a" (0.02 nats behind), then " classic". The texts
        // part a byte past " a", inside " classic": the tokens compared are " a" and
        // " attributed", where the token streams part, not " classic".
        let r = vec![
            tok("It", -0.01, &[("It", -0.01)]),
            tok(
                " attributed",
                -0.30,
                &[(" attributed", -0.30), (" a", -0.32), (" the", -3.0)],
            ),
        ];
        let c = vec![
            tok("It", -0.01, &[("It", -0.01)]),
            tok(" a", -0.31, &[(" a", -0.31), (" attributed", -0.33)]),
            tok(" classic", -0.5, &[(" classic", -0.5)]),
        ];
        let near = |got: &Compared| {
            let d = got.divergence.as_ref().unwrap();
            assert_eq!((d.token, d.kind), (1, Kind::NearTie), "{d:?}");
            assert_eq!(d.candidate_token.as_deref(), Some(" a"));
            assert!((d.margin.unwrap().nats - 0.02).abs() < 1e-9, "{d:?}");
        };
        let both = compare(tokens(&c), &r, false, 5, TIE);
        near(&both);
        let own = both.divergence.unwrap().candidate_margin.unwrap();
        assert!(!own.at_least && (own.nats - 0.02).abs() < 1e-9, "{own:?}");
        // Without the candidate's logprobs, " a" is inferred: it ends where the texts part.
        near(&compare(text("It a classic"), &r, false, 5, TIE));

        // The other way: the reference said " a", " classic"; the candidate " attributed".
        let r = vec![
            tok("It", -0.01, &[("It", -0.01)]),
            tok(" a", -0.30, &[(" a", -0.30), (" attributed", -0.32)]),
            tok(" classic", -0.5, &[(" classic", -0.5), (" story", -4.0)]),
        ];
        let c = vec![
            tok("It", -0.01, &[("It", -0.01)]),
            tok(
                " attributed",
                -0.31,
                &[(" attributed", -0.31), (" a", -0.33)],
            ),
        ];
        let near = |got: &Compared| {
            let d = got.divergence.as_ref().unwrap();
            assert_eq!((d.token, d.kind), (1, Kind::NearTie), "{d:?}");
            assert_eq!(d.candidate_token.as_deref(), Some(" attributed"));
            assert_eq!(d.reference_token.as_deref(), Some(" a"));
        };
        near(&compare(tokens(&c), &r, false, 5, TIE));
        // Without logprobs: the reference's " classic" starts where the texts part, and none
        // of its alternatives goes on as the candidate does: the token before it does.
        near(&compare(text("It attributed"), &r, false, 5, TIE));
    }

    #[test]
    fn a_reference_token_that_starts_the_candidates_is_the_divergence_never_also_agreed() {
        // The ladder's q4_0 Romeo answer: the reference's " the", the candidate's " their"
        // (texts part past " the"). Counted once, as the divergence: 2 positions, 1 agreed.
        let r = vec![
            tok("So", -0.01, &[("So", -0.01)]),
            tok(" the", -0.2, &[(" the", -0.2), (" their", -0.3)]),
            tok(" end", -0.1, &[(" end", -0.1)]),
        ];
        let c = vec![
            tok("So", -0.01, &[("So", -0.01)]),
            tok(" their", -0.25, &[(" their", -0.25), (" the", -0.3)]),
        ];
        for got in [
            compare(tokens(&c), &r, false, 5, TIE),
            compare(text("So their"), &r, false, 5, TIE),
        ] {
            assert_eq!((got.positions, got.agreed), (2, 1), "{got:?}");
            assert_eq!(got.divergence.unwrap().token, 1);
        }
    }

    /// Mutants cargo-mutants left (2026-12-03 run on compare, walk and their helpers): each
    /// test below names the one it catches.
    #[test]
    fn drift_is_taken_before_the_divergence_only() {
        // Mutant: `&&` for `||` in `paired`'s skip takes tokens past the divergence too.
        let r = vec![
            tok("A", -0.1, &[("A", -0.1)]),
            tok(" b", -0.1, &[(" b", -0.1), (" x", -0.2)]),
            tok(" c", -0.1, &[(" c", -0.1)]),
        ];
        let c = vec![
            tok("A", -0.2, &[("A", -0.2)]),
            tok(" x", -0.15, &[(" x", -0.15), (" b", -0.2)]),
            tok(" c", -0.3, &[(" c", -0.3)]),
        ];
        let got = compare(tokens(&c), &r, false, 5, TIE);
        assert_eq!(got.deltas.len(), 1, "{got:?}");
    }

    #[test]
    fn cut_answers_are_no_divergence_only_where_one_is_the_others_start() {
        let r = reference();
        // Identical answers with the reference cut: not "cut short" (mutant: `<=` for `<`).
        let got = compare(text("The capital is Paris"), &r, true, 5, TIE);
        assert!(!got.cut_short && got.divergence.is_none(), "{got:?}");
        // A candidate cut by max_tokens that diverges mid-text still diverges (mutant: `||`
        // for `&&` in the candidate's shorter-and-cut test).
        let cut = Answer {
            content: "The city",
            logprobs: None,
            cut: true,
        };
        assert!(compare(cut, &r, false, 5, TIE).divergence.is_some());
    }

    #[test]
    fn a_reference_that_ended_where_the_candidate_went_on_is_unmeasured_with_its_logprobs() {
        // Mutant: `&&` for `||` between the two "one side ended" tests.
        let r = vec![tok("Paris", -0.1, &[("Paris", -0.1)])];
        let c = vec![
            tok("Paris", -0.1, &[("Paris", -0.1)]),
            tok(".", -0.2, &[(".", -0.2)]),
        ];
        let d = compare(tokens(&c), &r, false, 5, TIE).divergence.unwrap();
        assert_eq!(d.kind, Kind::Unmeasured, "{d:?}");
        assert_eq!(d.candidate_token.as_deref(), Some("."));
        assert_eq!(d.reference_token, None);
    }

    #[test]
    fn an_inferred_token_must_reach_where_the_texts_part() {
        // " at" is common, " atom" is the candidate's: the alternative " a" ends before the
        // byte where they part and is not its token (mutants: `||` for `&&`, `*` for `+`).
        let r = vec![
            tok("It", -0.01, &[("It", -0.01)]),
            tok(
                " attributed",
                -0.3,
                &[(" attributed", -0.3), (" a", -0.4), (" the", -5.0)],
            ),
        ];
        let d = compare(text("It atom"), &r, false, 5, TIE)
            .divergence
            .unwrap();
        assert_eq!(d.kind, Kind::Hard, "{d:?}");
        assert!(d.margin.unwrap().at_least, "{d:?}");
        // At the token before: an alternative that ends where the texts part is the
        // reference's own text there, not the candidate's token (mutants: `-` or `*` for `+`
        // in `d + 1`).
        let r = vec![
            tok("It", -0.01, &[("It", -0.01)]),
            tok(" a", -0.3, &[(" a", -0.3), (" ", -0.4)]),
            tok(" classic", -0.1, &[(" classic", -0.1), (" story", -3.0)]),
        ];
        let d = compare(text("It abc"), &r, false, 5, TIE)
            .divergence
            .unwrap();
        assert_eq!(d.kind, Kind::Hard, "{d:?}");
        assert_eq!(d.token, 2, "{d:?}");
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
