//! Bundle signatures: `signatures.json` beside the manifest.
//!
//! Each signature is a pure ed25519 signature (RFC 8032) over the **signing message**
//!
//! ```text
//! "dpone.policy-bundle.signature.v1" || 0x00 || sha256(manifest.json bytes)   (33 + 32 bytes)
//! ```
//!
//! The domain-separation prefix makes a bundle signature useless as a signature over anything
//! else (and the reverse), and signing the digest of the exact canonical manifest bytes binds
//! every component and table digest the manifest lists.
//!
//! ```json
//! {"manifest_sha256":"<64 hex>","schema":"dpone.policy-bundle-signatures.v1",
//!  "signatures":[{"algorithm":"ed25519","key_id":"sha256:<64 hex>","signature":"<128 hex>"}]}
//! ```
//!
//! The file is canonical JSON, like the manifest. `manifest_sha256` names the manifest the
//! signatures are for, so a signatures file moved to another bundle is refused with its own
//! code before any signature is checked. A file written by [`SignatureFile::to_canonical_bytes`]
//! holds at most one signature per key, sorted by key id; a file read may repeat a key, which
//! then counts once (see [`crate::policy`]).

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::Document;
use crate::json::{self, Fields};
use crate::keys::{KeyId, SecretKey};
use serde_json::{Value, json};

/// The signatures file schema this version reads and writes.
pub const SIGNATURES_SCHEMA: &str = "dpone.policy-bundle-signatures.v1";

/// Largest accepted `signatures.json`.
pub const MAX_SIGNATURES_BYTES: usize = 64 * 1024;

/// Most signatures a file may hold.
pub const MAX_SIGNATURES: usize = 64;

/// The domain-separation prefix of the signing message.
pub const SIGNATURE_DOMAIN: &[u8] = b"dpone.policy-bundle.signature.v1\0";

/// The only signature algorithm.
pub const ALGORITHM_ED25519: &str = "ed25519";

/// The bytes a bundle signer signs for a manifest with this digest.
pub fn signing_message(manifest_sha256: &Sha256Digest) -> Vec<u8> {
    let mut message = Vec::with_capacity(SIGNATURE_DOMAIN.len() + 32);
    message.extend_from_slice(SIGNATURE_DOMAIN);
    message.extend_from_slice(manifest_sha256.as_bytes());
    message
}

/// One signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureEntry {
    /// The signer's key id.
    pub key_id: KeyId,
    /// The 64-byte ed25519 signature.
    pub signature: [u8; 64],
}

/// The content of `signatures.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureFile {
    /// SHA-256 of the manifest the signatures are for.
    pub manifest_sha256: Sha256Digest,
    /// The signatures, as read.
    pub signatures: Vec<SignatureEntry>,
}

impl SignatureFile {
    /// An empty signatures file for the manifest with this digest.
    pub fn new(manifest_sha256: Sha256Digest) -> Self {
        Self {
            manifest_sha256,
            signatures: Vec::new(),
        }
    }

    /// Parses `signatures.json` bytes (strict, canonical).
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let value = json::parse_strict(Document::Signatures, bytes, MAX_SIGNATURES_BYTES, true)?;
        let top = Fields::new(
            Document::Signatures,
            "$",
            &value,
            &["schema", "manifest_sha256", "signatures"],
        )?;
        json::expect_schema(&top, SIGNATURES_SCHEMA)?;
        let manifest_sha256 =
            Sha256Digest::parse_hex(top.str("manifest_sha256")?).ok_or_else(|| {
                top.invalid(
                    "manifest_sha256",
                    "expected 64 lowercase hexadecimal characters",
                )
            })?;
        let raw = top.array("signatures")?;
        if raw.len() > MAX_SIGNATURES {
            return Err(top.invalid("signatures", format!("at most {MAX_SIGNATURES} signatures")));
        }
        let mut signatures = Vec::with_capacity(raw.len());
        for (i, item) in raw.iter().enumerate() {
            let path = format!("$.signatures[{i}]");
            let fields = Fields::new(
                Document::Signatures,
                &path,
                item,
                &["algorithm", "key_id", "signature"],
            )?;
            if fields.str("algorithm")? != ALGORITHM_ED25519 {
                return Err(fields.invalid("algorithm", "the only algorithm is \"ed25519\""));
            }
            let key_id = KeyId::parse(fields.str("key_id")?)
                .ok_or_else(|| fields.invalid("key_id", "expected sha256:<64 lowercase hex>"))?;
            let signature = parse_signature_hex(fields.str("signature")?).ok_or_else(|| {
                fields.invalid("signature", "expected 128 lowercase hexadecimal characters")
            })?;
            signatures.push(SignatureEntry { key_id, signature });
        }
        Ok(Self {
            manifest_sha256,
            signatures,
        })
    }

    /// Adds (or replaces) the signature of `key` over this file's manifest digest.
    pub fn add(&mut self, key: &SecretKey) -> Result<()> {
        let public = key.public_key()?;
        let signature = key.sign(&signing_message(&self.manifest_sha256));
        self.signatures.retain(|entry| &entry.key_id != public.id());
        self.signatures.push(SignatureEntry {
            key_id: public.id().clone(),
            signature,
        });
        self.signatures.sort_by(|a, b| a.key_id.cmp(&b.key_id));
        Ok(())
    }

    /// The canonical `signatures.json` bytes: one signature per key, sorted by key id.
    pub fn to_canonical_bytes(&self) -> Result<Vec<u8>> {
        let mut entries: Vec<&SignatureEntry> = self.signatures.iter().collect();
        entries.sort_by(|a, b| a.key_id.cmp(&b.key_id));
        entries.dedup_by(|a, b| a.key_id == b.key_id);
        let signatures: Vec<Value> = entries
            .into_iter()
            .map(|entry| {
                json!({
                    "algorithm": ALGORITHM_ED25519,
                    "key_id": entry.key_id.as_str(),
                    "signature": hex::encode(entry.signature),
                })
            })
            .collect();
        json::canonical_bytes(&json!({
            "schema": SIGNATURES_SCHEMA,
            "manifest_sha256": self.manifest_sha256.to_hex(),
            "signatures": signatures,
        }))
    }
}

fn parse_signature_hex(text: &str) -> Option<[u8; 64]> {
    if text.len() != 128
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; 64];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_domain_separated() {
        let digest = Sha256Digest::of(b"m");
        let message = signing_message(&digest);
        assert_eq!(message.len(), SIGNATURE_DOMAIN.len() + 32);
        assert!(message.starts_with(b"dpone.policy-bundle.signature.v1\0"));
        assert_eq!(&message[SIGNATURE_DOMAIN.len()..], digest.as_bytes());
    }

    #[test]
    fn round_trip_and_strictness() -> Result<()> {
        let mut file = SignatureFile::new(Sha256Digest::of(b"m"));
        file.add(&SecretKey::from_seed(&[2; 32]))?;
        file.add(&SecretKey::from_seed(&[1; 32]))?;
        file.add(&SecretKey::from_seed(&[2; 32]))?;
        assert_eq!(file.signatures.len(), 2);
        let bytes = file.to_canonical_bytes()?;
        assert_eq!(SignatureFile::parse(&bytes)?, file);

        let text = String::from_utf8_lossy(&bytes).to_string();
        let code = |t: &str| SignatureFile::parse(t.as_bytes()).err().map(|e| e.code());
        assert_eq!(
            code(&text.replace("\"ed25519\"", "\"rsa\"")),
            Some("DPONE_BUNDLE_SIGNATURES_INVALID_VALUE")
        );
        assert_eq!(
            code(&format!("{text}\n")),
            Some("DPONE_BUNDLE_SIGNATURES_NON_CANONICAL")
        );
        assert_eq!(
            code(&text.replacen("{\"algorithm\"", "{\"a\":1,\"algorithm\"", 1)),
            Some("DPONE_BUNDLE_SIGNATURES_UNKNOWN_FIELD")
        );
        Ok(())
    }
}
