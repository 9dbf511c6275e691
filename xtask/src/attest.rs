//! `cargo xtask attest`: issue one GitHub-style attestation offline with the test signer
//! (`dpone-test-attest-signer`), for documentation, manual checks and CI recipe rehearsals.
//!
//! ```text
//! cargo xtask attest --subject FILE --out BUNDLE --trusted-root-out ROOT
//!     [--subject-name NAME] [--repository OWNER/REPO] [--repository-id N] [--owner-id N]
//!     [--signer-workflow OWNER/REPO/.github/workflows/F.yml] [--signer-ref REF]
//!     [--signer-digest HEX40] [--ref REF] [--runner github-hosted|self-hosted]
//!     [--issuer URL] [--organization ORG]
//! ```
//!
//! Every run makes a new test authority (keys never leave the process), so the bundle and the
//! `trusted_root.json` it writes belong together; pin the root's sha256 to verify the bundle.
//! The statement is the SLSA provenance v1 of `actions/attest-build-provenance` with the
//! file's sha256 as its one subject. Nothing here is trusted by a production policy unless an
//! operator pins this test root.

use anyhow::{Context, Result, bail};
use dpone_test_attest_signer::{
    AttestOptions, AuthorityOptions, Subject, TestAuthority, WorkloadIdentity,
};
use std::path::PathBuf;

/// Runs the command with the arguments after `attest`.
pub fn attest(args: &[String]) -> Result<()> {
    let mut subject = None;
    let mut out = None;
    let mut root_out = None;
    let mut subject_name = None;
    let mut identity = WorkloadIdentity::default();
    let mut authority = AuthorityOptions::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || -> Result<String> {
            it.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--subject" => subject = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--trusted-root-out" => root_out = Some(PathBuf::from(value()?)),
            "--subject-name" => subject_name = Some(value()?),
            "--repository" => identity.repository = value()?,
            "--repository-id" => identity.repository_id = value()?,
            "--owner-id" => identity.owner_id = value()?,
            "--signer-workflow" => identity.signer_workflow = value()?,
            "--signer-ref" => identity.signer_ref = value()?,
            "--signer-digest" => identity.signer_digest = value()?,
            "--ref" => identity.source_ref = value()?,
            "--runner" => identity.runner_environment = value()?,
            "--issuer" => identity.issuer = value()?,
            "--organization" => authority.organization = value()?,
            other => bail!("attest: unknown option {other}"),
        }
    }
    let (Some(subject), Some(out), Some(root_out)) = (subject, out, root_out) else {
        bail!(
            "usage: cargo xtask attest --subject FILE --out BUNDLE --trusted-root-out ROOT [options]"
        );
    };
    let bytes = std::fs::read(&subject).context("read the subject file")?;
    let name = subject_name.unwrap_or_else(|| {
        subject
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "subject".to_owned())
    });
    let subject = Subject::of(&name, &bytes);
    let ca = TestAuthority::with_options(authority)?;
    let bundle = ca.attest(
        std::slice::from_ref(&subject),
        &identity,
        &AttestOptions::default(),
    )?;
    let root = ca.trusted_root_json();
    std::fs::write(&out, &bundle).context("write the bundle")?;
    std::fs::write(&root_out, &root).context("write the trusted root")?;
    eprintln!(
        "attest: subject sha256:{} signed by {}",
        subject.sha256,
        identity.signer_identity()
    );
    eprintln!(
        "attest: trusted root sha256 {}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&root))
    );
    Ok(())
}
