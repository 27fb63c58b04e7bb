//! `compare --csv`: a row a run for spreadsheets (issue 21), RFC 4180: a header, CRLF line
//! ends, a field quoted where it holds a comma, a quote, CR or LF, a quote in it doubled.
//!
//! Written here rather than with the `csv` crate: the rows are strings and numbers this module
//! makes, the one rule that matters is the quoting (six lines, tested below), and a dependency
//! would bring more than it saves (docs/performance.md says the same).

use super::row::Row;
use crate::archive::record::{Percentiles, PositionFigures};

/// The latency figures' names, in the order of their columns.
const LATENCY: [&str; 4] = ["ttft_ms", "itl_ms", "tpot_ms", "e2el_ms"];
/// Each latency figure's columns after its name.
const PERCENTILES: [&str; 5] = ["count", "mean", "p50", "p90", "p99"];

/// The reference line's figures over every position, in the order of their columns: the
/// candidate's, then the worst usable noise build's (issue 52).
const EVERY_POSITION: [&str; 6] = [
    "same_top",
    "kl_mean_nats",
    "kl_p99_nats",
    "delta_mean_nats",
    "delta_p99_nats",
    "hard_per_100",
];

/// The figures of [`EVERY_POSITION`], empty where there are none.
fn every_position(f: Option<PositionFigures>) -> [String; 6] {
    match f {
        Some(f) => [
            number(f.same_top),
            number(f.kl_mean),
            number(f.kl_p99),
            number(f.delta_mean),
            number(f.delta_p99),
            number(f.hard_per_100),
        ],
        None => Default::default(),
    }
}

/// The header's fields: the run, its group, its result and medians, the box, the floors, the
/// determinism line's trials and mismatches, the reference line's positions, agreement and
/// hard divergences, its figures over every position and the noise's, the latency percentiles,
/// and why it was unreadable.
pub fn header() -> Vec<String> {
    let mut h: Vec<String> = [
        "dir",
        "host",
        "serve_sha256",
        "model_sha256",
        "started_utc",
        "result",
        "median_rate_tok_s",
        "median_first_token_ms",
        "load1",
        "ncpu",
        "serve_cpu_wait",
        "rate_floor_tok_s",
        "first_token_limit_ms",
        "determinism_trials",
        "determinism_mismatches",
        "reference_positions",
        "reference_agreement",
        "reference_hard_divergences",
    ]
    .map(String::from)
    .to_vec();
    for side in ["reference", "reference_noise"] {
        h.extend(EVERY_POSITION.iter().map(|f| format!("{side}_{f}")));
    }
    for figure in LATENCY {
        h.extend(PERCENTILES.iter().map(|p| format!("{figure}_{p}")));
    }
    h.push("unreadable".into());
    h
}

/// A number as its shortest exact decimal (what a spreadsheet reads back to the same f64);
/// empty where there is none.
fn number<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn percentiles(p: Option<Percentiles>) -> [String; 5] {
    match p {
        Some(p) => [
            p.count.to_string(),
            p.mean.to_string(),
            p.p50.to_string(),
            p.p90.to_string(),
            p.p99.to_string(),
        ],
        None => Default::default(),
    }
}

/// A run's fields, in the header's order; empty where the run has no such figure.
pub fn fields(r: &Row) -> Vec<String> {
    let group = r.group.as_ref();
    let mut f = vec![
        r.dir.clone(),
        group.map(|g| g.host.clone()).unwrap_or_default(),
        group
            .and_then(|g| g.serve_sha256.clone())
            .unwrap_or_default(),
        group
            .and_then(|g| g.model_sha256.clone())
            .unwrap_or_default(),
        r.started_utc.clone().unwrap_or_default(),
        r.result.clone(),
        number(r.median_rate_tok_s),
        number(r.median_first_token_ms),
        number(r.load1),
        number(r.ncpu),
        number(r.serve_cpu_wait),
        number(r.rate_floor_tok_s),
        number(r.first_token_limit_ms),
        number(r.determinism_trials),
        number(r.determinism_mismatches),
        number(r.reference_positions),
        number(r.reference_agreement),
        number(r.reference_hard_divergences),
    ];
    f.extend(every_position(r.reference_every));
    f.extend(every_position(r.reference_noise));
    let l = &r.latency;
    for p in [l.ttft_ms, l.itl_ms, l.tpot_ms, l.e2el_ms] {
        f.extend(percentiles(p));
    }
    f.push(r.unreadable.clone().unwrap_or_default());
    f
}

/// One field as RFC 4180 has it: quoted where it holds a comma, a quote, CR or LF, with each
/// quote doubled.
pub fn quoted(field: &str) -> String {
    if field.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// One record: the fields quoted, joined by commas, ended by CRLF.
pub fn record(fields: &[String]) -> String {
    let mut line = fields
        .iter()
        .map(|f| quoted(f))
        .collect::<Vec<_>>()
        .join(",");
    line.push_str("\r\n");
    line
}

/// The header and a record a row, in the rows' order.
pub fn csv(rows: &[Row]) -> String {
    let mut out = record(&header());
    for r in rows {
        out.push_str(&record(&fields(r)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::{GroupKey, Latency};

    #[test]
    fn a_field_is_quoted_only_where_rfc_4180_needs_it() {
        assert_eq!(quoted("runs/2026-12-01"), "runs/2026-12-01");
        assert_eq!(quoted(""), "");
        assert_eq!(quoted("a,b"), "\"a,b\"");
        assert_eq!(quoted("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quoted("two\nlines"), "\"two\nlines\"");
        assert_eq!(quoted("cr\rhere"), "\"cr\rhere\"");
        assert_eq!(
            record(&["a".into(), "b,c".into(), String::new()]),
            "a,\"b,c\",\r\n"
        );
    }

    fn figures(base: f64) -> Percentiles {
        Percentiles {
            count: 12,
            mean: base + 0.5,
            p50: base,
            p90: base * 2.0,
            p99: base * 3.0,
        }
    }

    /// Split one record (no quoted fields in it) into its fields.
    fn plain_fields(line: &str) -> Vec<String> {
        line.trim_end_matches("\r\n")
            .split(',')
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_row_has_a_field_a_header_column_and_its_latency_where_the_verdict_has_it() {
        let row = Row {
            dir: "runs/a".into(),
            group: Some(GroupKey {
                host: "box1".into(),
                serve_sha256: Some("ab".repeat(32)),
                model_sha256: None,
            }),
            started_utc: Some("2026-12-01T10:00:00Z".into()),
            median_rate_tok_s: Some(12.25),
            ncpu: Some(8),
            latency: Latency {
                ttft_ms: Some(figures(100.0)),
                e2el_ms: Some(figures(900.0)),
                ..Latency::default()
            },
            result: "PASS".into(),
            determinism_trials: Some(20),
            determinism_mismatches: Some(3),
            reference_positions: Some(36),
            reference_agreement: Some(0.75),
            reference_hard_divergences: Some(2),
            reference_every: Some(PositionFigures {
                positions: 36,
                measured: 30,
                same_top: Some(0.75),
                kl_mean: Some(0.125),
                kl_p99: Some(0.5),
                delta_mean: Some(0.25),
                delta_p99: Some(1.5),
                hard_per_100: Some(5.5),
            }),
            ..Row::default()
        };
        let text = csv(std::slice::from_ref(&row));
        let lines: Vec<&str> = text.split_inclusive("\r\n").collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        let head = plain_fields(lines[0]);
        let fields = plain_fields(lines[1]);
        assert_eq!(head.len(), fields.len());
        let at = |name: &str| fields[head.iter().position(|h| h == name).unwrap()].clone();
        assert_eq!(at("dir"), "runs/a");
        assert_eq!(at("host"), "box1");
        assert_eq!(at("serve_sha256").len(), 64);
        assert_eq!(at("model_sha256"), "", "a model not recorded is empty");
        assert_eq!(at("result"), "PASS");
        assert_eq!(at("median_rate_tok_s"), "12.25");
        assert_eq!(
            at("median_first_token_ms"),
            "",
            "a missing figure is empty, never 0"
        );
        assert_eq!(at("ncpu"), "8");
        assert_eq!(at("determinism_trials"), "20");
        assert_eq!(at("determinism_mismatches"), "3");
        assert_eq!(at("reference_positions"), "36");
        assert_eq!(at("reference_agreement"), "0.75");
        assert_eq!(at("reference_hard_divergences"), "2");
        assert_eq!(at("reference_same_top"), "0.75");
        assert_eq!(at("reference_kl_mean_nats"), "0.125");
        assert_eq!(at("reference_kl_p99_nats"), "0.5");
        assert_eq!(at("reference_delta_mean_nats"), "0.25");
        assert_eq!(at("reference_delta_p99_nats"), "1.5");
        assert_eq!(at("reference_hard_per_100"), "5.5");
        assert_eq!(at("reference_noise_kl_mean_nats"), "", "no noise asked");
        assert_eq!(at("ttft_ms_count"), "12");
        assert_eq!(at("ttft_ms_mean"), "100.5");
        assert_eq!(at("ttft_ms_p50"), "100");
        assert_eq!(at("ttft_ms_p90"), "200");
        assert_eq!(at("ttft_ms_p99"), "300");
        assert_eq!(at("e2el_ms_p99"), "2700");
        assert_eq!(at("itl_ms_p50"), "", "ITL not in the verdict");
        assert_eq!(at("tpot_ms_count"), "");
    }

    #[test]
    fn an_unreadable_dir_with_a_comma_and_a_newline_is_one_quoted_record() {
        let row = Row {
            dir: "runs/a,b\nc \"d\"".into(),
            result: "UNREADABLE".into(),
            unreadable: Some("failed to read run.json: expected value, line 1".into()),
            ..Row::default()
        };
        let f = fields(&row);
        assert_eq!(f.len(), header().len());
        let text = record(&f);
        assert!(
            text.starts_with("\"runs/a,b\nc \"\"d\"\"\",,,,,UNREADABLE,"),
            "{text:?}"
        );
        assert!(text.ends_with(",\"failed to read run.json: expected value, line 1\"\r\n"));
    }
}
