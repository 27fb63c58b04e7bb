//! The box's conditions: how contended the box was while the replies ran, and the busy-box
//! note (and SKIP policy) a timing-only failure on a busy box gets. The load line itself is
//! built in [`super::judge`].

use super::trim_float;
use crate::archive::record::LoadSnapshot;

/// The serve's CPU-wait fraction at or above which a box counts as busy.
pub const BUSY_WAIT_FRACTION: f64 = 0.10;
/// The load per CPU at or above which a box counts as busy, where the wait is not measurable.
pub const BUSY_LOAD_PER_CPU: f64 = 1.0;

/// How contended the box was, by the best measure the run has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Contention {
    /// The serve's CPU-wait fraction during the replies.
    Wait(f64),
    /// The highest 1-minute load per CPU, before or during the replies.
    LoadPerCpu(f64),
}

impl Contention {
    pub(super) fn of(load: &LoadSnapshot) -> Option<Contention> {
        if let Some(w) = load.during.as_ref().and_then(|d| d.wait_fraction) {
            return Some(Contention::Wait(w));
        }
        if load.ncpu == 0 {
            return None;
        }
        let peak = load
            .during
            .as_ref()
            .map_or(load.load1, |d| d.load1_max.max(load.load1));
        Some(Contention::LoadPerCpu(peak / load.ncpu as f64))
    }

    pub(super) fn value(&self) -> f64 {
        match *self {
            Contention::Wait(v) | Contention::LoadPerCpu(v) => v,
        }
    }

    /// The level at or above which this measure counts as busy: the `--busy-skip` threshold
    /// when one is given (one threshold decides both the note and the SKIP), else the
    /// default for the measure.
    pub(super) fn busy_level(&self, busy_skip: Option<f64>) -> f64 {
        match (busy_skip, self) {
            (Some(t), _) => t,
            (None, Contention::Wait(_)) => BUSY_WAIT_FRACTION,
            (None, Contention::LoadPerCpu(_)) => BUSY_LOAD_PER_CPU,
        }
    }

    pub(super) fn busy(&self, busy_skip: Option<f64>) -> bool {
        self.value() >= self.busy_level(busy_skip)
    }

    pub(super) fn describe(&self) -> String {
        match *self {
            Contention::Wait(w) => format!(
                "the serve waited for a CPU {:.0}% of the time it was ready to run",
                w * 100.0
            ),
            Contention::LoadPerCpu(l) => format!("the load was {l:.1} per CPU"),
        }
    }

    pub(super) fn level(&self, busy_skip: Option<f64>) -> String {
        let level = self.busy_level(busy_skip);
        match self {
            Contention::Wait(_) => format!("{}%", trim_float(level * 100.0)),
            Contention::LoadPerCpu(_) => format!("{level:.1} per CPU"),
        }
    }
}

/// What the load line adds when only timing failed: whether the box or the serve is to blame.
pub(super) fn busy_note(c: &Contention, load: &LoadSnapshot, busy_skip: Option<f64>) -> String {
    // The wait fraction is already on the line; the load fallback is not.
    let measure = match c {
        Contention::Wait(_) => String::new(),
        Contention::LoadPerCpu(_) => format!("{}, ", c.describe()),
    };
    if !c.busy(busy_skip) {
        return format!(
            "; the box was quiet ({measure}under the busy level of {}), so the slowness is the serve's own",
            c.level(busy_skip)
        );
    }
    let mut note = format!(
        "; a busy box is the likely cause ({measure}at or above the busy level of {}): re-run on a quiet box",
        c.level(busy_skip)
    );
    let top: Vec<String> = load
        .during
        .iter()
        .flat_map(|d| d.top.iter().take(3))
        .map(|t| {
            let count = if t.count > 1 {
                format!(" x{}", t.count)
            } else {
                String::new()
            };
            format!("{}{count} {:.0}%", t.name, t.cpu_pct)
        })
        .collect();
    if !top.is_empty() {
        note.push_str(&format!(
            "; most CPU during the replies: {}",
            top.join(", ")
        ));
    }
    note
}
