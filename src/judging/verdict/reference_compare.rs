//! One prompt's answer against the reference's tokens (`--reference`, issue 31): where the two
//! part, aligned by their text, and the margins there that say whether it is a near-tie or a
//! hard divergence ([`compare`]). The reference line ([`super::reference`]) walks a prompt's
//! answers with it ([`super::reference_walk`]) and says what it found.

use std::collections::HashMap;

use crate::archive::record::{ReplyRecord, TokenLogprob, TopLogprob};
use crate::inert::quote;

/// Characters quoted on either side of a divergence.
const CONTEXT: usize = 24;

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
    /// A recorded reply's answer: its tokens those that spell its content ([`streamed`]).
    pub fn of(r: &'a ReplyRecord) -> Answer<'a> {
        Answer {
            content: &r.content,
            logprobs: r.logprobs.as_deref().map(|t| streamed(t, &r.content)),
            cut: r.finish_reason.as_deref() == Some("length"),
        }
    }
}

/// A side's tokens without the one it never streamed as text: where all tokens but the last
/// spell the content exactly, those. vLLM sends a logprob record for the token that ended its
/// answer (`<|im_end|>`, which usage counts and the content, skipping special tokens, does not
/// show); llama-server sends none. Read as text, that record would be the answer going on where
/// the other engine's stopped: an unmeasured divergence, or a hard one with vLLM as the
/// reference, where both said the same (issue 51). Tokens that spell the content, or do not
/// spell its start token by token (another serve's shapes, a reasoning model's thinking), are
/// kept as they are; so is more than one token past the content's end.
pub(crate) fn streamed<'t>(tokens: &'t [TokenLogprob], content: &str) -> &'t [TokenLogprob] {
    let Some((_, spoken)) = tokens.split_last() else {
        return tokens;
    };
    let mut rest = content;
    for t in spoken {
        match rest.strip_prefix(t.token.as_str()) {
            Some(after) => rest = after,
            None => return tokens,
        }
    }
    if rest.is_empty() {
        spoken
    } else {
        tokens
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

    pub(crate) fn said(self) -> String {
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
    /// At every position judged where the candidate's token starts where the reference's does
    /// and it sent logprobs (those tokenised alike, and the divergence): the KL divergence
    /// over both top-Ks with the rest of the mass as one bucket ([`kl_rest`]).
    pub every_kl: Vec<f64>,
    /// At the same positions, |Δ logprob| of the reference's token: the candidate's logprob
    /// of it less the reference's; at the divergence read from the candidate's top-K (outside
    /// it, at least the reference's logprob less the candidate's K-th).
    pub every_delta: Vec<f64>,
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
pub(crate) fn spans(tokens: &[TokenLogprob]) -> (String, Vec<(usize, usize)>) {
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
pub(crate) fn around(s: &str, at: usize) -> String {
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

/// The KL divergence of `c` from `r` over `r`'s top-K ([`Kl::top_k`]).
#[cfg(test)]
fn kl_top(r: &TokenLogprob, c: &TokenLogprob, k: usize) -> Option<f64> {
    let mut kl = Kl::default();
    kl.set(r, c, k);
    kl.top_k()
}

/// The KL divergence of `c` from `r` over both top-Ks and the rest ([`Kl::with_rest`]).
pub(crate) fn kl_rest(r: &TokenLogprob, c: &TokenLogprob, k: usize) -> Option<f64> {
    let mut kl = Kl::default();
    kl.set(r, c, k);
    kl.with_rest()
}

/// Below this a bucket's probability is rounding: llama-server's probabilities are f32
/// (ε 6e-8 each), so the mass left over by ten of them is exact to about 1e-6.
const MASS_FLOOR: f64 = 1e-6;

/// Both KL figures of a pair of tokens, from each side's top-K probabilities taken once, and
/// the room to work them out in, kept from one position to the next: a judge of 2,000 replies
/// of 200 tokens against a reference and two known-good builds took 48 million `exp`s for
/// them, half of them the same twice, and four lists a position (docs/performance.md).
#[derive(Default)]
struct Kl<'t> {
    /// The reference's and the candidate's top-K.
    r: &'t [TopLogprob],
    c: &'t [TopLogprob],
    /// exp of each of their logprobs.
    pr: Vec<f64>,
    pc: Vec<f64>,
    /// [`Self::top_k`]'s candidate probabilities; [`Self::with_rest`]'s candidates not yet
    /// matched.
    q: Vec<f64>,
    unmatched: Vec<usize>,
}

impl<'t> Kl<'t> {
    /// Set to the top-`k` of the reference's `r` and the candidate's `c`.
    fn set(&mut self, r: &'t TokenLogprob, c: &'t TokenLogprob, k: usize) {
        (self.r, self.c) = (top(r, k), top(c, k));
        self.pr.clear();
        self.pr.extend(self.r.iter().map(|a| a.logprob.exp()));
        self.pc.clear();
        self.pc.extend(self.c.iter().map(|a| a.logprob.exp()));
    }

    /// The KL divergence of the candidate's from the reference's over the reference's top-K,
    /// both renormalised over that set; a token missing from the candidate's top-K is given
    /// its K-th logprob, the most it can have. `None` when either side has no alternatives.
    fn top_k(&mut self) -> Option<f64> {
        let floor = *self.pc.last()?;
        if self.r.is_empty() {
            return None;
        }
        let (cs, pc) = (self.c, &self.pc);
        self.q.clear();
        self.q.extend(self.r.iter().map(|a| {
            cs.iter()
                .position(|b| b.token == a.token)
                .map_or(floor, |j| pc[j])
        }));
        let (p, q) = (&self.pr, &self.q);
        let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
        if !(sp > 0.0 && sq > 0.0) {
            return None;
        }
        let kl: f64 = p
            .iter()
            .zip(q)
            .filter(|(p, _)| **p > 0.0)
            .map(|(p, q)| (p / sp) * ((p / sp) / (q / sq)).ln())
            .sum();
        kl.is_finite().then_some(kl.max(0.0))
    }

    /// The KL divergence KL(P‖Q) of the candidate's distribution Q from the reference's P at
    /// one position, over the tokens in both top-`k` lists and one bucket for all the rest of
    /// the vocabulary (each side's mass outside those tokens). Merging tokens into a bucket
    /// never raises a KL divergence (the log-sum inequality; Cover & Thomas, *Elements of
    /// Information Theory*, 2nd ed., Thm 2.7.1, and the data-processing inequality, Thm
    /// 2.8.1), so this is a lower bound of the KL over the whole vocabulary that llama.cpp's
    /// `llama-perplexity --kl-divergence` computes in-process. A bucket's mass under
    /// [`MASS_FLOOR`] is rounding: the reference's counts as none, the candidate's is read as
    /// the floor. `None` when either side has no alternatives.
    fn with_rest(&mut self) -> Option<f64> {
        let (rs, cs) = (self.r, self.c);
        if rs.is_empty() || cs.is_empty() {
            return None;
        }
        let (mut kl, mut p_in, mut q_in) = (0.0, 0.0, 0.0);
        // The candidate's alternatives not yet matched: each is one token's bucket once, so a
        // text the reference lists twice (two ids, one text) finds its match the first time
        // only.
        self.unmatched.clear();
        self.unmatched.extend(0..cs.len());
        for (i, a) in rs.iter().enumerate() {
            let Some(at) = self.unmatched.iter().position(|&j| cs[j].token == a.token) else {
                continue;
            };
            let j = self.unmatched.swap_remove(at);
            let (p, q) = (self.pr[i], self.pc[j]);
            if p > 0.0 {
                kl += p * (a.logprob - cs[j].logprob);
            }
            p_in += p;
            q_in += q;
        }
        let p_rest = 1.0 - p_in;
        if p_rest >= MASS_FLOOR {
            kl += p_rest * (p_rest / (1.0 - q_in).max(MASS_FLOOR)).ln();
        }
        kl.is_finite().then_some(kl.max(0.0))
    }
}

/// |Δ logprob| of the reference's token `r` where the candidate chose another, `c`: read from
/// `c`'s top-`k`; outside it, the candidate's logprob of it is at most its K-th's, so the
/// difference is at least the reference's logprob less that (0 where that is negative).
fn diverged_delta(r: &TokenLogprob, c: &TokenLogprob, k: usize) -> Option<f64> {
    let alternatives = top(c, k);
    let d = match alternatives.iter().find(|a| a.token == r.token) {
        Some(found) => (found.logprob - r.logprob).abs(),
        None => (r.logprob - alternatives.last()?.logprob).max(0.0),
    };
    d.is_finite().then_some(d)
}

/// What [`paired`] finds at the positions tokenised alike.
#[derive(Default)]
struct Paired {
    deltas: Vec<f64>,
    kls: Vec<f64>,
    kls_rest: Vec<f64>,
}

/// Pairs of tokens tokenised alike (the same span) wholly before `end`: where both sides
/// chose the same token, and their logprobs can be set side by side: each pair's |Δ logprob|
/// and KL over the reference's top-`k`. None without the candidate's tokens and spans.
fn paired(
    reference: &[TokenLogprob],
    rspans: &[(usize, usize)],
    candidate: Option<&[TokenLogprob]>,
    cspans: Option<&[(usize, usize)]>,
    k: usize,
    end: usize,
) -> Paired {
    let (Some(ctoks), Some(cspans)) = (candidate, cspans) else {
        return Paired::default();
    };
    let by_span: HashMap<(usize, usize), usize> =
        cspans.iter().enumerate().map(|(j, s)| (*s, j)).collect();
    let mut out = Paired::default();
    let mut kl = Kl::default();
    for (i, span) in rspans.iter().enumerate() {
        if span.1 > end || span.0 == span.1 {
            continue;
        }
        if let Some(&j) = by_span.get(span) {
            let (r, c) = (&reference[i], &ctoks[j]);
            let delta = (c.logprob - r.logprob).abs();
            if delta.is_finite() {
                out.deltas.push(delta);
            }
            kl.set(r, c, k);
            out.kls.extend(kl.top_k());
            out.kls_rest.extend(kl.with_rest());
        }
    }
    out
}

/// Where the texts part at byte `d` and both sides sent tokens: the reference's token and the
/// candidate's that start at the last byte at or before `d` where both sides start one.
fn parting_read(
    rspans: &[(usize, usize)],
    cspans: &[(usize, usize)],
    rtext: &str,
    ctext: &str,
    d: usize,
) -> (Option<usize>, Theirs) {
    let starts = |spans: &[(usize, usize)], at: usize| spans.iter().position(|s| s.0 == at);
    let b = if d == rtext.len() && starts(cspans, d).is_some()
        || d == ctext.len() && starts(rspans, d).is_some()
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
    (starts(rspans, b), Theirs::Read(starts(cspans, b)))
}

/// Where the texts part at byte `d` and the candidate sent no tokens: the reference's token
/// there and the candidate's, inferred from the reference's top-`k`.
fn parting_inferred(
    reference: &[TokenLogprob],
    rspans: &[(usize, usize)],
    ctext: &str,
    k: usize,
    d: usize,
) -> (Option<usize>, Theirs) {
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
            .map(|a| a.token.to_string())
    };
    let held = holding(rspans, d);
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
                let s = floor_boundary(ctext, held.map_or(d, |i| rspans[i].0));
                ctext[s..].chars().take(8).collect::<String>()
            });
            (held, Theirs::Unlisted(shown))
        }
    }
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
    let paired = |end: usize| {
        paired(
            reference,
            &rspans,
            candidate.logprobs,
            cspans.as_deref(),
            k,
            end,
        )
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
        let p = paired(d);
        let n = before(d);
        return Compared {
            positions: n,
            agreed: n,
            divergence: None,
            cut_short: shorter_cut == Some(true),
            every_delta: p.deltas.clone(),
            every_kl: p.kls_rest,
            deltas: p.deltas,
            kls: p.kls,
        };
    }
    // They part at byte `d`. The tokens compared are those where the two token streams part:
    // on each side the token that starts at the last byte at or before `d` where both sides
    // start a token (a side that ended at `d`, where the other starts a token there, offers
    // the end of its answer). A near-tie onto a token that is the start of the other side's
    // (" a" where the reference said " attributed") parts the texts a byte past that token,
    // inside the next one: the token holding `d` would compare " classic" with " attributed".
    let (ri, theirs) = match cspans.as_deref() {
        Some(cspans) if candidate.logprobs.is_some() => {
            parting_read(&rspans, cspans, &rtext, &ctext, d)
        }
        _ => parting_inferred(reference, &rspans, &ctext, k, d),
    };
    let rtok = ri.map(|i| &reference[i]);
    let ctoks = candidate.logprobs.unwrap_or(&[]);
    let (ctok, cj, looked_up, inferred) = match theirs {
        Theirs::Read(j) => (j.map(|j| ctoks[j].token.to_string()), j, true, false),
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
    let p = paired(compared_at);
    // The divergence itself, where both sides' tokens there start at the same byte (read from
    // the candidate's logprobs: [`parting_read`] finds them so).
    let (mut every_kl, mut every_delta) = (p.kls_rest, p.deltas.clone());
    if let (Some(r), Some(c)) = (rtok, cj.map(|j| &ctoks[j])) {
        every_kl.extend(kl_rest(r, c, k));
        every_delta.extend(diverged_delta(r, c, k));
    }
    Compared {
        positions: agreed + 1,
        agreed,
        divergence: Some(Divergence {
            token: ri.unwrap_or(reference.len()),
            byte: d,
            reference_token: rtok.map(|r| r.token.to_string()),
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
        deltas: p.deltas,
        kls: p.kls,
        every_kl,
        every_delta,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Each rule's boundary, with the mutant of it the test catches named (issue 31 item 5
    //! asks that no survivor go unexplained).
    use super::*;
    use crate::judging::verdict::reference::DEFAULT_TIE;

    pub(crate) const TIE: f64 = DEFAULT_TIE;

    /// A token with its alternatives, most likely first.
    pub(crate) fn tok(text: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: text.into(),
            logprob,
            top: top
                .iter()
                .map(|&(t, l)| TopLogprob {
                    token: t.into(),
                    logprob: l,
                })
                .collect(),
        }
    }

    /// "The capital is Paris": the reference, sure of all but " Paris" (" Lyon" 0.5 behind in
    /// binary-exact nats, " Nice" 2 behind).
    pub(crate) fn reference() -> Vec<TokenLogprob> {
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

    pub(crate) fn text(content: &str) -> Answer<'_> {
        Answer {
            content,
            logprobs: None,
            cut: false,
        }
    }

    pub(crate) fn tokens(t: &[TokenLogprob]) -> Answer<'_> {
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
    fn the_end_of_generation_token_vllm_sends_a_logprob_for_is_not_text() {
        // vLLM's record of `<|im_end|>` after "The capital is Paris" (issue 51): not text.
        let spelled = reference();
        let mut with_end = reference();
        with_end.push(tok(
            "<|im_end|>",
            -0.01,
            &[("<|im_end|>", -0.01), (".", -5.0)],
        ));
        let content = "The capital is Paris";
        assert_eq!(streamed(&with_end, content), &spelled[..]);
        // Mutants caught: trimming a token that is part of the content, trimming where the
        // tokens spell something else, trimming more than the one past the end.
        assert_eq!(
            streamed(&spelled, content),
            &spelled[..],
            "all spelled: kept"
        );
        assert_eq!(streamed(&with_end, "The capital is Lyon"), &with_end[..]);
        assert_eq!(streamed(&with_end, "The capital"), &with_end[..]);
        assert_eq!(streamed(&[], content), &[] as &[TokenLogprob]);
        let only_end = [tok("<|im_end|>", -0.01, &[])];
        assert_eq!(
            streamed(&only_end, ""),
            &[] as &[TokenLogprob],
            "an empty answer"
        );

        // Compared, either engine on either side, the two answers are identical.
        let vllm = ReplyRecord {
            content: content.into(),
            logprobs: Some(with_end.clone()),
            finish_reason: Some("stop".into()),
            ..ReplyRecord::new(1, "q", None)
        };
        let got = compare(Answer::of(&vllm), &spelled, false, 20, TIE);
        assert_eq!(got.divergence, None, "vLLM as the candidate");
        assert_eq!((got.positions, got.agreed), (4, 4));
        let llama = Answer {
            content,
            logprobs: Some(&spelled),
            cut: false,
        };
        let got = compare(llama, streamed(&with_end, content), false, 20, TIE);
        assert_eq!(got.divergence, None, "vLLM as the reference");
        // Without the trim, the end token read as text is the answer going on.
        let got = compare(llama, &with_end, false, 20, TIE);
        assert_eq!(got.divergence.map(|d| d.kind), Some(Kind::Hard));
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

    #[test]
    fn kl_with_the_rest_as_one_bucket_is_the_whole_kl_when_nothing_is_cut_and_never_more() {
        // A vocabulary of four, P = (0.6, 0.2, 0.15, 0.05) and Q = (0.5, 0.2, 0.05, 0.25): the
        // whole KL by its definition, sum p ln(p/q) (Cover & Thomas eq. 2.26).
        let (p, q) = ([0.6f64, 0.2, 0.15, 0.05], [0.5f64, 0.2, 0.05, 0.25]);
        let whole: f64 = p.iter().zip(&q).map(|(p, q)| p * (p / q).ln()).sum();
        let side = |d: [f64; 4]| {
            let top: Vec<(&str, f64)> = ["a", "b", "c", "d"]
                .into_iter()
                .zip(d.map(f64::ln))
                .collect();
            tok("a", d[0].ln(), &top)
        };
        let (r, c) = (side(p), side(q));
        let all = kl_rest(&r, &c, 4).unwrap();
        assert!((all - whole).abs() < 1e-12, "{all} against {whole}");
        // Cut to the top 2, "c" and "d" are one bucket on each side, 0.2 against 0.3: a lower
        // bound (the log-sum inequality, Thm 2.7.1), strictly under here.
        let cut = kl_rest(&r, &c, 2).unwrap();
        let expected = 0.6 * (0.6f64 / 0.5).ln() + 0.2 * (0.2f64 / 0.3).ln();
        assert!((cut - expected).abs() < 1e-12, "{cut} against {expected}");
        assert!(cut < whole - 0.1, "{cut} against {whole}");
        assert_eq!(kl_rest(&r, &r, 4), Some(0.0));
        // A text listed twice on the reference's side is matched once (catches a candidate
        // alternative matched again, which would count its mass twice).
        let twice = tok("a", 0.7f64.ln(), &[("a", 0.7f64.ln()), ("a", 0.2f64.ln())]);
        let once = tok("a", 0.7f64.ln(), &[("a", 0.7f64.ln())]);
        assert_eq!(kl_rest(&twice, &once, 2), kl_rest(&once, &once, 2));
        // No alternatives on a side: no figure, never a zero.
        assert_eq!(kl_rest(&r, &tok("a", -0.1, &[]), 3), None);
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
}
