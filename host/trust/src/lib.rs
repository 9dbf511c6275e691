//! Trust for dpone-host: signed policy bundles and offline signature verification.
//!
//! The host runs only policy components that a trusted signer published. This crate decides
//! whether that is the case, and nothing else: it has no network client, no clock of its own
//! beyond what the Sigstore verifier reads, and no knowledge of wasmtime.
//!
//! - [`bundle`]: the policy bundle format (a directory, or a single-file archive via
//!   [`archive`]) with a canonical JSON [`manifest`]; [`bundle::verify`] checks signatures and
//!   every file against the manifest and yields a [`bundle::VerifiedBundle`] whose pins come
//!   from the verified manifest.
//! - [`keys`], [`signature`], [`policy`]: ed25519 keys, signatures over the manifest digest, and
//!   the trust policy (accepted keys and attestation identities, threshold k of n, pinned
//!   Sigstore trusted roots); [`bundle_attestation`]: GitHub attestations of a bundle's manifest
//!   counted as signers.
//! - [`trusted_root`], [`sigstore`], [`attestation`]: Sigstore bundles and GitHub Artifact
//!   Attestations verified against a trusted root read from a file and pinned by its sha256.
//! - [`nonproduction_signature`]: the nonproduction authority's signature adapter, closed to
//!   GitHub Artifact Attestations with every signer pin required.
//!
//! Every failure is a [`TrustError`] with a stable machine code ([`TrustError::code`]).
//! Verification never fails open: there is no code path that accepts a bundle without a
//! trust policy, and a policy always names at least one key and a threshold of at least one.
//!
//! Architecture Invariant: this crate performs no network I/O and never fetches trust
//! material; the only files it reads are the ones its callers name.

pub mod archive;
pub mod attestation;
pub mod bundle;
pub mod bundle_attestation;
pub mod digest;
pub mod error;
pub mod freshness;
pub mod json;
pub mod keys;
pub mod manifest;
pub mod nonproduction_signature;
pub mod policy;
pub mod signature;
pub mod sigstore;
pub mod trusted_root;

pub use digest::Sha256Digest;
pub use error::{ErrorClass, TrustError};

/// Result type of this crate.
pub type Result<T, E = TrustError> = std::result::Result<T, E>;
