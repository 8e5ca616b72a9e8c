//! OAuth authorization for an HTTP server ([`Authorization`], set in
//! [`ClientOptions::authorization`](super::ClientOptions::authorization)): the core runs the
//! flow ([`mcpwire_core::auth::Flow`]); the driver does the two things that touch the world:
//! the browser step ([`UserAgent`], on a thread of its own so nothing else waits for the user)
//! and keeping the grant ([`TokenStore`](super::TokenStore), whose lock makes refreshes
//! single-flight across threads and processes).
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcpwire::mcp::blocking::McpClient;
//! use mcpwire::mcp::{Authorization, ClientOptions, FileStore, LoopbackBrowser};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Grants kept in ~/.local/share/mcpwire/tokens.json (0600), shared by every process.
//! let store = Arc::new(FileStore::in_data_dir()?);
//! let auth = Authorization::new(Arc::new(LoopbackBrowser::new()), store);
//! let options = ClientOptions::default().with_authorization(auth);
//! let client = McpClient::connect_http("https://mcp.example.com/mcp", options)?;
//! // The first request the server refuses with 401 prints the authorization URL, waits for
//! // the browser to come back to 127.0.0.1, and goes on with the token.
//! let tools = client.list_all_tools()?;
//! println!("{} tools", tools.tools.len());
//! # Ok(()) }
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use mcpwire_core::auth::{ClientSetup, FlowConfig};
use mcpwire_core::mcp::AuthConfig;

use super::token_store::TokenStore;

/// The browser step: takes the user to the authorization URL and returns the query of the
/// redirect back to `redirect_uri` (everything after `?`). It runs on a thread of its own and
/// may block (for minutes, while a person logs in).
pub trait UserAgent: Send + Sync {
    /// Authorizes at `url`; the answer is the query the authorization server sent to
    /// `redirect_uri`.
    fn authorize(&self, url: &str, redirect_uri: &str) -> Result<String, UserAgentError>;
}

/// Why the browser step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UserAgentError {
    /// The loopback listener could not be opened.
    #[error("cannot listen for the redirect on {addr}: {source}")]
    Listen {
        /// Where.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// No redirect came in time.
    #[error("no redirect came back within {0:?}")]
    TimedOut(Duration),
    /// The sign-in was given up before the redirect came (the person declined it, say);
    /// the reason, for a person.
    #[error("the sign-in was given up: {0}")]
    Abandoned(String),
    /// Anything else, for a person.
    #[error("{0}")]
    Other(String),
}

/// What [`ClientOptions::authorization`](super::ClientOptions::authorization) holds.
#[derive(Clone)]
pub struct Authorization {
    /// How the client gets its identity (pre-registered, a Client ID Metadata Document URL,
    /// dynamic registration).
    pub client: ClientSetup,
    /// A scope to ask for instead of the scope selection strategy.
    pub scope: Option<String>,
    /// The loopback port of the redirect URI (`http://127.0.0.1:<port>/callback`); `0`: a
    /// free one, picked when the client connects.
    pub callback_port: u16,
    /// The browser step.
    pub user_agent: Arc<dyn UserAgent>,
    /// Where grants are kept.
    pub store: Arc<dyn TokenStore>,
    /// Development mode: `http` to loopback addresses is allowed for the server's URLs.
    pub allow_http_loopback: bool,
    /// The 2025-03-26 revision's discovery fallbacks (see
    /// [`FlowConfig::legacy_discovery`]).
    pub legacy_discovery: bool,
    /// How long the browser step may take.
    pub timeout: Duration,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("client", &self.client)
            .field("scope", &self.scope)
            .field("callback_port", &self.callback_port)
            .finish_non_exhaustive()
    }
}

impl Authorization {
    /// Authorization with `user_agent` and `store`, the defaults otherwise: dynamic
    /// registration, a free callback port, https only, five minutes for the browser step.
    pub fn new(user_agent: Arc<dyn UserAgent>, store: Arc<dyn TokenStore>) -> Self {
        Authorization {
            client: ClientSetup::default(),
            scope: None,
            callback_port: 0,
            user_agent,
            store,
            allow_http_loopback: false,
            legacy_discovery: false,
            timeout: Duration::from_secs(300),
        }
    }

    /// The core's configuration for the server at `url`, with the stored grant and a seed
    /// from the OS's random source.
    pub(crate) fn core_config(&self, url: &str) -> Result<(AuthConfig, String), std::io::Error> {
        let port = match self.callback_port {
            0 => TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port(),
            p => p,
        };
        let redirect_uri = format!("http://127.0.0.1:{port}/callback");
        let mut flow = FlowConfig::new(url, redirect_uri.clone());
        flow.client = self.client.clone();
        flow.scope = self.scope.clone();
        flow.policy.allow_loopback_http = self.allow_http_loopback;
        flow.legacy_discovery = self.legacy_discovery;
        flow.authorization_timeout = self.timeout;
        // The store's lock makes refreshes single-flight (see `TokenStore::lock`).
        flow.coordinate_refresh = true;
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok((
            AuthConfig {
                flow,
                grant: self.store.load(url),
                seed,
                clock: Some((std::time::Instant::now(), std::time::SystemTime::now())),
            },
            redirect_uri,
        ))
    }
}

/// The browser step for a person: prints the authorization URL (to stderr, or through a
/// callback), and waits on the loopback redirect URI for the browser to come back; answers it
/// with a short page saying the window can be closed.
pub struct LoopbackBrowser {
    show: Box<dyn Fn(&str) + Send + Sync>,
    abandon: Option<Abandon>,
    timeout: Duration,
}

type Abandon = Box<dyn Fn() -> Option<String> + Send + Sync>;

impl std::fmt::Debug for LoopbackBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackBrowser")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Default for LoopbackBrowser {
    fn default() -> Self {
        Self::new()
    }
}

impl LoopbackBrowser {
    /// Prints the URL on stderr and waits up to five minutes.
    pub fn new() -> Self {
        LoopbackBrowser {
            show: Box::new(|url| eprintln!("Open this URL in a browser to authorize:\n  {url}")),
            abandon: None,
            timeout: Duration::from_secs(300),
        }
    }

    /// Shows the URL with `show` instead (a GUI, a log line, a browser launcher).
    pub fn with_show(mut self, show: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.show = Box::new(show);
        self
    }

    /// While it waits, asks `abandon` (about every 50 ms) whether to give up: `Some(reason)`
    /// ends the wait with [`UserAgentError::Abandoned`].
    pub fn with_abandon(
        mut self,
        abandon: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.abandon = Some(Box::new(abandon));
        self
    }

    /// Waits at most `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

const DONE_PAGE: &str = "<!doctype html><meta charset=utf-8><title>mcpwire</title>\
<p>The authorization is done; you can close this window.</p>";

impl UserAgent for LoopbackBrowser {
    fn authorize(&self, url: &str, redirect_uri: &str) -> Result<String, UserAgentError> {
        let port = url_port(redirect_uri).unwrap_or(0);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let listener =
            TcpListener::bind(addr).map_err(|source| UserAgentError::Listen { addr, source })?;
        (self.show)(url);
        let deadline = std::time::Instant::now() + self.timeout;
        listener
            .set_nonblocking(true)
            .map_err(|e| UserAgentError::Other(e.to_string()))?;
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut reader = BufReader::new(&stream);
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        continue;
                    }
                    // `GET /callback?code=...&state=... HTTP/1.1`
                    let target = line.split(' ').nth(1).unwrap_or("");
                    let Some((path, query)) = target.split_once('?') else {
                        let _ = (&stream).write_all(
                            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        );
                        continue;
                    };
                    if path != "/callback" {
                        continue;
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        DONE_PAGE.len()
                    );
                    let _ = (&stream).write_all(head.as_bytes());
                    let _ = (&stream).write_all(DONE_PAGE.as_bytes());
                    return Ok(query.to_owned());
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() >= deadline {
                        return Err(UserAgentError::TimedOut(self.timeout));
                    }
                    if let Some(reason) = self.abandon.as_ref().and_then(|a| a()) {
                        return Err(UserAgentError::Abandoned(reason));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(UserAgentError::Other(e.to_string())),
            }
        }
    }
}

/// The port of an `http://127.0.0.1:<port>/...` URL.
fn url_port(u: &str) -> Option<u16> {
    let rest = u.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

/// The browser step without a person, for authorization servers that approve at once
/// (test and automation setups, the MCP conformance suite): GETs the authorization URL
/// without following redirects and takes the query of the `Location` it points to at the
/// redirect URI.
#[cfg(feature = "blocking")]
#[derive(Debug, Default, Clone, Copy)]
pub struct FollowRedirect;

#[cfg(feature = "blocking")]
impl UserAgent for FollowRedirect {
    fn authorize(&self, url: &str, redirect_uri: &str) -> Result<String, UserAgentError> {
        let agent = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .new_agent();
        let response = agent
            .get(url)
            .call()
            .map_err(|e| UserAgentError::Other(format!("GET the authorization URL: {e}")))?;
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                UserAgentError::Other(format!(
                    "the authorization server answered HTTP {status} without a redirect"
                ))
            })?;
        let Some(query) = location
            .strip_prefix(redirect_uri)
            .and_then(|rest| rest.strip_prefix('?'))
        else {
            return Err(UserAgentError::Other(format!(
                "the authorization server redirected elsewhere than the redirect URI: {location}"
            )));
        };
        Ok(query.to_owned())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A loopback port free now, and the redirect URI on it.
    fn free_redirect() -> (u16, String) {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        (port, format!("http://127.0.0.1:{port}/callback"))
    }

    #[test]
    fn the_loopback_browser_gives_up_when_told_and_frees_its_port() {
        let (port, redirect) = free_redirect();
        let give_up = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&give_up);
        let ua = LoopbackBrowser::new()
            .with_show(|_| {})
            .with_abandon(move || {
                flag.load(std::sync::atomic::Ordering::SeqCst)
                    .then(|| "the person declined".to_owned())
            })
            .with_timeout(Duration::from_secs(30));
        let redirect2 = redirect.clone();
        let t = std::thread::spawn(move || ua.authorize("https://as.example/a", &redirect2));
        std::thread::sleep(Duration::from_millis(120));
        assert!(!t.is_finished(), "it waits while not told to give up");
        give_up.store(true, std::sync::atomic::Ordering::SeqCst);
        match t.join().unwrap() {
            Err(UserAgentError::Abandoned(why)) => assert_eq!(why, "the person declined"),
            other => panic!("not abandoned: {other:?}"),
        }
        // The listener is gone with it: the port can be bound again.
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[test]
    fn the_loopback_browser_takes_the_callback_query() {
        let (port, redirect) = free_redirect();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let ua = LoopbackBrowser::new()
            .with_show(move |url| {
                let _ = tx.send(url.to_owned());
            })
            .with_timeout(Duration::from_secs(10));
        let redirect2 = redirect.clone();
        let t = std::thread::spawn(move || {
            ua.authorize("https://as.example/authorize?x=1", &redirect2)
        });
        assert_eq!(rx.recv().unwrap(), "https://as.example/authorize?x=1");
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET /callback?code=abc&state=xyz HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        let mut page = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut page);
        assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
        assert_eq!(t.join().unwrap().unwrap(), "code=abc&state=xyz");
    }

    #[test]
    fn the_loopback_browser_times_out() {
        let ua = LoopbackBrowser::new()
            .with_show(|_| {})
            .with_timeout(Duration::from_millis(100));
        let e = ua
            .authorize("https://as.example/a", "http://127.0.0.1:0/callback")
            .unwrap_err();
        assert!(matches!(e, UserAgentError::TimedOut(_)), "{e}");
    }
}
