//! The gateway's rules (`mcpwire_core::host::gateway`), one test each: what is listed
//! downstream and when the list changed, where a call goes and the errors it can get, consent
//! as an elicitation form or a refusal with the rule to add, the answers, prompt and
//! resource pass-through, the sign-in elicitation and the `--print-config` snippets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use mcpwire_core::host::catalog::{Catalog, PresentationConfig, CALL_TOOL, SEARCH_TOOLS};
use mcpwire_core::host::config;
use mcpwire_core::host::consent::{ApprovalScope, ConsentPolicy, Rules};
use mcpwire_core::host::gateway::consent::{call_digest, decide};
use mcpwire_core::host::gateway::passthrough::{parse_prefixed, prefixed_uri};
use mcpwire_core::host::gateway::{
    list_changed, route_call, runs_gateway, search_result, Availability, ConsentAnswer,
    ConsentStep, ExposedTools, Fix, LoginAnswer, LoginElicitation, Prompts, ResourceRouteError,
    Resources, RouteError, Routed, ServeCommand, SnippetError, ToolRefusal, UpstreamCall,
    Upstreams, UriForm, WhenUnavailable, ALWAYS_FIELD,
};
use mcpwire_core::host::registry::{ConnectFailure, ConnectionState, FailureKind, Registry, Stage};
use mcpwire_core::host::{ServerId, ServerSpec, TransportSpec, Trust};
use mcpwire_core::mcp::elicitation::ElicitationRequest;
use mcpwire_core::mcp::meta::ClientCapabilities;
use mcpwire_core::mcp::results::{
    CallToolResult, Prompt, Resource, ResourceTemplate, Tool, ToolAnnotations,
};
use serde_json::{json, Value};

fn id(s: &str) -> ServerId {
    ServerId::new(s).unwrap()
}

fn tool(name: &str, description: &str) -> Tool {
    Tool {
        name: name.into(),
        description: Some(description.into()),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}})
            .as_object()
            .unwrap()
            .clone(),
        ..Tool::default()
    }
}

fn annotated(name: &str, read_only: bool, open_world: bool) -> Tool {
    Tool {
        annotations: Some(ToolAnnotations {
            title: Some(format!("The {name}")),
            read_only_hint: Some(read_only),
            destructive_hint: Some(!read_only),
            open_world_hint: Some(open_world),
            ..ToolAnnotations::default()
        }),
        ..tool(name, &format!("The {name} tool."))
    }
}

/// Two servers: `github` (untrusted) and `files` (trusted), both ready.
fn setup() -> (Catalog, Upstreams) {
    let mut catalog = Catalog::new();
    catalog.set_server_tools(
        id("github"),
        vec![
            tool("create_issue", "Create an issue in a repository."),
            tool("search", "Search issues."),
        ],
    );
    catalog.set_server_tools(
        id("files"),
        vec![
            annotated("read", true, false),
            tool("search", "Search files."),
        ],
    );
    let mut up = Upstreams::new();
    up.insert(id("github"), Trust::Untrusted, Availability::Ready);
    up.insert(id("files"), Trust::Trusted, Availability::Ready);
    (catalog, up)
}

fn big() -> PresentationConfig {
    PresentationConfig::new(10_000_000)
}

fn small() -> PresentationConfig {
    // 1% of 1,000 tokens: 10 tokens, less than any definition.
    PresentationConfig::new(1_000)
        .with_threshold(mcpwire_core::host::catalog::DiscoveryThreshold::from_percent(1.0).unwrap())
}

fn names(e: &ExposedTools) -> Vec<&str> {
    e.names().collect()
}

fn call(catalog: &Catalog, up: &Upstreams, name: &str, args: Value) -> UpstreamCall {
    match route_call(catalog, up, name, Some(&args)) {
        Ok(Routed::Call(c)) => *c,
        other => panic!("{name} did not route to a call: {other:?}"),
    }
}

fn elicit_client() -> ClientCapabilities {
    ClientCapabilities::none().with_elicitation_form()
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

// -------------------------------------------------------------------------------------------
// What is listed.

#[test]
fn below_the_threshold_every_tool_is_listed_under_its_exposed_name() {
    let (catalog, up) = setup();
    let exposed = ExposedTools::new(&catalog, &big(), &up);
    assert_eq!(
        names(&exposed),
        [
            "files__read",
            "files__search",
            "github__create_issue",
            "github__search"
        ]
    );
    let listed = exposed.to_value();
    assert_eq!(listed[2]["description"], "Create an issue in a repository.");
    assert_eq!(
        listed[2]["inputSchema"]["properties"]["q"]["type"],
        "string"
    );
}

#[test]
fn above_the_threshold_only_the_meta_tools_and_the_pins_are_listed() {
    let (mut catalog, up) = setup();
    let exposed = ExposedTools::new(&catalog, &small(), &up);
    assert_eq!(names(&exposed), [SEARCH_TOOLS, CALL_TOOL]);
    assert!(exposed.tools[0].input_schema["properties"]["query"].is_object());
    assert!(exposed.tools[1].input_schema["properties"]["name"].is_object());
    catalog.pin(&id("github"), "search");
    let pinned = ExposedTools::new(&catalog, &small(), &up);
    assert_eq!(names(&pinned), [SEARCH_TOOLS, CALL_TOOL, "github__search"]);
}

#[test]
fn annotations_go_downstream_only_for_a_trusted_server() {
    let mut catalog = Catalog::new();
    let mut t = annotated("read", true, false);
    t.icons = vec![];
    t.meta = Some(json!({"x": 1}).as_object().unwrap().clone());
    t.other
        .insert("execution".into(), json!({"taskSupport": "optional"}));
    catalog.set_server_tools(id("trusted"), vec![t.clone()]);
    catalog.set_server_tools(id("untrusted"), vec![t]);
    let mut up = Upstreams::new();
    up.insert(id("trusted"), Trust::Trusted, Availability::Ready);
    up.insert(id("untrusted"), Trust::Untrusted, Availability::Ready);
    let listed = ExposedTools::new(&catalog, &big(), &up).to_value();
    assert_eq!(listed[0]["name"], "trusted__read");
    assert_eq!(listed[0]["annotations"]["readOnlyHint"], true);
    assert_eq!(listed[1]["name"], "untrusted__read");
    // Only the title is left: a downstream host would believe readOnlyHint.
    assert_eq!(listed[1]["annotations"], json!({"title": "The read"}));
    for t in listed.as_array().unwrap() {
        assert!(
            t.get("_meta").is_none() && t.get("execution").is_none(),
            "{t}"
        );
    }
}

#[test]
fn list_changed_only_when_the_exposed_set_changes() {
    let (mut catalog, mut up) = setup();
    let before = ExposedTools::new(&catalog, &big(), &up);
    // A reconnect that lists the same tools (in another order).
    catalog.set_server_tools(
        id("github"),
        vec![
            tool("search", "Search issues."),
            tool("create_issue", "Create an issue in a repository."),
        ],
    );
    let same = ExposedTools::new(&catalog, &big(), &up);
    assert!(!list_changed(&before, &same));
    // The server went down: its tools stay listed (calls say it is unavailable).
    up.insert(
        id("github"),
        Trust::Untrusted,
        Availability::Unavailable {
            reason: "exited".into(),
        },
    );
    assert!(!list_changed(
        &before,
        &ExposedTools::new(&catalog, &big(), &up)
    ));
    // A description changed.
    catalog.set_server_tools(
        id("github"),
        vec![
            tool("search", "Search issues and pull requests."),
            tool("create_issue", "Create an issue in a repository."),
        ],
    );
    let changed = ExposedTools::new(&catalog, &big(), &up);
    assert!(list_changed(&before, &changed));
    // A tool went.
    catalog.set_server_tools(
        id("github"),
        vec![tool("search", "Search issues and pull requests.")],
    );
    assert!(list_changed(
        &changed,
        &ExposedTools::new(&catalog, &big(), &up)
    ));
}

#[test]
fn a_collision_that_renames_another_servers_tool_is_a_change() {
    let mut catalog = Catalog::new();
    catalog.set_server_tools(id("a"), vec![tool("b__c", "one")]);
    let up = Upstreams::new();
    let before = ExposedTools::new(&catalog, &big(), &up);
    assert_eq!(names(&before), ["a__b__c"]);
    // Server `a__b`'s tool `c` has the same candidate: both get suffixes.
    catalog.set_server_tools(id("a__b"), vec![tool("c", "two")]);
    let after = ExposedTools::new(&catalog, &big(), &up);
    assert!(list_changed(&before, &after));
    assert!(!names(&after).contains(&"a__b__c"), "{:?}", names(&after));
}

#[test]
fn under_progressive_discovery_upstream_changes_are_no_list_change() {
    let (mut catalog, up) = setup();
    let before = ExposedTools::new(&catalog, &small(), &up);
    catalog.set_server_tools(id("github"), vec![tool("new_tool", "Something new.")]);
    assert!(!list_changed(
        &before,
        &ExposedTools::new(&catalog, &small(), &up)
    ));
    // A pin is listed, so pinning is a change.
    catalog.pin(&id("github"), "new_tool");
    assert!(list_changed(
        &before,
        &ExposedTools::new(&catalog, &small(), &up)
    ));
}

#[test]
fn search_results_are_tool_definitions() {
    let (catalog, up) = setup();
    let results = catalog
        .search("select:github__create_issue,nope__x", 5)
        .unwrap();
    let result = search_result(&results, &up);
    insta::assert_json_snapshot!("search_result", result);
    let tools = &result["structuredContent"]["tools"];
    assert_eq!(tools[0]["name"], "github__create_issue");
    assert_eq!(tools[0]["server"], "github");
    assert_eq!(tools[0]["inputSchema"]["type"], "object");
    assert_eq!(result["structuredContent"]["unknown"], json!(["nope__x"]));
    // The same JSON leads the text, for clients that give the model only text.
    let first_line = text_of(&result).lines().next().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(first_line).unwrap(),
        result["structuredContent"]
    );
}

// -------------------------------------------------------------------------------------------
// Routing.

#[test]
fn a_direct_call_routes_to_its_server_and_upstream_name() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({"title": "x"}));
    assert_eq!(
        (
            c.server.as_str(),
            c.tool.name.as_str(),
            &c.arguments,
            c.via_call_tool
        ),
        ("github", "create_issue", &json!({"title": "x"}), false)
    );
    assert_eq!(c.trust, Trust::Untrusted);
    // Absent arguments are `{}`.
    match route_call(&catalog, &up, "files__read", None).unwrap() {
        Routed::Call(c) => assert_eq!(c.arguments, json!({})),
        other => panic!("{other:?}"),
    }
}

#[test]
fn call_tool_routes_its_name_and_arguments() {
    let (catalog, up) = setup();
    let c = call(
        &catalog,
        &up,
        CALL_TOOL,
        json!({"name": "files__search", "arguments": {"q": "readme"}}),
    );
    assert_eq!(
        (
            c.server.as_str(),
            c.tool.name.as_str(),
            &c.arguments,
            c.via_call_tool
        ),
        ("files", "search", &json!({"q": "readme"}), true)
    );
    assert_eq!(c.exposed, "files__search");
}

#[test]
fn search_tools_is_answered_by_the_gateway() {
    let (catalog, up) = setup();
    assert_eq!(
        route_call(
            &catalog,
            &up,
            SEARCH_TOOLS,
            Some(&json!({"query": "issue", "limit": 3}))
        ),
        Ok(Routed::Search {
            query: "issue".into(),
            limit: 3
        })
    );
}

#[test]
fn an_unknown_direct_name_is_a_protocol_error() {
    let (catalog, up) = setup();
    let err = route_call(&catalog, &up, "github__nope", None).unwrap_err();
    let obj = err.to_error_object().unwrap();
    assert_eq!(obj.code, -32602);
    assert!(
        obj.message.starts_with("Unknown tool: github__nope"),
        "{}",
        obj.message
    );
}

#[test]
fn arguments_that_are_not_an_object_are_a_protocol_error() {
    let (catalog, up) = setup();
    let err = route_call(&catalog, &up, "github__search", Some(&json!([1]))).unwrap_err();
    assert!(matches!(
        err,
        RouteError::InvalidArguments {
            got: "an array",
            ..
        }
    ));
    assert_eq!(err.to_error_object().unwrap().code, -32602);
}

#[test]
fn call_tool_with_an_unknown_name_is_a_tool_error() {
    let (catalog, up) = setup();
    let err = route_call(&catalog, &up, CALL_TOOL, Some(&json!({"name": "nope"}))).unwrap_err();
    let RouteError::Refused(r) = &err else {
        panic!("{err:?}")
    };
    assert!(err.to_error_object().is_none());
    assert_eq!(
        r.to_string(),
        "no tool is called \"nope\"; search_tools finds tools and gives their exact names"
    );
    assert_eq!(r.to_call_result()["isError"], true);
}

#[test]
fn bad_meta_tool_arguments_and_meta_tools_through_call_tool_are_tool_errors() {
    let (catalog, up) = setup();
    let bad = route_call(&catalog, &up, CALL_TOOL, Some(&json!({"nam": "x"}))).unwrap_err();
    assert!(
        matches!(bad, RouteError::Refused(ToolRefusal::BadMetaCall { .. })),
        "{bad:?}"
    );
    let meta = route_call(
        &catalog,
        &up,
        CALL_TOOL,
        Some(&json!({"name": SEARCH_TOOLS})),
    )
    .unwrap_err();
    assert_eq!(
        meta,
        RouteError::Refused(ToolRefusal::MetaToolThroughCallTool {
            name: SEARCH_TOOLS.into()
        })
    );
}

#[test]
fn a_tool_of_an_unavailable_server_says_so_and_when_it_comes_back() {
    let (catalog, mut up) = setup();
    let failure = ConnectFailure::new(
        Stage::Running,
        FailureKind::Exited,
        "the process ended with status 1",
    );
    up.insert(
        id("github"),
        Trust::Untrusted,
        Availability::of(&ConnectionState::Failed(failure)),
    );
    for (name, args) in [
        ("github__search", json!({})),
        (CALL_TOOL, json!({"name": "github__search"})),
    ] {
        let err = route_call(&catalog, &up, name, Some(&args)).unwrap_err();
        let RouteError::Refused(r) = err else {
            panic!("{err:?}")
        };
        assert_eq!(
            r.to_string(),
            "server github is unavailable: exited (while connected): the process ended with \
             status 1; its tools come back when it reconnects"
        );
    }
    // The other server is not affected.
    call(&catalog, &up, "files__search", json!({}));
}

#[test]
fn a_name_of_an_unavailable_server_that_never_listed_tools_says_it_is_unavailable() {
    let (catalog, mut up) = setup();
    up.insert(
        id("slack"),
        Trust::Untrusted,
        Availability::Unavailable {
            reason: "timed out (starting it): not ready".into(),
        },
    );
    let err = route_call(&catalog, &up, "slack__post", None).unwrap_err();
    assert!(
        matches!(&err, RouteError::Refused(ToolRefusal::Unavailable { server, .. }) if server.as_str() == "slack"),
        "{err:?}"
    );
    // A ready server's unknown tool is still unknown.
    assert!(matches!(
        route_call(&catalog, &up, "files__nope", None),
        Err(RouteError::UnknownTool { .. })
    ));
}

/// A trusted HTTP server's spec (the URL is never dialled here).
fn spec(name: &str, disabled: bool) -> ServerSpec {
    ServerSpec {
        id: id(name),
        transport: TransportSpec::Http {
            url: "http://127.0.0.1:1/mcp".into(),
            headers: Default::default(),
        },
        oauth: None,
        trust: Trust::Trusted,
        disabled,
    }
}

#[test]
fn availability_follows_the_registry() {
    let mut registry = Registry::new();
    registry.add(spec("a", false)).unwrap();
    registry.add(spec("b", true)).unwrap();
    registry.add(spec("c", false)).unwrap();
    let attempt = registry
        .connect(&id("c"), Instant::now(), Duration::from_secs(5))
        .unwrap();
    registry
        .handle_failed(
            Instant::now(),
            attempt,
            ConnectFailure::new(
                Stage::Discover,
                FailureKind::Unreachable,
                "connection refused",
            ),
        )
        .unwrap();
    let up = Upstreams::from_servers(registry.iter());
    let reason = |s: &str| match &up.get(&id(s)).unwrap().availability {
        Availability::Unavailable { reason } => reason.clone(),
        Availability::Ready => "ready".into(),
    };
    assert_eq!(reason("a"), "it is disconnected");
    assert_eq!(
        reason("b"),
        "it is disabled in the config (`disabled: true`)"
    );
    assert_eq!(
        reason("c"),
        "unreachable (server/discover): connection refused"
    );
    assert_eq!(up.trust(&id("a")), Trust::Trusted);
    assert_eq!(up.trust(&id("zzz")), Trust::Untrusted);
}

#[test]
fn a_call_for_an_unavailable_server_waits_only_while_it_connects_or_is_back() {
    let mut registry = Registry::new();
    for (name, disabled) in [("connecting", false), ("back", false), ("failed", false)] {
        registry.add(spec(name, disabled)).unwrap();
    }
    registry.add(spec("off", true)).unwrap();
    registry.add(spec("idle", false)).unwrap();
    let now = Instant::now();
    let t = Duration::from_secs(5);
    registry.connect(&id("connecting"), now, t).unwrap();
    let back = registry.connect(&id("back"), now, t).unwrap();
    registry.handle_ready(back, Default::default()).unwrap();
    let failed = registry.connect(&id("failed"), now, t).unwrap();
    registry
        .handle_failed(
            now,
            failed,
            ConnectFailure::new(Stage::Discover, FailureKind::Unreachable, "refused"),
        )
        .unwrap();
    let step = |name: &str| WhenUnavailable::of(registry.get(&id(name)).map(|s| s.state()));
    assert_eq!(step("connecting"), WhenUnavailable::Wait);
    assert_eq!(step("back"), WhenUnavailable::Wait);
    assert_eq!(step("failed"), WhenUnavailable::Refuse);
    assert_eq!(step("off"), WhenUnavailable::Refuse);
    assert_eq!(step("idle"), WhenUnavailable::Refuse);
    assert_eq!(step("unknown"), WhenUnavailable::Refuse);
}

// -------------------------------------------------------------------------------------------
// Consent.

fn policy(allow: &[&str], ask: &[&str], deny: &[&str]) -> ConsentPolicy {
    ConsentPolicy::new(Rules::from_lists(allow, ask, deny).unwrap())
}

#[test]
fn an_allowed_call_goes_out() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({}));
    let p = policy(&["mcp__github__create_issue"], &[], &[]);
    assert_eq!(
        decide(&p, &c, &ClientCapabilities::none(), "/cfg.json"),
        ConsentStep::Call
    );
}

#[test]
fn a_denied_call_is_a_tool_error_naming_the_rule() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({}));
    let p = policy(&["mcp__github"], &[], &["mcp__github__create_issue"]);
    let ConsentStep::Refuse(r) = decide(&p, &c, &elicit_client(), "/cfg.json") else {
        panic!()
    };
    insta::assert_snapshot!("refusal_denied", r.to_string());
    assert!(r.to_string().contains("mcp__github__create_issue"));
}

#[test]
fn an_ask_becomes_a_form_showing_server_tool_description_and_full_arguments() {
    let (catalog, up) = setup();
    let args = json!({"repo": "acme/app", "title": "Crash on start", "body": "line 1\nline 2", "labels": ["bug"]});
    let c = call(&catalog, &up, "github__create_issue", args.clone());
    let p = policy(&[], &[], &[]);
    let ConsentStep::Ask(form) = decide(&p, &c, &elicit_client(), "/cfg.json") else {
        panic!()
    };
    insta::assert_snapshot!("consent_form_untrusted", form.message());
    let m = form.message();
    assert!(m.contains("Server: github (not trusted)"), "{m}");
    assert!(
        m.contains("Tool: create_issue (called as github__create_issue)"),
        "{m}"
    );
    assert!(m.contains("Create an issue in a repository."), "{m}");
    // The arguments in full, as JSON that reads back as what will be sent.
    let start = m.find("JSON):\n").unwrap() + "JSON):\n".len();
    let end = m[start..].find("\n\n").unwrap() + start;
    assert_eq!(serde_json::from_str::<Value>(&m[start..end]).unwrap(), args);
    // Untrusted: "always" is not offered; the form has no field.
    assert!(!form.offers_always());
    assert_eq!(
        form.params()["requestedSchema"],
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(form.params()["mode"], "form");
    // What the client side reads is what the gateway meant.
    let parsed = ElicitationRequest::parse(&form.params().to_string()).unwrap();
    assert_eq!(parsed, form.request());
    assert_eq!(form.digest(), call_digest(&c));
}

#[test]
fn a_trusted_read_only_tool_offers_always() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "files__read", json!({"path": "/etc/hosts"}));
    let p = policy(&[], &[], &[]);
    let ConsentStep::Ask(form) = decide(&p, &c, &elicit_client(), "/cfg.json") else {
        panic!()
    };
    assert!(form.offers_always());
    insta::assert_json_snapshot!("consent_form_always_params", form.params());
    let parsed = ElicitationRequest::parse(&form.params().to_string()).unwrap();
    assert_eq!(parsed, form.request());
}

#[test]
fn the_form_warns_when_another_servers_results_flow_into_the_call() {
    let (catalog, up) = setup();
    let mut p = policy(&[], &[], &[]);
    let secret = "customer list: alice@example.com, bob@example.org";
    let result =
        CallToolResult::from_value(json!({"content": [{"type": "text", "text": secret}]})).unwrap();
    p.record_result(&id("files"), &result);
    let c = call(
        &catalog,
        &up,
        "github__create_issue",
        json!({"body": secret}),
    );
    let ConsentStep::Ask(form) = decide(&p, &c, &elicit_client(), "/cfg.json") else {
        panic!()
    };
    assert_eq!(form.data_flows().len(), 1);
    assert_eq!(form.data_flows()[0].source.as_str(), "files");
    let m = form.message();
    assert!(
        m.contains(
            "WARNING: the arguments carry text from files's results into this call to github"
        ),
        "{m}"
    );
    insta::assert_snapshot!("consent_form_data_flow", m);
    // Without a flow there is no warning.
    let plain = call(
        &catalog,
        &up,
        "github__create_issue",
        json!({"body": "hello"}),
    );
    let ConsentStep::Ask(f) = decide(&p, &plain, &elicit_client(), "/cfg.json") else {
        panic!()
    };
    assert!(f.data_flows().is_empty() && !f.message().contains("WARNING"));
}

#[test]
fn a_client_that_cannot_elicit_gets_the_rule_to_add_and_the_rule_works() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({"title": "x"}));
    let p = policy(&[], &[], &[]);
    // A client with only URL-mode elicitation cannot show a form either.
    for client in [
        ClientCapabilities::none(),
        ClientCapabilities::none().with_elicitation_url(),
    ] {
        let ConsentStep::Refuse(r) = decide(&p, &c, &client, "/home/me/mcpwire.json") else {
            panic!("a client without form elicitation was asked")
        };
        let ToolRefusal::CannotAsk { fix, .. } = &r else {
            panic!("{r:?}")
        };
        let Fix::AddAllow { rule, file } = fix.as_ref() else {
            panic!("{fix:?}")
        };
        assert_eq!(rule.to_string(), "mcp__github__create_issue");
        assert_eq!(file, "/home/me/mcpwire.json");
        insta::assert_snapshot!("refusal_cannot_ask", r.to_string());
        // The rule it names lets the call through.
        let fixed = policy(&[&rule.to_string()], &[], &[]);
        assert_eq!(
            decide(&fixed, &c, &client, "/home/me/mcpwire.json"),
            ConsentStep::Call
        );
    }
}

#[test]
fn an_ask_rule_must_be_removed_and_the_fix_says_which() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({}));
    let p = policy(&["mcp__github__create_issue"], &["mcp__github"], &[]);
    let ConsentStep::Refuse(ToolRefusal::CannotAsk { fix, .. }) =
        decide(&p, &c, &ClientCapabilities::none(), "/cfg.json")
    else {
        panic!()
    };
    let Fix::RemoveAsk {
        rule, then_allow, ..
    } = fix.as_ref()
    else {
        panic!("{fix:?}")
    };
    assert_eq!(rule.to_string(), "mcp__github");
    // The allow rule is already there, so the ask rule is the only reason left.
    assert_eq!(then_allow, &None);
    insta::assert_snapshot!("refusal_remove_ask", fix.to_string());
    // Without the allow rule, the fix names both.
    let p = policy(&[], &["mcp__github"], &[]);
    let ConsentStep::Refuse(ToolRefusal::CannotAsk { fix, .. }) =
        decide(&p, &c, &ClientCapabilities::none(), "/cfg.json")
    else {
        panic!()
    };
    let Fix::RemoveAsk { then_allow, .. } = fix.as_ref() else {
        panic!()
    };
    let allow = then_allow.clone().unwrap().to_string();
    assert_eq!(allow, "mcp__github__create_issue");
    assert_eq!(
        decide(
            &policy(&[&allow], &[], &[]),
            &c,
            &ClientCapabilities::none(),
            "/c"
        ),
        ConsentStep::Call
    );
}

#[test]
fn a_data_flow_to_a_client_that_cannot_elicit_has_no_rule() {
    let (catalog, up) = setup();
    let mut p = policy(&["mcp__github__create_issue"], &[], &[]);
    let text = "internal roadmap: ship the gateway in december";
    p.record_text(&id("files"), text);
    let c = call(&catalog, &up, "github__create_issue", json!({"body": text}));
    let ConsentStep::Refuse(ToolRefusal::CannotAsk { fix, .. }) =
        decide(&p, &c, &ClientCapabilities::none(), "/cfg.json")
    else {
        panic!()
    };
    assert_eq!(
        *fix,
        Fix::DataFlow {
            sources: vec![id("files")]
        }
    );
    assert!(fix.to_string().contains("no rule lets it through"), "{fix}");
}

#[test]
fn a_tool_no_rule_can_name_says_so() {
    let mut catalog = Catalog::new();
    catalog.set_server_tools(id("s"), vec![tool("run (fast)", "Runs.")]);
    let mut up = Upstreams::new();
    up.insert(id("s"), Trust::Untrusted, Availability::Ready);
    let exposed = catalog
        .exposed_name(&id("s"), "run (fast)")
        .unwrap()
        .to_owned();
    let c = call(&catalog, &up, &exposed, json!({}));
    let ConsentStep::Refuse(ToolRefusal::CannotAsk { fix, .. }) = decide(
        &policy(&[], &[], &[]),
        &c,
        &ClientCapabilities::none(),
        "/cfg.json",
    ) else {
        panic!()
    };
    assert!(matches!(fix.as_ref(), Fix::NoRule { .. }), "{fix:?}");
}

fn ask_form(p: &ConsentPolicy, c: &UpstreamCall) -> mcpwire_core::host::gateway::ConsentForm {
    match decide(p, c, &elicit_client(), "/cfg.json") {
        ConsentStep::Ask(f) => f,
        other => panic!("{other:?}"),
    }
}

#[test]
fn accept_approves_once_and_the_next_call_asks_again() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({"t": 1}));
    let mut p = policy(&[], &[], &[]);
    let form = ask_form(&p, &c);
    let answer = form
        .read_answer(&json!({"action": "accept", "content": {}}))
        .unwrap();
    assert_eq!(answer, ConsentAnswer::Accept { always: false });
    assert_eq!(form.apply(&mut p, &c, answer), Ok(ApprovalScope::Once));
    assert!(matches!(
        decide(&p, &c, &elicit_client(), "/c"),
        ConsentStep::Ask(_)
    ));
}

#[test]
fn accept_with_always_remembers_the_tool() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "files__read", json!({"path": "a"}));
    let mut p = policy(&[], &[], &[]);
    let form = ask_form(&p, &c);
    let answer = form
        .read_answer(&json!({"action": "accept", "content": {ALWAYS_FIELD: true}}))
        .unwrap();
    assert_eq!(form.apply(&mut p, &c, answer), Ok(ApprovalScope::Always));
    let other_args = call(&catalog, &up, "files__read", json!({"path": "b"}));
    assert_eq!(
        decide(&p, &other_args, &elicit_client(), "/c"),
        ConsentStep::Call
    );
}

#[test]
fn always_no_longer_offered_when_answered_approves_this_call_only() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "files__read", json!({"path": "a"}));
    let mut p = policy(&[], &[], &[]);
    let form = ask_form(&p, &c);
    assert!(form.offers_always());
    // Meanwhile the tool is tagged as billing: "always" is no longer offered.
    p.set_rules(
        Rules::from_lists(&[] as &[&str], &[] as &[&str], &[] as &[&str])
            .unwrap()
            .with_billing(["mcp__files__read"])
            .unwrap(),
    );
    let answer = ConsentAnswer::Accept { always: true };
    assert_eq!(form.apply(&mut p, &c, answer), Ok(ApprovalScope::Once));
    assert!(matches!(
        decide(&p, &c, &elicit_client(), "/c"),
        ConsentStep::Ask(_)
    ));
}

#[test]
fn decline_and_cancel_send_nothing_and_say_so() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({}));
    let mut p = policy(&[], &[], &[]);
    let form = ask_form(&p, &c);
    for (action, expected) in [
        ("decline", "you declined the call of github's tool \"create_issue\"; it was not sent"),
        (
            "cancel",
            "the approval of github's tool \"create_issue\" was cancelled without an answer; the call was not sent",
        ),
    ] {
        let answer = form.read_answer(&json!({"action": action})).unwrap();
        let refusal = form.apply(&mut p, &c, answer).unwrap_err();
        assert_eq!(refusal.to_string(), expected);
        assert_eq!(refusal.to_call_result()["isError"], true);
    }
}

#[test]
fn answers_that_do_not_fit_the_form_send_nothing() {
    let (catalog, up) = setup();
    let untrusted = call(&catalog, &up, "github__create_issue", json!({}));
    let trusted = call(&catalog, &up, "files__read", json!({}));
    let p = policy(&[], &[], &[]);
    let no_always = ask_form(&p, &untrusted);
    let with_always = ask_form(&p, &trusted);
    for (form, bad) in [
        (&no_always, json!("accept")),
        (&no_always, json!({})),
        (&no_always, json!({"action": "approve"})),
        (&no_always, json!({"action": "accept", "content": [1]})),
        (
            &no_always,
            json!({"action": "accept", "content": {ALWAYS_FIELD: true}}),
        ),
        (
            &with_always,
            json!({"action": "accept", "content": {ALWAYS_FIELD: "yes"}}),
        ),
        (
            &with_always,
            json!({"action": "accept", "content": {"other": 1}}),
        ),
    ] {
        let r = form.read_answer(&bad).unwrap_err();
        assert!(matches!(r, ToolRefusal::BadAnswer { .. }), "{bad}: {r:?}");
        assert!(r.to_string().ends_with("the call was not sent"), "{r}");
    }
    assert_eq!(
        with_always.read_answer(&json!({"action": "accept", "content": null})),
        Ok(ConsentAnswer::Accept { always: false })
    );
}

#[test]
fn an_answer_approves_only_the_call_shown() {
    let (catalog, up) = setup();
    let shown = call(
        &catalog,
        &up,
        "github__create_issue",
        json!({"title": "harmless"}),
    );
    let mut p = policy(&[], &[], &[]);
    let form = ask_form(&p, &shown);
    let edited = call(
        &catalog,
        &up,
        "github__create_issue",
        json!({"title": "harmful"}),
    );
    let accept = ConsentAnswer::Accept { always: false };
    assert!(matches!(
        form.apply(&mut p, &edited, accept),
        Err(ToolRefusal::AnswerForAnotherCall { .. })
    ));
    // The tool redefined meanwhile.
    let mut redefined = shown.clone();
    redefined.tool.description = Some("Now deletes the repository.".into());
    assert!(matches!(
        form.apply(&mut p, &redefined, accept),
        Err(ToolRefusal::AnswerForAnotherCall { .. })
    ));
    assert_eq!(form.apply(&mut p, &shown, accept), Ok(ApprovalScope::Once));
}

#[test]
fn a_deny_rule_added_while_asking_still_wins() {
    let (catalog, up) = setup();
    let c = call(&catalog, &up, "github__create_issue", json!({}));
    let mut p = policy(&[], &[], &[]);
    let form = ask_form(&p, &c);
    p.set_rules(Rules::from_lists(&[] as &[&str], &[] as &[&str], &["mcp__github"]).unwrap());
    let r = form
        .apply(&mut p, &c, ConsentAnswer::Accept { always: false })
        .unwrap_err();
    assert!(matches!(r, ToolRefusal::Denied { .. }), "{r:?}");
}

#[test]
fn the_digest_does_not_depend_on_member_order_but_on_every_value() {
    let (catalog, up) = setup();
    let a = call(
        &catalog,
        &up,
        "github__search",
        serde_json::from_str(r#"{"a":1,"b":[1,2]}"#).unwrap(),
    );
    let b = call(
        &catalog,
        &up,
        "github__search",
        serde_json::from_str(r#"{"b":[1,2],"a":1}"#).unwrap(),
    );
    let c = call(
        &catalog,
        &up,
        "github__search",
        json!({"a": 1, "b": [2, 1]}),
    );
    assert_eq!(call_digest(&a), call_digest(&b));
    assert_ne!(call_digest(&a), call_digest(&c));
    assert!(call_digest(&a).starts_with("sha256:") && call_digest(&a).len() == 71);
}

// -------------------------------------------------------------------------------------------
// Prompts and resources.

fn prompt(name: &str) -> Prompt {
    Prompt {
        name: name.into(),
        description: Some(format!("The {name} prompt.")),
        ..Prompt::default()
    }
}

fn resource(uri: &str, name: &str) -> Resource {
    Resource {
        uri: uri.into(),
        name: name.into(),
        ..Resource::default()
    }
}

fn template(t: &str) -> ResourceTemplate {
    ResourceTemplate {
        uri_template: t.into(),
        name: t.into(),
        ..ResourceTemplate::default()
    }
}

#[test]
fn prompts_are_prefixed_like_tools_and_route_back() {
    let mut prompts = Prompts::new();
    assert!(prompts.set_server_prompts(id("github"), vec![prompt("review"), prompt("triage.v2")]));
    assert!(prompts.set_server_prompts(id("files"), vec![prompt("review")]));
    let listed: Vec<String> = prompts.list().into_iter().map(|p| p.name).collect();
    assert_eq!(
        listed,
        ["files__review", "github__review", "github__triage_v2"]
    );
    let (server, p) = prompts.route("github__triage_v2").unwrap();
    assert_eq!((server.as_str(), p.name.as_str()), ("github", "triage.v2"));
    assert!(prompts.route("review").is_none());
    // The same list again changes nothing; a removal does.
    assert!(!prompts.set_server_prompts(id("files"), vec![prompt("review")]));
    assert!(prompts.remove_server(&id("files")));
    assert!(prompts.route("files__review").is_none());
}

#[test]
fn resource_uris_are_kept_and_routed_to_the_server_that_lists_them() {
    let mut r = Resources::new();
    r.set_server_resources(
        id("files"),
        vec![resource("file:///project/README.md", "readme")],
        vec![],
    );
    r.set_server_resources(
        id("web"),
        vec![resource("https://example.com/doc", "doc")],
        vec![],
    );
    let listed: Vec<String> = r.list_resources().into_iter().map(|x| x.uri).collect();
    assert_eq!(
        listed,
        ["file:///project/README.md", "https://example.com/doc"]
    );
    assert_eq!(
        r.route("https://example.com/doc").unwrap(),
        (id("web"), "https://example.com/doc".to_owned())
    );
    let err = r.route("file:///other").unwrap_err();
    assert_eq!(
        err,
        ResourceRouteError::NotFound {
            uri: "file:///other".into()
        }
    );
    let obj = err.to_error_object();
    assert_eq!(
        (obj.code, &obj.data),
        (-32602, &Some(json!({"uri": "file:///other"})))
    );
}

#[test]
fn a_uri_two_servers_list_is_prefixed_for_both() {
    let mut r = Resources::new();
    r.set_server_resources(id("a"), vec![resource("file:///README.md", "a")], vec![]);
    assert_eq!(r.uri_form(&id("a"), "file:///README.md"), UriForm::Verbatim);
    assert!(r.set_server_resources(id("b"), vec![resource("file:///README.md", "b")], vec![]));
    let listed: Vec<String> = r.list_resources().into_iter().map(|x| x.uri).collect();
    assert_eq!(
        listed,
        [
            "mcpwire://a/file%3A%2F%2F%2FREADME.md",
            "mcpwire://b/file%3A%2F%2F%2FREADME.md"
        ]
    );
    assert_eq!(
        r.route(&listed[1]).unwrap(),
        (id("b"), "file:///README.md".to_owned())
    );
    let err = r.route("file:///README.md").unwrap_err();
    insta::assert_snapshot!("resource_ambiguous", err.to_string());
    // One of them goes: the other's URI is verbatim again, and that is a change.
    assert!(r.remove_server(&id("a")));
    assert_eq!(r.route("file:///README.md").unwrap().0, id("b"));
    assert_eq!(r.list_resources()[0].uri, "file:///README.md");
}

#[test]
fn a_shared_empty_uri_still_routes_back() {
    // Found by the fuzz target: the form of an empty URI is `mcpwire://<server>/`.
    let mut r = Resources::new();
    r.set_server_resources(id("a"), vec![resource("", "empty")], vec![]);
    r.set_server_resources(id("b"), vec![resource("", "empty")], vec![]);
    for s in ["a", "b"] {
        let exposed = r.exposed_uri(&id(s), "");
        assert_eq!(exposed, format!("mcpwire://{s}/"));
        assert_eq!(r.route(&exposed).unwrap(), (id(s), String::new()));
    }
}

#[test]
fn an_upstream_uri_in_the_gateways_own_scheme_is_always_prefixed() {
    let mut r = Resources::new();
    r.set_server_resources(
        id("inner"),
        vec![resource("mcpwire://x/abc", "nested")],
        vec![],
    );
    let exposed = r.list_resources()[0].uri.clone();
    assert_eq!(exposed, "mcpwire://inner/mcpwire%3A%2F%2Fx%2Fabc");
    assert_eq!(
        r.route(&exposed).unwrap(),
        (id("inner"), "mcpwire://x/abc".to_owned())
    );
    // The verbatim form reads as the gateway's own, naming a server it does not have.
    assert!(matches!(
        r.route("mcpwire://x/abc"),
        Err(ResourceRouteError::UnknownServer { .. })
    ));
}

#[test]
fn a_uri_no_server_lists_is_routed_by_the_templates_it_matches() {
    let mut r = Resources::new();
    r.set_server_resources(
        id("gh"),
        vec![],
        vec![template("github://repos/{owner}/{repo}/issues{?state}")],
    );
    r.set_server_resources(id("fs"), vec![], vec![template("file:///{+path}")]);
    r.set_server_resources(
        id("bad"),
        vec![],
        vec![template("file:///{unclosed"), template("x://{=y}")],
    );
    assert_eq!(
        r.route("github://repos/acme/app/issues").unwrap().0,
        id("gh")
    );
    assert_eq!(
        r.route("github://repos/acme/app/issues?state=open")
            .unwrap()
            .0,
        id("gh")
    );
    assert_eq!(r.route("file:///src/main.rs").unwrap().0, id("fs"));
    // `{owner}` does not take a `/`.
    assert!(r.route("github://repos/a/b/c/issues").is_err());
    assert_eq!(r.list_templates().len(), 4);
    // Two servers' templates match: ambiguous.
    r.set_server_resources(id("fs2"), vec![], vec![template("file:///src/{file}")]);
    let err = r.route("file:///src/main.rs").unwrap_err();
    assert!(
        matches!(&err, ResourceRouteError::Ambiguous { servers, .. } if servers == &[id("fs"), id("fs2")]),
        "{err:?}"
    );
}

#[test]
fn read_results_carry_the_exposed_uris() {
    let mut r = Resources::new();
    r.set_server_resources(id("a"), vec![resource("file:///x", "x")], vec![]);
    r.set_server_resources(
        id("b"),
        vec![resource("file:///x", "x"), resource("file:///y", "y")],
        vec![],
    );
    let mut result =
        json!({"contents": [{"uri": "file:///x", "text": "1"}, {"uri": "file:///y", "text": "2"}]});
    r.rewrite_read_result(&id("b"), &mut result);
    assert_eq!(
        result["contents"][0]["uri"],
        "mcpwire://b/file%3A%2F%2F%2Fx"
    );
    assert_eq!(result["contents"][1]["uri"], "file:///y");
}

#[test]
fn malformed_gateway_uris_are_refused() {
    for bad in [
        "mcpwire:x",
        "mcpwire://a",
        "mcpwire://9a/x",
        "mcpwire://a/file:///x",
        "mcpwire://a/%ff",
        "mcpwire://a/%2f",
    ] {
        assert!(
            matches!(
                parse_prefixed(bad),
                Some(Err(ResourceRouteError::BadPrefixed { .. }))
            ),
            "{bad}"
        );
    }
    assert_eq!(parse_prefixed("file:///x"), None);
    // The form of an empty URI (a server may list one) reads back.
    assert_eq!(
        parse_prefixed("mcpwire://a/"),
        Some(Ok((id("a"), String::new())))
    );
    assert_eq!(
        parse_prefixed("MCPWIRE://a/x"),
        Some(Err(ResourceRouteError::BadPrefixed {
            uri: "MCPWIRE://a/x".into(),
            problem: "the URI after the server id is not encoded as the gateway encodes it"
        }))
    );
}

// -------------------------------------------------------------------------------------------
// Sign-in.

#[test]
fn a_sign_in_is_a_url_elicitation_with_the_authorization_url() {
    let client = ClientCapabilities::none().with_elicitation_url();
    let url = "https://auth.example.com/authorize?client_id=c&state=s&code_challenge=x";
    let login =
        LoginElicitation::new(&id("github"), url, &client, "run mcpwire host servers").unwrap();
    let modern = login.params(None);
    assert_eq!(modern["mode"], "url");
    assert_eq!(modern["url"], url);
    assert!(modern.get("elicitationId").is_none());
    let legacy = login.params(Some("e-1"));
    assert_eq!(legacy["elicitationId"], "e-1");
    let ElicitationRequest::Url(u) = ElicitationRequest::parse(&legacy.to_string()).unwrap() else {
        panic!()
    };
    assert_eq!((u.url.as_str(), u.host.as_str()), (url, "auth.example.com"));
    assert_eq!(login.request(), &ElicitationRequest::Url(u));
    insta::assert_snapshot!("login_message", login.message());
    assert_eq!(
        login.read_answer(&json!({"action": "accept"})),
        Ok(LoginAnswer::Accepted)
    );
    let declined = login
        .read_answer(&json!({"action": "decline"}))
        .unwrap_err();
    assert!(
        declined.to_string().contains("you declined to sign in"),
        "{declined}"
    );
}

#[test]
fn a_client_without_url_elicitation_is_told_how_to_sign_in_elsewhere() {
    let r = LoginElicitation::new(
        &id("github"),
        "https://auth.example.com/authorize",
        &elicit_client(),
        "run `mcpwire host --config /cfg.json servers` on a terminal",
    )
    .unwrap_err();
    insta::assert_snapshot!("refusal_login", r.to_string());
    assert!(
        !r.to_string().contains("auth.example.com"),
        "the URL stays out of the model's view"
    );
    // A URL the client side would refuse is refused here.
    let client = ClientCapabilities::none().with_elicitation_url();
    assert!(LoginElicitation::new(&id("github"), "not a url", &client, "").is_err());
}

// -------------------------------------------------------------------------------------------
// --print-config.

#[test]
fn the_snippets_start_the_gateway_with_absolute_paths() {
    let cmd = ServeCommand::new("/opt/mcp wire/bin/mcpwire", "/home/me/it's mcp.json").unwrap();
    insta::assert_snapshot!("print_config", cmd.render());
    assert_eq!(
        cmd.args(),
        ["host", "serve", "--config", "/home/me/it's mcp.json"]
    );
    assert_eq!(
        cmd.claude_code_command(),
        "claude mcp add --transport stdio --scope user mcpwire -- '/opt/mcp wire/bin/mcpwire' host serve --config '/home/me/it'\\''s mcp.json'"
    );
    assert_eq!(cmd.vscode()["servers"]["mcpwire"]["type"], "stdio");
    assert_eq!(
        cmd.claude_desktop()["mcpServers"]["mcpwire"]["command"],
        "/opt/mcp wire/bin/mcpwire"
    );
}

#[test]
fn our_own_config_reader_reads_each_snippet_back_as_the_gateway() {
    let cmd = ServeCommand::new("/usr/local/bin/mcpwire", "C:\\Users\\me\\mcp.json").unwrap();
    for (file, snippet) in [
        ("claude_desktop_config.json", cmd.claude_desktop()),
        (".mcp.json", cmd.claude_code_mcp_json()),
        ("mcp.json", cmd.cursor()),
        (".vscode/mcp.json", cmd.vscode()),
    ] {
        let parsed = config::parse(file, &snippet.to_string(), &config::Vars::none());
        assert!(parsed.errors.is_empty(), "{file}: {:?}", parsed.errors);
        let entries = parsed.effective();
        assert_eq!(entries.len(), 1, "{file}");
        let spec = &entries[0].spec;
        assert_eq!(spec.id.as_str(), "mcpwire");
        let TransportSpec::Stdio { command, args, .. } = &spec.transport else {
            panic!("{file}")
        };
        assert_eq!(
            (command.as_str(), args.clone()),
            ("/usr/local/bin/mcpwire", cmd.args())
        );
        // Reading its own entry, the gateway would start itself.
        assert!(runs_gateway(spec), "{file}");
    }
}

#[test]
fn runs_gateway_tells_the_gateways_entry_from_others() {
    let stdio = |command: &str, args: &[&str]| ServerSpec {
        id: id("x"),
        transport: TransportSpec::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Default::default(),
            cwd: None,
        },
        oauth: None,
        trust: Trust::Untrusted,
        disabled: false,
    };
    assert!(runs_gateway(&stdio("mcpwire", &["host", "serve"])));
    assert!(runs_gateway(&stdio(
        "C:\\bin\\MCPWIRE.exe",
        &["host", "--config", "c.json", "serve"]
    )));
    assert!(!runs_gateway(&stdio("mcpwire", &["host", "tools"])));
    assert!(!runs_gateway(&stdio(
        "mcpwire",
        &["dev", "mcp-server", "--stdio"]
    )));
    assert!(!runs_gateway(&stdio("node", &["mcpwire", "host", "serve"])));
}

#[test]
fn relative_paths_and_control_characters_are_refused() {
    assert!(matches!(
        ServeCommand::new("mcpwire", "/c.json"),
        Err(SnippetError::NotAbsolute { what: "binary", .. })
    ));
    assert!(matches!(
        ServeCommand::new("/bin/mcpwire", "c.json"),
        Err(SnippetError::NotAbsolute { what: "config", .. })
    ));
    assert!(matches!(
        ServeCommand::new("/bin/mcpwire", "/c\n.json"),
        Err(SnippetError::ControlCharacter { what: "config" })
    ));
    assert!(ServeCommand::new("\\\\server\\share\\mcpwire.exe", "D:/c.json").is_ok());
}

// -------------------------------------------------------------------------------------------
// Properties.

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any URI of any server reads back from its gateway form, and the form is in the
        /// gateway's scheme with one path segment.
        #[test]
        fn prefixed_uris_read_back(server in "[a-zA-Z][a-zA-Z0-9_-]{0,12}", uri in "\\PC{0,40}") {
            let server = id(&server);
            let p = prefixed_uri(&server, &uri);
            prop_assert_eq!(parse_prefixed(&p), Some(Ok((server.clone(), uri.clone()))));
            prop_assert_eq!(p.matches('/').count(), 3);
        }

        /// Whatever a client sends as a URI, routing answers (a server or an error), never
        /// panics; a `mcpwire:` URI is never routed verbatim.
        #[test]
        fn routing_any_uri_answers(uri in "\\PC{0,60}", templates in proptest::collection::vec("\\PC{0,30}", 0..4)) {
            let mut r = Resources::new();
            r.set_server_resources(id("a"), vec![resource("file:///x", "x")], templates.iter().map(|t| template(t)).collect());
            if let Ok((server, inner)) = r.route(&uri) {
                prop_assert_eq!(server, id("a"));
                if uri.to_ascii_lowercase().starts_with("mcpwire:") {
                    prop_assert_eq!(prefixed_uri(&id("a"), &inner), uri);
                }
            }
        }

        /// Any arguments a client sends route to the tool with exactly those arguments (or
        /// to a protocol error when they are not an object), through either way of calling.
        #[test]
        fn arguments_are_sent_as_given(args in arb_json(3)) {
            let (catalog, up) = setup();
            match route_call(&catalog, &up, "github__search", Some(&args)) {
                Ok(Routed::Call(c)) => prop_assert_eq!(&c.arguments, &args),
                Err(RouteError::InvalidArguments { .. }) => prop_assert!(!args.is_object()),
                other => prop_assert!(false, "{:?}", other),
            }
            if args.is_object() {
                let via = route_call(&catalog, &up, CALL_TOOL, Some(&json!({"name": "github__search", "arguments": args.clone()})));
                match via {
                    Ok(Routed::Call(c)) => prop_assert_eq!(&c.arguments, &args),
                    other => prop_assert!(false, "{:?}", other),
                }
            }
        }

        /// Whatever arguments, the form shows them in full (they read back from the message)
        /// and an answer for any other arguments is refused.
        #[test]
        fn the_form_shows_the_arguments_and_binds_the_answer(a in arb_object(), b in arb_object()) {
            let (catalog, up) = setup();
            let ca = call(&catalog, &up, "github__create_issue", a.clone());
            let mut p = policy(&[], &[], &[]);
            let ConsentStep::Ask(form) = decide(&p, &ca, &elicit_client(), "/c") else {
                return Err(TestCaseError::fail("did not ask"));
            };
            let m = form.message();
            let start = m.find("JSON):\n").unwrap() + "JSON):\n".len();
            let end = m.rfind("\n\nAccept").unwrap();
            prop_assert_eq!(serde_json::from_str::<Value>(&m[start..end]).unwrap(), a.clone());
            let cb = call(&catalog, &up, "github__create_issue", b.clone());
            let outcome = form.apply(&mut p, &cb, ConsentAnswer::Accept { always: false });
            if a == b {
                prop_assert_eq!(outcome, Ok(ApprovalScope::Once));
            } else {
                let refused = matches!(outcome, Err(ToolRefusal::AnswerForAnotherCall { .. }));
                prop_assert!(refused);
            }
        }
    }

    fn arb_json(depth: u32) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "\\PC{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(depth, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\u{202e}]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_object() -> impl Strategy<Value = Value> {
        proptest::collection::btree_map("[a-z]{1,5}", arb_json(2), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }
}

#[test]
fn an_upstream_result_goes_downstream_without_what_the_upstream_said_of_itself() {
    use mcpwire_core::host::gateway::downstream_result;
    let upstream = serde_json::json!({
        "content": [{"type": "text", "text": "yo"}],
        "structuredContent": {"result": "yo"},
        "isError": false,
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up", "version": "1"}, "x/trace": 7}
    });
    assert_eq!(
        downstream_result(upstream),
        serde_json::json!({
            "content": [{"type": "text", "text": "yo"}],
            "structuredContent": {"result": "yo"},
            "isError": false,
            "_meta": {"x/trace": 7}
        })
    );
    let only_info =
        serde_json::json!({"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {}}});
    assert_eq!(
        downstream_result(only_info),
        serde_json::json!({"content": []})
    );
}
