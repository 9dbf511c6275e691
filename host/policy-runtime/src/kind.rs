//! The four policy kinds and the names they have in the WIT contract.

use std::fmt;
use std::str::FromStr;

/// The WIT package version this host supports.
pub const SUPPORTED_WIT_PACKAGE: &str = dpone_policy_model::WIT_PACKAGE;

/// A policy kind: one WIT interface, one world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// ClickHouse cluster admission.
    Admission,
    /// Delete guards and repair authority.
    Guard,
    /// Delete-mode plan.
    DeleteMode,
    /// Nonproduction scope.
    Scope,
}

impl PolicyKind {
    /// Every kind.
    pub const ALL: [PolicyKind; 4] = [
        PolicyKind::Admission,
        PolicyKind::DeleteMode,
        PolicyKind::Guard,
        PolicyKind::Scope,
    ];

    /// Name as written in WIT and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admission => "admission",
            Self::Guard => "guard",
            Self::DeleteMode => "delete-mode",
            Self::Scope => "scope",
        }
    }

    /// The world a component of this kind targets.
    pub fn world(self) -> String {
        format!("{}-policy", self.as_str())
    }

    /// The interface export a component of this kind must have, e.g. `dpone:policy/guard@0.1.0`.
    pub fn export_name(self) -> String {
        let (package, version) = split_version(SUPPORTED_WIT_PACKAGE);
        format!("{package}/{}@{version}", self.as_str())
    }

    /// Exported functions, in WIT spelling.
    pub fn functions(self) -> &'static [&'static str] {
        match self {
            Self::Admission => &["admit-static", "admit-runtime"],
            Self::Guard | Self::Scope => &["decide"],
            Self::DeleteMode => &["plan"],
        }
    }
}

/// Splits `ns:pkg@1.2.3` into (`ns:pkg`, `1.2.3`).
pub(crate) fn split_version(name: &str) -> (&str, &str) {
    name.split_once('@').unwrap_or((name, ""))
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PolicyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown policy kind {s:?}; expected admission, guard, delete-mode or scope"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_names_follow_the_package() {
        assert_eq!(
            PolicyKind::DeleteMode.export_name(),
            "dpone:policy/delete-mode@0.1.0"
        );
        assert_eq!(PolicyKind::Guard.world(), "guard-policy");
        assert_eq!("scope".parse::<PolicyKind>(), Ok(PolicyKind::Scope));
        assert!("Scope".parse::<PolicyKind>().is_err());
    }
}
