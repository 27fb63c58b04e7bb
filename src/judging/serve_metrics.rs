//! The serve's own Prometheus metrics, scraped around the concurrent bursts (metrics.json), set
//! against what the gate counted: did the serve generate the tokens the gate saw stream, and how
//! many requests did it hold at once? The `metrics` line.
//!
//! Pure, like the rest of judging: the run takes the scrapes ([`MetricsRecord`]); here they are
//! read ([`parse`]), the serve's family is told by the names it writes ([`FAMILIES`]), and
//! [`metrics_line`] judges. The serve's metrics are a second witness, not the measurement: when
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
//! the serve's own count of what it generated for them (and for any other client of an
//! attached serve meanwhile). A serve counts the end-of-generation token it samples, which is
//! never streamed (llama.cpp's slot counts it in `n_decoded`; the gate's own token source
//! [`UsageLessEndOfGeneration`](crate::archive::record::TokenSource::UsageLessEndOfGeneration)
//! is the same token seen in `usage`): a stream that ended with `finish_reason: "stop"` may
//! have one more token in the serve's count than the gate saw, so that many are allowed.
//! llama.cpp adds a request's tokens to its counter only when its slot is released, so a
//! scrape during the bursts shows little of them; the after scrape must be taken once every
//! stream has ended. llama.cpp writes its values through a C++ stream
//! at its default precision, 6 significant digits: past 1,000,000 its counter is rounded
//! (`1.23457e+06`), and the comparison allows for that rounding rather than failing a serve for
//! its number format.

use crate::archive::check::Check;
use crate::archive::record::Phase;
use std::fmt::Write as _;

use crate::archive::record::{
    Figures, Line, MetricsRecord, MetricsScrape, Status, METRICS_BODY_KEPT,
};
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

impl Family {
    /// How far a value written by this family may be from the true one: half a step in its
    /// last significant digit (llama.cpp's `1.23457e+06` is 1234565 to 1234575), 0 when it
    /// writes values whole or the value needs no more digits than it writes.
    fn rounding(&self, value: f64) -> f64 {
        let Some(digits) = self.significant_digits else {
            return 0.0;
        };
        if !value.is_finite() || value.abs() < 10f64.powi(digits) {
            return 0.0;
        }
        let magnitude = value.abs().log10().floor() as i32;
        10f64.powi(magnitude - digits + 1) / 2.0
    }
}

/// What the gate itself counted over the bursts, to set against the serve's metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateCount {
    /// Tokens the gate counted over the burst streams (sum of each stream's measured tokens, what the rate uses).
    pub tokens: f64,
    /// Streams that ended with finish_reason "stop" (each may have generated one end-of-generation token the serve counts but never streams).
    pub stopped: usize,
    /// Streams in the bursts.
    pub streams: usize,
}

/// The `metrics` line: the serve's generated-token count over the bursts against the gate's,
/// and the most requests it showed processing and waiting. Info when the metrics cannot be
/// read or the counter went back; FAIL only when the serve's count is outside the gate's count
/// plus the end-of-generation tokens allowed.
pub fn metrics_line(rec: &MetricsRecord, gate: &GateCount) -> Line {
    match read(rec) {
        Ok(read) => compare(rec, &read, gate),
        Err(Unread::NoMetrics(status)) => {
            let hint = if status == 501 {
                "llama-server serves them with --metrics"
            } else {
                "give --metrics-url if the serve has them elsewhere"
            };
            Line::new(
                Check::Metrics,
                Status::Info,
                format!(
                    "the serve has no metrics at {} (HTTP {status}); {hint}",
                    rec.url
                ),
            )
        }
        Err(Unread::Because(why)) => Line::new(
            Check::Metrics,
            Status::Info,
            format!("the serve's metrics could not be read ({why}); the gate's own figures stand"),
        ),
    }
}

/// Why the record cannot be judged.
enum Unread {
    /// The serve's own `/metrics` (not a given URL) was not there: 404, or llama-server's 501.
    NoMetrics(u16),
    /// Anything else, in one phrase.
    Because(String),
}

/// The scrapes, read.
struct Read {
    family: &'static Family,
    before: f64,
    after: f64,
    /// Every scrape whose body was read, in order.
    expositions: Vec<Exposition>,
    /// Why the scrape during the bursts could not be read, when there was one and it could not.
    during_problem: Option<String>,
}

fn read(rec: &MetricsRecord) -> Result<Read, Unread> {
    let scrape = |phase: Phase| rec.scrapes.iter().find(|s| s.phase == phase);
    let before = scrape(Phase::Before);
    if let (false, Some(s)) = (rec.given, before) {
        if let Some(status @ (404 | 501)) = s.status {
            return Err(Unread::NoMetrics(status));
        }
    }
    if rec.scrapes.iter().all(|s| s.status.is_none()) {
        let why = match rec.scrapes.iter().find_map(|s| s.error.as_deref()) {
            Some(error) => format!("no scrape got an answer: {error}"),
            None => "no scrape got an answer".to_string(),
        };
        return Err(Unread::Because(why));
    }
    let before = before.ok_or_else(|| Unread::Because("no scrape before the bursts".into()))?;
    let after =
        scrape(Phase::After).ok_or_else(|| Unread::Because("no scrape after the bursts".into()))?;
    let before_e = exposition(before, "before the bursts").map_err(Unread::Because)?;
    let after_e = exposition(after, "after the bursts").map_err(Unread::Because)?;
    let family = family_of(&after_e)
        .or_else(|| family_of(&before_e))
        .ok_or_else(|| {
            Unread::Because(
                "its answers name no metric of llama.cpp, vLLM, SGLang or TGI".to_string(),
            )
        })?;
    let count = |e: &Exposition, when: &str| match e.total(family.tokens) {
        None => Err(Unread::Because(format!(
            "{} is not in the answer {when}",
            family.tokens
        ))),
        Some(v) if !v.is_finite() => Err(Unread::Because(format!(
            "{} is {v} in the answer {when}",
            family.tokens
        ))),
        Some(v) => Ok(v),
    };
    let before_n = count(&before_e, "before the bursts")?;
    let after_n = count(&after_e, "after the bursts")?;
    let mut during_problem = None;
    let mut expositions = vec![before_e];
    if let Some(during) = scrape(Phase::During) {
        match exposition(during, "during the bursts") {
            Ok(e) => expositions.push(e),
            Err(why) => during_problem = Some(why),
        }
    }
    expositions.push(after_e);
    Ok(Read {
        family,
        before: before_n,
        after: after_n,
        expositions,
        during_problem,
    })
}

/// One scrape's body, read; the error is why not, in a phrase naming `when` it was taken.
fn exposition(s: &MetricsScrape, when: &str) -> Result<Exposition, String> {
    match s.status {
        None => {
            return Err(match s.error.as_deref() {
                Some(error) => format!("the scrape {when} got no answer: {error}"),
                None => format!("the scrape {when} got no answer"),
            })
        }
        Some(200) => {}
        Some(status) => return Err(format!("the scrape {when} answered HTTP {status}")),
    }
    if s.cut {
        return Err(format!(
            "the answer {when} was longer than the {} MiB kept",
            METRICS_BODY_KEPT >> 20
        ));
    }
    let body = s
        .body
        .as_deref()
        .ok_or_else(|| format!("the answer {when} had no body"))?;
    let e = parse(body).map_err(|why| format!("the answer {when}: {why}"))?;
    if e.samples.is_empty() {
        return Err(format!("the answer {when} holds no samples"));
    }
    Ok(e)
}

fn compare(rec: &MetricsRecord, r: &Read, gate: &GateCount) -> Line {
    let f = r.family;
    let peak = |name: &str| {
        r.expositions
            .iter()
            .filter_map(|e| e.total(name))
            .filter(|v| v.is_finite() && *v >= 0.0)
            .reduce(f64::max)
    };
    let peak_processing = peak(f.processing);
    let peak_deferred = peak(f.waiting);
    let mut tail = String::new();
    match (peak_processing, peak_deferred) {
        (Some(p), Some(d)) => {
            let _ = write!(
                tail,
                "; at most {} processing at once, {} {}",
                requests(p),
                count(d),
                f.waiting_word
            );
        }
        (Some(p), None) => {
            let _ = write!(tail, "; at most {} processing at once", requests(p));
        }
        (None, Some(d)) => {
            let _ = write!(tail, "; at most {} {} at once", requests(d), f.waiting_word);
        }
        (None, None) => {}
    }
    let mut source = format!(
        "{} scrapes of {} metrics at {}",
        r.expositions.len(),
        f.name,
        rec.url
    );
    if let Some(why) = &r.during_problem {
        let _ = write!(source, "; {why}");
    }
    if tail.is_empty() {
        let _ = write!(tail, "; {source}");
    } else {
        let _ = write!(tail, " ({source})");
    }
    // A figure is a number CI reads (result-schema.json): a count that is none is left out.
    let gate_tokens = Some(gate.tokens).filter(|t| t.is_finite() && *t >= 0.0);
    let figures = Figures {
        gate_tokens,
        peak_processing,
        peak_deferred,
        ..Figures::default()
    };
    if r.after < r.before {
        let text = format!(
            "the serve's {} went back over the bursts, from {} to {} (did the serve restart?), so it is not set against the gate's count ({}){tail}",
            f.tokens,
            count(r.before),
            count(r.after),
            count(gate.tokens)
        );
        return Line::new(Check::Metrics, Status::Info, text).with(figures);
    }
    let delta = r.after - r.before;
    let figures = Figures {
        serve_tokens: Some(delta),
        ..figures
    };
    if !gate.tokens.is_finite() || gate.tokens < 0.0 {
        let text = format!(
            "the serve counted {} generated tokens over the bursts; the gate's own count ({}) is not one to set against it{tail}",
            count(delta),
            gate.tokens
        );
        return Line::new(Check::Metrics, Status::Info, text).with(figures);
    }
    let rounding = f.rounding(r.before) + f.rounding(r.after);
    let known_to = if rounding > 0.0 {
        format!(
            " (to ±{}: {} writes its counters to {} significant digits)",
            count(rounding),
            f.name,
            f.significant_digits.unwrap_or_default()
        )
    } else {
        String::new()
    };
    let lowest = gate.tokens.round();
    let highest = lowest + gate.stopped as f64;
    if delta + rounding >= lowest && delta - rounding <= highest {
        let unstreamed = delta - lowest;
        let eog = if rounding == 0.0 && unstreamed > 0.0 {
            format!(
                ", and {} end-of-generation {} never streamed",
                count(unstreamed),
                plural(unstreamed, "token", "tokens")
            )
        } else {
            String::new()
        };
        let text = format!(
            "the serve counted {} generated tokens over the bursts{known_to}, as the gate did ({}{eog}){tail}",
            count(delta),
            count(lowest)
        );
        return Line::new(Check::Metrics, Status::Info, text).with(figures);
    }
    let allowed = match gate.stopped {
        0 => "no stream ended with \"stop\", so no end-of-generation token is allowed".to_string(),
        1 => "with up to 1 end-of-generation token allowed".to_string(),
        n => format!("with up to {n} end-of-generation tokens allowed"),
    };
    let text = format!(
        "the serve's metrics say {} tokens were generated over the bursts{known_to}, and the gate counted {} ({allowed}){tail}",
        count(delta),
        count(lowest)
    );
    Line::new(Check::Metrics, Status::Fail, text).with(figures)
}

/// `x` as a count: whole numbers without decimals, others to at most 2.
fn count(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `x requests` (or `1 request`).
fn requests(x: f64) -> String {
    format!("{} {}", count(x), plural(x, "request", "requests"))
}

fn plural<'a>(x: f64, one: &'a str, many: &'a str) -> &'a str {
    if x == 1.0 {
        one
    } else {
        many
    }
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

    const URL: &str = "http://127.0.0.1:8080/metrics";

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
    fn a_family_is_known_by_any_one_of_its_names() {
        for (body, family) in [
            ("tgi_queue_size 0\n", "TGI"),
            ("tgi_batch_current_size 0\n", "TGI"),
            ("tgi_request_generated_tokens_sum 7\n", "TGI"),
            ("vllm:num_requests_waiting{engine=\"0\"} 0.0\n", "vLLM"),
        ] {
            assert_eq!(
                family_of(&read_ok(body)).map(|f| f.name),
                Some(family),
                "{body}"
            );
        }
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

    // The line.

    fn answer(phase: &str, body: &str) -> MetricsScrape {
        MetricsScrape {
            phase: phase.into(),
            at_ns: 0,
            status: Some(200),
            body: Some(body.to_string()),
            cut: false,
            error: None,
        }
    }

    fn record(scrapes: Vec<MetricsScrape>) -> MetricsRecord {
        MetricsRecord {
            url: URL.to_string(),
            given: false,
            scrapes,
        }
    }

    /// llama-server's answer with these counts, in the fixture's shape.
    fn llama(predicted: &str, processing: u32, deferred: u32) -> String {
        LLAMACPP
            .replace(
                "llamacpp:tokens_predicted_total 4096",
                &format!("llamacpp:tokens_predicted_total {predicted}"),
            )
            .replace(
                "llamacpp:requests_processing 4",
                &format!("llamacpp:requests_processing {processing}"),
            )
            .replace(
                "llamacpp:requests_deferred 2",
                &format!("llamacpp:requests_deferred {deferred}"),
            )
    }

    /// Before, during and after the bursts, llama.cpp: `from` to `to` tokens, 4 processing and
    /// none deferred during them.
    fn llama_bursts(from: &str, to: &str) -> MetricsRecord {
        record(vec![
            answer("before", &llama(from, 0, 0)),
            answer("during", &llama(from, 4, 0)),
            answer("after", &llama(to, 0, 0)),
        ])
    }

    fn gate(tokens: f64, stopped: usize) -> GateCount {
        GateCount {
            tokens,
            stopped,
            streams: 4,
        }
    }

    #[test]
    fn a_serve_that_counted_what_the_gate_did_is_said_as_info() {
        let line = metrics_line(&llama_bursts("1000", "1256"), &gate(256.0, 4));
        assert_eq!(line.check, "metrics");
        assert_eq!(line.status, Status::Info);
        assert_eq!(
            line.text,
            "the serve counted 256 generated tokens over the bursts, as the gate did (256); at most 4 requests processing at once, 0 deferred (3 scrapes of llama.cpp metrics at http://127.0.0.1:8080/metrics)"
        );
        assert_eq!(
            line.figures,
            Some(Figures {
                serve_tokens: Some(256.0),
                gate_tokens: Some(256.0),
                peak_processing: Some(4.0),
                peak_deferred: Some(0.0),
                ..Figures::default()
            })
        );
    }

    #[test]
    fn end_of_generation_tokens_are_allowed_up_to_the_streams_that_stopped() {
        // The gate's count is rounded: 255.6 streamed tokens are 256.
        let at = |to: &str, stopped| metrics_line(&llama_bursts("1000", to), &gate(255.6, stopped));
        let line = at("1260", 4);
        assert_eq!(line.status, Status::Info, "{line:?}");
        assert!(
            line.text.starts_with("the serve counted 260 generated tokens over the bursts, as the gate did (256, and 4 end-of-generation tokens never streamed); "),
            "{line:?}"
        );
        let line = at("1257", 4);
        assert!(
            line.text
                .contains("as the gate did (256, and 1 end-of-generation token never streamed)"),
            "{line:?}"
        );
        assert_eq!(at("1261", 4).status, Status::Fail, "one past the allowance");
        assert_eq!(at("1255", 4).status, Status::Fail, "one short of the gate");
        assert_eq!(at("1256", 0).status, Status::Info);
        assert_eq!(
            at("1257", 0).status,
            Status::Fail,
            "nothing stopped, nothing allowed"
        );
    }

    #[test]
    fn a_serve_that_counted_more_fails_with_both_numbers() {
        let line = metrics_line(&llama_bursts("1000", "2000"), &gate(256.0, 4));
        assert_eq!(line.status, Status::Fail);
        assert_eq!(
            line.text,
            "the serve's metrics say 1000 tokens were generated over the bursts, and the gate counted 256 (with up to 4 end-of-generation tokens allowed); at most 4 requests processing at once, 0 deferred (3 scrapes of llama.cpp metrics at http://127.0.0.1:8080/metrics)"
        );
        assert_eq!(line.figures.unwrap().serve_tokens, Some(1000.0));
    }

    #[test]
    fn a_serve_that_counted_fewer_fails_too() {
        let line = metrics_line(&llama_bursts("1000", "1100"), &gate(256.0, 1));
        assert_eq!(line.status, Status::Fail);
        assert!(
            line.text.starts_with("the serve's metrics say 100 tokens were generated over the bursts, and the gate counted 256 (with up to 1 end-of-generation token allowed); "),
            "{line:?}"
        );
        let line = metrics_line(&llama_bursts("1000", "1100"), &gate(256.0, 0));
        assert!(
            line.text.contains("and the gate counted 256 (no stream ended with \"stop\", so no end-of-generation token is allowed)"),
            "{line:?}"
        );
    }

    #[test]
    fn no_tokens_on_either_side_is_a_match() {
        // A counter that stayed put did not go back, and a count of 0 is a count.
        let line = metrics_line(&llama_bursts("1000", "1000"), &gate(0.0, 0));
        assert_eq!(line.status, Status::Info);
        assert!(
            line.text.starts_with(
                "the serve counted 0 generated tokens over the bursts, as the gate did (0); "
            ),
            "{line:?}"
        );
        assert_eq!(line.figures.unwrap().gate_tokens, Some(0.0));
    }

    #[test]
    fn a_counter_that_went_back_is_said_and_not_compared() {
        let line = metrics_line(&llama_bursts("5000", "12"), &gate(256.0, 4));
        assert_eq!(line.status, Status::Info);
        assert!(
            line.text.starts_with("the serve's llamacpp:tokens_predicted_total went back over the bursts, from 5000 to 12 (did the serve restart?), so it is not set against the gate's count (256); at most 4 requests"),
            "{line:?}"
        );
        let figures = line.figures.unwrap();
        assert_eq!(figures.serve_tokens, None);
        assert_eq!(figures.gate_tokens, Some(256.0));
    }

    #[test]
    fn llama_cpps_six_significant_digits_are_allowed_for() {
        // Past 1,000,000 llama.cpp writes 1.23457e+06: each reading is known to ±5.
        let line = metrics_line(&llama_bursts("1.23457e+06", "1.23483e+06"), &gate(256.0, 0));
        assert_eq!(line.status, Status::Info, "{line:?}");
        assert!(
            line.text.starts_with("the serve counted 260 generated tokens over the bursts (to ±10: llama.cpp writes its counters to 6 significant digits), as the gate did (256); "),
            "{line:?}"
        );
        let line = metrics_line(&llama_bursts("1.23457e+06", "1.23485e+06"), &gate(256.0, 0));
        assert_eq!(line.status, Status::Fail, "280 is more than 10 past 256");
        assert!(line.text.starts_with("the serve's metrics say 280 tokens were generated over the bursts (to ±10: llama.cpp writes its counters to 6 significant digits), and the gate counted 256"), "{line:?}");
        // Below 1,000,000 nothing is rounded; vLLM writes every digit.
        let llama = FAMILIES[0];
        assert_eq!(llama.rounding(999_999.0), 0.0);
        assert_eq!(llama.rounding(1_000_000.0), 5.0);
        assert_eq!(llama.rounding(12_345_678.0), 50.0);
        assert_eq!(FAMILIES[1].rounding(12_345_678.0), 0.0);
    }

    #[test]
    fn peaks_are_summed_over_label_sets_and_taken_over_every_scrape() {
        let during = VLLM
            .replace(r#"engine="0"} 3.0"#, r#"engine="0"} 7.0"#)
            .replace(
                r#"waiting{model_name="Qwen/Qwen3-8B",engine="1"} 0.0"#,
                r#"waiting{model_name="Qwen/Qwen3-8B",engine="1"} 5.0"#,
            );
        let after = VLLM
            .replace("1.048576e+06", "1.048704e+06")
            .replace("1.047552e+06", "1.04768e+06");
        let rec = MetricsRecord {
            url: "http://127.0.0.1:8000/metrics".into(),
            given: true,
            scrapes: vec![
                answer("before", VLLM),
                answer("during", &during),
                answer("after", &after),
            ],
        };
        let line = metrics_line(&rec, &gate(250.0, 8));
        assert_eq!(line.status, Status::Info, "{line:?}");
        assert_eq!(
            line.text,
            "the serve counted 256 generated tokens over the bursts, as the gate did (250, and 6 end-of-generation tokens never streamed); at most 9 requests processing at once, 6 waiting (3 scrapes of vLLM metrics at http://127.0.0.1:8000/metrics)"
        );
        let figures = line.figures.unwrap();
        assert_eq!(figures.peak_processing, Some(9.0));
        assert_eq!(figures.peak_deferred, Some(6.0));
    }

    #[test]
    fn gauges_absent_are_left_unsaid() {
        let before = LLAMACPP_IK.to_string();
        let after = LLAMACPP_IK.replace(" 3469", " 3725");
        let rec = record(vec![answer("before", &before), answer("after", &after)]);
        let line = metrics_line(&rec, &gate(256.0, 0));
        assert_eq!(
            line.text,
            "the serve counted 256 generated tokens over the bursts, as the gate did (256); 2 scrapes of llama.cpp metrics at http://127.0.0.1:8080/metrics"
        );
        let figures = line.figures.unwrap();
        assert_eq!(
            (figures.peak_processing, figures.peak_deferred),
            (None, None)
        );
        // Only the deferred gauge: said alone.
        let before = format!("{LLAMACPP_IK}llamacpp:requests_deferred 1\n");
        let after = format!("{after}llamacpp:requests_deferred 0\n");
        let rec = record(vec![answer("before", &before), answer("after", &after)]);
        assert!(metrics_line(&rec, &gate(256.0, 0))
            .text
            .ends_with("(256); at most 1 request deferred at once (2 scrapes of llama.cpp metrics at http://127.0.0.1:8080/metrics)"));
        // Only the processing gauge.
        let before = format!("{LLAMACPP_IK}llamacpp:requests_processing 0\n");
        let after = format!(
            "{}llamacpp:requests_processing 2\n",
            LLAMACPP_IK.replace(" 3469", " 3725")
        );
        let rec = record(vec![answer("before", &before), answer("after", &after)]);
        assert!(metrics_line(&rec, &gate(256.0, 0))
            .text
            .ends_with("(256); at most 2 requests processing at once (2 scrapes of llama.cpp metrics at http://127.0.0.1:8080/metrics)"));
    }

    #[test]
    fn a_scrape_during_that_could_not_be_read_is_said_beside_the_judgement() {
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes[1].status = Some(503);
        let line = metrics_line(&rec, &gate(256.0, 0));
        assert_eq!(line.status, Status::Info);
        assert!(
            line.text.ends_with("at most 0 requests processing at once, 0 deferred (2 scrapes of llama.cpp metrics at http://127.0.0.1:8080/metrics; the scrape during the bursts answered HTTP 503)"),
            "{line:?}"
        );
    }

    fn unread(line: &Line) -> &str {
        assert_eq!(line.status, Status::Info, "{line:?}");
        assert_eq!(line.figures, None, "{line:?}");
        line.text
            .strip_prefix("the serve's metrics could not be read (")
            .and_then(|t| t.strip_suffix("); the gate's own figures stand"))
            .unwrap_or_else(|| panic!("{line:?}"))
    }

    #[test]
    fn another_status_is_info_saying_it() {
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes[2].status = Some(503);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the scrape after the bursts answered HTTP 503"
        );
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes[0].status = Some(500);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the scrape before the bursts answered HTTP 500"
        );
    }

    #[test]
    fn llama_server_without_metrics_is_told_how_to_get_them() {
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes[0].status = Some(501);
        rec.scrapes[0].body = Some(LLAMACPP_501.into());
        let line = metrics_line(&rec, &gate(256.0, 0));
        assert_eq!(line.status, Status::Info);
        assert_eq!(
            line.text,
            "the serve has no metrics at http://127.0.0.1:8080/metrics (HTTP 501); llama-server serves them with --metrics"
        );
        rec.scrapes[0].status = Some(404);
        assert_eq!(
            metrics_line(&rec, &gate(256.0, 0)).text,
            "the serve has no metrics at http://127.0.0.1:8080/metrics (HTTP 404); give --metrics-url if the serve has them elsewhere"
        );
        // A URL the user gave that is not there is not a serve without metrics: it is said as
        // what it answered.
        rec.given = true;
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the scrape before the bursts answered HTTP 404"
        );
    }

    #[test]
    fn a_body_cut_at_the_cap_is_not_read() {
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes[2].cut = true;
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the answer after the bursts was longer than the 1 MiB kept"
        );
    }

    #[test]
    fn a_body_that_is_not_prometheus_text_is_said_with_its_line() {
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes[0].body = Some(LLAMACPP_QUOTED.into());
        assert!(unread(&metrics_line(&rec, &gate(256.0, 0))).starts_with(
            "the answer before the bursts: line 1 has no metric name: \"\\\"# HELP llamacpp:"
        ));
        rec.scrapes[0].body = Some(String::new());
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the answer before the bursts holds no samples"
        );
        rec.scrapes[0].body = None;
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the answer before the bursts had no body"
        );
    }

    #[test]
    fn metrics_of_no_known_family_are_info() {
        let other = "# TYPE http_requests_total counter\nhttp_requests_total 7\n";
        let rec = record(vec![answer("before", other), answer("after", other)]);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "its answers name no metric of llama.cpp, vLLM, SGLang or TGI"
        );
    }

    #[test]
    fn a_family_without_its_token_counter_is_info() {
        // SGLang 0.5.1 showed its scheduler gauges without the tokenizer's counters (issue 13485).
        let gauges_only: String = SGLANG
            .lines()
            .filter(|l| !l.contains("tokens_total") && !l.contains("requests_total"))
            .map(|l| format!("{l}\n"))
            .collect();
        let rec = record(vec![
            answer("before", &gauges_only),
            answer("after", &gauges_only),
        ]);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "sglang:generation_tokens_total is not in the answer before the bursts"
        );
        let rec = record(vec![
            answer("before", SGLANG),
            answer("after", &gauges_only),
        ]);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "sglang:generation_tokens_total is not in the answer after the bursts"
        );
        let nan = SGLANG.replace("} 60421.0", "} NaN");
        let rec = record(vec![answer("before", &nan), answer("after", SGLANG)]);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "sglang:generation_tokens_total is NaN in the answer before the bursts"
        );
    }

    #[test]
    fn a_missing_scrape_is_info() {
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes.pop();
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "no scrape after the bursts"
        );
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes.remove(0);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "no scrape before the bursts"
        );
        let mut rec = llama_bursts("1000", "1256");
        rec.scrapes[2] = MetricsScrape {
            status: None,
            body: None,
            error: Some("timed out after 5 s".into()),
            ..rec.scrapes[2].clone()
        };
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the scrape after the bursts got no answer: timed out after 5 s"
        );
        rec.scrapes[2].error = None;
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "the scrape after the bursts got no answer"
        );
    }

    #[test]
    fn no_answer_at_all_is_info() {
        let refused = |phase: &str| MetricsScrape {
            phase: phase.into(),
            at_ns: 0,
            status: None,
            body: None,
            cut: false,
            error: Some("connection refused".into()),
        };
        let rec = record(vec![refused("before"), refused("after")]);
        assert_eq!(
            unread(&metrics_line(&rec, &gate(256.0, 0))),
            "no scrape got an answer: connection refused"
        );
        assert_eq!(
            unread(&metrics_line(&record(vec![]), &gate(256.0, 0))),
            "no scrape got an answer"
        );
    }

    #[test]
    fn a_gate_count_that_is_not_a_number_is_not_compared() {
        let line = metrics_line(&llama_bursts("1000", "1256"), &gate(f64::NAN, 0));
        assert_eq!(line.status, Status::Info);
        assert!(
            line.text.starts_with("the serve counted 256 generated tokens over the bursts; the gate's own count (NaN) is not one to set against it; "),
            "{line:?}"
        );
        let figures = line.figures.unwrap();
        assert_eq!(figures.serve_tokens, Some(256.0));
        assert_eq!(figures.gate_tokens, None, "NaN is no figure");
        let line = metrics_line(&llama_bursts("1000", "1256"), &gate(-1.0, 0));
        assert_eq!(line.status, Status::Info);
        assert_eq!(line.figures.unwrap().gate_tokens, None);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// A scrape that answered with llama.cpp's metrics, or one of the ways one can fail.
        fn arb_scrape(phase: &'static str) -> impl Strategy<Value = (MetricsScrape, bool)> {
            let good = answer(phase, &llama("1000", 0, 0));
            prop_oneof![
                Just((good.clone(), true)),
                (100u16..600)
                    .prop_filter("not 200", |s| *s != 200)
                    .prop_map({
                        let g = good.clone();
                        move |status| {
                            (
                                MetricsScrape {
                                    status: Some(status),
                                    ..g.clone()
                                },
                                false,
                            )
                        }
                    }),
                Just((
                    MetricsScrape {
                        status: None,
                        body: None,
                        error: Some("connection refused".into()),
                        ..good.clone()
                    },
                    false
                )),
                Just((
                    MetricsScrape {
                        cut: true,
                        ..good.clone()
                    },
                    false
                )),
                Just((
                    MetricsScrape {
                        body: None,
                        ..good.clone()
                    },
                    false
                )),
                "[^\n]{1,40}\n?[{}\"= a-z:]{0,40}"
                    .prop_filter("not a sample", |b| parse(b).is_err())
                    .prop_map({
                        let g = good.clone();
                        move |body| {
                            (
                                MetricsScrape {
                                    body: Some(body),
                                    ..g.clone()
                                },
                                false,
                            )
                        }
                    }),
            ]
        }

        proptest! {
            /// Metrics that cannot be read before or after the bursts never fail the run,
            /// whatever the gate counted; read on both sides, they fail only on a count outside
            /// the gate's band.
            #[test]
            fn unreadable_metrics_are_never_a_failure(
                (before, before_ok) in arb_scrape("before"),
                (after, after_ok) in arb_scrape("after"),
                given in any::<bool>(),
                tokens in 0.0f64..100_000.0,
                stopped in 0usize..64,
            ) {
                let rec = MetricsRecord { url: URL.into(), given, scrapes: vec![before, after] };
                let line = metrics_line(&rec, &gate(tokens, stopped));
                prop_assert_eq!(line.check, Check::Metrics);
                if !(before_ok && after_ok) {
                    prop_assert_eq!(line.status, Status::Info, "{:?}", line);
                } else {
                    // Both read: the serve counted 0 over the bursts.
                    let fails = tokens.round() > 0.0;
                    prop_assert_eq!(line.status == Status::Fail, fails, "{:?}", line);
                }
            }

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

    #[test]
    fn counts_are_written_whole_or_to_two_decimals() {
        assert_eq!(count(256.0), "256");
        assert_eq!(count(2.5), "2.5");
        assert_eq!(count(1.0 / 3.0), "0.33");
        assert_eq!(count(1e16), "10000000000000000");
        assert_eq!(count(100.0), "100");
        assert_eq!(count(0.0), "0");
    }
}
