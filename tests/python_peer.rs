//! End to end against a real third-party MCP server: the Python MCP SDK (PyPI `mcp==2.3.0`,
//! `tests/peers/py_mcp_server.py`), over stdio and Streamable HTTP, reached through the dev
//! control plane's MCP endpoint and the tunnel client (each driver).
//!
//! The Python interpreter comes from `MCPWIRE_PY_PEER_PYTHON` (`.ci/run` creates
//! `.venv-peers` and sets it), else from `<repo>/.venv-peers/bin/python` when that exists.
//! Without either the tests fail and say how to set it up: a missing peer must not read as a
//! pass, and a test that installs packages from the network on its own would be slow and
//! surprising. Set it up once with:
//!
//! ```sh
//! python3 -m venv .venv-peers && .venv-peers/bin/pip install mcp==2.3.0
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};
use support::*;

/// The pinned version of the Python SDK.
const MCP_VERSION: &str = "2.3.0";
/// The variable naming the Python interpreter that has `mcp` installed.
const PYTHON_ENV: &str = "MCPWIRE_PY_PEER_PYTHON";

each_driver!(
    python_sdk_over_stdio_answers_calls_and_relays_progress_through_the_tunnel,
    python_sdk_over_http_answers_calls_and_relays_progress_through_the_tunnel,
    python_sdk_gets_the_mcp_param_header_the_tunnel_derives_from_tools_list,
    python_sdk_json_rpc_errors_come_back_exactly,
    python_sdk_legacy_session_is_terminated_through_the_tunnel,
);

/// The interpreter with the pinned `mcp`, or a failure that says how to get one.
fn python() -> PathBuf {
    let setup = format!(
        "the Python MCP SDK peer is not set up. From the repository root run\n    \
         python3 -m venv .venv-peers && .venv-peers/bin/pip install mcp=={MCP_VERSION}\n\
         (or set {PYTHON_ENV} to a python that has mcp=={MCP_VERSION}); .ci/run does this itself"
    );
    support::pinned_python(PYTHON_ENV, "mcp", MCP_VERSION, &setup)
}

fn script() -> String {
    support::peer_script("py_mcp_server.py")
}

/// The Python server on Streamable HTTP; killed on drop.
struct HttpPeer {
    child: Child,
    url: String,
}

impl HttpPeer {
    fn start() -> HttpPeer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(python())
            .args([script(), "http".to_owned(), port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut peer = HttpPeer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        wait_for("the Python server to listen", || {
            if let Ok(Some(status)) = peer.child.try_wait() {
                panic!("the Python server exited: {status}");
            }
            TcpStream::connect(("127.0.0.1", port)).ok().map(drop)
        });
        peer
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdio_command() -> String {
    format!("'{}' '{}' stdio", python().display(), script())
}

fn call_text(id: i64, tool: &str, args: Value, progress: Option<&str>) -> String {
    modern_text(
        id,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        progress,
    )
}

/// Checks a call of `count_slowly {steps: 3}` answered over SSE through the tunnel.
fn check_progress(r: &Reply) {
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let messages = r.sse_messages();
    assert_eq!(messages.len(), 4, "{messages:?}");
    for (i, m) in messages[..3].iter().enumerate() {
        assert_eq!(m["method"], "notifications/progress", "{m}");
        assert_eq!(m["params"]["progressToken"], "py-progress");
        assert_eq!(m["params"]["progress"], i as u64 + 1);
    }
    assert_eq!(messages[3]["id"], 12);
    assert_eq!(messages[3]["result"]["content"][0]["text"], "counted 3");
}

fn echo_through(cp: &mcpwire_dev::control_plane::ControlPlaneHandle) {
    let r = mcp_request(
        cp,
        &call_text(11, "echo", json!({"text": "via python"}), None),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["id"], 11);
    assert_eq!(r.json()["result"]["content"][0]["text"], "via python");
}

/// protocol.md "`jsonrpc` commands" with a real stdio server: calls answered, progress lines
/// relayed as `jsonrpc_notify` before the terminal response.
fn python_sdk_over_stdio_answers_calls_and_relays_progress_through_the_tunnel(d: Driver) {
    let cp = plane();
    let cmd = stdio_command();
    let t = Tunnel::start(d, &cp, |a| a.commands = vec![cmd]);
    echo_through(&cp);
    let r = mcp_request(
        &cp,
        &call_text(12, "count_slowly", json!({"steps": 3}), Some("py-progress")),
        &[],
    );
    check_progress(&r);
    let log = t.stop();
    assert!(!log.contains(KEY));
}

/// The same over Streamable HTTP: the Python server's SSE stream is relayed event by event.
fn python_sdk_over_http_answers_calls_and_relays_progress_through_the_tunnel(d: Driver) {
    let peer = HttpPeer::start();
    let cp = plane();
    let url = peer.url.clone();
    let _t = Tunnel::start(d, &cp, |a| a.server_urls = vec![url]);
    echo_through(&cp);
    let r = mcp_request(
        &cp,
        &call_text(12, "count_slowly", json!({"steps": 3}), Some("py-progress")),
        &[],
    );
    check_progress(&r);
}

/// The tunnel adds `Mcp-Param-Region` from the `x-mcp-header` annotation of the last
/// `tools/list` forwarded on the channel (the MCP client sends none); the Python SDK refuses
/// a 2026-07-28 call without it.
fn python_sdk_gets_the_mcp_param_header_the_tunnel_derives_from_tools_list(d: Driver) {
    let peer = HttpPeer::start();
    let cp = plane();
    let url = peer.url.clone();
    let _t = Tunnel::start(d, &cp, |a| a.server_urls = vec![url]);
    let list = mcp_request(&cp, &modern_text(1, "tools/list", json!({}), None), &[]);
    assert_eq!(list.status, 200, "{}", list.body);
    let tools = list.json()["result"]["tools"].clone();
    let region = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "in_region")
        .unwrap_or_else(|| panic!("{tools}"));
    assert_eq!(
        region["inputSchema"]["properties"]["region"]["x-mcp-header"],
        "Region"
    );
    let r = mcp_request(
        &cp,
        &call_text(2, "in_region", json!({"region": "eu-west"}), None),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"]["content"][0]["text"], "ran in eu-west");
}

/// protocol.md "Structured MCP errors and synthesized tunnel failures": the Python server's
/// own JSON-RPC error (an unknown method) keeps its id, code and message, and its HTTP
/// status; it is not replaced by a synthesized -32603.
fn python_sdk_json_rpc_errors_come_back_exactly(d: Driver) {
    let peer = HttpPeer::start();
    let cp = plane();
    let url = peer.url.clone();
    let _t = Tunnel::start(d, &cp, |a| a.server_urls = vec![url.clone()]);
    let body = modern_text(21, "no/such_method", json!({}), None);
    let direct = {
        let built = mcpwire_core::mcp::headers::request_headers(&body, None).unwrap();
        let pairs: Vec<(String, String)> = built
            .iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        let refs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        http("POST", &url, &refs, Some(&body))
    };
    let tunnelled = mcp_request(&cp, &body, &[]);
    assert_eq!(tunnelled.status, direct.status, "{}", tunnelled.body);
    let (a, b) = (tunnelled.json(), direct.json());
    assert_eq!(a["id"], 21);
    assert_eq!(a["error"], b["error"], "{a} vs {b}");
    assert_ne!(a["error"]["code"], -32603, "{a}");
}

/// protocol.md "`session_termination` commands" against the Python server: a legacy session
/// opened with `initialize` through the tunnel is closed with DELETE, and is then unknown.
fn python_sdk_legacy_session_is_terminated_through_the_tunnel(d: Driver) {
    let peer = HttpPeer::start();
    let cp = plane();
    let url = peer.url.clone();
    let _t = Tunnel::start(d, &cp, |a| a.server_urls = vec![url]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "mcpwire-e2e", "version": "1"}}})
    .to_string();
    let json_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let r = http("POST", &cp.mcp_url(TUNNEL), &json_headers, Some(&init));
    assert_eq!(r.status, 200, "{}", r.body);
    let init_result = if r
        .header("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        r.sse_messages().pop().unwrap()
    } else {
        r.json()
    };
    assert_eq!(init_result["id"], 1, "{init_result}");
    let sid = r
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no session id: {:?}", r.headers))
        .to_owned();
    let session = |extra: &[(&str, &str)], body: &str| {
        let mut h = json_headers.to_vec();
        h.push(("Mcp-Session-Id", sid.as_str()));
        h.push(("MCP-Protocol-Version", "2025-11-25"));
        h.extend_from_slice(extra);
        http("POST", &cp.mcp_url(TUNNEL), &h, Some(body))
    };
    let note = session(
        &[],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    );
    assert_eq!(note.status, 202, "{}", note.body);
    let del = http(
        "DELETE",
        &cp.mcp_url(TUNNEL),
        &[("Mcp-Session-Id", &sid)],
        None,
    );
    assert!(
        (200..300).contains(&del.status),
        "DELETE answered {}: {}",
        del.status,
        del.body
    );
    let after = session(
        &[],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
    );
    assert_eq!(after.status, 404, "{}", after.body);
}
