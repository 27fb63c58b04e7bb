//! Order statistics of the pairwise differences c_i - b_j of two samples, found without making
//! the m*n differences: the Hodges-Lehmann shift and its interval ends ([`super::baseline`]) for
//! a soak of 20,000 replies against another, 400 million differences, in O(m + n) memory.
//!
//! Selection in X + Y (Johnson & Mizoguchi, "Selecting the Kth element in X + Y and X1 + X2 +
//! ... + Xm", SIAM J. Comput. 7 (1978) 147-153), with the randomised pivot of Monahan's
//! Algorithm 616 ("Fast computation of the Hodges-Lehmann location estimator", ACM TOMS 10
//! (1984) 265-270). With c sorted ascending and b sorted descending, d_ij = c_i - b_j is
//! ascending along each row and each column. Each row keeps an active column range [L_i, R_i)
//! known to hold the wanted order statistic if any of its cells does. A pivot is drawn among the
//! active cells; the cells below it and at or below it are counted row by row with one pointer
//! that only moves one way (the count in a row can only fall as c_i grows), O(m + n); the
//! ranges close on the side that cannot hold the answer. Once no more than m + n cells stay
//! active they are gathered and the answer selected among them directly.
//!
//! Each step removes at least the pivot's own cell, and a uniformly drawn pivot removes a
//! constant share of the active cells on average, so about log(mn) steps: some 30 passes of
//! 40,000 values at 20,000 a side. The pivots come from a fixed seed, so the same samples
//! always take the same steps: judging stays pure and repeatable.
//!
//! Every difference is the same f64 subtraction a sort of all of them would make, and IEEE
//! subtraction rounds monotonically (a <= a' implies a - b <= a' - b), so the rows and columns
//! are truly sorted and the counts agree with any sort: the answer is exactly the order
//! statistic a full sort gives, ties included (checked against one in the tests).

/// The `k`-th smallest (0-based) of the differences `c[i] - b[j]` over all i, j, where `c` is
/// sorted ascending and `b` is sorted descending (both by [`f64::total_cmp`], no NaN).
///
/// # Panics
///
/// When a side is empty or `k` is not below `c.len() * b.len()`: callers check both.
pub(crate) fn kth_difference(c: &[f64], b_desc: &[f64], k: u64) -> f64 {
    let (m, n) = (c.len(), b_desc.len());
    let total = m as u64 * n as u64;
    assert!(m > 0 && n > 0 && k < total, "{k} of {m} x {n}");
    let d = |i: usize, j: usize| c[i] - b_desc[j];
    let mut low = vec![0usize; m];
    let mut high = vec![n; m];
    // Cells left of the active ranges: all known to be below the answer.
    let mut below = 0u64;
    // cargo mutants: `^ k` turned `| k` or `& k` only changes the seed, so which pivots are
    // drawn and how many steps it takes, never the answer (any pivot sequence ends at the same
    // order statistic, as the tests against a full sort check): equivalent mutants.
    let mut rng = Pivots(0x4D6F_6E61_6861_6E21 ^ k);
    let mut lt = vec![0usize; m];
    let mut le = vec![0usize; m];
    loop {
        let active: u64 = low.iter().zip(&high).map(|(l, h)| (h - l) as u64).sum();
        if active <= (m + n) as u64 {
            let mut cells: Vec<f64> = (0..m)
                .flat_map(|i| (low[i]..high[i]).map(move |j| (i, j)))
                .map(|(i, j)| d(i, j))
                .collect();
            let rank = (k - below) as usize;
            return *cells.select_nth_unstable_by(rank, f64::total_cmp).1;
        }
        let pivot = {
            let mut r = rng.below(active);
            let mut cell = None;
            for i in 0..m {
                let width = (high[i] - low[i]) as u64;
                if r < width {
                    cell = Some(d(i, low[i] + r as usize));
                    break;
                }
                r -= width;
            }
            cell.expect("the draw is below the active count")
        };
        count_row_prefixes(c, b_desc, |x| x.total_cmp(&pivot).is_lt(), &mut lt);
        count_row_prefixes(c, b_desc, |x| x.total_cmp(&pivot).is_le(), &mut le);
        let (under, at_most): (u64, u64) = (
            lt.iter().map(|&x| x as u64).sum(),
            le.iter().map(|&x| x as u64).sum(),
        );
        if k < under {
            // The answer is below the pivot: only cells below it stay.
            for i in 0..m {
                high[i] = high[i].min(lt[i]);
                low[i] = low[i].min(high[i]);
            }
        } else if k >= at_most {
            // Above it: the cells at or below it leave, counted as below the answer.
            for i in 0..m {
                let l = low[i].max(le[i]).min(high[i]);
                below += (l - low[i]) as u64;
                low[i] = l;
            }
        } else {
            return pivot;
        }
    }
}

/// For each row i, how many j have `keep(c[i] - b_desc[j])`, for a `keep` that holds on a
/// prefix of every row (below a value, or at most it). Rows go up as i grows, so the prefix can
/// only shorten: one pointer walks down from n over all rows, O(m + n).
fn count_row_prefixes(c: &[f64], b_desc: &[f64], keep: impl Fn(f64) -> bool, out: &mut [usize]) {
    let mut j = b_desc.len();
    for (i, &ci) in c.iter().enumerate() {
        while j > 0 && !keep(ci - b_desc[j - 1]) {
            j -= 1;
        }
        out[i] = j;
    }
}

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014) for the pivots: seeded, so repeatable.
struct Pivots(u64);

impl Pivots {
    /// Uniform on 0..bound (bound > 0), by Lemire's multiply-shift (bias under 2^-32 here).
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z as u128 * bound as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::test_rng::SplitMix;

    fn sorted(mut v: Vec<f64>, descending: bool) -> Vec<f64> {
        v.sort_by(f64::total_cmp);
        if descending {
            v.reverse();
        }
        v
    }

    /// Every order statistic against the brute-force sort.
    fn check_all(c: &[f64], b: &[f64]) {
        let mut all: Vec<f64> = c
            .iter()
            .flat_map(|x| b.iter().map(move |y| x - y))
            .collect();
        all.sort_by(f64::total_cmp);
        let cs = sorted(c.to_vec(), false);
        let bs = sorted(b.to_vec(), true);
        for (k, want) in all.iter().enumerate() {
            let got = kth_difference(&cs, &bs, k as u64);
            assert_eq!(got.to_bits(), want.to_bits(), "k {k} of {c:?} - {b:?}");
        }
    }

    #[test]
    fn pivots_are_splitmix64_scaled_by_multiply_shift() {
        // splitmix64 seeded with 0 gives 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
        // 0x06C45D188009454F (Vigna's reference splitmix64.c, prng.di.unimi.it, the values
        // xoshiro's seeding publishes). Multiply-shift by 2^64 - 1 is floor(z - z / 2^64) =
        // z - 1, every bit of the draw; by 10 it is floor(10 z / 2^64): 0.8833, 0.4315 and
        // 0.0264 of the way, so 8, 4, 0.
        let mut p = Pivots(0);
        let all: Vec<u64> = (0..3).map(|_| p.below(u64::MAX)).collect();
        assert_eq!(
            all,
            [
                0xE220_A839_7B1D_CDAF - 1,
                0x6E78_9E6A_A1B9_65F4 - 1,
                0x06C4_5D18_8009_454F - 1
            ]
        );
        let mut p = Pivots(0);
        let tenths: Vec<u64> = (0..3).map(|_| p.below(10)).collect();
        assert_eq!(tenths, [8, 4, 0]);
    }

    #[test]
    fn small_shapes_match_a_full_sort() {
        check_all(&[1.0], &[2.0]);
        check_all(&[1.0], &[3.0, 1.0, 2.0, 2.0]);
        check_all(&[3.0, 1.0, 2.0, 2.0, -5.0], &[0.5]);
        check_all(&[1.0, 1.0, 1.0], &[1.0, 1.0]);
        check_all(&[0.1, 0.2, 0.3], &[0.3, 0.2, 0.1]);
    }

    #[test]
    fn random_samples_with_ties_match_a_full_sort() {
        // Sizes 1 to 40 each way, some drawn from a few values only (heavy ties), some
        // continuous, some with magnitudes that make the subtraction round.
        let mut rng = SplitMix(0x5EED_0037);
        for trial in 0..300 {
            let m = 1 + (rng.next() % 40) as usize;
            let n = 1 + (rng.next() % 40) as usize;
            let mut draw = |len: usize| -> Vec<f64> {
                (0..len)
                    .map(|_| match trial % 3 {
                        0 => (rng.next() % 4) as f64 * 0.5,
                        1 => rng.normal(),
                        _ => 1e16 + (rng.next() % 7) as f64 + rng.uniform(),
                    })
                    .collect()
            };
            let (c, b) = (draw(m), draw(n));
            check_all(&c, &b);
        }
    }

    #[test]
    fn large_sides_select_the_right_cells() {
        // 1,500 x 1,000 (1.5 million differences, still sortable here): a few ranks against
        // the sort.
        let mut rng = SplitMix(0x5EED_0038);
        let c: Vec<f64> = (0..1_500).map(|_| rng.normal()).collect();
        let b: Vec<f64> = (0..1_000)
            .map(|_| (rng.next() % 50) as f64 / 25.0)
            .collect();
        let mut all: Vec<f64> = c
            .iter()
            .flat_map(|x| b.iter().map(move |y| x - y))
            .collect();
        all.sort_by(f64::total_cmp);
        let (cs, bs) = (sorted(c, false), sorted(b, true));
        for k in [0, 1, 1_000, 749_999, 750_000, 1_499_998, 1_499_999] {
            assert_eq!(kth_difference(&cs, &bs, k), all[k as usize], "{k}");
        }
    }
}
