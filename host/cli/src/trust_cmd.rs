//! `dpone-host bundle …` and `dpone-host verify-bundle`: signed policy bundles and offline
//! Sigstore verification on the command line.
//!
//! Results are JSON on stdout; diagnostics are one JSON object `{"error": CODE, "message": …}`
//! on stderr. Neither ever contains a local path or key material. Exit codes: 0 success (and
//! only on success), 1 refused / verification failed, 3 bad input (unreadable or malformed
//! input the operator gave), 4 a component of a verified bundle was refused by the policy
//! runtime (`bundle activate`), 5 internal error. Usage errors are clap's (2).

use crate::activation;
use crate::exit::{Failure, print_report};
use crate::input::{InputKind, read as read_input};
use crate::render::Report;
use crate::shipped::{self, load_bundle, read_trust_policy};
use clap::{ArgGroup, Args, Subcommand};
use dpone_trust::archive;
use dpone_trust::bundle::{self, BundleBuilder, BundleFiles};
use dpone_trust::keys::{self, SecretKey};
use dpone_trust::manifest::{PolicyKind, ResourceBudget};
use dpone_trust::policy::TrustPolicy;
use dpone_trust::sigstore::{self, Artifact, Signer};
use dpone_trust::trusted_root::{self, PinnedTrustedRoot};
use dpone_trust::{Sha256Digest, TrustError};
use serde_json::Value;
use std::io::Write as _;
use std::path::{Path, PathBuf};

mod report;

/// `dpone-host bundle` subcommands.
#[derive(Subcommand, Debug)]
pub enum BundleCommand {
    /// Generate an ed25519 signing key: a PKCS#8 private key file (mode 0600, never
    /// overwritten) and `<out>.pub` beside it. Prints the key id and public key.
    Keygen {
        /// Private key file to create.
        #[arg(long)]
        out: PathBuf,
    },
    /// Assemble a new, unsigned bundle directory with a canonical manifest.
    Create {
        /// Bundle directory to create (must not exist).
        #[arg(long)]
        out: PathBuf,
        /// Bundle name, `[a-z0-9][a-z0-9._-]{0,63}`.
        #[arg(long)]
        name: String,
        /// Bundle version.
        #[arg(long)]
        version: String,
        /// Monotonic sequence of this bundle name (signed): hosts never activate a lower one
        /// after a higher one, so each new bundle of a name needs a higher sequence.
        #[arg(long)]
        sequence: u64,
        /// Start of the signed validity window, unix seconds (default: now).
        #[arg(long)]
        not_before: Option<u64>,
        /// End of the signed validity window, unix seconds (default: `--valid-days` after the
        /// start).
        #[arg(long)]
        expires_at: Option<u64>,
        /// Length of the validity window in days when `--expires-at` is not given.
        #[arg(long, default_value_t = 90)]
        valid_days: u64,
        /// A component, as `KIND=FILE` (kind: admission, guard, delete-mode, scope).
        #[arg(long = "policy", value_name = "KIND=FILE", required = true)]
        policies: Vec<String>,
        /// A decision table, as `KIND=FILE`; stored as `tables/<file stem>.json`.
        #[arg(long = "table", value_name = "KIND=FILE")]
        tables: Vec<String>,
        /// Fuel budget declared for every policy.
        #[arg(long, default_value_t = 10_000_000)]
        fuel: u64,
        /// Memory budget declared for every policy, in bytes.
        #[arg(long, default_value_t = 16 * 1024 * 1024)]
        memory_bytes: u64,
        /// Wasm stack budget declared for every policy, in bytes.
        #[arg(long, default_value_t = 512 * 1024)]
        wasm_stack_bytes: u64,
    },
    /// Sign a bundle directory: adds (or replaces) this key's signature in `signatures.json`.
    Sign {
        /// Bundle directory.
        bundle: PathBuf,
        /// Private key file (PKCS#8 PEM, mode 0600).
        #[arg(long)]
        key: PathBuf,
    },
    /// Verify a bundle directory or archive against a trust policy; exit 0 only if it verifies.
    Verify {
        /// Bundle directory or archive file.
        bundle: PathBuf,
        /// Trust policy file.
        #[arg(long)]
        trust_policy: PathBuf,
    },
    /// The activation gate: verify a bundle, load every component at its verified pin and run
    /// every shipped decision table; exit 0 only if the bundle would be activated.
    Activate {
        /// Bundle directory or archive file.
        bundle: PathBuf,
        /// Trust policy file.
        #[arg(long)]
        trust_policy: PathBuf,
        /// After activation, evaluate one decision of this policy kind.
        #[arg(long, requires_all = ["function", "input"])]
        eval: Option<String>,
        /// Function for `--eval`, e.g. `decide`, `plan`, `admit-static`.
        #[arg(long, requires = "eval")]
        function: Option<String>,
        /// JSON facts for `--eval`.
        #[arg(long, requires = "eval")]
        input: Option<PathBuf>,
        /// Precompiled-code cache directory (created if absent), as for `demo`.
        #[arg(long)]
        cache_dir: Option<PathBuf>,
    },
    /// Show a bundle's manifest, claimed signers and whether its files match. Makes no trust
    /// decision: the output says `"verified": false`.
    Inspect {
        /// Bundle directory or archive file.
        bundle: PathBuf,
    },
    /// Pack a bundle directory into the canonical single-file archive.
    Pack {
        /// Bundle directory.
        bundle: PathBuf,
        /// Archive file to create (must not exist).
        #[arg(long)]
        out: PathBuf,
    },
    /// Unpack an archive (strictly) into a new directory; the result still needs `verify`.
    Unpack {
        /// Archive file.
        archive: PathBuf,
        /// Directory to create (must not exist).
        #[arg(long)]
        out: PathBuf,
    },
    /// Print a trust policy for the given public key files (and pinned trusted roots).
    TrustPolicy {
        /// Public key file (SubjectPublicKeyInfo PEM); repeat for several signers.
        #[arg(long = "key", required = true)]
        keys: Vec<PathBuf>,
        /// Signatures required (k of n).
        #[arg(long)]
        threshold: usize,
        /// Sigstore trusted root file to pin by its sha256; repeatable.
        #[arg(long = "trusted-root")]
        trusted_roots: Vec<PathBuf>,
    },
}

/// `dpone-host verify-bundle`: the Sigstore conformance client protocol.
///
/// `verify-bundle --bundle F (--certificate-identity I --certificate-oidc-issuer U | --key K)
/// [--trusted-root F] FILE_OR_sha256:DIGEST`
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("signer").required(true).args(["certificate_identity", "key"])))]
pub struct VerifyBundleArgs {
    /// The Sigstore bundle (JSON).
    #[arg(long)]
    pub bundle: PathBuf,
    /// Exact certificate identity (SAN).
    #[arg(long, requires = "certificate_oidc_issuer", conflicts_with = "key")]
    pub certificate_identity: Option<String>,
    /// Exact OIDC issuer.
    #[arg(long, requires = "certificate_identity", conflicts_with = "key")]
    pub certificate_oidc_issuer: Option<String>,
    /// Managed public key (PEM) instead of a certificate identity.
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// Sigstore trusted root file; required (nothing is fetched, nothing is embedded).
    #[arg(long)]
    pub trusted_root: Option<PathBuf>,
    /// Pin: the trusted root's sha256 must equal this (64 lowercase hex).
    #[arg(long)]
    pub trusted_root_sha256: Option<String>,
    /// Trust policy whose `sigstore_trusted_roots` pins the trusted root.
    #[arg(long)]
    pub trust_policy: Option<PathBuf>,
    /// The artifact file, or `sha256:<hex>` / `sha512:<hex>`.
    #[arg(value_name = "FILE_OR_DIGEST")]
    pub artifact: String,
}

/// Prints the report (through [`print_report`], so a terminal gets its summary); a refused
/// verification also prints `{"verified": false, "error": CODE}` ([`report::Refusal`]) on
/// stdout, so scripts that read only stdout see the refusal too. The failure is returned for the
/// caller to report.
fn finish<R: Report>(result: Result<R, Failure>, verifying: bool) -> Result<(), Failure> {
    result
        .and_then(|report| print_report(&report))
        .inspect_err(|failure| {
            if verifying {
                // Best effort: the exit status and stderr carry the outcome regardless.
                let _ = print_report(&report::Refusal::new(&failure.code));
            }
        })
}

/// Runs a `bundle` subcommand; `verify` and `activate` report a refusal on stdout too.
pub fn run_bundle(cmd: BundleCommand) -> Result<(), Failure> {
    match cmd {
        BundleCommand::Keygen { out } => finish(keygen(&out), false),
        BundleCommand::Create {
            out,
            name,
            version,
            sequence,
            not_before,
            expires_at,
            valid_days,
            policies,
            tables,
            fuel,
            memory_bytes,
            wasm_stack_bytes,
        } => {
            let budget = ResourceBudget {
                fuel,
                memory_bytes,
                wasm_stack_bytes,
            };
            let not_before = not_before.unwrap_or_else(dpone_trust::freshness::unix_now);
            let expires_at = expires_at
                .unwrap_or_else(|| not_before.saturating_add(valid_days.saturating_mul(86_400)));
            let builder = BundleBuilder::new(&name, &version)
                .sequence(sequence)
                .validity(not_before, expires_at);
            finish(create(&out, builder, &policies, &tables, budget), false)
        }
        BundleCommand::Sign { bundle, key } => finish(sign(&bundle, &key), false),
        BundleCommand::Verify {
            bundle,
            trust_policy,
        } => finish(verify(&bundle, &trust_policy), true),
        BundleCommand::Activate {
            bundle,
            trust_policy,
            eval,
            function,
            input,
            cache_dir,
        } => {
            let decision = match (eval, function, input) {
                (Some(kind), Some(function), Some(input)) => Some((kind, function, input)),
                _ => None,
            };
            finish(
                activate(&bundle, &trust_policy, decision, cache_dir.as_deref()),
                true,
            )
        }
        BundleCommand::Inspect { bundle } => finish(inspect(&bundle), false),
        BundleCommand::Pack { bundle, out } => finish(pack(&bundle, &out), false),
        BundleCommand::Unpack { archive, out } => finish(unpack(&archive, &out), false),
        BundleCommand::TrustPolicy {
            keys,
            threshold,
            trusted_roots,
        } => finish(trust_policy(&keys, threshold, &trusted_roots), false),
    }
}

/// Runs `verify-bundle` (Sigstore conformance client protocol). Exit 0 only on success.
pub fn run_verify_bundle(args: VerifyBundleArgs) -> Result<(), Failure> {
    finish(verify_bundle(args), true)
}

fn keygen(out: &Path) -> Result<report::Keygen, Failure> {
    let key = SecretKey::generate()?;
    let public = key.public_key()?;
    let mut public_path = out.as_os_str().to_owned();
    public_path.push(".pub");
    let public_path = PathBuf::from(public_path);
    if public_path.exists() {
        return Err(TrustError::KeyFileExists.into());
    }
    keys::write_secret_key_file(out, &key)?;
    keys::write_public_key_file(&public_path, &public)?;
    Ok(report::Keygen {
        key_id: public.id().as_str().to_owned(),
        public_key: public.to_hex(),
        algorithm: "ed25519",
    })
}

fn parse_kind_file(spec: &str) -> Result<(PolicyKind, PathBuf), Failure> {
    let (kind, file) = spec
        .split_once('=')
        .ok_or_else(|| Failure::bad_input("DPONE_CLI_ARGUMENT", "expected KIND=FILE"))?;
    let kind = PolicyKind::parse(kind).ok_or_else(|| {
        Failure::bad_input(
            "DPONE_CLI_ARGUMENT",
            "the kind must be admission, guard, delete-mode or scope",
        )
    })?;
    Ok((kind, PathBuf::from(file)))
}

fn create(
    out: &Path,
    mut builder: BundleBuilder,
    policies: &[String],
    tables: &[String],
    budget: ResourceBudget,
) -> Result<report::Created, Failure> {
    for spec in policies {
        let (kind, file) = parse_kind_file(spec)?;
        builder = builder.policy(kind, read_input(&file, InputKind::Component)?, budget);
    }
    for spec in tables {
        let (kind, file) = parse_kind_file(spec)?;
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| dpone_trust::manifest::is_name(s))
            .ok_or_else(|| {
                Failure::bad_input(
                    "DPONE_CLI_ARGUMENT",
                    "a table file name must be <stem>.json with stem [a-z0-9][a-z0-9._-]{0,63}",
                )
            })?
            .to_owned();
        builder = builder.table(&stem, kind, read_input(&file, InputKind::DecisionTable)?);
    }
    let files = builder.build()?;
    files.write_dir(out)?;
    let inspection = bundle::inspect(&files)?;
    Ok(report::Created {
        created: true,
        manifest_sha256: inspection.manifest_sha256.to_hex(),
        files: files
            .iter()
            .map(|(name, bytes)| report::CreatedFile {
                file: name.to_owned(),
                size: bytes.len(),
            })
            .collect(),
    })
}

fn sign(dir: &Path, key_path: &Path) -> Result<report::Signed, Failure> {
    let key = keys::read_secret_key_file(key_path)?;
    let mut files = BundleFiles::read_dir(dir)?;
    let signatures = bundle::sign(&mut files, &key)?;
    let bytes = files
        .get(bundle::SIGNATURES_FILE)
        .ok_or_else(|| {
            Failure::internal("DPONE_CLI_INTERNAL", "signing produced no signatures file")
        })?
        .to_vec();
    bundle::write_signatures_file(dir, &bytes)?;
    Ok(report::Signed {
        signed: true,
        key_id: key.public_key()?.id().as_str().to_owned(),
        manifest_sha256: signatures.manifest_sha256.to_hex(),
        signatures: signatures.signatures.len(),
    })
}

fn verify(path: &Path, policy_path: &Path) -> Result<report::Verified, Failure> {
    let policy_bytes = read_input(policy_path, InputKind::TrustPolicy)?;
    let policy = TrustPolicy::parse(&policy_bytes)?;
    let files = load_bundle(path)?;
    let verified = bundle::verify(&files, &policy)?;
    Ok(report::Verified {
        verified: true,
        evidence: verified.evidence().clone(),
    })
}

fn activate(
    path: &Path,
    policy_path: &Path,
    decision: Option<(String, String, PathBuf)>,
    cache_dir: Option<&Path>,
) -> Result<report::Activated, Failure> {
    let policy = read_trust_policy(policy_path)?;
    let files = load_bundle(path)?;
    let runtime = shipped::runtime(cache_dir)?;
    let activated = activation::activate_bundle_recorded(
        &runtime,
        &files,
        &policy,
        &shipped::activation_ledger_path()?,
    )?;
    let Some((kind, function, input_path)) = decision else {
        return Ok(report::Activated {
            activated: true,
            evidence: activated.activation_evidence().clone(),
            decision: None,
        });
    };
    let kind: dpone_policy_runtime::PolicyKind = kind
        .parse()
        .map_err(|message: String| Failure::bad_input("DPONE_CLI_ARGUMENT", message))?;
    let input: Value = serde_json::from_slice(&read_input(&input_path, InputKind::Facts)?)
        .map_err(|err| {
            Failure::bad_input(
                "DPONE_CLI_INPUT_MALFORMED",
                format!("the facts input is not JSON: {err}"),
            )
        })?;
    let decided = activated.decide_json(kind, &function, &input)?;
    Ok(report::Activated {
        activated: true,
        evidence: activated.activation_evidence().clone(),
        decision: Some(decided),
    })
}

fn inspect(path: &Path) -> Result<report::Inspected, Failure> {
    let files = load_bundle(path)?;
    let inspection = bundle::inspect(&files)?;
    let m = inspection.manifest;
    Ok(report::Inspected {
        verified: false,
        note: "inspect makes no trust decision; use `bundle verify` with a trust policy",
        bundle: report::BundleName {
            name: m.name,
            version: m.version,
        },
        wit_package: m.wit_package,
        manifest_sha256: inspection.manifest_sha256.to_hex(),
        policies: m
            .policies
            .into_iter()
            .map(|p| report::InspectedPolicy {
                kind: p.kind.as_str(),
                file: p.file,
                sha256: p.sha256.to_hex(),
                size: p.size,
                budget: report::InspectedBudget {
                    fuel: p.budget.fuel,
                    memory_bytes: p.budget.memory_bytes,
                    wasm_stack_bytes: p.budget.wasm_stack_bytes,
                },
            })
            .collect(),
        tables: m
            .tables
            .into_iter()
            .map(|t| report::InspectedTable {
                kind: t.kind.as_str(),
                file: t.file,
                sha256: t.sha256.to_hex(),
                size: t.size,
            })
            .collect(),
        claimed_signers: inspection
            .claimed_signers
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect(),
        contents: match inspection.contents {
            Ok(()) => "match".to_owned(),
            Err(code) => code.to_owned(),
        },
    })
}

fn pack(dir: &Path, out: &Path) -> Result<report::Packed, Failure> {
    let files = BundleFiles::read_dir(dir)?;
    // Refuse to pack something that is not even a well-formed bundle.
    bundle::inspect(&files)?;
    let bytes = archive::pack(&files)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|err| {
            Failure::bad_input(
                "DPONE_CLI_OUTPUT_UNWRITABLE",
                format!("cannot create the archive: {}", err.kind()),
            )
        })?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(|err| {
            Failure::bad_input(
                "DPONE_CLI_OUTPUT_UNWRITABLE",
                format!("cannot write the archive: {}", err.kind()),
            )
        })?;
    Ok(report::Packed {
        packed: true,
        archive_sha256: Sha256Digest::of(&bytes).to_hex(),
        size: bytes.len(),
        members: files.len(),
    })
}

fn unpack(archive_path: &Path, out: &Path) -> Result<report::Unpacked, Failure> {
    let bytes = read_input(archive_path, InputKind::BundleArchive)?;
    let files = archive::unpack(&bytes)?;
    files.write_dir(out)?;
    Ok(report::Unpacked {
        unpacked: true,
        members: files.len(),
        verified: false,
    })
}

fn trust_policy(
    key_paths: &[PathBuf],
    threshold: usize,
    roots: &[PathBuf],
) -> Result<report::TrustPolicyDocument, Failure> {
    let keys = key_paths
        .iter()
        .map(|path| keys::read_public_key_file(path))
        .collect::<Result<Vec<_>, _>>()?;
    let pins = roots
        .iter()
        .map(|path| {
            trusted_root::read_trusted_root_file(path).map(|bytes| Sha256Digest::of(&bytes))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let policy = TrustPolicy::new(keys, threshold, pins)?;
    let bytes = policy.to_json_bytes()?;
    serde_json::from_slice(&bytes)
        .map(report::TrustPolicyDocument)
        .map_err(|err| Failure::internal("DPONE_CLI_INTERNAL", err.to_string()))
}

fn verify_bundle(args: VerifyBundleArgs) -> Result<report::SigstoreVerified, Failure> {
    let bundle_bytes = read_input(&args.bundle, InputKind::SigstoreBundle)?;
    let signer = match (
        &args.key,
        args.certificate_identity,
        args.certificate_oidc_issuer,
    ) {
        (Some(key), None, None) => {
            let pem = read_input(key, InputKind::PublicKey)?;
            let pem = String::from_utf8(pem).map_err(|_| {
                Failure::bad_input(
                    "DPONE_SIGSTORE_KEY_INVALID",
                    "the public key is not PEM text",
                )
            })?;
            Signer::PublicKey { pem }
        }
        (None, Some(identity), Some(issuer)) => Signer::Identity { identity, issuer },
        _ => {
            return Err(Failure::bad_input(
                "DPONE_CLI_ARGUMENT",
                "give --certificate-identity with --certificate-oidc-issuer, or --key",
            ));
        }
    };
    let root_path = args.trusted_root.as_ref().ok_or_else(|| {
        Failure::bad_input(
            "DPONE_CLI_TRUSTED_ROOT_REQUIRED",
            "--trusted-root is required: trust roots are never fetched",
        )
    })?;
    let root_bytes = trusted_root::read_trusted_root_file(root_path)?;
    // `--trusted-root-sha256` replaces the policy's pins; it never widens them: with a trust
    // policy it must be one of the policy's pins, and then it is the only pin.
    let cli_pin = match &args.trusted_root_sha256 {
        Some(hex) => Some(Sha256Digest::parse_hex(hex).ok_or_else(|| {
            Failure::bad_input(
                "DPONE_CLI_ARGUMENT",
                "--trusted-root-sha256 must be 64 lowercase hex characters",
            )
        })?),
        None => None,
    };
    let mut pins = Vec::new();
    let mut pinned_by_policy = false;
    if let Some(path) = &args.trust_policy {
        let policy = read_trust_policy(path)?;
        pins.extend_from_slice(policy.trusted_root_pins());
        pinned_by_policy = true;
    }
    if let Some(pin) = cli_pin {
        if pinned_by_policy && !pins.contains(&pin) {
            return Err(Failure::refused(
                "DPONE_CLI_TRUSTED_ROOT_PIN_CONFLICT",
                "--trusted-root-sha256 is not one of the trust policy's sigstore_trusted_roots; it narrows the policy's pins and never widens them",
            ));
        }
        pins = vec![pin];
    }
    let root = if pins.is_empty() && !pinned_by_policy {
        PinnedTrustedRoot::unpinned(&root_bytes)?
    } else {
        PinnedTrustedRoot::from_bytes(&root_bytes, &pins)?
    };

    let outcome = if args.artifact.starts_with("sha256:") || args.artifact.starts_with("sha512:") {
        let artifact = Artifact::parse_digest(&args.artifact).ok_or_else(|| {
            Failure::bad_input(
                "DPONE_SIGSTORE_ARTIFACT_INVALID",
                "a digest is sha256:<64 hex> or sha512:<128 hex>, lowercase",
            )
        })?;
        sigstore::verify(&bundle_bytes, artifact, &signer, &root)?
    } else {
        // Hashed as a stream, never held whole; regular files only, refused before reading.
        let mut file = crate::input::open_artifact(Path::new(&args.artifact))?;
        sigstore::verify_reader(&bundle_bytes, &mut file, &signer, &root)?
    };
    Ok(report::SigstoreVerified {
        verified: true,
        outcome,
    })
}
