//! The signals that interrupt a run: SIGTERM, SIGINT and SIGHUP.
//!
//! Once registered, they no longer kill the gate outright: the run stops what it is doing,
//! stops the serve, keeps what it recorded and says `RESULT: INTERRUPTED`. A second one during
//! that cleanup kills the serve at once.

use anyhow::{Context, Result};
use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// Registered handlers for the interrupting signals.
#[derive(Debug)]
pub struct Interrupts {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Interrupts {
    /// Take over SIGTERM, SIGINT and SIGHUP. Needs a running tokio runtime.
    pub fn register() -> Result<Self> {
        let make = |kind: SignalKind| signal(kind).context("failed to handle signals");
        Ok(Interrupts {
            term: make(SignalKind::terminate())?,
            int: make(SignalKind::interrupt())?,
            hup: make(SignalKind::hangup())?,
        })
    }

    /// The next interrupting signal.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}
