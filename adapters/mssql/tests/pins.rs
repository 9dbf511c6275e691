//! Pin verification on captured catalog rows.

use dpone_adapter_mssql::pins::{
    CatalogRow, DatabaseAuthorities, DatabaseAuthority, Role, RoleCapture, SessionIdentity,
    check_metadata_permission, pin_digest, resolve_alias, verify_database, verify_lease,
    verify_lease_identity, verify_route, verify_same_topology,
};

fn authorities() -> DatabaseAuthorities {
    let mut m = DatabaseAuthorities::new();
    m.insert(
        "DWH".into(),
        DatabaseAuthority {
            database_id: 7,
            create_token: "2026-08-16T09:14:22.1233333".into(),
            database_guid: "01234567-89ab-cdef-0123-456789abcdef".into(),
        },
    );
    m.insert(
        "DWH_Stage".into(),
        DatabaseAuthority {
            database_id: 8,
            create_token: "2026-08-16T09:15:01.1000000".into(),
            database_guid: "89abcdef-0123-4567-89ab-cdef01234567".into(),
        },
    );
    m
}

fn state_authorities() -> DatabaseAuthorities {
    let mut m = DatabaseAuthorities::new();
    m.insert(
        "DWH_State".into(),
        DatabaseAuthority {
            database_id: 9,
            create_token: "2026-08-16T09:16:00.0000000".into(),
            database_guid: "fedcba98-7654-3210-fedc-ba9876543210".into(),
        },
    );
    m
}

/// A row as SQL Server returns it (GUID upper case).
fn row(name: &str, pin: &DatabaseAuthority) -> CatalogRow {
    CatalogRow {
        name: name.into(),
        database_id: pin.database_id,
        create_token: pin.create_token.clone(),
        database_guid: Some(pin.database_guid.to_ascii_uppercase()),
        state_desc: "ONLINE".into(),
        user_access_desc: "MULTI_USER".into(),
        has_dbaccess: Some(1),
    }
}

fn session() -> SessionIdentity {
    SessionIdentity {
        server_name: "sql01".into(),
        machine_name: "sql01".into(),
        instance_name: None,
        product_version: "16.0.4135.4".into(),
        principal_name: "dpone_runtime".into(),
        principal_sid: "0x0105000000000009030000003F1B".into(),
    }
}

fn code(r: Result<(), dpone_adapter_mssql::pins::PinError>) -> String {
    r.unwrap_err().code
}

#[test]
fn exact_pin_passes() {
    let a = authorities();
    let pin = &a["DWH"];
    verify_database(Role::Target, "DWH", pin, &[row("DWH", pin)]).unwrap();
}

#[test]
fn recreated_database_new_guid_fails() {
    let a = authorities();
    let pin = &a["DWH"];
    let mut r = row("DWH", pin);
    r.database_guid = Some("11111111-2222-3333-4444-555555555555".into());
    assert_eq!(
        code(verify_database(Role::Target, "DWH", pin, &[r])),
        "mssql_transaction.target_database_pin_mismatch"
    );
}

#[test]
fn recreated_database_new_create_token_fails() {
    let a = authorities();
    let pin = &a["DWH"];
    let mut r = row("DWH", pin);
    r.create_token = "2026-09-01T00:00:00.0000000".into();
    assert_eq!(
        code(verify_database(Role::Target, "DWH", pin, &[r])),
        "mssql_transaction.target_database_pin_mismatch"
    );
}

#[test]
fn recreated_database_new_id_fails() {
    let a = authorities();
    let pin = &a["DWH"];
    let mut r = row("DWH", pin);
    r.database_id = 12;
    assert_eq!(
        code(verify_database(Role::Target, "DWH", pin, &[r])),
        "mssql_transaction.target_database_pin_mismatch"
    );
}

#[test]
fn missing_guid_row_fails() {
    let a = authorities();
    let pin = &a["DWH"];
    let mut r = row("DWH", pin);
    r.database_guid = None;
    assert_eq!(
        code(verify_database(Role::Target, "DWH", pin, &[r])),
        "mssql_transaction.target_database_pin_mismatch"
    );
}

#[test]
fn offline_fails() {
    let a = authorities();
    let pin = &a["DWH_Stage"];
    let mut r = row("DWH_Stage", pin);
    r.state_desc = "OFFLINE".into();
    assert_eq!(
        code(verify_database(Role::Staging, "DWH_Stage", pin, &[r])),
        "mssql_transaction.staging_database_not_online"
    );
}

#[test]
fn single_user_fails() {
    let a = authorities();
    let pin = &a["DWH"];
    let mut r = row("DWH", pin);
    r.user_access_desc = "SINGLE_USER".into();
    assert_eq!(
        code(verify_database(Role::Target, "DWH", pin, &[r])),
        "mssql_transaction.target_database_not_multi_user"
    );
}

#[test]
fn no_dbaccess_fails() {
    let a = authorities();
    let pin = &a["DWH"];
    for v in [Some(0), None] {
        let mut r = row("DWH", pin);
        r.has_dbaccess = v;
        assert_eq!(
            code(verify_database(Role::Target, "DWH", pin, &[r])),
            "mssql_transaction.target_database_access_denied"
        );
    }
}

#[test]
fn permission_denied_is_role_coded() {
    for (role, name) in [
        (Role::Target, "target"),
        (Role::Staging, "staging"),
        (Role::State, "state"),
    ] {
        for v in [Some(0), None] {
            assert_eq!(
                code(check_metadata_permission(role, v)),
                format!("mssql_transaction.{name}_database_metadata_permission_denied")
            );
        }
    }
    check_metadata_permission(Role::Target, Some(1)).unwrap();
}

#[test]
fn permission_is_checked_before_catalog_rows() {
    // With the grant denied the rows are invisible; the verdict must be the permission code,
    // not "database not found".
    let a = authorities();
    let s = state_authorities();
    let roles = [
        RoleCapture {
            role: Role::Target,
            requested: "DWH",
            authorities: &a,
            has_perms: Some(0),
            rows: &[],
        },
        RoleCapture {
            role: Role::State,
            requested: "DWH_State",
            authorities: &s,
            has_perms: Some(1),
            rows: &[row("DWH_State", &s["DWH_State"])],
        },
    ];
    assert_eq!(
        verify_route(&roles, &session(), &session())
            .unwrap_err()
            .code,
        "mssql_transaction.target_database_metadata_permission_denied"
    );
}

#[test]
fn casefold_decoy_is_rejected() {
    let a = authorities();
    let pin = &a["DWH"];
    let decoy = CatalogRow {
        name: "dwh".into(),
        database_id: 30,
        ..row("dwh", pin)
    };
    assert_eq!(
        code(verify_database(
            Role::Target,
            "DWH",
            pin,
            &[row("DWH", pin), decoy.clone()]
        )),
        "mssql_transaction.target_database_casefold_decoy"
    );
    // Only the decoy visible: still a decoy, never accepted as the pin.
    assert_eq!(
        code(verify_database(Role::Target, "DWH", pin, &[decoy])),
        "mssql_transaction.target_database_casefold_decoy"
    );
    // Non-ASCII fold (Unicode lower case) is a decoy too.
    let mut a2 = DatabaseAuthorities::new();
    a2.insert("STRASSE".into(), pin.clone());
    let u = row("straße", pin);
    assert!(verify_database(Role::Target, "STRASSE", pin, &[u]).is_err());
}

#[test]
fn exact_spelling_required() {
    let a = authorities();
    let pin = &a["DWH"];
    assert_eq!(
        code(verify_database(Role::Target, "DWH", pin, &[])),
        "mssql_transaction.target_database_not_found"
    );
}

#[test]
fn case_only_alias_resolves_and_ambiguity_fails() {
    let a = authorities();
    assert_eq!(resolve_alias(Role::Target, &a, "DWH").unwrap(), "DWH");
    assert_eq!(resolve_alias(Role::Target, &a, "dwh").unwrap(), "DWH");
    assert_eq!(
        resolve_alias(Role::Staging, &a, "dwh_stage").unwrap(),
        "DWH_Stage"
    );
    assert_eq!(
        resolve_alias(Role::Target, &a, "DWH2").unwrap_err().code,
        "mssql_transaction.target_database_pin_missing"
    );
    let mut b = a.clone();
    b.insert("dwh".into(), a["DWH"].clone());
    assert_eq!(
        resolve_alias(Role::Target, &b, "Dwh").unwrap_err().code,
        "mssql_transaction.target_database_alias_ambiguous"
    );
}

#[test]
fn different_topology_or_principal_fails() {
    let t = session();
    verify_same_topology(&t, &t).unwrap();
    let mut other = t.clone();
    other.server_name = "sql02".into();
    assert_eq!(
        code(verify_same_topology(&t, &other)),
        "mssql_transaction.state_topology_mismatch"
    );
    let mut named = t.clone();
    named.instance_name = Some("REPLICA".into());
    assert_eq!(
        code(verify_same_topology(&t, &named)),
        "mssql_transaction.state_topology_mismatch"
    );
    let mut p = t.clone();
    p.principal_sid = "0x01".into();
    assert_eq!(
        code(verify_same_topology(&t, &p)),
        "mssql_transaction.state_principal_mismatch"
    );
}

#[test]
fn staging_lease_must_reach_the_target_instance_as_the_same_principal() {
    let t = session();
    verify_lease_identity(&t, &t).unwrap();
    let mut other = t.clone();
    other.machine_name = "failover-node".into();
    assert_eq!(
        code(verify_lease_identity(&t, &other)),
        "mssql_transaction.staging_topology_mismatch"
    );
    let mut p = t.clone();
    p.principal_name = "someone_else".into();
    assert_eq!(
        code(verify_lease_identity(&t, &p)),
        "mssql_transaction.staging_principal_mismatch"
    );
}

#[test]
fn lease_checks_session_database() {
    let a = authorities();
    let pin = &a["DWH_Stage"];
    verify_lease("DWH_Stage", pin, 8, "DWH_Stage").unwrap();
    assert_eq!(
        code(verify_lease("DWH_Stage", pin, 9, "DWH_Stage")),
        "mssql_transaction.staging_lease_lost"
    );
    assert_eq!(
        code(verify_lease("DWH_Stage", pin, 8, "master")),
        "mssql_transaction.staging_lease_lost"
    );
}

#[test]
fn route_verifies_in_order_and_digest_is_role_aware() {
    let a = authorities();
    let s = state_authorities();
    let t_rows = [row("DWH", &a["DWH"])];
    let st_rows = [row("DWH_Stage", &a["DWH_Stage"])];
    let s_rows = [row("DWH_State", &s["DWH_State"])];
    let roles = [
        RoleCapture {
            role: Role::State,
            requested: "DWH_State",
            authorities: &s,
            has_perms: Some(1),
            rows: &s_rows,
        },
        RoleCapture {
            role: Role::Target,
            requested: "dwh",
            authorities: &a,
            has_perms: Some(1),
            rows: &t_rows,
        },
        RoleCapture {
            role: Role::Staging,
            requested: "DWH_Stage",
            authorities: &a,
            has_perms: Some(1),
            rows: &st_rows,
        },
    ];
    let d = verify_route(&roles, &session(), &session()).unwrap();
    assert_eq!(d.len(), 64);
    // Same pins under another role give another digest.
    let swapped = pin_digest(&[
        (Role::Staging, "DWH".into(), a["DWH"].clone()),
        (Role::Target, "DWH_Stage".into(), a["DWH_Stage"].clone()),
        (Role::State, "DWH_State".into(), s["DWH_State"].clone()),
    ]);
    assert_ne!(d, swapped);
    // GUID case does not change the digest; a rotated pin does.
    let mut rotated = a.clone();
    rotated.get_mut("DWH").unwrap().database_guid = "11111111-2222-3333-4444-555555555555".into();
    let base = pin_digest(&[(Role::Target, "DWH".into(), a["DWH"].clone())]);
    let mut upper = a["DWH"].clone();
    upper.database_guid = upper.database_guid.to_ascii_uppercase();
    assert_eq!(base, pin_digest(&[(Role::Target, "DWH".into(), upper)]));
    assert_ne!(
        base,
        pin_digest(&[(Role::Target, "DWH".into(), rotated["DWH"].clone())])
    );
    // Staging failure is reported before state (order target, staging, state).
    let bad_stage = [CatalogRow {
        state_desc: "OFFLINE".into(),
        ..row("DWH_Stage", &a["DWH_Stage"])
    }];
    let bad_state = [CatalogRow {
        user_access_desc: "SINGLE_USER".into(),
        ..row("DWH_State", &s["DWH_State"])
    }];
    let roles = [
        RoleCapture {
            rows: &bad_state,
            ..roles[0].clone()
        },
        roles[1].clone(),
        RoleCapture {
            rows: &bad_stage,
            ..roles[2].clone()
        },
    ];
    assert_eq!(
        verify_route(&roles, &session(), &session())
            .unwrap_err()
            .code,
        "mssql_transaction.staging_database_not_online"
    );
}

/// Days from 0001-01-01 to a civil date (the `datetime2` wire form of a date), for the tests.
fn days_since_0001(y: i64, m: i64, d: i64) -> u32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    u32::try_from(era * 146_097 + doe - 719_468 + 719_162).unwrap()
}

#[test]
fn create_token_is_always_the_27_character_canonical_form() {
    use dpone_adapter_mssql::pins::create_token;
    let day = days_since_0001(2026, 8, 16);
    let at = |h: u64, m: u64, s: u64| (h * 3600 + m * 60 + s) * 10_000_000;
    // A database created on a whole second (style 126 would drop the fraction: 19 characters).
    let whole = create_token(day, at(9, 14, 22), 7).unwrap();
    assert_eq!(whole, "2026-08-16T09:14:22.0000000");
    // `datetime` .123 as datetime2(7).
    assert_eq!(
        create_token(day, at(9, 14, 22) + 1_233_333, 7).unwrap(),
        "2026-08-16T09:14:22.1233333"
    );
    // Another scale is normalised to seven digits.
    assert_eq!(
        create_token(day, (at(9, 14, 22) / 10_000) + 123, 3).unwrap(),
        "2026-08-16T09:14:22.1230000"
    );
    assert_eq!(
        create_token(days_since_0001(2000, 2, 29), 0, 7).unwrap(),
        "2000-02-29T00:00:00.0000000"
    );
    assert_eq!(
        create_token(0, 0, 7).unwrap(),
        "0001-01-01T00:00:00.0000000"
    );
    assert_eq!(
        create_token(days_since_0001(9999, 12, 31), at(23, 59, 59) + 9_999_999, 7).unwrap(),
        "9999-12-31T23:59:59.9999999"
    );
    // Out of range: a time of day past midnight, a scale above 7, a date past 9999.
    assert_eq!(create_token(day, at(24, 0, 0), 7), None);
    assert_eq!(create_token(day, 0, 8), None);
    assert_eq!(create_token(days_since_0001(9999, 12, 31) + 1, 0, 7), None);
    // Every token the adapter produces is one the registry accepts as a pin, and a pin written
    // from it verifies: the whole-second database is pinnable.
    let registry = format!(
        "version: 1\nenvironment: test\nconnections:\n  t:\n    kind: mssql_target\n    endpoint: {{host: h, port: 1433, database: D, user: u}}\n    password_env: P\n    database_authorities:\n      D: {{database_id: 5, create_token: '{whole}', database_guid: '01234567-89ab-cdef-0123-456789abcdef'}}\n"
    );
    dpone_engine_xmin::registry::Registry::from_yaml(&registry).expect("registry accepts it");
    let pin = DatabaseAuthority {
        database_id: 5,
        create_token: whole.clone(),
        database_guid: "01234567-89ab-cdef-0123-456789abcdef".into(),
    };
    verify_database(Role::Target, "D", &pin, &[row("D", &pin)]).unwrap();
}

#[test]
fn sid_is_hex_encoded_without_a_convert_style() {
    use dpone_adapter_mssql::pins::sid_hex;
    assert_eq!(sid_hex(&[0x01, 0x05, 0xab]), "0x0105AB");
    assert_eq!(sid_hex(&[]), "0x");
}

#[test]
fn pin_statements_depend_on_no_convert_style() {
    // Styles are where SQL Server versions and TDS look-alikes differ (126 drops a zero
    // fraction); the pin and identity statements return typed values formatted in Rust.
    use dpone_adapter_mssql::sql;
    for (name, s) in [
        ("catalog_rows", sql::CATALOG_ROWS),
        ("session_identity", sql::SESSION_IDENTITY),
        ("server_facts", sql::SERVER_FACTS),
    ] {
        let upper = s.to_ascii_uppercase();
        for style in [", 126)", ", 127)", ", 1)", ", 2)", ", 121)", ", 120)"] {
            assert!(!upper.contains(style), "{name} uses CONVERT style {style}");
        }
        assert!(!upper.contains("FORMAT("), "{name} uses FORMAT");
    }
    assert!(sql::CATALOG_ROWS.contains("CAST(d.create_date AS datetime2(7)) AS create_date"));
}
