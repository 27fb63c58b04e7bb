//! What every Prometheus family is written with: the text exposition format (version 0.0.4)
//! being written, a family's samples, and how a value, a label and a HELP text are spelled.
//! A leaf: [`crate::report::prom`] writes the families of the lines it knows, and each line
//! module ([`crate::lines`]) writes its own with these.

use std::fmt::Write as _;

use crate::archive::check::Check;
use crate::archive::record::{Figures, Percentiles, Verdict};

/// What every metric's name starts with.
pub(crate) const PREFIX: &str = "npu_serve_smoke_";

/// One sample of a family: its own labels (the run's are added) and its value.
pub(crate) type Sample = (Vec<(&'static str, String)>, f64);

/// The text being written, and the labels every sample carries.
pub(crate) struct Exposition {
    pub(crate) text: String,
    run_labels: Vec<(&'static str, String)>,
}

impl Exposition {
    /// An exposition with nothing written yet, whose every sample carries `run_labels`.
    pub(crate) fn new(run_labels: Vec<(&'static str, String)>) -> Self {
        Exposition {
            text: String::new(),
            run_labels,
        }
    }

    /// A gauge family `name` with its samples; nothing when it has none.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, samples: &[Sample]) {
        if samples.is_empty() {
            return;
        }
        self.header(name, help, "gauge");
        for (labels, value) in samples {
            self.sample(name, labels, *value);
        }
    }

    /// A summary family `name` in seconds from percentiles in ms: its quantiles, `_sum` (the
    /// mean times the count) and `_count`.
    pub(crate) fn summary_ms(&mut self, name: &str, help: &str, p: &Percentiles) {
        self.header(name, help, "summary");
        for (q, ms) in [("0.5", p.p50), ("0.9", p.p90), ("0.99", p.p99)] {
            self.sample(name, &[("quantile", q.to_string())], ms / 1e3);
        }
        let sum = p.mean * p.count as f64 / 1e3;
        self.sample(&format!("{name}_sum"), &[], sum);
        self.sample(&format!("{name}_count"), &[], p.count as f64);
    }

    fn header(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.text, "# HELP {PREFIX}{name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {PREFIX}{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&'static str, String)], value: f64) {
        let _ = write!(self.text, "{PREFIX}{name}{{");
        let all = self.run_labels.iter().chain(labels);
        for (i, (key, val)) in all.enumerate() {
            let comma = if i == 0 { "" } else { "," };
            let _ = write!(self.text, "{comma}{key}=\"{}\"", escape_label(val));
        }
        let _ = writeln!(self.text, "}} {}", sample_value(value));
    }
}

/// A family's one sample, without labels of its own: `pick` of a line's figures, or none
/// where the line, or its figure, is not there.
pub(crate) fn one_sample<T>(figures: Option<&T>, pick: fn(&T) -> Option<f64>) -> Vec<Sample> {
    figures
        .and_then(pick)
        .map(|x| vec![(Vec::new(), x)])
        .unwrap_or_default()
}

/// The figures of the first line named `check`.
pub(crate) fn figures_of(v: &Verdict, check: Check) -> Option<&Figures> {
    v.lines
        .iter()
        .find(|l| l.check == check)
        .and_then(|l| l.figures.as_ref())
}

/// A value as the format writes it: Go's float syntax, with `+Inf`, `-Inf` and `NaN` spelled
/// its way (Rust's `inf` is not a number to Prometheus).
pub(crate) fn sample_value(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x == f64::INFINITY {
        "+Inf".into()
    } else if x == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        x.to_string()
    }
}

/// A label value escaped as the format asks, what acts on a terminal shown as its escape
/// first (a serve's model id is in one): [`crate::inert::prom_label`].
pub(crate) fn escape_label(s: &str) -> String {
    crate::inert::prom_label(s)
}

/// HELP text escaped as the format asks: backslash and line feed.
pub(crate) fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}
