//! timeline.svg: the picture of a run, for people (the verdict never reads it).
//!
//! On top, one row per reply on a shared time axis (each row starts at its request's send): the
//! wait for the first token as a bar, each token's arrival as a dot, the first-token limit as a
//! line. A stall, a slow first token or a slow route shows at a glance. The replies of
//! `--depths` (issue 35) are told apart: their bars brown, each named above its bar
//! (`depth 1,024`, `limit probe, 3,072 tokens`), marked where it failed or did not give the
//! fact, and never marked over the first-token limit (a long prompt's first token is its
//! prefill, which the context lines judge, not the limit).
//!
//! Below, from [`PANEL_FROM_REPLIES`] replies on, the rate over the run: one point a reply at
//! the time it ended on the run's clock (seconds since the first request was sent), at its
//! decode rate; failed replies in red, the streams of concurrent bursts in purple (their rate
//! is a stream's share of the serve, so they are drawn, not hidden, but told apart), the
//! replies at depth in brown (a long prompt's decode is slower, and not the rate line's); the rate
//! floor as a labelled line; each CPU throttle event (a rise of the sampled throttle count) as
//! an orange vertical line (events less than a pixel apart as one); the CPUs' mean clock and the device's clock, where sampled, as faint
//! lines on a MHz axis on the right. A serve that slows as the box heats shows as a slope, and
//! the throttle lines say when the box did.
//!
//! A long run stays readable and small: up to [`ALL_ROWS_UP_TO`] replies every reply has a
//! row; above that, rows for the first and last [`EDGE_ROWS`], and for the first
//! [`MARKED_ROWS`] others that failed or were over the first-token limit, with a row between
//! saying which replies were left out (each of them is still a point in the panel). The dots of
//! all rows together are held to [`DOTS_IN_ROWS`] (at most [`MAX_DOTS_PER_ROW`] a row), so a
//! thousand replies of 200 tokens draw into about 0.6 MB.

use std::ops::Range;

use anyhow::{anyhow, Result};
use plotters::chart::DualCoordChartContext;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::archive::record::{DepthSlot, DuringReplies, Floors, LoadSnapshot, ReplyRecord};
use crate::judging::measure::measure;
use crate::judging::verdict::words::grouped;

/// What the picture needs beside the replies: the run's limits and what the box did meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct TimelineContext<'a> {
    /// The first-token limit, ms: a line across the rows.
    pub first_token_limit_ms: f64,
    /// The rate floor (of the median), tok/s: a line across the rate panel.
    pub rate_floor_tok_s: f64,
    /// The conditions sampled during the replies, where they were: throttle events and clocks.
    pub during: Option<&'a DuringReplies>,
}

impl<'a> TimelineContext<'a> {
    /// The context of a run judged by `floors`, beside its `load.json`.
    pub fn of_run(floors: &Floors, load: Option<&'a LoadSnapshot>) -> Self {
        TimelineContext {
            first_token_limit_ms: floors.first_token_ms,
            rate_floor_tok_s: floors.floor,
            during: load.and_then(|l| l.during.as_ref()),
        }
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A row is about 900 pixels wide: more dots than this are drawn on top of one another, and
/// drawing 20,000 of them costs the gate more than streaming them did.
pub const MAX_DOTS_PER_ROW: usize = 1000;
/// The dots of all rows together: a dot is about 90 bytes of SVG, so this keeps the rows under
/// about 0.55 MB however many tokens the replies had.
pub const DOTS_IN_ROWS: usize = 6000;
/// Up to this many replies, each has its row.
pub const ALL_ROWS_UP_TO: usize = 60;
/// Above [`ALL_ROWS_UP_TO`], the first and the last this many replies keep their rows.
pub const EDGE_ROWS: usize = 10;
/// Above [`ALL_ROWS_UP_TO`], this many more rows for replies that failed or were over the
/// first-token limit (the first of them; the rest are red points in the panel).
pub const MARKED_ROWS: usize = 20;
/// Below this many replies the rows say it all, and a panel of a few points says nothing.
pub const PANEL_FROM_REPLIES: usize = 8;

const ROW_PX: u32 = 36;
const PANEL_PX: u32 = 340;
/// About the panel's plotting width, in pixels: throttle events closer than one of these apart
/// are one line (a box throttling on every sample for an hour would otherwise draw 14,400).
const PANEL_PLOT_PX: f64 = 800.0;
/// A clock series is one polyline; an hour of 250 ms samples is 14,400 points, more than the
/// panel has pixels.
const MAX_CLOCK_POINTS: usize = 2000;

/// The panel's colours, each used by nothing else in the picture, so a reader (and a test) can
/// tell its points and markers apart.
const POINT_OK: RGBColor = RGBColor(31, 119, 180);
const POINT_FAILED: RGBColor = RGBColor(214, 39, 40);
const POINT_BURST: RGBColor = RGBColor(148, 103, 189);
/// The replies of `--depths`: their bars in the rows and their points in the panel.
const DEPTH: RGBColor = RGBColor(140, 86, 75);
const THROTTLE: RGBColor = RGBColor(255, 127, 14);
const CPU_CLOCK: RGBColor = RGBColor(127, 127, 127);
const DEVICE_CLOCK: RGBColor = RGBColor(44, 160, 44);

/// At most `max` of `points`: every n-th, always keeping the last (where a stall at the end
/// shows).
fn thin<T: Copy + PartialEq>(points: &[T], max: usize) -> Vec<T> {
    if points.len() <= max {
        return points.to_vec();
    }
    let step = points.len().div_ceil(max.saturating_sub(1).max(1));
    let mut kept: Vec<T> = points.iter().step_by(step).copied().collect();
    if let Some(&last) = points.last() {
        if kept.last() != Some(&last) {
            kept.push(last);
        }
    }
    kept
}

/// What marks a row: a reply that failed or whose first token was over the limit; a reply at
/// depth that failed or did not give its fact (its first token is not held to the limit); the
/// limit probe never (refused is what it should be: the context line judges it).
fn row_mark(r: &ReplyRecord, first_token_ms: Option<f64>, limit_ms: f64) -> Option<String> {
    if r.depth.as_ref().is_some_and(|s| s.limit_probe) {
        return None;
    }
    if let Some(problem) = crate::judging::verdict::reply_problem(r) {
        return Some(format!("FAIL: {problem}"));
    }
    match (&r.depth, first_token_ms) {
        (Some(slot), _) if !crate::depth_prompt::found(&r.content, &slot.code) => {
            Some("FAIL: the fact not given".to_string())
        }
        (Some(_), _) => None,
        (None, Some(f)) if f > limit_ms => Some("over the first-token limit".to_string()),
        (None, _) => None,
    }
}

/// What names a reply of `--depths` beside its figures: its depth, or the probe past the
/// context with the depth it asked.
fn depth_name(slot: &DepthSlot) -> String {
    if slot.limit_probe {
        format!("limit probe, {} tokens", grouped(slot.depth.into()))
    } else {
        format!("depth {}", grouped(slot.depth.into()))
    }
}

/// A row of the picture's top part.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Row {
    /// The reply at this index of the run's replies.
    Reply(usize),
    /// The replies from..=to, left out.
    LeftOut { from: usize, to: usize },
}

/// Which replies get a row, given which are marked (failed or over the limit): all of them up
/// to [`ALL_ROWS_UP_TO`]; above it the first and last [`EDGE_ROWS`] and the first
/// [`MARKED_ROWS`] marked ones between, with a [`Row::LeftOut`] for each run of the rest.
fn rows_to_draw(marked: &[bool]) -> Vec<Row> {
    let n = marked.len();
    if n <= ALL_ROWS_UP_TO {
        return (0..n).map(Row::Reply).collect();
    }
    let middle = EDGE_ROWS..n - EDGE_ROWS;
    let mut keep = vec![false; n];
    keep[..EDGE_ROWS].fill(true);
    keep[n - EDGE_ROWS..].fill(true);
    middle
        .filter(|&i| marked[i])
        .take(MARKED_ROWS)
        .for_each(|i| keep[i] = true);
    let mut rows = Vec::new();
    let mut left_out_from = None;
    for (i, &kept) in keep.iter().enumerate() {
        match (kept, left_out_from) {
            (true, Some(from)) => {
                rows.push(Row::LeftOut { from, to: i - 1 });
                rows.push(Row::Reply(i));
                left_out_from = None;
            }
            (true, None) => rows.push(Row::Reply(i)),
            (false, None) => left_out_from = Some(i),
            (false, Some(_)) => {}
        }
    }
    rows
}

/// The dots a row may have when `rows` rows are drawn.
fn dots_per_row(rows: usize) -> usize {
    (DOTS_IN_ROWS / rows.max(1)).clamp(1, MAX_DOTS_PER_ROW)
}

/// The `t_ms` of each sample whose throttle count rose from the sample before it: one event
/// each, however large the rise (the count is of the kernel's events, and several in one
/// interval are one thing to see). A sample without a count breaks the chain: a rise is only
/// counted between two readings.
fn throttle_rises(during: &DuringReplies) -> Vec<f64> {
    during
        .samples
        .windows(2)
        .filter_map(|w| match (w[0].throttle_count, w[1].throttle_count) {
            (Some(before), Some(after)) if after > before => Some(w[1].t_ms),
            _ => None,
        })
        .collect()
}

/// Of `times` (ascending), those more than one pixel's width of `range` after the one kept
/// before: what a reader can tell apart.
fn one_a_pixel(times: &[f64], range: &std::ops::Range<f64>) -> Vec<f64> {
    let pixel = (range.end - range.start) / PANEL_PLOT_PX;
    let mut kept: Vec<f64> = Vec::new();
    for &t in times {
        if kept.last().is_none_or(|&last| t - last >= pixel) {
            kept.push(t);
        }
    }
    kept
}

/// A reply as the picture needs it.
struct Drawn<'r> {
    reply: &'r ReplyRecord,
    first_token_ms: Option<f64>,
    rate_tok_s: Option<f64>,
    failed: bool,
    mark: Option<String>,
}

fn drawing_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("failed to draw the timeline: {e}")
}

/// The timeline of `replies` as SVG text: one row per reply (or, in a long run, the rows that
/// matter), top-down in the order they were made, each with its first-token time and rate
/// beside it and a mark where it failed or was over the limit; a legend; the limit labelled;
/// and from [`PANEL_FROM_REPLIES`] replies on, the rate panel below.
pub fn svg(replies: &[ReplyRecord], context: &TimelineContext, title: &str) -> Result<String> {
    let limit_ms = context.first_token_limit_ms;
    let drawn: Vec<Drawn> = replies
        .iter()
        .map(|r| {
            let m = measure(r);
            Drawn {
                reply: r,
                first_token_ms: m.first_token_ms,
                rate_tok_s: m.rate_tok_s,
                failed: crate::judging::verdict::reply_problem(r).is_some(),
                mark: row_mark(r, m.first_token_ms, limit_ms),
            }
        })
        .collect();
    // A reply at depth keeps its row in a long run, as a marked one does: there are few, and
    // the rows are where a long prompt's prefill shows.
    let marked: Vec<bool> = drawn
        .iter()
        .map(|d| d.mark.is_some() || d.reply.depth.is_some())
        .collect();
    let rows = rows_to_draw(&marked);
    let with_panel = replies.len() >= PANEL_FROM_REPLIES;
    let rows_px = 120 + ROW_PX * rows.len().max(1) as u32;
    let height = rows_px + if with_panel { PANEL_PX } else { 0 };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let (top, bottom) = root.split_vertically(rows_px);
        draw_rows(&top, &drawn, &rows, limit_ms, title)?;
        if with_panel {
            draw_rate_panel(&bottom, &drawn, context)?;
        }
        root.present().map_err(drawing_error)?;
    }
    Ok(out)
}

/// A plane of f64 by f64, as the rows and the rate panel (on both its y axes) draw on.
type Plane = Cartesian2d<RangedCoordf64, RangedCoordf64>;

/// The chart the rows are drawn on: x in ms since each request's send, a row a unit of y.
type RowsChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Plane>;

/// The rows: the first-token bars, the arrival dots, each row's figures, the limit.
fn draw_rows(
    area: &DrawingArea<SVGBackend, Shift>,
    drawn: &[Drawn],
    rows: &[Row],
    limit_ms: f64,
    title: &str,
) -> Result<()> {
    let n_rows = rows.len().max(1);
    let x_end = rows
        .iter()
        .filter_map(|row| match row {
            Row::Reply(i) => Some(&drawn[*i]),
            Row::LeftOut { .. } => None,
        })
        .map(|d| ms(d.reply.end_ns.saturating_sub(d.reply.sent_ns)))
        .fold(limit_ms, f64::max);
    // Room on the right for each row's figures.
    let x_max = x_end * 1.45;
    let mut chart = rows_chart(area, rows, x_max, title)?;
    // Row 0 on top: row k is drawn at y = n_rows - k.
    let y_of = |k: usize| (n_rows - k) as f64;
    let max_dots = dots_per_row(rows.len());
    let mut legend = Legend::default();
    for (k, row) in rows.iter().enumerate() {
        let y = y_of(k);
        let d = match row {
            Row::Reply(i) => &drawn[*i],
            Row::LeftOut { from, to } => {
                draw_left_out(&mut chart, *from, *to, y)?;
                continue;
            }
        };
        draw_reply_row(&mut chart, d, y, x_end, limit_ms, max_dots, &mut legend)?;
    }
    draw_limit(&mut chart, limit_ms, n_rows)
}

/// The rows' chart with its axes and each row's name; where no reply finished, a line saying
/// so.
fn rows_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    rows: &[Row],
    x_max: f64,
    title: &str,
) -> Result<RowsChart<'a, 'b>> {
    let err = drawing_error;
    let n_rows = rows.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0.5f64..(n_rows as f64 + 0.5))
        .map_err(err)?;
    let row_label = |y: &f64| {
        let k = (n_rows as f64 - y.round()).max(0.0) as usize;
        match rows.get(k) {
            Some(Row::Reply(i)) => format!("reply {}", i + 1),
            Some(Row::LeftOut { .. }) => "...".to_string(),
            None => String::new(),
        }
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("ms since the request was sent")
        // No row to name when no reply finished.
        .y_labels(if rows.is_empty() { 0 } else { n_rows })
        .y_label_formatter(&row_label)
        .draw()
        .map_err(err)?;
    if rows.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new(
                "no reply finished: nothing to draw",
                (x_max * 0.3, 1.0),
                ("sans-serif", 18).into_font().color(&RED),
            )))
            .map_err(err)?;
    }
    Ok(chart)
}

/// The line standing for the replies `from` to `to` (from 0) left out of the rows.
fn draw_left_out(chart: &mut RowsChart, from: usize, to: usize, y: f64) -> Result<()> {
    let err = drawing_error;
    let text = format!(
        "replies {} to {} not drawn here: each is a point in the rate panel below",
        from + 1,
        to + 1
    );
    chart
        .draw_series(std::iter::once(Text::new(
            text,
            (0.0, y + 0.1),
            ("sans-serif", 12).into_font().color(&BLACK.mix(0.6)),
        )))
        .map_err(err)?;
    Ok(())
}

/// Which of the rows' legend entries are drawn: each goes in once, with the first row that has
/// it.
#[derive(Debug, Default)]
struct Legend {
    /// The bar of a judged reply.
    bar: bool,
    /// The dot of a token's arrival.
    dot: bool,
    /// The brown bar of a reply at depth.
    depth_bar: bool,
}

/// One reply's row: the wait for its first token as a bar (red over the limit; brown at depth,
/// never held to the limit), a dot a token's arrival, its figures and mark beside them, and a
/// reply at depth named above its bar. Each kind of bar, and the dot, goes in the legend once.
fn draw_reply_row(
    chart: &mut RowsChart,
    d: &Drawn,
    y: f64,
    x_end: f64,
    limit_ms: f64,
    max_dots: usize,
    legend: &mut Legend,
) -> Result<()> {
    let err = drawing_error;
    let r = d.reply;
    if let Some(first) = d.first_token_ms {
        let colour = match &r.depth {
            Some(_) => DEPTH.mix(0.35),
            None if first > limit_ms => RED.mix(0.35),
            None => BLUE.mix(0.25),
        };
        let bar = chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, y - 0.18), (first, y + 0.18)],
                colour.filled(),
            )))
            .map_err(err)?;
        if r.depth.is_some() && !legend.depth_bar {
            bar.label("brown bar: a reply at depth (--depths), not held to the limit")
                .legend(|(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 14, y + 4)], DEPTH.mix(0.35).filled())
                });
            legend.depth_bar = true;
        } else if r.depth.is_none() && !legend.bar {
            bar.label("bar: the wait for the first token")
                .legend(|(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 14, y + 4)], BLUE.mix(0.25).filled())
                });
            legend.bar = true;
        }
    }
    let arrivals: Vec<f64> = r
        .chunks
        .iter()
        .filter(|c| c.has_text())
        .map(|c| ms(c.at_ns.saturating_sub(r.sent_ns)))
        .collect();
    let dots = thin(&arrivals, max_dots)
        .into_iter()
        .map(|x| Circle::new((x, y), 2, BLACK.filled()));
    let dots = chart.draw_series(dots).map_err(err)?;
    if !legend.dot {
        dots.label("dot: the arrival of a token")
            .legend(|(x, y)| Circle::new((x + 7, y), 3, BLACK.filled()));
        legend.dot = true;
    }
    let first = d
        .first_token_ms
        .map_or("no first token".to_string(), |f| format!("{f:.0} ms"));
    let rate = d
        .rate_tok_s
        .map_or("no rate".to_string(), |r| format!("{r:.1} tok/s"));
    if let Some(slot) = &r.depth {
        // Above the bar, at the left: the legend, lower right, covers the last rows' figures,
        // and the replies at depth are the last.
        chart
            .draw_series(std::iter::once(Text::new(
                depth_name(slot),
                (0.0, y + 0.5),
                ("sans-serif", 11).into_font().color(&DEPTH),
            )))
            .map_err(err)?;
    }
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
    let text: String = text.chars().take(60).collect();
    chart
        .draw_series(std::iter::once(Text::new(
            text,
            (x_end * 1.02, y + 0.1),
            ("sans-serif", 12).into_font().color(&colour),
        )))
        .map_err(err)?;
    Ok(())
}

/// The first-token limit as a red line across the rows, labelled at its top; and the legend.
fn draw_limit<'a, 'b: 'a>(
    chart: &mut RowsChart<'a, 'b>,
    limit_ms: f64,
    n_rows: usize,
) -> Result<()> {
    let err = drawing_error;
    chart
        .draw_series(LineSeries::new(
            [(limit_ms, 0.5), (limit_ms, n_rows as f64 + 0.5)],
            RED.stroke_width(2),
        ))
        .map_err(err)?
        .label(format!("red line: the first-token limit, {limit_ms:.0} ms"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], RED.stroke_width(2)));
    chart
        .draw_series(std::iter::once(Text::new(
            format!("limit {limit_ms:.0} ms"),
            (limit_ms, n_rows as f64 + 0.45),
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
    Ok(())
}

/// Where the sampled conditions sit on the panel's clock: seconds since `origin_ns` of a
/// sample `t_ms` after sampling began, or None when the run did not record when that was.
fn sample_clock(during: &DuringReplies, origin_ns: u64) -> Option<impl Fn(f64) -> f64> {
    let started_ns = during.started_ns?;
    Some(move |t_ms: f64| (started_ns as f64 - origin_ns as f64) / 1e9 + t_ms / 1e3)
}

/// The most points the rate panel draws: one a reply up to a soak of this many (about 90
/// bytes each, so under 0.5 MB); past it, every n-th reply that did not fail, and every failed
/// one (a soak's 20,000 replies stay a picture of a few hundred kilobytes).
pub const MAX_PANEL_POINTS: usize = 5000;

/// `points` (x, rate, colour) within [`MAX_PANEL_POINTS`]: the failed ones all, the rest
/// thinned evenly to the room left.
fn panel_points(points: Vec<(f64, f64, RGBColor)>) -> Vec<(f64, f64, RGBColor)> {
    if points.len() <= MAX_PANEL_POINTS {
        return points;
    }
    let (failed, rest): (Vec<_>, Vec<_>) = points.into_iter().partition(|p| p.2 == POINT_FAILED);
    let room = MAX_PANEL_POINTS.saturating_sub(failed.len()).max(2);
    let mut kept = thin(&rest, room);
    kept.extend(failed.into_iter().take(MAX_PANEL_POINTS));
    kept
}

/// What the rate panel draws, from the replies and the sampled conditions: a point a reply
/// with a rate (x, rate, colour), the throttle rises and where they fall on the panel's clock
/// (none where the run did not record when sampling began), the lines drawn for them, the
/// clocks (x, MHz), and the axes' extents.
struct PanelData {
    points: Vec<(f64, f64, RGBColor)>,
    rises: Vec<f64>,
    throttles: Vec<f64>,
    throttle_lines: Vec<f64>,
    cpu_mhz: Vec<(f64, f64)>,
    device_mhz: Vec<(f64, f64)>,
    x_range: Range<f64>,
    y_max: f64,
    mhz_top: f64,
}

/// The rate panel's points, throttle events, clocks and ranges, on the clock of the first
/// request's send.
fn panel_data(drawn: &[Drawn], context: &TimelineContext) -> PanelData {
    let floor = context.rate_floor_tok_s;
    let origin_ns = drawn.iter().map(|d| d.reply.sent_ns).min().unwrap_or(0);
    let at_s = |ns: u64| ns.saturating_sub(origin_ns) as f64 / 1e9;
    // (x, rate, colour) a reply with a rate: a failed reply is red, a burst's stream purple, a
    // reply at depth brown.
    let points: Vec<(f64, f64, RGBColor)> = drawn
        .iter()
        .filter_map(|d| {
            let rate = d.rate_tok_s?;
            let colour = match (d.failed, &d.reply.depth, &d.reply.burst) {
                (true, _, _) => POINT_FAILED,
                (false, Some(_), _) => DEPTH,
                (false, None, Some(_)) => POINT_BURST,
                (false, None, None) => POINT_OK,
            };
            Some((at_s(d.reply.end_ns), rate, colour))
        })
        .collect();
    let points = panel_points(points);
    let clock = context.during.and_then(|d| sample_clock(d, origin_ns));
    let rises = context.during.map(throttle_rises).unwrap_or_default();
    let throttles: Vec<f64> = match &clock {
        Some(at) => rises.iter().map(|&t| at(t)).collect(),
        None => Vec::new(),
    };
    let clock_series =
        |pick: fn(&crate::archive::record::Sample) -> Option<f64>| match (&clock, context.during) {
            (Some(at), Some(during)) => during
                .samples
                .iter()
                .filter_map(|s| Some((at(s.t_ms), pick(s)?)))
                .collect(),
            _ => Vec::new(),
        };
    let cpu_mhz = thin(&clock_series(|s| s.cpu_mhz), MAX_CLOCK_POINTS);
    let device_mhz = thin(&clock_series(|s| s.device_mhz), MAX_CLOCK_POINTS);

    let ends = drawn.iter().map(|d| at_s(d.reply.end_ns));
    let times = ends
        .chain(throttles.iter().copied())
        .chain(cpu_mhz.iter().chain(&device_mhz).map(|p| p.0));
    let (x_min, x_max) = times.fold((0f64, 0f64), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let x_max = if x_max > x_min { x_max } else { x_min + 1.0 };
    let x_pad = (x_max - x_min) * 0.02;
    let x_range = (x_min - x_pad)..(x_max + x_pad);
    let throttle_lines = one_a_pixel(&throttles, &x_range);
    let y_top = points.iter().map(|p| p.1).fold(floor, f64::max);
    // Room above for the legend.
    let y_max = if y_top > 0.0 { y_top * 1.45 } else { 1.0 };
    let mhz_top = cpu_mhz
        .iter()
        .chain(&device_mhz)
        .map(|p| p.1)
        .fold(0f64, f64::max);
    PanelData {
        points,
        rises,
        throttles,
        throttle_lines,
        cpu_mhz,
        device_mhz,
        x_range,
        y_max,
        mhz_top,
    }
}

/// The chart the rate panel is drawn on: tok/s on the left, MHz on the right.
type PanelChart<'a, 'b> = DualCoordChartContext<'a, SVGBackend<'b>, Plane, Plane>;

/// The rate panel: a point a reply with a rate, the floor, throttle events, the clocks.
fn draw_rate_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    drawn: &[Drawn],
    context: &TimelineContext,
) -> Result<()> {
    let err = drawing_error;
    let floor = context.rate_floor_tok_s;
    let PanelData {
        points,
        rises,
        throttles,
        throttle_lines,
        cpu_mhz,
        device_mhz,
        x_range,
        y_max,
        mhz_top,
    } = panel_data(drawn, context);

    let mut chart = ChartBuilder::on(area)
        .caption("decode rate of each reply, at its end", ("sans-serif", 14))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .right_y_label_area_size(if mhz_top > 0.0 { 56 } else { 12 })
        .build_cartesian_2d(x_range.clone(), 0f64..y_max)
        .map_err(err)?
        // The same room above as the rates, so the clocks run below the legend too.
        .set_secondary_coord(x_range.clone(), 0f64..(mhz_top.max(1.0) * 1.45));
    chart
        .configure_mesh()
        .x_desc("s since the first request was sent")
        .y_desc("tok/s")
        .light_line_style(BLACK.mix(0.04))
        .draw()
        .map_err(err)?;
    if mhz_top > 0.0 {
        draw_clocks(&mut chart, &cpu_mhz, &device_mhz)?;
    }
    draw_throttles(
        &mut chart,
        &throttle_lines,
        &throttles,
        &rises,
        &x_range,
        y_max,
    )?;
    draw_floor(&mut chart, floor, &x_range, y_max)?;
    draw_points(&mut chart, &points, &x_range, y_max)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The clocks on the MHz axis, a faint line each where sampled.
fn draw_clocks<'a, 'b: 'a>(
    chart: &mut PanelChart<'a, 'b>,
    cpu_mhz: &[(f64, f64)],
    device_mhz: &[(f64, f64)],
) -> Result<()> {
    let err = drawing_error;
    chart
        .configure_secondary_axes()
        .y_desc("MHz")
        .draw()
        .map_err(err)?;
    for (series, colour, what) in [
        (&cpu_mhz, CPU_CLOCK, "grey line: the mean CPU clock, MHz"),
        (
            &device_mhz,
            DEVICE_CLOCK,
            "green line: the device clock, MHz",
        ),
    ] {
        if series.is_empty() {
            continue;
        }
        chart
            .draw_secondary_series(LineSeries::new(series.iter().copied(), colour.mix(0.45)))
            .map_err(err)?
            .label(what)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], colour.mix(0.45)));
    }
    Ok(())
}

/// A throttle event an orange line (events less than a pixel apart one line); where they
/// could not be placed, a line saying how many there were.
fn draw_throttles<'a, 'b: 'a>(
    chart: &mut PanelChart<'a, 'b>,
    throttle_lines: &[f64],
    throttles: &[f64],
    rises: &[f64],
    x_range: &Range<f64>,
    y_max: f64,
) -> Result<()> {
    let err = drawing_error;
    for (k, &t) in throttle_lines.iter().enumerate() {
        let marker = chart
            .draw_series(LineSeries::new(
                [(t, 0.0), (t, y_max)],
                THROTTLE.stroke_width(1),
            ))
            .map_err(err)?;
        if k == 0 {
            marker
                .label("orange line: a CPU throttle event")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], THROTTLE));
        }
    }
    if throttles.is_empty() && !rises.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new(
                format!(
                    "{} throttle events, not placed: the run did not record when sampling began",
                    rises.len()
                ),
                (x_range.start, y_max * 0.97),
                ("sans-serif", 12).into_font().color(&THROTTLE),
            )))
            .map_err(err)?;
    }
    Ok(())
}

/// The rate floor as a red line across the panel, labelled.
fn draw_floor<'a, 'b: 'a>(
    chart: &mut PanelChart<'a, 'b>,
    floor: f64,
    x_range: &Range<f64>,
    y_max: f64,
) -> Result<()> {
    let err = drawing_error;
    chart
        .draw_series(LineSeries::new(
            [(x_range.start, floor), (x_range.end, floor)],
            RED.stroke_width(2),
        ))
        .map_err(err)?;
    chart
        .draw_series(std::iter::once(Text::new(
            format!("rate floor {floor:.1} tok/s (of the median)"),
            // A text hangs below its anchor: about 5% of the panel's height above the line.
            (x_range.start, floor + y_max * 0.07),
            ("sans-serif", 12).into_font().color(&RED),
        )))
        .map_err(err)?;
    Ok(())
}

/// The replies' points by colour, a legend entry for each colour drawn; where no reply has a
/// rate, a line saying so.
fn draw_points<'a, 'b: 'a>(
    chart: &mut PanelChart<'a, 'b>,
    points: &[(f64, f64, RGBColor)],
    x_range: &Range<f64>,
    y_max: f64,
) -> Result<()> {
    let err = drawing_error;
    for (colour, what) in [
        (POINT_OK, "blue point: the decode rate of a reply"),
        (POINT_BURST, "purple point: a stream of a concurrent burst"),
        (
            DEPTH,
            "brown point: a reply at depth (--depths), not the rate line's",
        ),
        (POINT_FAILED, "red point: a reply that failed"),
    ] {
        let these = points.iter().filter(|p| p.2 == colour);
        if these.clone().next().is_none() {
            continue;
        }
        chart
            .draw_series(these.map(|&(x, y, c)| Circle::new((x, y), 3, c.filled())))
            .map_err(err)?
            .label(what)
            .legend(move |(x, y)| Circle::new((x + 7, y), 3, colour.filled()));
    }
    if points.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new(
                "no reply has a decode rate",
                (x_range.start, y_max * 0.5),
                ("sans-serif", 14).into_font().color(&RED),
            )))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
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
        let svg = svg(&replies, &limit(600.0), "runs/a").unwrap();
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
        let (circles, texts) = read(&svg(&[], &limit(600.0), "runs/b").unwrap());
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

    fn limit(first_token_limit_ms: f64) -> TimelineContext<'static> {
        TimelineContext {
            first_token_limit_ms,
            rate_floor_tok_s: 0.0,
            during: None,
        }
    }

    const MS: u64 = 1_000_000;

    /// A reply sent `sent_ms` into the run, its first token `first_ms` later and `tokens`
    /// tokens `gap_ms` apart: (tokens - 1) / gap tok/s.
    fn timed(sent_ms: u64, first_ms: u64, gap_ms: u64, tokens: u64) -> ReplyRecord {
        let at: Vec<u64> = (0..tokens).map(|k| first_ms + k * gap_ms).collect();
        let mut r = reply(&at, "a");
        r.sent_ns = sent_ms * MS;
        r.end_ns += sent_ms * MS;
        r.chunks.iter_mut().for_each(|c| c.at_ns += sent_ms * MS);
        r
    }

    /// Every element of the SVG with its attributes, the document read as XML (the other
    /// SVG's tests, `compare::svg`, read theirs with it too).
    pub(crate) fn elements(svg: &str) -> Vec<(String, std::collections::HashMap<String, String>)> {
        let mut reader = quick_xml::Reader::from_str(svg);
        let mut all = Vec::new();
        loop {
            match reader.read_event().expect("the SVG is well-formed XML") {
                quick_xml::events::Event::Eof => break,
                quick_xml::events::Event::Empty(e) | quick_xml::events::Event::Start(e) => {
                    let attributes = e
                        .attributes()
                        .flatten()
                        .map(|a| {
                            let key = String::from_utf8_lossy(a.key.as_ref()).to_string();
                            (key, String::from_utf8_lossy(&a.value).to_string())
                        })
                        .collect();
                    all.push((
                        String::from_utf8_lossy(e.name().as_ref()).to_string(),
                        attributes,
                    ));
                }
                _ => {}
            }
        }
        all
    }

    pub(crate) fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// The circles filled with `colour`, as (cx, cy).
    fn circles_of(svg: &str, colour: RGBColor) -> Vec<(f64, f64)> {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| name == "circle" && a.get("fill") == Some(&hex(colour)))
            .map(|(_, a)| (a["cx"].parse().unwrap(), a["cy"].parse().unwrap()))
            .collect()
    }

    /// The polylines stroked with `colour`, as their first point's x.
    fn lines_of(svg: &str, colour: RGBColor) -> Vec<f64> {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| name == "polyline" && a.get("stroke") == Some(&hex(colour)))
            .map(|(_, a)| a["points"].split(',').next().unwrap().parse().unwrap())
            .collect()
    }

    fn text_of(svg: &str) -> String {
        read(svg)
            .1
            .into_iter()
            .map(|(t, _)| t)
            .collect::<Vec<_>>()
            .join("|")
    }

    fn sample(t_ms: f64, throttle_count: Option<u64>) -> crate::archive::record::Sample {
        crate::archive::record::Sample {
            throttle_count,
            ..crate::archive::record::Sample::bare(t_ms)
        }
    }

    fn during(
        started_ns: Option<u64>,
        samples: Vec<crate::archive::record::Sample>,
    ) -> DuringReplies {
        DuringReplies {
            interval_ms: 250,
            started_ns,
            seconds: 10.0,
            load1_max: 0.5,
            cpu_some_avg10_max: None,
            serve_cpu_s: None,
            serve_wait_s: None,
            wait_fraction: None,
            top: Vec::new(),
            others_cpu_pct: None,
            throttle: None,
            samples,
        }
    }

    /// Ten replies a second apart: seven plain ones at 100 tok/s, one at 200 tok/s, one with a
    /// wrong answer, one of a burst, and one of a single token (no rate).
    fn ten_replies() -> Vec<ReplyRecord> {
        let mut replies: Vec<ReplyRecord> = (0..10).map(|i| timed(i * 1000, 100, 10, 11)).collect();
        replies[3] = timed(3000, 100, 5, 21);
        replies[5].expect = Some("Paris".into());
        replies[6].burst = Some(crate::archive::record::BurstSlot {
            round: 1,
            stream: 2,
        });
        replies[8] = timed(8000, 100, 10, 1);
        replies
    }

    /// The rects filled with `colour` (the bars, and the legend's).
    fn bars_of(svg: &str, colour: RGBColor) -> usize {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| name == "rect" && a.get("fill") == Some(&hex(colour)))
            .count()
    }

    /// A reply of `--depths` at `depth`, its fact 2504, answered with `answer`, its first token
    /// at 900 ms: over the 600 ms limit that the judged replies are held to.
    fn at_depth(sent_ms: u64, depth: u32, answer: &str, limit_probe: bool) -> ReplyRecord {
        let mut r = timed(sent_ms, 900, 10, 11);
        r.content = answer.to_string();
        r.depth = Some(DepthSlot {
            depth,
            replica: 0,
            estimate: u64::from(depth),
            code: "2504".into(),
            fact_at: u64::from(depth) / 2,
            limit_probe,
        });
        r
    }

    #[test]
    fn the_replies_at_depth_are_named_brown_and_never_held_to_the_limit() {
        let mut refused = at_depth(7000, 3072, "", true);
        refused.error = Some("HTTP 400: the prompt is longer than the context".into());
        refused.chunks.clear();
        let replies = [
            timed(0, 100, 10, 11),
            timed(1000, 900, 10, 11),
            at_depth(2000, 1024, "The number is 2504.", false),
            at_depth(4000, 1024, "I do not know.", false),
            refused,
        ];
        let svg = svg(&replies, &limit(600.0), "runs/d").unwrap();
        let all = text_of(&svg);
        // Named above their bars, in the depth's colour.
        for name in ["depth 1,024", "limit probe, 3,072 tokens"] {
            assert!(all.contains(name), "{name} in {all}");
        }
        let named: Vec<_> = elements(&svg)
            .into_iter()
            .filter(|(name, a)| name == "text" && a.get("fill") == Some(&hex(DEPTH)))
            .collect();
        assert_eq!(named.len(), 3, "{named:?}");
        // A judged reply over the limit is marked; one at depth is not, and is marked only
        // where it did not give the fact.
        assert!(all.contains("depth 1,024|900 ms, 100.0 tok/s|"), "{all}");
        assert_eq!(
            all.matches("over the first-token limit").count(),
            1,
            "{all}"
        );
        assert_eq!(all.matches("FAIL: the fact not given").count(), 1, "{all}");
        // The probe's error is the context line's to judge: said, never marked FAIL.
        assert!(
            all.contains("an error: the context line says whether a refusal"),
            "{all}"
        );
        assert!(!all.contains("FAIL: error"), "{all}");
        // Two brown bars (the refused probe has no first token) and the legend's; the judged
        // replies' bars blue, and red over the limit.
        assert_eq!(bars_of(&svg, DEPTH), 2 + 1, "{svg}");
        assert!(
            all.contains("brown bar: a reply at depth (--depths), not held to the limit"),
            "{all}"
        );
        assert_eq!(bars_of(&svg, BLUE), 1 + 1);
        assert_eq!(bars_of(&svg, RED), 1);
        // A run without depths has no brown and says nothing of depth.
        let plain = super::svg(&replies[..2], &limit(600.0), "runs/p").unwrap();
        assert_eq!(bars_of(&plain, DEPTH), 0);
        assert!(!text_of(&plain).contains("depth"), "{}", text_of(&plain));
    }

    #[test]
    fn the_replies_at_depth_are_brown_points_in_the_panel_and_keep_their_rows() {
        let mut replies = ten_replies();
        replies.push(at_depth(10_000, 1024, "2504", false));
        replies.push(at_depth(11_000, 4096, "2504", false));
        let svg = svg(&replies, &limit(600.0), "runs/dp").unwrap();
        assert_eq!(circles_of(&svg, DEPTH).len(), 2 + 1, "and the legend's");
        assert_eq!(circles_of(&svg, POINT_OK).len(), 7 + 1);
        assert!(
            text_of(&svg).contains("brown point: a reply at depth (--depths)"),
            "{}",
            text_of(&svg)
        );
        // A long run: sixteen replies at depth (more than the last rows) each keep a row.
        let mut long: Vec<ReplyRecord> = (0..80).map(|i| timed(i * 1000, 100, 10, 11)).collect();
        long.extend((0..16).map(|k| at_depth(80_000 + k * 1000, 256 << (k / 3), "2504", false)));
        let all = text_of(&super::svg(&long, &limit(600.0), "runs/long").unwrap());
        for k in 81..=96 {
            assert!(all.contains(&format!("reply {k}|")), "reply {k} in {all}");
        }
        assert!(all.contains("replies 11 to 80 not drawn here"), "{all}");
    }

    #[test]
    fn a_soak_of_many_replies_draws_at_most_its_points_and_every_failed_one() {
        let many: Vec<(f64, f64, RGBColor)> = (0..20_000)
            .map(|i| {
                let colour = if i % 1000 == 7 {
                    POINT_FAILED
                } else {
                    POINT_OK
                };
                (i as f64, 100.0, colour)
            })
            .collect();
        let kept = panel_points(many.clone());
        assert!(kept.len() <= MAX_PANEL_POINTS + 1, "{}", kept.len());
        assert!(kept.len() > MAX_PANEL_POINTS / 2, "{}", kept.len());
        assert_eq!(kept.iter().filter(|p| p.2 == POINT_FAILED).count(), 20);
        assert!(kept.iter().any(|p| p.0 == 19_999.0), "the last reply stays");
        let few = many[..MAX_PANEL_POINTS].to_vec();
        assert_eq!(
            panel_points(few.clone()),
            few,
            "up to the limit, one a reply"
        );
    }

    #[test]
    fn a_small_run_has_rows_and_no_rate_panel() {
        let replies: Vec<ReplyRecord> = (0..PANEL_FROM_REPLIES as u64 - 1)
            .map(|i| timed(i * 1000, 100, 10, 11))
            .collect();
        let svg = svg(&replies, &limit(600.0), "runs/s").unwrap();
        assert!(circles_of(&svg, POINT_OK).is_empty());
        assert!(!text_of(&svg).contains("rate floor"), "{}", text_of(&svg));
        assert!(text_of(&svg).contains("reply 7"));
    }

    #[test]
    fn the_rate_panel_has_a_point_a_reply_with_a_rate_and_the_floor_labelled() {
        let replies = ten_replies();
        let context = TimelineContext {
            rate_floor_tok_s: 50.0,
            ..limit(600.0)
        };
        let svg = svg(&replies, &context, "runs/p").unwrap();
        // Each kind once in the legend besides its points.
        let ok = circles_of(&svg, POINT_OK);
        assert_eq!(ok.len(), 7 + 1, "{ok:?}");
        assert_eq!(circles_of(&svg, POINT_FAILED).len(), 1 + 1);
        assert_eq!(circles_of(&svg, POINT_BURST).len(), 1 + 1);
        let all = text_of(&svg);
        assert!(
            all.contains("rate floor 50.0 tok/s (of the median)"),
            "{all}"
        );
        assert!(all.contains("red point: a reply that failed"), "{all}");
        assert!(all.contains("s since the first request was sent"), "{all}");
        // Later replies to the right; the 200 tok/s reply above the 100 tok/s ones (SVG y
        // grows downwards). The legend's point is the last drawn.
        let points = &ok[..7];
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "{points:?}");
        let fast = points[3];
        assert!(
            points.iter().all(|p| p == &fast || p.1 > fast.1),
            "{points:?}"
        );
        // No throttle marker, no clock axis, when nothing was sampled.
        assert!(lines_of(&svg, THROTTLE).is_empty());
        assert!(!all.contains("MHz"), "{all}");
    }

    #[test]
    fn a_throttle_rise_gives_one_marker_where_it_happened_and_no_rise_gives_none() {
        let replies = ten_replies();
        // Sampling began with the first send; the count rose at 1.2 s, as reply 2 ended.
        let risen = during(
            Some(0),
            [3, 3, 5, 5]
                .iter()
                .enumerate()
                .map(|(k, &n)| sample(k as f64 * 600.0, Some(n)))
                .collect(),
        );
        let picture = super::svg(
            &replies,
            &TimelineContext {
                during: Some(&risen),
                ..limit(600.0)
            },
            "t",
        )
        .unwrap();
        let markers = lines_of(&picture, THROTTLE);
        assert_eq!(
            markers.len(),
            1 + 1,
            "the marker and the legend's: {markers:?}"
        );
        let reply_2_x = circles_of(&picture, POINT_OK)[1].0;
        assert!(
            (markers[0] - reply_2_x).abs() <= 1.0,
            "{markers:?} vs {reply_2_x}"
        );
        assert!(text_of(&picture).contains("orange line: a CPU throttle event"));

        for flat in [
            during(
                Some(0),
                (0..4).map(|k| sample(k as f64 * 1000.0, Some(3))).collect(),
            ),
            during(
                Some(0),
                (0..4).map(|k| sample(k as f64 * 1000.0, None)).collect(),
            ),
        ] {
            let picture = super::svg(
                &replies,
                &TimelineContext {
                    during: Some(&flat),
                    ..limit(600.0)
                },
                "t",
            )
            .unwrap();
            assert!(lines_of(&picture, THROTTLE).is_empty());
            assert!(
                !text_of(&picture).contains("throttle"),
                "{}",
                text_of(&picture)
            );
        }

        // A run from before sampling's start was recorded: said, not placed anywhere.
        let unplaced = during(None, risen.samples.clone());
        let picture = super::svg(
            &replies,
            &TimelineContext {
                during: Some(&unplaced),
                ..limit(600.0)
            },
            "t",
        )
        .unwrap();
        assert!(lines_of(&picture, THROTTLE).is_empty());
        assert!(
            text_of(&picture).contains("1 throttle events, not placed"),
            "{}",
            text_of(&picture)
        );
    }

    #[test]
    fn a_throttle_event_is_a_rise_between_two_readings() {
        let of = |counts: &[Option<u64>]| {
            let samples = counts
                .iter()
                .enumerate()
                .map(|(k, &n)| sample(k as f64, n))
                .collect();
            throttle_rises(&during(Some(0), samples))
        };
        assert_eq!(of(&[Some(1), Some(2), Some(2), Some(9)]), vec![1.0, 3.0]);
        assert!(
            of(&[Some(1), None, Some(2)]).is_empty(),
            "no reading between"
        );
        assert!(of(&[Some(5), Some(1)]).is_empty(), "a fall is not an event");
        assert!(of(&[Some(1)]).is_empty());
        assert!(of(&[]).is_empty());
    }

    #[test]
    fn throttle_events_closer_than_a_pixel_are_one_line() {
        let range = 0.0..PANEL_PLOT_PX;
        assert_eq!(
            one_a_pixel(&[1.0, 1.5, 2.0, 2.9, 10.0], &range),
            vec![1.0, 2.0, 10.0]
        );
        assert!(one_a_pixel(&[], &range).is_empty());
        // A throttle on each of an hour's samples: no more lines than pixels.
        let hour: Vec<f64> = (0..14_400).map(|k| k as f64 * 0.25).collect();
        let lines = one_a_pixel(&hour, &(0.0..3600.0));
        assert!(lines.len() <= PANEL_PLOT_PX as usize + 1, "{}", lines.len());
        assert!(lines.len() >= PANEL_PLOT_PX as usize - 1, "{}", lines.len());
    }

    #[test]
    fn the_clocks_are_drawn_on_their_own_axis_where_sampled() {
        let replies = ten_replies();
        let mut samples: Vec<_> = (0..10).map(|k| sample(k as f64 * 1000.0, None)).collect();
        samples.iter_mut().for_each(|s| s.cpu_mhz = Some(2400.0));
        let sampled = during(Some(0), samples);
        let svg = svg(
            &replies,
            &TimelineContext {
                during: Some(&sampled),
                ..limit(600.0)
            },
            "c",
        )
        .unwrap();
        assert_eq!(
            lines_of(&svg, CPU_CLOCK).len(),
            1 + 1,
            "the series and the legend's"
        );
        assert!(lines_of(&svg, DEVICE_CLOCK).is_empty());
        let all = text_of(&svg);
        assert!(
            all.contains("MHz") && all.contains("grey line: the mean CPU clock"),
            "{all}"
        );
    }

    #[test]
    fn a_long_run_keeps_the_first_and_last_rows_and_the_marked_ones_between() {
        let none = vec![false; ALL_ROWS_UP_TO];
        assert_eq!(
            rows_to_draw(&none),
            (0..ALL_ROWS_UP_TO).map(Row::Reply).collect::<Vec<_>>()
        );

        let mut marked = vec![false; 100];
        marked[30] = true;
        marked[45] = true;
        marked[95] = true; // in the last rows anyway
        let mut expected: Vec<Row> = (0..10).map(Row::Reply).collect();
        expected.push(Row::LeftOut { from: 10, to: 29 });
        expected.push(Row::Reply(30));
        expected.push(Row::LeftOut { from: 31, to: 44 });
        expected.push(Row::Reply(45));
        expected.push(Row::LeftOut { from: 46, to: 89 });
        expected.extend((90..100).map(Row::Reply));
        assert_eq!(rows_to_draw(&marked), expected);

        // Every reply marked: only the first MARKED_ROWS of them get a row more.
        let rows = rows_to_draw(&[true; 1000]);
        assert_eq!(rows.len(), EDGE_ROWS + MARKED_ROWS + 1 + EDGE_ROWS);
        assert_eq!(
            rows[EDGE_ROWS + MARKED_ROWS],
            Row::LeftOut { from: 30, to: 989 }
        );
    }

    #[test]
    fn the_dots_of_all_rows_stay_within_their_budget() {
        assert_eq!(dots_per_row(1), MAX_DOTS_PER_ROW);
        assert_eq!(dots_per_row(3), MAX_DOTS_PER_ROW);
        assert_eq!(dots_per_row(60), DOTS_IN_ROWS / 60);
        assert!(dots_per_row(1_000_000) >= 1);
        assert_eq!(dots_per_row(0), MAX_DOTS_PER_ROW);
    }

    /// The budget: a thousand replies of 200 tokens, some failed, with the box's
    /// samples, in well under 1 MB, each reply a point and the rows that matter named.
    #[test]
    fn a_thousand_replies_draw_into_less_than_a_megabyte() {
        let mut replies: Vec<ReplyRecord> =
            (0..1000).map(|i| timed(i * 1200, 150, 5, 200)).collect();
        for i in [17, 400, 401, 777] {
            replies[i].expect = Some("Paris".into());
        }
        let mut samples: Vec<_> = (0..4800)
            .map(|k| sample(k as f64 * 250.0, Some(k / 1000)))
            .collect();
        samples.iter_mut().for_each(|s| s.cpu_mhz = Some(2000.0));
        let sampled = during(Some(0), samples);
        let context = TimelineContext {
            first_token_limit_ms: 600.0,
            rate_floor_tok_s: 50.0,
            during: Some(&sampled),
        };
        let svg = svg(&replies, &context, "runs/long").unwrap();
        assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
        assert_eq!(circles_of(&svg, POINT_OK).len(), 996 + 1);
        assert_eq!(circles_of(&svg, POINT_FAILED).len(), 4 + 1);
        assert_eq!(
            lines_of(&svg, THROTTLE).len(),
            4 + 1,
            "rises at 1000, 2000, 3000, 4000"
        );
        let all = text_of(&svg);
        for row in [
            "reply 1|",
            "reply 10|",
            "reply 18|",
            "reply 401|",
            "reply 402|",
            "reply 778|",
            "reply 991|",
            "reply 1000|",
        ] {
            assert!(all.contains(row), "{row} in {all}");
        }
        assert!(!all.contains("reply 11|"), "{all}");
        assert!(
            all.contains(
                "replies 11 to 17 not drawn here: each is a point in the rate panel below"
            ),
            "{all}"
        );
        let row_dots = circles_of(&svg, BLACK).len();
        assert!(row_dots <= DOTS_IN_ROWS + 1, "{row_dots}");
    }

    /// The picture's worst case: every reply failed (the most rows), each of 1,000 tokens, the
    /// box throttling on each of an hour's samples with both clocks sampled.
    #[test]
    fn the_worst_long_run_still_draws_under_a_megabyte() {
        let mut replies: Vec<ReplyRecord> =
            (0..1000).map(|i| timed(i * 3600, 150, 3, 1000)).collect();
        replies
            .iter_mut()
            .for_each(|r| r.expect = Some("Paris".into()));
        let mut samples: Vec<_> = (0..14_400)
            .map(|k| sample(k as f64 * 250.0, Some(k)))
            .collect();
        for s in &mut samples {
            s.cpu_mhz = Some(2000.0 + s.t_ms % 700.0);
            s.device_mhz = Some(900.0);
        }
        let sampled = during(Some(0), samples);
        let context = TimelineContext {
            first_token_limit_ms: 600.0,
            rate_floor_tok_s: 50.0,
            during: Some(&sampled),
        };
        let svg = svg(&replies, &context, "runs/worst").unwrap();
        assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
        assert_eq!(circles_of(&svg, POINT_FAILED).len(), 1000 + 1);
        let rows = EDGE_ROWS + MARKED_ROWS + 1 + EDGE_ROWS;
        assert!(text_of(&svg).contains("replies 31 to 990 not drawn here"));
        assert!(circles_of(&svg, BLACK).len() <= rows * dots_per_row(rows) + 1);
    }
}
