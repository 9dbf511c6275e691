//! Properties of every codec: documents with arbitrary valid identities, digests, epochs and
//! limits round-trip byte-exact with a digest of their bytes; any single-byte change of a valid
//! document is refused or changes the digest.

mod support;

use dpone_engine_nonproduction::fields::Digest;
use proptest::prelude::*;
use serde_json::Value;
use support::*;

fn is_uuid(s: &str) -> bool {
    dpone_engine_nonproduction::fields::Uuid::parse("$", s).is_ok()
}

/// Replaces every UUID and every digest of `v` by fresh ones drawn from `rng` (membership and
/// evidence sets are keyed by ids and names, so their order is unchanged; single-entry digest
/// sets stay sorted).
fn reseed(v: &mut Value, rng: &mut u64) {
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    };
    fn walk(v: &mut Value, next: &mut dyn FnMut() -> u64) {
        match v {
            Value::String(s) if s.starts_with("sha256:") && s.len() == 71 => {
                *s = Digest::of(&next().to_le_bytes()).as_str().to_owned();
            }
            Value::String(s) if is_uuid(s) => {
                let h = Digest::of(&next().to_le_bytes());
                let hex = &h.as_str()[7..];
                *s = format!(
                    "{}-{}-4{}-8{}-{}",
                    &hex[0..8],
                    &hex[8..12],
                    &hex[12..15],
                    &hex[15..18],
                    &hex[18..30]
                );
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, next)),
            Value::Object(map) => map.values_mut().for_each(|i| walk(i, next)),
            _ => {}
        }
    }
    walk(v, &mut next);
}

fn sorted_digest_sets_ok(v: &Value) -> bool {
    // Multi-entry digest sets must stay sorted; the fixtures have none, so reseeding is safe.
    match v {
        Value::Array(items) if items.len() > 1 => !items
            .iter()
            .all(|i| i.as_str().is_some_and(|s| s.starts_with("sha256:"))),
        Value::Array(items) => items.iter().all(sorted_digest_sets_ok),
        Value::Object(map) => map.values().all(sorted_digest_sets_ok),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trip_with_arbitrary_identities(seed in 1u64.., epoch in 0u64..(1 << 53), attempts in 1u64..=128) {
        for name in FIXTURES {
            let mut v = value(name);
            prop_assert!(sorted_digest_sets_ok(&v), "{}", name);
            let mut rng = seed;
            reseed(&mut v, &mut rng);
            if v.get("revocation_epoch").is_some() {
                v["revocation_epoch"] = epoch.into();
            }
            if let Some(limits) = v.get_mut("limits") {
                limits["max_attempts"] = attempts.into();
            }
            let bytes = canon(&v);
            let digest = parse_as(name, &bytes);
            prop_assert_eq!(digest, Ok(Digest::of(&bytes).as_str().to_owned()), "{}", name);
        }
    }

    #[test]
    fn any_single_byte_change_refuses_or_changes_the_digest(at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        for name in FIXTURES {
            let original = bytes(name);
            let digest = Digest::of(&original).as_str().to_owned();
            let mut changed = original.clone();
            let i = at.index(changed.len());
            prop_assume!(changed[i] != byte);
            changed[i] = byte;
            match parse_as(name, &changed) {
                Err(code) => prop_assert!(code.starts_with("DPONE_NP_")),
                Ok(d) => prop_assert_ne!(d, digest.clone(), "{} at {}", name, i),
            }
        }
    }

    #[test]
    fn arbitrary_bytes_are_refused_without_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
        for (_, result) in all_readers(&data) {
            prop_assert!(result.is_err());
        }
    }
}

/// Over positions: flipping the lowest bit of one byte of a valid document is refused or
/// yields another digest. Every fifth position (offset by document) keeps the debug run short;
/// `DPONE_NP_EVERY_POSITION=1` checks them all.
#[test]
fn every_position_flipped_refuses_or_changes_the_digest() {
    for name in FIXTURES {
        let original = bytes(name);
        let digest = Digest::of(&original).as_str().to_owned();
        let stride = if std::env::var_os("DPONE_NP_EVERY_POSITION").is_some() {
            1
        } else {
            5
        };
        for i in (name.len() % stride..original.len()).step_by(stride) {
            let mut changed = original.clone();
            changed[i] ^= 1;
            if let Ok(d) = parse_as(name, &changed) {
                assert_ne!(d, digest, "{name} at {i}");
            }
        }
    }
}
