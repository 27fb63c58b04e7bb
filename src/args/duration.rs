//! A duration flag's value: a number with its unit (`600ms`, `0.6s`, `2m`, humantime's
//! `1h30m`), or a bare number in the unit the flag always took (issue 33, item 4). The flags'
//! bounds are their own; this only reads the value. A leaf, so every flag module can use it.

/// The unit a duration flag reads a bare number in: the unit it always took, before it
/// took units (issue 33, item 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BareUnit {
    /// A bare number is seconds (`--grace 2.5`).
    Seconds,
    /// A bare number is milliseconds (`--first-token-ms 600`).
    Millis,
}

impl BareUnit {
    fn nanos(self) -> f64 {
        match self {
            BareUnit::Seconds => 1e9,
            BareUnit::Millis => 1e6,
        }
    }

    fn name(self) -> &'static str {
        match self {
            BareUnit::Seconds => "seconds",
            BareUnit::Millis => "milliseconds",
        }
    }
}

/// Nanoseconds in one of a duration's units, as humantime spells them (`ms`, `s`, `m`, ...):
/// whole numbers, so `0.6s` is 600 ms exactly.
fn unit_nanos(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" | "nsec" => 1.0,
        "us" | "µs" | "usec" => 1e3,
        "ms" | "msec" | "millis" => 1e6,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e9,
        "m" | "min" | "mins" | "minute" | "minutes" => 60e9,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600e9,
        _ => return None,
    })
}

/// A duration flag's value in its bare unit: a bare number is that unit, as the flag always
/// read it (`--first-token-ms 600` is 600 ms, `--grace 2.5` is 2.5 s); a number with a unit
/// (`600ms`, `0.6s`, `2m`) or humantime's compound form (`1h30m`, `1m 30s`) is converted.
/// The bounds are each flag's own; this only reads the value.
pub fn duration_in(s: &str, bare: BareUnit) -> Result<f64, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<f64>() {
        return Ok(n);
    }
    let wrong = || {
        format!(
            "{s:?} is not a duration: give a unit (500ms, 0.6s, 30s, 2m) or a bare number of {}",
            bare.name()
        )
    };
    // A decimal number and one unit (`0.6s`, `1.5m`), which humantime does not read.
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let nanos = match (number.parse::<f64>(), unit_nanos(unit.trim())) {
        (Ok(n), Some(per)) => n * per,
        _ => humantime::parse_duration(t)
            .map_err(|_| wrong())?
            .as_nanos() as f64,
    };
    if !nanos.is_finite() {
        return Err(wrong());
    }
    Ok(nanos / bare.nanos())
}

/// `--first-token-ms 600`: milliseconds, as a bare number always was, or a duration with its
/// unit (`600ms`, `0.6s`). Its bounds (above 0) are the verdict's, as for a profile's value.
pub fn parse_millis(s: &str) -> Result<f64, String> {
    duration_in(s, BareUnit::Millis)
}
