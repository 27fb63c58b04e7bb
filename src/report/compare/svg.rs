//! `compare --svg`: the history of a fleet, for people (issue 21). A band a host: its runs'
//! median decode rate on the left, their median first-token time on the right, over the runs'
//! start times (UTC). Each run is a marker by its RESULT (a shape and a colour each, in the
//! legend at the top); the rate floor and the first-token limit each run recorded are drawn as
//! steps, so a floor raised between releases shows where it was raised. A host's groups share
//! its band (a serve or model changed is a grey vertical line, named at its top): a band a
//! group would split a host's history at every release, which is the history wanted.
//!
//! Up to [`MAX_HOSTS`] hosts are drawn (in the table's order); the rest are named as left out.

use std::collections::BTreeMap;
use std::ops::Range;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

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

/// The comparison as SVG text: the legend, then a band a host (at most [`MAX_HOSTS`]).
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
    let height = TOP_PX + BAND_PX * drawn.max(1) as u32 + 30;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing_error)?;
        let readable = rows.len() - unreadable;
        let title = format!(
            "{} on {}: median decode rate and first token, by start (UTC)",
            plural(readable, "run", "runs"),
            plural(hosts.len(), "host", "hosts"),
        );
        root.draw(&Text::new(
            title,
            (16, 12),
            ("sans-serif", 18).into_font().color(&TEXT),
        ))
        .map_err(drawing_error)?;
        let mut x = 16;
        for m in MARKERS {
            draw_marker(&root, (x + 5, 52), m).map_err(drawing_error)?;
            let text = format!("{} ({})", m.result, m.shape);
            root.draw(&Text::new(
                text.clone(),
                (x + 16, 45),
                ("sans-serif", 13).into_font().color(&TEXT),
            ))
            .map_err(drawing_error)?;
            x += 30 + 8 * text.len() as i32;
        }
        root.draw(&PathElement::new(
            [(x, 52), (x + 20, 52)],
            FLOOR.stroke_width(2),
        ))
        .map_err(drawing_error)?;
        root.draw(&Text::new(
            "each run's floor / limit",
            (x + 26, 45),
            ("sans-serif", 13).into_font().color(&TEXT),
        ))
        .map_err(drawing_error)?;
        let (_, body) = root.split_vertically(TOP_PX);
        let bands = body.split_evenly((drawn.max(1), 1));
        for ((host, runs), band) in hosts.iter().take(MAX_HOSTS).zip(&bands) {
            draw_host(band, host, runs)?;
        }
        let mut notes = Vec::new();
        if hosts.len() > MAX_HOSTS {
            notes.push(format!(
                "{} not drawn (read them with --csv)",
                plural(hosts.len() - MAX_HOSTS, "more host", "more hosts")
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
        if hosts.is_empty() {
            notes.push("no run could be read".to_string());
        }
        if !notes.is_empty() {
            root.draw(&Text::new(
                notes.join("; "),
                (16, height as i32 - 22),
                ("sans-serif", 13).into_font().color(&TEXT),
            ))
            .map_err(drawing_error)?;
        }
        root.present().map_err(drawing_error)?;
    }
    Ok(out)
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
    draw_panel(
        &left,
        &format!("{host}: median decode rate"),
        "tok/s",
        runs,
        &x_range,
        panel,
    )?;
    let panel = |r: &Run| (r.row.median_first_token_ms, r.row.first_token_limit_ms);
    draw_panel(
        &right,
        &format!("{host}: median first token"),
        "ms",
        runs,
        &x_range,
        panel,
    )?;
    Ok(())
}

/// One panel: a marker a run with the figure, the floor's steps, a grey line where the group
/// changed.
fn draw_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    caption: &str,
    unit: &str,
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
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 14))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range.clone(), 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(4)
        .x_label_formatter(&|x| label(*x))
        .y_desc(unit)
        .light_line_style(BLACK.mix(0.04))
        .draw()
        .map_err(err)?;
    for pair in runs.windows(2) {
        if pair[0].group == pair[1].group {
            continue;
        }
        let (t, g) = (pair[1].at, pair[1].group);
        chart
            .draw_series(LineSeries::new(
                [(t, 0.0), (t, y_max)],
                GROUP_LINE.stroke_width(1),
            ))
            .map_err(err)?;
        let short = |s: &Option<String>| {
            s.as_ref()
                .map_or_else(|| "-".to_string(), |h| h.chars().take(12).collect())
        };
        chart
            .draw_series(std::iter::once(Text::new(
                format!(
                    "serve {} model {}",
                    short(&g.serve_sha256),
                    short(&g.model_sha256)
                ),
                (t, y_max * 0.99),
                ("sans-serif", 10).into_font().color(&GROUP_LINE),
            )))
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
    for &(x, y, result) in &values {
        let at = plot.map_coordinate(&(x, y));
        let offset = plot.get_base_pixel();
        draw_marker(
            &plot.strip_coord_spec(),
            (at.0 - offset.0, at.1 - offset.1),
            marker_of(result),
        )
        .map_err(err)?;
    }
    if off_scale > 0 {
        chart
            .draw_series(std::iter::once(Text::new(
                format!(
                    "the floor / limit of {} above the axis, drawn along its top",
                    match off_scale {
                        1 => "1 run is".to_string(),
                        n => format!("{n} runs are"),
                    }
                ),
                (x_range.start, y_max * 0.93),
                ("sans-serif", 11).into_font().color(&FLOOR),
            )))
            .map_err(err)?;
    }
    if values.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new(
                format!("no run of this host has a {caption}"),
                (x_range.start, y_max * 0.5),
                ("sans-serif", 13).into_font().color(&TEXT),
            )))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::unix_seconds;
    use crate::report::timeline::tests::{elements, hex};

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

    #[test]
    fn counts_say_one_thing_or_many() {
        let one = svg(&[run("a", "1", "2026-11-01T10:00:00Z", "PASS", 9.0, 1.0)]).unwrap();
        assert!(one.contains("1 run on 1 host: "), "{one}");
        let mut rows: Vec<Row> = (0..=MAX_HOSTS)
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
        rows[0].started_unix_s = None;
        rows[1].rate_floor_tok_s = Some(1e9);
        let many = svg(&rows).unwrap();
        assert!(many.contains("1 more host not drawn"), "{}", many.len());
        assert!(many.contains("1 run without a readable start time not drawn"));
        assert!(many.contains("the floor / limit of 1 run is above the axis"));
        let mut rows = fleet();
        rows[1].rate_floor_tok_s = Some(1e9);
        rows[2].rate_floor_tok_s = Some(1e9);
        assert!(svg(&rows)
            .unwrap()
            .contains("the floor / limit of 2 runs are above the axis"));
    }
}
