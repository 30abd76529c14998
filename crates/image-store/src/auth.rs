//! Registry credentials.

use std::fmt;

/// Credentials for a registry.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth {
    /// No credentials (anonymous token where the registry hands them out).
    #[default]
    Anonymous,
    /// A user name and password (or identity token as password).
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A registry token, sent as a bearer token.
    Bearer(String),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::Anonymous => f.write_str("Anonymous"),
            Auth::Basic { username, .. } => write!(f, "Basic({username:?}, <redacted>)"),
            Auth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

impl Auth {
    pub(crate) fn to_client(&self) -> oci_client::secrets::RegistryAuth {
        use oci_client::secrets::RegistryAuth;
        match self {
            Auth::Anonymous => RegistryAuth::Anonymous,
            Auth::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            Auth::Bearer(token) => RegistryAuth::Bearer(token.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let basic = Auth::Basic {
            username: "me".into(),
            password: "hunter2".into(),
        };
        assert_eq!(format!("{basic:?}"), "Basic(\"me\", <redacted>)");
        let bearer = Auth::Bearer("tok".into());
        assert!(!format!("{bearer:?}").contains("tok"));
        assert_eq!(format!("{:?}", Auth::default()), "Anonymous");
    }
}
