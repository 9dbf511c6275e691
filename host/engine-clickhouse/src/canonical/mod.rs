//! Canonical typed-row encoding and the content digest (spec 000, "Seal the replayable artifact
//! and baseline", step 4; "Edge cases").

pub mod digest;
pub mod rowbinary;
pub mod rowset;
pub mod types;

pub use digest::{
    ContentSummary, DigestError, column_types, content_digest, content_digest_reopen,
    streamed_digest,
};
pub use rowbinary::{RowBinaryWriter, Value};
pub use rowset::{BucketDigest, RowsetReplyInvalid, rowset_digest};
pub use types::{ColumnType, Scalar, parse_type};
