//! timeline.svg: one row per reply on a shared time axis (each row starts at its request's
//! send), the wait for the first token as a bar, each token's arrival as a dot, the first-token
//! limit as a line. A stall, a slow first token or a slow route shows at a glance.

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::archive::record::ReplyRecord;
use crate::judging::measure::measure;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A row is about 900 pixels wide: more dots than this are drawn on top of one another, and
/// drawing 20,000 of them costs the gate more than streaming them did.
const MAX_DOTS_PER_ROW: usize = 1000;

/// At most `max` of `points`: every n-th, always keeping the last (where a stall at the end
/// shows).
fn thin(points: &[f64], max: usize) -> Vec<f64> {
    if points.len() <= max {
        return points.to_vec();
    }
    let step = points.len().div_ceil(max.saturating_sub(1).max(1));
    let mut kept: Vec<f64> = points.iter().step_by(step).copied().collect();
    if let Some(&last) = points.last() {
        if kept.last() != Some(&last) {
            kept.push(last);
        }
    }
    kept
}

/// What marks a row: a reply that failed or whose first token was over the limit.
fn row_mark(r: &ReplyRecord, first_token_ms: Option<f64>, limit_ms: f64) -> Option<String> {
    if let Some(problem) = crate::judging::verdict::reply_problem(r) {
        return Some(format!("FAIL: {problem}"));
    }
    match first_token_ms {
        Some(f) if f > limit_ms => Some("over the first-token limit".to_string()),
        _ => None,
    }
}

/// The timeline of `replies` as SVG text: one row per reply, top-down in the order they were
/// made, each with its first-token time and rate beside it and a mark where it failed or was
/// over the limit; a legend; the limit labelled.
pub fn svg(replies: &[ReplyRecord], first_token_limit_ms: f64, title: &str) -> Result<String> {
    let mut out = String::new();
    let rows = replies.len().max(1);
    let x_end = replies
        .iter()
        .map(|r| ms(r.end_ns.saturating_sub(r.sent_ns)))
        .fold(first_token_limit_ms, f64::max);
    // Room on the right for each row's figures.
    let x_max = x_end * 1.45;
    {
        let height = 120 + 36 * rows as u32;
        let root = SVGBackend::with_string(&mut out, (960, height)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| anyhow!("failed to draw the timeline: {e}");
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(34)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..x_max, 0.5f64..(rows as f64 + 0.5))
            .map_err(err)?;
        // Reply 1 on top: row i is drawn at y = rows - i.
        let y_of = |i: usize| (rows - i) as f64;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("ms since the request was sent")
            // No row to name when no reply finished.
            .y_labels(if replies.is_empty() { 0 } else { rows })
            .y_label_formatter(&|y| {
                let row = rows as f64 + 1.0 - y.round();
                format!("reply {}", row as usize)
            })
            .draw()
            .map_err(err)?;
        if replies.is_empty() {
            chart
                .draw_series(std::iter::once(Text::new(
                    "no reply finished: nothing to draw",
                    (x_max * 0.3, 1.0),
                    ("sans-serif", 18).into_font().color(&RED),
                )))
                .map_err(err)?;
        }
        let mut legend_done = false;
        for (i, r) in replies.iter().enumerate() {
            let y = y_of(i);
            let m = measure(r);
            if let Some(first) = m.first_token_ms {
                let over = first > first_token_limit_ms;
                let colour = if over { RED.mix(0.35) } else { BLUE.mix(0.25) };
                let bar = chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, y - 0.18), (first, y + 0.18)],
                        colour.filled(),
                    )))
                    .map_err(err)?;
                if !legend_done {
                    bar.label("bar: the wait for the first token")
                        .legend(|(x, y)| {
                            Rectangle::new([(x, y - 4), (x + 14, y + 4)], BLUE.mix(0.25).filled())
                        });
                }
            }
            let arrivals: Vec<f64> = r
                .chunks
                .iter()
                .filter(|c| c.has_text())
                .map(|c| ms(c.at_ns.saturating_sub(r.sent_ns)))
                .collect();
            let dots = thin(&arrivals, MAX_DOTS_PER_ROW)
                .into_iter()
                .map(|x| Circle::new((x, y), 2, BLACK.filled()));
            let dots = chart.draw_series(dots).map_err(err)?;
            if !legend_done {
                dots.label("dot: the arrival of a token")
                    .legend(|(x, y)| Circle::new((x + 7, y), 3, BLACK.filled()));
                legend_done = true;
            }
            let first = m
                .first_token_ms
                .map_or("no first token".to_string(), |f| format!("{f:.0} ms"));
            let rate = m
                .rate_tok_s
                .map_or("no rate".to_string(), |r| format!("{r:.1} tok/s"));
            let (text, colour) = match row_mark(r, m.first_token_ms, first_token_limit_ms) {
                Some(mark) => (format!("{first}, {rate}; {mark}"), RED),
                None => (format!("{first}, {rate}"), BLACK),
            };
            let text: String = text.chars().take(60).collect();
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (x_end * 1.02, y + 0.1),
                    ("sans-serif", 12).into_font().color(&colour),
                )))
                .map_err(err)?;
        }
        chart
            .draw_series(LineSeries::new(
                [
                    (first_token_limit_ms, 0.5),
                    (first_token_limit_ms, rows as f64 + 0.5),
                ],
                RED.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!(
                "red line: the first-token limit, {first_token_limit_ms:.0} ms"
            ))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], RED.stroke_width(2)));
        chart
            .draw_series(std::iter::once(Text::new(
                format!("limit {first_token_limit_ms:.0} ms"),
                (first_token_limit_ms, rows as f64 + 0.45),
                ("sans-serif", 12).into_font().color(&RED),
            )))
            .map_err(err)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::cases::reply;

    #[test]
    fn thinning_keeps_at_most_max_and_the_first_and_last() {
        let points: Vec<f64> = (0..20_000).map(f64::from).collect();
        let kept = thin(&points, 1000);
        assert!(kept.len() <= 1000, "{}", kept.len());
        assert!(kept.len() > 900, "{}", kept.len());
        assert_eq!((kept[0], *kept.last().unwrap()), (0.0, 19_999.0));
        assert_eq!(thin(&points[..5], 1000).len(), 5);
    }

    /// The SVG's circles and its texts with their y positions.
    fn read(svg: &str) -> (usize, Vec<(String, f64)>) {
        let mut reader = quick_xml::Reader::from_str(svg);
        let mut circles = 0;
        let mut texts = Vec::new();
        let mut y = 0.0;
        loop {
            match reader.read_event().expect("the SVG is well-formed XML") {
                quick_xml::events::Event::Eof => break,
                quick_xml::events::Event::Empty(e) | quick_xml::events::Event::Start(e) => {
                    match e.name().as_ref() {
                        b"circle" => circles += 1,
                        b"text" => {
                            y = e
                                .attributes()
                                .flatten()
                                .find(|a| a.key.as_ref() == b"y")
                                .and_then(|a| String::from_utf8_lossy(&a.value).parse().ok())
                                .unwrap_or(0.0)
                        }
                        _ => {}
                    }
                }
                quick_xml::events::Event::Text(t) => {
                    let t = t.decode().unwrap().trim().to_string();
                    if !t.is_empty() {
                        texts.push((t, y));
                    }
                }
                _ => {}
            }
        }
        (circles, texts)
    }

    fn y_of(texts: &[(String, f64)], text: &str) -> f64 {
        texts
            .iter()
            .find(|(t, _)| t.contains(text))
            .unwrap_or_else(|| panic!("no {text:?} in {texts:?}"))
            .1
    }

    #[test]
    fn one_row_per_reply_top_down_with_figures_marks_and_a_legend() {
        let mut wrong = reply(&[300, 310], "Berlin");
        wrong.expect = Some("Paris".into());
        let replies = [reply(&[100, 110, 120], "a"), wrong, reply(&[900, 950], "c")];
        let svg = svg(&replies, 600.0, "runs/a").unwrap();
        let (circles, texts) = read(&svg);
        assert_eq!(circles, 7 + 1, "a dot per token, and one in the legend");
        let all: String = texts
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join("|");
        assert!(all.contains("runs/a"), "{all}");
        assert!(!all.contains("reply 4"), "{all}");
        // Reply 1 on top (SVG y grows downwards).
        assert!(
            y_of(&texts, "reply 1") < y_of(&texts, "reply 2"),
            "{texts:?}"
        );
        assert!(
            y_of(&texts, "reply 2") < y_of(&texts, "reply 3"),
            "{texts:?}"
        );
        // Each row's figures; the failed row and the one over the limit marked.
        assert!(all.contains("100 ms, 100.0 tok/s"), "{all}");
        assert!(
            all.contains("300 ms, 100.0 tok/s; FAIL: wrong answer"),
            "{all}"
        );
        assert!(
            all.contains("900 ms, 20.0 tok/s; over the first-token limit"),
            "{all}"
        );
        // The limit is labelled and the legend says what bars and dots are.
        assert!(all.contains("limit 600 ms"), "{all}");
        assert!(all.contains("bar: the wait for the first token"), "{all}");
        assert!(all.contains("dot: the arrival of a token"), "{all}");
        assert!(
            all.contains("red line: the first-token limit, 600 ms"),
            "{all}"
        );
    }

    #[test]
    fn a_run_with_no_finished_reply_says_so() {
        let (circles, texts) = read(&svg(&[], 600.0, "runs/b").unwrap());
        assert_eq!(circles, 0);
        assert!(
            !texts.iter().any(|(t, _)| t.starts_with("reply")),
            "{texts:?}"
        );
        assert!(
            texts
                .iter()
                .any(|(t, _)| t == "no reply finished: nothing to draw"),
            "{texts:?}"
        );
    }
}
