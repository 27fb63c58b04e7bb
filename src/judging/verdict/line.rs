//! How a line is made and written: [`Line`]'s constructors, and the text a status, a line, an
//! outcome and a verdict print as. The types are the archive's; what they say is the verdict's.

use std::fmt;

use crate::archive::record::{Check, Figures, Line, Outcome, Status, Verdict};
use crate::inert::{one_line, terminal as visible};

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Status::Ok => "ok",
            Status::Fail => "FAIL",
            Status::Info => "info",
            Status::Inconclusive => "inconclusive",
        })
    }
}

impl Line {
    /// A line with no figures.
    pub(crate) fn new(check: Check, status: Status, text: impl Into<String>) -> Self {
        Line {
            check,
            status,
            text: text.into(),
            figures: None,
        }
    }

    /// The line with these figures.
    pub(crate) fn with(mut self, figures: Figures) -> Self {
        self.figures = Some(figures);
        self
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A line can carry the serve's words: its control characters are shown, not sent to
        // the terminal.
        write!(
            f,
            "{:<12} {:<5} {}",
            self.check,
            self.status,
            visible(&self.text)
        )
    }
}

impl Outcome {
    /// The result in one word, as result.json's `result` has it: `PASS`, `FAIL`, `SKIP`,
    /// `INTERRUPTED`.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Skip { .. } => "SKIP",
            Outcome::Interrupted { .. } => "INTERRUPTED",
            Outcome::Inconclusive { .. } => "INCONCLUSIVE",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pass => f.write_str("PASS"),
            Outcome::Fail => f.write_str("FAIL"),
            // A reason can name a holder or quote a serve: shown, never acted on.
            Outcome::Skip {
                reason,
                advice: None,
            } => write!(f, "SKIP ({})", one_line(reason)),
            Outcome::Skip {
                reason,
                advice: Some(advice),
            } => write!(f, "SKIP ({}); {}", one_line(reason), one_line(advice)),
            Outcome::Interrupted { signal } => write!(f, "INTERRUPTED (by {signal})"),
            Outcome::Inconclusive { reason } => write!(f, "INCONCLUSIVE ({})", one_line(reason)),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        writeln!(f, "RESULT: {}", self.outcome)
    }
}
