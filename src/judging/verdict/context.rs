//! The context lines (issue 35; docs/context.md): what the replies of `--depths` show.
//!
//! - `context`: a row a depth within the serve's context (its prompt tokens, prefill and
//!   decode rates, and whether every reply found the fact), and what the serve did with the
//!   prompt past its context. FAIL when a reply at a depth within the context did not give the
//!   fact or failed, and when the serve answered the prompt past its context as if it fitted,
//!   with garbled text, or crashed. Never timing: load never excuses it.
//! - `context-rate`: the prefill rate at every depth against `--prefill-floor`, the decode rate
//!   at the deepest depth against `--depth-floor`, and against `--baseline` each depth's rates
//!   as ratios with the baseline comparison's rules. Timing alone.
//!
//! A depth's prompt tokens are the serve's count (`usage.prompt_tokens`) where it is within
//! half and twice the gate's estimate; else the estimate, and the line says why.

use super::criteria::Criteria;
use super::evidence::{BaselineEvidence, Evidence};
use super::output::{loop_in, not_text_share, stutter_in, Thresholds};
use super::words::grouped;
use crate::archive::check::Check;
use crate::archive::record::{
    ContextFigures, ContextPlan, DepthFigures, Figures, Line, ReplyRecord, Status,
};
use crate::depth_prompt;
use crate::inert::{one_line, quote};
use crate::judging::baseline::{
    judge_shift, Decision, Worse, DEFAULT_MAX_REGRESSION, DEFAULT_NOISE,
};
use crate::judging::measure::{measure, median};

/// The most replies a FAIL names.
const NAMED: usize = 3;

/// One reply at depth, measured.
#[derive(Debug, Clone)]
struct AtDepth<'a> {
    reply: &'a ReplyRecord,
    /// The prompt tokens its rates rest on, and whether they are the serve's count.
    tokens: f64,
    serves_count: bool,
    first_token_ms: Option<f64>,
    prefill: Option<f64>,
    decode: Option<f64>,
    found: bool,
}

fn at_depth(r: &ReplyRecord) -> Option<AtDepth<'_>> {
    let slot = r.depth.as_ref()?;
    let estimate = slot.estimate as f64;
    let (tokens, serves_count) = match r.usage_prompt_tokens.map(|n| n as f64) {
        Some(n) if n >= estimate / 2.0 && n <= estimate * 2.0 => (n, true),
        _ => (estimate, false),
    };
    let m = measure(r);
    let ok = r.error.is_none();
    let first = m.first_token_ms.filter(|ms| ok && *ms > 0.0);
    Some(AtDepth {
        reply: r,
        tokens,
        serves_count,
        first_token_ms: first,
        prefill: first.map(|ms| tokens / (ms / 1e3)),
        decode: m.rate_tok_s.filter(|_| ok),
        found: ok && depth_prompt::found(&r.content, &slot.code),
    })
}

/// The replies at each depth within the context, ascending, and the probe of the limit.
fn grouped_by_depth(all: &[ReplyRecord]) -> (Vec<(u32, Vec<AtDepth<'_>>)>, Option<&ReplyRecord>) {
    let mut rows: Vec<(u32, Vec<AtDepth<'_>>)> = Vec::new();
    let mut probe = None;
    for r in all {
        match &r.depth {
            Some(s) if s.limit_probe => probe = Some(r),
            Some(s) => {
                let a = at_depth(r).expect("a depth reply");
                match rows.iter_mut().find(|(d, _)| *d == s.depth) {
                    Some((_, v)) => v.push(a),
                    None => rows.push((s.depth, vec![a])),
                }
            }
            None => {}
        }
    }
    rows.sort_by_key(|(d, _)| *d);
    (rows, probe)
}

fn median_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.flatten().collect();
    median(&v)
}

fn figures_of(depth: u32, at: &[AtDepth<'_>]) -> DepthFigures {
    DepthFigures {
        depth,
        replies: at.len(),
        prompt_tokens: median_of(at.iter().map(|a| Some(a.tokens))),
        prompt_tokens_by: if at.iter().all(|a| a.serves_count) {
            "serve".into()
        } else {
            "estimate".into()
        },
        first_token_ms: median_of(at.iter().map(|a| a.first_token_ms)),
        prefill_tok_s: median_of(at.iter().map(|a| a.prefill)),
        decode_tok_s: median_of(at.iter().map(|a| a.decode)),
        found: at.iter().filter(|a| a.found).count(),
        prefill_ratio: None,
        decode_ratio: None,
    }
}

/// A rate as a row says it: "1,850 tok/s", or "none".
fn rate(x: Option<f64>) -> String {
    match x {
        Some(r) if r >= 100.0 => format!("{} tok/s", grouped(r.round() as u64)),
        Some(r) => format!("{r:.1} tok/s"),
        None => "none".into(),
    }
}

/// One depth's row, and what fails it.
fn row(depth: u32, at: &[AtDepth<'_>], f: &DepthFigures) -> (String, Vec<String>) {
    let mut problems = Vec::new();
    for a in at {
        let r = a.reply;
        if let Some(e) = &r.error {
            problems.push(format!("reply {} failed: {}", r.index, one_line(e)));
        } else if !a.found {
            let code = r.depth.as_ref().map_or("", |s| s.code.as_str());
            problems.push(format!(
                "reply {} did not give the fact ({code}): {}",
                r.index,
                quote(&r.content, 80)
            ));
        }
    }
    let fact = if f.found == at.len() {
        "the fact found".to_string()
    } else {
        format!("the fact found in {} of {}", f.found, at.len())
    };
    let mut text = format!(
        "{} tokens: prefill {}, decode {}, {fact}",
        grouped(depth.into()),
        rate(f.prefill_tok_s),
        rate(f.decode_tok_s)
    );
    if let Some(a) = at.iter().find(|a| !a.serves_count) {
        let est = a.reply.depth.as_ref().map_or(0, |s| s.estimate);
        match a.reply.usage_prompt_tokens {
            Some(n) => text.push_str(&format!(
                " (the serve counted {} prompt tokens for about {} by the gate's estimate, {}: a tokenizer or template problem; the rates use the estimate)",
                grouped(n),
                grouped(est),
                if (n as f64) < est as f64 / 2.0 { "under half" } else { "over twice" }
            )),
            None => text.push_str(" (prompt tokens estimated: the serve sent no usage.prompt_tokens)"),
        }
    }
    (text, problems)
}

/// What the serve did with the prompt past its context: a word for result.json, the words
/// for the line, and whether it passes.
fn limit_outcome(
    probe: &ReplyRecord,
    context: u64,
    serve_died: Option<&str>,
    t: &Thresholds,
) -> (&'static str, String, bool) {
    let asked = probe.depth.as_ref().map_or(0, |s| s.depth);
    let head = format!(
        "past the context ({} tokens), a prompt of about {}",
        grouped(context),
        grouped(asked.into())
    );
    if let Some(died) = serve_died {
        return (
            "crashed",
            format!("{head} crashed the serve: {}", one_line(died)),
            false,
        );
    }
    if let Some(e) = &probe.error {
        // An `event: error` with no data is a refusal without a message, as an empty body is.
        let refused_with_words = (e.starts_with("HTTP ") && !e.ends_with("(no body)"))
            || e.starts_with("the serve reported an error: ");
        return if refused_with_words {
            (
                "refused",
                format!("{head} was refused: {}", one_line(e)),
                true,
            )
        } else if e.starts_with("HTTP ") || e.starts_with("the serve reported an error") {
            (
                "failed",
                format!("{head} was refused without a message: {}", one_line(e)),
                false,
            )
        } else {
            ("failed", format!("{head} failed: {}", one_line(e)), false)
        };
    }
    if let Some(n) = probe.usage_prompt_tokens.filter(|&n| n <= context) {
        return (
            "cut",
            format!(
                "{head} was answered with the prompt cut to {} tokens (the serve's count)",
                grouped(n)
            ),
            true,
        );
    }
    let text = &probe.content;
    let garbled = loop_in(text, t).is_some()
        || stutter_in(text, &probe.prompt, t).is_some()
        || not_text_share(text).0 > t.not_text_share
        || text.trim().is_empty();
    if garbled {
        (
            "garbled",
            format!("{head} was answered with garbled text: {}", quote(text, 80)),
            false,
        )
    } else {
        (
            "answered",
            format!("{head} was answered as if it fitted: {}", quote(text, 80)),
            false,
        )
    }
}

/// The context and context-rate lines, or none for a run without depths. `all`: every reply
/// the run made (the depth replies are set apart from the judged ones).
pub(crate) fn context_lines(e: &Evidence<'_>, all: &[ReplyRecord], c: &Criteria) -> Vec<Line> {
    let plan = e.manifest.and_then(|m| m.context.as_ref());
    let (rows, probe) = grouped_by_depth(all);
    if plan.is_none() && rows.is_empty() && probe.is_none() {
        return Vec::new();
    }
    let figures: Vec<DepthFigures> = rows.iter().map(|(d, at)| figures_of(*d, at)).collect();
    let context = plan.and_then(ContextPlan::context);
    let mut texts = Vec::new();
    let mut problems = Vec::new();
    for ((depth, at), f) in rows.iter().zip(&figures) {
        let (text, p) = row(*depth, at, f);
        texts.push(text);
        problems.extend(p);
    }
    let mut missing = Vec::new();
    if let Some(p) = plan {
        for d in p.depths.iter().filter(|&&d| p.fits(d)) {
            if !rows.iter().any(|(r, _)| r == d) {
                missing.push(grouped((*d).into()));
            }
        }
    }
    let t = Thresholds::of(&c.floors().output);
    let last = all.last().map(|r| r.index);
    let (limit_word, limit_ok) = match (probe, &context) {
        (Some(p), Some((n, _))) => {
            // A serve that died after its last reply, the probe, died of the probe.
            let died = e.serve_died.filter(|_| last == Some(p.index));
            let (word, text, ok) = limit_outcome(p, *n, died, &t);
            texts.push(text);
            (Some(word), ok)
        }
        (Some(p), None) => {
            let (word, text, ok) = limit_outcome(p, 0, e.serve_died, &t);
            texts.push(text);
            (Some(word), ok)
        }
        // A depth past the context plans a probe: one not made is missing, never "not needed".
        (None, Some((n, by))) => {
            match plan.and_then(ContextPlan::probe_depth) {
                Some(d) => missing.push(format!(
                    "the limit probe (about {} tokens, past the context of {})",
                    grouped(d.into()),
                    grouped(*n)
                )),
                None => texts.push(format!(
                    "the limit ({} tokens, {by}) was not probed: no depth is past it",
                    grouped(*n)
                )),
            }
            (None, true)
        }
        (None, None) => {
            texts.push(
                "the limit was not probed: the serve does not say its context and no --max-context was given"
                    .into(),
            );
            (None, true)
        }
    };
    if !missing.is_empty() {
        texts.push(format!(
            "not asked (the run ended first): {}",
            missing.join(", ")
        ));
    }
    let status = if !problems.is_empty() || !limit_ok {
        Status::Fail
    } else if !missing.is_empty() {
        Status::Inconclusive
    } else {
        Status::Ok
    };
    let mut text = texts.join("; ");
    if !problems.is_empty() {
        let more = problems.len().saturating_sub(NAMED);
        problems.truncate(NAMED);
        if more > 0 {
            problems.push(format!("{more} more"));
        }
        text = format!("{}; {text}", problems.join("; "));
    }
    let line = Line::new(Check::Context, status, text).with(Figures {
        context: Some(ContextFigures {
            context: context.map(|(n, _)| n),
            depths: figures.clone(),
            limit: limit_word.map(str::to_string),
        }),
        ..Figures::default()
    });
    vec![line, rate_line(e, &rows, figures, c)]
}

/// The context-rate line: floors and the baseline's depths.
fn rate_line(
    e: &Evidence<'_>,
    rows: &[(u32, Vec<AtDepth<'_>>)],
    mut figures: Vec<DepthFigures>,
    c: &Criteria,
) -> Line {
    let floors = &c.floors().context;
    let mut fails = Vec::new();
    let mut said = Vec::new();
    if figures.is_empty() && (floors.prefill_floor.is_some() || floors.depth_floor.is_some()) {
        fails.push("no depth within the context was asked: the floors judge nothing".into());
    }
    if let Some(floor) = floors.prefill_floor.filter(|_| !figures.is_empty()) {
        let under: Vec<String> = figures
            .iter()
            .filter(|f| f.prefill_tok_s.is_none_or(|p| p < floor))
            .map(|f| {
                format!(
                    "{} at {} tokens",
                    rate(f.prefill_tok_s),
                    grouped(f.depth.into())
                )
            })
            .collect();
        if under.is_empty() {
            said.push(format!(
                "prefill at every depth over the floor {}",
                rate(Some(floor))
            ));
        } else {
            fails.push(format!(
                "prefill under the floor {}: {}",
                rate(Some(floor)),
                under.join(", ")
            ));
        }
    }
    if let Some(floor) = floors.depth_floor {
        match figures.last() {
            Some(f) if f.decode_tok_s.is_some_and(|d| d >= floor) => said.push(format!(
                "decode at {} tokens {} over the floor {}",
                grouped(f.depth.into()),
                rate(f.decode_tok_s),
                rate(Some(floor))
            )),
            Some(f) => fails.push(format!(
                "decode at {} tokens {}, under the floor {}",
                grouped(f.depth.into()),
                rate(f.decode_tok_s),
                rate(Some(floor))
            )),
            None => {}
        }
    }
    let mut inconclusive = Vec::new();
    if let BaselineEvidence::Recorded { baseline, .. } = e.baseline {
        let noise = c.floors().baseline_noise.unwrap_or(DEFAULT_NOISE);
        let max = c.floors().max_regression.unwrap_or(DEFAULT_MAX_REGRESSION);
        let (theirs, _) = grouped_by_depth(baseline.replies);
        for ((depth, at), f) in rows.iter().zip(figures.iter_mut()) {
            let Some((_, base)) = theirs.iter().find(|(d, _)| d == depth) else {
                said.push(format!(
                    "{} tokens not in the baseline {}",
                    grouped((*depth).into()),
                    baseline.name
                ));
                continue;
            };
            for (what, pick) in [("prefill", 0), ("decode", 1)] {
                let values = |v: &[AtDepth<'_>]| -> Vec<f64> {
                    v.iter()
                        .filter_map(|a| if pick == 0 { a.prefill } else { a.decode })
                        .collect()
                };
                let (ours, base) = (values(at), values(base));
                let at_depth = format!("{what} at {} tokens", grouped((*depth).into()));
                match judge_shift(&ours, &base, Worse::Lower, noise, max) {
                    Err(why) => inconclusive.push(format!("{at_depth}: cannot compare: {why}")),
                    Ok(j) => {
                        let ratio = j.shift.ratio;
                        if pick == 0 {
                            f.prefill_ratio = Some(ratio);
                        } else {
                            f.decode_ratio = Some(ratio);
                        }
                        let words = format!(
                            "{at_depth} {ratio:.3}x the baseline's ({} and {} replies)",
                            j.shift.candidate, j.shift.baseline
                        );
                        match j.decision {
                            Decision::Fail => fails.push(format!(
                                "{words}: slower beyond the {:.1}% noise",
                                noise * 100.0
                            )),
                            Decision::Ok => said.push(format!(
                                "{words}: a regression of {:.1}% ruled out",
                                max * 100.0
                            )),
                            Decision::Inconclusive if j.thin => inconclusive.push(format!(
                                "{words}: thin, under 6 replies a side"
                            )),
                            Decision::Inconclusive => inconclusive.push(format!(
                                "{words}: inconclusive between the {:.1}% noise and a {:.1}% regression",
                                noise * 100.0,
                                max * 100.0
                            )),
                        }
                    }
                }
            }
        }
    }
    let (status, text) = if !fails.is_empty() {
        (
            Status::Fail,
            [fails, inconclusive, said].concat().join("; "),
        )
    } else if !inconclusive.is_empty() {
        (
            Status::Inconclusive,
            [inconclusive, said].concat().join("; "),
        )
    } else if said.is_empty() {
        (
            Status::Info,
            "no --prefill-floor, --depth-floor or --baseline: the rates are the context line's, not judged".to_string(),
        )
    } else {
        (Status::Ok, said.join("; "))
    };
    Line::new(Check::ContextRate, status, text).with(Figures {
        context: Some(ContextFigures {
            context: None,
            depths: figures,
            limit: None,
        }),
        ..Figures::default()
    })
}
