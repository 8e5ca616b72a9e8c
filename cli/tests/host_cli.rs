//! `mcpwire host` as people and scripts run it, off a terminal: the config file's problems
//! reported at their line and column while the other servers load, the catalog's
//! collision-free names, calls through the consent policy (asks refused without `--yes`,
//! deny rules never passed), local commands that need approval, and finding the user's own
//! config file. The pseudo-terminal prompts are in the repository's tests/host_peers.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use mcpwire_dev::mcp_server::{self, McpServer, McpServerHandle};
use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcpwire")
}

fn server() -> McpServerHandle {
    McpServer::start_http(mcp_server::Config::default(), "127.0.0.1:0").unwrap()
}

fn calls(srv: &McpServerHandle, tool: &str) -> u64 {
    srv.server()
        .stats()
        .tool_calls
        .get(tool)
        .copied()
        .unwrap_or(0)
}

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d =
            std::env::temp_dir().join(format!("mcpwire-host-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `mcpwire host` with HOME and the state directory inside `dir` (nothing of the user's is
/// read or written), stdin not a terminal.
fn host(dir: &Dir, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("host")
        .args(["--state-dir", dir.0.join("state").to_str().unwrap()])
        .args(["--connect-timeout", "5s"])
        .args(args)
        .current_dir(&dir.0)
        .env("HOME", &dir.0)
        .env("XDG_DATA_HOME", dir.0.join("data"))
        .env("XDG_CONFIG_HOME", dir.0.join("config"))
        .env_remove("XDG_STATE_HOME")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(o)
        )
    })
}

/// `mcpwire host --config CFG --yes shell` with its stdin piped (HOME and the state
/// directory inside `dir`); its output captured when `capture`, else dropped.
fn shell(dir: &Dir, cfg: &str, capture: bool) -> std::process::Child {
    let out = || {
        if capture {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        }
    };
    Command::new(bin())
        .args(["host", "--config", cfg, "--yes", "shell"])
        .args(["--state-dir", dir.0.join("state").to_str().unwrap()])
        .env("HOME", &dir.0)
        .env("XDG_DATA_HOME", dir.0.join("data"))
        .stdin(std::process::Stdio::piped())
        .stdout(out())
        .stderr(out())
        .spawn()
        .unwrap()
}

fn config(dir: &Dir, text: &str) -> String {
    dir.write("mcp.json", text).display().to_string()
}

#[test]
fn a_malformed_entry_is_reported_at_its_line_and_column_and_the_others_load() {
    let a = server();
    let dir = Dir::new("malformed");
    let cfg = config(
        &dir,
        &format!(
            r#"{{
  // JSONC: comments and trailing commas
  "mcpServers": {{
    "web": {{ "url": "{}" }},
    "bad": {{ "command": "x", "args": 5 }},
    "old": {{ "type": "sse", "url": "http://127.0.0.1:9/sse" }},
    "missing": {{ "url": "${{MCPWIRE_TEST_UNSET_VAR}}/mcp" }},
  }},
}}"#,
            a.url()
        ),
    );
    let o = host(&dir, &["--config", &cfg, "--json", "servers"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{cfg}:5:38: server \"bad\"")),
        "{err}"
    );
    assert!(err.contains("`args` must be an array"), "{err}");
    assert!(
        err.contains(&format!("{cfg}:6:")) && err.contains("sse") && err.contains("not support"),
        "{err}"
    );
    assert!(err.contains("MCPWIRE_TEST_UNSET_VAR"), "{err}");
    let servers = stdout_json(&o)["servers"].clone();
    let ids: Vec<&str> = servers
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["web"]);
    assert_eq!(servers[0]["state"], "ready");
    assert_eq!(servers[0]["era"], "2026-07-28");
    assert_eq!(servers[0]["trust"], "untrusted");
}

#[test]
fn two_servers_with_the_same_tools_get_distinct_names_that_route_back() {
    let (a, b) = (server(), server());
    let dir = Dir::new("collide");
    let cfg = config(
        &dir,
        &format!(
            r#"{{"mcpServers": {{"alpha": {{"url": "{}"}}, "beta": {{"url": "{}", "trust": "trusted"}}}}}}"#,
            a.url(),
            b.url()
        ),
    );
    let o = host(&dir, &["--config", &cfg, "--json", "search", "echo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let hits = stdout_json(&o)["results"].clone();
    let names: Vec<(&str, &str)> = hits
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["tool"] == "echo")
        .map(|h| (h["name"].as_str().unwrap(), h["server"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("alpha__echo", "alpha"), ("beta__echo", "beta")]);

    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "--yes",
            "call",
            "beta__echo",
            "--args",
            r#"{"text":"to beta"}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "to beta");
    assert_eq!((calls(&a, "echo"), calls(&b, "echo")), (0, 1));

    let o = host(&dir, &["--config", &cfg, "--json", "tools"]);
    let tools = stdout_json(&o);
    assert_eq!(tools["presentation"], "all tools");
    assert_eq!(tools["servers"][0]["id"], "alpha");
    assert_eq!(tools["servers"][1]["id"], "beta");
}

#[test]
fn an_ask_off_a_terminal_is_refused_naming_yes_and_nothing_is_called() {
    let a = server();
    let dir = Dir::new("ask");
    let cfg = config(
        &dir,
        &format!(r#"{{"mcpServers": {{"web": {{"url": "{}"}}}}}}"#, a.url()),
    );
    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "call",
            "web__echo",
            "--args",
            r#"{"text":"x"}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("needs approval") && err.contains("--yes"),
        "{err}"
    );
    assert!(err.contains("web is not trusted"), "{err}");
    assert_eq!(calls(&a, "echo"), 0);
}

#[test]
fn a_deny_rule_is_never_passed_even_with_yes() {
    let a = server();
    let dir = Dir::new("deny");
    let cfg = config(
        &dir,
        &format!(
            r#"{{"mcpServers": {{"web": {{"url": "{}", "trust": "trusted"}}}},
                "permissions": {{"allow": ["mcp__web"], "deny": ["mcp__web__echo"]}}}}"#,
            a.url()
        ),
    );
    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "--yes",
            "call",
            "web__echo",
            "--args",
            r#"{"text":"x"}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("denied: deny: the deny rule mcp__web__echo"),
        "{}",
        stderr(&o)
    );
    assert_eq!(calls(&a, "echo"), 0);

    // A bad rule stops the command rather than being dropped.
    let cfg = config(
        &dir,
        r#"{"mcpServers": {}, "permissions": {"deny": ["mcp__"]}}"#,
    );
    let o = host(&dir, &["--config", &cfg, "servers"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("permissions"), "{}", stderr(&o));
}

#[test]
fn a_local_command_runs_only_once_approved() {
    let dir = Dir::new("command");
    let cfg = config(
        &dir,
        &format!(
            r#"{{"mcpServers": {{"local": {{"command": "{}", "args": ["dev", "mcp-server", "--stdio"], "env": {{"SECRET_TOKEN": "s3cr3t-value"}}}}}}}}"#,
            bin()
        ),
    );
    let o = host(&dir, &["--config", &cfg, "--json", "servers"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("not approved") && err.contains("dev mcp-server --stdio"),
        "{err}"
    );
    assert!(!err.contains("s3cr3t-value"), "{err}");
    assert_eq!(stdout_json(&o)["servers"][0]["state"], "not approved");

    // --yes answers calls, not commands.
    let o = host(&dir, &["--config", &cfg, "--yes", "--json", "servers"]);
    assert_eq!(
        stdout_json(&o)["servers"][0]["state"],
        "not approved",
        "{}",
        stderr(&o)
    );
    // --approve-commands approves it for this run only, showing it in full: nothing is
    // remembered.
    let o = host(
        &dir,
        &["--config", &cfg, "--approve-commands", "--json", "servers"],
    );
    assert_eq!(
        stdout_json(&o)["servers"][0]["state"],
        "ready",
        "{}",
        stderr(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains("SECRET_TOKEN") && err.contains("runs a program on this machine"),
        "{err}"
    );
    assert!(!err.contains("s3cr3t-value"), "{err}");
    assert!(!dir.0.join("state/command-approvals.json").exists());
    let o = host(&dir, &["--config", &cfg, "--json", "servers"]);
    assert_eq!(stdout_json(&o)["servers"][0]["state"], "not approved");
}

#[test]
fn without_config_the_users_own_file_is_found_and_named() {
    let a = server();
    let dir = Dir::new("found");
    // Claude Code's ~/.claude.json comes first, but without servers it does not hide the rest.
    dir.write(".claude.json", r#"{"numStartups": 3}"#);
    let path = dir.write(
        ".cursor/mcp.json",
        &format!(r#"{{"mcpServers": {{"web": {{"url": "{}"}}}}}}"#, a.url()),
    );
    // The working directory is `dir` (its own project files would come first): move into a
    // folder without any.
    std::fs::create_dir_all(dir.0.join("work")).unwrap();
    let o = Command::new(bin())
        .args(["host", "--json", "servers"])
        .args(["--state-dir", dir.0.join("state").to_str().unwrap()])
        .current_dir(dir.0.join("work"))
        .env("HOME", &dir.0)
        .env("XDG_CONFIG_HOME", dir.0.join("config"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("reading {} (Cursor user config)", path.display())),
        "{err}"
    );
    assert_eq!(stdout_json(&o)["servers"][0]["id"], "web");

    let empty = Dir::new("none");
    let o = Command::new(bin())
        .args(["host", "servers"])
        .current_dir(&empty.0)
        .env("HOME", &empty.0)
        .env("XDG_CONFIG_HOME", empty.0.join("config"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("none found") && stderr(&o).contains("--config"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_threshold_is_checked_and_progressive_discovery_gives_the_fixed_meta_tools() {
    let a = server();
    let dir = Dir::new("threshold");
    let cfg = config(
        &dir,
        &format!(r#"{{"mcpServers": {{"web": {{"url": "{}"}}}}}}"#, a.url()),
    );
    let o = host(&dir, &["--config", &cfg, "--threshold", "7", "tools"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains('7'), "{}", stderr(&o));

    // A small window: the definitions are over 1% of it.
    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "--context-window",
            "10000",
            "--threshold",
            "1",
            "--pin",
            "web__echo",
            "tools",
            "--for",
            "anthropic",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let tools = stdout_json(&o);
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["search_tools", "call_tool", "web__echo"]);
}

#[test]
fn the_meta_tools_search_and_call_through_the_same_policy() {
    let a = server();
    let dir = Dir::new("meta");
    let cfg = config(
        &dir,
        &format!(r#"{{"mcpServers": {{"web": {{"url": "{}"}}}}}}"#, a.url()),
    );
    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "call",
            "search_tools",
            "--args",
            r#"{"query":"echo","limit":1}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["tools"][0]["name"], "web__echo");
    // call_tool is the same call: it asks (refused off a terminal), then with --yes runs.
    let args = r#"{"name":"web__echo","arguments":{"text":"via call_tool"}}"#;
    let o = host(
        &dir,
        &["--config", &cfg, "call", "call_tool", "--args", args],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(calls(&a, "echo"), 0);
    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "--yes",
            "call",
            "call_tool",
            "--args",
            args,
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "via call_tool",
        "{}",
        stderr(&o)
    );
    assert_eq!(calls(&a, "echo"), 1);
    // Bad meta-tool arguments get a message written for the model.
    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "call",
            "search_tools",
            "--args",
            r#"{"limit":1}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("query"), "{}", stderr(&o));
}

/// The catalog is the host's memo of the definitions: commands in a session do not list a
/// server's tools again until it announces `list_changed`; then the next command does.
#[test]
fn the_catalog_is_listed_once_and_again_after_list_changed() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let a = McpServer::start_http(
        mcp_server::Config {
            resources_and_prompts: true,
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap();
    let lists = || {
        a.server()
            .requests()
            .iter()
            .filter(|r| r.method.as_deref() == Some("tools/list"))
            .count()
    };
    let dir = Dir::new("changed");
    let cfg = config(
        &dir,
        &format!(r#"{{"mcpServers": {{"web": {{"url": "{}"}}}}}}"#, a.url()),
    );
    let mut child = shell(&dir, &cfg, false);
    let mut stdin = child.stdin.take().unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    // Once the session is up (the first command runs after connecting and the first
    // listing), commands do not list again. (This server's answers carry `ttlMs: 0`: the
    // client's cache cannot keep them, so the host's catalog is the only memo.)
    let echoes = || {
        a.server()
            .stats()
            .tool_calls
            .get("echo")
            .copied()
            .unwrap_or(0)
    };
    writeln!(stdin, "call web__echo {{\"text\":\"x\"}}").unwrap();
    while echoes() == 0 {
        assert!(Instant::now() < until, "the echo call never came");
        std::thread::sleep(Duration::from_millis(50));
    }
    let after_start = lists();
    for _ in 0..3 {
        writeln!(stdin, "tools web").unwrap();
        writeln!(stdin, "search echo").unwrap();
    }
    writeln!(stdin, "call web__echo {{\"text\":\"y\"}}").unwrap();
    while echoes() < 2 {
        assert!(Instant::now() < until, "the second echo call never came");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        lists(),
        after_start,
        "the tools were listed again with nothing changed"
    );
    // `touch` announces a change on the host's subscription (which may still be opening:
    // touch until the next command lists again).
    while lists() == after_start {
        assert!(
            Instant::now() < until,
            "the change never reached the catalog"
        );
        writeln!(stdin, "call web__touch {{\"list\":\"tools\"}}").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        writeln!(stdin, "tools web").unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    writeln!(stdin, "quit").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
}

/// A project's own file, found without --config (what a cloned repository brings), cannot
/// trust its servers nor allow their calls; it can still ask more and deny.
#[test]
fn a_projects_own_file_cannot_raise_trust_or_allow_calls() {
    let a = server();
    let dir = Dir::new("project");
    dir.write(
        ".mcp.json",
        &format!(
            r#"{{"mcpServers": {{"web": {{"url": "{}", "trust": "trusted"}}}},
                "permissions": {{"allow": ["mcp__web__echo"], "deny": ["mcp__web__fail"]}}}}"#,
            a.url()
        ),
    );
    let o = host(&dir, &["--json", "servers"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("(Claude Code project config)"), "{err}");
    assert!(
        err.contains("`trust` is ignored") && err.contains("`permissions.allow`"),
        "{err}"
    );
    assert_eq!(stdout_json(&o)["servers"][0]["trust"], "untrusted");
    let o = host(&dir, &["call", "web__echo", "--args", r#"{"text":"x"}"#]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "the allow rule was used: {}",
        stderr(&o)
    );
    let o = host(&dir, &["--yes", "call", "web__fail"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("denied"), "{}", stderr(&o));
    assert_eq!(calls(&a, "echo") + calls(&a, "fail"), 0);
    // Named with --config, the file is the user's choice: its trust and rules count.
    let o = host(&dir, &["--config", ".mcp.json", "--json", "servers"]);
    assert_eq!(
        stdout_json(&o)["servers"][0]["trust"],
        "trusted",
        "{}",
        stderr(&o)
    );
}

/// A server's elicitation in a session: the prompt says which server asks, warns about a
/// form that asks for a password, and the answer is checked against the schema before it is
/// sent (an empty required field is asked again).
#[test]
fn an_elicitation_names_the_server_warns_about_secrets_and_is_validated() {
    use std::io::Write;
    let a = server();
    let dir = Dir::new("elicit");
    let cfg = config(
        &dir,
        &format!(r#"{{"mcpServers": {{"web": {{"url": "{}"}}}}}}"#, a.url()),
    );
    let mut child = shell(&dir, &cfg, true);
    let mut stdin = child.stdin.take().unwrap();
    // The login form asks its fields in name order: an empty password (required: asked
    // again), a password, then the username.
    writeln!(stdin, "call web__ask {{\"form\":\"login\"}}").unwrap();
    writeln!(stdin).unwrap();
    writeln!(stdin, "hunter2-pass").unwrap();
    writeln!(stdin, "ada").unwrap();
    writeln!(stdin, "quit").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("The server web asks you for information"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("password"), "{err}");
    assert!(
        err.contains("WARNING") || err.contains("warning"),
        "no sensitive-field warning:\n{err}"
    );
    let answers = a.server().stats().elicitation_answers;
    assert_eq!(answers.len(), 1, "{answers:?}\n{err}");
    assert_eq!(answers[0].action, "accept");
    let content = answers[0].content.clone().unwrap_or_default();
    assert_eq!(content["username"], "ada");
    assert_eq!(
        content["password"], "hunter2-pass",
        "the empty answer was sent:\n{err}"
    );
}

/// A `billing` rule (mcpwire's addition to `permissions`) makes a tool's calls ask, even for a
/// trusted server with a server-wide allow rule.
#[test]
fn a_billing_rule_makes_calls_ask() {
    let a = server();
    let dir = Dir::new("billing");
    let cfg = config(
        &dir,
        &format!(
            r#"{{"mcpServers": {{"web": {{"url": "{}", "trust": "trusted"}}}},
                "permissions": {{"allow": ["mcp__web"], "billing": ["mcp__web__echo"]}}}}"#,
            a.url()
        ),
    );
    let o = host(
        &dir,
        &[
            "--config",
            &cfg,
            "call",
            "web__echo",
            "--args",
            r#"{"text":"x"}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("billing"), "{}", stderr(&o));
    assert_eq!(calls(&a, "echo"), 0);
}

/// A listing's positive `ttlMs` bounds the memo: once it ran out, the next command lists
/// again (a lost `list_changed` is caught that way); before, nothing is asked.
#[test]
fn the_catalog_is_listed_again_once_its_ttl_ran_out() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let a = McpServer::start_http(
        mcp_server::Config {
            tools_list_ttl_ms: Some(700),
            ..mcp_server::Config::default()
        },
        "127.0.0.1:0",
    )
    .unwrap();
    let lists = || {
        a.server()
            .requests()
            .iter()
            .filter(|r| r.method.as_deref() == Some("tools/list"))
            .count()
    };
    let echoes = || {
        a.server()
            .stats()
            .tool_calls
            .get("echo")
            .copied()
            .unwrap_or(0)
    };
    let dir = Dir::new("ttl");
    let cfg = config(
        &dir,
        &format!(r#"{{"mcpServers": {{"web": {{"url": "{}"}}}}}}"#, a.url()),
    );
    let mut child = shell(&dir, &cfg, false);
    let mut stdin = child.stdin.take().unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    let call_and_wait = |stdin: &mut std::process::ChildStdin, n: u64| {
        writeln!(stdin, "tools web").unwrap();
        writeln!(stdin, "call web__echo {{\"text\":\"x\"}}").unwrap();
        while echoes() < n {
            assert!(Instant::now() < until, "echo call {n} never came");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    call_and_wait(&mut stdin, 1);
    let first = lists();
    assert_eq!(first, 1, "connecting and the catalog share one listing");
    std::thread::sleep(Duration::from_millis(900));
    call_and_wait(&mut stdin, 2);
    assert_eq!(
        lists(),
        first + 1,
        "the TTL ran out: the catalog lists again"
    );
    writeln!(stdin, "quit").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
