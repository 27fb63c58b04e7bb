//! `run`'s arguments checked as pure functions of the settings: the first of the plan's two
//! steps (as ripgrep's `lowargs`). Nothing here reads a file, a clock or /proc, opens a socket
//! or starts a process, so every check is a unit test. The second step,
//! [`crate::live::plan`], makes what touches the system: the runs and prompts read, the
//! files checked, the serve found and fingerprinted, the port picked.
//!
//! Every check of the arguments alone is made here, and each result is kept for the second
//! step to take (`?`) at the point where `run` has always made that check, between the checks
//! of the system. So settings with two faults still say the same one first, whichever step
//! found it (issue 33).

use anyhow::{bail, Context, Result};

use crate::args::judged::run_floors;
use crate::args::run::RunArgs;
use crate::judging::verdict::{Criteria, Floors};
use crate::live::client::Client;
use crate::live::serve::PORT_PLACEHOLDER;
use crate::live::settings_record::settings_json;

/// The settings checked, each result where the second step takes it.
#[derive(Debug)]
pub(crate) struct CheckedArgs {
    /// run.json's settings.
    pub settings: serde_json::Value,
    /// `--deterministic` and `--baseline-answers`, then the floors, checked as `Criteria`
    /// checks them. The baseline's and the reference's paths are as given: the second step
    /// makes them absolute. Taken first, before anything is read.
    pub floors: Result<Floors>,
    /// `--stand-in` without `--url`. Taken once the prompts are read.
    pub one_serve: Result<()>,
    /// `--hold-cmd` as an argv prefix, and the client for `--url` (a URL it cannot use is a
    /// usage error). Taken once `--stand-in` has found this program's own path.
    pub hold_and_url: Result<(Vec<String>, Option<Client>)>,
    /// How the gate reaches the serve, as far as the arguments say. Taken once the files the
    /// run reads and writes are checked.
    pub reach: Result<Reach>,
    /// The requests' fields, `--logprobs`, and the burst flags given without bursts. Taken once
    /// the serve's programs are found (and the port picked).
    pub requests: Result<Requests>,
}

/// How the gate reaches the serve, as the arguments say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// A serve already running at this `--url`, nothing launched.
    Attach { url: String },
    /// A serve command (or the stand-in) to launch.
    Spawn,
}

/// The fields of the requests, checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Requests {
    /// `--extra-body`.
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// The fields merged into every request body over the gate's own: `--temperature`,
    /// `--seed` and the extra body.
    pub request_fields: Option<serde_json::Map<String, serde_json::Value>>,
    /// The fields of a re-anchor request: the request fields and `--continue-body`'s.
    pub continue_fields: Option<serde_json::Map<String, serde_json::Value>>,
    /// `--logprobs K`, not set twice.
    pub logprobs: Option<usize>,
}

/// Check the settings, touching nothing: see [`CheckedArgs`] for when each result is taken.
pub(crate) fn check(args: &RunArgs) -> CheckedArgs {
    let spawn = args.stand_in || !args.serve.is_empty();
    CheckedArgs {
        settings: settings_json(args),
        floors: check_determinism(args).and_then(|()| floors(args)),
        one_serve: one_serve(args),
        hold_and_url: hold_and_url(args),
        reach: reach(args, spawn),
        requests: requests(args, spawn),
    }
}

/// The floors as `Criteria` checks them, the paths as given.
fn floors(args: &RunArgs) -> Result<Floors> {
    let floors = args.judged().over(run_floors());
    Criteria::new(floors.clone())?;
    Ok(floors)
}

/// `--deterministic` and `--baseline-answers` against what the run will send and compare with:
/// greedy answers can be held to each other, sampled ones cannot.
fn check_determinism(args: &RunArgs) -> Result<()> {
    if args.determinism.deterministic {
        match args.sampling.temperature {
            Some(0.0) => {}
            Some(t) => bail!("--deterministic holds every answer to a prompt to the first, and --temperature {t} samples them: give --temperature 0"),
            None => bail!("--deterministic needs --temperature 0: every request must ask for the greedy answer, and run.json must say it did"),
        }
    }
    if args.determinism.baseline_answers.is_some()
        && !(args.determinism.deterministic && args.baseline.baseline.is_some())
    {
        bail!("--baseline-answers says what an answer that differs from the baseline's is: give it with --deterministic and --baseline DIR");
    }
    Ok(())
}

/// Whether `--deterministic` will have trials to judge: `replies` single-stream replies over
/// `prompts` prompts in rotation (and bursts after them, when `bursts`) must ask some prompt
/// twice, and give every burst's prompt a single-stream reply to be held to. Known before
/// anything starts, so a run that could only be inconclusive is refused instead. (Pure, and
/// made by the second step: the prompts may come from a file.)
pub(crate) fn check_trials(prompts: usize, replies: usize, bursts: bool) -> Result<()> {
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

/// `--stand-in` launches a serve; `--url` names one already running.
fn one_serve(args: &RunArgs) -> Result<()> {
    if args.stand_in && args.url.is_some() {
        bail!("--stand-in launches the built-in serve; --url names one already running: give one of them");
    }
    Ok(())
}

/// `--hold-cmd` split as a shell would, and the client `--url` names.
fn hold_and_url(args: &RunArgs) -> Result<(Vec<String>, Option<Client>)> {
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
    Ok((hold_cmd, given))
}

/// How the gate reaches the serve: a serve to launch (`spawn`), or the one `--url` names, with
/// the flags each way refuses. (A `--hold-cmd` that is given is a command by now: its own
/// check is taken first.)
fn reach(args: &RunArgs, spawn: bool) -> Result<Reach> {
    if !spawn {
        let Some(url) = args.url.clone() else {
            bail!("nothing to gate: give a serve command after --, --stand-in, or --url URL");
        };
        if args.hold_cmd.is_some() {
            bail!(
                "--hold-cmd runs a serve the gate launches; with --url alone nothing is launched"
            );
        }
        return Ok(Reach::Attach { url });
    }
    if args.serve_log.is_some() {
        bail!("--serve-log is for a serve that is already running; a launched serve's log is captured");
    }
    Ok(Reach::Spawn)
}

/// The requests' fields and `--logprobs`, the burst flags, and first, for a launched serve
/// (`spawn`) that `--url` does not say the port of, the serve command's port placeholder.
fn requests(args: &RunArgs, spawn: bool) -> Result<Requests> {
    // The stand-in is always told the port.
    let told_port = args.stand_in || args.serve.iter().any(|a| a.contains(PORT_PLACEHOLDER));
    // A serve that is never told the gate's port listens elsewhere (its own default), and the
    // gate would wait for it until --ready-timeout and call it "not ready".
    if spawn && args.url.is_none() && !told_port {
        bail!(
            "the serve command has no {placeholder}: the gate picks a port and passes it there (e.g. --port {placeholder}); for a serve that picks its own port, name it with --url http://127.0.0.1:PORT",
            placeholder = PORT_PLACEHOLDER
        );
    }
    let extra_body = match &args.extra_body {
        Some(text) => match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(fields)) => Some(fields),
            _ => {
                bail!("--extra-body must be a JSON object, e.g. '{{\"cache_prompt\": false}}'")
            }
        },
        None => None,
    };
    let request_fields = request_fields(
        args.sampling.temperature,
        args.sampling.seed,
        extra_body.as_ref(),
    )?;
    let logprobs = match args.logprobs {
        Some(k) => {
            // The client writes both fields; a second value of either would be a guess at
            // which one the serve read.
            for key in ["logprobs", "top_logprobs"] {
                if request_fields.as_ref().is_some_and(|f| f.contains_key(key)) {
                    bail!("--logprobs and --extra-body's \"{key}\" both ask for logprobs: give --logprobs alone");
                }
            }
            Some(k as usize)
        }
        None => None,
    };
    let continue_fields = continue_fields(
        args.continue_body.as_deref(),
        request_fields.as_ref(),
        args.reference.reference.is_some(),
    )?;
    if args.bursts.concurrency <= 1 {
        for (flag, given) in [
            ("--rounds", args.bursts.rounds.is_some()),
            ("--metrics-url", args.bursts.metrics_url.is_some()),
            (
                "--aggregate-floor",
                args.burst_floors.aggregate_floor.is_some(),
            ),
            ("--min-speedup", args.burst_floors.min_speedup.is_some()),
        ] {
            if given {
                bail!("{flag} is for the concurrent bursts: give --concurrency N with N above 1");
            }
        }
    }
    if args.context_run.depths.is_none() {
        for (flag, given) in [
            ("--depth-replies", args.context_run.depth_replies.is_some()),
            ("--max-context", args.context_run.max_context.is_some()),
            ("--prefill-floor", args.context.prefill_floor.is_some()),
            ("--depth-floor", args.context.depth_floor.is_some()),
        ] {
            if given {
                bail!("{flag} is for the prompts at depth: give --depths LIST (e.g. 256,1k,4k)");
            }
        }
    }
    Ok(Requests {
        extra_body,
        request_fields,
        continue_fields,
        logprobs,
    })
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

/// Refuse a metrics URL the gate would not scrape: anything but plain HTTP to this box's
/// loopback or to the serve's own host. (Pure, and made by the second step: the serve's URL
/// may name the port it picked.)
pub(crate) fn check_metrics_url(given: &str, serve_url: &str) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn checked(argv: &[&str]) -> CheckedArgs {
        let argv: Vec<&str> = ["x", "run"].iter().chain(argv).copied().collect();
        match Cli::parse_from(argv).command {
            Command::Run(r) => check(&r),
            other => panic!("{other:?}"),
        }
    }

    fn said<T: std::fmt::Debug>(r: Result<T>) -> String {
        format!("{:#}", r.unwrap_err())
    }

    #[test]
    fn a_launched_serve_with_the_port_placeholder_passes_every_check() {
        let c = checked(&["--temperature", "0.7", "--", "./serve", "--port", "{port}"]);
        assert_eq!(
            c.floors.unwrap().max_drift,
            Some(crate::judging::drift::DEFAULT_MAX_DRIFT)
        );
        c.one_serve.unwrap();
        let (hold_cmd, given) = c.hold_and_url.unwrap();
        assert!(hold_cmd.is_empty() && given.is_none());
        assert_eq!(c.reach.unwrap(), Reach::Spawn);
        let requests = c.requests.unwrap();
        assert_eq!(
            requests.request_fields,
            Some(serde_json::from_str(r#"{"temperature": 0.7}"#).unwrap())
        );
        assert_eq!((requests.extra_body, requests.logprobs), (None, None));
        assert_eq!(c.settings["temperature"], serde_json::json!(0.7));
    }

    #[test]
    fn an_attached_serve_needs_its_url_and_takes_no_hold_program() {
        let c = checked(&["--url", "http://127.0.0.1:8080"]);
        assert_eq!(
            c.reach.unwrap(),
            Reach::Attach {
                url: "http://127.0.0.1:8080".into()
            }
        );
        assert_eq!(
            said(checked(&[]).reach),
            "nothing to gate: give a serve command after --, --stand-in, or --url URL"
        );
        let c = checked(&[
            "--url",
            "http://127.0.0.1:8080",
            "--hold-cmd",
            "npu-hold --",
        ]);
        assert_eq!(
            said(c.reach),
            "--hold-cmd runs a serve the gate launches; with --url alone nothing is launched"
        );
    }

    #[test]
    fn bad_combinations_are_refused_each_where_run_takes_it() {
        // Two faults at once: each is kept in its own place, and the plan takes the stand-in's
        // first, as `run` always has.
        let c = checked(&[
            "--stand-in",
            "--url",
            "http://127.0.0.1:1",
            "--extra-body",
            "[1]",
        ]);
        assert_eq!(
            said(c.one_serve),
            "--stand-in launches the built-in serve; --url names one already running: give one of them"
        );
        assert_eq!(
            said(c.requests),
            "--extra-body must be a JSON object, e.g. '{\"cache_prompt\": false}'"
        );
        assert_eq!(
            said(checked(&["--deterministic"]).floors),
            "--deterministic needs --temperature 0: every request must ask for the greedy answer, and run.json must say it did"
        );
        assert_eq!(
            said(checked(&["--floor=-1"]).floors),
            "--floor must be a number of tok/s, 0 or more (got -1)"
        );
        assert_eq!(
            said(checked(&["--", "./serve"]).requests),
            "the serve command has no {port}: the gate picks a port and passes it there (e.g. --port {port}); for a serve that picks its own port, name it with --url http://127.0.0.1:PORT"
        );
        assert_eq!(
            said(checked(&["--rounds", "3", "--", "./serve", "{port}"]).requests),
            "--rounds is for the concurrent bursts: give --concurrency N with N above 1"
        );
        assert_eq!(
            said(
                checked(&[
                    "--seed",
                    "1",
                    "--extra-body",
                    r#"{"seed": 2}"#,
                    "--",
                    "s",
                    "{port}"
                ])
                .requests
            ),
            "--seed and --extra-body's \"seed\" both set the requests' seed: give it once"
        );
        assert_eq!(
            said(checked(&["--hold-cmd", "'", "--", "./serve", "{port}"]).hold_and_url),
            "--hold-cmd \"'\" is not a command (quote it as a shell would)"
        );
    }

    #[test]
    fn the_trials_and_the_metrics_url_are_pure_checks_of_what_the_system_gives() {
        assert!(check_trials(3, 4, false).is_ok());
        assert!(said(check_trials(3, 3, false)).contains("--replies 3 asks none twice"));
        assert!(check_trials(3, 3, true).is_ok());
        check_metrics_url("http://127.0.0.1:9/metrics", "http://127.0.0.1:8080").unwrap();
        check_metrics_url("http://box:9/metrics", "http://box:8080").unwrap();
        assert_eq!(
            said(check_metrics_url("https://127.0.0.1:9/m", "http://127.0.0.1:8080")),
            "--metrics-url https://127.0.0.1:9/m: the gate scrapes plain HTTP on this box, not https"
        );
    }
}
