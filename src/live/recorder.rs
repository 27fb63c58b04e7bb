//! The run directory's writer: a thread of its own that every write of a run goes to over a
//! channel, in order, so that nothing that can block on the disk runs on the thread that reads
//! the serve's sockets and stamps their bytes.
//!
//! A sync on a slow disk (an RK3588's eMMC, a busy runner's overlay filesystem) once ran on
//! that thread between two streams' reads during the bursts, and every other stream's gaps grew
//! by it: the gate reported the serve slower than it was (issue 29). Hyperfine's and nextest's
//! recorders are apart from their runners for the same reason. The gate's progress lines go
//! through the same thread while it runs ([`crate::console::divert`]): a CI log pipe that is
//! read slowly blocks a write to stderr just as a disk does.
//!
//! A write that fails never changes the run: the writer keeps going, remembers what it could
//! not write ([`NotArchived`]), and the gate judges what it holds in memory and says what the
//! archive lacks (nextest: a failure to record never changes the run's verdict). replies.jsonl
//! stops at the first reply it could not append, so what it holds is whole: every reply before
//! that one, and none after. A file written whole (run.json, load.json, ...) that failed and is
//! written whole again later is complete again.
//!
//! When its queue ends (the gate finished, the serve stopped), the writer seals the run:
//! run.json is written last, with the sha256 of every other file as the gate wrote it
//! ([`RunDir::seal`]), so an archive changed after the run is told from the one written.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::archive::record::{NotArchived, ReplyRecord};
use crate::archive::rundir::{self, RunDir};

/// What the writer is asked to do, in the order asked.
enum Job {
    /// Append one reply (its JSON line, made by the caller) to replies.jsonl and sync it.
    Reply { index: usize, line: Vec<u8> },
    /// Replace a file of the run with these bytes, atomically.
    Whole { name: &'static str, bytes: Vec<u8> },
    /// Copy an attached serve's log into serve.log, as a stream.
    CopyLog { from: PathBuf },
    /// A file of the run that another thread failed to write (serve.log, copied from the
    /// serve's pipe), remembered with the writer's own failures.
    Failed { name: &'static str, error: String },
    /// A line for stderr, said while the writer runs.
    Say(String),
    /// Answer with what could not be written so far, once every job before this one is done.
    Flush(tokio::sync::oneshot::Sender<Vec<NotArchived>>),
}

/// The writer of one run directory. Every method returns at once; [`Recorder::flush`] waits for
/// the writes asked before it, and [`Recorder::finish`] for all of them.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    jobs: mpsc::Sender<Job>,
    thread: Option<JoinHandle<Sealed>>,
}

impl Recorder {
    /// Start the writer of `dir`, and send the gate's lines on stderr through it until
    /// [`Recorder::finish`].
    pub fn start(dir: RunDir) -> Result<Recorder> {
        let path = dir.path().to_path_buf();
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("recorder".to_string())
            .spawn(move || Writer::new(dir).run(queue))
            .context("failed to start the run directory's writer thread")?;
        let says = jobs.clone();
        crate::console::divert(Box::new(move |line: &str| {
            says.send(Job::Say(line.to_string())).is_ok()
        }));
        Ok(Recorder {
            path,
            jobs,
            thread: Some(thread),
        })
    }

    /// Where the run directory is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn send(&self, job: Job) {
        // The writer ends only when the recorder is dropped or finished: a send cannot fail
        // before then unless the thread panicked, which `finish` reports.
        let _ = self.jobs.send(job);
    }

    /// Append `reply` to replies.jsonl. Its line is made here (no disk is touched), so the
    /// writer holds bytes, not a copy of the record.
    pub fn reply(&self, reply: &ReplyRecord) {
        match serde_json::to_vec(reply) {
            Ok(mut line) => {
                line.push(b'\n');
                self.send(Job::Reply {
                    index: reply.index,
                    line,
                });
            }
            // A record that cannot be written is the gate's bug; it is said, not hidden.
            Err(e) => crate::say!("failed to write reply {} as JSON: {e}", reply.index),
        }
    }

    /// Replace the run's `name` with `value` as pretty JSON.
    pub fn json<T: Serialize>(&self, name: &'static str, value: &T) {
        match serde_json::to_vec_pretty(value) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                self.send(Job::Whole { name, bytes });
            }
            Err(e) => crate::say!("failed to write {name} as JSON: {e}"),
        }
    }

    /// Replace the run's `name` with `bytes`.
    pub fn file(&self, name: &'static str, bytes: Vec<u8>) {
        self.send(Job::Whole { name, bytes });
    }

    /// Copy the log of a serve that was already running into serve.log.
    pub fn copy_serve_log(&self, from: &Path) {
        self.send(Job::CopyLog {
            from: from.to_path_buf(),
        });
    }

    /// Remember that `name`, which another thread writes, could not be written, and why.
    pub fn not_archived(&self, name: &'static str, error: String) {
        self.send(Job::Failed { name, error });
    }

    /// Once every write asked so far is done: what could not be written (empty when all went
    /// through). Awaited, so signals are still heard while a slow disk catches up.
    pub async fn flush(&self) -> Vec<NotArchived> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Job::Flush(tx));
        rx.await.unwrap_or_else(|_| vec![writer_died()])
    }

    /// Stop the writer once every write asked is done, give stderr back to the gate, and say
    /// what could not be written.
    pub fn finish(self) -> Vec<NotArchived> {
        self.finish_sealed().not_archived
    }

    /// As [`Recorder::finish`], with the sha256 of the run.json the seal wrote last (`None`
    /// when it could not be written): the one digest the archive cannot hold, for the gate to
    /// say where the archive's reader can keep it.
    pub fn finish_sealed(mut self) -> Sealed {
        crate::console::divert_end();
        self.join()
    }

    fn join(&mut self) -> Sealed {
        let Some(thread) = self.thread.take() else {
            return Sealed::default();
        };
        // Closing our end ends the writer's queue once it is drained.
        let (closed, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.jobs, closed));
        thread.join().unwrap_or_else(|_| Sealed {
            not_archived: vec![writer_died()],
            manifest_sha256: None,
        })
    }
}

impl Drop for Recorder {
    /// A recorder dropped on an error path still writes what it was given.
    fn drop(&mut self) {
        if self.thread.is_some() {
            crate::console::divert_end();
            self.join();
        }
    }
}

fn writer_died() -> NotArchived {
    NotArchived {
        file: "(the run directory)".to_string(),
        error: "the gate's writer thread failed".to_string(),
        from_reply: None,
        replies_archived: None,
        replies_made: None,
    }
}

/// How the writer ended: what it could not write, and the sha256 of the run.json it sealed
/// the run with.
#[derive(Debug, Default)]
pub struct Sealed {
    /// What could not be written.
    pub not_archived: Vec<NotArchived>,
    /// The sha256 (hex) of the last run.json, the one holding every other file's digest.
    pub manifest_sha256: Option<String>,
}

/// The writer thread's state: the directory, and what it could not write.
struct Writer {
    dir: RunDir,
    failed: Vec<NotArchived>,
    /// Replies appended to replies.jsonl.
    appended: usize,
    /// Replies asked to be appended, whether they were or not.
    asked: usize,
}

impl Writer {
    fn new(dir: RunDir) -> Writer {
        Writer {
            dir,
            failed: Vec::new(),
            appended: 0,
            asked: 0,
        }
    }

    fn run(mut self, queue: mpsc::Receiver<Job>) -> Sealed {
        for job in queue {
            match job {
                Job::Reply { index, line } => self.reply(index, &line),
                Job::Whole { name, bytes } => {
                    let written = self.dir.write_bytes(name, &bytes);
                    self.settle(name, written);
                }
                Job::CopyLog { from } => {
                    let copied = self.dir.copy_serve_log(&from);
                    self.settle(rundir::SERVE_LOG, copied);
                }
                Job::Failed { name, error } => self.settle(name, Err(anyhow::anyhow!(error))),
                Job::Say(line) => {
                    crate::console::err_line_direct(&line);
                }
                Job::Flush(answer) => {
                    let _ = answer.send(self.not_archived());
                }
            }
        }
        // Last, once every other file is written and the serve is stopped (the queue ends
        // when the gate finishes): run.json again, with the digest of each other file.
        let (sealed, manifest_sha256) = match self.dir.seal() {
            Ok(sha) => (Ok(()), sha),
            Err(e) => (Err(e), None),
        };
        self.settle(rundir::MANIFEST, sealed);
        Sealed {
            not_archived: self.not_archived(),
            manifest_sha256,
        }
    }

    /// Append a reply, unless an earlier one could not be: replies.jsonl holds the replies
    /// before the first failure and nothing after, never a run with a hole in it.
    fn reply(&mut self, index: usize, line: &[u8]) {
        self.asked += 1;
        if self.failed.iter().any(|f| f.file == rundir::REPLIES) {
            return;
        }
        match self.dir.append_line(rundir::REPLIES, line) {
            Ok(()) => self.appended += 1,
            Err(e) => self.failed.push(NotArchived {
                file: rundir::REPLIES.to_string(),
                error: cause(&e),
                from_reply: Some(index),
                replies_archived: None,
                replies_made: None,
            }),
        }
    }

    /// A whole file's write: a failure is remembered; a later success replaces the file, which
    /// is then complete again.
    fn settle(&mut self, name: &str, written: Result<()>) {
        self.failed.retain(|f| f.file != name);
        if let Err(e) = written {
            self.failed.push(NotArchived {
                file: name.to_string(),
                error: cause(&e),
                from_reply: None,
                replies_archived: None,
                replies_made: None,
            });
        }
    }

    /// What could not be written, with replies.jsonl's counts as they stand.
    fn not_archived(&self) -> Vec<NotArchived> {
        let mut list = self.failed.clone();
        for f in list.iter_mut().filter(|f| f.file == rundir::REPLIES) {
            f.replies_archived = Some(self.appended);
            f.replies_made = Some(self.asked);
        }
        list
    }
}

/// The system's own words for a failed write (`No space left on device (os error 28)`), without
/// the path: the line that says it names the file.
fn cause(e: &anyhow::Error) -> String {
    e.root_cause().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::ReplyRecord;

    fn reply(index: usize) -> ReplyRecord {
        serde_json::from_value(serde_json::json!({
            "index": index, "prompt": "p", "expect": null, "content": "c", "reasoning": "",
            "sent_ns": 0, "end_ns": 1, "chunks": [], "usage_completion_tokens": null,
            "finish_reason": "stop", "server_timings": null, "error": null,
        }))
        .unwrap()
    }

    #[test]
    fn every_write_lands_in_order_and_a_flush_waits_for_it() {
        let d = tempfile::tempdir().unwrap();
        let rec = Recorder::start(RunDir::create(&d.path().join("run")).unwrap()).unwrap();
        for i in 1..=3 {
            rec.reply(&reply(i));
        }
        rec.json(rundir::LOAD, &serde_json::json!({"first": 1}));
        rec.json(rundir::LOAD, &serde_json::json!({"second": 2}));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(rt.block_on(rec.flush()).is_empty());
        let replies =
            rundir::parse_replies(&std::fs::read(rec.path().join(rundir::REPLIES)).unwrap())
                .unwrap();
        assert_eq!(
            replies.iter().map(|r| r.index).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let load: serde_json::Value =
            serde_json::from_slice(&std::fs::read(rec.path().join(rundir::LOAD)).unwrap()).unwrap();
        assert_eq!(load, serde_json::json!({"second": 2}));
        assert!(rec.finish().is_empty());
    }

    fn line(index: usize) -> Vec<u8> {
        let mut line = serde_json::to_vec(&reply(index)).unwrap();
        line.push(b'\n');
        line
    }

    #[test]
    fn replies_stop_at_the_first_that_fails_and_a_whole_file_written_again_is_complete() {
        let d = tempfile::tempdir().unwrap();
        let mut w = Writer::new(RunDir::create(&d.path().join("run")).unwrap());
        let path = w.dir.path().to_path_buf();
        w.reply(1, &line(1));
        // The disk fills: every later append fails.
        let replies = path.join(rundir::REPLIES);
        let kept = std::fs::OpenOptions::new()
            .append(true)
            .open(&replies)
            .unwrap();
        w.dir.append_replies_to(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        );
        w.reply(2, &line(2));
        // Room again: the writer must not append reply 3 after a hole.
        w.dir.append_replies_to(kept);
        w.reply(3, &line(3));
        // load.json blocked by a directory, then free again: its last write is whole.
        let load = path.join(rundir::LOAD);
        std::fs::create_dir(&load).unwrap();
        std::fs::write(load.join("x"), "y").unwrap();
        let written = w.dir.write_bytes(rundir::LOAD, b"1\n");
        w.settle(rundir::LOAD, written);
        let failed = w.not_archived();
        assert_eq!(
            failed.iter().map(|f| f.file.as_str()).collect::<Vec<_>>(),
            [rundir::REPLIES, rundir::LOAD]
        );
        assert_eq!(failed[0].from_reply, Some(2));
        assert_eq!(failed[0].replies_archived, Some(1));
        assert_eq!(failed[0].replies_made, Some(3));
        assert!(
            failed[0]
                .to_string()
                .starts_with("replies.jsonl: No space left on device (os error 28) from reply 2 on (it holds 1 of 3 replies)"),
            "{}",
            failed[0]
        );
        assert_eq!(
            std::fs::read(&replies).unwrap(),
            line(1),
            "reply 3 was appended after a hole"
        );
        std::fs::remove_dir_all(&load).unwrap();
        let written = w.dir.write_bytes(rundir::LOAD, b"2\n");
        w.settle(rundir::LOAD, written);
        let failed = w.not_archived();
        assert_eq!(
            failed.iter().map(|f| f.file.as_str()).collect::<Vec<_>>(),
            [rundir::REPLIES]
        );
        assert_eq!(std::fs::read_to_string(&load).unwrap(), "2\n");
        // What the digests hold of replies.jsonl is what it holds: the run is not "changed".
        assert_eq!(
            w.dir.digests().unwrap()[rundir::REPLIES],
            crate::archive::digest::sha256(&line(1))
        );
    }
}
