//! The wire: what a streamed chat reply looks like as bytes. The SSE parser ([`sse`]), the
//! fields of a streaming chat chunk the gate reads ([`openai`]) and the fast scanner for the
//! usual chunk ([`chunk_scan`]); and a serve's Prometheus metrics as text ([`prom_text`]).
//!
//! Pure over bytes: no I/O, no clock, no tokio, `std::fs`, `std::net`, `std::process` or nix.
//! It uses nothing else of the crate but `inert` (the metrics reader quotes a bad line as every
//! error does); the client (live), the stand-in and judging build on it. `tests/layers.rs`
//! checks this.

pub mod chunk_scan;
pub mod logprobs;
pub mod openai;
pub mod prom_text;
pub mod sse;
