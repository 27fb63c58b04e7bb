//! Writing to stdout and stderr without ever failing the run.
//!
//! A reader that went away (`run | head -1`, `run 2>&1 | true`, a CI step whose log pipe
//! closed) is not an error of the verdict: the verdict is in result.json and the exit code, and
//! the gate must still stop the serve, release the hold and write them. `print!` and
//! `eprintln!` panic when their stream is closed (Rust ignores SIGPIPE, so a write gets
//! EPIPE), which lost the verdict's exit code and, mid-run, the result itself. Every line the
//! gate says goes through here instead; what could not be written is dropped.

use std::io::Write;
use std::sync::Mutex;

/// Where the gate's stderr lines go instead of stderr while a run's writer thread runs
/// ([`divert`]): a closure that hands the line on, and says whether it took it.
type Sink = Box<dyn Fn(&str) -> bool + Send>;

static DIVERTED: Mutex<Option<Sink>> = Mutex::new(None);

/// Write `text` to stdout as it is; whether it was written whole.
pub fn out(text: &str) -> bool {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_ok()
}

/// Write `text` to stderr as it is; whether it was written whole.
pub fn err(text: &str) -> bool {
    std::io::stderr().lock().write_all(text.as_bytes()).is_ok()
}

/// Send every line [`err_line`] is given to `sink` instead of stderr, until [`divert_end`]:
/// while the serve's replies are read, a write to a stderr pipe that its reader drains slowly
/// must not block the thread that stamps them (`crate::live::recorder`). A line the sink does
/// not take is written as before.
pub fn divert(sink: Sink) {
    *DIVERTED.lock().unwrap_or_else(|e| e.into_inner()) = Some(sink);
}

/// Write lines to stderr again.
pub fn divert_end() {
    DIVERTED.lock().unwrap_or_else(|e| e.into_inner()).take();
}

/// A line for stderr: to the sink [`divert`] set, or written (see [`err_line_direct`]).
///
/// Every line is made inert for the terminal first ([`crate::inert::terminal`]): a line can
/// quote a serve's or a holder's text, and none of the gate's own holds a control character.
pub fn err_line(line: &str) -> bool {
    let line = &*crate::inert::terminal(line);
    if let Some(sink) = DIVERTED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if sink(line) {
            return true;
        }
    }
    err_line_direct(line)
}

/// Write `line` and a newline to stderr in one write, so lines from the gate and from a
/// child sharing the stream do not interleave mid-line.
pub fn err_line_direct(line: &str) -> bool {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    err(&text)
}

/// One line on stderr from the gate, after `npu-serve-smoke: `, as `format!` takes it. Never
/// fails and never panics (see the module's doc).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        {
            let _ = $crate::console::err_line(&format!("npu-serve-smoke: {}", format_args!($($arg)*)));
        }
    };
}
