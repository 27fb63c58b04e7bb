//! result.json: the verdict as recorded: its lines (a check, its status, its text), each line's
//! figures as numbers, and the run's outcome.

use crate::archive::check::Check;
use crate::archive::tags::{InterruptSignal, Unit};
use serde::{Deserialize, Serialize};

/// How a line came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// The check passed.
    #[serde(rename = "ok")]
    Ok,
    /// The check failed.
    #[serde(rename = "FAIL")]
    Fail,
    /// Information only; never changes the result.
    #[serde(rename = "info")]
    Info,
    /// The check could not decide (a comparison with a baseline whose interval straddles the
    /// limits, or whose conditions differ): the result is INCONCLUSIVE unless something failed.
    #[serde(rename = "inconclusive")]
    Inconclusive,
}

/// One line of the verdict: a check, how it came out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Which check (result.json has its name).
    pub check: Check,
    /// How it came out.
    pub status: Status,
    /// What a reader needs to know.
    pub text: String,
    /// The line's figures as numbers, for CI to read without parsing the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<Figures>,
}

/// A line's figures as numbers (each only where the line has it), with their unit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    /// The unit of `median`, `interval_95`, `floor` and `limit`: `tok/s` or `ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// The median over the replies that have the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    /// How many replies the median rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<usize>,
    /// How many replies were made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<usize>,
    /// The median's distribution-free 95% interval, low and high (from 6 values); on the
    /// determinism line, the mismatch rate's exact (Clopper-Pearson) 95% interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_95: Option<[f64; 2]>,
    /// The floor the median is held to (rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<f64>,
    /// The limit the median is held to (first-token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// The box's 1-minute load average before the serve started (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load1: Option<f64>,
    /// The box's CPUs (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ncpu: Option<usize>,
    /// The share of the time it was ready to run that the serve waited for a CPU during the
    /// replies, 0 to 1 (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_cpu_wait: Option<f64>,
    /// The highest CPU pressure (some, avg10) during the replies, percent (load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure_pct: Option<f64>,
    /// Against the baseline: the Hodges-Lehmann ratio, candidate / baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Against the baseline: the ratio's 90% interval (Mann-Whitney).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_90: Option<[f64; 2]>,
    /// Against the baseline: the lag-1 correlation of neighbouring replies the 90% interval
    /// was widened for, when it was (issue 37).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation: Option<f64>,
    /// Against the baseline: how many of the baseline's replies the comparison rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_values: Option<usize>,
    /// The bursts' median aggregate rate over the single-stream median rate (aggregate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// The speedup the aggregate is held to (`--min-speedup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speedup: Option<f64>,
    /// The longest any burst's request took to be written after its release, ms: the gate's
    /// own dispatch delay (aggregate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_ms: Option<f64>,
    /// The most streams decoding at once in any burst (overlap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_streams: Option<usize>,
    /// The serve's own count of tokens generated over the bursts: its token counter after
    /// them less before them (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_tokens: Option<f64>,
    /// The tokens the gate counted over the bursts' streams (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_tokens: Option<f64>,
    /// The most requests the serve's metrics showed being processed at one scrape, summed over
    /// their label sets (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_processing: Option<f64>,
    /// The most requests the serve's metrics showed waiting (deferred, queued) at one scrape,
    /// summed over their label sets (metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_deferred: Option<f64>,
    /// The change over the run by Sen's slope, as a share of the first reply's fitted figure:
    /// -0.183 for a fall of 18.3% (drift, first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<f64>,
    /// The Mann-Kendall one-sided p-value in the bad direction: for a fall of the rate (drift),
    /// for a rise of the first-token time (first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_p: Option<f64>,
    /// How many blocks of consecutive replies the test ran on (drift, first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<usize>,
    /// How many replies a block holds (the shortest; a block may hold one more where the
    /// replies do not divide evenly) (drift, first-token-drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_length: Option<usize>,
    /// The largest fall over the run that passes (`--max-drift`), a share (drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drift: Option<f64>,
    /// Time to first token over the judged replies, ms (latency): TTFT, as vLLM's and
    /// guidellm's reports name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<Percentiles>,
    /// Time to first content token over the judged replies that had one, ms (latency): the
    /// first event with content or a tool call's fragment, reasoning left out. TTFO, as
    /// aiperf names it ("time to first output token"); equal to `ttft_ms` where no reply
    /// reasons first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo_ms: Option<Percentiles>,
    /// Inter-token latency, ms (latency): every gap between consecutive text events of every
    /// judged reply, pooled (ITL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<Percentiles>,
    /// Time per output token after the first, ms (latency): per reply, (end - first token) /
    /// (tokens - 1) (TPOT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<Percentiles>,
    /// End-to-end latency per reply, ms (latency): from the request's send to its last event
    /// (E2EL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_ms: Option<Percentiles>,
    /// The trials compared (determinism: each reply after the first to its prompt, and each
    /// burst's stream with a single-stream reply to its prompt; baseline-answers: the prompts
    /// compared with the baseline's answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trials: Option<usize>,
    /// How many of them differed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatches: Option<usize>,
    /// `mismatches / trials` (determinism); its exact 95% interval (Clopper-Pearson) is
    /// `interval_95`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch_rate: Option<f64>,
    /// The smallest per-trial mismatch rate these trials would have shown at least once with
    /// probability 0.95, `1 - 0.05^(1/trials)` (determinism).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectable_rate: Option<f64>,
    /// The reference line's figures (`--reference`, issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceFigures>,
    /// The output line's figures (issue 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputFigures>,
    /// The footprint lines' figures (issue 34): memory, device-memory, baseline-memory,
    /// startup, cold-reply, idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint: Option<FootprintFigures>,
    /// The context lines' figures (issue 35): a row a depth, and the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<crate::archive::record::context::ContextFigures>,
    /// The figures of the lines that are modules of their own ([`crate::lines`]), each under
    /// its module's name, as the other figures are: `goodput` (issue 37).
    #[serde(flatten)]
    pub lines: LineFigures,
}

/// Each line module's figures: `module: Option<record::Type>`, absent where the line has none.
macro_rules! line_figures {
    ($($module:ident: $check:ident after $after:ident {
        floors: $key:ident $floors:ident, figures: $figures:ident, flags: $flags:ident
    };)*) => {
        /// The figures of the lines that are modules of their own, one field each, named by
        /// the module (`lines/mod.rs`); flattened into [`Figures`].
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct LineFigures {
            $(
                #[doc = concat!("The ", stringify!($module), " line's figures.")]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $module: Option<crate::lines::$module::record::$figures>,
            )*
        }

        impl LineFigures {
            $(
                #[doc = concat!("A line's figures that are the ", stringify!($module), " line's alone.")]
                // While one line is a module, the update names no other field; with two it does.
                #[allow(clippy::needless_update)]
                pub fn $module(figures: crate::lines::$module::record::$figures) -> Figures {
                    Figures {
                        lines: LineFigures {
                            $module: Some(figures),
                            ..LineFigures::default()
                        },
                        ..Figures::default()
                    }
                }
            )*
        }
    };
}
crate::lines::every_line!(line_figures);

/// What a footprint line found (docs/footprint.md), each figure only where the line has it.
/// Sizes are bytes, times ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FootprintFigures {
    /// The highest reading over every sample and reply end (memory: RssAnon + VmSwap;
    /// device-memory: the device's), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<f64>,
    /// The highest RssFile over the same readings, bytes (memory): the model's mapped pages,
    /// never counted as growth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_peak_bytes: Option<f64>,
    /// Sen's slope of the readings at the counted replies' ends, bytes a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_bytes_per_reply: Option<f64>,
    /// Its 95% interval, low and high, bytes a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_interval_95: Option<[f64; 2]>,
    /// The replies the slope rests on (after the warm ones), before any thinning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<usize>,
    /// The judged replies left out as warm before counting (the warm-ups are left out too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm: Option<usize>,
    /// The growth a reply the interval is held to, bytes (`--max-memory-growth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_growth: Option<f64>,
    /// The peak's limit, bytes (`--max-serve-memory`, `--max-device-memory`), where given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_peak: Option<f64>,
    /// Each reply's reading at its end, `[reply index, bytes]`, in the order of the replies
    /// (memory, device-memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reply_end_bytes: Vec<[f64; 2]>,
    /// The baseline's peak, bytes (baseline-memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_peak_bytes: Option<f64>,
    /// The baseline's growth, bytes a reply (baseline-memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_growth_bytes_per_reply: Option<f64>,
    /// The largest rise of the peak over the baseline's, a share, where given
    /// (baseline-memory: `--max-memory-regression`; startup: `--max-startup-regression`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_regression: Option<f64>,
    /// Launch to ready, ms (startup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_ms: Option<f64>,
    /// The baseline's launch to ready, ms (startup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_ready_ms: Option<f64>,
    /// The first reply's first token, ms (cold-reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_ms: Option<f64>,
    /// The idle probe's first token, ms (idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<f64>,
    /// How long the serve was idle before the probe was sent, ms (idle): from the end of the
    /// last reply before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_wait_ms: Option<f64>,
}

/// What the output line found, rule by rule (docs/output.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFigures {
    /// Replies judged: those that did not fail and have content.
    pub replies: usize,
    /// Replies whose tail loops.
    pub loops: usize,
    /// The largest share of a reply a loop covered, where one was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_share_max: Option<f64>,
    /// Replies that stutter.
    pub stutters: usize,
    /// The longest run of one word (0 under the threshold).
    pub stutter_run_max: usize,
    /// Replies over the share of characters that are not text.
    pub not_text: usize,
    /// The largest share of a reply's characters that are not text.
    pub not_text_share_max: f64,
    /// Pairs of prompts answered alike.
    pub same_answers: usize,
    /// The largest similarity of two prompts' answers that should differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_answer_max: Option<f64>,
    /// The share of judged replies that stopped by themselves (`finish_reason` `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_share: Option<f64>,
    /// The mean answer length over the reference's or baseline's, where held to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_ratio: Option<f64>,
}

/// What the reference line rests on and found: the candidate's tokens against a trusted
/// build's, judged past each divergence where re-anchored (docs/reference.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceFigures {
    /// Prompts whose first answers were compared.
    pub prompts: usize,
    /// Reference positions judged: every token of an identical answer, and of a diverging one
    /// the tokens before the divergence and the divergence itself.
    pub positions: usize,
    /// Positions where both sides chose the same text.
    pub agreed: usize,
    /// `agreed / positions`; absent when no position was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<f64>,
    /// Divergences within the tie margin on every side that could be read.
    pub near_ties: usize,
    /// Divergences past the tie margin, or to a token outside the other side's top-K.
    pub hard_divergences: usize,
    /// Divergences whose margin could not be read (the reference ended where the candidate
    /// went on: no logprob is recorded for its end).
    pub unmeasured: usize,
    /// Re-anchors judged past a divergence (`--reference-reanchor`).
    pub reanchored: usize,
    /// Prompts left with a divergence unjudged past it: the re-anchor bound was spent, none
    /// was recorded, or the serve did not continue the assistant message.
    #[serde(default)]
    pub stopped_short: usize,
    /// The K the positions were judged on: the smaller of the two sides' top-K.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
    /// The tie margin, nats (`--reference-tie`).
    pub tie: f64,
    /// The chosen tokens' |Δ logprob| (nats) at positions both sides tokenised alike, where
    /// the candidate sent logprobs: how many, median, p90 (Hyndman & Fan definition 7) and max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprob_delta: Option<DeltaFigures>,
    /// The mean KL divergence (nats) of the candidate from the reference over the reference's
    /// top-K, renormalised: truncation to K understates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_mean: Option<f64>,
    /// `--min-agreement`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_agreement: Option<f64>,
    /// `--max-logprob-drift` (held to the p90 of |Δ logprob|), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_logprob_drift: Option<f64>,
    /// The candidate's figures over every position judged (issue 52); absent in results from
    /// before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_position: Option<PositionFigures>,
    /// The known-good builds the figures were held to (`--reference-noise`), each with the
    /// same figures against the same reference, or why it could not be used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub noise: Vec<NoiseFigures>,
    /// `--noise-factor`: how many times the worst usable noise build's figure a candidate's
    /// may reach; present when there is noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_factor: Option<f64>,
}

/// A side's figures over every reference position judged (issue 52), as llama.cpp's
/// `llama-perplexity --kl-divergence` reports them over every token: the KL divergence from
/// the reference and |Δ logprob| of the reference's token where the side's logprobs start a
/// token where the reference's does (`measured` of the `positions`), the share of positions
/// whose top token was the reference's, and hard divergences per 100 positions. Means are
/// arithmetic, p99 by Hyndman & Fan's definition 7.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PositionFigures {
    /// Reference positions judged.
    pub positions: usize,
    /// Of them, where the side's logprobs were read at the same token start.
    pub measured: usize,
    /// The share of positions where the side's top token was the reference's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_top: Option<f64>,
    /// The mean KL divergence (nats) over both top-Ks with the rest of the mass as one bucket:
    /// a lower bound of the KL over the whole vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_mean: Option<f64>,
    /// Its 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_p99: Option<f64>,
    /// The mean |Δ logprob| (nats) of the reference's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_mean: Option<f64>,
    /// Its 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_p99: Option<f64>,
    /// Hard divergences per 100 positions judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_per_100: Option<f64>,
}

/// A known-good build's archive (`--reference-noise`) as the reference line read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseFigures {
    /// Its directory, as given.
    pub run: String,
    /// Its figures against the reference, over the prompts the candidate was judged on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<PositionFigures>,
    /// Why it could not be used, when it could not: its figures are not a known-good build's
    /// noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unusable: Option<String>,
}

/// A distribution of |Δ logprob|, nats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeltaFigures {
    /// How many positions.
    pub count: usize,
    /// The median.
    pub median: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The largest.
    pub max: f64,
}

/// A distribution's figures as the peers' reports give them: vLLM's benchmark_serving prints
/// mean, median and p99; guidellm p50, p90, p99. Percentiles by linear interpolation between
/// order statistics (Hyndman & Fan 1996, definition 7: numpy's default, which vLLM uses).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    /// How many values.
    pub count: usize,
    /// Their mean.
    pub mean: f64,
    /// The 50th percentile (the median).
    pub p50: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The 99th percentile.
    pub p99: f64,
}

/// The run's result. Interrupted is not failed: nobody judged the serve to the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// Every line that is not info is ok.
    Pass,
    /// At least one line failed.
    Fail,
    /// The gate decided not to judge.
    Skip {
        /// Why.
        reason: String,
        /// What to do about it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        advice: Option<String>,
    },
    /// A signal stopped the run.
    Interrupted {
        /// Which signal, e.g. `SIGTERM`.
        signal: InterruptSignal,
    },
    /// Nothing failed, but a comparison with the baseline could not decide: never a PASS.
    Inconclusive {
        /// Why, from the inconclusive lines.
        reason: String,
    },
}

/// The lines and the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// One line per check, in a fixed order.
    pub lines: Vec<Line>,
    /// The result.
    #[serde(flatten)]
    pub outcome: Outcome,
}
