//! Strict YAML for manifests and registries: one document, ASCII only, no anchors, aliases,
//! merge keys or tags, no duplicate keys, and no plain scalar whose meaning differs between
//! YAML 1.1 and 1.2.
//!
//! [`parse`] walks the event stream of `yaml-rust2` itself (its document loader silently keeps
//! the last of two equal keys) and builds a `serde_json::Value`; typed contracts are then read
//! from that value with `deny_unknown_fields`. Plain scalars resolve as follows:
//!
//! - `null`, `~` and an empty value are null; `true` and `false` are booleans;
//! - canonical decimal integers (`0`, `42`, `-7`) are numbers;
//! - canonical decimals (`0.05`) stay *strings* holding their exact text, so ratios are never
//!   rounded through binary floating point;
//! - everything that YAML 1.1 reads differently is refused with
//!   [`ErrorKind::AmbiguousScalar`]: `yes`/`no`/`on`/`off`/`y`/`n` in any case, `True`, `NULL`,
//!   leading zeros, `+1`, `1_000`, `0x1f`, `0o17`, `1e3`, `.5`, `.inf`, `.nan`, sexagesimal
//!   `1:30` and dates.
//!
//! Quoted scalars are always strings.
//!
//! A refusal is an [`Error`]: an [`ErrorKind`], the line and the key path where it happened,
//! never a scalar value. Each caller maps the kinds onto its own stable error codes.

use serde_json::{Map, Number, Value};
use std::fmt;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

/// Largest document accepted, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 32;

/// Why a document was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The document exceeds [`MAX_DOCUMENT_BYTES`].
    DocumentTooLarge,
    /// The document nests deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A plain integer does not fit in `i64` or `u64`.
    IntegerOutOfRange,
    /// The document holds a non-ASCII character.
    NonAscii,
    /// The parser refused the text as YAML.
    Syntax,
    /// The event stream has an unexpected shape.
    UnexpectedStructure,
    /// The stream holds no document.
    NoDocument,
    /// The stream holds more than one document.
    SeveralDocuments,
    /// An alias (`*name`).
    Alias,
    /// An anchor (`&name`).
    Anchor,
    /// A plain `<<` merge key.
    MergeKey,
    /// An explicit tag (`!!str`, `!local`).
    Tag,
    /// A mapping key that is a sequence or a mapping.
    NonScalarKey,
    /// A plain mapping key that is a decimal number (`1.5`).
    DecimalKey,
    /// A mapping key that is not a non-empty string (`1`, `true`, `null`, `''`).
    NonStringKey,
    /// A mapping repeats a key.
    DuplicateKey,
    /// A plain scalar that YAML 1.1 and 1.2 read differently.
    AmbiguousScalar,
}

/// One step of a key path: a mapping key or a sequence index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathSegment {
    /// A mapping key.
    Key(String),
    /// A zero-based sequence index.
    Index(usize),
}

/// A refused document: the kind, the line and the key path; never a scalar value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    line: Option<usize>,
    path: Vec<PathSegment>,
    parser_message: Option<String>,
}

impl Error {
    fn new(kind: ErrorKind, line: Option<usize>, path: &[PathSegment]) -> Self {
        Self {
            kind,
            line,
            path: path.to_vec(),
            parser_message: None,
        }
    }

    /// Why the document was refused.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The line of the refused node, as the parser counts it, when known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The keys and indices leading to the refused node. For [`ErrorKind::DuplicateKey`] the
    /// last segment is the repeated key; for a refused key it is the path of its mapping.
    pub fn path(&self) -> &[PathSegment] {
        &self.path
    }

    /// For [`ErrorKind::Syntax`], the parser's description of the problem. It describes the
    /// structure (`mapping values are not allowed in this context`) and at most names one of the
    /// reserved indicators `@` or `` ` ``; it never quotes a scalar.
    pub fn parser_message(&self) -> Option<&str> {
        self.parser_message.as_deref()
    }
}

/// Names line numbers, never keys or scalar values.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = self.line.unwrap_or(0);
        match self.kind {
            ErrorKind::DocumentTooLarge => f.write_str("document exceeds 1 MiB"),
            ErrorKind::TooDeep => f.write_str("nesting deeper than 32 levels"),
            ErrorKind::IntegerOutOfRange => write!(f, "integer on line {line} is out of range"),
            ErrorKind::NonAscii => write!(f, "non-ASCII character on line {line}"),
            ErrorKind::Syntax => write!(f, "syntax error on line {line}"),
            ErrorKind::UnexpectedStructure => f.write_str("unexpected YAML structure"),
            ErrorKind::NoDocument => f.write_str("the stream holds no document"),
            ErrorKind::SeveralDocuments => f.write_str("the stream holds more than one document"),
            ErrorKind::Alias => write!(
                f,
                "alias on line {line} (anchors and aliases are not allowed)"
            ),
            ErrorKind::Anchor => write!(
                f,
                "anchor on line {line} (anchors and aliases are not allowed)"
            ),
            ErrorKind::MergeKey => write!(f, "merge key on line {line} is not allowed"),
            ErrorKind::Tag => write!(f, "explicit tag on line {line} is not allowed"),
            ErrorKind::NonScalarKey => write!(f, "mapping key on line {line} is not a string"),
            ErrorKind::DecimalKey => write!(f, "mapping key on line {line} is a number"),
            ErrorKind::NonStringKey => {
                write!(f, "mapping key on line {line} is not a non-empty string")
            }
            ErrorKind::DuplicateKey => write!(f, "duplicate key on line {line}"),
            ErrorKind::AmbiguousScalar => write!(
                f,
                "plain scalar on line {line} is ambiguous; quote it or write it canonically"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Parses one strict YAML document into a JSON value.
pub fn parse(text: &str) -> Result<Value, Error> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(Error::new(ErrorKind::DocumentTooLarge, None, &[]));
    }
    if let Some(pos) = text.find(|c: char| !c.is_ascii()) {
        let line = text[..pos].matches('\n').count() + 1;
        return Err(Error::new(ErrorKind::NonAscii, Some(line), &[]));
    }
    let mut walker = Walker {
        parser: Parser::new_from_str(text),
        path: Vec::new(),
    };
    walker.expect(|e| matches!(e, Event::StreamStart))?;
    let (first, _) = walker.next()?;
    if matches!(first, Event::StreamEnd) {
        return Err(walker.err(ErrorKind::NoDocument, None));
    }
    if !matches!(first, Event::DocumentStart) {
        return Err(walker.err(ErrorKind::UnexpectedStructure, None));
    }
    let (ev, line) = walker.next()?;
    let value = walker.build(ev, line, 0)?;
    walker.expect(|e| matches!(e, Event::DocumentEnd))?;
    match walker.next()?.0 {
        Event::StreamEnd => Ok(value),
        _ => Err(walker.err(ErrorKind::SeveralDocuments, None)),
    }
}

struct Walker<'a> {
    parser: Parser<std::str::Chars<'a>>,
    path: Vec<PathSegment>,
}

impl Walker<'_> {
    fn err(&self, kind: ErrorKind, line: Option<usize>) -> Error {
        Error::new(kind, line, &self.path)
    }

    fn next(&mut self) -> Result<(Event, usize), Error> {
        match self.parser.next_token() {
            Ok((ev, mark)) => Ok((ev, mark.line())),
            Err(e) => {
                let mut error = self.err(ErrorKind::Syntax, Some(e.marker().line()));
                error.parser_message = Some(e.info().to_owned());
                Err(error)
            }
        }
    }

    fn expect(&mut self, ok: impl Fn(&Event) -> bool) -> Result<(), Error> {
        let (ev, _) = self.next()?;
        if ok(&ev) {
            Ok(())
        } else {
            Err(self.err(ErrorKind::UnexpectedStructure, None))
        }
    }

    fn build(&mut self, ev: Event, line: usize, depth: usize) -> Result<Value, Error> {
        if depth > MAX_DEPTH {
            return Err(self.err(ErrorKind::TooDeep, Some(line)));
        }
        match ev {
            Event::Alias(_) => Err(self.err(ErrorKind::Alias, Some(line))),
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
                    self.path.push(PathSegment::Index(items.len()));
                    items.push(self.build(ev, l, depth + 1)?);
                    self.path.pop();
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
                        Event::Alias(_) => return Err(self.err(ErrorKind::Alias, Some(l))),
                        _ => return Err(self.err(ErrorKind::NonScalarKey, Some(l))),
                    };
                    self.path.push(PathSegment::Key(key.clone()));
                    let (ev, vl) = self.next()?;
                    let value = self.build(ev, vl, depth + 1)?;
                    if map.contains_key(&key) {
                        return Err(self.err(ErrorKind::DuplicateKey, Some(l)));
                    }
                    self.path.pop();
                    map.insert(key, value);
                }
            }
            _ => Err(self.err(ErrorKind::UnexpectedStructure, None)),
        }
    }

    fn refuse_anchor_tag(&self, anchor: usize, tagged: bool, line: usize) -> Result<(), Error> {
        if anchor != 0 {
            return Err(self.err(ErrorKind::Anchor, Some(line)));
        }
        if tagged {
            return Err(self.err(ErrorKind::Tag, Some(line)));
        }
        Ok(())
    }

    fn mapping_key(&self, text: String, style: TScalarStyle, line: usize) -> Result<String, Error> {
        if text == "<<" && style == TScalarStyle::Plain {
            return Err(self.err(ErrorKind::MergeKey, Some(line)));
        }
        match self.scalar(&text, style, line)? {
            Value::String(s) if style == TScalarStyle::Plain && is_decimal(&s) => {
                Err(self.err(ErrorKind::DecimalKey, Some(line)))
            }
            Value::String(s) if !s.is_empty() => Ok(s),
            _ => Err(self.err(ErrorKind::NonStringKey, Some(line))),
        }
    }

    fn scalar(&self, text: &str, style: TScalarStyle, line: usize) -> Result<Value, Error> {
        if style != TScalarStyle::Plain {
            return Ok(Value::String(text.to_owned()));
        }
        match text {
            "" | "~" | "null" => return Ok(Value::Null),
            "true" => return Ok(Value::Bool(true)),
            "false" => return Ok(Value::Bool(false)),
            _ => {}
        }
        let ambiguous = || self.err(ErrorKind::AmbiguousScalar, Some(line));
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
            return Err(self.err(ErrorKind::IntegerOutOfRange, Some(line)));
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

/// Anything a YAML 1.1 or 1.2 resolver could read as a number (or a date or time, such as
/// `2026-08-20` or `12:30`) but that is not canonical.
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
mod tests;
