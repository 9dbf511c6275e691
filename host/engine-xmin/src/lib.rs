//! XMin key reconciliation (spec 003) for a PostgreSQL source and a PostgreSQL target.
//!
//! PostgreSQL XMin captures inserts and updates but not deletes. A run extracts the XMin delta
//! and the complete key set from one `REPEATABLE READ READ ONLY` snapshot, validates both, and
//! applies them to the target together with the source checkpoint in **one** target
//! transaction: set-based upsert, reactivation and missing-key action, exact counts, key parity,
//! checkpoint compare-and-set, commit receipt and one-shot repair-authority consumption.
//!
//! This crate is pure: contracts, ports and the engine. It knows no database driver and no
//! WebAssembly runtime; the composition root fills the ports.
//!
//! - Contracts: [`manifest`], [`registry`], [`identity`], [`envelope`], [`state`], [`error`].
//! - Ports: [`ports`], [`artifact`].
//! - Decisions and flow: [`route`] (`check`, `plan`), [`validate`], [`engine`] (`run`,
//!   `state_show`), [`fault`] (fault injection for tests).
//!
//! Library API for the CLI:
//!
//! ```text
//! let manifest = Manifest::from_yaml(text)?;          // strict, stable codes
//! let registry = Registry::from_yaml(text)?;          // environment-owned
//! let route = Route::prepare(manifest, &registry, &ProcessEnvironment, &policies)?;
//! route.check_report(); route.plan_report();          // check / plan (JSON)
//! engine::run(&route, &request, &mut source, &mut target, &store, &policies).await
//! engine::state_show(&route, &mut target, 10).await
//! ```

pub mod artifact;
pub mod copy_binary;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod fault;
pub mod identity;
pub mod manifest;
pub mod ports;
pub mod registry;
pub mod route;
pub mod state;
pub mod validate;
pub mod yaml;

pub use engine::{RunFailure, RunOutcome, RunRequest, RunStatus, StateReport, run, state_show};
pub use error::{ErrorClass, ErrorCode, Result, XminError};
pub use manifest::Manifest;
pub use registry::{Environment, ProcessEnvironment, Registry};
pub use route::{CheckReport, PlanReport, Route};
