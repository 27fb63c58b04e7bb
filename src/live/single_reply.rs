//! The single-stream replies: the warm-ups and the planned replies, one at a time, each made
//! on its prompt by rotation, appended to replies.jsonl and kept for the verdict. The soak
//! makes its replies the same way.

use anyhow::Result;

use crate::archive::record::{MemoryReading, ReplyRecord};
use crate::judging::measure;
use crate::live::client::{Client, ReplyRequest};
use crate::live::footprint::{self, DeviceMemoryFile};
use crate::live::plan::Plan;
use crate::live::progress_line::{figures_said, progress};
use crate::live::recorder::Recorder;
use crate::live::serve::ServeProcess;

/// Stream the warm-ups (`--warmup`) and then the planned replies, one at a time, appending
/// each to replies.jsonl: the warm-ups are replies 1 to N, flagged, and the planned ones
/// follow from N + 1. Stops early when the serve has died: replies are not sent to a dead
/// serve. Returns how it died, if it did.
pub(crate) async fn make_replies(
    plan: &Plan,
    client: &Client,
    model: &str,
    base_ns: u64,
    rec: &Recorder,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
) -> Result<Option<String>> {
    for w in 0..plan.warmup {
        let (reply, m) = one_reply(plan, client, model, base_ns, w, true).await;
        crate::say!(
            "warm-up {}/{}: {}",
            w + 1,
            plan.warmup,
            figures_said(&reply, &m)
        );
        if let Some(died) =
            keep_reply(reply, rec, serve, replies, plan.device_memory.as_ref()).await?
        {
            return Ok(Some(died));
        }
    }
    for i in 0..plan.replies {
        let (reply, m) = one_reply(plan, client, model, base_ns, i, false).await;
        crate::say!("{}", progress(&reply, &m, plan.warmup + plan.replies));
        if let Some(died) =
            keep_reply(reply, rec, serve, replies, plan.device_memory.as_ref()).await?
        {
            return Ok(Some(died));
        }
    }
    Ok(None)
}

/// The single-stream reply at position `i` (0-based) among the warm-ups when `warmup`, else
/// among the judged replies (numbered after the warm-ups), its prompt by rotation from the
/// first prompt (so the judged replies ask what they would without warm-ups), and its figures.
pub(crate) async fn one_reply(
    plan: &Plan,
    client: &Client,
    model: &str,
    base_ns: u64,
    i: usize,
    warmup: bool,
) -> (ReplyRecord, measure::ReplyMetrics) {
    let prompt = &plan.prompts[i % plan.prompts.len()];
    let req = ReplyRequest {
        index: if warmup { i + 1 } else { plan.warmup + i + 1 },
        prompt: &prompt.prompt,
        expect: prompt.expect.as_deref(),
        model,
        max_tokens: prompt.max_tokens.unwrap_or(plan.max_tokens),
        extra_body: plan.request_fields.as_ref(),
        burst: None,
        first_text: None,
        continue_from: None,
        asks: Some((i % plan.prompts.len(), prompt)),
    };
    let mut reply = client
        .stream_reply(&req, base_ns, plan.reply_timeout, plan.reply_limit)
        .await;
    reply.warmup = warmup;
    let m = measure::record_metrics(&mut reply);
    (reply, m)
}

/// The launched serve's memory now (and the device's, `device_memory` where given), for a
/// reply that just ended (issue 34); `None` for an attached serve, or one that is gone.
pub(crate) fn memory_now(
    serve: &Option<ServeProcess>,
    device_memory: Option<&DeviceMemoryFile>,
) -> Option<MemoryReading> {
    let p = serve.as_ref()?;
    footprint::read_tree(p.pid(), Some(p.supervisor_pid()), device_memory)
}

/// Append a finished reply to replies.jsonl and the run's replies, with the serve's memory at
/// its end. When it failed and the serve has exited, how the serve died.
pub(crate) async fn keep_reply(
    mut reply: ReplyRecord,
    rec: &Recorder,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
    device_memory: Option<&DeviceMemoryFile>,
) -> Result<Option<String>> {
    reply.memory = memory_now(serve, device_memory);
    let failed = reply.error.is_some();
    let index = reply.index;
    rec.reply(&reply);
    // The archive has the whole text; the verdict reads no more than this of it.
    reply.keep_judged(replies);
    replies.push(reply);
    if failed {
        if let Some(status) = ServeProcess::exit_after_failure(serve).await {
            let died = format!("the serve exited ({status}) during reply {index}");
            crate::say!("{died}; no more replies are sent");
            return Ok(Some(died));
        }
    }
    Ok(None)
}
