//! The timeline's own SVG writer: a few shapes and texts, each text's box known from its
//! characters, so the layout can keep texts apart and inside the picture (issue 39, item 1).
//!
//! Every text is in one monospace font stack whose fonts advance 0.60 em a character; the
//! layout counts [`ADVANCE_EM`] (a little more) a column, so a text's width is an upper bound
//! to within rounding. Texts are placed by their baseline with an explicit `text-anchor` and
//! no `dy` or `transform`, so their boxes can be read back from the attributes alone
//! (`report::svg_check` does, in the tests).

use std::fmt::Write as _;

use crate::judging::verdict::words::grouped;

/// A colour, written as `#RRGGBB` (upper case, as the tests read it back).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Colour(pub u8, pub u8, pub u8);

impl Colour {
    pub(crate) fn hex(self) -> String {
        format!("#{:02X}{:02X}{:02X}", self.0, self.1, self.2)
    }
}

pub(crate) const BLACK: Colour = Colour(0, 0, 0);
pub(crate) const RED: Colour = Colour(255, 0, 0);
pub(crate) const BLUE: Colour = Colour(0, 0, 255);
/// Axes, grid and secondary texts.
pub(crate) const GREY: Colour = Colour(96, 96, 96);

/// Fonts whose advance is 0.60 em a character, the generic monospace last.
pub(crate) const FONT_FAMILY: &str =
    "DejaVu Sans Mono, Liberation Mono, Menlo, Consolas, monospace";
/// A column's width in em as the layout counts it: the fonts' 0.60 and a margin for rounding.
pub(crate) const ADVANCE_EM: f64 = 0.62;
/// How far a text reaches above its baseline, and below it, in em.
pub(crate) const ASCENT_EM: f64 = 0.8;
pub(crate) const DESCENT_EM: f64 = 0.25;

/// Whether `c` takes two columns in a monospace font (East Asian wide and full-width forms,
/// and the emoji blocks): a serve's reply can put them into a failure's text.
fn is_wide(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6 | 0x1F300..=0x1FAFF | 0x20000..=0x3FFFD)
}

/// The columns `s` takes in a monospace font.
pub(crate) fn columns(s: &str) -> usize {
    s.chars().map(|c| if is_wide(c) { 2 } else { 1 }).sum()
}

/// The width of `s` at `size` px, as the layout counts it.
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    columns(s) as f64 * ADVANCE_EM * size
}

/// `s` on one line with what acts (controls, bidi marks) shown as its escape: what the
/// picture writes and measures.
fn visible(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\t' | '\r') {
                ' '
            } else {
                c
            }
        })
        .collect();
    crate::inert::xml(&one_line).into_owned()
}

/// The longest head of `chars` within `columns` columns.
fn head_within(chars: &[char], columns: usize) -> usize {
    let mut used = 0;
    chars
        .iter()
        .take_while(|&&c| {
            used += if is_wide(c) { 2 } else { 1 };
            used <= columns
        })
        .count()
}

/// `s` made visible and cut to `width` px at `size`, ending with an ellipsis where cut.
pub(crate) fn fit(s: &str, size: f64, width: f64) -> String {
    let s = visible(s);
    let room = (width / (ADVANCE_EM * size)).floor().max(0.0) as usize;
    if columns(&s) <= room {
        return s;
    }
    let chars: Vec<char> = s.chars().collect();
    let keep = head_within(&chars, room.saturating_sub(1));
    chars[..keep].iter().chain(['…'].iter()).collect()
}

/// `s` made visible and cut to `width` px at `size` in its middle: a directory path keeps its
/// start and its last names, which tell runs apart.
pub(crate) fn fit_middle(s: &str, size: f64, width: f64) -> String {
    let s = visible(s);
    let room = (width / (ADVANCE_EM * size)).floor().max(0.0) as usize;
    if columns(&s) <= room {
        return s;
    }
    let chars: Vec<char> = s.chars().collect();
    let tail_room = room.saturating_sub(1) / 2;
    let mut tail: Vec<char> = chars.iter().rev().copied().collect();
    let tail_len = head_within(&tail, tail_room);
    tail.truncate(tail_len);
    tail.reverse();
    let head_len = head_within(&chars, room.saturating_sub(1 + columns_of(&tail)));
    chars[..head_len]
        .iter()
        .chain(['…'].iter())
        .chain(tail.iter())
        .collect()
}

fn columns_of(chars: &[char]) -> usize {
    chars.iter().map(|&c| if is_wide(c) { 2 } else { 1 }).sum()
}

/// Markup escaped for XML text and attribute values.
fn escape_markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Where a text's x is: its start, middle or end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// A text to write: its content, size, colour and anchor; `class` tells a legend's texts.
#[derive(Debug, Clone)]
pub(crate) struct Label<'a> {
    pub text: &'a str,
    pub size: f64,
    pub colour: Colour,
    pub anchor: Anchor,
    pub class: Option<&'static str>,
}

impl<'a> Label<'a> {
    pub(crate) fn new(text: &'a str, size: f64) -> Self {
        Label {
            text,
            size,
            colour: BLACK,
            anchor: Anchor::Start,
            class: None,
        }
    }
    pub(crate) fn colour(self, colour: Colour) -> Self {
        Label { colour, ..self }
    }
    pub(crate) fn anchor(self, anchor: Anchor) -> Self {
        Label { anchor, ..self }
    }
    pub(crate) fn class(self, class: &'static str) -> Self {
        Label {
            class: Some(class),
            ..self
        }
    }
}

/// A coordinate as written: tenths of a pixel are all a viewer resolves, and every byte counts
/// in a picture of 11,000 marks.
fn px(v: f64) -> String {
    let tenths = (v * 10.0).round() / 10.0;
    if tenths == tenths.trunc() {
        format!("{}", tenths as i64)
    } else {
        format!("{tenths:.1}")
    }
}

/// The SVG being written: the body grows top-down, the root (with the height the layout
/// reached) is written around it at the end.
pub(crate) struct Svg {
    width: f64,
    body: String,
}

impl Svg {
    pub(crate) fn new(width: f64) -> Self {
        Svg {
            width,
            body: String::new(),
        }
    }

    /// The document, `height` px tall: explicit width, height and viewBox, and no XML prolog,
    /// so it stands alone and can be inlined into HTML as it is.
    pub(crate) fn finish(self, height: f64) -> String {
        let (w, h) = (px(self.width), px(height));
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"{FONT_FAMILY}\">\n\
             <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#FFFFFF\"/>\n{}</svg>\n",
            self.body
        )
    }

    fn class_attr(class: Option<&str>) -> String {
        class.map_or(String::new(), |c| format!(" class=\"{c}\""))
    }

    /// A text with its baseline at `y`; the caller has fitted it (see [`fit`]); what acts is
    /// made visible and the markup escaped here, whatever the caller did.
    pub(crate) fn text(&mut self, x: f64, y: f64, label: &Label) {
        let _ = writeln!(
            self.body,
            "<text{} x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\">{}</text>",
            Self::class_attr(label.class),
            px(x),
            px(y),
            label.size,
            label.anchor.name(),
            label.colour.hex(),
            escape_markup(&visible(label.text))
        );
    }

    pub(crate) fn circle(&mut self, (cx, cy): (f64, f64), r: f64, fill: Colour, class: &str) {
        let _ = writeln!(
            self.body,
            "<circle class=\"{class}\" cx=\"{}\" cy=\"{}\" r=\"{r}\" fill=\"{}\"/>",
            px(cx),
            px(cy),
            fill.hex()
        );
    }

    /// A rectangle from (x0, y0) to (x1, y1), filled at `opacity`.
    pub(crate) fn rect(
        &mut self,
        (x0, y0): (f64, f64),
        (x1, y1): (f64, f64),
        fill: (Colour, f64),
        class: &str,
    ) {
        let _ = writeln!(
            self.body,
            "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"{}\"/>",
            px(x0.min(x1)),
            px(y0.min(y1)),
            px((x1 - x0).abs()),
            px((y1 - y0).abs()),
            fill.0.hex(),
            fill.1
        );
    }

    /// An unfilled rectangle's outline: a plot's frame.
    pub(crate) fn frame(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), class: &str) {
        let _ = writeln!(
            self.body,
            "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1\"/>",
            px(x0),
            px(y0),
            px(x1 - x0),
            px(y1 - y0),
            GREY.hex()
        );
    }

    /// A line through `points`, stroked `width` px wide at `opacity`.
    pub(crate) fn polyline(
        &mut self,
        points: &[(f64, f64)],
        stroke: (Colour, f64, f64),
        class: &str,
    ) {
        let mut list = String::with_capacity(points.len() * 12);
        for (k, &(x, y)) in points.iter().enumerate() {
            if k > 0 {
                list.push(' ');
            }
            let _ = write!(list, "{},{}", px(x), px(y));
        }
        let (colour, width, opacity) = stroke;
        let _ = writeln!(
            self.body,
            "<polyline class=\"{class}\" points=\"{list}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{width}\" stroke-opacity=\"{opacity}\"/>",
            colour.hex()
        );
    }

    /// Many short vertical strokes as one path: from each (x, y0) down to y1.
    pub(crate) fn verticals(
        &mut self,
        strokes: &[(f64, f64, f64)],
        stroke: (Colour, f64, f64),
        class: &str,
    ) {
        if strokes.is_empty() {
            return;
        }
        let mut d = String::with_capacity(strokes.len() * 20);
        for &(x, y0, y1) in strokes {
            let _ = write!(d, "M{} {}V{}", px(x), px(y0), px(y1));
        }
        let (colour, width, opacity) = stroke;
        let _ = writeln!(
            self.body,
            "<path class=\"{class}\" d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{width}\" stroke-opacity=\"{opacity}\"/>",
            colour.hex()
        );
    }

    /// A filled triangle: the arrow that points at a limit beyond the axis.
    pub(crate) fn triangle(&mut self, corners: [(f64, f64); 3], fill: Colour, class: &str) {
        let points: Vec<String> = corners
            .iter()
            .map(|&(x, y)| format!("{},{}", px(x), px(y)))
            .collect();
        let _ = writeln!(
            self.body,
            "<polygon class=\"{class}\" points=\"{}\" fill=\"{}\"/>",
            points.join(" "),
            fill.hex()
        );
    }
}

/// An axis's ticks: from `lo` to `hi` (both ticks) every `step`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ticks {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
}

/// The 1-2-5 step that cuts `span` into at most `most` steps.
pub(crate) fn nice_step(span: f64, most: usize) -> f64 {
    let raw = (span / most.max(1) as f64).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

impl Ticks {
    /// Ticks that cover `lo..hi` in at most `most` nice steps.
    pub(crate) fn covering(lo: f64, hi: f64, most: usize) -> Self {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        let step = nice_step(hi - lo, most);
        Ticks {
            lo: (lo / step + 1e-9).floor() * step,
            hi: (hi / step - 1e-9).ceil() * step,
            step,
        }
    }

    pub(crate) fn values(&self) -> Vec<f64> {
        let n = ((self.hi - self.lo) / self.step).round() as usize;
        (0..=n).map(|k| self.lo + k as f64 * self.step).collect()
    }

    /// The text of the tick at `v`: thousands grouped, as many decimals as the step needs.
    pub(crate) fn label(&self, v: f64) -> String {
        let sign = if v < -self.step / 2.0 { "-" } else { "" };
        if self.step >= 1.0 {
            return format!("{sign}{}", grouped(v.abs().round() as u64));
        }
        let decimals = (-self.step.log10()).ceil().max(0.0) as usize;
        let whole = v.abs().trunc();
        let fraction = format!("{:.*}", decimals, v.abs() - whole);
        let (carry, digits) = match fraction.split_once('.') {
            Some((c, d)) => (c.parse::<u64>().unwrap_or(0), d.to_string()),
            None => (0, String::new()),
        };
        format!("{sign}{}.{digits}", grouped(whole as u64 + carry))
    }

    /// The widest tick label's width at `size`.
    pub(crate) fn widest(&self, size: f64) -> f64 {
        self.values()
            .iter()
            .map(|&v| text_width(&self.label(v), size))
            .fold(0.0, f64::max)
    }
}

/// A linear map from an axis's ticks onto pixels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub ticks: Ticks,
    pub from_px: f64,
    pub to_px: f64,
}

impl Scale {
    pub(crate) fn at(&self, v: f64) -> f64 {
        let t = (v - self.ticks.lo) / (self.ticks.hi - self.ticks.lo);
        self.from_px + t.clamp(0.0, 1.0) * (self.to_px - self.from_px)
    }
}

/// A legend entry's sample of what it names.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sample {
    /// A bar of this colour and opacity.
    Bar(Colour, f64),
    /// A dot of this colour and radius.
    Dot(Colour, f64),
    /// A line of this colour, width and opacity.
    Line(Colour, f64, f64),
    /// An arrow pointing right.
    Arrow(Colour),
    /// No sample: a note.
    Nothing,
}

/// One entry of a legend: a sample and what it is.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub sample: Sample,
    pub text: String,
    pub colour: Colour,
}

const LEGEND_SIZE: f64 = 11.0;
const LEGEND_LINE_PX: f64 = 17.0;
const SAMPLE_PX: f64 = 16.0;
const ENTRY_GAP_PX: f64 = 22.0;

/// The legend written from `top`, between `left` and `right`: entries side by side on lines
/// that wrap at `right`, an entry too long for a line cut with an ellipsis. Returns the y
/// below it.
pub(crate) fn legend(svg: &mut Svg, entries: &[Entry], left: f64, right: f64, top: f64) -> f64 {
    if entries.is_empty() {
        return top;
    }
    let mut x = left;
    let mut line_top = top;
    for entry in entries {
        let sample_px = match entry.sample {
            Sample::Nothing => 0.0,
            _ => SAMPLE_PX + 5.0,
        };
        let text = fit(&entry.text, LEGEND_SIZE, right - left - sample_px);
        let width = sample_px + text_width(&text, LEGEND_SIZE);
        if x > left && x + width > right {
            x = left;
            line_top += LEGEND_LINE_PX;
        }
        let baseline = line_top + 2.0 + ASCENT_EM * LEGEND_SIZE;
        // The middle of the text's box, where the sample sits.
        let middle = baseline - (ASCENT_EM - DESCENT_EM) * LEGEND_SIZE / 2.0;
        match entry.sample {
            Sample::Bar(c, opacity) => svg.rect(
                (x, middle - 4.0),
                (x + SAMPLE_PX, middle + 4.0),
                (c, opacity),
                "legend",
            ),
            Sample::Dot(c, r) => svg.circle((x + SAMPLE_PX / 2.0, middle), r, c, "legend"),
            Sample::Line(c, w, opacity) => svg.polyline(
                &[(x, middle), (x + SAMPLE_PX, middle)],
                (c, w, opacity),
                "legend",
            ),
            Sample::Arrow(c) => svg.triangle(
                [
                    (x + 4.0, middle - 5.0),
                    (x + 14.0, middle),
                    (x + 4.0, middle + 5.0),
                ],
                c,
                "legend",
            ),
            Sample::Nothing => {}
        }
        let label = Label::new(&text, LEGEND_SIZE)
            .colour(entry.colour)
            .class("legend");
        svg.text(x + sample_px, baseline, &label);
        x += width + ENTRY_GAP_PX;
    }
    line_top + LEGEND_LINE_PX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_five_and_cover_the_range() {
        let t = Ticks::covering(0.0, 1100.0, 8);
        assert_eq!((t.lo, t.hi, t.step), (0.0, 1200.0, 200.0));
        assert_eq!(t.label(1200.0), "1,200");
        let t = Ticks::covering(0.0, 14_000.0, 8);
        assert_eq!((t.step, t.label(14_000.0)), (2000.0, "14,000".to_string()));
        let t = Ticks::covering(-0.2, 9.3, 8);
        assert_eq!((t.lo, t.hi, t.step), (-2.0, 10.0, 2.0));
        let t = Ticks::covering(0.0, 0.9, 8);
        assert_eq!(t.step, 0.2);
        assert_eq!(t.label(0.6000000001), "0.6");
        assert_eq!(t.label(-0.4), "-0.4");
        assert!(Ticks::covering(5.0, 5.0, 8).values().len() >= 2);
    }

    #[test]
    fn a_text_too_long_is_cut_with_an_ellipsis_and_made_visible() {
        assert_eq!(fit("short", 10.0, 1000.0), "short");
        let cut = fit(&"x".repeat(100), 10.0, 62.0);
        assert_eq!(cut, format!("{}…", "x".repeat(9)));
        assert!(text_width(&cut, 10.0) <= 62.0 + 1e-9);
        assert_eq!(fit("a\u{202e}b\nc", 10.0, 1000.0), "a\\u{202e}b c");
        let path = format!("/home/ci/{}/runs/2026-12-04T11-23-01Z", "deep/".repeat(40));
        let title = fit_middle(&path, 14.0, 300.0);
        assert!(text_width(&title, 14.0) <= 300.0, "{title}");
        assert!(
            title.starts_with("/home/ci/") && title.ends_with("11-23-01Z"),
            "{title}"
        );
        // Wide characters count two columns.
        let wide = fit(&"漢".repeat(50), 10.0, 62.0);
        assert!(text_width(&wide, 10.0) <= 62.0 + 1e-9, "{wide}");
    }

    #[test]
    fn markup_in_a_text_is_escaped() {
        let mut svg = Svg::new(100.0);
        svg.text(0.0, 10.0, &Label::new("<script>&\"", 10.0));
        let out = svg.finish(20.0);
        assert!(out.contains("&lt;script&gt;&amp;&quot;"), "{out}");
        assert!(!out.contains("<script"), "{out}");
    }
}
