//! Pure contracts: identities, records, receipts and their strict codecs. No I/O.

pub mod codec;
pub mod hash;
pub mod identity;
pub mod manifest;
pub mod record;
pub mod resolution;
pub mod schema;

pub use codec::{
    CodecError, decode_receipt, decode_slot, encode_receipt, encode_record, validate_record,
};
pub use hash::{Digest, IdentityHasher, Token, Uuid};
pub use identity::{
    ClusterStatement, DdlKind, GenerationId, InventoryEntry, MemberId, OperationId, TargetKey,
    candidate_name, ddl_query_id, generation_id, inventory_digest, load_tokens, member_id,
    operation_id, query_digest, schema_digest, target_key, valid_name,
};
pub use record::*;
pub use resolution::*;
pub use schema::{Column, Schema};
