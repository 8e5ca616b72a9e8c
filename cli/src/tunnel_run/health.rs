//! `/healthz`, `/readyz` and `/metrics` on a small HTTP listener, served from the [`Status`]
//! snapshot the tunnel driver publishes after every step, and the admin UI at `/`
//! ([`AdminUi`]). Each connection is answered on a thread of its own (bounded), so a live view
//! of the admin UI never holds up a probe.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use mcpwire::tunnel::Status;

use super::admin_ui::http::{BadRequest, Request, Response};
use super::admin_ui::{AdminUi, Answer};

/// A connection the health listener answers: a TCP or a Unix stream.
pub trait Conn: Read + Write + Send + 'static {
    /// Bounds each read and write (a slow client cannot hold a handler).
    fn bound(&self, limit: Duration);
    /// Whether the peer is on this host (loopback, or any Unix-socket peer).
    fn is_local(&self) -> bool;
}

impl Conn for std::net::TcpStream {
    fn bound(&self, limit: Duration) {
        let _ = self.set_read_timeout(Some(limit));
        let _ = self.set_write_timeout(Some(limit));
    }

    fn is_local(&self) -> bool {
        self.peer_addr().is_ok_and(|a| match a.ip() {
            std::net::IpAddr::V4(ip) => ip.is_loopback(),
            std::net::IpAddr::V6(ip) => {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        })
    }
}

#[cfg(unix)]
impl Conn for std::os::unix::net::UnixStream {
    fn bound(&self, limit: Duration) {
        let _ = self.set_read_timeout(Some(limit));
        let _ = self.set_write_timeout(Some(limit));
    }

    fn is_local(&self) -> bool {
        true
    }
}

/// What the listener serves: the tunnel's status, and its admin UI unless turned off.
#[derive(Clone)]
pub struct Served {
    /// The snapshot behind `/healthz`, `/readyz` and `/metrics`.
    pub status: Arc<Status>,
    /// The operator's page at `/` (`None`: `--admin-ui.disable`).
    pub admin: Option<Arc<AdminUi>>,
    /// Connections being answered, against [`MAX_CONNECTIONS`].
    active: Arc<AtomicUsize>,
    /// Event streams open, against [`MAX_STREAMS`].
    streams: Arc<AtomicUsize>,
}

impl Served {
    /// What to serve.
    pub fn new(status: Arc<Status>, admin: Option<Arc<AdminUi>>) -> Self {
        Served {
            status,
            admin,
            active: Arc::default(),
            streams: Arc::default(),
        }
    }
}

/// Connections answered at once; past it, a `503` at once.
pub const MAX_CONNECTIONS: usize = 32;
/// Event streams (the admin UI's live views) open at once.
pub const MAX_STREAMS: usize = 8;

/// Gives a connection's handler back its slot when it ends.
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

/// Answers each connection of `incoming` on a thread of its own (at most
/// [`MAX_CONNECTIONS`] at once), accepting from a background thread.
fn serve_all<C: Conn>(
    incoming: impl Iterator<Item = std::io::Result<C>> + Send + 'static,
    served: Served,
) {
    let _ = thread::Builder::new().name("health".into()).spawn(move || {
        for conn in incoming {
            let Ok(mut conn) = conn else { continue };
            conn.bound(Duration::from_secs(2));
            let Some(slot) = Slot::take(&served.active, MAX_CONNECTIONS) else {
                let busy = Response::text(503, "busy: too many connections\n");
                let _ = busy.write(&mut conn, false);
                continue;
            };
            let served = served.clone();
            let _ = thread::Builder::new()
                .name("health-conn".into())
                .spawn(move || {
                    let _slot = slot;
                    answer(conn, &served);
                });
        }
    });
}

/// Serves the endpoints on `listener` from a background thread.
pub fn serve(listener: TcpListener, served: Served) {
    serve_all(
        std::iter::from_fn(move || Some(listener.accept().map(|(conn, _)| conn))),
        served,
    );
}

/// Serves the endpoints on a Unix socket's `listener` from a background thread.
#[cfg(unix)]
pub fn serve_unix(listener: std::os::unix::net::UnixListener, served: Served) {
    serve_all(
        std::iter::from_fn(move || Some(listener.accept().map(|(conn, _)| conn))),
        served,
    );
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

/// Answers one request on `conn`: the health endpoints, else the admin UI's paths.
fn answer<C: Conn>(mut conn: C, served: &Served) {
    let req = match Request::read(&mut conn) {
        Ok(r) => r,
        Err(BadRequest::Incomplete) => return,
        Err(BadRequest::TooSlow) => {
            let _ = Response::text(408, "request too slow\n").write(&mut conn, false);
            return;
        }
        Err(BadRequest::TooLarge) => {
            let _ = Response::text(413, "request too large\n").write(&mut conn, false);
            return;
        }
        Err(BadRequest::Malformed) => {
            let _ = Response::text(400, "bad request\n").write(&mut conn, false);
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
            Some(admin) if AdminUi::owns(path) => match admin.handle(&req, conn.is_local()) {
                Answer::Full(r) => r,
                Answer::Events(stream, after) => {
                    let Some(_slot) = Slot::take(&served.streams, MAX_STREAMS) else {
                        let busy = Response::text(503, "busy: too many live views open\n");
                        let _ = busy.write(&mut conn, false);
                        return;
                    };
                    admin.stream(stream, after, &mut conn, &|| false);
                    return;
                }
            },
            _ if matches!(req.method.as_str(), "GET" | "HEAD") => {
                health(404, "text/plain", "not found\n".to_owned())
            }
            _ => health(405, "text/plain", "method not allowed\n".to_owned()),
        },
    };
    let _ = response.write(&mut conn, head_only);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mcpwire::tunnel::log::{Level, Logger};

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
                Arc::clone(&status),
                Arc::new(log),
                super::super::admin_ui::overview::Fixed::default(),
            )
        });
        serve(listener, Served::new(status, admin));
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
}
