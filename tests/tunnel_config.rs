//! `mcpwire tunnel run` with the Go tunnel-client's config files: its own sample profiles
//! (`fixtures/go-profiles/`, as `tunnel-client init` writes them) and a file with every key of
//! its schema, each loaded by the real binary (`--profile-file`, `--profile`, `--config`, their
//! variables, `mcpwire run`), which then serves MCP requests sent through the local control
//! plane; `mcpwire tunnel init`'s profile likewise. Secrets never reach the logs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use mcpwire_core::mcp::headers::request_headers;
use mcpwire_dev::control_plane::ControlPlaneHandle;
use serde_json::{json, Value};
use support::*;

/// A tunnel id in the Go client's form (the samples' example).
const GO_TUNNEL: &str = "tunnel_0123456789abcdef0123456789abcdef";
const HEADER_SECRET: &str = "hdr-secret-7d2e91c4";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("fixtures/go-profiles").join(name)).unwrap()
}

/// A fresh directory under the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "mcpwire-tunnel-config-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Fills in a fixture's placeholders.
fn render(text: &str, cp: &ControlPlaneHandle, server_url: &str, dir: &Path) -> String {
    text.replace("__BASE_URL__", &cp.base_url())
        .replace("__TUNNEL_ID__", GO_TUNNEL)
        .replace("__API_KEY_REF__", "env:CONTROL_PLANE_API_KEY")
        .replace("__HEALTH_ADDR__", "127.0.0.1:0")
        .replace("__MCP_SERVER_URL__", server_url)
        .replace("__MCP_COMMAND__", &stdio_reference_command())
        .replace("__DIR__", &dir.display().to_string())
}

/// The `mcpwire` binary with `args` and only `env` (no variable of the test's own
/// environment leaks in), its standard output and error captured.
struct Run {
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Run {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
        cmd.args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Ok(path) = std::env::var("PATH") {
            cmd.env("PATH", path);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = capture(&mut child);
        Run { child, out }
    }

    fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Waits for the health URL file and returns the URL in it.
    fn health_url(&mut self, file: &Path) -> String {
        wait_for("the health URL file", || {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the client exited ({status}): {}", self.output());
            }
            let text = std::fs::read_to_string(file).ok()?;
            text.ends_with('\n').then(|| text.trim().to_owned())
        })
    }

    /// Sends SIGTERM, waits for the exit; the output.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let code = wait_for("the client to exit", || {
            self.child.try_wait().unwrap().map(|s| s.code())
        });
        thread::sleep(Duration::from_millis(50));
        let out = self.output();
        assert_eq!(code, Some(0), "{out}");
        out
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tools/list` on `channel` through the control plane: the tools' names.
fn tool_names(cp: &ControlPlaneHandle, channel: &str) -> Vec<String> {
    tool_names_of(cp, channel, None)
}

/// [`tool_names`], a failure showing `run`'s output.
fn tool_names_of(cp: &ControlPlaneHandle, channel: &str, run: Option<&Run>) -> Vec<String> {
    let body = modern_text(1, "tools/list", json!({}), None);
    let built = request_headers(&body, None).unwrap();
    let headers: Vec<(&str, &str)> = built.iter().collect();
    let url = format!("{}?channel={channel}", cp.mcp_url(GO_TUNNEL));
    let r = http("POST", &url, &headers, Some(&body));
    assert_eq!(
        r.status,
        200,
        "{}\n{}",
        r.body,
        run.map(Run::output).unwrap_or_default()
    );
    let v: Value = r.json();
    v["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

fn assert_serves_the_reference_tools(cp: &ControlPlaneHandle, channel: &str) {
    let names = tool_names(cp, channel);
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
}

#[test]
fn the_go_clients_sample_profiles_load_and_serve() {
    let server = reference_server();
    let proxy_dir = scratch("samples-proxy");
    let proxy = Proxy::start(&proxy_dir);
    for sample in [
        "sample_mcp_with_dcr",
        "sample_mcp_stdio_local",
        "sample_mcp_remote_no_auth",
        "sample_mcp_enterprise_proxy",
    ] {
        let cp = plane();
        let dir = scratch(sample);
        let path = dir.join(format!("{sample}.yaml"));
        let text = render(
            &fixture(&format!("{sample}.yaml")),
            &cp,
            &server.url(),
            &dir,
        );
        std::fs::write(&path, text).unwrap();
        let url_file = dir.join("health.url");
        // The enterprise sample's CA bundle (a path in ENTERPRISE_CA_BUNDLE).
        let ca = write(&dir, "corp-root.pem", &Pki::new().ca_pem);
        // `mcpwire run`, the Go client's spelling, with the profile by path.
        let mut run = Run::start(
            &[
                "run",
                "--profile-file",
                path.to_str().unwrap(),
                "--health.url-file",
                url_file.to_str().unwrap(),
            ],
            &[
                ("CONTROL_PLANE_API_KEY", KEY),
                ("ENTERPRISE_CA_BUNDLE", &ca),
                ("HTTPS_PROXY", &proxy.url()),
            ],
        );
        let health = run.health_url(&url_file);
        assert!(health.starts_with("http://127.0.0.1:"), "{health}");
        assert_serves_the_reference_tools(&cp, "main");
        // The start-up metadata fetch says which tunnel the key reaches.
        let meta = wait_for("the tunnel metadata line", || {
            run.output()
                .lines()
                .find(|l| l.contains("\"tunnel metadata fetched\""))
                .map(str::to_owned)
        });
        let v: Value = serde_json::from_str(&meta).unwrap();
        assert_eq!(v["level"], "info", "{v}");
        assert!(
            v["tunnel_id"].as_str().is_some_and(|t| !t.is_empty()),
            "{v}"
        );
        assert!(v["name"].as_str().is_some_and(|n| n != "-"), "{v}");
        let out = run.stop();
        // The samples ask for JSON logs; the file read is logged, the key never.
        let config_line = out
            .lines()
            .find(|l| l.contains("\"config file\""))
            .unwrap_or_else(|| panic!("{sample}: {out}"));
        let v: Value = serde_json::from_str(config_line).unwrap();
        assert_eq!(v["path"], path.to_str().unwrap(), "{v}");
        assert_eq!(v["chosen_by"], "--profile-file", "{v}");
        assert!(!out.contains(KEY), "{sample}: {out}");
        if sample == "sample_mcp_enterprise_proxy" {
            // The CA bundle is trusted, and every connection goes through the proxy.
            assert!(out.contains("\"ca_bundle\":\"1\""), "{out}");
            let want = format!("127.0.0.1:{}", server.local_addr().port());
            wait_for("the proxy's log of the MCP server", || {
                proxy.tunnelled().contains(&want).then_some(())
            });
            assert!(!out.contains(PROXY_PASSWORD), "{out}");
        } else {
            assert!(!out.contains("does not implement"), "{sample}: {out}");
        }
        // The health URL file is removed at exit.
        assert!(!url_file.exists());
    }
}

#[test]
fn a_file_with_every_key_takes_effect_or_names_what_is_ignored() {
    let cp = plane();
    let server = reference_server();
    let dir = scratch("every-key");
    let pki = Pki::new();
    write(&dir, "ca.pem", &pki.ca_pem);
    for name in ["cp", "mcp"] {
        let leaf = pki.leaf(name, false);
        write(&dir, &format!("{name}.pem"), &leaf.cert_pem);
        write(&dir, &format!("{name}.key"), &leaf.key_pem);
    }
    let path = dir.join("every_key.yaml");
    let proxy = Proxy::start(&dir);
    let text = render(&fixture("every_key.yaml"), &cp, &server.url(), &dir)
        .replace("__PROXY__", &proxy.url());
    std::fs::write(&path, text).unwrap();
    // The smol driver (its variable), the file by TUNNEL_CLIENT_CONFIG.
    let mut run = Run::start(
        &["tunnel", "run"],
        &[
            ("TUNNEL_CLIENT_CONFIG", path.to_str().unwrap()),
            ("EVERY_KEY", KEY),
            ("EVERY_HEADER", HEADER_SECRET),
            ("EVERY_PROXY", &proxy.url()),
            ("MCPWIRE_DRIVER", "smol"),
        ],
    );
    let health = run.health_url(&dir.join("health.url"));
    let pid = std::fs::read_to_string(dir.join("tunnel.pid")).unwrap();
    assert_eq!(pid.trim(), run.child.id().to_string());
    assert_serves_the_reference_tools(&cp, "main");
    assert_serves_the_reference_tools(&cp, "tools");
    // mcp.extra_headers reach the HTTP MCP server on every forward (never the control plane).
    let forwarded = server.server().requests();
    assert!(!forwarded.is_empty());
    for r in &forwarded {
        assert!(
            r.headers
                .iter()
                .any(|(n, v)| n.eq_ignore_ascii_case("X-Mcp-Extra") && v == "one"),
            "{:?}",
            r.headers
        );
    }
    assert!(cp.plane().polls(GO_TUNNEL).iter().all(|p| !p
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("X-Mcp-Extra"))));
    // mcp.discovery_extra_headers: on the start-up probe's and discovery's pings, never on a
    // forwarded command.
    let has = |r: &mcpwire_dev::mcp_server::LoggedRequest, name: &str| {
        r.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    assert!(forwarded
        .iter()
        .any(|r| r.method.as_deref() == Some("ping") && has(r, "X-Discovery")));
    assert!(forwarded
        .iter()
        .filter(|r| r.method.as_deref() != Some("ping"))
        .all(|r| !has(r, "X-Discovery")));
    // Control-plane headers from the file: the organization and the extra header (its value
    // read from the environment).
    let polls = cp.plane().polls(GO_TUNNEL);
    let poll = polls.last().unwrap();
    let header = |name: &str| {
        poll.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        header("OpenAI-Organization").as_deref(),
        Some("org-every-key")
    );
    assert_eq!(header("X-Every-Key").as_deref(), Some(HEADER_SECRET));
    // poll_channels from the file; Harpoon is served (its target from the file).
    assert!(poll.query.contains("channel=harpoon"), "{}", poll.query);
    assert!(poll.query.contains("channel=tools"), "{}", poll.query);
    // health.unix_socket: the listener is on the socket (the listen address is ignored).
    assert!(health.starts_with("http+unix://"), "{health}");
    #[cfg(unix)]
    {
        use std::io::Write as _;
        let mut conn = std::os::unix::net::UnixStream::connect(dir.join("health.sock")).unwrap();
        conn.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    }
    let stdout = run.stop();
    // log.file: the log lines are in the file, not on standard output.
    let log = std::fs::read_to_string(dir.join("tunnel.log")).unwrap();
    assert!(log.contains("driver=smol"), "{log}");
    assert!(log.contains("tunnel client started"), "{log}");
    assert!(!stdout.contains("tunnel client started"), "{stdout}");
    // Every setting mcpwire does not implement is named with its file and line, once.
    let mut ignored: Vec<String> = log
        .lines()
        .filter(|l| l.contains("is set but mcpwire does not implement it yet"))
        .filter_map(|l| {
            let msg = l.split_once(" WARN ").map(|(_, m)| m.trim_start())?;
            let key = msg.split(" (").next()?;
            assert!(msg.contains(&format!("({} line ", path.display())), "{l}");
            Some(key.to_owned())
        })
        .collect();
    ignored.sort();
    let mut expected = vec![
        "control_plane.poll_deadline_guardrail",
        "harpoon.http_proxy",
        "harpoon.additional_transports",
        "proxy.check_interval",
    ];
    expected.sort_unstable();
    assert_eq!(ignored, expected, "{log}");
    // The CA bundle is trusted besides the system's store.
    assert!(
        log.contains("tls trust roots=system") && log.contains("ca_bundle=1"),
        "{log}"
    );
    // Both routes through the proxy (an explicit one carries loopback too).
    let want = [
        format!("127.0.0.1:{}", cp.local_addr().port()),
        format!("127.0.0.1:{}", server.local_addr().port()),
    ];
    wait_for("the proxy's log of both routes", || {
        let t = proxy.tunnelled();
        want.iter().all(|w| t.contains(w)).then_some(())
    });
    // No secret in the log: neither the key, the header value nor the proxy's password.
    assert!(!log.contains(KEY) && !log.contains(HEADER_SECRET), "{log}");
    assert!(!log.contains(PROXY_PASSWORD), "{log}");
    // The pid file is removed at exit.
    assert!(!dir.join("tunnel.pid").exists());
}

#[test]
fn profiles_by_name_follow_the_profile_directory_rules() {
    let cp = plane();
    let server = reference_server();
    let home = scratch("home");
    let xdg_dir = home.join("xdg/tunnel-client");
    std::fs::create_dir_all(&xdg_dir).unwrap();
    let text = render(
        &fixture("sample_mcp_with_dcr.yaml"),
        &cp,
        &server.url(),
        &home,
    );
    std::fs::write(xdg_dir.join("work.yaml"), &text).unwrap();
    let url_file = home.join("health.url");
    // TUNNEL_CLIENT_PROFILE in $XDG_CONFIG_HOME/tunnel-client.
    let xdg = home.join("xdg");
    let mut run = Run::start(
        &[
            "tunnel",
            "run",
            "--health.url-file",
            url_file.to_str().unwrap(),
        ],
        &[
            ("HOME", home.to_str().unwrap()),
            ("XDG_CONFIG_HOME", xdg.to_str().unwrap()),
            ("TUNNEL_CLIENT_PROFILE", "work"),
            ("CONTROL_PLANE_API_KEY", KEY),
        ],
    );
    run.health_url(&url_file);
    assert_serves_the_reference_tools(&cp, "main");
    let out = run.stop();
    assert!(out.contains("TUNNEL_CLIENT_PROFILE=work"), "{out}");
    // A profile that does not exist: one line naming the file and how to create it.
    let run = Run::start(
        &["tunnel", "run", "--profile", "nope"],
        &[("HOME", home.to_str().unwrap())],
    );
    let mut run = run;
    let code = wait_for("the client to exit", || {
        run.child.try_wait().unwrap().map(|s| s.code())
    });
    thread::sleep(Duration::from_millis(50));
    assert_eq!(code, Some(2));
    let expected = format!(
        "mcpwire: cannot read config file {}/.config/tunnel-client/nope.yaml (chosen by --profile nope): ",
        home.display()
    );
    let out = run.output();
    assert!(out.starts_with(&expected), "{out}");
    assert!(
        out.trim_end()
            .ends_with("(create it with `mcpwire tunnel init`)"),
        "{out}"
    );
    assert_eq!(out.trim_end().lines().count(), 1, "{out}");
}

#[test]
fn tunnel_init_writes_a_profile_that_runs() {
    let cp = plane();
    let server = reference_server();
    let dir = scratch("init");
    let profiles = dir.join("profiles");
    let init = |extra: &[&str]| {
        let mut args = vec![
            "tunnel",
            "init",
            "--profile",
            "dev",
            "--profile-dir",
            profiles.to_str().unwrap(),
            "--tunnel-id",
            GO_TUNNEL,
        ];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(&args)
            .output()
            .unwrap()
    };
    let base = cp.base_url();
    let url = server.url();
    let out = init(&[
        "--control-plane-base-url",
        &base,
        "--mcp-server-url",
        &url,
        "--health-listen-addr",
        "127.0.0.1:0",
    ]);
    assert!(out.status.success(), "{out:?}");
    let path = profiles.join("dev.yaml");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "Created profile dev at {}\nSample: sample_mcp_with_dcr\nNext:\n  mcpwire tunnel run --profile dev\n",
            path.display()
        )
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // It is not overwritten without --force.
    let again = init(&["--mcp-server-url", &url]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("give --force to replace it"));
    let url_file = dir.join("health.url");
    let mut run = Run::start(
        &[
            "tunnel",
            "run",
            "--profile",
            "dev",
            "--profile-dir",
            profiles.to_str().unwrap(),
            "--health.url-file",
            url_file.to_str().unwrap(),
        ],
        &[("CONTROL_PLANE_API_KEY", KEY)],
    );
    run.health_url(&url_file);
    assert_serves_the_reference_tools(&cp, "main");
    run.stop();
}

#[test]
fn a_go_only_flag_fails_by_name_and_dashed_aliases_work() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
        .args([
            "tunnel",
            "run",
            "--control-plane-tunnel-id",
            GO_TUNNEL,
            "--control-plane.api-key",
            "sk-x",
            "--mcp-server-url",
            "http://127.0.0.1:9/mcp",
            "--control-plane.poll-deadline-guardrail",
            "5s",
        ])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "mcpwire: --control-plane.poll-deadline-guardrail is a Go tunnel-client flag that \
         mcpwire does not implement yet (extra time after the long-poll wait (mcpwire derives it \
         from the wait)); remove it to run without it\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Enterprise networks: a private CA (trusted with --ca-bundle) and mTLS required by the servers.

/// A CA made for the test, with a server certificate for 127.0.0.1 and client certificates.
struct Pki {
    ca_pem: String,
    ca_cert: rcgen::Certificate,
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
}

/// A certificate and its key, in PEM.
struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: Vec<u8>,
    key_der: Vec<u8>,
}

impl Pki {
    fn new() -> Pki {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "mcpwire test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let ca_cert = params.self_signed(&key).unwrap();
        Pki {
            ca_pem: ca_cert.pem(),
            ca_cert,
            ca: rcgen::Issuer::new(params, key),
        }
    }

    fn leaf(&self, name: &str, server: bool) -> Leaf {
        let key = rcgen::KeyPair::generate().unwrap();
        let sans = if server {
            vec!["127.0.0.1".to_owned(), "localhost".to_owned()]
        } else {
            Vec::new()
        };
        let mut params = rcgen::CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &self.ca).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        }
    }
}

/// What a TLS terminator saw.
#[derive(Default)]
struct Seen {
    /// Handshakes completed, with the client certificate's DER (if any).
    clients: Vec<Option<Vec<u8>>>,
    /// Handshakes that failed, with rustls' reason.
    failures: Vec<String>,
}

/// A TLS terminator on 127.0.0.1:0 in front of `backend` (plain TCP), requiring a client
/// certificate issued by `pki` when `require_client` is set.
fn terminator(
    pki: &Pki,
    server: &Leaf,
    require_client: bool,
    backend: std::net::SocketAddr,
) -> (std::net::SocketAddr, Arc<Mutex<Seen>>) {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_cert.der().clone()).unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = Arc::new(
        builder
            .with_single_cert(
                vec![CertificateDer::from(server.der.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server.key_der.clone())),
            )
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s = Arc::clone(&seen);
    thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (config, seen) = (Arc::clone(&config), Arc::clone(&s));
            thread::spawn(move || pump(tcp, config, backend, &seen));
        }
    });
    (addr, seen)
}

/// Moves bytes between one TLS client and a new connection to `backend`, in one thread (short
/// read timeouts on both sides), until either side closes.
fn pump(
    tcp: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    backend: std::net::SocketAddr,
    seen: &Mutex<Seen>,
) {
    use std::io::{ErrorKind, Write};
    let conn = rustls::ServerConnection::new(config).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        if let Err(e) = tls.conn.complete_io(&mut tls.sock) {
            seen.lock().unwrap().failures.push(e.to_string());
            return;
        }
    }
    let client = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.as_ref().to_vec());
    seen.lock().unwrap().clients.push(client);
    let Ok(mut up) = std::net::TcpStream::connect(backend) else {
        return;
    };
    let tick = Some(Duration::from_millis(5));
    tls.sock.set_read_timeout(tick).unwrap();
    up.set_read_timeout(tick).unwrap();
    let mut buf = [0u8; 16 * 1024];
    let idle = |e: &std::io::Error| matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut);
    loop {
        match tls.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if up.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if idle(&e) => {}
            Err(_) => return,
        }
        match up.read(&mut buf) {
            Ok(0) => {
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.conn.complete_io(&mut tls.sock);
                return;
            }
            Ok(n) => {
                if tls.write_all(&buf[..n]).and_then(|()| tls.flush()).is_err() {
                    return;
                }
            }
            Err(e) if idle(&e) => {}
            Err(_) => return,
        }
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn https_private_ca_and_mtls_on(driver: &str) {
    let pki = Pki::new();
    let server_leaf = pki.leaf("127.0.0.1", true);
    let cp_client = pki.leaf("tunnel control-plane client", false);
    let mcp_client = pki.leaf("tunnel mcp client", false);
    let own_client = pki.leaf("tunnel per-entry client", false);
    let cp = plane();
    let server = reference_server();
    let (cp_tls, cp_seen) = terminator(&pki, &server_leaf, true, cp.local_addr());
    let (mcp_tls, mcp_seen) = terminator(&pki, &server_leaf, true, server.local_addr());
    // A second server whose entry names its own certificate (`client-cert=`/`client-key=`).
    let (own_tls, own_seen) = terminator(&pki, &server_leaf, true, server.local_addr());
    let dir = scratch(&format!("mtls-{driver}"));
    let ca = write(&dir, "ca.pem", &pki.ca_pem);
    let cp_cert = write(&dir, "cp.pem", &cp_client.cert_pem);
    let cp_key = write(&dir, "cp.key", &cp_client.key_pem);
    let mcp_cert = write(&dir, "mcp.pem", &mcp_client.cert_pem);
    let mcp_key = write(&dir, "mcp.key", &mcp_client.key_pem);
    let own_cert = write(&dir, "own.pem", &own_client.cert_pem);
    let own_key = write(&dir, "own.key", &own_client.key_pem);
    let mcp_path = server
        .url()
        .rsplit_once('/')
        .map(|(_, p)| p.to_owned())
        .unwrap();
    let url_file = dir.join("health.url");
    let base = format!("https://127.0.0.1:{}", cp_tls.port());
    let mcp_url = format!("https://127.0.0.1:{}/{mcp_path}", mcp_tls.port());
    let own_entry = format!(
        "channel=own,url=https://127.0.0.1:{}/{mcp_path},client-cert={own_cert},client-key=file:{own_key}",
        own_tls.port()
    );
    let url_file_s = url_file.display().to_string();
    let plain: Vec<&str> = vec![
        "tunnel",
        "run",
        "--driver",
        driver,
        "--control-plane.base-url",
        &base,
        "--control-plane.tunnel-id",
        GO_TUNNEL,
        "--control-plane.poll-timeout",
        "1s",
        "--mcp.server-url",
        &mcp_url,
        "--mcp.server-url",
        &own_entry,
        "--health.listen-addr",
        "127.0.0.1:0",
        "--health.url-file",
        &url_file_s,
        "--harpoon.oauth-discovery=false",
    ];
    let mut with_tls = plain.clone();
    with_tls.extend([
        "--ca-bundle",
        &ca,
        "--control-plane.client-cert",
        &cp_cert,
        "--control-plane.client-key",
        &cp_key,
    ]);
    // The MCP pair through the environment, the Go client's variables.
    let mut run = Run::start(
        &with_tls,
        &[
            ("CONTROL_PLANE_API_KEY", KEY),
            ("MCP_CLIENT_CERT", &mcp_cert),
            ("MCP_CLIENT_KEY", &format!("file:{mcp_key}")),
        ],
    );
    run.health_url(&url_file);
    assert_serves_the_reference_tools(&cp, "main");
    assert_serves_the_reference_tools(&cp, "own");
    assert_serves_the_reference_tools(&cp, "main");
    let out = run.stop();
    // Each server saw exactly its own client certificate, on every connection: the entry's
    // own one for `own`, the route's for `main`.
    let own_clients = std::mem::take(&mut own_seen.lock().unwrap().clients);
    assert!(!own_clients.is_empty(), "{out}");
    assert!(
        own_clients
            .iter()
            .all(|c| c.as_deref() == Some(&own_client.der[..])),
        "{out}"
    );
    let cp_clients = std::mem::take(&mut cp_seen.lock().unwrap().clients);
    assert!(!cp_clients.is_empty(), "{out}");
    assert!(
        cp_clients
            .iter()
            .all(|c| c.as_deref() == Some(&cp_client.der[..])),
        "{out}"
    );
    let mcp_clients = std::mem::take(&mut mcp_seen.lock().unwrap().clients);
    assert!(!mcp_clients.is_empty(), "{out}");
    assert!(
        mcp_clients
            .iter()
            .all(|c| c.as_deref() == Some(&mcp_client.der[..])),
        "{out}"
    );
    assert!(cp_seen.lock().unwrap().failures.is_empty(), "{out}");
    assert!(
        out.contains("tls trust roots=system") && out.contains("ca_bundle=1"),
        "{out}"
    );
    assert!(!out.contains(KEY) && !out.contains("PRIVATE KEY"), "{out}");

    // Without the CA bundle the control plane's certificate is not trusted: no poll gets
    // through (the handshake fails at the terminator, which never sees a request).
    let before = cp.plane().polls(GO_TUNNEL).len();
    let mut run = Run::start(&plain, &[("CONTROL_PLANE_API_KEY", KEY)]);
    run.health_url(&url_file);
    wait_for("a refused handshake", || {
        (!cp_seen.lock().unwrap().failures.is_empty()).then_some(())
    });
    // The poll's failure says which certificate problem, for which host.
    let host = format!("127.0.0.1:{}", cp_tls.port());
    wait_for("the poll failure's cause", || {
        run.output()
            .lines()
            .find(|l| l.contains("poll failed") && l.contains("invalid peer certificate"))
            .map(|l| assert!(l.contains(&host), "{l}"))
    });
    run.stop();
    assert_eq!(cp.plane().polls(GO_TUNNEL).len(), before);
}

#[test]
fn a_private_ca_and_mtls_on_the_blocking_driver() {
    https_private_ca_and_mtls_on("blocking");
}

#[test]
fn a_private_ca_and_mtls_on_the_smol_driver() {
    https_private_ca_and_mtls_on("smol");
}

#[test]
fn a_client_certificate_without_its_key_is_refused_by_name() {
    let dir = scratch("half-pair");
    let pki = Pki::new();
    let leaf = pki.leaf("c", false);
    let cert = write(&dir, "c.pem", &leaf.cert_pem);
    let refused = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args([
                "tunnel",
                "run",
                "--control-plane.tunnel-id",
                GO_TUNNEL,
                "--control-plane.api-key",
                "sk-x",
                "--mcp.server-url",
                "http://127.0.0.1:9/mcp",
            ])
            .args(extra)
            .env_clear()
            .output()
            .unwrap()
    };
    let out = refused(&["--mcp.client-cert", &cert]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "mcpwire: invalid --mcp.client-cert: the client certificate needs its key (--mcp.client-key)\n"
    );
    // A key file that holds no key: named, its bytes never shown.
    let not_key = write(&dir, "k.pem", &leaf.cert_pem);
    let out = refused(&["--mcp.client-cert", &cert, "--mcp.client-key", &not_key]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("mcpwire: the client key --mcp.client-key ({not_key}): no PEM private key in it (PKCS#8, PKCS#1 or SEC1)\n")
    );
    // A key that is not the certificate's: refused at start-up (ureq would panic on the pair
    // at the first connection).
    let other = pki.leaf("someone else", false);
    let wrong_key = write(&dir, "other.key", &other.key_pem);
    let out = refused(&[
        "--control-plane.client-cert",
        &cert,
        "--control-plane.client-key",
        &wrong_key,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "mcpwire: the client certificate --control-plane.client-cert ({cert}): its public key \
             is not the key in --control-plane.client-key ({wrong_key})\n"
        )
    );
}

// ---------------------------------------------------------------------------------------------
// Through a real forward proxy: proxy.py (PyPI, pinned), with basic authentication.

const PROXY_PY: &str = "2.4.10";
const PROXY_USER: &str = "tunnel";
const PROXY_PASSWORD: &str = "s3cret-proxy-pw";

/// proxy.py on 127.0.0.1 (its own port), requiring basic authentication; its log lines kept.
struct Proxy {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl Proxy {
    fn start(dir: &Path) -> Proxy {
        let python = pinned_python(
            "MCPWIRE_PY_PEER_PYTHON",
            "proxy.py",
            PROXY_PY,
            "run scripts/test (it installs proxy.py into .venv-peers), or set \
             MCPWIRE_PY_PEER_PYTHON to a Python with proxy.py==2.4.10",
        );
        let port_file = dir.join("proxy.port");
        let mut child = Command::new(python)
            .args(["-m", "proxy", "--hostname", "127.0.0.1", "--port", "0"])
            .arg("--port-file")
            .arg(&port_file)
            // A thread per connection: its default event loop (threadless) held a long poll's
            // answer for seconds on this sandbox's kernel.
            .args(["--threaded", "--num-workers", "1", "--log-level", "INFO"])
            .arg("--basic-auth")
            .arg(format!("{PROXY_USER}:{PROXY_PASSWORD}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = capture(&mut child);
        let port = wait_for("proxy.py's port file", || {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("proxy.py exited ({status}): {}", log.lock().unwrap());
            }
            std::fs::read_to_string(&port_file)
                .ok()?
                .trim()
                .parse()
                .ok()
        });
        Proxy { child, port, log }
    }

    fn url(&self) -> String {
        format!(
            "http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{}",
            self.port
        )
    }

    /// The `host:port` of every CONNECT proxy.py tunnelled.
    fn tunnelled(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains("access_log"))
            .filter_map(|l| l.split(" - CONNECT ").nth(1))
            .filter_map(|rest| rest.split(' ').next())
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A host name for 127.0.0.1 other than `localhost` (from /etc/hosts): the Go client's rule
/// never takes loopback addresses or `localhost` through an environment proxy, so NO_PROXY is
/// tested with such a name.
fn loopback_alias() -> String {
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    hosts
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let addr = words.next()?;
            addr.starts_with("127.").then(|| words.collect::<Vec<_>>())
        })
        .flatten()
        .find(|n| !n.eq_ignore_ascii_case("localhost") && !n.ends_with(".localhost"))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            panic!("this test needs a name for 127.0.0.1 besides localhost in /etc/hosts:\n{hosts}")
        })
}

fn through_a_forward_proxy_on(driver: &str) {
    let dir = scratch(&format!("proxy-{driver}"));
    let proxy = Proxy::start(&dir);
    let cp = plane();
    let server = reference_server();
    let mcp_path = server
        .url()
        .rsplit_once('/')
        .map(|(_, p)| p.to_owned())
        .unwrap();

    // 1. An explicit proxy carries everything (loopback too), TLS inside the CONNECT tunnel:
    // a CA made here, trusted with --ca-bundle, and mTLS required by both servers.
    let pki = Pki::new();
    let server_leaf = pki.leaf("127.0.0.1", true);
    let client = pki.leaf("tunnel client", false);
    let (cp_tls, cp_seen) = terminator(&pki, &server_leaf, true, cp.local_addr());
    let (mcp_tls, mcp_seen) = terminator(&pki, &server_leaf, true, server.local_addr());
    let ca = write(&dir, "ca.pem", &pki.ca_pem);
    let cert = write(&dir, "client.pem", &client.cert_pem);
    let key = write(&dir, "client.key", &client.key_pem);
    let url_file = dir.join("health.url");
    let url_file_s = url_file.display().to_string();
    let cp_base = format!("https://127.0.0.1:{}", cp_tls.port());
    let mcp_url = format!("https://127.0.0.1:{}/{mcp_path}", mcp_tls.port());
    let mut run = Run::start(
        &[
            "run",
            "--driver",
            driver,
            "--control-plane.base-url",
            &cp_base,
            "--control-plane.tunnel-id",
            GO_TUNNEL,
            "--control-plane.poll-timeout",
            "1s",
            "--mcp.server-url",
            &mcp_url,
            "--health.listen-addr",
            "127.0.0.1:0",
            "--health.url-file",
            &url_file_s,
            "--harpoon.oauth-discovery=false",
            "--ca-bundle",
            &ca,
            "--control-plane.client-cert",
            &cert,
            "--control-plane.client-key",
            &key,
            "--mcp.client-cert",
            &cert,
            "--mcp.client-key",
            &key,
        ],
        &[
            ("CONTROL_PLANE_API_KEY", KEY),
            ("TUNNEL_CLIENT_HTTP_PROXY", &proxy.url()),
        ],
    );
    run.health_url(&url_file);
    let names = tool_names_of(&cp, "main", Some(&run));
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    let out = run.stop();
    let tunnelled = proxy.tunnelled();
    for port in [cp_tls.port(), mcp_tls.port()] {
        let want = format!("127.0.0.1:{port}");
        assert!(
            tunnelled.contains(&want),
            "{want} not in {tunnelled:?}\n{out}"
        );
    }
    assert!(!cp_seen.lock().unwrap().clients.is_empty());
    assert!(!mcp_seen.lock().unwrap().clients.is_empty());
    // The proxy's password never reaches the log, nor its Basic form.
    assert!(!out.contains(PROXY_PASSWORD), "{out}");
    let basic = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{PROXY_USER}:{PROXY_PASSWORD}"))
    };
    assert!(!out.contains(&basic), "{out}");

    // 2. The environment's HTTP_PROXY: a name for 127.0.0.1 goes through it; the control
    // plane, on a loopback address, does not (the Go client's rule).
    let alias = loopback_alias();
    let mcp_by_name = format!("http://{alias}:{}/{mcp_path}", server.local_addr().port());
    let before = proxy.tunnelled().len();
    let env_run = |no_proxy: Option<&str>| {
        // A control plane per run: the dev control plane hands a command to a poll whose
        // client has just stopped (its connection not yet seen closed), where it would wait.
        let cp = plane();
        let mut env = vec![
            ("CONTROL_PLANE_API_KEY", KEY.to_owned()),
            ("HTTP_PROXY", proxy.url()),
        ];
        if let Some(n) = no_proxy {
            env.push(("NO_PROXY", n.to_owned()));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let base = cp.base_url();
        let mut run = Run::start(
            &[
                "tunnel",
                "run",
                "--driver",
                driver,
                "--control-plane.base-url",
                &base,
                "--control-plane.tunnel-id",
                GO_TUNNEL,
                "--control-plane.poll-timeout",
                "1s",
                "--mcp.server-url",
                &mcp_by_name,
                "--health.listen-addr",
                "127.0.0.1:0",
                "--health.url-file",
                &url_file_s,
                "--harpoon.oauth-discovery=false",
            ],
            &env,
        );
        run.health_url(&url_file);
        let names = tool_names_of(&cp, "main", Some(&run));
        assert!(names.iter().any(|n| n == "echo"), "{names:?}");
        (run.stop(), cp.local_addr().port())
    };
    let (out, cp_port) = env_run(None);
    let want = format!("{alias}:{}", server.local_addr().port());
    // proxy.py logs a tunnel when it closes (the client's exit closes it).
    let now = wait_for("the proxy's log of the MCP tunnel", || {
        let now = proxy.tunnelled().split_off(before);
        now.contains(&want).then_some(now)
    });
    assert!(
        !now.iter().any(|t| t.ends_with(&format!(":{cp_port}"))),
        "{now:?}\n{out}"
    );
    assert!(!out.contains(PROXY_PASSWORD), "{out}");

    // 3. NO_PROXY names the host: it is reached directly.
    let before = proxy.tunnelled().len();
    let (out, _) = env_run(Some(&format!("example.invalid, {alias}")));
    thread::sleep(Duration::from_millis(500));
    let now: Vec<String> = proxy.tunnelled().split_off(before);
    assert!(now.is_empty(), "{now:?}\n{out}");

    // 3. A server entry's own http-proxy=: that server's forwards take it, the control plane
    // (no proxy of its own) goes straight.
    let cp = plane();
    let before = proxy.tunnelled().len();
    let url_file = dir.join("health3.url");
    let entry = format!(
        "channel=main,url={},http-proxy=env:ENTRY_PROXY",
        server.url()
    );
    let mut run = tunnel_run(
        driver,
        &cp.base_url(),
        &url_file,
        &["--mcp.server-url", &entry],
        &[
            ("CONTROL_PLANE_API_KEY", KEY),
            ("ENTRY_PROXY", &proxy.url()),
        ],
    );
    run.health_url(&url_file);
    let names = tool_names_of(&cp, "main", Some(&run));
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    let out = run.stop();
    let tunnelled: Vec<String> = proxy.tunnelled().into_iter().skip(before).collect();
    let mcp_port = format!("127.0.0.1:{}", server.local_addr().port());
    let cp_port = format!("127.0.0.1:{}", cp.local_addr().port());
    assert!(tunnelled.contains(&mcp_port), "{tunnelled:?}\n{out}");
    assert!(!tunnelled.contains(&cp_port), "{tunnelled:?}\n{out}");
    assert!(!out.contains(PROXY_PASSWORD), "{out}");
}

#[test]
fn through_a_forward_proxy_on_the_blocking_driver() {
    through_a_forward_proxy_on("blocking");
}

#[test]
fn through_a_forward_proxy_on_the_smol_driver() {
    through_a_forward_proxy_on("smol");
}

/// An unreachable control plane: each failed poll says why and for which host, on both
/// drivers.
#[test]
fn a_failed_poll_says_why_and_for_which_host() {
    for driver in ["blocking", "smol"] {
        let dir = scratch(&format!("refused-{driver}"));
        let port = free_addr().port();
        let base = format!("http://127.0.0.1:{port}");
        let url_file = dir.join("health.url");
        let mut run = tunnel_run(
            driver,
            &base,
            &url_file,
            &["--mcp.command", "true"],
            &[("CONTROL_PLANE_API_KEY", KEY)],
        );
        run.health_url(&url_file);
        let line = wait_for("a poll failure", || {
            run.output()
                .lines()
                .find(|l| l.contains("poll failed"))
                .map(str::to_owned)
        });
        assert!(
            line.contains(&format!("cause=\"connection refused (127.0.0.1:{port})\"")),
            "{driver}: {line}"
        );
        let meta = wait_for("the metadata fetch's failure", || {
            run.output()
                .lines()
                .find(|l| l.contains("tunnel metadata fetch failed"))
                .map(str::to_owned)
        });
        assert!(
            meta.contains(" WARN  tunnel metadata fetch failed"),
            "{meta}"
        );
        assert!(
            meta.contains(&format!("connection refused (127.0.0.1:{port})")),
            "{driver}: {meta}"
        );
        let out = run.stop();
        assert!(!out.contains(KEY), "{out}");
    }
}

/// `mcpwire tunnel health`: OK against a serving client (its URL file, pid file and one
/// successful poll), exit 2 with the failing check named otherwise.
#[test]
fn tunnel_health_probes_a_running_client() {
    let cp = plane();
    let server = reference_server();
    let dir = scratch("health-probe");
    let url_file = dir.join("health.url").display().to_string();
    let pid_file = dir.join("tunnel.pid").display().to_string();
    let base = cp.base_url();
    let mcp = server.url();
    let mut run = Run::start(
        &[
            "tunnel",
            "run",
            "--control-plane.base-url",
            &base,
            "--control-plane.tunnel-id",
            GO_TUNNEL,
            "--control-plane.poll-timeout",
            "1s",
            "--mcp.server-url",
            &mcp,
            "--health.listen-addr",
            "127.0.0.1:0",
            "--health.url-file",
            &url_file,
            "--pid.file",
            &pid_file,
            "--harpoon.oauth-discovery=false",
        ],
        &[("CONTROL_PLANE_API_KEY", KEY)],
    );
    let health = run.health_url(Path::new(&url_file));
    let probe = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(["tunnel", "health"])
            .args(args)
            .env_clear()
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Once a poll has succeeded, every check passes.
    let ok = wait_for("a passing probe", || {
        let r = probe(&[
            "--url-file",
            &url_file,
            "--require-control-plane-poll",
            "--pid-file",
            &pid_file,
        ]);
        (r.0 == Some(0)).then_some(r)
    });
    let pid = run.child.id();
    assert!(ok.1.starts_with(&format!("Base URL: {health}\nHealthz: PASS | 200 {health}/healthz\nReadyz: PASS | 200 {health}/readyz\nControl-plane poll: PASS | last_success_unix_seconds=")), "{}", ok.1);
    assert!(
        ok.1.ends_with(&format!("Process: PASS | pid={pid} running\nResult: OK\n")),
        "{}",
        ok.1
    );
    let (code, json, _) = probe(&["--url", &format!("{health}/readyz"), "--json"]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["result"], "ok", "{v}");
    run.stop();
    // The client is gone: the URL file is removed and its port refuses.
    let (code, _, err) = probe(&["--url-file", &url_file]);
    assert_eq!(code, Some(2));
    assert!(
        err.starts_with(&format!("mcpwire: cannot read {url_file}: ")),
        "{err}"
    );
    let port = health.rsplit(':').next().unwrap().to_owned();
    let (code, out, _) = probe(&["--port", &port]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("Healthz: FAIL |") && out.ends_with("Result: FAIL\n"),
        "{out}"
    );
    let (code, _, err) = probe(&[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        "mcpwire: choose exactly one of --url, --url-file or --port\n"
    );
}

/// `mcpwire tunnel doctor`, its output checked whole: a healthy setup, a wrong key (401 from the
/// local control plane), an unreachable MCP server, a missing stdio command. The key never
/// appears.
#[test]
fn doctor_says_what_works_and_what_to_do() {
    let cp = plane();
    let server = reference_server();
    let base = cp.base_url();
    let mcp = server.url();
    let doctor = |key: &str, extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args([
                "tunnel",
                "doctor",
                "--control-plane.base-url",
                &base,
                "--control-plane.tunnel-id",
                GO_TUNNEL,
                "--control-plane.api-key",
                "env:DOCTOR_KEY",
                "--health.listen-addr",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env_clear()
            .env("DOCTOR_KEY", key)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!text.contains(key), "{text}");
        (out.status.code(), text)
    };
    let head = "CHECK config           ok    flags and environment load (no config file)\n\
        CHECK tunnel_id        ok    tunnel_0123456789abcdef0123456789abcdef\n\
        CHECK api_key          ok    present (from --control-plane.api-key); its value is never shown\n";
    let cp_ok = format!(
        "CHECK control_plane    ok    {base} answers GET /v1/tunnels/{{id}} with 200: the key is accepted for this tunnel\n"
    );
    let tail = "CHECK cloudflared      ok    not used\n\
        CHECK health_listener  ok    127.0.0.1:0 can be bound (a free port at each start)\n";
    let main_ok = format!(
        "CHECK mcp.main         ok    {mcp} speaks MCP 2026-07-28 (modern) and lists its tools\n"
    );

    // Healthy.
    let (code, text) = doctor(KEY, &["--mcp.server-url", &mcp]);
    assert_eq!(text, format!("{head}{cp_ok}{main_ok}{tail}RESULT ok\n"));
    assert_eq!(code, Some(0));

    // A wrong key: the local control plane answers 401.
    let (code, text) = doctor("sk-not-the-key", &["--mcp.server-url", &mcp]);
    assert_eq!(
        text,
        format!(
            "{head}CHECK control_plane    fail  {base} refuses the API key for this tunnel (401 invalid_api_key): \
             check that the key is a runtime key with Tunnels Read and Use for this tunnel id\n\
             {main_ok}{tail}RESULT fail: control_plane\n"
        )
    );
    assert_eq!(code, Some(2));

    // An MCP server that is not there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gone = format!("http://127.0.0.1:{port}/mcp");
    let (code, text) = doctor(KEY, &["--mcp.server-url", &gone]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "{text}");
    assert!(
        lines[4].starts_with(&format!(
            "CHECK mcp.main         fail  no MCP answer: {gone}: "
        )),
        "{text}"
    );
    assert!(lines[4].contains("Connection refused"), "{text}");
    assert!(
        lines[4].ends_with(": check --mcp.server-url and that the server runs"),
        "{text}"
    );
    assert_eq!(lines[7], "RESULT fail: mcp.main");
    assert_eq!(code, Some(2));

    // A stdio command that is not installed.
    let (code, text) = doctor(KEY, &["--mcp.command", "mcpwire-no-such-server --stdio"]);
    assert_eq!(
        text,
        format!(
            "{head}{cp_ok}CHECK mcp.main         fail  stdio command \"mcpwire-no-such-server\" is not found on PATH: \
             install it, or give its full path in --mcp.command\n{tail}RESULT fail: mcp.main\n"
        )
    );
    assert_eq!(code, Some(2));
}

/// `/metrics` is Prometheus text a parser reads whole, with the Go client's names (and ours)
/// counting what happened.
#[test]
fn metrics_parse_as_prometheus_text_with_the_go_clients_names() {
    let cp = plane();
    let server = reference_server();
    let dir = scratch("metrics");
    let url_file = dir.join("health.url");
    let url_file_s = url_file.display().to_string();
    let base = cp.base_url();
    let mcp = server.url();
    let mut run = Run::start(
        &[
            "tunnel",
            "run",
            "--control-plane.base-url",
            &base,
            "--control-plane.tunnel-id",
            GO_TUNNEL,
            "--control-plane.poll-timeout",
            "1s",
            "--mcp.server-url",
            &mcp,
            "--health.listen-addr",
            "127.0.0.1:0",
            "--health.url-file",
            &url_file_s,
            "--harpoon.oauth-discovery=false",
        ],
        &[("CONTROL_PLANE_API_KEY", KEY)],
    );
    let health = run.health_url(&url_file);
    assert_serves_the_reference_tools(&cp, "main");
    // The command's outcome is counted once its response POST is answered, which may be a
    // moment after the caller has its reply: scrape until it shows.
    let text = wait_for("a completed command in /metrics", || {
        let text = http("GET", &format!("{health}/metrics"), &[], None).body;
        text.lines()
            .any(|l| l.starts_with("mcpwire_tunnel_commands_total{outcome=\"completed\"}"))
            .then_some(text)
    });
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text");
    let value = |name: &str| -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .unwrap_or_else(|| panic!("no {name} in\n{text}"));
        match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => panic!("{name} is not a number"),
        }
    };
    assert!(value("commands_poll_cycles_total") >= 1.0, "{text}");
    assert!(
        value("commands_poll_last_successful_timestamp_seconds") > 1.7e9,
        "{text}"
    );
    assert_eq!(value("commands_poll_errors_total"), 0.0, "{text}");
    assert_eq!(value("commands_queue_length"), 0.0, "{text}");
    assert_eq!(value("dispatcher_worker_pool_occupancy"), 0.0, "{text}");
    assert_eq!(
        value("commands_poll_cycles_total"),
        value("mcpwire_tunnel_polls_total")
    );
    // The commands the polls carried, all admitted; the capacities are the Go defaults.
    assert!(value("commands_polled_total") >= 1.0, "{text}");
    assert_eq!(
        value("commands_enqueued_total"),
        value("commands_polled_total")
    );
    assert_eq!(value("commands_queue_drops_total"), 0.0, "{text}");
    assert_eq!(value("commands_queue_capacity"), 20.0, "{text}");
    assert_eq!(value("dispatcher_worker_pool_capacity"), 10.0, "{text}");
    assert_eq!(value("liveness"), 1.0, "{text}");
    assert_eq!(value("readiness"), 1.0, "{text}");
    // Poll errors by kind, both kinds present from the start.
    for kind in ["other", "timeout"] {
        assert!(
            scrape
                .samples
                .iter()
                .any(|s| s.metric == "commands_poll_errors_total"
                    && s.labels.get("error_kind") == Some(kind)),
            "{text}"
        );
    }
    // The end-to-end latency of the tools/list call, with the Go client's labels.
    let e2e = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "command_end_to_end_latency_milliseconds"
                && s.labels.get("request_kind") == Some("call")
                && s.labels.get("request_method") == Some("tools/list")
                && s.labels.get("channel") == Some("main")
                && s.labels.get("tunnel_id") == Some(GO_TUNNEL)
                && s.labels.get("tunnel_service_status") == Some("200")
                && s.labels.get("latency_type") == Some("poll_to_response")
        })
        .unwrap_or_else(|| panic!("no command_end_to_end_latency_milliseconds in\n{text}"));
    assert!(matches!(&e2e.value, prometheus_parse::Value::Histogram(b) if !b.is_empty()));
    // The same from the command's created_at (the dev control plane stamps it), and its age.
    assert!(
        scrape.samples.iter().any(|s| {
            s.metric == "command_end_to_end_latency_milliseconds"
                && s.labels.get("request_method") == Some("tools/list")
                && s.labels.get("latency_type") == Some("enqueue_to_response")
        }),
        "{text}"
    );
    let age = scrape
        .samples
        .iter()
        .find(|s| s.metric == "commands_age_seconds")
        .unwrap_or_else(|| panic!("no commands_age_seconds in\n{text}"));
    let prometheus_parse::Value::Histogram(buckets) = &age.value else {
        panic!("commands_age_seconds is not a histogram: {text}");
    };
    assert!(
        buckets
            .iter()
            .any(|b| b.less_than.is_infinite() && b.count >= 1.0),
        "{text}"
    );
    // The poll latency histogram: answered polls counted under error="false".
    let answered = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "commands_poll_latency_seconds" && s.labels.get("error") == Some("false")
        })
        .unwrap_or_else(|| panic!("no commands_poll_latency_seconds in\n{text}"));
    let prometheus_parse::Value::Histogram(buckets) = &answered.value else {
        panic!("commands_poll_latency_seconds is not a histogram: {text}");
    };
    let inf = buckets.iter().find(|b| b.less_than.is_infinite()).unwrap();
    assert!(inf.count >= 1.0, "{text}");
    let completed = scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == "mcpwire_tunnel_commands_total"
                && s.labels.get("outcome") == Some("completed")
        })
        .expect("a completed command");
    assert!(matches!(completed.value, prometheus_parse::Value::Counter(v) if v >= 1.0));
    // Every sample has HELP and TYPE: the parser knew each one's kind (prometheus-parse files
    // a histogram's `_sum` and `_count` lines as untyped: they are checked by the TYPE line of
    // their histogram).
    let histograms: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" histogram"))
        .collect();
    for s in &scrape.samples {
        let part_of_histogram = ["_sum", "_count"].iter().any(|suffix| {
            s.metric
                .strip_suffix(suffix)
                .is_some_and(|base| histograms.contains(&base))
        });
        if part_of_histogram {
            continue;
        }
        assert!(
            !matches!(s.value, prometheus_parse::Value::Untyped(_)),
            "{} has no TYPE",
            s.metric
        );
    }
    run.stop();
}

/// A port on 127.0.0.1 with nothing listening (bound, then closed).
fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `mcpwire tunnel run` on `driver` against the control plane at `base`, its health URL written
/// to `url_file`, with `extra` arguments.
fn tunnel_run(
    driver: &str,
    base: &str,
    url_file: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let url_file = url_file.display().to_string();
    let mut args = vec![
        "tunnel",
        "run",
        "--driver",
        driver,
        "--control-plane.base-url",
        base,
        "--control-plane.tunnel-id",
        GO_TUNNEL,
        "--harpoon.oauth-discovery=false",
        "--health.listen-addr",
        "127.0.0.1:0",
        "--health.url-file",
        &url_file,
    ];
    args.extend_from_slice(extra);
    Run::start(&args, env)
}

/// `--mcp.startup-wait-timeout`: no poll before the main MCP server answers, `/readyz` says
/// why meanwhile; a server that comes up late is waited for; a wait that passes keeps `/readyz`
/// at 503 and polling starts anyway (the Go client's fail-open rule). Both drivers.
#[test]
fn the_startup_wait_holds_the_first_poll_until_the_mcp_server_answers() {
    for driver in ["blocking", "smol"] {
        let cp = plane();
        let dir = scratch(&format!("startup-wait-{driver}"));
        // A port with nothing listening yet: the server starts there later.
        let addr = free_addr();
        let url = format!("http://{addr}/mcp");
        let url_file = dir.join("health.url");
        let mut run = tunnel_run(
            driver,
            &cp.base_url(),
            &url_file,
            &[
                "--mcp.server-url",
                &url,
                "--mcp.startup-wait-timeout",
                "60s",
                "--mcp.extra-headers",
                "X-Probe-Key: env:PROBE_KEY",
            ],
            &[("CONTROL_PLANE_API_KEY", KEY), ("PROBE_KEY", HEADER_SECRET)],
        );
        let health = run.health_url(&url_file);
        wait_for("a retried probe", || {
            run.output()
                .contains("retrying MCP startup probe")
                .then_some(())
        });
        let ready = http("GET", &format!("{health}/readyz"), &[], None);
        assert_eq!(ready.status, 503, "{driver}");
        assert!(
            ready.body.contains("mcp startup probe pending"),
            "{driver}: {}",
            ready.body
        );
        assert!(
            cp.plane().polls(GO_TUNNEL).is_empty(),
            "{driver}: polled before the server answered"
        );
        // The server comes up: the probe answers, then the client polls and serves.
        let server = mcpwire_dev::mcp_server::McpServer::start_http(
            mcpwire_dev::mcp_server::Config::default(),
            addr,
        )
        .unwrap();
        wait_for("the first poll", || {
            (!cp.plane().polls(GO_TUNNEL).is_empty()).then_some(())
        });
        assert_serves_the_reference_tools(&cp, "main");
        let ready = http("GET", &format!("{health}/readyz"), &[], None);
        assert_eq!(ready.status, 200, "{driver}: {}", ready.body);
        // The probe carried the operator's header (its first request on the server).
        let first = server.server().requests().into_iter().next().unwrap();
        assert_eq!(first.method.as_deref(), Some("ping"), "{driver}");
        assert!(
            first
                .headers
                .iter()
                .any(|(n, v)| n.eq_ignore_ascii_case("X-Probe-Key") && v == HEADER_SECRET),
            "{driver}: {:?}",
            first.headers
        );
        let out = run.stop();
        assert!(out.contains("mcp startup probe done"), "{driver}: {out}");
        assert!(!out.contains(HEADER_SECRET), "{driver}: {out}");

        // A wait that passes: polling starts anyway, /readyz stays 503 with the reason.
        let cp = plane();
        let url = format!("http://{}/mcp", free_addr());
        let url_file = dir.join("health2.url");
        let mut run = tunnel_run(
            driver,
            &cp.base_url(),
            &url_file,
            &[
                "--mcp.server-url",
                &url,
                "--mcp.startup-wait-timeout",
                "700ms",
            ],
            &[("CONTROL_PLANE_API_KEY", KEY)],
        );
        let health = run.health_url(&url_file);
        wait_for("polling after the failed wait", || {
            (!cp.plane().polls(GO_TUNNEL).is_empty()).then_some(())
        });
        let ready = http("GET", &format!("{health}/readyz"), &[], None);
        assert_eq!(ready.status, 503, "{driver}");
        assert!(
            ready.body.contains(&format!(
                "mcp startup wait failed: no answer from {url} within 700ms: connection refused"
            )),
            "{driver}: {}",
            ready.body
        );
        let out = run.stop();
        assert!(out.contains("mcp startup probe failed"), "{driver}: {out}");
    }
}

/// A Unix-socket server's stand-in: accepts on `socket` and relays each connection to
/// `backend` (TCP); counts the connections.
#[cfg(unix)]
fn unix_relay(socket: &Path, backend: std::net::SocketAddr) -> Arc<AtomicUsize> {
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let n = Arc::clone(&accepted);
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            n.fetch_add(1, Ordering::SeqCst);
            let Ok(up) = std::net::TcpStream::connect(backend) else {
                continue;
            };
            let (mut down_r, mut up_w) = (conn.try_clone().unwrap(), up.try_clone().unwrap());
            thread::spawn(move || {
                let _ = std::io::copy(&mut down_r, &mut up_w);
                let _ = up_w.shutdown(std::net::Shutdown::Write);
            });
            let (mut up_r, mut down_w) = (up, conn);
            thread::spawn(move || {
                let _ = std::io::copy(&mut up_r, &mut down_w);
                let _ = down_w.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    accepted
}

/// `unix-socket=` in a `--mcp.server-url` entry (the Go client's): that server's requests go
/// to the socket, with the URL's host as `Host`, while another entry's go over TCP; the
/// start-up wait retries while the socket does not exist yet (the Go client's rule). Both
/// drivers.
#[cfg(unix)]
#[test]
fn a_server_entry_on_a_unix_socket_is_reached_over_it() {
    for driver in ["blocking", "smol"] {
        let cp = plane();
        let server = reference_server();
        let dir = scratch(&format!("mcp-unix-{driver}"));
        let socket = dir.join("mcp.sock");
        let path = server
            .url()
            .rsplit_once('/')
            .map(|(_, p)| p.to_owned())
            .unwrap();
        let entry = format!(
            "url=http://mcp-over-socket.invalid/{path},unix-socket={}",
            socket.display()
        );
        let direct = format!("channel=direct,url={}", server.url());
        let url_file = dir.join("health.url");
        let mut run = tunnel_run(
            driver,
            &cp.base_url(),
            &url_file,
            &[
                "--mcp.server-url",
                &entry,
                "--mcp.server-url",
                &direct,
                "--mcp.startup-wait-timeout",
                "60s",
            ],
            &[("CONTROL_PLANE_API_KEY", KEY)],
        );
        run.health_url(&url_file);
        // No socket yet: the probe retries instead of failing.
        wait_for("a retried probe", || {
            run.output()
                .contains("retrying MCP startup probe")
                .then_some(())
        });
        assert!(cp.plane().polls(GO_TUNNEL).is_empty(), "{driver}");
        let accepted = unix_relay(&socket, server.local_addr());
        wait_for("the first poll", || {
            (!cp.plane().polls(GO_TUNNEL).is_empty()).then_some(())
        });
        assert_serves_the_reference_tools(&cp, "main");
        let through_socket = accepted.load(Ordering::SeqCst);
        assert!(through_socket > 0, "{driver}: {}", run.output());
        assert_serves_the_reference_tools(&cp, "direct");
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            through_socket,
            "{driver}: the direct channel's request went to the socket"
        );
        // `doctor` reaches the entry over its socket too.
        let doctor = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args([
                "tunnel",
                "doctor",
                "--control-plane.base-url",
                &cp.base_url(),
            ])
            .args([
                "--control-plane.tunnel-id",
                GO_TUNNEL,
                "--mcp.server-url",
                &entry,
            ])
            .env_clear()
            .env("CONTROL_PLANE_API_KEY", KEY)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&doctor.stdout);
        let line = format!(
            "CHECK mcp.main         ok    http://mcp-over-socket.invalid/{path} is up over the \
             Unix socket {}: it answers the start-up probe (HTTP 400); its MCP era is not \
             checked on this transport\n",
            socket.display()
        );
        assert!(report.contains(&line), "{driver}: {report}");
        let out = run.stop();
        // The socket's requests name the URL's host; the direct entry's never went there.
        let hosts: Vec<String> = server
            .server()
            .requests()
            .iter()
            .filter_map(|r| {
                r.headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("host"))
                    .map(|(_, v)| v.clone())
            })
            .collect();
        assert!(
            hosts.iter().any(|h| h == "mcp-over-socket.invalid"),
            "{driver}: {hosts:?}\n{out}"
        );
        assert!(
            hosts.iter().any(|h| h.starts_with("127.0.0.1:")),
            "{driver}: {hosts:?}\n{out}"
        );
        assert!(out.contains("mcp startup probe done"), "{driver}: {out}");
    }
}

/// `--health.unix-socket`: the health listener on a Unix socket (the listen address ignored), a
/// stale socket replaced, a file that is not a socket refused by name, the URL file in the Go
/// client's `http+unix://<base64url path>` form that `tunnel health` reads, the socket removed
/// at exit.
#[cfg(unix)]
#[test]
fn the_health_listener_serves_on_a_unix_socket() {
    use std::io::Write as _;
    let cp = plane();
    let server = reference_server();
    let dir = scratch("health-unix");
    let socket = dir.join("run").join("health.sock");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    // A stale socket: bound, then its listener dropped (the file stays).
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let url_file = dir.join("health.url");
    let socket_s = socket.display().to_string();
    let mcp = server.url();
    // `tunnel run` that should stop at once with the health listener on `path`.
    let run_on_socket = |path: &str| {
        Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(["tunnel", "run", "--control-plane.tunnel-id", GO_TUNNEL])
            .args(["--mcp.server-url", &mcp, "--health.unix-socket", path])
            .env_clear()
            .env("CONTROL_PLANE_API_KEY", KEY)
            .output()
            .unwrap()
    };
    let mut run = tunnel_run(
        "blocking",
        &cp.base_url(),
        &url_file,
        &["--mcp.server-url", &mcp, "--health.unix-socket", &socket_s],
        &[("CONTROL_PLANE_API_KEY", KEY)],
    );
    let url = run.health_url(&url_file);
    assert!(url.starts_with("http+unix://"), "{url}");
    assert_serves_the_reference_tools(&cp, "main");
    // A raw request on the socket.
    let mut conn = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    // `tunnel health` reads the URL file's http+unix:// form.
    let probe = wait_for("a passing probe over the socket", || {
        let out = Command::new(env!("CARGO_BIN_EXE_mcpwire"))
            .args(["tunnel", "health", "--url-file", url_file.to_str().unwrap()])
            .args(["--require-control-plane-poll"])
            .env_clear()
            .output()
            .unwrap();
        (out.status.code() == Some(0)).then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(
        probe.contains("Healthz: PASS | 200 http+unix://"),
        "{probe}"
    );
    assert!(probe.contains("Result: OK"), "{probe}");
    // A second client on the same socket is refused: something accepts there.
    let second = run_on_socket(&socket_s);
    assert_eq!(second.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains(&format!(
            "invalid --health.unix-socket {socket_s:?}: it is already accepting connections"
        )),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    run.stop();
    assert!(!socket.exists(), "the socket is removed at exit");
    // A path that is not a socket is refused by name.
    let file = dir.join("not-a-socket");
    std::fs::write(&file, "x").unwrap();
    let out = run_on_socket(file.to_str().unwrap());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("it exists and is not a unix socket"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// SIGUSR1 turns debug logging on in a running client, SIGUSR2 back to `--log.level`.
#[cfg(unix)]
#[test]
fn the_log_level_changes_at_run_time_with_sigusr1_and_sigusr2() {
    let cp = plane();
    let server = reference_server();
    let dir = scratch("log-level");
    let url_file = dir.join("health.url");
    let mcp = server.url();
    let mut run = tunnel_run(
        "smol",
        &cp.base_url(),
        &url_file,
        &[
            "--mcp.server-url",
            &mcp,
            "--control-plane.poll-timeout",
            "200ms",
        ],
        &[("CONTROL_PLANE_API_KEY", KEY)],
    );
    run.health_url(&url_file);
    let signal = |name: &str| {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &run.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    assert!(!run.output().contains(" DEBUG "));
    signal("USR1");
    wait_for("the level change to debug", || {
        run.output()
            .contains("runtime log level updated previous_level=info new_level=debug by=SIGUSR1")
            .then_some(())
    });
    // Debug lines follow (each poll logs one).
    wait_for("a debug line", || {
        let out = run.output();
        let after = out.split("new_level=debug").nth(1)?.to_owned();
        after.contains(" DEBUG ").then_some(())
    });
    signal("USR2");
    wait_for("the level back to info", || {
        run.output()
            .contains("runtime log level updated previous_level=debug new_level=info by=SIGUSR2")
            .then_some(())
    });
    run.stop();
}
