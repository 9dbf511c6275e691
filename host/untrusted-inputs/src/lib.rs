//! Every parser of untrusted input, behind one entry point per input kind.
//!
//! The same [`TARGETS`] are driven two ways (see `docs/testing.md`):
//!
//! - by the cargo-fuzz targets of `host/fuzz` (nightly, libFuzzer, as long as a developer
//!   likes: `cargo +nightly fuzz run <target>` in `host/fuzz`), each with a seed corpus from the
//!   fixtures ([`seeds`]);
//! - by the bounded property tier of this crate's tests on stable (`tests/property.rs`, part of
//!   `cargo xtask test`): deterministic mutations of the same seeds and arbitrary bytes, so a
//!   regression fails CI.
//!
//! An entry point must not panic, hang or allocate without bound on any input, and every error
//! it returns must be safe to print: one line, at most [`MAX_ERROR_CHARS`] characters, and no
//! control, separator, bidi or other format character ([`assert_safe_error`]). A violation
//! panics, which is what both drivers report.

use dpone_boundary::text::is_format_or_separator;
use std::path::{Path, PathBuf};

/// The longest error message an entry point may return, in characters (the CLI's renderer caps
/// at 512; parser errors must already be short).
pub const MAX_ERROR_CHARS: usize = 1024;

/// One input kind.
pub struct Target {
    /// Name of the cargo-fuzz target and of the corpus directory.
    pub name: &'static str,
    /// Fixture files (relative to the workspace root) and directories whose files seed it.
    pub fixtures: &'static [&'static str],
    /// The entry point.
    pub run: fn(&[u8]),
    /// Whether one run is expensive (compiles WebAssembly): the property tier runs fewer.
    pub expensive: bool,
}

/// Seeds made at run time rather than kept in the repository: a private key is never
/// committed, not even a test one.
fn generated_seeds(target: &Target) -> Vec<Vec<u8>> {
    match target.name {
        "secret_key" => dpone_trust::keys::SecretKey::generate()
            .and_then(|key| key.to_pkcs8_pem())
            .map(|pem| vec![pem.as_bytes().to_vec()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Panics unless `message` is safe to print in a one-line report.
pub fn assert_safe_error(target: &str, message: &str) {
    let chars = message.chars().count();
    assert!(
        chars <= MAX_ERROR_CHARS,
        "{target}: an error of {chars} characters replays the input"
    );
    if let Some(c) = message
        .chars()
        .find(|&c| c.is_control() || is_format_or_separator(c))
    {
        panic!(
            "{target}: an error passes {:?} through: {}",
            c,
            dpone_boundary::text::clean_message(message)
        );
    }
}

fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

fn strict_yaml(bytes: &[u8]) {
    if let Err(e) = dpone_strict_yaml::parse(&text(bytes)) {
        assert_safe_error("strict_yaml", &e.to_string());
    }
}

fn xmin_manifest(bytes: &[u8]) {
    if let Err(e) = dpone_engine_xmin::Manifest::from_yaml(&text(bytes)) {
        assert_safe_error("xmin_manifest", e.message());
    }
}

fn xmin_registry(bytes: &[u8]) {
    if let Err(e) = dpone_engine_xmin::Registry::from_yaml(&text(bytes)) {
        assert_safe_error("xmin_registry", e.message());
    }
}

fn clickhouse_manifest(bytes: &[u8]) {
    use dpone_engine_clickhouse::contracts::manifest::Manifest;
    if let Err(e) = Manifest::parse(&text(bytes)) {
        assert_safe_error("clickhouse_manifest", &e.to_string());
    }
}

fn clickhouse_registry(bytes: &[u8]) {
    use dpone_engine_clickhouse::contracts::manifest::Registry;
    if let Err(e) = Registry::parse(&text(bytes)) {
        assert_safe_error("clickhouse_registry", &e.to_string());
    }
}

/// A KeeperMap authority value (or a receipt) as the coordinator reads it back from the server:
/// any mode's record. Whatever the server holds, the codec either refuses it with a safe
/// error or returns a record whose invariants hold and that encodes back to a value that
/// decodes to the same record.
fn clickhouse_authority_record(bytes: &[u8]) {
    use dpone_engine_clickhouse::contracts::{
        decode_receipt, decode_slot, encode_record, validate_record,
    };
    let text = text(bytes);
    match decode_slot(&text) {
        Err(e) => assert_safe_error("clickhouse_authority_record", &e.to_string()),
        Ok(slot) => {
            let r = slot.record();
            assert!(
                validate_record(r).is_ok(),
                "clickhouse_authority_record: an invalid record was accepted"
            );
            assert_eq!(
                r.mode(),
                Some(slot.mode()),
                "clickhouse_authority_record: the slot's mode is not the record's"
            );
            let again = decode_slot(&encode_record(r)).expect("a decoded record re-decodes");
            assert_eq!(again, slot, "clickhouse_authority_record: no round trip");
        }
    }
    if let Err(e) = decode_receipt(&text) {
        assert_safe_error("clickhouse_authority_record", &e.to_string());
    }
}

/// A member's rowset reply as the adapter receives it after the client decoded its rows:
/// rows of (`UInt8` bucket, `UInt64` rows, `String` digest), here framed as one byte, eight
/// little-endian bytes and a one-byte length before the text. Whatever the member sends, the
/// engine either refuses it or holds a digest of strictly ascending, non-empty buckets whose
/// rows add up.
fn clickhouse_rowset_reply(bytes: &[u8]) {
    use dpone_engine_clickhouse::canonical::rowset::{self, BucketDigest};
    let schema = dpone_engine_clickhouse::contracts::Schema {
        columns: vec![dpone_engine_clickhouse::contracts::Column {
            name: "id".into(),
            type_name: "UInt64".into(),
        }],
    };
    let mut rest = bytes;
    let mut buckets: Vec<BucketDigest> = Vec::new();
    while let [bucket, tail @ ..] = rest {
        let Some((rows, tail)) = tail.split_first_chunk::<8>() else {
            return;
        };
        let Some((&len, tail)) = tail.split_first() else {
            return;
        };
        let Some((digest, tail)) = tail.split_at_checked(usize::from(len)) else {
            return;
        };
        rest = tail;
        let Ok(b) = rowset::bucket_from_reply(*bucket, u64::from_le_bytes(*rows), &text(digest))
        else {
            return;
        };
        buckets.push(b);
        if buckets.len() > rowset::MAX_BUCKETS {
            return;
        }
    }
    if let Ok(summary) = rowset::combine(&schema, &buckets) {
        assert!(
            buckets.windows(2).all(|w| w[0].bucket < w[1].bucket),
            "clickhouse_rowset_reply: an unordered reply was accepted"
        );
        assert!(
            buckets.iter().all(|b| b.rows > 0),
            "clickhouse_rowset_reply: an empty bucket was accepted"
        );
        assert_eq!(
            summary.row_count,
            buckets.iter().map(|b| b.rows).sum::<u64>()
        );
    }
}

/// The CLI reads an authority document with serde_json and reports the error through the
/// renderer's cleaner: the same path here.
fn xmin_authority_document(bytes: &[u8]) {
    use dpone_engine_xmin::state::AuthorityDocument;
    if let Err(e) = serde_json::from_slice::<AuthorityDocument>(bytes) {
        let shown = dpone_boundary::text::clean_message(&e.to_string());
        assert_safe_error("xmin_authority_document", &shown);
    }
}

/// Decision facts: JSON, then the record of every kind's functions (as `policy eval` and the
/// runtime's `decide_json` parse them), reported through the renderer's cleaner.
fn decision_facts(bytes: &[u8]) {
    use dpone_policy_model::{admission, delete_mode, guard, scope};
    fn record<T: serde::de::DeserializeOwned>(value: &serde_json::Value) {
        if let Err(e) = T::deserialize(value) {
            let shown = dpone_boundary::text::clean_message(&e.to_string());
            assert_safe_error("decision_facts", &shown);
        }
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return;
    };
    record::<guard::GuardFacts>(&value);
    record::<delete_mode::DeleteModeFacts>(&value);
    record::<admission::StaticFacts>(&value);
    record::<admission::RuntimeFacts>(&value);
    record::<scope::ScopeFacts>(&value);
}

fn decision_table(bytes: &[u8]) {
    match dpone_decision_table::DecisionTable::from_json(&text(bytes)) {
        Ok(table) => {
            // The expectation check the activation gate and `policy test` run next.
            if let Err(e) = table.check_expectations() {
                let shown = dpone_boundary::text::clean_message(&e);
                assert_safe_error("decision_table", &shown);
            }
        }
        Err(e) => {
            let shown = dpone_boundary::text::clean_message(&e.to_string());
            assert_safe_error("decision_table", &shown);
        }
    }
}

fn component_lock(bytes: &[u8]) {
    if let Err(e) = dpone_policy_build::ComponentLock::from_json(&text(bytes)) {
        assert_safe_error("component_lock", &e.to_string());
    }
}

fn bundle_archive(bytes: &[u8]) {
    match dpone_trust::archive::unpack(bytes) {
        Ok(files) => {
            if let Err(e) = dpone_trust::bundle::inspect(&files) {
                assert_safe_error("bundle_archive", &e.to_string());
            }
        }
        Err(e) => assert_safe_error("bundle_archive", &e.to_string()),
    }
}

fn bundle_manifest(bytes: &[u8]) {
    if let Err(e) = dpone_trust::manifest::Manifest::parse(bytes) {
        assert_safe_error("bundle_manifest", &e.to_string());
    }
}

fn bundle_signatures(bytes: &[u8]) {
    if let Err(e) = dpone_trust::signature::SignatureFile::parse(bytes) {
        assert_safe_error("bundle_signatures", &e.to_string());
    }
}

fn trust_policy(bytes: &[u8]) {
    if let Err(e) = dpone_trust::policy::TrustPolicy::parse(bytes) {
        assert_safe_error("trust_policy", &e.to_string());
    }
}

fn public_key(bytes: &[u8]) {
    if let Err(e) = dpone_trust::keys::PublicKey::from_pem(&text(bytes)) {
        assert_safe_error("public_key", &e.to_string());
    }
}

fn secret_key(bytes: &[u8]) {
    if let Err(e) = dpone_trust::keys::SecretKey::from_pkcs8_pem(&text(bytes)) {
        assert_safe_error("secret_key", &e.to_string());
    }
}

fn sigstore_bundle(bytes: &[u8]) {
    if let Err(e) = dpone_trust::sigstore::parse_bundle(bytes) {
        assert_safe_error("sigstore_bundle", &e.to_string());
    }
}

fn attestation_statement(bytes: &[u8]) {
    if let Err(e) = dpone_trust::attestation::parse_statement(bytes) {
        assert_safe_error("attestation_statement", &e.to_string());
    }
}

fn trusted_root(bytes: &[u8]) {
    if let Err(e) = dpone_trust::trusted_root::PinnedTrustedRoot::unpinned(bytes) {
        assert_safe_error("trusted_root", &e.to_string());
    }
}

/// The runtime's errors quote its parser's multi-line diagnostics; the CLI's renderer cleans
/// them (`exit::finish`), so they are checked as rendered.
fn component_inspect(bytes: &[u8]) {
    if let Err(e) = dpone_policy_runtime::component_surface(bytes) {
        let shown = dpone_boundary::text::clean_message(&e.to_string());
        assert_safe_error("component_inspect", &shown);
    }
}

/// Loading compiles: the runtime is built once per process.
fn component_load(bytes: &[u8]) {
    use dpone_policy_runtime::{Budget, PolicyKind, PolicyRuntime, SandboxConfig, Sha256Digest};
    use std::sync::OnceLock;
    static RUNTIME: OnceLock<Option<PolicyRuntime>> = OnceLock::new();
    let Some(runtime) = RUNTIME
        .get_or_init(|| PolicyRuntime::new(SandboxConfig::default()).ok())
        .as_ref()
    else {
        return;
    };
    // At its own pin, so that the bytes reach the parser and the validator.
    if let Err(e) = runtime.load(
        PolicyKind::Guard,
        bytes,
        Sha256Digest::of(bytes),
        Budget::default(),
    ) {
        let shown = dpone_boundary::text::clean_message(&e.to_string());
        assert_safe_error("component_load", &shown);
    }
}

/// A nonproduction authority document: refused with a safe error, or accepted only as its own
/// exact canonical bytes (so an accepted input has one digest).
fn nonproduction<T: dpone_engine_nonproduction::Document>(target: &str, bytes: &[u8]) {
    match T::parse(bytes) {
        Ok(doc) => assert!(
            doc.canonical_bytes() == bytes,
            "{target}: accepted bytes that are not the document's canonical encoding"
        ),
        Err(e) => {
            assert!(e.code().starts_with("DPONE_NP_"), "{target}: foreign code");
            assert_safe_error(target, &e.to_string());
        }
    }
}

fn np_policy(bytes: &[u8]) {
    nonproduction::<dpone_engine_nonproduction::AuthorityPolicy>("np_policy", bytes);
}

fn np_authority(bytes: &[u8]) {
    nonproduction::<dpone_engine_nonproduction::Authority>("np_authority", bytes);
}

fn np_route_qualification(bytes: &[u8]) {
    nonproduction::<dpone_engine_nonproduction::RouteQualification>(
        "np_route_qualification",
        bytes,
    );
}

fn np_release_set(bytes: &[u8]) {
    nonproduction::<dpone_engine_nonproduction::DbtReleaseSet>("np_release_set", bytes);
}

fn np_producer_wire(bytes: &[u8]) {
    nonproduction::<dpone_engine_nonproduction::ProducerWire>("np_producer_wire", bytes);
}

fn np_composition(bytes: &[u8]) {
    nonproduction::<dpone_engine_nonproduction::Composition>("np_composition", bytes);
}

fn np_activation_request(bytes: &[u8]) {
    nonproduction::<dpone_engine_nonproduction::ActivationRequest>("np_activation_request", bytes);
}

/// Any nonproduction document, dispatched on its exact `schema` (`campaign inspect`).
fn np_any_document(bytes: &[u8]) {
    match dpone_engine_nonproduction::AnyDocument::parse(bytes) {
        Ok(doc) => assert!(
            doc.canonical_bytes() == bytes,
            "np_any_document: accepted bytes that are not the document's canonical encoding"
        ),
        Err(e) => {
            assert!(
                e.code().starts_with("DPONE_NP_"),
                "np_any_document: foreign code"
            );
            assert_safe_error("np_any_document", &e.to_string());
        }
    }
}

/// A participant's identity record as the control store returns it (ClickHouse, SQL Server):
/// refused by each reader, or accepted only as its own exact canonical record.
fn np_identity_record(bytes: &[u8]) {
    use dpone_engine_nonproduction::enrollment::{ClickhouseIdentity, SqlserverIdentity};
    if let Ok(identity) = ClickhouseIdentity::from_record(bytes) {
        assert!(
            identity.record() == bytes,
            "np_identity_record: accepted bytes that are not the record's canonical encoding"
        );
    }
    if let Ok(identity) = SqlserverIdentity::from_record(bytes) {
        assert!(
            identity.record() == bytes,
            "np_identity_record: accepted bytes that are not the record's canonical encoding"
        );
    }
}

/// A group-admission record another scheduler wrote to the control store's queue (a request or
/// an outcome): refused with the store's stable code and a message that replays nothing, or
/// accepted as a record that encodes and parses back to itself; a refusal it carries becomes a
/// known code with short printable text.
fn np_queue_record(bytes: &[u8]) {
    use dpone_adapter_np_control_store::queue::{
        Verdict, parse_outcome, parse_request, refusal, to_bytes,
    };
    use dpone_adapter_np_control_store::{StoreCode, StoreError};
    let refused = |e: StoreError| {
        assert_eq!(
            e.code,
            StoreCode::StoredStateInvalid,
            "np_queue_record: foreign code"
        );
        assert_safe_error("np_queue_record", &e.message);
    };
    match parse_request(bytes) {
        Ok(r) => assert_eq!(
            parse_request(&to_bytes(&r)).ok(),
            Some(r),
            "np_queue_record: a request does not round-trip"
        ),
        Err(e) => refused(e),
    }
    match parse_outcome(bytes) {
        Ok(o) => {
            assert_eq!(
                parse_outcome(&to_bytes(&o)).ok().as_ref(),
                Some(&o),
                "np_queue_record: an outcome does not round-trip"
            );
            if let Verdict::Refused { code, message } = &o.verdict {
                let e = refusal(code, message);
                assert!(
                    e.message.len() <= 200 && !e.message.chars().any(char::is_control),
                    "np_queue_record: a refusal passes its text through"
                );
            }
        }
        Err(e) => refused(e),
    }
}

/// Every input kind.
pub const TARGETS: &[Target] = &[
    Target {
        name: "strict_yaml",
        fixtures: &["fixtures/xmin", "fixtures/clickhouse"],
        run: strict_yaml,
        expensive: false,
    },
    Target {
        name: "xmin_manifest",
        fixtures: &[
            "fixtures/xmin/manifest.yaml",
            "fixtures/xmin/mssql/manifest.yaml",
        ],
        run: xmin_manifest,
        expensive: false,
    },
    Target {
        name: "xmin_registry",
        fixtures: &[
            "fixtures/xmin/registry.yaml",
            "fixtures/xmin/registry-v1.yaml",
            "fixtures/xmin/mssql/registry.yaml",
        ],
        run: xmin_registry,
        expensive: false,
    },
    Target {
        name: "clickhouse_manifest",
        fixtures: &[
            "fixtures/clickhouse/manifest.yaml",
            "fixtures/clickhouse/manifest-blocked.yaml",
            "fixtures/clickhouse/manifest-malformed.yaml",
            "host/fuzz/corpus/clickhouse_manifest/content-proof",
        ],
        run: clickhouse_manifest,
        expensive: false,
    },
    Target {
        name: "clickhouse_registry",
        fixtures: &["fixtures/clickhouse/registry.yaml"],
        run: clickhouse_registry,
        expensive: false,
    },
    Target {
        name: "clickhouse_rowset_reply",
        fixtures: &["host/fuzz/corpus/clickhouse_rowset_reply"],
        run: clickhouse_rowset_reply,
        expensive: false,
    },
    Target {
        name: "clickhouse_authority_record",
        fixtures: &[
            "fixtures/clickhouse/v1-authority-record.json",
            "host/fuzz/corpus/clickhouse_authority_record",
        ],
        run: clickhouse_authority_record,
        expensive: false,
    },
    Target {
        name: "xmin_authority_document",
        fixtures: &["fixtures/xmin/authority.json"],
        run: xmin_authority_document,
        expensive: false,
    },
    Target {
        name: "decision_facts",
        fixtures: &["fixtures/samples"],
        run: decision_facts,
        expensive: false,
    },
    Target {
        name: "decision_table",
        fixtures: &["fixtures/decision-tables"],
        run: decision_table,
        expensive: false,
    },
    Target {
        name: "component_lock",
        fixtures: &["policies/components.lock.json"],
        run: component_lock,
        expensive: false,
    },
    Target {
        name: "bundle_archive",
        fixtures: &["host/fuzz/corpus/bundle_archive"],
        run: bundle_archive,
        expensive: false,
    },
    Target {
        name: "bundle_manifest",
        fixtures: &["host/fuzz/corpus/bundle_manifest"],
        run: bundle_manifest,
        expensive: false,
    },
    Target {
        name: "bundle_signatures",
        fixtures: &["host/fuzz/corpus/bundle_signatures"],
        run: bundle_signatures,
        expensive: false,
    },
    Target {
        name: "trust_policy",
        fixtures: &["host/fuzz/corpus/trust_policy"],
        run: trust_policy,
        expensive: false,
    },
    Target {
        name: "public_key",
        fixtures: &["host/fuzz/corpus/public_key"],
        run: public_key,
        expensive: false,
    },
    Target {
        name: "secret_key",
        fixtures: &["host/fuzz/corpus/secret_key"],
        run: secret_key,
        expensive: false,
    },
    Target {
        name: "sigstore_bundle",
        fixtures: &["host/fuzz/corpus/sigstore_bundle"],
        run: sigstore_bundle,
        expensive: false,
    },
    Target {
        name: "attestation_statement",
        fixtures: &["host/fuzz/corpus/attestation_statement"],
        run: attestation_statement,
        expensive: false,
    },
    Target {
        name: "trusted_root",
        fixtures: &["host/fuzz/corpus/trusted_root"],
        run: trusted_root,
        expensive: false,
    },
    Target {
        name: "component_inspect",
        fixtures: &["host/fuzz/corpus/component_inspect"],
        run: component_inspect,
        expensive: false,
    },
    Target {
        name: "component_load",
        fixtures: &["host/fuzz/corpus/component_inspect"],
        run: component_load,
        expensive: true,
    },
    Target {
        name: "np_policy",
        fixtures: &["fixtures/nonproduction/policy.json"],
        run: np_policy,
        expensive: false,
    },
    Target {
        name: "np_authority",
        fixtures: &[
            "fixtures/nonproduction/authority-qualification.json",
            "fixtures/nonproduction/authority-execution.json",
        ],
        run: np_authority,
        expensive: false,
    },
    Target {
        name: "np_route_qualification",
        fixtures: &["fixtures/nonproduction/route-qualification.json"],
        run: np_route_qualification,
        expensive: false,
    },
    Target {
        name: "np_release_set",
        fixtures: &["fixtures/nonproduction/release-set.json"],
        run: np_release_set,
        expensive: false,
    },
    Target {
        name: "np_producer_wire",
        fixtures: &["fixtures/nonproduction/producer-wire.json"],
        run: np_producer_wire,
        expensive: false,
    },
    Target {
        name: "np_composition",
        fixtures: &["fixtures/nonproduction/composition.json"],
        run: np_composition,
        expensive: false,
    },
    Target {
        name: "np_activation_request",
        fixtures: &["fixtures/nonproduction/activation-request.json"],
        run: np_activation_request,
        expensive: false,
    },
    Target {
        name: "np_any_document",
        fixtures: &["fixtures/nonproduction"],
        run: np_any_document,
        expensive: false,
    },
    Target {
        name: "np_identity_record",
        fixtures: &["host/fuzz/corpus/np_identity_record"],
        run: np_identity_record,
        expensive: false,
    },
    Target {
        name: "np_queue_record",
        fixtures: &["host/fuzz/corpus/np_queue_record"],
        run: np_queue_record,
        expensive: false,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The seed inputs of `target`: its fixture files, and the files of its fixture directories,
/// sorted by path (missing fixtures are skipped), then the seeds made at run time (a fresh
/// private key for `secret_key`).
pub fn seeds(target: &Target) -> Vec<Vec<u8>> {
    let root = workspace_root();
    let mut paths = Vec::new();
    for fixture in target.fixtures {
        let path = root.join(fixture);
        if path.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                paths.extend(
                    entries
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.is_file()),
                );
            }
        } else if path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    let mut seeds: Vec<Vec<u8>> = paths
        .iter()
        .filter_map(|p| dpone_boundary::read::read_regular(p, 64 << 20).ok())
        .collect();
    seeds.extend(generated_seeds(target));
    seeds
}

/// A deterministic xorshift64* generator (no dependency, reproducible from its seed).
pub struct XorShift(u64);

impl XorShift {
    /// A generator; a zero seed is replaced.
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Tokens that steer the parsers to their interesting paths: YAML and JSON structure, the
/// scalars strict YAML refuses, escapes, separators and bidi characters, big numbers.
const DICTIONARY: &[&str] = &[
    "\"",
    "'",
    "{",
    "}",
    "[",
    "]",
    ":",
    ": ",
    ",",
    "\n",
    "- ",
    "  ",
    "#",
    "&a ",
    "*a",
    "!!str ",
    "<<: ",
    "---\n",
    "...\n",
    "yes",
    "on",
    "0x1f",
    "1e3",
    "007",
    ".inf",
    "~",
    "null",
    "true",
    "\\u2028",
    "\\u202e",
    "\\u0000",
    "\u{2028}",
    "\u{202e}",
    "\u{2066}",
    "\u{1b}[31m",
    "\u{feff}",
    "18446744073709551616",
    "-9223372036854775809",
    "9007199254740993",
    "1.0e999",
    "\"\":",
    "\"mediaType\":",
    "\"schema\":",
    "\"version\":",
    "sha256:",
    "-----BEGIN PUBLIC KEY-----\n",
    "-----END PUBLIC KEY-----\n",
    "\u{0}",
    "\u{ff}",
];

/// One mutation of `input` (or of an empty or random input).
pub fn mutate(rng: &mut XorShift, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        match rng.below(8) {
            // Flip a bit.
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            // Overwrite a byte.
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.next_u64() as u8;
            }
            // Delete a range.
            2 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(64)).min(out.len());
                out.drain(start..end);
            }
            // Insert a dictionary token.
            3 | 4 => {
                let token = DICTIONARY[rng.below(DICTIONARY.len())].as_bytes();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, token.iter().copied());
            }
            // Duplicate a chunk.
            5 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(256)).min(out.len());
                let chunk = out[start..end].to_vec();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, chunk);
            }
            // Truncate.
            6 if !out.is_empty() => {
                out.truncate(rng.below(out.len()));
            }
            // Random bytes.
            _ => {
                let n = rng.below(32);
                let at = rng.below(out.len() + 1);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                out.splice(at..at, bytes);
            }
        }
    }
    out
}
