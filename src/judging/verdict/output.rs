//! The output line (issue 32): degenerate text, recognised by itself, with no reference and no
//! expected pattern. A broken kernel rarely says something plausible and wrong; it loops to
//! max_tokens, stutters, prints bytes that are not text, answers every question alike, or never
//! stops. The content line's regex finds its word in all of those.
//!
//! The rules, each with its figure and threshold ([`OutputFloors`], docs/output.md):
//! - **a loop**: the reply's tail is one stretch of text repeated exactly, period 1 to
//!   [`MAX_PERIOD`] characters, at least `loop_repeats` times over at least `loop_share` of the
//!   reply. Text whose repeated units differ (list items, table rows, code lines) is no loop:
//!   the repeat must be exact, character for character.
//! - **a stutter**: one word said `stutter_run` times or more back to back, where the prompt
//!   does not say that run itself.
//! - **not text**: more than `not_text_share` of the reply's characters are U+FFFD
//!   replacement characters or control characters other than newline, tab and carriage return.
//! - **one answer to different questions**: the first answers to two prompts that expect
//!   different answers (or, where neither says, are different prompts) are the same text, or
//!   near it (word-trigram Jaccard similarity at or over `same_answer`).
//! - **never stops**: every reply to a prompt marked `"stops": true` (the built-in prompts are)
//!   was cut at max_tokens.
//! - **against a reference or baseline**: the mean answer length (characters) within
//!   `length_share` of theirs for the same prompts, and the share of replies that stopped by
//!   themselves no lower than theirs by more than `stop_margin`.
//!
//! An empty reply is the content line's failure, said there alone. Judged: never timing, never
//! excused by load. Pure: the replies and the settings in, the line out.

use crate::archive::check::Check;
use std::collections::{BTreeMap, HashSet};

use super::determinism::first_answers_where;
use super::words::plural;
use crate::archive::record::{
    Figures, Line, OutputFigures, OutputFloors, ReplyRecord, RunManifest, Status,
};
use crate::inert::{one_line, quote};

/// The longest loop period looked for, characters: a sentence or two.
pub const MAX_PERIOD: usize = 400;
/// The most characters of a reply's end the loop rule reads: a loop is at the tail.
const TAIL: usize = 8192;
/// Defaults of [`OutputFloors`].
pub const DEFAULT_LOOP_SHARE: f64 = 0.5;
/// See [`OutputFloors::loop_repeats`].
pub const DEFAULT_LOOP_REPEATS: usize = 3;
/// See [`OutputFloors::stutter_run`].
pub const DEFAULT_STUTTER_RUN: usize = 4;
/// See [`OutputFloors::not_text_share`].
pub const DEFAULT_NOT_TEXT_SHARE: f64 = 0.01;
/// See [`OutputFloors::same_answer`].
pub const DEFAULT_SAME_ANSWER: f64 = 0.9;
/// See [`OutputFloors::length_share`]: MLPerf's TEST09 holds the mean output length within
/// 10% of the reference's.
pub const DEFAULT_LENGTH_SHARE: f64 = 0.10;
/// See [`OutputFloors::stop_margin`].
pub const DEFAULT_STOP_MARGIN: f64 = 0.2;
/// A loop shorter than this many characters is met by chance ("ha ha ha").
const MIN_LOOP_CHARS: usize = 24;
/// The most failures a FAIL names.
const NAMED: usize = 3;

/// The thresholds as the line applies them.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// The least share of the reply a loop covers.
    pub loop_share: f64,
    /// The least repeats of a loop's unit.
    pub loop_repeats: usize,
    /// The least run of one word that is a stutter.
    pub stutter_run: usize,
    /// The largest share of characters that are not text.
    pub not_text_share: f64,
    /// The similarity from which two answers are one.
    pub same_answer: f64,
    /// The largest relative difference of mean length from the reference's.
    pub length_share: f64,
    /// The largest fall of the share of replies that stopped by themselves.
    pub stop_margin: f64,
}

impl Thresholds {
    /// The thresholds of `f`, defaults where it says none.
    pub fn of(f: &OutputFloors) -> Thresholds {
        Thresholds {
            loop_share: f.loop_share.unwrap_or(DEFAULT_LOOP_SHARE),
            loop_repeats: f.loop_repeats.unwrap_or(DEFAULT_LOOP_REPEATS),
            stutter_run: f.stutter_run.unwrap_or(DEFAULT_STUTTER_RUN),
            not_text_share: f.not_text_share.unwrap_or(DEFAULT_NOT_TEXT_SHARE),
            same_answer: f.same_answer.unwrap_or(DEFAULT_SAME_ANSWER),
            length_share: f.length_share.unwrap_or(DEFAULT_LENGTH_SHARE),
            stop_margin: f.stop_margin.unwrap_or(DEFAULT_STOP_MARGIN),
        }
    }
}

/// A loop at a reply's tail.
#[derive(Debug, Clone, PartialEq)]
pub struct Loop {
    /// The repeated unit's length, characters.
    pub period: usize,
    /// Whole repeats of it.
    pub repeats: usize,
    /// The share of the reply's characters the repeated stretch covers.
    pub share: f64,
    /// The unit.
    pub unit: String,
}

/// The shortest exact loop at the end of `text` that covers at least `t.loop_share` of it
/// with at least `t.loop_repeats` whole units, or `None`. For each period p the stretch is the
/// longest tail in which every character equals the one p before it, plus the first unit.
pub fn loop_in(text: &str, t: &Thresholds) -> Option<Loop> {
    let total = text.chars().count();
    // The tail alone is held as characters: a reply can be 256 KiB.
    let from = text
        .char_indices()
        .rev()
        .nth(TAIL - 1)
        .map_or(0, |(i, _)| i);
    let chars: Vec<char> = text[from..].chars().collect();
    let n = chars.len();
    for p in 1..=MAX_PERIOD.min(n / 2) {
        let run = (p..n)
            .rev()
            .take_while(|&i| chars[i] == chars[i - p])
            .count();
        let stretch = run + p;
        let repeats = stretch / p;
        if repeats < t.loop_repeats.max(2) || stretch < MIN_LOOP_CHARS {
            continue;
        }
        let share = stretch as f64 / total as f64;
        let unit: String = chars[n - stretch..n - stretch + p].iter().collect();
        if share >= t.loop_share && !unit.trim().is_empty() {
            return Some(Loop {
                period: p,
                repeats,
                share,
                unit,
            });
        }
    }
    None
}

/// A word said many times back to back.
#[derive(Debug, Clone, PartialEq)]
pub struct Stutter {
    /// The word.
    pub word: String,
    /// How many times in a row.
    pub run: usize,
}

/// The longest run of one whitespace-separated word in `text`, at least `t.stutter_run` long,
/// unless `prompt` says that run itself (a prompt that asks for "go go go go").
pub fn stutter_in(text: &str, prompt: &str, t: &Thresholds) -> Option<Stutter> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < words.len() {
        let run = words[i..].iter().take_while(|w| **w == words[i]).count();
        if best.is_none_or(|(_, b)| run > b) {
            best = Some((i, run));
        }
        i += run;
    }
    let (at, run) = best?;
    if run < t.stutter_run.max(2) {
        return None;
    }
    let said = vec![words[at]; t.stutter_run.max(2)].join(" ");
    let asked: String = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    (!asked.contains(&said)).then(|| Stutter {
        word: words[at].to_string(),
        run,
    })
}

/// Whether `c` is not text: U+FFFD, or a control character other than newline, tab and
/// carriage return.
fn not_text(c: char) -> bool {
    c == '\u{fffd}' || (c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
}

/// The share of `text`'s characters that are not text, and how many.
pub fn not_text_share(text: &str) -> (f64, usize) {
    let (mut bad, mut all) = (0, 0);
    for c in text.chars() {
        all += 1;
        bad += usize::from(not_text(c));
    }
    if all == 0 {
        (0.0, 0)
    } else {
        (bad as f64 / all as f64, bad)
    }
}

/// Word trigrams of `text`, lowercased (words for a text of under three), each as its hash:
/// sorted, once each.
fn shingles(text: &str) -> Vec<u64> {
    // Fixed, so a judge gives the same figure every time; two trigrams of an answer pair share a
    // hash by chance about once in 10^14 pairs of answers of 200 words.
    use std::hash::BuildHasher;
    let hasher = foldhash::fast::FixedState::with_seed(0x5151_6e67_6c65_7321);
    let words: Vec<String> = text.split_whitespace().map(|w| w.to_lowercase()).collect();
    let mut hashes: Vec<u64> = if words.len() < 3 {
        vec![hasher.hash_one(words.join(" "))]
    } else {
        // A word holds no whitespace, so three words are one trigram exactly when joined.
        words
            .windows(3)
            .map(|w| hasher.hash_one((&w[0], &w[1], &w[2])))
            .collect()
    };
    hashes.sort_unstable();
    hashes.dedup();
    hashes
}

/// An answer as [`similarity`] reads it: its text normalised (whitespace and case aside) and
/// its word trigrams, made once an answer. Trigrams are held as sorted hashes, not texts: the
/// pairs of 2,000 answers are two million intersections (issue 52), each a merge of two lists
/// of numbers instead of a lookup of each text in a set of texts.
pub struct Shape {
    norm: String,
    shingles: Vec<u64>,
}

impl Shape {
    /// The shape of `text`.
    pub fn of(text: &str) -> Shape {
        Shape {
            norm: text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase(),
            shingles: shingles(text),
        }
    }
}

/// How alike two answers are: 1 for the same text (whitespace and case aside), else the
/// Jaccard similarity of their word trigrams.
pub fn similarity(a: &Shape, b: &Shape) -> f64 {
    if a.norm == b.norm {
        return 1.0;
    }
    let (x, y) = (&a.shingles, &b.shingles);
    let (mut i, mut j, mut both) = (0, 0, 0usize);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                both += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = x.len() + y.len() - both;
    if union == 0 {
        return 0.0;
    }
    both as f64 / union as f64
}

/// One judged reply's problem, as a FAIL names it.
fn named(r: &ReplyRecord, rule: &str, figure: String) -> String {
    format!("{} {rule} ({figure}): {}", r.name(), quote(&r.content, 60))
}

/// What the run is held to beside its own replies: the reference's or the baseline's answers.
#[derive(Debug, Clone, Copy)]
pub struct Against<'a> {
    /// What they are: "reference" or "baseline".
    pub kind: &'static str,
    /// Their directory, as given.
    pub name: &'a str,
    /// Their run.json.
    pub manifest: &'a RunManifest,
    /// Their replies.
    pub replies: &'a [ReplyRecord],
}

/// The judged replies the rules read: those that did not fail and have content.
fn readable(replies: &[ReplyRecord]) -> impl Iterator<Item = &ReplyRecord> {
    replies
        .iter()
        .filter(|r| !r.set_apart() && r.error.is_none() && !r.content.is_empty())
}

/// The output line over `replies` (the judged ones), the run's `manifest` (its prompts'
/// The rules read in each reply alone: a loop, a stutter, text that is not text; a FAIL for
/// each rule some reply breaks.
fn reply_rules(
    judged: &[&ReplyRecord],
    t: &Thresholds,
    figures: &mut OutputFigures,
    fails: &mut Vec<String>,
) {
    let (mut loops, mut stutters, mut garbled) = (Vec::new(), Vec::new(), Vec::new());
    for r in judged {
        if let Some(l) = loop_in(&r.content, t) {
            figures.loop_share_max = Some(figures.loop_share_max.unwrap_or(0.0).max(l.share));
            loops.push(named(
                r,
                "loops",
                format!(
                    "{} repeated {} times over {:.0}% of it, period {} characters",
                    quote(&l.unit, 24),
                    l.repeats,
                    l.share * 100.0,
                    l.period
                ),
            ));
        }
        if let Some(s) = stutter_in(&r.content, &r.prompt, t) {
            figures.stutter_run_max = figures.stutter_run_max.max(s.run);
            stutters.push(named(
                r,
                "stutters",
                format!("{} {} times in a row", quote(&s.word, 16), s.run),
            ));
        }
        let (share, count) = not_text_share(&r.content);
        figures.not_text_share_max = figures.not_text_share_max.max(share);
        if share > t.not_text_share {
            garbled.push(named(
                r,
                "is not text",
                format!(
                    "{count} replacement or control characters, {:.1}% of it",
                    share * 100.0
                ),
            ));
        }
    }
    figures.loops = loops.len();
    figures.stutters = stutters.len();
    figures.not_text = garbled.len();
    for (rule, found, limit) in [
        (
            "loop",
            &loops,
            format!(
                "a tail repeated {}+ times over {:.0}%+ of the reply",
                t.loop_repeats,
                t.loop_share * 100.0
            ),
        ),
        (
            "stutter",
            &stutters,
            format!("a word {}+ times in a row", t.stutter_run),
        ),
        (
            "not text",
            &garbled,
            format!("over {:.1}% not text", t.not_text_share * 100.0),
        ),
    ] {
        if !found.is_empty() {
            fails.push(format!(
                "{rule}: {} of {} replies ({limit}): {}{}",
                found.len(),
                judged.len(),
                found
                    .iter()
                    .take(NAMED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
                more(found.len())
            ));
        }
    }
}

/// One answer to different questions: the first answers with content to two prompts that
/// should differ, alike at [`Thresholds::same_answer`] or more.
fn same_answers(
    replies: &[ReplyRecord],
    t: &Thresholds,
    figures: &mut OutputFigures,
    fails: &mut Vec<String>,
) {
    // The first answer with content to each prompt.
    let firsts = first_answers_where(replies, |r| !r.content.is_empty());
    let shapes: Vec<Shape> = firsts.iter().map(|r| Shape::of(&r.content)).collect();
    // Pairs are counted, and only the first NAMED are written out: a serve that answers 2,000
    // prompts alike makes some two million pairs (issue 52's bench held them all, as text).
    let (mut pairs, mut named) = (0usize, Vec::new());
    for (i, a) in firsts.iter().enumerate() {
        for (j, b) in firsts.iter().enumerate().skip(i + 1) {
            // Two prompts that expect the same answer may well get it.
            let should_differ = match (a.expect.as_deref(), b.expect.as_deref()) {
                (Some(x), Some(y)) => x != y,
                _ => true,
            };
            if !should_differ {
                continue;
            }
            let s = similarity(&shapes[i], &shapes[j]);
            figures.same_answer_max = Some(figures.same_answer_max.unwrap_or(0.0).max(s));
            if s >= t.same_answer {
                pairs += 1;
                if named.len() < NAMED {
                    named.push(format!(
                        "{} and {} answered {} ({})",
                        quote(&a.prompt, 30),
                        quote(&b.prompt, 30),
                        quote(&a.content, 40),
                        if s == 1.0 {
                            "the same text".to_string()
                        } else {
                            format!("similarity {s:.2}")
                        }
                    ));
                }
            }
        }
    }
    figures.same_answers = pairs;
    if pairs > 0 {
        fails.push(format!(
            "one answer to different questions ({pairs} pairs of prompts at similarity {:.2}+): {}{}",
            t.same_answer,
            named.join("; "),
            more(pairs)
        ));
    }
}

/// Never stops: every reply to the prompts marked to stop cut at max_tokens (a FAIL); some of
/// them (a note). The share of replies that stopped by themselves, in the figures.
fn never_stops(
    judged: &[&ReplyRecord],
    manifest: Option<&RunManifest>,
    figures: &mut OutputFigures,
    fails: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let stops: HashSet<&str> = manifest
        .map(|m| {
            m.prompts
                .iter()
                .filter(|p| p.stops == Some(true))
                .map(|p| p.prompt.as_str())
                .collect()
        })
        .unwrap_or_default();
    let should_stop: Vec<&&ReplyRecord> = judged
        .iter()
        .filter(|r| stops.contains(r.prompt.as_str()))
        .collect();
    let cut = should_stop
        .iter()
        .filter(|r| r.finish_reason.as_deref() == Some("length"))
        .count();
    let stopped = judged
        .iter()
        .filter(|r| r.finish_reason.as_deref() == Some("stop"))
        .count();
    figures.stopped_share = (!judged.is_empty()).then(|| stopped as f64 / judged.len() as f64);
    if !should_stop.is_empty() {
        if cut == should_stop.len() {
            fails.push(format!(
                "never stops: all {} replies to prompts marked to stop were cut at max_tokens",
                should_stop.len()
            ));
        } else if cut > 0 {
            notes.push(format!(
                "{cut} of {} replies to prompts marked to stop were cut at max_tokens",
                should_stop.len()
            ));
        }
    }
}

/// expectations and `stops`), held to `against` where given. `enabled` false: said as info.
pub fn output_line(
    replies: &[ReplyRecord],
    manifest: Option<&RunManifest>,
    against: Option<Against<'_>>,
    floors: &OutputFloors,
) -> Line {
    let t = Thresholds::of(floors);
    let mut fails: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut figures = OutputFigures::default();
    let judged: Vec<&ReplyRecord> = readable(replies).collect();
    figures.replies = judged.len();

    reply_rules(&judged, &t, &mut figures, &mut fails);

    same_answers(replies, &t, &mut figures, &mut fails);

    never_stops(&judged, manifest, &mut figures, &mut fails, &mut notes);

    // Against the reference's or the baseline's answers.
    if let Some(a) = against {
        match against_line(replies, manifest, a, &t, &mut figures) {
            Ok((said, failed)) => {
                if failed {
                    fails.push(said);
                } else {
                    notes.push(said);
                }
            }
            Err(why) => notes.push(format!(
                "not comparable with the {} {}: {why}",
                a.kind,
                one_line(a.name)
            )),
        }
    }

    let mut text = format!(
        "{} judged: {} loops, {} stutters, {} not text, {} pairs of prompts answered alike",
        plural(judged.len(), "reply", "replies"),
        figures.loops,
        figures.stutters,
        figures.not_text,
        figures.same_answers,
    );
    if let Some(s) = figures.stopped_share {
        text.push_str(&format!("; {:.0}% stopped by themselves", s * 100.0));
    }
    for n in &notes {
        text.push_str(&format!("; {n}"));
    }
    let status = if !fails.is_empty() {
        text = format!("{}; {text}", fails.join("; "));
        if floors.off {
            text = format!("--output-checks off: {text}");
            Status::Info
        } else {
            Status::Fail
        }
    } else if judged.is_empty() {
        Status::Info
    } else if floors.off {
        text = format!("--output-checks off: {text}");
        Status::Info
    } else {
        Status::Ok
    };
    Line::new(Check::Output, status, text).with(Figures {
        output: Some(figures),
        ..Figures::default()
    })
}

fn more(n: usize) -> String {
    match n.saturating_sub(NAMED) {
        0 => String::new(),
        m => format!(" and {m} more"),
    }
}

/// Mean length and self-stopped share against `a`'s for the same prompts: what is said, and
/// whether it fails; `Err` why they cannot be compared.
fn against_line(
    replies: &[ReplyRecord],
    manifest: Option<&RunManifest>,
    a: Against<'_>,
    t: &Thresholds,
    figures: &mut OutputFigures,
) -> Result<(String, bool), String> {
    let named = format!("the {} {}", a.kind, one_line(a.name));
    let ours: Vec<&ReplyRecord> = readable(replies).collect();
    let theirs: Vec<&ReplyRecord> = readable(a.replies).collect();
    let prompts: HashSet<&str> = ours.iter().map(|r| r.prompt.as_str()).collect();
    let asked: HashSet<&str> = theirs.iter().map(|r| r.prompt.as_str()).collect();
    if prompts.is_empty() || theirs.is_empty() {
        return Err("no replies on one side".into());
    }
    // The first such prompt in the run's order: the line is a function of the records, never
    // of a hash set's order (run and judge must say the same).
    if let Some(p) = ours
        .iter()
        .map(|r| r.prompt.as_str())
        .find(|p| !asked.contains(p))
    {
        return Err(format!("{} was not asked there", quote(p, 40)));
    }
    if let Some(m) = manifest {
        if let Some(p) = m.prompts.iter().find(|p| {
            prompts.contains(p.prompt.as_str())
                && m.max_tokens_for(&p.prompt) != a.manifest.max_tokens_for(&p.prompt)
        }) {
            return Err(format!("another max_tokens for {}", quote(&p.prompt, 40)));
        }
    }
    // Each side's mean over the prompts both answered, each prompt weighing the same.
    let mean = |rs: &[&ReplyRecord]| -> f64 {
        // Summed in the prompts' order, so the figure is the same to the last bit each time.
        let mut by: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for r in rs.iter().filter(|r| prompts.contains(r.prompt.as_str())) {
            let e = by.entry(r.prompt.as_str()).or_default();
            e.0 += r.content.chars().count();
            e.1 += 1;
        }
        by.values().map(|(c, n)| *c as f64 / *n as f64).sum::<f64>() / by.len().max(1) as f64
    };
    let (here, there) = (mean(&ours), mean(&theirs));
    let stopped = |rs: &[&ReplyRecord]| {
        let of: Vec<_> = rs
            .iter()
            .filter(|r| prompts.contains(r.prompt.as_str()))
            .collect();
        of.iter()
            .filter(|r| r.finish_reason.as_deref() == Some("stop"))
            .count() as f64
            / of.len().max(1) as f64
    };
    let (stop_here, stop_there) = (stopped(&ours), stopped(&theirs));
    let ratio = if there > 0.0 { here / there } else { f64::NAN };
    figures.length_ratio = ratio.is_finite().then_some(ratio);
    let mut failed = Vec::new();
    // Within the share, the share itself included (1e-9 for 110/100's rounding).
    if !ratio.is_finite() || (ratio - 1.0).abs() > t.length_share + 1e-9 {
        failed.push(format!(
            "mean answer length {here:.0} characters, {} of {}'s {there:.0} (within {:.0}% passes)",
            if ratio.is_finite() {
                format!("{:.0}%", ratio * 100.0)
            } else {
                "none".to_string()
            },
            named,
            t.length_share * 100.0
        ));
    }
    if stop_here < stop_there - t.stop_margin - 1e-9 {
        failed.push(format!(
            "{:.0}% of replies stopped by themselves, against {:.0}% at {} (a fall of over {:.0} points fails)",
            stop_here * 100.0,
            stop_there * 100.0,
            named,
            t.stop_margin * 100.0
        ));
    }
    if failed.is_empty() {
        Ok((
            format!(
                "against {}: mean answer length {here:.0} characters ({:.0}% of its {there:.0}), {:.0}% stopped by themselves (it {:.0}%)",
                named,
                ratio * 100.0,
                stop_here * 100.0,
                stop_there * 100.0
            ),
            false,
        ))
    } else {
        Ok((format!("against {}: {}", named, failed.join("; ")), true))
    }
}

/// The bounds of the settings, as the flags hold them (a profile's or an archive's values are
/// held to the same): the first one out, in a sentence.
pub fn check(f: &OutputFloors) -> Result<(), String> {
    let shares = [
        ("--loop-share", f.loop_share),
        ("--not-text-share", f.not_text_share),
        ("--same-answer", f.same_answer),
        ("--length-share", f.length_share),
        ("--stop-margin", f.stop_margin),
    ];
    for (flag, v) in shares {
        if let Some(x) = v.filter(|x| !(0.0..=1.0).contains(x)) {
            return Err(format!("{flag} is a share from 0 to 1 (got {x})"));
        }
    }
    for (flag, v) in [
        ("--loop-repeats", f.loop_repeats),
        ("--stutter-run", f.stutter_run),
    ] {
        if let Some(n) = v.filter(|n| !(2..=100).contains(n)) {
            return Err(format!("{flag} is a count from 2 to 100 (got {n})"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Each rule at its boundary and beside its legitimate look-alikes; the mutant each test
    //! catches is named where it is not plain.
    use super::*;

    fn t() -> Thresholds {
        Thresholds::of(&OutputFloors::default())
    }

    fn reply(index: usize, prompt: &str, expect: Option<&str>, content: &str) -> ReplyRecord {
        let mut r = ReplyRecord::new(index, prompt, expect);
        r.content = content.to_string();
        r.finish_reason = Some("stop".into());
        r
    }

    #[test]
    fn a_tail_repeated_to_max_tokens_is_a_loop_with_its_period_and_share() {
        let text = format!("Paris.{}", " The sky is blue.".repeat(10));
        let l = loop_in(&text, &t()).unwrap();
        assert_eq!(l.period, 17);
        // The stretch reaches back to the "." before it: the unit is named from its start.
        assert_eq!(l.unit, ". The sky is blue");
        assert!(l.share > 0.9 && l.repeats == 10, "{l:?}");
        // A loop of one character.
        assert_eq!(loop_in(&"!".repeat(64), &t()).unwrap().period, 1);
        // A reply that ends mid-unit, as one cut at max_tokens does.
        let cut = format!(
            "Answer: {}Paris is the cap",
            "Paris is the capital. ".repeat(6)
        );
        assert_eq!(loop_in(&cut, &t()).unwrap().period, 22);
    }

    #[test]
    fn repeated_structure_whose_units_differ_is_no_loop() {
        let list: String = (1..=30).map(|i| format!("{i}. item\n")).collect();
        assert_eq!(loop_in(&list, &t()), None, "a numbered list");
        let table: String = [
            "| a | 1 |",
            "| b | 2 |",
            "| c | 3 |",
            "| d | 4 |",
            "| e | 5 |",
        ]
        .iter()
        .map(|r| format!("{r}\n"))
        .collect();
        assert_eq!(loop_in(&table, &t()), None, "table rows");
        let code = "fn a() {\n    x(1);\n}\nfn b() {\n    x(2);\n}\nfn c() {\n    x(3);\n}\n";
        assert_eq!(loop_in(code, &t()), None, "code");
        let twice = "Thank you very much. Thank you very much.";
        assert_eq!(loop_in(twice, &t()), None, "a phrase said twice");
        assert_eq!(
            loop_in("ha ha ha", &t()),
            None,
            "under the least loop length"
        );
    }

    #[test]
    fn the_loop_thresholds_hold_at_their_boundaries() {
        // Three repeats of a 10-character unit over exactly half the reply: a loop (mutants:
        // `>` for `>=` on the share or on the repeats).
        let unit = "abcdefghi ";
        let text = format!("{}{}", "x".repeat(30), unit.repeat(3));
        let l = loop_in(&text, &t()).unwrap();
        assert_eq!((l.repeats, l.share), (3, 0.5));
        // One character more of other text before it: under half.
        assert_eq!(loop_in(&format!("y{text}"), &t()), None);
        // Two repeats are a phrase said twice, whatever the share.
        let two = Thresholds {
            loop_repeats: 4,
            ..t()
        };
        assert_eq!(loop_in(&text, &two), None);
        // A unit of whitespace alone is layout, not a loop.
        assert_eq!(loop_in(&format!("Paris.{}", " ".repeat(60)), &t()), None);
    }

    #[test]
    fn a_word_four_times_in_a_row_is_a_stutter_unless_the_prompt_says_it() {
        let s = stutter_in("It is very very very very cold", "p", &t()).unwrap();
        assert_eq!((s.word.as_str(), s.run), ("very", 4));
        assert_eq!(stutter_in("It is very very very cold", "p", &t()), None);
        assert_eq!(
            stutter_in("go go go go", "Say \"go go go go\" and nothing else.", &t()),
            None
        );
        // The longest run is the one named.
        let s = stutter_in("a a a a b b b b b", "p", &t()).unwrap();
        assert_eq!((s.word.as_str(), s.run), ("b", 5));
    }

    #[test]
    fn replacement_and_control_characters_are_not_text_newlines_and_tabs_are() {
        assert_eq!(not_text_share("a\tb\nc\r\n"), (0.0, 0));
        let (share, n) = not_text_share("ab\u{fffd}\u{1}");
        assert_eq!((share, n), (0.5, 2));
        assert_eq!(not_text_share(""), (0.0, 0));
    }

    #[test]
    fn similarity_is_one_for_the_same_text_and_low_for_other_answers() {
        let sim = |a: &str, b: &str| similarity(&Shape::of(a), &Shape::of(b));
        assert_eq!(sim("Paris  is it.", "paris is it."), 1.0);
        assert!(sim("The capital is Paris.", "The opposite of hot is cold.") < 0.2);
        let a = "one two three four five six seven eight nine ten eleven twelve";
        let b = "one two three four five six seven eight nine ten eleven twelve thirteen";
        assert!(sim(a, b) >= 0.9);
    }

    fn line(replies: &[ReplyRecord], manifest: Option<&RunManifest>, f: &OutputFloors) -> Line {
        output_line(replies, manifest, None, f)
    }

    #[test]
    fn the_line_fails_naming_the_reply_the_rule_and_the_figure() {
        let looped = format!("Paris.{}", " Paris.".repeat(30));
        let replies = [reply(1, "p", None, &looped), reply(2, "q", None, "Cold.")];
        let l = line(&replies, None, &OutputFloors::default());
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text.contains("loop: 1 of 2 replies")
                && l.text.contains(
                    "reply 1 loops (\"Paris. \" repeated 30 times over 100% of it, period 7 characters)"
                ),
            "{}",
            l.text
        );
        assert!(
            l.text
                .contains("reply 1 stutters (\"Paris.\" 31 times in a row)"),
            "{}",
            l.text
        );
        let f = l.figures.unwrap().output.unwrap();
        assert_eq!((f.replies, f.loops), (2, 1));
        // Off: said as info, never failed.
        let off = OutputFloors {
            off: true,
            ..OutputFloors::default()
        };
        let l = line(&replies, None, &off);
        assert_eq!(l.status, Status::Info, "{}", l.text);
        assert!(
            l.text.starts_with("--output-checks off: loop:"),
            "{}",
            l.text
        );
    }

    #[test]
    fn one_answer_to_different_questions_fails_and_the_same_expectation_may_share_it() {
        let answer = "Paris 4 cold";
        let replies = [
            reply(1, "France?", Some("paris"), answer),
            reply(2, "2 + 2?", Some("4"), answer),
        ];
        let l = line(&replies, None, &OutputFloors::default());
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text
                .contains("one answer to different questions (1 pairs"),
            "{}",
            l.text
        );
        let same = [
            reply(1, "France?", Some("paris"), answer),
            reply(2, "Capital of France?", Some("paris"), answer),
        ];
        assert_eq!(
            line(&same, None, &OutputFloors::default()).status,
            Status::Ok
        );
        // Repeats of one prompt are the determinism line's, not this one's.
        let repeats = [reply(1, "p", None, answer), reply(2, "p", None, answer)];
        assert_eq!(
            line(&repeats, None, &OutputFloors::default()).status,
            Status::Ok
        );
    }

    fn manifest(stops: bool) -> RunManifest {
        let mut m: RunManifest = serde_json::from_value(serde_json::json!({
            "schema": 1, "tool_version": "t", "argv": [], "url": "http://127.0.0.1:1",
            "prompts": [{"prompt": "p"}, {"prompt": "q"}], "replies_planned": 2,
            "floors": {"floor": 1.0, "first_token_ms": 1.0},
            "limits": {"ready_timeout_s": 1.0, "grace_s": 1.0, "reply_timeout_s": 1.0},
            "host": "h", "started_utc": "", "clock": {"name": "CLOCK_MONOTONIC", "base_ns": 0},
            "serve_log_source": "none",
        }))
        .unwrap();
        for p in &mut m.prompts {
            p.stops = stops.then_some(true);
        }
        m
    }

    #[test]
    fn every_reply_cut_at_max_tokens_where_prompts_should_stop_never_stops() {
        let mut a = reply(1, "p", None, "A long answer");
        let mut b = reply(2, "q", None, "Another one");
        a.finish_reason = Some("length".into());
        b.finish_reason = Some("length".into());
        let cut = [a.clone(), b.clone()];
        let l = line(&cut, Some(&manifest(true)), &OutputFloors::default());
        assert!(l.text.contains("never stops: all 2 replies"), "{}", l.text);
        assert_eq!(l.status, Status::Fail);
        // Prompts not marked: a long answer may be cut.
        let l = line(&cut, Some(&manifest(false)), &OutputFloors::default());
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        // One of two cut: said, not failed.
        b.finish_reason = Some("stop".into());
        let l = line(&[a, b], Some(&manifest(true)), &OutputFloors::default());
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text
                .contains("1 of 2 replies to prompts marked to stop were cut"),
            "{}",
            l.text
        );
    }

    /// `n` characters of words that never repeat as a loop or a stutter.
    fn varied(n: usize, seed: u64) -> String {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ seed;
        let mut s = String::new();
        while s.chars().count() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push(char::from(b'a' + (x % 26) as u8));
            if x.is_multiple_of(5) {
                s.push(' ');
            }
        }
        s.chars().take(n).collect()
    }

    #[test]
    fn lengths_and_stops_against_a_reference_hold_to_their_shares() {
        let m = manifest(false);
        let theirs = [
            reply(1, "p", None, &varied(100, 1)),
            reply(2, "q", None, &varied(100, 2)),
        ];
        let against = Against {
            kind: "reference",
            name: "r",
            manifest: &m,
            replies: &theirs,
        };
        let judged = |len: usize| {
            let ours = [
                reply(1, "p", None, &varied(len, 3)),
                reply(2, "q", None, &varied(len, 4)),
            ];
            output_line(&ours, Some(&m), Some(against), &OutputFloors::default())
        };
        // 110 of 100: exactly at the 10% (mutant: `>=` for `>`).
        let l = judged(110);
        assert_eq!(l.status, Status::Ok, "{}", l.text);
        assert!(
            l.text
                .contains("mean answer length 110 characters (110% of its 100)"),
            "{}",
            l.text
        );
        let l = judged(111);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert_eq!(l.figures.unwrap().output.unwrap().length_ratio, Some(1.11));
        // Fewer replies that stopped by themselves than the reference by over 20 points.
        let mut cut = [
            reply(1, "p", None, &varied(100, 1)),
            reply(2, "q", None, &varied(100, 2)),
        ];
        cut[0].finish_reason = Some("length".into());
        let l = output_line(&cut, Some(&m), Some(against), &OutputFloors::default());
        assert!(
            l.text
                .contains("50% of replies stopped by themselves, against 100%"),
            "{}",
            l.text
        );
        // Another prompt: not comparable, said.
        let other = [reply(1, "z", None, "a")];
        let l = output_line(&other, Some(&m), Some(against), &OutputFloors::default());
        assert!(
            l.text.contains("not comparable with the reference r"),
            "{}",
            l.text
        );
    }

    #[test]
    fn against_a_reference_the_line_is_the_same_each_time_it_is_judged() {
        // Judging is a function of the records: the prompt named as not asked there is the
        // run's first such one, and the mean lengths are summed in one order (found by the
        // properties: a hash set's order once picked the prompt, 10 runs in 1,500).
        let m = manifest(false);
        let theirs = [reply(1, "p", None, &varied(100, 1))];
        let against = Against {
            kind: "reference",
            name: "r",
            manifest: &m,
            replies: &theirs,
        };
        let ours: Vec<ReplyRecord> = ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .enumerate()
            .map(|(i, p)| reply(i + 1, p, None, &varied(90, i as u64)))
            .collect();
        let first = output_line(&ours, Some(&m), Some(against), &OutputFloors::default());
        assert!(
            first.text.contains("\"a\" was not asked there"),
            "{}",
            first.text
        );
        for _ in 0..50 {
            let again = output_line(&ours, Some(&m), Some(against), &OutputFloors::default());
            assert_eq!(again, first);
        }
    }

    #[test]
    fn bounds_of_the_settings() {
        assert!(check(&OutputFloors::default()).is_ok());
        let bad = OutputFloors {
            loop_repeats: Some(1),
            ..OutputFloors::default()
        };
        assert!(check(&bad).unwrap_err().contains("--loop-repeats"));
        let bad = OutputFloors {
            not_text_share: Some(1.5),
            ..OutputFloors::default()
        };
        assert!(check(&bad).unwrap_err().contains("--not-text-share"));
    }
}
