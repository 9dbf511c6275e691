//! Pin discovery for the environment owner: reads the *current* identity of a source relation or
//! a target database so the owner can review it and write it into the registry.
//!
//! The runtime never calls these: it only verifies signed pins and never learns identity.

use crate::conn::connect;
use crate::sql::db_error;
use dpone_engine_xmin::registry::{
    AuthorityProfile, DatabasePin, Endpoint, NamedOid, RecoveryRole, RelationPin, SourceAuthority,
};
use dpone_engine_xmin::{ErrorCode, Result, XminError};
use std::collections::BTreeMap;

const APP: &str = "dpone-host pin discovery";

/// Reads a target database pin (name, OID, system identifier).
pub async fn discover_database_pin(ep: &Endpoint) -> Result<DatabasePin> {
    let conn = connect(ep, ErrorCode::TargetConnect, APP).await?;
    let row = conn
        .client
        .query_one(
            "SELECT current_database()::text, \
                    (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()), \
                    (SELECT system_identifier::text FROM pg_catalog.pg_control_system())",
            &[],
        )
        .await
        .map_err(|e| db_error(ErrorCode::TargetStatementFailed, "discover pin", &e))?;
    Ok(DatabasePin {
        name: row.get(0),
        oid: row.get(1),
        system_identifier: row.get(2),
    })
}

/// Reads a source authority document for `relations` (`schema.relation`, exact names) in the
/// given profile (version 1 reads control data and needs its grants).
pub async fn discover_source_authority(
    ep: &Endpoint,
    profile: AuthorityProfile,
    relations: &[&str],
) -> Result<SourceAuthority> {
    let conn = connect(ep, ErrorCode::SourceConnect, APP).await?;
    let c = &conn.client;
    let err = |e: tokio_postgres::Error| {
        db_error(ErrorCode::SourceExtractionFailed, "discover authority", &e)
    };
    let row = c
        .query_one(
            "SELECT pg_is_in_recovery(), current_database()::text, \
                    (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()), \
                    current_user::text, (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), \
                    session_user::text, (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = session_user)",
            &[],
        )
        .await
        .map_err(err)?;
    let mut pins = BTreeMap::new();
    for rel in relations {
        let (schema, name) = rel.split_once('.').ok_or_else(|| {
            XminError::new(
                ErrorCode::ManifestIdentifierInvalid,
                "relation must be schema.relation",
            )
        })?;
        let r = c
            .query_opt(
                "SELECT n.oid, cl.oid FROM pg_catalog.pg_class cl JOIN pg_catalog.pg_namespace n \
                 ON n.oid = cl.relnamespace WHERE n.nspname = $1 AND cl.relname = $2",
                &[&schema, &name],
            )
            .await
            .map_err(err)?
            .ok_or_else(|| {
                XminError::new(ErrorCode::SourceRelationMissing, "relation not found")
            })?;
        pins.insert(
            (*rel).to_owned(),
            RelationPin {
                schema_oid: r.get(0),
                relation_oid: r.get(1),
            },
        );
    }
    let (version, system_identifier, timeline) = match profile {
        AuthorityProfile::CatalogIdentity => (2, None, None),
        AuthorityProfile::PhysicalCluster => {
            let r = c
                .query_one(
                    "SELECT (SELECT system_identifier::text FROM pg_catalog.pg_control_system()), \
                            (SELECT timeline_id FROM pg_catalog.pg_control_checkpoint())",
                    &[],
                )
                .await
                .map_err(err)?;
            let tli: i32 = r.get(1);
            (1, Some(r.get(0)), u32::try_from(tli).ok())
        }
    };
    Ok(SourceAuthority {
        version,
        profile,
        recovery_role: if row.get::<_, bool>(0) {
            RecoveryRole::Standby
        } else {
            RecoveryRole::Primary
        },
        database: NamedOid {
            name: row.get(1),
            oid: row.get(2),
        },
        effective_principal: NamedOid {
            name: row.get(3),
            oid: row.get(4),
        },
        session_principal: NamedOid {
            name: row.get(5),
            oid: row.get(6),
        },
        relations: pins,
        system_identifier,
        timeline,
    })
}
