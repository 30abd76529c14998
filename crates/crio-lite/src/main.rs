//! The `crio-lite` binary: parses the command line and hands it to the library.

use std::process::ExitCode;

use crio_lite::cli::Invocation;

fn main() -> ExitCode {
    let outcome = match crio_lite::cli::parse() {
        Invocation::Cli(cli) => crio_lite::wiring::main(*cli),
        Invocation::Docs(docs) => docs.run(),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crio-lite: {}", crio_lite::cli::error_text(&e));
            ExitCode::FAILURE
        }
    }
}
