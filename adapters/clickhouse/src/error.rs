//! Maps `clickhouse` client failures to redacted port errors.
//!
//! Server exception text can contain SQL values, so it is never kept: only the numeric
//! exception code is read, and only to choose a stable class and a [`PortErrorKind`].
//!
//! # Classification
//!
//! The engine relies on the kind: `Rejected` means *deterministic, no effect worth waiting
//! for* — the same statement will fail the same way, so the engine stops fail-closed instead
//! of retrying; `Ambiguous` (a mutation) or `Unavailable` (a read) means the server or the
//! path to it did not complete the request and the same operation may be resumed later.
//!
//! | ClickHouse exception codes | class | kind |
//! |---|---|---|
//! | 57 `TABLE_ALREADY_EXISTS` | `TABLE_EXISTS` | rejected |
//! | 60 `UNKNOWN_TABLE`, 81 `UNKNOWN_DATABASE` | `UNKNOWN_TABLE` | rejected |
//! | 164 `READONLY`, 192–195 (user, password, address), 291 `DATABASE_ACCESS_DENIED`, 497 `ACCESS_DENIED`, 516 `AUTHENTICATION_FAILED` | `ACCESS_DENIED` | rejected |
//! | [`QUERY_INVALID_CODES`]: syntax, unknown identifier, column, type, function, engine or setting, wrong engine or function arguments, type mismatch, prohibited query, setting constraints, … | `QUERY_INVALID` | rejected |
//! | [`DATA_INVALID_CODES`]: the inserted `RowBinary` does not parse or does not fit (short data, bad value, overflow, NULL in a non-nullable column, violated constraint) | `DATA_INVALID` | rejected |
//! | 159 `TIMEOUT_EXCEEDED`, 209 `SOCKET_TIMEOUT` | `SERVER_TIMEOUT` | ambiguous / unavailable |
//! | [`TRANSIENT_CODES`]: the server is busy, short of memory or parts, lost Keeper or a replica, was cancelled, or cannot tell the insert's fate | `SERVER_UNAVAILABLE` | ambiguous / unavailable |
//! | any other code, or an exception without a code | `SERVER_ERROR` | rejected (fail closed) |
//!
//! Client-side failures: a broken or refused connection is `NETWORK` and a client timeout
//! `TIMEOUT` (ambiguous for a mutation, unavailable for a read); over `https://`, a server
//! certificate that does not verify is `TLS_CERTIFICATE`, **rejected** (the handshake fails
//! before any request byte is sent, and the same server fails the same way), and any other TLS
//! failure `TLS` (like `NETWORK`); a response that does not decode as the expected rows is
//! `DECODE`, **rejected** (the same query decodes the same way next time, so retrying would
//! loop); a statement the client cannot build is
//! `STATEMENT_INVALID`, rejected. Anything else the client reports (an I/O failure while a
//! body streams) counts as transport.

use dpone_engine_clickhouse::ports::{PortError, PortErrorKind};

/// Stable classes this adapter reports.
pub mod class {
    /// The server rejected the statement with a code this adapter does not classify.
    pub const SERVER: &str = "DPONE_CLICKHOUSE_SERVER_ERROR";
    /// The table already exists.
    pub const TABLE_EXISTS: &str = "DPONE_CLICKHOUSE_TABLE_EXISTS";
    /// The table or database does not exist.
    pub const UNKNOWN_TABLE: &str = "DPONE_CLICKHOUSE_UNKNOWN_TABLE";
    /// The server refused the statement itself (syntax, unknown type, engine, column, setting,
    /// wrong arguments): deterministic.
    pub const QUERY_INVALID: &str = "DPONE_CLICKHOUSE_QUERY_INVALID";
    /// The server refused the inserted data (does not parse or does not fit): deterministic.
    pub const DATA_INVALID: &str = "DPONE_CLICKHOUSE_DATA_INVALID";
    /// The server reported a timeout (the statement may still complete).
    pub const SERVER_TIMEOUT: &str = "DPONE_CLICKHOUSE_SERVER_TIMEOUT";
    /// The server could not complete the statement for a transient reason (busy, memory,
    /// Keeper, cancelled, unknown insert status).
    pub const SERVER_UNAVAILABLE: &str = "DPONE_CLICKHOUSE_SERVER_UNAVAILABLE";
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
    /// The pinned CA bundle of an `https://` endpoint (or the system's roots) cannot be used:
    /// not a readable regular file of at most 1 MiB, not PEM, or no usable certificate.
    pub const TLS_ROOT_CERT: &str = "DPONE_CLICKHOUSE_TLS_ROOT_CERT_INVALID";
    /// The server's certificate does not verify against the trusted CAs or does not name the
    /// host: refused before any request is sent.
    pub const TLS_CERTIFICATE: &str = "DPONE_CLICKHOUSE_TLS_CERTIFICATE";
    /// The TLS session failed otherwise (an alert, a protocol error).
    pub const TLS: &str = "DPONE_CLICKHOUSE_TLS";
}

/// Exception codes that mean the statement itself is wrong for this server: rejected, never
/// retried (`QUERY_INVALID`).
pub const QUERY_INVALID_CODES: &[u32] = &[
    1,   // UNSUPPORTED_METHOD
    2,   // UNSUPPORTED_PARAMETER
    7,   // INCORRECT_NUMBER_OF_COLUMNS
    8,   // THERE_IS_NO_COLUMN
    10,  // NOT_FOUND_COLUMN_IN_BLOCK
    15,  // DUPLICATE_COLUMN
    16,  // NO_SUCH_COLUMN_IN_TABLE
    20,  // NUMBER_OF_COLUMNS_DOESNT_MATCH
    34,  // TOO_MANY_ARGUMENTS_FOR_FUNCTION
    35,  // TOO_FEW_ARGUMENTS_FOR_FUNCTION
    36,  // BAD_ARGUMENTS
    42,  // NUMBER_OF_ARGUMENTS_DOESNT_MATCH (e.g. CollapsingMergeTree without its sign column)
    43,  // ILLEGAL_TYPE_OF_ARGUMENT
    44,  // ILLEGAL_COLUMN
    46,  // UNKNOWN_FUNCTION
    47,  // UNKNOWN_IDENTIFIER
    48,  // NOT_IMPLEMENTED
    50,  // UNKNOWN_TYPE
    53,  // TYPE_MISMATCH
    54,  // STORAGE_DOESNT_ALLOW_PARAMETERS
    55,  // STORAGE_REQUIRES_PARAMETER
    56,  // UNKNOWN_STORAGE
    62,  // SYNTAX_ERROR
    73,  // UNKNOWN_FORMAT
    80,  // INCORRECT_QUERY
    115, // UNKNOWN_SETTING
    119, // ENGINE_REQUIRED
    344, // SUPPORT_IS_DISABLED
    370, // DATA_TYPE_CANNOT_BE_USED_IN_TABLES
    377, // ILLEGAL_SYNTAX_FOR_DATA_TYPE
    378, // DATA_TYPE_CANNOT_HAVE_ARGUMENTS
    386, // NO_COMMON_TYPE
    392, // QUERY_IS_PROHIBITED
    452, // SETTING_CONSTRAINT_VIOLATION
    455, // SUSPICIOUS_TYPE_FOR_LOW_CARDINALITY
    456, // UNKNOWN_QUERY_PARAMETER
    457, // BAD_QUERY_PARAMETER
    471, // INVALID_SETTING_VALUE
    472, // READONLY_SETTING
    549, // DATA_TYPE_CANNOT_BE_USED_IN_KEY
];

/// Exception codes that mean the inserted data does not parse or does not fit: rejected,
/// never retried (`DATA_INVALID`). The artifact is revalidated before every load, so the same
/// bytes would fail the same way.
pub const DATA_INVALID_CODES: &[u32] = &[
    3,   // UNEXPECTED_END_OF_FILE
    6,   // CANNOT_PARSE_TEXT
    19,  // SIZE_OF_FIXED_STRING_DOESNT_MATCH
    27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    32,  // ATTEMPT_TO_READ_AFTER_EOF
    33,  // CANNOT_READ_ALL_DATA
    38,  // CANNOT_PARSE_DATE
    41,  // CANNOT_PARSE_DATETIME
    69,  // ARGUMENT_OUT_OF_BOUND
    70,  // CANNOT_CONVERT_TYPE
    72,  // CANNOT_PARSE_NUMBER
    117, // INCORRECT_DATA
    131, // TOO_LARGE_STRING_SIZE
    321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
    349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
    376, // CANNOT_PARSE_UUID
    407, // DECIMAL_OVERFLOW
    467, // CANNOT_PARSE_BOOL
    469, // VIOLATED_CONSTRAINT
];

/// Exception codes of a server that could not complete the request for now: ambiguous for a
/// mutation (observation decides), unavailable for a read (`SERVER_UNAVAILABLE`).
pub const TRANSIENT_CODES: &[u32] = &[
    23,  // CANNOT_READ_FROM_ISTREAM
    24,  // CANNOT_WRITE_TO_OSTREAM
    95,  // CANNOT_READ_FROM_SOCKET
    96,  // CANNOT_WRITE_TO_SOCKET
    173, // CANNOT_ALLOCATE_MEMORY
    198, // DNS_ERROR
    201, // QUOTA_EXPIRED
    202, // TOO_MANY_SIMULTANEOUS_QUERIES
    203, // NO_FREE_CONNECTION
    210, // NETWORK_ERROR
    216, // QUERY_WITH_SAME_ID_IS_ALREADY_RUNNING
    225, // NO_ZOOKEEPER
    236, // ABORTED
    241, // MEMORY_LIMIT_EXCEEDED
    242, // TABLE_IS_READ_ONLY
    243, // NOT_ENOUGH_SPACE
    244, // UNEXPECTED_ZOOKEEPER_ERROR
    252, // TOO_MANY_PARTS
    279, // ALL_CONNECTION_TRIES_FAILED
    285, // TOO_FEW_LIVE_REPLICAS
    319, // UNKNOWN_STATUS_OF_INSERT
    335, // BARRIER_TIMEOUT
    337, // DDL_GUARD_IS_ACTIVE
    364, // RECEIVED_ERROR_TOO_MANY_REQUESTS
    373, // SESSION_IS_LOCKED
    379, // UNKNOWN_STATUS_OF_DISTRIBUTED_DDL_TASK
    384, // PART_IS_TEMPORARILY_LOCKED
    394, // QUERY_WAS_CANCELLED
    410, // EXTERNAL_SERVER_IS_NOT_RESPONDING
    425, // SYSTEM_ERROR
    439, // CANNOT_SCHEDULE_TASK
    473, // DEADLOCK_AVOIDED
    999, // KEEPER_EXCEPTION
];

/// The leading `Code: N.` of a server exception, if any.
fn exception_code(text: &str) -> Option<u32> {
    let rest = text.trim_start().strip_prefix("Code:")?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The class and kind of one server exception code (see the module table). `transport` is the
/// kind of a failure whose effect is unknown: ambiguous for a mutation, unavailable for a read.
pub fn classify_code(code: Option<u32>, transport: PortErrorKind) -> PortError {
    match code {
        Some(57) => PortError::rejected(class::TABLE_EXISTS),
        Some(60 | 81) => PortError::rejected(class::UNKNOWN_TABLE),
        Some(159 | 209) => PortError::new(transport, class::SERVER_TIMEOUT),
        Some(164 | 192 | 193 | 194 | 195 | 291 | 497 | 516) => PortError::rejected(class::ACCESS),
        Some(c) if QUERY_INVALID_CODES.contains(&c) => PortError::rejected(class::QUERY_INVALID),
        Some(c) if DATA_INVALID_CODES.contains(&c) => PortError::rejected(class::DATA_INVALID),
        Some(c) if TRANSIENT_CODES.contains(&c) => {
            PortError::new(transport, class::SERVER_UNAVAILABLE)
        }
        _ => PortError::rejected(class::SERVER),
    }
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
        E::Network(inner) => match tls_failure(inner.as_ref()) {
            // No request leaves before the handshake: deterministic, never ambiguous.
            Some(TlsFailure::Certificate) => PortError::rejected(class::TLS_CERTIFICATE),
            Some(TlsFailure::Other) => PortError::new(transport, class::TLS),
            None => PortError::new(transport, class::NETWORK),
        },
        E::TimedOut => PortError::new(transport, class::TIMEOUT),
        E::BadResponse(text) => classify_code(exception_code(text), transport),
        E::InvalidParams(_) | E::Unsupported(_) | E::Compression(_) => {
            PortError::rejected(class::STATEMENT)
        }
        // A complete response that does not decode as the expected rows decodes the same way
        // next time: a deterministic defect, never a retry.
        E::DataFormat(_)
        | E::RowNotFound
        | E::SequenceMustHaveLength
        | E::DeserializeAnyNotSupported
        | E::NotEnoughData
        | E::InvalidUtf8Encoding(_)
        | E::InvalidTagEncoding(_)
        | E::VariantDiscriminatorIsOutOfBound(_)
        | E::Custom(_)
        | E::InvalidColumnsHeader(_)
        | E::SchemaMismatch(_) => PortError::rejected(class::DECODE),
        // An I/O failure while a body streams, a cut compressed body, anything newer.
        _ => PortError::new(transport, class::NETWORK),
    }
}

enum TlsFailure {
    Certificate,
    Other,
}

/// The rustls error somewhere in `e`'s chain, if any. An `io::Error`'s `source()` skips the
/// error it wraps, so wrapped errors are looked into explicitly.
fn tls_failure(e: &(dyn std::error::Error + 'static)) -> Option<TlsFailure> {
    let mut next = Some(e);
    let mut depth = 0;
    while let Some(e) = next {
        if let Some(t) = e.downcast_ref::<rustls::Error>() {
            return Some(match t {
                rustls::Error::InvalidCertificate(_)
                | rustls::Error::NoCertificatesPresented
                | rustls::Error::UnsupportedNameType => TlsFailure::Certificate,
                _ => TlsFailure::Other,
            });
        }
        depth += 1;
        if depth > 16 {
            return None;
        }
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(wrapped) => Some(wrapped as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use clickhouse::error::Error as E;

    fn server(code: u32) -> E {
        E::BadResponse(format!(
            "Code: {code}. DB::Exception: something about db.secret_name and 'hunter2'. (NAME) (version 26.9.2.1)"
        ))
    }

    #[test]
    fn exception_text_is_reduced_to_a_class() {
        // Tier: unit (redaction).
        let e = E::BadResponse(
            "Code: 57. DB::Exception: Table db.secret_name already exists, value 'hunter2'".into(),
        );
        let p = port_error(&e, true);
        assert_eq!(p.class, class::TABLE_EXISTS);
        assert!(!format!("{p} {p:?}").contains("hunter2"));
        let e = E::BadResponse("garbage".into());
        assert_eq!(port_error(&e, false).class, class::SERVER);
        assert_eq!(
            port_error(&E::TimedOut, true).kind,
            PortErrorKind::Ambiguous
        );
    }

    #[test]
    fn deterministic_create_and_load_failures_are_rejected_never_transport() {
        // Tier: unit. A bad type, a bad engine, a syntax error, an unknown column or data that
        // does not parse fails the same way every time: rejected, for mutations and reads.
        for (code, want) in [
            (50, class::QUERY_INVALID),  // UNKNOWN_TYPE: `CREATE … (c Foo)`
            (56, class::QUERY_INVALID),  // UNKNOWN_STORAGE: `ENGINE = NoSuchMergeTree`
            (42, class::QUERY_INVALID),  // CollapsingMergeTree without (sign)
            (62, class::QUERY_INVALID),  // SYNTAX_ERROR
            (16, class::QUERY_INVALID),  // NO_SUCH_COLUMN_IN_TABLE
            (47, class::QUERY_INVALID),  // UNKNOWN_IDENTIFIER
            (44, class::QUERY_INVALID),  // ILLEGAL_COLUMN (e.g. a Nullable sorting key)
            (115, class::QUERY_INVALID), // UNKNOWN_SETTING
            (33, class::DATA_INVALID),   // CANNOT_READ_ALL_DATA: short RowBinary
            (117, class::DATA_INVALID),  // INCORRECT_DATA
            (349, class::DATA_INVALID),  // NULL into a non-nullable column
            (497, class::ACCESS),
            (81, class::UNKNOWN_TABLE),
            (57, class::TABLE_EXISTS),
            (49, class::SERVER), // LOGICAL_ERROR: unclassified fails closed
            (2999, class::SERVER),
        ] {
            for mutation in [true, false] {
                let p = port_error(&server(code), mutation);
                assert_eq!(
                    (p.kind, p.class),
                    (PortErrorKind::Rejected, want),
                    "code {code}"
                );
            }
        }
    }

    #[test]
    fn transient_server_states_stay_retryable_and_ambiguous_for_mutations() {
        // Tier: unit.
        for (code, want) in [
            (159, class::SERVER_TIMEOUT),
            (209, class::SERVER_TIMEOUT),
            (202, class::SERVER_UNAVAILABLE),
            (241, class::SERVER_UNAVAILABLE),
            (252, class::SERVER_UNAVAILABLE),
            (319, class::SERVER_UNAVAILABLE),
            (394, class::SERVER_UNAVAILABLE),
            (999, class::SERVER_UNAVAILABLE),
        ] {
            let p = port_error(&server(code), true);
            assert_eq!(
                (p.kind, p.class),
                (PortErrorKind::Ambiguous, want),
                "{code}"
            );
            let p = port_error(&server(code), false);
            assert_eq!(
                (p.kind, p.class),
                (PortErrorKind::Unavailable, want),
                "{code}"
            );
        }
    }

    #[test]
    fn the_code_tables_are_disjoint_and_sorted() {
        // Tier: unit. One code, one class.
        for table in [QUERY_INVALID_CODES, DATA_INVALID_CODES, TRANSIENT_CODES] {
            assert!(table.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        }
        for c in QUERY_INVALID_CODES {
            assert!(
                !DATA_INVALID_CODES.contains(c) && !TRANSIENT_CODES.contains(c),
                "{c}"
            );
        }
        for c in DATA_INVALID_CODES {
            assert!(!TRANSIENT_CODES.contains(c), "{c}");
        }
        for c in [57, 60, 81, 159, 209, 164, 192, 193, 194, 195, 291, 497, 516] {
            assert!(
                !QUERY_INVALID_CODES.contains(&c)
                    && !DATA_INVALID_CODES.contains(&c)
                    && !TRANSIENT_CODES.contains(&c),
                "{c}"
            );
        }
    }

    #[test]
    fn a_response_that_does_not_decode_is_rejected_not_retryable() {
        // Tier: unit. E.g. a `Nullable(String)` column read into a `String` row: the same
        // query decodes the same way next time, so it must stop, never loop on exit 75.
        for e in [
            E::NotEnoughData,
            E::Custom("secret".into()),
            E::InvalidTagEncoding(7),
            E::SchemaMismatch("secret".into()),
            E::RowNotFound,
        ] {
            for mutation in [true, false] {
                let p = port_error(&e, mutation);
                assert_eq!((p.kind, p.class), (PortErrorKind::Rejected, class::DECODE));
                assert!(!format!("{p:?}").contains("secret"));
            }
        }
        // A broken connection stays transport.
        let net = E::Network("reset".into());
        assert_eq!(port_error(&net, false).kind, PortErrorKind::Unavailable);
        assert_eq!(port_error(&net, true).kind, PortErrorKind::Ambiguous);
    }

    #[test]
    fn a_certificate_that_does_not_verify_is_rejected_other_tls_failures_are_transport() {
        // Tier: unit. The rustls error arrives wrapped in an `io::Error` (the connector's) inside
        // the client's error chain.
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("connect")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = |t: rustls::Error| {
            E::Network(Box::new(Wrapper(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                t,
            ))))
        };
        let bad_cert = wrapped(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        for mutation in [true, false] {
            let p = port_error(&bad_cert, mutation);
            assert_eq!(
                (p.kind, p.class),
                (PortErrorKind::Rejected, class::TLS_CERTIFICATE)
            );
        }
        let alert = wrapped(rustls::Error::AlertReceived(
            rustls::AlertDescription::HandshakeFailure,
        ));
        let p = port_error(&alert, true);
        assert_eq!((p.kind, p.class), (PortErrorKind::Ambiguous, class::TLS));
        let p = port_error(&alert, false);
        assert_eq!((p.kind, p.class), (PortErrorKind::Unavailable, class::TLS));
    }
}
