//! `dpone-host`: the composition root. It parses the command line, picks adapters and wires
//! policies, trust and engines together. JSON goes to stdout, logs to stderr.
//!
//! Exit codes (stable, see `docs/cli.md`): 0 success; 1 refused (a decision-table row failed, a
//! verification failed); 2 usage; 3 bad input; 4 a policy was refused at load or failed closed;
//! 5 internal error; 75 not finished, retry the same invocation.

mod activation;
mod campaign;
mod campaign_cmd;
mod campaign_store_cmd;
mod clickhouse_cmd;
mod connections_cmd;
mod control_store;
mod demo;
mod exit;
mod input;
mod junit;
mod np_run;
mod policy_cmd;
mod render;
mod route;
mod run_gate;
mod scaffold;
mod shipped;
mod telemetry;
mod trust_cmd;
mod xmin_cmd;

#[cfg(test)]
mod layering;

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
    /// Output on stdout: `auto` (the default) prints a short human summary when stdout is a
    /// terminal and the JSON contract otherwise; `json` always the JSON; `text` always the
    /// summary. `NO_COLOR` turns colour off.
    #[arg(long, global = true, value_enum, default_value_t = render::OutputFlag::Auto)]
    output: render::OutputFlag,
}

#[derive(Subcommand)]
enum Command {
    /// Build, pin, inspect, evaluate, test and benchmark policy components.
    Policy {
        #[command(subcommand)]
        command: policy_cmd::PolicyCommand,
    },
    /// Validate a workload manifest and its connections; non-zero exit with a stable code on a
    /// blocker. No source or target I/O that mutates anything. Without `--manifest`, check the
    /// connection registry (`--connections`): connect to every connection and print the pin
    /// diff (`--offline`: structure only, nothing verified).
    Check(route::CheckArgs),
    /// Print the plan of a workload (JSON) without running it.
    Plan(route::RouteArgs),
    /// Run a workload and print its evidence (JSON). With `--np-reservation` (XMin route):
    /// under an admitted nonproduction reservation, checked in the control store before any
    /// read, its rows/bytes bounding the source, the measured usage settled after the run.
    Run(route::RunArgs),
    /// Read-only status of a workload's authority and state, with the safe recovery action.
    Status(route::RouteArgs),
    /// ClickHouse route: the operator's way out of a fail-closed hold. Re-observes every member
    /// and prints the proof and the proposed transition; `--apply` records it by a
    /// version-checked CAS with evidence. Dry run by default.
    Resolve(clickhouse_cmd::ResolveArgs),
    /// XMin state: `state show` prints the checkpoint and the latest receipts (same as `status`).
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Create and list XMin repair authorities (the environment owner's commands).
    Authority {
        #[command(subcommand)]
        command: xmin_cmd::AuthorityCommand,
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
    /// Nonproduction composition authority: verify a signed grant and decide its scope through
    /// the pinned scope component (stateless), or inspect one document (no trust decision).
    Campaign {
        #[command(subcommand)]
        command: campaign_cmd::CampaignCommand,
    },
}

/// Reads the manifest, picks its route and runs the route's command.
fn route_command(
    mut args: route::RouteArgs,
    source: &shipped::PolicySourceArgs,
    clickhouse: fn(&route::RouteArgs) -> Result<(), exit::Failure>,
    xmin: fn(&route::RouteArgs) -> Result<(), exit::Failure>,
) -> Result<(), exit::Failure> {
    args.source = source.clone();
    let text = shipped::read_input(args.manifest_path()?, input::InputKind::Manifest)?;
    match route::detect(&String::from_utf8_lossy(&text))? {
        route::Route::ClickhousePublication => clickhouse(&args),
        route::Route::XminReconciliation => xmin(&args),
    }
}

#[derive(Subcommand)]
enum StateCommand {
    /// The route's state row and latest commit receipts.
    Show(route::RouteArgs),
}

/// The command's name on its root span (identifiers only).
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Policy { command } => match command {
            policy_cmd::PolicyCommand::New(_) => "policy new",
            policy_cmd::PolicyCommand::Build(_) => "policy build",
            policy_cmd::PolicyCommand::Lock(_) => "policy lock",
            policy_cmd::PolicyCommand::Inspect(_) => "policy inspect",
            policy_cmd::PolicyCommand::Eval(_) => "policy eval",
            policy_cmd::PolicyCommand::Test(_) => "policy test",
            policy_cmd::PolicyCommand::Bench(_) => "policy bench",
        },
        Command::Check(_) => "check",
        Command::Plan(_) => "plan",
        Command::Run(_) => "run",
        Command::Status(_) => "status",
        Command::Resolve(_) => "resolve",
        Command::State { .. } => "state show",
        Command::Authority { .. } => "authority",
        Command::Demo(_) => "demo",
        Command::Bundle { cmd } => match cmd {
            trust_cmd::BundleCommand::Keygen { .. } => "bundle keygen",
            trust_cmd::BundleCommand::Create { .. } => "bundle create",
            trust_cmd::BundleCommand::Sign { .. } => "bundle sign",
            trust_cmd::BundleCommand::Verify { .. } => "bundle verify",
            trust_cmd::BundleCommand::Activate { .. } => "bundle activate",
            trust_cmd::BundleCommand::Inspect { .. } => "bundle inspect",
            trust_cmd::BundleCommand::Pack { .. } => "bundle pack",
            trust_cmd::BundleCommand::Unpack { .. } => "bundle unpack",
            trust_cmd::BundleCommand::TrustPolicy { .. } => "bundle trust-policy",
        },
        Command::VerifyBundle(_) => "verify-bundle",
        Command::Campaign { command } => match command {
            campaign_cmd::CampaignCommand::Verify(_) => "campaign verify",
            campaign_cmd::CampaignCommand::Inspect(_) => "campaign inspect",
            campaign_cmd::CampaignCommand::Policy(_) => "campaign policy",
            campaign_cmd::CampaignCommand::Enroll(_) => "campaign enroll",
            campaign_cmd::CampaignCommand::Grant(_) => "campaign grant",
            campaign_cmd::CampaignCommand::Admit(_) => "campaign admit",
            campaign_cmd::CampaignCommand::Settle(_) => "campaign settle",
            campaign_cmd::CampaignCommand::Status(_) => "campaign status",
        },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let telemetry = telemetry::init();
    let kind = command_name(&cli.command);
    render::configure(cli.output);
    let span = telemetry::command_span(kind);
    let result = span.in_scope(|| dispatch(cli));
    if let Err(f) = &result {
        telemetry::record_failure(&span, &f.code, f.exit);
    }
    let code = exit::finish(result);
    drop(span);
    telemetry.shutdown();
    code
}

fn dispatch(cli: Cli) -> Result<(), exit::Failure> {
    match cli.command {
        Command::Policy { command } => policy_cmd::run(command, &cli.source),
        Command::Demo(args) => demo::run(args, &cli.source),
        Command::Check(args) if args.route.manifest.is_none() => connections_cmd::check(&args),
        Command::Check(args) => route_command(
            args.route,
            &cli.source,
            clickhouse_cmd::check,
            xmin_cmd::check,
        ),
        Command::Plan(args) => {
            route_command(args, &cli.source, clickhouse_cmd::plan, xmin_cmd::plan)
        }
        Command::Run(args) if args.np.np_reservation.is_some() => {
            np_run::run(args.route, &args.np, &cli.source)
        }
        Command::Run(args) => {
            route_command(args.route, &cli.source, clickhouse_cmd::run, xmin_cmd::run)
        }
        Command::Status(args) => {
            route_command(args, &cli.source, clickhouse_cmd::status, xmin_cmd::status)
        }
        Command::Resolve(args) => clickhouse_cmd::resolve(&args),
        Command::Authority { command } => xmin_cmd::authority(command, &cli.source),
        Command::Campaign { command } => campaign_cmd::run(command),
        Command::State {
            command: StateCommand::Show(args),
        } => route_command(args, &cli.source, clickhouse_cmd::status, xmin_cmd::status),
        Command::Bundle { cmd } => trust_cmd::run_bundle(cmd),
        Command::VerifyBundle(args) => trust_cmd::run_verify_bundle(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The global `--output` flag clashes with no subcommand's own options (clap's own checks
    /// over the whole command tree).
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["dpone-host", "policy", "inspect", "--output", "text"])
            .expect("--output after a subcommand");
        assert_eq!(cli.output, render::OutputFlag::Text);
        assert!(Cli::try_parse_from(["dpone-host", "--output", "yaml", "demo"]).is_err());
    }
}

/// The exit-code table of docs/cli.md against the codes the modules raise (here, at the root,
/// because it reads every module).
#[cfg(test)]
mod exit_table {
    use crate::exit::{BAD_INPUT, Failure, INTERNAL, REFUSED, RETRY};
    use std::collections::BTreeMap;

    const DOCS: &str = include_str!("../../../docs/cli.md");

    /// Rows `| `CODE` | EXIT |…` of the table that follows `heading` in docs/cli.md.
    fn documented(after: &str) -> BTreeMap<String, u8> {
        let start = DOCS
            .find(after)
            .unwrap_or_else(|| panic!("docs/cli.md lacks {after:?}"));
        let mut rows = BTreeMap::new();
        let mut in_table = false;
        for line in DOCS[start..].lines().skip(1) {
            if line.starts_with('|') {
                in_table = true;
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let Some(code) = cells
                    .get(1)
                    .and_then(|c| c.strip_prefix('`')?.strip_suffix('`'))
                else {
                    continue;
                };
                let exit = cells[2]
                    .parse()
                    .unwrap_or_else(|_| panic!("exit of {line}"));
                assert!(rows.insert(code.to_owned(), exit).is_none(), "{code} twice");
            } else if in_table {
                break;
            }
        }
        assert!(!rows.is_empty(), "no table after {after:?}");
        rows
    }

    /// Codes the CLI raises itself, with the constructor's exit status, read from its sources.
    fn raised_by_the_cli() -> BTreeMap<String, u8> {
        let sources = [
            include_str!("activation.rs"),
            include_str!("campaign.rs"),
            include_str!("campaign_cmd.rs"),
            include_str!("campaign_store_cmd.rs"),
            include_str!("clickhouse_cmd.rs"),
            include_str!("clickhouse_cmd/resolve.rs"),
            include_str!("clickhouse_cmd/wiring.rs"),
            include_str!("connections_cmd.rs"),
            include_str!("control_store.rs"),
            include_str!("demo.rs"),
            include_str!("exit.rs"),
            include_str!("input.rs"),
            include_str!("main.rs"),
            include_str!("np_run.rs"),
            include_str!("policy_cmd.rs"),
            include_str!("route.rs"),
            include_str!("run_gate.rs"),
            include_str!("scaffold.rs"),
            include_str!("shipped.rs"),
            include_str!("trust_cmd.rs"),
            include_str!("xmin_cmd.rs"),
        ];
        let mut raised = BTreeMap::new();
        for source in sources {
            for (ctor, exit) in [
                ("Failure::bad_input(", BAD_INPUT),
                ("Failure::refused(", REFUSED),
                ("Failure::internal(", INTERNAL),
            ] {
                for (at, _) in source.match_indices(ctor) {
                    let rest = source[at + ctor.len()..].trim_start();
                    let Some(code) = rest
                        .strip_prefix('"')
                        .and_then(|r| r.split('"').next())
                        .filter(|c| c.starts_with("DPONE_"))
                    else {
                        continue;
                    };
                    if let Some(previous) = raised.insert(code.to_owned(), exit) {
                        assert_eq!(previous, exit, "{code} is raised with two exit statuses");
                    }
                }
            }
        }
        // Raised through constants or computed.
        for code in [
            "DPONE_CLI_INPUT_NOT_REGULAR_FILE",
            "DPONE_CLI_INPUT_TOO_LARGE",
            crate::route::MANIFEST_REQUIRED,
        ] {
            raised.insert(code.to_owned(), BAD_INPUT);
        }
        raised.insert(
            crate::campaign_store_cmd::POLICY_NOT_CURRENT.to_owned(),
            REFUSED,
        );
        raised.insert(crate::np_run::SETTLEMENT_UNRECORDED.to_owned(), RETRY);
        raised
    }

    #[test]
    fn exit_statuses_match_the_documented_table() {
        let docs = documented("Codes the CLI raises itself:");
        let raised = raised_by_the_cli();
        assert_eq!(
            docs, raised,
            "docs/cli.md (left) and the CLI's own codes (right) disagree"
        );

        let docs = documented("Codes of the XMin key-reconciliation route");
        let mut actual = BTreeMap::new();
        for &code in dpone_engine_xmin::ErrorCode::ALL {
            actual.insert(code.as_str().to_owned(), Failure::xmin(code, "").exit);
        }
        assert_eq!(
            docs, actual,
            "docs/cli.md (left) and the XMin codes' classes (right) disagree"
        );
        // The case: a manifest parse error is bad input, not a refusal.
        assert_eq!(
            Failure::from(dpone_engine_xmin::XminError::new(
                dpone_engine_xmin::ErrorCode::YamlAmbiguousScalar,
                "x"
            ))
            .exit,
            BAD_INPUT
        );
    }
}
