//! Re-anchoring past divergences from the reference (`--reference-reanchor`, issue 31): after
//! the timed replies, each prompt's first answer is walked along the reference's answer by
//! the judging code itself ([`reference::walk`]); where the walk stops at a divergence no
//! re-anchor is recorded for, the candidate is asked to go on from the reference's own answer
//! through the diverging token, as a final assistant message it continues, and the walk goes
//! on. The requests are not replies: they are recorded apart (reanchors.json), judged by the
//! reference line alone, and never timed.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::archive::record::{ReanchorRecord, ReplyRecord, RunManifest, MAX_TOP_LOGPROBS};
use crate::archive::rundir::{self, Archive};
use crate::judging::verdict::determinism::first_answers;
use crate::judging::verdict::reference::{self, Answer, WalkEnd};
use crate::live::client::{Client, ReplyRequest};
use crate::live::recorder::Recorder;
use crate::prompts::Prompt;

/// What re-anchoring needs of the run.
pub struct ReanchorWork<'a> {
    /// The candidate's client.
    pub client: &'a Client,
    /// The model requested.
    pub model: &'a str,
    /// The candidate's run.json as far as it is written: its prompts and sampling.
    pub manifest: &'a RunManifest,
    /// The reference run.
    pub reference: &'a Archive,
    /// The run's prompts, for each one's max_tokens.
    pub prompts: &'a [Prompt],
    /// `--max-tokens`.
    pub max_tokens: u32,
    /// The fields every request carries, with `--continue-body`'s.
    pub fields: Option<&'a Map<String, Value>>,
    /// `--reference-reanchor`: the most re-anchors a prompt.
    pub most: usize,
    /// `--reference-tie` (the walk classifies as it goes; where it stops does not depend on it).
    pub tie: f64,
    /// The stall bound of each request.
    pub stall: Duration,
    /// The bound of each whole request.
    pub limit: Option<Duration>,
}

/// The max_tokens of a re-anchor with `rest` reference tokens left after the prefix: room for
/// a tokenisation a quarter longer than the reference's, and one token past an answer that
/// ended there (to see whether the candidate ends too), within the prompt's own max_tokens.
fn continuation_tokens(rest: usize, prompt_max: u32) -> u32 {
    let want = rest + rest / 4 + 2;
    u32::try_from(want)
        .unwrap_or(u32::MAX)
        .min(prompt_max)
        .max(1)
}

/// Make the re-anchors the walks of `replies` (the run's) call for, writing reanchors.json
/// after each. Returns them; none when the reference cannot be compared (its line says why).
pub async fn reanchor(
    work: &ReanchorWork<'_>,
    base_ns: u64,
    replies: &[ReplyRecord],
    rec: &Recorder,
) -> Vec<ReanchorRecord> {
    let mut made: Vec<ReanchorRecord> = Vec::new();
    if work.most == 0
        || !reference::incomparable(work.manifest, &work.reference.manifest).is_empty()
    {
        return made;
    }
    let theirs = first_answers(&work.reference.replies);
    for ours in first_answers(replies) {
        let Some(base) = theirs.iter().find(|r| r.prompt == ours.prompt) else {
            continue;
        };
        // As the line reads them (`Answer::of`): the prefixes sent are the ones it judges.
        let Some(tokens) = Answer::of(base).logprobs else {
            continue;
        };
        let cut = base.finish_reason.as_deref() == Some("length");
        let prompt_max = work
            .prompts
            .iter()
            .find(|p| p.prompt == ours.prompt)
            .and_then(|p| p.max_tokens)
            .unwrap_or(work.max_tokens);
        // At most `most` + 1 requests a prompt: each recorded re-anchor either takes the walk
        // one further or ends it.
        for _ in 0..=work.most {
            let recorded: Vec<&ReanchorRecord> =
                made.iter().filter(|a| a.prompt == ours.prompt).collect();
            let w = reference::walk(
                Answer::of(ours),
                tokens,
                cut,
                MAX_TOP_LOGPROBS,
                work.tie,
                work.most,
                &recorded,
            );
            match w.end {
                WalkEnd::Unrecorded { at_token, prefix } => {
                    let rest = tokens.len() - at_token - 1;
                    let req = ReplyRequest {
                        index: 0,
                        prompt: &ours.prompt,
                        expect: None,
                        model: work.model,
                        max_tokens: continuation_tokens(rest, prompt_max),
                        extra_body: work.fields,
                        burst: None,
                        first_text: None,
                        continue_from: Some(&prefix),
                        asks: None,
                    };
                    let mut reply = work
                        .client
                        .stream_reply(&req, base_ns, work.stall, work.limit)
                        .await;
                    reply.keep_judged_text();
                    made.push(ReanchorRecord {
                        prompt: ours.prompt.clone(),
                        at_token,
                        prefix,
                        content: reply.content,
                        logprobs: reply.logprobs,
                        finish_reason: reply.finish_reason,
                        error: reply.error,
                    });
                    rec.json(rundir::REANCHORS, &made);
                }
                // Judged a prompt at a time: a broken build that writes its chat template again
                // where it should continue looks like one that cannot continue, and must not
                // stop the other prompts' re-anchoring.
                WalkEnd::NotContinued(why) => {
                    crate::say!(
                        "re-anchoring {} stopped: the serve did not continue the assistant message it was given ({why})",
                        crate::inert::quote(&ours.prompt, 40)
                    );
                    break;
                }
                WalkEnd::Whole | WalkEnd::Bound => break,
            }
        }
    }
    if !made.is_empty() {
        let prompts = {
            let mut p: Vec<&str> = made.iter().map(|a| a.prompt.as_str()).collect();
            p.sort_unstable();
            p.dedup();
            p.len()
        };
        crate::say!(
            "re-anchored {} {} past divergences from the reference on {prompts} {} (reanchors.json; never timed)",
            made.len(),
            if made.len() == 1 { "time" } else { "times" },
            if prompts == 1 { "prompt" } else { "prompts" }
        );
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuation_has_room_for_another_tokenisation_within_the_prompts_bound() {
        assert_eq!(continuation_tokens(0, 64), 2);
        assert_eq!(continuation_tokens(40, 64), 52);
        assert_eq!(continuation_tokens(60, 64), 64);
        assert_eq!(continuation_tokens(0, 1), 1);
    }
}
