//! `mcpwire tunnel run` flags and environment variables, compatible with the Go tunnel-client.
//!
//! Every setting resolves the same way: the flag when given, else its environment variable,
//! else the default. A bad value stops start-up with one line that names the flag (and the
//! variable it came from) and says what is allowed; a secret's value is never repeated.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use mcpwire_core::tunnel::engine::{Config, Secret};
use mcpwire_core::tunnel::server_info::{
    is_canonical_channel_name, ChannelBinding, ChannelDeclaration, ServerInfo,
};
use mcpwire_core::tunnel::wire::DEFAULT_CHANNEL;
use mcpwire_core::tunnel::StdioConfig;

use mcpwire::tunnel::log::Level;
use mcpwire::tunnel::{
    parse_ca_bundle, Cloudflared, CloudflaredToken, HarpoonDiscovery, Identity, Target, TargetKind,
    TunnelConfig, TunnelProxies, TunnelTls,
};
use mcpwire_core::net_policy::proxy::{ProxyRoute, ProxyUrl};
use mcpwire_core::net_policy::NetPolicy;
use mcpwire_core::tunnel::harpoon::discovery::{host_pattern, HostFilter};
use mcpwire_core::tunnel::harpoon::{HarpoonConfig, Registry, TargetSpec};
use mcpwire_core::tunnel::HARPOON_CHANNEL;

use super::config_file::{self, FileLayer, SourceFlags};
use super::go_compat::{self, GoOnlyFlags};

/// The flags of `mcpwire tunnel run` (each also read from the environment variable named in
/// its help; flags beat the environment, which beats the default).
#[derive(Args, Debug, Default, Clone)]
pub struct RunArgs {
    /// The Go tunnel-client's YAML config file (config_version: 1); flags and the environment
    /// beat its values [env: TUNNEL_CLIENT_CONFIG]
    #[arg(long = "config", value_name = "PATH")]
    pub config: Option<String>,
    /// A profile: the file NAME.yaml in the profile directory [env: TUNNEL_CLIENT_PROFILE]
    #[arg(long = "profile", value_name = "NAME")]
    pub profile: Option<String>,
    /// A profile file by path (its name ends with .yaml) [env: TUNNEL_CLIENT_PROFILE_FILE]
    #[arg(long = "profile-file", value_name = "PATH")]
    pub profile_file: Option<String>,
    /// The directory of profiles [env: TUNNEL_CLIENT_PROFILE_DIR] [default:
    /// $XDG_CONFIG_HOME/tunnel-client, else ~/.config/tunnel-client]
    #[arg(long = "profile-dir", value_name = "DIR")]
    pub profile_dir: Option<String>,
    /// Control-plane base URL [env: CONTROL_PLANE_BASE_URL] [default: https://api.openai.com;
    /// https://mtls.api.openai.com with --control-plane.client-cert]
    #[arg(
        long = "control-plane.base-url",
        alias = "control-plane-base-url",
        value_name = "URL"
    )]
    pub base_url: Option<String>,
    /// A path put between the base URL and the /v1/... routes, e.g. /tunnel-gw
    /// [env: CONTROL_PLANE_URL_PATH]
    #[arg(
        long = "control-plane.url-path",
        alias = "control-plane-url-path",
        value_name = "PATH"
    )]
    pub url_path: Option<String>,
    /// Tunnel id [env: CONTROL_PLANE_TUNNEL_ID]
    #[arg(
        long = "control-plane.tunnel-id",
        alias = "control-plane-tunnel-id",
        value_name = "ID"
    )]
    pub tunnel_id: Option<String>,
    /// Organization id, sent as OpenAI-Organization on control-plane requests
    /// [env: CONTROL_PLANE_ORGANIZATION_ID]
    #[arg(
        long = "control-plane.organization-id",
        alias = "control-plane-organization-id",
        value_name = "ID"
    )]
    pub organization_id: Option<String>,
    /// Tunnel API key: the key, env:VAR or file:PATH [env: CONTROL_PLANE_API_KEY, then OPENAI_API_KEY]
    #[arg(
        long = "control-plane.api-key",
        alias = "control-plane-api-key",
        value_name = "KEY"
    )]
    pub api_key: Option<String>,
    /// Control-plane mTLS: the client certificate (PEM; a path, env:VAR holding a path, or
    /// file:PATH) [env: CONTROL_PLANE_CLIENT_CERT]
    #[arg(
        long = "control-plane.client-cert",
        alias = "control-plane-client-cert",
        value_name = "PATH"
    )]
    pub cp_client_cert: Option<String>,
    /// Control-plane mTLS: the client certificate's private key (PEM)
    /// [env: CONTROL_PLANE_CLIENT_KEY]
    #[arg(
        long = "control-plane.client-key",
        alias = "control-plane-client-key",
        value_name = "PATH"
    )]
    pub cp_client_key: Option<String>,
    /// CA certificates (a PEM bundle) trusted besides the system's trust store, for the
    /// control plane, MCP servers, Harpoon and cloudflared's token fetch [env: CA_BUNDLE]
    #[arg(long = "ca-bundle", value_name = "PATH")]
    pub ca_bundle: Option<String>,
    /// An HTTP proxy for every connection (control plane, MCP servers, Harpoon): a URL such as
    /// http://user:pass@proxy:3128 or env:VAR [env: TUNNEL_CLIENT_HTTP_PROXY] [default: the
    /// environment's HTTPS_PROXY/HTTP_PROXY, except NO_PROXY hosts and loopback]
    #[arg(long = "http-proxy", value_name = "URL")]
    pub http_proxy: Option<String>,
    /// An HTTP proxy for the control plane (beats --http-proxy)
    /// [env: CONTROL_PLANE_HTTP_PROXY]
    #[arg(long = "control-plane.http-proxy", value_name = "URL")]
    pub cp_http_proxy: Option<String>,
    /// A header on every control-plane request, "Name: value" (repeatable; the value may be
    /// env:VAR or file:PATH) [env: CONTROL_PLANE_EXTRA_HEADERS, separated by ',' or ';']
    #[arg(long = "control-plane.extra-headers", value_name = "HEADER")]
    pub extra_headers: Vec<String>,
    /// A header on every request forwarded to an HTTP MCP server, "Name: value" (repeatable;
    /// the value may be env:VAR or file:PATH; a command's own header of that name wins)
    /// [env: MCP_EXTRA_HEADERS, separated by ',' or ';']
    #[arg(
        long = "mcp.extra-headers",
        alias = "mcp-extra-headers",
        value_name = "HEADER"
    )]
    pub mcp_extra_headers: Vec<String>,
    /// A header on the discovery requests to the main MCP server only (the start-up probe,
    /// Harpoon's OAuth discovery), over --mcp.extra-headers; "Name: value", repeatable, the value
    /// may be env:VAR or file:PATH [env: MCP_DISCOVERY_EXTRA_HEADERS, separated by ',' or ';']
    #[arg(
        long = "mcp.discovery-extra-headers",
        alias = "mcp-discovery-extra-headers",
        value_name = "HEADER"
    )]
    pub mcp_discovery_extra_headers: Vec<String>,
    /// Commands admitted and not finished, at most [env: CONTROL_PLANE_MAX_INFLIGHT_REQUESTS] [default: 20]
    #[arg(long = "control-plane.max-inflight", value_name = "N")]
    pub max_inflight: Option<String>,
    /// Requested long-poll wait, e.g. 30s [env: CONTROL_PLANE_POLL_TIMEOUT] [default: 30s]
    #[arg(long = "control-plane.poll-timeout", value_name = "DURATION")]
    pub poll_timeout: Option<String>,
    /// A channel to drain (repeatable) [env: CONTROL_PLANE_POLL_CHANNELS, comma-separated]
    #[arg(long = "control-plane.poll-channel", value_name = "NAME")]
    pub poll_channels: Vec<String>,
    /// Streamable HTTP MCP server: URL (channel main) or channel=NAME,url=URL, optionally with
    /// http-proxy=URL, unix-socket=PATH, client-cert=PATH,client-key=PATH (repeatable)
    /// [env: MCP_SERVER_URL, one entry per line]
    #[arg(
        long = "mcp.server-url",
        alias = "mcp-server-url",
        value_name = "ENTRY"
    )]
    pub server_urls: Vec<String>,
    /// stdio MCP server: CMD (channel main) or channel=NAME,command=CMD (repeatable)
    /// [env: MCP_COMMAND, one entry per line]
    #[arg(long = "mcp.command", alias = "mcp-command", value_name = "ENTRY")]
    pub commands: Vec<String>,
    /// An HTTP proxy for MCP servers and Harpoon's targets (beats --http-proxy)
    /// [env: MCP_HTTP_PROXY]
    #[arg(long = "mcp.http-proxy", value_name = "URL")]
    pub mcp_http_proxy: Option<String>,
    /// MCP mTLS: the client certificate presented to MCP servers (PEM; a path, env:VAR holding
    /// a path, or file:PATH) [env: MCP_CLIENT_CERT]
    #[arg(long = "mcp.client-cert", value_name = "PATH")]
    pub mcp_client_cert: Option<String>,
    /// MCP mTLS: the client certificate's private key (PEM) [env: MCP_CLIENT_KEY]
    #[arg(long = "mcp.client-key", value_name = "PATH")]
    pub mcp_client_key: Option<String>,
    /// Forwards running at once, at most [env: MCP_MAX_CONCURRENT_REQUESTS] [default: 10]
    #[arg(long = "mcp.max-concurrent-requests", value_name = "N")]
    pub max_concurrent: Option<String>,
    /// Once an MCP server's response has started, the most time it may take to finish (then
    /// the forward is cancelled and a timeout failure posted), e.g. 10m
    /// [env: MCP_CONNECTION_MAX_TTL] [default: 10m]
    #[arg(
        long = "mcp.connection-max-ttl",
        alias = "mcp-connection-max-ttl",
        value_name = "DURATION"
    )]
    pub connection_max_ttl: Option<String>,
    /// Before the first poll, wait at most this long for the main channel's HTTP MCP server to
    /// answer (a start-up probe; /readyz says "mcp startup probe pending" meanwhile and stays
    /// 503 if the wait fails; polling starts either way), e.g. 30s; 0 does not wait
    /// [env: MCP_STARTUP_WAIT_TIMEOUT] [default: 0]
    #[arg(
        long = "mcp.startup-wait-timeout",
        alias = "mcp-startup-wait-timeout",
        value_name = "DURATION"
    )]
    pub startup_wait_timeout: Option<String>,
    /// Write notifications/initialized to stdio servers after initialize succeeds
    /// [env: MCP_STDIO_SEND_INITIALIZED_NOTIFICATION]
    #[arg(long = "mcp.stdio-send-initialized-notification", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub send_initialized: Option<String>,
    /// Health listener address [env: HEALTH_LISTEN_ADDR] [default: 127.0.0.1:8080]
    #[arg(
        long = "health.listen-addr",
        alias = "health-listen-addr",
        value_name = "ADDR"
    )]
    pub health_addr: Option<String>,
    /// Write the health listener's base URL (http://IP:PORT) to this file once it listens
    /// (useful with port 0) [env: HEALTH_URL_FILE]
    #[arg(
        long = "health.url-file",
        alias = "health-url-file",
        value_name = "PATH"
    )]
    pub health_url_file: Option<String>,
    /// Serve the health listener on this Unix socket instead of --health.listen-addr (a stale
    /// socket is replaced; removed at exit; the URL file then says http+unix://...)
    /// [env: HEALTH_UNIX_SOCKET]
    #[arg(
        long = "health.unix-socket",
        alias = "health-unix-socket",
        value_name = "PATH"
    )]
    pub health_unix_socket: Option<String>,
    /// Turn off the admin UI (the operator's page at / on the health listener)
    /// [env: ADMIN_UI_DISABLE]
    #[arg(long = "admin-ui.disable", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub admin_ui_disable: Option<String>,
    /// Serve the admin UI to other hosts too (by default only to loopback peers, with a
    /// loopback Host) [env: ALLOW_REMOTE_UI]
    #[arg(long = "admin-ui.allow-remote", alias = "allow-remote-ui", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub admin_ui_allow_remote: Option<String>,
    /// With --admin-ui.allow-remote: a host name remote pages may use to reach the admin UI
    /// (IP addresses and loopback names always may; repeatable) [env: ADMIN_UI_ALLOWED_HOSTS,
    /// comma-separated]
    #[arg(long = "admin-ui.allowed-host", value_name = "NAME")]
    pub admin_ui_allowed_hosts: Vec<String>,
    /// Log lines the admin UI keeps for its log panel and diagnostic bundle (at most 100000)
    /// [env: ADMIN_UI_LOG_BUFFER_EVENTS] [default: 2000]
    #[arg(long = "admin-ui.log-buffer-events", value_name = "N")]
    pub admin_ui_log_buffer_events: Option<String>,
    /// Show Harpoon targets' URLs in the admin UI (hidden by default: labels, descriptions
    /// and tags only) [env: ADMIN_UI_SHOW_HARPOON_URLS]
    #[arg(long = "admin-ui.show-harpoon-urls", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub admin_ui_show_harpoon_urls: Option<String>,
    /// Write this process's id to this file at start-up (removed at a clean exit)
    /// [env: PID_FILE]
    #[arg(long = "pid.file", value_name = "PATH")]
    pub pid_file: Option<String>,
    /// Append log lines to this file instead of standard error [env: LOG_FILE]
    #[arg(long = "log.file", value_name = "PATH")]
    pub log_file: Option<String>,
    /// debug, info, warn or error [env: LOG_LEVEL] [default: info]
    #[arg(long = "log.level", value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// text or json [env: LOG_FORMAT] [default: text]
    #[arg(long = "log.format", value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// How long in-flight commands may take to finish after SIGINT/SIGTERM
    /// [env: SHUTDOWN_GRACE_PERIOD] [default: 10s]
    #[arg(long = "shutdown.grace-period", value_name = "DURATION")]
    pub grace: Option<String>,
    /// blocking or smol [env: MCPWIRE_DRIVER] [default: blocking]
    #[arg(long = "driver", value_name = "DRIVER")]
    pub driver: Option<String>,
    /// Run the cloudflared companion with a token fetched from the control plane
    /// [env: CLOUDFLARED_MANAGED] [default: false]
    #[arg(long = "cloudflared.managed", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub cloudflared_managed: Option<String>,
    /// Static cloudflared tunnel token: the token, env:VAR or file:PATH; runs the companion
    /// without the control-plane fetch [env: CLOUDFLARED_TUNNEL_TOKEN]
    #[arg(long = "cloudflared.token", value_name = "TOKEN")]
    pub cloudflared_token: Option<String>,
    /// The cloudflared executable [env: CLOUDFLARED_PATH] [default: cloudflared on PATH]
    #[arg(long = "cloudflared.path", value_name = "PATH")]
    pub cloudflared_path: Option<String>,
    /// How long cloudflared may take to report ready at start-up
    /// [env: CLOUDFLARED_READY_TIMEOUT] [default: 30s]
    #[arg(long = "cloudflared.ready-timeout", value_name = "DURATION")]
    pub cloudflared_ready_timeout: Option<String>,
    /// A Harpoon target: label=NAME,url=URL,desc=TEXT (repeatable; a value in double quotes
    /// may hold commas) [env: HARPOON_TARGETS, entries separated by ';' or newlines]
    #[arg(long = "harpoon.target", value_name = "ENTRY")]
    pub harpoon_targets: Vec<String>,
    /// Allow http:// Harpoon targets (and redirects to them) [env: HARPOON_ALLOW_PLAINTEXT_HTTP]
    /// [default: false]
    #[arg(long = "harpoon.allow-plaintext-http", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub harpoon_allow_plaintext: Option<String>,
    /// The most bytes a call_target answer may have; a call's max_response_bytes is capped by
    /// it [env: HARPOON_MAX_RESPONSE_BYTES] [default: 102400]
    #[arg(long = "harpoon.max-response-bytes", value_name = "BYTES")]
    pub harpoon_max_response_bytes: Option<String>,
    /// The most redirects a call_target follows, 1 to 20; a call's max_redirects defaults to it
    /// and may not exceed it [env: HARPOON_MAX_REDIRECTS] [default: 5]
    #[arg(
        long = "harpoon.max-redirects",
        alias = "harpoon-max-redirects",
        value_name = "N"
    )]
    pub harpoon_max_redirects: Option<String>,
    /// Register the main MCP server's OAuth endpoints (token, registration, revocation,
    /// introspection, JWKS, issuer) as Harpoon targets at start-up [env: HARPOON_OAUTH_DISCOVERY]
    /// [default: true when channel main is a Streamable HTTP server]
    #[arg(long = "harpoon.oauth-discovery", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub harpoon_oauth_discovery: Option<String>,
    /// OAuth discovery registers endpoints on loopback hosts [env: HARPOON_HOSTS_INCLUDE_LOOPBACK]
    /// [default: true]
    #[arg(long = "harpoon.hosts-include-loopback", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub harpoon_include_loopback: Option<String>,
    /// OAuth discovery registers endpoints on private networks [env: HARPOON_HOSTS_INCLUDE_PRIVATE]
    /// [default: true]
    #[arg(long = "harpoon.hosts-include-private", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub harpoon_include_private: Option<String>,
    /// OAuth discovery registers endpoints on hosts with this name suffix, e.g. corp.example
    /// (repeatable) [env: HARPOON_HOSTS_INCLUDE_SUFFIX, separated by ';' or newlines]
    #[arg(long = "harpoon.hosts-include-suffix", value_name = "SUFFIX")]
    pub harpoon_include_suffixes: Vec<String>,
    /// OAuth discovery registers endpoints on hosts whose whole name matches this regular
    /// expression, ignoring case (repeatable) [env: HARPOON_HOSTS_INCLUDE_REGEX, separated by
    /// ';' or newlines]
    #[arg(long = "harpoon.hosts-include-regex", value_name = "REGEX")]
    pub harpoon_include_patterns: Vec<String>,
    /// The Go client's flags mcpwire does not implement: refused by name.
    #[command(flatten)]
    pub go_only: GoOnlyFlags,
}

impl RunArgs {
    /// The flags that choose the config file.
    #[must_use]
    pub fn source_flags(&self) -> SourceFlags<'_> {
        SourceFlags {
            config: self.config.as_deref(),
            profile: self.profile.as_deref(),
            profile_file: self.profile_file.as_deref(),
            profile_dir: self.profile_dir.as_deref(),
        }
    }
}

/// Which driver runs the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// ureq, std threads, `std::process`.
    Blocking,
    /// smol tasks, hyper 1 on smol sockets, async-process (feature `smol`).
    Smol,
}

/// Everything `tunnel run` needs, resolved and checked: the tunnel's own configuration and the
/// settings only the command has (where health is served, how logs look, which driver runs).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// What the tunnel driver runs with.
    pub tunnel: TunnelConfig,
    /// The health listener's address.
    pub health_addr: SocketAddr,
    /// The log level.
    pub log_level: Level,
    /// JSON logs instead of text.
    pub log_json: bool,
    /// The driver.
    pub driver: Driver,
    /// Where to write the health listener's base URL.
    pub health_url_file: Option<String>,
    /// The health listener's Unix socket (`--health.unix-socket`), which replaces `health_addr`.
    pub health_unix_socket: Option<String>,
    /// Where to write the process id.
    pub pid_file: Option<String>,
    /// Where to append log lines (standard error when `None`).
    pub log_file: Option<String>,
    /// The config file read, if any.
    pub config_source: Option<config_file::ConfigSource>,
    /// One line each: settings recognised but ignored, a tunnel id not in the Go client's form.
    pub warnings: Vec<String>,
    /// Secret values besides the API key that logs must never show (extra header values).
    pub secrets: Secrets,
    /// Where the API key came from (a flag, a variable or the config file's key), never the key.
    pub api_key_origin: String,
    /// The admin UI's settings (`None`: turned off).
    pub admin_ui: Option<AdminUiSettings>,
}

/// How the admin UI is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminUiSettings {
    /// Other hosts may reach it (`--admin-ui.allow-remote`).
    pub allow_remote: bool,
    /// Log lines kept (`--admin-ui.log-buffer-events`).
    pub log_lines: usize,
    /// Harpoon targets' URLs are shown.
    pub show_harpoon_urls: bool,
    /// Host names remote pages may use (`--admin-ui.allowed-host`).
    pub allowed_hosts: Vec<String>,
}

/// Secret values (header values, proxy passwords) for the log redactor; `Debug` shows only how
/// many there are.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(pub Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} redacted)", self.0.len())
    }
}

/// The control plane `tunnel run` talks to by default (the Go client's).
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com";
/// The default control plane when a control-plane client certificate is given (the Go
/// client's mTLS host).
pub const DEFAULT_MTLS_BASE_URL: &str = "https://mtls.api.openai.com";

/// A setting that cannot be used. Its `Display` is the one line printed at start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// A raw value and where it came from, for messages.
struct Raw {
    value: String,
    origin: String,
}

/// Where settings come from below the flags: the process environment, then the config file
/// (an empty layer without one).
pub struct Sources<'a> {
    /// The process environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The config file's values, by the variable each key stands for.
    pub file: &'a FileLayer,
}

impl Sources<'_> {
    /// Variable `var` (set and not empty), else the file's key for it.
    fn var(&self, flag: &str, var: &str) -> Option<Raw> {
        if let Some(v) = (self.env)(var).filter(|v| !v.is_empty()) {
            return Some(Raw {
                value: v,
                origin: format!("--{flag} (from {var})"),
            });
        }
        self.file.get(var).map(|fv| Raw {
            value: fv.items.join(","),
            origin: self.file.origin(fv),
        })
    }

    /// A list: variable `var` split by `split`, else the file's items for it.
    fn items(
        &self,
        flag: &str,
        var: &str,
        split: &dyn Fn(&str) -> Vec<String>,
    ) -> Option<(Vec<String>, String)> {
        if let Some(v) = (self.env)(var).filter(|v| !v.trim().is_empty()) {
            return Some((split(&v), format!("--{flag} (from {var})")));
        }
        self.file
            .get(var)
            .map(|fv| (fv.items.clone(), self.file.origin(fv)))
    }
}

fn pick(flag: &str, given: Option<&String>, env_var: &str, src: &Sources<'_>) -> Option<Raw> {
    if let Some(v) = given {
        return Some(Raw {
            value: v.clone(),
            origin: format!("--{flag}"),
        });
    }
    src.var(flag, env_var)
}

fn split_lines(v: &str) -> Vec<String> {
    v.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn split_entries(v: &str) -> Vec<String> {
    v.split([';', '\n'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `text` with the user information of every URL in it (`scheme://user:password@`) replaced
/// by `***@`: a value quoted in an error may hold a proxy's credentials.
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == ',' || c == '"' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = tail.get(..end).unwrap_or("");
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***");
                out.push_str(authority.get(at..).unwrap_or(""));
            }
            None => out.push_str(authority),
        }
        rest = tail.get(end..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

fn bad(origin: &str, value: &str, allowed: &str) -> ConfigError {
    let shown: String = redact_userinfo(value).chars().take(80).collect();
    ConfigError(format!("invalid {origin} {shown:?}: {allowed}"))
}

fn number(raw: Option<Raw>, default: usize, max: usize) -> Result<usize, ConfigError> {
    let Some(raw) = raw else { return Ok(default) };
    match raw.value.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(bad(
            &raw.origin,
            &raw.value,
            &format!("expected a whole number from 1 to {max}"),
        )),
    }
}

fn duration(raw: Option<Raw>, default: Duration) -> Result<Duration, ConfigError> {
    let Some(raw) = raw else { return Ok(default) };
    parse_duration(raw.value.trim()).ok_or_else(|| {
        bad(
            &raw.origin,
            &raw.value,
            "expected a duration such as 500ms, 30s, 2m or 1m30s (units ns, us, ms, s, m, h)",
        )
    })
}

fn boolean(raw: Option<Raw>) -> Result<bool, ConfigError> {
    let Some(raw) = raw else { return Ok(false) };
    match raw.value.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "yes" | "on" => Ok(true),
        "0" | "f" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(&raw.origin, &raw.value, "expected true or false")),
    }
}

/// A Go-style duration: one or more `<number><unit>` (`1m30s`, `1.5s`, `250ms`).
pub fn parse_duration(s: &str) -> Option<Duration> {
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// Splits a command line into argv: whitespace separates words; single quotes keep text as is;
/// double quotes keep text but allow `\` escapes; a backslash outside quotes escapes the next
/// character. No shell is involved.
pub fn parse_argv(raw: &str) -> Result<Vec<String>, &'static str> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let (mut single, mut double, mut escaped) = (false, false, false);
    for ch in raw.trim().chars() {
        if escaped {
            cur.push(ch);
            escaped = false;
        } else if single {
            if ch == '\'' {
                single = false;
            } else {
                cur.push(ch);
            }
        } else if double {
            match ch {
                '\\' => escaped = true,
                '"' => double = false,
                _ => cur.push(ch),
            }
        } else {
            match ch {
                '\\' => {
                    escaped = true;
                    in_word = true;
                }
                '\'' => {
                    single = true;
                    in_word = true;
                }
                '"' => {
                    double = true;
                    in_word = true;
                }
                c if c.is_whitespace() => {
                    if in_word {
                        args.push(std::mem::take(&mut cur));
                        in_word = false;
                    }
                }
                c => {
                    cur.push(c);
                    in_word = true;
                }
            }
        }
    }
    if escaped {
        return Err("it ends with an unfinished escape");
    }
    if single || double {
        return Err("it has an unterminated quote");
    }
    if in_word {
        args.push(cur);
    }
    if args.is_empty() {
        return Err("the command is empty");
    }
    Ok(args)
}

fn check_channel(origin: &str, name: &str) -> Result<(), ConfigError> {
    if name == HARPOON_CHANNEL {
        return Err(bad(
            origin,
            name,
            "the channel harpoon is reserved for the built-in Harpoon server (--harpoon.target)",
        ));
    }
    if is_canonical_channel_name(name) {
        Ok(())
    } else {
        Err(bad(
            origin,
            name,
            "expected a channel name of lowercase letters, digits, '-' or '_'",
        ))
    }
}

fn http_url(origin: &str, url: &str) -> Result<String, ConfigError> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !url.contains(char::is_whitespace) => {
            Ok(url.to_owned())
        }
        _ => Err(bad(
            origin,
            url,
            "expected an http:// or https:// URL with a host",
        )),
    }
}

/// The keys of a qualified `--mcp.server-url` entry (the Go client's).
const SERVER_ENTRY_KEYS: [&str; 6] = [
    "channel",
    "url",
    "http-proxy",
    "unix-socket",
    "client-cert",
    "client-key",
];

/// What one `--mcp.server-url` entry says about reaching its server, raw
/// (a value, `env:VAR` or, for paths, `file:PATH`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct ServerEntry {
    /// `http-proxy=`: this server's own proxy.
    proxy: Option<String>,
    /// `unix-socket=`: the server listens on this Unix socket.
    unix_socket: Option<String>,
    /// `client-cert=`/`client-key=`: this server's own client certificate and key.
    identity: Option<(String, String)>,
}

/// The tunnel gives a server's own transport (socket, proxy, certificate) to its URL, so two
/// entries that name one URL must agree on them: otherwise one channel would silently be
/// reached the other's way.
fn same_url_same_options(
    origin: &str,
    entries: &[(String, String, ServerEntry)],
) -> Result<(), ConfigError> {
    for (i, (url, channel, options)) in entries.iter().enumerate() {
        let clash = entries[..i]
            .iter()
            .find(|(u, _, o)| u == url && o != options);
        if let Some((_, first, _)) = clash {
            let url = redact_userinfo(url);
            return Err(ConfigError(format!(
                "invalid {origin}: channels {first} and {channel} both name {url} but with \
                 different unix-socket=, client-cert=/client-key= or http-proxy=; give each \
                 its own URL (e.g. http://{first}.localhost/mcp and \
                 http://{channel}.localhost/mcp for two Unix sockets)"
            )));
        }
    }
    Ok(())
}

/// Parses one `--mcp.server-url` entry: a URL, or `key=value` pairs (`channel`, `url`,
/// `http-proxy`, `unix-socket`, `client-cert` and `client-key`, as in the Go client).
fn server_entry(origin: &str, entry: &str) -> Result<(Target, ServerEntry), ConfigError> {
    let entry = entry.trim();
    let qualified = SERVER_ENTRY_KEYS
        .iter()
        .any(|k| entry.starts_with(&format!("{k}=")));
    if !qualified {
        let target = Target {
            channel: DEFAULT_CHANNEL.to_owned(),
            kind: TargetKind::Http {
                url: http_url(origin, entry)?,
            },
        };
        return Ok((target, ServerEntry::default()));
    }
    let (mut channel, mut url) = (None, None);
    let mut found = ServerEntry::default();
    let (mut cert, mut key) = (None, None);
    for part in entry.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let slot =
            match part.split_once('=') {
                Some(("channel", v)) if !v.trim().is_empty() => &mut channel,
                Some(("url", v)) if !v.trim().is_empty() => &mut url,
                Some(("http-proxy", v)) if !v.trim().is_empty() => &mut found.proxy,
                Some(("unix-socket", v)) if !v.trim().is_empty() => &mut found.unix_socket,
                Some(("client-cert", v)) if !v.trim().is_empty() => &mut cert,
                Some(("client-key", v)) if !v.trim().is_empty() => &mut key,
                _ => return Err(bad(
                    origin,
                    entry,
                    "expected a URL or key=value pairs (channel, url, http-proxy, unix-socket, \
                     client-cert, client-key)",
                )),
            };
        *slot = part.split_once('=').map(|(_, v)| v.trim().to_owned());
    }
    let url = url.ok_or_else(|| bad(origin, entry, "the entry has no url=URL"))?;
    let channel = channel.unwrap_or_else(|| DEFAULT_CHANNEL.to_owned());
    check_channel(origin, &channel)?;
    // The Go client's rules: a socket is never reached through a proxy, and a certificate
    // goes with its key.
    if found.unix_socket.is_some() && found.proxy.is_some() {
        return Err(bad(
            origin,
            entry,
            "unix-socket= cannot be combined with http-proxy= (a Unix socket is never proxied)",
        ));
    }
    found.identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(_), None) => return Err(bad(origin, entry, "client-cert= needs client-key=")),
        (None, Some(_)) => return Err(bad(origin, entry, "client-key= needs client-cert=")),
    };
    #[cfg(not(unix))]
    if found.unix_socket.is_some() {
        return Err(bad(origin, entry, "Unix sockets need a Unix system"));
    }
    let target = Target {
        channel,
        kind: TargetKind::Http {
            url: http_url(origin, &url)?,
        },
    };
    Ok((target, found))
}

/// Parses one `--mcp.command` entry: a command, `channel=NAME,command=CMD`, or
/// `command=CMD,channel=NAME` (the command itself may contain commas).
fn command_entry(origin: &str, entry: &str) -> Result<Target, ConfigError> {
    let entry = entry.trim();
    let (channel, command) = if let Some(rest) = entry.strip_prefix("channel=") {
        let (name, cmd) = rest
            .split_once(',')
            .ok_or_else(|| bad(origin, entry, "expected channel=NAME,command=CMD"))?;
        let cmd = cmd
            .trim()
            .strip_prefix("command=")
            .ok_or_else(|| bad(origin, entry, "expected channel=NAME,command=CMD"))?;
        (name.trim().to_owned(), cmd.trim().to_owned())
    } else if let Some(rest) = entry.strip_prefix("command=") {
        match rest.rfind(",channel=") {
            Some(i) => (
                rest.get(i + ",channel=".len()..)
                    .unwrap_or("")
                    .trim()
                    .to_owned(),
                rest.get(..i).unwrap_or("").trim().to_owned(),
            ),
            None => (DEFAULT_CHANNEL.to_owned(), rest.trim().to_owned()),
        }
    } else {
        (DEFAULT_CHANNEL.to_owned(), entry.to_owned())
    };
    check_channel(origin, &channel)?;
    let argv = parse_argv(&command).map_err(|why| {
        ConfigError(format!(
            "invalid {origin}: the command cannot be split into words: {why}"
        ))
    })?;
    Ok(Target {
        channel,
        kind: TargetKind::Stdio { argv },
    })
}

fn entries(
    flag: &str,
    given: &[String],
    env_var: &str,
    src: &Sources<'_>,
) -> (Vec<String>, String) {
    if !given.is_empty() {
        return (given.to_vec(), format!("--{flag}"));
    }
    src.items(flag, env_var, &split_lines)
        .unwrap_or_else(|| (Vec::new(), format!("--{flag} (from {env_var})")))
}

fn api_key(
    given: Option<&String>,
    src: &Sources<'_>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<Secret, ConfigError> {
    let missing = || {
        ConfigError(
            "missing --control-plane.api-key: give the key, env:VAR or file:PATH \
             (or set CONTROL_PLANE_API_KEY)"
                .to_owned(),
        )
    };
    let env = src.env;
    let (raw, origin) = match api_key_ref(given, src) {
        Some(found) => found,
        None => return Err(missing()),
    };
    let key = if let Some(var) = strip_ref(&raw, "env:") {
        env(var).filter(|v| !v.is_empty()).ok_or_else(|| {
            ConfigError(format!(
                "invalid {origin}: environment variable {var:?} is not set or empty"
            ))
        })?
    } else if let Some(path) = strip_ref(&raw, "file:") {
        let text = read_file(path).map_err(|e| {
            ConfigError(format!("invalid {origin}: cannot read file {path:?}: {e}"))
        })?;
        text.trim().to_owned()
    } else {
        raw.trim().to_owned()
    };
    if key.is_empty() {
        return Err(ConfigError(format!(
            "invalid {origin}: the API key is empty"
        )));
    }
    go_compat::check_api_key(&origin, &key)?;
    Ok(Secret::new(key))
}

/// The API key's raw setting (the key or a reference) and where it came from: the flag, then
/// `CONTROL_PLANE_API_KEY`, then `OPENAI_API_KEY`, then the file's `control_plane.api_key`.
fn api_key_ref(given: Option<&String>, src: &Sources<'_>) -> Option<(String, String)> {
    if let Some(v) = given {
        return Some((v.clone(), "--control-plane.api-key".to_owned()));
    }
    // The Go client's order: the file's `control_plane.api_key` stands for
    // CONTROL_PLANE_API_KEY, which comes before OPENAI_API_KEY.
    if let Some(v) = (src.env)("CONTROL_PLANE_API_KEY").filter(|v| !v.is_empty()) {
        return Some((v, "CONTROL_PLANE_API_KEY".to_owned()));
    }
    if let Some(fv) = src.file.get("CONTROL_PLANE_API_KEY") {
        return Some((fv.items.join(","), src.file.origin(fv)));
    }
    (src.env)("OPENAI_API_KEY")
        .filter(|v| !v.is_empty())
        .map(|v| (v, "OPENAI_API_KEY".to_owned()))
}

/// `raw` without `prefix`, compared ignoring case (`ENV:` and `File:` work, as in the Go
/// client).
fn strip_ref<'a>(raw: &'a str, prefix: &str) -> Option<&'a str> {
    let head = raw.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| raw.get(prefix.len()..))
        .flatten()
}

/// Reads a secret given as the value itself, `env:VAR` or `file:PATH`; the value is never
/// repeated in an error. Returns the secret and the variable it came from, if any.
fn secret_value(
    raw: &str,
    origin: &str,
    what: &str,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<(String, Option<String>), ConfigError> {
    if let Some(var) = strip_ref(raw, "env:") {
        let v = env(var).filter(|v| !v.is_empty()).ok_or_else(|| {
            ConfigError(format!(
                "invalid {origin}: environment variable {var:?} is not set or empty"
            ))
        })?;
        Ok((v.trim().to_owned(), Some(var.to_owned())))
    } else if let Some(path) = strip_ref(raw, "file:") {
        let text = read_file(path).map_err(|e| {
            ConfigError(format!("invalid {origin}: cannot read file {path:?}: {e}"))
        })?;
        Ok((text.trim().to_owned(), None))
    } else if raw.trim().is_empty() {
        Err(ConfigError(format!(
            "invalid {origin}: the {what} is empty"
        )))
    } else {
        Ok((raw.trim().to_owned(), None))
    }
}

/// The cloudflared companion: `None` unless `--cloudflared.managed` or a static token is given.
fn cloudflared(
    args: &RunArgs,
    src: &Sources<'_>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<Option<Cloudflared>, ConfigError> {
    let managed = boolean(pick(
        "cloudflared.managed",
        args.cloudflared_managed.as_ref(),
        "CLOUDFLARED_MANAGED",
        src,
    ))?;
    let static_raw = pick(
        "cloudflared.token",
        args.cloudflared_token.as_ref(),
        "CLOUDFLARED_TUNNEL_TOKEN",
        src,
    );
    let mut secret_vars = Vec::new();
    let token = match static_raw {
        Some(raw) => {
            let (token, var) = secret_value(&raw.value, &raw.origin, "token", src.env, read_file)?;
            mcpwire_core::tunnel::cloudflare::validate_token(&token)
                .map_err(|why| ConfigError(format!("invalid {}: {why}", raw.origin)))?;
            secret_vars.extend(var);
            CloudflaredToken::Static(Secret::new(token))
        }
        None if managed => CloudflaredToken::Managed,
        None => return Ok(None),
    };
    let path = match pick(
        "cloudflared.path",
        args.cloudflared_path.as_ref(),
        "CLOUDFLARED_PATH",
        src,
    ) {
        None => "cloudflared".to_owned(),
        Some(raw) => {
            let v = raw.value.trim();
            if v.is_empty() || v.contains(char::is_control) {
                return Err(bad(
                    &raw.origin,
                    &raw.value,
                    "expected a path to the cloudflared executable",
                ));
            }
            v.to_owned()
        }
    };
    let ready_raw = pick(
        "cloudflared.ready-timeout",
        args.cloudflared_ready_timeout.as_ref(),
        "CLOUDFLARED_READY_TIMEOUT",
        src,
    );
    let ready_origin = ready_raw
        .as_ref()
        .map(|r| (r.origin.clone(), r.value.clone()));
    let ready_timeout = duration(ready_raw, Duration::from_secs(30))?;
    if ready_timeout < Duration::from_millis(100) || ready_timeout > Duration::from_secs(3600) {
        let (origin, value) = ready_origin.unwrap_or_default();
        return Err(bad(&origin, &value, "expected a duration from 100ms to 1h"));
    }
    let key_ref = api_key_ref(args.api_key.as_ref(), src).map(|(k, _)| k);
    if let Some(var) = key_ref.as_deref().and_then(|k| strip_ref(k, "env:")) {
        secret_vars.push(var.to_owned());
    }
    Ok(Some(Cloudflared {
        token,
        path,
        ready_timeout,
        secret_vars,
    }))
}

/// The largest `--harpoon.max-response-bytes` (an answer travels base64-encoded in one
/// response POST).
pub const MAX_HARPOON_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

/// A repeatable flag's values, else its variable's entries (separated by `;` or newlines).
fn list(flag: &str, given: &[String], env_var: &str, src: &Sources<'_>) -> (Vec<String>, String) {
    if !given.is_empty() {
        return (given.to_vec(), format!("--{flag}"));
    }
    src.items(flag, env_var, &split_entries)
        .unwrap_or_else(|| (Vec::new(), format!("--{flag} (from {env_var})")))
}

fn boolean_or(raw: Option<Raw>, default: bool) -> Result<bool, ConfigError> {
    match raw {
        None => Ok(default),
        some => boolean(some),
    }
}

/// Harpoon's configuration (`None` without targets and discovery) and its OAuth discovery
/// (`None` when off). `main_url` is channel main's Streamable HTTP URL, if it has one.
fn harpoon(
    args: &RunArgs,
    src: &Sources<'_>,
    main_url: Option<&str>,
) -> Result<(Option<HarpoonConfig>, Option<HarpoonDiscovery>), ConfigError> {
    let allow_plaintext = boolean(pick(
        "harpoon.allow-plaintext-http",
        args.harpoon_allow_plaintext.as_ref(),
        "HARPOON_ALLOW_PLAINTEXT_HTTP",
        src,
    ))?;
    let mut registry = Registry::new(allow_plaintext);
    let mut origin = "--harpoon.target".to_owned();
    let specs = if args.harpoon_targets.is_empty() {
        match (src.env)("HARPOON_TARGETS").filter(|v| !v.trim().is_empty()) {
            Some(v) => {
                origin = "HARPOON_TARGETS".to_owned();
                TargetSpec::parse_list(&v)
                    .map_err(|e| ConfigError(format!("invalid HARPOON_TARGETS: {e}")))?
            }
            None => match src.file.get("HARPOON_TARGETS") {
                Some(fv) => {
                    origin = src.file.origin(fv);
                    fv.items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| TargetSpec::parse(v, &format!("harpoon.targets[{}]", i + 1)))
                        .collect::<Result<_, _>>()
                        .map_err(|e| ConfigError(format!("invalid {origin}: {e}")))?
                }
                None => Vec::new(),
            },
        }
    } else {
        args.harpoon_targets
            .iter()
            .enumerate()
            .map(|(i, v)| TargetSpec::parse(v, &format!("--harpoon.target #{}", i + 1)))
            .collect::<Result<_, _>>()
            .map_err(|e| ConfigError(format!("invalid --harpoon.target: {e}")))?
    };
    for spec in specs {
        registry
            .register(spec)
            .map_err(|e| ConfigError(format!("invalid {origin}: {e}")))?;
    }
    let max_raw = pick(
        "harpoon.max-response-bytes",
        args.harpoon_max_response_bytes.as_ref(),
        "HARPOON_MAX_RESPONSE_BYTES",
        src,
    );
    let max_response_cap = match max_raw {
        None => mcpwire_core::tunnel::harpoon::call::DEFAULT_MAX_RESPONSE_BYTES,
        Some(raw) => match raw.value.trim().parse::<u64>() {
            Ok(n) if (1..=MAX_HARPOON_RESPONSE_BYTES).contains(&n) => n,
            _ => {
                return Err(bad(
                    &raw.origin,
                    &raw.value,
                    &format!("expected a number of bytes from 1 to {MAX_HARPOON_RESPONSE_BYTES}"),
                ))
            }
        },
    };
    let discovery_raw = pick(
        "harpoon.oauth-discovery",
        args.harpoon_oauth_discovery.as_ref(),
        "HARPOON_OAUTH_DISCOVERY",
        src,
    );
    let asked = discovery_raw.is_some();
    let discover = boolean_or(discovery_raw, main_url.is_some())?;
    let discovery = match (discover, main_url) {
        (false, _) => None,
        (true, None) if asked => {
            return Err(ConfigError(
                "invalid --harpoon.oauth-discovery: OAuth discovery reads the metadata of \
                 channel main's Streamable HTTP server; set --mcp.server-url, or turn it off"
                    .to_owned(),
            ))
        }
        (true, None) => None,
        (true, Some(url)) => {
            let include_loopback = boolean_or(
                pick(
                    "harpoon.hosts-include-loopback",
                    args.harpoon_include_loopback.as_ref(),
                    "HARPOON_HOSTS_INCLUDE_LOOPBACK",
                    src,
                ),
                true,
            )?;
            let include_private = boolean_or(
                pick(
                    "harpoon.hosts-include-private",
                    args.harpoon_include_private.as_ref(),
                    "HARPOON_HOSTS_INCLUDE_PRIVATE",
                    src,
                ),
                true,
            )?;
            let (suffixes, suffix_origin) = list(
                "harpoon.hosts-include-suffix",
                &args.harpoon_include_suffixes,
                "HARPOON_HOSTS_INCLUDE_SUFFIX",
                src,
            );
            for s in &suffixes {
                let bare = s.trim_start_matches('.');
                if bare.is_empty() || bare.contains(|c: char| c.is_whitespace() || c == '/') {
                    return Err(bad(
                        &suffix_origin,
                        s,
                        "expected a host name suffix such as corp.example",
                    ));
                }
            }
            let (patterns, pattern_origin) = list(
                "harpoon.hosts-include-regex",
                &args.harpoon_include_patterns,
                "HARPOON_HOSTS_INCLUDE_REGEX",
                src,
            );
            let patterns = patterns
                .iter()
                .map(|p| host_pattern(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ConfigError(format!("invalid {pattern_origin}: {e}")))?;
            let mcp_host = mcpwire_core::net_policy::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_default();
            Some(HarpoonDiscovery {
                server_url: url.to_owned(),
                filter: HostFilter {
                    include_loopback,
                    include_private,
                    suffixes,
                    patterns,
                    mcp_host,
                },
                // The tunnel runs next to its MCP server: its documents may be on loopback or
                // a private network (link-local and cloud metadata stay refused).
                policy: NetPolicy {
                    allow_loopback_http: true,
                    allow_private: true,
                    ..NetPolicy::strict()
                },
            })
        }
    };
    if registry.is_empty() && discovery.is_none() {
        return Ok((None, None));
    }
    let mut entropy = [0u8; 64];
    getrandom::fill(&mut entropy).map_err(|e| {
        ConfigError(format!(
            "cannot read the system's random source for Harpoon: {e}"
        ))
    })?;
    let max_redirects = number(
        pick(
            "harpoon.max-redirects",
            args.harpoon_max_redirects.as_ref(),
            "HARPOON_MAX_REDIRECTS",
            src,
        ),
        usize::try_from(mcpwire_core::tunnel::harpoon::call::DEFAULT_MAX_REDIRECTS).unwrap_or(5),
        usize::try_from(mcpwire_core::tunnel::harpoon::call::MAX_REDIRECTS).unwrap_or(20),
    )?;
    let mut config = HarpoonConfig::new(registry, entropy);
    config.max_response_cap = max_response_cap;
    config.max_redirects = u32::try_from(max_redirects).unwrap_or(config.max_redirects);
    Ok((Some(config), discovery))
}

/// Resolves `args` against the environment (`env`), the config file they or the environment
/// choose, and files (`read_file`, for the config file and `file:` references).
pub fn resolve(
    args: &RunArgs,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<RunConfig, ConfigError> {
    let file = config_file::load(&args.source_flags(), env, read_file)?;
    resolve_layers(args, &Sources { env, file: &file }, read_file)
}

/// Resolves `args` against `src` (the environment, then a config file already read).
pub fn resolve_layers(
    args: &RunArgs,
    src: &Sources<'_>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<RunConfig, ConfigError> {
    go_compat::check_flags(&args.go_only)?;
    let mut warnings = go_compat::warnings(src.env, src.file);
    let driver = match pick("driver", args.driver.as_ref(), "MCPWIRE_DRIVER", src) {
        None => Driver::Blocking,
        Some(raw) => match raw.value.trim() {
            "blocking" => Driver::Blocking,
            "smol" => Driver::Smol,
            _ => return Err(bad(&raw.origin, &raw.value, "expected blocking or smol")),
        },
    };
    let base = pick(
        "control-plane.base-url",
        args.base_url.as_ref(),
        "CONTROL_PLANE_BASE_URL",
        src,
    );
    let mut base_url = match base {
        None => DEFAULT_BASE_URL.to_owned(),
        Some(raw) => http_url(&raw.origin, raw.value.trim())?,
    };
    let mut tls = tls_settings(args, src, read_file)?;
    // The Go client's rule: with a control-plane client certificate, its default control plane
    // is the mTLS host (any other base URL is used as given).
    if tls.control_plane_identity.is_some() && base_url.trim_end_matches('/') == DEFAULT_BASE_URL {
        DEFAULT_MTLS_BASE_URL.clone_into(&mut base_url);
    }
    if let Some(raw) = pick(
        "control-plane.url-path",
        args.url_path.as_ref(),
        "CONTROL_PLANE_URL_PATH",
        src,
    ) {
        base_url = join_url_path(&base_url, &raw)?;
    }
    let tunnel_id = pick(
        "control-plane.tunnel-id",
        args.tunnel_id.as_ref(),
        "CONTROL_PLANE_TUNNEL_ID",
        src,
    )
    .map(|r| r.value.trim().to_owned())
    .filter(|v| !v.is_empty())
    .ok_or_else(|| {
        ConfigError(
            "missing --control-plane.tunnel-id: give the tunnel id (or set CONTROL_PLANE_TUNNEL_ID)"
                .to_owned(),
        )
    })?;
    go_compat::check_tunnel_id("--control-plane.tunnel-id", &tunnel_id)?;
    if !go_compat::is_go_tunnel_id(&tunnel_id) {
        warnings.push(format!(
            "the tunnel id {tunnel_id:?} is not in the Go client's form (tunnel_ and 32 \
             lowercase letters or digits), which the Go client refuses; mcpwire sends it as \
             it is (the tunnel contract treats ids as opaque)"
        ));
    }
    let (extra_headers, secrets) = control_plane_headers(args, src, read_file)?;
    let api_key = api_key(args.api_key.as_ref(), src, read_file)?;
    let max_inflight = number(
        pick(
            "control-plane.max-inflight",
            args.max_inflight.as_ref(),
            "CONTROL_PLANE_MAX_INFLIGHT_REQUESTS",
            src,
        ),
        20,
        10_000,
    )?;
    let poll_raw = pick(
        "control-plane.poll-timeout",
        args.poll_timeout.as_ref(),
        "CONTROL_PLANE_POLL_TIMEOUT",
        src,
    );
    let poll_origin = poll_raw
        .as_ref()
        .map(|r| (r.origin.clone(), r.value.clone()));
    let poll_wait = duration(poll_raw, Duration::from_secs(30))?;
    if poll_wait < Duration::from_millis(1) || poll_wait > Duration::from_secs(3600) {
        let (origin, value) = poll_origin.unwrap_or_default();
        return Err(bad(&origin, &value, "expected a duration from 1ms to 1h"));
    }
    let max_concurrent = number(
        pick(
            "mcp.max-concurrent-requests",
            args.max_concurrent.as_ref(),
            "MCP_MAX_CONCURRENT_REQUESTS",
            src,
        ),
        10,
        1000,
    )?;
    let send_initialized = boolean(pick(
        "mcp.stdio-send-initialized-notification",
        args.send_initialized.as_ref(),
        "MCP_STDIO_SEND_INITIALIZED_NOTIFICATION",
        src,
    ))?;
    let health_addr = match pick(
        "health.listen-addr",
        args.health_addr.as_ref(),
        "HEALTH_LISTEN_ADDR",
        src,
    ) {
        None => SocketAddr::from(([127, 0, 0, 1], 8080)),
        Some(raw) => {
            let v = raw.value.trim();
            let v = if v.starts_with(':') {
                format!("0.0.0.0{v}")
            } else {
                v.to_owned()
            };
            v.parse().map_err(|_| {
                bad(
                    &raw.origin,
                    &raw.value,
                    "expected IP:PORT, e.g. 127.0.0.1:8080",
                )
            })?
        }
    };
    let admin_ui = admin_ui_settings(args, src)?;
    let log_level = match pick("log.level", args.log_level.as_ref(), "LOG_LEVEL", src) {
        None => Level::Info,
        Some(raw) => Level::parse(raw.value.trim()).ok_or_else(|| {
            bad(
                &raw.origin,
                &raw.value,
                "expected debug, info, warn or error",
            )
        })?,
    };
    let log_json = match pick("log.format", args.log_format.as_ref(), "LOG_FORMAT", src) {
        None => false,
        Some(raw) => match raw.value.trim().to_ascii_lowercase().as_str() {
            "text" | "struct-text" => false,
            "json" => true,
            _ => return Err(bad(&raw.origin, &raw.value, "expected text or json")),
        },
    };
    let grace = duration(
        pick(
            "shutdown.grace-period",
            args.grace.as_ref(),
            "SHUTDOWN_GRACE_PERIOD",
            src,
        ),
        Duration::from_secs(10),
    )?;

    let mut targets: Vec<Target> = Vec::new();
    let (urls, url_origin) = entries("mcp.server-url", &args.server_urls, "MCP_SERVER_URL", src);
    let (cmds, cmd_origin) = entries("mcp.command", &args.commands, "MCP_COMMAND", src);
    let mut entry_proxies: Vec<(String, Raw)> = Vec::new();
    let mut entry_sockets: Vec<(String, Raw)> = Vec::new();
    let mut entry_identities: Vec<(String, Raw, Raw)> = Vec::new();
    // Every HTTP entry's own options, to refuse two entries of one URL that differ in them.
    let mut entry_options: Vec<(String, String, ServerEntry)> = Vec::new();
    let parsed = urls
        .iter()
        .map(|e| {
            server_entry(&url_origin, e).map(|(target, found)| {
                if let TargetKind::Http { url } = &target.kind {
                    entry_options.push((url.clone(), target.channel.clone(), found.clone()));
                    let origin =
                        |key: &str| format!("{url_origin} {key}= (channel {})", target.channel);
                    if let Some(value) = found.proxy {
                        let origin = origin("http-proxy");
                        entry_proxies.push((url.clone(), Raw { value, origin }));
                    }
                    if let Some(value) = found.unix_socket {
                        let origin = origin("unix-socket");
                        entry_sockets.push((url.clone(), Raw { value, origin }));
                    }
                    if let Some((cert, key)) = found.identity {
                        entry_identities.push((
                            url.clone(),
                            Raw {
                                value: cert,
                                origin: origin("client-cert"),
                            },
                            Raw {
                                value: key,
                                origin: origin("client-key"),
                            },
                        ));
                    }
                }
                target
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .chain(cmds.iter().map(|e| command_entry(&cmd_origin, e)));
    for target in parsed {
        let target = target?;
        if targets.iter().any(|t| t.channel == target.channel) {
            return Err(ConfigError(format!(
                "invalid --mcp.server-url/--mcp.command: channel {:?} is configured twice; \
                 each channel has exactly one MCP server",
                target.channel
            )));
        }
        targets.push(target);
    }
    same_url_same_options(&url_origin, &entry_options)?;

    let main_url = targets.iter().find_map(|t| match &t.kind {
        TargetKind::Http { url } if t.channel == DEFAULT_CHANNEL => Some(url.as_str()),
        _ => None,
    });
    let (harpoon, harpoon_discovery) = harpoon(args, src, main_url)?;
    let harpoon_targets = harpoon.as_ref().is_some_and(|h| !h.registry.is_empty());

    let poll_channels = if !args.poll_channels.is_empty() {
        Some((
            args.poll_channels.clone(),
            "--control-plane.poll-channel".to_owned(),
        ))
    } else {
        src.items(
            "control-plane.poll-channel",
            "CONTROL_PLANE_POLL_CHANNELS",
            &|v| v.split(',').map(|s| s.trim().to_owned()).collect(),
        )
    };
    if let Some((list, origin)) = &poll_channels {
        let mut seen: Vec<&String> = Vec::new();
        for c in list {
            if seen.contains(&c) {
                return Err(bad(origin, c, "each channel may be named once"));
            }
            if c == HARPOON_CHANNEL {
                // Discovery can only add targets when the main channel is served too.
                let discovered_later =
                    harpoon_discovery.is_some() && list.iter().any(|c| c == DEFAULT_CHANNEL);
                if !harpoon_targets && !discovered_later {
                    return Err(bad(
                        origin,
                        c,
                        "Harpoon has no target; add --harpoon.target label=NAME,url=URL",
                    ));
                }
                seen.push(c);
                continue;
            }
            check_channel(origin, c)?;
            if !targets.iter().any(|t| &t.channel == c) {
                return Err(bad(
                    origin,
                    c,
                    "this channel has no MCP server; add --mcp.server-url or --mcp.command with channel=NAME",
                ));
            }
            seen.push(c);
        }
    } else if !targets.iter().any(|t| t.channel == DEFAULT_CHANNEL) {
        return Err(ConfigError(
            "missing MCP server for channel main: set --mcp.server-url URL or --mcp.command CMD \
             (or MCP_SERVER_URL / MCP_COMMAND), or serve Harpoon alone with \
             --control-plane.poll-channel harpoon and --harpoon.target"
                .to_owned(),
        ));
    }

    let declarations = targets
        .iter()
        .map(|t| {
            let binding = match t.kind {
                TargetKind::Http { .. } => ChannelBinding::RemoteHttp,
                TargetKind::Stdio { .. } => ChannelBinding::Stdio,
            };
            ChannelDeclaration::for_binding(t.channel.clone(), binding)
        })
        .collect();
    // Harpoon alone has no declaration of its own here: the tunnel adds Harpoon's.
    let server_info = if targets.is_empty() {
        None
    } else {
        Some(
            ServerInfo::new(declarations)
                .map_err(|e| ConfigError(format!("invalid --mcp.server-url/--mcp.command: {e}")))?,
        )
    };

    let mut engine = Config::new(
        base_url,
        tunnel_id,
        api_key,
        format!("{:016x}", mcpwire::random_seed()),
    );
    engine.server_info = server_info;
    engine.channels = targets.iter().map(|t| t.channel.clone()).collect();
    engine.poll_channels = poll_channels.map(|(l, _)| l);
    engine.poll_wait = poll_wait;
    engine.max_in_flight = max_inflight;
    engine.max_concurrent_forwards = max_concurrent;
    engine.jitter_seed = mcpwire::random_seed();
    engine.extra_headers = extra_headers;
    let stdio = StdioConfig {
        send_initialized_notification: send_initialized,
        ..StdioConfig::default()
    };
    let cloudflared = cloudflared(args, src, read_file)?;
    let proxies = proxy_settings(args, src, entry_proxies)?;
    for (url, cert, key) in &entry_identities {
        let identity = load_identity(cert, key, src.env, read_file)?;
        tls.mcp_servers.insert(url.clone(), identity);
    }
    let mut unix_sockets = std::collections::BTreeMap::new();
    for (url, raw) in &entry_sockets {
        let path = referenced_path(raw, src.env)?;
        if path.contains(char::is_control) {
            return Err(bad(&raw.origin, &path, "expected a file path"));
        }
        unix_sockets.insert(url.clone(), std::path::PathBuf::from(path));
    }
    let (mcp_extra_headers, mcp_header_secrets) = mcp_headers(
        &args.mcp_extra_headers,
        ("mcp.extra-headers", "MCP_EXTRA_HEADERS"),
        src,
        read_file,
    )?;
    let (mcp_discovery_extra_headers, discovery_header_secrets) = mcp_headers(
        &args.mcp_discovery_extra_headers,
        ("mcp.discovery-extra-headers", "MCP_DISCOVERY_EXTRA_HEADERS"),
        src,
        read_file,
    )?;
    let wait_raw = pick(
        "mcp.startup-wait-timeout",
        args.startup_wait_timeout.as_ref(),
        "MCP_STARTUP_WAIT_TIMEOUT",
        src,
    );
    let wait_origin = wait_raw
        .as_ref()
        .map(|r| (r.origin.clone(), r.value.clone()));
    let startup_wait = duration(wait_raw, Duration::ZERO)?;
    if startup_wait > Duration::from_secs(24 * 3600) {
        let (origin, value) = wait_origin.unwrap_or_default();
        return Err(bad(&origin, &value, "expected a duration of at most 24h"));
    }
    let startup_wait = (!startup_wait.is_zero()).then_some(startup_wait);
    let ttl_raw = pick(
        "mcp.connection-max-ttl",
        args.connection_max_ttl.as_ref(),
        "MCP_CONNECTION_MAX_TTL",
        src,
    );
    let ttl_origin = ttl_raw
        .as_ref()
        .map(|r| (r.origin.clone(), r.value.clone()));
    let connection_max_ttl = duration(ttl_raw, Duration::from_secs(600))?;
    if connection_max_ttl.is_zero() || connection_max_ttl > Duration::from_secs(24 * 3600) {
        let (origin, value) = ttl_origin.unwrap_or_default();
        return Err(bad(&origin, &value, "must be positive, at most 24h"));
    }
    engine.connection_max_ttl = Some(connection_max_ttl);
    let mut secrets = secrets;
    secrets.extend(mcp_header_secrets);
    secrets.extend(discovery_header_secrets);
    secrets.extend(proxies.control_plane.passwords());
    secrets.extend(proxies.mcp.passwords());
    for p in proxies.servers.values() {
        secrets.extend(ProxyRoute::Explicit(p.clone()).passwords());
    }
    Ok(RunConfig {
        tunnel: TunnelConfig {
            engine,
            targets,
            stdio,
            grace,
            cloudflared,
            harpoon,
            harpoon_discovery,
            tls,
            proxies,
            mcp_extra_headers,
            mcp_discovery_extra_headers,
            startup_wait,
            unix_sockets,
        },
        health_addr,
        log_level,
        log_json,
        driver,
        health_url_file: path_setting(pick(
            "health.url-file",
            args.health_url_file.as_ref(),
            "HEALTH_URL_FILE",
            src,
        ))?,
        health_unix_socket: path_setting(pick(
            "health.unix-socket",
            args.health_unix_socket.as_ref(),
            "HEALTH_UNIX_SOCKET",
            src,
        ))?,
        pid_file: path_setting(pick("pid.file", args.pid_file.as_ref(), "PID_FILE", src))?,
        log_file: path_setting(pick("log.file", args.log_file.as_ref(), "LOG_FILE", src))?,
        config_source: src.file.source.clone(),
        api_key_origin: api_key_ref(args.api_key.as_ref(), src)
            .map(|(_, origin)| origin)
            .unwrap_or_default(),
        warnings,
        secrets: Secrets(secrets),
        admin_ui,
    })
}

/// The admin UI's settings, or `None` when `--admin-ui.disable` turns it off.
fn admin_ui_settings(
    args: &RunArgs,
    src: &Sources<'_>,
) -> Result<Option<AdminUiSettings>, ConfigError> {
    let disabled = boolean(pick(
        "admin-ui.disable",
        args.admin_ui_disable.as_ref(),
        "ADMIN_UI_DISABLE",
        src,
    ))?;
    let allow_remote = boolean(pick(
        "admin-ui.allow-remote",
        args.admin_ui_allow_remote.as_ref(),
        "ALLOW_REMOTE_UI",
        src,
    ))?;
    let log_lines = number(
        pick(
            "admin-ui.log-buffer-events",
            args.admin_ui_log_buffer_events.as_ref(),
            "ADMIN_UI_LOG_BUFFER_EVENTS",
            src,
        ),
        mcpwire::tunnel::activity::LOG_LINES_KEPT,
        100_000,
    )?;
    let show_harpoon_urls = boolean(pick(
        "admin-ui.show-harpoon-urls",
        args.admin_ui_show_harpoon_urls.as_ref(),
        "ADMIN_UI_SHOW_HARPOON_URLS",
        src,
    ))?;
    let allowed_hosts = if args.admin_ui_allowed_hosts.is_empty() {
        let split = |v: &str| {
            v.split(',')
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect()
        };
        src.items("admin-ui.allowed-host", "ADMIN_UI_ALLOWED_HOSTS", &split)
            .map(|(hosts, _)| hosts)
            .unwrap_or_default()
    } else {
        args.admin_ui_allowed_hosts.clone()
    };
    Ok((!disabled).then_some(AdminUiSettings {
        allow_remote,
        log_lines,
        show_harpoon_urls,
        allowed_hosts,
    }))
}

/// A file named by a path, `env:VAR` (the variable holds the path) or `file:PATH` (the Go
/// client's path references); its text.
fn referenced_file(
    raw: &Raw,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<(String, String), ConfigError> {
    let path = referenced_path(raw, env)?;
    let text = read_file(&path)
        .map_err(|e| ConfigError(format!("invalid {}: cannot read {path:?}: {e}", raw.origin)))?;
    Ok((path, text))
}

/// The path `raw` names: as given, after `file:`, or in the variable `env:VAR` names.
fn referenced_path(raw: &Raw, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let v = raw.value.trim();
    let path = if let Some(var) = strip_ref(v, "env:") {
        env(var.trim())
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                ConfigError(format!(
                    "invalid {}: environment variable {:?} is not set or empty",
                    raw.origin,
                    var.trim()
                ))
            })?
    } else {
        strip_ref(v, "file:").unwrap_or(v).trim().to_owned()
    };
    if path.is_empty() {
        return Err(ConfigError(format!(
            "invalid {}: the path is empty",
            raw.origin
        )));
    }
    Ok(path)
}

/// The client certificate and key that `cert` and `key` name (paths, `file:` or `env:`).
fn load_identity(
    cert: &Raw,
    key: &Raw,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<Identity, ConfigError> {
    let (cert_path, cert_pem) = referenced_file(cert, env, read_file)?;
    let (key_path, key_pem) = referenced_file(key, env, read_file)?;
    Identity::from_pem(
        cert_pem.as_bytes(),
        &format!("{} ({cert_path})", cert.origin),
        key_pem.as_bytes(),
        &format!("{} ({key_path})", key.origin),
    )
    .map_err(|e| ConfigError(e.to_string()))
}

/// Each route's proxy: its own explicit proxy, else `--http-proxy`, else the environment's
/// `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` (loopback never proxied from the environment), as
/// the Go client decides. A bad value names its origin, never the value (it may hold a
/// password).
fn proxy_settings(
    args: &RunArgs,
    src: &Sources<'_>,
    entry_proxies: Vec<(String, Raw)>,
) -> Result<TunnelProxies, ConfigError> {
    let explicit = |raw: Option<Raw>| -> Result<Option<ProxyUrl>, ConfigError> {
        let Some(raw) = raw else { return Ok(None) };
        let v = raw.value.trim();
        let (value, from) = match strip_ref(v, "env:") {
            Some(var) => {
                let var = var.trim();
                let value = (src.env)(var)
                    .filter(|x| !x.trim().is_empty())
                    .ok_or_else(|| {
                        ConfigError(format!(
                            "invalid {}: environment variable {var:?} is not set or empty",
                            raw.origin
                        ))
                    })?;
                (value, format!(" (from env:{var})"))
            }
            None => (v.to_owned(), String::new()),
        };
        ProxyUrl::parse(&value)
            .map(Some)
            .map_err(|e| ConfigError(format!("invalid {}{from}: {e}", raw.origin)))
    };
    let global = explicit(pick(
        "http-proxy",
        args.http_proxy.as_ref(),
        "TUNNEL_CLIENT_HTTP_PROXY",
        src,
    ))?;
    let environment = ProxyRoute::from_environment(src.env)
        .map_err(|(var, e)| ConfigError(format!("invalid {var}: {e}")))?;
    let route = |own: Option<ProxyUrl>| match own.or_else(|| global.clone()) {
        Some(p) => ProxyRoute::Explicit(p),
        None => environment.clone(),
    };
    Ok(TunnelProxies {
        control_plane: route(explicit(pick(
            "control-plane.http-proxy",
            args.cp_http_proxy.as_ref(),
            "CONTROL_PLANE_HTTP_PROXY",
            src,
        ))?),
        mcp: route(explicit(pick(
            "mcp.http-proxy",
            args.mcp_http_proxy.as_ref(),
            "MCP_HTTP_PROXY",
            src,
        ))?),
        servers: {
            let mut servers = std::collections::BTreeMap::new();
            for (url, raw) in entry_proxies {
                if let Some(p) = explicit(Some(raw))? {
                    servers.insert(url, p);
                }
            }
            servers
        },
    })
}

/// `--ca-bundle` and the client certificates of the control plane and the MCP servers.
fn tls_settings(
    args: &RunArgs,
    src: &Sources<'_>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<TunnelTls, ConfigError> {
    let mut tls = TunnelTls::default();
    if let Some(raw) = pick("ca-bundle", args.ca_bundle.as_ref(), "CA_BUNDLE", src) {
        let (path, text) = referenced_file(&raw, src.env, read_file)?;
        tls.extra_roots = parse_ca_bundle(text.as_bytes(), &format!("{} ({path})", raw.origin))
            .map_err(|e| ConfigError(format!("invalid {}: {e}", raw.origin)))?;
    }
    let identity = |cert_flag: &str,
                    cert: Option<&String>,
                    cert_var: &str,
                    key_flag: &str,
                    key: Option<&String>,
                    key_var: &str|
     -> Result<Option<Identity>, ConfigError> {
        let cert = pick(cert_flag, cert, cert_var, src);
        let key = pick(key_flag, key, key_var, src);
        match (cert, key) {
            (None, None) => Ok(None),
            (Some(c), None) => Err(ConfigError(format!(
                "invalid {}: the client certificate needs its key (--{key_flag})",
                c.origin
            ))),
            (None, Some(k)) => Err(ConfigError(format!(
                "invalid {}: the client key needs its certificate (--{cert_flag})",
                k.origin
            ))),
            (Some(c), Some(k)) => load_identity(&c, &k, src.env, read_file).map(Some),
        }
    };
    tls.control_plane_identity = identity(
        "control-plane.client-cert",
        args.cp_client_cert.as_ref(),
        "CONTROL_PLANE_CLIENT_CERT",
        "control-plane.client-key",
        args.cp_client_key.as_ref(),
        "CONTROL_PLANE_CLIENT_KEY",
    )?;
    tls.mcp_identity = identity(
        "mcp.client-cert",
        args.mcp_client_cert.as_ref(),
        "MCP_CLIENT_CERT",
        "mcp.client-key",
        args.mcp_client_key.as_ref(),
        "MCP_CLIENT_KEY",
    )?;
    Ok(tls)
}

fn path_setting(raw: Option<Raw>) -> Result<Option<String>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let v = raw.value.trim();
    if v.is_empty() || v.contains(char::is_control) {
        return Err(bad(&raw.origin, &raw.value, "expected a file path"));
    }
    Ok(Some(v.to_owned()))
}

/// `base` with `path` put before the `/v1/...` routes (`/gw` and `gw/` alike).
fn join_url_path(base: &str, raw: &Raw) -> Result<String, ConfigError> {
    let path = raw.value.trim().trim_matches('/');
    if path.is_empty() {
        return Ok(base.to_owned());
    }
    if path.contains(|c: char| c.is_whitespace() || c.is_control() || c == '?' || c == '#')
        || path
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return Err(bad(
            &raw.origin,
            &raw.value,
            "expected a URL path such as /tunnel-gw (no query, fragment, spaces, '.' or '..' \
             segments)",
        ));
    }
    if base.contains(['?', '#']) {
        return Err(bad(
            &raw.origin,
            &raw.value,
            "the base URL has a query or fragment; a path cannot be added to it",
        ));
    }
    Ok(format!("{}/{path}", base.trim_end_matches('/')))
}

/// Extra control-plane headers and their values for the log redactor.
type ExtraHeaders = (Vec<(String, Secret)>, Vec<String>);

/// `OpenAI-Organization` and `--control-plane.extra-headers` (a flag's list beats the
/// variable's, which beats the file's), each value resolved from `env:`/`file:`; also the values
/// for the log redactor.
fn control_plane_headers(
    args: &RunArgs,
    src: &Sources<'_>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<ExtraHeaders, ConfigError> {
    let mut headers: Vec<(String, Secret)> = Vec::new();
    let mut secrets = Vec::new();
    if let Some(raw) = pick(
        "control-plane.organization-id",
        args.organization_id.as_ref(),
        "CONTROL_PLANE_ORGANIZATION_ID",
        src,
    ) {
        let org = raw.value.trim();
        if org.is_empty() || org.contains(char::is_control) {
            return Err(bad(
                &raw.origin,
                &raw.value,
                "expected an organization id without line breaks",
            ));
        }
        headers.push(("OpenAI-Organization".to_owned(), Secret::new(org)));
    }
    let (list, secrets_of_list) = header_list(
        &args.extra_headers,
        ("control-plane.extra-headers", "CONTROL_PLANE_EXTRA_HEADERS"),
        src,
        read_file,
        &|name| {
            mcpwire_core::tunnel::engine::is_reserved_control_plane_header(name).then_some(
                "this header is the client's own (authentication, content or client metadata) \
                 and cannot be set",
            )
        },
    )?;
    for (name, value) in list {
        if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            return Err(bad(
                "--control-plane.extra-headers",
                &name,
                "each header may be given once",
            ));
        }
        headers.push((name, value));
    }
    secrets.extend(secrets_of_list);
    Ok((headers, secrets))
}

/// A list of extra headers, "Name: value" each: the flag's entries beat the variable's (split
/// at ',' or ';'), which beat the file's; each value may be `env:VAR` or `file:PATH`. A name
/// `reserved` refuses (with its reason) is an error, as is a name given twice. Also the values,
/// for the log redactor.
fn header_list(
    flag_values: &[String],
    (flag, var): (&str, &str),
    src: &Sources<'_>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
    reserved: &dyn Fn(&str) -> Option<&'static str>,
) -> Result<ExtraHeaders, ConfigError> {
    let split = |v: &str| -> Vec<String> {
        v.split([',', ';'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (list, origin) = if flag_values.is_empty() {
        src.items(flag, var, &split).unwrap_or_default()
    } else {
        (flag_values.to_vec(), format!("--{flag}"))
    };
    let mut headers: Vec<(String, Secret)> = Vec::new();
    let mut secrets = Vec::new();
    for entry in &list {
        let Some((name, value)) = entry.split_once(':') else {
            return Err(ConfigError(format!(
                "invalid {origin}: expected \"Name: value\" entries (one has no ':')"
            )));
        };
        let name = name.trim();
        if mcpwire_core::http::validate_name(name).is_err() {
            return Err(bad(&origin, name, "expected an HTTP header name"));
        }
        if let Some(why) = reserved(name) {
            return Err(bad(&origin, name, why));
        }
        if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            return Err(bad(&origin, name, "each header may be given once"));
        }
        let what = format!("{name} header value");
        let (value, _) = secret_value(value.trim(), &origin, &what, src.env, read_file)?;
        if value.is_empty() || value.contains(char::is_control) {
            return Err(ConfigError(format!(
                "invalid {origin}: the {what} is empty or has control characters"
            )));
        }
        secrets.push(value.clone());
        headers.push((name.to_owned(), Secret::new(value)));
    }
    Ok((headers, secrets))
}

/// `--mcp.extra-headers` (on every forward to an HTTP MCP server; the command's own win) or
/// `--mcp.discovery-extra-headers`: the forward's and MCP's own names are refused.
fn mcp_headers(
    flag_values: &[String],
    names: (&str, &str),
    src: &Sources<'_>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<ExtraHeaders, ConfigError> {
    header_list(flag_values, names, src, read_file, &|name| {
        mcpwire_core::tunnel::forward_headers::is_reserved_extra_header(name).then_some(
            "the forward sets this header itself (framing, content negotiation, MCP's \
                 protocol version, session and method headers) and it cannot be set",
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn run(args: RunArgs, env: &[(&str, &str)]) -> Result<RunConfig, ConfigError> {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        resolve(&args, &|k| env.get(k).cloned(), &|p| {
            if p == "/keys/cp" {
                Ok("from-file-key\n".into())
            } else {
                Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file",
                ))
            }
        })
    }

    fn base() -> RunArgs {
        RunArgs {
            tunnel_id: Some("tun_1".into()),
            api_key: Some("sk-literal".into()),
            server_urls: vec!["http://127.0.0.1:3000/mcp".into()],
            ..RunArgs::default()
        }
    }

    #[test]
    fn defaults_match_the_go_client() {
        let c = run(base(), &[]).unwrap();
        assert_eq!(c.tunnel.engine.base_url, "https://api.openai.com");
        assert_eq!(c.tunnel.engine.max_in_flight, 20);
        assert_eq!(c.tunnel.engine.max_concurrent_forwards, 10);
        assert_eq!(c.tunnel.engine.poll_wait, Duration::from_secs(30));
        assert_eq!(c.health_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.log_level, Level::Info);
        assert!(!c.log_json && !c.tunnel.stdio.send_initialized_notification);
        assert_eq!(c.driver, Driver::Blocking);
        assert_eq!(c.tunnel.engine.channels, vec!["main"]);
    }

    #[test]
    fn a_control_plane_client_certificate_moves_the_default_to_the_mtls_host() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["client".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        let resolve_with = |base_url: Option<&str>| {
            let mut a = base();
            a.cp_client_cert = Some("/tls/c.pem".into());
            a.cp_client_key = Some("/tls/k.pem".into());
            a.base_url = base_url.map(str::to_owned);
            resolve(&a, &|_| None, &|p| match p {
                "/tls/c.pem" => Ok(cert_pem.clone()),
                "/tls/k.pem" => Ok(key_pem.clone()),
                _ => Err(std::io::Error::other("no such file")),
            })
            .unwrap()
            .tunnel
            .engine
            .base_url
        };
        assert_eq!(resolve_with(None), DEFAULT_MTLS_BASE_URL);
        assert_eq!(
            resolve_with(Some("https://api.openai.com/")),
            DEFAULT_MTLS_BASE_URL
        );
        assert_eq!(
            resolve_with(Some("https://cp.corp.example")),
            "https://cp.corp.example"
        );
        // Without a certificate the default stays.
        assert_eq!(
            run(base(), &[]).unwrap().tunnel.engine.base_url,
            DEFAULT_BASE_URL
        );
    }

    #[test]
    fn flags_beat_environment_beats_defaults() {
        let mut a = base();
        a.max_inflight = Some("7".into());
        let c = run(
            a,
            &[
                ("CONTROL_PLANE_MAX_INFLIGHT_REQUESTS", "9"),
                ("CONTROL_PLANE_POLL_TIMEOUT", "1m30s"),
            ],
        )
        .unwrap();
        assert_eq!(c.tunnel.engine.max_in_flight, 7);
        assert_eq!(c.tunnel.engine.poll_wait, Duration::from_secs(90));
    }

    /// Resolves with `yaml` as the config file /etc/t.yaml (chosen by --config).
    fn run_file(
        mut args: RunArgs,
        env: &[(&str, &str)],
        yaml: &str,
    ) -> Result<RunConfig, ConfigError> {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        args.config = Some("/etc/t.yaml".into());
        let yaml = yaml.to_owned();
        resolve(&args, &|k| env.get(k).cloned(), &move |p| match p {
            "/etc/t.yaml" => Ok(yaml.clone()),
            "/keys/cp" => Ok("from-file-key\n".into()),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file",
            )),
        })
    }

    const FILE: &str = "config_version: 1\ncontrol_plane:\n  tunnel_id: tunnel_file\n  api_key: env:FILE_KEY\n  \
        max_inflight_requests: 3\n  poll_timeout: 5s\n  poll_channels: [main]\nlog:\n  level: warn\n\
        mcp:\n  server_urls:\n    - url: http://127.0.0.1:9/file\n  max_concurrent_requests: 4\n\
        harpoon:\n  targets:\n    - label: idp\n      url: https://idp.example/token\n      description: the IdP\n";

    #[test]
    fn every_layer_in_order_flags_environment_file_defaults() {
        let bare = RunArgs::default();
        // The file alone (its api_key reference resolved from the environment).
        let c = run_file(bare.clone(), &[("FILE_KEY", "sk-file")], FILE).unwrap();
        assert_eq!(c.tunnel.engine.tunnel_id, "tunnel_file");
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-file");
        assert_eq!(c.tunnel.engine.max_in_flight, 3);
        assert_eq!(c.tunnel.engine.max_concurrent_forwards, 4);
        assert_eq!(c.tunnel.engine.poll_wait, Duration::from_secs(5));
        assert_eq!(c.log_level, Level::Warn);
        assert_eq!(
            c.tunnel.targets[0].kind,
            TargetKind::Http {
                url: "http://127.0.0.1:9/file".into()
            }
        );
        assert_eq!(c.tunnel.engine.poll_channels, Some(vec!["main".to_owned()]));
        assert_eq!(c.tunnel.harpoon.as_ref().unwrap().registry.len(), 1);
        // Defaults under the file: what it does not set.
        assert_eq!(c.tunnel.engine.base_url, "https://api.openai.com");
        assert_eq!(c.health_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.config_source.as_ref().unwrap().path, "/etc/t.yaml");
        // The environment beats the file.
        let env = [
            ("FILE_KEY", "sk-file"),
            ("CONTROL_PLANE_TUNNEL_ID", "tunnel_env"),
            ("CONTROL_PLANE_API_KEY", "sk-env"),
            ("CONTROL_PLANE_MAX_INFLIGHT_REQUESTS", "8"),
            ("LOG_LEVEL", "error"),
            ("MCP_SERVER_URL", "http://127.0.0.1:9/env"),
            (
                "HARPOON_TARGETS",
                "label=a,url=https://a.example/x;label=b,url=https://b.example/y",
            ),
            ("CONTROL_PLANE_POLL_CHANNELS", "main,harpoon"),
        ];
        let c = run_file(bare.clone(), &env, FILE).unwrap();
        assert_eq!(c.tunnel.engine.tunnel_id, "tunnel_env");
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-env");
        assert_eq!(c.tunnel.engine.max_in_flight, 8);
        assert_eq!(c.log_level, Level::Error);
        assert_eq!(
            c.tunnel.targets[0].kind,
            TargetKind::Http {
                url: "http://127.0.0.1:9/env".into()
            }
        );
        assert_eq!(c.tunnel.harpoon.as_ref().unwrap().registry.len(), 2);
        assert_eq!(
            c.tunnel.engine.poll_channels,
            Some(vec!["main".to_owned(), "harpoon".to_owned()])
        );
        // The file still fills in what the environment does not set.
        assert_eq!(c.tunnel.engine.poll_wait, Duration::from_secs(5));
        // Flags beat both.
        let a = RunArgs {
            tunnel_id: Some("tunnel_flag".into()),
            api_key: Some("sk-flag".into()),
            max_inflight: Some("11".into()),
            log_level: Some("debug".into()),
            server_urls: vec!["http://127.0.0.1:9/flag".into()],
            poll_timeout: Some("7s".into()),
            ..RunArgs::default()
        };
        let c = run_file(a, &env, FILE).unwrap();
        assert_eq!(c.tunnel.engine.tunnel_id, "tunnel_flag");
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-flag");
        assert_eq!(c.tunnel.engine.max_in_flight, 11);
        assert_eq!(c.log_level, Level::Debug);
        assert_eq!(c.tunnel.engine.poll_wait, Duration::from_secs(7));
        assert_eq!(
            c.tunnel.targets[0].kind,
            TargetKind::Http {
                url: "http://127.0.0.1:9/flag".into()
            }
        );
    }

    #[test]
    fn a_bad_file_value_names_the_file_line_and_key() {
        let yaml = "control_plane:\n  tunnel_id: tunnel_file\n  api_key: sk-x\n  poll_timeout: soon\nmcp:\n  server_urls:\n    - url: http://127.0.0.1:9/mcp\n";
        let e = run_file(RunArgs::default(), &[], yaml).unwrap_err().0;
        assert!(
            e.starts_with("invalid control_plane.poll_timeout (/etc/t.yaml line 4) \"soon\": expected a duration"),
            "{e}"
        );
        let yaml = "control_plane:\n  tunnel_id: tunnel_file\n  api_key: \"sk-x y\"\nmcp:\n  server_urls:\n    - url: http://127.0.0.1:9/mcp\n";
        let e = run_file(RunArgs::default(), &[], yaml).unwrap_err().0;
        assert!(
            e.starts_with(
                "invalid control_plane.api_key (/etc/t.yaml line 3): the API key is malformed"
            ),
            "{e}"
        );
        assert!(!e.contains("sk-x"), "{e}");
        let e = run_file(RunArgs::default(), &[], "nope: 1\n")
            .unwrap_err()
            .0;
        assert!(
            e.starts_with("invalid config file /etc/t.yaml line 1: nope: unknown key"),
            "{e}"
        );
    }

    #[test]
    fn the_connection_ttl_defaults_to_ten_minutes_and_must_be_positive() {
        let c = run(base(), &[]).unwrap();
        assert_eq!(
            c.tunnel.engine.connection_max_ttl,
            Some(Duration::from_secs(600))
        );
        let c = run(base(), &[("MCP_CONNECTION_MAX_TTL", "90s")]).unwrap();
        assert_eq!(
            c.tunnel.engine.connection_max_ttl,
            Some(Duration::from_secs(90))
        );
        let e = run(base(), &[("MCP_CONNECTION_MAX_TTL", "0")])
            .unwrap_err()
            .0;
        assert!(e.ends_with("must be positive, at most 24h"), "{e}");
    }

    #[test]
    fn the_startup_wait_is_off_by_default_and_zero_turns_it_off() {
        assert_eq!(run(base(), &[]).unwrap().tunnel.startup_wait, None);
        let c = run(base(), &[("MCP_STARTUP_WAIT_TIMEOUT", "0s")]).unwrap();
        assert_eq!(c.tunnel.startup_wait, None);
        let mut a = base();
        a.startup_wait_timeout = Some("1m30s".into());
        let c = run(a, &[("MCP_STARTUP_WAIT_TIMEOUT", "5s")]).unwrap();
        assert_eq!(c.tunnel.startup_wait, Some(Duration::from_secs(90)));
        let e = run(base(), &[("MCP_STARTUP_WAIT_TIMEOUT", "later")])
            .unwrap_err()
            .0;
        assert!(
            e.starts_with(
                "invalid --mcp.startup-wait-timeout (from MCP_STARTUP_WAIT_TIMEOUT) \"later\": \
                 expected a duration"
            ),
            "{e}"
        );
    }

    #[test]
    fn mcp_extra_headers_from_flags_environment_and_file() {
        let shown = |c: &RunConfig| -> Vec<(String, String)> {
            c.tunnel
                .mcp_extra_headers
                .iter()
                .map(|(n, v)| (n.clone(), v.expose().to_owned()))
                .collect()
        };
        let mut a = base();
        a.mcp_extra_headers = vec!["Authorization: env:MCP_TOKEN".into(), "X-Team: blue".into()];
        let c = run(
            a,
            &[
                ("MCP_TOKEN", "Bearer mcp-tok-1"),
                ("MCP_EXTRA_HEADERS", "X-Env: 1"),
            ],
        )
        .unwrap();
        assert_eq!(
            shown(&c),
            [
                ("Authorization".to_owned(), "Bearer mcp-tok-1".to_owned()),
                ("X-Team".to_owned(), "blue".to_owned())
            ]
        );
        // The values are secrets to the log redactor.
        assert!(c.secrets.0.iter().any(|s| s == "Bearer mcp-tok-1"));
        let c = run(base(), &[("MCP_EXTRA_HEADERS", "X-A: 1; X-B: 2")]).unwrap();
        assert_eq!(shown(&c).len(), 2);
        let c = run_file(
            base(),
            &[],
            "mcp:\n  extra_headers:\n    X-File: from-file\n",
        )
        .unwrap();
        assert_eq!(shown(&c), [("X-File".to_owned(), "from-file".to_owned())]);
        // MCP's own and the forward's headers are refused by name.
        for name in [
            "Mcp-Session-Id",
            "mcp-protocol-version",
            "Content-Type",
            "Mcp-Param-Region",
            "Host",
        ] {
            let mut a = base();
            a.mcp_extra_headers = vec![format!("{name}: x")];
            let e = run(a, &[]).unwrap_err().0;
            assert!(
                e.starts_with(&format!("invalid --mcp.extra-headers {name:?}")),
                "{e}"
            );
            assert!(e.contains("the forward sets this header itself"), "{e}");
        }
        let mut a = base();
        a.mcp_extra_headers = vec!["X-A: 1".into(), "x-a: 2".into()];
        assert!(run(a, &[])
            .unwrap_err()
            .0
            .contains("each header may be given once"));
    }

    #[test]
    fn url_path_organization_and_extra_headers() {
        let mut a = base();
        a.url_path = Some("/gw/tunnels/".into());
        a.organization_id = Some("org-123".into());
        a.extra_headers = vec!["X-Route: blue".into(), "X-Token: env:ROUTE_TOKEN".into()];
        let c = run(a, &[("ROUTE_TOKEN", "tok-abcdef")]).unwrap();
        assert_eq!(
            c.tunnel.engine.base_url,
            "https://api.openai.com/gw/tunnels"
        );
        let h: Vec<(String, String)> = c
            .tunnel
            .engine
            .extra_headers
            .iter()
            .map(|(n, v)| (n.clone(), v.expose().to_owned()))
            .collect();
        assert_eq!(
            h,
            [
                ("OpenAI-Organization".to_owned(), "org-123".to_owned()),
                ("X-Route".to_owned(), "blue".to_owned()),
                ("X-Token".to_owned(), "tok-abcdef".to_owned()),
            ]
        );
        assert!(c.secrets.0.contains(&"tok-abcdef".to_owned()));
        assert!(!format!("{c:?}").contains("tok-abcdef"));
        let c = run(base(), &[("CONTROL_PLANE_EXTRA_HEADERS", "A: 1; B: 2")]).unwrap();
        assert_eq!(c.tunnel.engine.extra_headers.len(), 2);
        let mut a = base();
        a.extra_headers = vec!["Authorization: Bearer x".into()];
        let e = run(a, &[]).unwrap_err().0;
        assert!(e.contains("cannot be set"), "{e}");
        let mut a = base();
        a.url_path = Some("/a/../b".into());
        assert!(run(a, &[])
            .unwrap_err()
            .0
            .contains("--control-plane.url-path"));
        let yaml = "control_plane:\n  tunnel_id: tunnel_file\n  api_key: sk-x\n  url_path: /gw\n  organization_id: org-9\n  extra_headers:\n    X-A: one\nmcp:\n  server_urls:\n    - url: http://127.0.0.1:9/mcp\n";
        let c = run_file(RunArgs::default(), &[], yaml).unwrap();
        assert_eq!(c.tunnel.engine.base_url, "https://api.openai.com/gw");
        assert_eq!(c.tunnel.engine.extra_headers.len(), 2);
    }

    #[test]
    fn a_server_entry_takes_its_own_proxy() {
        let mut a = base();
        a.server_urls = vec![
            "channel=main,url=http://10.0.0.1/mcp,http-proxy=env:SERVER_PROXY".into(),
            "channel=other,url=http://10.0.0.2/mcp".into(),
        ];
        a.mcp_http_proxy = Some("http://route-proxy:3128".into());
        let c = run(a, &[("SERVER_PROXY", "http://u:entry-pw@entry-proxy:8080")]).unwrap();
        let p = &c.tunnel.proxies;
        assert_eq!(
            p.for_mcp("http://10.0.0.1/mcp").map(|p| p.to_string()),
            Some("http://entry-proxy:8080".to_owned())
        );
        assert_eq!(
            p.for_mcp("http://10.0.0.2/mcp").map(|p| p.to_string()),
            Some("http://route-proxy:3128".to_owned())
        );
        // The entry's proxy password is a secret to the log redactor.
        assert!(c.secrets.0.iter().any(|s| s.contains("entry-pw")));
    }

    #[test]
    fn a_server_entry_takes_its_own_unix_socket_and_client_certificate() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["client".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        let files = move |p: &str| match p {
            "/tls/c.pem" => Ok(cert_pem.clone()),
            "/tls/k.pem" => Ok(key_pem.clone()),
            _ => Err(std::io::Error::other("no such file")),
        };
        let env = |k: &str| (k == "SOCK").then(|| "/run/mcp/b.sock".to_owned());
        let resolve_urls = |urls: &[&str]| {
            let mut a = base();
            a.server_urls = urls.iter().map(|u| (*u).to_owned()).collect();
            resolve(&a, &env, &files)
        };
        let c = resolve_urls(&[
            "url=http://a.local/mcp,unix-socket=/run/mcp/a.sock",
            "channel=b,url=https://b.local/mcp,unix-socket=env:SOCK,client-cert=/tls/c.pem,client-key=file:/tls/k.pem",
            "channel=c,url=https://c.local/mcp,client-cert=/tls/c.pem,client-key=/tls/k.pem",
            "channel=d,url=https://d.local/mcp",
        ])
        .unwrap();
        let sockets: Vec<(&str, &str)> = c
            .tunnel
            .unix_sockets
            .iter()
            .map(|(u, p)| (u.as_str(), p.to_str().unwrap()))
            .collect();
        assert_eq!(
            sockets,
            [
                ("http://a.local/mcp", "/run/mcp/a.sock"),
                ("https://b.local/mcp", "/run/mcp/b.sock")
            ]
        );
        let own: Vec<&str> = c
            .tunnel
            .tls
            .mcp_servers
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(own, ["https://b.local/mcp", "https://c.local/mcp"]);
        assert!(c.tunnel.tls.mcp_identity.is_none());
        // The Go client's refusals, each naming the entry's problem.
        for (entry, why) in [
            (
                "url=http://a.local/mcp,unix-socket=/s,http-proxy=http://p:3128",
                "unix-socket= cannot be combined with http-proxy=",
            ),
            (
                "url=http://a.local/mcp,client-cert=/tls/c.pem",
                "client-cert= needs client-key=",
            ),
            (
                "url=http://a.local/mcp,client-key=/tls/k.pem",
                "client-key= needs client-cert=",
            ),
            (
                "url=http://a.local/mcp,socket=/s",
                "expected a URL or key=value pairs",
            ),
        ] {
            let e = resolve_urls(&[entry]).unwrap_err().0;
            assert!(e.contains(why), "{entry}: {e}");
        }
        let e = resolve_urls(&["url=http://a.local/mcp,unix-socket=env:NOPE"])
            .unwrap_err()
            .0;
        assert!(
            e.contains("unix-socket= (channel main)") && e.contains("\"NOPE\" is not set"),
            "{e}"
        );
        let e =
            resolve_urls(&["url=http://a.local/mcp,client-cert=/tls/k.pem,client-key=/tls/k.pem"])
                .unwrap_err()
                .0;
        assert!(e.contains("client-cert= (channel main)"), "{e}");
        // The tunnel keys a server's own transport by URL: one URL, two ways to reach it is
        // refused rather than one channel silently taking the other's socket.
        let e = resolve_urls(&[
            "url=http://localhost/mcp,unix-socket=/run/a.sock",
            "channel=b,url=http://localhost/mcp,unix-socket=/run/b.sock",
        ])
        .unwrap_err()
        .0;
        assert!(
            e.contains("channels main and b both name http://localhost/mcp")
                && e.contains("http://b.localhost/mcp"),
            "{e}"
        );
        let e = resolve_urls(&[
            "url=https://c.local/mcp,client-cert=/tls/c.pem,client-key=/tls/k.pem",
            "channel=b,url=https://c.local/mcp",
        ])
        .unwrap_err()
        .0;
        assert!(e.contains("channels main and b both name"), "{e}");
        // The same options twice share the server's transport.
        let c = resolve_urls(&[
            "url=http://localhost/mcp,unix-socket=/run/a.sock",
            "channel=b,url=http://localhost/mcp,unix-socket=/run/a.sock",
        ])
        .unwrap();
        assert_eq!(c.tunnel.unix_sockets.len(), 1);
    }

    #[test]
    fn the_admin_ui_is_on_for_loopback_by_default_and_each_layer_sets_it() {
        let c = run(base(), &[]).unwrap();
        assert_eq!(
            c.admin_ui,
            Some(AdminUiSettings {
                allow_remote: false,
                log_lines: 2000,
                show_harpoon_urls: false,
                allowed_hosts: Vec::new(),
            })
        );
        // The Go client's flag, its variable and its file key; ours.
        let mut a = base();
        a.admin_ui_allow_remote = Some("true".into());
        assert!(run(a, &[]).unwrap().admin_ui.unwrap().allow_remote);
        let c = run(
            base(),
            &[
                ("ALLOW_REMOTE_UI", "true"),
                ("ADMIN_UI_LOG_BUFFER_EVENTS", "50"),
            ],
        )
        .unwrap();
        assert_eq!(
            c.admin_ui.as_ref().map(|u| (u.allow_remote, u.log_lines)),
            Some((true, 50))
        );
        let yaml = "control_plane:\n  tunnel_id: tunnel_file\n  api_key: sk-x\nmcp:\n  server_urls:\n    - url: http://127.0.0.1:9/mcp\nadmin_ui:\n  allow_remote: true\n  log_buffer_events: 456\n";
        let c = run_file(RunArgs::default(), &[], yaml).unwrap();
        assert_eq!(
            c.admin_ui.as_ref().map(|u| (u.allow_remote, u.log_lines)),
            Some((true, 456))
        );
        assert!(
            c.warnings.iter().all(|w| !w.contains("admin_ui")),
            "{:?}",
            c.warnings
        );
        let mut a = base();
        a.admin_ui_disable = Some("true".into());
        assert_eq!(run(a, &[]).unwrap().admin_ui, None);
        assert_eq!(
            run(base(), &[("ADMIN_UI_DISABLE", "1")]).unwrap().admin_ui,
            None
        );
        // The Go client's bound.
        let mut a = base();
        a.admin_ui_log_buffer_events = Some("100001".into());
        let e = run(a, &[]).unwrap_err().0;
        assert!(e.contains("--admin-ui.log-buffer-events"), "{e}");
        let cli = [
            "mcpwire",
            "tunnel",
            "run",
            "--allow-remote-ui",
            "--admin-ui.disable",
        ];
        let parsed = <crate::Cli as clap::Parser>::try_parse_from(cli);
        assert!(parsed.is_ok(), "{:?}", parsed.err());
    }

    #[test]
    fn a_proxy_password_in_a_server_entry_is_never_repeated() {
        let mut a = base();
        a.server_urls = vec![
            "url=http://10.0.0.1/mcp,http-proxy=http://bob:hunter2pw@proxy:3128,unix-socket=/s"
                .into(),
        ];
        let e = run(a, &[]).unwrap_err().0;
        assert!(!e.contains("hunter2pw") && !e.contains("bob:"), "{e}");
        assert!(e.contains("http://***@proxy:3128"), "{e}");
        let yaml = "control_plane:\n  tunnel_id: tunnel_file\n  api_key: sk-x\nmcp:\n  server_urls:\n    - url: http://10.0.0.1/mcp\n      http_proxy: ftp://bob:hunter2pw@proxy:3128\n";
        let e = run_file(RunArgs::default(), &[], yaml).unwrap_err().0;
        assert!(!e.contains("hunter2pw"), "{e}");
        assert_eq!(
            redact_userinfo("a https://u:p@h/x,b http://h2/ c"),
            "a https://***@h/x,b http://h2/ c"
        );
    }

    #[test]
    fn the_files_api_key_comes_before_openai_api_key_and_references_ignore_case() {
        let yaml = "control_plane:\n  tunnel_id: tunnel_file\n  api_key: ENV:FILE_KEY\nmcp:\n  server_urls:\n    - url: http://10.0.0.1/mcp\n";
        let env = [("FILE_KEY", "sk-file"), ("OPENAI_API_KEY", "sk-openai")];
        let c = run_file(RunArgs::default(), &env, yaml).unwrap();
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-file");
        assert!(
            c.api_key_origin.starts_with("control_plane.api_key ("),
            "{}",
            c.api_key_origin
        );
        let env = [("FILE_KEY", "sk-file"), ("CONTROL_PLANE_API_KEY", "sk-cp")];
        assert_eq!(
            run_file(RunArgs::default(), &env, yaml)
                .unwrap()
                .tunnel
                .engine
                .api_key
                .expose(),
            "sk-cp"
        );
        let no_file_key = "control_plane:\n  tunnel_id: tunnel_file\nmcp:\n  server_urls:\n    - url: http://10.0.0.1/mcp\n";
        let c = run_file(
            RunArgs::default(),
            &[("OPENAI_API_KEY", "sk-openai")],
            no_file_key,
        )
        .unwrap();
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-openai");
    }

    #[test]
    fn go_only_settings_fail_as_flags_and_warn_as_variables_and_ids_are_checked() {
        let mut a = base();
        a.go_only.given = vec!["control-plane.poll-deadline-guardrail"];
        let e = run(a, &[]).unwrap_err().0;
        assert!(
            e.starts_with("--control-plane.poll-deadline-guardrail is a Go tunnel-client flag"),
            "{e}"
        );
        let c = run(base(), &[("CONTROL_PLANE_POLL_DEADLINE_GUARDRAIL", "5s")]).unwrap();
        assert!(
            c.warnings
                .iter()
                .any(|w| w.starts_with("CONTROL_PLANE_POLL_DEADLINE_GUARDRAIL is set")),
            "{:?}",
            c.warnings
        );
        // tun_1 is not the Go client's form: a warning, not a refusal (ids are opaque).
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("not in the Go client's form")));
        let mut a = base();
        a.tunnel_id = Some("tunnel_0123456789abcdef0123456789abcdef".into());
        assert!(run(a, &[]).unwrap().warnings.is_empty());
        let mut a = base();
        a.tunnel_id = Some("a/b".into());
        assert!(run(a, &[]).unwrap_err().0.contains("a tunnel id has only"));
    }

    #[test]
    fn api_key_forms_literal_env_and_file() {
        let c = run(base(), &[]).unwrap();
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-literal");
        let mut a = base();
        a.api_key = Some("env:MY_KEY".into());
        let c = run(a, &[("MY_KEY", "sk-env")]).unwrap();
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-env");
        let mut a = base();
        a.api_key = Some("file:/keys/cp".into());
        assert_eq!(
            run(a, &[]).unwrap().tunnel.engine.api_key.expose(),
            "from-file-key"
        );
        let mut a = base();
        a.api_key = None;
        let c = run(a, &[("CONTROL_PLANE_API_KEY", "sk-cp")]).unwrap();
        assert_eq!(c.tunnel.engine.api_key.expose(), "sk-cp");
    }

    #[test]
    fn a_bad_value_is_one_line_naming_the_flag_and_what_is_allowed() {
        let mut a = base();
        a.max_inflight = Some("lots".into());
        let e = run(a, &[]).unwrap_err().0;
        assert!(
            e.contains("--control-plane.max-inflight") && e.contains("1 to 10000"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let e = run(base(), &[("LOG_FORMAT", "xml")]).unwrap_err().0;
        assert!(
            e.contains("--log.format (from LOG_FORMAT)") && e.contains("text or json"),
            "{e}"
        );
        let mut a = base();
        a.driver = Some("tokio".into());
        assert!(run(a, &[]).unwrap_err().0.contains("blocking or smol"));
        let mut a = base();
        a.poll_timeout = Some("soon".into());
        assert!(run(a, &[])
            .unwrap_err()
            .0
            .contains("--control-plane.poll-timeout"));
    }

    #[test]
    fn a_missing_key_file_is_named_but_a_key_value_is_never_echoed() {
        let mut a = base();
        a.api_key = Some("file:/nope".into());
        let e = run(a, &[]).unwrap_err().0;
        assert!(e.contains("/nope"), "{e}");
        let mut a = base();
        a.api_key = Some("sk-abc\u{7}".into());
        let e = run(a, &[]).unwrap_err().0;
        assert!(!e.contains("sk-abc"), "{e}");
    }

    #[test]
    fn server_and_command_entries_name_channels() {
        let mut a = base();
        a.server_urls = vec!["channel=docs,url=http://127.0.0.1:1/mcp".into()];
        a.commands = vec![
            "python3 -m server --flag 'two words'".into(),
            "command=node srv.js,a,channel=tools".into(),
        ];
        let c = run(a, &[]).unwrap();
        assert_eq!(c.tunnel.targets.len(), 3);
        assert_eq!(c.tunnel.targets[1].channel, "main");
        assert_eq!(
            c.tunnel.targets[1].kind,
            TargetKind::Stdio {
                argv: vec![
                    "python3".into(),
                    "-m".into(),
                    "server".into(),
                    "--flag".into(),
                    "two words".into()
                ]
            }
        );
        assert_eq!(c.tunnel.targets[2].channel, "tools");
        let info = c.tunnel.engine.server_info.unwrap();
        assert!(info.header_value().contains("\"proc_affinity\":true"));
    }

    #[test]
    fn main_is_required_unless_poll_channels_exclude_it_and_channels_are_unique() {
        let mut a = base();
        a.server_urls = vec!["channel=docs,url=http://h/mcp".into()];
        assert!(run(a.clone(), &[]).unwrap_err().0.contains("channel main"));
        let c = run(a, &[("CONTROL_PLANE_POLL_CHANNELS", "docs")]).unwrap();
        assert_eq!(c.tunnel.engine.poll_channels, Some(vec!["docs".to_owned()]));
        let mut a = base();
        a.commands = vec!["srv".into()];
        assert!(run(a, &[]).unwrap_err().0.contains("configured twice"));
        let mut a = base();
        a.poll_channels = vec!["other".into()];
        assert!(run(a, &[]).unwrap_err().0.contains("has no MCP server"));
    }

    #[test]
    fn env_entries_are_one_per_line_and_urls_are_checked() {
        let mut a = base();
        a.server_urls = vec![];
        let c = run(
            a.clone(),
            &[(
                "MCP_SERVER_URL",
                "http://a/mcp\nchannel=b,url=https://b/mcp\n",
            )],
        )
        .unwrap();
        assert_eq!(c.tunnel.targets.len(), 2);
        let e = run(a, &[("MCP_SERVER_URL", "ftp://x")]).unwrap_err().0;
        assert!(
            e.contains("(from MCP_SERVER_URL)") && e.contains("http://"),
            "{e}"
        );
    }

    #[test]
    fn durations_and_argv_follow_go() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1h2m"), Some(Duration::from_secs(3720)));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(
            parse_argv(r#"a "b c" d\ e 'f"g'"#).unwrap(),
            vec!["a", "b c", "d e", "f\"g"]
        );
        assert!(parse_argv("a 'b").is_err());
        assert!(parse_argv("   ").is_err());
    }

    #[test]
    fn cloudflared_is_off_unless_managed_or_a_static_token_is_given() {
        assert!(run(base(), &[]).unwrap().tunnel.cloudflared.is_none());
        let mut a = base();
        a.cloudflared_managed = Some("true".into());
        let c = run(a, &[]).unwrap().tunnel.cloudflared.unwrap();
        assert!(matches!(c.token, CloudflaredToken::Managed));
        assert_eq!(c.path, "cloudflared");
        assert_eq!(c.ready_timeout, Duration::from_secs(30));
        let c = run(
            base(),
            &[
                ("CLOUDFLARED_MANAGED", "1"),
                ("CLOUDFLARED_PATH", "/opt/cf"),
            ],
        )
        .unwrap()
        .tunnel
        .cloudflared
        .unwrap();
        assert!(matches!(c.token, CloudflaredToken::Managed));
        assert_eq!(c.path, "/opt/cf");
    }

    #[test]
    fn a_static_cloudflared_token_takes_precedence_in_every_form() {
        let mut a = base();
        a.cloudflared_managed = Some("true".into());
        a.cloudflared_token = Some("env:CF_TOK".into());
        let c = run(a, &[("CF_TOK", "tok-from-env")])
            .unwrap()
            .tunnel
            .cloudflared
            .unwrap();
        let CloudflaredToken::Static(t) = &c.token else {
            panic!("expected a static token")
        };
        assert_eq!(t.expose(), "tok-from-env");
        assert!(c.secret_vars.contains(&"CF_TOK".to_owned()));
        let mut a = base();
        a.cloudflared_token = Some("file:/keys/cp".into());
        let c = run(a, &[]).unwrap().tunnel.cloudflared.unwrap();
        assert!(matches!(&c.token, CloudflaredToken::Static(t) if t.expose() == "from-file-key"));
        let c = run(base(), &[("CLOUDFLARED_TUNNEL_TOKEN", "tok-direct")])
            .unwrap()
            .tunnel
            .cloudflared
            .unwrap();
        assert!(matches!(&c.token, CloudflaredToken::Static(t) if t.expose() == "tok-direct"));
    }

    #[test]
    fn a_bad_cloudflared_setting_names_the_flag_and_never_echoes_the_token() {
        let mut a = base();
        a.cloudflared_token = Some("tok secret".into());
        let e = run(a, &[]).unwrap_err().0;
        assert!(
            e.contains("--cloudflared.token") && !e.contains("secret"),
            "{e}"
        );
        let mut a = base();
        a.cloudflared_token = Some("env:NOPE".into());
        assert!(run(a, &[]).unwrap_err().0.contains("\"NOPE\""));
        let e = run(base(), &[("CLOUDFLARED_MANAGED", "maybe")])
            .unwrap_err()
            .0;
        assert!(
            e.contains("--cloudflared.managed (from CLOUDFLARED_MANAGED)"),
            "{e}"
        );
        let mut a = base();
        a.cloudflared_managed = Some("true".into());
        a.cloudflared_ready_timeout = Some("1ms".into());
        assert!(run(a, &[])
            .unwrap_err()
            .0
            .contains("--cloudflared.ready-timeout"));
    }

    fn harpoon_only() -> RunArgs {
        RunArgs {
            tunnel_id: Some("tun_1".into()),
            api_key: Some("sk-literal".into()),
            poll_channels: vec!["harpoon".into()],
            ..RunArgs::default()
        }
    }

    #[test]
    fn harpoon_targets_come_from_flags_or_the_environment_and_errors_name_the_entry() {
        let mut a = base();
        a.harpoon_targets = vec![
            r#"label=idp,url=https://idp.corp.example/token,desc="Token, internal""#.into(),
            "label=api,url=https://api.corp.example/v1".into(),
        ];
        let c = run(
            a.clone(),
            &[("HARPOON_TARGETS", "label=ignored,url=https://x.example")],
        )
        .unwrap();
        let h = c.tunnel.harpoon.as_ref().unwrap();
        let labels: Vec<&str> = h.registry.iter().map(|t| t.label()).collect();
        assert_eq!(labels, ["idp", "api"]);
        assert_eq!(
            h.registry.get("idp").unwrap().description(),
            "Token, internal"
        );
        assert_eq!(h.max_response_cap, 100 * 1024);

        let c = run(
            base(),
            &[(
                "HARPOON_TARGETS",
                "label=a,url=https://a.example/x;label=b,url=https://b.example\nlabel=c,url=https://c.example",
            )],
        )
        .unwrap();
        assert_eq!(c.tunnel.harpoon.unwrap().registry.len(), 3);

        for (entry, needle) in [
            ("label=Bad,url=https://a.example", "#1 ('Bad')"),
            ("label=a,url=http://a.example", "https"),
            ("label=a,url=https://a.example/x/../y", "'..'"),
            ("label=a,url=/relative", "absolute"),
            ("label=a", "no url="),
            ("label=a,url=https://a.example,port=1", "unknown key"),
        ] {
            let mut a = base();
            a.harpoon_targets = vec![entry.into()];
            let e = run(a, &[]).unwrap_err().0;
            assert!(e.starts_with("invalid --harpoon.target: "), "{e}");
            assert!(e.contains(needle), "{entry}: {e}");
        }
        let mut a = base();
        a.harpoon_targets = vec![
            "label=a,url=https://a.example".into(),
            "label=a,url=https://b.example".into(),
        ];
        assert!(run(a, &[]).unwrap_err().0.contains("registered already"));
        let e = run(
            base(),
            &[("HARPOON_TARGETS", "label=a,url=https://a.example;label=B")],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("HARPOON_TARGETS entry #2"), "{e}");

        let mut a = base();
        a.harpoon_targets = vec!["label=a,url=http://10.0.0.5/token".into()];
        a.harpoon_allow_plaintext = Some("true".into());
        a.harpoon_max_response_bytes = Some("2048".into());
        let h = run(a.clone(), &[]).unwrap().tunnel.harpoon.unwrap();
        assert!(h.registry.allows_plaintext());
        assert_eq!(h.max_response_cap, 2048);
        assert_eq!(h.max_redirects, 5);
        let h = run(a.clone(), &[("HARPOON_MAX_REDIRECTS", "2")])
            .unwrap()
            .tunnel
            .harpoon
            .unwrap();
        assert_eq!(h.max_redirects, 2);
        let e = run(a, &[("HARPOON_MAX_REDIRECTS", "21")]).unwrap_err().0;
        assert!(e.contains("expected a whole number from 1 to 20"), "{e}");
        for bad_cap in ["0", "8388609", "lots"] {
            let mut a = base();
            a.harpoon_targets = vec!["label=a,url=https://a.example".into()];
            a.harpoon_max_response_bytes = Some(bad_cap.into());
            let e = run(a, &[]).unwrap_err().0;
            assert!(e.contains("--harpoon.max-response-bytes"), "{e}");
        }
    }

    #[test]
    fn the_harpoon_channel_is_reserved_and_may_be_served_alone() {
        let mut a = base();
        a.server_urls = vec!["channel=harpoon,url=http://127.0.0.1:9/mcp".into()];
        let e = run(a, &[]).unwrap_err().0;
        assert!(e.contains("reserved for the built-in Harpoon"), "{e}");
        let mut a = base();
        a.poll_channels = vec!["main".into(), "harpoon".into()];
        a.harpoon_oauth_discovery = Some("false".into());
        let e = run(a, &[]).unwrap_err().0;
        assert!(e.contains("Harpoon has no target"), "{e}");

        let mut a = harpoon_only();
        a.harpoon_targets = vec!["label=idp,url=https://idp.corp.example/token".into()];
        let c = run(a, &[]).unwrap();
        assert!(c.tunnel.targets.is_empty());
        assert!(c.tunnel.engine.server_info.is_none());
        assert!(c.tunnel.engine.channels.is_empty());
        assert_eq!(
            c.tunnel.engine.poll_channels,
            Some(vec!["harpoon".to_owned()])
        );
        assert!(c.tunnel.harpoon_discovery.is_none());
        let e = run(harpoon_only(), &[]).unwrap_err().0;
        assert!(e.contains("Harpoon has no target"), "{e}");
    }

    #[test]
    fn oauth_discovery_is_on_for_an_http_main_channel_and_takes_the_host_switches() {
        let c = run(base(), &[]).unwrap();
        let d = c.tunnel.harpoon_discovery.unwrap();
        assert_eq!(d.server_url, "http://127.0.0.1:3000/mcp");
        assert_eq!(d.filter.mcp_host, "127.0.0.1");
        assert!(d.filter.include_loopback && d.filter.include_private);
        assert!(d.filter.suffixes.is_empty() && d.filter.patterns.is_empty());
        // Discovery may add targets: Harpoon is there, with an empty registry.
        assert!(c.tunnel.harpoon.unwrap().registry.is_empty());

        let c = run(
            base(),
            &[
                ("HARPOON_HOSTS_INCLUDE_LOOPBACK", "false"),
                ("HARPOON_HOSTS_INCLUDE_PRIVATE", "0"),
                ("HARPOON_HOSTS_INCLUDE_SUFFIX", "corp.example;.int.example"),
                ("HARPOON_HOSTS_INCLUDE_REGEX", "idp-[0-9]+\\.example"),
            ],
        )
        .unwrap();
        let f = c.tunnel.harpoon_discovery.unwrap().filter;
        assert!(!f.include_loopback && !f.include_private);
        assert_eq!(f.suffixes, ["corp.example", ".int.example"]);
        assert!(f.patterns[0].is_match("IDP-7.example"));

        let mut a = base();
        a.harpoon_include_patterns = vec!["idp-(".into()];
        let e = run(a, &[]).unwrap_err().0;
        assert!(
            e.starts_with("invalid --harpoon.hosts-include-regex: "),
            "{e}"
        );

        let mut a = base();
        a.harpoon_oauth_discovery = Some("false".into());
        let c = run(a, &[]).unwrap();
        assert!(c.tunnel.harpoon.is_none() && c.tunnel.harpoon_discovery.is_none());

        let mut a = base();
        a.server_urls = Vec::new();
        a.commands = vec!["my-server --stdio".into()];
        let c = run(a.clone(), &[]).unwrap();
        assert!(c.tunnel.harpoon_discovery.is_none());
        a.harpoon_oauth_discovery = Some("true".into());
        let e = run(a, &[]).unwrap_err().0;
        assert!(e.contains("channel main's Streamable HTTP server"), "{e}");
    }
}
