//! SQL text helpers: identifier and literal quoting, and error mapping without row values.

use dpone_engine_xmin::{ErrorCode, XminError};

/// Quotes an identifier (`"a""b"`).
pub fn ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// `"schema"."name"`.
pub fn qualified(schema: &str, name: &str) -> String {
    format!("{}.{}", ident(schema), ident(name))
}

/// Quotes a string literal for a session with `standard_conforming_strings = on` (verified by
/// the caller). Returns `None` for text holding NUL, which PostgreSQL text cannot carry.
pub fn literal(s: &str) -> Option<String> {
    if s.contains('\0') {
        return None;
    }
    Some(format!("'{}'", s.replace('\'', "''")))
}

/// A `format_type` output we accept in generated DDL: lower-case letters, digits, spaces,
/// parentheses, commas, underscores, brackets and double quotes never appear unbalanced here.
pub fn safe_type_sql(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes().all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b' ' | b'(' | b')' | b',' | b'_' | b'[' | b']')
        })
}

/// The SQLSTATE of a driver error, if the server sent one.
pub fn sqlstate(e: &tokio_postgres::Error) -> Option<String> {
    e.code().map(|c| c.code().to_owned())
}

/// Maps a driver error to a code: never the driver's text (its DETAIL can quote key values).
pub fn db_error(code: ErrorCode, step: &str, e: &tokio_postgres::Error) -> XminError {
    match sqlstate(e).as_deref() {
        Some("40001") | Some("40P01") => XminError::new(
            ErrorCode::TargetSerializationConflict,
            format!("{step}: serialization conflict; retry"),
        ),
        Some(state) => XminError::new(code, format!("{step} failed (SQLSTATE {state})")),
        None if e.is_closed() => XminError::new(code, format!("{step} failed (connection closed)")),
        None => XminError::new(code, format!("{step} failed (no SQLSTATE)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(literal("it's").unwrap(), "'it''s'");
        assert!(literal("a\0b").is_none());
        assert!(safe_type_sql("character varying(20)"));
        assert!(safe_type_sql("numeric(10,2)"));
        assert!(safe_type_sql("integer[]"));
        assert!(!safe_type_sql("int); drop table x; --"));
    }
}
