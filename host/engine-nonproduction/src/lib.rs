//! The nonproduction composition authority (spec 004): its contracts and its protocols, pure —
//! no driver, no tokio, no wasmtime, no `dpone-trust`; I/O and decisions come in through ports.
//!
//! - Six strict, bounded, canonical documents ([`Document`]): [`policy`]
//!   (`dpone.nonproduction-authority-policy.v1`), [`authority`]
//!   (`dpone.nonproduction-authority.v1`, closed phases), [`qualification`]
//!   (`dpone.route-qualification.v1`), [`release_set`]
//!   (`dpone.dbt-release-set.nonproduction.v1` and its producer wire
//!   `dpone.dbt-airflow-self-service.nonproduction.v1`), [`composition`]
//!   (`dpone.release-composition.nonproduction.v1`) and [`activation`]
//!   (`dpone.composition-activation-request.nonproduction.v1`). Each reads RFC 8785 canonical
//!   JSON only ([`json`]), refuses unknown, duplicate and missing fields, and re-encodes
//!   byte-exact; its digest is `sha256:<hex>` of those bytes.
//! - [`any::AnyDocument`]: the closed dispatch on `schema` for tools handed any document.
//! - [`reopen`]: the pure checks after signature verification.
//! - [`facts`]: the mapping to the scope component's facts.
//! - [`control_store`]: the protected control store's port (typed keys and values, the
//!   [`control_store::ControlStorePort`] trait an adapter implements) and the mapping from
//!   verified documents to its values.
//! - [`admission`]: the protected admission protocol behind that port and the verification and
//!   scope-decision ports (authenticate in the revision bracket; read, decide and reserve in one
//!   transaction).
//! - [`reservation_run`]: a route run under an admitted reservation: the manifest's binding to
//!   the admitted workload, the attempt's deadline and what the run settles.
//!
//! - [`enrollment`]: physical enrollment and the binding of a reserved run's connections to the
//!   enrolled participants its workload's route names.
//!
//! Every refusal is an [`NpError`] with one stable code of [`codes`]. The schemas with examples
//! are in `docs/nonproduction-authority.md`.

pub mod activation;
pub mod admission;
pub mod any;
pub mod authority;
pub mod codes;
pub mod common;
pub mod composition;
pub mod control_store;
pub mod document;
pub mod enrollment;
pub mod error;
pub mod facts;
pub mod fields;
pub mod json;
pub mod policy;
pub mod qualification;
pub mod release_set;
pub mod reopen;
pub mod reservation_run;

/// The span of one protocol phase (target `dpone::phase`, named by its `otel.name`): the cli
/// turns these into trace spans and phase-duration metrics when telemetry is configured; with
/// no subscriber interested they cost a disabled callsite check.
pub fn phase_span(name: &'static str) -> tracing::Span {
    tracing::info_span!(target: "dpone::phase", "phase", otel.name = name, phase = name)
}

pub use activation::ActivationRequest;
pub use any::AnyDocument;
pub use authority::Authority;
pub use composition::Composition;
pub use document::Document;
pub use error::NpError;
pub use policy::AuthorityPolicy;
pub use qualification::RouteQualification;
pub use release_set::{DbtReleaseSet, ProducerWire};
