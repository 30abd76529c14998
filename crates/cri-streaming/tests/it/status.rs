//! The error stream's end-of-command status, byte for byte as kubelet writes it.

use cri_streaming::status::{ExitStatus, go_json_string};

#[test]
fn success_is_kubelets_json_and_no_text() {
    assert_eq!(
        ExitStatus::Success.v4_json(),
        r#"{"metadata":{},"status":"Success"}"#
    );
    assert_eq!(ExitStatus::Success.v1_text(), None);
    assert_eq!(ExitStatus::exit_code(0), ExitStatus::Success);
}

#[test]
fn a_non_zero_exit_carries_its_code_as_the_exit_code_cause() {
    let status = ExitStatus::exit_code(3);
    assert_eq!(
        status.v4_json(),
        concat!(
            r#"{"metadata":{},"status":"Failure","#,
            r#""message":"command terminated with non-zero exit code: command terminated with exit code 3","#,
            r#""reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
        )
    );
    assert_eq!(
        status.v1_text().as_deref(),
        Some("command terminated with non-zero exit code: command terminated with exit code 3")
    );
    // What client-go's v4 error decoder reads back.
    let v: serde_json::Value = serde_json::from_str(&status.v4_json()).unwrap();
    assert_eq!(v["details"]["causes"][0]["message"], "3");
}

#[test]
fn an_internal_error_is_apierrors_new_internal_error() {
    let status = ExitStatus::Internal {
        error: "container \"c1\" is not running".into(),
    };
    assert_eq!(
        status.v4_json(),
        concat!(
            r#"{"metadata":{},"status":"Failure","#,
            r#""message":"Internal error occurred: error executing command in container: container \"c1\" is not running","#,
            r#""reason":"InternalError","details":{"causes":[{"message":"error executing command in container: container \"c1\" is not running"}]},"code":500}"#
        )
    );
}

#[test]
fn a_failed_attach_is_worded_as_kubelets_serve_attach_words_it() {
    let status = ExitStatus::AttachFailed {
        error: "gone".into(),
    };
    assert_eq!(
        status.v4_json(),
        concat!(
            r#"{"metadata":{},"status":"Failure","#,
            r#""message":"Internal error occurred: error attaching to container: gone","#,
            r#""reason":"InternalError","details":{"causes":[{"message":"error attaching to container: gone"}]},"code":500}"#
        )
    );
    assert_eq!(
        status.v1_text().as_deref(),
        Some("Internal error occurred: error attaching to container: gone")
    );
}

#[test]
fn strings_are_escaped_as_go_escapes_them() {
    assert_eq!(go_json_string("a<b>&c"), r#""a\u003cb\u003e\u0026c""#);
    assert_eq!(
        go_json_string("\n\r\t\u{8}\u{c}\u{1}"),
        r#""\n\r\t\b\f\u0001""#
    );
    assert_eq!(go_json_string("\u{2028}\u{2029}é"), "\"\\u2028\\u2029é\"");
    assert_eq!(go_json_string(r#"q"\"#), r#""q\"\\""#);
}
