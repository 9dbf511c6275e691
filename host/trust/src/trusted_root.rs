//! Sigstore trusted roots, read from a file and pinned by sha256. Never fetched.
//!
//! A trusted root (`application/vnd.dev.sigstore.trustedroot+json`) names the Fulcio
//! certificate authorities, Rekor logs, CT logs and timestamp authorities a Sigstore bundle is
//! checked against. Whoever controls it controls what verifies, so the host takes it only from
//! a file and, whenever a trust policy is in force, only if the file's sha256 is one of the
//! policy's `sigstore_trusted_roots` pins. The digest is checked on the raw bytes **before**
//! they are parsed; a mismatch is `DPONE_TRUST_ROOT_DIGEST_MISMATCH`.
//!
//! There is deliberately no TUF client and no embedded root: refreshing a root is an operator
//! action (replace the file, update the pin), visible in review.

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::TrustError;
use crate::policy::TrustPolicy;
use sigstore_verify::Verifier;
use sigstore_verify::trust_root::TrustedRoot;

use std::path::Path;

/// Largest accepted trusted root file.
pub const MAX_TRUSTED_ROOT_BYTES: u64 = 1024 * 1024;

/// A parsed trusted root whose digest matched its pin (or that was explicitly left unpinned).
pub struct PinnedTrustedRoot {
    sha256: Sha256Digest,
    pinned: bool,
    root: TrustedRoot,
    verifier: Verifier,
}

impl std::fmt::Debug for PinnedTrustedRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedTrustedRoot")
            .field("sha256", &self.sha256)
            .field("pinned", &self.pinned)
            .finish_non_exhaustive()
    }
}

impl PinnedTrustedRoot {
    /// Accepts `bytes` only if their sha256 is one of `pins`; an empty pin list refuses.
    pub fn from_bytes(bytes: &[u8], pins: &[Sha256Digest]) -> Result<Self> {
        if pins.is_empty() {
            return Err(TrustError::TrustedRootNotPinned);
        }
        let sha256 = Sha256Digest::of(bytes);
        if !pins.contains(&sha256) {
            return Err(TrustError::TrustedRootDigestMismatch {
                actual: sha256.to_hex(),
            });
        }
        Self::parse(bytes, sha256, true)
    }

    /// Accepts `bytes` only if the trust policy pins their sha256.
    pub fn from_policy(bytes: &[u8], policy: &TrustPolicy) -> Result<Self> {
        Self::from_bytes(bytes, policy.trusted_root_pins())
    }

    /// Accepts `bytes` without a pin: for callers that were handed the root file directly by
    /// the operator (e.g. the conformance entry point). The evidence records `pinned: false`.
    pub fn unpinned(bytes: &[u8]) -> Result<Self> {
        Self::parse(bytes, Sha256Digest::of(bytes), false)
    }

    fn parse(bytes: &[u8], sha256: Sha256Digest, pinned: bool) -> Result<Self> {
        if bytes.len() as u64 > MAX_TRUSTED_ROOT_BYTES {
            return Err(TrustError::TrustedRootInvalid {
                detail: format!("larger than {MAX_TRUSTED_ROOT_BYTES} bytes"),
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|_| TrustError::TrustedRootInvalid {
            detail: "not UTF-8".into(),
        })?;
        let root = TrustedRoot::from_json(text).map_err(|err| TrustError::TrustedRootInvalid {
            detail: dpone_boundary::text::clean_message(&err.to_string()),
        })?;
        let verifier = Verifier::new(&root).map_err(|err| TrustError::TrustedRootInvalid {
            detail: dpone_boundary::text::clean_message(&err.to_string()),
        })?;
        Ok(Self {
            sha256,
            pinned,
            root,
            verifier,
        })
    }

    /// SHA-256 of the trusted root file.
    pub fn sha256(&self) -> &Sha256Digest {
        &self.sha256
    }

    /// Whether the digest was checked against a pin.
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// The parsed trusted root.
    pub fn root(&self) -> &TrustedRoot {
        &self.root
    }

    /// The verifier prepared from this root.
    pub(crate) fn verifier(&self) -> &Verifier {
        &self.verifier
    }
}

/// Reads a trusted root file (bounded); the bytes still need [`PinnedTrustedRoot`].
pub fn read_trusted_root_file(path: &Path) -> Result<Vec<u8>> {
    read_bounded(path, MAX_TRUSTED_ROOT_BYTES, "read the trusted root file")
}

/// Reads at most `limit` bytes of a regular file, refusing a larger file and anything that is
/// not a regular file (FIFO, device, directory, `/proc`) before reading: the one bounded reader
/// of `dpone-boundary`.
pub(crate) fn read_bounded(path: &Path, limit: u64, action: &'static str) -> Result<Vec<u8>> {
    dpone_boundary::read::read_regular(path, limit)
        .map_err(|err| TrustError::io(action, err.into_io()))
}
