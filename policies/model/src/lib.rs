//! Plain Rust mirror of the `dpone:policy@0.1.0` WIT records.
//!
//! Policy cores decide on these types natively; the host's typed API takes and returns them;
//! decision tables in `fixtures/` are these types as JSON. Each module mirrors one WIT interface
//! field for field (kebab-case names become snake_case), so conversions to and from generated
//! bindings are one-to-one. Input records reject unknown fields.
#![no_std]

extern crate alloc;

pub mod admission;
pub mod delete_mode;
pub mod guard;
pub mod scope;
pub mod types;

/// The WIT package every type here mirrors.
pub const WIT_PACKAGE: &str = "dpone:policy@0.1.0";
