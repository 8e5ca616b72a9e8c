//! The schema: each key of the Go client's file and the environment variable it stands for.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A string (a number is taken as written).
    Text,
    /// A string that may be `env:VAR` or `file:PATH`, resolved when the file is read (the Go
    /// client resolves these keys at load).
    Reference,
    /// `true` or `false`.
    Bool,
    /// A whole number.
    Int,
    /// A list of strings.
    List,
    /// A mapping of header names to values (`env:`/`file:` allowed in values).
    Headers,
    /// `mcp.server_urls`: mappings with `url` and optional `channel`, `unix_socket`,
    /// `http_proxy`, `client_cert`, `client_key`.
    ServerUrls,
    /// `mcp.commands`: mappings with `command` and optional `channel`.
    Commands,
    /// `harpoon.targets`: mappings with `label`, `url` and optional `description`,
    /// `unix_socket`.
    HarpoonTargets,
}

/// `(key, variable, kind)`: the Go client's file schema (`pkg/runtimeconfig/file_config.go`).
pub(super) const KEYS: &[(&str, &str, Kind)] = &[
    ("ca_bundle", "CA_BUNDLE", Kind::Text),
    ("http_proxy", "TUNNEL_CLIENT_HTTP_PROXY", Kind::Text),
    (
        "control_plane.base_url",
        "CONTROL_PLANE_BASE_URL",
        Kind::Reference,
    ),
    (
        "control_plane.url_path",
        "CONTROL_PLANE_URL_PATH",
        Kind::Reference,
    ),
    (
        "control_plane.tunnel_id",
        "CONTROL_PLANE_TUNNEL_ID",
        Kind::Text,
    ),
    (
        "control_plane.organization_id",
        "CONTROL_PLANE_ORGANIZATION_ID",
        Kind::Text,
    ),
    ("control_plane.api_key", "CONTROL_PLANE_API_KEY", Kind::Text),
    (
        "control_plane.client_cert",
        "CONTROL_PLANE_CLIENT_CERT",
        Kind::Text,
    ),
    (
        "control_plane.client_key",
        "CONTROL_PLANE_CLIENT_KEY",
        Kind::Text,
    ),
    (
        "control_plane.http_proxy",
        "CONTROL_PLANE_HTTP_PROXY",
        Kind::Text,
    ),
    (
        "control_plane.max_inflight_requests",
        "CONTROL_PLANE_MAX_INFLIGHT_REQUESTS",
        Kind::Int,
    ),
    (
        "control_plane.poll_timeout",
        "CONTROL_PLANE_POLL_TIMEOUT",
        Kind::Text,
    ),
    (
        "control_plane.poll_deadline_guardrail",
        "CONTROL_PLANE_POLL_DEADLINE_GUARDRAIL",
        Kind::Text,
    ),
    (
        "control_plane.poll_channels",
        "CONTROL_PLANE_POLL_CHANNELS",
        Kind::List,
    ),
    (
        "control_plane.extra_headers",
        "CONTROL_PLANE_EXTRA_HEADERS",
        Kind::Headers,
    ),
    ("log.level", "LOG_LEVEL", Kind::Text),
    ("log.format", "LOG_FORMAT", Kind::Text),
    ("log.file", "LOG_FILE", Kind::Text),
    ("log.http_raw_unsafe", "LOG_HTTP_RAW_UNSAFE", Kind::Bool),
    ("health.listen_addr", "HEALTH_LISTEN_ADDR", Kind::Reference),
    ("health.unix_socket", "HEALTH_UNIX_SOCKET", Kind::Reference),
    ("health.url_file", "HEALTH_URL_FILE", Kind::Text),
    ("admin_ui.allow_remote", "ALLOW_REMOTE_UI", Kind::Bool),
    ("admin_ui.open_browser", "OPEN_WEB_UI", Kind::Bool),
    (
        "admin_ui.log_buffer_events",
        "ADMIN_UI_LOG_BUFFER_EVENTS",
        Kind::Int,
    ),
    ("process.pid_file", "PID_FILE", Kind::Text),
    ("cloudflared.token", "CLOUDFLARED_TUNNEL_TOKEN", Kind::Text),
    ("cloudflared.managed", "CLOUDFLARED_MANAGED", Kind::Bool),
    ("cloudflared.path", "CLOUDFLARED_PATH", Kind::Text),
    (
        "cloudflared.ready_timeout",
        "CLOUDFLARED_READY_TIMEOUT",
        Kind::Text,
    ),
    ("mcp.server_urls", "MCP_SERVER_URL", Kind::ServerUrls),
    ("mcp.commands", "MCP_COMMAND", Kind::Commands),
    ("mcp.http_proxy", "MCP_HTTP_PROXY", Kind::Text),
    ("mcp.client_cert", "MCP_CLIENT_CERT", Kind::Text),
    ("mcp.client_key", "MCP_CLIENT_KEY", Kind::Text),
    ("mcp.extra_headers", "MCP_EXTRA_HEADERS", Kind::Headers),
    (
        "mcp.discovery_extra_headers",
        "MCP_DISCOVERY_EXTRA_HEADERS",
        Kind::Headers,
    ),
    (
        "mcp.startup_wait_timeout",
        "MCP_STARTUP_WAIT_TIMEOUT",
        Kind::Text,
    ),
    (
        "mcp.connection_max_ttl",
        "MCP_CONNECTION_MAX_TTL",
        Kind::Text,
    ),
    (
        "mcp.max_concurrent_requests",
        "MCP_MAX_CONCURRENT_REQUESTS",
        Kind::Int,
    ),
    ("harpoon.targets", "HARPOON_TARGETS", Kind::HarpoonTargets),
    (
        "harpoon.allow_plaintext_http",
        "HARPOON_ALLOW_PLAINTEXT_HTTP",
        Kind::Bool,
    ),
    (
        "harpoon.max_response_bytes",
        "HARPOON_MAX_RESPONSE_BYTES",
        Kind::Int,
    ),
    ("harpoon.max_redirects", "HARPOON_MAX_REDIRECTS", Kind::Int),
    ("harpoon.http_proxy", "HARPOON_HTTP_PROXY", Kind::Text),
    (
        "harpoon.additional_transports",
        "HARPOON_ADDITIONAL_TRANSPORTS",
        Kind::List,
    ),
    (
        "harpoon.capture_payloads",
        "HARPOON_CAPTURE_PAYLOADS",
        Kind::Bool,
    ),
    (
        "harpoon.hosts_include_suffix",
        "HARPOON_HOSTS_INCLUDE_SUFFIX",
        Kind::List,
    ),
    (
        "harpoon.hosts_include_regex",
        "HARPOON_HOSTS_INCLUDE_REGEX",
        Kind::List,
    ),
    (
        "harpoon.hosts_include_loopback",
        "HARPOON_HOSTS_INCLUDE_LOOPBACK",
        Kind::Bool,
    ),
    (
        "harpoon.hosts_include_private",
        "HARPOON_HOSTS_INCLUDE_PRIVATE",
        Kind::Bool,
    ),
    ("proxy.check_interval", "PROXY_CHECK_INTERVAL", Kind::Text),
];

/// The file key a variable is read from, if the file has one.
#[must_use]
pub fn key_for_variable(var: &str) -> Option<&'static str> {
    KEYS.iter().find(|(_, v, _)| *v == var).map(|(k, ..)| *k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_stands_for_one_variable() {
        for (key, var, _) in KEYS {
            assert_eq!(key_for_variable(var), Some(*key));
            assert_eq!(KEYS.iter().filter(|(k, ..)| k == key).count(), 1, "{key}");
        }
        assert_eq!(key_for_variable("NOT_A_VARIABLE"), None);
    }
}
