//! A serve's `/metrics` body read as samples and their types. Pure over the text, like the rest
//! of the wire; judging sets what it reads against the gate's own counts (the `metrics` line,
//! `judging::verdict::metrics`).
//!
//! [`parse`] reads the Prometheus text exposition format, version 0.0.4
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>): `# HELP` and `# TYPE` lines,
//! other comments, and samples `name{label="value",...} value [timestamp]`, label values with
//! the escapes `\\`, `\"` and `\n`, values as Go's ParseFloat reads them (`NaN`, `+Inf`, `-Inf`,
//! `1.048576e+06`). It is bounded like every reader of what a serve sends: a line longer than
//! [`LINE_CAP`] or more than [`SAMPLE_CAP`] samples is an error, not memory. It is strict where
//! the format is: a line that is neither a comment nor a sample (an HTML page, a JSON error,
//! a line cut short) is an error naming the line and quoting its head, never skipped, since a
//! parser that skips what it cannot read would report a counter from half a body as if whole.
//! A second `# HELP` or `# TYPE` for a name, which Prometheus itself refuses, is let through
//! here (the first is kept): it says nothing about the counts.
//!
//! No crate: `prometheus-parse` (the one on crates.io) matches names with `\w+`, so every name
//! with a colon (`llamacpp:`, `vllm:`, `sglang:`) is skipped as an unknown line, its labels end
//! at the first `}` even inside a quoted value, lines it cannot read are ignored rather than
//! refused, and it has no bounds; it also brings chrono, itertools and once_cell.

use crate::inert::quote;

/// The longest line read, in bytes: a metrics line is a name, a few labels and a number.
pub const LINE_CAP: usize = 64 * 1024;

/// The most samples read from one body: a serve writes a few hundred.
pub const SAMPLE_CAP: usize = 100_000;

/// How many characters of a bad line an error quotes.
const QUOTED: usize = 80;

/// One sample line: a metric name, its labels, a value and maybe a timestamp.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name, e.g. `vllm:generation_tokens_total`.
    pub name: String,
    /// The labels, in the order written, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
    /// The timestamp, ms since the Unix epoch, when the line has one.
    pub timestamp_ms: Option<i64>,
}

/// What a `# TYPE` line says a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// Only goes up (or back to 0 when its process restarts).
    Counter,
    /// Goes up and down.
    Gauge,
    /// `_bucket`, `_sum` and `_count` series.
    Histogram,
    /// Quantiles, `_sum` and `_count` series.
    Summary,
    /// Said to have no type.
    Untyped,
}

impl MetricType {
    fn from_word(word: &str) -> Option<MetricType> {
        Some(match word {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            "untyped" => MetricType::Untyped,
            _ => return None,
        })
    }
}

/// A metrics body, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Every sample, in the order written.
    pub samples: Vec<Sample>,
    /// What each `# TYPE` line said, in the order written (the first for a name).
    pub types: Vec<(String, MetricType)>,
}

impl Exposition {
    /// What the body's `# TYPE` line says `name` is.
    pub fn metric_type(&self, name: &str) -> Option<MetricType> {
        self.types.iter().find(|(n, _)| n == name).map(|&(_, t)| t)
    }

    /// The sum of `name`'s values over all its label sets (a data-parallel vLLM has one series
    /// per engine); `None` when the body has no sample of that name. Names match exactly:
    /// `vllm:generation_tokens_created` (a Unix time) is not part of
    /// `vllm:generation_tokens_total`.
    pub fn total(&self, name: &str) -> Option<f64> {
        let mut values = self.samples.iter().filter(|s| s.name == name).peekable();
        values.peek()?;
        Some(values.map(|s| s.value).sum())
    }

    /// Whether the body has a sample named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }
}

/// Read a metrics body in the Prometheus text format (0.0.4). An error is one short phrase
/// naming the first line that could not be read, with its head quoted.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::default();
    for (i, raw) in text.split('\n').enumerate() {
        let n = i + 1;
        if raw.len() > LINE_CAP {
            return Err(format!(
                "line {n} is longer than 64 KiB ({} bytes): {}",
                raw.len(),
                quote(raw, QUOTED)
            ));
        }
        // Blanks and tabs are the format's whitespace; a `\r` is let go too, for a body that
        // went through something that writes CRLF.
        let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| format!("line {n} {why}: {}", quote(raw, QUOTED));
        if let Some(comment) = line.strip_prefix('#') {
            if let Some((name, kind)) = comment_line(comment).map_err(&bad)? {
                if out.metric_type(name).is_none() {
                    out.types.push((name.to_string(), kind));
                }
            }
            continue;
        }
        let sample = sample_line(line).map_err(&bad)?;
        if out.samples.len() == SAMPLE_CAP {
            return Err(bad(&format!(
                "is past the {SAMPLE_CAP} samples the gate reads"
            )));
        }
        out.samples.push(sample);
    }
    Ok(out)
}

/// A comment line's meaning, `#` taken off: `Some((name, type))` for `# TYPE`, `None` for
/// `# HELP` and any other comment.
fn comment_line(comment: &str) -> Result<Option<(&str, MetricType)>, &'static str> {
    let mut tokens = comment.split([' ', '\t']).filter(|t| !t.is_empty());
    match tokens.next() {
        Some("HELP") => match tokens.next() {
            Some(name) if is_metric_name(name) => Ok(None),
            _ => Err("is a HELP line with no metric name"),
        },
        Some("TYPE") => {
            let name = match tokens.next() {
                Some(name) if is_metric_name(name) => name,
                _ => return Err("is a TYPE line with no metric name"),
            };
            let kind = tokens.next().and_then(MetricType::from_word).ok_or(
                "is a TYPE line whose type is not counter, gauge, histogram, summary or untyped",
            )?;
            if tokens.next().is_some() {
                return Err("is a TYPE line with more than a name and a type");
            }
            Ok(Some((name, kind)))
        }
        _ => Ok(None),
    }
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn is_name_byte(b: u8) -> bool {
    is_name_start(b) || b.is_ascii_digit()
}

fn is_metric_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && is_name_start(b[0]) && b.iter().all(|&c| is_name_byte(c))
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// The length of the name at the start of `b`: metric names may hold `:`, label names not.
fn name_len(b: &[u8], metric: bool) -> usize {
    let start = |c: u8| c.is_ascii_alphabetic() || c == b'_' || (metric && c == b':');
    match b.first() {
        Some(&c) if start(c) => {
            1 + b[1..]
                .iter()
                .take_while(|&&c| start(c) || c.is_ascii_digit())
                .count()
        }
        _ => 0,
    }
}

fn skip_blanks(b: &[u8], mut at: usize) -> usize {
    while at < b.len() && is_blank(b[at]) {
        at += 1;
    }
    at
}

/// One sample line, trimmed; the error is why it is not one.
fn sample_line(line: &str) -> Result<Sample, &'static str> {
    let b = line.as_bytes();
    let name_end = name_len(b, true);
    if name_end == 0 {
        return Err("has no metric name");
    }
    let name = line[..name_end].to_string();
    let mut at = name_end;
    let mut labels = Vec::new();
    // Blanks may stand between the name and its labels, as Prometheus's own parser allows.
    let brace = skip_blanks(b, at);
    if b.get(brace) == Some(&b'{') {
        at = label_set(line, brace + 1, &mut labels)?;
    } else if at < b.len() && !is_blank(b[at]) {
        return Err("has a character a metric name cannot have");
    }
    let mut tokens = line[at..].split([' ', '\t']).filter(|t| !t.is_empty());
    let value = tokens.next().ok_or("has no value")?;
    let value = parse_value(value).ok_or("has a value that is not a number")?;
    let timestamp_ms = match tokens.next() {
        None => None,
        Some(t) => Some(
            t.parse::<i64>()
                .map_err(|_| "has a timestamp that is not an integer")?,
        ),
    };
    if tokens.next().is_some() {
        return Err("has more than a value and a timestamp");
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

/// Read `label="value",...}` from `at` (just past the `{`) into `labels`; returns where the
/// line goes on after the `}`.
fn label_set(
    line: &str,
    mut at: usize,
    labels: &mut Vec<(String, String)>,
) -> Result<usize, &'static str> {
    let b = line.as_bytes();
    loop {
        at = skip_blanks(b, at);
        match b.get(at) {
            None => return Err("has a label set that is not closed"),
            Some(b'}') => return Ok(at + 1),
            Some(_) => {}
        }
        let len = name_len(&b[at..], false);
        if len == 0 {
            return Err("has a label with no name");
        }
        let label = line[at..at + len].to_string();
        at = skip_blanks(b, at + len);
        if b.get(at) != Some(&b'=') {
            return Err("has a label with no '='");
        }
        at = skip_blanks(b, at + 1);
        if b.get(at) != Some(&b'"') {
            return Err("has a label value that is not quoted");
        }
        let (value, end) = label_value(line, at + 1)?;
        labels.push((label, value));
        at = skip_blanks(b, end);
        match b.get(at) {
            Some(b',') => at += 1,
            Some(b'}') => return Ok(at + 1),
            None => return Err("has a label set that is not closed"),
            Some(_) => return Err("has labels not separated by commas"),
        }
    }
}

/// A quoted label value from `at` (just past its opening quote), unescaped, and where the line
/// goes on after its closing quote. The format escapes only `\\`, `\"` and `\n`.
fn label_value(line: &str, at: usize) -> Result<(String, usize), &'static str> {
    let mut value = String::new();
    let mut chars = line[at..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, at + i + 1)),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                Some(_) => {
                    return Err("has a label value with an escape other than \\\\, \\\" or \\n")
                }
                None => break,
            },
            c => value.push(c),
        }
    }
    Err("has a label value that is not closed")
}

/// A sample's value as Go's ParseFloat reads it: decimal and exponent forms, `NaN`, `+Inf`,
/// `-Inf` (any case). Rust's own parse reads the same set, less Go's hexadecimal and
/// underscored forms, which no serve here writes.
fn parse_value(token: &str) -> Option<f64> {
    token.parse::<f64>().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // llama-server without --metrics: tools/server/server-context.cpp and README.md, assembled;
    // see tests/data/metrics/SOURCES.md.
    pub(crate) const LLAMACPP_501: &str =
        include_str!("../../tests/data/metrics/llamacpp-501.json");
    // ggml-org/llama.cpp issue 17384 (fixed by pull request 17386), assembled.
    pub(crate) const LLAMACPP_QUOTED: &str =
        include_str!("../../tests/data/metrics/llamacpp-quoted-17384.txt");

    pub(crate) fn read_ok(text: &str) -> Exposition {
        parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn label_values_unescape_and_may_hold_braces_commas_and_utf8() {
        let e = read_ok(concat!(
            r#"m{path="C:\\models\\q.gguf",say="a \"quote\"",two="line\nbreak",odd="},{=",city="Zürich"} 1"#,
            "\n",
            r#"m { a = "1" , b="2", } 2"#,
            "\n",
            r#"m{}3"#,
            "\n"
        ));
        let s = &e.samples;
        assert_eq!(s.len(), 3);
        let label = |i: usize, k: &str| {
            s[i].labels
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(label(0, "path"), Some(r"C:\models\q.gguf"));
        assert_eq!(label(0, "say"), Some(r#"a "quote""#));
        assert_eq!(label(0, "two"), Some("line\nbreak"));
        assert_eq!(label(0, "odd"), Some("},{="));
        assert_eq!(label(0, "city"), Some("Zürich"));
        assert_eq!(
            s[1].labels.len(),
            2,
            "blanks around tokens, a trailing comma"
        );
        assert_eq!(s[1].value, 2.0);
        assert!(s[2].labels.is_empty());
        assert_eq!(s[2].value, 3.0);
    }

    #[test]
    fn a_label_name_cannot_be_utf8_or_hold_a_colon() {
        // Label names are ASCII letters, digits and `_`: unlike a metric name, no colon.
        let e = parse(r#"m{ü="x"} 1"#).unwrap_err();
        assert_eq!(e, r#"line 1 has a label with no name: "m{ü=\"x\"} 1""#);
        let e = parse(r#"m{a:b="x"} 1"#).unwrap_err();
        assert!(e.starts_with("line 1 has a label with no '='"), "{e}");
    }

    #[test]
    fn values_nan_inf_exponents_and_timestamps() {
        let e = read_ok(
            "a NaN\nb +Inf\nc -Inf\nd 1.5e-3\ne 4.2421665e+07\nf 1E3 1700000000000\ng -0.5 -12\nh 1e+010\ni .5\nj\t2\t3\nk{x=\"1\"}\t4\n",
        );
        let v: Vec<f64> = e.samples.iter().map(|s| s.value).collect();
        assert!(v[0].is_nan());
        assert_eq!(v[1], f64::INFINITY);
        assert_eq!(v[2], f64::NEG_INFINITY);
        assert_eq!(v[3], 0.0015);
        assert_eq!(v[4], 42_421_665.0);
        assert_eq!(v[5], 1000.0);
        assert_eq!(e.samples[5].timestamp_ms, Some(1_700_000_000_000));
        assert_eq!(v[6], -0.5);
        assert_eq!(e.samples[6].timestamp_ms, Some(-12));
        // prometheus_client writes `e+0{exponent}`, so past 1e9 a three-digit exponent.
        assert_eq!(v[7], 1e10);
        assert_eq!(v[8], 0.5);
        // Tabs separate tokens as blanks do.
        assert_eq!((v[9], e.samples[9].timestamp_ms), (2.0, Some(3)));
        assert_eq!(v[10], 4.0);
        assert_eq!(e.samples[0].timestamp_ms, None);
    }

    #[test]
    fn comments_blank_lines_and_crlf_are_let_through() {
        let e = read_ok("\n# just a comment\n#HELP x help\n  # TYPE x gauge\r\n\tx 1\r\n\n");
        assert_eq!(e.total("x"), Some(1.0));
        assert_eq!(e.metric_type("x"), Some(MetricType::Gauge));
        let e = read_ok("# TYPE a counter\n# TYPE b gauge\n# TYPE c histogram\n# TYPE d summary\n# TYPE e untyped\n");
        let kinds: Vec<_> = e.types.iter().map(|(n, k)| (n.as_str(), *k)).collect();
        assert_eq!(
            kinds,
            [
                ("a", MetricType::Counter),
                ("b", MetricType::Gauge),
                ("c", MetricType::Histogram),
                ("d", MetricType::Summary),
                ("e", MetricType::Untyped),
            ]
        );
        // A second TYPE for a name is let through; the first is kept.
        let e = read_ok("# TYPE x gauge\n# TYPE x counter\nx 1\n");
        assert_eq!(e.metric_type("x"), Some(MetricType::Gauge));
        assert_eq!(read_ok(""), Exposition::default());
    }

    #[test]
    fn an_html_page_is_refused_at_its_first_line() {
        // A made-up but ordinary 404 page, as a proxy or another server answers /metrics.
        let page = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body><h1>Not Found</h1></body></html>\n";
        assert_eq!(
            parse(page).unwrap_err(),
            r#"line 1 has no metric name: "<!DOCTYPE html>""#
        );
    }

    #[test]
    fn json_and_a_json_quoted_body_are_refused() {
        assert_eq!(
            parse(LLAMACPP_501).unwrap_err(),
            r#"line 1 has no metric name: "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. S…""#
        );
        // llama.cpp builds 7010 to 7100 sent the text as one JSON string (issue 17384); its `\n`
        // are the two characters, shown as they are (quote does not escape a backslash).
        assert_eq!(
            parse(LLAMACPP_QUOTED).unwrap_err(),
            r##"line 1 has no metric name: "\"# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n# TYPE …""##
        );
    }

    #[test]
    fn a_line_cut_short_is_refused_naming_it() {
        // A body cut mid-line: after the name, inside a label value, inside the label set.
        let cut =
            "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total\n";
        assert_eq!(
            parse(cut).unwrap_err(),
            r#"line 2 has no value: "llamacpp:tokens_predicted_total""#
        );
        let cut = "vllm:num_requests_running{model_name=\"Qwen/Qw";
        assert_eq!(
            parse(cut).unwrap_err(),
            r#"line 1 has a label value that is not closed: "vllm:num_requests_running{model_name=\"Qwen/Qw""#
        );
        let cut = "vllm:num_requests_running{model_name=\"Qwen\"";
        assert!(parse(cut)
            .unwrap_err()
            .starts_with("line 1 has a label set that is not closed"));
        let cut = "vllm:num_requests_running{model_name";
        assert!(parse(cut)
            .unwrap_err()
            .starts_with("line 1 has a label with no '='"));
        let cut = "a 1\nb{x=\"1\"} 2\nc{x=\"\\";
        assert!(parse(cut)
            .unwrap_err()
            .starts_with("line 3 has a label value that is not closed"));
    }

    #[test]
    fn a_70_kib_line_is_refused_with_its_number() {
        let long = format!("a 1\nb{{x=\"{}\"}} 1\n", "y".repeat(70 * 1024));
        let e = parse(&long).unwrap_err();
        assert!(
            e.starts_with("line 2 is longer than 64 KiB (71689 bytes): \"b{x=\\\"yyy"),
            "{e}"
        );
        assert!(e.ends_with("y…\""), "{e}");
        // 64 KiB itself is read, a byte more is not.
        let at_cap = format!("b{{x=\"{}\"}} 1", "y".repeat(65_536 - 9));
        assert_eq!(at_cap.len(), 65_536);
        assert_eq!(read_ok(&at_cap).total("b"), Some(1.0));
        let past = format!("b{{x=\"{}\"}} 1", "y".repeat(65_536 - 8));
        assert!(parse(&past)
            .unwrap_err()
            .starts_with("line 1 is longer than 64 KiB (65537 bytes)"));
    }

    #[test]
    fn more_samples_than_the_cap_are_refused() {
        let mut text = "x 1\n".repeat(100_000);
        assert_eq!(read_ok(&text).total("x"), Some(100_000.0));
        text.push_str("# comments do not count\nx 1\n");
        assert_eq!(
            parse(&text).unwrap_err(),
            "line 100002 is past the 100000 samples the gate reads: \"x 1\""
        );
    }

    #[test]
    fn lines_that_are_not_samples_each_say_why() {
        let cases = [
            ("a-b 1", "has a character a metric name cannot have"),
            ("1a 1", "has no metric name"),
            ("a one", "has a value that is not a number"),
            ("a 1 2 3", "has more than a value and a timestamp"),
            ("a 1 2.5", "has a timestamp that is not an integer"),
            ("a{x=1} 1", "has a label value that is not quoted"),
            (r#"a{x="1" y="2"} 1"#, "has labels not separated by commas"),
            (
                r#"a{x="\t"} 1"#,
                r#"has a label value with an escape other than \\, \" or \n"#,
            ),
            (r#"a{="1"} 1"#, "has a label with no name"),
            (
                "# TYPE a countr",
                "is a TYPE line whose type is not counter, gauge, histogram, summary or untyped",
            ),
            (
                "# TYPE a",
                "is a TYPE line whose type is not counter, gauge, histogram, summary or untyped",
            ),
            ("# TYPE", "is a TYPE line with no metric name"),
            ("# TYPE 9a gauge", "is a TYPE line with no metric name"),
            (
                "# TYPE a gauge extra",
                "is a TYPE line with more than a name and a type",
            ),
            ("# HELP", "is a HELP line with no metric name"),
            ("# HELP a-b help", "is a HELP line with no metric name"),
        ];
        for (line, why) in cases {
            let e = parse(line).unwrap_err();
            assert_eq!(e, format!("line 1 {why}: {}", quote(line, 80)), "{line}");
        }
    }

    #[test]
    fn a_bad_line_is_quoted_with_its_control_characters_visible() {
        let e = parse("ok 1\n\u{1b}[31mred\u{7} 1\n").unwrap_err();
        assert_eq!(e, r#"line 2 has no metric name: "\u{1b}[31mred\u{7} 1""#);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// The reader never panics, whatever it is given, and its error names a line.
            #[test]
            fn any_text_reads_or_names_its_bad_line(text in "(?s).{0,300}") {
                if let Err(e) = parse(&text) {
                    prop_assert!(e.starts_with("line "), "{}", e);
                }
            }

            /// Text made of the format's own characters, to reach deeper into a line.
            #[test]
            fn metric_like_text_reads_or_names_its_bad_line(
                text in "([a-z_:]{1,8}(\\{[a-z]{1,3} ?= ?\"([^\"\\\\]|\\\\[n\"\\\\t])*\"?,?\\}?)? [-+0-9.eEnaNIf]{0,8}( -?[0-9]{1,4})?\n|# (HELP|TYPE) [a-z]{0,3} [a-z]{0,8}\n){0,6}"
            ) {
                if let Err(e) = parse(&text) {
                    prop_assert!(e.starts_with("line "), "{}", e);
                }
            }
        }
    }
}
