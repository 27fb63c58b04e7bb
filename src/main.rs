use std::process::ExitCode;

use npu_serve_smoke::cli::{dispatch, parse};
use npu_serve_smoke::exit_codes;

fn main() -> ExitCode {
    match dispatch(parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            npu_serve_smoke::say!("{e:#}");
            ExitCode::from(exit_codes::COULD_NOT_RUN)
        }
    }
}
