//! The runtime's error type. Every variant has a stable machine code; every failure to load or
//! run a policy is one of these, and none of them is ever turned into an allow.

use crate::kind::PolicyKind;

/// Why a policy could not be loaded or could not decide.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The component's sha256 is not the pinned digest.
    #[error("component digest sha256:{actual} does not match the pin sha256:{expected}")]
    PinMismatch {
        /// Pinned digest (hex).
        expected: String,
        /// Digest of the bytes offered (hex).
        actual: String,
    },
    /// The bytes are not a WebAssembly component.
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    /// The component declares imports; policy components must import nothing.
    #[error("component imports {0:?}; policy components must import nothing")]
    ImportsForbidden(Vec<String>),
    /// The component does not export the interface of the expected policy kind.
    #[error("component does not export the {expected} interface (exports: {exports:?})")]
    WorldMismatch {
        /// Kind the caller asked for.
        expected: PolicyKind,
        /// What the component exports.
        exports: Vec<String>,
    },
    /// The component exports the interface at a package version the host does not support.
    #[error("component exports {found}; this host supports {supported}")]
    WitVersionUnsupported {
        /// Export name found.
        found: String,
        /// Export name supported.
        supported: String,
    },
    /// The exported functions do not have the contract's types.
    #[error("component exports do not match the contract: {0}")]
    ExportTypeMismatch(String),
    /// The component uses a WebAssembly proposal the host's locked feature set does not enable.
    #[error("component uses a WebAssembly proposal this host does not enable: {0}")]
    WasmFeatureDisabled(String),
    /// Compilation failed.
    #[error("component failed to compile: {0}")]
    CompileFailed(String),
    /// A declared resource budget exceeds what this host allows.
    #[error("declared budget exceeds the host's ceiling: {0}")]
    BudgetTooLarge(String),
    /// The sandbox could not be instantiated (pool exhausted, instance limits).
    #[error("sandbox could not be instantiated: {0}")]
    InstantiateFailed(String),
    /// The decision used all of its fuel.
    #[error("policy exhausted its fuel budget of {budget}")]
    FuelExhausted {
        /// Fuel granted.
        budget: u64,
    },
    /// The decision ran past its wall-clock deadline.
    #[error("policy ran past its deadline of {deadline_ms} ms")]
    DeadlineExceeded {
        /// Deadline in milliseconds.
        deadline_ms: u64,
    },
    /// The policy tried to grow memory past its limit.
    #[error("policy tried to grow memory past its limit of {limit_bytes} bytes")]
    MemoryLimitExceeded {
        /// Memory limit in bytes.
        limit_bytes: u64,
    },
    /// The policy exhausted its wasm stack.
    #[error("policy exhausted its wasm stack")]
    StackOverflow,
    /// The policy trapped.
    #[error("policy trapped: {0}")]
    Trapped(String),
    /// The policy's output is larger than the host accepts.
    #[error("policy output of {bytes} bytes exceeds the limit of {limit} bytes")]
    OutputOversized {
        /// Size of the output as canonical JSON.
        bytes: usize,
        /// Limit.
        limit: usize,
    },
    /// The policy's result was larger than the host copies out of a sandbox; lifting stopped
    /// before the host allocated it.
    #[error(
        "policy result exceeds the {limit} bytes the host copies out of a sandbox; lifting stopped before the host allocated it"
    )]
    OutputLiftBound {
        /// Bytes the host copies out while lifting one result.
        limit: usize,
    },
    /// The policy's output violates the contract.
    #[error("policy output is malformed: {0}")]
    OutputInvalid(String),
    /// The input could not be parsed as the facts record of the function.
    #[error("input is not a valid {function} facts record: {message}")]
    InputInvalid {
        /// Function the input was for.
        function: String,
        /// Parse error.
        message: String,
    },
    /// The kind has no such function.
    #[error("policy kind {kind} has no function {function}")]
    UnknownFunction {
        /// Policy kind.
        kind: PolicyKind,
        /// Function asked for.
        function: String,
    },
    /// The epoch ticker (the wall-clock deadline of every decision) could not be started.
    #[error("the decision deadline is unavailable: the epoch ticker could not start ({0})")]
    DeadlineUnavailable(String),
    /// The engine could not be configured.
    #[error("engine configuration failed: {0}")]
    EngineConfig(String),
    /// The precompiled cache directory fails the ownership and permission checks.
    #[error("precompiled cache directory refused: {0}")]
    CacheDirUnsafe(String),
    /// The precompiled cache key file fails its checks.
    #[error("precompiled cache key refused: {0}")]
    CacheKeyUnsafe(String),
    /// A cache directory operation failed.
    #[error("precompiled cache I/O failed: {0}")]
    CacheIo(String),
}

impl PolicyError {
    /// Stable machine code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::PinMismatch { .. } => "DPONE_POLICY_PIN_MISMATCH",
            Self::NotAComponent(_) => "DPONE_POLICY_NOT_A_COMPONENT",
            Self::ImportsForbidden(_) => "DPONE_POLICY_IMPORTS_FORBIDDEN",
            Self::WorldMismatch { .. } => "DPONE_POLICY_WORLD_MISMATCH",
            Self::WitVersionUnsupported { .. } => "DPONE_POLICY_WIT_VERSION_UNSUPPORTED",
            Self::ExportTypeMismatch(_) => "DPONE_POLICY_EXPORT_TYPE_MISMATCH",
            Self::WasmFeatureDisabled(_) => "DPONE_POLICY_WASM_FEATURE_DISABLED",
            Self::CompileFailed(_) => "DPONE_POLICY_COMPILE_FAILED",
            Self::BudgetTooLarge(_) => "DPONE_POLICY_BUDGET_TOO_LARGE",
            Self::InstantiateFailed(_) => "DPONE_POLICY_INSTANTIATE_FAILED",
            Self::FuelExhausted { .. } => "DPONE_POLICY_FUEL_EXHAUSTED",
            Self::DeadlineExceeded { .. } => "DPONE_POLICY_DEADLINE_EXCEEDED",
            Self::MemoryLimitExceeded { .. } => "DPONE_POLICY_MEMORY_LIMIT_EXCEEDED",
            Self::StackOverflow => "DPONE_POLICY_STACK_OVERFLOW",
            Self::Trapped(_) => "DPONE_POLICY_TRAPPED",
            Self::OutputOversized { .. } => "DPONE_POLICY_OUTPUT_OVERSIZED",
            Self::OutputInvalid(_) => "DPONE_POLICY_OUTPUT_INVALID",
            Self::OutputLiftBound { .. } => "DPONE_POLICY_OUTPUT_OVERSIZED",
            Self::DeadlineUnavailable(_) => "DPONE_POLICY_DEADLINE_UNAVAILABLE",
            Self::InputInvalid { .. } => "DPONE_POLICY_INPUT_INVALID",
            Self::UnknownFunction { .. } => "DPONE_POLICY_UNKNOWN_FUNCTION",
            Self::EngineConfig(_) => "DPONE_POLICY_ENGINE_CONFIG",
            Self::CacheIo(_) => "DPONE_POLICY_CACHE_IO",
            Self::CacheDirUnsafe(_) => "DPONE_POLICY_CACHE_DIR_UNSAFE",
            Self::CacheKeyUnsafe(_) => "DPONE_POLICY_CACHE_KEY_UNSAFE",
        }
    }

    /// True when the error happened while a decision ran (the policy failed closed), as opposed
    /// to while loading it.
    pub fn is_decision_failure(&self) -> bool {
        matches!(
            self,
            Self::InstantiateFailed(_)
                | Self::FuelExhausted { .. }
                | Self::DeadlineExceeded { .. }
                | Self::MemoryLimitExceeded { .. }
                | Self::StackOverflow
                | Self::Trapped(_)
                | Self::OutputOversized { .. }
                | Self::OutputLiftBound { .. }
                | Self::OutputInvalid(_)
        )
    }
}
