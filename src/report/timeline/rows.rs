//! The picture's top part: a row per reply on the time since its request's send.
//!
//! A row is two lines: its figures (and a reply at depth's name) above, its band below (the
//! wait for the first token as a bar, a dot a token's arrival). The figures never sit on the
//! band, so no dot or bar is under a text; the limit line and the grid are drawn through the
//! bands only.

use super::drawn::{depth_name, dots_per_row, ms, thin, Drawn, Frame, Row, DEPTH};
use super::svg_writer::{
    columns, fit, legend, text_width, Anchor, Entry, Label, Sample, Scale, Svg, Ticks, BLACK, BLUE,
    GREY, RED,
};
use crate::judging::verdict::words::grouped;

/// A row's height, px: its figures' line and its band.
pub(super) const ROW_PX: f64 = 36.0;
/// Above the first row, the strip where the limit is labelled.
const HEADER_PX: f64 = 18.0;
/// From a row's top: the figures' baseline, the band's middle and half its height.
const FIGURES_BASELINE: f64 = 13.0;
const BAND_MIDDLE: f64 = 25.0;
const BAR_HALF: f64 = 6.0;
const BAND_HALF: f64 = 8.0;
/// Below a plot: its tick labels (low enough to clear a value axis's lowest label, which is
/// centred on the plot's bottom), the axis's title, then the legend.
const TICK_BASELINE: f64 = 16.0;
const AXIS_TITLE_BASELINE: f64 = 33.0;
pub(super) const AXIS_PX: f64 = 42.0;
pub(super) const ROW_NAME_SIZE: f64 = 11.0;
const FIGURES_SIZE: f64 = 11.0;
pub(super) const TICK_SIZE: f64 = 10.0;
pub(super) const AXIS_TITLE_SIZE: f64 = 11.0;
/// At most this many steps on a time axis: about 100 px apart, room for the widest label.
pub(super) const MOST_TICKS: usize = 8;
/// A limit up to this many times the latest reply's end is drawn to scale; past it the axis
/// would be mostly empty time (a limit of 10 s over replies that ended by 1.1 s left 92% of
/// the width empty), so the axis spans the replies and the limit is written at its end.
const LIMIT_TO_SCALE_WITHIN: f64 = 1.25;

/// Where the first-token limit is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum LimitMark {
    /// On the axis: a red line through the rows.
    ToScale,
    /// Far past the replies: an arrow at the axis's end, with its value.
    OffAxis,
}

/// The rows' time axis: its ticks, and where the limit goes on it.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowsAxis {
    pub ticks: Ticks,
    pub limit_ms: f64,
    pub limit: LimitMark,
}

/// A token's arrival in a reply, ms after its send.
fn arrivals(d: &Drawn) -> Vec<f64> {
    let r = d.reply;
    r.chunks
        .iter()
        .filter(|c| c.has_text())
        .map(|c| ms(c.at_ns.saturating_sub(r.sent_ns)))
        .collect()
}

impl RowsAxis {
    /// The axis of the drawn rows: to the latest end of a drawn reply, and to the limit where
    /// it is near.
    pub(super) fn of(drawn: &[Drawn], rows: &[Row], limit_ms: f64) -> Self {
        let latest = rows
            .iter()
            .filter_map(|row| match row {
                Row::Reply(i) => Some(&drawn[*i]),
                Row::LeftOut { .. } => None,
            })
            .flat_map(|d| {
                let end = ms(d.reply.end_ns.saturating_sub(d.reply.sent_ns));
                arrivals(d)
                    .into_iter()
                    .chain([end, d.first_token_ms.unwrap_or(0.0)])
            })
            .fold(0.0, f64::max);
        let latest = if latest > 0.0 { latest } else { 1.0 };
        let near =
            limit_ms.is_finite() && limit_ms >= 0.0 && limit_ms <= latest * LIMIT_TO_SCALE_WITHIN;
        let (span, limit) = if near {
            (latest.max(limit_ms), LimitMark::ToScale)
        } else {
            (latest, LimitMark::OffAxis)
        };
        RowsAxis {
            ticks: Ticks::covering(0.0, span, MOST_TICKS),
            limit_ms,
            limit,
        }
    }
}

/// The limit as the picture writes it: `10,000 ms`.
fn limit_text(limit_ms: f64) -> String {
    if limit_ms.is_finite() && limit_ms >= 0.0 {
        format!("{} ms", grouped(limit_ms.round() as u64))
    } else {
        format!("{limit_ms} ms")
    }
}

/// Which legend entries the rows need: each kind drawn, once.
#[derive(Debug, Default)]
struct Kinds {
    bar: bool,
    depth_bar: bool,
    dot: bool,
}

/// The rows from `top`: the limit's label, the rows, the time axis and the legend. Returns the
/// y below them.
pub(super) fn draw(
    svg: &mut Svg,
    frame: &Frame,
    drawn: &[Drawn],
    rows: &[Row],
    axis: &RowsAxis,
    top: f64,
) -> f64 {
    if rows.is_empty() {
        let label = Label::new("no reply finished: nothing to draw", 14.0).colour(RED);
        svg.text(frame.margin, top + 20.0, &label);
        return top + 30.0;
    }
    let plot_top = top + HEADER_PX;
    let plot_bottom = plot_top + ROW_PX * rows.len() as f64;
    let x = Scale {
        ticks: axis.ticks,
        from_px: frame.plot_left,
        to_px: frame.plot_right,
    };
    svg.frame(
        (frame.plot_left, plot_top),
        (frame.plot_right, plot_bottom),
        "plot",
    );
    // The grid and the limit cross the bands only: never a text's line.
    let bands: Vec<(f64, f64)> = rows
        .iter()
        .enumerate()
        .filter(|(_, row)| matches!(row, Row::Reply(_)))
        .map(|(k, _)| plot_top + k as f64 * ROW_PX + BAND_MIDDLE)
        .map(|middle| (middle - BAND_HALF, middle + BAND_HALF))
        .collect();
    let grid: Vec<(f64, f64, f64)> = axis
        .ticks
        .values()
        .iter()
        .flat_map(|&t| bands.iter().map(move |&(y0, y1)| (x.at(t), y0, y1)))
        .collect();
    svg.verticals(&grid, (GREY, 1.0, 0.15), "grid");
    let mut entries = Vec::new();
    let mut kinds = Kinds::default();
    let max_dots = dots_per_row(rows.len());
    for (k, row) in rows.iter().enumerate() {
        let row_top = plot_top + k as f64 * ROW_PX;
        match row {
            Row::Reply(i) => {
                let plot = RowsPlot {
                    frame,
                    x: &x,
                    limit_ms: axis.limit_ms,
                    max_dots,
                };
                draw_reply_row(svg, &plot, &drawn[*i], (*i, row_top), &mut kinds)
            }
            Row::LeftOut { from, to } => draw_left_out(svg, frame, *from, *to, row_top),
        }
    }
    if kinds.bar {
        entries.push(Entry {
            sample: Sample::Bar(BLUE, 0.25),
            text: "bar: the wait for the first token".into(),
            colour: BLACK,
        });
    }
    if kinds.dot {
        entries.push(Entry {
            sample: Sample::Dot(BLACK, 3.0),
            text: "dot: the arrival of a token".into(),
            colour: BLACK,
        });
    }
    if kinds.depth_bar {
        entries.push(Entry {
            sample: Sample::Bar(DEPTH, 0.35),
            text: "brown bar: a reply at depth (--depths), not held to the limit".into(),
            colour: BLACK,
        });
    }
    entries.push(draw_limit(svg, frame, &x, axis, &bands, plot_top));
    time_axis(svg, frame, &x, plot_bottom, "ms since the request was sent");
    legend(
        svg,
        &entries,
        frame.margin,
        frame.width - frame.margin,
        plot_bottom + AXIS_PX,
    )
}

/// What every row is drawn against: the frame, the time scale, the limit a bar is red over,
/// and the dots a row may have.
#[derive(Clone, Copy)]
struct RowsPlot<'a> {
    frame: &'a Frame,
    x: &'a Scale,
    limit_ms: f64,
    max_dots: usize,
}

/// The line standing for the replies `from` to `to` (from 0) left out of the rows.
fn draw_left_out(svg: &mut Svg, frame: &Frame, from: usize, to: usize, row_top: f64) {
    let name = Label::new("...", ROW_NAME_SIZE)
        .anchor(Anchor::End)
        .colour(GREY);
    let baseline = row_top + BAND_MIDDLE + 3.5;
    svg.text(frame.plot_left - 6.0, baseline, &name);
    let text = format!(
        "replies {} to {} not drawn here: each is a point in the rate panel below",
        from + 1,
        to + 1
    );
    let text = fit(
        &text,
        FIGURES_SIZE,
        frame.plot_right - frame.plot_left - 4.0,
    );
    svg.text(
        frame.plot_left + 4.0,
        baseline,
        &Label::new(&text, FIGURES_SIZE).colour(GREY),
    );
}

/// One reply's row: its name at the left; its figures and mark (and a reply at depth's name)
/// on the upper line; in the band the wait for its first token as a bar (red over the limit;
/// brown at depth, never held to the limit) and a dot a token's arrival.
fn draw_reply_row(
    svg: &mut Svg,
    plot: &RowsPlot,
    d: &Drawn,
    (index, row_top): (usize, f64),
    kinds: &mut Kinds,
) {
    let RowsPlot {
        frame,
        x,
        limit_ms,
        max_dots,
    } = *plot;
    let r = d.reply;
    let middle = row_top + BAND_MIDDLE;
    let name = format!("reply {}", index + 1);
    svg.text(
        frame.plot_left - 6.0,
        middle + 3.5,
        &Label::new(&name, ROW_NAME_SIZE).anchor(Anchor::End),
    );
    if let Some(first) = d.first_token_ms {
        let fill = match &r.depth {
            Some(_) => (DEPTH, 0.35),
            None if first > limit_ms => (RED, 0.35),
            None => (BLUE, 0.25),
        };
        kinds.depth_bar |= r.depth.is_some();
        kinds.bar |= r.depth.is_none();
        svg.rect(
            (x.at(0.0), middle - BAR_HALF),
            (x.at(first), middle + BAR_HALF),
            fill,
            "data",
        );
    }
    for arrival in thin(&arrivals(d), max_dots) {
        svg.circle((x.at(arrival), middle), 2.0, BLACK, "data");
        kinds.dot = true;
    }
    let baseline = row_top + FIGURES_BASELINE;
    let mut at = frame.plot_left + 4.0;
    let room = |at: f64| frame.plot_right - at;
    if let Some(slot) = &r.depth {
        let name = fit(&depth_name(slot), FIGURES_SIZE, room(at));
        svg.text(at, baseline, &Label::new(&name, FIGURES_SIZE).colour(DEPTH));
        at += text_width(&name, FIGURES_SIZE) + FIGURES_SIZE * 1.2;
    }
    let first = d
        .first_token_ms
        .map_or("no first token".to_string(), |f| format!("{f:.0} ms"));
    let rate = d
        .rate_tok_s
        .map_or("no rate".to_string(), |r| format!("{r:.1} tok/s"));
    let figures = match &r.depth {
        // The probe's error is the serve's answer to a prompt past its context: refused (as it
        // should be) or failed, which the context line tells apart.
        Some(slot) if slot.limit_probe && r.error.is_some() => {
            "an error: the context line says whether a refusal".to_string()
        }
        _ => format!("{first}, {rate}"),
    };
    let (text, colour) = match &d.mark {
        Some(mark) => (format!("{figures}; {mark}"), RED),
        None => (figures, BLACK),
    };
    let text = fit(&text, FIGURES_SIZE, room(at));
    if columns(&text) > 0 {
        svg.text(
            at,
            baseline,
            &Label::new(&text, FIGURES_SIZE).colour(colour),
        );
    }
}

/// The limit: to scale, a red line through the bands labelled above the rows; past the
/// replies, a red arrow at the axis's end with its value. Returns its legend entry.
fn draw_limit(
    svg: &mut Svg,
    frame: &Frame,
    x: &Scale,
    axis: &RowsAxis,
    bands: &[(f64, f64)],
    plot_top: f64,
) -> Entry {
    let value = limit_text(axis.limit_ms);
    let baseline = plot_top - 5.0;
    let size = 11.0;
    match axis.limit {
        LimitMark::ToScale => {
            let at = x.at(axis.limit_ms);
            let strokes: Vec<(f64, f64, f64)> =
                bands.iter().map(|&(y0, y1)| (at, y0, y1)).collect();
            svg.verticals(&strokes, (RED, 2.0, 1.0), "rule");
            let text = format!("limit {value}");
            // Centred on the line, moved in where it would leave the picture.
            let half = text_width(&text, size) / 2.0;
            let centre = at.clamp(frame.margin + half, frame.width - frame.margin - half);
            svg.text(
                centre,
                baseline,
                &Label::new(&text, size).colour(RED).anchor(Anchor::Middle),
            );
            Entry {
                sample: Sample::Line(RED, 2.0, 1.0),
                text: format!("red line: the first-token limit, {value}"),
                colour: BLACK,
            }
        }
        LimitMark::OffAxis => {
            let tip = frame.plot_right;
            let middle = baseline - 3.0;
            svg.triangle(
                [
                    (tip - 9.0, middle - 5.0),
                    (tip, middle),
                    (tip - 9.0, middle + 5.0),
                ],
                RED,
                "rule",
            );
            let text = format!("first-token limit {value}, off this axis →");
            let text = fit(&text, size, tip - 14.0 - frame.plot_left);
            svg.text(
                tip - 14.0,
                baseline,
                &Label::new(&text, size).colour(RED).anchor(Anchor::End),
            );
            Entry {
                sample: Sample::Arrow(RED),
                text: format!(
                    "red arrow: the first-token limit, {value}, far past every reply's end"
                ),
                colour: BLACK,
            }
        }
    }
}

/// A time axis below a plot ending at `plot_bottom`: ticks, their labels and its title.
pub(super) fn time_axis(svg: &mut Svg, frame: &Frame, x: &Scale, plot_bottom: f64, title: &str) {
    let ticks = x.ticks.values();
    let marks: Vec<(f64, f64, f64)> = ticks
        .iter()
        .map(|&t| (x.at(t), plot_bottom, plot_bottom + 4.0))
        .collect();
    svg.verticals(&marks, (GREY, 1.0, 1.0), "axis");
    for &t in &ticks {
        let label = x.ticks.label(t);
        let tick = Label::new(&label, TICK_SIZE)
            .anchor(Anchor::Middle)
            .colour(GREY);
        svg.text(x.at(t), plot_bottom + TICK_BASELINE, &tick);
    }
    let title = fit(title, AXIS_TITLE_SIZE, frame.plot_right - frame.plot_left);
    let label = Label::new(&title, AXIS_TITLE_SIZE).anchor(Anchor::Middle);
    svg.text(
        (frame.plot_left + frame.plot_right) / 2.0,
        plot_bottom + AXIS_TITLE_BASELINE,
        &label,
    );
}
