//! Server-sent events, parsed incrementally and purely over bytes.
//!
//! The network hands us bytes split anywhere: mid-line, mid-`\r\n`, mid-UTF-8 sequence. The
//! parser keeps what it needs between calls and yields an item only when an event is complete
//! (its blank line has arrived), so the caller can stamp each event with the arrival time of the
//! bytes that completed it. Lines that are not SSE at all are reported, not silently skipped as
//! the SSE spec would: a gate must notice a serve that writes garbage into its stream.

/// One complete item of a stream, borrowed from the parser until the callback returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseItem<'a> {
    /// The data of one event: its `data:` lines joined with `\n`.
    Data(&'a [u8]),
    /// A line that is neither blank, a comment, nor a known SSE field.
    Malformed(&'a [u8]),
}

/// Incremental SSE parser. Feed it bytes as they arrive; it never needs the whole stream. Its
/// buffers are reused from event to event: at 20,000 events a second an allocation each is a
/// cost the gate would put on the box it measures.
#[derive(Debug, Default)]
pub struct SseParser {
    /// A line not yet ended by the bytes so far.
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous byte was `\r`, so a `\n` now is the second half of the same line ending.
    after_cr: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Consume `bytes`, handing every item they complete to `on_item`, in order. An error from
    /// `on_item` stops the feed and is returned.
    pub fn feed<E>(
        &mut self,
        mut bytes: &[u8],
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(i) = memchr::memchr2(b'\n', b'\r', bytes) {
            let (head, ending, mut rest) = (&bytes[..i], bytes[i], &bytes[i + 1..]);
            if self.line.is_empty() {
                self.end_line(head, on_item)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                let r = self.end_line(&line, on_item);
                line.clear();
                self.line = line;
                r?;
            }
            if ending == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            bytes = rest;
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// What was left when the stream ended: a partial line or an event whose blank line never
    /// came. `None` when the stream ended cleanly between events.
    pub fn finish(self) -> Option<Vec<u8>> {
        if !self.line.is_empty() {
            let mut rest = self.data;
            if self.has_data {
                rest.push(b'\n');
            }
            rest.extend_from_slice(&self.line);
            Some(rest)
        } else if self.has_data {
            Some(self.data)
        } else {
            None
        }
    }

    fn end_line<E>(
        &mut self,
        line: &[u8],
        on_item: &mut impl FnMut(SseItem<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if line.is_empty() {
            if self.has_data {
                self.has_data = false;
                let r = on_item(SseItem::Data(&self.data));
                self.data.clear();
                return r;
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // a comment, used by some servers as a keep-alive
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
                Ok(())
            }
            b"event" | b"id" | b"retry" => Ok(()),
            _ => on_item(SseItem::Malformed(line)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An item, owned, for comparing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Owned {
        Data(Vec<u8>),
        Malformed(Vec<u8>),
    }

    fn parse_all(chunks: &[&[u8]]) -> (Vec<Owned>, Option<Vec<u8>>) {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut |item| {
                out.push(match item {
                    SseItem::Data(d) => Owned::Data(d.to_vec()),
                    SseItem::Malformed(l) => Owned::Malformed(l.to_vec()),
                });
                Ok::<(), ()>(())
            })
            .unwrap();
        }
        (out, p.finish())
    }

    fn data(s: &str) -> Owned {
        Owned::Data(s.as_bytes().to_vec())
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
    fn bare_cr_ends_lines() {
        let (items, _) = parse_all(&[b"data: x\r\rdata: y\r\r"]);
        assert_eq!(items, vec![data("x"), data("y")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newline() {
        let (items, _) = parse_all(&[b"data: a\ndata:b\n\n"]);
        assert_eq!(items, vec![data("a\nb")]);
    }

    #[test]
    fn comments_and_known_fields_are_skipped() {
        let (items, _) = parse_all(&[b": keep-alive\nevent: x\nid: 3\nretry: 10\ndata: y\n\n"]);
        assert_eq!(items, vec![data("y")]);
    }

    #[test]
    fn a_line_that_is_not_sse_is_reported() {
        let (items, _) = parse_all(&[b"data: a\n\n{garbage\n"]);
        assert_eq!(
            items,
            vec![data("a"), Owned::Malformed(b"{garbage".to_vec())]
        );
    }

    #[test]
    fn an_event_cut_off_is_left_over_not_yielded() {
        let (items, rest) = parse_all(&[b"data: a\n\ndata: {\"tru"]);
        assert_eq!(items, vec![data("a")]);
        assert_eq!(rest, Some(b"data: {\"tru".to_vec()));
    }

    #[test]
    fn an_event_without_its_blank_line_is_left_over() {
        let (items, rest) = parse_all(&[b"data: a\n"]);
        assert!(items.is_empty());
        assert_eq!(rest, Some(b"a".to_vec()));
    }

    #[test]
    fn an_error_from_the_callback_stops_the_feed() {
        let mut p = SseParser::new();
        let mut seen = 0;
        let r = p.feed(b"data: a\n\ndata: b\n\n", &mut |_| {
            seen += 1;
            Err("stop")
        });
        assert_eq!((r, seen), (Err("stop"), 1));
    }

    #[test]
    fn blank_lines_alone_yield_nothing() {
        let (items, rest) = parse_all(&[b"\n\n\r\n"]);
        assert!(items.is_empty());
        assert_eq!(rest, None);
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
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut last = 0;
            for p in points {
                pieces.push(&bytes[last..p]);
                last = p;
            }
            pieces.push(&bytes[last..]);
            let (whole, _) = parse_all(&[bytes]);
            let (split, rest) = parse_all(&pieces);
            prop_assert_eq!(&whole, &split);
            prop_assert_eq!(rest, None);
            let expected: Vec<Owned> = events.iter().map(|e| data(e)).collect();
            prop_assert_eq!(whole, expected);
        }

        /// Garbage never panics the parser.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512), cut in 0usize..512) {
            let cut = cut.min(bytes.len());
            let _ = parse_all(&[&bytes[..cut], &bytes[cut..]]);
        }
    }
}
