//! Composition of the ClickHouse route: the admission gate over the policy component, the
//! policy source (honouring a configured trust policy), terminal progress, the read-only stubs
//! `status` needs, and the mapping of engine errors to CLI failures.

use std::io::IsTerminal;

use dpone_engine_clickhouse::EngineError;
use dpone_engine_clickhouse::contracts::{
    AdmissionEvidence, ArtifactIdentity, MemberId, Phase, Schema,
};
use dpone_engine_clickhouse::ports::{
    AdmissionGate, ArtifactSource, Gated, PortError, PortErrorKind, ProgressObserver,
};
use dpone_policy_model::admission::{RuntimeDecision, RuntimeFacts, StaticDecision, StaticFacts};
use dpone_policy_runtime::{DecisionEvidence, LoadedPolicy};

use crate::exit::{Failure, POLICY_FAILED, REFUSED, RETRY};

/// Engine-facing evidence of one component decision.
pub fn admission_evidence(e: &DecisionEvidence) -> AdmissionEvidence {
    AdmissionEvidence {
        component_sha256: e.component_sha256.to_string(),
        input_sha256: e.input_sha256.to_string(),
    }
}

/// The [`AdmissionGate`] over the admission policy component.
pub struct ComponentGate<'p> {
    /// The loaded admission component.
    pub policy: &'p LoadedPolicy,
}

impl AdmissionGate for ComponentGate<'_> {
    fn admit_static(&self, facts: &StaticFacts) -> Result<Gated<StaticDecision>, PortError> {
        let d = crate::telemetry::decide(
            dpone_policy_runtime::PolicyKind::Admission,
            "admit-static",
            || self.policy.admission_static(facts),
        )
        .map_err(|e| PortError::rejected(e.code()))?;
        Ok(Gated {
            evidence: admission_evidence(&d.evidence),
            decision: d.decision,
        })
    }

    fn admit_runtime(&self, facts: &RuntimeFacts) -> Result<Gated<RuntimeDecision>, PortError> {
        let d = crate::telemetry::decide(
            dpone_policy_runtime::PolicyKind::Admission,
            "admit-runtime",
            || self.policy.admission_runtime(facts),
        )
        .map_err(|e| PortError::rejected(e.code()))?;
        Ok(Gated {
            evidence: admission_evidence(&d.evidence),
            decision: d.decision,
        })
    }
}

/// `status` decides nothing: a gate that is never consulted (and refuses if it were).
pub struct NoAdmission;

impl AdmissionGate for NoAdmission {
    fn admit_static(&self, _: &StaticFacts) -> Result<Gated<StaticDecision>, PortError> {
        Err(PortError::rejected("DPONE_CLI_STATUS_READ_ONLY"))
    }

    fn admit_runtime(&self, _: &RuntimeFacts) -> Result<Gated<RuntimeDecision>, PortError> {
        Err(PortError::rejected("DPONE_CLI_STATUS_READ_ONLY"))
    }
}

/// `status` reads no source: an artifact source that refuses every call.
pub struct NoArtifacts;

impl ArtifactSource for NoArtifacts {
    fn seal(&self, _: &Schema, _: u64) -> Result<ArtifactIdentity, PortError> {
        Err(PortError::rejected("DPONE_CLI_STATUS_READ_ONLY"))
    }

    fn revalidate(&self, _: &ArtifactIdentity) -> Result<(), PortError> {
        Err(PortError::rejected("DPONE_CLI_STATUS_READ_ONLY"))
    }

    fn open<'a>(&'a self, _: &ArtifactIdentity) -> Result<Box<dyn std::io::Read + 'a>, PortError> {
        Err(PortError::rejected("DPONE_CLI_STATUS_READ_ONLY"))
    }

    fn release(&self, _: &ArtifactIdentity) -> Result<(), PortError> {
        Ok(())
    }
}

/// Per-member progress on stderr, only when stderr is a terminal (never when piped, so a piped
/// stderr carries nothing but the one JSON error line).
/// It also remembers the first phase this run held, so the run that brings a publication to
/// `COMPLETED` (and only that run) counts its rows as applied.
pub struct TerminalProgress {
    enabled: bool,
    first: std::sync::OnceLock<Phase>,
}

impl TerminalProgress {
    /// Progress if stderr is a terminal.
    pub fn detect() -> Self {
        Self {
            enabled: std::io::stderr().is_terminal(),
            first: std::sync::OnceLock::new(),
        }
    }

    /// True when this run held the operation before it was `COMPLETED`: the authority's
    /// version-checked transition into `COMPLETED` was this run's. A retry of a completed
    /// publication starts at `COMPLETED` and did not publish anything.
    pub fn completed_here(&self) -> bool {
        self.first.get().is_some_and(|p| *p != Phase::Completed)
    }
}

impl ProgressObserver for TerminalProgress {
    fn member_step(&self, member: &MemberId, step: &'static str) {
        if self.enabled {
            eprintln!("dpone: member {} {step}", member.0.hex_prefix(16));
        }
    }

    fn phase(&self, phase: Phase) {
        let _ = self.first.set(phase);
        if self.enabled {
            eprintln!("dpone: phase {}", phase.as_str());
        }
    }
}

/// The class of the port error that caused an engine error, if any.
pub fn cause(e: &EngineError) -> Option<&'static str> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(p) = s.downcast_ref::<PortError>() {
            return Some(p.class);
        }
        source = s.source();
    }
    None
}

/// An engine error as a CLI failure. Exit 4 when the admission component failed closed; 75
/// when the engine says a same-operation retry may make progress (`is_retryable`: transport,
/// interruption, another operation's fence, inventory drift); 1 otherwise (blocked, refused,
/// aborted, or fail-closed evidence held for an operator).
pub fn engine_failure(e: &EngineError) -> Failure {
    let cause = cause(e);
    let exit = match e {
        EngineError::AdmissionUnavailable(p)
            if p.class.starts_with("DPONE_POLICY_") || p.kind == PortErrorKind::Rejected =>
        {
            POLICY_FAILED
        }
        _ if e.is_retryable() => RETRY,
        _ => REFUSED,
    };
    let mut message = e.to_string();
    if let Some(c) = cause {
        message.push_str(&format!(" ({c})"));
    }
    message.push_str(&format!(
        "; recovery: {}",
        serde_json::to_value(e.recovery())
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    ));
    Failure {
        code: e.code().to_owned(),
        message,
        exit,
    }
}

/// A port failure before the engine ran (connection set-up, preflight read).
pub fn port_failure(e: &PortError, what: &str) -> Failure {
    let exit = match e.kind {
        PortErrorKind::Unavailable | PortErrorKind::Ambiguous | PortErrorKind::Interrupted => RETRY,
        PortErrorKind::Rejected => REFUSED,
    };
    Failure {
        code: e.class.to_owned(),
        message: format!("{what} failed; nothing was changed"),
        exit,
    }
}
