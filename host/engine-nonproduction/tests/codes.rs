//! Codes: one per refusal, all distinct, all listed in `codes::ALL` and in the table of
//! `docs/nonproduction-authority.md`.

use dpone_engine_nonproduction::codes;
use std::collections::BTreeSet;

fn read(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn codes_are_distinct_and_all_is_complete() {
    let unique: BTreeSet<&str> = codes::ALL.iter().copied().collect();
    assert_eq!(unique.len(), codes::ALL.len(), "a code is listed twice");
    let source = read("src/codes.rs");
    let declared: BTreeSet<&str> = source
        .lines()
        .filter_map(|l| l.strip_prefix("pub const "))
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    assert_eq!(
        declared, unique,
        "codes::ALL differs from the declared constants"
    );
    for code in &unique {
        assert!(code.starts_with("DPONE_NP_"), "{code}");
    }
}

#[test]
fn docs_list_every_code() {
    let docs = read("../../docs/nonproduction-authority.md");
    for code in codes::ALL {
        assert!(
            docs.contains(&format!("| `{code}` |")),
            "{code} is missing from the table of docs/nonproduction-authority.md"
        );
    }
}
