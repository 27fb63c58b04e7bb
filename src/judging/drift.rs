//! Drift (issue 20, item 2): whether the decode rate fell, or the first-token time rose, over a
//! run, read from the per-reply figures in their order. A four-second ticket cannot see a rate
//! that falls 15% after two minutes of throttling; the per-reply figures of a longer run can.
//!
//! Everything works on natural logarithms, as [`crate::judging::baseline`] does: a fall of 10%
//! is the same step of ln 0.9 whatever the serve's speed.
//!
//! - [`mann_kendall`]: the Mann-Kendall trend test (Mann 1945; Kendall 1975, *Rank Correlation
//!   Methods*, 4th ed.; as Gilbert 1987, *Statistical Methods for Environmental Pollution
//!   Monitoring*, ch. 16, gives it): S, its variance with the tie correction, the exact null
//!   distribution of S up to [`EXACT_MAX`] values without ties ([`inversion_counts`],
//!   [`exact_at_most`]), the normal approximation with continuity correction above.
//! - [`sens_slope`], [`sens_slope_at`]: Sen's (1968) slope, the median of the pairwise slopes.
//! - [`lag_correlation`], [`block_length`], [`blocks`]: neighbouring replies are correlated (a
//!   serve's cache warms, a box's clock changes), and a trend test fed correlated values
//!   raises false alarms; grouping the replies into blocks (the block's median) before the
//!   test keeps that correlation out. [`block_length`] says how the length is chosen and why.
//! - [`trend`]: the whole rule on a series; [`judge_drift`]: its decision. The `drift` and
//!   `first-token-drift` lines of a run are the verdict's (`judging::verdict::drift`).
//!
//! Pure: no I/O; `statrs` gives the normal CDF, everything else is computed here from its
//! definition and tested against published tables and examples.

use statrs::distribution::{ContinuousCDF, Normal};

use crate::archive::record::Status;

/// Fewer figures than this and there is no drift test at all: at 7 a series can only just
/// reach p < 0.01 when every reply is slower than the one before (1/5040).
pub const MIN_REPLIES: usize = 8;
/// Blocks are never so long that fewer than this many remain: the exact test on 8 blocks can
/// still reach p = 1/8! = 0.000025.
pub const MIN_BLOCKS: usize = 8;
/// Blocks are never so short that more than this many remain: S and Sen's slope count every
/// pair of blocks, and a day's soak of 40,000 replies must not become 800 million pairs.
pub const MAX_BLOCKS: usize = 1_000;
/// Up to this many values without ties, the p-value is from the exact distribution of S
/// (Gilbert 1987, Table A18, prints it for n = 4 to 10); above it, or with ties, the normal
/// approximation.
pub const EXACT_MAX: usize = 10;
/// A fall FAILs only with a one-sided p below this.
pub const LEVEL: f64 = 0.01;
/// `--max-drift`'s default: a fall of more than this share over the run (and sure, by
/// [`LEVEL`]) FAILs.
pub const DEFAULT_MAX_DRIFT: f64 = 0.10;
/// The correlation between neighbouring blocks' medians a block length must bring the
/// replies' correlation down to. 0.05 inflates the variance of S by about 10% (Yue & Wang
/// 2004's factor 1 + 2 sum (1 - k/n) rho_k, with rho_1 = 0.05 and the lags beyond it smaller
/// still): a nominal 1% test stays near 1%.
const BLOCK_CORRELATION: f64 = 0.05;
/// A lag correlation estimated at or above this is taken as this: the AR(1) formulas divide by
/// 1 - rho.
const MAX_CORRELATION: f64 = 0.99;

/// How a Mann-Kendall p-value was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// From the exact null distribution of S: at most [`EXACT_MAX`] values, none tied.
    Exact,
    /// From the normal approximation with continuity correction and the tie-corrected variance.
    Normal,
}

/// The Mann-Kendall test of a series in its order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannKendall {
    /// How many values.
    pub n: usize,
    /// S: over all pairs i < j, the count of x_j > x_i less the count of x_j < x_i.
    pub s: i64,
    /// The variance of S under no trend, corrected for ties (Gilbert 1987, eq. 16.4).
    pub variance: f64,
    /// How the p-values were found.
    pub method: Method,
    /// One-sided p for a decrease: P(S <= s) under no trend.
    pub p_decrease: f64,
    /// One-sided p for an increase: P(S >= s) under no trend.
    pub p_increase: f64,
    /// Two-sided p: twice the smaller one-sided p, at most 1.
    pub p_two_sided: f64,
}

/// S of `x` in its order: sign(x_j - x_i) summed over i < j (a tie counts 0).
pub fn s_statistic(x: &[f64]) -> i64 {
    let mut s = 0i64;
    // Each value against those before it: the pairs i < j, each once.
    for (j, b) in x.iter().enumerate() {
        for a in &x[..j] {
            s += match b.total_cmp(a) {
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
            };
        }
    }
    s
}

/// The variance of S under no trend with the tie correction (Kendall 1975; Gilbert 1987,
/// eq. 16.4): [n(n-1)(2n+5) - sum over tied groups of t(t-1)(2t+5)] / 18.
pub fn s_variance(x: &[f64]) -> f64 {
    let term = |t: usize| {
        let t = t as f64;
        t * (t - 1.0) * (2.0 * t + 5.0)
    };
    let mut sorted = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    let ties: f64 = sorted
        .chunk_by(|a, b| a.total_cmp(b).is_eq())
        .map(|group| term(group.len()))
        .sum();
    (term(x.len()) - ties) / 18.0
}

/// The number of permutations of n items with k inversions, for k = 0 to n(n-1)/2: the
/// Mahonian numbers (OEIS A008302). Without ties S = n(n-1)/2 - 2 * inversions, so these are
/// the frequencies of S that Kendall's tables print. `None` above 20 (21! overflows u64).
///
/// Built one item at a time: the new item, put at any of the k + 1 places of k items, adds 0
/// to k inversions.
pub fn inversion_counts(n: usize) -> Option<Vec<u64>> {
    if n > 20 {
        return None;
    }
    let mut counts = vec![1u64];
    for items in 2..=n {
        let mut next = vec![0u64; counts.len() + items - 1];
        for (k, &c) in counts.iter().enumerate() {
            for added in 0..items {
                next[k + added] += c;
            }
        }
        counts = next;
    }
    Some(counts)
}

/// P(S <= s) for n values without ties under no trend, from [`inversion_counts`]. `None` above
/// 20 values.
pub fn exact_at_most(n: usize, s: i64) -> Option<f64> {
    let counts = inversion_counts(n)?;
    let pairs = (n * n.saturating_sub(1) / 2) as i64;
    // S <= s exactly when the inversions are at least (pairs - s) / 2, rounded up.
    let least = ((pairs - s).max(0) as usize).div_ceil(2);
    let total: u64 = counts.iter().sum();
    let at_least: u64 = counts.iter().skip(least).sum();
    Some(at_least as f64 / total as f64)
}

/// The Mann-Kendall test of `x` in its order. `None` with fewer than 2 values or any value
/// that is not finite.
///
/// Exact p-values for at most [`EXACT_MAX`] values without ties; else the normal
/// approximation with continuity correction: P(S <= s) = Phi((s + 1) / sd), P(S >= s) =
/// Phi((1 - s) / sd), the Z of Gilbert 1987 eq. 16.5 in each direction. All values tied: S = 0
/// and no variance, p = 1 each way.
pub fn mann_kendall(x: &[f64]) -> Option<MannKendall> {
    if x.len() < 2 || x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = x.len();
    let s = s_statistic(x);
    let variance = s_variance(x);
    let no_ties = variance == s_variance_untied(n);
    let (method, p_decrease, p_increase) = if n <= EXACT_MAX && no_ties {
        // S is symmetric about 0 without ties: P(S >= s) = P(S <= -s).
        let down = exact_at_most(n, s)?;
        let up = exact_at_most(n, -s)?;
        (Method::Exact, down, up)
    } else {
        // All values tied is the one way to no variance; then S = 0 and both arguments are
        // 1 / 0 = +inf: p = 1 each way, as it should be.
        let sd = variance.sqrt();
        let normal = Normal::standard();
        let s = s as f64;
        (
            Method::Normal,
            normal.cdf((s + 1.0) / sd),
            normal.cdf((1.0 - s) / sd),
        )
    };
    Some(MannKendall {
        n,
        s,
        variance,
        method,
        p_decrease,
        p_increase,
        p_two_sided: (2.0 * p_decrease.min(p_increase)).min(1.0),
    })
}

/// The variance of S for n values none of which tie.
fn s_variance_untied(n: usize) -> f64 {
    let n = n as f64;
    n * (n - 1.0) * (2.0 * n + 5.0) / 18.0
}

/// Sen's slope of `x` at positions 0, 1, 2, ...: the median of (x_j - x_i) / (j - i) over
/// i < j (Sen 1968; Gilbert 1987, sec. 16.5). `None` with fewer than 2 values.
pub fn sens_slope(x: &[f64]) -> Option<f64> {
    let t: Vec<f64> = (0..x.len()).map(|i| i as f64).collect();
    sens_slope_at(&t, x)
}

/// Sen's slope of `x` at positions `t`: the median of (x_j - x_i) / (t_j - t_i) over the pairs
/// i < j with t_i != t_j (Sen 1968, who allows tied positions and skips their pairs). `None`
/// when the lengths differ or no pair has two positions.
pub fn sens_slope_at(t: &[f64], x: &[f64]) -> Option<f64> {
    if t.len() != x.len() {
        return None;
    }
    let mut slopes = Vec::with_capacity(x.len() * x.len().saturating_sub(1) / 2);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            if t[j] != t[i] {
                slopes.push((x[j] - x[i]) / (t[j] - t[i]));
            }
        }
    }
    crate::judging::measure::median(&slopes)
}

/// The k-th smallest (from 1) of the distances |v_i - v_j|, i < j, of `sorted` (ascending,
/// finite), found without listing them: a binary search on the distance's bits (a
/// non-negative f64 orders as its bits do), counting the pairs within a distance with two
/// pointers. O(n log) time and no memory beyond the slice, where listing the pairs would take
/// n^2 / 2 values.
fn kth_pairwise_distance(sorted: &[f64], k: usize) -> Option<f64> {
    let n = sorted.len();
    if k == 0 || k > n * n.saturating_sub(1) / 2 {
        return None;
    }
    let within = |d: f64| -> usize {
        let mut count = 0;
        let mut i = 0;
        for j in 0..n {
            while sorted[j] - sorted[i] > d {
                i += 1;
            }
            count += j - i;
        }
        count
    };
    let (mut low, mut high) = (0u64, (sorted[n - 1] - sorted[0]).to_bits());
    while low < high {
        let mid = low + (high - low) / 2;
        if within(f64::from_bits(mid)) >= k {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    Some(f64::from_bits(low))
}

/// Rousseeuw & Croux's (1993, JASA 88, 1273-1283) Qn scale of `values`, without its
/// consistency constant: the k-th smallest pairwise distance, k = C(h, 2), h = n/2 + 1. It
/// ignores up to half the values as outliers and is 82% efficient at the normal. `None` under
/// 2 values or with any that is not finite.
fn qn_scale(values: &[f64]) -> Option<f64> {
    if values.len() < 2 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let h = values.len() / 2 + 1;
    kth_pairwise_distance(&sorted, h * (h - 1) / 2)
}

/// The lag-1 correlation of `x`, estimated so that neither a trend nor a step can pass for it.
///
/// For a stationary series with lag correlations rho_h the variogram is gamma(h) =
/// Var(x_{t+h} - x_t) / 2 = sigma^2 (1 - rho_h), so for AR(1) gamma(2) / gamma(1) = 1 + rho.
/// Both variances are taken as the squared Qn scale of the lag-1 and lag-2 differences, the
/// highly robust variogram of Genton (1998, *Mathematical Geology* 30, 213-221): a linear
/// trend shifts every difference alike (Qn, made of distances, does not see it), and a step
/// makes one lag-1 difference and two lag-2 ones outliers (Qn ignores them). The usual lag-1
/// autocorrelation reads both as strong correlation, even after removing a linear fit (the
/// trend-free pre-whitening of Yue et al. 2002, *Hydrological Processes* 16, 1807-1829, which
/// removes a ramp but not a step): a block rule built on it would block a throttled serve's
/// step-down away.
///
/// `None` with fewer than 4 values, any value that is not finite, or lag-1 differences with
/// no spread (a series without noise).
pub fn lag_correlation(x: &[f64]) -> Option<f64> {
    if x.len() < 4 {
        return None;
    }
    let d1: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
    let d2: Vec<f64> = x.windows(3).map(|w| w[2] - w[0]).collect();
    let s1 = qn_scale(&d1)?;
    let s2 = qn_scale(&d2)?;
    if s1 <= 0.0 {
        return None;
    }
    Some((s2 / s1).powi(2) - 1.0)
}

/// The correlation of neighbouring blocks' means, `length` values a block, of an AR(1) series
/// with lag-1 correlation `rho` (0 <= rho < 1): the covariance of two neighbouring blocks'
/// sums, the sum of rho^(j-i) over i in one block and j in the next, is rho (1 - rho^b)^2 /
/// (1 - rho)^2; a block sum's variance is b + 2 sum over k < b of (b - k) rho^k.
fn block_correlation(rho: f64, length: usize) -> f64 {
    if rho <= 0.0 || length == 0 {
        return rho.max(0.0);
    }
    let b = length as f64;
    let covariance = rho * (1.0 - rho.powi(length as i32)).powi(2) / (1.0 - rho).powi(2);
    let variance = b + 2.0
        * (1..length)
            .map(|k| (b - k as f64) * rho.powi(k as i32))
            .sum::<f64>();
    covariance / variance
}

/// How many consecutive values a block of `x` holds, chosen from the data.
///
/// The rule: estimate the series' lag-1 correlation rho with [`lag_correlation`] (robust to a
/// trend and to a step, so that a real fall is not taken for correlation and blocked away);
/// take the shortest length b at which neighbouring blocks' means would correlate by at most
/// 0.05 were the series AR(1) with that rho (at rho = 0.5, b = 15; at 0.2, b = 5; at or below
/// 0, b = 1); bounded so that at least [`MIN_BLOCKS`] and at most [`MAX_BLOCKS`] blocks remain.
///
/// Why: this is the batch-means method of simulation output analysis (Schmeiser 1982,
/// *Operations Research* 30, 556-568: batches long enough that their means are nearly
/// uncorrelated, and not so few that the test loses its power; he advises 10 to 30), with the
/// length read from a fitted AR(1) rather than from a test of the batch means. The test rule
/// (double the batch until its means pass a test of independence, as Fishman 1978,
/// *Management Science* 24, 510-521) was tried here with the lag-1 autocorrelation of the
/// block medians, and rejected: a step-down reads to it as correlation, so it blocks a
/// throttled serve's fall away (the tests' simulation gives the rates).
///
/// Block medians are not block means, but for a block's few values near the normal they are
/// close enough for choosing a length. At 30 replies the bound allows blocks of at most 3
/// (neighbouring blocks still correlated 0.28 at rho = 0.5): no length chosen from 30 values
/// can do better, and the simulation says what that costs.
pub fn block_length(x: &[f64]) -> usize {
    let n = x.len();
    let shortest = n.div_ceil(MAX_BLOCKS).max(1);
    let longest = (n / MIN_BLOCKS).max(shortest);
    let rho = lag_correlation(x)
        .unwrap_or(0.0)
        .clamp(0.0, MAX_CORRELATION);
    (shortest..=longest)
        .find(|&b| block_correlation(rho, b) <= BLOCK_CORRELATION)
        .unwrap_or(longest)
}

/// A series grouped into blocks of consecutive values.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocks {
    /// Each block's centre: the mean of its values' positions (0-based).
    pub centers: Vec<f64>,
    /// Each block's median.
    pub medians: Vec<f64>,
    /// The fewest values a block holds.
    pub shortest: usize,
    /// The most values a block holds: `shortest` or one more, when the values do not divide
    /// evenly.
    pub longest: usize,
}

/// `x` in n / `length` blocks (at least 1, rounded down) of consecutive values, every value in
/// one: block i holds positions [i n / k, (i + 1) n / k), so the blocks differ by one value at
/// most and the remainder is spread along the run, not heaped at its end.
pub fn blocks(x: &[f64], length: usize) -> Blocks {
    let n = x.len();
    let k = (n / length.max(1)).max(1);
    let mut out = Blocks {
        centers: Vec::with_capacity(k),
        medians: Vec::with_capacity(k),
        shortest: usize::MAX,
        longest: 0,
    };
    if n == 0 {
        out.shortest = 0;
        return out;
    }
    for i in 0..k {
        let (low, high) = (i * n / k, (i + 1) * n / k);
        out.centers.push((low + high - 1) as f64 / 2.0);
        out.medians
            .push(crate::judging::measure::median(&x[low..high]).unwrap_or(f64::NAN));
        out.shortest = out.shortest.min(high - low);
        out.longest = out.longest.max(high - low);
    }
    out
}

/// The drift of a series over a run: blocks, Sen's slope, and the Mann-Kendall test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    /// How many values the series has.
    pub values: usize,
    /// The lag-1 correlation [`lag_correlation`] estimated (0 where it could not).
    pub lag_correlation: f64,
    /// The fewest values a block holds: the length [`block_length`] chose, or more where the
    /// values do not divide evenly (98 values in blocks of 11 are 8 blocks of 12 or 13).
    pub block_length: usize,
    /// How many blocks.
    pub blocks: usize,
    /// The most values a block holds: `block_length` or one more.
    pub longest_block: usize,
    /// Sen's slope of the block medians at their centres: the change a value, on the scale
    /// given (logs: a share of ln).
    pub slope: f64,
    /// The change over the run: exp(slope * (values - 1)) - 1, the fitted last value over the
    /// fitted first less 1 (-0.2 for a fall of 20%). The series must be logs.
    pub change: f64,
    /// The Mann-Kendall test of the block medians.
    pub test: MannKendall,
}

/// The drift of `logs` (natural logs of a per-reply figure, in the replies' order). `None` under
/// [`MIN_REPLIES`] values or with any that is not finite.
pub fn trend(logs: &[f64]) -> Option<Trend> {
    if logs.len() < MIN_REPLIES || logs.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let length = block_length(logs);
    let b = blocks(logs, length);
    let slope = sens_slope_at(&b.centers, &b.medians)?;
    let test = mann_kendall(&b.medians)?;
    Some(Trend {
        values: logs.len(),
        lag_correlation: lag_correlation(logs).unwrap_or(0.0),
        block_length: b.shortest,
        blocks: b.medians.len(),
        longest_block: b.longest,
        slope,
        change: (slope * (logs.len() - 1) as f64).exp() - 1.0,
        test,
    })
}

/// The drift line's decision: FAIL when the rate fell by more than `max_drift` over the run
/// (`change` < -`max_drift`) with one-sided p < [`LEVEL`]; information otherwise. A fall of
/// exactly `max_drift`, or p of exactly the level, does not fail; nor does a NaN.
pub fn judge_drift(change: f64, p: f64, max_drift: f64) -> Status {
    if change < -max_drift && p < LEVEL {
        Status::Fail
    } else {
        Status::Info
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::test_rng::SplitMix;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn inversion_counts_are_the_mahonian_numbers() {
        // OEIS A008302, rows 4 and 5; Kendall's tables of the frequency of S print the same.
        assert_eq!(inversion_counts(4).unwrap(), [1, 3, 5, 6, 5, 3, 1]);
        assert_eq!(
            inversion_counts(5).unwrap(),
            [1, 4, 9, 15, 20, 22, 20, 15, 9, 4, 1]
        );
        assert_eq!(inversion_counts(0).unwrap(), [1]);
        assert_eq!(inversion_counts(1).unwrap(), [1]);
        let mut factorial = 1u64;
        for n in 1..=20u64 {
            factorial *= n;
            let counts = inversion_counts(n as usize).unwrap();
            assert_eq!(counts.len() as u64, n * (n - 1) / 2 + 1, "n = {n}");
            assert_eq!(counts.iter().sum::<u64>(), factorial, "n = {n}");
            let reversed: Vec<u64> = counts.iter().rev().copied().collect();
            assert_eq!(counts, reversed, "S is symmetric about 0, n = {n}");
        }
        assert_eq!(inversion_counts(21), None);
        assert_eq!(exact_at_most(21, 0), None);
    }

    /// Half a unit of the last digit `printed` shows: the table's rounding.
    fn half_unit(printed: &str) -> f64 {
        let (mantissa, exponent) = match printed.split_once('e') {
            Some((m, e)) => (m, e.parse::<i32>().unwrap()),
            None => (printed, 0),
        };
        let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
        0.5 * 10f64.powi(exponent - decimals)
    }

    #[test]
    fn exact_probabilities_match_gilbert_table_a18() {
        // Gilbert (1987), Statistical Methods for Environmental Pollution Monitoring, Table A18,
        // "Probabilities for the Mann-Kendall nonparametric test for trend": P(S >= s) under no
        // trend for n = 4 to 10, as transcribed in the MeteoSwiss mannkendall package
        // (github.com/mannkendall/Python, src/mannkendall/mk_hardcoded.py, PROB_MK_N). Every
        // printed value, each to the digits printed.
        let table: &[(usize, &[(i64, &str)])] = &[
            (4, &[(0, "0.625"), (2, "0.375"), (4, "0.167"), (6, "0.042")]),
            (
                5,
                &[
                    (0, "0.592"),
                    (2, "0.408"),
                    (4, "0.242"),
                    (6, "0.117"),
                    (8, "0.042"),
                    (10, "0.0083"),
                ],
            ),
            (
                6,
                &[
                    (1, "0.500"),
                    (3, "0.360"),
                    (5, "0.235"),
                    (7, "0.136"),
                    (9, "0.068"),
                    (11, "0.028"),
                    (13, "0.0083"),
                    (15, "0.0014"),
                ],
            ),
            (
                7,
                &[
                    (1, "0.500"),
                    (3, "0.386"),
                    (5, "0.281"),
                    (7, "0.191"),
                    (9, "0.119"),
                    (11, "0.068"),
                    (13, "0.035"),
                    (15, "0.015"),
                    (17, "0.0054"),
                    (19, "0.0014"),
                    (21, "0.0002"),
                ],
            ),
            (
                8,
                &[
                    (0, "0.548"),
                    (2, "0.452"),
                    (4, "0.360"),
                    (6, "0.274"),
                    (8, "0.199"),
                    (10, "0.138"),
                    (12, "0.089"),
                    (14, "0.054"),
                    (16, "0.031"),
                    (18, "0.016"),
                    (20, "0.0071"),
                    (22, "0.0028"),
                    (24, "0.00087"),
                    (26, "0.00019"),
                    (28, "2.5e-5"),
                ],
            ),
            (
                9,
                &[
                    (0, "0.540"),
                    (2, "0.460"),
                    (4, "0.381"),
                    (6, "0.306"),
                    (8, "0.238"),
                    (10, "0.179"),
                    (12, "0.130"),
                    (14, "0.090"),
                    (16, "0.060"),
                    (18, "0.038"),
                    (20, "0.022"),
                    (22, "0.012"),
                    (24, "0.0063"),
                    (26, "0.0029"),
                    (28, "0.0012"),
                    (30, "0.00043"),
                    (32, "0.00012"),
                    (34, "2.5e-5"),
                    (36, "2.8e-6"),
                ],
            ),
            (
                10,
                &[
                    (1, "0.500"),
                    (3, "0.431"),
                    (5, "0.364"),
                    (7, "0.300"),
                    (9, "0.242"),
                    (11, "0.190"),
                    (13, "0.146"),
                    (15, "0.108"),
                    (17, "0.078"),
                    (19, "0.054"),
                    (21, "0.036"),
                    (23, "0.023"),
                    (25, "0.014"),
                    (27, "0.0083"),
                    (29, "0.0046"),
                    (31, "0.0023"),
                    (33, "0.0011"),
                    (35, "0.00047"),
                    (37, "0.00018"),
                    (39, "5.8e-5"),
                    (41, "1.5e-5"),
                    (43, "2.8e-6"),
                    (45, "2.8e-7"),
                ],
            ),
        ];
        // One entry is cut rather than rounded: n = 8, S = 26 is 8/8! = 0.000198, printed
        // 0.00019. Every other entry is the exact value rounded to the digits printed.
        let truncated = [(8, 26)];
        for (n, rows) in table {
            for (s, printed) in *rows {
                let value: f64 = printed.parse().unwrap();
                // P(S >= s) = P(S <= -s) by symmetry.
                let p = exact_at_most(*n, -s).unwrap();
                let half = half_unit(printed);
                let agrees = if truncated.contains(&(*n, *s)) {
                    value <= p && p < value + 2.0 * half
                } else {
                    (p - value).abs() <= half + 1e-12
                };
                assert!(
                    agrees,
                    "n = {n}, S = {s}: {p} against the table's {printed}"
                );
            }
        }
        // The strictest printed: every reply slower than the one before, 1/10! = 2.76e-7.
        assert!(close(exact_at_most(10, -45).unwrap(), 1.0 / 3_628_800.0));
        assert!(close(exact_at_most(10, 45).unwrap(), 1.0));
        // Beyond the range of S: never, and always.
        assert_eq!(exact_at_most(10, -47), Some(0.0));
        assert_eq!(exact_at_most(10, 47), Some(1.0));
    }

    #[test]
    fn mann_kendall_is_exact_for_short_untied_series() {
        // 4 values in order: S = 6, P(S >= 6) = 1/24 = 0.042 (Gilbert Table A18).
        let m = mann_kendall(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!((m.n, m.s, m.method), (4, 6, Method::Exact));
        assert!(close(m.p_increase, 1.0 / 24.0) && close(m.p_decrease, 1.0));
        assert!(close(m.p_two_sided, 2.0 / 24.0));
        assert!(close(m.variance, 4.0 * 3.0 * 13.0 / 18.0));
        // Reversed: the same the other way.
        let m = mann_kendall(&[4.0, 3.0, 2.0, 1.0]).unwrap();
        assert_eq!(m.s, -6);
        assert!(close(m.p_decrease, 1.0 / 24.0) && close(m.p_increase, 1.0));
        // 10 values untied: still exact; 11: normal.
        let ten: Vec<f64> = (0..10).map(|i| ((i * 7) % 10) as f64).collect();
        assert_eq!(mann_kendall(&ten).unwrap().method, Method::Exact);
        let eleven: Vec<f64> = (0..11).map(|i| ((i * 7) % 11) as f64).collect();
        assert_eq!(mann_kendall(&eleven).unwrap().method, Method::Normal);
        // One tie in 8 values: the exact table does not apply.
        let tied = mann_kendall(&[1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
        assert_eq!(tied.method, Method::Normal);
        assert_eq!(tied.s, 27);
    }

    #[test]
    fn the_normal_approximation_with_a_tie_matches_a_worked_example() {
        // J. Little, "A Mann-Kendall Example ('By Hand')", College of the Holy Cross
        // (mathcs.holycross.edu/~little/Montserrat/MannKendallByHand.txt): 14 values with one
        // tied pair, S = 54, V = (14)(13)(33)/18 - (2)(1)(9)/18, Z = (S - 1)/sqrt(V) = 2.9058,
        // p = .0018.
        let x = [
            12.9, 14.8, 13.2, 15.7, 13.8, 15.6, 12.9, 11.0, 17.3, 15.9, 19.0, 18.3, 20.1, 21.7,
        ];
        let m = mann_kendall(&x).unwrap();
        assert_eq!((m.n, m.s, m.method), (14, 54, Method::Normal));
        assert!(close(m.variance, (14.0 * 13.0 * 33.0 - 2.0 * 9.0) / 18.0));
        let z = 53.0 / m.variance.sqrt();
        assert!((z - 2.9058).abs() < 5e-5, "{z}");
        assert!((m.p_increase - 0.0018).abs() < 5e-5, "{}", m.p_increase);
        assert!(close(m.p_two_sided, 2.0 * m.p_increase));
        assert!(m.p_decrease > 0.99);
    }

    #[test]
    fn the_worked_example_reversed_is_the_same_fall() {
        // Little's 14 values in reverse: S = -54, and P(S <= -54) by the approximation is the
        // example's P(S >= 54), Z = (S + 1) / sqrt(V) = -2.9058, p = .0018.
        let mut x = [
            12.9, 14.8, 13.2, 15.7, 13.8, 15.6, 12.9, 11.0, 17.3, 15.9, 19.0, 18.3, 20.1, 21.7,
        ];
        x.reverse();
        let m = mann_kendall(&x).unwrap();
        assert_eq!((m.s, m.method), (-54, Method::Normal));
        assert!((m.p_decrease - 0.0018).abs() < 5e-5, "{}", m.p_decrease);
        assert!(m.p_increase > 0.99, "{}", m.p_increase);
    }

    #[test]
    fn two_values_are_the_shortest_series_and_all_tied_has_no_trend() {
        // n = 2: S is -1 or +1, each with probability 1/2.
        let m = mann_kendall(&[1.0, 2.0]).unwrap();
        assert_eq!((m.n, m.s, m.method), (2, 1, Method::Exact));
        assert!(close(m.p_increase, 0.5) && close(m.p_decrease, 1.0));
        assert_eq!(mann_kendall(&[1.0]), None);
        assert_eq!(mann_kendall(&[]), None);
        assert_eq!(mann_kendall(&[1.0, f64::NAN]), None);
        // Twelve equal values: S = 0, no variance, and no trend either way.
        let flat = mann_kendall(&[3.0; 12]).unwrap();
        assert_eq!((flat.s, flat.variance), (0, 0.0));
        assert_eq!((flat.p_decrease, flat.p_increase), (1.0, 1.0));
    }

    #[test]
    fn the_tie_correction_counts_each_group() {
        // Groups of 3 and 2 among 10: [10*9*25 - 3*2*11 - 2*1*9] / 18.
        let x = [1.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        assert!(close(s_variance(&x), (2250.0 - 66.0 - 18.0) / 18.0));
        // All tied: no variance, no trend either way.
        let m = mann_kendall(&[5.0; 12]).unwrap();
        assert_eq!((m.s, m.variance), (0, 0.0));
        assert_eq!((m.p_decrease, m.p_increase, m.p_two_sided), (1.0, 1.0, 1.0));
        assert!(mann_kendall(&[1.0]).is_none());
        assert!(mann_kendall(&[1.0, f64::NAN, 2.0]).is_none());
        assert!(mann_kendall(&[1.0, f64::INFINITY]).is_none());
    }

    #[test]
    fn sens_slope_of_sens_own_example() {
        // Sen (1968), "Estimates of the regression coefficient based on Kendall's tau", JASA 63,
        // 1379-1389: the example of 7 points at unequal times, whose estimate is 4 (the median
        // of its 21 slopes; Therneau's deming package tests the same, tests/theilsen.R).
        let t = [1.0, 2.0, 3.0, 4.0, 10.0, 12.0, 18.0];
        let y = [9.0, 15.0, 19.0, 20.0, 45.0, 55.0, 78.0];
        assert!(close(sens_slope_at(&t, &y).unwrap(), 4.0));
    }

    #[test]
    fn theils_estimator_of_hollander_wolfe_chicken_example_9_1() {
        // Hollander, Wolfe & Chicken (2014), Nonparametric Statistical Methods, 3rd ed.,
        // Example 9.1, as the book's companion package NSM3 holds it (theil(example = TRUE)):
        // y at x = 1..5. Its ten slopes, sorted: -.15, -.13, -.08, -.07, -.0575, -.055, -.045,
        // -.0333, .01, .04; the estimate is the mean of the middle two, -0.05625. (Computed
        // from the definition here; the book's own printed figure was not at hand.)
        let y = [1.26, 1.27, 1.12, 1.16, 1.03];
        assert!((sens_slope(&y).unwrap() - -0.05625).abs() < 1e-12);
        // Its Kendall statistic: 2 slopes up, 8 down, S = -6; P(S <= -6) for n = 5 is 14/120,
        // Gilbert's 0.117.
        let m = mann_kendall(&y).unwrap();
        assert_eq!((m.s, m.method), (-6, Method::Exact));
        assert!(close(m.p_decrease, 14.0 / 120.0));
        // Tied positions are skipped; without two positions there is no slope.
        assert!(close(
            sens_slope_at(&[0.0, 0.0, 1.0], &[5.0, 1.0, 3.0]).unwrap(),
            0.0
        ));
        assert_eq!(sens_slope_at(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(sens_slope_at(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(sens_slope(&[3.0]), None);
    }

    #[test]
    fn qn_is_the_kth_pairwise_distance() {
        // |1,2,4,7,11| pairwise: 1,2,3,3,4,5,6,7,9,10; h = 3, k = 3: the third is 3.
        assert_eq!(
            kth_pairwise_distance(&[1.0, 2.0, 4.0, 7.0, 11.0], 3),
            Some(3.0)
        );
        assert_eq!(qn_scale(&[11.0, 1.0, 7.0, 2.0, 4.0]), Some(3.0));
        assert_eq!(kth_pairwise_distance(&[1.0, 2.0], 0), None);
        assert_eq!(kth_pairwise_distance(&[1.0, 2.0], 2), None);
        assert_eq!(kth_pairwise_distance(&[1.0, 2.0], 1), Some(1.0));
        assert_eq!(qn_scale(&[1.0]), None);
        assert_eq!(qn_scale(&[1.0, f64::NAN]), None);
        // Against listing every pair, on seeded data with and without ties.
        let mut rng = SplitMix(0x5EED_0020);
        for n in [2usize, 3, 7, 30, 101] {
            for rounded in [false, true] {
                let mut v: Vec<f64> = (0..n)
                    .map(|_| {
                        let x = rng.normal();
                        if rounded {
                            (x * 2.0).round()
                        } else {
                            x
                        }
                    })
                    .collect();
                v.sort_by(f64::total_cmp);
                let mut all: Vec<f64> = Vec::new();
                for i in 0..n {
                    for j in i + 1..n {
                        all.push(v[j] - v[i]);
                    }
                }
                all.sort_by(f64::total_cmp);
                for k in [1, all.len() / 3 + 1, all.len()] {
                    assert_eq!(
                        kth_pairwise_distance(&v, k),
                        Some(all[k - 1]),
                        "n {n}, k {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn block_means_of_ar1_correlate_as_the_formula_says() {
        assert!(close(block_correlation(0.5, 1), 0.5));
        // rho 0.5, blocks of 3: covariance 0.5 (1 - 1/8)^2 / (1/4) = 1.53125, variance 5.5.
        assert!(close(block_correlation(0.5, 3), 1.53125 / 5.5));
        assert_eq!(block_correlation(0.0, 5), 0.0);
        assert_eq!(block_correlation(-0.3, 5), 0.0);
        let first = |rho| (1..).find(|&b| block_correlation(rho, b) <= BLOCK_CORRELATION);
        assert_eq!(first(0.5), Some(15));
        assert_eq!(first(0.2), Some(5));
        // Against a long simulated AR(1): neighbouring blocks of 4 at rho 0.5 correlate 0.213.
        let mut rng = SplitMix(0x5EED_0021);
        let x = rng.ar1(400_000, 0.5, 1.0);
        let means: Vec<f64> = x.chunks(4).map(|c| c.iter().sum::<f64>() / 4.0).collect();
        let r = lag1(&means);
        assert!((r - block_correlation(0.5, 4)).abs() < 0.01, "{r}");
    }

    /// The plain lag-1 autocorrelation about the mean.
    fn lag1(x: &[f64]) -> f64 {
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let d: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
        x.windows(2)
            .map(|w| (w[0] - mean) * (w[1] - mean))
            .sum::<f64>()
            / d
    }

    #[test]
    fn the_lag_correlation_sees_ar1_but_not_a_trend_or_a_step() {
        let mut rng = SplitMix(0x5EED_0022);
        for rho in [0.0, 0.3, 0.5, 0.8] {
            let r = lag_correlation(&rng.ar1(20_000, rho, 0.03)).unwrap();
            assert!((r - rho).abs() < 0.05, "rho {rho}: {r}");
        }
        // A 20% step at the middle of 120 replies with 3% noise, and a 20% ramp: the plain
        // lag-1 autocorrelation reads both as strong correlation; the variogram does not.
        let noise = rng.ar1(120, 0.0, 0.03);
        let step: Vec<f64> = (0..120)
            .map(|i| if i >= 60 { 0.8f64.ln() } else { 0.0 } + noise[i])
            .collect();
        let ramp: Vec<f64> = (0..120)
            .map(|i| 0.8f64.ln() * i as f64 / 119.0 + noise[i])
            .collect();
        for x in [&step, &ramp] {
            assert!(lag1(x) > 0.6, "{}", lag1(x));
            let r = lag_correlation(x).unwrap();
            assert!(r.abs() < 0.3, "{r}");
        }
        assert!(block_length(&step) <= 3, "{}", block_length(&step));
        // No noise: no spread of differences to read a correlation from.
        let line: Vec<f64> = (0..20).map(|i| i as f64).collect();
        assert_eq!(lag_correlation(&line), None);
        assert_eq!(block_length(&line), 1);
        assert_eq!(lag_correlation(&[1.0, 2.0, 3.0]), None);
    }

    #[test]
    fn block_lengths_stay_within_their_bounds() {
        let mut rng = SplitMix(0x5EED_0023);
        // Strongly correlated: as long as 8 blocks allow.
        assert_eq!(block_length(&rng.ar1(30, 0.95, 0.03)), 3);
        assert_eq!(block_length(&rng.ar1(15, 0.95, 0.03)), 1);
        assert_eq!(block_length(&rng.ar1(400, 0.95, 0.03)), 50);
        // Independent and long: never more than 1,000 blocks.
        assert_eq!(block_length(&rng.ar1(8_000, 0.0, 0.03)), 8);
        assert!(block_length(&rng.ar1(999, 0.0, 0.03)) <= 2);
        // The blocks: 10 values in blocks of 3 are 3, 3 and 4 values, every value in one.
        let x: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let b = blocks(&x, 3);
        assert_eq!(b.centers, [1.0, 4.0, 7.5]);
        assert_eq!(b.medians, [1.0, 4.0, 7.5]);
        assert_eq!((b.shortest, b.longest), (3, 4));
        let b = blocks(&x, 1);
        assert_eq!((b.medians.len(), b.shortest, b.longest), (10, 1, 1));
        let b = blocks(&x, 20);
        assert_eq!((b.medians.len(), b.longest), (1, 10));
        // 98 in blocks of 11: 8 blocks, none of them 11.
        let b = blocks(&[0.0; 98], 11);
        assert_eq!((b.medians.len(), b.shortest, b.longest), (8, 12, 13));
        assert_eq!(blocks(&[], 3).medians.len(), 0);
    }

    #[test]
    fn a_trend_needs_eight_finite_values() {
        let seven = [0.0; 7];
        assert_eq!(trend(&seven), None);
        assert!(trend(&[0.0; 8]).is_some());
        let mut bad = [0.0; 9];
        bad[4] = f64::NEG_INFINITY;
        assert_eq!(trend(&bad), None);
        // A clean 20% fall over 30: Sen's slope gives it exactly.
        let logs: Vec<f64> = (0..30).map(|i| 0.8f64.ln() * i as f64 / 29.0).collect();
        let t = trend(&logs).unwrap();
        assert!((t.change - -0.2).abs() < 1e-9, "{}", t.change);
        assert_eq!((t.values, t.block_length, t.blocks), (30, 1, 30));
        assert!(t.test.p_decrease < 1e-6);
    }

    #[test]
    fn judge_drift_at_its_boundaries() {
        // A fall of exactly --max-drift does not fail; just beyond it does.
        assert_eq!(judge_drift(-0.10, 0.001, 0.10), Status::Info);
        assert_eq!(judge_drift(-0.1000001, 0.001, 0.10), Status::Fail);
        // p of exactly the level does not fail; just under it does.
        assert_eq!(judge_drift(-0.2, 0.01, 0.10), Status::Info);
        assert_eq!(judge_drift(-0.2, 0.0099, 0.10), Status::Fail);
        // A rise never fails, nor does NaN.
        assert_eq!(judge_drift(0.5, 0.0, 0.10), Status::Info);
        assert_eq!(judge_drift(f64::NAN, 0.0, 0.10), Status::Info);
        assert_eq!(judge_drift(-0.5, f64::NAN, 0.10), Status::Info);
    }

    /// Whether the rule finds a fall beyond 10% in `logs` at p < 0.01, and whether its test
    /// alone is significant.
    fn fails(logs: &[f64]) -> (bool, bool) {
        let t = trend(logs).unwrap();
        let significant = t.test.p_decrease < LEVEL;
        (
            judge_drift(t.change, t.test.p_decrease, DEFAULT_MAX_DRIFT) == Status::Fail,
            significant,
        )
    }

    #[test]
    fn the_rules_error_rates_on_simulated_runs() {
        // Seeded simulation of the whole rule (blocks, then Mann-Kendall at one-sided p < 0.01,
        // then the 10% --max-drift), 2,000 runs a row (1,000 at 120 replies; the binomial
        // standard error at 1% is 0.22% and 0.31%). "test" is the Mann-Kendall test alone
        // (p < 0.01), "FAIL" the drift line's decision. What this seed gives:
        //
        // steady, AR(1) rho 0.5, 3% log spread, 30 replies:  test 2.50%, FAIL 0.10%
        // steady, AR(1) rho 0.5, 10% spread, 30 replies:     FAIL 2.25%
        // steady, AR(1) rho 0.5, 3% spread, 120 replies:     test 0.60%, FAIL 0
        // steady, independent, 3% spread, 30 replies:        test 0.65%
        // 20% ramp over 30 replies, 3% independent noise:    FAIL 100%
        // 20% step at reply 61 of 120, 3% independent noise: FAIL 94.9%
        //
        // At 30 replies a block may hold at most 3 (8 blocks must remain), and neighbouring
        // blocks of an AR(1) at 0.5 still correlate 0.28, so the test alone is 2.5%, not 1%;
        // the 10% floor keeps false FAILs at 0.1% for a 3%-spread serve. In a prototype of this
        // simulation (other seeds): without blocks the test alone is 6.9% at 30 replies and
        // 8.6% at 120; the brief's rule (the shortest block whose medians' lag-1
        // autocorrelation is not significant at 5%) 4.2% and 3.0%, and it finds a 20% step at
        // mid-run in 44% and 50% of runs; a rule that also corrected the variance of S for the
        // correlation left (Yue & Wang 2004) reaches 1% at 30 replies but finds only 83% of the
        // ramp under correlated noise and 3% of the step, which it reads as correlation.
        let trials = 2_000;
        let mut rng = SplitMix(0x5EED_0024);
        let rate = |hits: usize, of: usize| hits as f64 / of as f64;
        let (mut test, mut fail, mut fail_wide, mut test_iid, mut ramp) = (0, 0, 0, 0, 0);
        for _ in 0..trials {
            let (f, t) = fails(&rng.ar1(30, 0.5, 0.03));
            (fail, test) = (fail + f as usize, test + t as usize);
            fail_wide += fails(&rng.ar1(30, 0.5, 0.10)).0 as usize;
            test_iid += fails(&rng.ar1(30, 0.0, 0.03)).1 as usize;
            let noise = rng.ar1(30, 0.0, 0.03);
            let fall: Vec<f64> = (0..30)
                .map(|i| (1.0 + 0.25 * i as f64 / 29.0).recip().ln() + noise[i])
                .collect();
            ramp += fails(&fall).0 as usize;
        }
        let (mut test_long, mut fail_long, mut step) = (0, 0, 0);
        for _ in 0..trials / 2 {
            let (f, t) = fails(&rng.ar1(120, 0.5, 0.03));
            (fail_long, test_long) = (fail_long + f as usize, test_long + t as usize);
            let noise = rng.ar1(120, 0.0, 0.03);
            let stepped: Vec<f64> = (0..120)
                .map(|i| if i >= 60 { 0.8f64.ln() } else { 0.0 } + noise[i])
                .collect();
            step += fails(&stepped).0 as usize;
        }
        let rates = [
            rate(test, trials),
            rate(fail, trials),
            rate(fail_wide, trials),
            rate(test_long, trials / 2),
            rate(fail_long, trials / 2),
            rate(test_iid, trials),
            rate(ramp, trials),
            rate(step, trials / 2),
        ];
        eprintln!("AR(0.5) 30: test {:.4} FAIL {:.4}, 10% spread FAIL {:.4}; AR(0.5) 120: test {:.4} FAIL {:.4}; iid 30: test {:.4}; ramp FAIL {:.4}; step FAIL {:.4}", rates[0], rates[1], rates[2], rates[3], rates[4], rates[5], rates[6], rates[7]);
        let [test, fail, fail_wide, test_long, fail_long, test_iid, ramp, step] = rates;
        assert!(test < 0.03, "test alone at 30 replies: {test}");
        assert!(fail < 0.005, "false FAILs at 30 replies: {fail}");
        assert!(fail_wide < 0.035, "false FAILs at 10% spread: {fail_wide}");
        assert!(test_long < 0.015, "test alone at 120 replies: {test_long}");
        assert!(fail_long < 0.005, "false FAILs at 120 replies: {fail_long}");
        assert!(test_iid < 0.015, "independent replies: {test_iid}");
        assert!(ramp > 0.98, "a 20% fall over 30 replies found only {ramp}");
        assert!(step > 0.85, "a 20% step found only {step}");
    }
}
