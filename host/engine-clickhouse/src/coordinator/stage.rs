//! Artifact sealing, baseline binding and per-member staging (spec sections 3 and 4).

use std::io::Read;
use std::sync::{Mutex, MutexGuard, PoisonError};

use sha2::{Digest as _, Sha256};

use super::authority::Held;
use super::timing::{MemberStep, RunPhase};
use super::{Coordinator, Op};
use crate::canonical::{self, DigestError};
use crate::contracts::{
    self, ArtifactIdentity, ContentProof, Digest, MemberCleanup, MemberId, Phase, PhysicalTable,
    PublicationMode, StageState, Uuid,
};
use crate::error::EngineError;
use crate::ports::{CandidateSpec, LoadTokens, PortError, TableObservation};

fn digest_error(e: DigestError) -> EngineError {
    match e {
        DigestError::UnsupportedType { column } => EngineError::UnsupportedColumnType { column },
        DigestError::EmptySchema => EngineError::RequestInvalid("schema"),
        DigestError::BudgetExceeded { budget } => EngineError::DigestBudgetExceeded { budget },
        DigestError::Decode(canonical::rowbinary::DecodeError::Read(_)) => {
            EngineError::ContentDecode("the row stream failed while reading")
        }
        DigestError::Decode(_) => EngineError::ContentDecode("malformed typed row stream"),
        // Local disk trouble (a full or unwritable temporary directory) is not the content's
        // fault: retryable, nothing aborted.
        DigestError::Spill(_) => EngineError::ArtifactUnavailable(PortError::unavailable(
            "DPONE_CLICKHOUSE_DIGEST_SPILL_FAILED",
        )),
    }
}

/// The staging run's shared view: the record as this run last read or wrote it, whether some
/// member failed (then every other member stops at its next step), and the members this run
/// proved exact whose READY the barrier writes (with STAGED, in one CAS).
struct Staging {
    held: Held,
    stopped: bool,
    first: Option<EngineError>,
    proven: Vec<(MemberId, Digest)>,
}

/// The artifact's revalidation verdict for one staging run: the first load revalidates, every
/// later load of the run reuses the verdict (and every load verifies the bytes it streams).
type Revalidated = Mutex<Option<Result<(), PortError>>>;

/// The artifact bytes as a load streams them, hashed on the way: at the end of the stream the
/// SHA-256 and the length must be the sealed identity's, else the read fails (so the load never
/// ends cleanly from other bytes) and `tampered` is set. A stream longer than the identity
/// fails as soon as it is.
struct Verifying<'r> {
    inner: Box<dyn Read + 'r>,
    hasher: Option<Sha256>,
    seen: u64,
    expected: ArtifactIdentity,
    tampered: bool,
}

impl Verifying<'_> {
    fn refuse(&mut self) -> std::io::Error {
        self.tampered = true;
        std::io::Error::other("the artifact bytes do not match their sealed identity")
    }
}

impl Read for Verifying<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.tampered {
            return Err(self.refuse());
        }
        let n = self.inner.read(buf)?;
        self.seen += n as u64;
        if self.seen > self.expected.byte_size {
            return Err(self.refuse());
        }
        if n > 0 {
            if let Some(h) = self.hasher.as_mut() {
                h.update(&buf[..n]);
            }
            return Ok(n);
        }
        if let Some(h) = self.hasher.take() {
            let sha: [u8; 32] = h.finalize().into();
            if sha != self.expected.sha256.0 || self.seen != self.expected.byte_size {
                return Err(self.refuse());
            }
        }
        Ok(0)
    }
}

fn lock(shared: &Mutex<Staging>) -> MutexGuard<'_, Staging> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What staging found for one member's owned candidate.
enum Content {
    Exact(Digest),
    Incomplete,
    Divergent,
}

impl Coordinator<'_> {
    pub(crate) fn member_err(
        member: &MemberId,
        step: &'static str,
    ) -> impl FnOnce(PortError) -> EngineError {
        let member = member.0.hex_prefix(16);
        move |e| {
            let scope = format!("member {member}");
            super::port_failure(
                e,
                step,
                || scope,
                |source| EngineError::MemberUnavailable {
                    member,
                    step,
                    source,
                },
            )
        }
    }

    /// A content proof's port failure: the verification-time budget, or as any member step.
    fn proof_err(member: &MemberId, step: &'static str, e: PortError) -> EngineError {
        if e.class == crate::ports::PROOF_BUDGET_EXCEEDED {
            EngineError::VerificationBudgetExceeded {
                member: member.0.hex_prefix(16),
            }
        } else {
            Self::member_err(member, step)(e)
        }
    }

    pub(crate) fn observe(
        &self,
        op: &Op<'_>,
        member: &MemberId,
        name: &str,
    ) -> Result<Option<TableObservation>, EngineError> {
        self.ports
            .catalog
            .observe_table(member, op.database, name)
            .map_err(Self::member_err(member, "observe"))
    }

    /// Content digest of one member table by exact UUID, of the record's proof: the member
    /// computes a rowset digest's buckets, or (canonical) the host reads the table in full.
    pub(crate) fn digest_table(
        &self,
        op: &Op<'_>,
        proof: ContentProof,
        member: &MemberId,
        name: &str,
        uuid: Uuid,
    ) -> Result<canonical::ContentSummary, EngineError> {
        if proof == ContentProof::Rowset {
            let buckets = self
                .ports
                .catalog
                .rowset_buckets(member, op.database, name, uuid, &op.req.schema)
                .map_err(|e| Self::proof_err(member, "rowset digest", e))?;
            return canonical::rowset::combine(&op.req.schema, &buckets).map_err(|_| {
                EngineError::ContentDecode("the member's rowset digest reply is malformed")
            });
        }
        let open = || {
            self.ports
                .catalog
                .read_rows(member, op.database, name, uuid, &op.req.schema)
        };
        let summary =
            canonical::content_digest_reopen(&op.req.schema, open, self.config.digest_sort_budget)
                .map_err(|e| Self::proof_err(member, "read rows", e))?;
        summary.map_err(|e| match e {
            DigestError::Decode(canonical::rowbinary::DecodeError::Read(_)) => {
                EngineError::MemberUnavailable {
                    member: member.0.hex_prefix(16),
                    step: "read rows",
                    source: PortError::ambiguous("DPONE_CLICKHOUSE_STREAM_FAILED"),
                }
            }
            other => digest_error(other),
        })
    }

    fn fingerprint(
        &self,
        op: &Op<'_>,
        member: &MemberId,
        name: &str,
        uuid: Uuid,
    ) -> Result<Option<Digest>, EngineError> {
        self.ports
            .catalog
            .parts_fingerprint(member, op.database, name, uuid)
            .map_err(Self::member_err(member, "fingerprint"))
    }

    /// [`Self::digest_table`], remembering the proof for this run when the table's physical
    /// fingerprint is the same before and after the read: the proof then covers exactly the
    /// table in that physical state.
    pub(crate) fn prove_table(
        &self,
        op: &Op<'_>,
        proof: ContentProof,
        member: &MemberId,
        name: &str,
        uuid: Uuid,
    ) -> Result<canonical::ContentSummary, EngineError> {
        let before = self.fingerprint(op, member, name, uuid)?;
        let summary = self.digest_table(op, proof, member, name, uuid)?;
        let after = self.fingerprint(op, member, name, uuid)?;
        let mut proven = self.proven.lock().unwrap_or_else(PoisonError::into_inner);
        match (before, after) {
            (Some(b), Some(a)) if a == b => {
                proven.insert((*member, uuid), (b, summary));
            }
            _ => {
                proven.remove(&(*member, uuid));
            }
        }
        Ok(summary)
    }

    /// The content of the exact table (member, UUID) again. When this run proved it and its
    /// physical fingerprint is unchanged since, the table is the very table whose content was
    /// proven and nothing was written to it since (every write that changes what a read
    /// returns changes the fingerprint), so that proof stands without a second full read (a
    /// rename or exchange moves the table with its parts and keeps the fingerprint). Otherwise
    /// (another run, a changed or unavailable fingerprint) a full read proves it.
    pub(crate) fn reprove(
        &self,
        op: &Op<'_>,
        proof: ContentProof,
        member: &MemberId,
        name: &str,
        uuid: Uuid,
    ) -> Result<canonical::ContentSummary, EngineError> {
        let remembered = self
            .proven
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(*member, uuid))
            .copied();
        if let Some((fingerprint, summary)) = remembered
            && self.fingerprint(op, member, name, uuid)? == Some(fingerprint)
        {
            return Ok(summary);
        }
        self.prove_table(op, proof, member, name, uuid)
    }

    /// Seals the artifact; under the rowset proof, digests its bytes on a second thread while
    /// the source adapter extracts and stores them (when the adapter can show them), so the
    /// stored artifact is not read again for its digest. The digest is `None` when the bytes
    /// were not observed (or the digest thread failed): [`Self::artifact_digest`] then reads
    /// the stored artifact.
    fn seal_and_digest(
        &self,
        op: &Op<'_>,
        proof: ContentProof,
    ) -> Result<
        (
            ArtifactIdentity,
            Option<Result<canonical::ContentSummary, DigestError>>,
        ),
        PortError,
    > {
        if proof != ContentProof::Rowset {
            return self
                .ports
                .artifacts
                .seal(&op.req.schema, op.max_bytes)
                .map(|a| (a, None));
        }
        let schema = &op.req.schema;
        let budget = self.config.rowset_memory_budget;
        let (mut writer, reader) = super::tee::pipe();
        std::thread::scope(|s| {
            let digest = s.spawn(move || canonical::rowset_digest(schema, reader, budget));
            let sealed = self
                .ports
                .artifacts
                .seal_observed(schema, op.max_bytes, &mut writer);
            drop(writer);
            let digest = digest.join().ok();
            sealed.map(|(a, observed)| (a, if observed { digest } else { None }))
        })
    }

    fn artifact_digest(
        &self,
        op: &Op<'_>,
        proof: ContentProof,
        id: &ArtifactIdentity,
    ) -> Result<canonical::ContentSummary, EngineError> {
        self.ports.artifacts.revalidate(id).map_err(|e| {
            super::interrupted_or(e.kind, "artifact", || EngineError::ArtifactUnavailable(e))
        })?;
        let unavailable = |e: PortError| {
            super::interrupted_or(e.kind, "artifact", || EngineError::ArtifactUnavailable(e))
        };
        match proof {
            ContentProof::Rowset => {
                let reader = self.ports.artifacts.open(id).map_err(unavailable)?;
                canonical::rowset_digest(&op.req.schema, reader, self.config.rowset_memory_budget)
                    .map_err(digest_error)
            }
            ContentProof::Canonical => {
                let open = || self.ports.artifacts.open(id);
                canonical::content_digest_reopen(
                    &op.req.schema,
                    open,
                    self.config.digest_sort_budget,
                )
                .map_err(unavailable)?
                .map_err(digest_error)
            }
        }
    }

    fn abort(&self, op: &Op<'_>, held: &Held, err: EngineError) -> EngineError {
        let mut next = held.record.clone();
        next.phase = Phase::Aborted;
        next.error_class = Some(err.code().into());
        match self.cas(op, held, next) {
            Ok(_) => {
                if let Some(a) = &held.record.artifact {
                    let _ = self.ports.artifacts.release(a);
                }
                err
            }
            Err(cas_err) => cas_err,
        }
    }

    /// STAGING → ABORTED after removing every exact owned candidate (publication has not
    /// started). A foreign or unprovable candidate keeps the operation in STAGING.
    fn abort_staging(&self, op: &Op<'_>, held: Held, err: EngineError) -> EngineError {
        match self.try_abort_staging(op, held, err) {
            Ok(e) | Err(e) => e,
        }
    }

    /// [`Self::abort_staging`]: `Ok(err)` when the operation is now ABORTED, `Err` with the
    /// error that kept it in STAGING otherwise.
    fn try_abort_staging(
        &self,
        op: &Op<'_>,
        held: Held,
        err: EngineError,
    ) -> Result<EngineError, EngineError> {
        if held.record.phase != Phase::Staging {
            return Err(err);
        }
        for m in &held.record.members {
            let Some(u) = m.candidate_uuid else { continue };
            let step = || -> Result<(), EngineError> {
                match self.observe(op, &m.member_id, &op.candidate)? {
                    None => return Ok(()),
                    Some(o) if o.uuid != u => {
                        return Err(EngineError::CandidateForeign {
                            member: m.member_id.0.hex_prefix(16),
                        });
                    }
                    Some(_) => {}
                }
                self.drop_proven(op, &m.member_id, u)
            };
            step()?;
        }
        let mut next = held.record.clone();
        next.phase = Phase::Aborted;
        next.error_class = Some(err.code().into());
        self.cas(op, &held, next)?;
        if let Some(a) = &held.record.artifact {
            let _ = self.ports.artifacts.release(a);
        }
        Ok(err)
    }

    /// Every member's target as the baseline observes it (`None` where absent), each existing
    /// target proven by its content; a candidate under this operation's name is foreign.
    /// Members are observed concurrently (reads only); the first failure in member-id order is
    /// reported.
    fn observe_baseline(
        &self,
        op: &Op<'_>,
        proof: ContentProof,
    ) -> Result<Vec<Option<PhysicalTable>>, EngineError> {
        self.for_members(&op.members, |(id, _, _)| {
            if self.observe(op, id, &op.candidate)?.is_some() {
                return Err(EngineError::CandidateForeign {
                    member: id.0.hex_prefix(16),
                });
            }
            Ok(match self.observe(op, id, op.target)? {
                None => None,
                Some(t) => {
                    if t.columns != op.req.schema.columns {
                        return Err(EngineError::TargetDivergent {
                            member: id.0.hex_prefix(16),
                        });
                    }
                    let s = self.clock.member(id, MemberStep::BaselineProof, || {
                        self.digest_table(op, proof, id, op.target, t.uuid)
                    })?;
                    Some(PhysicalTable {
                        uuid: t.uuid,
                        row_count: s.row_count,
                        content_digest: s.digest,
                    })
                }
            })
        })
        .into_iter()
        .collect()
    }

    /// LOCKED → STAGING: seal the artifact, observe the baseline, bind both (or ABORT when the
    /// artifact is unsupported; nothing has been mutated yet).
    pub(crate) fn bind_stage(&self, op: &Op<'_>, held: Held) -> Result<Held, EngineError> {
        let proof = held.record.content_proof;
        // The baseline (reads of every member's target, and each existing target's content
        // proof) depends on nothing the seal produces: it runs while the source is extracted
        // and sealed. Both end before the one CAS that binds them; the seal's verdict is judged
        // first, as when the baseline followed it.
        let (baseline, sealed) = Self::beside(
            || {
                self.clock
                    .phase(RunPhase::Baseline, || self.observe_baseline(op, proof))
            },
            || {
                self.clock
                    .phase(RunPhase::Seal, || self.seal_and_digest(op, proof))
            },
        );
        let (artifact, observed) = match sealed {
            Ok(sealed) => sealed,
            Err(e) if e.class == crate::ports::ARTIFACT_TOO_LARGE => {
                let err = EngineError::ArtifactTooLarge { max: op.max_bytes };
                return Err(self.abort(op, &held, err));
            }
            // The source refused deterministically (an unsupported type, a value that does not
            // fit): nothing was mutated, so LOCKED moves to ABORTED and a corrected manifest is
            // not fenced by this operation.
            Err(e) if e.kind == crate::ports::PortErrorKind::Rejected => {
                return Err(self.abort(op, &held, EngineError::ArtifactUnavailable(e)));
            }
            Err(e) => {
                return Err(super::interrupted_or(e.kind, "seal", || {
                    EngineError::ArtifactUnavailable(e)
                }));
            }
        };
        if artifact.byte_size > op.max_bytes {
            let err = EngineError::ArtifactTooLarge { max: op.max_bytes };
            return Err(self.abort(op, &held, err));
        }
        if artifact.schema_digest != op.schema_digest {
            return Err(self.abort(op, &held, EngineError::ArtifactInvalid("schema digest")));
        }
        let content = match self
            .clock
            .phase(RunPhase::ArtifactDigest, || match observed {
                // Digested while it was extracted: exactly the bytes the store sealed.
                Some(digest) => digest.map_err(digest_error),
                None => self.artifact_digest(op, proof, &artifact),
            }) {
            Ok(c) => c,
            Err(e @ (EngineError::ArtifactUnavailable(_) | EngineError::Interrupted { .. })) => {
                return Err(e);
            }
            Err(e) => return Err(self.abort(op, &held, e)),
        };
        if content.row_count != artifact.row_count {
            return Err(self.abort(op, &held, EngineError::ArtifactInvalid("row count")));
        }

        // Baseline: every member's target, adopted only when all are equal.
        let baseline = baseline?;
        let present = baseline.iter().filter(|b| b.is_some()).count();
        if present != 0 && present != baseline.len() {
            return Err(EngineError::TargetPresenceMixed);
        }
        if let Some(Some(first)) = baseline.first() {
            for ((id, _, _), b) in op.members.iter().zip(&baseline) {
                if b.map(|b| (b.content_digest, b.row_count))
                    != Some((first.content_digest, first.row_count))
                {
                    return Err(EngineError::TargetDivergent {
                        member: id.0.hex_prefix(16),
                    });
                }
            }
        }

        let mut next = held.record.clone();
        next.phase = Phase::Staging;
        next.artifact = Some(artifact);
        next.artifact_content_digest = Some(content.digest);
        next.generation_id = Some(contracts::generation_id(
            &op.operation_id,
            &artifact.sha256,
            &artifact.schema_digest,
            artifact.row_count,
        ));
        next.target_present = Some(present != 0);
        for (m, b) in next.members.iter_mut().zip(&baseline) {
            m.predecessor = *b;
            if b.is_none() {
                m.cleanup = MemberCleanup::NotRequired;
            }
        }
        // Independent members: each member's candidate UUID intent is bound in this same CAS
        // (the baseline just observed every candidate name absent), so the intent is durable
        // before any candidate exists, one write for every member instead of one each.
        // Internal mode binds one UUID for all replicas in its own step.
        if matches!(op.mode, PublicationMode::External | PublicationMode::Local) {
            for m in &mut next.members {
                if m.stage == StageState::Pending {
                    m.stage = StageState::Intent;
                    m.candidate_uuid = Some(Uuid::from_random(self.ports.env.random16()));
                }
            }
        }
        self.cas(op, &held, next)
    }

    /// STAGING → STAGED: every member (concurrently, bounded by
    /// [`super::CoordinatorConfig::member_parallelism`]), then the barrier.
    ///
    /// Members share one view of the authority record: every re-read and every member update
    /// is one CAS under a lock, so this run's own writes never race each other and any other
    /// writer still fails the version check. The first member failure (in time) stops the
    /// other members at their next step and is handled exactly as a sequential run handles it.
    pub(crate) fn stage_all(&self, op: &Op<'_>, held: Held) -> Result<Held, EngineError> {
        let artifact = held
            .record
            .artifact
            .ok_or(EngineError::AuthorityMismatch("staging without artifact"))?;
        let shared = Mutex::new(Staging {
            held,
            stopped: false,
            first: None,
            proven: Vec::new(),
        });
        let revalidated: Revalidated = Mutex::new(None);
        match op.mode {
            // One server is staged as one independent member.
            PublicationMode::External | PublicationMode::Local => {
                // Candidates still to be created will all be loaded: the artifact's
                // revalidation (a full re-hash of the stored bytes) runs beside their creates
                // and CAS, and its verdict is in place before the first load starts.
                let intents = lock(&shared)
                    .held
                    .record
                    .members
                    .iter()
                    .any(|m| m.stage == StageState::Intent);
                let (early, created) = Self::beside(
                    || intents.then(|| self.ports.artifacts.revalidate(&artifact)),
                    || self.create_intended(op, &shared),
                );
                if let Some(verdict) = early {
                    *revalidated.lock().unwrap_or_else(PoisonError::into_inner) = Some(verdict);
                }
                match created {
                    Err(e) => {
                        let mut g = lock(&shared);
                        g.stopped = true;
                        g.first.get_or_insert(e);
                    }
                    Ok(fresh) => {
                        self.for_members(&op.members, |(id, _, _)| {
                            let initial =
                                fresh.iter().find(|(m, _)| m == id).map(|(_, o)| o.clone());
                            if let Err(e) =
                                self.stage_member(op, &shared, &revalidated, id, &artifact, initial)
                            {
                                let mut g = lock(&shared);
                                g.stopped = true;
                                g.first.get_or_insert(e);
                            }
                        });
                    }
                }
            }
            PublicationMode::Internal => {
                if let Err(e) = self.stage_replicas(op, &shared, &revalidated, &artifact) {
                    lock(&shared).first.get_or_insert(e);
                }
            }
        }
        let Staging {
            held,
            first,
            proven,
            ..
        } = shared.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some(err) = first {
            match err {
                e @ EngineError::ArtifactInvalid(_) => {
                    // The sealed artifact cannot be replayed: before publication only, drop
                    // every exact owned candidate, prove absence, then ABORT.
                    return Err(match self.current(op) {
                        Some(current) => self.abort_staging(op, current, e),
                        None => e,
                    });
                }
                EngineError::StatementRejected {
                    scope,
                    step,
                    source,
                    ..
                } => {
                    // A member refused a statement deterministically (a bad type, engine or
                    // syntax, data that does not parse, access denied): retrying would fail
                    // the same way. Before publication only, drop every exact owned candidate,
                    // prove absence and ABORT, so a corrected manifest or member is not fenced
                    // by this operation; otherwise stay in STAGING and hold.
                    let rejected = |aborted| EngineError::StatementRejected {
                        scope: scope.clone(),
                        step,
                        aborted,
                        source: source.clone(),
                    };
                    let Some(current) = self.current(op) else {
                        return Err(rejected(false));
                    };
                    return Err(
                        match self.try_abort_staging(op, current.clone(), rejected(true)) {
                            Ok(aborted) => aborted,
                            Err(kept) => {
                                if !kept.is_retryable()
                                    && let Some(now) = self.current(op)
                                {
                                    self.record_error(op, &now, &kept);
                                }
                                kept
                            }
                        },
                    );
                }
                e => {
                    if !e.is_retryable()
                        && let Some(current) = self.current(op)
                    {
                        self.record_error(op, &current, &e);
                    }
                    return Err(e);
                }
            }
        }
        let proven_digest = |id: &MemberId| {
            proven
                .iter()
                .find(|(p, _)| p == id)
                .map(|(_, digest)| *digest)
        };
        if held
            .record
            .members
            .iter()
            .any(|m| m.stage != StageState::Ready && proven_digest(&m.member_id).is_none())
        {
            return Err(EngineError::AuthorityMismatch(
                "barrier with a member not READY",
            ));
        }
        self.require_inventory(op)?;
        // Every member this run proved exact becomes READY, and the phase STAGED, in one
        // version-checked CAS: READY is never written without its member's exact proof, and
        // STAGED never without every member READY.
        let mut next = held.record.clone();
        for m in &mut next.members {
            if m.stage != StageState::Ready
                && let Some(digest) = proven_digest(&m.member_id)
            {
                m.stage = StageState::Ready;
                m.candidate_content_digest = Some(digest);
            }
        }
        next.phase = Phase::Staged;
        next.error_class = None;
        let held = self.cas(op, &held, next)?;
        for (id, _) in &proven {
            self.ports.progress.member_step(id, "ready");
        }
        let _ = self.ports.artifacts.release(&artifact);
        Ok(held)
    }

    /// External and local mode, before the per-member steps: every member whose record holds
    /// a candidate UUID intent gets that candidate created when its name is absent (members
    /// concurrently) and observed; then one CAS binds as CREATED every member whose candidate
    /// is exactly the intended one (the UUID and the declared columns). Returns the members
    /// bound here whose candidate was empty when observed (a candidate that has never been
    /// CREATED has never been loaded, so that emptiness is not ambiguous), each with that
    /// observation. Any other finding
    /// (absent after the create, foreign, divergent) is left in INTENT for the per-member
    /// steps, which decide it exactly as before.
    ///
    /// The record in `shared` was read or written (and read back) by this run just before
    /// (the lock's read or the STAGING CAS), with no member mutation in between, so it is the
    /// authority read that precedes these creates.
    fn create_intended(
        &self,
        op: &Op<'_>,
        shared: &Mutex<Staging>,
    ) -> Result<Vec<(MemberId, TableObservation)>, EngineError> {
        let held = lock(shared).held.clone();
        if held.record.phase != Phase::Staging {
            return Err(EngineError::AuthorityMismatch("staging outside STAGING"));
        }
        let intents: Vec<(MemberId, Uuid)> = held
            .record
            .members
            .iter()
            .filter(|m| m.stage == StageState::Intent)
            .filter_map(|m| m.candidate_uuid.map(|u| (m.member_id, u)))
            .collect();
        if intents.is_empty() {
            return Ok(Vec::new());
        }
        let observed = self.for_members(&intents, |(id, u)| {
            if let Some(o) = self.observe(op, id, &op.candidate)? {
                return Ok(Some(o));
            }
            self.create_candidate(op, id, *u)?;
            self.observe(op, id, &op.candidate)
        });
        let mut created = Vec::new();
        for ((id, u), o) in intents.iter().zip(observed) {
            if let Some(o) = o?
                && o.uuid == *u
                && o.columns == op.req.schema.columns
            {
                created.push((*id, o));
            }
        }
        if created.is_empty() {
            return Ok(Vec::new());
        }
        self.set_all_shared(op, shared, &|m| {
            if created.iter().any(|(id, _)| *id == m.member_id) {
                m.stage = StageState::Created;
            }
        })?;
        Ok(created
            .into_iter()
            .filter(|(_, o)| o.row_count == 0)
            .collect())
    }

    /// `CREATE TABLE … UUID '<uuid>'` of this operation's candidate on member `id`.
    fn create_candidate(&self, op: &Op<'_>, id: &MemberId, uuid: Uuid) -> Result<(), EngineError> {
        self.ports.progress.member_step(id, "create candidate");
        let spec = CandidateSpec {
            database: op.database,
            name: &op.candidate,
            uuid,
            schema: &op.req.schema,
            engine: op.engine,
            order_by: &op.req.order_by,
        };
        self.clock
            .member(id, MemberStep::Create, || {
                self.ports.catalog.create_candidate(id, &spec)
            })
            .map_err(Self::member_err(id, "create candidate"))
    }

    fn classify(
        &self,
        op: &Op<'_>,
        held: &Held,
        id: &MemberId,
        obs: &TableObservation,
    ) -> Result<Content, EngineError> {
        let artifact = held
            .record
            .artifact
            .ok_or(EngineError::AuthorityMismatch("no artifact"))?;
        if obs.columns != op.req.schema.columns {
            return Ok(Content::Divergent);
        }
        if obs.row_count < artifact.row_count {
            return Ok(Content::Incomplete);
        }
        if obs.row_count > artifact.row_count {
            return Ok(Content::Divergent);
        }
        let s = self.clock.member(id, MemberStep::CandidateProof, || {
            self.prove_table(op, held.record.content_proof, id, &op.candidate, obs.uuid)
        })?;
        if s.row_count == artifact.row_count
            && Some(s.digest) == held.record.artifact_content_digest
        {
            Ok(Content::Exact(s.digest))
        } else if s.row_count < artifact.row_count {
            Ok(Content::Incomplete)
        } else {
            Ok(Content::Divergent)
        }
    }

    fn set_member(
        &self,
        op: &Op<'_>,
        held: &Held,
        id: &MemberId,
        f: impl FnOnce(&mut contracts::MemberRecord),
    ) -> Result<Held, EngineError> {
        let mut next = held.record.clone();
        let m = next
            .member_mut(id)
            .ok_or(EngineError::AuthorityMismatch("member not bound"))?;
        f(m);
        self.cas(op, held, next)
    }

    /// [`Self::set_member`] on the staging run's shared record. A failed write stops every
    /// member before the lock is released, so no other member acts on (or misreports) a
    /// record this run can no longer vouch for. Nothing is written once stopped.
    fn set_shared(
        &self,
        op: &Op<'_>,
        shared: &Mutex<Staging>,
        id: &MemberId,
        f: impl FnOnce(&mut contracts::MemberRecord),
    ) -> Result<(), EngineError> {
        let mut g = lock(shared);
        if g.stopped {
            return Ok(());
        }
        match self.set_member(op, &g.held, id, f) {
            Ok(next) => {
                g.held = next;
                Ok(())
            }
            Err(e) => {
                g.stopped = true;
                Err(e)
            }
        }
    }

    /// [`Self::reread`] on the staging run's shared record; `None` once some member failed.
    fn reread_shared(
        &self,
        op: &Op<'_>,
        shared: &Mutex<Staging>,
    ) -> Result<Option<Held>, EngineError> {
        let mut g = lock(shared);
        if g.stopped {
            return Ok(None);
        }
        match self.reread(op, &g.held) {
            Ok(now) => {
                g.held = now.clone();
                Ok(Some(now))
            }
            Err(e) => {
                g.stopped = true;
                Err(e)
            }
        }
    }

    /// The staging run's shared record as this run last read or wrote it, without a new read;
    /// `None` once some member failed.
    fn held_shared(shared: &Mutex<Staging>) -> Option<Held> {
        let g = lock(shared);
        (!g.stopped).then(|| g.held.clone())
    }

    /// Stages one member: observe, then exactly one safe step, until its candidate is proven
    /// exact (the barrier then writes READY) or another member's failure stops staging.
    ///
    /// The authority is read again before a step that mutates the member (create, load, drop)
    /// unless this run's last authority call was a CAS it confirmed by read-back just before
    /// (only observations in between); a content proof is a read and needs no new read: the
    /// READY it leads to is written by the barrier's version-checked CAS. `initial` is the
    /// observation of the member's empty candidate when this run bound it as CREATED just
    /// before (its emptiness is then not ambiguous); the first step uses it instead of
    /// observing again.
    fn stage_member(
        &self,
        op: &Op<'_>,
        shared: &Mutex<Staging>,
        revalidated: &Revalidated,
        id: &MemberId,
        artifact: &ArtifactIdentity,
        mut initial: Option<TableObservation>,
    ) -> Result<(), EngineError> {
        let foreign = || EngineError::CandidateForeign {
            member: id.0.hex_prefix(16),
        };
        // True right after this run created the candidate: its emptiness is then not ambiguous.
        let mut fresh = initial.is_some();
        // Whether the record in `shared` was confirmed by this run's read-back just before.
        let mut confirmed = fresh;
        for _ in 0..self.config.member_step_limit {
            let held = if std::mem::take(&mut confirmed) {
                Self::held_shared(shared)
            } else {
                self.reread_shared(op, shared)?
            };
            let Some(held) = held else {
                return Ok(());
            };
            if held.record.phase != Phase::Staging {
                return Err(EngineError::AuthorityMismatch("staging outside STAGING"));
            }
            let rec = held
                .record
                .member(id)
                .cloned()
                .ok_or(EngineError::AuthorityMismatch("member not bound"))?;
            if rec.stage == StageState::Ready {
                return Ok(());
            }
            let obs = match initial.take() {
                Some(o) => Some(o),
                None => self.observe(op, id, &op.candidate)?,
            };
            match (rec.stage, rec.candidate_uuid, obs) {
                (StageState::Pending, _, Some(_)) => return Err(foreign()),
                (StageState::Pending, _, None) => {
                    let u = Uuid::from_random(self.ports.env.random16());
                    self.ports.progress.member_step(id, "candidate intent");
                    self.set_shared(op, shared, id, |m| {
                        m.stage = StageState::Intent;
                        m.candidate_uuid = Some(u);
                    })?;
                    confirmed = true;
                }
                (_, None, _) => {
                    return Err(EngineError::AuthorityMismatch("staged member without uuid"));
                }
                (StageState::Intent | StageState::Created, Some(u), Some(o)) if o.uuid != u => {
                    return Err(foreign());
                }
                (StageState::Intent, Some(u), None) => {
                    self.create_candidate(op, id, u)?;
                }
                (StageState::Intent, Some(_), Some(o)) => {
                    if o.columns != op.req.schema.columns {
                        return Err(EngineError::CandidateDivergent {
                            member: id.0.hex_prefix(16),
                        });
                    }
                    fresh = o.row_count == 0;
                    self.set_shared(op, shared, id, |m| m.stage = StageState::Created)?;
                    confirmed = true;
                }
                (StageState::Created, Some(_), None) => {
                    // The owned, unpublished candidate is gone (e.g. a rebuild dropped it and
                    // the run stopped): reserve a new UUID and rebuild.
                    let u = Uuid::from_random(self.ports.env.random16());
                    self.set_shared(op, shared, id, |m| {
                        m.stage = StageState::Intent;
                        m.candidate_uuid = Some(u);
                        m.rebuilds += 1;
                    })?;
                    confirmed = true;
                }
                (StageState::Created, Some(u), Some(o)) => {
                    if fresh && o.row_count == 0 && artifact.row_count > 0 {
                        fresh = false;
                        self.clock.member(id, MemberStep::Load, || {
                            self.load(op, &held, revalidated, id, u, artifact)
                        })?;
                        // Next: observation and the content proof, reads only.
                        confirmed = true;
                        continue;
                    }
                    fresh = false;
                    match self.classify(op, &held, id, &o)? {
                        Content::Exact(digest) => {
                            // READY is written by the barrier, with STAGED, in one CAS.
                            let mut g = lock(shared);
                            if !g.stopped {
                                g.proven.push((*id, digest));
                            }
                            return Ok(());
                        }
                        Content::Incomplete => {
                            // Never append to an ambiguous candidate: drop the exact owned
                            // candidate (publication has not started: the record, read again
                            // now, is unchanged in STAGING), prove absence, then reserve a new
                            // UUID.
                            if self.reread_shared(op, shared)?.is_none() {
                                return Ok(());
                            }
                            self.ports
                                .progress
                                .member_step(id, "drop incomplete candidate");
                            self.drop_proven(op, id, u)?;
                            let u2 = Uuid::from_random(self.ports.env.random16());
                            self.set_shared(op, shared, id, |m| {
                                m.stage = StageState::Intent;
                                m.candidate_uuid = Some(u2);
                                m.rebuilds += 1;
                            })?;
                            confirmed = true;
                        }
                        Content::Divergent => {
                            return Err(EngineError::CandidateDivergent {
                                member: id.0.hex_prefix(16),
                            });
                        }
                    }
                }
                (StageState::Ready, _, _) => return Ok(()),
            }
        }
        Err(EngineError::MemberUnavailable {
            member: id.0.hex_prefix(16),
            step: "stage",
            source: PortError::ambiguous("DPONE_STAGE_STEP_LIMIT"),
        })
    }

    /// Internal mode, STAGING → every replica READY (spec 000: internal mode "stages through one
    /// connection and relies on ClickHouse replication to produce one shared generation").
    ///
    /// The members are replicas of one `Replicated*MergeTree` candidate: one UUID intent is
    /// bound for all of them, the candidate is created on every replica with that exact UUID
    /// (so they share one replication path), the artifact is loaded once through the first
    /// member in member-id order, and every other replica is waited for with a bound
    /// ([`super::CoordinatorConfig::replica_sync_bound`]) and then proven by its own content,
    /// never by counts. Every step is decided from observation and the record, so a run that
    /// stops anywhere resumes here. A staging replica whose candidate is incomplete after an
    /// ambiguous load is rebuilt on every replica under a new UUID (never appended to); a
    /// replica that converged on other content than the artifact's is divergent and held.
    fn stage_replicas(
        &self,
        op: &Op<'_>,
        shared: &Mutex<Staging>,
        revalidated: &Revalidated,
        artifact: &ArtifactIdentity,
    ) -> Result<(), EngineError> {
        let Some((loader, _, _)) = op.members.first().copied() else {
            return Err(EngineError::AuthorityMismatch("no members"));
        };
        let foreign = |id: &MemberId| EngineError::CandidateForeign {
            member: id.0.hex_prefix(16),
        };
        let divergent = |id: &MemberId| EngineError::CandidateDivergent {
            member: id.0.hex_prefix(16),
        };
        // True right after this run created the candidate: the loader's emptiness is then not
        // ambiguous.
        let mut fresh = false;
        for _ in 0..self.config.member_step_limit {
            let Some(held) = self.reread_shared(op, shared)? else {
                return Ok(());
            };
            if held.record.phase != Phase::Staging {
                return Err(EngineError::AuthorityMismatch("staging outside STAGING"));
            }
            let members = &held.record.members;
            if members.iter().all(|m| m.stage == StageState::Ready) {
                return Ok(());
            }
            let stage = members[0].stage;
            let uuid = members[0].candidate_uuid;
            if members
                .iter()
                .any(|m| m.stage != stage || m.candidate_uuid != uuid)
            {
                // This run moves every replica together; anything else was not written here.
                return Err(EngineError::AuthorityMismatch(
                    "internal replicas in different stages",
                ));
            }
            let observed = self
                .for_members(&op.members, |(id, _, _)| {
                    self.observe(op, id, &op.candidate)
                })
                .into_iter()
                .collect::<Result<Vec<_>, EngineError>>()?;
            let all = |f: &dyn Fn(&mut contracts::MemberRecord)| self.set_all_shared(op, shared, f);
            match (stage, uuid) {
                (StageState::Pending, _) => {
                    if let Some(((id, _, _), _)) =
                        op.members.iter().zip(&observed).find(|(_, o)| o.is_some())
                    {
                        return Err(foreign(id));
                    }
                    let u = Uuid::from_random(self.ports.env.random16());
                    self.ports.progress.member_step(&loader, "candidate intent");
                    all(&|m| {
                        m.stage = StageState::Intent;
                        m.candidate_uuid = Some(u);
                    })?;
                }
                (_, None) => {
                    return Err(EngineError::AuthorityMismatch("staged member without uuid"));
                }
                (StageState::Intent | StageState::Created, Some(u)) => {
                    if let Some(((id, _, _), _)) = op
                        .members
                        .iter()
                        .zip(&observed)
                        .find(|(_, o)| o.as_ref().is_some_and(|o| o.uuid != u))
                    {
                        return Err(foreign(id));
                    }
                    if let Some(((id, _, _), _)) =
                        op.members.iter().zip(&observed).find(|(_, o)| {
                            o.as_ref()
                                .is_some_and(|o| o.columns != op.req.schema.columns)
                        })
                    {
                        return Err(divergent(id));
                    }
                    let missing: Vec<MemberId> = op
                        .members
                        .iter()
                        .zip(&observed)
                        .filter(|(_, o)| o.is_none())
                        .map(|((id, _, _), _)| *id)
                        .collect();
                    if stage == StageState::Intent {
                        if missing.is_empty() {
                            fresh = observed.iter().flatten().all(|o| o.row_count == 0);
                            all(&|m| m.stage = StageState::Created)?;
                        } else {
                            self.create_replicas(op, &missing, u)?;
                        }
                        continue;
                    }
                    if !missing.is_empty() {
                        // A replica of the owned, unpublished candidate is gone: rebuild every
                        // replica under a new UUID.
                        self.rebuild_replicas(op, shared, u)?;
                        continue;
                    }
                    let loader_rows = observed[0].as_ref().map_or(0, |o| o.row_count);
                    if fresh && loader_rows == 0 && artifact.row_count > 0 {
                        fresh = false;
                        self.clock.member(&loader, MemberStep::Load, || {
                            self.load(op, &held, revalidated, &loader, u, artifact)
                        })?;
                        continue;
                    }
                    fresh = false;
                    let Some(loaded) = observed[0].as_ref() else {
                        continue;
                    };
                    match self.classify(op, &held, &loader, loaded)? {
                        Content::Exact(_) => {}
                        Content::Incomplete => {
                            self.ports
                                .progress
                                .member_step(&loader, "drop incomplete candidate");
                            self.rebuild_replicas(op, shared, u)?;
                            continue;
                        }
                        Content::Divergent => return Err(divergent(&loader)),
                    }
                    // Every replica: converge within the bound, then prove its own content.
                    let digests = self.for_members(&op.members, |(id, _, _)| {
                        if *id != loader {
                            self.ports.progress.member_step(id, "sync replica");
                            self.clock
                                .member(id, MemberStep::Load, || {
                                    self.ports.catalog.sync_replica(
                                        id,
                                        op.database,
                                        &op.candidate,
                                        u,
                                        self.config.replica_sync_bound,
                                    )
                                })
                                .map_err(|e| {
                                    if e.class == crate::ports::REPLICA_NOT_CONVERGED {
                                        EngineError::ReplicaNotConverged {
                                            member: id.0.hex_prefix(16),
                                        }
                                    } else {
                                        Self::member_err(id, "sync replica")(e)
                                    }
                                })?;
                        }
                        let o = self.observe(op, id, &op.candidate)?.ok_or_else(|| {
                            EngineError::MemberUnavailable {
                                member: id.0.hex_prefix(16),
                                step: "observe replica",
                                source: PortError::ambiguous("DPONE_CANDIDATE_REPLICA_ABSENT"),
                            }
                        })?;
                        if o.uuid != u {
                            return Err(foreign(id));
                        }
                        match self.classify(op, &held, id, &o)? {
                            Content::Exact(d) => Ok(d),
                            // After the replica processed its queue, any other content is not
                            // the one replicated generation.
                            Content::Incomplete | Content::Divergent => Err(divergent(id)),
                        }
                    });
                    let digests = digests.into_iter().collect::<Result<Vec<_>, _>>()?;
                    let ready: Vec<(MemberId, Digest)> = op
                        .members
                        .iter()
                        .map(|(id, _, _)| *id)
                        .zip(digests)
                        .collect();
                    for (id, _) in &ready {
                        self.ports.progress.member_step(id, "ready");
                    }
                    all(&|m| {
                        if let Some((_, d)) = ready.iter().find(|(id, _)| *id == m.member_id) {
                            m.stage = StageState::Ready;
                            m.candidate_content_digest = Some(*d);
                        }
                    })?;
                }
                (StageState::Ready, _) => return Ok(()),
            }
        }
        Err(EngineError::MemberUnavailable {
            member: loader.0.hex_prefix(16),
            step: "stage",
            source: PortError::ambiguous("DPONE_STAGE_STEP_LIMIT"),
        })
    }

    /// Creates the replicated candidate with UUID `u` on each of `members` (concurrently).
    fn create_replicas(
        &self,
        op: &Op<'_>,
        members: &[MemberId],
        u: Uuid,
    ) -> Result<(), EngineError> {
        let spec = CandidateSpec {
            database: op.database,
            name: &op.candidate,
            uuid: u,
            schema: &op.req.schema,
            engine: op.engine,
            order_by: &op.req.order_by,
        };
        self.for_members(members, |id| {
            self.ports.progress.member_step(id, "create candidate");
            self.clock
                .member(id, MemberStep::Create, || {
                    self.ports.catalog.create_candidate(id, &spec)
                })
                .map_err(Self::member_err(id, "create candidate"))
        })
        .into_iter()
        .collect()
    }

    /// Drops the exact owned candidate `u` on every replica (publication has not started: the
    /// phase is STAGING), proves its absence everywhere, then binds a new UUID intent.
    fn rebuild_replicas(
        &self,
        op: &Op<'_>,
        shared: &Mutex<Staging>,
        u: Uuid,
    ) -> Result<(), EngineError> {
        let ids: Vec<MemberId> = op.members.iter().map(|(id, _, _)| *id).collect();
        self.for_members(&ids, |id| self.drop_proven(op, id, u))
            .into_iter()
            .collect::<Result<(), EngineError>>()?;
        let u2 = Uuid::from_random(self.ports.env.random16());
        self.set_all_shared(op, shared, &|m| {
            m.stage = StageState::Intent;
            m.candidate_uuid = Some(u2);
            m.rebuilds += 1;
        })
    }

    /// Drops the exact owned candidate `u` on `id` and proves its absence (an observation that
    /// still finds it is ambiguous: the next run decides).
    fn drop_proven(&self, op: &Op<'_>, id: &MemberId, u: Uuid) -> Result<(), EngineError> {
        self.ports
            .catalog
            .drop_exact(id, op.database, &op.candidate, u)
            .map_err(Self::member_err(id, "drop candidate"))?;
        match self.observe(op, id, &op.candidate)? {
            None => Ok(()),
            Some(_) => Err(EngineError::MemberUnavailable {
                member: id.0.hex_prefix(16),
                step: "prove candidate absence",
                source: PortError::ambiguous("DPONE_CANDIDATE_STILL_PRESENT"),
            }),
        }
    }

    /// One CAS applying `f` to every member record of the staging run's shared record.
    fn set_all_shared(
        &self,
        op: &Op<'_>,
        shared: &Mutex<Staging>,
        f: &dyn Fn(&mut contracts::MemberRecord),
    ) -> Result<(), EngineError> {
        let mut g = lock(shared);
        if g.stopped {
            return Ok(());
        }
        let mut next = g.held.record.clone();
        next.members.iter_mut().for_each(f);
        match self.cas(op, &g.held, next) {
            Ok(h) => {
                g.held = h;
                Ok(())
            }
            Err(e) => {
                g.stopped = true;
                Err(e)
            }
        }
    }

    /// Exactly one load of the revalidated artifact. An error is not retried here: the next
    /// observation decides (exact → READY, incomplete → rebuild).
    ///
    /// The artifact is revalidated (re-hashed by its store) once per staging run, before the
    /// run's first load; every load then hashes the bytes it streams and checks them against
    /// the identity at the end ([`Verifying`]), so no separate pass re-reads the artifact per
    /// load and bytes altered after the revalidation still never complete a load: the load
    /// fails and the run aborts with exact cleanup, as when the revalidation fails.
    fn load(
        &self,
        op: &Op<'_>,
        held: &Held,
        revalidated: &Revalidated,
        id: &MemberId,
        uuid: Uuid,
        artifact: &ArtifactIdentity,
    ) -> Result<(), EngineError> {
        let tampered =
            || EngineError::ArtifactInvalid("the sealed artifact no longer matches its identity");
        let verdict = {
            let mut g = revalidated.lock().unwrap_or_else(PoisonError::into_inner);
            g.get_or_insert_with(|| self.ports.artifacts.revalidate(artifact))
                .clone()
        };
        verdict.map_err(|e| {
            if e.class == crate::ports::ARTIFACT_TAMPERED {
                tampered()
            } else {
                super::interrupted_or(e.kind, "artifact", || EngineError::ArtifactUnavailable(e))
            }
        })?;
        let inner = self.ports.artifacts.open(artifact).map_err(|e| {
            super::interrupted_or(e.kind, "artifact", || EngineError::ArtifactUnavailable(e))
        })?;
        let mut reader = Verifying {
            inner,
            hasher: Some(Sha256::new()),
            seen: 0,
            expected: *artifact,
            tampered: false,
        };
        let generation = held
            .record
            .generation_id
            .ok_or(EngineError::AuthorityMismatch("no generation"))?;
        let rebuilds = held.record.member(id).map_or(0, |m| m.rebuilds);
        let (query_id, dedup_token) = contracts::load_tokens(&generation, id, rebuilds);
        self.ports.progress.member_step(id, "load");
        let sent = self.ports.catalog.load(
            id,
            op.database,
            &op.candidate,
            uuid,
            &mut reader,
            &LoadTokens {
                query_id,
                dedup_token,
            },
        );
        if reader.tampered {
            return Err(tampered());
        }
        match sent {
            Ok(()) => Ok(()),
            Err(e) if e.kind == crate::ports::PortErrorKind::Interrupted => {
                Err(EngineError::Interrupted { step: "load" })
            }
            // Refused deterministically while the exact owned candidate is in place: the same
            // bytes would be refused again, so stop instead of rebuilding in a loop. (When the
            // candidate is gone or foreign, the next observation decides as usual.)
            Err(e) if e.kind == crate::ports::PortErrorKind::Rejected => {
                match self.observe(op, id, &op.candidate)? {
                    Some(o) if o.uuid == uuid => Err(EngineError::StatementRejected {
                        scope: format!("member {}", id.0.hex_prefix(16)),
                        step: "load",
                        aborted: false,
                        source: e,
                    }),
                    _ => Ok(()),
                }
            }
            // Ambiguous: observation decides, never a blind retry.
            Err(_) => Ok(()),
        }
    }
}
