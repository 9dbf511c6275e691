//! The engine's target and state ports on SQL Server.
//!
//! [`MssqlTarget`] is the [`TargetPort`]: its preflight verifies the `database_authorities`
//! pins of target, staging and state against the master catalog (permission first), proves the
//! target and state sessions share topology and effective principal, freezes the finalizer from
//! the target's columns and checks the state catalog — all before source I/O. Reads outside the
//! run (state, receipt probes, authority preview) use a control session. Every session first
//! proves it reached a supported SQL Server ([`check_server`]; Babelfish and older versions are
//! refused). `begin` does not depend on preflight: it re-verifies the server, the pins and the
//! target's columns on the run's own connection, as the PostgreSQL port does.
//!
//! [`MssqlSession`] is the [`TargetSession`]: the run connection ([`RunTransaction`]) plus the
//! staging lease ([`StagingLease`]) on the signed staging database. Staging tables get a fresh
//! name per run; they are created, bulk-loaded and dropped on the lease (checked before and
//! after each action), and read by the finalizer through three-part names on the run
//! connection. Staging is committed data outside the run transaction: the run transaction reads
//! it but never depends on it surviving a failure, and cleanup drops it after commit or
//! rollback (best effort; names are unique, so a leftover never collides).

use crate::catalog;
use crate::conn::{self, ConnError, MssqlClient};
use crate::pins::{self, CatalogRow, DatabaseAuthorities, PinError, RoleCapture, SessionIdentity};
use crate::server::{self, ServerClass};
use crate::session::{
    RunTransaction, StagingError, StagingLease, iso_utc, lease_error, staged_payload_error, to_xmin,
};
use crate::shape::{self, ColumnRow};
use crate::sql::{
    BusinessColumn, DELETED_AT_COLUMN, DeleteMode, Finalizer, IS_DELETED_COLUMN, KeyColumn,
    MissingAction, StateNames, ThreePart, ident, is_collation_name,
};
use crate::stage;
use dpone_engine_xmin::artifact::ArtifactStore;
use dpone_engine_xmin::envelope::SnapshotEnvelope;
use dpone_engine_xmin::identity::sha256_hex;
use dpone_engine_xmin::manifest::StateTables;
use dpone_engine_xmin::ports::{
    ApplyStep, CheckpointCas, Parity, Populations, RunRecord, Staged, StateView, TargetPort,
    TargetSession,
};
use dpone_engine_xmin::registry::{Endpoint, MssqlRole, MssqlRoutePins};
use dpone_engine_xmin::state::{AuthorityRecord, CommitReceipt, Consumption, SourceState};
use dpone_engine_xmin::{ErrorCode, Result, Route, XminError};
use dpone_policy_model::delete_mode::{
    ActivePredicate, Classification, ColumnRole, DeletePlan, FlagEffect, KeyState, Mode,
    ReservedColumn, RowAction, TimestampEffect,
};
use dpone_policy_model::guard::{ActiveOwner, Checkpoint, TransferBinding};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};
use tiberius::Row;

/// Everything the SQL Server target needs from a prepared route.
#[derive(Clone, Debug)]
pub struct MssqlTargetSpec {
    /// Target connection (its credential also opens the staging lease).
    pub endpoint: Endpoint,
    /// Target, staging and state pins and the state connection.
    pub pins: MssqlRoutePins,
    /// Target schema.
    pub schema: String,
    /// Target table.
    pub table: String,
    /// Unique key, in key order.
    pub keys: Vec<String>,
    /// Business columns, in manifest order.
    pub business: Vec<String>,
    /// The delete-mode plan (mode, reserved columns, active predicate and one rule per key
    /// state); the finalizer executes it only if it is exactly what the T-SQL does
    /// ([`check_delete_plan`]).
    pub plan: DeletePlan,
    /// State schema (in the state database).
    pub state_schema: String,
    /// State table names.
    pub state: StateTables,
}

impl MssqlTargetSpec {
    /// The spec of a prepared route with a SQL Server target.
    pub fn from_route(route: &Route) -> Result<Self> {
        let pins = route.resolved.target_pins.sql_server().ok_or_else(|| {
            XminError::new(
                ErrorCode::ManifestUnsupportedRoute,
                "the route's target is not SQL Server",
            )
        })?;
        Ok(Self {
            endpoint: route.resolved.target.clone(),
            pins: pins.clone(),
            schema: route.manifest.target_schema.clone(),
            table: route.manifest.target_table.clone(),
            keys: route.manifest.unique_key.clone(),
            business: route.manifest.business_columns(),
            plan: route.plan.clone(),
            state_schema: route.resolved.state_schema.clone(),
            state: route.manifest.state.clone(),
        })
    }

    fn db(&self, role: MssqlRole) -> &str {
        &self.pins.pin(role).name
    }

    /// State tables by three-part name in the pinned state database.
    pub fn state_names(&self) -> StateNames {
        let t = |n: &str| ThreePart::new(self.db(MssqlRole::State), &self.state_schema, n);
        StateNames {
            source_state: t(&self.state.source_state),
            run: t(&self.state.run),
            receipt: t(&self.state.receipt),
            repair_authority: t(&self.state.repair_authority),
            repair_consumption: t(&self.state.repair_consumption),
        }
    }

    /// The delete mode of the target table and the missing-key action, as the delete-mode
    /// plan fixes them (a hard-delete target has no reserved soft-delete columns).
    pub fn delete_shape(&self) -> (DeleteMode, MissingAction) {
        match self.plan.mode {
            Mode::TimestampOnly => (DeleteMode::TimestampOnly, MissingAction::SoftDelete),
            Mode::TimestampAndFlag => (DeleteMode::TimestampAndFlag, MissingAction::SoftDelete),
            Mode::FlagOnly => (DeleteMode::FlagOnly, MissingAction::SoftDelete),
            Mode::HardDelete => (DeleteMode::Hard, MissingAction::HardDelete),
        }
    }

    /// What [`Self::check_plan`] establishes, as `check` and `plan` report it.
    pub const PLAN_CHECKS: &'static [&'static str] = &[
        "the delete-mode plan is exactly what the SQL Server finalizer executes",
        "every staged column name is one the bulk load can name",
    ];

    /// What the route's own coordinates can prove without I/O (`check`, `plan` and every run
    /// before extraction): the delete-mode plan is exactly what the finalizer executes, and
    /// every staged column name is one the bulk load can send unquoted.
    pub fn check_plan(&self) -> Result<()> {
        check_delete_plan(&self.plan)
            .map_err(|m| XminError::new(ErrorCode::DeleteModeRejected, m))?;
        for name in self.keys.iter().chain(&self.business) {
            shape::check_bulk_column_name(name)
                .map_err(|m| XminError::new(ErrorCode::TargetColumnTypeUnsupported, m))?;
        }
        Ok(())
    }

    /// Freezes the finalizer from the target's captured columns and checks the shape and the
    /// bulk-load limits (before any extraction, staging or transaction).
    pub fn finalizer(&self, columns: &[ColumnRow]) -> Result<Finalizer> {
        let invalid = |m: String| {
            XminError::new(
                ErrorCode::TargetTableInvalid,
                format!("{}: {m}", shape::TARGET_TABLE_INVALID),
            )
        };
        let find = |name: &str| {
            columns
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| invalid(format!("column {name:?} is missing")))
        };
        let keys = self
            .keys
            .iter()
            .map(|k| {
                let c = find(k)?;
                let ty = c.key_type().ok_or_else(|| {
                    invalid(format!(
                        "key column {k:?} must be int, bigint, uniqueidentifier or nvarchar(n)"
                    ))
                })?;
                Ok(KeyColumn {
                    name: k.clone(),
                    ty,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let business = self
            .business
            .iter()
            .map(|b| {
                let c = find(b)?;
                let collation = match &c.collation_name {
                    Some(name) if !is_collation_name(name) => {
                        return Err(invalid(format!(
                            "column {b:?} has a collation name that cannot be written into DDL"
                        )));
                    }
                    other => other.clone(),
                };
                Ok(BusinessColumn {
                    name: b.clone(),
                    type_sql: c.type_sql(),
                    collation,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (mode, missing) = self.delete_shape();
        let staging =
            |n: &str| ThreePart::new(self.db(MssqlRole::Staging), &self.pins.staging_schema, n);
        let fin = Finalizer {
            target: ThreePart::new(self.db(MssqlRole::Target), &self.schema, &self.table),
            stage_rows: staging("dpone_stage_rows"),
            stage_keys: staging("dpone_stage_keys"),
            keys,
            business,
            mode,
            missing,
            state: self.state_names(),
        };
        fin.validate().map_err(|code| {
            XminError::new(
                ErrorCode::TargetTableInvalid,
                format!("{code}: the target's key or columns cannot be reconciled"),
            )
        })?;
        shape::verify_target(&fin, columns).map_err(invalid)?;
        self.check_plan()?;
        for b in &self.business {
            shape::check_bulk_column(find(b)?)
                .map_err(|m| XminError::new(ErrorCode::TargetColumnTypeUnsupported, m))?;
        }
        Ok(fin)
    }
}

/// Stable code: the delete-mode plan asks for something the T-SQL finalizer does not do.
pub const DELETE_PLAN_UNSUPPORTED: &str = "mssql_transaction.delete_plan_unsupported";

/// The plan the T-SQL finalizer executes for a mode: its reserved columns, its active
/// predicate and, per key state, what its statements do — insert (business columns, the
/// marker written as active: `__dpone__deleted_at = NULL` or `__dpone__is_deleted = 0`),
/// update-changed (business columns only), identical rows untouched (exact comparison),
/// reactivate (business columns, marker active), the missing action (soft: timestamp set to the
/// detection time or flag set; hard: `DELETE`), already-deleted rows untouched (the first
/// detection time kept).
pub fn executed_plan(mode: Mode) -> DeletePlan {
    use TimestampEffect as T;
    let reserved = |name: &str, role| ReservedColumn {
        name: name.into(),
        role,
    };
    let (columns, active_predicate) = match mode {
        Mode::TimestampOnly => (
            vec![reserved(DELETED_AT_COLUMN, ColumnRole::DeletedAt)],
            ActivePredicate::DeletedAtIsNull,
        ),
        Mode::TimestampAndFlag => (
            vec![
                reserved(DELETED_AT_COLUMN, ColumnRole::DeletedAt),
                reserved(IS_DELETED_COLUMN, ColumnRole::DeletedFlagComputed),
            ],
            ActivePredicate::DeletedAtIsNull,
        ),
        Mode::FlagOnly => (
            vec![reserved(IS_DELETED_COLUMN, ColumnRole::DeletedFlagStored)],
            ActivePredicate::FlagIsFalse,
        ),
        Mode::HardDelete => (Vec::new(), ActivePredicate::EveryRow),
    };
    // (timestamp, flag) effects of writing the marker as active / deleted / kept.
    let (active, deleted, kept) = match mode {
        Mode::TimestampOnly | Mode::TimestampAndFlag => (
            (T::Clear, FlagEffect::None),
            (T::SetDetectionTime, FlagEffect::None),
            (T::Keep, FlagEffect::None),
        ),
        Mode::FlagOnly => (
            (T::None, FlagEffect::SetFalse),
            (T::None, FlagEffect::SetTrue),
            (T::None, FlagEffect::Keep),
        ),
        Mode::HardDelete => (
            (T::None, FlagEffect::None),
            (T::None, FlagEffect::None),
            (T::None, FlagEffect::None),
        ),
    };
    let untouched = (T::None, FlagEffect::None);
    let rule = |state, action, write, (deleted_at, deleted_flag): (T, FlagEffect)| Classification {
        state,
        action,
        write_business_columns: write,
        deleted_at,
        deleted_flag,
    };
    let missing = if mode == Mode::HardDelete {
        rule(KeyState::Missing, RowAction::HardDelete, false, untouched)
    } else {
        rule(KeyState::Missing, RowAction::SoftDelete, false, deleted)
    };
    DeletePlan {
        mode,
        columns,
        active_predicate,
        rules: vec![
            rule(KeyState::NewInSource, RowAction::Insert, true, active),
            rule(KeyState::Changed, RowAction::Update, true, untouched),
            rule(KeyState::Identical, RowAction::Unchanged, false, untouched),
            rule(KeyState::Reappeared, RowAction::Reactivate, true, active),
            missing,
            rule(KeyState::StillMissing, RowAction::KeepDeleted, false, kept),
        ],
    }
}

/// Refuses a delete-mode plan that is not exactly [`executed_plan`] of its mode: other reserved
/// columns, another active predicate, or any rule (per key state, exactly one each) that the
/// finalizer's statements would not carry out as stated. The adapter follows the plan's rules,
/// not only its mode.
pub fn check_delete_plan(plan: &DeletePlan) -> std::result::Result<(), String> {
    let want = executed_plan(plan.mode);
    let refuse = |what: &str| {
        Err(format!(
            "{DELETE_PLAN_UNSUPPORTED}: the delete-mode plan's {what} is not what the SQL Server              finalizer executes for {:?}",
            plan.mode
        ))
    };
    let mut columns = plan.columns.clone();
    columns.sort_by(|a, b| a.name.cmp(&b.name));
    let mut want_columns = want.columns.clone();
    want_columns.sort_by(|a, b| a.name.cmp(&b.name));
    if columns != want_columns {
        return refuse("reserved columns");
    }
    if plan.active_predicate != want.active_predicate {
        return refuse("active predicate");
    }
    for w in &want.rules {
        let mut it = plan.rules.iter().filter(|r| r.state == w.state);
        match (it.next(), it.next()) {
            (Some(r), None) if r == w => {}
            _ => return refuse(&format!("rule for {:?}", w.state)),
        }
    }
    if plan.rules.len() != want.rules.len() {
        return refuse("rule table");
    }
    Ok(())
}

/// Maps a pin failure to the engine's codes; the adapter's detail code leads the message.
pub fn pin_error(e: &PinError) -> XminError {
    let code = if e.code.starts_with("mssql_transaction.server_") {
        ErrorCode::TargetServerUnsupported
    } else if e.code.ends_with("metadata_permission_denied") {
        ErrorCode::TargetMetadataPermissionDenied
    } else if e.code.ends_with("topology_mismatch") || e.code.ends_with("principal_mismatch") {
        ErrorCode::TargetTopologyMismatch
    } else if e.code.ends_with("lease_lost") {
        ErrorCode::TargetStagingAuthorityLost
    } else {
        ErrorCode::TargetDatabasePinMismatch
    };
    XminError::new(code, e.to_string())
}

fn staging_error(e: StagingError) -> XminError {
    match e {
        StagingError::Authority(p) => XminError::new(
            ErrorCode::TargetStagingAuthorityLost,
            format!("{p} (staging authority lost)"),
        ),
        StagingError::Conn(c) => lease_error(&c),
    }
}

/// Staging reads on the run connection (the staged counts): the payload's own faults keep
/// their snapshot codes; everything else is a statement failure.
fn staging_conn_error(e: &ConnError) -> XminError {
    staged_payload_error(e).unwrap_or_else(|| to_xmin(e))
}

fn cx(e: ConnError) -> XminError {
    to_xmin(&e)
}

fn to_i64(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        XminError::new(
            ErrorCode::TargetStatementFailed,
            "a 64-bit value exceeds bigint",
        )
    })
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The scheduler identity of an invocation (contract v2: one receipt per invocation digest).
/// It binds the invocation only, so a retry after a pin rotation finds the existing receipt.
pub fn invocation_digest(invocation_id: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"dpone.xmin.invocation.v1\n");
    h.update(invocation_id.as_bytes());
    h.finalize().into()
}

use conn::last_result as query_rows;

/// Inserts a run row (`record_run` inside the transaction, `insert_failed_run` outside it).
async fn insert_run(
    client: &mut MssqlClient,
    step: &'static str,
    statement: &str,
    run: &RunRecord,
) -> Result<()> {
    let evidence = run.evidence.to_string();
    query_rows(
        client,
        step,
        statement,
        &[
            &run.run_id.as_str(),
            &run.invocation_id.as_str(),
            &run.state_key.as_str(),
            &run.status,
            &run.code.as_deref(),
            &evidence.as_str(),
        ],
    )
    .await
    .map_err(cx)?;
    Ok(())
}

fn shape_err(step: &'static str) -> XminError {
    XminError::new(
        ErrorCode::StateCatalogInvalid,
        format!("{step}: a state row does not have the reviewed shape"),
    )
}

fn get_str(row: &Row, i: usize, step: &'static str) -> Result<String> {
    row.try_get::<&str, _>(i)
        .ok()
        .flatten()
        .map(|s| s.trim_end().to_owned())
        .ok_or_else(|| shape_err(step))
}

fn get_i64(row: &Row, i: usize, step: &'static str) -> Result<i64> {
    row.try_get::<i64, _>(i)
        .ok()
        .flatten()
        .ok_or_else(|| shape_err(step))
}

fn get_i32(row: &Row, i: usize, step: &'static str) -> Result<i32> {
    row.try_get::<i32, _>(i)
        .ok()
        .flatten()
        .ok_or_else(|| shape_err(step))
}

fn state_from_row(row: &Row) -> Result<SourceState> {
    const STEP: &str = "read state";
    let identity = row
        .try_get::<&[u8], _>(1)
        .ok()
        .flatten()
        .ok_or_else(|| shape_err(STEP))?;
    Ok(SourceState {
        state_key: get_str(row, 0, STEP)?,
        target_identity: hex::encode(identity),
        scope_hash: get_str(row, 2, STEP)?,
        checkpoint: Checkpoint {
            xmin: to_u64(get_i64(row, 3, STEP)?),
            revision: to_u64(get_i64(row, 4, STEP)?),
        },
        visible_horizon: to_u64(get_i64(row, 5, STEP)?),
        last_receipt_id: get_str(row, 6, STEP)?,
        superseded: get_i32(row, 7, STEP)? == 1,
    })
}

fn authority_from_row(row: &Row) -> Result<AuthorityRecord> {
    const STEP: &str = "read authority";
    Ok(AuthorityRecord {
        authority_id: get_str(row, 0, STEP)?,
        recorded_digest: get_str(row, 1, STEP)?,
        // The document is kept byte-exact: its digest is recomputed from these bytes.
        document: row
            .try_get::<&str, _>(2)
            .ok()
            .flatten()
            .map(str::to_owned)
            .ok_or_else(|| shape_err(STEP))?,
        consumed: get_i32(row, 3, STEP)? == 1,
    })
}

fn receipt_from_row(row: &Row) -> Result<CommitReceipt> {
    let body = row
        .try_get::<&str, _>(0)
        .ok()
        .flatten()
        .ok_or_else(|| shape_err("read receipt"))?;
    serde_json::from_str(body).map_err(|_| {
        XminError::new(
            ErrorCode::StateCatalogInvalid,
            "stored receipt does not parse",
        )
    })
}

/// The SQL Server target and state database.
pub struct MssqlTarget {
    spec: MssqlTargetSpec,
    fin: Option<Finalizer>,
    control: Option<MssqlClient>,
}

impl MssqlTarget {
    /// A target for a spec; connects lazily.
    pub fn new(spec: MssqlTargetSpec) -> Self {
        Self {
            spec,
            fin: None,
            control: None,
        }
    }

    /// A target for a prepared route.
    pub fn for_route(route: &Route) -> Result<Self> {
        Ok(Self::new(MssqlTargetSpec::from_route(route)?))
    }

    /// Every session of the port: connected, the server classified before anything else
    /// ([`check_server`]), then the session options set ([`crate::sql::SESSION_OPTIONS`]).
    async fn connect(&self, role: MssqlRole) -> Result<MssqlClient> {
        let endpoint = match role {
            MssqlRole::State => &self.spec.pins.state_endpoint,
            MssqlRole::Target | MssqlRole::Staging => &self.spec.endpoint,
        };
        let mut client = conn::connect_endpoint(
            endpoint,
            self.spec.db(role),
            self.spec.pins.trust_server_certificate,
        )
        .await
        .map_err(|e| XminError::new(conn::connect_code(&e), e.to_string()))?;
        check_server(&mut client).await?;
        conn::set_session_options(&mut client).await.map_err(cx)?;
        Ok(client)
    }

    async fn control(&mut self) -> Result<&mut MssqlClient> {
        if self.control.is_none() {
            self.control = Some(self.connect(MssqlRole::Target).await?);
        }
        self.control
            .as_mut()
            .ok_or_else(|| XminError::new(ErrorCode::TargetConnect, "no control session"))
    }

    /// Verifies the pins of target, staging then state and the shared topology; returns the
    /// role-aware pin digest and the target session's identity. With `state` absent every pin
    /// is read on `target` (the run connection, which reaches the state database by three-part
    /// name, so its view of the state database is the one that matters).
    async fn verify_pins(
        &self,
        target: &mut MssqlClient,
        mut state: Option<&mut MssqlClient>,
    ) -> Result<(String, SessionIdentity)> {
        let authorities: DatabaseAuthorities = self
            .spec
            .pins
            .pins
            .iter()
            .map(|p| (p.name.clone(), p.authority.clone()))
            .collect();
        let target_perms = conn::metadata_permission(target).await.map_err(cx)?;
        let state_perms = match state.as_deref_mut() {
            Some(s) => conn::metadata_permission(s).await.map_err(cx)?,
            None => target_perms,
        };
        let mut captured: Vec<(MssqlRole, Option<i32>, Vec<CatalogRow>)> = Vec::new();
        for pin in &self.spec.pins.pins {
            let perms = match pin.role {
                MssqlRole::State => state_perms,
                MssqlRole::Target | MssqlRole::Staging => target_perms,
            };
            // Permission first: without it the catalog rows are not interpretable.
            pins::check_metadata_permission(pin.role, perms).map_err(|e| pin_error(&e))?;
            let session: &mut MssqlClient = match (pin.role, state.as_deref_mut()) {
                (MssqlRole::State, Some(s)) => s,
                _ => &mut *target,
            };
            let rows = conn::catalog_rows(session, &pin.name).await.map_err(cx)?;
            captured.push((pin.role, perms, rows));
        }
        let roles: Vec<RoleCapture<'_>> = captured
            .iter()
            .zip(&self.spec.pins.pins)
            .map(|((role, perms, rows), pin)| RoleCapture {
                role: *role,
                requested: &pin.name,
                authorities: &authorities,
                has_perms: *perms,
                rows,
            })
            .collect();
        let target_identity = conn::session_identity(target).await.map_err(cx)?;
        let state_identity = match state {
            Some(s) => conn::session_identity(s).await.map_err(cx)?,
            None => target_identity.clone(),
        };
        let digest = pins::verify_route(&roles, &target_identity, &state_identity)
            .map_err(|e| pin_error(&e))?;
        if digest != self.spec.pins.digest() {
            return Err(XminError::new(
                ErrorCode::TargetDatabasePinMismatch,
                "verified pins differ from the route's pins",
            ));
        }
        Ok((digest, target_identity))
    }

    /// Reads the target's columns on a session in the target database and freezes the
    /// finalizer from them (shape checked, column types without an exact load refused);
    /// returns the columns too, for the per-value checks before staging.
    async fn freeze(&self, target: &mut MssqlClient) -> Result<(Finalizer, Vec<ColumnRow>)> {
        let object = format!("{}.{}", ident(&self.spec.schema), ident(&self.spec.table));
        let columns = conn::target_columns(target, &object).await.map_err(cx)?;
        if columns.is_empty() {
            return Err(XminError::new(
                ErrorCode::TargetTableInvalid,
                format!(
                    "{}: the target table does not exist",
                    shape::TARGET_TABLE_INVALID
                ),
            ));
        }
        let fin = self.spec.finalizer(&columns)?;
        let (indexes, instead_of, cascading) = conn::target_key_catalog(target, &object)
            .await
            .map_err(cx)?;
        catalog::verify_target_key(&self.spec.keys, &indexes, instead_of, cascading)
            .map_err(|m| XminError::new(ErrorCode::TargetTableInvalid, m))?;
        Ok((fin, columns))
    }

    /// Opens the staging lease: a session in the staging database on a supported server whose
    /// catalog row (id, GUID, create token, state) matches the pin and which reaches the run
    /// connection's instance as the same principal; `StagingLease::open` then checks its own
    /// `DB_ID()` and `DB_NAME()`.
    async fn open_lease(&self, run_session: &SessionIdentity) -> Result<StagingLease> {
        let pin = self.spec.pins.pin(MssqlRole::Staging).clone();
        let mut client = self.connect(MssqlRole::Staging).await?;
        let rows = conn::catalog_rows(&mut client, &pin.name)
            .await
            .map_err(cx)?;
        pins::verify_database(MssqlRole::Staging, &pin.name, &pin.authority, &rows)
            .map_err(|e| pin_error(&e))?;
        let lease_session = conn::session_identity(&mut client).await.map_err(cx)?;
        pins::verify_lease_identity(run_session, &lease_session).map_err(|e| pin_error(&e))?;
        StagingLease::open(client, &pin.name, pin.authority)
            .await
            .map_err(staging_error)
    }
}

/// Refuses a server that is not a supported SQL Server ([`server::classify`]); asked first on
/// every session, before any pin, staging or write.
pub async fn check_server(client: &mut MssqlClient) -> Result<ServerClass> {
    let facts = conn::server_facts(client).await.map_err(cx)?;
    server::classify(&facts).map_err(|e| pin_error(&e))
}

impl TargetPort for MssqlTarget {
    type Session = MssqlSession;

    async fn preflight(&mut self) -> Result<()> {
        let mut target = self.connect(MssqlRole::Target).await?;
        let mut state = self.connect(MssqlRole::State).await?;
        self.verify_pins(&mut target, Some(&mut state)).await?;
        let (fin, _) = self.freeze(&mut target).await?;
        let rows = query_rows(&mut state, "state catalog", &fin.state.catalog_check(), &[])
            .await
            .map_err(cx)?;
        let row = rows.first().ok_or_else(|| shape_err("state catalog"))?;
        for (i, (name, _)) in fin.state.named().iter().enumerate() {
            if row.try_get::<i32, _>(i).ok().flatten().is_none() {
                return Err(XminError::new(
                    ErrorCode::StateCatalogInvalid,
                    format!("state table {name} is missing; run the reviewed provisioning script"),
                ));
            }
        }
        // Beyond existence: the reviewed columns, unique indexes and immutability triggers.
        let facts = conn::state_catalog_facts(&mut state, &fin.state.catalog_facts())
            .await
            .map_err(cx)?;
        catalog::verify_state_catalog(&facts)
            .map_err(|m| XminError::new(ErrorCode::StateCatalogInvalid, m))?;
        self.fin = Some(fin);
        self.control = Some(target);
        Ok(())
    }

    async fn read_state(&mut self, state_key: &str) -> Result<Option<SourceState>> {
        let sql = self.spec.state_names().select_state();
        let c = self.control().await?;
        let rows = query_rows(c, "read state", &sql, &[&state_key])
            .await
            .map_err(cx)?;
        rows.first().map(state_from_row).transpose()
    }

    async fn receipt_by_invocation(
        &mut self,
        invocation_id: &str,
        state_key: &str,
    ) -> Result<Option<CommitReceipt>> {
        let sql = self.spec.state_names().select_receipt_by_invocation();
        let c = self.control().await?;
        let rows = query_rows(c, "read receipt", &sql, &[&invocation_id, &state_key])
            .await
            .map_err(cx)?;
        rows.first().map(receipt_from_row).transpose()
    }

    async fn receipt_by_load(&mut self, load_id: &str) -> Result<Option<CommitReceipt>> {
        // A fresh session: the run's own connection may be the one that lost the ack.
        self.control = None;
        let sql = self.spec.state_names().select_receipt_by_load();
        let c = self.control().await?;
        let rows = query_rows(c, "read receipt", &sql, &[&load_id])
            .await
            .map_err(cx)?;
        rows.first().map(receipt_from_row).transpose()
    }

    async fn receipts(&mut self, state_key: &str, limit: u32) -> Result<Vec<CommitReceipt>> {
        let sql = self.spec.state_names().select_receipts();
        let c = self.control().await?;
        let limit = i64::from(limit);
        let rows = query_rows(c, "read receipts", &sql, &[&state_key, &limit])
            .await
            .map_err(cx)?;
        rows.iter().map(receipt_from_row).collect()
    }

    async fn read_authority(&mut self, authority_id: &str) -> Result<Option<AuthorityRecord>> {
        let sql = self.spec.state_names().select_authority();
        let c = self.control().await?;
        let rows = query_rows(c, "read authority", &sql, &[&authority_id])
            .await
            .map_err(cx)?;
        rows.first().map(authority_from_row).transpose()
    }

    async fn record_failed_run(&mut self, run: &RunRecord) -> Result<()> {
        let sql = self.spec.state_names().insert_failed_run();
        let c = self.control().await?;
        insert_run(c, "record failed run", &sql, run).await
    }

    async fn begin(&mut self) -> Result<MssqlSession> {
        // Everything the transaction depends on is re-verified on the run's own connection, so
        // `begin` needs no preflight and a redirected endpoint cannot swap a database between
        // the two.
        let mut client = self.connect(MssqlRole::Target).await?;
        let (_, run_session) = self.verify_pins(&mut client, None).await?;
        let (fin, target_columns) = self.freeze(&mut client).await?;
        if self.fin.as_ref().is_some_and(|f| *f != fin) {
            return Err(XminError::new(
                ErrorCode::TargetTableInvalid,
                format!(
                    "{}: the target's columns changed since preflight",
                    shape::TARGET_TABLE_INVALID
                ),
            ));
        }
        let lease = self.open_lease(&run_session).await?;
        let tx = RunTransaction::begin(client, fin).await.map_err(cx)?;
        Ok(MssqlSession {
            tx,
            lease,
            staging_schema: self.spec.pins.staging_schema.clone(),
            staged: false,
            target_columns,
        })
    }
}

/// Distinguishes staging tables of runs in one process.
static STAGE_SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A fresh staging-table stem: the envelope digest, the process and a sequence number, so two
/// runs never share staging tables and a leftover never collides with a later run.
fn stage_stem(envelope: &SnapshotEnvelope) -> String {
    let seq = STAGE_SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let salt = sha256_hex(
        format!("{}:{}:{seq}:{nanos}", envelope.digest(), std::process::id()).as_bytes(),
    );
    format!("dpone_stage_{}", &salt[..20])
}

/// The run transaction and its staging lease.
pub struct MssqlSession {
    tx: RunTransaction,
    lease: StagingLease,
    staging_schema: String,
    staged: bool,
    /// The target's columns as `begin` froze them (per-value checks before staging).
    target_columns: Vec<ColumnRow>,
}

impl MssqlSession {
    /// Staging comes before the run transaction and its lock ([`TargetSession::stages_before_lock`]).
    pub const STAGES_BEFORE_LOCK: bool = true;

    async fn lease_action(&mut self, step: &'static str, statement: &str) -> Result<()> {
        self.lease
            .execute(step, statement)
            .await
            .map_err(staging_error)
    }

    async fn count(
        &mut self,
        step: &'static str,
        statement: &str,
        params: &[&dyn tiberius::ToSql],
    ) -> Result<u64> {
        let rows = query_rows(self.tx.client_mut(), step, statement, params)
            .await
            .map_err(cx)?;
        let row = rows.first().ok_or_else(|| shape_err(step))?;
        Ok(to_u64(get_i64(row, 0, step)?))
    }
}

impl TargetSession for MssqlSession {
    /// Staging runs on the lease (its own session, committed outside the run transaction) and
    /// `BEGIN TRANSACTION` waits for `lock_target`: the transaction and its application lock
    /// span the apply only.
    fn stages_before_lock(&self) -> bool {
        MssqlSession::STAGES_BEFORE_LOCK
    }

    async fn lock_target(&mut self, target_identity: &[u8; 32]) -> Result<()> {
        self.tx.lock_target(target_identity).await.map_err(cx)
    }

    async fn detection_time(&mut self) -> Result<i64> {
        self.tx.detection_time().await.map_err(cx)
    }

    async fn read_state(
        &mut self,
        state_key: &str,
        target_identity: &[u8; 32],
    ) -> Result<StateView> {
        let fin = self.tx.finalizer_mut().clone();
        let own = query_rows(
            self.tx.client_mut(),
            "read state",
            &fin.read_own_state(),
            &[&state_key],
        )
        .await
        .map_err(cx)?;
        let own = own.first().map(state_from_row).transpose()?;
        let identity: &[u8] = target_identity;
        let others = query_rows(
            self.tx.client_mut(),
            "read other owner",
            &fin.read_other_owner(),
            &[&state_key, &identity],
        )
        .await
        .map_err(cx)?;
        let other_owner = match others.first() {
            None => None,
            Some(row) => Some(ActiveOwner {
                state_key: get_str(row, 0, "read other owner")?,
                checkpoint: Checkpoint {
                    xmin: to_u64(get_i64(row, 1, "read other owner")?),
                    revision: to_u64(get_i64(row, 2, "read other owner")?),
                },
            }),
        };
        Ok(StateView { own, other_owner })
    }

    async fn read_authority(&mut self, authority_id: &str) -> Result<Option<AuthorityRecord>> {
        let sql = self.tx.finalizer_mut().read_authority();
        let rows = query_rows(
            self.tx.client_mut(),
            "read authority",
            &sql,
            &[&authority_id],
        )
        .await
        .map_err(cx)?;
        rows.first().map(authority_from_row).transpose()
    }

    async fn stage(&mut self, env: &SnapshotEnvelope, store: &dyn ArtifactStore) -> Result<Staged> {
        let keys = self.tx.finalizer_mut().keys.clone();
        // Every key, and every value against its column, is checked before any SQL Server
        // object is created.
        stage::check_export_fitted(env, store, &keys, &self.target_columns)?;
        let stem = stage_stem(env);
        let (rows_table, keys_table) = {
            let fin = self.tx.finalizer_mut();
            let db = fin.stage_rows.database.clone();
            let rows = ThreePart::new(&db, &self.staging_schema, &format!("{stem}_rows"));
            let keys = if env.keys.is_some() {
                ThreePart::new(&db, &self.staging_schema, &format!("{stem}_keys"))
            } else {
                // A baseline's keys are its rows' keys.
                rows.clone()
            };
            fin.stage_rows = rows.clone();
            fin.stage_keys = keys.clone();
            (rows, keys)
        };
        let fin = self.tx.finalizer_mut().clone();
        self.staged = true;
        self.lease_action("stage_rows_ddl", &fin.stage_rows_ddl())
            .await?;
        if keys_table != rows_table {
            self.lease_action("stage_keys_ddl", &fin.stage_keys_ddl())
                .await?;
        }
        let two_part = |t: &ThreePart| format!("{}.{}", ident(&t.schema), ident(&t.object));
        let k = usize::from(env.key_columns);
        let mut payloads = vec![(two_part(&rows_table), &env.columns[..], &env.rows)];
        if let Some(kp) = &env.keys {
            payloads.push((two_part(&keys_table), &env.columns[..k], kp));
        }
        for (table, columns, payload) in payloads {
            self.lease.check().await.map_err(staging_error)?;
            stage::load_staging(self.lease.client_mut(), &table, columns, k, payload, store)
                .await?;
            self.lease.check().await.map_err(staging_error)?;
        }
        let rows = query_rows(
            self.tx.client_mut(),
            "staged counts",
            &fin.staged_counts(),
            &[],
        )
        .await
        .map_err(|e| staging_conn_error(&e))?;
        let row = rows.first().ok_or_else(|| shape_err("staged counts"))?;
        Ok(Staged {
            rows: to_u64(get_i64(row, 0, "staged counts")?),
            keys: to_u64(get_i64(row, 1, "staged counts")?),
        })
    }

    async fn populations(&mut self) -> Result<Populations> {
        self.tx.populations().await.map_err(cx)
    }

    async fn supersede(
        &mut self,
        transfer: &TransferBinding,
        new_state_key: &str,
        at_micros: i64,
    ) -> Result<u64> {
        let sql = self.tx.finalizer_mut().supersede();
        let at = iso_utc(at_micros);
        let xmin = to_i64(transfer.old_checkpoint.xmin)?;
        let revision = to_i64(transfer.old_checkpoint.revision)?;
        self.count(
            "supersede",
            &sql,
            &[
                &transfer.old_state_key.as_str(),
                &xmin,
                &revision,
                &new_state_key,
                &at.as_str(),
            ],
        )
        .await
    }

    async fn apply(&mut self, step: ApplyStep, at_micros: i64) -> Result<u64> {
        self.tx.apply(step, at_micros).await.map_err(cx)
    }

    async fn parity(&mut self) -> Result<Parity> {
        self.tx.parity().await.map_err(cx)
    }

    async fn cas_checkpoint(&mut self, cas: &CheckpointCas, at_micros: i64) -> Result<bool> {
        let fin = self.tx.finalizer_mut().clone();
        let at = iso_utc(at_micros);
        let new_xmin = to_i64(cas.new.xmin)?;
        let new_revision = to_i64(cas.new.revision)?;
        let horizon = to_i64(cas.visible_horizon)?;
        let n = match cas.expected {
            Some(expected) => {
                let xmin = to_i64(expected.xmin)?;
                let revision = to_i64(expected.revision)?;
                self.count(
                    "cas_update",
                    &fin.cas_update(),
                    &[
                        &cas.state_key.as_str(),
                        &xmin,
                        &revision,
                        &new_xmin,
                        &new_revision,
                        &horizon,
                        &cas.receipt_id.as_str(),
                        &at.as_str(),
                    ],
                )
                .await?
            }
            None => {
                let identity: &[u8] = &cas.target_identity;
                self.count(
                    "cas_insert",
                    &fin.cas_insert(),
                    &[
                        &cas.state_key.as_str(),
                        &identity,
                        &cas.scope_hash.as_str(),
                        &new_xmin,
                        &new_revision,
                        &horizon,
                        &cas.receipt_id.as_str(),
                        &at.as_str(),
                    ],
                )
                .await?
            }
        };
        Ok(n == 1)
    }

    async fn insert_receipt(&mut self, r: &CommitReceipt) -> Result<()> {
        let sql = self.tx.finalizer_mut().insert_receipt();
        let body = serde_json::to_string(r)
            .map_err(|_| XminError::new(ErrorCode::TargetStatementFailed, "receipt encoding"))?;
        let digest = invocation_digest(&r.invocation_id);
        let digest: &[u8] = &digest;
        let previous_xmin = r.previous.map(|p| to_i64(p.xmin)).transpose()?;
        let previous_revision = r.previous.map(|p| to_i64(p.revision)).transpose()?;
        let new_xmin = to_i64(r.checkpoint.xmin)?;
        let new_revision = to_i64(r.checkpoint.revision)?;
        let at = iso_utc(r.detected_at_micros);
        query_rows(
            self.tx.client_mut(),
            "insert receipt",
            &sql,
            &[
                &r.receipt_id.as_str(),
                &r.load_id.as_str(),
                &r.invocation_id.as_str(),
                &digest,
                &r.state_key.as_str(),
                &previous_xmin,
                &previous_revision,
                &new_xmin,
                &new_revision,
                &body.as_str(),
                &at.as_str(),
            ],
        )
        .await
        .map_err(cx)?;
        Ok(())
    }

    async fn consume_authority(&mut self, c: &Consumption, at_micros: i64) -> Result<()> {
        let sql = self.tx.finalizer_mut().consume_authority();
        let at = iso_utc(at_micros);
        query_rows(
            self.tx.client_mut(),
            "consume authority",
            &sql,
            &[
                &c.authority_id.as_str(),
                &c.authority_digest.as_str(),
                &c.state_key.as_str(),
                &c.load_id.as_str(),
                &c.receipt_id.as_str(),
                &at.as_str(),
            ],
        )
        .await
        .map_err(cx)?;
        Ok(())
    }

    async fn record_run(&mut self, run: &RunRecord) -> Result<()> {
        let sql = self.tx.finalizer_mut().record_run();
        insert_run(self.tx.client_mut(), "record run", &sql, run).await
    }

    async fn commit(self) -> Result<()> {
        let Self {
            mut tx,
            mut lease,
            staged,
            ..
        } = self;
        let drop_sql = tx.finalizer_mut().stage_drop();
        let result = tx.commit().await.map(drop).map_err(cx);
        if staged {
            // Best effort: the commit stands whatever cleanup does; names are unique per run.
            let _ = lease.execute("stage_drop", &drop_sql).await;
        }
        result
    }

    async fn rollback(self) -> Result<()> {
        let Self {
            mut tx,
            mut lease,
            staged,
            ..
        } = self;
        let drop_sql = tx.finalizer_mut().stage_drop();
        let result = tx.rollback().await.map(drop).map_err(cx);
        if staged {
            let _ = lease.execute("stage_drop", &drop_sql).await;
        }
        result
    }
}
