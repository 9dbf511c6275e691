//! The workload manifest of the ClickHouse publication route, and its connection registry.
//!
//! A manifest names a PostgreSQL source relation and its ordered, typed columns, a ClickHouse
//! target table, and the physical design (`physical_design.storage.clickhouse`): engine,
//! `ORDER BY`, `max_source_bytes`, staging database, optional access table and the cluster block
//! with the additive `replication_mode` (`internal` | `external`, default `internal`).
//! Connections are named only by logical ref; endpoints and the *names* of the environment
//! variables holding credentials live in the environment-owned [`registry`].
//!
//! Parsing is strict ([`yaml`] refuses duplicate keys, anchors, aliases, tags and ambiguous
//! scalars; unknown fields are refused everywhere) and checks the *shape* of the document. What
//! is admissible is decided by the admission policy over [`Manifest::static_facts`]: an invalid
//! mode, a missing `ddl_scope` or `max_source_bytes`, a staging database other than the target's,
//! an access table or an engine of the wrong class parse fine and are blocked by the policy with
//! its own codes.
//!
//! Every failure is a [`ManifestError`] with a stable [`ManifestError::code`]
//! (`DPONE_CLICKHOUSE_MANIFEST_*` or `DPONE_CLICKHOUSE_REGISTRY_*`). Messages name field paths
//! and line numbers; they never echo endpoints, credentials or environment values.

pub mod registry;
mod spelling;
pub mod yaml;

use dpone_policy_model::admission::StaticFacts;
use serde_json::{Map, Value};

use super::hash::{Digest, IdentityHasher};
use super::identity::{TargetKey, target_key};
use super::record::ContentProof;
use super::schema::{Column, Schema};

pub use registry::{
    ClickHouseConnection, ClickHouseEndpoint, Connection, PgSslMode, PostgresConnection, Registry,
    Secret,
};
pub use spelling::reported_type_spelling;

/// Manifest schema version this build reads.
pub const MANIFEST_VERSION: u64 = 1;

/// Longest SQL identifier accepted (PostgreSQL's limit), in bytes.
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// Which document an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Document {
    /// The workload manifest.
    Manifest,
    /// The connection registry.
    Registry,
}

macro_rules! error_kinds {
    ($($(#[$m:meta])* $kind:ident => $suffix:literal),* $(,)?) => {
        /// What is wrong; with the [`Document`] it gives the stable code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ErrorKind {
            $($(#[$m])* $kind),*
        }

        impl ErrorKind {
            /// The stable code of this kind in `doc`.
            pub fn code(self, doc: Document) -> &'static str {
                match (doc, self) {
                    $(
                        (Document::Manifest, Self::$kind) =>
                            concat!("DPONE_CLICKHOUSE_MANIFEST_", $suffix),
                        (Document::Registry, Self::$kind) =>
                            concat!("DPONE_CLICKHOUSE_REGISTRY_", $suffix),
                    )*
                }
            }
        }
    };
}

error_kinds! {
    /// Not YAML, or not the expected YAML structure.
    YamlSyntax => "YAML_SYNTAX",
    /// A key occurs twice in one mapping.
    YamlDuplicateKey => "YAML_DUPLICATE_KEY",
    /// An anchor, alias or merge key.
    YamlAlias => "YAML_ALIAS",
    /// An explicit tag.
    YamlTag => "YAML_TAG",
    /// A non-ASCII character.
    YamlNonAscii => "YAML_NON_ASCII",
    /// A plain scalar that YAML 1.1 and 1.2 read differently.
    YamlAmbiguousScalar => "YAML_AMBIGUOUS_SCALAR",
    /// A mapping key that is not a non-empty string.
    YamlNonStringKey => "YAML_NON_STRING_KEY",
    /// No document, or more than one.
    YamlDocumentCount => "YAML_DOCUMENT_COUNT",
    /// Size, depth or integer range exceeded.
    YamlLimit => "YAML_LIMIT",
    /// `version` is not one this build reads.
    VersionUnsupported => "VERSION_UNSUPPORTED",
    /// A field this schema does not define.
    UnknownField => "UNKNOWN_FIELD",
    /// A required field is absent.
    MissingField => "MISSING_FIELD",
    /// A field has the wrong YAML type.
    FieldType => "FIELD_TYPE",
    /// A field has the right type but an invalid value (name syntax, duplicates, empty list).
    FieldInvalid => "FIELD_INVALID",
    /// A column type is not written the way `system.columns.type` reports it.
    ColumnTypeSpelling => "COLUMN_TYPE_SPELLING",
    /// (registry) The manifest names a connection the registry does not hold.
    ConnectionUnknown => "CONNECTION_UNKNOWN",
    /// (registry) The connection is of another kind than the manifest needs.
    ConnectionKind => "CONNECTION_KIND",
    /// (registry) A URL is not a plain `http://host[:port]` or `https://host[:port]` URL.
    UrlInvalid => "URL_INVALID",
    /// (registry) A plain `http://` URL to a host that is not loopback, so the connection's
    /// credential would cross the network in clear, without `insecure_plaintext: true`.
    PlaintextCredential => "PLAINTEXT_CREDENTIAL",
    /// (registry) Two members share a `(shard_num, replica_num)`.
    DuplicateMember => "DUPLICATE_MEMBER",
    /// (registry) The environment variable named for a credential is not set.
    CredentialMissing => "CREDENTIAL_MISSING",
}

/// A manifest or registry failure with a stable code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ManifestError {
    document: Document,
    kind: ErrorKind,
    message: String,
}

impl ManifestError {
    /// An error about `document`. The message is made safe to print here, whatever it quotes
    /// ([`dpone_boundary::text::clean_message`]).
    pub fn new(document: Document, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            document,
            kind,
            message: dpone_boundary::text::clean_message(&message.into()),
        }
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.kind.code(self.document)
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The document.
    pub fn document(&self) -> Document {
        self.document
    }
}

type Result<T> = std::result::Result<T, ManifestError>;

// ---------------------------------------------------------------------------------------------
// Typed reading of the strict value
// ---------------------------------------------------------------------------------------------

/// A mapping being read: every key must be consumed, or [`Fields::finish`] refuses it.
pub(crate) struct Fields<'v> {
    doc: Document,
    path: String,
    map: &'v Map<String, Value>,
    used: Vec<&'static str>,
}

/// `path.key` (or `key` at the top level).
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A key from the document, clipped for a message.
fn clip(s: &str) -> String {
    let mut end = s.len().min(48);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let clipped: String = s[..end]
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if end < s.len() {
        format!("{clipped}…")
    } else {
        clipped
    }
}

impl<'v> Fields<'v> {
    pub(crate) fn new(doc: Document, path: &str, value: &'v Value) -> Result<Self> {
        match value {
            Value::Object(map) => Ok(Self {
                doc,
                path: path.to_owned(),
                map,
                used: Vec::new(),
            }),
            _ => Err(type_error(doc, path, "a mapping")),
        }
    }

    pub(crate) fn path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// A present, non-null field.
    pub(crate) fn optional(&mut self, key: &'static str) -> Option<&'v Value> {
        self.used.push(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn required(&mut self, key: &'static str) -> Result<&'v Value> {
        let path = self.path(key);
        self.optional(key).ok_or_else(|| {
            ManifestError::new(
                self.doc,
                ErrorKind::MissingField,
                format!("{path} is required"),
            )
        })
    }

    pub(crate) fn required_str(&mut self, key: &'static str) -> Result<String> {
        let v = self.required(key)?;
        string(self.doc, &self.path(key), v)
    }

    pub(crate) fn optional_str(&mut self, key: &'static str) -> Result<Option<String>> {
        match self.optional(key) {
            None => Ok(None),
            Some(v) => string(self.doc, &self.path(key), v).map(Some),
        }
    }

    /// The keys of the mapping not yet consumed are refused.
    pub(crate) fn finish(self) -> Result<()> {
        match self.map.keys().find(|k| !self.used.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => Err(ManifestError::new(
                self.doc,
                ErrorKind::UnknownField,
                format!("unknown field {:?} in {}", clip(k), self.display_path()),
            )),
        }
    }

    fn display_path(&self) -> &str {
        if self.path.is_empty() {
            "the document"
        } else {
            &self.path
        }
    }

    /// The entries of a mapping whose keys are free (e.g. connection refs).
    pub(crate) fn entries(self) -> impl Iterator<Item = (&'v String, &'v Value)> {
        self.map.iter()
    }
}

pub(crate) fn type_error(doc: Document, path: &str, expected: &str) -> ManifestError {
    let path = if path.is_empty() {
        "the document"
    } else {
        path
    };
    ManifestError::new(
        doc,
        ErrorKind::FieldType,
        format!("{path} must be {expected}"),
    )
}

pub(crate) fn invalid(doc: Document, message: impl Into<String>) -> ManifestError {
    ManifestError::new(doc, ErrorKind::FieldInvalid, message)
}

pub(crate) fn string(doc: Document, path: &str, v: &Value) -> Result<String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| type_error(doc, path, "a string"))
}

pub(crate) fn integer(doc: Document, path: &str, v: &Value) -> Result<i64> {
    v.as_i64()
        .ok_or_else(|| type_error(doc, path, "an integer between -2^63 and 2^63-1"))
}

pub(crate) fn list<'v>(doc: Document, path: &str, v: &'v Value) -> Result<&'v Vec<Value>> {
    v.as_array().ok_or_else(|| type_error(doc, path, "a list"))
}

/// An ASCII SQL identifier: a letter or `_`, then letters, digits or `_`, at most 63 bytes.
/// Names are always quoted in SQL, so case is significant.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_IDENTIFIER_BYTES
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A logical name (workload, connection ref, cluster): 1 to 128 of `[A-Za-z0-9_.-]`.
pub fn is_logical_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

pub(crate) fn identifier(doc: Document, path: &str, v: &Value) -> Result<String> {
    let s = string(doc, path, v)?;
    if is_identifier(&s) {
        Ok(s)
    } else {
        Err(invalid(
            doc,
            format!(
                "{path} must be an ASCII identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 bytes)"
            ),
        ))
    }
}

pub(crate) fn logical_name(doc: Document, path: &str, v: &Value) -> Result<String> {
    let s = string(doc, path, v)?;
    if is_logical_name(&s) {
        Ok(s)
    } else {
        Err(invalid(
            doc,
            format!("{path} must be 1 to 128 characters of [A-Za-z0-9_.-]"),
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The manifest
// ---------------------------------------------------------------------------------------------

/// `source.relation`: `schema.table`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relation {
    /// PostgreSQL schema.
    pub schema: String,
    /// PostgreSQL table (or view).
    pub table: String,
}

/// `source`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSpec {
    /// Logical PostgreSQL source connection.
    pub connection_ref: String,
    /// The relation read in one snapshot.
    pub relation: Relation,
    /// Ordered columns: the PostgreSQL column name is the ClickHouse column name; the type is
    /// the ClickHouse type exactly as `system.columns.type` reports it.
    pub columns: Vec<Column>,
}

/// `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSpec {
    /// Logical ClickHouse cluster connection.
    pub connection_ref: String,
    /// Target database.
    pub database: String,
    /// Target table.
    pub table: String,
}

/// `physical_design.storage.clickhouse.access_table`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessTable {
    /// Table name.
    pub name: String,
    /// Its engine (e.g. `Distributed`).
    pub engine: String,
}

/// `physical_design.storage.clickhouse.cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Cluster name as in `system.clusters`; empty for one server ([`Self::local`]).
    pub name: String,
    /// `ddl_scope` (the policy requires `cluster` for a cluster, `local` for one server).
    pub ddl_scope: Option<String>,
    /// `replication_mode` as written; absent means `internal`.
    pub replication_mode: Option<String>,
}

impl ClusterSpec {
    /// What a manifest without a cluster block means: one server (local publication), as the
    /// admission facts carry it (an empty cluster name, `ddl_scope` `local`, no mode).
    pub fn local() -> Self {
        Self {
            name: String::new(),
            ddl_scope: Some("local".into()),
            replication_mode: None,
        }
    }

    /// The manifest has no cluster block: one server.
    pub fn is_local(&self) -> bool {
        self.name.is_empty()
    }
}

/// `physical_design.storage.clickhouse`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClickHouseStorage {
    /// Table engine text.
    pub engine: String,
    /// `ORDER BY` columns (empty means `tuple()`).
    pub order_by: Vec<String>,
    /// Bound on the source artifact, in bytes (the policy requires it positive).
    pub max_source_bytes: Option<i64>,
    /// Staging database; defaults to the target database.
    pub staging_database: String,
    /// A configured access table (the policy forbids any).
    pub access_table: Option<AccessTable>,
    /// The cluster block ([`ClusterSpec::local`] when the manifest has none).
    pub cluster: ClusterSpec,
    /// `content_proof` as written (`rowset` or `canonical`); absent means the coordinator's
    /// default (`CoordinatorConfig::content_proof`, the rowset digest). It chooses the proof of
    /// a new operation only: an operation already recorded keeps the proof its record names.
    pub content_proof: Option<ContentProof>,
}

/// A parsed workload manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Workload name (documentation and evidence; not part of any identity).
    pub name: String,
    /// Source.
    pub source: SourceSpec,
    /// Target.
    pub target: TargetSpec,
    /// `physical_design.storage.clickhouse`.
    pub clickhouse: ClickHouseStorage,
}

const DOC: Document = Document::Manifest;

impl Manifest {
    /// Parses and shape-checks a manifest.
    pub fn parse(text: &str) -> Result<Self> {
        let value = yaml::parse_strict(text, DOC)?;
        let mut top = Fields::new(DOC, "", &value)?;
        let version = integer(DOC, "version", top.required("version")?)?;
        if version != MANIFEST_VERSION as i64 {
            return Err(ManifestError::new(
                DOC,
                ErrorKind::VersionUnsupported,
                format!("version {version} is not supported (this build reads {MANIFEST_VERSION})"),
            ));
        }
        let name = logical_name(DOC, "name", top.required("name")?)?;
        let source = parse_source(top.required("source")?)?;
        let target = parse_target(top.required("target")?)?;
        let clickhouse = parse_physical_design(top.required("physical_design")?, &target)?;
        top.finish()?;
        for (i, key) in clickhouse.order_by.iter().enumerate() {
            if !source.columns.iter().any(|c| &c.name == key) {
                return Err(invalid(
                    DOC,
                    format!(
                        "physical_design.storage.clickhouse.order_by[{i}] names no column of source.columns"
                    ),
                ));
            }
        }
        Ok(Self {
            name,
            source,
            target,
            clickhouse,
        })
    }

    /// The facts the admission policy decides on.
    pub fn static_facts(&self) -> StaticFacts {
        let c = &self.clickhouse;
        StaticFacts {
            cluster_name: c.cluster.name.clone(),
            ddl_scope: c.cluster.ddl_scope.clone(),
            replication_mode: c.cluster.replication_mode.clone(),
            engine: c.engine.clone(),
            max_source_bytes: c.max_source_bytes,
            target_database: self.target.database.clone(),
            staging_database: c.staging_database.clone(),
            access_table_engine: c.access_table.as_ref().map(|a| a.engine.clone()),
        }
    }

    /// The declared target schema (names and ClickHouse types, in order).
    pub fn schema(&self) -> Schema {
        Schema {
            columns: self.source.columns.clone(),
        }
    }

    /// `target_key = H(cluster, database, target)`.
    pub fn target_key(&self) -> TargetKey {
        target_key(
            &self.clickhouse.cluster.name,
            &self.target.database,
            &self.target.table,
        )
    }

    /// The normalized plan digest that enters `operation_id`: every field that changes what is
    /// published or how (source ref and relation, columns and types, target ref and names, the
    /// whole physical design), in a fixed order. The workload name is not part of it.
    ///
    /// `H("dpone.clickhouse.plan.v1"; source_ref, schema, table, u64 n, (name, type)…,
    /// target_ref, database, table, engine, u64 k, order_by…, opt(max_source_bytes),
    /// staging_database, opt(access_table name, engine), cluster, opt(ddl_scope),
    /// opt(replication_mode)[, "content_proof", proof])` where `opt(x)` is `"0"` when absent
    /// and `"1", x` when present, `max_source_bytes` is an 8-byte big-endian two's complement
    /// integer, and the bracketed pair is present only when `content_proof` is written.
    pub fn plan_digest(&self) -> Digest {
        let s = &self.source;
        let c = &self.clickhouse;
        let mut h = IdentityHasher::new("dpone.clickhouse.plan.v1")
            .str(&s.connection_ref)
            .str(&s.relation.schema)
            .str(&s.relation.table)
            .u64(s.columns.len() as u64);
        for col in &s.columns {
            h = h.str(&col.name).str(&col.type_name);
        }
        h = h
            .str(&self.target.connection_ref)
            .str(&self.target.database)
            .str(&self.target.table)
            .str(&c.engine)
            .u64(c.order_by.len() as u64);
        for k in &c.order_by {
            h = h.str(k);
        }
        h = match c.max_source_bytes {
            None => h.str("0"),
            Some(n) => h.str("1").bytes(&n.to_be_bytes()),
        };
        h = h.str(&c.staging_database);
        h = match &c.access_table {
            None => h.str("0"),
            Some(a) => h.str("1").str(&a.name).str(&a.engine),
        };
        h = h.str(&c.cluster.name);
        for opt in [&c.cluster.ddl_scope, &c.cluster.replication_mode] {
            h = match opt {
                None => h.str("0"),
                Some(v) => h.str("1").str(v),
            };
        }
        // Appended only when written, so every plan without it keeps its digest (and its
        // operations their ids).
        if let Some(proof) = c.content_proof {
            h = h.str("content_proof").str(proof.as_str());
        }
        h.finish()
    }
}

fn parse_source(v: &Value) -> Result<SourceSpec> {
    let mut f = Fields::new(DOC, "source", v)?;
    let connection_ref = logical_name(DOC, "source.connection_ref", f.required("connection_ref")?)?;
    let relation_text = f.required_str("relation")?;
    let relation = match relation_text.split_once('.') {
        Some((schema, table)) if is_identifier(schema) && is_identifier(table) => Relation {
            schema: schema.to_owned(),
            table: table.to_owned(),
        },
        _ => {
            return Err(invalid(
                DOC,
                "source.relation must be schema.table, each an ASCII identifier",
            ));
        }
    };
    let items = list(DOC, "source.columns", f.required("columns")?)?;
    if items.is_empty() {
        return Err(invalid(DOC, "source.columns must list at least one column"));
    }
    let mut columns: Vec<Column> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("source.columns[{i}]");
        let mut c = Fields::new(DOC, &path, item)?;
        let name = identifier(DOC, &c.path("name"), c.required("name")?)?;
        let type_name = c.required_str("type")?;
        c.finish()?;
        match reported_type_spelling(&type_name) {
            Some(expected) if expected == type_name => {}
            Some(expected) => {
                return Err(ManifestError::new(
                    DOC,
                    ErrorKind::ColumnTypeSpelling,
                    format!(
                        "{path}.type must be written as ClickHouse reports it: {}",
                        clip(&expected)
                    ),
                ));
            }
            None => {
                return Err(invalid(
                    DOC,
                    format!("{path}.type is not a ClickHouse type expression"),
                ));
            }
        }
        if columns.iter().any(|c| c.name == name) {
            return Err(invalid(
                DOC,
                format!("{path}.name repeats an earlier column"),
            ));
        }
        columns.push(Column { name, type_name });
    }
    f.finish()?;
    Ok(SourceSpec {
        connection_ref,
        relation,
        columns,
    })
}

fn parse_target(v: &Value) -> Result<TargetSpec> {
    let mut f = Fields::new(DOC, "target", v)?;
    let t = TargetSpec {
        connection_ref: logical_name(DOC, "target.connection_ref", f.required("connection_ref")?)?,
        database: identifier(DOC, "target.database", f.required("database")?)?,
        table: identifier(DOC, "target.table", f.required("table")?)?,
    };
    f.finish()?;
    Ok(t)
}

fn parse_physical_design(v: &Value, target: &TargetSpec) -> Result<ClickHouseStorage> {
    let mut pd = Fields::new(DOC, "physical_design", v)?;
    let mut storage = Fields::new(DOC, "physical_design.storage", pd.required("storage")?)?;
    let path = "physical_design.storage.clickhouse";
    let mut f = Fields::new(DOC, path, storage.required("clickhouse")?)?;
    let engine = f.required_str("engine")?;
    let order_by = match f.optional("order_by") {
        None => Vec::new(),
        Some(v) => {
            let p = f.path("order_by");
            let mut keys = Vec::new();
            for (i, k) in list(DOC, &p, v)?.iter().enumerate() {
                let key = identifier(DOC, &format!("{p}[{i}]"), k)?;
                if keys.contains(&key) {
                    return Err(invalid(DOC, format!("{p}[{i}] repeats an earlier key")));
                }
                keys.push(key);
            }
            keys
        }
    };
    let max_source_bytes = match f.optional("max_source_bytes") {
        None => None,
        Some(v) => Some(integer(DOC, &f.path("max_source_bytes"), v)?),
    };
    let staging_database = match f.optional("staging_database") {
        None => target.database.clone(),
        Some(v) => identifier(DOC, &f.path("staging_database"), v)?,
    };
    let access_table = match f.optional("access_table") {
        None => None,
        Some(v) => {
            let p = f.path("access_table");
            let mut a = Fields::new(DOC, &p, v)?;
            let access = AccessTable {
                name: identifier(DOC, &a.path("name"), a.required("name")?)?,
                engine: a.required_str("engine")?,
            };
            a.finish()?;
            Some(access)
        }
    };
    // No cluster block: one server (local publication).
    let cluster = match f.optional("cluster") {
        None => ClusterSpec::local(),
        Some(v) => {
            let p = f.path("cluster");
            let mut c = Fields::new(DOC, &p, v)?;
            let spec = ClusterSpec {
                name: logical_name(DOC, &c.path("name"), c.required("name")?)?,
                ddl_scope: c.optional_str("ddl_scope")?,
                replication_mode: c.optional_str("replication_mode")?,
            };
            c.finish()?;
            spec
        }
    };
    let content_proof = match f.optional("content_proof") {
        None => None,
        Some(v) => {
            let p = f.path("content_proof");
            let name = string(DOC, &p, v)?;
            Some(
                ContentProof::ALL
                    .into_iter()
                    .find(|proof| proof.as_str() == name)
                    .ok_or_else(|| invalid(DOC, format!("{p} must be rowset or canonical")))?,
            )
        }
    };
    f.finish()?;
    storage.finish()?;
    pd.finish()?;
    Ok(ClickHouseStorage {
        engine,
        order_by,
        max_source_bytes,
        staging_database,
        access_table,
        cluster,
        content_proof,
    })
}

#[cfg(test)]
mod tests;
