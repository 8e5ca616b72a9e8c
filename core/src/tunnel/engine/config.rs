//! How an [`Engine`](super::Engine) is set up ([`Config`], the API key as a [`Secret`]), why a
//! configuration is refused, and what every control-plane request carries (the common headers,
//! the tunnel's base URL).

use std::fmt;

use super::super::server_info::ServerInfo;
use super::super::wire;
use super::super::WIRE_PROTOCOL_VERSION;
use crate::backoff::{self, Backoff};
use crate::http::{self, Headers};
use crate::time::Duration;

/// A secret string (the tunnel API key): never shown by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for building the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// How the engine is set up. [`Config::new`] fills in the defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// The control plane's base URL, e.g. `https://api.openai.com` (no trailing slash needed).
    pub base_url: String,
    /// The opaque tunnel id.
    pub tunnel_id: String,
    /// The tunnel API key, sent as `Authorization: Bearer`.
    pub api_key: Secret,
    /// `X-Tunnel-Client-Name`.
    pub client_name: String,
    /// `X-Tunnel-Client-Version`.
    pub client_version: String,
    /// `X-Tunnel-Client-Instance-Id`: stable for this process.
    pub instance_id: String,
    /// `X-Tunnel-MCP-Server-Info`, when declared.
    pub server_info: Option<ServerInfo>,
    /// The channels this client serves; a command for another channel is answered with a
    /// synthesized `client_internal` failure instead of being forwarded nowhere.
    pub channels: Vec<String>,
    /// Poll subscriptions: when set, one sorted `channel` query parameter per entry.
    pub poll_channels: Option<Vec<String>>,
    /// The requested long-poll wait (`timeout_ms`).
    pub poll_wait: Duration,
    /// The most commands admitted and not yet finished (queued, forwarding or delivering).
    pub max_in_flight: usize,
    /// The most forwards running at once.
    pub max_concurrent_forwards: usize,
    /// Backoff between failed polls.
    pub poll_backoff: Backoff,
    /// Backoff between attempts of one response POST.
    pub post_backoff: Backoff,
    /// The most attempts of one response POST (the first included).
    pub max_post_attempts: u32,
    /// The cap on a `Retry-After` value.
    pub retry_after_cap: Duration,
    /// The most bytes of one forwarded response body (JSON) or SSE event kept in memory.
    pub max_response_body: usize,
    /// How many recent forward outcomes the readiness verdict looks at.
    pub readiness_window: usize,
    /// The seed of the jitter source (the caller draws it from its own randomness).
    pub jitter_seed: u64,
    /// Headers the operator adds to every control-plane request (`--control-plane.extra-headers`,
    /// `OpenAI-Organization`), after the client's own; values are secrets (never in `Debug`).
    /// [`is_reserved_control_plane_header`] names the ones refused.
    pub extra_headers: Vec<(String, Secret)>,
    /// `--mcp.connection-max-ttl`: once a forward's response head arrives (a `2xx`/`3xx` to a
    /// JSON-RPC request), the most time its body may take; then the forward is cancelled and a
    /// `timeout` failure (`upstream_response_received: true`) is posted as its terminal
    /// response. `None`: no bound but the command's own deadline.
    pub connection_max_ttl: Option<Duration>,
}

/// The control-plane headers an operator may not set: the API key's, the content negotiation
/// and the client's own metadata (the Go client's list plus the wire and instance headers).
#[must_use]
pub fn is_reserved_control_plane_header(name: &str) -> bool {
    [
        "authorization",
        "accept",
        "content-type",
        "content-length",
        "host",
        "user-agent",
        "x-tunnel-client-name",
        "x-tunnel-client-version",
        "x-tunnel-client-wire-protocol-version",
        "x-tunnel-client-instance-id",
        "x-tunnel-mcp-server-info",
    ]
    .iter()
    .any(|r| r.eq_ignore_ascii_case(name.trim()))
}

impl Config {
    /// A configuration with the defaults: one `main` channel, a 15 s poll wait, 32 commands in
    /// flight, 16 concurrent forwards, 5 POST attempts, `Retry-After` capped at 60 s, 16 MiB
    /// bodies, a readiness window of 5.
    pub fn new(
        base_url: impl Into<String>,
        tunnel_id: impl Into<String>,
        api_key: Secret,
        instance_id: impl Into<String>,
    ) -> Self {
        Config {
            base_url: base_url.into(),
            tunnel_id: tunnel_id.into(),
            api_key,
            client_name: "mcpwire".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            instance_id: instance_id.into(),
            server_info: None,
            channels: vec![wire::DEFAULT_CHANNEL.to_owned()],
            poll_channels: None,
            poll_wait: Duration::from_secs(15),
            max_in_flight: 32,
            max_concurrent_forwards: 16,
            poll_backoff: Backoff::default(),
            post_backoff: Backoff::default(),
            max_post_attempts: 5,
            retry_after_cap: backoff::DEFAULT_RETRY_AFTER_CAP,
            max_response_body: 16 * 1024 * 1024,
            readiness_window: 5,
            jitter_seed: 0,
            extra_headers: Vec::new(),
            connection_max_ttl: None,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value is out of range.
    #[error("invalid tunnel configuration: {0}")]
    Invalid(&'static str),
    /// A header value built from the configuration is not a valid header value.
    #[error("invalid tunnel configuration: {0}")]
    Header(#[from] http::HeaderError),
}

/// Percent-encodes everything but RFC 3986 unreserved characters (ids are opaque strings).
pub(crate) fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The headers every control-plane request carries: the API key, the client's name, version,
/// wire version and instance id, and the server-info declaration when there is one.
pub(crate) fn common_headers(config: &Config) -> Result<Headers, ConfigError> {
    let mut common = Headers::new();
    common.append(
        "Authorization",
        format!("Bearer {}", config.api_key.expose()),
    )?;
    common.append("X-Tunnel-Client-Name", config.client_name.clone())?;
    common.append("X-Tunnel-Client-Version", config.client_version.clone())?;
    common.append(
        "X-Tunnel-Client-Wire-Protocol-Version",
        WIRE_PROTOCOL_VERSION,
    )?;
    common.append("X-Tunnel-Client-Instance-Id", config.instance_id.clone())?;
    if let Some(info) = &config.server_info {
        common.append("X-Tunnel-MCP-Server-Info", info.header_value())?;
    }
    for (name, value) in &config.extra_headers {
        if is_reserved_control_plane_header(name) {
            return Err(ConfigError::Invalid(
                "extra_headers may not set the client's own control-plane headers",
            ));
        }
        common.append(name.clone(), value.expose().to_owned())?;
    }
    Ok(common)
}

/// `GET {base}/v1/tunnels/{tunnel_id}` (the startup metadata) with the common control-plane
/// headers: what `mcpwire tunnel doctor` asks to learn that the control plane is reachable and
/// the API key accepted for this tunnel.
pub fn metadata_request(config: &Config) -> Result<crate::http::Request, ConfigError> {
    Ok(crate::http::Request {
        method: crate::http::Method::Get,
        url: tunnel_base_url(config),
        headers: common_headers(config)?,
        body: Vec::new(),
    })
}

/// `{base_url}/v1/tunnels/{tunnel_id}`, the id percent-encoded (ids are opaque strings).
pub(crate) fn tunnel_base_url(config: &Config) -> String {
    format!(
        "{}/v1/tunnels/{}",
        config.base_url.trim_end_matches('/'),
        encode_component(&config.tunnel_id)
    )
}
