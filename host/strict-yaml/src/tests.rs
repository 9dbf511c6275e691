//! Unit tests: what is accepted, one refusal per [`ErrorKind`], key paths and messages.

use super::*;

fn refused(text: &str) -> Error {
    match parse(text) {
        Err(e) => e,
        Ok(v) => panic!("accepted {text:?} as {v}"),
    }
}

fn kind(text: &str) -> ErrorKind {
    refused(text).kind()
}

fn key(k: &str) -> PathSegment {
    PathSegment::Key(k.to_owned())
}

#[test]
fn a_plain_document_resolves_scalars_strictly() {
    let v = parse("a: 1\nb: [x, 'y']\nc: {d: 0.05, e: true, f: null, g: -3, h: ~, i:}\n")
        .expect("parses");
    assert_eq!(v["a"], 1);
    assert_eq!(v["b"][0], "x");
    assert_eq!(v["b"][1], "y");
    assert_eq!(v["c"]["d"], "0.05");
    assert_eq!(v["c"]["e"], true);
    assert!(v["c"]["f"].is_null());
    assert!(v["c"]["h"].is_null());
    assert!(v["c"]["i"].is_null());
    assert_eq!(v["c"]["g"], -3);
}

#[test]
fn quoted_scalars_stay_strings() {
    let v = parse("a: 'yes'\nb: \"007\"\n'<<': 1\n'1.5': x\n").expect("parses");
    assert_eq!(v["a"], "yes");
    assert_eq!(v["b"], "007");
    assert_eq!(v["<<"], 1);
    assert_eq!(v["1.5"], "x");
}

#[test]
fn integers_cover_i64_and_u64() {
    let v = parse("a: -9223372036854775808\nb: 18446744073709551615\n").expect("parses");
    assert_eq!(v["a"], i64::MIN);
    assert_eq!(v["b"], u64::MAX);
}

#[test]
fn limits() {
    let big = "a: ".to_owned() + &"x".repeat(MAX_DOCUMENT_BYTES);
    assert_eq!(kind(&big), ErrorKind::DocumentTooLarge);
    let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
    assert!(parse(&nested(MAX_DEPTH + 1)).is_ok());
    assert_eq!(kind(&nested(MAX_DEPTH + 2)), ErrorKind::TooDeep);
    assert_eq!(kind(&nested(40)), ErrorKind::TooDeep);
    assert_eq!(
        kind("a: 99999999999999999999\n"),
        ErrorKind::IntegerOutOfRange
    );
    assert_eq!(
        kind("a: -99999999999999999999\n"),
        ErrorKind::IntegerOutOfRange
    );
}

#[test]
fn every_refusal_has_its_kind() {
    assert_eq!(kind("a: caf\u{e9}\n"), ErrorKind::NonAscii);
    assert_eq!(kind("a: [1\n"), ErrorKind::Syntax);
    assert_eq!(kind("a: b: c\n"), ErrorKind::Syntax);
    assert_eq!(kind(""), ErrorKind::NoDocument);
    assert_eq!(kind("# only a comment\n"), ErrorKind::NoDocument);
    assert_eq!(kind("a: 1\n---\nb: 2\n"), ErrorKind::SeveralDocuments);
    assert_eq!(kind("a: [*x]\n"), ErrorKind::Syntax, "unknown alias");
    assert_eq!(kind("a: &x 1\nb: *x\n"), ErrorKind::Anchor);
    assert_eq!(kind("&a [1]\n"), ErrorKind::Anchor);
    assert_eq!(kind("a: &x {c: 1}\nb:\n  <<: *x\n"), ErrorKind::Anchor);
    assert_eq!(kind("<<: 1\n"), ErrorKind::MergeKey);
    assert_eq!(kind("a: !!str 1\n"), ErrorKind::Tag);
    assert_eq!(kind("!!map {a: 1}\n"), ErrorKind::Tag);
    assert_eq!(kind("a: !local 1\n"), ErrorKind::Tag);
    assert_eq!(kind("[a]: 1\n"), ErrorKind::NonScalarKey);
    assert_eq!(kind("{a: 1}: 2\n"), ErrorKind::NonScalarKey);
    assert_eq!(kind("1.5: a\n"), ErrorKind::DecimalKey);
    assert_eq!(kind("1: a\n"), ErrorKind::NonStringKey);
    assert_eq!(kind("true: a\n"), ErrorKind::NonStringKey);
    assert_eq!(kind("~: a\n"), ErrorKind::NonStringKey);
    assert_eq!(kind("'': a\n"), ErrorKind::NonStringKey);
    assert_eq!(kind("a: 1\na: 2\n"), ErrorKind::DuplicateKey);
    assert_eq!(kind("a: {b: 1, b: 1}\n"), ErrorKind::DuplicateKey);
    for ambiguous in [
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "N",
        "True",
        "FALSE",
        "NULL",
        "007",
        "+1",
        "-0",
        "1_000",
        "0x1f",
        "0o17",
        "1e3",
        ".5",
        "1.",
        ".inf",
        "-.inf",
        "+.inf",
        ".NaN",
        "1:30",
        "2026-08-20",
    ] {
        assert_eq!(
            kind(&format!("a: {ambiguous}\n")),
            ErrorKind::AmbiguousScalar,
            "{ambiguous}"
        );
    }
}

#[test]
fn aliases_are_refused_where_the_parser_lets_them_through() {
    // yaml-rust2 reports an alias to an unknown anchor as a syntax error, so an alias event
    // only ever follows an anchor; both refusals name the line.
    let e = refused("- &a 1\n- *a\n");
    assert_eq!((e.kind(), e.line()), (ErrorKind::Anchor, Some(1)));
    assert_eq!(
        e.to_string(),
        Error::new(ErrorKind::Anchor, Some(1), &[]).to_string()
    );
    assert_eq!(
        Error::new(ErrorKind::Alias, Some(3), &[]).to_string(),
        "alias on line 3 (anchors and aliases are not allowed)"
    );
}

#[test]
fn errors_carry_line_and_key_path() {
    let e = refused("a:\n  - x\n  - {k: 1, k: 2}\n");
    assert_eq!(e.kind(), ErrorKind::DuplicateKey);
    assert_eq!(e.line(), Some(3));
    assert_eq!(e.path(), [key("a"), PathSegment::Index(1), key("k")]);

    let e = refused("a:\n  b: yes\n");
    assert_eq!((e.kind(), e.line()), (ErrorKind::AmbiguousScalar, Some(2)));
    assert_eq!(e.path(), [key("a"), key("b")]);

    let e = refused("a:\n  1.5: x\n");
    assert_eq!(e.kind(), ErrorKind::DecimalKey);
    assert_eq!(
        e.path(),
        [key("a")],
        "a refused key is not part of the path"
    );

    let e = refused("a: 1\nb: \u{e9}\n");
    assert_eq!((e.kind(), e.line()), (ErrorKind::NonAscii, Some(2)));
    assert!(e.path().is_empty());
}

#[test]
fn syntax_errors_keep_the_parser_description() {
    let e = refused("a: b: c\n");
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert_eq!(
        e.parser_message(),
        Some("mapping values are not allowed in this context")
    );
    assert_eq!(e.to_string(), "syntax error on line 1");
    assert_eq!(refused("a: yes\n").parser_message(), None);
}

#[test]
fn messages_name_lines_not_values() {
    for text in [
        "a: 1\nsecret_value: 2\nsecret_value: 3\n",
        "a: secret_value\nb: yes\n",
        "secret_value: [1\n",
        "secret_value: 99999999999999999999\n",
    ] {
        let e = refused(text);
        let message = e.to_string();
        assert!(!message.contains("secret_value"), "{message}");
        assert!(message.contains("line"), "{message}");
    }
}
