//! run.json's `settings`: every setting as the run used it, one key a flag, as the command
//! line and a profile left it (`judge` and the baseline's comparison read them back).

use std::path::PathBuf;

use serde::Serialize;

use crate::archive::record::{FootprintFloors, OutputFloors};
use crate::args::footprint::MemoryUnit;
use crate::args::judged::run_floors;
use crate::args::run::RunArgs;

/// run.json's `settings`, one field a setting, named as its flag is (with underscores);
/// durations in seconds. Absent settings are `null`, never left out: `judge` and the
/// baseline's comparison read the same keys from every run.
#[derive(Debug, Serialize)]
struct SettingsRecord<'a> {
    profile: &'a Option<PathBuf>,
    out: &'a Option<PathBuf>,
    floor: f64,
    first_token_ms: f64,
    // Left out at `any`, the default, so a run's settings read as they did before it.
    #[serde(skip_serializing_if = "is_any")]
    first_token_of: &'static str,
    fast_route: &'a Option<String>,
    slow_route: &'a Option<String>,
    busy_skip: Option<f64>,
    route_lib: &'a Option<String>,
    no_route_lib: &'a Option<String>,
    route_device: &'a Option<String>,
    device_busy: &'a Option<String>,
    baseline: &'a Option<PathBuf>,
    baseline_noise: Option<f64>,
    max_regression: Option<f64>,
    baseline_allow: &'a [String],
    concurrency: u32,
    rounds: Option<u32>,
    metrics_url: &'a Option<String>,
    aggregate_floor: Option<f64>,
    min_speedup: Option<f64>,
    soak: Option<f64>,
    max_drift: Option<f64>,
    temperature: Option<f64>,
    seed: Option<u64>,
    deterministic: bool,
    baseline_answers: Option<&'static str>,
    url: &'a Option<String>,
    ready_path: &'a Option<String>,
    api_base: &'a str,
    serve_log: &'a Option<PathBuf>,
    stand_in: bool,
    prompts: &'a Option<PathBuf>,
    replies: u32,
    warmup: u32,
    max_tokens: u32,
    extra_body: &'a Option<String>,
    logprobs: Option<u32>,
    continue_body: &'a Option<String>,
    reference: &'a Option<PathBuf>,
    reference_tie: Option<f64>,
    min_agreement: Option<f64>,
    max_logprob_drift: Option<f64>,
    reference_reanchor: Option<usize>,
    // Absent where not given, so the settings of a run without noise read as before them.
    #[serde(skip_serializing_if = "<[PathBuf]>::is_empty")]
    reference_noise: &'a [PathBuf],
    #[serde(skip_serializing_if = "Option::is_none")]
    noise_factor: Option<f64>,
    output: OutputFloors,
    footprint: FootprintFloors,
    device_memory: &'a Option<PathBuf>,
    device_memory_unit: Option<MemoryUnit>,
    idle_probe: Option<f64>,
    context: crate::archive::record::ContextFloors,
    depths: Option<&'a [u32]>,
    depth_replies: Option<u32>,
    max_context: Option<u64>,
    model: &'a Option<String>,
    hold: &'a Option<PathBuf>,
    hold_timeout: f64,
    hold_cmd: &'a Option<String>,
    ready_timeout: f64,
    grace: f64,
    reply_timeout: f64,
    reply_limit: Option<f64>,
    device_freq: &'a Option<PathBuf>,
    device_temp: &'a Option<PathBuf>,
    serve: &'a [String],
}

impl<'a> SettingsRecord<'a> {
    fn of(args: &'a RunArgs) -> Self {
        // Where the rate floor and first-token limit take their defaults: the run's floors.
        let floors = args.judged().over(run_floors());
        SettingsRecord {
            profile: &args.profile,
            out: &args.out,
            floor: floors.floor,
            first_token_ms: floors.first_token_ms,
            first_token_of: floors.first_token_of.name(),
            fast_route: &args.limits.fast_route,
            slow_route: &args.limits.slow_route,
            busy_skip: args.limits.busy_skip,
            route_lib: &args.route.route_lib,
            no_route_lib: &args.route.no_route_lib,
            route_device: &args.route.route_device,
            device_busy: &args.route.device_busy,
            baseline: &args.baseline.baseline,
            baseline_noise: args.baseline.baseline_noise,
            max_regression: args.baseline.max_regression,
            baseline_allow: args.baseline.baseline_allow.as_deref().unwrap_or(&[]),
            concurrency: args.bursts.concurrency,
            rounds: args.bursts.rounds,
            metrics_url: &args.bursts.metrics_url,
            aggregate_floor: args.burst_floors.aggregate_floor,
            min_speedup: args.burst_floors.min_speedup,
            soak: args.soak.map(|d| d.as_secs_f64()),
            max_drift: args.drift.max_drift,
            temperature: args.sampling.temperature,
            seed: args.sampling.seed,
            deterministic: args.determinism.deterministic,
            baseline_answers: args.determinism.baseline_answers.map(|p| p.name()),
            url: &args.url,
            ready_path: &args.ready_path,
            api_base: &args.api_base,
            serve_log: &args.serve_log,
            stand_in: args.stand_in,
            prompts: &args.prompts,
            replies: args.replies,
            warmup: args.warmup,
            max_tokens: args.max_tokens,
            extra_body: &args.extra_body,
            logprobs: args.logprobs,
            continue_body: &args.continue_body,
            reference: &args.reference.reference,
            reference_tie: args.reference.reference_tie,
            min_agreement: args.reference.min_agreement,
            max_logprob_drift: args.reference.max_logprob_drift,
            reference_reanchor: args.reference.reference_reanchor,
            reference_noise: &args.reference.reference_noise,
            noise_factor: args.reference.noise_factor,
            output: args.output_checks.over(Default::default()),
            footprint: args.footprint.over(Default::default()),
            device_memory: &args.footprint_run.device_memory,
            device_memory_unit: args
                .footprint_run
                .device_memory
                .as_ref()
                .map(|_| args.footprint_run.device_memory_unit),
            idle_probe: args.footprint_run.idle_probe.map(|d| d.as_secs_f64()),
            context: args.context.over(Default::default()),
            depths: args.context_run.depths.as_ref().map(|d| d.0.as_slice()),
            depth_replies: args.context_run.depth_replies,
            max_context: args.context_run.max_context,
            model: &args.model,
            hold: &args.hold,
            hold_timeout: args.hold_timeout.as_secs_f64(),
            hold_cmd: &args.hold_cmd,
            ready_timeout: args.ready_timeout.as_secs_f64(),
            grace: args.grace.as_secs_f64(),
            reply_timeout: args.reply_timeout.as_secs_f64(),
            reply_limit: args.reply_limit.map(|d| d.as_secs_f64()),
            device_freq: &args.device_freq,
            device_temp: &args.device_temp,
            serve: &args.serve,
        }
    }
}

fn is_any(of: &&'static str) -> bool {
    *of == crate::archive::record::FirstTokenOf::Any.name()
}

/// The settings as the run used them, for run.json.
pub(crate) fn settings_json(args: &RunArgs) -> serde_json::Value {
    // As `serde_json::json!` did before: a setting that is not JSON (a path that is not UTF-8)
    // panics here, as it did there.
    serde_json::to_value(SettingsRecord::of(args)).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn settings_of(argv: &[&str]) -> RunArgs {
        match Cli::parse_from(argv).command {
            Command::Run(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn first_token_of_is_recorded_where_it_is_content() {
        let json = |argv: &[&str]| settings_json(&settings_of(argv));
        assert_eq!(
            json(&["x", "run", "--first-token-of", "content"])["first_token_of"],
            "content"
        );
        assert!(json(&["x", "run", "--first-token-of", "any"])
            .get("first_token_of")
            .is_none());
    }

    /// run.json's settings as they were written before issue 33, pinned: the same keys, the
    /// same nulls, the same numbers.
    #[test]
    fn the_default_settings_are_recorded_as_before() {
        let json = serde_json::to_string(&settings_json(&settings_of(&["x", "run"]))).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"aggregate_floor":null,"api_base":"/v1","baseline":null,"baseline_allow":[],"#,
                r#""baseline_answers":null,"baseline_noise":null,"busy_skip":null,"concurrency":1,"#,
                r#""context":{},"continue_body":null,"depth_replies":null,"depths":null,"deterministic":false,"device_busy":null,"device_freq":null,"#,
                r#""device_memory":null,"device_memory_unit":null,"device_temp":null,"extra_body":null,"fast_route":null,"first_token_ms":600.0,"#,
                r#""floor":60.0,"footprint":{},"grace":10.0,"hold":null,"hold_cmd":null,"hold_timeout":600.0,"idle_probe":null,"#,
                r#""logprobs":null,"max_context":null,"max_drift":null,"max_logprob_drift":null,"max_regression":null,"#,
                r#""max_tokens":64,"metrics_url":null,"min_agreement":null,"min_speedup":null,"#,
                r#""model":null,"no_route_lib":null,"out":null,"output":{},"profile":null,"#,
                r#""prompts":null,"ready_path":null,"ready_timeout":120.0,"reference":null,"#,
                r#""reference_reanchor":null,"reference_tie":null,"replies":3,"reply_limit":null,"#,
                r#""reply_timeout":60.0,"rounds":null,"route_device":null,"route_lib":null,"#,
                r#""seed":null,"serve":[],"serve_log":null,"slow_route":null,"soak":null,"#,
                r#""stand_in":false,"temperature":null,"url":null,"warmup":0}"#,
            )
        );
    }

    #[test]
    fn every_setting_given_is_recorded_as_before() {
        let argv = [
            "x",
            "run",
            "--profile",
            "p.toml",
            "--out",
            "o",
            "--floor",
            "12.5",
            "--first-token-ms",
            "300",
            "--fast-route",
            "npu",
            "--slow-route",
            "cpu",
            "--busy-skip",
            "0.2",
            "--route-lib",
            "libnpu",
            "--no-route-lib",
            "libcpu",
            "--route-device",
            "/dev/accel",
            "--device-busy",
            "fdinfo:busy",
            "--baseline",
            "b",
            "--baseline-noise",
            "0.02",
            "--max-regression",
            "0.1",
            "--baseline-allow",
            "kernel,firmware",
            "--concurrency",
            "4",
            "--rounds",
            "3",
            "--metrics-url",
            "http://127.0.0.1:9/metrics",
            "--aggregate-floor",
            "40",
            "--min-speedup",
            "2",
            "--soak",
            "90s",
            "--max-drift",
            "0.2",
            "--temperature",
            "0",
            "--seed",
            "7",
            "--deterministic",
            "--baseline-answers",
            "exact",
            "--url",
            "http://127.0.0.1:8080",
            "--ready-path",
            "/ready",
            "--api-base",
            "/v3",
            "--serve-log",
            "s.log",
            "--stand-in",
            "--prompts",
            "p.jsonl",
            "--replies",
            "40",
            "--warmup",
            "2",
            "--max-tokens",
            "32",
            "--extra-body",
            r#"{"cache_prompt":false}"#,
            "--logprobs",
            "3",
            "--continue-body",
            r#"{"x":1}"#,
            "--reference",
            "r",
            "--reference-tie",
            "0.4",
            "--min-agreement",
            "0.9",
            "--max-logprob-drift",
            "0.3",
            "--reference-reanchor",
            "5",
            "--reference-noise",
            "n1",
            "--reference-noise",
            "n2",
            "--noise-factor",
            "3",
            "--output-checks",
            "off",
            "--loop-share",
            "0.5",
            "--model",
            "m",
            "--hold",
            "/tmp/h",
            "--hold-timeout",
            "2m",
            "--hold-cmd",
            "npu-hold --",
            "--ready-timeout",
            "30",
            "--grace",
            "2500ms",
            "--reply-timeout",
            "45",
            "--reply-limit",
            "90",
            "--device-freq",
            "/f",
            "--device-temp",
            "/t",
            "--max-memory-growth",
            "2MiB",
            "--ready-limit",
            "90s",
            "--device-memory",
            "/m",
            "--device-memory-unit",
            "KiB",
            "--idle-probe",
            "10s",
            "--depths",
            "1k,256",
            "--depth-replies",
            "2",
            "--max-context",
            "2048",
            "--prefill-floor",
            "100",
            "--depth-floor",
            "10",
            "--json",
            "--",
            "./serve",
            "--port",
            "{port}",
        ];
        let json = serde_json::to_string(&settings_json(&settings_of(&argv))).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"aggregate_floor":40.0,"api_base":"/v3","baseline":"b","#,
                r#""baseline_allow":["kernel","firmware"],"baseline_answers":"exact","#,
                r#""baseline_noise":0.02,"busy_skip":0.2,"concurrency":4,"#,
                r#""context":{"depth_floor":10.0,"prefill_floor":100.0},"continue_body":"{\"x\":1}","depth_replies":2,"depths":[256,1024],"deterministic":true,"device_busy":"fdinfo:busy","#,
                r#""device_freq":"/f","device_memory":"/m","device_memory_unit":"KiB","device_temp":"/t","extra_body":"{\"cache_prompt\":false}","#,
                r#""fast_route":"npu","first_token_ms":300.0,"floor":12.5,"footprint":{"max_memory_growth":2097152.0,"ready_limit_ms":90000.0},"grace":2.5,"#,
                r#""hold":"/tmp/h","hold_cmd":"npu-hold --","hold_timeout":120.0,"idle_probe":10.0,"logprobs":3,"#,
                r#""max_context":2048,"max_drift":0.2,"max_logprob_drift":0.3,"max_regression":0.1,"max_tokens":32,"#,
                r#""metrics_url":"http://127.0.0.1:9/metrics","min_agreement":0.9,"min_speedup":2.0,"#,
                r#""model":"m","no_route_lib":"libcpu","noise_factor":3.0,"out":"o","output":{"loop_share":0.5,"#,
                r#""off":true},"profile":"p.toml","prompts":"p.jsonl","ready_path":"/ready","#,
                r#""ready_timeout":30.0,"reference":"r","reference_noise":["n1","n2"],"reference_reanchor":5,"reference_tie":0.4,"#,
                r#""replies":40,"reply_limit":90.0,"reply_timeout":45.0,"rounds":3,"#,
                r#""route_device":"/dev/accel","route_lib":"libnpu","seed":7,"serve":["./serve","#,
                r#""--port","{port}"],"serve_log":"s.log","slow_route":"cpu","soak":90.0,"#,
                r#""stand_in":true,"temperature":0.0,"url":"http://127.0.0.1:8080","warmup":2}"#,
            )
        );
    }
}
