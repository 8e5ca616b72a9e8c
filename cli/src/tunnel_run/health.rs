//! `/healthz`, `/readyz` and `/metrics` on a small HTTP listener, served from the [`Status`]
//! snapshot the tunnel driver publishes after every step, and the admin UI at `/`
//! ([`AdminUi`]).
//!
//! The listener runs on smol (already in the binary for the smol driver) on a thread of its
//! own: an idle or trickling connection costs a small task, not a thread, so slow peers cannot
//! starve the probes. Each request must arrive whole within [`REQUEST_TIME`]; connections are
//! bounded ([`MAX_CONNECTIONS`], past which the oldest still-unread one is dropped to make
//! room) and so are the admin UI's live views ([`MAX_STREAMS`]).

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mcpwire::tunnel::Status;
use smol::future::FutureExt as _;
use smol::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use smol::{Async, Executor, Task, Timer};

use super::admin_ui::http::{BadRequest, Request, Response, REQUEST_TIME};
use super::admin_ui::{AdminUi, Answer, Stream, KEEP_ALIVE};

/// Connections open at once. Past it, the oldest connection whose request has not arrived yet
/// is closed to make room.
pub const MAX_CONNECTIONS: usize = 256;
/// Event streams (the admin UI's live views) open at once.
pub const MAX_STREAMS: usize = 16;
/// How long one write may take (a reader that stopped reading is let go).
const WRITE_TIME: Duration = Duration::from_secs(5);
/// How often an open event stream looks for new items.
const STREAM_TICK: Duration = Duration::from_millis(100);

/// What the listener serves: the tunnel's status, and its admin UI unless turned off.
#[derive(Clone)]
pub struct Served {
    /// The snapshot behind `/healthz`, `/readyz` and `/metrics`.
    pub status: Arc<Status>,
    /// The operator's page at `/` (`None`: `--admin-ui.disable`).
    pub admin: Option<Arc<AdminUi>>,
    /// Event streams open, against [`MAX_STREAMS`].
    streams: Arc<AtomicUsize>,
}

impl Served {
    /// What to serve.
    pub fn new(status: Arc<Status>, admin: Option<Arc<AdminUi>>) -> Self {
        Served {
            status,
            admin,
            streams: Arc::default(),
        }
    }
}

/// Gives an event stream's slot back when it ends.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(counter: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        let mut n = counter.load(Ordering::Relaxed);
        loop {
            if n >= max {
                return None;
            }
            match counter.compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(Slot(Arc::clone(counter))),
                Err(now) => n = now,
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The connections whose request is still arriving, oldest first: the ones dropped when the
/// listener is full.
#[derive(Default)]
struct Unread {
    next: AtomicU64,
    tasks: Mutex<BTreeMap<u64, Task<()>>>,
    /// Connections open (unread or being answered).
    open: AtomicUsize,
}

/// Whether a peer's address is this host's (loopback, IPv4-mapped loopback included).
pub fn is_local_ip(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(ip) => ip.is_loopback(),
        std::net::IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Runs the listener on a background thread: `accept` gives the next connection and whether
/// its peer is on this host.
fn serve_all<C, A>(accept: A, served: Served)
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A: Fn() -> smol::future::Boxed<std::io::Result<(C, bool)>> + Send + 'static,
{
    let _ = std::thread::Builder::new()
        .name("health".into())
        .spawn(move || {
            let ex: Arc<Executor<'static>> = Arc::new(Executor::new());
            let unread: Arc<Unread> = Arc::default();
            let run = Arc::clone(&ex);
            smol::block_on(run.run(async move {
                loop {
                    let Ok((conn, local)) = accept().await else {
                        // Out of descriptors, say: let the moment pass.
                        Timer::after(Duration::from_millis(50)).await;
                        continue;
                    };
                    if unread.open.load(Ordering::Acquire) >= MAX_CONNECTIONS {
                        // Make room: the oldest connection still sending its request goes.
                        let oldest = {
                            let mut tasks =
                                unread.tasks.lock().unwrap_or_else(PoisonError::into_inner);
                            tasks.pop_first()
                        };
                        match oldest {
                            Some((_, task)) => drop(task),
                            None => continue,
                        }
                    }
                    let id = unread.next.fetch_add(1, Ordering::Relaxed);
                    let served = served.clone();
                    let mine = Arc::clone(&unread);
                    unread.open.fetch_add(1, Ordering::AcqRel);
                    let task = ex.spawn(async move {
                        let _open = Open(Arc::clone(&mine));
                        let mut conn = conn;
                        let req = read_request(&mut conn).await;
                        // The request is in: the connection is no longer dropped for room
                        // (its own handle is detached, so removing it does not cancel it).
                        let own = mine
                            .tasks
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(&id);
                        if let Some(own) = own {
                            own.detach();
                        }
                        answer(conn, req, local, &served).await;
                    });
                    // One executor thread: the task cannot run before this insert (no await
                    // in between), so it always finds its handle.
                    unread
                        .tasks
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(id, task);
                }
            }));
        });
}

/// Counts a connection open until it is dropped.
struct Open(Arc<Unread>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves the endpoints on `listener` from a background thread.
pub fn serve(listener: TcpListener, served: Served) -> std::io::Result<()> {
    let listener = Arc::new(Async::new(listener)?);
    serve_all(
        move || {
            let l = Arc::clone(&listener);
            async move {
                let (conn, peer) = l.accept().await?;
                Ok((conn, is_local_ip(peer.ip())))
            }
            .boxed()
        },
        served,
    );
    Ok(())
}

/// Serves the endpoints on a Unix socket's `listener` from a background thread (every peer of
/// a Unix socket is on this host).
#[cfg(unix)]
pub fn serve_unix(
    listener: std::os::unix::net::UnixListener,
    served: Served,
) -> std::io::Result<()> {
    let listener = Arc::new(Async::new(listener)?);
    serve_all(
        move || {
            let l = Arc::clone(&listener);
            async move {
                let (conn, _) = l.accept().await?;
                Ok((conn, true))
            }
            .boxed()
        },
        served,
    );
    Ok(())
}

/// Reads one request, whole, within [`REQUEST_TIME`].
async fn read_request<C: AsyncRead + Unpin>(conn: &mut C) -> Result<Request, BadRequest> {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 2048];
        loop {
            if let Some(req) = Request::parse(&buf)? {
                return Ok(req);
            }
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return Err(BadRequest::Incomplete),
                Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            }
        }
    };
    read.or(async {
        Timer::after(REQUEST_TIME).await;
        Err(BadRequest::TooSlow)
    })
    .await
}

/// Writes `bytes` within [`WRITE_TIME`]; `false` when that failed.
async fn write_all<C: AsyncWrite + Unpin>(conn: &mut C, bytes: &[u8]) -> bool {
    let write = async { conn.write_all(bytes).await.is_ok() && conn.flush().await.is_ok() };
    write
        .or(async {
            Timer::after(WRITE_TIME).await;
            false
        })
        .await
}

/// Makes `path` ready for a Unix socket listener, as the Go client does: its directory is
/// created; a stale socket (nothing accepts on it) is removed; a file that is not a socket, or
/// a socket something still accepts on, is an error.
#[cfg(unix)]
pub fn prepare_unix_socket(path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create its directory: {e}"))?;
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot inspect it: {e}")),
    };
    if !meta.file_type().is_socket() {
        return Err("it exists and is not a unix socket".to_owned());
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err("it is already accepting connections (another client runs?)".to_owned()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
            ) =>
        {
            std::fs::remove_file(path).map_err(|e| format!("cannot remove the stale socket: {e}"))
        }
        Err(e) => Err(format!("cannot probe it: {e}")),
    }
}

/// The health URL of a Unix socket listener: `http+unix://` and the path in unpadded base64url
/// (the Go client's form, which its `health` probe and ours read).
#[must_use]
pub fn unix_url(path: &str) -> String {
    use base64::Engine as _;
    format!(
        "http+unix://{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(path.as_bytes())
    )
}

/// Answers `req` on `conn`: the health endpoints, else the admin UI's paths.
async fn answer<C>(mut conn: C, req: Result<Request, BadRequest>, local: bool, served: &Served)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let req = match req {
        Ok(r) => r,
        Err(BadRequest::Incomplete) => return,
        Err(e) => {
            let (code, text) = match e {
                BadRequest::TooSlow => (408, "request too slow\n"),
                BadRequest::TooLarge => (413, "request too large\n"),
                _ => (400, "bad request\n"),
            };
            let _ = write_all(&mut conn, &Response::text(code, text).bytes(false)).await;
            return;
        }
    };
    let head_only = req.method == "HEAD";
    let health = |code: u16, ctype: &str, body: String| {
        let mut r = Response::text(code, &body);
        // The probes' answers keep their plain form (no page policy needed).
        r.headers = vec![("Content-Type", ctype.to_owned())];
        r
    };
    let response = match (req.method.as_str(), req.path.as_str()) {
        ("GET" | "HEAD", "/healthz") => health(200, "text/plain", "ok\n".to_owned()),
        ("GET" | "HEAD", "/readyz") => match served.status.get().not_ready {
            None => health(200, "text/plain", "ready\n".to_owned()),
            Some(why) => health(503, "text/plain", format!("not ready: {why}\n")),
        },
        ("GET" | "HEAD", "/metrics") => health(
            200,
            "text/plain; version=0.0.4",
            served.status.get().prometheus(),
        ),
        (_, "/healthz" | "/readyz" | "/metrics") => {
            health(405, "text/plain", "method not allowed\n".to_owned())
        }
        (_, path) => match &served.admin {
            Some(admin) if AdminUi::owns(path) => match admin.handle(&req, local) {
                Answer::Full(r) => r,
                Answer::Events(stream, after) => {
                    match Slot::take(&served.streams, MAX_STREAMS) {
                        Some(_slot) => events(conn, admin, stream, after).await,
                        None => {
                            let busy = Response::text(503, "busy: too many live views open\n");
                            let _ = write_all(&mut conn, &busy.bytes(false)).await;
                        }
                    }
                    return;
                }
            },
            _ if matches!(req.method.as_str(), "GET" | "HEAD") => {
                health(404, "text/plain", "not found\n".to_owned())
            }
            _ => health(405, "text/plain", "method not allowed\n".to_owned()),
        },
    };
    let _ = write_all(&mut conn, &response.bytes(head_only)).await;
}

/// An event stream: new items as they come (looked for every [`STREAM_TICK`]), a keep-alive
/// comment after [`KEEP_ALIVE`] of silence; until the page goes away (its side closes, or a
/// write fails).
async fn events<C>(conn: C, admin: &AdminUi, stream: Stream, mut cursor: u64)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let (mut reader, mut writer) = smol::io::split(conn);
    let closed = async {
        let mut byte = [0u8; 64];
        while matches!(reader.read(&mut byte).await, Ok(n) if n > 0) {}
    };
    let pump = async {
        if !write_all(&mut writer, AdminUi::STREAM_HEAD.as_bytes()).await {
            return;
        }
        let mut quiet_since = Instant::now();
        loop {
            let text = match admin.next_events(stream, &mut cursor) {
                Some(text) => text,
                None if quiet_since.elapsed() >= KEEP_ALIVE => ": keep-alive\n\n".to_owned(),
                None => {
                    Timer::after(STREAM_TICK).await;
                    continue;
                }
            };
            if !write_all(&mut writer, text.as_bytes()).await {
                return;
            }
            quiet_since = Instant::now();
        }
    };
    closed.or(pump).await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mcpwire::tunnel::log::{Level, Logger};
    use std::io::{Read, Write};

    fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = conn.read_to_string(&mut out);
        out
    }

    fn start(admin: bool) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let status = Status::new();
        let admin = admin.then(|| {
            let log = Logger::new(Level::Info, false, Vec::new(), Box::new(std::io::sink()))
                .keeping_recent(10);
            AdminUi::new(
                false,
                Vec::new(),
                Arc::clone(&status),
                Arc::new(log),
                super::super::admin_ui::overview::Fixed::default(),
            )
        });
        serve(listener, Served::new(status, admin)).unwrap();
        addr
    }

    #[test]
    fn without_the_admin_ui_only_the_probes_answer() {
        let addr = start(false);
        let root = exchange(addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert!(root.starts_with("HTTP/1.1 404 "), "{root}");
        let ui = exchange(
            addr,
            "GET /admin/api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        );
        assert!(ui.starts_with("HTTP/1.1 404 "), "{ui}");
        let health = exchange(addr, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert!(
            health.starts_with("HTTP/1.1 200 ") && health.ends_with("ok\n"),
            "{health}"
        );
        let post = exchange(addr, "POST /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        let junk = exchange(addr, "\u{1}\u{2} nonsense\r\n\r\n");
        assert!(junk.starts_with("HTTP/1.1 400 "), "{junk}");
    }

    #[test]
    fn an_open_live_view_does_not_hold_up_the_probes() {
        let addr = start(true);
        let page = exchange(addr, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert!(
            page.starts_with("HTTP/1.1 200 ") && page.contains("mcpwire-admin-token"),
            "{page}"
        );
        // An event stream stays open...
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .write_all(b"GET /admin/events/logs HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut head = [0u8; 64];
        let n = stream.read(&mut head).unwrap();
        assert!(
            head[..n].starts_with(b"HTTP/1.1 200 OK"),
            "{:?}",
            &head[..n]
        );
        // ...while a probe is answered.
        let ready = exchange(addr, "GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert!(ready.starts_with("HTTP/1.1 503 "), "{ready}");
        let big = format!(
            "POST /admin/api/log-level HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
            super::super::admin_ui::http::MAX_BODY + 1
        );
        let refused = exchange(addr, &big);
        assert!(refused.starts_with("HTTP/1.1 413 "), "{refused}");
    }

    #[test]
    fn loopback_peers_are_recognised_in_every_form() {
        for (ip, local) in [
            ("127.0.0.1", true),
            ("127.8.9.10", true),
            ("::1", true),
            ("::ffff:127.0.0.1", true),
            ("10.0.0.1", false),
            ("192.168.1.2", false),
            ("::ffff:10.0.0.1", false),
            ("fd00::1", false),
        ] {
            assert_eq!(is_local_ip(ip.parse().unwrap()), local, "{ip}");
        }
    }

    /// Peers that connect and never finish a request cannot starve the probes: past the
    /// bound, the oldest unread connection is closed to make room.
    #[test]
    fn idle_connections_do_not_starve_the_probes() {
        let addr = start(false);
        let idle: Vec<std::net::TcpStream> = (0..MAX_CONNECTIONS + 20)
            .map(|_| {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
                c
            })
            .collect();
        for _ in 0..5 {
            let health = exchange(addr, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            assert!(health.starts_with("HTTP/1.1 200 "), "{health}");
        }
        drop(idle);
    }

    /// A live view that the page closed gives its slot back at once (not at its next write).
    #[test]
    fn a_closed_live_view_frees_its_slot() {
        let addr = start(true);
        let open_stream = || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /admin/events/commands HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut head = [0u8; 12];
            s.read_exact(&mut head).unwrap();
            (s, String::from_utf8_lossy(&head).into_owned())
        };
        let streams: Vec<_> = (0..MAX_STREAMS).map(|_| open_stream()).collect();
        assert!(
            streams.iter().all(|(_, h)| h == "HTTP/1.1 200"),
            "every slot served"
        );
        assert_eq!(open_stream().1, "HTTP/1.1 503", "past the bound");
        drop(streams);
        // Freed as the closes are seen (well before a keep-alive write would notice).
        let started = Instant::now();
        loop {
            if open_stream().1 == "HTTP/1.1 200" {
                break;
            }
            assert!(started.elapsed() < KEEP_ALIVE / 2, "the slots stayed taken");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
