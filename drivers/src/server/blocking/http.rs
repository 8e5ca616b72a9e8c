//! The blocking driver's HTTP/1.1 listener: one thread accepts, one thread serves each
//! connection (at most [`HttpLimits::max_connections`] at once). A connection thread reads one
//! request (head parsed with `httparse`, bounded; body by `Content-Length` or chunked, bounded),
//! hands it to the glue with a channel, and writes what comes out of the channel: a whole
//! response, or a chunked stream of SSE events. While it waits, it watches the socket: a peer
//! that closed its side is reported to the glue (which cancels what the exchange carried).
//! Keep-alive, `Expect: 100-continue` and HTTP/1.0 peers are handled; TLS and HTTP/2 are not
//! (the listener is meant for loopback).
//!
//! [`Listener::stop`] stops accepting, closes every connection and joins every thread.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown as NetShutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mcpwire_core::http::{status_text, Headers};

use crate::server::transport::{
    is_framing_header, Exchanges, HttpLimits, Incoming, Out, Sink, EXCHANGE_BACKLOG,
};

/// How often a connection waiting for its answer looks whether the peer went away.
const PEER_CHECK: Duration = Duration::from_millis(25);
/// Header slots `httparse` gets; a request with more is answered `431`.
const MAX_HEADERS: usize = 96;
/// The longest chunk-size or trailer line of a chunked body.
const MAX_CHUNK_LINE: usize = 4096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sink for mpsc::SyncSender<Out> {
    fn push(&self, out: Out) -> bool {
        self.try_send(out).is_ok()
    }
}

/// A running listener.
pub(crate) struct Listener {
    addr: SocketAddr,
    stopped: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    conns: Arc<Connections>,
}

#[derive(Default)]
struct Connections {
    next: AtomicU64,
    open: Mutex<HashMap<u64, TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Listener {
    /// Serves `listener` (already bound) until [`Listener::stop`].
    pub(crate) fn start<E>(
        listener: TcpListener,
        glue: Arc<E>,
        limits: HttpLimits,
    ) -> io::Result<Listener>
    where
        E: Exchanges<mpsc::SyncSender<Out>>,
    {
        let addr = listener.local_addr()?;
        let conns = Arc::new(Connections::default());
        let stopped = Arc::new(AtomicBool::new(false));
        let accept = {
            let conns = conns.clone();
            let stopped = stopped.clone();
            std::thread::Builder::new()
                .name(format!("mcpwire-server-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, glue, limits, stopped, conns))?
        };
        Ok(Listener {
            addr,
            stopped,
            accept: Some(accept),
            conns,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes open connections and joins every thread. Harmless twice.
    pub(crate) fn stop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            // Wake the blocking accept with a connection of our own.
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(if wake.is_ipv4() {
                    std::net::Ipv4Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv6Addr::LOCALHOST.into()
                });
            }
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
            let _ = accept.join();
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

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop<E>(
    listener: TcpListener,
    glue: Arc<E>,
    limits: HttpLimits,
    stopped: Arc<AtomicBool>,
    conns: Arc<Connections>,
) where
    E: Exchanges<mpsc::SyncSender<Out>>,
{
    for incoming in listener.incoming() {
        if stopped.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = incoming else {
            // A failed accept (the peer reset first, or no file descriptors left): pause a
            // little instead of spinning.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        lock(&conns.threads).retain(|t| !t.is_finished());
        if lock(&conns.open).len() >= limits.max_connections {
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
        let glue = glue.clone();
        let stopped2 = stopped.clone();
        let conns2 = conns.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpwire-server-conn".to_owned())
            .spawn(move || {
                Connection {
                    stream: &stream,
                    limits,
                    stopped: &stopped2,
                }
                .serve(&*glue);
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
#[derive(Debug)]
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

struct Head {
    method: String,
    target: String,
    minor: u8,
    headers: Headers,
}

/// How one exchange ended, for the connection.
enum Ended {
    /// Answered; the connection may serve the next request unless `close`.
    Answered { close: bool },
    /// The peer went away, a write failed, or the listener stops: close the connection.
    Gone,
}

struct Connection<'a> {
    stream: &'a TcpStream,
    limits: HttpLimits,
    stopped: &'a AtomicBool,
}

impl Connection<'_> {
    fn serve<E>(&self, glue: &E)
    where
        E: Exchanges<mpsc::SyncSender<Out>>,
    {
        let _ = self.stream.set_nodelay(true);
        let _ = self.stream.set_read_timeout(Some(self.limits.idle_timeout));
        let _ = self
            .stream
            .set_write_timeout(Some(self.limits.write_timeout));
        let mut buf = Vec::new();
        while !self.stopped.load(Ordering::SeqCst) {
            let head = match self.read_head(&mut buf) {
                Ok(Some(h)) => h,
                Ok(None) | Err(ReadError::Closed) => return,
                Err(ReadError::Reject(status, why)) => return self.reject(status, why),
            };
            if head.minor == 1
                && head
                    .headers
                    .get("Expect")
                    .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
            {
                let mut s = self.stream;
                if s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
                    return;
                }
            }
            // A body announced over the bound is not read (the core answers `413`), so the
            // connection closes after the answer.
            let (body, cut) = match self.read_body(&mut buf, &head) {
                Ok(b) => b,
                Err(ReadError::Closed) => return,
                Err(ReadError::Reject(status, why)) => return self.reject(status, why),
            };
            let tokens: Vec<String> = head
                .headers
                .get_all("Connection")
                .flat_map(|v| v.split(','))
                .map(|v| v.trim().to_ascii_lowercase())
                .collect();
            let close = cut
                || if head.minor == 0 {
                    !tokens.iter().any(|v| v == "keep-alive")
                } else {
                    tokens.iter().any(|v| v == "close")
                };
            let mut writer = Writer {
                stream: self.stream,
                close,
                http10: head.minor == 0,
                head: head.method.eq_ignore_ascii_case("HEAD"),
                chunked: false,
            };
            let (tx, rx) = mpsc::sync_channel(EXCHANGE_BACKLOG);
            let id = glue.open(
                Incoming {
                    method: head.method,
                    target: head.target,
                    headers: head.headers,
                    body,
                },
                tx,
            );
            match self.answer(&rx, &mut writer, !buf.is_empty() || cut) {
                Ended::Answered { close } => {
                    if cut {
                        linger(self.stream);
                    }
                    if close {
                        return;
                    }
                }
                Ended::Gone => {
                    glue.closed(id);
                    return;
                }
            }
        }
    }

    /// Writes the exchange's pieces as they come, watching for the peer to go away meanwhile.
    /// `pipelined`: the peer already sent more bytes (a next request), so a readable socket
    /// says nothing about it having gone.
    fn answer(&self, rx: &mpsc::Receiver<Out>, w: &mut Writer<'_>, pipelined: bool) -> Ended {
        let mut streaming = false;
        loop {
            if self.stopped.load(Ordering::SeqCst) {
                return Ended::Gone;
            }
            let out = match rx.recv_timeout(PEER_CHECK) {
                Ok(out) => out,
                Err(RecvTimeoutError::Timeout) => {
                    if !pipelined && peer_gone(self.stream) {
                        return Ended::Gone;
                    }
                    continue;
                }
                // The glue dropped the exchange without ending it (it stopped): nothing more
                // will come.
                Err(RecvTimeoutError::Disconnected) => {
                    if streaming {
                        let _ = w.finish();
                        return Ended::Answered { close: true };
                    }
                    return Ended::Gone;
                }
            };
            let written = match out {
                Out::Response {
                    status,
                    headers,
                    body,
                } if !streaming => {
                    let r = w.send(status, &headers, &body);
                    return match r {
                        Ok(()) => Ended::Answered { close: w.close },
                        Err(_) => Ended::Gone,
                    };
                }
                Out::StreamStart { status, headers } if !streaming => {
                    streaming = true;
                    w.start_stream(status, &headers)
                }
                Out::Event(bytes) if streaming => w.write_chunk(&bytes),
                Out::End if streaming => {
                    return match w.finish() {
                        Ok(()) => Ended::Answered { close: w.close },
                        Err(_) => Ended::Gone,
                    };
                }
                // A piece out of order is the glue's bug; the connection cannot be framed any
                // more.
                _ => return Ended::Gone,
            };
            if written.is_err() {
                return Ended::Gone;
            }
        }
    }

    /// Reads one request head from `buf` (topping it up from the socket); `Ok(None)` when the
    /// peer closed between requests (or stayed idle past the idle timeout).
    fn read_head(&self, buf: &mut Vec<u8>) -> Result<Option<Head>, ReadError> {
        loop {
            if !buf.is_empty() {
                let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut req = httparse::Request::new(&mut slots);
                match req.parse(buf) {
                    Ok(httparse::Status::Complete(n)) if n > self.limits.max_head => {
                        return Err(ReadError::Reject(431, "request head too large"))
                    }
                    Ok(httparse::Status::Complete(n)) => {
                        let method = req.method.unwrap_or_default().to_owned();
                        let target = req.path.unwrap_or_default().to_owned();
                        let minor = req.version.unwrap_or(1);
                        let mut headers = Headers::new();
                        for h in req.headers.iter() {
                            let value = std::str::from_utf8(h.value).map_err(|_| {
                                ReadError::Reject(400, "a header value is not UTF-8")
                            })?;
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
                if buf.len() > self.limits.max_head {
                    return Err(ReadError::Reject(431, "request head too large"));
                }
            }
            let was_empty = buf.is_empty();
            match fill(self.stream, buf) {
                Ok(0) if was_empty => return Ok(None),
                Ok(0) => return Err(ReadError::Closed),
                Ok(_) => {}
                Err(e) if was_empty && is_timeout(&e) => return Ok(None),
                Err(e) if is_timeout(&e) => {
                    return Err(ReadError::Reject(408, "the request head took too long"))
                }
                Err(_) => return Err(ReadError::Closed),
            }
        }
    }

    /// Makes sure `buf` holds at least `n` bytes.
    fn need(&self, buf: &mut Vec<u8>, n: usize) -> Result<(), ReadError> {
        while buf.len() < n {
            if fill(self.stream, buf)? == 0 {
                return Err(ReadError::Closed);
            }
        }
        Ok(())
    }

    /// Reads one chunk-size line (hex size, extensions ignored) with `httparse`.
    fn chunk_size(&self, buf: &mut Vec<u8>) -> Result<usize, ReadError> {
        loop {
            match httparse::parse_chunk_size(buf) {
                Ok(httparse::Status::Complete((used, size))) => {
                    buf.drain(..used);
                    // A size beyond usize is beyond any body bound.
                    return Ok(usize::try_from(size).unwrap_or(usize::MAX));
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return Err(ReadError::Reject(400, "malformed chunk size")),
            }
            if buf.len() > MAX_CHUNK_LINE {
                return Err(ReadError::Reject(400, "chunk size line too long"));
            }
            if fill(self.stream, buf)? == 0 {
                return Err(ReadError::Closed);
            }
        }
    }

    /// Reads one CRLF-terminated line (bounded) from `buf`, without the CRLF.
    fn line(&self, buf: &mut Vec<u8>) -> Result<Vec<u8>, ReadError> {
        loop {
            if let Some(pos) = buf.windows(2).position(|w| w == b"\r\n") {
                let l = buf[..pos].to_vec();
                buf.drain(..pos + 2);
                return Ok(l);
            }
            if buf.len() > MAX_CHUNK_LINE {
                return Err(ReadError::Reject(400, "chunk line too long"));
            }
            if fill(self.stream, buf)? == 0 {
                return Err(ReadError::Closed);
            }
        }
    }

    /// Reads the body; one announced (by `Content-Length` or a chunk size) past
    /// [`HttpLimits::max_body`] is not read at all, and says so (`true`).
    fn read_body(&self, buf: &mut Vec<u8>, head: &Head) -> Result<(Vec<u8>, bool), ReadError> {
        let cut_at = self.limits.max_body.saturating_add(1);
        let te: Vec<&str> = head.headers.get_all("Transfer-Encoding").collect();
        if !te.is_empty() {
            // RFC 9112 6.1: chunked must be the final coding; a request with both framings is
            // refused rather than guessed at (request smuggling).
            if head.headers.contains("Content-Length") {
                return Err(ReadError::Reject(
                    400,
                    "both Transfer-Encoding and Content-Length",
                ));
            }
            let codings: Vec<String> = te
                .iter()
                .flat_map(|v| v.split(','))
                .map(|v| v.trim().to_ascii_lowercase())
                .filter(|v| !v.is_empty())
                .collect();
            if codings.as_slice() != ["chunked"] {
                return Err(ReadError::Reject(
                    501,
                    "only the chunked transfer coding is read",
                ));
            }
            let mut body = Vec::new();
            loop {
                let size = self.chunk_size(buf)?;
                if size == 0 {
                    // Trailers, up to the empty line (bounded like the head).
                    let mut trailers = 0usize;
                    loop {
                        let l = self.line(buf)?;
                        if l.is_empty() {
                            return Ok((body, false));
                        }
                        trailers += l.len() + 2;
                        if trailers > self.limits.max_head {
                            return Err(ReadError::Reject(431, "request trailers too large"));
                        }
                    }
                }
                if body.len().saturating_add(size) > self.limits.max_body {
                    // Over the bound by its announced size: nothing more is read (a client
                    // may wait for the answer before sending it).
                    buf.clear();
                    return Ok((over_the_bound(cut_at), true));
                }
                self.need(buf, size.saturating_add(2))?;
                body.extend_from_slice(&buf[..size]);
                if &buf[size..size + 2] != b"\r\n" {
                    return Err(ReadError::Reject(400, "malformed chunk"));
                }
                buf.drain(..size + 2);
            }
        }
        let mut lengths = head.headers.get_all("Content-Length");
        let Some(first) = lengths.next() else {
            return Ok((Vec::new(), false));
        };
        if lengths.any(|other| other != first) {
            return Err(ReadError::Reject(400, "conflicting Content-Length headers"));
        }
        if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ReadError::Reject(400, "malformed Content-Length"));
        }
        // A length too large for usize is over any bound.
        let len: usize = first.parse().unwrap_or(usize::MAX);
        if len > self.limits.max_body {
            buf.clear();
            return Ok((over_the_bound(cut_at), true));
        }
        self.need(buf, len)?;
        Ok((buf.drain(..len).collect(), false))
    }

    /// Answers a request that could not be read, then closes (after a lingering read, so a
    /// client still writing its body sees the answer instead of a reset).
    fn reject(&self, status: u16, why: &str) {
        let body = format!("{why}\n");
        let text = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            status_text(status),
            body.len()
        );
        let mut s = self.stream;
        if s.write_all(text.as_bytes()).is_err() {
            return;
        }
        linger(self.stream);
    }
}

/// What the core is handed for a body announced past its bound: one byte more than the bound
/// (the core answers `413` on the length alone; these bytes were never the client's).
fn over_the_bound(cut_at: usize) -> Vec<u8> {
    vec![0; cut_at]
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
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

/// Whether the peer closed its side (or the connection broke). Bytes the peer sent ahead are
/// left unread.
fn peer_gone(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let mut probe = [0u8; 1];
    let gone = match stream.peek(&mut probe) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        ),
    };
    let restored = stream.set_nonblocking(false).is_ok();
    gone || !restored
}

/// After an early answer (a `413` while the body is still coming): stop writing, then read and
/// drop what the client still sends, for a bounded time and amount, before closing (RFC 9112
/// section 9.6, "lingering close").
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
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Writes one response: whole, or as a stream (chunked; close-delimited for an HTTP/1.0 peer).
struct Writer<'a> {
    stream: &'a TcpStream,
    close: bool,
    http10: bool,
    head: bool,
    chunked: bool,
}

impl Writer<'_> {
    fn head_text(&self, status: u16, headers: &Headers) -> String {
        let mut text = format!("HTTP/1.1 {status} {}\r\n", status_text(status));
        // A response's own `Connection` tokens other than close/keep-alive are kept: they
        // nominate hop-by-hop headers (which a proxy in front must drop); the transport adds
        // its own.
        let mut connection: Vec<&str> = Vec::new();
        for (name, value) in headers.iter() {
            if name.eq_ignore_ascii_case("connection") {
                connection.extend(value.split(',').map(str::trim).filter(|t| {
                    !t.is_empty()
                        && !t.eq_ignore_ascii_case("close")
                        && !t.eq_ignore_ascii_case("keep-alive")
                }));
                continue;
            }
            if is_framing_header(name) {
                continue;
            }
            text.push_str(name);
            text.push_str(": ");
            text.push_str(value);
            text.push_str("\r\n");
        }
        if self.close {
            connection.push("close");
        } else if self.http10 {
            connection.push("keep-alive");
        }
        if !connection.is_empty() {
            text.push_str("Connection: ");
            text.push_str(&connection.join(", "));
            text.push_str("\r\n");
        }
        text
    }

    fn send(&mut self, status: u16, headers: &Headers, body: &[u8]) -> io::Result<()> {
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

    fn start_stream(&mut self, status: u16, headers: &Headers) -> io::Result<()> {
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

    fn write_chunk(&mut self, data: &[u8]) -> io::Result<()> {
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

    fn finish(&mut self) -> io::Result<()> {
        if self.chunked {
            let mut s = self.stream;
            s.write_all(b"0\r\n\r\n")?;
            s.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A glue that answers from a script: `/whole` with one response, `/stream` with three
    /// events, `/hang` never (recording when the peer went away).
    #[derive(Default)]
    struct Script {
        next: AtomicU64,
        seen: Mutex<Vec<(String, String, Vec<u8>)>>,
        closed: Mutex<Vec<u64>>,
        hanging: Mutex<Vec<mpsc::SyncSender<Out>>>,
    }

    impl Exchanges<mpsc::SyncSender<Out>> for Script {
        type Id = u64;
        fn open(&self, req: Incoming, sink: mpsc::SyncSender<Out>) -> u64 {
            let id = self.next.fetch_add(1, Ordering::SeqCst);
            lock(&self.seen).push((req.method.clone(), req.target.clone(), req.body.clone()));
            let mut h = Headers::new();
            h.append("Content-Type", "text/plain").unwrap();
            match req.target.as_str() {
                "/stream" => {
                    let mut sh = Headers::new();
                    sh.append("Content-Type", "text/event-stream").unwrap();
                    sink.push(Out::StreamStart {
                        status: 200,
                        headers: sh,
                    });
                    std::thread::spawn(move || {
                        for i in 0..3 {
                            std::thread::sleep(Duration::from_millis(5));
                            sink.push(Out::Event(format!("data: {i}\n\n").into_bytes()));
                        }
                        sink.push(Out::End);
                    });
                }
                "/hang" => lock(&self.hanging).push(sink),
                _ => {
                    sink.push(Out::Response {
                        status: 200,
                        headers: h,
                        body: req.body,
                    });
                }
            }
            id
        }
        fn closed(&self, id: u64) {
            lock(&self.closed).push(id);
        }
    }

    fn limits() -> HttpLimits {
        HttpLimits {
            max_head: 8 * 1024,
            max_body: 1024,
            max_connections: 16,
            idle_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
        }
    }

    fn start(script: &Arc<Script>) -> Listener {
        start_with(script, limits())
    }

    fn start_with(script: &Arc<Script>, limits: HttpLimits) -> Listener {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        Listener::start(l, script.clone(), limits).unwrap()
    }

    fn connect(l: &Listener) -> TcpStream {
        let s = TcpStream::connect(l.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    /// Reads until `want` is in what arrived, or the peer closes; bounded by the read timeout.
    fn read_until(s: &mut TcpStream, want: &str) -> String {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains(want) {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    fn read_to_end(s: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        String::from_utf8_lossy(&got).into_owned()
    }

    #[test]
    fn keep_alive_serves_two_requests_on_one_connection() {
        let script = Arc::new(Script::default());
        let mut l = start(&script);
        let mut s = connect(&l);
        s.write_all(b"POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            .unwrap();
        let first = read_until(&mut s, "hello");
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains("Content-Length: 5\r\n"), "{first}");
        s.write_all(
            b"POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbye",
        )
        .unwrap();
        let second = read_to_end(&mut s);
        assert!(second.contains("Connection: close\r\n"), "{second}");
        assert!(second.ends_with("bye"), "{second}");
        l.stop();
        assert_eq!(lock(&script.seen).len(), 2);
        assert!(lock(&script.closed).is_empty());
    }

    #[test]
    fn a_chunked_request_body_is_dechunked() {
        let script = Arc::new(Script::default());
        let mut l = start(&script);
        let mut s = connect(&l);
        s.write_all(
            b"POST /whole HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n",
        )
        .unwrap();
        let text = read_to_end(&mut s);
        assert!(text.ends_with("abcde"), "{text}");
        l.stop();
        assert_eq!(lock(&script.seen)[0].2, b"abcde");
    }

    #[test]
    fn a_body_announced_over_the_bound_reaches_the_glue_one_byte_past_it_unread_and_the_connection_closes(
    ) {
        let script = Arc::new(Script::default());
        let mut l = start(&script);
        let mut s = connect(&l);
        s.write_all(b"POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
            .unwrap();
        s.write_all(&[b'a'; 5000]).unwrap();
        let text = read_to_end(&mut s);
        assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
        assert!(text.contains("Connection: close\r\n"), "{text}");
        let mut s = connect(&l);
        s.write_all(
            b"POST /whole HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n300\r\n",
        )
        .unwrap();
        s.write_all(&[b'b'; 0x300]).unwrap();
        s.write_all(b"\r\n300\r\n").unwrap();
        s.write_all(&[b'c'; 0x300]).unwrap();
        let text = read_to_end(&mut s);
        assert!(text.contains("Connection: close\r\n"), "{text}");
        l.stop();
        let seen = lock(&script.seen);
        // Both reach the glue as one byte past the bound, the client's bytes unread (the
        // second once its second chunk size takes it past).
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].2.len(), 1025);
        assert!(!seen[0].2.contains(&b'a'));
        assert_eq!(seen[1].2.len(), 1025);
        assert!(!seen[1].2.contains(&b'c'));
    }

    #[test]
    fn malformed_or_oversized_heads_are_refused_and_never_reach_the_glue() {
        let script = Arc::new(Script::default());
        let mut l = start(&script);
        let mut s = connect(&l);
        let big = format!("GET /whole HTTP/1.1\r\nX-Big: {}\r\n\r\n", "b".repeat(9000));
        let _ = s.write_all(big.as_bytes());
        assert!(read_to_end(&mut s).starts_with("HTTP/1.1 431 "));
        let mut s = connect(&l);
        s.write_all(
            b"POST /whole HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .unwrap();
        assert!(read_to_end(&mut s).starts_with("HTTP/1.1 400 "));
        let mut s = connect(&l);
        s.write_all(b"POST /whole HTTP/1.1\r\nContent-Length: -1\r\n\r\n")
            .unwrap();
        let text = read_to_end(&mut s);
        assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
        let mut s = connect(&l);
        s.write_all(b"POST /whole HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
            .unwrap();
        assert!(read_to_end(&mut s).starts_with("HTTP/1.1 501 "));
        let mut s = connect(&l);
        s.write_all(b"NOT HTTP\r\n\r\n").unwrap();
        assert!(read_to_end(&mut s).starts_with("HTTP/1.1 400 "));
        l.stop();
        assert!(lock(&script.seen).is_empty());
    }

    #[test]
    fn a_stream_is_written_chunked_as_its_events_come() {
        let script = Arc::new(Script::default());
        let mut l = start(&script);
        let mut s = connect(&l);
        s.write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let text = read_to_end(&mut s);
        assert!(text.contains("Transfer-Encoding: chunked\r\n"), "{text}");
        assert!(
            text.contains("Content-Type: text/event-stream\r\n"),
            "{text}"
        );
        for i in 0..3 {
            assert!(text.contains(&format!("9\r\ndata: {i}\n\n\r\n")), "{text}");
        }
        assert!(text.ends_with("0\r\n\r\n"), "{text}");
        l.stop();
    }

    #[test]
    fn a_peer_that_goes_away_while_waiting_is_reported_closed() {
        let script = Arc::new(Script::default());
        let mut l = start(&script);
        let mut s = connect(&l);
        s.write_all(b"POST /hang HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&script.seen).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(s);
        while lock(&script.closed).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*lock(&script.closed), [0]);
        l.stop();
    }

    #[test]
    fn connections_past_the_bound_get_503_and_stop_joins_every_thread() {
        let script = Arc::new(Script::default());
        let mut l = start_with(
            &script,
            HttpLimits {
                max_connections: 4,
                ..limits()
            },
        );
        let held: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut s = connect(&l);
                s.write_all(b"POST /hang HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                    .unwrap();
                s
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&script.seen).len() < 4 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut extra = connect(&l);
        assert!(read_to_end(&mut extra).starts_with("HTTP/1.1 503 "));
        let started = Instant::now();
        l.stop();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(lock(&l.conns.threads).is_empty());
        drop(held);
    }

    #[test]
    fn http10_streams_are_close_delimited_and_head_has_no_body() {
        let script = Arc::new(Script::default());
        let mut l = start(&script);
        let mut s = connect(&l);
        s.write_all(b"GET /stream HTTP/1.0\r\n\r\n").unwrap();
        let text = read_to_end(&mut s);
        assert!(!text.contains("Transfer-Encoding"), "{text}");
        assert!(text.ends_with("data: 2\n\n"), "{text}");
        let mut s = connect(&l);
        s.write_all(b"HEAD /whole HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let text = read_to_end(&mut s);
        assert!(text.contains("Content-Length: 0\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
        l.stop();
    }

    /// The request's bytes for `body`: sized, or chunked in pieces of the given sizes.
    fn request_bytes(body: &[u8], chunked: bool, pieces: &[usize]) -> Vec<u8> {
        let mut out = b"POST /whole HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_vec();
        if !chunked {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
            return out;
        }
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        let mut rest = body;
        let mut i = 0;
        while !rest.is_empty() {
            let n = pieces[i % pieces.len()].min(rest.len());
            out.extend_from_slice(format!("{n:x};x=y\r\n").as_bytes());
            out.extend_from_slice(&rest[..n]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[n..];
            i += 1;
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]

        /// However a body is framed and however its bytes are split on the wire, the glue
        /// gets it whole, or (longer than the bound) one byte past the bound, unread.
        #[test]
        fn bodies_arrive_whole_however_framed_and_split(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1500),
            chunked in proptest::prelude::any::<bool>(),
            pieces in proptest::collection::vec(1usize..400, 1..8),
            splits in proptest::collection::vec(1usize..300, 1..12),
        ) {
            let script = Arc::new(Script::default());
            let mut l = start(&script);
            let mut s = connect(&l);
            let _ = s.set_nodelay(true);
            let bytes = request_bytes(&body, chunked, &pieces);
            let mut rest = &bytes[..];
            let mut i = 0;
            while !rest.is_empty() {
                let n = splits[i % splits.len()].min(rest.len());
                if s.write_all(&rest[..n]).is_err() {
                    break; // the server answered early (a body over the bound) and closed
                }
                rest = &rest[n..];
                i += 1;
            }
            let text = read_to_end(&mut s);
            l.stop();
            proptest::prop_assert!(text.starts_with("HTTP/1.1 200 "), "{}", text);
            let seen = lock(&script.seen);
            proptest::prop_assert_eq!(seen.len(), 1);
            if body.len() > 1024 {
                // Over the bound: one byte past it, never read from the client.
                proptest::prop_assert_eq!(seen[0].2.len(), 1025);
            } else {
                proptest::prop_assert_eq!(&seen[0].2[..], &body[..]);
            }
        }

        /// Garbage gets an answer or a close, never a panic, and the listener goes on serving.
        #[test]
        fn garbage_never_stops_the_listener(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            prefix in proptest::prelude::any::<bool>(),
        ) {
            let script = Arc::new(Script::default());
            let mut l = start(&script);
            let mut s = connect(&l);
            s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            let mut bytes = if prefix {
                b"POST /whole HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec()
            } else {
                Vec::new()
            };
            bytes.extend_from_slice(&junk);
            let _ = s.write_all(&bytes);
            let text = read_to_end(&mut s);
            proptest::prop_assert!(text.is_empty() || text.starts_with("HTTP/1.1 "), "{}", text);
            let mut ok = connect(&l);
            ok.write_all(b"POST /whole HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .unwrap();
            let answer = read_to_end(&mut ok);
            l.stop();
            proptest::prop_assert!(answer.ends_with("ok"), "{}", answer);
        }
    }
}
