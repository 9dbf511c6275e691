//! Tier: precompiled cache. A cache entry is used only when its bytes match the digest this host
//! recorded; a tampered entry is discarded and recompiled from the pinned component, never run.

use dpone_integration_tests::{component, guard_sample, load_shipped};
use dpone_policy_model::guard::GuardFacts;
use dpone_policy_runtime::{
    Budget, CodeSource, PolicyKind, PolicyRuntime, PrecompiledCache, SandboxConfig,
};

fn runtime_with_cache(dir: &std::path::Path) -> PolicyRuntime {
    let dir = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()).expect("dir");
    PolicyRuntime::new(SandboxConfig::default())
        .expect("runtime")
        .with_cache(PrecompiledCache::new(dir))
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
    let runtime = runtime_with_cache(dir.path());
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
    let runtime = runtime_with_cache(dir.path());
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
    let runtime = runtime_with_cache(dir.path());
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
