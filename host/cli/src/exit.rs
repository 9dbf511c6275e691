//! Exit codes and the error shape every command reports on stderr.

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

    /// A failure of the XMin route, with the exit status of its code's class.
    pub fn xmin(code: dpone_engine_xmin::ErrorCode, message: impl Into<String>) -> Self {
        use dpone_engine_xmin::ErrorClass;
        Self {
            code: code.as_str().to_owned(),
            message: message.into(),
            exit: match code.class() {
                ErrorClass::BadInput => BAD_INPUT,
                ErrorClass::Refused => REFUSED,
                ErrorClass::NotFinished => RETRY,
            },
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

/// The exit status of a trust error's class.
pub(crate) fn exit_for_class(class: ErrorClass) -> u8 {
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

#[derive(Serialize)]
struct ErrorReport<'a> {
    error: &'a str,
    message: &'a str,
}

/// Prints a failure as JSON on stderr and converts the result into the process exit code.
///
/// This is the one place CLI errors are rendered: the message is made safe here whatever its
/// source ([`dpone_boundary::text::clean_message`]: quoted values capped at 64 characters,
/// control, separator, bidi and format characters escaped, the whole at most 512 characters).
pub fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let message = dpone_boundary::text::clean_message(&failure.message);
            let code = dpone_boundary::text::clean_message(&failure.code);
            let report = ErrorReport {
                error: &code,
                message: &message,
            };
            eprintln!(
                "{}",
                serde_json::to_string(&report).unwrap_or_else(|_| failure.code.clone())
            );
            let (human, color) = crate::render::human_errors();
            if human {
                let verdict = match failure.exit {
                    RETRY => "not finished (retry the same operation)",
                    BAD_INPUT => "refused (bad input)",
                    POLICY_FAILED => "refused (policy failed closed)",
                    INTERNAL => "failed (internal error)",
                    _ => "refused",
                };
                let verdict = if color {
                    format!("\x1b[1;31m{verdict}\x1b[0m")
                } else {
                    verdict.to_owned()
                };
                eprintln!("{verdict}: {code}: {message}");
            }
            ExitCode::from(failure.exit)
        }
    }
}

/// Prints a command's report: its JSON contract (pretty, one trailing newline) on stdout, or,
/// in text mode (`--output text`, or a terminal under `--output auto`), the summary the report
/// gives of itself ([`crate::render::Report::summary`]).
pub fn print_report<R: crate::render::Report>(report: &R) -> Result<(), Failure> {
    let text = if crate::render::text_mode() {
        crate::render::report_text(report).trim_end().to_owned()
    } else {
        crate::render::report_json(report)
            .map_err(|e| Failure::internal("DPONE_CLI_OUTPUT", e.to_string()))?
    };
    write_stdout(&format!("{text}\n"))
}

/// Prints a value as pretty JSON on stdout whatever the output mode: for a command whose own
/// flag asks for the JSON contract (`check --connections --json`).
pub fn print_json_contract<T: Serialize>(value: &T) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::internal("DPONE_CLI_OUTPUT", e.to_string()))?;
    write_stdout(&format!("{text}\n"))
}

/// Writes a command's output to stdout. A reader that went away (`dpone-host plan | head`, a
/// closed pipe) is not a failure of the command: the rest is dropped and the command's own
/// result stands. Any other write error is `DPONE_CLI_OUTPUT`.
pub fn write_stdout(text: &str) -> Result<(), Failure> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::internal(
            "DPONE_CLI_OUTPUT",
            format!("cannot write the output: {}", e.kind()),
        )),
        _ => Ok(()),
    }
}
