//! Database pins: pure verification of captured catalog rows against the closed
//! `database_authorities` map of a connection.
//!
//! The caller runs [`crate::sql::METADATA_PERMISSION`], then [`crate::sql::CATALOG_ROWS`] for each
//! pinned database (target, staging, then state), then [`crate::sql::SESSION_IDENTITY`] on the
//! target and state sessions, and hands the rows here. Nothing in this module does I/O, so every
//! outcome is unit-tested on captured rows.

use dpone_engine_xmin::registry::{MssqlPin, mssql_pin_digest};
use std::collections::BTreeMap;
use std::fmt;

/// One pinned database: exactly three fields (the registry's type).
pub use dpone_engine_xmin::registry::MssqlDatabaseAuthority as DatabaseAuthority;

/// The closed map, keyed by canonical (exact) database name.
pub type DatabaseAuthorities = BTreeMap<String, DatabaseAuthority>;

/// Which database a pin serves (the registry's type).
pub use dpone_engine_xmin::registry::MssqlRole as Role;

/// One row of [`crate::sql::CATALOG_ROWS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogRow {
    /// `name`, exact spelling.
    pub name: String,
    /// `database_id`.
    pub database_id: i32,
    /// `create_token`.
    pub create_token: String,
    /// `database_guid` (absent when the recovery-status row is not visible).
    pub database_guid: Option<String>,
    /// `state_desc`.
    pub state_desc: String,
    /// `user_access_desc`.
    pub user_access_desc: String,
    /// `HAS_DBACCESS(name)`; `None` when SQL Server returned NULL.
    pub has_dbaccess: Option<i32>,
}

/// One row of [`crate::sql::SESSION_IDENTITY`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionIdentity {
    /// `@@SERVERNAME`.
    pub server_name: String,
    /// `SERVERPROPERTY('MachineName')`.
    pub machine_name: String,
    /// `SERVERPROPERTY('InstanceName')` (NULL for the default instance).
    pub instance_name: Option<String>,
    /// `SERVERPROPERTY('ProductVersion')`.
    pub product_version: String,
    /// `SUSER_SNAME()`.
    pub principal_name: String,
    /// `SUSER_SID()` as `0x...`.
    pub principal_sid: String,
}

/// A pin failure with a stable code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinError {
    /// `mssql_transaction.<role>_<reason>` or `mssql_transaction.<reason>`.
    pub code: String,
    /// Human message (database names only; never credentials or row values).
    pub message: String,
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for PinError {}

/// Days from 0001-01-01 (the `date`/`datetime2` epoch of TDS) to 1970-01-01.
const DAYS_0001_TO_1970: i64 = 719_162;

/// Proleptic Gregorian civil date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The canonical create token of a database: its `create_date` read as a typed `datetime2`
/// (days since 0001-01-01, time of day in `10^-scale` s increments) formatted as
/// `YYYY-MM-DDTHH:MM:SS.fffffff` — always 27 characters, the only form the registry accepts,
/// including for a database created on a whole second (`.0000000`). `None` for a value outside
/// `datetime2(0..=7)`.
pub fn create_token(days: u32, increments: u64, scale: u8) -> Option<String> {
    if scale > 7 {
        return None;
    }
    let ticks = increments.checked_mul(10u64.pow(u32::from(7 - scale)))?;
    if ticks >= 86_400 * 10_000_000 {
        return None;
    }
    let (y, m, d) = civil_from_days(i64::from(days) - DAYS_0001_TO_1970);
    if !(1..=9999).contains(&y) {
        return None;
    }
    let secs = ticks / 10_000_000;
    let frac = ticks % 10_000_000;
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:07}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    ))
}

/// A SID read as `varbinary`, as `0x` and upper-case hex (compared between sessions only).
pub fn sid_hex(sid: &[u8]) -> String {
    format!("0x{}", hex::encode_upper(sid))
}

fn err(role: Role, reason: &str, message: String) -> PinError {
    PinError {
        code: format!("mssql_transaction.{}_{reason}", role.name()),
        message,
    }
}

/// Resolves a route's database name to the canonical key: the exact key, else the single key
/// equal up to ASCII case. Anything else (no key, or two keys folding together) is rejected.
pub fn resolve_alias(
    role: Role,
    authorities: &DatabaseAuthorities,
    requested: &str,
) -> Result<String, PinError> {
    if authorities.contains_key(requested) {
        return Ok(requested.to_owned());
    }
    let matches: Vec<&String> = authorities
        .keys()
        .filter(|k| k.eq_ignore_ascii_case(requested))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(err(
            role,
            "database_pin_missing",
            format!("no database_authorities entry for {requested:?}"),
        )),
        _ => Err(err(
            role,
            "database_alias_ambiguous",
            format!("{requested:?} folds to more than one pinned database"),
        )),
    }
}

/// Step one: `HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW ANY DATABASE')` must be exactly 1.
pub fn check_metadata_permission(role: Role, has_perms: Option<i32>) -> Result<(), PinError> {
    if has_perms == Some(1) {
        Ok(())
    } else {
        Err(err(
            role,
            "database_metadata_permission_denied",
            "VIEW ANY DATABASE is denied or invisible; the pin cannot be verified".into(),
        ))
    }
}

fn fold(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// Verifies one pinned database against its catalog rows (all rows whose name folds to the
/// canonical name). Requires exactly one row with the exact spelling, no casefold decoy, the
/// pinned id, create token and GUID, and ONLINE, MULTI_USER, HAS_DBACCESS = 1.
pub fn verify_database(
    role: Role,
    canonical: &str,
    pin: &DatabaseAuthority,
    rows: &[CatalogRow],
) -> Result<(), PinError> {
    let exact: Vec<&CatalogRow> = rows.iter().filter(|r| r.name == canonical).collect();
    let decoys: Vec<&CatalogRow> = rows
        .iter()
        .filter(|r| r.name != canonical && fold(&r.name) == fold(canonical))
        .collect();
    if !decoys.is_empty() {
        return Err(err(
            role,
            "database_casefold_decoy",
            format!(
                "{} database(s) fold to {canonical:?} with another spelling",
                decoys.len()
            ),
        ));
    }
    let row = match exact.as_slice() {
        [one] => *one,
        [] => {
            return Err(err(
                role,
                "database_not_found",
                format!("no database spelled exactly {canonical:?} is visible"),
            ));
        }
        _ => {
            return Err(err(
                role,
                "database_not_found",
                format!("more than one catalog row for {canonical:?}"),
            ));
        }
    };
    if row.database_id != pin.database_id {
        return Err(err(
            role,
            "database_pin_mismatch",
            format!(
                "{canonical:?}: database_id {} differs from pin {}",
                row.database_id, pin.database_id
            ),
        ));
    }
    if row.create_token != pin.create_token {
        return Err(err(
            role,
            "database_pin_mismatch",
            format!("{canonical:?}: create token differs from pin (database recreated?)"),
        ));
    }
    let guid_ok = row
        .database_guid
        .as_deref()
        .is_some_and(|g| g.eq_ignore_ascii_case(&pin.database_guid));
    if !guid_ok {
        return Err(err(
            role,
            "database_pin_mismatch",
            format!("{canonical:?}: database_guid differs from pin (database recreated?)"),
        ));
    }
    if row.state_desc != "ONLINE" {
        return Err(err(
            role,
            "database_not_online",
            format!("{canonical:?} is {}", row.state_desc),
        ));
    }
    if row.user_access_desc != "MULTI_USER" {
        return Err(err(
            role,
            "database_not_multi_user",
            format!("{canonical:?} is {}", row.user_access_desc),
        ));
    }
    if row.has_dbaccess != Some(1) {
        return Err(err(
            role,
            "database_access_denied",
            format!("HAS_DBACCESS({canonical:?}) is not 1"),
        ));
    }
    Ok(())
}

/// Target and state sessions must share topology (server, machine, instance, version) and
/// effective principal (name and SID).
pub fn verify_same_topology(
    target: &SessionIdentity,
    state: &SessionIdentity,
) -> Result<(), PinError> {
    let topo = |s: &SessionIdentity| {
        (
            s.server_name.clone(),
            s.machine_name.clone(),
            s.instance_name.clone(),
            s.product_version.clone(),
        )
    };
    if topo(target) != topo(state) {
        return Err(PinError {
            code: "mssql_transaction.state_topology_mismatch".into(),
            message: "target and state sessions reach different SQL Server instances".into(),
        });
    }
    if target.principal_name != state.principal_name || target.principal_sid != state.principal_sid
    {
        return Err(PinError {
            code: "mssql_transaction.state_principal_mismatch".into(),
            message: "target and state sessions run as different principals".into(),
        });
    }
    Ok(())
}

/// The staging lease session must reach the same instance as the target session and run as the
/// same principal (it uses the target connection's credential); checked when the lease opens.
pub fn verify_lease_identity(
    target: &SessionIdentity,
    lease: &SessionIdentity,
) -> Result<(), PinError> {
    verify_same_topology(target, lease).map_err(|e| PinError {
        code: e
            .code
            .replace("mssql_transaction.state_", "mssql_transaction.staging_"),
        message: e.message.replace("state session", "staging lease session"),
    })
}

/// The staging lease's own session view (`DB_ID()`, `DB_NAME()`) must be the pinned staging
/// database; checked before and after every staging action.
pub fn verify_lease(
    canonical: &str,
    pin: &DatabaseAuthority,
    db_id: i32,
    db_name: &str,
) -> Result<(), PinError> {
    if db_id == pin.database_id && db_name == canonical {
        Ok(())
    } else {
        Err(err(
            Role::Staging,
            "lease_lost",
            format!("staging session is no longer in {canonical:?}"),
        ))
    }
}

/// Captured catalog evidence of one role.
#[derive(Clone, Debug)]
pub struct RoleCapture<'a> {
    /// Role.
    pub role: Role,
    /// Database name as the route spells it (may be a case-only alias).
    pub requested: &'a str,
    /// The connection's closed map.
    pub authorities: &'a DatabaseAuthorities,
    /// `HAS_PERMS_BY_NAME` result of the session.
    pub has_perms: Option<i32>,
    /// Catalog rows folding to the requested name.
    pub rows: &'a [CatalogRow],
}

/// Verifies target, staging (if any), then state, then topology; returns the role-aware pin
/// digest that enters invocation and receipt identity.
pub fn verify_route(
    roles: &[RoleCapture<'_>],
    target_session: &SessionIdentity,
    state_session: &SessionIdentity,
) -> Result<String, PinError> {
    let mut ordered: Vec<&RoleCapture<'_>> = roles.iter().collect();
    ordered.sort_by_key(|r| r.role);
    let mut resolved = Vec::new();
    for c in ordered {
        check_metadata_permission(c.role, c.has_perms)?;
        let canonical = resolve_alias(c.role, c.authorities, c.requested)?;
        let pin = &c.authorities[&canonical];
        verify_database(c.role, &canonical, pin, c.rows)?;
        resolved.push((c.role, canonical, pin.clone()));
    }
    verify_same_topology(target_session, state_session)?;
    Ok(pin_digest(&resolved))
}

/// The role-aware digest (the registry's [`dpone_engine_xmin::registry::mssql_pin_digest`]).
pub fn pin_digest(pins: &[(Role, String, DatabaseAuthority)]) -> String {
    let pins: Vec<MssqlPin> = pins
        .iter()
        .map(|(role, name, authority)| MssqlPin {
            role: *role,
            name: name.clone(),
            authority: authority.clone(),
        })
        .collect();
    mssql_pin_digest(&pins)
}
