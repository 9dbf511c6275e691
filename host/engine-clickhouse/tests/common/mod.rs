//! Shared fixture for the engine tests: the synthetic profile, rows, request and wiring.
#![allow(dead_code, missing_docs)]

use dpone_engine_clickhouse::canonical::{
    RowBinaryWriter, Value, column_types, content_digest, rowset_digest,
};
use dpone_engine_clickhouse::contracts::{
    ContentProof, Digest, PublicationMode, Schema, candidate_name, operation_id, target_key,
};
use dpone_engine_clickhouse::ports::NoProgress;
use dpone_engine_clickhouse::synthetic::{
    FnGate, SyntheticArtifacts, SyntheticCluster, SyntheticEnv,
};
use dpone_engine_clickhouse::{Coordinator, CoordinatorConfig, OperationRequest, Ports};
use dpone_policy_model::admission::StaticFacts;
use serde::Deserialize;

pub const PROFILE: &str = include_str!("../../../../fixtures/clickhouse/synthetic-profile.json");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub schema_version: String,
    pub cluster: String,
    pub database: String,
    pub target: String,
    pub scheduler_invocation: String,
    pub columns: Vec<(String, String)>,
    pub order_by: Vec<String>,
    pub member_counts: Vec<u32>,
    pub artifact_rows: u64,
    pub baseline_rows: u64,
    pub partial_rows: u64,
    pub seed: u64,
    pub max_runs: u32,
    pub max_source_bytes: i64,
}

pub fn profile() -> Profile {
    serde_json::from_str(PROFILE).expect("fixture profile parses")
}

pub fn profile_digest() -> Digest {
    Digest::of(PROFILE.as_bytes())
}

impl Profile {
    /// The candidate table name of this profile's request's operation.
    #[allow(dead_code)] // not every test binary uses it
    pub fn candidate(&self) -> String {
        self.candidate_of(PublicationMode::External)
    }

    /// The candidate table name of this profile's request under a manifest of `mode`.
    pub fn candidate_of(&self, mode: PublicationMode) -> String {
        let req = self.request_of(mode);
        let key = target_key(&req.static_facts.cluster_name, &self.database, &self.target);
        candidate_name(
            &self.target,
            &operation_id(&req.scheduler_invocation, &key, &req.plan_digest),
        )
    }

    pub fn schema(&self) -> Schema {
        let cols: Vec<(&str, &str)> = self
            .columns
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        Schema::of(&cols)
    }

    pub fn static_facts(&self) -> StaticFacts {
        self.static_facts_of(PublicationMode::External)
    }

    /// The static facts of a manifest of `mode`: external names its mode and a plain
    /// `MergeTree`; internal omits the mode (the spec's default) and names a
    /// `ReplicatedMergeTree`.
    pub fn static_facts_of(&self, mode: PublicationMode) -> StaticFacts {
        let (replication_mode, engine) = match mode {
            PublicationMode::External => (Some("external".into()), "MergeTree"),
            PublicationMode::Internal => (None, "ReplicatedMergeTree"),
            PublicationMode::Local => (None, "MergeTree"),
        };
        // One server: no cluster block (an empty cluster name and the `local` scope).
        let (cluster_name, ddl_scope) = match mode {
            PublicationMode::Local => (String::new(), "local"),
            _ => (self.cluster.clone(), "cluster"),
        };
        StaticFacts {
            cluster_name,
            ddl_scope: Some(ddl_scope.into()),
            replication_mode,
            engine: engine.into(),
            max_source_bytes: Some(self.max_source_bytes),
            target_database: self.database.clone(),
            staging_database: self.database.clone(),
            access_table_engine: None,
        }
    }

    pub fn request(&self) -> OperationRequest {
        self.request_of(PublicationMode::External)
    }

    /// The profile's request under a manifest of `mode`.
    pub fn request_of(&self, mode: PublicationMode) -> OperationRequest {
        OperationRequest {
            static_facts: self.static_facts_of(mode),
            target_table: self.target.clone(),
            scheduler_invocation: self.scheduler_invocation.clone(),
            // The real plan digest covers the engine and the mode, so each mode plans its own
            // operation.
            plan_digest: match mode {
                PublicationMode::External => {
                    Digest::of(b"normalized plan of the synthetic profile")
                }
                PublicationMode::Internal => {
                    Digest::of(b"normalized plan of the synthetic profile, internal mode")
                }
                PublicationMode::Local => {
                    Digest::of(b"normalized plan of the synthetic profile, one server")
                }
            },
            schema: self.schema(),
            order_by: self.order_by.clone(),
        }
    }

    /// `rows` rows of one generation; `base` separates generations.
    pub fn rows(&self, base: u64, rows: u64) -> Vec<u8> {
        let mut w = RowBinaryWriter::new(column_types(&self.schema()).expect("profile types"));
        for i in 0..rows {
            let k = base + i;
            let mut uid = [0u8; 16];
            uid[8..].copy_from_slice(&k.to_be_bytes());
            uid[0] = 0x42;
            w.row(&[
                Value::UInt(u128::from(k)),
                Value::Bytes(format!("row-{k}").into_bytes()),
                Value::Int(i128::from(k as i64 * 137 - 5_000)),
                Value::Int(1_700_000_000_000 + i128::from(k) * 1_001),
                if k.is_multiple_of(3) {
                    Value::Null
                } else {
                    Value::UInt(u128::from(k % 2))
                },
                Value::Raw16(uid),
            ])
            .expect("fixture row fits");
        }
        w.finish()
    }

    /// The canonical content digest of `bytes` (what the rows are, whatever proof a run used).
    pub fn digest_of(&self, bytes: &[u8]) -> Digest {
        content_digest(&self.schema(), bytes, 1 << 26)
            .expect("fixture digest")
            .digest
    }

    /// The digest of `bytes` under `proof`, as a record or receipt of that proof holds it.
    #[allow(dead_code)] // not every test binary uses it
    pub fn digest_by(&self, proof: ContentProof, bytes: &[u8]) -> Digest {
        match proof {
            ContentProof::Canonical => self.digest_of(bytes),
            ContentProof::Rowset => {
                rowset_digest(&self.schema(), bytes, 1 << 26)
                    .expect("fixture rowset digest")
                    .digest
            }
        }
    }
}

/// The native admission policy core as the gate (the CLI wraps the component instead).
pub fn gate() -> FnGate {
    FnGate::new(
        "native-policy-core",
        dpone_policy_admission::admit_static,
        dpone_policy_admission::admit_runtime,
    )
}

pub struct World {
    pub cluster: SyntheticCluster,
    pub artifacts: SyntheticArtifacts,
    pub env: SyntheticEnv,
    pub gate: FnGate,
}

impl World {
    pub fn new(p: &Profile, members: u32, target_present: bool) -> Self {
        Self::of(PublicationMode::External, p, members, target_present)
    }

    /// A world for `mode`: external mode on independent members, internal mode on a
    /// Replicated cluster.
    pub fn of(mode: PublicationMode, p: &Profile, members: u32, target_present: bool) -> Self {
        let cluster = match mode {
            PublicationMode::External => SyntheticCluster::new(members, &p.schema()),
            PublicationMode::Internal => SyntheticCluster::new_replicated(members, &p.schema()),
            PublicationMode::Local => SyntheticCluster::new_local(&p.schema()),
        };
        if target_present {
            let baseline = p.rows(10_000, p.baseline_rows);
            for i in 0..members as usize {
                cluster.put_table(i, &p.database, &p.target, &baseline);
            }
        }
        let artifact = p.rows(1, p.artifact_rows);
        Self {
            cluster,
            artifacts: SyntheticArtifacts::new(artifact, p.artifact_rows),
            env: SyntheticEnv::new(p.seed),
            gate: gate(),
        }
    }

    pub fn coordinator(&self) -> Coordinator<'_> {
        self.coordinator_with(CoordinatorConfig::default().member_parallelism)
    }

    /// A coordinator serving at most `member_parallelism` members at once (1: one after
    /// another in member-id order).
    #[allow(dead_code)] // not every test binary uses it
    pub fn coordinator_with(&self, member_parallelism: usize) -> Coordinator<'_> {
        self.coordinator_config(CoordinatorConfig {
            member_parallelism,
            ..CoordinatorConfig::default()
        })
    }

    /// A coordinator with `config`.
    #[allow(dead_code)] // not every test binary uses it
    pub fn coordinator_config(&self, config: CoordinatorConfig) -> Coordinator<'_> {
        Coordinator::new(
            Ports {
                authority: &self.cluster,
                inventory: &self.cluster,
                catalog: &self.cluster,
                ddl: &self.cluster,
                artifacts: &self.artifacts,
                admission: &self.gate,
                env: &self.env,
                progress: &NoProgress,
            },
            config,
        )
    }
}
