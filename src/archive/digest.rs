//! The archive's digests: the sha256 of each file of a run as the gate wrote it, and the check
//! that the files found later are those (issue 30, item 2).
//!
//! A serve that rewrote replies.jsonl on SIGTERM once made a live FAIL into a `judge` PASS and
//! a `compare` PASS. The gate hashes the bytes it writes as it writes them (never the disk at
//! the end: a serve can rewrite a file before the end), and the last write of run.json holds
//! them (`digests`). run.json cannot hold its own digest: it would have to hash the very bytes
//! that carry it; editing run.json itself (and dropping `digests` with it) is what the sha256
//! the gate prints at the end is for.
//!
//! [`check`] is pure: what run.json recorded, what the loader found, and which files the run
//! said it could not write.

use std::collections::BTreeMap;
use std::io::Read;

use sha2::{Digest, Sha256};

use crate::archive::record::NotArchived;

/// The first words of the line that says an archive's files are not what the gate wrote.
pub const CHANGED: &str = "the archive was changed after the run";

/// A sha256 as lowercase hex.
pub fn hex(digest: &[u8]) -> String {
    let mut s = String::with_capacity(digest.len() * 2);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The sha256 of `bytes`, hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The sha256 of everything `from` reads, hex, streamed.
pub fn sha256_of(mut from: impl Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return Ok(hex(&hasher.finalize())),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A file of the run as the loader found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Not there.
    Absent,
    /// There, with this sha256 (hex).
    Sha256(String),
    /// There, but not a file that can be read (a FIFO, a device, a directory, too large): why.
    Unreadable(String),
}

/// What an archive's digests say of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// run.json holds no digests: a run from before them, or one killed before its last
    /// write of run.json. Its files are judged as they are.
    NotRecorded,
    /// Every file is as the gate wrote it.
    Intact,
    /// What differs, one clause a file, e.g. `replies.jsonl is not what the gate wrote`.
    Changed(Vec<String>),
}

impl Integrity {
    /// The line that says so, `the archive was changed after the run: ...`; `None` unless
    /// changed.
    pub fn changed_line(&self) -> Option<String> {
        match self {
            Integrity::Changed(what) => Some(format!("{CHANGED}: {}", what.join("; "))),
            _ => None,
        }
    }
}

/// Hold the files `found` to the digests run.json `recorded` (`None`: it recorded none). Each
/// name in either map is looked at: a file with a digest must be there with that digest; a
/// file the loader reads that has none must not be there (the gate never wrote it, so someone
/// else did).
///
/// A file the run said it could not write (`not_archived`) is held to its digest too: the
/// digest is of what the gate did write (a whole file's last write that went through, the
/// replies appended before the first that failed, cut back to whole lines), which is what
/// the file holds when nothing else touched it, so an incomplete archive is not "changed".
/// One that differs is, with what the run said of it: a serve that made the gate's appends
/// fail (by unlinking replies.jsonl) and then wrote its own must not be judged by them.
pub fn check(
    recorded: Option<&BTreeMap<String, String>>,
    found: &BTreeMap<String, Found>,
    not_archived: &[NotArchived],
) -> Integrity {
    let Some(recorded) = recorded else {
        return Integrity::NotRecorded;
    };
    let short = |s: &str| s.chars().take(12).collect::<String>();
    let mut names: Vec<&String> = recorded.keys().chain(found.keys()).collect();
    names.sort();
    names.dedup();
    let mut changed = Vec::new();
    for name in names {
        let before = changed.len();
        let found = found.get(name).unwrap_or(&Found::Absent);
        match (recorded.get(name), found) {
            (Some(_), Found::Absent) => changed.push(format!("{name} is gone")),
            (Some(want), Found::Sha256(got)) if !want.eq_ignore_ascii_case(got) => {
                changed.push(format!(
                    "{name} is not what the gate wrote (sha256 {} written, {} found)",
                    short(want),
                    short(got)
                ))
            }
            (Some(_), Found::Sha256(_)) | (None, Found::Absent) => {}
            (Some(_), Found::Unreadable(why)) => {
                changed.push(format!("{name} is not the file the gate wrote ({why})"))
            }
            (None, Found::Sha256(_) | Found::Unreadable(_)) => {
                changed.push(format!("{name} was not written by the gate"))
            }
        }
        if let (Some(said), Some(missing)) = (
            changed.get_mut(before),
            not_archived.iter().find(|n| &n.file == name),
        ) {
            said.push_str(&format!(" (and the run could not write it all: {missing})"));
        }
    }
    if changed.is_empty() {
        Integrity::Intact
    } else {
        Integrity::Changed(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn found(pairs: &[(&str, Found)]) -> BTreeMap<String, Found> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn sha(s: &str) -> Found {
        Found::Sha256(sha256(s.as_bytes()))
    }

    #[test]
    fn the_sha256_is_the_standard_one() {
        // FIPS 180-2, appendix B.1.
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_of(&b"abc"[..]).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn an_archive_without_digests_is_not_recorded_whatever_its_files() {
        let f = found(&[("replies.jsonl", sha("x"))]);
        assert_eq!(check(None, &f, &[]), Integrity::NotRecorded);
        assert_eq!(Integrity::NotRecorded.changed_line(), None);
    }

    #[test]
    fn files_as_written_are_intact() {
        let d = map(&[
            ("replies.jsonl", &sha256(b"r")),
            ("result.json", &sha256(b"p")),
        ]);
        let f = found(&[
            ("replies.jsonl", sha("r")),
            ("result.json", sha("p")),
            ("load.json", Found::Absent),
        ]);
        assert_eq!(check(Some(&d), &f, &[]), Integrity::Intact);
    }

    #[test]
    fn a_changed_gone_unreadable_or_planted_file_is_changed_each_named() {
        let d = map(&[
            ("replies.jsonl", &sha256(b"r")),
            ("result.json", &sha256(b"p")),
            ("serve.log", &sha256(b"l")),
        ]);
        let f = found(&[
            ("replies.jsonl", sha("r plus a line")),
            ("result.json", Found::Absent),
            ("serve.log", Found::Unreadable("a FIFO, not a file".into())),
            ("metrics.json", sha("{}")),
        ]);
        let i = check(Some(&d), &f, &[]);
        assert_eq!(
            i.changed_line().unwrap(),
            format!(
                "the archive was changed after the run: metrics.json was not written by the gate; replies.jsonl is not what the gate wrote (sha256 {} written, {} found); result.json is gone; serve.log is not the file the gate wrote (a FIFO, not a file)",
                &sha256(b"r")[..12],
                &sha256(b"r plus a line")[..12]
            )
        );
    }

    #[test]
    fn a_file_the_run_could_not_write_all_of_is_intact_as_written_and_changed_otherwise() {
        // The digest is of the replies the gate appended before the disk filled: the file
        // holds them, whole, and is not changed.
        let d = map(&[("replies.jsonl", &sha256(b"r"))]);
        let failed = NotArchived {
            file: "replies.jsonl".into(),
            error: "No such file or directory (os error 2)".into(),
            from_reply: Some(2),
            replies_archived: Some(1),
            replies_made: Some(3),
        };
        let as_written = found(&[("replies.jsonl", sha("r"))]);
        assert_eq!(
            check(Some(&d), &as_written, std::slice::from_ref(&failed)),
            Integrity::Intact
        );
        // A serve that unlinked it (the gate's appends then fail) and wrote its own.
        let forged = found(&[("replies.jsonl", sha("forged"))]);
        assert_eq!(
            check(Some(&d), &forged, &[failed]).changed_line().unwrap(),
            format!(
                "the archive was changed after the run: replies.jsonl is not what the gate wrote (sha256 {} written, {} found) (and the run could not write it all: replies.jsonl: No such file or directory (os error 2) from reply 2 on (it holds 1 of 3 replies))",
                &sha256(b"r")[..12],
                &sha256(b"forged")[..12]
            )
        );
    }

    #[test]
    fn digests_compare_whatever_the_case_of_their_hex() {
        let d = map(&[("result.json", &sha256(b"p").to_uppercase())]);
        let f = found(&[("result.json", sha("p"))]);
        assert_eq!(check(Some(&d), &f, &[]), Integrity::Intact);
    }
}
