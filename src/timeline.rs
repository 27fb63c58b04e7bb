//! timeline.svg: one row per reply on a shared time axis (each row starts at its request's
//! send), the wait for the first token as a bar, each token's arrival as a dot, the first-token
//! limit as a line. A stall, a slow first token or a slow route shows at a glance.

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::measure::measure;
use crate::record::ReplyRecord;

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

/// The timeline of `replies` as SVG text.
pub fn svg(replies: &[ReplyRecord], first_token_limit_ms: f64, title: &str) -> Result<String> {
    let mut out = String::new();
    let rows = replies.len().max(1);
    let x_max = replies
        .iter()
        .map(|r| ms(r.end_ns.saturating_sub(r.sent_ns)))
        .fold(first_token_limit_ms, f64::max)
        * 1.05;
    {
        let height = 90 + 36 * rows as u32;
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
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("ms since the request was sent")
            .y_labels(rows)
            .y_label_formatter(&|y| format!("reply {}", y.round() as usize))
            .draw()
            .map_err(err)?;
        for (i, r) in replies.iter().enumerate() {
            let y = (i + 1) as f64;
            let m = measure(r);
            if let Some(first) = m.first_token_ms {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, y - 0.18), (first, y + 0.18)],
                        BLUE.mix(0.25).filled(),
                    )))
                    .map_err(err)?;
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
            chart.draw_series(dots).map_err(err)?;
        }
        chart
            .draw_series(LineSeries::new(
                [
                    (first_token_limit_ms, 0.5),
                    (first_token_limit_ms, rows as f64 + 0.5),
                ],
                RED.stroke_width(2),
            ))
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

    #[test]
    fn one_row_per_reply_and_a_dot_per_token() {
        let replies = [reply(&[100, 110, 120], "a"), reply(&[300, 310], "b")];
        let svg = svg(&replies, 600.0, "runs/a").unwrap();
        let mut reader = quick_xml::Reader::from_str(&svg);
        let mut circles = 0;
        let mut texts = String::new();
        loop {
            match reader.read_event().expect("the SVG is well-formed XML") {
                quick_xml::events::Event::Eof => break,
                quick_xml::events::Event::Empty(e) | quick_xml::events::Event::Start(e)
                    if e.name().as_ref() == b"circle" =>
                {
                    circles += 1
                }
                quick_xml::events::Event::Text(t) => texts.push_str(&t.decode().unwrap()),
                _ => {}
            }
        }
        assert_eq!(circles, 5, "a dot per token");
        assert!(
            texts.contains("reply 1") && texts.contains("reply 2"),
            "{texts}"
        );
        assert!(!texts.contains("reply 3"), "{texts}");
        assert!(texts.contains("runs/a"));
    }
}
