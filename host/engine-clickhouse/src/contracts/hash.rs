//! Digests and the length-prefixed canonical encoding every identity is derived from.
//!
//! # Canonical identity encoding
//!
//! An identity `H(domain; f1, f2, …)` is
//!
//! ```text
//! SHA-256( field(b"dpone.identity.v1") || field(domain) || field(f1) || field(f2) || … )
//! field(x) = u64_be(len(x)) || x
//! ```
//!
//! Strings are their UTF-8 bytes; integers are fixed-width big-endian (`u32` → 4 bytes,
//! `u64` → 8 bytes); a digest is its 32 raw bytes. Because every field carries its length, no two
//! different field lists encode to the same byte string, and the domain keeps identities of
//! different kinds apart even when their fields coincide.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest, written as 64 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses exactly 64 lowercase hex characters.
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() != 64 || s.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Self(out))
    }

    /// The first `n` hex characters (`n` ≤ 64).
    pub fn hex_prefix(&self, n: usize) -> String {
        let mut s = self.to_hex();
        s.truncate(n.min(64));
        s
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.hex_prefix(16))
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s)
            .ok_or_else(|| serde::de::Error::custom("expected 64 lowercase hex digits"))
    }
}

/// Builder for `H(domain; fields…)` (see the module docs).
pub struct IdentityHasher(Sha256);

impl IdentityHasher {
    /// Starts an identity of the given domain.
    pub fn new(domain: &str) -> Self {
        let mut h = Self(Sha256::new());
        h.field(b"dpone.identity.v1");
        h.field(domain.as_bytes());
        h
    }

    fn field(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
    }

    /// Appends a byte-string field.
    pub fn bytes(mut self, bytes: &[u8]) -> Self {
        self.field(bytes);
        self
    }

    /// Appends a UTF-8 string field.
    pub fn str(self, s: &str) -> Self {
        self.bytes(s.as_bytes())
    }

    /// Appends a `u32` field (4 bytes, big-endian).
    pub fn u32(self, v: u32) -> Self {
        self.bytes(&v.to_be_bytes())
    }

    /// Appends a `u64` field (8 bytes, big-endian).
    pub fn u64(self, v: u64) -> Self {
        self.bytes(&v.to_be_bytes())
    }

    /// Appends a digest field (its 32 raw bytes).
    pub fn digest(self, d: &Digest) -> Self {
        self.bytes(&d.0)
    }

    /// The identity.
    pub fn finish(self) -> Digest {
        Digest(self.0.finalize().into())
    }
}

/// A random 128-bit token (fence token, DDL correlation token), 32 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token(pub [u8; 16]);

impl Token {
    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses exactly 32 lowercase hex characters.
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() != 32 || s.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let mut out = [0u8; 16];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Self(out))
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({})", &self.to_hex()[..8])
    }
}

impl Serialize for Token {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Token {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Token::parse(&s).ok_or_else(|| serde::de::Error::custom("expected 32 lowercase hex digits"))
    }
}

/// A table UUID in the canonical 8-4-4-4-12 lowercase form.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// A random (version 4, RFC 4122 variant) UUID from 16 random bytes.
    pub fn from_random(mut bytes: [u8; 16]) -> Self {
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Self(bytes)
    }

    /// Parses the canonical lowercase or uppercase 8-4-4-4-12 form.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
            return None;
        }
        let compact: String = s.chars().filter(|c| *c != '-').collect();
        let mut out = [0u8; 16];
        hex::decode_to_slice(compact.to_ascii_lowercase(), &mut out).ok()?;
        Some(Self(out))
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = hex::encode(self.0);
        write!(
            f,
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid({self})")
    }
}

impl Serialize for Uuid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Uuid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Uuid::parse(&s).ok_or_else(|| serde::de::Error::custom("expected a canonical UUID"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_length_prefixed() {
        // Unit: moving a byte between fields changes the identity.
        let a = IdentityHasher::new("d").str("ab").str("c").finish();
        let b = IdentityHasher::new("d").str("a").str("bc").finish();
        assert_ne!(a, b);
        let c = IdentityHasher::new("e").str("ab").str("c").finish();
        assert_ne!(a, c);
    }

    #[test]
    fn identity_encoding_is_stable() {
        // Unit: the documented encoding, computed by hand.
        let mut bytes = Vec::new();
        for f in [&b"dpone.identity.v1"[..], b"d", b"x"] {
            bytes.extend_from_slice(&(f.len() as u64).to_be_bytes());
            bytes.extend_from_slice(f);
        }
        assert_eq!(
            IdentityHasher::new("d").str("x").finish(),
            Digest::of(&bytes)
        );
    }

    #[test]
    fn hex_round_trips_and_rejects_uppercase() {
        let d = Digest::of(b"x");
        assert_eq!(Digest::parse(&d.to_hex()), Some(d));
        assert_eq!(Digest::parse(&d.to_hex().to_uppercase()), None);
        let u = Uuid::from_random([7; 16]);
        assert_eq!(Uuid::parse(&u.to_string()), Some(u));
        assert_eq!(u.to_string().as_bytes()[14], b'4');
        let t = Token([9; 16]);
        assert_eq!(Token::parse(&t.to_hex()), Some(t));
    }
}
