//! A logprob record's token text, interned: the same text is one number wherever it stands.
//!
//! A run with `--logprobs 10` records eleven texts a token (the token and its top ten), and a
//! judge of 2,000 replies of 200 tokens against a reference and two known-good builds reads 17.6
//! million of them; as `String`s (24 bytes and a heap block each) the archives alone took 1.6
//! GiB (issue 52, docs/performance.md). A model's vocabulary is some 50,000 to 250,000 texts, so
//! each is kept once, for the life of the process, and a record holds its 4-byte number:
//! comparing two tokens compares numbers. A serve that streams texts no vocabulary has costs
//! no more than before: each is at most [`crate::archive::record::LOGPROB_TOKEN_BYTES`] and
//! was held whole before.
//!
//! Reading a number's text takes no lock (the texts are in segments that never move, each slot
//! written once before its number is handed out); making a number takes one mutex, once a text
//! a thread (each thread keeps the numbers it has seen).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A token's text, interned ([`TokenText::as_str`] gives it back). Equal texts are equal
/// numbers, so `==` and hashing are on the number; it orders by nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenText(u32);

/// Slots in the first segment; segment `s` holds `FIRST << s`, so 23 segments hold more
/// numbers than a `u32` names.
const FIRST: usize = 1024;
const SEGMENTS: usize = 23;

/// The texts by number, in segments that are made once and never move.
static TEXTS: [OnceLock<Box<[OnceLock<&'static str>]>>; SEGMENTS] =
    [const { OnceLock::new() }; SEGMENTS];

/// Numbers by text.
type Numbers = HashMap<&'static str, u32, foldhash::fast::RandomState>;

/// The numbers by text; held while a number is made.
fn numbers() -> &'static Mutex<Numbers> {
    static NUMBERS: OnceLock<Mutex<Numbers>> = OnceLock::new();
    NUMBERS.get_or_init(|| Mutex::new(Numbers::default()))
}

/// The numbers a thread has made or looked up, by the text's bytes: the mutex is taken once a
/// text a thread, not once a token (two threads read two archives at once), and a text seen
/// before is found from bytes not yet checked as UTF-8.
#[derive(Default)]
struct Seen {
    /// Texts of at most [`SHORT`] bytes, by [`short_key`]: most of a vocabulary, found by one
    /// integer's hash and compare, not a byte string's.
    short: HashMap<u128, u32, foldhash::fast::RandomState>,
    /// Longer texts, by their bytes.
    long: HashMap<&'static [u8], u32, foldhash::fast::RandomState>,
}

/// The longest text [`short_key`] packs.
const SHORT: usize = 15;

/// `bytes` of at most [`SHORT`] as one number: the bytes, then zeros, then the length in the
/// last byte, so two texts have one key exactly when they are the same bytes.
fn short_key(bytes: &[u8]) -> Option<u128> {
    if bytes.len() > SHORT {
        return None;
    }
    // Shifted in a byte at a time: a copy into an array of 16 took a call to memcpy a text.
    let mut key = (bytes.len() as u128) << (8 * SHORT);
    for (i, &b) in bytes.iter().enumerate() {
        key |= u128::from(b) << (8 * i);
    }
    Some(key)
}

/// [`short_key`] of `line[at..at + len]`, read with one load of the 16 bytes from `at` where
/// the line holds them (a token's text in a line always has more after it), its bytes past
/// `len` masked off.
fn short_key_in(line: &[u8], at: usize, len: usize) -> Option<u128> {
    let sixteen: &[u8; 16] = line.get(at..at + 16)?.try_into().ok()?;
    (len <= SHORT).then(|| {
        let bytes = u128::from_le_bytes(*sixteen) & ((1u128 << (8 * len)) - 1);
        bytes | (len as u128) << (8 * SHORT)
    })
}

impl Seen {
    fn get(&self, bytes: &[u8]) -> Option<u32> {
        match short_key(bytes) {
            Some(key) => self.short.get(&key),
            None => self.long.get(bytes),
        }
        .copied()
    }

    fn insert(&mut self, kept: &'static str, n: u32) {
        match short_key(kept.as_bytes()) {
            Some(key) => self.short.insert(key, n),
            None => self.long.insert(kept.as_bytes(), n),
        };
    }
}

thread_local! {
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
}

/// This thread's numbers, borrowed by [`TokenText::interning`].
pub struct Interner<'a>(&'a mut Seen);

impl Interner<'_> {
    /// [`Self::of_bytes`] of `line[at..at + len]`.
    pub fn of_bytes_in(&mut self, line: &[u8], at: usize, len: usize) -> Option<TokenText> {
        if let Some(&n) = short_key_in(line, at, len).and_then(|key| self.0.short.get(&key)) {
            return Some(TokenText(n));
        }
        self.of_bytes(line.get(at..at + len)?)
    }

    /// [`TokenText::of_bytes`], the thread's numbers already in hand.
    pub fn of_bytes(&mut self, bytes: &[u8]) -> Option<TokenText> {
        match self.0.get(bytes) {
            Some(n) => Some(TokenText(n)),
            None => Some(self.made(std::str::from_utf8(bytes).ok()?)),
        }
    }

    /// [`TokenText::new`], the thread's numbers already in hand.
    fn of_text(&mut self, text: &str) -> TokenText {
        match self.0.get(text.as_bytes()) {
            Some(n) => TokenText(n),
            None => self.made(text),
        }
    }

    /// The number of `text`, new to this thread.
    fn made(&mut self, text: &str) -> TokenText {
        let (kept, n) = TokenText::make(text);
        self.0.insert(kept, n);
        TokenText(n)
    }
}

/// The segment of number `n`, and its place there.
fn place(n: u32) -> (usize, usize) {
    let blocks = n as usize / FIRST + 1;
    let segment = (usize::BITS - 1 - blocks.leading_zeros()) as usize;
    let start = ((1usize << segment) - 1) * FIRST;
    (segment, n as usize - start)
}

impl TokenText {
    /// The number of `text`, made the first time it is seen.
    pub fn new(text: &str) -> TokenText {
        Self::interning(|seen| seen.of_text(text))
    }

    /// The number of the text `bytes`, or `None` when they are not UTF-8: a text this thread
    /// has seen is found without checking them again (most of an archive's texts are).
    pub fn of_bytes(bytes: &[u8]) -> Option<TokenText> {
        Self::interning(|seen| seen.of_bytes(bytes))
    }

    /// `read` given this thread's numbers, borrowed once for all the texts it looks up: a
    /// reply's 2,200 texts at K=10 took a thread-local access each. `read` must make no
    /// [`TokenText`] but through the [`Interner`] (the numbers are borrowed meanwhile).
    pub fn interning<R>(read: impl FnOnce(&mut Interner<'_>) -> R) -> R {
        SEEN.with(|seen| read(&mut Interner(&mut seen.borrow_mut())))
    }

    /// The kept text and number of `text`, from the map every thread shares.
    fn make(text: &str) -> (&'static str, u32) {
        // A poisoned lock only means another thread panicked while it held it; the map is
        // whole between statements, so it is read on.
        let mut map = numbers().lock().unwrap_or_else(|e| e.into_inner());
        if let Some((&kept, &n)) = map.get_key_value(text) {
            return (kept, n);
        }
        let n = u32::try_from(map.len()).expect("fewer than 2^32 distinct token texts");
        let kept: &'static str = Box::leak(text.to_owned().into_boxed_str());
        let (segment, at) = place(n);
        let slots = TEXTS[segment].get_or_init(|| {
            (0..FIRST << segment)
                .map(|_| OnceLock::new())
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        // Written before the number is handed out, so any holder of the number finds it.
        let _ = slots[at].set(kept);
        map.insert(kept, n);
        (kept, n)
    }

    /// Its text.
    pub fn as_str(&self) -> &'static str {
        let (segment, at) = place(self.0);
        TEXTS[segment]
            .get()
            .and_then(|slots| slots[at].get())
            .copied()
            .expect("a token text's number is made only with its text")
    }
}

impl std::ops::Deref for TokenText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for TokenText {
    fn from(text: &str) -> Self {
        TokenText::new(text)
    }
}

impl From<String> for TokenText {
    fn from(text: String) -> Self {
        TokenText::new(&text)
    }
}

impl PartialEq<str> for TokenText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for TokenText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for TokenText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for TokenText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for TokenText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TokenText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = TokenText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a token's text")
            }
            // Borrowed or not, the text is looked up as it stands: no copy unless it is new.
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TokenText, E> {
                Ok(TokenText::new(v))
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_are_one_number_and_give_their_text_back() {
        let a = TokenText::new(" Paris");
        let b = TokenText::from(String::from(" Paris"));
        let c = TokenText::from(" paris");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.as_str(), " Paris");
        assert_eq!(c.as_str(), " paris");
        assert!(a == " Paris");
        assert_eq!(a.len(), 6);
        assert_eq!(format!("{a:?} {c}"), "\" Paris\"  paris");
        assert_eq!(TokenText::of_bytes(b" Paris"), Some(a));
        assert_eq!(
            TokenText::of_bytes(b" new from bytes").unwrap(),
            " new from bytes"
        );
        assert_eq!(TokenText::of_bytes(b"\xff\xfe"), None);
    }

    #[test]
    fn a_short_key_is_its_bytes_and_length_read_in_place_or_not() {
        let line = b"ab\0\0cdefghijklmnopqrstuvwxyz0123456789";
        for at in 0..line.len() {
            for len in 0..=(line.len() - at).min(SHORT + 2) {
                let bytes = &line[at..at + len];
                let key = short_key(bytes);
                assert_eq!(key.is_some(), len <= SHORT, "{at} {len}");
                if at + 16 <= line.len() {
                    assert_eq!(short_key_in(line, at, len), key, "{at} {len}");
                }
                // Distinct texts, distinct keys: a trailing NUL is a byte, not padding.
                if let Some(k) = key.filter(|_| len < SHORT) {
                    let mut longer = bytes.to_vec();
                    longer.push(0);
                    assert_ne!(short_key(&longer), Some(k), "{at} {len}");
                }
            }
        }
        // Read in place or not, one text is one number, at and past the longest short text.
        for text in ["fifteen bytes!!", "sixteen bytes!!!", "a", ""] {
            let mut line = text.as_bytes().to_vec();
            line.extend_from_slice(br#"","logprob":-1.0}"#);
            let found = TokenText::interning(|seen| seen.of_bytes_in(&line, 0, text.len()));
            assert_eq!(found, Some(TokenText::new(text)), "{text}");
        }
    }

    #[test]
    fn the_segments_cover_every_number_once() {
        // Each number has one place, the places of consecutive numbers are consecutive, and a
        // segment's last place is its size less one.
        let mut last = place(0);
        assert_eq!(last, (0, 0));
        for n in 1..(FIRST as u32 * 20) {
            let p = place(n);
            if p.0 == last.0 {
                assert_eq!(p.1, last.1 + 1, "{n}");
            } else {
                assert_eq!((p.0, p.1, last.1), (last.0 + 1, 0, (FIRST << last.0) - 1));
            }
            last = p;
        }
        let (segment, at) = place(u32::MAX);
        assert!(segment < SEGMENTS && at < FIRST << segment);
    }

    #[test]
    fn texts_round_trip_through_json_escaped_or_not() {
        let texts = [" w0", "é\n\"q\"", "\u{0}", ""];
        for t in texts {
            let json = serde_json::to_string(&TokenText::new(t)).unwrap();
            assert_eq!(json, serde_json::to_string(t).unwrap());
            let back: TokenText = serde_json::from_str(&json).unwrap();
            assert_eq!(back.as_str(), t);
        }
        assert!(serde_json::from_str::<TokenText>("3").is_err());
    }

    #[test]
    fn many_threads_make_one_number_a_text() {
        let made: Vec<Vec<TokenText>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..3000)
                            .map(|i| TokenText::new(&format!("threaded {i}")))
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for other in &made[1..] {
            assert_eq!(other, &made[0]);
        }
        for (i, t) in made[0].iter().enumerate() {
            assert_eq!(t.as_str(), format!("threaded {i}"));
        }
    }
}
