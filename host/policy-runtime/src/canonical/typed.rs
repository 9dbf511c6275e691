//! Canonical JSON written from a typed value's fields, without serde.
//!
//! Each object's keys are written in RFC 8785 order (for these ASCII keys, byte order), as
//! literals; nothing is sorted, recorded or copied at run time. The bytes must be exactly those
//! of the reference writer (`canonical_value` of `serde_json::to_value`): every type here is
//! destructured without `..`, so a field added to the model breaks the build here instead of
//! being left out of the digest, and the tests compare both writers over generated values (a
//! key written out of order, a renamed field or a different representation fails every one).
//!
//! Only the guard has typed writers (its facts for the input digest, its decision for the
//! output's canonical size): the guard decides before every run. The other kinds go through
//! the direct serde writer (`direct`) and `canonical_len`.

use super::direct::{GaveUp, write_i64, write_json_str, write_u64};
use dpone_policy_model::guard::{
    ActiveOwner, Allowed, AuthorityAllow, Checkpoint, DeleteGuards, EmptySnapshotPolicy,
    GuardDecision, GuardFacts, LoadKind, RepairAuthority, TransferBinding,
};
use dpone_policy_model::types::Reason;

/// A value whose canonical JSON is written from its fields.
pub(crate) trait Typed {
    /// Appends the canonical JSON of `self` to `out`. `Err` only from a string that serde_json
    /// refuses to write (it never does), in which case `out` holds a partial value.
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp>;
}

/// Writes an object whose keys are given in RFC 8785 order: each `"key":` (with the comma
/// before it) is one literal of fixed length, then the value. Keys are field names: ASCII
/// without a character JSON escapes.
macro_rules! object {
    ($out:expr, $first_key:literal => $first:expr $(, $key:literal => $value:expr)* $(,)?) => {{
        let out: &mut Vec<u8> = $out;
        out.extend_from_slice(concat!("{\"", $first_key, "\":").as_bytes());
        Typed::write($first, out)?;
        $(
            out.extend_from_slice(concat!(",\"", $key, "\":").as_bytes());
            Typed::write($value, out)?;
        )*
        out.push(b'}');
        Ok(())
    }};
}

impl Typed for u64 {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        write_u64(out, *self);
        Ok(())
    }
}

impl Typed for u32 {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        write_u64(out, u64::from(*self));
        Ok(())
    }
}

impl Typed for i64 {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        write_i64(out, *self);
        Ok(())
    }
}

impl Typed for bool {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
        Ok(())
    }
}

impl Typed for String {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        write_json_str(out, self)
    }
}

impl<T: Typed> Typed for Option<T> {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        match self {
            Some(value) => value.write(out),
            None => {
                out.extend_from_slice(b"null");
                Ok(())
            }
        }
    }
}

impl Typed for Checkpoint {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self { xmin, revision } = self;
        object!(
            out,
            "revision" => revision,
            "xmin" => xmin,
        )
    }
}

impl Typed for DeleteGuards {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self {
            max_delete_rows,
            max_delete_ratio,
        } = self;
        object!(
            out,
            "max_delete_ratio" => max_delete_ratio,
            "max_delete_rows" => max_delete_rows,
        )
    }
}

impl Typed for EmptySnapshotPolicy {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        // Unit variants, `rename_all = "snake_case"`.
        out.extend_from_slice(match self {
            Self::Fail => b"\"fail\"".as_slice(),
            Self::ApplyGuards => b"\"apply_guards\"".as_slice(),
        });
        Ok(())
    }
}

impl Typed for AuthorityAllow {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self {
            full_baseline,
            max_delete_rows,
            max_delete_ratio,
        } = self;
        object!(
            out,
            "full_baseline" => full_baseline,
            "max_delete_ratio" => max_delete_ratio,
            "max_delete_rows" => max_delete_rows,
        )
    }
}

impl Typed for TransferBinding {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self {
            old_state_key,
            old_checkpoint,
        } = self;
        object!(
            out,
            "old_checkpoint" => old_checkpoint,
            "old_state_key" => old_state_key,
        )
    }
}

impl Typed for RepairAuthority {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self {
            authority_id,
            recorded_digest,
            observed_digest,
            state_key,
            scope_hash,
            checkpoint,
            not_before,
            expires_at,
            consumed,
            allow,
            transfer,
        } = self;
        object!(
            out,
            "allow" => allow,
            "authority_id" => authority_id,
            "checkpoint" => checkpoint,
            "consumed" => consumed,
            "expires_at" => expires_at,
            "not_before" => not_before,
            "observed_digest" => observed_digest,
            "recorded_digest" => recorded_digest,
            "scope_hash" => scope_hash,
            "state_key" => state_key,
            "transfer" => transfer,
        )
    }
}

impl Typed for ActiveOwner {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self {
            state_key,
            checkpoint,
        } = self;
        object!(
            out,
            "checkpoint" => checkpoint,
            "state_key" => state_key,
        )
    }
}

impl Typed for GuardFacts {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self {
            now,
            state_key,
            scope_hash,
            checkpoint,
            target_active_keys,
            target_total_rows,
            snapshot_keys,
            missing_keys,
            guards,
            empty_snapshot,
            other_owner,
            authority,
        } = self;
        object!(
            out,
            "authority" => authority,
            "checkpoint" => checkpoint,
            "empty_snapshot" => empty_snapshot,
            "guards" => guards,
            "missing_keys" => missing_keys,
            "now" => now,
            "other_owner" => other_owner,
            "scope_hash" => scope_hash,
            "snapshot_keys" => snapshot_keys,
            "state_key" => state_key,
            "target_active_keys" => target_active_keys,
            "target_total_rows" => target_total_rows,
        )
    }
}

impl Typed for Reason {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self { code, message } = self;
        object!(
            out,
            "code" => code,
            "message" => message,
        )
    }
}

impl Typed for LoadKind {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        // Unit variants, `rename_all = "snake_case"`.
        out.extend_from_slice(match self {
            Self::Incremental => b"\"incremental\"".as_slice(),
            Self::FullBaseline => b"\"full_baseline\"".as_slice(),
        });
        Ok(())
    }
}

impl Typed for Allowed {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        let Self {
            load,
            authority_used,
            transfer_from,
            reason,
        } = self;
        object!(
            out,
            "authority_used" => authority_used,
            "load" => load,
            "reason" => reason,
            "transfer_from" => transfer_from,
        )
    }
}

impl Typed for GuardDecision {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), GaveUp> {
        // Newtype variants, externally tagged, `rename_all = "snake_case"`.
        match self {
            Self::Allow(allowed) => object!(out, "allow" => allowed),
            Self::Deny(reason) => object!(out, "deny" => reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{canonical_value, input_sha256};
    use crate::digest::Sha256Digest;

    /// A small deterministic generator (splitmix64), so a failure replays.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn bool(&mut self) -> bool {
            self.next() & 1 == 1
        }

        /// Integers at every digit boundary and the extremes, or anything.
        fn u64(&mut self) -> u64 {
            match self.below(4) {
                0 => [
                    0,
                    1,
                    9,
                    10,
                    99,
                    100,
                    999_999,
                    1_000_000,
                    u64::MAX - 1,
                    u64::MAX,
                ][self.below(10) as usize],
                1 => 10u64.pow(self.below(20) as u32) - u64::from(self.bool()),
                2 => self.below(1_000_000),
                _ => self.next(),
            }
        }

        fn i64(&mut self) -> i64 {
            match self.below(4) {
                0 => [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX][self.below(6) as usize],
                1 => -(self.below(1 << 40) as i64),
                _ => self.next() as i64,
            }
        }

        fn u32(&mut self) -> u32 {
            (self.u64() >> (32 * u64::from(self.bool()))) as u32
        }

        /// Strings with every kind of character serde_json treats differently: plain ASCII,
        /// `"` and `\`, every control character, DEL, two-, three- and four-byte characters
        /// (around U+E000, where UTF-16 order departs from byte order).
        fn string(&mut self) -> String {
            const PIECES: &[&str] = &[
                "a",
                "Z",
                "0",
                " ",
                "_",
                "-",
                "\"",
                "\\",
                "/",
                "\u{7f}",
                "é",
                "\u{FF61}",
                "\u{E000}",
                "\u{1F600}",
                "\u{10FFFF}",
                "3f6c2a9e1b7d4c08a5e2f91d6b3c7a40",
            ];
            let len = self.below(24);
            (0..len)
                .map(|_| {
                    if self.below(5) == 0 {
                        // A control character below U+0020.
                        char::from(self.below(0x20) as u8).to_string()
                    } else {
                        PIECES[self.below(PIECES.len() as u64) as usize].to_owned()
                    }
                })
                .collect()
        }

        fn option<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
            self.bool().then(|| f(self))
        }

        fn checkpoint(&mut self) -> Checkpoint {
            Checkpoint {
                xmin: self.u64(),
                revision: self.u64(),
            }
        }

        fn facts(&mut self) -> GuardFacts {
            GuardFacts {
                now: self.i64(),
                state_key: self.string(),
                scope_hash: self.string(),
                checkpoint: self.option(Self::checkpoint),
                target_active_keys: self.u64(),
                target_total_rows: self.u64(),
                snapshot_keys: self.u64(),
                missing_keys: self.u64(),
                guards: DeleteGuards {
                    max_delete_rows: self.option(Self::u64),
                    max_delete_ratio: self.option(Self::u32),
                },
                empty_snapshot: if self.bool() {
                    EmptySnapshotPolicy::Fail
                } else {
                    EmptySnapshotPolicy::ApplyGuards
                },
                other_owner: self.option(|g| ActiveOwner {
                    state_key: g.string(),
                    checkpoint: g.checkpoint(),
                }),
                authority: self.option(|g| RepairAuthority {
                    authority_id: g.string(),
                    recorded_digest: g.string(),
                    observed_digest: g.string(),
                    state_key: g.string(),
                    scope_hash: g.string(),
                    checkpoint: g.option(Self::checkpoint),
                    not_before: g.i64(),
                    expires_at: g.i64(),
                    consumed: g.bool(),
                    allow: AuthorityAllow {
                        full_baseline: g.bool(),
                        max_delete_rows: g.option(Self::u64),
                        max_delete_ratio: g.option(Self::u32),
                    },
                    transfer: g.option(|g| TransferBinding {
                        old_state_key: g.string(),
                        old_checkpoint: g.checkpoint(),
                    }),
                }),
            }
        }
    }

    impl Gen {
        fn reason(&mut self) -> Reason {
            Reason {
                code: self.string(),
                message: self.string(),
            }
        }

        fn decision(&mut self) -> GuardDecision {
            if self.below(3) == 0 {
                return GuardDecision::Deny(self.reason());
            }
            GuardDecision::Allow(Allowed {
                load: if self.bool() {
                    LoadKind::Incremental
                } else {
                    LoadKind::FullBaseline
                },
                authority_used: self.option(Self::string),
                transfer_from: self.option(|g| TransferBinding {
                    old_state_key: g.string(),
                    old_checkpoint: g.checkpoint(),
                }),
                reason: self.reason(),
            })
        }
    }

    /// The guard's decision as evidence: the typed writer writes the canonical JSON of the
    /// value `serde_json::to_value` makes, so the size checked against the output limit is that
    /// value's canonical length.
    #[test]
    fn the_guard_decision_size_is_the_reference_one_for_generated_decisions() {
        use crate::canonical::{DecisionOutput, canonical_len};
        let mut generator = Gen(0x0B5E_0034);
        let mut out = Vec::new();
        for _ in 0..20_000 {
            let decision = generator.decision();
            let expected = serde_json::to_value(&decision).expect("value");
            out.clear();
            decision.write(&mut out).expect("typed");
            assert_eq!(out, canonical_value(&expected).expect("canonical"));
            let (evidence_value, len) = decision.evidence_output().expect("evidence");
            assert_eq!(evidence_value, expected);
            assert_eq!(len, canonical_len(&expected).expect("len"));
        }
    }

    /// A decision far above the output limit is measured exactly (the size check refuses it),
    /// and the large buffer it needed is not kept for the next decision.
    #[test]
    fn an_oversized_guard_decision_is_measured_exactly() {
        use crate::canonical::{DecisionOutput, canonical_len};
        for message in ["m\"\u{1}".repeat(100_000), "ok".to_owned()] {
            let decision = GuardDecision::Deny(Reason {
                code: "TOO_LARGE".to_owned(),
                message,
            });
            let (value, len) = decision.evidence_output().expect("evidence");
            assert_eq!(value, serde_json::to_value(&decision).expect("value"));
            assert_eq!(len, canonical_len(&value).expect("len"));
        }
    }

    fn reference(facts: &GuardFacts) -> Vec<u8> {
        canonical_value(&serde_json::to_value(facts).expect("value")).expect("reference")
    }

    /// The typed writer against the reference writer on generated facts: every optional part
    /// present and absent, integers at every digit boundary, strings with every escape.
    #[test]
    fn the_typed_writer_writes_the_reference_bytes_for_generated_guard_facts() {
        let mut generator = Gen(0x5EED_0034);
        let mut out = Vec::new();
        let mut with_authority = 0;
        for _ in 0..20_000 {
            let facts = generator.facts();
            let expected = reference(&facts);
            out.clear();
            facts.write(&mut out).expect("typed");
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&expected),
                "{facts:?}"
            );
            assert_eq!(
                input_sha256(&facts).expect("digest"),
                Sha256Digest::of(&expected)
            );
            with_authority += usize::from(facts.authority.is_some());
        }
        assert!(with_authority > 5_000, "{with_authority}");
    }

    /// Facts with every optional part present, and with none.
    #[test]
    fn the_typed_writer_matches_the_reference_on_full_and_empty_facts() {
        let mut generator = Gen(1);
        let full = std::iter::repeat_with(|| generator.facts())
            .find(|f| {
                f.checkpoint.is_some()
                    && f.other_owner.is_some()
                    && f.guards.max_delete_rows.is_some()
                    && f.guards.max_delete_ratio.is_some()
                    && f.authority.as_ref().is_some_and(|a| {
                        a.checkpoint.is_some()
                            && a.transfer.is_some()
                            && a.allow.max_delete_rows.is_some()
                            && a.allow.max_delete_ratio.is_some()
                    })
            })
            .expect("generated");
        let empty = GuardFacts {
            now: 0,
            state_key: String::new(),
            scope_hash: String::new(),
            checkpoint: None,
            target_active_keys: 0,
            target_total_rows: 0,
            snapshot_keys: 0,
            missing_keys: 0,
            guards: DeleteGuards::default(),
            empty_snapshot: EmptySnapshotPolicy::default(),
            other_owner: None,
            authority: None,
        };
        for facts in [full, empty] {
            let mut out = Vec::new();
            facts.write(&mut out).expect("typed");
            assert_eq!(out, reference(&facts));
        }
    }
}
