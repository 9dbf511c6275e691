//! PostgreSQL adapter of XMin key reconciliation.
//!
//! - [`source::PgSource`] implements the engine's source port: one `REPEATABLE READ READ ONLY`
//!   snapshot, authority verification, `ACCESS SHARE` lock, binary COPY into artifacts.
//! - [`target::PgTarget`] implements the target port for a PostgreSQL target whose state tables
//!   live in the same database: preflight, receipt probes and the single `SERIALIZABLE` run
//!   transaction; plus the environment owner's repair-authority API (`create_authority`,
//!   `list_authorities`).
//! - [`artifacts::DirArtifactStore`]: a minimal content-addressed artifact store (cap-std),
//!   used until the shared `dpone-artifact-store` crate lands.
//! - [`ddl`]: reviewed provisioning DDL (state tables, target tables); the runtime never runs it.
//! - [`discover`]: pin discovery for the environment owner (never used at run time).
//!
//! Architecture invariant: this is the only crate of the route that talks to PostgreSQL.

pub mod artifacts;
pub mod catalog;
pub mod conn;
pub mod ddl;
pub mod discover;
pub mod source;
pub mod sql;
pub mod target;
