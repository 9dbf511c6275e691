//! Stable refusal codes, one per refusal. Each code keeps its meaning; new refusals get new
//! codes. The table with the rule behind each one is in `docs/nonproduction-authority.md`.

// --- Reading: the strict canonical JSON layer (every document) ---

/// The document is larger than [`crate::json::MAX_DOCUMENT_BYTES`].
pub const TOO_LARGE: &str = "DPONE_NP_TOO_LARGE";
/// The bytes are not one UTF-8 JSON value (syntax error, trailing data, bad escape).
pub const MALFORMED: &str = "DPONE_NP_MALFORMED";
/// Objects and arrays nest deeper than [`crate::json::MAX_DEPTH`].
pub const TOO_DEEP: &str = "DPONE_NP_TOO_DEEP";
/// One object names the same key twice.
pub const DUPLICATE_KEY: &str = "DPONE_NP_DUPLICATE_KEY";
/// A number is not an integer in `0..=2^53-1` (fractions, exponents, negatives, huge values).
pub const NUMBER_INVALID: &str = "DPONE_NP_NUMBER_INVALID";
/// The bytes differ from the RFC 8785 encoding of the value they hold.
pub const NON_CANONICAL: &str = "DPONE_NP_NON_CANONICAL";
/// The top level is not an object with a string `schema`.
pub const SCHEMA_MISSING: &str = "DPONE_NP_SCHEMA_MISSING";
/// The `schema` is not the one this reader reads (no fallback schema, no registry).
pub const SCHEMA_UNSUPPORTED: &str = "DPONE_NP_SCHEMA_UNSUPPORTED";
/// An object holds a key its schema does not define.
pub const UNKNOWN_FIELD: &str = "DPONE_NP_UNKNOWN_FIELD";
/// An object lacks a key its schema requires (every key is required; nothing is optional).
pub const MISSING_FIELD: &str = "DPONE_NP_MISSING_FIELD";
/// A value has the wrong JSON type.
pub const TYPE_INVALID: &str = "DPONE_NP_TYPE_INVALID";

// --- Typed fields ---

/// A string is empty, longer than 256 bytes, or holds a character outside printable ASCII.
pub const TEXT_INVALID: &str = "DPONE_NP_TEXT_INVALID";
/// A UUID is not lowercase `8-4-4-4-12` hexadecimal, or is the nil UUID.
pub const UUID_INVALID: &str = "DPONE_NP_UUID_INVALID";
/// A commit is not 40 lowercase hexadecimal digits.
pub const COMMIT_INVALID: &str = "DPONE_NP_COMMIT_INVALID";
/// A digest is not `sha256:` followed by 64 lowercase hexadecimal digits.
pub const DIGEST_INVALID: &str = "DPONE_NP_DIGEST_INVALID";
/// An identifier is not `[a-z0-9][a-z0-9._-]{0,127}`.
pub const IDENTIFIER_INVALID: &str = "DPONE_NP_IDENTIFIER_INVALID";
/// A repository is not a canonical lowercase GitHub `owner/name`.
pub const REPOSITORY_INVALID: &str = "DPONE_NP_REPOSITORY_INVALID";
/// An image is not `registry/path@sha256:<64 hex>` (pinned by digest).
pub const IMAGE_INVALID: &str = "DPONE_NP_IMAGE_INVALID";
/// A relation scope is not two or three lowercase SQL identifiers joined by dots.
pub const RELATION_INVALID: &str = "DPONE_NP_RELATION_INVALID";
/// A signer workflow is not `owner/name/.github/workflows/<file>.yml`.
pub const SIGNER_WORKFLOW_INVALID: &str = "DPONE_NP_SIGNER_WORKFLOW_INVALID";
/// The issuer is not the GitHub Actions OIDC issuer.
pub const ISSUER_INVALID: &str = "DPONE_NP_ISSUER_INVALID";
/// The predicate type is not an `https://` URI of the allowed shape.
pub const PREDICATE_TYPE_INVALID: &str = "DPONE_NP_PREDICATE_TYPE_INVALID";
/// The runner environment is not `github-hosted`.
pub const RUNNER_INVALID: &str = "DPONE_NP_RUNNER_INVALID";
/// The pinned trust policy is not `dpone.runtime-artifact-trust-policy.v2` with
/// `non_production` trust and mandatory attestations.
pub const TRUST_POLICY_PIN_INVALID: &str = "DPONE_NP_TRUST_POLICY_PIN_INVALID";
/// `purpose` is not `synthetic_composition_validation`.
pub const PURPOSE_INVALID: &str = "DPONE_NP_PURPOSE_INVALID";
/// A `trust_tier` is not `non_production` (production escalation).
pub const TRUST_TIER_INVALID: &str = "DPONE_NP_TRUST_TIER_INVALID";
/// `phase` is neither `qualification` nor `execution`.
pub const PHASE_INVALID: &str = "DPONE_NP_PHASE_INVALID";
/// The phase subjects name a subject of the other phase (phase swap).
pub const PHASE_SUBJECTS_FOREIGN: &str = "DPONE_NP_PHASE_SUBJECTS_FOREIGN";
/// An engine is not `postgresql`, `sqlserver` or `clickhouse`.
pub const ENGINE_INVALID: &str = "DPONE_NP_ENGINE_INVALID";
/// A route mode is not `full_refresh`.
pub const MODE_INVALID: &str = "DPONE_NP_MODE_INVALID";
/// A workload kind is not `dbt_native`, `generated_export` or `ordinary_transfer`.
pub const WORKLOAD_KIND_INVALID: &str = "DPONE_NP_WORKLOAD_KIND_INVALID";
/// An access is not `read` or `write`.
pub const ACCESS_INVALID: &str = "DPONE_NP_ACCESS_INVALID";
/// An effect kind is not `read`, `write`, `helper`, `staging` or `state`.
pub const EFFECT_INVALID: &str = "DPONE_NP_EFFECT_INVALID";
/// An effect's access does not fit its kind (`read` reads; `write`, `staging`, `state` write).
pub const EFFECT_ACCESS_INVALID: &str = "DPONE_NP_EFFECT_ACCESS_INVALID";
/// A workload origin is not `native` or `ordinary`.
pub const ORIGIN_INVALID: &str = "DPONE_NP_ORIGIN_INVALID";
/// The qualification outcome is not `reconciled`.
pub const OUTCOME_INVALID: &str = "DPONE_NP_OUTCOME_INVALID";
/// The producer wire is not `dpone.dbt-airflow-self-service.nonproduction.v1`.
pub const PRODUCER_WIRE_INVALID: &str = "DPONE_NP_PRODUCER_WIRE_INVALID";

// --- Structure ---

/// A list that must hold at least one entry is empty.
pub const LIST_EMPTY: &str = "DPONE_NP_LIST_EMPTY";
/// A list holds more entries than its bound.
pub const LIST_TOO_LONG: &str = "DPONE_NP_LIST_TOO_LONG";
/// A set lists the same entry twice.
pub const DUPLICATE_ENTRY: &str = "DPONE_NP_DUPLICATE_ENTRY";
/// A set is not in ascending order (each set has exactly one encoding).
pub const SET_UNORDERED: &str = "DPONE_NP_SET_UNORDERED";
/// A participant id appears with both accesses (each participant has exactly one access).
pub const PARTICIPANT_ACCESS_CONFLICT: &str = "DPONE_NP_PARTICIPANT_ACCESS_CONFLICT";
/// A subject, effect or route names a participant the document does not list.
pub const PARTICIPANT_UNBOUND: &str = "DPONE_NP_PARTICIPANT_UNBOUND";
/// A route's source participant does not read or its target participant does not write, or a
/// participant's engine differs from the route's.
pub const ROUTE_PARTICIPANT_MISMATCH: &str = "DPONE_NP_ROUTE_PARTICIPANT_MISMATCH";
/// An effect's access differs from its participant's access.
pub const EFFECT_PARTICIPANT_ACCESS: &str = "DPONE_NP_EFFECT_PARTICIPANT_ACCESS";
/// An effect's relation is not among the document's subjects.
pub const EFFECT_SUBJECT_UNLISTED: &str = "DPONE_NP_EFFECT_SUBJECT_UNLISTED";
/// A listed subject is used by no effect (the scope is exactly the effects).
pub const SUBJECT_UNUSED: &str = "DPONE_NP_SUBJECT_UNUSED";
/// A listed participant is used by no effect (the scope is exactly the effects).
pub const PARTICIPANT_UNUSED: &str = "DPONE_NP_PARTICIPANT_UNUSED";
/// A release workload's route is not one of the release's qualified routes.
pub const ROUTE_UNQUALIFIED: &str = "DPONE_NP_ROUTE_UNQUALIFIED";

// --- Ceilings and windows ---

/// `not_before` is not strictly before `not_after`.
pub const VALIDITY_WINDOW_INVALID: &str = "DPONE_NP_VALIDITY_WINDOW_INVALID";
/// A grant's validity window is longer than 24 hours.
pub const VALIDITY_TOO_LONG: &str = "DPONE_NP_VALIDITY_TOO_LONG";
/// A limit is zero.
pub const LIMIT_ZERO: &str = "DPONE_NP_LIMIT_ZERO";
/// A limit is above its built-in ceiling (64 workloads, 128 attempts, 100,000 rows, 1 GiB,
/// 3,600 s, 86,400 s validity).
pub const LIMIT_ABOVE_CEILING: &str = "DPONE_NP_LIMIT_ABOVE_CEILING";
/// An observation is above its built-in ceiling (rows, bytes, attempts, attempt seconds).
pub const OBSERVATION_ABOVE_CEILING: &str = "DPONE_NP_OBSERVATION_ABOVE_CEILING";
/// An execution grant's workload membership is larger than its own `max_workloads`.
pub const MEMBERSHIP_ABOVE_LIMIT: &str = "DPONE_NP_MEMBERSHIP_ABOVE_LIMIT";

// --- Reopen (after signature verification) ---

/// The policy document's digest is not the externally pinned digest.
pub const REOPEN_POLICY_UNPINNED: &str = "DPONE_NP_REOPEN_POLICY_UNPINNED";
/// The grant names another policy digest than the pinned policy's (changed trust).
pub const REOPEN_POLICY_CHANGED: &str = "DPONE_NP_REOPEN_POLICY_CHANGED";
/// The grant names another enrollment digest than the pinned policy's enrollment.
pub const REOPEN_ENROLLMENT_CHANGED: &str = "DPONE_NP_REOPEN_ENROLLMENT_CHANGED";
/// The grant's environment is not the policy's enrolled environment.
pub const REOPEN_ENVIRONMENT_CHANGED: &str = "DPONE_NP_REOPEN_ENVIRONMENT_CHANGED";
/// The trust revision moved between verification and reopen.
pub const REOPEN_TRUST_REVISION_CHANGED: &str = "DPONE_NP_REOPEN_TRUST_REVISION_CHANGED";
/// The verification used another trusted root than the policy pins (stale root).
pub const REOPEN_ROOT_STALE: &str = "DPONE_NP_REOPEN_ROOT_STALE";
/// The verified issuer is not the policy's.
pub const REOPEN_ISSUER_MISMATCH: &str = "DPONE_NP_REOPEN_ISSUER_MISMATCH";
/// The verified repository is not the policy's.
pub const REOPEN_REPOSITORY_MISMATCH: &str = "DPONE_NP_REOPEN_REPOSITORY_MISMATCH";
/// The verified predicate type is not the policy's.
pub const REOPEN_PREDICATE_MISMATCH: &str = "DPONE_NP_REOPEN_PREDICATE_MISMATCH";
/// The verified runner environment is not the policy's.
pub const REOPEN_RUNNER_MISMATCH: &str = "DPONE_NP_REOPEN_RUNNER_MISMATCH";
/// The verified signer is not `https://github.com/{signer_workflow}@{signer_digest}`.
pub const REOPEN_SIGNER_MISMATCH: &str = "DPONE_NP_REOPEN_SIGNER_MISMATCH";
/// The verified subject digest is not the digest of the document's canonical bytes.
pub const REOPEN_SUBJECT_MISMATCH: &str = "DPONE_NP_REOPEN_SUBJECT_MISMATCH";
/// `now` is earlier than the last time seen (backwards clock).
pub const REOPEN_CLOCK_BACKWARDS: &str = "DPONE_NP_REOPEN_CLOCK_BACKWARDS";
/// The policy is outside its own validity window.
pub const REOPEN_POLICY_EXPIRED: &str = "DPONE_NP_REOPEN_POLICY_EXPIRED";
/// `now` is before the grant's `not_before`.
pub const REOPEN_NOT_YET_VALID: &str = "DPONE_NP_REOPEN_NOT_YET_VALID";
/// `now` is at or after the grant's `not_after`.
pub const REOPEN_EXPIRED: &str = "DPONE_NP_REOPEN_EXPIRED";
/// The grant's validity window is longer than the policy's `max_validity_seconds`.
pub const REOPEN_VALIDITY_ABOVE_POLICY: &str = "DPONE_NP_REOPEN_VALIDITY_ABOVE_POLICY";
/// The grant's revocation epoch is older than the current one (revoked).
pub const REOPEN_REVOKED: &str = "DPONE_NP_REOPEN_REVOKED";
/// The grant's revocation epoch is newer than the current one.
pub const REOPEN_EPOCH_AHEAD: &str = "DPONE_NP_REOPEN_EPOCH_AHEAD";
/// The current revocation epoch is below the pinned policy's floor (rolled-back store).
pub const REOPEN_EPOCH_BELOW_POLICY: &str = "DPONE_NP_REOPEN_EPOCH_BELOW_POLICY";

// --- Gathering scope facts (bindings the scope component has no facts for) ---

/// The workload is not in the composition.
pub const SCOPE_WORKLOAD_UNKNOWN: &str = "DPONE_NP_SCOPE_WORKLOAD_UNKNOWN";
/// The composition or request is for another campaign or environment than the grant.
pub const SCOPE_CAMPAIGN_MISMATCH: &str = "DPONE_NP_SCOPE_CAMPAIGN_MISMATCH";
/// The activation request's composition is not the one supplied.
pub const SCOPE_COMPOSITION_MISMATCH: &str = "DPONE_NP_SCOPE_COMPOSITION_MISMATCH";
/// The activation request names another execution grant.
pub const SCOPE_GRANT_DIGEST_MISMATCH: &str = "DPONE_NP_SCOPE_GRANT_DIGEST_MISMATCH";
/// The execution grant names another parent release, native release or deployment.
pub const SCOPE_RELEASE_MISMATCH: &str = "DPONE_NP_SCOPE_RELEASE_MISMATCH";
/// The activation request's workloads are not exactly the grant's membership.
pub const SCOPE_MEMBERSHIP_MISMATCH: &str = "DPONE_NP_SCOPE_MEMBERSHIP_MISMATCH";
/// The workload is not in the activation request.
pub const SCOPE_WORKLOAD_NOT_REQUESTED: &str = "DPONE_NP_SCOPE_WORKLOAD_NOT_REQUESTED";
/// The release set or route qualification is for another source, fixture, generator,
/// compilation intent, toolchain or qualified set than the grant.
pub const SCOPE_INTENT_MISMATCH: &str = "DPONE_NP_SCOPE_INTENT_MISMATCH";
/// The route qualification is not the outcome of this grant's one-time run and route.
pub const SCOPE_RUN_MISMATCH: &str = "DPONE_NP_SCOPE_RUN_MISMATCH";
/// A timestamp does not fit the scope facts' signed seconds.
pub const SCOPE_TIME_INVALID: &str = "DPONE_NP_SCOPE_TIME_INVALID";

/// Every code, for tests and documentation checks.
pub const ALL: &[&str] = &[
    TOO_LARGE,
    MALFORMED,
    TOO_DEEP,
    DUPLICATE_KEY,
    NUMBER_INVALID,
    NON_CANONICAL,
    SCHEMA_MISSING,
    SCHEMA_UNSUPPORTED,
    UNKNOWN_FIELD,
    MISSING_FIELD,
    TYPE_INVALID,
    TEXT_INVALID,
    UUID_INVALID,
    COMMIT_INVALID,
    DIGEST_INVALID,
    IDENTIFIER_INVALID,
    REPOSITORY_INVALID,
    IMAGE_INVALID,
    RELATION_INVALID,
    SIGNER_WORKFLOW_INVALID,
    ISSUER_INVALID,
    PREDICATE_TYPE_INVALID,
    RUNNER_INVALID,
    TRUST_POLICY_PIN_INVALID,
    PURPOSE_INVALID,
    TRUST_TIER_INVALID,
    PHASE_INVALID,
    PHASE_SUBJECTS_FOREIGN,
    ENGINE_INVALID,
    MODE_INVALID,
    WORKLOAD_KIND_INVALID,
    ACCESS_INVALID,
    EFFECT_INVALID,
    EFFECT_ACCESS_INVALID,
    ORIGIN_INVALID,
    OUTCOME_INVALID,
    PRODUCER_WIRE_INVALID,
    LIST_EMPTY,
    LIST_TOO_LONG,
    DUPLICATE_ENTRY,
    SET_UNORDERED,
    PARTICIPANT_ACCESS_CONFLICT,
    PARTICIPANT_UNBOUND,
    ROUTE_PARTICIPANT_MISMATCH,
    EFFECT_PARTICIPANT_ACCESS,
    EFFECT_SUBJECT_UNLISTED,
    SUBJECT_UNUSED,
    PARTICIPANT_UNUSED,
    ROUTE_UNQUALIFIED,
    VALIDITY_WINDOW_INVALID,
    VALIDITY_TOO_LONG,
    LIMIT_ZERO,
    LIMIT_ABOVE_CEILING,
    OBSERVATION_ABOVE_CEILING,
    MEMBERSHIP_ABOVE_LIMIT,
    REOPEN_POLICY_UNPINNED,
    REOPEN_POLICY_CHANGED,
    REOPEN_ENROLLMENT_CHANGED,
    REOPEN_ENVIRONMENT_CHANGED,
    REOPEN_TRUST_REVISION_CHANGED,
    REOPEN_ROOT_STALE,
    REOPEN_ISSUER_MISMATCH,
    REOPEN_REPOSITORY_MISMATCH,
    REOPEN_PREDICATE_MISMATCH,
    REOPEN_RUNNER_MISMATCH,
    REOPEN_SIGNER_MISMATCH,
    REOPEN_SUBJECT_MISMATCH,
    REOPEN_CLOCK_BACKWARDS,
    REOPEN_POLICY_EXPIRED,
    REOPEN_NOT_YET_VALID,
    REOPEN_EXPIRED,
    REOPEN_VALIDITY_ABOVE_POLICY,
    REOPEN_REVOKED,
    REOPEN_EPOCH_AHEAD,
    REOPEN_EPOCH_BELOW_POLICY,
    SCOPE_WORKLOAD_UNKNOWN,
    SCOPE_CAMPAIGN_MISMATCH,
    SCOPE_COMPOSITION_MISMATCH,
    SCOPE_GRANT_DIGEST_MISMATCH,
    SCOPE_RELEASE_MISMATCH,
    SCOPE_MEMBERSHIP_MISMATCH,
    SCOPE_WORKLOAD_NOT_REQUESTED,
    SCOPE_INTENT_MISMATCH,
    SCOPE_RUN_MISMATCH,
    SCOPE_TIME_INVALID,
];
