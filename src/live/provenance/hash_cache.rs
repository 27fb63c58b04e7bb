//! The hash cache: file-hashes.json under the user's cache directory, the sha256 of each large
//! file the serve's arguments named, with what must be unchanged for it to stand. Least
//! recently used first; written atomically; a cache that cannot be read or written costs a
//! hash, never a run.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::archive::rundir;

/// Files at least this large are hashed once and their hash kept in the cache; smaller ones
/// take less time to hash than the cache takes to read.
pub const CACHE_FROM_BYTES: u64 = 64 << 20;

/// The cache keeps at most this many files, dropping the least recently used.
pub const CACHE_MAX_ENTRIES: usize = 1000;

/// A cache file larger than this is not a cache this gate wrote (1,000 entries are ~300 KB).
const CACHE_MAX_BYTES: u64 = 4 << 20;

/// What must be unchanged for a cached hash to stand: the file's resolved path, size,
/// modification and change times (ns) and inode and device. The change time cannot be set
/// back by a program (`touch -d` moves it on), so content rewritten with its mtime restored
/// is hashed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CacheKey {
    path: String,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
    dev: u64,
}

impl CacheKey {
    pub(crate) fn of(path: &str, meta: &std::fs::Metadata) -> CacheKey {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        CacheKey {
            path: path.to_string(),
            size: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

/// One cached hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CacheEntry {
    #[serde(flatten)]
    key: CacheKey,
    sha256: String,
}

/// file-hashes.json: least recently used first.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    entries: Vec<CacheEntry>,
}

const CACHE_VERSION: u32 = 1;

/// The cache, opened when the first large file needs it (a run without one never touches it).
#[derive(Debug)]
pub(crate) struct Cache {
    path: Option<PathBuf>,
    opened: bool,
    entries: Vec<CacheEntry>,
    changed: bool,
}

/// `$XDG_CACHE_HOME/npu-serve-smoke/file-hashes.json`, else under `$HOME/.cache`. A relative
/// XDG_CACHE_HOME is ignored, as the XDG base directory spec says.
pub fn cache_path(xdg_cache_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let base = match xdg_cache_home.map(PathBuf::from) {
        Some(x) if x.is_absolute() => x,
        _ => PathBuf::from(home.filter(|h| !h.is_empty())?).join(".cache"),
    };
    Some(base.join("npu-serve-smoke").join("file-hashes.json"))
}

impl Cache {
    pub(crate) fn closed() -> Cache {
        Cache::at(cache_path(
            std::env::var_os("XDG_CACHE_HOME"),
            std::env::var_os("HOME"),
        ))
    }

    pub(crate) fn at(path: Option<PathBuf>) -> Cache {
        Cache {
            path,
            opened: false,
            entries: Vec::new(),
            changed: false,
        }
    }

    fn open(&mut self, problems: &mut Vec<String>) {
        if self.opened {
            return;
        }
        self.opened = true;
        let Some(path) = &self.path else {
            problems.push("no hash cache: neither XDG_CACHE_HOME nor HOME is set".to_string());
            return;
        };
        match read_cache(path) {
            Ok(entries) => self.entries = entries,
            Err(e) => problems.push(format!("{e:#}; starting a new cache")),
        }
    }

    /// The cached hash of a file with this key, marking it most recently used.
    pub(crate) fn get(&mut self, key: &CacheKey, problems: &mut Vec<String>) -> Option<String> {
        self.open(problems);
        let at = self.entries.iter().position(|e| &e.key == key)?;
        if at + 1 != self.entries.len() {
            let e = self.entries.remove(at);
            self.entries.push(e);
            self.changed = true;
        }
        self.entries.last().map(|e| e.sha256.clone())
    }

    pub(crate) fn put(&mut self, key: CacheKey, sha256: &str) {
        // Another version of the same file (same path) is stale now.
        self.entries.retain(|e| e.key.path != key.path);
        self.entries.push(CacheEntry {
            key,
            sha256: sha256.to_string(),
        });
        let over = self.entries.len().saturating_sub(CACHE_MAX_ENTRIES);
        self.entries.drain(..over);
        self.changed = true;
    }

    /// Write the cache back (atomically: a temporary file renamed over it), if it changed. A
    /// cache that cannot be written costs the next run a hash, never this run its result.
    pub(crate) fn save(&mut self, problems: &mut Vec<String>) {
        let Some(path) = self.path.as_ref().filter(|_| self.changed) else {
            return;
        };
        let file = CacheFile {
            version: CACHE_VERSION,
            entries: std::mem::take(&mut self.entries),
        };
        let written = (|| -> Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("failed to create {}", dir.display()))?;
            }
            rundir::write_atomic(path, &serde_json::to_vec(&file)?)
        })();
        if let Err(e) = written {
            problems.push(format!("the hash cache was not saved: {e:#}"));
        }
        self.entries = file.entries;
        self.changed = false;
    }
}

fn read_cache(path: &Path) -> Result<Vec<CacheEntry>> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("failed to read the hash cache {shown}")),
    };
    if meta.len() > CACHE_MAX_BYTES {
        bail!(
            "the hash cache {shown} is {} bytes, more than a cache of {CACHE_MAX_ENTRIES} files",
            meta.len()
        );
    }
    let text =
        std::fs::read(path).with_context(|| format!("failed to read the hash cache {shown}"))?;
    let file: CacheFile = serde_json::from_slice(&text)
        .with_context(|| format!("the hash cache {shown} is not one this gate wrote"))?;
    if file.version != CACHE_VERSION {
        bail!(
            "the hash cache {shown} has version {}, not {CACHE_VERSION}",
            file.version
        );
    }
    Ok(file.entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_path_follows_xdg() {
        let p = |x: Option<&str>, h: Option<&str>| {
            cache_path(x.map(OsString::from), h.map(OsString::from))
        };
        assert_eq!(
            p(Some("/c"), Some("/home/u")),
            Some(PathBuf::from("/c/npu-serve-smoke/file-hashes.json"))
        );
        assert_eq!(
            p(Some("rel"), Some("/home/u")),
            Some(PathBuf::from(
                "/home/u/.cache/npu-serve-smoke/file-hashes.json"
            ))
        );
        assert_eq!(
            p(Some(""), Some("/home/u")),
            Some(PathBuf::from(
                "/home/u/.cache/npu-serve-smoke/file-hashes.json"
            ))
        );
        assert_eq!(p(None, None), None);
    }

    fn key(path: &str, ino: u64) -> CacheKey {
        CacheKey {
            path: path.into(),
            size: 1,
            mtime_ns: 2,
            ctime_ns: 3,
            ino,
            dev: 5,
        }
    }

    #[test]
    fn the_cache_keeps_the_most_recently_used_and_survives_corruption() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("sub/file-hashes.json");
        let mut problems = Vec::new();
        let mut cache = Cache::at(Some(path.clone()));
        assert_eq!(cache.get(&key("/a", 1), &mut problems), None);
        for i in 0..(CACHE_MAX_ENTRIES as u64 + 5) {
            cache.put(key(&format!("/f{i}"), i), &format!("h{i}"));
        }
        cache.put(key("/a", 1), "ha");
        // Used again: now the most recent, so the next puts drop others first.
        let first_kept = 6;
        assert_eq!(
            cache.get(&key(&format!("/f{first_kept}"), first_kept), &mut problems),
            Some(format!("h{first_kept}"))
        );
        cache.save(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");

        let mut again = Cache::at(Some(path.clone()));
        assert_eq!(again.get(&key("/a", 1), &mut problems), Some("ha".into()));
        assert_eq!(
            again.get(&key("/a", 2), &mut problems),
            None,
            "another inode"
        );
        assert_eq!(again.get(&key("/f0", 0), &mut problems), None, "dropped");
        assert_eq!(again.entries.len(), CACHE_MAX_ENTRIES);
        // A newer version of the same path replaces the old.
        again.put(key("/a", 2), "ha2");
        assert_eq!(again.get(&key("/a", 1), &mut problems), None);
        assert!(problems.is_empty(), "{problems:?}");

        std::fs::write(&path, b"{not json").unwrap();
        let mut corrupt = Cache::at(Some(path.clone()));
        assert_eq!(corrupt.get(&key("/a", 1), &mut problems), None);
        assert!(
            problems[0].contains("not one this gate wrote")
                && problems[0].contains("starting a new cache"),
            "{problems:?}"
        );
        corrupt.put(key("/a", 1), "ha");
        corrupt.save(&mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            Cache::at(Some(path)).get(&key("/a", 1), &mut problems),
            Some("ha".into())
        );

        // Unwritable: the cache's folder is a file.
        let blocked = d.path().join("blocked");
        std::fs::write(&blocked, b"").unwrap();
        let mut cache = Cache::at(Some(blocked.join("file-hashes.json")));
        cache.put(key("/a", 1), "ha");
        let mut problems = Vec::new();
        cache.save(&mut problems);
        assert!(
            problems[0].starts_with("the hash cache was not saved"),
            "{problems:?}"
        );
    }
}
