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
//! Here the line; one answer against the reference's tokens is [`super::reference_compare`],
//! the walk past re-anchors [`super::reference_walk`], both re-exported here.
//!
//! Pure: the two runs' records and the settings in, the line out.

use crate::archive::check::Check;
use std::collections::{HashMap, HashSet};

use super::determinism::first_answers;
use super::evidence::{Baseline, Evidence, NoiseBuild, ReferenceEvidence};
pub use super::reference_compare::{compare, Answer, Compared, Divergence, Kind, Margin};
use super::reference_noise::{
    against_noise, noise_said, position_figures, unusable_figures, AgainstNoise,
};
pub use super::reference_walk::{not_continued, walk, Walk, WalkEnd};
use super::words::plural;
use crate::archive::record::{
    DeltaFigures, NoiseFigures, PositionFigures, ReanchorRecord, ReferenceFigures, ReplyRecord,
    RunManifest,
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

/// The most hard divergences a FAIL names.
const NAMED: usize = 3;

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
    let theirs: std::collections::HashSet<&str> = reference
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

/// Why a noise archive cannot be held beside the reference at all: other prompts, max_tokens,
/// temperature or sampling fields than the reference's ([`incomparable`], as a candidate's),
/// or logprobs asked at another K. An empty list when it can. `run` and `judge` refuse such an
/// archive with exit 2 before anything starts; the line says the same of one recorded by a run
/// and judged against another reference now.
pub fn noise_mismatch(noise: &RunManifest, reference: &RunManifest) -> Vec<String> {
    let mut why: Vec<String> = incomparable(noise, reference)
        .into_iter()
        .map(|w| w.replace(" here", " in the noise build"))
        .collect();
    if let (Some(n), Some(r)) = (&noise.logprobs, &reference.logprobs) {
        if n.top != r.top {
            why.push(format!(
                "logprobs at top-{} in the noise build, top-{} at the reference",
                n.top, r.top
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

/// What the walks of every prompt found, as the line counts and names it.
#[derive(Default)]
struct Tally {
    /// |Δ logprob| at positions tokenised alike.
    deltas: Vec<f64>,
    /// The KL over the reference's top-K at those positions.
    kls: Vec<f64>,
    /// The KL over both top-Ks and the rest of the mass at every position measured.
    every_kl: Vec<f64>,
    /// |Δ logprob| of the reference's token there.
    every_delta: Vec<f64>,
    /// Prompts the reference did not answer.
    unanswered: usize,
    /// Prompts whose reference answer has no logprobs.
    without: usize,
    /// Prompts judged up to the shorter answer, cut by max_tokens.
    cut: usize,
    /// Answers without logprobs here: checked one way.
    one_way: usize,
    /// Each hard divergence, described.
    hard: Vec<String>,
    /// Each near-tie's margin.
    ties: Vec<String>,
    /// The prompts of the divergences no margin measures.
    unmeasured: Vec<String>,
    /// Prompts left with a divergence past the bound of re-anchors.
    bound: usize,
    /// Prompts left at a divergence no re-anchor was recorded for.
    unrecorded: usize,
    /// Prompts whose serve did not continue the message it was given, and how it showed.
    not_continued: Vec<(String, String)>,
}

/// Walk each of `ours` (the first answers of a side) along the reference's answer to its
/// prompt (`theirs`), past the side's `reanchors`, judged on top-`k` with the tie margin `tie`
/// and up to `most` re-anchors; the positions, agreement and re-anchors go into `figures`.
fn walk_prompts(
    reanchors: &[ReanchorRecord],
    ours: &[&ReplyRecord],
    theirs: &HashMap<&str, &ReplyRecord>,
    k: usize,
    tie: f64,
    most: usize,
    figures: &mut ReferenceFigures,
) -> Tally {
    let (mut deltas, mut kls) = (Vec::new(), Vec::new());
    let (mut every_kl, mut every_delta) = (Vec::new(), Vec::new());
    let (mut unanswered, mut without, mut cut, mut one_way) = (0, 0, 0, 0);
    let mut hard: Vec<String> = Vec::new();
    let mut ties: Vec<String> = Vec::new();
    let mut unmeasured: Vec<String> = Vec::new();
    // Prompts left with a divergence unjudged past it, by why.
    let (mut bound, mut unrecorded) = (0, 0);
    let mut not_continued: Vec<(String, String)> = Vec::new();
    for r in ours {
        let Some(base) = theirs.get(r.prompt.as_str()) else {
            unanswered += 1;
            continue;
        };
        // The reference's tokens read as the candidate's are: without a record past its text.
        let Some(tokens) = Answer::of(base).logprobs else {
            without += 1;
            continue;
        };
        let answer = Answer::of(r);
        if answer.logprobs.is_none() {
            one_way += 1;
        }
        let recorded: Vec<&ReanchorRecord> =
            reanchors.iter().filter(|a| a.prompt == r.prompt).collect();
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
        every_kl.extend(w.every_kl);
        every_delta.extend(w.every_delta);
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
    Tally {
        deltas,
        kls,
        every_kl,
        every_delta,
        unanswered,
        without,
        cut,
        one_way,
        hard,
        ties,
        unmeasured,
        bound,
        unrecorded,
        not_continued,
    }
}

impl Tally {
    /// The prompts whose walk stopped short: at the re-anchor bound, at an unrecorded
    /// position, or where the candidate would not continue.
    fn stopped_short(&self) -> usize {
        self.bound + self.unrecorded + self.not_continued.len()
    }

    /// The figures over every position, of `positions` judged with `agreed` alike.
    fn every_position(&self, positions: usize, agreed: usize) -> PositionFigures {
        position_figures(
            positions,
            agreed,
            self.hard.len(),
            &self.every_kl,
            &self.every_delta,
        )
    }

    /// Add what a later walk found, as one walk over both would have.
    fn absorb(&mut self, o: Tally) {
        self.deltas.extend(o.deltas);
        self.kls.extend(o.kls);
        self.every_kl.extend(o.every_kl);
        self.every_delta.extend(o.every_delta);
        self.unanswered += o.unanswered;
        self.without += o.without;
        self.cut += o.cut;
        self.one_way += o.one_way;
        self.hard.extend(o.hard);
        self.ties.extend(o.ties);
        self.unmeasured.extend(o.unmeasured);
        self.bound += o.bound;
        self.unrecorded += o.unrecorded;
        self.not_continued.extend(o.not_continued);
    }

    /// What the line says beside its figures: the K judged on, what was checked one way or
    /// not at all, and which prompts stopped short of the reference's whole answer, and why.
    fn notes(
        &self,
        e: &Evidence<'_>,
        k: usize,
        k_here: Option<usize>,
        k_ref: usize,
        most: usize,
    ) -> Vec<String> {
        let mut notes = Vec::new();
        if k_here.is_some_and(|h| h != k_ref) {
            notes.push(format!(
                "judged on the smaller top-K, {k} (top-{} here, top-{k_ref} at the reference)",
                k_here.unwrap_or(0)
            ));
        }
        if self.one_way > 0 {
            notes.push(format!(
                "{} sent no logprobs here: checked one way, from the reference's top-{k}, the candidate's token inferred",
                plural(self.one_way, "answer", "answers")
            ));
        }
        if self.cut > 0 {
            notes.push(format!(
                "{} judged up to the shorter answer, cut by max_tokens",
                plural(self.cut, "prompt", "prompts")
            ));
        }
        if self.unanswered > 0 {
            notes.push(format!(
                "{} the reference did not answer",
                plural(self.unanswered, "prompt", "prompts")
            ));
        }
        if self.without > 0 {
            notes.push(format!(
                "{} whose reference answer has no logprobs",
                plural(self.without, "prompt", "prompts")
            ));
        }
        if !self.unmeasured.is_empty() {
            notes.push(format!(
                "{} where the reference ended and the candidate went on, a margin no logprob shows ({})",
                plural(self.unmeasured.len(), "divergence", "divergences"),
                self.unmeasured.join(", ")
            ));
        }
        if let Some(why) = e.reanchors_problem {
            notes.push(format!("re-anchors not read: {}", one_line(why)));
        }
        if self.bound > 0 {
            notes.push(format!(
                "{} left with a divergence past --reference-reanchor {most}, judged up to it",
                plural(self.bound, "prompt", "prompts")
            ));
        }
        if let Some((prompt, why)) = self.not_continued.first() {
            notes.push(format!(
                "the serve did not continue the assistant message it was given ({}: {why}): {} judged up to the divergence where it was asked; if it can continue one, give --continue-body the fields it needs (vLLM's: {{\"continue_final_message\": true, \"add_generation_prompt\": false}})",
                quote(prompt, 40),
                plural(self.not_continued.len() + self.unrecorded, "prompt", "prompts")
            ));
        } else if self.unrecorded > 0 {
            notes.push(format!(
                "{} judged up to a divergence no re-anchor was recorded for ({})",
                plural(self.unrecorded, "prompt", "prompts"),
                if e.reanchors.is_empty() {
                    "the run made none: it ran with --reference-reanchor 0, against another reference, or before re-anchoring"
                } else {
                    "the run's re-anchors were made against another reference, or it stopped re-anchoring"
                }
            ));
        }
        notes
    }
}

/// What fails the line: its hard divergences, and the agreement and the |Δ logprob| held to
/// `--min-agreement` and `--max-logprob-drift` where given.
fn reference_fails(
    hard: &[String],
    f: &ReferenceFigures,
    min_agreement: Option<f64>,
    max_drift: Option<f64>,
) -> Vec<String> {
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
    fails
}

/// What a known-good build (`--reference-noise`) is walked over: the reference's first answers,
/// the prompts the candidate was judged on, the K judged, the tie and the bound of re-anchors,
/// all as the candidate's walk has them.
pub struct NoiseScope<'e> {
    reference: &'e RunManifest,
    theirs: HashMap<&'e str, &'e ReplyRecord>,
    judged: HashSet<&'e str>,
    k: usize,
    tie: f64,
    most: usize,
}

impl<'e> NoiseScope<'e> {
    /// The scope of the candidate's `replies` (run as `candidate`) against `reference` under
    /// `rules`; `None` where the two are not compared at all (the line says why, and no noise
    /// is read).
    pub fn of(
        replies: &'e [ReplyRecord],
        candidate: &RunManifest,
        reference: &Baseline<'e>,
        rules: ReferenceRules,
    ) -> Option<NoiseScope<'e>> {
        let s = set_sides(replies, candidate, reference).ok()?;
        Some(NoiseScope::within(&s, reference.manifest, rules))
    }

    fn within(s: &Sides<'e>, reference: &'e RunManifest, rules: ReferenceRules) -> Self {
        NoiseScope {
            reference,
            judged: s
                .ours
                .iter()
                .map(|r| r.prompt.as_str())
                .filter(|p| s.theirs.contains_key(p))
                .collect(),
            theirs: s.theirs.clone(),
            k: s.k,
            tie: rules.tie,
            most: rules.most,
        }
    }
}

/// One prompt's first answer in a known-good build, walked.
struct Walked {
    index: usize,
    tally: Tally,
    figures: ReferenceFigures,
    k: Option<usize>,
}

/// A known-good build's replies walked one at a time, in any order, to its figures against the
/// reference: each prompt's first single-stream answer that did not fail (by index, as
/// [`first_answers`] takes them) among the prompts the candidate was judged on. What a walk
/// keeps of a prompt is its figures, never the reply, so the build's archive need not be held.
pub struct NoiseWalk<'s, 'e> {
    scope: &'s NoiseScope<'e>,
    walked: HashMap<String, Walked>,
}

impl<'s, 'e> NoiseWalk<'s, 'e> {
    /// A walk over nothing yet.
    pub fn new(scope: &'s NoiseScope<'e>) -> Self {
        NoiseWalk {
            scope,
            walked: HashMap::new(),
        }
    }

    /// Walk `r` (past the build's `reanchors`) where it is the first answer to a judged prompt
    /// so far; pass it over otherwise.
    pub fn add(&mut self, reanchors: &[ReanchorRecord], r: &ReplyRecord) {
        if r.error.is_some() || r.burst.is_some() || r.set_apart() {
            return;
        }
        if !self.scope.judged.contains(r.prompt.as_str()) {
            return;
        }
        if self
            .walked
            .get(&r.prompt)
            .is_some_and(|w| w.index <= r.index)
        {
            return;
        }
        let s = self.scope;
        let mut figures = ReferenceFigures::default();
        let mut tally = walk_prompts(reanchors, &[r], &s.theirs, s.k, s.tie, s.most, &mut figures);
        // Kept only what `finish` reads: a build's figures are over every position, so the
        // figures at positions tokenised alike, and the texts of its near-ties, go (half of
        // what a walk of 2,000 prompts held, beside a candidate judged meanwhile: issue 52).
        tally.deltas = Vec::new();
        tally.kls = Vec::new();
        tally.ties = Vec::new();
        tally.unmeasured = Vec::new();
        tally.every_kl.shrink_to_fit();
        tally.every_delta.shrink_to_fit();
        let walked = Walked {
            index: r.index,
            tally,
            figures,
            k: recorded_k(&[r]),
        };
        self.walked.insert(r.prompt.clone(), walked);
    }

    /// The build's figures (`name`, run as `manifest`), or why it cannot be used.
    pub fn finish(self, name: &str, manifest: &RunManifest) -> NoiseFigures {
        let unusable = |why: String| NoiseFigures {
            run: name.to_string(),
            figures: None,
            unusable: Some(why),
        };
        let s = self.scope;
        let mismatch = noise_mismatch(manifest, s.reference);
        if !mismatch.is_empty() {
            return unusable(format!(
                "not comparable with the reference: {}",
                mismatch.join("; ")
            ));
        }
        if self.walked.len() < s.judged.len() {
            return unusable(format!(
                "it answered {} of the {} prompts judged here",
                self.walked.len(),
                s.judged.len()
            ));
        }
        match self
            .walked
            .values()
            .filter_map(|w| w.k)
            .max()
            .filter(|&nk| nk > 0)
        {
            None => return unusable("it recorded no logprobs (make it with --logprobs K)".into()),
            Some(nk) if nk < s.k => {
                return unusable(format!(
                    "its logprobs are top-{nk}, fewer than the top-{} judged here",
                    s.k
                ))
            }
            Some(_) => {}
        }
        // In the order of the answers' indexes, as one walk over them all would add them up.
        let mut walked: Vec<Walked> = self.walked.into_values().collect();
        walked.sort_by_key(|w| w.index);
        let (mut tally, mut f) = (Tally::default(), ReferenceFigures::default());
        for w in walked {
            tally.absorb(w.tally);
            f.prompts += w.figures.prompts;
            f.positions += w.figures.positions;
            f.agreed += w.figures.agreed;
            f.reanchored += w.figures.reanchored;
        }
        let short = tally.stopped_short();
        let figures = tally.every_position(f.positions, f.agreed);
        let why = if tally.one_way > 0 {
            Some(format!(
                "{} sent no logprobs",
                plural(tally.one_way, "of its answers", "of its answers")
            ))
        } else if short > 0 {
            Some(format!(
                "{} judged only up to a divergence (re-anchors not recorded against this reference, past the bound, or not continued): its figures do not cover every position",
                plural(short, "prompt", "prompts")
            ))
        } else {
            unusable_figures(&figures)
        };
        NoiseFigures {
            run: name.to_string(),
            figures: Some(figures),
            unusable: why,
        }
    }
}

/// A known-good build's figures as the evidence gives it: walked here from its records,
/// walked already as they were read, or why it cannot be read now.
fn noise_of(n: &NoiseBuild<'_>, scope: &NoiseScope<'_>) -> NoiseFigures {
    match *n {
        NoiseBuild::Recorded {
            name,
            manifest,
            replies,
            reanchors,
        } => {
            let mut walk = NoiseWalk::new(scope);
            for r in replies {
                walk.add(reanchors, r);
            }
            walk.finish(name, manifest)
        }
        NoiseBuild::Walked { name, walked } => match walked.wait() {
            Ok(figures) => figures.clone(),
            Err(why) => cannot_be_read(name, why),
        },
    }
}

/// A known-good build that cannot be read now (`why`): not used.
fn cannot_be_read(name: &str, why: &str) -> NoiseFigures {
    NoiseFigures {
        run: name.to_string(),
        figures: None,
        unusable: Some(format!("it cannot be read now: {}", one_line(why))),
    }
}

/// The two sides' first answers set against each other: the candidate's, the reference's by
/// prompt, and the K judged (the smaller of the two recorded), with each side's.
struct Sides<'e> {
    ours: Vec<&'e ReplyRecord>,
    theirs: HashMap<&'e str, &'e ReplyRecord>,
    k: usize,
    k_here: Option<usize>,
    k_ref: usize,
}

/// The sides of the candidate's `replies` (run as `candidate`) against `reference`, or why
/// they cannot be compared token by token.
fn set_sides<'e>(
    replies: &'e [ReplyRecord],
    candidate: &RunManifest,
    reference: &Baseline<'e>,
) -> Result<Sides<'e>, Vec<String>> {
    let theirs_all = first_answers(reference.replies);
    let ours = first_answers(replies);
    let mut why = incomparable(candidate, reference.manifest);
    let k_ref = recorded_k(&theirs_all).filter(|&k| k > 0);
    if k_ref.is_none() {
        why.insert(
            0,
            "the reference recorded no logprobs (make it with --logprobs K)".to_string(),
        );
    }
    let (Some(k_ref), true) = (k_ref, why.is_empty()) else {
        return Err(why);
    };
    let k_here = recorded_k(&ours).filter(|&k| k > 0);
    Ok(Sides {
        k: k_here.map_or(k_ref, |h| h.min(k_ref)),
        theirs: theirs_all.iter().map(|r| (r.prompt.as_str(), *r)).collect(),
        ours,
        k_here,
        k_ref,
    })
}

/// What fails the line. With usable noise its rules stand for the tie margin's: a hard
/// divergence fails where the noise shows fewer of them, and is named then.
/// `--min-agreement` and `--max-logprob-drift` hold either way.
fn line_fails(
    hard: &[String],
    f: &ReferenceFigures,
    judged: Option<&AgainstNoise>,
    min_agreement: Option<f64>,
    max_drift: Option<f64>,
) -> Vec<String> {
    match judged {
        Some(n) => {
            let mut fails = n.fails.clone();
            if fails.iter().any(|x| x.starts_with("hard divergences")) {
                fails.extend(reference_fails(hard, f, None, None));
            }
            fails.extend(reference_fails(&[], f, min_agreement, max_drift));
            fails
        }
        None => reference_fails(hard, f, min_agreement, max_drift),
    }
}

/// The figures over every position as the line says them.
fn every_position_said(f: &PositionFigures, k: usize) -> String {
    let mut said = format!(
        "over every position: same top token {}",
        percent(f.same_top)
    );
    match (f.kl_mean, f.kl_p99, f.delta_mean, f.delta_p99) {
        (Some(kl), Some(kl99), Some(d), Some(d99)) => said.push_str(&format!(
            ", KL mean {kl:.4} p99 {kl99:.4} nats (both top-{k}s and the rest of the mass as one bucket: at least the whole vocabulary's), |Δ logprob| of the reference's token mean {d:.3} p99 {d99:.3} nats, over {} of {}",
            f.measured,
            plural(f.positions, "position", "positions")
        )),
        _ => said.push_str(", no KL or |Δ logprob| (no position with the candidate's logprobs)"),
    }
    said.push_str(&format!(
        ", {:.2} hard divergences per 100 positions",
        f.hard_per_100.unwrap_or(0.0)
    ));
    said
}

/// A share as a percentage with one decimal, or `-`.
fn percent(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |x| format!("{:.1}%", x * 100.0))
}

/// The reference line's rules: the tie margin, the flags' floors where given, the bound of
/// re-anchors, and the factor of the noise (`--noise-factor`).
#[derive(Debug, Clone, Copy)]
pub struct ReferenceRules {
    pub tie: f64,
    pub min_agreement: Option<f64>,
    pub max_drift: Option<f64>,
    pub most: usize,
    pub noise_factor: f64,
}

/// The reference line, when a reference was asked for.
pub(crate) fn reference_line(
    e: &Evidence<'_>,
    reference_evidence: ReferenceEvidence<'_>,
    rules: ReferenceRules,
) -> Option<Line> {
    let (tie, most, noise_factor) = (rules.tie, rules.most, rules.noise_factor);
    let (candidate, reference, noise) = match reference_evidence {
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
            noise,
        } => (candidate, reference, noise),
    };
    let sides = format!(
        "the reference {} ({}; here {})",
        one_line(reference.name),
        named(reference.manifest),
        named(candidate)
    );
    let s = match set_sides(e.replies, candidate, &reference) {
        Ok(s) => s,
        Err(why) => {
            return Some(Line::new(
                Check::Reference,
                Status::Fail,
                format!("not comparable with {sides}: {}", why.join("; ")),
            ))
        }
    };
    let (ours, theirs, k, k_here, k_ref) = (&s.ours, &s.theirs, s.k, s.k_here, s.k_ref);
    let mut figures = ReferenceFigures {
        top_k: Some(k),
        tie,
        min_agreement: rules.min_agreement,
        max_logprob_drift: rules.max_drift,
        ..ReferenceFigures::default()
    };
    let tally = walk_prompts(e.reanchors, ours, theirs, k, tie, most, &mut figures);
    let notes = tally.notes(e, k, k_here, k_ref, most);
    let every = tally_figures(&tally, &mut figures);
    if !noise.is_empty() {
        let scope = NoiseScope::within(&s, reference.manifest, rules);
        figures.noise = noise.iter().map(|n| noise_of(n, &scope)).collect();
        figures.noise_factor = Some(noise_factor);
    }
    let judged_by_noise = against_noise(&every, &figures.noise, noise_factor);
    let f = &figures;
    let mut text = counts_said(&sides, f, &tally.ties, tally.hard.len());
    text.push_str(&drift_said(
        f,
        &every,
        k,
        judged_by_noise.as_ref(),
        noise_factor,
    ));
    for n in &notes {
        text.push_str(&format!("; {n}"));
    }
    let fails = line_fails(
        &tally.hard,
        f,
        judged_by_noise.as_ref(),
        rules.min_agreement,
        rules.max_drift,
    );
    let noise_unused = judged_by_noise.is_none() && !f.noise.is_empty();
    let status = if !fails.is_empty() {
        text = format!("{}; {text}", fails.join("; "));
        Status::Fail
    } else if f.prompts == 0 || !tally.unmeasured.is_empty() || noise_unused {
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

/// The figures the walks' tally gives the line: what stopped short, the near-ties, hard
/// divergences and unmeasured ones, agreement, |Δ logprob| and KL, and every position's
/// figures, which it also returns.
fn tally_figures(tally: &Tally, figures: &mut ReferenceFigures) -> PositionFigures {
    figures.stopped_short = tally.stopped_short();
    figures.near_ties = tally.ties.len();
    figures.hard_divergences = tally.hard.len();
    figures.unmeasured = tally.unmeasured.len();
    figures.agreement =
        (figures.positions > 0).then(|| figures.agreed as f64 / figures.positions as f64);
    figures.logprob_delta = delta_figures(&tally.deltas);
    let kls = &tally.kls;
    figures.kl_mean = (!kls.is_empty()).then(|| kls.iter().sum::<f64>() / kls.len() as f64);
    let every = tally.every_position(figures.positions, figures.agreed);
    figures.every_position = Some(every);
    every
}

/// The line's opening: against what, how much was judged, the top-1 agreement, the near-ties
/// (with their margins) and the hard divergences.
fn counts_said(sides: &str, f: &ReferenceFigures, ties: &[String], hard: usize) -> String {
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
        plural(hard, "hard divergence", "hard divergences"),
    ));
    text
}

/// The line's drift: |Δ logprob| at positions tokenised alike, every position's figures, and
/// what the noise builds make of them.
fn drift_said(
    f: &ReferenceFigures,
    every: &PositionFigures,
    k: usize,
    judged_by_noise: Option<&AgainstNoise>,
    noise_factor: f64,
) -> String {
    let mut text = String::new();
    match &f.logprob_delta {
        Some(d) => text.push_str(&format!(
            "; |Δ logprob| median {:.3}, p90 {:.3}, max {:.3} nats over {} positions",
            d.median, d.p90, d.max, d.count
        )),
        None => text.push_str("; no |Δ logprob| (no position with both sides' logprobs)"),
    }
    text.push_str(&format!("; {}", every_position_said(every, k)));
    text.push_str(&noise_said(f, judged_by_noise, noise_factor));
    text
}

#[cfg(test)]
mod tests {
    //! Each verdict rule's boundary, with the mutant of it the test catches named (issue 31
    //! item 5 asks that no survivor go unexplained).
    use super::*;
    use crate::archive::record::{Sampling, Startup, TokenLogprob};
    use crate::judging::verdict::evidence::Baseline;
    use crate::judging::verdict::reference_compare::tests::{reference, TIE};
    use crate::judging::verdict::reference_walk::tests::anchor;
    use crate::judging::verdict::reference_walk::tests::PROMPT;

    /// The rules at the test tie, without noise.
    fn rules(min_agreement: Option<f64>, max_drift: Option<f64>, most: usize) -> ReferenceRules {
        ReferenceRules {
            tie: TIE,
            min_agreement,
            max_drift,
            most,
            noise_factor: 2.0,
        }
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

    // ---- The line -------------------------------------------------------------------

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
            noise: &[],
        };
        reference_line(
            &e,
            evidence,
            rules(min_agreement, max_drift, DEFAULT_REANCHOR),
        )
        .unwrap()
    }

    #[test]
    fn a_noise_build_walked_in_any_order_is_its_first_answers_figures() {
        use crate::judging::verdict::reference_compare::tests::tok;
        let refm = manifest(0.0);
        let theirs = [reply("The capital is Paris", Some(reference()))];
        let ours = [reply("The capital is Paris", Some(reference()))];
        let scope = NoiseScope::of(
            &ours,
            &refm,
            &Baseline {
                name: "runs/cpu",
                manifest: &refm,
                replies: &theirs,
                load: None,
            },
            rules(None, None, DEFAULT_REANCHOR),
        )
        .unwrap();
        // The first answer (by index) agrees with the reference, its logprobs nudged; a later
        // one to the same prompt parts hard (" Nice", 2 nats under " Paris"), and an earlier one
        // failed: neither is the build's answer, in whatever order they come.
        let mut nudged = reference();
        for t in &mut nudged {
            t.logprob -= 0.01;
        }
        let mut parted = reference();
        parted[3] = tok(
            " Nice",
            -2.25,
            &[(" Paris", -0.25), (" Lyon", -0.75), (" Nice", -2.25)],
        );
        let mut first = reply("The capital is Paris", Some(nudged));
        first.index = 2;
        let mut later = reply("The capital is Nice", Some(parted));
        later.index = 5;
        let mut failed = reply("The", Some(reference()));
        failed.error = Some("cut".into());
        let walked = |order: &[&ReplyRecord]| {
            let mut walk = NoiseWalk::new(&scope);
            for r in order {
                walk.add(&[], r);
            }
            walk.finish("runs/noise", &refm)
        };
        let in_order = walked(&[&failed, &first, &later]);
        assert_eq!(walked(&[&later, &first, &failed]), in_order);
        assert_eq!(walked(&[&first, &later]), in_order);
        let f = in_order.figures.as_ref().expect("figures");
        assert_eq!((f.positions, f.hard_per_100), (4, Some(0.0)));
        // Walked alone, the later answer is what the build said, and it parts hard.
        let alone = walked(&[&later]);
        let hard = alone.figures.as_ref().map(|f| f.hard_per_100);
        assert_eq!(hard, Some(Some(25.0)), "{alone:?}");
        // Held whole, the build is walked by the same walk.
        let held = noise_of(
            &NoiseBuild::Recorded {
                name: "runs/noise",
                manifest: &refm,
                replies: &[later.clone(), failed.clone(), first.clone()],
                reanchors: &[],
            },
            &scope,
        );
        assert_eq!(held, in_order);
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
                noise: &[],
            };
            reference_line(&e, evidence, rules(None, None, most)).unwrap()
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
}
