//! Records shared by several documents: participants, subjects, effects, the six-dimensional
//! route, limits, validity windows and the identities of sources, fixtures and toolchains.
//!
//! **One access per participant.** A participant id is enrolled with exactly one access, `read`
//! or `write`; a document that lists one id with both accesses is refused
//! ([`codes::PARTICIPANT_ACCESS_CONFLICT`]). A subject's participant therefore determines the
//! access to it, and a database that is both read and written is enrolled as two participants
//! (two credentials).
//!
//! **Sets have one encoding.** Every list of this crate is a set, written in strictly ascending
//! order of its key; a repeated key is [`codes::DUPLICATE_ENTRY`] and any other order
//! [`codes::SET_UNORDERED`], so equal sets have equal bytes and equal digests.

use crate::codes;
use crate::error::{NpError, Result};
use crate::fields::{Commit, Digest, Ident, Image, Relation, Repository, exact};
use crate::json::Obj;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The only purpose this authority serves.
pub const PURPOSE: &str = "synthetic_composition_validation";

/// The only trust tier any document or participant may carry.
pub const TRUST_TIER: &str = "non_production";

/// Longest validity window of a grant: 24 hours.
pub const MAX_VALIDITY_SECONDS: u64 = 86_400;

/// Built-in ceilings (spec 004): 64 workloads, 128 attempts, 100,000 source rows and 1 GiB
/// source bytes per route qualification, 3,600 s per attempt.
pub const CEILINGS: Limits = Limits {
    max_workloads: 64,
    max_attempts: 128,
    max_source_rows: 100_000,
    max_source_bytes: 1 << 30,
    max_attempt_seconds: 3_600,
};

/// Most participants a document may list.
pub const MAX_PARTICIPANTS: usize = 64;
/// Most subjects a document may list.
pub const MAX_SUBJECTS: usize = 512;
/// Most routes a document may list.
pub const MAX_ROUTES: usize = 64;
/// Most effects of one workload.
pub const MAX_EFFECTS: usize = 64;

/// A closed set of spellings. Variants are declared in ascending order of their spelling, so
/// the derived order of a value is the byte order of its spelling (sets sort the same whether
/// read as text or as values; `closed_enums_order_as_their_spelling` checks it).
macro_rules! closed_enum {
    ($(#[$doc:meta])* $name:ident, $code:expr, { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The spelling in documents.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// Parses the field at `path`.
            pub fn parse(path: &str, s: &str) -> Result<Self> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(NpError::new(
                        $code,
                        format!("{path}: expected one of {}", [$($text),+].join(", ")),
                    )),
                }
            }
        }
    };
}

closed_enum!(
    /// The two phases; neither grants the other's authority.
    Phase, codes::PHASE_INVALID, {
        /// Execution of a sealed composition.
        Execution => "execution",
        /// One-time route qualification.
        Qualification => "qualification",
    }
);

closed_enum!(
    /// The engines a synthetic participant may run.
    Engine, codes::ENGINE_INVALID, {
        /// Single-node ClickHouse.
        Clickhouse => "clickhouse",
        /// PostgreSQL.
        Postgresql => "postgresql",
        /// SQL Server.
        Sqlserver => "sqlserver",
    }
);

closed_enum!(
    /// Route modes: only full refresh is in scope.
    Mode, codes::MODE_INVALID, {
        /// Full refresh.
        FullRefresh => "full_refresh",
    }
);

closed_enum!(
    /// What a workload is.
    WorkloadKind, codes::WORKLOAD_KIND_INVALID, {
        /// The native SQL Server dbt build.
        DbtNative => "dbt_native",
        /// A generated MSSQL-to-ClickHouse full-refresh export.
        GeneratedExport => "generated_export",
        /// An ordinary (non-dbt) full-refresh transfer, e.g. PostgreSQL to MSSQL.
        OrdinaryTransfer => "ordinary_transfer",
    }
);

closed_enum!(
    /// The one access of a participant.
    Access, codes::ACCESS_INVALID, {
        /// Reads only.
        Read => "read",
        /// Writes (and reads what it writes).
        Write => "write",
    }
);

closed_enum!(
    /// The kinds of effect a composition lists.
    EffectKind, codes::EFFECT_INVALID, {
        /// Uses a helper relation (either access).
        Helper => "helper",
        /// Reads a relation (access `read`).
        Read => "read",
        /// Writes a staging relation (access `write`).
        Staging => "staging",
        /// Writes protocol state (access `write`).
        State => "state",
        /// Writes a target relation (access `write`).
        Write => "write",
    }
);

closed_enum!(
    /// Where a composition workload comes from.
    Origin, codes::ORIGIN_INVALID, {
        /// The scoped native (dbt) release.
        Native => "native",
        /// The genuine ordinary release.
        Ordinary => "ordinary",
    }
);

/// Reads a closed single-value string field.
pub fn read_exact(obj: &Obj<'_>, key: &str, expected: &str, code: &'static str) -> Result<()> {
    exact(&obj.path_of(key), obj.str(key)?, expected, code)
}

/// Reads a set: parses every entry, then refuses repeated keys and any order but ascending.
pub fn read_set<T, K: Ord>(
    path: &str,
    items: &[Value],
    parse: impl Fn(&str, &Value) -> Result<T>,
    key: impl Fn(&T) -> K,
) -> Result<Vec<T>> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let parsed = parse(&at, item)?;
        if let Some(prev) = out.last() {
            match key(prev).cmp(&key(&parsed)) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    return Err(NpError::new(
                        codes::DUPLICATE_ENTRY,
                        format!("{at}: repeats the previous entry"),
                    ));
                }
                std::cmp::Ordering::Greater => {
                    return Err(NpError::new(
                        codes::SET_UNORDERED,
                        format!("{at}: sets are written in ascending order"),
                    ));
                }
            }
        }
        out.push(parsed);
    }
    Ok(out)
}

/// Reads a set of identifiers.
pub fn read_ident_set(obj: &Obj<'_>, key: &str, min: usize, max: usize) -> Result<Vec<Ident>> {
    let items = obj.array(key, min, max)?;
    read_set(
        &obj.path_of(key),
        items,
        |p, v| Ident::parse(p, v.as_str().ok_or_else(|| type_err(p, "a string"))?),
        Clone::clone,
    )
}

/// Reads a set of digests.
pub fn read_digest_set(obj: &Obj<'_>, key: &str, min: usize, max: usize) -> Result<Vec<Digest>> {
    let items = obj.array(key, min, max)?;
    read_set(
        &obj.path_of(key),
        items,
        |p, v| Digest::parse(p, v.as_str().ok_or_else(|| type_err(p, "a string"))?),
        Clone::clone,
    )
}

/// A [`codes::TYPE_INVALID`] error.
pub fn type_err(path: &str, expected: &str) -> NpError {
    NpError::new(codes::TYPE_INVALID, format!("{path}: expected {expected}"))
}

/// A synthetic participant and its one access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    /// Enrolled id.
    pub participant_id: Ident,
    /// Engine it runs.
    pub engine: Engine,
    /// Its one access.
    pub access: Access,
}

impl Participant {
    /// Reads one participant; its `trust_tier` must be `non_production`.
    pub fn read(path: &str, v: &Value) -> Result<Self> {
        let o = Obj::new(
            path,
            v,
            &["access", "engine", "participant_id", "trust_tier"],
        )?;
        read_exact(&o, "trust_tier", TRUST_TIER, codes::TRUST_TIER_INVALID)?;
        Ok(Self {
            participant_id: Ident::parse(&o.path_of("participant_id"), o.str("participant_id")?)?,
            engine: Engine::parse(&o.path_of("engine"), o.str("engine")?)?,
            access: Access::parse(&o.path_of("access"), o.str("access")?)?,
        })
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({
            "access": self.access.as_str(),
            "engine": self.engine.as_str(),
            "participant_id": self.participant_id.as_str(),
            "trust_tier": TRUST_TIER,
        })
    }
}

/// Reads a participant set: ascending by id, one access per id.
pub fn read_participants(obj: &Obj<'_>, key: &str) -> Result<Vec<Participant>> {
    let items = obj.array(key, 1, MAX_PARTICIPANTS)?;
    let path = obj.path_of(key);
    let mut seen: BTreeMap<String, Access> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let p = Participant::read(&format!("{path}[{i}]"), item)?;
        if let Some(access) = seen.insert(p.participant_id.as_str().to_owned(), p.access)
            && access != p.access
        {
            return Err(NpError::new(
                codes::PARTICIPANT_ACCESS_CONFLICT,
                format!("{path}[{i}]: a participant has exactly one access"),
            ));
        }
    }
    read_set(&path, items, Participant::read, |p| {
        p.participant_id.clone()
    })
}

/// A physical subject: a relation scope held by one participant.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Subject {
    /// Participant holding the relation.
    pub participant_id: Ident,
    /// The relation scope.
    pub relation: Relation,
}

impl Subject {
    /// Reads one subject.
    pub fn read(path: &str, v: &Value) -> Result<Self> {
        let o = Obj::new(path, v, &["participant_id", "relation"])?;
        Ok(Self {
            participant_id: Ident::parse(&o.path_of("participant_id"), o.str("participant_id")?)?,
            relation: Relation::parse(&o.path_of("relation"), o.str("relation")?)?,
        })
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({
            "participant_id": self.participant_id.as_str(),
            "relation": self.relation.as_str(),
        })
    }
}

/// The complete read/write scope: participants and the physical subjects they hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// Every participant, each with its one access.
    pub participants: Vec<Participant>,
    /// Every physical subject; each is held by a listed participant.
    pub subjects: Vec<Subject>,
}

impl Scope {
    /// Reads the `scope` object at `obj.key`.
    pub fn read(obj: &Obj<'_>, key: &str) -> Result<Self> {
        let o = obj.obj(key, &["participants", "subjects"])?;
        let participants = read_participants(&o, "participants")?;
        let path = o.path_of("subjects");
        let subjects = read_set(
            &path,
            o.array("subjects", 1, MAX_SUBJECTS)?,
            Subject::read,
            Clone::clone,
        )?;
        let scope = Self {
            participants,
            subjects,
        };
        for (i, s) in scope.subjects.iter().enumerate() {
            if scope.participant(&s.participant_id).is_none() {
                return Err(NpError::new(
                    codes::PARTICIPANT_UNBOUND,
                    format!("{path}[{i}]: the subject's participant is not listed"),
                ));
            }
        }
        Ok(scope)
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({
            "participants": self.participants.iter().map(Participant::write).collect::<Vec<_>>(),
            "subjects": self.subjects.iter().map(Subject::write).collect::<Vec<_>>(),
        })
    }

    /// The listed participant `id`.
    pub fn participant(&self, id: &Ident) -> Option<&Participant> {
        self.participants.iter().find(|p| &p.participant_id == id)
    }

    /// Refuses `route` unless its participants are listed with the route's engines, the source
    /// reading and the target writing.
    pub fn check_route(&self, path: &str, route: &Route) -> Result<()> {
        for (who, id, engine, access) in [
            (
                "source",
                &route.source_participant,
                route.source_engine,
                Access::Read,
            ),
            (
                "target",
                &route.target_participant,
                route.target_engine,
                Access::Write,
            ),
        ] {
            let Some(p) = self.participant(id) else {
                return Err(NpError::new(
                    codes::PARTICIPANT_UNBOUND,
                    format!("{path}: the {who} participant is not listed"),
                ));
            };
            if p.engine != engine || p.access != access {
                return Err(NpError::new(
                    codes::ROUTE_PARTICIPANT_MISMATCH,
                    format!("{path}: the {who} participant has another engine or access"),
                ));
            }
        }
        Ok(())
    }
}

/// The exact six-dimensional route: source engine, source participant, target engine, target
/// participant, mode and workload kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    /// Engine read from.
    pub source_engine: Engine,
    /// Participant read from (access `read`).
    pub source_participant: Ident,
    /// Engine written to.
    pub target_engine: Engine,
    /// Participant written to (access `write`).
    pub target_participant: Ident,
    /// Mode.
    pub mode: Mode,
    /// Workload kind.
    pub workload_kind: WorkloadKind,
}

/// The keys of a route object.
pub const ROUTE_KEYS: &[&str] = &[
    "mode",
    "source_engine",
    "source_participant",
    "target_engine",
    "target_participant",
    "workload_kind",
];

impl Route {
    /// Reads one route.
    pub fn read(path: &str, v: &Value) -> Result<Self> {
        let o = Obj::new(path, v, ROUTE_KEYS)?;
        let ident = |k: &str| -> Result<Ident> { Ident::parse(&o.path_of(k), o.str(k)?) };
        let engine = |k: &str| -> Result<Engine> { Engine::parse(&o.path_of(k), o.str(k)?) };
        Ok(Self {
            source_engine: engine("source_engine")?,
            source_participant: ident("source_participant")?,
            target_engine: engine("target_engine")?,
            target_participant: ident("target_participant")?,
            mode: Mode::parse(&o.path_of("mode"), o.str("mode")?)?,
            workload_kind: WorkloadKind::parse(
                &o.path_of("workload_kind"),
                o.str("workload_kind")?,
            )?,
        })
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({
            "mode": self.mode.as_str(),
            "source_engine": self.source_engine.as_str(),
            "source_participant": self.source_participant.as_str(),
            "target_engine": self.target_engine.as_str(),
            "target_participant": self.target_participant.as_str(),
            "workload_kind": self.workload_kind.as_str(),
        })
    }
}

/// Resource ceilings; each is at least 1 and at most the built-in [`CEILINGS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Distinct workloads.
    pub max_workloads: u32,
    /// Scheduler attempts.
    pub max_attempts: u32,
    /// Cumulative source rows.
    pub max_source_rows: u64,
    /// Cumulative source bytes.
    pub max_source_bytes: u64,
    /// Seconds per attempt.
    pub max_attempt_seconds: u32,
}

/// The keys of a limits object.
pub const LIMIT_KEYS: &[&str] = &[
    "max_attempt_seconds",
    "max_attempts",
    "max_source_bytes",
    "max_source_rows",
    "max_workloads",
];

impl Limits {
    /// Reads the limits object at `obj.key`.
    pub fn read(obj: &Obj<'_>, key: &str) -> Result<Self> {
        let o = obj.obj(key, LIMIT_KEYS)?;
        let limits = Self {
            max_workloads: o.u32("max_workloads")?,
            max_attempts: o.u32("max_attempts")?,
            max_source_rows: o.u64("max_source_rows")?,
            max_source_bytes: o.u64("max_source_bytes")?,
            max_attempt_seconds: o.u32("max_attempt_seconds")?,
        };
        let c = CEILINGS;
        for (name, value, ceiling) in [
            (
                "max_workloads",
                u64::from(limits.max_workloads),
                u64::from(c.max_workloads),
            ),
            (
                "max_attempts",
                u64::from(limits.max_attempts),
                u64::from(c.max_attempts),
            ),
            ("max_source_rows", limits.max_source_rows, c.max_source_rows),
            (
                "max_source_bytes",
                limits.max_source_bytes,
                c.max_source_bytes,
            ),
            (
                "max_attempt_seconds",
                u64::from(limits.max_attempt_seconds),
                u64::from(c.max_attempt_seconds),
            ),
        ] {
            if value == 0 {
                return Err(NpError::new(
                    codes::LIMIT_ZERO,
                    format!("{}: a limit is at least 1", o.path_of(name)),
                ));
            }
            if value > ceiling {
                return Err(NpError::new(
                    codes::LIMIT_ABOVE_CEILING,
                    format!("{}: above the built-in ceiling {ceiling}", o.path_of(name)),
                ));
            }
        }
        Ok(limits)
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({
            "max_attempt_seconds": self.max_attempt_seconds,
            "max_attempts": self.max_attempts,
            "max_source_bytes": self.max_source_bytes,
            "max_source_rows": self.max_source_rows,
            "max_workloads": self.max_workloads,
        })
    }

    /// The model record the scope component reads.
    pub fn to_model(self) -> dpone_policy_model::scope::Limits {
        dpone_policy_model::scope::Limits {
            max_workloads: self.max_workloads,
            max_attempts: self.max_attempts,
            max_source_rows: self.max_source_rows,
            max_source_bytes: self.max_source_bytes,
            max_attempt_seconds: self.max_attempt_seconds,
        }
    }
}

/// A validity window in Unix seconds: `not_before <= now < not_after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// First valid second.
    pub not_before: u64,
    /// First second no longer valid.
    pub not_after: u64,
}

impl Validity {
    /// Reads the window at `obj.key`; `max_seconds` bounds its length (None: unbounded).
    pub fn read(obj: &Obj<'_>, key: &str, max_seconds: Option<u64>) -> Result<Self> {
        let o = obj.obj(key, &["not_after", "not_before"])?;
        let v = Self {
            not_before: o.u64("not_before")?,
            not_after: o.u64("not_after")?,
        };
        if v.not_before >= v.not_after {
            return Err(NpError::new(
                codes::VALIDITY_WINDOW_INVALID,
                format!("{}: not_before must be before not_after", obj.path_of(key)),
            ));
        }
        if let Some(max) = max_seconds
            && v.not_after - v.not_before > max
        {
            return Err(NpError::new(
                codes::VALIDITY_TOO_LONG,
                format!("{}: longer than {max} seconds", obj.path_of(key)),
            ));
        }
        Ok(v)
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({"not_after": self.not_after, "not_before": self.not_before})
    }
}

/// The canonical source: repository and the exact 40-hex commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRef {
    /// Canonical GitHub repository.
    pub repository: Repository,
    /// Commit.
    pub commit: Commit,
}

impl SourceRef {
    /// Reads the object at `obj.key`.
    pub fn read(obj: &Obj<'_>, key: &str) -> Result<Self> {
        let o = obj.obj(key, &["commit", "repository"])?;
        Ok(Self {
            repository: Repository::parse(&o.path_of("repository"), o.str("repository")?)?,
            commit: Commit::parse(&o.path_of("commit"), o.str("commit")?)?,
        })
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({"commit": self.commit.as_str(), "repository": self.repository.as_str()})
    }
}

/// A named, digest-pinned original: a fixture, a generator or a compilation intent.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pinned {
    /// Identifier.
    pub id: Ident,
    /// Digest of its canonical original.
    pub digest: Digest,
}

impl Pinned {
    /// Reads the object at `obj.key` (`{"digest", "id"}`).
    pub fn read(obj: &Obj<'_>, key: &str) -> Result<Self> {
        Self::read_value(&obj.path_of(key), obj.value(key)?)
    }

    /// Reads one value.
    pub fn read_value(path: &str, v: &Value) -> Result<Self> {
        let o = Obj::new(path, v, &["digest", "id"])?;
        Ok(Self {
            id: Ident::parse(&o.path_of("id"), o.str("id")?)?,
            digest: Digest::parse(&o.path_of("digest"), o.str("digest")?)?,
        })
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({"digest": self.digest.as_str(), "id": self.id.as_str()})
    }
}

/// The toolchain and the image it runs in, pinned by digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toolchain {
    /// Toolchain identity, e.g. `dbt-sqlserver-1.8.0`.
    pub toolchain_id: Ident,
    /// Image pinned by digest.
    pub image: Image,
}

impl Toolchain {
    /// Reads the object at `obj.key`.
    pub fn read(obj: &Obj<'_>, key: &str) -> Result<Self> {
        let o = obj.obj(key, &["image", "toolchain_id"])?;
        Ok(Self {
            toolchain_id: Ident::parse(&o.path_of("toolchain_id"), o.str("toolchain_id")?)?,
            image: Image::parse(&o.path_of("image"), o.str("image")?)?,
        })
    }

    /// The document value.
    pub fn write(&self) -> Value {
        json!({"image": self.image.as_str(), "toolchain_id": self.toolchain_id.as_str()})
    }
}

/// The provenance every signed claim carries: source, fixture, generator, compilation intent
/// and toolchain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// Canonical source repository and commit.
    pub source: SourceRef,
    /// Fixture identity.
    pub fixture: Pinned,
    /// Generator identity.
    pub generator: Pinned,
    /// Compilation intent.
    pub compilation_intent: Pinned,
    /// Toolchain and image.
    pub toolchain: Toolchain,
}

/// The keys [`Provenance`] adds to a document.
pub const PROVENANCE_KEYS: &[&str] = &[
    "compilation_intent",
    "fixture",
    "generator",
    "source",
    "toolchain",
];

impl Provenance {
    /// Reads the provenance keys of `o`.
    pub fn read(o: &Obj<'_>) -> Result<Self> {
        Ok(Self {
            source: SourceRef::read(o, "source")?,
            fixture: Pinned::read(o, "fixture")?,
            generator: Pinned::read(o, "generator")?,
            compilation_intent: Pinned::read(o, "compilation_intent")?,
            toolchain: Toolchain::read(o, "toolchain")?,
        })
    }

    /// Adds the provenance keys to `map`.
    pub fn write_into(&self, map: &mut serde_json::Map<String, Value>) {
        map.insert("compilation_intent".into(), self.compilation_intent.write());
        map.insert("fixture".into(), self.fixture.write());
        map.insert("generator".into(), self.generator.write());
        map.insert("source".into(), self.source.write());
        map.insert("toolchain".into(), self.toolchain.write());
    }
}

/// Concatenates key lists into one sorted schema key set.
pub fn keys(parts: &[&[&'static str]]) -> Vec<&'static str> {
    let mut all: Vec<&'static str> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    all.sort_unstable();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ordered<T: Copy + Ord>(all: &[T], text: impl Fn(T) -> &'static str) -> bool {
        all.windows(2)
            .all(|w| w[0] < w[1] && text(w[0]) < text(w[1]))
    }

    #[test]
    fn closed_enums_order_as_their_spelling() {
        assert!(ordered(Phase::ALL, Phase::as_str));
        assert!(ordered(Engine::ALL, Engine::as_str));
        assert!(ordered(Mode::ALL, Mode::as_str));
        assert!(ordered(WorkloadKind::ALL, WorkloadKind::as_str));
        assert!(ordered(Access::ALL, Access::as_str));
        assert!(ordered(EffectKind::ALL, EffectKind::as_str));
        assert!(ordered(Origin::ALL, Origin::as_str));
    }
}
