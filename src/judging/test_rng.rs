//! The tests' seeded random numbers: one splitmix64 stream with its uniform, normal and AR(1)
//! draws, for the statistics' simulations (drift, the baseline's error rates). Test-only.

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): a seeded, deterministic stream.
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform on (0, 1]: never 0, so its log is finite.
    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// A standard normal draw by Box-Muller (one of the pair).
    pub(crate) fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// n values of a stationary AR(1) series with lag-1 correlation `rho` and marginal
    /// standard deviation `sd`.
    pub(crate) fn ar1(&mut self, n: usize, rho: f64, sd: f64) -> Vec<f64> {
        let innovation = (1.0 - rho * rho).sqrt() * sd;
        let mut e = sd * self.normal();
        (0..n)
            .map(|_| {
                let v = e;
                e = rho * e + innovation * self.normal();
                v
            })
            .collect()
    }
}
