//! Helpers shared by the CLI tests (and the campaign verify benchmark).
pub mod campaign;
