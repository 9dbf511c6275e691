//! Hermetic contract tests: manifests and registries from `fixtures/xmin`, each malformation
//! refused with its own stable code before any I/O; identities; check and plan.
//!
//! Tier: unit (pure); the delete-mode decision comes from a stub plan through the policy port.

use dpone_engine_xmin::ports::{Judged, PolicyPort};
use dpone_engine_xmin::registry::Environment;
use dpone_engine_xmin::{ErrorCode, Manifest, Registry, Route};
use dpone_policy_model::delete_mode::{
    ActivePredicate, Classification, DeleteModeFacts, DeletePlan, FlagEffect, KeyState, Mode,
    PlanDecision, RowAction, TimestampEffect,
};
use dpone_policy_model::guard::{GuardDecision, GuardFacts};
use dpone_policy_model::types::Reason;
use std::collections::BTreeMap;

const MANIFEST: &str = include_str!("../../../fixtures/xmin/manifest.yaml");
const REGISTRY: &str = include_str!("../../../fixtures/xmin/registry.yaml");
const REGISTRY_V1: &str = include_str!("../../../fixtures/xmin/registry-v1.yaml");

/// Minimal policy stub: accepts soft_delete/timestamp_only, rejects anything else.
struct Stub;

impl PolicyPort for Stub {
    fn guard(&self, _: &GuardFacts) -> dpone_engine_xmin::Result<Judged<GuardDecision>> {
        Ok(Judged {
            decision: GuardDecision::Deny(Reason::new("STUB", "stub")),
            evidence: serde_json::Value::Null,
        })
    }
    fn delete_mode(&self, f: &DeleteModeFacts) -> dpone_engine_xmin::Result<Judged<PlanDecision>> {
        let ok = matches!(f.delete_policy.as_deref(), None | Some("soft_delete"))
            && matches!(f.soft_delete_mode.as_deref(), None | Some("timestamp_only"));
        let decision = if ok {
            PlanDecision::Plan(DeletePlan {
                mode: Mode::TimestampOnly,
                columns: vec![],
                active_predicate: ActivePredicate::DeletedAtIsNull,
                rules: KeyState::ALL
                    .iter()
                    .map(|&state| Classification {
                        state,
                        action: RowAction::Unchanged,
                        write_business_columns: false,
                        deleted_at: TimestampEffect::None,
                        deleted_flag: FlagEffect::None,
                    })
                    .collect(),
            })
        } else {
            PlanDecision::Reject(Reason::new(
                "DPONE_DELETE_MODE_UNKNOWN_SOFT_DELETE_MODE",
                "stub",
            ))
        };
        Ok(Judged {
            decision,
            evidence: serde_json::Value::Null,
        })
    }
}

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("DPONE_PG_SOURCE_PASSWORD".to_owned(), "s".to_owned()),
        ("DPONE_PG_TARGET_PASSWORD".to_owned(), "t".to_owned()),
    ])
}

fn manifest_code(text: &str) -> ErrorCode {
    Manifest::from_yaml(text)
        .expect_err("must be refused")
        .code()
}

fn registry_code(text: &str) -> ErrorCode {
    Registry::from_yaml(text)
        .expect_err("must be refused")
        .code()
}

fn route_code(manifest: &str, registry: &str, env: &dyn Environment) -> ErrorCode {
    let m = Manifest::from_yaml(manifest).expect("manifest");
    let r = Registry::from_yaml(registry).expect("registry");
    Route::prepare(m, &r, env, &Stub)
        .expect_err("must be refused")
        .code()
}

#[test]
fn sample_manifest_and_registry_are_valid() {
    let m = Manifest::from_yaml(MANIFEST).expect("manifest");
    assert_eq!(m.guards.max_delete_ratio, Some(50_000));
    assert_eq!(m.guards.max_delete_rows, Some(100_000));
    assert_eq!(m.business_columns(), ["customer", "amount", "status"]);
    let r = Registry::from_yaml(REGISTRY).expect("registry");
    let route = Route::prepare(m.clone(), &r, &env(), &Stub).expect("route");
    let report = route.check_report();
    assert_eq!(report.source_relation, "public.orders");
    assert_eq!(report.identity.state_key.len(), 64);
    assert_eq!(route.resolved.state_schema, "dpone_state");
    let plan = serde_json::to_value(route.plan_report()).expect("plan json");
    assert_eq!(plan["delete_mode"], "timestamp_only");
    // Credentials never appear in reports or Debug output.
    let dbg = format!(
        "{:?}{}",
        route.resolved,
        serde_json::to_string(&report).unwrap_or_default()
    );
    assert!(
        !dbg.contains("\"s\"") && !dbg.contains("/var/run/postgresql"),
        "{dbg}"
    );
    Registry::from_yaml(REGISTRY_V1).expect("v1 registry");
}

#[test]
fn malformed_manifests_have_distinct_codes() {
    let cases: Vec<(String, ErrorCode)> = vec![
        (
            MANIFEST.replace("name: orders_to_dwh", "name: orders_to_dwh\nname: again"),
            ErrorCode::YamlDuplicateKey,
        ),
        (
            MANIFEST.replace(
                "  mode: key_snapshot",
                "  mode: key_snapshot\n  colour: blue",
            ),
            ErrorCode::ManifestUnknownField,
        ),
        (
            MANIFEST.replace("enabled: true", "enabled: yes"),
            ErrorCode::YamlAmbiguousScalar,
        ),
        (
            MANIFEST.replace("table: orders", "table: &t orders\n  alias: *t"),
            ErrorCode::YamlAlias,
        ),
        (
            MANIFEST.replace("table: orders", "table: !!str orders"),
            ErrorCode::YamlTag,
        ),
        (
            MANIFEST.replace("table: orders", "table: ord\u{e9}rs"),
            ErrorCode::YamlNonAscii,
        ),
        (
            MANIFEST.replace("mode: key_snapshot", "mode: full_refresh"),
            ErrorCode::ManifestUnsupportedRoute,
        ),
        (
            MANIFEST.replace("unique_key: [id]", "unique_key: [nope]"),
            ErrorCode::ManifestUniqueKeyInvalid,
        ),
        (
            MANIFEST.replace("unique_key: [id]", "unique_key: []"),
            ErrorCode::ManifestUniqueKeyInvalid,
        ),
        (
            MANIFEST.replace("max_delete_ratio: 0.05", "max_delete_ratio: 1.5"),
            ErrorCode::ManifestRatioInvalid,
        ),
        (
            MANIFEST.replace("max_delete_ratio: 0.05", "max_delete_ratio: 0.0000001"),
            ErrorCode::ManifestRatioInvalid,
        ),
        (
            MANIFEST.replace(
                "run_table: {name: dpone_run_state}",
                "run_table: {name: a, run_name: b}",
            ),
            ErrorCode::ManifestStateTableConflict,
        ),
        (
            MANIFEST.replace("atomicity: target_atomic", "atomicity: separate"),
            ErrorCode::ManifestStateAtomicityUnsupported,
        ),
        (
            MANIFEST.replace(
                "  type: postgres\n  connection_ref: pg_state",
                "  type: mssql\n  connection_ref: pg_state",
            ),
            ErrorCode::ManifestStateAtomicityUnsupported,
        ),
        (
            MANIFEST.replace("relation: public.orders", "relation: orders"),
            ErrorCode::ManifestIdentifierInvalid,
        ),
        (
            MANIFEST.replace("table: orders", "table: \"or ders\""),
            ErrorCode::ManifestIdentifierInvalid,
        ),
        (
            MANIFEST.replace("cadence: every_run", "cadence: 7"),
            ErrorCode::ManifestInvalid,
        ),
    ];
    for (text, code) in cases {
        assert_eq!(manifest_code(&text), code, "{text}");
    }
    // The deprecated boolean never enables the route.
    let legacy = MANIFEST.replace(
        "reconciliation:\n  enabled: true\n",
        "reconciliation: true\nunused:\n  enabled: true\n",
    );
    assert_eq!(
        manifest_code(&legacy),
        ErrorCode::ManifestLegacyReconciliation
    );
    // The legacy run_name alone is accepted with a deprecation.
    let m = Manifest::from_yaml(&MANIFEST.replace(
        "run_table: {name: dpone_run_state}",
        "run_table: {run_name: dpone_run_state}",
    ))
    .expect("legacy run_name");
    assert_eq!(m.deprecations.len(), 1);
}

#[test]
fn malformed_registries_have_distinct_codes() {
    let cases: Vec<(String, ErrorCode)> = vec![
        (REGISTRY.replace("kind: postgres_source", "kind: postgres_source\n    kind: postgres_target"), ErrorCode::YamlDuplicateKey),
        (REGISTRY.replace("    password_env: DPONE_PG_SOURCE_PASSWORD\n", "    password: hunter2\n"), ErrorCode::RegistryUnknownField),
        (REGISTRY.replace("profile: catalog_identity", "profile: catalog_identity\n      system_identifier: '1'"), ErrorCode::RegistryAuthorityInvalid),
        (REGISTRY.replace("profile: catalog_identity", "profile: physical_cluster"), ErrorCode::RegistryAuthorityInvalid),
        (REGISTRY.replace("version: 2", "version: 3"), ErrorCode::RegistryAuthorityInvalid),
        (REGISTRY.replace("public.customers:", "PUBLIC.ORDERS:"), ErrorCode::RegistryRelationAliasAmbiguous),
        (REGISTRY.replacen("    database_pin: {name: dwh, oid: 16500, system_identifier: '7642011472967116994'}\n", "", 1), ErrorCode::RegistryPinMissing),
        (REGISTRY.replacen("system_identifier: '7642011472967116994'", "system_identifier: 'abc'", 1), ErrorCode::RegistryInvalid),
        (REGISTRY.replace("environment: prod", "environment: prod\nextra: 1"), ErrorCode::RegistryUnknownField),
        (REGISTRY_V1.replace("      timeline: 1\n", ""), ErrorCode::RegistryAuthorityInvalid),
        // Version 2 carries no timeline pin at all: it never calls a control or WAL-file
        // function that could verify one (spec 003), and a signed field is never ignored.
        (REGISTRY.replace("profile: catalog_identity", "profile: catalog_identity\n      timeline: 0"), ErrorCode::RegistryAuthorityInvalid),
        (REGISTRY.replace("profile: catalog_identity", "profile: catalog_identity\n      timeline: 2"), ErrorCode::RegistryAuthorityInvalid),
        (REGISTRY.replace("profile: catalog_identity", "profile: catalog_identity\n      timeline: 2").replace("recovery_role: primary", "recovery_role: standby"), ErrorCode::RegistryAuthorityInvalid),
    ];
    for (text, code) in cases {
        assert_eq!(registry_code(&text), code, "{text}");
    }
}

#[test]
fn route_resolution_refusals() {
    let e = env();
    // Unpinned relation.
    assert_eq!(
        route_code(
            &MANIFEST.replace("relation: public.orders", "relation: public.invoices"),
            REGISTRY,
            &e
        ),
        ErrorCode::RegistryRelationUnpinned
    );
    // An ASCII-case alias resolves to the single pin.
    let m = Manifest::from_yaml(
        &MANIFEST.replace("relation: public.orders", "relation: Public.Orders"),
    )
    .expect("alias");
    let r = Registry::from_yaml(REGISTRY).expect("registry");
    let route = Route::prepare(m, &r, &e, &Stub).expect("alias resolves");
    assert_eq!(route.resolved.source_authority.relation, "orders");
    // Unknown connection, wrong kind.
    assert_eq!(
        route_code(
            &MANIFEST.replace("connection_ref: pg_source", "connection_ref: nowhere"),
            REGISTRY,
            &e
        ),
        ErrorCode::RegistryConnectionUnknown
    );
    assert_eq!(
        route_code(
            &MANIFEST.replace("connection_ref: pg_target", "connection_ref: pg_source"),
            REGISTRY,
            &e
        ),
        ErrorCode::RegistryConnectionUnknown
    );
    // Credential missing from the environment.
    assert_eq!(
        route_code(MANIFEST, REGISTRY, &BTreeMap::new()),
        ErrorCode::RegistryCredentialMissing
    );
    // State in another database than the target.
    let split = REGISTRY.replacen(
        "database_pin: {name: dwh, oid: 16500, system_identifier: '7642011472967116994'}\n  pg_state",
        "database_pin: {name: dwh, oid: 16501, system_identifier: '7642011472967116994'}\n  pg_state",
        1,
    );
    assert_ne!(split, REGISTRY);
    assert_eq!(
        route_code(MANIFEST, &split, &e),
        ErrorCode::RegistryStateNotTargetAtomic
    );
    // Delete-mode policy reject.
    assert_eq!(
        route_code(
            &MANIFEST.replace(
                "soft_delete_mode: timestamp_only",
                "soft_delete_mode: tombstone"
            ),
            REGISTRY,
            &e
        ),
        ErrorCode::DeleteModeRejected
    );
}

#[test]
fn identity_reacts_to_drift_and_rotation() {
    let e = env();
    let r = Registry::from_yaml(REGISTRY).expect("registry");
    let base = Route::prepare(Manifest::from_yaml(MANIFEST).expect("m"), &r, &e, &Stub)
        .expect("route")
        .identity;
    let with = |m: &str, reg: &str| {
        let r = Registry::from_yaml(reg).expect("registry");
        Route::prepare(Manifest::from_yaml(m).expect("m"), &r, &e, &Stub)
            .expect("route")
            .identity
    };
    // Schema drift, key drift and scope drift change the state key.
    let schema = with(
        &MANIFEST.replace("[id, customer, amount, status]", "[id, customer, amount]"),
        REGISTRY,
    );
    assert_ne!(schema.state_key, base.state_key);
    let scope = with(
        &MANIFEST.replace(
            "scope: {type: full}",
            "scope: {type: column_values, column: status, values: [open]}",
        ),
        REGISTRY,
    );
    assert_ne!(scope.state_key, base.state_key);
    assert_ne!(scope.scope_hash, base.scope_hash);
    // A pin for an unrelated relation changes nothing.
    let unrelated = with(
        MANIFEST,
        &REGISTRY.replace("relation_oid: 16400", "relation_oid: 16401"),
    );
    assert_eq!(unrelated, base);
    // Rotating the selected relation pin changes the route fingerprint, not the state key.
    let rotated = with(
        MANIFEST,
        &REGISTRY.replace("relation_oid: 16390", "relation_oid: 16391"),
    );
    assert_eq!(rotated.state_key, base.state_key);
    assert_ne!(rotated.route_fingerprint, base.route_fingerprint);
    // Switching profiles changes the authority digest.
    let v1 = with(MANIFEST, REGISTRY_V1);
    assert_ne!(v1.source_authority_digest, base.source_authority_digest);
    // A recreated target database is a different physical target.
    let recreated = with(MANIFEST, &REGISTRY.replace("oid: 16500", "oid: 16600"));
    assert_ne!(recreated.target_identity, base.target_identity);
}

/// Architecture invariant: the engine knows no database driver, no async runtime and no
/// WebAssembly runtime.
/// A `column_values` scope compares typed values and hashes as scope v2, so a state taken
/// under the text comparison (v1) is another state key and migrates through a transfer
/// authority; a `full` scope keeps its v1 hash and its state.
#[test]
fn column_values_scopes_hash_as_typed_comparison_full_scopes_are_unchanged() {
    use dpone_engine_xmin::identity::{scope_hash, sha256_canonical};
    use dpone_engine_xmin::manifest::Scope;
    let rel = "public.orders";
    let full = Scope::Full;
    assert_eq!(
        scope_hash(rel, &full),
        sha256_canonical(&("dpone.xmin.scope.v1", rel, &full))
    );
    let values = Scope::ColumnValues {
        column: "status".into(),
        values: vec!["open".into()],
    };
    assert_eq!(
        scope_hash(rel, &values),
        sha256_canonical(&("dpone.xmin.scope.v2", rel, &values))
    );
    assert_ne!(
        scope_hash(rel, &values),
        sha256_canonical(&("dpone.xmin.scope.v1", rel, &values))
    );
}

#[test]
fn engine_depends_on_no_driver_or_runtime() {
    let manifest = include_str!("../Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|s| s.split("\n[").next())
        .unwrap_or_default();
    for forbidden in [
        "tokio",
        "postgres",
        "tiberius",
        "clickhouse",
        "wasmtime",
        "policy-runtime",
    ] {
        assert!(!deps.contains(forbidden), "engine depends on {forbidden}");
    }
}

const MSSQL_MANIFEST: &str = include_str!("../../../fixtures/xmin/mssql/manifest.yaml");
const MSSQL_REGISTRY: &str = include_str!("../../../fixtures/xmin/mssql/registry.yaml");

fn mssql_env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("DPONE_PG_SOURCE_PASSWORD".to_owned(), "s".to_owned()),
        ("DPONE_MSSQL_PASSWORD".to_owned(), "m".to_owned()),
    ])
}

fn mssql_route(manifest: &str, registry: &str) -> dpone_engine_xmin::Result<Route> {
    let m = Manifest::from_yaml(manifest)?;
    let r = Registry::from_yaml(registry)?;
    Route::prepare(m, &r, &mssql_env(), &Stub)
}

#[test]
fn sql_server_route_resolves_target_staging_and_state_pins() {
    use dpone_engine_xmin::registry::MssqlRole;
    let route = mssql_route(MSSQL_MANIFEST, MSSQL_REGISTRY).expect("route");
    let pins = route.resolved.target_pins.sql_server().expect("sql server");
    assert_eq!(pins.pin(MssqlRole::Target).name, "DWH");
    assert_eq!(pins.pin(MssqlRole::Staging).name, "DWH_Stage");
    assert_eq!(pins.pin(MssqlRole::State).name, "DWH_State");
    assert_eq!(pins.pin(MssqlRole::State).authority.database_id, 9);
    assert_eq!(pins.staging_schema, "dpone_stage");
    assert_eq!(route.resolved.state_schema, "dpone");
    // The role-aware digest of the pins is the target pin digest of the route.
    assert_eq!(route.identity.target_pin_digest, pins.digest());
    let report = route.check_report();
    assert_eq!(report.route, "postgres_xmin_to_mssql_key_snapshot");
    assert!(report.state_location.starts_with("DWH_State.dpone"));
    // The state's placement is a requirement a run verifies, never reported as checked here.
    assert!(
        report
            .state_location
            .contains("not verified by check, verified by run's preflight"),
        "{}",
        report.state_location
    );
    assert!(
        report
            .not_checked
            .iter()
            .any(|n| n.contains("same principal") && n.contains("not here")),
        "{:?}",
        report.not_checked
    );
    assert!(
        report.checked.iter().all(|c| !c.contains("instance")),
        "{:?}",
        report.checked
    );
    // No endpoint or credential in the report or Debug output.
    let dbg = format!(
        "{:?}{}",
        route.resolved,
        serde_json::to_string(&report).unwrap_or_default()
    );
    assert!(
        !dbg.contains("sql.internal") && !dbg.contains("\"m\""),
        "{dbg}"
    );

    // Staging defaults to the target database and `dbo`.
    let m = MSSQL_MANIFEST
        .replace("  staging_database: DWH_Stage\n", "")
        .replace("  staging_schema: dpone_stage\n", "");
    let route = mssql_route(&m, MSSQL_REGISTRY).expect("defaults");
    let pins = route.resolved.target_pins.sql_server().expect("sql server");
    assert_eq!(pins.pin(MssqlRole::Staging).name, "DWH");
    assert_eq!(pins.staging_schema, "dbo");

    // A case-only alias resolves to the single canonical key.
    let m = MSSQL_MANIFEST.replace("staging_database: DWH_Stage", "staging_database: dwh_stage");
    let route = mssql_route(&m, MSSQL_REGISTRY).expect("alias");
    let pins = route.resolved.target_pins.sql_server().expect("sql server");
    assert_eq!(pins.pin(MssqlRole::Staging).name, "DWH_Stage");
}

#[test]
fn sql_server_identity_reacts_to_a_recreated_database() {
    let base = mssql_route(MSSQL_MANIFEST, MSSQL_REGISTRY).expect("route");
    // New GUID and create token of the target database: a different physical target.
    let recreated = MSSQL_REGISTRY.replace(
        "database_guid: '01234567-89ab-cdef-0123-456789abcdef'",
        "database_guid: '01234567-89ab-cdef-0123-456789abcdee'",
    );
    let other = mssql_route(MSSQL_MANIFEST, &recreated).expect("route");
    assert_ne!(
        base.identity.target_identity,
        other.identity.target_identity
    );
    assert_ne!(base.identity.state_key, other.identity.state_key);
    // A rotated staging pin keeps the target (and state key) but changes the route fingerprint.
    let rotated = MSSQL_REGISTRY.replace("database_id: 8", "database_id: 18");
    let other = mssql_route(MSSQL_MANIFEST, &rotated).expect("route");
    assert_eq!(
        base.identity.target_identity,
        other.identity.target_identity
    );
    assert_eq!(base.identity.state_key, other.identity.state_key);
    assert_ne!(
        base.identity.route_fingerprint,
        other.identity.route_fingerprint
    );
}

#[test]
fn sql_server_registry_and_manifest_refusals() {
    let code = |m: &str, r: &str| mssql_route(m, r).expect_err("must be refused").code();
    // Structural registry errors.
    for (from, to, want) in [
        (
            "database_guid: '01234567-89ab-cdef-0123-456789abcdef'",
            "database_guid: not-a-guid",
            ErrorCode::RegistryInvalid,
        ),
        (
            "create_token: '2026-08-16T09:14:22.1233333'",
            "create_token: '2026-08-16 09:14:22'",
            ErrorCode::RegistryInvalid,
        ),
        (
            "database_id: 7",
            "database_id: 0",
            ErrorCode::RegistryInvalid,
        ),
        (
            "      DWH_Stage:\n",
            "      dwh:\n",
            ErrorCode::RegistryRelationAliasAmbiguous,
        ),
        (
            "        database_guid: '89abcdef-0123-4567-89ab-cdef01234567'\n",
            "        database_guid: '89abcdef-0123-4567-89ab-cdef01234567'\n        extra: 1\n",
            ErrorCode::RegistryUnknownField,
        ),
        (
            "endpoint: {host: sql.internal, port: 1433, database: DWH, user",
            "endpoint: {host: sql.internal, port: 1433, database: Other, user",
            ErrorCode::RegistryPinMissing,
        ),
    ] {
        assert!(MSSQL_REGISTRY.contains(from), "{from}");
        assert_eq!(
            code(MSSQL_MANIFEST, &MSSQL_REGISTRY.replacen(from, to, 1)),
            want,
            "{to}"
        );
    }
    // A staging database the target connection does not pin.
    assert_eq!(
        code(
            &MSSQL_MANIFEST.replace("staging_database: DWH_Stage", "staging_database: Scratch"),
            MSSQL_REGISTRY
        ),
        ErrorCode::RegistryPinMissing
    );
    // A state database pinned by the target connection only is not the state connection's.
    assert_eq!(
        code(
            MSSQL_MANIFEST,
            &MSSQL_REGISTRY.replace(
                "DWH_State:\n        database_id: 9",
                "DWH_Other:\n        database_id: 9"
            )
        ),
        ErrorCode::RegistryPinMissing
    );
    // State on PostgreSQL with a SQL Server target cannot be target-atomic.
    assert_eq!(
        code(
            &MSSQL_MANIFEST.replace(
                "  type: mssql\n  connection_ref: mssql_state",
                "  type: postgres\n  connection_ref: mssql_state"
            ),
            MSSQL_REGISTRY
        ),
        ErrorCode::ManifestStateAtomicityUnsupported
    );
    // SQL Server fields on a PostgreSQL target are refused.
    assert_eq!(
        manifest_code(&MANIFEST.replace(
            "  table: orders\n",
            "  table: orders\n  staging_database: DWH_Stage\n"
        )),
        ErrorCode::ManifestInvalid
    );
    // The target connection must be of the target's kind.
    assert_eq!(
        code(
            &MSSQL_MANIFEST.replace("connection_ref: mssql_target", "connection_ref: pg_source"),
            MSSQL_REGISTRY
        ),
        ErrorCode::RegistryConnectionUnknown
    );
    // SQL Server pins on a PostgreSQL connection are refused.
    assert_eq!(
        registry_code(&REGISTRY.replace(
            "    default_schema: dpone_state\n    database_pin: {name: dwh, oid: 16500",
            "    default_schema: dpone_state\n    trust_server_certificate: true\n    database_pin: {name: dwh, oid: 16500"
        )),
        ErrorCode::RegistryInvalid
    );
}

#[test]
fn postgres_tls_options_are_checked_without_io() {
    use dpone_engine_xmin::registry::SslMode;
    let src =
        "endpoint: {host: /var/run/postgresql, port: 5432, database: shop, user: dpone_reader}";
    let with = |endpoint: &str| REGISTRY.replace(src, endpoint);
    // Defaults: a unix socket has no TLS; a host name is verify-full.
    let r = Registry::from_yaml(REGISTRY).expect("sample");
    assert_eq!(
        r.connections["pg_source"].endpoint.effective_sslmode(),
        SslMode::Disable
    );
    let tcp =
        with("endpoint: {host: db.example.com, port: 5432, database: shop, user: dpone_reader}");
    let r = Registry::from_yaml(&tcp).expect("tcp");
    assert_eq!(
        r.connections["pg_source"].endpoint.effective_sslmode(),
        SslMode::VerifyFull
    );
    for ok in [
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: dpone_reader, sslmode: verify-full, sslrootcert: /etc/dpone/ca.pem}",
        "endpoint: {host: '10.0.0.5', port: 5432, database: shop, user: dpone_reader, sslmode: verify-ca, sslrootcert: /etc/dpone/ca.pem}",
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: dpone_reader, sslmode: require}",
        "endpoint: {host: '127.0.0.1', port: 5432, database: shop, user: dpone_reader, sslmode: disable}",
        "endpoint: {host: /var/run/postgresql, port: 5432, database: shop, user: dpone_reader, sslmode: disable}",
    ] {
        Registry::from_yaml(&with(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for bad in [
        // TLS over a unix socket.
        "endpoint: {host: /var/run/postgresql, port: 5432, database: shop, user: dpone_reader, sslmode: require}",
        // A CA bundle that would be ignored.
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: dpone_reader, sslmode: require, sslrootcert: /etc/dpone/ca.pem}",
        // A relative CA path.
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: dpone_reader, sslmode: verify-full, sslrootcert: ca.pem}",
    ] {
        assert_eq!(
            registry_code(&with(bad)),
            ErrorCode::RegistryInvalid,
            "{bad}"
        );
    }
    // Unknown modes are refused by the schema.
    assert_ne!(
        Registry::from_yaml(&with(
            "endpoint: {host: db.example.com, port: 5432, database: shop, user: dpone_reader, sslmode: prefer}"
        ))
        .map(|_| ())
        .map_err(|e| e.code()),
        Ok(())
    );
}

/// `plan` prints the steps of the route's own target: SQL Server's server check, staging
/// before the lock and `OUTPUT` counts; never PostgreSQL's advisory lock or `RETURNING`.
#[test]
fn plan_prints_the_target_dialects_own_run_steps() {
    let m = Manifest::from_yaml(MANIFEST).expect("manifest");
    let r = Registry::from_yaml(REGISTRY).expect("registry");
    let pg = Route::prepare(m, &r, &env(), &Stub).expect("route");
    let pg_steps = pg.plan_report().steps;
    assert_eq!(pg_steps, dpone_engine_xmin::route::POSTGRES_RUN_STEPS);
    assert!(pg_steps.iter().any(|s| s.contains("advisory lock")));
    assert!(pg_steps.iter().all(|s| !s.contains("sp_getapplock")));

    let mssql = mssql_route(MSSQL_MANIFEST, MSSQL_REGISTRY).expect("route");
    let steps = mssql.plan_report().steps;
    assert_eq!(steps, dpone_engine_xmin::route::MSSQL_RUN_STEPS);
    for postgres_only in ["advisory lock", "RETURNING", "BEGIN SERIALIZABLE"] {
        assert!(
            steps.iter().all(|s| !s.contains(postgres_only)),
            "{postgres_only} in {steps:#?}"
        );
    }
    let at = |needle: &str| {
        steps
            .iter()
            .position(|s| s.contains(needle))
            .unwrap_or_else(|| panic!("no step with {needle:?}: {steps:#?}"))
    };
    // The server check comes first, staging before the transaction's lock, OUTPUT counts after.
    assert_eq!(at("server check"), 0);
    assert!(at("Babelfish") == 0);
    assert!(at("bulk load") < at("sp_getapplock"));
    assert!(at("sp_getapplock") < at("OUTPUT ... INTO"));
    assert!(at("source: stream delta") < at("bulk load"));
    // The check part says nothing was contacted.
    let plan = serde_json::to_value(mssql.plan_report()).expect("plan json");
    assert!(
        plan["not_checked"][0]
            .as_str()
            .is_some_and(|n| n.starts_with("no server was contacted")),
        "{plan}"
    );
}
