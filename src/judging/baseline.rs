//! A candidate serve judged against an accepted baseline (issue 18, item 2 and the statistics of
//! item 7): how much faster or slower it is, how sure that is, and whether that fails the gate.
//!
//! Everything works on the natural logarithms of per-reply figures (decode rate in tok/s, or
//! first-token time in ms): a serve that is 10% slower moves every log by ln 0.9 whatever its
//! absolute speed, and a ratio is what a user means by "10% slower".
//!
//! - [`hodges_lehmann`]: the Hodges-Lehmann shift, the median of all m*n differences
//!   ln(c_i) - ln(b_j), as a ratio candidate / baseline, with its distribution-free interval
//!   from inverting the Mann-Whitney test (Hollander & Wolfe, *Nonparametric Statistical
//!   Methods*, 2nd ed. 1999, ch. 4, the two-sample location problem; Bauer 1972, JASA 67).
//! - [`judge_shift`]: that interval against `--baseline-noise` and `--max-regression`
//!   ([`decide`]), the thin flag, and how many replies a side would likely decide an
//!   inconclusive comparison ([`replies_needed`]).
//! - [`u_lower_critical`]: the exact lower critical value of U, as the published tables print it.
//!
//! Pure: no I/O; `statrs` gives the normal quantile and CDF, everything else is computed here
//! from its definition and tested against published tables and examples.

use statrs::distribution::{ContinuousCDF, Normal};

use super::pairwise::kth_difference;

/// The interval's default confidence, two-sided: each end is a one-sided 5% test, the level
/// [`replies_needed`] plans for.
pub const DEFAULT_CONFIDENCE: f64 = 0.90;
/// `--baseline-noise`'s default: a shift this small is run-to-run noise, never a regression.
pub const DEFAULT_NOISE: f64 = 0.03;
/// `--max-regression`'s default: the most regression a passing interval may still allow.
pub const DEFAULT_MAX_REGRESSION: f64 = 0.10;
/// Under this many replies on either side the comparison is thin and only inconclusive: at 3 a
/// side the Mann-Whitney test rejects only when every candidate reply is below every baseline
/// one, so one lucky reply decides it. Go's benchstat draws the same line ("need >= 6 samples").
pub const FEWEST_REPLIES_A_SIDE: usize = 6;
/// [`replies_needed`] says [`RepliesNeeded::OverCap`] rather than a number above this: a
/// spread that needs more replies than this is a noisy box, not a count to ask for.
pub const REPLIES_NEEDED_CAP: usize = 10_000;
/// The exact U distribution is counted (in u128) while m*n is at most this: it covers both sides
/// up to 50 (C(100, 50) ~ 1.0e29 < 2^127, the largest count for any m*n <= 2,500) and a few
/// replies against many, where the normal approximation is at its worst. Above it, the normal
/// approximation with continuity correction.
const EXACT_MAX_PAIRS: usize = 2_500;
/// The most lag-1 correlation the interval is widened for: the AR(1) inflation of a mean grows
/// without bound as rho nears 1, and at 0.9 it is already 19 (a side's replies worth a
/// nineteenth as many independent ones).
pub const MAX_CORRELATION: f64 = 0.9;
/// How many standard errors above the pooled, bias-corrected lag-1 estimate the correlation
/// taken for the interval is ([`Correlation`]): one, a one-sided 84% upper bound. The estimate
/// alone, noisy at 6 to 12 replies a side, left an unchanged serve failing 7% of the time at
/// rho 0.8 on a noisy box (docs/baseline.md, "Correlated replies").
const CORRELATION_MARGIN: f64 = 1.0;
/// The power [`replies_needed`] plans for.
const POWER: f64 = 0.80;
/// A tail probability within this of the level counts as at the level: 1 - 0.9 is
/// 0.09999999999999998 in f64, and the tables (and the user) mean 0.10. At 3 a side P(U <= 0)
/// is exactly 1/20, and Milton's table gives 0 as the one-sided 5% critical value there.
const LEVEL_TOLERANCE: f64 = 1e-9;
/// The asymptotic relative efficiency of the Mann-Whitney test to the t-test for normal data,
/// 3/pi = 0.955 (Lehmann, *Nonparametrics: Statistical Methods Based on Ranks*, 1975, ch. 2 sec.
/// 4; Noether, JASA 82 (1987) 645-647, sizes the test the same way).
const ARE_MANN_WHITNEY: f64 = 3.0 / std::f64::consts::PI;

/// Which side of the comparison a value or a count belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The serve being judged.
    Candidate,
    /// The accepted run it is judged against.
    Baseline,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Candidate => "candidate",
            Side::Baseline => "baseline",
        })
    }
}

/// Which way a figure gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    /// Lower is worse: the decode rate.
    Lower,
    /// Higher is worse: the first-token time.
    Higher,
}

/// What the comparison says of the candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The whole interval is worse than the noise allows: a regression beyond noise.
    Fail,
    /// The interval's worst end is within the allowed regression.
    Ok,
    /// Neither: too few replies or too much spread to tell (see [`Judged::replies_needed`]).
    Inconclusive,
}

/// How the interval's rank was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// From the exact null distribution of U (m*n at most 2,500).
    Exact,
    /// From the normal approximation to U with continuity correction (larger m*n).
    Normal,
}

/// A confidence interval for the shift: the `rank`-th smallest and `rank`-th largest of the m*n
/// pairwise differences, on the scale the caller gave (a ratio for [`Shift`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The lower end, D(k).
    pub low: f64,
    /// The upper end, D(mn + 1 - k).
    pub high: f64,
    /// k: the order statistic each end is, counted from its own end (1-based).
    pub rank: usize,
    /// The interval's coverage for continuous data, 1 - 2 P(U <= k - 1): at least the confidence
    /// asked for when exact (90.08% for 10 and 5 replies at 90%), about it when normal.
    pub coverage: f64,
    /// Whether k came from the exact distribution or the normal approximation.
    pub method: Method,
}

/// The Hodges-Lehmann shift of the candidate against the baseline, as a ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// exp(median of ln(c_i) - ln(b_j)): candidate / baseline, 0.9 for 10% lower.
    pub ratio: f64,
    /// Its interval, as ratios. `None` when the sides are too small for the confidence asked:
    /// no k makes 1 - 2 P(U <= k - 1) reach it (2 a side never reaches 90%; 3 a side just does,
    /// with the widest interval there is).
    pub interval: Option<Interval>,
    /// How many candidate replies.
    pub candidate: usize,
    /// How many baseline replies.
    pub baseline: usize,
    /// The pooled standard deviation of the two sides' logs, each about its own mean (about the
    /// per-reply relative spread: 0.03 for 3%). `None` with fewer than 3 values in all.
    pub pooled_sd: Option<f64>,
    /// The serial correlation of the replies, and whether it widened the interval. `None` when
    /// a side has fewer than [`FEWEST_REPLIES_A_SIDE`] values (the comparison is thin and
    /// inconclusive anyway) or the logs of a side have no spread: the interval is then the one
    /// for independent replies.
    pub correlation: Option<Correlation>,
}

/// The replies' serial correlation, as [`hodges_lehmann`] took it into the interval.
///
/// **Why.** The Mann-Whitney interval assumes independent replies. Neighbouring replies on a
/// real box are not (a clock that steps, a cache that stays warm, another process's burst:
/// [`super::drift`] simulates AR(1) at rho 0.5 for the same reason), and positive correlation
/// makes each side's mean wander more than its spread shows: the interval is too narrow, and
/// an unchanged serve FAILs more often than the 5% a 90% interval's end promises (17.5% at
/// rho 0.8, 30 replies a side, a 10% spread; docs/baseline.md, "Correlated replies").
///
/// **The variance of U.** Under no shift, with each side stationary with the continuous
/// marginal F and the sides independent of each other, U = sum_ij 1[c_i > b_j] has the
/// Hoeffding projection (Hoeffding 1948, Ann. Math. Statist. 19, 293-325; Lehmann,
/// *Nonparametrics*, 1975, appendix sec. 5) U - mn/2 ~ n sum_i (F(c_i) - 1/2) - m sum_j
/// (F(b_j) - 1/2): a sum over each side. F(x) is uniform with variance 1/12, so
/// Var(U) ~ n^2 Var(sum_i F(c_i)) + m^2 Var(sum_j F(b_j)) = (n^2 m f_c + m^2 n f_b) / 12,
/// where f is how much the side's serial correlation inflates the variance of a sum over
/// independent values. With independent replies f = 1 and, with the exact distribution's mn/12
/// added, this is the usual mn(m + n + 1)/12. For AR(1) with lag-1 correlation rho the
/// inflation of a mean of n values is f = 1 + 2 sum_{h<n} (1 - h/n) rho^h (Box, Jenkins &
/// Reinsel, *Time Series Analysis*, 4th ed. 2008, sec. 2.1.6), which tends to (1 + rho) /
/// (1 - rho). F(x_t) of a Gaussian AR(1) correlates (6/pi) asin(rho^h / 2) at lag h, a little
/// less than rho^h (Kendall & Gibbons, *Rank Correlation Methods*, 5th ed. 1990, ch. 9), so
/// rho^h errs on the wide side. Equivalently each side counts as n / f independent replies,
/// its effective size. k is then the normal approximation's, with continuity correction, to
/// that variance, and never larger than the independent k: the interval only ever widens.
///
/// **The estimate.** rho is the lag-1 autocorrelation of the logs in reply order, pooled over
/// both sides (sum of both sides' lag-1 products about their own means over the sum of both
/// sides' squares): the two runs are on the same box with the same serve and model, or the
/// comparison is not made, so they share the box's correlation, and pooling halves the
/// variance of an estimate that is very noisy at 6 to 12 replies a side. r1 is biased low by
/// about (1 + 3 rho) / n for a series of n (Marriott & Pope 1954, Biometrika 41, 390-402;
/// Kendall 1954, Biometrika 41, 403-404), so it is corrected: rho-hat = (h r1 + 1) / (h - 3)
/// with h = (m + n) / 2, the two series' pooled length. Its standard error is about
/// sqrt((1 - rho^2) / (m + n)) (Bartlett 1946, JRSS Suppl. 8, 27-41), and the rho taken is
/// rho-hat plus one standard error ([`CORRELATION_MARGIN`]), clamped to [0,
/// [`MAX_CORRELATION`]]: never below 0, so negative correlation never narrows the interval. The
/// margin is what the simulation needed to hold an unchanged serve's FAIL rate under 5% at 6
/// and 12 replies a side and rho 0.8 (docs/baseline.md); it costs power at rho 0 too, since
/// a few replies cannot rule correlation out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Correlation {
    /// The candidate's own lag-1 autocorrelation r1 of its logs, uncorrected.
    pub candidate_r1: f64,
    /// The baseline's own r1.
    pub baseline_r1: f64,
    /// The pooled r1 of both sides, bias-corrected (Marriott & Pope): rho-hat.
    pub pooled: f64,
    /// The correlation the interval was widened for: rho-hat plus one standard error, clamped
    /// to [0, [`MAX_CORRELATION`]].
    pub rho: f64,
    /// The candidate's replies counted as independent ones: m / f_c (m when rho is 0).
    pub candidate_effective: f64,
    /// The baseline's: n / f_b.
    pub baseline_effective: f64,
    /// Whether the interval is wider than the independent one (a smaller k). When false, the
    /// interval is exactly the independent one, from the exact distribution where m*n allows.
    pub widened: bool,
}

/// About how many replies a side would likely decide an inconclusive comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepliesNeeded {
    /// About this many a side (never fewer than [`FEWEST_REPLIES_A_SIDE`]).
    About(usize),
    /// More than [`REPLIES_NEEDED_CAP`] a side: the spread is too wide for more replies to help.
    OverCap,
}

/// A shift judged against the noise and the allowed regression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// The shift and its interval at [`DEFAULT_CONFIDENCE`].
    pub shift: Shift,
    /// FAIL, OK or inconclusive by [`decide`].
    pub decision: Decision,
    /// Fewer than [`FEWEST_REPLIES_A_SIDE`] replies on a side: the decision is inconclusive
    /// whatever the interval says.
    pub thin: bool,
    /// For an inconclusive decision, about how many replies a side would likely decide it
    /// ([`replies_needed`]); `None` when decided, or when there is no spread to plan from.
    pub replies_needed: Option<RepliesNeeded>,
}

/// Why a shift could not be computed. Each reads after "cannot compare with the baseline: ".
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum ShiftError {
    /// A side has no values at all.
    #[error("the {0} has no values")]
    NoValues(Side),
    /// A value that has no logarithm: zero, negative, infinite or NaN (a missing figure is a
    /// reason to fail, never a zero to average in).
    #[error("{side} value {index} is {value}, not a positive figure")]
    NotPositive {
        /// Which side.
        side: Side,
        /// Its place in that side's slice (0-based).
        index: usize,
        /// The value.
        value: f64,
    },
    /// A confidence outside (0, 1).
    #[error("confidence {0} is not between 0 and 1")]
    Confidence(f64),
    /// Thresholds outside 0 < noise < max regression < 0.5.
    #[error(
        "--baseline-noise {noise} and --max-regression {max_regression} must satisfy \
         0 < noise < max regression < 0.5"
    )]
    Thresholds {
        /// `--baseline-noise`.
        noise: f64,
        /// `--max-regression`.
        max_regression: f64,
    },
}

/// The Hodges-Lehmann shift of `candidate` against `baseline` (figures > 0; logs are taken here)
/// with its two-sided `confidence` interval (0.90 for [`DEFAULT_CONFIDENCE`]).
///
/// The estimate is the median of the m*n differences D = ln(c_i) - ln(b_j) (the mean of the
/// middle two when m*n is even). The interval is [D(k), D(mn+1-k)] for the largest k with
/// 2 P(U <= k - 1) <= 1 - confidence, U the Mann-Whitney count under no shift: the shifts the
/// two-sided test at level 1 - confidence would not reject (Hollander & Wolfe 1999, sec. 4.3,
/// whose C_alpha is this k; Bauer 1972). So k - 1 is [`u_lower_critical`] at one-sided
/// (1 - confidence) / 2. Ties among the figures are not corrected for: timings rarely tie, and
/// with ties the coverage is approximate.
///
/// Every value must be finite and > 0. Any number a side: the order statistics are selected
/// without making the m*n differences ([`super::pairwise`]), in O(m + n) memory and about
/// O((m + n) log(mn)) time, so a soak's 20,000 replies against another's take a fraction of a
/// second.
pub fn hodges_lehmann(
    candidate: &[f64],
    baseline: &[f64],
    confidence: f64,
) -> Result<Shift, ShiftError> {
    shift_in_groups(candidate, baseline, None, confidence)
}

/// Each value's group on each side, in the values' order: the prompt a reply answered.
pub type Groups<'a> = (&'a [usize], &'a [usize]);

/// [`hodges_lehmann`], with each value's group (its prompt) beside it, where `groups` is given
/// and as long as each side: the serial correlation is then estimated on each log less its
/// group's mean over both sides ([`less_group_means`]), so prompts that differ, sent in a
/// fixed rotation, do not read as correlated replies.
fn shift_in_groups(
    candidate: &[f64],
    baseline: &[f64],
    groups: Option<Groups<'_>>,
    confidence: f64,
) -> Result<Shift, ShiftError> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(ShiftError::Confidence(confidence));
    }
    let c = logs(candidate, Side::Candidate)?;
    let b = logs(baseline, Side::Baseline)?;
    let independent = interval_rank(c.len(), b.len(), confidence);
    let mut correlation = match groups {
        Some((gc, gb)) if gc.len() == c.len() && gb.len() == b.len() => {
            let (rc, rb) = less_group_means(&c, &b, (gc, gb));
            correlation_of(&rc, &rb)
        }
        _ => correlation_of(&c, &b),
    };
    let rank = match &mut correlation {
        Some(k) => {
            let (m, n) = (c.len(), b.len());
            let inflations = (mean_inflation(k.rho, m), mean_inflation(k.rho, n));
            let widened = widened_rank(m, n, inflations, confidence);
            match (independent, widened) {
                (Some((ik, _, _)), Some((wk, _))) if ik <= wk => independent,
                (_, widened) => {
                    k.widened = true;
                    widened.map(|(wk, coverage)| (wk, coverage, Method::Normal))
                }
            }
        }
        None => independent,
    };
    let (center, interval) = shift_at(&c, &b, rank);
    Ok(Shift {
        ratio: center.exp(),
        interval: interval.map(|i| Interval {
            low: i.low.exp(),
            high: i.high.exp(),
            ..i
        }),
        candidate: c.len(),
        baseline: b.len(),
        pooled_sd: pooled_sd(&c, &b),
        correlation,
    })
}

/// Judge `candidate` against `baseline` for a figure that gets worse the `worse` way, with
/// `--baseline-noise` `noise` and `--max-regression` `max_regression` (0 < noise < max
/// regression < 0.5; defaults [`DEFAULT_NOISE`] and [`DEFAULT_MAX_REGRESSION`]).
///
/// The interval is at [`DEFAULT_CONFIDENCE`]; the decision is [`decide`]'s; a thin comparison
/// (under [`FEWEST_REPLIES_A_SIDE`] a side) is inconclusive; an inconclusive one says about how
/// many replies a side would likely decide it ([`replies_needed`]).
pub fn judge_shift(
    candidate: &[f64],
    baseline: &[f64],
    worse: Worse,
    noise: f64,
    max_regression: f64,
) -> Result<Judged, ShiftError> {
    judge_shift_in_groups(candidate, baseline, None, worse, noise, max_regression)
}

/// [`judge_shift`] with each value's group (its prompt) beside it, as [`shift_in_groups`]
/// takes them: the correlation that widens the interval is the replies' own, not the
/// rotation's of prompts that differ.
pub fn judge_shift_in_groups(
    candidate: &[f64],
    baseline: &[f64],
    groups: Option<Groups<'_>>,
    worse: Worse,
    noise: f64,
    max_regression: f64,
) -> Result<Judged, ShiftError> {
    check_thresholds(noise, max_regression)?;
    let shift = shift_in_groups(candidate, baseline, groups, DEFAULT_CONFIDENCE)?;
    let thin = shift.candidate < FEWEST_REPLIES_A_SIDE || shift.baseline < FEWEST_REPLIES_A_SIDE;
    let decision = decide(shift.interval.as_ref(), worse, noise, max_regression, thin);
    let replies_needed = match decision {
        Decision::Inconclusive => shift.pooled_sd.map(|sd| {
            let inflation = planned_inflation(&shift);
            correlated_floor(
                replies_needed(sd * inflation.sqrt(), worse, noise, max_regression),
                inflation,
            )
        }),
        Decision::Fail | Decision::Ok => None,
    };
    Ok(Judged {
        shift,
        decision,
        thin,
        replies_needed,
    })
}

/// The decision on a ratio interval (candidate / baseline), eps = `noise`, R = `max_regression`.
///
/// Lower is worse (the rate): FAIL when the whole interval is below 1 - eps (its upper end
/// < 1 - eps); else OK when its lower end is at or above 1 - R; else inconclusive.
/// Higher is worse (first-token), mirrored: FAIL when its lower end > 1 + eps; else OK when its
/// upper end <= 1 + R; else inconclusive.
///
/// FAIL is tried first: an interval wholly between 1 - R and 1 - eps (a regression surely beyond
/// noise, though smaller than R) fails. R is how much regression an interval may still *allow*
/// and pass, not a regression that is forgiven once proven.
///
/// The mirror is 1 + eps, not 1 / (1 - eps): the flags read as percentages of the baseline the
/// way users state them ("first-token 10% slower" is 1.10), and the difference is small (3%:
/// 1.0300 against 1.0309; 10%: 1.100 against 1.111). On the log scale the first-token band is
/// therefore a little narrower than the rate's; [`replies_needed`] uses each band as it is.
///
/// No interval, or a `thin` comparison, is inconclusive: never FAIL or OK on too little.
pub fn decide(
    interval: Option<&Interval>,
    worse: Worse,
    noise: f64,
    max_regression: f64,
    thin: bool,
) -> Decision {
    let Some(i) = interval else {
        return Decision::Inconclusive;
    };
    if thin {
        return Decision::Inconclusive;
    }
    match worse {
        Worse::Lower if i.high < 1.0 - noise => Decision::Fail,
        Worse::Lower if i.low >= 1.0 - max_regression => Decision::Ok,
        Worse::Higher if i.low > 1.0 + noise => Decision::Fail,
        Worse::Higher if i.high <= 1.0 + max_regression => Decision::Ok,
        Worse::Lower | Worse::Higher => Decision::Inconclusive,
    }
}

/// About how many replies a side would likely decide the comparison, from the pooled spread of
/// the logs `pooled_sd` (sigma), for 80% power:
///
/// n = 2 (z_0.95 + z_0.80)^2 sigma^2 / delta^2 / (3/pi),
///
/// the two-sample normal sample size at one-sided alpha 0.05 (each end of the 90% interval is
/// such a test), divided by the Mann-Whitney test's asymptotic relative efficiency to the t-test.
/// delta is the distance on the log scale between the two hypotheses the rule tells apart: "no
/// regression beyond noise" (ratio 1 - eps) and "a regression of R" (ratio 1 - R), so
/// delta = ln(1 - eps) - ln(1 - R) for the rate and ln(1 + R) - ln(1 + eps) for first-token.
/// With n a side, a true R regression FAILs (the interval's upper end falls below 1 - eps) with
/// probability about 0.8, and symmetrically a true eps regression passes (its lower end stays at
/// or above 1 - R) with about 0.8.
///
/// Rounded up, never under [`FEWEST_REPLIES_A_SIDE`]; over [`REPLIES_NEEDED_CAP`] it says
/// [`RepliesNeeded::OverCap`]. A likely count, not a promise: the interval may still straddle
/// the band at that count (one time in five, at the boundary hypotheses).
pub fn replies_needed(
    pooled_sd: f64,
    worse: Worse,
    noise: f64,
    max_regression: f64,
) -> RepliesNeeded {
    let delta = match worse {
        Worse::Lower => (1.0 - noise).ln() - (1.0 - max_regression).ln(),
        Worse::Higher => (1.0 + max_regression).ln() - (1.0 + noise).ln(),
    };
    let normal = Normal::standard();
    let z = normal.inverse_cdf(1.0 - (1.0 - DEFAULT_CONFIDENCE) / 2.0) + normal.inverse_cdf(POWER);
    let n = 2.0 * z * z * pooled_sd * pooled_sd / (delta * delta) / ARE_MANN_WHITNEY;
    if !(n.is_finite() && n >= 0.0 && delta > 0.0) || n > REPLIES_NEEDED_CAP as f64 {
        return RepliesNeeded::OverCap;
    }
    RepliesNeeded::About((n.ceil() as usize).max(FEWEST_REPLIES_A_SIDE))
}

/// The exact lower critical value of the Mann-Whitney U for sides of `m` and `n` at one-sided
/// level `alpha_one_sided`: the largest c with P(U <= c) <= alpha under no shift, so that
/// "U <= c rejects", the convention of the standard tables (Milton, JASA 59 (1964) 925-934).
/// U counts the pairs in which the first side's value is the larger (or the smaller: the null
/// distribution is symmetric).
///
/// `None` when no c exists (P(U = 0) = 1 / C(m+n, m) is already over alpha), when a side is
/// empty, when alpha is outside (0, 0.5), or when m*n is over 2,500 (not counted exactly; the
/// interval then uses the normal approximation).
pub fn u_lower_critical(m: usize, n: usize, alpha_one_sided: f64) -> Option<u64> {
    if !(alpha_one_sided > 0.0 && alpha_one_sided < 0.5) {
        return None;
    }
    exact_critical(&u_null_counts(m, n)?, alpha_one_sided).map(|(c, _)| c)
}

/// The normal approximation to [`u_lower_critical`]: the largest c with
/// Phi((c + 1/2 - mn/2) / sqrt(mn(m+n+1)/12)) <= alpha, the continuity-corrected normal
/// approximation to P(U <= c). `None` when that c would be negative, a side is empty, or alpha
/// is outside (0, 0.5). Near 50 a side it is within one of the exact value at one-sided levels
/// 0.025 to 0.10, and a rank or two low (a wider, safer interval) at 0.005; ties are not
/// corrected for.
pub fn u_lower_critical_normal(m: usize, n: usize, alpha_one_sided: f64) -> Option<u64> {
    if !(alpha_one_sided > 0.0 && alpha_one_sided < 0.5) || m == 0 || n == 0 {
        return None;
    }
    normal_critical(m, n, alpha_one_sided).map(|(c, _)| c)
}

/// The logs of one side's figures, or why it has none.
fn logs(values: &[f64], side: Side) -> Result<Vec<f64>, ShiftError> {
    if values.is_empty() {
        return Err(ShiftError::NoValues(side));
    }
    values
        .iter()
        .enumerate()
        .map(|(index, &value)| {
            if value.is_finite() && value > 0.0 {
                Ok(value.ln())
            } else {
                Err(ShiftError::NotPositive { side, index, value })
            }
        })
        .collect()
}

fn check_thresholds(noise: f64, max_regression: f64) -> Result<(), ShiftError> {
    if noise > 0.0 && noise < max_regression && max_regression < 0.5 {
        Ok(())
    } else {
        Err(ShiftError::Thresholds {
            noise,
            max_regression,
        })
    }
}

/// The estimate and the interval [D(k), D(mn+1-k)] for `rank`'s (k, coverage, method).
fn shift_at(c: &[f64], b: &[f64], rank: Option<(usize, f64, Method)>) -> (f64, Option<Interval>) {
    let mut c_up = c.to_vec();
    c_up.sort_by(f64::total_cmp);
    let mut b_down = b.to_vec();
    b_down.sort_by(|x, y| y.total_cmp(x));
    let pairs = c.len() as u64 * b.len() as u64;
    let nth = |i: u64| kth_difference(&c_up, &b_down, i);
    let center = if pairs % 2 == 1 {
        nth(pairs / 2)
    } else {
        (nth(pairs / 2 - 1) + nth(pairs / 2)) / 2.0
    };
    let interval = rank.map(|(rank, coverage, method)| Interval {
        low: nth(rank as u64 - 1),
        high: nth(pairs - rank as u64),
        rank,
        coverage,
        method,
    });
    (center, interval)
}

/// The pooled, bias-corrected, bounded lag-1 correlation of the sides' logs in reply order, as
/// [`Correlation`] describes. `None` when a side has fewer than [`FEWEST_REPLIES_A_SIDE`]
/// values, or a side's logs have no spread (no correlation to read).
fn correlation_of(c: &[f64], b: &[f64]) -> Option<Correlation> {
    let (m, n) = (c.len(), b.len());
    if m < FEWEST_REPLIES_A_SIDE || n < FEWEST_REPLIES_A_SIDE {
        return None;
    }
    let ((lc, sc), (lb, sb)) = (lag_sums(c), lag_sums(b));
    if !(sc > 0.0 && sb > 0.0) {
        return None;
    }
    let h = (m + n) as f64 / 2.0;
    let pooled = (h * (lc + lb) / (sc + sb) + 1.0) / (h - 3.0);
    let error = ((1.0 - (pooled * pooled).min(1.0)) / (m + n) as f64).sqrt();
    let rho = (pooled + CORRELATION_MARGIN * error).clamp(0.0, MAX_CORRELATION);
    Some(Correlation {
        candidate_r1: lc / sc,
        baseline_r1: lb / sb,
        pooled,
        rho,
        candidate_effective: m as f64 / mean_inflation(rho, m),
        baseline_effective: n as f64 / mean_inflation(rho, n),
        widened: false,
    })
}

/// Each side's logs less the mean of its group's logs over both sides: what is left of a
/// reply's figure once its prompt's own level is taken out. A prompts file sent in rotation
/// repeats its prompts' levels (a longer prompt's later first token, a longer answer's rate)
/// in a fixed order on both sides; left in, that pattern is lag-1 correlation of the figures
/// though the replies' noise has none, and would widen the interval for nothing.
fn less_group_means(c: &[f64], b: &[f64], (gc, gb): Groups<'_>) -> (Vec<f64>, Vec<f64>) {
    let mut sums: std::collections::HashMap<usize, (f64, usize)> = Default::default();
    for (v, g) in c.iter().zip(gc).chain(b.iter().zip(gb)) {
        let e = sums.entry(*g).or_insert((0.0, 0));
        e.0 += v;
        e.1 += 1;
    }
    let less = |v: &[f64], g: &[usize]| -> Vec<f64> {
        v.iter()
            .zip(g)
            .map(|(v, g)| {
                let (sum, count) = sums[g];
                v - sum / count as f64
            })
            .collect()
    };
    (less(c, gc), less(b, gb))
}

/// A plan of at least [`FEWEST_REPLIES_A_SIDE`] *independent* replies a side: correlated
/// replies count as fewer (each side as n / inflation), and under that many the interval is not
/// made at all, however small the spread. Without this a steady serve with correlated replies
/// was told "about 6 replies a side would likely decide it" at 16 a side.
fn correlated_floor(needed: RepliesNeeded, inflation: f64) -> RepliesNeeded {
    // Less a hair: 6 x 19 in floating point is 114.00000000000003, and 115 would be a count
    // the arithmetic made up.
    let floor = (FEWEST_REPLIES_A_SIDE as f64 * inflation - 1e-9).ceil();
    match needed {
        RepliesNeeded::About(_) if floor.is_nan() || floor > REPLIES_NEEDED_CAP as f64 => {
            RepliesNeeded::OverCap
        }
        RepliesNeeded::About(n) => RepliesNeeded::About(n.max(floor as usize)),
        RepliesNeeded::OverCap => RepliesNeeded::OverCap,
    }
}

/// The factor the replies [`replies_needed`] plans for are scaled by: the larger side's
/// inflation of a mean at the correlation found, as many replies again tends to (1 + rho) /
/// (1 - rho), the limit of [`mean_inflation`]. 1 without correlation.
fn planned_inflation(shift: &Shift) -> f64 {
    shift
        .correlation
        .map_or(1.0, |k| (1.0 + k.rho) / (1.0 - k.rho))
}

/// One side's lag-1 sums in reply order, about its own mean: (sum over t of
/// (x_t - mean)(x_{t+1} - mean), sum of (x_t - mean)^2). Their ratio is the usual lag-1
/// autocorrelation r1 (Box, Jenkins & Reinsel, *Time Series Analysis*, 4th ed. 2008, sec. 2.1.4).
fn lag_sums(x: &[f64]) -> (f64, f64) {
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let lagged = x
        .windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum::<f64>();
    // cargo mutants: either `-` here turned `+`, (v + mean)(v - mean), sums to sum v^2 -
    // n mean^2, the same sum of squares about the mean (the shortcut formula) up to rounding:
    // an equivalent mutant, which no test of the value can tell from this line.
    let squares = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>();
    (lagged, squares)
}

/// How much lag-1 correlation `rho` (AR(1): lag h correlates rho^h) inflates the variance of a
/// mean of `n` values over independent ones: 1 + 2 sum_{h=1}^{n-1} (1 - h/n) rho^h
/// (Box, Jenkins & Reinsel 2008, sec. 2.1.6; it tends to (1 + rho) / (1 - rho) as n grows).
fn mean_inflation(rho: f64, n: usize) -> f64 {
    let nf = n as f64;
    1.0 + 2.0
        * (1..n)
            .map(|h| (1.0 - h as f64 / nf) * rho.powi(h as i32))
            .sum::<f64>()
}

/// k for the `confidence` interval when the sides' replies are serially correlated, from the
/// normal approximation to U with its variance inflated side by side: mn (n f_c + m f_b + 1) /
/// 12, `f_c` and `f_b` each side's inflation of a mean. (See [`Correlation`] for why.)
fn widened_rank(
    m: usize,
    n: usize,
    (f_c, f_b): (f64, f64),
    confidence: f64,
) -> Option<(usize, f64)> {
    let (mf, nf) = (m as f64, n as f64);
    let mean = mf * nf / 2.0;
    let sd = (mf * nf * (nf * f_c + mf * f_b + 1.0) / 12.0).sqrt();
    let normal = Normal::standard();
    let alpha = (1.0 - confidence) / 2.0;
    let c = (mean - 0.5 + normal.inverse_cdf(alpha) * sd).floor();
    if !(c >= 0.0 && c.is_finite()) {
        return None;
    }
    let coverage = 1.0 - 2.0 * normal.cdf((c + 0.5 - mean) / sd);
    Some((c as usize + 1, coverage))
}

/// k for the two-sided `confidence` interval [D(k), D(mn+1-k)] with sides of m and n, its
/// coverage and how it was found: k - 1 is the lower critical value of U at one-sided
/// (1 - confidence) / 2. `None` when no k reaches the confidence.
fn interval_rank(m: usize, n: usize, confidence: f64) -> Option<(usize, f64, Method)> {
    let alpha = (1.0 - confidence) / 2.0;
    let (critical, tail, method) = match u_null_counts(m, n) {
        Some(counts) => {
            let (c, p) = exact_critical(&counts, alpha)?;
            (c, p, Method::Exact)
        }
        None => {
            let (c, p) = normal_critical(m, n, alpha)?;
            (c, p, Method::Normal)
        }
    };
    let rank = usize::try_from(critical).ok()?.checked_add(1)?;
    // P(U <= k - 1) <= alpha < 1/2 keeps k at or below the median; checked, never assumed.
    if 2 * rank > m * n + 1 {
        return None;
    }
    Some((rank, 1.0 - 2.0 * tail, method))
}

/// The number of arrangements of m and n values giving each U = 0..=mn under no shift, or
/// `None` when a side is empty or m*n is over [`EXACT_MAX_PAIRS`].
///
/// They are the coefficients of the Gaussian binomial [m+n choose m]_q
/// = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i) (Andrews, *The Theory of Partitions*, 1976, ch. 3;
/// the generating function of the Mann-Whitney U). Each factor is applied in place: dividing by
/// (1 - q^i) is a running sum with stride i, multiplying by (1 - q^(n+i)) a difference with
/// stride n+i. After factor i the array holds [n+i choose i]_q, every count at most
/// C(m+n, m) < 2^127, so u128 never overflows; the arithmetic is checked all the same.
fn u_null_counts(m: usize, n: usize) -> Option<Vec<u128>> {
    let pairs = m.checked_mul(n)?;
    if m == 0 || n == 0 || pairs > EXACT_MAX_PAIRS {
        return None;
    }
    let (small, large) = (m.min(n), m.max(n));
    let mut f = vec![0u128; pairs + 1];
    f[0] = 1;
    for i in 1..=small {
        for u in i..=pairs {
            f[u] = f[u].checked_add(f[u - i])?;
        }
        let stride = large + i;
        for u in (stride..=pairs).rev() {
            f[u] = f[u].checked_sub(f[u - stride])?;
        }
    }
    Some(f)
}

/// The largest c with P(U <= c) <= alpha (within [`LEVEL_TOLERANCE`]), and P(U <= c).
fn exact_critical(counts: &[u128], alpha: f64) -> Option<(u64, f64)> {
    let total = counts.iter().try_fold(0u128, |s, &c| s.checked_add(c))?;
    let mut below = 0u128;
    let mut best = None;
    for (u, &count) in counts.iter().enumerate() {
        let next = below.checked_add(count)?;
        let p = next as f64 / total as f64;
        if p > alpha + LEVEL_TOLERANCE {
            break;
        }
        below = next;
        best = Some((u as u64, p));
    }
    best
}

/// The largest c with the continuity-corrected normal P(U <= c) <= alpha, and that probability.
fn normal_critical(m: usize, n: usize, alpha: f64) -> Option<(u64, f64)> {
    let (mf, nf) = (m as f64, n as f64);
    let mean = mf * nf / 2.0;
    let sd = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
    let normal = Normal::standard();
    let c = (mean - 0.5 + normal.inverse_cdf(alpha) * sd).floor();
    if !(c >= 0.0 && c.is_finite()) {
        return None;
    }
    Some((c as u64, normal.cdf((c + 0.5 - mean) / sd)))
}

/// The pooled standard deviation of two samples about their own means, sqrt of the pooled
/// variance with m + n - 2 degrees of freedom. `None` under 3 values in all.
fn pooled_sd(a: &[f64], b: &[f64]) -> Option<f64> {
    let df = (a.len() + b.len()).checked_sub(2).filter(|&df| df > 0)?;
    let squares = |v: &[f64]| {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>()
    };
    Some(((squares(a) + squares(b)) / df as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::test_rng::SplitMix;

    /// The Hodges-Lehmann estimate of the shift of `c` against `b` and its interval for
    /// independent replies, on the values' own scale: what the published examples give.
    fn shift_of(c: &[f64], b: &[f64], confidence: f64) -> (f64, Option<Interval>) {
        shift_at(c, b, interval_rank(c.len(), b.len(), confidence))
    }

    /// P(U <= c) exactly, for the convention checks.
    fn cdf(m: usize, n: usize, c: usize) -> f64 {
        let counts = u_null_counts(m, n).unwrap();
        let total: u128 = counts.iter().sum();
        counts[..=c].iter().sum::<u128>() as f64 / total as f64
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn critical_values_match_the_published_tables() {
        // Milton, "An Extended Table of Critical Values for the Mann-Whitney (Wilcoxon)
        // Two-Sample Statistic", JASA 59 (1964) 925-934, two-tailed 0.10 (= one-tailed 0.05),
        // as transcribed in HeuristicLab's MannWhitneyU.cs (its `table01`): 7 at 6/6, 27 at
        // 10/10, 138 at 20/20; 0 at 3/3; none (-1) at 2/2 and at 1/19.
        assert_eq!(u_lower_critical(6, 6, 0.05), Some(7));
        assert_eq!(u_lower_critical(10, 10, 0.05), Some(27));
        assert_eq!(u_lower_critical(20, 20, 0.05), Some(138));
        assert_eq!(u_lower_critical(3, 3, 0.05), Some(0));
        assert_eq!(u_lower_critical(2, 2, 0.05), None);
        assert_eq!(u_lower_critical(1, 18, 0.05), None);
        assert_eq!(u_lower_critical(1, 19, 0.05), Some(0));
        // The same table, asymmetric cells (row 5, columns 10 and 20): 11 and 25.
        assert_eq!(u_lower_critical(5, 10, 0.05), Some(11));
        assert_eq!(u_lower_critical(20, 5, 0.05), Some(25));
        // Two-tailed 0.05 (= one-tailed 0.025), "reject if U <= Ucritical": the table at
        // numeracy-bank.net (t/stt/mwu/3), 5 at 6/6, 23 at 10/10, 127 at 20/20, 20 at 5/20.
        assert_eq!(u_lower_critical(6, 6, 0.025), Some(5));
        assert_eq!(u_lower_critical(10, 10, 0.025), Some(23));
        assert_eq!(u_lower_critical(20, 20, 0.025), Some(127));
        assert_eq!(u_lower_critical(5, 20, 0.025), Some(20));
        // The convention, U <= critical rejects: the critical value is inside the tail, one
        // more is not.
        for (m, c) in [(6, 7), (10, 27), (20, 138)] {
            assert!(cdf(m, m, c) <= 0.05 && cdf(m, m, c + 1) > 0.05, "{m}");
        }
        // 3 a side: P(U <= 0) = 1/C(6,3) = 1/20, exactly the level, so it counts; the level as
        // 1 - 0.9 computes it (0.09999999999999998 / 2) counts too.
        assert!(close(cdf(3, 3, 0), 0.05));
        assert_eq!(u_lower_critical(3, 3, (1.0 - 0.9) / 2.0), Some(0));
    }

    #[test]
    fn the_null_counts_are_the_whole_distribution() {
        // Sums to C(m+n, m) and is symmetric, up to 50 a side (C(100, 50) =
        // 100891344545564193334812497256).
        let counts = u_null_counts(50, 50).unwrap();
        assert_eq!(
            counts.iter().sum::<u128>(),
            100_891_344_545_564_193_334_812_497_256
        );
        assert!(counts.iter().eq(counts.iter().rev()));
        // Small cases by hand: m = 1 is uniform; 2 and 2 is 1,1,2,1,1.
        assert_eq!(u_null_counts(1, 4).unwrap(), vec![1; 5]);
        assert_eq!(u_null_counts(2, 2).unwrap(), vec![1, 1, 2, 1, 1]);
        assert_eq!(u_null_counts(0, 4), None);
        assert_eq!(u_null_counts(50, 51), None);
        assert!(u_null_counts(1, 2_500).is_some());
    }

    #[test]
    fn the_normal_approximation_agrees_with_the_exact_near_fifty() {
        // At the levels an interval of 80% to 95% uses, within one rank at every size tried
        // (50/50 at 0.05: both 1010). Far out in the tail (0.005, a 99% interval) the
        // approximation is two ranks short, on the safe side: a wider interval.
        for (m, n) in [(50, 50), (45, 50), (40, 40), (30, 50), (50, 20), (25, 25)] {
            for alpha in [0.025, 0.05, 0.10] {
                let exact = u_lower_critical(m, n, alpha).unwrap() as i64;
                let normal = u_lower_critical_normal(m, n, alpha).unwrap() as i64;
                assert!(
                    (exact - normal).abs() <= 1,
                    "{m}/{n} at {alpha}: exact {exact}, normal {normal}"
                );
            }
            let exact = u_lower_critical(m, n, 0.005).unwrap();
            let normal = u_lower_critical_normal(m, n, 0.005).unwrap();
            assert!(
                normal <= exact && exact - normal <= 2,
                "{m}/{n}: {exact} {normal}"
            );
        }
        assert_eq!(u_lower_critical_normal(50, 50, 0.05), Some(1010));
        // Above 2,500 pairs the interval switches to the approximation, seamlessly.
        let rank = |m, n| interval_rank(m, n, 0.90).unwrap();
        assert_eq!(rank(50, 50).2, Method::Exact);
        assert_eq!(rank(50, 51).2, Method::Normal);
        assert!((rank(50, 51).1 - 0.90).abs() < 0.005);
    }

    #[test]
    fn hodges_lehmann_on_the_permeability_example() {
        // Hollander & Wolfe (1973) p. 69f, (1999) Example 4.1: permeability constants of the
        // human chorioamnion at term (x) and at 12-26 weeks (y), R's wilcox.test example. The
        // estimate of x - y is 0.305, the median of the 50 differences. The 90% interval
        // (k = 12, coverage 1 - 2 * 0.04962 = 90.08%) is (-0.08, 0.72), the 95% (k = 9,
        // 96.00%) (-0.15, 0.76): no published interval was found in reach, so both were
        // cross-checked against scipy 1.17.1's exact two-sided mannwhitneyu of x - d against y,
        // which rejects at d just outside each end (p 0.0992 at 90%, 0.0400 and 0.0280 at 95%)
        // and not just inside (0.1292, 0.0553).
        let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
        let y = [1.15, 0.88, 0.90, 0.74, 1.21];
        let (center, interval) = shift_of(&x, &y, 0.90);
        assert!(close(center, 0.305), "{center}");
        let i = interval.unwrap();
        assert!(close(i.low, -0.08) && close(i.high, 0.72), "{i:?}");
        assert_eq!((i.rank, i.method), (12, Method::Exact));
        assert!((i.coverage - 0.9008).abs() < 1e-4, "{}", i.coverage);
        let i = shift_of(&x, &y, 0.95).1.unwrap();
        assert!(close(i.low, -0.15) && close(i.high, 0.76), "{i:?}");
        assert_eq!(i.rank, 9);
    }

    #[test]
    #[allow(clippy::approx_constant)] // 3.140 is a measurement in the data, not pi
    fn hodges_lehmann_matches_the_published_sas_output() {
        // CAMIS (PSI AIMS), "Non-parametric point estimation in SAS", the Hollander-Wolfe-
        // Chicken example (psiaims.github.io/CAMIS/SAS/nparestimate.html): PROC NPAR1WAY HL
        // gives the location shift A - B = 0.5600 and the asymptotic (Moses) 95% limits
        // -0.3700, 1.1830, which is k = 18 of 81; the exact distribution gives the same k.
        // (SAS's "Exact" limits, -0.22 and 1.082, condition on the ties in B; this module
        // does not correct for ties.)
        let a = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
        let b = [
            0.878, 0.647, 0.598, 2.050, 1.060, 1.290, 1.060, 3.140, 1.290,
        ];
        let (center, interval) = shift_of(&a, &b, 0.95);
        assert!(close(center, 0.56), "{center}");
        let i = interval.unwrap();
        assert!(close(i.low, -0.37) && close(i.high, 1.183), "{i:?}");
        assert_eq!(i.rank, 18);
    }

    #[test]
    fn the_shift_is_a_ratio_of_the_figures() {
        // Every candidate exactly 0.9 of a baseline value: all differences ln 0.9 apart from
        // the baseline's own spread, and the estimate is 0.9 exactly (up to rounding).
        let base = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5, 99.5];
        let cand: Vec<f64> = base.iter().map(|b| b * 0.9).collect();
        let s = hodges_lehmann(&cand, &base, 0.90).unwrap();
        assert!(close(s.ratio, 0.9), "{}", s.ratio);
        let i = s.interval.unwrap();
        assert!(i.low < 0.9 && 0.9 < i.high, "{i:?}");
        assert_eq!((s.candidate, s.baseline), (7, 7));
        // One value a side: an estimate, no interval, no spread.
        let s = hodges_lehmann(&[50.0], &[100.0], 0.90).unwrap();
        assert!(close(s.ratio, 0.5));
        assert_eq!((s.interval, s.pooled_sd), (None, None));
        // 2 a side cannot reach 90% (P(U = 0) = 1/6); 3 a side just does, with the widest
        // interval there is: the smallest and largest of the 9 differences, coverage 90%.
        assert_eq!(
            hodges_lehmann(&[1.0, 2.0], &[1.0, 2.0], 0.90)
                .unwrap()
                .interval,
            None
        );
        let i = hodges_lehmann(&[1.0, 2.0, 4.0], &[1.0, 2.0, 4.0], 0.90)
            .unwrap()
            .interval
            .unwrap();
        assert_eq!((i.rank, i.low, i.high), (1, 0.25, 4.0));
        assert!(close(i.coverage, 0.90));
    }

    #[test]
    fn figures_without_a_logarithm_are_refused_never_zeroed() {
        let ok = [1.0, 2.0, 3.0];
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = hodges_lehmann(&[1.0, bad], &ok, 0.9).unwrap_err();
            assert!(
                matches!(
                    err,
                    ShiftError::NotPositive {
                        side: Side::Candidate,
                        index: 1,
                        ..
                    }
                ),
                "{err:?}"
            );
            let err = judge_shift(&ok, &[bad], Worse::Lower, 0.03, 0.10).unwrap_err();
            assert!(matches!(
                err,
                ShiftError::NotPositive {
                    side: Side::Baseline,
                    ..
                }
            ));
        }
        assert_eq!(
            hodges_lehmann(&[], &ok, 0.9),
            Err(ShiftError::NoValues(Side::Candidate))
        );
        assert_eq!(
            hodges_lehmann(&ok, &[], 0.9),
            Err(ShiftError::NoValues(Side::Baseline))
        );
        for c in [0.0, 1.0, -0.5, f64::NAN] {
            assert!(matches!(
                hodges_lehmann(&ok, &ok, c),
                Err(ShiftError::Confidence(_))
            ));
        }
        for (eps, r) in [
            (0.0, 0.1),
            (0.1, 0.1),
            (0.2, 0.1),
            (0.03, 0.5),
            (f64::NAN, 0.1),
        ] {
            assert!(matches!(
                judge_shift(&ok, &ok, Worse::Lower, eps, r),
                Err(ShiftError::Thresholds { .. })
            ));
        }
        assert!(u_lower_critical(5, 5, f64::NAN).is_none());
        assert!(u_lower_critical(5, 5, 0.5).is_none());
        assert!(u_lower_critical_normal(0, 5, 0.05).is_none());
        // The error reads after "cannot compare with the baseline: ".
        let err = hodges_lehmann(&[1.0, 0.0], &ok, 0.9).unwrap_err();
        assert_eq!(
            err.to_string(),
            "candidate value 1 is 0, not a positive figure"
        );
    }

    #[test]
    fn a_soak_against_a_soak_is_compared_whole() {
        // 20,000 replies a side, 400 million differences (3.2 GB as f64), as a --soak brings:
        // no cap, the order statistics selected. Log-normal draws 2% apart, 5% slower.
        let mut rng = SplitMix(0x5EED_0037);
        let mut side = |center: f64| -> Vec<f64> {
            (0..20_000)
                .map(|_| center * (0.02 * rng.normal()).exp())
                .collect()
        };
        let base = side(100.0);
        let cand = side(95.0);
        let s = hodges_lehmann(&cand, &base, 0.90).unwrap();
        assert!((s.ratio - 0.95).abs() < 0.001, "{s:?}");
        let i = s.interval.unwrap();
        assert_eq!(i.method, Method::Normal);
        assert!(
            i.low < s.ratio && s.ratio < i.high && i.high - i.low < 0.002,
            "{i:?}"
        );
        assert_eq!((s.candidate, s.baseline), (20_000, 20_000));
        // And the centre exactly as a sort would find it, on a smaller soak (1,000 a side,
        // a million differences, sortable in a test).
        let (c, b) = (&cand[..1_000], &base[..1_000]);
        let mut all: Vec<f64> = c
            .iter()
            .flat_map(|x| b.iter().map(move |y| x.ln() - y.ln()))
            .collect();
        all.sort_by(f64::total_cmp);
        let center = (all[499_999] + all[500_000]) / 2.0;
        assert_eq!(hodges_lehmann(c, b, 0.90).unwrap().ratio, center.exp());
    }

    /// Not a test: the cost of a soak's comparison, for `tools/bench.py --baseline-soak`
    /// (section (j), docs/performance.md), which runs it in a release build and reads the line
    /// it prints. Ignored, and asserts nothing about time: wall time is the bench's business.
    #[test]
    #[ignore]
    fn bench_soak_comparison() {
        let mut rng = SplitMix(0x5EED_0039);
        let mut side = |center: f64| -> Vec<f64> {
            (0..20_000)
                .map(|_| center * (0.02 * rng.normal()).exp())
                .collect()
        };
        let (base, cand) = (side(100.0), side(95.0));
        let mut walls = Vec::new();
        for _ in 0..5 {
            let start = std::time::Instant::now();
            let j = judge(&cand, &base, Worse::Lower);
            walls.push(start.elapsed().as_secs_f64());
            assert_eq!(j.decision, Decision::Fail);
        }
        walls.sort_by(f64::total_cmp);
        println!("bench: judge_shift 20000 x 20000 median_s {:.6}", walls[2]);
    }

    /// The decision with the interval for independent replies, whatever their correlation:
    /// the rule as it was, for the simulations' "uncorrected" column.
    fn decide_independent(c: &[f64], b: &[f64], worse: Worse) -> Decision {
        let (_, i) = shift_of(c, b, DEFAULT_CONFIDENCE);
        let i = i.map(|i| Interval {
            low: i.low.exp(),
            high: i.high.exp(),
            ..i
        });
        let thin = c.len() < FEWEST_REPLIES_A_SIDE || b.len() < FEWEST_REPLIES_A_SIDE;
        decide(
            i.as_ref(),
            worse,
            DEFAULT_NOISE,
            DEFAULT_MAX_REGRESSION,
            thin,
        )
    }

    /// FAIL rates over `trials` pairs of independent runs of `size` replies a side, each run
    /// a stationary AR(1) in the logs with lag-1 correlation `rho` and log spread `sd`:
    /// (unchanged serve corrected, unchanged uncorrected, true 10% regression corrected,
    /// regression uncorrected). The regression is 10% the `worse` way.
    fn correlated_rates(
        seed: u64,
        rho: f64,
        sd: f64,
        worse: Worse,
        size: usize,
        trials: usize,
    ) -> [f64; 4] {
        let mut rng = SplitMix(seed);
        let bad = match worse {
            Worse::Lower => 0.9f64.ln(),
            Worse::Higher => 1.1f64.ln(),
        };
        let mut fails = [0usize; 4];
        for _ in 0..trials {
            let b = rng.ar1(size, rho, sd);
            let c = rng.ar1(size, rho, sd);
            let r: Vec<f64> = c.iter().map(|x| x + bad).collect();
            let exp =
                |v: &[f64]| -> Vec<f64> { v.iter().map(|x| (100.0f64.ln() + x).exp()).collect() };
            let (b, c, r) = (exp(&b), exp(&c), exp(&r));
            let judged = |x: &[f64]| judge(x, &b, worse).decision == Decision::Fail;
            let plain = |x: &[f64]| {
                let logs = |v: &[f64]| v.iter().map(|y| y.ln()).collect::<Vec<_>>();
                decide_independent(&logs(x), &logs(&b), worse) == Decision::Fail
            };
            for (k, failed) in [judged(&c), plain(&c), judged(&r), plain(&r)]
                .into_iter()
                .enumerate()
            {
                fails[k] += failed as usize;
            }
        }
        fails.map(|f| f as f64 / trials as f64)
    }

    /// The most an observed A/A FAIL rate may be over `trials` when the true rate is at most
    /// 5%: 5% plus 2.33 binomial standard errors (a one-sided 1% allowance for chance).
    fn most_aa(trials: usize) -> f64 {
        0.05 + 2.33 * (0.05 * 0.95 / trials as f64).sqrt()
    }

    #[test]
    fn correlated_replies_keep_an_unchanged_serve_under_five_percent() {
        // AR(1) at rho 0.5 and 0.8 on a noisy box (a 10% spread of first-token times, the
        // hardest cell of the grid in docs/baseline.md), 6, 12 and 30 replies a side, 1,000
        // trials each: the A/A FAIL rate stays under 5% (with the binomial allowance), where
        // the interval for independent replies FAILed it up to 20% of the time.
        let trials = 1_000;
        for rho in [0.5, 0.8] {
            for size in [6, 12, 30] {
                let [aa, aa_plain, power, _] =
                    correlated_rates(0x5EED_0041, rho, 0.10, Worse::Higher, size, trials);
                eprintln!("rho {rho}, {size} a side: A/A {aa:.3} (uncorrected {aa_plain:.3}), power {power:.3}");
                assert!(aa <= most_aa(trials), "rho {rho}, {size} a side: {aa}");
            }
        }
        // What the correction buys, at 30 a side and rho 0.8: uncorrected, an unchanged serve
        // FAILs far more than 5%.
        let [aa, aa_plain, _, _] =
            correlated_rates(0x5EED_0042, 0.8, 0.10, Worse::Higher, 30, trials);
        assert!(aa_plain > 0.10 && aa < 0.05, "{aa_plain} {aa}");
    }

    #[test]
    fn correlation_is_estimated_pooled_bounded_and_carried() {
        // Independent-looking replies (alternating): no widening, the exact interval.
        let j = judge(
            &spread(100.0, 0.03, 12),
            &spread(100.0, 0.03, 12),
            Worse::Lower,
        );
        let k = j.shift.correlation.unwrap();
        assert_eq!((k.rho, k.widened), (0.0, false));
        assert_eq!(j.shift.interval.unwrap().method, Method::Exact);
        assert!(k.candidate_r1 < 0.0 && k.baseline_r1 < 0.0, "{k:?}");
        assert_eq!((k.candidate_effective, k.baseline_effective), (12.0, 12.0));
        // Replies that slow down one after another (ascending) on both sides: correlation near
        // the cap, an interval from the inflated normal, wider, and fewer effective replies.
        // (Pooled, one ascending side against an alternating one would nearly cancel: the
        // estimate assumes one box's correlation on both sides.)
        let mut up = spread(100.0, 0.03, 30);
        up.sort_by(f64::total_cmp);
        let j = judge(&up, &up, Worse::Lower);
        let k = j.shift.correlation.unwrap();
        assert!(
            k.widened && k.rho > 0.5 && k.rho <= MAX_CORRELATION,
            "{k:?}"
        );
        assert!(k.candidate_effective < 30.0 / 2.0, "{k:?}");
        assert_eq!(j.shift.interval.unwrap().method, Method::Normal);
        let plain = judge(
            &spread(100.0, 0.03, 30),
            &spread(100.0, 0.03, 30),
            Worse::Lower,
        );
        assert!(j.shift.interval.unwrap().rank < plain.shift.interval.unwrap().rank);
        // Under 6 a side: not estimated, the interval is the independent one.
        let j = judge(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0], Worse::Lower);
        assert_eq!(j.shift.correlation, None);
        // The bias correction and bound by hand: r1 pooled -0.2 at 6 a side (h = 6) is
        // (6 * -0.2 + 1) / 3 = -0.0667, plus sqrt((1 - 0.00444) / 12) = 0.2880: 0.2213.
        let pooled: f64 = (6.0 * -0.2 + 1.0) / 3.0;
        let bound = pooled + ((1.0 - pooled * pooled) / 12.0).sqrt();
        assert!((bound - 0.2213).abs() < 1e-4, "{bound}");
        // The inflation of a mean: 1 at rho 0, (1 + rho) / (1 - rho) in the limit, and by hand
        // at 3 values and rho 0.5: 1 + 2 (2/3 * 0.5 + 1/3 * 0.25) = 1.8333.
        assert_eq!(mean_inflation(0.0, 30), 1.0);
        assert!((mean_inflation(0.5, 3) - 1.833_333).abs() < 1e-6);
        assert!((mean_inflation(0.5, 100_000) - 3.0).abs() < 1e-3);
        // A widened interval asks for more replies: an inconclusive comparison of correlated
        // replies plans for (1 + rho) / (1 - rho) times as many.
        let mut wide = spread(97.0, 0.15, 30);
        wide.sort_by(f64::total_cmp);
        let j = judge(&up, &wide, Worse::Lower);
        let (Decision::Inconclusive, Some(k)) = (j.decision, j.shift.correlation) else {
            panic!("{j:?}");
        };
        let plain = replies_needed(j.shift.pooled_sd.unwrap(), Worse::Lower, 0.03, 0.10);
        assert!(k.rho > 0.0 && Some(plain) != j.replies_needed, "{j:?}");
    }

    /// The grid of docs/baseline.md, "Correlated replies": A/A and 10%-regression FAIL rates,
    /// corrected and uncorrected, 2,000 trials a cell. Ignored for its time (minutes in a
    /// debug build); `cargo test --release --lib -- --ignored --nocapture
    /// correlated_replies_grid` prints it.
    #[test]
    #[ignore]
    fn correlated_replies_grid() {
        let trials = 2_000;
        println!("| spread | rho | a side | A/A FAIL | uncorrected | 10% FAIL | uncorrected |");
        for (sd, worse) in [
            (0.015, Worse::Lower),
            (0.07, Worse::Higher),
            (0.05, Worse::Higher),
            (0.10, Worse::Higher),
        ] {
            for rho in [0.0, 0.3, 0.5, 0.8] {
                for size in [6, 12, 30] {
                    let r = correlated_rates(0x5EED_0043, rho, sd, worse, size, trials);
                    let [aa, aa_plain, power, power_plain] = r.map(|x| x * 100.0);
                    println!(
                        "| {sd} | {rho} | {size} | {aa:.1}% | {aa_plain:.1}% | {power:.1}% | {power_plain:.1}% |"
                    );
                    assert!(r[0] <= most_aa(trials), "sd {sd} rho {rho} {size}: {r:?}");
                }
            }
        }
    }

    /// n figures around `center` with a log spread `sd`: the normal quantiles at (i - 1/2)/n,
    /// deterministic and symmetric, so the sample is exactly what it is meant to be.
    ///
    /// In reply order they alternate low and high (the lowest, the highest, the second lowest,
    /// ...): negatively correlated, so the interval is the independent one. In ascending order
    /// they would read as replies that slow down one after another, correlation near 1, and
    /// the interval would widen for it.
    fn spread(center: f64, sd: f64, n: usize) -> Vec<f64> {
        let normal = Normal::standard();
        (0..n)
            .map(|t| if t % 2 == 0 { t / 2 } else { n - 1 - t / 2 })
            .map(|i| center * (sd * normal.inverse_cdf((i as f64 + 0.5) / n as f64)).exp())
            .collect()
    }

    fn judge(cand: &[f64], base: &[f64], worse: Worse) -> Judged {
        judge_shift(cand, base, worse, DEFAULT_NOISE, DEFAULT_MAX_REGRESSION).unwrap()
    }

    #[test]
    fn identical_sides_pass() {
        let base = spread(100.0, 0.03, 30);
        let j = judge(&base, &base, Worse::Lower);
        assert_eq!(
            (j.decision, j.thin, j.replies_needed),
            (Decision::Ok, false, None)
        );
        assert!(close(j.shift.ratio, 1.0));
        assert_eq!(judge(&base, &base, Worse::Higher).decision, Decision::Ok);
    }

    #[test]
    fn a_clear_ten_percent_regression_fails() {
        let base = spread(100.0, 0.03, 30);
        let cand = spread(90.0, 0.03, 30);
        let j = judge(&cand, &base, Worse::Lower);
        assert_eq!(j.decision, Decision::Fail, "{j:?}");
        assert!(close(j.shift.ratio, 0.9));
        // The same figures as first-token times: 10% lower is better, and passes.
        assert_eq!(judge(&cand, &base, Worse::Higher).decision, Decision::Ok);
    }

    #[test]
    fn a_shift_within_noise_never_fails() {
        // 2% slower, against 3% noise: whatever the spread and the count, never FAIL.
        for sd in [0.001, 0.01, 0.03, 0.06, 0.2] {
            for n in [3, 6, 10, 30, 100] {
                let base = spread(100.0, sd, n);
                let cand = spread(98.0, sd, n);
                let j = judge(&cand, &base, Worse::Lower);
                assert_ne!(j.decision, Decision::Fail, "sd {sd}, {n} a side: {j:?}");
                let j = judge(&spread(102.0, sd, n), &base, Worse::Higher);
                assert_ne!(j.decision, Decision::Fail, "sd {sd}, {n} a side: {j:?}");
            }
        }
        // Tight enough, 2% passes outright.
        let j = judge(
            &spread(98.0, 0.01, 30),
            &spread(100.0, 0.01, 30),
            Worse::Lower,
        );
        assert_eq!(j.decision, Decision::Ok);
    }

    #[test]
    fn three_a_side_is_thin_and_inconclusive() {
        // Completely separated, 50% slower: the test would reject, the rule does not decide.
        let j = judge(&[50.0, 51.0, 52.0], &[100.0, 101.0, 102.0], Worse::Lower);
        assert!(j.thin);
        assert!(j.shift.interval.is_some());
        assert_eq!(j.decision, Decision::Inconclusive);
        assert_eq!(
            j.replies_needed,
            Some(RepliesNeeded::About(FEWEST_REPLIES_A_SIDE))
        );
        let j = judge(&[100.0; 3], &[100.0; 3], Worse::Higher);
        assert_eq!((j.thin, j.decision), (true, Decision::Inconclusive));
        // Six a side on one side and five on the other is still thin.
        let j = judge(
            &spread(100.0, 0.01, 6),
            &spread(100.0, 0.01, 5),
            Worse::Lower,
        );
        assert_eq!((j.thin, j.decision), (true, Decision::Inconclusive));
    }

    #[test]
    fn first_token_is_mirrored() {
        let base = spread(200.0, 0.03, 30);
        // 10% slower first token: FAIL; 2% slower: OK; 10% faster: OK.
        assert_eq!(
            judge(&spread(220.0, 0.03, 30), &base, Worse::Higher).decision,
            Decision::Fail
        );
        assert_eq!(
            judge(&spread(204.0, 0.03, 30), &base, Worse::Higher).decision,
            Decision::Ok
        );
        assert_eq!(
            judge(&spread(180.0, 0.03, 30), &base, Worse::Higher).decision,
            Decision::Ok
        );
        // The boundaries on hand-made intervals: 1 + eps itself does not fail, 1 + R itself
        // passes; mirrored for the rate.
        let at = |low, high| Interval {
            low,
            high,
            rank: 1,
            coverage: 0.9,
            method: Method::Exact,
        };
        let d = |i: Interval, w| decide(Some(&i), w, 0.03, 0.10, false);
        assert_eq!(d(at(1.03, 1.2), Worse::Higher), Decision::Inconclusive);
        assert_eq!(d(at(1.0301, 1.2), Worse::Higher), Decision::Fail);
        assert_eq!(d(at(0.95, 1.10), Worse::Higher), Decision::Ok);
        assert_eq!(d(at(0.8, 0.97), Worse::Lower), Decision::Inconclusive);
        assert_eq!(d(at(0.8, 0.9699), Worse::Lower), Decision::Fail);
        assert_eq!(d(at(0.90, 1.05), Worse::Lower), Decision::Ok);
        // Surely beyond noise though inside R: FAIL comes first.
        assert_eq!(d(at(0.94, 0.96), Worse::Lower), Decision::Fail);
        assert_eq!(d(at(1.04, 1.06), Worse::Higher), Decision::Fail);
        assert_eq!(
            decide(None, Worse::Lower, 0.03, 0.10, false),
            Decision::Inconclusive
        );
    }

    #[test]
    fn replies_needed_follows_the_formula() {
        // sigma 0.10, eps 3%, R 10%: delta = ln(0.97/0.90) = 0.074901; (z_.95 + z_.80)^2 =
        // (1.644854 + 0.841621)^2 = 6.182557; n = 2 * 6.182557 * 0.01 / 0.0056102 / 0.954930
        // = 23.08: 24 a side.
        assert_eq!(
            replies_needed(0.10, Worse::Lower, 0.03, 0.10),
            RepliesNeeded::About(24)
        );
        // First-token's band is ln(1.10/1.03) = 0.065752, a little narrower: 29.95, so 30.
        assert_eq!(
            replies_needed(0.10, Worse::Higher, 0.03, 0.10),
            RepliesNeeded::About(30)
        );
        // 3% spread needs 2.08, but never under the thin line.
        assert_eq!(
            replies_needed(0.03, Worse::Lower, 0.03, 0.10),
            RepliesNeeded::About(FEWEST_REPLIES_A_SIDE)
        );
        assert_eq!(
            replies_needed(0.0, Worse::Lower, 0.03, 0.10),
            RepliesNeeded::About(6)
        );
        // 250% spread: far over the cap, said as such.
        assert_eq!(
            replies_needed(2.5, Worse::Lower, 0.03, 0.10),
            RepliesNeeded::OverCap
        );
        assert_eq!(
            replies_needed(f64::NAN, Worse::Lower, 0.03, 0.10),
            RepliesNeeded::OverCap
        );
        // An inconclusive judgement carries it: 20% spread at 6 a side straddles the band.
        let j = judge(&spread(95.0, 0.2, 6), &spread(100.0, 0.2, 6), Worse::Lower);
        assert_eq!(j.decision, Decision::Inconclusive);
        let Some(RepliesNeeded::About(n)) = j.replies_needed else {
            panic!("{j:?}");
        };
        assert!((60..200).contains(&n), "{n}");
    }

    /// The share of `trials` judgements of 6 log-normal replies a side (log spread `sd`), the
    /// candidate's median `ratio` times the baseline's, that come out each way:
    /// (fail, ok, inconclusive).
    fn rates(rng: &mut SplitMix, ratio: f64, sd: f64, trials: usize) -> (f64, f64, f64) {
        let (mut fail, mut ok) = (0, 0);
        for _ in 0..trials {
            let mut side = |center: f64| -> Vec<f64> {
                (0..6).map(|_| center * (sd * rng.normal()).exp()).collect()
            };
            let base = side(100.0);
            let cand = side(100.0 * ratio);
            match judge(&cand, &base, Worse::Lower).decision {
                Decision::Fail => fail += 1,
                Decision::Ok => ok += 1,
                Decision::Inconclusive => {}
            }
        }
        let t = trials as f64;
        (
            fail as f64 / t,
            ok as f64 / t,
            (trials - fail - ok) as f64 / t,
        )
    }

    #[test]
    fn the_rules_error_rates_at_six_replies_a_side() {
        // 3% log-normal spread, 6 independent replies a side, 2,000 trials each: an unchanged
        // serve FAILs under 5% of the time, a true 10% regression at least 65%. Binomial
        // standard error at 2,000 trials is at most 1.1%, far inside both margins; the seed
        // makes it repeatable. Before the interval allowed for serial correlation the
        // regression FAILed 98.8% of the time here; six replies cannot rule correlation out,
        // and the bound on it ([`Correlation`]) now leaves about 28% of these inconclusive.
        let mut rng = SplitMix(0x5EED_0018);
        let (fail, ok, inconclusive) = rates(&mut rng, 1.0, 0.03, 2_000);
        eprintln!("unchanged: FAIL {fail:.4}, OK {ok:.4}, inconclusive {inconclusive:.4}");
        assert!(fail < 0.05, "unchanged serve failed {fail}");
        let (fail, ok, inconclusive) = rates(&mut rng, 0.9, 0.03, 2_000);
        eprintln!("10% slower: FAIL {fail:.4}, OK {ok:.4}, inconclusive {inconclusive:.4}");
        assert!(fail >= 0.65, "10% regression failed only {fail}");
    }

    #[test]
    fn lag_sums_by_hand() {
        // 1..6: mean 3.5, deviations -2.5 -1.5 -0.5 0.5 1.5 2.5; lag-1 products 3.75 + 0.75 -
        // 0.25 + 0.75 + 3.75 = 8.75, squares 2 (6.25 + 2.25 + 0.25) = 17.5 (r1 = 0.5).
        assert_eq!(lag_sums(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), (8.75, 17.5));
        // pi's digits 3 1 4 1 5 9 2 6: mean 31/8, products sum to -593/64, squares to 423/8
        // (all exact in binary, so exactly equal).
        assert_eq!(
            lag_sums(&[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]),
            (-593.0 / 64.0, 423.0 / 8.0)
        );
    }

    #[test]
    fn correlation_of_by_hand() {
        // The logs 1..6 (m = 6, r1 = 8.75 / 17.5 = 1/2) against pi's digits 3 1 4 1 5 9 2 6
        // (n = 8, r1 = (-593/64) / (423/8) = -593/3384), sums from lag_sums_by_hand. Pooled
        // r1 = (8.75 - 593/64) / (17.5 + 423/8) = -33/4520; h = 7; bias-corrected
        // (7 * -33/4520 + 1) / (7 - 3) = 4273/18016 = 0.237178; standard error
        // sqrt((1 - 0.237178^2) / 14) = 0.259635; rho = 0.496813, inside [0, 0.9].
        // Effective sizes m / f(rho, m) and n / f(rho, n), f = 1 + 2 sum_{h<n} (1 - h/n)
        // rho^h: 2.574611 and 3.218088. (Worked in exact fractions, then floats.)
        let c = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        for (k, swapped) in [
            (correlation_of(&c, &b).unwrap(), false),
            (correlation_of(&b, &c).unwrap(), true),
        ] {
            let (r1_6, r1_8) = (0.5, -593.0 / 3384.0);
            let (eff_6, eff_8) = (2.574_611_317_539_728, 3.218_088_162_074_278);
            let (cr1, br1, ce, be) = if swapped {
                (r1_8, r1_6, eff_8, eff_6)
            } else {
                (r1_6, r1_8, eff_6, eff_8)
            };
            assert!(
                near(k.candidate_r1, cr1) && near(k.baseline_r1, br1),
                "{k:?}"
            );
            assert!(near(k.pooled, 4273.0 / 18016.0), "{k:?}");
            assert!(near(k.rho, 0.496_813_325_413_689_83), "{k:?}");
            assert!(
                near(k.candidate_effective, ce) && near(k.baseline_effective, be),
                "{k:?}"
            );
            assert!(!k.widened);
        }
        // 6 a side is enough on either side; 5 on either side is not.
        assert_eq!(correlation_of(&c[..5], &b), None);
        assert_eq!(correlation_of(&b, &c[..5]), None);
        // A side with no spread has no correlation to read, whichever side it is.
        assert_eq!(correlation_of(&[2.0; 6], &b), None);
        assert_eq!(correlation_of(&c, &[2.0; 8]), None);
    }

    #[test]
    fn widened_rank_by_hand() {
        // m 10, n 20, f_c 2, f_b 3, 90%: mean 100, Var(U) = 200 (20 * 2 + 10 * 3 + 1) / 12
        // = 1183.33, sd 34.39961; c = floor(99.5 - 1.644854 * 34.39961) = floor(42.9177) =
        // 42, k 43; coverage 1 - 2 Phi((42.5 - 100) / 34.39961) = 0.905383. m 20 and n 10
        // with the same inflations: Var = 200 (10 * 2 + 20 * 3 + 1) / 12 = 1350, sd 36.74235,
        // c = floor(39.0642) = 39, k 40, coverage 0.900360. (Phi and its inverse from Python's
        // statistics.NormalDist.)
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let (k, coverage) = widened_rank(10, 20, (2.0, 3.0), 0.90).unwrap();
        assert!(
            k == 43 && near(coverage, 0.905_383_052_937_591_7),
            "{k} {coverage}"
        );
        let (k, coverage) = widened_rank(20, 10, (2.0, 3.0), 0.90).unwrap();
        assert!(
            k == 40 && near(coverage, 0.900_360_005_345_695),
            "{k} {coverage}"
        );
        // No inflation: the usual normal approximation, mn(m + n + 1)/12.
        let (c, tail) = normal_critical(10, 10, 0.05).unwrap();
        let (k, coverage) = widened_rank(10, 10, (1.0, 1.0), 0.90).unwrap();
        assert_eq!((k, coverage), (c as usize + 1, 1.0 - 2.0 * tail));
        assert!(
            k == 28 && near(coverage, 0.911_026_988_298_186_6),
            "{k} {coverage}"
        );
        // 3 a side: c = floor(4 - 1.644854 * 2.291288) = floor(0.2312) = 0, still an interval
        // (k 1); 2 a side: floor(1.5 - 1.644854 * 1.290994) = -1, none.
        let (k, coverage) = widened_rank(3, 3, (1.0, 1.0), 0.90).unwrap();
        assert!(
            k == 1 && near(coverage, 0.919_144_401_629_947_7),
            "{k} {coverage}"
        );
        assert_eq!(widened_rank(2, 2, (1.0, 1.0), 0.90), None);
    }

    #[test]
    fn planned_inflation_is_the_limit_of_a_mean_s() {
        // (1 + rho) / (1 - rho) (Box, Jenkins & Reinsel 2008, sec. 2.1.6): 3 at rho 0.5, 9 at
        // 0.8; 1 without a correlation.
        let mut s = hodges_lehmann(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0], 0.90).unwrap();
        assert_eq!(s.correlation, None);
        assert_eq!(planned_inflation(&s), 1.0);
        for (rho, want) in [(0.5, 3.0), (0.8, 9.0), (0.0, 1.0)] {
            s.correlation = Some(Correlation {
                candidate_r1: rho,
                baseline_r1: rho,
                pooled: rho,
                rho,
                candidate_effective: 3.0,
                baseline_effective: 3.0,
                widened: false,
            });
            assert!((planned_inflation(&s) - want).abs() < 1e-12, "{rho}");
        }
    }

    #[test]
    fn a_plan_asks_at_least_six_independent_replies_a_side() {
        use RepliesNeeded::{About, OverCap};
        // Uncorrelated: the spread's plan stands.
        assert_eq!(correlated_floor(About(6), 1.0), About(6));
        assert_eq!(correlated_floor(About(40), 1.0), About(40));
        // At rho 0.9 (inflation 19), 6 independent replies are 114 correlated ones, whatever
        // the spread asks; a larger plan from the spread stands.
        assert_eq!(correlated_floor(About(6), 19.0), About(114));
        assert_eq!(correlated_floor(About(200), 19.0), About(200));
        // 3 is 18 exactly; a fraction over rounds up.
        assert_eq!(correlated_floor(About(6), 3.0), About(18));
        assert_eq!(correlated_floor(About(6), 3.1), About(19));
        assert_eq!(correlated_floor(About(6), 2000.0), OverCap);
        // At the cap itself, still a count; one over, past it.
        assert_eq!(correlated_floor(About(6), 10_000.0 / 6.0), About(10_000));
        assert_eq!(correlated_floor(About(6), 10_001.0 / 6.0), OverCap);
        assert_eq!(correlated_floor(OverCap, 1.0), OverCap);
    }
}

/// Prompts in rotation (issue 37): the serial correlation estimated with each prompt's level
/// taken out. Its own module, beside `tests`, as its simulations are of another design.
#[cfg(test)]
mod grouped_tests {
    use super::*;
    use crate::judging::test_rng::SplitMix;

    /// Six prompts in rotation whose levels differ by up to 30%, falling along the rotation as
    /// llama-server's cold first tokens over six prompts did (157 to 100 ms), the same on
    /// both sides.
    const LEVELS: [f64; 6] = [0.2, 0.12, 0.05, 0.0, -0.05, -0.1];

    /// One run of `size` replies: the prompts in rotation, their levels plus AR(1) noise of
    /// lag-1 correlation `rho` and spread `sd`, shifted by `shift` (a log), as figures.
    fn run(
        rng: &mut SplitMix,
        size: usize,
        rho: f64,
        sd: f64,
        shift: f64,
    ) -> (Vec<f64>, Vec<usize>) {
        let noise = rng.ar1(size, rho, sd);
        let groups: Vec<usize> = (0..size).map(|i| i % LEVELS.len()).collect();
        let values = noise
            .iter()
            .zip(&groups)
            .map(|(e, g)| (100f64.ln() + LEVELS[*g] + e + shift).exp())
            .collect();
        (values, groups)
    }

    /// (A/A FAIL rate, the mean correlation the A/A intervals were widened for, 10% regression
    /// FAIL rate), with the groups given or not.
    fn rates(seed: u64, rho: f64, size: usize, grouped: bool, trials: usize) -> (f64, f64, f64) {
        let mut rng = SplitMix(seed);
        let (mut aa, mut widened, mut caught) = (0, 0.0, 0);
        for _ in 0..trials {
            let (b, gb) = run(&mut rng, size, rho, 0.05, 0.0);
            let (c, gc) = run(&mut rng, size, rho, 0.05, 0.0);
            let (r, gr) = run(&mut rng, size, rho, 0.05, 1.1f64.ln());
            let judge = |x: &[f64], gx: &[usize]| {
                let groups = grouped.then_some((gx, &gb[..]));
                judge_shift_in_groups(x, &b, groups, Worse::Higher, 0.03, 0.10).unwrap()
            };
            let j = judge(&c, &gc);
            aa += usize::from(j.decision == Decision::Fail);
            widened += j.shift.correlation.map_or(0.0, |k| k.rho);
            caught += usize::from(judge(&r, &gr).decision == Decision::Fail);
        }
        let t = trials as f64;
        (aa as f64 / t, widened / t, caught as f64 / t)
    }

    #[test]
    fn prompts_in_rotation_do_not_read_as_correlated_replies() {
        // Replies whose noise is independent, 18 a side over six prompts of levels up to 30%
        // apart: taken as one series, the rotation reads as strong correlation and widens the
        // interval for it; with each prompt's level taken out, only the margin the estimate
        // always carries is left, and a true 10% regression is caught more often.
        let trials = 400;
        let (_, widened_plain, caught_plain) = rates(0x5EED_0050, 0.0, 18, false, trials);
        let (aa, widened, caught) = rates(0x5EED_0050, 0.0, 18, true, trials);
        eprintln!(
            "widened {widened_plain:.3} -> {widened:.3}, caught {caught_plain:.3} -> {caught:.3}, A/A {aa:.3}"
        );
        assert!(
            widened_plain > 0.35 && widened < widened_plain / 2.0,
            "{widened} {widened_plain}"
        );
        assert!(caught > caught_plain, "{caught} {caught_plain}");
        assert!(
            aa <= 0.05 + 2.33 * (0.05 * 0.95 / trials as f64).sqrt(),
            "{aa}"
        );
    }

    #[test]
    fn with_prompts_taken_out_correlated_replies_still_widen_the_interval() {
        // The replies' own correlation (AR(1) at 0.5 and 0.8) is still found and allowed for:
        // an unchanged serve FAILs under 5% (with the binomial allowance) at 12 and 30 a side.
        let trials = 600;
        for rho in [0.5, 0.8] {
            for size in [12, 30] {
                let (aa, widened, _) = rates(0x5EED_0051, rho, size, true, trials);
                eprintln!("rho {rho}, {size} a side: A/A {aa:.3}, widened {widened:.3}");
                assert!(
                    aa <= 0.05 + 2.33 * (0.05 * 0.95 / trials as f64).sqrt(),
                    "{aa}"
                );
                assert!(
                    widened > rho / 2.0,
                    "rho {rho}, {size} a side: widened for {widened}"
                );
            }
        }
    }

    #[test]
    fn groups_of_another_length_than_the_values_are_not_used() {
        let v = [100.0, 110.0, 90.0, 105.0, 95.0, 100.0, 102.0];
        let plain = judge_shift(&v, &v, Worse::Lower, 0.03, 0.10).unwrap();
        let short = [0usize; 3];
        let odd = judge_shift_in_groups(&v, &v, Some((&short, &short)), Worse::Lower, 0.03, 0.10)
            .unwrap();
        assert_eq!(plain, odd);
        // Each value its own group on each side, the same values: nothing left to correlate.
        let own: Vec<usize> = (0..v.len()).collect();
        let j =
            judge_shift_in_groups(&v, &v, Some((&own, &own)), Worse::Lower, 0.03, 0.10).unwrap();
        assert_eq!(j.shift.correlation, None);
        assert_eq!(j.shift.ratio, plain.shift.ratio);
    }
}
