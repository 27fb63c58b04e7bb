//! The concurrent bursts (`--concurrency N --rounds R`): after the single-stream replies, R
//! bursts of N streams released together, and the serve's own metrics scraped around them.
//!
//! Every stream has a connection of its own (no pool, so no cap of a pool's), and all of them
//! are read on the gate's one thread: each stream's reader is a task of its own on it, stamping
//! every chunk as a single reply's are ([`crate::live::client`]). A burst's streams share its
//! release as their `sent_ns`, so first-token includes any queueing at the serve, and each
//! records when its request was written (`written_ns`): the gate's own dispatch delay, kept
//! apart. Each stream is handed to the run's writer the moment it ends (the writer appends it
//! to replies.jsonl on a thread of its own: no sync runs between two streams' reads), so an
//! interruption mid-burst keeps every finished stream.

use crate::archive::record::Phase;
use std::time::Duration;

use anyhow::Result;
use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::archive::record::{
    BurstSlot, ConcurrencyPlan, MetricsRecord, MetricsScrape, ReplyRecord, METRICS_BODY_KEPT,
};
use crate::archive::rundir;
use crate::clock;
use crate::judging::measure;
use crate::live::client::{Client, FirstText, ReplyRequest};
use crate::live::footprint::DeviceMemoryFile;
use crate::live::recorder::Recorder;
use crate::live::serve::ServeProcess;
use crate::live::single_reply::memory_now;
use crate::prompts::Prompt;

/// What the bursts are made of.
#[derive(Debug, Clone, Copy)]
pub struct BurstWork<'a> {
    /// The serve's client.
    pub client: &'a Client,
    /// How many bursts of how many streams.
    pub plan: &'a ConcurrencyPlan,
    /// The prompts, rotated over the streams.
    pub prompts: &'a [Prompt],
    /// The model name to request.
    pub model: &'a str,
    /// `max_tokens` where a prompt does not say.
    pub max_tokens: u32,
    /// `--extra-body`.
    pub extra_body: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// `--reply-timeout`.
    pub stall: Duration,
    /// `--reply-limit`.
    pub limit: Option<Duration>,
    /// A client for the serve's metrics, when they are scraped.
    pub metrics: Option<&'a Client>,
    /// `--device-memory`'s counter, read with the serve's memory at each reply's end.
    pub device_memory: Option<&'a DeviceMemoryFile>,
}

/// The longest a scrape of the serve's metrics may take.
const SCRAPE_LIMIT: Duration = Duration::from_secs(5);

/// Make the bursts, appending each stream to replies.jsonl (and `replies`) as it ends, and
/// scraping the serve's metrics into `metrics` (made by the caller with no scrapes, when they
/// are scraped), writing metrics.json after each scrape. Stops after a burst in which the
/// serve died. Returns how it died, if it did.
pub async fn make_bursts(
    work: &BurstWork<'_>,
    base_ns: u64,
    rec: &Recorder,
    serve: &mut Option<ServeProcess>,
    replies: &mut Vec<ReplyRecord>,
    metrics: &mut Option<MetricsRecord>,
) -> Result<Option<String>> {
    let ConcurrencyPlan { streams, rounds } = *work.plan;
    let mut metrics_client = work.metrics;
    if let (Some(record), Some(client)) = (metrics.as_mut(), metrics_client) {
        let before = scrape(client, Phase::Before, base_ns).await;
        // The serve's /metrics, tried: a serve without them (404; llama-server without
        // --metrics, 501) is not asked again. A URL given is, whatever it answered.
        if !record.given && before.status != Some(200) {
            metrics_client = None;
        }
        record.scrapes.push(before);
        rec.json(rundir::METRICS, record);
    }
    let mut index = replies.len();
    for round in 1..=rounds {
        let released = clock::now_ns();
        // The during-scrape comes in the first burst once every stream has its first text (a
        // serve that batches then has them all in hand), or once a stream has ended before
        // the rest began (one that does not has the rest waiting). llama.cpp resets its
        // throughput gauges at each scrape, so once only.
        let first_text = FirstText::new(streams);
        let mut requests = Vec::with_capacity(streams);
        for stream in 1..=streams {
            index += 1;
            let prompt = &work.prompts[(index - 1) % work.prompts.len()];
            requests.push(ReplyRequest {
                index,
                prompt: &prompt.prompt,
                expect: prompt.expect.as_deref(),
                model: work.model,
                max_tokens: prompt.max_tokens.unwrap_or(work.max_tokens),
                extra_body: work.extra_body,
                burst: Some((BurstSlot { round, stream }, released)),
                first_text: (round == 1).then(|| first_text.clone()),
                continue_from: None,
                asks: Some(((index - 1) % work.prompts.len(), prompt)),
            });
        }
        let mut running = FuturesUnordered::new();
        for req in &requests {
            running.push(
                work.client
                    .stream_reply(req, base_ns, work.stall, work.limit),
            );
        }
        crate::say!("burst {round}/{rounds}: {streams} streams released");
        let during = async {
            match (round, metrics_client) {
                (1, Some(client)) => {
                    first_text.wait().await;
                    Some(scrape(client, Phase::During, base_ns).await)
                }
                _ => futures_util::future::pending().await,
            }
        };
        let mut during = std::pin::pin!(during);
        let mut during_pending = true;
        let mut failed = false;
        loop {
            tokio::select! {
                done = running.next() => {
                    let Some(mut reply) = done else { break };
                    let m = measure::record_metrics(&mut reply);
                    crate::say!("{}", progress(&reply, &m, work.plan));
                    failed |= reply.error.is_some();
                    first_text.wake();
                    // A few small /proc reads while the other streams wait to be polled: the
                    // sampler makes the same every 250 ms.
                    reply.memory = memory_now(serve, work.device_memory);
                    rec.reply(&reply);
                    reply.keep_judged(replies);
                    replies.push(reply);
                }
                scraped = &mut during, if during_pending => {
                    during_pending = false;
                    if let (Some(s), Some(record)) = (scraped, metrics.as_mut()) {
                        record.scrapes.push(s);
                        rec.json(rundir::METRICS, record);
                    }
                }
            }
        }
        if failed {
            if let Some(status) = ServeProcess::exit_after_failure(serve).await {
                let died = format!("the serve exited ({status}) during burst {round}");
                crate::say!("{died}; no more bursts are sent");
                return Ok(Some(died));
            }
        }
    }
    if let (Some(record), Some(client)) = (metrics.as_mut(), metrics_client) {
        record
            .scrapes
            .push(scrape(client, Phase::After, base_ns).await);
        rec.json(rundir::METRICS, record);
    }
    Ok(None)
}

/// One scrape of the serve's metrics: what it answered, or why it did not.
async fn scrape(client: &Client, phase: Phase, base_ns: u64) -> MetricsScrape {
    let answer = client.fetch(SCRAPE_LIMIT, METRICS_BODY_KEPT).await;
    let at_ns = clock::now_ns().saturating_sub(base_ns);
    match answer {
        Ok(f) => MetricsScrape {
            phase,
            at_ns,
            status: Some(f.status),
            body: Some(String::from_utf8_lossy(&f.body).into_owned()),
            cut: f.cut,
            error: None,
        },
        Err(e) => MetricsScrape {
            phase,
            at_ns,
            status: None,
            body: None,
            cut: false,
            error: Some(e),
        },
    }
}

/// A stream's progress line: `burst 2/3 stream 4/8: 32 tokens, first token 51 ms, ...`.
fn progress(r: &ReplyRecord, m: &measure::ReplyMetrics, plan: &ConcurrencyPlan) -> String {
    let place = match r.burst {
        Some(b) => format!(
            "burst {}/{} stream {}/{}",
            b.round, plan.rounds, b.stream, plan.streams
        ),
        None => format!("reply {}", r.index),
    };
    format!(
        "{place}: {}",
        crate::live::progress_line::figures_said(r, m)
    )
}
