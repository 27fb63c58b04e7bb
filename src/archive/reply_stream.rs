//! replies.jsonl read as a stream: one line in memory at a time, each record handed on as it
//! is parsed and the file's sha256 taken as it is read, never the file whole.
//!
//! Read whole, a judge held each file's bytes beside its parsed records: 176 MB of text for
//! 2,000 replies of 200 tokens at K=10, four such files for a reference and two known-good
//! builds (issue 52). A known-good build's replies are walked as they come and dropped
//! ([`crate::judging::archived`]); the candidate's and the reference's are kept.
//!
//! The file is the gate's own append log, so its last line may be a part of one (the run was
//! killed while it wrote it): a last line without its newline that is no record is set aside
//! and said. (A last line without its newline that does read as a record, as a hand-written
//! file may have, is whole.)

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::archive::digest;
use crate::archive::record::{read_plain_reply, ReplyRecord};
use crate::archive::safe_open::{self, OpenError};

/// What a stream of replies.jsonl read besides its records.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    /// The sha256 of every byte read, hex.
    pub sha256: String,
    /// The bytes of a last line that was never finished, set aside; `None` when there was none.
    pub cut: Option<usize>,
}

/// Bytes read at a time: a reply of 200 tokens with K=10 is some 90 kB, so most lines are
/// read where they lie in the buffer; a line longer than it is gathered.
const BUFFER: usize = 1 << 20;

/// Line `n` (from 1) of replies.jsonl as a record: what it says checked against how the gate
/// records (a reply's stamps in order).
pub fn parse_line(n: usize, line: &[u8]) -> Result<ReplyRecord> {
    // Most of a line of the gate's is its logprobs, read by hand; serde_json reads the rest, and
    // any line that is not plain whole.
    let r: ReplyRecord = match read_plain_reply(line) {
        Some(r) => r,
        None => serde_json::from_slice(line)
            .with_context(|| format!("line {n} is not a reply record"))?,
    };
    if let Some(why) = r.impossible() {
        bail!("line {n}: {} cannot be a record of a run: {why}", r.name());
    }
    Ok(r)
}

/// Read replies.jsonl at `path` (at most `cap` bytes) as a stream, handing each record to
/// `take` in the file's order. The outer error is a line that is no record (named by its
/// number); the inner one, that the file could not be opened or read (absent, not a file, past
/// its cap), for the caller to say as it says other files.
pub fn stream_replies(
    path: &Path,
    cap: u64,
    take: &mut dyn FnMut(ReplyRecord),
) -> Result<std::result::Result<Streamed, OpenError>> {
    stream_replies_in(path, cap, BUFFER, take)
}

/// [`stream_replies`] through a buffer of `buffer` bytes.
fn stream_replies_in(
    path: &Path,
    cap: u64,
    buffer: usize,
    take: &mut dyn FnMut(ReplyRecord),
) -> Result<std::result::Result<Streamed, OpenError>> {
    let file = match safe_open::open_capped(path, cap) {
        Ok((file, _)) => file,
        Err(e) => return Ok(Err(e)),
    };
    let mut reader = BufReader::with_capacity(buffer, file.take(cap + 1));
    let mut hasher = Sha256::new();
    let (mut gathered, mut n, mut read) = (Vec::new(), 0usize, 0u64);
    let mut cut = None;
    loop {
        // A line whole in the buffer is read where it lies (no copy, and the newline found by a
        // vector search, not the standard library's word at a time); any other is gathered.
        let buffered = match reader.fill_buf() {
            Ok(buffered) => buffered,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Ok(Err(OpenError::Io(path.to_path_buf(), e))),
        };
        if buffered.is_empty() {
            break;
        }
        let in_place = memchr::memchr(b'\n', buffered).map(|i| i + 1);
        let line = match in_place {
            Some(len) => &buffered[..len],
            None => {
                gathered.clear();
                // `read_until` reads on past an interrupted read itself.
                if let Err(e) = reader.read_until(b'\n', &mut gathered) {
                    return Ok(Err(OpenError::Io(path.to_path_buf(), e)));
                }
                &gathered[..]
            }
        };
        let got = line.len();
        read += got as u64;
        if read > cap {
            return Ok(Err(safe_open::too_large(path, read, cap)));
        }
        hasher.update(line);
        n += 1;
        let whole = line.last() == Some(&b'\n');
        let body = if whole { &line[..got - 1] } else { line };
        let parsed = (!body.iter().all(u8::is_ascii_whitespace)).then(|| parse_line(n, body));
        let unfinished = (!whole).then_some(body.len());
        if let Some(len) = in_place {
            reader.consume(len);
        }
        match parsed {
            None => {}
            Some(Ok(r)) => take(r),
            // The last line, unfinished and no record: the run was killed while writing it.
            Some(Err(_)) if unfinished.is_some() => cut = unfinished,
            Some(Err(e)) => {
                return Err(e).with_context(|| format!("failed to read {}", path.display()))
            }
        }
    }
    Ok(Ok(Streamed {
        sha256: digest::hex(&hasher.finalize()),
        cut,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::rundir::parse_replies;

    /// The oracle: the file read whole, split into its whole lines and a last line that was
    /// never finished (one without its newline that is not a reply), as the stream must.
    fn split_cut_line(bytes: &[u8]) -> (&[u8], Option<&[u8]>) {
        if bytes.ends_with(b"\n") {
            return (bytes, None);
        }
        let start = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let last = &bytes[start..];
        if last.iter().all(u8::is_ascii_whitespace)
            || serde_json::from_slice::<ReplyRecord>(last).is_ok()
        {
            return (bytes, None);
        }
        (&bytes[..start], Some(last))
    }

    fn record(index: usize) -> String {
        let r = ReplyRecord::new(index, "p", None);
        serde_json::to_string(&r).unwrap()
    }

    /// Stream `bytes` as a file; the records' indexes and what else was read.
    fn streamed(
        bytes: &[u8],
        cap: u64,
    ) -> Result<std::result::Result<(Vec<usize>, Streamed), String>> {
        streamed_in(bytes, cap, BUFFER)
    }

    fn streamed_in(
        bytes: &[u8],
        cap: u64,
        buffer: usize,
    ) -> Result<std::result::Result<(Vec<usize>, Streamed), String>> {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("replies.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let mut got = Vec::new();
        let s = stream_replies_in(&path, cap, buffer, &mut |r| got.push(r.index))?;
        Ok(s.map(|s| (got, s)).map_err(|e| e.to_string()))
    }

    #[test]
    fn a_stream_reads_as_the_whole_file_does_cut_last_line_and_all() {
        let (a, b) = (record(1), record(2));
        let cases: Vec<Vec<u8>> = vec![
            format!("{a}\n{b}\n").into(),
            format!("{a}\n\n  \n{b}\n").into(),
            format!("{a}\n{b}").into(),
            format!("{a}\n{}", &b[..b.len() / 2]).into(),
            format!("{a}\n   ").into(),
            Vec::new(),
            (1..=9).map(|i| record(i) + "\n").collect::<String>().into(),
        ];
        // Lines wholly in the buffer, across its end, and longer than it.
        for buffer in [1, 7, a.len() + 3, 3 * a.len(), BUFFER] {
            for bytes in &cases {
                let (got, s) = streamed_in(bytes, 1 << 20, buffer).unwrap().unwrap();
                let (whole, cut) = split_cut_line(bytes);
                let expected: Vec<usize> = parse_replies(whole)
                    .unwrap()
                    .iter()
                    .map(|r| r.index)
                    .collect();
                let said = String::from_utf8_lossy(bytes);
                assert_eq!(got, expected, "{buffer}: {said}");
                assert_eq!(s.cut, cut.map(<[u8]>::len), "{buffer}: {said}");
                assert_eq!(s.sha256, digest::sha256(bytes), "{buffer}: {said}");
            }
        }
    }

    #[test]
    fn a_bad_line_is_named_as_the_whole_file_names_it() {
        let a = record(1);
        for bytes in [
            format!("{a}\n{{\"index\": 1}}\n"),
            format!("\n{a}\nnot json\n{a}"),
        ] {
            let streamed = format!("{:#}", streamed(bytes.as_bytes(), 1 << 20).unwrap_err());
            let whole = format!("{:#}", parse_replies(bytes.as_bytes()).unwrap_err());
            assert!(streamed.ends_with(&whole), "{streamed} | {whole}");
            assert!(streamed.starts_with("failed to read "), "{streamed}");
        }
    }

    #[test]
    fn past_its_cap_or_absent_the_file_is_not_read() {
        let a = record(1);
        let bytes = format!("{a}\n{a}\n");
        let e = streamed(bytes.as_bytes(), 10).unwrap().unwrap_err();
        assert!(e.contains("10"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let gone = stream_replies(&d.path().join("none"), 10, &mut |_| {}).unwrap();
        assert!(gone.unwrap_err().is_not_found());
    }
}
