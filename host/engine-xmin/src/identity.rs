//! Deterministic identities: SHA-256 over RFC 8785 canonical JSON of versioned documents.
//!
//! - **state key**: environment, process, source identity, binary physical-target identity,
//!   unique-key contract, scope and schema hashes, contract version. Schema, key or scope drift
//!   therefore yields a new state key (which needs an exact transfer authority to take over the
//!   target). Raw target aliases never participate.
//! - **target identity** (32 bytes): cluster system identifier, database OID and name, schema and
//!   table, as pinned. It keys the advisory lock and the one-active-owner index.
//! - **route fingerprint**: state key + selected source authority digest + target pin digest, so
//!   a pin rotation changes the identity of every later load and receipt.
//! - **load id** and **receipt id**: derived from the invocation, the route fingerprint, the
//!   previous checkpoint and the envelope digest, so a retry of the same load is recognisable.
//!
//! 64-bit numbers are written as decimal strings inside identity documents: canonical JSON
//! numbers are IEEE doubles and would round large XIDs and system identifiers.

use crate::manifest::{Manifest, Scope};
use crate::registry::{DatabasePin, MssqlPin, MssqlRole, ResolvedRoute, TargetPins};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Contract version bound into every state key.
pub const CONTRACT_VERSION: &str = "dpone.xmin.key-reconciliation.v1";

/// Lower-case hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Lower-case hex sha256 of the canonical JSON of a value.
pub fn sha256_canonical<T: Serialize>(value: &T) -> String {
    let bytes = serde_json_canonicalizer::to_vec(value)
        .or_else(|_| serde_json::to_vec(value))
        .unwrap_or_default();
    sha256_hex(&bytes)
}

/// The identities of one route, computed before any I/O.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteIdentity {
    /// State key (hex sha256).
    pub state_key: String,
    /// Scope hash (hex sha256).
    pub scope_hash: String,
    /// Schema hash (hex sha256).
    pub schema_hash: String,
    /// Binary physical-target identity.
    #[serde(serialize_with = "ser_hex")]
    pub target_identity: [u8; 32],
    /// Digest of the selected source authority.
    pub source_authority_digest: String,
    /// Digest of the target database pin.
    pub target_pin_digest: String,
    /// Route fingerprint (hex sha256).
    pub route_fingerprint: String,
}

fn ser_hex<S: serde::Serializer>(b: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(b))
}

impl RouteIdentity {
    /// Computes every identity of a resolved route.
    pub fn compute(manifest: &Manifest, route: &ResolvedRoute) -> Self {
        let sa = &route.source_authority;
        let canonical_relation = format!("{}.{}", sa.schema, sa.relation);
        let scope_hash = scope_hash(&canonical_relation, &manifest.scope);
        let schema_hash = sha256_canonical(&(
            "dpone.xmin.schema.v1",
            &manifest.columns,
            &manifest.unique_key,
        ));
        let target_identity = match &route.target_pins {
            TargetPins::Postgres(pin) => {
                target_identity(pin, &manifest.target_schema, &manifest.target_table)
            }
            TargetPins::SqlServer(pins) => mssql_target_identity(
                pins.pin(MssqlRole::Target),
                &manifest.target_schema,
                &manifest.target_table,
            ),
        };
        let source_identity = ("postgres", &sa.database.name, &canonical_relation);
        let state_key = sha256_canonical(&StateKeyDoc {
            contract: CONTRACT_VERSION,
            environment: &route.environment,
            process: &manifest.process,
            source_identity,
            target_identity: hex::encode(target_identity),
            unique_key: &manifest.unique_key,
            scope_hash: &scope_hash,
            schema_hash: &schema_hash,
        });
        let source_authority_digest = sa.digest();
        let target_pin_digest = match &route.target_pins {
            TargetPins::Postgres(pin) => sha256_canonical(&("dpone.xmin.target-pin.v1", pin)),
            TargetPins::SqlServer(pins) => pins.digest(),
        };
        let route_fingerprint = sha256_canonical(&(
            "dpone.xmin.route.v1",
            &state_key,
            &source_authority_digest,
            &target_pin_digest,
        ));
        Self {
            state_key,
            scope_hash,
            schema_hash,
            target_identity,
            source_authority_digest,
            target_pin_digest,
            route_fingerprint,
        }
    }
}

#[derive(Serialize)]
struct StateKeyDoc<'a> {
    contract: &'a str,
    environment: &'a str,
    process: &'a str,
    source_identity: (&'a str, &'a String, &'a String),
    target_identity: String,
    unique_key: &'a [String],
    scope_hash: &'a str,
    schema_hash: &'a str,
}

/// Scope hash of a canonical relation and its scope. A `column_values` scope compares typed
/// values (`column IN (CAST(v AS type), …)`) and hashes as `dpone.xmin.scope.v2`; version 1
/// compared `column::text`, so a state taken under it is another state key (it migrates
/// through a transfer authority with a full baseline). A `full` scope is unchanged (v1).
pub fn scope_hash(canonical_relation: &str, scope: &Scope) -> String {
    let version = match scope {
        Scope::Full => "dpone.xmin.scope.v1",
        Scope::ColumnValues { .. } => "dpone.xmin.scope.v2",
    };
    sha256_canonical(&(version, canonical_relation, scope))
}

/// Binary physical-target identity.
pub fn target_identity(pin: &DatabasePin, schema: &str, table: &str) -> [u8; 32] {
    let doc = (
        "dpone.xmin.target-identity.v1",
        &pin.system_identifier,
        pin.oid,
        &pin.name,
        schema,
        table,
    );
    let bytes = serde_json_canonicalizer::to_vec(&doc).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

/// Binary physical-target identity of a SQL Server table: the target database's pinned
/// authority (GUID, id, create token, canonical name), schema and table. A recreated database
/// (new GUID or create token) is a different target.
pub fn mssql_target_identity(pin: &MssqlPin, schema: &str, table: &str) -> [u8; 32] {
    let doc = (
        "dpone.xmin.target-identity.mssql.v1",
        pin.authority.database_guid.to_ascii_lowercase(),
        pin.authority.database_id,
        &pin.authority.create_token,
        &pin.name,
        schema,
        table,
    );
    let bytes = serde_json_canonicalizer::to_vec(&doc).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

/// Load id: one attempt to move a state key from `previous` with one envelope.
pub fn load_id(
    invocation_id: &str,
    route_fingerprint: &str,
    previous: Option<(u64, u64)>,
    envelope_digest: &str,
) -> String {
    sha256_canonical(&(
        "dpone.xmin.load.v1",
        invocation_id,
        route_fingerprint,
        previous.map(|(x, r)| (x.to_string(), r.to_string())),
        envelope_digest,
    ))
}

/// Commit receipt id.
pub fn receipt_id(load_id: &str, state_key: &str, new_revision: u64) -> String {
    sha256_canonical(&(
        "dpone.xmin.receipt.v1",
        load_id,
        state_key,
        new_revision.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_digest_is_order_independent_for_maps() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"a":2,"b":1}"#).unwrap();
        assert_eq!(sha256_canonical(&a), sha256_canonical(&b));
    }

    #[test]
    fn target_identity_changes_with_each_pin() {
        let pin = DatabasePin {
            name: "dwh".into(),
            oid: 16384,
            system_identifier: "7642011472967116994".into(),
        };
        let base = target_identity(&pin, "s", "t");
        let mut other = pin.clone();
        other.oid = 16385;
        assert_ne!(base, target_identity(&other, "s", "t"));
        let mut other = pin.clone();
        other.system_identifier = "7642011472967116995".into();
        assert_ne!(base, target_identity(&other, "s", "t"));
        assert_ne!(base, target_identity(&pin, "s", "u"));
    }

    #[test]
    fn load_ids_distinguish_previous_checkpoints() {
        let a = load_id("inv", "route", Some((10, 1)), "env");
        let b = load_id("inv", "route", Some((10, 2)), "env");
        let c = load_id("inv", "route", None, "env");
        assert_ne!(a, b);
        assert_ne!(a, c);
    }
}
