//! `cargo xtask audit`: `Cargo.lock` against the RustSec advisory database, with the `rustsec`
//! crate (the library `cargo audit` is built on), offline.
//!
//! - By default the database is the vendored snapshot `xtask/advisory-db/snapshot.tar.gz`, whose
//!   commit and sha256 `xtask/advisory-db/snapshot.toml` records; the archive is checked against
//!   that digest before it is unpacked (into `target/advisory-db/<commit>/`), so every run of
//!   every machine checks against the same, named database.
//! - `--db DIR` checks against a local clone (or unpacked copy) of the database instead.
//! - `--vendor DIR` replaces the vendored snapshot with the `HEAD` of the clone `DIR`.
//!
//! Every vulnerability fails the audit, and so does every unmaintained or unsound crate, unless
//! it is in [`MITIGATED`] with a mitigation whose evidence is present in the tree. Yanked crates
//! are not checked (that needs the live crates.io index).

use anyhow::{Context, Result, bail, ensure};
use dpone_boundary::read::read_regular;
use rustsec::advisory::Informational;
use rustsec::report::{Report, Settings};
use rustsec::{Database, Lockfile};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

const SNAPSHOT_DIR: &str = "xtask/advisory-db";
const ARCHIVE: &str = "snapshot.tar.gz";
const RECORD: &str = "snapshot.toml";
/// Ceilings of the files the audit reads (the archive is ~0.5 MiB; sources and the record are
/// small), through the bounded reader: a FIFO or device named by a path is refused, never read.
const MAX_ARCHIVE: u64 = 64 << 20;
const MAX_TEXT: u64 = 4 << 20;

/// `path` as UTF-8 text of at most [`MAX_TEXT`] bytes, or `None`.
fn read_text(path: &Path) -> Option<String> {
    read_regular(path, MAX_TEXT)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

/// An advisory the project carries knowingly: its fixed release cannot be had here, and the
/// mitigation closes the path to the bug. Each names the files that carry the mitigation and a
/// text each must contain; the audit (and tidy) refuse the exception when any is missing.
pub struct Mitigated {
    /// The advisory id.
    pub id: &'static str,
    /// The affected crate.
    pub package: &'static str,
    /// Why it is carried and how it is closed.
    pub mitigation: &'static str,
    /// (file relative to the workspace root, text it must contain).
    pub evidence: &'static [(&'static str, &'static str)],
}

/// The advisories carried with a mitigation.
pub const MITIGATED: &[Mitigated] = &[Mitigated {
    id: "RUSTSEC-2026-0570",
    package: "wasmtime",
    mitigation: "wasmtime 48.0.9 is not served by the registry and 49+ needs a newer rustc; the \
                 engine enables only the proposals policies use (GC and function references off), \
                 and every component is validated under that set before compilation, so the GC \
                 subtype check that aborts is unreachable (DPONE_POLICY_WASM_FEATURE_DISABLED)",
    evidence: &[
        (
            "host/policy-runtime/src/sandbox.rs",
            "pub const WASM_FEATURES",
        ),
        ("host/policy-runtime/src/sandbox.rs", "WasmFeatures::GC"),
        (
            "fixtures/hostile/features/gc-subtype-call-indirect.wat",
            "call_indirect",
        ),
        ("tests/tests/hostile.rs", "gc-subtype-call-indirect"),
    ],
}];

/// Whether every piece of `m`'s evidence is in the tree under `root`; the missing ones otherwise.
pub fn missing_evidence(root: &Path, m: &Mitigated) -> Vec<String> {
    m.evidence
        .iter()
        .filter(|(file, text)| !read_text(&root.join(file)).is_some_and(|body| body.contains(text)))
        .map(|(file, text)| format!("{file} does not contain {text:?}"))
        .collect()
}

/// The recorded snapshot.
struct Snapshot {
    commit: String,
    committed: String,
    archive_sha256: String,
}

fn read_record(root: &Path) -> Result<Snapshot> {
    let path = root.join(SNAPSHOT_DIR).join(RECORD);
    let text = read_text(&path).with_context(|| format!("read {RECORD}"))?;
    let table: toml::Table = text.parse().with_context(|| format!("parse {RECORD}"))?;
    let field = |key: &str| -> Result<String> {
        table
            .get(key)
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
            .with_context(|| format!("{RECORD} has no string `{key}`"))
    };
    let snapshot = Snapshot {
        commit: field("commit")?,
        committed: field("committed")?,
        archive_sha256: field("archive_sha256")?,
    };
    ensure!(
        snapshot.commit.len() == 40 && snapshot.commit.bytes().all(|b| b.is_ascii_hexdigit()),
        "{RECORD}: `commit` is not a 40-digit hex commit"
    );
    Ok(snapshot)
}

/// Unpacks the vendored snapshot (once per commit) after checking its digest; returns its
/// directory.
fn unpack_vendored(root: &Path, snapshot: &Snapshot) -> Result<PathBuf> {
    let archive = root.join(SNAPSHOT_DIR).join(ARCHIVE);
    let bytes = read_regular(&archive, MAX_ARCHIVE).with_context(|| format!("read {ARCHIVE}"))?;
    let digest = hex::encode(Sha256::digest(&bytes));
    ensure!(
        digest == snapshot.archive_sha256,
        "{ARCHIVE} has sha256 {digest}, but {RECORD} records {}: the vendored database changed \
         without its record",
        snapshot.archive_sha256
    );
    let dir = root
        .join("target/advisory-db")
        .join(&snapshot.commit)
        .join(&digest[..16]);
    if dir.exists() {
        return Ok(dir);
    }
    // Unpacked beside its place and renamed into it, so a reader never sees a partial copy
    // (tests and concurrent runs may unpack at once; the first rename wins).
    let parent = dir
        .parent()
        .context("the snapshot directory has a parent")?;
    std::fs::create_dir_all(parent).context("create the snapshot directory")?;
    let staging = tempfile::tempdir_in(parent).context("a staging directory")?;
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(staging.path())
        .arg("--no-same-owner")
        .status()
        .context("run tar")?;
    ensure!(status.success(), "tar could not unpack {ARCHIVE}");
    let staged = staging.keep();
    if std::fs::rename(&staged, &dir).is_err() {
        // Another run renamed its copy first.
        let _ = std::fs::remove_dir_all(&staged);
        ensure!(
            dir.exists(),
            "could not move the unpacked snapshot into place"
        );
    }
    Ok(dir)
}

/// `--vendor DIR`: the clone's `HEAD` becomes the vendored snapshot.
fn vendor(root: &Path, clone: &Path) -> Result<()> {
    let git = |args: &[&str]| -> Result<Vec<u8>> {
        let out = Command::new("git")
            .arg("-C")
            .arg(clone)
            .args(args)
            .output()
            .context("run git")?;
        ensure!(out.status.success(), "git {args:?} failed in the clone");
        Ok(out.stdout)
    };
    let commit = String::from_utf8(git(&["rev-parse", "HEAD"])?)?
        .trim()
        .to_owned();
    let committed = String::from_utf8(git(&["show", "-s", "--format=%cI", "HEAD"])?)?
        .trim()
        .to_owned();
    let tar = git(&["archive", "--format=tar", "HEAD", "crates", "rust"])?;
    let mut gzip = Command::new("gzip")
        .args(["-n", "-9"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("run gzip")?;
    let mut stdin = gzip.stdin.take().context("gzip stdin")?;
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &tar));
    let out = gzip.wait_with_output().context("gzip")?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("gzip writer panicked"))??;
    ensure!(out.status.success(), "gzip failed");
    let dir = root.join(SNAPSHOT_DIR);
    std::fs::write(dir.join(ARCHIVE), &out.stdout)?;
    let record = read_text(&dir.join(RECORD)).unwrap_or_default();
    let comments: String = record
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(
        dir.join(RECORD),
        format!(
            "{comments}source = \"https://github.com/rustsec/advisory-db\"\ncommit = \"{commit}\"\n\
             committed = \"{committed}\"\narchive_sha256 = \"{}\"\n",
            hex::encode(Sha256::digest(&out.stdout))
        ),
    )?;
    eprintln!("audit: vendored advisory-db {commit} ({committed})");
    Ok(())
}

/// The findings of `lockfile` against `db`, a line each, and how many of them fail the audit:
/// every vulnerability not [`MITIGATED`] (or whose mitigation's evidence is missing under
/// `root`), every unmaintained or unsound crate.
fn check(root: &Path, db: &Database, lockfile: &Lockfile) -> (Vec<String>, usize) {
    let settings = Settings {
        informational_warnings: vec![Informational::Unmaintained, Informational::Unsound],
        ..Settings::default()
    };
    let report = Report::generate(db, lockfile, &settings);
    let mut lines = Vec::new();
    let mut failures = 0usize;
    for v in &report.vulnerabilities.list {
        let (id, name, version) = (
            v.advisory.id.as_str(),
            v.package.name.as_str(),
            &v.package.version,
        );
        match MITIGATED.iter().find(|m| m.id == id && m.package == name) {
            Some(m) => {
                let missing = missing_evidence(root, m);
                if missing.is_empty() {
                    lines.push(format!(
                        "mitigated  {id} {name} {version}: {}",
                        m.mitigation
                    ));
                } else {
                    failures += 1;
                    lines.push(format!(
                        "VULNERABLE {id} {name} {version}: its mitigation is gone: {missing:?}"
                    ));
                }
            }
            None => {
                failures += 1;
                lines.push(format!(
                    "VULNERABLE {id} {name} {version}: {} (patched: {:?})",
                    v.advisory.title,
                    v.versions.patched()
                ));
            }
        }
    }
    for (kind, warnings) in &report.warnings {
        for w in warnings {
            failures += 1;
            let id = w.advisory.as_ref().map_or("-", |a| a.id.as_str());
            lines.push(format!(
                "{kind:?} {id} {} {}",
                w.package.name.as_str(),
                w.package.version
            ));
        }
    }
    for m in MITIGATED {
        if !report
            .vulnerabilities
            .list
            .iter()
            .any(|v| v.advisory.id.as_str() == m.id)
        {
            lines.push(format!(
                "note       {} ({}) is not in this database or no longer matches the lock",
                m.id, m.package
            ));
        }
    }
    (lines, failures)
}

/// Runs the audit; `args` are the words after `audit`.
pub fn audit(root: &Path, args: &[String]) -> Result<()> {
    let mut db_dir: Option<PathBuf> = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--db" => db_dir = Some(rest.next().context("--db needs a directory")?.into()),
            "--vendor" => {
                let clone = rest.next().context("--vendor needs a clone's directory")?;
                return vendor(root, Path::new(clone));
            }
            other => bail!("audit: unknown argument {other:?} (--db DIR, --vendor DIR)"),
        }
    }
    let (dir, named) = match db_dir {
        Some(dir) => {
            let head = Command::new("git")
                .arg("-C")
                .arg(&dir)
                .args(["rev-parse", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_else(|| "an unversioned directory".to_owned());
            (dir, format!("the local database at commit {head}"))
        }
        None => {
            let snapshot = read_record(root)?;
            let dir = unpack_vendored(root, &snapshot)?;
            (
                dir,
                format!(
                    "the vendored snapshot {} ({})",
                    snapshot.commit, snapshot.committed
                ),
            )
        }
    };
    let db = Database::open(&dir).context("open the advisory database")?;
    let lockfile = Lockfile::load(root.join("Cargo.lock")).context("load Cargo.lock")?;
    eprintln!(
        "audit: {} crates of Cargo.lock against {named}: {} advisories",
        lockfile.packages.len(),
        db.iter().count()
    );
    let (lines, failures) = check(root, &db, &lockfile);
    for line in &lines {
        eprintln!("  {line}");
    }
    ensure!(
        failures == 0,
        "audit: {failures} finding(s) (vulnerabilities, unmaintained or unsound crates)"
    );
    eprintln!("audit: clean (yanked crates are not checked offline)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn lock_with(name: &str, version: &str) -> Lockfile {
        format!("version = 4\n\n[[package]]\nname = \"{name}\"\nversion = \"{version}\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n")
            .parse()
            .expect("a lock file")
    }

    fn vendored() -> Database {
        let snapshot = read_record(&root()).expect("the snapshot record");
        Database::open(&unpack_vendored(&root(), &snapshot).expect("unpacked")).expect("opens")
    }

    /// The workspace's own lock is clean against the vendored snapshot: this is the audit CI runs.
    #[test]
    fn the_workspace_lock_is_clean_against_the_vendored_snapshot() {
        let db = vendored();
        assert!(db.iter().count() > 1000, "the snapshot holds the database");
        let lock = Lockfile::load(root().join("Cargo.lock")).expect("Cargo.lock");
        let (lines, failures) = check(&root(), &db, &lock);
        assert_eq!(failures, 0, "{lines:#?}");
    }

    /// Every carried advisory's mitigation is in the tree now.
    #[test]
    fn every_mitigation_has_its_evidence_in_the_tree() {
        for m in MITIGATED {
            assert_eq!(
                missing_evidence(&root(), m),
                Vec::<String>::new(),
                "{}",
                m.id
            );
        }
    }

    /// A locked version with a known advisory fails (wasmtime 46.0.0: RUSTSEC-2026-0223), and an
    /// unmaintained crate does too (rustls-pemfile).
    #[test]
    fn a_vulnerable_or_unmaintained_lock_fails() {
        let db = vendored();
        let (lines, failures) = check(&root(), &db, &lock_with("wasmtime", "46.0.0"));
        assert!(failures > 0, "{lines:#?}");
        assert!(
            lines.iter().any(|l| l.contains("RUSTSEC-2026-0223")),
            "{lines:#?}"
        );
        let (lines, failures) = check(&root(), &db, &lock_with("rustls-pemfile", "2.2.0"));
        assert!(failures > 0, "{lines:#?}");
        assert!(
            lines.iter().any(|l| l.starts_with("Unmaintained")),
            "{lines:#?}"
        );
    }

    /// A carried advisory passes only while its mitigation's evidence is in the tree: the same
    /// database and lock fail under a root without it.
    #[test]
    fn a_mitigated_advisory_holds_only_with_its_evidence() {
        let db_dir = tempfile::tempdir().expect("temp dir");
        let crate_dir = db_dir.path().join("crates/wasmtime");
        std::fs::create_dir_all(&crate_dir).expect("mkdir");
        std::fs::write(
            crate_dir.join("RUSTSEC-2026-0570.md"),
            "```toml\n[advisory]\nid = \"RUSTSEC-2026-0570\"\npackage = \"wasmtime\"\n\
             date = \"2026-11-01\"\n\n[versions]\npatched = [\">= 48.0.9\"]\n```\n\n\
             # GC subtype check reachable without the gc feature\n\nText.\n",
        )
        .expect("write");
        let db = Database::open(db_dir.path()).expect("the one-advisory database opens");
        let lock = lock_with("wasmtime", "48.0.8");
        let (lines, failures) = check(&root(), &db, &lock);
        assert_eq!(failures, 0, "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("mitigated  RUSTSEC-2026-0570")),
            "{lines:#?}"
        );
        let bare = tempfile::tempdir().expect("temp dir");
        let (lines, failures) = check(bare.path(), &db, &lock);
        assert_eq!(failures, 1, "{lines:#?}");
        assert!(
            lines.iter().any(|l| l.contains("its mitigation is gone")),
            "{lines:#?}"
        );
    }
}
