//! The words and numbers the lines share: a count with its noun, a number without needless
//! zeros. One piece each, so two lines never say the same thing two ways.

/// The noun for `n` things: `one` for exactly 1, `many` otherwise (0 included).
pub(crate) fn noun<'a, N: PartialEq + From<u8>>(n: N, one: &'a str, many: &'a str) -> &'a str {
    if n == N::from(1) {
        one
    } else {
        many
    }
}

/// `n` and the word for it: "1 prompt", "3 prompts".
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", noun(n, one, many))
}

/// `x` to `decimals` places, its trailing zeros and a bare point dropped: 10, 2, 2.5 (at 2
/// places).
pub(crate) fn trimmed(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if decimals == 0 {
        // No point to trim back to: "100" is not "1".
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `n` with its thousands grouped by commas: 1,024; 1,000,000.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1024), "1,024");
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(grouped(12_345_678), "12,345,678");
    }

    #[test]
    fn a_noun_is_singular_for_one_alone() {
        assert_eq!(noun(1usize, "prompt", "prompts"), "prompt");
        assert_eq!(noun(0usize, "prompt", "prompts"), "prompts");
        assert_eq!(noun(1.0f64, "request", "requests"), "request");
        assert_eq!(noun(1.5f64, "request", "requests"), "requests");
        assert_eq!(plural(3, "prompt", "prompts"), "3 prompts");
    }

    #[test]
    fn trimmed_drops_zeros_after_the_point_only() {
        assert_eq!(trimmed(10.0, 2), "10");
        assert_eq!(trimmed(2.5, 2), "2.5");
        assert_eq!(trimmed(100.0, 2), "100");
        assert_eq!(trimmed(100.0, 0), "100");
        assert_eq!(trimmed(0.0004, 4), "0.0004");
    }
}
