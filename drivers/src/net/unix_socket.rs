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
use std::time::Duration;

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
        let stream = UnixStream::connect(&self.path)?;
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
