//! The checks a verdict's lines are named by: one variant a line, with what each is.
//!
//! result.json keeps each check's name as a string (`"rate"`, `"first-token"`, ...), exactly as
//! before the names were typed, so an old archive reads the same; a name the gate does not know
//! is an error that names it, never a line silently dropped.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a check's line is: judged (it may fail the run or make it inconclusive) or information
/// only (always `info`; it never changes the result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The line may be `ok`, `FAIL` or `inconclusive` (and `info` where it could not judge).
    Judged,
    /// The line is always `info`.
    Info,
}

/// One line of the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// The serve exited before it was ready, was not ready in time, or died during the replies.
    Serve,
    /// The device hold was not acquired in time, or the serve was held by another.
    Hold,
    /// The archive was changed after the run (a digest mismatch).
    Archive,
    /// The fast route was taken, not the slow fallback.
    Route,
    /// The median decode rate against `--floor`.
    Rate,
    /// The median first-token time against `--first-token-ms`.
    FirstToken,
    /// The latency figures peers report (percentiles of first token, inter-token, end to end).
    Latency,
    /// Whether the decode rate fell over the run.
    Drift,
    /// Whether the first-token time rose over the run.
    FirstTokenDrift,
    /// Every reply has content and its expected answer.
    Content,
    /// Degenerate text: loops, stutter, not text, one answer for all, never stopping.
    Output,
    /// Prompts with tools or a response format: the calls made as expected, their arguments
    /// valid, streamed as the API streams them, JSON content valid (issue 36).
    Tools,
    /// With `--concurrency`: the streams of a burst were served together.
    Overlap,
    /// With `--concurrency`: the bursts' aggregate rate against the single-stream rate.
    Aggregate,
    /// Against a baseline: the decode rate's shift.
    BaselineRate,
    /// Against a baseline: the first-token time's shift.
    BaselineFirstToken,
    /// Token-level agreement with a trusted build's logprobs.
    Reference,
    /// With `--deterministic`: the same prompt gives the same answer.
    Determinism,
    /// With `--deterministic` and a baseline: the same answers as the baseline's.
    BaselineAnswers,
    /// The serve's own metrics against what the gate measured.
    Metrics,
    /// The box's load before and during the replies.
    Load,
    /// CPU throttling seen during the replies.
    Throttle,
    /// The serve's memory: its growth a reply after a warm baseline, and its peak.
    Memory,
    /// The device's memory, where the box exposes it: growth and peak.
    DeviceMemory,
    /// Against a baseline: the serve's peak memory and growth side by side.
    BaselineMemory,
    /// The time from launch to ready, against a limit and the baseline's.
    Startup,
    /// The first reply's first token (the cold reply) beside the warm median.
    ColdReply,
    /// With `--idle-probe`: the first token of a reply after an idle wait.
    Idle,
    /// With `--depths`: the fact found at each depth within the context, and what the serve
    /// did with a prompt past it.
    Context,
    /// With `--depths`: the prefill and decode rates at depth against their floors and the
    /// baseline's.
    ContextRate,
    /// The serve had to be killed, or left processes behind.
    Stop,
    /// With `--slo`: the share of replies that met every target of the service level, against
    /// `--min-goodput` (issue 37).
    Goodput,
}

/// `Check::ALL` and `Check::name` made from one list, in the order of the verdict's lines:
/// `name` is a `match` over the list, so a variant left out of it does not compile, and `ALL`
/// is the same list, so no variant is left out of `ALL` (it was a hand-kept array; issue 53).
macro_rules! every_check {
    ($($variant:ident => $name:literal, $summary:literal;)*) => {
        impl Check {
            /// Every check, in the order of the verdict's lines.
            pub const ALL: [Check; [$(Check::$variant),*].len()] = [$(Check::$variant),*];

            /// The check's name, as the lines, result.json, JUnit and `--prom` show it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Check::$variant => $name,)*
                }
            }

            /// What the line holds the run to, in one row of Markdown (links relative to
            /// docs/): docs/lines.md's table of the lines is made from these
            /// ([`crate::report::lines_table`]), so it lists every line and no other. An info
            /// line's says what it shows; that it is info is `kind`'s to say.
            pub const fn summary(self) -> &'static str {
                match self {
                    $(Check::$variant => $summary,)*
                }
            }
        }
    };
}

every_check! {
    Archive => "archive",
        "FAIL when `judge` or `compare` finds an archive's files changed after its run";
    Hold => "hold",
        "not acquired in time: info, and the run is a SKIP; FAIL when the hold file was removed or \
        replaced while held";
    Serve => "serve",
        "FAIL: the serve did not come up, or ended without the gate asking";
    Route => "route",
        "the serve took the fast route: its log, and where asked its processes' maps, devices and \
        busy counter";
    Rate => "rate",
        "the median decode rate is at or above `--floor`";
    FirstToken => "first-token",
        "the median time to the first token is at or below `--first-token-ms` (`--first-token-of \
        content`: the first content token, after a reasoning model's reasoning)";
    Latency => "latency",
        "TTFT, ITL, TPOT and E2EL percentiles as vLLM and guidellm name them, and TTFO (first \
        content token, aiperf's name) where a reply reasoned first";
    Goodput => "goodput",
        "with `--slo`: the share of replies that met every target (TTFT, ITL, TPOT, E2EL) is at \
        least `--min-goodput` ([goodput.md](goodput.md))";
    Drift => "drift",
        "the decode rate did not fall over the run by more than `--max-drift` (from 8 replies)";
    FirstTokenDrift => "first-token-drift",
        "whether the first-token time rose over the run";
    Content => "content",
        "every reply has content, matches its expected answer and ended cleanly";
    Output => "output",
        "no degenerate text: loops, stutters, not text, one answer to all, never stopping";
    Tools => "tools",
        "with prompts that carry tools or a response format: each call named, offered, its \
        arguments valid JSON, streamed right; JSON answers valid ([tools.md](tools.md))";
    Overlap => "overlap",
        "with `--concurrency`: each burst's streams really decoded at the same time";
    Aggregate => "aggregate",
        "with `--concurrency`: the bursts' aggregate rate and speedup against their floors";
    BaselineRate => "baseline-rate",
        "with `--baseline`: the decode rate did not regress against the last release's run";
    BaselineFirstToken => "baseline-first-token",
        "with `--baseline`: the first-token time did not regress against it";
    Reference => "reference",
        "with `--reference`: the tokens agree with a trusted build's, divergences only near-ties";
    Determinism => "determinism",
        "with `--deterministic`: the same prompt got the same answer, alone and in bursts";
    BaselineAnswers => "baseline-answers",
        "with `--deterministic --baseline`: the answers are the baseline's (info unless `exact`)";
    Metrics => "metrics",
        "with `--concurrency`: the serve's own token count agrees with the gate's";
    Startup => "startup",
        "launch to ready, against `--ready-limit` and the baseline's (info where neither is)";
    ColdReply => "cold-reply",
        "the first reply's first token beside the warm median, against `--cold-first-token-ms`";
    Idle => "idle",
        "with `--idle-probe`: a reply after an idle wait, its first token against \
        `--first-token-ms`";
    Context => "context",
        "with `--depths`: a row a depth (prefill and decode rates, the fact found), and what the \
        serve did with a prompt past its context ([context.md](context.md))";
    ContextRate => "context-rate",
        "with `--depths`: prefill at every depth against `--prefill-floor`, decode at the deepest \
        against `--depth-floor`, each depth against the baseline's";
    Memory => "memory",
        "the serve's memory does not grow by more than `--max-memory-growth` a reply \
        ([footprint](footprint.md))";
    DeviceMemory => "device-memory",
        "the device's memory, judged as the serve's, where the box exposes it";
    BaselineMemory => "baseline-memory",
        "with `--baseline`: the peak and growth beside the baseline's (info unless a limit is \
        given)";
    Load => "load",
        "the box's load and the serve's CPU wait; says whether a busy box explains a timing FAIL";
    Throttle => "throttle",
        "the CPUs' and the device's throttling, clocks and temperature, where seen";
    Stop => "stop",
        "the serve had to be killed after its grace, or strays of its group were stopped";
}

impl Check {
    /// The checks that are timing alone: a busy box may explain their failure, and with
    /// `--busy-skip` excuse it. Route, content and every other check are never excused.
    /// Goodput is timing: a reply over its SLO is slow, as a rate under its floor is; a failed
    /// reply it counts as a miss also fails content, which is never excused.
    pub const TIMING: [Check; 9] = [
        Check::Rate,
        Check::FirstToken,
        Check::Drift,
        Check::Aggregate,
        Check::Startup,
        Check::ColdReply,
        Check::Idle,
        Check::ContextRate,
        Check::Goodput,
    ];

    /// Judged or information only.
    pub const fn kind(self) -> Kind {
        match self {
            Check::Latency
            | Check::FirstTokenDrift
            | Check::Load
            | Check::Throttle
            | Check::Stop => Kind::Info,
            _ => Kind::Judged,
        }
    }

    /// Whether the check is timing alone (one of [`Check::TIMING`]).
    pub fn is_timing(self) -> bool {
        Check::TIMING.contains(&self)
    }

    /// The check of this name.
    pub fn from_name(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so a line's `{:<12}` lines the names up.
        f.pad(self.name())
    }
}

// Tests compare a line's check with its name; shipped code names the variant.
#[cfg(test)]
impl PartialEq<&str> for Check {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl Serialize for Check {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Check::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown check `{}` (this gate knows {})",
                name.escape_debug(),
                Check::ALL.map(Check::name).join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_one_check_and_reads_back() {
        for c in Check::ALL {
            assert_eq!(Check::from_name(c.name()), Some(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.name()));
            assert_eq!(serde_json::from_str::<Check>(&json).unwrap(), c);
        }
        let mut names: Vec<&str> = Check::ALL.iter().map(|c| c.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Check::ALL.len(), "two checks share a name");
    }

    #[test]
    fn an_unknown_name_is_an_error_that_names_it() {
        let e = serde_json::from_str::<Check>("\"speed\"").unwrap_err();
        assert!(e.to_string().contains("unknown check `speed`"), "{e}");
    }

    #[test]
    fn the_timing_checks_are_four_and_judged() {
        assert_eq!(
            Check::TIMING.map(Check::name),
            [
                "rate",
                "first-token",
                "drift",
                "aggregate",
                "startup",
                "cold-reply",
                "idle",
                "context-rate",
                "goodput"
            ]
        );
        for c in Check::TIMING {
            assert_eq!(c.kind(), Kind::Judged, "{c}");
            assert!(c.is_timing());
        }
        assert!(!Check::Route.is_timing() && !Check::Content.is_timing());
        // The fact at depth and the limit are content: a busy box never excuses them.
        assert!(!Check::Context.is_timing());
    }

    #[test]
    fn the_lines_that_are_only_information_are_five() {
        // The figures peers report, the first-token drift, the box's load, its throttling and
        // how the serve stopped: said, never judged (docs/lines.md). Every other line can fail.
        let info: Vec<Check> = Check::ALL
            .into_iter()
            .filter(|c| c.kind() == Kind::Info)
            .collect();
        assert_eq!(
            info,
            [
                Check::Latency,
                Check::FirstTokenDrift,
                Check::Load,
                Check::Throttle,
                Check::Stop
            ]
        );
    }

    #[test]
    fn a_name_pads_like_a_string() {
        assert_eq!(format!("{:<12}|", Check::Rate), "rate        |");
    }
}
