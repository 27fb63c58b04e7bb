//! The sampler's hot /proc reads, written by hand: each process's open files, and each thread's
//! small files, read at each look at every process and thread of the serve's tree.
//!
//! procfs reads one fd with four syscalls (an `O_PATH` open of the link, `readlinkat`, a stat
//! for the link's mode, which the gate never uses, and the close) and a thread's file through a
//! fresh handle a thread. Against vLLM's four processes (72 threads, 172 open files) a look
//! cost 3.9 to 4.0 ms of CPU that way, 1.6% of a core at 250 ms; here an open file is one
//! `readlinkat` on the directory's own fd (docs/performance.md, "The sampler beside a
//! many-threaded serve").

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::Path;

use nix::dir::{Dir, Type};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// A file a process holds open, by its fd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFile {
    /// The fd number.
    pub fd: i32,
    /// What its link names.
    pub path: String,
}

/// The files `pid` holds open that name a path, among its first `max` fds. Sockets, pipes and
/// anonymous inodes name none (`socket:[N]`, `pipe:[N]`, `anon_inode:...`), and are left out.
/// An fd closed between the listing and its link's read is left out; a process gone is
/// `NotFound`.
pub fn open_files(pid: u32, max: usize) -> io::Result<Vec<OpenFile>> {
    let mut dir = Dir::open(
        format!("/proc/{pid}/fd").as_str(),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let mut fds = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(io::Error::from)?;
        if entry.file_type() == Some(Type::Directory) {
            continue; // . and ..
        }
        if let Some(fd) = entry.file_name().to_str().ok().and_then(|n| n.parse().ok()) {
            fds.push(fd);
            if fds.len() >= max {
                break;
            }
        }
    }
    let mut out = Vec::new();
    let mut name = itoa::Buffer::new();
    for fd in fds {
        let Ok(link) = nix::fcntl::readlinkat(dir.as_fd(), name.format(fd)) else {
            continue;
        };
        let link = link.to_string_lossy();
        if names_a_path(&link) {
            out.push(OpenFile {
                fd,
                path: link.into_owned(),
            });
        }
    }
    Ok(out)
}

/// Whether an fd's link text names a path: it starts with `/`, or is not of the kernel's
/// `type:[inode]` and `anon_inode:name` forms (as procfs's `FDTarget` reads it).
pub fn names_a_path(link: &str) -> bool {
    link.starts_with('/') || !link.contains(':')
}

/// Whether an fd's link names a DRM device node: /dev/dri/card*, renderD*, or /dev/accel/*
/// (the route evidence and the footprint both ask it of the same listing).
pub fn is_drm_node(path: &Path) -> bool {
    path.starts_with("/dev/dri/") || path.starts_with("/dev/accel/")
}

/// The thread ids of `pid`; a process gone is `NotFound`.
pub fn thread_ids(pid: u32) -> io::Result<Vec<u32>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = entry?.file_name().to_str().and_then(|t| t.parse().ok()) {
            out.push(tid);
        }
    }
    Ok(out)
}

/// The most bytes of a small /proc file read: a thread's `children` list or `schedstat`, a
/// counter file, an fdinfo file.
const SMALL_FILE_MAX: u64 = 64 * 1024;

/// A small file's text, at most [`SMALL_FILE_MAX`] bytes (a serve's driver is not trusted to
/// keep an fdinfo file small, nor a serve its children list).
pub fn read_small(path: &str) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut text = String::new();
    file.take(SMALL_FILE_MAX)
        .read_to_string(&mut text)
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_texts_that_name_a_path_and_those_that_do_not() {
        for path in [
            "/dev/accel/accel0",
            "/tmp/a:b",
            "/memfd:x (deleted)",
            "relative",
        ] {
            assert!(names_a_path(path), "{path}");
        }
        for other in [
            "socket:[123]",
            "pipe:[9]",
            "anon_inode:[eventfd]",
            "net:[4026531840]",
        ] {
            assert!(!names_a_path(other), "{other}");
        }
    }

    #[test]
    fn this_process_s_open_files_are_read_and_a_closed_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("held");
        let held = std::fs::File::create(&path).unwrap();
        let me = std::process::id();
        let want = path.display().to_string();
        let found = open_files(me, usize::MAX).unwrap();
        let entry = found
            .iter()
            .find(|f| f.path == want)
            .unwrap_or_else(|| panic!("{want} not among {found:?}"));
        use std::os::fd::AsRawFd;
        assert_eq!(entry.fd, held.as_raw_fd());
        drop(held);
        assert!(!open_files(me, usize::MAX)
            .unwrap()
            .iter()
            .any(|f| f.path == want));
        // The cap holds: no more fds looked at than asked.
        assert!(open_files(me, 1).unwrap().len() <= 1);
    }

    #[test]
    fn a_process_that_is_gone_is_not_found() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(
            open_files(pid, 16).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(thread_ids(pid).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn this_process_s_threads_are_listed_and_its_files_read() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = rx.recv();
            nix::unistd::gettid().as_raw() as u32
        });
        let ids = thread_ids(me).unwrap();
        tx.send(()).unwrap();
        let tid = t.join().unwrap();
        assert!(ids.contains(&me) && ids.contains(&tid), "{ids:?} {tid}");
        let stat = read_small(&format!("/proc/{me}/task/{me}/stat")).unwrap();
        assert!(stat.starts_with(&format!("{me} (")), "{stat}");
    }
}
