//! Canonical JSON (RFC 8785 for the value space the contract uses: objects with sorted keys,
//! no insignificant whitespace, integers, strings, booleans, null). Used for the input digest of
//! decision evidence, independent of serde_json's feature flags.

use serde::Serialize;
use serde_json::Value;

/// Serializes `value` as canonical JSON bytes.
pub fn canonical_json<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    canonical_value(&serde_json::to_value(value)?)
}

/// Serializes an already built JSON value as canonical JSON bytes.
pub fn canonical_value(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(512);
    write_canonical(value, &mut out)?;
    Ok(out)
}

/// Length of the canonical JSON of `value`, without keeping the bytes.
pub(crate) fn canonical_len(value: &Value) -> Result<usize, serde_json::Error> {
    let mut counter = Counter(0);
    write_canonical(value, &mut counter)?;
    Ok(counter.0)
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
    key.chars().all(|c| (c as u32) < 0xE000)
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

    #[test]
    fn keys_are_sorted_and_whitespace_removed() {
        let v = json!({"b": [1, {"z": null, "a": true}], "a": "x\n"});
        assert_eq!(
            canonical_json(&v).unwrap(),
            br#"{"a":"x\n","b":[1,{"a":true,"z":null}]}"#.to_vec()
        );
    }
}
