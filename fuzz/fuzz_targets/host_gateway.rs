//! Fuzzes the gateway's readers of client and server input (`host::gateway`): resource URIs
//! and templates ([`Resources::route`], the `mcpwire://` form), downstream `tools/call` names
//! and arguments ([`route_call`]) and answers to the approval form
//! ([`ConsentForm::read_answer`]).
//!
//! Input layout: the bytes as text (lossy), split at `\u{0}` into four parts, each a list of
//! lines: server `a`'s resource URIs and templates (a line starting with `T ` is a template),
//! server `b`'s the same, the URIs a client asks for, and JSON values (arguments and answers).
//!
//! Checked on every run:
//! - nothing panics;
//! - every listed resource's exposed URI routes back to its server and its own URI;
//! - a routed `mcpwire:` URI is exactly the gateway's form of what it routed to, and the
//!   gateway's form of any asked URI reads back;
//! - a direct call routes to the tool with exactly the arguments given, or to a protocol error
//!   when they are not an object;
//! - an answer is an accept only when its `action` is `"accept"`, and an accept with `always`
//!   only when the form offers it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::host::catalog::Catalog;
use mcpwire_core::host::consent::{ConsentPolicy, Rules};
use mcpwire_core::host::gateway::consent::decide;
use mcpwire_core::host::gateway::passthrough::{parse_prefixed, prefixed_uri};
use mcpwire_core::host::gateway::{
    route_call, Availability, ConsentAnswer, ConsentStep, Resources, RouteError, Routed, Upstreams,
};
use mcpwire_core::host::{ServerId, Trust};
use mcpwire_core::mcp::meta::ClientCapabilities;
use mcpwire_core::mcp::results::{Resource, ResourceTemplate, Tool};
use serde_json::{json, Value};

fn id(s: &str) -> ServerId {
    match ServerId::new(s) {
        Ok(id) => id,
        Err(e) => panic!("{e}"),
    }
}

fn listing(part: &str) -> (Vec<Resource>, Vec<ResourceTemplate>) {
    let mut resources = Vec::new();
    let mut templates = Vec::new();
    for line in part.lines().take(16) {
        match line.strip_prefix("T ") {
            Some(t) => templates.push(ResourceTemplate {
                uri_template: t.to_owned(),
                name: "t".into(),
                ..ResourceTemplate::default()
            }),
            None => resources.push(Resource {
                uri: line.to_owned(),
                name: "r".into(),
                ..Resource::default()
            }),
        }
    }
    (resources, templates)
}

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let mut parts = text.split('\u{0}');
    let (a, b) = (id("a"), id("b"));
    let mut r = Resources::new();
    let (ra, ta) = listing(parts.next().unwrap_or(""));
    let (rb, tb) = listing(parts.next().unwrap_or(""));
    r.set_server_resources(a.clone(), ra.clone(), ta);
    r.set_server_resources(b.clone(), rb.clone(), tb);
    for (server, list) in [(&a, &ra), (&b, &rb)] {
        for res in list {
            let exposed = r.exposed_uri(server, &res.uri);
            assert_eq!(
                r.route(&exposed).ok(),
                Some((server.clone(), res.uri.clone())),
                "{exposed}"
            );
        }
    }
    for uri in parts.next().unwrap_or("").lines().take(16) {
        if let Ok((server, inner)) = r.route(uri) {
            if parse_prefixed(uri).is_some() {
                assert_eq!(prefixed_uri(&server, &inner), uri);
            }
        }
        let p = prefixed_uri(&a, uri);
        assert_eq!(parse_prefixed(&p), Some(Ok((a.clone(), uri.to_owned()))));
    }

    let mut catalog = Catalog::new();
    catalog.set_server_tools(
        a.clone(),
        vec![Tool {
            name: "t".into(),
            ..Tool::default()
        }],
    );
    let mut up = Upstreams::new();
    up.insert(a.clone(), Trust::Untrusted, Availability::Ready);
    let policy = ConsentPolicy::new(Rules::default());
    let client = ClientCapabilities::none().with_elicitation_form();
    for line in parts.next().unwrap_or("").lines().take(8) {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match route_call(&catalog, &up, "a__t", Some(&value)) {
            Ok(Routed::Call(c)) => assert_eq!(c.arguments, value),
            Err(RouteError::InvalidArguments { .. }) => assert!(!value.is_object()),
            other => panic!("{other:?}"),
        }
        let _ = route_call(&catalog, &up, "call_tool", Some(&value));
        let _ = route_call(&catalog, &up, "search_tools", Some(&value));
        let call = match route_call(&catalog, &up, "a__t", Some(&json!({}))) {
            Ok(Routed::Call(c)) => c,
            other => panic!("{other:?}"),
        };
        let ConsentStep::Ask(form) = decide(&policy, &call, &client, "/c") else {
            panic!("an untrusted server's call did not ask");
        };
        if let Ok(answer) = form.read_answer(&value) {
            let action = value.get("action").and_then(Value::as_str);
            match answer {
                ConsentAnswer::Accept { always } => {
                    assert_eq!(action, Some("accept"));
                    assert!(!always || form.offers_always());
                }
                ConsentAnswer::Decline => assert_eq!(action, Some("decline")),
                ConsentAnswer::Cancel => assert_eq!(action, Some("cancel")),
            }
        }
    }
});
