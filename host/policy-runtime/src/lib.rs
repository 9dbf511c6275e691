//! placeholder
mod bindings;
