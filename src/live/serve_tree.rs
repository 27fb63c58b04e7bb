//! The serve's process tree as /proc shows it now: the launched process, every descendant, and
//! the orphans the supervisor adopted as their subreaper (a daemon that forked twice leaves its
//! parent's tree but is reparented to the supervisor, which launched only the serve). The
//! route evidence and the footprint both walk it.

use std::collections::BTreeSet;

use crate::live::proc_scan::{read_small, thread_ids};

/// The most processes a walk finds (four times the most the route evidence records), so a
/// serve that forks without end is not walked without end.
pub const MAX_WALKED: usize = 1024;

/// `root` and every descendant; the subreaper's other children are orphaned descendants of
/// the serve (the subreaper launched only the serve) and belong to the tree too.
pub fn walk_tree(root: u32, subreaper: Option<u32>) -> Result<BTreeSet<u32>, String> {
    if !std::path::Path::new("/proc/self/task").exists() {
        return Err("/proc is not mounted: the serve's processes cannot be looked at".into());
    }
    if !kernel_lists_children() {
        return Err(
            "this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): the serve's descendants cannot be found".into(),
        );
    }
    let mut found = BTreeSet::from([root]);
    let mut queue = vec![root];
    if let Some(reaper) = subreaper {
        for orphan in children(reaper) {
            if found.insert(orphan) {
                queue.push(orphan);
            }
        }
    }
    while let Some(pid) = queue.pop() {
        if found.len() >= MAX_WALKED {
            break;
        }
        for child in children(pid) {
            if found.insert(child) {
                queue.push(child);
            }
        }
    }
    Ok(found)
}

/// The children of `pid`, from every one of its threads (a child belongs to the thread that
/// forked it). A process or thread gone since it was listed has none.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tids) = thread_ids(pid) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for tid in tids {
        // A thread ended since the listing has no file: whether the kernel has the file at
        // all was asked of the gate's own thread before the walk.
        if let Ok(text) = read_small(&format!("/proc/{pid}/task/{tid}/children")) {
            out.extend(
                text.split_ascii_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Whether this kernel gives `/proc/PID/task/TID/children` (CONFIG_PROC_CHILDREN), asked of
/// the gate's own thread: a serve's thread that has ended has no file either, and is no sign.
fn kernel_lists_children() -> bool {
    std::path::Path::new("/proc/thread-self/children").exists()
}
