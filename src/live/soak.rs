//! The soak (`--soak`): single-stream replies kept up after the planned ones until the soak's
//! time is spent, with a progress line every 10 s, and how it ended, as run.json says it.

use std::time::Duration;

use anyhow::Result;

use crate::archive::record::ReplyRecord;
use crate::args::run as run_args;
use crate::clock;
use crate::judging::measure;
use crate::live::client::Client;
use crate::live::plan::Plan;
use crate::live::progress_line::progress;
use crate::live::recorder::Recorder;
use crate::live::serve::ServeProcess;
use crate::live::single_reply::{keep_reply, one_reply};

/// How often a soak says how it is going.
const SOAK_PROGRESS: Duration = Duration::from_secs(10);

/// A soak (`--soak`): single-stream replies after the planned ones, one at a time, until the
/// duration is spent from the first reply's send. The reply under way when it is spent is
/// finished, never cut: a cut reply would read as a stall.
pub(crate) struct Soak<'a> {
    pub plan: &'a Plan,
    pub client: &'a Client,
    pub model: &'a str,
    pub base_ns: u64,
    pub rec: &'a Recorder,
    pub duration: Duration,
}

/// How a soak ended, as run.json says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SoakEnd {
    /// The duration was spent.
    Duration,
    /// [`run_args::MAX_SOAK_REPLIES`] replies were made.
    ReplyCap,
    /// A reply failed: the run fails on it already, and a serve that fails every reply at
    /// once must not be asked thousands of times.
    ReplyFailed,
    /// The serve exited.
    ServeDied,
}

impl std::fmt::Display for SoakEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SoakEnd::Duration => "duration",
            SoakEnd::ReplyCap => "reply cap",
            SoakEnd::ReplyFailed => "reply failed",
            SoakEnd::ServeDied => "serve died",
        })
    }
}

impl Soak<'_> {
    /// Make the soak's replies after those in `replies`; how it ended, and how the serve died
    /// if it did. An interruption drops this future between or inside replies: every finished
    /// reply is in `replies` and replies.jsonl by then.
    pub(crate) async fn run(
        &self,
        serve: &mut Option<ServeProcess>,
        replies: &mut Vec<ReplyRecord>,
    ) -> Result<(SoakEnd, Option<String>)> {
        // The warm-ups are not the soak's: its time runs from the first judged reply.
        let started_ns = replies.iter().find(|r| !r.warmup).map_or_else(
            || clock::now_ns().saturating_sub(self.base_ns),
            |r| r.sent_ns,
        );
        let end_ns = started_ns.saturating_add(self.duration.as_nanos() as u64);
        let now = || clock::now_ns().saturating_sub(self.base_ns);
        crate::say!(
            "soak: replies until {} from the first reply's send",
            humantime::format_duration(self.duration)
        );
        let mut said_ns = now();
        let mut rates: Vec<f64> = replies
            .iter()
            .filter(|r| !r.warmup)
            .filter_map(|r| measure::measure(r).rate_tok_s)
            .collect();
        loop {
            if now() >= end_ns {
                return Ok((SoakEnd::Duration, None));
            }
            if replies.len() >= run_args::MAX_SOAK_REPLIES {
                crate::say!(
                    "soak: stopped at {} replies, the most a run keeps",
                    replies.len()
                );
                return Ok((SoakEnd::ReplyCap, None));
            }
            let i = replies.len() - self.plan.warmup.min(replies.len());
            let (reply, m) =
                one_reply(self.plan, self.client, self.model, self.base_ns, i, false).await;
            let failed = reply.error.is_some();
            if failed {
                crate::say!("{}", progress(&reply, &m, self.plan.warmup + i + 1));
            }
            rates.extend(m.rate_tok_s);
            if let Some(died) = keep_reply(
                reply,
                self.rec,
                serve,
                replies,
                self.plan.device_memory.as_ref(),
            )
            .await?
            {
                return Ok((SoakEnd::ServeDied, Some(died)));
            }
            if failed {
                crate::say!("soak: a reply failed; no more soak replies are sent");
                return Ok((SoakEnd::ReplyFailed, None));
            }
            let at = now();
            if at.saturating_sub(said_ns) >= SOAK_PROGRESS.as_nanos() as u64 {
                said_ns = at;
                crate::say!(
                    "{}",
                    soak_progress(
                        replies.len(),
                        measure::median(&rates),
                        at.saturating_sub(started_ns),
                        end_ns.saturating_sub(at)
                    )
                );
            }
        }
    }
}

/// A soak's progress line: `soak: 57 replies, median 93.1 tok/s, 1m 10s done, 8m 50s left`.
fn soak_progress(replies: usize, median: Option<f64>, done_ns: u64, left_ns: u64) -> String {
    let whole_s = |ns: u64| humantime::format_duration(Duration::from_secs(ns / 1_000_000_000));
    let median = median.map_or("no rate yet".to_string(), |m| {
        format!("median {m:.1} tok/s")
    });
    format!(
        "soak: {replies} replies, {median}, {} done, {} left",
        whole_s(done_ns),
        whole_s(left_ns)
    )
}
