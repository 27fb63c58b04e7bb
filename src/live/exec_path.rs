//! Where exec finds a program: whether a path is one exec could run, and the first such file
//! of a name on PATH. A leaf: the serve's launch and its supervisor both look programs up here.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a path cannot be exec'd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unrunnable {
    Missing,
    Directory,
    NotAFile,
    NotExecutable,
}

impl Unrunnable {
    /// What the path is, as an error's end: "was not found", "is not executable".
    pub(crate) fn says(self) -> &'static str {
        match self {
            Unrunnable::Missing => "was not found",
            Unrunnable::Directory => "is a directory, not a program",
            Unrunnable::NotAFile => "is not a regular file",
            Unrunnable::NotExecutable => "is not executable",
        }
    }
}

/// Whether exec could run `path`: a regular file with an execute bit.
pub(crate) fn runnable(path: &Path) -> std::result::Result<(), Unrunnable> {
    let meta = std::fs::metadata(path).map_err(|_| Unrunnable::Missing)?;
    if meta.is_dir() {
        Err(Unrunnable::Directory)
    } else if !meta.is_file() {
        Err(Unrunnable::NotAFile)
    } else if meta.permissions().mode() & 0o111 == 0 {
        Err(Unrunnable::NotExecutable)
    } else {
        Ok(())
    }
}

/// The first executable file named `name` on PATH, as execvp would find it.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|c| runnable(c).is_ok())
}
