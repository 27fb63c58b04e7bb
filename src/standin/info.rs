//! What the stand-in says of itself: GET /v1/models and, with `--metrics`, GET /metrics.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::frames::MODEL;
use super::state::Script;

/// GET /metrics with `--metrics`: llama-server's names and shapes (tools/server/server.cpp,
/// `handle_metrics`: `# HELP` and `# TYPE` lines, then `llamacpp:NAME value`).
pub(crate) async fn metrics(State(script): State<Arc<Script>>) -> Response {
    let args = &script.args;
    if args.metrics_garbage {
        let page = "<html><body><h1>It works!</h1></body></html>\n";
        return ([(header::CONTENT_TYPE, "text/html")], page).into_response();
    }
    let c = &script.counts;
    let tokens = c.tokens.load(Ordering::Relaxed);
    let mut text = String::new();
    for (name, kind, help, value) in [
        (
            "tokens_predicted_total",
            "counter",
            "Number of generation tokens processed.",
            tokens as i64,
        ),
        (
            "requests_processing",
            "gauge",
            "Number of requests processing.",
            script.under_way.load(Ordering::Relaxed) as i64,
        ),
        (
            "requests_deferred",
            "gauge",
            "Number of requests deferred.",
            c.deferred.load(Ordering::Relaxed),
        ),
    ] {
        text.push_str(&format!(
            "# HELP llamacpp:{name} {help}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {value}\n"
        ));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// GET /v1/models: the one model, [`MODEL`].
pub(crate) async fn models() -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "owned_by": "npu-serve-smoke"}],
    }))
}
