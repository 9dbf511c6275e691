//! SQL Server target for XMin key reconciliation (spec 003, the route the spec is written for).
//!
//! - [`sql`]: every T-SQL statement (pins, staging, the finalizer, target DDL).
//! - [`pins`]: pure verification of `database_authorities` pins on captured catalog rows.
//! - [`shape`]: the target-shape preflight over captured column rows.
//! - [`catalog`]: the target's key index and the state tables' reviewed contract, verified.
//! - [`keys`]: key checks before source export (900-byte limit, trailing U+0020).
//! - [`server`]: which TDS servers are accepted (SQL Server 2016+, not Babelfish).
//! - [`provision`]: the reviewed provisioning scripts in `fixtures/mssql/`.
//! - [`conn`]: tiberius connection over rustls and the live-test gate.
//! - [`session`]: the run transaction and the staging lease (building blocks of the engine's
//!   `TargetSession`).
//! - [`stage`]: the pre-export check and the load of binary COPY artifacts into staging (bulk
//!   load, or batched parameterized `INSERT`s for what the bulk load cannot carry).

pub mod catalog;
pub mod conn;
pub mod keys;
pub mod pins;
pub mod provision;
pub mod server;
pub mod session;
pub mod shape;
pub mod sql;
pub mod stage;
pub mod target;
