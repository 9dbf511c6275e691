//! The run transaction and the staging lease on tiberius sessions.
//!
//! [`RunTransaction`] frames one connection as the finalizer needs it (`SET XACT_ABORT ON`,
//! `SERIALIZABLE`, the session table for `M`), begins the transaction and takes the
//! transaction-owned application lock after staging, reads the single detection timestamp, and
//! executes the set-based steps with exact counts from `OUTPUT`. [`StagingLease`] is the separate session whose current database is the
//! signed staging database; every staging action is checked before and after.
//!
//! These are the building blocks of the engine's `TargetSession` ([`crate::target`]).

use crate::conn::{self, ConnError, MssqlClient};
use crate::pins::{self, DatabaseAuthority, PinError};
use crate::sql::{self, Finalizer};
use dpone_engine_xmin::ports::{ApplyStep, Parity, Populations};
use dpone_engine_xmin::{ErrorCode, XminError};

/// Maps a connection error to the engine's codes: SQL Server 1205 (deadlock victim) and 3960
/// (snapshot update conflict) are retryable serialization conflicts.
pub fn to_xmin(e: &ConnError) -> XminError {
    match e {
        ConnError::Server {
            number: 1205 | 3960,
            step,
        } => XminError::new(
            ErrorCode::TargetSerializationConflict,
            format!("{step}: serialization conflict; retry"),
        ),
        ConnError::Config | ConnError::Io(_) => {
            XminError::new(ErrorCode::TargetConnect, e.to_string())
        }
        _ => XminError::new(ErrorCode::TargetStatementFailed, e.to_string()),
    }
}

/// SQL Server errors that mean a session lost its database: killed (596), the database dropped
/// (911), set single-user (924), offline (942), inaccessible (945), in transition (952), not
/// openable for the login (4060), or the server shutting down (6005).
pub const LEASE_EVICTION_ERRORS: &[u32] = &[596, 911, 924, 942, 945, 952, 4060, 6005];

/// A failure caused by the staged payload itself: a duplicate key (2627 primary key, 2601
/// unique index) or a null key (515), whichever session reported it.
pub fn staged_payload_error(e: &ConnError) -> Option<XminError> {
    match e {
        ConnError::Server {
            number: 2627 | 2601,
            ..
        } => Some(XminError::new(
            ErrorCode::SnapshotDuplicateKey,
            "a key occurs twice in the staged payload",
        )),
        ConnError::Server { number: 515, .. } => Some(XminError::new(
            ErrorCode::SnapshotNullKey,
            "a key column is null in the staged payload",
        )),
        _ => None,
    }
}

/// A failure on the staging lease (its checks, its DDL and the staging load): the payload's own
/// faults keep their snapshot codes; an evicted or lost session is
/// `DPONE_XMIN_TARGET_STAGING_AUTHORITY_LOST` (the staging authority is gone, never transferred
/// to whatever the session reaches next); anything else is a statement failure.
pub fn lease_error(e: &ConnError) -> XminError {
    if let Some(x) = staged_payload_error(e) {
        return x;
    }
    match e {
        ConnError::Io(_) => XminError::new(
            ErrorCode::TargetStagingAuthorityLost,
            format!("mssql_transaction.staging_lease_lost: {e} (staging session lost)"),
        ),
        ConnError::Server { number, .. } if LEASE_EVICTION_ERRORS.contains(number) => {
            XminError::new(
                ErrorCode::TargetStagingAuthorityLost,
                format!("mssql_transaction.staging_lease_lost: {e} (staging session evicted)"),
            )
        }
        other => to_xmin(other),
    }
}

/// Formats UTC microseconds since the epoch as ISO 8601 (`YYYY-MM-DDTHH:MM:SS.ffffff`), which
/// SQL Server converts to `datetime2` independently of language and date-format settings.
pub fn iso_utc(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// One connection inside the SERIALIZABLE run transaction.
pub struct RunTransaction {
    client: MssqlClient,
    fin: Finalizer,
    /// `BEGIN TRANSACTION` sent (by [`RunTransaction::lock_target`], after staging).
    started: bool,
}

async fn single_i64(
    client: &mut MssqlClient,
    step: &'static str,
    statement: &str,
    params: &[&dyn tiberius::ToSql],
) -> Result<Vec<i64>, ConnError> {
    let rows = conn::last_result(client, step, statement, params).await?;
    let row = rows.first().ok_or(ConnError::Shape(step))?;
    (0..row.len())
        .map(|i| {
            row.try_get::<i64, _>(i)
                .ok()
                .flatten()
                .ok_or(ConnError::Shape(step))
        })
        .collect()
}

fn count(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl RunTransaction {
    /// Frames the session (each framing statement a plain batch). `BEGIN TRANSACTION` waits for
    /// [`RunTransaction::lock_target`]: staging (on the lease) and its counts come first, so the
    /// transaction and its application lock span the apply only.
    pub async fn begin(mut client: MssqlClient, fin: Finalizer) -> Result<Self, ConnError> {
        for (step, s) in [
            ("set_xact_abort", sql::SET_XACT_ABORT.to_owned()),
            ("set_serializable", sql::SET_SERIALIZABLE.to_owned()),
            ("missing_table", fin.missing_table_ddl()),
        ] {
            conn::execute(&mut client, step, &s).await?;
        }
        Ok(Self {
            client,
            fin,
            started: false,
        })
    }

    /// Whether `BEGIN TRANSACTION` has been sent.
    pub fn started(&self) -> bool {
        self.started
    }

    async fn start(&mut self) -> Result<(), ConnError> {
        if !self.started {
            conn::execute(&mut self.client, "begin", sql::BEGIN).await?;
            self.started = true;
        }
        Ok(())
    }

    /// Begins the transaction and takes `sp_getapplock`, owned by the transaction, on the hex
    /// target identity.
    pub async fn lock_target(&mut self, target_identity: &[u8; 32]) -> Result<(), ConnError> {
        self.start().await?;
        let resource = format!("dpone.xmin.{}", hex::encode(target_identity));
        let v = single_i64_i32(&mut self.client, "applock", sql::APPLOCK, &[&resource]).await?;
        if v >= 0 {
            Ok(())
        } else {
            Err(ConnError::LockNotGranted(v))
        }
    }

    /// The single detection timestamp, microseconds since the epoch.
    pub async fn detection_time(&mut self) -> Result<i64, ConnError> {
        let v = single_i64(&mut self.client, "detection_time", sql::DETECTION_TIME, &[]).await?;
        v.first().copied().ok_or(ConnError::Shape("detection_time"))
    }

    /// Active, total and missing counts; fixes `M`.
    pub async fn populations(&mut self) -> Result<Populations, ConnError> {
        let s = self.fin.populations();
        let v = single_i64(&mut self.client, "populations", &s, &[]).await?;
        match v.as_slice() {
            [a, t, m] => Ok(Populations {
                active: count(*a),
                total: count(*t),
                missing: count(*m),
            }),
            _ => Err(ConnError::Shape("populations")),
        }
    }

    /// One set-based step; the exact count from `OUTPUT`.
    pub async fn apply(&mut self, step: ApplyStep, at_micros: i64) -> Result<u64, ConnError> {
        let (name, s) = match step {
            ApplyStep::UpdateChanged => ("update_changed", self.fin.update_changed()),
            ApplyStep::Reactivate => ("reactivate", self.fin.reactivate()),
            ApplyStep::Insert => ("insert", self.fin.insert()),
            ApplyStep::Missing => ("missing_action", self.fin.missing_action()),
        };
        let at = iso_utc(at_micros);
        let v = single_i64(&mut self.client, name, &s, &[&at]).await?;
        v.first().copied().map(count).ok_or(ConnError::Shape(name))
    }

    /// Active-key parity after apply.
    pub async fn parity(&mut self) -> Result<Parity, ConnError> {
        let s = self.fin.parity();
        let v = single_i64(&mut self.client, "parity", &s, &[]).await?;
        match v.as_slice() {
            [a, t, d] => Ok(Parity {
                active: count(*a),
                total: count(*t),
                delta_outside_snapshot: count(*d),
            }),
            _ => Err(ConnError::Shape("parity")),
        }
    }

    /// The session, for the state statements of the transaction (reads under the lock, CAS,
    /// receipt, consumption, run row).
    pub fn client_mut(&mut self) -> &mut MssqlClient {
        &mut self.client
    }

    /// The frozen coordinates; the staging table names are fixed when staging starts.
    pub fn finalizer_mut(&mut self) -> &mut Finalizer {
        &mut self.fin
    }

    /// Commits once and returns the connection.
    pub async fn commit(mut self) -> Result<MssqlClient, ConnError> {
        self.start().await?;
        conn::execute(&mut self.client, "commit", sql::COMMIT).await?;
        Ok(self.client)
    }

    /// Rolls back.
    pub async fn rollback(mut self) -> Result<MssqlClient, ConnError> {
        conn::execute(&mut self.client, "rollback", sql::ROLLBACK).await?;
        Ok(self.client)
    }
}

async fn single_i64_i32(
    client: &mut MssqlClient,
    step: &'static str,
    statement: &str,
    params: &[&dyn tiberius::ToSql],
) -> Result<i32, ConnError> {
    let rows = conn::last_result(client, step, statement, params).await?;
    rows.first()
        .and_then(|row| row.try_get::<i32, _>(0).ok().flatten())
        .ok_or(ConnError::Shape(step))
}

/// A staging failure: the lease or the action.
#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    /// The lease check failed (eviction, database substitution): a typed staging-authority
    /// failure, never authority for the new database.
    #[error("{0}")]
    Authority(PinError),
    /// The staging action or the lease query failed.
    #[error("{0}")]
    Conn(ConnError),
}

/// The staging lease: a separate session whose current database is the signed staging
/// database, kept from staging CREATE through load, evidence and cleanup.
pub struct StagingLease {
    client: MssqlClient,
    canonical: String,
    pin: DatabaseAuthority,
}

impl StagingLease {
    /// Takes a session already connected with the staging database as its database and
    /// verifies it against the pin (DBID and name of the session; GUID and create token are
    /// checked on the master catalog by the pre-source verifier).
    pub async fn open(
        client: MssqlClient,
        canonical: &str,
        pin: DatabaseAuthority,
    ) -> Result<Self, StagingError> {
        let mut lease = Self {
            client,
            canonical: canonical.to_owned(),
            pin,
        };
        lease.check().await?;
        Ok(lease)
    }

    /// Checks the lease now.
    pub async fn check(&mut self) -> Result<(), StagingError> {
        let (id, name) = conn::current_database(&mut self.client)
            .await
            .map_err(StagingError::Conn)?;
        pins::verify_lease(&self.canonical, &self.pin, id, &name).map_err(StagingError::Authority)
    }

    /// Runs one staging statement batch between two lease checks.
    pub async fn execute(
        &mut self,
        step: &'static str,
        statement: &str,
    ) -> Result<(), StagingError> {
        self.check().await?;
        conn::execute(&mut self.client, step, statement)
            .await
            .map_err(StagingError::Conn)?;
        self.check().await
    }

    /// The lease session for an action whose error type is not [`ConnError`]; the caller checks
    /// the lease with [`StagingLease::check`] before and after it.
    pub fn client_mut(&mut self) -> &mut MssqlClient {
        &mut self.client
    }

    /// Ends the lease and returns the session.
    pub fn into_client(self) -> MssqlClient {
        self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_utc_formats() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000000");
        assert_eq!(iso_utc(1_767_225_600_000_001), "2026-01-01T00:00:00.000001");
        assert_eq!(iso_utc(951_782_400_000_000), "2000-02-29T00:00:00.000000");
        assert_eq!(iso_utc(-1), "1969-12-31T23:59:59.999999");
        assert_eq!(iso_utc(4_102_444_799_500_000), "2099-12-31T23:59:59.500000");
    }

    #[test]
    fn deadlock_is_a_serialization_conflict() {
        let e = ConnError::Server {
            step: "apply",
            number: 1205,
        };
        assert_eq!(to_xmin(&e).code(), ErrorCode::TargetSerializationConflict);
        let e = ConnError::Server {
            step: "apply",
            number: 2627,
        };
        assert_eq!(to_xmin(&e).code(), ErrorCode::TargetStatementFailed);
    }
}
