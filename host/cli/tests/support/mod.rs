//! Helpers shared by the CLI tests (and the campaign verify benchmark).
pub mod campaign;
pub mod np_store;
pub mod np_xmin;
