//! Physical enrollment's pure checks on the frozen fixtures: the workload a reservation run
//! binds to ([`enrollment::reserved_workload`]), the binding of observed connections to the
//! enrolled participants of its route ([`enrollment::bind_run`]) and the identity digest.
//! Tier: unit (pure).

mod support;

use dpone_engine_nonproduction::common::Engine;
use dpone_engine_nonproduction::enrollment::{
    self, BindRefusal, ClickhouseIdentity, ClickhouseMember, ConnectionRole, Enrollment,
    ObservedConnection, ParticipantIdentity, PhysicalIdentity, RecordInvalid, SqlserverIdentity,
    WorkloadRefusal,
};
use dpone_engine_nonproduction::*;
use support::*;

fn identity() -> PhysicalIdentity {
    PhysicalIdentity {
        system_identifier: "7401234567890123456".to_owned(),
        database_name: "synth_pg".to_owned(),
        database_oid: 16_384,
    }
}

fn enrolled(id: &str, identity: impl Into<ParticipantIdentity>) -> Enrollment {
    let identity = identity.into();
    Enrollment {
        participant_id: id.to_owned(),
        identity_digest: identity.digest(),
        identity,
    }
}

fn source(identity: Option<PhysicalIdentity>, relations: &[&str]) -> ObservedConnection {
    ObservedConnection {
        role: ConnectionRole::Source,
        engine: Engine::Postgresql,
        identity: identity.map(Into::into),
        relations: relations.iter().map(|r| (*r).to_owned()).collect(),
    }
}

fn member(shard_num: u32, replica_num: u32, database_uuid: &str) -> ClickhouseMember {
    ClickhouseMember {
        shard_num,
        replica_num,
        server_uuid: "00000000-0000-0000-0000-000000000000".to_owned(),
        database_uuid: database_uuid.to_owned(),
    }
}

const UUID_A: &str = "7de30027-332a-401c-addd-22a502309253";
const UUID_B: &str = "e42d2219-89c8-4e13-9fb0-60b1b0c263b2";

fn cluster() -> ClickhouseIdentity {
    ClickhouseIdentity::new(
        "synth_ch".to_owned(),
        vec![member(1, 2, UUID_B), member(1, 1, UUID_A)],
    )
    .expect("valid")
}

fn ch(
    role: ConnectionRole,
    identity: ClickhouseIdentity,
    relations: &[&str],
) -> ObservedConnection {
    ObservedConnection {
        role,
        engine: Engine::Clickhouse,
        identity: Some(identity.into()),
        relations: relations.iter().map(|r| (*r).to_owned()).collect(),
    }
}

#[test]
fn a_clickhouse_identity_is_one_canonical_record_read_back_exactly() {
    let id = cluster();
    assert_eq!(
        (id.members[0].replica_num, id.members[1].replica_num),
        (1, 2),
        "members are ordered by shard and replica"
    );
    let record = id.record();
    assert_eq!(
        String::from_utf8(record.clone()).expect("utf-8"),
        format!(
            "{{\"database_name\":\"synth_ch\",\"engine\":\"clickhouse\",\"members\":[\
             {{\"database_uuid\":\"{UUID_A}\",\"replica_num\":1,\"server_uuid\":\
             \"00000000-0000-0000-0000-000000000000\",\"shard_num\":1}},\
             {{\"database_uuid\":\"{UUID_B}\",\"replica_num\":2,\"server_uuid\":\
             \"00000000-0000-0000-0000-000000000000\",\"shard_num\":1}}],\
             \"schema\":\"dpone.np-physical-identity.clickhouse.v1\"}}"
        )
    );
    assert_eq!(ClickhouseIdentity::from_record(&record), Ok(id.clone()));
    assert_eq!(
        ParticipantIdentity::from(id.clone()).digest(),
        id.digest(),
        "the digest is the record's"
    );

    // Every field is covered by the digest: a recreated database (new UUID on a member),
    // another server, a member more or fewer, another replica number, another database name.
    let base = id.digest();
    let mut other = cluster();
    other.members[1].database_uuid = UUID_A.to_owned();
    assert_ne!(other.digest(), base, "a recreated database");
    let mut other = cluster();
    other.members[0].server_uuid = UUID_B.to_owned();
    assert_ne!(other.digest(), base, "another server");
    let fewer =
        ClickhouseIdentity::new("synth_ch".to_owned(), vec![member(1, 1, UUID_A)]).expect("valid");
    assert_ne!(fewer.digest(), base, "a member fewer");
    let swapped = ClickhouseIdentity::new(
        "synth_ch".to_owned(),
        vec![member(1, 1, UUID_B), member(1, 2, UUID_A)],
    )
    .expect("valid");
    assert_ne!(swapped.digest(), base, "members swapped");
    let mut other = cluster();
    other.database_name = "synth_ch2".to_owned();
    assert_ne!(other.digest(), base, "another database");
    assert_ne!(
        id.digest(),
        ParticipantIdentity::from(identity()).digest(),
        "engines never share a digest"
    );

    // Only a valid identity is made.
    let nil = "00000000-0000-0000-0000-000000000000";
    for (name, members) in [
        ("synth_ch", vec![]),
        ("synth_ch", vec![member(1, 1, nil)]),
        ("synth_ch", vec![member(1, 1, &UUID_A.to_uppercase())]),
        ("synth_ch", vec![member(1, 1, "not-a-uuid")]),
        ("synth_ch", vec![member(1, 1, UUID_A), member(1, 1, UUID_B)]),
        ("", vec![member(1, 1, UUID_A)]),
        ("a\u{7}b", vec![member(1, 1, UUID_A)]),
    ] {
        assert_eq!(
            ClickhouseIdentity::new(name.to_owned(), members.clone()),
            Err(RecordInvalid),
            "{name:?} {members:?}"
        );
    }
}

#[test]
fn a_stored_clickhouse_record_that_is_not_exactly_canonical_is_refused() {
    let record = String::from_utf8(cluster().record()).expect("utf-8");
    let refused = |text: String| {
        assert_eq!(
            ClickhouseIdentity::from_record(text.as_bytes()),
            Err(RecordInvalid),
            "{text}"
        );
    };
    refused(record.replace(",\"engine\"", ", \"engine\""));
    refused(record.replace("clickhouse.v1", "clickhouse.v2"));
    refused(record.replace("\"engine\":\"clickhouse\"", "\"engine\":\"postgresql\""));
    refused(record.replace("{\"database_name\"", "{\"comment\":\"x\",\"database_name\""));
    refused(record.replace(",\"shard_num\":1}", ",\"shard_num\":1,\"x\":1}"));
    refused(record.replace("\"replica_num\":2", "\"replica_num\":1"));
    refused(record.replace(UUID_A, "00000000-0000-0000-0000-000000000000"));
    refused(record.replace("\"replica_num\":1", "\"replica_num\":3"));
    refused(record.replacen("{", "[", 1));
    refused(String::new());
    refused(" ".repeat(enrollment::MAX_IDENTITY_RECORD_BYTES + 1));
}

#[test]
fn a_clickhouse_target_is_bound_to_its_enrolled_cluster_and_database() {
    let composition: Composition = doc("composition.json");
    let w = composition
        .workload("export-orders-mart")
        .expect("workload")
        .clone();
    let enrolled_ch = [enrolled("synth-ch-write", cluster())];
    let target = |id: ClickhouseIdentity| ch(ConnectionRole::Target, id, &["orders_mart"]);
    let state = |id: ClickhouseIdentity| ch(ConnectionRole::State, id, &["dpone_state"]);
    let bound = enrollment::bind_run(&w, &[target(cluster()), state(cluster())], &enrolled_ch)
        .expect("bound");
    assert_eq!(bound.len(), 2);
    assert!(
        bound.iter().all(
            |p| p.participant_id == "synth-ch-write" && p.identity_digest == cluster().digest()
        )
    );

    let refused = |observed: &[ObservedConnection], enrolled: &[Enrollment]| {
        enrollment::bind_run(&w, observed, enrolled).expect_err("refused")
    };
    // One member's database recreated, a member missing: another identity.
    let mut recreated = cluster();
    recreated.members[1].database_uuid = "0670178e-0e59-46ef-9845-9b26c4981039".to_owned();
    assert_eq!(
        refused(&[target(recreated)], &enrolled_ch),
        BindRefusal::IdentityMismatch(ConnectionRole::Target)
    );
    let one =
        ClickhouseIdentity::new("synth_ch".to_owned(), vec![member(1, 1, UUID_A)]).expect("valid");
    assert_eq!(
        refused(&[target(one)], &enrolled_ch),
        BindRefusal::IdentityMismatch(ConnectionRole::Target)
    );
    // A PostgreSQL identity enrolled under the ClickHouse participant's id is never it.
    assert_eq!(
        refused(
            &[ObservedConnection {
                identity: Some(identity().into()),
                ..target(cluster())
            }],
            &[enrolled("synth-ch-write", identity())]
        ),
        BindRefusal::IdentityMismatch(ConnectionRole::Target)
    );
    // Relations: another table, the write relation named as state, a state table as target.
    for observed in [
        ch(ConnectionRole::Target, cluster(), &["orders_mart_other"]),
        ch(ConnectionRole::State, cluster(), &["orders_mart"]),
        ch(ConnectionRole::Target, cluster(), &["Orders_Mart"]),
    ] {
        let role = observed.role;
        assert_eq!(
            refused(&[observed], &enrolled_ch),
            BindRefusal::RelationOutOfScope(role)
        );
    }
    // The route's engine for the role.
    assert_eq!(
        refused(
            &[ObservedConnection {
                engine: Engine::Postgresql,
                ..target(cluster())
            }],
            &enrolled_ch
        ),
        BindRefusal::RouteEngineMismatch(ConnectionRole::Target)
    );
}

#[test]
fn the_identity_digest_covers_every_field() {
    let base = identity().digest();
    let mut other = identity();
    other.database_oid += 1;
    assert_ne!(other.digest(), base, "a recreated database");
    let mut other = identity();
    other.system_identifier.push('0');
    assert_ne!(other.digest(), base, "another server");
    let mut other = identity();
    other.database_name = "synth_pg2".to_owned();
    assert_ne!(other.digest(), base, "another database");
    assert_eq!(identity().digest(), base);
    assert!(base.as_str().starts_with("sha256:"));
}

#[test]
fn an_execution_run_binds_to_the_composition_its_grant_binds() {
    let grant: Authority = doc("authority-execution.json");
    let composition: Composition = doc("composition.json");
    let w = enrollment::reserved_workload(&grant, &composition, "pg-customers").expect("bound");
    assert_eq!(w.route.source_participant.as_str(), "synth-pg-read");
    assert_eq!(
        enrollment::reserved_workload(&grant, &composition, "pg-nobody"),
        Err(WorkloadRefusal::WorkloadUnbound)
    );
    let other = Composition::parse(&edited("composition.json", |v| {
        v["composition_id"] = "7c9e6679-7425-40de-944b-e07fc1f90ae7".into();
    }))
    .expect("parses");
    assert_eq!(
        enrollment::reserved_workload(&grant, &other, "pg-customers"),
        Err(WorkloadRefusal::CompositionMismatch)
    );
    assert_eq!(
        WorkloadRefusal::CompositionMismatch.code(),
        "DPONE_CLI_NP_COMPOSITION_MISMATCH"
    );
}

#[test]
fn a_qualification_run_binds_only_within_the_grants_signed_routes_and_scope() {
    let grant: Authority = doc("authority-qualification.json");
    let composition: Composition = doc("composition.json");
    // The qualification grant signs the export route only.
    assert!(enrollment::reserved_workload(&grant, &composition, "export-orders-mart").is_ok());
    assert_eq!(
        enrollment::reserved_workload(&grant, &composition, "pg-customers"),
        Err(WorkloadRefusal::WorkloadUnbound),
        "a route the grant does not sign"
    );
}

#[test]
fn each_connection_is_bound_to_its_routes_enrolled_participant_exactly() {
    let composition: Composition = doc("composition.json");
    let w = composition
        .workload("pg-customers")
        .expect("workload")
        .clone();
    let pg = [enrolled("synth-pg-read", identity())];
    let ok = enrollment::bind_run(&w, &[source(Some(identity()), &["public.customers"])], &pg)
        .expect("bound");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].participant_id, "synth-pg-read");
    assert_eq!(ok[0].identity_digest, identity().digest());

    let refused = |observed: &[ObservedConnection], enrolled: &[Enrollment]| {
        enrollment::bind_run(&w, observed, enrolled).expect_err("refused")
    };
    // A case variant, another relation, and a relation of another participant.
    for rel in ["public.Customers", "public.orders", "dbo.customers"] {
        assert_eq!(
            refused(&[source(Some(identity()), &[rel])], &pg),
            BindRefusal::RelationOutOfScope(ConnectionRole::Source),
            "{rel}"
        );
    }
    // Not enrolled; another database; a forged digest beside the right fields.
    assert_eq!(
        refused(&[source(Some(identity()), &["public.customers"])], &[]),
        BindRefusal::NotEnrolled(ConnectionRole::Source)
    );
    let mut moved = identity();
    moved.database_oid = 16_385;
    assert_eq!(
        refused(&[source(Some(moved.clone()), &["public.customers"])], &pg),
        BindRefusal::IdentityMismatch(ConnectionRole::Source)
    );
    let mut forged = enrolled("synth-pg-read", identity());
    forged.identity_digest = moved.digest();
    assert_eq!(
        refused(
            &[source(Some(identity()), &["public.customers"])],
            &[forged]
        ),
        BindRefusal::IdentityMismatch(ConnectionRole::Source)
    );
    // The route's engine per role; an engine whose identity is not observed fails closed.
    let mut wrong = source(Some(identity()), &["public.customers"]);
    wrong.engine = Engine::Sqlserver;
    assert_eq!(
        refused(&[wrong], &pg),
        BindRefusal::RouteEngineMismatch(ConnectionRole::Source)
    );
    let target = ObservedConnection {
        role: ConnectionRole::Target,
        engine: Engine::Sqlserver,
        identity: None,
        relations: vec!["dbo.customers".to_owned()],
    };
    let both = [
        enrolled("synth-mssql-write", identity()),
        enrolled("synth-pg-read", identity()),
    ];
    let r = refused(
        &[target, source(Some(identity()), &["public.customers"])],
        &both,
    );
    assert_eq!(r, BindRefusal::Unobservable(ConnectionRole::Target));
    assert_eq!(r.code(), "DPONE_CLI_NP_PARTICIPANT_UNOBSERVABLE");
}

fn mssql() -> SqlserverIdentity {
    SqlserverIdentity::new(
        "synth_mssql".to_owned(),
        7,
        "2026-08-16T09:14:22.1233333".to_owned(),
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
    )
    .expect("valid")
}

#[test]
fn a_sql_server_identity_is_its_catalog_row_read_back_exactly() {
    let id = mssql();
    assert_eq!(
        id.database_guid, "6f9619ff-8b86-d011-b42d-00c04fc964ff",
        "the GUID is kept lowercase (the route compares it case-insensitively)"
    );
    let record = id.record();
    assert_eq!(
        String::from_utf8(record.clone()).expect("utf-8"),
        "{\"create_token\":\"2026-08-16T09:14:22.1233333\",\"database_guid\":\
         \"6f9619ff-8b86-d011-b42d-00c04fc964ff\",\"database_id\":7,\"database_name\":\
         \"synth_mssql\",\"engine\":\"sqlserver\",\"schema\":\
         \"dpone.np-physical-identity.sqlserver.v1\"}"
    );
    assert_eq!(SqlserverIdentity::from_record(&record), Ok(id.clone()));
    let base = id.digest();
    let mut other = mssql();
    other.create_token = "2026-08-16T09:14:22.1233334".to_owned();
    assert_ne!(other.digest(), base, "a recreated database");
    let mut other = mssql();
    other.database_guid = "6f9619ff-8b86-d011-b42d-00c04fc964fe".to_owned();
    assert_ne!(other.digest(), base, "a restored database");
    let mut other = mssql();
    other.database_id = 8;
    assert_ne!(other.digest(), base, "another database id");
    for (token, guid, dbid) in [
        (
            "2026-08-16 09:14:22.1233333",
            "6f9619ff-8b86-d011-b42d-00c04fc964ff",
            7,
        ),
        (
            "2026-08-16T09:14:22",
            "6f9619ff-8b86-d011-b42d-00c04fc964ff",
            7,
        ),
        (
            "2026-08-16T09:14:22.1233333",
            "00000000-0000-0000-0000-000000000000",
            7,
        ),
        ("2026-08-16T09:14:22.1233333", "not-a-guid", 7),
        (
            "2026-08-16T09:14:22.1233333",
            "6f9619ff-8b86-d011-b42d-00c04fc964ff",
            0,
        ),
    ] {
        assert_eq!(
            SqlserverIdentity::new("synth_mssql".to_owned(), dbid, token.to_owned(), guid),
            Err(RecordInvalid),
            "{token} {guid} {dbid}"
        );
    }
    let text = String::from_utf8(record).expect("utf-8");
    for bad in [
        text.replace("sqlserver.v1", "sqlserver.v2"),
        text.replace("\"engine\":\"sqlserver\"", "\"engine\":\"clickhouse\""),
        text.replace("6f9619ff", "6F9619FF"),
        text.replace(",\"engine\"", ", \"engine\""),
        text.replace("{\"create_token\"", "{\"x\":1,\"create_token\""),
    ] {
        assert_eq!(
            SqlserverIdentity::from_record(bad.as_bytes()),
            Err(RecordInvalid),
            "{bad}"
        );
    }
}

#[test]
fn a_sql_server_target_is_bound_to_its_enrolled_database() {
    let composition: Composition = doc("composition.json");
    let w = composition
        .workload("pg-customers")
        .expect("workload")
        .clone();
    let enrolled_all = [
        enrolled("synth-mssql-write", mssql()),
        enrolled("synth-pg-read", identity()),
    ];
    let target = |id: SqlserverIdentity, rel: &str| ObservedConnection {
        role: ConnectionRole::Target,
        engine: Engine::Sqlserver,
        identity: Some(id.into()),
        relations: vec![rel.to_owned()],
    };
    let bound = enrollment::bind_run(
        &w,
        &[
            source(Some(identity()), &["public.customers"]),
            target(mssql(), "dbo.customers"),
        ],
        &enrolled_all,
    )
    .expect("bound");
    assert_eq!(bound[1].participant_id, "synth-mssql-write");
    let mut restored = mssql();
    restored.database_guid = "6f9619ff-8b86-d011-b42d-00c04fc964fe".to_owned();
    assert_eq!(
        enrollment::bind_run(&w, &[target(restored, "dbo.customers")], &enrolled_all),
        Err(BindRefusal::IdentityMismatch(ConnectionRole::Target))
    );
    assert_eq!(
        enrollment::bind_run(&w, &[target(mssql(), "dbo.orders")], &enrolled_all),
        Err(BindRefusal::RelationOutOfScope(ConnectionRole::Target))
    );
}
