//! The container id rule, once for every crate that names files, directories, cgroups or cache
//! entries after a container.
//!
//! libcni's `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$` (so never empty, `.`, `..`, a hidden name, an
//! option, or anything with a `/`), at most 128 bytes: an id goes into paths
//! (`<dir>/<id>/…`, a runtime's state directory, conmon's socket under a 108-byte `sun_path`)
//! and cache file names beside a network name and an interface. CRI-O's ids (64 hex digits)
//! pass.

use crate::error::{Error, IdProblem, Result};

/// The longest container id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// What is wrong with `id`, if anything (see the [module docs](self)).
pub fn check_container_id(id: &str) -> Option<IdProblem> {
    let mut bytes = id.bytes();
    match bytes.next() {
        None => Some(IdProblem::Empty),
        Some(_) if id.len() > MAX_ID_LEN => Some(IdProblem::TooLong),
        Some(first) if !first.is_ascii_alphanumeric() => Some(IdProblem::BadStart),
        Some(_) if !bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) => {
            Some(IdProblem::BadCharacter)
        }
        Some(_) => None,
    }
}

/// Checks `id` against the rule (see the [module docs](self)).
///
/// # Errors
///
/// [`Error::InvalidId`] saying what is wrong.
pub fn validate_container_id(id: &str) -> Result<()> {
    match check_container_id(id) {
        None => Ok(()),
        Some(problem) => Err(Error::InvalidId {
            id: id.to_owned(),
            problem,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libcnis_rule_with_a_length_cap() {
        let hex = "0123456789abcdef".repeat(4);
        let longest = "x".repeat(MAX_ID_LEN);
        for good in [
            "a",
            "7",
            "pod-1",
            "a_b.c-d",
            "A9",
            "x.",
            hex.as_str(),
            longest.as_str(),
        ] {
            assert_eq!(check_container_id(good), None, "{good}");
            assert!(validate_container_id(good).is_ok(), "{good}");
        }
        let too_long = "x".repeat(MAX_ID_LEN + 1);
        for (bad, problem) in [
            ("", IdProblem::Empty),
            (too_long.as_str(), IdProblem::TooLong),
            ("_x", IdProblem::BadStart),
            (".hidden", IdProblem::BadStart),
            ("..", IdProblem::BadStart),
            ("-flag", IdProblem::BadStart),
            ("/abs", IdProblem::BadStart),
            ("é", IdProblem::BadStart),
            ("a/b", IdProblem::BadCharacter),
            ("../x", IdProblem::BadStart),
            ("a b", IdProblem::BadCharacter),
            ("a\0b", IdProblem::BadCharacter),
            ("a\nb", IdProblem::BadCharacter),
            ("aé", IdProblem::BadCharacter),
        ] {
            assert_eq!(check_container_id(bad), Some(problem), "{bad:?}");
        }
        assert_eq!(
            validate_container_id("_x").unwrap_err().to_string(),
            "invalid container id \"_x\": must start with a letter or a digit"
        );
    }

    proptest::proptest! {
        #[test]
        fn the_rule_is_libcnis_regexp_and_the_cap(id in "[a-zA-Z0-9_.\\-/ é]{0,140}") {
            let regexp = id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
            proptest::prop_assert_eq!(
                check_container_id(&id).is_none(),
                regexp && id.len() <= MAX_ID_LEN
            );
        }
    }
}
