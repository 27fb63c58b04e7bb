//! The replies of `--depths` (issue 35; docs/context.md), made after every other reply: the
//! serve's context read where it says it, then at each depth that fits in it `--depth-replies`
//! prompts of about that many tokens (`crate::depth_prompt`), and where a depth is past the
//! context one probe of the limit, last (it may take the serve down).

use anyhow::Result;

use crate::archive::record::{ContextPlan, ContextSaid, DepthSlot, ReplyRecord};
use crate::depth_prompt;
use crate::judging::measure;
use crate::judging::verdict::context::prompt_tokens;
use crate::judging::verdict::words::grouped;
use crate::live::client::{Client, ReplyRequest};
use crate::live::plan::Plan;
use crate::live::recorder::Recorder;
use crate::live::serve::ServeProcess;
use crate::live::single_reply::keep_reply;

/// What the depth replies are made with.
pub(crate) struct DepthWork<'a> {
    pub plan: &'a Plan,
    pub client: &'a Client,
    pub model: &'a str,
    pub base_ns: u64,
    pub rec: &'a Recorder,
}

/// The serve's context where it says it: llama-server's `GET /props`
/// (`default_generation_settings.n_ctx`, the context of one slot; older builds put `n_ctx` at
/// the top), else the first model of `GET {api}/models` (vLLM's `max_model_len`, llama-server's
/// `meta.n_ctx`). `None` where neither says.
pub(crate) async fn serve_context(client: &Client) -> Option<ContextSaid> {
    let tokens = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_u64);
    if let Some(props) = client.get_json("/props").await {
        let said = [
            (
                tokens(props.pointer("/default_generation_settings/n_ctx")),
                "GET /props default_generation_settings.n_ctx",
            ),
            (tokens(props.get("n_ctx")), "GET /props n_ctx"),
        ];
        if let Some((Some(n), by)) = said.into_iter().find(|(n, _)| n.is_some_and(|n| n > 0)) {
            return Some(ContextSaid {
                tokens: n,
                by: by.to_string(),
            });
        }
    }
    let models = client.get_json(&client.models_path()).await?;
    let first = models.pointer("/data/0")?;
    let said = [
        (tokens(first.get("max_model_len")), "max_model_len"),
        (tokens(first.pointer("/meta/n_ctx")), "meta.n_ctx"),
    ];
    let (n, key) = said.into_iter().find(|(n, _)| n.is_some_and(|n| n > 0))?;
    Some(ContextSaid {
        tokens: n?,
        by: format!("GET {} {key}", client.models_path()),
    })
}

/// Make the depth replies of `context` and, where a depth is past it, the probe of the limit,
/// appending each to replies.jsonl and `replies`. `cache_off`: the serve is llama-server (it
/// answered /props), which takes `cache_prompt: false`. How the serve died, if it did.
pub(crate) async fn make_depth_replies(
    w: &DepthWork<'_>,
    context: &ContextPlan,
    cache_off: bool,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
) -> Result<Option<String>> {
    let mut fields = w.plan.request_fields.clone().unwrap_or_default();
    if cache_off {
        // The gate's own field: --extra-body's, where it sets one, wins as over every other.
        fields
            .entry("cache_prompt")
            .or_insert(serde_json::Value::Bool(false));
    }
    let fields = (!fields.is_empty()).then_some(fields);
    for &depth in context.depths.iter().filter(|&&d| context.fits(d)) {
        for replica in 0..context.replies_each {
            let reply = one_depth_reply(w, fields.as_ref(), depth, replica, false, replies).await;
            if let Some(died) = keep(w, reply, serve, replies).await? {
                return Ok(Some(died));
            }
        }
    }
    match context.probe_depth() {
        Some(depth) => {
            let reply = one_depth_reply(w, fields.as_ref(), depth, 0, true, replies).await;
            let died = keep(w, reply, serve, replies).await?;
            if died.is_some() {
                return Ok(died);
            }
            // A serve that answered and then fell over is as dead as one that broke the reply.
            Ok(ServeProcess::exit_after_failure(serve).await.map(|status| {
                let died = format!(
                    "the serve exited ({status}) after the probe of its context's limit (reply {})",
                    replies.len()
                );
                crate::say!("{died}");
                died
            }))
        }
        None => Ok(None),
    }
}

async fn keep(
    w: &DepthWork<'_>,
    reply: ReplyRecord,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
) -> Result<Option<String>> {
    keep_reply(reply, w.rec, serve, replies, w.plan.device_memory.as_ref()).await
}

/// One reply at `depth` (its `replica`, from 0), or the probe of the limit, said as it ends.
async fn one_depth_reply(
    w: &DepthWork<'_>,
    fields: Option<&serde_json::Map<String, serde_json::Value>>,
    depth: u32,
    replica: u32,
    limit_probe: bool,
    replies: &[ReplyRecord],
) -> ReplyRecord {
    let prompt = depth_prompt::make(depth, replica);
    let req = ReplyRequest {
        index: replies.len() + 1,
        prompt: &prompt.text,
        expect: None,
        model: w.model,
        max_tokens: w.plan.max_tokens,
        extra_body: fields,
        burst: None,
        first_text: None,
        continue_from: None,
        asks: None,
    };
    let mut reply = w
        .client
        .stream_reply(&req, w.base_ns, w.plan.reply_timeout, w.plan.reply_limit)
        .await;
    reply.depth = Some(DepthSlot {
        depth,
        replica,
        estimate: prompt.estimate,
        code: prompt.code.clone(),
        fact_at: prompt.fact_at,
        limit_probe,
    });
    let m = measure::record_metrics(&mut reply);
    crate::say!("{}", said(&reply, &m, &prompt.code, limit_probe));
    reply
}

/// A depth reply's progress line: `depth 1,024 (reply 2): first token 850 ms, prefill 1,250
/// tok/s, decode 57.0 tok/s, the fact found`.
fn said(reply: &ReplyRecord, m: &measure::ReplyMetrics, code: &str, limit_probe: bool) -> String {
    let slot = reply.depth.as_ref().expect("a depth reply has its slot");
    let head = if limit_probe {
        format!(
            "context limit probe (about {} tokens)",
            grouped(slot.depth.into())
        )
    } else {
        format!(
            "depth {} (reply {})",
            grouped(slot.depth.into()),
            slot.replica + 1
        )
    };
    if let Some(e) = &reply.error {
        return format!("{head}: {}", crate::inert::one_line(e));
    }
    let (tokens, _) = prompt_tokens(reply.usage_prompt_tokens, slot.estimate);
    let first = m.first_token_ms.map_or("no first token".to_string(), |ms| {
        format!(
            "first token {ms:.0} ms, prefill {:.0} tok/s",
            tokens / (ms / 1e3)
        )
    });
    let decode = m
        .rate_tok_s
        .map_or(String::new(), |r| format!(", decode {r:.1} tok/s"));
    let fact = if depth_prompt::found(&reply.content, code) {
        "the fact found"
    } else {
        "the fact not found"
    };
    format!("{head}: {first}{decode}, {fact}")
}

/// Read the serve's context into `context` before the depths are asked, and say it. Whether
/// the serve is llama-server (it answered /props with its context), which takes
/// `cache_prompt: false`.
pub(crate) async fn read_context(client: &Client, context: &mut ContextPlan) -> bool {
    context.serve_says = serve_context(client).await;
    match (&context.serve_says, context.given) {
        (Some(s), Some(g)) if s.tokens != g => crate::say!(
            "the serve's context is {} tokens ({}), not the {g} of --max-context: the depths are held to the serve's",
            s.tokens,
            s.by
        ),
        (Some(s), _) => crate::say!("the serve's context is {} tokens ({})", s.tokens, s.by),
        (None, Some(g)) => crate::say!("the serve does not say its context: held to --max-context {g}"),
        (None, None) => crate::say!(
            "the serve does not say its context, and no --max-context was given: every depth is asked, and the limit is not probed"
        ),
    }
    context
        .serve_says
        .as_ref()
        .is_some_and(|s| s.by.starts_with("GET /props"))
}
