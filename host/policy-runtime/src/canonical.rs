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

/// RFC 8785 key order: UTF-16 code units. For keys without surrogate pairs this is the same as
/// comparing the strings byte by byte, which is what the fast path checks.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            let in_order = entries
                .windows(2)
                .all(|w| w[0].0.is_ascii() && w[1].0.is_ascii() && w[0].0 < w[1].0);
            if !in_order {
                entries.sort_by(|(a, _), (b, _)| utf16_order(a, b));
            }
            out.push(b'{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                write_canonical(value, out)?;
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
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
    fn keys_are_sorted_and_whitespace_removed() {
        let v = json!({"b": [1, {"z": null, "a": true}], "a": "x\n"});
        assert_eq!(
            canonical_json(&v).unwrap(),
            br#"{"a":"x\n","b":[1,{"a":true,"z":null}]}"#.to_vec()
        );
    }
}
