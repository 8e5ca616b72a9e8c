//! The engine's HTTP request values on hyper 1 (its HTTP/1.1 client connection), over smol's
//! sockets, with rustls through futures-rustls for `https`.
//!
//! One connection per exchange: [`send`] resolves, connects, handshakes, writes the request and
//! returns when the response head has arrived; the body is then read from [`Exchange`]. The
//! connection is driven by a task owned by the [`Exchange`] (or by the `send` future while it
//! runs), so dropping either closes the connection at once: that is how a deadline cancels.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_rustls::rustls::pki_types::ServerName;
use futures_rustls::rustls::{self, ClientConfig, RootCertStore};
use futures_rustls::TlsConnector;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use mcpwire_core::http::{Headers, Method, Request, ResponseHead};
use mcpwire_core::tunnel::failure::{
    transport_failure, FailureSource, TransportErrorKind, TransportStage, TunnelFailure,
};
use smol::future::FutureExt as _;
use smol::io::{AsyncRead, AsyncWrite};
use smol::net::TcpStream;
use smol::{Task, Timer};
use smol_hyper::rt::FuturesIo;

/// How long resolving and connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
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
    /// The TLS handshake failed.
    Tls,
    /// The exchange failed after the connection opened.
    Exchange(Option<io::ErrorKind>),
    /// The peer's answer is not HTTP/1.1.
    Protocol,
    /// The caller's time limit passed.
    TimedOut,
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
            HttpError::Tls => transport_failure(TransportStage::Tls, None),
            HttpError::Exchange(kind) => transport_failure(TransportStage::Exchange, *kind),
            HttpError::Protocol => {
                TunnelFailure::protocol(TransportErrorKind::InvalidProtocolResponse)
            }
            HttpError::TimedOut => {
                transport_failure(TransportStage::Exchange, Some(io::ErrorKind::TimedOut))
            }
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
            HttpError::Request | HttpError::Resolve(_) | HttpError::Connect(_) | HttpError::Tls
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

/// A response whose head arrived; its body is read with [`Exchange::next_chunk`].
pub struct Exchange {
    /// The status and headers.
    pub head: ResponseHead,
    body: Incoming,
    /// Drives the connection; dropping it closes the connection.
    _conn: Task<()>,
}

impl Exchange {
    /// The next piece of the body; `Ok(None)` at its end.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            match self.body.frame().await {
                None => return Ok(None),
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
    let uri: hyper::Uri = request.url.parse().map_err(|_| HttpError::Request)?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(HttpError::Request),
    };
    let host = uri.host().ok_or(HttpError::Request)?.to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let hyper_request = build(request, &uri, &host)?;
    let tcp = connect(&host, port)
        .or(async {
            Timer::after(connect_timeout).await;
            Err(HttpError::Connect(io::ErrorKind::TimedOut))
        })
        .await?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = if https {
        let name = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let name = ServerName::try_from(name).map_err(|_| HttpError::Request)?;
        let tls = TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await
            .map_err(|_| HttpError::Tls)?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(FuturesIo::new(stream))
        .await
        .map_err(|e| hyper_error(&e))?;
    // The connection runs beside the exchange; the task handle is dropped with the exchange.
    let conn = smol::spawn(async move {
        let _ = conn.await;
    });
    let response = sender
        .send_request(hyper_request)
        .await
        .map_err(|e| hyper_error(&e))?;
    let (parts, body) = response.into_parts();
    let mut headers = Headers::new();
    for (name, value) in &parts.headers {
        if let Ok(v) = value.to_str() {
            let _ = headers.append(name.as_str(), v);
        }
    }
    Ok(Exchange {
        head: ResponseHead {
            status: parts.status.as_u16(),
            headers,
        },
        body,
        _conn: conn,
    })
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

async fn connect(host: &str, port: u16) -> Result<TcpStream, HttpError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => smol::net::resolve((bare, port))
            .await
            .map_err(|e| HttpError::Resolve(Some(e.kind())))?,
    };
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
            HttpError::Tls,
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
        assert!(matches!(err, HttpError::Tls), "{err:?}");
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
