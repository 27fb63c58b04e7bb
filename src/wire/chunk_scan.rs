//! The usual streamed chunk, read without serde: the fast path of the gate's hot loop.
//!
//! At 20,000 tokens a second serde_json's derived reader spent about 4,300 instructions on a
//! 150-byte chunk (callgrind), nearly half of all the gate did per token, and a gate's CPU is
//! taken from the serve it measures. Almost every chunk has one shape: an object whose
//! `choices` holds one choice, whose `delta` holds plain strings. This scanner reads that shape
//! and checks, as it skips them, that the other members are JSON.
//!
//! It answers `None` for anything else: an escape in any string, a second choice, a delta's
//! `tool_calls`, a choice
//! whose `index` is anything but a plain `0` (another choice is a fault the gate names, and
//! serde reads the index: issue 30), `usage`, `timings` or `error` (a serve's error must never
//! pass for a plain chunk), a repeated member the gate reads, deep nesting, a control
//! character, bytes that are not UTF-8 or not JSON. The caller then parses the chunk with serde_json, which stays the
//! authority on what a chunk means and on the error a bad one gets. So `None` is never a
//! verdict, only "ask serde"; and where this answers, serde answers the same (the property
//! test below holds them to it). A chunk with a tab or a line break between its tokens is
//! valid JSON the scanner leaves to serde too: slower, not wrong.

/// The fields the gate reads from a chunk of the usual shape. `None` where the chunk has the
/// member as `null` or not at all.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Plain<'a> {
    /// Choice 0's `delta.content`.
    pub content: Option<&'a str>,
    /// Choice 0's `delta.reasoning_content`.
    pub reasoning: Option<&'a str>,
    /// Choice 0's `finish_reason`.
    pub finish_reason: Option<&'a str>,
    /// Choice 0's `logprobs` as its JSON text, checked as JSON and passed over as any other
    /// member is (its place is all that is kept: a run without logprobs reads nothing more).
    pub logprobs: Option<&'a str>,
}

/// Read `data` if it is a chunk of the usual shape; `None` means "not sure: ask serde".
pub fn scan(data: &[u8]) -> Option<Plain<'_>> {
    // Serves send compact chunks: no escapes, no control characters, anywhere in them. Then every
    // string ends at its next quote. (One pass, without branches, over the whole chunk, which
    // the compiler does sixteen bytes at a time.)
    let unusual = data
        .iter()
        .fold(false, |seen, &c| seen | (c < 0x20) | (c == b'\\'));
    if unusual {
        return None;
    }
    // And valid UTF-8 throughout: then so is every string in it (quotes are ASCII, so they fall
    // on character boundaries), and the text the gate reads needs no check of its own.
    let text = std::str::from_utf8(data).ok()?;
    let mut c = Cursor {
        b: data,
        text,
        i: 0,
    };
    let mut plain = Plain::default();
    let mut seen_choices = false;
    c.ws();
    c.object(|c, key| match key {
        b"choices" => {
            first_time(&mut seen_choices)?;
            c.choices(&mut plain)
        }
        // An `error` member, even `null`, is serde's to read: the gate fails the reply on it.
        b"usage" | b"timings" | b"error" => None,
        _ => c.skip_value(1),
    })?;
    c.ws();
    (c.i == data.len()).then_some(plain)
}

/// The bytes of `word` (little-endian) that are quotes, as their high bits. Exact, unlike the
/// shorter "has a zero byte" test, so the lowest bit set is the first quote.
fn quote_bytes(word: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = word ^ 0x2222_2222_2222_2222; // a quote is now a zero byte
                                          // Per byte: the high bit of ((low seven bits) + 0x7f) is set unless they are all zero; or
                                          // with x for its own high bit; what is left clear is the zero bytes.
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// `None` the second time a member the gate reads comes: serde refuses a repeated field, so
/// such a chunk is left to it.
fn first_time(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}

/// Deeper than this, a chunk is not of the usual shape (serde_json's own limit is 128).
const MAX_DEPTH: u32 = 32;

struct Cursor<'a> {
    b: &'a [u8],
    /// The same bytes, as text.
    text: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.bump()? == want).then_some(())
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A string: where its bytes start and end, between the quotes. [`scan`] has made sure the
    /// chunk has no escapes and no control characters, so the next quote ends it: looked for
    /// eight bytes at a time, most strings in a chunk being a word or two.
    fn string(&mut self) -> Option<(usize, usize)> {
        self.eat(b'"')?;
        let start = self.i;
        let mut at = start;
        while let Some(&word) = self.b.get(at..).and_then(<[u8]>::first_chunk::<8>) {
            let quotes = quote_bytes(u64::from_le_bytes(word));
            if quotes != 0 {
                let end = at + (quotes.trailing_zeros() / 8) as usize;
                self.i = end + 1;
                return Some((start, end));
            }
            at += 8;
        }
        let end = at + self.b[at..].iter().position(|&c| c == b'"')?;
        self.i = end + 1;
        Some((start, end))
    }

    /// A member's name.
    fn key(&mut self) -> Option<&'a [u8]> {
        let (start, end) = self.string()?;
        Some(&self.b[start..end])
    }

    /// A string or `null`.
    fn text_or_null(&mut self) -> Option<Option<&'a str>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        let (start, end) = self.string()?;
        self.text.get(start..end).map(Some)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    /// A number as JSON writes one: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// An object, each member's value read by `member` (which must consume it).
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.key()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, key)?;
            self.ws();
            match self.bump()? {
                b',' => self.ws(),
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// Any JSON value, checked and passed over.
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|c, _| c.skip_value(depth + 1)),
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.bump()? {
                        b',' => self.ws(),
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// `choices`: empty, or one choice, choice 0 (a second is left to serde, which reads every
    /// one, and so is a choice of any other index).
    fn choices(&mut self, plain: &mut Plain<'a>) -> Option<()> {
        self.eat(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        let (mut seen_delta, mut seen_reason, mut seen_index, mut seen_logprobs) =
            (false, false, false, false);
        self.object(|c, key| match key {
            b"index" => {
                first_time(&mut seen_index)?;
                c.index_zero()
            }
            b"delta" => {
                first_time(&mut seen_delta)?;
                c.delta(plain)
            }
            b"finish_reason" => {
                first_time(&mut seen_reason)?;
                plain.finish_reason = c.text_or_null()?;
                Some(())
            }
            b"logprobs" => {
                first_time(&mut seen_logprobs)?;
                let start = c.i;
                c.skip_value(3)?;
                let value = &c.text[start..c.i];
                plain.logprobs = (value != "null").then_some(value);
                Some(())
            }
            _ => c.skip_value(3),
        })?;
        self.ws();
        self.eat(b']')
    }

    /// A choice's `index`, if it is `0` as serves write it; anything else (another number,
    /// `-0`, `0.0`, `null`, a string) is serde's to read.
    fn index_zero(&mut self) -> Option<()> {
        let start = self.i;
        self.number()?;
        (&self.b[start..self.i] == b"0").then_some(())
    }

    fn delta(&mut self, plain: &mut Plain<'a>) -> Option<()> {
        let (mut seen_content, mut seen_reasoning) = (false, false);
        self.object(|c, key| match key {
            b"content" => {
                first_time(&mut seen_content)?;
                plain.content = c.text_or_null()?;
                Some(())
            }
            b"reasoning_content" => {
                first_time(&mut seen_reasoning)?;
                plain.reasoning = c.text_or_null()?;
                Some(())
            }
            // A tool call's fragments are serde's to read (issue 36): skipped here, a call's
            // arguments would be lost from the reply.
            b"tool_calls" => None,
            _ => c.skip_value(4),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::select;

    const STAND_IN: &[u8] = br#"{"choices":[{"delta":{"content":" ok"},"finish_reason":null,"index":0}],"id":"chatcmpl-stand-in","model":"stand-in","object":"chat.completion.chunk"}"#;
    const LLAMA_FIRST: &[u8] = br#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1795998989,"id":"chatcmpl-TvYH","model":"/m/SmolLM2-135M-Instruct.Q4_1.gguf","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}"#;
    const OPENAI_REASONING: &[u8] = br#"{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"reasoning_content":"hm, "},"logprobs":null,"finish_reason":null}]}"#;

    #[test]
    fn the_usual_chunks_take_the_fast_path() {
        let p = scan(STAND_IN).expect("the stand-in's chunk");
        assert_eq!(p.content, Some(" ok"));
        assert_eq!(p.finish_reason, None);
        let p = scan(LLAMA_FIRST).expect("llama-server's first chunk");
        assert_eq!(p, Plain::default());
        let p = scan(OPENAI_REASONING).expect("a reasoning chunk");
        assert_eq!(p.reasoning, Some("hm, "));
        assert_eq!(p.content, None);
        let stop = br#" {"choices" : [ {"delta":{},"finish_reason":"length","index":0} ] } "#;
        assert_eq!(scan(stop).unwrap().finish_reason, Some("length"));
        assert_eq!(scan(br#"{"choices":[],"id":"x"}"#), Some(Plain::default()));
        // A choice without an index is choice 0, and `0` with space around it is still 0.
        let no_index = br#"{"choices":[{"delta":{"content":"a"}}]}"#;
        assert_eq!(scan(no_index).unwrap().content, Some("a"));
        let spaced = br#"{"choices":[{"index" : 0 ,"delta":{"content":"a"}}]}"#;
        assert_eq!(scan(spaced).unwrap().content, Some("a"));
    }

    #[test]
    fn what_it_skips_at_every_level_it_checks_and_passes_over() {
        let values = r#"[[],{},[1,-2.5e+3,0.25E-2,-0,true,false,null,"s",{"a":{"b":[true]}}]]"#;
        let chunk = format!(
            r#"{{"id":{values},"choices":[{{"index":0,"n":{values},"delta":{{"audio":{values},"content":"a b","role":{values}}},"logprobs":{values},"finish_reason":"stop"}}],"created":-0.5E-3,"object":{values}}}"#
        );
        let p = scan(chunk.as_bytes()).expect("every kind of value, skipped");
        assert_eq!((p.content, p.finish_reason), (Some("a b"), Some("stop")));
        assert_eq!(
            p.logprobs,
            Some(values),
            "its place kept, as serde's raw value"
        );
        let slow = crate::wire::openai::Chunk::by_serde(chunk.as_bytes()).unwrap();
        assert_eq!(
            (slow.content(), slow.finish_reason()),
            ("a b", Some("stop"))
        );
        // A nesting as deep as the scanner goes, and one level deeper.
        let nested = |depth: usize| {
            format!(
                r#"{{"x":{}{},"choices":[]}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        assert_eq!(
            scan(nested(MAX_DEPTH as usize).as_bytes()),
            Some(Plain::default())
        );
        assert_eq!(scan(nested(MAX_DEPTH as usize + 1).as_bytes()), None);
        let nested_objects = |depth: usize| {
            let d = depth - 1;
            format!(
                r#"{{"x":{}{{}}{},"choices":[]}}"#,
                r#"{"a":"#.repeat(d),
                "}".repeat(d)
            )
        };
        let deepest = nested_objects(MAX_DEPTH as usize);
        assert_eq!(
            scan(deepest.as_bytes()),
            Some(Plain::default()),
            "{deepest}"
        );
        assert_eq!(
            scan(nested_objects(MAX_DEPTH as usize + 1).as_bytes()),
            None
        );
    }

    #[test]
    fn what_it_leaves_to_serde() {
        for (why, data) in [
            (
                "an escape",
                &br#"{"choices":[{"delta":{"content":"a\nb"}}]}"#[..],
            ),
            (
                "an escape in a skipped member",
                br#"{"id":"a\"b","choices":[]}"#,
            ),
            ("two choices", br#"{"choices":[{"delta":{}},{"delta":{}}]}"#),
            (
                "choice index 1",
                br#"{"choices":[{"index":1,"delta":{"content":"Paris"}}]}"#,
            ),
            (
                "index 1 before index 0",
                br#"{"choices":[{"index":1,"delta":{}},{"index":0,"delta":{}}]}"#,
            ),
            ("an index as a string", br#"{"choices":[{"index":"0"}]}"#),
            ("a negative index", br#"{"choices":[{"index":-1}]}"#),
            ("an index of -0", br#"{"choices":[{"index":-0}]}"#),
            ("an index of 0.0", br#"{"choices":[{"index":0.0}]}"#),
            ("an index of 0e0", br#"{"choices":[{"index":0e0}]}"#),
            ("an index that is null", br#"{"choices":[{"index":null}]}"#),
            ("index twice", br#"{"choices":[{"index":0,"index":0}]}"#),
            (
                "usage",
                br#"{"choices":[],"usage":{"completion_tokens":3}}"#,
            ),
            ("timings", br#"{"choices":[],"timings":{"cache_n":1}}"#),
            (
                "an error",
                br#"{"choices":[{"delta":{"content":"a"}}],"error":{"message":"oom"}}"#,
            ),
            ("an error alone", br#"{"error":"oom"}"#),
            (
                "a tool call's fragment",
                br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            ),
            (
                "an empty list of tool calls",
                br#"{"choices":[{"index":0,"delta":{"content":"<tool_call>","tool_calls":[]}}]}"#,
            ),
            ("an error that is null", br#"{"choices":[],"error":null}"#),
            ("choices twice", br#"{"choices":[],"choices":[]}"#),
            (
                "content twice",
                br#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            ),
            (
                "reasoning twice",
                br#"{"choices":[{"delta":{"reasoning_content":"a","reasoning_content":"b"}}]}"#,
            ),
            (
                "delta twice",
                br#"{"choices":[{"delta":{"content":"a"},"delta":{}}]}"#,
            ),
            (
                "finish_reason twice",
                br#"{"choices":[{"finish_reason":null,"finish_reason":"stop"}]}"#,
            ),
            (
                "two escapes",
                br#"{"choices":[{"delta":{"content":"a\nb\tc"}}]}"#,
            ),
            (
                "two control characters",
                b"{\"choices\":[{\"delta\":{\"content\":\"a\tb\tc\"}}]}",
            ),
            (
                "a control character",
                b"{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}",
            ),
            ("a key not UTF-8", b"{\"ch\xf6ices\":1,\"choices\":[]}"),
            (
                "content not UTF-8",
                b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}",
            ),
            (
                "content a number",
                br#"{"choices":[{"delta":{"content":1}}]}"#,
            ),
            (
                "a number with a leading zero",
                br#"{"created":01,"choices":[]}"#,
            ),
            (
                "a fraction without digits",
                br#"{"created":1.,"choices":[]}"#,
            ),
            ("a trailing comma", br#"{"choices":[],}"#),
            ("trailing bytes", br#"{"choices":[]} x"#),
            ("truncated", br#"{"choices":[{"delta":{"content":"a"#),
            ("not an object", br#"[1]"#),
            (
                "deep nesting",
                &[b"{\"x\":".as_slice(), &[b'['; 40], &[b']'; 40], b"}"].concat(),
            ),
        ] {
            assert_eq!(scan(data), None, "{why}");
        }
    }

    /// Strings as serves write them, and as they should not: plain, unicode, escaped, a lone
    /// surrogate, a raw control character, bytes that are not UTF-8.
    fn arb_string() -> BoxedStrategy<Vec<u8>> {
        select(vec![
            &br#""""#[..],
            br#"" ok""#,
            br#""Paris.""#,
            "\"caf\u{e9} \u{1f600}\"".as_bytes(),
            br#""a\nb""#,
            br#""\"q\"""#,
            br#""\u00e9""#,
            br#""\ud83d\ude00""#,
            br#""\ud800""#,
            b"\"a\tb\"",
            b"\"\xff\xfe\"",
            br#""stop""#,
            br#""length""#,
            br#""/root/.cache/npu-serve-smoke/SmolLM2-135M-Instruct.Q4_1.gguf""#,
            b"\"chatcmpl-stand\x01in-1234\"",
            br#""chat.completion.chunk\u0041 and on""#,
            "\"\u{4f60}\u{597d}\u{4f60}\u{597d}\u{4f60}\u{597d}\"".as_bytes(),
        ])
        .prop_map(|s| s.to_vec())
        .boxed()
    }

    fn arb_scalar() -> BoxedStrategy<Vec<u8>> {
        prop_oneof![
            arb_string(),
            select(vec![
                &b"null"[..],
                b"true",
                b"false",
                b"0",
                b"-0.5E-3",
                b"1795998989",
                b"1e5",
                b"01",
                b"1.",
                b"-",
                b"nul",
                b"[]",
                b"{}",
                b"[1, \"x\", null]",
                br#"{"a":{"b":[true]}}"#,
            ])
            .prop_map(|s| s.to_vec()),
        ]
        .boxed()
    }

    /// An object of `members` (name and value), in the order given, with whitespace here and there.
    fn object(members: Vec<(Vec<u8>, Vec<u8>)>, spaced: bool) -> Vec<u8> {
        let sep: &[u8] = if spaced { b" , " } else { b"," };
        let mut out = b"{".to_vec();
        for (i, (k, v)) in members.into_iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(sep);
            }
            out.extend_from_slice(&k);
            out.extend_from_slice(if spaced { b" :\n" } else { b":" });
            out.extend_from_slice(&v);
        }
        out.push(b'}');
        out
    }

    fn name(n: &str) -> Vec<u8> {
        format!("\"{n}\"").into_bytes()
    }

    fn arb_members(
        names: &'static [&'static str],
        value: BoxedStrategy<Vec<u8>>,
    ) -> BoxedStrategy<Vec<(Vec<u8>, Vec<u8>)>> {
        proptest::collection::vec(
            (
                select(names).prop_map(name),
                prop_oneof![2 => value, 1 => arb_scalar()],
            ),
            0..5,
        )
        .boxed()
    }

    fn arb_chunk() -> impl Strategy<Value = Vec<u8>> {
        let delta = (
            arb_members(
                &[
                    "content",
                    "reasoning_content",
                    "role",
                    "ch\\u006fices",
                    "r\u{f4}le",
                ],
                arb_string(),
            ),
            any::<bool>(),
        )
            .prop_map(|(m, sp)| object(m, sp))
            .boxed();
        // An index as serves write it (0, 1), and as they should not: negative, a fraction, a
        // string, null, past u64. Put in at any place, and sometimes twice (arb_members may add
        // one of its own).
        let index = select(vec![
            "0",
            "0",
            "1",
            "2",
            "-1",
            "-0",
            "0.0",
            "1e0",
            "null",
            "\"0\"",
            "\"1\"",
            "18446744073709551616",
        ]);
        let choice = (
            arb_members(&["delta", "finish_reason", "index", "logprobs"], delta),
            proptest::option::of((index, any::<usize>())),
            any::<bool>(),
        )
            .prop_map(|(mut m, index, sp)| {
                if let Some((value, at)) = index {
                    let at = at % (m.len() + 1);
                    m.insert(at, (name("index"), value.as_bytes().to_vec()));
                }
                object(m, sp)
            })
            .boxed();
        let choices = proptest::collection::vec(choice, 0..3).prop_map(|cs| {
            let mut out = b"[".to_vec();
            out.extend_from_slice(&cs.join(&b","[..]));
            out.push(b']');
            out
        });
        let usage = Just(
            br#"{"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":1}}"#.to_vec(),
        );
        let error = select(vec![
            &br#"{"message":"CUDA out of memory","code":500}"#[..],
            br#"{"code":500}"#,
            br#""oom""#,
            b"null",
        ])
        .prop_map(|s| s.to_vec());
        (
            arb_members(
                &[
                    "choices", "id", "model", "created", "usage", "timings", "error",
                ],
                prop_oneof![choices, usage, error].boxed(),
            ),
            any::<bool>(),
            0usize..3,
            any::<(usize, u8)>(),
        )
            .prop_map(|(m, sp, mutate, (at, byte))| {
                let mut doc = object(m, sp);
                let at = at % (doc.len() + 1);
                match mutate {
                    1 => doc.truncate(at),
                    2 => doc.insert(at, byte),
                    _ => {}
                }
                doc
            })
    }

    #[test]
    fn quote_bytes_marks_every_quote_and_nothing_else() {
        for filler in [b'a', 0x00, 0x21, 0x23, 0xa2, 0x80, 0xff, 0x7f] {
            for at in 0..8 {
                for c in 0..=255u8 {
                    let mut word = [filler; 8];
                    word[at] = c;
                    let want = word
                        .iter()
                        .enumerate()
                        .filter(|&(_, &b)| b == b'"')
                        .fold(0u64, |m, (k, _)| m | 0x80 << (8 * k));
                    assert_eq!(quote_bytes(u64::from_le_bytes(word)), want, "{word:?}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Where the fast path answers, serde_json answers the same; where it does not, serde
        /// alone decides (and is the one that calls a chunk broken).
        #[test]
        fn the_fast_path_agrees_with_serde(doc in arb_chunk()) {
            if let Some(fast) = scan(&doc) {
                let slow = crate::wire::openai::Chunk::by_serde(&doc).map_err(|e| {
                    TestCaseError::fail(format!("serde refused what the fast path read: {e}"))
                })?;
                prop_assert_eq!(slow.content(), fast.content.unwrap_or(""));
                prop_assert_eq!(slow.reasoning(), fast.reasoning.unwrap_or(""));
                prop_assert_eq!(slow.finish_reason(), fast.finish_reason);
                prop_assert_eq!(slow.logprobs(), fast.logprobs);
                prop_assert!(slow.usage.is_none() && slow.timings.is_none());
                prop_assert!(slow.error().is_none(), "the fast path read an error chunk as plain");
                prop_assert_eq!(slow.other_choice(), None, "the fast path read past another choice");
            }
        }
    }
}
