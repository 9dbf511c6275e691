//! Canonical JSON (RFC 8785 for the value space the contract uses: objects with sorted keys,
//! no insignificant whitespace, integers, strings, booleans, null). Used for the input digest of
//! decision evidence, independent of serde_json's feature flags.
//!
//! Two writers produce the same bytes. The reference one goes through a `serde_json::Value`
//! (`canonical_value`); the direct one (`direct` below) writes straight from `Serialize` into a
//! buffer, sorting each object's entries in place, without building a `Value`. The direct writer
//! handles exactly the value space above with string keys; for anything else (floats, 128-bit
//! integers, bytes, non-string map keys, duplicate keys, serde_json's private types, any error)
//! it gives up and the value is written by the reference writer, so the bytes and errors are
//! always those of the reference writer.

use crate::digest::Sha256Digest;
use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;

mod direct;
mod typed;

/// Serializes `value` as canonical JSON bytes.
pub fn canonical_json<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut writer = direct::Writer::default();
    match writer.write(value) {
        Ok(()) => Ok(writer.into_bytes()),
        Err(direct::GaveUp) => canonical_value(&serde_json::to_value(value)?),
    }
}

/// sha256 of the canonical JSON of `value`, written into a per-thread buffer that is reused
/// from one decision to the next. The same digest as `Sha256Digest::of(&canonical_json(value)?)`.
pub(crate) fn canonical_sha256<T: Serialize>(value: &T) -> Result<Sha256Digest, serde_json::Error> {
    match with_thread_writer(|writer| {
        writer
            .write(value)
            .ok()
            .map(|()| Sha256Digest::of(writer.bytes()))
    }) {
        Some(digest) => Ok(digest),
        None => canonical_json(value).map(|bytes| Sha256Digest::of(&bytes)),
    }
}

/// The facts of a decision: their canonical JSON is written from their fields where a typed
/// writer exists (`typed`), else by the direct serde writer.
pub(crate) trait DecisionInput: Serialize {
    /// Appends the canonical JSON of `self` to `out` from its fields; `Err(GaveUp)` when this
    /// type has no typed writer (the default).
    fn write_typed(&self, _out: &mut Vec<u8>) -> Result<(), direct::GaveUp> {
        Err(direct::GaveUp)
    }
}

impl DecisionInput for dpone_policy_model::guard::GuardFacts {
    fn write_typed(&self, out: &mut Vec<u8>) -> Result<(), direct::GaveUp> {
        typed::Typed::write(self, out)
    }
}
impl DecisionInput for dpone_policy_model::delete_mode::DeleteModeFacts {}
impl DecisionInput for dpone_policy_model::admission::StaticFacts {}
impl DecisionInput for dpone_policy_model::admission::RuntimeFacts {}
impl DecisionInput for dpone_policy_model::scope::ScopeFacts {}

/// The decision of a call: its evidence holds it as a `serde_json::Value`, and its canonical
/// size is checked against the output limit.
pub(crate) trait DecisionOutput: Serialize {
    /// `serde_json::to_value(self)` and the length of its canonical JSON.
    fn evidence_output(&self) -> Result<(Value, usize), serde_json::Error> {
        let value = serde_json::to_value(self)?;
        let len = canonical_len(&value)?;
        Ok((value, len))
    }
}

impl DecisionOutput for dpone_policy_model::guard::GuardDecision {
    /// The size is that of the canonical JSON the typed writer writes for the decision (`typed`;
    /// the same bytes as for the value), not counted over the value.
    fn evidence_output(&self) -> Result<(Value, usize), serde_json::Error> {
        let value = serde_json::to_value(self)?;
        let written =
            with_typed_buffer(|out| typed::Typed::write(self, out).ok().map(|()| out.len()));
        let len = match written {
            Some(len) => len,
            None => canonical_len(&value)?,
        };
        Ok((value, len))
    }
}
impl DecisionOutput for dpone_policy_model::delete_mode::PlanDecision {}
impl DecisionOutput for dpone_policy_model::admission::StaticDecision {}
impl DecisionOutput for dpone_policy_model::admission::RuntimeDecision {}
impl DecisionOutput for dpone_policy_model::scope::ScopeDecision {}

/// Capacity of the typed writer's per-thread buffer kept from one decision to the next.
const MAX_KEPT_TYPED_BUFFER: usize = 64 << 10;

/// Runs `f` with this thread's (cleared) buffer for the typed writer, or returns `None` if it
/// is in use further up the stack.
fn with_typed_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> Option<R>) -> Option<R> {
    thread_local! {
        static TYPED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    TYPED.with(|cell| {
        let mut out = cell.try_borrow_mut().ok()?;
        out.clear();
        let result = f(&mut out);
        out.clear();
        // A very large value does not leave its buffer behind on the thread.
        if out.capacity() > MAX_KEPT_TYPED_BUFFER {
            *out = Vec::new();
        }
        result
    })
}

/// sha256 of the canonical JSON of a decision's facts: the `input_sha256` of its evidence. The
/// same digest as `Sha256Digest::of(&canonical_json(input)?)`; written by the typed writer into
/// a per-thread buffer where the type has one, else as [`canonical_sha256`].
pub(crate) fn input_sha256<I: DecisionInput>(input: &I) -> Result<Sha256Digest, serde_json::Error> {
    let typed =
        with_typed_buffer(|out| input.write_typed(out).ok().map(|()| Sha256Digest::of(out)));
    match typed {
        Some(digest) => Ok(digest),
        None => canonical_sha256(input),
    }
}

/// Runs `f` with this thread's direct writer (its buffers and learnt field orders are kept
/// between calls), or returns `None` if the writer is in use further up the stack (a
/// `Serialize` impl that itself asks for canonical JSON).
fn with_thread_writer<R>(f: impl FnOnce(&mut direct::Writer) -> Option<R>) -> Option<R> {
    thread_local! {
        static WRITER: RefCell<direct::Writer> = RefCell::new(direct::Writer::default());
    }
    WRITER.with(|cell| {
        let mut writer = cell.try_borrow_mut().ok()?;
        let result = f(&mut writer);
        writer.clear();
        result
    })
}

/// The reference path: through a `serde_json::Value`. Tests compare the direct writer with it.
#[cfg(test)]
fn canonical_json_via_value<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    canonical_value(&serde_json::to_value(value)?)
}

/// Serializes an already built JSON value as canonical JSON bytes.
pub fn canonical_value(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(512);
    write_canonical(value, &mut out)?;
    Ok(out)
}

/// Length of the canonical JSON of `value`, without keeping the bytes.
///
/// Counted without formatting anything when the value has no float ([`counted_len`]); a value
/// with a float is written into a counter by the reference writer.
pub(crate) fn canonical_len(value: &Value) -> Result<usize, serde_json::Error> {
    if let Some(len) = counted_len(value) {
        return Ok(len);
    }
    let mut counter = Counter(0);
    write_canonical(value, &mut counter)?;
    Ok(counter.0)
}

/// The length `write_canonical` writes for `value`, added up instead of written: key order does
/// not change a length, strings are measured with serde_json's escapes (the reference writer's),
/// integers by their digits. `None` for a value with a float (its shortest form is serde_json's
/// to find).
fn counted_len(value: &Value) -> Option<usize> {
    match value {
        Value::Null => Some(4),
        Value::Bool(true) => Some(4),
        Value::Bool(false) => Some(5),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Some(decimal_len(u)),
            (None, Some(i)) => Some(1 + decimal_len(i.unsigned_abs())),
            (None, None) => None,
        },
        Value::String(s) => Some(json_str_len(s)),
        Value::Array(items) => items.iter().try_fold(
            // `[`, `]` and a comma between elements.
            2 + items.len().saturating_sub(1),
            |len, item| Some(len.saturating_add(counted_len(item)?)),
        ),
        Value::Object(map) => map.iter().try_fold(
            // `{`, `}`, a comma between entries; each entry is `"key":value`.
            2 + map.len().saturating_sub(1),
            |len, (key, item)| {
                Some(
                    len.saturating_add(json_str_len(key))
                        .saturating_add(1)
                        .saturating_add(counted_len(item)?),
                )
            },
        ),
    }
}

/// Digits of `v` in decimal.
fn decimal_len(v: u64) -> usize {
    // `ilog10` of a `u64` is at most 19.
    v.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Length of `s` as a JSON string written by serde_json: the quotes, and every byte once except
/// those serde_json escapes: `"`, `\` and the five control characters with a short escape take
/// two bytes, every other control character below U+0020 six (`\u00XX`).
fn json_str_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let escapes: usize = if direct::needs_escape(bytes) {
        bytes
            .iter()
            .map(|&b| match b {
                b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 1,
                0x00..=0x1F => 5,
                _ => 0,
            })
            .sum()
    } else {
        0
    };
    bytes.len().saturating_add(2).saturating_add(escapes)
}

/// A writer that only counts.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// True when byte order of `key` against any other such key is RFC 8785's UTF-16 order: no
/// character at or above U+E000 (where UTF-16 surrogate pairs sort before the BMP's top).
fn byte_order_is_utf16_order(key: &str) -> bool {
    // In UTF-8 a character at or above U+E000 starts with a byte at or above 0xEE; every other
    // byte of such a key is below it.
    key.bytes().all(|b| b < 0xEE)
}

/// RFC 8785 key order: UTF-16 code units. For keys without surrogate pairs this is the same as
/// comparing the strings byte by byte, which is what the fast path checks.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_canonical<W: std::io::Write>(value: &Value, out: &mut W) -> Result<(), serde_json::Error> {
    let raw = |out: &mut W, bytes: &[u8]| out.write_all(bytes).map_err(serde_json::Error::io);
    match value {
        Value::Object(map) => {
            raw(out, b"{")?;
            // A map iterates in byte order of its keys; that is RFC 8785's order unless a key
            // has a character at or above U+E000. Only then are the entries collected and
            // sorted (no allocation on the common path).
            let sorted: Option<Vec<_>> = if map.keys().all(|k| byte_order_is_utf16_order(k))
                && map
                    .keys()
                    .zip(map.keys().skip(1))
                    .all(|(a, b)| a.as_str() < b.as_str())
            {
                None
            } else {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|(a, _), (b, _)| utf16_order(a, b));
                Some(entries)
            };
            let mut write_entry = |i: usize, key: &String, value: &Value| {
                if i > 0 {
                    raw(out, b",")?;
                }
                serde_json::to_writer(&mut *out, key)?;
                raw(out, b":")?;
                write_canonical(value, out)
            };
            match sorted {
                None => {
                    for (i, (key, value)) in map.iter().enumerate() {
                        write_entry(i, key, value)?;
                    }
                }
                Some(entries) => {
                    for (i, (key, value)) in entries.into_iter().enumerate() {
                        write_entry(i, key, value)?;
                    }
                }
            }
            raw(out, b"}")?;
        }
        Value::Array(items) => {
            raw(out, b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    raw(out, b",")?;
                }
                write_canonical(item, out)?;
            }
            raw(out, b"]")?;
        }
        scalar => serde_json::to_writer(&mut *out, scalar)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn non_ascii_keys_sort_by_utf16_code_units() {
        // U+FF61 sorts after U+1F600 in UTF-8 byte order but before it in UTF-16.
        let v = json!({"\u{1F600}": 1, "\u{FF61}": 2});
        let text = String::from_utf8(canonical_json(&v).unwrap()).unwrap();
        assert!(text.find('\u{1F600}').unwrap() < text.find('\u{FF61}').unwrap());
    }

    #[test]
    fn the_counted_length_is_the_written_length() {
        let v = json!({"b": [1, {"z": null, "a": "\u{FF61}\u{1F600}"}], "a": "x\n", "\u{1F600}": 1, "\u{FF61}": 2});
        assert_eq!(
            canonical_len(&v).unwrap(),
            canonical_json(&v).unwrap().len()
        );
    }

    /// Every byte at every position of strings of every length up to 20, alone and with a
    /// second byte: the eight-byte escape check agrees with a byte-by-byte one, and (for the
    /// ones that are UTF-8) the counted length of each string, as a value and as a key, with the
    /// written one.
    #[test]
    fn escape_checks_and_counted_lengths_agree_with_the_writer_for_every_byte_and_position() {
        let escaped = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        for len in 0..=20usize {
            for at in 0..len.max(1) {
                for byte in 0u8..=0xFF {
                    for other in [b'a', b'"', 0x1f, 0xC3, 0xFF] {
                        let mut bytes = vec![b'x'; len];
                        if let Some(slot) = bytes.get_mut(at) {
                            *slot = byte;
                        }
                        if len > 1 {
                            bytes[len - 1 - at] = other;
                        }
                        assert_eq!(
                            direct::needs_escape(&bytes),
                            bytes.iter().any(|&b| escaped(b)),
                            "{bytes:?}"
                        );
                        let Ok(text) = String::from_utf8(bytes) else {
                            continue;
                        };
                        let v = json!({ text.clone(): [text.clone(), 1] });
                        assert_eq!(
                            canonical_len(&v).unwrap(),
                            canonical_json(&v).unwrap().len(),
                            "{text:?}"
                        );
                    }
                }
            }
        }
        // Bytes with the high bit set next to an escaped byte (no borrow hides it) and alone.
        for filler in [0x80u8, 0xC3, 0xFE, 0xFF, 0x20, 0x21, 0x5B, 0x5D] {
            for len in 1..=17usize {
                assert!(!direct::needs_escape(&vec![filler; len]), "{filler:#x}");
                for at in 0..len {
                    for special in [0x00, 0x1F, b'"', b'\\'] {
                        let mut bytes = vec![filler; len];
                        bytes[at] = special;
                        assert!(direct::needs_escape(&bytes), "{bytes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn integers_are_written_and_counted_as_serde_json_writes_them() {
        let mut numbers: Vec<i128> = vec![0, u64::MAX.into(), i64::MIN.into(), i64::MAX.into()];
        for digits in 1..=19u32 {
            let p = 10i128.pow(digits);
            numbers.extend([p - 1, p, p + 1, -(p - 1), -p, -(p + 1)]);
        }
        for n in numbers {
            let value: Value = match (u64::try_from(n), i64::try_from(n)) {
                (Ok(u), _) => u.into(),
                (_, Ok(i)) => i.into(),
                _ => continue,
            };
            let reference = serde_json::to_vec(&value).unwrap();
            assert_eq!(canonical_json(&value).unwrap(), reference, "{n}");
            assert_eq!(canonical_len(&value).unwrap(), reference.len(), "{n}");
            same_as_reference(&n.to_string());
            if let Ok(u) = u64::try_from(n) {
                same_as_reference(&u);
                assert_eq!(canonical_json(&u).unwrap(), reference, "{n}");
            }
            if let Ok(i) = i64::try_from(n) {
                assert_eq!(canonical_json(&i).unwrap(), reference, "{n}");
            }
        }
    }

    #[test]
    fn a_float_is_counted_by_the_reference_writer() {
        let v = json!({"a": [1.5, -0.0, 1e300, 3], "b": "x"});
        assert_eq!(counted_len(&v), None);
        let mut written = Vec::new();
        write_canonical(&v, &mut written).unwrap();
        assert_eq!(canonical_len(&v).unwrap(), written.len());
    }

    /// Types of every serde shape the direct writer meets or refuses.
    mod shapes {
        use serde::Serialize;
        use std::collections::BTreeMap;

        #[derive(Serialize)]
        pub struct Unit;

        #[derive(Serialize)]
        pub struct Newtype(pub u8);

        #[derive(Serialize)]
        pub struct Pair(pub i64, pub String);

        #[derive(Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Shape {
            Plain,
            Wrapped(Option<u32>),
            Tuple(i8, bool),
            Record {
                zeta: u16,
                alpha: Vec<Shape>,
                mid: Unit,
            },
        }

        #[derive(Serialize)]
        #[serde(tag = "type")]
        pub enum Tagged {
            One { value: i32 },
        }

        #[derive(Serialize)]
        pub struct Sometimes {
            pub zz: u8,
            #[serde(skip_serializing_if = "Option::is_none")]
            pub mm: Option<u8>,
            pub aa: u8,
        }

        #[derive(Serialize)]
        pub struct Everything {
            pub sometimes: Vec<Sometimes>,
            pub z_last: Vec<Shape>,
            pub a_first: Option<Newtype>,
            pub m_pair: Pair,
            pub tagged: Tagged,
            pub map: BTreeMap<String, Option<bool>>,
            pub chars: (char, char),
            #[serde(rename = "\u{FF61}")]
            pub high_bmp: u64,
            #[serde(rename = "\u{1F600}")]
            pub astral: i64,
            pub empty: Vec<u8>,
        }
    }

    fn same_as_reference<T: Serialize>(value: &T) {
        let reference = canonical_json_via_value(value).map_err(|e| e.to_string());
        let direct = canonical_json(value).map_err(|e| e.to_string());
        assert_eq!(direct, reference);
        if let Ok(bytes) = &reference {
            assert_eq!(canonical_sha256(value).ok(), Some(Sha256Digest::of(bytes)));
            // Twice with one writer: the second time with the field orders it learnt.
            let mut writer = direct::Writer::default();
            for _ in 0..2 {
                if writer.write(value).is_ok() {
                    assert_eq!(writer.bytes(), bytes.as_slice());
                }
            }
        }
    }

    #[test]
    fn the_direct_writer_writes_the_reference_bytes_for_every_shape() {
        use shapes::*;
        let everything = Everything {
            sometimes: vec![
                Sometimes {
                    zz: 1,
                    mm: None,
                    aa: 2,
                },
                Sometimes {
                    zz: 3,
                    mm: Some(4),
                    aa: 5,
                },
                Sometimes {
                    zz: 6,
                    mm: None,
                    aa: 7,
                },
            ],
            z_last: vec![
                Shape::Plain,
                Shape::Wrapped(None),
                Shape::Wrapped(Some(7)),
                Shape::Tuple(-128, true),
                Shape::Record {
                    zeta: 1,
                    alpha: vec![Shape::Plain],
                    mid: Unit,
                },
            ],
            a_first: Some(Newtype(255)),
            m_pair: Pair(
                i64::MIN,
                "quote \" backslash \\ nl \n ctl \u{1} \u{7f} é \u{1F600}".into(),
            ),
            tagged: Tagged::One { value: -1 },
            map: [
                ("b", Some(true)),
                ("a", None),
                ("\u{FF61}", Some(false)),
                ("\u{1F600}", None),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
            chars: ('"', '\u{10FFFF}'),
            high_bmp: u64::MAX,
            astral: i64::MAX,
            empty: Vec::new(),
        };
        // The direct writer must not give up on any of these.
        let mut writer = direct::Writer::default();
        writer.write(&everything).expect("handled directly");
        same_as_reference(&everything);
        same_as_reference(&json!({"b": [1, {"z": null, "a": "\u{FF61}\u{1F600}"}], "a": "x\n"}));
        same_as_reference(&());
        same_as_reference(&"plain");
    }

    #[test]
    fn strings_and_keys_escape_as_serde_json_does() {
        let every_char: Vec<String> = (0u32..0x800)
            .chain([0xD7FF, 0xE000, 0xFEFF, 0xFFFF, 0x10000, 0x10FFFF])
            .filter_map(char::from_u32)
            .map(|c| format!("k{c}"))
            .collect();
        same_as_reference(&every_char);
        let as_keys: std::collections::BTreeMap<&str, usize> = every_char
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i))
            .collect();
        same_as_reference(&as_keys);
        // Every escaped byte at every position of longer strings.
        for special in ['"', '\\', '\u{0}', '\n', '\u{1f}', ' ', '\u{7f}', 'é'] {
            let strings: Vec<String> = (0..40)
                .map(|at| {
                    let mut s: String = "abcdefghijklmnopqrstuvwxyz0123456789ABCD".into();
                    s.insert(at, special);
                    s
                })
                .collect();
            same_as_reference(&strings);
        }
    }

    #[test]
    fn outside_the_value_space_the_reference_decides() {
        use std::collections::BTreeMap;
        // Floats, 128-bit integers, bytes, non-string keys: the direct writer gives up and the
        // result (bytes or error) is the reference writer's.
        let mut writer = direct::Writer::default();
        assert!(writer.write(&1.5f64).is_err());
        same_as_reference(&1.5f64);
        same_as_reference(&f64::NAN);
        same_as_reference(&u128::MAX);
        same_as_reference(&7u128);
        let int_keys: BTreeMap<u32, &str> = [(10, "ten"), (9, "nine")].into_iter().collect();
        assert!(writer.write(&int_keys).is_err());
        same_as_reference(&int_keys);
        let tuple_keys: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
        same_as_reference(&tuple_keys);
        same_as_reference(&serde_json::from_str::<Value>("12345678901234567890123").ok());
    }

    #[test]
    fn duplicate_keys_take_the_reference_path() {
        struct Twice;
        impl Serialize for Twice {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(None)?;
                map.serialize_entry("k", &1)?;
                map.serialize_entry("k", &2)?;
                map.end()
            }
        }
        let mut writer = direct::Writer::default();
        assert!(writer.write(&Twice).is_err());
        same_as_reference(&Twice);
    }

    #[test]
    fn every_fixture_input_has_the_reference_bytes() {
        use dpone_policy_model::{admission, delete_mode, guard, scope};
        fn check<T: serde::de::DeserializeOwned + DecisionInput>(input: &Value) {
            let typed: T = serde_json::from_value(input.clone()).expect("fixture parses");
            let mut writer = direct::Writer::default();
            writer
                .write(&typed)
                .expect("model types are handled directly");
            same_as_reference(&typed);
            // The digest a decision records (the typed writer where the kind has one).
            let reference = canonical_json_via_value(&typed).expect("reference");
            assert_eq!(
                input_sha256(&typed).expect("digest"),
                Sha256Digest::of(&reference)
            );
        }
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let read = |path: std::path::PathBuf| -> Value {
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
        };
        let mut checked = 0;
        for (file, function) in [
            ("admission-runtime", "admit-runtime"),
            ("admission-static", "admit-static"),
            ("delete-mode", "plan"),
            ("guard", "decide-guard"),
            ("scope", "decide-scope"),
        ] {
            let sample = read(fixtures.join(format!("samples/{file}.json")));
            let table = read(fixtures.join(format!("decision-tables/{file}.json")));
            let rows = table["rows"].as_array().expect("rows");
            for input in std::iter::once(&sample).chain(rows.iter().map(|r| &r["input"])) {
                match function {
                    "admit-runtime" => check::<admission::RuntimeFacts>(input),
                    "admit-static" => check::<admission::StaticFacts>(input),
                    "plan" => check::<delete_mode::DeleteModeFacts>(input),
                    "decide-guard" => check::<guard::GuardFacts>(input),
                    _ => check::<scope::ScopeFacts>(input),
                }
                checked += 1;
            }
        }
        assert!(checked > 10, "only {checked} fixture inputs");
    }

    #[test]
    fn the_guard_sample_keeps_its_input_digest() {
        // Recorded with the reference writer before the direct one existed.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/samples/guard.json");
        let facts: dpone_policy_model::guard::GuardFacts =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("parses");
        let pinned = "sha256:ceea612ba64080cfb6f5c38443c7532e603489ae1cfd07bab69485463c2607ae";
        assert_eq!(
            canonical_sha256(&facts).expect("digest").to_string(),
            pinned
        );
        // The path a decision takes: the guard's typed writer.
        assert_eq!(input_sha256(&facts).expect("digest").to_string(), pinned);
    }

    #[test]
    fn keys_are_sorted_and_whitespace_removed() {
        let v = json!({"b": [1, {"z": null, "a": true}], "a": "x\n"});
        assert_eq!(
            canonical_json(&v).unwrap(),
            br#"{"a":"x\n","b":[1,{"a":true,"z":null}]}"#.to_vec()
        );
    }
}
