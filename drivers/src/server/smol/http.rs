//! The smol driver's HTTP/1.1 listener: hyper 1's server connection over smol's sockets, one
//! task per connection (at most [`HttpLimits::max_connections`] at once). A request's body is
//! read up to the bound (`413` past it), handed to the glue with a channel, and the answer is
//! what comes out of the channel: a whole response, or a streamed body of SSE events. hyper
//! drops an exchange's future or body when its connection closes; a guard then reports the
//! exchange closed to the glue (which cancels what it carried).
//!
//! [`Listener::stop`] stops accepting and ends every connection task.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use hyper::body::{Body, Bytes, Frame, Incoming as HyperIncoming};
use hyper::service::service_fn;
use mcpwire_core::http::Headers;
use smol::channel::{Receiver, Sender};
use smol::net::{TcpListener, TcpStream};
use smol::stream::Stream;
use smol::Task;
use smol_hyper::rt::{FuturesIo, SmolTimer};

use crate::server::transport::{
    is_framing_header, Exchanges, HttpLimits, Incoming, Out, Sink, EXCHANGE_BACKLOG,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sink for Sender<Out> {
    fn push(&self, out: Out) -> bool {
        self.try_send(out).is_ok()
    }
}

/// A running listener.
pub(crate) struct Listener {
    addr: SocketAddr,
    accept: Option<Task<()>>,
    conns: Arc<Connections>,
}

#[derive(Default)]
struct Connections {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Task<()>>>,
}

impl Listener {
    /// Serves `listener` (already bound) until [`Listener::stop`].
    pub(crate) fn start<E>(
        listener: TcpListener,
        glue: Arc<E>,
        limits: HttpLimits,
    ) -> io::Result<Listener>
    where
        E: Exchanges<Sender<Out>>,
    {
        let addr = listener.local_addr()?;
        let conns = Arc::new(Connections::default());
        let accept = smol::spawn(accept_loop(listener, glue, limits, conns.clone()));
        Ok(Listener {
            addr,
            accept: Some(accept),
            conns,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and ends every connection (their exchanges are reported closed).
    /// Harmless twice.
    pub(crate) async fn stop(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.cancel().await;
        }
        let open: Vec<Task<()>> = lock(&self.conns.open).drain().map(|(_, t)| t).collect();
        for t in open {
            t.cancel().await;
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Dropping a task cancels it; the connection tasks go with the accept loop.
        self.accept.take();
        lock(&self.conns.open).clear();
    }
}

async fn accept_loop<E>(
    listener: TcpListener,
    glue: Arc<E>,
    limits: HttpLimits,
    conns: Arc<Connections>,
) where
    E: Exchanges<Sender<Out>>,
{
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(_) => {
                // A failed accept (the peer reset first, or no file descriptors left): pause a
                // little instead of spinning.
                smol::Timer::after(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        if lock(&conns.open).len() >= limits.max_connections {
            smol::spawn(refuse_busy(stream)).detach();
            continue;
        }
        let id = conns.next.fetch_add(1, Ordering::Relaxed);
        let glue = glue.clone();
        let conns2 = conns.clone();
        // The task is registered before it can finish (the lock is held across the spawn), so
        // its own removal below always finds it.
        let mut open = lock(&conns.open);
        let task = smol::spawn(async move {
            serve_connection(stream, glue, limits).await;
            // Removing its own entry drops the task's handle, which does not cancel a task
            // that is finishing; detach it first so the removal is only bookkeeping.
            if let Some(me) = lock(&conns2.open).remove(&id) {
                me.detach();
            }
        });
        open.insert(id, task);
    }
}

async fn refuse_busy(mut stream: TcpStream) {
    use smol::io::AsyncWriteExt;
    let write = stream.write_all(
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    let _ = smol::future::or(async { write.await.is_ok() }, async {
        smol::Timer::after(std::time::Duration::from_secs(1)).await;
        false
    })
    .await;
}

async fn serve_connection<E>(stream: TcpStream, glue: Arc<E>, limits: HttpLimits)
where
    E: Exchanges<Sender<Out>>,
{
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| {
        let glue = glue.clone();
        async move { Ok::<_, Infallible>(exchange(req, glue, limits).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(SmolTimer::new())
        .header_read_timeout(limits.idle_timeout)
        .max_buf_size(limits.max_head.max(8192));
    let conn = builder.serve_connection(FuturesIo::new(stream), service);
    let _ = conn.await;
}

fn plain(status: u16, why: &str) -> hyper::Response<OutBody> {
    let mut res = hyper::Response::new(OutBody::Whole(Some(Bytes::from(format!("{why}\n")))));
    *res.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_REQUEST);
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    res
}

async fn exchange<E>(
    req: hyper::Request<HyperIncoming>,
    glue: Arc<E>,
    limits: HttpLimits,
) -> hyper::Response<OutBody>
where
    E: Exchanges<Sender<Out>>,
{
    let (parts, body) = req.into_parts();
    let mut headers = Headers::new();
    for (name, value) in &parts.headers {
        let Ok(value) = value.to_str() else {
            return plain(400, "a header value is not visible ASCII");
        };
        if headers.append(name.as_str(), value.trim()).is_err() {
            return plain(400, "a header is malformed");
        }
    }
    let (body, cut) = match read_body(body, limits.max_body).await {
        Ok(b) => b,
        Err(()) => return plain(400, "the request body could not be read"),
    };
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let (tx, rx) = smol::channel::bounded(EXCHANGE_BACKLOG);
    let id = glue.open(
        Incoming {
            method: parts.method.as_str().to_owned(),
            target,
            headers,
            body,
        },
        tx,
    );
    let mut guard = Guard {
        glue,
        id,
        done: false,
    };
    // If the connection closes while this waits, hyper drops this future, and the guard with
    // it reports the exchange closed.
    match rx.recv().await {
        Ok(Out::Response {
            status,
            headers,
            body,
        }) => {
            guard.done = true;
            let mut res = response(status, &headers, OutBody::Whole(Some(Bytes::from(body))));
            if cut {
                // The rest of the body is never read: the connection closes after this.
                res.headers_mut().insert(
                    hyper::header::CONNECTION,
                    hyper::header::HeaderValue::from_static("close"),
                );
            }
            res
        }
        Ok(Out::StreamStart { status, headers }) => response(
            status,
            &headers,
            OutBody::Stream {
                rx: Box::pin(rx),
                guard: Box::new(guard),
            },
        ),
        // The glue stopped (or broke framing): nothing more will come.
        Ok(_) | Err(_) => {
            guard.done = true;
            plain(503, "the server is stopping")
        }
    }
}

/// Reads a request body; past `max` it stops one byte beyond the bound (the core answers
/// `413`) and says so (`true`).
async fn read_body(mut body: HyperIncoming, max: usize) -> Result<(Vec<u8>, bool), ()> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ())?;
        if let Ok(data) = frame.into_data() {
            if out.len().saturating_add(data.len()) > max {
                let take = max + 1 - out.len();
                out.extend_from_slice(&data[..take]);
                return Ok((out, true));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok((out, false))
}

fn response(status: u16, headers: &Headers, body: OutBody) -> hyper::Response<OutBody> {
    let mut res = hyper::Response::new(body);
    *res.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let map = res.headers_mut();
    for (name, value) in headers.iter() {
        if is_framing_header(name) {
            continue;
        }
        // The core's headers are validated when built; one hyper refuses is left out.
        if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(value),
        ) {
            map.append(n, v);
        }
    }
    res
}

/// Reports an exchange closed unless it ended.
trait Closer: Send {
    fn disarm(&mut self);
}

struct Guard<E: Exchanges<Sender<Out>>> {
    glue: Arc<E>,
    id: E::Id,
    done: bool,
}

impl<E: Exchanges<Sender<Out>>> Closer for Guard<E> {
    fn disarm(&mut self) {
        self.done = true;
    }
}

impl<E: Exchanges<Sender<Out>>> Drop for Guard<E> {
    fn drop(&mut self) {
        if !self.done {
            self.glue.closed(self.id);
        }
    }
}

/// A response body: whole, or the exchange's events as they come.
enum OutBody {
    Whole(Option<Bytes>),
    Stream {
        // The receiver is not `Unpin` (it keeps a listener while it waits).
        rx: Pin<Box<Receiver<Out>>>,
        guard: Box<dyn Closer>,
    },
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            OutBody::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            OutBody::Stream { rx, guard } => loop {
                match rx.as_mut().poll_next(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(Out::Event(bytes))) => {
                        if bytes.is_empty() {
                            continue;
                        }
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(bytes)))));
                    }
                    Poll::Ready(Some(Out::End)) => {
                        guard.disarm();
                        rx.close();
                        return Poll::Ready(None);
                    }
                    // A second head is the glue's bug; the channel closed means it stopped.
                    Poll::Ready(Some(_)) | Poll::Ready(None) => {
                        guard.disarm();
                        rx.close();
                        return Poll::Ready(None);
                    }
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, OutBody::Whole(None))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            OutBody::Whole(Some(b)) => hyper::body::SizeHint::with_exact(b.len() as u64),
            OutBody::Whole(None) => hyper::body::SizeHint::with_exact(0),
            OutBody::Stream { .. } => hyper::body::SizeHint::default(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    /// The same script as the blocking listener's tests.
    #[derive(Default)]
    struct Script {
        next: AtomicU64,
        seen: Mutex<Vec<(String, String, Vec<u8>)>>,
        closed: Mutex<Vec<u64>>,
        hanging: Mutex<Vec<Sender<Out>>>,
    }

    impl Exchanges<Sender<Out>> for Script {
        type Id = u64;
        fn open(&self, req: Incoming, sink: Sender<Out>) -> u64 {
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
                "/hang" | "/hang-stream" => {
                    if req.target == "/hang-stream" {
                        sink.push(Out::StreamStart {
                            status: 200,
                            headers: Headers::new(),
                        });
                    }
                    lock(&self.hanging).push(sink);
                }
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

    fn limits(max_connections: usize) -> HttpLimits {
        HttpLimits {
            max_head: 8 * 1024,
            max_body: 1024,
            max_connections,
            idle_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
        }
    }

    fn start(script: &Arc<Script>, max_connections: usize) -> Listener {
        smol::block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            Listener::start(l, script.clone(), limits(max_connections)).unwrap()
        })
    }

    // The tests talk to the listener with plain blocking sockets from the test thread, while
    // smol's global executor runs the listener's tasks on its own threads.
    fn connect(l: &Listener) -> std::net::TcpStream {
        let s = std::net::TcpStream::connect(l.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    fn read_until(s: &mut std::net::TcpStream, want: &str) -> String {
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

    fn read_to_end(s: &mut std::net::TcpStream) -> String {
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        String::from_utf8_lossy(&got).into_owned()
    }

    fn wait_for(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !what() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn keep_alive_and_chunked_request_bodies() {
        let script = Arc::new(Script::default());
        let mut l = start(&script, 16);
        let mut s = connect(&l);
        s.write_all(b"POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            .unwrap();
        let first = read_until(&mut s, "hello");
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains("content-length: 5\r\n"), "{first}");
        s.write_all(
            b"POST /whole HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        let second = read_to_end(&mut s);
        assert!(second.ends_with("abcde"), "{second}");
        smol::block_on(l.stop());
        assert_eq!(lock(&script.seen).len(), 2);
        assert!(lock(&script.closed).is_empty());
    }

    #[test]
    fn a_body_over_the_bound_reaches_the_glue_cut_one_byte_past_it_and_the_connection_closes() {
        let script = Arc::new(Script::default());
        let mut l = start(&script, 16);
        let mut s = connect(&l);
        s.write_all(b"POST /whole HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
            .unwrap();
        s.write_all(&[b'a'; 5000]).unwrap();
        let text = read_to_end(&mut s);
        assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
        assert!(text.contains("connection: close\r\n"), "{text}");
        smol::block_on(l.stop());
        assert_eq!(lock(&script.seen)[0].2, vec![b'a'; 1025]);
    }

    #[test]
    fn a_stream_is_written_as_its_events_come() {
        let script = Arc::new(Script::default());
        let mut l = start(&script, 16);
        let mut s = connect(&l);
        s.write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let text = read_to_end(&mut s);
        assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
        for i in 0..3 {
            assert!(text.contains(&format!("9\r\ndata: {i}\n\n\r\n")), "{text}");
        }
        assert!(text.ends_with("0\r\n\r\n"), "{text}");
        smol::block_on(l.stop());
        assert!(lock(&script.closed).is_empty());
    }

    #[test]
    fn a_peer_that_goes_away_is_reported_closed_waiting_or_streaming() {
        let script = Arc::new(Script::default());
        let mut l = start(&script, 16);
        let mut s = connect(&l);
        s.write_all(b"POST /hang HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        wait_for(|| lock(&script.seen).len() == 1);
        drop(s);
        wait_for(|| lock(&script.closed).len() == 1);
        assert_eq!(*lock(&script.closed), [0]);
        let mut s = connect(&l);
        s.write_all(b"GET /hang-stream HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        read_until(&mut s, "\r\n\r\n");
        drop(s);
        // A body hyper is not writing to is only dropped when the next write fails or the
        // connection's read side sees the close.
        wait_for(|| lock(&script.closed).len() == 2);
        assert_eq!(*lock(&script.closed), [0, 1]);
        smol::block_on(l.stop());
    }

    #[test]
    fn connections_past_the_bound_get_503_and_stop_ends_them() {
        let script = Arc::new(Script::default());
        let mut l = start(&script, 2);
        let held: Vec<_> = (0..2)
            .map(|_| {
                let mut s = connect(&l);
                s.write_all(b"POST /hang HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                    .unwrap();
                s
            })
            .collect();
        wait_for(|| lock(&script.seen).len() == 2);
        let mut extra = connect(&l);
        assert!(read_to_end(&mut extra).starts_with("HTTP/1.1 503 "));
        smol::block_on(l.stop());
        assert!(lock(&l.conns.open).is_empty());
        // Stopping ended both waiting exchanges.
        wait_for(|| lock(&script.closed).len() == 2);
        assert_eq!(lock(&script.closed).len(), 2);
        drop(held);
    }
}
