//! A small blocking HTTP/1.1 server for the dev servers: one thread accepts, one thread serves
//! each connection (at most [`Limits::max_connections`] at once), requests are parsed with
//! `httparse`, bodies are bounded, and a handler answers with a whole response or a chunked
//! stream (Server-Sent Events).
//!
//! It is meant for loopback use by people and tests: keep-alive, `Expect: 100-continue`,
//! chunked request bodies and HEAD are handled; TLS, compression and HTTP/2 are not.
//! [`HttpServer::stop`] stops accepting, wakes every waiting handler through the shared
//! [`Shutdown`], closes open connections and joins every thread.

/// How long `stop` waits for the handlers it woke to write their answers.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown as NetShutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mcpwire_core::http::{status_text, Headers};

/// Locks a mutex, taking the data even if another thread panicked while holding it: the dev
/// servers' state stays usable (each update is a whole assignment).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A stop flag that sleeping handlers can wait on.
#[derive(Debug, Default)]
pub struct Shutdown {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Shutdown {
    /// A flag not yet raised.
    pub fn new() -> Arc<Self> {
        Arc::new(Shutdown::default())
    }

    /// Whether [`Shutdown::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        *lock(&self.stopped)
    }

    /// Raises the flag and wakes every [`Shutdown::sleep`].
    pub fn stop(&self) {
        *lock(&self.stopped) = true;
        self.cv.notify_all();
    }

    /// Sleeps for `d`, or less when stopped; returns whether the flag is raised.
    pub fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut stopped = lock(&self.stopped);
        loop {
            if *stopped {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            stopped = self
                .cv
                .wait_timeout(stopped, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Bounds on what a peer can make the server hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest request head (request line and headers), in bytes.
    pub max_head: usize,
    /// The largest request body, in bytes (`413` past it).
    pub max_body: usize,
    /// Connections served at once; more are answered `503` and closed.
    pub max_connections: usize,
    /// How long an idle keep-alive connection is kept.
    pub idle_timeout: Duration,
    /// How long a write may block (a peer that stops reading is dropped).
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 64 * 1024,
            max_body: 4 * 1024 * 1024,
            max_connections: 512,
            idle_timeout: Duration::from_secs(120),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// One parsed request.
#[derive(Debug)]
pub struct Request {
    /// The method token (`GET`, `POST`, ...).
    pub method: String,
    /// The path, without the query (not percent-decoded).
    pub path: String,
    /// The raw query, without `?` (empty when none).
    pub query: String,
    /// The headers.
    pub headers: Headers,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Request {
    /// The query's `name=value` pairs, percent-decoded (`+` is a space).
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        self.query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (percent_decode(k), percent_decode(v)),
                None => (percent_decode(p), String::new()),
            })
            .collect()
    }

    /// Every value of the query parameter `name`, in order.
    pub fn query_values(&self, name: &str) -> Vec<String> {
        self.query_pairs()
            .into_iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .collect()
    }

    /// The path's segments between slashes (empty segments dropped).
    pub fn segments(&self) -> Vec<&str> {
        self.path.split('/').filter(|s| !s.is_empty()).collect()
    }
}

/// Decodes `%XX` escapes and `+`; a malformed escape is kept as written.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a whole answer goes: a connection's [`Responder`], or a [`Captured`] answer that a
/// server built on the core's engine hands its driver (the authorization server writes to
/// either).
pub trait Respond {
    /// Sends one whole response.
    fn send(&mut self, status: u16, headers: &Headers, body: &[u8]) -> io::Result<()>;
}

impl Respond for Responder<'_> {
    fn send(&mut self, status: u16, headers: &Headers, body: &[u8]) -> io::Result<()> {
        Responder::send(self, status, headers, body)
    }
}

/// A whole response kept instead of written: status, headers, body.
#[derive(Debug, Default)]
pub struct Captured(pub Option<(u16, Headers, Vec<u8>)>);

impl Respond for Captured {
    fn send(&mut self, status: u16, headers: &Headers, body: &[u8]) -> io::Result<()> {
        if self.0.is_some() {
            return Err(io::Error::other("response already sent"));
        }
        self.0 = Some((status, headers.clone(), body.to_vec()));
        Ok(())
    }
}

/// Answers requests. Called on the connection's thread; it may block (long polls, slow tools)
/// as long as it returns soon after the server's [`Shutdown`] is raised.
pub trait Handler: Send + Sync + 'static {
    /// Answers `req` through `res`. A handler that sends nothing gets a `500`.
    fn handle(&self, req: &Request, res: &mut Responder<'_>);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Unsent,
    Streaming,
    Done,
}

/// How a handler answers: one whole response ([`Responder::send`]) or a stream
/// ([`Responder::start_stream`], [`Responder::write_chunk`], [`Responder::finish`]).
pub struct Responder<'a> {
    stream: &'a TcpStream,
    state: State,
    close: bool,
    http10: bool,
    head: bool,
    chunked: bool,
}

impl<'a> Responder<'a> {
    fn new(stream: &'a TcpStream, close: bool, http10: bool, head: bool) -> Self {
        Responder {
            stream,
            state: State::Unsent,
            close,
            http10,
            head,
            chunked: false,
        }
    }

    /// Whether the handler already answered (wholly or by starting a stream).
    pub fn is_sent(&self) -> bool {
        self.state != State::Unsent
    }

    /// Whether a stream was started.
    pub fn is_streaming(&self) -> bool {
        self.state == State::Streaming
    }

    fn head_text(&self, status: u16, headers: &Headers) -> String {
        let mut text = format!("HTTP/1.1 {status} {}\r\n", status_text(status));
        // A handler's `Connection` tokens are kept (they nominate hop-by-hop headers); `close`
        // is this server's to add, and the other framing headers are this server's to write.
        let mut connection: Vec<&str> = Vec::new();
        for (name, value) in headers.iter() {
            let lower = name.to_ascii_lowercase();
            if lower == "connection" {
                connection.extend(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("close")),
                );
                continue;
            }
            if matches!(
                lower.as_str(),
                "content-length" | "transfer-encoding" | "keep-alive"
            ) {
                continue;
            }
            text.push_str(name);
            text.push_str(": ");
            text.push_str(value);
            text.push_str("\r\n");
        }
        if self.close {
            connection.push("close");
        }
        if !connection.is_empty() {
            text.push_str("Connection: ");
            text.push_str(&connection.join(", "));
            text.push_str("\r\n");
        }
        text
    }

    /// Sends a whole response. A second answer is refused.
    pub fn send(&mut self, status: u16, headers: &Headers, body: &[u8]) -> io::Result<()> {
        if self.state != State::Unsent {
            return Err(io::Error::other("response already sent"));
        }
        self.state = State::Done;
        let mut text = self.head_text(status, headers);
        let bodyless = status == 204 || status == 304 || (100..200).contains(&status);
        if !bodyless {
            text.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        text.push_str("\r\n");
        let mut out = text.into_bytes();
        if !bodyless && !self.head {
            out.extend_from_slice(body);
        }
        let mut s = self.stream;
        s.write_all(&out)?;
        s.flush()
    }

    /// Starts a streamed response (chunked; close-delimited for an HTTP/1.0 peer).
    pub fn start_stream(&mut self, status: u16, headers: &Headers) -> io::Result<()> {
        if self.state != State::Unsent {
            return Err(io::Error::other("response already sent"));
        }
        self.state = State::Streaming;
        if self.http10 {
            self.close = true;
        }
        self.chunked = !self.http10 && !self.head;
        let mut text = self.head_text(status, headers);
        if self.chunked {
            text.push_str("Transfer-Encoding: chunked\r\n");
        }
        text.push_str("\r\n");
        let mut s = self.stream;
        s.write_all(text.as_bytes())?;
        s.flush()
    }

    /// Writes one piece of a started stream.
    pub fn write_chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if self.state != State::Streaming {
            return Err(io::Error::other("no stream started"));
        }
        if data.is_empty() || self.head {
            return Ok(());
        }
        let mut s = self.stream;
        if self.chunked {
            let mut out = format!("{:x}\r\n", data.len()).into_bytes();
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
            s.write_all(&out)?;
        } else {
            s.write_all(data)?;
        }
        s.flush()
    }

    /// Ends a started stream.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.state != State::Streaming {
            return Ok(());
        }
        self.state = State::Done;
        if self.chunked {
            let mut s = self.stream;
            s.write_all(b"0\r\n\r\n")?;
            s.flush()?;
        }
        Ok(())
    }

    /// Gives up on answering (the peer went away): nothing more is written and the connection
    /// is closed.
    pub fn abandon(&mut self) {
        self.state = State::Done;
        self.close = true;
    }

    /// Closes the connection after this response.
    pub fn close_after(&mut self) {
        self.close = true;
    }

    /// Whether the peer has closed its side (or the connection broke): a waiting handler's
    /// cue that nobody is listening any more. Bytes the peer sent ahead (a pipelined request)
    /// are left unread.
    pub fn peer_gone(&self) -> bool {
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let mut probe = [0u8; 1];
        let gone = match self.stream.peek(&mut probe) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => false,
            Err(_) => true,
        };
        let restored = self.stream.set_nonblocking(false).is_ok();
        gone || !restored
    }
}

/// Builds a header map from fixed names and values; a pair the map refuses (a value with a
/// line break, say) is left out.
pub fn headers(pairs: &[(&str, &str)]) -> Headers {
    let mut h = Headers::new();
    for (n, v) in pairs {
        let _ = h.append(*n, *v);
    }
    h
}

/// A running server.
pub struct HttpServer {
    addr: SocketAddr,
    shutdown: Arc<Shutdown>,
    accept: Option<JoinHandle<()>>,
    conns: Arc<Connections>,
}

#[derive(Default)]
struct Connections {
    next: AtomicU64,
    open: Mutex<HashMap<u64, TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl HttpServer {
    /// Binds `addr` (port 0 picks a free port) and serves `handler` until [`HttpServer::stop`].
    /// `shutdown` is raised by `stop`; handlers that wait should wait on it (or on their own
    /// signal raised with it).
    pub fn start(
        addr: impl ToSocketAddrs,
        handler: Arc<dyn Handler>,
        limits: Limits,
        shutdown: Arc<Shutdown>,
    ) -> io::Result<HttpServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let conns = Arc::new(Connections::default());
        let accept = {
            let conns = conns.clone();
            let shutdown = shutdown.clone();
            std::thread::Builder::new()
                .name(format!("mcpwire-dev-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, handler, limits, shutdown, conns))?
        };
        Ok(HttpServer {
            addr,
            shutdown,
            accept: Some(accept),
            conns,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The shared stop flag.
    pub fn shutdown(&self) -> &Arc<Shutdown> {
        &self.shutdown
    }

    /// Stops accepting, raises the stop flag, lets the handlers it woke write their answers
    /// (at most [`STOP_GRACE`]), closes open connections and joins every thread. Calling it
    /// twice is harmless.
    pub fn stop(&mut self) {
        self.shutdown.stop();
        if let Some(accept) = self.accept.take() {
            // Wake the blocking accept with a connection of our own.
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
            let _ = accept.join();
        }
        // Close the read side first: idle keep-alive connections end at once, while a handler
        // that the stop woke (a waiting poll or MCP request answering 503 with Retry-After)
        // can still write its answer; then, after a short grace, close what is left.
        for s in lock(&self.conns.open).values() {
            let _ = s.shutdown(NetShutdown::Read);
        }
        let grace = std::time::Instant::now() + STOP_GRACE;
        while !lock(&self.conns.open).is_empty() && std::time::Instant::now() < grace {
            std::thread::sleep(Duration::from_millis(5));
        }
        for (_, s) in lock(&self.conns.open).drain() {
            let _ = s.shutdown(NetShutdown::Both);
        }
        let threads: Vec<_> = lock(&self.conns.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(
    listener: TcpListener,
    handler: Arc<dyn Handler>,
    limits: Limits,
    shutdown: Arc<Shutdown>,
    conns: Arc<Connections>,
) {
    for incoming in listener.incoming() {
        if shutdown.is_stopped() {
            break;
        }
        let Ok(stream) = incoming else {
            // A failed accept (the peer reset before we took it, or too many open files):
            // pause a little instead of spinning.
            if shutdown.sleep(Duration::from_millis(10)) {
                break;
            }
            continue;
        };
        lock(&conns.threads).retain(|t| !t.is_finished());
        let busy = lock(&conns.open).len() >= limits.max_connections;
        if busy {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = (&stream).write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            continue;
        }
        let id = conns.next.fetch_add(1, Ordering::Relaxed);
        let Ok(registered) = stream.try_clone() else {
            continue;
        };
        lock(&conns.open).insert(id, registered);
        let handler = handler.clone();
        let shutdown2 = shutdown.clone();
        let conns2 = conns.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpwire-dev-conn".to_owned())
            .spawn(move || {
                serve_connection(&stream, &*handler, limits, &shutdown2);
                let _ = stream.shutdown(NetShutdown::Both);
                lock(&conns2.open).remove(&id);
            });
        match spawned {
            Ok(t) => lock(&conns.threads).push(t),
            Err(_) => {
                if let Some(s) = lock(&conns.open).remove(&id) {
                    let _ = s.shutdown(NetShutdown::Both);
                }
            }
        }
    }
}

/// Why a request could not be read.
enum ReadError {
    /// The connection ended or broke; nothing to answer.
    Closed,
    /// Answer with this status and close.
    Reject(u16, &'static str),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Closed
    }
}

/// Reads more bytes into `buf`; `Ok(0)` at end of stream.
fn fill(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 16 * 1024];
    let mut s = stream;
    loop {
        match s.read(&mut chunk) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

struct Head {
    method: String,
    target: String,
    minor: u8,
    headers: Headers,
}

/// Reads one request head from `buf` (topping it up from `stream`); `Ok(None)` when the peer
/// closed between requests.
fn read_head(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    limits: &Limits,
) -> Result<Option<Head>, ReadError> {
    loop {
        if !buf.is_empty() {
            let mut slots = [httparse::EMPTY_HEADER; 96];
            let mut req = httparse::Request::new(&mut slots);
            match req.parse(buf) {
                Ok(httparse::Status::Complete(n)) if n > limits.max_head => {
                    return Err(ReadError::Reject(431, "request head too large"))
                }
                Ok(httparse::Status::Complete(n)) => {
                    let method = req.method.unwrap_or_default().to_owned();
                    let target = req.path.unwrap_or_default().to_owned();
                    let minor = req.version.unwrap_or(1);
                    let mut headers = Headers::new();
                    for h in req.headers.iter() {
                        let value = std::str::from_utf8(h.value)
                            .map_err(|_| ReadError::Reject(400, "a header value is not UTF-8"))?;
                        headers
                            .append(h.name, value.trim())
                            .map_err(|_| ReadError::Reject(400, "a header is malformed"))?;
                    }
                    buf.drain(..n);
                    return Ok(Some(Head {
                        method,
                        target,
                        minor,
                        headers,
                    }));
                }
                Ok(httparse::Status::Partial) => {}
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(ReadError::Reject(431, "too many request headers"))
                }
                Err(_) => return Err(ReadError::Reject(400, "malformed request head")),
            }
            if buf.len() > limits.max_head {
                return Err(ReadError::Reject(431, "request head too large"));
            }
        }
        let was_empty = buf.is_empty();
        if fill(stream, buf)? == 0 {
            return if was_empty {
                Ok(None)
            } else {
                Err(ReadError::Closed)
            };
        }
    }
}

/// Makes sure `buf` holds at least `n` bytes.
fn need(stream: &TcpStream, buf: &mut Vec<u8>, n: usize) -> Result<(), ReadError> {
    while buf.len() < n {
        if fill(stream, buf)? == 0 {
            return Err(ReadError::Closed);
        }
    }
    Ok(())
}

/// Reads one CRLF-terminated line (at most 4 KiB) from `buf`, without the CRLF.
fn line(stream: &TcpStream, buf: &mut Vec<u8>) -> Result<Vec<u8>, ReadError> {
    loop {
        if let Some(pos) = buf.windows(2).position(|w| w == b"\r\n") {
            let l = buf[..pos].to_vec();
            buf.drain(..pos + 2);
            return Ok(l);
        }
        if buf.len() > 4096 {
            return Err(ReadError::Reject(400, "chunk line too long"));
        }
        if fill(stream, buf)? == 0 {
            return Err(ReadError::Closed);
        }
    }
}

fn read_body(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    head: &Head,
    limits: &Limits,
) -> Result<Vec<u8>, ReadError> {
    let te: Vec<&str> = head.headers.get_all("Transfer-Encoding").collect();
    if !te.is_empty() {
        let last = te
            .last()
            .and_then(|v| v.rsplit(',').next())
            .map(|v| v.trim().to_ascii_lowercase());
        if last.as_deref() != Some("chunked") {
            return Err(ReadError::Reject(
                501,
                "only chunked transfer coding is read",
            ));
        }
        let mut body = Vec::new();
        loop {
            let size_line = line(stream, buf)?;
            let size_text = String::from_utf8_lossy(&size_line);
            let size_text = size_text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| ReadError::Reject(400, "malformed chunk size"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !line(stream, buf)?.is_empty() {}
                return Ok(body);
            }
            if body.len().saturating_add(size) > limits.max_body {
                return Err(ReadError::Reject(413, "request body too large"));
            }
            need(stream, buf, size + 2)?;
            body.extend_from_slice(&buf[..size]);
            if &buf[size..size + 2] != b"\r\n" {
                return Err(ReadError::Reject(400, "malformed chunk"));
            }
            buf.drain(..size + 2);
        }
    }
    let mut lengths = head.headers.get_all("Content-Length");
    let Some(first) = lengths.next() else {
        return Ok(Vec::new());
    };
    if lengths.any(|other| other != first) {
        return Err(ReadError::Reject(400, "conflicting Content-Length headers"));
    }
    let len: usize = first
        .parse()
        .map_err(|_| ReadError::Reject(400, "malformed Content-Length"))?;
    if len > limits.max_body {
        return Err(ReadError::Reject(413, "request body too large"));
    }
    need(stream, buf, len)?;
    Ok(buf.drain(..len).collect())
}

fn reject(stream: &TcpStream, status: u16, why: &str) {
    let body = format!("{why}\n");
    let text = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        status_text(status),
        body.len()
    );
    let mut s = stream;
    if s.write_all(text.as_bytes()).is_err() {
        return;
    }
    linger(stream);
}

/// After an early answer (a `413` while the body is still coming): stop writing, then read and
/// drop what the client still sends, for a bounded time and amount, before closing. Closing at
/// once would reset the connection under a client that is still writing, which then sees a
/// broken pipe instead of the answer (RFC 9112 section 9.6: "lingering close").
fn linger(stream: &TcpStream) {
    const LINGER_TIME: Duration = Duration::from_secs(2);
    const LINGER_BYTES: usize = 64 * 1024 * 1024;
    let _ = stream.shutdown(NetShutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let started = Instant::now();
    let mut sink = [0u8; 16 * 1024];
    let mut dropped = 0;
    let mut s = stream;
    while started.elapsed() < LINGER_TIME && dropped < LINGER_BYTES {
        match s.read(&mut sink) {
            Ok(0) => return,
            Ok(n) => dropped += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

fn serve_connection(
    stream: &TcpStream,
    handler: &dyn Handler,
    limits: Limits,
    shutdown: &Shutdown,
) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(limits.idle_timeout));
    let _ = stream.set_write_timeout(Some(limits.write_timeout));
    let mut buf = Vec::new();
    while !shutdown.is_stopped() {
        let head = match read_head(stream, &mut buf, &limits) {
            Ok(Some(h)) => h,
            Ok(None) | Err(ReadError::Closed) => return,
            Err(ReadError::Reject(status, why)) => return reject(stream, status, why),
        };
        if head.minor == 1
            && head
                .headers
                .get("Expect")
                .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        {
            let mut s = stream;
            if s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
                return;
            }
        }
        let body = match read_body(stream, &mut buf, &head, &limits) {
            Ok(b) => b,
            Err(ReadError::Closed) => return,
            Err(ReadError::Reject(status, why)) => return reject(stream, status, why),
        };
        let connection = head
            .headers
            .get_all("Connection")
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_ascii_lowercase())
            .collect::<Vec<_>>();
        let close = if head.minor == 0 {
            !connection.iter().any(|v| v == "keep-alive")
        } else {
            connection.iter().any(|v| v == "close")
        };
        let (path, query) = match head.target.split_once('?') {
            Some((p, q)) => (p.to_owned(), q.to_owned()),
            None => (head.target.clone(), String::new()),
        };
        let is_head = head.method == "HEAD";
        let req = Request {
            method: head.method,
            path,
            query,
            headers: head.headers,
            body,
        };
        let mut res = Responder::new(stream, close, head.minor == 0, is_head);
        handler.handle(&req, &mut res);
        match res.state {
            State::Unsent => {
                let _ = res.send(
                    500,
                    &headers(&[("Content-Type", "text/plain")]),
                    b"no response\n",
                );
            }
            State::Streaming => {
                if res.finish().is_err() {
                    return;
                }
            }
            State::Done => {}
        }
        if res.close {
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_decoded_and_repeatable() {
        let r = Request {
            method: "GET".into(),
            path: "/x".into(),
            query: "channel=main&channel=side%2Done&limit=5&x=a+b&bad=%zz".into(),
            headers: Headers::new(),
            body: vec![],
        };
        assert_eq!(r.query_values("channel"), ["main", "side-one"]);
        assert_eq!(r.query_values("x"), ["a b"]);
        assert_eq!(r.query_values("bad"), ["%zz"]);
        assert!(r.query_values("none").is_empty());
    }

    #[test]
    fn a_trailing_percent_is_kept() {
        assert_eq!(percent_decode("50%"), "50%");
        assert_eq!(percent_decode("5%2"), "5%2");
        assert_eq!(percent_decode("%41"), "A");
    }
}
