//! Context depth (issue 35), as a run records it: the depths planned and the serve's context
//! (run.json `context`), each depth reply's place (replies.jsonl `depth`), the context lines'
//! floors (run.json `floors.context`), and the figures a depth row carries (result.json
//! `figures.context`).

use serde::{Deserialize, Serialize};

/// `--depth-replies`' default: replies at each depth.
pub const DEFAULT_DEPTH_REPLIES: u32 = 3;
/// The limit probe's prompt, as a share of the context: well past it, whatever the gap
/// between the gate's estimate and the serve's tokenizer.
pub const PROBE_SHARE: f64 = 1.5;

/// What run.json says of the depths a run asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextPlan {
    /// `--depths`, in approximate prompt tokens, ascending.
    pub depths: Vec<u32>,
    /// `--depth-replies`: replies at each depth.
    pub replies_each: u32,
    /// The serve's context as the serve said it, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_says: Option<ContextSaid>,
    /// `--max-context`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<u64>,
    /// The answer tokens a depth reply may take (`--max-tokens`): a depth fits when it and
    /// these do.
    pub max_tokens: u32,
}

/// The serve's own word on its context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSaid {
    /// Tokens.
    pub tokens: u64,
    /// Where it said it: `GET /props default_generation_settings.n_ctx` and the like.
    pub by: String,
}

impl ContextPlan {
    /// The context the depths are held to, and where it comes from: the serve's word first
    /// (it is what the serve holds), else `--max-context`.
    pub fn context(&self) -> Option<(u64, String)> {
        match (&self.serve_says, self.given) {
            (Some(s), _) => Some((s.tokens, s.by.clone())),
            (None, Some(g)) => Some((g, "--max-context".to_string())),
            (None, None) => None,
        }
    }

    /// Whether a prompt of `depth` tokens and its answer fit in the context (every depth fits
    /// where the context is not known).
    pub fn fits(&self, depth: u32) -> bool {
        self.context()
            .is_none_or(|(c, _)| u64::from(depth) + u64::from(self.max_tokens) <= c)
    }

    /// The limit probe's depth: [`PROBE_SHARE`] of the context, when a depth is past a known
    /// context; `None` when none is (or the context is not known: nothing to probe).
    pub fn probe_depth(&self) -> Option<u32> {
        let (context, _) = self.context()?;
        if self.depths.iter().all(|&d| self.fits(d)) {
            return None;
        }
        let d = (context as f64 * PROBE_SHARE).ceil();
        Some(d.min(f64::from(u32::MAX)) as u32)
    }
}

/// A depth reply's place (replies.jsonl `depth`): which depth it asked, what it asked, and
/// whether it was the probe of the context's limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepthSlot {
    /// The depth asked, approximate prompt tokens.
    pub depth: u32,
    /// Which reply at that depth, from 0 (each has a prompt of its own).
    pub replica: u32,
    /// The prompt's tokens as the gate estimates them.
    pub estimate: u64,
    /// The fact's number, which the answer must give.
    pub code: String,
    /// The estimated tokens before the fact.
    pub fact_at: u64,
    /// The probe of the context's limit: a prompt past the context, which must be refused or
    /// said to be cut. Absent, false, for a depth within it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub limit_probe: bool,
}

/// The context lines' floors (run.json `floors.context`), each absent when not given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextFloors {
    /// `--prefill-floor`: the lowest prefill rate at any depth, tok/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_floor: Option<f64>,
    /// `--depth-floor`: the lowest decode rate at the deepest depth, tok/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth_floor: Option<f64>,
}

impl ContextFloors {
    /// Whether nothing was given (nothing to write).
    pub fn is_default(&self) -> bool {
        *self == ContextFloors::default()
    }
}

/// One depth's figures (result.json `figures.context.depths[]`, and `--prom`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepthFigures {
    /// The depth asked.
    pub depth: u32,
    /// Replies made at it.
    pub replies: usize,
    /// The median prompt tokens the rates rest on.
    pub prompt_tokens: Option<f64>,
    /// Whether `prompt_tokens` is the serve's count (`usage.prompt_tokens`) or the gate's
    /// estimate.
    pub prompt_tokens_by: String,
    /// The median first-token time, ms.
    pub first_token_ms: Option<f64>,
    /// The median prefill rate: prompt tokens / first-token time, tok/s.
    pub prefill_tok_s: Option<f64>,
    /// The median decode rate, tok/s.
    pub decode_tok_s: Option<f64>,
    /// How many replies gave the fact.
    pub found: usize,
    /// The prefill rate against the baseline's at the same depth: the Hodges-Lehmann ratio
    /// (context-rate, with `--baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_ratio: Option<f64>,
    /// The decode rate against the baseline's, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_ratio: Option<f64>,
}

/// The context figures of a run (result.json `figures.context`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ContextFigures {
    /// The context the depths were held to, tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u64>,
    /// A row a depth asked within the context.
    #[serde(default)]
    pub depths: Vec<DepthFigures>,
    /// What the serve did with the prompt past its context: `refused`, `cut`, `answered`,
    /// `garbled`, `crashed`, `failed`; absent when the limit was not probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(depths: &[u32], serve: Option<u64>, given: Option<u64>) -> ContextPlan {
        ContextPlan {
            depths: depths.to_vec(),
            replies_each: 3,
            serve_says: serve.map(|tokens| ContextSaid {
                tokens,
                by: "GET /props".into(),
            }),
            given,
            max_tokens: 64,
        }
    }

    #[test]
    fn the_serves_word_on_its_context_comes_before_the_flag() {
        assert_eq!(
            plan(&[], Some(2048), Some(4096)).context(),
            Some((2048, "GET /props".into()))
        );
        assert_eq!(
            plan(&[], None, Some(4096)).context(),
            Some((4096, "--max-context".into()))
        );
        assert_eq!(plan(&[], None, None).context(), None);
    }

    #[test]
    fn a_depth_fits_with_its_answer_and_past_it_the_limit_is_probed_at_half_again() {
        let p = plan(&[256, 1984, 1985, 4096], Some(2048), None);
        assert!(p.fits(256) && p.fits(1984));
        assert!(!p.fits(1985), "1,985 + 64 answer tokens is past 2,048");
        assert_eq!(p.probe_depth(), Some(3072));
        assert_eq!(plan(&[256, 1984], Some(2048), None).probe_depth(), None);
        let unknown = plan(&[256, 1_000_000], None, None);
        assert!(unknown.fits(1_000_000));
        assert_eq!(unknown.probe_depth(), None);
    }
}
