//! `--prom FILE`: the run's figures as Prometheus metrics, in the text exposition format, for
//! node_exporter's textfile collector to serve (issue 21). Pure: [`exposition`] renders, and
//! [`super::output`] writes the file atomically, as the collector asks (a temporary file in the
//! same directory, then a rename, so a scrape never reads half a file).
//!
//! What it holds, every metric a gauge named `npu_serve_smoke_...`, with the run's `host` and,
//! for a launched serve, `serve_sha256` as labels, so one box's textfile directory can hold
//! gates of several serves:
//! - `info{version, model}` 1: the gate's version and the model the requests named;
//! - `result{result}`: one series per possible RESULT, 1 for the run's and 0 for the others,
//!   so an alert matches `result{result="FAIL"} == 1` whichever way the last run went;
//! - `check_status{check, status}`: the same for each line of the verdict and each status;
//! - `rate_tokens_per_second{quantity}` and `first_token_seconds{quantity}`: the median, its
//!   95% interval (`interval_95_low`, `interval_95_high`), and the floor or limit;
//!   `median_replies{check}`: how many replies each median rests on;
//! - `determinism_trials`, `determinism_mismatches`, `determinism_mismatch_ratio{quantity}`
//!   (the rate and its exact 95% interval) and `determinism_detectable_ratio`: the
//!   determinism line's figures (`--deterministic`);
//! - `reference_positions`, `reference_agreement_ratio`, `reference_hard_divergences`,
//!   `reference_near_ties`, `reference_reanchors`, `reference_logprob_delta_p90_nats`,
//!   `reference_kl_mean_nats`: the reference line's figures (`--reference`);
//! - `reference_same_top_ratio{side}`, `reference_every_kl_nats{side, quantity}`,
//!   `reference_token_logprob_delta_nats{side, quantity}`,
//!   `reference_hard_divergences_per_100{side}`: its figures over every position, the
//!   candidate's and the worst usable noise build's (`side="noise_worst"`); with
//!   `--reference-noise`, `reference_noise_factor` and `reference_noise_builds{usable}`;
//! - `output_loops`, `output_stutters`, `output_not_text_ratio`, `output_same_answers`,
//!   `output_stopped_ratio`, `output_length_ratio`: the output line's figures;
//! - `load1`, `cpus`, `serve_cpu_wait_ratio`, `cpu_pressure_ratio`: the load line's figures;
//! - `context_tokens`, and a series a depth (`depth`) of `context_replies`,
//!   `context_prompt_tokens` (with `by`: the serve's count or the gate's estimate),
//!   `context_first_token_seconds`, `context_prefill_tokens_per_second`,
//!   `context_decode_tokens_per_second`, `context_fact_found_ratio` and, against a baseline,
//!   `context_prefill_baseline_ratio` and `context_decode_baseline_ratio`; and
//!   `context_limit{outcome}`, 1 for what the serve did with the prompt past its context: the
//!   context lines' figures (`--depths`, issue 35);
//! - `slo_attainment_ratio{quantity}` (the share of replies that met every target of `--slo`,
//!   its exact 95% interval and the least share required), `slo_replies`, `slo_met_replies`,
//!   and a series a target (`target`) of `slo_target_seconds` and `slo_missed_replies`: the
//!   goodput line's figures (issue 37);
//! - `run_start_timestamp_seconds`, `run_end_timestamp_seconds`: from run.json, never now;
//! - `ttft_seconds`, `itl_seconds`, `tpot_seconds`, `e2el_seconds`: the latency line's
//!   percentiles, as summaries (below).
//!
//! Only what the run has: a figure the run lacks is left out, never written as 0 (a 0 tok/s
//! rate would page someone; a 0 s first token would hide a serve that never answered).
//!
//! The latency percentiles are summaries (`{quantile="0.5"}`, `"0.9"`, `"0.99"`, `_sum`,
//! `_count`), not gauges with a `quantile` label: Prometheus reserves that label for
//! summaries, and `promtool check metrics` refuses it on anything else. A run is a short-lived
//! process's whole life, so its count and sum start from 0 at each run, as a restarted
//! process's do.

use crate::archive::check::Check;
use crate::archive::record::Unit;

use crate::archive::record::{
    ContextFigures, DepthFigures, Figures, Line, Percentiles, PositionFigures, ReferenceFigures,
};
use crate::judging::verdict::reference_noise::worst_noise;
use crate::judging::verdict::{Outcome, Status, Verdict};
use crate::report::exposition::{figures_of, one_sample, Exposition, Sample};
use crate::report::RunInfo;

/// Every RESULT a run can have, as result.json spells them.
const RESULTS: [&str; 5] = ["PASS", "FAIL", "SKIP", "INTERRUPTED", "INCONCLUSIVE"];

/// Every outcome of the probe past the serve's context, as result.json's `figures.context.limit`
/// spells them (`judging::verdict::context`).
const LIMIT_OUTCOMES: [&str; 6] = ["refused", "cut", "answered", "garbled", "crashed", "failed"];

/// Every status a line can have, as result.json spells them.
const STATUSES: [Status; 4] = [Status::Ok, Status::Fail, Status::Info, Status::Inconclusive];

/// The run's metrics in the text exposition format (version 0.0.4): `# HELP` and `# TYPE` for
/// each family that has a sample, then its samples. Families without a figure are left out.
pub fn exposition(v: &Verdict, run: &RunInfo<'_>) -> String {
    let mut run_labels = vec![("host", run.host.to_string())];
    if let Some(sha) = run.serve_sha256 {
        run_labels.push(("serve_sha256", sha.to_string()));
    }
    let mut out = Exposition::new(run_labels);

    info_family(&mut out, run);
    result_family(&mut out, v);
    check_status_family(&mut out, v);
    median_families(&mut out, v);
    determinism_families(&mut out, v);
    reference_families(&mut out, v);
    output_families(&mut out, v);
    load_families(&mut out, v);
    footprint_families(&mut out, v);
    context_families(&mut out, v);
    registered_families(&mut out, v);
    run_time_families(&mut out, run);
    latency_summaries(&mut out, v);
    out.text
}

/// `info`: the gate's version and the model, always 1.
fn info_family(out: &mut Exposition, run: &RunInfo<'_>) {
    let mut info_labels = vec![("version", run.tool_version.to_string())];
    if let Some(model) = run.model {
        info_labels.push(("model", model.to_string()));
    }
    out.gauge(
        "info",
        "The gate's version and the model the requests named; always 1.",
        &[(info_labels, 1.0)],
    );
}

/// `result`: one series per possible RESULT, 1 for the run's.
fn result_family(out: &mut Exposition, v: &Verdict) {
    let result = result_word(&v.outcome);
    let results: Vec<_> = RESULTS
        .iter()
        .map(|r| (vec![("result", r.to_string())], indicator(*r == result)))
        .collect();
    out.gauge(
        "result",
        "The run's RESULT: 1 for the result it had, 0 for each other.",
        &results,
    );
}

/// `check_status`: one series per line of the verdict (the first of each check) and status, 1
/// for the status it had.
fn check_status_family(out: &mut Exposition, v: &Verdict) {
    let mut checks = Vec::new();
    for line in first_of_each_check(v) {
        for s in STATUSES {
            checks.push((
                vec![
                    ("check", line.check.name().to_string()),
                    ("status", status_word(s).to_string()),
                ],
                indicator(line.status == s),
            ));
        }
    }
    out.gauge(
        "check_status",
        "Each line of the verdict: 1 for the status it had, 0 for each other.",
        &checks,
    );
}

/// The rate and first-token lines' medians, intervals and bounds, and how many replies each
/// median rests on.
fn median_families(out: &mut Exposition, v: &Verdict) {
    let rate = figures_of(v, Check::Rate).filter(|f| f.unit == Some(Unit::TokensPerSecond));
    let first_token =
        figures_of(v, Check::FirstToken).filter(|f| f.unit == Some(Unit::Milliseconds));
    out.gauge(
        "rate_tokens_per_second",
        "The median decode rate over the replies, its 95% interval and the floor it is held to.",
        &rate
            .map(|f| median_figures(f, f.floor, "floor", 1.0))
            .unwrap_or_default(),
    );
    out.gauge(
        "first_token_seconds",
        "The median time to the first token, its 95% interval and the limit it is held to.",
        &first_token
            .map(|f| median_figures(f, f.limit, "limit", 1e3))
            .unwrap_or_default(),
    );
    let rests_on: Vec<_> = [(Check::Rate, rate), (Check::FirstToken, first_token)]
        .into_iter()
        .filter_map(|(check, f)| {
            Some((vec![("check", check.name().to_string())], f?.values? as f64))
        })
        .collect();
    out.gauge(
        "median_replies",
        "How many replies a line's median rests on.",
        &rests_on,
    );
}

/// The determinism line's figures (`--deterministic`).
fn determinism_families(out: &mut Exposition, v: &Verdict) {
    let determinism = figures_of(v, Check::Determinism);
    out.gauge(
        "determinism_trials",
        "The trials the determinism line compared with the first reply to their prompt.",
        &one_sample(determinism, |f| f.trials.map(|n| n as f64)),
    );
    out.gauge(
        "determinism_mismatches",
        "How many of those trials differed.",
        &one_sample(determinism, |f| f.mismatches.map(|n| n as f64)),
    );
    let interval = determinism.and_then(|f| f.interval_95);
    let mismatch: Vec<Sample> = [
        ("rate", determinism.and_then(|f| f.mismatch_rate)),
        ("interval_95_low", interval.map(|i| i[0])),
        ("interval_95_high", interval.map(|i| i[1])),
    ]
    .into_iter()
    .filter_map(|(q, x)| Some((vec![("quantity", q.to_string())], x?)))
    .collect();
    out.gauge(
        "determinism_mismatch_ratio",
        "The share of trials that differed, and its exact (Clopper-Pearson) 95% interval.",
        &mismatch,
    );
    out.gauge(
        "determinism_detectable_ratio",
        "The smallest per-trial mismatch rate these trials would have shown with probability 0.95.",
        &one_sample(determinism, |f| f.detectable_rate),
    );
}

/// The reference line's figures (`--reference`).
fn reference_families(out: &mut Exposition, v: &Verdict) {
    // The reference line's figures (`--reference`, docs/reference.md).
    let reference = figures_of(v, Check::Reference).and_then(|f| f.reference.as_ref());
    out.gauge(
        "reference_positions",
        "The reference positions the reference line judged, past each divergence where re-anchored.",
        &one_sample(reference, |f| Some(f.positions as f64)),
    );
    out.gauge(
        "reference_agreement_ratio",
        "The share of those positions where both sides chose the same text.",
        &one_sample(reference, |f| f.agreement),
    );
    out.gauge(
        "reference_hard_divergences",
        "Divergences from the reference past the tie margin, or to a token outside the other side's top-K.",
        &one_sample(reference, |f| Some(f.hard_divergences as f64)),
    );
    out.gauge(
        "reference_near_ties",
        "Divergences from the reference within the tie margin.",
        &one_sample(reference, |f| Some(f.near_ties as f64)),
    );
    out.gauge(
        "reference_reanchors",
        "Re-anchors judged past divergences from the reference.",
        &one_sample(reference, |f| Some(f.reanchored as f64)),
    );
    out.gauge(
        "reference_logprob_delta_p90_nats",
        "The p90 of the chosen tokens' |logprob difference| from the reference, nats.",
        &one_sample(reference, |f| f.logprob_delta.map(|d| d.p90)),
    );
    out.gauge(
        "reference_kl_mean_nats",
        "The mean KL divergence from the reference over its top-K, renormalised (an underestimate).",
        &one_sample(reference, |f| f.kl_mean),
    );
    every_position_families(out, reference);
}

/// The reference line's figures over every position (issue 52): a series for the candidate
/// (`side="candidate"`) and, with `--reference-noise`, one for the worst usable noise build's
/// (`side="noise_worst"`), with the factor and how many builds were and were not usable.
fn every_position_families(out: &mut Exposition, reference: Option<&ReferenceFigures>) {
    let candidate = reference.and_then(|f| f.every_position);
    let noise = reference.and_then(|f| worst_noise(&f.noise));
    let sides = |pick: fn(&PositionFigures) -> Option<f64>| -> Vec<Sample> {
        [("candidate", candidate), ("noise_worst", noise)]
            .into_iter()
            .filter_map(|(side, f)| {
                f.as_ref()
                    .and_then(pick)
                    .map(|x| (vec![("side", side.to_string())], x))
            })
            .collect()
    };
    out.gauge(
        "reference_same_top_ratio",
        "The share of every position judged where the side's top token was the reference's.",
        &sides(|f| f.same_top),
    );
    let with_quantity = |mean: fn(&PositionFigures) -> Option<f64>,
                         p99: fn(&PositionFigures) -> Option<f64>|
     -> Vec<Sample> {
        let mut samples = Vec::new();
        for (quantity, pick) in [("mean", mean), ("p99", p99)] {
            for (mut labels, x) in sides(pick) {
                labels.push(("quantity", quantity.to_string()));
                samples.push((labels, x));
            }
        }
        samples
    };
    out.gauge(
        "reference_every_kl_nats",
        "The KL divergence from the reference over both top-Ks and the rest of the mass (a lower bound of the whole vocabulary's), at every position measured: its mean and p99.",
        &with_quantity(|f| f.kl_mean, |f| f.kl_p99),
    );
    out.gauge(
        "reference_token_logprob_delta_nats",
        "The |logprob difference| of the reference's token at every position measured, nats: its mean and p99.",
        &with_quantity(|f| f.delta_mean, |f| f.delta_p99),
    );
    out.gauge(
        "reference_hard_divergences_per_100",
        "Hard divergences from the reference per 100 positions judged.",
        &sides(|f| f.hard_per_100),
    );
    if let Some(f) = reference.filter(|f| !f.noise.is_empty()) {
        out.gauge(
            "reference_noise_factor",
            "How many times the worst usable noise build's figure the candidate's may reach (--noise-factor).",
            &one_sample(f.noise_factor.as_ref(), |x| Some(*x)),
        );
        let usable = f.noise.iter().filter(|n| n.unusable.is_none()).count();
        out.gauge(
            "reference_noise_builds",
            "The known-good builds given with --reference-noise, by whether they could be used.",
            &[
                (vec![("usable", "true".to_string())], usable as f64),
                (
                    vec![("usable", "false".to_string())],
                    (f.noise.len() - usable) as f64,
                ),
            ],
        );
    }
}

/// The output line's figures.
fn output_families(out: &mut Exposition, v: &Verdict) {
    // The output line's figures (docs/output.md).
    let output = figures_of(v, Check::Output).and_then(|f| f.output.as_ref());
    out.gauge(
        "output_loops",
        "Replies whose tail is one stretch of text repeated.",
        &one_sample(output, |f| Some(f.loops as f64)),
    );
    out.gauge(
        "output_stutters",
        "Replies with one word said many times in a row.",
        &one_sample(output, |f| Some(f.stutters as f64)),
    );
    out.gauge(
        "output_not_text_ratio",
        "The largest share of a reply's characters that are replacement or control characters.",
        &one_sample(output, |f| Some(f.not_text_share_max)),
    );
    out.gauge(
        "output_same_answers",
        "Pairs of prompts expecting different answers that were answered alike.",
        &one_sample(output, |f| Some(f.same_answers as f64)),
    );
    out.gauge(
        "output_stopped_ratio",
        "The share of judged replies that stopped by themselves.",
        &one_sample(output, |f| f.stopped_share),
    );
    out.gauge(
        "output_length_ratio",
        "The mean answer length over the reference's or baseline's.",
        &one_sample(output, |f| f.length_ratio),
    );
}

/// The load line's figures.
fn load_families(out: &mut Exposition, v: &Verdict) {
    let load = figures_of(v, Check::Load);
    out.gauge(
        "load1",
        "The box's 1-minute load average before the serve started.",
        &one_sample(load, |f| f.load1),
    );
    out.gauge(
        "cpus",
        "The box's CPUs.",
        &one_sample(load, |f| f.ncpu.map(|n| n as f64)),
    );
    out.gauge(
        "serve_cpu_wait_ratio",
        "The share of the time it was ready to run that the serve waited for a CPU during the replies.",
        &one_sample(load, |f| f.serve_cpu_wait),
    );
    out.gauge(
        "cpu_pressure_ratio",
        "The highest CPU pressure (some, avg10) during the replies, as a share.",
        &one_sample(load, |f| f.cpu_pressure_pct.map(|p| p / 100.0)),
    );
}

/// The footprint lines' figures (issue 34): the serve's and the device's memory (the peak,
/// the growth a reply with its interval and limit, and the reading at each reply's end), and
/// the times to ready, of the cold reply and of the idle probe.
fn footprint_families(out: &mut Exposition, v: &Verdict) {
    let of = |check| figures_of(v, check).and_then(|f| f.footprint.as_ref());
    for (check, name, what) in [
        (
            Check::Memory,
            "serve_memory",
            "the serve's memory (RssAnon + VmSwap over its processes)",
        ),
        (Check::DeviceMemory, "device_memory", "the device's memory"),
    ] {
        let f = of(check);
        let peak: Vec<Sample> = [
            ("peak", f.and_then(|f| f.peak_bytes)),
            ("limit", f.and_then(|f| f.max_peak)),
        ]
        .into_iter()
        .filter_map(|(q, x)| Some((vec![("quantity", q.to_string())], x?)))
        .collect();
        out.gauge(
            &format!("{name}_bytes"),
            &format!(
                "The peak of {what} over every sample and reply end, and the limit it is held to."
            ),
            &peak,
        );
        let interval = f.and_then(|f| f.growth_interval_95);
        let growth: Vec<Sample> = [
            ("slope", f.and_then(|f| f.growth_bytes_per_reply)),
            ("interval_95_low", interval.map(|i| i[0])),
            ("interval_95_high", interval.map(|i| i[1])),
            ("limit", f.and_then(|f| f.max_growth)),
        ]
        .into_iter()
        .filter_map(|(q, x)| Some((vec![("quantity", q.to_string())], x?)))
        .collect();
        out.gauge(
            &format!("{name}_growth_bytes_per_reply"),
            &format!("Sen's slope of {what} a reply after the warm replies, its 95% interval and the limit it is held to."),
            &growth,
        );
        let ends: Vec<Sample> = f
            .map(|f| {
                f.reply_end_bytes
                    .iter()
                    .map(|[i, b]| (vec![("reply", format!("{i}"))], *b))
                    .collect()
            })
            .unwrap_or_default();
        out.gauge(
            &format!("{name}_reply_end_bytes"),
            &format!(
                "{} at each reply's end, by the reply's index in the run.",
                capitalised(what)
            ),
            &ends,
        );
    }
    let startup = of(Check::Startup);
    out.gauge(
        "startup_seconds",
        "The time from the serve's launch to its first ready answer.",
        &one_sample(startup, |f| f.ready_ms.map(|ms| ms / 1e3)),
    );
    out.gauge(
        "cold_first_token_seconds",
        "The first reply's first token (the cold reply).",
        &one_sample(of(Check::ColdReply), |f| f.cold_ms.map(|ms| ms / 1e3)),
    );
    out.gauge(
        "idle_first_token_seconds",
        "The first token of the reply made after the idle wait (--idle-probe).",
        &one_sample(of(Check::Idle), |f| f.idle_ms.map(|ms| ms / 1e3)),
    );
}

/// A figure of one depth's row, where the row has it.
type PickDepth = fn(&DepthFigures) -> Option<f64>;

/// `pick` of each depth's row as a sample labelled with its depth; none for a row without it.
fn by_depth(figures: Option<&ContextFigures>, pick: PickDepth) -> Vec<Sample> {
    figures
        .map(|c| {
            c.depths
                .iter()
                .filter_map(|d| Some((vec![("depth", d.depth.to_string())], pick(d)?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The context lines' figures (issue 35, `--depths`): the context the depths were held to; a
/// series a depth (labelled `depth`, the depth asked in approximate prompt tokens) for each of
/// the context line's figures and, with `--baseline`, context-rate's ratios; and what the
/// serve did with the prompt past its context, one series per possible outcome as `result`
/// has, so an alert matches whichever way the last probe went.
fn context_families(out: &mut Exposition, v: &Verdict) {
    let of = |check| figures_of(v, check).and_then(|f| f.context.as_ref());
    let (context, rates) = (of(Check::Context), of(Check::ContextRate));
    out.gauge(
        "context_tokens",
        "The serve's context the depths were held to: its own word on it, else --max-context.",
        &one_sample(context, |c| c.context.map(|n| n as f64)),
    );
    // The prompt tokens say whose count they are: a rate over the gate's estimate is not one
    // over the serve's tokenizer.
    let prompt_tokens: Vec<Sample> = context
        .map(|c| {
            c.depths
                .iter()
                .filter_map(|d| {
                    let labels = vec![
                        ("depth", d.depth.to_string()),
                        ("by", d.prompt_tokens_by.clone()),
                    ];
                    Some((labels, d.prompt_tokens?))
                })
                .collect()
        })
        .unwrap_or_default();
    out.gauge(
        "context_replies",
        "The replies made at each depth.",
        &by_depth(context, |d| Some(d.replies as f64)),
    );
    out.gauge(
        "context_prompt_tokens",
        "The median prompt tokens at each depth, by the serve's count or the gate's estimate.",
        &prompt_tokens,
    );
    let per_depth: [(&str, &str, Option<&ContextFigures>, PickDepth); 6] = [
        (
            "context_first_token_seconds",
            "The median first token at each depth: the prefill of its prompt.",
            context,
            |d| d.first_token_ms.map(|ms| ms / 1e3),
        ),
        (
            "context_prefill_tokens_per_second",
            "The median prefill rate at each depth: prompt tokens over the first token's time.",
            context,
            |d| d.prefill_tok_s,
        ),
        (
            "context_decode_tokens_per_second",
            "The median decode rate at each depth.",
            context,
            |d| d.decode_tok_s,
        ),
        (
            "context_fact_found_ratio",
            "The share of the replies at each depth that gave the fact hidden in their prompt.",
            context,
            |d| (d.replies > 0).then(|| d.found as f64 / d.replies as f64),
        ),
        (
            "context_prefill_baseline_ratio",
            "The prefill rate at each depth over the baseline's at the same depth (Hodges-Lehmann).",
            rates,
            |d| d.prefill_ratio,
        ),
        (
            "context_decode_baseline_ratio",
            "The decode rate at each depth over the baseline's at the same depth (Hodges-Lehmann).",
            rates,
            |d| d.decode_ratio,
        ),
    ];
    for (name, help, figures, pick) in per_depth {
        out.gauge(name, help, &by_depth(figures, pick));
    }
    let limit: Vec<Sample> = context
        .and_then(|c| c.limit.as_deref())
        .map(|word| {
            let mut outcomes = LIMIT_OUTCOMES.to_vec();
            // A word this version does not know (an archive of a later one) is still said.
            if !outcomes.contains(&word) {
                outcomes.push(word);
            }
            outcomes
                .into_iter()
                .map(|o| (vec![("outcome", o.to_string())], indicator(o == word)))
                .collect()
        })
        .unwrap_or_default();
    out.gauge(
        "context_limit",
        "What the serve did with a prompt past its context: 1 for the outcome it had, 0 for each other.",
        &limit,
    );
}

/// `what` with its first letter capital.
fn capitalised(what: &str) -> String {
    let mut c = what.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// When the run started and ended, from run.json (never now).
fn run_time_families(out: &mut Exposition, run: &RunInfo<'_>) {
    let at = |t: Option<&str>| -> Vec<Sample> {
        t.and_then(unix_seconds)
            .map(|s| vec![(Vec::new(), s)])
            .unwrap_or_default()
    };
    out.gauge(
        "run_start_timestamp_seconds",
        "When the run started, seconds since the Unix epoch (run.json's started_utc).",
        &at(Some(run.started_utc)),
    );
    out.gauge(
        "run_end_timestamp_seconds",
        "When the run ended, seconds since the Unix epoch (run.json's ended_utc).",
        &at(run.ended_utc),
    );
}

/// The latency line's percentiles, each a summary in seconds.
fn latency_summaries(out: &mut Exposition, v: &Verdict) {
    let latency: [(&str, &str, PickPercentiles); 4] = [
        (
            "ttft_seconds",
            "Time to the first token over the judged replies (TTFT).",
            |f| f.ttft_ms,
        ),
        (
            "itl_seconds",
            "Inter-token latency: every gap between consecutive text events, pooled (ITL).",
            |f| f.itl_ms,
        ),
        (
            "tpot_seconds",
            "Time per output token after the first, per reply (TPOT).",
            |f| f.tpot_ms,
        ),
        (
            "e2el_seconds",
            "End-to-end latency per reply, from the request's send to its last event (E2EL).",
            |f| f.e2el_ms,
        ),
    ];
    for (name, help, pick) in latency {
        if let Some(p) = v
            .lines
            .iter()
            .find_map(|l| l.figures.as_ref().and_then(pick))
        {
            out.summary_ms(name, help, &p);
        }
    }
}

/// The families of the lines that are modules of their own ([`crate::lines`]), in the
/// registry's order.
macro_rules! registered_families {
    ($($module:ident: $check:ident after $after:ident { $($entry:tt)* };)*) => {
        fn registered_families(out: &mut Exposition, v: &Verdict) {
            $(crate::lines::$module::prom_families(out, v);)*
        }
    };
}
crate::lines::every_line!(registered_families);

/// Which of a line's latency figures a summary is of.
type PickPercentiles = fn(&Figures) -> Option<Percentiles>;

/// A line's median figures as samples by `quantity`, each over `per` (1,000 for ms to s: a
/// division, so 63.912191 ms is 0.063912191 s exactly as a reader dividing gets it): the
/// median, its interval's ends, and the floor or limit, each only where the line has it.
fn median_figures(f: &Figures, bound: Option<f64>, bound_name: &str, per: f64) -> Vec<Sample> {
    let interval = f.interval_95.map(|[lo, hi]| (lo, hi));
    [
        ("median", f.median),
        ("interval_95_low", interval.map(|i| i.0)),
        ("interval_95_high", interval.map(|i| i.1)),
        (bound_name, bound),
    ]
    .into_iter()
    .filter_map(|(q, x)| Some((vec![("quantity", q.to_string())], x? / per)))
    .collect()
}

/// The verdict's lines, the first of each check only: two series with the same labels would
/// make the whole file unreadable to Prometheus.
fn first_of_each_check(v: &Verdict) -> impl Iterator<Item = &Line> {
    let mut seen = std::collections::HashSet::new();
    v.lines.iter().filter(move |l| seen.insert(l.check))
}

fn indicator(yes: bool) -> f64 {
    if yes {
        1.0
    } else {
        0.0
    }
}

/// The RESULT as result.json spells it.
fn result_word(o: &Outcome) -> &'static str {
    match o {
        Outcome::Pass => "PASS",
        Outcome::Fail => "FAIL",
        Outcome::Skip { .. } => "SKIP",
        Outcome::Interrupted { .. } => "INTERRUPTED",
        Outcome::Inconclusive { .. } => "INCONCLUSIVE",
    }
}

/// A status as result.json spells it.
fn status_word(s: Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::Fail => "FAIL",
        Status::Info => "info",
        Status::Inconclusive => "inconclusive",
    }
}

/// An RFC 3339 time as seconds since the Unix epoch; `None` when it does not parse.
fn unix_seconds(t: &str) -> Option<f64> {
    let at = humantime::parse_rfc3339(t).ok()?;
    Some(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::exposition::{escape_help, sample_value, PREFIX};

    fn line(check: &str, status: Status, figures: Option<Figures>) -> Line {
        Line {
            check: Check::from_name(check).unwrap(),
            status,
            text: format!("{check} text"),
            figures,
        }
    }

    fn run<'a>() -> RunInfo<'a> {
        RunInfo {
            title: "runs/a",
            host: "box1",
            // 1,000,000,000 s and 1,000,000,042.5 s after the epoch.
            started_utc: "2001-09-09T01:46:40Z",
            ended_utc: Some("2001-09-09T01:47:22.5Z"),
            tool_version: "1.2.3",
            serve_sha256: Some("ab12"),
            model: Some("qwen"),
        }
    }

    fn percentiles(count: usize, mean: f64, p50: f64, p90: f64, p99: f64) -> Percentiles {
        Percentiles {
            count,
            mean,
            p50,
            p90,
            p99,
        }
    }

    /// A failed run with every figure the metrics take.
    fn full_verdict() -> Verdict {
        Verdict {
            lines: vec![
                line("route", Status::Info, None),
                line(
                    "rate",
                    Status::Fail,
                    Some(Figures {
                        unit: Some("tok/s".into()),
                        median: Some(52.5),
                        values: Some(6),
                        replies: Some(6),
                        interval_95: Some([50.25, 55.0]),
                        floor: Some(60.0),
                        ..Figures::default()
                    }),
                ),
                line(
                    "first-token",
                    Status::Ok,
                    Some(Figures {
                        unit: Some("ms".into()),
                        median: Some(125.0),
                        values: Some(5),
                        interval_95: Some([100.0, 250.0]),
                        limit: Some(600.0),
                        ..Figures::default()
                    }),
                ),
                line(
                    "latency",
                    Status::Info,
                    Some(Figures {
                        ttft_ms: Some(percentiles(6, 130.0, 125.0, 240.0, 249.0)),
                        itl_ms: Some(percentiles(600, 19.0, 18.0, 25.0, 40.0)),
                        ..Figures::default()
                    }),
                ),
                line(
                    "load",
                    Status::Info,
                    Some(Figures {
                        load1: Some(3.5),
                        ncpu: Some(8),
                        serve_cpu_wait: Some(0.25),
                        cpu_pressure_pct: Some(12.5),
                        ..Figures::default()
                    }),
                ),
            ],
            outcome: Outcome::Fail,
        }
    }

    /// Every sample of `text` as (series, value), the series as written.
    fn samples(text: &str) -> Vec<(String, String)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').unwrap();
                (series.to_string(), value.to_string())
            })
            .collect()
    }

    /// The value of the series `npu_serve_smoke_{name}{host="box1",serve_sha256="ab12",{labels}}`.
    fn value(text: &str, name: &str, labels: &str) -> Option<f64> {
        let run = r#"host="box1",serve_sha256="ab12""#;
        let comma = if labels.is_empty() { "" } else { "," };
        let series = format!("{PREFIX}{name}{{{run}{comma}{labels}}}");
        samples(text)
            .into_iter()
            .find(|(s, _)| *s == series)
            .map(|(_, v)| v.parse().unwrap())
    }

    #[test]
    fn every_figure_of_the_run_is_a_metric_in_its_unit() {
        let text = exposition(&full_verdict(), &run());
        let rate = |q: &str| {
            value(
                &text,
                "rate_tokens_per_second",
                &format!("quantity=\"{q}\""),
            )
        };
        assert_eq!(rate("median"), Some(52.5), "{text}");
        assert_eq!(rate("interval_95_low"), Some(50.25));
        assert_eq!(rate("interval_95_high"), Some(55.0));
        assert_eq!(rate("floor"), Some(60.0));
        let first = |q: &str| value(&text, "first_token_seconds", &format!("quantity=\"{q}\""));
        assert_eq!(first("median"), Some(0.125));
        assert_eq!(first("interval_95_low"), Some(0.1));
        assert_eq!(first("interval_95_high"), Some(0.25));
        assert_eq!(first("limit"), Some(0.6));
        assert_eq!(value(&text, "median_replies", r#"check="rate""#), Some(6.0));
        assert_eq!(
            value(&text, "median_replies", r#"check="first-token""#),
            Some(5.0)
        );
        assert_eq!(value(&text, "load1", ""), Some(3.5));
        assert_eq!(value(&text, "cpus", ""), Some(8.0));
        assert_eq!(value(&text, "serve_cpu_wait_ratio", ""), Some(0.25));
        assert_eq!(value(&text, "cpu_pressure_ratio", ""), Some(0.125));
        assert_eq!(
            value(&text, "run_start_timestamp_seconds", ""),
            Some(1_000_000_000.0)
        );
        assert_eq!(
            value(&text, "run_end_timestamp_seconds", ""),
            Some(1_000_000_042.5)
        );
        assert_eq!(
            value(&text, "info", r#"version="1.2.3",model="qwen""#),
            Some(1.0)
        );
        // Each family once, as a gauge, with its help.
        for name in ["rate_tokens_per_second", "first_token_seconds", "result"] {
            let typed = format!("# TYPE {PREFIX}{name} gauge\n");
            assert_eq!(text.matches(&typed).count(), 1, "{name}: {text}");
            assert!(text.contains(&format!("# HELP {PREFIX}{name} ")), "{text}");
        }
    }

    #[test]
    fn the_result_and_each_line_have_one_series_set_to_1() {
        let text = exposition(&full_verdict(), &run());
        for r in RESULTS {
            let want = if r == "FAIL" { 1.0 } else { 0.0 };
            assert_eq!(
                value(&text, "result", &format!("result=\"{r}\"")),
                Some(want),
                "{r}: {text}"
            );
        }
        for (check, status) in [("rate", "FAIL"), ("first-token", "ok"), ("load", "info")] {
            for s in STATUSES.map(status_word) {
                let labels = format!("check=\"{check}\",status=\"{s}\"");
                let want = if s == status { 1.0 } else { 0.0 };
                assert_eq!(
                    value(&text, "check_status", &labels),
                    Some(want),
                    "{labels}"
                );
            }
        }
        let interrupted = Verdict {
            outcome: Outcome::Interrupted {
                signal: "SIGTERM".into(),
            },
            ..full_verdict()
        };
        let text = exposition(&interrupted, &run());
        let set: Vec<_> = samples(&text)
            .into_iter()
            .filter(|(s, v)| s.starts_with(&format!("{PREFIX}result{{")) && v == "1")
            .collect();
        assert_eq!(set.len(), 1, "{set:?}");
        assert!(set[0].0.contains(r#"result="INTERRUPTED""#), "{set:?}");
    }

    #[test]
    fn a_figure_the_run_lacks_is_left_out_never_zero() {
        let mut v = full_verdict();
        // A rate line without an interval (under 6 replies), a first-token line without
        // figures, no load and no latency line; an attached serve, not yet ended.
        if let Some(f) = v.lines[1].figures.as_mut() {
            f.interval_95 = None;
        }
        v.lines[2].figures = None;
        v.lines.truncate(3);
        let info = RunInfo {
            ended_utc: None,
            serve_sha256: None,
            model: None,
            ..run()
        };
        let text = exposition(&v, &info);
        assert!(!text.contains("interval_95"), "{text}");
        for gone in [
            "first_token_seconds",
            "load1",
            "cpus",
            "serve_cpu_wait_ratio",
            "cpu_pressure_ratio",
            "run_end_timestamp_seconds",
            "ttft_seconds",
            "serve_sha256",
            "model=",
        ] {
            assert!(!text.contains(gone), "{gone} in {text}");
        }
        // The line itself is still reported; only its figures are missing.
        assert!(
            text.contains(r#"check_status{host="box1",check="first-token",status="ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rate_tokens_per_second{host="box1",quantity="median"} 52.5"#),
            "{text}"
        );
        assert!(!text.contains("median_replies{host=\"box1\",check=\"first-token\""));
        // Nothing at all is 0 but the indicator series.
        for (series, v) in samples(&text) {
            let indicator = series.contains("_result{") || series.contains("_check_status{");
            assert!(indicator || v != "0", "{series} {v}");
        }
        // A family with no sample has no HELP or TYPE either.
        for typed in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = format!("{}{{", typed.split(' ').nth(2).unwrap());
            assert!(
                samples(&text).iter().any(|(s, _)| s.starts_with(&name)),
                "{typed} without a sample: {text}"
            );
        }
    }

    #[test]
    fn a_figure_in_another_unit_is_not_taken_for_tokens_per_second() {
        let mut v = full_verdict();
        if let Some(f) = v.lines[1].figures.as_mut() {
            f.unit = Some("ms".into());
        }
        let text = exposition(&v, &run());
        assert!(!text.contains("rate_tokens_per_second"), "{text}");
    }

    #[test]
    fn latency_percentiles_are_summaries_in_seconds() {
        let text = exposition(&full_verdict(), &run());
        assert!(text.contains(&format!("# TYPE {PREFIX}ttft_seconds summary\n")));
        let q = |name: &str, q: &str| value(&text, name, &format!("quantile=\"{q}\""));
        assert_eq!(q("ttft_seconds", "0.5"), Some(0.125));
        assert_eq!(q("ttft_seconds", "0.9"), Some(0.24));
        assert_eq!(q("ttft_seconds", "0.99"), Some(0.249));
        assert_eq!(value(&text, "ttft_seconds_count", ""), Some(6.0));
        assert_eq!(value(&text, "ttft_seconds_sum", ""), Some(0.78));
        assert_eq!(q("itl_seconds", "0.99"), Some(0.04));
        assert_eq!(value(&text, "itl_seconds_count", ""), Some(600.0));
        assert!(!text.contains("tpot_seconds"), "no TPOT given: {text}");
        assert!(!text.contains("e2el_seconds"), "{text}");
    }

    #[test]
    fn label_values_are_escaped_and_every_sample_is_one_line() {
        let info = RunInfo {
            host: "box\"1\\\nx",
            model: Some("m\"\n"),
            ..run()
        };
        let text = exposition(&full_verdict(), &info);
        assert!(
            text.contains(r#"npu_serve_smoke_load1{host="box\"1\\\nx",serve_sha256="ab12"} 3.5"#),
            "{text}"
        );
        assert!(text.contains(r#"model="m\"\n"} 1"#), "{text}");
        for l in text.lines() {
            assert!(
                l.starts_with("# HELP ")
                    || l.starts_with("# TYPE ")
                    || l.starts_with(PREFIX) && l.ends_with(|c: char| c.is_ascii_digit()),
                "a sample broken over lines: {l:?}"
            );
        }
        assert_eq!(escape_help("a\\b\nc"), "a\\\\b\\nc");
    }

    #[test]
    fn non_finite_values_are_spelled_as_prometheus_reads_them() {
        assert_eq!(sample_value(f64::INFINITY), "+Inf");
        assert_eq!(sample_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(sample_value(f64::NAN), "NaN");
        assert_eq!(sample_value(0.125), "0.125");
        assert_eq!(sample_value(1e-7).parse::<f64>().unwrap(), 1e-7);
    }

    fn depth(depth: u32, replies: usize, found: usize) -> DepthFigures {
        DepthFigures {
            depth,
            replies,
            prompt_tokens: Some(f64::from(depth) + 3.0),
            prompt_tokens_by: "serve".into(),
            first_token_ms: Some(250.0),
            prefill_tok_s: Some(f64::from(depth) * 4.0),
            decode_tok_s: Some(40.0),
            found,
            prefill_ratio: None,
            decode_ratio: None,
        }
    }

    /// A run of `--depths 1024,2048,8192` against a context of 4,096 tokens (8,192 past it, so
    /// the limit probed), with a baseline: 1,024 found the fact in 2 replies of 3; 2,048's
    /// prompt tokens are the gate's estimate, and it has no decode rate.
    fn context_verdict(limit: Option<&str>) -> Verdict {
        let mut deep = depth(2048, 3, 3);
        deep.prompt_tokens_by = "estimate".into();
        deep.decode_tok_s = None;
        let rows = vec![depth(1024, 3, 2), deep];
        let mut rated = rows.clone();
        rated[0].prefill_ratio = Some(0.875);
        rated[0].decode_ratio = Some(1.125);
        rated[1].prefill_ratio = Some(0.5);
        let mut v = full_verdict();
        v.lines.push(line(
            "context",
            Status::Fail,
            Some(Figures {
                context: Some(ContextFigures {
                    context: Some(4096),
                    depths: rows,
                    limit: limit.map(str::to_string),
                }),
                ..Figures::default()
            }),
        ));
        v.lines.push(line(
            "context-rate",
            Status::Ok,
            Some(Figures {
                context: Some(ContextFigures {
                    context: None,
                    depths: rated,
                    limit: None,
                }),
                ..Figures::default()
            }),
        ));
        v
    }

    #[test]
    fn each_depth_is_a_series_of_each_context_figure_in_its_unit() {
        let text = exposition(&context_verdict(Some("refused")), &run());
        let at = |name: &str, depth: &str| value(&text, name, &format!("depth=\"{depth}\""));
        assert_eq!(value(&text, "context_tokens", ""), Some(4096.0), "{text}");
        assert_eq!(at("context_replies", "1024"), Some(3.0));
        assert_eq!(
            value(&text, "context_prompt_tokens", r#"depth="1024",by="serve""#),
            Some(1027.0)
        );
        assert_eq!(
            value(
                &text,
                "context_prompt_tokens",
                r#"depth="2048",by="estimate""#
            ),
            Some(2051.0)
        );
        assert_eq!(at("context_first_token_seconds", "1024"), Some(0.25));
        assert_eq!(
            at("context_prefill_tokens_per_second", "1024"),
            Some(4096.0)
        );
        assert_eq!(
            at("context_prefill_tokens_per_second", "2048"),
            Some(8192.0)
        );
        assert_eq!(at("context_decode_tokens_per_second", "1024"), Some(40.0));
        assert_eq!(at("context_fact_found_ratio", "1024"), Some(2.0 / 3.0));
        assert_eq!(at("context_fact_found_ratio", "2048"), Some(1.0));
        assert_eq!(at("context_prefill_baseline_ratio", "1024"), Some(0.875));
        assert_eq!(at("context_prefill_baseline_ratio", "2048"), Some(0.5));
        assert_eq!(at("context_decode_baseline_ratio", "1024"), Some(1.125));
        // A figure a row lacks is left out for that row alone.
        assert_eq!(
            at("context_decode_tokens_per_second", "2048"),
            None,
            "{text}"
        );
        assert_eq!(at("context_decode_baseline_ratio", "2048"), None, "{text}");
        // The limit: one series per outcome, 1 for the serve's.
        for o in LIMIT_OUTCOMES {
            let want = if o == "refused" { 1.0 } else { 0.0 };
            let labels = format!("outcome=\"{o}\"");
            assert_eq!(value(&text, "context_limit", &labels), Some(want), "{o}");
        }
        for name in [
            "context_tokens",
            "context_limit",
            "context_fact_found_ratio",
        ] {
            let typed = format!("# TYPE {PREFIX}{name} gauge\n");
            assert_eq!(text.matches(&typed).count(), 1, "{name}: {text}");
        }
    }

    fn context_of(v: &mut Verdict, check: Check) -> &mut ContextFigures {
        v.lines
            .iter_mut()
            .find(|l| l.check == check)
            .and_then(|l| l.figures.as_mut())
            .and_then(|f| f.context.as_mut())
            .unwrap()
    }

    #[test]
    fn a_limit_not_probed_and_a_run_without_depths_have_no_context_series() {
        let text = exposition(&context_verdict(None), &run());
        assert!(!text.contains("context_limit"), "{text}");
        assert!(text.contains("context_prefill_tokens_per_second"), "{text}");
        // Without a baseline, context-rate carries no ratio.
        let mut v = context_verdict(None);
        context_of(&mut v, Check::ContextRate)
            .depths
            .iter_mut()
            .for_each(|d| {
                d.prefill_ratio = None;
                d.decode_ratio = None;
            });
        let text = exposition(&v, &run());
        assert!(!text.contains("baseline_ratio"), "{text}");
        // A context the serve did not say and no --max-context: no context_tokens.
        context_of(&mut v, Check::Context).context = None;
        let text = exposition(&v, &run());
        assert!(!text.contains("context_tokens"), "{text}");
        let text = exposition(&full_verdict(), &run());
        assert!(!text.contains("_context_"), "{text}");
    }

    #[test]
    fn a_limit_outcome_this_version_does_not_know_is_still_said() {
        let text = exposition(&context_verdict(Some("exploded")), &run());
        assert_eq!(
            value(&text, "context_limit", r#"outcome="exploded""#),
            Some(1.0)
        );
        assert_eq!(
            value(&text, "context_limit", r#"outcome="refused""#),
            Some(0.0)
        );
    }

    #[test]
    fn a_check_named_twice_is_reported_once() {
        let mut v = full_verdict();
        v.lines.push(line("rate", Status::Ok, None));
        let text = exposition(&v, &run());
        let rate_ok: Vec<_> = samples(&text)
            .into_iter()
            .filter(|(s, _)| s.contains(r#"check="rate",status="ok""#))
            .collect();
        assert_eq!(rate_ok.len(), 1, "{rate_ok:?}");
        assert_eq!(rate_ok[0].1, "0", "the first rate line (FAIL) counts");
    }

    /// The goodput line's figures (`--slo`): the share as guidellm names it, and each target.
    #[test]
    fn goodput_figures_are_the_slo_attainment_and_each_targets_misses() {
        use crate::archive::record::LineFigures;
        use crate::lines::goodput::record::{GoodputFigures, SloMetric, TargetFigures};
        let g = GoodputFigures {
            replies: 12,
            met: 11,
            slo_attainment: Some(11.0 / 12.0),
            interval_95: Some([0.615, 0.998]),
            min_goodput: 0.9,
            failed: 0,
            no_token: 0,
            targets: vec![TargetFigures {
                metric: SloMetric::Tpot,
                target_ms: 50.0,
                missed: 1,
                worst_reply: Some(7),
                worst_ms: Some(63.2),
            }],
        };
        let v = Verdict {
            lines: vec![line("goodput", Status::Ok, Some(LineFigures::goodput(g)))],
            outcome: Outcome::Pass,
        };
        let text = exposition(&v, &run());
        for sample in [
            "npu_serve_smoke_slo_attainment_ratio{host=\"box1\",serve_sha256=\"ab12\",quantity=\"interval_95_low\"} 0.615",
            "npu_serve_smoke_slo_attainment_ratio{host=\"box1\",serve_sha256=\"ab12\",quantity=\"min\"} 0.9",
            "npu_serve_smoke_slo_replies{host=\"box1\",serve_sha256=\"ab12\"} 12",
            "npu_serve_smoke_slo_met_replies{host=\"box1\",serve_sha256=\"ab12\"} 11",
            "npu_serve_smoke_slo_target_seconds{host=\"box1\",serve_sha256=\"ab12\",target=\"tpot\"} 0.05",
            "npu_serve_smoke_slo_missed_replies{host=\"box1\",serve_sha256=\"ab12\",target=\"tpot\"} 1",
        ] {
            assert!(text.contains(sample), "{sample} not in:\n{text}");
        }
        // Without the line, no family: a run without --slo says nothing of an SLO.
        let none = exposition(&full_verdict(), &run());
        assert!(!none.contains("slo_"), "{none}");
    }
}
