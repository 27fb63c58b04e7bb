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
use super::evidence::{Baseline, BaselineEvidence, Evidence};
use super::output::{loop_in, not_text_share, stutter_in, Thresholds};
use super::words::grouped;
use crate::archive::check::Check;
use crate::archive::record::{
    ContextFigures, ContextFloors, ContextPlan, DepthFigures, Figures, Line, ReplyRecord, Status,
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

/// The prompt tokens a reply's rates rest on, and whether they are the serve's count: the
/// serve's `usage.prompt_tokens` where it is within half and twice the gate's `estimate`, else
/// the estimate (a count that far off is a tokenizer or template problem, said, never used).
pub fn prompt_tokens(counted: Option<u64>, estimate: u64) -> (f64, bool) {
    let estimate = estimate as f64;
    match counted.map(|n| n as f64) {
        Some(n) if n >= estimate / 2.0 && n <= estimate * 2.0 => (n, true),
        _ => (estimate, false),
    }
}

fn at_depth(r: &ReplyRecord) -> Option<AtDepth<'_>> {
    let slot = r.depth.as_ref()?;
    let (tokens, serves_count) = prompt_tokens(r.usage_prompt_tokens, slot.estimate);
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

/// A rate as a row says it: "1,850 tok/s", "57.0 tok/s", or "none".
fn rate(x: Option<f64>) -> String {
    match x {
        Some(r) if r >= 1000.0 => format!("{} tok/s", grouped(r.round() as u64)),
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
    let mut words = RateWords::default();
    floor_words(&figures, &c.floors().context, &mut words);
    if let BaselineEvidence::Recorded { baseline, .. } = e.baseline {
        baseline_words(&baseline, rows, &mut figures, c, &mut words);
    }
    let (status, text) = rate_verdict(words);
    Line::new(Check::ContextRate, status, text).with(Figures {
        context: Some(ContextFigures {
            context: None,
            depths: figures,
            limit: None,
        }),
        ..Figures::default()
    })
}

/// What the context-rate line says, by what it makes of the line: each kept in the order found.
#[derive(Default)]
struct RateWords {
    fails: Vec<String>,
    said: Vec<String>,
    inconclusive: Vec<String>,
}

/// The floors' words: the prefill rate at every depth against `--prefill-floor`, the decode
/// rate at the deepest depth against `--depth-floor`.
fn floor_words(figures: &[DepthFigures], floors: &ContextFloors, words: &mut RateWords) {
    if figures.is_empty() && (floors.prefill_floor.is_some() || floors.depth_floor.is_some()) {
        words
            .fails
            .push("no depth within the context was asked: the floors judge nothing".into());
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
            words.said.push(format!(
                "prefill at every depth over the floor {}",
                rate(Some(floor))
            ));
        } else {
            words.fails.push(format!(
                "prefill under the floor {}: {}",
                rate(Some(floor)),
                under.join(", ")
            ));
        }
    }
    if let Some(floor) = floors.depth_floor {
        match figures.last() {
            Some(f) if f.decode_tok_s.is_some_and(|d| d >= floor) => words.said.push(format!(
                "decode at {} tokens {} over the floor {}",
                grouped(f.depth.into()),
                rate(f.decode_tok_s),
                rate(Some(floor))
            )),
            Some(f) => words.fails.push(format!(
                "decode at {} tokens {}, under the floor {}",
                grouped(f.depth.into()),
                rate(f.decode_tok_s),
                rate(Some(floor))
            )),
            None => {}
        }
    }
}

/// The baseline's words: each depth's prefill and decode rates against the baseline's at the
/// same depth, each ratio computed set in the depth's figures.
fn baseline_words(
    baseline: &Baseline<'_>,
    rows: &[(u32, Vec<AtDepth<'_>>)],
    figures: &mut [DepthFigures],
    c: &Criteria,
    words: &mut RateWords,
) {
    let noise = c.floors().baseline_noise.unwrap_or(DEFAULT_NOISE);
    let max = c.floors().max_regression.unwrap_or(DEFAULT_MAX_REGRESSION);
    let (theirs, _) = grouped_by_depth(baseline.replies);
    for ((depth, at), f) in rows.iter().zip(figures.iter_mut()) {
        let Some((_, base)) = theirs.iter().find(|(d, _)| d == depth) else {
            words.said.push(format!(
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
            let Some(ratio) = shift_words(&at_depth, &ours, &base, noise, max, words) else {
                continue;
            };
            if pick == 0 {
                f.prefill_ratio = Some(ratio);
            } else {
                f.decode_ratio = Some(ratio);
            }
        }
    }
}

/// One rate at one depth (`at_depth` names both) against the baseline's: its words, and the
/// ratio when the shift could be computed.
fn shift_words(
    at_depth: &str,
    ours: &[f64],
    base: &[f64],
    noise: f64,
    max: f64,
    words: &mut RateWords,
) -> Option<f64> {
    let j = match judge_shift(ours, base, Worse::Lower, noise, max) {
        Err(why) => {
            words
                .inconclusive
                .push(format!("{at_depth}: cannot compare: {why}"));
            return None;
        }
        Ok(j) => j,
    };
    let ratio = j.shift.ratio;
    let shown = format!(
        "{at_depth} {ratio:.3}x the baseline's ({} and {} replies)",
        j.shift.candidate, j.shift.baseline
    );
    match j.decision {
        Decision::Fail => words.fails.push(format!(
            "{shown}: slower beyond the {:.1}% noise",
            noise * 100.0
        )),
        Decision::Ok => words.said.push(format!(
            "{shown}: a regression of {:.1}% ruled out",
            max * 100.0
        )),
        Decision::Inconclusive if j.thin => words
            .inconclusive
            .push(format!("{shown}: thin, under 6 replies a side")),
        Decision::Inconclusive => words.inconclusive.push(format!(
            "{shown}: inconclusive between the {:.1}% noise and a {:.1}% regression",
            noise * 100.0,
            max * 100.0
        )),
    }
    Some(ratio)
}

/// The context-rate line's status and text: FAIL, then inconclusive, then OK, each with the
/// words of what it outranks after its own; INFO when nothing was judged.
fn rate_verdict(words: RateWords) -> (Status, String) {
    let RateWords {
        fails,
        said,
        inconclusive,
    } = words;
    if !fails.is_empty() {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::{ContextSaid, DepthSlot, Startup};
    use crate::judging::verdict::{Baseline, Floors};
    use crate::selftest::cases::{greedy_manifest, reply};

    /// A reply at `depth` (replica `replica`) whose first token is at `first_ms` and then 10
    /// tokens 10 ms apart (100 tok/s), saying `content`; the serve counted `counted` prompt
    /// tokens of an estimate of `depth`.
    fn at(
        depth: u32,
        replica: u32,
        first_ms: u64,
        counted: Option<u64>,
        content: &str,
    ) -> ReplyRecord {
        let times: Vec<u64> = (0..11).map(|i| first_ms + 10 * i).collect();
        let mut r = reply(&times, content);
        r.usage_prompt_tokens = counted;
        r.depth = Some(DepthSlot {
            depth,
            replica,
            estimate: u64::from(depth),
            code: "4821".into(),
            fact_at: 10,
            limit_probe: false,
        });
        r
    }

    fn probe(content: &str, error: Option<&str>, counted: Option<u64>) -> ReplyRecord {
        let mut r = at(3072, 0, 100, counted, content);
        r.depth.as_mut().unwrap().limit_probe = true;
        r.error = error.map(str::to_string);
        r
    }

    fn plan(depths: &[u32], context: Option<u64>) -> crate::archive::record::RunManifest {
        let mut m = greedy_manifest();
        m.context = Some(ContextPlan {
            depths: depths.to_vec(),
            replies_each: 2,
            serve_says: context.map(|tokens| ContextSaid {
                tokens,
                by: "GET /props default_generation_settings.n_ctx".into(),
            }),
            given: None,
            max_tokens: 64,
        });
        m
    }

    fn lines_of(
        replies: &[ReplyRecord],
        manifest: &crate::archive::record::RunManifest,
        floors: Floors,
        died: Option<&str>,
    ) -> Vec<Line> {
        let startup = Startup::Ready {
            after_ms: 1.0,
            probe: "/health".into(),
            not_ready_answers: 0,
        };
        let mut e = Evidence::of(replies, &startup);
        e.manifest = Some(manifest);
        e.serve_died = died;
        context_lines(&e, replies, &Criteria::new(floors).unwrap())
    }

    fn floors() -> Floors {
        Floors {
            floor: 1.0,
            first_token_ms: 1e6,
            ..Floors::default()
        }
    }

    const FOUND: &str = "The secret code is 4821.";
    const REFUSED: &str = r#"HTTP 400: "{\"error\":{\"code\":400,\"message\":\"request (3126 tokens) exceeds the available context size (2048 tokens), try increasing it\"}}""#;

    #[test]
    fn every_depth_finding_its_fact_and_the_limit_refused_is_ok_with_a_row_a_depth() {
        // 256 tokens at 100 ms: prefill 2,560 tok/s; 1,024 at 400 ms: 2,560 too.
        let replies = vec![
            at(256, 0, 100, Some(256), FOUND),
            at(256, 1, 100, Some(256), FOUND),
            at(1024, 0, 400, Some(1024), FOUND),
            at(1024, 1, 400, Some(1024), FOUND),
            probe("", Some(REFUSED), None),
        ];
        let m = plan(&[256, 1024, 4096], Some(2048));
        let lines = lines_of(&replies, &m, floors(), None);
        let l = &lines[0];
        assert_eq!(
            (l.check, l.status),
            (Check::Context, Status::Ok),
            "{}",
            l.text
        );
        assert!(
            l.text.starts_with("256 tokens: prefill 2,560 tok/s, decode 100.0 tok/s, the fact found; 1,024 tokens: prefill 2,560 tok/s"),
            "{}",
            l.text
        );
        assert!(
            l.text.contains(
                "past the context (2,048 tokens), a prompt of about 3,072 was refused: HTTP 400"
            ),
            "{}",
            l.text
        );
        let f = l.figures.as_ref().unwrap().context.as_ref().unwrap();
        assert_eq!(
            (f.context, f.limit.as_deref()),
            (Some(2048), Some("refused"))
        );
        assert_eq!(f.depths.len(), 2);
        assert_eq!(f.depths[1].prefill_tok_s, Some(2560.0));
        assert_eq!(f.depths[1].first_token_ms, Some(400.0));
        assert_eq!((f.depths[1].found, f.depths[1].replies), (2, 2));
        assert_eq!(f.depths[1].prompt_tokens_by, "serve");
        assert_eq!(lines[1].check, Check::ContextRate);
        assert_eq!(lines[1].status, Status::Info, "{}", lines[1].text);
    }

    #[test]
    fn a_fact_missed_or_a_failed_reply_at_depth_fails_and_is_quoted() {
        let replies = vec![
            at(256, 0, 100, Some(256), FOUND),
            at(
                256,
                1,
                100,
                Some(256),
                "I could not find a secret code in the text.",
            ),
            at(1024, 0, 400, Some(1024), "The code is 48210."),
        ];
        let mut failed = at(1024, 1, 400, Some(1024), "");
        failed.error = Some("no bytes for 60 s".into());
        let replies = [replies, vec![failed]].concat();
        let l = &lines_of(&replies, &plan(&[256, 1024], Some(8192)), floors(), None)[0];
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text
                .starts_with("reply 1 did not give the fact (4821): \"I could not find"),
            "{}",
            l.text
        );
        assert!(
            l.text
                .contains("did not give the fact (4821): \"The code is 48210.\""),
            "{}",
            l.text
        );
        assert!(l.text.contains("failed: no bytes for 60 s"), "{}", l.text);
        assert!(l.text.contains("the fact found in 1 of 2"), "{}", l.text);
        assert!(l.text.contains("the limit (8,192 tokens, GET /props default_generation_settings.n_ctx) was not probed: no depth is past it"), "{}", l.text);
    }

    #[test]
    fn past_the_context_only_a_refusal_with_words_or_a_said_cut_passes() {
        let m = plan(&[256, 4096], Some(2048));
        let base = || vec![at(256, 0, 100, Some(256), FOUND)];
        let cases: [(ReplyRecord, Option<&str>, Status, &str, &str); 7] = [
            (
                probe("", Some(REFUSED), None),
                None,
                Status::Ok,
                "refused",
                "was refused: HTTP 400",
            ),
            (
                probe("", Some("the serve reported an error: context full"), None),
                None,
                Status::Ok,
                "refused",
                "was refused: the serve reported an error: context full",
            ),
            (
                probe("", Some("HTTP 500: (no body)"), None),
                None,
                Status::Fail,
                "failed",
                "refused without a message",
            ),
            (
                probe("The secret code is 4821.", None, Some(2048)),
                None,
                Status::Ok,
                "cut",
                "cut to 2,048 tokens",
            ),
            (
                probe("The secret code is 4821.", None, Some(3126)),
                None,
                Status::Fail,
                "answered",
                "answered as if it fitted: \"The secret code is 4821.\"",
            ),
            (
                probe(&"!".repeat(64), None, None),
                None,
                Status::Fail,
                "garbled",
                "garbled text",
            ),
            (
                probe("", Some("the connection closed"), None),
                Some("the serve exited (signal 6) during reply 2"),
                Status::Fail,
                "crashed",
                "crashed the serve: the serve exited (signal 6)",
            ),
        ];
        for (p, died, status, word, says) in cases {
            let mut replies = base();
            let mut p = p;
            p.index = 2;
            replies.push(p);
            let l = &lines_of(&replies, &m, floors(), died)[0];
            assert_eq!(l.status, status, "{word}: {}", l.text);
            assert!(l.text.contains(says), "{word}: {}", l.text);
            let f = l.figures.as_ref().unwrap().context.as_ref().unwrap();
            assert_eq!(f.limit.as_deref(), Some(word));
        }
    }

    #[test]
    fn a_serve_that_died_before_the_probe_was_not_crashed_by_it() {
        let mut p = probe("", Some(REFUSED), None);
        p.index = 2;
        let mut later = at(256, 1, 100, Some(256), FOUND);
        later.index = 3;
        let replies = vec![at(256, 0, 100, Some(256), FOUND), p, later];
        let l = &lines_of(
            &replies,
            &plan(&[256, 4096], Some(2048)),
            floors(),
            Some("gone"),
        )[0];
        assert_eq!(l.status, Status::Ok, "{}", l.text);
    }

    #[test]
    fn a_depth_not_asked_is_inconclusive_and_no_context_says_the_limit_was_not_probed() {
        let replies = vec![at(256, 0, 100, Some(256), FOUND)];
        let l = &lines_of(&replies, &plan(&[256, 1024], None), floors(), None)[0];
        assert_eq!(l.status, Status::Inconclusive, "{}", l.text);
        assert!(
            l.text.contains("not asked (the run ended first): 1,024"),
            "{}",
            l.text
        );
        assert!(
            l.text.contains("the limit was not probed: the serve does not say its context and no --max-context was given"),
            "{}",
            l.text
        );
    }

    #[test]
    fn a_count_far_from_the_estimate_is_said_and_the_rates_use_the_estimate() {
        // The serve says 100 tokens of about 1,024 (under half): 1,024 / 0.4 s = 2,560.
        let under = vec![at(1024, 0, 400, Some(100), FOUND)];
        let l = &lines_of(&under, &plan(&[1024], None), floors(), None)[0];
        assert!(l.text.contains("the serve counted 100 prompt tokens for about 1,024 by the gate's estimate, under half: a tokenizer or template problem; the rates use the estimate"), "{}", l.text);
        let f = &l.figures.as_ref().unwrap().context.as_ref().unwrap().depths[0];
        assert_eq!(
            (f.prefill_tok_s, f.prompt_tokens_by.as_str()),
            (Some(2560.0), "estimate")
        );
        let over = vec![at(1024, 0, 400, Some(2049), FOUND)];
        let l = &lines_of(&over, &plan(&[1024], None), floors(), None)[0];
        assert!(l.text.contains("over twice"), "{}", l.text);
        // Twice exactly is the serve's own count.
        let twice = vec![at(1024, 0, 400, Some(2048), FOUND)];
        let l = &lines_of(&twice, &plan(&[1024], None), floors(), None)[0];
        let f = &l.figures.as_ref().unwrap().context.as_ref().unwrap().depths[0];
        assert_eq!(
            (f.prefill_tok_s, f.prompt_tokens_by.as_str()),
            (Some(5120.0), "serve")
        );
        assert_eq!(
            l.status,
            Status::Ok,
            "the count is said, never failed: {}",
            l.text
        );
    }

    #[test]
    fn the_prefill_floor_holds_every_depth_and_the_depth_floor_the_deepest() {
        // Prefill 2,560 at 256 and 1,280 at 1,024; decode 100 everywhere.
        let replies = vec![
            at(256, 0, 100, Some(256), FOUND),
            at(1024, 0, 800, Some(1024), FOUND),
        ];
        let m = plan(&[256, 1024], None);
        let with = |prefill: Option<f64>, depth: Option<f64>| {
            let mut f = floors();
            f.context.prefill_floor = prefill;
            f.context.depth_floor = depth;
            lines_of(&replies, &m, f, None).remove(1)
        };
        assert_eq!(with(Some(1280.0), None).status, Status::Ok);
        let l = with(Some(1281.0), None);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text
                .contains("prefill under the floor 1,281 tok/s: 1,280 tok/s at 1,024 tokens"),
            "{}",
            l.text
        );
        assert_eq!(with(None, Some(100.0)).status, Status::Ok);
        let l = with(None, Some(100.5));
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text
                .contains("decode at 1,024 tokens 100.0 tok/s, under the floor 100.5 tok/s"),
            "{}",
            l.text
        );
        assert!(Check::ContextRate.is_timing() && !Check::Context.is_timing());
    }

    #[test]
    fn against_the_baseline_each_depth_is_a_ratio_with_its_rules() {
        // Six replies a side at 1,024: the candidate's first token at 800 ms against 400 ms,
        // prefill half the baseline's: a regression beyond noise. The times zigzag: six
        // rising by a millisecond each would read as replies correlated in their order, and
        // widen the interval past deciding.
        let ours: Vec<ReplyRecord> = (0..6)
            .map(|i| {
                at(
                    1024,
                    i,
                    800 + u64::from(i % 2) * 5 + u64::from(i),
                    Some(1024),
                    FOUND,
                )
            })
            .collect();
        let theirs: Vec<ReplyRecord> = (0..6)
            .map(|i| {
                at(
                    1024,
                    i,
                    400 + u64::from(i % 2) * 5 + u64::from(i),
                    Some(1024),
                    FOUND,
                )
            })
            .collect();
        let m = plan(&[1024], None);
        let startup = Startup::Ready {
            after_ms: 1.0,
            probe: "/health".into(),
            not_ready_answers: 0,
        };
        let judge_with = |base: &[ReplyRecord]| {
            let mut e = Evidence::of(&ours, &startup);
            e.manifest = Some(&m);
            e.baseline = BaselineEvidence::Recorded {
                candidate: &m,
                baseline: Baseline {
                    name: "runs/rc1",
                    manifest: &m,
                    replies: base,
                    load: None,
                },
            };
            context_lines(&e, &ours, &Criteria::new(floors()).unwrap()).remove(1)
        };
        let l = judge_with(&theirs);
        assert_eq!(l.status, Status::Fail, "{}", l.text);
        assert!(
            l.text.contains("prefill at 1,024 tokens 0.50"),
            "{}",
            l.text
        );
        let f = &l.figures.as_ref().unwrap().context.as_ref().unwrap().depths[0];
        assert!((f.prefill_ratio.unwrap() - 0.5).abs() < 0.01, "{f:?}");
        assert!((f.decode_ratio.unwrap() - 1.0).abs() < 1e-9, "{f:?}");
        // Three a side: thin, inconclusive whatever the ratio.
        let l = judge_with(&theirs[..3]);
        assert_eq!(l.status, Status::Inconclusive, "{}", l.text);
        assert!(
            l.text
                .contains("(6 and 3 replies): thin, under 6 replies a side"),
            "{}",
            l.text
        );
    }
}
