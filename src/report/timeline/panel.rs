//! The picture's lower part, from [`super::PANEL_FROM_REPLIES`] replies on: the decode rate of
//! each reply at its end on the run's clock, the rate floor, the box's throttle events and
//! clocks. Every text is outside the plot (units above it, ticks beside and below, the floor's
//! value and the notes in the legend), so no point or line is ever under one.

use std::ops::Range;

use super::drawn::{
    one_a_pixel, thin, throttle_rises, Drawn, Frame, TimelineContext, CPU_CLOCK, DEPTH,
    DEVICE_CLOCK, POINT_BURST, POINT_FAILED, POINT_OK, THROTTLE,
};
use super::rows::{time_axis, AXIS_PX, AXIS_TITLE_SIZE, MOST_TICKS, TICK_SIZE};
use super::svg_writer::{
    fit, legend, text_width, Anchor, Colour, Entry, Label, Sample, Scale, Svg, Ticks, BLACK, GREY,
    RED,
};
use crate::archive::record::DuringReplies;

/// The plot's height, px.
const PLOT_PX: f64 = 220.0;
/// Above the plot: the caption's line and the units' line.
const HEAD_PX: f64 = 38.0;
/// At most this many steps on a value axis: about 37 px apart.
const MOST_VALUE_TICKS: usize = 6;
/// A clock series is one polyline; an hour of 250 ms samples is 14,400 points, more than the
/// panel has pixels.
const MAX_CLOCK_POINTS: usize = 2000;

/// Where the sampled conditions sit on the panel's clock: seconds since `origin_ns` of a
/// sample `t_ms` after sampling began, or None when the run did not record when that was.
fn sample_clock(during: &DuringReplies, origin_ns: u64) -> Option<impl Fn(f64) -> f64> {
    let started_ns = during.started_ns?;
    Some(move |t_ms: f64| (started_ns as f64 - origin_ns as f64) / 1e9 + t_ms / 1e3)
}

/// The most points the rate panel draws: one a reply up to a soak of this many (about 65
/// bytes each, so about 0.3 MB); past it, every n-th reply that did not fail, and every failed
/// one (a soak's 20,000 replies stay a picture of a few hundred kilobytes).
pub const MAX_PANEL_POINTS: usize = 5000;

/// `points` (x, rate, colour) within [`MAX_PANEL_POINTS`]: the failed ones all, the rest
/// thinned evenly to the room left.
pub(super) fn panel_points(points: Vec<(f64, f64, Colour)>) -> Vec<(f64, f64, Colour)> {
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
/// clocks (x, MHz), and the axes.
pub(super) struct PanelData {
    points: Vec<(f64, f64, Colour)>,
    rises: Vec<f64>,
    throttles: Vec<f64>,
    throttle_lines: Vec<f64>,
    cpu_mhz: Vec<(f64, f64)>,
    device_mhz: Vec<(f64, f64)>,
    pub(super) axes: PanelAxes,
}

/// The panel's axes: seconds, tok/s on the left, MHz on the right where a clock was sampled.
#[derive(Debug, Clone, Copy)]
pub(super) struct PanelAxes {
    pub x: Ticks,
    pub rate: Ticks,
    pub mhz: Option<Ticks>,
}

/// The rate panel's points, throttle events, clocks and axes, on the clock of the first
/// request's send.
pub(super) fn panel_data(drawn: &[Drawn], context: &TimelineContext) -> PanelData {
    let floor = context.rate_floor_tok_s;
    let origin_ns = drawn.iter().map(|d| d.reply.sent_ns).min().unwrap_or(0);
    let at_s = |ns: u64| ns.saturating_sub(origin_ns) as f64 / 1e9;
    // (x, rate, colour) a reply with a rate: a failed reply is red, a burst's stream purple, a
    // reply at depth brown.
    let points: Vec<(f64, f64, Colour)> = drawn
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
    // Room so the first and last points are not on the frame; none below 0 where nothing
    // is (the axis would get a tick of -1 s for no event).
    let x_pad = (x_max - x_min) * 0.02;
    let x_start = if x_min < 0.0 { x_min - x_pad } else { x_min };
    let x_range: Range<f64> = x_start..(x_max + x_pad);
    let x = Ticks::covering(x_range.start, x_range.end, MOST_TICKS);
    let throttle_lines = one_a_pixel(&throttles, &(x.lo..x.hi));
    let rate_top = points.iter().map(|p| p.1).fold(floor, f64::max);
    let mhz_top = cpu_mhz
        .iter()
        .chain(&device_mhz)
        .map(|p| p.1)
        .fold(0f64, f64::max);
    // A little room above the highest point, so it is not on the frame.
    let value_axis = |top: f64| {
        Ticks::covering(
            0.0,
            if top > 0.0 { top * 1.05 } else { 1.0 },
            MOST_VALUE_TICKS,
        )
    };
    let axes = PanelAxes {
        x,
        rate: value_axis(rate_top),
        mhz: (mhz_top > 0.0).then(|| value_axis(mhz_top)),
    };
    PanelData {
        points,
        rises,
        throttles,
        throttle_lines,
        cpu_mhz,
        device_mhz,
        axes,
    }
}

/// The panel's scales on the page: seconds across, tok/s and MHz up.
struct Scales {
    x: Scale,
    rate: Scale,
    mhz: Option<Scale>,
    top: f64,
    bottom: f64,
}

/// The rate panel from `top`: caption and units, the plot, its axes and its legend. Returns
/// the y below it.
pub(super) fn draw(svg: &mut Svg, frame: &Frame, data: &PanelData, floor: f64, top: f64) -> f64 {
    let (plot_top, plot_bottom) = (top + HEAD_PX, top + HEAD_PX + PLOT_PX);
    let up = |ticks: Ticks| Scale {
        ticks,
        from_px: plot_bottom,
        to_px: plot_top,
    };
    let s = Scales {
        x: Scale {
            ticks: data.axes.x,
            from_px: frame.plot_left,
            to_px: frame.plot_right,
        },
        rate: up(data.axes.rate),
        mhz: data.axes.mhz.map(up),
        top: plot_top,
        bottom: plot_bottom,
    };
    let caption = fit(
        "decode rate of each reply, at its end",
        12.0,
        frame.width - 2.0 * frame.margin,
    );
    let centre = (frame.plot_left + frame.plot_right) / 2.0;
    svg.text(
        centre,
        top + 10.0,
        &Label::new(&caption, 12.0).anchor(Anchor::Middle),
    );
    value_axes(svg, frame, &s, top);
    svg.frame(
        (frame.plot_left, plot_top),
        (frame.plot_right, plot_bottom),
        "plot",
    );
    let mut entries = Vec::new();
    if let Some(mhz) = &s.mhz {
        for (series, colour, what) in [
            (
                &data.cpu_mhz,
                CPU_CLOCK,
                "grey line: the mean CPU clock, MHz",
            ),
            (
                &data.device_mhz,
                DEVICE_CLOCK,
                "green line: the device clock, MHz",
            ),
        ] {
            if series.is_empty() {
                continue;
            }
            let line: Vec<(f64, f64)> = series
                .iter()
                .map(|&(t, f)| (s.x.at(t), mhz.at(f)))
                .collect();
            svg.polyline(&line, (colour, 1.0, 0.45), "data");
            entries.push(Entry {
                sample: Sample::Line(colour, 1.0, 0.45),
                text: what.into(),
                colour: BLACK,
            });
        }
    }
    throttles(svg, &s, data, &mut entries);
    let y = s.rate.at(floor);
    svg.polyline(
        &[(frame.plot_left, y), (frame.plot_right, y)],
        (RED, 2.0, 1.0),
        "rule",
    );
    entries.push(Entry {
        sample: Sample::Line(RED, 2.0, 1.0),
        text: format!("red line: the rate floor {floor:.1} tok/s (of the median)"),
        colour: BLACK,
    });
    points(svg, &s, &data.points, &mut entries);
    time_axis(
        svg,
        frame,
        &s.x,
        plot_bottom,
        "s since the first request was sent",
    );
    legend(
        svg,
        &entries,
        frame.margin,
        frame.width - frame.margin,
        plot_bottom + AXIS_PX,
    )
}

/// The units above the plot, the value ticks beside it and their faint lines across it.
fn value_axes(svg: &mut Svg, frame: &Frame, s: &Scales, top: f64) {
    let units = top + 28.0;
    svg.text(
        frame.plot_left - 6.0,
        units,
        &Label::new("tok/s", AXIS_TITLE_SIZE)
            .anchor(Anchor::End)
            .colour(GREY),
    );
    for v in s.rate.ticks.values() {
        let y = s.rate.at(v);
        svg.polyline(
            &[(frame.plot_left, y), (frame.plot_right, y)],
            (GREY, 1.0, 0.12),
            "grid",
        );
        let label = s.rate.ticks.label(v);
        let tick = Label::new(&label, TICK_SIZE)
            .anchor(Anchor::End)
            .colour(GREY);
        svg.text(frame.plot_left - 6.0, y + 3.5, &tick);
    }
    if let Some(mhz) = &s.mhz {
        svg.text(
            frame.plot_right + 6.0,
            units,
            &Label::new("MHz", AXIS_TITLE_SIZE).colour(GREY),
        );
        for v in mhz.ticks.values() {
            let label = mhz.ticks.label(v);
            let tick = Label::new(&label, TICK_SIZE).colour(GREY);
            svg.text(frame.plot_right + 6.0, mhz.at(v) + 3.5, &tick);
        }
    }
}

/// A throttle event an orange line (events less than a pixel apart one line); where they
/// could not be placed, a note saying how many there were.
fn throttles(svg: &mut Svg, s: &Scales, data: &PanelData, entries: &mut Vec<Entry>) {
    for &t in &data.throttle_lines {
        let x = s.x.at(t);
        svg.polyline(&[(x, s.bottom), (x, s.top)], (THROTTLE, 1.0, 1.0), "data");
    }
    if !data.throttle_lines.is_empty() {
        entries.push(Entry {
            sample: Sample::Line(THROTTLE, 1.0, 1.0),
            text: "orange line: a CPU throttle event".into(),
            colour: BLACK,
        });
    }
    if data.throttles.is_empty() && !data.rises.is_empty() {
        entries.push(Entry {
            sample: Sample::Nothing,
            text: format!(
                "{} throttle events, not placed: the run did not record when sampling began",
                data.rises.len()
            ),
            colour: THROTTLE,
        });
    }
}

/// The replies' points by colour, a legend entry for each colour drawn; where no reply has a
/// rate, a note saying so.
fn points(svg: &mut Svg, s: &Scales, points: &[(f64, f64, Colour)], entries: &mut Vec<Entry>) {
    for (colour, what) in [
        (POINT_OK, "blue point: the decode rate of a reply"),
        (POINT_BURST, "purple point: a stream of a concurrent burst"),
        (
            DEPTH,
            "brown point: a reply at depth (--depths), not the rate line's",
        ),
        (POINT_FAILED, "red point: a reply that failed"),
    ] {
        let mut any = false;
        for &(t, rate, _) in points.iter().filter(|p| p.2 == colour) {
            svg.circle((s.x.at(t), s.rate.at(rate)), 3.0, colour, "data");
            any = true;
        }
        if any {
            entries.push(Entry {
                sample: Sample::Dot(colour, 3.0),
                text: what.into(),
                colour: BLACK,
            });
        }
    }
    if points.is_empty() {
        entries.push(Entry {
            sample: Sample::Nothing,
            text: "no reply has a decode rate".into(),
            colour: RED,
        });
    }
}

/// The room the panel's value labels need beside the plot: (left, right).
pub(super) fn label_room(axes: &PanelAxes) -> (f64, f64) {
    let left = axes
        .rate
        .widest(TICK_SIZE)
        .max(text_width("tok/s", AXIS_TITLE_SIZE));
    let right = axes.mhz.map_or(0.0, |m| {
        m.widest(TICK_SIZE).max(text_width("MHz", AXIS_TITLE_SIZE))
    });
    (left, right)
}
