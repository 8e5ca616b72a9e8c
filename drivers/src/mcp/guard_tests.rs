//! The DNS rebinding defence, through the real client and each driver's real connect path:
//! an MCP server on loopback answers every POST with `401` and a `resource_metadata` URL on a
//! second loopback listener, which counts the connections it gets. The authorization flow's
//! fetch of that URL must reach it in development mode and never in strict mode, whether
//! the URL itself is refused (`http://localhost`) or only the address its name resolves to
//! (a name the test's resolver maps to `127.0.0.1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::{Authorization, ClientOptions, MemoryStore, UserAgent, UserAgentError};

/// The browser step is never reached here.
struct NoBrowser;

impl UserAgent for NoBrowser {
    fn authorize(&self, _url: &str, _redirect_uri: &str) -> Result<String, UserAgentError> {
        Err(UserAgentError::Other("no browser in this test".into()))
    }
}

/// Resolves every name to `127.0.0.1`: a name that passes `check_url` but whose address the
/// strict policy refuses (what a rebinding attacker's DNS answers).
fn to_loopback(_host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
    Ok(vec![IpAddr::from([127, 0, 0, 1])])
}

/// The two listeners.
struct Servers {
    /// The MCP URL.
    mcp_url: String,
    /// The port of the metadata listener.
    prm_port: u16,
    /// Connections the metadata listener accepted.
    prm_connections: Arc<AtomicUsize>,
    /// The request lines it got.
    prm_requests: Arc<Mutex<Vec<String>>>,
}

impl Servers {
    /// `resource_metadata` is the challenge's URL, `{port}` standing for the metadata
    /// listener's port.
    fn start(resource_metadata: &str) -> Servers {
        let prm = TcpListener::bind("127.0.0.1:0").unwrap();
        let prm_port = prm.local_addr().unwrap().port();
        let prm_connections = Arc::new(AtomicUsize::new(0));
        let prm_requests = Arc::new(Mutex::new(Vec::new()));
        let (count, lines) = (Arc::clone(&prm_connections), Arc::clone(&prm_requests));
        thread::spawn(move || {
            for s in prm.incoming() {
                let Ok(s) = s else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let lines = Arc::clone(&lines);
                thread::spawn(move || {
                    if let Some(line) = answer(s, |_| "404 Not Found".to_owned()) {
                        lines.lock().unwrap().push(line);
                    }
                });
            }
        });
        let challenge = format!(
            "401 Unauthorized\r\nWWW-Authenticate: Bearer resource_metadata=\"{}\"",
            resource_metadata.replace("{port}", &prm_port.to_string())
        );
        let mcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let mcp_url = format!("http://{}/mcp", mcp.local_addr().unwrap());
        thread::spawn(move || {
            for s in mcp.incoming() {
                let Ok(s) = s else { return };
                let challenge = challenge.clone();
                thread::spawn(move || {
                    answer(s, |line| {
                        if line.starts_with("POST ") {
                            challenge.clone()
                        } else {
                            "404 Not Found".to_owned()
                        }
                    })
                });
            }
        });
        Servers {
            mcp_url,
            prm_port,
            prm_connections,
            prm_requests,
        }
    }

    fn options(&self, development: bool) -> ClientOptions {
        let mut auth = Authorization::new(Arc::new(NoBrowser), Arc::new(MemoryStore::default()));
        auth.allow_http_loopback = development;
        let mut options = ClientOptions::default().with_authorization(auth);
        options.request_timeout = Duration::from_secs(20);
        options.connect_timeout = Duration::from_secs(5);
        options
    }

    fn prm_connections(&self) -> usize {
        self.prm_connections.load(Ordering::SeqCst)
    }
}

/// Reads one request from `s` and answers it with the status line (and headers) `status`
/// chooses from the request line, with an empty body, closing the connection. The request
/// line, if one came.
fn answer(s: TcpStream, status: impl Fn(&str) -> String) -> Option<String> {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(s.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let line = line.trim_end().to_owned();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    let reply = format!(
        "HTTP/1.1 {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        status(&line)
    );
    let mut s = s;
    s.write_all(reply.as_bytes()).ok()?;
    Some(line)
}

/// The operation failed with the policy's refusal (`refusal`: the start of its message), and
/// nothing reached the metadata listener.
fn assert_refused_unreached(servers: &Servers, error: &super::Error, refusal: &str) {
    let text = error.to_string();
    assert!(text.contains(refusal), "the error says {refusal:?}: {text}");
    assert_eq!(
        servers.prm_connections(),
        0,
        "nothing connected to the metadata listener"
    );
}

fn assert_reached(servers: &Servers) {
    assert!(servers.prm_connections() >= 1, "the fetch went through");
    let lines = servers.prm_requests.lock().unwrap();
    assert!(
        lines.iter().any(|l| l.starts_with("GET /prm ")),
        "{lines:?}"
    );
}

#[cfg(feature = "blocking")]
mod blocking {
    use super::*;
    use crate::mcp::blocking::McpClient;

    #[test]
    fn development_mode_fetches_localhost_metadata_through_the_checked_address() {
        let servers = Servers::start("http://localhost:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(true)).unwrap();
        let e = client.list_tools(None).unwrap_err();
        assert_reached(&servers);
        // The listener answered 404: the authorization fails, after the fetch.
        assert!(e.to_string().contains("401"), "{e}");
    }

    #[test]
    fn strict_mode_refuses_http_localhost_before_any_connection() {
        let servers = Servers::start("http://localhost:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(false)).unwrap();
        let e = client.list_tools(None).unwrap_err();
        let refusal = format!(
            "refused the URL \"http://localhost:{}/prm\"",
            servers.prm_port
        );
        assert_refused_unreached(&servers, &e, &refusal);
    }

    #[test]
    fn strict_mode_refuses_a_name_that_resolves_to_loopback_and_connects_nowhere() {
        let servers = Servers::start("https://rebind.test:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(false)).unwrap();
        client.set_lookup(to_loopback);
        let e = client.list_tools(None).unwrap_err();
        let refusal = format!(
            "refused the address 127.0.0.1 resolved for \"https://rebind.test:{}/prm\"",
            servers.prm_port
        );
        assert_refused_unreached(&servers, &e, &refusal);
    }

    static LOOKUPS: AtomicUsize = AtomicUsize::new(0);

    fn counted(host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        LOOKUPS.fetch_add(1, Ordering::SeqCst);
        to_loopback(host, port)
    }

    #[test]
    fn the_connection_goes_to_the_address_the_guard_resolved_and_checked() {
        // The system does not resolve this name: only the guard's own lookup leads anywhere.
        let servers = Servers::start("http://rebind.localhost:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(true)).unwrap();
        client.set_lookup(counted);
        let _ = client.list_tools(None).unwrap_err();
        assert_reached(&servers);
        assert_eq!(LOOKUPS.load(Ordering::SeqCst), 1, "resolved once");
    }
}

#[cfg(feature = "smol")]
mod smol {
    use super::*;
    use crate::mcp::smol::McpClient;

    #[test]
    fn development_mode_fetches_localhost_metadata_through_the_checked_address() {
        let servers = Servers::start("http://localhost:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(true)).unwrap();
        let e = ::smol::block_on(client.list_tools(None)).unwrap_err();
        assert_reached(&servers);
        assert!(e.to_string().contains("401"), "{e}");
    }

    #[test]
    fn strict_mode_refuses_http_localhost_before_any_connection() {
        let servers = Servers::start("http://localhost:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(false)).unwrap();
        let e = ::smol::block_on(client.list_tools(None)).unwrap_err();
        let refusal = format!(
            "refused the URL \"http://localhost:{}/prm\"",
            servers.prm_port
        );
        assert_refused_unreached(&servers, &e, &refusal);
    }

    #[test]
    fn strict_mode_refuses_a_name_that_resolves_to_loopback_and_connects_nowhere() {
        let servers = Servers::start("https://rebind.test:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(false)).unwrap();
        client.set_lookup(to_loopback);
        let e = ::smol::block_on(client.list_tools(None)).unwrap_err();
        let refusal = format!(
            "refused the address 127.0.0.1 resolved for \"https://rebind.test:{}/prm\"",
            servers.prm_port
        );
        assert_refused_unreached(&servers, &e, &refusal);
    }

    static LOOKUPS: AtomicUsize = AtomicUsize::new(0);

    fn counted(host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        LOOKUPS.fetch_add(1, Ordering::SeqCst);
        to_loopback(host, port)
    }

    #[test]
    fn the_connection_goes_to_the_address_the_guard_resolved_and_checked() {
        // The system does not resolve this name: only the guard's own lookup leads anywhere.
        let servers = Servers::start("http://rebind.localhost:{port}/prm");
        let client = McpClient::connect_http(&servers.mcp_url, servers.options(true)).unwrap();
        client.set_lookup(counted);
        let _ = ::smol::block_on(client.list_tools(None)).unwrap_err();
        assert_reached(&servers);
        assert_eq!(LOOKUPS.load(Ordering::SeqCst), 1, "resolved once");
    }
}
