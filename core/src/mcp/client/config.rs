//! How the client is set up: [`ClientConfig`] and its defaults.

use crate::http::Headers;
use crate::mcp::cache::{AuthContext, CacheConfig};
use crate::mcp::era;
use crate::mcp::meta::{ClientCapabilities, Implementation};
use crate::mcp::mrtr;
use crate::mcp::request::{CallOptions, Transport};
use crate::mcp::subscription::SubscriptionsConfig;
use crate::mcp::LATEST_PROTOCOL_VERSION;
use crate::time::Duration;

/// The largest JSON response body (or error body) the client buffers (16 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How long the stdio `server/discover` probe waits before the server counts as legacy (10 s).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Legacy HTTP: how long to wait before resuming an SSE stream whose server set no `retry`.
pub const DEFAULT_SSE_RETRY: Duration = Duration::from_secs(1);

/// Legacy HTTP: the longest `retry` honoured (a larger one is cut to this).
pub const MAX_SSE_RETRY: Duration = Duration::from_secs(60);

/// Legacy HTTP: the most times one stream is resumed.
pub const MAX_SSE_RESUMES: u32 = 100;

/// Legacy HTTP: the most resumes in a row that brought no new event before the stream counts
/// as broken.
pub const MAX_STALLED_SSE_RESUMES: u32 = 3;

/// Legacy HTTP: the longest the session's first requests wait for the server to answer
/// `notifications/initialized` and the session's GET stream (see [`ClientConfig::legacy_listen`]).
pub const SESSION_OPEN_WAIT: Duration = Duration::from_secs(2);

/// Which era the client speaks.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ProtocolChoice {
    /// Detect it (HTTP: modern first, fall back on a legacy answer; stdio: probe).
    #[default]
    Auto,
    /// Only the modern era; a legacy answer is an error.
    Modern,
    /// Only the legacy era (`initialize` first).
    Legacy,
}

/// How the client is set up. [`ClientConfig::new`] fills in the defaults.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Streamable HTTP or stdio.
    pub transport: Transport,
    /// Streamable HTTP: the server's URL, which every [`Output::Http`](super::Output::Http)
    /// request goes to (unused on stdio).
    pub url: String,
    /// Streamable HTTP: the host's extra headers, sent with every request (e.g.
    /// `Authorization`). A header the client sets itself (the `Mcp-*` headers,
    /// `MCP-Protocol-Version`, `Content-Type`, `Accept`, ...) wins over an extra one of the same
    /// name, which is then not sent. `Debug` shows their names only.
    pub headers: Headers,
    /// `clientInfo`.
    pub client_info: Implementation,
    /// The capabilities declared on every request (what the host supports and wants to use).
    pub capabilities: ClientCapabilities,
    /// Everything the host could support if a server requires it (`-32021`); by default the
    /// same as [`ClientConfig::capabilities`].
    pub host_capabilities: ClientCapabilities,
    /// The era policy.
    pub protocol: ProtocolChoice,
    /// The modern versions the client speaks, any order (default: [`LATEST_PROTOCOL_VERSION`]).
    pub versions: Vec<String>,
    /// A verdict the host kept from earlier (an [`era::EraCache`] entry): skips detection
    /// until it breaks.
    pub known_era: Option<era::CachedEra>,
    /// The per-request defaults (timeout, resends, backoff).
    pub call_options: CallOptions,
    /// The result cache.
    pub cache: CacheConfig,
    /// The authorization context requests are made in (private cache entries are keyed by it).
    pub auth_context: AuthContext,
    /// The subscription policy (its `transport` and `jitter_seed` are set from this config).
    pub subscriptions: SubscriptionsConfig,
    /// stdio: how long the `server/discover` probe may take.
    pub probe_timeout: Duration,
    /// The MRTR round limit per operation (default 10).
    pub max_mrtr_rounds: u32,
    /// The largest response body buffered.
    pub max_body_bytes: usize,
    /// The seed of every jitter source (drawn by the caller from its own randomness).
    pub jitter_seed: u64,
    /// Streamable HTTP: before calling a tool whose `x-mcp-header` annotations are not known
    /// (no `tools/list` seen since the era was learned or the list changed), fetch `tools/list`
    /// first, so that the call carries its `Mcp-Param-*` headers on the first try and a tool
    /// with invalid annotations is refused without being called (default `true`). Off, such a
    /// call goes out without those headers and relies on the server's `-32020` to refresh.
    pub list_tools_before_call: bool,
    /// Streamable HTTP, legacy era: after `initialize`, open the session's GET stream
    /// (legacy `basic/transports.mdx`, "Listening for Messages from the Server") to receive
    /// the server's requests (such as `elicitation/create`) and notifications that it sends
    /// outside any call's stream. A server without one answers `405`. Default `true`.
    pub legacy_listen: bool,
    /// Streamable HTTP: OAuth authorization when the server asks for it (`401`, `403
    /// insufficient_scope`); `None` (the default): such answers fail the request.
    pub authorization: Option<super::AuthConfig>,
}

impl ClientConfig {
    /// The defaults for a server on `transport`: automatic era detection, no optional
    /// capability declared, 60 s timeouts, a 10-round MRTR limit.
    pub fn new(transport: Transport, client_info: Implementation) -> Self {
        ClientConfig {
            transport,
            url: String::new(),
            headers: Headers::new(),
            client_info,
            capabilities: ClientCapabilities::none(),
            host_capabilities: ClientCapabilities::none(),
            protocol: ProtocolChoice::Auto,
            versions: vec![LATEST_PROTOCOL_VERSION.to_owned()],
            known_era: None,
            call_options: CallOptions::default(),
            cache: CacheConfig::default(),
            auth_context: AuthContext::new("anonymous"),
            subscriptions: SubscriptionsConfig::new(transport),
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            max_mrtr_rounds: mrtr::DEFAULT_MAX_ROUNDS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            jitter_seed: 0,
            list_tools_before_call: true,
            legacy_listen: true,
            authorization: None,
        }
    }

    /// Streamable HTTP: sends every request to `url`.
    pub fn with_url(mut self, url: &str) -> Self {
        url.clone_into(&mut self.url);
        self
    }

    /// Declares `capabilities` on every request (and lets `-32021` use them).
    pub fn with_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.host_capabilities = capabilities.clone();
        self.capabilities = capabilities;
        self
    }
}
