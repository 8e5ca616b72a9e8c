//! `mcpwire client` as a person or a script runs it: the binary against the reference server
//! on 127.0.0.1, in-process over Streamable HTTP and as a child (`mcpwire dev mcp-server
//! --stdio`) over stdio. Every run has stdin, stdout and stderr piped (not terminals).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output, Stdio};

use mcpwire_drivers::dev::mcp_server::{self, EraMode, McpServer, McpServerHandle};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcpwire");

fn server(era: EraMode) -> McpServerHandle {
    McpServer::start_http(
        mcp_server::Config {
            era,
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap()
}

fn stdio_server(era: &str) -> String {
    format!("{BIN} dev mcp-server --stdio --era {era}")
}

/// Runs `mcpwire client ARGS` with stdin closed (not a terminal) and `env` set.
fn client_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("client")
        .args(args)
        .stdin(Stdio::null())
        .env_remove("COLUMNS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn client(args: &[&str]) -> Output {
    client_env(args, &[])
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

fn failed(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    stderr(o)
}

fn calls(srv: &McpServerHandle, method: &str) -> usize {
    srv.server()
        .requests()
        .iter()
        .filter(|r| r.method.as_deref() == Some(method))
        .count()
}

/// The last stderr line, which a failure ends with.
fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or_default()
}

#[test]
fn discover_over_http_names_the_server_and_the_era_on_stderr() {
    let srv = server(EraMode::Dual);
    let o = client(&["--url", &srv.url(), "discover"]);
    let out = ok(&o);
    assert!(out.contains("server: mcpwire-dev-mcp-server"), "{out}");
    assert!(out.contains("versions: 2026-07-28"), "{out}");
    assert!(out.contains("capabilities: tools"), "{out}");
    assert!(
        stderr(&o).contains("using 2026-07-28 (modern era)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn tools_list_is_a_table_cut_to_80_columns() {
    let srv = server(EraMode::Dual);
    let out = ok(&client(&["--url", &srv.url(), "tools", "list"]));
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("NAME") && header.contains("DESCRIPTION"),
        "{out}"
    );
    let names: Vec<&str> = lines.map(|l| l.split(' ').next().unwrap()).collect();
    for t in [
        "echo", "slow", "progress", "fail", "tenant", "headers", "ask",
    ] {
        assert!(names.contains(&t), "{t} missing from {out}");
    }
    assert!(out.lines().all(|l| l.chars().count() <= 80), "{out}");
    assert!(out.contains('…'), "long descriptions are cut: {out}");
}

#[test]
fn tools_list_json_prints_each_result_object_on_one_line() {
    let srv = server(EraMode::Dual);
    let out = ok(&client(&["--url", &srv.url(), "tools", "list", "--json"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    let tools = v["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "tenant"
        && t["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"));
}

#[test]
fn options_are_accepted_before_and_after_the_subcommand() {
    let srv = server(EraMode::Dual);
    let url = srv.url();
    let before = ok(&client(&["--url", &url, "--json", "tools", "list"]));
    let after = ok(&client(&["tools", "list", "--url", &url, "--json"]));
    let middle = ok(&client(&["tools", "--json", "list", "--url", &url]));
    assert_eq!(before, after);
    assert_eq!(before, middle);
    let v: Value = serde_json::from_str(before.trim()).unwrap();
    assert!(v["tools"].is_array(), "{before}");
}

#[test]
fn tools_call_with_yes_prints_the_text_content() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "tools",
        "call",
        "echo",
        "--args",
        r#"{"text":"hello"}"#,
        "--yes",
    ]);
    assert_eq!(ok(&o), "hello\n");
    assert_eq!(calls(&srv, "tools/call"), 1);
}

#[test]
fn tools_call_json_prints_the_exact_result() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "--json",
        "--yes",
        "tools",
        "call",
        "echo",
        "--arg",
        "text=hi",
    ]);
    let v: Value = serde_json::from_str(ok(&o).trim()).unwrap();
    assert_eq!(v["content"][0]["text"], "hi");
}

#[test]
fn tools_call_without_yes_on_a_non_terminal_is_refused_and_sends_nothing() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "tools",
        "call",
        "echo",
        "--arg",
        "text=hi",
    ]);
    let err = failed(&o);
    assert!(
        last_line(&err).contains("stdin is not a terminal") && err.contains("--yes"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
    assert_eq!(calls(&srv, "tools/call"), 0);
}

#[test]
fn arg_values_are_json_when_they_parse_and_strings_otherwise() {
    let srv = server(EraMode::Dual);
    let url = srv.url();
    // A JSON string literal is JSON; plain words are a string.
    let quoted = client(&[
        "--url",
        &url,
        "--yes",
        "tools",
        "call",
        "echo",
        "--arg",
        "text=\"42\"",
    ]);
    assert_eq!(ok(&quoted), "42\n");
    let words = client(&[
        "--url",
        &url,
        "--yes",
        "tools",
        "call",
        "echo",
        "--arg",
        "text=two words",
    ]);
    assert_eq!(ok(&words), "two words\n");
    // --arg overrides --args; a number stays a number (and the server says echo wants text).
    let number = client(&[
        "--url",
        &url,
        "--yes",
        "tools",
        "call",
        "echo",
        "--args",
        r#"{"text":"x"}"#,
        "--arg",
        "text=42",
    ]);
    let err = failed(&number);
    assert!(err.contains("text"), "{err}");
    let bad = client(&[
        "--url", &url, "--yes", "tools", "call", "echo", "--args", "[1]",
    ]);
    assert!(last_line(&failed(&bad)).contains("--args must be a JSON object"));
}

#[test]
fn tenant_tool_with_x_mcp_header_is_called_with_its_mcp_param_header() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "--yes",
        "tools",
        "call",
        "tenant",
        "--arg",
        "region=eu-west",
    ]);
    assert!(ok(&o).contains("eu-west"), "{}", stdout(&o));
    // The first and only tools/call already carries the header (no -32020 round trip).
    assert_eq!(calls(&srv, "tools/call"), 1);
    let reqs = srv.server().requests();
    let call = reqs
        .iter()
        .find(|r| r.method.as_deref() == Some("tools/call"))
        .unwrap();
    assert!(
        call.headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("mcp-param-region") && v == "eu-west"),
        "{:?}",
        call.headers
    );
}

#[test]
fn ask_is_answered_with_input() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "--yes",
        "--input",
        r#"name={"name":"Ada"}"#,
        "tools",
        "call",
        "ask",
    ]);
    assert_eq!(ok(&o), "Hello, Ada!\n");
    assert!(
        stderr(&o).contains("asks for input 'name'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn ask_is_declined_with_decline_input() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "--yes",
        "--decline-input",
        "tools",
        "call",
        "ask",
    ]);
    assert_eq!(ok(&o), "No name given.\n");
}

#[test]
fn ask_without_an_answer_source_names_the_missing_capability() {
    let srv = server(EraMode::Dual);
    let o = client(&["--url", &srv.url(), "--yes", "tools", "call", "ask"]);
    let err = failed(&o);
    assert!(
        last_line(&err).contains("server requires capability elicitation.form")
            && err.contains("--input"),
        "{err}"
    );
}

#[test]
fn an_input_that_does_not_fit_the_form_is_refused_by_the_schema_check() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "--yes",
        "--input",
        r#"name={"nom":"Ada"}"#,
        "tools",
        "call",
        "ask",
    ]);
    let err = failed(&o);
    assert!(last_line(&err).contains("\"name\" is missing"), "{err}");
}

#[test]
fn progress_is_quiet_when_stderr_is_not_a_terminal() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "--yes",
        "tools",
        "call",
        "progress",
        "--arg",
        "steps=3",
        "--arg",
        "interval_ms=5",
    ]);
    let out = ok(&o);
    assert!(!out.is_empty());
    let err = stderr(&o);
    assert!(!err.contains("progress:") && !err.contains('\r'), "{err:?}");
    assert_eq!(err.lines().count(), 1, "only the era line: {err}");
}

#[test]
fn legacy_server_falls_back_and_says_so_on_stderr() {
    let srv = server(EraMode::Legacy);
    let o = client(&["--url", &srv.url(), "tools", "list"]);
    assert!(ok(&o).contains("echo"));
    assert!(
        stderr(&o).contains("server speaks only 2025-11-25 (legacy era); fell back"),
        "{}",
        stderr(&o)
    );
    let ping = client(&["--url", &srv.url(), "ping"]);
    assert_eq!(ok(&ping), "pong\n");
}

#[test]
fn ping_on_a_modern_server_explains_it_is_legacy_only() {
    let srv = server(EraMode::Modern);
    let o = client(&["--url", &srv.url(), "ping"]);
    assert!(
        last_line(&failed(&o)).contains("ping exists only in the legacy era"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn protocol_pin_to_legacy_skips_detection() {
    let srv = server(EraMode::Dual);
    let o = client(&[
        "--url",
        &srv.url(),
        "--protocol",
        "2025-11-25",
        "tools",
        "list",
    ]);
    assert!(ok(&o).contains("echo"));
    assert!(stderr(&o).contains("(legacy era)") && !stderr(&o).contains("fell back"));
    assert_eq!(calls(&srv, "server/discover"), 0);
    assert!(calls(&srv, "initialize") >= 1);
}

#[test]
fn unreachable_url_is_one_line_naming_the_url() {
    let o = client(&["--url", "http://127.0.0.1:1/mcp", "tools", "list"]);
    let err = failed(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("mcpwire client: cannot reach http://127.0.0.1:1/mcp: "),
        "{err}"
    );
    let bad = client(&["--url", "ftp://127.0.0.1/mcp", "discover"]);
    assert!(failed(&bad).contains("only http:// and https://"));
}

#[test]
fn no_server_or_two_servers_is_an_error() {
    assert!(failed(&client(&["tools", "list"])).contains("no server"));
    let both = client(&[
        "--url",
        "http://127.0.0.1:1/mcp",
        "--stdio",
        "x",
        "discover",
    ]);
    assert!(failed(&both).contains("not both"));
}

#[test]
fn bearer_is_read_from_the_environment_never_from_argv() {
    let srv = server(EraMode::Dual);
    let url = srv.url();
    let literal = client(&["--url", &url, "--bearer", "s3cret", "discover"]);
    assert!(failed(&literal).contains("env:VAR or file:PATH"));
    assert_eq!(srv.server().requests().len(), 0);
    let unset = client(&[
        "--url",
        &url,
        "--bearer",
        "env:MCPWIRE_TEST_UNSET_TOKEN",
        "discover",
    ]);
    failed(&unset);
    let o = client_env(
        &[
            "--url",
            &url,
            "--bearer",
            "env:MCPWIRE_TEST_TOKEN",
            "--header",
            "X-Extra: 1",
            "discover",
        ],
        &[("MCPWIRE_TEST_TOKEN", "tok-123")],
    );
    ok(&o);
    assert!(!stderr(&o).contains("tok-123") && !stdout(&o).contains("tok-123"));
    let reqs = srv.server().requests();
    let first = reqs.first().unwrap();
    let has = |name: &str| {
        first
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    assert!(
        has("authorization") && has("x-extra"),
        "{:?}",
        first.headers
    );
}

#[test]
fn stdio_server_given_with_the_stdio_option() {
    let o = client(&["--stdio", &stdio_server("dual"), "tools", "list"]);
    assert!(ok(&o).contains("tenant"));
    assert!(stderr(&o).contains("using 2026-07-28"), "{}", stderr(&o));
}

#[test]
fn stdio_server_given_after_double_dash() {
    let o = client(&[
        "--yes",
        "tools",
        "call",
        "echo",
        "--arg",
        "text=via stdio",
        "--",
        BIN,
        "dev",
        "mcp-server",
        "--stdio",
    ]);
    assert_eq!(ok(&o), "via stdio\n");
}

#[test]
fn stdio_legacy_server_falls_back_and_says_so() {
    let o = client(&["--stdio", &stdio_server("legacy"), "discover"]);
    assert!(ok(&o).contains("server: mcpwire-dev-mcp-server"));
    assert!(
        stderr(&o).contains("server speaks only 2025-11-25 (legacy era); fell back"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn stdio_server_that_cannot_start_is_named() {
    let o = client(&["--stdio", "/nonexistent/mcp-server --x", "discover"]);
    assert!(failed(&o).contains("/nonexistent/mcp-server"));
}

#[test]
fn resources_on_a_server_without_them_report_the_server_error() {
    let srv = server(EraMode::Dual);
    let o = client(&["--url", &srv.url(), "resources", "list"]);
    let err = failed(&o);
    assert!(last_line(&err).contains("-32601"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// `mcpwire conformance-client URL`: what the official conformance runner starts.

fn conformance_client(url: &str, scenario: &str, context: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["conformance-client", url])
        .stdin(Stdio::null())
        .env("MCP_CONFORMANCE_SCENARIO", scenario)
        .env_remove("MCP_CONFORMANCE_CONTEXT");
    if let Some(c) = context {
        cmd.env("MCP_CONFORMANCE_CONTEXT", c);
    }
    cmd.output().unwrap()
}

/// The runner appends the URL and names the scenario in the environment; the context's
/// `toolCalls` are made as given, in either era, and the exit status says it all went well.
#[test]
fn conformance_client_makes_the_context_tool_calls_in_both_eras() {
    let context =
        r#"{"name":"x","toolCalls":[{"name":"echo","arguments":{"text":"from the runner"}}]}"#;
    for era in [EraMode::Modern, EraMode::Legacy] {
        let srv = server(era);
        let o = conformance_client(&srv.url(), "http-custom-headers", Some(context));
        ok(&o);
        assert_eq!(calls(&srv, "tools/call"), 1, "{era:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("tools/call echo: ok"), "{}", stderr(&o));
    }
}

/// A list-only scenario calls nothing; a context that is not JSON is an error naming the
/// variable; and the subcommand is not offered to people in `--help`.
#[test]
fn conformance_client_lists_only_when_asked_and_is_hidden() {
    let srv = server(EraMode::Dual);
    ok(&conformance_client(
        &srv.url(),
        "json-schema-ref-no-deref",
        None,
    ));
    assert_eq!(calls(&srv, "tools/list"), 1);
    assert_eq!(calls(&srv, "tools/call"), 0);
    let e = failed(&conformance_client(&srv.url(), "tools_call", Some("{nope")));
    assert!(e.contains("MCP_CONFORMANCE_CONTEXT"), "{e}");
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(!String::from_utf8(help.stdout)
        .unwrap()
        .contains("conformance"));
}
