//! The spelling `system.columns.type` reports for a ClickHouse type expression.
//!
//! The engine compares observed column types with the declared ones byte for byte, so a
//! manifest must declare each type the way ClickHouse reports it; [`reported_type_spelling`]
//! names that spelling so the parser can refuse any other with the expected one in the message.

/// The spelling `system.columns.type` reports for a type expression, or `None` when the text
/// is not a well-formed type expression (unbalanced parentheses or quotes, stray characters).
///
/// ClickHouse normalizes spacing (`Decimal(18, 4)`, `DateTime64(3, 'UTC')`,
/// `Enum8('a' = 1)`) and rewrites `Decimal32/64/128/256(S)` to `Decimal(9/18/38/76, S)`. The
/// engine compares observed column types with the declared ones byte for byte, so a manifest
/// must use the reported spelling; this function names it.
pub fn reported_type_spelling(text: &str) -> Option<String> {
    #[derive(PartialEq)]
    enum Tok {
        Word(String),
        Quoted(String),
        Punct(char),
    }
    let mut toks = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' => i += 1,
            b'(' | b')' | b',' | b'=' => {
                toks.push(Tok::Punct(c as char));
                i += 1;
            }
            b'\'' => {
                let start = i;
                i += 1;
                loop {
                    match b.get(i) {
                        None => return None,
                        Some(b'\\') => i += 2,
                        Some(b'\'') => break,
                        Some(_) => i += 1,
                    }
                }
                i += 1;
                toks.push(Tok::Quoted(text.get(start..i)?.to_owned()));
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.' => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'-' | b'.'))
                {
                    i += 1;
                }
                toks.push(Tok::Word(text[start..i].to_owned()));
            }
            _ => return None,
        }
    }
    // Balanced parentheses, and nothing after the outermost close.
    let mut depth = 0i32;
    for (n, t) in toks.iter().enumerate() {
        match t {
            Tok::Punct('(') => depth += 1,
            Tok::Punct(')') => {
                depth -= 1;
                if depth < 0 || (depth == 0 && n + 1 != toks.len()) {
                    return None;
                }
            }
            _ => {}
        }
    }
    if depth != 0 || toks.is_empty() {
        return None;
    }
    // DecimalN(S) → Decimal(P, S).
    let mut k = 0;
    while k + 3 < toks.len() {
        let precision = match &toks[k] {
            Tok::Word(w) if w == "Decimal32" => Some("9"),
            Tok::Word(w) if w == "Decimal64" => Some("18"),
            Tok::Word(w) if w == "Decimal128" => Some("38"),
            Tok::Word(w) if w == "Decimal256" => Some("76"),
            _ => None,
        };
        if let Some(p) = precision
            && toks[k + 1] == Tok::Punct('(')
            && matches!(toks[k + 2], Tok::Word(_))
            && toks[k + 3] == Tok::Punct(')')
        {
            toks[k] = Tok::Word("Decimal".into());
            toks.insert(k + 2, Tok::Word(p.into()));
            toks.insert(k + 3, Tok::Punct(','));
        }
        k += 1;
    }
    // Enum8/Enum16 elements in value order: the server reports them sorted by value.
    let mut k = 0;
    while k + 1 < toks.len() {
        let is_enum = matches!(&toks[k], Tok::Word(w) if w == "Enum8" || w == "Enum16");
        if is_enum && toks[k + 1] == Tok::Punct('(') {
            let start = k + 2;
            let mut elements: Vec<(i64, Tok, Tok)> = Vec::new();
            let mut j = start;
            loop {
                match (toks.get(j), toks.get(j + 1), toks.get(j + 2)) {
                    (Some(Tok::Quoted(n)), Some(Tok::Punct('=')), Some(Tok::Word(v))) => {
                        let value: i64 = v.parse().ok()?;
                        elements.push((value, Tok::Quoted(n.clone()), Tok::Word(v.clone())));
                    }
                    _ => return None,
                }
                j += 3;
                match toks.get(j) {
                    Some(Tok::Punct(',')) => j += 1,
                    Some(Tok::Punct(')')) => break,
                    _ => return None,
                }
            }
            elements.sort_by_key(|e| e.0);
            let mut rebuilt = Vec::with_capacity(j - start);
            for (n, (_, name, value)) in elements.into_iter().enumerate() {
                if n > 0 {
                    rebuilt.push(Tok::Punct(','));
                }
                rebuilt.push(name);
                rebuilt.push(Tok::Punct('='));
                rebuilt.push(value);
            }
            toks.splice(start..j, rebuilt);
        }
        k += 1;
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut prev_word = false;
    for t in &toks {
        match t {
            Tok::Word(w) | Tok::Quoted(w) => {
                if prev_word {
                    out.push(' ');
                }
                out.push_str(w);
                prev_word = true;
            }
            Tok::Punct(',') => {
                out.push_str(", ");
                prev_word = false;
            }
            Tok::Punct('=') => {
                out.push_str(" = ");
                prev_word = false;
            }
            Tok::Punct(p) => {
                out.push(*p);
                prev_word = false;
            }
        }
    }
    Some(out)
}
