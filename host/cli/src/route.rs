//! `check | plan | run | status`: the protocol routes. The manifest says which route it is for:
//! a `reconciliation` block is XMin key reconciliation, a `physical_design` block is ClickHouse
//! cluster publication. Each route module implements the commands it supports.

use crate::exit::Failure;
use clap::Args;
use std::path::PathBuf;

/// Options shared by the route commands.
#[derive(Args, Clone, Debug)]
pub struct RouteArgs {
    /// The workload manifest (YAML).
    #[arg(long)]
    pub manifest: PathBuf,
    /// The environment-owned connection registry (YAML).
    #[arg(long, env = "DPONE_CONNECTIONS")]
    pub connections: Option<PathBuf>,
    /// Directory of the shipped policy components.
    #[arg(long, default_value = crate::shipped::DEFAULT_COMPONENT_DIR)]
    pub components_dir: PathBuf,
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
