//! ed25519 keys: key ids, key files, generation.
//!
//! - A **key id** is `sha256:` followed by the lowercase hex SHA-256 of the 32-byte public key.
//! - A **private key file** is PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the same format
//!   `openssl genpkey -algorithm ed25519` writes. It is created with mode 0600 and never
//!   overwritten; reading refuses a file that group or others can access.
//! - A **public key file** is SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
//!
//! Private key material is never formatted: [`SecretKey`]'s `Debug` shows only the key id, and
//! every buffer that held the encoded key is zeroized on drop.

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::TrustError;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, KeypairBytes,
};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use std::fmt;
use std::io::{Read as _, Write as _};
use std::path::Path;
use zeroize::{Zeroize as _, Zeroizing};

/// Largest key file read.
const MAX_KEY_FILE_BYTES: u64 = 16 * 1024;

/// `sha256:<hex>` of a 32-byte ed25519 public key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId(String);

impl KeyId {
    /// The key id of `key`.
    pub fn of(key: &VerifyingKey) -> Self {
        Self(format!(
            "sha256:{}",
            Sha256Digest::of(key.as_bytes()).to_hex()
        ))
    }

    /// Parses `sha256:<64 lowercase hex>`.
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix("sha256:")?;
        Sha256Digest::parse_hex(hex).map(|_| Self(text.to_owned()))
    }

    /// The textual form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An ed25519 public key accepted for verification: a valid curve point of full order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
    id: KeyId,
}

impl PublicKey {
    /// From the 32 raw key bytes; refuses non-points and weak (small-order) keys.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw: [u8; 32] = bytes.try_into().map_err(|_| TrustError::PublicKeyInvalid {
            detail: format!("{} bytes, an ed25519 public key has 32", bytes.len()),
        })?;
        let key = VerifyingKey::from_bytes(&raw).map_err(|_| TrustError::PublicKeyInvalid {
            detail: "not a point on the curve".into(),
        })?;
        Self::from_verifying_key(key)
    }

    fn from_verifying_key(key: VerifyingKey) -> Result<Self> {
        if key.is_weak() {
            return Err(TrustError::PublicKeyInvalid {
                detail: "small-order (weak) key".into(),
            });
        }
        let id = KeyId::of(&key);
        Ok(Self { key, id })
    }

    /// From 64 lowercase hexadecimal characters.
    pub fn from_hex(text: &str) -> Result<Self> {
        // 32 bytes in the one accepted hex spelling, which is the spelling of a digest.
        let raw = Sha256Digest::parse_hex(text).ok_or_else(|| TrustError::PublicKeyInvalid {
            detail: "expected 64 lowercase hexadecimal characters".into(),
        })?;
        Self::from_bytes(raw.as_bytes())
    }

    /// From SubjectPublicKeyInfo PEM.
    pub fn from_pem(text: &str) -> Result<Self> {
        let key =
            VerifyingKey::from_public_key_pem(text).map_err(|_| TrustError::KeyFileMalformed {
                detail: "not an ed25519 SubjectPublicKeyInfo PEM".into(),
            })?;
        Self::from_verifying_key(key)
    }

    /// SubjectPublicKeyInfo PEM.
    pub fn to_pem(&self) -> Result<String> {
        self.key
            .to_public_key_pem(LineEnding::LF)
            .map_err(|err| TrustError::Internal {
                detail: format!("public key encoding failed: {err}"),
            })
    }

    /// The raw key as 64 lowercase hexadecimal characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.key.as_bytes())
    }

    /// The key id.
    pub fn id(&self) -> &KeyId {
        &self.id
    }

    /// Verifies `signature` over `message` with the strict ed25519 rules (canonical `S`, no
    /// small-order `R`, no weak key).
    pub fn verify_strict(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let signature = Signature::from_bytes(signature);
        self.key.verify_strict(message, &signature).is_ok()
    }
}

/// An ed25519 private key. Never printed; zeroized on drop.
pub struct SecretKey {
    key: SigningKey,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SecretKey({}, <redacted>)",
            KeyId::of(&self.key.verifying_key())
        )
    }
}

impl SecretKey {
    /// A fresh key from the operating system's random number generator.
    pub fn generate() -> Result<Self> {
        let mut seed = Zeroizing::new([0u8; 32]);
        getrandom::fill(seed.as_mut()).map_err(|_| TrustError::RandomnessUnavailable)?;
        Ok(Self::from_seed(&seed))
    }

    /// A key from a 32-byte seed. Deterministic: for tests and fixtures only.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self {
            key: SigningKey::from_bytes(seed),
        }
    }

    /// The public half.
    pub fn public_key(&self) -> Result<PublicKey> {
        PublicKey::from_verifying_key(self.key.verifying_key())
    }

    /// Signs `message` (pure ed25519, RFC 8032).
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    /// PKCS#8 v1 PEM (RFC 8410: the seed only, no embedded public key, which is the form
    /// every OpenSSL 3 reads); the buffer is zeroized on drop.
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>> {
        let mut keypair = KeypairBytes {
            secret_key: self.key.to_bytes(),
            public_key: None,
        };
        let pem = keypair
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|_| TrustError::Internal {
                detail: "private key encoding failed".into(),
            });
        keypair.secret_key.zeroize();
        pem
    }

    /// From PKCS#8 PEM.
    pub fn from_pkcs8_pem(text: &str) -> Result<Self> {
        let key = SigningKey::from_pkcs8_pem(text).map_err(|_| TrustError::KeyFileMalformed {
            detail: "not an ed25519 PKCS#8 PEM private key".into(),
        })?;
        Ok(Self { key })
    }
}

/// Writes `key` as a new PKCS#8 PEM file with mode 0600. Refuses to overwrite.
pub fn write_secret_key_file(path: &Path, key: &SecretKey) -> Result<()> {
    let pem = key.to_pkcs8_pem()?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|err| match err.kind() {
        std::io::ErrorKind::AlreadyExists => TrustError::KeyFileExists,
        _ => TrustError::io("create the private key file", err),
    })?;
    file.write_all(pem.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|err| TrustError::io("write the private key file", err))
}

/// Reads a PKCS#8 PEM private key file, refusing one that group or others can access.
pub fn read_secret_key_file(path: &Path) -> Result<SecretKey> {
    let (mut file, meta) = match dpone_boundary::read::open_regular(path) {
        Ok(opened) => opened,
        Err(dpone_boundary::read::ReadError::NotRegular) => {
            return Err(TrustError::KeyFileMalformed {
                detail: "not a regular file".into(),
            });
        }
        Err(err) => return Err(TrustError::io("open the private key file", err.into_io())),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TrustError::KeyFilePermissions { mode });
        }
    }
    let mut buf = Zeroizing::new(Vec::new());
    (&mut file)
        .take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|err| TrustError::io("read the private key file", err))?;
    if buf.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(TrustError::KeyFileMalformed {
            detail: "larger than a key file can be".into(),
        });
    }
    let text = std::str::from_utf8(&buf).map_err(|_| TrustError::KeyFileMalformed {
        detail: "not UTF-8 PEM".into(),
    })?;
    SecretKey::from_pkcs8_pem(text)
}

/// Writes `key` as a new SubjectPublicKeyInfo PEM file. Refuses to overwrite.
pub fn write_public_key_file(path: &Path, key: &PublicKey) -> Result<()> {
    let pem = key.to_pem()?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::AlreadyExists => TrustError::KeyFileExists,
            _ => TrustError::io("create the public key file", err),
        })?;
    file.write_all(pem.as_bytes())
        .map_err(|err| TrustError::io("write the public key file", err))
}

/// Reads a SubjectPublicKeyInfo PEM public key file.
pub fn read_public_key_file(path: &Path) -> Result<PublicKey> {
    use dpone_boundary::read::{ReadError, read_regular};
    let mut buf = match read_regular(path, MAX_KEY_FILE_BYTES) {
        Ok(buf) => buf,
        Err(ReadError::TooLarge { .. }) => {
            return Err(TrustError::KeyFileMalformed {
                detail: "larger than a key file can be".into(),
            });
        }
        Err(ReadError::NotRegular) => {
            return Err(TrustError::KeyFileMalformed {
                detail: "not a regular file".into(),
            });
        }
        Err(err) => return Err(TrustError::io("read the public key file", err.into_io())),
    };
    if buf.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(TrustError::KeyFileMalformed {
            detail: "larger than a key file can be".into(),
        });
    }
    let text = std::str::from_utf8(&buf).map_err(|_| TrustError::KeyFileMalformed {
        detail: "not UTF-8 PEM".into(),
    })?;
    let key = PublicKey::from_pem(text);
    buf.zeroize();
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_id_is_sha256_of_the_raw_public_key() {
        let secret = SecretKey::from_seed(&[7; 32]);
        let public = secret.public_key().ok();
        let public = public.as_ref();
        let expected = public.map(|p| {
            format!(
                "sha256:{}",
                Sha256Digest::of(&hex::decode(p.to_hex()).unwrap_or_default())
            )
        });
        assert_eq!(public.map(|p| p.id().to_string()), expected);
        assert!(KeyId::parse(&expected.unwrap_or_default()).is_some());
        assert!(KeyId::parse("sha256:ABC").is_none());
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let secret = SecretKey::from_seed(&[9; 32]);
        let pem = secret
            .to_pkcs8_pem()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let shown = format!("{secret:?}");
        assert!(shown.contains("redacted"));
        assert!(!shown.contains(&body));
        assert!(!shown.contains(&hex::encode([9u8; 32])));
    }

    #[test]
    fn pem_round_trips() {
        let secret = SecretKey::from_seed(&[3; 32]);
        let pem = secret
            .to_pkcs8_pem()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let again = SecretKey::from_pkcs8_pem(&pem).ok();
        assert_eq!(
            again.and_then(|k| k.public_key().ok()),
            secret.public_key().ok()
        );
        let public = secret.public_key().ok();
        let public_pem = public
            .as_ref()
            .and_then(|p| p.to_pem().ok())
            .unwrap_or_default();
        assert_eq!(PublicKey::from_pem(&public_pem).ok(), public);
    }

    #[test]
    fn weak_and_malformed_public_keys_are_refused() {
        // The identity point is a small-order key.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(matches!(
            PublicKey::from_bytes(&identity),
            Err(TrustError::PublicKeyInvalid { .. })
        ));
        assert!(PublicKey::from_bytes(&[1; 31]).is_err());
        assert!(PublicKey::from_hex("zz").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn secret_key_files_are_private_and_never_overwritten()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("signer.key");
        let key = SecretKey::from_seed(&[5; 32]);
        write_secret_key_file(&path, &key)?;
        assert_eq!(
            std::fs::metadata(&path)?.permissions().mode() & 0o777,
            0o600
        );
        assert!(matches!(
            write_secret_key_file(&path, &key),
            Err(TrustError::KeyFileExists)
        ));
        assert_eq!(
            read_secret_key_file(&path)?.public_key()?,
            key.public_key()?
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        assert_eq!(
            read_secret_key_file(&path).err().map(|e| e.code()),
            Some("DPONE_KEY_FILE_PERMISSIONS")
        );
        Ok(())
    }
}
