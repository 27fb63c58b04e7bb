//! The body that sends a scripted reply on time: its steps (bytes after a wait, a dropped
//! connection, a crash, a hang), the reply under way they belong to, and the waits between
//! them, short ones spun or yielded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use tokio::sync::OwnedMutexGuard;

use super::args::EndBy;
use super::footprint::InFlight;
use super::route::Reply;
use super::state::ServeCounts;

/// Spin on the CPU for `d` of wall time: scripted host work.
fn burn(d: Duration) {
    let start = std::time::Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// What the body stream does next.
pub(crate) enum Step {
    /// Wait, then send these bytes.
    Send(Duration, Bytes),
    /// Wait, then send a chunk's bytes that carry this many tokens (the route evidence counts
    /// them).
    Token(Duration, Bytes, usize),
    /// Wait, then drop the connection.
    Die(Duration),
    /// Give the last bytes time to leave, then end the process.
    Crash,
    /// Keep the connection open, sending nothing, until the client goes.
    Hang,
}

/// The steps of a body, in order; without end for the endless faults.
pub(crate) type Steps = Box<dyn Iterator<Item = Step> + Send>;

/// `bytes` over and over, without end.
pub(crate) fn forever(wait: Duration, bytes: Bytes) -> impl Iterator<Item = Step> + Send {
    std::iter::repeat_with(move || Step::Send(wait, bytes.clone()))
}

/// A reply under way, and with `--serial` the turn it holds. Both live as long as the reply's
/// body: the route evidence counts it busy, and the next request waits, until the body ends
/// or its connection goes.
pub(crate) struct Serving {
    /// The route evidence of this reply.
    pub(crate) reply: Reply,
    /// Before `_turn`, so dropped first: the next --serial reply, let in when the turn goes,
    /// must not count this one as under way (--batch-variant would call it batched).
    pub(crate) under_way: UnderWay,
    /// With --serial, the slot this reply holds.
    pub(crate) _turn: Option<OwnedMutexGuard<()>>,
    /// What /metrics reports: the tokens this reply streams are counted.
    pub(crate) counts: Arc<ServeCounts>,
    /// `--end-after-replies`: how the process ends once this reply's body has ended.
    pub(crate) end_after: Option<EndBy>,
    /// The request, in flight until this reply ends: its end is the footprint's (leaks, the
    /// device memory, the start of idle).
    pub(crate) in_flight: InFlight,
}

impl Drop for Serving {
    /// The body has ended (or its connection gone): the footprint counts the reply's end, and
    /// with `--end-after-replies` the process ends a moment later, once the last bytes have
    /// left.
    fn drop(&mut self) {
        self.in_flight.reply_ended();
        let Some(end_by) = self.end_after else { return };
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let _ = crate::console::err_line(&format!("stand-in: ending as scripted ({end_by:?})"));
            match end_by {
                EndBy::Exit => std::process::exit(0),
                EndBy::Segv => {
                    use nix::sys::signal::{raise, signal, SigHandler, Signal};
                    // Rust's own SIGSEGV handler is for stack overflows: the default action
                    // is the crash a broken serve has.
                    // SAFETY: SIG_DFL installs no handler code.
                    let _ = unsafe { signal(Signal::SIGSEGV, SigHandler::SigDfl) };
                    let _ = raise(Signal::SIGSEGV);
                    std::process::abort();
                }
            }
        });
    }
}

impl Serving {
    /// Count `n` more tokens sent: in the route evidence and in /metrics.
    pub(crate) fn tokens(&self, n: usize) {
        self.reply.tokens(n);
        self.counts.tokens.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// One reply counted among those under way, for as long as this lives.
pub(crate) struct UnderWay(Arc<AtomicUsize>);

impl UnderWay {
    /// Count one more reply in `count`.
    pub(crate) fn enter(count: &Arc<AtomicUsize>) -> UnderWay {
        count.fetch_add(1, Ordering::Relaxed);
        UnderWay(Arc::clone(count))
    }

    /// No other reply is under way.
    pub(crate) fn alone(&self) -> bool {
        self.0.load(Ordering::Relaxed) <= 1
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Wait `wait`, under tokio's 1 ms timer. Alone, the stand-in spins, which keeps a 20,000
/// tok/s stream's gaps to the microsecond and costs only the stand-in. Beside other replies
/// it yields to them between looks at the clock instead: the one thread serves every
/// connection, and hyper polls a body again as soon as it gives a chunk, so a spinning stream
/// sent its whole reply before any other got a turn (four streams at 0.2 ms gaps went one
/// after another, at a quarter of the rate asked). Each stream's gap is kept as its own.
///
/// It yields once before anything else, alone or not: a stream spinning alone would keep the
/// requests of a burst from being accepted at all, and so stay alone to its end.
async fn short_wait(wait: Duration, under_way: &UnderWay) {
    let until = std::time::Instant::now() + wait;
    tokio::task::yield_now().await;
    while std::time::Instant::now() < until {
        if under_way.alone() {
            std::hint::spin_loop();
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// The body of `steps`, each written after its wait (and, with `trickle`, a byte at a time).
/// `reply` lives as long as the body.
pub(crate) fn body_of(
    steps: Steps,
    work: Duration,
    trickle: Option<Duration>,
    reply: Serving,
) -> Body {
    let stream =
        futures_util::stream::unfold((steps, reply), move |(mut steps, reply)| async move {
            let (wait, item, tokens) = match steps.next()? {
                Step::Send(wait, bytes) => (wait, Ok(bytes), 0),
                Step::Token(wait, bytes, tokens) => (wait, Ok(bytes), tokens),
                Step::Die(wait) => (
                    wait,
                    Err(std::io::Error::other("the stand-in drops the connection")),
                    0,
                ),
                Step::Crash => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let _ = crate::console::err_line("stand-in: crashing as scripted");
                    std::process::exit(3);
                }
                Step::Hang => {
                    futures_util::future::pending::<()>().await;
                    return None;
                }
            };
            if wait >= Duration::from_millis(1) {
                tokio::time::sleep(wait).await;
            } else if !wait.is_zero() {
                // tokio's timer counts whole milliseconds.
                short_wait(wait, &reply.under_way).await;
            }
            if !work.is_zero() {
                burn(work);
            }
            if tokens > 0 {
                reply.tokens(tokens);
            }
            let stop = item.is_err();
            // After an error the stream ends: hyper aborts the connection mid-body.
            let rest: Steps = if stop {
                Box::new(std::iter::empty())
            } else {
                steps
            };
            Some((item, (rest, reply)))
        });
    let Some(gap) = trickle else {
        return Body::from_stream(stream);
    };
    // A byte at a time: each item's bytes are held and let out one by one.
    let trickled = futures_util::stream::unfold(
        (Box::pin(stream), Bytes::new()),
        move |(mut stream, mut held)| async move {
            use futures_util::StreamExt;
            while held.is_empty() {
                match stream.next().await? {
                    Ok(bytes) => held = bytes,
                    Err(e) => return Some((Err(e), (stream, held))),
                }
            }
            tokio::time::sleep(gap).await;
            let byte = held.split_to(1);
            Some((Ok(byte), (stream, held)))
        },
    );
    Body::from_stream(trickled)
}

/// `--held-back`: the whole answer's time is spent before its first event, and the rest follow
/// 0.1 ms apart (in a few reads, more than one), as from a serve that makes its tokens at their
/// pace and does not flush.
pub(crate) fn hold_back(steps: &mut [Step]) {
    fn wait_of(s: &mut Step) -> Option<&mut Duration> {
        match s {
            Step::Send(w, _) | Step::Token(w, _, _) | Step::Die(w) => Some(w),
            Step::Crash | Step::Hang => None,
        }
    }
    let mut total = Duration::ZERO;
    for s in steps.iter_mut() {
        if let Some(w) = wait_of(s) {
            total += std::mem::replace(w, Duration::from_micros(100));
        }
    }
    if let Some(w) = steps.iter_mut().find_map(wait_of) {
        *w = total;
    }
}
