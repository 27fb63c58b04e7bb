//! The stand-in's send trace: when each request arrived and when each SSE event's last byte
//! was written to the socket.

use std::fs::File;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::clock;
use crate::wire::openai::Chunk;

/// One line of the stand-in's trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TraceLine {
    /// A chat completion request reached the handler.
    Request {
        /// CLOCK_MONOTONIC ns.
        received_ns: u64,
        /// The last user message.
        prompt: String,
    },
    /// An SSE event's last byte was written to the socket.
    Event {
        /// CLOCK_MONOTONIC ns, taken right after the write returned.
        sent_ns: u64,
        /// Characters of `delta.content`.
        content_chars: u32,
        /// Characters of `delta.reasoning_content`.
        reasoning_chars: u32,
        /// `usage.completion_tokens`, on a usage event.
        usage_tokens: Option<u64>,
        /// `[DONE]`.
        done: bool,
        /// Not JSON (the scripted garbage).
        garbage: bool,
    },
}

/// Where trace lines go. Each line is written as it happens: the stand-in is usually ended
/// by a signal, and a buffered trace would be lost.
#[derive(Debug)]
pub(super) struct Trace(pub(super) Mutex<File>);

impl Trace {
    pub(super) fn write(&self, line: &TraceLine) {
        if let (Ok(mut f), Ok(mut text)) = (self.0.lock(), serde_json::to_vec(line)) {
            text.push(b'\n');
            let _ = f.write_all(&text);
        }
    }

    /// Record an event from the bytes between two blank lines, as written.
    fn event(&self, sent_ns: u64, raw: &[u8]) {
        let data = raw
            .windows(6)
            .rposition(|w| w == b"data: ")
            .map(|i| raw[i + 6..].trim_ascii_end());
        let mut line = TraceLine::Event {
            sent_ns,
            content_chars: 0,
            reasoning_chars: 0,
            usage_tokens: None,
            done: false,
            garbage: false,
        };
        if let TraceLine::Event {
            content_chars,
            reasoning_chars,
            usage_tokens,
            done,
            garbage,
            ..
        } = &mut line
        {
            match data.map(|d| (d, Chunk::parse(d))) {
                Some((b"[DONE]", _)) => *done = true,
                Some((_, Ok(c))) => {
                    *content_chars = c.content().chars().count() as u32;
                    *reasoning_chars = c.reasoning().chars().count() as u32;
                    *usage_tokens = c.usage.and_then(|u| u.completion_tokens);
                }
                _ => *garbage = true,
            }
        }
        self.write(&line);
    }
}

/// Accepts connections whose writes are traced.
pub(super) struct TracedListener {
    pub(super) inner: TcpListener,
    pub(super) trace: Option<Arc<Trace>>,
}

impl axum::serve::Listener for TracedListener {
    type Io = TracedStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    // Small writes must leave at once, as a real serve's tokens do.
                    let _ = stream.set_nodelay(true);
                    let io = TracedStream {
                        inner: stream,
                        trace: self.trace.clone(),
                        event: Vec::new(),
                    };
                    return (io, addr);
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that stamps each SSE event when the write holding its last byte returns.
pub(super) struct TracedStream {
    inner: TcpStream,
    trace: Option<Arc<Trace>>,
    /// Bytes written since the last event ended (HTTP framing included).
    event: Vec<u8>,
}

impl TracedStream {
    fn written(&mut self, bytes: &[u8]) {
        let Some(trace) = &self.trace else { return };
        let now = clock::now_ns();
        for &b in bytes {
            self.event.push(b);
            if b == b'\n' && self.event.ends_with(b"\n\n") {
                trace.event(now, &self.event);
                self.event.clear();
            }
        }
        if self.event.len() > 1 << 20 {
            self.event.clear(); // a large non-SSE body; nothing to trace in it
        }
    }
}

impl AsyncRead for TracedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TracedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.written(&buf[..n]);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(mut n)) = r {
            for b in bufs {
                let take = n.min(b.len());
                self.written(&b[..take]);
                n -= take;
                if n == 0 {
                    break;
                }
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
