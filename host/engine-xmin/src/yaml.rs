//! Strict YAML: one document, ASCII only, no anchors, aliases, merge keys or tags, no duplicate
//! keys, no scalars whose meaning differs between YAML 1.1 and 1.2.
//!
//! The loader (`dpone-strict-yaml`, shared with the ClickHouse route) walks the event stream of `yaml-rust2` itself (its document loader silently keeps
//! the last of two equal keys) and builds a `serde_json::Value`; typed contracts are then read
//! from that value with `deny_unknown_fields`. Plain scalars resolve as follows:
//!
//! - `null`, `~` and an empty value are null; `true` and `false` are booleans;
//! - canonical decimal integers (`0`, `42`, `-7`) are numbers;
//! - canonical decimals (`0.05`) stay *strings* holding their exact text, so ratios are never
//!   rounded through binary floating point;
//! - everything that YAML 1.1 reads differently is refused with
//!   [`ErrorCode::YamlAmbiguousScalar`]: `yes`/`no`/`on`/`off`/`y`/`n` in any case, `True`,
//!   `NULL`, leading zeros, `+1`, `1_000`, `0x1f`, `0o17`, `1e3`, `.5`, `.inf`, `.nan`, and
//!   sexagesimal `1:30`.
//!
//! Quoted scalars are always strings. This module maps the loader's refusals onto the
//! `DPONE_XMIN_YAML_*` codes.

use crate::error::{ErrorCode, Result, XminError};
use dpone_strict_yaml::{Error, ErrorKind, PathSegment};
use serde_json::Value;

pub use dpone_strict_yaml::{MAX_DEPTH, MAX_DOCUMENT_BYTES};

/// Parses one strict YAML document into a JSON value.
pub fn parse_strict(text: &str) -> Result<Value> {
    dpone_strict_yaml::parse(text).map_err(to_xmin)
}

fn to_xmin(e: Error) -> XminError {
    let code = match e.kind() {
        ErrorKind::Syntax | ErrorKind::UnexpectedStructure => ErrorCode::YamlSyntax,
        ErrorKind::DuplicateKey => ErrorCode::YamlDuplicateKey,
        ErrorKind::Alias | ErrorKind::Anchor | ErrorKind::MergeKey => ErrorCode::YamlAlias,
        ErrorKind::Tag => ErrorCode::YamlTag,
        ErrorKind::NonAscii => ErrorCode::YamlNonAscii,
        ErrorKind::AmbiguousScalar => ErrorCode::YamlAmbiguousScalar,
        ErrorKind::NoDocument | ErrorKind::SeveralDocuments => ErrorCode::YamlDocumentCount,
        ErrorKind::NonScalarKey | ErrorKind::DecimalKey | ErrorKind::NonStringKey => {
            ErrorCode::YamlNonStringKey
        }
        ErrorKind::DocumentTooLarge | ErrorKind::TooDeep | ErrorKind::IntegerOutOfRange => {
            ErrorCode::YamlLimit
        }
    };
    // This route's messages keep the parser's description and name the repeated key.
    let message = match (e.kind(), e.parser_message(), e.path().last(), e.line()) {
        (ErrorKind::Syntax, Some(info), _, _) => format!("syntax error: {info}"),
        (ErrorKind::DuplicateKey, _, Some(PathSegment::Key(key)), Some(line)) => {
            format!(
                "duplicate key {} on line {line}",
                dpone_boundary::text::excerpt(key)
            )
        }
        _ => e.to_string(),
    };
    XminError::new(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> ErrorCode {
        parse_strict(text).unwrap_err().code()
    }

    #[test]
    fn plain_document() {
        let v = parse_strict("a: 1\nb: [x, 'y']\nc: {d: 0.05, e: true, f: null, g: -3}\n").unwrap();
        assert_eq!(v["a"], 1);
        assert_eq!(v["b"][1], "y");
        assert_eq!(v["c"]["d"], "0.05");
        assert_eq!(v["c"]["e"], true);
        assert!(v["c"]["f"].is_null());
        assert_eq!(v["c"]["g"], -3);
    }

    #[test]
    fn refusals_have_distinct_codes() {
        assert_eq!(code("a: 1\na: 2\n"), ErrorCode::YamlDuplicateKey);
        assert_eq!(code("a: {b: 1, b: 1}\n"), ErrorCode::YamlDuplicateKey);
        assert_eq!(code("a: &x 1\nb: *x\n"), ErrorCode::YamlAlias);
        assert_eq!(code("a: &x {c: 1}\nb:\n  <<: *x\n"), ErrorCode::YamlAlias);
        assert_eq!(code("a: !!str 1\n"), ErrorCode::YamlTag);
        assert_eq!(code("a: caf\u{e9}\n"), ErrorCode::YamlNonAscii);
        assert_eq!(code("a: yes\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: Off\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: True\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 007\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 0x1f\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1e3\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1_000\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: .inf\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1:30\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1\n---\nb: 2\n"), ErrorCode::YamlDocumentCount);
        assert_eq!(code(""), ErrorCode::YamlDocumentCount);
        assert_eq!(code("[a]: 1\n"), ErrorCode::YamlNonStringKey);
        assert_eq!(code("1: a\n"), ErrorCode::YamlNonStringKey);
        assert_eq!(code("a: [1\n"), ErrorCode::YamlSyntax);
    }

    #[test]
    fn quoted_scalars_stay_strings() {
        let v = parse_strict("a: 'yes'\nb: \"007\"\n").unwrap();
        assert_eq!(v["a"], "yes");
        assert_eq!(v["b"], "007");
    }

    #[test]
    fn depth_limit() {
        let deep = "[".repeat(40) + &"]".repeat(40);
        assert_eq!(code(&deep), ErrorCode::YamlLimit);
    }
}
