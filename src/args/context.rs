//! Context depth's settings as flags (issue 35; docs/context.md): what the context-rate line
//! holds the depths to, which `run` records and `judge` overrides ([`ContextArgs`]), and what
//! only a live run does: the depths, their replies, the context when the serve does not say
//! it ([`ContextRunArgs`]). Every value is checked by its parser, before anything is held,
//! started or created.

use clap::Args;

use crate::archive::record::ContextFloors;
use crate::depth_prompt::MAX_DEPTH;

/// `--depth-replies`' most.
pub const MAX_DEPTH_REPLIES: u32 = 100;
/// `--depths`' most entries.
pub const MAX_DEPTHS: usize = 32;
/// `--max-context`'s most, tokens: ten times the deepest depth.
pub const MAX_CONTEXT: u64 = 10 * MAX_DEPTH as u64;

/// What the context-rate line holds the depths to; each absent takes the run's recorded value
/// (`judge`), else none.
#[derive(Debug, Clone, Default, Args)]
pub struct ContextArgs {
    /// With --depths: the lowest prefill rate (prompt tokens / first-token time) at any depth,
    /// tok/s
    #[arg(long, value_name = "TOK/S", value_parser = parse_rate, allow_hyphen_values = true)]
    pub prefill_floor: Option<f64>,
    /// With --depths: the lowest decode rate at the deepest depth asked, tok/s
    #[arg(long, value_name = "TOK/S", value_parser = parse_rate, allow_hyphen_values = true)]
    pub depth_floor: Option<f64>,
}

impl ContextArgs {
    /// Lay these settings over `floors` (a run's recorded ones, or none): each given one wins.
    pub fn over(&self, floors: ContextFloors) -> ContextFloors {
        ContextFloors {
            prefill_floor: self.prefill_floor.or(floors.prefill_floor),
            depth_floor: self.depth_floor.or(floors.depth_floor),
        }
    }
}

/// What only a live run does for context depth.
#[derive(Debug, Clone, Default, Args)]
pub struct ContextRunArgs {
    /// After the other replies, ask prompts of about these many tokens each (256,1k,4k; k is
    /// 1,024; 1 to 1,000,000): filler with a fact inside and a question for it at the end. The
    /// context line judges whether each depth finds the fact, and its prefill and decode rates;
    /// a depth past the serve's context probes the limit instead
    #[arg(long, value_name = "LIST", value_parser = parse_depths, allow_hyphen_values = true)]
    pub depths: Option<Depths>,
    /// Replies at each depth, each with a prompt of its own, 1 to 100 [default: 3]
    #[arg(long, value_name = "N", value_parser = parse_depth_replies, allow_hyphen_values = true)]
    pub depth_replies: Option<u32>,
    /// The serve's context in tokens, where the serve does not say it (llama-server's /props
    /// and vLLM's /v1/models do): depths past it probe the limit
    #[arg(long, value_name = "TOKENS", value_parser = parse_max_context, allow_hyphen_values = true)]
    pub max_context: Option<u64>,
}

/// `--depths`, parsed: ascending, each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Depths(pub Vec<u32>);

/// One depth: a whole number of tokens, or with `k` (1,024), from 1 to [`MAX_DEPTH`].
pub fn parse_depth(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (digits, times) = match t.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1024u64),
        None => (t, 1),
    };
    let bad = || {
        format!("{s:?} is not a depth: give a number of tokens from 1 to 1,000,000 (256, 1k, 4k)")
    };
    let n: u64 = digits.trim().parse().map_err(|_| bad())?;
    match n.checked_mul(times) {
        Some(0) => Err(format!(
            "a depth of {s:?} asks no prompt at all: give 1 to 1,000,000 tokens"
        )),
        Some(d) if d <= u64::from(MAX_DEPTH) => Ok(d as u32),
        Some(_) | None => Err(format!(
            "a depth of {s:?} is over the 1,000,000 tokens the gate makes a prompt of"
        )),
    }
}

/// `--depths`: a comma-separated list of depths, at most [`MAX_DEPTHS`]; sorted and each kept
/// once.
pub fn parse_depths(s: &str) -> Result<Depths, String> {
    let mut depths = s
        .split(',')
        .map(parse_depth)
        .collect::<Result<Vec<u32>, String>>()?;
    if depths.len() > MAX_DEPTHS {
        return Err(format!(
            "{} depths: the gate asks at most {MAX_DEPTHS}",
            depths.len()
        ));
    }
    depths.sort_unstable();
    depths.dedup();
    Ok(Depths(depths))
}

/// `--depth-replies`: 1 to [`MAX_DEPTH_REPLIES`].
pub fn parse_depth_replies(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if (1..=i64::from(MAX_DEPTH_REPLIES)).contains(&n) => Ok(n as u32),
        _ => Err(format!(
            "{s:?} is not a count of replies at each depth from 1 to {MAX_DEPTH_REPLIES}"
        )),
    }
}

/// `--max-context`: 1 to [`MAX_CONTEXT`] tokens.
pub fn parse_max_context(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= 1 && n as u64 <= MAX_CONTEXT => Ok(n as u64),
        _ => Err(format!(
            "{s:?} is not a context in tokens from 1 to {MAX_CONTEXT}"
        )),
    }
}

/// A rate floor: above 0, finite.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a rate above 0 in tok/s")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_read_with_k_sorted_and_each_once() {
        assert_eq!(parse_depths("4k,256,1k"), Ok(Depths(vec![256, 1024, 4096])));
        assert_eq!(parse_depths(" 512 , 512,1K"), Ok(Depths(vec![512, 1024])));
        assert_eq!(parse_depth("1000000"), Ok(MAX_DEPTH));
    }

    #[test]
    fn a_bad_depth_is_refused_with_what_it_was() {
        for (bad, says) in [
            ("0", "asks no prompt"),
            ("0k", "asks no prompt"),
            ("1000001", "over the 1,000,000"),
            ("977k", "over the 1,000,000"),
            ("99999999999999999999k", "not a depth"),
            ("lots", "not a depth"),
            ("-5", "not a depth"),
            ("1.5k", "not a depth"),
            ("", "not a depth"),
        ] {
            let e = parse_depths(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let many = vec!["1"; MAX_DEPTHS + 1].join(",");
        assert!(parse_depths(&many).unwrap_err().contains("at most 32"));
    }

    #[test]
    fn counts_and_context_and_rates_are_bounded() {
        assert_eq!(parse_depth_replies("3"), Ok(3));
        for bad in ["0", "101", "-1", "x"] {
            assert!(parse_depth_replies(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_max_context("2048"), Ok(2048));
        for bad in ["0", "-2", "10000001", "2k"] {
            assert!(parse_max_context(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_rate("500"), Ok(500.0));
        for bad in ["0", "-1", "inf", "NaN", "fast"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn given_floors_win_over_the_recorded_ones() {
        let recorded = ContextFloors {
            prefill_floor: Some(100.0),
            depth_floor: Some(10.0),
        };
        let given = ContextArgs {
            prefill_floor: Some(200.0),
            depth_floor: None,
        };
        assert_eq!(
            given.over(recorded),
            ContextFloors {
                prefill_floor: Some(200.0),
                depth_floor: Some(10.0)
            }
        );
    }
}
