//! What a tunnel runs with, built from code: [`TunnelConfig`] (the engine's [`Config`], one
//! [`Target`] per channel, the stdio bindings' settings, the shutdown grace period and the
//! optional cloudflared companion). `mcpwire tunnel run` builds one from its flags and
//! environment; an embedder builds one directly.

use std::time::Duration;

use mcpwire_core::net_policy::proxy::ProxyRoute;
use mcpwire_core::net_policy::NetPolicy;
use mcpwire_core::tunnel::engine::{Config, Secret};
use mcpwire_core::tunnel::harpoon::discovery::HostFilter;
use mcpwire_core::tunnel::harpoon::HarpoonConfig;
use mcpwire_core::tunnel::StdioConfig;

pub use crate::net::tls::{parse_ca_bundle, Identity, TlsError, TunnelTls};
pub use mcpwire_core::tunnel::{Target, TargetKind};

/// Where the cloudflared companion's token comes from.
#[derive(Clone, Debug)]
pub enum CloudflaredToken {
    /// Given by the operator (`--cloudflared.token`): no control-plane fetch.
    Static(Secret),
    /// Fetched from `GET /v1/tunnels/{id}/cloudflare/runtime` at start-up.
    Managed,
}

/// The cloudflared companion's settings (present when one is to run).
#[derive(Clone, Debug)]
pub struct Cloudflared {
    /// The token's source.
    pub token: CloudflaredToken,
    /// The executable (a path, or a name looked up on `PATH`).
    pub path: String,
    /// How long it may take to report ready at start-up.
    pub ready_timeout: Duration,
    /// Environment variables named by `env:VAR` secrets, kept from the child.
    pub secret_vars: Vec<String>,
}

/// Everything a tunnel driver runs with.
#[derive(Clone, Debug)]
pub struct TunnelConfig {
    /// The engine's configuration (control plane, tunnel id, API key, limits, server info).
    pub engine: Config,
    /// One server per served channel.
    pub targets: Vec<Target>,
    /// How stdio bindings behave.
    pub stdio: StdioConfig,
    /// How long in-flight commands may take to finish once a stop is asked.
    pub grace: Duration,
    /// The cloudflared companion, when one runs.
    pub cloudflared: Option<Cloudflared>,
    /// Harpoon on the reserved `harpoon` channel, served while it has a target (its outbound
    /// requests go through the same HTTP client as the forwards).
    pub harpoon: Option<HarpoonConfig>,
    /// OAuth discovery of more Harpoon targets at start-up (`--harpoon.oauth-discovery`): the
    /// endpoints found are added to `harpoon`'s registry before the first poll. Needs
    /// `harpoon` to be set (an empty registry is fine).
    pub harpoon_discovery: Option<HarpoonDiscovery>,
    /// What TLS trusts (the system's store plus `--ca-bundle`) and the client certificates
    /// presented (mTLS), read when the driver starts.
    pub tls: TunnelTls,
    /// Which HTTP proxy the control plane's and the MCP servers' requests take.
    pub proxies: TunnelProxies,
    /// Headers added to every forward to an HTTP MCP server (`--mcp.extra-headers`); the
    /// command's own headers win. Never sent to the control plane, Harpoon's targets or stdio.
    pub mcp_extra_headers: Vec<(String, mcpwire_core::tunnel::engine::Secret)>,
    /// Headers added, over `mcp_extra_headers`, to the discovery requests to the main MCP
    /// server's origin: the start-up probe and Harpoon's OAuth discovery
    /// (`--mcp.discovery-extra-headers`).
    pub mcp_discovery_extra_headers: Vec<(String, mcpwire_core::tunnel::engine::Secret)>,
    /// `--mcp.startup-wait-timeout`: before the first poll, wait at most this long for the main
    /// channel's HTTP server to answer (`mcpwire_core::tunnel::startup_probe`); `/readyz` says
    /// why meanwhile, and stays 503 when the wait fails. `None`: no probe.
    pub startup_wait: Option<std::time::Duration>,
    /// The HTTP MCP servers reached over a Unix socket (`unix-socket=` in their
    /// `--mcp.server-url` entry), by URL: their forwards and start-up probe connect to the
    /// socket, never through a proxy; the URL names the `Host` header, the path and, for
    /// `https`, the TLS server name. Unix systems only (elsewhere the run fails to start).
    pub unix_sockets: std::collections::BTreeMap<String, std::path::PathBuf>,
}

impl TunnelConfig {
    /// What decides the MCP requests' egress.
    #[must_use]
    pub fn mcp_egress(&self) -> McpEgress {
        McpEgress {
            proxies: self.proxies.clone(),
            unix_sockets: self.unix_sockets.clone(),
        }
    }

    /// The URLs of the HTTP MCP servers whose entry sets its own transport (a Unix socket or
    /// a client certificate): each has connections of its own, never shared with another.
    #[must_use]
    pub fn own_transports(&self) -> std::collections::BTreeSet<String> {
        self.unix_sockets
            .keys()
            .chain(self.tls.mcp_servers.keys())
            .cloned()
            .collect()
    }

    /// The headers of a discovery request to the main MCP server: the discovery headers, then
    /// the extra headers they do not name (the discovery ones win).
    pub fn discovery_headers(&self) -> Vec<(String, mcpwire_core::tunnel::engine::Secret)> {
        let mut all = self.mcp_discovery_extra_headers.clone();
        for (name, value) in &self.mcp_extra_headers {
            if !all.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                all.push((name.clone(), value.clone()));
            }
        }
        all
    }
}

/// How a request to an MCP server leaves this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Straight to the host its URL names.
    Direct,
    /// Through this HTTP proxy.
    Proxy(mcpwire_core::net_policy::proxy::ProxyUrl),
    /// To this Unix socket.
    Unix(std::path::PathBuf),
}

/// What decides each MCP request's [`Egress`]: the servers' Unix sockets and the proxies.
#[derive(Clone, Debug, Default)]
pub struct McpEgress {
    /// The proxies.
    pub proxies: TunnelProxies,
    /// The Unix sockets, by server URL ([`TunnelConfig::unix_sockets`]).
    pub unix_sockets: std::collections::BTreeMap<String, std::path::PathBuf>,
}

impl McpEgress {
    /// The egress of a request to `url`: its server's Unix socket (never proxied, as in the
    /// Go client), else its proxy ([`TunnelProxies::for_mcp`]), else direct.
    #[must_use]
    pub fn of(&self, url: &str) -> Egress {
        if let Some(path) = self.unix_sockets.get(url) {
            return Egress::Unix(path.clone());
        }
        match self.proxies.for_mcp(url) {
            Some(p) => Egress::Proxy(p.clone()),
            None => Egress::Direct,
        }
    }

    /// Whether the server at `url` gets connections of its own: a Unix socket, or a client
    /// certificate of its own in `tls`.
    #[must_use]
    pub fn is_own(&self, tls: &TunnelTls, url: &str) -> bool {
        self.unix_sockets.contains_key(url) || tls.mcp_servers.contains_key(url)
    }
}

/// The proxy of each route (Harpoon's calls and discovery take the MCP servers' route).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TunnelProxies {
    /// Polls, response POSTs, the start-up metadata and cloudflared's token fetch.
    pub control_plane: ProxyRoute,
    /// Forwards to MCP servers, Harpoon's calls and its OAuth discovery.
    pub mcp: ProxyRoute,
    /// A server's own proxy (`http-proxy=` in its `--mcp.server-url` entry), by its URL: its
    /// forwards take it instead of `mcp`.
    pub servers: std::collections::BTreeMap<String, mcpwire_core::net_policy::proxy::ProxyUrl>,
}

impl TunnelProxies {
    /// The proxy of a request to an MCP server (or Harpoon's) at `url`: the server's own, else
    /// the MCP route's.
    pub fn for_mcp(&self, url: &str) -> Option<&mcpwire_core::net_policy::proxy::ProxyUrl> {
        self.servers.get(url).or_else(|| self.mcp.for_url(url))
    }

    /// The route of everything done on behalf of the server at `url` (its OAuth discovery,
    /// whatever the documents' hosts): the server's own proxy, else the MCP route.
    pub fn route_of(&self, url: &str) -> ProxyRoute {
        match self.servers.get(url) {
            Some(p) => ProxyRoute::Explicit(p.clone()),
            None => self.mcp.clone(),
        }
    }
}

/// What OAuth discovery of Harpoon targets reads and keeps.
#[derive(Clone, Debug)]
pub struct HarpoonDiscovery {
    /// The main MCP server's URL: its Protected Resource Metadata and its authorization
    /// servers' metadata are read.
    pub server_url: String,
    /// Which endpoint hosts become targets.
    pub filter: HostFilter,
    /// The URL policy the documents' URLs are fetched under (link-local addresses and cloud
    /// metadata services are refused under every policy).
    pub policy: NetPolicy,
}
