//! The engine's HTTP request values on ureq, and ureq's errors in the core's vocabulary.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcpwire_core::http::{Headers, Method, Request, ResponseHead};
use mcpwire_core::net_policy::proxy::ProxyUrl;
use mcpwire_core::net_policy::UrlRejected;
use mcpwire_core::tunnel::failure::{
    transport_failure, FailureSource, TransportErrorKind, TransportStage,
};
use mcpwire_core::tunnel::TunnelFailure;
use ureq::config::Config;
use ureq::http::{Response, Uri};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};
use ureq::{Agent, Body, RequestExt, Timeout};

use super::guard::{Guarded, PinError};

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// ureq's read and write buffers per connection (its default is 128 KiB each). Every forward
/// worker has its own agent, so with 100 workers the defaults alone hold 25 MiB; 16 KiB still
/// fits any response head we accept, and bodies are streamed through it.
const BUFFER_BYTES: usize = 16 * 1024;

/// The agent for control-plane requests: statuses are answers, not errors; no redirects (the
/// API key must not follow one to another host).
///
/// No proxy of its own (ureq would read the environment's): each request says which
/// ([`send_via`], from the route's [`ProxyRoute`](mcpwire_core::net_policy::proxy::ProxyRoute)).
pub fn control_agent(tls: ureq::tls::TlsConfig) -> Agent {
    Agent::config_builder()
        .tls_config(tls)
        .proxy(None)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .input_buffer_size(BUFFER_BYTES)
        .output_buffer_size(BUFFER_BYTES)
        .max_idle_age(crate::KEEP_ALIVE_REUSE)
        .user_agent(concat!("mcpwire/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// The agent for MCP servers: statuses are answers, not errors, a redirect included (it is
/// not followed: the forwarded request's headers may carry credentials, and the smol driver's
/// hyper client does not follow one either).
///
/// No proxy of its own, as [`control_agent`].
pub fn mcp_agent(tls: ureq::tls::TlsConfig) -> Agent {
    mcp_config(tls).into()
}

/// [`mcp_agent`]'s configuration.
pub fn mcp_config(tls: ureq::tls::TlsConfig) -> Config {
    Agent::config_builder()
        .tls_config(tls)
        .proxy(None)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .input_buffer_size(BUFFER_BYTES)
        .output_buffer_size(BUFFER_BYTES)
        .max_idle_connections(4)
        .max_idle_connections_per_host(4)
        .max_idle_age(crate::KEEP_ALIVE_REUSE)
        .user_agent(concat!("mcpwire/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Where a [`GuardedResolver`] leaves the policy's refusal, for the exchange to report (ureq
/// only carries its own error type out of a resolver).
pub type Refusal = Arc<Mutex<Option<UrlRejected>>>;

/// The resolver of an agent made for one guarded fetch ([`Guarded`]): every name ureq asks
/// for, except the configured proxy's, is answered with the addresses the fetch's policy let
/// through ([`Guarded::pin`]: the checked URL's host, resolved once and checked), whatever the
/// URI says, so the connection can only go to a checked address. A refusal fails the
/// connection before any socket opens and is left in `refused`.
///
/// With a proxy (ureq reads `ALL_PROXY`/`HTTPS_PROXY` and the like), the proxy's own name is
/// resolved as usual and the proxy resolves the target: it gets the checked URL, and does its
/// own egress filtering (`ARCHITECTURE.md`, "Outbound URLs").
#[derive(Debug)]
pub struct GuardedResolver {
    guarded: Guarded,
    refused: Refusal,
}

impl GuardedResolver {
    /// A resolver for `guarded`, leaving a refusal in `refused`.
    pub fn new(guarded: Guarded, refused: Refusal) -> Self {
        GuardedResolver { guarded, refused }
    }
}

impl Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        if config.proxy().is_some_and(|p| p.uri() == uri) {
            return DefaultResolver::default().resolve(uri, config, timeout);
        }
        match self.guarded.pin() {
            Ok(addrs) => {
                let mut out = self.empty();
                for a in addrs {
                    if out.try_push(a).is_err() {
                        break;
                    }
                }
                Ok(out)
            }
            Err(PinError::Refused(rejected)) => {
                *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(rejected);
                Err(ureq::Error::Io(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "every address the host resolved to is refused by the URL policy",
                )))
            }
            Err(PinError::Resolve(cause)) => Err(ureq::Error::Io(io::Error::new(
                io::ErrorKind::NotFound,
                cause,
            ))),
        }
    }
}

/// An agent for one guarded fetch, with `config` and a [`GuardedResolver`]; its connection
/// pool is its own, so nothing it connects is ever reused by an unguarded request (or the
/// other way round). Drop it after the fetch.
pub fn guarded_agent(config: Config, guarded: Guarded, refused: Refusal) -> Agent {
    Agent::with_parts(
        config,
        DefaultConnector::default(),
        GuardedResolver::new(guarded, refused),
    )
}

/// Sends `request` straight to its server; `timeout` bounds the whole exchange, body
/// included.
pub fn send(
    agent: &Agent,
    request: &Request,
    timeout: Option<Duration>,
) -> Result<Response<Body>, ureq::Error> {
    send_via(agent, None, request, timeout)
}

/// [`send`] through `proxy` when given (HTTP CONNECT for `https`, with the proxy URL's
/// credentials as `Proxy-Authorization`).
pub fn send_via(
    agent: &Agent,
    proxy: Option<&ProxyUrl>,
    request: &Request,
    timeout: Option<Duration>,
) -> Result<Response<Body>, ureq::Error> {
    let proxy = proxy
        .map(|p| ureq::Proxy::new(&p.with_credentials()))
        .transpose()?;
    let mut builder = ureq::http::Request::builder()
        .method(request.method.as_str())
        .uri(request.url.as_str());
    for (name, value) in request.headers.iter() {
        builder = builder.header(name, value);
    }
    match request.method {
        Method::Post | Method::Put => {
            let req = builder.body(request.body.as_slice())?;
            req.with_agent(agent)
                .configure()
                .timeout_global(timeout)
                .proxy(proxy)
                .build()
                .run()
        }
        Method::Get | Method::Delete => {
            let req = builder.body(())?;
            req.with_agent(agent)
                .configure()
                .timeout_global(timeout)
                .proxy(proxy)
                .build()
                .run()
        }
    }
}

/// The status and headers of a response (values that are not text are left out).
pub fn head_of(response: &Response<Body>) -> ResponseHead {
    let mut headers = Headers::new();
    for (name, value) in response.headers() {
        if let Ok(v) = value.to_str() {
            let _ = headers.append(name.as_str(), v);
        }
    }
    ResponseHead {
        status: response.status().as_u16(),
        headers,
    }
}

/// Where the I/O error of a request that got no response happened.
fn io_stage(e: &io::Error) -> TransportStage {
    match e.kind() {
        io::ErrorKind::ConnectionRefused
        | io::ErrorKind::HostUnreachable
        | io::ErrorKind::NetworkUnreachable
        | io::ErrorKind::AddrNotAvailable
        // A Unix socket that is not there, or that this user may not open.
        | io::ErrorKind::NotFound
        | io::ErrorKind::PermissionDenied => TransportStage::Connect,
        _ => TransportStage::Exchange,
    }
}

/// The provenance of a request that failed before a response head arrived.
pub fn failure_before_head(err: &ureq::Error) -> TunnelFailure {
    match err {
        ureq::Error::Io(e) => transport_failure(io_stage(e), Some(e.kind())),
        ureq::Error::HostNotFound => transport_failure(TransportStage::Resolve, None),
        ureq::Error::ConnectionFailed => transport_failure(TransportStage::Connect, None),
        ureq::Error::Timeout(Timeout::Resolve | Timeout::Connect) => {
            transport_failure(TransportStage::Connect, Some(io::ErrorKind::TimedOut))
        }
        ureq::Error::Timeout(_) => {
            transport_failure(TransportStage::Exchange, Some(io::ErrorKind::TimedOut))
        }
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::Pem(_) => {
            transport_failure(TransportStage::Tls, None)
        }
        ureq::Error::Protocol(_) | ureq::Error::LargeResponseHeader(..) => {
            TunnelFailure::protocol(TransportErrorKind::InvalidProtocolResponse)
        }
        _ => TunnelFailure::before_response(FailureSource::ClientInternal, None),
    }
}

/// What went wrong, in words a person can act on, and the host it was for
/// (`connection refused (127.0.0.1:9)`, `the TLS handshake failed: invalid peer certificate:
/// UnknownIssuer (cp.example:443)`); never a URL's path or query, nor a header.
pub fn cause(err: &ureq::Error, url: &str) -> String {
    let what = match err {
        ureq::Error::Io(e) => super::io_words(e),
        ureq::Error::HostNotFound => "the host name did not resolve".to_owned(),
        ureq::Error::Timeout(_) => "timed out".to_owned(),
        ureq::Error::ConnectionFailed => "cannot connect".to_owned(),
        ureq::Error::Rustls(e) => format!("the TLS handshake failed: {e}"),
        ureq::Error::Tls(why) => format!("the TLS handshake failed: {why}"),
        ureq::Error::ConnectProxyFailed(why) => {
            format!("the HTTP proxy refused the CONNECT: {why}")
        }
        ureq::Error::InvalidProxyUrl => "the proxy URL is not valid".to_owned(),
        ureq::Error::Protocol(e) => format!("the answer is not HTTP/1.1: {e}"),
        ureq::Error::BodyStalled => "the body stalled".to_owned(),
        _ => "the request failed".to_owned(),
    };
    format!("{what} ({})", super::host_of(url))
}

/// Whether a failed request may have reached the server (a notification is then not replayed).
pub fn maybe_written(err: &ureq::Error) -> bool {
    let stage = match err {
        ureq::Error::Io(e) => io_stage(e),
        ureq::Error::HostNotFound
        | ureq::Error::ConnectionFailed
        | ureq::Error::Timeout(Timeout::Resolve | Timeout::Connect)
        | ureq::Error::Tls(_)
        | ureq::Error::Rustls(_) => TransportStage::Connect,
        _ => TransportStage::Exchange,
    };
    stage != TransportStage::Connect
}
