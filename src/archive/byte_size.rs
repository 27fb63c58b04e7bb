//! Sizes in bytes as flags give them: a number and its unit (`1MiB`, `512 KiB`, `0.5GiB`,
//! `300MB`, `4096B`). A bare number is refused, because `--max-memory-growth 1` could mean a
//! byte or a mebibyte and the two differ by a million; only 0 needs no unit.
//!
//! Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (kB, MB, GB, TB) of 1000,
//! as IEC 80000-13 names them; `K`, `M`, `G` alone are refused as ambiguous.

/// The units a size may be given in, and their bytes.
const UNITS: [(&str, f64); 10] = [
    ("B", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1024.0 * 1024.0),
    ("GiB", 1024.0 * 1024.0 * 1024.0),
    ("TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("kB", 1e3),
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
];

/// Bytes in a mebibyte, for the lines that speak in MiB.
pub const MIB: f64 = 1024.0 * 1024.0;

/// A size in bytes: a finite number, 0 or more, and a unit: B, KiB, MiB, GiB, TiB, kB (or KB),
/// MB, GB, TB (0 alone needs none).
pub fn parse_bytes(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let wrong =
        |why: &str| format!("{s:?} is not a size: {why} (e.g. 1MiB, 512KiB, 2GiB, 300MB, 4096B)");
    if t.parse::<f64>() == Ok(0.0) {
        return Ok(0.0);
    }
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .or_else(|| t.find(|c: char| c.is_ascii_alphabetic()))
        .ok_or_else(|| wrong("give its unit"))?;
    let (number, unit) = t.split_at(split);
    let number: f64 = number
        .trim()
        .parse()
        .map_err(|_| wrong("it does not start with a number"))?;
    let unit = unit.trim();
    let &(_, per) = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .ok_or_else(|| wrong(&format!("`{unit}` is not a unit")))?;
    let bytes = number * per;
    if !bytes.is_finite() || bytes < 0.0 || number.is_sign_negative() {
        return Err(wrong("it must be a finite size, 0 or more"));
    }
    Ok(bytes)
}

/// A size in bytes said in the unit that reads best: `412 MiB`, `1.5 GiB`, `800 KiB`, `12 B`.
pub fn said(bytes: f64) -> String {
    let a = bytes.abs();
    let (per, unit) = if a >= 1024.0 * MIB {
        (1024.0 * MIB, "GiB")
    } else if a >= MIB {
        (MIB, "MiB")
    } else if a >= 1024.0 {
        (1024.0, "KiB")
    } else {
        return format!("{bytes:.0} B");
    };
    let v = bytes / per;
    if v.abs() >= 100.0 {
        format!("{v:.0} {unit}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_their_unit() {
        assert_eq!(parse_bytes("1MiB"), Ok(1048576.0));
        assert_eq!(parse_bytes("512 KiB"), Ok(524288.0));
        assert_eq!(parse_bytes("0.5GiB"), Ok(536870912.0));
        assert_eq!(parse_bytes("300MB"), Ok(300e6));
        assert_eq!(parse_bytes("2kB"), Ok(2000.0));
        assert_eq!(parse_bytes("4096B"), Ok(4096.0));
        assert_eq!(parse_bytes("1e3B"), Ok(1000.0));
        assert_eq!(
            parse_bytes("2TiB"),
            Ok(2.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0)
        );
        assert_eq!(parse_bytes("0"), Ok(0.0));
        assert_eq!(parse_bytes(" 0 "), Ok(0.0));
    }

    #[test]
    fn a_size_without_a_unit_negative_or_not_a_number_is_refused() {
        for bad in [
            "1", "1.5", "-1MiB", "-0MiB", "NaNMiB", "nan", "infMiB", "1e400MiB", "1M", "1K", "MiB",
            "", "1 mib", "1MiB2", "one MiB",
        ] {
            let e = parse_bytes(bad).unwrap_err();
            assert!(
                e.starts_with(&format!("{bad:?} is not a size")),
                "{bad}: {e}"
            );
        }
        assert!(parse_bytes("1").unwrap_err().contains("give its unit"));
    }

    #[test]
    fn sizes_are_said_in_the_unit_that_reads_best() {
        assert_eq!(said(412.0 * MIB), "412 MiB");
        assert_eq!(said(1.5 * 1024.0 * MIB), "1.50 GiB");
        assert_eq!(said(20.0 * 1024.0), "20.0 KiB");
        assert_eq!(said(12.0), "12 B");
        assert_eq!(said(-3.0 * MIB), "-3.00 MiB");
    }
}
