//! Server-sent events, parsed incrementally and purely over bytes.
//!
//! The network hands us bytes split anywhere: mid-line, mid-`\r\n`, mid-UTF-8 sequence. The
//! parser keeps what it needs between calls and yields an item only when an event is complete
//! (its blank line has arrived), so the caller can stamp each event with the arrival time of the
//! bytes that completed it. Lines that are not SSE at all are reported, not silently skipped as
//! the SSE spec would: a gate must notice a serve that writes garbage into its stream.
//!
//! What it keeps is bounded, whatever the serve sends: a `data:` value goes straight into the
//! event's buffer as it arrives (never held twice), an event's type is kept to
//! [`MAX_EVENT_TYPE`] bytes, a line that is not SSE to its first [`MALFORMED_HEAD`] bytes, and
//! the rest of a comment, `id` or `retry` line not at all. A line longer than the parser's line
//! cap (default [`MAX_LINE`]) or an event whose data passes its event cap (default
//! [`MAX_EVENT`]) is refused with an [`SseError`]: a serve that never ends a line would
//! otherwise hold the gate's memory without end.

use std::fmt;

/// The longest line the parser takes, by default: 16 MiB. A real chunk of 10 MB fits; a line
/// that never ends does not get the gate's memory.
pub const MAX_LINE: usize = 16 << 20;
/// The most data one event may carry, by default: 16 MiB, like a line.
pub const MAX_EVENT: usize = 16 << 20;
/// Bytes of an event's type (`event:`) kept; the rest of a longer type is dropped.
pub const MAX_EVENT_TYPE: usize = 64;
/// Bytes kept of a line that is not SSE, to quote it.
pub const MALFORMED_HEAD: usize = 256;
/// An event buffer that grew past this is let go after its event, not kept for the next: one
/// 10 MB chunk should not hold 10 MB for the rest of the reply.
const KEEP_CAPACITY: usize = 1 << 20;

/// One complete item of a stream, borrowed from the parser until the callback returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseItem<'a> {
    /// One event: its type (the `event:` field, at most [`MAX_EVENT_TYPE`] bytes; empty when it
    /// had none) and its data (its `data:` lines joined with `\n`). Unlike the SSE spec, an
    /// event with a type and no data is yielded too (with empty data): `event: error` alone
    /// is something a gate must see.
    Event {
        /// The `event:` field, empty for the default type.
        kind: &'a [u8],
        /// The `data:` lines, joined with `\n`.
        data: &'a [u8],
    },
    /// A line that is neither blank, a comment, nor a known SSE field: its first
    /// [`MALFORMED_HEAD`] bytes.
    Malformed(&'a [u8]),
}

/// What the parser refuses to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseError {
    /// A line passed the line cap (bytes) without ending.
    LineTooLong {
        /// The cap, in bytes.
        limit: usize,
    },
    /// An event's data passed the event cap (bytes).
    EventTooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::LineTooLong { limit } => write!(
                f,
                "a line of the stream passed {} without ending (the gate's cap on one SSE line)",
                size(*limit)
            ),
            SseError::EventTooLarge { limit } => write!(
                f,
                "an event's data passed {} (the gate's cap on one SSE event)",
                size(*limit)
            ),
        }
    }
}

impl std::error::Error for SseError {}

/// A size for a line a user reads: whole MiB where it is one, else bytes.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// Why a feed stopped: the stream broke a cap, or the callback said stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedError<E> {
    /// The stream passed one of the parser's caps; the parser takes no more.
    Stream(SseError),
    /// The callback's own error, returned as it gave it.
    Item(E),
}

/// What was left when a stream ended before its last event or line was complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfinished {
    /// An event whose blank line never came, or whose last `data:` line was cut off: its data
    /// so far.
    Event(Vec<u8>),
    /// A line that is not SSE, cut off by the end: its first [`MALFORMED_HEAD`] bytes.
    NotSse(Vec<u8>),
}

/// Where the parser is in a line whose end it has not seen yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Within {
    /// The field's name, so far (no colon yet), in `head`.
    #[default]
    Field,
    /// A `data:` value, going into `data`; `at_start`: none of it yet, so the one space SSE
    /// allows after the colon is still to be dropped.
    Data { at_start: bool },
    /// An `event:` value, going into `kind`.
    Kind { at_start: bool },
    /// A line that is not SSE, its first bytes going into `head`.
    Malformed,
    /// Nothing more of this line matters: a comment, `id`, `retry`, or a line already
    /// reported.
    Skip,
}

/// A field's name, as the parser treats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Data,
    Event,
    /// A comment (no name), `id` or `retry`: nothing the gate reads.
    Ignored,
    Unknown,
}

fn field(name: &[u8]) -> Field {
    match name {
        b"data" => Field::Data,
        b"event" => Field::Event,
        b"" | b"id" | b"retry" => Field::Ignored,
        _ => Field::Unknown,
    }
}

/// Incremental SSE parser. Feed it bytes as they arrive; it never needs the whole stream. Its
/// buffers are reused from event to event: at 20,000 events a second an allocation each is a
/// cost the gate would put on the box it measures.
#[derive(Debug)]
pub struct SseParser {
    within: Within,
    /// Bytes of the current line so far, line ending excluded.
    line_len: usize,
    /// The field name so far, or the first bytes of a line that is not SSE.
    head: Vec<u8>,
    /// The event's data so far.
    data: Vec<u8>,
    /// The event has had a `data:` line (its data may still be empty).
    has_data: bool,
    /// The event's type so far.
    kind: Vec<u8>,
    /// The previous byte was `\r`, so a `\n` now is the second half of the same line ending.
    after_cr: bool,
    /// The cap the stream broke; once set, every feed returns it.
    failed: Option<SseError>,
    max_line: usize,
    max_event: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limits(MAX_LINE, MAX_EVENT)
    }
}

impl SseParser {
    /// A parser at the start of a stream, with the default caps.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that refuses a line longer than `max_line` bytes and an event with more than
    /// `max_event` bytes of data.
    pub fn with_limits(max_line: usize, max_event: usize) -> Self {
        SseParser {
            within: Within::Field,
            line_len: 0,
            head: Vec::new(),
            data: Vec::new(),
            has_data: false,
            kind: Vec::new(),
            after_cr: false,
            failed: None,
            max_line,
            max_event,
        }
    }

    /// Consume `bytes`, handing every item they complete to `on_item`, in order. An error from
    /// `on_item` stops the feed and is returned as [`FeedError::Item`]; a cap the stream
    /// passes, as [`FeedError::Stream`], and the parser takes nothing more.
    pub fn feed<E>(
        &mut self,
        mut bytes: &[u8],
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if let Some(e) = self.failed {
            return Err(FeedError::Stream(e));
        }
        // An empty read says nothing about the `\n` that may follow a `\r`.
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(i) = memchr::memchr2(b'\n', b'\r', bytes) {
            let (head, ending, mut rest) = (&bytes[..i], bytes[i], &bytes[i + 1..]);
            self.take(head, on_item)?;
            self.end_line(on_item)?;
            if ending == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            bytes = rest;
        }
        self.take(bytes, on_item)
    }

    /// What was left when the stream ended: an event whose blank line never came, or a line
    /// cut off. `None` when the stream ended cleanly between events (or the parser had
    /// already refused it).
    pub fn finish(self) -> Option<Unfinished> {
        if self.failed.is_some() {
            return None;
        }
        if self.line_len > 0 {
            let not_sse = match self.within {
                Within::Malformed => true,
                // A name cut off is SSE if it could still have become one.
                Within::Field => ![&b"data"[..], b"event", b"id", b"retry"]
                    .iter()
                    .any(|name| name.starts_with(&self.head)),
                _ => false,
            };
            return Some(if not_sse {
                Unfinished::NotSse(self.head)
            } else {
                Unfinished::Event(self.data)
            });
        }
        (self.has_data || !self.kind.is_empty()).then_some(Unfinished::Event(self.data))
    }

    fn fail<E>(&mut self, e: SseError) -> FeedError<E> {
        self.failed = Some(e);
        FeedError::Stream(e)
    }

    /// Take `bytes` of the current line (no line ending in them).
    fn take<E>(
        &mut self,
        bytes: &[u8],
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if bytes.is_empty() {
            return Ok(());
        }
        // The bytes up to the cap are taken first, so that what the line yields before it is
        // refused does not depend on how its bytes were split.
        let fit = self.max_line - self.line_len;
        if bytes.len() > fit {
            self.take_within_cap(&bytes[..fit], on_item)?;
            return Err(self.fail(SseError::LineTooLong {
                limit: self.max_line,
            }));
        }
        self.take_within_cap(bytes, on_item)
    }

    fn take_within_cap<E>(
        &mut self,
        mut bytes: &[u8],
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.line_len += bytes.len();
        // Each turn either returns or moves on from Field, so this runs at most twice.
        loop {
            match self.within {
                Within::Field => {
                    let Some(colon) = memchr::memchr(b':', bytes) else {
                        self.keep_head(bytes);
                        // No known field is this long: the line is not SSE.
                        return self.report_if_head_full(on_item);
                    };
                    let name = if self.head.is_empty() {
                        field(&bytes[..colon])
                    } else {
                        self.keep_head(&bytes[..colon]);
                        field(&self.head)
                    };
                    match name {
                        Field::Data => {
                            if self.has_data {
                                self.push_data(b"\n")?;
                            }
                            self.has_data = true;
                            self.within = Within::Data { at_start: true };
                            bytes = &bytes[colon + 1..];
                        }
                        Field::Event => {
                            self.kind.clear();
                            self.within = Within::Kind { at_start: true };
                            bytes = &bytes[colon + 1..];
                        }
                        Field::Ignored => {
                            self.within = Within::Skip;
                            return Ok(());
                        }
                        Field::Unknown => {
                            if self.head.is_empty() {
                                self.keep_head(&bytes[..colon]);
                            }
                            self.within = Within::Malformed;
                            bytes = &bytes[colon..];
                        }
                    }
                }
                Within::Data { at_start } => {
                    if at_start && !bytes.is_empty() {
                        self.within = Within::Data { at_start: false };
                        bytes = bytes.strip_prefix(b" ").unwrap_or(bytes);
                    }
                    return self.push_data(bytes);
                }
                Within::Kind { at_start } => {
                    if at_start && !bytes.is_empty() {
                        self.within = Within::Kind { at_start: false };
                        bytes = bytes.strip_prefix(b" ").unwrap_or(bytes);
                    }
                    let room = MAX_EVENT_TYPE - self.kind.len();
                    self.kind.extend_from_slice(&bytes[..bytes.len().min(room)]);
                    return Ok(());
                }
                Within::Malformed => {
                    self.keep_head(bytes);
                    return self.report_if_head_full(on_item);
                }
                Within::Skip => return Ok(()),
            }
        }
    }

    /// Keep what fits of `bytes` in `head`.
    fn keep_head(&mut self, bytes: &[u8]) {
        let room = MALFORMED_HEAD - self.head.len();
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// A line that is not SSE is reported as soon as its head is full, and the rest of it
    /// skipped: nothing more of it would be kept anyway.
    fn report_if_head_full<E>(
        &mut self,
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if self.head.len() < MALFORMED_HEAD {
            return Ok(());
        }
        self.within = Within::Skip;
        on_item(SseItem::Malformed(&self.head)).map_err(FeedError::Item)
    }

    fn push_data<E>(&mut self, bytes: &[u8]) -> Result<(), FeedError<E>> {
        if self.data.len() + bytes.len() > self.max_event {
            return Err(self.fail(SseError::EventTooLarge {
                limit: self.max_event,
            }));
        }
        self.data.extend_from_slice(bytes);
        Ok(())
    }

    /// The current line has ended.
    fn end_line<E>(
        &mut self,
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        let within = std::mem::take(&mut self.within);
        let blank = std::mem::replace(&mut self.line_len, 0) == 0;
        let r = match within {
            Within::Field if blank => self.dispatch(on_item),
            // A name with no colon: the field, with an empty value.
            Within::Field => match field(&self.head) {
                Field::Data => {
                    let r = if self.has_data {
                        self.push_data(b"\n")
                    } else {
                        Ok(())
                    };
                    self.has_data = true;
                    r
                }
                Field::Event => {
                    self.kind.clear();
                    Ok(())
                }
                Field::Ignored => Ok(()),
                Field::Unknown => on_item(SseItem::Malformed(&self.head)).map_err(FeedError::Item),
            },
            Within::Malformed => on_item(SseItem::Malformed(&self.head)).map_err(FeedError::Item),
            Within::Data { .. } | Within::Kind { .. } | Within::Skip => Ok(()),
        };
        self.head.clear();
        r
    }

    /// A blank line: the event so far, if there is one, is complete.
    fn dispatch<E>(
        &mut self,
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if !self.has_data && self.kind.is_empty() {
            return Ok(());
        }
        let r = on_item(SseItem::Event {
            kind: &self.kind,
            data: &self.data,
        });
        self.has_data = false;
        self.kind.clear();
        if self.data.capacity() > KEEP_CAPACITY {
            self.data = Vec::new();
        } else {
            self.data.clear();
        }
        r.map_err(FeedError::Item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An item, owned, for comparing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Owned {
        Event(Vec<u8>, Vec<u8>),
        Malformed(Vec<u8>),
    }

    /// Items, and the cap the stream broke if it broke one, and what was left.
    type Parsed = (Vec<Owned>, Option<SseError>, Option<Unfinished>);

    fn parse_with(mut p: SseParser, chunks: &[&[u8]]) -> Parsed {
        let mut out = Vec::new();
        for c in chunks {
            let fed = p.feed(c, &mut |item| {
                out.push(match item {
                    SseItem::Event { kind, data } => Owned::Event(kind.to_vec(), data.to_vec()),
                    SseItem::Malformed(l) => Owned::Malformed(l.to_vec()),
                });
                Ok::<(), ()>(())
            });
            match fed {
                Ok(()) => {}
                Err(FeedError::Stream(e)) => {
                    // A parser that refused the stream refuses whatever comes after.
                    assert_eq!(
                        p.feed(b"data: x\n\n", &mut |_| Ok::<(), ()>(())),
                        Err(FeedError::Stream(e))
                    );
                    return (out, Some(e), p.finish());
                }
                Err(FeedError::Item(())) => unreachable!(),
            }
        }
        (out, None, p.finish())
    }

    fn parse_all(chunks: &[&[u8]]) -> (Vec<Owned>, Option<Unfinished>) {
        let (items, err, rest) = parse_with(SseParser::new(), chunks);
        assert_eq!(err, None);
        (items, rest)
    }

    fn data(s: &str) -> Owned {
        Owned::Event(Vec::new(), s.as_bytes().to_vec())
    }

    fn typed(kind: &str, s: &str) -> Owned {
        Owned::Event(kind.as_bytes().to_vec(), s.as_bytes().to_vec())
    }

    /// A typed event after untyped ones, in one read and split anywhere, as a serve writes
    /// an error after some tokens.
    #[test]
    fn a_typed_event_after_plain_ones_keeps_its_type() {
        let text: &[u8] = b"data: {\"a\":1}\n\nevent: error\ndata: {\"detail\": \"NPU hang\"}\n\ndata: [DONE]\n\n";
        let want = vec![
            data("{\"a\":1}"),
            typed("error", "{\"detail\": \"NPU hang\"}"),
            data("[DONE]"),
        ];
        assert_eq!(parse_all(&[text]).0, want);
        for cut in 0..text.len() {
            assert_eq!(
                parse_all(&[&text[..cut], &text[cut..]]).0,
                want,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn two_events_in_one_read() {
        let (items, rest) = parse_all(&[b"data: {\"a\":1}\n\ndata: [DONE]\n\n"]);
        assert_eq!(items, vec![data("{\"a\":1}"), data("[DONE]")]);
        assert_eq!(rest, None);
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_ending() {
        let (items, _) = parse_all(&[b"data: x\r", b"\n\r", b"\n"]);
        assert_eq!(items, vec![data("x")]);
    }

    #[test]
    fn an_empty_read_between_cr_and_lf_is_no_blank_line() {
        let (items, _) = parse_all(&[b"data: x\r", b"", b"\nid: 1\r\n\r\n"]);
        assert_eq!(items, vec![data("x")]);
        let (items, _) = parse_all(&[b"data: x\r", b"", b"\n"]);
        assert!(items.is_empty(), "{items:?}");
    }

    #[test]
    fn bare_cr_ends_lines() {
        let (items, _) = parse_all(&[b"data: x\r\rdata: y\r\r"]);
        assert_eq!(items, vec![data("x"), data("y")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newline() {
        let (items, _) = parse_all(&[b"data: a\ndata:b\ndata\n\n"]);
        assert_eq!(items, vec![data("a\nb\n")]);
    }

    #[test]
    fn comments_id_and_retry_are_skipped_and_the_type_is_kept() {
        let (items, _) =
            parse_all(&[b": keep-alive\nevent: x\nid: 3\nretry: 10\ndata: y\n\ndata: z\n\n"]);
        assert_eq!(items, vec![typed("x", "y"), data("z")]);
    }

    #[test]
    fn an_event_with_a_type_and_no_data_is_yielded() {
        let (items, _) = parse_all(&[b"event: error\n\n: just a comment\n\nevent\n\n"]);
        assert_eq!(items, vec![typed("error", "")]);
    }

    #[test]
    fn a_long_type_is_cut_to_its_first_bytes() {
        let long = format!("event: {}\ndata: d\n\n", "e".repeat(1000));
        let (items, _) = parse_all(&[long.as_bytes()]);
        assert_eq!(items, vec![typed(&"e".repeat(MAX_EVENT_TYPE), "d")]);
    }

    #[test]
    fn a_line_that_is_not_sse_is_reported() {
        let (items, _) = parse_all(&[b"data: a\n\n{garbage\n{\"id\":\"x\"}\n"]);
        assert_eq!(
            items,
            vec![
                data("a"),
                Owned::Malformed(b"{garbage".to_vec()),
                Owned::Malformed(b"{\"id\":\"x\"}".to_vec())
            ]
        );
    }

    #[test]
    fn a_long_line_that_is_not_sse_is_reported_by_its_head_before_it_ends() {
        let mut p = SseParser::new();
        let mut seen = Vec::new();
        let line = vec![b'x'; 10 * MALFORMED_HEAD];
        p.feed(&line, &mut |item| {
            seen.push(format!("{item:?}").len());
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(
            seen.len(),
            1,
            "reported once its head is full, not at its end"
        );
        let (items, _) = parse_all(&[&line, b":and more\ndata: after\n\n"]);
        assert_eq!(
            items,
            vec![Owned::Malformed(vec![b'x'; MALFORMED_HEAD]), data("after")]
        );
    }

    #[test]
    fn an_event_cut_off_is_left_over_not_yielded() {
        let (items, rest) = parse_all(&[b"data: a\n\ndata: {\"tru"]);
        assert_eq!(items, vec![data("a")]);
        assert_eq!(rest, Some(Unfinished::Event(b"{\"tru".to_vec())));
        let (_, rest) = parse_all(&[b"data: a\n\nda"]);
        assert_eq!(rest, Some(Unfinished::Event(Vec::new())), "a name cut off");
    }

    #[test]
    fn an_event_without_its_blank_line_is_left_over() {
        let (items, rest) = parse_all(&[b"data: a\n"]);
        assert!(items.is_empty());
        assert_eq!(rest, Some(Unfinished::Event(b"a".to_vec())));
    }

    #[test]
    fn a_body_that_is_not_sse_is_left_over_as_such() {
        // A non-streaming answer: one JSON object, no newline.
        let (items, rest) = parse_all(&[b"{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\"}"]);
        assert!(items.is_empty());
        assert_eq!(
            rest,
            Some(Unfinished::NotSse(
                b"{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\"}".to_vec()
            ))
        );
        let (_, rest) = parse_all(&[b"<html>"]);
        assert_eq!(rest, Some(Unfinished::NotSse(b"<html>".to_vec())));
    }

    #[test]
    fn an_error_from_the_callback_stops_the_feed() {
        let mut p = SseParser::new();
        let mut seen = 0;
        let r = p.feed(b"data: a\n\ndata: b\n\n", &mut |_| {
            seen += 1;
            Err("stop")
        });
        assert_eq!((r, seen), (Err(FeedError::Item("stop")), 1));
    }

    #[test]
    fn blank_lines_alone_yield_nothing() {
        let (items, rest) = parse_all(&[b"\n\n\r\n"]);
        assert!(items.is_empty());
        assert_eq!(rest, None);
    }

    #[test]
    fn a_line_past_its_cap_is_refused_and_what_came_before_is_kept() {
        let p = SseParser::with_limits(16, 1000);
        let (items, err, _) = parse_with(p, &[b"data: ok\n\ndata: ", &[b'x'; 11]]);
        assert_eq!(items, vec![data("ok")]);
        assert_eq!(err, Some(SseError::LineTooLong { limit: 16 }));
        // Exactly at the cap is taken.
        let p = SseParser::with_limits(16, 1000);
        let (items, err, _) = parse_with(p, &[b"data: xxxxxxxxxx\n\n"]);
        assert_eq!((items, err), (vec![data("xxxxxxxxxx")], None));
        // A comment is not kept, but it is a line all the same.
        let p = SseParser::with_limits(16, 1000);
        let (_, err, _) = parse_with(p, &[b": ", &[b'c'; 100]]);
        assert_eq!(err, Some(SseError::LineTooLong { limit: 16 }));
    }

    #[test]
    fn an_event_past_its_cap_is_refused() {
        let p = SseParser::with_limits(100, 10);
        let (items, err, _) = parse_with(p, &[b"data: 12345\ndata: 6789\n\n"]);
        assert_eq!((items, err), (vec![data("12345\n6789")], None));
        let p = SseParser::with_limits(100, 10);
        let (items, err, _) = parse_with(p, &[b"data: 12345\ndata: 67890\n\n"]);
        assert_eq!(
            (items, err),
            (vec![], Some(SseError::EventTooLarge { limit: 10 }))
        );
    }

    #[test]
    fn the_caps_say_what_they_are() {
        assert_eq!(
            SseError::LineTooLong { limit: MAX_LINE }.to_string(),
            "a line of the stream passed 16 MiB without ending (the gate's cap on one SSE line)"
        );
        assert_eq!(
            SseError::EventTooLarge { limit: 10 }.to_string(),
            "an event's data passed 10 bytes (the gate's cap on one SSE event)"
        );
    }

    #[test]
    fn a_data_line_larger_than_a_read_is_kept_once_in_pieces() {
        let value = vec![b'v'; 100_000];
        let mut stream = b"data: ".to_vec();
        stream.extend_from_slice(&value);
        stream.extend_from_slice(b"\n\n");
        let pieces: Vec<&[u8]> = stream.chunks(4096).collect();
        let (items, _) = parse_all(&pieces);
        assert_eq!(items, vec![Owned::Event(Vec::new(), value)]);
    }

    /// One line of a stream as a serve might write it, good or bad.
    fn arb_line() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[ -~]{0,20}".prop_map(|v| format!("data: {v}")),
            1 => "[ -~]{0,20}".prop_map(|v| format!("data:{v}")),
            1 => Just("data".to_string()),
            1 => "[a-z]{0,8}".prop_map(|v| format!("event: {v}")),
            1 => "[ -~]{0,20}".prop_map(|v| format!(": {v}")),
            1 => Just("id: 7".to_string()),
            1 => Just("retry".to_string()),
            1 => "[ -~]{0,40}".prop_map(|v| format!("x{v}")),
            1 => "[a-z]{0,300}".prop_map(|v| format!("data: {v}")),
            1 => "[a-z]{250,300}".prop_map(|v| v.to_string()),
            1 => Just(String::new()),
        ]
    }

    fn split<'a>(bytes: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut pieces = Vec::new();
        let mut last = 0;
        for p in points {
            pieces.push(&bytes[last..p]);
            last = p;
        }
        pieces.push(&bytes[last..]);
        pieces
    }

    proptest! {
        /// However the bytes are split, the items are the same as from one read.
        #[test]
        fn splits_do_not_change_the_items(
            events in proptest::collection::vec("[ -~]{0,20}", 0..6),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut text = String::new();
            for e in &events {
                text.push_str(&format!("data: {e}{eol}{eol}"));
            }
            let bytes = text.as_bytes();
            let (whole, _) = parse_all(&[bytes]);
            let (split, rest) = parse_all(&split(bytes, &cuts));
            prop_assert_eq!(&whole, &split);
            prop_assert_eq!(rest, None);
            let expected: Vec<Owned> = events.iter().map(|e| data(e)).collect();
            prop_assert_eq!(whole, expected);
        }

        /// Any mix of lines, good and bad, with the caps small enough to be reached: the
        /// items, the cap broken and what is left do not depend on the splits.
        #[test]
        fn splits_do_not_change_what_any_stream_gives(
            lines in proptest::collection::vec(arb_line(), 0..12),
            eol in prop::sample::select(vec!["\n", "\r\n", "\r"]),
            cut_last in any::<bool>(),
            caps in (200usize..400, 50usize..400),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let mut text = lines.join(eol);
            if !cut_last {
                text.push_str(eol);
            }
            let bytes = text.as_bytes();
            let parser = || SseParser::with_limits(caps.0, caps.1);
            let whole = parse_with(parser(), &[bytes]);
            prop_assert_eq!(&whole, &parse_with(parser(), &split(bytes, &cuts)));
            // And one byte at a time.
            let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
            prop_assert_eq!(&whole, &parse_with(parser(), &bytewise));
        }

        /// Garbage never panics the parser.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512), cut in 0usize..512) {
            let cut = cut.min(bytes.len());
            let _ = parse_with(SseParser::with_limits(64, 64), &[&bytes[..cut], &bytes[cut..]]);
            let _ = parse_with(SseParser::new(), &[&bytes[..cut], &bytes[cut..]]);
        }
    }
}
