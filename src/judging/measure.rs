//! Figures derived from a recorded reply: tokens, first-token time, decode rate.
//!
//! Pure functions over [`ReplyRecord`]; the verdict calls them on live and archived runs alike.

use crate::archive::record::ReplyRecord;

/// What a reply measured, as a run records it; the archive owns the types.
pub use crate::archive::record::{Bunched, ReplyMetrics, TokenSource, UsageNotBelieved};

/// The share of a reply's text events ("most of its tokens"), in percent, whose arrival a rate
/// must not find bunched (rounded up: 9 of 10, 180 of 200).
pub const BUNCH_EVENTS_PCT: usize = 90;
/// A window holding [`BUNCH_EVENTS_PCT`] of a reply's text events that is shorter than this share
/// of the reply's time (send to last text) is bunched: the tokens were held back and sent at
/// once. A buffering serve's 200 tokens read at 26,745 tok/s after a 3 s first token arrived
/// within 0.2% of its time; a real serve's decode of 32 tokens after a long prefill stays above
/// 2% until the prefill is 49 times the decode.
pub const BUNCH_SHARE: f64 = 0.02;

/// Whether the text events arriving at `at` (in order) after a send at `sent_ns` are bunched:
/// the shortest window holding [`BUNCH_EVENTS_PCT`] of them is under [`BUNCH_SHARE`] of the time
/// from the send to the last. `None` for fewer than two events (no rate to judge anyway).
pub fn bunched(at: &[u64], sent_ns: u64) -> Option<Bunched> {
    let n = at.len();
    if n < 2 {
        return None;
    }
    let span_ns = at[n - 1].saturating_sub(sent_ns);
    let events = (n * BUNCH_EVENTS_PCT).div_ceil(100).clamp(2, n);
    let window_ns = at
        .windows(events)
        .map(|w| w[events - 1].saturating_sub(w[0]))
        .min()?;
    ((window_ns as f64) < BUNCH_SHARE * span_ns as f64).then_some(Bunched {
        events,
        of: n,
        window_ns,
        span_ns,
    })
}

/// The most tokens a reply's streamed text can hold: one a byte, and one more for each text
/// event (a token that decodes to nothing, such as the end of generation, at most one an
/// event). Bytes, not characters: a byte-level tokenizer may spend a token on each byte of an
/// emoji, so four tokens to one character is real; more tokens than bytes is not.
pub fn usage_ceiling(text_bytes: usize, text_chunks: usize) -> u64 {
    text_bytes as u64 + text_chunks as u64
}

/// Measure one reply.
///
/// Tokens are `usage.completion_tokens` when reported and believable, else the count of text
/// events. Usage is not believed when it claims more than [`usage_ceiling`] of the streamed
/// text: a serve that says 1,000,000 tokens for 5 one-word events would pass any floor on its
/// word alone. When
/// only a total is known and events may carry several tokens, the first event counts as
/// total / events. Decode rate = (tokens - first event's tokens) / (last - first): the wait for
/// the first token is first-token's business, not the rate's. Fewer than two text events, or
/// two that arrived in the same read, give no rate; nor does text that arrived [`bunched`].
pub fn measure(reply: &ReplyRecord) -> ReplyMetrics {
    let mut text = reply.chunks.iter().filter(|c| c.has_text());
    let text_chunks = text.clone().count();
    let first_ns = text.next().map(|c| c.at_ns);
    let last_ns = text.next_back().map(|c| c.at_ns).or(first_ns);
    // One more token than text events, at a "stop": the end-of-generation token, counted in
    // usage but never streamed. Counting it would spread it over the streamed events and
    // inflate the rate (by 1/6 for 7 events). A reply of multi-token events whose count
    // happens to be one more than its events reads the same way; that rare case is documented.
    // An empty reply with a count of 1 at a "stop" generated only that token: 0 streamed.
    let end_of_generation = reply.finish_reason.as_deref() == Some("stop")
        && reply.usage_completion_tokens == Some(text_chunks as u64 + 1);
    let text_bytes = reply.text_bytes();
    let usage_not_believed = reply
        .usage_completion_tokens
        .filter(|&n| !end_of_generation && n > usage_ceiling(text_bytes, text_chunks))
        .map(|claimed| UsageNotBelieved {
            claimed,
            text_chunks,
            text_bytes,
        });
    let (tokens, token_source, first_chunk_tokens) = match reply.usage_completion_tokens {
        Some(_) if usage_not_believed.is_some() => {
            let tokens = text_chunks as f64;
            let first = if text_chunks > 0 { 1.0 } else { 0.0 };
            (tokens, TokenSource::ChunksUsageNotBelieved, first)
        }
        Some(_) if end_of_generation => (
            text_chunks as f64,
            TokenSource::UsageLessEndOfGeneration,
            1.0,
        ),
        Some(n) => {
            let n = n as f64;
            // With no text event there is no first event to hold a share.
            let share = if text_chunks > 0 {
                n / text_chunks as f64
            } else {
                0.0
            };
            (n, TokenSource::Usage, share)
        }
        None if text_chunks > 0 => (text_chunks as f64, TokenSource::Chunks, 1.0),
        None => (0.0, TokenSource::None, 0.0),
    };
    let first_token_ms = first_ns.map(|f| f.saturating_sub(reply.sent_ns) as f64 / 1e6);
    let first_content_token_ms = first_content_token_ms(reply);
    let spread = matches!((first_ns, last_ns), (Some(f), Some(l)) if text_chunks >= 2 && l > f);
    let bunched = if spread {
        let at: Vec<u64> = reply
            .chunks
            .iter()
            .filter(|c| c.has_text())
            .map(|c| c.at_ns)
            .collect();
        bunched(&at, reply.sent_ns)
    } else {
        None
    };
    let rate_tok_s = match (first_ns, last_ns) {
        (Some(f), Some(l)) if spread && bunched.is_none() => {
            Some((tokens - first_chunk_tokens) / ((l - f) as f64 / 1e9))
        }
        _ => None,
    };
    let server_rate_tok_s = reply
        .server_timings
        .as_ref()
        .and_then(|t| t.get("predicted_per_second"))
        .and_then(|v| v.as_f64());
    ReplyMetrics {
        server_rate_tok_s,
        usage_not_believed,
        tokens,
        token_source,
        text_chunks,
        first_chunk_tokens,
        sent_ns: reply.sent_ns,
        first_ns,
        last_ns,
        first_token_ms,
        first_content_token_ms,
        rate_tok_s,
        bunched,
    }
}

/// The time from `reply`'s send to its first content token (an event with content or a tool
/// call's fragment: [`ChunkArrival::has_answer`]), in ms; `None` when it had none. For a reply
/// whose reasoning comes first this is what its user waits for before the answer starts
/// (aiperf's TTFO, ai-dynamo/aiperf#359); for any other it is its first token's time.
///
/// [`ChunkArrival::has_answer`]: crate::archive::record::ChunkArrival::has_answer
pub fn first_content_token_ms(reply: &ReplyRecord) -> Option<f64> {
    reply
        .chunks
        .iter()
        .find(|c| c.has_answer())
        .map(|c| c.at_ns.saturating_sub(reply.sent_ns) as f64 / 1e6)
}

/// Measure `reply` as it is recorded: each event's tokens written into it, and its metrics
/// kept beside the raw record (informational: judging measures again). Returns the metrics.
pub fn record_metrics(reply: &mut ReplyRecord) -> ReplyMetrics {
    let m = measure(reply);
    let tokens = chunk_tokens(reply, &m);
    for (c, t) in reply.chunks.iter_mut().zip(tokens) {
        c.tokens = t;
    }
    reply.metrics = Some(m.clone());
    m
}

/// The tokens each event of `reply` counts as, in event order (0 for events without text).
pub fn chunk_tokens(reply: &ReplyRecord, m: &ReplyMetrics) -> Vec<f64> {
    reply
        .chunks
        .iter()
        // A text event exists, so text_chunks is at least 1 here.
        .map(|c| {
            if c.has_text() {
                m.tokens / m.text_chunks as f64
            } else {
                0.0
            }
        })
        .collect()
}

/// The median of `values`: the middle one, or the mean of the middle two. `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// The fewest values whose order statistics can cover the median at 95%: with 6, the smallest
/// and largest do (1 - 2 / 2^6 = 96.9%); with 5 even they do not (93.8%).
pub const CI_MIN_VALUES: usize = 6;

/// A distribution-free 95% confidence interval for the median of `values`: the order
/// statistics X(j) and X(n+1-j) for the largest j whose coverage, 1 - 2 P(B <= j - 1) with
/// B ~ Binomial(n, 1/2), is still at least 95%. `None` under [`CI_MIN_VALUES`] values.
pub fn median_ci95(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < CI_MIN_VALUES {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    // P(B <= i) accumulated in log space: 0.5^n underflows past about a thousand replies.
    let ln2 = std::f64::consts::LN_2;
    let mut log_choose = 0.0; // ln C(n, j - 1)
    let mut cdf = 0.0; // P(B <= j - 1)
    let mut best = None;
    for j in 1..=n / 2 {
        cdf += (log_choose - n as f64 * ln2).exp();
        if 1.0 - 2.0 * cdf < 0.95 {
            break;
        }
        best = Some(j);
        log_choose += ((n - (j - 1)) as f64).ln() - (j as f64).ln();
    }
    let j = best?;
    Some((v[j - 1], v[n - j]))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::archive::record::ChunkArrival;

    const MS: u64 = 1_000_000;

    /// A reply sent at 0 whose text events arrive at `at_ms`, with an optional usage count.
    pub(crate) fn reply_at(at_ms: &[u64], usage: Option<u64>) -> ReplyRecord {
        let mut r = crate::selftest::cases::reply(at_ms, &"x".repeat(at_ms.len()));
        r.usage_completion_tokens = usage;
        r
    }

    #[test]
    fn chunk_count_rate_excludes_the_first_token() {
        // 5 tokens: first at 100 ms, then 4 more over 400 ms: 10 tok/s.
        let m = measure(&reply_at(&[100, 200, 300, 400, 500], None));
        assert_eq!(m.token_source, TokenSource::Chunks);
        assert_eq!(m.tokens, 5.0);
        assert_eq!(m.first_token_ms, Some(100.0));
        assert_eq!(m.rate_tok_s, Some(10.0));
    }

    #[test]
    fn usage_with_multi_token_chunks_counts_the_first_chunks_share() {
        // 3 events of 3 tokens each (usage 9): after the first, 6 tokens over 200 ms = 30 tok/s.
        let mut r = reply_at(&[100, 200, 300], Some(9));
        r.content = " ok ok ok".repeat(3); // three tokens of three bytes an event
        let m = measure(&r);
        assert_eq!(m.token_source, TokenSource::Usage);
        assert_eq!(m.first_chunk_tokens, 3.0);
        assert_eq!(m.rate_tok_s, Some(30.0));
    }

    #[test]
    fn one_chunk_has_no_rate() {
        let m = measure(&reply_at(&[100], None));
        assert_eq!(m.first_token_ms, Some(100.0));
        assert_eq!(m.rate_tok_s, None);
    }

    /// A serve that makes its tokens at its pace and sends them at the end (issue 30): 200
    /// events after 3 s, 0.1 ms apart, would read 10,000 tok/s; they are bunched, and have no
    /// rate. A real decode after a long prefill keeps its rate.
    #[test]
    fn text_held_back_and_sent_at_once_has_no_rate() {
        // Milliseconds here; events 0.1 ms apart need nanoseconds.
        let mut r = reply_at(&[0; 200], None);
        for (i, c) in r.chunks.iter_mut().enumerate() {
            c.at_ns = 3_000_000_000 + i as u64 * 100_000;
        }
        let m = measure(&r);
        assert_eq!(m.rate_tok_s, None);
        let b = m.bunched.expect("bunched");
        assert_eq!((b.events, b.of), (180, 200));
        assert_eq!(b.window_ns, 179 * 100_000);
        assert_eq!(b.span_ns, 3_000_000_000 + 199 * 100_000);
        // 32 tokens at 100 tok/s after a 10 s prefill: 90% within 2.8% of the time.
        let times: Vec<u64> = (0..32).map(|i| 10_000 + 10 * i).collect();
        let m = measure(&reply_at(&times, None));
        assert!(m.bunched.is_none());
        assert!((m.rate_tok_s.unwrap() - 100.0).abs() < 1e-9);
    }

    /// The rule's boundary, on the share: a window of exactly 2% of the time is not bunched;
    /// just under it is. And 90% of the events, rounded up: of 10, the window holds 9.
    #[test]
    fn bunching_is_judged_at_two_percent_of_the_reply_s_time_over_ninety_percent_of_events() {
        // Sent at 0; 10 events, the last at 1,000 ms: 9 of them within `w` ms.
        let at = |w: u64| -> Vec<u64> {
            let mut t: Vec<u64> = (0..9)
                .map(|i| (1_000 - w + w * i / 8) * 1_000_000)
                .collect();
            t.insert(0, 10_000_000);
            t
        };
        assert!(bunched(&at(20), 0).is_none(), "exactly 2% is not bunched");
        let b = bunched(&at(19), 0).expect("under 2% is");
        assert_eq!(
            (b.events, b.of, b.window_ns, b.span_ns),
            (9, 10, 19_000_000, 1_000_000_000)
        );
        // Fewer than two events: nothing to judge.
        assert!(bunched(&[5], 0).is_none());
        assert!(bunched(&[], 0).is_none());
        // Two events, the pair is the window.
        assert!(bunched(&[999_000_000, 1_000_000_000], 0).is_some());
        assert!(bunched(&[900_000_000, 1_000_000_000], 0).is_none());
    }

    #[test]
    fn two_chunks_in_one_read_have_no_rate() {
        assert_eq!(measure(&reply_at(&[100, 100], None)).rate_tok_s, None);
    }

    #[test]
    fn role_only_and_empty_events_are_not_the_first_token() {
        let mut r = reply_at(&[100, 200, 300], None);
        r.chunks.insert(
            0,
            ChunkArrival {
                at_ns: 5 * MS,
                content_chars: 0,
                reasoning_chars: 0,
                tokens: 0.0,
                tool_chars: 0,
            },
        );
        let m = measure(&r);
        assert_eq!(m.first_token_ms, Some(100.0));
        assert_eq!(m.text_chunks, 3);
        assert_eq!(chunk_tokens(&r, &m), vec![0.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn a_reasoning_event_is_the_first_token() {
        let mut r = reply_at(&[100, 200, 300], None);
        r.chunks[0].content_chars = 0;
        r.chunks[0].reasoning_chars = 4;
        assert_eq!(measure(&r).first_token_ms, Some(100.0));
    }

    /// A reply sent at 0 that reasons at `reasoning_ms`, then answers at `content_ms`.
    pub(crate) fn reasoning_first(reasoning_ms: &[u64], content_ms: &[u64]) -> ReplyRecord {
        let mut at = reasoning_ms.to_vec();
        at.extend_from_slice(content_ms);
        let mut r = reply_at(&at, None);
        for c in &mut r.chunks[..reasoning_ms.len()] {
            (c.content_chars, c.reasoning_chars) = (0, 6);
        }
        r
    }

    #[test]
    fn a_reasoning_first_reply_has_its_first_content_token_after_its_first_token() {
        let m = measure(&reasoning_first(&[100, 200, 300], &[1450, 1460]));
        assert_eq!(m.first_token_ms, Some(100.0));
        assert_eq!(m.first_content_token_ms, Some(1450.0));
        // Sent later than the clock's base: both are from the send.
        let mut r = reasoning_first(&[100], &[400]);
        r.sent_ns = 50 * MS;
        assert_eq!(measure(&r).first_content_token_ms, Some(350.0));
    }

    #[test]
    fn a_content_only_reply_has_both_figures_equal() {
        let m = measure(&reply_at(&[120, 130, 140], None));
        assert_eq!(m.first_token_ms, Some(120.0));
        assert_eq!(m.first_content_token_ms, m.first_token_ms);
        // A role event before the content (no text) is neither.
        let mut r = reply_at(&[120, 130], None);
        r.chunks[0].content_chars = 0;
        let m = measure(&r);
        assert_eq!(
            (m.first_token_ms, m.first_content_token_ms),
            (Some(130.0), Some(130.0))
        );
    }

    #[test]
    fn a_tool_calls_first_fragment_is_the_first_content_token() {
        // A reply that only calls a tool: its call is its answer.
        let mut r = reply_at(&[200, 210, 220], None);
        for c in &mut r.chunks {
            (c.content_chars, c.tool_chars) = (0, 5);
        }
        let m = measure(&r);
        assert_eq!(
            (m.first_token_ms, m.first_content_token_ms),
            (Some(200.0), Some(200.0))
        );
        // Reasoning, then the call.
        let mut r = reasoning_first(&[100, 150], &[900]);
        (r.chunks[2].content_chars, r.chunks[2].tool_chars) = (0, 12);
        let m = measure(&r);
        assert_eq!(
            (m.first_token_ms, m.first_content_token_ms),
            (Some(100.0), Some(900.0))
        );
    }

    #[test]
    fn a_reply_with_no_content_token_has_none_never_zero() {
        // Cut while still reasoning (max_tokens spent on the reasoning): a first token, and no
        // first content token.
        let m = measure(&reasoning_first(&[100, 200, 300], &[]));
        assert_eq!(
            (m.first_token_ms, m.first_content_token_ms),
            (Some(100.0), None)
        );
        let m = measure(&reply_at(&[], None));
        assert_eq!(m.first_content_token_ms, None);
    }

    #[test]
    fn no_text_means_no_figures_never_zero() {
        let m = measure(&reply_at(&[], None));
        assert_eq!(m.token_source, TokenSource::None);
        assert_eq!(m.first_token_ms, None);
        assert_eq!(m.rate_tok_s, None);
    }

    #[test]
    fn usage_without_text_is_not_believed_and_has_no_first_chunk_share() {
        let m = measure(&reply_at(&[], Some(5)));
        assert_eq!(m.token_source, TokenSource::ChunksUsageNotBelieved);
        assert_eq!(m.tokens, 0.0);
        assert_eq!(m.first_chunk_tokens, 0.0);
        assert_eq!(m.rate_tok_s, None);
    }

    #[test]
    fn usage_that_the_text_cannot_hold_is_not_believed() {
        // 5 one-character events 500 ms apart (the lying serve's 2 s): a million tokens
        // would be 399,633 tok/s; the chunks say 2.
        let lie = reply_at(&[100, 600, 1100, 1600, 2100], Some(1_000_000));
        let m = measure(&lie);
        assert_eq!(m.token_source, TokenSource::ChunksUsageNotBelieved);
        assert_eq!((m.tokens, m.first_chunk_tokens), (5.0, 1.0));
        assert_eq!(m.rate_tok_s, Some(2.0));
        assert_eq!(
            m.usage_not_believed,
            Some(UsageNotBelieved {
                claimed: 1_000_000,
                text_chunks: 5,
                text_bytes: 5
            })
        );
        // At the ceiling (a byte a token, one more an event) it is believed; one over, not.
        let at = measure(&reply_at(&[100, 200, 300], Some(6)));
        assert_eq!(
            (at.token_source, at.usage_not_believed),
            (TokenSource::Usage, None)
        );
        let over = measure(&reply_at(&[100, 200, 300], Some(7)));
        assert_eq!(over.token_source, TokenSource::ChunksUsageNotBelieved);
        // Several tokens a byte of text is not believed, several bytes a token is.
        let mut emoji = reply_at(&[100, 200], Some(6));
        emoji.content = "\u{1f600}\u{1f600}".into(); // 8 bytes, 2 characters
        assert_eq!(measure(&emoji).token_source, TokenSource::Usage);
    }

    #[test]
    fn a_failed_replys_cut_text_counts_at_its_size_before_the_cut() {
        let mut r = reply_at(&[100, 200, 300], Some(60));
        assert_eq!(
            measure(&r).token_source,
            TokenSource::ChunksUsageNotBelieved
        );
        r.text_cut = Some(crate::archive::record::TextCut {
            content_bytes: 100,
            reasoning_bytes: 0,
        });
        assert_eq!(measure(&r).token_source, TokenSource::Usage);
    }

    #[test]
    fn token_sources_read_back_from_older_archives() {
        for (text, source) in [
            ("\"usage\"", TokenSource::Usage),
            ("\"chunks\"", TokenSource::Chunks),
            (
                "\"usage-less-end-of-generation\"",
                TokenSource::UsageLessEndOfGeneration,
            ),
            (
                "\"chunks-usage-not-believed\"",
                TokenSource::ChunksUsageNotBelieved,
            ),
        ] {
            assert_eq!(serde_json::from_str::<TokenSource>(text).unwrap(), source);
            assert_eq!(serde_json::to_string(&source).unwrap(), text);
        }
        let old = r#"{"tokens":3.0,"token_source":"usage","text_chunks":3,"first_chunk_tokens":1.0,
            "sent_ns":0,"first_ns":1,"last_ns":3,"first_token_ms":0.0,"rate_tok_s":1.0}"#;
        let m: ReplyMetrics = serde_json::from_str(old).unwrap();
        assert_eq!(m.usage_not_believed, None);
        assert_eq!(m.first_content_token_ms, None);
    }

    #[test]
    fn an_unstreamed_end_of_generation_token_is_not_counted() {
        // llama-server: 7 content chunks, completion_tokens 8, finish "stop".
        let mut r = reply_at(&[100, 200, 300, 400, 500, 600, 700], Some(8));
        let m = measure(&r);
        assert_eq!(m.token_source, TokenSource::UsageLessEndOfGeneration);
        assert_eq!(m.tokens, 7.0);
        assert_eq!(m.rate_tok_s, Some(10.0));
        // Cut off by max_tokens: every counted token was streamed.
        r.finish_reason = Some("length".into());
        assert_eq!(measure(&r).token_source, TokenSource::Usage);
        // Only the end-of-generation token: nothing was streamed.
        let m = measure(&reply_at(&[], Some(1)));
        assert_eq!(
            (m.token_source, m.tokens),
            (TokenSource::UsageLessEndOfGeneration, 0.0)
        );
        // Usage equal to the events: nothing unstreamed.
        let m = measure(&reply_at(&[100, 200, 300], Some(3)));
        assert_eq!(
            (m.token_source, m.rate_tok_s),
            (TokenSource::Usage, Some(10.0))
        );
    }

    #[test]
    fn the_serves_own_rate_is_kept_beside_the_gates() {
        let mut r = reply_at(&[100, 200], None);
        r.server_timings = Some(serde_json::json!({"predicted_per_second": 171.5}));
        assert_eq!(measure(&r).server_rate_tok_s, Some(171.5));
    }

    #[test]
    fn the_median_interval_starts_at_six_values_and_narrows_with_more() {
        let ranks = |n: usize| -> Vec<f64> { (1..=n).map(|i| i as f64).collect() };
        assert_eq!(median_ci95(&ranks(5)), None);
        // n = 6..=8: only the extremes cover 95% (j = 1).
        assert_eq!(median_ci95(&ranks(6)), Some((1.0, 6.0)));
        assert_eq!(median_ci95(&ranks(8)), Some((1.0, 8.0)));
        // n = 9: P(B <= 1) = 10/512, coverage of [X(2), X(8)] = 96.1%.
        assert_eq!(median_ci95(&ranks(9)), Some((2.0, 8.0)));
        // n = 20: the textbook interval is [X(6), X(15)] (95.9%).
        assert_eq!(median_ci95(&ranks(20)), Some((6.0, 15.0)));
        // Large n stays finite and close to n/2 +/- 1.96 sqrt(n)/2.
        let (lo, hi) = median_ci95(&ranks(10_000)).unwrap();
        assert!(
            (4890.0..4910.0).contains(&lo) && (5090.0..5110.0).contains(&hi),
            "{lo} {hi}"
        );
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
