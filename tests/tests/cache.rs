//! Tier: precompiled cache. A cache entry is used only when its bytes match a record this host
//! authenticated with its secret key; a tampered, forged or planted entry is discarded and
//! recompiled from the pinned component, never run. The cache directory and key are checked like
//! ssh key files.

use dpone_integration_tests::{component, guard_sample, load_shipped, pin};
use dpone_policy_model::guard::GuardFacts;
use dpone_policy_runtime::{
    Budget, CodeSource, PolicyKind, PolicyRuntime, PrecompiledCache, SandboxConfig, Sha256Digest,
};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A key file outside the cache directory; the returned guard keeps its directory alive.
fn key_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("key dir");
    let path = dir.path().join("cache.key");
    (dir, path)
}

fn runtime_with_cache_and_key(dir: &Path, key: &Path) -> PolicyRuntime {
    PolicyRuntime::new(SandboxConfig::default())
        .expect("runtime")
        .with_cache(PrecompiledCache::open(dir, key).expect("cache opens"))
}

fn runtime_with_cache(dir: &Path) -> (PolicyRuntime, tempfile::TempDir) {
    let (guard, key) = key_file();
    (runtime_with_cache_and_key(dir, &key), guard)
}

fn entry_names(runtime: &PolicyRuntime, component: &Sha256Digest) -> (String, String) {
    let stem = format!(
        "{}-{}",
        component.hex(),
        &runtime.engine_fingerprint().hex()[..16]
    );
    (format!("{stem}.cwasm"), format!("{stem}.record.json"))
}

fn open_refusal(dir: &Path, key: &Path) -> String {
    PrecompiledCache::open(dir, key)
        .map(|_| ())
        .expect_err("refused")
        .code()
        .to_owned()
}

fn facts() -> GuardFacts {
    guard_sample()
}

fn artifacts(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .expect("cache dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    found.sort();
    found
}

#[test]
fn cache_hits_after_first_compile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (runtime, _key) = runtime_with_cache(dir.path());
    let first = load_shipped(&runtime, PolicyKind::Guard);
    assert_eq!(first.report().code_source, CodeSource::Compiled);
    let second = load_shipped(&runtime, PolicyKind::Guard);
    assert_eq!(second.report().code_source, CodeSource::Cache);
    assert_eq!(
        second.guard_decide(&facts()).expect("decides").decision,
        dpone_policy_guard::decide(&facts())
    );
}

#[test]
fn a_flipped_byte_in_the_artifact_is_detected_and_recompiled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (runtime, _key) = runtime_with_cache(dir.path());
    load_shipped(&runtime, PolicyKind::Guard);
    let artifact = artifacts(dir.path()).pop().expect("one artifact");
    let mut tampered = std::fs::read(&artifact).expect("read");
    let at = tampered.len() / 3;
    tampered[at] ^= 0xff;
    std::fs::write(&artifact, &tampered).expect("write");

    let reloaded = load_shipped(&runtime, PolicyKind::Guard);
    assert_eq!(
        reloaded.report().code_source,
        CodeSource::RecompiledAfterTamper
    );
    assert_eq!(
        reloaded.guard_decide(&facts()).expect("decides").decision,
        dpone_policy_guard::decide(&facts())
    );
    assert_ne!(
        std::fs::read(&artifact).expect("rewritten"),
        tampered,
        "the tampered bytes were replaced"
    );
}

#[test]
fn another_components_code_swapped_in_is_never_executed() {
    // Swap the guard's cached code for a trapping component's code (both valid artifacts of the
    // same engine). Executing it would trap; the recorded digest refuses it instead.
    let dir = tempfile::tempdir().expect("tempdir");
    let (runtime, _key) = runtime_with_cache(dir.path());
    let trap = component("hostile-trap");
    load_shipped(&runtime, PolicyKind::Guard);
    let guard_artifact = artifacts(dir.path()).pop().expect("guard artifact");
    runtime
        .load(
            PolicyKind::Guard,
            &trap,
            dpone_policy_runtime::Sha256Digest::of(&trap),
            Budget::default(),
        )
        .expect("trap component loads (it traps only when deciding)");
    let trap_artifact = artifacts(dir.path())
        .into_iter()
        .find(|p| *p != guard_artifact)
        .expect("trap artifact");
    std::fs::copy(&trap_artifact, &guard_artifact).expect("swap");

    let reloaded = load_shipped(&runtime, PolicyKind::Guard);
    assert_eq!(
        reloaded.report().code_source,
        CodeSource::RecompiledAfterTamper
    );
    let decided = reloaded
        .guard_decide(&facts())
        .expect("the real guard decides, no trap");
    assert_eq!(decided.decision, dpone_policy_guard::decide(&facts()));
}

#[test]
fn a_forged_record_for_another_components_valid_artifact_is_never_executed() {
    // The attacker can write the cache directory but not read the key. They take a valid
    // artifact of the same engine (a trapping component's) and write a record that claims it is
    // the guard's, with correct digests and size, with no MAC or with a MAC of their own.
    let dir = tempfile::tempdir().expect("tempdir");
    let (runtime, _key) = runtime_with_cache(dir.path());
    let trap = component("hostile-trap");
    let trap_digest = Sha256Digest::of(&trap);
    runtime
        .load(PolicyKind::Guard, &trap, trap_digest, Budget::default())
        .expect("trap component loads (it traps only when deciding)");
    let (trap_artifact, _) = entry_names(&runtime, &trap_digest);
    let trap_code = std::fs::read(dir.path().join(&trap_artifact)).expect("trap artifact");
    let guard = pin(PolicyKind::Guard);
    let (guard_artifact, guard_record) = entry_names(&runtime, &guard);
    let base = serde_json::json!({
        "component": guard,
        "engine": runtime.engine_fingerprint(),
        "artifact": Sha256Digest::of(&trap_code),
        "size": trap_code.len(),
    });
    let mut with_mac = base.clone();
    with_mac["mac"] = serde_json::Value::String("ab".repeat(32));
    for forged in [base, with_mac] {
        std::fs::write(dir.path().join(&guard_artifact), &trap_code).expect("plant");
        std::fs::write(
            dir.path().join(&guard_record),
            serde_json::to_vec(&forged).expect("json"),
        )
        .expect("forge");
        let reloaded = load_shipped(&runtime, PolicyKind::Guard);
        assert_eq!(
            reloaded.report().code_source,
            CodeSource::RecompiledAfterTamper
        );
        let decided = reloaded
            .guard_decide(&facts())
            .expect("the real guard decides, no trap");
        assert_eq!(decided.decision, dpone_policy_guard::decide(&facts()));
    }
}

#[test]
fn a_record_pointing_at_a_planted_artifact_is_never_executed() {
    // Another host (another key) compiled the trapping component; its entry, record and all, is
    // planted here under the guard's names with the record rewritten to claim the guard, and
    // under its own names unchanged. Neither verifies under this host's key.
    let theirs = tempfile::tempdir().expect("their cache");
    let (their_runtime, _their_key) = runtime_with_cache(theirs.path());
    let trap = component("hostile-trap");
    let trap_digest = Sha256Digest::of(&trap);
    their_runtime
        .load(PolicyKind::Guard, &trap, trap_digest, Budget::default())
        .expect("trap loads there");
    let (their_artifact, their_record) = entry_names(&their_runtime, &trap_digest);
    let planted_code = std::fs::read(theirs.path().join(&their_artifact)).expect("artifact");
    let planted_record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(theirs.path().join(&their_record)).expect("record"))
            .expect("record json");

    let ours = tempfile::tempdir().expect("our cache");
    let (runtime, _key) = runtime_with_cache(ours.path());
    let guard = pin(PolicyKind::Guard);
    let (guard_artifact, guard_record) = entry_names(&runtime, &guard);
    let mut claimed = planted_record.clone();
    claimed["component"] = serde_json::to_value(guard).expect("digest");
    std::fs::write(ours.path().join(&guard_artifact), &planted_code).expect("plant");
    std::fs::write(
        ours.path().join(&guard_record),
        serde_json::to_vec(&claimed).expect("json"),
    )
    .expect("record");
    let reloaded = load_shipped(&runtime, PolicyKind::Guard);
    assert_eq!(
        reloaded.report().code_source,
        CodeSource::RecompiledAfterTamper
    );
    assert_eq!(
        reloaded.guard_decide(&facts()).expect("decides").decision,
        dpone_policy_guard::decide(&facts())
    );

    // Their genuine entry for the trap component, copied verbatim, is not ours either.
    std::fs::copy(
        theirs.path().join(&their_artifact),
        ours.path().join(&their_artifact),
    )
    .expect("copy");
    std::fs::copy(
        theirs.path().join(&their_record),
        ours.path().join(&their_record),
    )
    .expect("copy");
    let loaded = runtime
        .load(PolicyKind::Guard, &trap, trap_digest, Budget::default())
        .expect("loads");
    assert_eq!(
        loaded.report().code_source,
        CodeSource::RecompiledAfterTamper
    );
}

#[test]
fn the_key_survives_restarts_so_the_cache_is_still_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_guard, key) = key_file();
    load_shipped(
        &runtime_with_cache_and_key(dir.path(), &key),
        PolicyKind::Guard,
    );
    let again = load_shipped(
        &runtime_with_cache_and_key(dir.path(), &key),
        PolicyKind::Guard,
    );
    assert_eq!(again.report().code_source, CodeSource::Cache);
    let meta = std::fs::metadata(&key).expect("key written");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 32);
}

#[test]
fn a_world_writable_cache_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_guard, key) = key_file();
    for mode in [0o777, 0o770, 0o702] {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).expect("chmod");
        assert_eq!(
            open_refusal(dir.path(), &key),
            "DPONE_POLICY_CACHE_DIR_UNSAFE"
        );
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    PrecompiledCache::open(dir.path(), &key).expect("a private directory is accepted");
}

#[test]
fn a_foreign_owned_cache_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_guard, key) = key_file();
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).expect("mkdir");
    std::os::unix::fs::chown(&cache, Some(54_321), None).expect("chown (tests run as root)");
    assert_eq!(open_refusal(&cache, &key), "DPONE_POLICY_CACHE_DIR_UNSAFE");
}

#[test]
fn a_symlinked_or_swappable_cache_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_guard, key) = key_file();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).expect("mkdir");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    assert_eq!(open_refusal(&link, &key), "DPONE_POLICY_CACHE_DIR_UNSAFE");

    // A parent that others can write (and that is not sticky) lets them swap the cache.
    let parent = dir.path().join("shared");
    let cache = parent.join("cache");
    std::fs::create_dir_all(&cache).expect("mkdir");
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_eq!(open_refusal(&cache, &key), "DPONE_POLICY_CACHE_DIR_UNSAFE");
    // A foreign-owned parent likewise.
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::chown(&parent, Some(54_321), None).expect("chown");
    assert_eq!(open_refusal(&cache, &key), "DPONE_POLICY_CACHE_DIR_UNSAFE");
}

#[test]
fn an_unsafe_or_misplaced_key_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let keys = dir.path().join("keys");
    std::fs::create_dir_all(&keys).expect("mkdir");
    let key = keys.join("cache.key");
    std::fs::write(&key, [7u8; 32]).expect("key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert_eq!(open_refusal(&cache, &key), "DPONE_POLICY_CACHE_KEY_UNSAFE");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::chown(&key, Some(54_321), None).expect("chown");
    assert_eq!(open_refusal(&cache, &key), "DPONE_POLICY_CACHE_KEY_UNSAFE");
    let link = keys.join("link.key");
    std::os::unix::fs::symlink(&key, &link).expect("symlink");
    assert_eq!(open_refusal(&cache, &link), "DPONE_POLICY_CACHE_KEY_UNSAFE");
    // Inside the cache directory the key would be readable by whoever plants entries.
    assert_eq!(
        open_refusal(&cache, &cache.join("cache.key")),
        "DPONE_POLICY_CACHE_KEY_UNSAFE"
    );
    let error = PrecompiledCache::open(&cache, &link).expect_err("refused");
    assert!(
        !error
            .to_string()
            .contains(dir.path().to_str().expect("utf-8")),
        "no path in the message: {error}"
    );
}
