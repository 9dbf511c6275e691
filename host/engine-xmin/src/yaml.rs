//! Strict YAML: one document, ASCII only, no anchors, aliases, merge keys or tags, no duplicate
//! keys, no scalars whose meaning differs between YAML 1.1 and 1.2.
//!
//! The loader walks the event stream of `yaml-rust2` itself (its document loader silently keeps
//! the last of two equal keys) and builds a `serde_json::Value`; typed contracts are then read
//! from that value with `deny_unknown_fields`. Plain scalars resolve as follows:
//!
//! - `null`, `~` and an empty value are null; `true` and `false` are booleans;
//! - canonical decimal integers (`0`, `42`, `-7`) are numbers;
//! - canonical decimals (`0.05`) stay *strings* holding their exact text, so ratios are never
//!   rounded through binary floating point;
//! - everything that YAML 1.1 reads differently is refused with
//!   [`ErrorCode::YamlAmbiguousScalar`]: `yes`/`no`/`on`/`off`/`y`/`n` in any case, `True`,
//!   `NULL`, leading zeros, `+1`, `1_000`, `0x1f`, `0o17`, `1e3`, `.5`, `.inf`, `.nan`, and
//!   sexagesimal `1:30`.
//!
//! Quoted scalars are always strings.

use crate::error::{ErrorCode, Result, XminError};
use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

/// Largest document accepted, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 32;

/// Parses one strict YAML document into a JSON value.
pub fn parse_strict(text: &str) -> Result<Value> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(err(ErrorCode::YamlLimit, "document exceeds 1 MiB"));
    }
    if let Some(pos) = text.find(|c: char| !c.is_ascii()) {
        let line = text[..pos].matches('\n').count() + 1;
        return Err(err(
            ErrorCode::YamlNonAscii,
            format!("non-ASCII character on line {line}"),
        ));
    }
    let mut parser = Parser::new_from_str(text);
    let mut next = move || -> Result<(Event, usize)> {
        parser
            .next_token()
            .map(|(ev, mark)| (ev, mark.line()))
            .map_err(|e| err(ErrorCode::YamlSyntax, format!("syntax error: {}", e.info())))
    };
    expect(next()?.0, |e| matches!(e, Event::StreamStart))?;
    let (first, _) = next()?;
    if matches!(first, Event::StreamEnd) {
        return Err(err(
            ErrorCode::YamlDocumentCount,
            "the stream holds no document",
        ));
    }
    expect(first, |e| matches!(e, Event::DocumentStart))?;
    let (ev, line) = next()?;
    let value = build(ev, line, &mut next, 0)?;
    expect(next()?.0, |e| matches!(e, Event::DocumentEnd))?;
    match next()?.0 {
        Event::StreamEnd => Ok(value),
        _ => Err(err(
            ErrorCode::YamlDocumentCount,
            "the stream holds more than one document",
        )),
    }
}

fn err(code: ErrorCode, message: impl Into<String>) -> XminError {
    XminError::new(code, message)
}

fn expect(ev: Event, ok: impl Fn(&Event) -> bool) -> Result<()> {
    if ok(&ev) {
        Ok(())
    } else {
        Err(err(ErrorCode::YamlSyntax, "unexpected YAML structure"))
    }
}

fn build(
    ev: Event,
    line: usize,
    next: &mut impl FnMut() -> Result<(Event, usize)>,
    depth: usize,
) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(err(ErrorCode::YamlLimit, "nesting deeper than 32 levels"));
    }
    match ev {
        Event::Alias(_) => Err(err(
            ErrorCode::YamlAlias,
            format!("alias on line {line} (anchors and aliases are not allowed)"),
        )),
        Event::Scalar(text, style, anchor, tag) => {
            refuse_anchor_tag(anchor, tag.is_some(), line)?;
            scalar(&text, style, line)
        }
        Event::SequenceStart(anchor, tag) => {
            refuse_anchor_tag(anchor, tag.is_some(), line)?;
            let mut items = Vec::new();
            loop {
                let (ev, l) = next()?;
                if matches!(ev, Event::SequenceEnd) {
                    return Ok(Value::Array(items));
                }
                items.push(build(ev, l, next, depth + 1)?);
            }
        }
        Event::MappingStart(anchor, tag) => {
            refuse_anchor_tag(anchor, tag.is_some(), line)?;
            let mut map = Map::new();
            loop {
                let (ev, l) = next()?;
                let key = match ev {
                    Event::MappingEnd => return Ok(Value::Object(map)),
                    Event::Scalar(text, style, anchor, tag) => {
                        refuse_anchor_tag(anchor, tag.is_some(), l)?;
                        mapping_key(text, style, l)?
                    }
                    Event::Alias(_) => {
                        return Err(err(
                            ErrorCode::YamlAlias,
                            format!("alias on line {l} (anchors and aliases are not allowed)"),
                        ));
                    }
                    _ => {
                        return Err(err(
                            ErrorCode::YamlNonStringKey,
                            format!("mapping key on line {l} is not a string"),
                        ));
                    }
                };
                let (ev, vl) = next()?;
                let value = build(ev, vl, next, depth + 1)?;
                if map.contains_key(&key) {
                    return Err(err(
                        ErrorCode::YamlDuplicateKey,
                        format!("duplicate key {key:?} on line {l}"),
                    ));
                }
                map.insert(key, value);
            }
        }
        _ => Err(err(ErrorCode::YamlSyntax, "unexpected YAML structure")),
    }
}

fn refuse_anchor_tag(anchor: usize, tagged: bool, line: usize) -> Result<()> {
    if anchor != 0 {
        return Err(err(
            ErrorCode::YamlAlias,
            format!("anchor on line {line} (anchors and aliases are not allowed)"),
        ));
    }
    if tagged {
        return Err(err(
            ErrorCode::YamlTag,
            format!("explicit tag on line {line} is not allowed"),
        ));
    }
    Ok(())
}

fn mapping_key(text: String, style: TScalarStyle, line: usize) -> Result<String> {
    if text == "<<" && style == TScalarStyle::Plain {
        return Err(err(
            ErrorCode::YamlAlias,
            format!("merge key on line {line} is not allowed"),
        ));
    }
    match scalar(&text, style, line)? {
        Value::String(s) if !s.is_empty() && style == TScalarStyle::Plain && is_decimal(&s) => {
            Err(err(
                ErrorCode::YamlNonStringKey,
                format!("mapping key on line {line} is a number"),
            ))
        }
        Value::String(s) if !s.is_empty() => Ok(s),
        _ => Err(err(
            ErrorCode::YamlNonStringKey,
            format!("mapping key on line {line} is not a non-empty string"),
        )),
    }
}

fn scalar(text: &str, style: TScalarStyle, line: usize) -> Result<Value> {
    if style != TScalarStyle::Plain {
        return Ok(Value::String(text.to_owned()));
    }
    match text {
        "" | "~" | "null" => return Ok(Value::Null),
        "true" => return Ok(Value::Bool(true)),
        "false" => return Ok(Value::Bool(false)),
        _ => {}
    }
    let ambiguous = || {
        err(
            ErrorCode::YamlAmbiguousScalar,
            format!("plain scalar on line {line} is ambiguous; quote it or write it canonically"),
        )
    };
    let lower = text.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "yes" | "no" | "on" | "off" | "y" | "n" | "true" | "false" | "null"
    ) || matches!(lower.as_str(), ".inf" | "-.inf" | "+.inf" | ".nan")
    {
        return Err(ambiguous());
    }
    if is_canonical_integer(text) {
        if let Ok(n) = text.parse::<u64>() {
            return Ok(Value::Number(Number::from(n)));
        }
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Value::Number(Number::from(n)));
        }
        return Err(err(
            ErrorCode::YamlLimit,
            format!("integer on line {line} is out of range"),
        ));
    }
    if is_decimal(text) {
        return Ok(Value::String(text.to_owned()));
    }
    if looks_numeric(text) {
        return Err(ambiguous());
    }
    Ok(Value::String(text.to_owned()))
}

/// `0`, `42`, `-7`: no sign `+`, no leading zeros, no separators.
fn is_canonical_integer(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0"
}

/// `0.05`, `-1.25`: a canonical integer part, a dot, and at least one digit.
fn is_decimal(s: &str) -> bool {
    match s.split_once('.') {
        Some((int, frac)) => {
            is_canonical_integer(int)
                && !frac.is_empty()
                && frac.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// Anything a YAML 1.1 or 1.2 resolver could read as a number but that is not canonical.
fn looks_numeric(s: &str) -> bool {
    let t = s.trim_start_matches(['+', '-']);
    let Some(first) = t.bytes().next() else {
        return false;
    };
    if !(first.is_ascii_digit() || first == b'.') {
        return false;
    }
    // Dates and times such as 2026-08-20 or 12:30 are also resolved specially by YAML 1.1.
    t.bytes().all(|b| {
        b.is_ascii_hexdigit()
            || matches!(
                b,
                b'.' | b'_' | b':' | b'x' | b'o' | b'-' | b'+' | b'e' | b'E'
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> ErrorCode {
        parse_strict(text).unwrap_err().code()
    }

    #[test]
    fn plain_document() {
        let v = parse_strict("a: 1\nb: [x, 'y']\nc: {d: 0.05, e: true, f: null, g: -3}\n").unwrap();
        assert_eq!(v["a"], 1);
        assert_eq!(v["b"][1], "y");
        assert_eq!(v["c"]["d"], "0.05");
        assert_eq!(v["c"]["e"], true);
        assert!(v["c"]["f"].is_null());
        assert_eq!(v["c"]["g"], -3);
    }

    #[test]
    fn refusals_have_distinct_codes() {
        assert_eq!(code("a: 1\na: 2\n"), ErrorCode::YamlDuplicateKey);
        assert_eq!(code("a: {b: 1, b: 1}\n"), ErrorCode::YamlDuplicateKey);
        assert_eq!(code("a: &x 1\nb: *x\n"), ErrorCode::YamlAlias);
        assert_eq!(code("a: &x {c: 1}\nb:\n  <<: *x\n"), ErrorCode::YamlAlias);
        assert_eq!(code("a: !!str 1\n"), ErrorCode::YamlTag);
        assert_eq!(code("a: caf\u{e9}\n"), ErrorCode::YamlNonAscii);
        assert_eq!(code("a: yes\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: Off\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: True\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 007\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 0x1f\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1e3\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1_000\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: .inf\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1:30\n"), ErrorCode::YamlAmbiguousScalar);
        assert_eq!(code("a: 1\n---\nb: 2\n"), ErrorCode::YamlDocumentCount);
        assert_eq!(code(""), ErrorCode::YamlDocumentCount);
        assert_eq!(code("[a]: 1\n"), ErrorCode::YamlNonStringKey);
        assert_eq!(code("1: a\n"), ErrorCode::YamlNonStringKey);
        assert_eq!(code("a: [1\n"), ErrorCode::YamlSyntax);
    }

    #[test]
    fn quoted_scalars_stay_strings() {
        let v = parse_strict("a: 'yes'\nb: \"007\"\n").unwrap();
        assert_eq!(v["a"], "yes");
        assert_eq!(v["b"], "007");
    }

    #[test]
    fn depth_limit() {
        let deep = "[".repeat(40) + &"]".repeat(40);
        assert_eq!(code(&deep), ErrorCode::YamlLimit);
    }
}
