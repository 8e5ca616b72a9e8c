//! HTTP over a Unix socket for ureq: a [`Connector`] that opens the socket whatever the URL
//! names, and its [`Transport`]. The URL still gives the `Host` header, the path and, for
//! `https`, the TLS server name (rustls runs over the socket as over TCP).
//!
//! ureq 3 has no Unix-socket transport of its own; this follows its TCP transport's shape
//! (lazy buffers, per-call read and write timeouts, a shutdown handle the agent can close).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, RustlsConnector,
    ShutdownHandle, Transport,
};
use ureq::{Agent, Error};

/// An agent whose every connection goes to the Unix socket at `path` (TLS over it for
/// `https`), with `config`. Its connection pool is its own.
pub fn agent(config: Config, path: PathBuf) -> Agent {
    Agent::with_parts(
        config,
        UnixConnector { path }.chain(RustlsConnector::default()),
        NoLookup,
    )
}

/// Opens the socket; the resolved addresses are ignored.
#[derive(Debug)]
struct UnixConnector {
    path: PathBuf,
}

impl Connector<()> for UnixConnector {
    type Out = UnixTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _: Option<()>,
    ) -> Result<Option<Self::Out>, Error> {
        let stream = connect(&self.path, details.timeout)?;
        let config = details.config;
        let transport = UnixTransport {
            stream: Arc::new(Socket(stream)),
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
            read_timeout: None,
            write_timeout: None,
        };
        (details.register_shutdown)(Arc::downgrade(&transport.stream) as Weak<dyn ShutdownHandle>)?;
        Ok(Some(transport))
    }
}

/// How often a connect to a socket whose backlog is full is tried again.
const CONNECT_RETRY: Duration = Duration::from_millis(5);

/// Connects to the socket at `path` within `timeout`. A blocking `connect(2)` to a Unix socket
/// whose listen backlog is full waits with no limit, and the socket gives no readiness to wait
/// on; so the connect is non-blocking and tried again until the backlog has room or the
/// connect timeout passes. A missing socket or one the user may not open fails at once.
fn connect(path: &std::path::Path, timeout: NextTimeout) -> Result<UnixStream, Error> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let os = |e: rustix::io::Errno| Error::Io(io::Error::from(e));
    let addr = SocketAddrUnix::new(path).map_err(os)?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .map_err(os)?;
    let deadline = timeout.not_zero().map(|t| Instant::now() + *t);
    loop {
        match rustix::net::connect(&fd, &addr) {
            Ok(()) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => {
                let left = match deadline {
                    None => CONNECT_RETRY,
                    Some(d) => d.saturating_duration_since(Instant::now()),
                };
                if left.is_zero() {
                    return Err(Error::Timeout(timeout.reason));
                }
                std::thread::sleep(left.min(CONNECT_RETRY));
            }
            Err(e) => return Err(os(e)),
        }
    }
    rustix::io::ioctl_fionbio(&fd, false).map_err(os)?;
    Ok(UnixStream::from(fd))
}

/// No name is looked up: the connector does not use an address. One placeholder keeps ureq's
/// "no address" check quiet.
#[derive(Debug)]
struct NoLookup;

impl Resolver for NoLookup {
    fn resolve(&self, _: &Uri, _: &Config, _: NextTimeout) -> Result<ResolvedSocketAddrs, Error> {
        let mut out = self.empty();
        let _ = out.try_push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
        Ok(out)
    }
}

/// A connection on a Unix socket.
struct UnixTransport {
    stream: Arc<Socket>,
    buffers: LazyBuffers,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl std::fmt::Debug for UnixTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixTransport").finish_non_exhaustive()
    }
}

/// The socket, closable from another thread (the agent's shutdown).
#[derive(Debug)]
struct Socket(UnixStream);

impl ShutdownHandle for Socket {
    fn shutdown(&self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// A would-block from a socket timeout is a timeout.
fn timed_out(e: io::Error, timeout: &NextTimeout) -> Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout(timeout.reason),
        _ => Error::Io(e),
    }
}

/// A timeout with nothing left is reached before any I/O (as ureq's TCP transport does).
fn spent(timeout: NextTimeout) -> Result<NextTimeout, Error> {
    if timeout.after.is_zero() {
        Err(Error::Timeout(timeout.reason))
    } else {
        Ok(timeout)
    }
}

/// The socket option for `timeout` (none when there is no limit; never zero, which the OS
/// refuses).
fn option_of(timeout: &NextTimeout) -> Option<Duration> {
    timeout
        .not_zero()
        .map(|t| (*t).max(Duration::from_millis(1)))
}

impl Transport for UnixTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let timeout = spent(timeout.for_write())?;
        let limit = option_of(&timeout);
        if limit != self.write_timeout {
            self.stream.0.set_write_timeout(limit)?;
            self.write_timeout = limit;
        }
        let output = self.buffers.output().get(..amount).unwrap_or_default();
        (&self.stream.0)
            .write_all(output)
            .map_err(|e| timed_out(e, &timeout))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        let timeout = spent(timeout.for_read())?;
        let limit = option_of(&timeout);
        if limit != self.read_timeout {
            self.stream.0.set_read_timeout(limit)?;
            self.read_timeout = limit;
        }
        let input = self.buffers.input_append_buf();
        let amount = loop {
            match (&self.stream.0).read(input) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other.map_err(|e| timed_out(e, &timeout))?,
            }
        };
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // Open when a read would block: not closed by the peer, no stray bytes.
        if self.stream.0.set_nonblocking(true).is_err() {
            return false;
        }
        let mut byte = [0u8; 1];
        let open = matches!(
            (&self.stream.0).read(&mut byte),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        );
        self.stream.0.set_nonblocking(false).is_ok() && open
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind};

    fn temp_socket(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpwire-unix-{}-{name}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        path
    }

    fn agent_with_connect_timeout(path: PathBuf, timeout: Duration) -> Agent {
        let config = Agent::config_builder()
            .timeout_connect(Some(timeout))
            .build();
        agent(config, path)
    }

    /// Runs `f` on a thread and waits for it at most `bound` (a hang fails the test instead of
    /// stopping the suite).
    fn within<T: Send + 'static>(bound: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        match rx.recv_timeout(bound) {
            Ok(v) => v,
            Err(_) => panic!("no answer within {bound:?}"),
        }
    }

    /// Linux refuses a non-blocking connect to a full backlog with `EAGAIN` (others differ).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_backlog_ends_in_a_connect_timeout_not_a_hang() {
        use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
        let path = temp_socket("backlog");
        let listener = rustix::net::socket(AddressFamily::UNIX, SocketType::STREAM, None).unwrap();
        rustix::net::bind(&listener, &SocketAddrUnix::new(&path).unwrap()).unwrap();
        rustix::net::listen(&listener, 0).unwrap();
        // Never accepted: fill the backlog until a non-blocking connect would wait.
        let mut queued = Vec::new();
        let mut full = false;
        for _ in 0..10_000 {
            let fd = rustix::net::socket_with(
                AddressFamily::UNIX,
                SocketType::STREAM,
                SocketFlags::NONBLOCK,
                None,
            )
            .unwrap();
            match rustix::net::connect(&fd, &SocketAddrUnix::new(&path).unwrap()) {
                Ok(()) => queued.push(fd),
                Err(rustix::io::Errno::AGAIN) => {
                    full = true;
                    break;
                }
                Err(e) => panic!("connect: {e}"),
            }
        }
        assert!(full, "the backlog never filled");
        let agent = agent_with_connect_timeout(path.clone(), Duration::from_millis(200));
        let result = within(Duration::from_secs(30), move || {
            agent.get("http://localhost/mcp").call().map(|_| ())
        });
        assert!(
            matches!(result, Err(Error::Timeout(ureq::Timeout::Connect))),
            "{result:?}"
        );
        drop(queued);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_missing_socket_is_a_connect_failure() {
        let path = temp_socket("missing");
        let agent = agent_with_connect_timeout(path, Duration::from_secs(5));
        let err = within(Duration::from_secs(30), move || {
            agent.get("http://localhost/mcp").call().map(|_| ())
        })
        .unwrap_err();
        assert!(
            matches!(&err, Error::Io(e) if e.kind() == io::ErrorKind::NotFound),
            "{err:?}"
        );
        let failure = super::super::ureq::failure_before_head(&err);
        // A connect failure (the server is not up), not a closed exchange.
        assert_eq!(failure.source(), FailureSource::Connect, "{failure:?}");
        assert_eq!(
            failure.transport_error_kind(),
            Some(TransportErrorKind::Dial),
            "{failure:?}"
        );
    }

    #[test]
    fn a_listening_socket_answers_over_http() {
        let path = temp_socket("answers");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
                head.push(byte[0]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
            String::from_utf8_lossy(&head).into_owned()
        });
        let agent = agent_with_connect_timeout(path.clone(), Duration::from_secs(5));
        let body = within(Duration::from_secs(30), move || {
            agent
                .get("http://mcp.localhost/mcp")
                .call()
                .and_then(|mut r| r.body_mut().read_to_string())
        })
        .unwrap();
        assert_eq!(body, "ok");
        let head = server.join().unwrap();
        assert!(head.starts_with("GET /mcp HTTP/1.1\r\n"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("host: mcp.localhost\r\n"),
            "{head}"
        );
        let _ = std::fs::remove_file(&path);
    }
}
