//! Bundle freshness, in the spirit of TUF: a signed validity window and rollback protection.
//!
//! - Every manifest carries `not_before` and `expires_at` (unix seconds, signed with the rest of
//!   the manifest); [`check_window`] refuses a bundle outside its window
//!   (`DPONE_BUNDLE_NOT_YET_VALID`, `DPONE_BUNDLE_EXPIRED`). An attacker who freezes a host on
//!   an old bundle gains nothing once it expires.
//! - Every manifest carries a monotonic `sequence` per bundle name. The host keeps, per bundle
//!   name, the highest sequence it activated, the digest of that manifest and the clock reading
//!   of the last activation, in an [`ActivationLedger`] file it owns. A lower sequence is a
//!   rollback (`DPONE_BUNDLE_ROLLBACK`); the same sequence with another manifest is refused
//!   (`DPONE_BUNDLE_SEQUENCE_REUSED`); a clock earlier than the last activation refuses
//!   (`DPONE_BUNDLE_CLOCK_BEHIND`), so winding the clock back cannot revive an expired bundle
//!   on this host.
//! - The key is the bundle's name alone, not the trust policy: an edit, a re-serialization or a
//!   key rotation of the trust policy leaves every high-water mark in place, because the older
//!   bundles a replay would offer stay validly signed by keys the new policy may still list. The
//!   trust policy digest of the last activation is kept beside it as evidence. Ledgers of schema
//!   v1 (keyed by trust policy digest and name) are read and folded per name, keeping the
//!   highest sequence and the latest activation, and written back as v2.
//! - Check and record are one critical section across processes
//!   ([`ActivationLedger::activate_locked`]): under an exclusive lock on a file beside the
//!   ledger, the ledger is read, checked, the activation runs, and the record is written through
//!   a synced temporary file, a rename and a sync of the directory.
//! - The directory, the ledger and its lock file pass the host's one state check
//!   ([`dpone_boundary::private_state`]: owned by the effective user, not writable by group or
//!   others, no symbolic link, no swappable parent) before anything is read
//!   (`DPONE_BUNDLE_STATE_UNUSABLE`).
//! - The caller reads the clock once per activation and passes the same `now` to every check.

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::TrustError;
use crate::manifest::Manifest;
use dpone_boundary::private_state::{self, Refusal};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Schema of the ledger file this host writes (keyed by bundle name).
pub const LEDGER_SCHEMA: &str = "dpone.bundle-activations.v2";

/// Schema of the ledgers earlier hosts wrote (keyed by trust policy digest and bundle name);
/// read and folded into [`LEDGER_SCHEMA`], never written.
pub const LEDGER_SCHEMA_V1: &str = "dpone.bundle-activations.v1";

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

/// What the host remembers of one bundle name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Highest sequence activated.
    pub sequence: u64,
    /// Digest of the manifest activated at that sequence.
    pub manifest_sha256: Sha256Digest,
    /// Clock reading of the last activation, unix seconds.
    pub activated_at: u64,
    /// Digest of the trust policy file the highest sequence was activated under (evidence for
    /// operators; not part of the key).
    pub trust_policy_sha256: Sha256Digest,
}

impl LedgerEntry {
    /// Folds `other` in: the higher sequence with its manifest and trust policy (at equal
    /// sequences, the later activation's), and the later activation time. Never lowers either.
    fn fold(&mut self, other: &LedgerEntry) {
        let activated_at = self.activated_at.max(other.activated_at);
        if (other.sequence, other.activated_at) > (self.sequence, self.activated_at) {
            *self = other.clone();
        }
        self.activated_at = activated_at;
    }
}

/// The host's record of activated bundles, keyed by bundle name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivationLedger {
    entries: BTreeMap<String, LedgerEntry>,
}

fn unusable(detail: impl Into<String>) -> TrustError {
    TrustError::ActivationStateUnusable {
        detail: detail.into(),
    }
}

fn refused(what: &str, refusal: Refusal) -> TrustError {
    unusable(format!("{what}: {}", refusal.reason()))
}

/// The directory that holds the ledger at `path`.
fn directory_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn file_name_of(path: &Path) -> Result<String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| unusable("the ledger has no file name"))
}

impl ActivationLedger {
    /// Reads the ledger at `path`; an absent file (or directory) is an empty ledger. The
    /// directory must pass [`private_state::check_directory`]; the file must be a regular file,
    /// not a symbolic link, owned by the effective user, that group and others cannot write.
    pub fn load(path: &Path) -> Result<Self> {
        let dir = directory_of(path);
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            _ => {
                private_state::check_directory(dir, false)
                    .map_err(|r| refused("its directory", r))?;
            }
        }
        Self::read_checked(path)
    }

    /// Reads the ledger file after the directory was checked.
    fn read_checked(path: &Path) -> Result<Self> {
        let file = match private_state::no_follow(std::fs::OpenOptions::new().read(true)).open(path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) if private_state::is_symlink_refusal(&e) => {
                return Err(unusable("it is a symbolic link"));
            }
            Err(e) => return Err(unusable(format!("cannot read it: {}", e.kind()))),
        };
        private_state::check_file(&file, 0o022).map_err(|r| refused("the ledger", r))?;
        let mut bytes = Vec::new();
        file.take(MAX_LEDGER_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| unusable(format!("cannot read it: {}", e.kind())))?;
        if bytes.len() as u64 > MAX_LEDGER_BYTES {
            return Err(unusable("it is too large"));
        }
        Self::parse(&bytes)
    }

    fn parse(bytes: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(bytes).map_err(|_| unusable("it is not JSON"))?;
        if !matches!(
            value["schema"].as_str(),
            Some(LEDGER_SCHEMA | LEDGER_SCHEMA_V1)
        ) {
            return Err(unusable("it has an unsupported schema"));
        }
        let mut entries: BTreeMap<String, LedgerEntry> = BTreeMap::new();
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
            let digest = |hex: &str| {
                Sha256Digest::parse_hex(hex)
                    .ok_or_else(|| unusable("an entry has a malformed digest"))
            };
            let entry = LedgerEntry {
                sequence,
                manifest_sha256: digest(&manifest)?,
                activated_at,
                trust_policy_sha256: digest(&policy)?,
            };
            match entries.get_mut(&name) {
                // v1: one entry per (trust policy, name), folded per name. v2 writes each name
                // once; a repeated one is folded the same way, never lowered.
                Some(ours) => ours.fold(&entry),
                None => {
                    entries.insert(name, entry);
                }
            }
        }
        Ok(Self { entries })
    }

    /// The entry of a bundle name, if any.
    pub fn entry(&self, name: &str) -> Option<&LedgerEntry> {
        self.entries.get(name)
    }

    /// Refuses a bundle that would roll back, reuse a sequence with other content, or that is
    /// activated with a clock earlier than the last activation of its name.
    pub fn check(
        &self,
        manifest: &Manifest,
        manifest_sha256: &Sha256Digest,
        now: u64,
    ) -> Result<()> {
        let Some(last) = self.entry(&manifest.name) else {
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

    /// Records an activation that passed [`ActivationLedger::check`] and every other gate,
    /// verified under the trust policy whose file has digest `trust_policy`. Never lowers a
    /// recorded sequence or activation time.
    pub fn record(
        &mut self,
        trust_policy: &Sha256Digest,
        manifest: &Manifest,
        manifest_sha256: &Sha256Digest,
        now: u64,
    ) {
        let entry = LedgerEntry {
            sequence: manifest.sequence,
            manifest_sha256: *manifest_sha256,
            activated_at: now,
            trust_policy_sha256: *trust_policy,
        };
        match self.entries.get_mut(&manifest.name) {
            Some(ours) => ours.fold(&entry),
            None => {
                self.entries.insert(manifest.name.clone(), entry);
            }
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let bundles: Vec<Value> = self
            .entries
            .iter()
            .map(|(name, e)| {
                json!({
                    "name": name,
                    "sequence": e.sequence,
                    "manifest_sha256": e.manifest_sha256.to_hex(),
                    "activated_at": e.activated_at,
                    "trust_policy_sha256": e.trust_policy_sha256.to_hex(),
                })
            })
            .collect();
        let mut top = Map::new();
        top.insert("schema".into(), Value::String(LEDGER_SCHEMA.into()));
        top.insert("bundles".into(), Value::Array(bundles));
        serde_json::to_vec_pretty(&Value::Object(top)).unwrap_or_default()
    }

    /// Folds `other` in, keeping per name the higher sequence and the later activation time:
    /// what another activation wrote is never lowered.
    pub fn merge(&mut self, other: &ActivationLedger) {
        for (name, theirs) in &other.entries {
            match self.entries.get_mut(name) {
                Some(ours) => ours.fold(theirs),
                None => {
                    self.entries.insert(name.clone(), theirs.clone());
                }
            }
        }
    }

    /// Writes the ledger to `path` (mode 0600, its directory created 0700) under the ledger's
    /// lock, merged with what is on disk (see [`ActivationLedger::merge`]).
    pub fn save(&self, path: &Path) -> Result<()> {
        let lock = LedgerLock::acquire(path)?;
        let mut merged = lock.read()?;
        merged.merge(self);
        lock.write(&merged)
    }

    /// The activation gate's critical section, atomic across processes: under the ledger's
    /// exclusive lock, reads the ledger at `path`, [`check`](ActivationLedger::check)s the
    /// bundle, runs `activate`, and only if it succeeds records the activation and writes the
    /// ledger (synced temporary file, rename, synced directory). A refused or failed activation
    /// records nothing.
    pub fn activate_locked<T, E: From<TrustError>>(
        path: &Path,
        trust_policy: &Sha256Digest,
        manifest: &Manifest,
        manifest_sha256: &Sha256Digest,
        now: u64,
        activate: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let lock = LedgerLock::acquire(path)?;
        let mut ledger = lock.read()?;
        ledger.check(manifest, manifest_sha256, now)?;
        let activated = activate()?;
        ledger.record(trust_policy, manifest, manifest_sha256, now);
        lock.write(&ledger)?;
        Ok(activated)
    }
}

/// An exclusive lock on the ledger at a path, held until dropped: a file `<ledger>.lock` beside
/// the ledger, locked with `flock` (`std::fs::File::lock`), so that only one process at a time
/// reads, checks and writes the ledger.
struct LedgerLock {
    _lock: std::fs::File,
    dir: std::fs::File,
    dir_path: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl LedgerLock {
    /// Checks (and creates, mode 0700) the directory, opens or creates the lock file (mode
    /// 0600, no symbolic link, owned by the effective user) and waits for its exclusive lock.
    fn acquire(path: &Path) -> Result<Self> {
        let dir_path = directory_of(path);
        let dir = private_state::check_directory(dir_path, true)
            .map_err(|r| refused("its directory", r))?;
        let lock_path = dir_path.join(format!("{}.lock", file_name_of(path)?));
        let lock = private_state::no_follow(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600),
        )
        .open(&lock_path)
        .map_err(|e| {
            if private_state::is_symlink_refusal(&e) {
                unusable("its lock file is a symbolic link")
            } else {
                unusable(format!("cannot open its lock file: {}", e.kind()))
            }
        })?;
        private_state::check_file(&lock, 0o022).map_err(|r| refused("its lock file", r))?;
        lock.lock()
            .map_err(|e| unusable(format!("cannot lock it: {}", e.kind())))?;
        Ok(Self {
            _lock: lock,
            dir,
            dir_path: dir_path.to_path_buf(),
            path: path.to_path_buf(),
        })
    }

    fn read(&self) -> Result<ActivationLedger> {
        ActivationLedger::read_checked(&self.path)
    }

    fn write(&self, ledger: &ActivationLedger) -> Result<()> {
        let io = |e: std::io::Error| unusable(format!("cannot write it: {}", e.kind()));
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|_| unusable("no randomness"))?;
        let temp = self
            .dir_path
            .join(format!(".bundle-activations.tmp-{}", hex::encode(suffix)));
        let mut file = private_state::no_follow(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600),
        )
        .open(&temp)
        .map_err(io)?;
        let written = file
            .write_all(&ledger.to_bytes())
            .and_then(|()| file.sync_all());
        drop(file);
        if let Err(e) = written.and_then(|()| std::fs::rename(&temp, &self.path)) {
            let _ = std::fs::remove_file(&temp);
            return Err(io(e));
        }
        self.dir.sync_all().map_err(io)
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
        use std::os::unix::fs::PermissionsExt;
        let policy = Sha256Digest::of(b"policy");
        let rotated = Sha256Digest::of(b"rotated policy");
        let m2 = manifest("core", 2, 0, 1000);
        let d2 = Sha256Digest::of(b"m2");
        let mut ledger = ActivationLedger::default();
        ledger.check(&m2, &d2, 500).expect("first activation");
        ledger.record(&policy, &m2, &d2, 500);

        let m1 = manifest("core", 1, 0, 1000);
        let d1 = Sha256Digest::of(b"m1");
        let code = |r: Result<()>| r.map_err(|e| e.code());
        assert_eq!(
            code(ledger.check(&m1, &d1, 600)),
            Err("DPONE_BUNDLE_ROLLBACK")
        );
        assert_eq!(
            code(ledger.check(&m2, &Sha256Digest::of(b"other"), 600)),
            Err("DPONE_BUNDLE_SEQUENCE_REUSED")
        );
        assert!(ledger.check(&m2, &d2, 600).is_ok(), "same bundle again");
        assert_eq!(
            code(ledger.check(&m2, &d2, 499)),
            Err("DPONE_BUNDLE_CLOCK_BEHIND")
        );
        assert!(
            ledger
                .check(&manifest("other", 1, 0, 1000), &d1, 600)
                .is_ok(),
            "kept per bundle name"
        );
        // Recording never lowers: an older activation recorded later keeps sequence 2.
        ledger.record(&rotated, &m1, &d1, 550);
        assert_eq!(ledger.entry("core").map(|e| e.sequence), Some(2));
        assert_eq!(ledger.entry("core").map(|e| e.activated_at), Some(550));

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
            code(loaded.check(&m1, &d1, 600)),
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
                    .check(&m1, &d1, 600)
            ),
            Err("DPONE_BUNDLE_ROLLBACK")
        );
    }

    /// A ledger written by an earlier host (v1: one entry per trust policy digest and name)
    /// keeps every high-water mark: per name, the highest sequence of any trust policy and the
    /// latest activation time.
    #[test]
    fn a_v1_ledger_is_folded_per_name_without_lowering_anything() {
        let a = Sha256Digest::of(b"policy a").to_hex();
        let b = Sha256Digest::of(b"policy b").to_hex();
        let m5 = Sha256Digest::of(b"m5").to_hex();
        let m3 = Sha256Digest::of(b"m3").to_hex();
        let v1 = json!({
            "schema": LEDGER_SCHEMA_V1,
            "bundles": [
                {"trust_policy_sha256": a, "name": "core", "sequence": 5,
                 "manifest_sha256": m5, "activated_at": 100},
                {"trust_policy_sha256": b, "name": "core", "sequence": 3,
                 "manifest_sha256": m3, "activated_at": 900},
            ]
        });
        let ledger = ActivationLedger::parse(&serde_json::to_vec(&v1).expect("json"))
            .expect("a v1 ledger reads");
        let entry = ledger.entry("core").expect("folded");
        assert_eq!(entry.sequence, 5);
        assert_eq!(entry.manifest_sha256.to_hex(), m5);
        assert_eq!(entry.activated_at, 900, "the latest activation time");
        let code = |r: Result<()>| r.map_err(|e| e.code());
        let m3_manifest = manifest("core", 3, 0, 2000);
        assert_eq!(
            code(ledger.check(&m3_manifest, &Sha256Digest::of(b"m3"), 1000)),
            Err("DPONE_BUNDLE_ROLLBACK")
        );
        assert_eq!(
            code(ledger.check(&manifest("core", 6, 0, 2000), &Sha256Digest::of(b"m6"), 800)),
            Err("DPONE_BUNDLE_CLOCK_BEHIND")
        );
        // Written back as v2, it reads the same.
        let again = ActivationLedger::parse(&ledger.to_bytes()).expect("v2 reads");
        assert_eq!(again, ledger);
        assert!(String::from_utf8_lossy(&ledger.to_bytes()).contains(LEDGER_SCHEMA));
    }
}
