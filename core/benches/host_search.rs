//! The host's tool catalog at scale: 10,000 tools from 100 servers (generated, with the names,
//! descriptions and parameters of real service APIs), no I/O.
//!
//! - `search_tools/words`: one BM25 query of several words, 5 results (the default limit), as
//!   `search_tools` runs it (parse, score every posting of the query's words, order the top);
//!   `search_tools/words_rare` the same for words few tools have; `search_tools/select` and
//!   `search_tools/regex` the other two query kinds. Target: under 1 ms p50 for words.
//! - `list_changed/replace_one_server`: one server's `tools/list` changed: its 100 tools are
//!   replaced by a renamed set (two sets alternate, so every iteration changes something),
//!   which reindexes that server, updates the corpus statistics and renames. Target: under
//!   10 ms. The tools' clone is made outside the timed part.
//!
//! Run with `cargo bench -p mcpwire-core --bench host_search` (criterion prints its estimate of
//! the time per iteration; the median is `median` in
//! `target/criterion/<group>/<bench>/new/estimates.json`).

// Bench setup works on fixed, known-good data; a failure there is a broken bench, not bad input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use mcpwire_core::host::catalog::Catalog;
use mcpwire_core::host::ServerId;
use mcpwire_core::mcp::results::Tool;
use serde_json::{json, Value};

const SERVICES: [&str; 25] = [
    "github",
    "gitlab",
    "slack",
    "jira",
    "linear",
    "notion",
    "confluence",
    "sentry",
    "datadog",
    "stripe",
    "shopify",
    "salesforce",
    "hubspot",
    "zendesk",
    "figma",
    "asana",
    "trello",
    "gdrive",
    "gmail",
    "calendar",
    "postgres",
    "redis",
    "kubernetes",
    "aws",
    "cloudflare",
];
const ENVIRONMENTS: [&str; 4] = ["", "-work", "-staging", "-eu"];

const VERBS: [(&str, &str); 10] = [
    ("create", "Create"),
    ("get", "Get"),
    ("list", "List"),
    ("update", "Update"),
    ("delete", "Delete"),
    ("search", "Search"),
    ("archive", "Archive"),
    ("export", "Export"),
    ("assign", "Assign"),
    ("comment_on", "Add a comment to"),
];

const NOUNS: [(&str, &str); 10] = [
    ("issue", "an issue"),
    ("pull_request", "a pull request"),
    ("message", "a message"),
    ("user", "a user"),
    ("project", "a project"),
    ("file", "a file"),
    ("invoice", "an invoice"),
    ("event", "a calendar event"),
    ("deployment", "a deployment"),
    ("record", "a database record"),
];

const DETAILS: [&str; 8] = [
    "Returns the result as JSON with its id, timestamps and a link to open it.",
    "Requires write access; the change is visible to everyone in the workspace.",
    "Supports pagination with a cursor and a page size of up to 100 items.",
    "Fields not given keep their current values. Use the id from a list call.",
    "Filters by owner, state and labels; results are sorted by last update.",
    "The operation is recorded in the audit log with the caller's identity.",
    "Rate limited to 60 calls a minute per token; retries after a 429 are safe.",
    "Attachments up to 25 MB are accepted and scanned before they are stored.",
];

const PARAMETERS: [&str; 12] = [
    "id",
    "owner",
    "repo",
    "title",
    "body",
    "state",
    "labels",
    "assignee",
    "cursor",
    "page_size",
    "workspaceId",
    "dueDate",
];

fn tools(service: &str, server: usize, variant: &str) -> Vec<Tool> {
    let mut out = Vec::with_capacity(100);
    for (v, (verb, verb_text)) in VERBS.iter().enumerate() {
        for (n, (noun, noun_text)) in NOUNS.iter().enumerate() {
            let k = server * 100 + v * 10 + n;
            let mut properties = serde_json::Map::new();
            for p in 0..(2 + k % 4) {
                let name = PARAMETERS[(k + p * 5) % PARAMETERS.len()];
                properties.insert(
                    name.to_owned(),
                    json!({"type": "string", "description": format!("The {name} of the {noun}.")}),
                );
            }
            let schema = json!({"type": "object", "properties": properties, "required": ["id"]});
            let Value::Object(input_schema) = schema else {
                unreachable!()
            };
            out.push(Tool {
                name: format!("{verb}_{noun}{variant}"),
                title: Some(format!("{verb_text} {noun_text}")),
                description: Some(format!(
                    "{verb_text} {noun_text} in {service}. {} {}",
                    DETAILS[k % DETAILS.len()],
                    DETAILS[(k / 8 + 3) % DETAILS.len()]
                )),
                input_schema,
                ..Tool::default()
            });
        }
    }
    out
}

fn server_ids() -> Vec<(ServerId, &'static str)> {
    let mut ids = Vec::with_capacity(100);
    for env in ENVIRONMENTS {
        for service in SERVICES {
            ids.push((ServerId::new(&format!("{service}{env}")).unwrap(), service));
        }
    }
    ids
}

fn catalog() -> Catalog {
    let mut c = Catalog::new();
    for (i, (id, service)) in server_ids().into_iter().enumerate() {
        c.set_server_tools(id, tools(service, i, ""));
    }
    assert_eq!(c.len(), 10_000);
    c
}

fn search_tools(c: &mut Criterion) {
    let catalog = catalog();
    // The queries find what they should before anything is timed.
    let hits = catalog
        .search("create an issue in the repository", 5)
        .unwrap();
    assert_eq!(hits.hits.len(), 5);
    assert!(hits.hits[0].exposed.ends_with("__create_issue"));
    let select = "select:github__create_issue,slack-eu__list_message,aws__get_deployment";
    assert_eq!(catalog.search(select, 5).unwrap().hits.len(), 3);

    let mut group = c.benchmark_group("search_tools");
    group.bench_function("words", |b| {
        b.iter(|| {
            black_box(
                catalog
                    .search(black_box("create an issue in the repository"), 5)
                    .unwrap()
                    .hits
                    .len(),
            )
        })
    });
    group.bench_function("words_rare", |b| {
        b.iter(|| {
            black_box(
                catalog
                    .search(black_box("stripe invoice export"), 5)
                    .unwrap()
                    .hits
                    .len(),
            )
        })
    });
    group.bench_function("select", |b| {
        b.iter(|| black_box(catalog.search(black_box(select), 5).unwrap().hits.len()))
    });
    group.bench_function("regex", |b| {
        b.iter(|| {
            black_box(
                catalog
                    .search(black_box("regex:^stripe.*invoice"), 5)
                    .unwrap()
                    .hits
                    .len(),
            )
        })
    });
    group.finish();
}

fn list_changed(c: &mut Criterion) {
    let mut catalog = catalog();
    let (id, service) = server_ids()[37].clone();
    let renamed = tools(service, 37, "_v2");
    let original = tools(service, 37, "");
    let mut flip = false;
    let mut group = c.benchmark_group("list_changed");
    group.bench_function("replace_one_server", |b| {
        b.iter_batched(
            || {
                flip = !flip;
                if flip {
                    renamed.clone()
                } else {
                    original.clone()
                }
            },
            |tools| black_box(catalog.set_server_tools(id.clone(), tools).names.len()),
            BatchSize::SmallInput,
        )
    });
    group.finish();
    // Whichever set is in, the routes and the index follow it.
    let plain = format!("{id}__create_issue");
    let v2 = format!("{id}__create_issue_v2");
    assert!(catalog.route(&plain).is_some() != catalog.route(&v2).is_some());
    let words = catalog.search(&format!("{id} create issue"), 1).unwrap();
    let top = words.hits[0].exposed;
    assert!(top == plain || top == v2, "{top}");
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = search_tools, list_changed
}
criterion_main!(benches);
