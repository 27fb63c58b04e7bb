//! npu-serve-smoke: a release gate for LLM inference servers.
pub mod clock;
pub mod exit_codes;
pub mod measure;
pub mod openai;
pub mod prompts;
pub mod record;
pub mod sse;
pub mod verdict;
