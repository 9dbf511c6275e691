//! What the `campaign` commands share, below both `campaign_cmd` (stateless `verify` and
//! `inspect`) and `campaign_store_cmd` (the protected control store): the grant's files
//! ([`GrantFileArgs`]), the verification [`pipeline`] through the pinned scope component, the
//! mapping of its refusals to exit statuses ([`failure`]) and the `--now` clock ([`now`]).

// The file stays where the `campaign_verify` bench includes it from.
#[path = "campaign_cmd/pipeline.rs"]
pub mod pipeline;

use crate::exit::{Failure, POLICY_FAILED};
use crate::input::{InputKind, read};
use clap::Args;
use dpone_engine_nonproduction::Document;
use pipeline::{Class, Refusal};
use std::path::PathBuf;

/// The files that authenticate and scope one grant, shared by `campaign verify` and the
/// protected commands (`grant register`, `admit`).
#[derive(Args)]
pub struct GrantFileArgs {
    /// The `dpone.nonproduction-authority-policy.v1` document.
    #[arg(long)]
    pub(crate) policy: PathBuf,
    /// The external pin of the policy, `sha256:<hex>` (the policy carries no attestation).
    #[arg(long)]
    pub(crate) policy_digest: String,
    /// The grant, `dpone.nonproduction-authority.v1`.
    #[arg(long)]
    pub(crate) document: PathBuf,
    /// The grant's GitHub Artifact Attestation (Sigstore bundle); required for a grant.
    #[arg(long)]
    pub(crate) attestation: Option<PathBuf>,
    /// `trusted_root.json`; its sha256 must be the policy's `signer.trusted_root_digest`.
    #[arg(long)]
    pub(crate) trusted_root: PathBuf,
    /// The composition whose workloads are decided (the qualification plan's workloads, or
    /// the parent composition the activation request activates).
    #[arg(long)]
    pub(crate) composition: Option<PathBuf>,
    /// The scoped activation request: decides the execution phase (with `--composition`).
    #[arg(long)]
    pub(crate) request: Option<PathBuf>,
    /// The scoped native release set the execution grant names (checked when given).
    #[arg(long)]
    pub(crate) release_set: Option<PathBuf>,
}

/// The bytes of a grant's files, each read through the bounded reader.
pub(crate) struct GrantFiles {
    pub(crate) policy: Vec<u8>,
    pub(crate) grant: Vec<u8>,
    pub(crate) attestation: Vec<u8>,
    pub(crate) trusted_root: Vec<u8>,
    pub(crate) composition: Vec<u8>,
    pub(crate) request: Option<Vec<u8>>,
    pub(crate) release_set: Option<Vec<u8>>,
}

impl GrantFileArgs {
    /// Reads every file; a grant without its attestation or composition is refused first.
    pub(crate) fn read(&self) -> Result<GrantFiles, Failure> {
        let Some(attestation_path) = &self.attestation else {
            return Err(Failure::refused(
                "DPONE_CLI_CAMPAIGN_ATTESTATION_REQUIRED",
                "a grant is authenticated only by its GitHub Artifact Attestation (--attestation)",
            ));
        };
        let Some(composition_path) = &self.composition else {
            return Err(Failure::bad_input(
                "DPONE_CLI_CAMPAIGN_COMPOSITION_REQUIRED",
                "the scope decision needs the composition whose workloads it decides (--composition)",
            ));
        };
        let optional = |path: &Option<PathBuf>| {
            path.as_ref()
                .map(|p| read(p, InputKind::NonproductionDocument))
                .transpose()
        };
        Ok(GrantFiles {
            policy: read(&self.policy, InputKind::NonproductionDocument)?,
            grant: read(&self.document, InputKind::NonproductionDocument)?,
            attestation: read(attestation_path, InputKind::SigstoreBundle)?,
            trusted_root: dpone_trust::trusted_root::read_trusted_root_file(&self.trusted_root)?,
            composition: read(composition_path, InputKind::NonproductionDocument)?,
            request: optional(&self.request)?,
            release_set: optional(&self.release_set)?,
        })
    }
}

pub(crate) fn failure(r: Refusal) -> Failure {
    match r.class {
        Class::BadInput => Failure::bad_input(&r.code, r.message),
        Class::Refused => Failure::refused(&r.code, r.message),
        Class::PolicyFailed => Failure {
            code: r.code,
            message: r.message,
            exit: POLICY_FAILED,
        },
        Class::Internal => Failure::internal(&r.code, r.message),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `--now`: Unix seconds, or RFC 3339 `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn parse_now(text: &str) -> Option<u64> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo)
        || d < 1
        || d > month_days[usize::try_from(mo - 1).ok()?]
        || h > 23
        || mi > 59
        || s > 59
    {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let ob = rest.as_bytes();
            if ob.len() != 6 || ob[3] != b':' {
                return None;
            }
            let sign = match ob[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset;
    u64::try_from(secs).ok()
}

pub(crate) fn now(arg: Option<&str>) -> Result<u64, Failure> {
    match arg {
        Some(text) => parse_now(text).ok_or_else(|| {
            Failure::bad_input(
                "DPONE_CLI_CAMPAIGN_NOW_INVALID",
                "--now must be Unix seconds or an RFC 3339 time such as 2026-12-01T10:00:00Z",
            )
        }),
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .map_err(|_| {
                Failure::internal(
                    "DPONE_CLI_CAMPAIGN_CLOCK_UNAVAILABLE",
                    "the system clock is before 1970",
                )
            }),
    }
}

/// The failure of a nonproduction document or fact that did not hold.
pub(crate) fn np_failure(what: &str, e: &dpone_engine_nonproduction::NpError) -> Failure {
    failure(Refusal {
        code: e.code().to_owned(),
        message: format!("{what}: {}", e.detail()),
        class: pipeline::np_class(e.code()),
        evidence: None,
    })
}

/// Parses a nonproduction document strictly; `what` names it in the message.
pub(crate) fn parse<T: Document>(what: &str, bytes: &[u8]) -> Result<T, Failure> {
    T::parse(bytes).map_err(|e| np_failure(what, &e))
}

#[cfg(test)]
mod tests {
    use super::parse_now;

    #[test]
    fn now_reads_unix_seconds_and_rfc3339() {
        assert_eq!(parse_now("1796083200"), Some(1_796_083_200));
        assert_eq!(parse_now("2026-12-01T00:00:00Z"), Some(1_796_083_200));
        assert_eq!(parse_now("2026-12-01T01:30:00+01:30"), Some(1_796_083_200));
        assert_eq!(
            parse_now("2026-11-30T23:00:00.5-01:00"),
            Some(1_796_083_200)
        );
        assert_eq!(parse_now("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_now("2024-02-29T00:00:00Z"), Some(1_709_164_800));
        for bad in [
            "",
            "-1",
            "2026-12-01",
            "2026-12-01T00:00:00",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-12-01T24:00:00Z",
            "2026-12-01T00:00:00+1:00",
            "2026-12-01T00:00:00.Z",
            "1969-12-31T23:59:59Z",
            "yesterday",
        ] {
            assert_eq!(parse_now(bad), None, "{bad:?}");
        }
    }
}
