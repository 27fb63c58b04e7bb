//! Counting a burst's streams whose first text has arrived, to wake whoever waits for all of
//! them (the scrape of the serve's metrics halfway through a burst). A leaf: the client hands
//! it to the stream's reader, which counts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Counts the streams of a burst whose first text has arrived, and wakes whoever waits for
/// all of them (the scrape of the serve's metrics halfway through a burst).
#[derive(Debug, Clone)]
pub struct FirstText {
    seen: Arc<AtomicUsize>,
    of: usize,
    all: Arc<Notify>,
}

impl FirstText {
    /// For a burst of `of` streams.
    pub fn new(of: usize) -> Self {
        FirstText {
            seen: Arc::default(),
            of,
            all: Arc::new(Notify::new()),
        }
    }

    /// One more stream has its first text.
    pub(crate) fn seen(&self) {
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.of {
            self.all.notify_one();
        }
    }

    /// Wake the waiter now, whatever the count: a stream has ended before all had begun.
    pub fn wake(&self) {
        self.all.notify_one();
    }

    /// Wait until every stream has its first text, or [`FirstText::wake`].
    pub async fn wait(&self) {
        self.all.notified().await;
    }
}
