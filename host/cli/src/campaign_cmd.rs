//! `dpone-host campaign verify | inspect`: the nonproduction composition authority (spec 004,
//! `docs/nonproduction-authority.md`) on the command line.
//!
//! - `verify` is stateless: it reads every file through the bounded reader, parses every
//!   document strictly, checks the policy against its external pin (`--policy-digest`), verifies
//!   the grant's GitHub Artifact Attestation with the closed adapter and the pins the policy
//!   carries, reopens policy, clock and revocation epoch, then decides every workload through the
//!   **pinned scope component** ([`crate::campaign::pipeline`]). It prints JSON evidence on stdout; a refusal
//!   exits with its stable code's status (`docs/cli.md`). It consumes nothing and reads no pool:
//!   usage is zero until the protected control store (part 2).
//! - `inspect` parses one document of the family and prints its canonical summary and digest. It
//!   makes no trust decision (`"trust_decision": "none"`).
//!
//! Which documents carry an attestation: the grant always does (`--attestation` is required;
//! `DPONE_CLI_CAMPAIGN_ATTESTATION_REQUIRED` otherwise). The policy never does: it is pinned by
//! its digest (`--policy-digest`). The composition, activation request and release set are
//! unsigned inputs bound by digest through the grant (execution) and checked by the scope
//! component.

use crate::campaign::pipeline::{self, Refusal};
use crate::campaign::{GrantFileArgs, failure, now};
use crate::exit::{Failure, print_report};
use crate::input::{InputKind, read};
use crate::shipped;
use clap::{Args, Subcommand};
use dpone_engine_nonproduction::AnyDocument;
use dpone_policy_runtime::PolicyKind;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

mod report;
use report::Inspected;

/// `campaign` subcommands.
#[derive(Subcommand)]
pub enum CampaignCommand {
    /// Verify a signed nonproduction grant and decide its workloads' scope (stateless).
    Verify(Box<VerifyArgs>),
    /// Print the canonical summary and digest of one nonproduction document (no trust decision).
    Inspect(InspectArgs),
    /// Protected control store: record the pinned policy as a trust revision.
    #[command(subcommand)]
    Policy(crate::campaign_store_cmd::PolicyCommand),
    /// Protected control store: record a participant's live physical identity under the current
    /// policy's enrollment (append-only).
    Enroll(Box<crate::campaign_store_cmd::EnrollArgs>),
    /// Protected control store: verify and register a grant's immutable original.
    #[command(subcommand)]
    Grant(crate::campaign_store_cmd::GrantCommand),
    /// Protected control store: reserve one attempt's complete bound (prints the reservation).
    Admit(Box<crate::campaign_store_cmd::AdmitArgs>),
    /// Protected control store: record an attempt's measured usage (never frees it).
    Settle(crate::campaign_store_cmd::SettleArgs),
    /// Protected control store: a registration's history, its pool and reservations.
    Status(crate::campaign_store_cmd::StatusArgs),
}

/// `campaign verify` options.
#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    files: GrantFileArgs,
    /// Decide only this workload (default: every workload of the request or composition).
    #[arg(long)]
    workload: Option<String>,
    /// The clock: RFC 3339 (`2026-12-01T10:00:00Z`) or Unix seconds (default: the system clock).
    #[arg(long)]
    now: Option<String>,
    /// The current revocation epoch (default: the policy's `revocation_epoch`).
    #[arg(long)]
    revocation_epoch: Option<u64>,
    /// Directory of the shipped components, overriding the embedded copies (still checked
    /// against the embedded pins).
    #[arg(long)]
    components_dir: Option<PathBuf>,
    /// Precompiled-code cache directory (checked like ssh key directories; records are
    /// authenticated with the key at `DPONE_CACHE_KEY`). Without it, the component is compiled.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

/// `campaign inspect` options.
#[derive(Args)]
pub struct InspectArgs {
    /// The document.
    document: PathBuf,
}

/// Runs a `campaign` subcommand.
pub fn run(command: CampaignCommand) -> Result<(), Failure> {
    match command {
        CampaignCommand::Verify(args) => verify(&args),
        CampaignCommand::Inspect(args) => inspect(&args),
        CampaignCommand::Policy(c) => crate::campaign_store_cmd::run_policy(c),
        CampaignCommand::Enroll(args) => crate::campaign_store_cmd::enroll(&args),
        CampaignCommand::Grant(c) => crate::campaign_store_cmd::run_grant(c),
        CampaignCommand::Admit(args) => crate::campaign_store_cmd::admit(&args),
        CampaignCommand::Settle(args) => crate::campaign_store_cmd::settle(&args),
        CampaignCommand::Status(args) => crate::campaign_store_cmd::status(&args),
    }
}

fn verify(args: &VerifyArgs) -> Result<(), Failure> {
    let now = now(args.now.as_deref())?;
    let files = args.files.read()?;
    let runtime = shipped::runtime(args.cache_dir.as_deref())?;
    let scope = shipped::load(&runtime, args.components_dir.as_deref(), PolicyKind::Scope)?;
    let inputs = pipeline::Inputs {
        policy: &files.policy,
        policy_digest: &args.files.policy_digest,
        grant: &files.grant,
        attestation: &files.attestation,
        trusted_root: &files.trusted_root,
        composition: &files.composition,
        request: files.request.as_deref(),
        release_set: files.release_set.as_deref(),
        workload: args.workload.as_deref(),
        now,
        revocation_epoch: args.revocation_epoch,
    };
    match pipeline::verify_grant(&inputs, &scope) {
        Ok(evidence) => print_report(&evidence),
        Err(mut refusal) => {
            if let Some(evidence) = refusal.evidence.take() {
                print_report(&*evidence)?;
            }
            Err(failure(refusal))
        }
    }
}

/// A digest-free, value-light summary: top-level scalars, `validity`, `limits`, the phase, and
/// the length of every list.
fn summary(value: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(map) = value {
        for (key, v) in map {
            match v {
                Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                    out.insert(key.clone(), v.clone());
                }
                Value::Array(items) => {
                    out.insert(format!("{key}_count"), json!(items.len()));
                }
                Value::Object(inner)
                    if matches!(key.as_str(), "validity" | "limits" | "ceilings") =>
                {
                    out.insert(key.clone(), Value::Object(inner.clone()));
                }
                Value::Object(inner) => {
                    for (k, iv) in inner {
                        if let Value::Array(items) = iv {
                            out.insert(format!("{key}.{k}_count"), json!(items.len()));
                        }
                    }
                }
                Value::Null => {}
            }
        }
    }
    Value::Object(out)
}

fn inspect(args: &InspectArgs) -> Result<(), Failure> {
    let bytes = read(&args.document, InputKind::NonproductionDocument)?;
    let doc = AnyDocument::parse(&bytes).map_err(|e| {
        failure(Refusal {
            code: e.code().to_owned(),
            message: format!("document: {}", e.detail()),
            class: pipeline::np_class(e.code()),
            evidence: None,
        })
    })?;
    let canonical = doc.canonical_bytes();
    let value: Value = serde_json::from_slice(&canonical)
        .map_err(|e| Failure::internal("DPONE_CLI_OUTPUT", e.to_string()))?;
    let attestation = match doc {
        AnyDocument::Policy(_) => "none: pinned by its digest (campaign verify --policy-digest)",
        AnyDocument::Authority(_) | AnyDocument::RouteQualification(_) => {
            "required: a GitHub Artifact Attestation whose subject is this digest"
        }
        _ => "none: bound by digest through the grant and checked by the scope component",
    };
    print_report(&Inspected {
        schema: doc.schema(),
        digest: doc.digest().as_str().to_owned(),
        size_bytes: canonical.len(),
        canonical: true,
        attestation,
        trust_decision: "none",
        summary: summary(&value),
    })
}
