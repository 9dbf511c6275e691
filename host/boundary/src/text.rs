//! Quoting untrusted text in errors: short, one line, nothing that can reorder, hide or break a
//! terminal or log line.
//!
//! A value an attacker chose may reach an operator's terminal or log only through
//! [`excerpt`] (at most [`MAX_EXCERPT_CHARS`] characters, every non-ASCII, control or quote
//! character escaped) or through [`clean_message`], which makes a whole message safe: every
//! quoted run (`"…"` or `` `…` ``) is capped at [`MAX_EXCERPT_CHARS`] characters, control
//! characters, line and paragraph separators (U+2028, U+2029), bidi embeddings, overrides and
//! isolates (U+202A–U+202E, U+2066–U+2069) and every other format character are escaped as
//! `\u{…}`, and the message is capped at [`MAX_MESSAGE_CHARS`] characters, keeping its start
//! (the kind and field path) and its end (line and column).

use std::fmt::Write as _;

/// The longest quoted value an error carries, in characters.
pub const MAX_EXCERPT_CHARS: usize = 64;

/// The longest error message, in characters (after escaping).
pub const MAX_MESSAGE_CHARS: usize = 512;

/// Characters of the start and of the end kept from a message over [`MAX_MESSAGE_CHARS`].
const HEAD_CHARS: usize = 384;
const TAIL_CHARS: usize = 96;

/// Typographic characters the project's own messages use; shown as they are.
const PLAIN_NON_ASCII: &[char] = &['…', '—', '–', '→', '≤', '≥', '×'];

/// Whether `c` is a format character (Unicode general category Cf), a line or paragraph
/// separator, or a bidi control: characters that are invisible or change how text around them
/// is displayed.
pub fn is_format_or_separator(c: char) -> bool {
    matches!(c as u32,
        0x00AD
        | 0x0600..=0x0605
        | 0x061C
        | 0x06DD
        | 0x070F
        | 0x0890..=0x0891
        | 0x08E2
        | 0x180E
        | 0x200B..=0x200F
        | 0x2028..=0x202E
        | 0x2060..=0x2064
        | 0x2066..=0x206F
        | 0xFEFF
        | 0xFFF9..=0xFFFB
        | 0x110BD
        | 0x110CD
        | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A
        | 0xE0001
        | 0xE0020..=0xE007F)
}

/// Whether a message may show `c` as it is.
fn shown_in_message(c: char) -> bool {
    (c.is_ascii() && !c.is_ascii_control()) || PLAIN_NON_ASCII.contains(&c)
}

fn push_escaped(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:04x}}}", c as u32);
}

/// Quotes an untrusted value: `"` + at most [`MAX_EXCERPT_CHARS`] characters + `"`, with
/// quotes, backslashes, controls and every non-ASCII character escaped, and the number of
/// characters left out when it was longer.
pub fn excerpt(value: &str) -> String {
    let mut out = String::with_capacity(MAX_EXCERPT_CHARS + 16);
    out.push('"');
    for c in value.chars().take(MAX_EXCERPT_CHARS) {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => push_escaped(&mut out, c),
        }
    }
    out.push('"');
    let rest = value.chars().skip(MAX_EXCERPT_CHARS).count();
    if rest > 0 {
        let _ = write!(out, "…(+{rest} chars)");
    }
    out
}

/// Makes a one-line error message safe to print: quoted runs capped, dangerous characters
/// escaped, the whole capped (see the module documentation). Idempotent on safe messages.
pub fn clean_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS * 2));
    // The closing delimiter of the quoted run we are in, its character count, and how many of
    // its characters were left out.
    let mut quote: Option<char> = None;
    let mut in_quote = 0usize;
    let mut dropped = 0usize;
    let mut escaped = false;
    for c in message.chars() {
        if let Some(close) = quote {
            if !escaped && c == close {
                out.push(c);
                if dropped > 0 {
                    let _ = write!(out, "…(+{dropped} chars)");
                }
                quote = None;
                dropped = 0;
                continue;
            }
            escaped = !escaped && c == '\\';
            in_quote += 1;
            // A backslash that would start an escape as the last kept character would escape
            // the closing quote: it is left out with the rest.
            if in_quote > MAX_EXCERPT_CHARS || (in_quote == MAX_EXCERPT_CHARS && escaped) {
                dropped += 1;
                continue;
            }
        } else if c == '"' || c == '`' {
            quote = Some(c);
            in_quote = 0;
            dropped = 0;
            escaped = false;
            out.push(c);
            continue;
        }
        if shown_in_message(c) {
            out.push(c);
        } else {
            push_escaped(&mut out, c);
        }
    }
    if let Some(close) = quote
        && dropped > 0
    {
        // Closed, so that cleaning the result again changes nothing.
        out.push(close);
        let _ = write!(out, "…(+{dropped} chars)");
    }
    let count = out.chars().count();
    if count <= MAX_MESSAGE_CHARS {
        return out;
    }
    let head: String = out.chars().take(HEAD_CHARS).collect();
    let tail: String = out.chars().skip(count - TAIL_CHARS).collect();
    format!(
        "{head} …(+{} chars)… {tail}",
        count - HEAD_CHARS - TAIL_CHARS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &[char] = &[
        '\n',
        '\r',
        '\u{1b}',
        '\u{7f}',
        '\u{85}',
        '\u{2028}',
        '\u{2029}',
        '\u{202a}',
        '\u{202b}',
        '\u{202c}',
        '\u{202d}',
        '\u{202e}',
        '\u{2066}',
        '\u{2067}',
        '\u{2068}',
        '\u{2069}',
        '\u{200b}',
        '\u{200e}',
        '\u{200f}',
        '\u{feff}',
        '\u{061c}',
        '\u{e0041}',
    ];

    fn assert_safe(text: &str) {
        for c in text.chars() {
            assert!(!HOSTILE.contains(&c), "{:?} passed through", c);
            assert!(!c.is_control(), "{:?} passed through", c);
            assert!(!is_format_or_separator(c), "{:?} passed through", c);
        }
    }

    #[test]
    fn excerpt_caps_and_escapes() {
        let long = "x".repeat(1 << 20);
        let e = excerpt(&long);
        assert!(e.len() < 100, "{e}");
        assert!(e.ends_with("…(+1048512 chars)"), "{e}");
        for &c in HOSTILE {
            let e = excerpt(&format!("a{c}b"));
            assert_safe(&e);
            assert!(e.contains("\\u{"), "{e}");
        }
        assert_eq!(excerpt("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(
            excerpt("раураl"),
            "\"\\u{0440}\\u{0430}\\u{0443}\\u{0440}\\u{0430}l\""
        );
    }

    #[test]
    fn message_caps_quoted_runs_and_keeps_line_and_column() {
        let value = "v".repeat(1 << 20);
        let message = format!("invalid type: string \"{value}\", expected u64 at line 3 column 7");
        let clean = clean_message(&message);
        assert!(clean.chars().count() <= MAX_MESSAGE_CHARS, "{clean}");
        assert!(clean.starts_with("invalid type: string \""), "{clean}");
        assert!(
            clean.ends_with("expected u64 at line 3 column 7"),
            "{clean}"
        );
        let message = format!("unknown field `{value}`, expected `name`");
        let clean = clean_message(&message);
        assert!(
            clean.ends_with("`…(+1048512 chars), expected `name`"),
            "{clean}"
        );
        assert!(clean.len() < 200, "{clean}");
    }

    #[test]
    fn message_escapes_separators_and_bidi() {
        for &c in HOSTILE {
            let clean = clean_message(&format!("bad value \"a{c}b\" and a{c}b outside"));
            assert_safe(&clean);
        }
        assert_eq!(
            clean_message("line\u{2028}break \u{202e}evil"),
            "line\\u{2028}break \\u{202e}evil"
        );
    }

    #[test]
    fn message_without_quotes_is_capped() {
        let clean = clean_message(&"y".repeat(10_000));
        assert!(
            clean.chars().count() <= MAX_MESSAGE_CHARS + 32,
            "{}",
            clean.len()
        );
    }

    #[test]
    fn safe_messages_are_unchanged() {
        for m in [
            "cannot read the manifest: not a regular file",
            "duplicate key \"a\" on line 3",
            "the facts input is not JSON: expected value at line 1 column 1",
            "a bundle is loaded only after verification — see docs",
        ] {
            assert_eq!(clean_message(m), m);
            assert_eq!(clean_message(&clean_message(m)), m);
        }
    }

    #[test]
    fn cleaning_twice_changes_nothing() {
        let value = "v".repeat(1 << 16);
        for message in [
            format!("invalid type: string \"{value}\", expected u64 at line 3 column 7"),
            format!("unterminated \"{value}"),
            format!("key `{value}` and \u{202e}"),
            format!(
                "unknown field {:?} in target",
                "x?x?x?x?x\u{2028}x\u{2029}x\u{202a}x\u{202b}x\u{202c}x\u{202d}x\u{202e}x…"
            ),
            "y".repeat(10_000),
        ] {
            let once = clean_message(&message);
            assert_eq!(clean_message(&once), once);
        }
    }

    #[test]
    fn escaped_quote_inside_a_run() {
        let clean = clean_message(&format!("value \"a\\\"{}\" at line 1", "z".repeat(500)));
        assert!(clean.ends_with("\"…(+439 chars) at line 1"), "{clean}");
        assert!(clean.len() < 120, "{clean}");
    }
}
