//! The rate and first-token lines: the medians against their floor and limit, with what each
//! figure rests on (how many replies, whether its interval is clear of the bound).

use super::words::plural;
use crate::archive::check::Check;
use crate::archive::record::Unit;
use crate::archive::record::{Figures, FirstTokenOf, Line, ReplyRecord, Status};
use crate::judging::measure::{median, median_ci95, ReplyMetrics, CI_MIN_VALUES};
use crate::judging::prompt_cache::served_from_cache;

impl Figures {
    /// A median's figures: over `values` of `replies`, held to `floor` or `limit`.
    fn median(unit: Unit, values: &[f64], replies: usize) -> Figures {
        Figures {
            unit: Some(unit),
            median: median(values),
            values: Some(values.len()),
            replies: Some(replies),
            interval_95: median_ci95(values).map(|(lo, hi)| [lo, hi]),
            ..Figures::default()
        }
    }
}

/// The most replies' rates the rate line lists one by one; the rest are counted.
pub(crate) const EACH_SHOWN: usize = 64;

/// The rate line. `replies` are the replies `metrics` were measured from, in the same order:
/// a reply is named by its index.
pub(crate) fn rate_line(metrics: &[ReplyMetrics], floor: f64, replies: &[ReplyRecord]) -> Line {
    let rates: Vec<Option<f64>> = metrics.iter().map(|m| m.rate_tok_s).collect();
    let have: Vec<f64> = rates.iter().flatten().copied().collect();
    let mut each: Vec<String> = rates
        .iter()
        .take(EACH_SHOWN)
        .map(|r| r.map_or("-".to_string(), |r| format!("{r:.1}")))
        .collect();
    if rates.len() > EACH_SHOWN {
        each.push(format!("and {} more", rates.len() - EACH_SHOWN));
    }
    let index = |i: usize| replies.get(i).map_or(i + 1, |r| r.index);
    let disbelieved = usage_not_believed(metrics, replies);
    let bunched = bunched_note(metrics, replies);
    // Replies with no rate that were not bunched: their text came in one read.
    let missing: Vec<String> = metrics
        .iter()
        .enumerate()
        .filter(|(_, m)| m.rate_tok_s.is_none() && m.bunched.is_none())
        .map(|(i, _)| index(i).to_string())
        .collect();
    let why_missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "; no rate for reply {}: its text did not arrive in at least two reads",
            missing.join(", ")
        )
    };
    let Some(med) = median(&have) else {
        let text = if metrics.is_empty() {
            "no replies to measure".to_string()
        } else if !bunched.is_empty() {
            // Both kinds named: a reply held back may reach the gate in one read or in a few.
            format!("no reply has a rate (floor {floor:.1}){why_missing}{bunched}{disbelieved}")
        } else {
            format!(
                "no reply has a rate: each needs text that arrived in at least two reads, \
                 and a reply sent all at once has none (floor {floor:.1}){disbelieved}"
            )
        };
        let figures = Figures {
            floor: Some(floor),
            ..Figures::median(Unit::TokensPerSecond, &have, metrics.len())
        };
        return Line::new(Check::Rate, Status::Fail, text).with(figures);
    };
    let status = if med >= floor {
        Status::Ok
    } else {
        Status::Fail
    };
    let (shown, floor_shown) = distinct(med, floor, 1);
    let over = over_replies(have.len(), metrics.len());
    let trust = what_it_rests_on(&have, floor, "floor", 1);
    Line::new(
        Check::Rate,
        status,
        format!(
            "median {shown} tok/s{over}{} (floor {floor_shown}; each: {}{why_missing}){bunched}{}{}{disbelieved}",
            trust.interval,
            each.join(", "),
            trust.notes,
            few_gaps(metrics)
        ),
    )
    .with(Figures {
        floor: Some(floor),
        ..Figures::median(Unit::TokensPerSecond, &have, metrics.len())
    })
}

/// The replies whose text arrived bunched ([`crate::judging::measure::bunched`]), named with the
/// first one's figures: `; no rate for reply 1, 2: 90% of its text arrived within 0.2% of its
/// time (reply 1: 180 of 200 text events in 7.1 ms of 3012 ms), held back and sent at once,
/// so no decode rate can be read from the client`. Empty when none was.
fn bunched_note(metrics: &[ReplyMetrics], replies: &[ReplyRecord]) -> String {
    let index = |i: usize| replies.get(i).map_or(i + 1, |r| r.index);
    let mut names = Vec::new();
    let mut first = None;
    for (i, m) in metrics.iter().enumerate() {
        if let Some(b) = m.bunched {
            names.push(index(i).to_string());
            first.get_or_insert((index(i), b));
        }
    }
    let Some((at, b)) = first else {
        return String::new();
    };
    let shown = names.len().min(EACH_SHOWN);
    let mut named = names[..shown].join(", ");
    if names.len() > shown {
        named.push_str(&format!(" and {} more", names.len() - shown));
    }
    let share = b.window_ns as f64 / b.span_ns.max(1) as f64 * 100.0;
    format!(
        "; no rate for reply {named}: {}% of {} text arrived within {share:.1}% of {} time \
         (reply {at}: {} of {} text events in {:.1} ms of {:.0} ms), held back and sent at once, \
         so no decode rate can be read from the client",
        crate::judging::measure::BUNCH_EVENTS_PCT,
        if names.len() == 1 { "its" } else { "their" },
        if names.len() == 1 { "its" } else { "their" },
        b.events,
        b.of,
        b.window_ns as f64 / 1e6,
        b.span_ns as f64 / 1e6,
    )
}

/// Fewer gaps between a reply's text events than this make its rate a figure of little weight.
pub(crate) const FEW_GAPS: usize = 10;

/// "; few tokens: ..." when the replies with a rate have a median of under [`FEW_GAPS`] gaps
/// between their text events: a rate from 6 gaps (SmolLM2's 7-token answers) moves with one
/// late token, and the reader should know what it rests on.
pub(crate) fn few_gaps(metrics: &[ReplyMetrics]) -> String {
    let gaps: Vec<f64> = metrics
        .iter()
        .filter(|m| m.rate_tok_s.is_some())
        .map(|m| m.text_chunks.saturating_sub(1) as f64)
        .collect();
    match median(&gaps) {
        Some(g) if g < FEW_GAPS as f64 => format!(
            "; few tokens: each rate rests on a median of {g:.0} gaps between tokens, under {FEW_GAPS}: prompts with longer answers measure it better"
        ),
        _ => String::new(),
    }
}

/// "; usage not believed for reply N: ..." for each reply whose usage count claimed more
/// tokens than its streamed text could hold: the reader should know the rate is not the one
/// the serve claimed, and why.
pub(crate) fn usage_not_believed(metrics: &[ReplyMetrics], replies: &[ReplyRecord]) -> String {
    metrics
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let u = m.usage_not_believed?;
            Some(format!(
                "; usage not believed for reply {}: it claimed {} tokens for {} {} of {} bytes of text; the rate is from the chunks",
                replies.get(i).map_or(i + 1, |r| r.index),
                u.claimed,
                u.text_chunks,
                if u.text_chunks == 1 { "chunk" } else { "chunks" },
                u.text_bytes
            ))
        })
        .collect()
}

/// The first-token line: the median time to the first token `of` each reply (of any channel,
/// or its first content token) against `limit_ms`. A reply without that token has no figure.
pub(crate) fn first_token_line(
    metrics: &[ReplyMetrics],
    limit_ms: f64,
    of: FirstTokenOf,
    replies: &[ReplyRecord],
) -> Line {
    let (have, what, token): (Vec<f64>, _, _) = match of {
        FirstTokenOf::Any => (
            metrics.iter().filter_map(|m| m.first_token_ms).collect(),
            "",
            "a token",
        ),
        FirstTokenOf::Content => (
            metrics
                .iter()
                .filter_map(|m| m.first_content_token_ms)
                .collect(),
            "first content token ",
            "a content token",
        ),
    };
    let Some(med) = median(&have) else {
        let text = if metrics.is_empty() {
            "no replies to measure".to_string()
        } else {
            format!("no reply produced {token} (limit {limit_ms:.0})")
        };
        let figures = Figures {
            limit: Some(limit_ms),
            ..Figures::median(Unit::Milliseconds, &have, metrics.len())
        };
        return Line::new(Check::FirstToken, Status::Fail, text).with(figures);
    };
    let status = if med <= limit_ms {
        Status::Ok
    } else {
        Status::Fail
    };
    let (shown, limit_shown) = distinct(med, limit_ms, 0);
    let over = over_replies(have.len(), metrics.len());
    let trust = what_it_rests_on(&have, limit_ms, "limit", 0);
    Line::new(
        Check::FirstToken,
        status,
        format!(
            "{what}median {shown} ms{over}{} (limit {limit_shown}){}{}",
            trust.interval,
            trust.notes,
            prompt_cache_note(
                replies,
                &metrics
                    .iter()
                    .map(|m| match of {
                        FirstTokenOf::Any => m.first_token_ms,
                        FirstTokenOf::Content => m.first_content_token_ms,
                    })
                    .collect::<Vec<_>>()
            )
        ),
    )
    .with(Figures {
        limit: Some(limit_ms),
        ..Figures::median(Unit::Milliseconds, &have, metrics.len())
    })
}

/// Which first token was measured: a cached prompt's skips prompt processing (llama-server:
/// about 145 ms down to 10 ms). Said only where the serve reports it. When the replies mix
/// prompts served from the cache with cold ones ([`served_from_cache`]) and the two kinds'
/// medians of `first_token_ms` (aligned with `replies`) lie [`MIXTURE_FACTOR`] or more apart,
/// it says so: the median of such a mixture describes neither kind.
pub(crate) fn prompt_cache_note(replies: &[ReplyRecord], first_token_ms: &[Option<f64>]) -> String {
    let reported: Vec<u64> = replies
        .iter()
        .filter_map(|r| r.cached_prompt_tokens)
        .collect();
    if reported.is_empty() {
        return String::new();
    }
    let reused = match reported.iter().filter(|&&n| n > 0).count() {
        0 => return "; no reply reused a cached prompt".to_string(),
        n => format!("; {n} of {} replies reused a cached prompt", replies.len()),
    };
    let kind = |cached: bool| -> Vec<f64> {
        replies
            .iter()
            .zip(first_token_ms)
            .filter(|(r, _)| served_from_cache(r) == Some(cached))
            .filter_map(|(_, ms)| *ms)
            .collect()
    };
    let (cached, cold) = (kind(true), kind(false));
    match (median(&cached), median(&cold)) {
        (Some(hit), Some(miss)) if hit > 0.0 && miss > 0.0 => {
            let apart = (miss / hit).max(hit / miss);
            if apart < MIXTURE_FACTOR {
                return reused;
            }
            format!(
                "{reused}; whole from the cache: {} (median {hit:.0} ms), cold: {} (median {miss:.0} ms), {apart:.1}x apart: the median of the mixture describes neither",
                plural(cached.len(), "reply", "replies"),
                plural(cold.len(), "reply", "replies"),
            )
        }
        _ => reused,
    }
}

/// How far apart (as a ratio) the medians of cold and cached first tokens must be for the
/// first-token line to say its median is of a mixture: twice. llama-server's cached first
/// tokens were a fifth of its cold ones; timing noise between replies is a few percent.
pub(crate) const MIXTURE_FACTOR: f64 = 2.0;

/// " over N replies", or " over N of M replies" when some replies have no figure.
pub(crate) fn over_replies(have: usize, of: usize) -> String {
    match (have, of) {
        (1, 1) => " over 1 reply".to_string(),
        (h, o) if h == o => format!(" over {o} replies"),
        (h, o) => format!(" over {h} of {o} replies"),
    }
}

/// What a median rests on: its 95% interval, and the notes a reader needs before trusting it.
pub(crate) struct Trust {
    /// ", 95% interval LO to HI", where there are enough values.
    interval: String,
    /// "; marginal: ..." and/or "; thin: ...".
    notes: String,
}

/// Fewer timed replies than this make a median too thin to lean on (the line's "thin" note).
/// Not the baseline's [`FEWEST_REPLIES_A_SIDE`](crate::judging::baseline::FEWEST_REPLIES_A_SIDE),
/// the replies a side a comparison with a baseline needs to decide.
const THIN_MEDIAN_BELOW: usize = 3;

/// The interval of the median of `values` and how `bound` (a floor or a limit) sits in it.
/// The verdict still follows the median; a bound inside the interval means a re-run may flip
/// it, and the reader should know.
pub(crate) fn what_it_rests_on(
    values: &[f64],
    bound: f64,
    bound_name: &str,
    decimals: usize,
) -> Trust {
    let mut notes = String::new();
    let interval = match median_ci95(values) {
        Some((lo, hi)) => {
            if lo <= bound && bound <= hi {
                notes.push_str(&format!(
                    "; marginal: the {bound_name} is inside the median's 95% interval, so a re-run may flip this line"
                ));
            }
            format!(", 95% interval {lo:.decimals$} to {hi:.decimals$}")
        }
        None => String::new(),
    };
    if values.len() < THIN_MEDIAN_BELOW {
        notes.push_str(&format!(
            "; thin: fewer than {THIN_MEDIAN_BELOW} timed replies, use --replies {CI_MIN_VALUES} or more for an interval"
        ));
    }
    Trust { interval, notes }
}

/// `value` and `bound` formatted with `decimals`, or with more where rounding would show them
/// equal though they differ: "median 60.0 tok/s (floor 60.0)" on a FAIL would read as a bug.
pub(crate) fn distinct(value: f64, bound: f64, decimals: usize) -> (String, String) {
    let show = |d: usize| (format!("{value:.d$}"), format!("{bound:.d$}"));
    if value == bound {
        return show(decimals);
    }
    let most = decimals + 6;
    (decimals..=most)
        .map(show)
        .find(|(v, b)| v != b)
        .unwrap_or_else(|| show(most))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::measure::measure;
    use crate::judging::measure::tests::reasoning_first;

    fn line_of(replies: &[ReplyRecord], limit_ms: f64, of: FirstTokenOf) -> Line {
        let metrics: Vec<ReplyMetrics> = replies.iter().map(measure).collect();
        first_token_line(&metrics, limit_ms, of, replies)
    }

    #[test]
    fn content_holds_the_first_content_token_to_the_limit_and_says_so() {
        // Reasoning from 100 ms, the answer from 1,400, 1,450 and 1,500 ms: a limit of 1 s
        // between the two figures passes the first token and fails the first content token.
        let replies: Vec<ReplyRecord> = [1400, 1450, 1500]
            .iter()
            .map(|&answer| reasoning_first(&[100, 200], &[answer, answer + 10]))
            .collect();
        let any = line_of(&replies, 1000.0, FirstTokenOf::Any);
        assert_eq!(any.status, Status::Ok);
        assert!(
            any.text
                .starts_with("median 100 ms over 3 replies (limit 1000)"),
            "{}",
            any.text
        );
        let content = line_of(&replies, 1000.0, FirstTokenOf::Content);
        assert_eq!(content.status, Status::Fail);
        assert!(
            content
                .text
                .starts_with("first content token median 1450 ms over 3 replies (limit 1000)"),
            "{}",
            content.text
        );
        let f = content.figures.unwrap();
        assert_eq!(
            (f.median, f.values, f.limit),
            (Some(1450.0), Some(3), Some(1000.0))
        );
    }

    #[test]
    fn a_reply_without_a_content_token_has_none_as_a_reply_without_a_token_has_none() {
        // One reply is cut while reasoning: it has a first token and no first content token.
        let replies = [
            reasoning_first(&[100], &[300]),
            reasoning_first(&[100], &[500]),
            reasoning_first(&[100, 200], &[]),
        ];
        let content = line_of(&replies, 1000.0, FirstTokenOf::Content);
        assert!(
            content
                .text
                .starts_with("first content token median 400 ms over 2 of 3 replies"),
            "{}",
            content.text
        );
        assert!(line_of(&replies, 1000.0, FirstTokenOf::Any)
            .text
            .starts_with("median 100 ms over 3 replies"),);
        // None had one: a FAIL, never a zero.
        let cut = [reasoning_first(&[100, 200], &[])];
        let l = line_of(&cut, 1000.0, FirstTokenOf::Content);
        assert_eq!(l.status, Status::Fail);
        assert_eq!(l.text, "no reply produced a content token (limit 1000)");
        assert_eq!(l.figures.unwrap().median, None);
        assert_eq!(line_of(&cut, 1000.0, FirstTokenOf::Any).status, Status::Ok);
        assert_eq!(
            line_of(&[], 1000.0, FirstTokenOf::Content).text,
            "no replies to measure"
        );
    }

    #[test]
    fn first_token_of_reads_its_two_names_and_refuses_others_in_one_line() {
        assert_eq!(FirstTokenOf::parse("any"), Ok(FirstTokenOf::Any));
        assert_eq!(FirstTokenOf::parse(" content "), Ok(FirstTokenOf::Content));
        for of in [FirstTokenOf::Any, FirstTokenOf::Content] {
            assert_eq!(FirstTokenOf::parse(of.name()), Ok(of));
        }
        let e = FirstTokenOf::parse("other").unwrap_err();
        assert!(
            e.starts_with("\"other\" is not a first token: give any"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }
}
