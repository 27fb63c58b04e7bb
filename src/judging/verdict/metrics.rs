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
//! [`crate::wire::prom_text`] reads the bodies.
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

use std::fmt::Write as _;

use super::words::{noun, trimmed};
use crate::archive::check::Check;
use crate::archive::record::{
    Figures, Line, MetricsRecord, MetricsScrape, Phase, ReplyRecord, Status, METRICS_BODY_KEPT,
};
use crate::judging::measure::measure;
use crate::wire::prom_text::{parse, Exposition};

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
                noun(unstreamed, "token", "tokens")
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
    trimmed(x, 2)
}

/// `x requests` (or `1 request`).
fn requests(x: f64) -> String {
    format!("{} {}", count(x), noun(x, "request", "requests"))
}

/// The metrics line: the serve's own metrics against what the gate counted over the bursts'
/// streams.
pub(crate) fn serve_metrics_line(
    metrics: Result<&MetricsRecord, &str>,
    replies: &[ReplyRecord],
) -> Line {
    let record = match metrics {
        Ok(record) => record,
        Err(problem) => {
            return Line::new(
                Check::Metrics,
                Status::Info,
                format!(
                "the serve's metrics could not be read ({problem}); the gate's own figures stand"
            ),
            )
        }
    };
    let streams: Vec<&ReplyRecord> = replies.iter().filter(|r| r.burst.is_some()).collect();
    let gate = GateCount {
        tokens: streams.iter().map(|r| measure(r).tokens).sum(),
        stopped: streams
            .iter()
            .filter(|r| r.finish_reason.as_deref() == Some("stop"))
            .count(),
        streams: streams.len(),
    };
    metrics_line(record, &gate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::prom_text::tests::{read_ok, LLAMACPP_501, LLAMACPP_QUOTED};
    use crate::wire::prom_text::MetricType;

    // ggml-org/llama.cpp tools/server/server-context.cpp (get_metrics), assembled; see
    // tests/data/metrics/SOURCES.md.
    const LLAMACPP: &str = include_str!("../../../tests/data/metrics/llamacpp.txt");
    // Captured: ikawrakow/ik_llama.cpp pull request 695, the head of a /metrics answer.
    const LLAMACPP_IK: &str =
        include_str!("../../../tests/data/metrics/llamacpp-ik-pr695-head.txt");
    // Captured: ggml-org/llama.cpp commit a2df2787 (pull request 11512), its message.
    const LLAMACPP_GAUGES: &str =
        include_str!("../../../tests/data/metrics/llamacpp-pr11512-gauges.txt");
    // vllm-project/vllm vllm/v1/metrics/loggers.py, as prometheus_client writes it; assembled.
    const VLLM: &str = include_str!("../../../tests/data/metrics/vllm.txt");
    // sgl-project/sglang python/sglang/srt/metrics/collector.py; lines as captured in issue
    // 13485 and pull request 7944, assembled.
    const SGLANG: &str = include_str!("../../../tests/data/metrics/sglang.txt");
    // huggingface/text-generation-inference router/src/{server,infer,queue}.rs, as
    // metrics-exporter-prometheus writes them; assembled.
    const TGI: &str = include_str!("../../../tests/data/metrics/tgi.txt");

    const URL: &str = "http://127.0.0.1:8080/metrics";
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
