//! A node's pull configuration as files, the way containers/image reads them for CRI-O and
//! Podman: a signature policy (a configured path, else the first of the caller's defaults that
//! exists), a registries.conf with its `.d` drop-in directory, and a credentials file; each read
//! again only when it changed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use node_primitives::Fingerprint;

use crate::auth::Auth;
use crate::auth_file::AuthFile;
use crate::error::{Error, Result};
use crate::policy::Policy;
use crate::reference::Reference;
use crate::registries::Registries;
use crate::trust::PullOptions;

/// The files a node's pulls obey. Share one per node (behind an `Arc`): it keeps the last
/// [`PullOptions`] read and the fingerprints of the files they were read from.
#[derive(Debug)]
pub struct NodeFiles {
    policy: Option<PathBuf>,
    default_policies: Vec<PathBuf>,
    registries: Option<PathBuf>,
    auth_file: Option<PathBuf>,
    loaded: Mutex<Option<(Vec<Option<Fingerprint>>, PullOptions)>>,
}

impl NodeFiles {
    /// The policy at `policy` (`None`: the first of `default_policies` that exists), the
    /// registries configuration at `registries` (`None`, or a file not there: none) and the
    /// credentials file `auth_file` (`None`, or a file not there yet: anonymous pulls).
    pub fn new(
        policy: Option<PathBuf>,
        default_policies: &[&str],
        registries: Option<PathBuf>,
        auth_file: Option<PathBuf>,
    ) -> NodeFiles {
        NodeFiles {
            policy,
            default_policies: default_policies.iter().map(PathBuf::from).collect(),
            registries,
            auth_file,
            loaded: Mutex::new(None),
        }
    }

    /// The policy file in force: the configured one, else the first default that exists.
    pub fn policy_path(&self) -> Option<PathBuf> {
        match &self.policy {
            Some(path) => Some(path.clone()),
            None => self.default_policies.iter().find(|p| p.exists()).cloned(),
        }
    }

    /// The policy file in force when it exists. No policy file refuses every pull, as
    /// containers/image refuses: accepting every image is the operator's choice, written down,
    /// not the absence of one.
    ///
    /// # Errors
    ///
    /// [`Error::NoPolicy`] naming the file to create: the configured one, else the first default.
    pub fn existing_policy(&self) -> Result<PathBuf> {
        self.existing(self.policy_path())
    }

    /// `policy` (the policy in force, looked up once) when it exists.
    fn existing(&self, policy: Option<PathBuf>) -> Result<PathBuf> {
        match policy {
            Some(path) if path.exists() => Ok(path),
            missing => Err(Error::NoPolicy {
                path: missing
                    .or_else(|| self.default_policies.first().cloned())
                    .unwrap_or_default(),
            }),
        }
    }

    /// The policy file in force, read and checked: what a configuration check warns of, and
    /// every pull is refused with, when there is none or it is not a policy.
    ///
    /// # Errors
    ///
    /// [`Error::NoPolicy`]; [`Error::InvalidPolicy`] naming the file and what is wrong.
    pub fn checked_policy(&self) -> Result<PathBuf> {
        let path = self.existing_policy()?;
        Policy::from_file(&path)?;
        Ok(path)
    }

    fn drop_in_dir(&self) -> Option<PathBuf> {
        self.registries.as_ref().map(|path| {
            let mut dir = path.clone().into_os_string();
            dir.push(".d");
            PathBuf::from(dir)
        })
    }

    /// Every file whose change means reading again, and which policy is in force.
    fn fingerprints(&self, policy: Option<&Path>) -> Vec<Option<Fingerprint>> {
        let mut paths: Vec<PathBuf> = policy.into_iter().map(Path::to_owned).collect();
        paths.extend(self.registries.clone());
        if let Some(dir) = self.drop_in_dir() {
            if let Ok(entries) = std::fs::read_dir(&dir) {
                let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
                files.sort();
                paths.extend(files);
            }
            paths.push(dir);
        }
        // A default policy that appeared where none was makes the list one longer.
        paths.iter().map(|p| Fingerprint::of(p)).collect()
    }

    /// The pull options for the files as they are now; read again only when one changed.
    ///
    /// # Errors
    ///
    /// [`Error::NoPolicy`], [`Error::InvalidPolicy`] or [`Error::InvalidRegistries`] naming the
    /// file.
    pub fn options(&self) -> Result<PullOptions> {
        let policy = self.policy_path();
        let prints = self.fingerprints(policy.as_deref());
        let mut loaded = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, options)) = loaded.as_ref()
            && *seen == prints
        {
            return Ok(options.clone());
        }
        // The file fingerprinted above, not a default that appeared since.
        let path = self.existing(policy)?;
        let mut options = PullOptions::new().with_policy(Policy::from_file(&path)?);
        tracing::info!(policy = %path.display(), "signature policy read");
        if let Some(path) = self.registries.as_ref().filter(|p| p.exists()) {
            options = options.with_registries(Registries::load(path, self.drop_in_dir())?);
            tracing::info!(registries = %path.display(), "registries configuration read");
        }
        *loaded = Some((prints, options.clone()));
        Ok(options)
    }

    /// The credentials the file has for `reference`, read at each call so edits apply at once;
    /// anonymous while the file is not there (yet), as CRI-O pulls.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidReference`] for a bad reference, [`Error::AuthFile`] for a
    /// file that cannot be read or parsed.
    pub fn credentials(&self, reference: &str) -> Result<Auth> {
        let Some(path) = &self.auth_file else {
            return Ok(Auth::Anonymous);
        };
        let parsed = Reference::parse(reference)?;
        if std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return Ok(Auth::Anonymous);
        }
        let file = AuthFile::from_file(path)?;
        Ok(file.lookup(&parsed).cloned().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"{"default":[{"type":"insecureAcceptAnything"}]}"#;

    #[test]
    fn the_first_existing_default_is_in_force_and_none_names_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("a.json");
        let second = dir.path().join("b.json");
        let (a, b) = (first.to_str().unwrap(), second.to_str().unwrap());
        let files = NodeFiles::new(None, &[a, b], None, None);
        match files.checked_policy() {
            Err(Error::NoPolicy { path }) => assert_eq!(path, first),
            other => panic!("{other:?}"),
        }
        std::fs::write(&second, POLICY).unwrap();
        assert_eq!(files.checked_policy().unwrap(), second);
        files.options().expect("the second default");
        std::fs::write(&first, "not json").unwrap();
        assert_eq!(files.policy_path(), Some(first.clone()));
        let err = files
            .options()
            .expect_err("a default that appeared is read");
        assert!(err.to_string().contains("a.json"), "{err}");
    }

    #[test]
    fn options_are_read_again_only_when_a_file_changed() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("policy.json");
        std::fs::write(&policy, POLICY).unwrap();
        let registries = dir.path().join("registries.conf");
        std::fs::write(&registries, "unqualified-search-registries = [\"a.io\"]\n").unwrap();
        let files = NodeFiles::new(Some(policy), &[], Some(registries.clone()), None);
        let first = files.options().unwrap();
        let again = files.options().unwrap();
        assert_eq!(first.generation(), again.generation(), "nothing changed");
        std::fs::create_dir(dir.path().join("registries.conf.d")).unwrap();
        std::fs::write(
            dir.path().join("registries.conf.d/b.conf"),
            "unqualified-search-registries = [\"b.io\"]\n",
        )
        .unwrap();
        let changed = files.options().unwrap();
        assert_ne!(first.generation(), changed.generation(), "a drop-in came");
    }

    #[test]
    fn credentials_are_anonymous_until_the_file_exists() {
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("auth.json");
        let files = NodeFiles::new(None, &[], None, Some(auth.clone()));
        assert!(matches!(
            files.credentials("example.com/a").unwrap(),
            Auth::Anonymous
        ));
        std::fs::write(&auth, "{").unwrap();
        let err = files.credentials("example.com/a").expect_err("broken file");
        assert!(err.to_string().contains("auth.json"), "{err}");
    }
}
