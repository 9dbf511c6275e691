//! Exit codes and the error shape every command reports on stderr.

use crate::activation::ActivationError;
use dpone_policy_runtime::PolicyError;
use dpone_trust::{ErrorClass, TrustError};
use serde::Serialize;
use std::process::ExitCode;

/// A command failure with its stable code and exit status.
#[derive(Debug)]
pub struct Failure {
    /// Stable machine code.
    pub code: String,
    /// Human message (no paths, secrets or row values).
    pub message: String,
    /// Process exit status.
    pub exit: u8,
}

/// Exit status: a check or verification refused.
pub const REFUSED: u8 = 1;
/// Exit status: bad input.
pub const BAD_INPUT: u8 = 3;
/// Exit status: a policy was refused at load or failed closed.
pub const POLICY_FAILED: u8 = 4;
/// Exit status: internal error.
pub const INTERNAL: u8 = 5;
/// Exit status of a run that has not finished and may be retried as the same operation
/// (`EX_TEMPFAIL`): the cluster is still executing the bound DDL, or a dependency did not answer.
pub const RETRY: u8 = 75;

impl Failure {
    /// A bad-input failure.
    pub fn bad_input(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            exit: BAD_INPUT,
        }
    }

    /// A refusal.
    pub fn refused(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            exit: REFUSED,
        }
    }

    /// An internal failure.
    pub fn internal(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            exit: INTERNAL,
        }
    }
}

impl From<PolicyError> for Failure {
    fn from(e: PolicyError) -> Self {
        let exit = match e {
            PolicyError::InputInvalid { .. } | PolicyError::UnknownFunction { .. } => BAD_INPUT,
            _ => POLICY_FAILED,
        };
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
            exit,
        }
    }
}

fn exit_for_class(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::Refused => REFUSED,
        ErrorClass::BadInput => BAD_INPUT,
        ErrorClass::Internal => INTERNAL,
    }
}

impl From<TrustError> for Failure {
    fn from(e: TrustError) -> Self {
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
            exit: exit_for_class(e.class()),
        }
    }
}

impl From<ActivationError> for Failure {
    fn from(e: ActivationError) -> Self {
        let exit = match &e {
            ActivationError::Trust(trust) => exit_for_class(trust.class()),
            ActivationError::Load {
                source: PolicyError::InputInvalid { .. } | PolicyError::UnknownFunction { .. },
                ..
            } => BAD_INPUT,
            ActivationError::Load { .. } => POLICY_FAILED,
            other if other.is_refusal() => REFUSED,
            _ => INTERNAL,
        };
        Self {
            code: e.code().to_owned(),
            message: e.to_string(),
            exit,
        }
    }
}

#[derive(Serialize)]
struct ErrorReport<'a> {
    error: &'a str,
    message: &'a str,
}

/// Prints a failure as JSON on stderr and converts the result into the process exit code.
pub fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let report = ErrorReport {
                error: &failure.code,
                message: &failure.message,
            };
            eprintln!(
                "{}",
                serde_json::to_string(&report).unwrap_or_else(|_| failure.code.clone())
            );
            ExitCode::from(failure.exit)
        }
    }
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::internal("DPONE_CLI_OUTPUT", e.to_string()))?;
    #[allow(clippy::print_stdout)]
    {
        println!("{text}");
    }
    Ok(())
}
