//! Physical enrollment's pure checks on the frozen fixtures: the workload a reservation run
//! binds to ([`enrollment::reserved_workload`]), the binding of observed connections to the
//! enrolled participants of its route ([`enrollment::bind_run`]) and the identity digest.
//! Tier: unit (pure).

mod support;

use dpone_engine_nonproduction::common::Engine;
use dpone_engine_nonproduction::enrollment::{
    self, BindRefusal, ConnectionRole, Enrollment, ObservedConnection, PhysicalIdentity,
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

fn enrolled(id: &str, identity: PhysicalIdentity) -> Enrollment {
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
        identity,
        relations: relations.iter().map(|r| (*r).to_owned()).collect(),
    }
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
