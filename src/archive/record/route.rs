//! route.json: the route evidence read from /proc while the replies ran: each process of the
//! serve's tree, the files it mapped (and how) and held open (and what they are), the device's
//! busy counter, and what each route pattern matched.

use serde::{Deserialize, Serialize};

/// route.json: what the serve's own processes showed of its route while the replies ran: the
/// files each process of its tree mapped and held open, and the device's busy counter. Read
/// from /proc, which a release cannot rename the way it renames a log line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouteRecord {
    /// The launched process, the root of the tree.
    pub root_pid: Option<u32>,
    /// Every process of the tree seen during the replies, in the order first seen.
    pub processes: Vec<ProcessRecord>,
    /// The busy counter's readings, when `--device-busy` was given.
    #[serde(default)]
    pub counter: Option<CounterRecord>,
    /// Evidence that could not be read, in words (e.g. `/proc/812/maps: Permission denied`).
    #[serde(default)]
    pub problems: Vec<String>,
    /// Whether the evidence was read again once the replies were over (false when the run was
    /// interrupted before then).
    #[serde(default)]
    pub read_after_replies: bool,
    /// Which of the run's patterns matched what, for readers; judging recomputes it.
    #[serde(default)]
    pub matched: Vec<RouteMatch>,
}

/// One process of the serve's tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid.
    pub parent: Option<u32>,
    /// Its name (`comm`).
    pub comm: String,
    /// The executable it runs (`/proc/PID/exe`), where readable.
    pub exe: Option<String>,
    /// Every file it mapped, deduplicated, in the order first seen.
    pub maps: Vec<String>,
    /// Files it held open during the replies (no sockets, pipes or anonymous inodes),
    /// deduplicated.
    pub open: Vec<String>,
    /// Whether `maps` or `open` reached their cap and more were left out.
    #[serde(default)]
    pub truncated: bool,
    /// How each file of `maps` was mapped and, when executable, what its header says (issue
    /// 30: only an executable mapping of an ELF shared object is library evidence). `None` in
    /// a route.json from before this was recorded: its mappings are judged as they were then,
    /// and the route line says their kind was not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_kinds: Option<std::collections::BTreeMap<String, MapKind>>,
    /// What each file of `open` is, as stat(2) of /proc/PID/fd/N says (issue 30: only a
    /// character device is device evidence). `None` in a route.json from before this was
    /// recorded, as for `map_kinds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_kinds: Option<std::collections::BTreeMap<String, FileKind>>,
}

/// How one file was mapped by a process, and what its first bytes say it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MapKind {
    /// The distinct permissions of its mappings, as /proc/PID/maps writes them (`r--p`,
    /// `r-xp`), in the order first seen.
    pub perms: Vec<String>,
    /// Its ELF header, read when some mapping of it is executable; `None` when none is (a
    /// file mapped only as data is not code, whatever it holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Header>,
    /// How the header was read: `map_files` (/proc/PID/map_files, the very file mapped) or
    /// `path` (its path, with the inode checked against the mapping's, where map_files could
    /// not be read: it needs CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_via: Option<String>,
}

impl MapKind {
    /// Whether some mapping of the file is executable (the `x` of `r-xp`).
    pub fn executable(&self) -> bool {
        self.perms
            .iter()
            .any(|p| p.as_bytes().get(2) == Some(&b'x'))
    }
}

/// What a mapped file's first 64 bytes say it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Header {
    /// ELF with e_type ET_DYN (3): a shared object (or a position-independent executable).
    ElfSharedObject,
    /// ELF with another e_type (ET_REL 1, ET_EXEC 2, ET_CORE 4, ...).
    ElfOfType(u16),
    /// Not ELF: no `\x7fELF` magic, or too short to hold an ELF header.
    NotElf,
    /// It could not be read, and why.
    Unread(String),
}

/// The kind of an open file, from its mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// A character device (S_IFCHR): what /dev/accel/accel0, /dev/dri/renderD128 and
    /// /dev/nvidia0 are.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A FIFO.
    Fifo,
    /// A socket with a path.
    Socket,
    /// Another kind.
    Other,
    /// It could not be stat'ed, and why.
    Unread(String),
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileKind::CharDevice => f.write_str("a character device"),
            FileKind::BlockDevice => f.write_str("a block device"),
            FileKind::Regular => f.write_str("a regular file"),
            FileKind::Directory => f.write_str("a directory"),
            FileKind::Fifo => f.write_str("a FIFO"),
            FileKind::Socket => f.write_str("a socket"),
            FileKind::Other => f.write_str("of an unknown kind"),
            FileKind::Unread(why) => write!(f, "of a kind that could not be read ({why})"),
        }
    }
}

/// A busy counter read before and after the replies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterRecord {
    /// What was read: a file path, or `fdinfo:KEY`.
    pub source: String,
    /// The counter's unit where known: `us`, `ns`, `ms`.
    pub unit: Option<String>,
    /// The reading as the replies began.
    pub before: Option<CounterReading>,
    /// The reading once they were over.
    pub after: Option<CounterReading>,
    /// Why a reading is missing.
    pub problem: Option<String>,
}

/// One reading of a busy counter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CounterReading {
    /// When, ns on the run's clock (as the replies' times).
    pub at_ns: u64,
    /// The value (for `fdinfo:KEY`, summed over the matching files held open).
    pub value: u64,
}

/// What one route pattern matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteMatch {
    /// The flag: `route-lib`, `no-route-lib` or `route-device`.
    pub check: String,
    /// The pattern.
    pub pattern: String,
    /// `PID PATH` for each match.
    pub found: Vec<String>,
}
