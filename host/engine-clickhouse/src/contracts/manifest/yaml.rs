//! Strict YAML for the manifest and the connection registry: one document, ASCII only, no
//! anchors, aliases, merge keys or tags, no duplicate keys, and no plain scalar whose meaning
//! differs between YAML 1.1 and 1.2.
//!
//! Same crate and the same rules as the XMin route's loader: the event stream of `yaml-rust2` is
//! walked directly (its document loader silently keeps the last of two equal keys) into a
//! `serde_json::Value`. Plain scalars resolve as follows:
//!
//! - `null`, `~` and an empty value are null; `true` and `false` are booleans;
//! - canonical decimal integers (`0`, `42`, `-7`) are numbers;
//! - canonical decimals (`0.05`) stay strings holding their exact text;
//! - everything YAML 1.1 reads differently (`yes`/`no`/`on`/`off`/`y`/`n` in any case, `True`,
//!   `NULL`, leading zeros, `+1`, `1_000`, `0x1f`, `0o17`, `1e3`, `.5`, `.inf`, `.nan`,
//!   sexagesimal `1:30`) is refused as ambiguous.
//!
//! Quoted scalars are always strings. Messages name line numbers, never scalar values.

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

use super::{Document, ErrorKind, ManifestError};

/// Largest document accepted, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 32;

type Result<T> = std::result::Result<T, ManifestError>;

/// Parses one strict YAML document into a JSON value.
pub fn parse_strict(text: &str, doc: Document) -> Result<Value> {
    let err = |kind, message: String| ManifestError::new(doc, kind, message);
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(err(ErrorKind::YamlLimit, "document exceeds 1 MiB".into()));
    }
    if let Some(pos) = text.find(|c: char| !c.is_ascii()) {
        let line = text[..pos].matches('\n').count() + 1;
        return Err(err(
            ErrorKind::YamlNonAscii,
            format!("non-ASCII character on line {line}"),
        ));
    }
    let mut walker = Walker {
        parser: Parser::new_from_str(text),
        doc,
    };
    walker.expect(|e| matches!(e, Event::StreamStart))?;
    let (first, _) = walker.next()?;
    if matches!(first, Event::StreamEnd) {
        return Err(err(
            ErrorKind::YamlDocumentCount,
            "the stream holds no document".into(),
        ));
    }
    if !matches!(first, Event::DocumentStart) {
        return Err(err(
            ErrorKind::YamlSyntax,
            "unexpected YAML structure".into(),
        ));
    }
    let (ev, line) = walker.next()?;
    let value = walker.build(ev, line, 0)?;
    walker.expect(|e| matches!(e, Event::DocumentEnd))?;
    match walker.next()?.0 {
        Event::StreamEnd => Ok(value),
        _ => Err(err(
            ErrorKind::YamlDocumentCount,
            "the stream holds more than one document".into(),
        )),
    }
}

struct Walker<'a> {
    parser: Parser<std::str::Chars<'a>>,
    doc: Document,
}

impl Walker<'_> {
    fn err(&self, kind: ErrorKind, message: impl Into<String>) -> ManifestError {
        ManifestError::new(self.doc, kind, message)
    }

    fn next(&mut self) -> Result<(Event, usize)> {
        match self.parser.next_token() {
            Ok((ev, mark)) => Ok((ev, mark.line())),
            Err(e) => Err(self.err(
                ErrorKind::YamlSyntax,
                format!("syntax error on line {}", e.marker().line()),
            )),
        }
    }

    fn expect(&mut self, ok: impl Fn(&Event) -> bool) -> Result<()> {
        let (ev, _) = self.next()?;
        if ok(&ev) {
            Ok(())
        } else {
            Err(self.err(ErrorKind::YamlSyntax, "unexpected YAML structure"))
        }
    }

    fn build(&mut self, ev: Event, line: usize, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(self.err(ErrorKind::YamlLimit, "nesting deeper than 32 levels"));
        }
        match ev {
            Event::Alias(_) => Err(self.err(
                ErrorKind::YamlAlias,
                format!("alias on line {line} (anchors and aliases are not allowed)"),
            )),
            Event::Scalar(text, style, anchor, tag) => {
                self.refuse_anchor_tag(anchor, tag.is_some(), line)?;
                self.scalar(&text, style, line)
            }
            Event::SequenceStart(anchor, tag) => {
                self.refuse_anchor_tag(anchor, tag.is_some(), line)?;
                let mut items = Vec::new();
                loop {
                    let (ev, l) = self.next()?;
                    if matches!(ev, Event::SequenceEnd) {
                        return Ok(Value::Array(items));
                    }
                    items.push(self.build(ev, l, depth + 1)?);
                }
            }
            Event::MappingStart(anchor, tag) => {
                self.refuse_anchor_tag(anchor, tag.is_some(), line)?;
                let mut map = Map::new();
                loop {
                    let (ev, l) = self.next()?;
                    let key = match ev {
                        Event::MappingEnd => return Ok(Value::Object(map)),
                        Event::Scalar(text, style, anchor, tag) => {
                            self.refuse_anchor_tag(anchor, tag.is_some(), l)?;
                            self.mapping_key(text, style, l)?
                        }
                        Event::Alias(_) => {
                            return Err(self.err(
                                ErrorKind::YamlAlias,
                                format!("alias on line {l} (anchors and aliases are not allowed)"),
                            ));
                        }
                        _ => {
                            return Err(self.err(
                                ErrorKind::YamlNonStringKey,
                                format!("mapping key on line {l} is not a string"),
                            ));
                        }
                    };
                    let (ev, vl) = self.next()?;
                    let value = self.build(ev, vl, depth + 1)?;
                    if map.contains_key(&key) {
                        return Err(self.err(
                            ErrorKind::YamlDuplicateKey,
                            format!("duplicate key on line {l}"),
                        ));
                    }
                    map.insert(key, value);
                }
            }
            _ => Err(self.err(ErrorKind::YamlSyntax, "unexpected YAML structure")),
        }
    }

    fn refuse_anchor_tag(&self, anchor: usize, tagged: bool, line: usize) -> Result<()> {
        if anchor != 0 {
            return Err(self.err(
                ErrorKind::YamlAlias,
                format!("anchor on line {line} (anchors and aliases are not allowed)"),
            ));
        }
        if tagged {
            return Err(self.err(
                ErrorKind::YamlTag,
                format!("explicit tag on line {line} is not allowed"),
            ));
        }
        Ok(())
    }

    fn mapping_key(&self, text: String, style: TScalarStyle, line: usize) -> Result<String> {
        if text == "<<" && style == TScalarStyle::Plain {
            return Err(self.err(
                ErrorKind::YamlAlias,
                format!("merge key on line {line} is not allowed"),
            ));
        }
        match self.scalar(&text, style, line)? {
            Value::String(s) if style == TScalarStyle::Plain && is_decimal(&s) => Err(self.err(
                ErrorKind::YamlNonStringKey,
                format!("mapping key on line {line} is a number"),
            )),
            Value::String(s) if !s.is_empty() => Ok(s),
            _ => Err(self.err(
                ErrorKind::YamlNonStringKey,
                format!("mapping key on line {line} is not a non-empty string"),
            )),
        }
    }

    fn scalar(&self, text: &str, style: TScalarStyle, line: usize) -> Result<Value> {
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
            self.err(
                ErrorKind::YamlAmbiguousScalar,
                format!(
                    "plain scalar on line {line} is ambiguous; quote it or write it canonically"
                ),
            )
        };
        let lower = text.to_ascii_lowercase();
        if matches!(
            lower.as_str(),
            "yes"
                | "no"
                | "on"
                | "off"
                | "y"
                | "n"
                | "true"
                | "false"
                | "null"
                | ".inf"
                | "-.inf"
                | "+.inf"
                | ".nan"
        ) {
            return Err(ambiguous());
        }
        if is_canonical_integer(text) {
            if let Ok(n) = text.parse::<u64>() {
                return Ok(Value::Number(Number::from(n)));
            }
            if let Ok(n) = text.parse::<i64>() {
                return Ok(Value::Number(Number::from(n)));
            }
            return Err(self.err(
                ErrorKind::YamlLimit,
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

/// Anything a YAML 1.1 or 1.2 resolver could read as a number (or a date or time) but that is
/// not canonical.
fn looks_numeric(s: &str) -> bool {
    let t = s.trim_start_matches(['+', '-']);
    let Some(first) = t.bytes().next() else {
        return false;
    };
    if !(first.is_ascii_digit() || first == b'.') {
        return false;
    }
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

    fn kind(text: &str) -> ErrorKind {
        match parse_strict(text, Document::Manifest) {
            Err(e) => e.kind(),
            Ok(v) => panic!("accepted: {v}"),
        }
    }

    #[test]
    fn a_plain_document_resolves_scalars_strictly() {
        let v = parse_strict(
            "a: 1\nb: [x, 'y']\nc: {d: 0.05, e: true, f: null, g: -3}\n",
            Document::Manifest,
        )
        .expect("parses");
        assert_eq!(v["a"], 1);
        assert_eq!(v["b"][1], "y");
        assert_eq!(v["c"]["d"], "0.05");
        assert_eq!(v["c"]["e"], true);
        assert!(v["c"]["f"].is_null());
        assert_eq!(v["c"]["g"], -3);
    }

    #[test]
    fn every_refusal_has_its_kind() {
        assert_eq!(kind("a: 1\na: 2\n"), ErrorKind::YamlDuplicateKey);
        assert_eq!(kind("a: {b: 1, b: 1}\n"), ErrorKind::YamlDuplicateKey);
        assert_eq!(kind("a: &x 1\nb: *x\n"), ErrorKind::YamlAlias);
        assert_eq!(kind("a: &x {c: 1}\nb:\n  <<: *x\n"), ErrorKind::YamlAlias);
        assert_eq!(kind("a: !!str 1\n"), ErrorKind::YamlTag);
        assert_eq!(kind("a: caf\u{e9}\n"), ErrorKind::YamlNonAscii);
        assert_eq!(kind("a: yes\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 007\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 1e3\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 1:30\n"), ErrorKind::YamlAmbiguousScalar);
        assert_eq!(kind("a: 1\n---\nb: 2\n"), ErrorKind::YamlDocumentCount);
        assert_eq!(kind(""), ErrorKind::YamlDocumentCount);
        assert_eq!(kind("[a]: 1\n"), ErrorKind::YamlNonStringKey);
        assert_eq!(kind("1: a\n"), ErrorKind::YamlNonStringKey);
        assert_eq!(kind("a: [1\n"), ErrorKind::YamlSyntax);
        assert_eq!(kind("a: 99999999999999999999\n"), ErrorKind::YamlLimit);
        let deep = "[".repeat(40) + &"]".repeat(40);
        assert_eq!(kind(&deep), ErrorKind::YamlLimit);
    }

    #[test]
    fn messages_name_lines_not_values() {
        let e = parse_strict(
            "a: 1\nsecret_value: 2\nsecret_value: 3\n",
            Document::Registry,
        )
        .expect_err("duplicate");
        assert!(!e.to_string().contains("secret_value"), "{e}");
        assert!(e.to_string().contains("line"), "{e}");
    }
}
