//! The workload manifest: what to reconcile, where, and with which guards.
//!
//! A manifest is strict YAML (see [`crate::yaml`]) read into [`RawManifest`] with
//! `deny_unknown_fields`, then checked into a [`Manifest`]. It holds *logical* connection refs
//! only: endpoints, credentials and database pins live in the environment-owned registry
//! ([`crate::registry`]). A manifest can never grant a repair authority.

use crate::error::{ErrorCode, Result, XminError};
use crate::yaml;
use dpone_policy_model::guard::{DeleteGuards, EmptySnapshotPolicy};
use dpone_policy_model::types::{PPM_ONE, Ppm};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Manifest schema version this build reads.
pub const MANIFEST_VERSION: u32 = 1;
/// Longest identifier PostgreSQL keeps (NAMEDATALEN - 1).
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// The manifest as written, before semantic checks.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawManifest {
    /// Schema version; must be [`MANIFEST_VERSION`].
    pub version: u32,
    /// Workload name.
    pub name: String,
    /// Process name of the state identity; defaults to `name`.
    #[serde(default)]
    pub process: Option<String>,
    /// Source relation and key.
    pub source: RawSource,
    /// Target table.
    pub target: RawTarget,
    /// Key-snapshot reconciliation.
    pub reconciliation: RawReconciliation,
    /// Where state lives.
    pub state: RawState,
}

/// `source`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    /// Logical source connection.
    pub connection_ref: String,
    /// `schema.relation`, canonical or an ASCII-case alias of a pinned relation.
    pub relation: String,
    /// Selected columns, in order; must include the unique key.
    pub columns: Vec<String>,
    /// The unique key columns.
    pub unique_key: Vec<String>,
    /// Row scope; default: the whole relation.
    #[serde(default)]
    pub scope: Option<Scope>,
    /// Source options.
    #[serde(default)]
    pub options: Option<SourceOptions>,
}

/// Which source rows belong to the route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Scope {
    /// Every row of the relation.
    Full,
    /// Rows whose column equals one of the values, compared as values of the column's type
    /// (each value is cast to it; one that does not cast is refused before any read).
    ColumnValues {
        /// Column compared.
        column: String,
        /// Accepted values (at least one, no duplicates).
        values: Vec<String>,
    },
}

/// `source.options`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceOptions {
    /// Refuse a snapshot whose `H - U` exceeds this many XIDs. No limit unless set.
    #[serde(default)]
    pub xmin_max_replay_amplification_xids: Option<u64>,
}

/// `target`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    /// Target dialect: `postgres` or `mssql`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Logical target connection.
    pub connection_ref: String,
    /// Target database (`mssql` only; default: the connection's database).
    #[serde(default)]
    pub database: Option<String>,
    /// Target schema.
    pub schema: String,
    /// Target table.
    pub table: String,
    /// Staging database (`mssql` only; default: the target database). Must be pinned by the
    /// target connection.
    #[serde(default)]
    pub staging_database: Option<String>,
    /// Schema of the staging tables (`mssql` only; default `dbo`).
    #[serde(default)]
    pub staging_schema: Option<String>,
}

/// Target dialects of this route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// PostgreSQL target; state in the same database.
    Postgres,
    /// SQL Server target; state on the same instance, reached by three-part names.
    Mssql,
}

/// `reconciliation`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReconciliation {
    /// Must be `true`.
    pub enabled: bool,
    /// Must be `key_snapshot`.
    pub mode: String,
    /// Must be `every_run`.
    pub cadence: String,
    /// Must be `same_source_snapshot`.
    pub consistency: String,
    /// `soft_delete` (default) or `hard_delete`; judged by the delete-mode policy.
    #[serde(default)]
    pub delete_policy: Option<String>,
    /// `timestamp_only` (default), `timestamp_and_flag` or `flag_only`.
    #[serde(default)]
    pub soft_delete_mode: Option<String>,
    /// `{policy: fail | apply_guards}`; default `fail`.
    #[serde(default)]
    pub empty_snapshot: Option<RawEmptySnapshot>,
    /// Delete guards.
    #[serde(default)]
    pub guards: Option<RawGuards>,
}

/// `reconciliation.empty_snapshot`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmptySnapshot {
    /// `fail` or `apply_guards`.
    pub policy: EmptySnapshotPolicy,
}

/// `reconciliation.guards`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGuards {
    /// Largest share of active keys one run may delete, as a decimal in [0, 1].
    #[serde(default)]
    pub max_delete_ratio: Option<Value>,
    /// Most rows one run may delete.
    #[serde(default)]
    pub max_delete_rows: Option<u64>,
}

/// `state`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    /// State store type; must match the target dialect (`postgres`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Logical state connection.
    pub connection_ref: String,
    /// Must be `target_atomic`.
    pub atomicity: String,
    /// Explicit state schema; overrides the registry default (conflicts are reported).
    #[serde(default)]
    pub schema: Option<String>,
    /// Source-state table.
    pub table: TableName,
    /// Run table; `name` is canonical, legacy `run_name` is accepted with a deprecation.
    pub run_table: RunTableName,
    /// Commit-receipt table.
    pub receipt_table: TableName,
    /// Repair-authority table.
    pub repair_authority_table: TableName,
    /// Repair-authority consumption table.
    pub repair_consumption_table: TableName,
}

/// `{name: ...}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableName {
    /// Table name.
    pub name: String,
}

/// `run_table`: `{name}` or the deprecated `{run_name}`, never both.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunTableName {
    /// Canonical spelling.
    #[serde(default)]
    pub name: Option<String>,
    /// Deprecated spelling.
    #[serde(default)]
    pub run_name: Option<String>,
}

/// A checked manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Manifest {
    /// Workload name.
    pub name: String,
    /// Process name for the state identity.
    pub process: String,
    /// Logical source connection.
    pub source_connection_ref: String,
    /// The relation as authored (resolved against the registry's pins later).
    pub source_relation: String,
    /// Selected columns, in order.
    pub columns: Vec<String>,
    /// Unique key columns, in order.
    pub unique_key: Vec<String>,
    /// Row scope.
    pub scope: Scope,
    /// Replay amplification ceiling, if the workload set one.
    pub max_replay_amplification_xids: Option<u64>,
    /// Target dialect.
    pub target_kind: TargetKind,
    /// Logical target connection.
    pub target_connection_ref: String,
    /// Target database as authored (`mssql`; resolved against the pins later).
    pub target_database: Option<String>,
    /// Staging database as authored (`mssql`).
    pub staging_database: Option<String>,
    /// Staging schema (`mssql`).
    pub staging_schema: Option<String>,
    /// Target schema.
    pub target_schema: String,
    /// Target table.
    pub target_table: String,
    /// `delete_policy` as written.
    pub delete_policy: Option<String>,
    /// `soft_delete_mode` as written.
    pub soft_delete_mode: Option<String>,
    /// Empty snapshot policy.
    pub empty_snapshot: EmptySnapshotPolicy,
    /// Delete guards, ratios in ppm.
    pub guards: DeleteGuards,
    /// State location.
    pub state: StateTables,
    /// Deprecations noticed while reading (codes and fields, no values).
    pub deprecations: Vec<String>,
}

/// Where the state tables live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateTables {
    /// Logical state connection.
    pub connection_ref: String,
    /// Explicit schema from the manifest, if any.
    pub schema: Option<String>,
    /// Source-state table.
    pub source_state: String,
    /// Run table.
    pub run: String,
    /// Commit-receipt table.
    pub receipt: String,
    /// Repair-authority table.
    pub repair_authority: String,
    /// Consumption table.
    pub repair_consumption: String,
}

impl Manifest {
    /// Parses and checks a manifest from strict YAML.
    pub fn from_yaml(text: &str) -> Result<Self> {
        let value = yaml::parse_strict(text)?;
        Self::from_value(value)
    }

    /// Checks a manifest from an already parsed value.
    pub fn from_value(value: Value) -> Result<Self> {
        if let Some(rec) = value.get("reconciliation")
            && rec.is_boolean()
        {
            return Err(XminError::new(
                ErrorCode::ManifestLegacyReconciliation,
                "boolean `reconciliation: true` is a deprecated alias that never enables key-snapshot \
                 reconciliation; write the `reconciliation` block",
            ));
        }
        let raw: RawManifest = serde_json::from_value(value).map_err(|e| {
            schema_error(
                &e,
                ErrorCode::ManifestUnknownField,
                ErrorCode::ManifestInvalid,
                "manifest",
            )
        })?;
        raw.check()
    }
}

/// Maps a serde error to an unknown-field code or a generic schema code. serde's messages name
/// fields and expected shapes, never secrets (manifests and registries hold none).
pub(crate) fn schema_error(
    e: &serde_json::Error,
    unknown: ErrorCode,
    invalid: ErrorCode,
    what: &str,
) -> XminError {
    let text = e.to_string();
    let code = if text.starts_with("unknown field") || text.starts_with("unknown variant") {
        if text.starts_with("unknown field") {
            unknown
        } else {
            invalid
        }
    } else {
        invalid
    };
    XminError::new(code, format!("{what}: {text}"))
}

impl RawManifest {
    fn check(self) -> Result<Manifest> {
        let invalid = |m: &str| XminError::new(ErrorCode::ManifestInvalid, m.to_owned());
        let unsupported = |m: String| XminError::new(ErrorCode::ManifestUnsupportedRoute, m);
        if self.version != MANIFEST_VERSION {
            return Err(invalid("manifest version must be 1"));
        }
        check_name(&self.name, "name")?;
        let process = self.process.unwrap_or_else(|| self.name.clone());
        check_name(&process, "process")?;
        check_name(&self.source.connection_ref, "source.connection_ref")?;
        check_name(&self.target.connection_ref, "target.connection_ref")?;
        check_name(&self.state.connection_ref, "state.connection_ref")?;
        let (schema, rel) = split_relation(&self.source.relation)?;
        check_identifier(schema, "source.relation")?;
        check_identifier(rel, "source.relation")?;

        // Columns and key.
        if self.source.columns.is_empty() {
            return Err(invalid("source.columns must not be empty"));
        }
        for (i, c) in self.source.columns.iter().enumerate() {
            check_identifier(c, "source.columns")?;
            if self.source.columns[..i].contains(c) {
                return Err(XminError::new(
                    ErrorCode::ManifestInvalid,
                    format!("source.columns repeats column {c:?}"),
                ));
            }
        }
        let key_err = |m: String| XminError::new(ErrorCode::ManifestUniqueKeyInvalid, m);
        if self.source.unique_key.is_empty() {
            return Err(key_err("source.unique_key must not be empty".into()));
        }
        for (i, k) in self.source.unique_key.iter().enumerate() {
            if self.source.unique_key[..i].contains(k) {
                return Err(key_err(format!("source.unique_key repeats {k:?}")));
            }
            if !self.source.columns.contains(k) {
                return Err(key_err(format!(
                    "source.unique_key column {k:?} is not in source.columns"
                )));
            }
        }
        let scope = self.source.scope.unwrap_or(Scope::Full);
        if let Scope::ColumnValues { column, values } = &scope {
            check_identifier(column, "source.scope.column")?;
            if !self.source.columns.contains(column) {
                return Err(invalid("source.scope.column must be one of source.columns"));
            }
            if values.is_empty() {
                return Err(invalid("source.scope.values must not be empty"));
            }
            for (i, v) in values.iter().enumerate() {
                if v.contains('\0') || values[..i].contains(v) {
                    return Err(invalid(
                        "source.scope.values must be distinct and free of NUL",
                    ));
                }
            }
        }

        // Target.
        let target_kind = match self.target.kind.as_str() {
            "postgres" => TargetKind::Postgres,
            "mssql" => TargetKind::Mssql,
            other => {
                return Err(unsupported(format!(
                    "target.type {other:?} is not supported by this route (supported: postgres, mssql)"
                )));
            }
        };
        let t = &self.target;
        if target_kind == TargetKind::Postgres
            && (t.database.is_some() || t.staging_database.is_some() || t.staging_schema.is_some())
        {
            return Err(invalid(
                "target.database, staging_database and staging_schema apply to mssql targets only",
            ));
        }
        for (v, field) in [
            (&t.database, "target.database"),
            (&t.staging_database, "target.staging_database"),
            (&t.staging_schema, "target.staging_schema"),
        ] {
            if let Some(v) = v {
                check_identifier(v, field)?;
            }
        }
        check_identifier(&self.target.schema, "target.schema")?;
        check_identifier(&self.target.table, "target.table")?;

        // Reconciliation.
        let r = &self.reconciliation;
        if !r.enabled {
            return Err(unsupported(
                "reconciliation.enabled is false; this route only runs key-snapshot reconciliation"
                    .into(),
            ));
        }
        for (field, got, want) in [
            ("mode", &r.mode, "key_snapshot"),
            ("cadence", &r.cadence, "every_run"),
            ("consistency", &r.consistency, "same_source_snapshot"),
        ] {
            if got != want {
                return Err(unsupported(format!(
                    "reconciliation.{field} {got:?} is not supported (supported: {want})"
                )));
            }
        }
        let guards = match &r.guards {
            None => DeleteGuards::default(),
            Some(g) => DeleteGuards {
                max_delete_rows: g.max_delete_rows,
                max_delete_ratio: g.max_delete_ratio.as_ref().map(parse_ratio).transpose()?,
            },
        };

        // State.
        let s = &self.state;
        let state_kind_matches = matches!(
            (s.kind.as_str(), target_kind),
            ("postgres", TargetKind::Postgres) | ("mssql", TargetKind::Mssql)
        );
        if !state_kind_matches {
            return Err(XminError::new(
                ErrorCode::ManifestStateAtomicityUnsupported,
                format!(
                    "state.type {:?} cannot be target-atomic with a {} target",
                    s.kind, self.target.kind
                ),
            ));
        }
        if s.atomicity != "target_atomic" {
            return Err(XminError::new(
                ErrorCode::ManifestStateAtomicityUnsupported,
                format!(
                    "state.atomicity {:?} is not supported (supported: target_atomic)",
                    s.atomicity
                ),
            ));
        }
        let mut deprecations = Vec::new();
        let run = match (&s.run_table.name, &s.run_table.run_name) {
            (Some(n), None) => n.clone(),
            (None, Some(n)) => {
                deprecations.push("state.run_table.run_name is deprecated; use name".to_owned());
                n.clone()
            }
            _ => {
                return Err(XminError::new(
                    ErrorCode::ManifestStateTableConflict,
                    "state.run_table needs exactly one of name and the deprecated run_name",
                ));
            }
        };
        if let Some(schema) = &s.schema {
            check_identifier(schema, "state.schema")?;
        }
        let state = StateTables {
            connection_ref: s.connection_ref.clone(),
            schema: s.schema.clone(),
            source_state: s.table.name.clone(),
            run,
            receipt: s.receipt_table.name.clone(),
            repair_authority: s.repair_authority_table.name.clone(),
            repair_consumption: s.repair_consumption_table.name.clone(),
        };
        let names = [
            &state.source_state,
            &state.run,
            &state.receipt,
            &state.repair_authority,
            &state.repair_consumption,
        ];
        for (i, n) in names.iter().enumerate() {
            check_identifier(n, "state table name")?;
            if names[..i].contains(n) {
                return Err(XminError::new(
                    ErrorCode::ManifestStateTableConflict,
                    "state tables must have five distinct names",
                ));
            }
        }

        Ok(Manifest {
            name: self.name,
            process,
            source_connection_ref: self.source.connection_ref,
            source_relation: self.source.relation,
            columns: self.source.columns,
            unique_key: self.source.unique_key,
            scope,
            max_replay_amplification_xids: self
                .source
                .options
                .and_then(|o| o.xmin_max_replay_amplification_xids),
            target_kind,
            target_connection_ref: self.target.connection_ref,
            target_database: self.target.database,
            staging_database: self.target.staging_database,
            staging_schema: self.target.staging_schema,
            target_schema: self.target.schema,
            target_table: self.target.table,
            delete_policy: self.reconciliation.delete_policy,
            soft_delete_mode: self.reconciliation.soft_delete_mode,
            empty_snapshot: self
                .reconciliation
                .empty_snapshot
                .map(|e| e.policy)
                .unwrap_or_default(),
            guards,
            state,
            deprecations,
        })
    }
}

impl Manifest {
    /// Business columns: selected columns that are not part of the unique key, in order.
    pub fn business_columns(&self) -> Vec<String> {
        self.columns
            .iter()
            .filter(|c| !self.unique_key.contains(c))
            .cloned()
            .collect()
    }
}

/// Splits `schema.relation` at its single dot.
pub fn split_relation(s: &str) -> Result<(&str, &str)> {
    match s.split_once('.') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() && !b.contains('.') => Ok((a, b)),
        _ => Err(XminError::new(
            ErrorCode::ManifestIdentifierInvalid,
            "source.relation must be written schema.relation",
        )),
    }
}

/// A SQL identifier this route accepts: ASCII letter or `_`, then letters, digits, `_` or `$`,
/// at most 63 bytes. Identifiers are always quoted in SQL, so case is significant.
pub fn check_identifier(s: &str, field: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= MAX_IDENTIFIER_BYTES
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$');
    if ok {
        Ok(())
    } else {
        Err(XminError::new(
            ErrorCode::ManifestIdentifierInvalid,
            format!("{field}: {s:?} is not a plain ASCII SQL identifier of at most 63 bytes"),
        ))
    }
}

fn check_name(s: &str, field: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(XminError::new(
            ErrorCode::ManifestIdentifierInvalid,
            format!("{field} must be 1-128 ASCII letters, digits, '_', '-' or '.'"),
        ))
    }
}

/// Parses a ratio written as a decimal in [0, 1] with at most six fractional digits (or the
/// integers 0 and 1) into exact parts per million.
pub fn parse_ratio(v: &Value) -> Result<Ppm> {
    let bad = || {
        XminError::new(
            ErrorCode::ManifestRatioInvalid,
            "max_delete_ratio must be a decimal in [0, 1] with at most six fractional digits",
        )
    };
    let text = match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return Err(bad()),
    };
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let whole: u32 = match int {
        "0" => 0,
        "1" => 1,
        _ => return Err(bad()),
    };
    let mut frac_ppm: u32 = 0;
    for (i, b) in frac.bytes().enumerate() {
        frac_ppm += u32::from(b - b'0') * 10u32.pow(5 - i as u32);
    }
    let ppm = whole * PPM_ONE + frac_ppm;
    if ppm > PPM_ONE {
        return Err(bad());
    }
    Ok(ppm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_exact() {
        assert_eq!(parse_ratio(&Value::from("0.05")).unwrap(), 50_000);
        assert_eq!(parse_ratio(&Value::from("0.333334")).unwrap(), 333_334);
        assert_eq!(parse_ratio(&Value::from(1)).unwrap(), 1_000_000);
        assert_eq!(parse_ratio(&Value::from("1.000000")).unwrap(), 1_000_000);
        assert_eq!(parse_ratio(&Value::from(0)).unwrap(), 0);
        for bad in ["1.5", "0.0000001", "-0.1", "2", "abc", ""] {
            assert!(parse_ratio(&Value::from(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn identifiers() {
        assert!(check_identifier("orders_2", "x").is_ok());
        assert!(check_identifier("Orders", "x").is_ok());
        for bad in ["", "1a", "a-b", "a b", "a\"b", &"x".repeat(64)] {
            assert!(check_identifier(bad, "x").is_err(), "{bad}");
        }
    }
}
