//! The determinism line (`--deterministic`, issue 22): at temperature 0 the same prompt must
//! get the same answer every time. Every reply is compared with the first reply to its prompt
//! (its content, and its reasoning where there is one): a repeat, or a burst's stream against
//! the single-stream reply (batch invariance). Any trial that differs FAILs the line; no trial
//! is retried. Either way the line says how many trials it rests on, the mismatch rate with
//! its exact 95% interval, and the smallest per-trial fault rate these trials would have
//! caught with probability 0.95.
//!
//! The baseline-answers line sets each prompt's answer against the accepted baseline's
//! answer to it, where the two are comparable (the same model, temperature and seed).

use crate::archive::check::Check;
use std::collections::{HashMap, HashSet};

use super::evidence::{Baseline, BaselineEvidence, Evidence};
use super::words::{noun, trimmed};
use crate::archive::record::{AnswerPolicy, ReplyRecord, RunManifest};
use crate::archive::record::{Figures, Line, Status};
use crate::inert::quote;
use crate::judging::proportion::{clopper_pearson, detectable_rate};
use crate::judging::verdict::content::{push_escape, push_quoted};

/// The confidence of the mismatch rate's interval, and the probability of "would have
/// caught".
const CONFIDENCE: f64 = 0.95;

/// Characters quoted on either side of the first difference.
const CONTEXT: usize = 24;

/// The most differing trials a FAIL names after the first.
const NAMED: usize = 5;

/// Where two replies' texts first differ: in which text, at which character (from 1), and a
/// short quote of each around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Divergence {
    /// `content` or `reasoning`.
    pub part: &'static str,
    /// The first character that differs, from 1 (one past the shorter text's end when one is
    /// the other's start).
    pub at: usize,
    /// The reply's text around it, quoted.
    pub this: String,
    /// The reference's text around it, quoted.
    pub reference: String,
}

/// Where `a` first differs from `b`, or `None` when they are the same text.
pub(crate) fn divergence(a: &ReplyRecord, b: &ReplyRecord) -> Option<Divergence> {
    for (part, x, y) in [
        ("content", &a.content, &b.content),
        ("reasoning", &a.reasoning, &b.reasoning),
    ] {
        if x == y {
            continue;
        }
        let common = x.chars().zip(y.chars()).take_while(|(c, d)| c == d).count();
        return Some(Divergence {
            part,
            at: common + 1,
            this: excerpt(x, common),
            reference: excerpt(y, common),
        });
    }
    None
}

/// `s` around its character `at` (from 0): up to [`CONTEXT`] characters either side, quoted,
/// with … where the text goes on, control characters made visible.
fn excerpt(s: &str, at: usize) -> String {
    let start = at.saturating_sub(CONTEXT);
    let mut out = String::from("\"");
    if start > 0 {
        out.push('…');
    }
    let mut chars = s.chars().skip(start);
    for ch in chars.by_ref().take(at - start + CONTEXT) {
        match ch {
            // A quoted backslash is written twice, so a literal `\n` is not a newline's escape.
            '\\' => out.push_str("\\\\"),
            // Whitespace, but with escapes of their own.
            '\n' | '\r' => push_quoted(&mut out, ch),
            c if unseen(c) => push_escape(&mut out, c),
            c => push_quoted(&mut out, c),
        }
    }
    if chars.next().is_some() {
        out.push('…');
    }
    out.push('"');
    out
}

/// A character that prints as nothing, or as a space, or moves the text around it: two
/// quotes that differ only in one would look the same, and a bidirectional override would
/// reorder the report's line. Control characters are [`push_quoted`]'s.
fn unseen(c: char) -> bool {
    (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
        )
}

/// One trial that differed from its reference.
struct Mismatch<'a> {
    reply: &'a ReplyRecord,
    reference: &'a ReplyRecord,
    /// The trial's number among its prompt's, from 1.
    trial: usize,
    divergence: Divergence,
}

/// A trial's reply in a line: `reply 5 (trial 2 of "What is…")`, or for a burst's stream
/// `burst 1 stream 3 (reply 12; trial 4 of "What is…", in a batch)`.
fn trial_name(m: &Mismatch<'_>) -> String {
    let prompt = quote(&m.reply.prompt, 40);
    match m.reply.burst {
        None => format!("reply {} (trial {} of {prompt})", m.reply.index, m.trial),
        Some(b) => format!(
            "burst {} stream {} (reply {}; trial {} of {prompt}, in a batch)",
            b.round, b.stream, m.reply.index, m.trial
        ),
    }
}

/// A share as a short decimal, with at least two significant figures where it is small and
/// never 0 unless it is: 0.05, 0.1, 0.0004, 0.
fn decimal_share(x: f64) -> String {
    if x <= 0.0 {
        return "0".to_string();
    }
    let decimals = (3.0f64).max(1.0 - x.log10().floor()) as usize;
    trimmed(x, decimals)
}

/// A rate as a percentage with two figures where it is small: 26%, 9.5%, 3.0%.
fn percent(x: f64) -> String {
    if x >= 0.1 {
        format!("{:.0}%", x * 100.0)
    } else {
        format!("{:.1}%", x * 100.0)
    }
}

/// Each judged reply held to the first single-stream reply to its prompt, as
/// [`determinism_line`] counts them.
struct Trials<'a> {
    /// Each prompt's first single-stream reply, and how many replies were held to it.
    references: HashMap<&'a str, (&'a ReplyRecord, usize)>,
    /// Replies held to a first reply.
    trials: usize,
    /// Of them, burst streams.
    batched: usize,
    /// Failed replies: no trial.
    failed: usize,
    /// Burst streams whose prompt had no single-stream reply to hold them to.
    unheld: usize,
    /// The trials that differed, in order.
    mismatches: Vec<Mismatch<'a>>,
    /// Of them, burst streams.
    batched_mismatches: usize,
}

/// The trials of `replies`: single-stream replies first, then the bursts' streams, each in the
/// order made, each held to the first single-stream reply to its prompt.
fn hold_to_first_replies(replies: &[ReplyRecord]) -> Trials<'_> {
    let mut order: Vec<&ReplyRecord> = replies.iter().collect();
    order.sort_by_key(|r| (r.burst.is_some(), r.index));
    let mut references: HashMap<&str, (&ReplyRecord, usize)> = HashMap::new();
    let (mut trials, mut batched, mut failed, mut unheld) = (0, 0, 0, 0);
    let mut mismatches: Vec<Mismatch<'_>> = Vec::new();
    let mut batched_mismatches = 0;
    for r in order {
        if r.error.is_some() {
            // A failed reply's text is cut and already fails content: it is no trial.
            failed += 1;
            continue;
        }
        let Some((reference, seen)) = references.get_mut(r.prompt.as_str()) else {
            if r.burst.is_some() {
                unheld += 1;
            } else {
                references.insert(&r.prompt, (r, 0));
            }
            continue;
        };
        *seen += 1;
        trials += 1;
        batched += usize::from(r.burst.is_some());
        if let Some(divergence) = divergence(r, reference) {
            batched_mismatches += usize::from(r.burst.is_some());
            mismatches.push(Mismatch {
                reply: r,
                reference,
                trial: *seen,
                divergence,
            });
        }
    }
    Trials {
        references,
        trials,
        batched,
        failed,
        unheld,
        mismatches,
        batched_mismatches,
    }
}

/// What was not compared, as the line's tail: `failed` replies and `unheld` burst streams.
fn not_compared(failed: usize, unheld: usize) -> String {
    let mut not_compared = String::new();
    if failed > 0 {
        not_compared.push_str(&format!(
            "; {failed} failed {} not compared",
            noun(failed, "reply", "replies")
        ));
    }
    if unheld > 0 {
        not_compared.push_str(&format!(
            "; {unheld} burst {} not compared: {} prompt had no single-stream reply to hold {} to (give --replies at least the number of prompts)",
            noun(unheld, "stream", "streams"),
            if unheld == 1 { "its" } else { "their" },
            if unheld == 1 { "it" } else { "them" }
        ));
    }
    not_compared
}

/// The determinism line over the judged replies.
pub(crate) fn determinism_line(replies: &[ReplyRecord]) -> Line {
    // Single-stream replies first, then the bursts' streams, each in the order made. The
    // first single-stream reply to a prompt is its reference; a burst's stream is held to it
    // and to nothing else (held to another stream, a serve that answers otherwise in every
    // batch, the same way each time, would pass).
    let Trials {
        references,
        trials,
        batched,
        failed,
        unheld,
        mismatches,
        batched_mismatches,
    } = hold_to_first_replies(replies);
    let prompts = references.len();
    let repeated = references.values().filter(|(_, seen)| *seen > 0).count();
    let not_compared = not_compared(failed, unheld);
    if trials == 0 {
        return Line::new(
            Check::Determinism,
            Status::Inconclusive,
            format!(
                "no prompt was answered twice, so there was nothing to compare ({prompts} {} answered once{not_compared}): give --replies above the number of prompts",
                noun(prompts, "prompt", "prompts")
            ),
        )
        .with(Figures {
            trials: Some(0),
            ..Figures::default()
        });
    }
    let k = mismatches.len();
    let rate = k as f64 / trials as f64;
    let interval = clopper_pearson(k, trials, CONFIDENCE);
    let detectable = detectable_rate(trials, CONFIDENCE);
    let figures = Figures {
        trials: Some(trials),
        mismatches: Some(k),
        mismatch_rate: Some(rate),
        interval_95: interval.map(|(l, h)| [l, h]),
        detectable_rate: detectable,
        ..Figures::default()
    };
    let interval_text = interval.map_or_else(String::new, |(l, h)| {
        format!(", 95% interval {l:.3} to {h:.3}")
    });
    let kinds = trial_kinds(trials, batched, prompts, repeated);
    if mismatches.is_empty() {
        let caught = detectable.map_or_else(String::new, |d| {
            format!(
                "; these trials would have caught, with probability 0.95, a fault that shows in {} of trials or more",
                percent(d)
            )
        });
        return Line::new(
            Check::Determinism,
            Status::Ok,
            format!(
                "{trials} {} ({kinds}), all identical to the first reply to their prompt: 0 differed, q = 0{interval_text}{caught}{not_compared}",
                noun(trials, "trial", "trials")
            ),
        )
        .with(figures);
    }
    let mut text = format!(
        "{k} of {trials} trials ({kinds}) differed from the first reply to their prompt: q = {}{interval_text}",
        decimal_share(rate)
    );
    if batched > 0 {
        text.push_str(&format!(
            " ({batched_mismatches} of the {batched} in bursts)"
        ));
    }
    text.push_str(&differing_trials(&mismatches));
    text.push_str(&odd_first_words(&mismatches, &references));
    text.push_str(&not_compared);
    Line::new(Check::Determinism, Status::Fail, text).with(figures)
}

/// What the trials were, in the determinism line's words: repeats of how many prompts, the
/// bursts' streams apart where there were any, and the prompts answered only once.
fn trial_kinds(trials: usize, batched: usize, prompts: usize, repeated: usize) -> String {
    let once = if prompts > repeated {
        format!("; {} answered once", prompts - repeated)
    } else {
        String::new()
    };
    if batched == 0 {
        format!(
            "{trials} {} of {repeated} {}{once}",
            noun(trials, "repeat", "repeats"),
            noun(repeated, "prompt", "prompts")
        )
    } else {
        format!(
            "{} {} and {batched} {} in bursts, over {repeated} {}{once}",
            trials - batched,
            noun(trials - batched, "repeat", "repeats"),
            noun(batched, "stream", "streams"),
            noun(repeated, "prompt", "prompts")
        )
    }
}

/// The differing trials (one or more) as a FAIL names them: the first with where it differs
/// and both texts there, the next [`NAMED`] with where, and how many more.
fn differing_trials(mismatches: &[Mismatch<'_>]) -> String {
    let k = mismatches.len();
    let first = &mismatches[0];
    let d = &first.divergence;
    let mut text = format!(
        "; first {} differs from {} at character {} of the {}: {} against {}",
        trial_name(first),
        first.reference.name(),
        d.at,
        d.part,
        d.this,
        d.reference
    );
    let more: Vec<String> = mismatches[1..]
        .iter()
        .take(NAMED)
        .map(|m| {
            format!(
                "{} at character {} of the {}",
                trial_name(m),
                m.divergence.at,
                m.divergence.part
            )
        })
        .collect();
    if !more.is_empty() {
        text.push_str(&format!("; also {}", more.join(", ")));
    }
    if k - 1 > NAMED {
        text.push_str(&format!(" and {} more", k - 1 - NAMED));
    }
    text
}

/// The prompts whose first reply is the odd one out ([`odd_first_replies`]), the first
/// [`NAMED`] by name and how many more; empty where there are none.
fn odd_first_words<'a>(
    mismatches: &[Mismatch<'a>],
    references: &HashMap<&'a str, (&'a ReplyRecord, usize)>,
) -> String {
    let mut text = String::new();
    let odd = odd_first_replies(mismatches, references);
    for (prompt, later) in odd.iter().take(NAMED) {
        text.push_str(&format!(
            "; the first reply to {} is the odd one out: its {later} later replies all agree with each other (a cold first reply? --warmup makes replies before the judged ones)",
            quote(prompt, 40)
        ));
    }
    if odd.len() > NAMED {
        text.push_str(&format!(
            "; so is the first reply to {} more {}",
            odd.len() - NAMED,
            noun(odd.len() - NAMED, "prompt", "prompts")
        ));
    }
    text
}

/// The prompts whose every trial (two or more) differed from the first reply to it and agreed
/// with each other, with how many there were: the first reply is the odd one out, not the
/// rest. Still a FAIL (the first reply was the serve's answer too), but a different fault.
fn odd_first_replies<'a>(
    mismatches: &[Mismatch<'a>],
    references: &HashMap<&'a str, (&'a ReplyRecord, usize)>,
) -> Vec<(&'a str, usize)> {
    let mut by_prompt: HashMap<&str, Vec<&ReplyRecord>> = HashMap::new();
    for m in mismatches {
        by_prompt.entry(&m.reply.prompt).or_default().push(m.reply);
    }
    let mut odd: Vec<(&'a str, usize, usize)> = references
        .iter()
        .filter_map(|(prompt, (reference, trials))| {
            let differing = by_prompt.get(prompt)?;
            let agree = differing
                .iter()
                .all(|r| divergence(r, differing[0]).is_none());
            (*trials >= 2 && differing.len() == *trials && agree).then_some((
                *prompt,
                *trials,
                reference.index,
            ))
        })
        .collect();
    odd.sort_by_key(|&(_, _, first)| first);
    odd.into_iter().map(|(p, n, _)| (p, n)).collect()
}

/// The first single-stream reply to each prompt that did not fail (warm-ups left out), in
/// the order made.
pub fn first_answers(replies: &[ReplyRecord]) -> Vec<&ReplyRecord> {
    first_answers_where(replies, |_| true)
}

/// [`first_answers`] among the replies `keep` keeps: a prompt whose first reply it leaves out
/// is answered by its next.
pub fn first_answers_where(
    replies: &[ReplyRecord],
    keep: impl Fn(&ReplyRecord) -> bool,
) -> Vec<&ReplyRecord> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut singles: Vec<&ReplyRecord> = replies
        .iter()
        .filter(|r| r.error.is_none() && r.burst.is_none() && !r.set_apart() && keep(r))
        .collect();
    singles.sort_by_key(|r| r.index);
    singles
        .into_iter()
        .filter(|r| seen.insert(&r.prompt))
        .collect()
}

/// Why two runs' greedy answers cannot be held to each other, or `None` when they can: the
/// model (its files' hashes, or where neither side hashed one, the model name requested), the
/// temperature and the seed must be the same.
fn answers_incomparable(candidate: &RunManifest, baseline: &RunManifest) -> Option<String> {
    let hashes = |m: &RunManifest| -> Option<Vec<String>> {
        let p = m.provenance.as_ref()?;
        let mut h: Vec<String> = p.model_files.iter().map(|f| f.sha256.clone()).collect();
        h.sort();
        Some(h)
    };
    let mut why = Vec::new();
    match (hashes(candidate), hashes(baseline)) {
        (Some(c), Some(b)) if c.is_empty() && b.is_empty() => {
            if candidate.model != baseline.model {
                why.push(format!(
                    "no model file was hashed, and the model requested differs ({} here, {} at the baseline)",
                    candidate.model.as_deref().unwrap_or("none"),
                    baseline.model.as_deref().unwrap_or("none")
                ));
            }
        }
        (Some(c), Some(b)) if c != b => why.push("the model files' hashes differ".to_string()),
        (Some(_), Some(_)) => {}
        _ => why.push(
            "a run from before model files were hashed cannot show it ran the same model"
                .to_string(),
        ),
    }
    // What else shapes a greedy answer: how long it may be, and the rest of the body.
    let max_tokens = |m: &RunManifest, prompt: &str| m.max_tokens_for(prompt);
    let show_max = |n: Option<u64>| n.map_or("unrecorded".to_string(), |n| n.to_string());
    if let Some(p) = candidate.prompts.iter().find(|p| {
        baseline.prompts.iter().any(|q| q.prompt == p.prompt)
            && max_tokens(candidate, &p.prompt) != max_tokens(baseline, &p.prompt)
    }) {
        why.push(format!(
            "max_tokens of {} {} here, {} at the baseline",
            quote(&p.prompt, 40),
            show_max(max_tokens(candidate, &p.prompt)),
            show_max(max_tokens(baseline, &p.prompt))
        ));
    }
    let rest_of_body = |m: &RunManifest| {
        let mut body = m.extra_body.clone().unwrap_or_default();
        body.remove("temperature");
        body.remove("seed");
        serde_json::Value::Object(body)
    };
    if rest_of_body(candidate) != rest_of_body(baseline) {
        why.push(format!(
            "the rest of the request body {} here, {} at the baseline",
            rest_of_body(candidate),
            rest_of_body(baseline)
        ));
    }
    let (c, b) = (candidate.sampling(), baseline.sampling());
    let show = |t: Option<f64>| t.map_or("not a number".to_string(), |t| t.to_string());
    if c.temperature != b.temperature {
        why.push(format!(
            "temperature {} here, {} at the baseline",
            show(c.temperature),
            show(b.temperature)
        ));
    }
    if c.seed != b.seed {
        let show = |s: Option<u64>| s.map_or("none".to_string(), |s| s.to_string());
        why.push(format!(
            "seed {} here, {} at the baseline",
            show(c.seed),
            show(b.seed)
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// The baseline-answers line, when a baseline was asked for: each prompt's first answer
/// against the baseline's first answer to it.
pub(crate) fn baseline_answers_line(e: &Evidence<'_>, policy: AnswerPolicy) -> Option<Line> {
    let exact = policy == AnswerPolicy::Exact;
    let said = |s: Status| if exact { s } else { Status::Info };
    let hint = if exact {
        ""
    } else {
        " (information: --baseline-answers exact makes a difference a FAIL)"
    };
    let (candidate, baseline): (&RunManifest, &Baseline<'_>) = match &e.baseline {
        BaselineEvidence::NotAsked => return None,
        BaselineEvidence::Missing(why) => {
            return Some(Line::new(
                Check::BaselineAnswers,
                said(Status::Inconclusive),
                format!("not compared: {why}"),
            ))
        }
        BaselineEvidence::Recorded {
            candidate,
            baseline,
        } => (candidate, baseline),
    };
    if let Some(why) = answers_incomparable(candidate, baseline.manifest) {
        // As the baseline lines hold: a gate asked to compare the incomparable must not pass.
        return Some(Line::new(
            Check::BaselineAnswers,
            said(Status::Fail),
            format!(
                "the answers are not comparable with the baseline {}'s: {why}{hint}",
                baseline.name
            ),
        ));
    }
    let (compared, missing, diverged) = first_answers_against(e.replies, baseline.replies);
    let missing_text = if missing == 0 {
        String::new()
    } else {
        format!(
            "; {missing} {} the baseline did not answer",
            noun(missing, "prompt", "prompts")
        )
    };
    let figures = Figures {
        trials: Some(compared),
        mismatches: Some(diverged.len()),
        ..Figures::default()
    };
    if compared == 0 {
        return Some(
            Line::new(
                Check::BaselineAnswers,
                said(Status::Inconclusive),
                format!(
                    "no prompt was answered on both sides: nothing to compare with the baseline {}{missing_text}",
                    baseline.name
                ),
            )
            .with(figures),
        );
    }
    if diverged.is_empty() {
        return Some(
            Line::new(
                Check::BaselineAnswers,
                said(Status::Ok),
                format!(
                    "{compared} {} answered exactly as the baseline {} answered {}{missing_text}",
                    noun(compared, "prompt", "prompts"),
                    baseline.name,
                    if compared == 1 { "it" } else { "them" }
                ),
            )
            .with(figures),
        );
    }
    Some(
        Line::new(
            Check::BaselineAnswers,
            said(Status::Fail),
            format!(
                "{} of {compared} {} diverge from the baseline {}'s answers: {}{missing_text}{hint}",
                diverged.len(),
                noun(compared, "prompt", "prompts"),
                baseline.name,
                diverged_answers(&diverged)
            ),
        )
        .with(figures),
    )
}

/// Each prompt's first answer in `ours` against the first answer to it in `theirs`: how many
/// were compared, how many `theirs` did not answer, and the answers that diverged, in order.
fn first_answers_against<'a>(
    ours: &'a [ReplyRecord],
    theirs: &[ReplyRecord],
) -> (usize, usize, Vec<(&'a ReplyRecord, Divergence)>) {
    let theirs: HashMap<&str, &ReplyRecord> = first_answers(theirs)
        .into_iter()
        .map(|r| (r.prompt.as_str(), r))
        .collect();
    let mut compared = 0;
    let mut missing = 0;
    let mut diverged: Vec<(&ReplyRecord, Divergence)> = Vec::new();
    for ours in first_answers(ours) {
        let Some(base) = theirs.get(ours.prompt.as_str()) else {
            missing += 1;
            continue;
        };
        compared += 1;
        if let Some(d) = divergence(ours, base) {
            diverged.push((ours, d));
        }
    }
    (compared, missing, diverged)
}

/// The diverged answers (one or more) as a FAIL names them: the first [`NAMED`] with where
/// each diverges and both texts there, and how many more.
fn diverged_answers(diverged: &[(&ReplyRecord, Divergence)]) -> String {
    let described: Vec<String> = diverged
        .iter()
        .take(NAMED)
        .map(|(r, d)| {
            format!(
                "{} ({}) diverges from the baseline at character {} of the {}: {} here, {} at the baseline",
                quote(&r.prompt, 40),
                r.name(),
                d.at,
                d.part,
                d.this,
                d.reference
            )
        })
        .collect();
    let more = if diverged.len() > NAMED {
        format!(" and {} more", diverged.len() - NAMED)
    } else {
        String::new()
    };
    format!("{}{more}", described.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{BurstSlot, Sampling};
    use crate::judging::verdict::{judge, Criteria, Floors, Outcome};

    const PARIS: &str = "What is the capital of France?";
    const FOUR: &str = "What is 2 + 2?";

    fn reply(index: usize, prompt: &str, content: &str) -> ReplyRecord {
        let mut r = ReplyRecord::new(index, prompt, None);
        r.content = content.to_string();
        r
    }

    fn in_burst(mut r: ReplyRecord, round: usize, stream: usize) -> ReplyRecord {
        r.burst = Some(BurstSlot { round, stream });
        r
    }

    /// Six replies over two prompts, alternating, all the same answer to each.
    fn steady() -> Vec<ReplyRecord> {
        (1..=6)
            .map(|i| {
                if i % 2 == 1 {
                    reply(i, PARIS, "Paris. ok ok ok")
                } else {
                    reply(i, FOUR, "2 + 2 = 4. ok")
                }
            })
            .collect()
    }

    #[test]
    fn identical_repeats_are_ok_and_say_what_the_trials_could_have_caught() {
        let line = determinism_line(&steady());
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        let f = line.figures.as_ref().unwrap();
        // 6 replies to 2 prompts: the first to each is the reference, 4 trials.
        assert_eq!((f.trials, f.mismatches), (Some(4), Some(0)));
        assert_eq!(f.mismatch_rate, Some(0.0));
        let (lo, hi) = clopper_pearson(0, 4, 0.95).unwrap();
        assert_eq!(f.interval_95, Some([lo, hi]));
        assert_eq!(f.detectable_rate, detectable_rate(4, 0.95));
        assert!(
            line.text.contains("4 trials (4 repeats of 2 prompts)"),
            "{}",
            line.text
        );
        assert!(
            line.text.contains("95% interval 0.000 to 0.602"),
            "{}",
            line.text
        );
        // 1 - 0.05^(1/4) = 0.527.
        assert!(
            line.text.contains("in 53% of trials or more"),
            "{}",
            line.text
        );
        // Nothing failed and nothing was left out: nothing said of it.
        assert!(line.text.ends_with("or more"), "{}", line.text);
    }

    #[test]
    fn one_reply_that_differs_fails_naming_it_its_trial_and_where() {
        let mut replies = steady();
        replies[4].content = "Paris. ok ko ok".to_string(); // reply 5: trial 2 of PARIS
        let line = determinism_line(&replies);
        assert_eq!(line.status, Status::Fail, "{}", line.text);
        let f = line.figures.as_ref().unwrap();
        assert_eq!((f.trials, f.mismatches), (Some(4), Some(1)));
        assert_eq!(f.mismatch_rate, Some(0.25));
        let (lo, hi) = clopper_pearson(1, 4, 0.95).unwrap();
        assert_eq!(f.interval_95, Some([lo, hi]));
        let t = &line.text;
        assert!(t.starts_with("1 of 4 trials"), "{t}");
        assert!(t.contains("q = 0.25"), "{t}");
        assert!(
            t.contains("reply 5 (trial 2 of \"What is the capital of France?\") differs from reply 1 at character 11 of the content"),
            "{t}"
        );
        assert!(
            t.contains("\"Paris. ok ko ok\" against \"Paris. ok ok ok\""),
            "{t}"
        );
        // No bursts, no word of them.
        assert!(!t.contains("burst"), "{t}");
    }

    #[test]
    fn six_differing_trials_are_all_named_with_nothing_more_to_count() {
        let mut replies: Vec<ReplyRecord> = (1..=8).map(|i| reply(i, PARIS, "Paris.")).collect();
        for r in &mut replies[2..] {
            r.content = format!("Paris{}", r.index);
        }
        let t = determinism_line(&replies).text;
        assert!(t.starts_with("6 of 7 trials"), "{t}");
        assert!(t.contains("reply 8 (trial 7"), "{t}");
        assert!(!t.contains("more"), "{t}");
    }

    #[test]
    fn the_first_difference_among_many_is_named_first_and_the_rest_counted() {
        let mut replies: Vec<ReplyRecord> = (1..=20).map(|i| reply(i, PARIS, "Paris.")).collect();
        for i in [3, 7, 8, 9, 10, 11, 12, 13] {
            replies[i - 1].content = format!("Paris{i}");
        }
        let line = determinism_line(&replies);
        let t = &line.text;
        assert!(t.starts_with("8 of 19 trials"), "{t}");
        assert!(t.contains("first reply 3 (trial 2 of"), "{t}");
        assert!(t.contains("also reply 7 (trial 6"), "{t}");
        // Five more named, two counted.
        assert!(
            t.contains("reply 11 (trial 10") && !t.contains("reply 12 ("),
            "{t}"
        );
        assert!(t.contains(" and 2 more"), "{t}");
    }

    #[test]
    fn a_first_reply_that_the_rest_all_disagree_with_is_said_to_be_the_odd_one_out() {
        let mut replies: Vec<ReplyRecord> = (1..=5).map(|i| reply(i, PARIS, "Paris.")).collect();
        replies[0].content = "Paris, France.".into();
        replies.push(reply(6, FOUR, "4"));
        replies.push(reply(7, FOUR, "5"));
        let line = determinism_line(&replies);
        assert_eq!(line.status, Status::Fail);
        let t = &line.text;
        assert!(t.starts_with("5 of 5 trials"), "{t}");
        assert!(
            t.contains("the first reply to \"What is the capital of France?\" is the odd one out: its 4 later replies all agree"),
            "{t}"
        );
        // One trial is not enough to say which side is odd.
        assert!(!t.contains("\"What is 2 + 2?\" is the odd one out"), "{t}");
        // Many such prompts: five named, the rest counted (the line stays short).
        let many: Vec<ReplyRecord> = (0..8)
            .flat_map(|p| {
                let prompt = format!("prompt {p}");
                let mut first = reply(0, &prompt, "cold");
                first.index = 3 * p + 1;
                let warm: Vec<ReplyRecord> =
                    (2..4).map(|i| reply(3 * p + i, &prompt, "warm")).collect();
                std::iter::once(first).chain(warm)
            })
            .collect();
        let t = determinism_line(&many).text;
        assert_eq!(t.matches("is the odd one out").count(), NAMED, "{t}");
        assert!(
            t.contains("; so is the first reply to 3 more prompts"),
            "{t}"
        );
        // Later replies that disagree among themselves too: no such note.
        replies[4].content = "Lyon.".into();
        let line = determinism_line(&replies);
        assert!(!line.text.contains("odd one out"), "{}", line.text);
    }

    #[test]
    fn reasoning_is_compared_too() {
        let mut replies = steady();
        for r in &mut replies {
            r.reasoning = "think think".to_string();
        }
        replies[3].reasoning = "think thonk".to_string();
        let line = determinism_line(&replies);
        assert_eq!(line.status, Status::Fail);
        assert!(
            line.text.contains("reply 4 (trial 1 of \"What is 2 + 2?\") differs from reply 2 at character 9 of the reasoning"),
            "{}",
            line.text
        );
    }

    #[test]
    fn a_burst_that_answers_otherwise_than_the_single_stream_fails_batch_invariance() {
        let mut replies = steady();
        replies.push(in_burst(reply(7, PARIS, "Paris. ok ok ok"), 1, 1));
        replies.push(in_burst(reply(8, FOUR, "2 + 2 = 5. ok"), 1, 2));
        let line = determinism_line(&replies);
        assert_eq!(line.status, Status::Fail, "{}", line.text);
        let t = &line.text;
        assert!(
            t.contains("4 repeats and 2 streams in bursts, over 2 prompts"),
            "{t}"
        );
        assert!(t.contains("(1 of the 2 in bursts)"), "{t}");
        assert!(
            t.contains("burst 1 stream 2 (reply 8; trial 3 of \"What is 2 + 2?\", in a batch) differs from reply 2 at character 9"),
            "{t}"
        );
    }

    #[test]
    fn bursts_are_held_to_the_single_stream_reply_even_when_listed_first() {
        // An archive's order is not the rule: the single-stream reply is the reference.
        let replies = vec![
            in_burst(reply(2, PARIS, "Lyon."), 1, 1),
            reply(1, PARIS, "Paris."),
        ];
        let line = determinism_line(&replies);
        assert!(
            line.text.contains("burst 1 stream 1 (reply 2; trial 1")
                && line.text.contains("differs from reply 1"),
            "{}",
            line.text
        );
    }

    #[test]
    fn a_burst_stream_whose_prompt_had_no_single_stream_reply_is_not_compared() {
        // Held to the first burst stream instead, a serve that answers otherwise in every
        // batch, the same way each time, would pass batch invariance.
        let replies = vec![
            reply(1, PARIS, "Paris."),
            in_burst(reply(2, PARIS, "Paris."), 1, 1),
            in_burst(reply(3, FOUR, "5"), 1, 2),
            in_burst(reply(4, FOUR, "5"), 2, 1),
        ];
        let line = determinism_line(&replies);
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        assert_eq!(line.figures.as_ref().unwrap().trials, Some(1));
        assert!(
            line.text.ends_with("; 2 burst streams not compared: their prompt had no single-stream reply to hold them to (give --replies at least the number of prompts)"),
            "{}",
            line.text
        );
        // None held to a single stream at all: nothing to judge.
        let line = determinism_line(&replies[2..]);
        assert_eq!(line.status, Status::Inconclusive, "{}", line.text);
    }

    #[test]
    fn the_prompts_answered_once_are_told_from_those_repeated() {
        let replies = vec![
            reply(1, PARIS, "Paris."),
            reply(2, FOUR, "4"),
            reply(3, "What is hot?", "Cold."),
            reply(4, PARIS, "Paris."),
        ];
        let line = determinism_line(&replies);
        assert!(
            line.text
                .starts_with("1 trial (1 repeat of 1 prompt; 2 answered once)"),
            "{}",
            line.text
        );
    }

    #[test]
    fn small_rates_keep_their_figures() {
        assert_eq!(decimal_share(0.05), "0.05");
        assert_eq!(decimal_share(0.25), "0.25");
        assert_eq!(decimal_share(1.0), "1");
        assert_eq!(decimal_share(0.0), "0");
        // 1 of 2,500 trials is not 0.
        assert_eq!(decimal_share(1.0 / 2500.0), "0.0004");
        assert_eq!(decimal_share(1.0 / 3000.0), "0.00033");
    }

    #[test]
    fn failed_replies_not_compared_are_counted_in_english() {
        // Once "2 failed replys" (issue 33's review).
        assert_eq!(not_compared(1, 0), "; 1 failed reply not compared");
        assert!(not_compared(2, 0).starts_with("; 2 failed replies not compared"));
        assert_eq!(not_compared(0, 0), "");
    }

    #[test]
    fn failed_replies_are_no_trials_and_a_failed_first_reply_is_no_reference() {
        let mut replies = steady();
        replies[0].error = Some("the stream stalled".into());
        replies[0].content = "Pa".into();
        let line = determinism_line(&replies);
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        // Reply 3 is PARIS's reference now: 3 trials.
        assert_eq!(line.figures.as_ref().unwrap().trials, Some(3));
        assert!(
            line.text.ends_with("; 1 failed reply not compared"),
            "{}",
            line.text
        );
    }

    #[test]
    fn no_prompt_answered_twice_is_inconclusive() {
        let replies = vec![reply(1, PARIS, "Paris."), reply(2, FOUR, "4")];
        let line = determinism_line(&replies);
        assert_eq!(line.status, Status::Inconclusive);
        assert!(
            line.text.contains("2 prompts answered once"),
            "{}",
            line.text
        );
        assert_eq!(line.figures.as_ref().unwrap().trials, Some(0));
        assert_eq!(determinism_line(&[]).status, Status::Inconclusive);
    }

    #[test]
    fn where_texts_diverge() {
        let d = |a: &str, b: &str| divergence(&reply(1, PARIS, a), &reply(2, PARIS, b));
        assert_eq!(d("same", "same"), None);
        let x = d("Paris.", "Paris. ok").unwrap();
        assert_eq!((x.part, x.at), ("content", 7));
        assert_eq!(
            (x.this.as_str(), x.reference.as_str()),
            ("\"Paris.\"", "\"Paris. ok\"")
        );
        // Characters, not bytes.
        assert_eq!(d("éa", "éb").unwrap().at, 2);
        // Far into a long text: a window around the difference, control characters shown.
        let long_a = format!("{}X\u{1b}[31m{}", "a".repeat(100), "z".repeat(100));
        let long_b = format!("{}Y{}", "a".repeat(100), "z".repeat(100));
        let x = d(&long_a, &long_b).unwrap();
        assert_eq!(x.at, 101);
        assert!(
            x.this.starts_with("\"…aaaa") && x.this.ends_with("…\""),
            "{}",
            x.this
        );
        assert!(x.this.contains("X\\u{1b}[31m"), "{}", x.this);
        assert!(!x.this.contains('\u{1b}'));
        assert_eq!(x.this.chars().filter(|c| *c == 'a').count(), CONTEXT);
    }

    #[test]
    fn characters_that_look_like_nothing_are_shown_in_the_quotes() {
        let d = |a: &str, b: &str| divergence(&reply(1, PARIS, a), &reply(2, PARIS, b)).unwrap();
        // A zero-width space, a no-break space, a byte-order mark: each would quote as its
        // neighbour does.
        for (odd, shown) in [
            ("\u{200b}", "\\u{200b}"),
            ("\u{a0}", "\\u{a0}"),
            ("\u{feff}", "\\u{feff}"),
        ] {
            let x = d(&format!("Paris{odd}."), "Paris.");
            assert_eq!(x.at, 6);
            assert!(
                x.this.contains(shown) && !x.this.contains(odd),
                "{}",
                x.this
            );
        }
        // A bidirectional override never reaches the terminal.
        let x = d("Paris\u{202e}.sk", "Paris.");
        assert!(!x.this.contains('\u{202e}'), "{}", x.this);
        // A literal backslash-n is not a newline.
        let (lit, nl) = (d("a\\nb", "a\nb").this, d("a\nb", "a\\nb").this);
        assert_ne!(lit, nl);
        assert_eq!(lit, "\"a\\\\nb\"");
        assert_eq!(nl, "\"a\\nb\"");
    }

    // ---- Against the baseline's answers -------------------------------------------------

    fn manifest(model_sha: Option<&str>, seed: Option<u64>) -> RunManifest {
        let mut m: RunManifest = serde_json::from_value(serde_json::json!({
            "schema": 1, "tool_version": "t", "argv": [], "url": "http://127.0.0.1:1",
            "prompts": [], "replies_planned": 1,
            "floors": {"floor": 1.0, "first_token_ms": 1.0},
            "limits": {"ready_timeout_s": 1.0, "grace_s": 1.0, "reply_timeout_s": 1.0},
            "host": "h", "started_utc": "", "clock": {"name": "CLOCK_MONOTONIC", "base_ns": 0},
            "serve_log_source": "none", "model": "m",
        }))
        .unwrap();
        if let Some(sha) = model_sha {
            m.provenance = Some(
                serde_json::from_value(serde_json::json!({
                    "tool_version": "t", "workload_sha256": "w",
                    "model_files": [{"path": "/m.gguf", "size": 1, "sha256": sha}],
                }))
                .unwrap(),
            );
        }
        m.sampling_sent = Some(Sampling {
            temperature: Some(0.0),
            seed,
        });
        m
    }

    fn answers_line(
        ours: &[ReplyRecord],
        theirs: &[ReplyRecord],
        cand: &RunManifest,
        base: &RunManifest,
        policy: AnswerPolicy,
    ) -> Line {
        let startup = crate::archive::record::Startup::Ready {
            after_ms: 1.0,
            probe: String::new(),
            not_ready_answers: 0,
        };
        let e = Evidence {
            baseline: BaselineEvidence::Recorded {
                candidate: cand,
                baseline: Baseline {
                    name: "runs/rc2",
                    manifest: base,
                    replies: theirs,
                    load: None,
                },
            },
            ..Evidence::of(ours, &startup)
        };
        baseline_answers_line(&e, policy).unwrap()
    }

    #[test]
    fn the_same_answers_as_the_baseline_are_ok_when_exact_and_info_otherwise() {
        let m = manifest(Some("abc"), Some(42));
        let line = answers_line(&steady(), &steady(), &m, &m, AnswerPolicy::Exact);
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        let f = line.figures.as_ref().unwrap();
        assert_eq!((f.trials, f.mismatches), (Some(2), Some(0)));
        assert!(
            line.text
                .starts_with("2 prompts answered exactly as the baseline runs/rc2 answered them"),
            "{}",
            line.text
        );
        let line = answers_line(&steady(), &steady(), &m, &m, AnswerPolicy::Info);
        assert_eq!(line.status, Status::Info);
    }

    #[test]
    fn an_answer_that_diverges_from_the_baseline_says_where_and_fails_only_when_exact() {
        let m = manifest(Some("abc"), None);
        let mut ours = steady();
        // Every answer to FOUR differs; only the first is compared with the baseline.
        for r in ours.iter_mut().filter(|r| r.prompt == FOUR) {
            r.content = "2 + 2 = 5. ok".into();
        }
        let line = answers_line(&ours, &steady(), &m, &m, AnswerPolicy::Exact);
        assert_eq!(line.status, Status::Fail, "{}", line.text);
        let t = &line.text;
        assert!(
            t.starts_with("1 of 2 prompts diverge from the baseline runs/rc2's answers"),
            "{t}"
        );
        assert!(
            t.contains("\"What is 2 + 2?\" (reply 2) diverges from the baseline at character 9 of the content: \"2 + 2 = 5. ok\" here, \"2 + 2 = 4. ok\" at the baseline"),
            "{t}"
        );
        assert_eq!(line.figures.as_ref().unwrap().mismatches, Some(1));
        let line = answers_line(&ours, &steady(), &m, &m, AnswerPolicy::Info);
        assert_eq!(line.status, Status::Info);
        assert!(
            line.text.contains("--baseline-answers exact makes"),
            "{}",
            line.text
        );
    }

    #[test]
    fn answers_of_another_model_seed_or_an_unhashed_run_are_not_comparable() {
        let m = manifest(Some("abc"), Some(1));
        for (other, why) in [
            (
                manifest(Some("def"), Some(1)),
                "the model files' hashes differ",
            ),
            (
                manifest(Some("abc"), Some(2)),
                "seed 1 here, 2 at the baseline",
            ),
            (
                manifest(None, Some(1)),
                "a run from before model files were hashed",
            ),
        ] {
            let line = answers_line(&steady(), &steady(), &m, &other, AnswerPolicy::Exact);
            assert_eq!(line.status, Status::Fail, "{}", line.text);
            assert!(
                line.text.contains("not comparable") && line.text.contains(why),
                "{}",
                line.text
            );
            let line = answers_line(&steady(), &steady(), &m, &other, AnswerPolicy::Info);
            assert_eq!(line.status, Status::Info, "{}", line.text);
        }
        // Sampled at the baseline: another temperature.
        let mut hot = manifest(Some("abc"), Some(1));
        hot.sampling_sent = Some(Sampling {
            temperature: Some(0.7),
            seed: Some(1),
        });
        let line = answers_line(&steady(), &steady(), &m, &hot, AnswerPolicy::Exact);
        assert!(
            line.text
                .contains("temperature 0 here, 0.7 at the baseline"),
            "{}",
            line.text
        );
    }

    #[test]
    fn answers_to_another_length_or_body_are_not_comparable() {
        let mut a = manifest(Some("abc"), None);
        a.prompts = vec![crate::prompts::Prompt::plain(PARIS)];
        a.settings = Some(serde_json::json!({"max_tokens": 64}));
        let mut b = a.clone();
        b.settings = Some(serde_json::json!({"max_tokens": 32}));
        let line = answers_line(&steady(), &steady(), &a, &b, AnswerPolicy::Exact);
        assert!(
            line.text.contains(
                "max_tokens of \"What is the capital of France?\" 64 here, 32 at the baseline"
            ),
            "{}",
            line.text
        );
        // A prompt's own max_tokens wins over the run's.
        b.prompts[0].max_tokens = Some(64);
        let line = answers_line(&steady(), &steady(), &a, &b, AnswerPolicy::Exact);
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        // The rest of the body, temperature and seed aside (they are compared as such).
        b.extra_body = serde_json::from_str(r#"{"cache_prompt": false}"#).unwrap();
        let line = answers_line(&steady(), &steady(), &a, &b, AnswerPolicy::Exact);
        assert!(
            line.text.contains(
                r#"the rest of the request body {} here, {"cache_prompt":false} at the baseline"#
            ),
            "{}",
            line.text
        );
        b.extra_body = serde_json::from_str(r#"{"seed": 5}"#).unwrap();
        b.sampling_sent = None;
        let line = answers_line(&steady(), &steady(), &a, &b, AnswerPolicy::Exact);
        assert!(
            !line.text.contains("the rest of the request body"),
            "{}",
            line.text
        );
        assert!(
            line.text.contains("seed none here, 5 at the baseline"),
            "{}",
            line.text
        );
    }

    #[test]
    fn the_first_answer_held_to_the_baseline_is_a_judged_single_stream_one_that_did_not_fail() {
        let m = manifest(Some("abc"), None);
        // The baseline's first reply to FOUR failed, its second was a warm-up, its third a
        // burst's stream: its fourth is its answer.
        let mut theirs = vec![
            reply(1, FOUR, "2 +"),
            reply(2, FOUR, "2 + 2 = 22."),
            in_burst(reply(3, FOUR, "2 + 2 = 5."), 1, 1),
            reply(4, FOUR, "2 + 2 = 4. ok"),
            reply(5, PARIS, "Paris. ok ok ok"),
        ];
        theirs[0].error = Some("the stream broke".into());
        theirs[1].warmup = true;
        let line = answers_line(&steady(), &theirs, &m, &m, AnswerPolicy::Exact);
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        // The same three in front of the candidate's answer.
        let mut ours = theirs.clone();
        ours[3].content = "2 + 2 = 4! ok".into();
        let line = answers_line(&ours, &theirs, &m, &m, AnswerPolicy::Exact);
        assert_eq!(line.status, Status::Fail, "{}", line.text);
        assert!(
            line.text
                .contains("(reply 4) diverges from the baseline at character 10"),
            "{}",
            line.text
        );
    }

    #[test]
    fn one_side_with_model_files_and_the_other_without_is_not_comparable() {
        let hashed = manifest(Some("abc"), None);
        let mut none = hashed.clone();
        none.provenance.as_mut().unwrap().model_files.clear();
        for (a, b) in [(&hashed, &none), (&none, &hashed)] {
            let line = answers_line(&steady(), &steady(), a, b, AnswerPolicy::Exact);
            assert_eq!(line.status, Status::Fail, "{}", line.text);
            assert!(
                line.text.contains("the model files' hashes differ"),
                "{}",
                line.text
            );
        }
    }

    #[test]
    fn without_model_files_on_either_side_the_model_name_decides() {
        let mut a = manifest(Some("x"), None);
        a.provenance.as_mut().unwrap().model_files.clear();
        let mut b = a.clone();
        let line = answers_line(&steady(), &steady(), &a, &b, AnswerPolicy::Exact);
        assert_eq!(line.status, Status::Ok, "{}", line.text);
        b.model = Some("other".into());
        let line = answers_line(&steady(), &steady(), &a, &b, AnswerPolicy::Exact);
        assert_eq!(line.status, Status::Fail, "{}", line.text);
        assert!(
            line.text.contains("m here, other at the baseline"),
            "{}",
            line.text
        );
    }

    #[test]
    fn a_run_from_before_sampling_was_recorded_sent_temperature_zero_unless_its_body_said_otherwise(
    ) {
        let mut m = manifest(None, None);
        m.sampling_sent = None;
        assert_eq!(m.sampling().temperature, Some(0.0));
        m.extra_body = serde_json::from_str(r#"{"temperature": 0.8, "seed": 3}"#).unwrap();
        assert_eq!(
            m.sampling(),
            Sampling {
                temperature: Some(0.8),
                seed: Some(3)
            }
        );
    }

    // ---- In the verdict -------------------------------------------------------------------

    #[test]
    fn the_verdict_judges_determinism_only_when_asked_and_never_as_timing() {
        let startup = crate::archive::record::Startup::Ready {
            after_ms: 1.0,
            probe: String::new(),
            not_ready_answers: 0,
        };
        let mut replies = steady();
        replies[5].content = "2 + 2 = 4. ko".into();
        let floors = |deterministic| Floors {
            floor: 0.001,
            first_token_ms: 1e9,
            deterministic,
            busy_skip: Some(0.0),
            ..Floors::default()
        };
        let busy = crate::archive::record::LoadSnapshot {
            load1: 50.0,
            load5: 50.0,
            load15: 50.0,
            ncpu: 2,
            taken: String::new(),
            during: None,
        };
        let e = Evidence {
            load: Some(&busy),
            ..Evidence::of(&replies, &startup)
        };
        let v = judge(&e, &Criteria::new(floors(false)).unwrap());
        assert!(v.lines.iter().all(|l| l.check != "determinism"));
        // A busy box with --busy-skip 0 would SKIP a timing failure: a determinism FAIL stays.
        let v = judge(&e, &Criteria::new(floors(true)).unwrap());
        let line = v.lines.iter().find(|l| l.check == "determinism").unwrap();
        assert_eq!(line.status, Status::Fail);
        assert_eq!(v.outcome, Outcome::Fail);
    }
}
