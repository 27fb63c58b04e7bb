//! The serve's own Prometheus metrics, scraped around the concurrent bursts (metrics.json), set
//! against what the gate counted: did the serve generate the tokens the gate saw stream, and how
//! many requests did it hold at once? The `metrics` line.
//!
//! Pure, like the rest of judging: the run takes the scrapes (`MetricsRecord`); here they are
//! read ([`parse`]), the serve's family is told by the names it writes ([`FAMILIES`]), and
//! `metrics_line` judges. The serve's metrics are a second witness, not the measurement: when
//! they cannot be read (no answer, another status, a body that is not Prometheus text, a serve
//! of no family the gate knows) the line is info and says why, never a failure. Only a serve
//! whose own counter disagrees with what the gate received fails it.
//!
//! # The text format
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
//!
//! # What the counters can say
//!
//! The generated-token counter's rise from the scrape before the bursts to the one after is
//! the serve's own count of what it generated for them. Every serve here counts the
//! end-of-generation token it samples, which is never streamed: a stream that ended with
//! `finish_reason: "stop"` may have one more token in the serve's count than the gate saw, so
//! that many are allowed. llama.cpp adds a request's tokens to its counter only when its slot
//! is released, so a scrape during the bursts shows little of them; only the after scrape
//! must be taken once every stream has ended. llama.cpp writes its values through a C++ stream
//! at its default precision, 6 significant digits: past 1,000,000 its counter is rounded
//! (`1.23457e+06`), and the comparison allows for that rounding rather than failing a serve for
//! its number format.

use crate::judging::verdict::quote;

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

/// A serve family the gate knows by the names of its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// How a line names it: `llama.cpp`, `vLLM`, `SGLang`, `TGI`.
    pub name: &'static str,
    /// The counter of generated tokens (summed over its label sets).
    pub tokens: &'static str,
    /// The gauge of requests being processed.
    pub processing: &'static str,
    /// The gauge of requests waiting for a place.
    pub waiting: &'static str,
    /// What the serve calls those: `deferred` (llama.cpp) or `waiting`.
    pub waiting_word: &'static str,
    /// The significant digits its values are written to, where fewer than a count needs
    /// (llama.cpp: 6, its C++ stream's default); `None`: written whole.
    pub significant_digits: Option<i32>,
}

/// The families the gate knows, and the names it knows them by. Sources (read for these names;
/// tests/data/metrics/SOURCES.md has the fixtures built from them):
/// - llama.cpp: ggml-org/llama.cpp `tools/server/server-context.cpp` (`get_metrics`) and
///   `tools/server/README.md` ("GET `/metrics`"); served only with `--metrics`.
/// - vLLM: vllm-project/vllm `vllm/v1/metrics/loggers.py` (the counter `vllm:generation_tokens`,
///   written `vllm:generation_tokens_total` by prometheus_client).
/// - SGLang: sgl-project/sglang `python/sglang/srt/metrics/collector.py`; served only with
///   `--enable-metrics`.
/// - TGI: huggingface/text-generation-inference `router/src/server.rs` (the histogram
///   `tgi_request_generated_tokens`, one observation per finished request: its `_sum` counts
///   the tokens), `router/src/infer.rs` and `router/src/queue.rs` (the gauges).
pub const FAMILIES: [Family; 4] = [
    Family {
        name: "llama.cpp",
        tokens: "llamacpp:tokens_predicted_total",
        processing: "llamacpp:requests_processing",
        waiting: "llamacpp:requests_deferred",
        waiting_word: "deferred",
        significant_digits: Some(6),
    },
    Family {
        name: "vLLM",
        tokens: "vllm:generation_tokens_total",
        processing: "vllm:num_requests_running",
        waiting: "vllm:num_requests_waiting",
        waiting_word: "waiting",
        significant_digits: None,
    },
    Family {
        name: "SGLang",
        tokens: "sglang:generation_tokens_total",
        processing: "sglang:num_running_reqs",
        waiting: "sglang:num_queue_reqs",
        waiting_word: "waiting",
        significant_digits: None,
    },
    Family {
        name: "TGI",
        tokens: "tgi_request_generated_tokens_sum",
        processing: "tgi_batch_current_size",
        waiting: "tgi_queue_size",
        waiting_word: "waiting",
        significant_digits: None,
    },
];

/// The first family in [`FAMILIES`] any of whose names the body has.
pub fn family_of(e: &Exposition) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .find(|f| e.has(f.tokens) || e.has(f.processing) || e.has(f.waiting))
}

#[cfg(test)]
mod tests {
    use super::*;

    // ggml-org/llama.cpp tools/server/server-context.cpp (get_metrics), assembled; see
    // tests/data/metrics/SOURCES.md.
    const LLAMACPP: &str = include_str!("../../tests/data/metrics/llamacpp.txt");
    // Captured: ikawrakow/ik_llama.cpp pull request 695, the head of a /metrics answer.
    const LLAMACPP_IK: &str = include_str!("../../tests/data/metrics/llamacpp-ik-pr695-head.txt");
    // Captured: ggml-org/llama.cpp commit a2df2787 (pull request 11512), its message.
    const LLAMACPP_GAUGES: &str =
        include_str!("../../tests/data/metrics/llamacpp-pr11512-gauges.txt");
    // llama-server without --metrics: tools/server/server-context.cpp and README.md, assembled.
    const LLAMACPP_501: &str = include_str!("../../tests/data/metrics/llamacpp-501.json");
    // ggml-org/llama.cpp issue 17384 (fixed by pull request 17386), assembled.
    const LLAMACPP_QUOTED: &str =
        include_str!("../../tests/data/metrics/llamacpp-quoted-17384.txt");
    // vllm-project/vllm vllm/v1/metrics/loggers.py, as prometheus_client writes it; assembled.
    const VLLM: &str = include_str!("../../tests/data/metrics/vllm.txt");
    // sgl-project/sglang python/sglang/srt/metrics/collector.py; lines as captured in issue
    // 13485 and pull request 7944, assembled.
    const SGLANG: &str = include_str!("../../tests/data/metrics/sglang.txt");
    // huggingface/text-generation-inference router/src/{server,infer,queue}.rs, as
    // metrics-exporter-prometheus writes them; assembled.
    const TGI: &str = include_str!("../../tests/data/metrics/tgi.txt");

    fn read_ok(text: &str) -> Exposition {
        parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn reads_llama_cpp_metrics() {
        let e = read_ok(LLAMACPP);
        assert_eq!(e.samples.len(), 11);
        assert_eq!(e.total("llamacpp:tokens_predicted_total"), Some(4096.0));
        assert_eq!(e.total("llamacpp:requests_processing"), Some(4.0));
        assert_eq!(e.total("llamacpp:requests_deferred"), Some(2.0));
        assert_eq!(
            e.total("llamacpp:tokens_predicted_seconds_total"),
            Some(51.2037)
        );
        assert_eq!(
            e.metric_type("llamacpp:tokens_predicted_total"),
            Some(MetricType::Counter)
        );
        assert_eq!(
            e.metric_type("llamacpp:requests_processing"),
            Some(MetricType::Gauge)
        );
        assert!(e.samples.iter().all(|s| s.labels.is_empty()));
        assert_eq!(family_of(&e).map(|f| f.name), Some("llama.cpp"));
    }

    #[test]
    fn reads_the_captured_llama_cpp_heads() {
        let e = read_ok(LLAMACPP_IK);
        assert_eq!(e.total("llamacpp:tokens_predicted_total"), Some(3469.0));
        assert_eq!(e.total("llamacpp:prompt_seconds_total"), Some(2903.63));
        assert_eq!(e.total("llamacpp:prompt_tokens_seconds"), Some(2.37151));
        assert_eq!(e.total("llamacpp:requests_processing"), None);
        assert_eq!(family_of(&e).map(|f| f.name), Some("llama.cpp"));
        let e = read_ok(LLAMACPP_GAUGES);
        assert_eq!(e.total("llamacpp:requests_processing"), Some(0.0));
        assert_eq!(e.total("llamacpp:requests_deferred"), Some(0.0));
        assert_eq!(e.total("llamacpp:tokens_predicted_total"), None);
        assert_eq!(family_of(&e).map(|f| f.name), Some("llama.cpp"));
    }

    #[test]
    fn reads_vllm_metrics_summing_its_engines_and_not_the_created_series() {
        let e = read_ok(VLLM);
        // 1.048576e+06 + 1.047552e+06, one series per engine; the _created series are Unix
        // times and must not be added in.
        assert_eq!(e.total("vllm:generation_tokens_total"), Some(2_096_128.0));
        assert_eq!(
            e.total("vllm:generation_tokens_created"),
            Some(1.7563421086531e9 + 1.7563421086533e9)
        );
        assert_eq!(e.total("vllm:num_requests_running"), Some(5.0));
        assert_eq!(e.total("vllm:num_requests_waiting"), Some(1.0));
        assert_eq!(
            e.metric_type("vllm:generation_tokens_total"),
            Some(MetricType::Counter)
        );
        let first = &e.samples[0];
        assert_eq!(first.name, "vllm:num_requests_running");
        assert_eq!(
            first.labels,
            vec![
                ("model_name".to_string(), "Qwen/Qwen3-8B".to_string()),
                ("engine".to_string(), "0".to_string()),
            ]
        );
        assert_eq!(family_of(&e).map(|f| f.name), Some("vLLM"));
    }

    #[test]
    fn reads_sglang_and_tgi_metrics() {
        let e = read_ok(SGLANG);
        assert_eq!(e.total("sglang:generation_tokens_total"), Some(60421.0));
        assert_eq!(e.total("sglang:num_running_reqs"), Some(1.0));
        assert_eq!(e.total("sglang:num_queue_reqs"), Some(3.0));
        assert_eq!(
            e.total("sglang:gen_throughput"),
            Some(0.837_128_445_740_378_3)
        );
        assert_eq!(family_of(&e).map(|f| f.name), Some("SGLang"));
        let e = read_ok(TGI);
        assert_eq!(e.total("tgi_request_generated_tokens_sum"), Some(1191.0));
        assert_eq!(e.total("tgi_request_generated_tokens_count"), Some(12.0));
        assert_eq!(e.total("tgi_batch_current_size"), Some(4.0));
        assert_eq!(e.total("tgi_queue_size"), Some(2.0));
        assert_eq!(
            e.metric_type("tgi_request_generated_tokens"),
            Some(MetricType::Histogram)
        );
        assert_eq!(family_of(&e).map(|f| f.name), Some("TGI"));
    }

    #[test]
    fn a_body_of_no_known_family_has_none() {
        let e =
            read_ok("# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\"} 7\n");
        assert_eq!(family_of(&e), None);
        // A look-alike name is not the family's.
        let e = read_ok("vllm:num_requests_running_by_reason{reason=\"x\"} 1\n");
        assert_eq!(family_of(&e), None);
    }

    #[test]
    fn label_values_unescape_and_may_hold_braces_commas_and_utf8() {
        let e = read_ok(concat!(
            r#"m{path="C:\\models\\q.gguf",say="a \"quote\"",two="line\nbreak",odd="},{="} 1"#,
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
            "a NaN\nb +Inf\nc -Inf\nd 1.5e-3\ne 4.2421665e+07\nf 1E3 1700000000000\ng -0.5 -12\nh 1e+010\ni .5\n",
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
        assert_eq!(e.samples[0].timestamp_ms, None);
    }

    #[test]
    fn comments_blank_lines_and_crlf_are_let_through() {
        let e = read_ok("\n# just a comment\n#HELP x help\n  # TYPE x gauge\r\n\tx 1\r\n\n");
        assert_eq!(e.total("x"), Some(1.0));
        assert_eq!(e.metric_type("x"), Some(MetricType::Gauge));
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
        // 64 KiB itself is read.
        let at_cap = format!("b{{x=\"{}\"}} 1", "y".repeat(LINE_CAP - 9));
        assert_eq!(at_cap.len(), LINE_CAP);
        assert_eq!(read_ok(&at_cap).total("b"), Some(1.0));
    }

    #[test]
    fn more_samples_than_the_cap_are_refused() {
        let mut text = "x 1\n".repeat(SAMPLE_CAP);
        assert_eq!(read_ok(&text).total("x"), Some(SAMPLE_CAP as f64));
        text.push_str("# comments do not count\nx 1\n");
        assert_eq!(
            parse(&text).unwrap_err(),
            format!("line 100002 is past the {SAMPLE_CAP} samples the gate reads: \"x 1\"")
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
}
