//! A reply's figures as the run says them while it goes: the progress line of a single-stream
//! reply, and the figures part that the bursts' lines share. A leaf: the gate, the soak and
//! the bursts all say replies this way.

use crate::archive::record::ReplyRecord;
use crate::judging::measure;

/// A single-stream reply's progress line: `reply 3/10: 32 tokens, first token 51 ms, 98.0 tok/s`.
pub(crate) fn progress(r: &ReplyRecord, m: &measure::ReplyMetrics, of: usize) -> String {
    format!("reply {}/{of}: {}", r.index, figures_said(r, m))
}

/// A reply's figures for its progress line: `32 tokens, first token 51 ms, 98.0 tok/s`, and
/// its error.
pub(crate) fn figures_said(r: &ReplyRecord, m: &measure::ReplyMetrics) -> String {
    let first = m.first_token_ms.map_or("no first token".to_string(), |f| {
        format!("first token {f:.0} ms")
    });
    let rate = m
        .rate_tok_s
        .map_or("no rate".to_string(), |r| format!("{r:.1} tok/s"));
    let err = r
        .error
        .as_deref()
        .map_or(String::new(), |e| format!("; error: {e}"));
    format!("{} tokens, {first}, {rate}{err}", m.tokens)
}
