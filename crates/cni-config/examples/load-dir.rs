//! Loads a CNI configuration directory and prints one JSON object per candidate file:
//! `{"file", "network", "cniVersion", "plugins", "verdict", "reason"}`.
//!
//! ```text
//! cargo run -p cni-config --example load-dir -- /etc/cni/net.d
//! ```
//!
//! Exits 0 when the directory could be read (even if every file was rejected), 1 with a message
//! when it could not, 2 on a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: load-dir DIR");
        return ExitCode::from(2);
    };
    match cni_config::load_dir(&PathBuf::from(dir)) {
        Ok(load) => {
            for file in &load.files {
                println!("{}", file.to_json());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("load-dir: {e}");
            ExitCode::FAILURE
        }
    }
}
