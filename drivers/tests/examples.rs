//! The library examples cannot rot: `drivers/examples/{mcp,host}_*.rs` are
//! compiled here as modules (their `main` unused) and their `run` is driven against the
//! reference server on 127.0.0.1, and the code the README's "Use as a library" section shows
//! must be the examples' own text.
//!
//! Why modules and not `cargo run --example`: a nested cargo would wait on the build lock and
//! rebuild in the test's time; cargo builds no example binary a test can name
//! (`CARGO_BIN_EXE_*` is for `[[bin]]`s only). Compiling the same file here checks the same
//! code, `cargo test` also builds the examples themselves, and clippy lints them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../examples/host_blocking.rs"]
#[allow(dead_code)]
mod host_blocking;
#[path = "../examples/host_smol.rs"]
#[allow(dead_code)]
mod host_smol;
#[path = "../examples/mcp_blocking.rs"]
#[allow(dead_code)]
mod mcp_blocking;
#[path = "../examples/mcp_concurrent.rs"]
#[allow(dead_code)]
mod mcp_concurrent;
#[path = "../examples/mcp_login.rs"]
#[allow(dead_code)]
mod mcp_login;
#[path = "../examples/mcp_smol.rs"]
#[allow(dead_code)]
mod mcp_smol;

use std::sync::Arc;

use mcpwire::mcp::FollowRedirect;
use mcpwire_core::mcp::Era;
use mcpwire_dev::auth_server::AuthConfig;
use mcpwire_dev::mcp_server::{self, Config, McpServer, McpServerHandle};

const EXAMPLES: [&str; 4] = [
    include_str!("../examples/mcp_blocking.rs"),
    include_str!("../examples/mcp_smol.rs"),
    include_str!("../examples/mcp_concurrent.rs"),
    include_str!("../examples/mcp_login.rs"),
];
const README: &str = include_str!("../../README.md");

fn reference_server() -> McpServerHandle {
    McpServer::start_http(Config::default(), "127.0.0.1:0").unwrap()
}

/// What both examples print against the reference server: its tools in its own order.
fn expected_output() -> String {
    let mut want = String::from("versions: [\"2026-07-28\",\"2025-11-25\",\"2025-06-18\",\"2025-03-26\",\"2024-11-05\"]\nera: Modern\n");
    for tool in mcp_server::tool_definitions(Era::Modern) {
        want.push_str(&format!("tool: {}\n", tool["name"].as_str().unwrap()));
    }
    want.push_str("echo: hi\nask: Hello, Ada!\n");
    want
}

fn assert_ran_once(srv: &McpServerHandle) {
    let calls = srv.server().stats().tool_calls;
    assert_eq!(calls.get("echo"), Some(&1), "{calls:?}");
    // `ask` is called twice: once to get the elicitation, once with the host's answer.
    assert_eq!(calls.get("ask"), Some(&2), "{calls:?}");
}

#[test]
fn blocking_example_discovers_lists_calls_echo_and_answers_ask() {
    let srv = reference_server();
    let mut out = Vec::new();
    mcp_blocking::run(&srv.url(), &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), expected_output());
    assert_ran_once(&srv);
}

#[test]
fn smol_example_discovers_lists_calls_echo_and_answers_ask() {
    let srv = reference_server();
    let mut out = Vec::new();
    smol::block_on(mcp_smol::run(&srv.url(), &mut out)).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), expected_output());
    assert_ran_once(&srv);
}

#[test]
fn concurrent_example_runs_its_eight_calls_at_once() {
    let srv = reference_server();
    let mut out = Vec::new();
    mcp_concurrent::run(&srv.url(), &mut out).unwrap();
    // The server's own count: all eight were in flight together.
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "8 calls, at most 8 at once on the server\n"
    );
    assert_eq!(srv.server().stats().tool_calls.get("slow"), Some(&8));
}

#[test]
fn login_example_logs_in_steps_up_and_keeps_the_grant() {
    let config = Config {
        auth: Some(AuthConfig {
            auto_approve: true,
            ..AuthConfig::default()
        }),
        ..Config::default()
    };
    let srv = McpServer::start_http(config, "127.0.0.1:0").unwrap();
    let mut out = Vec::new();
    mcp_login::run(&srv.url(), Arc::new(FollowRedirect), &mut out).unwrap();
    let mut tools: Vec<String> = mcp_server::tool_definitions(Era::Modern)
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    tools.push("admin_echo".into());
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "tools: {}\necho: hi\nadmin_echo: root\ngranted: mcp mcp:admin offline_access\n",
            tools.join(", ")
        )
    );
    let s = srv.server().stats().auth;
    assert_eq!(
        (
            s.registrations,
            s.authorization_requests,
            s.insufficient_scope
        ),
        (1, 2, 1),
        "login, then the step-up: {s:?}"
    );
}

/// What both host examples print for two reference servers and a dead port.
fn expected_host_output() -> String {
    let tools = mcp_server::tool_definitions(Era::Modern).len();
    format!(
        "dead: unreachable (server/discover)\n\
         docs: ready, {tools} tools\n\
         notes: ready, {tools} tools\n\
         docs/echo: hello from docs\n\
         notes/echo: hello from notes\n\
         servers: dead failed, docs ready, notes ready\n"
    )
}

/// Two reference servers and a URL nothing listens on.
fn host_example_servers() -> (McpServerHandle, McpServerHandle, String) {
    let dead = reference_server().url();
    (reference_server(), reference_server(), dead)
}

#[test]
fn host_examples_connect_three_servers_and_call_each_ready_one() {
    let (docs, notes, dead) = host_example_servers();
    let servers = [
        ("docs", docs.url()),
        ("dead", dead.clone()),
        ("notes", notes.url()),
    ];
    let servers: Vec<(&str, &str)> = servers.iter().map(|(i, u)| (*i, u.as_str())).collect();
    let mut out = Vec::new();
    host_blocking::run(&servers, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), expected_host_output());
    let mut out = Vec::new();
    smol::block_on(host_smol::run(&servers, &mut out)).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), expected_host_output());
    for srv in [&docs, &notes] {
        assert_eq!(srv.server().stats().tool_calls.get("echo"), Some(&2));
    }
}

#[test]
fn examples_report_a_refused_connection_as_an_error() {
    // A port that was free a moment ago: nothing listens there now.
    let url = {
        let srv = reference_server();
        srv.url()
    };
    let mut out = Vec::new();
    assert!(mcp_blocking::run(&url, &mut out).is_err());
    assert!(smol::block_on(mcp_smol::run(&url, &mut out)).is_err());
    assert!(out.is_empty());
}

/// The ```rust blocks of the README's "Use as a library" section.
fn library_section_code() -> Vec<String> {
    let start = README.find("\n## Use as a library\n").expect("the section");
    let section = &README[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```rust") {
        let body = &rest[open..];
        let body = &body[body.find('\n').unwrap() + 1..];
        let close = body.find("\n```").unwrap();
        blocks.push(body[..close + 1].to_owned());
        rest = &body[close + 4..];
    }
    blocks
}

#[test]
fn readme_library_section_shows_the_examples_own_code() {
    let blocks = library_section_code();
    assert!(blocks.len() >= 2, "found {} rust blocks", blocks.len());
    for block in &blocks {
        assert!(
            EXAMPLES
                .iter()
                .any(|example| example.contains(block.as_str())),
            "this README block is not in drivers/examples/mcp_*.rs:\n{block}"
        );
    }
}

#[test]
fn readme_library_section_shows_what_the_examples_print() {
    let start = README.find("\n## Use as a library\n").unwrap();
    let shown = &README[start..];
    let shown = &shown[shown.find("--example mcp_blocking\n").unwrap() + 23..];
    let shown = &shown[..shown.find("```").unwrap()];
    assert_eq!(shown, expected_output());
}
