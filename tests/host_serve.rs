//! `mcpwire host serve` end to end, with real clients we did not write as the downstream (the
//! Python MCP SDK's `Client`, `mcp==2.3.0`, and the TypeScript SDK v2 `Client`,
//! `@modelcontextprotocol/client@2.4.0`, each in both eras) and two real upstream servers on
//! stdio (the Python SDK peer `py` and the TypeScript SDK peer `ts`): listing under the exposed
//! names, the search, calls through a prefix and through `call_tool`, consent by elicitation
//! accepted and declined, a client without elicitation refused with the rule to add, and an
//! upstream killed mid-session (its tools answer that it is unavailable, the other server's
//! keep working, it comes back by itself).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/downstream.rs"]
mod downstream;
#[path = "support/node_peers.rs"]
mod node_peers;
mod support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use downstream::*;
use serde_json::{json, Value};

/// A config with the two upstreams, in a directory of its own (the gateway's state too).
struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    /// `py` untrusted (every call asks), `ts` trusted with `echo` allowed; `py`'s command
    /// goes through `sh` so the test knows its pid.
    fn new(tag: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("mcpwire-host-serve-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let py = py_peer();
        let ts = ts_peer();
        let script =
            "echo $$ > \"$0/py.pid\"; echo started >> \"$0/py.starts\"; shift; exec \"$@\"";
        let mut py_args = vec![
            "-c".to_owned(),
            script.to_owned(),
            dir.display().to_string(),
            "--".to_owned(),
        ];
        py_args.extend(py);
        let config = json!({
            "mcpServers": {
                "py": {"command": "sh", "args": py_args},
                "ts": {"command": ts[0], "args": ts[1..], "trust": "trusted"},
            },
            "permissions": {"allow": ["mcp__ts__echo"]},
        });
        std::fs::write(dir.join("mcp.json"), config.to_string()).unwrap();
        Fixture { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.join("mcp.json")
    }

    /// The gateway's command line (its stderr, the log for a person, appended to
    /// `gateway.log`).
    fn gateway(&self, extra: &[&str]) -> Vec<String> {
        let mut cmd = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "log=$1; shift; exec \"$@\" 2>>\"$log\"".to_owned(),
            "sh".to_owned(),
            self.dir.join("gateway.log").display().to_string(),
            env!("CARGO_BIN_EXE_mcpwire").to_owned(),
            "host".into(),
            "serve".into(),
            "--config".into(),
            self.config().display().to_string(),
            "--approve-commands".into(),
            "--state-dir".into(),
            self.dir.join("state").display().to_string(),
        ];
        cmd.extend(extra.iter().map(|s| (*s).to_owned()));
        cmd
    }

    fn py_starts(&self) -> usize {
        std::fs::read_to_string(self.dir.join("py.starts"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// How many lines of the gateway's log contain `what`.
    fn logged(&self, what: &str) -> usize {
        std::fs::read_to_string(self.dir.join("gateway.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(what))
            .count()
    }

    /// Waits (bounded) until the log has `count` lines with `what`.
    fn wait_logged(&self, what: &str, count: usize, at: &str) {
        let until = Instant::now() + RUN_TIMEOUT;
        while self.logged(what) < count {
            assert!(
                Instant::now() < until,
                "{at}: the gateway never logged {what:?} {count} times"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill_py(&self) {
        let pid = std::fs::read_to_string(self.dir.join("py.pid")).unwrap();
        let status = Command::new("kill")
            .args(["-9", pid.trim()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn steps_of(lines: &[Value], op: &str) -> Vec<Value> {
    lines.iter().filter(|l| l["op"] == op).cloned().collect()
}

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn each_client_lists_searches_and_calls_through_the_gateway_with_consent_by_elicitation() {
    let fx = Fixture::new("list");
    let gateway = fx.gateway(&[]);
    for client in CLIENTS {
        let at = format!("{client:?}");
        let lines = run(
            client,
            &gateway,
            // The calls first: a call to a server still starting waits for it, so the listing
            // after them has both servers whatever the machine's speed (a listing before
            // would have what is ready, the rest following with list_changed).
            json!([
                {"op": "call", "name": "ts__echo", "arguments": {"text": "to ts"}},
                {"op": "call", "name": "py__echo", "arguments": {"text": "to py"}},
                {"op": "call", "name": "call_tool", "arguments": {"name": "py__echo", "arguments": {"text": "via call_tool"}}},
                {"op": "list_tools"},
                {"op": "search", "query": "echo", "limit": 5},
            ]),
            "accept",
            json!({}),
        );
        assert_eq!(lines[0]["op"], "connect", "{at}");
        assert_eq!(
            lines[0]["protocol_version"],
            expected_version(client),
            "{at}"
        );
        assert_eq!(lines[0]["server"]["name"], "mcpwire-host", "{at}");

        // Every upstream tool under its server's prefix, nothing unprefixed.
        let listed = names(&lines[4]);
        for want in ["py__echo", "py__confirm_action", "ts__echo"] {
            assert!(listed.contains(&want.to_owned()), "{at}: {listed:?}");
        }
        assert!(
            listed
                .iter()
                .all(|n| n.starts_with("py__") || n.starts_with("ts__")),
            "{at}: {listed:?}"
        );

        // The search gives definitions of both servers' echo.
        let found = lines[5]["result"]["structuredContent"]["tools"].clone();
        let found: Vec<&str> = found
            .as_array()
            .unwrap_or_else(|| panic!("{at}: {}", lines[5]))
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(
            found.contains(&"py__echo") && found.contains(&"ts__echo"),
            "{at}: {found:?}"
        );

        // ts__echo is allowed by the config: no form.
        let to_ts = &lines[1];
        assert_eq!(to_ts["elicitations"], json!([]), "{at}: {to_ts}");
        assert!(text(&to_ts["result"]).contains("to ts"), "{at}: {to_ts}");
        // py is untrusted: the form names the server, the tool and the exact arguments.
        for (line, arg) in [(&lines[2], "to py"), (&lines[3], "via call_tool")] {
            let forms = line["elicitations"].as_array().unwrap();
            assert_eq!(forms.len(), 1, "{at}: {line}");
            let message = forms[0]["message"].as_str().unwrap();
            assert!(message.contains("Server: py"), "{at}: {message}");
            assert!(message.contains("Tool: echo"), "{at}: {message}");
            assert!(
                message.contains(&format!("\"text\": \"{arg}\"")),
                "{at}: {message}"
            );
            assert_eq!(line["result"]["isError"], false, "{at}: {line}");
            assert!(text(&line["result"]).contains(arg), "{at}: {line}");
            // What the upstream said of itself stays upstream.
            let info = &line["result"]["_meta"]["io.modelcontextprotocol/serverInfo"];
            assert!(
                info.is_null() || info["name"] == "mcpwire-host",
                "{at}: {line}"
            );
        }
    }
}

#[test]
fn a_declined_form_sends_nothing_and_a_client_that_cannot_ask_gets_the_rule_to_add() {
    let fx = Fixture::new("consent");
    let gateway = fx.gateway(&[]);
    for client in CLIENTS {
        let at = format!("{client:?}");
        let call = json!([{"op": "call", "name": "py__echo", "arguments": {"text": "no"}}]);
        let declined = run(client, &gateway, call.clone(), "decline", json!({}));
        let result = &steps_of(&declined, "call")[0]["result"];
        assert_eq!(result["isError"], true, "{at}: {result}");
        assert!(text(result).contains("declined"), "{at}: {result}");

        let refused = run(client, &gateway, call, "none", json!({}));
        let step = &steps_of(&refused, "call")[0];
        assert_eq!(step["elicitations"], json!([]), "{at}: {step}");
        let result = &step["result"];
        assert_eq!(result["isError"], true, "{at}: {result}");
        let t = text(result);
        assert!(t.contains("cannot ask"), "{at}: {t}");
        assert!(t.contains("mcp__py__echo"), "{at}: {t}");
        assert!(t.contains("permissions.allow"), "{at}: {t}");
        assert!(
            t.contains(&fx.config().display().to_string()),
            "{at}: names the file: {t}"
        );
    }
    // None of the refused calls reached py: its own count says so (the accepted call in the
    // other test is another fixture).
    let stats = run(
        Downstream::Python("auto"),
        &fx.gateway(&[]),
        json!([{"op": "call", "name": "py__stats"}]),
        "accept",
        json!({}),
    );
    let stats: Value = serde_json::from_str(&text(&steps_of(&stats, "call")[0]["result"])).unwrap();
    let echo_calls = stats["tool_calls"]["echo"].as_u64().unwrap_or(0);
    assert_eq!(echo_calls, 0, "{stats}");
}

#[test]
fn above_the_threshold_only_the_meta_tools_are_listed_and_call_tool_reaches_every_tool() {
    let fx = Fixture::new("progressive");
    // A context window so small that any definition is over the threshold.
    let gateway = fx.gateway(&["--context-window", "1000", "--threshold", "1"]);
    let lines = run(
        Downstream::Python("auto"),
        &gateway,
        json!([
            {"op": "call", "name": "call_tool", "arguments": {"name": "ts__echo", "arguments": {"text": "found"}}},
            {"op": "list_tools"},
            {"op": "search", "query": "echo", "limit": 3},
        ]),
        "accept",
        json!({}),
    );
    assert!(text(&lines[1]["result"]).contains("found"), "{}", lines[1]);
    assert_eq!(
        names(&lines[2]),
        vec!["search_tools".to_owned(), "call_tool".to_owned()]
    );
    let found = &lines[3]["result"]["structuredContent"]["tools"];
    assert!(
        found
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "ts__echo" && t["inputSchema"].is_object()),
        "{found}"
    );
}

#[test]
fn an_upstream_killed_mid_session_is_unavailable_holds_up_no_other_and_comes_back() {
    let fx = Fixture::new("killed");
    for client in [Downstream::Python("auto"), Downstream::TypeScript("legacy")] {
        let at = format!("{client:?}");
        let starts_before = fx.py_starts();
        let ready_before = fx.logged("server py: ready");
        let mut child = client_command(client)
            .args([
                "--elicit",
                "accept",
                "--steps",
                &json!([
                    {"op": "call", "name": "py__echo", "arguments": {"text": "one"}},
                    {"op": "pause"},
                    {"op": "call", "name": "py__echo", "arguments": {"text": "two"}},
                    {"op": "call", "name": "ts__echo", "arguments": {"text": "ts still"}},
                    {"op": "pause"},
                    {"op": "call", "name": "py__echo", "arguments": {"text": "three"}},
                ])
                .to_string(),
                "--",
            ])
            .args(fx.gateway(&[]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let rx = json_lines(child.stdout.take().unwrap());
        let next = || rx.recv_timeout(RUN_TIMEOUT).unwrap();
        assert_eq!(next()["op"], "connect", "{at}");
        let one = next();
        assert!(text(&one["result"]).contains("one"), "{at}: {one}");
        assert_eq!(next()["op"], "pause", "{at}");
        assert_eq!(fx.py_starts(), starts_before + 1, "{at}");
        fx.kill_py();
        stdin.write_all(b"go\n").unwrap();
        // py is gone: a tool error that says so (never a hang, never a protocol error).
        let two = next();
        assert_eq!(two["ok"], true, "{at}: {two}");
        assert_eq!(two["result"]["isError"], true, "{at}: {two}");
        let t = text(&two["result"]);
        assert!(t.contains("py"), "{at}: {t}");
        // ts never noticed.
        let ts = next();
        assert!(text(&ts["result"]).contains("ts still"), "{at}: {ts}");
        assert_eq!(next()["op"], "pause", "{at}");
        // py comes back by itself (a new process) after its backoff.
        let until = Instant::now() + RUN_TIMEOUT;
        while fx.py_starts() < starts_before + 2 {
            assert!(Instant::now() < until, "{at}: py was not restarted");
            std::thread::sleep(Duration::from_millis(50));
        }
        fx.wait_logged("server py: ready", ready_before + 2, &at);
        stdin.write_all(b"go\n").unwrap();
        let three = next();
        assert_eq!(three["result"]["isError"], false, "{at}: {three}");
        assert!(text(&three["result"]).contains("three"), "{at}: {three}");
        drop(stdin);
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > RUN_TIMEOUT {
                let _ = child.kill();
                panic!("{at}: did not end");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn prompts_and_resources_pass_through_under_the_servers_names() {
    let fx = Fixture::new("passthrough");
    let lines = run(
        Downstream::Python("auto"),
        &fx.gateway(&[]),
        json!([
            // Both servers ready first (a call waits for a server still starting; py's is
            // refused, as this client cannot approve it, after py is up).
            {"op": "call", "name": "ts__echo", "arguments": {"text": "x"}},
            {"op": "call", "name": "py__stats"},
            {"op": "list_prompts"},
            {"op": "get_prompt", "name": "py__greet", "arguments": {"name": "Ada"}},
            {"op": "list_resources"},
            {"op": "read_resource", "uri": "mcpwire://py/peer%3A%2F%2Freadme"},
            {"op": "read_resource", "uri": "peer://readme"},
        ]),
        "none",
        json!({}),
    );
    let prompts: Vec<&str> = lines[3]["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", lines[3]))
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(prompts.contains(&"py__greet"), "{prompts:?}");
    assert!(prompts.iter().all(|p| p.contains("__")), "{prompts:?}");
    let greeting = lines[4]["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", lines[4]));
    assert!(greeting.contains("Ada"), "{greeting}");
    let uris: Vec<&str> = lines[5]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    // Both peers have peer://readme: each under the gateway's form naming its server; a URI
    // only one has (peer://whoami) is kept as sent.
    for want in [
        "mcpwire://py/peer%3A%2F%2Freadme",
        "mcpwire://ts/peer%3A%2F%2Freadme",
        "peer://whoami",
    ] {
        assert!(uris.contains(&want), "{uris:?}");
    }
    let read = &lines[6]["result"];
    assert_eq!(
        read["contents"][0]["text"], "mcpwire client peer resource",
        "{read}"
    );
    assert_eq!(
        read["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcpwire-host"
    );
}

/// An upstream whose tools change: the gateway relists it, tells the downstream client
/// (`notifications/tools/list_changed`), and the next listing has the new tool under its
/// exposed name. Both servers are ready before (a call to each waits for it, and the
/// notifications of their start come before those answers), so the one awaited is the change's.
/// A legacy session gets it on its stream; a `2026-07-28` client only on a
/// `subscriptions/listen` stream, which the SDK client does not open by itself, so the
/// TypeScript client runs in the legacy era here.
#[test]
fn a_tool_added_upstream_is_announced_downstream_and_listed() {
    let fx = Fixture::new("changed");
    {
        let client = Downstream::TypeScript("legacy");
        let at = format!("{client:?}");
        let lines = run(
            client,
            &fx.gateway(&[]),
            json!([
                {"op": "call", "name": "ts__echo", "arguments": {"text": "ready"}},
                {"op": "call", "name": "py__echo", "arguments": {"text": "ready"}},
                {"op": "list_tools"},
                {"op": "call", "name": "ts__add_tool", "arguments": {"name": "extra"}},
                {"op": "wait_notification", "method": "notifications/tools/list_changed"},
                {"op": "list_tools"},
                {"op": "call", "name": "ts__extra"},
            ]),
            "accept",
            json!({}),
        );
        let before = names(&lines[3]);
        assert!(before.contains(&"ts__echo".to_owned()), "{at}: {before:?}");
        assert!(
            !before.contains(&"ts__extra".to_owned()),
            "{at}: {before:?}"
        );
        assert_eq!(lines[4]["ok"], true, "{at}: {}", lines[4]);
        // It may come before the call's answer (then it is reported with the call) or after.
        let announced = lines[4]["notifications"]
            .as_array()
            .is_some_and(|n| n.contains(&json!("notifications/tools/list_changed")));
        assert!(
            announced || lines[5]["ok"] == true,
            "{at}: the gateway never said: {} {}",
            lines[4],
            lines[5]
        );
        let after = names(&lines[6]);
        assert!(after.contains(&"ts__extra".to_owned()), "{at}: {after:?}");
        assert_eq!(
            after.len(),
            before.len() + 1,
            "{at}: {before:?} -> {after:?}"
        );
        assert!(
            text(&lines[7]["result"]).contains("extra"),
            "{at}: {}",
            lines[7]
        );
    }
}
