//! The HTTP stacks both the MCP client and the tunnel drive: ureq agents and a bounded thread
//! pool for the blocking driver, hyper 1 on smol's sockets with a keep-alive pool for smol;
//! and the DNS rebinding defence for the fetches the core guards (`guard`).

pub(crate) mod guard;
#[cfg(feature = "smol")]
pub(crate) mod hyper_smol;
#[cfg(feature = "blocking")]
pub(crate) mod threads;
pub mod tls;
#[cfg(all(unix, feature = "blocking"))]
pub(crate) mod unix_socket;
#[cfg(feature = "blocking")]
pub(crate) mod ureq;

/// An I/O error in words: the common kinds named, others as the OS says them (a TLS error
/// inside one says which certificate problem).
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        ErrorKind::TimedOut => "timed out".to_owned(),
        ErrorKind::ConnectionReset => "the connection was reset".to_owned(),
        ErrorKind::ConnectionAborted => "the connection was aborted".to_owned(),
        ErrorKind::UnexpectedEof => "the connection closed early".to_owned(),
        _ => e.to_string(),
    }
}

/// `host:port` of `url` for a log line (`?` when it cannot be read).
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) fn host_of(url: &str) -> String {
    mcpwire_core::net_policy::Url::parse(url)
        .ok()
        .and_then(|u| {
            let host = u.host_str()?.to_owned();
            Some(format!("{host}:{}", u.port_or_known_default()?))
        })
        .unwrap_or_else(|| "?".to_owned())
}

/// Whether `a` and `b` have the same origin (scheme, host and port); `false` when either is
/// not a URL.
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) fn same_origin(a: &str, b: &str) -> bool {
    use mcpwire_core::net_policy::Url;
    match (Url::parse(a), Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}
