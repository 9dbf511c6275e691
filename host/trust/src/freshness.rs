//! Bundle freshness, in the spirit of TUF: a signed validity window and rollback protection.
//!
//! - Every manifest carries `not_before` and `expires_at` (unix seconds, signed with the rest of
//!   the manifest); [`check_window`] refuses a bundle outside its window
//!   (`DPONE_BUNDLE_NOT_YET_VALID`, `DPONE_BUNDLE_EXPIRED`). An attacker who freezes a host on
//!   an old bundle gains nothing once it expires.
//! - Every manifest carries a monotonic `sequence` per bundle name. The host keeps, per (trust
//!   policy digest, bundle name), the highest sequence it activated, the digest of that
//!   manifest and the clock reading of the last activation, in an [`ActivationLedger`] file it
//!   owns. A lower sequence is a rollback (`DPONE_BUNDLE_ROLLBACK`); the same sequence with
//!   another manifest is refused (`DPONE_BUNDLE_SEQUENCE_REUSED`); a clock earlier than the last
//!   activation refuses (`DPONE_BUNDLE_CLOCK_BEHIND`), so winding the clock back cannot revive
//!   an expired bundle on this host.
//! - The caller reads the clock once per activation and passes the same `now` to every check.

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::TrustError;
use crate::manifest::Manifest;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Schema of the ledger file.
pub const LEDGER_SCHEMA: &str = "dpone.bundle-activations.v1";

/// Largest accepted ledger file.
const MAX_LEDGER_BYTES: u64 = 4 << 20;

/// The clock, in unix seconds; read once per activation by the caller.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Refuses a manifest outside its signed validity window at `now`.
pub fn check_window(manifest: &Manifest, now: u64) -> Result<()> {
    if now < manifest.not_before {
        return Err(TrustError::BundleNotYetValid {
            not_before: manifest.not_before,
            now,
        });
    }
    if now >= manifest.expires_at {
        return Err(TrustError::BundleExpired {
            expires_at: manifest.expires_at,
            now,
        });
    }
    Ok(())
}

/// What the host remembers of one (trust policy, bundle name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Highest sequence activated.
    pub sequence: u64,
    /// Digest of the manifest activated at that sequence.
    pub manifest_sha256: Sha256Digest,
    /// Clock reading of the last activation, unix seconds.
    pub activated_at: u64,
}

/// The host's record of activated bundles, keyed by (trust policy digest, bundle name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivationLedger {
    entries: BTreeMap<(String, String), LedgerEntry>,
}

fn unusable(detail: impl Into<String>) -> TrustError {
    TrustError::ActivationStateUnusable {
        detail: detail.into(),
    }
}

impl ActivationLedger {
    /// Reads the ledger at `path`; an absent file is an empty ledger. The file must be a regular
    /// file that group and others cannot write.
    pub fn load(path: &Path) -> Result<Self> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(unusable(format!("cannot read it: {}", e.kind()))),
        };
        if !meta.file_type().is_file() {
            return Err(unusable("it is not a regular file"));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(unusable("it is writable by group or others"));
        }
        if meta.len() > MAX_LEDGER_BYTES {
            return Err(unusable("it is too large"));
        }
        let bytes =
            std::fs::read(path).map_err(|e| unusable(format!("cannot read it: {}", e.kind())))?;
        Self::parse(&bytes)
    }

    fn parse(bytes: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(bytes).map_err(|_| unusable("it is not JSON"))?;
        if value["schema"] != LEDGER_SCHEMA {
            return Err(unusable("it has an unsupported schema"));
        }
        let mut entries = BTreeMap::new();
        for item in value["bundles"]
            .as_array()
            .ok_or_else(|| unusable("`bundles` is not a list"))?
        {
            let text = |k: &str| item[k].as_str().map(str::to_owned);
            let number = |k: &str| item[k].as_u64();
            let (Some(policy), Some(name), Some(sequence), Some(manifest), Some(activated_at)) = (
                text("trust_policy_sha256"),
                text("name"),
                number("sequence"),
                text("manifest_sha256"),
                number("activated_at"),
            ) else {
                return Err(unusable("an entry is incomplete"));
            };
            let manifest_sha256 = Sha256Digest::parse_hex(&manifest)
                .ok_or_else(|| unusable("an entry has a malformed digest"))?;
            entries.insert(
                (policy, name),
                LedgerEntry {
                    sequence,
                    manifest_sha256,
                    activated_at,
                },
            );
        }
        Ok(Self { entries })
    }

    /// The entry of (trust policy, bundle name), if any.
    pub fn entry(&self, trust_policy: &Sha256Digest, name: &str) -> Option<&LedgerEntry> {
        self.entries.get(&(trust_policy.to_hex(), name.to_owned()))
    }

    /// Refuses a bundle that would roll back, reuse a sequence with other content, or that is
    /// activated with a clock earlier than the last activation of its name.
    pub fn check(
        &self,
        trust_policy: &Sha256Digest,
        manifest: &Manifest,
        manifest_sha256: &Sha256Digest,
        now: u64,
    ) -> Result<()> {
        let Some(last) = self.entry(trust_policy, &manifest.name) else {
            return Ok(());
        };
        if now < last.activated_at {
            return Err(TrustError::ClockBehind {
                now,
                last: last.activated_at,
            });
        }
        if manifest.sequence < last.sequence {
            return Err(TrustError::BundleRollback {
                name: manifest.name.clone(),
                sequence: manifest.sequence,
                highest: last.sequence,
            });
        }
        if manifest.sequence == last.sequence && *manifest_sha256 != last.manifest_sha256 {
            return Err(TrustError::BundleSequenceReused {
                name: manifest.name.clone(),
                sequence: manifest.sequence,
            });
        }
        Ok(())
    }

    /// Records an activation that passed [`ActivationLedger::check`] and every other gate.
    pub fn record(
        &mut self,
        trust_policy: &Sha256Digest,
        manifest: &Manifest,
        manifest_sha256: &Sha256Digest,
        now: u64,
    ) {
        self.entries.insert(
            (trust_policy.to_hex(), manifest.name.clone()),
            LedgerEntry {
                sequence: manifest.sequence,
                manifest_sha256: *manifest_sha256,
                activated_at: now,
            },
        );
    }

    fn to_bytes(&self) -> Vec<u8> {
        let bundles: Vec<Value> = self
            .entries
            .iter()
            .map(|((policy, name), e)| {
                json!({
                    "trust_policy_sha256": policy,
                    "name": name,
                    "sequence": e.sequence,
                    "manifest_sha256": e.manifest_sha256.to_hex(),
                    "activated_at": e.activated_at,
                })
            })
            .collect();
        let mut top = Map::new();
        top.insert("schema".into(), Value::String(LEDGER_SCHEMA.into()));
        top.insert("bundles".into(), Value::Array(bundles));
        serde_json::to_vec_pretty(&Value::Object(top)).unwrap_or_default()
    }

    /// Folds `other` in, keeping per key the higher sequence (and, at equal sequences, the later
    /// activation): what concurrent activations wrote is never lowered.
    pub fn merge(&mut self, other: &ActivationLedger) {
        for (key, theirs) in &other.entries {
            let keep_theirs = self.entries.get(key).is_none_or(|ours| {
                (theirs.sequence, theirs.activated_at) > (ours.sequence, ours.activated_at)
            });
            if keep_theirs {
                self.entries.insert(key.clone(), theirs.clone());
            }
        }
    }

    /// Writes the ledger to `path` (mode 0600, its directory created 0700) through a temporary
    /// file and a rename, after merging what is on disk now (see [`ActivationLedger::merge`]),
    /// so that another process's activation since this ledger was loaded is kept.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut merged = self.clone();
        merged.merge(&Self::load(path)?);
        merged.write(path)
    }

    fn write(&self, path: &Path) -> Result<()> {
        let io = |e: std::io::Error| unusable(format!("cannot write it: {}", e.kind()));
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
        if std::fs::metadata(dir).map_err(io)?.permissions().mode() & 0o022 != 0 {
            return Err(unusable("its directory is writable by group or others"));
        }
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|_| unusable("no randomness"))?;
        let temp = dir.join(format!(".bundle-activations.tmp-{}", hex::encode(suffix)));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(io)?;
        let written = file
            .write_all(&self.to_bytes())
            .and_then(|()| file.sync_all());
        drop(file);
        if let Err(e) = written.and_then(|()| std::fs::rename(&temp, path)) {
            let _ = std::fs::remove_file(&temp);
            return Err(io(e));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str, sequence: u64, not_before: u64, expires_at: u64) -> Manifest {
        Manifest {
            name: name.to_owned(),
            version: "1.0.0".to_owned(),
            wit_package: "dpone:policy@0.1.0".to_owned(),
            sequence,
            not_before,
            expires_at,
            policies: Vec::new(),
            tables: Vec::new(),
        }
    }

    #[test]
    fn the_window_is_checked_at_the_one_clock_reading() {
        let m = manifest("core", 1, 100, 200);
        assert_eq!(
            check_window(&m, 99).map_err(|e| e.code()),
            Err("DPONE_BUNDLE_NOT_YET_VALID")
        );
        assert!(check_window(&m, 100).is_ok());
        assert!(check_window(&m, 199).is_ok());
        assert_eq!(
            check_window(&m, 200).map_err(|e| e.code()),
            Err("DPONE_BUNDLE_EXPIRED")
        );
    }

    #[test]
    fn rollback_reuse_and_a_clock_behind_are_refused_and_the_ledger_round_trips() {
        let policy = Sha256Digest::of(b"policy");
        let other_policy = Sha256Digest::of(b"other policy");
        let m2 = manifest("core", 2, 0, 1000);
        let d2 = Sha256Digest::of(b"m2");
        let mut ledger = ActivationLedger::default();
        ledger
            .check(&policy, &m2, &d2, 500)
            .expect("first activation");
        ledger.record(&policy, &m2, &d2, 500);

        let m1 = manifest("core", 1, 0, 1000);
        let d1 = Sha256Digest::of(b"m1");
        let code = |r: Result<()>| r.map_err(|e| e.code());
        assert_eq!(
            code(ledger.check(&policy, &m1, &d1, 600)),
            Err("DPONE_BUNDLE_ROLLBACK")
        );
        assert_eq!(
            code(ledger.check(&policy, &m2, &Sha256Digest::of(b"other"), 600)),
            Err("DPONE_BUNDLE_SEQUENCE_REUSED")
        );
        assert!(
            ledger.check(&policy, &m2, &d2, 600).is_ok(),
            "same bundle again"
        );
        assert_eq!(
            code(ledger.check(&policy, &m2, &d2, 499)),
            Err("DPONE_BUNDLE_CLOCK_BEHIND")
        );
        assert!(
            ledger.check(&other_policy, &m1, &d1, 600).is_ok(),
            "kept per trust policy"
        );

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state/bundle-activations.json");
        ledger.save(&path).expect("saves");
        let mode = std::fs::metadata(&path)
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let loaded = ActivationLedger::load(&path).expect("loads");
        assert_eq!(loaded, ledger);
        assert_eq!(
            code(loaded.check(&policy, &m1, &d1, 600)),
            Err("DPONE_BUNDLE_ROLLBACK")
        );

        // A process that loaded the ledger before sequence 2 was recorded saves its own
        // (older) activation: sequence 2 on disk is kept.
        let mut stale = ActivationLedger::default();
        stale.record(&policy, &m1, &d1, 450);
        stale.save(&path).expect("saves");
        assert_eq!(
            code(
                ActivationLedger::load(&path)
                    .expect("loads")
                    .check(&policy, &m1, &d1, 600)
            ),
            Err("DPONE_BUNDLE_ROLLBACK")
        );
    }
}
