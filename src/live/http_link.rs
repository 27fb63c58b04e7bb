//! One request's connection (hyper's HTTP/1 connection over the stamped socket), polled by
//! whoever waits for the request, and an error's causes on one line. A leaf: the client opens
//! links, the stream's reader polls them.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http1::Connection;
use hyper_util::rt::TokioIo;

use crate::live::stamped::StampedStream;

/// One request's connection, polled by whoever waits for the request, which no other task
/// runs. Once it has ended it is dropped, not polled again.
pub(crate) struct Link(Option<Pin<Box<Conn>>>);

pub(crate) type Conn = Connection<TokioIo<StampedStream>, Full<Bytes>>;

impl Link {
    /// A link polling `conn`.
    pub(crate) fn new(conn: Conn) -> Link {
        Link(Some(Box::pin(conn)))
    }

    /// Let the connection read, write and decode what it can. Its end is not the request's:
    /// hyper reports that, or the error, through the response and its body.
    pub(crate) fn poll(&mut self, cx: &mut std::task::Context<'_>) {
        if let Some(conn) = self.0.as_mut() {
            if conn.as_mut().poll(cx).is_ready() {
                self.0 = None;
            }
        }
    }

    /// Wait for `work` while polling the connection it needs.
    pub(crate) async fn alongside<T>(&mut self, work: impl Future<Output = T>) -> T {
        let mut work = pin!(work);
        poll_fn(|cx| {
            self.poll(cx);
            work.as_mut().poll(cx)
        })
        .await
    }
}

/// An error and its causes on one line: hyper's top-level message alone says little.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}
