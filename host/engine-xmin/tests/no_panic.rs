//! Untrusted input never panics: strict YAML, manifests, registries, binary COPY framing.
//!
//! Tier: unit (property-based, hermetic).

use dpone_engine_xmin::copy_binary::{FrameChecker, encode_for_tests};
use dpone_engine_xmin::{Manifest, Registry};
use proptest::prelude::*;

const MANIFEST: &str = include_str!("../../../fixtures/xmin/manifest.yaml");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn yaml_documents_never_panic(text in "\\PC{0,300}") {
        let _ = Manifest::from_yaml(&text);
        let _ = Registry::from_yaml(&text);
    }

    #[test]
    fn mutated_manifests_never_panic(pos in 0usize..2000, byte in proptest::char::range(' ', '~')) {
        let mut text: Vec<char> = MANIFEST.chars().collect();
        let at = pos % text.len();
        text[at] = byte;
        let text: String = text.into_iter().collect();
        let _ = Manifest::from_yaml(&text);
    }

    #[test]
    fn copy_framing_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512), split in 1usize..64) {
        let mut c = FrameChecker::new(2, 1);
        for part in data.chunks(split) {
            if c.push(part).is_err() {
                break;
            }
        }
    }

    /// Any chunking gives what byte-by-byte feeding gives (whole tuples are read in place).
    #[test]
    fn copy_framing_is_independent_of_chunking(
        rows in 0usize..12,
        at in 0usize..400,
        byte in any::<u8>(),
        damage in any::<bool>(),
        split in 2usize..80,
    ) {
        let body: Vec<Vec<Option<&[u8]>>> = (0..rows)
            .map(|i| vec![Some(&b"\0\0\0\x01"[..]), if i % 3 == 0 { None } else { Some(&b"xyz"[..i % 4]) }])
            .collect();
        let mut s = encode_for_tests(&body);
        if damage {
            let at = at % s.len();
            s[at] = byte;
        }
        let feed = |chunk: usize| {
            let mut c = FrameChecker::new(2, 1);
            for part in s.chunks(chunk) {
                c.push(part)?;
            }
            Ok::<_, dpone_engine_xmin::copy_binary::FrameError>((c.rows(), c.complete()))
        };
        prop_assert_eq!(feed(split), feed(1));
        prop_assert_eq!(feed(s.len()), feed(1));
    }

    #[test]
    fn truncated_streams_are_never_complete(rows in 0usize..20, cut in 1usize..40) {
        let body: Vec<Vec<Option<&[u8]>>> = (0..rows).map(|_| vec![Some(&b"\0\0\0\x01"[..]), None]).collect();
        let s = encode_for_tests(&body);
        let cut = cut.min(s.len());
        let mut c = FrameChecker::new(2, 1);
        let r = c.push(&s[..s.len() - cut]);
        prop_assert!(r.is_err() || !c.complete());
    }
}
