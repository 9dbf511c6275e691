//! Shared helpers of the contracts' tests: the frozen fixtures and mutations of them.
#![allow(dead_code)]

use dpone_engine_nonproduction::Document;
use serde_json::Value;
use std::path::PathBuf;

/// The fixture directory.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nonproduction")
}

/// The bytes of fixture `name`.
pub fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// The value of fixture `name`.
pub fn value(name: &str) -> Value {
    serde_json::from_slice(&bytes(name)).expect("fixture is JSON")
}

/// RFC 8785 bytes of `v`.
pub fn canon(v: &Value) -> Vec<u8> {
    serde_json_canonicalizer::to_vec(v).expect("canonical")
}

/// The canonical bytes of fixture `name` after `edit`.
pub fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v = value(name);
    edit(&mut v);
    canon(&v)
}

/// The parsed fixture `name`.
pub fn doc<T: Document>(name: &str) -> T {
    T::parse(&bytes(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// The code `T::parse` refuses `bytes` with (panics if it accepts them).
pub fn refusal<T: Document>(bytes: &[u8]) -> &'static str {
    match T::parse(bytes) {
        Ok(_) => panic!("accepted: {}", String::from_utf8_lossy(bytes)),
        Err(e) => e.code(),
    }
}

/// The fixtures and the schema each holds.
pub const FIXTURES: &[&str] = &[
    "policy.json",
    "authority-qualification.json",
    "authority-execution.json",
    "route-qualification.json",
    "producer-wire.json",
    "release-set.json",
    "composition.json",
    "activation-request.json",
];

/// Parses `bytes` with the reader of fixture `name`; the digest on success.
pub fn parse_as(name: &str, bytes: &[u8]) -> Result<String, &'static str> {
    use dpone_engine_nonproduction::*;
    fn go<T: Document>(b: &[u8]) -> Result<String, &'static str> {
        T::parse(b)
            .map(|d| d.digest().as_str().to_owned())
            .map_err(|e| e.code())
    }
    match name {
        "policy.json" => go::<AuthorityPolicy>(bytes),
        "authority-qualification.json" | "authority-execution.json" => go::<Authority>(bytes),
        "route-qualification.json" => go::<RouteQualification>(bytes),
        "producer-wire.json" => go::<ProducerWire>(bytes),
        "release-set.json" => go::<DbtReleaseSet>(bytes),
        "composition.json" => go::<Composition>(bytes),
        "activation-request.json" => go::<ActivationRequest>(bytes),
        other => panic!("no reader for {other}"),
    }
}

/// Every new reader, by name.
pub fn all_readers(bytes: &[u8]) -> Vec<(&'static str, Result<String, &'static str>)> {
    [
        "policy.json",
        "authority-execution.json",
        "route-qualification.json",
        "producer-wire.json",
        "release-set.json",
        "composition.json",
        "activation-request.json",
    ]
    .iter()
    .map(|n| (*n, parse_as(n, bytes)))
    .collect()
}
