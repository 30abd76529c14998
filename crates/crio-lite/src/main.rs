//! The `crio-lite` binary: parses the command line and hands it to the library.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = crio_lite::cli::Cli::parse();
    match crio_lite::wiring::main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crio-lite: {}", crio_lite::cli::error_text(&e));
            ExitCode::FAILURE
        }
    }
}
