//! The run's plan: the settings checked ([`crate::live::checked_args`], pure), then made real
//! against the system (the second step, as ripgrep's `hiargs`): the baseline, the reference
//! and the prompts read, the files the run reads and writes checked, the serve's programs
//! found and fingerprinted, the port picked, the open-file limit raised. Every argument error
//! is found here, before anything is created, held or started.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::archive::record::{BinaryInfo, ConcurrencyPlan, Sampling};
use crate::archive::record::{ContextPlan, DEFAULT_DEPTH_REPLIES};
use crate::archive::rundir::BaselineRun;
use crate::args::footprint::FootprintRunArgs;
use crate::args::run::{RunArgs, DEFAULT_ROUNDS};
use crate::judging::archived::check_noise;
use crate::judging::verdict::{BusySource, Criteria};
use crate::live::checked_args::{self, Reach};
use crate::live::client::Client;
use crate::live::footprint::DeviceMemoryFile;
use crate::live::route_probe;
use crate::live::serve;
use crate::live::throttle::{self, DeviceFiles};
use crate::prompts::{self, Prompt};
use crate::report::output::{self, Outputs};

/// How the gate reaches the serve.
#[derive(Debug)]
pub(crate) enum Launch {
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
pub(crate) struct Plan {
    /// `--out`, or `None` for a new directory under runs/ named for the time.
    pub out: Option<PathBuf>,
    pub criteria: Criteria,
    pub prompts: Vec<Prompt>,
    pub replies: usize,
    /// `--warmup`: single-stream replies made before `replies`, recorded and not judged.
    pub warmup: usize,
    pub max_tokens: u32,
    pub model: Option<String>,
    pub url: String,
    /// The client for `url`, made when the plan is: a URL it cannot use is a usage error
    /// before anything is created.
    pub client: Client,
    pub launch: Launch,
    pub hold: Option<PathBuf>,
    pub hold_timeout: Duration,
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// The fields merged into every request body over the gate's own: `--temperature`,
    /// `--seed` and the extra body.
    pub request_fields: Option<serde_json::Map<String, serde_json::Value>>,
    /// The sampling those requests ask for, as run.json records it.
    pub sampling: Sampling,
    pub ready_timeout: Duration,
    /// `--ready-path`; `None`: /health, falling back to the API's /models.
    pub ready_path: Option<String>,
    pub grace: Duration,
    pub reply_timeout: Duration,
    /// `--reply-limit`; `None`: derived from each reply's max_tokens.
    pub reply_limit: Option<Duration>,
    pub settings: serde_json::Value,
    pub output: Outputs,
    /// The accepted baseline to compare with, loaded before anything started.
    pub baseline: Option<BaselineRun>,
    /// The reference the candidate's tokens are held to, loaded before anything started.
    pub reference: Option<BaselineRun>,
    /// Known-good builds' runs against that reference (`--reference-noise`), as given: read
    /// and checked beside it before anything starts, walked again at the end, never held.
    pub noise: Vec<String>,
    /// The fields of a re-anchor request: the request fields and `--continue-body`'s.
    pub continue_fields: Option<serde_json::Map<String, serde_json::Value>>,
    /// The concurrent bursts after the single-stream replies; `None` for one stream at a time.
    pub concurrency: Option<ConcurrencyPlan>,
    /// Where the serve's metrics are scraped around the bursts.
    pub metrics: Option<MetricsTarget>,
    /// `--soak`: the time of replies in all, from the first reply's send.
    pub soak: Option<Duration>,
    /// The device's clock and temperature files (`--device-freq`, `--device-temp`).
    pub device: DeviceFiles,
    /// `--device-memory`: the device's memory counter, checked to read as a number.
    pub device_memory: Option<DeviceMemoryFile>,
    /// `--idle-probe`: the wait with the serve idle before the probe reply.
    pub idle_probe: Option<Duration>,
    /// `--depths`: the prompts at depth after every other reply, and the context they are
    /// held to (the serve's word on it filled in once read).
    pub context: Option<ContextPlan>,
}

/// Where the serve's metrics are scraped around the bursts.
#[derive(Debug, Clone)]
pub(crate) struct MetricsTarget {
    pub url: String,
    /// A client for it, made when the plan is.
    pub client: Client,
    /// Given with `--metrics-url`, not the serve's `/metrics` tried.
    pub given: bool,
}

impl Plan {
    /// Check `args` (the pure checks first, all of them), then make the plan against the
    /// system. Each pure check's result is taken where `run` has always made it, between the
    /// system's checks, so the first error said is the one it always was.
    pub(crate) fn new(args: RunArgs) -> Result<Plan> {
        let checked = checked_args::check(&args);
        let settings = checked.settings;
        let mut floors = checked.floors?;
        // Absolute, so `judge` finds them again from wherever it is run.
        floors.baseline = args.baseline.baseline.as_deref().map(absolute);
        floors.reference = args.reference.reference.as_deref().map(absolute);
        floors.reference_noise = args
            .reference
            .reference_noise
            .iter()
            .map(|p| absolute(p))
            .collect();
        let criteria = Criteria::new(floors)?;
        // Read before anything starts: a baseline that is not a run is a usage error, not a
        // run lost at the end.
        let baseline = load_run("--baseline", args.baseline.baseline.as_deref())?;
        let reference = load_run("--reference", args.reference.reference.as_deref())?;
        let noise = args.reference.noise_dirs();
        check_noise("--reference-noise", &noise, reference.as_ref(), true)?;
        let prompts = match &args.prompts {
            Some(path) => prompts::load(path)?,
            None => prompts::built_in(),
        };
        if args.determinism.deterministic && args.soak.is_none() {
            checked_args::check_trials(
                prompts.len(),
                args.replies as usize,
                args.bursts.concurrency > 1,
            )?;
        }
        checked.one_serve?;
        let serve_argv = serve_argv(args.stand_in, args.serve)?;
        let (hold_cmd, given) = checked.hold_and_url?;
        check_files(
            &args.serve_log,
            &criteria,
            &args.device_freq,
            &args.device_temp,
            &args.hold,
        )?;
        let device_memory = device_memory_file(&args.footprint_run)?;
        let device = DeviceFiles {
            freq: args.device_freq.clone(),
            temp: args.device_temp.clone(),
        };
        let output = Outputs::check(&args.output)?;
        let (url, launch) = reach_serve(
            checked.reach?,
            given.as_ref(),
            args.url,
            &serve_argv,
            hold_cmd,
            args.serve_log,
        )?;
        let requests = checked.requests?;
        let client = match given {
            Some(client) => client,
            None => Client::new(&url)?,
        }
        .with_api_base(&args.api_base);
        let client = match requests.logprobs {
            Some(k) => client.with_logprobs(k),
            None => client,
        };
        let sampling = Sampling::of_body(requests.request_fields.as_ref());
        let (concurrency, metrics) = plan_bursts(
            args.bursts.concurrency,
            args.bursts.rounds,
            args.bursts.metrics_url.as_deref(),
            &url,
        )?;
        Ok(Plan {
            device,
            concurrency,
            metrics,
            baseline,
            reference,
            noise,
            continue_fields: requests.continue_fields,
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
            extra_body: requests.extra_body,
            request_fields: requests.request_fields,
            sampling,
            ready_timeout: args.ready_timeout,
            ready_path: args.ready_path,
            grace: args.grace,
            reply_timeout: args.reply_timeout,
            reply_limit: args.reply_limit,
            soak: args.soak,
            device_memory,
            idle_probe: args.footprint_run.idle_probe,
            context: args.context_run.depths.as_ref().map(|d| ContextPlan {
                depths: d.0.clone(),
                replies_each: args
                    .context_run
                    .depth_replies
                    .unwrap_or(DEFAULT_DEPTH_REPLIES),
                serve_says: None,
                given: args.context_run.max_context,
                max_tokens: args.max_tokens,
            }),
            settings,
            output,
        })
    }
}

/// How the serve is reached: at `--url` when attached, else launched (under `--hold-cmd` when
/// given) on the port given or picked, with the serve's binary and the hold's program found
/// before anything is held or started.
fn reach_serve(
    reach: Reach,
    given: Option<&Client>,
    url: Option<String>,
    serve_argv: &[String],
    hold_cmd: Vec<String>,
    serve_log: Option<PathBuf>,
) -> Result<(String, Launch)> {
    Ok(match reach {
        Reach::Attach { url } => (url, Launch::Attach { serve_log }),
        Reach::Spawn => {
            let port = match given {
                Some(client) => client.port(),
                None => serve::pick_port()?,
            };
            let url = url.unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
            let serve_argv = serve::fill_port(serve_argv, port);
            // Both must be there before anything is held or started.
            let binary = serve::fingerprint_serve(&serve_argv)?;
            if let Some(hold_program) = hold_cmd.first() {
                serve::resolve_binary(hold_program, serve::Role::HoldProgram)
                    .context("--hold-cmd")?;
            }
            let argv = hold_cmd.into_iter().chain(serve_argv).collect();
            (url, Launch::Spawn { argv, binary, port })
        }
    })
}

/// `--device-memory`, checked now: it is read on every sample and at each reply's end, so a
/// file that cannot be read is refused before the run, not found missing from every reading.
fn device_memory_file(args: &FootprintRunArgs) -> Result<Option<DeviceMemoryFile>> {
    let Some(path) = &args.device_memory else {
        return Ok(None);
    };
    let file = DeviceMemoryFile {
        path: path.clone(),
        unit: args.device_memory_unit,
    };
    file.check().map_err(anyhow::Error::msg)?;
    Ok(Some(file))
}

/// `path` made absolute where it can be, as run.json records it.
fn absolute(path: &Path) -> String {
    path.canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// The run `flag` names, read; a directory that is not a readable run is refused.
fn load_run(flag: &str, dir: Option<&Path>) -> Result<Option<BaselineRun>> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    let run = BaselineRun::load(dir);
    if let Err(why) = &run.archive {
        bail!("{flag} {} is not a readable run: {why}", dir.display());
    }
    Ok(Some(run))
}

/// The serve command: `serve`, after the stand-in's own (this program's) when `stand_in`.
fn serve_argv(stand_in: bool, mut serve: Vec<String>) -> Result<Vec<String>> {
    if !stand_in {
        return Ok(serve);
    }
    let me =
        std::env::current_exe().context("failed to find this program's own path for --stand-in")?;
    let mut argv = vec![
        me.display().to_string(),
        "stand-in".to_string(),
        "--port".to_string(),
        serve::PORT_PLACEHOLDER.to_string(),
    ];
    argv.append(&mut serve);
    Ok(argv)
}

/// The files the run reads during or after the replies, and the hold's file, checked now:
/// found missing later, they would lose the run.
fn check_files(
    serve_log: &Option<PathBuf>,
    criteria: &Criteria,
    device_freq: &Option<PathBuf>,
    device_temp: &Option<PathBuf>,
    hold: &Option<PathBuf>,
) -> Result<()> {
    if let Some(path) = serve_log {
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
        ("--device-freq", device_freq),
        ("--device-temp", device_temp),
    ] {
        if let Some(path) = path {
            throttle::check_device_file(flag, path).map_err(anyhow::Error::msg)?;
        }
    }
    if let Some(path) = hold {
        // Opening it for the lock creates it; its directory must be there.
        output::check_writable(path).context("--hold")?;
    }
    Ok(())
}

/// The bursts and where their metrics are scraped, checked against the serve's `url` before
/// anything starts; `(None, None)` for a run of one stream at a time (whose burst flags the
/// pure step has refused).
fn plan_bursts(
    concurrency: u32,
    rounds: Option<u32>,
    metrics_url: Option<&str>,
    url: &str,
) -> Result<(Option<ConcurrencyPlan>, Option<MetricsTarget>)> {
    if concurrency <= 1 {
        return Ok((None, None));
    }
    let plan = ConcurrencyPlan {
        streams: concurrency as usize,
        rounds: rounds.unwrap_or(DEFAULT_ROUNDS) as usize,
    };
    // Every stream has a connection of its own, all open at once.
    raise_open_files(plan.streams)?;
    let metrics = match metrics_url {
        Some(given) => {
            checked_args::check_metrics_url(given, url)?;
            MetricsTarget {
                url: given.to_string(),
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
