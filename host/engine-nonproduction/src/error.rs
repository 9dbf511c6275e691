//! The one error type of the contracts: a stable `DPONE_NP_*` code and a short detail.
//!
//! Details name a field path (`$.participants[2].access`) and a fixed reason. They never quote
//! a value from the document: an unknown key is reported by its parent's path only, so no
//! attacker-chosen text, row value, endpoint or local path reaches a report.

use std::fmt;

/// A refusal: one stable code from [`crate::codes`] and a fixed, short detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpError {
    code: &'static str,
    detail: String,
}

impl NpError {
    /// Builds a refusal.
    pub fn new(code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
        }
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The detail (a field path and a fixed reason).
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for NpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

impl std::error::Error for NpError {}

/// Result of this crate.
pub type Result<T, E = NpError> = std::result::Result<T, E>;
