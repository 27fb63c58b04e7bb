//! SplitMix64: the one mixing function behind the stand-in's seeded draws (--jitter's factors,
//! --change-word's requests and words) and its filler's words, kept apart from both so the
//! script (`args.rs`) and the words (`words.rs`) share it without reaching into each other.

/// SplitMix64's output function (Steele, Lea & Flood 2014, "Fast splittable pseudorandom
/// number generators", OOPSLA): a well-mixed 64-bit value of `x`, for --jitter's factors,
/// --change-word's draws and the filler's words.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
