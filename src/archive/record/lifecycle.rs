//! How the serve came and went, as run.json records it: how it came up (or did not), and how it
//! was stopped, including an end the gate did not ask for and a supervisor that did not see the
//! stop through.

use serde::{Deserialize, Serialize};

/// How the serve came up, or did not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Startup {
    /// Answered its readiness probe.
    Ready {
        /// Milliseconds from launch (or from the first probe, when attached) to ready.
        after_ms: f64,
        /// The path that answered 200.
        probe: String,
        /// HTTP answers other than 200 before that (a serve loading its model answers 503).
        #[serde(default)]
        not_ready_answers: u32,
    },
    /// The process exited before it was ready.
    Exited {
        /// Its exit status, as text.
        status: String,
    },
    /// Still not ready when the ready timeout ran out.
    NotReady {
        /// The timeout, in seconds.
        timeout_s: f64,
        /// The serve's base URL the probes went to (absent in runs from before it was kept).
        #[serde(default)]
        url: Option<String>,
        /// HTTP answers other than 200 it gave meanwhile (absent in runs from before).
        #[serde(default)]
        not_ready_answers: Option<u32>,
        /// What the last probe got instead of an answer, when none was an HTTP answer (e.g.
        /// `connection refused`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_probe: Option<String>,
    },
    /// The process could not be started at all.
    SpawnFailed {
        /// Why.
        error: String,
    },
    /// A signal stopped the run before the serve was ready.
    Interrupted,
}

impl Startup {
    /// Whether replies could be requested.
    pub fn is_ready(&self) -> bool {
        matches!(self, Startup::Ready { .. })
    }
}

/// How the serve was stopped: only what happened, as the supervisor saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// Whether the serve itself was still running when the grace ran out (or a second signal
    /// cut it short), and was killed with SIGKILL.
    pub killed: bool,
    /// A second signal cut the stop short: whatever was left got SIGKILL at once.
    #[serde(default)]
    pub cut_short: bool,
    /// Processes that had left the serve's process group and were still running after it
    /// stopped; they were stopped too (SIGTERM, SIGKILL after the grace). Zombies are not
    /// counted: they were already gone.
    #[serde(default)]
    pub escaped_killed: usize,
    /// The serve's exit status, as text, when it was reaped.
    pub exit_status: Option<String>,
    /// Other processes of the serve's group still running when SIGKILL went to it (the serve
    /// may have exited on SIGTERM while they did not).
    #[serde(default)]
    pub group_killed: usize,
    /// Processes of the serve's tree still running 5 s after SIGKILL (stuck in the kernel):
    /// the gate could not stop them.
    #[serde(default)]
    pub left_running: usize,
    /// The serve's end, when it was not the gate's doing: it exited or died before the gate
    /// asked it to stop, or died of a signal the gate never sends while it stopped. Absent when
    /// the serve ended as the gate stopped it (and in runs from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unasked_end: Option<UnaskedEnd>,
    /// The gate's supervisor did not see the stop through: something killed it or stopped it
    /// (SIGSTOP), or it stopped answering (issue 30: a serve can signal a process of its own
    /// user). The gate then killed the serve's tree itself. Absent when the supervisor stopped
    /// the serve as asked (and in runs from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor_lost: Option<SupervisorLost>,
    /// Processes of the serve's tree the gate itself found running and killed (SIGKILL) once
    /// its supervisor was gone or no longer trusted: the serve's group and every process whose
    /// ancestry reaches the gate (it is their child subreaper, so the supervisor's orphans come
    /// to it).
    #[serde(default)]
    pub gate_killed: usize,
}

/// What became of the gate's supervisor, when it did not stop the serve as asked
/// ([`StopRecord::supervisor_lost`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisorLost {
    /// What the gate found.
    pub what: SupervisorFault,
    /// Whether it happened before the gate asked for the stop (else during it).
    pub before_stop: bool,
    /// How the supervisor ended, as the system says it (`signal: 9 (SIGKILL)`), when the gate
    /// reaped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// How the gate's supervisor failed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupervisorFault {
    /// It exited without reporting the stop: killed, or crashed.
    Died,
    /// It was stopped (SIGSTOP, SIGTSTP; continued since or not): it could not have acted.
    Stopped,
    /// It ran but did not report the stop within the time the stop may take.
    Silent,
}

/// A serve's end that the gate did not ask for ([`StopRecord::unasked_end`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnaskedEnd {
    /// As the system says it: `exit status: 0`, `signal: 11 (SIGSEGV) (core dumped)`.
    pub status: String,
    /// When the gate saw it.
    pub when: UnaskedWhen,
}

/// When a serve's unasked end was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum UnaskedWhen {
    /// It had ended before the gate asked it to stop: seen at `seen_ns` (since the clock
    /// base), after its replies.
    BeforeStop {
        /// When the gate found it gone, ns since the clock base.
        seen_ns: u64,
    },
    /// It died of a signal the gate does not send (not SIGTERM, not SIGKILL) while the gate
    /// stopped it: a crash on the way down.
    WhileStopping,
}
