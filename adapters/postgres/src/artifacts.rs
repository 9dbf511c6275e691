//! A minimal content-addressed artifact store on disk (cap-std), implementing the engine's
//! [`ArtifactStore`] port.
//!
//! Files are written under a random temporary name in the store directory, hashed as they are
//! written, then renamed to their sha256 and made read-only. Readers get plain files; the engine
//! re-hashes on every read. The store only ever touches its own directory (a cap-std `Dir`).
//!
//! Two runs can publish identical bytes (same digest). Publications are reference-counted per
//! store value (and its clones): `remove` deletes the file only when the last publisher releases
//! it. Separate processes must use separate directories (the CLI uses one per invocation).

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, OpenOptions, Permissions};
use dpone_engine_xmin::artifact::{ArtifactReceipt, ArtifactStore, ArtifactWriter};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// An artifact directory.
#[derive(Clone)]
pub struct DirArtifactStore {
    dir: Arc<Dir>,
    refs: Arc<Mutex<HashMap<String, u32>>>,
}

impl DirArtifactStore {
    /// Opens (creating if needed) a store directory.
    pub fn open(path: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(path)?;
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        Ok(Self {
            dir: Arc::new(dir),
            refs: Arc::default(),
        })
    }

    fn valid_name(sha256: &str) -> io::Result<()> {
        if sha256.len() == 64
            && sha256
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "artifact name is not a sha256",
            ))
        }
    }
}

struct Writer {
    dir: Arc<Dir>,
    refs: Arc<Mutex<HashMap<String, u32>>>,
    tmp: String,
    out: Option<BufWriter<File>>,
    hasher: Sha256,
    bytes: u64,
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| io::Error::other("writer finished"))?;
        let n = out.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        match self.out.as_mut() {
            Some(o) => o.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = self.dir.remove_file(&self.tmp);
        }
    }
}

impl ArtifactWriter for Writer {
    fn finish(mut self: Box<Self>) -> io::Result<ArtifactReceipt> {
        let out = self
            .out
            .take()
            .ok_or_else(|| io::Error::other("writer finished"))?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        // No fsync: artifacts are scratch for one run; a crash before commit reruns extraction.
        let sha256 = hex::encode(std::mem::take(&mut self.hasher).finalize());
        file.set_permissions(Permissions::from_std(
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o444),
        ))?;
        drop(file);
        let mut refs = self
            .refs
            .lock()
            .map_err(|_| io::Error::other("artifact refs poisoned"))?;
        let count = refs.entry(sha256.clone()).or_insert(0);
        if *count > 0 {
            // Identical bytes are already published: keep them, drop this copy.
            self.dir.remove_file(&self.tmp)?;
        } else {
            self.dir.rename(&self.tmp, &self.dir, &sha256)?;
        }
        *count += 1;
        Ok(ArtifactReceipt {
            sha256,
            bytes: self.bytes,
        })
    }
}

impl ArtifactStore for DirArtifactStore {
    fn create(&self) -> io::Result<Box<dyn ArtifactWriter>> {
        let mut rnd = [0u8; 16];
        getrandom::fill(&mut rnd).map_err(|_| io::Error::other("no randomness"))?;
        let tmp = format!(".tmp-{}", hex::encode(rnd));
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let file = self.dir.open_with(&tmp, &opts)?;
        Ok(Box::new(Writer {
            dir: self.dir.clone(),
            refs: self.refs.clone(),
            tmp,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            hasher: Sha256::new(),
            bytes: 0,
        }))
    }

    fn open(&self, sha256: &str) -> io::Result<Box<dyn Read + Send>> {
        Self::valid_name(sha256)?;
        Ok(Box::new(self.dir.open(sha256)?))
    }

    fn remove(&self, sha256: &str) -> io::Result<()> {
        Self::valid_name(sha256)?;
        let mut refs = self
            .refs
            .lock()
            .map_err(|_| io::Error::other("artifact refs poisoned"))?;
        if let Some(count) = refs.get_mut(sha256) {
            *count -= 1;
            if *count > 0 {
                return Ok(());
            }
            refs.remove(sha256);
        }
        match self.dir.remove_file(sha256) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_addressed_roundtrip() {
        let tmp = tempfile::tempdir().unwrap();
        let store = DirArtifactStore::open(tmp.path()).unwrap();
        let mut w = store.create().unwrap();
        w.write_all(b"hello").unwrap();
        let r = w.finish().unwrap();
        assert_eq!(r.bytes, 5);
        assert_eq!(r.sha256, hex::encode(Sha256::digest(b"hello")));
        let mut s = String::new();
        store
            .open(&r.sha256)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "hello");
        assert!(store.open("../etc/passwd").is_err());
        // A second publication of the same bytes shares the file until both release it.
        let mut w = store.create().unwrap();
        w.write_all(b"hello").unwrap();
        assert_eq!(w.finish().unwrap(), r);
        store.remove(&r.sha256).unwrap();
        assert!(store.open(&r.sha256).is_ok());
        store.remove(&r.sha256).unwrap();
        assert!(store.open(&r.sha256).is_err());
        // Abandoned writers leave nothing behind.
        let w = store.create().unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn tampered_or_truncated_artifacts_are_refused() {
        use dpone_engine_xmin::ErrorCode;
        use dpone_engine_xmin::copy_binary::encode_for_tests;
        use dpone_engine_xmin::envelope::{ARTIFACT_FORMAT, PayloadReceipt};
        use dpone_engine_xmin::validate::verify_payload;
        let tmp = tempfile::tempdir().unwrap();
        let store = DirArtifactStore::open(tmp.path()).unwrap();
        let bytes = encode_for_tests(&[vec![Some(b"\0\0\0\x01"), Some(b"x")]]);
        let mut w = store.create().unwrap();
        w.write_all(&bytes).unwrap();
        let receipt = PayloadReceipt {
            artifact: w.finish().unwrap(),
            format: ARTIFACT_FORMAT.into(),
            rows: 1,
            fields: 2,
            complete: true,
        };
        verify_payload(&receipt, 2, 1, &store).unwrap();
        let wrong_rows = PayloadReceipt {
            rows: 2,
            ..receipt.clone()
        };
        assert_eq!(
            verify_payload(&wrong_rows, 2, 1, &store)
                .unwrap_err()
                .code(),
            ErrorCode::SnapshotCountMismatch
        );
        let path = tmp.path().join(&receipt.artifact.sha256);
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
        std::fs::set_permissions(&path, perms).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 2]).unwrap();
        assert_eq!(
            verify_payload(&receipt, 2, 1, &store).unwrap_err().code(),
            ErrorCode::ArtifactChecksumMismatch
        );
    }
}
