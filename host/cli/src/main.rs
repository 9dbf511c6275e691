//! `dpone-host`: the composition root. It parses the command line, picks adapters and wires
//! policies, trust and engines together. JSON goes to stdout, logs to stderr.
//!
//! Exit codes (stable, see `docs/cli.md`): 0 success; 1 refused (a decision-table row failed, a
//! verification failed); 2 usage; 3 bad input; 4 a policy was refused at load or failed closed;
//! 5 internal error.

mod activation;
mod demo;
mod exit;
mod policy_cmd;
mod shipped;
mod trust_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "dpone-host",
    version,
    about = "Data-pipeline safety protocols with sandboxed policy decisions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    source: shipped::PolicySourceArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Build, pin, inspect, evaluate, test and benchmark policy components.
    Policy {
        #[command(subcommand)]
        command: policy_cmd::PolicyCommand,
    },
    /// Load the shipped policies at their pins and evaluate a sample decision of each kind.
    Demo(demo::DemoArgs),
    /// Create, sign, verify, inspect and activate signed policy bundles.
    Bundle {
        #[command(subcommand)]
        cmd: trust_cmd::BundleCommand,
    },
    /// Verify a Sigstore bundle offline (Sigstore conformance client protocol); exit 0 only on
    /// success.
    VerifyBundle(trust_cmd::VerifyBundleArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DPONE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Policy { command } => policy_cmd::run(command, &cli.source),
        Command::Demo(args) => demo::run(args, &cli.source),
        Command::Bundle { cmd } => return trust_cmd::run_bundle(cmd),
        Command::VerifyBundle(args) => return trust_cmd::run_verify_bundle(args),
    };
    exit::finish(result)
}
