//! The admin UI in a real browser: `mcpwire tunnel run` (the real binary, each driver) on the
//! local control plane with the reference MCP server on channel `main` and a server nobody
//! listens for on channel `broken`; Debian's headless Chromium, driven through chromium-driver
//! by Selenium (PyPI, pinned), opens the page and does what an operator does
//! (`tests/peers/browser/admin_ui.py`, which only acts and reports). This test asserts on the
//! report: the overview shows the channels, a command appears in the table without a reload
//! (within a second), a failing command shows its failure source, the level change takes
//! effect, a cross-origin POST and a non-loopback Host are refused, and no API key or shard
//! token is in the page, its event streams or the diagnostic bundle. One screenshot per panel
//! is written under `target/admin-ui-screenshots/<driver>/` (test artefacts, not committed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use support::*;

/// Selenium, as scripts/test installs it into `.venv-peers`.
const SELENIUM_VERSION: &str = "4.50.0";
const SETUP: &str = "run scripts/test (it installs selenium into .venv-peers and Debian's \
                     chromium and chromium-driver), or set MCPWIRE_SELENIUM_PYTHON";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpwire-admin-ui-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The tunnel client, its output kept; killed when dropped.
struct Client {
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Client {
    fn start(args: &[&str]) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(args)
            .env_clear()
            .env("CONTROL_PLANE_API_KEY", KEY)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = capture(&mut child);
        Client { child, out }
    }

    fn url(&mut self, file: &Path) -> String {
        wait_for("the health URL file", || {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the client exited ({status}): {}", self.out.lock().unwrap());
            }
            let text = std::fs::read_to_string(file).ok()?;
            text.ends_with('\n').then(|| text.trim().to_owned())
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn need(path: &str) {
    assert!(Path::new(path).exists(), "{path} is missing: {SETUP}");
}

/// The rows of a table the script read, as their cells.
fn rows(v: &Value) -> Vec<Vec<&str>> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a table: {v}"))
        .iter()
        .map(cells)
        .collect()
}

/// The cells of a table row the script read.
fn cells(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a row: {v}"))
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect()
}

fn in_a_real_browser(driver: &str) {
    let chromium = std::env::var("MCPWIRE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let chromedriver =
        std::env::var("MCPWIRE_CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
    need(&chromium);
    need(&chromedriver);
    let python = pinned_python(
        "MCPWIRE_SELENIUM_PYTHON",
        "selenium",
        SELENIUM_VERSION,
        SETUP,
    );

    let cp = plane();
    let server = reference_server();
    // A port nobody listens on: channel `broken`'s forwards fail to connect.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = scratch(driver);
    let url_file = dir.join("health.url");
    let main = format!("url={},channel=main", server.url());
    let broken = format!("channel=broken,url=http://{closed}/mcp");
    let base = cp.base_url();
    // A Harpoon target (the reference server's endpoint, which answers a GET with 405).
    let harpoon = format!("label=docs,url={},desc=\"The docs service\"", server.url());
    let url_file_arg = url_file.display().to_string();
    let mut client = Client::start(&[
        "tunnel",
        "run",
        "--driver",
        driver,
        "--control-plane.base-url",
        &base,
        "--control-plane.tunnel-id",
        TUNNEL,
        "--mcp.server-url",
        &main,
        "--mcp.server-url",
        &broken,
        "--harpoon.target",
        &harpoon,
        "--harpoon.allow-plaintext-http",
        "--health.listen-addr",
        "127.0.0.1:0",
        "--health.url-file",
        &url_file_arg,
    ]);
    let admin = client.url(&url_file);

    let shots = repo_root().join("target/admin-ui-screenshots").join(driver);
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let downloads = dir.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let out = Command::new(python)
        .arg(peer_script("browser/admin_ui.py"))
        .env("ADMIN_URL", &admin)
        .env("CP_URL", &base)
        .env("CP_KEY", KEY)
        .env("TUNNEL_ID", TUNNEL)
        .env("SHOTS_DIR", &shots)
        .env("DOWNLOAD_DIR", &downloads)
        .env("CHROMIUM", &chromium)
        .env("CHROMEDRIVER", &chromedriver)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap_or_else(|e| {
            panic!(
                "no report ({e}): {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let log = client.out.lock().unwrap().clone();
    assert!(
        out.status.success() && report.get("error").is_none(),
        "the browser script failed: {}\nstderr: {}\nclient log:\n{log}",
        report["error"],
        String::from_utf8_lossy(&out.stderr)
    );

    // What failure messages print: the report without the page, the streams and the bundle.
    let mut brief = report.clone();
    for big in [
        "page_html",
        "stream_commands",
        "stream_logs",
        "bundle",
        "api_texts",
    ] {
        brief[big] = Value::String("(left out)".into());
    }
    let report_text = brief.to_string();

    // The overview shows the configured channels and the tunnel.
    let channels: Vec<Vec<&str>> = rows(&report["channels"]);
    assert_eq!(
        channels,
        [
            vec![
                "main",
                "http",
                &server.url().replace("http://", "").replace("/mcp", "")
            ],
            vec!["broken", "http", &closed.to_string()],
            vec!["harpoon", "harpoon", "1 targets"],
        ],
        "{report_text}"
    );
    assert_eq!(report["tunnel_id_shown"], TUNNEL);
    assert_eq!(report["ready_badge"], "ready");
    let poll_facts = report["poll_facts"].as_str().unwrap();
    let cp_host = base.replace("http://", "");
    assert!(
        poll_facts.contains(&format!("Host\n{cp_host}")),
        "{poll_facts}"
    );
    assert!(!poll_facts.contains("Last success\nnever"), "{poll_facts}");
    assert!(
        report["server_info_shown"]
            .as_str()
            .unwrap()
            .contains("\"name\":\"broken\""),
        "{report_text}"
    );

    // A command appears in the table within a second of being sent, without a reload.
    let seen_ms = report["command_seen_after_ms"].as_u64().unwrap();
    eprintln!("admin UI ({driver}): a command reached the table {seen_ms} ms after it was queued");
    assert!(seen_ms <= 1000, "took {seen_ms} ms");
    assert_eq!(report["no_reload"], true);
    let ok = cells(&report["ok_row"]);
    assert_eq!(
        &ok[1..6],
        ["ui-ok-1", "main", "tools/call", "completed", "200"],
        "{ok:?}"
    );

    // A failing command shows its failure source (and kind).
    let failed = cells(&report["failed_row"]);
    assert_eq!(
        &failed[1..5],
        ["ui-fail-1", "broken", "tools/call", "failed"],
        "{failed:?}"
    );
    assert_eq!(failed[6], "connect", "{failed:?}");
    assert_eq!(failed[7], "connection_refused", "{failed:?}");
    let filtered: Vec<&str> = report["filtered_visible"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(filtered, ["ui-fail-1"], "{report_text}");

    // The level change takes effect: the page says so, the tunnel logs at debug.
    assert_eq!(report["level_status"], "log level is now debug");
    assert!(report["debug_lines_seen"].as_u64().unwrap() > 0);
    assert_eq!(report["level_change_line"], true);
    assert!(
        log.contains("log level changed from the admin UI from=info to=debug"),
        "{log}"
    );
    assert!(log.contains(" DEBUG "), "{log}");

    // Refusals: a cross-origin POST changes nothing; a non-loopback Host gets no page.
    assert!(
        report["cross_origin"]
            .as_str()
            .unwrap()
            .starts_with("sent: opaque"),
        "{report_text}"
    );
    assert_eq!(report["level_after_cross_origin"], "debug");
    let foreign = report["foreign_host_page"].as_str().unwrap();
    assert!(
        foreign.contains("the admin UI answers only to a loopback Host"),
        "{foreign}"
    );

    // The bundle: logs, metrics, the configuration; no secret anywhere the page reaches.
    let bundle = report["bundle"].as_str().expect("no bundle was downloaded");
    let parsed: Value = serde_json::from_str(bundle).unwrap();
    assert!(parsed["metrics"]
        .as_str()
        .unwrap()
        .contains("commands_total"));
    assert_eq!(parsed["configuration"]["tunnel_id"], TUNNEL);
    assert!(parsed["logs"].as_array().unwrap().len() > 3);
    let page = report["page_html"].as_str().unwrap();
    let streams = format!("{}{}", report["stream_commands"], report["stream_logs"]);
    assert!(
        streams.contains("event: command") && streams.contains("event: log"),
        "{streams}"
    );
    let api = report["api_texts"].to_string();
    assert!(
        api.contains("ui-fail-1") && api.contains("\\\"label\\\":\\\"docs\\\""),
        "{api}"
    );
    for (what, text) in [
        ("page", page),
        ("streams", &streams),
        ("bundle", bundle),
        ("JSON answers", &api),
    ] {
        for secret in [
            KEY,
            "shard-secret-ui-ok-1",
            "shard-secret-ui-fail-1",
            "shard-secret",
        ] {
            assert!(!text.contains(secret), "{secret} is in the {what}");
        }
    }
    assert!(
        report["chart_lines"].as_u64().unwrap() >= 4,
        "{report_text}"
    );

    // Harpoon: the target by label and description, never its URL; the call with its status.
    let targets: Vec<Vec<&str>> = rows(&report["harpoon_targets"]);
    assert_eq!(
        targets,
        [vec!["docs", "The docs service", "", "custom"]],
        "{report_text}"
    );
    let calls: Vec<Vec<&str>> = rows(&report["harpoon_calls"]);
    assert_eq!(calls.len(), 1, "{report_text}");
    assert_eq!(&calls[0][1..4], ["docs", "405", "success"], "{report_text}");
    let harpoon_text = report["harpoon_text"].as_str().unwrap();
    assert!(!harpoon_text.contains(&server.url()), "{harpoon_text}");
    for name in ["overview", "commands", "logs", "metrics", "harpoon"] {
        let png = shots.join(format!("{name}.png"));
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is not a PNG",
            png.display()
        );
    }
    assert!(!log.contains(KEY), "the key reached the client's log");
}

#[test]
fn blocking() {
    in_a_real_browser("blocking");
}

#[test]
fn smol() {
    in_a_real_browser("smol");
}
