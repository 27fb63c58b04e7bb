use std::process::ExitCode;

use clap::Parser;
use npu_serve_smoke::cli::{dispatch, Cli};
use npu_serve_smoke::exit_codes;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("npu-serve-smoke: {e:#}");
            ExitCode::from(exit_codes::COULD_NOT_RUN)
        }
    }
}
