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

use std::cell::RefCell;

use super::reply::{ReplyRecord, TokenLogprob, TopLogprob};
use super::token_text::{Interner, TokenText};

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
                let tokens = TokenText::interning(|seen| c.tokens(seen))?;
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
    let tokens = TokenText::interning(|seen| c.tokens(seen))?;
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

/// Powers of ten a double holds exactly: 10^0 to 10^22.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The double nearest the JSON number at the start of `n`, and its length, where Clinger's
/// fast path gives it exactly: its digits an integer m of at most 2^53 and its scale a power of
/// ten of at most 10^22, both doubles exactly, so the one IEEE multiply or divide is correctly
/// rounded (W. D. Clinger, "How to Read Floating Point Numbers Accurately", PLDI 1990, section
/// 4; the standard library's parser takes the same path first). The number is checked as JSON
/// writes one (RFC 8259, section 6, as [`json_number`]) in the same pass. `None` for an integer
/// (read as serde reads one), for a number followed by another byte a number may hold (`01`,
/// `1.5.3`: the caller's whole-number check refuses it) and for any number outside the path,
/// all left to the caller. A logprob as serde_json writes it (`-3.0`, `-0.0123456789`,
/// `-1e-7`) is on it: one pass over its bytes instead of four.
fn leading_decimal(n: &[u8]) -> Option<(f64, usize)> {
    let negative = n.first() == Some(&b'-');
    let mut at = usize::from(negative);
    let (mut m, mut digits, mut scale) = (0u64, 0u32, 0i32);
    match n.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => {
            while let Some(&b @ b'0'..=b'9') = n.get(at) {
                digits += 1;
                if digits > 19 {
                    return None;
                }
                m = m * 10 + u64::from(b - b'0');
                at += 1;
            }
        }
        _ => return None,
    }
    let mut point_or_exponent = false;
    if n.get(at) == Some(&b'.') {
        at += 1;
        let from = at;
        while let Some(&b @ b'0'..=b'9') = n.get(at) {
            // Leading zeros add no digit: "0.000123" is m = 123.
            if m > 0 || b != b'0' {
                digits += 1;
                if digits > 19 {
                    return None;
                }
            }
            m = m * 10 + u64::from(b - b'0');
            scale -= 1;
            at += 1;
        }
        if at == from {
            return None;
        }
        point_or_exponent = true;
    }
    if let Some(b'e' | b'E') = n.get(at) {
        at += 1;
        let minus = n.get(at) == Some(&b'-');
        if let Some(b'+' | b'-') = n.get(at) {
            at += 1;
        }
        let from = at;
        let mut e = 0i32;
        while let Some(&b @ b'0'..=b'9') = n.get(at) {
            if e >= 1000 {
                return None;
            }
            e = e * 10 + i32::from(b - b'0');
            at += 1;
        }
        if at == from {
            return None;
        }
        scale += if minus { -e } else { e };
        point_or_exponent = true;
    }
    if !point_or_exponent || m > 1 << 53 || number_byte(n.get(at)) {
        return None;
    }
    let power = *EXACT_POWERS.get(scale.unsigned_abs() as usize)?;
    #[allow(clippy::cast_precision_loss)] // m is at most 2^53: exact
    let x = if scale < 0 {
        m as f64 / power
    } else {
        m as f64 * power
    };
    Some((if negative { -x } else { x }, at))
}

/// Whether `b` is a byte a number's text may hold, as the caller takes a number's extent.
fn number_byte(b: Option<&u8>) -> bool {
    matches!(b, Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// A list of token records, in exactly their room: read into this thread's scratch list
    /// and moved out in one allocation (grown a token at a time, a reply's list took seven
    /// reallocations and copies).
    fn tokens(&mut self, seen: &mut Interner) -> Option<Vec<TokenLogprob>> {
        thread_local! {
            static SCRATCH: RefCell<(Vec<TokenLogprob>, Vec<TopLogprob>)> = RefCell::default();
        }
        SCRATCH.with(|scratch| {
            let (tokens, top) = &mut *scratch.borrow_mut();
            tokens.clear();
            self.list(|c| {
                tokens.push(c.token(top, seen)?);
                Some(())
            })?;
            let mut exact = Vec::with_capacity(tokens.len());
            exact.append(tokens);
            Some(exact)
        })
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

    /// A text after its opening quote, up to and past its closing one, interned: `None` at an
    /// escape or a raw control character (as [`Self::raw_text`]). A token's text is a few
    /// bytes, so a plain loop, not a vector search set up for each.
    fn plain_text(&mut self, seen: &mut Interner) -> Option<TokenText> {
        let start = self.at;
        loop {
            match *self.b.get(self.at)? {
                b'"' => break,
                b'\\' | 0..0x20 => return None,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        seen.of_bytes_in(self.b, start, self.at - 1 - start)
    }

    /// Past `bytes` where they come next, or `None`.
    fn literal(&mut self, bytes: &[u8]) -> Option<()> {
        self.b[self.at..]
            .starts_with(bytes)
            .then(|| self.at += bytes.len())
    }

    /// `{"token":text,"logprob":number` exactly as serde_json writes it, up to what follows the
    /// number (the record's `}` or its `,"top":[`).
    fn compact_member(&mut self, seen: &mut Interner) -> Option<(TokenText, f64)> {
        self.literal(br#"{"token":""#)?;
        let token = self.plain_text(seen)?;
        self.literal(br#","logprob":"#)?;
        Some((token, self.number()?))
    }

    /// One token's record exactly as serde_json writes it (no whitespace, its members in the
    /// gate's order), as the gate's own archives hold them, or `None` anywhere else for
    /// [`Self::token`] to read it again from its start: a third of the time of reading it
    /// member by member, key by key.
    fn compact_token(
        &mut self,
        scratch: &mut Vec<TopLogprob>,
        seen: &mut Interner,
    ) -> Option<TokenLogprob> {
        let (token, logprob) = self.compact_member(seen)?;
        if self.literal(b"}").is_some() {
            return Some(TokenLogprob {
                token,
                logprob,
                top: Vec::new(),
            });
        }
        self.literal(br#","top":["#)?;
        scratch.clear();
        loop {
            let (token, logprob) = self.compact_member(seen)?;
            self.literal(b"}")?;
            scratch.push(TopLogprob { token, logprob });
            if self.literal(b",").is_none() {
                self.literal(b"]}")?;
                break;
            }
        }
        Some(TokenLogprob {
            token,
            logprob,
            top: scratch.to_vec(),
        })
    }

    /// A token's text, interned.
    fn token_text(&mut self, seen: &mut Interner) -> Option<TokenText> {
        seen.of_bytes(self.raw_text()?)
    }

    /// A number, after whitespace: the bytes a JSON number may hold, parsed whole.
    fn number(&mut self) -> Option<f64> {
        self.ws();
        if let Some((x, len)) = leading_decimal(&self.b[self.at..]) {
            self.at += len;
            return Some(x);
        }
        let start = self.at;
        while number_byte(self.b.get(self.at)) {
            self.at += 1;
        }
        let n = &self.b[start..self.at];
        // The standard library takes "+1", "01", "1." and "-.5" too; JSON does not.
        if !json_number(n) {
            return None;
        }
        let digits = std::str::from_utf8(n).ok()?;
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
        seen: &mut Interner,
        mut more: impl FnMut(&mut Self, &mut Interner, &[u8]) -> Option<()>,
    ) -> Option<(TokenText, f64)> {
        self.eat(b'{')?;
        let (mut token, mut logprob) = (None, None);
        if self.eat(b'}').is_none() {
            loop {
                // A key's bytes, not checked as UTF-8: any but these three gives `None`.
                let key = self.raw_text()?;
                self.eat(b':')?;
                match key {
                    b"token" if token.is_none() => token = Some(self.token_text(seen)?),
                    b"logprob" if logprob.is_none() => logprob = Some(self.number()?),
                    other => more(self, seen, other)?,
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
    fn token(
        &mut self,
        scratch: &mut Vec<TopLogprob>,
        seen: &mut Interner,
    ) -> Option<TokenLogprob> {
        let start = self.at;
        if let Some(token) = self.compact_token(scratch, seen) {
            return Some(token);
        }
        self.at = start;
        scratch.clear();
        let mut top_seen = false;
        let (token, logprob) = self.members(seen, |c, seen, key| {
            if key != b"top" || std::mem::replace(&mut top_seen, true) {
                return None;
            }
            c.list(|c| {
                let (token, logprob) = c.members(seen, |_, _, _| None)?;
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

    /// [`leading_decimal`] of the whole of `n`.
    fn exact_decimal(n: &[u8]) -> Option<f64> {
        leading_decimal(n)
            .filter(|&(_, len)| len == n.len())
            .map(|(x, _)| x)
    }

    /// The decimal `m * 10^scale` written as JSON writes a number: a point where the scale is
    /// negative, an exponent where it is not.
    fn decimal(negative: bool, m: u64, scale: i32) -> String {
        let sign = if negative { "-" } else { "" };
        if scale >= 0 {
            return format!("{sign}{m}e{scale}");
        }
        let shift = scale.unsigned_abs() as usize;
        let digits = format!("{m:0>width$}", width = shift + 1);
        let (int, frac) = digits.split_at(digits.len() - shift);
        format!("{sign}{int}.{frac}")
    }

    #[test]
    fn clingers_fast_path_reads_to_the_bit_what_the_standard_library_reads() {
        // On the path: what serde_json writes of a logprob, and its edges (10^22 and 2^53 are
        // the largest exact power and integer; Clinger 1990, section 4).
        for on in [
            "-3.0",
            "-0.0",
            "0.1",
            "-0.0123456789",
            "-1e-7",
            "1E+5",
            "1e22",
            "-2.5e-21",
            "900719925474099.2",
            "0.000000000000000000001",
            "-17.3125000000004",
        ] {
            let fast = exact_decimal(on.as_bytes()).unwrap_or_else(|| panic!("{on}"));
            assert_eq!(fast.to_bits(), on.parse::<f64>().unwrap().to_bits(), "{on}");
        }
        // Off it, for the standard library or serde: an integer, digits past 2^53 or past 19,
        // a power past 10^22.
        for off in [
            "0",
            "-12",
            "9007199254740992.0",
            "-17.312500000000004",
            "12345678901234567890.5",
            "1e23",
            "1e-23",
            "1e99999",
        ] {
            assert_eq!(exact_decimal(off.as_bytes()), None, "{off}");
        }
        assert_eq!(decimal(true, 5, -3), "-0.005");
        assert_eq!(decimal(false, 1234, -2), "12.34");
        assert_eq!(decimal(false, 7, 3), "7e3");
    }

    proptest! {
        #[test]
        fn a_number_on_clingers_path_is_the_standard_librarys_to_the_bit(
            negative in any::<bool>(), m in 0u64..=(1 << 53), scale in -22i32..=22,
        ) {
            let n = decimal(negative, m, scale);
            let fast = exact_decimal(n.as_bytes());
            prop_assert!(fast.is_some(), "{}", n);
            prop_assert_eq!(fast.map(f64::to_bits), n.parse::<f64>().ok().map(f64::to_bits), "{}", n);
        }

        #[test]
        fn a_logprob_serde_writes_reads_back_to_the_bit(x in any::<f64>().prop_filter("finite", |x| x.is_finite())) {
            let n = serde_json::to_string(&x).unwrap();
            let mut c = Cursor { b: n.as_bytes(), at: 0 };
            prop_assert_eq!(c.number().map(f64::to_bits), Some(x.to_bits()), "{}", n);
        }

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
