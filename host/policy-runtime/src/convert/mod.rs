//! Conversions between the model types and the generated bindings, one module per policy kind.
//! Exhaustive by construction: a WIT change that is not mirrored here fails to compile.

pub(crate) mod admission;
pub(crate) mod delete_mode;
pub(crate) mod guard;
pub(crate) mod scope;
