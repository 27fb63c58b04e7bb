//! For the tests: whether a picture can be read as a person reads it (issue 39, item 1). An SVG
//! is read back as XML into text boxes and marks, and checked: every text inside the picture,
//! no two texts over each other, no text over a data mark or a reference line, the legend
//! outside the plots, each data mark inside a plot.
//!
//! A text's box is computed from its attributes alone: `x` and `text-anchor` place its width,
//! `columns × 0.62 × font-size` (the writer's monospace fonts advance 0.60 em); `y` is its
//! baseline, the box reaching 0.8 em above and 0.25 em below. A `dy` or `transform` would move
//! a text where this reading does not follow, so either is itself a fault. Marks are told
//! apart by their `class`: `data` (dots, bars, points, series), `rule` (the limit, the floor),
//! `legend` (a legend's samples and texts), `plot` (a plot's frame).

use crate::report::timeline::svg_writer::{columns, ADVANCE_EM, ASCENT_EM, DESCENT_EM};
use quick_xml::events::{BytesStart, Event};
use std::collections::HashMap;

/// Boxes that only touch do not overlap: coordinates are written to a tenth of a pixel.
const EPS: f64 = 0.05;
/// The largest dot's radius, px.
const DOT_RADIUS: f64 = 3.5;

/// An axis-aligned box, y down.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Area {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

impl Area {
    fn overlaps(&self, o: &Area) -> bool {
        self.x0 < o.x1 - EPS && o.x0 < self.x1 - EPS && self.y0 < o.y1 - EPS && o.y0 < self.y1 - EPS
    }
    fn within(&self, o: &Area) -> bool {
        self.x0 >= o.x0 - EPS
            && self.x1 <= o.x1 + EPS
            && self.y0 >= o.y0 - EPS
            && self.y1 <= o.y1 + EPS
    }
    fn holds(&self, (x, y): (f64, f64)) -> bool {
        x >= self.x0 - 0.5 && x <= self.x1 + 0.5 && y >= self.y0 - 0.5 && y <= self.y1 + 0.5
    }
}

/// A text as written: its content (entities resolved), its box, and whether it is a legend's.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    pub content: String,
    pub area: Area,
    pub legend: bool,
}

/// A drawn mark: a filled area (dot, bar, arrow) or one segment of a line.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mark {
    Area(Area),
    Segment((f64, f64), (f64, f64)),
}

impl Mark {
    /// Whether the mark reaches into the inside of `r` (Liang-Barsky clipping for a segment).
    fn hits(&self, r: &Area) -> bool {
        let a = match self {
            Mark::Area(area) => return area.overlaps(r),
            Mark::Segment(a, b) => (*a, *b),
        };
        let r = Area {
            x0: r.x0 + EPS,
            y0: r.y0 + EPS,
            x1: r.x1 - EPS,
            y1: r.y1 - EPS,
        };
        let ((ax, ay), (bx, by)) = a;
        let (dx, dy) = (bx - ax, by - ay);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (p, q) in [
            (-dx, ax - r.x0),
            (dx, r.x1 - ax),
            (-dy, ay - r.y0),
            (dy, r.y1 - ay),
        ] {
            if p == 0.0 {
                if q < 0.0 {
                    return false;
                }
            } else if p < 0.0 {
                t0 = t0.max(q / p);
            } else {
                t1 = t1.min(q / p);
            }
            if t0 > t1 {
                return false;
            }
        }
        true
    }
    /// The points that must lie in a plot: a segment's ends; an area's corners, moved in by
    /// up to a dot's radius (a point at the axis's end sits on the frame).
    fn anchors(&self) -> Vec<(f64, f64)> {
        match *self {
            Mark::Area(a) => {
                let dx = ((a.x1 - a.x0) / 2.0).min(DOT_RADIUS);
                let dy = ((a.y1 - a.y0) / 2.0).min(DOT_RADIUS);
                vec![(a.x0 + dx, a.y0 + dy), (a.x1 - dx, a.y1 - dy)]
            }
            Mark::Segment(a, b) => vec![a, b],
        }
    }
}

/// A picture as read back: its viewBox, texts, marks by class and plot frames.
#[derive(Debug, Default)]
pub(crate) struct Picture {
    pub view: Option<Area>,
    pub texts: Vec<Text>,
    pub data: Vec<Mark>,
    pub rules: Vec<Mark>,
    pub legend_marks: Vec<Mark>,
    pub plots: Vec<Area>,
    /// Attributes this reading cannot follow (`dy`, `transform`), as `element attribute`.
    pub unfollowed: Vec<String>,
}

/// An element's attributes, unescaped (as written where a value is not well escaped).
pub(crate) fn attributes(e: &BytesStart) -> HashMap<String, String> {
    e.attributes()
        .flatten()
        .map(|a| {
            let key = String::from_utf8_lossy(a.key.as_ref()).to_string();
            let value = a
                .unescape_value()
                .map(|v| v.to_string())
                .unwrap_or_else(|_| String::from_utf8_lossy(&a.value).to_string());
            (key, value)
        })
        .collect()
}

fn number(a: &std::collections::HashMap<String, String>, key: &str) -> f64 {
    a.get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {key} in {a:?}"))
}

/// `x,y x,y ...` as points.
fn point_list(s: &str) -> Vec<(f64, f64)> {
    s.split_whitespace()
        .filter_map(|p| {
            let (x, y) = p.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// A path of absolute M, L, H and V commands (all the writer uses) as segments.
fn path_segments(d: &str) -> Vec<Mark> {
    let mut spaced = String::new();
    for c in d.chars() {
        if c.is_ascii_alphabetic() {
            spaced.push(' ');
            spaced.push(c);
            spaced.push(' ');
        } else {
            spaced.push(if c == ',' { ' ' } else { c });
        }
    }
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut at = (0.0, 0.0);
    let mut segments = Vec::new();
    let mut k = 0;
    let num = |k: usize| -> f64 { tokens[k].parse().unwrap_or_else(|_| panic!("path {d}")) };
    while k < tokens.len() {
        let next = match tokens[k] {
            "M" => {
                at = (num(k + 1), num(k + 2));
                k += 3;
                continue;
            }
            "L" => ((num(k + 1), num(k + 2)), 3),
            "H" => ((num(k + 1), at.1), 2),
            "V" => ((at.0, num(k + 1)), 2),
            other => panic!("path command {other} in {d}: not read"),
        };
        segments.push(Mark::Segment(at, next.0));
        at = next.0;
        k += next.1;
    }
    segments
}

/// The marks an element draws.
fn marks_of(name: &str, a: &std::collections::HashMap<String, String>) -> Vec<Mark> {
    match name {
        "circle" => {
            let (x, y, r) = (number(a, "cx"), number(a, "cy"), number(a, "r"));
            vec![Mark::Area(Area {
                x0: x - r,
                y0: y - r,
                x1: x + r,
                y1: y + r,
            })]
        }
        "rect" => {
            let (x, y) = (number(a, "x"), number(a, "y"));
            let (w, h) = (number(a, "width"), number(a, "height"));
            vec![Mark::Area(Area {
                x0: x,
                y0: y,
                x1: x + w,
                y1: y + h,
            })]
        }
        "polygon" => {
            let p = point_list(&a["points"]);
            let fold = |f: fn(f64, f64) -> f64, pick: fn(&(f64, f64)) -> f64, start: f64| {
                p.iter().map(pick).fold(start, f)
            };
            vec![Mark::Area(Area {
                x0: fold(f64::min, |q| q.0, f64::MAX),
                y0: fold(f64::min, |q| q.1, f64::MAX),
                x1: fold(f64::max, |q| q.0, f64::MIN),
                y1: fold(f64::max, |q| q.1, f64::MIN),
            })]
        }
        "polyline" => {
            let p = point_list(&a["points"]);
            match p.len() {
                0 => Vec::new(),
                1 => vec![Mark::Segment(p[0], p[0])],
                _ => p.windows(2).map(|w| Mark::Segment(w[0], w[1])).collect(),
            }
        }
        "path" => path_segments(&a["d"]),
        _ => Vec::new(),
    }
}

/// A text's box from its attributes and content.
fn text_area(a: &std::collections::HashMap<String, String>, content: &str) -> Area {
    let (x, y, size) = (number(a, "x"), number(a, "y"), number(a, "font-size"));
    let width = columns(content) as f64 * ADVANCE_EM * size;
    let x0 = match a.get("text-anchor").map(String::as_str) {
        Some("middle") => x - width / 2.0,
        Some("end") => x - width,
        _ => x,
    };
    Area {
        x0,
        y0: y - ASCENT_EM * size,
        x1: x0 + width,
        y1: y + DESCENT_EM * size,
    }
}

/// An entity's character: the five XML predefines and character references.
fn entity(name: &str) -> String {
    match name {
        "lt" => "<".into(),
        "gt" => ">".into(),
        "amp" => "&".into(),
        "quot" => "\"".into(),
        "apos" => "'".into(),
        _ => {
            let code = name
                .strip_prefix("#x")
                .map(|h| u32::from_str_radix(h, 16))
                .or_else(|| name.strip_prefix('#').map(|d| d.parse::<u32>()))
                .and_then(Result::ok)
                .and_then(char::from_u32)
                .unwrap_or_else(|| panic!("an entity XML does not define: &{name};"));
            code.to_string()
        }
    }
}

/// `svg` read back: well-formed XML or a panic.
pub(crate) fn read(svg: &str) -> Picture {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut picture = Picture::default();
    let mut open_text: Option<(std::collections::HashMap<String, String>, String)> = None;
    loop {
        match reader.read_event().expect("the SVG is well-formed XML") {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).to_string();
                let a = attributes(&e);
                for unfollowed in ["dy", "transform"] {
                    if a.contains_key(unfollowed) {
                        picture.unfollowed.push(format!("{name} {unfollowed}"));
                    }
                }
                if name == "svg" {
                    let v: Vec<f64> = a
                        .get("viewBox")
                        .map(|v| {
                            v.split_whitespace()
                                .filter_map(|n| n.parse().ok())
                                .collect()
                        })
                        .unwrap_or_default();
                    if let [x, y, w, h] = v[..] {
                        picture.view = Some(Area {
                            x0: x,
                            y0: y,
                            x1: x + w,
                            y1: y + h,
                        });
                    }
                }
                match (name.as_str(), a.get("class").map(String::as_str)) {
                    ("text", _) => open_text = Some((a, String::new())),
                    ("rect", Some("plot")) => {
                        if let Some(Mark::Area(area)) = marks_of("rect", &a).first() {
                            picture.plots.push(*area);
                        }
                    }
                    (_, Some("data")) => picture.data.extend(marks_of(&name, &a)),
                    (_, Some("rule")) => picture.rules.extend(marks_of(&name, &a)),
                    (_, Some("legend")) => picture.legend_marks.extend(marks_of(&name, &a)),
                    _ => {}
                }
            }
            Event::Text(t) => {
                if let Some((_, content)) = &mut open_text {
                    content.push_str(&t.decode().expect("UTF-8 text"));
                }
            }
            Event::GeneralRef(r) => {
                if let Some((_, content)) = &mut open_text {
                    content.push_str(&entity(&r.decode().expect("UTF-8 entity")));
                }
            }
            Event::End(e) if e.name().as_ref() == b"text" => {
                if let Some((a, content)) = open_text.take() {
                    picture.texts.push(Text {
                        area: text_area(&a, &content),
                        legend: a.get("class").map(String::as_str) == Some("legend"),
                        content,
                    });
                }
            }
            _ => {}
        }
    }
    picture
}

/// Everything in `svg` that a person could not read: empty for a legible picture.
pub(crate) fn faults(svg: &str) -> Vec<String> {
    let p = read(svg);
    let mut faults: Vec<String> = p
        .unfollowed
        .iter()
        .map(|u| format!("{u}: the boxes would be elsewhere"))
        .collect();
    let Some(view) = p.view else {
        return vec!["no viewBox on the root".into()];
    };
    for t in &p.texts {
        if !t.area.within(&view) {
            faults.push(format!("{:?} leaves the picture: {:?}", t.content, t.area));
        }
    }
    for (i, a) in p.texts.iter().enumerate() {
        for b in &p.texts[i + 1..] {
            if a.area.overlaps(&b.area) {
                faults.push(format!("{:?} over {:?}", a.content, b.content));
            }
        }
    }
    for t in &p.texts {
        let over = |marks: &[Mark]| marks.iter().filter(|m| m.hits(&t.area)).count();
        let (data, rules) = (over(&p.data), over(&p.rules));
        if data + rules > 0 {
            faults.push(format!(
                "{:?} over {data} data marks and {rules} lines",
                t.content
            ));
        }
    }
    let legend_areas = p
        .texts
        .iter()
        .filter(|t| t.legend)
        .map(|t| Mark::Area(t.area))
        .chain(p.legend_marks.iter().copied());
    for m in legend_areas {
        if p.plots.iter().any(|plot| m.hits(plot)) {
            faults.push(format!("a legend's {m:?} inside a plot"));
        }
    }
    for m in &p.data {
        if !m
            .anchors()
            .iter()
            .all(|&q| p.plots.iter().any(|plot| plot.holds(q)))
        {
            faults.push(format!("data {m:?} outside every plot"));
        }
    }
    faults
}

/// Panics with every fault of `svg` (the first 20) unless it is legible.
pub(crate) fn assert_legible(svg: &str) {
    let faults = faults(svg);
    assert!(
        faults.is_empty(),
        "{} faults, the first:\n{}",
        faults.len(),
        faults
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Each element's name and attributes (unescaped), in document order: the pictures' tests
/// (timeline's, compare's) read them with it.
pub(crate) fn elements(svg: &str) -> Vec<(String, HashMap<String, String>)> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut all = Vec::new();
    loop {
        match reader.read_event().expect("the SVG is well-formed XML") {
            Event::Eof => break,
            Event::Empty(e) | Event::Start(e) => all.push((
                String::from_utf8_lossy(e.name().as_ref()).to_string(),
                attributes(&e),
            )),
            _ => {}
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture(body: &str) -> String {
        format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" height=\"100\" viewBox=\"0 0 200 100\">{body}</svg>")
    }

    const PLOT: &str = r#"<rect class="plot" x="50" y="10" width="100" height="50" fill="none"/>"#;

    #[test]
    fn a_legible_picture_has_no_faults() {
        let svg = picture(&format!(
            "{PLOT}<circle class=\"data\" cx=\"60\" cy=\"20\" r=\"2\"/>\
             <text x=\"48\" y=\"24\" font-size=\"10\" text-anchor=\"end\">a &amp; b</text>\
             <text class=\"legend\" x=\"50\" y=\"80\" font-size=\"10\">legend</text>"
        ));
        assert_eq!(faults(&svg), Vec::<String>::new());
        assert_eq!(read(&svg).texts[0].content, "a & b");
    }

    #[test]
    fn each_fault_is_found() {
        let cases = [
            ("<text x=\"190\" y=\"50\" font-size=\"10\">too long</text>", "leaves the picture"),
            (
                "<text x=\"0\" y=\"80\" font-size=\"10\">one</text><text x=\"12\" y=\"84\" font-size=\"10\">two</text>",
                "over \"two\"",
            ),
            (
                "<circle class=\"data\" cx=\"60\" cy=\"20\" r=\"2\"/><text x=\"55\" y=\"24\" font-size=\"10\">x</text>",
                "over 1 data marks",
            ),
            (
                "<path class=\"rule\" d=\"M100 10V60\"/><text x=\"90\" y=\"30\" font-size=\"10\">across</text>",
                "over 0 data marks and 1 lines",
            ),
            (
                "<text class=\"legend\" x=\"60\" y=\"30\" font-size=\"10\">key</text>",
                "a legend's",
            ),
            ("<circle class=\"data\" cx=\"5\" cy=\"5\" r=\"2\"/>", "outside every plot"),
            ("<text x=\"0\" y=\"80\" dy=\"3\" font-size=\"10\">moved</text>", "text dy"),
        ];
        for (body, fault) in cases {
            let found = faults(&picture(&format!("{PLOT}{body}")));
            assert!(
                found.iter().any(|f| f.contains(fault)),
                "{fault} in {found:?}"
            );
        }
    }
}
