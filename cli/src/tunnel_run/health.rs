//! `/healthz`, `/readyz` and `/metrics` on a small HTTP listener, served from the [`Status`]
//! snapshot the tunnel driver publishes after every step.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use mcpwire::tunnel::Status;

/// A connection the health listener answers: a TCP or a Unix stream.
trait Conn: Read + Write {
    /// Bounds each read and write (a slow client cannot hold the listener).
    fn bound(&self, limit: Duration);
}

impl Conn for std::net::TcpStream {
    fn bound(&self, limit: Duration) {
        let _ = self.set_read_timeout(Some(limit));
        let _ = self.set_write_timeout(Some(limit));
    }
}

#[cfg(unix)]
impl Conn for std::os::unix::net::UnixStream {
    fn bound(&self, limit: Duration) {
        let _ = self.set_read_timeout(Some(limit));
        let _ = self.set_write_timeout(Some(limit));
    }
}

/// Answers each connection of `incoming` in turn, from a background thread.
fn serve_all<C: Conn>(
    incoming: impl Iterator<Item = std::io::Result<C>> + Send + 'static,
    status: Arc<Status>,
) {
    let _ = thread::Builder::new().name("health".into()).spawn(move || {
        for conn in incoming {
            let Ok(conn) = conn else { continue };
            conn.bound(Duration::from_secs(2));
            answer(conn, &status);
        }
    });
}

/// Serves the endpoints on `listener` from a background thread.
pub fn serve(listener: TcpListener, status: Arc<Status>) {
    serve_all(
        std::iter::from_fn(move || Some(listener.accept().map(|(conn, _)| conn))),
        status,
    );
}

/// Serves the endpoints on a Unix socket's `listener` from a background thread.
#[cfg(unix)]
pub fn serve_unix(listener: std::os::unix::net::UnixListener, status: Arc<Status>) {
    serve_all(
        std::iter::from_fn(move || Some(listener.accept().map(|(conn, _)| conn))),
        status,
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

/// The longest request head read.
const MAX_HEAD: usize = 8192;

fn answer(mut conn: impl Read + Write, status: &Status) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(buf.get(..n).unwrap_or_default()),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut parts = text.split_whitespace();
    let method = parts.next().unwrap_or("");
    let path = parts.next().unwrap_or("").split('?').next().unwrap_or("");
    let m = status.get();
    let (code, ctype, body) = match (method, path) {
        ("GET" | "HEAD", "/healthz") => (200, "text/plain", "ok\n".to_owned()),
        ("GET" | "HEAD", "/readyz") => match &m.not_ready {
            None => (200, "text/plain", "ready\n".to_owned()),
            Some(why) => (503, "text/plain", format!("not ready: {why}\n")),
        },
        ("GET" | "HEAD", "/metrics") => (200, "text/plain; version=0.0.4", m.prometheus()),
        ("GET" | "HEAD", _) => (404, "text/plain", "not found\n".to_owned()),
        _ => (405, "text/plain", "method not allowed\n".to_owned()),
    };
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let mut response = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        response.push_str(&body);
    }
    let _ = conn.write_all(response.as_bytes());
}
