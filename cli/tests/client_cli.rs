//! `mcpwire client` as a person or a script runs it: the binary against the reference server
//! on 127.0.0.1, in-process over Streamable HTTP and as a child (`mcpwire dev mcp-server
//! --stdio`) over stdio. Every run has stdin, stdout and stderr piped (not terminals).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output, Stdio};

use mcpwire_dev::mcp_server::{self, EraMode, McpServer, McpServerHandle};
use serde_json::{json, Value};

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
    // `--protocol auto` is the default, here given literally.
    let o = client(&["--url", &srv.url(), "--protocol", "auto", "tools", "list"]);
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
fn protocol_pin_to_modern_on_a_legacy_server_suggests_auto_detection() {
    let srv = server(EraMode::Legacy);
    let o = client(&[
        "--url",
        &srv.url(),
        "--protocol",
        "2026-07-28",
        "tools",
        "list",
    ]);
    let err = failed(&o);
    let line = last_line(&err);
    assert!(
        line.contains("answered like a 2025-11-25 (legacy) server")
            && line.contains("--protocol auto"),
        "{}",
        stderr(&o)
    );
    assert_eq!(calls(&srv, "initialize"), 0, "no fallback");
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

/// A subscription that never opened (here the era could not be learned: nothing listens) ends
/// the command with one line saying so in words, not the `EndReason` value's debug form.
#[test]
fn a_subscription_that_could_not_be_opened_is_said_in_words() {
    let o = client(&["--url", "http://127.0.0.1:1/mcp", "subscribe", "--tools"]);
    let err = failed(&o);
    let line = last_line(&err);
    assert!(
        line.starts_with("mcpwire client: the subscription could not be opened: "),
        "{err}"
    );
    assert!(!line.contains("NotOpened"), "{err}");
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
// Resources, prompts and subscriptions, against the reference server with
// `resources_and_prompts` (`mcpwire dev mcp-server --resources-and-prompts`).

fn catalog_server() -> McpServerHandle {
    McpServer::start_http(
        mcp_server::Config {
            resources_and_prompts: true,
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap()
}

fn stdio_catalog_server(era: &str) -> String {
    format!("{BIN} dev mcp-server --stdio --era {era} --resources-and-prompts")
}

/// `_meta` of every modern result of the reference server.
fn server_meta() -> Value {
    json!({"io.modelcontextprotocol/serverInfo": {
        "name": mcp_server::SERVER_NAME,
        "version": env!("CARGO_PKG_VERSION")
    }})
}

/// The one JSON line `--json` printed, parsed.
fn one_json_line(out: &str) -> Value {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "one result, one line: {out}");
    serde_json::from_str(lines[0]).unwrap()
}

#[test]
fn resources_list_is_one_table_of_every_page_with_uri_name_and_description() {
    let srv = catalog_server();
    let o = client(&["--url", &srv.url(), "resources", "list"]);
    assert_eq!(
        ok(&o),
        "URI                     NAME / DESCRIPTION\n\
         mcpwire-dev://greeting  greeting: The reference server's greeting.\n\
         mcpwire-dev://motto     motto\n"
    );
    // The second row is the second page's.
    assert_eq!(calls(&srv, "resources/list"), 2);
}

#[test]
fn resources_templates_is_a_table_of_uri_templates() {
    let srv = catalog_server();
    let o = client(&["--url", &srv.url(), "resources", "templates"]);
    assert_eq!(
        ok(&o),
        "URI TEMPLATE                   DESCRIPTION\n\
         mcpwire-dev://greeting/{name}  A greeting for name.\n"
    );
    assert_eq!(calls(&srv, "resources/templates/list"), 1);
}

#[test]
fn prompts_list_is_a_table_of_names_and_descriptions() {
    let srv = catalog_server();
    let o = client(&["--url", &srv.url(), "prompts", "list"]);
    assert_eq!(
        ok(&o),
        "NAME   DESCRIPTION\n\
         greet  Asks for a warm greeting of name, in the style given.\n"
    );
}

#[test]
fn list_commands_with_json_print_each_result_object_exactly_on_one_line() {
    let srv = catalog_server();
    let url = srv.url();
    let listed = |args: &[&str]| {
        let mut all = vec!["--url", url.as_str(), "--json"];
        all.extend_from_slice(args);
        one_json_line(&ok(&client(&all)))
    };
    let page = |member: &str, items: Value| {
        json!({
            member: items,
            "ttlMs": 0,
            "cacheScope": "public",
            "resultType": "complete",
            "_meta": server_meta()
        })
    };
    // Two pages: two result objects, two lines, each as received (the cursor included).
    let out = ok(&client(&["--url", &url, "--json", "resources", "list"]));
    let mut pages: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The cursor is the server's own opaque string: there, and a string, is what is ours.
    let cursor = pages
        .first_mut()
        .and_then(|p| p.as_object_mut())
        .and_then(|p| p.remove("nextCursor"));
    assert!(cursor.as_ref().is_some_and(Value::is_string), "{out}");
    let first = page(
        "resources",
        json!([{
            "uri": "mcpwire-dev://greeting",
            "name": "greeting",
            "description": "The reference server's greeting.",
            "mimeType": "text/plain"
        }]),
    );
    let second = page(
        "resources",
        json!([{"uri": "mcpwire-dev://motto", "name": "motto", "mimeType": "text/plain"}]),
    );
    assert_eq!(pages, [first, second], "{out}");
    assert_eq!(
        listed(&["resources", "templates"]),
        page(
            "resourceTemplates",
            json!([{
                "uriTemplate": "mcpwire-dev://greeting/{name}",
                "name": "personal-greeting",
                "description": "A greeting for name.",
                "mimeType": "text/plain"
            }])
        )
    );
    assert_eq!(
        listed(&["prompts", "list"]),
        page(
            "prompts",
            json!([{
                "name": "greet",
                "title": "Greet someone",
                "description": "Asks for a warm greeting of name, in the style given.",
                "arguments": [
                    {"name": "name", "description": "Who to greet.", "required": true},
                    {"name": "style", "description": "How: warm (the default) or formal."}
                ]
            }])
        )
    );
}

#[test]
fn resources_read_prints_the_text_of_the_resource() {
    let srv = catalog_server();
    let url = srv.url();
    let o = client(&["--url", &url, "resources", "read", mcp_server::GREETING_URI]);
    assert_eq!(ok(&o), format!("{}\n", mcp_server::GREETING_TEXT));
    // An instance of the template, and the URI travels as given.
    let o = client(&[
        "--url",
        &url,
        "resources",
        "read",
        "mcpwire-dev://greeting/Ada",
    ]);
    assert_eq!(ok(&o), "Hello, Ada!\n");
    assert_eq!(calls(&srv, "resources/read"), 2);
}

#[test]
fn resources_read_json_prints_the_exact_result() {
    let srv = catalog_server();
    let o = client(&[
        "resources",
        "read",
        "mcpwire-dev://greeting/Ada",
        "--json",
        "--url",
        &srv.url(),
    ]);
    assert_eq!(
        one_json_line(&ok(&o)),
        json!({
            "contents": [{
                "uri": "mcpwire-dev://greeting/Ada",
                "mimeType": "text/plain",
                "text": "Hello, Ada!"
            }],
            "ttlMs": 0,
            "cacheScope": "public",
            "resultType": "complete",
            "_meta": server_meta()
        })
    );
}

#[test]
fn resources_read_of_an_unknown_uri_reports_the_server_error_and_prints_nothing() {
    let srv = catalog_server();
    let o = client(&[
        "--url",
        &srv.url(),
        "resources",
        "read",
        "mcpwire-dev://nope",
    ]);
    let err = failed(&o);
    assert!(
        last_line(&err).contains("-32602") && last_line(&err).contains("Resource not found"),
        "{err}"
    );
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

#[test]
fn prompts_get_prints_the_description_then_each_message_with_its_role() {
    let srv = catalog_server();
    let o = client(&[
        "--url",
        &srv.url(),
        "prompts",
        "get",
        "greet",
        "--args",
        r#"{"name":"Ada","style":"formal"}"#,
    ]);
    assert_eq!(
        ok(&o),
        "# A formal greeting for Ada\nuser: Please greet Ada in a formal way.\n"
    );
    // --arg adds to (and overrides) --args, as for tools.
    let o = client(&[
        "--url",
        &srv.url(),
        "prompts",
        "get",
        "greet",
        "--args",
        r#"{"name":"Ada","style":"formal"}"#,
        "--arg",
        "style=warm",
    ]);
    assert_eq!(
        ok(&o),
        "# A warm greeting for Ada\nuser: Please greet Ada in a warm way.\n"
    );
}

#[test]
fn prompts_get_json_prints_the_exact_result() {
    let srv = catalog_server();
    let o = client(&[
        "--url",
        &srv.url(),
        "--json",
        "prompts",
        "get",
        "greet",
        "--args",
        r#"{"name":"Ada"}"#,
    ]);
    assert_eq!(
        one_json_line(&ok(&o)),
        json!({
            "description": "A warm greeting for Ada",
            "messages": [{
                "role": "user",
                "content": {"type": "text", "text": "Please greet Ada in a warm way."}
            }],
            "resultType": "complete",
            "_meta": server_meta()
        })
    );
}

#[test]
fn prompts_get_with_bad_arguments_is_refused_before_or_by_the_server() {
    let srv = catalog_server();
    let url = srv.url();
    // Not a JSON object: refused by the CLI, nothing sent.
    let o = client(&["--url", &url, "prompts", "get", "greet", "--args", "[1]"]);
    assert!(last_line(&failed(&o)).contains("--args must be a JSON object"));
    assert_eq!(calls(&srv, "prompts/get"), 0);
    // The required argument missing: the server's error.
    let o = client(&["--url", &url, "prompts", "get", "greet"]);
    let err = failed(&o);
    assert!(
        last_line(&err).contains("-32602") && last_line(&err).contains("argument name"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn prompts_and_resources_over_stdio_in_both_eras() {
    for era in ["modern", "legacy"] {
        let srv = stdio_catalog_server(era);
        let o = client(&[
            "--stdio", &srv, "prompts", "get", "greet", "--arg", "name=Bo",
        ]);
        assert_eq!(
            ok(&o),
            "# A warm greeting for Bo\nuser: Please greet Bo in a warm way.\n",
            "{era}"
        );
        let o = client(&[
            "--stdio",
            &srv,
            "resources",
            "read",
            "mcpwire-dev://greeting/Bo",
        ]);
        assert_eq!(ok(&o), "Hello, Bo!\n", "{era}");
        let o = client(&["--stdio", &srv, "resources", "templates"]);
        assert!(ok(&o).contains("mcpwire-dev://greeting/{name}"), "{era}");
        let want = if era == "legacy" {
            "legacy era"
        } else {
            "modern era"
        };
        assert!(stderr(&o).contains(want), "{era}: {}", stderr(&o));
    }
}

/// `mcpwire client ... subscribe ...` running, its stdout and stderr read line by line.
#[cfg(unix)]
struct Subscriber {
    child: std::process::Child,
    out: std::sync::mpsc::Receiver<String>,
    err: std::sync::mpsc::Receiver<String>,
}

#[cfg(unix)]
impl Subscriber {
    fn start(args: &[&str]) -> Subscriber {
        let mut child = Command::new(BIN)
            .arg("client")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("COLUMNS")
            .spawn()
            .unwrap();
        let out = lines_of(child.stdout.take().unwrap());
        let err = lines_of(child.stderr.take().unwrap());
        Subscriber { child, out, err }
    }

    /// The next stdout line (waiting at most a bounded time).
    fn next_out(&mut self, what: &str) -> String {
        next_line(&self.out, what)
    }

    /// Reads stderr until a line containing `needle` (at most a few lines).
    fn err_until(&mut self, needle: &str) -> String {
        let mut seen = String::new();
        for _ in 0..10 {
            let line = next_line(&self.err, needle);
            if line.contains(needle) {
                return line;
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        panic!("no stderr line with {needle:?}: {seen}");
    }

    /// The exit status, waiting at most 10 s (`after` names what should have ended it).
    fn wait_exit(&mut self, after: &str) -> std::process::ExitStatus {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            if std::time::Instant::now() >= until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running 10 s after {after}");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// SIGINT, then the exit status (bounded wait) and the rest of stdout and stderr.
    fn interrupt(self) -> (std::process::ExitStatus, String, String) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.finish("SIGINT")
    }

    /// The exit status (bounded wait, see [`Subscriber::wait_exit`]) and the rest of stdout
    /// and stderr.
    fn finish(mut self, after: &str) -> (std::process::ExitStatus, String, String) {
        let status = self.wait_exit(after);
        let rest = |rx: &std::sync::mpsc::Receiver<String>| {
            rx.iter().map(|l| format!("{l}\n")).collect::<String>()
        };
        (status, rest(&self.out), rest(&self.err))
    }
}

#[cfg(unix)]
impl Drop for Subscriber {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(unix)]
fn lines_of(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[cfg(unix)]
fn next_line(rx: &std::sync::mpsc::Receiver<String>, what: &str) -> String {
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("waiting for {what}: {e}"))
}

/// Calls the reference server's `touch` tool through a second client; the text it answers
/// ("notified N subscription(s)").
#[cfg(unix)]
fn touch(url: &str, arg: &str) -> String {
    ok(&client(&[
        "--url", url, "--yes", "tools", "call", "touch", "--arg", arg,
    ]))
}

#[cfg(unix)]
#[test]
fn subscribe_prints_each_change_asked_for_until_sigint_then_closes_and_exits_zero() {
    let srv = catalog_server();
    let url = srv.url();
    let mut sub = Subscriber::start(&[
        "--url",
        &url,
        "subscribe",
        "--tools",
        "--resource",
        mcp_server::GREETING_URI,
        "--resource",
        "mcpwire-dev://elsewhere",
    ]);
    // The acknowledgment, on stderr: what is delivered, and what the server dropped.
    assert_eq!(
        sub.err_until("subscribed:"),
        "mcpwire: subscribed: tools list, resource mcpwire-dev://greeting"
    );
    assert_eq!(
        next_line(&sub.err, "the dropped kinds"),
        "mcpwire: the server does not deliver: resource mcpwire-dev://elsewhere"
    );
    assert_eq!(touch(&url, "list=tools"), "notified 1 subscription(s)\n");
    assert_eq!(
        sub.next_out("the tools change"),
        "notifications/tools/list_changed"
    );
    assert_eq!(
        touch(&url, &format!("uri={}", mcp_server::GREETING_URI)),
        "notified 1 subscription(s)\n"
    );
    assert_eq!(
        sub.next_out("the resource update"),
        "notifications/resources/updated mcpwire-dev://greeting"
    );
    // Not asked for: the server sends nothing, and nothing is printed (the next line is the
    // next change asked for).
    assert_eq!(touch(&url, "list=prompts"), "notified 0 subscription(s)\n");
    touch(&url, "list=tools");
    assert_eq!(
        sub.next_out("the second tools change"),
        "notifications/tools/list_changed"
    );
    let (status, out, err) = sub.interrupt();
    assert_eq!(status.code(), Some(0), "stdout: {out}\nstderr: {err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("mcpwire: interrupted; subscription closed"),
        "{err}"
    );
    // The stream is closed: the server drops the subscription (it looks every 50 ms).
    let mut left = String::new();
    for _ in 0..200 {
        left = touch(&url, "list=tools");
        if left == "notified 0 subscription(s)\n" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(left, "notified 0 subscription(s)\n");
    assert_eq!(calls(&srv, "subscriptions/listen"), 1);
}

#[cfg(unix)]
#[test]
fn subscribe_json_prints_the_acknowledgment_and_each_change_as_one_object_per_line() {
    let srv = catalog_server();
    let url = srv.url();
    let mut sub = Subscriber::start(&[
        "--url",
        &url,
        "--json",
        "subscribe",
        "--prompts",
        "--resources",
        "--resource",
        "mcpwire-dev://greeting/Ada",
        "--resource",
        "mcpwire-dev://elsewhere",
    ]);
    let ack: Value = serde_json::from_str(&sub.next_out("the acknowledgment")).unwrap();
    assert_eq!(
        ack,
        json!({
            "event": "acknowledged",
            "accepted": {
                "promptsListChanged": true,
                "resourcesListChanged": true,
                "resourceSubscriptions": ["mcpwire-dev://greeting/Ada"]
            },
            "dropped": {"resourceSubscriptions": ["mcpwire-dev://elsewhere"]}
        })
    );
    let expect = [
        (
            "list=prompts",
            json!({"method": "notifications/prompts/list_changed"}),
        ),
        (
            "list=resources",
            json!({"method": "notifications/resources/list_changed"}),
        ),
        (
            "uri=mcpwire-dev://greeting/Ada",
            json!({"method": "notifications/resources/updated", "uri": "mcpwire-dev://greeting/Ada"}),
        ),
    ];
    for (arg, want) in expect {
        assert_eq!(touch(&url, arg), "notified 1 subscription(s)\n", "{arg}");
        let line = sub.next_out(arg);
        assert_eq!(
            serde_json::from_str::<Value>(&line).unwrap(),
            want,
            "{line}"
        );
    }
    let (status, out, err) = sub.interrupt();
    assert_eq!(status.code(), Some(0), "stdout: {out}\nstderr: {err}");
    assert!(out.is_empty(), "nothing more on stdout: {out}");
}

#[cfg(unix)]
#[test]
fn subscribe_over_stdio_is_acknowledged_and_sigint_ends_it_with_status_zero() {
    let server = stdio_catalog_server("dual");
    let mut sub = Subscriber::start(&["--stdio", &server, "subscribe", "--resources"]);
    assert_eq!(
        sub.err_until("subscribed:"),
        "mcpwire: subscribed: resources list"
    );
    let (status, out, err) = sub.interrupt();
    assert_eq!(status.code(), Some(0), "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("mcpwire: interrupted; subscription closed"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn subscribe_ended_by_the_server_says_so_and_exits_zero() {
    let srv = catalog_server();
    let mut sub = Subscriber::start(&["--url", &srv.url(), "subscribe", "--tools"]);
    sub.err_until("subscribed:");
    assert_eq!(srv.server().end_subscriptions(), 1);
    assert_eq!(
        next_line(&sub.err, "the end"),
        // The server's teardown notice (`notifications/cancelled`, which a server MUST send
        // for a listen it ends), with its reason.
        "mcpwire: the server cancelled the subscription: the server ended the subscription"
    );
    assert_eq!(sub.wait_exit("the server's end").code(), Some(0));
}

#[test]
fn subscribe_on_a_server_without_subscriptions_is_one_readable_line_and_status_one() {
    let o = client(&["--stdio", &stdio_server("dual"), "subscribe", "--tools"]);
    let err = failed(&o);
    assert_eq!(
        last_line(&err),
        "mcpwire client: the server refused the subscription: Method not found: subscriptions/listen (JSON-RPC error -32601)"
    );
    assert!(stdout(&o).is_empty());
}

/// A legacy server without list-changed or subscribe capabilities delivers nothing: the
/// command says so and ends instead of waiting for ever.
#[cfg(unix)]
#[test]
fn subscribe_when_the_server_delivers_none_of_it_fails_instead_of_waiting() {
    // A legacy server whose tools never change and that has no resources: it advertises no
    // listChanged and no subscribe.
    let sub = Subscriber::start(&[
        "--stdio",
        &stdio_server("legacy"),
        "subscribe",
        "--tools",
        "--resource",
        "mcpwire-dev://greeting",
    ]);
    let (status, out, err) = sub.finish("the acknowledgment");
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(
        last_line(&err),
        "mcpwire client: the server delivers none of what was asked (tools list, resource mcpwire-dev://greeting)",
        "{err}"
    );
    assert!(!err.contains("subscribed:"), "{err}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn subscribe_to_nothing_is_refused_and_no_listen_is_sent() {
    let srv = catalog_server();
    let o = client(&["--url", &srv.url(), "subscribe"]);
    assert!(
        last_line(&failed(&o)).contains("subscribe to something: --tools"),
        "{}",
        stderr(&o)
    );
    assert_eq!(calls(&srv, "subscriptions/listen"), 0);
}

/// The README's "The MCP client CLI" transcript is what the binary prints: each command of its
/// first console block runs (by `sh`, with this build's `mcpwire` first on `PATH`, the reference
/// server's address for `127.0.0.1:8931`) and its stdout and stderr together equal the lines
/// shown under it. (The terminal session below it is held by `mod on_a_terminal`.)
#[test]
fn the_readme_cli_transcript_is_what_the_binary_prints() {
    const README: &str = include_str!("../../README.md");
    const SHOWN: &str = "http://127.0.0.1:8931";
    let start = README
        .find("\n## The MCP client CLI\n")
        .expect("the section");
    let section = &README[start..];
    let open = section.find("```console\n").expect("a console block") + "```console\n".len();
    let block = &section[open..];
    let block = &block[..block.find("```").expect("the block's end")];
    let mut runs: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("$ ") {
            Some(cmd) => runs.push((cmd.to_owned(), String::new())),
            None => {
                let (_, out) = runs.last_mut().expect("a command first");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let srv = server(EraMode::Dual);
    let base = format!("http://{}", srv.local_addr());
    let bin_dir = std::path::Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut checked = 0;
    for (cmd, expected) in &runs {
        if cmd.starts_with("mcpwire dev mcp-server --listen") {
            continue; // the test's own server stands in for it
        }
        let line = cmd.replace(SHOWN, &base);
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("{line} 2>&1"))
            .env("PATH", &path)
            .env_remove("COLUMNS")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let got = String::from_utf8(o.stdout).unwrap().replace(&base, SHOWN);
        assert_eq!(&got, expected, "README command: {cmd}");
        checked += 1;
    }
    assert!(checked >= 7, "{checked} commands checked");
}

/// `mcpwire client` on a real pseudo-terminal (rexpect): the consent and elicitation prompts a
/// person answers, against the reference server in-process over HTTP, whose state shows what
/// reached it. In the terminal, stdout and stderr are one stream; typed answers are not echoed.
/// Every wait for output is bounded ([`WAIT_MS`]) so that a prompt that never comes fails the
/// test instead of hanging it.
#[cfg(unix)]
mod on_a_terminal {
    use super::*;
    use mcpwire_dev::mcp_server::{ElicitationAnswer, ELICIT_URL_PATH};
    use rexpect::process::WaitStatus;
    use rexpect::session::{spawn_command, PtySession};
    use serde_json::json;

    /// The longest wait for one expected output (a hang guard, not a timing assertion).
    const WAIT_MS: u64 = 30_000;

    fn spawn(cmd: Command) -> PtySession {
        spawn_command(cmd, Some(WAIT_MS)).unwrap()
    }

    /// `mcpwire client ARGS` with stdin, stdout and stderr on the terminal.
    fn client_on_tty(args: &[&str]) -> PtySession {
        let mut cmd = Command::new(BIN);
        cmd.arg("client").args(args).env_remove("COLUMNS");
        spawn(cmd)
    }

    /// `mcpwire client ARGS` on the terminal, with one stream (`>` or `2>`) sent to `file`.
    fn client_redirected(redirect: &str, file: &std::path::Path, args: &[&str]) -> PtySession {
        let script = format!("exec \"$0\" \"$@\" {redirect}'{}'", file.display());
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .arg(BIN)
            .arg("client")
            .args(args)
            .env_remove("COLUMNS");
        spawn(cmd)
    }

    /// Everything up to the end, and the exit code.
    fn finish(mut p: PtySession) -> (String, Option<i32>) {
        let rest = p.exp_eof().unwrap();
        let code = match p.process().wait().unwrap() {
            WaitStatus::Exited(_, c) => Some(c),
            _ => None,
        };
        (rest, code)
    }

    fn temp_file(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpwire-cli-tty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn answers(srv: &McpServerHandle) -> Vec<ElicitationAnswer> {
        srv.server().stats().elicitation_answers
    }

    fn ask(srv: &McpServerHandle, form: &str) -> PtySession {
        client_on_tty(&[
            "--url",
            &srv.url(),
            "--yes",
            "tools",
            "call",
            "ask",
            "--arg",
            &format!("form={form}"),
        ])
    }

    /// The prompts a transcript line can start with; what follows is the typed answer.
    fn split_prompt(line: &str) -> Option<(&str, &str)> {
        for p in [
            "Call it? [y/N] ",
            "Do you consent to open this URL? [y/N/c=cancel] ",
        ] {
            if let Some(answer) = line.strip_prefix(p) {
                return Some((p, answer));
            }
        }
        // A field prompt, `name> answer`, or `name>` for an empty answer (the transcript has
        // no trailing space).
        let (field, answer) = match line.split_once("> ") {
            Some(split) => split,
            None => (line.strip_suffix('>')?, ""),
        };
        let is_field = !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        is_field.then_some((field, answer))
    }

    /// The README's terminal session (the second console block of "The MCP client CLI") is
    /// what the binary shows on a terminal: each command runs on a pseudo-terminal, gets the
    /// answers typed in the transcript at its prompts, and prints exactly the other lines
    /// (the terminal does not echo the answers here, so they are left out of the comparison).
    #[test]
    fn the_readme_terminal_session_is_what_the_binary_shows() {
        const README: &str = include_str!("../../README.md");
        const SHOWN: &str = "http://127.0.0.1:8931";
        let start = README.find("\n## The MCP client CLI\n").unwrap();
        let section = &README[start..];
        let mut blocks = section.split("```console\n").skip(1);
        let _printed = blocks.next().unwrap();
        let session = blocks.next().unwrap();
        let session = &session[..session.find("```").unwrap()];
        let srv = server(EraMode::Dual);
        let base = format!("http://{}", srv.local_addr());
        let mut commands = 0;
        let mut lines = session.lines().peekable();
        while let Some(line) = lines.next() {
            let cmd = line.strip_prefix("$ mcpwire client ").expect("a command");
            let args = cmd.replace(SHOWN, &base);
            let args: Vec<&str> = args.split(' ').collect();
            let mut p = client_on_tty(&args);
            let mut expected = String::new();
            let mut got = String::new();
            while let Some(next) = lines.next_if(|l| !l.starts_with("$ ")) {
                match split_prompt(next) {
                    Some((prompt, answer)) => {
                        let prompt = if prompt.ends_with(' ') {
                            prompt.to_owned()
                        } else {
                            format!("{prompt}> ")
                        };
                        expected.push_str(&prompt);
                        got.push_str(&p.exp_string(&prompt).unwrap());
                        got.push_str(&prompt);
                        p.send_line(answer).unwrap();
                    }
                    None => {
                        expected.push_str(next);
                        expected.push('\n');
                    }
                }
            }
            let (rest, _) = finish(p);
            got.push_str(&rest);
            let got = got.replace("\r\n", "\n").replace(&base, SHOWN);
            assert_eq!(got, expected, "README command: {line}");
            commands += 1;
        }
        assert!(commands >= 4, "{commands} commands checked");
    }

    #[test]
    fn tools_call_shows_the_full_arguments_and_n_sends_nothing() {
        let srv = server(EraMode::Dual);
        let mut p = client_on_tty(&[
            "--url",
            &srv.url(),
            "tools",
            "call",
            "echo",
            "--args",
            r#"{"text":"launch plan","response_headers":{"X-Note":"a b"}}"#,
        ]);
        let shown = p.exp_string("Call it? [y/N] ").unwrap();
        assert!(
            shown.contains("Call tool 'echo' with these arguments?"),
            "{shown}"
        );
        // The whole arguments, nested ones included.
        assert!(shown.contains(r#""text": "launch plan""#), "{shown}");
        assert!(shown.contains(r#""X-Note": "a b""#), "{shown}");
        p.send_line("n").unwrap();
        let (rest, code) = finish(p);
        assert_eq!(code, Some(1), "{rest}");
        assert!(rest.contains("tool 'echo' not called"), "{rest}");
        assert!(!rest.contains("launch plan"), "no result: {rest}");
        // Nothing at all reached the server: no call, and nothing sent before the answer.
        assert!(srv.server().requests().is_empty());
        assert!(srv.server().stats().tool_calls.is_empty());
    }

    #[test]
    fn tools_call_answered_y_sends_the_call_once() {
        let srv = server(EraMode::Dual);
        let mut p = client_on_tty(&[
            "--url",
            &srv.url(),
            "tools",
            "call",
            "echo",
            "--arg",
            "text=hello there",
        ]);
        p.exp_string("Call it? [y/N] ").unwrap();
        assert!(srv.server().requests().is_empty(), "nothing before consent");
        p.send_line("y").unwrap();
        let (rest, code) = finish(p);
        assert_eq!(code, Some(0), "{rest}");
        assert!(rest.contains("hello there"), "{rest}");
        assert_eq!(srv.server().stats().tool_calls.get("echo"), Some(&1));
    }

    #[test]
    fn a_form_is_asked_field_by_field_with_type_default_and_options_and_bad_answers_are_asked_again(
    ) {
        let srv = server(EraMode::Dual);
        let mut p = ask(&srv, "profile");
        // Fields come in the order the server sent them (its JSON object is sorted).
        let head = p.exp_string("age> ").unwrap();
        assert!(head.contains("Tell us about yourself."), "{head}");
        assert!(
            head.contains("Age [integer from 0 to 150, required, default 30]"),
            "{head}"
        );
        assert!(!head.contains("WARNING"), "an ordinary form: {head}");
        p.send_line("abc").unwrap();
        p.exp_string("expected a whole number").unwrap();
        p.exp_string("age> ").unwrap();
        p.send_line("200").unwrap();
        p.exp_string("above the maximum 150").unwrap();
        p.exp_string("age> ").unwrap();
        p.send_line("").unwrap(); // the default, 30
        let color = p.exp_string("color> ").unwrap();
        assert!(
            color.contains("Favourite colour [one of the options, by number or value, required, default \"green\"]"),
            "{color}"
        );
        for option in ["1. red", "2. green", "3. blue"] {
            assert!(color.contains(option), "{color}");
        }
        p.send_line("purple").unwrap();
        p.exp_string("not one of the offered options").unwrap();
        p.exp_string("color> ").unwrap();
        p.send_line("3").unwrap();
        let height = p.exp_string("height> ").unwrap();
        assert!(
            height.contains("Height in metres [number, at least 0]"),
            "{height}"
        );
        p.send_line("").unwrap(); // optional, no default: left out
        p.exp_string("name> ").unwrap();
        p.send_line("").unwrap();
        p.exp_string("this field is required").unwrap();
        p.exp_string("name> ").unwrap();
        p.send_line("Ada").unwrap();
        let nl = p.exp_string("newsletter> ").unwrap();
        assert!(nl.contains("Newsletter [yes/no, default false]"), "{nl}");
        p.send_line("maybe").unwrap();
        p.exp_string("expected yes or no").unwrap();
        p.exp_string("newsletter> ").unwrap();
        p.send_line("").unwrap();
        let (rest, code) = finish(p);
        assert_eq!(code, Some(0), "{rest}");
        // One answer reached the server: the valid values and the defaults, nothing else.
        assert_eq!(
            answers(&srv),
            [ElicitationAnswer {
                form: "profile".into(),
                action: "accept".into(),
                content: Some(
                    json!({"age": 30, "color": "blue", "name": "Ada", "newsletter": false})
                ),
            }]
        );
        assert_eq!(srv.server().stats().tool_calls.get("ask"), Some(&2));
    }

    #[test]
    fn a_form_declined_on_the_terminal_reaches_the_server_as_decline() {
        let srv = server(EraMode::Dual);
        let mut p = ask(&srv, "profile");
        let head = p.exp_string("age> ").unwrap();
        assert!(head.contains(":decline or :cancel"), "{head}");
        p.send_line(":decline").unwrap();
        let (rest, code) = finish(p);
        assert_eq!(code, Some(0), "{rest}");
        assert!(rest.contains("Declined."), "{rest}");
        let got = answers(&srv);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].action, "decline");
        assert_eq!(got[0].content, None);
    }

    #[test]
    fn a_form_cancelled_on_the_terminal_reaches_the_server_as_cancel() {
        let srv = server(EraMode::Dual);
        let mut p = ask(&srv, "profile");
        p.exp_string("age> ").unwrap();
        p.send_line("31").unwrap();
        p.exp_string("color> ").unwrap();
        p.send_line(":cancel").unwrap();
        let (rest, code) = finish(p);
        assert_eq!(code, Some(0), "{rest}");
        assert!(rest.contains("Cancelled."), "{rest}");
        let got = answers(&srv);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].action, "cancel");
        assert_eq!(got[0].content, None, "the partial answers are not sent");
    }

    #[test]
    fn a_form_asking_for_a_password_carries_a_visible_warning() {
        let srv = server(EraMode::Dual);
        let mut p = ask(&srv, "login");
        let head = p.exp_string("password> ").unwrap();
        assert!(
            head.contains("WARNING: this form seems to ask for a password (field 'password')"),
            "{head}"
        );
        // The warning comes before the first question.
        let warning_at = head.find("WARNING").unwrap();
        assert!(warning_at < head.find("Password [").unwrap(), "{head}");
        p.send_line(":decline").unwrap();
        let (rest, _) = finish(p);
        assert!(rest.contains("Declined."), "{rest}");
    }

    #[test]
    fn a_form_whose_message_asks_for_an_api_key_a_token_or_card_data_carries_a_warning() {
        let srv = server(EraMode::Dual);
        for (question, what) in [
            ("Paste your API key", "an API key"),
            ("Your GitHub token, please", "a token"),
            ("Enter your credit card number", "payment data"),
        ] {
            let mut p = client_on_tty(&[
                "--url",
                &srv.url(),
                "--yes",
                "tools",
                "call",
                "ask",
                "--arg",
                &format!("question={question}"),
            ]);
            let head = p.exp_string("name> ").unwrap();
            assert!(
                head.contains(&format!("WARNING: this form seems to ask for {what}.")),
                "{question}: {head}"
            );
            p.send_line(":decline").unwrap();
            let (rest, _) = finish(p);
            assert!(rest.contains("No name given."), "{rest}");
        }
        assert!(answers(&srv).iter().all(|a| a.action == "decline"));
    }

    #[test]
    fn url_mode_shows_the_full_url_asks_for_consent_and_never_fetches_it() {
        let srv = server(EraMode::Dual);
        let url = format!("http://{}{ELICIT_URL_PATH}?session=demo", srv.local_addr());
        let mut p = ask(&srv, "url");
        let shown = p
            .exp_string("Do you consent to open this URL? [y/N/c=cancel] ")
            .unwrap();
        assert!(shown.contains(&format!("URL:  {url}")), "{shown}");
        assert!(shown.contains("host: 127.0.0.1"), "{shown}");
        assert!(shown.contains("WARNING: the URL is not https"), "{shown}");
        assert!(shown.contains("never opens or fetches it"), "{shown}");
        p.send_line("y").unwrap();
        let (rest, code) = finish(p);
        assert_eq!(code, Some(0), "{rest}");
        assert!(rest.contains("Consent recorded"), "{rest}");
        let got = answers(&srv);
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].form.as_str(), got[0].action.as_str()),
            ("url", "accept")
        );
        // Consent sent, the page never fetched by the client...
        assert_eq!(srv.server().stats().elicit_url_fetches, 0);
        // ...while a fetch of it would have been counted.
        let body = ureq::get(&url)
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap();
        assert!(body.contains("consent page"));
        assert_eq!(srv.server().stats().elicit_url_fetches, 1);
    }

    #[test]
    fn url_mode_answered_no_is_a_decline() {
        let srv = server(EraMode::Dual);
        let mut p = ask(&srv, "url");
        p.exp_string("[y/N/c=cancel] ").unwrap();
        p.send_line("n").unwrap();
        let (rest, _) = finish(p);
        assert!(rest.contains("Declined."), "{rest}");
        assert_eq!(answers(&srv)[0].action, "decline");
        assert_eq!(srv.server().stats().elicit_url_fetches, 0);
    }

    #[test]
    fn progress_line_is_shown_on_a_terminal_and_ends_before_the_next_line() {
        let srv = server(EraMode::Dual);
        let p = client_on_tty(&[
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
        let (out, code) = finish(p);
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("progress: 3/3 (100%) step 3 of 3"), "{out:?}");
        assert!(out.contains("done after 3 steps"), "{out:?}");
        // The line is erased before anything else is written (no "step 3 of 3mcpwire: ...").
        let after = &out[out.find("step 3 of 3").unwrap() + "step 3 of 3".len()..];
        assert!(after.starts_with("\r\u{1b}[2K"), "{after:?}");
    }

    #[test]
    fn progress_is_quiet_when_stdout_is_not_a_terminal() {
        let srv = server(EraMode::Dual);
        let file = temp_file("progress-stdout.txt");
        let p = client_redirected(
            ">",
            &file,
            &[
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
            ],
        );
        let (term, code) = finish(p);
        assert_eq!(code, Some(0), "{term}");
        assert!(!term.contains("progress:"), "{term:?}");
        assert!(
            term.contains("using 2026-07-28"),
            "stderr is still here: {term:?}"
        );
        let out = std::fs::read_to_string(&file).unwrap();
        assert_eq!(out, "done after 3 steps\n");
    }

    #[test]
    fn tools_call_without_yes_and_stderr_not_a_terminal_is_refused_not_left_waiting() {
        let srv = server(EraMode::Dual);
        let file = temp_file("confirm-stderr.txt");
        let p = client_redirected(
            "2>",
            &file,
            &[
                "--url",
                &srv.url(),
                "tools",
                "call",
                "echo",
                "--arg",
                "text=x",
            ],
        );
        // Nobody could see the question: the command ends at once instead of waiting.
        let (term, code) = finish(p);
        assert_eq!(code, Some(1), "{term}");
        let err = std::fs::read_to_string(&file).unwrap();
        assert!(
            err.contains("stderr is not a terminal") && err.contains("--yes"),
            "{err}"
        );
        assert!(srv.server().requests().is_empty());
    }
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
