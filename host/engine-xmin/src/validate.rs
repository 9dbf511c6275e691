//! Validation of an envelope before any target mutation: identities, scope, checkpoints,
//! receipts, and a full re-read of every artifact (sha256, size, framing, completeness, null
//! keys, row counts). Duplicate keys are checked where the keys are indexed anyway: in the
//! target's transaction-local staging, before business DML.

use crate::artifact::{ArtifactStore, io_error};
use crate::copy_binary::{FrameChecker, FrameError};
use crate::envelope::{ARTIFACT_FORMAT, ENVELOPE_SCHEMA, PayloadReceipt, SnapshotEnvelope};
use crate::error::{ErrorCode, Result, XminError};
use crate::identity::RouteIdentity;
use dpone_policy_model::guard::{Checkpoint, LoadKind};
use sha2::{Digest, Sha256};
use std::io::Read;

fn invalid(m: &str) -> XminError {
    XminError::new(ErrorCode::EnvelopeInvalid, m.to_owned())
}

/// Checks an envelope against the route and the checkpoint it was extracted from, then re-reads
/// its artifacts.
pub fn validate_envelope(
    env: &SnapshotEnvelope,
    identity: &RouteIdentity,
    key_columns: usize,
    business_columns: usize,
    previous: Option<Checkpoint>,
    max_replay_amplification_xids: Option<u64>,
    store: &dyn ArtifactStore,
) -> Result<()> {
    if env.schema != ENVELOPE_SCHEMA {
        return Err(invalid("unknown envelope schema"));
    }
    if env.state_key != identity.state_key {
        return Err(invalid("envelope belongs to another state key"));
    }
    if env.scope_hash != identity.scope_hash {
        return Err(XminError::new(
            ErrorCode::SnapshotScopeMismatch,
            "envelope was extracted for another scope",
        ));
    }
    if env.source_authority_digest != identity.source_authority_digest {
        return Err(invalid(
            "envelope was verified against another source authority",
        ));
    }
    if env.columns.len() != key_columns + business_columns
        || usize::from(env.key_columns) != key_columns
    {
        return Err(invalid("envelope columns do not match the route"));
    }
    check_horizons(env.previous_xmin, env.safe_checkpoint, env.visible_horizon)?;
    if env.replay_amplification_xids != env.visible_horizon - env.safe_checkpoint {
        return Err(invalid("snapshot horizons are inconsistent"));
    }
    if let Some(limit) = max_replay_amplification_xids
        && env.replay_amplification_xids > limit
    {
        return Err(XminError::new(
            ErrorCode::SourceReplayAmplificationExceeded,
            format!(
                "replay amplification {} XIDs exceeds the configured {limit}",
                env.replay_amplification_xids
            ),
        ));
    }
    match (env.load, previous) {
        (LoadKind::Incremental, None) => {
            return Err(invalid("incremental envelope without a checkpoint"));
        }
        (LoadKind::Incremental, Some(p)) => {
            if env.previous_xmin != Some(p.xmin) {
                return Err(invalid("envelope delta starts at another checkpoint"));
            }
            if env.keys.is_none() {
                return Err(invalid("incremental envelope lacks its key payload"));
            }
        }
        (LoadKind::FullBaseline, _) => {
            if env.previous_xmin.is_some() || env.keys.is_some() {
                return Err(invalid(
                    "baseline envelope carries a delta checkpoint or a key payload",
                ));
            }
        }
    }
    if let Some(p) = previous
        && env.safe_checkpoint < p.xmin
    {
        return Err(XminError::new(
            ErrorCode::SourceCheckpointRegression,
            "the snapshot's safe XMin is below the stored checkpoint",
        ));
    }
    if !env.complete {
        return Err(XminError::new(
            ErrorCode::ArtifactIncomplete,
            "envelope is not complete",
        ));
    }
    let fields =
        u16::try_from(key_columns + business_columns).map_err(|_| invalid("too many columns"))?;
    let keys = u16::try_from(key_columns).map_err(|_| invalid("too many key columns"))?;
    verify_payload(&env.rows, fields, keys, store)?;
    if let Some(k) = &env.keys {
        verify_payload(k, keys, keys, store)?;
    }
    if env.key_payload().rows != env.key_count {
        return Err(XminError::new(
            ErrorCode::SnapshotCountMismatch,
            "key count differs from the key payload",
        ));
    }
    if env.load == LoadKind::Incremental && env.rows.rows > env.key_count {
        return Err(XminError::new(
            ErrorCode::SnapshotCountMismatch,
            "delta holds more rows than the complete key snapshot",
        ));
    }
    Ok(())
}

/// Fail-closed checks of a snapshot's horizons against the checkpoint the delta starts from:
/// `U <= H`; no XID epoch change within the snapshot or since the checkpoint; no regression
/// (`previous <= U`); and `H - previous < 2^31`, beyond which a row's 32-bit `xmin` can no
/// longer be placed exactly (freeze uncertainty).
pub fn check_horizons(previous: Option<u64>, u: u64, h: u64) -> Result<()> {
    if u > h {
        return Err(XminError::new(
            ErrorCode::SourceExtractionFailed,
            "snapshot xmin above xmax",
        ));
    }
    if u >> 32 != h >> 32 {
        return Err(XminError::new(
            ErrorCode::SourceXidEpochChanged,
            "the XID epoch changes within the snapshot",
        ));
    }
    if let Some(p) = previous {
        if p > u {
            return Err(XminError::new(
                ErrorCode::SourceCheckpointRegression,
                "the snapshot's safe XMin is below the stored checkpoint (restore or failover?)",
            ));
        }
        if p >> 32 != h >> 32 {
            return Err(XminError::new(
                ErrorCode::SourceXidEpochChanged,
                "the XID epoch changed since the checkpoint; a repair baseline is required",
            ));
        }
        if h - p >= 1 << 31 {
            return Err(XminError::new(
                ErrorCode::SourceFreezeUncertain,
                "the checkpoint is 2^31 or more XIDs old; row xmin can no longer be placed exactly",
            ));
        }
    }
    Ok(())
}

/// Re-reads one artifact: digest, size, framing, trailer, null keys, row count.
pub fn verify_payload(
    p: &PayloadReceipt,
    fields: u16,
    key_fields: u16,
    store: &dyn ArtifactStore,
) -> Result<()> {
    if p.format != ARTIFACT_FORMAT || p.fields != fields {
        return Err(XminError::new(
            ErrorCode::ArtifactMalformed,
            "payload format or field count differs from the route",
        ));
    }
    if !p.complete {
        return Err(XminError::new(
            ErrorCode::ArtifactIncomplete,
            "payload was not completely extracted",
        ));
    }
    let mut reader = store
        .open(&p.artifact.sha256)
        .map_err(|e| io_error("open artifact", &e))?;
    let mut checker = FrameChecker::new(fields, key_fields);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut frame_error = None;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| io_error("read artifact", &e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if frame_error.is_none()
            && let Err(e) = checker.push(&buf[..n])
        {
            frame_error = Some(e);
        }
    }
    let digest = hex::encode(hasher.finalize());
    if digest != p.artifact.sha256 || checker.bytes() != p.artifact.bytes {
        return Err(XminError::new(
            ErrorCode::ArtifactChecksumMismatch,
            "artifact bytes do not match their receipt",
        ));
    }
    if let Some(e) = frame_error {
        return Err(frame_error_to_xmin(e));
    }
    if !checker.complete() {
        return Err(XminError::new(
            ErrorCode::ArtifactIncomplete,
            "artifact lacks its trailer",
        ));
    }
    if checker.rows() != p.rows {
        return Err(XminError::new(
            ErrorCode::SnapshotCountMismatch,
            "artifact row count differs from its receipt",
        ));
    }
    Ok(())
}

/// Maps a framing error to its stable code.
pub fn frame_error_to_xmin(e: FrameError) -> XminError {
    match e {
        FrameError::NullKey => XminError::new(
            ErrorCode::SnapshotNullKey,
            "a key column is null in the snapshot",
        ),
        FrameError::Malformed | FrameError::FieldCount | FrameError::TrailingBytes => {
            XminError::new(
                ErrorCode::ArtifactMalformed,
                format!("artifact is not well-formed binary COPY ({e:?})"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horizons_fail_closed() {
        let e = |p, u, h| check_horizons(p, u, h).map_err(|e| e.code());
        assert_eq!(e(None, 10, 20), Ok(()));
        assert_eq!(e(Some(5), 10, 20), Ok(()));
        assert_eq!(e(Some(10), 10, 10), Ok(()));
        assert_eq!(e(None, 21, 20), Err(ErrorCode::SourceExtractionFailed));
        assert_eq!(
            e(Some(11), 10, 20),
            Err(ErrorCode::SourceCheckpointRegression)
        );
        let epoch = 1u64 << 32;
        assert_eq!(
            e(None, epoch - 1, epoch + 1),
            Err(ErrorCode::SourceXidEpochChanged)
        );
        assert_eq!(
            e(Some(epoch - 5), epoch + 1, epoch + 2),
            Err(ErrorCode::SourceXidEpochChanged)
        );
        let base = 3 * epoch;
        assert_eq!(
            e(Some(base), base + (1 << 31) - 1, base + (1 << 31) - 1),
            Ok(())
        );
        assert_eq!(
            e(Some(base), base + (1 << 31), base + (1 << 31)),
            Err(ErrorCode::SourceFreezeUncertain)
        );
    }
}
