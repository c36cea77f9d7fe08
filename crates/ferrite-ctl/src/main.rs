//! `ferrite`: the control command for a running `ferrited` (GUI RPC client).
//!
//! Control commands arrive with the GUI RPC layer; for now the command has its name, version
//! and help, so packaging and scripts can rely on it.

use clap::Parser;

/// Control a running Ferrite client.
#[derive(Debug, Parser)]
#[command(name = "ferrite", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    println!(
        "ferrite {}: no command given (see --help)",
        env!("CARGO_PKG_VERSION")
    );
}
