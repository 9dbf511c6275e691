//! Maps `clickhouse` client failures to redacted port errors.
//!
//! Server exception text can contain SQL values, so it is never kept: only the numeric
//! exception code is read (and only to choose a stable class).

use dpone_engine_clickhouse::ports::{PortError, PortErrorKind};

/// Stable classes this adapter reports.
pub mod class {
    /// The server rejected the statement.
    pub const SERVER: &str = "DPONE_CLICKHOUSE_SERVER_ERROR";
    /// The table already exists.
    pub const TABLE_EXISTS: &str = "DPONE_CLICKHOUSE_TABLE_EXISTS";
    /// The table or database does not exist.
    pub const UNKNOWN_TABLE: &str = "DPONE_CLICKHOUSE_UNKNOWN_TABLE";
    /// The server reported a timeout (the statement may still complete).
    pub const SERVER_TIMEOUT: &str = "DPONE_CLICKHOUSE_SERVER_TIMEOUT";
    /// The connection failed or broke.
    pub const NETWORK: &str = "DPONE_CLICKHOUSE_NETWORK";
    /// The client timed out waiting.
    pub const TIMEOUT: &str = "DPONE_CLICKHOUSE_TIMEOUT";
    /// A response did not decode.
    pub const DECODE: &str = "DPONE_CLICKHOUSE_DECODE";
    /// A statement could not be built from its parts.
    pub const STATEMENT: &str = "DPONE_CLICKHOUSE_STATEMENT_INVALID";
    /// Authentication or authorization failed.
    pub const ACCESS: &str = "DPONE_CLICKHOUSE_ACCESS_DENIED";
    /// The member id is not configured.
    pub const UNKNOWN_MEMBER: &str = "DPONE_CLICKHOUSE_UNKNOWN_MEMBER";
    /// A UUID check before a mutation failed.
    pub const UUID_MISMATCH: &str = "DPONE_CLICKHOUSE_UUID_MISMATCH";
    /// Reading the artifact failed.
    pub const ARTIFACT_READ: &str = "DPONE_CLICKHOUSE_ARTIFACT_READ";
    /// A configured member is not in the cluster's inventory.
    pub const MEMBER_EXTRA: &str = "DPONE_CLICKHOUSE_MEMBER_NOT_IN_INVENTORY";
    /// A member URL reaches a replica other than the one it is configured as.
    pub const MEMBER_IDENTITY_MISMATCH: &str = "DPONE_CLICKHOUSE_MEMBER_IDENTITY_MISMATCH";
    /// A member URL reaches a server that marks no replica of the cluster as itself.
    pub const MEMBER_IDENTITY_UNPROVEN: &str = "DPONE_CLICKHOUSE_MEMBER_IDENTITY_UNPROVEN";
    /// A member URL reaches a server that marks several replicas of the cluster as itself.
    pub const MEMBER_IDENTITY_AMBIGUOUS: &str = "DPONE_CLICKHOUSE_MEMBER_IDENTITY_AMBIGUOUS";
}

/// The leading `Code: N.` of a server exception, if any.
fn exception_code(text: &str) -> Option<u32> {
    let rest = text.trim_start().strip_prefix("Code:")?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Redacts a client error. `mutation` marks statements whose effect may have happened when the
/// transport failed (those become [`PortErrorKind::Ambiguous`]).
pub fn port_error(e: &clickhouse::error::Error, mutation: bool) -> PortError {
    use clickhouse::error::Error as E;
    let transport = if mutation {
        PortErrorKind::Ambiguous
    } else {
        PortErrorKind::Unavailable
    };
    match e {
        E::Network(_) => PortError::new(transport, class::NETWORK),
        E::TimedOut => PortError::new(transport, class::TIMEOUT),
        E::BadResponse(text) => match exception_code(text) {
            Some(57) => PortError::rejected(class::TABLE_EXISTS),
            Some(60 | 81) => PortError::rejected(class::UNKNOWN_TABLE),
            Some(159 | 209) => PortError::new(transport, class::SERVER_TIMEOUT),
            Some(192 | 193 | 194 | 497 | 516) => PortError::rejected(class::ACCESS),
            _ => PortError::rejected(class::SERVER),
        },
        E::InvalidParams(_) => PortError::rejected(class::STATEMENT),
        _ => PortError::new(transport, class::DECODE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exception_text_is_reduced_to_a_class() {
        // Tier: unit (redaction).
        let e = clickhouse::error::Error::BadResponse(
            "Code: 57. DB::Exception: Table db.secret_name already exists, value 'hunter2'".into(),
        );
        let p = port_error(&e, true);
        assert_eq!(p.class, class::TABLE_EXISTS);
        assert!(!format!("{p} {p:?}").contains("hunter2"));
        let e = clickhouse::error::Error::BadResponse("garbage".into());
        assert_eq!(port_error(&e, false).class, class::SERVER);
        assert_eq!(
            port_error(&clickhouse::error::Error::TimedOut, true).kind,
            PortErrorKind::Ambiguous
        );
    }
}
