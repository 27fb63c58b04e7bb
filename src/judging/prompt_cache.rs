//! Which replies had their prompt served from the serve's prompt cache (issue 37, item 3): a
//! cached prompt skips prompt processing, so its first token comes far sooner (llama-server
//! 11434 with SmolLM2-135M on 2 CPUs: 106 to 133 ms cold, 21 to 27 ms cached), and a run whose
//! replies mix the two has a two-humped first-token distribution. The baseline's first-token
//! comparison sets cold against cold and cached against cached; the first-token line says
//! when the two humps lie far apart.
//!
//! Pure: a function of the recorded reply.

use crate::archive::record::ReplyRecord;

/// The share of a reply's prompt tokens the cache must have served for its prompt to count as
/// served from the cache. Three quarters, from what serves report of the two cases:
/// - A new prompt still shares the chat template's opening with the prompts before it, and a
///   serve reuses that prefix: llama-server reported `cache_n` 24 to 27 of 37 to 43 prompt
///   tokens (60% to 65%) for SmolLM2's template, and its first token took as long as a cold one.
/// - A repeated prompt is served whole but for its last token on llama-server (`cache_n` 36 of
///   37, 97%), and whole but for its last block on a block-granular cache: vLLM's prefix cache
///   counts `cached_tokens` in blocks of 16, 32 of a 40-token prompt (80%).
///
/// Prefill time follows the tokens processed, so a long system prompt every prompt shares
/// makes every reply "cached" by this share, and rightly: their first tokens are alike.
pub const CACHED_SHARE: f64 = 0.75;

/// Whether `reply`'s prompt was served from the cache: at least [`CACHED_SHARE`] of its prompt
/// tokens (`usage.prompt_tokens`, which counts the cached ones too, in OpenAI's API and in
/// llama-server's) came from the cache. A serve that says how many tokens it took from the
/// cache but not how many the prompt had: any above zero counts. `None` when the serve did not
/// say what it took from the cache.
pub fn served_from_cache(reply: &ReplyRecord) -> Option<bool> {
    let cached = reply.cached_prompt_tokens?;
    Some(match reply.usage_prompt_tokens.filter(|&n| n > 0) {
        Some(prompt) => cached as f64 >= CACHED_SHARE * prompt as f64,
        None => cached > 0,
    })
}

/// How a set of replies splits by [`served_from_cache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheSplit {
    /// Replies whose prompt the cache served.
    pub cached: usize,
    /// Replies the serve reported on whose prompt it processed.
    pub cold: usize,
    /// Replies the serve said nothing of.
    pub unreported: usize,
}

impl CacheSplit {
    /// Count `replies` by [`served_from_cache`].
    pub fn of<'a>(replies: impl IntoIterator<Item = &'a ReplyRecord>) -> CacheSplit {
        let mut split = CacheSplit::default();
        for r in replies {
            match served_from_cache(r) {
                Some(true) => split.cached += 1,
                Some(false) => split.cold += 1,
                None => split.unreported += 1,
            }
        }
        split
    }

    /// Whether the replies mix cold and cached prompts: both are there.
    pub fn mixed(&self) -> bool {
        self.cached > 0 && self.cold > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(prompt: Option<u64>, cached: Option<u64>) -> ReplyRecord {
        ReplyRecord {
            usage_prompt_tokens: prompt,
            cached_prompt_tokens: cached,
            ..ReplyRecord::new(1, "p", None)
        }
    }

    #[test]
    fn a_shared_template_prefix_is_cold_and_a_repeated_prompt_is_cached() {
        // The llama-server figures above: prefix reuse 24 of 37, a repeat 36 of 37.
        assert_eq!(served_from_cache(&reply(Some(37), Some(24))), Some(false));
        assert_eq!(served_from_cache(&reply(Some(37), Some(36))), Some(true));
        // vLLM's block-granular repeat: 32 of 40.
        assert_eq!(served_from_cache(&reply(Some(40), Some(32))), Some(true));
        // At the share exactly: cached; a token under: cold.
        assert_eq!(served_from_cache(&reply(Some(40), Some(30))), Some(true));
        assert_eq!(served_from_cache(&reply(Some(40), Some(29))), Some(false));
        assert_eq!(served_from_cache(&reply(Some(40), Some(0))), Some(false));
        // No prompt count (or a zero one): any cached token counts.
        assert_eq!(served_from_cache(&reply(None, Some(1))), Some(true));
        assert_eq!(served_from_cache(&reply(Some(0), Some(1))), Some(true));
        assert_eq!(served_from_cache(&reply(None, Some(0))), Some(false));
        // Not said: not known.
        assert_eq!(served_from_cache(&reply(Some(40), None)), None);
    }

    #[test]
    fn a_split_counts_each_kind() {
        let replies = [
            reply(Some(40), Some(39)),
            reply(Some(40), Some(10)),
            reply(Some(40), Some(0)),
            reply(None, None),
        ];
        let split = CacheSplit::of(&replies);
        assert_eq!(
            split,
            CacheSplit {
                cached: 1,
                cold: 2,
                unreported: 1
            }
        );
        assert!(split.mixed());
        assert!(!CacheSplit::of(&replies[1..]).mixed());
        assert!(!CacheSplit::of(&replies[..1]).mixed());
    }
}
