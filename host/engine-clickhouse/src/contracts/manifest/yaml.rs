//! Strict YAML for the manifest and the connection registry: one document, ASCII only, no
//! anchors, aliases, merge keys or tags, no duplicate keys, and no plain scalar whose meaning
//! differs between YAML 1.1 and 1.2.
//!
//! The loader is `dpone-strict-yaml`, shared with the XMin route: the event stream of `yaml-rust2`
//! is walked directly (its document loader silently keeps the last of two equal keys) into a
//! `serde_json::Value`. Plain scalars resolve as follows:
//!
//! - `null`, `~` and an empty value are null; `true` and `false` are booleans;
//! - canonical decimal integers (`0`, `42`, `-7`) are numbers;
//! - canonical decimals (`0.05`) stay strings holding their exact text;
//! - everything YAML 1.1 reads differently (`yes`/`no`/`on`/`off`/`y`/`n` in any case, `True`,
//!   `NULL`, leading zeros, `+1`, `1_000`, `0x1f`, `0o17`, `1e3`, `.5`, `.inf`, `.nan`,
//!   sexagesimal `1:30`) is refused as ambiguous.
//!
//! Quoted scalars are always strings. Messages name line numbers, never scalar values. This
//! module maps the loader's refusals onto the `YAML_*` kinds of [`ErrorKind`].

use dpone_strict_yaml::ErrorKind as Refusal;
use serde_json::Value;

use super::{Document, ErrorKind, ManifestError};

pub use dpone_strict_yaml::{MAX_DEPTH, MAX_DOCUMENT_BYTES};

/// Parses one strict YAML document into a JSON value.
pub fn parse_strict(text: &str, doc: Document) -> Result<Value, ManifestError> {
    dpone_strict_yaml::parse(text).map_err(|e| {
        let kind = match e.kind() {
            Refusal::Syntax | Refusal::UnexpectedStructure => ErrorKind::YamlSyntax,
            Refusal::DuplicateKey => ErrorKind::YamlDuplicateKey,
            Refusal::Alias | Refusal::Anchor | Refusal::MergeKey => ErrorKind::YamlAlias,
            Refusal::Tag => ErrorKind::YamlTag,
            Refusal::NonAscii => ErrorKind::YamlNonAscii,
            Refusal::AmbiguousScalar => ErrorKind::YamlAmbiguousScalar,
            Refusal::NoDocument | Refusal::SeveralDocuments => ErrorKind::YamlDocumentCount,
            Refusal::NonScalarKey | Refusal::DecimalKey | Refusal::NonStringKey => {
                ErrorKind::YamlNonStringKey
            }
            Refusal::DocumentTooLarge | Refusal::TooDeep | Refusal::IntegerOutOfRange => {
                ErrorKind::YamlLimit
            }
        };
        ManifestError::new(doc, kind, e.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> ErrorKind {
        match parse_strict(text, Document::Manifest) {
            Err(e) => e.kind(),
            Ok(v) => panic!("accepted: {v}"),
        }
    }

    #[test]
    fn a_plain_document_resolves_scalars_strictly() {
        let v = parse_strict(
            "a: 1\nb: [x, 'y']\nc: {d: 0.05, e: true, f: null, g: -3}\n",
            Document::Manifest,
        )
        .expect("parses");
        assert_eq!(v["a"], 1);
        assert_eq!(v["b"][1], "y");
        assert_eq!(v["c"]["d"], "0.05");
        assert_eq!(v["c"]["e"], true);
        assert!(v["c"]["f"].is_null());
        assert_eq!(v["c"]["g"], -3);
    }

    #[test]
    fn every_refusal_has_its_kind() {
        assert_eq!(kind("a: 1\na: 2\n"), ErrorKind::YamlDuplicateKey);
        assert_eq!(kind("a: {b: 1, b: 1}\n"), ErrorKind::YamlDuplicateKey);
        assert_eq!(kind("a: &x 1\nb: *x\n"), ErrorKind::YamlAlias);
        assert_eq!(kind("a: &x {c: 1}\nb:\n  <<: *x\n"), ErrorKind::YamlAlias);
        assert_eq!(kind("a: !!str 1\n"), ErrorKind::YamlTag);
        assert_eq!(kind("a: caf\u{e9}\n"), ErrorKind::YamlNonAscii);
        assert_eq!(kind("a: yes\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 007\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 1e3\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 1:30\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 1\n---\nb: 2\n"), ErrorKind::YamlDocumentCount);
        assert_eq!(kind(""), ErrorKind::YamlDocumentCount);
        assert_eq!(kind("[a]: 1\n"), ErrorKind::YamlNonStringKey);
        assert_eq!(kind("1: a\n"), ErrorKind::YamlNonStringKey);
        assert_eq!(kind("a: [1\n"), ErrorKind::YamlSyntax);
        assert_eq!(kind("a: 99999999999999999999\n"), ErrorKind::YamlLimit);
        let deep = "[".repeat(40) + &"]".repeat(40);
        assert_eq!(kind(&deep), ErrorKind::YamlLimit);
    }

    #[test]
    fn messages_name_lines_not_values() {
        let e = parse_strict(
            "a: 1\nsecret_value: 2\nsecret_value: 3\n",
            Document::Registry,
        )
        .expect_err("duplicate");
        assert!(!e.to_string().contains("secret_value"), "{e}");
        assert!(e.to_string().contains("line"), "{e}");
    }
}
