//! The CLI's input boundary: every file a user names is read here, through the one bounded
//! reader of `dpone-boundary`, with the ceiling of its kind (see `docs/cli.md`, "File inputs").
//! Anything that is not a regular file (after resolving symlinks) is refused before it is
//! opened for reading, so a FIFO never blocks and `/dev/zero` is never read.

use crate::exit::Failure;
use dpone_boundary::read::{ReadError, open_regular, read_regular};
use std::path::Path;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// What a file is, which fixes its ceiling and how errors name it (never by its path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// `--manifest` (XMin or ClickHouse): the strict YAML limit.
    Manifest,
    /// `--connections`: the strict YAML limit.
    ConnectionRegistry,
    /// `authority create --document`.
    AuthorityDocument,
    /// Decision facts (`policy eval --input`, `policy bench --input`, `bundle activate --input`).
    Facts,
    /// A decision table (`policy test`, `bundle create --table`): the bundle's table limit.
    DecisionTable,
    /// `policy lock --lock`.
    Lock,
    /// A WebAssembly component: the bundle's component limit.
    Component,
    /// A trust policy (`--trust-policy`, `bundle verify --policy`, …).
    TrustPolicy,
    /// A bundle archive (`--bundle FILE`, `bundle unpack`).
    BundleArchive,
    /// A Sigstore bundle (`verify-bundle --bundle`).
    SigstoreBundle,
    /// A PEM public key (`verify-bundle --key`).
    PublicKey,
    /// A nonproduction authority document (`campaign verify`, `campaign inspect`).
    NonproductionDocument,
}

impl InputKind {
    /// Every kind, in documentation order.
    #[cfg(test)]
    pub const ALL: [InputKind; 12] = [
        Self::Manifest,
        Self::ConnectionRegistry,
        Self::AuthorityDocument,
        Self::Facts,
        Self::DecisionTable,
        Self::Lock,
        Self::Component,
        Self::TrustPolicy,
        Self::BundleArchive,
        Self::SigstoreBundle,
        Self::PublicKey,
        Self::NonproductionDocument,
    ];

    /// How errors name the file.
    pub fn label(self) -> &'static str {
        match self {
            Self::Manifest => "manifest",
            Self::ConnectionRegistry => "connection registry",
            Self::AuthorityDocument => "authority document",
            Self::Facts => "facts input",
            Self::DecisionTable => "decision table",
            Self::Lock => "lock file",
            Self::Component => "component",
            Self::TrustPolicy => "trust policy",
            Self::BundleArchive => "bundle archive",
            Self::SigstoreBundle => "Sigstore bundle",
            Self::PublicKey => "public key",
            Self::NonproductionDocument => "nonproduction document",
        }
    }

    /// The largest file of this kind that is read, in bytes.
    pub fn ceiling(self) -> u64 {
        match self {
            Self::Manifest | Self::ConnectionRegistry => dpone_strict_yaml_limit(),
            Self::AuthorityDocument => 64 * KIB,
            Self::Facts | Self::Lock => MIB,
            Self::DecisionTable => dpone_trust::manifest::MAX_TABLE_BYTES,
            Self::Component => dpone_trust::manifest::MAX_COMPONENT_BYTES,
            Self::TrustPolicy => dpone_trust::policy::MAX_TRUST_POLICY_BYTES as u64,
            Self::BundleArchive => dpone_trust::archive::MAX_ARCHIVE_BYTES,
            Self::SigstoreBundle => dpone_trust::sigstore::MAX_SIGSTORE_BUNDLE_BYTES as u64,
            Self::PublicKey => 16 * KIB,
            Self::NonproductionDocument => {
                dpone_engine_nonproduction::json::MAX_DOCUMENT_BYTES as u64
            }
        }
    }
}

/// The strict YAML document limit shared by manifests and registries of both routes.
fn dpone_strict_yaml_limit() -> u64 {
    dpone_engine_xmin::yaml::MAX_DOCUMENT_BYTES as u64
}

fn failure(what: &str, err: &ReadError) -> Failure {
    let code = match err {
        ReadError::NotRegular => "DPONE_CLI_INPUT_NOT_REGULAR_FILE",
        ReadError::TooLarge { .. } => "DPONE_CLI_INPUT_TOO_LARGE",
        ReadError::Io(_) => "DPONE_CLI_INPUT_UNREADABLE",
    };
    let message = match err {
        ReadError::TooLarge { limit } => format!("the {what} is larger than {limit} bytes"),
        other => format!("cannot read the {what}: {}", other.describe()),
    };
    Failure::bad_input(code, message)
}

/// Reads a file of `kind` (bounded, regular files only).
pub fn read(path: &Path, kind: InputKind) -> Result<Vec<u8>, Failure> {
    read_regular(path, kind.ceiling()).map_err(|err| failure(kind.label(), &err))
}

/// Reads a file of `kind` as UTF-8 text.
pub fn read_text(path: &Path, kind: InputKind) -> Result<String, Failure> {
    String::from_utf8(read(path, kind)?).map_err(|_| {
        Failure::bad_input(
            "DPONE_CLI_INPUT_MALFORMED",
            format!("the {} is not UTF-8", kind.label()),
        )
    })
}

/// Opens an artifact (no ceiling: it is hashed as a stream by the caller, never held whole):
/// a regular file, refused before reading otherwise.
pub fn open_artifact(path: &Path) -> Result<std::fs::File, Failure> {
    open_regular(path).map(|(file, _)| file).map_err(|err| {
        let mut f = failure("artifact", &err);
        if matches!(err, ReadError::Io(_)) {
            f.code = "DPONE_SIGSTORE_ARTIFACT_INVALID".to_owned();
        }
        f
    })
}

/// Checks, without reading it, that a file another crate opens by path (a pinned CA bundle
/// handed to a driver) is a regular file: refused before use otherwise, never blocking.
pub fn check_regular(path: &Path, label: &str) -> Result<(), Failure> {
    open_regular(path)
        .map(|_| ())
        .map_err(|err| failure(label, &err))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind's ceiling is the one `docs/cli.md` documents ("File inputs").
    #[test]
    fn ceilings_match_the_documentation() {
        let docs = include_str!("../../../docs/cli.md");
        for kind in InputKind::ALL {
            let row = docs
                .lines()
                .find(|l| l.starts_with(&format!("| {} |", kind.label())))
                .unwrap_or_else(|| panic!("docs/cli.md has no File inputs row for {kind:?}"));
            let documented = row
                .split('|')
                .nth(3)
                .map(|c| c.trim().replace(['`', ' '], ""))
                .unwrap_or_default();
            assert_eq!(documented, kind.ceiling().to_string(), "{kind:?}: {row}");
        }
    }
}
