//! The stand-in's send trace: when each request arrived and when each SSE event's last byte
//! was written to the socket, each line naming its connection so that concurrent streams can
//! be told apart.

use std::fs::File;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::serve::IncomingStream;
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
        /// The connection it came on (see [`ConnId`]); 0 in traces from before connections
        /// were numbered.
        #[serde(default)]
        conn: u64,
        /// Its `x-request-id` header, at most [`REQUEST_ID_MAX`] bytes of it; absent when it
        /// had none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// The last user message.
        prompt: String,
        /// The request's `temperature`, as it came; absent when it had none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<serde_json::Value>,
        /// The request's `seed`, as it came; absent when it had none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seed: Option<serde_json::Value>,
    },
    /// A word of a reply's answer was changed by a scripted fault (`--change-word`,
    /// `--batch-variant`): what the stand-in really did, for a test to hold the gate's
    /// determinism report to. Written when the reply is made, after its request's line and
    /// before its first event. A word both faults pick is changed once, and has a line for
    /// each.
    Altered {
        /// The connection the reply goes on.
        conn: u64,
        /// The chat completion request's number, from 1 in arrival order (as
        /// `--fault-request` counts).
        nth: u64,
        /// The word's place among the answer's words (`content` only, reasoning not counted),
        /// from 1.
        word: usize,
        /// The word as the clean reply has it, without its whitespace.
        from: String,
        /// The word as this reply has it.
        to: String,
        /// Which fault changed it.
        why: AlteredBy,
    },
    /// An SSE event's last byte was written to the socket.
    Event {
        /// CLOCK_MONOTONIC ns, taken right after the write returned.
        sent_ns: u64,
        /// The connection it was written on; 0 in traces from before connections were
        /// numbered.
        #[serde(default)]
        conn: u64,
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

/// The fault that changed a word of a reply (a [`TraceLine::Altered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlteredBy {
    /// `--change-word`: a seeded draw picked this request and this word.
    ChangeWord,
    /// `--batch-variant`: the reply started while another was under way; its last word.
    BatchVariant,
}

/// A request field the trace keeps as it came when it is a number (a `temperature`, a
/// `seed`), and otherwise only as what it was: a client's string or object must not make the
/// trace's lines as long as it likes.
pub(crate) fn traced_number(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let kind = match v {
        Value::Number(_) => return v.clone(),
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    Value::String(format!("not a number: {kind}"))
}

/// The most of a request's `x-request-id` a trace line keeps: the gate's ids are short, and a
/// client's header must not make the trace's lines as long as it likes.
pub const REQUEST_ID_MAX: usize = 200;

/// A request's `x-request-id`, cut to at most [`REQUEST_ID_MAX`] bytes on a character
/// boundary (bytes that are not UTF-8 are replaced, not refused: the trace records what came).
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("x-request-id")?;
    let mut id = String::from_utf8_lossy(value.as_bytes()).into_owned();
    let mut end = id.len().min(REQUEST_ID_MAX);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    id.truncate(end);
    Some(id)
}

/// Where trace lines go. Each line is written as it happens: the stand-in is usually ended
/// by a signal, and a buffered trace would be lost.
#[derive(Debug)]
pub(crate) struct Trace(pub(crate) Mutex<File>);

impl Trace {
    pub(crate) fn write(&self, line: &TraceLine) {
        if let (Ok(mut f), Ok(mut text)) = (self.0.lock(), serde_json::to_vec(line)) {
            text.push(b'\n');
            let _ = f.write_all(&text);
        }
    }

    /// Record an event from the bytes between two blank lines, as written.
    fn event(&self, sent_ns: u64, conn: u64, raw: &[u8]) {
        let data = raw
            .windows(6)
            .rposition(|w| w == b"data: ")
            .map(|i| raw[i + 6..].trim_ascii_end());
        let mut line = TraceLine::Event {
            sent_ns,
            conn,
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

/// The number of a connection, from 1 in the order the listener accepted them. It is the
/// handler's connect info, so a request's trace line names the connection its events are
/// written on: with concurrent streams the events of several replies interleave in the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnId(pub(crate) u64);

impl axum::extract::connect_info::Connected<IncomingStream<'_, TracedListener>> for ConnId {
    fn connect_info(stream: IncomingStream<'_, TracedListener>) -> ConnId {
        ConnId(stream.io().conn)
    }
}

/// Accepts connections whose writes are traced.
pub(crate) struct TracedListener {
    inner: TcpListener,
    trace: Option<Arc<Trace>>,
    /// Connections accepted so far.
    accepted: u64,
}

impl TracedListener {
    pub(crate) fn new(inner: TcpListener, trace: Option<Arc<Trace>>) -> TracedListener {
        TracedListener {
            inner,
            trace,
            accepted: 0,
        }
    }
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
                    self.accepted += 1;
                    let io = TracedStream {
                        inner: stream,
                        conn: self.accepted,
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
pub(crate) struct TracedStream {
    inner: TcpStream,
    /// Its number, as [`ConnId`] gives it to the handler.
    conn: u64,
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
                trace.event(now, self.conn, &self.event);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_from_before_connections_were_numbered_still_parse() {
        let request: TraceLine =
            serde_json::from_str(r#"{"kind":"request","received_ns":5,"prompt":"hi"}"#).unwrap();
        assert_eq!(
            request,
            TraceLine::Request {
                received_ns: 5,
                conn: 0,
                request_id: None,
                prompt: "hi".into(),
                temperature: None,
                seed: None,
            }
        );
        let event: TraceLine = serde_json::from_str(
            r#"{"kind":"event","sent_ns":6,"content_chars":1,"reasoning_chars":0,"usage_tokens":null,"done":false,"garbage":false}"#,
        )
        .unwrap();
        assert!(
            matches!(event, TraceLine::Event { conn: 0, .. }),
            "{event:?}"
        );
    }

    #[test]
    fn an_altered_line_reads_back_with_its_kind_and_fault_in_kebab_case() {
        let line = TraceLine::Altered {
            conn: 3,
            nth: 7,
            word: 1,
            from: "Paris.".into(),
            to: "siraP.".into(),
            why: AlteredBy::BatchVariant,
        };
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"altered","conn":3,"nth":7,"word":1,"from":"Paris.","to":"siraP.","why":"batch-variant"}"#
        );
        assert_eq!(serde_json::from_str::<TraceLine>(&text).unwrap(), line);
    }

    #[test]
    fn a_request_field_is_traced_as_it_came_only_when_a_number() {
        use serde_json::json;
        assert_eq!(traced_number(&json!(0)), json!(0));
        assert_eq!(traced_number(&json!(0.7)), json!(0.7));
        assert_eq!(traced_number(&json!(42)), json!(42));
        let long = json!("x".repeat(1 << 20));
        assert_eq!(traced_number(&long), json!("not a number: a string"));
        assert_eq!(
            traced_number(&json!({"a": [1]})),
            json!("not a number: an object")
        );
    }

    #[test]
    fn a_request_without_an_id_has_none_in_its_line() {
        let line = TraceLine::Request {
            received_ns: 1,
            conn: 2,
            request_id: None,
            prompt: String::new(),
            temperature: None,
            seed: None,
        };
        let text = serde_json::to_string(&line).unwrap();
        assert!(!text.contains("request_id"), "{text}");
        assert_eq!(request_id(&HeaderMap::new()), None);
    }

    #[test]
    fn a_request_id_is_kept_whole_up_to_its_cap_and_cut_on_a_character() {
        let with = |v: &[u8]| {
            let mut h = HeaderMap::new();
            h.insert(
                "x-request-id",
                axum::http::HeaderValue::from_bytes(v).unwrap(),
            );
            request_id(&h).unwrap()
        };
        assert_eq!(with(b"npu-serve-smoke-3"), "npu-serve-smoke-3");
        let long = "a".repeat(REQUEST_ID_MAX + 50);
        assert_eq!(with(long.as_bytes()), long[..REQUEST_ID_MAX]);
        // 199 bytes, then a 2-byte character that would end past the cap: it is left out.
        let mut cut = "b".repeat(REQUEST_ID_MAX - 1).into_bytes();
        cut.extend_from_slice("é".as_bytes());
        assert_eq!(with(&cut), "b".repeat(REQUEST_ID_MAX - 1));
        // Not UTF-8: replaced, so the line is still JSON.
        assert_eq!(with(b"id-\xff"), "id-\u{fffd}");
    }
}
