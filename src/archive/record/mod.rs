//! What a run records: the data the verdict is a function of, as it is kept in the run directory.
//!
//! Raw observations (arrival times, text, the serve's own reports) are the record; figures
//! derived from them (`metrics`) are written beside them for readers but recomputed by the
//! verdict, so a re-judged archive never trusts an older build's arithmetic.
//!
//! One file a concern, every item re-exported here, so `crate::archive::record::X` names it
//! whichever file holds it:
//! - `reply.rs`: one reply as received (replies.jsonl), its chunks, logprobs and measured
//!   figures, and the re-anchors (reanchors.json);
//! - `token_text.rs`: a logprob record's token text, interned; `logprob_read.rs`: a reply's
//!   logprobs read by hand in the shape the gate writes them;
//! - `manifest.rs`: run.json, what was run, where and with which settings;
//! - `floors.rs`: the floors, limits and patterns a run is judged against;
//! - `lifecycle.rs`: how the serve came up and how it was stopped;
//! - `hold.rs`: the device hold;
//! - `provenance.rs`: what the run ran on and with;
//! - `footprint.rs`: the serve's and the device's memory at one look, and the footprint
//!   lines' floors;
//! - `context.rs`: context depth (issue 35): the depths planned, a depth reply's place, the
//!   context lines' floors and figures;
//! - `conditions.rs`: the box's load and what was sampled during the replies (load.json);
//! - `route.rs`: the route evidence read from /proc (route.json);
//! - `metrics.rs`: the serve's own metrics around the bursts (metrics.json);
//! - `result.rs`: the verdict's lines, figures and outcome (result.json).
//!
//! The files import one another directly, never through this one, so there is no circle
//! among them. The file formats' version, [`SCHEMA`], is here.

mod conditions;
mod context;
mod floors;
mod footprint;
mod hold;
mod lifecycle;
mod logprob_read;
mod manifest;
mod metrics;
mod provenance;
mod reply;
mod result;
mod route;
mod token_text;
mod tool_call;

pub use crate::archive::check::{Check, Kind};
pub use crate::archive::tags::{InterruptSignal, LogSource, Phase, Unit};
pub use conditions::*;
pub use context::*;
pub use floors::*;
pub use footprint::*;
pub use hold::*;
pub use lifecycle::*;
pub use logprob_read::read_plain_reply;
pub use manifest::*;
pub use metrics::*;
pub use provenance::*;
pub use reply::*;
pub use result::*;
pub use route::*;
pub use token_text::*;
pub use tool_call::*;

/// Version of the run directory's file formats. Bumped when a field changes meaning.
pub const SCHEMA: u32 = 1;
