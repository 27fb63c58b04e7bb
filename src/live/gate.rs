//! `run`: the live gate. Checks what was asked, launches (or attaches to) the serve, waits for
//! it to be ready, streams the replies, stops the serve, and judges what was recorded.
//!
//! Everything measured goes into the run directory as it happens; the verdict is computed from
//! the same [`Archive`] shape `judge` reads back.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use futures_util::FutureExt;

use crate::archive::digest::Integrity;
use crate::archive::record::{
    BinaryInfo, ClockInfo, ConcurrencyPlan, HoldCheckAt, Limits, LoadSnapshot, MetricsRecord,
    ReanchorRecord, ReplyRecord, RunManifest, Sampling, ServeLogKept, SoakRecord, Startup,
    UnaskedEnd, UnaskedWhen, SCHEMA,
};
use crate::archive::rundir::BaselineRun;
use crate::archive::rundir::{self, Archive, ResultFile, RunDir};
use crate::judging::archived::judge_with_log;
use crate::judging::measure;
use crate::judging::serve_log::LogScan;
use crate::judging::verdict::{reference, route_matches, BusySource, Criteria, Floors};
use crate::live::bursts::{make_bursts, BurstWork};
use crate::live::client::{Client, Probe, ReplyRequest};
use crate::live::conditions;
use crate::live::conditions::{Sampler, ServeTree};
use crate::live::hold::{self, Hold, Taken};
use crate::live::log_pipe::{self, Copied, LogPipe};
use crate::live::progress_line::{figures_said, progress};
use crate::live::reanchor::{reanchor, ReanchorWork};
use crate::live::recorder::Recorder;
use crate::live::route_probe;
use crate::live::run_args::{self, RunSettings, DEFAULT_ROUNDS};
use crate::live::serve::{self, ServeProcess};
use crate::live::settings_record::settings_json;
use crate::live::signals::Interrupts;
use crate::live::throttle::{self, DeviceFiles};
use crate::prompts::{self, Prompt};
use crate::report::output::{self, Outputs};
use crate::report::timeline;
use crate::report::RunInfo;
use crate::{clock, exit_codes};

/// How the gate reaches the serve.
#[derive(Debug)]
enum Launch {
    /// Start this command (the hold program's prefix, if any, then the serve's); it serves on
    /// `port`.
    Spawn {
        argv: Vec<String>,
        binary: BinaryInfo,
        port: u16,
    },
    /// A serve already running at `url`; its log, if given, is copied into the run.
    Attach { serve_log: Option<PathBuf> },
}

/// A run, checked and ready to go: every argument error is found before anything starts or is
/// held.
#[derive(Debug)]
struct Plan {
    /// `--out`, or `None` for a new directory under runs/ named for the time.
    out: Option<PathBuf>,
    criteria: Criteria,
    prompts: Vec<Prompt>,
    replies: usize,
    /// `--warmup`: single-stream replies made before `replies`, recorded and not judged.
    warmup: usize,
    max_tokens: u32,
    model: Option<String>,
    url: String,
    /// The client for `url`, made when the plan is: a URL it cannot use is a usage error
    /// before anything is created.
    client: Client,
    launch: Launch,
    hold: Option<PathBuf>,
    hold_timeout: Duration,
    extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// The fields merged into every request body over the gate's own: `--temperature`,
    /// `--seed` and the extra body.
    request_fields: Option<serde_json::Map<String, serde_json::Value>>,
    /// The sampling those requests ask for, as run.json records it.
    sampling: Sampling,
    ready_timeout: Duration,
    /// `--ready-path`; `None`: /health, falling back to the API's /models.
    ready_path: Option<String>,
    grace: Duration,
    reply_timeout: Duration,
    /// `--reply-limit`; `None`: derived from each reply's max_tokens.
    reply_limit: Option<Duration>,
    settings: serde_json::Value,
    output: Outputs,
    /// The accepted baseline to compare with, loaded before anything started.
    baseline: Option<BaselineRun>,
    /// The reference the candidate's tokens are held to, loaded before anything started.
    reference: Option<BaselineRun>,
    /// The fields of a re-anchor request: the request fields and `--continue-body`'s.
    continue_fields: Option<serde_json::Map<String, serde_json::Value>>,
    /// The concurrent bursts after the single-stream replies; `None` for one stream at a time.
    concurrency: Option<ConcurrencyPlan>,
    /// Where the serve's metrics are scraped around the bursts.
    metrics: Option<MetricsTarget>,
    /// `--soak`: the time of replies in all, from the first reply's send.
    soak: Option<Duration>,
    /// The device's clock and temperature files (`--device-freq`, `--device-temp`).
    device: DeviceFiles,
}

impl Plan {
    fn new(args: RunSettings) -> Result<Plan> {
        let settings = settings_json(&args);
        check_determinism(&args)?;
        let args_bursts = Bursts {
            concurrency: args.concurrency,
            rounds: args.rounds,
            metrics_url: args.metrics_url.clone(),
            aggregate_floor: args.aggregate_floor,
            min_speedup: args.min_speedup,
        };
        let criteria = Criteria::new(Floors {
            floor: args.floor,
            first_token_ms: args.first_token_ms,
            fast_route: args.fast_route,
            slow_route: args.slow_route,
            busy_skip: args.busy_skip,
            route_lib: args.route_lib,
            no_route_lib: args.no_route_lib,
            route_device: args.route_device,
            device_busy: args.device_busy,
            // Absolute, so `judge` finds it again from wherever it is run.
            baseline: args.baseline.as_ref().map(|p| {
                p.canonicalize()
                    .unwrap_or_else(|_| p.clone())
                    .display()
                    .to_string()
            }),
            baseline_noise: args.baseline_noise,
            max_regression: args.max_regression,
            baseline_allow: args.baseline_allow.clone(),
            aggregate_floor: args.aggregate_floor,
            min_speedup: args.min_speedup,
            // Recorded whether given or not, so `judge` reads the run's own limit.
            max_drift: Some(
                args.max_drift
                    .unwrap_or(crate::judging::drift::DEFAULT_MAX_DRIFT),
            ),
            deterministic: args.deterministic,
            baseline_answers: args.baseline_answers,
            reference: args.reference.reference.as_ref().map(|p| {
                p.canonicalize()
                    .unwrap_or_else(|_| p.clone())
                    .display()
                    .to_string()
            }),
            reference_tie: args.reference.reference_tie,
            min_agreement: args.reference.min_agreement,
            max_logprob_drift: args.reference.max_logprob_drift,
            reference_reanchor: args.reference.reference_reanchor,
            output: args.output_checks.over(Default::default()),
        })?;
        // Read before anything starts: a baseline that is not a run is a usage error, not a
        // run lost at the end.
        let baseline = match &args.baseline {
            Some(dir) => {
                let run = BaselineRun::load(dir);
                if let Err(why) = &run.archive {
                    bail!("--baseline {} is not a readable run: {why}", dir.display());
                }
                Some(run)
            }
            None => None,
        };
        let reference = match &args.reference.reference {
            Some(dir) => {
                let run = BaselineRun::load(dir);
                if let Err(why) = &run.archive {
                    bail!("--reference {} is not a readable run: {why}", dir.display());
                }
                Some(run)
            }
            None => None,
        };
        let prompts = match &args.prompts {
            Some(path) => prompts::load(path)?,
            None => prompts::built_in(),
        };
        if args.deterministic && args.soak.is_none() {
            check_trials(prompts.len(), args.replies as usize, args.concurrency > 1)?;
        }
        let mut serve_argv = args.serve;
        if args.stand_in && args.url.is_some() {
            bail!("--stand-in launches the built-in serve; --url names one already running: give one of them");
        }
        if args.stand_in {
            let me = std::env::current_exe()
                .context("failed to find this program's own path for --stand-in")?;
            let mut argv = vec![
                me.display().to_string(),
                "stand-in".to_string(),
                "--port".to_string(),
                serve::PORT_PLACEHOLDER.to_string(),
            ];
            argv.append(&mut serve_argv);
            serve_argv = argv;
        }
        let hold_cmd = match &args.hold_cmd {
            Some(cmd) => match shlex::split(cmd) {
                Some(prefix) if !prefix.is_empty() => prefix,
                _ => bail!("--hold-cmd {cmd:?} is not a command (quote it as a shell would)"),
            },
            None => Vec::new(),
        };
        let given = args
            .url
            .as_deref()
            .map(Client::new)
            .transpose()
            .context("--url")?;
        if let Some(path) = &args.serve_log {
            check_readable(path).context("--serve-log")?;
        }
        if let Some(BusySource::File(path)) = criteria.device_busy() {
            // Read before and after the replies: a counter that is not there now would be
            // found missing only once the run is over.
            check_readable(Path::new(path)).context("--device-busy")?;
            // As the probe will read it (a bounded read: /dev/zero given by mistake is not
            // read forever).
            if let Err(why) = route_probe::read_counter_file(path) {
                bail!("--device-busy: {why}; give the busy counter file (e.g. npu_busy_time_us) or fdinfo:KEY");
            }
        }
        // Read every 250 ms during the replies: a file that is not there, or holds no number,
        // is refused now rather than found missing from every sample.
        for (flag, path) in [
            ("--device-freq", &args.device_freq),
            ("--device-temp", &args.device_temp),
        ] {
            if let Some(path) = path {
                throttle::check_device_file(flag, path).map_err(anyhow::Error::msg)?;
            }
        }
        let device = DeviceFiles {
            freq: args.device_freq.clone(),
            temp: args.device_temp.clone(),
        };
        if let Some(path) = &args.hold {
            // Opening it for the lock creates it; its directory must be there.
            output::check_writable(path).context("--hold")?;
        }
        let output = Outputs::check(&args.output)?;
        let (url, launch) = if serve_argv.is_empty() {
            let Some(url) = args.url else {
                bail!("nothing to gate: give a serve command after --, --stand-in, or --url URL");
            };
            if !hold_cmd.is_empty() {
                bail!("--hold-cmd runs a serve the gate launches; with --url alone nothing is launched");
            }
            (
                url,
                Launch::Attach {
                    serve_log: args.serve_log,
                },
            )
        } else {
            if args.serve_log.is_some() {
                bail!("--serve-log is for a serve that is already running; a launched serve's log is captured");
            }
            let port = match &given {
                Some(client) => client.port(),
                None => serve::pick_port()?,
            };
            let url = args
                .url
                .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
            let told_port = serve_argv
                .iter()
                .any(|a| a.contains(serve::PORT_PLACEHOLDER));
            let serve_argv = serve::fill_port(&serve_argv, port);
            // Both must be there before anything is held or started.
            let binary = serve::fingerprint_serve(&serve_argv)?;
            if let Some(hold_program) = hold_cmd.first() {
                serve::resolve_binary(hold_program, serve::Role::HoldProgram)
                    .context("--hold-cmd")?;
            }
            // A serve that is never told the gate's port listens elsewhere (its own default),
            // and the gate would wait for it until --ready-timeout and call it "not ready".
            if given.is_none() && !told_port {
                bail!(
                    "the serve command has no {placeholder}: the gate picks a port and passes it there (e.g. --port {placeholder}); for a serve that picks its own port, name it with --url http://127.0.0.1:PORT",
                    placeholder = serve::PORT_PLACEHOLDER
                );
            }
            let argv = hold_cmd.into_iter().chain(serve_argv).collect();
            (url, Launch::Spawn { argv, binary, port })
        };
        let client = match given {
            Some(client) => client,
            None => Client::new(&url)?,
        }
        .with_api_base(&args.api_base);
        let extra_body = match &args.extra_body {
            Some(text) => match serde_json::from_str(text) {
                Ok(serde_json::Value::Object(fields)) => Some(fields),
                _ => {
                    bail!("--extra-body must be a JSON object, e.g. '{{\"cache_prompt\": false}}'")
                }
            },
            None => None,
        };
        let request_fields = request_fields(args.temperature, args.seed, extra_body.as_ref())?;
        let client = match args.logprobs {
            Some(k) => {
                // The client writes both fields; a second value of either would be a guess
                // at which one the serve read.
                for key in ["logprobs", "top_logprobs"] {
                    if request_fields.as_ref().is_some_and(|f| f.contains_key(key)) {
                        bail!("--logprobs and --extra-body's \"{key}\" both ask for logprobs: give --logprobs alone");
                    }
                }
                client.with_logprobs(k as usize)
            }
            None => client,
        };
        let continue_fields = continue_fields(
            args.continue_body.as_deref(),
            request_fields.as_ref(),
            args.reference.reference.is_some(),
        )?;
        let sampling = Sampling::of_body(request_fields.as_ref());
        let (concurrency, metrics) = plan_bursts(&args_bursts, &url)?;
        Ok(Plan {
            device,
            concurrency,
            metrics,
            baseline,
            reference,
            continue_fields,
            out: args.out,
            criteria,
            prompts,
            replies: args.replies as usize,
            warmup: args.warmup as usize,
            max_tokens: args.max_tokens,
            model: args.model,
            url,
            client,
            launch,
            hold: args.hold,
            hold_timeout: args.hold_timeout,
            extra_body,
            request_fields,
            sampling,
            ready_timeout: args.ready_timeout,
            ready_path: args.ready_path,
            grace: args.grace,
            reply_timeout: args.reply_timeout,
            reply_limit: args.reply_limit,
            soak: args.soak,
            settings,
            output,
        })
    }
}

/// The fields every request body carries over the gate's own: `--temperature` and `--seed`
/// as `temperature` and `seed`, and the extra body. A field set twice (`--seed` and an extra
/// body with a `seed`) is refused: which one the run sent would be a guess.
fn request_fields(
    temperature: Option<f64>,
    seed: Option<u64>,
    extra_body: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
    let mut fields = extra_body.cloned().unwrap_or_default();
    // The gate reads one choice, index 0, and holds any other a stream carries against it
    // (the content line): asking for more would fail every reply.
    if let Some(n) = fields.get("n").filter(|n| n.as_u64() != Some(1)) {
        bail!("--extra-body's \"n\": {n} asks for more than one choice a reply (or none); the gate judges one (choice 0), and another in the stream fails content: leave \"n\" out");
    }
    let ours = [
        (
            "temperature",
            "--temperature",
            temperature.map(serde_json::Value::from),
        ),
        ("seed", "--seed", seed.map(serde_json::Value::from)),
    ];
    for (key, flag, value) in ours {
        let Some(value) = value else { continue };
        if fields.contains_key(key) {
            bail!("{flag} and --extra-body's \"{key}\" both set the requests' {key}: give it once");
        }
        fields.insert(key.to_string(), value);
    }
    Ok((!fields.is_empty()).then_some(fields))
}

/// The fields of a re-anchor request: `request_fields` and `--continue-body`'s object (given
/// only with `--reference`, and setting no field twice).
fn continue_fields(
    continue_body: Option<&str>,
    request_fields: Option<&serde_json::Map<String, serde_json::Value>>,
    reference: bool,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
    let mut fields = request_fields.cloned().unwrap_or_default();
    if let Some(text) = continue_body {
        if !reference {
            bail!("--continue-body is the body of the re-anchor requests past divergences from a reference: give --reference DIR with it");
        }
        let Ok(serde_json::Value::Object(more)) = serde_json::from_str(text) else {
            bail!("--continue-body must be a JSON object, e.g. '{{\"continue_final_message\": true, \"add_generation_prompt\": false}}'");
        };
        for (key, value) in more {
            if fields.contains_key(&key)
                || ["messages", "model", "max_tokens", "stream"].contains(&key.as_str())
            {
                bail!("--continue-body's \"{key}\" is set already (by the gate, --extra-body, --temperature or --seed): give it once");
            }
            fields.insert(key, value);
        }
    }
    Ok((!fields.is_empty()).then_some(fields))
}

/// `--deterministic` and `--baseline-answers` against what the run will send and compare with:
/// greedy answers can be held to each other, sampled ones cannot.
fn check_determinism(args: &RunSettings) -> Result<()> {
    if args.deterministic {
        match args.temperature {
            Some(0.0) => {}
            Some(t) => bail!("--deterministic holds every answer to a prompt to the first, and --temperature {t} samples them: give --temperature 0"),
            None => bail!("--deterministic needs --temperature 0: every request must ask for the greedy answer, and run.json must say it did"),
        }
    }
    if args.baseline_answers.is_some() && !(args.deterministic && args.baseline.is_some()) {
        bail!("--baseline-answers says what an answer that differs from the baseline's is: give it with --deterministic and --baseline DIR");
    }
    Ok(())
}

/// Whether `--deterministic` will have trials to judge: `replies` single-stream replies over
/// `prompts` prompts in rotation (and bursts after them, when `bursts`) must ask some prompt
/// twice, and give every burst's prompt a single-stream reply to be held to. Known before
/// anything starts, so a run that could only be inconclusive is refused instead.
fn check_trials(prompts: usize, replies: usize, bursts: bool) -> Result<()> {
    if bursts && replies < prompts {
        bail!("--deterministic holds each burst's stream to the single-stream reply to its prompt: with {prompts} prompts, --replies {replies} leaves some with none; give --replies {prompts} or more");
    }
    if !bursts && replies <= prompts {
        bail!(
            "--deterministic holds each prompt's later replies to its first: with {prompts} {}, --replies {replies} asks none twice; give --replies above {prompts} (--replies {} makes 30 trials, enough to catch a fault in 9.5% of them), --concurrency N or --soak",
            if prompts == 1 { "prompt" } else { "prompts" },
            prompts + 30
        );
    }
    Ok(())
}

/// Where the serve's metrics are scraped around the bursts.
#[derive(Debug, Clone)]
struct MetricsTarget {
    url: String,
    /// A client for it, made when the plan is.
    client: Client,
    /// Given with `--metrics-url`, not the serve's `/metrics` tried.
    given: bool,
}

/// The burst settings, as given.
struct Bursts {
    concurrency: u32,
    rounds: Option<u32>,
    metrics_url: Option<String>,
    aggregate_floor: Option<f64>,
    min_speedup: Option<f64>,
}

/// The bursts and where their metrics are scraped, checked against the serve's `url` before
/// anything starts; `(None, None)` for a run of one stream at a time.
fn plan_bursts(b: &Bursts, url: &str) -> Result<(Option<ConcurrencyPlan>, Option<MetricsTarget>)> {
    if b.concurrency <= 1 {
        for (flag, given) in [
            ("--rounds", b.rounds.is_some()),
            ("--metrics-url", b.metrics_url.is_some()),
            ("--aggregate-floor", b.aggregate_floor.is_some()),
            ("--min-speedup", b.min_speedup.is_some()),
        ] {
            if given {
                bail!("{flag} is for the concurrent bursts: give --concurrency N with N above 1");
            }
        }
        return Ok((None, None));
    }
    let plan = ConcurrencyPlan {
        streams: b.concurrency as usize,
        rounds: b.rounds.unwrap_or(DEFAULT_ROUNDS) as usize,
    };
    // Every stream has a connection of its own, all open at once.
    raise_open_files(plan.streams)?;
    let metrics = match &b.metrics_url {
        Some(given) => {
            check_metrics_url(given, url)?;
            MetricsTarget {
                url: given.clone(),
                client: Client::new(given).context("--metrics-url")?,
                given: true,
            }
        }
        None => {
            let url = format!("{}/metrics", url.trim_end_matches('/'));
            MetricsTarget {
                client: Client::new(&url)?,
                url,
                given: false,
            }
        }
    };
    Ok((Some(plan), Some(metrics)))
}

/// Refuse a metrics URL the gate would not scrape: anything but plain HTTP to this box's
/// loopback or to the serve's own host.
fn check_metrics_url(given: &str, serve_url: &str) -> Result<()> {
    let parsed =
        url::Url::parse(given).with_context(|| format!("--metrics-url {given} is not a URL"))?;
    if parsed.scheme() != "http" {
        bail!(
            "--metrics-url {given}: the gate scrapes plain HTTP on this box, not {}",
            parsed.scheme()
        );
    }
    let serve_host = url::Url::parse(serve_url)
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()));
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    let same_host = parsed.host().map(|h| h.to_owned()) == serve_host && serve_host.is_some();
    if !loopback && !same_host {
        bail!("--metrics-url {given}: the gate scrapes the serve's metrics on loopback or on the serve's own host ({serve_url}), nowhere else");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.fragment().is_some() {
        bail!("--metrics-url {given}: the gate sends no user name or password, and a fragment is never sent");
    }
    Ok(())
}

/// Let this process hold a connection for each of `streams` streams, with room for the
/// rest of what it keeps open, raising its soft open-file limit to what is needed (up to the
/// hard limit) before anything starts.
fn raise_open_files(streams: usize) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let need = streams as u64 + 128;
    let (soft, hard) =
        getrlimit(Resource::RLIMIT_NOFILE).context("failed to read the open-file limit")?;
    if soft >= need {
        return Ok(());
    }
    if hard < need {
        bail!("--concurrency {streams} needs about {need} open files, and this process may open at most {hard} (ulimit -Hn): raise the limit or lower --concurrency");
    }
    setrlimit(Resource::RLIMIT_NOFILE, need, hard)
        .context("failed to raise the open-file limit")?;
    Ok(())
}

/// Whether `path` is a file this process can read: the attached serve's log is read after the
/// replies, and finding it missing then would lose the run.
fn check_readable(path: &Path) -> Result<()> {
    // A FIFO or a device is refused from what it is, never opened to block (issue 30).
    crate::archive::safe_open::open_read(path)?;
    Ok(())
}

/// The name of a default run directory, e.g. 20261129T201104Z, under runs/.
fn default_out_name() -> String {
    utc_now()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect()
}

fn utc_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Run the gate; the exit code for its result.
pub fn run(args: RunSettings) -> Result<u8> {
    let plan = Plan::new(args)?;
    crate::live::supervise::not_reachable_through_proc();
    // One thread: the gate must stay near idle beside a serve that needs the CPU.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let code = rt.block_on(execute(plan));
    // A serve log still being read after a signal must not hold the exit: the run is recorded.
    rt.shutdown_background();
    code
}

async fn execute(plan: Plan) -> Result<u8> {
    // Registered first, so a signal in any phase is a recorded interruption, not a lost run.
    let mut interrupts = Interrupts::register()?;
    let base_ns = clock::now_ns();
    let dir = match &plan.out {
        Some(out) => RunDir::create(out)?,
        None => RunDir::create_new_under(Path::new(rundir::DEFAULT_PARENT), &default_out_name())?,
    };
    crate::say!("run directory {}", dir.path().display());
    let mut manifest = RunManifest {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        argv: std::env::args().collect(),
        serve_argv: match &plan.launch {
            Launch::Spawn { argv, .. } => Some(argv.clone()),
            Launch::Attach { .. } => None,
        },
        serve_binary: match &plan.launch {
            Launch::Spawn { binary, .. } => Some(binary.clone()),
            Launch::Attach { .. } => None,
        },
        serve_pid: None,
        url: plan.url.clone(),
        model: None,
        prompts: plan.prompts.clone(),
        replies_planned: plan.replies,
        floors: plan.criteria.floors().clone(),
        limits: Limits {
            ready_timeout_s: plan.ready_timeout.as_secs_f64(),
            grace_s: plan.grace.as_secs_f64(),
            reply_timeout_s: plan.reply_timeout.as_secs_f64(),
            reply_limit_s: plan.reply_limit.map(|d| d.as_secs_f64()),
        },
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_utc: utc_now(),
        ended_utc: None,
        clock: ClockInfo {
            name: "CLOCK_MONOTONIC".to_string(),
            base_ns,
        },
        serve_log_kept: None,
        serve_log_source: match &plan.launch {
            Launch::Spawn { .. } => "captured".to_string(),
            Launch::Attach { serve_log: None } => "none".to_string(),
            Launch::Attach { serve_log: Some(p) } => format!("copied from {}", p.display()),
        },
        startup: None,
        stop: None,
        interrupted: None,
        hold: None,
        serve_died: None,
        extra_body: plan.extra_body.clone(),
        sampling_sent: Some(plan.sampling),
        gate_cpu_s: None,
        gate_max_rss_kib: None,
        settings: Some(plan.settings.clone()),
        provenance: None,
        concurrency: plan.concurrency.clone(),
        soak: plan.soak.map(|d| SoakRecord {
            seconds: d.as_secs_f64(),
            replies: None,
            ended: None,
        }),
        device_freq: plan.device.freq.as_ref().map(|p| p.display().to_string()),
        device_temp: plan.device.temp.as_ref().map(|p| p.display().to_string()),
        warmup: plan.warmup,
        not_archived: Vec::new(),
        digests: None,
        logprobs: plan.client.logprobs_asked(),
    };
    // Before run.json is first written, so a run killed later still says what it ran on.
    manifest.provenance = Some(crate::live::provenance::gather(&manifest, plan.max_tokens));
    // The first write of run.json and the serve's log file are made here, before anything is
    // held or started: a run directory that cannot take them is exit 2 with nothing started.
    dir.write_json(rundir::MANIFEST, &manifest)?;
    let serve_log_pipe = match &plan.launch {
        Launch::Spawn { .. } => Some(LogPipe::start(dir.open_serve_log()?)?),
        Launch::Attach { .. } => None,
    };
    let dir_path = dir.path().to_path_buf();
    // From here on every write of the run goes through the writer thread: nothing blocks on
    // the disk where the serve's sockets are read, and a write that fails is said at the end,
    // never a lost run.
    let rec = Recorder::start(dir)?;
    let client = &plan.client;

    // The serve, the hold and what was recorded live out here, so that an interruption, which
    // drops the work wherever it is, loses none of them.
    let mut serve = None;
    let mut progress = Progress {
        serve_log: serve_log_pipe,
        ..Progress::default()
    };
    let work = measure_serve(
        &plan,
        client,
        &rec,
        base_ns,
        &mut manifest,
        &mut serve,
        &mut progress,
    );
    let (recorded, mut interrupted) = tokio::select! {
        r = work => (r, None),
        sig = interrupts.recv() => (Ok(()), Some(sig)),
    };
    if let Some(sig) = interrupted {
        crate::say!("{sig}: stopping (a second signal kills the serve at once)");
    }
    if let Some(p) = serve.as_mut() {
        // Before the stop is asked: a serve that ended by itself (exited, or crashed right
        // after its last reply) did so without the gate.
        let ended_before = p.exited().map(|status| UnaskedEnd {
            status: status.to_string(),
            when: UnaskedWhen::BeforeStop {
                seen_ns: clock::now_ns().saturating_sub(base_ns),
            },
        });
        let graceful = {
            let stop = p.stop(plan.grace);
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    r = &mut stop => break Some(r),
                    sig = interrupts.recv() => {
                        if interrupted.is_none() {
                            // The first signal while stopping: the stop is what it asks for.
                            crate::say!("{sig}: stopping (a second signal kills the serve at once)");
                            interrupted = Some(sig);
                        } else {
                            crate::say!("{sig} again: killing the serve now");
                            break None;
                        }
                    }
                }
            }
        };
        let mut record = match graceful {
            Some(r) => r,
            None => p.kill_now().await,
        };
        record.unasked_end = ended_before.or_else(|| crashed_while_stopping(p));
        manifest.stop = Some(record);
    }
    if let Some(hold) = progress.hold.take() {
        let checks = hold.release();
        if let Some(h) = manifest.hold.as_mut() {
            h.released_ns = Some(clock::now_ns());
            h.checks = checks;
        }
    }
    // Once the serve's tree is gone: what the pipe still holds goes into serve.log.
    let copied = match progress.serve_log.take() {
        Some(pipe) => Some(finish_serve_log(pipe, &rec, &mut manifest).await),
        None => None,
    };
    let mut route = None;
    if let Some(sampler) = progress.sampler.take() {
        let mut record = sampler.route();
        record.matched = route_matches(&record, &plan.criteria);
        rec.json(rundir::ROUTE, &record);
        route = Some(record);
        let during = sampler.finish();
        if let Some(load) = progress.load.as_mut() {
            load.during = Some(during);
            rec.json(rundir::LOAD, load);
        }
    }
    recorded?;
    if interrupted.is_none() {
        interrupted = interrupts.recv().now_or_never();
    }
    let serve_log = read_serve_log(
        &plan,
        &rec,
        copied.as_ref(),
        &mut interrupted,
        &mut interrupts,
    )
    .await;
    if manifest.startup.is_none() && interrupted.is_some() {
        manifest.startup = Some(Startup::Interrupted);
    }
    if let Some(asked) = plan.client.logprobs_asked() {
        // Said once a run, from every reply's tally, and kept in run.json for `judge`.
        let with_text = progress
            .replies
            .iter()
            .filter(|r| r.chunks.iter().any(|c| c.has_text()))
            .count();
        for line in asked.said(with_text) {
            crate::say!("{line}");
        }
        manifest.logprobs = Some(asked);
    }
    manifest.interrupted = interrupted.map(|s| s.to_string());
    manifest.ended_utc = Some(utc_now());
    if let Some((cpu, rss)) = own_usage() {
        manifest.gate_cpu_s = Some(cpu);
        manifest.gate_max_rss_kib = Some(rss);
    }
    manifest.not_archived = rec.flush().await;
    rec.json(rundir::MANIFEST, &manifest);
    let archive = Archive {
        manifest,
        replies: progress.replies,
        serve_log: None,
        load: progress.load,
        load_problem: None,
        replies_problem: None,
        route,
        route_problem: None,
        metrics: progress.metrics,
        metrics_problem: None,
        reanchors: progress.reanchors,
        reanchors_problem: None,
        not_archived: Vec::new(),
        integrity: Integrity::Intact,
    };
    // The verdict stands on what the gate holds in memory, whatever the disk took of it.
    let verdict = judge_with_log(
        &archive,
        &plan.criteria,
        serve_log.as_ref(),
        plan.baseline.as_ref(),
        plan.reference.as_ref(),
    );
    // From here on nothing changes the verdict or the exit code: result.json says it.
    let title = format!("{} (RESULT: {})", dir_path.display(), verdict.outcome);
    let context = timeline::TimelineContext::of_run(plan.criteria.floors(), archive.load.as_ref());
    // The picture is for people: failing to draw it never changes the verdict.
    match timeline::svg(&archive.replies, &context, &title) {
        Ok(svg) => rec.file(rundir::TIMELINE, svg.into_bytes()),
        Err(e) => crate::say!("no timeline.svg: {e:#}"),
    }
    let mut result = ResultFile::new(verdict);
    result.not_archived = rec.flush().await;
    rec.json(rundir::RESULT, &result);
    let sealed = rec.finish_sealed();
    result.not_archived = sealed.not_archived;
    let title = dir_path.display().to_string();
    plan.output.emit(
        &result,
        &archive.replies,
        &RunInfo::of_archive(&archive, &title),
    );
    say_not_archived(
        &result,
        &dir_path,
        archive.replies.len(),
        sealed.manifest_sha256.as_deref(),
    );
    Ok(exit_codes::for_outcome(&result.verdict.outcome))
}

/// After the verdict: where the run is archived, or what the run directory lacks, a line for
/// each file it failed to write and why. The verdict printed stands either way: it was judged
/// from what the gate held in memory. The sealed run.json's sha256 is said with it: run.json
/// holds the digest of every other file, but not its own, so the CI log keeps that one.
fn say_not_archived(result: &ResultFile, dir: &Path, replies: usize, sealed: Option<&str>) {
    if result.not_archived.is_empty() {
        match sealed {
            Some(sha) => crate::say!("archived in {} (run.json sha256 {sha})", dir.display()),
            None => crate::say!("archived in {}", dir.display()),
        }
        return;
    }
    for missing in &result.not_archived {
        if missing.file == rundir::REPLIES {
            crate::say!(
                "not archived: {missing}; the verdict above stands on the {replies} {} held in memory",
                if replies == 1 { "reply" } else { "replies" }
            );
        } else {
            crate::say!("not archived: {missing}");
        }
    }
    let said = if result.not_archived.iter().any(|f| f.file == rundir::RESULT) {
        "result.json could not say so"
    } else {
        "result.json says so"
    };
    crate::say!(
        "the archive in {} is incomplete ({said}); the verdict above is the run's",
        dir.display()
    );
}

/// The serve's end when it died of a signal the gate never sends while the gate stopped it
/// (SIGSEGV, SIGABRT, ...): the gate sends SIGTERM, then SIGKILL, and nothing else.
fn crashed_while_stopping(p: &mut ServeProcess) -> Option<UnaskedEnd> {
    use std::os::unix::process::ExitStatusExt;
    let status = p.exited()?;
    let sig = status.signal()?;
    let gates = [
        nix::sys::signal::Signal::SIGTERM as i32,
        nix::sys::signal::Signal::SIGKILL as i32,
    ];
    (!gates.contains(&sig)).then(|| UnaskedEnd {
        status: status.to_string(),
        when: UnaskedWhen::WhileStopping,
    })
}

/// Finish serve.log once the serve's tree is gone, and record what it kept: the counts in
/// run.json, a line when the middle of a flood was dropped, and a failed write as a file not
/// archived.
async fn finish_serve_log(pipe: LogPipe, rec: &Recorder, manifest: &mut RunManifest) -> Copied {
    let copied = tokio::task::spawn_blocking(move || pipe.finish())
        .await
        .unwrap_or_else(|_| Copied::failed());
    manifest.serve_log_kept = Some(ServeLogKept {
        bytes: copied.seen,
        dropped: copied.dropped,
    });
    if copied.dropped > 0 {
        crate::say!(
            "the serve wrote {} MiB of output; serve.log keeps its first {} MiB and its last {} MiB, with a marker where the {} MiB between were dropped",
            copied.seen >> 20,
            log_pipe::HEAD_BYTES >> 20,
            (copied.seen - log_pipe::HEAD_BYTES - copied.dropped) >> 20,
            copied.dropped >> 20
        );
    }
    if let Some(error) = &copied.error {
        rec.not_archived(rundir::SERVE_LOG, error.clone());
    }
    copied
}

/// A serve log at least this large is announced before it is read.
const LARGE_LOG_BYTES: u64 = 16 << 20;

/// Read the serve's log for the verdict, after the serve is gone: the launched serve's
/// serve.log, or the attached serve's `--serve-log`, copied into the run first. Both are read
/// as streams on a thread of their own (a log can be a gigabyte), while signals are still
/// heard: one that comes meanwhile is the run's interruption, and the log is left unread.
/// `None` when the run has no log to judge the route by.
async fn read_serve_log(
    plan: &Plan,
    rec: &Recorder,
    copied: Option<&Copied>,
    interrupted: &mut Option<nix::sys::signal::Signal>,
    interrupts: &mut Interrupts,
) -> Option<LogScan> {
    // The launched serve's log is read through the descriptor the gate wrote it with.
    let copy_from = match &plan.launch {
        Launch::Attach { serve_log: None } => return None,
        Launch::Attach {
            serve_log: Some(path),
        } => path.clone(),
        Launch::Spawn { .. } => {
            let copied = copied?;
            let reader = match copied.reader() {
                Ok(r) => r,
                Err(e) => return Some(LogScan::unread(format!("{e:#}"))),
            };
            let kept = copied.seen - copied.dropped;
            return scan_serve_log(plan, reader, kept, "serve.log", interrupted, interrupts).await;
        }
    };
    let unread = "the run was interrupted before the serve log was read";
    if interrupted.is_some() {
        return Some(LogScan::unread(unread));
    }
    let archived = rec.path().join(rundir::SERVE_LOG);
    // The attached serve's log is copied into the run by the writer, and read from the copy,
    // as `judge` will read it; a copy that failed is not the verdict's concern: the log is
    // read where it is.
    rec.copy_serve_log(&copy_from);
    let copied = tokio::select! {
        failed = rec.flush() => !failed.iter().any(|f| f.file == rundir::SERVE_LOG),
        sig = interrupts.recv() => {
            crate::say!("{sig}: stopping");
            *interrupted = Some(sig);
            return Some(LogScan::unread(unread));
        }
    };
    let path = if copied { archived } else { copy_from };
    let file = match crate::archive::safe_open::open_read(&path) {
        Ok(f) => f,
        Err(e) => return Some(LogScan::unread(format!("{e:#}"))),
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    // Never past what a copy keeps: a log that grows while it is read is not followed.
    let reader = std::io::Read::take(file, log_pipe::readable_bytes());
    let name = path.display().to_string();
    scan_serve_log(plan, reader, size, &name, interrupted, interrupts).await
}

/// Scan the serve's log for the verdict on a thread of its own, while signals are still heard:
/// one that comes meanwhile is the run's interruption, and the log is left unread. `size`
/// bytes (a large log is announced first: reading it takes a while).
async fn scan_serve_log(
    plan: &Plan,
    reader: impl std::io::Read + Send + 'static,
    size: u64,
    name: &str,
    interrupted: &mut Option<nix::sys::signal::Signal>,
    interrupts: &mut Interrupts,
) -> Option<LogScan> {
    let unread = "the run was interrupted before the serve log was read";
    if interrupted.is_some() {
        return Some(LogScan::unread(unread));
    }
    if size >= LARGE_LOG_BYTES {
        // Reading takes a while at this size: say what the gate is doing.
        crate::say!("reading the serve log ({} MiB)", size >> 20);
    }
    let criteria = plan.criteria.clone();
    let name = name.to_string();
    let read = tokio::task::spawn_blocking(move || -> Result<Option<LogScan>> {
        let scan = criteria
            .scan_log(reader)
            .with_context(|| format!("failed to read {name}"))?;
        Ok(Some(scan))
    });
    tokio::select! {
        r = read => match r {
            Ok(Ok(scan)) => scan,
            Ok(Err(e)) => Some(LogScan::unread(format!("{e:#}"))),
            Err(e) => Some(LogScan::unread(format!("the serve log's reader failed: {e}"))),
        },
        sig = interrupts.recv() => {
            crate::say!("{sig}: stopping");
            *interrupted = Some(sig);
            Some(LogScan::unread(unread))
        }
    }
}

/// What the measuring phase has that run.json does not hold.
#[derive(Debug, Default)]
struct Progress {
    /// The pipe the launched serve's output comes through into serve.log, made (and serve.log
    /// opened) before anything was held or started.
    serve_log: Option<LogPipe>,
    hold: Option<Hold>,
    load: Option<LoadSnapshot>,
    sampler: Option<Sampler>,
    replies: Vec<ReplyRecord>,
    /// The serve's metrics scraped around the bursts.
    metrics: Option<MetricsRecord>,
    /// The re-anchors made past divergences from the reference.
    reanchors: Vec<ReanchorRecord>,
}

/// Take the hold, launch (or attach), wait until ready, and make the replies. What it learns
/// goes into `manifest`, `serve` and `progress` as it happens, and run.json is rewritten at each
/// step, so a run killed outright still says how far it got.
async fn measure_serve(
    plan: &Plan,
    client: &Client,
    rec: &Recorder,
    base_ns: u64,
    manifest: &mut RunManifest,
    serve: &mut Option<ServeProcess>,
    progress: &mut Progress,
) -> Result<()> {
    if let Some(path) = &plan.hold {
        let taken = hold::take(path, plan.hold_timeout, &manifest.argv).await?;
        let acquired = matches!(taken, Taken::Acquired(..));
        match taken {
            Taken::Acquired(h, record) => {
                progress.hold = Some(h);
                manifest.hold = Some(record);
            }
            Taken::TimedOut(record) => manifest.hold = Some(record),
        }
        rec.json(rundir::MANIFEST, manifest);
        if !acquired {
            progress.load = record_load(rec);
            return Ok(());
        }
    }
    // The load right before the serve starts: after any wait for the hold.
    progress.load = record_load(rec);
    let startup = match &plan.launch {
        Launch::Spawn { argv, port, .. } => {
            if !serve::port_is_free(*port) {
                Startup::SpawnFailed {
                    error: format!(
                        "port {port} is already taken by another process; the gate would measure that process, not the serve"
                    ),
                }
            } else {
                let log = progress
                    .serve_log
                    .as_ref()
                    .and_then(LogPipe::serve_end)
                    .context("the serve's log pipe was not made before the launch")?;
                let spawned = ServeProcess::spawn(argv, log, progress.hold.as_mut());
                // The supervisor has its own copy: the pipe ends when the serve's tree is gone.
                if let Some(pipe) = progress.serve_log.as_mut() {
                    pipe.close_serve_end();
                }
                match spawned {
                    Ok(p) => {
                        crate::say!("started the serve (pid {})", p.pid());
                        manifest.serve_pid = Some(p.pid());
                        rec.json(rundir::MANIFEST, manifest);
                        let p = serve.insert(p);
                        wait_ready(
                            client,
                            &plan.url,
                            plan.ready_path.as_deref(),
                            Some(p),
                            plan.ready_timeout,
                        )
                        .await
                    }
                    Err(e) => Startup::SpawnFailed {
                        error: format!("{}: {e}", argv[0]),
                    },
                }
            }
        }
        Launch::Attach { .. } => {
            wait_ready(
                client,
                &plan.url,
                plan.ready_path.as_deref(),
                None,
                plan.ready_timeout,
            )
            .await
        }
    };
    let ready = startup.is_ready();
    if let Startup::Ready {
        after_ms,
        probe,
        not_ready_answers,
    } = &startup
    {
        let loading = match not_ready_answers {
            0 => String::new(),
            n => format!(" after {n} not-ready answers"),
        };
        crate::say!("the serve is ready after {after_ms:.0} ms (GET {probe}{loading})");
    }
    manifest.startup = Some(startup);
    rec.json(rundir::MANIFEST, manifest);
    if !ready {
        return Ok(());
    }
    if let Some(h) = progress.hold.as_mut() {
        h.check(HoldCheckAt::BeforeReplies);
    }
    let model = match &plan.model {
        Some(m) => m.clone(),
        None => client
            .first_model()
            .await
            .unwrap_or_else(|| "default".to_string()),
    };
    manifest.model = Some(model.clone());
    // The box and the serve are sampled beside the replies, on the same thread: a few /proc
    // reads every 250 ms, so the gate stays near idle.
    let tree = serve.as_ref().map(|p| ServeTree {
        root: p.pid(),
        subreaper: Some(p.supervisor_pid()),
    });
    let sampler =
        progress
            .sampler
            .insert(Sampler::start(tree, base_ns, &plan.criteria, &plan.device));
    progress.metrics = plan.metrics.as_ref().map(|m| MetricsRecord {
        url: m.url.clone(),
        given: m.given,
        scrapes: Vec::new(),
    });
    let replies = async {
        let mut died = make_replies(
            plan,
            client,
            &model,
            base_ns,
            rec,
            serve,
            &mut progress.replies,
        )
        .await?;
        if let (Some(duration), None) = (plan.soak, &died) {
            let soak = Soak {
                plan,
                client,
                model: &model,
                base_ns,
                rec,
                duration,
            };
            let (ended, serve_died) = soak.run(serve, &mut progress.replies).await?;
            died = serve_died;
            // Said in run.json, so an archive tells a soak that ran its time from one cut short.
            if let Some(record) = manifest.soak.as_mut() {
                record.replies = Some(progress.replies.len());
                record.ended = Some(ended.to_string());
            }
            rec.json(rundir::MANIFEST, &*manifest);
        }
        if let Some(bursts) = plan.concurrency.as_ref().filter(|_| died.is_none()) {
            let work = BurstWork {
                client,
                plan: bursts,
                prompts: &plan.prompts,
                model: &model,
                max_tokens: plan.max_tokens,
                extra_body: plan.request_fields.as_ref(),
                stall: plan.reply_timeout,
                limit: plan.reply_limit,
                metrics: plan.metrics.as_ref().map(|m| &m.client),
            };
            died = make_bursts(
                &work,
                base_ns,
                rec,
                serve,
                &mut progress.replies,
                &mut progress.metrics,
            )
            .await?;
        }
        // After every timed reply: the re-anchors are judged by the reference line alone.
        if let (None, Some(Ok(reference))) = (&died, plan.reference.as_ref().map(|r| &r.archive)) {
            let work = ReanchorWork {
                client,
                model: &model,
                manifest,
                reference,
                prompts: &plan.prompts,
                max_tokens: plan.max_tokens,
                fields: plan.continue_fields.as_ref(),
                most: plan
                    .criteria
                    .floors()
                    .reference_reanchor
                    .unwrap_or(reference::DEFAULT_REANCHOR),
                tie: plan
                    .criteria
                    .floors()
                    .reference_tie
                    .unwrap_or(reference::DEFAULT_TIE),
                stall: plan.reply_timeout,
                limit: plan.reply_limit,
            };
            progress.reanchors = reanchor(&work, base_ns, &progress.replies, rec).await;
        }
        Ok::<_, anyhow::Error>(died)
    };
    let sampling = async {
        let mut every = tokio::time::interval(Duration::from_millis(conditions::INTERVAL_MS));
        every.tick().await;
        loop {
            every.tick().await;
            sampler.sample();
        }
    };
    let died = tokio::select! {
        died = replies => died,
        never = sampling => never,
    };
    // Before the serve is stopped: what its processes map and hold once the replies are over.
    sampler.replies_done();
    if let Some(h) = progress.hold.as_mut() {
        h.check(HoldCheckAt::AfterReplies);
    }
    manifest.serve_died = died?;
    Ok(())
}

fn record_load(rec: &Recorder) -> Option<LoadSnapshot> {
    let load = conditions::load_snapshot("before-serve");
    if let Some(l) = &load {
        rec.json(rundir::LOAD, l);
    }
    load
}

/// CPU seconds (user + system) this process has used, and its peak resident set (KiB).
///
/// The peak is VmHWM from /proc/self/status, not getrusage's ru_maxrss: ru_maxrss is inherited
/// across fork and kept across exec, so a gate started by a large parent (a Python CI
/// script holding its results) would report the parent's peak as its own.
fn own_usage() -> Option<(f64, u64)> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(u.max_rss().max(0) as u64);
    Some((secs(u.user_time()) + secs(u.system_time()), peak))
}

/// Poll GET /health (falling back to /v1/models where /health is 404), or the profile's
/// `ready_path` alone, until it answers 200,
/// the serve exits, or `timeout` runs out. A serve loading its model may answer 503 with its
/// socket already open; that is not ready. Polls are 100 ms apart: the gate stays near idle
/// while the serve, which may need every core, loads.
async fn wait_ready(
    client: &Client,
    url: &str,
    ready_path: Option<&str>,
    mut serve: Option<&mut ServeProcess>,
    timeout: Duration,
) -> Startup {
    let start = Instant::now();
    // A probe the profile names is the only one asked; the default falls back once.
    let mut path = ready_path.unwrap_or("/health").to_string();
    let mut may_fall_back = ready_path.is_none();
    let mut not_ready_answers = 0;
    // Why the last probe got no HTTP answer, for a serve that never gave one.
    let mut unreachable = None;
    let mut next_word = Duration::from_secs(10);
    crate::say!(
        "waiting for the serve to be ready (GET {path}, up to {} s)",
        timeout.as_secs_f64()
    );
    loop {
        if start.elapsed() >= next_word {
            crate::say!(
                "still waiting for the serve after {} s ({not_ready_answers} not-ready answers)",
                next_word.as_secs()
            );
            next_word += Duration::from_secs(10);
        }
        if let Some(p) = serve.as_deref_mut() {
            if let Some(status) = p.exited() {
                return Startup::Exited {
                    status: status.to_string(),
                };
            }
        }
        match client.probe(&path).await {
            Probe::Status(200) => {
                return Startup::Ready {
                    after_ms: start.elapsed().as_secs_f64() * 1e3,
                    probe: path,
                    not_ready_answers,
                }
            }
            Probe::Status(404) if may_fall_back => {
                path = client.models_path();
                may_fall_back = false;
                continue;
            }
            Probe::Status(_) => not_ready_answers += 1,
            Probe::Unreachable(why) => unreachable = Some(why),
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            return Startup::NotReady {
                timeout_s: timeout.as_secs_f64(),
                url: Some(url.to_string()),
                not_ready_answers: Some(not_ready_answers),
                last_probe: (not_ready_answers == 0).then_some(unreachable).flatten(),
            };
        }
        tokio::time::sleep((timeout - elapsed).min(Duration::from_millis(100))).await;
    }
}

/// Stream the warm-ups (`--warmup`) and then the planned replies, one at a time, appending
/// each to replies.jsonl: the warm-ups are replies 1 to N, flagged, and the planned ones
/// follow from N + 1. Stops early when the serve has died: replies are not sent to a dead
/// serve. Returns how it died, if it did.
async fn make_replies(
    plan: &Plan,
    client: &Client,
    model: &str,
    base_ns: u64,
    rec: &Recorder,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
) -> Result<Option<String>> {
    for w in 0..plan.warmup {
        let (reply, m) = one_reply(plan, client, model, base_ns, w, true).await;
        crate::say!(
            "warm-up {}/{}: {}",
            w + 1,
            plan.warmup,
            figures_said(&reply, &m)
        );
        if let Some(died) = keep_reply(reply, rec, serve, replies).await? {
            return Ok(Some(died));
        }
    }
    for i in 0..plan.replies {
        let (reply, m) = one_reply(plan, client, model, base_ns, i, false).await;
        crate::say!("{}", progress(&reply, &m, plan.warmup + plan.replies));
        if let Some(died) = keep_reply(reply, rec, serve, replies).await? {
            return Ok(Some(died));
        }
    }
    Ok(None)
}

/// The single-stream reply at position `i` (0-based) among the warm-ups when `warmup`, else
/// among the judged replies (numbered after the warm-ups), its prompt by rotation from the
/// first prompt (so the judged replies ask what they would without warm-ups), and its figures.
async fn one_reply(
    plan: &Plan,
    client: &Client,
    model: &str,
    base_ns: u64,
    i: usize,
    warmup: bool,
) -> (ReplyRecord, measure::ReplyMetrics) {
    let prompt = &plan.prompts[i % plan.prompts.len()];
    let req = ReplyRequest {
        index: if warmup { i + 1 } else { plan.warmup + i + 1 },
        prompt: &prompt.prompt,
        expect: prompt.expect.as_deref(),
        model,
        max_tokens: prompt.max_tokens.unwrap_or(plan.max_tokens),
        extra_body: plan.request_fields.as_ref(),
        burst: None,
        first_text: None,
        continue_from: None,
    };
    let mut reply = client
        .stream_reply(&req, base_ns, plan.reply_timeout, plan.reply_limit)
        .await;
    reply.warmup = warmup;
    let m = measure::record_metrics(&mut reply);
    (reply, m)
}

/// Append a finished reply to replies.jsonl and the run's replies. When it failed and the
/// serve has exited, how the serve died.
async fn keep_reply(
    mut reply: ReplyRecord,
    rec: &Recorder,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
) -> Result<Option<String>> {
    let failed = reply.error.is_some();
    let index = reply.index;
    rec.reply(&reply);
    // The archive has the whole text; the verdict reads no more than this of it.
    reply.keep_judged(replies);
    replies.push(reply);
    if failed {
        if let Some(status) = ServeProcess::exit_after_failure(serve).await {
            let died = format!("the serve exited ({status}) during reply {index}");
            crate::say!("{died}; no more replies are sent");
            return Ok(Some(died));
        }
    }
    Ok(None)
}

/// How often a soak says how it is going.
const SOAK_PROGRESS: Duration = Duration::from_secs(10);

/// A soak (`--soak`): single-stream replies after the planned ones, one at a time, until the
/// duration is spent from the first reply's send. The reply under way when it is spent is
/// finished, never cut: a cut reply would read as a stall.
struct Soak<'a> {
    plan: &'a Plan,
    client: &'a Client,
    model: &'a str,
    base_ns: u64,
    rec: &'a Recorder,
    duration: Duration,
}

/// How a soak ended, as run.json says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SoakEnd {
    /// The duration was spent.
    Duration,
    /// [`run_args::MAX_SOAK_REPLIES`] replies were made.
    ReplyCap,
    /// A reply failed: the run fails on it already, and a serve that fails every reply at
    /// once must not be asked thousands of times.
    ReplyFailed,
    /// The serve exited.
    ServeDied,
}

impl std::fmt::Display for SoakEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SoakEnd::Duration => "duration",
            SoakEnd::ReplyCap => "reply cap",
            SoakEnd::ReplyFailed => "reply failed",
            SoakEnd::ServeDied => "serve died",
        })
    }
}

impl Soak<'_> {
    /// Make the soak's replies after those in `replies`; how it ended, and how the serve died
    /// if it did. An interruption drops this future between or inside replies: every finished
    /// reply is in `replies` and replies.jsonl by then.
    async fn run(
        &self,
        serve: &mut Option<ServeProcess>,
        replies: &mut Vec<ReplyRecord>,
    ) -> Result<(SoakEnd, Option<String>)> {
        // The warm-ups are not the soak's: its time runs from the first judged reply.
        let started_ns = replies.iter().find(|r| !r.warmup).map_or_else(
            || clock::now_ns().saturating_sub(self.base_ns),
            |r| r.sent_ns,
        );
        let end_ns = started_ns.saturating_add(self.duration.as_nanos() as u64);
        let now = || clock::now_ns().saturating_sub(self.base_ns);
        crate::say!(
            "soak: replies until {} from the first reply's send",
            humantime::format_duration(self.duration)
        );
        let mut said_ns = now();
        let mut rates: Vec<f64> = replies
            .iter()
            .filter(|r| !r.warmup)
            .filter_map(|r| measure::measure(r).rate_tok_s)
            .collect();
        loop {
            if now() >= end_ns {
                return Ok((SoakEnd::Duration, None));
            }
            if replies.len() >= run_args::MAX_SOAK_REPLIES {
                crate::say!(
                    "soak: stopped at {} replies, the most a run keeps",
                    replies.len()
                );
                return Ok((SoakEnd::ReplyCap, None));
            }
            let i = replies.len() - self.plan.warmup.min(replies.len());
            let (reply, m) =
                one_reply(self.plan, self.client, self.model, self.base_ns, i, false).await;
            let failed = reply.error.is_some();
            if failed {
                crate::say!("{}", progress(&reply, &m, self.plan.warmup + i + 1));
            }
            rates.extend(m.rate_tok_s);
            if let Some(died) = keep_reply(reply, self.rec, serve, replies).await? {
                return Ok((SoakEnd::ServeDied, Some(died)));
            }
            if failed {
                crate::say!("soak: a reply failed; no more soak replies are sent");
                return Ok((SoakEnd::ReplyFailed, None));
            }
            let at = now();
            if at.saturating_sub(said_ns) >= SOAK_PROGRESS.as_nanos() as u64 {
                said_ns = at;
                crate::say!(
                    "{}",
                    soak_progress(
                        replies.len(),
                        measure::median(&rates),
                        at.saturating_sub(started_ns),
                        end_ns.saturating_sub(at)
                    )
                );
            }
        }
    }
}

/// A soak's progress line: `soak: 57 replies, median 93.1 tok/s, 1m 10s done, 8m 50s left`.
fn soak_progress(replies: usize, median: Option<f64>, done_ns: u64, left_ns: u64) -> String {
    let whole_s = |ns: u64| humantime::format_duration(Duration::from_secs(ns / 1_000_000_000));
    let median = median.map_or("no rate yet".to_string(), |m| {
        format!("median {m:.1} tok/s")
    });
    format!(
        "soak: {replies} replies, {median}, {} done, {} left",
        whole_s(done_ns),
        whole_s(left_ns)
    )
}
