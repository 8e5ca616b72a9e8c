//! The engine's HTTP request values on hyper 1 (its HTTP/1.1 client connection), over smol's
//! sockets, with rustls through futures-rustls for `https`.
//!
//! [`send`] resolves, connects, handshakes, writes the request and returns when the response
//! head has arrived; the body is then read from [`Exchange`]. The connection is driven by a task
//! owned by the [`Exchange`] (or by the `send` future while it runs), so dropping either closes
//! the connection at once: that is how a deadline cancels.
//!
//! [`send`] opens one connection per exchange. [`send_pooled`] keeps connections alive in a
//! [`Pool`]: an exchange whose body was read to its end hands its connection back, and the next
//! exchange to the same origin reuses it. A request that a reused connection did not write (the
//! server had closed it) goes to another connection; one it may have written is not resent.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_rustls::rustls::pki_types::ServerName;
use futures_rustls::rustls::{self, ClientConfig, RootCertStore};
use futures_rustls::TlsConnector;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use mcpwire_core::http::{Headers, Method, Request, ResponseHead};
use mcpwire_core::tunnel::failure::{
    transport_failure, FailureSource, TransportErrorKind, TransportStage,
};
use mcpwire_core::tunnel::TunnelFailure;
use smol::future::FutureExt as _;
use smol::io::{AsyncRead, AsyncWrite};
use smol::net::TcpStream;
use smol::{Task, Timer};
use smol_hyper::rt::FuturesIo;

use mcpwire_core::net_policy::proxy::ProxyUrl;

/// How long resolving and connecting may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("mcpwire/", env!("CARGO_PKG_VERSION"));

/// Why an exchange got no response head (or lost its body).
#[derive(Debug)]
pub enum HttpError {
    /// The request value cannot be sent (bad URL, header or scheme).
    Request,
    /// The host name did not resolve.
    Resolve(Option<io::ErrorKind>),
    /// No connection could be opened.
    Connect(io::ErrorKind),
    /// The TLS handshake failed: what rustls said (e.g. `invalid peer certificate:
    /// UnknownIssuer`).
    Tls(String),
    /// The exchange failed after the connection opened.
    Exchange(Option<io::ErrorKind>),
    /// The peer's answer is not HTTP/1.1.
    Protocol,
    /// The caller's time limit passed.
    TimedOut,
    /// The HTTP proxy did not open the tunnel: its status (0 when its answer was not HTTP).
    ProxyRefused(u16),
}

impl HttpError {
    /// The provenance of a forward that failed this way.
    pub fn failure(&self) -> TunnelFailure {
        match self {
            HttpError::Request => {
                TunnelFailure::before_response(FailureSource::ClientInternal, None)
            }
            HttpError::Resolve(kind) => transport_failure(TransportStage::Resolve, *kind),
            HttpError::Connect(kind) => transport_failure(TransportStage::Connect, Some(*kind)),
            HttpError::Tls(_) => transport_failure(TransportStage::Tls, None),
            HttpError::Exchange(kind) => transport_failure(TransportStage::Exchange, *kind),
            HttpError::Protocol => {
                TunnelFailure::protocol(TransportErrorKind::InvalidProtocolResponse)
            }
            HttpError::TimedOut => {
                transport_failure(TransportStage::Exchange, Some(io::ErrorKind::TimedOut))
            }
            HttpError::ProxyRefused(_) => transport_failure(
                TransportStage::Connect,
                Some(io::ErrorKind::ConnectionRefused),
            ),
        }
    }

    /// The provenance of a forward whose body broke off after its head arrived.
    pub fn body_failure(&self) -> TunnelFailure {
        match self {
            HttpError::Exchange(kind) => transport_failure(TransportStage::Body, *kind),
            HttpError::TimedOut => {
                transport_failure(TransportStage::Body, Some(io::ErrorKind::TimedOut))
            }
            other => other.failure(),
        }
    }

    /// Whether the request may have reached the server (a notification is then not replayed).
    pub fn maybe_written(&self) -> bool {
        !matches!(
            self,
            HttpError::Request
                | HttpError::Resolve(_)
                | HttpError::Connect(_)
                | HttpError::Tls(_)
                | HttpError::ProxyRefused(_)
        )
    }
}

/// The TLS settings shared by every `https` connection: the Mozilla roots (webpki-roots),
/// ring as the crypto provider, TLS 1.2 and 1.3.
pub fn tls_config() -> Result<Arc<ClientConfig>, String> {
    let roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A byte stream hyper can drive: plain TCP or TLS over TCP.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// How a new connection is made: straight to the origin's host, through an HTTP proxy's
/// CONNECT tunnel, or to a Unix socket (the URL then only names the `Host` and the path; TLS
/// for `https` still verifies the URL's host name).
#[derive(Clone, Copy, Debug)]
pub enum Route<'a> {
    /// To the host the URL names (resolved now).
    Direct,
    /// Through this proxy.
    Proxy(&'a ProxyUrl),
    /// To this Unix socket.
    Unix(&'a std::path::Path),
}

impl<'a> Route<'a> {
    /// Through `proxy` when given, else direct.
    pub fn of(proxy: Option<&'a ProxyUrl>) -> Route<'a> {
        proxy.map_or(Route::Direct, Route::Proxy)
    }
}

/// The request side of an HTTP/1.1 connection.
type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// An open connection: its request side and the task that drives it (dropping the task closes
/// the connection).
struct Conn {
    sender: Sender,
    _driver: Task<()>,
}

/// Where a connection leads: a pooled connection serves only its own origin.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    https: bool,
    host: String,
    port: u16,
}

/// Idle keep-alive connections for [`send_pooled`], at most `max_idle` of them (the most
/// recently used is reused first), none idle longer than [`crate::KEEP_ALIVE_REUSE`].
/// Dropping the pool closes them.
pub struct Pool {
    /// Each with the instant it went idle.
    idle: Mutex<Vec<(Origin, Conn, Instant)>>,
    max_idle: usize,
    max_idle_age: Duration,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("idle", &self.idle_count())
            .field("max_idle", &self.max_idle)
            .finish()
    }
}

impl Pool {
    /// A pool keeping at most `max_idle` idle connections (0: none is kept).
    pub fn new(max_idle: usize) -> Arc<Pool> {
        Pool::with_max_idle_age(max_idle, crate::KEEP_ALIVE_REUSE)
    }

    fn with_max_idle_age(max_idle: usize, max_idle_age: Duration) -> Arc<Pool> {
        Arc::new(Pool {
            idle: Mutex::new(Vec::new()),
            max_idle,
            max_idle_age,
        })
    }

    /// How many idle connections are kept now.
    pub fn idle_count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Origin, Conn, Instant)>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently returned idle connection to `origin` (closed ones, and ones idle for
    /// longer than the pool's limit, are dropped).
    fn take(&self, origin: &Origin) -> Option<Conn> {
        let now = Instant::now();
        let mut idle = self.lock();
        idle.retain(|(_, c, since)| {
            !c.sender.is_closed() && now.saturating_duration_since(*since) < self.max_idle_age
        });
        let i = idle.iter().rposition(|(o, _, _)| o == origin)?;
        Some(idle.remove(i).1)
    }

    /// Keeps `conn` for reuse, unless it is closed or the pool is full.
    fn put(&self, origin: Origin, conn: Conn) {
        let mut idle = self.lock();
        if !conn.sender.is_closed() && idle.len() < self.max_idle {
            idle.push((origin, conn, Instant::now()));
        }
    }
}

/// A response whose head arrived; its body is read with [`Exchange::next_chunk`].
pub struct Exchange {
    /// The status and headers.
    pub head: ResponseHead,
    body: Incoming,
    /// The connection; dropping it closes the connection.
    conn: Option<Conn>,
    /// The pool the connection goes back to once the body has been read to its end.
    home: Option<(Arc<Pool>, Origin)>,
}

impl Exchange {
    /// The next piece of the body; `Ok(None)` at its end.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            match self.body.frame().await {
                None => {
                    if let (Some((pool, origin)), Some(conn)) = (self.home.take(), self.conn.take())
                    {
                        pool.put(origin, conn);
                    }
                    return Ok(None);
                }
                Some(Err(e)) => return Err(hyper_error(&e)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if !data.is_empty() {
                            return Ok(Some(data));
                        }
                    }
                    // Trailers carry nothing the engine uses.
                }
            }
        }
    }

    /// The body, up to `limit` bytes (an error past it).
    pub async fn read_to_vec(&mut self, limit: u64) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        while let Some(chunk) = self.next_chunk().await? {
            if (out.len() + chunk.len()) as u64 > limit {
                return Err(HttpError::Protocol);
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }
}

/// Sends `request` and waits for the response head (the caller bounds the wait).
pub async fn send(tls: &Arc<ClientConfig>, request: &Request) -> Result<Exchange, HttpError> {
    send_within(tls, request, CONNECT_TIMEOUT).await
}

/// [`send`], with its own limit on resolving and connecting.
pub async fn send_within(
    tls: &Arc<ClientConfig>,
    request: &Request,
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    send_within_via(tls, None, request, connect_timeout).await
}

/// [`send_within`] through `proxy` when given.
pub async fn send_within_via(
    tls: &Arc<ClientConfig>,
    proxy: Option<&ProxyUrl>,
    request: &Request,
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    send_within_on(tls, Route::of(proxy), request, connect_timeout).await
}

/// [`send_within`] on `route`.
pub async fn send_within_on(
    tls: &Arc<ClientConfig>,
    route: Route<'_>,
    request: &Request,
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    let (uri, origin) = target(request)?;
    let hyper_request = build(request, &uri, &origin.host)?;
    let mut conn = open_to(tls, &origin, None, route, connect_timeout).await?;
    let response = conn
        .sender
        .send_request(hyper_request)
        .await
        .map_err(|e| hyper_error(&e))?;
    Ok(exchange(response, conn, None))
}

/// [`send_within`] on a kept-alive connection from `pool` when one to the same origin is idle;
/// the connection goes back to `pool` once the body has been read to its end.
pub async fn send_pooled(
    pool: &Arc<Pool>,
    tls: &Arc<ClientConfig>,
    request: &Request,
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    send_pooled_via(pool, tls, None, request, connect_timeout).await
}

/// [`send_pooled`], a new connection going through `proxy` when given (an HTTP CONNECT
/// tunnel, for `http` and `https` alike). A pool serves one route, whose proxy decision for an
/// origin never changes, so a pooled connection is always the right kind.
pub async fn send_pooled_via(
    pool: &Arc<Pool>,
    tls: &Arc<ClientConfig>,
    proxy: Option<&ProxyUrl>,
    request: &Request,
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    send_pooled_on(pool, tls, Route::of(proxy), request, connect_timeout).await
}

/// [`send_pooled`], a new connection made on `route`. A pool serves one route (a Unix
/// socket's pool is its own), so a pooled connection is always the right kind.
pub async fn send_pooled_on(
    pool: &Arc<Pool>,
    tls: &Arc<ClientConfig>,
    route: Route<'_>,
    request: &Request,
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    let (uri, origin) = target(request)?;
    let mut hyper_request = build(request, &uri, &origin.host)?;
    while let Some(mut conn) = pool.take(&origin) {
        if conn.sender.ready().await.is_err() {
            continue; // closed while idle
        }
        match conn.sender.try_send_request(hyper_request).await {
            Ok(response) => return Ok(exchange(response, conn, Some((Arc::clone(pool), origin)))),
            Err(mut e) => match e.take_message() {
                // Not written: the next connection gets it.
                Some(unsent) => hyper_request = unsent,
                None => return Err(hyper_error(e.error())),
            },
        }
    }
    let mut conn = open_to(tls, &origin, None, route, connect_timeout).await?;
    let response = conn
        .sender
        .send_request(hyper_request)
        .await
        .map_err(|e| hyper_error(&e))?;
    Ok(exchange(response, conn, Some((Arc::clone(pool), origin))))
}

/// [`send_within`] to one of `addrs` (tried in order), never to an address the host name
/// would resolve to now: the connection of a guarded fetch, whose addresses were resolved and
/// checked once (`net::guard`). TLS still verifies the certificate for the URL's host name
/// (SNI and `Host` are the name; the socket is the checked address). The connection is its
/// own: it is not taken from a pool and never goes back to one.
pub async fn send_to(
    tls: &Arc<ClientConfig>,
    request: &Request,
    addrs: &[SocketAddr],
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    send_to_via(tls, None, request, addrs, connect_timeout).await
}

/// [`send_to`], through `proxy` when given: the proxy then resolves and reaches the host
/// itself (and does its own egress filtering), as with the blocking driver's proxies.
pub async fn send_to_via(
    tls: &Arc<ClientConfig>,
    proxy: Option<&ProxyUrl>,
    request: &Request,
    addrs: &[SocketAddr],
    connect_timeout: Duration,
) -> Result<Exchange, HttpError> {
    let (uri, origin) = target(request)?;
    let hyper_request = build(request, &uri, &origin.host)?;
    let mut conn = open_to(tls, &origin, Some(addrs), Route::of(proxy), connect_timeout).await?;
    let response = conn
        .sender
        .send_request(hyper_request)
        .await
        .map_err(|e| hyper_error(&e))?;
    Ok(exchange(response, conn, None))
}

/// The request's URL as a hyper URI and the origin it names (`http` or `https` only).
fn target(request: &Request) -> Result<(hyper::Uri, Origin), HttpError> {
    let uri: hyper::Uri = request.url.parse().map_err(|_| HttpError::Request)?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(HttpError::Request),
    };
    let host = uri.host().ok_or(HttpError::Request)?.to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    Ok((uri, Origin { https, host, port }))
}

/// Connects (within `connect_timeout`) on `route`: to `addrs` when given (a direct route),
/// else to the origin's host as resolved now, through a proxy's CONNECT tunnel, or to a Unix
/// socket; handshakes TLS for `https` (the origin's host names the TLS server); starts the
/// HTTP/1.1 connection's task.
async fn open_to(
    tls: &Arc<ClientConfig>,
    origin: &Origin,
    addrs: Option<&[SocketAddr]>,
    route: Route<'_>,
    connect_timeout: Duration,
) -> Result<Conn, HttpError> {
    let host = origin.host.as_str();
    let connecting = async {
        let tcp = match (route, addrs) {
            (Route::Unix(path), _) => return unix_stream(path).await,
            (Route::Proxy(p), _) => {
                let mut tcp = connect(p.host(), p.port()).await?;
                connect_tunnel(&mut tcp, origin, p).await?;
                tcp
            }
            (Route::Direct, Some(addrs)) => connect_addrs(addrs.iter().copied()).await?,
            (Route::Direct, None) => connect(host, origin.port).await?,
        };
        let _ = tcp.set_nodelay(true);
        Ok::<Box<dyn Stream>, HttpError>(Box::new(tcp))
    };
    let raw = connecting
        .or(async {
            Timer::after(connect_timeout).await;
            Err(HttpError::Connect(io::ErrorKind::TimedOut))
        })
        .await?;
    let stream: Box<dyn Stream> = if origin.https {
        let name = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let name = ServerName::try_from(name).map_err(|_| HttpError::Request)?;
        let tls = TlsConnector::from(Arc::clone(tls))
            .connect(name, raw)
            .await
            .map_err(|e| HttpError::Tls(e.to_string()))?;
        Box::new(tls)
    } else {
        raw
    };
    let (sender, conn) = hyper::client::conn::http1::handshake(FuturesIo::new(stream))
        .await
        .map_err(|e| hyper_error(&e))?;
    // The connection runs beside the exchange; the task handle is dropped with the exchange.
    let driver = smol::spawn(async move {
        let _ = conn.await;
    });
    Ok(Conn {
        sender,
        _driver: driver,
    })
}

/// The [`Exchange`] of a response that arrived on `conn`.
fn exchange(
    response: hyper::Response<Incoming>,
    conn: Conn,
    home: Option<(Arc<Pool>, Origin)>,
) -> Exchange {
    let (parts, body) = response.into_parts();
    // RFC 9112 section 9.6: after `Connection: close` no further request goes on this
    // connection; it is closed once the exchange ends instead of being pooled (hyper notices
    // the close too, but on its own task, possibly after the connection was taken again).
    let closing = parts
        .headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("close"));
    let home = if closing { None } else { home };
    let mut headers = Headers::new();
    for (name, value) in &parts.headers {
        if let Ok(v) = value.to_str() {
            let _ = headers.append(name.as_str(), v);
        }
    }
    Exchange {
        head: ResponseHead {
            status: parts.status.as_u16(),
            headers,
        },
        body,
        conn: Some(conn),
        home,
    }
}

/// The hyper request: origin-form target, `Host`, `User-Agent`, then the engine's headers.
fn build(
    request: &Request,
    uri: &hyper::Uri,
    host: &str,
) -> Result<hyper::Request<Full<Bytes>>, HttpError> {
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = uri.authority().map_or(host, |a| a.as_str());
    let method = match request.method {
        Method::Get => hyper::Method::GET,
        Method::Post => hyper::Method::POST,
        Method::Delete => hyper::Method::DELETE,
        Method::Put => hyper::Method::PUT,
    };
    let mut builder = hyper::Request::builder().method(method).uri(target);
    if !request.headers.contains("host") {
        builder = builder.header(hyper::header::HOST, authority);
    }
    if !request.headers.contains("user-agent") {
        builder = builder.header(hyper::header::USER_AGENT, USER_AGENT);
    }
    for (name, value) in request.headers.iter() {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::from(request.body.clone())))
        .map_err(|_| HttpError::Request)
}

/// The largest proxy answer head read for a CONNECT.
const MAX_PROXY_HEAD: usize = 8 * 1024;

/// Asks the proxy on `tcp` for a tunnel to `origin` (`CONNECT host:port`, with the proxy URL's
/// credentials) and reads its answer head: a 2xx opens the tunnel, anything else is
/// [`HttpError::ProxyRefused`].
async fn connect_tunnel(
    tcp: &mut TcpStream,
    origin: &Origin,
    proxy: &ProxyUrl,
) -> Result<(), HttpError> {
    use smol::io::{AsyncReadExt, AsyncWriteExt};
    let authority = format!("{}:{}", origin.host, origin.port);
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = proxy.authorization() {
        head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes())
        .await
        .map_err(|e| HttpError::Connect(e.kind()))?;
    // Byte by byte up to the blank line: nothing of the tunnel's own bytes is read here.
    let mut answer = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_PROXY_HEAD {
            return Err(HttpError::ProxyRefused(0));
        }
        match tcp.read(&mut byte).await {
            Ok(0) => return Err(HttpError::ProxyRefused(0)),
            Ok(_) => answer.push(byte[0]),
            Err(e) => return Err(HttpError::Connect(e.kind())),
        }
    }
    let status = std::str::from_utf8(&answer)
        .ok()
        .and_then(|t| t.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(HttpError::ProxyRefused(status))
    }
}

/// A connection to the Unix socket at `path`.
#[cfg(unix)]
async fn unix_stream(path: &std::path::Path) -> Result<Box<dyn Stream>, HttpError> {
    smol::net::unix::UnixStream::connect(path)
        .await
        .map(|s| Box::new(s) as Box<dyn Stream>)
        .map_err(|e| HttpError::Connect(e.kind()))
}

/// Unix sockets need a Unix system.
#[cfg(not(unix))]
async fn unix_stream(_: &std::path::Path) -> Result<Box<dyn Stream>, HttpError> {
    Err(HttpError::Connect(io::ErrorKind::Unsupported))
}

async fn connect(host: &str, port: u16) -> Result<TcpStream, HttpError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => smol::net::resolve((bare, port))
            .await
            .map_err(|e| HttpError::Resolve(Some(e.kind())))?,
    };
    connect_addrs(addrs).await
}

/// The first of `addrs` that takes the connection.
async fn connect_addrs(
    addrs: impl IntoIterator<Item = SocketAddr>,
) -> Result<TcpStream, HttpError> {
    let mut last = io::ErrorKind::NotFound;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e.kind(),
        }
    }
    if last == io::ErrorKind::NotFound {
        return Err(HttpError::Resolve(None));
    }
    Err(HttpError::Connect(last))
}

/// hyper's error in our vocabulary: a parse error is the peer's protocol fault; the rest is
/// the exchange's transport (with the I/O error's kind when there is one).
fn hyper_error(e: &hyper::Error) -> HttpError {
    if e.is_parse() || e.is_parse_status() {
        return HttpError::Protocol;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return HttpError::Exchange(Some(io.kind()));
        }
        source = s.source();
    }
    HttpError::Exchange(None)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn request(url: &str) -> Request {
        let mut headers = Headers::new();
        headers.append("Accept", "application/json").unwrap();
        Request {
            method: Method::Post,
            url: url.to_owned(),
            headers,
            body: b"{}".to_vec(),
        }
    }

    /// A loopback HTTP/1.1 server answering every request `ok`, keeping connections alive
    /// unless `close` (then it answers `Connection: close` and closes). It serves at most
    /// `max_conns` connections, each for at most 5 s; `accepted` counts them.
    fn ok_server(
        close: bool,
        max_conns: usize,
    ) -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        std::thread::JoinHandle<()>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let server = std::thread::spawn(move || {
            let mut conns = Vec::new();
            for _ in 0..max_conns {
                let Ok((s, _)) = listener.accept() else {
                    break;
                };
                count.fetch_add(1, Ordering::SeqCst);
                conns.push(std::thread::spawn(move || serve_ok(s, close)));
            }
            for c in conns {
                c.join().unwrap();
            }
        });
        (url, accepted, server)
    }

    /// Answers `ok` to each request on `s` until it closes (or 5 s pass without a byte).
    fn serve_ok(mut s: std::net::TcpStream, close: bool) {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            // One request: the head, then its Content-Length body.
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + len {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            buf.drain(..end + 4 + len);
            let connection = if close { "Connection: close\r\n" } else { "" };
            let answer = format!("HTTP/1.1 200 OK\r\n{connection}Content-Length: 2\r\n\r\nok");
            if s.write_all(answer.as_bytes()).is_err() || close {
                return;
            }
        }
    }

    fn read_all(ex: &mut Exchange) -> Vec<u8> {
        smol::block_on(ex.read_to_vec(1024)).unwrap()
    }

    #[test]
    fn pooled_exchanges_read_to_their_end_reuse_one_connection() {
        use std::sync::atomic::Ordering;
        let (url, accepted, server) = ok_server(false, 1);
        let tls = tls_config().unwrap();
        let pool = Pool::new(4);
        for _ in 0..3 {
            let mut ex =
                smol::block_on(send_pooled(&pool, &tls, &request(&url), CONNECT_TIMEOUT)).unwrap();
            assert_eq!(ex.head.status, 200);
            assert_eq!(read_all(&mut ex), b"ok");
            drop(ex);
            assert_eq!(pool.idle_count(), 1, "the connection went back to the pool");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        drop(pool); // closes the connection: the server's thread ends
        server.join().unwrap();
    }

    #[test]
    fn an_exchange_dropped_before_its_end_closes_its_connection() {
        let (url, _accepted, server) = ok_server(false, 1);
        let tls = tls_config().unwrap();
        let pool = Pool::new(4);
        let ex = smol::block_on(send_pooled(&pool, &tls, &request(&url), CONNECT_TIMEOUT)).unwrap();
        drop(ex);
        assert_eq!(
            pool.idle_count(),
            0,
            "a connection with an unread body is not reused"
        );
        server.join().unwrap(); // the server saw the connection close
    }

    #[test]
    fn a_connection_the_server_closed_is_not_reused() {
        use std::sync::atomic::Ordering;
        let (url, accepted, server) = ok_server(true, 3);
        let tls = tls_config().unwrap();
        let pool = Pool::new(4);
        for _ in 0..3 {
            let mut ex =
                smol::block_on(send_pooled(&pool, &tls, &request(&url), CONNECT_TIMEOUT)).unwrap();
            assert_eq!(read_all(&mut ex), b"ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        server.join().unwrap();
    }

    #[test]
    fn an_answer_with_connection_close_never_goes_back_to_the_pool() {
        let (url, _accepted, server) = ok_server(true, 1);
        let tls = tls_config().unwrap();
        let pool = Pool::new(4);
        let mut ex =
            smol::block_on(send_pooled(&pool, &tls, &request(&url), CONNECT_TIMEOUT)).unwrap();
        assert_eq!(read_all(&mut ex), b"ok");
        // At once, not only after hyper's connection task saw the close.
        assert_eq!(pool.idle_count(), 0);
        drop((ex, pool));
        server.join().unwrap();
    }

    #[test]
    fn a_connection_idle_past_the_limit_is_not_reused() {
        use std::sync::atomic::Ordering;
        let (url, accepted, server) = ok_server(false, 2);
        let tls = tls_config().unwrap();
        let pool = Pool::with_max_idle_age(4, Duration::from_millis(50));
        for _ in 0..2 {
            let mut ex =
                smol::block_on(send_pooled(&pool, &tls, &request(&url), CONNECT_TIMEOUT)).unwrap();
            assert_eq!(read_all(&mut ex), b"ok");
            drop(ex);
            assert_eq!(pool.idle_count(), 1);
            // Longer than the limit: the next request opens a new connection.
            std::thread::sleep(Duration::from_millis(120));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        drop(pool);
        server.join().unwrap();
    }

    #[test]
    fn the_pool_keeps_at_most_max_idle_connections() {
        let (url, _accepted, server) = ok_server(false, 2);
        let tls = tls_config().unwrap();
        let pool = Pool::new(1);
        let mut a =
            smol::block_on(send_pooled(&pool, &tls, &request(&url), CONNECT_TIMEOUT)).unwrap();
        let mut b =
            smol::block_on(send_pooled(&pool, &tls, &request(&url), CONNECT_TIMEOUT)).unwrap();
        assert_eq!(read_all(&mut a), b"ok");
        assert_eq!(read_all(&mut b), b"ok");
        assert_eq!(pool.idle_count(), 1);
        drop((a, b, pool));
        server.join().unwrap();
    }

    #[test]
    fn the_request_target_is_origin_form_with_host_and_user_agent() {
        let r = request("http://127.0.0.1:8080/mcp?x=1");
        let uri: hyper::Uri = r.url.parse().unwrap();
        let built = build(&r, &uri, "127.0.0.1").unwrap();
        assert_eq!(built.uri().to_string(), "/mcp?x=1");
        assert_eq!(built.headers()["host"], "127.0.0.1:8080");
        assert!(built.headers()["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("mcpwire/"));
        assert_eq!(built.headers()["accept"], "application/json");
    }

    #[test]
    fn failures_before_a_connection_opens_were_never_written() {
        for e in [
            HttpError::Request,
            HttpError::Resolve(None),
            HttpError::Connect(io::ErrorKind::ConnectionRefused),
            HttpError::Tls(String::new()),
        ] {
            assert!(!e.maybe_written(), "{e:?}");
        }
        for e in [
            HttpError::Exchange(None),
            HttpError::Protocol,
            HttpError::TimedOut,
        ] {
            assert!(e.maybe_written(), "{e:?}");
        }
    }

    #[test]
    fn a_refused_connection_is_a_connect_failure() {
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", dead.local_addr().unwrap());
        drop(dead);
        let tls = tls_config().unwrap();
        let err = smol::block_on(send(&tls, &request(&url)))
            .err()
            .expect("nothing listens there");
        assert!(
            matches!(err, HttpError::Connect(io::ErrorKind::ConnectionRefused)),
            "{err:?}"
        );
    }

    #[test]
    fn an_https_peer_that_does_not_speak_tls_is_a_tls_failure() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        });
        let tls = tls_config().unwrap();
        let url = format!("https://localhost:{}/", addr.port());
        let err = smol::block_on(send(&tls, &request(&url)))
            .err()
            .expect("no TLS peer");
        assert!(matches!(err, HttpError::Tls(_)), "{err:?}");
        peer.join().unwrap();
    }

    #[test]
    fn a_non_http_answer_is_a_protocol_failure() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n\r\n");
        });
        let tls = tls_config().unwrap();
        let url = format!("http://{addr}/mcp");
        let err = smol::block_on(send(&tls, &request(&url)))
            .err()
            .expect("not HTTP");
        assert!(matches!(err, HttpError::Protocol), "{err:?}");
        assert_eq!(err.failure().source(), FailureSource::Protocol);
        peer.join().unwrap();
    }
}
