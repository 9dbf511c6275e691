//! The policy runtime: loads policy components only at pinned sha256 digests and runs every
//! decision in a fresh wasmtime sandbox that fails closed.
//!
//! - [`PolicyRuntime::load`] refuses a component whose digest differs from its pin, that imports
//!   anything, or that exports another world or package version; it compiles the component (or
//!   loads verified precompiled code from a [`PrecompiledCache`]) and type-checks its exports.
//! - [`LoadedPolicy`] offers one typed method per exported function (`guard_decide`,
//!   `delete_mode_plan`, `admission_static`, `admission_runtime`, `scope_decide`) over the model
//!   types of `dpone-policy-model`, plus [`LoadedPolicy::decide_json`] for tools.
//! - Every failure is a [`PolicyError`] with a stable code; every decision carries
//!   [`DecisionEvidence`].
//!
//! Generated bindings stay private (`bindings`), converted to and from the model in `convert`.

mod bindings;
mod cache;
mod canonical;
mod convert;
mod digest;
mod error;
mod inspect;
mod kind;
mod runtime;
mod sandbox;
mod validate;

pub use cache::{CacheKey, PrecompiledCache};
pub use canonical::canonical_json;
pub use digest::Sha256Digest;
pub use error::PolicyError;
pub use inspect::{ComponentSurface, component_surface};
pub use kind::{PolicyKind, SUPPORTED_WIT_PACKAGE};
pub use runtime::{CodeSource, Decided, DecisionEvidence, LoadReport, LoadedPolicy, PolicyRuntime};
pub use sandbox::{Budget, SandboxConfig, WASM_FEATURES, wasm_feature_names};
