//! The latency line (issue 21, item 5): the figures vLLM's and guidellm's reports give, named
//! as they name them (TTFT, ITL, TPOT, E2EL), so a number can be compared across tools. Always
//! information: the gate's own limits are the rate and first-token lines'.

use super::words::plural;
use crate::archive::check::Check;
use crate::archive::record::{Figures, Line, Percentiles, ReplyRecord, Status};
use crate::judging::latency::{latency_figures, LatencyFigures};

/// The `latency` line over `replies` (the judged ones: no warm-ups).
pub(crate) fn latency_line(replies: &[ReplyRecord]) -> Line {
    let f = latency_figures(replies);
    Line::new(Check::Latency, Status::Info, latency_text(&f)).with(Figures {
        ttft_ms: f.ttft_ms,
        ttfo_ms: f.ttfo_ms,
        itl_ms: f.itl_ms,
        tpot_ms: f.tpot_ms,
        e2el_ms: f.e2el_ms,
        values: Some(f.timed),
        replies: Some(f.replies),
        ..Figures::default()
    })
}

/// A figure in ms with the digits that matter at its size: 212, 10.1, 0.85.
fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `TTFT p50 212 ms, p90 250, p99 290`; with `mean`, the mean first (vLLM's headline TPOT).
fn part(name: &str, p: &Percentiles, mean: bool) -> String {
    let head = if mean {
        format!("{name} mean {} ms, p50 {}", ms(p.mean), ms(p.p50))
    } else {
        format!("{name} p50 {} ms", ms(p.p50))
    };
    format!("{head}, p90 {}, p99 {}", ms(p.p90), ms(p.p99))
}

fn latency_text(f: &LatencyFigures) -> String {
    // TTFO is said where it tells something: where a reply reasoned before its answer.
    let ttfo = if f.reasoned_first > 0 {
        &f.ttfo_ms
    } else {
        &None
    };
    let parts: Vec<String> = [
        ("TTFT", &f.ttft_ms, false),
        ("TTFO", ttfo, false),
        ("ITL", &f.itl_ms, false),
        ("TPOT", &f.tpot_ms, true),
        ("E2EL", &f.e2el_ms, false),
    ]
    .into_iter()
    .filter_map(|(name, p, mean)| p.as_ref().map(|p| part(name, p, mean)))
    .collect();
    if parts.is_empty() {
        return if f.replies == 0 {
            "no replies to time".to_string()
        } else {
            "no reply that finished without error had anything to time".to_string()
        };
    }
    let over = if f.timed == f.replies {
        format!("over {}", plural(f.timed, "reply", "replies"))
    } else {
        format!(
            "over {} of {} replies (a failed reply is not timed)",
            f.timed, f.replies
        )
    };
    let bursts = match f.burst_streams {
        0 => String::new(),
        n => format!(", {n} of them burst streams"),
    };
    let no_tpot = if f.tpot_ms.is_none() {
        "; no TPOT: no reply had two tokens or more"
    } else {
        ""
    };
    format!(
        "{}; {over}{bursts}{no_tpot}{}",
        parts.join("; "),
        ttfo_note(f)
    )
}

/// What TTFO stands for and what it rests on, where the line gives it: how many replies
/// reasoned before their first content token, and how many never had one.
fn ttfo_note(f: &LatencyFigures) -> String {
    let (Some(ttfo), true) = (&f.ttfo_ms, f.reasoned_first > 0) else {
        return String::new();
    };
    let with_text = f.ttft_ms.as_ref().map_or(0, |p| p.count);
    let none = match with_text.saturating_sub(ttfo.count) {
        0 => String::new(),
        n => format!(", {n} had no content token"),
    };
    format!(
        "; TTFO is to the first content token: {} of {} reasoned first{none}",
        f.reasoned_first,
        plural(f.timed, "reply", "replies")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::BurstSlot;
    use crate::judging::measure::tests::{reasoning_first, reply_at};

    #[test]
    fn the_line_names_the_figures_as_the_peers_do() {
        let a = reply_at(&[100, 110, 120, 130, 140], None);
        let b = reply_at(&[300, 320, 340], None);
        let l = latency_line(&[a, b]);
        assert_eq!(l.status, Status::Info);
        assert_eq!(
            l.text,
            "TTFT p50 200 ms, p90 280, p99 298; ITL p50 10.0 ms, p90 20.0, p99 20.0; \
             TPOT mean 15.0 ms, p50 15.0, p90 19.0, p99 19.9; E2EL p50 240 ms, p90 320, p99 338; \
             over 2 replies"
        );
        let f = l.figures.unwrap();
        assert_eq!(f.ttft_ms.unwrap().p99, 298.0);
        assert_eq!(f.e2el_ms.unwrap().count, 2);
        assert_eq!((f.values, f.replies), (Some(2), Some(2)));
    }

    #[test]
    fn the_line_says_what_it_rests_on() {
        let mut failed = reply_at(&[100, 110], None);
        failed.error = Some("cut".into());
        let mut stream = reply_at(&[100], None);
        stream.burst = Some(BurstSlot {
            round: 1,
            stream: 1,
        });
        let l = latency_line(&[reply_at(&[100], None), stream, failed]);
        assert!(
            l.text.ends_with(
                "over 2 of 3 replies (a failed reply is not timed), 1 of them burst streams; \
                 no TPOT: no reply had two tokens or more"
            ),
            "{}",
            l.text
        );
        assert!(l.text.starts_with("TTFT p50 100 ms"), "{}", l.text);
        assert_eq!(latency_line(&[]).text, "no replies to time");
        let l = latency_line(&[reply_at(&[], None)]);
        assert_eq!(
            l.text,
            "no reply that finished without error had anything to time"
        );
        assert_eq!(l.status, Status::Info);
    }

    #[test]
    fn ttfo_is_said_beside_ttft_where_a_reply_reasoned_first() {
        // Two replies reason for 100 ms then answer at 1,450 and 1,650 ms; a third reasons
        // until it is cut and never answers.
        let a = reasoning_first(&[100, 110], &[1450, 1460]);
        let b = reasoning_first(&[100], &[1650]);
        let cut = reasoning_first(&[100, 200], &[]);
        let l = latency_line(&[a, b, cut]);
        assert!(
            l.text.starts_with(
                "TTFT p50 100 ms, p90 100, p99 100; TTFO p50 1550 ms, p90 1630, p99 1648; ITL"
            ),
            "{}",
            l.text
        );
        assert!(
            l.text.ends_with(
                "over 3 replies; TTFO is to the first content token: 2 of 3 replies reasoned first, \
                 1 had no content token"
            ),
            "{}",
            l.text
        );
        let f = l.figures.unwrap();
        let ttfo = f.ttfo_ms.unwrap();
        assert_eq!((ttfo.count, ttfo.p50), (2, 1550.0));
        assert_eq!(f.ttft_ms.unwrap().count, 3);
    }

    #[test]
    fn ttfo_equal_to_ttft_is_carried_and_not_said() {
        // No reply reasons first: TTFO is TTFT, in result.json, and not repeated on the line.
        let a = reply_at(&[100, 110, 120, 130, 140], None);
        let b = reply_at(&[300, 320, 340], None);
        let l = latency_line(&[a, b]);
        assert!(!l.text.contains("TTFO"), "{}", l.text);
        let f = l.figures.unwrap();
        assert_eq!(f.ttfo_ms, f.ttft_ms);
        // A reply with no text at all has neither.
        let f = latency_line(&[reply_at(&[], None)]).figures.unwrap();
        assert_eq!((f.ttft_ms, f.ttfo_ms), (None, None));
    }

    #[test]
    fn small_figures_keep_their_digits() {
        assert_eq!(
            (ms(212.4), ms(10.06), ms(0.853)),
            ("212".into(), "10.1".into(), "0.85".into())
        );
    }
}
