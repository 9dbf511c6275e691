//! Typed scalar fields: each newtype can only hold a value of its closed shape, and each shape
//! has its own refusal code. Every string of a document is one of these (there is no free text).

use crate::codes;
use crate::error::{NpError, Result};
use sha2::{Digest as _, Sha256};
use std::fmt;

/// The longest string any field may hold, in bytes.
pub const MAX_TEXT_BYTES: usize = 256;

fn refuse(code: &'static str, path: &str, what: &str) -> NpError {
    NpError::new(code, format!("{path}: {what}"))
}

/// Printable ASCII, 1..=256 bytes: the precondition of every string shape.
fn printable(path: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.len() > MAX_TEXT_BYTES || !s.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(refuse(
            codes::TEXT_INVALID,
            path,
            "expected 1 to 256 printable ASCII characters without spaces",
        ));
    }
    Ok(())
}

fn lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn ident_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
}

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The value as written in the document.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_newtype!(
    /// A lowercase RFC 9562 UUID (`8-4-4-4-12` hex), never the nil UUID.
    Uuid
);

impl Uuid {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        let parts: Vec<&str> = s.split('-').collect();
        let lens = [8, 4, 4, 4, 12];
        let shaped = parts.len() == 5 && parts.iter().zip(lens).all(|(p, n)| lower_hex(p, n));
        if !shaped || s.bytes().all(|b| b == b'0' || b == b'-') {
            return Err(refuse(
                codes::UUID_INVALID,
                path,
                "expected a lowercase non-nil UUID",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

string_newtype!(
    /// A git commit: 40 lowercase hexadecimal digits.
    Commit
);

impl Commit {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        if !lower_hex(s, 40) {
            return Err(refuse(
                codes::COMMIT_INVALID,
                path,
                "expected 40 lowercase hex digits",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

string_newtype!(
    /// A sha256 digest, always written `sha256:<64 lowercase hex>`.
    Digest
);

impl Digest {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        match s.strip_prefix("sha256:") {
            Some(hex) if lower_hex(hex, 64) => Ok(Self(s.to_owned())),
            _ => Err(refuse(
                codes::DIGEST_INVALID,
                path,
                "expected sha256:<64 lowercase hex>",
            )),
        }
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }
}

string_newtype!(
    /// An identifier: `[a-z0-9][a-z0-9._-]{0,127}` (participants, workloads, packs, fixtures,
    /// generators, intents, toolchains, evidence names).
    Ident
);

impl Ident {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        let first = s.as_bytes()[0];
        if s.len() > 128
            || !(first.is_ascii_lowercase() || first.is_ascii_digit())
            || !s.bytes().all(ident_byte)
        {
            return Err(refuse(
                codes::IDENTIFIER_INVALID,
                path,
                "expected [a-z0-9][a-z0-9._-]{0,127}",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

fn github_owner(s: &str) -> bool {
    (1..=39).contains(&s.len())
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn github_name(s: &str) -> bool {
    (1..=100).contains(&s.len()) && s != "." && s != ".." && s.bytes().all(ident_byte)
}

string_newtype!(
    /// A canonical GitHub repository: lowercase `owner/name`.
    Repository
);

impl Repository {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        let ok = matches!(s.split_once('/'), Some((o, n)) if github_owner(o) && github_name(n));
        if !ok {
            return Err(refuse(
                codes::REPOSITORY_INVALID,
                path,
                "expected a lowercase GitHub owner/name",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

string_newtype!(
    /// A container image pinned by digest: `registry/path@sha256:<64 hex>`.
    Image
);

impl Image {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        let ok = match s.split_once("@sha256:") {
            Some((name, hex)) => {
                lower_hex(hex, 64)
                    && name.contains('/')
                    && name.split('/').all(|part| {
                        !part.is_empty()
                            && part
                                .bytes()
                                .all(|b| ident_byte(b) || b == b':' && !part.starts_with(':'))
                    })
            }
            None => false,
        };
        if !ok {
            return Err(refuse(
                codes::IMAGE_INVALID,
                path,
                "expected registry/path@sha256:<64 lowercase hex>",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

string_newtype!(
    /// A relation scope: two (`database.table`) or three (`database.schema.table`) lowercase
    /// SQL identifiers `[a-z_][a-z0-9_]{0,62}` joined by dots.
    Relation
);

impl Relation {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        let parts: Vec<&str> = s.split('.').collect();
        let ok = (2..=3).contains(&parts.len())
            && parts.iter().all(|p| {
                (1..=63).contains(&p.len())
                    && !p.as_bytes()[0].is_ascii_digit()
                    && p.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            });
        if !ok {
            return Err(refuse(
                codes::RELATION_INVALID,
                path,
                "expected database[.schema].table in lowercase SQL identifiers",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

string_newtype!(
    /// A reusable signing workflow: `owner/name/.github/workflows/<file>.yml` (or `.yaml`).
    SignerWorkflow
);

impl SignerWorkflow {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        let mut it = s.splitn(3, '/');
        let (owner, name, rest) = (it.next(), it.next(), it.next());
        let ok = match (owner, name, rest) {
            (Some(owner), Some(name), Some(rest)) => {
                github_owner(owner)
                    && github_name(name)
                    && rest.strip_prefix(".github/workflows/").is_some_and(|file| {
                        file.strip_suffix(".yml")
                            .or_else(|| file.strip_suffix(".yaml"))
                            .is_some_and(|stem| {
                                !stem.is_empty()
                                    && stem.bytes().all(|b| {
                                        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
                                    })
                            })
                    })
            }
            _ => false,
        };
        if !ok {
            return Err(refuse(
                codes::SIGNER_WORKFLOW_INVALID,
                path,
                "expected owner/name/.github/workflows/<file>.yml",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

string_newtype!(
    /// An attestation predicate type: an `https://` URI of printable ASCII without query or
    /// fragment.
    PredicateType
);

impl PredicateType {
    /// Parses the field at `path`.
    pub fn parse(path: &str, s: &str) -> Result<Self> {
        printable(path, s)?;
        let ok = s.strip_prefix("https://").is_some_and(|rest| {
            rest.contains('/')
                && !rest.starts_with('/')
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/'))
        });
        if !ok {
            return Err(refuse(
                codes::PREDICATE_TYPE_INVALID,
                path,
                "expected an https:// URI without query or fragment",
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

/// Refuses `s` unless it is exactly `expected` (closed single-value fields).
pub fn exact(path: &str, s: &str, expected: &str, code: &'static str) -> Result<()> {
    if s != expected {
        return Err(refuse(code, path, &format!("expected \"{expected}\"")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c<T>(r: Result<T>) -> Option<&'static str> {
        r.err().map(|e| e.code())
    }

    #[test]
    fn shapes_accept_their_form_and_refuse_with_their_code() {
        assert!(Uuid::parse("$", "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab").is_ok());
        assert_eq!(
            c(Uuid::parse("$", "6F1C2D3E-4A5B-4C6D-8E7F-0123456789AB")),
            Some(codes::UUID_INVALID)
        );
        assert_eq!(
            c(Uuid::parse("$", "00000000-0000-0000-0000-000000000000")),
            Some(codes::UUID_INVALID)
        );
        assert_eq!(c(Uuid::parse("$", "")), Some(codes::TEXT_INVALID));
        assert!(Commit::parse("$", &"a".repeat(40)).is_ok());
        assert_eq!(
            c(Commit::parse("$", &"a".repeat(39))),
            Some(codes::COMMIT_INVALID)
        );
        assert_eq!(
            c(Commit::parse("$", &"g".repeat(40))),
            Some(codes::COMMIT_INVALID)
        );
        assert!(Digest::parse("$", &format!("sha256:{}", "0".repeat(64))).is_ok());
        assert_eq!(
            c(Digest::parse("$", &"0".repeat(64))),
            Some(codes::DIGEST_INVALID)
        );
        assert_eq!(
            c(Digest::parse("$", &format!("sha512:{}", "0".repeat(64)))),
            Some(codes::DIGEST_INVALID)
        );
        assert!(Ident::parse("$", "orders-export.v1").is_ok());
        assert_eq!(
            c(Ident::parse("$", "Orders")),
            Some(codes::IDENTIFIER_INVALID)
        );
        assert_eq!(c(Ident::parse("$", "a b")), Some(codes::TEXT_INVALID));
        assert!(Repository::parse("$", "acme/dpone-campaigns").is_ok());
        assert_eq!(
            c(Repository::parse("$", "Acme/dpone")),
            Some(codes::REPOSITORY_INVALID)
        );
        assert_eq!(
            c(Repository::parse("$", "acme/x/y")),
            Some(codes::REPOSITORY_INVALID)
        );
        assert!(Image::parse("$", &format!("ghcr.io/acme/dbt@sha256:{}", "1".repeat(64))).is_ok());
        assert_eq!(
            c(Image::parse("$", "ghcr.io/acme/dbt:latest")),
            Some(codes::IMAGE_INVALID)
        );
        assert!(Relation::parse("$", "synth_pg.public.orders").is_ok());
        assert!(Relation::parse("$", "synth_ch.orders").is_ok());
        assert_eq!(
            c(Relation::parse("$", "orders")),
            Some(codes::RELATION_INVALID)
        );
        assert_eq!(
            c(Relation::parse("$", "a.b.c.d")),
            Some(codes::RELATION_INVALID)
        );
        assert!(SignerWorkflow::parse("$", "acme/signing/.github/workflows/np-sign.yml").is_ok());
        assert_eq!(
            c(SignerWorkflow::parse("$", "acme/signing/np-sign.yml")),
            Some(codes::SIGNER_WORKFLOW_INVALID)
        );
        assert!(PredicateType::parse("$", "https://dpone.dev/attestation/np/v1").is_ok());
        assert_eq!(
            c(PredicateType::parse("$", "http://dpone.dev/x")),
            Some(codes::PREDICATE_TYPE_INVALID)
        );
    }
}
