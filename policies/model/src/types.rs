//! Shared types (`dpone:policy/types`).

use alloc::string::String;
use serde::{Deserialize, Serialize};

/// Seconds since the Unix epoch, UTC. Always supplied by the host.
pub type UnixSeconds = i64;

/// A ratio in parts per million: 1_000_000 is 100 %.
pub type Ppm = u32;

/// Parts per million that make one whole.
pub const PPM_ONE: Ppm = 1_000_000;

/// Why a decision was made: a stable code and a message for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// Stable machine-readable code.
    pub code: String,
    /// Human explanation; never row values, endpoints, credentials or paths.
    pub message: String,
}

impl Reason {
    /// Builds a reason from a code and a message.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}
