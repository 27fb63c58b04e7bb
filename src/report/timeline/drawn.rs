//! What the picture is drawn from, shared by its parts: the replies as drawn (figures and
//! marks), which of them get a row, the throttle events, the colours and where the plots sit.

use crate::archive::record::{DepthSlot, DuringReplies, Floors, LoadSnapshot, ReplyRecord};
use crate::judging::verdict::words::grouped;

use super::svg_writer::Colour;

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

pub(super) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A row is about 800 pixels wide: more dots than this are drawn on top of one another, and
/// drawing 20,000 of them costs the gate more than streaming them did.
pub const MAX_DOTS_PER_ROW: usize = 1000;
/// The dots of all rows together: a dot is about 65 bytes of SVG, so this keeps the rows under
/// about 0.4 MB however many tokens the replies had.
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

/// About the panel's plotting width, in pixels: throttle events closer than one of these apart
/// are one line (a box throttling on every sample for an hour would otherwise draw 14,400).
pub(super) const PANEL_PLOT_PX: f64 = 800.0;

/// The panel's colours, each used by nothing else in the picture, so a reader (and a test) can
/// tell its points and markers apart.
pub(super) const POINT_OK: Colour = Colour(31, 119, 180);
pub(super) const POINT_FAILED: Colour = Colour(214, 39, 40);
pub(super) const POINT_BURST: Colour = Colour(148, 103, 189);
/// The replies of `--depths`: their bars in the rows and their points in the panel.
pub(super) const DEPTH: Colour = Colour(140, 86, 75);
pub(super) const THROTTLE: Colour = Colour(255, 127, 14);
pub(super) const CPU_CLOCK: Colour = Colour(127, 127, 127);
pub(super) const DEVICE_CLOCK: Colour = Colour(44, 160, 44);

/// At most `max` of `points`: every n-th, always keeping the last (where a stall at the end
/// shows).
pub(super) fn thin<T: Copy + PartialEq>(points: &[T], max: usize) -> Vec<T> {
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
pub(super) fn row_mark(
    r: &ReplyRecord,
    first_token_ms: Option<f64>,
    limit_ms: f64,
) -> Option<String> {
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
pub(super) fn depth_name(slot: &DepthSlot) -> String {
    if slot.limit_probe {
        format!("limit probe, {} tokens", grouped(slot.depth.into()))
    } else {
        format!("depth {}", grouped(slot.depth.into()))
    }
}

/// A row of the picture's top part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Row {
    /// The reply at this index of the run's replies.
    Reply(usize),
    /// The replies from..=to, left out.
    LeftOut { from: usize, to: usize },
}

/// Which replies get a row, given which are marked (failed or over the limit): all of them up
/// to [`ALL_ROWS_UP_TO`]; above it the first and last [`EDGE_ROWS`] and the first
/// [`MARKED_ROWS`] marked ones between, with a [`Row::LeftOut`] for each run of the rest.
pub(super) fn rows_to_draw(marked: &[bool]) -> Vec<Row> {
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
pub(super) fn dots_per_row(rows: usize) -> usize {
    (DOTS_IN_ROWS / rows.max(1)).clamp(1, MAX_DOTS_PER_ROW)
}

/// The `t_ms` of each sample whose throttle count rose from the sample before it: one event
/// each, however large the rise (the count is of the kernel's events, and several in one
/// interval are one thing to see). A sample without a count breaks the chain: a rise is only
/// counted between two readings.
pub(super) fn throttle_rises(during: &DuringReplies) -> Vec<f64> {
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
pub(super) fn one_a_pixel(times: &[f64], range: &std::ops::Range<f64>) -> Vec<f64> {
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
pub(super) struct Drawn<'r> {
    pub(super) reply: &'r ReplyRecord,
    pub(super) first_token_ms: Option<f64>,
    pub(super) rate_tok_s: Option<f64>,
    pub(super) failed: bool,
    pub(super) mark: Option<String>,
}

/// Where the plots sit across the picture, the same for the rows and the panel: left of them
/// the row names and the rate ticks, right of them the MHz ticks (or half the widest time
/// tick, which is centred on the axis's end).
pub(super) struct Frame {
    pub(super) width: f64,
    pub(super) margin: f64,
    pub(super) plot_left: f64,
    pub(super) plot_right: f64,
}
