//! One server of the registry: what the host knows about it, kept apart from every other
//! server's.

use std::fmt;

use crate::host::{ServerId, ServerSpec, TransportSpec, Trust};
use crate::mcp::discover::{DiscoverResult, ServerCapabilities};
use crate::mcp::{CachedEra, Implementation};
use crate::time::{Duration, Instant};

use super::credentials::Credentials;
use super::failure::{ConnectFailure, Stage};

/// One connection attempt of one server, issued by [`Registry::connect`](super::Registry::connect).
/// Attempts are numbered in order across the registry, so an attempt is never reused: an input
/// naming an attempt that has since ended (the server was disconnected, timed out, connected
/// again) is recognized as late and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Attempt(pub(super) u64);

impl Attempt {
    /// Its number (the first attempt of a registry is 0).
    pub fn number(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "attempt {}", self.0)
    }
}

/// Where a server's connection stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Not connected (never, or disconnected by the host).
    Disconnected,
    /// Its config entry is switched off ([`ServerSpec::disabled`]): it is never connected.
    Disabled,
    /// Connecting: the driver is starting it, asking `server/discover` and listing its tools.
    Connecting {
        /// The attempt.
        attempt: Attempt,
        /// When it counts as failed ([`FailureKind::TimedOut`](super::FailureKind::TimedOut));
        /// `None` when the timeout given does not fit in an `Instant`.
        deadline: Option<Instant>,
        /// The timeout it was given.
        timeout: Duration,
        /// The step it is at (as the driver reported it).
        stage: Stage,
    },
    /// Connected and usable.
    Ready {
        /// The attempt that connected it.
        attempt: Attempt,
    },
    /// The last attempt failed, or the connection was lost.
    Failed(ConnectFailure),
}

impl ConnectionState {
    /// The state without its details.
    pub fn kind(&self) -> StateKind {
        match self {
            ConnectionState::Disconnected => StateKind::Disconnected,
            ConnectionState::Disabled => StateKind::Disabled,
            ConnectionState::Connecting { .. } => StateKind::Connecting,
            ConnectionState::Ready { .. } => StateKind::Ready,
            ConnectionState::Failed(_) => StateKind::Failed,
        }
    }

    /// The attempt in progress or connected, if any.
    pub fn attempt(&self) -> Option<Attempt> {
        match self {
            ConnectionState::Connecting { attempt, .. } | ConnectionState::Ready { attempt } => {
                Some(*attempt)
            }
            _ => None,
        }
    }
}

/// A [`ConnectionState`] without its details: what a server list shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StateKind {
    /// [`ConnectionState::Disconnected`].
    Disconnected,
    /// [`ConnectionState::Disabled`].
    Disabled,
    /// [`ConnectionState::Connecting`].
    Connecting,
    /// [`ConnectionState::Ready`].
    Ready,
    /// [`ConnectionState::Failed`].
    Failed,
}

impl StateKind {
    /// The word for it: `disconnected`, `disabled`, `connecting`, `ready`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            StateKind::Disconnected => "disconnected",
            StateKind::Disabled => "disabled",
            StateKind::Connecting => "connecting",
            StateKind::Ready => "ready",
            StateKind::Failed => "failed",
        }
    }
}

impl fmt::Display for StateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the server said about itself (`server/discover`, or in the legacy era the `initialize`
/// result in the same shape).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSummary {
    /// `serverInfo`: self-reported, for display and logs only. The host names the server by
    /// its [`ServerId`], never by this, and decides nothing on it.
    pub server_info: Option<Implementation>,
    /// `supportedVersions`.
    pub supported_versions: Vec<String>,
    /// `capabilities`.
    pub capabilities: ServerCapabilities,
    /// `instructions`: guidance for a model, as sent.
    pub instructions: Option<String>,
}

impl ServerSummary {
    /// Whether the server says it announces changes of its tool list.
    pub fn announces_tool_changes(&self) -> bool {
        self.capabilities
            .tools
            .as_ref()
            .is_some_and(|t| t.list_changed == Some(true))
    }

    /// Whether the server says it has tools at all.
    pub fn has_tools(&self) -> bool {
        self.capabilities.tools.is_some()
    }
}

impl From<&DiscoverResult> for ServerSummary {
    fn from(d: &DiscoverResult) -> Self {
        ServerSummary {
            server_info: d.server_info(),
            supported_versions: d.supported_versions.clone(),
            capabilities: d.capabilities.clone(),
            instructions: d.instructions.clone(),
        }
    }
}

/// What the driver learned while connecting ([`Registry::handle_ready`](super::Registry::handle_ready)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Connected {
    /// The era and version in use.
    pub era: Option<CachedEra>,
    /// What the server said about itself.
    pub summary: ServerSummary,
    /// How many tools it listed (`None`: not listed).
    pub tools: Option<usize>,
}

/// What the host knows of a server's tools (the tools themselves live in the client's cache
/// and the catalog).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolsState {
    /// How many tools the latest listing gave (`None`: never listed).
    pub count: Option<usize>,
    /// The server announced a change since that listing (`list_changed`): list again.
    pub stale: bool,
}

/// One server of a [`Registry`](super::Registry): its spec and trust, its connection state,
/// and what its last connection learned (era, summary, tools, credentials). Nothing in it is
/// shared with another server.
#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    pub(super) spec: ServerSpec,
    pub(super) trust: Trust,
    pub(super) state: ConnectionState,
    pub(super) era: Option<CachedEra>,
    pub(super) summary: Option<ServerSummary>,
    pub(super) tools: ToolsState,
    pub(super) credentials: Credentials,
}

impl Server {
    pub(super) fn new(spec: ServerSpec) -> Server {
        let state = if spec.disabled {
            ConnectionState::Disabled
        } else {
            ConnectionState::Disconnected
        };
        Server {
            trust: spec.trust,
            credentials: Credentials::for_spec(&spec),
            spec,
            state,
            era: None,
            summary: None,
            tools: ToolsState::default(),
        }
    }

    /// Its id.
    pub fn id(&self) -> &ServerId {
        &self.spec.id
    }

    /// Its spec, as added.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The host's trust in it (the spec's, unless [`Registry::set_trust`](super::Registry::set_trust)
    /// changed it).
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// Where its connection stands.
    pub fn state(&self) -> &ConnectionState {
        &self.state
    }

    /// The era and version of its last connection: give it back to the client when connecting
    /// again, so that no detection is made twice.
    pub fn era(&self) -> Option<&CachedEra> {
        self.era.as_ref()
    }

    /// What it said about itself at its last connection.
    pub fn summary(&self) -> Option<&ServerSummary> {
        self.summary.as_ref()
    }

    /// What is known of its tools.
    pub fn tools(&self) -> ToolsState {
        self.tools
    }

    /// Its credentials' identity (never the tokens).
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// `stdio` or `http`.
    pub fn transport_name(&self) -> &'static str {
        match self.spec.transport {
            TransportSpec::Stdio { .. } => "stdio",
            TransportSpec::Http { .. } => "http",
        }
    }

    /// Whether it is connected and usable.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, ConnectionState::Ready { .. })
    }
}
