//! `compare --svg`: the history of a fleet, for people (issue 21). A band a host: its runs'
//! median decode rate on the left, their median first-token time on the right, over the runs'
//! start times (UTC). Each run is a marker by its RESULT (a shape and a colour each, in the
//! legend at the top); the rate floor and the first-token limit each run recorded are drawn as
//! steps, so a floor raised between releases shows where it was raised. A host's groups share
//! its band (a serve or model changed is a grey vertical line, named at its top): a band a
//! group would split a host's history at every release, which is the history wanted.
//!
//! Up to [`MAX_HOSTS`] hosts are drawn (in the table's order); the rest are named as left out.
//!
//! Every text lies inside the picture (issue 39): the texts are in a monospace font, so a
//! text's width is known from its characters; a host name too long for its panel is
//! shortened with an ellipsis, and a group's label near the right edge is put left of its
//! line. Host names and hashes are archive text, made inert before plotters escapes the
//! markup.

use std::collections::BTreeMap;
use std::ops::Range;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::row::{GroupKey, Row};
use crate::judging::verdict::words::plural;

/// Hosts drawn at most: a band is 300 pixels high; a picture of a fleet larger than this is
/// better read as the CSV.
pub const MAX_HOSTS: usize = 24;

const WIDTH: u32 = 1200;
const TOP_PX: u32 = 80;
const BAND_PX: u32 = 300;

/// A RESULT's marker: its colour and the shape's name in the legend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Marker {
    /// The result word it marks.
    pub result: &'static str,
    /// Its fill colour.
    pub colour: RGBColor,
    /// Its shape, as the legend names it.
    pub shape: &'static str,
}

/// Each RESULT's marker, in the legend's order.
pub const MARKERS: [Marker; 5] = [
    Marker {
        result: "PASS",
        colour: RGBColor(0x1B, 0x9E, 0x3A),
        shape: "circle",
    },
    Marker {
        result: "FAIL",
        colour: RGBColor(0xD6, 0x27, 0x28),
        shape: "triangle",
    },
    Marker {
        result: "SKIP",
        colour: RGBColor(0x7F, 0x7F, 0x7F),
        shape: "square",
    },
    Marker {
        result: "INCONCLUSIVE",
        colour: RGBColor(0xFF, 0x8C, 0x00),
        shape: "diamond",
    },
    Marker {
        result: "INTERRUPTED",
        colour: RGBColor(0x80, 0x3C, 0xB0),
        shape: "triangle down",
    },
];

/// The rate floor's and the first-token limit's steps.
pub const FLOOR: RGBColor = RGBColor(0xC0, 0x10, 0x10);
/// Where a host's serve binary or model changed.
const GROUP_LINE: RGBColor = RGBColor(0x90, 0x90, 0x90);
const TEXT: RGBColor = RGBColor(0x20, 0x20, 0x20);

fn drawing_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("failed to draw the comparison: {e}")
}

/// The marker of a result word; an unknown word (a newer build's) is drawn as SKIP's grey,
/// never left out.
fn marker_of(result: &str) -> Marker {
    MARKERS
        .iter()
        .copied()
        .find(|m| m.result == result)
        .unwrap_or(MARKERS[2])
}

/// One marker centred on `at` (pixels), filled with its colour.
fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    at: (i32, i32),
    m: Marker,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let style = m.colour.filled();
    match m.result {
        "PASS" => area.draw(&(EmptyElement::at(at) + Circle::new((0, 0), 4, style))),
        "FAIL" => {
            area.draw(&(EmptyElement::at(at) + Polygon::new(vec![(0, -5), (5, 4), (-5, 4)], style)))
        }
        "INCONCLUSIVE" => area.draw(
            &(EmptyElement::at(at) + Polygon::new(vec![(0, -5), (5, 0), (0, 5), (-5, 0)], style)),
        ),
        "INTERRUPTED" => area
            .draw(&(EmptyElement::at(at) + Polygon::new(vec![(-5, -4), (5, -4), (0, 5)], style))),
        _ => area.draw(&(EmptyElement::at(at) + Rectangle::new([(-4, -4), (4, 4)], style))),
    }
}

/// A host's runs as the picture needs them, oldest first.
struct Run<'a> {
    at: f64,
    row: &'a Row,
    group: &'a GroupKey,
}

/// The floor a step a run: each run's value from its start to the next run's, the last to the
/// end of the axis.
pub fn steps(points: &[(f64, f64)], x_end: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(x, y)) in points.iter().enumerate() {
        out.push((x, y));
        let next = points.get(i + 1).map_or(x_end, |p| p.0);
        out.push((next, y));
    }
    out
}

/// The top of a panel's axis: room above the highest figure and the floors near the figures.
/// A floor more than [`FLOOR_SCALE`] times the highest figure (a stand-in's 600,000 ms limit, a
/// floor set to fail on purpose) would flatten every figure onto the axis: it is left above.
fn y_top(figures: &[f64], floors: &[f64]) -> f64 {
    let finite = |v: &&f64| v.is_finite() && **v > 0.0;
    let highest = figures.iter().filter(finite).fold(0f64, |a, &b| a.max(b));
    let near = floors
        .iter()
        .filter(finite)
        .filter(|&&f| highest == 0.0 || f <= highest * FLOOR_SCALE)
        .fold(highest, |a, &b| a.max(b));
    if near > 0.0 {
        near * 1.2
    } else {
        1.0
    }
}

/// How far above the highest figure a floor may be and still set the axis.
const FLOOR_SCALE: f64 = 3.0;

/// A start time as the axis labels it: `2026-12-01 20:04`.
fn label(unix_s: f64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(unix_s.max(0.0));
    let s = humantime::format_rfc3339_seconds(t).to_string();
    s.get(..16).unwrap_or(&s).replace('T', " ")
}

/// The picture's font: a monospace stack, so that a text's width follows from its length and
/// every text can be kept inside the picture (issue 39).
const FONT: &str = "DejaVu Sans Mono, Liberation Mono, monospace";

/// The most pixels `text` can take at plotters' font `size`. plotters writes `font-size` as
/// size / 1.24; a character of [`FONT`] advances 0.6 em, so 0.62 em is an upper bound; a
/// character outside ASCII may come from a fallback font (a CJK or emoji glyph, up to 1.25 em
/// wide), so it counts 1.3 em.
fn text_px(text: &str, size: u32) -> i32 {
    let em = f64::from(size) / 1.24;
    let ems: f64 = text
        .chars()
        .map(|c| if c.is_ascii() { 0.62 } else { 1.3 })
        .sum();
    (ems * em).ceil() as i32
}

/// `text` whole if it fits in `max_px` at `size`, else its beginning and an ellipsis.
fn fit(text: &str, size: u32, max_px: i32) -> String {
    if text_px(text, size) <= max_px {
        return text.to_string();
    }
    let mut out = String::new();
    for c in text.chars() {
        out.push(c);
        if text_px(&out, size) + text_px("\u{2026}", size) > max_px {
            out.pop();
            break;
        }
    }
    out.push('\u{2026}');
    out
}

/// `text` in [`FONT`] at `size`, in `colour`.
fn font(size: u32, colour: &RGBColor) -> TextStyle<'static> {
    (FONT, size).into_font().color(colour)
}

/// The comparison as SVG text: the legend, then a band a host (at most [`MAX_HOSTS`]), then
/// what was not drawn, a line each.
pub fn svg(rows: &[Row]) -> Result<String> {
    let mut hosts: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    let mut unplaced = 0;
    for r in rows {
        let Some(group) = &r.group else { continue };
        let runs = hosts.entry(group.host.as_str()).or_default();
        match r.started_unix_s {
            Some(at) => runs.push(Run { at, row: r, group }),
            None => unplaced += 1,
        }
    }
    for runs in hosts.values_mut() {
        runs.sort_by(|a, b| a.at.total_cmp(&b.at));
    }
    let unreadable = rows.iter().filter(|r| r.group.is_none()).count();
    let drawn = hosts.len().min(MAX_HOSTS);
    let notes = notes(hosts.len(), unplaced, unreadable);
    let height = TOP_PX + BAND_PX * drawn.max(1) as u32 + NOTE_PX * notes.len() as u32 + 12;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let title = format!(
            "{} on {}: median decode rate and first token, by start (UTC)",
            plural(rows.len() - unreadable, "run", "runs"),
            plural(hosts.len(), "host", "hosts"),
        );
        let title = fit(&title, 18, WIDTH as i32 - 32);
        root.draw(&Text::new(title, (16, 12), font(18, &TEXT)))
            .map_err(drawing_error)?;
        legend(&root)?;
        let (_, body) = root.split_vertically(TOP_PX);
        let (body, _) = body.split_vertically(BAND_PX * drawn.max(1) as u32);
        let bands = body.split_evenly((drawn.max(1), 1));
        for ((host, runs), band) in hosts.iter().take(MAX_HOSTS).zip(&bands) {
            draw_host(band, host, runs)?;
        }
        let first = TOP_PX + BAND_PX * drawn.max(1) as u32 + 4;
        for (i, note) in notes.iter().enumerate() {
            let y = (first + NOTE_PX * i as u32) as i32;
            let note = fit(note, 13, WIDTH as i32 - 32);
            root.draw(&Text::new(note, (16, y), font(13, &TEXT)))
                .map_err(drawing_error)?;
        }
        root.present().map_err(drawing_error)?;
    }
    Ok(out)
}

/// A line of the notes below the bands.
const NOTE_PX: u32 = 18;

/// What the picture leaves out, a sentence each.
fn notes(hosts: usize, unplaced: usize, unreadable: usize) -> Vec<String> {
    let mut notes = Vec::new();
    if hosts > MAX_HOSTS {
        notes.push(format!(
            "{} not drawn (read them with --csv)",
            plural(hosts - MAX_HOSTS, "more host", "more hosts")
        ));
    }
    if unplaced > 0 {
        notes.push(format!(
            "{} without a readable start time not drawn",
            plural(unplaced, "run", "runs")
        ));
    }
    if unreadable > 0 {
        notes.push(format!(
            "{} not drawn",
            plural(unreadable, "unreadable directory", "unreadable directories")
        ));
    }
    if hosts == 0 {
        notes.push("no run could be read".to_string());
    }
    notes
}

/// The legend: each RESULT's marker and name, then the floor's step, left to right.
fn legend(root: &DrawingArea<SVGBackend, Shift>) -> Result<()> {
    let mut x = 16;
    for m in MARKERS {
        draw_marker(root, (x + 5, 52), m).map_err(drawing_error)?;
        let text = format!("{} ({})", m.result, m.shape);
        let width = text_px(&text, 13);
        root.draw(&Text::new(text, (x + 16, 45), font(13, &TEXT)))
            .map_err(drawing_error)?;
        x += 16 + width + 24;
    }
    root.draw(&PathElement::new(
        [(x, 52), (x + 20, 52)],
        FLOOR.stroke_width(2),
    ))
    .map_err(drawing_error)?;
    root.draw(&Text::new(
        "each run's floor / limit",
        (x + 26, 45),
        font(13, &TEXT),
    ))
    .map_err(drawing_error)?;
    Ok(())
}

/// A host's band: the rate on the left, the first-token time on the right.
fn draw_host(band: &DrawingArea<SVGBackend, Shift>, host: &str, runs: &[Run]) -> Result<()> {
    let (left, right) = band.split_horizontally(WIDTH / 2);
    let (lo, hi) = runs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
            (lo.min(r.at), hi.max(r.at))
        });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo - 3600.0, lo + 3600.0)
    } else {
        (0.0, 3600.0)
    };
    let pad = (hi - lo) * 0.04;
    let x_range = (lo - pad)..(hi + pad);
    // A host name is an archive's, which anything may have written: SVG text made inert
    // (plotters escapes the markup, not the controls XML forbids).
    let host = crate::inert::xml(host);
    let panel = |r: &Run| (r.row.median_rate_tok_s, r.row.rate_floor_tok_s);
    draw_panel(&left, &host, RATE, runs, &x_range, panel)?;
    let panel = |r: &Run| (r.row.median_first_token_ms, r.row.first_token_limit_ms);
    draw_panel(&right, &host, FIRST_TOKEN, runs, &x_range, panel)?;
    Ok(())
}

/// What a panel draws: its name in the caption and its unit.
struct Figure {
    name: &'static str,
    unit: &'static str,
}

const RATE: Figure = Figure {
    name: "median decode rate",
    unit: "tok/s",
};
const FIRST_TOKEN: Figure = Figure {
    name: "median first token",
    unit: "ms",
};

/// The panel's caption, `{host}: {figure}`, the host shortened so that it fits `width`
/// pixels less the chart's margins.
fn caption(host: &str, figure: &Figure, width: i32) -> String {
    let tail = format!(": {}", figure.name);
    let room = width - MARGIN_PX - right_margin_px() - text_px(&tail, CAPTION_SIZE) - 4;
    format!("{}{tail}", fit(host, CAPTION_SIZE, room))
}

const MARGIN_PX: i32 = 10;
const TICK_SIZE: u32 = 12;

/// The chart's right margin: half a time label, so that a label centred on the axis's right
/// end stays inside the panel.
fn right_margin_px() -> i32 {
    text_px("2026-12-01 20:04", TICK_SIZE) / 2 + 4
}
const CAPTION_SIZE: u32 = 14;

/// One panel: a marker a run with the figure, the floor's steps, a grey line where the group
/// changed.
fn draw_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    host: &str,
    figure: Figure,
    runs: &[Run],
    x_range: &Range<f64>,
    figure_and_floor: impl Fn(&Run) -> (Option<f64>, Option<f64>),
) -> Result<()> {
    let err = drawing_error;
    let values: Vec<(f64, f64, &str)> = runs
        .iter()
        .filter_map(|r| Some((r.at, figure_and_floor(r).0?, r.row.result.as_str())))
        .collect();
    let floors: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| Some((r.at, figure_and_floor(r).1?)))
        .collect();
    let y_max = y_top(
        &values.iter().map(|v| v.1).collect::<Vec<_>>(),
        &floors.iter().map(|f| f.1).collect::<Vec<_>>(),
    );
    // A floor above the axis is drawn along its top, and said.
    let off_scale = floors.iter().filter(|f| f.1 > y_max).count();
    let floors: Vec<(f64, f64)> = floors.iter().map(|&(x, f)| (x, f.min(y_max))).collect();
    let width = area.dim_in_pixel().0 as i32;
    let mut chart = ChartBuilder::on(area)
        .caption(
            caption(host, &figure, width),
            (FONT, CAPTION_SIZE).into_font(),
        )
        .margin(MARGIN_PX)
        .margin_right(right_margin_px())
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range.clone(), 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(4)
        .x_label_formatter(&|x| label(*x))
        .y_desc(figure.unit)
        .label_style((FONT, TICK_SIZE))
        .axis_desc_style((FONT, TICK_SIZE))
        // The grid lighter than a group change's grey line, so that the two are not confused.
        .bold_line_style(BLACK.mix(0.1))
        .light_line_style(BLACK.mix(0.04))
        .draw()
        .map_err(err)?;
    let changes: Vec<(f64, &GroupKey)> = runs
        .windows(2)
        .filter(|pair| pair[0].group != pair[1].group)
        .map(|pair| (pair[1].at, pair[1].group))
        .collect();
    for &(t, _) in &changes {
        chart
            .draw_series(LineSeries::new(
                [(t, 0.0), (t, y_max)],
                GROUP_LINE.stroke_width(1),
            ))
            .map_err(err)?;
    }
    if !floors.is_empty() {
        chart
            .draw_series(LineSeries::new(
                steps(&floors, x_range.end),
                FLOOR.stroke_width(2),
            ))
            .map_err(err)?;
    }
    let plot = chart.plotting_area();
    let offset = plot.get_base_pixel();
    let inside = plot.strip_coord_spec();
    let relative = |x: f64, y: f64| {
        let at = plot.map_coordinate(&(x, y));
        (at.0 - offset.0, at.1 - offset.1)
    };
    for &(x, y, result) in &values {
        draw_marker(&inside, relative(x, y), marker_of(result)).map_err(err)?;
    }
    let (plot_w, plot_h) = inside.dim_in_pixel();
    let (plot_w, plot_h) = (plot_w as i32, plot_h as i32);
    let mut row = 0;
    if off_scale > 0 {
        let note = format!(
            "the floor / limit of {} above the axis, drawn along its top",
            match off_scale {
                1 => "1 run is".to_string(),
                n => format!("{n} runs are"),
            }
        );
        let note = fit(&note, 11, plot_w - 8);
        inside
            .draw(&Text::new(note, (4, 4), font(11, &FLOOR)))
            .map_err(err)?;
        row = 1;
    }
    let lines: Vec<(i32, &GroupKey)> = changes
        .iter()
        .map(|&(t, g)| (relative(t, 0.0).0, g))
        .collect();
    group_labels(&inside, &lines, plot_w, row).map_err(err)?;
    if values.is_empty() {
        let text = fit(
            &format!("no run of this host has a {}", figure.name),
            13,
            plot_w - 8,
        );
        inside
            .draw(&Text::new(text, (4, plot_h / 2), font(13, &TEXT)))
            .map_err(err)?;
    }
    Ok(())
}

/// A group's label at its grey line's top: `serve 0123456789ab model 0123456789ab` (archive
/// text, made inert).
fn group_label(g: &GroupKey) -> String {
    let short = |s: &Option<String>| {
        s.as_ref().map_or_else(
            || "-".to_string(),
            |h| crate::inert::xml(&h.chars().take(12).collect::<String>()).into_owned(),
        )
    };
    format!(
        "serve {} model {}",
        short(&g.serve_sha256),
        short(&g.model_sha256)
    )
}

const GROUP_SIZE: u32 = 10;
const GROUP_ROW_PX: i32 = 11;
/// Rows of group labels at a panel's top, where the axis leaves room above the figures.
const GROUP_ROWS: i32 = 3;

/// Each group change's label, at the top of its line `(x pixel, group)` in a plot `plot_w`
/// wide: right of the line, or left of it (anchored at its end) where the right has no room,
/// shortened where neither side has; a label that would overlap one already placed goes a row
/// down, from `first_row` on.
fn group_labels<DB: DrawingBackend>(
    plot: &DrawingArea<DB, Shift>,
    lines: &[(i32, &GroupKey)],
    plot_w: i32,
    first_row: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let mut placed: Vec<(i32, i32, i32)> = Vec::new();
    for &(x, g) in lines {
        let text = group_label(g);
        let (right, left) = (plot_w - x - 3, x - 3);
        let wanted = text_px(&text, GROUP_SIZE);
        let on_right = wanted <= right || right >= left;
        let text = fit(&text, GROUP_SIZE, if on_right { right } else { left });
        let w = text_px(&text, GROUP_SIZE);
        let (x0, x1) = if on_right {
            (x + 3, x + 3 + w)
        } else {
            (x - 3 - w, x - 3)
        };
        let row = (first_row..first_row + GROUP_ROWS)
            .find(|&r| !placed.iter().any(|&(a, b, pr)| pr == r && a < x1 && x0 < b))
            .unwrap_or(first_row + GROUP_ROWS - 1);
        placed.push((x0, x1, row));
        let style = font(GROUP_SIZE, &GROUP_LINE);
        let (at, style) = if on_right {
            ((x + 3, 4 + row * GROUP_ROW_PX), style)
        } else {
            (
                (x - 3, 4 + row * GROUP_ROW_PX),
                style.pos(Pos::new(HPos::Right, VPos::Top)),
            )
        };
        plot.draw(&Text::new(text, at, style))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::unix_seconds;
    use crate::report::svg_check::{attributes, elements};
    use quick_xml::events::Event;
    use std::collections::HashMap;

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// A text's box in the picture, pixels, and what it says.
    #[derive(Debug, Clone)]
    struct TextBox {
        x0: f64,
        y0: f64,
        x1: f64,
        y1: f64,
        text: String,
    }

    impl TextBox {
        fn overlaps(&self, o: &TextBox) -> bool {
            self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
        }
    }

    /// The picture's size (its viewBox) and every `<text>` as the box it can take, read from
    /// what plotters wrote (x, y, dy, text-anchor, font-size, a rotation) independently of the
    /// drawing code: a character of a monospace font advances 0.6 em (0.62 taken), one outside
    /// ASCII up to 1.3 em; a line is 0.95 em above its baseline and 0.25 em below.
    fn text_boxes(svg: &str) -> ((f64, f64), Vec<TextBox>) {
        let mut reader = quick_xml::Reader::from_str(svg);
        let (mut view, mut boxes, mut open) = ((0.0, 0.0), Vec::new(), None);
        loop {
            match reader.read_event().expect("the SVG is well-formed XML") {
                Event::Eof => break,
                Event::Start(e) if e.name().as_ref() == b"svg" => {
                    let a = attributes(&e);
                    let v: Vec<f64> = a["viewBox"]
                        .split_whitespace()
                        .map(|n| n.parse().unwrap())
                        .collect();
                    assert_eq!((v[0], v[1]), (0.0, 0.0));
                    view = (v[2], v[3]);
                }
                Event::Start(e) if e.name().as_ref() == b"text" => {
                    open = Some((attributes(&e), String::new()));
                }
                Event::Text(t) => {
                    if let Some((_, text)) = open.as_mut() {
                        text.push_str(&t.decode().unwrap());
                    }
                }
                // quick-xml reads `&lt;` as a reference of its own.
                Event::GeneralRef(r) => {
                    if let Some((_, text)) = open.as_mut() {
                        let name = r.decode().unwrap();
                        let c = quick_xml::escape::resolve_predefined_entity(&name);
                        text.push_str(c.unwrap_or_else(|| panic!("&{name};")));
                    }
                }
                Event::End(e) if e.name().as_ref() == b"text" => {
                    let (a, text) = open.take().unwrap();
                    boxes.push(text_box(&a, text.trim_matches('\n')));
                }
                _ => {}
            }
        }
        (view, boxes)
    }

    fn text_box(a: &HashMap<String, String>, text: &str) -> TextBox {
        let num = |k: &str| -> f64 { a[k].parse().unwrap() };
        let (x, y, size) = (num("x"), num("y"), num("font-size"));
        let fonts = a["font-family"].to_lowercase();
        assert!(
            fonts.contains("mono"),
            "a text not in a monospace font: {a:?}"
        );
        let ems: f64 = text
            .chars()
            .map(|c| if c.is_ascii() { 0.62 } else { 1.3 })
            .sum();
        let w = ems * size;
        let (x0, x1) = match a["text-anchor"].as_str() {
            "start" => (x, x + w),
            "middle" => (x - w / 2.0, x + w / 2.0),
            "end" => (x - w, x),
            other => panic!("text-anchor {other}"),
        };
        let baseline = y + match a["dy"].as_str() {
            "0.76em" => 0.76 * size,
            "0.5ex" => 0.25 * size,
            "-0.5ex" => -0.25 * size,
            other => panic!("dy {other}"),
        };
        let (y0, y1) = (baseline - 0.95 * size, baseline + 0.25 * size);
        // rotate(a, cx, cy) turns the box about the text's point.
        let turn = a.get("transform").map_or(0.0, |t| {
            let inner = t.trim_start_matches("rotate(").trim_end_matches(')');
            inner
                .split(',')
                .next()
                .unwrap()
                .trim()
                .parse::<f64>()
                .unwrap()
        });
        let (sin, cos) = turn.to_radians().sin_cos();
        let corners = [(x0, y0), (x1, y0), (x0, y1), (x1, y1)].map(|(px, py)| {
            let (dx, dy) = (px - x, py - y);
            (x + dx * cos - dy * sin, y + dx * sin + dy * cos)
        });
        let fold = |f: fn(f64, f64) -> f64, pick: fn(&(f64, f64)) -> f64, init: f64| {
            corners.iter().map(pick).fold(init, f)
        };
        TextBox {
            x0: fold(f64::min, |c| c.0, f64::INFINITY),
            y0: fold(f64::min, |c| c.1, f64::INFINITY),
            x1: fold(f64::max, |c| c.0, f64::NEG_INFINITY),
            y1: fold(f64::max, |c| c.1, f64::NEG_INFINITY),
            text: text.to_string(),
        }
    }

    /// Every text lies inside the picture, and the legend's entries (the texts above the
    /// bands) overlap neither each other nor the title. Returns the boxes.
    fn assert_texts_inside(svg: &str) -> Vec<TextBox> {
        let ((w, h), boxes) = text_boxes(svg);
        assert!(!boxes.is_empty());
        for b in &boxes {
            assert!(
                b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= w && b.y1 <= h,
                "a text outside the {w}x{h} picture: {b:?}"
            );
        }
        let top: Vec<&TextBox> = boxes.iter().filter(|b| b.y1 < f64::from(TOP_PX)).collect();
        for (i, a) in top.iter().enumerate() {
            for b in &top[i + 1..] {
                assert!(!a.overlaps(b), "legend texts overlap: {a:?} {b:?}");
            }
        }
        boxes
    }

    fn run(host: &str, serve: &str, start: &str, result: &str, rate: f64, floor: f64) -> Row {
        Row {
            dir: format!("runs/{host}-{start}"),
            group: Some(GroupKey {
                host: host.into(),
                serve_sha256: Some(serve.repeat(64)),
                model_sha256: None,
            }),
            started_utc: Some(start.into()),
            started_unix_s: unix_seconds(start),
            median_rate_tok_s: Some(rate),
            median_first_token_ms: Some(300.0),
            rate_floor_tok_s: Some(floor),
            first_token_limit_ms: Some(1000.0),
            result: result.into(),
            ..Row::default()
        }
    }

    /// The shapes (circle, rect, polygon) filled with `colour`.
    fn filled(svg: &str, colour: RGBColor) -> Vec<String> {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| {
                ["circle", "rect", "polygon"].contains(&name.as_str())
                    && a.get("fill") == Some(&hex(colour))
            })
            .map(|(name, _)| name)
            .collect()
    }

    /// The polylines stroked with `colour`, each as its points.
    fn polylines(svg: &str, colour: RGBColor) -> Vec<Vec<(f64, f64)>> {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| name == "polyline" && a.get("stroke") == Some(&hex(colour)))
            .map(|(_, a)| {
                a["points"]
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect()
    }

    fn fleet() -> Vec<Row> {
        vec![
            run("a", "1", "2026-11-01T10:00:00Z", "PASS", 20.0, 5.0),
            run("a", "1", "2026-11-02T10:00:00Z", "FAIL", 3.0, 5.0),
            run("a", "2", "2026-11-03T10:00:00Z", "SKIP", 18.0, 8.0),
            run("b", "1", "2026-11-01T11:00:00Z", "INCONCLUSIVE", 15.0, 5.0),
            run("b", "1", "2026-11-02T11:00:00Z", "INTERRUPTED", 14.0, 5.0),
            run("b", "1", "2026-11-03T11:00:00Z", "PASS", 16.0, 5.0),
            Row {
                dir: "runs/broken".into(),
                result: "UNREADABLE".into(),
                unreadable: Some("garbage".into()),
                ..Row::default()
            },
        ]
    }

    #[test]
    fn each_result_has_its_marker_in_both_panels_and_once_in_the_legend() {
        let svg = svg(&fleet()).unwrap();
        let count = |result: &str| filled(&svg, marker_of(result).colour);
        // A run is a marker in its rate panel and in its first-token panel; the legend one.
        assert_eq!(count("PASS").len(), 2 * 2 + 1);
        assert_eq!(count("FAIL").len(), 2 + 1);
        assert_eq!(count("SKIP").len(), 2 + 1);
        assert_eq!(count("INCONCLUSIVE").len(), 2 + 1);
        assert_eq!(count("INTERRUPTED").len(), 2 + 1);
        assert!(count("PASS").iter().all(|s| s == "circle"));
        assert!(count("SKIP").iter().all(|s| s == "rect"));
        assert!(count("FAIL").iter().all(|s| s == "polygon"));
        assert!(svg.contains("1 unreadable directory not drawn"), "{svg}");
        assert!(svg.contains("6 runs on 2 hosts"));
        assert!(svg.contains("a: median decode rate") && svg.contains("b: median first token"));
    }

    #[test]
    fn the_floors_are_drawn_as_steps_where_they_changed() {
        let svg = svg(&fleet()).unwrap();
        let lines = polylines(&svg, FLOOR);
        // The legend's sample, then host a's rate, a's first-token, b's both.
        assert_eq!(lines.len(), 1 + 4, "{lines:?}");
        assert!(
            lines[0].iter().all(|p| p.1 < f64::from(TOP_PX)),
            "the legend's on top"
        );
        // Host a's rate floor: 5, 5, then 8 from the third run: two levels, up in pixels
        // means down in y. Three runs give six points.
        let a_rate = &lines[1];
        assert_eq!(a_rate.len(), 6, "{a_rate:?}");
        let levels: std::collections::BTreeSet<i64> =
            a_rate.iter().map(|p| p.1.round() as i64).collect();
        assert_eq!(levels.len(), 2, "{a_rate:?}");
        assert!(a_rate[5].1 < a_rate[0].1, "the raised floor is higher");
        // Host a's serve changed before its third run: one grey line in each of its panels.
        assert_eq!(polylines(&svg, GROUP_LINE).len(), 2);
    }

    #[test]
    fn a_floor_far_above_the_figures_leaves_them_the_axis() {
        assert_eq!(y_top(&[10.0, 20.0], &[5.0]), 24.0);
        assert_eq!(
            y_top(&[10.0, 20.0], &[50.0]),
            60.0,
            "a floor near them is on the axis"
        );
        assert_eq!(y_top(&[10.0, 20.0], &[1e9]), 24.0);
        assert_eq!(
            y_top(&[], &[1e9]),
            1.2e9,
            "with no figure, the floor sets it"
        );
        assert_eq!(y_top(&[], &[]), 1.0);
        assert_eq!(y_top(&[f64::NAN], &[0.0]), 1.0);
        let mut rows = fleet();
        rows[1].rate_floor_tok_s = Some(1e9);
        let svg = svg(&rows).unwrap();
        assert!(
            svg.contains("the floor / limit of 1 run is above the axis"),
            "{svg}"
        );
    }

    #[test]
    fn steps_hold_each_value_until_the_next_point() {
        assert_eq!(
            steps(&[(0.0, 5.0), (10.0, 8.0)], 20.0),
            vec![(0.0, 5.0), (10.0, 5.0), (10.0, 8.0), (20.0, 8.0)]
        );
        assert!(steps(&[], 1.0).is_empty());
    }

    #[test]
    fn no_readable_run_still_draws_and_says_so() {
        let rows = vec![Row {
            dir: "x".into(),
            result: "UNREADABLE".into(),
            ..Row::default()
        }];
        let svg = svg(&rows).unwrap();
        assert!(svg.contains("no run could be read"));
        elements(&svg);
    }

    #[test]
    fn more_hosts_than_drawn_are_named() {
        let rows: Vec<Row> = (0..MAX_HOSTS + 3)
            .map(|i| {
                run(
                    &format!("h{i:02}"),
                    "1",
                    "2026-11-01T10:00:00Z",
                    "PASS",
                    9.0,
                    1.0,
                )
            })
            .collect();
        let svg = svg(&rows).unwrap();
        assert!(svg.contains("3 more hosts not drawn"), "{}", svg.len());
        assert_eq!(
            filled(&svg, marker_of("PASS").colour).len(),
            MAX_HOSTS * 2 + 1
        );
    }

    /// fleet()'s two hosts and a third whose runs have no floor recorded.
    fn three_hosts() -> Vec<Row> {
        let mut rows = fleet();
        for (i, result) in ["PASS", "FAIL"].into_iter().enumerate() {
            let start = format!("2026-11-0{}T12:00:00Z", i + 1);
            let mut r = run("c", "3", &start, result, 12.0, 4.0);
            r.rate_floor_tok_s = None;
            rows.push(r);
        }
        rows
    }

    /// One host's 13 runs, its serve changed at the last two (at the right edge), and its
    /// model hashed: the longest label a group change has.
    fn thirteen_runs() -> Vec<Row> {
        (0..13)
            .map(|i| {
                let serve = match i {
                    0..=10 => "1",
                    11 => "2",
                    _ => "3",
                };
                let start = format!("2026-11-{:02}T10:00:00Z", i + 1);
                let mut r = run("gate-box", serve, &start, "PASS", 20.0 + f64::from(i), 5.0);
                r.group.as_mut().unwrap().model_sha256 = Some("e".repeat(64));
                r
            })
            .collect()
    }

    /// Archive text that would act: markup, a bidi override, an escape, a long run of
    /// wide characters.
    const HOSTILE: &str = "<b>x</b>&amp;\u{202e}\u{1b}]52;\u{2066}\u{7f}";

    fn hostile() -> Vec<Row> {
        let mut rows = vec![
            run(HOSTILE, "1", "2026-11-01T10:00:00Z", "PASS", 20.0, 5.0),
            run(
                HOSTILE,
                "\u{202e}<i>",
                "2026-11-02T10:00:00Z",
                "PASS",
                21.0,
                5.0,
            ),
            run(
                &"\u{6f22}".repeat(90),
                "1",
                "2026-11-02T10:00:00Z",
                "PASS",
                21.0,
                5.0,
            ),
        ];
        rows[1].group.as_mut().unwrap().model_sha256 = Some("\u{202e}&<>\"'".repeat(3));
        rows
    }

    fn scenarios() -> Vec<(&'static str, Vec<Row>)> {
        let many: Vec<Row> = (0..MAX_HOSTS + 1)
            .map(|i| {
                run(
                    &format!("h{i:02}"),
                    "1",
                    "2026-11-01T10:00:00Z",
                    "PASS",
                    9.0,
                    1.0,
                )
            })
            .collect();
        let mut unplaced = fleet();
        unplaced[0].started_unix_s = None;
        vec![
            ("three hosts", three_hosts()),
            ("thirteen runs", thirteen_runs()),
            (
                "a 200-character host",
                vec![run(
                    &"h".repeat(200),
                    "1",
                    "2026-11-01T10:00:00Z",
                    "PASS",
                    9.0,
                    1.0,
                )],
            ),
            ("hostile", hostile()),
            ("more hosts than drawn", many),
            ("a run without a start", unplaced),
            ("no run", vec![Row::default()]),
        ]
    }

    #[test]
    fn every_text_lies_inside_the_picture() {
        for (name, rows) in scenarios() {
            let svg = svg(&rows).unwrap();
            let boxes = std::panic::catch_unwind(|| assert_texts_inside(&svg))
                .unwrap_or_else(|_| panic!("{name}: its texts fail the check above"));
            assert!(boxes.len() > 6, "{name}: {boxes:?}");
        }
    }

    #[test]
    fn a_group_label_at_the_right_edge_is_left_of_its_line_and_below_its_neighbour() {
        let svg = svg(&thirteen_runs()).unwrap();
        let labels: Vec<HashMap<String, String>> = elements(&svg)
            .into_iter()
            .filter(|(name, a)| name == "text" && a["fill"] == hex(GROUP_LINE))
            .map(|(_, a)| a)
            .collect();
        // Two changes a panel, two panels.
        assert_eq!(labels.len(), 4, "{labels:?}");
        let (_, boxes) = text_boxes(&svg);
        let boxes: Vec<&TextBox> = boxes
            .iter()
            .filter(|b| b.text.starts_with("serve "))
            .collect();
        assert_eq!(boxes[0].text, "serve 222222222222 model eeeeeeeeeeee");
        assert!(
            labels.iter().all(|a| a["text-anchor"] == "end"),
            "{labels:?}"
        );
        for pair in boxes.chunks(2) {
            assert!(!pair[0].overlaps(pair[1]), "{pair:?}");
        }
    }

    #[test]
    fn a_long_host_name_is_shortened_to_its_panel() {
        let svg = svg(&[run(
            &"h".repeat(200),
            "1",
            "2026-11-01T10:00:00Z",
            "PASS",
            9.0,
            1.0,
        )])
        .unwrap();
        let (_, boxes) = text_boxes(&svg);
        let caption = boxes
            .iter()
            .find(|b| b.text.ends_with(": median decode rate"))
            .unwrap();
        assert!(caption.text.starts_with("hhhh"), "{caption:?}");
        assert!(caption.text.contains("h\u{2026}: "), "{caption:?}");
        assert!(
            caption.x1 - caption.x0 <= f64::from(WIDTH / 2),
            "{caption:?}"
        );
    }

    #[test]
    fn archive_text_is_shown_as_text_never_as_markup_or_controls() {
        let svg = svg(&hostile()).unwrap();
        for c in ['\u{202e}', '\u{1b}', '\u{2066}', '\u{7f}'] {
            assert!(!svg.contains(c), "{c:?} reached the SVG");
        }
        assert!(!svg.contains("<b>") && !svg.contains("<i>"));
        let names: Vec<String> = elements(&svg).into_iter().map(|(n, _)| n).collect();
        assert!(!names.iter().any(|n| n == "b" || n == "i"), "{names:?}");
        let (_, boxes) = text_boxes(&svg);
        let texts: Vec<&str> = boxes.iter().map(|b| b.text.as_str()).collect();
        let host = r"<b>x</b>&amp;\u{202e}\u{1b}]52;\u{2066}\u{7f}: median decode rate";
        assert!(texts.contains(&host), "{texts:?}");
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with(r"serve \u{202e}<i>\u{202e}<i>")),
            "{texts:?}"
        );
        assert!(
            texts
                .iter()
                .any(|t| t.contains(r#"model \u{202e}&<>"'\u{202e}&"#)),
            "{texts:?}"
        );
    }

    #[test]
    fn counts_say_one_thing_or_many() {
        let one = svg(&[run("a", "1", "2026-11-01T10:00:00Z", "PASS", 9.0, 1.0)]).unwrap();
        assert!(one.contains("1 run on 1 host: "), "{one}");
        let svg13 = svg(&thirteen_runs()).unwrap();
        assert!(svg13.contains("13 runs on 1 host: "));
        assert_eq!(
            notes(MAX_HOSTS + 1, 1, 1),
            [
                "1 more host not drawn (read them with --csv)",
                "1 run without a readable start time not drawn",
                "1 unreadable directory not drawn",
            ]
        );
        assert_eq!(
            notes(MAX_HOSTS + 2, 2, 2),
            [
                "2 more hosts not drawn (read them with --csv)",
                "2 runs without a readable start time not drawn",
                "2 unreadable directories not drawn",
            ]
        );
        assert_eq!(notes(0, 0, 0), ["no run could be read"]);
        let mut rows = fleet();
        rows[1].rate_floor_tok_s = Some(1e9);
        rows[2].rate_floor_tok_s = Some(1e9);
        assert!(svg(&rows)
            .unwrap()
            .contains("the floor / limit of 2 runs are above the axis"));
    }

    #[test]
    fn fit_keeps_what_fits_and_shortens_the_rest() {
        assert_eq!(fit("abc", 10, 100), "abc");
        let cut = fit(&"a".repeat(100), 10, 100);
        assert!(
            cut.ends_with('\u{2026}') && text_px(&cut, 10) <= 100,
            "{cut}"
        );
        assert!(text_px(&fit(&"\u{6f22}".repeat(50), 10, 100), 10) <= 100);
        assert_eq!(text_px("abcd", 124), 4 * 62);
    }
}
