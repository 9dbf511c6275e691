//! Writes the seed corpora of the fuzz targets to `host/fuzz/corpus/<target>/`: copies of the
//! fixtures and documents generated from them (a signed bundle, its archive, manifest and
//! signatures, a trust policy, keys), the Sigstore conformance bundles and roots vendored in
//! `fixtures/conformance/sigstore`, the hostile fixture components and the shipped guard
//! component (committed in `policies/components/`).
//!
//! `cargo run -p dpone-untrusted-inputs --bin write-seed-corpus` (from anywhere).

use dpone_trust::bundle::{self, BundleBuilder};
use dpone_trust::bundle_attestation::AttestationIdentity;
use dpone_trust::keys::SecretKey;
use dpone_trust::manifest::{PolicyKind, ResourceBudget};
use dpone_trust::policy::TrustPolicy;
use dpone_untrusted_inputs::{TARGETS, seeds, workspace_root};

fn write(target: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = workspace_root().join("host/fuzz/corpus").join(target);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(name), bytes)
}

/// An in-toto Statement v1 of the `actions/attest-build-provenance` shape.
const PROVENANCE_STATEMENT: &str = r#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"manifest.json","digest":{"sha256":"ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b"}}],"predicateType":"https://slsa.dev/provenance/v1","predicate":{"buildDefinition":{"buildType":"https://actions.github.io/buildtypes/workflow/v1","externalParameters":{"workflow":{"ref":"refs/heads/main","repository":"https://github.com/acme/policies","path":".github/workflows/release.yml"}},"internalParameters":{"github":{"event_name":"push","repository_id":"763287532","repository_owner_id":"44036562","runner_environment":"github-hosted"}},"resolvedDependencies":[{"uri":"git+https://github.com/acme/policies@refs/heads/main","digest":{"gitCommit":"a6c23b9806c593664f68637c8f9d45dfcf98b2db"}}]},"runDetails":{"builder":{"id":"https://github.com/acme/policies/.github/workflows/release.yml@refs/heads/main"},"metadata":{"invocationId":"https://github.com/acme/policies/actions/runs/1/attempts/1"}}}}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = workspace_root();
    // Fixture copies (targets whose fixtures live outside the corpus).
    for target in TARGETS {
        if target
            .fixtures
            .iter()
            .any(|f| f.starts_with("host/fuzz/corpus"))
        {
            continue;
        }
        for (i, seed) in seeds(target).iter().enumerate() {
            write(target.name, &format!("fixture-{i}"), seed)?;
        }
    }

    // Keys, a trust policy and a signed bundle.
    let key = SecretKey::generate()?;
    let public = key.public_key()?;
    write("public_key", "ed25519.pub", public.to_pem()?.as_bytes())?;
    // No private key is committed, not even a test one: `secret_key` gets the PEM framing of a
    // public key here and a fresh private key at run time (`seeds`).
    write(
        "secret_key",
        "public-key-framing.pem",
        public.to_pem()?.as_bytes(),
    )?;
    let policy = TrustPolicy::new(vec![public.clone()], 1, Vec::new())?;
    write("trust_policy", "one-key.json", &policy.to_json_bytes()?)?;
    let identity = AttestationIdentity {
        issuer: "https://token.actions.githubusercontent.com".into(),
        signer_workflow: "acme/policies/.github/workflows/release.yml".into(),
        signer_digest: "a6c23b9806c593664f68637c8f9d45dfcf98b2db".into(),
        repository: "acme/policies".into(),
        repository_id: "763287532".into(),
        owner_id: "44036562".into(),
        git_ref: "refs/heads/main".into(),
        runner_environment: "github-hosted".into(),
        trusted_root_sha256: dpone_trust::Sha256Digest::of(b"trusted root"),
    };
    let v2 = TrustPolicy::with_attestations(vec![public], vec![identity], 2, Vec::new())?;
    write(
        "trust_policy",
        "key-and-attestation.json",
        &v2.to_json_bytes()?,
    )?;
    write(
        "attestation_statement",
        "provenance.json",
        PROVENANCE_STATEMENT.as_bytes(),
    )?;
    let component = wat::parse_str("(component)")?;
    let table = std::fs::read(root.join("fixtures/decision-tables/guard.json"))?;
    let budget = ResourceBudget {
        fuel: 10_000_000,
        memory_bytes: 16 << 20,
        wasm_stack_bytes: 512 << 10,
    };
    let mut files = BundleBuilder::new("seed", "1")
        .policy(PolicyKind::Guard, component, budget)
        .table("guard", PolicyKind::Guard, table)
        .build()?;
    bundle::sign(&mut files, &key)?;
    for (name, target) in [
        ("manifest.json", "bundle_manifest"),
        ("signatures.json", "bundle_signatures"),
    ] {
        if let Some(bytes) = files.get(name) {
            write(target, name, bytes)?;
        }
    }
    write(
        "bundle_archive",
        "seed.tar",
        &dpone_trust::archive::pack(&files)?,
    )?;

    // Sigstore conformance bundles and roots, vendored in the repository.
    let sigstore = root.join("fixtures/conformance/sigstore");
    write(
        "trusted_root",
        "production.json",
        &std::fs::read(sigstore.join("production_trusted_root.json"))?,
    )?;
    let mut cases: Vec<_> = std::fs::read_dir(sigstore.join("cases"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    for case in cases {
        let name = case
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("case")
            .to_owned();
        let bundle = case.join("bundle.sigstore.json");
        if bundle.is_file() {
            write("sigstore_bundle", &name, &std::fs::read(&bundle)?)?;
        }
        let root_file = case.join("trusted_root.json");
        if root_file.is_file() && name.starts_with("rekor2-happy") {
            write("trusted_root", &name, &std::fs::read(&root_file)?)?;
        }
    }

    // Components: the hostile fixtures, and the shipped guard component.
    for entry in std::fs::read_dir(root.join("fixtures/hostile"))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("wat") {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("hostile");
            let bytes = wat::parse_file(&path)?;
            for target in ["component_inspect", "component_load"] {
                write(target, &format!("{stem}.wasm"), &bytes)?;
            }
        }
    }
    let bytes = std::fs::read(root.join("policies/components/guard.wasm"))?;
    for target in ["component_inspect", "component_load"] {
        write(target, "guard.wasm", &bytes)?;
    }
    Ok(())
}
