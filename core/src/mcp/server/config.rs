//! What a [`super::Server`] is told when it is made: who it is, which eras it speaks, the
//! secrets the driver drew, the HTTP host/origin rules and every bound.

use std::fmt;

use crate::mcp::cache::ListKind;
use crate::mcp::discover::CacheScopeHint;
use crate::mcp::meta::Implementation;
use crate::time::{Duration, Instant, SystemTime};

use super::ConfigError;

/// Which eras one endpoint answers (both by default, as `basic/versioning.mdx`'s
/// backward-compatibility section allows a server to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eras {
    /// `2026-07-28`: self-contained requests with `_meta`, `server/discover`.
    pub modern: bool,
    /// `2025-11-25` (and the older versions of [`crate::mcp::KNOWN_LEGACY_VERSIONS`]):
    /// `initialize`, sessions.
    pub legacy: bool,
}

impl Default for Eras {
    fn default() -> Self {
        Eras {
            modern: true,
            legacy: true,
        }
    }
}

impl Eras {
    /// Both eras.
    pub const BOTH: Eras = Eras {
        modern: true,
        legacy: true,
    };
    /// `2026-07-28` only: `initialize` is refused with `-32022`, `DELETE` gets `405`.
    pub const MODERN: Eras = Eras {
        modern: true,
        legacy: false,
    };
    /// The `initialize` era only: `server/discover` is an unknown method.
    pub const LEGACY: Eras = Eras {
        modern: false,
        legacy: true,
    };
}

/// The secrets the driver draws from its random source when it starts (core has none): the
/// key that seals MRTR `requestState` and the seed of the session ids. `Debug` never shows
/// them.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerSecrets {
    /// The HMAC-SHA256 key of sealed `requestState` values. Servers behind one load balancer
    /// share it, so that any of them can verify another's state.
    pub request_state_key: [u8; 32],
    /// The seed session ids are derived from (SHA-256 of the seed and a counter: unguessable
    /// without the seed, never repeated within one server).
    pub session_seed: [u8; 32],
}

impl ServerSecrets {
    /// Secrets from 64 random bytes: the first 32 the key, the others the seed.
    pub fn from_entropy(bytes: [u8; 64]) -> Self {
        let mut request_state_key = [0u8; 32];
        let mut session_seed = [0u8; 32];
        request_state_key.copy_from_slice(&bytes[..32]);
        session_seed.copy_from_slice(&bytes[32..]);
        ServerSecrets {
            request_state_key,
            session_seed,
        }
    }
}

impl fmt::Debug for ServerSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerSecrets { <redacted> }")
    }
}

/// One reading of both clocks, taken together by the driver at start: sealed `requestState`
/// expiries are wall-clock seconds, computed from it and the [`Instant`]s every input carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    /// The monotonic instant of the reading.
    pub instant: Instant,
    /// The wall time of the same moment.
    pub wall: SystemTime,
}

/// Which `Host` and `Origin` values an HTTP request may carry (DNS-rebinding protection,
/// `basic/transports.mdx`'s security warning: a server MUST validate `Origin`; a local server
/// SHOULD bind to loopback). The default accepts loopback names only (`localhost`,
/// `127.0.0.1`, `[::1]`, any port) and a request without `Origin`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginPolicy {
    /// Accept the loopback hosts and origins (`localhost`, `127.0.0.1`, `[::1]`, any port).
    pub allow_loopback: bool,
    /// More `Host` values to accept (`host` or `host:port`, compared case-insensitively).
    pub allowed_hosts: Vec<String>,
    /// More `Origin` values to accept (`scheme://host[:port]`, compared case-insensitively).
    pub allowed_origins: Vec<String>,
    /// Accept any `Host` (a server behind a reverse proxy that checks it). `Origin` is still
    /// checked when present.
    pub any_host: bool,
}

impl Default for OriginPolicy {
    fn default() -> Self {
        OriginPolicy {
            allow_loopback: true,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            any_host: false,
        }
    }
}

/// How long a client may reuse a cacheable result, and with whom (`ttlMs` and `cacheScope`,
/// `server/utilities/caching.mdx`), for the `2026-07-28` results the core writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheHint {
    /// `ttlMs` (0: immediately stale).
    pub ttl_ms: u64,
    /// `cacheScope`.
    pub scope: CacheScopeHint,
}

impl Default for CacheHint {
    fn default() -> Self {
        CacheHint {
            ttl_ms: 0,
            scope: CacheScopeHint::Public,
        }
    }
}

/// The cache hints of each cacheable result (an application can still put its own `ttlMs` /
/// `cacheScope` into a `resources/read` result: the core keeps them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheHints {
    /// `server/discover`.
    pub discover: CacheHint,
    /// `tools/list`.
    pub tools: CacheHint,
    /// `prompts/list`.
    pub prompts: CacheHint,
    /// `resources/list`.
    pub resources: CacheHint,
    /// `resources/templates/list`.
    pub resource_templates: CacheHint,
    /// `resources/read`, when the application's result has none.
    pub read: CacheHint,
}

/// Every bound of the server. Each overflow is answered with the spec's error (or HTTP
/// status) and a message naming the bound; none is a panic or a lost reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest HTTP request body (`413` beyond). Drivers stop reading one byte past it.
    pub max_body_bytes: usize,
    /// The longest stdio line, newline not counted (`-32700` beyond, the line skipped).
    pub max_line_bytes: usize,
    /// Requests in flight on one stdio connection or one legacy session (`-32000`
    /// "too many requests" beyond; on HTTP a `429`).
    pub max_in_flight_per_connection: usize,
    /// Requests in flight in the whole server.
    pub max_in_flight: usize,
    /// Open legacy sessions (`initialize` beyond it: `503`, `-32000`).
    pub max_sessions: usize,
    /// Server-to-client requests (elicitation, sampling, roots) awaiting an answer, per
    /// session or connection.
    pub max_pending_server_requests: usize,
    /// SSE events kept per stream for replay (`Last-Event-ID`) and per stream not yet
    /// delivered; the oldest are dropped first.
    pub max_sse_backlog: usize,
    /// Open `subscriptions/listen` and GET streams in the whole server.
    pub max_streams: usize,
    /// Items per page of a list result.
    pub page_size: usize,
    /// Items per page of one list, where it differs from [`Limits::page_size`].
    pub page_sizes: PageSizes,
    /// MRTR rounds of one legacy request (the core stops asking beyond, `-32603`).
    pub max_input_rounds: u32,
}

/// Items per page of each list (`None`: [`Limits::page_size`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageSizes {
    /// `tools/list`.
    pub tools: Option<usize>,
    /// `prompts/list`.
    pub prompts: Option<usize>,
    /// `resources/list`.
    pub resources: Option<usize>,
    /// `resources/templates/list`.
    pub resource_templates: Option<usize>,
}

impl Limits {
    /// Items per page of `kind`.
    pub fn page_size_of(&self, kind: ListKind) -> usize {
        let p = &self.page_sizes;
        match kind {
            ListKind::Tools => p.tools,
            ListKind::Prompts => p.prompts,
            ListKind::Resources => p.resources,
            ListKind::ResourceTemplates => p.resource_templates,
        }
        .unwrap_or(self.page_size)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_line_bytes: 4 * 1024 * 1024,
            max_in_flight_per_connection: 64,
            max_in_flight: 1024,
            max_sessions: 1024,
            max_pending_server_requests: 16,
            max_sse_backlog: 256,
            max_streams: 256,
            page_size: 100,
            page_sizes: PageSizes::default(),
            max_input_rounds: crate::mcp::mrtr::DEFAULT_MAX_ROUNDS,
        }
    }
}

/// Timing of the server's own deadlines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// How long a sealed `requestState` stays valid.
    pub request_state_ttl: Duration,
    /// How long a server-to-client request (legacy MRTR) waits for its answer before the
    /// request it serves fails (`-32603`, naming the input).
    pub server_request: Duration,
    /// A legacy session without any request for this long is closed (`None`: never).
    pub session_idle: Option<Duration>,
    /// The `retry` field of the priming event of each SSE stream (SEP-1699; `None`: none).
    pub sse_retry: Option<Duration>,
    /// How often an SSE comment (`:`) goes down the long-lived streams (`subscriptions/listen`,
    /// the legacy GET stream) so intermediaries and clients do not close them when quiet
    /// (`None`: never).
    pub keep_alive: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            request_state_ttl: Duration::from_secs(600),
            server_request: Duration::from_secs(300),
            session_idle: None,
            sse_retry: Some(Duration::from_millis(1000)),
            keep_alive: Some(Duration::from_secs(15)),
        }
    }
}

/// The server's configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `serverInfo` (`initialize`'s, and `_meta["io.modelcontextprotocol/serverInfo"]` of
    /// every `2026-07-28` result).
    pub info: Implementation,
    /// `instructions` for the model, in `initialize` and `server/discover`.
    pub instructions: Option<String>,
    /// Which eras are served.
    pub eras: Eras,
    /// The secrets drawn by the driver.
    pub secrets: ServerSecrets,
    /// The driver's clock reading at start (for `requestState` expiry). `None`: expiries are
    /// measured from the first instant the server sees, so a state sealed by another process
    /// is refused as expired.
    pub wall_clock: Option<WallClock>,
    /// The HTTP path of the endpoint (`/mcp`). Other paths get `404`.
    pub http_path: String,
    /// `Host`/`Origin` checks.
    pub origin_policy: OriginPolicy,
    /// `ttlMs` / `cacheScope` of modern results.
    pub cache: CacheHints,
    /// Every bound.
    pub limits: Limits,
    /// The server's own deadlines.
    pub timeouts: Timeouts,
    /// Advertise `logging` (legacy `logging/setLevel`).
    pub logging: bool,
    /// Advertise `completions` (`completion/complete`).
    pub completions: bool,
    /// Advertise `tools` (with `listChanged`).
    pub tools: bool,
    /// Advertise `prompts` (with `listChanged`).
    pub prompts: bool,
    /// Advertise `resources` (with `subscribe` and `listChanged`).
    pub resources: bool,
    /// The application's lists change while it runs (it calls [`super::Server::list_changed`]):
    /// the `listChanged` capabilities are advertised and `subscriptions/listen` honours the
    /// list-change notifications. Off: no `listChanged`, and a server with no resources to
    /// subscribe to either has no `subscriptions/listen` at all (`-32601`).
    pub list_changed: bool,
}

impl ServerConfig {
    /// A tools-only server named `info`, both eras, loopback HTTP rules, default bounds.
    pub fn new(info: Implementation, secrets: ServerSecrets) -> Self {
        ServerConfig {
            info,
            instructions: None,
            eras: Eras::BOTH,
            secrets,
            wall_clock: None,
            http_path: "/mcp".to_owned(),
            origin_policy: OriginPolicy::default(),
            cache: CacheHints::default(),
            limits: Limits::default(),
            timeouts: Timeouts::default(),
            logging: true,
            completions: false,
            tools: true,
            prompts: false,
            resources: false,
            list_changed: true,
        }
    }

    /// Checks the configuration (what [`super::Server::new`] refuses).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.eras.modern && !self.eras.legacy {
            return Err(ConfigError::NoEra);
        }
        if !self.http_path.starts_with('/') {
            return Err(ConfigError::BadPath(self.http_path.clone()));
        }
        let l = &self.limits;
        for (name, value) in [
            ("max_body_bytes", l.max_body_bytes),
            ("max_line_bytes", l.max_line_bytes),
            (
                "max_in_flight_per_connection",
                l.max_in_flight_per_connection,
            ),
            ("max_in_flight", l.max_in_flight),
            ("max_sessions", l.max_sessions),
            ("max_pending_server_requests", l.max_pending_server_requests),
            ("max_sse_backlog", l.max_sse_backlog),
            ("max_streams", l.max_streams),
            ("page_size", l.page_size),
        ] {
            if value == 0 {
                return Err(ConfigError::ZeroLimit(name));
            }
        }
        for (name, size) in [
            ("page_sizes.tools", l.page_sizes.tools),
            ("page_sizes.prompts", l.page_sizes.prompts),
            ("page_sizes.resources", l.page_sizes.resources),
            (
                "page_sizes.resource_templates",
                l.page_sizes.resource_templates,
            ),
        ] {
            if size == Some(0) {
                return Err(ConfigError::ZeroLimit(name));
            }
        }
        if l.max_input_rounds == 0 {
            return Err(ConfigError::ZeroLimit("max_input_rounds"));
        }
        if self.timeouts.request_state_ttl.is_zero() {
            return Err(ConfigError::ZeroLimit("request_state_ttl"));
        }
        if self.info.name.is_empty() {
            return Err(ConfigError::NoName);
        }
        Ok(())
    }
}
