//! Gate profiles: a release gate as one checked-in TOML file.
//!
//! A profile's keys are the `run` command's flags, declared once (the clap struct in
//! [`super::run`]): a key is a flag's long name with underscores (`floor`, `first_token_ms`,
//! `fast_route`, `replies`, `hold`, ...), every flag but the invocation's own ([`NOT_KEYS`]:
//! `--profile`, `--serve-cmd`, and where this run's reports go), plus `serve`, the serve
//! command as an array. A key's value is read as the flag's own words, by the flag's own
//! parser, so a profile takes what the command line takes and refuses what it refuses
//! (issue 53: a profile once had a struct of its own, 74 fields kept beside the flags, and six
//! flags had no key). Flags given on the command line override the profile; the profile
//! overrides the defaults. Paths of files a profile ships with ([`RELATIVE_PATHS`]) are
//! relative to the profile's folder (an absolute path stays as it is). `${NAME}` in the serve
//! command is the environment variable NAME, so a checked-in profile can name a binary whose
//! path differs between machines.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use clap::builder::Resettable;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Args, FromArgMatches};
use regex::Regex;

use crate::args::run::RunArgs;

/// A profile file's contents: its keys and their values, as TOML read them; which are flags is
/// checked when it is applied, against the flags themselves.
#[derive(Debug, Default)]
pub struct Profile {
    keys: toml::Table,
}

/// `run`'s flags that are not profile keys: the invocation's own (which profile; the serve
/// command as one string, for a CI system), and where this run's reports go.
pub const NOT_KEYS: [&str; 5] = ["profile", "serve_cmd", "json", "junit", "prom"];

/// The keys whose value is a file or folder a profile ships with: a relative path is the
/// profile's folder's. (`out` and `hold` are the box's, relative to where the gate runs.)
pub const RELATIVE_PATHS: [&str; 8] = [
    "prompts",
    "serve_log",
    "device_freq",
    "device_temp",
    "device_memory",
    "baseline",
    "reference",
    "reference_noise",
];

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
    read_text(&text, &path.display().to_string())
}

/// A profile's text read: TOML whose every key is one of `run`'s flags or `serve`. `shown` is
/// the profile as a message names it.
pub(crate) fn read_text(text: &str, shown: &str) -> Result<Profile> {
    let keys = toml::from_str(text).map_err(|e| {
        anyhow!(
            "the profile {shown} is not valid: {}",
            toml_problem(text, &e)
        )
    })?;
    let profile = Profile { keys };
    let run = run_command();
    if let Some(key) = profile
        .keys
        .keys()
        .find(|k| key_arg(&run, k).is_none() && *k != "serve")
    {
        bail!(
            "the profile {shown} is not valid: unknown key `{}`: a key is one of run's flags with \
             underscores (floor, first_token_ms, ...), or serve",
            one_line(key)
        );
    }
    Ok(profile)
}

/// A key as a message quotes it: its first 80 characters, on one line, a control character
/// said as its escape.
fn one_line(key: &str) -> String {
    let mut s: String = key
        .chars()
        .take(80)
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    if key.chars().count() > 80 {
        s.push_str("...");
    }
    s
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

/// `run`'s flags, as the command line declares them.
fn run_command() -> clap::Command {
    RunArgs::augment_args(clap::Command::new("run"))
}

/// The flag a profile key names: one of `run`'s, not among [`NOT_KEYS`].
fn key_arg<'c>(run: &'c clap::Command, key: &str) -> Option<&'c Arg> {
    if NOT_KEYS.contains(&key) || key == "serve" {
        return None;
    }
    run.get_arguments()
        .find(|a| a.get_id() == key && a.get_long().is_some())
}

/// `run`'s settings from its command line `argv` (its words from `run` on) with `profile`'s
/// keys laid under them: each key the command line did not give becomes its flag's words, held
/// to the flag's parser and refused in one line naming the key, and the command line is read
/// again with those words before its own, so the two together are checked as one command line
/// is (a flag that needs another, two that conflict). The keys are read in the order `run
/// --help` lists the flags, so the same profile is always refused for the same key.
pub fn merge(argv: &[OsString], profile: Profile, dir: &Path) -> Result<RunArgs> {
    let run = run_command();
    let matches = run
        .clone()
        .try_get_matches_from(argv)
        .map_err(|e| anyhow!("{}", bounded(&clap_said(&e))))?;
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    let mut keys = profile.keys;
    // A profile's `[continue_body]` says how its serve continues a message (vLLM's needs
    // `continue_final_message`): the profile stands for the serve in runs with a reference and
    // without one, and a run without one sends no re-anchor, so the table waits for a reference
    // rather than refusing the profile (the flag alone is refused without --reference).
    if !given("reference") && !given("continue_body") && !keys.contains_key("reference") {
        keys.remove("continue_body");
    }
    let serve = keys.remove("serve");
    let mut words: Vec<OsString> = Vec::new();
    for arg in run.get_arguments() {
        let key = arg.get_id().as_str();
        let Some(value) = keys.remove(key) else {
            continue;
        };
        if given(key) || key_arg(&run, key).is_none() {
            continue;
        }
        words.extend(flag_words(arg, key, value, dir)?);
    }
    if let Some(key) = keys.keys().next() {
        // `load` refuses these first; a profile made otherwise is held to the same.
        bail!("the profile: unknown key `{}`", one_line(key));
    }
    let stand_in = matches.get_flag("stand_in") || words.iter().any(|w| w == "--stand-in");
    let serve = serve_words(serve, given("serve") || given("serve_cmd"), stand_in)?;
    // The profile's words go before the command line's own, its serve command after them.
    let mut all: Vec<OsString> = argv.iter().take(1).cloned().collect();
    all.extend(words);
    all.extend(argv.iter().skip(1).cloned());
    if let Some(serve) = serve {
        all.push("--".into());
        all.extend(serve.into_iter().map(OsString::from));
    }
    let matches = run.try_get_matches_from(&all).map_err(|e| {
        anyhow!(
            "{}",
            bounded(&format!("with the profile: {}", clap_said(&e)))
        )
    })?;
    RunArgs::from_arg_matches(&matches).map_err(|e| {
        anyhow!(
            "{}",
            bounded(&format!("with the profile: {}", clap_said(&e)))
        )
    })
}

/// The words of the flag `arg` for a profile's `value`, each held to the flag's parser: `--key=V`
/// (once a value, for a flag that is given again and again), `--key` for `true` on a switch.
fn flag_words(arg: &Arg, key: &str, value: toml::Value, dir: &Path) -> Result<Vec<OsString>> {
    let long = arg.get_long().expect("a key's flag is long");
    let switch = matches!(arg.get_action(), ArgAction::SetTrue);
    let values = match value {
        toml::Value::Boolean(b) if switch => {
            return Ok(if b {
                vec![format!("--{long}").into()]
            } else {
                vec![]
            })
        }
        _ if switch => bail!(
            "{key} in the profile is {}: give true or false",
            a_type(&value)
        ),
        toml::Value::Array(items) if matches!(arg.get_action(), ArgAction::Append) => items
            .into_iter()
            .map(|v| scalar_word(key, v))
            .collect::<Result<Vec<_>>>()?,
        // A list for a flag that takes one value is the flag's comma-separated list.
        toml::Value::Array(items) => vec![items
            .into_iter()
            .map(|v| scalar_word(key, v))
            .collect::<Result<Vec<_>>>()?
            .join(",")],
        // A table is the flag's JSON where it takes JSON, else its `name=value` list.
        toml::Value::Table(table)
            if arg
                .get_value_names()
                .is_some_and(|n| n.iter().any(|n| n == "JSON")) =>
        {
            vec![serde_json::to_string(&table)?]
        }
        toml::Value::Table(table) => vec![table
            .into_iter()
            .map(|(name, v)| match v {
                toml::Value::String(s) => Ok(format!("{name}={s}")),
                other => Err(anyhow!(
                    "{key} in the profile: {name} is {}: give it as text, e.g. {name} = \"600ms\"",
                    a_type(&other)
                )),
            })
            .collect::<Result<Vec<_>>>()?
            .join(",")],
        other => vec![scalar_word(key, other)?],
    };
    let relative = RELATIVE_PATHS.contains(&key);
    let mut words = Vec::new();
    for v in values {
        let v = if relative {
            dir.join(&v).into_os_string()
        } else {
            OsString::from(v)
        };
        let mut word = OsString::from(format!("--{long}="));
        word.push(&v);
        held_to_parser(arg, key, &word)?;
        words.push(word);
    }
    Ok(words)
}

/// A number or a text as the command line would write it: a number as Rust writes it (every
/// digit of 1e30, so the flag's bounds name it).
fn scalar_word(key: &str, value: toml::Value) -> Result<String> {
    Ok(match value {
        toml::Value::String(s) => s,
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        other => bail!(
            "{key} in the profile is {}: give the flag's value as text or a number",
            a_type(&other)
        ),
    })
}

/// A TOML value's type with its article, as a message says it: "an integer", "a table".
fn a_type(value: &toml::Value) -> String {
    let t = value.type_str();
    let article = if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {t}")
}

/// `value` read by the flag's own parser; refused in one line naming the key and saying what
/// the parser said.
fn held_to_parser(arg: &Arg, key: &str, word: &std::ffi::OsStr) -> Result<()> {
    let alone = clap::Command::new("run").no_binary_name(true).arg(
        arg.clone()
            .required(false)
            .requires(Resettable::<clap::Id>::Reset)
            .conflicts_with(Resettable::<clap::Id>::Reset),
    );
    alone.try_get_matches_from([word]).map(|_| ()).map_err(|e| {
        let said = clap_said(&e);
        // A flag's own parser names the value (or the part of it it refuses, quoted); the
        // standard library's number parsers do not.
        let value = word.to_string_lossy();
        let value = value.split_once('=').map_or("", |(_, v)| v);
        if said.contains(value) || said.contains('"') {
            anyhow!("{}", bounded(&format!("{key} in the profile: {said}")))
        } else {
            anyhow!(
                "{}",
                bounded(&format!("{key} in the profile: {value:?}: {said}"))
            )
        }
    })
}

/// What clap's error says, as one line: the parser's own words where a parser refused the
/// value, else clap's first line without its `error: `.
fn clap_said(e: &clap::Error) -> String {
    if let Some(source) = std::error::Error::source(e) {
        return source.to_string();
    }
    let text = e.render().to_string();
    let said: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    let said = said.join(" ");
    said.strip_prefix("error: ").unwrap_or(&said).to_string()
}

/// A message that quotes a profile's value, as one line of at most 600 characters (the digits
/// of 1e300 and the bounds they broke fit): a control character (an escape code, a newline)
/// said as its escape, a long value cut.
fn bounded(said: &str) -> String {
    const MOST: usize = 600;
    let mut out = String::new();
    for (i, c) in said.chars().enumerate() {
        if i == MOST {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The profile's serve command, its `${NAME}`s expanded: none where the command line gave
/// one; refused beside --stand-in.
fn serve_words(
    serve: Option<toml::Value>,
    given: bool,
    stand_in: bool,
) -> Result<Option<Vec<String>>> {
    let Some(serve) = serve else {
        return Ok(None);
    };
    if given {
        return Ok(None);
    }
    if stand_in {
        // After --stand-in, the words of `serve` would be read as stand-in options.
        bail!("the profile names a serve command and --stand-in asks for the built-in serve: give one of them");
    }
    let toml::Value::Array(words) = serve else {
        bail!("serve in the profile is {}: give the command as an array of words (serve = [\"./serve\", \"--port\", \"{{port}}\"])", a_type(&serve));
    };
    let words = words
        .into_iter()
        .map(|w| match w {
            toml::Value::String(s) => expand_env(&s),
            other => bail!(
                "serve in the profile holds {}: every word is text",
                a_type(&other)
            ),
        })
        .collect::<Result<_>>()?;
    Ok(Some(words))
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
    use crate::archive::record::FirstTokenOf;
    use crate::args::judged::run_floors;
    use crate::args::run::RunArgs;
    use std::path::PathBuf;
    use std::time::Duration;

    /// The settings of `run`'s command line `argv` (from `run` on) with the profile `text`
    /// (in folder `dir`) laid under them.
    fn merged_over(argv: &[&str], text: &str, dir: &str) -> Result<RunArgs> {
        let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
        merge(&argv, read(text), Path::new(dir))
    }

    /// The default settings with the profile `text` (in folder `dir`) laid under them, no flag
    /// given.
    fn applied(text: &str, dir: &str) -> Result<RunArgs> {
        merged_over(&["run"], text, dir)
    }

    /// `applied`'s error, as the gate prints it.
    fn refused(text: &str) -> String {
        format!("{:#}", applied(text, "/p").expect_err(text))
    }

    /// A profile's text as TOML reads it (`load` also refuses a key that is not a flag).
    fn read(text: &str) -> Profile {
        Profile {
            keys: toml::from_str(text).unwrap(),
        }
    }

    /// The profile `text` as `load` reads it from a file.
    fn loaded(text: &str) -> Result<Profile> {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("p.toml");
        std::fs::write(&path, text).unwrap();
        load(&path)
    }

    /// A profile that is not TOML, or not a profile, is one line of bounded length naming
    /// where: a 10,000-bracket line once made a 10 KB message of its excerpt (issue 30).
    #[test]
    fn a_bad_profile_is_one_short_line_saying_where() {
        let said = |text: &str| format!("{:#}", loaded(text).unwrap_err());
        let deep = said(&format!("x = {}{}", "[".repeat(5000), "]".repeat(5000)));
        assert_eq!(deep.lines().count(), 1, "{deep}");
        assert!(deep.len() < 400, "{} bytes: {deep}", deep.len());
        assert!(deep.contains("is not valid: line 1, column "), "{deep}");
        let long = said(&format!("{} = 1", "k".repeat(5000)));
        assert_eq!(long.lines().count(), 1, "{long}");
        assert!(long.len() < 400, "{} bytes: {long}", long.len());
        assert!(long.contains("unknown key `kkkk"), "{long}");
        let unknown = said("\n\nflor = 60\n");
        assert!(
            unknown.contains("is not valid: unknown key `flor`"),
            "{unknown}"
        );
        for not_a_key in [
            "profile = \"x\"",
            "serve_cmd = \"x\"",
            "json = true",
            "help = true",
        ] {
            assert!(said(not_a_key).contains("unknown key"), "{not_a_key}");
        }
        assert!(loaded("floor = 60\nserve = [\"s\"]\n").is_ok());
    }

    /// Every flag of `run` is a profile key of the same name (underscores for hyphens), but
    /// the invocation's own ([`NOT_KEYS`]), each of which is a flag; `serve` is a key too.
    #[test]
    fn every_run_flag_but_the_invocations_own_is_a_profile_key() {
        let run = run_command();
        let mut keys = 0;
        for arg in run.get_arguments() {
            let id = arg.get_id().as_str();
            let is_key = key_arg(&run, id).is_some();
            assert_eq!(
                is_key,
                !NOT_KEYS.contains(&id) && id != "serve",
                "{id}: a key exactly when it is a flag not among NOT_KEYS"
            );
            keys += usize::from(is_key);
        }
        assert!(keys > 60, "{keys} keys: the command's flags were not read");
        for id in NOT_KEYS.iter().chain(RELATIVE_PATHS.iter()) {
            assert!(
                run.get_arguments().any(|a| a.get_id() == *id),
                "{id} is named here and is no flag of run"
            );
        }
        assert!(key_arg(&run, "flor").is_none());
    }

    #[test]
    fn the_command_line_wins_over_the_profile_and_the_profile_over_defaults() {
        let merged = merged_over(
            &["run", "--floor", "70"],
            "floor = 80.0\nfirst_token_ms = 250\nreplies = 5\ngrace = 2.5\nprompts = \"p.jsonl\"\n\
             fast_route = \"route: npu-fast\"\nserve = [\"./serve\", \"--port\", \"{port}\"]\n\
             [extra_body]\ncache_prompt = false\n",
            "/etc/gates",
        )
        .unwrap();
        assert_eq!(merged.limits.floor, Some(70.0), "the command line wins");
        assert_eq!(merged.limits.first_token_ms, Some(250.0));
        assert_eq!(merged.replies, 5);
        assert_eq!(merged.grace, Duration::from_millis(2500));
        assert_eq!(merged.prompts, Some(PathBuf::from("/etc/gates/p.jsonl")));
        assert_eq!(merged.limits.fast_route.as_deref(), Some("route: npu-fast"));
        assert_eq!(merged.serve, vec!["./serve", "--port", "{port}"]);
        assert_eq!(
            merged.extra_body.as_deref(),
            Some(r#"{"cache_prompt":false}"#)
        );
        assert_eq!(merged.max_tokens, 64, "the default where neither says");
        // The command line's serve command wins over the profile's, as any flag does.
        let own = merged_over(&["run", "--", "./mine"], "serve = [\"./theirs\"]", "/").unwrap();
        assert_eq!(own.serve, vec!["./mine"]);
        // A value that looks like a flag is the key's value, not a flag of its own.
        let dash = applied("slow_route = \"--floor\"\n", "/").unwrap();
        assert_eq!(dash.limits.slow_route.as_deref(), Some("--floor"));
        assert_eq!(dash.judged().over(run_floors()).floor, 60.0, "the default");
    }

    #[test]
    fn bad_values_are_refused_by_the_flags_own_bounds_naming_the_key() {
        // Each is refused with the key and the bounds, never a panic: values the command line
        // refuses are refused from a profile too.
        for (text, says) in [
            ("grace = -1", "grace in the profile: "),
            (
                "grace = 1e30",
                "grace in the profile: 1000000000000000000000000000000 s is out of range",
            ),
            ("grace = 1e19", "at most 86400"),
            ("ready_timeout = 1e300", "at most 86400"),
            ("hold_timeout = nan", "hold_timeout in the profile"),
            ("reply_timeout = 0", "reply_timeout in the profile"),
            (
                "replies = 0",
                "replies in the profile: 0 replies is out of range (1 to 10000)",
            ),
            ("replies = -1", "replies in the profile: -1 replies"),
            ("replies = 10001", "1 to 10000"),
            ("max_tokens = 0", "max_tokens in the profile"),
            ("warmup = -1", "0 to 100"),
            (
                "warmup = 101",
                "warmup in the profile: 101 warm-up replies is out of range (0 to 100)",
            ),
            ("max_tokens = 5000000000", "max_tokens in the profile"),
            ("floor = \"fast\"", "floor in the profile: \"fast\""),
            (
                "deterministic = 1",
                "deterministic in the profile is an integer: give true or false",
            ),
            (
                "temperature = 3",
                "temperature in the profile: temperature 3 is out of range",
            ),
            ("seed = -5", "seed in the profile: seed -5 is out of range"),
            (
                "baseline_answers = \"maybe\"",
                "baseline_answers in the profile",
            ),
            ("soak = \"forever\"", "soak in the profile"),
            (
                "serve = \"./serve\"",
                "serve in the profile is a string: give the command as an array",
            ),
            (
                "serve = [\"./serve\", 1]",
                "serve in the profile holds an integer",
            ),
        ] {
            let e = refused(text);
            assert!(e.contains(says), "{text}: {e}");
            assert_eq!(e.lines().count(), 1, "{text}: {e}");
        }
        let merged = applied("grace = 86400\nreplies = 10000\nwarmup = 100", ".").unwrap();
        assert_eq!(
            (merged.grace.as_secs(), merged.replies, merged.warmup),
            (86_400, 10_000, 100)
        );
        assert_eq!(
            applied("", ".").unwrap().warmup,
            0,
            "no warm-ups unless asked"
        );
        // A switch set false is the default; true sets it.
        assert!(
            !applied("deterministic = false", ".")
                .unwrap()
                .determinism
                .deterministic
        );
        let det = applied("deterministic = true\ntemperature = 0", ".").unwrap();
        assert!(det.determinism.deterministic);
    }

    /// A hostile value is said in one bounded line: escape codes and newlines escaped, a
    /// megabyte cut.
    #[test]
    fn a_hostile_value_is_one_short_line() {
        let long = "x".repeat(100_000);
        for text in [
            format!("first_token_of = \"{long}\""),
            format!("floor = \"{long}\""),
            "output_checks = \"\\u001b[31mred\\nline\"".to_string(),
            "floor = \"\\u001b[2J\\n9\"".to_string(),
            format!("\"\\u001b[31m{long}\" = 1"),
        ] {
            let e = match read_text(&text, "p.toml") {
                Ok(profile) => format!(
                    "{:#}",
                    merge(&["run".into()], profile, Path::new("/")).unwrap_err()
                ),
                Err(e) => format!("{e:#}"),
            };
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(e.chars().count() < 700, "{} bytes: {}", e.len(), &e[..200]);
            assert!(!e.contains('\u{1b}'), "{e}");
        }
    }

    /// Flags that need another, or conflict with one, are held to it across the profile and
    /// the command line, as on one command line.
    #[test]
    fn the_profile_and_the_command_line_are_checked_together() {
        let e = format!("{:#}", applied("serve_log = \"s.log\"\n", "/").unwrap_err());
        assert!(e.contains("--url"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        let with_url = merged_over(
            &["run", "--url", "http://127.0.0.1:1/"],
            "serve_log = \"s.log\"\n",
            "/g",
        )
        .unwrap();
        assert_eq!(with_url.serve_log, Some(PathBuf::from("/g/s.log")));
        let e = format!(
            "{:#}",
            applied("stand_in = true\nserve = [\"./s\"]\n", "/").unwrap_err()
        );
        assert!(e.contains("--stand-in asks for the built-in serve"), "{e}");
        let e = format!(
            "{:#}",
            merged_over(&["run", "--stand-in"], "serve = [\"./s\"]\n", "/").unwrap_err()
        );
        assert!(e.contains("--stand-in asks for the built-in serve"), "{e}");
    }

    #[test]
    fn the_output_keys_are_read_and_bounded() {
        let merged = applied(
            "output_checks = \"off\"\nloop_share = 0.7\nstutter_run = 6\nlength_share = 0.2\n",
            "/p",
        )
        .unwrap();
        let o = merged.output_checks.over(Default::default());
        assert!(o.off);
        assert_eq!(
            (o.loop_share, o.stutter_run, o.length_share),
            (Some(0.7), Some(6), Some(0.2))
        );
        for (text, said) in [
            (
                "output_checks = \"maybe\"\n",
                "output_checks in the profile: ",
            ),
            ("loop_share = 1.5\n", "loop_share in the profile: "),
            ("stutter_run = 1\n", "stutter_run in the profile: "),
        ] {
            let e = refused(text);
            assert!(e.starts_with(said), "{text}: {e}");
        }
        assert!(refused("output_checks = \"maybe\"\n").contains("maybe"));
        assert!(refused("loop_share = 1.5\n").contains("1.5"));
    }

    #[test]
    fn the_re_anchor_keys_are_read_and_bounded() {
        let text = "reference_reanchor = 3\n[continue_body]\ncontinue_final_message = true\nadd_generation_prompt = false\n";
        let merged = merged_over(&["run", "--reference", "/r"], text, "/p").unwrap();
        assert_eq!(merged.reference.reference_reanchor, Some(3));
        assert_eq!(
            merged.continue_body.as_deref(),
            Some(r#"{"add_generation_prompt":false,"continue_final_message":true}"#)
        );
        // Without a reference the table waits: the profile of a serve that needs it (vLLM's)
        // runs without one, where the flag alone would be refused.
        let alone = applied(text, "/p").unwrap();
        assert_eq!(alone.continue_body, None);
        let from_profile = applied(&format!("reference = \"ref\"\n{text}"), "/p").unwrap();
        assert!(
            from_profile.continue_body.is_some(),
            "a profile's reference counts"
        );
        assert_eq!(
            from_profile.reference.reference,
            Some(PathBuf::from("/p/ref"))
        );
        let e = refused("reference_reanchor = 65\n");
        assert!(
            e.contains("reference_reanchor in the profile: --reference-reanchor is a count"),
            "{e}"
        );
    }

    #[test]
    fn the_first_token_of_key_is_read_refused_in_one_line_and_the_command_line_wins() {
        let content = "first_token_of = \"content\"\n";
        assert_eq!(
            applied(content, "/p").unwrap().limits.first_token_of,
            Some(FirstTokenOf::Content)
        );
        assert_eq!(applied("", "/p").unwrap().limits.first_token_of, None);
        let merged = merged_over(&["run", "--first-token-of", "any"], content, "/p").unwrap();
        assert_eq!(
            merged.limits.first_token_of,
            Some(FirstTokenOf::Any),
            "the command line wins"
        );
        let e = refused("first_token_of = \"other\"\n");
        assert!(
            e.starts_with("first_token_of in the profile: \"other\" is not a first token"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
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
                "depths in the profile: \"1.5\" is not a depth",
            ),
            (
                "depths = true",
                "depths in the profile is a boolean: give the flag's value",
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
            let e = refused(text);
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
            let e = refused(text);
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
                "max_memory_regression in the profile: ",
            ),
            (
                "max_startup_regression = -1.0\n",
                "max_startup_regression in the profile: ",
            ),
            (
                "cold_first_token_ms = \"0s\"\n",
                "cold_first_token_ms in the profile: \"0s\" is not a duration above 0",
            ),
            (
                "device_memory = \"m\"\ndevice_memory_unit = \"MB\"\n",
                "device_memory_unit in the profile: ",
            ),
            ("device_memory_unit = \"KiB\"\n", "with the profile: "),
        ] {
            let e = refused(text);
            assert!(e.starts_with(says), "{text}: {e}");
        }
        assert!(refused("device_memory_unit = \"KiB\"\n").contains("--device-memory"));
        // The command line wins over each, as over every key.
        let cli = merged_over(&["run", "--memory-warm", "7"], "memory_warm = 5\n", "/").unwrap();
        assert_eq!(cli.footprint.memory_warm, Some(7));
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
        let merged = merged_over(
            &["run", "--device-temp", "/given"],
            "device_temp = \"/p\"",
            ".",
        )
        .unwrap();
        assert_eq!(
            merged.device_temp,
            Some(PathBuf::from("/given")),
            "the command line wins"
        );
        // The box's paths are where the gate runs, not the profile's folder's.
        let boxed = applied(
            "out = \"runs/x\"\nhold = \"h.lock\"\nreference_noise = [\"a\", \"/b\"]\n",
            "/etc/gates",
        )
        .unwrap();
        assert_eq!(boxed.out, Some(PathBuf::from("runs/x")));
        assert_eq!(boxed.hold, Some(PathBuf::from("h.lock")));
        assert_eq!(
            boxed.reference.reference_noise,
            vec![PathBuf::from("/etc/gates/a"), PathBuf::from("/b")]
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
        let merged = applied(
            "serve = [\"${NPU_SERVE_SMOKE_TEST_BIN}\", \"--port\", \"{port}\"]",
            "/",
        )
        .unwrap();
        assert_eq!(merged.serve, vec!["/opt/serve", "--port", "{port}"]);
    }

    #[test]
    fn the_slo_is_the_flags_string_or_a_table_held_to_its_parser() {
        for text in [
            "slo = \"ttft=600ms,tpot=50ms\"\nmin_goodput = 0.95\n",
            "slo = { ttft = \"0.6s\", TPOT = \"50ms\" }\nmin_goodput = 0.95\n",
        ] {
            let s = applied(text, ".").unwrap().lines.goodput;
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
                "slo in the profile: ttft is an integer: give it as text",
            ),
            ("slo = 600\n", "slo in the profile: "),
            (
                "slo = \"ttft=1ms\"\nmin_goodput = 1.5\n",
                "min_goodput in the profile",
            ),
        ] {
            let e = refused(text);
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
