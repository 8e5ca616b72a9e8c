//! The host's tool search and meta-tool calls on arbitrary input, against a small catalog
//! whose tool names are partly arbitrary too.
//!
//! Invariants checked on every run:
//! - every exposed name fits `^[a-zA-Z0-9_-]{1,64}$`, is unique and routes back to its tool;
//! - `Catalog::search` with any query and limit never panics; it either fails with a typed
//!   error or answers with at most `limit` results (`select:` aside), each routing back to its
//!   server and tool; word results are ordered by score (highest first), then server, then
//!   name; regex results by server, then name; `select:` results are named in the query, and
//!   each named name is either found or reported unknown;
//! - the same search twice gives the same results;
//! - `MetaCall::parse_json` on arbitrary text never panics, and a parsed `search_tools` call
//!   has a limit within 1..=50.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::host::catalog::{is_valid_name, Catalog, MetaCall, QueryKind};
use mcpwire_core::host::ServerId;
use mcpwire_core::mcp::results::Tool;
use serde_json::json;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    /// Extra tool names for the servers (indices into SERVERS).
    extra: Vec<(u8, &'a str)>,
    query: &'a str,
    limit: u8,
    meta_name: bool,
    meta_arguments: &'a str,
}

const SERVERS: [&str; 4] = ["github", "web", "a", "a__b"];

fn tool(name: &str, description: &str, params: &[&str]) -> Tool {
    let properties: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    let schema = json!({"type": "object", "properties": properties});
    Tool {
        name: name.to_owned(),
        description: Some(description.to_owned()),
        input_schema: schema.as_object().cloned().unwrap_or_default(),
        ..Tool::default()
    }
}

fn base(server: &str) -> Vec<Tool> {
    match server {
        "github" => vec![
            tool("search", "Search code and issues", &["query"]),
            tool("create_issue", "Open an issue", &["owner", "repo", "title"]),
            tool("listPullRequests", "List pull requests", &["state"]),
        ],
        "web" => vec![
            tool("search", "Search the web", &["query"]),
            tool("fetch", "Fetch a URL", &["url"]),
        ],
        "a" => vec![tool("b__c", "Collides with a__b's c", &[])],
        _ => vec![tool("c", "Collides with a's b__c", &[])],
    }
}

fuzz_target!(|input: Input<'_>| {
    let mut catalog = Catalog::new();
    for (i, server) in SERVERS.iter().enumerate() {
        let mut tools = base(server);
        for (s, name) in input.extra.iter().take(16) {
            if usize::from(*s) % SERVERS.len() == i {
                tools.push(tool(name, name, &[name]));
            }
        }
        let id = ServerId::new(server).expect("a valid id");
        catalog.set_server_tools(id, tools);
    }
    let mut seen = std::collections::BTreeSet::new();
    for e in catalog.entries() {
        assert!(is_valid_name(e.exposed), "{:?}", e.exposed);
        assert!(seen.insert(e.exposed.to_owned()), "{:?} twice", e.exposed);
        let (server, tool) = catalog.route(e.exposed).expect("routes back");
        assert!(server == e.server && tool.name == e.tool.name);
    }

    let limit = usize::from(input.limit);
    let first = catalog.search(input.query, limit);
    let second = catalog.search(input.query, limit);
    assert_eq!(first, second);
    if let Ok(results) = first {
        for h in &results.hits {
            let (server, tool) = catalog.route(h.exposed).expect("a hit routes back");
            assert!(server == h.server && tool.name == h.tool.name);
        }
        match results.kind {
            QueryKind::Words => {
                assert!(results.hits.len() <= limit);
                for w in results.hits.windows(2) {
                    let (a, b) = (&w[0], &w[1]);
                    assert!(a.score > 0.0 && b.score > 0.0);
                    assert!(
                        a.score > b.score
                            || (a.score == b.score
                                && (a.server, a.exposed) < (b.server, b.exposed))
                    );
                }
            }
            QueryKind::Regex => {
                assert!(results.hits.len() <= limit);
                for w in results.hits.windows(2) {
                    assert!((w[0].server, w[0].exposed) < (w[1].server, w[1].exposed));
                }
            }
            QueryKind::Select => {
                let named = input.query.trim().trim_start_matches("select:");
                for h in &results.hits {
                    assert!(named.contains(h.exposed));
                }
                for u in &results.unknown {
                    assert!(catalog.route(u).is_none());
                }
            }
        }
    }

    let name = if input.meta_name {
        "search_tools"
    } else {
        "call_tool"
    };
    if let Ok(Some(MetaCall::SearchTools { limit, .. })) =
        MetaCall::parse_json(name, input.meta_arguments)
    {
        assert!((1..=50).contains(&limit));
    }
});
