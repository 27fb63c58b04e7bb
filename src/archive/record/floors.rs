//! What a run is judged against, as run.json records it: the floors, limits and route patterns,
//! the output line's thresholds, and what an answer that differs from the baseline's is.

use serde::{Deserialize, Serialize};

/// Floors, limits and route patterns: what a run is judged against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Floors {
    /// Lowest acceptable median decode rate, tok/s.
    pub floor: f64,
    /// Highest acceptable median first-token time, ms.
    pub first_token_ms: f64,
    /// Which first token `first_token_ms` holds: of any channel, or the first content token
    /// (`--first-token-of`). Absent, `any`, as in runs from before it was recorded.
    #[serde(default, skip_serializing_if = "FirstTokenOf::is_any")]
    pub first_token_of: FirstTokenOf,
    /// A regex the serve log must match: it names the fast route.
    pub fast_route: Option<String>,
    /// A regex the serve log must not match: it names the slow fallback.
    pub slow_route: Option<String>,
    /// The busy-box SKIP policy: a timing-only failure with contention at or above this (the
    /// serve's CPU-wait fraction, or the load per CPU where that is not measurable) is a SKIP.
    #[serde(default)]
    pub busy_skip: Option<f64>,
    /// A regex some process of the serve's tree must map a matching file of, as executable
    /// code of an ELF shared object (route.json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_lib: Option<String>,
    /// A regex no process of the serve's tree may map a matching file of, in any way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_route_lib: Option<String>,
    /// A regex some process of the serve's tree must hold a matching character device open
    /// by, during the replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_device: Option<String>,
    /// The busy counter that must advance during the replies: a file, or `fdinfo:KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_busy: Option<String>,
    /// The accepted baseline run directory the candidate is compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// The change against the baseline that is noise, as a share (default 0.03).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_noise: Option<f64>,
    /// The largest regression against the baseline that is acceptable, as a share (default
    /// 0.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_regression: Option<f64>,
    /// Differences of the box from the baseline's that are accepted (`host`, `kernel`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline_allow: Vec<String>,
    /// Lowest acceptable median aggregate decode rate of the concurrent bursts, tok/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate_floor: Option<f64>,
    /// Lowest acceptable speedup of the bursts' median aggregate rate over the single-stream
    /// median rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speedup: Option<f64>,
    /// The largest fall of the decode rate over the run that passes the drift line, a share
    /// (`--max-drift`; absent: 0.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drift: Option<f64>,
    /// `--deterministic`: every reply to a prompt must be the first reply to it, and every
    /// burst's stream the single-stream reply to its prompt (the determinism line). Absent,
    /// false, for a run that does not ask it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deterministic: bool,
    /// `--baseline-answers`: what a greedy answer that differs from the baseline's is
    /// (absent: info).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_answers: Option<AnswerPolicy>,
    /// `--reference`: the archived run of a trusted build whose tokens the candidate's are
    /// held to (issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// `--reference-tie`, nats: a divergence within it is a near-tie (absent: 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_tie: Option<f64>,
    /// `--min-agreement`: the lowest top-1 agreement with the reference, a share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_agreement: Option<f64>,
    /// `--max-logprob-drift`, nats: the highest p90 of the chosen tokens' |Δ logprob|.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_logprob_drift: Option<f64>,
    /// `--reference-reanchor`: the most re-anchors a prompt is judged past (absent: 8; 0 judges
    /// each prompt up to its first divergence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_reanchor: Option<usize>,
    /// `--reference-noise`: archived runs of known-good builds against the same reference,
    /// whose figures the candidate's are held to (issue 52); absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_noise: Vec<String>,
    /// `--noise-factor`: how many times the worst noise build's figure the candidate's may
    /// reach (absent: 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_factor: Option<f64>,
    /// The output line's settings (issue 32); absent: its defaults.
    #[serde(default, skip_serializing_if = "OutputFloors::is_default")]
    pub output: OutputFloors,
    /// The footprint lines' settings (issue 34); absent: their defaults.
    #[serde(
        default,
        skip_serializing_if = "crate::archive::record::footprint::FootprintFloors::is_default"
    )]
    pub footprint: crate::archive::record::footprint::FootprintFloors,
    /// The context lines' floors (issue 35); absent: none given.
    #[serde(
        default,
        skip_serializing_if = "crate::archive::record::context::ContextFloors::is_default"
    )]
    pub context: crate::archive::record::context::ContextFloors,
    /// The settings of the lines that are modules of their own ([`crate::lines`]), each under
    /// its key: `slo` (the goodput line's service level, issue 37); absent: its default.
    #[serde(flatten)]
    pub lines: LineFloors,
}

/// Each line module's recorded settings: `key: record::Type`, absent where it is the default.
macro_rules! line_floors {
    ($($module:ident: $check:ident after $after:ident {
        floors: $key:ident $floors:ident, figures: $figures:ident, flags: $flags:ident
    };)*) => {
        /// The recorded settings of the lines that are modules of their own, one field each,
        /// under its key (`lines/mod.rs`); flattened into [`Floors`].
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct LineFloors {
            $(
                #[doc = concat!("The ", stringify!($module), " line's settings.")]
                #[serde(
                    default,
                    skip_serializing_if = "crate::lines::is_default"
                )]
                pub $key: crate::lines::$module::record::$floors,
            )*
        }
    };
}
crate::lines::every_line!(line_floors);

/// What the output line holds replies to (issue 32, docs/output.md): each threshold absent
/// where the run took its default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFloors {
    /// `--output-checks off`: the line is info, for a serve meant to repeat (a benchmark mode
    /// that ignores end tokens).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub off: bool,
    /// `--loop-share`: the least share of a reply a loop covers (0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_share: Option<f64>,
    /// `--loop-repeats`: the least repeats of a loop's unit (3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_repeats: Option<usize>,
    /// `--stutter-run`: the least run of one word that is a stutter (4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stutter_run: Option<usize>,
    /// `--not-text-share`: the largest share of a reply's characters that may be not text
    /// (0.01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_text_share: Option<f64>,
    /// `--same-answer`: the similarity from which two prompts' answers are one (0.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_answer: Option<f64>,
    /// `--length-share`: the largest relative difference of the mean answer length from the
    /// reference's or baseline's (0.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_share: Option<f64>,
    /// `--stop-margin`: the largest fall of the share of replies that stopped by themselves
    /// against the reference's or baseline's (0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_margin: Option<f64>,
}

impl OutputFloors {
    /// Whether every setting is its default (nothing to write).
    pub fn is_default(&self) -> bool {
        *self == OutputFloors::default()
    }
}

/// What an answer that differs from the baseline's answer to the same prompt is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerPolicy {
    /// Said, never failed: a new release may legitimately change a greedy answer.
    #[default]
    Info,
    /// A FAIL: the candidate must answer every prompt exactly as the baseline did.
    Exact,
}

impl AnswerPolicy {
    /// As `--baseline-answers` and run.json write it.
    pub fn name(self) -> &'static str {
        match self {
            AnswerPolicy::Info => "info",
            AnswerPolicy::Exact => "exact",
        }
    }

    /// `info` or `exact`.
    pub fn parse(s: &str) -> Result<AnswerPolicy, String> {
        match s.trim() {
            "info" => Ok(AnswerPolicy::Info),
            "exact" => Ok(AnswerPolicy::Exact),
            _ => Err(format!(
                "{s:?} is not a policy for the baseline's answers: give info (an answer that differs is said) or exact (it FAILs)"
            )),
        }
    }
}

/// Which first token the first-token line holds to its limit (`--first-token-of`, issue 37,
/// item 5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FirstTokenOf {
    /// The first token of any channel: content, reasoning or a tool call (TTFT).
    #[default]
    Any,
    /// The first content token: content or a tool call's fragment, reasoning left out (TTFO):
    /// what a reasoning model's user waits for before the answer starts.
    Content,
}

impl FirstTokenOf {
    /// As `--first-token-of` and run.json write it.
    pub fn name(self) -> &'static str {
        match self {
            FirstTokenOf::Any => "any",
            FirstTokenOf::Content => "content",
        }
    }

    /// `any` or `content`.
    pub fn parse(s: &str) -> Result<FirstTokenOf, String> {
        match s.trim() {
            "any" => Ok(FirstTokenOf::Any),
            "content" => Ok(FirstTokenOf::Content),
            _ => Err(format!(
                "{s:?} is not a first token: give any (the first token of any channel, reasoning included) or content (the first content token)"
            )),
        }
    }

    /// Whether it is `any`, the default (nothing to write).
    pub fn is_any(&self) -> bool {
        *self == FirstTokenOf::Any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_run_json_without_first_token_of_reads_as_any_and_content_is_written() {
        let old: Floors = serde_json::from_str(
            r#"{"floor": 60.0, "first_token_ms": 600.0, "fast_route": null, "slow_route": null}"#,
        )
        .unwrap();
        assert_eq!(old.first_token_of, FirstTokenOf::Any);
        // Any, the default, is left out as every default is; content is written.
        assert!(!serde_json::to_string(&old)
            .unwrap()
            .contains("first_token_of"));
        let content = Floors {
            first_token_of: FirstTokenOf::Content,
            ..old
        };
        let text = serde_json::to_string(&content).unwrap();
        assert!(text.contains(r#""first_token_of":"content""#), "{text}");
        assert_eq!(serde_json::from_str::<Floors>(&text).unwrap(), content);
    }
}
