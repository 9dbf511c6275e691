//! Policy bundles: a directory (or [`crate::archive`]) of components, decision tables, a
//! canonical manifest and the signatures over it.
//!
//! ```text
//! my-bundle/
//!   manifest.json        canonical JSON, see crate::manifest
//!   signatures.json      see crate::signature (absent until signed)
//!   admission.wasm  delete-mode.wasm  guard.wasm  scope.wasm     any non-empty subset
//!   tables/<stem>.json   decision tables
//!   attestations/        GitHub attestations of the manifest and their trusted roots,
//!                        see crate::bundle_attestation (optional)
//! ```
//!
//! Reading ([`BundleFiles::read_dir`]) admits only those names, only regular files (no
//! symlinks), each under the size limit of its role, at most [`MAX_BUNDLE_FILES`] files and
//! [`MAX_BUNDLE_BYTES`] bytes. [`verify`] then checks, in this order, and refuses at the first
//! failure with its own code: the manifest parses under every rule; the signatures satisfy the
//! trust policy (ed25519 signatures and, under a v2 trust policy, attestations of the manifest,
//! counted together); every listed file is present with the declared size and sha256; no file
//! is present that the manifest does not list, except the signatures and attestation files. Only a [`VerifiedBundle`] hands out component
//! bytes, and the pins it hands out are the digests of the verified manifest.

use crate::Result;
use crate::bundle_attestation::AttestedSigner;
use crate::digest::Sha256Digest;
use crate::error::{TrustError, shown};
use crate::keys::{KeyId, SecretKey};
use crate::manifest::{
    FileRole, MAX_TABLES, Manifest, PolicyEntry, PolicyKind, ResourceBudget,
    SUPPORTED_WIT_PACKAGES, TableEntry, file_role,
};
use crate::policy::TrustPolicy;
use crate::signature::SignatureFile;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::Path;

/// `manifest.json`.
pub const MANIFEST_FILE: &str = "manifest.json";
/// `signatures.json`.
pub const SIGNATURES_FILE: &str = "signatures.json";
/// The directory of decision tables.
pub const TABLES_DIR: &str = "tables";

/// The directory of attestation files.
pub const ATTESTATIONS_DIR: &str = crate::bundle_attestation::ATTESTATIONS_DIR;

/// Most files a bundle may hold: manifest, signatures, four components, the tables, the
/// attestations and their trusted roots.
pub const MAX_BUNDLE_FILES: usize = 2
    + PolicyKind::ALL.len()
    + MAX_TABLES
    + crate::bundle_attestation::MAX_ATTESTATION_FILES
    + crate::bundle_attestation::MAX_TRUSTED_ROOT_FILES;

/// Most bytes a bundle may hold in total.
pub const MAX_BUNDLE_BYTES: u64 = 64 * 1024 * 1024;

/// The files of a bundle, by bundle-relative name, before or after verification.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BundleFiles {
    files: BTreeMap<String, Vec<u8>>,
    total: u64,
}

impl BundleFiles {
    /// No files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file, enforcing the naming rules and every size limit.
    pub fn insert(&mut self, name: &str, bytes: Vec<u8>) -> Result<()> {
        let role = file_role(name).ok_or_else(|| TrustError::PathInvalid { name: shown(name) })?;
        let size = bytes.len() as u64;
        if size > role.limit() {
            return Err(TrustError::FileTooLarge {
                name: name.to_owned(),
                limit: role.limit(),
            });
        }
        let previous = self.files.get(name).map_or(0, |old| old.len() as u64);
        let total = self.total - previous + size;
        if total > MAX_BUNDLE_BYTES {
            return Err(TrustError::BundleTooLarge {
                detail: format!("more than {MAX_BUNDLE_BYTES} bytes"),
            });
        }
        if !self.files.contains_key(name) && self.files.len() >= MAX_BUNDLE_FILES {
            return Err(TrustError::BundleTooLarge {
                detail: format!("more than {MAX_BUNDLE_FILES} files"),
            });
        }
        let role_limit = match role {
            FileRole::Attestation => Some(crate::bundle_attestation::MAX_ATTESTATION_FILES),
            FileRole::TrustedRoot => Some(crate::bundle_attestation::MAX_TRUSTED_ROOT_FILES),
            _ => None,
        };
        if let Some(limit) = role_limit
            && !self.files.contains_key(name)
            && self
                .files
                .keys()
                .filter(|n| file_role(n) == Some(role))
                .count()
                >= limit
        {
            return Err(TrustError::BundleTooLarge {
                detail: format!("more than {limit} files under {ATTESTATIONS_DIR}/ of one kind"),
            });
        }
        self.files.insert(name.to_owned(), bytes);
        self.total = total;
        Ok(())
    }

    /// Removes a file.
    pub fn remove(&mut self, name: &str) -> Option<Vec<u8>> {
        let removed = self.files.remove(name);
        if let Some(bytes) = &removed {
            self.total -= bytes.len() as u64;
        }
        removed
    }

    /// The bytes of a file.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(Vec::as_slice)
    }

    /// Every file, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files
            .iter()
            .map(|(name, bytes)| (name.as_str(), bytes.as_slice()))
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there are no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Reads a bundle directory. Refuses symlinks and anything but bundle file names.
    pub fn read_dir(dir: &Path) -> Result<Self> {
        let mut files = Self::new();
        for (name, kind) in sorted_entries(dir, "read the bundle directory")? {
            match kind {
                EntryKind::Dir if name == TABLES_DIR => {
                    for (table, kind) in
                        sorted_entries(&dir.join(TABLES_DIR), "read the tables directory")?
                    {
                        let rel = format!("{TABLES_DIR}/{table}");
                        match kind {
                            EntryKind::File if file_role(&rel) == Some(FileRole::Table) => {
                                let bytes = read_limited(&dir.join(TABLES_DIR).join(&table), &rel)?;
                                files.insert(&rel, bytes)?;
                            }
                            EntryKind::File | EntryKind::Dir => {
                                return Err(TrustError::FileUnexpected { name: shown(&rel) });
                            }
                            EntryKind::Other => {
                                return Err(TrustError::FileNotRegular { name: shown(&rel) });
                            }
                        }
                    }
                }
                EntryKind::Dir if name == ATTESTATIONS_DIR => {
                    for (file, kind) in sorted_entries(
                        &dir.join(ATTESTATIONS_DIR),
                        "read the attestations directory",
                    )? {
                        let rel = format!("{ATTESTATIONS_DIR}/{file}");
                        match kind {
                            EntryKind::File
                                if matches!(
                                    file_role(&rel),
                                    Some(FileRole::Attestation | FileRole::TrustedRoot)
                                ) =>
                            {
                                let bytes =
                                    read_limited(&dir.join(ATTESTATIONS_DIR).join(&file), &rel)?;
                                files.insert(&rel, bytes)?;
                            }
                            EntryKind::File | EntryKind::Dir => {
                                return Err(TrustError::FileUnexpected { name: shown(&rel) });
                            }
                            EntryKind::Other => {
                                return Err(TrustError::FileNotRegular { name: shown(&rel) });
                            }
                        }
                    }
                }
                EntryKind::File
                    if file_role(&name).is_some_and(|r| {
                        !matches!(
                            r,
                            FileRole::Table | FileRole::Attestation | FileRole::TrustedRoot
                        )
                    }) =>
                {
                    let bytes = read_limited(&dir.join(&name), &name)?;
                    files.insert(&name, bytes)?;
                }
                EntryKind::File | EntryKind::Dir => {
                    return Err(TrustError::FileUnexpected { name: shown(&name) });
                }
                EntryKind::Other => return Err(TrustError::FileNotRegular { name: shown(&name) }),
            }
        }
        Ok(files)
    }

    /// Writes the files into `dir`, which must not exist yet.
    pub fn write_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir(dir)
            .map_err(|err| TrustError::io("create the bundle directory", err))?;
        if self.files.keys().any(|name| name.starts_with("tables/")) {
            std::fs::create_dir(dir.join(TABLES_DIR))
                .map_err(|err| TrustError::io("create the tables directory", err))?;
        }
        if self
            .files
            .keys()
            .any(|name| name.starts_with("attestations/"))
        {
            std::fs::create_dir(dir.join(ATTESTATIONS_DIR))
                .map_err(|err| TrustError::io("create the attestations directory", err))?;
        }
        for (name, bytes) in &self.files {
            write_new(&dir.join(name), bytes)?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    File,
    Dir,
    Other,
}

/// Directory entries with UTF-8 names, sorted, classified without following symlinks.
fn sorted_entries(dir: &Path, action: &'static str) -> Result<Vec<(String, EntryKind)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|err| TrustError::io(action, err))? {
        let entry = entry.map_err(|err| TrustError::io(action, err))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(TrustError::PathInvalid {
                name: shown(&name.to_string_lossy()),
            });
        };
        let file_type = entry
            .file_type()
            .map_err(|err| TrustError::io(action, err))?;
        let kind = if file_type.is_symlink() {
            EntryKind::Other
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        out.push((name.to_owned(), kind));
        if out.len() > MAX_BUNDLE_FILES + 1 {
            return Err(TrustError::BundleTooLarge {
                detail: format!("more than {MAX_BUNDLE_FILES} files"),
            });
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Reads a regular file of role-limited size; `name` is the bundle-relative name for errors.
fn read_limited(path: &Path, name: &str) -> Result<Vec<u8>> {
    let limit = file_role(name).map_or(0, FileRole::limit);
    let (file, meta) = match dpone_boundary::read::open_regular(path) {
        Ok(opened) => opened,
        Err(dpone_boundary::read::ReadError::NotRegular) => {
            return Err(TrustError::FileNotRegular { name: shown(name) });
        }
        Err(err) => return Err(TrustError::io("open a bundle file", err.into_io())),
    };
    if meta.len() > limit {
        return Err(TrustError::FileTooLarge {
            name: name.to_owned(),
            limit,
        });
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| TrustError::io("read a bundle file", err))?;
    if bytes.len() as u64 > limit {
        return Err(TrustError::FileTooLarge {
            name: name.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|err| TrustError::io("create a bundle file", err))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|err| TrustError::io("write a bundle file", err))
}

/// Replaces `signatures.json` in a bundle directory atomically (write, then rename).
pub fn write_signatures_file(dir: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(".signatures.json.tmp");
    let _ = std::fs::remove_file(&tmp);
    write_new(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(SIGNATURES_FILE))
        .map_err(|err| TrustError::io("replace the signatures file", err))
}

/// Assembles a new bundle: components, tables and a canonical manifest.
#[derive(Clone, Debug)]
pub struct BundleBuilder {
    name: String,
    version: String,
    sequence: u64,
    not_before: u64,
    expires_at: u64,
    policies: BTreeMap<PolicyKind, (Vec<u8>, ResourceBudget)>,
    tables: BTreeMap<String, (PolicyKind, Vec<u8>)>,
}

impl BundleBuilder {
    /// A bundle with this name and version.
    pub fn new(name: &str, version: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            sequence: 1,
            not_before: 0,
            expires_at: crate::json::MAX_SAFE_INTEGER,
            policies: BTreeMap::new(),
            tables: BTreeMap::new(),
        }
    }

    /// The bundle's sequence (default 1): each new bundle of a name needs a higher one.
    pub fn sequence(mut self, sequence: u64) -> Self {
        self.sequence = sequence;
        self
    }

    /// The signed validity window, unix seconds, `not_before` inclusive, `expires_at`
    /// exclusive. The default is from 0 to 2^53-1; the CLI always sets a real window.
    pub fn validity(mut self, not_before: u64, expires_at: u64) -> Self {
        self.not_before = not_before;
        self.expires_at = expires_at;
        self
    }

    /// Adds the component of `kind`.
    pub fn policy(mut self, kind: PolicyKind, component: Vec<u8>, budget: ResourceBudget) -> Self {
        self.policies.insert(kind, (component, budget));
        self
    }

    /// Adds a decision table `tables/<stem>.json` for `kind`.
    pub fn table(mut self, stem: &str, kind: PolicyKind, bytes: Vec<u8>) -> Self {
        self.tables
            .insert(format!("{TABLES_DIR}/{stem}.json"), (kind, bytes));
        self
    }

    /// The unsigned bundle; fails if the result would not parse under the manifest rules.
    pub fn build(self) -> Result<BundleFiles> {
        let mut files = BundleFiles::new();
        let mut policies = Vec::new();
        for (kind, (bytes, budget)) in self.policies {
            policies.push(PolicyEntry {
                kind,
                file: kind.file_name().to_owned(),
                sha256: Sha256Digest::of(&bytes),
                size: bytes.len() as u64,
                budget,
            });
            files.insert(kind.file_name(), bytes)?;
        }
        let mut tables = Vec::new();
        for (file, (kind, bytes)) in self.tables {
            tables.push(TableEntry {
                kind,
                file: file.clone(),
                sha256: Sha256Digest::of(&bytes),
                size: bytes.len() as u64,
            });
            files.insert(&file, bytes)?;
        }
        let manifest = Manifest {
            name: self.name,
            version: self.version,
            wit_package: SUPPORTED_WIT_PACKAGES
                .first()
                .map(|s| (*s).to_owned())
                .unwrap_or_default(),
            sequence: self.sequence,
            not_before: self.not_before,
            expires_at: self.expires_at,
            policies,
            tables,
        };
        files.insert(MANIFEST_FILE, manifest.to_canonical_bytes()?)?;
        Ok(files)
    }
}

/// Signs a bundle with `key`: checks the bundle is complete and consistent, keeps existing
/// signatures that are for this manifest, adds or replaces this key's signature and stores the
/// new `signatures.json` in `files`. Returns the new signatures file.
pub fn sign(files: &mut BundleFiles, key: &SecretKey) -> Result<SignatureFile> {
    let manifest_bytes = files
        .get(MANIFEST_FILE)
        .ok_or_else(|| TrustError::FileMissing {
            name: MANIFEST_FILE.into(),
        })?;
    let manifest = Manifest::parse(manifest_bytes)?;
    let digest = Sha256Digest::of(manifest_bytes);
    check_contents(&manifest, files)?;
    let mut signatures = match files.get(SIGNATURES_FILE) {
        Some(bytes) => {
            let existing = SignatureFile::parse(bytes)?;
            if existing.manifest_sha256 == digest {
                existing
            } else {
                SignatureFile::new(digest)
            }
        }
        None => SignatureFile::new(digest),
    };
    signatures.add(key)?;
    files.insert(SIGNATURES_FILE, signatures.to_canonical_bytes()?)?;
    Ok(signatures)
}

/// What verification established, for decision evidence and receipts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleEvidence {
    /// Bundle name from the manifest.
    pub name: String,
    /// Bundle version from the manifest.
    pub version: String,
    /// WIT package from the manifest.
    pub wit_package: String,
    /// SHA-256 of the exact manifest bytes that were signed.
    pub manifest_sha256: Sha256Digest,
    /// SHA-256 of the trust policy applied.
    pub trust_policy_sha256: Sha256Digest,
    /// Signatures required.
    pub threshold: usize,
    /// Distinct trusted signers whose signatures verified.
    pub signers: Vec<KeyId>,
    /// Signers not in the trust policy, ignored.
    pub ignored_signers: Vec<KeyId>,
    /// Attestation identities of the trust policy whose attestation of the manifest verified.
    pub attested_by: Vec<AttestedSigner>,
    /// Attestation files naming no identity of the trust policy, ignored.
    pub ignored_attestations: Vec<String>,
    /// The pins: each component kind with its verified digest.
    pub components: Vec<(PolicyKind, Sha256Digest)>,
}

impl BundleEvidence {
    /// The evidence as JSON (stable field names).
    pub fn to_json(&self) -> Value {
        json!({
            "bundle": {"name": self.name, "version": self.version},
            "wit_package": self.wit_package,
            "manifest_sha256": self.manifest_sha256.to_hex(),
            "trust_policy_sha256": self.trust_policy_sha256.to_hex(),
            "threshold": self.threshold,
            "signers": self.signers.iter().map(KeyId::as_str).collect::<Vec<_>>(),
            "ignored_signers": self.ignored_signers.iter().map(KeyId::as_str).collect::<Vec<_>>(),
            "attestations": self.attested_by.iter().map(AttestedSigner::to_json).collect::<Vec<_>>(),
            "ignored_attestations": self.ignored_attestations,
            "components": self.components.iter().map(|(kind, digest)| json!({
                "kind": kind.as_str(), "sha256": digest.to_hex(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// A component of a verified bundle, with its pin and budget.
#[derive(Clone, Copy, Debug)]
pub struct VerifiedComponent<'a> {
    /// Policy kind.
    pub kind: PolicyKind,
    /// The pinned digest (verified equal to `sha256(bytes)`).
    pub sha256: Sha256Digest,
    /// The budget the manifest declares.
    pub budget: ResourceBudget,
    /// The component bytes.
    pub bytes: &'a [u8],
}

/// A decision table of a verified bundle.
#[derive(Clone, Copy, Debug)]
pub struct VerifiedTable<'a> {
    /// The manifest entry.
    pub entry: &'a TableEntry,
    /// The table bytes (verified against the entry's digest).
    pub bytes: &'a [u8],
}

/// A bundle that passed [`verify`]. The only way to obtain component bytes from a bundle.
#[derive(Clone, Debug)]
pub struct VerifiedBundle {
    manifest: Manifest,
    files: BundleFiles,
    evidence: BundleEvidence,
}

impl VerifiedBundle {
    /// The verified manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// What verification established.
    pub fn evidence(&self) -> &BundleEvidence {
        &self.evidence
    }

    /// The components, in kind order.
    pub fn components(&self) -> impl Iterator<Item = VerifiedComponent<'_>> {
        self.manifest.policies.iter().filter_map(|entry| {
            self.files.get(&entry.file).map(|bytes| VerifiedComponent {
                kind: entry.kind,
                sha256: entry.sha256,
                budget: entry.budget,
                bytes,
            })
        })
    }

    /// The component of `kind`, if the bundle ships one.
    pub fn component(&self, kind: PolicyKind) -> Option<VerifiedComponent<'_>> {
        self.components().find(|c| c.kind == kind)
    }

    /// The decision tables, in file order.
    pub fn tables(&self) -> impl Iterator<Item = VerifiedTable<'_>> {
        self.manifest.tables.iter().filter_map(|entry| {
            self.files
                .get(&entry.file)
                .map(|bytes| VerifiedTable { entry, bytes })
        })
    }
}

/// Verifies a bundle against a trust policy. Never fails open: see the module docs.
pub fn verify(files: &BundleFiles, policy: &TrustPolicy) -> Result<VerifiedBundle> {
    let manifest_bytes = files
        .get(MANIFEST_FILE)
        .ok_or_else(|| TrustError::FileMissing {
            name: MANIFEST_FILE.into(),
        })?;
    let manifest = Manifest::parse(manifest_bytes)?;
    let manifest_sha256 = Sha256Digest::of(manifest_bytes);
    let signatures = files
        .get(SIGNATURES_FILE)
        .map(SignatureFile::parse)
        .transpose()?;
    let signers = policy.evaluate_bundle(&manifest_sha256, signatures.as_ref(), files)?;
    check_contents(&manifest, files)?;
    let evidence = BundleEvidence {
        name: manifest.name.clone(),
        version: manifest.version.clone(),
        wit_package: manifest.wit_package.clone(),
        manifest_sha256,
        trust_policy_sha256: *policy.sha256(),
        threshold: signers.threshold,
        signers: signers.signers,
        ignored_signers: signers.ignored,
        attested_by: signers.attested_by,
        ignored_attestations: signers.ignored_attestations,
        components: manifest
            .policies
            .iter()
            .map(|p| (p.kind, p.sha256))
            .collect(),
    };
    let mut kept = files.clone();
    kept.remove(SIGNATURES_FILE);
    let attestation_names: Vec<String> = files
        .iter()
        .filter(|(name, _)| {
            matches!(
                file_role(name),
                Some(FileRole::Attestation | FileRole::TrustedRoot)
            )
        })
        .map(|(name, _)| name.to_owned())
        .collect();
    for name in attestation_names {
        kept.remove(&name);
    }
    Ok(VerifiedBundle {
        manifest,
        files: kept,
        evidence,
    })
}

/// What [`inspect`] reports about a bundle without a trust policy. Nothing here is trusted.
#[derive(Clone, Debug)]
pub struct Inspection {
    /// The manifest (parsed strictly).
    pub manifest: Manifest,
    /// SHA-256 of the manifest bytes.
    pub manifest_sha256: Sha256Digest,
    /// Key ids that claim to have signed (signatures not checked).
    pub claimed_signers: Vec<KeyId>,
    /// Whether every file matches the manifest; the refusal code otherwise.
    pub contents: std::result::Result<(), &'static str>,
}

/// Parses the manifest and signatures and checks the files, without any trust decision.
pub fn inspect(files: &BundleFiles) -> Result<Inspection> {
    let manifest_bytes = files
        .get(MANIFEST_FILE)
        .ok_or_else(|| TrustError::FileMissing {
            name: MANIFEST_FILE.into(),
        })?;
    let manifest = Manifest::parse(manifest_bytes)?;
    let manifest_sha256 = Sha256Digest::of(manifest_bytes);
    let claimed_signers = match files.get(SIGNATURES_FILE) {
        Some(bytes) => SignatureFile::parse(bytes)?
            .signatures
            .into_iter()
            .map(|s| s.key_id)
            .collect(),
        None => Vec::new(),
    };
    let contents = check_contents(&manifest, files).map_err(|err| err.code());
    Ok(Inspection {
        manifest,
        manifest_sha256,
        claimed_signers,
        contents,
    })
}

/// Every listed file present with the declared size and digest; nothing else present.
fn check_contents(manifest: &Manifest, files: &BundleFiles) -> Result<()> {
    for (name, declared, size) in manifest.listed_files() {
        let bytes = files.get(name).ok_or_else(|| TrustError::FileMissing {
            name: name.to_owned(),
        })?;
        let actual_size = bytes.len() as u64;
        if actual_size != size {
            return Err(TrustError::FileSizeMismatch {
                name: name.to_owned(),
                declared: size,
                actual: actual_size,
            });
        }
        let actual = Sha256Digest::of(bytes);
        if &actual != declared {
            return Err(TrustError::FileDigestMismatch {
                name: name.to_owned(),
                declared: declared.to_hex(),
                actual: actual.to_hex(),
            });
        }
    }
    let listed: Vec<&str> = manifest.listed_files().map(|(name, _, _)| name).collect();
    if let Some((extra, _)) = files.iter().find(|(name, _)| {
        *name != MANIFEST_FILE
            && *name != SIGNATURES_FILE
            && !matches!(
                file_role(name),
                Some(FileRole::Attestation | FileRole::TrustedRoot)
            )
            && !listed.contains(name)
    }) {
        return Err(TrustError::FileUnexpected { name: shown(extra) });
    }
    Ok(())
}
