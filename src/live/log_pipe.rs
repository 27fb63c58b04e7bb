//! The serve's output: a pipe the gate reads and copies into serve.log, keeping its head and its
//! tail and dropping the middle of a flood.
//!
//! The serve once wrote into serve.log directly, and that gave it two things a candidate must
//! not have (issue 30): no bound (a serve wrote 1.5 GiB in 6 s, and could fill the disk), and
//! a name for the run directory (its own `/proc/self/fd/1`, from which it relinked the run's
//! files). Its stdout and stderr are now the write end of a pipe: `/proc/self/fd/1` names
//! `pipe:[…]`, not a file. A thread of the gate's drains the pipe whatever happens (a serve
//! blocked on a full pipe would stall, and its replies with it), keeps the first
//! [`HEAD_BYTES`] in serve.log as they come, and, past them, the most recent
//! [`TAIL_BYTES`] (at least half of it) in two unnamed temporary files it writes in turn. At
//! the end serve.log gets a marker line saying how many bytes were dropped, then the tail. Its
//! memory is one read buffer, whatever the serve writes.
//!
//! The log is then read for the verdict from the descriptor the gate wrote it through, never
//! reopened by its path, and never past what the gate kept: a FIFO or a 1 TiB sparse file put
//! at the path meanwhile is not what is read.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::archive::rundir;

/// The most bytes kept of the serve's output from its start.
pub const HEAD_BYTES: u64 = rundir::SERVE_LOG_HEAD;
/// The most bytes kept of the serve's output before its end (at least half as many are kept
/// whenever more was written).
pub const TAIL_BYTES: u64 = rundir::SERVE_LOG_TAIL;

/// How many bytes one read takes from the pipe.
const READ_BYTES: usize = 64 * 1024;

/// The most bytes read once the gate has said the serve's tree is gone: what a pipe can hold
/// (a serve can make its pipe 1 MiB), with room; a writer the gate could not kill does not
/// keep the copier reading.
const DRAIN_BYTES: u64 = 16 << 20;

/// The most bytes of serve.log read back for the verdict: what the gate kept, and its marker.
pub const fn readable_bytes() -> u64 {
    HEAD_BYTES + TAIL_BYTES + 4096
}

/// What the copy of the serve's output came to.
#[derive(Debug)]
pub struct Copied {
    /// serve.log, as the gate wrote it (read it with [`Copied::reader`]); `None` only when the
    /// copier failed.
    pub log: Option<File>,
    /// Every byte the serve wrote.
    pub seen: u64,
    /// The bytes dropped from the middle (0 when the log is whole).
    pub dropped: u64,
    /// The first write into serve.log that failed (a full disk): the pipe was drained to the
    /// end all the same, and serve.log holds what was written before.
    pub error: Option<String>,
}

impl Copied {
    /// The copy of a copier that failed (the gate's bug): no log, and why.
    pub fn failed() -> Copied {
        Copied {
            log: None,
            seen: 0,
            dropped: 0,
            error: Some("the serve log's copier failed".to_string()),
        }
    }

    /// serve.log from its start, through the gate's own descriptor, at most what the gate
    /// kept: whatever was done to the file by its name is not what is read past that.
    pub fn reader(&self) -> Result<impl Read> {
        let log = self.log.as_ref().context("the serve log's copier failed")?;
        let mut log = log.try_clone().context("failed to read serve.log")?;
        log.seek(SeekFrom::Start(0))
            .context("failed to read serve.log")?;
        Ok(log.take(readable_bytes()))
    }
}

/// The pipe between the serve's output and serve.log, and the thread that copies it.
#[derive(Debug)]
pub struct LogPipe {
    /// The write end, for the serve's stdout and stderr; the gate closes its copy once the
    /// supervisor has its own.
    serve_end: Option<File>,
    /// Closing this tells the copier the serve's tree is gone: it drains what is in the pipe
    /// and ends, even when a process the gate could not kill still holds the write end.
    wake: Option<OwnedFd>,
    thread: Option<JoinHandle<Copied>>,
}

impl LogPipe {
    /// Start copying into `log` (serve.log, open for appending and reading).
    pub fn start(log: File) -> Result<LogPipe> {
        Self::start_capped(log, HEAD_BYTES, TAIL_BYTES)
    }

    fn start_capped(log: File, head: u64, tail: u64) -> Result<LogPipe> {
        let (read, write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).context("failed to make the serve's log pipe")?;
        let (wake_read, wake_write) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).context("failed to make the serve's log pipe")?;
        nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
            .context("failed to make the serve's log pipe")?;
        let thread = std::thread::Builder::new()
            .name("serve-log".to_string())
            .spawn(move || copy(File::from(read), wake_read, Keeper::new(log, head, tail)))
            .context("failed to start the serve log's copier thread")?;
        Ok(LogPipe {
            serve_end: Some(File::from(write)),
            wake: Some(wake_write),
            thread: Some(thread),
        })
    }

    /// The pipe's write end, for the serve's stdout and stderr.
    pub fn serve_end(&self) -> Option<&File> {
        self.serve_end.as_ref()
    }

    /// Close the gate's copy of the write end: the pipe then ends when the serve's tree has
    /// closed theirs.
    pub fn close_serve_end(&mut self) {
        self.serve_end = None;
    }

    /// Once the serve's tree is gone: drain what the pipe holds, finish serve.log, and say
    /// what it came to. Blocks for as long as the last writes to disk take.
    pub fn finish(mut self) -> Copied {
        self.serve_end = None;
        self.wake = None;
        let thread = self.thread.take().expect("finished once");
        // The copier is plain code over a buffer; a panic there is the gate's bug, said where
        // serve.log's problems are.
        thread.join().unwrap_or_else(|_| Copied::failed())
    }
}

impl Drop for LogPipe {
    fn drop(&mut self) {
        // An interrupted run drops the pipe without finishing: the copier still ends (the wake
        // pipe closes here) and serve.log keeps what it had.
        self.serve_end = None;
        self.wake = None;
    }
}

/// Drain `pipe` into `keeper` until the serve's tree has closed it, or until `wake` closes and
/// what the pipe holds then is read.
fn copy(mut pipe: File, wake: OwnedFd, mut keeper: Keeper) -> Copied {
    let mut buf = vec![0u8; READ_BYTES];
    let mut waking = false;
    let mut drained = 0u64;
    loop {
        if !waking {
            let mut fds = [
                PollFd::new(pipe.as_fd(), PollFlags::POLLIN),
                PollFd::new(wake.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => waking = true,
            }
            let woken = fds[1].revents().is_some_and(|r| !r.is_empty());
            waking = waking || woken;
        }
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                keeper.take(&buf[..n]);
                if waking {
                    drained += n as u64;
                    if drained >= DRAIN_BYTES {
                        break;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Empty for now: wait again, or end when the gate said the tree is gone.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if waking {
                    break;
                }
            }
            Err(e) => {
                keeper.fail(&e);
                break;
            }
        }
    }
    keeper.finish()
}

/// serve.log's head, written as it comes, and the tail kept in two unnamed files in turn.
struct Keeper {
    log: File,
    head_left: u64,
    /// The two tail segments, each at most `segment` bytes; `current` is written.
    segments: [Option<File>; 2],
    current: usize,
    current_len: u64,
    /// Whether the other segment holds the bytes just before the current one.
    other_full: bool,
    segment: u64,
    seen: u64,
    dropped: u64,
    error: Option<String>,
}

impl Keeper {
    fn new(log: File, head: u64, tail: u64) -> Keeper {
        Keeper {
            log,
            head_left: head,
            segments: [None, None],
            current: 0,
            current_len: 0,
            other_full: false,
            segment: (tail / 2).max(1),
            seen: 0,
            dropped: 0,
            error: None,
        }
    }

    fn fail(&mut self, e: &std::io::Error) {
        if self.error.is_none() {
            self.error = Some(e.to_string());
        }
    }

    fn take(&mut self, mut bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        if self.head_left > 0 {
            let n = bytes
                .len()
                .min(usize::try_from(self.head_left).unwrap_or(usize::MAX));
            if self.error.is_none() {
                if let Err(e) = self.log.write_all(&bytes[..n]) {
                    self.fail(&e);
                }
            }
            self.head_left -= n as u64;
            bytes = &bytes[n..];
        }
        while !bytes.is_empty() {
            if self.current_len == self.segment {
                // The current segment is full: the other one's bytes are the oldest kept, and
                // are dropped now to take the newest.
                self.current = 1 - self.current;
                if self.other_full {
                    self.dropped += self.segment;
                }
                self.other_full = true;
                self.current_len = 0;
                if let Some(f) = &mut self.segments[self.current] {
                    if let Err(e) = f.set_len(0).and_then(|()| f.rewind()) {
                        self.fail(&e);
                    }
                }
            }
            let room = usize::try_from(self.segment - self.current_len).unwrap_or(usize::MAX);
            let n = bytes.len().min(room);
            self.write_tail(&bytes[..n]);
            self.current_len += n as u64;
            bytes = &bytes[n..];
        }
    }

    fn write_tail(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let slot = &mut self.segments[self.current];
        if slot.is_none() {
            match tempfile::tempfile() {
                Ok(f) => *slot = Some(f),
                Err(e) => return self.fail(&e),
            }
        }
        if let Some(f) = slot {
            if let Err(e) = f.write_all(bytes) {
                self.fail(&e);
            }
        }
    }

    /// Append the marker (when bytes were dropped) and the tail to serve.log, in order.
    fn finish(mut self) -> Copied {
        if self.error.is_none() {
            if let Err(e) = self.append_tail() {
                self.fail(&e);
            }
        }
        if self.error.is_none() {
            if let Err(e) = self.log.sync_data() {
                self.fail(&e);
            }
        }
        Copied {
            log: Some(self.log),
            seen: self.seen,
            dropped: self.dropped,
            error: self.error,
        }
    }

    fn append_tail(&mut self) -> std::io::Result<()> {
        if self.dropped > 0 {
            let marker = format!(
                "\n[npu-serve-smoke: {} bytes of the serve's output were dropped here; serve.log keeps the first {} and the last {}]\n",
                self.dropped,
                self.seen - self.dropped - self.tail_kept(),
                self.tail_kept()
            );
            self.log.write_all(marker.as_bytes())?;
        }
        let older = 1 - self.current;
        let order = if self.other_full {
            [Some(older), Some(self.current)]
        } else {
            [Some(self.current), None]
        };
        for i in order.into_iter().flatten() {
            if let Some(f) = &mut self.segments[i] {
                f.rewind()?;
                std::io::copy(f, &mut self.log)?;
            }
        }
        Ok(())
    }

    fn tail_kept(&self) -> u64 {
        self.current_len + if self.other_full { self.segment } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(c: &Copied) -> Vec<u8> {
        let mut out = Vec::new();
        c.reader().unwrap().read_to_end(&mut out).unwrap();
        out
    }

    fn pipe_through(chunks: &[&[u8]], head: u64, tail: u64) -> Copied {
        let mut pipe = LogPipe::start_capped(tempfile::tempfile().unwrap(), head, tail).unwrap();
        let mut w = pipe.serve_end().unwrap().try_clone().unwrap();
        pipe.close_serve_end();
        for c in chunks {
            w.write_all(c).unwrap();
        }
        drop(w);
        pipe.finish()
    }

    #[test]
    fn a_log_within_the_caps_is_kept_whole() {
        let c = pipe_through(&[b"hello ", b"world\n"], 4, 8);
        assert_eq!(read_all(&c), b"hello world\n");
        assert_eq!((c.seen, c.dropped, c.error), (12, 0, None));
    }

    #[test]
    fn a_flood_keeps_its_head_and_its_newest_tail_with_a_marker_between() {
        // head 4, tail 8 (two segments of 4), 4 + 26 bytes written in two pieces: the tail
        // kept is the newest 4 to 8 bytes, whole segments of the rest dropped.
        let all: Vec<u8> = (b'a'..=b'z').collect();
        let mut input = b"HEAD".to_vec();
        input.extend_from_slice(&all);
        let c = pipe_through(&[&input[..10], &input[10..]], 4, 8);
        let out = read_all(&c);
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(text.starts_with("HEAD\n[npu-serve-smoke: "), "{text}");
        let kept_tail = &text[text.rfind("]\n").unwrap() + 2..];
        assert!(all.ends_with(kept_tail.as_bytes()), "{kept_tail}");
        assert!(
            (4..=8).contains(&kept_tail.len()),
            "kept {} of the tail",
            kept_tail.len()
        );
        assert_eq!(c.seen, 30);
        assert_eq!(c.dropped as usize, 26 - kept_tail.len());
        assert!(
            text.contains(&format!(
                "{} bytes of the serve's output were dropped",
                c.dropped
            )),
            "{text}"
        );
    }

    #[test]
    fn the_pipe_is_drained_to_its_end_after_a_write_fails() {
        // serve.log opened read-only: every write into it fails, yet the writer never blocks
        // (a serve must not stall on a full pipe because the disk is full).
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("serve.log");
        std::fs::write(&path, b"").unwrap();
        let log = File::open(&path).unwrap();
        let mut pipe = LogPipe::start_capped(log, 1024, 1024).unwrap();
        let mut w = pipe.serve_end().unwrap().try_clone().unwrap();
        pipe.close_serve_end();
        // Far more than a pipe's buffer (64 KiB): only a reader that keeps reading lets this
        // finish.
        let block = vec![b'x'; 1 << 20];
        for _ in 0..4 {
            w.write_all(&block).unwrap();
        }
        drop(w);
        let c = pipe.finish();
        assert_eq!(c.seen, 4 << 20);
        assert!(c.error.is_some());
    }

    #[test]
    fn finishing_ends_the_copy_while_another_process_still_holds_the_write_end() {
        let pipe = LogPipe::start_capped(tempfile::tempfile().unwrap(), 64, 64).unwrap();
        // A copy of the write end kept open, as a process stuck in the kernel keeps it.
        let mut w = pipe.serve_end().unwrap().try_clone().unwrap();
        w.write_all(b"last words\n").unwrap();
        let c = pipe.finish();
        assert_eq!(read_all(&c), b"last words\n");
        drop(w);
    }

    #[test]
    fn an_attached_log_is_copied_head_and_tail() {
        let mut from = tempfile::tempfile().unwrap();
        from.write_all(b"0123456789abcdefghij").unwrap();
        from.rewind().unwrap();
        let mut out = Vec::new();
        let dropped = rundir::copy_head_and_tail(&mut from, &mut out, 3, 4).unwrap();
        assert_eq!(dropped, 13);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("012\n[npu-serve-smoke: 13 bytes"),
            "{text}"
        );
        assert!(text.ends_with("]\nghij"), "{text}");
        let mut small = tempfile::tempfile().unwrap();
        small.write_all(b"short").unwrap();
        small.rewind().unwrap();
        let mut out = Vec::new();
        assert_eq!(
            rundir::copy_head_and_tail(&mut small, &mut out, 3, 4).unwrap(),
            0
        );
        assert_eq!(out, b"short");
    }
}
