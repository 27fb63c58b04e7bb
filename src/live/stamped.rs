//! A TCP stream that stamps each read on the gate's clock the moment it returns.
//!
//! hyper 1 reads the socket only when its buffer is empty, and decodes at most one chunk ahead
//! of the one its reader takes; an SSE event is complete in the chunk that carries its last
//! bytes. So the last read before an event is handed over is the read that completed it: its
//! stamp is when the event's bytes arrived, however long the events before it in the same read
//! took to parse. One clock reading a read, not one an event: at 20,000 tokens a second a read
//! carries a dozen of them. (The self-test's comparison with the stand-in's send trace would
//! show a hyper that read ahead.)

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::clock;

/// A [`TcpStream`] whose reads are stamped, and its writes.
#[derive(Debug)]
pub struct StampedStream {
    inner: TcpStream,
    last_read: ReadStamp,
    last_write: ReadStamp,
}

/// The stamps of a [`StampedStream`]: its last read that returned bytes, and its last write
/// that took some (a client's request is its writes: their stamp, once the answer is in, is
/// when the request was written).
#[derive(Debug, Clone, Default)]
pub struct Stamps {
    /// The last read that returned bytes.
    pub read: ReadStamp,
    /// The last write that took bytes.
    pub write: ReadStamp,
}

/// When the stream's last read that returned bytes did so (ns on CLOCK_MONOTONIC; 0 before
/// any). Shared with whoever handles what was read.
#[derive(Debug, Clone, Default)]
pub struct ReadStamp(Arc<AtomicU64>);

impl ReadStamp {
    /// The stamp of the last read that returned bytes, 0 before any.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl StampedStream {
    /// Wrap `inner`; each stamp reads 0 until the first bytes go its way.
    pub fn new(inner: TcpStream) -> (Self, Stamps) {
        let stamps = Stamps::default();
        let stream = StampedStream {
            inner,
            last_read: stamps.read.clone(),
            last_write: stamps.write.clone(),
        };
        (stream, stamps)
    }
}

impl StampedStream {
    fn stamp_write(&self, wrote: &Poll<io::Result<usize>>) {
        if matches!(wrote, Poll::Ready(Ok(n)) if *n > 0) {
            self.last_write.0.store(clock::now_ns(), Ordering::Relaxed);
        }
    }
}

impl AsyncRead for StampedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.last_read.0.store(clock::now_ns(), Ordering::Relaxed);
        }
        read
    }
}

impl AsyncWrite for StampedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let wrote = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.stamp_write(&wrote);
        wrote
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let wrote = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.stamp_write(&wrote);
        wrote
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The stamp moves when bytes arrive and only then; it lies between the clock readings
    /// taken around the read.
    #[test]
    fn a_read_that_returns_bytes_is_stamped_between_the_readings_around_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
            let (mut stream, stamps) = StampedStream::new(client.unwrap());
            let stamp = stamps.read;
            let (mut server, _) = accepted.unwrap();
            assert_eq!(stamp.get(), 0, "stamped before any read");

            server.write_all(b"first").await.unwrap();
            let mut buf = [0u8; 16];
            let before = clock::now_ns();
            let n = stream.read(&mut buf).await.unwrap();
            let after = clock::now_ns();
            assert_eq!(&buf[..n], b"first");
            let first = stamp.get();
            assert!(
                before <= first && first <= after,
                "{before} {first} {after}"
            );

            assert_eq!(stamps.write.get(), 0, "a read stamped as a write");
            let before = clock::now_ns();
            stream.write_all(b"not stamped").await.unwrap();
            let after = clock::now_ns();
            let mut got = [0u8; 11];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"not stamped");
            assert_eq!(stamp.get(), first, "a write moved the read stamp");
            let wrote = stamps.write.get();
            assert!(
                before <= wrote && wrote <= after,
                "{before} {wrote} {after}"
            );

            drop(server);
            assert_eq!(stream.read(&mut buf).await.unwrap(), 0, "end of stream");
            assert_eq!(stamp.get(), first, "an empty read moved the stamp");
        });
    }
}
