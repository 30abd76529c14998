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
    /// A digest of the credentials (never the credentials): pulls with different credentials
    /// never share a download. `None` for anonymous pulls.
    pub(crate) fn fingerprint(&self) -> Option<String> {
        let text = match self {
            Auth::Anonymous => return None,
            Auth::Basic { username, password } => format!("basic\0{username}\0{password}"),
            Auth::Bearer(token) => format!("bearer\0{token}"),
        };
        Some(crate::digest::Digest::of(text.as_bytes()).hex()[..16].to_owned())
    }

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

    #[test]
    fn fingerprints_tell_credentials_apart_without_showing_them() {
        let basic = |u: &str, p: &str| Auth::Basic {
            username: u.into(),
            password: p.into(),
        };
        assert_eq!(Auth::Anonymous.fingerprint(), None);
        let a = basic("me", "hunter2").fingerprint().expect("a fingerprint");
        assert!(!a.contains("hunter2") && a.len() == 16, "{a}");
        assert_eq!(basic("me", "hunter2").fingerprint(), Some(a.clone()));
        assert_ne!(basic("me", "hunter3").fingerprint(), Some(a.clone()));
        assert_ne!(basic("me\0h", "unter2").fingerprint(), Some(a.clone()));
        assert_ne!(Auth::Bearer("me".into()).fingerprint(), Some(a));
    }
}
