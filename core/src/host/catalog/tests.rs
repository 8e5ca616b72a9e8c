#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::json;

use super::naming::{candidate, MAX_NAME_LEN};
use super::*;

fn id(s: &str) -> ServerId {
    ServerId::new(s).unwrap()
}

fn tool(name: &str, description: &str, params: &[&str]) -> Tool {
    let properties: serde_json::Map<String, Value> = params
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    let schema = json!({"type": "object", "properties": properties});
    Tool {
        name: name.to_owned(),
        description: Some(description.to_owned()),
        input_schema: schema.as_object().unwrap().clone(),
        ..Tool::default()
    }
}

fn named(name: &str) -> Tool {
    tool(name, "", &[])
}

fn names_of(results: &SearchResults<'_>) -> Vec<String> {
    results.hits.iter().map(|h| h.exposed.to_owned()).collect()
}

/// Two servers with a tool of the same name, and a third.
fn sample() -> Catalog {
    let mut c = Catalog::new();
    c.set_server_tools(
        id("github"),
        vec![
            tool(
                "search",
                "Search code, issues and pull requests on GitHub",
                &["query"],
            ),
            tool(
                "create_issue",
                "Open a new issue in a repository",
                &["owner", "repo", "title", "body"],
            ),
            tool(
                "listPullRequests",
                "List the pull requests of a repository",
                &["owner", "repo", "state"],
            ),
        ],
    );
    c.set_server_tools(
        id("web"),
        vec![
            tool("search", "Search the web for pages", &["query", "count"]),
            tool("fetch", "Fetch a URL and return its text", &["url"]),
        ],
    );
    c.set_server_tools(
        id("files"),
        vec![
            tool("read.file", "Read a file from disk", &["path"]),
            tool("write.file", "Write text to a file", &["path", "text"]),
        ],
    );
    c
}

#[test]
fn two_servers_that_both_define_search_get_distinct_names_that_route_back() {
    let c = sample();
    assert_eq!(
        c.exposed_name(&id("github"), "search"),
        Some("github__search")
    );
    assert_eq!(c.exposed_name(&id("web"), "search"), Some("web__search"));
    let (server, t) = c.route("github__search").unwrap();
    assert_eq!((server.as_str(), t.name.as_str()), ("github", "search"));
    assert!(t.description.as_deref().unwrap().contains("GitHub"));
    let (server, t) = c.route("web__search").unwrap();
    assert_eq!((server.as_str(), t.name.as_str()), ("web", "search"));
    assert!(c.route("search").is_none());
    assert!(c.route("files__search").is_none());
    let found = names_of(&c.search("search", 10).unwrap());
    assert!(
        found.contains(&"github__search".to_owned()) && found.contains(&"web__search".to_owned())
    );
}

#[test]
fn a_renamed_tool_is_followed_by_the_index_and_the_routes() {
    let mut c = Catalog::new();
    c.set_server_tools(
        id("tracker"),
        vec![
            tool("create_issue", "Create a ticket", &["title"]),
            tool("list_issues", "List tickets", &[]),
        ],
    );
    assert_eq!(
        names_of(&c.search("create", 5).unwrap()),
        ["tracker__create_issue"]
    );
    // list_changed: create_issue is now open_issue.
    let update = c.set_server_tools(
        id("tracker"),
        vec![
            tool("open_issue", "Open a ticket", &["title"]),
            tool("list_issues", "List tickets", &[]),
        ],
    );
    assert_eq!(
        update.names,
        [
            NameChange {
                server: id("tracker"),
                tool: "create_issue".into(),
                old: Some("tracker__create_issue".into()),
                new: None,
            },
            NameChange {
                server: id("tracker"),
                tool: "open_issue".into(),
                old: None,
                new: Some("tracker__open_issue".into()),
            },
        ]
    );
    assert!(c.route("tracker__create_issue").is_none());
    assert_eq!(c.route("tracker__open_issue").unwrap().1.name, "open_issue");
    assert!(c.search("create", 5).unwrap().hits.is_empty());
    assert_eq!(
        names_of(&c.search("open", 5).unwrap()),
        ["tracker__open_issue"]
    );
    let select = c
        .search("select:tracker__create_issue,tracker__open_issue", 5)
        .unwrap();
    assert_eq!(names_of(&select), ["tracker__open_issue"]);
    assert_eq!(select.unknown, ["tracker__create_issue"]);
    assert_eq!(c.len(), 2);
}

#[test]
fn the_index_after_list_changed_equals_a_fresh_one() {
    let mut incremental = sample();
    incremental.set_server_tools(
        id("web"),
        vec![
            tool("search", "Search the web for news", &["query"]),
            tool("crawl", "Crawl a site", &["url", "depth"]),
        ],
    );
    let mut fresh = Catalog::new();
    for s in ["web", "files", "github"] {
        let tools: Vec<Tool> = incremental
            .server_entries(&id(s))
            .map(|e| e.tool.clone())
            .collect();
        fresh.set_server_tools(id(s), tools);
    }
    assert_eq!(incremental.stats, fresh.stats);
    for q in ["search", "web news", "url", "issue repository", "file path"] {
        let a = incremental.search(q, 50).unwrap();
        let b = fresh.search(q, 50).unwrap();
        assert_eq!(a, b, "{q}");
    }
}

#[test]
fn long_names_and_odd_characters_fit_the_rule_and_route_back() {
    let mut c = Catalog::new();
    let long = "summarize_".repeat(10);
    let tools = [
        "read.file",
        "read_file",
        "ünïcode tool",
        "emoji 🦀",
        "",
        long.as_str(),
        "a/b:c",
    ];
    c.set_server_tools(id("odd"), tools.iter().map(|t| named(t)).collect());
    let exposed: Vec<&str> = c.entries().map(|e| e.exposed).collect();
    assert_eq!(exposed.len(), tools.len());
    for t in tools {
        let name = c.exposed_name(&id("odd"), t).unwrap();
        assert!(is_valid_name(name), "{name:?}");
        assert_eq!(c.route(name).unwrap().1.name, t);
    }
    // read.file and read_file share a candidate: both suffixed, distinct.
    let a = c.exposed_name(&id("odd"), "read.file").unwrap();
    let b = c.exposed_name(&id("odd"), "read_file").unwrap();
    assert!(a != b && a.starts_with("odd__read_file_") && b.starts_with("odd__read_file_"));
    assert_eq!(c.exposed_name(&id("odd"), "a/b:c"), Some("odd__a_b_c"));
    assert_eq!(c.exposed_name(&id("odd"), ""), Some("odd__"));
    let l = c.exposed_name(&id("odd"), &long).unwrap();
    assert_eq!(l.len(), MAX_NAME_LEN);
    assert!(l.starts_with("odd__summarize_summarize_"));
}

#[test]
fn an_unrelated_server_renames_nothing_and_a_colliding_one_renames_only_the_collision() {
    let mut c = sample();
    let before: Vec<(String, String)> = c
        .entries()
        .map(|e| (e.tool.name.clone(), e.exposed.to_owned()))
        .collect();
    let update = c.set_server_tools(id("slack"), vec![named("search"), named("post")]);
    assert!(update.names.iter().all(|n| n.server == id("slack")));
    let after: Vec<(String, String)> = c
        .entries()
        .filter(|e| e.server.as_str() != "slack")
        .map(|e| (e.tool.name.clone(), e.exposed.to_owned()))
        .collect();
    assert_eq!(before, after);
    // Server `github` with tool `a__b` and server `github__a` with tool `b` share the
    // candidate `github__a__b`: both, and only they, get suffixes.
    c.set_server_tools(id("github"), vec![named("a__b"), named("search")]);
    let update = c.set_server_tools(id("github__a"), vec![named("b")]);
    let renamed: Vec<(&str, &str)> = update
        .names
        .iter()
        .map(|n| (n.server.as_str(), n.tool.as_str()))
        .collect();
    assert_eq!(renamed, [("github", "a__b"), ("github__a", "b")]);
    assert_eq!(update.names[0].old.as_deref(), Some("github__a__b"));
    let x = c.exposed_name(&id("github"), "a__b").unwrap().to_owned();
    let y = c.exposed_name(&id("github__a"), "b").unwrap().to_owned();
    assert!(x != y && x.starts_with("github__a__b_") && y.starts_with("github__a__b_"));
    assert_eq!(c.route(&x).unwrap().0, &id("github"));
    assert_eq!(c.route(&y).unwrap().0, &id("github__a"));
    assert_eq!(
        c.exposed_name(&id("github"), "search"),
        Some("github__search")
    );
    // Removing the second server gives the first its plain name back.
    let update = c.remove_server(&id("github__a"));
    assert_eq!(c.exposed_name(&id("github"), "a__b"), Some("github__a__b"));
    assert_eq!(update.names.len(), 2);
    assert!(c.route(&y).is_none());
}

#[test]
fn an_unchanged_list_changes_nothing_and_duplicates_are_reported() {
    let mut c = sample();
    let mut tools: Vec<Tool> = c
        .server_entries(&id("web"))
        .map(|e| e.tool.clone())
        .collect();
    tools.reverse();
    assert!(c.set_server_tools(id("web"), tools).is_empty());
    let update = c.set_server_tools(
        id("dup"),
        vec![
            tool("x", "first", &[]),
            tool("y", "", &[]),
            tool("x", "second", &[]),
            tool("x", "third", &[]),
        ],
    );
    assert_eq!(update.duplicates, ["x"]);
    assert_eq!(
        c.route("dup__x").unwrap().1.description.as_deref(),
        Some("first")
    );
    assert_eq!(c.server_entries(&id("dup")).count(), 2);
}

#[test]
fn select_answers_in_the_order_given_and_reports_unknown_names() {
    let c = sample();
    let r = c
        .search("select:web__fetch, github__search ,nope__x,web__fetch", 1)
        .unwrap();
    assert_eq!(r.kind, QueryKind::Select);
    assert_eq!(names_of(&r), ["web__fetch", "github__search"]);
    assert_eq!(r.unknown, ["nope__x"]);
    assert!(r.hits.iter().all(|h| h.score == 1.0));
    assert_eq!(r.hits[0].server, &id("web"));
    assert_eq!(r.hits[0].tool.name, "fetch");
}

#[test]
fn regex_results_come_by_server_then_name() {
    let c = sample();
    let r = c.search("regex:search|FILE", 50).unwrap();
    assert_eq!(r.kind, QueryKind::Regex);
    assert_eq!(
        names_of(&r),
        [
            "files__read_file",
            "files__write_file",
            "github__search",
            "web__search"
        ]
    );
    // Parameter names are matched, anchors apply per field.
    assert_eq!(
        names_of(&c.search("regex:^url$", 50).unwrap()),
        ["web__fetch"]
    );
    assert_eq!(
        names_of(&c.search("regex:^search", 1).unwrap()),
        ["github__search"]
    );
    assert!(matches!(
        c.search("regex:[unclosed", 5),
        Err(SearchError::BadPattern { .. })
    ));
}

#[test]
fn bm25_ranks_by_score_then_server_then_name() {
    let mut c = Catalog::new();
    // The same tool on two servers: equal scores, server id decides.
    for s in ["zeta", "alpha"] {
        c.set_server_tools(
            id(s),
            vec![
                tool("create_issue", "Create an issue", &["title"]),
                tool("comment", "Comment on an issue", &["issue_number"]),
                tool("weather", "Get the forecast", &[]),
            ],
        );
    }
    let r = c.search("create issue", 10).unwrap();
    assert_eq!(r.kind, QueryKind::Words);
    assert_eq!(
        names_of(&r),
        [
            "alpha__create_issue",
            "zeta__create_issue",
            "alpha__comment",
            "zeta__comment"
        ]
    );
    assert_eq!(r.hits[0].score, r.hits[1].score);
    assert!(r.hits[1].score > r.hits[2].score && r.hits[3].score > 0.0);
    // camelCase and separators in queries tokenize the same way.
    assert_eq!(
        names_of(&c.search("createIssue", 2).unwrap()),
        names_of(&c.search("create-issue", 2).unwrap())
    );
    // The limit cuts after ordering.
    assert_eq!(
        names_of(&c.search("issue", 1).unwrap()),
        ["alpha__create_issue"]
    );
    assert!(c.search("nothing matches", 5).unwrap().hits.is_empty());
    assert_eq!(
        c.search("issue", 0).map(|r| r.hits.len()),
        Err(SearchError::LimitOutOfRange { given: 0, max: 50 })
    );
    assert_eq!(
        c.search("   ", 5).map(|r| r.hits.len()),
        Err(SearchError::EmptyQuery)
    );
}

#[test]
fn results_carry_the_full_definition() {
    let c = sample();
    let r = c.search("fetch url", 1).unwrap();
    let hit = r.hits[0];
    assert_eq!(hit.exposed, "web__fetch");
    let def = hit.definition();
    assert_eq!(def.name, "web__fetch");
    assert_eq!(
        def.input_schema,
        &c.route("web__fetch").unwrap().1.input_schema
    );
    insta::assert_json_snapshot!("search_result_for_the_model", r.to_model_value());
    let select = c.search("select:web__fetch,gone__x", 5).unwrap();
    assert_eq!(select.to_model_value()["unknown"], json!(["gone__x"]));
}

#[test]
fn the_threshold_switches_to_progressive_discovery() {
    let c = sample();
    let total = c.token_estimate().tokens;
    assert!(total > 0);
    // 3% of a window just big enough holds every tool; one token less does not.
    let window_for = |t: u64| t * 100 / 3 + 100;
    let roomy = PresentationConfig::new(window_for(total));
    assert_eq!(c.presentation(&roomy).presentation, Presentation::AllTools);
    let tight = PresentationConfig::new(window_for(total) / 2);
    let decision = c.presentation(&tight);
    assert_eq!(decision.presentation, Presentation::ProgressiveDiscovery);
    assert_eq!(decision.total_tokens, total);
    assert_eq!(decision.limit_tokens, window_for(total) / 2 * 3 / 100);
    // Exactly at the limit is still all tools; one token more is not.
    let at = PresentationDecision::decide(300, &PresentationConfig::new(10_000));
    assert_eq!(at.presentation, Presentation::AllTools);
    let above = PresentationDecision::decide(301, &PresentationConfig::new(10_000));
    assert_eq!(above.presentation, Presentation::ProgressiveDiscovery);
    // The same window at 5% holds what 1% does not.
    let five = PresentationConfig::new(10_000)
        .with_threshold(DiscoveryThreshold::from_percent(5.0).unwrap());
    let one = PresentationConfig::new(10_000)
        .with_threshold(DiscoveryThreshold::from_percent(1.0).unwrap());
    assert_eq!(
        PresentationDecision::decide(400, &five).presentation,
        Presentation::AllTools
    );
    assert_eq!(
        PresentationDecision::decide(400, &one).presentation,
        Presentation::ProgressiveDiscovery
    );
    // An empty catalog is all (no) tools.
    assert_eq!(
        Catalog::new()
            .presentation(&PresentationConfig::new(0))
            .presentation,
        Presentation::AllTools
    );

    let all = c.model_tools(&roomy);
    assert_eq!(all.tools.len(), c.len());
    let progressive = c.model_tools(&tight);
    let names: Vec<&str> = progressive.tools.iter().map(|t| t.name).collect();
    assert_eq!(names, [SEARCH_TOOLS, CALL_TOOL]);
}

#[test]
fn thresholds_outside_one_to_five_percent_are_refused() {
    assert_eq!(DiscoveryThreshold::default().percent(), 3.0);
    assert_eq!(DiscoveryThreshold::default().limit(200_000), 6_000);
    assert_eq!(
        DiscoveryThreshold::from_percent(2.5)
            .unwrap()
            .limit(200_000),
        5_000
    );
    assert_eq!(
        DiscoveryThreshold::from_percent(1.0).unwrap().to_string(),
        "1%"
    );
    for bad in [0.0, 0.99, 5.01, 10.0, -3.0, f64::NAN, f64::INFINITY] {
        let e = DiscoveryThreshold::from_percent(bad).unwrap_err();
        assert!(e.to_string().contains("from 1% to 5%"), "{e}");
    }
    assert_eq!(
        DiscoveryThreshold::from_percent(5.0)
            .unwrap()
            .limit(u64::MAX),
        u64::MAX / 20
    );
}

#[test]
fn pinned_tools_stay_loaded_under_progressive_discovery() {
    let mut c = sample();
    assert!(c.pin(&id("web"), "fetch"));
    assert!(!c.pin(&id("web"), "fetch"));
    assert!(c.pin(&id("files"), "read.file"));
    // A pin for a tool not (yet) listed is kept.
    assert!(c.pin(&id("later"), "tool"));
    let tight = PresentationConfig::new(100);
    let names: Vec<&str> = c.model_tools(&tight).tools.iter().map(|t| t.name).collect();
    let read = c
        .exposed_name(&id("files"), "read.file")
        .unwrap()
        .to_owned();
    let read = read.as_str();
    assert_eq!(names, [SEARCH_TOOLS, CALL_TOOL, read, "web__fetch"]);
    // All tools: each once.
    let all = c.model_tools(&PresentationConfig::new(u64::MAX));
    assert_eq!(all.tools.len(), c.len());
    // The pin applies once the tool appears, and survives list_changed.
    c.set_server_tools(id("later"), vec![named("tool")]);
    c.set_server_tools(id("web"), vec![named("fetch"), named("other")]);
    let names: Vec<&str> = c.model_tools(&tight).tools.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [SEARCH_TOOLS, CALL_TOOL, read, "later__tool", "web__fetch"]
    );
    assert!(c.unpin(&id("web"), "fetch"));
    assert!(!c.unpin(&id("web"), "fetch"));
    assert!(!c.is_pinned(&id("web"), "fetch"));
    // Native deferral: pinned tools are not deferred.
    let native = c.anthropic_tool_search(AnthropicToolSearch::Regex);
    let deferred: Vec<(&str, bool)> = native.as_array().unwrap()[1..]
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t.get("defer_loading").is_some(),
            )
        })
        .collect();
    assert!(deferred.contains(&("later__tool", false)));
    assert!(deferred.contains(&("web__fetch", true)));
}

#[test]
fn the_meta_tools_are_the_same_bytes_for_every_catalog() {
    let tight = PresentationConfig::new(10);
    let a = sample();
    let mut b = Catalog::new();
    b.set_server_tools(
        id("other"),
        (0..50).map(|i| named(&format!("t{i}"))).collect(),
    );
    for shape in [
        ModelTools::anthropic,
        ModelTools::openai_chat,
        ModelTools::openai_responses,
    ] {
        let x = serde_json::to_string(&shape(&a.model_tools(&tight))).unwrap();
        let y = serde_json::to_string(&shape(&b.model_tools(&tight))).unwrap();
        assert_eq!(x, y);
    }
    insta::assert_json_snapshot!("meta_tools_anthropic", a.model_tools(&tight).anthropic());
}

#[test]
fn meta_calls_parse_into_typed_calls() {
    assert_eq!(
        MetaCall::parse("search_tools", &json!({"query": "create issue"})),
        Ok(Some(MetaCall::SearchTools {
            query: "create issue".into(),
            limit: 5
        }))
    );
    assert_eq!(
        MetaCall::parse("search_tools", &json!({"query": "x", "limit": 12})),
        Ok(Some(MetaCall::SearchTools {
            query: "x".into(),
            limit: 12
        }))
    );
    assert_eq!(
        MetaCall::parse("search_tools", &json!({"query": "x", "limit": null})),
        Ok(Some(MetaCall::SearchTools {
            query: "x".into(),
            limit: 5
        }))
    );
    let args = json!({"owner": "me", "n": 1});
    assert_eq!(
        MetaCall::parse(
            "call_tool",
            &json!({"name": "github__search", "arguments": args})
        ),
        Ok(Some(MetaCall::CallTool {
            name: "github__search".into(),
            arguments: args.as_object().unwrap().clone()
        }))
    );
    assert_eq!(
        MetaCall::parse("call_tool", &json!({"name": "web__fetch"})),
        Ok(Some(MetaCall::CallTool {
            name: "web__fetch".into(),
            arguments: JsonObjectAlias::new()
        }))
    );
    assert_eq!(
        MetaCall::parse_json("search_tools", r#"{"query":"q"}"#),
        Ok(Some(MetaCall::SearchTools {
            query: "q".into(),
            limit: 5
        }))
    );
    // Not a meta-tool: not ours to parse.
    assert_eq!(MetaCall::parse("github__search", &json!(7)), Ok(None));
    assert_eq!(MetaCall::parse_json("web__fetch", "not json"), Ok(None));
}

type JsonObjectAlias = crate::mcp::meta::JsonObject;

#[test]
fn bad_meta_call_arguments_are_typed_errors_for_the_model() {
    let cases: Vec<(&str, Value, MetaCallError)> = vec![
        (
            "search_tools",
            json!("create issue"),
            MetaCallError::NotAnObject {
                tool: SEARCH_TOOLS,
                got: "a string",
            },
        ),
        (
            "search_tools",
            json!({}),
            MetaCallError::Missing {
                tool: SEARCH_TOOLS,
                member: "query",
                expected: "a string",
            },
        ),
        (
            "search_tools",
            json!({"query": 3}),
            MetaCallError::WrongType {
                tool: SEARCH_TOOLS,
                member: "query",
                expected: "a string",
                got: "a number",
            },
        ),
        (
            "search_tools",
            json!({"query": "x", "limit": 0}),
            MetaCallError::LimitOutOfRange {
                tool: SEARCH_TOOLS,
                given: 0,
                max: 50,
            },
        ),
        (
            "search_tools",
            json!({"query": "x", "limit": 51}),
            MetaCallError::LimitOutOfRange {
                tool: SEARCH_TOOLS,
                given: 51,
                max: 50,
            },
        ),
        (
            "search_tools",
            json!({"query": "x", "limit": 2.5}),
            MetaCallError::WrongType {
                tool: SEARCH_TOOLS,
                member: "limit",
                expected: "an integer from 1 to 50",
                got: "a negative or fractional number",
            },
        ),
        (
            "search_tools",
            json!({"query": "x", "limit": "3"}),
            MetaCallError::WrongType {
                tool: SEARCH_TOOLS,
                member: "limit",
                expected: "an integer from 1 to 50",
                got: "a string",
            },
        ),
        (
            "search_tools",
            json!({"query": "x", "max": 3}),
            MetaCallError::UnknownMember {
                tool: SEARCH_TOOLS,
                member: "max".into(),
                takes: "`query` and `limit`",
            },
        ),
        (
            "call_tool",
            json!({"arguments": {}}),
            MetaCallError::Missing {
                tool: CALL_TOOL,
                member: "name",
                expected: "a tool's exact name, as search_tools gave it",
            },
        ),
        (
            "call_tool",
            json!({"name": ["x"]}),
            MetaCallError::WrongType {
                tool: CALL_TOOL,
                member: "name",
                expected: "a string",
                got: "an array",
            },
        ),
        (
            "call_tool",
            json!({"name": "x", "arguments": "{}"}),
            MetaCallError::WrongType {
                tool: CALL_TOOL,
                member: "arguments",
                expected: "an object",
                got: "a string",
            },
        ),
        (
            "call_tool",
            json!({"name": "x", "args": {}}),
            MetaCallError::UnknownMember {
                tool: CALL_TOOL,
                member: "args".into(),
                takes: "`name` and `arguments`",
            },
        ),
    ];
    for (name, args, want) in cases {
        assert_eq!(MetaCall::parse(name, &args), Err(want.clone()), "{args}");
        assert!(want.to_string().starts_with(name), "{want}");
    }
    let e = MetaCall::parse_json("call_tool", "{\"name\": ").unwrap_err();
    assert!(
        matches!(
            e,
            MetaCallError::BadJson {
                tool: CALL_TOOL,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn the_token_estimate_is_a_quarter_of_the_definition_bytes() {
    let c = sample();
    let mut total = 0;
    for e in c.entries() {
        let json = serde_json::to_string(&e.definition().anthropic(false)).unwrap();
        assert_eq!(e.tokens, (json.len() as u64).div_ceil(4), "{json}");
        total += e.tokens;
    }
    let estimate = c.token_estimate();
    assert_eq!(estimate.tokens, total);
    assert_eq!(estimate.tools, c.len());
    // A renamed (longer, suffixed) name counts in the estimate.
    let mut d = Catalog::new();
    d.set_server_tools(id("s"), vec![named("a_b")]);
    let plain = d.token_estimate().bytes;
    d.set_server_tools(id("s"), vec![named("a_b"), named("a.b")]);
    assert_eq!(d.token_estimate().bytes, 2 * (plain + 9));
}

#[test]
fn provider_shapes() {
    let mut c = sample();
    c.pin(&id("web"), "fetch");
    let all = c.model_tools(&PresentationConfig::new(1_000_000));
    insta::assert_json_snapshot!("all_tools_anthropic", all.anthropic());
    insta::assert_json_snapshot!("all_tools_openai_chat", all.openai_chat());
    insta::assert_json_snapshot!("all_tools_openai_responses", all.openai_responses());
    insta::assert_json_snapshot!(
        "native_anthropic_tool_search",
        c.anthropic_tool_search(AnthropicToolSearch::Bm25)
    );
    insta::assert_json_snapshot!("native_openai_tool_search", c.openai_tool_search());
    let regex = c.anthropic_tool_search(AnthropicToolSearch::Regex);
    assert_eq!(
        regex[0],
        json!({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"})
    );
}

#[test]
fn identical_states_give_identical_bytes_whatever_the_history() {
    let a = sample();
    let mut b = Catalog::new();
    b.set_server_tools(id("web"), vec![named("temporary")]);
    let mut files: Vec<Tool> = a
        .server_entries(&id("files"))
        .map(|e| e.tool.clone())
        .collect();
    files.reverse();
    b.set_server_tools(id("files"), files);
    b.set_server_tools(id("gone"), vec![named("search")]);
    b.set_server_tools(
        id("github"),
        a.server_entries(&id("github"))
            .map(|e| e.tool.clone())
            .collect(),
    );
    b.set_server_tools(
        id("web"),
        a.server_entries(&id("web"))
            .map(|e| e.tool.clone())
            .collect(),
    );
    b.remove_server(&id("gone"));
    let config = PresentationConfig::new(1_000_000);
    let text = |c: &Catalog| {
        serde_json::to_string(&json!([
            c.model_tools(&config).anthropic(),
            c.openai_tool_search(),
            c.search("search the web", 50).unwrap().to_model_value(),
            c.search("regex:.", 50).unwrap().to_model_value(),
        ]))
        .unwrap()
    };
    assert_eq!(text(&a), text(&b));
    assert_eq!(a.token_estimate(), b.token_estimate());
}

// --- properties -----------------------------------------------------------------------------

fn server_id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[ab]",
        // Ids that continue another's tool names (`a` + `__b…`).
        4 => "[ab]__[ab]",
        1 => "[ab]_[ab]",
        1 => "[a-z]{50,70}",
    ]
}

fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        // Arbitrary Unicode, control characters included.
        2 => any::<String>().prop_map(|s| s.chars().take(40).collect()),
        // Few characters: many shared candidates (`a.b`, `a_b`, `a b`).
        6 => "[a_. é]{0,3}",
        // Names that start another server's id (`b__c` on server `a` vs `c` on `a__b`).
        3 => "([ab]__)?[ab]",
        // Over-long.
        2 => "[a-z_.]{56,90}",
    ]
}

fn catalog_spec() -> impl Strategy<Value = BTreeMap<String, BTreeSet<String>>> {
    proptest::collection::btree_map(
        server_id(),
        proptest::collection::btree_set(tool_name(), 0..10),
        0..6,
    )
}

/// A deterministic shuffle (Fisher–Yates with a xorshift stream).
fn shuffle<T>(items: &mut [T], mut seed: u64) {
    seed |= 1;
    for i in (1..items.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        items.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

fn build(spec: &BTreeMap<String, BTreeSet<String>>, seed: u64) -> Catalog {
    let mut servers: Vec<(&String, Vec<Tool>)> = spec
        .iter()
        .map(|(s, tools)| (s, tools.iter().map(|t| named(t)).collect()))
        .collect();
    shuffle(&mut servers, seed);
    let mut c = Catalog::new();
    for (k, (s, mut tools)) in servers.into_iter().enumerate() {
        shuffle(&mut tools, seed.wrapping_add(k as u64 + 1));
        c.set_server_tools(id(s), tools);
    }
    c
}

fn name_map(c: &Catalog) -> BTreeMap<(String, String), String> {
    c.entries()
        .map(|e| {
            (
                (e.server.to_string(), e.tool.name.clone()),
                e.exposed.to_owned(),
            )
        })
        .collect()
}

proptest! {
    #[test]
    fn exposed_names_are_unique_valid_and_route_back(spec in catalog_spec(), seed in any::<u64>()) {
        let c = build(&spec, seed);
        let total: usize = spec.values().map(BTreeSet::len).sum();
        prop_assert_eq!(c.len(), total);
        let mut seen = BTreeSet::new();
        for e in c.entries() {
            prop_assert!(is_valid_name(e.exposed), "{:?}", e.exposed);
            prop_assert!(e.exposed != SEARCH_TOOLS && e.exposed != CALL_TOOL);
            prop_assert!(seen.insert(e.exposed.to_owned()), "{:?} twice", e.exposed);
            let (server, tool) = c.route(e.exposed).unwrap();
            prop_assert_eq!(server, e.server);
            prop_assert_eq!(&tool.name, &e.tool.name);
        }
        prop_assert_eq!(seen.len(), total);
    }

    #[test]
    fn exposed_names_do_not_depend_on_order_or_history(
        spec in catalog_spec(),
        seed1 in any::<u64>(),
        seed2 in any::<u64>(),
        extra in catalog_spec(),
    ) {
        let a = build(&spec, seed1);
        let mut b = build(&spec, seed2);
        prop_assert_eq!(name_map(&a), name_map(&b));
        // Through other states and back.
        for (s, tools) in &extra {
            b.set_server_tools(id(s), tools.iter().map(|t| named(t)).collect());
        }
        for s in extra.keys() {
            match spec.get(s) {
                Some(tools) => {
                    b.set_server_tools(id(s), tools.iter().map(|t| named(t)).collect());
                }
                None => {
                    b.remove_server(&id(s));
                }
            }
        }
        prop_assert_eq!(name_map(&a), name_map(&b));
        prop_assert_eq!(&a.stats, &b.stats);
    }

    #[test]
    fn a_new_server_renames_only_tools_whose_candidate_it_shares(
        spec in catalog_spec(),
        new_server in server_id(),
        new_tools in proptest::collection::btree_set(tool_name(), 0..8),
    ) {
        prop_assume!(!spec.contains_key(&new_server));
        let mut c = build(&spec, 0);
        let before = name_map(&c);
        let new_candidates: BTreeSet<String> =
            new_tools.iter().map(|t| candidate(&id(&new_server), t)).collect();
        let update = c.set_server_tools(id(&new_server), new_tools.iter().map(|t| named(t)).collect());
        let after = name_map(&c);
        for ((s, t), old) in &before {
            let shared = new_candidates.contains(&candidate(&id(s), t));
            if !shared {
                prop_assert_eq!(Some(old), after.get(&(s.clone(), t.clone())), "{}/{}", s, t);
            }
        }
        // The update lists exactly what changed.
        let mut changed: Vec<(String, String)> = after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .collect();
        changed.sort();
        let reported: Vec<(String, String)> =
            update.names.iter().map(|n| (n.server.to_string(), n.tool.clone())).collect();
        prop_assert_eq!(changed, reported);
    }

    #[test]
    fn any_query_runs_or_fails_with_a_typed_error(query in any::<String>(), limit in 0usize..60) {
        let c = sample();
        match c.search(&query, limit) {
            Ok(r) => {
                if r.kind != QueryKind::Select {
                    prop_assert!(r.hits.len() <= limit);
                }
                for h in &r.hits {
                    prop_assert_eq!(c.route(h.exposed).map(|(s, _)| s), Some(h.server));
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn search_finds_a_tool_by_its_title_and_by_its_annotations_title() {
    let mut c = Catalog::new();
    let mut a = named("t1");
    a.title = Some("Frobnicate widgets".into());
    let mut b = named("t2");
    b.annotations = Some(crate::mcp::results::ToolAnnotations {
        title: Some("Quux exporter".into()),
        ..Default::default()
    });
    c.set_server_tools(id("srv"), vec![a, b, named("t3")]);
    let hits = c.search("frobnicate", 5).unwrap();
    assert_eq!(names_of(&hits), ["srv__t1"]);
    let hits = c.search("quux", 5).unwrap();
    assert_eq!(
        names_of(&hits),
        ["srv__t2"],
        "annotations.title is not searched"
    );
}
