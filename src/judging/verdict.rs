//! The verdict: a pure function from a recorded run and its floors to the lines a user reads.
//!
//! No I/O here. `run` calls [`judge`] on what it just recorded; `judge DIR` calls it on what an
//! archive holds; both print the same lines for the same evidence and floors.

use std::fmt;

use anyhow::{bail, Context, Result};
use regex::Regex;

use crate::archive::record::{LoadSnapshot, ReplyRecord, Startup, StopRecord};
use crate::judging::measure::{measure, median, median_ci95, ReplyMetrics, CI_MIN_VALUES};
use crate::judging::serve_log::LogScan;

/// The floors as a run records them; the archive owns the type.
pub use crate::archive::record::{Figures, Floors, Line, Outcome, Status, Verdict};

/// [`Floors`], checked and with the route patterns compiled.
#[derive(Debug, Clone)]
pub struct Criteria {
    floors: Floors,
    fast: Option<Regex>,
    slow: Option<Regex>,
}

impl Criteria {
    /// Check the floors make sense and compile the route patterns.
    pub fn new(floors: Floors) -> Result<Self> {
        if !floors.floor.is_finite() || floors.floor < 0.0 {
            bail!(
                "--floor must be a number of tok/s, 0 or more (got {})",
                floors.floor
            );
        }
        if !floors.first_token_ms.is_finite() || floors.first_token_ms <= 0.0 {
            bail!(
                "--first-token-ms must be a number of ms above 0 (got {})",
                floors.first_token_ms
            );
        }
        if let Some(t) = floors.busy_skip {
            if !t.is_finite() || !(0.0..=1.0).contains(&t) {
                bail!(
                    "--busy-skip is a share from 0 to 1 (got {t}): 0.2 means 20% of the time the serve was ready to run"
                );
            }
        }
        if let (Some(fast), Some(slow)) = (&floors.fast_route, &floors.slow_route) {
            if fast == slow {
                bail!("--fast-route and --slow-route are the same pattern /{fast}/: no log could pass the route");
            }
        }
        let compile = |flag: &str, p: &Option<String>| -> Result<Option<Regex>> {
            p.as_deref()
                .map(|p| Regex::new(p).with_context(|| format!("{flag} is not a valid regex")))
                .transpose()
        };
        Ok(Criteria {
            fast: compile("--fast-route", &floors.fast_route)?,
            slow: compile("--slow-route", &floors.slow_route)?,
            floors,
        })
    }

    /// The floors these criteria were built from.
    pub fn floors(&self) -> &Floors {
        &self.floors
    }

    /// Scan a serve log for these criteria's route patterns, as a stream.
    pub fn scan_log(&self, log: impl std::io::Read) -> std::io::Result<LogScan> {
        LogScan::read(log, self.fast.as_ref(), self.slow.as_ref())
    }

    /// Scan a serve log already in memory (hand-made runs).
    pub fn scan_log_text(&self, log: &str) -> LogScan {
        LogScan::of_text(log, self.fast.as_ref(), self.slow.as_ref())
    }
}

/// Everything a verdict is a function of, besides the criteria.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The replies made, in order.
    pub replies: &'a [ReplyRecord],
    /// How many replies were to be made.
    pub replies_planned: usize,
    /// How the serve came up.
    pub startup: &'a Startup,
    /// What the serve's log says, scanned with these criteria's patterns; `None` when there is
    /// no log to judge (attached without `--serve-log`).
    pub serve_log: Option<&'a LogScan>,
    /// The box's load before the serve started; `None` when not recorded.
    pub load: Option<&'a LoadSnapshot>,
    /// The signal that interrupted the run, e.g. `SIGTERM`.
    pub interrupted: Option<&'a str>,
    /// Why the device hold was not acquired (the run is then a SKIP).
    pub hold_not_acquired: Option<&'a str>,
    /// How the serve was stopped, and the grace it had (s).
    pub stop: Option<(&'a StopRecord, f64)>,
    /// The serve's exit during the replies.
    pub serve_died: Option<&'a str>,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Status::Ok => "ok",
            Status::Fail => "FAIL",
            Status::Info => "info",
        })
    }
}

impl Figures {
    /// A median's figures: over `values` of `replies`, held to `floor` or `limit`.
    fn median(unit: &str, values: &[f64], replies: usize) -> Figures {
        Figures {
            unit: Some(unit.to_string()),
            median: median(values),
            values: Some(values.len()),
            replies: Some(replies),
            interval_95: median_ci95(values).map(|(lo, hi)| [lo, hi]),
            ..Figures::default()
        }
    }
}

impl Line {
    fn new(check: &str, status: Status, text: impl Into<String>) -> Self {
        Line {
            check: check.to_string(),
            status,
            text: text.into(),
            figures: None,
        }
    }

    fn with(mut self, figures: Figures) -> Self {
        self.figures = Some(figures);
        self
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A line can carry the serve's words: its control characters are shown, not sent to
        // the terminal.
        write!(
            f,
            "{:<12} {:<5} {}",
            self.check,
            self.status,
            visible(&self.text)
        )
    }
}

impl Outcome {
    /// The result in one word, as result.json's `result` has it: `PASS`, `FAIL`, `SKIP`,
    /// `INTERRUPTED`.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Skip { .. } => "SKIP",
            Outcome::Interrupted { .. } => "INTERRUPTED",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pass => f.write_str("PASS"),
            Outcome::Fail => f.write_str("FAIL"),
            Outcome::Skip {
                reason,
                advice: None,
            } => write!(f, "SKIP ({reason})"),
            Outcome::Skip {
                reason,
                advice: Some(advice),
            } => write!(f, "SKIP ({reason}); {advice}"),
            Outcome::Interrupted { signal } => write!(f, "INTERRUPTED (by {signal})"),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        writeln!(f, "RESULT: {}", self.outcome)
    }
}

/// Judge a run. RESULT is PASS exactly when every line that is not info is ok (and nothing
/// interrupted the run).
pub fn judge(e: &Evidence<'_>, c: &Criteria) -> Verdict {
    let mut lines = Vec::new();
    if let Some(reason) = e.hold_not_acquired {
        // Nothing was launched: there is nothing to judge but the wait.
        lines.push(Line::new("hold", Status::Info, reason));
    } else {
        if let Some(line) = serve_line(e) {
            lines.push(line);
        }
        lines.push(route_line(e.serve_log, c, e.interrupted.is_some()));
        if e.startup.is_ready() {
            let metrics: Vec<ReplyMetrics> = e.replies.iter().map(measure).collect();
            lines.push(rate_line(&metrics, c.floors.floor));
            lines.push(first_token_line(
                &metrics,
                c.floors.first_token_ms,
                e.replies,
            ));
            lines.push(content_line(e.replies, e.replies_planned, e.serve_died));
        }
        if let Some(line) = stop_line(e.stop) {
            lines.push(line);
        }
    }
    // Only a failure of timing alone can be put down to the box; route, content and a serve
    // that did not come up are never excused.
    let timing_failed = lines
        .iter()
        .any(|l| l.status == Status::Fail && (l.check == "rate" || l.check == "first-token"));
    let timing_only = timing_failed
        && lines
            .iter()
            .all(|l| l.status != Status::Fail || l.check == "rate" || l.check == "first-token");
    let contention = e.load.and_then(Contention::of);
    if let Some(load) = e.load {
        let mut text = format!(
            "1-minute load average {:.1} on {} CPUs",
            load.load1, load.ncpu
        );
        if let Some(d) = &load.during {
            if let Some(w) = d.wait_fraction {
                text.push_str(&format!(
                    "; during the replies the serve waited for a CPU {:.0}% of the time it was ready to run",
                    w * 100.0
                ));
            } else if let Some(p) = d.cpu_some_avg10_max {
                text.push_str(&format!(
                    "; during the replies CPU pressure (some, avg10) peaked at {p:.1}%"
                ));
            }
        }
        if let (true, Some(busy)) = (timing_only, &contention) {
            text.push_str(&busy_note(busy, load, c.floors.busy_skip));
        }
        let during = load.during.as_ref();
        lines.push(Line::new("load", Status::Info, text).with(Figures {
            load1: Some(load.load1),
            ncpu: Some(load.ncpu),
            serve_cpu_wait: during.and_then(|d| d.wait_fraction),
            cpu_pressure_pct: during.and_then(|d| d.cpu_some_avg10_max),
            ..Figures::default()
        }));
    }
    let busy_skip = match (timing_only, &contention, c.floors.busy_skip) {
        (true, Some(c), Some(threshold)) if c.value() >= threshold => Some(c),
        _ => None,
    };
    let outcome = if let Some(signal) = e.interrupted {
        Outcome::Interrupted {
            signal: signal.to_string(),
        }
    } else if let Some(reason) = e.hold_not_acquired {
        Outcome::Skip {
            reason: reason.to_string(),
            advice: None,
        }
    } else if let Some(c) = busy_skip {
        Outcome::Skip {
            reason: format!("busy box: {}", c.describe()),
            advice: Some("re-run on a quiet box".to_string()),
        }
    } else if lines.iter().any(|l| l.status == Status::Fail) {
        Outcome::Fail
    } else {
        Outcome::Pass
    };
    Verdict { lines, outcome }
}

/// `x` with at most 2 decimals and no trailing zeros: 10, 2, 2.5.
fn trim_float(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The serve's CPU-wait fraction at or above which a box counts as busy.
pub const BUSY_WAIT_FRACTION: f64 = 0.10;
/// The load per CPU at or above which a box counts as busy, where the wait is not measurable.
pub const BUSY_LOAD_PER_CPU: f64 = 1.0;

/// How contended the box was, by the best measure the run has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Contention {
    /// The serve's CPU-wait fraction during the replies.
    Wait(f64),
    /// The highest 1-minute load per CPU, before or during the replies.
    LoadPerCpu(f64),
}

impl Contention {
    fn of(load: &LoadSnapshot) -> Option<Contention> {
        if let Some(w) = load.during.as_ref().and_then(|d| d.wait_fraction) {
            return Some(Contention::Wait(w));
        }
        if load.ncpu == 0 {
            return None;
        }
        let peak = load
            .during
            .as_ref()
            .map_or(load.load1, |d| d.load1_max.max(load.load1));
        Some(Contention::LoadPerCpu(peak / load.ncpu as f64))
    }

    fn value(&self) -> f64 {
        match *self {
            Contention::Wait(v) | Contention::LoadPerCpu(v) => v,
        }
    }

    /// The level at or above which this measure counts as busy: the `--busy-skip` threshold
    /// when one is given (one threshold decides both the note and the SKIP), else the
    /// default for the measure.
    fn busy_level(&self, busy_skip: Option<f64>) -> f64 {
        match (busy_skip, self) {
            (Some(t), _) => t,
            (None, Contention::Wait(_)) => BUSY_WAIT_FRACTION,
            (None, Contention::LoadPerCpu(_)) => BUSY_LOAD_PER_CPU,
        }
    }

    fn busy(&self, busy_skip: Option<f64>) -> bool {
        self.value() >= self.busy_level(busy_skip)
    }

    fn describe(&self) -> String {
        match *self {
            Contention::Wait(w) => format!(
                "the serve waited for a CPU {:.0}% of the time it was ready to run",
                w * 100.0
            ),
            Contention::LoadPerCpu(l) => format!("the load was {l:.1} per CPU"),
        }
    }

    fn level(&self, busy_skip: Option<f64>) -> String {
        let level = self.busy_level(busy_skip);
        match self {
            Contention::Wait(_) => format!("{}%", trim_float(level * 100.0)),
            Contention::LoadPerCpu(_) => format!("{level:.1} per CPU"),
        }
    }
}

/// What the load line adds when only timing failed: whether the box or the serve is to blame.
fn busy_note(c: &Contention, load: &LoadSnapshot, busy_skip: Option<f64>) -> String {
    // The wait fraction is already on the line; the load fallback is not.
    let measure = match c {
        Contention::Wait(_) => String::new(),
        Contention::LoadPerCpu(_) => format!("{}, ", c.describe()),
    };
    if !c.busy(busy_skip) {
        return format!(
            "; the box was quiet ({measure}under the busy level of {}), so the slowness is the serve's own",
            c.level(busy_skip)
        );
    }
    let mut note = format!(
        "; a busy box is the likely cause ({measure}at or above the busy level of {}): re-run on a quiet box",
        c.level(busy_skip)
    );
    let top: Vec<String> = load
        .during
        .iter()
        .flat_map(|d| d.top.iter().take(3))
        .map(|t| {
            let count = if t.count > 1 {
                format!(" x{}", t.count)
            } else {
                String::new()
            };
            format!("{}{count} {:.0}%", t.name, t.cpu_pct)
        })
        .collect();
    if !top.is_empty() {
        note.push_str(&format!(
            "; most CPU during the replies: {}",
            top.join(", ")
        ));
    }
    note
}

/// An info line when the serve had to be killed: a serve that ignores SIGTERM holds the
/// device past its stop, and the reader should know.
fn stop_line(stop: Option<(&StopRecord, f64)>) -> Option<Line> {
    let (s, grace_s) = stop?;
    let mut notes = Vec::new();
    let others = match s.group_killed {
        0 => String::new(),
        n => format!(" with {n} other process(es) of its group"),
    };
    if s.killed && s.cut_short {
        notes.push(format!(
            "the serve was killed (SIGKILL){others} at a second signal, before its grace ran out"
        ));
    } else if s.killed {
        notes.push(format!(
            "the serve did not exit within the {grace_s} s grace after SIGTERM and was killed (SIGKILL){others}"
        ));
    } else if s.group_killed > 0 && s.cut_short {
        notes.push(format!(
            "the serve exited, but {} other process(es) of its group were killed (SIGKILL) at a second signal",
            s.group_killed
        ));
    } else if s.group_killed > 0 {
        notes.push(format!(
            "the serve exited, but {} other process(es) of its group did not within the {grace_s} s grace after SIGTERM and were killed (SIGKILL)",
            s.group_killed
        ));
    }
    if s.escaped_killed > 0 {
        let mut note = format!(
            "{} process(es) had left the serve's process group and were killed after it stopped",
            s.escaped_killed
        );
        if s.cut_short && !s.killed && s.group_killed == 0 {
            note.push_str(" (SIGKILL at a second signal, before their grace ran out)");
        }
        notes.push(note);
    }
    if s.left_running > 0 {
        notes.push(format!(
            "{} process(es) of the serve were still running 5 s after SIGKILL (stuck in the kernel?); the gate could not stop them",
            s.left_running
        ));
    }
    if notes.is_empty() {
        return None;
    }
    Some(Line::new("stop", Status::Info, notes.join("; ")))
}

fn serve_line(e: &Evidence<'_>) -> Option<Line> {
    let tail = || log_tail(e.serve_log);
    let text = match e.startup {
        Startup::Ready { .. } => return None,
        Startup::Exited { status } => {
            format!("the serve exited ({status}) before it was ready{}", tail())
        }
        Startup::NotReady {
            timeout_s,
            url,
            not_ready_answers,
            last_probe,
        } => {
            let polled = match url.as_deref() {
                Some(u) => {
                    let u = u.trim_end_matches('/');
                    format!("neither {u}/health nor {u}/v1/models answered 200")
                }
                None => "neither /health nor /v1/models answered 200".to_string(),
            };
            let answers = match not_ready_answers {
                Some(0) => match last_probe {
                    Some(why) => format!("; it gave no HTTP answer: {why}"),
                    None => "; it gave no HTTP answer".to_string(),
                },
                Some(1) => "; it gave 1 not-ready answer".to_string(),
                Some(n) => format!("; it gave {n} not-ready answers"),
                None => String::new(),
            };
            format!(
                "the serve was not ready after {timeout_s} s ({polled}{answers}){}",
                tail()
            )
        }
        Startup::SpawnFailed { error } => format!("the serve could not be started: {error}"),
        Startup::Interrupted => {
            return Some(Line::new(
                "serve",
                Status::Info,
                "interrupted before the serve was ready",
            ))
        }
    };
    Some(Line::new("serve", Status::Fail, text))
}

/// "; last log lines: ..." for a FAIL line: the log's last non-blank lines, quoted. Nothing
/// for a run with no log (a serve already running, attached without `--serve-log`): there is
/// no log to call empty.
fn log_tail(log: Option<&LogScan>) -> String {
    let Some(log) = log else {
        return String::new();
    };
    if log.tail.is_empty() {
        return "; its log is empty".to_string();
    }
    let quoted: Vec<String> = log.tail.iter().map(|l| quote(l, 200)).collect();
    format!("; last log lines: {}", quoted.join(" | "))
}

fn route_line(log: Option<&LogScan>, c: &Criteria, interrupted: bool) -> Line {
    if c.fast.is_none() && c.slow.is_none() {
        return Line::new(
            "route",
            Status::Info,
            "no route patterns given (--fast-route, --slow-route)",
        );
    }
    let Some(log) = log else {
        return Line::new(
            "route",
            Status::Info,
            "no serve log to judge the route by (attached to a running serve: give --serve-log FILE)",
        );
    };
    if let Some(why) = &log.unread {
        // A log that could not be read never passes the route; one left unread because the
        // run was stopped is not judged, as nothing else of an interrupted run is.
        let status = if interrupted {
            Status::Info
        } else {
            Status::Fail
        };
        return Line::new("route", status, format!("not judged: {why}"));
    }
    let mut problems = Vec::new();
    if let Some(fast) = &c.fast {
        if !log.fast_matched {
            problems.push(format!(
                "the serve log does not name the fast route /{}/",
                fast.as_str()
            ));
        }
    }
    if let (Some(slow), Some(line)) = (&c.slow, &log.slow_line) {
        problems.push(format!(
            "the serve log names the slow route /{}/: {}",
            slow.as_str(),
            quote(line, 120)
        ));
    }
    if !problems.is_empty() {
        return Line::new("route", Status::Fail, problems.join("; "));
    }
    let text = match (&c.fast, &c.slow) {
        (Some(_), Some(_)) => "the serve log names the fast route, not the slow one",
        (Some(_), None) => "the serve log names the fast route",
        _ => "the serve log does not name the slow route",
    };
    Line::new("route", Status::Ok, text)
}

fn rate_line(metrics: &[ReplyMetrics], floor: f64) -> Line {
    let rates: Vec<Option<f64>> = metrics.iter().map(|m| m.rate_tok_s).collect();
    let have: Vec<f64> = rates.iter().flatten().copied().collect();
    let each: Vec<String> = rates
        .iter()
        .map(|r| r.map_or("-".to_string(), |r| format!("{r:.1}")))
        .collect();
    let disbelieved = usage_not_believed(metrics);
    let Some(med) = median(&have) else {
        let text = if metrics.is_empty() {
            "no replies to measure".to_string()
        } else {
            format!(
                "no reply has a rate: each needs text that arrived in at least two reads, \
                 and a reply sent all at once has none (floor {floor:.1}){disbelieved}"
            )
        };
        let figures = Figures {
            floor: Some(floor),
            ..Figures::median("tok/s", &have, metrics.len())
        };
        return Line::new("rate", Status::Fail, text).with(figures);
    };
    let status = if med >= floor {
        Status::Ok
    } else {
        Status::Fail
    };
    let (shown, floor_shown) = distinct(med, floor, 1);
    let over = over_replies(have.len(), metrics.len());
    let trust = what_it_rests_on(&have, floor, "floor", 1);
    let missing: Vec<String> = rates
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_none())
        .map(|(i, _)| (i + 1).to_string())
        .collect();
    let why_missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "; no rate for reply {}: its text did not arrive in at least two reads",
            missing.join(", ")
        )
    };
    Line::new(
        "rate",
        status,
        format!(
            "median {shown} tok/s{over}{} (floor {floor_shown}; each: {}{why_missing}){}{}{disbelieved}",
            trust.interval,
            each.join(", "),
            trust.notes,
            few_gaps(metrics)
        ),
    )
    .with(Figures {
        floor: Some(floor),
        ..Figures::median("tok/s", &have, metrics.len())
    })
}

/// Fewer gaps between a reply's text events than this make its rate a figure of little weight.
const FEW_GAPS: usize = 10;

/// "; few tokens: ..." when the replies with a rate have a median of under [`FEW_GAPS`] gaps
/// between their text events: a rate from 6 gaps (SmolLM2's 7-token answers) moves with one
/// late token, and the reader should know what it rests on.
fn few_gaps(metrics: &[ReplyMetrics]) -> String {
    let gaps: Vec<f64> = metrics
        .iter()
        .filter(|m| m.rate_tok_s.is_some())
        .map(|m| m.text_chunks.saturating_sub(1) as f64)
        .collect();
    match median(&gaps) {
        Some(g) if g < FEW_GAPS as f64 => format!(
            "; few tokens: each rate rests on a median of {g:.0} gaps between tokens, under {FEW_GAPS}: prompts with longer answers measure it better"
        ),
        _ => String::new(),
    }
}

/// "; usage not believed for reply N: ..." for each reply whose usage count claimed more
/// tokens than its streamed text could hold: the reader should know the rate is not the one
/// the serve claimed, and why.
fn usage_not_believed(metrics: &[ReplyMetrics]) -> String {
    metrics
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let u = m.usage_not_believed?;
            Some(format!(
                "; usage not believed for reply {}: it claimed {} tokens for {} {} of {} bytes of text; the rate is from the chunks",
                i + 1,
                u.claimed,
                u.text_chunks,
                if u.text_chunks == 1 { "chunk" } else { "chunks" },
                u.text_bytes
            ))
        })
        .collect()
}

fn first_token_line(metrics: &[ReplyMetrics], limit_ms: f64, replies: &[ReplyRecord]) -> Line {
    let have: Vec<f64> = metrics.iter().filter_map(|m| m.first_token_ms).collect();
    let Some(med) = median(&have) else {
        let text = if metrics.is_empty() {
            "no replies to measure".to_string()
        } else {
            format!("no reply produced a token (limit {limit_ms:.0})")
        };
        let figures = Figures {
            limit: Some(limit_ms),
            ..Figures::median("ms", &have, metrics.len())
        };
        return Line::new("first-token", Status::Fail, text).with(figures);
    };
    let status = if med <= limit_ms {
        Status::Ok
    } else {
        Status::Fail
    };
    let (shown, limit_shown) = distinct(med, limit_ms, 0);
    let over = over_replies(have.len(), metrics.len());
    let trust = what_it_rests_on(&have, limit_ms, "limit", 0);
    Line::new(
        "first-token",
        status,
        format!(
            "median {shown} ms{over}{} (limit {limit_shown}){}{}",
            trust.interval,
            trust.notes,
            prompt_cache_note(replies)
        ),
    )
    .with(Figures {
        limit: Some(limit_ms),
        ..Figures::median("ms", &have, metrics.len())
    })
}

/// Which first token was measured: a cached prompt's skips prompt processing (llama-server:
/// about 145 ms down to 10 ms). Said only where the serve reports it.
fn prompt_cache_note(replies: &[ReplyRecord]) -> String {
    let reported: Vec<u64> = replies
        .iter()
        .filter_map(|r| r.cached_prompt_tokens)
        .collect();
    if reported.is_empty() {
        return String::new();
    }
    match reported.iter().filter(|&&n| n > 0).count() {
        0 => "; no reply reused a cached prompt".to_string(),
        n => format!("; {n} of {} replies reused a cached prompt", replies.len()),
    }
}

/// " over N replies", or " over N of M replies" when some replies have no figure.
fn over_replies(have: usize, of: usize) -> String {
    match (have, of) {
        (1, 1) => " over 1 reply".to_string(),
        (h, o) if h == o => format!(" over {o} replies"),
        (h, o) => format!(" over {h} of {o} replies"),
    }
}

/// What a median rests on: its 95% interval, and the notes a reader needs before trusting it.
struct Trust {
    /// ", 95% interval LO to HI", where there are enough values.
    interval: String,
    /// "; marginal: ..." and/or "; thin: ...".
    notes: String,
}

/// Fewer timed replies than this make a figure too thin to lean on.
const THIN_BELOW: usize = 3;

/// The interval of the median of `values` and how `bound` (a floor or a limit) sits in it.
/// The verdict still follows the median; a bound inside the interval means a re-run may flip
/// it, and the reader should know.
fn what_it_rests_on(values: &[f64], bound: f64, bound_name: &str, decimals: usize) -> Trust {
    let mut notes = String::new();
    let interval = match median_ci95(values) {
        Some((lo, hi)) => {
            if lo <= bound && bound <= hi {
                notes.push_str(&format!(
                    "; marginal: the {bound_name} is inside the median's 95% interval, so a re-run may flip this line"
                ));
            }
            format!(", 95% interval {lo:.decimals$} to {hi:.decimals$}")
        }
        None => String::new(),
    };
    if values.len() < THIN_BELOW {
        notes.push_str(&format!(
            "; thin: fewer than {THIN_BELOW} timed replies, use --replies {CI_MIN_VALUES} or more for an interval"
        ));
    }
    Trust { interval, notes }
}

/// `value` and `bound` formatted with `decimals`, or with more where rounding would show them
/// equal though they differ: "median 60.0 tok/s (floor 60.0)" on a FAIL would read as a bug.
fn distinct(value: f64, bound: f64, decimals: usize) -> (String, String) {
    let show = |d: usize| (format!("{value:.d$}"), format!("{bound:.d$}"));
    if value == bound {
        return show(decimals);
    }
    let most = decimals + 6;
    (decimals..=most)
        .map(show)
        .find(|(v, b)| v != b)
        .unwrap_or_else(|| show(most))
}

fn content_line(replies: &[ReplyRecord], planned: usize, serve_died: Option<&str>) -> Line {
    if replies.is_empty() {
        return Line::new("content", Status::Fail, "no replies were made");
    }
    let mut problems = Vec::new();
    let mut expected = 0;
    for r in replies {
        match check_reply(r) {
            ReplyCheck::Good { expected: e } => expected += usize::from(e),
            ReplyCheck::Bad { text, .. } => problems.push(text),
        }
    }
    if let Some(died) = serve_died {
        problems.push(died.to_string());
    }
    if replies.len() < planned {
        problems.push(format!(
            "only {} of {planned} replies were made",
            replies.len()
        ));
    }
    if !problems.is_empty() {
        return Line::new("content", Status::Fail, problems.join("; "));
    }
    let n = replies.len();
    let all = if n == 1 {
        "1 reply, with content".to_string()
    } else {
        format!("{n} replies, all with content")
    };
    let text = match expected {
        0 => all,
        e if e == n => format!("{all} and the expected answer"),
        e => format!("{all}; {e} with the expected answer"),
    };
    Line::new("content", Status::Ok, text)
}

/// One reply as the content line judges it.
enum ReplyCheck {
    /// Nothing is wrong; `expected` when its prompt said what the answer must match.
    Good { expected: bool },
    /// Something is: in a few words (for the timeline's mark) and in a sentence.
    Bad { word: &'static str, text: String },
}

/// Judge one reply's content: it failed, it has none, or its answer does not match what its
/// prompt expects. A reply cut at max_tokens says so, where that is the likely reason.
fn check_reply(r: &ReplyRecord) -> ReplyCheck {
    let said = quote(&r.content, 80);
    let cut = if r.finish_reason.as_deref() == Some("length") {
        " (it was cut at max_tokens: finish_reason \"length\")"
    } else {
        ""
    };
    if let Some(err) = &r.error {
        let so_far = if r.content.is_empty() {
            String::new()
        } else {
            format!(" after saying {said}")
        };
        return ReplyCheck::Bad {
            word: "error",
            text: format!("reply {} failed{so_far}: {err}", r.index),
        };
    }
    if r.content.trim().is_empty() {
        let only = if r.reasoning.trim().is_empty() {
            ""
        } else {
            " (only reasoning)"
        };
        return ReplyCheck::Bad {
            word: "no content",
            text: format!("reply {} has no content{only}{cut}", r.index),
        };
    }
    let Some(pattern) = &r.expect else {
        return ReplyCheck::Good { expected: false };
    };
    match Regex::new(pattern) {
        Ok(re) if re.is_match(&r.content) => ReplyCheck::Good { expected: true },
        Ok(_) => ReplyCheck::Bad {
            word: "wrong answer",
            text: format!(
                "reply {} said {said}, which does not match /{pattern}/{cut}",
                r.index
            ),
        },
        Err(_) => ReplyCheck::Bad {
            word: "bad expected pattern",
            text: format!(
                "reply {}: the expected pattern /{pattern}/ is not a valid regex",
                r.index
            ),
        },
    }
}

/// What is wrong with one reply, in a few words, as the content line judges it; `None` when
/// nothing is.
pub fn reply_problem(r: &ReplyRecord) -> Option<&'static str> {
    match check_reply(r) {
        ReplyCheck::Good { .. } => None,
        ReplyCheck::Bad { word, .. } => Some(word),
    }
}

/// `s` in double quotes, cut to `max` characters (marked with …), newlines shown as `\n`.
pub fn quote(s: &str, max: usize) -> String {
    let mut out = String::from("\"");
    for (i, ch) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match ch {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            c => push_visible(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// Push `c`, or, for a control character, its escape as Rust writes it (`\u{1b}`): text from
/// the serve (a reply, its log) can hold escape sequences that would recolour a terminal, and
/// bytes XML 1.0 forbids; quoted, they are seen, never acted on.
pub fn push_visible(out: &mut String, c: char) {
    if c.is_control() {
        out.push_str(&format!("\\u{{{:x}}}", c as u32));
    } else {
        out.push(c);
    }
}

/// `s` with every control character but the newline made visible (see [`push_visible`]).
pub fn visible(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c == '\n' {
            out.push(c);
        } else {
            push_visible(&mut out, c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::measure::tests::reply_at;

    const READY: Startup = Startup::Ready {
        after_ms: 1.0,
        probe: String::new(),
        not_ready_answers: 0,
    };

    fn floors() -> Floors {
        Floors {
            floor: 60.0,
            first_token_ms: 600.0,
            fast_route: Some("route: npu-fast".into()),
            slow_route: Some("route: cpu-fallback".into()),
            busy_skip: None,
        }
    }

    fn criteria(f: Floors) -> Criteria {
        Criteria::new(f).unwrap()
    }

    const LOAD: LoadSnapshot = LoadSnapshot {
        load1: 3.1,
        load5: 2.0,
        load15: 1.0,
        ncpu: 32,
        taken: String::new(),
        during: None,
    };

    /// Replies at 100 tok/s with first token at 200 ms: 11 tokens, 10 ms apart after the first.
    fn good() -> ReplyRecord {
        let times: Vec<u64> = (0..11).map(|i| 200 + 10 * i).collect();
        reply_at(&times, None)
    }

    fn judge_with(replies: &[ReplyRecord], log: Option<&str>, f: Floors) -> Verdict {
        let c = criteria(f);
        let log = log.map(|l| c.scan_log_text(l));
        let e = Evidence {
            replies,
            replies_planned: replies.len(),
            startup: &READY,
            serve_log: log.as_ref(),
            load: Some(&LOAD),
            interrupted: None,
            hold_not_acquired: None,
            stop: None,
            serve_died: None,
        };
        judge(&e, &c)
    }

    /// `log` as the verdict sees it, scanned with the usual floors' patterns.
    fn scanned(log: &str) -> LogScan {
        criteria(floors()).scan_log_text(log)
    }

    fn line<'a>(v: &'a Verdict, check: &str) -> &'a Line {
        v.lines
            .iter()
            .find(|l| l.check == check)
            .unwrap_or_else(|| panic!("no {check} line in {v}"))
    }

    const LOG: &str = "loading\nroute: npu-fast\nready\n";

    #[test]
    fn the_outcome_word_is_result_jsons() {
        for o in [
            Outcome::Pass,
            Outcome::Fail,
            Outcome::Skip {
                reason: "r".into(),
                advice: None,
            },
            Outcome::Interrupted {
                signal: "SIGTERM".into(),
            },
        ] {
            assert_eq!(serde_json::to_value(&o).unwrap()["result"], o.word());
        }
    }

    #[test]
    fn busy_skip_is_a_share_and_twenty_is_refused_saying_so() {
        for bad in [20.0, 1.01, -0.1, f64::NAN] {
            let e = Criteria::new(Floors {
                busy_skip: Some(bad),
                ..floors()
            })
            .unwrap_err();
            assert!(e.to_string().contains("0.2 means 20%"), "{bad}: {e}");
        }
        for good in [0.0, 0.2, 1.0] {
            assert!(Criteria::new(Floors {
                busy_skip: Some(good),
                ..floors()
            })
            .is_ok());
        }
    }

    #[test]
    fn a_good_run_reads_as_the_card_shows() {
        let v = judge_with(&[good(), good(), good()], Some(LOG), floors());
        assert_eq!(
            v.to_string(),
            "\
route        ok    the serve log names the fast route, not the slow one
rate         ok    median 100.0 tok/s over 3 replies (floor 60.0; each: 100.0, 100.0, 100.0)
first-token  ok    median 200 ms over 3 replies (limit 600)
content      ok    3 replies, all with content
load         info  1-minute load average 3.1 on 32 CPUs
RESULT: PASS
"
        );
    }

    #[test]
    fn rate_exactly_at_the_floor_is_ok_and_just_under_fails() {
        let at = Floors {
            floor: 100.0,
            ..floors()
        };
        assert_eq!(
            line(&judge_with(&[good()], Some(LOG), at), "rate").status,
            Status::Ok
        );
        let over = Floors {
            floor: 100.001,
            ..floors()
        };
        let v = judge_with(&[good()], Some(LOG), over);
        assert_eq!(line(&v, "rate").status, Status::Fail);
        assert_eq!(v.outcome, Outcome::Fail);
        // Rounding must not show a failing median equal to its floor.
        assert!(
            line(&v, "rate")
                .text
                .contains("median 100.000 tok/s over 1 reply (floor 100.001"),
            "{v}"
        );
    }

    #[test]
    fn only_empty_replies_fail_every_timing_line() {
        let v = judge_with(&[reply_at(&[], None)], Some(LOG), floors());
        assert_eq!(line(&v, "rate").status, Status::Fail);
        assert_eq!(line(&v, "first-token").status, Status::Fail);
    }

    #[test]
    fn a_one_chunk_reply_has_no_rate_and_the_line_says_so() {
        let v = judge_with(&[good(), reply_at(&[150], None)], Some(LOG), floors());
        let rate = line(&v, "rate");
        assert_eq!(rate.status, Status::Ok);
        assert!(rate.text.contains("over 1 of 2 replies"), "{rate:?}");
        assert!(rate.text.contains("each: 100.0, -"), "{rate:?}");
        assert!(rate.text.contains("no rate for reply 2"), "{rate:?}");
        let v = judge_with(&[reply_at(&[150], None)], Some(LOG), floors());
        assert_eq!(line(&v, "rate").status, Status::Fail);
    }

    #[test]
    fn a_reply_sent_all_at_once_has_no_rate_and_fails_the_rate_line() {
        // Ten chunks stamped by the one read that brought them all (a serve, or a proxy in
        // front of it, that buffers the reply): no time between them to take a rate from. An
        // infinite rate would pass any floor.
        let at_once = reply_at(&[150; 10], Some(10));
        let v = judge_with(&[at_once.clone(), at_once], Some(LOG), floors());
        let rate = line(&v, "rate");
        assert_eq!(rate.status, Status::Fail, "{rate:?}");
        assert!(rate.text.contains("sent all at once"), "{rate:?}");
        assert_eq!(line(&v, "first-token").status, Status::Ok);
    }

    #[test]
    fn usage_the_text_cannot_hold_is_not_believed_and_the_rate_line_says_so() {
        // 5 one-word events over 2 s claimed as 1,000,000 tokens: at the claim, 399,633 tok/s.
        let mut lie = reply_at(&[100, 600, 1100, 1600, 2100], Some(1_000_000));
        lie.content = "Paris is the capital ok.".into(); // 24 bytes
        let v = judge_with(&[good(), lie], Some(LOG), floors());
        let rate = line(&v, "rate");
        assert!(rate.text.contains("each: 100.0, 2.0"), "{rate:?}");
        assert!(
            rate.text.ends_with("; usage not believed for reply 2: it claimed 1000000 tokens for 5 chunks of 24 bytes of text; the rate is from the chunks"),
            "{rate:?}"
        );
        // Believed usage adds nothing.
        let v = judge_with(&[good()], Some(LOG), floors());
        assert!(!line(&v, "rate").text.contains("not believed"), "{v}");
        // With no rate at all, the note is still there.
        let v = judge_with(&[reply_at(&[100], Some(50))], Some(LOG), floors());
        assert!(
            line(&v, "rate").text.contains(
                "usage not believed for reply 1: it claimed 50 tokens for 1 chunk of 1 bytes"
            ),
            "{v}"
        );
    }

    #[test]
    fn multi_token_chunks_with_usage_rate_on_the_usage_count() {
        // 6 events 50 ms apart, 4 tokens each: 20 tokens after the first event over 250 ms.
        let mut r = reply_at(&[100, 150, 200, 250, 300, 350], Some(24));
        r.content = " ok ok ok ok".repeat(6);
        let v = judge_with(&[r], Some(LOG), floors());
        assert!(
            line(&v, "rate").text.starts_with("median 80.0 tok/s"),
            "{v}"
        );
    }

    #[test]
    fn a_first_token_just_over_its_limit_shows_the_digits_that_differ() {
        let f = Floors {
            first_token_ms: 199.999,
            ..floors()
        };
        let v = judge_with(&[good()], Some(LOG), f);
        assert_eq!(
            line(&v, "first-token").text,
            "median 200.000 ms over 1 reply (limit 199.999); thin: fewer than 3 timed replies, use --replies 6 or more for an interval"
        );
    }

    #[test]
    fn content_says_how_many_replies_had_an_expected_answer() {
        let mut checked = good();
        checked.content = "Paris.".into();
        checked.expect = Some("(?i)paris".into());
        let v = judge_with(&[checked, good()], Some(LOG), floors());
        assert_eq!(
            line(&v, "content").text,
            "2 replies, all with content; 1 with the expected answer"
        );
    }

    #[test]
    fn first_token_says_which_replies_reused_a_cached_prompt() {
        let mut cached = good();
        cached.cached_prompt_tokens = Some(11);
        let mut fresh = good();
        fresh.cached_prompt_tokens = Some(0);
        let v = judge_with(&[fresh.clone(), cached, good()], Some(LOG), floors());
        assert_eq!(
            line(&v, "first-token").text,
            "median 200 ms over 3 replies (limit 600); 1 of 3 replies reused a cached prompt"
        );
        let v = judge_with(&[fresh], Some(LOG), floors());
        assert!(line(&v, "first-token")
            .text
            .ends_with("; no reply reused a cached prompt"));
        let v = judge_with(&[good()], Some(LOG), floors());
        assert_eq!(line(&v, "first-token").text, "median 200 ms over 1 reply (limit 600); thin: fewer than 3 timed replies, use --replies 6 or more for an interval");
    }

    #[test]
    fn a_reasoning_first_reply_times_its_first_reasoning_token() {
        let mut r = good();
        r.chunks[0].content_chars = 0;
        r.chunks[0].reasoning_chars = 5;
        r.chunks[0].at_ns = 50_000_000;
        let v = judge_with(&[r], Some(LOG), floors());
        assert_eq!(line(&v, "first-token").text, "median 50 ms over 1 reply (limit 600); thin: fewer than 3 timed replies, use --replies 6 or more for an interval");
    }

    #[test]
    fn route_fails_without_the_fast_route_and_with_the_slow_one() {
        let v = judge_with(&[good()], Some("route: cpu-fallback\n"), floors());
        let route = line(&v, "route");
        assert_eq!(route.status, Status::Fail);
        assert!(
            route.text.contains("does not name the fast route"),
            "{route:?}"
        );
        assert!(
            route
                .text
                .contains("names the slow route /route: cpu-fallback/: \"route: cpu-fallback\""),
            "{route:?}"
        );
        assert_eq!(v.outcome, Outcome::Fail);

        let both = "route: npu-fast\nlater: route: cpu-fallback for layer 3\n";
        let v = judge_with(&[good()], Some(both), floors());
        assert_eq!(line(&v, "route").status, Status::Fail);
        assert!(line(&v, "route")
            .text
            .contains("\"later: route: cpu-fallback for layer 3\""));
    }

    #[test]
    fn route_with_one_pattern_or_none() {
        let fast_only = Floors {
            slow_route: None,
            ..floors()
        };
        let v = judge_with(&[good()], Some(LOG), fast_only.clone());
        assert_eq!(line(&v, "route").status, Status::Ok);
        assert_eq!(line(&v, "route").text, "the serve log names the fast route");
        assert_eq!(
            line(&judge_with(&[good()], Some("x"), fast_only), "route").status,
            Status::Fail
        );
        let slow_only = Floors {
            fast_route: None,
            ..floors()
        };
        let v = judge_with(&[good()], Some("x"), slow_only.clone());
        assert_eq!(
            line(&v, "route").text,
            "the serve log does not name the slow route"
        );
        assert_eq!(
            line(
                &judge_with(&[good()], Some(LOG), slow_only.clone()),
                "route"
            )
            .status,
            Status::Ok
        );
        let none = Floors {
            fast_route: None,
            slow_route: None,
            ..floors()
        };
        let v = judge_with(&[good()], Some("route: cpu-fallback"), none);
        assert_eq!(line(&v, "route").status, Status::Info);
        assert_eq!(v.outcome, Outcome::Pass);
    }

    #[test]
    fn no_serve_log_makes_route_info_not_ok() {
        let v = judge_with(&[good()], None, floors());
        assert_eq!(line(&v, "route").status, Status::Info);
        assert!(line(&v, "route").text.contains("--serve-log"));
    }

    #[test]
    fn a_wrong_answer_fails_content_quoting_it() {
        let mut r = good();
        r.content = "The capital of France is London, and it has been for a very long time indeed, they say.".into();
        r.expect = Some("(?i)paris".into());
        let v = judge_with(&[r], Some(LOG), floors());
        let content = line(&v, "content");
        assert_eq!(content.status, Status::Fail);
        assert!(
            content.text.starts_with(
                "reply 1 said \"The capital of France is London, and it has been for a very long time indeed, th…\", which does not match /(?i)paris/"
            ),
            "{content:?}"
        );
    }

    #[test]
    fn a_right_answer_passes_content() {
        let mut r = good();
        r.content = "Paris.".into();
        r.expect = Some("(?i)paris".into());
        let v = judge_with(&[r], Some(LOG), floors());
        assert_eq!(
            line(&v, "content").text,
            "1 reply, with content and the expected answer"
        );
    }

    #[test]
    fn a_reply_that_errored_fails_content_even_with_text() {
        let mut r = good();
        r.error = Some("the stream ended before [DONE]".into());
        let v = judge_with(&[r], Some(LOG), floors());
        let content = line(&v, "content");
        assert_eq!(content.status, Status::Fail);
        assert!(
            content.text.contains("reply 1 failed after saying"),
            "{content:?}"
        );
        assert!(
            content.text.ends_with("the stream ended before [DONE]"),
            "{content:?}"
        );
    }

    #[test]
    fn fewer_replies_than_planned_fail_content() {
        let replies = [good()];
        let scanned_log = scanned(LOG);
        let e = Evidence {
            replies: &replies,
            replies_planned: 3,
            startup: &READY,
            serve_log: Some(&scanned_log),
            load: None,
            interrupted: None,
            hold_not_acquired: None,
            stop: None,
            serve_died: None,
        };
        let v = judge(&e, &criteria(floors()));
        assert_eq!(line(&v, "content").text, "only 1 of 3 replies were made");
    }

    #[test]
    fn a_serve_that_exited_fails_with_its_status_and_log_tail() {
        let startup = Startup::Exited {
            status: "exit status: 3".into(),
        };
        let log = "a\nb\n\nc\nd\ne\nf\nerror: no device\n";
        let scanned_log = scanned(log);
        let e = Evidence {
            replies: &[],
            replies_planned: 3,
            startup: &startup,
            serve_log: Some(&scanned_log),
            load: Some(&LOAD),
            interrupted: None,
            hold_not_acquired: None,
            stop: None,
            serve_died: None,
        };
        let v = judge(&e, &criteria(floors()));
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(
            line(&v, "serve").text,
            "the serve exited (exit status: 3) before it was ready; last log lines: \"c\" | \"d\" | \"e\" | \"f\" | \"error: no device\""
        );
        assert!(v.lines.iter().all(|l| l.check != "rate"));
    }

    #[test]
    fn the_load_line_is_info_and_absent_without_a_load() {
        let v = judge_with(&[good()], Some(LOG), floors());
        assert_eq!(line(&v, "load").status, Status::Info);
        let replies = [good()];
        let scanned_log = scanned(LOG);
        let e = Evidence {
            replies: &replies,
            replies_planned: 1,
            startup: &READY,
            serve_log: Some(&scanned_log),
            load: None,
            interrupted: None,
            hold_not_acquired: None,
            stop: None,
            serve_died: None,
        };
        let v = judge(&e, &criteria(floors()));
        assert!(v.lines.iter().all(|l| l.check != "load"));
        assert_eq!(v.outcome, Outcome::Pass);
    }

    #[test]
    fn an_interrupted_run_is_interrupted_not_passed() {
        let replies = [good()];
        let scanned_log = scanned(LOG);
        let e = Evidence {
            replies: &replies,
            replies_planned: 1,
            startup: &READY,
            serve_log: Some(&scanned_log),
            load: None,
            interrupted: Some("SIGTERM"),
            hold_not_acquired: None,
            stop: None,
            serve_died: None,
        };
        let v = judge(&e, &criteria(floors()));
        assert_eq!(
            v.outcome,
            Outcome::Interrupted {
                signal: "SIGTERM".into()
            }
        );
        assert!(v
            .to_string()
            .ends_with("RESULT: INTERRUPTED (by SIGTERM)\n"));
    }

    #[test]
    fn bad_floors_and_patterns_are_errors() {
        assert!(Criteria::new(Floors {
            floor: -1.0,
            ..floors()
        })
        .is_err());
        assert!(Criteria::new(Floors {
            floor: f64::NAN,
            ..floors()
        })
        .is_err());
        assert!(Criteria::new(Floors {
            first_token_ms: 0.0,
            ..floors()
        })
        .is_err());
        assert!(Criteria::new(Floors {
            fast_route: Some("(".into()),
            ..floors()
        })
        .is_err());
    }

    #[test]
    fn quote_cuts_and_escapes() {
        assert_eq!(quote("a\"b\nc", 80), "\"a\\\"b\\nc\"");
        assert_eq!(quote("abcdef", 3), "\"abc…\"");
        // A colour escape, BEL, \x01, DEL and a C1 control are shown, never passed on.
        assert_eq!(
            quote("\u{1b}[31mred\u{7}\u{1}\u{7f}\u{9b}é", 80),
            "\"\\u{1b}[31mred\\u{7}\\u{1}\\u{7f}\\u{9b}é\""
        );
        assert_eq!(visible("a\tb\nc\u{1b}"), "a\\u{9}b\nc\\u{1b}");
        assert_eq!(visible("plain\ntext"), "plain\ntext");
    }

    #[test]
    fn the_stop_line_says_only_what_happened() {
        let said = |s: StopRecord| stop_line(Some((&s, 10.0))).map(|l| l.text);
        assert_eq!(
            said(StopRecord::default()),
            None,
            "a clean stop adds no line"
        );
        assert_eq!(
            said(StopRecord {
                killed: true,
                group_killed: 2,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve did not exit within the 10 s grace after SIGTERM and was killed (SIGKILL) with 2 other process(es) of its group"
        );
        assert_eq!(
            said(StopRecord {
                group_killed: 1,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve exited, but 1 other process(es) of its group did not within the 10 s grace after SIGTERM and were killed (SIGKILL)"
        );
        assert_eq!(
            said(StopRecord {
                group_killed: 1,
                cut_short: true,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve exited, but 1 other process(es) of its group were killed (SIGKILL) at a second signal"
        );
        assert_eq!(
            said(StopRecord {
                escaped_killed: 1,
                cut_short: true,
                ..StopRecord::default()
            })
            .unwrap(),
            "1 process(es) had left the serve's process group and were killed after it stopped (SIGKILL at a second signal, before their grace ran out)"
        );
        assert_eq!(
            said(StopRecord {
                killed: true,
                cut_short: true,
                escaped_killed: 3,
                ..StopRecord::default()
            })
            .unwrap(),
            "the serve was killed (SIGKILL) at a second signal, before its grace ran out; 3 process(es) had left the serve's process group and were killed after it stopped"
        );
        assert_eq!(
            said(StopRecord {
                left_running: 1,
                ..StopRecord::default()
            })
            .unwrap(),
            "1 process(es) of the serve were still running 5 s after SIGKILL (stuck in the kernel?); the gate could not stop them"
        );
        // A second signal that came when nothing was left to cut adds nothing.
        assert_eq!(
            said(StopRecord {
                cut_short: true,
                ..StopRecord::default()
            }),
            None
        );
    }
}
