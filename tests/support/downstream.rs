//! The real downstream clients (the Python MCP SDK's `Client`, `mcp==2.3.0`, and the
//! TypeScript SDK v2 `Client`, `@modelcontextprotocol/client@2.4.0`) as the tests drive them:
//! `tests/peers/py_mcp_downstream.py` and `tests/peers/node/ts_downstream.mjs` run a script of
//! steps and print one JSON line per step. Shared by `downstream_clients` (the harnesses
//! against today's servers) and `host_serve` (the gateway in the middle).
#![allow(dead_code)]

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::node_peers;
use crate::support;

/// The pinned Python SDK (scripts/test's `PY_MCP_VERSION`).
pub const PY_MCP_VERSION: &str = "2.3.0";
/// The variable naming the Python interpreter that has it.
pub const PYTHON_ENV: &str = "MCPWIRE_PY_PEER_PYTHON";
/// The pinned TypeScript client and server (tests/peers/node/package-lock.json).
pub const TS_CLIENT_VERSION: &str = "2.4.0";
pub const TS_SERVER_VERSION: &str = "2.4.0";
/// The longest one harness run may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

pub fn python() -> PathBuf {
    support::pinned_python(
        PYTHON_ENV,
        "mcp",
        PY_MCP_VERSION,
        "the Python peers are not set up: run scripts/test once (it makes .venv-peers with mcp==2.3.0), or set MCPWIRE_PY_PEER_PYTHON",
    )
}

/// A downstream client and the era it is asked to speak.
#[derive(Clone, Copy, Debug)]
pub enum Downstream {
    /// The Python client, told this era (`auto`, `legacy`, a version).
    Python(&'static str),
    /// The TypeScript client, told this era.
    TypeScript(&'static str),
}

/// An upstream server's command line (stdio).
pub fn py_peer() -> Vec<String> {
    vec![
        python().display().to_string(),
        support::peer_script("py_mcp_client_peer.py"),
        "stdio".into(),
    ]
}

pub fn ts_peer() -> Vec<String> {
    node_peers::require("@modelcontextprotocol/server", TS_SERVER_VERSION);
    vec![
        node_peers::node(),
        node_peers::node_dir()
            .join("ts_peer.mjs")
            .display()
            .to_string(),
        "stdio".into(),
    ]
}

pub fn dev_server() -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_mcpwire").into(),
        "dev".into(),
        "mcp-server".into(),
        "--stdio".into(),
    ]
}

/// A peer serving Streamable HTTP on 127.0.0.1, killed when dropped.
pub struct HttpPeer {
    pub child: Child,
    pub url: String,
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` with a free port appended, and waits (bounded) until it accepts.
pub fn http_peer(mut command: Vec<String>) -> HttpPeer {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    command.push(port.to_string());
    let child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let peer = HttpPeer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < RUN_TIMEOUT,
            "{command:?} did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    peer
}

/// Runs `client` against `server` with `steps` and the elicitation answer `elicit` (with
/// `content` for an accept); the JSON lines it printed.
pub fn run(
    client: Downstream,
    server: &[String],
    steps: Value,
    elicit: &str,
    content: Value,
) -> Vec<Value> {
    let mut cmd = client_command(client);
    cmd.args(["--steps", &steps.to_string(), "--elicit", elicit])
        .args(["--content", &content.to_string(), "--timeout", "20"]);
    match server {
        [url] if url.starts_with("http://") => cmd.args(["--url", url]),
        _ => cmd.arg("--").args(server),
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {client:?}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{client:?} against {server:?} ran over {RUN_TIMEOUT:?}; stderr:\n{}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        status.success(),
        "{client:?} against {server:?}: {status}\nstdout:\n{out}\nstderr:\n{err}"
    );
    out.lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}\nstderr:\n{err}"))
        })
        .collect()
}

pub const CLIENTS: [Downstream; 4] = [
    Downstream::Python("auto"),
    Downstream::Python("legacy"),
    Downstream::TypeScript("legacy"),
    Downstream::TypeScript("auto"),
];

pub fn expected_version(client: Downstream) -> &'static str {
    match client {
        Downstream::Python("legacy") | Downstream::TypeScript("legacy") => "2025-11-25",
        _ => "2026-07-28",
    }
}

pub fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The command that starts `client` (its era set), before its own options.
pub fn client_command(client: Downstream) -> Command {
    match client {
        Downstream::Python(era) => {
            let mut c = Command::new(python());
            c.arg(support::peer_script("py_mcp_downstream.py"))
                .args(["--era", era]);
            c
        }
        Downstream::TypeScript(era) => {
            node_peers::require("@modelcontextprotocol/client", TS_CLIENT_VERSION);
            let mut c = Command::new(node_peers::node());
            c.arg(node_peers::node_dir().join("ts_downstream.mjs"))
                .args(["--era", era]);
            c
        }
    }
}

/// The JSON lines a downstream harness prints on `stdout`, one message each, read on a thread
/// of their own (the test meanwhile writes to its stdin).
pub fn json_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<Value> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    rx
}
