//! The serve's log, read once as a stream for what the verdict needs of it: whether the route
//! patterns match, its last lines, and its last line of a warm-up ([`WARMUP`]).
//!
//! A serve's log can be a gigabyte (a candidate at `-lv 4`, or one printing a line per token),
//! so it is never held whole: the scan keeps one line at a time (at most [`LINE_CAP`] bytes:
//! a longer line is matched in pieces of that size), the first line the slow route matches,
//! and the last [`TAIL_LINES`] non-blank lines, each cut to [`KEPT_LINE_CAP`] bytes. Memory is
//! bounded by those, whatever the log holds.
//!
//! Route patterns match one line at a time, so `^` and `$` are a line's start and end, as a
//! reader of the log expects. (They once matched over the whole log at once, where `^` was
//! only the log's first byte.) Bytes that are not UTF-8 are read as U+FFFD.
//!
//! A line is matched, and kept, with its ANSI escape sequences removed ([`strip_ansi`]): some
//! serves colour their log (FastFlowLM), and a pattern is written for the text a reader sees,
//! not for `\x1b[32m` between its words.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::{self, Read};

use regex::Regex;

/// The most bytes of one line matched at once; a longer line is matched in pieces.
pub const LINE_CAP: usize = 64 * 1024;
/// The most bytes kept of a line quoted in the verdict.
pub const KEPT_LINE_CAP: usize = 1024;
/// How many of the log's last non-blank lines are kept, for a serve that did not come up.
pub const TAIL_LINES: usize = 5;

/// The words real serves log while they warm up or compile before they serve: vLLM's CPU
/// worker (`Warming up model for the compilation...`, vllm/v1/worker/cpu_model_runner.py; most
/// of its 136 s to ready on a 2-core box, issue 51), its GPU worker's graph capture (`Capturing
/// CUDA graphs`, vllm/v1/worker/gpu_model_runner.py) and torch.compile (`Compiling a graph for
/// dynamic shape`, vllm/compilation/backends.py), vllm-ascend's ACL graphs, and llama.cpp's
/// `warming up the model with an empty run` (common/common.cpp). Literals, so the regex
/// crate's literal search finds them without slowing a long log's scan.
pub const WARMUP: &str = "Warming up|warming up|Warm-up|warm-up|warmup|Capturing CUDA graph|\
    Capturing ACL graph|Compiling a graph|torch\\.compile";

fn warmup_regex() -> &'static Regex {
    static RE: std::sync::LazyLock<Regex> =
        std::sync::LazyLock::new(|| Regex::new(WARMUP).expect("WARMUP is a valid regex"));
    &RE
}

/// What the verdict needs of a serve log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogScan {
    /// Whether some line matched the fast-route pattern (false when none was given).
    pub fast_matched: bool,
    /// The first line the slow-route pattern matched, cut to [`KEPT_LINE_CAP`] bytes.
    pub slow_line: Option<String>,
    /// The last non-blank lines, oldest first, each cut to [`KEPT_LINE_CAP`] bytes.
    pub tail: Vec<String>,
    /// The line of a warm-up or compiling before the serve served ([`WARMUP`]) that no line
    /// saying the warm-up ended (`done`, `took`, `finished`, `complete`) followed, cut to
    /// [`KEPT_LINE_CAP`] bytes: a serve not ready in time is named as one still warming up.
    pub warmup_line: Option<String>,
    /// Why the log was not read, when it was not (the run was interrupted first): the route is
    /// then not judged.
    pub unread: Option<String>,
}

impl LogScan {
    /// A log that was not read, and why.
    pub fn unread(why: impl Into<String>) -> LogScan {
        LogScan {
            unread: Some(why.into()),
            ..LogScan::default()
        }
    }

    /// Scan `log` for `fast` and `slow`. Reads to the end; an error reading is returned.
    pub fn read(log: impl Read, fast: Option<&Regex>, slow: Option<&Regex>) -> io::Result<LogScan> {
        let mut scan = Scanner {
            fast,
            slow,
            out: LogScan::default(),
            tail: VecDeque::with_capacity(TAIL_LINES),
        };
        let mut log = log;
        let mut buf = vec![0u8; LINE_CAP];
        // The start of `buf` holds a line not yet ended, of `held` bytes.
        let mut held = 0;
        loop {
            let n = match log.read(&mut buf[held..]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let filled = held + n;
            let mut start = 0;
            while let Some(i) = memchr::memchr(b'\n', &buf[start..filled]) {
                scan.line(&buf[start..start + i]);
                start += i + 1;
            }
            if start == 0 && filled == buf.len() {
                // A line longer than the buffer: match what there is as a piece of it.
                scan.line(&buf[..filled]);
                held = 0;
            } else {
                buf.copy_within(start..filled, 0);
                held = filled - start;
            }
        }
        if held > 0 {
            scan.line(&buf[..held]);
        }
        scan.out.tail = scan.tail.into_iter().collect();
        Ok(scan.out)
    }

    /// Scan a log already in memory (tests and hand-made runs).
    pub fn of_text(log: &str, fast: Option<&Regex>, slow: Option<&Regex>) -> LogScan {
        Self::read(log.as_bytes(), fast, slow).unwrap_or_default()
    }
}

struct Scanner<'a> {
    fast: Option<&'a Regex>,
    slow: Option<&'a Regex>,
    out: LogScan,
    tail: VecDeque<String>,
}

impl Scanner<'_> {
    fn line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = strip_ansi(line);
        let text = String::from_utf8_lossy(&line);
        if let Some(fast) = self.fast {
            if !self.out.fast_matched && fast.is_match(&text) {
                self.out.fast_matched = true;
            }
        }
        if let Some(slow) = self.slow {
            if self.out.slow_line.is_none() && slow.is_match(&text) {
                self.out.slow_line = Some(kept(&text));
            }
        }
        if warmup_regex().is_match(&text) {
            // vLLM ends its warm-up with `Warming up done.` and `init engine (profile, create
            // kv cache, warmup model) took 107.25 s`: a warm-up that says it ended is over.
            let ended = ["done", "took", "finished", "complete"]
                .iter()
                .any(|w| text.contains(w));
            self.out.warmup_line = (!ended).then(|| kept(&text));
        }
        if !text.trim().is_empty() {
            if self.tail.len() == TAIL_LINES {
                self.tail.pop_front();
            }
            self.tail.push_back(kept(&text));
        }
    }
}

/// `line` without its ANSI escape sequences (ECMA-48): CSI (`ESC [` parameters, intermediates,
/// a final byte: colours, cursor moves), the string controls OSC, DCS, SOS, PM and APC (`ESC ]`
/// and friends, up to BEL or `ESC \`), and the two-byte escapes (`ESC (B`, `ESC 7`). A sequence
/// cut off by the line's end is dropped with it. A line without ESC is returned as it is.
pub fn strip_ansi(line: &[u8]) -> Cow<'_, [u8]> {
    const ESC: u8 = 0x1b;
    let Some(first) = memchr::memchr(ESC, line) else {
        return Cow::Borrowed(line);
    };
    let mut out = Vec::with_capacity(line.len());
    out.extend_from_slice(&line[..first]);
    let mut i = first;
    while i < line.len() {
        if line[i] != ESC {
            let next = memchr::memchr(ESC, &line[i..]).map_or(line.len(), |n| i + n);
            out.extend_from_slice(&line[i..next]);
            i = next;
            continue;
        }
        i += 1;
        match line.get(i) {
            None => break,
            Some(b'[') => {
                i += 1;
                // Parameters and intermediates, then one final byte.
                while i < line.len() && (0x20..=0x3f).contains(&line[i]) {
                    i += 1;
                }
                if i < line.len() && (0x40..=0x7e).contains(&line[i]) {
                    i += 1;
                }
            }
            Some(b']' | b'P' | b'X' | b'^' | b'_') => {
                i += 1;
                // A string, up to BEL or ST (ESC \).
                while i < line.len() {
                    if line[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if line[i] == ESC && line.get(i + 1) == Some(&b'\\') {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            Some(_) => {
                while i < line.len() && (0x20..=0x2f).contains(&line[i]) {
                    i += 1;
                }
                if i < line.len() && (0x30..=0x7e).contains(&line[i]) {
                    i += 1;
                }
            }
        }
    }
    Cow::Owned(out)
}

/// `text` cut to at most [`KEPT_LINE_CAP`] bytes, at a character boundary.
fn kept(text: &str) -> String {
    if text.len() <= KEPT_LINE_CAP {
        return text.to_string();
    }
    let mut end = KEPT_LINE_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(p: &str) -> Regex {
        Regex::new(p).unwrap()
    }

    /// A reader that hands out its bytes a few at a time, as a pipe or a slow disk may.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn patterns_match_line_by_line_and_the_first_slow_line_is_kept() {
        let log = "boot\nload_tensors: CPU_Mapped\r\nroute: cpu-fallback (1)\nroute: cpu-fallback (2)\n\n  \nlast";
        let (fast, slow) = (re("^load_tensors: CPU_Mapped$"), re("cpu-fallback"));
        for step in [1, 3, 7, 4096] {
            let scan =
                LogScan::read(Trickle(log.as_bytes(), step), Some(&fast), Some(&slow)).unwrap();
            assert!(scan.fast_matched, "step {step}");
            assert_eq!(scan.slow_line.as_deref(), Some("route: cpu-fallback (1)"));
            assert_eq!(
                scan.tail,
                [
                    "boot",
                    "load_tensors: CPU_Mapped",
                    "route: cpu-fallback (1)",
                    "route: cpu-fallback (2)",
                    "last"
                ]
            );
        }
        let scan = LogScan::of_text(log, Some(&re("^route: npu")), None);
        assert!(!scan.fast_matched);
        assert_eq!(scan.slow_line, None);
    }

    #[test]
    fn only_the_last_lines_are_kept_and_each_is_cut() {
        let long = "é".repeat(KEPT_LINE_CAP); // two bytes each: the cut falls on a boundary
        let log = format!("1\n2\n3\n4\n5\n6\n{long}\n");
        let scan = LogScan::of_text(&log, None, None);
        assert_eq!(scan.tail.len(), TAIL_LINES);
        assert_eq!(scan.tail[0], "3");
        assert_eq!(scan.tail[4].len(), KEPT_LINE_CAP);
        assert!(log.contains(&scan.tail[4]));
    }

    #[test]
    fn a_line_longer_than_the_buffer_is_matched_in_pieces_with_bounded_memory() {
        // 1 MiB without a newline, the route line in the middle of it, then a short line.
        let mut log = vec![b'x'; 1 << 20];
        log[600_000..600_010].copy_from_slice(b"route: npu");
        log.extend_from_slice(b"\ndone\n");
        let scan = LogScan::read(&log[..], Some(&re("route: npu")), Some(&re("cpu"))).unwrap();
        assert!(scan.fast_matched);
        assert_eq!(scan.slow_line, None);
        assert_eq!(scan.tail.last().map(String::as_str), Some("done"));
        assert!(scan.tail.iter().all(|l| l.len() <= KEPT_LINE_CAP));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_read_not_refused() {
        let scan = LogScan::read(
            &b"\xff\xfe route: npu \x1b[0m\n"[..],
            Some(&re("route: npu")),
            None,
        )
        .unwrap();
        assert!(scan.fast_matched);
        assert_eq!(scan.tail, ["\u{fffd}\u{fffd} route: npu "]);
    }

    #[test]
    fn escape_sequences_are_removed_before_matching() {
        let strip = |b: &[u8]| String::from_utf8(strip_ansi(b).into_owned()).unwrap();
        // Colours between words, as a coloured log has them.
        assert_eq!(
            strip(b"\x1b[1;32m[FLM]\x1b[0m  Loading model on \x1b[36mNPU\x1b[0m"),
            "[FLM]  Loading model on NPU"
        );
        // A window title (OSC, ended by BEL and by ST), a charset switch, a cursor save.
        assert_eq!(
            strip(b"a\x1b]0;title\x07b\x1b]2;t\x1b\\c\x1b(Bd\x1b7e"),
            "abcde"
        );
        // Cut off at the line's end: dropped, and never a panic.
        assert_eq!(strip(b"ok\x1b[38;5"), "ok");
        assert_eq!(strip(b"ok\x1b"), "ok");
        assert_eq!(strip(b"ok\x1b]unterminated"), "ok");
        // Nothing to strip: the same bytes, not a copy.
        assert!(matches!(strip_ansi(b"plain"), Cow::Borrowed(b"plain")));
        let scan = LogScan::of_text(
            "\x1b[32mdevice\x1b[0m: \x1b[1mNPU\x1b[0m\n",
            Some(&re("device: NPU")),
            Some(&re(r"\x1b")),
        );
        assert!(scan.fast_matched);
        assert_eq!(scan.slow_line, None, "no escape is left to match");
        assert_eq!(scan.tail, ["device: NPU"]);
    }

    /// vLLM 0.32's CPU worker as it warmed up here (issue 51), line by line.
    const VLLM_WARMUP: [&str; 5] = [
        "(Worker pid=10348) INFO 12-06 01:29:21 [default_loader.py:501] Loading weights took 2.20 seconds",
        "(Worker pid=10348) INFO 12-06 01:29:23 [cpu_model_runner.py:87] Warming up model for the compilation...",
        "(EngineCore pid=10130) INFO 12-06 01:30:24 [shm_broadcast.py:871] No available shared memory broadcast block found in 60 seconds.",
        "(Worker pid=10348) INFO 12-06 01:31:08 [cpu_model_runner.py:91] Warming up done.",
        "(EngineCore pid=10130) INFO 12-06 01:31:10 [core.py:402] init engine (profile, create kv cache, warmup model) took 107.25 s",
    ];

    #[test]
    fn a_warm_up_under_way_is_kept_and_one_that_ended_is_not() {
        let at = |n: usize| LogScan::of_text(&VLLM_WARMUP[..n].join("\n"), None, None);
        assert_eq!(at(1).warmup_line, None, "loading weights is no warm-up");
        assert_eq!(at(2).warmup_line.as_deref(), Some(VLLM_WARMUP[1]));
        assert_eq!(
            at(3).warmup_line.as_deref(),
            Some(VLLM_WARMUP[1]),
            "a later line of another kind leaves it under way"
        );
        assert_eq!(at(4).warmup_line, None, "`Warming up done.` ends it");
        assert_eq!(at(5).warmup_line, None, "`warmup model) took` ends it too");
        let again = format!(
            "{}\n{}",
            VLLM_WARMUP.join("\n"),
            "Capturing CUDA graph shapes: 40%"
        );
        assert_eq!(
            LogScan::of_text(&again, None, None).warmup_line.as_deref(),
            Some("Capturing CUDA graph shapes: 40%")
        );
        let llama = "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)";
        assert_eq!(
            LogScan::of_text(llama, None, None).warmup_line.as_deref(),
            Some(llama)
        );
    }

    #[test]
    fn an_empty_log_has_no_tail() {
        let scan = LogScan::of_text("", Some(&re("x")), Some(&re("y")));
        assert_eq!(scan, LogScan::default());
    }
}
