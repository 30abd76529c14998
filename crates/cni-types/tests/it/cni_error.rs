//! The CNI error object: parsing plugin output, writing it, codes.

use cni_types::cni_error::{CodeClass, describe};
use cni_types::{CniError, WellKnownCode};
use serde_json::json;

#[test]
fn reads_what_failing_plugins_print() {
    let cases: &[(&str, CniError)] = &[
        (
            r#"{"cniVersion": "1.0.0", "code": 7, "msg": "invalid network config", "details": "bridge: missing \"bridge\" name"}"#,
            CniError {
                cni_version: Some("1.0.0".into()),
                code: 7,
                msg: "invalid network config".into(),
                details: "bridge: missing \"bridge\" name".into(),
            },
        ),
        (
            r#"{"code": 100, "msg": "failed to allocate for range 0: no IP addresses available in range set: 10.88.0.1-10.88.255.254"}"#,
            CniError::new(
                100,
                "failed to allocate for range 0: no IP addresses available in range set: 10.88.0.1-10.88.255.254",
                "",
            ),
        ),
        (
            r#"{"code": 11, "msg": "busy", "extra": true}"#,
            CniError::new(11, "busy", ""),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            &CniError::from_slice(text.as_bytes()).unwrap(),
            want,
            "{text}"
        );
    }
}

#[test]
fn parse_errors_say_what_was_decoded() {
    let cases = [
        (
            r#"{"msg": "no code"}"#,
            "invalid CNI error object: missing field `code` at line 1 column 18",
        ),
        (
            r#"{"code": -1, "msg": "x"}"#,
            "invalid CNI error object: invalid value: integer `-1`, expected u32 at line 1 column 11",
        ),
        (
            "",
            "invalid CNI error object: EOF while parsing a value at line 1 column 0",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            CniError::from_slice(text.as_bytes())
                .unwrap_err()
                .to_string(),
            want
        );
    }
}

#[test]
fn details_are_left_out_when_empty() {
    let bare = CniError::new(3, "container unknown", "");
    assert_eq!(
        serde_json::to_value(&bare).unwrap(),
        json!({"code": 3, "msg": "container unknown"})
    );
    let full = CniError {
        cni_version: Some("1.1.0".into()),
        ..CniError::new(5, "read failed", "stdin closed")
    };
    assert_eq!(
        serde_json::to_value(&full).unwrap(),
        json!({"cniVersion": "1.1.0", "code": 5, "msg": "read failed", "details": "stdin closed"})
    );
}

#[test]
fn display_names_the_code_and_its_meaning() {
    let cases = [
        (
            CniError::new(1, "plugin speaks 0.4.0", ""),
            "code 1 (incompatible CNI version): plugin speaks 0.4.0",
        ),
        (
            CniError::new(7, "bad config", "ipam: subnet missing"),
            "code 7 (invalid network config): bad config; ipam: subnet missing",
        ),
        (CniError::new(42, "odd", ""), "code 42 (reserved code): odd"),
        (
            CniError::new(120, "vendor failure", ""),
            "code 120 (plugin-specific error): vendor failure",
        ),
    ];
    for (err, want) in cases {
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn well_known_codes_have_the_spec_meanings() {
    let cases = [
        (1, "incompatible CNI version"),
        (2, "unsupported field in network configuration"),
        (3, "container unknown or does not exist"),
        (4, "invalid necessary environment variables"),
        (5, "I/O failure"),
        (6, "failed to decode content"),
        (7, "invalid network config"),
        (11, "try again later"),
        (50, "the plugin is not available"),
        (51, "the plugin is not available due to limited resources"),
    ];
    for (code, want) in cases {
        assert_eq!(describe(code), want, "{code}");
        let known = WellKnownCode::from_code(code).unwrap();
        assert_eq!(known.code(), code);
        assert_eq!(CniError::new(code, "", "").well_known(), Some(known));
        assert_eq!(CodeClass::of(code), CodeClass::WellKnown(known));
    }
    for code in [0, 8, 9, 10, 12, 49, 52, 99] {
        assert_eq!(CodeClass::of(code), CodeClass::Reserved, "{code}");
        assert_eq!(CniError::new(code, "", "").well_known(), None);
    }
    for code in [100, 101, 999, u32::MAX] {
        assert_eq!(
            CniError::new(code, "", "").class(),
            CodeClass::PluginSpecific
        );
    }
}

proptest::proptest! {
    #[test]
    fn parser_takes_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128)) {
        let _ = CniError::from_slice(&bytes);
    }

    #[test]
    fn round_trips(code in 0u32.., msg in ".{0,20}", details in ".{0,20}", version in proptest::option::of("[0-9.]{1,6}")) {
        let err = CniError { cni_version: version, ..CniError::new(code, msg, details) };
        let bytes = serde_json::to_vec(&err).unwrap();
        proptest::prop_assert_eq!(CniError::from_slice(&bytes).unwrap(), err);
    }
}
