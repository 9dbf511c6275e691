//! The control store's catalog checked against the reviewed DDL
//! (`fixtures/nonproduction/control-store.sql`), as pure checks over captured catalog rows, the
//! way the XMin state catalog is checked: each table's exact columns (name, `format_type` text,
//! nullability), the unique indexes the protocol relies on (one qualification consumption per
//! run, one selected request per activation, one reservation per attempt, one membership charge
//! per workload and pool, one original per grant/phase key), and exactly the reviewed
//! immutability triggers per table — every table is append-only — and exactly the reviewed CHECK constraints
//! and foreign keys ([`CHECKS`], [`FOREIGN_KEYS`]: none added, dropped or `NOT VALID`, no
//! referential action but `NO ACTION`, no table outside the store referencing one). A missing
//! unique index lets a run be consumed twice; a dropped trigger lets a charge be refunded by an
//! UPDATE; a dropped CHECK lets a limit be exceeded; an added foreign key or CHECK can refuse, or
//! with a cascade rewrite, rows behind the store's back. Failures name tables, columns and
//! indexes only.
//!
//! The immutability guards are checked as enforcing, not just present
//! ([`dpone_pg_catalog::verify_guards`]): each table has exactly the reviewed `BEFORE UPDATE OR
//! DELETE … FOR EACH ROW` trigger and `BEFORE TRUNCATE … FOR EACH STATEMENT` trigger (row
//! triggers never fire on `TRUNCATE`), each enabled for every session (not `DISABLE` or `ENABLE
//! REPLICA`), without `WHEN` condition or column list, calling [`FORBID_MUTATION`] exactly as
//! the DDL defines it (body, language, return type, volatility, security, no `SET`); no table
//! has row-level security, a policy or a rule. Those refusals start with their reason code
//! (`DPONE_NP_STORE_TRIGGER_NOT_ENFORCING`, `…_TRIGGER_FUNCTION_NOT_REVIEWED`,
//! `…_TRUNCATE_UNGUARDED`, `…_ROW_SECURITY_PRESENT`, `…_RULE_PRESENT`) under the error code
//! `DPONE_NP_STORE_CATALOG_INVALID`.
//!
//! The database backstop ([`BACKSTOP`], [`verify_backstop`]) is checked the same way: each
//! table whose inserts it re-checks has exactly its `np_backstop` `BEFORE INSERT … FOR EACH
//! ROW` trigger, enforcing, calling its function exactly as the reviewed DDL defines it (body
//! with the store's schema, `SECURITY INVOKER`, the one pinned `search_path`); missing or inert
//! is `DPONE_NP_STORE_TRIGGER_NOT_ENFORCING`, another function
//! `DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED`.

pub use dpone_pg_catalog::{
    CONSTRAINTS_SQL, ColumnContract, Constraint, ForeignKeyContract, IMMUTABLE_TGTYPE,
    REVIEWED_FK_ACTIONS, Reason, ReviewedFunction, TRUNCATE_GUARD_TGTYPE, TableFacts, TriggerFacts,
};
use dpone_pg_catalog::{verify_columns, verify_guards};

/// The prefix of the guards' reason codes (`DPONE_NP_STORE_TRIGGER_NOT_ENFORCING`).
pub const REASON_PREFIX: &str = "DPONE_NP_STORE";

/// The reviewed trigger function every table's guards call (`control-store.sql`).
pub const FORBID_MUTATION: ReviewedFunction = ReviewedFunction {
    name: "np_forbid_mutation",
    source: "BEGIN\nRAISE EXCEPTION 'dpone nonproduction control rows are immutable' \
             USING ERRCODE = 'P0001';\nEND",
};

/// `pg_trigger.tgtype` of `BEFORE INSERT FOR EACH ROW` (row 1 + before 2 + insert 4): the
/// database backstop's triggers.
pub const BACKSTOP_TGTYPE: i16 = 7;

/// The name of every backstop trigger.
pub const BACKSTOP_TRIGGER: &str = "np_backstop";

/// The one `SET` clause of every backstop function (`pg_proc.proconfig`): the search path is
/// pinned, so a writer's own objects can never stand in for the catalog's.
pub const BACKSTOP_CONFIG: &str = "search_path=pg_catalog, pg_temp";

/// The database backstop of the reviewed DDL: per table, the function its `np_backstop`
/// `BEFORE INSERT … FOR EACH ROW` trigger calls. Each re-checks, for any writer, what the
/// store's client checks before it inserts into that table (the queue's stamps, instead, the
/// requesting session and time, which no writer chooses).
pub const BACKSTOP: [(&str, &str); 5] = [
    ("np_reservation", "np_check_reservation"),
    ("np_settlement", "np_check_settlement"),
    ("np_qualification_consumption", "np_check_consumption"),
    ("np_activation_selection", "np_check_selection"),
    ("np_admission_request", "np_stamp_request"),
];

/// The reviewed DDL, the source of the backstop functions' reviewed bodies.
const REVIEWED_DDL: &str = include_str!("../../../fixtures/nonproduction/control-store.sql");

/// The body of backstop function `name` exactly as the reviewed DDL writes it between `$$`
/// (schema `dpone_np_control`).
pub fn backstop_source(name: &str) -> Option<&'static str> {
    let head = format!(
        "CREATE OR REPLACE FUNCTION \"dpone_np_control\".\"{name}\"() RETURNS trigger \
         LANGUAGE plpgsql\nSET search_path = pg_catalog, pg_temp AS $$\n"
    );
    let start = REVIEWED_DDL.find(&head)? + head.len();
    let len = REVIEWED_DDL[start..].find("\n$$;\n")?;
    Some(&REVIEWED_DDL[start..start + len])
}

/// What the catalog says of a backstop function beyond [`FunctionFacts`]: its `proconfig`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackstopConfigs(pub Vec<(String, Vec<String>)>);

/// Table `table`'s backstop trigger against the reviewed DDL in schema `schema`: a table of
/// [`BACKSTOP`] has exactly one `np_backstop` trigger, `BEFORE INSERT … FOR EACH ROW`, enabled
/// for every session, without `WHEN` or column list, calling the reviewed function (body with
/// the schema's name, language, signature, volatility, `SECURITY INVOKER`, exactly
/// [`BACKSTOP_CONFIG`]); another table has none (its guards check refuses any extra trigger).
/// Refusals start with `DPONE_NP_STORE_TRIGGER_NOT_ENFORCING` (missing, inert) or
/// `DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED` (another function).
pub fn verify_backstop(
    schema: &str,
    table: &str,
    facts: &TableFacts,
    configs: &BackstopConfigs,
) -> Result<(), String> {
    let Some((_, function)) = BACKSTOP.iter().find(|(t, _)| *t == table) else {
        return Ok(());
    };
    let refuse = |reason: Reason, what: String| {
        Err(format!(
            "{}: control table {table:?} {what}",
            reason.code(REASON_PREFIX)
        ))
    };
    let found: Vec<&TriggerFacts> = facts
        .triggers
        .iter()
        .filter(|t| t.name == BACKSTOP_TRIGGER)
        .collect();
    let [t] = found.as_slice() else {
        return refuse(
            Reason::TriggerNotEnforcing,
            format!(
                "lacks the reviewed {BACKSTOP_TRIGGER:?} BEFORE INSERT trigger (the database \
                 backstop; apply {})",
                if table == "np_admission_request" {
                    "migrate-add-admission-queue.sql"
                } else {
                    "migrate-add-backstop.sql"
                }
            ),
        );
    };
    if t.tgtype != BACKSTOP_TGTYPE {
        return refuse(
            Reason::TriggerNotEnforcing,
            format!("trigger {:?} is not BEFORE INSERT ... FOR EACH ROW", t.name),
        );
    }
    if let Some(why) = t.not_enforcing() {
        return refuse(
            Reason::TriggerNotEnforcing,
            format!("trigger {:?} {why}", t.name),
        );
    }
    let f = &t.function;
    let reviewed = backstop_source(function)
        .map(|s| s.replace("\"dpone_np_control\"", &format!("\"{schema}\"")));
    let config = configs
        .0
        .iter()
        .find(|(n, _)| n == function)
        .map(|(_, c)| c.as_slice());
    let differs = if f.name != *function || !f.same_schema {
        Some("another name or schema")
    } else if reviewed.as_deref().map(str::trim) != Some(f.source.trim()) {
        Some("another body")
    } else if f.language != "plpgsql" {
        Some("another language")
    } else if f.returns != "trigger" || f.args != 0 {
        Some("another signature")
    } else if f.volatility != "v" {
        Some("another volatility")
    } else if f.security_definer {
        Some("SECURITY DEFINER")
    } else if config != Some(&[BACKSTOP_CONFIG.to_owned()][..]) {
        Some("another SET clause")
    } else {
        None
    };
    if let Some(what) = differs {
        return refuse(
            Reason::TriggerFunctionNotReviewed,
            format!(
                "trigger {:?} calls function {:?} with {what} than the reviewed {function:?}",
                t.name, f.name
            ),
        );
    }
    Ok(())
}

/// One table of the reviewed DDL.
#[derive(Clone, Copy, Debug)]
pub struct TableContract {
    /// Table name.
    pub name: &'static str,
    /// Exact columns in table order.
    pub columns: &'static [ColumnContract],
    /// Non-partial unique indexes that must exist (columns in order).
    pub unique: &'static [&'static [&'static str]],
}

/// Every table of the store with its exact columns, in table order.
pub const CONTRACT: [TableContract; 15] = [
    TableContract {
        name: "np_trust_revision",
        columns: &[
            ("environment_id", "uuid", true),
            ("revision", "bigint", true),
            ("policy_digest", "text", true),
            ("policy_bytes", "bytea", true),
            ("root_digest", "text", true),
            ("revocation_epoch", "bigint", true),
            ("max_workloads", "bigint", true),
            ("max_attempts", "bigint", true),
            ("max_source_rows", "bigint", true),
            ("max_source_bytes", "bigint", true),
            ("max_attempt_seconds", "bigint", true),
            ("max_validity_seconds", "bigint", true),
            ("recorded_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["environment_id", "revision"]],
    },
    TableContract {
        name: "np_registration",
        columns: &[
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("environment_id", "uuid", true),
            ("campaign_id", "uuid", true),
            ("grant_digest", "text", true),
            ("original_bytes", "bytea", true),
            ("trust_revision", "bigint", true),
            ("revocation_epoch", "bigint", true),
            ("not_before_utc", "timestamp with time zone", true),
            ("not_after_utc", "timestamp with time zone", true),
            ("max_workloads", "bigint", true),
            ("max_attempts", "bigint", true),
            ("max_source_rows", "bigint", true),
            ("max_source_bytes", "bigint", true),
            ("max_attempt_seconds", "bigint", true),
            ("qualification_run_id", "uuid", false),
            ("route", "text[]", false),
            ("activation_id", "uuid", false),
            ("registered_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["grant_id", "phase"]],
    },
    TableContract {
        name: "np_grant_workload",
        columns: &[
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("workload_id", "text", true),
            ("pack_digest", "text", true),
            ("max_workloads", "bigint", true),
            ("max_attempts", "bigint", true),
            ("max_source_rows", "bigint", true),
            ("max_source_bytes", "bigint", true),
            ("max_attempt_seconds", "bigint", true),
        ],
        unique: &[&["grant_id", "phase", "workload_id"]],
    },
    TableContract {
        name: "np_membership",
        columns: &[
            ("environment_id", "uuid", true),
            ("campaign_id", "uuid", true),
            ("phase", "text", true),
            ("workload_id", "text", true),
            ("grant_id", "uuid", true),
            ("charged_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["environment_id", "campaign_id", "phase", "workload_id"]],
    },
    TableContract {
        name: "np_qualification_consumption",
        columns: &[
            ("run_id", "uuid", true),
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("grant_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("consumed_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["run_id"]],
    },
    TableContract {
        name: "np_activation_candidate",
        columns: &[
            ("activation_id", "uuid", true),
            ("request_digest", "text", true),
            ("request_bytes", "bytea", true),
            ("recorded_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["activation_id", "request_digest"]],
    },
    TableContract {
        name: "np_activation_selection",
        columns: &[
            ("activation_id", "uuid", true),
            ("request_digest", "text", true),
            ("request_bytes", "bytea", true),
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("grant_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("selected_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["activation_id"]],
    },
    TableContract {
        name: "np_reservation",
        columns: &[
            ("reservation_id", "text", true),
            ("environment_id", "uuid", true),
            ("campaign_id", "uuid", true),
            ("phase", "text", true),
            ("route", "text[]", false),
            ("grant_id", "uuid", true),
            ("grant_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("workload_id", "text", true),
            ("attempt_id", "text", true),
            ("reserved_source_rows", "bigint", true),
            ("reserved_source_bytes", "bigint", true),
            ("reserved_seconds", "bigint", true),
            ("reserved_at_utc", "timestamp with time zone", true),
        ],
        unique: &[
            &["reservation_id"],
            &[
                "environment_id",
                "campaign_id",
                "phase",
                "workload_id",
                "attempt_id",
            ],
        ],
    },
    TableContract {
        name: "np_settlement",
        columns: &[
            ("reservation_id", "text", true),
            ("measured_source_rows", "bigint", true),
            ("measured_source_bytes", "bigint", true),
            ("measured_http_bytes", "bigint", true),
            ("outcome", "text", true),
            ("settled_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["reservation_id"]],
    },
    TableContract {
        name: "np_run_claim",
        columns: &[
            ("reservation_id", "text", true),
            ("claimed_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["reservation_id"]],
    },
    TableContract {
        name: "np_participant_enrollment",
        columns: &[
            ("environment_id", "uuid", true),
            ("enrollment_digest", "text", true),
            ("participant_id", "text", true),
            ("engine", "text", true),
            ("system_identifier", "text", true),
            ("database_name", "text", true),
            ("database_oid", "bigint", true),
            ("identity_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("enrolled_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["environment_id", "enrollment_digest", "participant_id"]],
    },
    TableContract {
        name: "np_run_participant",
        columns: &[
            ("reservation_id", "text", true),
            ("connection_role", "text", true),
            ("participant_id", "text", true),
            ("identity_digest", "text", true),
        ],
        unique: &[&["reservation_id", "connection_role"]],
    },
    TableContract {
        name: "np_participant_identity",
        columns: &[
            ("environment_id", "uuid", true),
            ("enrollment_digest", "text", true),
            ("participant_id", "text", true),
            ("engine", "text", true),
            ("identity_schema", "text", true),
            ("identity_record", "text", true),
            ("identity_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("enrolled_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["environment_id", "enrollment_digest", "participant_id"]],
    },
    TableContract {
        name: "np_admission_request",
        columns: &[
            ("request_id", "uuid", true),
            ("request_seq", "bigint", true),
            ("environment_id", "uuid", true),
            ("kind", "text", true),
            ("decider", "text", true),
            ("requester_pid", "integer", true),
            ("request", "bytea", true),
            ("requested_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["request_id"], &["request_seq"]],
    },
    TableContract {
        name: "np_admission_outcome",
        columns: &[
            ("request_id", "uuid", true),
            ("outcome", "bytea", true),
            ("decided_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["request_id"]],
    },
];

/// Per table: the CHECK constraints of the reviewed DDL, as `pg_get_constraintdef` renders them
/// (PostgreSQL 15; sorted).
pub const CHECKS: [(&str, &[&str]); 15] = [
    (
        "np_trust_revision",
        &[
            "CHECK (((max_attempt_seconds >= 0) AND (max_attempt_seconds <= 3600)))",
            "CHECK (((max_attempts >= 0) AND (max_attempts <= 128)))",
            "CHECK (((max_source_bytes >= 0) AND (max_source_bytes <= 1073741824)))",
            "CHECK (((max_source_rows >= 0) AND (max_source_rows <= 100000)))",
            "CHECK (((max_validity_seconds >= 1) AND (max_validity_seconds <= 86400)))",
            "CHECK (((max_workloads >= 0) AND (max_workloads <= 64)))",
            "CHECK (((octet_length(policy_bytes) >= 1) AND (octet_length(policy_bytes) <= 1048576)))",
            "CHECK ((policy_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
            "CHECK ((revision >= 1))",
            "CHECK ((revocation_epoch >= 0))",
            "CHECK ((root_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
        ],
    ),
    (
        "np_registration",
        &[
            "CHECK ((((phase = 'qualification'::text) AND (qualification_run_id IS NOT NULL) AND (cardinality(route) = 6) AND (array_position(route, NULL::text) IS NULL) AND (activation_id IS NULL)) OR ((phase = 'execution'::text) AND (qualification_run_id IS NULL) AND (route IS NULL) AND (activation_id IS NOT NULL))))",
            "CHECK (((max_attempt_seconds >= 0) AND (max_attempt_seconds <= 3600)))",
            "CHECK (((max_attempts >= 0) AND (max_attempts <= 128)))",
            "CHECK (((max_source_bytes >= 0) AND (max_source_bytes <= 1073741824)))",
            "CHECK (((max_source_rows >= 0) AND (max_source_rows <= 100000)))",
            "CHECK (((max_workloads >= 0) AND (max_workloads <= 64)))",
            "CHECK (((not_after_utc > not_before_utc) AND ((not_after_utc - not_before_utc) <= '24:00:00'::interval)))",
            "CHECK (((octet_length(original_bytes) >= 1) AND (octet_length(original_bytes) <= 1048576)))",
            "CHECK ((grant_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
            "CHECK ((phase = ANY (ARRAY['qualification'::text, 'execution'::text])))",
            "CHECK ((revocation_epoch >= 0))",
        ],
    ),
    (
        "np_grant_workload",
        &[
            "CHECK (((max_attempt_seconds >= 0) AND (max_attempt_seconds <= 3600)))",
            "CHECK (((max_attempts >= 0) AND (max_attempts <= 128)))",
            "CHECK (((max_source_bytes >= 0) AND (max_source_bytes <= 1073741824)))",
            "CHECK (((max_source_rows >= 0) AND (max_source_rows <= 100000)))",
            "CHECK (((max_workloads >= 0) AND (max_workloads <= 64)))",
            "CHECK ((pack_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
            "CHECK ((workload_id ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$'::text))",
        ],
    ),
    (
        "np_membership",
        &["CHECK ((phase = ANY (ARRAY['qualification'::text, 'execution'::text])))"],
    ),
    (
        "np_qualification_consumption",
        &["CHECK ((phase = 'qualification'::text))"],
    ),
    (
        "np_activation_candidate",
        &[
            "CHECK (((octet_length(request_bytes) >= 1) AND (octet_length(request_bytes) <= 1048576)))",
            "CHECK ((request_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
        ],
    ),
    (
        "np_activation_selection",
        &[
            "CHECK (((octet_length(request_bytes) >= 1) AND (octet_length(request_bytes) <= 1048576)))",
            "CHECK ((phase = 'execution'::text))",
            "CHECK ((request_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
        ],
    ),
    (
        "np_reservation",
        &[
            "CHECK (((phase = 'qualification'::text) = (route IS NOT NULL)))",
            "CHECK (((reserved_seconds >= 0) AND (reserved_seconds <= 3600)))",
            "CHECK (((reserved_source_bytes >= 0) AND (reserved_source_bytes <= 1073741824)))",
            "CHECK (((reserved_source_rows >= 0) AND (reserved_source_rows <= 100000)))",
            "CHECK ((attempt_id ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$'::text))",
            "CHECK ((phase = ANY (ARRAY['qualification'::text, 'execution'::text])))",
            "CHECK ((reservation_id ~ '^sha256:[0-9a-f]{64}$'::text))",
        ],
    ),
    (
        "np_settlement",
        &[
            "CHECK ((measured_http_bytes >= 0))",
            "CHECK ((measured_source_bytes >= 0))",
            "CHECK ((measured_source_rows >= 0))",
            "CHECK ((outcome = ANY (ARRAY['succeeded'::text, 'failed'::text, 'incomplete'::text])))",
        ],
    ),
    ("np_run_claim", &[]),
    (
        "np_participant_enrollment",
        &[
            "CHECK (((database_oid >= 1) AND (database_oid <= '4294967295'::bigint)))",
            "CHECK (((octet_length(database_name) >= 1) AND (octet_length(database_name) <= 63)))",
            "CHECK ((engine = 'postgresql'::text))",
            "CHECK ((enrollment_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
            "CHECK ((identity_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
            "CHECK ((participant_id ~ '^[a-z0-9][a-z0-9._-]{0,127}$'::text))",
            "CHECK ((system_identifier ~ '^[0-9]{1,20}$'::text))",
        ],
    ),
    (
        "np_run_participant",
        &[
            "CHECK ((connection_role = ANY (ARRAY['source'::text, 'target'::text, 'state'::text])))",
            "CHECK ((identity_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
            "CHECK ((participant_id ~ '^[a-z0-9][a-z0-9._-]{0,127}$'::text))",
        ],
    ),
    (
        "np_participant_identity",
        &[
            "CHECK (((octet_length(identity_record) >= 2) AND (octet_length(identity_record) <= 262144)))",
            "CHECK ((engine = ANY (ARRAY['clickhouse'::text, 'sqlserver'::text])))",
            "CHECK ((enrollment_digest ~ '^sha256:[0-9a-f]{64}$'::text))",
            "CHECK ((identity_digest = ('sha256:'::text || encode(sha256(convert_to(identity_record, 'UTF8'::name)), 'hex'::text))))",
            "CHECK ((identity_schema = (('dpone.np-physical-identity.'::text || engine) || '.v1'::text)))",
            "CHECK ((participant_id ~ '^[a-z0-9][a-z0-9._-]{0,127}$'::text))",
        ],
    ),
    (
        "np_admission_request",
        &[
            "CHECK (((octet_length(request) >= 2) AND (octet_length(request) <= 262144)))",
            "CHECK ((decider ~ '^[a-z0-9][a-z0-9.:_-]{0,127}$'::text))",
            "CHECK ((kind = ANY (ARRAY['admit'::text, 'settle'::text])))",
        ],
    ),
    (
        "np_admission_outcome",
        &["CHECK (((octet_length(outcome) >= 2) AND (octet_length(outcome) <= 65536)))"],
    ),
];

/// Per table: the foreign keys of the reviewed DDL (tables without one are absent).
pub const FOREIGN_KEYS: [(&str, &[ForeignKeyContract]); 12] = [
    (
        "np_registration",
        &[(
            &["environment_id", "trust_revision"],
            "np_trust_revision",
            &["environment_id", "revision"],
        )],
    ),
    (
        "np_grant_workload",
        &[(
            &["grant_id", "phase"],
            "np_registration",
            &["grant_id", "phase"],
        )],
    ),
    (
        "np_membership",
        &[(
            &["grant_id", "phase"],
            "np_registration",
            &["grant_id", "phase"],
        )],
    ),
    (
        "np_qualification_consumption",
        &[(
            &["grant_id", "phase"],
            "np_registration",
            &["grant_id", "phase"],
        )],
    ),
    (
        "np_activation_selection",
        &[(
            &["grant_id", "phase"],
            "np_registration",
            &["grant_id", "phase"],
        )],
    ),
    (
        "np_reservation",
        &[(
            &["grant_id", "phase"],
            "np_registration",
            &["grant_id", "phase"],
        )],
    ),
    (
        "np_settlement",
        &[(&["reservation_id"], "np_reservation", &["reservation_id"])],
    ),
    (
        "np_run_claim",
        &[(&["reservation_id"], "np_reservation", &["reservation_id"])],
    ),
    (
        "np_participant_enrollment",
        &[(
            &["environment_id", "trust_revision"],
            "np_trust_revision",
            &["environment_id", "revision"],
        )],
    ),
    (
        "np_run_participant",
        &[(&["reservation_id"], "np_run_claim", &["reservation_id"])],
    ),
    (
        "np_participant_identity",
        &[(
            &["environment_id", "trust_revision"],
            "np_trust_revision",
            &["environment_id", "revision"],
        )],
    ),
    (
        "np_admission_outcome",
        &[(&["request_id"], "np_admission_request", &["request_id"])],
    ),
];

/// The table's constraints against its reviewed CHECKs and foreign keys.
fn verify_constraints(contract: &TableContract, facts: &TableFacts) -> Result<(), String> {
    let table = contract.name;
    let checks = CHECKS
        .iter()
        .find(|(t, _)| *t == table)
        .map_or(&[][..], |(_, c)| *c);
    let fks = FOREIGN_KEYS
        .iter()
        .find(|(t, _)| *t == table)
        .map_or(&[][..], |(_, f)| *f);
    dpone_pg_catalog::verify_constraints("control table", "the store", table, facts, checks, fks)
}

/// Checks one table against its contract; `Err` names what differs.
pub fn verify_table(contract: &TableContract, facts: &TableFacts) -> Result<(), String> {
    let table = contract.name;
    verify_columns("control table", table, contract.columns, facts)?;
    let actual: Vec<&str> = facts.columns.iter().map(|(n, _, _)| n.as_str()).collect();
    if actual
        .iter()
        .copied()
        .ne(contract.columns.iter().map(|(n, _, _)| *n))
    {
        return Err(format!(
            "control table {table:?} has its columns in another order than the reviewed DDL"
        ));
    }
    for cols in contract.unique {
        let found = facts
            .unique
            .iter()
            .any(|(c, p)| p.is_none() && c.iter().map(String::as_str).eq(cols.iter().copied()));
        if !found {
            return Err(format!(
                "control table {table:?} lacks the unique index on ({})",
                cols.join(", ")
            ));
        }
    }
    // The backstop trigger of a backstop table is checked by [`verify_backstop`]; every other
    // trigger is the immutability guards'.
    let guards = if BACKSTOP.iter().any(|(t, _)| *t == table) {
        let mut f = facts.clone();
        f.triggers.retain(|t| t.name != BACKSTOP_TRIGGER);
        std::borrow::Cow::Owned(f)
    } else {
        std::borrow::Cow::Borrowed(facts)
    };
    verify_guards(
        REASON_PREFIX,
        "control table",
        table,
        &guards,
        true,
        &FORBID_MUTATION,
    )?;
    verify_constraints(contract, facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reviewed(c: &TableContract) -> TableFacts {
        TableFacts {
            columns: c
                .columns
                .iter()
                .map(|(n, t, nn)| ((*n).into(), (*t).into(), *nn))
                .collect(),
            unique: c
                .unique
                .iter()
                .map(|u| (u.iter().map(|s| (*s).to_owned()).collect(), None))
                .collect(),
            triggers: vec![
                TriggerFacts::reviewed("np_immutable", IMMUTABLE_TGTYPE, &FORBID_MUTATION),
                TriggerFacts::reviewed("np_no_truncate", TRUNCATE_GUARD_TGTYPE, &FORBID_MUTATION),
            ],
            constraints: reviewed_constraints(c.name),
            ..TableFacts::default()
        }
    }

    #[test]
    fn the_reviewed_function_and_guards_are_the_ddls() {
        // Tier: unit (the contract against the reviewed DDL's text).
        let ddl = include_str!("../../../fixtures/nonproduction/control-store.sql");
        let f = "CREATE FUNCTION \"dpone_np_control\".\"np_forbid_mutation\"() RETURNS trigger \
                 LANGUAGE plpgsql AS $$\n";
        assert!(
            ddl.contains(&format!("{f}{}\n$$;\n", FORBID_MUTATION.source)),
            "the reviewed function"
        );
        for c in &CONTRACT {
            for guard in [
                "np_immutable BEFORE UPDATE OR DELETE",
                "np_no_truncate BEFORE TRUNCATE",
            ] {
                assert!(
                    ddl.contains(&format!(
                        "CREATE TRIGGER {guard} ON \"dpone_np_control\".\"{}\"\n",
                        c.name
                    )),
                    "{guard} on {}",
                    c.name
                );
            }
        }
    }

    fn reviewed_constraints(table: &str) -> Vec<Constraint> {
        let checks = CHECKS.iter().find(|(t, _)| *t == table).unwrap().1;
        let fks = FOREIGN_KEYS
            .iter()
            .find(|(t, _)| *t == table)
            .map_or(&[][..], |(_, f)| *f);
        let mut out: Vec<Constraint> = checks
            .iter()
            .map(|d| Constraint::Check {
                definition: (*d).into(),
                validated: true,
            })
            .collect();
        out.extend(
            fks.iter()
                .map(|(cols, to, ref_cols)| Constraint::ForeignKey {
                    columns: cols.iter().map(|c| (*c).into()).collect(),
                    references: Some((*to).into()),
                    referenced_columns: ref_cols.iter().map(|c| (*c).into()).collect(),
                    actions: REVIEWED_FK_ACTIONS.into(),
                    validated: true,
                }),
        );
        for (from, keys) in &FOREIGN_KEYS {
            if keys.iter().any(|(_, to, _)| *to == table) {
                out.push(Constraint::ReferencedBy(Some((*from).into())));
            }
        }
        out
    }

    #[test]
    fn every_contract_table_has_its_reviewed_checks_listed() {
        for c in &CONTRACT {
            assert!(CHECKS.iter().any(|(t, _)| *t == c.name), "{}", c.name);
        }
        let named = CHECKS.iter().map(|(t, _)| *t);
        for t in named.chain(FOREIGN_KEYS.iter().map(|(t, _)| *t)) {
            assert!(CONTRACT.iter().any(|c| c.name == t), "{t}");
        }
    }

    #[test]
    fn an_added_dropped_or_weakened_check_or_foreign_key_is_refused() {
        // Tier: unit (pure contract check).
        let settlement = CONTRACT.iter().find(|c| c.name == "np_settlement").unwrap();
        let reservation = CONTRACT
            .iter()
            .find(|c| c.name == "np_reservation")
            .unwrap();
        let mut f = reviewed(settlement);
        f.constraints.push(Constraint::Check {
            definition: "CHECK ((measured_source_rows < 10))".into(),
            validated: true,
        });
        let e = verify_table(settlement, &f).unwrap_err();
        assert!(
            e.contains("CHECK constraint the reviewed DDL does not"),
            "{e}"
        );
        let mut f = reviewed(settlement);
        f.constraints.remove(0);
        assert!(
            verify_table(settlement, &f)
                .unwrap_err()
                .contains("lacks the reviewed CHECK")
        );
        let mut f = reviewed(settlement);
        if let Constraint::Check { validated, .. } = &mut f.constraints[0] {
            *validated = false;
        }
        assert!(
            verify_table(settlement, &f)
                .unwrap_err()
                .contains("NOT VALID")
        );
        // The reviewed foreign key cascading, deferrable, dropped; an added one.
        for weakened in ["aca", "aasd"] {
            let mut f = reviewed(settlement);
            for c in &mut f.constraints {
                if let Constraint::ForeignKey { actions, .. } = c {
                    *actions = weakened.into();
                }
            }
            assert!(verify_table(settlement, &f).is_err(), "{weakened}");
        }
        let mut f = reviewed(settlement);
        f.constraints
            .retain(|c| !matches!(c, Constraint::ForeignKey { .. }));
        assert!(
            verify_table(settlement, &f)
                .unwrap_err()
                .contains("lacks a foreign key")
        );
        let mut f = reviewed(reservation);
        f.constraints.push(Constraint::ForeignKey {
            columns: vec!["grant_id".into()],
            references: None,
            referenced_columns: vec!["grant_id".into()],
            actions: REVIEWED_FK_ACTIONS.into(),
            validated: true,
        });
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("foreign key")
        );
        let mut f = reviewed(reservation);
        f.constraints.push(Constraint::ReferencedBy(None));
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("outside the store")
        );
    }

    #[test]
    fn the_reviewed_shape_passes_and_every_deviation_is_named() {
        // Tier: unit (pure contract check).
        for c in &CONTRACT {
            assert_eq!(verify_table(c, &reviewed(c)), Ok(()), "{}", c.name);
        }
        let reservation = CONTRACT
            .iter()
            .find(|c| c.name == "np_reservation")
            .unwrap();
        let mut f = reviewed(reservation);
        f.unique.pop();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("unique index")
        );
        let mut f = reviewed(reservation);
        f.unique[1].1 = Some("(phase = 'execution'::text)".into());
        assert!(
            verify_table(reservation, &f).is_err(),
            "a partial index is not the contract"
        );
        let mut f = reviewed(reservation);
        f.columns[10].1 = "integer".into();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("reserved_source_rows")
        );
        let mut f = reviewed(reservation);
        f.columns.push(("refund".into(), "bigint".into(), false));
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("\"refund\"")
        );
        let mut f = reviewed(reservation);
        f.columns.swap(1, 2);
        assert!(verify_table(reservation, &f).unwrap_err().contains("order"));
        let mut f = reviewed(reservation);
        f.triggers.clear();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("immutability")
        );
        let mut f = reviewed(reservation);
        f.triggers[0].function.source = "BEGIN\n-- RAISE EXCEPTION 'x';\nEND".into();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .starts_with("DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED: "),
            "a trigger that does not raise"
        );
        let mut f = reviewed(reservation);
        f.triggers[0].enabled = "R".into();
        assert!(
            verify_table(reservation, &f).unwrap_err().starts_with(
                "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING: control table \"np_reservation\""
            ),
            "a replica-only trigger"
        );
        let mut f = reviewed(reservation);
        f.triggers.pop();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .starts_with("DPONE_NP_STORE_TRUNCATE_UNGUARDED: "),
            "no truncate guard"
        );
        let mut f = reviewed(reservation);
        f.rules.push("keep".into());
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .starts_with("DPONE_NP_STORE_RULE_PRESENT: "),
            "a rule"
        );
        let mut f = reviewed(reservation);
        f.row_security.0 = true;
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .starts_with("DPONE_NP_STORE_ROW_SECURITY_PRESENT: "),
            "row security"
        );
        let mut f = reviewed(reservation);
        f.triggers
            .push(TriggerFacts::reviewed("extra", 5, &FORBID_MUTATION));
        assert!(verify_table(reservation, &f).is_err(), "an extra trigger");
        let mut f = reviewed(reservation);
        f.columns[4].2 = true;
        assert!(verify_table(reservation, &f).is_err(), "nullability");
        assert!(
            verify_table(reservation, &TableFacts::default())
                .unwrap_err()
                .contains("does not exist")
        );
    }

    fn backstopped(schema: &str, table: &str, function: &str) -> (TableFacts, BackstopConfigs) {
        let c = CONTRACT.iter().find(|c| c.name == table).unwrap();
        let mut f = reviewed(c);
        let source = backstop_source(function)
            .unwrap()
            .replace("\"dpone_np_control\"", &format!("\"{schema}\""));
        let mut t = TriggerFacts::reviewed(BACKSTOP_TRIGGER, BACKSTOP_TGTYPE, &FORBID_MUTATION);
        t.function.name = function.into();
        t.function.source = source;
        t.function.has_config = true;
        f.triggers.push(t);
        let configs = BackstopConfigs(vec![(function.into(), vec![BACKSTOP_CONFIG.into()])]);
        (f, configs)
    }

    #[test]
    fn the_backstop_is_the_ddls_and_each_weakening_has_its_reason() {
        // Tier: unit (pure contract check against the reviewed DDL's text).
        for (table, function) in BACKSTOP {
            assert!(backstop_source(function).is_some(), "{function}");
            let ddl = REVIEWED_DDL;
            assert!(
                ddl.contains(&format!(
                    "CREATE TRIGGER np_backstop BEFORE INSERT ON \"dpone_np_control\".\"{table}\"\n\
                     FOR EACH ROW EXECUTE FUNCTION \"dpone_np_control\".\"{function}\"();\n"
                )),
                "{table}"
            );
            let c = CONTRACT.iter().find(|c| c.name == table).unwrap();
            let (f, configs) = backstopped("s1", table, function);
            assert_eq!(verify_table(c, &f), Ok(()), "{table}");
            assert_eq!(
                verify_backstop("s1", table, &f, &configs),
                Ok(()),
                "{table}"
            );
        }
        let (table, function) = BACKSTOP[0];
        let code = |r: Result<(), String>| r.unwrap_err().split(':').next().unwrap().to_owned();
        let not_enforcing = "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING";
        let not_reviewed = "DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED";
        type Weaken = fn(&mut TableFacts, &mut BackstopConfigs);
        let cases: [(&str, Weaken); 7] = [
            (not_enforcing, |f, _| {
                f.triggers.retain(|t| t.name != BACKSTOP_TRIGGER)
            }),
            (not_enforcing, |f, _| f.triggers[2].enabled = "D".into()),
            (not_enforcing, |f, _| f.triggers[2].tgtype = 5),
            (not_reviewed, |f, _| {
                f.triggers[2].function.source = "BEGIN\nRETURN NEW;\nEND".into()
            }),
            (not_reviewed, |f, _| {
                f.triggers[2].function.security_definer = true
            }),
            (not_reviewed, |_, c| c.0.clear()),
            (not_reviewed, |_, c| {
                c.0[0].1 = vec!["search_path=public".into()]
            }),
        ];
        for (reason, weaken) in cases {
            let (mut f, mut configs) = backstopped("s1", table, function);
            weaken(&mut f, &mut configs);
            assert_eq!(code(verify_backstop("s1", table, &f, &configs)), reason);
        }
        // Another schema's body is another body.
        let (f, configs) = backstopped("s2", table, function);
        assert_eq!(
            code(verify_backstop("s1", table, &f, &configs)),
            not_reviewed
        );
        // A backstop trigger on a table the backstop does not cover is an extra trigger.
        let c = CONTRACT.iter().find(|c| c.name == "np_run_claim").unwrap();
        let (mut f, _) = backstopped("s1", table, function);
        f.columns = reviewed(c).columns;
        f.unique = reviewed(c).unique;
        f.constraints = reviewed(c).constraints;
        assert!(verify_table(c, &f).is_err());
    }
}
