//! Resize messages as client-go writes them and kubelet's json.Decoder reads them.

use cri_streaming::resize::{ResizeDecoder, TerminalSize};

fn size(width: u16, height: u16) -> TerminalSize {
    TerminalSize { width, height }
}

#[test]
fn messages_split_and_joined_read_as_kubelet_reads_them() {
    let mut d = ResizeDecoder::default();
    assert_eq!(d.push(br#"{"Width":80,"#).unwrap(), vec![]);
    assert_eq!(
        d.push(b"\"Height\":24}\n{\"Width\":100,\"Height\":30}{\"wIdTh\":1")
            .unwrap(),
        vec![size(80, 24), size(100, 30)]
    );
    assert_eq!(d.push(b"}  ").unwrap(), vec![size(1, 0)]);
}

#[test]
fn go_decoding_rules() {
    let one = |msg: &str| ResizeDecoder::default().push(msg.as_bytes());
    // Unknown keys skipped, null leaves zero, the last duplicate wins in message order.
    assert_eq!(
        one(r#"{"Width":5,"x":[1,{"y":2}],"Height":null,"width":7}"#).unwrap(),
        vec![size(7, 0)]
    );
    assert_eq!(one(r#"{"width":7,"Width":5}"#).unwrap(), vec![size(5, 0)]);
    for bad in [
        r#"{"Width":-1}"#,
        r#"{"Width":65536}"#,
        r#"{"Width":80.0}"#,
        r#"{"Width":"80"}"#,
        "[80,24]",
        "80",
        "{]",
    ] {
        let err = one(bad).unwrap_err().to_string();
        assert!(err.starts_with("resize message: "), "{bad}: {err}");
    }
}

#[test]
fn an_unfinished_message_is_held_up_to_the_cap() {
    let mut d = ResizeDecoder::new(64);
    assert_eq!(d.push(br#"{"Width":1,"pad":""#).unwrap(), vec![]);
    let err = d.push(&[b'x'; 100]).unwrap_err().to_string();
    assert_eq!(err, "resize message: a message over 64 bytes");
    // Many whole messages in one push are fine, however long the push.
    let many = r#"{"Width":2,"Height":3}"#.repeat(1000);
    let sizes = ResizeDecoder::new(64).push(many.as_bytes()).unwrap();
    assert_eq!(sizes, vec![size(2, 3); 1000]);
}
