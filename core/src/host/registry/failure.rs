//! Why a server is not connected: the step that failed and the kind of failure, with the
//! driver's message for a person.

use std::fmt;

use crate::time::Duration;

/// The step of connecting (or of being connected) where a server failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// Starting the connection: checking the URL, starting the local command.
    Start,
    /// `server/discover` (in the legacy era, the `initialize` handshake).
    Discover,
    /// `tools/list`.
    ListTools,
    /// Once connected: the connection was lost (the local server exited, the client closed).
    Running,
}

impl Stage {
    /// What was being done, for a sentence: `starting it`, `server/discover`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Start => "starting it",
            Stage::Discover => "server/discover",
            Stage::ListTools => "tools/list",
            Stage::Running => "while connected",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of failure, by what a person does about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// It did not become ready within its connect timeout (decided by the registry's
    /// [`handle_timeout`](super::Registry::handle_timeout)).
    TimedOut {
        /// The timeout it had.
        after: Duration,
    },
    /// Nothing answered: the connection was refused or broke.
    Unreachable,
    /// A request had no answer within its own timeout (the connection, as far as anyone
    /// knows, is still there).
    NoAnswer,
    /// The local command could not be started.
    Spawn,
    /// The local server exited.
    Exited,
    /// Authorization failed or was refused.
    Authorization,
    /// The server and this client have nothing in common (no protocol version, a capability
    /// missing).
    Incompatible,
    /// The server broke the protocol, or answered the step with an error.
    Server,
    /// The spec cannot be used as it is (an invalid URL, the token store unreadable).
    Config,
    /// This machine could not do its part (a thread or a pipe could not be had).
    Local,
}

impl FailureKind {
    /// A word for it: `timed out`, `unreachable`, `cannot start`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::TimedOut { .. } => "timed out",
            FailureKind::Unreachable => "unreachable",
            FailureKind::NoAnswer => "no answer",
            FailureKind::Spawn => "cannot start",
            FailureKind::Exited => "exited",
            FailureKind::Authorization => "not authorized",
            FailureKind::Incompatible => "incompatible",
            FailureKind::Server => "server error",
            FailureKind::Config => "bad config",
            FailureKind::Local => "local error",
        }
    }
}

impl FailureKind {
    /// Whether a request that failed this way, once the server was ready, means its
    /// connection is gone: the local server exited, or nothing answers any more (the
    /// connection was refused or broke, for every resend). The server has then failed
    /// ([`Registry::handle_request_failed`](super::Registry::handle_request_failed)) and,
    /// with reconnecting on, is connected again with backoff. A request that had no answer
    /// in time, an HTTP status or error the server answered with, a response that could not
    /// be read, a refused authorization leave it ready: a slow or erring server is still
    /// there, and each later request tells again.
    pub fn loses_connection(self) -> bool {
        matches!(self, FailureKind::Exited | FailureKind::Unreachable)
    }
}

/// Why a server failed: the step, the kind, and the driver's message for a person (it names
/// the URL or program and the cause; it never holds a header or environment value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectFailure {
    /// The step that failed.
    pub stage: Stage,
    /// The kind of failure.
    pub kind: FailureKind,
    /// What went wrong, for a person.
    pub detail: String,
}

impl ConnectFailure {
    /// A failure of `kind` at `stage`.
    pub fn new(stage: Stage, kind: FailureKind, detail: impl Into<String>) -> ConnectFailure {
        ConnectFailure {
            stage,
            kind,
            detail: detail.into(),
        }
    }

    /// The connect timeout passed during `stage`.
    pub fn timed_out(stage: Stage, after: Duration) -> ConnectFailure {
        ConnectFailure::new(
            stage,
            FailureKind::TimedOut { after },
            format!("not ready within the connect timeout of {after:?}"),
        )
    }
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.kind.as_str(),
            self.stage,
            self.detail
        )
    }
}
