//! `check | plan | run | status`: the protocol routes. The manifest says which route it is for:
//! a `reconciliation` block is XMin key reconciliation, a `physical_design` block is ClickHouse
//! cluster publication. Each route module implements the commands it supports. `check` without a
//! manifest reviews the connection registry instead (`crate::connections_cmd`).

use crate::exit::Failure;
use clap::Args;
use std::path::{Path, PathBuf};

/// Options shared by the route commands.
#[derive(Args, Clone, Debug)]
pub struct RouteArgs {
    /// The workload manifest (YAML). Required, except by `check`: without a manifest, `check`
    /// checks the connection registry given by `--connections`.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// The environment-owned connection registry (YAML).
    #[arg(long, env = "DPONE_CONNECTIONS")]
    pub connections: Option<PathBuf>,
    /// Directory of the shipped components, overriding the copies embedded in the binary
    /// (still checked against the embedded pins).
    #[arg(long)]
    pub components_dir: Option<PathBuf>,
    /// Directory for extraction artifacts.
    #[arg(long, default_value = "target/dpone-artifacts")]
    pub artifact_dir: PathBuf,
    /// Scheduler invocation id that makes retries of one run the same operation.
    #[arg(long, env = "DPONE_INVOCATION_ID")]
    pub invocation: Option<String>,
    /// Repair authority selected for this run only (environment-owned, never from a manifest).
    #[arg(long, env = "DPONE_REPAIR_AUTHORITY_REF")]
    pub repair_authority_ref: Option<String>,
    /// Where policies come from (the global `--trust-policy` / `--bundle`), filled in by main.
    #[arg(skip)]
    pub source: crate::shipped::PolicySourceArgs,
}

impl RouteArgs {
    /// The manifest path; a command that needs one and got none fails as bad input.
    pub fn manifest_path(&self) -> Result<&Path, Failure> {
        self.manifest.as_deref().ok_or_else(|| {
            Failure::bad_input(
                MANIFEST_REQUIRED,
                "this command needs the workload manifest (--manifest)",
            )
        })
    }
}

/// Options of `run`: the route options, and the nonproduction reservation the run may be bound
/// to (`crate::run_gate`).
#[derive(Args)]
pub struct RunArgs {
    /// Route options.
    #[command(flatten)]
    pub route: RouteArgs,
    /// The admitted reservation and the control store.
    #[command(flatten)]
    pub np: crate::run_gate::NpRunArgs,
}

/// Code of a route command run without `--manifest` (and of `check` with neither `--manifest`
/// nor `--connections`).
pub const MANIFEST_REQUIRED: &str = "DPONE_CLI_MANIFEST_REQUIRED";

/// Options of `check`: the route options, and the registry check's own flags.
#[derive(Args, Clone, Debug)]
pub struct CheckArgs {
    /// Route options.
    #[command(flatten)]
    pub route: RouteArgs,
    /// Registry check only (no `--manifest`): an alias of `--output json` — the pin diff as
    /// JSON (`dpone.connections-check.v1`) even at a terminal. Without it the command follows
    /// `--output` like every other: the table at a terminal or with `--output text`, the JSON
    /// otherwise.
    #[arg(long, conflicts_with = "manifest")]
    pub json: bool,
    /// Registry check only (no `--manifest`): validate the registry's structure and print its
    /// pins without connecting anywhere or reading credentials; nothing is verified.
    #[arg(long, conflicts_with = "manifest")]
    pub offline: bool,
}

/// Which protocol a manifest is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// XMin key reconciliation (`reconciliation` block).
    XminReconciliation,
    /// ClickHouse cluster full-refresh publication (`physical_design` block).
    ClickhousePublication,
}

/// Reads the manifest's top-level keys to pick the route. Parsing proper is the route's job.
pub fn detect(text: &str) -> Result<Route, Failure> {
    let top_level: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with([' ', '\t', '#', '-']) && !l.trim().is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.trim()))
        .collect();
    match (
        top_level.contains(&"reconciliation"),
        top_level.contains(&"physical_design"),
    ) {
        (true, false) => Ok(Route::XminReconciliation),
        (false, true) => Ok(Route::ClickhousePublication),
        (true, true) => Err(Failure::bad_input(
            "DPONE_MANIFEST_ROUTE_AMBIGUOUS",
            "a manifest has either a reconciliation or a physical_design block, not both",
        )),
        (false, false) => Err(Failure::bad_input(
            "DPONE_MANIFEST_ROUTE_UNKNOWN",
            "the manifest names no supported route (reconciliation or physical_design)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_block_picks_the_route() {
        assert_eq!(
            detect("version: 1\nreconciliation:\n  mode: key_snapshot\n").ok(),
            Some(Route::XminReconciliation)
        );
        assert_eq!(
            detect("physical_design:\n  storage: {}\n").ok(),
            Some(Route::ClickhousePublication)
        );
        assert!(detect("source:\n  reconciliation: true\n").is_err());
        assert!(detect("reconciliation: {}\nphysical_design: {}\n").is_err());
    }
}
