//! Which TDS servers the SQL Server target accepts, as a pure classification of the answers to
//! [`crate::sql::SERVER_FACTS`].
//!
//! Speaking TDS is not enough: Babelfish for PostgreSQL (Aurora or self-hosted) accepts the
//! connection and most statements but differs exactly where this route's correctness lives — it
//! mis-decodes bulk-loaded `decimal` values, its `SERIALIZABLE` is PostgreSQL's snapshot
//! isolation (the run transaction would not see rows staged after its first statement), and
//! several catalog views and `CONVERT` styles answer differently. Such a server is refused
//! before any staging or write with [`SERVER_NOT_SQL_SERVER`]; the supported route onto that
//! cluster is the PostgreSQL target.
//!
//! The minimum version follows from the T-SQL the adapter sends (see [`MIN_MAJOR_VERSION`]).
//! Editions without cross-database three-part names (Azure SQL Database, Synapse) cannot hold
//! target, staging and state in one transaction and are refused with
//! [`SERVER_EDITION_UNSUPPORTED`]. Nothing here does I/O.

use crate::pins::PinError;

/// A TDS server that is not Microsoft SQL Server (Babelfish or another emulation).
pub const SERVER_NOT_SQL_SERVER: &str = "mssql_transaction.server_not_sql_server";
/// A SQL Server older than [`MIN_MAJOR_VERSION`], or one whose version cannot be read.
pub const SERVER_VERSION_UNSUPPORTED: &str = "mssql_transaction.server_version_unsupported";
/// An engine edition without cross-database transactions over three-part names.
pub const SERVER_EDITION_UNSUPPORTED: &str = "mssql_transaction.server_edition_unsupported";

/// SQL Server 2016 (13.x): the oldest release with every feature the statements use —
/// `DROP TABLE IF EXISTS` (staging cleanup, `#dpone_missing`), `DATEDIFF_BIG` (the detection
/// timestamp) and `ISJSON` (the state script's check constraints); the rest (`THROW`,
/// `OUTPUT ... INTO`, filtered unique indexes, `datetime2`, `sp_getapplock` owned by the
/// transaction, `_100_BIN2` collations) is older.
pub const MIN_MAJOR_VERSION: u32 = 13;

/// Answers of [`crate::sql::SERVER_FACTS`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerFacts {
    /// `SERVERPROPERTY('Babelfish')`: NULL on SQL Server, `1` on Babelfish.
    pub babelfish: Option<String>,
    /// `@@VERSION`.
    pub version_text: Option<String>,
    /// `SERVERPROPERTY('ProductVersion')`, e.g. `16.0.4135.4`.
    pub product_version: Option<String>,
    /// `SERVERPROPERTY('EngineEdition')`.
    pub engine_edition: Option<i32>,
}

/// The accepted kind of server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerClass {
    /// SQL Server (Personal, Standard, Enterprise or Express edition) of an accepted version.
    SqlServer {
        /// Major version (13 = 2016, 14 = 2017, 15 = 2019, 16 = 2022, 17 = 2025).
        major: u32,
    },
    /// Azure SQL Managed Instance: an evergreen engine (it reports 12.0.2000.8 whatever its
    /// features), with cross-database transactions within the instance.
    ManagedInstance,
}

fn refuse(code: &str, message: String) -> PinError {
    PinError {
        code: code.to_owned(),
        message,
    }
}

fn major(version: &str) -> Option<u32> {
    version.split('.').next()?.trim().parse().ok()
}

/// Classifies a server from its answers; refuses anything but a supported SQL Server.
pub fn classify(facts: &ServerFacts) -> Result<ServerClass, PinError> {
    let babelfish_property = facts
        .babelfish
        .as_deref()
        .is_some_and(|v| !v.trim().is_empty() && v.trim() != "0");
    let version_text = facts.version_text.as_deref().unwrap_or_default();
    let babelfish_banner = version_text.to_ascii_lowercase().contains("babelfish");
    let microsoft_banner = version_text.starts_with("Microsoft SQL Server")
        || version_text.starts_with("Microsoft SQL Azure");
    if babelfish_property || babelfish_banner || !microsoft_banner {
        return Err(refuse(
            SERVER_NOT_SQL_SERVER,
            format!(
                "the server speaks TDS but is not Microsoft SQL Server{}; its bulk load, \
                 SERIALIZABLE isolation and catalog differ where this route's correctness lives. \
                 Use the PostgreSQL target (target.type: postgres) on the same cluster instead",
                if babelfish_property || babelfish_banner {
                    " (Babelfish for PostgreSQL)"
                } else {
                    ""
                }
            ),
        ));
    }
    match facts.engine_edition {
        Some(1..=4) => {}
        Some(8) => return Ok(ServerClass::ManagedInstance),
        Some(e) => {
            return Err(refuse(
                SERVER_EDITION_UNSUPPORTED,
                format!(
                    "engine edition {e} is not supported: target, staging and state must share \
                     one SQL Server instance (2016 or later) or an Azure SQL Managed Instance"
                ),
            ));
        }
        None => {
            return Err(refuse(
                SERVER_EDITION_UNSUPPORTED,
                "the server did not report its engine edition".to_owned(),
            ));
        }
    }
    match facts.product_version.as_deref().and_then(major) {
        Some(m) if m >= MIN_MAJOR_VERSION => Ok(ServerClass::SqlServer { major: m }),
        Some(m) => Err(refuse(
            SERVER_VERSION_UNSUPPORTED,
            format!(
                "SQL Server major version {m} is older than the minimum {MIN_MAJOR_VERSION} \
                 (SQL Server 2016): the adapter's statements need DROP TABLE IF EXISTS, \
                 DATEDIFF_BIG and ISJSON"
            ),
        )),
        None => Err(refuse(
            SERVER_VERSION_UNSUPPORTED,
            "the server did not report a readable product version".to_owned(),
        )),
    }
}
