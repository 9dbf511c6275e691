//! Canonical JSON (RFC 8785 for the value space the contract uses: objects with sorted keys,
//! no insignificant whitespace, integers, strings, booleans, null). Used for the input digest of
//! decision evidence, independent of serde_json's feature flags.

use serde::Serialize;
use serde_json::Value;

/// Serializes `value` as canonical JSON bytes.
pub fn canonical_json<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    let mut out = Vec::new();
    write_canonical(&value, &mut out)?;
    Ok(out)
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            // RFC 8785 orders keys by UTF-16 code units.
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
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
    fn keys_are_sorted_and_whitespace_removed() {
        let v = json!({"b": [1, {"z": null, "a": true}], "a": "x\n"});
        assert_eq!(
            canonical_json(&v).unwrap(),
            br#"{"a":"x\n","b":[1,{"a":true,"z":null}]}"#.to_vec()
        );
    }
}
