//! MCP servers: the drivers that run the core's sans-IO server
//! ([`mcpwire_core::mcp::server::Server`]) over stdio and Streamable HTTP.
//!
//! An application implements the core's [`Application`] trait (tools, resources, prompts);
//! the core does the protocol of both eras; a driver here reads the clock, draws the secrets
//! (the `requestState` key and the session-id seed, from the OS's random source), moves the
//! bytes and calls the core's step functions. Both runtimes run the same core the same way:
//!
//! - `blocking` (std threads): [`blocking::serve_stdio`] (stdin/stdout until stdin ends) and
//!   [`blocking::HttpServer`] (an HTTP/1.1 listener, one thread per connection);
//! - `smol`: `smol::serve_stdio` and `smol::HttpServer`, the same with `async fn`s, on
//!   hyper's server connection.
//!
//! ```no_run
//! # #[cfg(feature = "blocking")] {
//! use mcpwire::server::{blocking::HttpServer, config, HttpOptions};
//! use mcpwire_core::mcp::server::{Application, CallContext, Reply, RequestContext};
//! use mcpwire_core::mcp::{Implementation, Tool};
//! use mcpwire_core::jsonrpc::ErrorObject;
//!
//! struct Hello;
//! impl Application for Hello {
//!     fn list_tools(&mut self, _: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
//!         let mut tool = Tool::default();
//!         tool.name = "hello".into();
//!         tool.input_schema.insert("type".into(), "object".into());
//!         Ok(vec![tool])
//!     }
//!     fn call_tool(&mut self, _: &mut CallContext, _: &str, _: &serde_json::Map<String, serde_json::Value>) -> Reply {
//!         Reply::tool_text("hello")
//!     }
//! }
//!
//! let server = HttpServer::start(config(Implementation::new("hello", "1.0"))?, HttpOptions::default(), Hello)?;
//! println!("serving {}", server.url());
//! # }
//! # Ok::<(), mcpwire::server::ServeError>(())
//! ```
//!
//! **Answering later.** The application's methods run on the driver's thread (or task) with
//! the engine locked: a method that would block returns [`Reply::Pending`] and answers later
//! through a [`Responder`] (cloneable, any thread or task), which the `*_with` constructors
//! hand to the code that makes the application. The same handle reports list changes and
//! resource updates.
//!
//! **Around the core.** [`HttpOptions::hook`] looks at each HTTP request before the core
//! ([`HttpHook`]): it answers the listener's other paths (an authorization server beside the
//! MCP endpoint) or refuses a request in front of it (a bearer token's `401`), and lets the
//! rest through. [`Responder::override_http`] changes the one response that carries an answer
//! (its status, extra headers, or a raw body), keyed by the request's
//! `RequestContext::exchange`: for a test server whose HTTP misbehaviour is the point. Neither
//! touches the protocol: the core still answers everything the hook lets through.
//!
//! **Bounds.** The listener bounds a request head ([`HttpOptions::max_head_bytes`]), reads at
//! most one byte more than the core's `Limits::max_body_bytes` of a body (the core answers
//! `413`; the blocking listener does not wait for a body whose `Content-Length` or chunk size
//! already says it is over), serves at most [`HttpOptions::max_connections`] connections (`503` past it), and
//! lets one exchange's unwritten output fall at most 1024 pieces behind (past that the client
//! is treated as gone). stdin is not read while more than 8 MiB of answers wait for stdout.
//!
//! [`Reply::Pending`]: mcpwire_core::mcp::server::Reply::Pending
//! [`Application`]: mcpwire_core::mcp::server::Application

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use mcpwire_core::http::Headers;
use mcpwire_core::mcp::server::HttpRequest;
#[cfg(any(feature = "blocking", feature = "smol"))]
use std::time::{Instant, SystemTime};

#[cfg(any(feature = "blocking", feature = "smol"))]
use mcpwire_core::mcp::server::WallClock;
use mcpwire_core::mcp::server::{ConfigError, ServerConfig, ServerSecrets};
use mcpwire_core::mcp::Implementation;

#[cfg(feature = "blocking")]
pub mod blocking;
#[cfg(any(feature = "blocking", feature = "smol"))]
mod glue;
#[cfg(feature = "smol")]
pub mod smol;
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) mod transport;

#[cfg(any(feature = "blocking", feature = "smol"))]
pub use glue::Responder;

/// Why a server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The core refused the configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The OS's random source failed (the secrets could not be drawn).
    #[error("server: the OS's random source failed: {0}")]
    Entropy(std::io::Error),
    /// The listener could not bind its address.
    #[error("server: cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Reading stdin or starting a thread failed.
    #[error("server: {what}: {source}")]
    Io {
        /// What failed.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// Secrets drawn from the OS's random source: the `requestState` HMAC key and the session-id
/// seed. Servers that verify each other's `requestState` (behind one load balancer) share one
/// draw instead.
pub fn draw_secrets() -> Result<ServerSecrets, ServeError> {
    let mut bytes = [0u8; 64];
    getrandom::fill(&mut bytes)
        .map_err(|e| ServeError::Entropy(std::io::Error::other(e.to_string())))?;
    Ok(ServerSecrets::from_entropy(bytes))
}

/// The core's default configuration for a server named by `info` (both eras, tools only,
/// loopback `Host`/`Origin` rules), with freshly drawn secrets.
pub fn config(info: Implementation) -> Result<ServerConfig, ServeError> {
    Ok(ServerConfig::new(info, draw_secrets()?))
}

/// Fills in what the driver owns: the wall clock reading `requestState` expiries are measured
/// from, when the configuration has none.
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) fn with_clock(mut config: ServerConfig) -> ServerConfig {
    if config.wall_clock.is_none() {
        config.wall_clock = Some(WallClock {
            instant: Instant::now(),
            wall: SystemTime::now(),
        });
    }
    config
}

/// A look at each HTTP request before the core gets it, on the listener's connection thread
/// (or task) and outside the engine's lock: for the paths of the listener that are not the MCP
/// endpoint (an authorization server's metadata and token endpoints, a page) and for checks in
/// front of it (a bearer token's `401`). No MCP protocol belongs here: the core still answers
/// every request the hook lets through.
pub trait HttpHook: Send + Sync + 'static {
    /// `Some` answers `request` here (the core never sees it); `None` passes it to the core,
    /// as the hook may have changed it (a path alias). `query` is the request target's query
    /// (without `?`), which the core does not read.
    fn before(&self, request: &mut HttpRequest, query: Option<&str>) -> Option<HookAnswer>;

    /// Every whole response the core gave (not the streamed ones), as it goes to the
    /// connection: for counters and logs (default: nothing).
    fn answered(&self, status: u16, headers: &Headers, body: &[u8]) {
        let _ = (status, headers, body);
    }
}

/// A hook's whole answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookAnswer {
    /// The status.
    pub status: u16,
    /// The headers (framing ones are the transport's and are dropped).
    pub headers: Headers,
    /// The body.
    pub body: Vec<u8>,
}

/// What an application changes in the HTTP response carrying one of its answers
/// ([`Responder::override_http`]): applied to the core's response as the driver writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpOverride {
    /// The status instead of the core's (a whole response only).
    pub status: Option<u16>,
    /// Headers added to the core's (framing ones are the transport's and are dropped).
    pub headers: Headers,
    /// The body instead of the core's, with its `Content-Type` (a whole response only).
    pub body: Option<(String, Vec<u8>)>,
}

impl HttpOverride {
    /// Applies the change to a response's head and, for a whole response, its body.
    #[cfg(any(feature = "blocking", feature = "smol"))]
    pub(crate) fn apply(self, status: &mut u16, headers: &mut Headers, body: Option<&mut Vec<u8>>) {
        let whole = body.is_some();
        if let (Some(s), true) = (self.status, whole) {
            *status = s;
        }
        if let (Some((content_type, new)), Some(body)) = (self.body, body) {
            headers.remove("content-type");
            let _ = headers.append("Content-Type", &content_type);
            *body = new;
        }
        for (name, value) in self.headers.iter() {
            let _ = headers.append(name, value);
        }
    }
}

/// How an HTTP listener binds and what it bounds (both drivers).
#[derive(Clone)]
pub struct HttpOptions {
    /// The address to listen on: loopback by default (`127.0.0.1`, port 0 picks a free port).
    /// Another address serves the network; the core's `OriginPolicy` still refuses `Host`
    /// and `Origin` values it was not told about.
    pub listen: SocketAddr,
    /// The largest request head (request line and headers), in bytes (`431` past it).
    pub max_head_bytes: usize,
    /// Connections served at once (`503` past it).
    pub max_connections: usize,
    /// How long an idle keep-alive connection is kept, and how long a request head may take.
    pub idle_timeout: Duration,
    /// How long one write may block before the client is dropped (blocking driver).
    pub write_timeout: Duration,
    /// A look at each request before the core (`None`: every request goes to the core).
    pub hook: Option<Arc<dyn HttpHook>>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("listen", &self.listen)
            .field("max_head_bytes", &self.max_head_bytes)
            .field("max_connections", &self.max_connections)
            .field("idle_timeout", &self.idle_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            max_head_bytes: 64 * 1024,
            max_connections: 512,
            idle_timeout: Duration::from_secs(120),
            write_timeout: Duration::from_secs(30),
            hook: None,
        }
    }
}

impl HttpOptions {
    /// Options listening on `addr`, the other bounds at their defaults.
    pub fn listen(addr: SocketAddr) -> Self {
        HttpOptions {
            listen: addr,
            ..HttpOptions::default()
        }
    }

    #[cfg(any(feature = "blocking", feature = "smol"))]
    pub(crate) fn limits(&self, max_body: usize) -> transport::HttpLimits {
        transport::HttpLimits {
            max_head: self.max_head_bytes,
            max_body,
            max_connections: self.max_connections.max(1),
            idle_timeout: self.idle_timeout,
            write_timeout: self.write_timeout,
        }
    }
}

/// The URL of a listener on `addr` serving `path` (an unspecified address is shown as
/// loopback, which is where a local client reaches it).
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) fn url_of(addr: SocketAddr, path: &str) -> String {
    let mut shown = addr;
    if shown.ip().is_unspecified() {
        shown.set_ip(if addr.is_ipv4() {
            Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    format!("http://{shown}{path}")
}
