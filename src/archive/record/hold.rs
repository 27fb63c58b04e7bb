//! The device hold (`--hold`), as run.json records it: the lock file, the wait for it, and each
//! look at whether the locked file was still at the hold's path.

use serde::{Deserialize, Serialize};

/// What the run records of its hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldRecord {
    /// The lock file.
    pub file: String,
    /// Whether it was acquired.
    pub acquired: bool,
    /// How long the gate waited, ms.
    pub waited_ms: f64,
    /// Who held it while the gate waited, if anyone said.
    pub waited_for: Option<String>,
    /// The timeout, s.
    pub timeout_s: f64,
    /// CLOCK_MONOTONIC ns when it was acquired.
    pub acquired_ns: Option<u64>,
    /// CLOCK_MONOTONIC ns when it was released.
    pub released_ns: Option<u64>,
    /// Each look at whether the locked file was still the file at the hold's path (before and
    /// after the replies, and at the release): a hold file removed or replaced lets a second
    /// gate take "the same" hold while this one runs. Empty in runs from before it was checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<HoldCheck>,
}

/// One look at the hold's path ([`HoldRecord::checks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldCheck {
    /// When the gate looked.
    pub at: HoldCheckAt,
    /// What the path was then.
    pub found: HoldFound,
}

impl HoldCheck {
    /// Whether the hold was still there: a second gate opening the path would wait for it.
    pub fn held(&self) -> bool {
        self.found == HoldFound::LockedFile
    }
}

/// When the hold's path was looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldCheckAt {
    /// The serve was ready; the replies were about to start.
    BeforeReplies,
    /// The replies were over; the stop was about to start.
    AfterReplies,
    /// The serve's tree was gone; the hold was about to be released.
    Release,
}

/// What the hold's path was when the gate looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldFound {
    /// The file the gate locked (same device and inode).
    LockedFile,
    /// Nothing: the file was removed.
    Nothing,
    /// Another file (or a symlink planted there, which is not followed).
    AnotherFile,
    /// The path could not be looked at (its directory made unreadable): the hold cannot be
    /// vouched for.
    Unreachable,
}
