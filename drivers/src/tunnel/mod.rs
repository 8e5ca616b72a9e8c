//! The Secure MCP Tunnel client on a driver: poll the control plane, forward each command to
//! its channel's MCP server (Streamable HTTP, or a stdio child started without a shell), post
//! the responses, and stop cleanly.
//!
//! The protocol lives in [`mcpwire_core::tunnel`]; a driver runs it from a [`TunnelConfig`]
//! built in code, writes one redacted log line per event to a [`Logger`], publishes its
//! counters and readiness to a [`Status`] after every step, and hands the embedder a
//! [`Stopper`] at start-up:
//! - [`blocking::run`] (feature `blocking`): ureq, bounded std thread pools, `std::process`;
//! - `smol::run` (feature `smol`): hyper 1 on smol's sockets, smol tasks, async-process.
//!
//! Both run the same loop (`driver_core`) on the core's [`mcpwire_core::tunnel::Tunnel`]:
//! every protocol and policy decision (routing, deadlines, stdio restarts, retries, bounds) is
//! the core's; a driver performs polls, forwards, stdio spawns, writes and kills, and posts.
//! Serving the status over HTTP, signal handling and reading flags are the embedder's part
//! (the `mcpwire tunnel run` command does them).
//!
//! ```no_run
//! # #[cfg(feature = "blocking")] {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use mcpwire::tunnel::log::{Level, Logger};
//! use mcpwire::tunnel::{Status, Target, TargetKind, TunnelConfig};
//! use mcpwire_core::tunnel::engine::{Config, Secret};
//!
//! let instance = format!("{:016x}", mcpwire::random_seed());
//! let mut engine = Config::new("https://api.example.invalid", "tunnel_123", Secret::new("sk-..."), instance);
//! engine.jitter_seed = mcpwire::random_seed();
//! let config = TunnelConfig {
//!     engine,
//!     targets: vec![Target {
//!         channel: "main".to_owned(),
//!         kind: TargetKind::Http { url: "http://127.0.0.1:3000/mcp".to_owned() },
//!     }],
//!     stdio: Default::default(),
//!     grace: Duration::from_secs(10),
//!     cloudflared: None,
//!     harpoon: None,
//!     harpoon_discovery: None,
//!     // The system's trust store, no client certificate; no proxy.
//!     tls: Default::default(),
//!     proxies: Default::default(),
//!     mcp_extra_headers: Vec::new(),
//!     mcp_discovery_extra_headers: Vec::new(),
//!     startup_wait: None,
//!     unix_sockets: Default::default(),
//! };
//! let log = Arc::new(Logger::stderr(Level::Info, false, vec!["sk-...".to_owned()]));
//! // Runs until the stopper (kept by `on_start`, e.g. for a signal handler) is used.
//! mcpwire::tunnel::blocking::run(config, log, Status::new(), |_stopper| Ok(()))?;
//! # }
//! # Ok::<(), mcpwire::tunnel::Error>(())
//! ```

pub mod activity;
pub mod config;
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) mod driver_core;
#[cfg(any(feature = "blocking", feature = "smol"))]
mod harpoon_discovery;
pub mod log;
#[cfg(any(feature = "blocking", feature = "smol"))]
mod report;
mod startup;
pub mod status;
mod stop;

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
#[cfg(feature = "smol")]
#[cfg_attr(docsrs, doc(cfg(feature = "smol")))]
pub mod smol;

pub use config::{
    parse_ca_bundle, Cloudflared, CloudflaredToken, HarpoonDiscovery, Identity, Target, TargetKind,
    TlsError, TunnelConfig, TunnelProxies, TunnelTls,
};
pub use log::Logger;
pub use status::{Metrics, Status};
pub use stop::Stopper;

/// Why a tunnel driver's `run` returned an error (a stop asked through the [`Stopper`] is
/// `Ok`). Its `Display` is the one line the `mcpwire` command logs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot be run (the caller's part): the engine refused it.
    #[error("{0}")]
    Config(#[from] mcpwire_core::tunnel::ConfigError),
    /// The embedder's `on_start` hook failed (for the `mcpwire` command: the signal handlers
    /// could not be installed).
    #[error("{0}")]
    Start(std::io::Error),
    /// The TLS settings could not be built (smol driver).
    #[error("{reason}")]
    Tls {
        /// What rustls said.
        reason: String,
    },
    /// The managed cloudflared companion could not be started or did not get ready.
    #[error("managed cloudflared: {reason}")]
    Cloudflared {
        /// What went wrong, for a person (the token is never in it).
        reason: String,
    },
    /// The cloudflared companion exited on its own while the tunnel ran; in-flight commands
    /// were finished within the grace period.
    #[error("cloudflared exited unexpectedly ({status})")]
    CompanionExited {
        /// Its exit status.
        status: String,
    },
}
