//! A reply's archived `logprobs` read by hand, in the shape the gate writes them: a list of
//! `{"token": text, "logprob": number, "top": [{"token": text, "logprob": number}, ...]}`.
//!
//! They are most of replies.jsonl (eleven texts and numbers a token at K=10), and serde_json's
//! derive took about 1.1 s of one core for the 176 MB of 2,000 replies of 200 tokens; a judge
//! against a reference and two known-good builds reads four such files (issue 52,
//! docs/performance.md). This reader knows the one shape and nothing else: members in any order
//! with any JSON whitespace between them, texts without escapes, numbers as JSON writes them.
//! Anything else (an escaped text, another member, a member twice, a value of another type)
//! gives `None`, and the caller reads the line with serde_json as before, so what is read,
//! and every error said, is serde's wherever this reader is unsure. The rest of the line is
//! read by serde_json with the logprobs set aside (a value skipped by where it ends, never
//! read twice). Numbers are parsed by the standard library, correctly rounded, as
//! serde_json's `float_roundtrip` parses the rest.

use super::reply::{ReplyRecord, TokenLogprob, TopLogprob};
use super::token_text::TokenText;

/// One line of replies.jsonl as a record, its `logprobs` read here and the rest of it (a few
/// kB: its text, chunks and figures) by serde_json; `None` where the line is not a plain
/// object with plain logprobs, for serde_json to read whole (and say what is wrong).
pub fn read_plain_reply(line: &[u8]) -> Option<ReplyRecord> {
    let mut c = Cursor { b: line, at: 0 };
    c.eat(b'{')?;
    let mut found: Option<(usize, usize, Vec<TokenLogprob>)> = None;
    if c.eat(b'}').is_none() {
        loop {
            let key = c.text()?;
            c.eat(b':')?;
            c.ws();
            let start = c.at;
            if key == "logprobs" && found.is_none() && c.b.get(c.at) == Some(&b'[') {
                let tokens = c.tokens()?;
                found = Some((start, c.at, tokens));
            } else {
                c.skip_value()?;
            }
            if c.eat(b',').is_none() {
                c.eat(b'}')?;
                break;
            }
        }
    }
    let (start, end, tokens) = found?;
    let mut rest = Vec::with_capacity(line.len() - (end - start) + 4);
    rest.extend_from_slice(&line[..start]);
    rest.extend_from_slice(b"null");
    rest.extend_from_slice(&line[end..]);
    let mut r: ReplyRecord = serde_json::from_slice(&rest).ok()?;
    r.logprobs = Some(tokens);
    Some(r)
}

/// The records of `raw` (one `logprobs` value), or `None` where it is not the plain shape.
#[cfg(test)]
fn read(raw: &str) -> Option<Vec<TokenLogprob>> {
    let mut c = Cursor {
        b: raw.as_bytes(),
        at: 0,
    };
    c.ws();
    let tokens = c.tokens()?;
    c.ws();
    (c.at == c.b.len()).then_some(tokens)
}

/// Whether `n` is a number as JSON writes one: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]?
/// [0-9]+)?` (RFC 8259, section 6).
fn json_number(n: &[u8]) -> bool {
    let digits = |from: usize| n[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut at = usize::from(n.first() == Some(&b'-'));
    match n.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => at += digits(at),
        _ => return false,
    }
    if n.get(at) == Some(&b'.') {
        let d = digits(at + 1);
        if d == 0 {
            return false;
        }
        at += 1 + d;
    }
    if let Some(b'e' | b'E') = n.get(at) {
        at += 1;
        if let Some(b'+' | b'-') = n.get(at) {
            at += 1;
        }
        let d = digits(at);
        if d == 0 {
            return false;
        }
        at += d;
    }
    at == n.len()
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// A list of token records, in exactly their room.
    fn tokens(&mut self) -> Option<Vec<TokenLogprob>> {
        let mut tokens = Vec::new();
        let mut scratch = Vec::new();
        self.list(|c| {
            tokens.push(c.token(&mut scratch)?);
            Some(())
        })?;
        tokens.shrink_to_fit();
        Some(tokens)
    }

    /// Past one JSON value of any kind, up to the `,` or the closing bracket after it: serde
    /// reads it again, so only where it ends matters here.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match *self.b.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    loop {
                        let i = memchr::memchr2(b'"', b'\\', self.b.get(self.at..)?)?;
                        let escaped = self.b[self.at + i] == b'\\';
                        self.at += i + if escaped { 2 } else { 1 };
                        if !escaped {
                            break;
                        }
                    }
                    continue;
                }
                b'[' | b'{' => depth += 1,
                b']' | b'}' if depth == 0 => return Some(()),
                b']' | b'}' => depth -= 1,
                b',' if depth == 0 => return Some(()),
                _ => {}
            }
            self.at += 1;
        }
    }

    /// Past JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.at) {
            self.at += 1;
        }
    }

    /// Past `byte` after whitespace, or `None`.
    fn eat(&mut self, byte: u8) -> Option<()> {
        self.ws();
        (self.b.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// `[ item, ... ]`, each item read by `item`.
    fn list(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            item(self)?;
            if self.eat(b',').is_none() {
                return self.eat(b']');
            }
        }
    }

    /// A text's bytes without escapes, after whitespace (not yet checked as UTF-8).
    fn raw_text(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        let len = memchr::memchr2(b'"', b'\\', &self.b[start..])?;
        let bytes = &self.b[start..start + len];
        // JSON has no raw control character in a text: serde refuses the line, and so this.
        if self.b[start + len] != b'"' || bytes.iter().any(|&b| b < 0x20) {
            return None;
        }
        self.at = start + len + 1;
        Some(bytes)
    }

    /// A text without escapes, after whitespace.
    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.raw_text()?).ok()
    }

    /// A token's text, interned.
    fn token_text(&mut self) -> Option<TokenText> {
        TokenText::of_bytes(self.raw_text()?)
    }

    /// A number, after whitespace: the bytes a JSON number may hold, parsed whole.
    fn number(&mut self) -> Option<f64> {
        self.ws();
        let start = self.at;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.b.get(self.at) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.b[start..self.at]).ok()?;
        // The standard library takes "+1", "01", "1." and "-.5" too; JSON does not.
        if !json_number(digits.as_bytes()) {
            return None;
        }
        // serde_json reads an integer as one and converts it ("-0" kept as -0), and refuses a
        // number past f64's range; both left to it but the integers that fit.
        if !digits.contains(['.', 'e', 'E']) {
            return match digits.parse::<i64>() {
                Ok(0) if digits.starts_with('-') => Some(-0.0),
                Ok(i) => Some(i as f64),
                Err(_) => digits.parse::<u64>().ok().map(|u| u as f64),
            };
        }
        digits.parse::<f64>().ok().filter(|x| x.is_finite())
    }

    /// `{ "token": text, "logprob": number }` with `more` reading any other member it knows
    /// (`top`), each member once: the text and logprob, or `None`.
    fn members(
        &mut self,
        mut more: impl FnMut(&mut Self, &str) -> Option<()>,
    ) -> Option<(TokenText, f64)> {
        self.eat(b'{')?;
        let (mut token, mut logprob) = (None, None);
        if self.eat(b'}').is_none() {
            loop {
                let key = self.text()?;
                self.eat(b':')?;
                match key {
                    "token" if token.is_none() => token = Some(self.token_text()?),
                    "logprob" if logprob.is_none() => logprob = Some(self.number()?),
                    other => more(self, other)?,
                }
                if self.eat(b',').is_none() {
                    self.eat(b'}')?;
                    break;
                }
            }
        }
        Some((token?, logprob?))
    }

    /// One token's record, its alternatives read into `scratch` and copied out in exactly
    /// their room.
    fn token(&mut self, scratch: &mut Vec<TopLogprob>) -> Option<TokenLogprob> {
        scratch.clear();
        let mut top_seen = false;
        let (token, logprob) = self.members(|c, key| {
            if key != "top" || std::mem::replace(&mut top_seen, true) {
                return None;
            }
            c.list(|c| {
                let (token, logprob) = c.members(|_, _| None)?;
                scratch.push(TopLogprob { token, logprob });
                Some(())
            })
        })?;
        Some(TokenLogprob {
            token,
            logprob,
            top: scratch.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What serde_json reads of `raw`, as the derive reads it.
    fn by_serde(raw: &str) -> Option<Vec<TokenLogprob>> {
        serde_json::from_str(raw).ok()
    }

    #[test]
    fn the_plain_shape_reads_as_serde_reads_it_compact_or_spaced() {
        let compact = r#"[{"token":" Paris","logprob":-0.25,"top":[{"token":" Paris","logprob":-0.25},{"token":" Lyon","logprob":-1.5e0}]},{"token":".","logprob":0}]"#;
        let spaced = "[ {\"logprob\" : -0.25 , \"top\": [ {\"logprob\": -0.25, \"token\": \" Paris\"} ], \"token\" : \" Paris\" }\n, {\"token\": \"é\", \"logprob\": -1E-3, \"top\": []} ]";
        let integers = r#"[{"token":"a","logprob":-0},{"token":"b","logprob":-12},{"token":"c","logprob":18446744073709551615}]"#;
        for raw in [compact, spaced, integers, "[]", " [ ] "] {
            let got = read(raw).unwrap_or_else(|| panic!("{raw}"));
            assert_eq!(Some(got), by_serde(raw), "{raw}");
        }
    }

    #[test]
    fn an_integer_logprob_is_the_number_serde_makes_of_it_sign_and_all() {
        for raw in [
            "-0",
            "0",
            "-12",
            "18446744073709551615",
            "-9223372036854775808",
        ] {
            let line = format!(r#"[{{"token":"a","logprob":{raw}}}]"#);
            let serde: f64 = serde_json::from_str(raw).unwrap();
            let got = read(&line).unwrap()[0].logprob;
            assert_eq!(got.to_bits(), serde.to_bits(), "{raw}");
        }
    }

    /// A line of replies.jsonl with `logprobs` as the gate writes them.
    fn line_of(tokens: &[TokenLogprob], pretty: bool) -> Vec<u8> {
        let mut r = ReplyRecord::new(3, "p \"q\" {[", Some("x"));
        r.content = "a, b] } \\ \"c".into();
        r.logprobs = Some(tokens.to_vec());
        if pretty {
            serde_json::to_vec_pretty(&r).unwrap()
        } else {
            serde_json::to_vec(&r).unwrap()
        }
    }

    #[test]
    fn a_reply_reads_as_serde_reads_it_or_is_left_to_serde() {
        let tokens = vec![TokenLogprob {
            token: TokenText::new(" Paris"),
            logprob: -0.25,
            top: vec![TopLogprob {
                token: TokenText::new(" Lyon"),
                logprob: -1.5,
            }],
        }];
        for pretty in [false, true] {
            let line = line_of(&tokens, pretty);
            let serde: ReplyRecord = serde_json::from_slice(&line).unwrap();
            assert_eq!(read_plain_reply(&line), Some(serde));
        }
        let plain = String::from_utf8(line_of(&tokens, false)).unwrap();
        for other in [
            // Without logprobs, with them null, twice, escaped, or with more after the line.
            plain.replace(r#","logprobs":"#, r#","logprobz":"#),
            plain.replace(r#""logprobs":[{"#, r#""logprobs":null,"x":[{"#),
            plain.replacen('{', r#"{"logprobs":[],"#, 1),
            plain.replace(r#"" Lyon""#, r#""\u0020Lyon""#),
            format!("{plain} {{}}"),
            plain[..plain.len() - 1].to_string(),
        ] {
            assert_eq!(read_plain_reply(other.as_bytes()), None, "{other}");
        }
    }

    #[test]
    fn numbers_are_jsons_and_texts_hold_no_raw_control_character() {
        for good in ["0", "-0", "12", "-1.5", "0.25e-3", "1E+9", "-0.0"] {
            assert!(json_number(good.as_bytes()), "{good}");
        }
        for bad in [
            "", "-", "+1", "01", "1.", "-.5", ".5", "1e", "1e+", "1.e5", "1-2", "--1",
        ] {
            assert!(!json_number(bad.as_bytes()), "{bad}");
            let raw = format!(r#"[{{"token":"a","logprob":{bad}}}]"#);
            assert_eq!(read(&raw), None, "{raw}");
            assert_eq!(by_serde(&raw), None, "{raw}");
        }
        for raw in [
            "[{\"token\":\"a\nb\",\"logprob\":-1}]",
            "[{\"tok\tn\":\"a\",\"logprob\":-1}]",
        ] {
            assert_eq!(read(raw), None, "{raw}");
            assert_eq!(by_serde(raw), None, "{raw}");
        }
    }

    #[test]
    fn anything_else_is_left_to_serde() {
        for raw in [
            // An escaped text, another member, a member twice, a missing one, another type.
            r#"[{"token":"\"q\"","logprob":-1}]"#,
            r#"[{"token":"a","logprob":-1,"bytes":[97]}]"#,
            r#"[{"token":"a","token":"b","logprob":-1}]"#,
            r#"[{"token":"a","logprob":-1,"top":[],"top":[]}]"#,
            r#"[{"token":"a"}]"#,
            r#"[{"token":"a","logprob":"-1"}]"#,
            r#"[{"token":"a","logprob":-1,"top":null}]"#,
            r#"[{"token":"a","logprob":-1,"top":[{"token":"b","logprob":-2,"x":1}]}]"#,
            r#"[{"token":"a","logprob":-1e400}]"#,
            r#"[{"token":"a","logprob":-184467440737095516160}]"#,
            r#"null"#,
            r#"{"content":[]}"#,
        ] {
            assert_eq!(read(raw), None, "{raw}");
        }
    }

    fn arb_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ a-zA-Z0-9.,!?]{0,8}",
            "\\PC{0,4}",
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("\n".to_string()),
        ]
    }

    fn arb_logprob() -> impl Strategy<Value = f64> {
        prop_oneof![
            -30.0f64..=0.0,
            Just(0.0),
            Just(-0.1),
            Just(-1e-300),
            Just(-123_456.789_012_345_67),
            any::<f64>().prop_filter("finite", |x| x.is_finite()),
        ]
    }

    fn arb_tokens() -> impl Strategy<Value = Vec<TokenLogprob>> {
        let alt = (arb_text(), arb_logprob()).prop_map(|(t, logprob)| TopLogprob {
            token: TokenText::new(&t),
            logprob,
        });
        let token = (
            arb_text(),
            arb_logprob(),
            proptest::collection::vec(alt, 0..4),
        )
            .prop_map(|(t, logprob, top)| TokenLogprob {
                token: TokenText::new(&t),
                logprob,
                top,
            });
        proptest::collection::vec(token, 0..5)
    }

    proptest! {
        /// Whatever the gate writes, compact or pretty, reads back as serde reads it, or is
        /// left to serde: never another answer.
        #[test]
        fn what_the_gate_writes_reads_back_as_serde_reads_it(tokens in arb_tokens()) {
            for raw in [
                serde_json::to_string(&tokens).unwrap(),
                serde_json::to_string_pretty(&tokens).unwrap(),
            ] {
                let serde = by_serde(&raw).unwrap();
                prop_assert_eq!(&serde, &tokens);
                if let Some(got) = read(&raw) {
                    prop_assert_eq!(got, serde);
                }
            }
        }

        #[test]
        fn a_reply_the_gate_writes_reads_back_as_serde_reads_it(tokens in arb_tokens(), pretty in any::<bool>()) {
            let line = line_of(&tokens, pretty);
            let serde: ReplyRecord = serde_json::from_slice(&line).unwrap();
            if let Some(got) = read_plain_reply(&line) {
                prop_assert_eq!(got, serde);
            }
        }

        #[test]
        fn a_line_never_panics_the_reader_nor_reads_otherwise(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Some(got) = read_plain_reply(&bytes) {
                prop_assert_eq!(Some(got), serde_json::from_slice::<ReplyRecord>(&bytes).ok());
            }
        }

        #[test]
        fn the_reader_never_panics_and_never_disagrees(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(raw) = std::str::from_utf8(&bytes) {
                if serde_json::from_str::<serde_json::Value>(raw).is_ok() {
                    if let Some(got) = read(raw) {
                        prop_assert_eq!(Some(got), by_serde(raw));
                    }
                }
            }
        }
    }
}
