//! What the stand-in's handlers share: the script, the count of requests and of replies under
//! way, the `--serial` slot, the counts /metrics reports, the trace, the route evidence and the
//! footprint.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::args::StandInArgs;
use super::footprint::Footprint;
use super::route::Route;
use super::trace::Trace;

/// The state every handler shares, one for the server's life.
pub(crate) struct Script {
    /// The script as given.
    pub(crate) args: StandInArgs,
    /// `args` without its faults: the reply of every request `--fault-request` does not pick.
    pub(crate) clean: StandInArgs,
    /// Chat completion requests received so far, over all connections.
    pub(crate) requests: AtomicU64,
    /// Chat completion replies under way (each counted while its body lives): a stream
    /// alone may spin out its sub-millisecond gaps, one beside others must not; /metrics
    /// reports it as the requests processing.
    pub(crate) under_way: Arc<AtomicUsize>,
    /// With `--serial`, the one slot: the reply holding it is the one under way (tokio's lock,
    /// owned, so its guard can live in the reply's body; it also queues waiters in turn).
    pub(crate) serial: Option<Arc<tokio::sync::Mutex<()>>>,
    /// What GET /metrics reports (`--metrics`).
    pub(crate) counts: Arc<ServeCounts>,
    /// With `--trace FILE`, the send trace.
    pub(crate) trace: Option<Arc<Trace>>,
    /// The route evidence the replies leave (`route.rs`).
    pub(crate) route: Arc<Route>,
    /// The memory the replies leave and the requests in flight, for the footprint's leaks and
    /// late first tokens (`footprint.rs`): the whole script's, whichever request
    /// `--fault-request` picks.
    pub(crate) footprint: Arc<Footprint>,
}

/// The stand-in's own counts, as a serve's metrics give them.
#[derive(Debug, Default)]
pub(crate) struct ServeCounts {
    /// Tokens streamed (and those of whole answers), over all replies.
    pub(crate) tokens: AtomicU64,
    /// Requests waiting for the `--serial` slot.
    pub(crate) deferred: std::sync::atomic::AtomicI64,
}

impl Script {
    /// The script of the chat completion request that has just arrived: counted now, so
    /// requests are numbered in the order they reach the handler, whatever their connection.
    /// Its number (from 1) comes with it, for the pacing that changes request by request.
    pub(crate) fn next_request(&self) -> (&StandInArgs, u64) {
        let nth = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let args = match self.args.fault_request {
            Some(k) if k != nth => &self.clean,
            _ => &self.args,
        };
        (args, nth)
    }
}
