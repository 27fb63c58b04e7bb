//! The small closed sets a run directory names by a word: a figure's unit, a metrics scrape's
//! phase, where serve.log came from, the signal that interrupted a run.
//!
//! Each is written as the same string it always was (an old archive reads the same); a word the
//! gate does not know is an error that names it, never a default taken in silence.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Serde through a type's `Display` and `FromStr`: the archive's word for it.
macro_rules! serde_as_word {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = String::deserialize(d)?;
                word.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// The unit of a line's median, interval, floor and limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Decoded tokens a second (`tok/s`).
    TokensPerSecond,
    /// Milliseconds (`ms`).
    Milliseconds,
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Unit::TokensPerSecond => "tok/s",
            Unit::Milliseconds => "ms",
        })
    }
}

impl FromStr for Unit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tok/s" => Ok(Unit::TokensPerSecond),
            "ms" => Ok(Unit::Milliseconds),
            _ => Err(format!("unknown unit `{}` (tok/s or ms)", s.escape_debug())),
        }
    }
}
serde_as_word!(Unit);

/// When the serve's metrics were scraped, against the bursts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the first burst.
    Before,
    /// While the bursts ran.
    During,
    /// After the last burst.
    After,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Phase::Before => "before",
            Phase::During => "during",
            Phase::After => "after",
        })
    }
}

impl FromStr for Phase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "before" => Ok(Phase::Before),
            "during" => Ok(Phase::During),
            "after" => Ok(Phase::After),
            _ => Err(format!(
                "unknown scrape phase `{}` (before, during or after)",
                s.escape_debug()
            )),
        }
    }
}
serde_as_word!(Phase);

/// Where serve.log came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogSource {
    /// The gate started the serve and captured its output (`captured`).
    Captured,
    /// The gate attached to a running serve and copied its log (`copied from PATH`).
    CopiedFrom(String),
    /// The gate attached to a running serve and was given no log (`none`).
    None,
}

impl LogSource {
    /// Whether there is a serve.log to read.
    pub fn has_log(&self) -> bool {
        !matches!(self, LogSource::None)
    }
}

impl fmt::Display for LogSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogSource::Captured => f.write_str("captured"),
            LogSource::CopiedFrom(path) => write!(f, "copied from {path}"),
            LogSource::None => f.write_str("none"),
        }
    }
}

impl FromStr for LogSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "captured" => Ok(LogSource::Captured),
            "none" => Ok(LogSource::None),
            _ => match s.strip_prefix("copied from ") {
                Some(path) => Ok(LogSource::CopiedFrom(path.to_string())),
                None => Err(format!(
                    "unknown serve log source `{}` (captured, copied from PATH, or none)",
                    s.escape_debug()
                )),
            },
        }
    }
}
serde_as_word!(LogSource);

/// The signal that interrupted a run, by its name (`SIGTERM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterruptSignal(pub nix::sys::signal::Signal);

impl InterruptSignal {
    /// SIGTERM: what a CI runner sends to cancel a job.
    pub const TERM: InterruptSignal = InterruptSignal(nix::sys::signal::Signal::SIGTERM);

    /// The signal's number: the exit code is 128 plus it.
    pub fn number(self) -> i32 {
        self.0 as i32
    }
}

impl fmt::Display for InterruptSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.0.as_str())
    }
}

impl FromStr for InterruptSignal {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse::<nix::sys::signal::Signal>()
            .map(InterruptSignal)
            .map_err(|_| {
                format!(
                    "unknown signal `{}` (a name such as SIGTERM)",
                    s.escape_debug()
                )
            })
    }
}
serde_as_word!(InterruptSignal);

/// Tests write an archive's words as the archive does.
#[cfg(test)]
macro_rules! from_word_in_tests {
    ($($t:ty),*) => {$(
        impl From<&str> for $t {
            fn from(word: &str) -> Self {
                word.parse().unwrap()
            }
        }
    )*};
}
#[cfg(test)]
from_word_in_tests!(Unit, Phase, LogSource, InterruptSignal);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T>(value: T, word: &str)
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug,
    {
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, serde_json::to_string(word).unwrap());
        assert_eq!(serde_json::from_str::<T>(&json).unwrap(), value);
    }

    #[test]
    fn each_is_written_as_its_word_and_read_back() {
        round_trip(Unit::TokensPerSecond, "tok/s");
        round_trip(Unit::Milliseconds, "ms");
        round_trip(Phase::Before, "before");
        round_trip(Phase::During, "during");
        round_trip(Phase::After, "after");
        round_trip(LogSource::Captured, "captured");
        round_trip(LogSource::None, "none");
        round_trip(
            LogSource::CopiedFrom("/var/log/serve.log".into()),
            "copied from /var/log/serve.log",
        );
        round_trip(
            InterruptSignal(nix::sys::signal::Signal::SIGTERM),
            "SIGTERM",
        );
        assert_eq!(
            InterruptSignal(nix::sys::signal::Signal::SIGHUP).number(),
            1
        );
    }

    #[test]
    fn an_unknown_word_is_an_error_that_names_it() {
        let err = |json: &str, e: String| assert!(e.contains(json), "{e}");
        err(
            "mph",
            serde_json::from_str::<Unit>("\"mph\"")
                .unwrap_err()
                .to_string(),
        );
        err(
            "later",
            serde_json::from_str::<Phase>("\"later\"")
                .unwrap_err()
                .to_string(),
        );
        err(
            "piped",
            serde_json::from_str::<LogSource>("\"piped\"")
                .unwrap_err()
                .to_string(),
        );
        err(
            "SIGNOPE",
            serde_json::from_str::<InterruptSignal>("\"SIGNOPE\"")
                .unwrap_err()
                .to_string(),
        );
    }
}
