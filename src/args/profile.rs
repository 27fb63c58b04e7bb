//! Gate profiles: a release gate as one checked-in TOML file.
//!
//! Keys are the `run` command's long flags with underscores (`floor`, `first_token_ms`,
//! `fast_route`, `replies`, `hold`, ...), every one of them but the invocation's own
//! (`--profile`, `--serve-cmd`, and where this run's reports go: `--json`, `--junit`, `--prom`),
//! plus `serve`, the serve command as an array; a test holds the two sets equal. Flags
//! given on the command line override the profile; the profile overrides the defaults. Paths
//! of files a profile ships with (`prompts`, `serve_log`, `device_freq`, `device_temp`,
//! `device_memory`, `baseline`, `reference`, `reference_noise`) are relative to the profile's
//! folder (an absolute path stays as it is).
//! `${NAME}` in the serve command is the environment variable NAME, so a checked-in profile can
//! name a binary whose path differs between machines.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use regex::Regex;
use serde::Deserialize;

use crate::archive::record::AnswerPolicy;
use crate::args::run::{self as run_args, RunSettings};

/// A profile file's contents. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    out: Option<PathBuf>,
    floor: Option<f64>,
    first_token_ms: Option<f64>,
    // "any" or "content", read as the command line reads it.
    first_token_of: Option<String>,
    fast_route: Option<String>,
    slow_route: Option<String>,
    busy_skip: Option<f64>,
    route_lib: Option<String>,
    no_route_lib: Option<String>,
    route_device: Option<String>,
    device_busy: Option<String>,
    baseline: Option<PathBuf>,
    baseline_noise: Option<f64>,
    max_regression: Option<f64>,
    baseline_allow: Option<Vec<String>>,
    // As any integer, for the command line's message about the count (see `replies`).
    concurrency: Option<i64>,
    rounds: Option<i64>,
    metrics_url: Option<String>,
    aggregate_floor: Option<f64>,
    min_speedup: Option<f64>,
    // A duration as humantime writes it: "10m".
    soak: Option<String>,
    max_drift: Option<f64>,
    temperature: Option<f64>,
    // As any integer, for the command line's message about the range.
    seed: Option<i64>,
    deterministic: Option<bool>,
    baseline_answers: Option<String>,
    reference: Option<PathBuf>,
    reference_tie: Option<f64>,
    min_agreement: Option<f64>,
    max_logprob_drift: Option<f64>,
    // As any integer, for the command line's message about the range.
    reference_reanchor: Option<i64>,
    // Each relative to the profile's directory, as `reference` is.
    reference_noise: Option<Vec<PathBuf>>,
    noise_factor: Option<f64>,
    continue_body: Option<toml::Table>,
    // The output line's settings (issue 32): "on" or "off", shares, counts as any integer.
    output_checks: Option<String>,
    loop_share: Option<f64>,
    loop_repeats: Option<i64>,
    stutter_run: Option<i64>,
    not_text_share: Option<f64>,
    same_answer: Option<f64>,
    length_share: Option<f64>,
    stop_margin: Option<f64>,
    url: Option<String>,
    ready_path: Option<String>,
    api_base: Option<String>,
    serve_log: Option<PathBuf>,
    stand_in: Option<bool>,
    prompts: Option<PathBuf>,
    // Read as any integer, so that `replies = 0` or `-1` gets the command line's message about
    // the count rather than a type error.
    replies: Option<i64>,
    warmup: Option<i64>,
    max_tokens: Option<i64>,
    extra_body: Option<toml::Table>,
    // As any integer, for the command line's message about the range.
    logprobs: Option<i64>,
    model: Option<String>,
    hold: Option<PathBuf>,
    hold_timeout: Option<f64>,
    hold_cmd: Option<String>,
    ready_timeout: Option<f64>,
    grace: Option<f64>,
    reply_timeout: Option<f64>,
    reply_limit: Option<f64>,
    device_freq: Option<PathBuf>,
    device_temp: Option<PathBuf>,
    // The footprint's (issue 34): sizes and durations as the flags write them ("1MiB",
    // "10s"), the counter file a path.
    max_memory_growth: Option<String>,
    max_serve_memory: Option<String>,
    max_device_memory: Option<String>,
    // A count as any integer, shares as numbers, the cold reply's limit as the flag writes it
    // ("2s") or a number of ms, as `first_token_ms`; the unit "bytes" or "KiB".
    memory_warm: Option<i64>,
    max_memory_regression: Option<f64>,
    max_startup_regression: Option<f64>,
    cold_first_token_ms: Option<toml::Value>,
    ready_limit: Option<String>,
    idle_probe: Option<String>,
    device_memory: Option<PathBuf>,
    device_memory_unit: Option<String>,
    // Context depth's (issue 35): the depths as the flag writes them ("256,1k,4k") or a list
    // of numbers; counts as any integer.
    depths: Option<toml::Value>,
    depth_replies: Option<i64>,
    max_context: Option<i64>,
    prefill_floor: Option<f64>,
    depth_floor: Option<f64>,
    // The service level (issue 37): the targets as the flag writes them ("ttft=600ms") or a
    // table of durations (`{ ttft = "600ms" }`); the share a number.
    slo: Option<toml::Value>,
    min_goodput: Option<f64>,
    serve: Option<Vec<String>>,
}

/// The most of a profile read, bytes (issue 30): a profile is a few dozen lines.
pub const PROFILE_MAX_BYTES: u64 = 1 << 20;

/// Read a profile file: a regular file within [`PROFILE_MAX_BYTES`], opened without blocking.
pub fn load(path: &Path) -> Result<Profile> {
    use crate::archive::safe_open::{read_capped, OpenError};
    // One line, naming the path once: the system's word, or what the path is instead.
    let bytes = read_capped(path, PROFILE_MAX_BYTES).map_err(|e| match e {
        OpenError::Io(_, why) => {
            anyhow!("failed to read the profile {}: {why}", path.display())
        }
        other => anyhow!("the profile: {other}"),
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("the profile {} is not UTF-8 text", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        anyhow!(
            "the profile {} is not valid: {}",
            path.display(),
            toml_problem(&text, &e)
        )
    })
}

/// A TOML error as one line of bounded length: where it is (line and column) and what the parser
/// said, without the source excerpt it draws (a line of 10,000 brackets once made a 10 KB
/// message).
fn toml_problem(text: &str, e: &toml::de::Error) -> String {
    const MOST: usize = 200;
    let message: String = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    let mut message: String = message.chars().take(MOST).collect();
    if e.message().chars().count() > MOST {
        message.push_str("...");
    }
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// `args` with every setting the command line left unset taken from `profile`.
/// `given(flag)` says whether the command line set that flag (its id, e.g. `first_token_ms`).
pub fn apply(
    args: RunSettings,
    profile: Profile,
    dir: &Path,
    given: impl Fn(&str) -> bool,
) -> Result<RunSettings> {
    let mut a = Applying {
        args,
        profile,
        dir,
        given: &given,
    };
    // The order decides which of two bad values a profile is refused for.
    take_floors_and_counts(&mut a)?;
    take_route_and_baseline_limits(&mut a);
    take_bursts(&mut a)?;
    take_drift_and_sampling(&mut a)?;
    take_reference_bounds(&mut a)?;
    take_output_checks(&mut a)?;
    take_footprint(&mut a)?;
    take_context(&mut a)?;
    take_slo(&mut a)?;
    take_launch_and_time_limits(&mut a)?;
    take_files(&mut a)?;
    take_serve(&mut a)?;
    Ok(a.args)
}

/// A profile being applied: the settings so far, the profile's keys not yet taken, its folder
/// (what its relative paths are relative to) and which flags the command line set.
struct Applying<'a> {
    args: RunSettings,
    profile: Profile,
    dir: &'a Path,
    given: &'a dyn Fn(&str) -> bool,
}

/// A duration key's seconds, within the same bounds as the command line's, so a profile cannot
/// ask for what a flag cannot (`grace = 1e30` once panicked converting to a Duration).
fn bounded_seconds(key: &str, v: f64) -> Result<Duration> {
    run_args::seconds(v).map_err(|e| anyhow!("{key} in the profile: {e}"))
}

/// A count key's value, within the same bounds as the command line's (`check`).
fn bounded_count(key: &str, v: i64, check: fn(i64) -> Result<u32, String>) -> Result<u32> {
    check(v).map_err(|e| anyhow!("{key} in the profile: {e}"))
}

/// Take the key `$field` of the profile `$a` is applying, unless the command line set it: as
/// it is, `optional` (an optional setting), `count`, `seconds` or `optional seconds`.
macro_rules! take {
    ($a:ident, $field:ident) => {
        if !($a.given)(stringify!($field)) {
            if let Some(v) = $a.profile.$field.take() {
                $a.args.$field = v;
            }
        }
    };
    ($a:ident, $field:ident, optional) => {
        if !($a.given)(stringify!($field)) && $a.profile.$field.is_some() {
            $a.args.$field = $a.profile.$field.take();
        }
    };
    ($a:ident, $field:ident, count) => {
        if !($a.given)(stringify!($field)) {
            if let Some(v) = $a.profile.$field {
                $a.args.$field = bounded_count(stringify!($field), v, run_args::$field)?;
            }
        }
    };
    ($a:ident, $field:ident, optional seconds) => {
        if !($a.given)(stringify!($field)) {
            if let Some(v) = $a.profile.$field {
                $a.args.$field = Some(bounded_seconds(stringify!($field), v)?);
            }
        }
    };
    ($a:ident, $field:ident, seconds) => {
        if !($a.given)(stringify!($field)) {
            if let Some(v) = $a.profile.$field {
                $a.args.$field = bounded_seconds(stringify!($field), v)?;
            }
        }
    };
}

/// The floor, the first-token limit, --stand-in, and the counts of replies, tokens and
/// logprobs.
fn take_floors_and_counts(a: &mut Applying<'_>) -> Result<()> {
    take!(a, floor);
    take!(a, first_token_ms);
    if !(a.given)("first_token_of") {
        if let Some(of) = a.profile.first_token_of.take() {
            a.args.first_token_of = run_args::parse_first_token_of(&of)
                .map_err(|e| anyhow!("first_token_of in the profile: {e}"))?;
        }
    }
    take!(a, stand_in);
    take!(a, replies, count);
    take!(a, warmup, count);
    take!(a, max_tokens, count);
    if !(a.given)("logprobs") {
        if let Some(k) = a.profile.logprobs {
            a.args.logprobs = Some(bounded_count("logprobs", k, run_args::logprobs)?);
        }
    }
    Ok(())
}

/// The output directory, the route patterns and evidence, the busy-box policy and the
/// baseline's limits.
fn take_route_and_baseline_limits(a: &mut Applying<'_>) {
    take!(a, out, optional);
    take!(a, fast_route, optional);
    take!(a, slow_route, optional);
    take!(a, busy_skip, optional);
    take!(a, route_lib, optional);
    take!(a, no_route_lib, optional);
    take!(a, route_device, optional);
    take!(a, device_busy, optional);
    take!(a, baseline_noise, optional);
    take!(a, max_regression, optional);
    take!(a, baseline_allow);
}

/// The concurrent bursts and what they are held to.
fn take_bursts(a: &mut Applying<'_>) -> Result<()> {
    take!(a, concurrency, count);
    if !(a.given)("rounds") {
        if let Some(v) = a.profile.rounds {
            a.args.rounds = Some(bounded_count("rounds", v, run_args::rounds)?);
        }
    }
    take!(a, metrics_url, optional);
    take!(a, aggregate_floor, optional);
    take!(a, min_speedup, optional);
    Ok(())
}

/// Drift, determinism, the sampling sent, the soak, and the baseline and reference runs (paths
/// in the profile's folder).
fn take_drift_and_sampling(a: &mut Applying<'_>) -> Result<()> {
    take!(a, max_drift, optional);
    take!(a, deterministic);
    if !(a.given)("temperature") {
        if let Some(t) = a.profile.temperature {
            a.args.temperature = Some(
                run_args::temperature(t).map_err(|e| anyhow!("temperature in the profile: {e}"))?,
            );
        }
    }
    if !(a.given)("seed") {
        if let Some(n) = a.profile.seed {
            a.args.seed =
                Some(run_args::seed(n.into()).map_err(|e| anyhow!("seed in the profile: {e}"))?);
        }
    }
    if !(a.given)("baseline_answers") {
        if let Some(p) = a.profile.baseline_answers.take() {
            a.args.baseline_answers = Some(
                AnswerPolicy::parse(&p)
                    .map_err(|e| anyhow!("baseline_answers in the profile: {e}"))?,
            );
        }
    }
    if !(a.given)("soak") {
        if let Some(d) = a.profile.soak.take() {
            a.args.soak =
                Some(run_args::soak(&d).map_err(|e| anyhow!("soak in the profile: {e}"))?);
        }
    }
    if !(a.given)("baseline") {
        if let Some(p) = a.profile.baseline.take() {
            a.args.baseline = Some(a.dir.join(p));
        }
    }
    if !(a.given)("reference") {
        if let Some(p) = a.profile.reference.take() {
            a.args.reference.reference = Some(a.dir.join(p));
        }
    }
    if !(a.given)("reference_noise") {
        if let Some(dirs) = a.profile.reference_noise.take() {
            a.args.reference.reference_noise = dirs.into_iter().map(|p| a.dir.join(p)).collect();
        }
    }
    Ok(())
}

/// What the reference line holds the tokens to, within the same bounds as the flags'
/// (args::reference).
fn take_reference_bounds(a: &mut Applying<'_>) -> Result<()> {
    use crate::args::reference;
    let bounded = |key: &str, v: Option<f64>, check: fn(f64) -> Result<f64, String>| {
        v.map(|v| check(v).map_err(|e| anyhow!("{key} in the profile: {e}")))
            .transpose()
    };
    if !(a.given)("reference_tie") {
        if let Some(v) = bounded("reference_tie", a.profile.reference_tie, reference::tie)? {
            a.args.reference.reference_tie = Some(v);
        }
    }
    if !(a.given)("min_agreement") {
        if let Some(v) = bounded(
            "min_agreement",
            a.profile.min_agreement,
            reference::agreement_in_bounds,
        )? {
            a.args.reference.min_agreement = Some(v);
        }
    }
    if !(a.given)("max_logprob_drift") {
        if let Some(v) = bounded(
            "max_logprob_drift",
            a.profile.max_logprob_drift,
            reference::drift,
        )? {
            a.args.reference.max_logprob_drift = Some(v);
        }
    }
    if !(a.given)("noise_factor") {
        if let Some(v) = bounded(
            "noise_factor",
            a.profile.noise_factor,
            reference::noise_factor,
        )? {
            a.args.reference.noise_factor = Some(v);
        }
    }
    if !(a.given)("reference_reanchor") {
        if let Some(n) = a.profile.reference_reanchor {
            a.args.reference.reference_reanchor = Some(
                reference::reanchor(n)
                    .map_err(|e| anyhow!("reference_reanchor in the profile: {e}"))?,
            );
        }
    }
    Ok(())
}

/// The output line's settings (issue 32): on or off, its shares and its counts.
/// The footprint's keys, held to the flags' own parsers.
fn take_footprint(a: &mut Applying<'_>) -> Result<()> {
    use crate::archive::byte_size::parse_bytes;
    use crate::args::footprint as fp;
    let key = |k: &str, e: String| anyhow!("{k} in the profile: {e}");
    let f = &mut a.args.footprint;
    for (name, value, slot) in [
        (
            "max_memory_growth",
            a.profile.max_memory_growth.take(),
            &mut f.max_memory_growth,
        ),
        (
            "max_serve_memory",
            a.profile.max_serve_memory.take(),
            &mut f.max_serve_memory,
        ),
        (
            "max_device_memory",
            a.profile.max_device_memory.take(),
            &mut f.max_device_memory,
        ),
    ] {
        if let (false, Some(v)) = ((a.given)(name), value) {
            *slot = Some(parse_bytes(&v).map_err(|e| key(name, e))?);
        }
    }
    if !(a.given)("memory_warm") {
        if let Some(v) = a.profile.memory_warm.take() {
            f.memory_warm =
                Some(fp::parse_memory_warm(&v.to_string()).map_err(|e| key("memory_warm", e))?);
        }
    }
    for (name, value, slot) in [
        (
            "max_memory_regression",
            a.profile.max_memory_regression.take(),
            &mut f.max_memory_regression,
        ),
        (
            "max_startup_regression",
            a.profile.max_startup_regression.take(),
            &mut f.max_startup_regression,
        ),
    ] {
        if let (false, Some(v)) = ((a.given)(name), value) {
            *slot = Some(fp::share_above_zero(v).map_err(|e| key(name, e))?);
        }
    }
    if !(a.given)("ready_limit") {
        if let Some(v) = a.profile.ready_limit.take() {
            let ms = run_args::parse_millis(&v).map_err(|e| key("ready_limit", e))?;
            if !(ms.is_finite() && ms > 0.0) {
                bail!("ready_limit in the profile: {v:?} is not a duration above 0 (e.g. 90s)");
            }
            f.ready_limit = Some(ms);
        }
    }
    if !(a.given)("cold_first_token_ms") {
        if let Some(v) = a.profile.cold_first_token_ms.take() {
            // A number is milliseconds, as the flag's bare number and `first_token_ms` are.
            let text = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(x) => x.to_string(),
                other => format!("a {}", other.type_str()),
            };
            f.cold_first_token_ms =
                Some(fp::parse_positive_millis(&text).map_err(|e| key("cold_first_token_ms", e))?);
        }
    }
    take_device_memory(a)
}

/// The idle probe, and the device's memory counter and its unit (a unit needs the counter, as
/// the flag `requires` it).
fn take_device_memory(a: &mut Applying<'_>) -> Result<()> {
    let key = |k: &str, e: String| anyhow!("{k} in the profile: {e}");
    let r = &mut a.args.footprint_run;
    if !(a.given)("idle_probe") {
        if let Some(v) = a.profile.idle_probe.take() {
            let s = run_args::duration_in(&v, run_args::BareUnit::Seconds)
                .map_err(|e| key("idle_probe", e))?;
            r.idle_probe = Some(
                crate::args::footprint::idle_probe_in_bounds(&v, s)
                    .map_err(|e| key("idle_probe", e))?,
            );
        }
    }
    // Absolute paths (sysfs) stay as they are; a relative one is the profile's folder's.
    if !(a.given)("device_memory") {
        if let Some(p) = a.profile.device_memory.take() {
            r.device_memory = Some(a.dir.join(p));
        }
    }
    if !(a.given)("device_memory_unit") {
        if let Some(u) = a.profile.device_memory_unit.take() {
            use clap::ValueEnum;
            r.device_memory_unit = crate::args::footprint::MemoryUnit::from_str(&u, false)
                .map_err(|_| {
                    anyhow!("device_memory_unit in the profile is \"bytes\" or \"KiB\" (got {u:?})")
                })?;
            if r.device_memory.is_none() {
                bail!("device_memory_unit in the profile says what device_memory's number counts: give device_memory too");
            }
        }
    }
    Ok(())
}

/// The service level's keys (issue 37), held to the flags' own parsers: `slo` as the flag
/// writes it, or a table of a duration a name.
fn take_slo(a: &mut Applying<'_>) -> Result<()> {
    use crate::args::slo::{parse_min_goodput, parse_slo};
    let key = |k: &str, e: String| anyhow!("{k} in the profile: {e}");
    if !(a.given)("slo") {
        if let Some(v) = a.profile.slo.take() {
            let text = match &v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Table(t) => t
                    .iter()
                    .map(|(name, d)| match d {
                        toml::Value::String(d) => Ok(format!("{name}={d}")),
                        other => Err(key("slo", format!("{name} is a {}: give a duration with its unit, e.g. {name} = \"600ms\"", other.type_str()))),
                    })
                    .collect::<Result<Vec<_>>>()?
                    .join(","),
                other => bail!("slo in the profile is a {}: give the targets as the flag does (slo = \"ttft=600ms,tpot=50ms\") or as a table (slo = {{ ttft = \"600ms\" }})", other.type_str()),
            };
            a.args.slo.slo = Some(parse_slo(&text).map_err(|e| key("slo", e))?);
        }
    }
    if !(a.given)("min_goodput") {
        if let Some(v) = a.profile.min_goodput.take() {
            a.args.slo.min_goodput =
                Some(parse_min_goodput(&v.to_string()).map_err(|e| key("min_goodput", e))?);
        }
    }
    Ok(())
}

/// Context depth's keys (issue 35), held to the flags' own parsers.
fn take_context(a: &mut Applying<'_>) -> Result<()> {
    use crate::args::context as ctx;
    let key = |k: &str, e: String| anyhow!("{k} in the profile: {e}");
    let r = &mut a.args.context_run;
    if !(a.given)("depths") {
        if let Some(v) = a.profile.depths.take() {
            // A depth of another type is said as the flag's parser says a word it cannot read.
            let one = |v: &toml::Value| match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                other => format!("a {}", other.type_str()),
            };
            let list = match &v {
                toml::Value::Array(items) => items.iter().map(one).collect::<Vec<_>>().join(","),
                other => one(other),
            };
            r.depths = Some(ctx::parse_depths(&list).map_err(|e| key("depths", e))?);
        }
    }
    if !(a.given)("depth_replies") {
        if let Some(v) = a.profile.depth_replies.take() {
            r.depth_replies = Some(
                ctx::parse_depth_replies(&v.to_string()).map_err(|e| key("depth_replies", e))?,
            );
        }
    }
    if !(a.given)("max_context") {
        if let Some(v) = a.profile.max_context.take() {
            r.max_context =
                Some(ctx::parse_max_context(&v.to_string()).map_err(|e| key("max_context", e))?);
        }
    }
    let f = &mut a.args.context;
    for (name, value, slot) in [
        (
            "prefill_floor",
            a.profile.prefill_floor.take(),
            &mut f.prefill_floor,
        ),
        (
            "depth_floor",
            a.profile.depth_floor.take(),
            &mut f.depth_floor,
        ),
    ] {
        if let (false, Some(v)) = ((a.given)(name), value) {
            *slot = Some(ctx::parse_rate(&v.to_string()).map_err(|e| key(name, e))?);
        }
    }
    Ok(())
}

fn take_output_checks(a: &mut Applying<'_>) -> Result<()> {
    use crate::args::output_checks::{self as out, OutputChecks};
    let given = a.given;
    let profile = &a.profile;
    let o = &mut a.args.output_checks;
    if !given("output_checks") {
        o.output_checks = match profile.output_checks.as_deref() {
            None => o.output_checks,
            Some("on") => Some(OutputChecks::On),
            Some("off") => Some(OutputChecks::Off),
            Some(other) => {
                bail!("output_checks in the profile is \"on\" or \"off\" (got {other:?})")
            }
        };
    }
    let share = |key: &str, v: Option<f64>| {
        v.map(|v| out::share_in_bounds(v).map_err(|e| anyhow!("{key} in the profile is {e}")))
            .transpose()
    };
    let count = |key: &str, v: Option<i64>| {
        v.map(|v| out::count(v).map_err(|e| anyhow!("{key} in the profile is {e}")))
            .transpose()
    };
    for (key, slot, v) in [
        ("loop_share", &mut o.loop_share, profile.loop_share),
        (
            "not_text_share",
            &mut o.not_text_share,
            profile.not_text_share,
        ),
        ("same_answer", &mut o.same_answer, profile.same_answer),
        ("length_share", &mut o.length_share, profile.length_share),
        ("stop_margin", &mut o.stop_margin, profile.stop_margin),
    ] {
        if !given(key) {
            if let Some(x) = share(key, v)? {
                *slot = Some(x);
            }
        }
    }
    for (key, slot, v) in [
        ("loop_repeats", &mut o.loop_repeats, profile.loop_repeats),
        ("stutter_run", &mut o.stutter_run, profile.stutter_run),
    ] {
        if !given(key) {
            if let Some(n) = count(key, v)? {
                *slot = Some(n);
            }
        }
    }
    Ok(())
}

/// The request's extras for a continuation, where the serve is and how it is asked, the
/// model, the hold, and the time limits.
fn take_launch_and_time_limits(a: &mut Applying<'_>) -> Result<()> {
    // A profile's `[continue_body]` says how its serve continues a message (vLLM's needs
    // `continue_final_message`): the profile stands for the serve in runs with a reference and
    // without one, and a run without one sends no re-anchor, so the table waits for a reference
    // rather than refusing the profile (the flag alone is refused without --reference).
    if !(a.given)("continue_body") && a.args.reference.reference.is_some() {
        if let Some(table) = a.profile.continue_body.take() {
            a.args.continue_body = Some(serde_json::to_string(&table)?);
        }
    }
    take!(a, url, optional);
    if !(a.given)("ready_path") {
        if let Some(p) = a.profile.ready_path.take() {
            a.args.ready_path = Some(
                run_args::url_path(&p).map_err(|e| anyhow!("ready_path in the profile: {e}"))?,
            );
        }
    }
    if !(a.given)("api_base") {
        if let Some(p) = a.profile.api_base.take() {
            a.args.api_base =
                run_args::url_path(&p).map_err(|e| anyhow!("api_base in the profile: {e}"))?;
        }
    }
    take!(a, model, optional);
    take!(a, hold, optional);
    take!(a, hold_cmd, optional);
    take!(a, hold_timeout, seconds);
    take!(a, ready_timeout, seconds);
    take!(a, grace, seconds);
    take!(a, reply_timeout, seconds);
    take!(a, reply_limit, optional seconds);
    Ok(())
}

/// The files a profile ships with, relative to its folder (an absolute path, as sysfs's, stays
/// as it is), and the request's extra body.
fn take_files(a: &mut Applying<'_>) -> Result<()> {
    if !(a.given)("prompts") {
        if let Some(p) = a.profile.prompts.take() {
            a.args.prompts = Some(a.dir.join(p));
        }
    }
    if !(a.given)("serve_log") {
        if let Some(p) = a.profile.serve_log.take() {
            a.args.serve_log = Some(a.dir.join(p));
        }
    }
    // Absolute paths (sysfs) stay as they are; a relative one is the profile's folder's.
    if !(a.given)("device_freq") {
        if let Some(p) = a.profile.device_freq.take() {
            a.args.device_freq = Some(a.dir.join(p));
        }
    }
    if !(a.given)("device_temp") {
        if let Some(p) = a.profile.device_temp.take() {
            a.args.device_temp = Some(a.dir.join(p));
        }
    }
    if !(a.given)("extra_body") {
        if let Some(table) = a.profile.extra_body.take() {
            a.args.extra_body = Some(serde_json::to_string(&table)?);
        }
    }
    Ok(())
}

/// The serve command, its `${NAME}`s expanded; refused beside --stand-in.
fn take_serve(a: &mut Applying<'_>) -> Result<()> {
    if a.args.stand_in && a.profile.serve.is_some() && !(a.given)("serve") {
        // After --stand-in, the words of `serve` would be read as stand-in options.
        bail!("the profile names a serve command and --stand-in asks for the built-in serve: give one of them");
    }
    if !(a.given)("serve") {
        if let Some(serve) = a.profile.serve.take() {
            a.args.serve = serve
                .iter()
                .map(|arg| expand_env(arg))
                .collect::<Result<_>>()?;
        }
    }
    Ok(())
}

/// `arg` with each `${NAME}` replaced by the environment variable NAME.
fn expand_env(arg: &str) -> Result<String> {
    let var = Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}").expect("a valid pattern");
    let mut missing = None;
    let out = var.replace_all(arg, |c: &regex::Captures<'_>| {
        std::env::var(&c[1]).unwrap_or_else(|_| {
            missing = Some(c[1].to_string());
            String::new()
        })
    });
    if let Some(name) = missing {
        bail!("the profile's serve command uses ${{{name}}}, which is not set in the environment");
    }
    Ok(out.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// A profile that is not TOML, or not a profile, is one line of bounded length naming
    /// where: a 10,000-bracket line once made a 10 KB message of its excerpt (issue 30).
    #[test]
    fn a_bad_profile_is_one_short_line_saying_where() {
        let d = tempfile::tempdir().unwrap();
        let said = |name: &str, text: &str| {
            let path = d.path().join(name);
            std::fs::write(&path, text).unwrap();
            format!("{:#}", load(&path).unwrap_err())
        };
        let deep = said(
            "deep.toml",
            &format!("x = {}{}", "[".repeat(5000), "]".repeat(5000)),
        );
        assert_eq!(deep.lines().count(), 1, "{deep}");
        assert!(deep.len() < 400, "{} bytes: {deep}", deep.len());
        assert!(deep.contains("is not valid: line 1, column "), "{deep}");
        let typed = said("typed.toml", "\n\nfloor = \"fast\"\n");
        assert!(
            typed.ends_with(
                "is not valid: line 3, column 9: invalid type: string \"fast\", expected f64"
            ),
            "{typed}"
        );
        let long = said("long.toml", &format!("{} = 1", "k".repeat(5000)));
        assert_eq!(long.lines().count(), 1, "{long}");
        assert!(long.len() < 400, "{} bytes: {long}", long.len());
    }

    #[test]
    fn the_output_keys_are_read_and_bounded() {
        let profile: Profile = toml::from_str(
            "output_checks = \"off\"\nloop_share = 0.7\nstutter_run = 6\nlength_share = 0.2\n",
        )
        .unwrap();
        let merged = apply(run_args(&["x", "run"]), profile, Path::new("/p"), |_| false).unwrap();
        let o = merged.output_checks.over(Default::default());
        assert!(o.off);
        assert_eq!(
            (o.loop_share, o.stutter_run, o.length_share),
            (Some(0.7), Some(6), Some(0.2))
        );
        for (text, said) in [
            (
                "output_checks = \"maybe\"\n",
                "output_checks in the profile is \"on\" or \"off\"",
            ),
            (
                "loop_share = 1.5\n",
                "loop_share in the profile is a share from 0 to 1",
            ),
            (
                "stutter_run = 1\n",
                "stutter_run in the profile is a count from 2 to 100",
            ),
        ] {
            let bad: Profile = toml::from_str(text).unwrap();
            let e = apply(run_args(&["x", "run"]), bad, Path::new("/p"), |_| false).unwrap_err();
            assert!(format!("{e:#}").contains(said), "{text}: {e:#}");
        }
    }

    #[test]
    fn the_re_anchor_keys_are_read_and_bounded() {
        let text = "reference_reanchor = 3\n[continue_body]\ncontinue_final_message = true\nadd_generation_prompt = false\n";
        let with_reference = |args: &[&str]| {
            let profile: Profile = toml::from_str(text).unwrap();
            apply(run_args(args), profile, Path::new("/p"), |k| {
                k == "reference"
            })
            .unwrap()
        };
        let merged = with_reference(&["x", "run", "--reference", "/r"]);
        assert_eq!(merged.reference.reference_reanchor, Some(3));
        assert_eq!(
            merged.continue_body.as_deref(),
            Some(r#"{"add_generation_prompt":false,"continue_final_message":true}"#)
        );
        // Without a reference the table waits: the profile of a serve that needs it (vLLM's)
        // runs without one, where the flag alone would be refused.
        let profile: Profile = toml::from_str(text).unwrap();
        let alone = apply(run_args(&["x", "run"]), profile, Path::new("/p"), |_| false).unwrap();
        assert_eq!(alone.continue_body, None);
        let profile: Profile = toml::from_str(&format!("reference = \"ref\"\n{text}")).unwrap();
        let from_profile =
            apply(run_args(&["x", "run"]), profile, Path::new("/p"), |_| false).unwrap();
        assert!(
            from_profile.continue_body.is_some(),
            "a profile's reference counts"
        );
        let over: Profile = toml::from_str("reference_reanchor = 65\n").unwrap();
        let e = apply(run_args(&["x", "run"]), over, Path::new("/p"), |_| false).unwrap_err();
        assert!(
            format!("{e:#}")
                .contains("reference_reanchor in the profile: --reference-reanchor is a count"),
            "{e:#}"
        );
    }

    #[test]
    fn the_first_token_of_key_is_read_refused_in_one_line_and_the_command_line_wins() {
        use crate::archive::record::FirstTokenOf;
        let content = || toml::from_str::<Profile>("first_token_of = \"content\"\n").unwrap();
        let merged = apply(run_args(&["x", "run"]), content(), Path::new("/p"), |_| {
            false
        })
        .unwrap();
        assert_eq!(merged.first_token_of, FirstTokenOf::Content);
        assert_eq!(run_args(&["x", "run"]).first_token_of, FirstTokenOf::Any);
        let args = run_args(&["x", "run", "--first-token-of", "any"]);
        let merged = apply(args, content(), Path::new("/p"), |id| {
            id == "first_token_of"
        })
        .unwrap();
        assert_eq!(
            merged.first_token_of,
            FirstTokenOf::Any,
            "the command line wins"
        );
        let bad: Profile = toml::from_str("first_token_of = \"other\"\n").unwrap();
        let e = apply(run_args(&["x", "run"]), bad, Path::new("/p"), |_| false).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.starts_with("first_token_of in the profile: \"other\" is not a first token"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    fn run_args(argv: &[&str]) -> RunSettings {
        match Cli::parse_from(argv).command {
            Command::Run(r) => RunSettings::from(*r),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_line_wins_over_the_profile_and_the_profile_over_defaults() {
        let profile: Profile = toml::from_str(
            "floor = 80.0\nfirst_token_ms = 250\nreplies = 5\ngrace = 2.5\nprompts = \"p.jsonl\"\n\
             fast_route = \"route: npu-fast\"\nserve = [\"./serve\", \"--port\", \"{port}\"]\n\
             [extra_body]\ncache_prompt = false\n",
        )
        .unwrap();
        let args = run_args(&["x", "run", "--floor", "70"]);
        let given = |id: &str| id == "floor";
        let merged = apply(args, profile, Path::new("/etc/gates"), given).unwrap();
        assert_eq!(merged.floor, 70.0, "the command line wins");
        assert_eq!(merged.first_token_ms, 250.0);
        assert_eq!(merged.replies, 5);
        assert_eq!(merged.grace, Duration::from_millis(2500));
        assert_eq!(merged.prompts, Some(PathBuf::from("/etc/gates/p.jsonl")));
        assert_eq!(merged.fast_route.as_deref(), Some("route: npu-fast"));
        assert_eq!(merged.serve, vec!["./serve", "--port", "{port}"]);
        assert_eq!(
            merged.extra_body.as_deref(),
            Some(r#"{"cache_prompt":false}"#)
        );
        assert_eq!(merged.max_tokens, 64, "the default where neither says");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(toml::from_str::<Profile>("flor = 60").is_err());
        assert!(toml::from_str::<Profile>("floor = \"fast\"").is_err());
        // Each is refused with the key and the bounds, never a panic: values the command line
        // refuses are refused from a profile too.
        for (text, key, says) in [
            ("grace = -1", "grace", "out of range"),
            ("grace = 1e30", "grace", "at most 86400"),
            ("grace = 1e19", "grace", "at most 86400"),
            ("ready_timeout = 1e300", "ready_timeout", "at most 86400"),
            ("hold_timeout = nan", "hold_timeout", "out of range"),
            ("reply_timeout = 0", "reply_timeout", "out of range"),
            ("replies = 0", "replies", "1 to 10000"),
            ("replies = -1", "replies", "1 to 10000"),
            ("replies = 10001", "replies", "1 to 10000"),
            ("max_tokens = 0", "max_tokens", "out of range"),
            ("warmup = -1", "warmup", "0 to 100"),
            ("warmup = 101", "warmup", "0 to 100"),
            ("max_tokens = 5000000000", "max_tokens", "out of range"),
        ] {
            let profile: Profile = toml::from_str(text).unwrap();
            let e =
                apply(run_args(&["x", "run"]), profile, Path::new("."), |_| false).expect_err(text);
            let e = e.to_string();
            assert!(e.contains(key) && e.contains(says), "{text}: {e}");
        }
        let profile: Profile =
            toml::from_str("grace = 86400\nreplies = 10000\nwarmup = 100").unwrap();
        let merged = apply(run_args(&["x", "run"]), profile, Path::new("."), |_| false).unwrap();
        assert_eq!(
            (merged.grace.as_secs(), merged.replies, merged.warmup),
            (86_400, 10_000, 100)
        );
        assert_eq!(
            run_args(&["x", "run"]).warmup,
            0,
            "no warm-ups unless asked"
        );
    }

    /// The default settings with the profile `text` (in folder `dir`) laid over them, no flag
    /// given.
    fn applied(text: &str, dir: &str) -> Result<RunSettings> {
        let profile: Profile = toml::from_str(text).unwrap();
        apply(run_args(&["x", "run"]), profile, Path::new(dir), |_| false)
    }

    #[test]
    fn the_context_keys_are_held_to_the_flags_parsers() {
        for text in [
            "depths = \"4k,256\"\ndepth_replies = 2\nmax_context = 2048\nprefill_floor = 500\ndepth_floor = 20.5\n",
            "depths = [4096, \"256\"]\ndepth_replies = 2\nmax_context = 2048\nprefill_floor = 500.0\ndepth_floor = 20.5\n",
        ] {
            let merged = applied(text, ".").unwrap();
            let c = &merged.context_run;
            assert_eq!(
                (c.depths.as_ref().unwrap().0.as_slice(), c.depth_replies, c.max_context),
                (&[256, 4096][..], Some(2), Some(2048)),
                "{text}"
            );
            assert_eq!(
                (merged.context.prefill_floor, merged.context.depth_floor),
                (Some(500.0), Some(20.5))
            );
        }
        for (text, says) in [
            (
                "depths = \"0\"",
                "depths in the profile: a depth of \"0\" asks no prompt",
            ),
            (
                "depths = [256, 1.5]",
                "depths in the profile: \"a float\" is not a depth",
            ),
            (
                "depths = true",
                "depths in the profile: \"a boolean\" is not a depth",
            ),
            (
                "depth_replies = 0",
                "depth_replies in the profile: \"0\" is not a count",
            ),
            ("max_context = 0", "max_context in the profile"),
            (
                "prefill_floor = -1",
                "prefill_floor in the profile: \"-1\" is not a rate",
            ),
            ("depth_floor = 0", "depth_floor in the profile"),
        ] {
            let e = applied(text, ".").unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn the_footprint_keys_are_held_to_the_flags_parsers() {
        let merged = applied(
            "idle_probe = \"10s\"\nmax_memory_growth = \"2MiB\"\nready_limit = \"90s\"\ndevice_memory = \"/sys/class/accel/accel0/device/npu_memory_utilization\"\n",
            "/etc/gates",
        )
        .unwrap();
        assert_eq!(
            merged.footprint_run.idle_probe,
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            merged.footprint.max_memory_growth,
            Some(2.0 * 1024.0 * 1024.0)
        );
        assert_eq!(merged.footprint.ready_limit, Some(90_000.0));
        assert_eq!(
            merged.footprint_run.device_memory,
            Some(PathBuf::from(
                "/sys/class/accel/accel0/device/npu_memory_utilization"
            ))
        );
        for (text, says) in [
            (
                "idle_probe = \"2d\"\n",
                "idle_probe in the profile: \"2d\" is over a day",
            ),
            (
                "max_memory_growth = \"1\"\n",
                "max_memory_growth in the profile: \"1\" is not a size",
            ),
            (
                "max_memory_growth = \"-1MiB\"\n",
                "max_memory_growth in the profile",
            ),
            ("ready_limit = \"0s\"\n", "ready_limit in the profile"),
        ] {
            let e = applied(text, "/").unwrap_err().to_string();
            assert!(e.starts_with(says), "{text}: {e}");
        }
    }

    #[test]
    fn the_footprint_limits_every_flag_has_are_keys_too() {
        // These six were flags a profile could not set (issue 53: profiles and flags drifted).
        let merged = applied(
            "max_device_memory = \"3GiB\"\nmemory_warm = 5\nmax_memory_regression = 0.2\n\
             max_startup_regression = 0.75\ncold_first_token_ms = \"2s\"\n\
             device_memory = \"mem\"\ndevice_memory_unit = \"KiB\"\n",
            "/etc/gates",
        )
        .unwrap();
        let f = &merged.footprint;
        assert_eq!(f.max_device_memory, Some(3.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(f.memory_warm, Some(5));
        assert_eq!(f.max_memory_regression, Some(0.2));
        assert_eq!(f.max_startup_regression, Some(0.75));
        assert_eq!(f.cold_first_token_ms, Some(2000.0));
        let r = &merged.footprint_run;
        assert_eq!(r.device_memory, Some(PathBuf::from("/etc/gates/mem")));
        assert_eq!(
            r.device_memory_unit,
            crate::args::footprint::MemoryUnit::Kib
        );
        // A number is milliseconds, as first_token_ms's is.
        let ms = applied("cold_first_token_ms = 800\n", "/").unwrap();
        assert_eq!(ms.footprint.cold_first_token_ms, Some(800.0));
        for (text, says) in [
            (
                "max_device_memory = \"1\"\n",
                "max_device_memory in the profile: \"1\" is not a size",
            ),
            (
                "memory_warm = 1001\n",
                "memory_warm in the profile: \"1001\" is not a count",
            ),
            (
                "max_memory_regression = 0.0\n",
                "max_memory_regression in the profile: a share above 0",
            ),
            (
                "max_startup_regression = -1.0\n",
                "max_startup_regression in the profile: a share above 0",
            ),
            (
                "cold_first_token_ms = \"0s\"\n",
                "cold_first_token_ms in the profile: \"0s\" is not a duration above 0",
            ),
            (
                "cold_first_token_ms = true\n",
                "cold_first_token_ms in the profile: \"a boolean\"",
            ),
            (
                "device_memory = \"m\"\ndevice_memory_unit = \"MB\"\n",
                "device_memory_unit in the profile is \"bytes\" or \"KiB\" (got \"MB\")",
            ),
            (
                "device_memory_unit = \"KiB\"\n",
                "device_memory_unit in the profile says what device_memory's number counts",
            ),
        ] {
            let e = applied(text, "/").unwrap_err().to_string();
            assert!(e.starts_with(says), "{text}: {e}");
        }
        // The command line wins over each, as over every key.
        let cli = apply(
            run_args(&["x", "run", "--memory-warm", "7"]),
            toml::from_str("memory_warm = 5\n").unwrap(),
            Path::new("/"),
            |k| k == "memory_warm",
        )
        .unwrap();
        assert_eq!(cli.footprint.memory_warm, Some(7));
    }

    /// Every flag of `run` is a profile key of the same name (underscores for hyphens), but
    /// those that are the invocation's own: which profile, the serve as one string, and where
    /// this run's reports go. A flag added without its key fails here, naming it.
    #[test]
    fn every_run_flag_is_a_profile_key() {
        use clap::CommandFactory;
        const NOT_KEYS: [&str; 6] = ["profile", "serve_cmd", "json", "junit", "prom", "help"];
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("a run command");
        let mut missing = Vec::new();
        let mut seen = 0;
        for arg in run.get_arguments() {
            let id = arg.get_id().as_str();
            if NOT_KEYS.contains(&id) {
                continue;
            }
            seen += 1;
            // A key the profile lacks is serde's "unknown field"; one it has but of another
            // type is a type error, which says the key exists.
            if let Err(e) = toml::from_str::<Profile>(&format!("{id} = 0")) {
                if e.message().contains("unknown field") {
                    missing.push(id.to_string());
                }
            }
        }
        assert!(
            seen > 60,
            "read {seen} flags: the command's arguments were not read"
        );
        assert!(
            missing.is_empty(),
            "run flags with no profile key: {missing:?}"
        );
        // And the reverse: every key is a flag (`serve` is the trailing words' id). serde
        // lists the keys it takes when it meets one it does not.
        let e = toml::from_str::<Profile>("not_a_key = 0").unwrap_err();
        let listed = e.message().split_once("expected one of").unwrap().1;
        let keys: Vec<&str> = listed.split('`').skip(1).step_by(2).collect();
        assert!(keys.len() > 60 && keys.contains(&"serve"), "{keys:?}");
        let flagless: Vec<&&str> = keys
            .iter()
            .filter(|k| !run.get_arguments().any(|a| a.get_id() == **k))
            .collect();
        assert!(
            flagless.is_empty(),
            "profile keys with no run flag: {flagless:?}"
        );
    }

    #[test]
    fn the_device_files_come_from_the_profile_as_paths() {
        let merged = applied(
            "device_freq = \"/sys/class/devfreq/fdab0000.npu/cur_freq\"\ndevice_temp = \"t/temp1_input\"\n",
            "/etc/gates",
        )
        .unwrap();
        assert_eq!(
            merged.device_freq,
            Some(PathBuf::from("/sys/class/devfreq/fdab0000.npu/cur_freq")),
            "an absolute path stays as it is"
        );
        assert_eq!(
            merged.device_temp,
            Some(PathBuf::from("/etc/gates/t/temp1_input")),
            "a relative one is the profile's folder's"
        );
        let profile: Profile = toml::from_str("device_temp = \"/p\"").unwrap();
        let args = run_args(&["x", "run", "--device-temp", "/given"]);
        let merged = apply(args, profile, Path::new("."), |id| id == "device_temp").unwrap();
        assert_eq!(
            merged.device_temp,
            Some(PathBuf::from("/given")),
            "the command line wins"
        );
    }

    #[test]
    fn environment_variables_in_the_serve_command() {
        std::env::set_var("NPU_SERVE_SMOKE_TEST_BIN", "/opt/serve");
        assert_eq!(
            expand_env("${NPU_SERVE_SMOKE_TEST_BIN}/x").unwrap(),
            "/opt/serve/x"
        );
        assert_eq!(expand_env("{port}").unwrap(), "{port}");
        let e = expand_env("${NPU_SERVE_SMOKE_SURELY_UNSET}").unwrap_err();
        assert!(
            e.to_string().contains("NPU_SERVE_SMOKE_SURELY_UNSET"),
            "{e}"
        );
    }

    #[test]
    fn the_slo_is_the_flags_string_or_a_table_held_to_its_parser() {
        for text in [
            "slo = \"ttft=600ms,tpot=50ms\"\nmin_goodput = 0.95\n",
            "slo = { ttft = \"0.6s\", TPOT = \"50ms\" }\nmin_goodput = 0.95\n",
        ] {
            let s = applied(text, ".").unwrap().slo;
            let slo = s.slo.unwrap();
            assert_eq!(
                (slo.ttft_ms, slo.tpot_ms, slo.e2el_ms),
                (Some(600.0), Some(50.0), None)
            );
            assert_eq!(s.min_goodput, Some(0.95), "{text}");
        }
        for (text, says) in [
            (
                "slo = \"ttft=600\"\n",
                "slo in the profile: ttft=600 has no unit",
            ),
            (
                "slo = { ttft = 600 }\n",
                "slo in the profile: ttft is a integer: give a duration",
            ),
            ("slo = 600\n", "slo in the profile is a integer"),
            (
                "slo = \"ttft=1ms\"\nmin_goodput = 1.5\n",
                "min_goodput in the profile",
            ),
        ] {
            let e = applied(text, ".").unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
