//! A rate of trials that showed something, with what it rests on: the exact two-sided interval
//! of a binomial proportion (Clopper & Pearson 1934), and the smallest per-trial rate a number
//! of trials would have seen at least once with a given probability (issue 22: "3 of 60 trials
//! differed: q = 0.05, 95% interval 0.010 to 0.139").
//!
//! Pure: no I/O; `statrs` gives the inverse of the regularised incomplete beta function, the
//! rest is the definition.

use statrs::distribution::{Beta, ContinuousCDF};

/// The exact (Clopper-Pearson) two-sided interval of the proportion of `k` in `n` trials, at
/// `confidence` (0.95 for 95%): the `p` below which seeing `k` or more has probability
/// `(1 - confidence) / 2`, and the `p` above which seeing `k` or fewer has. By the identity of
/// the binomial tail with the beta distribution, these are the `α/2` quantile of Beta(k,
/// n - k + 1) and the `1 - α/2` quantile of Beta(k + 1, n - k), with 0 for k = 0 and 1 for
/// k = n. `None` for no trials, `k` above `n`, or a confidence not strictly between 0 and 1.
pub fn clopper_pearson(k: usize, n: usize, confidence: f64) -> Option<(f64, f64)> {
    if n == 0 || k > n || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let tail = (1.0 - confidence) / 2.0;
    let quantile = |a: usize, b: usize, p: f64| {
        Beta::new(a as f64, b as f64)
            .ok()
            .map(|beta| beta.inverse_cdf(p))
    };
    let low = if k == 0 {
        0.0
    } else {
        quantile(k, n - k + 1, tail)?
    };
    let high = if k == n {
        1.0
    } else {
        quantile(k + 1, n - k, 1.0 - tail)?
    };
    Some((low, high))
}

/// The smallest per-trial rate `q` that `n` independent trials would have shown at least once
/// with probability `power`: `1 - (1 - q)^n = power`, so `q = 1 - (1 - power)^(1/n)`. At 0.95:
/// 26% for 10 trials, 9.5% for 30, 3.0% for 100. `None` for no trials or a power not strictly
/// between 0 and 1.
pub fn detectable_rate(n: usize, power: f64) -> Option<f64> {
    if n == 0 || !(power > 0.0 && power < 1.0) {
        return None;
    }
    Some(1.0 - (1.0 - power).powf(1.0 / n as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// P(X <= k) for X ~ Binomial(n, p), summed from the definition: each term
    /// C(n, i) p^i (1 - p)^(n - i) in logarithms (near p = 1, (1 - p)^n alone is subnormal).
    fn binomial_at_most(k: usize, n: usize, p: f64) -> f64 {
        let ln_choose = |i: usize| -> f64 {
            (1..=i)
                .map(|j| ((n - i + j) as f64).ln() - (j as f64).ln())
                .sum()
        };
        (0..=k)
            .map(|i| (ln_choose(i) + i as f64 * p.ln() + (n - i) as f64 * (1.0 - p).ln()).exp())
            .sum()
    }

    #[test]
    fn the_intervals_the_issue_asks_for_match_their_published_values() {
        // Clopper & Pearson (1934), as R's binom.test and scipy.stats.binomtest(k,
        // n).proportion_ci(method="exact") (scipy 1.17.1) print them: 0 of 10, 0 to 0.308497;
        // 1 of 20, 0.001265 to 0.248733; 3 of 60, 0.010432 to 0.139243 (the issue's "3 of 60
        // trials differed: 95% interval 0.010 to 0.139").
        for (k, n, low, high) in [
            (0, 10, 0.0, 0.308497),
            (1, 20, 0.001265, 0.248733),
            (3, 60, 0.010432, 0.139243),
        ] {
            let (l, h) = clopper_pearson(k, n, 0.95).unwrap();
            assert!(close(l, low, 1e-6), "{k}/{n}: low {l} against {low}");
            assert!(close(h, high, 1e-6), "{k}/{n}: high {h} against {high}");
        }
    }

    #[test]
    fn newcombes_exact_intervals_are_reproduced() {
        // Newcombe, R. G. (1998), "Two-sided confidence intervals for the single proportion:
        // comparison of seven methods", Statistics in Medicine 17: 857-872, Table I, method 5
        // (exact, Clopper-Pearson), to the 4 decimals printed.
        for (k, n, low, high) in [
            (15, 148, 0.0578, 0.1617),
            (0, 20, 0.0, 0.1684),
            (1, 29, 0.0009, 0.1776),
        ] {
            let (l, h) = clopper_pearson(k, n, 0.95).unwrap();
            assert!(close(l, low, 5e-5), "{k}/{n}: low {l} against {low}");
            assert!(close(h, high, 5e-5), "{k}/{n}: high {h} against {high}");
        }
    }

    #[test]
    fn the_limits_solve_the_binomial_tail_equations_that_define_them() {
        // The definition, summed directly (no beta function): at the low limit, k or more
        // has probability 2.5%; at the high limit, k or fewer has.
        for n in [1, 2, 5, 20, 60, 137] {
            for k in 0..=n {
                let (l, h) = clopper_pearson(k, n, 0.95).unwrap();
                assert!(l <= k as f64 / n as f64 && k as f64 / n as f64 <= h);
                if k > 0 {
                    let at_least = 1.0 - binomial_at_most(k - 1, n, l);
                    assert!(close(at_least, 0.025, 1e-9), "{k}/{n}: {at_least}");
                } else {
                    assert_eq!(l, 0.0);
                }
                if k < n {
                    let at_most = binomial_at_most(k, n, h);
                    assert!(close(at_most, 0.025, 1e-9), "{k}/{n}: {at_most}");
                } else {
                    assert_eq!(h, 1.0);
                }
            }
        }
    }

    #[test]
    fn the_closed_forms_at_the_edges_hold() {
        // None seen: the high limit solves (1 - p)^n = α/2; all seen: the low limit p^n = α/2.
        for n in [1, 7, 30, 500] {
            let (_, h) = clopper_pearson(0, n, 0.95).unwrap();
            assert!(close(h, 1.0 - 0.025f64.powf(1.0 / n as f64), 1e-12), "{n}");
            let (l, _) = clopper_pearson(n, n, 0.95).unwrap();
            assert!(close(l, 0.025f64.powf(1.0 / n as f64), 1e-12), "{n}");
        }
        // A wider confidence, a wider interval.
        let (l95, h95) = clopper_pearson(3, 60, 0.95).unwrap();
        let (l99, h99) = clopper_pearson(3, 60, 0.99).unwrap();
        assert!(l99 < l95 && h95 < h99);
    }

    #[test]
    fn nothing_to_rest_on_has_no_interval() {
        assert_eq!(clopper_pearson(0, 0, 0.95), None);
        assert_eq!(clopper_pearson(3, 2, 0.95), None);
        for c in [0.0, 1.0, f64::NAN, -0.5] {
            assert_eq!(clopper_pearson(1, 10, c), None, "{c}");
        }
    }

    #[test]
    fn the_detectable_rate_is_the_issues_figures() {
        // 1 - 0.05^(1/n): 26% at 10 trials, 9.5% at 30, 3% at 100 (issue 22).
        let at = |n| detectable_rate(n, 0.95).unwrap();
        assert!(close(at(10), 0.2589, 1e-4), "{}", at(10));
        assert!(close(at(30), 0.0950, 1e-4), "{}", at(30));
        assert!(close(at(100), 0.0295, 1e-4), "{}", at(100));
        assert!(close(at(1), 0.95, 1e-12));
        // At that rate, n trials see it at least once with probability 0.95 exactly.
        for n in [3, 20, 60] {
            let q = at(n);
            assert!(close(1.0 - (1.0 - q).powi(n as i32), 0.95, 1e-12), "{n}");
        }
        assert_eq!(detectable_rate(0, 0.95), None);
        assert_eq!(detectable_rate(10, 1.0), None);
        assert_eq!(detectable_rate(10, 0.0), None);
        assert_eq!(detectable_rate(10, f64::NAN), None);
    }
}
