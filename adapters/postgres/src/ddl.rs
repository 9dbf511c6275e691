//! Reviewed provisioning DDL. The runtime never runs it: the environment owner (or a test)
//! provisions state and target objects; the runtime only verifies their shape.
//!
//! [`render_state_ddl`] with the default names renders exactly `fixtures/xmin/state-ddl.sql`
//! (a test keeps them equal).

use crate::sql::{ident, qualified};
use dpone_engine_xmin::manifest::StateTables;
use dpone_policy_model::delete_mode::{ColumnRole, DeletePlan};

/// Engine-owned lineage column: detection time of the last write to the row.
pub const UPDATED_AT_COLUMN: &str = "__dpone__updated_at";

/// Default state table names.
pub fn default_state_tables() -> StateTables {
    StateTables {
        connection_ref: String::new(),
        schema: None,
        source_state: "dpone_source_state".into(),
        run: "dpone_run_state".into(),
        receipt: "dpone_commit_receipt".into(),
        repair_authority: "dpone_repair_authority".into(),
        repair_consumption: "dpone_repair_authority_consumption".into(),
    }
}

/// The state DDL for a schema and table names.
pub fn render_state_ddl(schema: &str, t: &StateTables) -> String {
    let q = |n: &str| qualified(schema, n);
    let (st, run, rc, au, co) = (
        q(&t.source_state),
        q(&t.run),
        q(&t.receipt),
        q(&t.repair_authority),
        q(&t.repair_consumption),
    );
    let idx = |n: &str| ident(&format!("{}_one_active_owner", n));
    let forbid = qualified(schema, "dpone_forbid_mutation");
    format!(
        "-- XMin key-reconciliation state (PostgreSQL target). Reviewed provisioning DDL:\n\
-- the runtime verifies these objects and never creates them.\n\
CREATE SCHEMA IF NOT EXISTS {schema_q};\n\
\n\
-- One row per state key: the checkpoint (safe XMin and monotonic revision).\n\
CREATE TABLE {st} (\n\
    state_key         text        PRIMARY KEY CHECK (state_key ~ '^[0-9a-f]{{64}}$'),\n\
    target_identity   bytea       NOT NULL CHECK (octet_length(target_identity) = 32),\n\
    scope_hash        text        NOT NULL,\n\
    safe_xmin         bigint      NOT NULL CHECK (safe_xmin >= 0),\n\
    revision          bigint      NOT NULL CHECK (revision >= 1),\n\
    visible_horizon   bigint      NOT NULL CHECK (visible_horizon >= safe_xmin),\n\
    last_receipt_id   text        NOT NULL,\n\
    created_at_utc    timestamptz NOT NULL,\n\
    updated_at_utc    timestamptz NOT NULL,\n\
    superseded_at_utc timestamptz NULL,\n\
    superseded_by     text        NULL\n\
);\n\
-- One active owner per physical target.\n\
CREATE UNIQUE INDEX {idx} ON {st} (target_identity) WHERE superseded_at_utc IS NULL;\n\
\n\
-- Every run that reached the target: committed ones in the run transaction, rolled-back ones\n\
-- afterwards (best effort).\n\
CREATE TABLE {run} (\n\
    run_id          text        NOT NULL,\n\
    invocation_id   text        NOT NULL,\n\
    state_key       text        NOT NULL,\n\
    status          text        NOT NULL CHECK (status IN ('committed', 'rolled_back')),\n\
    code            text        NULL,\n\
    evidence        jsonb       NOT NULL,\n\
    recorded_at_utc timestamptz NOT NULL\n\
);\n\
CREATE UNIQUE INDEX {run_idx} ON {run} (run_id) WHERE status = 'committed';\n\
\n\
-- Immutable commit receipts, written in the same transaction as the target DML and the CAS.\n\
CREATE TABLE {rc} (\n\
    receipt_id        text        PRIMARY KEY,\n\
    load_id           text        NOT NULL UNIQUE,\n\
    invocation_id     text        NOT NULL,\n\
    state_key         text        NOT NULL,\n\
    previous_xmin     bigint      NULL,\n\
    previous_revision bigint      NULL,\n\
    new_xmin          bigint      NOT NULL,\n\
    new_revision      bigint      NOT NULL,\n\
    body              jsonb       NOT NULL,\n\
    committed_at_utc  timestamptz NOT NULL,\n\
    UNIQUE (state_key, new_revision),\n\
    UNIQUE (state_key, invocation_id)\n\
);\n\
\n\
-- Immutable, expiring, one-shot repair authorities written by the environment owner.\n\
CREATE TABLE {au} (\n\
    authority_id    text        PRIMARY KEY,\n\
    recorded_digest text        NOT NULL CHECK (recorded_digest ~ '^[0-9a-f]{{64}}$'),\n\
    document        text        NOT NULL,\n\
    created_at_utc  timestamptz NOT NULL\n\
);\n\
\n\
-- At most one consumption per authority, bound to its load and receipt.\n\
CREATE TABLE {co} (\n\
    authority_id     text        PRIMARY KEY REFERENCES {au} (authority_id),\n\
    authority_digest text        NOT NULL,\n\
    state_key        text        NOT NULL,\n\
    load_id          text        NOT NULL UNIQUE,\n\
    receipt_id       text        NOT NULL UNIQUE REFERENCES {rc} (receipt_id),\n\
    consumed_at_utc  timestamptz NOT NULL\n\
);\n\
\n\
CREATE FUNCTION {forbid}() RETURNS trigger LANGUAGE plpgsql AS $$\n\
BEGIN\n\
    RAISE EXCEPTION 'dpone state rows are immutable' USING ERRCODE = 'P0001';\n\
END\n\
$$;\n\
CREATE TRIGGER dpone_immutable BEFORE UPDATE OR DELETE ON {rc}\n\
    FOR EACH ROW EXECUTE FUNCTION {forbid}();\n\
CREATE TRIGGER dpone_immutable BEFORE UPDATE OR DELETE ON {au}\n\
    FOR EACH ROW EXECUTE FUNCTION {forbid}();\n\
CREATE TRIGGER dpone_immutable BEFORE UPDATE OR DELETE ON {co}\n\
    FOR EACH ROW EXECUTE FUNCTION {forbid}();\n\
{truncate_guards}",
        schema_q = ident(schema),
        idx = idx(&t.source_state),
        run_idx = ident(&format!("{}_committed_once", t.run)),
        truncate_guards = truncate_guards(schema, t)
            .iter()
            .map(|(_, create)| format!("{create};\n"))
            .collect::<String>(),
    )
}

/// Per immutable state table (receipt, repair authority, consumption): the reviewed `BEFORE
/// TRUNCATE … FOR EACH STATEMENT` guard (row triggers never fire on `TRUNCATE`), as its `DROP
/// TRIGGER IF EXISTS` and its `CREATE TRIGGER` (no terminating `;`).
fn truncate_guards(schema: &str, t: &StateTables) -> Vec<(String, String)> {
    let forbid = qualified(schema, "dpone_forbid_mutation");
    [&t.receipt, &t.repair_authority, &t.repair_consumption]
        .into_iter()
        .map(|table| {
            let table = qualified(schema, table);
            (
                format!("DROP TRIGGER IF EXISTS dpone_no_truncate ON {table}"),
                format!(
                    "CREATE TRIGGER dpone_no_truncate BEFORE TRUNCATE ON {table}\n\
                     FOR EACH STATEMENT EXECUTE FUNCTION {forbid}()"
                ),
            )
        })
        .collect()
}

/// The reviewed migration that adds the `TRUNCATE` guards of [`render_state_ddl`] to state
/// tables provisioned before they existed (`fixtures/xmin/migrate-add-truncate-guard.sql` with
/// the default names; a test keeps them equal). It can be applied again.
pub fn render_state_truncate_guard_migration(schema: &str, t: &StateTables) -> String {
    let mut out = String::from(
        "-- Adds the TRUNCATE guards to XMin state tables provisioned before they existed (row\n\
-- triggers never fire on TRUNCATE). Reviewed DDL, applied by the environment owner like\n\
-- state-ddl.sql; the CREATE statements are part of state-ddl.sql (a test keeps them equal).\n",
    );
    for (drop, create) in truncate_guards(schema, t) {
        out.push_str(&format!("{drop};\n{create};\n"));
    }
    out
}

/// Reviewed DDL for a target table of a plan: key columns (primary key), business columns, the
/// plan's reserved columns and the engine's lineage column. `columns` are `(name, type_sql)`,
/// keys first.
pub fn render_target_ddl(
    schema: &str,
    table: &str,
    columns: &[(&str, &str)],
    key_count: usize,
    plan: &DeletePlan,
) -> String {
    let mut lines: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, (n, t))| {
            let nn = if i < key_count { " NOT NULL" } else { "" };
            format!("    {} {t}{nn}", ident(n))
        })
        .collect();
    for c in &plan.columns {
        lines.push(match c.role {
            ColumnRole::DeletedAt => format!("    {} timestamptz NULL", ident(&c.name)),
            ColumnRole::DeletedFlagComputed => format!(
                "    {} boolean GENERATED ALWAYS AS ({} IS NOT NULL) STORED",
                ident(&c.name),
                ident(dpone_policy_delete_mode_deleted_at())
            ),
            ColumnRole::DeletedFlagStored => {
                format!("    {} boolean NOT NULL DEFAULT false", ident(&c.name))
            }
        });
    }
    lines.push(format!(
        "    {} timestamptz NOT NULL",
        ident(UPDATED_AT_COLUMN)
    ));
    let keys: Vec<String> = columns[..key_count].iter().map(|(n, _)| ident(n)).collect();
    lines.push(format!("    PRIMARY KEY ({})", keys.join(", ")));
    format!(
        "CREATE SCHEMA IF NOT EXISTS {};\nCREATE TABLE {} (\n{}\n);\n",
        ident(schema),
        qualified(schema, table),
        lines.join(",\n")
    )
}

fn dpone_policy_delete_mode_deleted_at() -> &'static str {
    "__dpone__deleted_at"
}
