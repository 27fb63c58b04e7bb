//! timeline.svg: the picture of a run, for people (the verdict never reads it).
//!
//! On top, one row per reply on a shared time axis (each row starts at its request's send): the
//! wait for the first token as a bar, each token's arrival as a dot, its figures (first-token
//! ms, rate, and a mark where it failed or was over the limit) on a line of their own above.
//! A stall, a slow first token or a slow route shows at a glance. The replies of `--depths`
//! (issue 35) are told apart: their bars brown, each named before its figures (`depth 1,024`,
//! `limit probe, 3,072 tokens`), marked where it failed or did not give the fact, and never
//! marked over the first-token limit (a long prompt's first token is its prefill, which the
//! context lines judge, not the limit).
//!
//! The time axis spans the replies (issue 39, item 1). A first-token limit within 1.25 times
//! the latest reply's end is a red line to scale, labelled with its value; a limit past that is
//! an arrow at the axis's end with its value written beside it, not drawn to scale: a real
//! llama-server run of 6 replies that ended by 1,100 ms under a 10,000 ms limit once spent 92%
//! of the picture's width on empty time, its dots squeezed into the left edge.
//!
//! Below, from [`PANEL_FROM_REPLIES`] replies on, the rate over the run: one point a reply at
//! the time it ended on the run's clock (seconds since the first request was sent), at its
//! decode rate; failed replies in red, the streams of concurrent bursts in purple (their rate
//! is a stream's share of the serve, so they are drawn, not hidden, but told apart), the
//! replies at depth in brown (a long prompt's decode is slower, and not the rate line's); the
//! rate floor as a red line; each CPU throttle event (a rise of the sampled throttle count) as
//! an orange vertical line (events less than a pixel apart as one); the CPUs' mean clock and the
//! device's clock, where sampled, as faint lines on a MHz axis on the right. A serve that slows
//! as the box heats shows as a slope, and the throttle lines say when the box did.
//!
//! Every text is outside what it could cover: row names left of the plot, figures on their own
//! line above each row's band, units above the panel, ticks beside and below, each legend below
//! its plot with its entries on lines that wrap at the picture's width. A text longer than its
//! room is cut with an ellipsis (the title, a directory path, in its middle, keeping the run's
//! name). What a serve or an archive wrote (the title, a failure's mark) is made inert
//! (`crate::inert::xml`: controls and bidi marks shown as their escapes) and its markup escaped.
//!
//! The picture is written by `svg_writer`, not by plotters as before: plotters places a text
//! in a font it does not know the width of, with its own offsets (`dy`), and lays its legend
//! over the plot, so neither it nor a test could tell where a text ends; it drew the legend over
//! the last two rows' figures. Here every text is in one monospace font stack, placed by its
//! baseline with an explicit anchor, so its box is known from its characters; the layout keeps
//! the boxes apart, and `report::svg_check` reads them back from the SVG and checks it in the
//! tests (inside the picture, apart from each other, off the data, the legend off the plots).
//! The cost is the axes and the legend by hand, a few hundred lines.
//!
//! A long run stays readable and small: up to [`ALL_ROWS_UP_TO`] replies every reply has a
//! row; above that, rows for the first and last [`EDGE_ROWS`], and for the first
//! [`MARKED_ROWS`] others that failed or were over the first-token limit, with a row between
//! saying which replies were left out (each of them is still a point in the panel). The dots of
//! all rows together are held to [`DOTS_IN_ROWS`] (at most [`MAX_DOTS_PER_ROW`] a row), and the
//! panel's points to [`MAX_PANEL_POINTS`], so a thousand replies of 200 tokens draw into about
//! 0.4 MB and a soak of 5,000 with an hour of the box's samples into about 0.5 MB.
//!
//! # Layout
//! [`svg`] measures the replies (`drawn`: which get a row, their marks, the throttle events,
//! the colours), picks the axes, then writes top-down: the title, the rows and their legend
//! (`rows`), the rate panel and its legend (`panel`), with `svg_writer`'s shapes, texts,
//! ticks and legend flow.

mod drawn;
mod panel;
mod rows;
pub(crate) mod svg_writer;

use anyhow::Result;

use crate::archive::record::ReplyRecord;
use crate::judging::measure::measure;
use drawn::{row_mark, rows_to_draw, Drawn, Frame, Row};
pub use drawn::{
    TimelineContext, ALL_ROWS_UP_TO, DOTS_IN_ROWS, EDGE_ROWS, MARKED_ROWS, MAX_DOTS_PER_ROW,
    PANEL_FROM_REPLIES,
};
pub use panel::MAX_PANEL_POINTS;
use svg_writer::{fit_middle, text_width, Label, Svg};

/// The picture's width, px; its height is what the rows and the panel take.
const WIDTH: f64 = 960.0;
/// Around everything, px.
const MARGIN: f64 = 12.0;
const TITLE_SIZE: f64 = 14.0;

impl Frame {
    /// The frame that leaves room for the widest row name and value tick on the left, and the
    /// MHz ticks or half the widest time tick on the right.
    fn of(rows: &[Row], rows_axis: &rows::RowsAxis, panel: Option<&panel::PanelData>) -> Self {
        let widest_name = rows
            .iter()
            .map(|row| match row {
                Row::Reply(i) => text_width(&format!("reply {}", i + 1), rows::ROW_NAME_SIZE),
                Row::LeftOut { .. } => text_width("...", rows::ROW_NAME_SIZE),
            })
            .fold(0.0, f64::max);
        let (panel_left, panel_right) = panel.map_or((0.0, 0.0), |p| panel::label_room(&p.axes));
        let half_tick = rows_axis
            .ticks
            .widest(rows::TICK_SIZE)
            .max(panel.map_or(0.0, |p| p.axes.x.widest(rows::TICK_SIZE)))
            / 2.0;
        let right = if panel_right > 0.0 {
            panel_right + 6.0
        } else {
            half_tick
        };
        Frame {
            width: WIDTH,
            margin: MARGIN,
            plot_left: MARGIN + widest_name.max(panel_left) + 8.0,
            plot_right: WIDTH - MARGIN - right.max(half_tick) - 2.0,
        }
    }
}

/// The timeline of `replies` as SVG text: one row per reply (or, in a long run, the rows that
/// matter), top-down in the order they were made, each with its first-token time and rate
/// above it and a mark where it failed or was over the limit; the limit; a legend below; and
/// from [`PANEL_FROM_REPLIES`] replies on, the rate panel below with its own legend. The root
/// element has its width, height and viewBox, and there is no XML prolog: the same text is a
/// file and can be inlined into HTML.
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
    Ok(draw(&drawn, context, title))
}

/// The picture of `drawn`, as [`svg`] describes it.
fn draw(drawn: &[Drawn], context: &TimelineContext, title: &str) -> String {
    let limit_ms = context.first_token_limit_ms;
    // A reply at depth keeps its row in a long run, as a marked one does: there are few, and
    // the rows are where a long prompt's prefill shows.
    let marked: Vec<bool> = drawn
        .iter()
        .map(|d| d.mark.is_some() || d.reply.depth.is_some())
        .collect();
    let rows = rows_to_draw(&marked);
    let rows_axis = rows::RowsAxis::of(drawn, &rows, limit_ms);
    let panel = (drawn.len() >= PANEL_FROM_REPLIES).then(|| panel::panel_data(drawn, context));
    let frame = Frame::of(&rows, &rows_axis, panel.as_ref());
    let mut picture = Svg::new(WIDTH);
    let title = fit_middle(title, TITLE_SIZE, WIDTH - 2.0 * MARGIN);
    picture.text(
        MARGIN,
        MARGIN + svg_writer::ASCENT_EM * TITLE_SIZE,
        &Label::new(&title, TITLE_SIZE),
    );
    let mut y = MARGIN + TITLE_SIZE + 8.0;
    y = rows::draw(&mut picture, &frame, drawn, &rows, &rows_axis, y);
    if let Some(panel) = &panel {
        y = panel::draw(
            &mut picture,
            &frame,
            panel,
            context.rate_floor_tok_s,
            y + 14.0,
        );
    }
    picture.finish(y + MARGIN)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::drawn::*;
    use super::panel::panel_points;
    use super::svg_writer::{Colour, BLACK, BLUE, RED};
    use super::*;
    use crate::archive::record::{DepthSlot, DuringReplies};
    use crate::report::svg_check::elements;
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
        legible("three", &svg);
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
        let picture = svg(&[], &limit(600.0), "runs/b").unwrap();
        legible("nothing", &picture);
        let (circles, texts) = read(&picture);
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

    /// An hour of 250 ms samples from the run's start: the throttle count `throttles(k)` at
    /// the k-th, the CPU clock a saw of `cpu_period` MHz over 2,000, the device's at 900.
    fn clocked_hour(throttles: impl Fn(u64) -> u64, cpu_period: f64) -> DuringReplies {
        let mut samples: Vec<_> = (0..14_400)
            .map(|k| sample(k as f64 * 250.0, Some(throttles(k))))
            .collect();
        for s in &mut samples {
            s.cpu_mhz = Some(2000.0 + s.t_ms % cpu_period);
            s.device_mhz = Some(900.0);
        }
        during(Some(0), samples)
    }

    /// The circles filled with `colour`, as (cx, cy).
    fn circles_of(svg: &str, colour: Colour) -> Vec<(f64, f64)> {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| name == "circle" && a.get("fill") == Some(&colour.hex()))
            .map(|(_, a)| (a["cx"].parse().unwrap(), a["cy"].parse().unwrap()))
            .collect()
    }

    /// The polylines stroked with `colour`, as their first point's x.
    fn lines_of(svg: &str, colour: Colour) -> Vec<f64> {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| name == "polyline" && a.get("stroke") == Some(&colour.hex()))
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
    fn bars_of(svg: &str, colour: Colour) -> usize {
        elements(svg)
            .into_iter()
            .filter(|(name, a)| name == "rect" && a.get("fill") == Some(&colour.hex()))
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
        legible("depths", &svg);
        let all = text_of(&svg);
        // Named above their bars, in the depth's colour.
        for name in ["depth 1,024", "limit probe, 3,072 tokens"] {
            assert!(all.contains(name), "{name} in {all}");
        }
        let named: Vec<_> = elements(&svg)
            .into_iter()
            .filter(|(name, a)| name == "text" && a.get("fill") == Some(&DEPTH.hex()))
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
        legible("depths-panel", &svg);
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
        let many: Vec<(f64, f64, Colour)> = (0..20_000)
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
        legible("panel", &svg);
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
        legible("throttle", &picture);
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
        legible("throttle-unplaced", &picture);
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
        legible("clocks", &svg);
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

    /// The issue's budget: a thousand replies of 200 tokens, some failed, with the box's
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
        legible("thousand", &svg);
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
        let sampled = clocked_hour(|k| k, 700.0);
        let context = TimelineContext {
            first_token_limit_ms: 600.0,
            rate_floor_tok_s: 50.0,
            during: Some(&sampled),
        };
        let svg = svg(&replies, &context, "runs/worst").unwrap();
        legible("worst", &svg);
        assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
        assert_eq!(circles_of(&svg, POINT_FAILED).len(), 1000 + 1);
        let rows = EDGE_ROWS + MARKED_ROWS + 1 + EDGE_ROWS;
        assert!(text_of(&svg).contains("replies 31 to 990 not drawn here"));
        assert!(circles_of(&svg, BLACK).len() <= rows * dots_per_row(rows) + 1);
    }

    /// `svg` checked as a person reads it (report::svg_check), and read back. Where
    /// TIMELINE_PICTURES names a directory, the picture is also written there as `name.svg`,
    /// to be rendered (rsvg-convert) and looked at.
    fn legible(name: &str, svg: &str) -> svg_check::Picture {
        if let Some(dir) = std::env::var_os("TIMELINE_PICTURES") {
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.svg")), svg).unwrap();
        }
        svg_check::assert_legible(svg);
        svg_check::read(svg)
    }

    use crate::report::svg_check;

    /// The texts that read as a number (a tick's label), as numbers.
    fn tick_values(picture: &svg_check::Picture, between: (f64, f64)) -> Vec<f64> {
        picture
            .texts
            .iter()
            .filter(|t| t.area.y0 > between.0 && t.area.y1 < between.1)
            .filter_map(|t| t.content.replace(',', "").parse().ok())
            .collect()
    }

    fn text_at<'p>(picture: &'p svg_check::Picture, part: &str) -> &'p svg_check::Text {
        picture
            .texts
            .iter()
            .find(|t| t.content.contains(part))
            .unwrap_or_else(|| panic!("no {part:?} in {:?}", picture.texts))
    }

    #[test]
    fn one_reply_is_legible() {
        let svg = svg(&[timed(0, 100, 10, 11)], &limit(600.0), "runs/one").unwrap();
        let picture = legible("one", &svg);
        assert!(text_at(&picture, "100 ms, 100.0 tok/s").area.x0 > 0.0);
        assert!(
            svg.starts_with("<svg ") && !svg.contains("<?xml"),
            "{}",
            &svg[..80]
        );
        assert!(svg.contains(r#"width="960""#) && svg.contains(r#"viewBox="0 0 960 "#));
    }

    /// issue 39, item 1: six replies of a real llama-server run ended by 1,100 ms under a
    /// first-token limit of 10,000 ms, which stretched the axis to 14,000 ms and squeezed the
    /// replies into its left 8%.
    #[test]
    fn a_limit_far_past_the_replies_is_written_at_the_axis_end_and_the_axis_spans_the_replies() {
        let replies: Vec<ReplyRecord> = (0..6)
            .map(|i| timed(i * 1500, 100 + i * 40, 50, 21 - i))
            .collect();
        let svg = svg(&replies, &limit(10_000.0), "runs/llama-6").unwrap();
        let picture = legible("six-limit-10000", &svg);
        let plot = picture.plots[0];
        let axis_title = text_at(&picture, "ms since the request was sent").area;
        let ticks = tick_values(&picture, (plot.y1, axis_title.y0));
        let last = ticks.iter().copied().fold(0.0, f64::max);
        assert!(
            ticks.len() >= 4 && (1100.0..2000.0).contains(&last),
            "{ticks:?}"
        );
        let written = text_at(&picture, "first-token limit 10,000 ms, off this axis →");
        assert!(
            written.area.x1 > plot.x1 - 30.0 && written.area.y1 < plot.y0,
            "{written:?}"
        );
        assert!(!picture.texts.iter().any(|t| t.content == "limit 10,000 ms"));
        // The replies use the width: the latest dot in the right half of the plot.
        let latest = picture
            .data
            .iter()
            .filter_map(|m| match m {
                svg_check::Mark::Area(a) => Some(a.x1),
                svg_check::Mark::Segment(..) => None,
            })
            .fold(0.0, f64::max);
        assert!(
            latest > plot.x0 + 0.8 * (plot.x1 - plot.x0),
            "{latest} in {plot:?}"
        );
        // Every row's figures, the last two included (the legend once covered them).
        for figures in ["100 ms, 20.0 tok/s", "300 ms, 20.0 tok/s"] {
            text_at(&picture, figures);
        }

        // A limit near the replies is drawn to scale, labelled with its value.
        let near = super::svg(&replies, &limit(1200.0), "runs/llama-6").unwrap();
        let picture = legible("six-limit-1200", &near);
        text_at(&picture, "limit 1,200 ms");
        text_at(&picture, "red line: the first-token limit, 1,200 ms");
        assert!(!near.contains("off this axis"));
        assert!(!picture.rules.is_empty());
    }

    #[test]
    fn sixty_replies_each_with_its_row_are_legible() {
        let mut replies: Vec<ReplyRecord> = (0..60)
            .map(|i| timed(i * 1000, 100 + (i % 7) * 120, 10, 30))
            .collect();
        replies[13].expect = Some("Paris".into());
        let svg = svg(&replies, &limit(600.0), "runs/sixty").unwrap();
        let picture = legible("sixty", &svg);
        for k in [1, 14, 60] {
            text_at(&picture, &format!("reply {k}"));
        }
        text_at(&picture, "FAIL: wrong answer");
        text_at(&picture, "over the first-token limit");
    }

    /// A soak: 5,000 replies, some failed, one in five a stream of a burst, the box sampled
    /// for its hour with both clocks and throttling now and then.
    #[test]
    fn a_soak_of_five_thousand_replies_with_its_panel_clocks_and_throttles_is_legible() {
        let mut replies: Vec<ReplyRecord> = (0..5000).map(|i| timed(i * 720, 150, 5, 40)).collect();
        for i in (0..5000).step_by(97) {
            replies[i].expect = Some("Paris".into());
        }
        for i in (3..5000).step_by(5) {
            replies[i].burst = Some(crate::archive::record::BurstSlot {
                round: i / 5,
                stream: 1,
            });
        }
        let sampled = clocked_hour(|k| k / 900, 1400.0);
        let context = TimelineContext {
            first_token_limit_ms: 600.0,
            rate_floor_tok_s: 150.0,
            during: Some(&sampled),
        };
        let svg = svg(&replies, &context, "runs/soak").unwrap();
        assert!(svg.len() < 1_000_000, "{} bytes", svg.len());
        let picture = legible("soak-5000", &svg);
        assert_eq!(picture.plots.len(), 2);
        for part in [
            "MHz",
            "rate floor 150.0 tok/s",
            "orange line",
            "purple point",
            "replies 11 to ",
        ] {
            text_at(&picture, part);
        }
        assert_eq!(lines_of(&svg, THROTTLE).len(), 15 + 1);
    }

    /// Three bursts of four concurrent streams: their rows overlap in time, their points are
    /// purple.
    #[test]
    fn concurrent_bursts_are_legible() {
        let replies: Vec<ReplyRecord> = (0..12u64)
            .map(|i| {
                let mut r = timed((i / 4) * 2000 + i % 4, 200 + (i % 4) * 50, 20, 30);
                r.burst = Some(crate::archive::record::BurstSlot {
                    round: (i / 4) as usize + 1,
                    stream: (i % 4) as usize + 1,
                });
                r
            })
            .collect();
        let svg = svg(&replies, &limit(600.0), "runs/bursts").unwrap();
        legible("bursts", &svg);
        assert_eq!(circles_of(&svg, POINT_BURST).len(), 12 + 1);
    }

    #[test]
    fn a_long_title_is_cut_in_its_middle_and_keeps_the_run_name() {
        let title = format!(
            "/home/ci/{}runs/2026-12-04T11-23-01Z",
            "a-long-directory/".repeat(30)
        );
        let svg = svg(&ten_replies(), &limit(600.0), &title).unwrap();
        let picture = legible("long-title", &svg);
        let shown = &picture.texts[0].content;
        assert!(
            shown.starts_with("/home/ci/") && shown.ends_with("/runs/2026-12-04T11-23-01Z"),
            "{shown}"
        );
        assert!(shown.contains('…'), "{shown}");
    }

    /// The drawn replies of `replies`, each marked with `mark`.
    fn marked<'r>(replies: &'r [ReplyRecord], mark: &str) -> Vec<Drawn<'r>> {
        replies
            .iter()
            .map(|r| {
                let m = measure(r);
                Drawn {
                    reply: r,
                    first_token_ms: m.first_token_ms,
                    rate_tok_s: m.rate_tok_s,
                    failed: true,
                    mark: Some(mark.to_string()),
                }
            })
            .collect()
    }

    #[test]
    fn a_long_failure_mark_is_cut_with_an_ellipsis() {
        let mut replies = ten_replies();
        replies.push(at_depth(11_000, 1_048_576, "no", false));
        let long = format!("FAIL: {}", "the serve said something very long ".repeat(12));
        let svg = draw(&marked(&replies, &long), &limit(600.0), "runs/marks");
        let picture = legible("long-marks", &svg);
        let row = text_at(&picture, "100 ms, 100.0 tok/s; FAIL: the serve said");
        assert!(row.content.ends_with('…'), "{}", row.content);
        text_at(&picture, "depth 1,048,576");
    }

    /// What a serve or an archive can put into the picture is text, never markup, and no
    /// control reaches it: the title (a path), and a mark (reply_problem's words today).
    #[test]
    fn markup_and_controls_from_a_serve_or_an_archive_stay_text() {
        let hostile = "<script>alert(1)</script> & \u{202e}evil\u{1b}[2J";
        let mut r = timed(0, 100, 10, 11);
        r.error = Some(hostile.into());
        r.content = hostile.into();
        let replies = [r];
        let title = format!("runs/{hostile}");
        let svg = draw(
            &marked(&replies, &format!("FAIL: {hostile}")),
            &limit(600.0),
            &title,
        );
        let picture = legible("hostile", &svg);
        assert!(!svg.contains("<script") && !svg.contains('\u{202e}') && !svg.contains('\u{1b}'));
        let shown = "<script>alert(1)</script> & \\u{202e}evil\\u{1b}[2J";
        assert_eq!(picture.texts[0].content, format!("runs/{shown}"));
        text_at(&picture, &format!("FAIL: {shown}"));
        // And through svg(), the reply's own error and content are not drawn at all.
        let plain = super::svg(&replies, &limit(600.0), "runs/h").unwrap();
        legible("hostile-reply", &plain);
        assert!(!plain.contains("script") && !plain.contains('\u{202e}'));
    }

    /// Every size of run the rows have a rule for, under limits from none to far past the
    /// replies, with replies that failed, that have no token, and slow ones: each legible.
    #[test]
    fn runs_of_every_size_under_every_limit_are_legible() {
        for n in [1u64, 2, 7, 8, 9, 61, 200] {
            let mut replies: Vec<ReplyRecord> = (0..n)
                .map(|i| timed(i * 900, 40 + (i * 37) % 900, 1 + i % 9, 2 + (i * 13) % 60))
                .collect();
            replies[0].chunks.clear();
            if n > 2 {
                replies[1].expect = Some("Paris".into());
            }
            for limit_ms in [0.0, 50.0, 600.0, 1_000.0, 10_000.0, 1e9] {
                let context = TimelineContext {
                    first_token_limit_ms: limit_ms,
                    rate_floor_tok_s: 120.0,
                    during: None,
                };
                let picture = svg(&replies, &context, "runs/sizes").unwrap();
                let faults = svg_check::faults(&picture);
                assert!(
                    faults.is_empty(),
                    "{n} replies, limit {limit_ms} ms: {faults:#?}"
                );
            }
        }
    }
}
