//! Choice 0's `logprobs` of a streamed chunk (`{"content": [{"token", "logprob",
//! "top_logprobs": [...]}, ...]}`, as llama-server, vLLM and the OpenAI API stream them), read
//! within bounds (issue 31).
//!
//! The chunk parsers ([`crate::wire::openai`], [`crate::wire::chunk_scan`]) only find where the
//! value is; this reads it, and only when the run asked for logprobs, so a run without them pays
//! nothing. The value comes from a serve, so nothing in it is trusted: at most `tokens` token
//! records are kept and at most `top` alternatives each (the rest is passed over unread into
//! memory, so 10,000 alternatives cost no more memory than 20), every text is cut to
//! `token_bytes`, and a value of another shape is said, never a panic.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One streamed token as the serve scored it.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// Its text, cut to the bound.
    pub token: String,
    /// Its logprob, nats.
    pub logprob: f64,
    /// The serve's top alternatives at its position, in the order sent, at most `top`.
    pub top: Vec<Alternative>,
}

/// One alternative at a token's position.
#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    /// Its text, cut to the bound.
    pub token: String,
    /// Its logprob, nats.
    pub logprob: f64,
}

/// What one chunk's logprobs may add.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Token records this chunk may add (what the reply has room for).
    pub tokens: usize,
    /// Alternatives kept a token (K).
    pub top: usize,
    /// Bytes kept of each text.
    pub token_bytes: usize,
}

/// What one chunk's `logprobs` gave.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Read {
    /// The token records kept, in order.
    pub tokens: Vec<Scored>,
    /// Token records and alternatives not kept: past the bounds, or an alternative that is
    /// not `{token, logprob}` (an alternative is one of a set; dropping it shifts nothing).
    pub dropped: usize,
}

/// Why a chunk's `logprobs` could not be read whole: a token record without its text or its
/// logprob, or a value of another shape. A token cannot be dropped as an alternative can: the
/// records after it would stand at the wrong place in the text.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable(pub String);

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Read one chunk's `logprobs` value (its JSON text, as the chunk parsers found it; `null`
/// never reaches here) within `bounds`.
pub fn read(raw: &str, bounds: Bounds) -> Result<Read, Unreadable> {
    let mut out = Read::default();
    let mut de = serde_json::Deserializer::from_str(raw);
    let seed = Outer {
        bounds,
        out: &mut out,
    };
    seed.deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| Unreadable(format!("its logprobs are not of the OpenAI shape ({e})")))?;
    Ok(out)
}

/// `{"content": [...] or null, ...}`: other members (OpenAI's `refusal`) passed over.
struct Outer<'o> {
    bounds: Bounds,
    out: &'o mut Read,
}

impl<'de> DeserializeSeed<'de> for Outer<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Outer<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with `content`")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key != "content" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if std::mem::replace(&mut seen, true) {
                return Err(serde::de::Error::duplicate_field("content"));
            }
            map.next_value_seed(Content {
                bounds: self.bounds,
                out: self.out,
            })?;
        }
        Ok(())
    }
}

/// `content`: the token records, or `null` (none in this chunk).
struct Content<'o> {
    bounds: Bounds,
    out: &'o mut Read,
}

impl<'de> DeserializeSeed<'de> for Content<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Content<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of token records or null")
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut at = 0;
        loop {
            if self.out.tokens.len() >= self.bounds.tokens {
                // Past the reply's room: passed over, counted, never held.
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    self.out.dropped += 1;
                }
                return Ok(());
            }
            let Some(entry) = seq.next_element_seed(Entry {
                bounds: self.bounds,
                dropped: &mut self.out.dropped,
            })?
            else {
                return Ok(());
            };
            let entry = entry.map_err(|why| {
                serde::de::Error::custom(format_args!("token record {}: {why}", at + 1))
            })?;
            self.out.tokens.push(entry);
            at += 1;
        }
    }
}

/// A token record as the serve wrote it; `bytes` (the token's UTF-8, for tokens that are not
/// whole characters) is passed over: `token` is what the reply's text holds.
#[derive(Deserialize)]
struct EntryWire<'a> {
    #[serde(borrow)]
    token: Cow<'a, str>,
    logprob: f64,
    #[serde(default, borrow)]
    top_logprobs: Option<TopWire<'a>>,
}

/// `top_logprobs` held as the raw text of its first [`MOST_ALTERNATIVES_READ`] entries: each is
/// read apart, so a malformed alternative is dropped alone.
struct TopWire<'a>(Vec<&'a RawValue>, usize);

/// Alternatives held raw before they are read: K is at most 20 (`--logprobs`), and a serve's
/// 10,000 are passed over, not held.
const MOST_ALTERNATIVES_READ: usize = 20;

impl<'de: 'a, 'a> Deserialize<'de> for TopWire<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopWire<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of alternatives")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TopWire<'de>, A::Error> {
                let (mut kept, mut past) = (Vec::new(), 0);
                while kept.len() < MOST_ALTERNATIVES_READ {
                    match seq.next_element::<&'de RawValue>()? {
                        Some(raw) => kept.push(raw),
                        None => return Ok(TopWire(kept, 0)),
                    }
                }
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    past += 1;
                }
                Ok(TopWire(kept, past))
            }
        }
        d.deserialize_seq(V)
    }
}

#[derive(Deserialize)]
struct AlternativeWire<'a> {
    #[serde(borrow)]
    token: Cow<'a, str>,
    logprob: f64,
}

/// One token record, read from its raw text so that what is wrong with it is said for it
/// alone ("token record 3: missing field `logprob`").
struct Entry<'d> {
    bounds: Bounds,
    dropped: &'d mut usize,
}

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = Result<Scored, String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        let wire: EntryWire = match serde_json::from_str(raw.get()) {
            Ok(w) => w,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let cut = self.bounds.token_bytes;
        let mut top = Vec::new();
        if let Some(TopWire(raws, past)) = wire.top_logprobs {
            *self.dropped += past;
            for raw in raws {
                match serde_json::from_str::<AlternativeWire>(raw.get()) {
                    Ok(a) if top.len() < self.bounds.top => top.push(Alternative {
                        token: cut_text(&a.token, cut),
                        logprob: a.logprob,
                    }),
                    _ => *self.dropped += 1,
                }
            }
        }
        Ok(Ok(Scored {
            token: cut_text(&wire.token, cut),
            logprob: wire.logprob,
            top,
        }))
    }
}

/// `text`'s first `max` bytes, at a character's boundary, as a new string sized to them.
pub fn cut_text(text: &str, max: usize) -> String {
    let mut cut = text.len().min(max);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text[..cut].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Bounds = Bounds {
        tokens: 100,
        top: 5,
        token_bytes: 256,
    };

    fn scored(token: &str, logprob: f64, top: &[(&str, f64)]) -> Scored {
        Scored {
            token: token.into(),
            logprob,
            top: top
                .iter()
                .map(|(t, l)| Alternative {
                    token: (*t).into(),
                    logprob: *l,
                })
                .collect(),
        }
    }

    #[test]
    fn the_openai_shape_is_read_bytes_and_refusal_passed_over() {
        let raw = r#"{"content":[{"token":"Paris","logprob":-0.01,"bytes":[80,97,114,105,115],"top_logprobs":[{"token":"Paris","logprob":-0.01,"bytes":[80]},{"token":" London","logprob":-4.2,"bytes":null}]},{"token":"\n","logprob":-1,"top_logprobs":[]}],"refusal":null}"#;
        let r = read(raw, B).unwrap();
        assert_eq!(
            r.tokens,
            [
                scored("Paris", -0.01, &[("Paris", -0.01), (" London", -4.2)]),
                scored("\n", -1.0, &[]),
            ]
        );
        assert_eq!(r.dropped, 0);
        // llama-server's and vLLM's `content: null`, and an empty list: nothing, no fault.
        for raw in [r#"{"content":null}"#, r#"{"content":[]}"#, r#"{}"#] {
            assert_eq!(read(raw, B).unwrap(), Read::default(), "{raw}");
        }
    }

    #[test]
    fn bounds_keep_k_alternatives_the_rooms_tokens_and_cut_texts() {
        let alts: Vec<String> = (0..10_000)
            .map(|i| format!(r#"{{"token":"a{i}","logprob":-{i}.5}}"#))
            .collect();
        let long = "é".repeat(600_000); // 1.2 MB, two bytes a character
        let raw = format!(
            r#"{{"content":[{{"token":"{long}","logprob":-0.1,"top_logprobs":[{}]}},{{"token":"b","logprob":-2}},{{"token":"c","logprob":-3}}]}}"#,
            alts.join(",")
        );
        let r = read(
            &raw,
            Bounds {
                tokens: 2,
                top: 3,
                token_bytes: 255,
            },
        )
        .unwrap();
        assert_eq!(r.tokens.len(), 2, "the room's two, not three");
        assert_eq!(
            r.tokens[0].token.len(),
            254,
            "cut at a character's boundary"
        );
        assert_eq!(r.tokens[0].top.len(), 3);
        assert_eq!(r.tokens[0].top[2].token, "a2");
        // 9,980 passed over unread, 17 read and past K, 1 token past the room.
        assert_eq!(r.dropped, 9_980 + 17 + 1);
    }

    #[test]
    fn malformed_alternatives_are_dropped_and_malformed_tokens_said() {
        let raw = r#"{"content":[{"token":"a","logprob":-1,"top_logprobs":[{"token":7,"logprob":-1},null,{"token":"x"},{"token":"y","logprob":-2}]}]}"#;
        let r = read(raw, B).unwrap();
        assert_eq!(r.tokens, [scored("a", -1.0, &[("y", -2.0)])]);
        assert_eq!(r.dropped, 3);
        // `top_logprobs: null` is none sent.
        let r = read(
            r#"{"content":[{"token":"a","logprob":-1,"top_logprobs":null}]}"#,
            B,
        );
        assert_eq!(r.unwrap().tokens, [scored("a", -1.0, &[])]);
        for (why, raw) in [
            ("not an object", r#""logprobs""#),
            ("a number", "5"),
            ("content an object", r#"{"content":{"token":"a"}}"#),
            ("content a string", r#"{"content":"a"}"#),
            ("content twice", r#"{"content":[],"content":[]}"#),
            ("a null token record", r#"{"content":[null]}"#),
            ("no logprob", r#"{"content":[{"token":"a"}]}"#),
            ("no token", r#"{"content":[{"logprob":-1}]}"#),
            (
                "a logprob as a string",
                r#"{"content":[{"token":"a","logprob":"-1"}]}"#,
            ),
            (
                "a null logprob",
                r#"{"content":[{"token":"a","logprob":null}]}"#,
            ),
            (
                "a logprob past f64",
                r#"{"content":[{"token":"a","logprob":-1e400}]}"#,
            ),
            (
                "top_logprobs an object",
                r#"{"content":[{"token":"a","logprob":-1,"top_logprobs":{}}]}"#,
            ),
            ("truncated", r#"{"content":[{"token":"a","logprob":-1}"#),
            ("trailing", r#"{"content":[]} x"#),
        ] {
            let e = read(raw, B).expect_err(why);
            assert!(e.0.starts_with("its logprobs are not"), "{why}: {e}");
        }
        let e = read(
            r#"{"content":[{"token":"a","logprob":-1},{"token":"b"}]}"#,
            B,
        )
        .unwrap_err();
        assert!(e.0.contains("token record 2"), "{e}");
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever JSON or bytes a serve puts there: an answer or a fault, never a panic, and
        /// never more than the bounds.
        #[test]
        fn anything_is_read_within_bounds_or_said(raw in ".{0,200}", k in 1usize..4, room in 0usize..4) {
            let b = Bounds { tokens: room, top: k, token_bytes: 4 };
            if let Ok(r) = read(&raw, b) {
                prop_assert!(r.tokens.len() <= room);
                for t in &r.tokens {
                    prop_assert!(t.top.len() <= k && t.token.len() <= 4);
                }
            }
        }

        #[test]
        fn generated_records_are_read_as_they_were_written(
            tokens in proptest::collection::vec(("[a-z \\n\"é]{0,6}", -30.0f64..0.0, proptest::collection::vec(("[a-z]{0,3}", -30.0f64..0.0), 0..6)), 0..6),
            k in 1usize..6,
        ) {
            let content: Vec<serde_json::Value> = tokens.iter().map(|(t, l, top)| serde_json::json!({
                "token": t, "logprob": l, "bytes": t.as_bytes(),
                "top_logprobs": top.iter().map(|(a, al)| serde_json::json!({"token": a, "logprob": al})).collect::<Vec<_>>(),
            })).collect();
            let raw = serde_json::json!({"content": content}).to_string();
            let r = read(&raw, Bounds { tokens: 100, top: k, token_bytes: 256 }).unwrap();
            prop_assert_eq!(r.tokens.len(), tokens.len());
            for (got, (t, l, top)) in r.tokens.iter().zip(&tokens) {
                prop_assert_eq!(&got.token, t);
                // serde_json's default float reading is within an ulp, not exact.
                prop_assert!((got.logprob - *l).abs() <= 1e-12 * l.abs().max(1.0));
                prop_assert_eq!(got.top.len(), top.len().min(k));
            }
        }
    }
}
