//! Strict JSON codecs for authority slots and receipts.
//!
//! Decoding dispatches on `schema_version`, rejects unknown fields, bounds the input size and
//! then checks the record's invariants (member order and ids, phase/field consistency, error
//! class shape). Error messages never echo input values: a syntax or type error reports only
//! its category and position.

use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

use super::identity::member_id;
use super::record::{
    AuthoritySlot, Phase, PublicationMode, PublicationReceipt, PublicationRecord, Receipt,
    StageState,
};

/// Largest accepted encoded record, in bytes.
pub const MAX_RECORD_BYTES: usize = 4 * 1024 * 1024;

/// Longest accepted queue entry name or error class.
const SHORT_TEXT_MAX: usize = 128;

/// A record that does not decode.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CodecError {
    /// Input larger than [`MAX_RECORD_BYTES`].
    #[error("record larger than {MAX_RECORD_BYTES} bytes")]
    TooLarge,
    /// Not JSON, wrong types or unknown fields.
    #[error("record is not valid for its schema ({category} at line {line} column {column})")]
    Json {
        /// `syntax`, `data` or `eof`.
        category: &'static str,
        /// Line.
        line: usize,
        /// Column.
        column: usize,
    },
    /// `schema_version` missing or not supported here.
    #[error("unsupported schema_version")]
    UnknownSchema,
    /// The record decodes but breaks an invariant.
    #[error("record invariant violated: {0}")]
    Invalid(&'static str),
}

impl CodecError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownSchema => "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_VERSION_UNKNOWN",
            _ => crate::error::codes::AUTHORITY_CORRUPT,
        }
    }
}

fn json_error(e: &serde_json::Error) -> CodecError {
    let category = match e.classify() {
        serde_json::error::Category::Io | serde_json::error::Category::Syntax => "syntax",
        serde_json::error::Category::Data => "data",
        serde_json::error::Category::Eof => "eof",
    };
    CodecError::Json {
        category,
        line: e.line(),
        column: e.column(),
    }
}

fn parse<T: DeserializeOwned>(text: &str) -> Result<T, CodecError> {
    if text.len() > MAX_RECORD_BYTES {
        return Err(CodecError::TooLarge);
    }
    serde_json::from_str(text).map_err(|e| json_error(&e))
}

/// Reads `schema_version` without trusting the rest.
fn schema_version(text: &str) -> Result<String, CodecError> {
    #[derive(serde::Deserialize)]
    struct Head {
        schema_version: Option<String>,
    }
    let head: Head = parse(text)?;
    head.schema_version.ok_or(CodecError::UnknownSchema)
}

fn encode<T: Serialize>(value: &T) -> String {
    // Serialising these plain structs cannot fail (string keys, no maps with non-string keys).
    serde_json::to_string(value).unwrap_or_default()
}

/// Encodes a record of either mode (field order is the struct order, so encoding is
/// deterministic).
pub fn encode_record(record: &PublicationRecord) -> String {
    encode(record)
}

/// Encodes a receipt of either mode.
pub fn encode_receipt(receipt: &PublicationReceipt) -> String {
    encode(receipt)
}

/// Decodes whatever a target-key slot holds.
pub fn decode_slot(text: &str) -> Result<AuthoritySlot, CodecError> {
    let mode = PublicationMode::of_authority_schema(&schema_version(text)?)
        .ok_or(CodecError::UnknownSchema)?;
    let r: PublicationRecord = parse(text)?;
    validate_record(&r)?;
    Ok(match mode {
        PublicationMode::Internal => AuthoritySlot::V1(Box::new(r)),
        PublicationMode::External => AuthoritySlot::External(Box::new(r)),
        PublicationMode::Local => AuthoritySlot::Local(Box::new(r)),
    })
}

/// Decodes a receipt of either version.
pub fn decode_receipt(text: &str) -> Result<Receipt, CodecError> {
    let mode = PublicationMode::of_receipt_schema(&schema_version(text)?)
        .ok_or(CodecError::UnknownSchema)?;
    let r: PublicationReceipt = parse(text)?;
    validate_receipt(&r)?;
    Ok(match mode {
        PublicationMode::Internal => Receipt::V1(Box::new(r)),
        PublicationMode::External => Receipt::External(Box::new(r)),
        PublicationMode::Local => Receipt::Local(Box::new(r)),
    })
}

fn short_text_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= SHORT_TEXT_MAX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

fn error_class_ok(s: &str) -> bool {
    s.starts_with("DPONE_")
        && s.len() <= SHORT_TEXT_MAX
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Checks a record's invariants (either mode).
pub fn validate_record(r: &PublicationRecord) -> Result<(), CodecError> {
    use CodecError::Invalid;
    let mode = r.mode().ok_or(CodecError::UnknownSchema)?;
    if r.replication_mode != mode.as_str() {
        return Err(Invalid(
            "replication_mode does not match the schema version",
        ));
    }
    // Internal mode: the members are replicas of one candidate table.
    if mode == PublicationMode::Internal {
        let mut uuids = r.members.iter().filter_map(|m| m.candidate_uuid);
        if let Some(first) = uuids.next()
            && uuids.any(|u| u != first)
        {
            return Err(Invalid(
                "internal mode binds one candidate uuid for every replica",
            ));
        }
    }
    if r.members.len() < mode.min_members()
        || (mode == PublicationMode::Local && r.members.len() != 1)
    {
        return Err(Invalid("member count of the mode"));
    }
    for pair in r.members.windows(2) {
        if pair[0].member_id >= pair[1].member_id {
            return Err(Invalid("members not in strict member-id order"));
        }
    }
    for m in &r.members {
        if m.member_id != member_id(m.shard_num, m.replica_num) {
            return Err(Invalid("member id does not match (shard_num, replica_num)"));
        }
        if matches!(
            m.stage,
            StageState::Intent | StageState::Created | StageState::Ready
        ) && m.candidate_uuid.is_none()
        {
            return Err(Invalid("staged member without candidate uuid"));
        }
        if (m.stage == StageState::Ready) != m.candidate_content_digest.is_some() {
            return Err(Invalid("candidate content digest iff READY"));
        }
    }
    let bound = r.artifact.is_some()
        && r.artifact_content_digest.is_some()
        && r.generation_id.is_some()
        && r.target_present.is_some();
    let unbound = r.artifact.is_none()
        && r.artifact_content_digest.is_none()
        && r.generation_id.is_none()
        && r.target_present.is_none();
    match r.phase {
        Phase::Locked if !unbound => return Err(Invalid("LOCKED binds no artifact")),
        Phase::Aborted if !(bound || unbound) => {
            return Err(Invalid("artifact binding incomplete"));
        }
        Phase::Locked | Phase::Aborted => {}
        _ if !bound => return Err(Invalid("phase requires a bound artifact and generation")),
        _ => {}
    }
    if let Some(true) = r.target_present
        && r.members.iter().any(|m| m.predecessor.is_none())
    {
        return Err(Invalid("present target without per-member predecessor"));
    }
    if let Some(false) = r.target_present
        && r.members.iter().any(|m| m.predecessor.is_some())
    {
        return Err(Invalid("absent target with a predecessor"));
    }
    if matches!(
        r.phase,
        Phase::Staged
            | Phase::PublicationDispatching
            | Phase::Committed
            | Phase::CleanupDispatching
            | Phase::Completed
    ) && r.members.iter().any(|m| m.stage != StageState::Ready)
    {
        return Err(Invalid("phase requires every member READY"));
    }
    if r.phase.publication_started() != r.publication.is_some() {
        return Err(Invalid("publication binding iff publication started"));
    }
    if matches!(
        r.phase,
        Phase::Committed | Phase::CleanupDispatching | Phase::Completed
    ) != r.receipt.is_some()
    {
        return Err(Invalid("receipt iff committed"));
    }
    if r.cleanup.is_some() && !matches!(r.phase, Phase::CleanupDispatching | Phase::Completed) {
        return Err(Invalid("cleanup binding only in cleanup phases"));
    }
    for b in r.publication.iter().chain(r.cleanup.iter()) {
        if let Some(entry) = &b.queue_entry
            && !short_text_ok(entry)
        {
            return Err(Invalid("queue entry shape"));
        }
    }
    if let Some(class) = &r.error_class
        && !error_class_ok(class)
    {
        return Err(Invalid("error class must be a stable code"));
    }
    if r.resolutions.len() > super::resolution::MAX_RESOLUTIONS {
        return Err(Invalid("too many recorded resolutions"));
    }
    for res in &r.resolutions {
        if res.members.len() != r.members.len()
            || res
                .members
                .iter()
                .zip(&r.members)
                .any(|(a, b)| a.member_id != b.member_id)
        {
            return Err(Invalid("resolution members differ from the member map"));
        }
    }
    if let Some(receipt) = &r.receipt {
        validate_receipt(receipt)?;
        if PublicationMode::of_receipt_schema(&receipt.schema_version) != Some(mode) {
            return Err(Invalid("receipt of another mode"));
        }
        if receipt.operation_id != r.operation_id || receipt.target_key != r.target_key {
            return Err(Invalid("receipt belongs to another operation"));
        }
    }
    Ok(())
}

fn validate_receipt(r: &PublicationReceipt) -> Result<(), CodecError> {
    let mode =
        PublicationMode::of_receipt_schema(&r.schema_version).ok_or(CodecError::UnknownSchema)?;
    if r.members.len() < mode.min_members()
        || (mode == PublicationMode::Local && r.members.len() != 1)
    {
        return Err(CodecError::Invalid("receipt member count of the mode"));
    }
    for pair in r.members.windows(2) {
        if pair[0].member_id >= pair[1].member_id {
            return Err(CodecError::Invalid("receipt members not in order"));
        }
    }
    if r.members
        .iter()
        .any(|m| m.content_digest != r.content_digest || m.row_count != r.artifact.row_count)
    {
        return Err(CodecError::Invalid(
            "every receipt member holds the receipt content",
        ));
    }
    Ok(())
}
