//! Generated bindings, one module per policy world. Private to this crate: the rest of the host
//! sees only the model types in `dpone-policy-model`; conversions live in `convert`.
#![allow(missing_docs)]

pub(crate) mod admission {
    wasmtime::component::bindgen!({ path: "../../wit", world: "admission-policy" });
}
pub(crate) mod guard {
    wasmtime::component::bindgen!({ path: "../../wit", world: "guard-policy" });
}
pub(crate) mod delete_mode {
    wasmtime::component::bindgen!({ path: "../../wit", world: "delete-mode-policy" });
}
pub(crate) mod scope {
    wasmtime::component::bindgen!({ path: "../../wit", world: "scope-policy" });
}
