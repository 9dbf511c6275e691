//! Key checks that must pass before source export: the composite key fits the 900-byte index
//! limit, and no text key value ends in U+0020 (SQL Server pads character equality, PostgreSQL
//! does not, so `'a'` and `'a '` would collide on the target only).

use crate::sql::KeyColumn;

/// SQL Server's clustered index key limit.
pub const MAX_INDEX_KEY_BYTES: u32 = 900;

/// Stable codes of key-shape failures.
pub const KEY_TOO_WIDE: &str = "mssql_transaction.target_key_too_wide";
/// A text key value ends in U+0020.
pub const KEY_TRAILING_SPACE: &str = "mssql_transaction.target_key_trailing_space";

/// Declared key width in bytes; `Err(code)` above [`MAX_INDEX_KEY_BYTES`].
pub fn check_key_width(keys: &[KeyColumn]) -> Result<u32, &'static str> {
    let total: u32 = keys.iter().map(|k| k.ty.index_bytes()).sum();
    if total <= MAX_INDEX_KEY_BYTES {
        Ok(total)
    } else {
        Err(KEY_TOO_WIDE)
    }
}

/// Rejects a text key value ending in U+0020 (other trailing whitespace is significant on both
/// sides and allowed).
pub fn check_text_key(value: &str) -> Result<(), &'static str> {
    if value.ends_with(' ') {
        Err(KEY_TRAILING_SPACE)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::KeyType;

    fn k(ty: KeyType) -> KeyColumn {
        KeyColumn {
            name: "k".into(),
            ty,
        }
    }

    #[test]
    fn width_limit() {
        assert_eq!(
            check_key_width(&[k(KeyType::Text { max_chars: 450 })]),
            Ok(900)
        );
        assert_eq!(
            check_key_width(&[k(KeyType::Text { max_chars: 446 }), k(KeyType::Int)]),
            Ok(896)
        );
        assert_eq!(
            check_key_width(&[k(KeyType::Text { max_chars: 450 }), k(KeyType::Int)]),
            Err(KEY_TOO_WIDE)
        );
        assert_eq!(
            check_key_width(&[k(KeyType::BigInt), k(KeyType::Uuid)]),
            Ok(24)
        );
    }

    #[test]
    fn trailing_space() {
        assert_eq!(check_text_key("a "), Err(KEY_TRAILING_SPACE));
        assert_eq!(check_text_key("a"), Ok(()));
        assert_eq!(check_text_key(" a"), Ok(()));
        assert_eq!(check_text_key("a\t"), Ok(()));
        assert_eq!(check_text_key("a\u{00a0}"), Ok(()));
        assert_eq!(check_text_key(""), Ok(()));
    }
}
