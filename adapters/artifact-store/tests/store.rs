//! Tier: unit (real filesystem in a temporary directory). Atomic sealing, content addressing,
//! reopen from a fresh store, the byte bound and tamper detection.

use std::io::{Read, Write};

use dpone_artifact_store::{ArtifactStore, StoreError, write_error};

const SCHEMA: [u8; 32] = [7; 32];

fn store(dir: &tempfile::TempDir, max: u64) -> ArtifactStore {
    ArtifactStore::open_path(dir.path(), max).expect("store opens")
}

fn seal(s: &ArtifactStore, bytes: &[u8], rows: u64) -> dpone_artifact_store::ArtifactReceipt {
    let mut w = s.writer(SCHEMA, u64::MAX).expect("writer");
    for chunk in bytes.chunks(7) {
        w.write_all(chunk).expect("write");
    }
    w.add_rows(rows);
    w.seal().expect("seal")
}

#[test]
fn seal_reopen_from_a_fresh_store_and_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = b"row one\nrow two\nrow three\n".repeat(100);
    let r = seal(&store(&dir, 1 << 20), &bytes, 300);
    assert_eq!(r.byte_size, bytes.len() as u64);
    assert_eq!(r.row_count, 300);
    assert_eq!(r.schema_digest, SCHEMA);
    // A fresh process: a new store over the same root, knowing only the digest.
    let fresh = store(&dir, 1 << 20);
    let again = fresh.reopen(&r.sha256).expect("reopens");
    assert_eq!(again, r);
    fresh.revalidate(&r).expect("revalidates");
    let mut out = Vec::new();
    fresh
        .open(&r)
        .expect("opens")
        .read_to_end(&mut out)
        .expect("reads");
    assert_eq!(out, bytes);
    // No partial files are left behind.
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp"))
            .expect("tmp")
            .count(),
        0
    );
}

#[test]
fn content_addressing_is_idempotent_and_receipts_carry_no_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir, 1 << 20);
    let a = seal(&s, b"same bytes", 1);
    let b = seal(&s, b"same bytes", 1);
    assert_eq!(a, b);
    assert_eq!(
        std::fs::read_dir(dir.path().join("objects"))
            .expect("objects")
            .count(),
        1
    );
    let text = serde_json::to_string(&a).expect("receipt encodes");
    assert!(!text.contains(dir.path().to_str().expect("utf8 path")));
    assert!(!text.contains('/'));
    // The same bytes sealed with another row count conflict instead of overwriting.
    let mut w = s.writer(SCHEMA, u64::MAX).expect("writer");
    w.write_all(b"same bytes").expect("write");
    w.add_rows(2);
    assert!(matches!(w.seal(), Err(StoreError::ReceiptConflict)));
}

#[test]
fn the_byte_bound_is_enforced_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir, 16);
    let mut w = s.writer(SCHEMA, 1 << 20).expect("writer");
    w.write_all(b"0123456789").expect("within bound");
    let e = w
        .write_all(b"0123456789")
        .expect_err("over the store bound");
    assert_eq!(write_error(&e, 16).code(), "DPONE_ARTIFACT_TOO_LARGE");
    drop(w);
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp"))
            .expect("tmp")
            .count(),
        0
    );
    // A per-artifact bound below the store's bound also applies.
    let mut w = s.writer(SCHEMA, 4).expect("writer");
    assert!(w.write_all(b"12345").is_err());
}

#[test]
fn tampering_is_detected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir, 1 << 20);
    let r = seal(&s, b"immutable artifact bytes", 1);
    let object = dir.path().join("objects").join(hex::encode(r.sha256));
    // Same length, one byte changed (the file is read-only; an attacker with rights changes it).
    let mut perms = std::fs::metadata(&object).expect("meta").permissions();
    assert!(perms.readonly(), "sealed objects are read-only");
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&object, perms).expect("chmod");
    let mut bytes = std::fs::read(&object).expect("read");
    bytes[0] ^= 1;
    std::fs::write(&object, &bytes).expect("tamper");
    assert!(matches!(s.revalidate(&r), Err(StoreError::Tampered)));
    // Truncation is caught by size before hashing.
    std::fs::write(&object, b"short").expect("truncate");
    assert!(matches!(s.reopen(&r.sha256), Err(StoreError::Tampered)));
    // A receipt that was edited no longer matches the identity held in authority.
    let receipt = dir
        .path()
        .join("receipts")
        .join(format!("{}.json", hex::encode(r.sha256)));
    let text = std::fs::read_to_string(&receipt)
        .expect("receipt")
        .replace("\"row_count\":1", "\"row_count\":2");
    std::fs::write(&receipt, text).expect("edit receipt");
    std::fs::write(&object, b"immutable artifact bytes").expect("restore bytes");
    assert!(matches!(s.revalidate(&r), Err(StoreError::Tampered)));
    // Unknown identity.
    assert!(matches!(s.reopen(&[0; 32]), Err(StoreError::NotFound)));
    s.remove(&r.sha256).expect("remove");
    assert!(matches!(s.reopen(&r.sha256), Err(StoreError::NotFound)));
}
