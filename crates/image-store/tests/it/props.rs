//! Property tests of the parsers: references (normalised forms parse back to themselves, valid
//! parts come back apart), policy.json and registries.conf (no input panics; what loads
//! resolves any reference without panicking).

use image_store::{Policy, Reference, Registries};
use proptest::prelude::*;

fn component() -> impl Strategy<Value = String> {
    "[a-z0-9]{1,6}((\\.|_|__|-{1,3})[a-z0-9]{1,6}){0,2}"
}

fn host() -> impl Strategy<Value = String> {
    (
        "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?",
        "[a-z]{2,6}",
        proptest::option::of(1u16..),
    )
        .prop_map(|(name, tld, port)| match port {
            Some(p) => format!("{name}.{tld}:{p}"),
            None => format!("{name}.{tld}"),
        })
}

fn tag() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"
}

fn digest() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}".prop_map(|h| format!("sha256:{h}"))
}

proptest! {
    #[test]
    fn qualified_references_keep_their_parts(
        host in host(),
        path in proptest::collection::vec(component(), 1..4),
        tag in proptest::option::of(tag()),
        digest in proptest::option::of(digest()),
    ) {
        let repository = path.join("/");
        let mut text = format!("{host}/{repository}");
        if let Some(t) = &tag { text = format!("{text}:{t}"); }
        if let Some(d) = &digest { text = format!("{text}@{d}"); }
        let r = Reference::parse(&text).unwrap();
        prop_assert_eq!(r.registry(), host.as_str());
        prop_assert_eq!(r.repository(), repository.as_str());
        let want_tag = match (&tag, &digest) {
            (None, None) => Some("latest"),
            (t, _) => t.as_deref(),
        };
        prop_assert_eq!(r.tag(), want_tag);
        prop_assert_eq!(r.digest().map(ToString::to_string), digest);
        prop_assert_eq!(Reference::parse(&r.to_string()).unwrap(), r);
    }

    #[test]
    fn short_names_go_to_docker_hub(
        path in proptest::collection::vec(component(), 1..3),
        tag in proptest::option::of(tag()),
    ) {
        // A first component with a dot would be a registry; keep this a short name.
        prop_assume!(path.len() == 1 || !path[0].contains('.'));
        let repository = path.join("/");
        let text = match &tag { Some(t) => format!("{repository}:{t}"), None => repository.clone() };
        let r = Reference::parse(&text).unwrap();
        prop_assert_eq!(r.registry(), "docker.io");
        let want = if path.len() == 1 { format!("library/{repository}") } else { repository };
        prop_assert_eq!(r.repository(), want.as_str());
        prop_assert_eq!(r.tag(), Some(tag.as_deref().unwrap_or("latest")));
    }

    #[test]
    fn any_input_parses_or_fails_and_what_parses_is_stable(text in "\\PC{0,80}") {
        if let Ok(r) = Reference::parse(&text) {
            let again = Reference::parse(&r.to_string()).unwrap();
            prop_assert_eq!(&again, &r);
            prop_assert_eq!(again.to_string(), r.to_string());
        }
    }

    #[test]
    fn reference_like_input_never_panics(text in "[a-zA-Z0-9._:/@-]{0,80}") {
        if let Ok(r) = Reference::parse(&text) {
            prop_assert_eq!(Reference::parse(&r.to_string()).unwrap(), r);
        }
    }

    #[test]
    fn any_policy_text_loads_or_fails_without_panicking(text in "\\PC{0,200}") {
        let _ = Policy::from_json(&text);
    }

    #[test]
    fn policy_like_json_loads_or_fails_and_resolves_any_reference(
        scopes in proptest::collection::vec(("[a-z0-9.*:/@-]{0,24}", policy_requirement()), 0..5),
        default in policy_requirement(),
        reference in "[a-z0-9._:/@-]{1,40}",
    ) {
        let docker: serde_json::Map<String, serde_json::Value> = scopes
            .into_iter()
            .map(|(scope, requirement)| (scope, serde_json::json!([requirement])))
            .collect();
        let text = serde_json::json!({"default": [default], "transports": {"docker": docker}}).to_string();
        if let (Ok(policy), Ok(reference)) = (Policy::from_json(&text), Reference::parse(&reference)) {
            let rule = policy.rule_for(&reference);
            prop_assert!(!rule.requirements.is_empty());
        }
    }

    #[test]
    fn any_registries_text_loads_or_fails_without_panicking(text in "\\PC{0,200}") {
        let _ = Registries::from_toml(&text, "/r.conf");
    }

    #[test]
    fn registries_like_toml_resolves_any_name_without_panicking(
        prefix in "[a-z0-9.*:/@-]{0,20}",
        location in "[a-z0-9.:/@-]{0,20}",
        mirror in "[a-z0-9.:/@-]{0,20}",
        search in proptest::collection::vec("[a-z0-9.:-]{0,12}", 0..3),
        mode in "(enforcing|permissive|disabled|)",
        alias in "[a-z0-9./:-]{0,16}",
        name in "[a-zA-Z0-9._:/@-]{1,40}",
    ) {
        let text = format!(
            "unqualified-search-registries = {search:?}\nshort-name-mode = {mode:?}\n\
             [aliases]\n\"app\" = {alias:?}\n\
             [[registry]]\nprefix = {prefix:?}\nlocation = {location:?}\n\
             [[registry.mirror]]\nlocation = {mirror:?}\n"
        );
        if let Ok(registries) = Registries::from_toml(&text, "/r.conf")
            && let Ok(candidates) = registries.candidates(&name)
        {
            for candidate in candidates {
                let _ = registries.sources(&candidate);
            }
        }
    }
}

fn policy_requirement() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::json!({"type": "reject"})),
        Just(serde_json::json!({"type": "insecureAcceptAnything"})),
        Just(serde_json::json!({"type": "sigstoreSigned", "keyData": "bm90IGEga2V5"})),
        Just(serde_json::json!({"type": "signedBy", "keyType": "GPGKeys", "keyData": "eA=="})),
        "[a-zA-Z]{0,12}".prop_map(|t| serde_json::json!({"type": t})),
    ]
}
