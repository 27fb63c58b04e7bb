//! Foreign text made inert: one function for each kind of output it can reach (issue 30,
//! item 5).
//!
//! Foreign text is any the gate did not write itself: a serve's replies, finish_reason, model
//! id, error bodies, response headers and log lines, and the hold's holder text (another lane's
//! serve, running as the same user, can write it). Such text once reached the terminal raw (an
//! OSC 52 clipboard write, a title change, a screen clear), turned a line around with U+202E,
//! and put raw escape bytes into the Prometheus file. Each function here makes it safe for one
//! kind of output, and every foreign string goes through the one for where it goes:
//!
//! | where it goes | function |
//! | --- | --- |
//! | the terminal (a verdict line, the RESULT line, a `say!` line) | [`terminal`], or [`one_line`] for a value inside a sentence |
//! | inside a quote on one line | [`quote`] |
//! | GitHub's step summary (Markdown) | [`markdown`] |
//! | XML text and attribute values (JUnit; SVG text, which plotters escapes for markup) | [`xml`] |
//! | HTML text and attribute values (report.html) | [`html`] |
//! | a Prometheus label value | [`prom_label`] |
//! | JSON printed where a terminal reads it (`--json`) | [`json`] |
//!
//! A character made visible is written as Rust writes it, `\u{1b}`: one spelling everywhere.
//! Pure: no I/O; the layers below the top (judging, live, report) all use it.

use std::borrow::Cow;
use std::fmt::Write as _;

/// A character that reorders the text around it (the bidirectional marks, embeddings, overrides
/// and isolates): a serve's U+202E in a quoted reply would turn the rest of the gate's line
/// around on a terminal or in a summary.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Whether `c` acts rather than shows: a C0 or C1 control, DEL, or a bidirectional control.
pub fn acts(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// Push `c` as its escape as Rust writes it: `\u{1b}`.
pub fn push_escape(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:x}}}", c as u32);
}

/// Push `c`, or, when it [`acts`], its escape.
pub fn push_visible(out: &mut String, c: char) {
    if acts(c) {
        push_escape(out, c);
    } else {
        out.push(c);
    }
}

/// `s` with every character that [`acts`] escaped, except `keep`.
fn escaped(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| acts(c) && !keep(c)) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if keep(c) {
            out.push(c);
        } else {
            push_visible(&mut out, c);
        }
    }
    out.into()
}

/// For the terminal: every control character but the newline, and every bidirectional
/// control, shown as its escape. For text of the gate's whose quoted parts are foreign (a
/// verdict line).
pub fn terminal(s: &str) -> Cow<'_, str> {
    escaped(s, |c| c == '\n')
}

/// For a foreign value inside one of the gate's sentences, on any output: as [`terminal`],
/// the newline escaped too, so it can never start a line of its own (a `RESULT: PASS`).
pub fn one_line(s: &str) -> Cow<'_, str> {
    escaped(s, |_| false)
}

/// `s` in double quotes, cut to `max` characters (marked with …), on one line: a newline as
/// `\n`, a return as `\r`, a quote as `\"`, anything else that [`acts`] as its escape.
pub fn quote(s: &str, max: usize) -> String {
    let mut out = String::from("\"");
    for (i, ch) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        push_quoted(&mut out, ch);
    }
    out.push('"');
    out
}

/// Push `c` as it reads inside a [`quote`].
pub fn push_quoted(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '"' => out.push_str("\\\""),
        c => push_visible(out, c),
    }
}

/// For a Markdown table cell (GitHub's step summary): what GitHub would render as code,
/// emphasis, a link, a heading, HTML or an entity is backslash-escaped (CommonMark lets any
/// ASCII punctuation be), a newline is a space, and what [`acts`] is shown as its escape.
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '!' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => push_visible(&mut out, c),
        }
    }
    out
}

/// For XML text and attribute values (JUnit, SVG): what [`acts`] shown as its escape (XML 1.0
/// forbids most C0 controls, and a report that does not parse is no report), the newline and
/// tab kept; the writer escapes the markup (`<`, `&`, `]]>`).
pub fn xml(s: &str) -> Cow<'_, str> {
    let forbidden = |c: char| matches!(c, '\u{fffe}' | '\u{ffff}');
    if !s
        .chars()
        .any(|c| forbidden(c) || (acts(c) && !matches!(c, '\n' | '\t')))
    {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if forbidden(c) {
            push_escape(&mut out, c);
        } else if matches!(c, '\n' | '\t') {
            out.push(c);
        } else {
            push_visible(&mut out, c);
        }
    }
    out.into()
}

/// A noncharacter (U+FDD0 to U+FDEF, and the last two code points of every plane): HTML's
/// parser reports each as an error, so a page shows it as its escape.
pub fn is_noncharacter(c: char) -> bool {
    matches!(c, '\u{fdd0}'..='\u{fdef}') || (c as u32) & 0xfffe == 0xfffe
}

/// For HTML text and double-quoted attribute values (report.html): the markup characters as
/// entities, and what [`acts`] shown as its escape, the newline and tab kept (whitespace in
/// HTML). A serve's `<script>` is text on the page, and its U+202E cannot turn the page's
/// line around.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if is_noncharacter(c) => push_escape(&mut out, c),
            c => push_visible(&mut out, c),
        }
    }
    out
}

/// For a Prometheus label value (text exposition format): what [`acts`] shown as its escape
/// first, then backslash, double quote and line feed escaped as the format asks. A `\u{1b}`
/// reads back as those six characters, never as the byte.
pub fn prom_label(s: &str) -> String {
    let visible = terminal(s);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// For JSON printed where a terminal may read it: serialized JSON with every character that
/// [`acts`] and is still raw (serde_json escapes C0 controls, not DEL, C1 or the bidirectional
/// controls) written as a JSON `\uXXXX` escape. Lossless: such a character can only stand
/// inside a string, and the escape reads back as the same string.
pub fn json(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| acts(c) && c != '\n') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts(c) && c != '\n' {
            // Every such character is in the Basic Multilingual Plane: one escape.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of hostile text, each output kind's function over it.
    const HOSTILE: &str = "a\u{1b}]52;c;cm0gLXJm\u{7}b\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}x\u{0}\r\u{9b}31m\u{7f}\n### RESULT: PASS <img src=x> `|` \"\\ ]]> \u{2066}";

    fn no_raw(s: &str, allowed: &[char]) {
        for c in s.chars() {
            assert!(!acts(c) || allowed.contains(&c), "{c:?} raw in {s:?}");
        }
    }

    #[test]
    fn each_kind_leaves_nothing_that_acts() {
        no_raw(&terminal(HOSTILE), &['\n']);
        no_raw(&one_line(HOSTILE), &[]);
        no_raw(&quote(HOSTILE, 1000), &[]);
        no_raw(&markdown(HOSTILE), &[]);
        no_raw(&xml(HOSTILE), &['\n']);
        no_raw(&html(HOSTILE), &['\n']);
        assert!(!html(HOSTILE).contains(['<', '>', '"', '\'']));
        assert!(html(HOSTILE).contains("&lt;img src=x&gt;") && html("a&b").contains("a&amp;b"));
        assert_eq!(html("\u{fdd0}\u{1fffe}"), "\\u{fdd0}\\u{1fffe}");
        no_raw(&prom_label(HOSTILE), &[]);
        assert!(!prom_label(HOSTILE).contains('\n'));
        assert!(
            terminal(HOSTILE).contains("\\u{1b}]52;") && terminal(HOSTILE).contains("\\u{202e}")
        );
        assert!(markdown(HOSTILE).contains("\\#\\#\\# RESULT: PASS \\<img src=x\\>"));
        assert!(prom_label("m\u{1b}\"\\\n").starts_with("m\\\\u{1b}\\\"\\\\\\n"));
        assert_eq!(terminal("plain\ntext"), "plain\ntext");
        assert!(matches!(terminal("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_reads_back_the_same() {
        let value = serde_json::json!({ "text": HOSTILE });
        let text = serde_json::to_string_pretty(&value).unwrap();
        let safe = json(&text);
        no_raw(&safe, &['\n']);
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
