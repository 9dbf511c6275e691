//! The faults the synthetic cluster can inject; each fires once.

use crate::contracts::Phase;

/// How an authority write fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteFault {
    /// The process stops before the write applies.
    CrashBefore,
    /// The write applies, then the process stops.
    CrashAfter,
    /// The write applies; the acknowledgement is lost and the process keeps running.
    LostAck,
}

/// One injectable fault. Member indexes are positions in (shard, replica) order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The next load on `member` applies every row, then the response is lost (ambiguous).
    LoadLostResponseComplete {
        /// Member index.
        member: usize,
    },
    /// The next load on `member` applies only its first `rows` rows, then the response is lost.
    LoadLostResponsePartial {
        /// Member index.
        member: usize,
        /// Rows applied.
        rows: u64,
    },
    /// The next load on `member` succeeds; the process stops before the following authority
    /// write applies.
    CrashAfterLoadBeforeCas {
        /// Member index.
        member: usize,
    },
    /// The process stops before the authority write into this phase applies.
    CrashBeforePhase(Phase),
    /// The authority write into this phase applies, then the process stops (no acknowledgement).
    CrashAfterPhase(Phase),
    /// The authority write into this phase applies but its acknowledgement is lost (ambiguous);
    /// the process keeps running.
    LostCasAck(Phase),
    /// The publication DDL executes on the first `executed` members; the rest stay queued until
    /// the next [`super::SyntheticCluster::tick`]. The response is lost.
    PartialDdl {
        /// Members that execute at once.
        executed: usize,
    },
    /// The publication DDL executes on every member; the response is lost.
    LostDdlResponse,
    /// The publication DDL fails terminally on `member` (others execute).
    DdlFailsOnMember {
        /// Member index.
        member: usize,
    },
    /// The process stops just before the publication DDL is sent.
    CrashBeforePublicationDispatch,
    /// The cleanup DROP executes everywhere; the response is lost.
    CleanupLostResponse,
    /// The cleanup DROP never reaches the cluster (connection refused before sending).
    CleanupNotSent,
    /// After `skip` clean inventory reads, the next `observations` reads report another
    /// endpoint for `member`.
    InventoryDrift {
        /// Member index.
        member: usize,
        /// Clean reads first.
        skip: u32,
        /// How many reads drift.
        observations: u32,
    },
    /// The `nth` (0-based) authority write that reaches the store fails as `mode`, whatever its
    /// phase: together these cover a crash or lost acknowledgement at every single CAS.
    AuthorityWrite {
        /// Index among applied-or-attempted writes (stale no-ops excluded).
        nth: u32,
        /// Failure mode.
        mode: WriteFault,
    },
    /// The next member-catalog call on `member` finds the member unreachable (not sent).
    MemberUnavailableOnce {
        /// Member index.
        member: usize,
    },
    /// The next admission probe of `member` finds it unreachable (not sent).
    MemberUnavailableAtProbe {
        /// Member index.
        member: usize,
    },
    /// The next inventory read gets no answer from the coordinator endpoint.
    InventoryUnavailableOnce,
    /// The next candidate creation on `member` is refused deterministically (as ClickHouse
    /// refuses an unknown type or engine); nothing is created.
    CreateRejected {
        /// Member index.
        member: usize,
    },
    /// The next load on `member` applies its first `rows` rows, then is refused
    /// deterministically (as ClickHouse refuses data that does not parse after earlier blocks
    /// were inserted).
    LoadRejected {
        /// Member index.
        member: usize,
        /// Rows applied before the refusal.
        rows: u64,
    },
    /// Internal mode: the next `syncs` replica syncs of `member` time out (the replica lags),
    /// then it converges.
    ReplicaLags {
        /// Member index.
        member: usize,
        /// Syncs that time out.
        syncs: u32,
    },
    /// Internal mode: every replica sync of `member` times out (it never converges).
    ReplicaNeverConverges {
        /// Member index.
        member: usize,
    },
    /// Internal mode: `member`'s next sync leaves it with one row the replication log does not
    /// hold (a divergent replica).
    ReplicaDivergent {
        /// Member index.
        member: usize,
    },
    /// The next content proof `member` computes (its rowset digest) runs past the
    /// verification-time budget and is stopped by the member.
    ProofBudgetExceeded {
        /// Member index.
        member: usize,
    },
    /// After the staging barrier, `member`'s target is replaced by a table of another
    /// generation (a writer outside dpone).
    TargetReplacedAfterStaging {
        /// Member index.
        member: usize,
    },
}
