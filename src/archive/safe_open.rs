//! Opening a file someone else named, without blocking and without reading without end
//! (issue 30).
//!
//! Opening a FIFO blocks until its other end opens: `--junit`, `--hold`, `--prompts`,
//! `GITHUB_STEP_SUMMARY`, `judge --svg` and an archive's files all once hung on one. So a
//! path is first opened with `O_PATH` (which opens nothing: no FIFO end, no device's open
//! routine) and its kind read with `fstat`; only a kind the caller takes is opened for real,
//! with `O_NONBLOCK | O_NOCTTY`, and that descriptor must be the same file (device and inode)
//! as the one looked at. `O_NONBLOCK` is then cleared.
//!
//! Every read of a file the gate did not just write is capped ([`read_capped`]): `--prompts
//! /dev/zero` once took a GiB of memory, and a replies.jsonl linked to /dev/zero more than
//! 2 GiB in a second.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{fcntl, FcntlArg, OFlag};

/// What may be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// A regular file only: anything read, and the hold's lock file.
    Regular,
    /// Where a report goes: a regular file, a terminal, or /dev/null (a report thrown away).
    Output,
}

/// Why a path was not opened.
#[derive(Debug)]
pub enum OpenError {
    /// The system said no (it does not exist, no permission, ...).
    Io(PathBuf, io::Error),
    /// It is something else than a file: `kind` says what.
    NotAFile(PathBuf, &'static str),
    /// It is larger than the most the gate reads of it.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, or at least how much was there to read.
        len: u64,
        /// The most read of it.
        cap: u64,
    },
    /// It changed between the look and the open (another file was put at the path).
    Changed(PathBuf),
}

impl OpenError {
    /// Whether the path does not exist (optional files of a run are simply absent).
    pub fn is_not_found(&self) -> bool {
        matches!(self, OpenError::Io(_, e) if e.kind() == io::ErrorKind::NotFound)
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(path, e) => write!(f, "failed to open {}: {e}", path.display()),
            OpenError::NotAFile(path, kind) => write!(
                f,
                "{} is {kind}, not a file: give a regular file path",
                path.display()
            ),
            OpenError::TooLarge { path, len, cap } => write!(
                f,
                "{} is {len} bytes, more than the {cap} the gate reads of it",
                path.display()
            ),
            OpenError::Changed(path) => write!(
                f,
                "{} was replaced while it was opened: give a file nothing else changes",
                path.display()
            ),
        }
    }
}

impl std::error::Error for OpenError {}

/// What a file's type is, in words, for a refusal.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    }
}

/// /dev/null's device number: character device 1, 3 (Documentation/admin-guide/devices.txt).
fn is_dev_null(meta: &Metadata) -> bool {
    meta.file_type().is_char_device() && nix::sys::stat::major(meta.rdev()) == 1 && {
        nix::sys::stat::minor(meta.rdev()) == 3
    }
}

/// A terminal's major numbers: the virtual consoles and serial lines (4), the tty itself (5),
/// and the pseudo-terminals' secondaries (136 to 143).
fn is_terminal_device(meta: &Metadata) -> bool {
    let major = nix::sys::stat::major(meta.rdev());
    meta.file_type().is_char_device() && (major == 4 || major == 5 || (136..=143).contains(&major))
}

/// Whether `meta` is a kind `want` takes; the refusal's words when not.
fn check_kind(meta: &Metadata, want: Want) -> Result<(), &'static str> {
    if meta.is_file() {
        return Ok(());
    }
    if want == Want::Output && (is_dev_null(meta) || is_terminal_device(meta)) {
        return Ok(());
    }
    match kind_of(meta) {
        "a character device" if want == Want::Output => {
            Err("a character device (neither a terminal nor /dev/null)")
        }
        kind => Err(kind),
    }
}

/// Look at `path` without opening it: its metadata, through an `O_PATH` descriptor, following
/// symbolic links.
pub fn look(path: &Path) -> Result<Metadata, OpenError> {
    let fd = nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| OpenError::Io(path.to_path_buf(), io::Error::from(e)))?;
    File::from(fd)
        .metadata()
        .map_err(|e| OpenError::Io(path.to_path_buf(), e))
}

/// Whether `path` is a kind `want` takes, without opening it. `Ok(None)` when it does not exist.
pub fn check(path: &Path, want: Want) -> Result<Option<Metadata>, OpenError> {
    match look(path) {
        Ok(meta) => match check_kind(&meta, want) {
            Ok(()) => Ok(Some(meta)),
            Err(kind) => Err(OpenError::NotAFile(path.to_path_buf(), kind)),
        },
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Open `path` as `options` say (which must not create it), once it is known to be a kind
/// `want` takes: never blocks on a FIFO, never makes a terminal the controlling one.
pub fn open(path: &Path, options: &OpenOptions, want: Want) -> Result<File, OpenError> {
    let looked = look(path)?;
    check_kind(&looked, want).map_err(|kind| OpenError::NotAFile(path.to_path_buf(), kind))?;
    let mut options = options.clone();
    options.custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits());
    let file = options
        .open(path)
        .map_err(|e| OpenError::Io(path.to_path_buf(), e))?;
    let meta = file
        .metadata()
        .map_err(|e| OpenError::Io(path.to_path_buf(), e))?;
    if meta.dev() != looked.dev() || meta.ino() != looked.ino() {
        return Err(OpenError::Changed(path.to_path_buf()));
    }
    check_kind(&meta, want).map_err(|kind| OpenError::NotAFile(path.to_path_buf(), kind))?;
    // Blocking again: a terminal written while it is busy waits rather than losing the text.
    let flags = fcntl(&file, FcntlArg::F_GETFL)
        .map_err(|e| OpenError::Io(path.to_path_buf(), io::Error::from(e)))?;
    let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
    fcntl(&file, FcntlArg::F_SETFL(flags))
        .map_err(|e| OpenError::Io(path.to_path_buf(), io::Error::from(e)))?;
    Ok(file)
}

/// Open the regular file `path` to read it.
pub fn open_read(path: &Path) -> Result<File, OpenError> {
    open(path, OpenOptions::new().read(true), Want::Regular)
}

/// Read the regular file `path` whole, refusing it when it holds more than `cap` bytes: its
/// size is checked before anything is read, and at most `cap + 1` bytes are read (a file that
/// grows while it is read is refused too).
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, OpenError> {
    let (file, len) = open_capped(path, cap)?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| OpenError::Io(path.to_path_buf(), e))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(path, bytes.len() as u64, cap));
    }
    Ok(bytes)
}

/// Open the regular file `path` to be read as a stream of at most `cap` bytes, refusing it
/// from its size when it holds more; its size. The reader stops the stream past `cap` (a file
/// that grows while it is read) with [`too_large`].
pub fn open_capped(path: &Path, cap: u64) -> Result<(File, u64), OpenError> {
    let file = open_read(path)?;
    let len = file
        .metadata()
        .map_err(|e| OpenError::Io(path.to_path_buf(), e))?
        .len();
    if len > cap {
        return Err(too_large(path, len, cap));
    }
    Ok((file, len))
}

/// `path` holds `len` bytes, past the `cap` of what is read of it.
pub fn too_large(path: &Path, len: u64, cap: u64) -> OpenError {
    OpenError::TooLarge {
        path: path.to_path_buf(),
        len,
        cap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for want in [Want::Regular, Want::Output] {
            let e = check(&fifo, want).unwrap_err();
            assert!(e
                .to_string()
                .ends_with("is a FIFO, not a file: give a regular file path"));
            let e = open(&fifo, OpenOptions::new().append(true), want).unwrap_err();
            assert!(matches!(e, OpenError::NotAFile(_, "a FIFO")), "{e}");
        }
        let e = read_capped(&fifo, 10).unwrap_err();
        assert!(matches!(e, OpenError::NotAFile(_, "a FIFO")), "{e}");
    }

    #[test]
    fn devices_are_taken_only_where_a_report_goes() {
        let null = Path::new("/dev/null");
        assert!(check(null, Want::Output).unwrap().is_some());
        assert!(open(null, OpenOptions::new().write(true), Want::Output).is_ok());
        let e = read_capped(null, 10).unwrap_err();
        assert!(e.to_string().contains("is a character device"), "{e}");
        let e = check(Path::new("/dev/zero"), Want::Output).unwrap_err();
        assert!(
            e.to_string().contains("neither a terminal nor /dev/null"),
            "{e}"
        );
        let e = check(Path::new("/"), Want::Output).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
    }

    #[test]
    fn reads_are_capped_before_reading() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_capped(&path, 5).unwrap(), b"12345");
        let e = read_capped(&path, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is 5 bytes, more than the 4 the gate reads of it",
                path.display()
            )
        );
        // A sparse file: its size is refused, nothing of it read.
        File::create(&path).unwrap().set_len(2 << 30).unwrap();
        assert!(matches!(
            read_capped(&path, 1 << 20),
            Err(OpenError::TooLarge { .. })
        ));
        assert!(read_capped(&d.path().join("missing"), 4)
            .unwrap_err()
            .is_not_found());
    }
}
