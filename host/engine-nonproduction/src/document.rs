//! The common reading and writing path of every document: strict JSON, the exact `schema`,
//! RFC 8785 canonical bytes, the typed reading, and a byte-exact re-encoding check.

use crate::error::{NpError, Result};
use crate::fields::Digest;
use crate::{codes, json};
use serde_json::Value;

/// One strict canonical document type.
pub trait Document: Sized {
    /// The exact `schema` string the reader reads (and no other).
    const SCHEMA: &'static str;

    /// Reads the typed document from its already strict, canonical value.
    fn from_value(value: &Value) -> Result<Self>;

    /// The document value (with `schema`).
    fn to_value(&self) -> Value;

    /// Parses untrusted bytes: size, syntax, depth, duplicate keys and numbers
    /// ([`json::parse_strict`]), then the `schema`, then the canonical encoding, then every field;
    /// finally the typed document must re-encode to exactly `bytes`.
    fn parse(bytes: &[u8]) -> Result<Self> {
        let value = json::parse_strict(bytes)?;
        json::expect_schema(&value, Self::SCHEMA)?;
        json::expect_canonical(&value, bytes)?;
        let doc = Self::from_value(&value)?;
        if doc.canonical_bytes() != bytes {
            return Err(NpError::new(
                codes::NON_CANONICAL,
                "$: the document does not re-encode to its own bytes",
            ));
        }
        Ok(doc)
    }

    /// The RFC 8785 canonical bytes: what is signed, stored and digested.
    fn canonical_bytes(&self) -> Vec<u8> {
        json::canonical_bytes(&self.to_value())
    }

    /// `sha256:` of [`Document::canonical_bytes`].
    fn digest(&self) -> Digest {
        Digest::of(&self.canonical_bytes())
    }
}

/// Inserts `schema` into a document map and wraps it.
pub(crate) fn finish(schema: &str, mut map: serde_json::Map<String, Value>) -> Value {
    map.insert("schema".into(), Value::String(schema.to_owned()));
    Value::Object(map)
}
