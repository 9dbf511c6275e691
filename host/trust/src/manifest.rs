//! The bundle manifest: `manifest.json`, canonical JSON (RFC 8785).
//!
//! ```json
//! {"expires_at":1767225600,"name":"core","not_before":1764547200,"policies":[{"budget":
//!   {"fuel":5000000,"memory_bytes":16777216,"wasm_stack_bytes":524288},"file":"guard.wasm",
//!   "kind":"guard","sha256":"<64 hex>","size":12345}],"schema":"dpone.policy-bundle.v2",
//!   "sequence":7,"tables":[{"file":"tables/guard.json","kind":"guard","sha256":"<64 hex>",
//!   "size":2048}],"version":"1.0.0","wit_package":"dpone:policy@0.1.0"}
//! ```
//!
//! (Shown wrapped; the file itself is one line with no trailing newline.)
//!
//! Rules beyond the strict JSON layer ([`crate::json`]): at least one policy and at most one
//! per kind; a policy's file is `<kind>.wasm`; a table's file is `tables/<stem>.json`; policies
//! are sorted by kind and tables by file, so a bundle's content has exactly one manifest; every
//! table belongs to a policy kind present in the bundle; budgets are positive; `sequence` is
//! positive (it only ever grows for a bundle name) and the signed validity window
//! `not_before < expires_at` is in unix seconds (see [`crate::freshness`]).

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::{Document, TrustError, shown};
use crate::json::{self, Fields, MAX_SAFE_INTEGER};
use serde_json::{Value, json};
use std::fmt;

/// The manifest schema this version reads and writes.
pub const MANIFEST_SCHEMA: &str = "dpone.policy-bundle.v2";

/// WIT package versions whose components this host can load.
pub const SUPPORTED_WIT_PACKAGES: &[&str] = &["dpone:policy@0.1.0"];

/// Largest accepted `manifest.json`.
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;

/// Largest accepted policy component.
pub const MAX_COMPONENT_BYTES: u64 = 16 * 1024 * 1024;

/// Largest accepted decision table.
pub const MAX_TABLE_BYTES: u64 = 4 * 1024 * 1024;

/// Most decision tables a bundle may ship.
pub const MAX_TABLES: usize = 64;

/// Largest memory budget a policy may declare (the whole 32-bit address space).
pub const MAX_MEMORY_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// The four policy kinds of the `dpone:policy` contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyKind {
    /// ClickHouse cluster publication admission.
    Admission,
    /// Delete mode planning for key reconciliation.
    DeleteMode,
    /// Delete guards for key reconciliation.
    Guard,
    /// Nonproduction composition scope.
    Scope,
}

impl PolicyKind {
    /// Every kind, in manifest (lexicographic) order.
    pub const ALL: [PolicyKind; 4] = [Self::Admission, Self::DeleteMode, Self::Guard, Self::Scope];

    /// The WIT spelling, e.g. `delete-mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admission => "admission",
            Self::DeleteMode => "delete-mode",
            Self::Guard => "guard",
            Self::Scope => "scope",
        }
    }

    /// Parses the WIT spelling.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    /// The component's file name inside a bundle, `<kind>.wasm`.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Admission => "admission.wasm",
            Self::DeleteMode => "delete-mode.wasm",
            Self::Guard => "guard.wasm",
            Self::Scope => "scope.wasm",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The resources a policy declares it needs per decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceBudget {
    /// Wasmtime fuel per decision.
    pub fuel: u64,
    /// Linear memory ceiling in bytes.
    pub memory_bytes: u64,
    /// `max_wasm_stack` in bytes.
    pub wasm_stack_bytes: u64,
}

/// One policy component of the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyEntry {
    /// The policy kind; at most one component per kind.
    pub kind: PolicyKind,
    /// Bundle-relative file name, always `<kind>.wasm`.
    pub file: String,
    /// SHA-256 of the component bytes: the pin the host loads it at.
    pub sha256: Sha256Digest,
    /// Size of the component in bytes.
    pub size: u64,
    /// Declared resource budget.
    pub budget: ResourceBudget,
}

/// One decision table shipped with the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableEntry {
    /// The policy kind the table exercises.
    pub kind: PolicyKind,
    /// Bundle-relative file name, `tables/<stem>.json`.
    pub file: String,
    /// SHA-256 of the table bytes.
    pub sha256: Sha256Digest,
    /// Size of the table in bytes.
    pub size: u64,
}

/// A parsed, validated manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Bundle name: `[a-z0-9][a-z0-9._-]{0,63}`.
    pub name: String,
    /// Bundle version: `[0-9A-Za-z][0-9A-Za-z.+-]{0,63}`.
    pub version: String,
    /// The WIT package the components implement, e.g. `dpone:policy@0.1.0`.
    pub wit_package: String,
    /// Monotonic sequence of this bundle name: a host never activates a lower one again.
    pub sequence: u64,
    /// Start of the signed validity window, unix seconds.
    pub not_before: u64,
    /// End of the signed validity window (exclusive), unix seconds.
    pub expires_at: u64,
    /// Components, sorted by kind.
    pub policies: Vec<PolicyEntry>,
    /// Decision tables, sorted by file.
    pub tables: Vec<TableEntry>,
}

impl Manifest {
    /// Parses `manifest.json` bytes under every rule of the format.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let value = json::parse_strict(Document::Manifest, bytes, MAX_MANIFEST_BYTES, true)?;
        Self::from_value(&value)
    }

    fn from_value(value: &Value) -> Result<Self> {
        let top = Fields::new(
            Document::Manifest,
            "$",
            value,
            &[
                "schema",
                "name",
                "version",
                "wit_package",
                "sequence",
                "not_before",
                "expires_at",
                "policies",
                "tables",
            ],
        )?;
        json::expect_schema(&top, MANIFEST_SCHEMA)?;
        let name = top.str("name")?;
        if !is_name(name) {
            return Err(top.invalid("name", "must match [a-z0-9][a-z0-9._-]{0,63}"));
        }
        let version = top.str("version")?;
        if !is_version(version) {
            return Err(top.invalid("version", "must match [0-9A-Za-z][0-9A-Za-z.+-]{0,63}"));
        }
        let wit_package = top.str("wit_package")?;
        if !SUPPORTED_WIT_PACKAGES.contains(&wit_package) {
            return Err(TrustError::WitVersionUnsupported {
                found: shown(wit_package),
            });
        }

        let sequence = top.u64("sequence")?;
        if sequence == 0 || sequence > MAX_SAFE_INTEGER {
            return Err(top.invalid("sequence", "must be in 1..=2^53-1"));
        }
        let not_before = top.u64("not_before")?;
        let expires_at = top.u64("expires_at")?;
        if expires_at > MAX_SAFE_INTEGER || not_before >= expires_at {
            return Err(top.invalid(
                "expires_at",
                "the validity window needs not_before < expires_at <= 2^53-1",
            ));
        }

        let mut policies = Vec::new();
        for (i, item) in top.array("policies")?.iter().enumerate() {
            policies.push(parse_policy(&format!("$.policies[{i}]"), item)?);
        }
        if policies.is_empty() {
            return Err(top.invalid("policies", "a bundle holds at least one policy"));
        }
        if !policies.windows(2).all(|w| w[0].kind < w[1].kind) {
            return Err(top.invalid(
                "policies",
                "must be sorted by kind with at most one policy per kind",
            ));
        }

        let raw_tables = top.array("tables")?;
        if raw_tables.len() > MAX_TABLES {
            return Err(top.invalid("tables", format!("at most {MAX_TABLES} tables")));
        }
        let mut tables = Vec::new();
        for (i, item) in raw_tables.iter().enumerate() {
            let table = parse_table(&format!("$.tables[{i}]"), item)?;
            if !policies.iter().any(|p| p.kind == table.kind) {
                return Err(top.invalid(
                    "tables",
                    format!(
                        "table `{}` is for kind `{}`, which the bundle does not ship",
                        table.file, table.kind
                    ),
                ));
            }
            tables.push(table);
        }
        if !tables.windows(2).all(|w| w[0].file < w[1].file) {
            return Err(top.invalid("tables", "must be sorted by file, each file once"));
        }

        Ok(Self {
            name: name.to_owned(),
            version: version.to_owned(),
            wit_package: wit_package.to_owned(),
            sequence,
            not_before,
            expires_at,
            policies,
            tables,
        })
    }

    /// The canonical `manifest.json` bytes of this manifest.
    pub fn to_canonical_bytes(&self) -> Result<Vec<u8>> {
        let policies: Vec<Value> = self
            .policies
            .iter()
            .map(|p| {
                json!({
                    "kind": p.kind.as_str(),
                    "file": p.file,
                    "sha256": p.sha256.to_hex(),
                    "size": p.size,
                    "budget": {
                        "fuel": p.budget.fuel,
                        "memory_bytes": p.budget.memory_bytes,
                        "wasm_stack_bytes": p.budget.wasm_stack_bytes,
                    },
                })
            })
            .collect();
        let tables: Vec<Value> = self
            .tables
            .iter()
            .map(|t| {
                json!({
                    "kind": t.kind.as_str(),
                    "file": t.file,
                    "sha256": t.sha256.to_hex(),
                    "size": t.size,
                })
            })
            .collect();
        let value = json!({
            "schema": MANIFEST_SCHEMA,
            "name": self.name,
            "version": self.version,
            "wit_package": self.wit_package,
            "sequence": self.sequence,
            "not_before": self.not_before,
            "expires_at": self.expires_at,
            "policies": policies,
            "tables": tables,
        });
        let bytes = json::canonical_bytes(&value)?;
        // What we write must be what we read: refuse to emit a manifest our parser rejects.
        Self::parse(&bytes)?;
        Ok(bytes)
    }

    /// The policy entry of `kind`, if the bundle ships one.
    pub fn policy(&self, kind: PolicyKind) -> Option<&PolicyEntry> {
        self.policies.iter().find(|p| p.kind == kind)
    }

    /// Every file name the manifest lists (components and tables).
    pub fn listed_files(&self) -> impl Iterator<Item = (&str, &Sha256Digest, u64)> {
        self.policies
            .iter()
            .map(|p| (p.file.as_str(), &p.sha256, p.size))
            .chain(
                self.tables
                    .iter()
                    .map(|t| (t.file.as_str(), &t.sha256, t.size)),
            )
    }
}

fn parse_digest(fields: &Fields<'_>, key: &str) -> Result<Sha256Digest> {
    Sha256Digest::parse_hex(fields.str(key)?)
        .ok_or_else(|| fields.invalid(key, "expected 64 lowercase hexadecimal characters"))
}

fn parse_kind(fields: &Fields<'_>) -> Result<PolicyKind> {
    let text = fields.str("kind")?;
    PolicyKind::parse(text).ok_or_else(|| {
        fields.invalid(
            "kind",
            format!(
                "\"{}\" is not admission, guard, delete-mode or scope",
                shown(text)
            ),
        )
    })
}

fn parse_policy(path: &str, value: &Value) -> Result<PolicyEntry> {
    let fields = Fields::new(
        Document::Manifest,
        path,
        value,
        &["kind", "file", "sha256", "size", "budget"],
    )?;
    let kind = parse_kind(&fields)?;
    let file = fields.str("file")?;
    check_file_name(file)?;
    if file != kind.file_name() {
        return Err(fields.invalid(
            "file",
            format!("a {kind} component is `{}`", kind.file_name()),
        ));
    }
    let sha256 = parse_digest(&fields, "sha256")?;
    let size = fields.u64("size")?;
    if size == 0 || size > MAX_COMPONENT_BYTES {
        return Err(fields.invalid("size", format!("must be within 1..={MAX_COMPONENT_BYTES}")));
    }
    let budget = fields.object("budget", &["fuel", "memory_bytes", "wasm_stack_bytes"])?;
    let fuel = budget.u64("fuel")?;
    let memory_bytes = budget.u64("memory_bytes")?;
    let wasm_stack_bytes = budget.u64("wasm_stack_bytes")?;
    if fuel == 0 {
        return Err(budget.invalid("fuel", "must be positive"));
    }
    if memory_bytes == 0 || memory_bytes > MAX_MEMORY_BYTES {
        return Err(budget.invalid(
            "memory_bytes",
            format!("must be within 1..={MAX_MEMORY_BYTES}"),
        ));
    }
    if wasm_stack_bytes == 0 || wasm_stack_bytes > MAX_SAFE_INTEGER {
        return Err(budget.invalid("wasm_stack_bytes", "must be positive"));
    }
    Ok(PolicyEntry {
        kind,
        file: file.to_owned(),
        sha256,
        size,
        budget: ResourceBudget {
            fuel,
            memory_bytes,
            wasm_stack_bytes,
        },
    })
}

fn parse_table(path: &str, value: &Value) -> Result<TableEntry> {
    let fields = Fields::new(
        Document::Manifest,
        path,
        value,
        &["kind", "file", "sha256", "size"],
    )?;
    let kind = parse_kind(&fields)?;
    let file = fields.str("file")?;
    check_file_name(file)?;
    if !file.starts_with("tables/") {
        return Err(fields.invalid("file", "a decision table is `tables/<stem>.json`"));
    }
    let sha256 = parse_digest(&fields, "sha256")?;
    let size = fields.u64("size")?;
    if size > MAX_TABLE_BYTES {
        return Err(fields.invalid("size", format!("must be at most {MAX_TABLE_BYTES}")));
    }
    Ok(TableEntry {
        kind,
        file: file.to_owned(),
        sha256,
        size,
    })
}

/// `[a-z0-9][a-z0-9._-]{0,63}` without `..`.
pub fn is_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes.iter().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
        && !text.contains("..")
}

fn is_version(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
}

/// What a bundle file name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRole {
    /// `manifest.json`.
    Manifest,
    /// `signatures.json`.
    Signatures,
    /// `<kind>.wasm`.
    Component(PolicyKind),
    /// `tables/<stem>.json`.
    Table,
    /// `attestations/<stem>.sigstore.json`: a GitHub attestation of the manifest.
    Attestation,
    /// `attestations/<sha256>.trusted_root.json`: a Sigstore trusted root named by its digest.
    TrustedRoot,
}

impl FileRole {
    /// The size limit of a file in this role.
    pub fn limit(self) -> u64 {
        match self {
            Self::Manifest => MAX_MANIFEST_BYTES as u64,
            Self::Signatures => crate::signature::MAX_SIGNATURES_BYTES as u64,
            Self::Component(_) => MAX_COMPONENT_BYTES,
            Self::Table => MAX_TABLE_BYTES,
            Self::Attestation => crate::bundle_attestation::MAX_ATTESTATION_BYTES,
            Self::TrustedRoot => crate::trusted_root::MAX_TRUSTED_ROOT_BYTES,
        }
    }
}

/// Classifies a bundle-relative file name; `None` if it is not a permitted name. Permitted are
/// exactly `manifest.json`, `signatures.json`, `<kind>.wasm`, `tables/<stem>.json` and
/// `attestations/<stem>.sigstore.json` with `<stem>` matching [`is_name`], and
/// `attestations/<64 lowercase hex>.trusted_root.json`. Everything else (absolute paths, `..`,
/// backslashes, other directories, hidden files) is not.
pub fn file_role(name: &str) -> Option<FileRole> {
    match name {
        "manifest.json" => return Some(FileRole::Manifest),
        "signatures.json" => return Some(FileRole::Signatures),
        _ => {}
    }
    if let Some(kind) = PolicyKind::ALL.into_iter().find(|k| k.file_name() == name) {
        return Some(FileRole::Component(kind));
    }
    if let Some(rest) = name.strip_prefix("attestations/") {
        if let Some(digest) = rest.strip_suffix(crate::bundle_attestation::TRUSTED_ROOT_SUFFIX) {
            return Sha256Digest::parse_hex(digest).map(|_| FileRole::TrustedRoot);
        }
        let stem = rest.strip_suffix(crate::bundle_attestation::ATTESTATION_SUFFIX)?;
        return is_name(stem).then_some(FileRole::Attestation);
    }
    let stem = name.strip_prefix("tables/")?.strip_suffix(".json")?;
    is_name(stem).then_some(FileRole::Table)
}

/// Refuses a manifest file name that is not a component or table name.
fn check_file_name(name: &str) -> Result<()> {
    match file_role(name) {
        Some(FileRole::Component(_) | FileRole::Table) => Ok(()),
        _ => Err(TrustError::PathInvalid { name: shown(name) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_roles() {
        assert_eq!(
            file_role("guard.wasm"),
            Some(FileRole::Component(PolicyKind::Guard))
        );
        assert_eq!(file_role("tables/guard-basic.json"), Some(FileRole::Table));
        assert_eq!(
            file_role("attestations/ci.sigstore.json"),
            Some(FileRole::Attestation)
        );
        let root = format!("attestations/{}.trusted_root.json", "ab".repeat(32));
        assert_eq!(file_role(&root), Some(FileRole::TrustedRoot));
        for bad in [
            "attestations/ci.json",
            "attestations/x.trusted_root.json",
            "attestations/../ci.sigstore.json",
            "attestations/a/ci.sigstore.json",
            "attestations/.sigstore.json",
            "attestations/CI.sigstore.json",
            "../guard.wasm",
            "/guard.wasm",
            "tables/../guard.wasm",
            "tables/a/b.json",
            "tables/..json",
            "tables\\x.json",
            "x.wasm",
            ".hidden",
            "tables/.json",
            "Guard.wasm",
            "",
        ] {
            assert_eq!(file_role(bad), None, "{bad}");
        }
    }

    #[test]
    fn kinds_sort_as_their_names() {
        let mut names: Vec<_> = PolicyKind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, PolicyKind::ALL.map(PolicyKind::as_str));
    }
}
