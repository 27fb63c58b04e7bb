//! Processes as /proc shows them: one process's /proc/PID/stat read and parsed, whether a
//! process still runs (and is the one that started then), and the whole box's processes with
//! the descendants of one. A leaf: the hold, the serve and its supervisor all read it.

use std::collections::{HashMap, HashSet};

/// A process as /proc/PID/stat shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcStat {
    /// Process id.
    pub pid: i32,
    /// State letter: R, S, D, Z (zombie), X (dead), ...
    pub state: char,
    /// Parent's process id.
    pub ppid: i32,
    /// Process group id.
    pub pgrp: i32,
    /// When it started, clock ticks since boot: with the pid, it names one process, never a
    /// later one that got the same pid.
    pub start: u64,
}

impl ProcStat {
    /// Whether it still runs: neither a zombie nor dead.
    pub fn running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

fn parse_stat(text: &str) -> Option<ProcStat> {
    // The name, in parentheses, may itself hold spaces and parentheses: the fields after it
    // start after the last ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    Some(ProcStat {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Process `pid` as /proc shows it now; `None` once it is gone (or /proc is not there).
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether process `pid` runs (not a zombie) and, when `start` is given, is the process that
/// started then and not a later one with the same pid.
pub fn process_running(pid: u32, start: Option<u64>) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    proc_stat(pid).is_some_and(|s| s.running() && start.is_none_or(|t| t == s.start))
}

/// Every process on the box, in one read of /proc.
pub(crate) fn scan() -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter_map(proc_stat)
        .collect()
}

/// The processes of `all` whose ancestry reaches `root` (not `root` itself).
pub(crate) fn descendants(all: &[ProcStat], root: i32) -> Vec<ProcStat> {
    let mut children: HashMap<i32, Vec<&ProcStat>> = HashMap::new();
    for p in all {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    let mut seen = HashSet::from([root]);
    while let Some(parent) = queue.pop() {
        for &child in children.get(&parent).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(child.pid) {
                found.push(*child);
                queue.push(child.pid);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_past_a_name_with_spaces_and_parentheses() {
        let line =
            "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(
            parse_stat(line),
            Some(ProcStat {
                pid: 4242,
                state: 'S',
                ppid: 17,
                pgrp: 4242,
                start: 987654,
            })
        );
        assert_eq!(parse_stat("4242 (x) S 1"), None);
        let me = proc_stat(std::process::id() as i32).unwrap();
        assert!(me.running());
        assert!(process_running(std::process::id(), Some(me.start)));
        assert!(!process_running(std::process::id(), Some(me.start + 1)));
    }

    #[test]
    fn descendants_follow_the_parent_links_down_from_the_root() {
        let p = |pid, ppid| ProcStat {
            pid,
            state: 'S',
            ppid,
            pgrp: pid,
            start: 0,
        };
        let all = [p(1, 0), p(10, 1), p(11, 10), p(12, 11), p(20, 1), p(13, 10)];
        let mut found: Vec<i32> = descendants(&all, 10).iter().map(|p| p.pid).collect();
        found.sort();
        assert_eq!(found, vec![11, 12, 13]);
        assert!(descendants(&all, 12).is_empty());
    }
}
