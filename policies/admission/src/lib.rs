//! The shipped admission policy: static and runtime admission of ClickHouse cluster full-refresh
//! publication (spec 000, "Static normalization and runtime admission").
//!
//! [`admit_static`] and [`admit_runtime`] are the whole policy as plain Rust; they compile
//! natively (for decision-table parity tests) and, on `wasm32`, are exported as the
//! `dpone:policy/admission-policy` world by `component`.
//!
//! Both functions are pure, deterministic and total. They never stop at the first problem: every
//! blocker is collected, in the fixed rule order documented in `docs/policies/admission.md`, and
//! each rule contributes at most one [`Reason`]. Every code is listed in [`codes`]. Messages are
//! short, never end with a period, name members only by their opaque ids and clip any text taken
//! from the input to [`CLIP_BYTES`] bytes, so a message stays well under the host's 1 KiB limit.

use std::collections::{BTreeMap, BTreeSet};

use dpone_policy_model::admission::{
    AdmittedMember, ColumnFacts, MemberFacts, ReplicationDecision, ReplicationMode,
    RuntimeAdmission, RuntimeDecision, RuntimeFacts, StaticDecision, StaticFacts, V1AuthorityState,
};
use dpone_policy_model::types::Reason;

#[cfg(target_arch = "wasm32")]
mod component;

/// Stable blocker codes, in the order rules are evaluated.
pub mod codes {
    /// `replication_mode` is present but not exactly `internal` or `external`.
    pub const MODE_INVALID: &str = "DPONE_CLICKHOUSE_CLUSTER_MODE_INVALID";
    /// `cluster.name` is empty.
    pub const NAME_REQUIRED: &str = "DPONE_CLICKHOUSE_CLUSTER_NAME_REQUIRED";
    /// `cluster.ddl_scope` is absent or not exactly `cluster`.
    pub const DDL_SCOPE_REQUIRED: &str = "DPONE_CLICKHOUSE_CLUSTER_DDL_SCOPE_REQUIRED";
    /// `max_source_bytes` is absent or not positive.
    pub const MAX_SOURCE_BYTES_REQUIRED: &str =
        "DPONE_CLICKHOUSE_CLUSTER_MAX_SOURCE_BYTES_REQUIRED";
    /// The target database is empty.
    pub const TARGET_DATABASE_REQUIRED: &str = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DATABASE_REQUIRED";
    /// The staging database differs from the target database.
    pub const STAGING_DATABASE_MISMATCH: &str =
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH";
    /// An access table is configured.
    pub const ACCESS_TABLE_FORBIDDEN: &str = "DPONE_CLICKHOUSE_CLUSTER_ACCESS_TABLE_FORBIDDEN";
    /// The declared engine is not a `*MergeTree` engine either mode accepts.
    pub const ENGINE_UNSUPPORTED: &str = "DPONE_CLICKHOUSE_CLUSTER_ENGINE_UNSUPPORTED";
    /// The declared engine belongs to the other mode.
    pub const ENGINE_MODE_MISMATCH: &str = "DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH";

    /// The host could not observe every member.
    pub const INVENTORY_INCOMPLETE: &str = "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE";
    /// The inventory does not hold exactly one shard.
    pub const SHARD_COUNT: &str = "DPONE_CLICKHOUSE_CLUSTER_SHARD_COUNT";
    /// The inventory holds fewer than two distinct members.
    pub const MEMBER_COUNT: &str = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_COUNT";
    /// A `(shard_num, replica_num)` pair occurs more than once.
    pub const DUPLICATE_MEMBER: &str = "DPONE_CLICKHOUSE_CLUSTER_DUPLICATE_MEMBER";
    /// Members disagree on `internal_replication`.
    pub const FLAG_MIXED: &str = "DPONE_CLICKHOUSE_CLUSTER_FLAG_MIXED";
    /// The uniform `internal_replication` flag contradicts the declared mode.
    pub const FLAG_MODE_MISMATCH: &str = "DPONE_CLICKHOUSE_CLUSTER_FLAG_MODE_MISMATCH";
    /// A member id is empty, too long or not printable ASCII.
    pub const MEMBER_ID_INVALID: &str = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_ID_INVALID";
    /// A member id is used by more than one inventory row.
    pub const DUPLICATE_MEMBER_ID: &str = "DPONE_CLICKHOUSE_CLUSTER_DUPLICATE_MEMBER_ID";
    /// A member's target database engine is not `Atomic`.
    pub const DATABASE_NOT_ATOMIC: &str = "DPONE_CLICKHOUSE_CLUSTER_DATABASE_NOT_ATOMIC";
    /// The KeeperMap authority facade did not answer on a member.
    pub const KEEPER_MAP_UNAVAILABLE: &str = "DPONE_CLICKHOUSE_CLUSTER_KEEPER_MAP_UNAVAILABLE";
    /// No direct member-local connection could be opened to a member.
    pub const DIRECT_CONNECTION_UNAVAILABLE: &str =
        "DPONE_CLICKHOUSE_CLUSTER_DIRECT_CONNECTION_UNAVAILABLE";
    /// The target exists on some members and not on others.
    pub const TARGET_PRESENCE_MIXED: &str = "DPONE_CLICKHOUSE_CLUSTER_TARGET_PRESENCE_MIXED";
    /// An existing target's engine is not a `*MergeTree` engine either mode accepts.
    pub const TARGET_ENGINE_UNSUPPORTED: &str =
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_UNSUPPORTED";
    /// External mode found an existing `Replicated*MergeTree` target.
    pub const REPLICATED_ENGINE_EXTERNAL: &str =
        "DPONE_CLICKHOUSE_CLUSTER_REPLICATED_ENGINE_EXTERNAL";
    /// Internal mode found an existing non-replicated `*MergeTree` target.
    pub const TARGET_ENGINE_MODE_MISMATCH: &str =
        "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_MODE_MISMATCH";
    /// Existing targets report different engines on different members.
    pub const TARGET_ENGINE_DIVERGENT: &str = "DPONE_CLICKHOUSE_CLUSTER_TARGET_ENGINE_DIVERGENT";
    /// The target schema has no columns.
    pub const COLUMNS_REQUIRED: &str = "DPONE_CLICKHOUSE_CLUSTER_COLUMNS_REQUIRED";
    /// A column name is empty.
    pub const COLUMN_NAME_REQUIRED: &str = "DPONE_CLICKHOUSE_CLUSTER_COLUMN_NAME_REQUIRED";
    /// A column name occurs more than once.
    pub const DUPLICATE_COLUMN: &str = "DPONE_CLICKHOUSE_CLUSTER_DUPLICATE_COLUMN";
    /// A column type is outside the canonical content-digest profile.
    pub const UNSUPPORTED_COLUMN_TYPE: &str = "DPONE_CLICKHOUSE_CLUSTER_UNSUPPORTED_COLUMN_TYPE";
    /// External mode found an unresolved V1 authority record for the same target.
    pub const V1_AUTHORITY_UNRESOLVED: &str = "DPONE_CLICKHOUSE_CLUSTER_V1_AUTHORITY_UNRESOLVED";

    /// Every static code, in evaluation order.
    pub const STATIC: &[&str] = &[
        MODE_INVALID,
        NAME_REQUIRED,
        DDL_SCOPE_REQUIRED,
        MAX_SOURCE_BYTES_REQUIRED,
        TARGET_DATABASE_REQUIRED,
        STAGING_DATABASE_MISMATCH,
        ACCESS_TABLE_FORBIDDEN,
        ENGINE_UNSUPPORTED,
        ENGINE_MODE_MISMATCH,
    ];

    /// Every runtime-only code, in evaluation order (runtime admission reports [`STATIC`] first).
    pub const RUNTIME: &[&str] = &[
        INVENTORY_INCOMPLETE,
        SHARD_COUNT,
        MEMBER_COUNT,
        DUPLICATE_MEMBER,
        FLAG_MIXED,
        FLAG_MODE_MISMATCH,
        MEMBER_ID_INVALID,
        DUPLICATE_MEMBER_ID,
        DATABASE_NOT_ATOMIC,
        KEEPER_MAP_UNAVAILABLE,
        DIRECT_CONNECTION_UNAVAILABLE,
        TARGET_PRESENCE_MIXED,
        TARGET_ENGINE_UNSUPPORTED,
        REPLICATED_ENGINE_EXTERNAL,
        TARGET_ENGINE_MODE_MISMATCH,
        TARGET_ENGINE_DIVERGENT,
        COLUMNS_REQUIRED,
        COLUMN_NAME_REQUIRED,
        DUPLICATE_COLUMN,
        UNSUPPORTED_COLUMN_TYPE,
        V1_AUTHORITY_UNRESOLVED,
    ];
}

/// Text taken from the input is clipped to this many bytes (on a character boundary) in messages.
pub const CLIP_BYTES: usize = 64;

/// At most this many members or columns are named in one message.
const LIST_MAX: usize = 5;

/// Column names and types are each clipped to this many bytes when listed together.
const LIST_ITEM_BYTES: usize = 32;

/// Longest accepted member id, in bytes.
pub const MEMBER_ID_MAX_BYTES: usize = 128;

/// `requested` in every cluster decision (`local` for one server).
const REQUESTED: &str = "cluster";

/// `ddl_scope` of a manifest without a cluster block: one server, local publication.
pub const LOCAL_SCOPE: &str = "local";

/// Static admission, evaluated at `check` and `plan`.
pub fn admit_static(facts: &StaticFacts) -> StaticDecision {
    let (mode, blockers) = static_rules(facts);
    match mode {
        Some(mode) if blockers.is_empty() => StaticDecision::Admitted(ReplicationDecision {
            requested: if mode == ReplicationMode::Local {
                LOCAL_SCOPE
            } else {
                REQUESTED
            }
            .into(),
            selected: selected(mode).into(),
            replication_mode: mode,
            runtime_admission_required: true,
            no_fallback: true,
        }),
        // An unparsable mode always leaves MODE_INVALID among the blockers.
        _ => StaticDecision::Blocked(blockers),
    }
}

/// Runtime admission over the complete inventory, evaluated before any source I/O.
///
/// Every static rule is re-checked first and its blockers come first.
pub fn admit_runtime(facts: &RuntimeFacts) -> RuntimeDecision {
    let (mode, mut blockers) = static_rules(&facts.static_facts);

    // Per-member rules report members in stable member-id order, whatever the input order.
    let mut members: Vec<&MemberFacts> = facts.members.iter().collect();
    members.sort_by(|a, b| {
        (a.member_id.as_str(), a.shard_num, a.replica_num).cmp(&(
            b.member_id.as_str(),
            b.shard_num,
            b.replica_num,
        ))
    });

    if !facts.inventory_complete {
        blockers.push(Reason::new(
            codes::INVENTORY_INCOMPLETE,
            "the cluster inventory is incomplete; partial inventory never admits",
        ));
    }
    topology_rules(&members, mode, &mut blockers);
    member_rules(&members, &mut blockers);
    target_rules(&members, mode, &mut blockers);
    column_rules(&facts.columns, &mut blockers);
    if mode == Some(ReplicationMode::External) && facts.v1_authority == V1AuthorityState::Unresolved
    {
        blockers.push(Reason::new(
            codes::V1_AUTHORITY_UNRESOLVED,
            "an unresolved V1 authority record exists for this target; external mode is blocked",
        ));
    }

    match mode {
        Some(mode) if blockers.is_empty() => RuntimeDecision::Admitted(RuntimeAdmission {
            replication_mode: mode,
            members: members
                .iter()
                .map(|m| AdmittedMember {
                    member_id: m.member_id.clone(),
                    shard_num: m.shard_num,
                    replica_num: m.replica_num,
                })
                .collect(),
        }),
        _ => RuntimeDecision::Blocked(blockers),
    }
}

/// Whether a column type, exactly as `system.columns.type` reports it, is inside the canonical
/// content-digest profile (see `docs/policies/admission.md`, "Column type allow-list").
pub fn is_supported_column_type(type_name: &str) -> bool {
    column_type_support(type_name) == TypeSupport::Supported
}

fn selected(mode: ReplicationMode) -> &'static str {
    match mode {
        ReplicationMode::Internal => "cluster_internal",
        ReplicationMode::External => "cluster_external",
        ReplicationMode::Local => "local",
    }
}

fn mode_name(mode: ReplicationMode) -> &'static str {
    match mode {
        ReplicationMode::Internal => "internal",
        ReplicationMode::External => "external",
        ReplicationMode::Local => "local",
    }
}

// ---------------------------------------------------------------------------------------------
// Static rules
// ---------------------------------------------------------------------------------------------

/// The static rules; returns the parsed mode (none when invalid) and the blockers.
fn static_rules(f: &StaticFacts) -> (Option<ReplicationMode>, Vec<Reason>) {
    let mut blockers = Vec::new();

    // One server: no cluster block (the host passes an empty cluster name and the `local`
    // scope); a replication mode belongs to a cluster.
    let local = f.ddl_scope.as_deref() == Some(LOCAL_SCOPE) && f.cluster_name.is_empty();
    let mode = match f.replication_mode.as_deref() {
        None if local => Some(ReplicationMode::Local),
        Some(other) if local => {
            blockers.push(Reason::new(
                codes::MODE_INVALID,
                format!(
                    "replication_mode applies to cluster publication only, found {} for one server",
                    quoted(other)
                ),
            ));
            None
        }
        None | Some("internal") => Some(ReplicationMode::Internal),
        Some("external") => Some(ReplicationMode::External),
        Some(other) => {
            blockers.push(Reason::new(
                codes::MODE_INVALID,
                format!(
                    "replication_mode must be exactly internal or external, found {}",
                    quoted(other)
                ),
            ));
            None
        }
    };

    if f.cluster_name.trim().is_empty() && !local {
        blockers.push(Reason::new(
            codes::NAME_REQUIRED,
            "cluster.name is required",
        ));
    }

    match f.ddl_scope.as_deref() {
        Some("cluster") => {}
        _ if local => {}
        None => blockers.push(Reason::new(
            codes::DDL_SCOPE_REQUIRED,
            "cluster.ddl_scope must be cluster, it is absent",
        )),
        Some(other) => blockers.push(Reason::new(
            codes::DDL_SCOPE_REQUIRED,
            format!("cluster.ddl_scope must be cluster, found {}", quoted(other)),
        )),
    }

    match f.max_source_bytes {
        Some(n) if n > 0 => {}
        None => blockers.push(Reason::new(
            codes::MAX_SOURCE_BYTES_REQUIRED,
            "a positive max_source_bytes is required, it is absent",
        )),
        Some(n) => blockers.push(Reason::new(
            codes::MAX_SOURCE_BYTES_REQUIRED,
            format!("max_source_bytes must be positive, found {n}"),
        )),
    }

    if f.target_database.trim().is_empty() {
        blockers.push(Reason::new(
            codes::TARGET_DATABASE_REQUIRED,
            "the target database is required",
        ));
    }
    if f.staging_database != f.target_database {
        blockers.push(Reason::new(
            codes::STAGING_DATABASE_MISMATCH,
            "the staging database must be the target database",
        ));
    }

    if let Some(engine) = &f.access_table_engine {
        blockers.push(Reason::new(
            codes::ACCESS_TABLE_FORBIDDEN,
            format!(
                "an access table (engine {}) is configured; access facades are not publication targets",
                quoted(engine)
            ),
        ));
    }

    match (classify_engine(&f.engine), mode) {
        (EngineClass::Unsupported, _) => blockers.push(Reason::new(
            codes::ENGINE_UNSUPPORTED,
            format!(
                "engine {} is neither Replicated*MergeTree nor a direct non-replicated *MergeTree",
                quoted(&f.engine)
            ),
        )),
        (EngineClass::Direct, Some(ReplicationMode::Internal)) => blockers.push(Reason::new(
            codes::ENGINE_MODE_MISMATCH,
            format!(
                "internal mode requires a Replicated*MergeTree engine, found {}",
                quoted(&f.engine)
            ),
        )),
        (EngineClass::Replicated, Some(ReplicationMode::External)) => blockers.push(Reason::new(
            codes::ENGINE_MODE_MISMATCH,
            format!(
                "external mode requires a direct non-replicated *MergeTree engine, found {}",
                quoted(&f.engine)
            ),
        )),
        (EngineClass::Replicated, Some(ReplicationMode::Local)) => blockers.push(Reason::new(
            codes::ENGINE_MODE_MISMATCH,
            format!(
                "local publication requires a direct non-replicated *MergeTree engine, found {}",
                quoted(&f.engine)
            ),
        )),
        _ => {}
    }

    (mode, blockers)
}

/// How a table engine relates to the two modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EngineClass {
    /// `Replicated` + a direct `*MergeTree` name: internal mode only.
    Replicated,
    /// A direct non-replicated, non-shared `*MergeTree`: external mode only.
    Direct,
    /// Anything else (`Distributed`, `Shared*`, `Log`, malformed text, ...): no mode.
    Unsupported,
}

/// Classifies `Name` or `Name(arguments)`; case-sensitive, no surrounding whitespace.
fn classify_engine(engine: &str) -> EngineClass {
    let name = match engine.find('(') {
        None => engine,
        Some(open) if engine.ends_with(')') => &engine[..open],
        Some(_) => return EngineClass::Unsupported,
    };
    if let Some(base) = name.strip_prefix("Replicated") {
        if is_direct_merge_tree(base) {
            return EngineClass::Replicated;
        }
        return EngineClass::Unsupported;
    }
    if is_direct_merge_tree(name) {
        EngineClass::Direct
    } else {
        EngineClass::Unsupported
    }
}

/// `MergeTree` or `<Prefix>MergeTree` with an ASCII-alphanumeric prefix starting with an upper
/// case letter, neither `Replicated*` nor `Shared*`.
fn is_direct_merge_tree(name: &str) -> bool {
    let Some(prefix) = name.strip_suffix("MergeTree") else {
        return false;
    };
    if prefix.starts_with("Replicated") || prefix.starts_with("Shared") {
        return false;
    }
    match prefix.as_bytes().first() {
        None => true,
        Some(first) => {
            first.is_ascii_uppercase() && prefix.bytes().all(|b| b.is_ascii_alphanumeric())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime rules
// ---------------------------------------------------------------------------------------------

/// One shard, two or more unique members, uniform flags matching the mode.
fn topology_rules(
    members: &[&MemberFacts],
    mode: Option<ReplicationMode>,
    blockers: &mut Vec<Reason>,
) {
    let shards: BTreeSet<u32> = members.iter().map(|m| m.shard_num).collect();
    if shards.len() != 1 {
        blockers.push(Reason::new(
            codes::SHARD_COUNT,
            format!("exactly one shard is required, found {}", shards.len()),
        ));
    }

    let mut positions: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for m in members {
        *positions.entry((m.shard_num, m.replica_num)).or_default() += 1;
    }
    if mode == Some(ReplicationMode::Local) {
        if positions.len() != 1 {
            blockers.push(Reason::new(
                codes::MEMBER_COUNT,
                format!(
                    "local publication needs exactly one server, found {}",
                    positions.len()
                ),
            ));
        }
    } else if positions.len() < 2 {
        blockers.push(Reason::new(
            codes::MEMBER_COUNT,
            format!(
                "at least two distinct members are required, found {}",
                positions.len()
            ),
        ));
    }
    let duplicated: Vec<String> = positions
        .iter()
        .filter(|(_, count)| **count > 1)
        .map(|((shard, replica), _)| format!("shard {shard} replica {replica}"))
        .collect();
    if !duplicated.is_empty() {
        blockers.push(Reason::new(
            codes::DUPLICATE_MEMBER,
            format!(
                "inventory positions occur more than once: {}",
                list(&duplicated)
            ),
        ));
    }

    let with_flag = members.iter().filter(|m| m.internal_replication).count();
    if with_flag != 0 && with_flag != members.len() {
        blockers.push(Reason::new(
            codes::FLAG_MIXED,
            format!(
                "internal_replication is mixed: {with_flag} of {} members report true",
                members.len()
            ),
        ));
    } else if let (Some(first), Some(mode)) = (members.first(), mode) {
        // One server has no replication; the host reports it false.
        let expected = mode == ReplicationMode::Internal;
        if first.internal_replication != expected {
            blockers.push(Reason::new(
                codes::FLAG_MODE_MISMATCH,
                format!(
                    "{} mode requires internal_replication={expected} on every member, found {}",
                    mode_name(mode),
                    first.internal_replication
                ),
            ));
        }
    }
}

/// Member identity, database engine and per-member capabilities.
fn member_rules(members: &[&MemberFacts], blockers: &mut Vec<Reason>) {
    let invalid: Vec<String> = members
        .iter()
        .filter(|m| !member_id_is_valid(&m.member_id))
        .map(|m| label(m))
        .collect();
    if !invalid.is_empty() {
        blockers.push(Reason::new(
            codes::MEMBER_ID_INVALID,
            format!(
                "member ids must be 1 to {MEMBER_ID_MAX_BYTES} printable ASCII characters: {}",
                list(&invalid)
            ),
        ));
    }

    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    for m in members.iter().filter(|m| member_id_is_valid(&m.member_id)) {
        *ids.entry(m.member_id.as_str()).or_default() += 1;
    }
    let duplicated: Vec<String> = ids
        .iter()
        .filter(|(_, count)| **count > 1)
        .map(|(id, _)| clip(id))
        .collect();
    if !duplicated.is_empty() {
        blockers.push(Reason::new(
            codes::DUPLICATE_MEMBER_ID,
            format!("member ids map to more than one row: {}", list(&duplicated)),
        ));
    }

    per_member(
        members,
        |m| m.database_engine != "Atomic",
        codes::DATABASE_NOT_ATOMIC,
        "the target database engine must be Atomic on every member; not Atomic on",
        blockers,
    );
    per_member(
        members,
        |m| !m.keeper_map_available,
        codes::KEEPER_MAP_UNAVAILABLE,
        "the KeeperMap authority facade must answer on every member; unavailable on",
        blockers,
    );
    per_member(
        members,
        |m| !m.direct_connection,
        codes::DIRECT_CONNECTION_UNAVAILABLE,
        "a direct member connection is required on every member; unavailable on",
        blockers,
    );
}

/// Existing target presence and engines against the mode and each other.
fn target_rules(
    members: &[&MemberFacts],
    mode: Option<ReplicationMode>,
    blockers: &mut Vec<Reason>,
) {
    let present: Vec<(&MemberFacts, &str)> = members
        .iter()
        .filter_map(|m| m.target_engine.as_deref().map(|e| (*m, e)))
        .collect();
    if !present.is_empty() && present.len() != members.len() {
        blockers.push(Reason::new(
            codes::TARGET_PRESENCE_MIXED,
            format!(
                "the target exists on {} of {} members; it must exist on all or none",
                present.len(),
                members.len()
            ),
        ));
    }

    let with_class = |class: EngineClass| -> Vec<String> {
        present
            .iter()
            .filter(|(_, engine)| classify_engine(engine) == class)
            .map(|(m, _)| label(m))
            .collect()
    };
    let unsupported = with_class(EngineClass::Unsupported);
    if !unsupported.is_empty() {
        blockers.push(Reason::new(
            codes::TARGET_ENGINE_UNSUPPORTED,
            format!(
                "existing target engine is not a publishable *MergeTree on {}",
                list(&unsupported)
            ),
        ));
    }
    match mode {
        Some(m @ (ReplicationMode::External | ReplicationMode::Local)) => {
            let replicated = with_class(EngineClass::Replicated);
            if !replicated.is_empty() {
                blockers.push(Reason::new(
                    codes::REPLICATED_ENGINE_EXTERNAL,
                    format!(
                        "{} forbids an existing Replicated*MergeTree target; found on {}",
                        if m == ReplicationMode::Local {
                            "local publication"
                        } else {
                            "external mode"
                        },
                        list(&replicated)
                    ),
                ));
            }
        }
        Some(ReplicationMode::Internal) => {
            let direct = with_class(EngineClass::Direct);
            if !direct.is_empty() {
                blockers.push(Reason::new(
                    codes::TARGET_ENGINE_MODE_MISMATCH,
                    format!(
                        "internal mode requires an existing Replicated*MergeTree target; non-replicated on {}",
                        list(&direct)
                    ),
                ));
            }
        }
        None => {}
    }

    let engines: BTreeSet<&str> = present.iter().map(|(_, engine)| *engine).collect();
    if engines.len() > 1 {
        blockers.push(Reason::new(
            codes::TARGET_ENGINE_DIVERGENT,
            format!(
                "existing target engines differ across members ({} distinct)",
                engines.len()
            ),
        ));
    }
}

/// Target schema: non-empty, named, unique, every type inside the digest profile.
fn column_rules(columns: &[ColumnFacts], blockers: &mut Vec<Reason>) {
    if columns.is_empty() {
        blockers.push(Reason::new(
            codes::COLUMNS_REQUIRED,
            "the target schema has no columns",
        ));
        return;
    }

    let unnamed = columns.iter().filter(|c| c.name.is_empty()).count();
    if unnamed > 0 {
        blockers.push(Reason::new(
            codes::COLUMN_NAME_REQUIRED,
            format!("{unnamed} column(s) have an empty name"),
        ));
    }

    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    let mut duplicated: Vec<String> = Vec::new();
    for c in columns.iter().filter(|c| !c.name.is_empty()) {
        if !seen.insert(c.name.as_str()) && reported.insert(c.name.as_str()) {
            duplicated.push(clip(&c.name));
        }
    }
    if !duplicated.is_empty() {
        blockers.push(Reason::new(
            codes::DUPLICATE_COLUMN,
            format!("column names occur more than once: {}", list(&duplicated)),
        ));
    }

    let mut unsupported: Vec<String> = Vec::new();
    let mut nested = false;
    for c in columns {
        match column_type_support(&c.type_name) {
            TypeSupport::Supported => {}
            support => {
                nested |= support == TypeSupport::Nested;
                unsupported.push(format!(
                    "{} ({})",
                    clip_to(&c.name, LIST_ITEM_BYTES),
                    clip_to(&c.type_name, LIST_ITEM_BYTES)
                ));
            }
        }
    }
    if !unsupported.is_empty() {
        let mut message = format!(
            "column types outside the canonical content-digest profile: {}",
            list(&unsupported)
        );
        if nested {
            message.push_str("; deep/nested types are unsupported in this version");
        }
        blockers.push(Reason::new(codes::UNSUPPORTED_COLUMN_TYPE, message));
    }
}

/// One reason naming every member for which `bad` holds, if any.
fn per_member(
    members: &[&MemberFacts],
    bad: impl Fn(&MemberFacts) -> bool,
    code: &str,
    what: &str,
    blockers: &mut Vec<Reason>,
) {
    let labels: Vec<String> = members
        .iter()
        .filter(|m| bad(m))
        .map(|m| label(m))
        .collect();
    if !labels.is_empty() {
        blockers.push(Reason::new(code, format!("{what} {}", list(&labels))));
    }
}

/// 1 to [`MEMBER_ID_MAX_BYTES`] bytes of printable, non-space ASCII.
fn member_id_is_valid(id: &str) -> bool {
    !id.is_empty() && id.len() <= MEMBER_ID_MAX_BYTES && id.bytes().all(|b| b.is_ascii_graphic())
}

/// How a member is named in messages: its opaque id, or its position when the id is unusable.
fn label(m: &MemberFacts) -> String {
    if member_id_is_valid(&m.member_id) {
        clip(&m.member_id)
    } else {
        format!("shard {} replica {}", m.shard_num, m.replica_num)
    }
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/// At most [`CLIP_BYTES`] bytes of `s`, control characters replaced by `?`.
fn clip(s: &str) -> String {
    clip_to(s, CLIP_BYTES)
}

/// At most `max` bytes of `s` cut on a character boundary, control characters replaced by `?`,
/// `…` marking a cut.
fn clip_to(s: &str, max: usize) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = if c.is_control() { '?' } else { c };
        if out.len() + c.len_utf8() > max {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out
}

fn quoted(s: &str) -> String {
    format!("'{}'", clip(s))
}

/// The first [`LIST_MAX`] items, comma separated, with a count of the rest.
fn list(items: &[String]) -> String {
    let mut out = items
        .iter()
        .take(LIST_MAX)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > LIST_MAX {
        out.push_str(&format!(" and {} more", items.len() - LIST_MAX));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Column type allow-list
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TypeSupport {
    Supported,
    /// Outside the profile and mentions a deep/nested type constructor.
    Nested,
    Unsupported,
}

/// Type constructors that make a column deep or nested (geo types are Tuple/Array aliases).
const NESTED: &[&str] = &[
    "Array",
    "Map",
    "Tuple",
    "Nested",
    "JSON",
    "Object",
    "Variant",
    "Dynamic",
    "AggregateFunction",
    "SimpleAggregateFunction",
    "Point",
    "Ring",
    "LineString",
    "MultiLineString",
    "Polygon",
    "MultiPolygon",
    "Geometry",
];

/// Scalar types without parameters.
const PLAIN: &[&str] = &[
    "Int8", "Int16", "Int32", "Int64", "Int128", "Int256", "UInt8", "UInt16", "UInt32", "UInt64",
    "UInt128", "UInt256", "Float32", "Float64", "Bool", "String", "UUID", "Date", "Date32", "IPv4",
    "IPv6",
];

/// ClickHouse's limit on `FixedString(N)`.
const FIXED_STRING_MAX: u64 = 0xFF_FFFF;

fn column_type_support(type_name: &str) -> TypeSupport {
    let mut p = TypeParser::new(type_name);
    if p.column_type() && p.at_end() {
        TypeSupport::Supported
    } else if mentions_nested(type_name) {
        TypeSupport::Nested
    } else {
        TypeSupport::Unsupported
    }
}

/// Whether any identifier outside single-quoted literals names a nested constructor.
fn mentions_nested(type_name: &str) -> bool {
    let bytes = type_name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'\'' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &bytes[start..i];
            if NESTED.iter().any(|n| n.as_bytes() == word) {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}

/// Recursive-descent recogniser for the closed type grammar; every method returns whether it
/// matched and never panics (indices are bounds-checked, numbers use checked arithmetic).
struct TypeParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> TypeParser<'a> {
    fn new(s: &'a str) -> Self {
        Self {
            s: s.as_bytes(),
            pos: 0,
        }
    }

    fn at_end(&self) -> bool {
        self.pos == self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn spaces(&mut self) {
        while self.eat(b' ') {}
    }

    /// `(` with optional spaces after it.
    fn open(&mut self) -> bool {
        let ok = self.eat(b'(');
        self.spaces();
        ok
    }

    /// Optional spaces, then `)`.
    fn close(&mut self) -> bool {
        self.spaces();
        self.eat(b')')
    }

    /// Optional spaces, `,`, optional spaces.
    fn comma(&mut self) -> bool {
        self.spaces();
        let ok = self.eat(b',');
        self.spaces();
        ok
    }

    fn ident(&mut self) -> &'a str {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b.is_ascii_alphanumeric() || b == b'_' {
                self.pos += 1;
            } else {
                break;
            }
        }
        // The slice holds ASCII bytes only, so it is valid UTF-8.
        std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("")
    }

    /// A canonical unsigned decimal (no sign, no leading zeros) that fits in `u64`.
    fn number(&mut self) -> Option<u64> {
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(b) = self.peek() {
            if !b.is_ascii_digit() {
                break;
            }
            value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            self.pos += 1;
        }
        let digits = self.pos - start;
        if digits == 0 || (digits > 1 && self.s.get(start) == Some(&b'0')) {
            return None;
        }
        Some(value)
    }

    fn number_in(&mut self, min: u64, max: u64) -> Option<u64> {
        self.number().filter(|n| (min..=max).contains(n))
    }

    /// An optionally negative integer within `min..=max`.
    fn signed_in(&mut self, min: i64, max: i64) -> bool {
        let negative = self.eat(b'-');
        let Some(magnitude) = self.number() else {
            return false;
        };
        let Ok(magnitude) = i64::try_from(magnitude) else {
            return false;
        };
        let value = if negative { -magnitude } else { magnitude };
        (min..=max).contains(&value) && !(negative && magnitude == 0)
    }

    /// A single-quoted literal with backslash escapes (enum element names).
    fn quoted_literal(&mut self) -> bool {
        if !self.eat(b'\'') {
            return false;
        }
        while let Some(b) = self.peek() {
            self.pos += 1;
            match b {
                b'\'' => return true,
                b'\\' => {
                    if self.peek().is_none() {
                        return false;
                    }
                    self.pos += 1;
                }
                _ => {}
            }
        }
        false
    }

    /// A single-quoted time zone name: 1 to 64 of `A-Z a-z 0-9 / _ + -`.
    fn time_zone(&mut self) -> bool {
        if !self.eat(b'\'') {
            return false;
        }
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'+' | b'-') {
                self.pos += 1;
            } else {
                break;
            }
        }
        let len = self.pos - start;
        (1..=64).contains(&len) && self.eat(b'\'')
    }

    /// `T`, `Nullable(T)` or `LowCardinality(T | Nullable(T))` for a scalar `T`.
    fn column_type(&mut self) -> bool {
        match self.ident() {
            "Nullable" => self.open() && self.scalar() && self.close(),
            "LowCardinality" => {
                if !self.open() {
                    return false;
                }
                let save = self.pos;
                let inner = if self.ident() == "Nullable" {
                    self.open() && self.scalar() && self.close()
                } else {
                    self.pos = save;
                    self.scalar()
                };
                inner && self.close()
            }
            name => self.scalar_named(name),
        }
    }

    fn scalar(&mut self) -> bool {
        let name = self.ident();
        self.scalar_named(name)
    }

    fn scalar_named(&mut self, name: &str) -> bool {
        match name {
            _ if PLAIN.contains(&name) => true,
            "FixedString" => {
                self.open() && self.number_in(1, FIXED_STRING_MAX).is_some() && self.close()
            }
            "DateTime" => {
                if self.peek() == Some(b'(') {
                    self.open() && self.time_zone() && self.close()
                } else {
                    true
                }
            }
            "DateTime64" => {
                if !(self.open() && self.number_in(0, 9).is_some()) {
                    return false;
                }
                self.spaces();
                if self.peek() == Some(b',') && !(self.comma() && self.time_zone()) {
                    return false;
                }
                self.close()
            }
            "Decimal" => {
                if !self.open() {
                    return false;
                }
                let Some(precision) = self.number_in(1, 76) else {
                    return false;
                };
                self.comma() && self.number_in(0, precision).is_some() && self.close()
            }
            "Decimal32" => self.decimal_scale(9),
            "Decimal64" => self.decimal_scale(18),
            "Decimal128" => self.decimal_scale(38),
            "Decimal256" => self.decimal_scale(76),
            "Enum8" => self.enum_body(i64::from(i8::MIN), i64::from(i8::MAX)),
            "Enum16" => self.enum_body(i64::from(i16::MIN), i64::from(i16::MAX)),
            _ => false,
        }
    }

    fn decimal_scale(&mut self, max_scale: u64) -> bool {
        self.open() && self.number_in(0, max_scale).is_some() && self.close()
    }

    /// `('name' = value, ...)` with at least one element.
    fn enum_body(&mut self, min: i64, max: i64) -> bool {
        if !self.open() {
            return false;
        }
        loop {
            if !self.quoted_literal() {
                return false;
            }
            self.spaces();
            if !self.eat(b'=') {
                return false;
            }
            self.spaces();
            if !self.signed_in(min, max) {
                return false;
            }
            self.spaces();
            if self.eat(b')') {
                return true;
            }
            if !self.comma() {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_accepts_the_profile() {
        for t in [
            "Int8",
            "UInt256",
            "Float64",
            "Bool",
            "String",
            "FixedString(16)",
            "UUID",
            "Date",
            "Date32",
            "DateTime",
            "DateTime('UTC')",
            "DateTime('America/Argentina/Buenos_Aires')",
            "DateTime64(3)",
            "DateTime64(9, 'Etc/GMT+3')",
            "DateTime64(0,'UTC')",
            "Decimal(9, 2)",
            "Decimal(76,76)",
            "Decimal32(0)",
            "Decimal256(76)",
            "Enum8('a' = 1, 'b' = -128)",
            "Enum16('it\\'s' = 32767)",
            "Enum8('' = 0)",
            "IPv4",
            "IPv6",
            "Nullable(String)",
            "Nullable(DateTime64(6, 'UTC'))",
            "LowCardinality(String)",
            "LowCardinality(Nullable(FixedString(2)))",
        ] {
            assert!(is_supported_column_type(t), "{t}");
        }
    }

    #[test]
    fn allow_list_rejects_everything_else() {
        for t in [
            "",
            " String",
            "String ",
            "string",
            "Int",
            "BFloat16",
            "FixedString(0)",
            "FixedString(016)",
            "FixedString(16777216)",
            "FixedString",
            "DateTime()",
            "DateTime('')",
            "DateTime('UTC",
            "DateTime64",
            "DateTime64(10)",
            "DateTime64(3, UTC)",
            "Decimal(0, 0)",
            "Decimal(10, 11)",
            "Decimal(77, 2)",
            "Decimal32(10)",
            "Decimal(99999999999999999999999, 1)",
            "Enum8()",
            "Enum8('a' = 128)",
            "Enum8('a' = -0)",
            "Enum8('a' = 1,)",
            "Enum8('a)",
            "Nullable(Nullable(String))",
            "Nullable(LowCardinality(String))",
            "LowCardinality(LowCardinality(String))",
            "Nullable(String",
            "Array(String)",
            "Map(String, UInt64)",
            "Tuple(a Int32)",
            "JSON",
            "Nothing",
            "IntervalDay",
            "Time",
        ] {
            assert!(!is_supported_column_type(t), "{t}");
        }
    }

    #[test]
    fn nested_types_are_recognised_outside_literals() {
        assert_eq!(
            column_type_support("Nullable(Array(String))"),
            TypeSupport::Nested
        );
        assert_eq!(
            column_type_support("Map(String, Int8)"),
            TypeSupport::Nested
        );
        assert_eq!(
            column_type_support("Enum8('Array' = 1"),
            TypeSupport::Unsupported
        );
        assert_eq!(column_type_support("Enum8('\\"), TypeSupport::Unsupported);
    }

    #[test]
    fn engines_classify_by_prefix_and_suffix() {
        use EngineClass::*;
        for (engine, class) in [
            ("MergeTree", Direct),
            ("ReplacingMergeTree", Direct),
            ("ReplacingMergeTree(version)", Direct),
            ("ReplicatedMergeTree", Replicated),
            ("ReplicatedReplacingMergeTree", Replicated),
            ("ReplicatedMergeTree('/t/{shard}', '{replica}')", Replicated),
            ("SharedMergeTree", Unsupported),
            ("ReplicatedSharedMergeTree", Unsupported),
            ("ReplicatedReplicatedMergeTree", Unsupported),
            ("Replicated", Unsupported),
            ("Distributed", Unsupported),
            ("Log", Unsupported),
            ("mergetree", Unsupported),
            ("xMergeTree", Unsupported),
            (" MergeTree", Unsupported),
            ("MergeTree(", Unsupported),
            ("", Unsupported),
        ] {
            assert_eq!(classify_engine(engine), class, "{engine}");
        }
    }

    #[test]
    fn clip_bounds_and_sanitises_text() {
        let long = "x".repeat(500);
        assert_eq!(clip(&long), format!("{}…", "x".repeat(CLIP_BYTES)));
        assert_eq!(clip("a\nb"), "a?b");
        assert_eq!(
            clip(&"é".repeat(70)),
            format!("{}…", "é".repeat(CLIP_BYTES / 2))
        );
        assert_eq!(
            clip(&"😀".repeat(20)),
            format!("{}…", "😀".repeat(CLIP_BYTES / 4))
        );
        assert_eq!(clip("short"), "short");
    }

    fn member(id: &str, shard: u32, replica: u32, flag: bool) -> MemberFacts {
        MemberFacts {
            member_id: id.into(),
            shard_num: shard,
            replica_num: replica,
            internal_replication: flag,
            database_engine: "Atomic".into(),
            target_engine: None,
            keeper_map_available: true,
            direct_connection: true,
        }
    }

    fn external_facts() -> RuntimeFacts {
        RuntimeFacts {
            static_facts: StaticFacts {
                cluster_name: "c".into(),
                ddl_scope: Some("cluster".into()),
                replication_mode: Some("external".into()),
                engine: "MergeTree".into(),
                max_source_bytes: Some(1),
                target_database: "d".into(),
                staging_database: "d".into(),
                access_table_engine: None,
            },
            members: vec![member("m-1", 1, 1, false), member("m-2", 1, 2, false)],
            inventory_complete: true,
            columns: vec![ColumnFacts {
                name: "id".into(),
                type_name: "UInt64".into(),
            }],
            v1_authority: V1AuthorityState::Absent,
        }
    }

    #[test]
    fn decisions_do_not_depend_on_inventory_order() {
        let mut facts = external_facts();
        facts.members = vec![
            MemberFacts {
                database_engine: "Ordinary".into(),
                ..member("m-3", 1, 3, false)
            },
            MemberFacts {
                keeper_map_available: false,
                target_engine: Some("MergeTree".into()),
                ..member("m-1", 1, 1, false)
            },
            member("", 1, 2, true),
            member("m-1", 2, 1, false),
        ];
        let forward = admit_runtime(&facts);
        facts.members.reverse();
        assert_eq!(admit_runtime(&facts), forward);
        facts.members.swap(0, 2);
        assert_eq!(admit_runtime(&facts), forward);

        let mut admitted = external_facts();
        admitted.members.reverse();
        assert_eq!(admit_runtime(&admitted), admit_runtime(&external_facts()));
    }

    #[test]
    fn long_input_is_never_echoed_verbatim() {
        // Four-byte characters: a character-count clip would blow the host's byte limit.
        let huge = "😀".repeat(10_000);
        let mut facts = external_facts();
        facts.static_facts = StaticFacts {
            cluster_name: huge.clone(),
            ddl_scope: Some(huge.clone()),
            replication_mode: Some(huge.clone()),
            engine: huge.clone(),
            max_source_bytes: Some(i64::MIN),
            target_database: huge.clone(),
            staging_database: huge.clone() + "x",
            access_table_engine: Some(huge.clone()),
        };
        facts.members = (0..20)
            .map(|i| MemberFacts {
                target_engine: Some(huge.clone()),
                database_engine: huge.clone(),
                ..member(&format!("{i:0>128}"), i, i, i % 2 == 0)
            })
            .collect();
        facts.columns = (0..20)
            .map(|i| ColumnFacts {
                name: format!("{huge}{i}"),
                type_name: huge.clone(),
            })
            .chain(std::iter::once(ColumnFacts {
                name: huge.clone(),
                type_name: huge.clone(),
            }))
            .collect();
        let RuntimeDecision::Blocked(reasons) = admit_runtime(&facts) else {
            panic!("hostile facts must block");
        };
        assert!(reasons.len() > 10);
        for r in &reasons {
            assert!(r.message.len() <= 600, "{}: {}", r.code, r.message);
            assert!(
                !r.message.contains(&"😀".repeat(CLIP_BYTES / 4 + 1)),
                "{}",
                r.code
            );
            assert!(!r.message.ends_with('.'), "{}", r.code);
        }
        let codes: Vec<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
        let order: Vec<&str> = codes::STATIC
            .iter()
            .chain(codes::RUNTIME)
            .copied()
            .filter(|c| codes.contains(c))
            .collect();
        assert_eq!(codes, order, "blockers follow the documented rule order");
    }

    #[test]
    fn every_code_is_in_the_family_and_unique() {
        let all: Vec<&str> = codes::STATIC
            .iter()
            .chain(codes::RUNTIME)
            .copied()
            .collect();
        let unique: BTreeSet<&str> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len());
        for code in all {
            let rest = code.strip_prefix("DPONE_CLICKHOUSE_CLUSTER_").unwrap_or("");
            assert!(!rest.is_empty(), "{code}");
            assert!(
                rest.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
                "{code}"
            );
        }
    }

    #[test]
    fn list_names_at_most_five() {
        let items: Vec<String> = (0..8).map(|i| i.to_string()).collect();
        assert_eq!(list(&items), "0, 1, 2, 3, 4 and 3 more");
    }
}
