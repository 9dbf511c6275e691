//! The reviewed provisioning scripts shipped in `fixtures/mssql/`. The runtime never runs them:
//! the environment owner does, with `sqlcmd`, in the pinned state database.

/// State DDL, contract v2 (`GO`-separated batches; all but the last are contract v1).
pub const STATE_DDL: &str = include_str!("../../../fixtures/mssql/state-ddl.sql");
/// The explicit v1 -> v2 migration (one batch, one transaction).
pub const MIGRATE_V1_TO_V2: &str = include_str!("../../../fixtures/mssql/migrate-v1-to-v2.sql");

/// Splits a script into batches on lines that are exactly `GO` (as `sqlcmd` does).
pub fn batches(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in script.lines() {
        if line.trim().eq_ignore_ascii_case("GO") {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// The v1 state contract: every batch of [`STATE_DDL`] except the last (the v2 constraint).
pub fn state_ddl_v1() -> Vec<String> {
    let mut b = batches(STATE_DDL);
    b.pop();
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_split_on_go() {
        let b = batches(STATE_DDL);
        assert_eq!(b.len(), 7);
        assert!(b[6].contains("dpone_commit_receipt_invocation_digest_uq"));
        assert_eq!(state_ddl_v1().len(), 6);
        assert_eq!(batches(MIGRATE_V1_TO_V2).len(), 2);
    }

    /// Both scripts succeed under `sqlcmd`'s default `QUOTED_IDENTIFIER OFF` (and any other
    /// session defaults): their first batch sets exactly the options filtered indexes need,
    /// before any object is created or read.
    #[test]
    fn scripts_set_their_session_options_first() {
        for script in [STATE_DDL, MIGRATE_V1_TO_V2] {
            let b = batches(script);
            let first: Vec<&str> = b[0]
                .lines()
                .filter(|l| !l.trim_start().starts_with("--") && !l.trim().is_empty())
                .collect();
            assert_eq!(first, [crate::sql::SESSION_OPTIONS]);
            assert!(script.contains("sqlcmd -I -b"));
        }
    }
}
