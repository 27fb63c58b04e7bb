//! The baseline lines: the candidate's decode rate and first-token against an accepted
//! baseline run's, reply by reply (issue 18). Three words, with the numbers: FAIL (slower than
//! the baseline beyond noise), ok (a regression past `--max-regression` is ruled out) or
//! inconclusive (and about how many replies would decide).
//!
//! Comparability comes before statistics: a different model, workload or serve command is
//! FAIL "not comparable" (a gate asked to compare the incomparable must not pass); another
//! box (host, CPU, kernel, module or firmware) is inconclusive unless `--baseline-allow`
//! accepts it. The box's conditions on both sides are held equal: a FAIL on a busier box, or
//! an ok on a quieter one, is inconclusive. Never the other way round.

use super::conditions::Contention;
use super::criteria::Criteria;
use super::evidence::{BaselineEvidence, Evidence};
use crate::archive::check::Check;
use crate::archive::record::{Figures, Line, Status};
use crate::archive::record::{ReplyRecord, RunManifest};
use crate::judging::baseline::{
    judge_shift_in_groups, Decision, Judged, RepliesNeeded, ShiftError, Worse,
    DEFAULT_MAX_REGRESSION, DEFAULT_NOISE, FEWEST_REPLIES_A_SIDE,
};
use crate::judging::measure::measure;
use crate::judging::prompt_cache::served_from_cache;
use crate::judging::provenance::{differences, same_binary, without_port};

/// The two baseline lines, or none when no baseline was asked for.
pub(crate) fn baseline_lines(e: &Evidence<'_>, c: &Criteria) -> Vec<Line> {
    let floors = c.floors();
    let noise = floors.baseline_noise.unwrap_or(DEFAULT_NOISE);
    let max = floors.max_regression.unwrap_or(DEFAULT_MAX_REGRESSION);
    let checks = [
        (Check::BaselineRate, Worse::Lower),
        (Check::BaselineFirstToken, Worse::Higher),
    ];
    let (candidate, baseline) = match e.baseline {
        BaselineEvidence::NotAsked => return Vec::new(),
        BaselineEvidence::Missing(why) => {
            return checks
                .iter()
                .map(|(check, _)| {
                    Line::new(*check, Status::Inconclusive, format!("not judged: {why}"))
                })
                .collect()
        }
        BaselineEvidence::Recorded {
            candidate,
            baseline,
        } => (candidate, baseline),
    };
    // Comparability first.
    let comp = comparability(candidate, baseline.manifest);
    let incomparable = comp.incomparable;
    let other_box: Vec<String> = comp
        .other_box
        .into_iter()
        .filter(|(allow, _)| !floors.baseline_allow.iter().any(|a| a == allow))
        .map(|(_, said)| said)
        .collect();
    let notes = comp.notes;
    if !incomparable.is_empty() {
        let text = format!(
            "not comparable with the baseline {}: {}",
            baseline.name,
            incomparable.join("; ")
        );
        return checks
            .iter()
            .map(|(check, _)| Line::new(*check, Status::Fail, text.clone()))
            .collect();
    }
    let here = e.load.and_then(Contention::of);
    let there = baseline.load.and_then(Contention::of);
    checks
        .iter()
        .map(|&(check, worse)| {
            let compared = compare(e.replies, baseline.replies, worse, noise, max, baseline.name);
            let (judged, mut status, mut text) = match compared {
                Ok(c) => c,
                Err(why) => {
                    return Line::new(
                        check,
                        Status::Inconclusive,
                        format!("cannot compare with the baseline {}: {why}", baseline.name),
                    )
                }
            };
            if !other_box.is_empty() {
                if status != Status::Inconclusive {
                    status = Status::Inconclusive;
                }
                text.push_str(&format!(
                    "; inconclusive: another box than the baseline's ({}; --baseline-allow accepts such differences)",
                    other_box.join("; ")
                ));
            }
            if let (Some(h), Some(t)) = (here, there) {
                let (hv, tv) = (h.value(), t.value());
                let level = h.busy_level(None);
                let same_measure = std::mem::discriminant(&h) == std::mem::discriminant(&t);
                if same_measure && status == Status::Fail && hv > tv + level {
                    status = Status::Inconclusive;
                    text.push_str(&format!(
                        "; inconclusive: the box was busier than at the baseline ({} against {})",
                        short(&h),
                        short(&t)
                    ));
                } else if same_measure && status == Status::Ok && tv > hv + level {
                    status = Status::Inconclusive;
                    text.push_str(&format!(
                        "; inconclusive: the box was quieter than at the baseline ({} against {}), which can hide a regression",
                        short(&h),
                        short(&t)
                    ));
                }
            }
            for n in &notes {
                text.push_str(&format!("; {n}"));
            }
            let figures = judged.map_or_else(Figures::default, |j| Figures {
                ratio: Some(j.shift.ratio),
                interval_90: j.shift.interval.map(|i| [i.low, i.high]),
                correlation: j.shift.correlation.filter(|c| c.widened).map(|c| c.rho),
                values: Some(j.shift.candidate),
                baseline_values: Some(j.shift.baseline),
                ..Figures::default()
            });
            Line::new(check, status, text).with(figures)
        })
        .collect()
}

/// A contention figure in a few words: "CPU wait 31%", "load 1.40 per CPU".
fn short(c: &Contention) -> String {
    match *c {
        Contention::Wait(w) => format!("CPU wait {:.0}%", w * 100.0),
        Contention::LoadPerCpu(l) => format!("load {l:.2} per CPU"),
    }
}

/// The single-stream replies a comparison reads: a burst's streams share the serve with each
/// other, and their figures are not a single reply's, so the comparison is of the
/// single-stream replies alone, on both sides. The baseline's warm-ups are left out here (the
/// candidate's already are, by `judge`).
fn single(replies: &[ReplyRecord]) -> impl Iterator<Item = &ReplyRecord> + Clone {
    replies
        .iter()
        .filter(|r| r.error.is_none() && r.burst.is_none() && !r.set_apart())
}

/// Each reply's figure (the decode rate or the first-token time, where it has one) and its
/// prompt's group, in reply order.
fn figures<'a>(replies: impl Iterator<Item = &'a ReplyRecord>, worse: Worse) -> Figured {
    let mut out = Figured::default();
    for r in replies {
        let m = measure(r);
        let value = match worse {
            Worse::Lower => m.rate_tok_s,
            Worse::Higher => m.first_token_ms,
        };
        if let Some(v) = value.filter(|v| v.is_finite() && *v > 0.0) {
            out.values.push(v);
            out.groups.push(prompt_group(&r.prompt));
        }
    }
    out
}

/// One side's figures and, beside each, its prompt's group ([`prompt_group`]).
#[derive(Default)]
struct Figured {
    values: Vec<f64>,
    groups: Vec<usize>,
}

/// A number for a prompt's text, the same on both sides of a comparison and in every run:
/// std's SipHash with its fixed keys. Two prompts that collide are grouped as one, which only
/// leaves their levels in the figures as before.
fn prompt_group(prompt: &str) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    prompt.hash(&mut h);
    h.finish() as usize
}

/// Judge two sides' figures, with each reply's prompt as its group (the serial correlation is
/// estimated with each prompt's own level taken out: `judge_shift_in_groups`).
fn judge_figured(
    c: &Figured,
    b: &Figured,
    worse: Worse,
    noise: f64,
    max: f64,
) -> Result<Judged, ShiftError> {
    let groups = Some((&c.groups[..], &b.groups[..]));
    judge_shift_in_groups(&c.values, &b.values, groups, worse, noise, max)
}

/// A comparison's result: the judgement the line's figures come from (none when no kind of
/// prompt had enough replies to compare), the status and the text.
type Compared = (Option<Judged>, Status, String);

/// Compare the candidate's replies with the baseline's for the figure that gets worse the
/// `worse` way.
///
/// The first token is compared like with like (issue 37, item 3): where either side has a
/// reply whose prompt the cache served ([`served_from_cache`]), cold prompts are compared with
/// cold and cached with cached, each kind where both sides have [`FEWEST_REPLIES_A_SIDE`]; a
/// cached prompt skips prefill, and the shift between two mixtures would measure how the
/// mixtures differ, not the serve. Any kind that FAILs fails the line; it is ok when every
/// kind compared is; else inconclusive, and inconclusive when no kind has enough. The decode
/// rate pools them: the cache spares the prompt's processing, not the decoding after it.
fn compare(
    candidate: &[ReplyRecord],
    baseline: &[ReplyRecord],
    worse: Worse,
    noise: f64,
    max: f64,
    name: &str,
) -> Result<Compared, ShiftError> {
    let cached = |r: &&ReplyRecord| served_from_cache(r) == Some(true);
    let apart = worse == Worse::Higher
        && (single(candidate).any(|r| cached(&r)) || single(baseline).any(|r| cached(&r)));
    if !apart {
        let j = judge_figured(
            &figures(single(candidate), worse),
            &figures(single(baseline), worse),
            worse,
            noise,
            max,
        )?;
        let text = describe(&j, worse, noise, max, name);
        return Ok((Some(j), status_of(j.decision), text));
    }
    let mut parts = Vec::new();
    let mut judged: Vec<Judged> = Vec::new();
    for (kind, is_cached) in [("cold prompts", false), ("cached prompts", true)] {
        let pick = |r: &&ReplyRecord| cached(r) == is_cached;
        let c = figures(single(candidate).filter(pick), worse);
        let b = figures(single(baseline).filter(pick), worse);
        let (cn, bn) = (c.values.len(), b.values.len());
        if cn < FEWEST_REPLIES_A_SIDE || bn < FEWEST_REPLIES_A_SIDE {
            parts.push(format!(
                "{kind}: {cn} and {bn} replies, under {FEWEST_REPLIES_A_SIDE} a side: not compared"
            ));
            continue;
        }
        let j = judge_figured(&c, &b, worse, noise, max)?;
        let said = describe(&j, worse, noise, max, name);
        parts.push(said.replacen("first token", &format!("first token of {kind}"), 1));
        judged.push(j);
    }
    let decisions = || judged.iter().map(|j| j.decision);
    let decision = if decisions().any(|d| d == Decision::Fail) {
        Decision::Fail
    } else if !judged.is_empty() && decisions().all(|d| d == Decision::Ok) {
        Decision::Ok
    } else {
        Decision::Inconclusive
    };
    // The figures of the kind that decided: the failing one, else the one with most replies.
    let shown = judged
        .iter()
        .find(|j| j.decision == Decision::Fail)
        .or_else(|| judged.iter().max_by_key(|j| j.shift.candidate))
        .copied();
    let mut text = parts.join("; ");
    if judged.is_empty() {
        text.push_str(
            ": too few of either kind to compare like with like (a cached prompt skips prefill)",
        );
    }
    Ok((shown, status_of(decision), text))
}

fn status_of(d: Decision) -> Status {
    match d {
        Decision::Fail => Status::Fail,
        Decision::Ok => Status::Ok,
        Decision::Inconclusive => Status::Inconclusive,
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// "decode rate 0.902x the baseline runs/rc2 (90% interval 0.871x to 0.929x; 30 and 30
/// replies): 9.8% slower, beyond the 3.0% noise: a regression"
fn describe(j: &Judged, worse: Worse, noise: f64, max: f64, name: &str) -> String {
    let s = &j.shift;
    let (what, worse_word, better_word) = match worse {
        Worse::Lower => ("decode rate", "slower", "faster"),
        Worse::Higher => ("first token", "later", "earlier"),
    };
    // The change in the worse direction, as a share: 0.098 for a rate ratio of 0.902.
    let change = match worse {
        Worse::Lower => 1.0 - s.ratio,
        Worse::Higher => s.ratio - 1.0,
    };
    let widened = match s.correlation {
        Some(c) if c.widened => format!(
            ", widened for correlated replies (lag-1 correlation {:.2}: as {:.1} and {:.1} independent replies)",
            c.rho, c.candidate_effective, c.baseline_effective
        ),
        _ => String::new(),
    };
    let interval = match s.interval {
        Some(i) => format!("90% interval {:.3}x to {:.3}x{widened}", i.low, i.high),
        None => "too few replies for a 90% interval".to_string(),
    };
    let moved = if change >= 0.0 {
        format!("{} {worse_word}", pct(change))
    } else {
        format!("{} {better_word}", pct(-change))
    };
    let verdict = match j.decision {
        Decision::Fail => format!(", beyond the {} noise: a regression", pct(noise)),
        Decision::Ok => format!("; a regression of {} is ruled out", pct(max)),
        Decision::Inconclusive if j.thin => format!(
            "; thin: under 6 replies a side the comparison can only be inconclusive{}",
            needed(j)
        ),
        Decision::Inconclusive => format!(
            "; inconclusive between the {} noise and a {} regression{}",
            pct(noise),
            pct(max),
            needed(j)
        ),
    };
    format!(
        "{what} {:.3}x the baseline {name} ({interval}; {} and {} replies): {moved}{verdict}",
        s.ratio, s.candidate, s.baseline
    )
}

fn needed(j: &Judged) -> String {
    match j.replies_needed {
        Some(RepliesNeeded::About(n)) => {
            format!("; about {n} replies a side would likely decide it")
        }
        Some(RepliesNeeded::OverCap) => {
            "; the spread is too wide for more replies to decide it".to_string()
        }
        None => String::new(),
    }
}

/// How the two runs differ, before any statistics: what makes them not comparable, what
/// makes them runs on another box (each with the `--baseline-allow` name that accepts it), and
/// notes (an A/A comparison).
#[derive(Debug, Default)]
struct Comparability {
    incomparable: Vec<String>,
    other_box: Vec<(&'static str, String)>,
    notes: Vec<String>,
}

fn comparability(candidate: &RunManifest, baseline: &RunManifest) -> Comparability {
    match (&candidate.provenance, &baseline.provenance) {
        (Some(cp), Some(bp)) => {
            let mut c = Comparability::default();
            for d in differences(cp, bp) {
                let said = format!(
                    "{}: {} here, {} at the baseline",
                    d.field, d.candidate, d.baseline
                );
                match d.allow_name() {
                    None => c.incomparable.push(said),
                    Some(name) => c.other_box.push((name, said)),
                }
            }
            if same_binary(cp, bp) {
                c.notes
                    .push("the same serve binary on both sides: an A/A comparison".to_string());
            }
            c
        }
        // A run from before provenance: what run.json has always held is compared, and the
        // rest cannot be known, so the comparison cannot decide.
        (c_prov, _) => {
            let mut c = recorded_settings(candidate, baseline);
            let which = if c_prov.is_none() {
                "this run"
            } else {
                "the baseline"
            };
            c.other_box.push((
                "",
                format!("{which} recorded no provenance (model files, kernel, modules: a run from before they were recorded)"),
            ));
            c
        }
    }
}

/// What run.json recorded before provenance: the serve command, prompts, settings and host.
fn recorded_settings(candidate: &RunManifest, baseline: &RunManifest) -> Comparability {
    let mut c = Comparability::default();
    if json(&candidate.prompts) != json(&baseline.prompts) {
        c.incomparable.push("the prompts differ".to_string());
    }
    let setting = |m: &RunManifest, key: &str| {
        m.settings
            .as_ref()
            .and_then(|s| s.get(key))
            .map_or_else(|| "unrecorded".to_string(), |v| v.to_string())
    };
    let (a, b) = (
        setting(candidate, "max_tokens"),
        setting(baseline, "max_tokens"),
    );
    if a != b {
        c.incomparable
            .push(format!("max_tokens: {a} here, {b} at the baseline"));
    }
    if json(&candidate.extra_body) != json(&baseline.extra_body) {
        c.incomparable.push(format!(
            "extra_body: {} here, {} at the baseline",
            json(&candidate.extra_body),
            json(&baseline.extra_body)
        ));
    }
    let (a, b) = (argv_without_port(candidate), argv_without_port(baseline));
    if a != b {
        c.incomparable.push(format!(
            "the serve command differs: {} here, {} at the baseline",
            a.as_deref()
                .map_or("none (attached)".to_string(), |v| v.join(" ")),
            b.as_deref()
                .map_or("none (attached)".to_string(), |v| v.join(" "))
        ));
    }
    if candidate.host != baseline.host {
        c.other_box.push((
            "host",
            format!(
                "host {} here, {} at the baseline",
                candidate.host, baseline.host
            ),
        ));
    }
    let sha = |m: &RunManifest| m.serve_binary.as_ref().map(|b| b.sha256.clone());
    if let (Some(a), Some(b)) = (sha(candidate), sha(baseline)) {
        if a == b {
            c.notes
                .push("the same serve binary on both sides: an A/A comparison".to_string());
        }
    }
    c
}

/// `v` as compact JSON, to compare recorded settings whatever their type.
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The serve's argv with the run's port written `{port}`.
fn argv_without_port(m: &RunManifest) -> Option<Vec<String>> {
    m.serve_argv.as_ref().map(|argv| without_port(argv, &m.url))
}
