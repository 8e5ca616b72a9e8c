//! What the configuration says for the admin UI's overview and diagnostic bundle, made once at
//! start-up and without a secret: hosts and command names, never a URL's path or query, a
//! command's arguments, a key, a token, a header value or a password.

use mcpwire::tunnel::TargetKind;
use mcpwire_core::net_policy::proxy::ProxyRoute;
use serde_json::{json, Value};

use super::super::config::{Driver, RunConfig};

/// The configuration's part of the overview.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fixed {
    /// Instance, versions, tunnel id, driver, channels, the server-info header.
    pub summary: Value,
    /// The effective configuration with secrets removed (for the bundle).
    pub configuration: Value,
    /// Harpoon's targets: labels, descriptions and tags (URLs only when asked for).
    pub harpoon_targets: Value,
}

/// `host[:port]` of `url`, or `?`.
fn host_of(url: &str) -> String {
    match mcpwire_core::net_policy::Url::parse(url) {
        Ok(u) => match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            _ => "?".to_owned(),
        },
        Err(_) => "?".to_owned(),
    }
}

/// Which proxy a route takes, never its credentials (`ProxyUrl`'s `Display` has none).
fn route_summary(route: &ProxyRoute) -> Value {
    match route {
        ProxyRoute::Direct => json!("direct"),
        ProxyRoute::Explicit(p) => json!(p.to_string()),
        ProxyRoute::Environment { http, https, .. } => json!({
            "from": "environment",
            "http": http.as_ref().map(ToString::to_string),
            "https": https.as_ref().map(ToString::to_string),
        }),
    }
}

/// A URL as the page may show it: scheme, host, port and path; never userinfo, a query or a
/// fragment (which can carry credentials).
fn shown_url(url: &str) -> String {
    match mcpwire_core::net_policy::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or("?");
            let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{host}{port}{}", u.scheme(), u.path())
        }
        Err(_) => "?".to_owned(),
    }
}

/// The program's file name, without its directory or arguments.
fn command_name(argv: &[String]) -> String {
    argv.first()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
        .unwrap_or_default()
}

impl Fixed {
    /// The overview of `config`, for `health` (the listener's address), with Harpoon's URLs
    /// when `show_urls`.
    pub fn of(config: &RunConfig, health: &str, show_urls: bool) -> Self {
        let t = &config.tunnel;
        let channels: Vec<Value> = t
            .targets
            .iter()
            .map(|target| match &target.kind {
                TargetKind::Http { url } => json!({
                    "channel": target.channel,
                    "binding": "http",
                    "target": host_of(url),
                    "unix_socket": t.unix_sockets.contains_key(url),
                }),
                TargetKind::Stdio { argv } => json!({
                    "channel": target.channel,
                    "binding": "stdio",
                    "target": command_name(argv),
                }),
            })
            .chain(
                t.harpoon
                    .as_ref()
                    .filter(|h| !h.registry.is_empty())
                    .map(|h| {
                        json!({
                            "channel": mcpwire_core::tunnel::HARPOON_CHANNEL,
                            "binding": "harpoon",
                            "target": format!("{} targets", h.registry.len()),
                        })
                    }),
            )
            .collect();
        let driver = match config.driver {
            Driver::Blocking => "blocking",
            Driver::Smol => "smol",
        };
        let summary = json!({
            "instance_id": t.engine.instance_id,
            "client_version": env!("CARGO_PKG_VERSION"),
            "wire_version": mcpwire_core::tunnel::WIRE_PROTOCOL_VERSION,
            "tunnel_id": t.engine.tunnel_id,
            "driver": driver,
            "control_plane_host": host_of(&t.engine.base_url),
            "health_listener": health,
            "channels": channels,
            "server_info_header": t.engine.server_info.as_ref().map(|s| s.header_value()),
        });
        let proxies = json!({
            "control_plane": route_summary(&t.proxies.control_plane),
            "mcp": route_summary(&t.proxies.mcp),
            "servers": t.proxies.servers.iter()
                .map(|(url, p)| (host_of(url), json!(p.to_string())))
                .collect::<serde_json::Map<_, _>>(),
        });
        let configuration = json!({
            "tunnel_id": t.engine.tunnel_id,
            "control_plane": host_of(&t.engine.base_url),
            "api_key": "(set; never shown)",
            "api_key_from": config.api_key_origin,
            "config_file": config.config_source.as_ref().map(|s| s.path.clone()),
            "driver": driver,
            "channels": summary["channels"],
            "poll_channels": t.engine.poll_channels,
            "max_in_flight": t.engine.max_in_flight,
            "max_concurrent_forwards": t.engine.max_concurrent_forwards,
            "poll_wait_ms": t.engine.poll_wait.as_millis() as u64,
            "extra_control_plane_headers": t.engine.extra_headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            "extra_mcp_headers": t.mcp_extra_headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            "proxies": proxies,
            "mcp_client_certificate": t.tls.mcp_identity.is_some(),
            "control_plane_client_certificate": t.tls.control_plane_identity.is_some(),
            "system_trust_store": t.tls.system_roots,
            "ca_bundle_certificates": t.tls.extra_roots.len(),
            "own_transports": t.own_transports().iter().map(|u| host_of(u)).collect::<Vec<_>>(),
            "cloudflared": t.cloudflared.as_ref().map(|c| c.path.clone()),
            "log_level": config.log_level.as_str(),
            "log_format": if config.log_json { "json" } else { "text" },
            "health_listener": health,
            "shutdown_grace_ms": t.grace.as_millis() as u64,
            "warnings": config.warnings,
        });
        let harpoon_targets: Vec<Value> = t
            .harpoon
            .iter()
            .flat_map(|h| h.registry.iter())
            .map(|target| {
                let mut v = json!({
                    "label": target.label(),
                    "description": target.description(),
                    "tags": target.tags(),
                    "category": target.category(),
                });
                if show_urls {
                    v["url"] = json!(shown_url(target.url()));
                }
                v
            })
            .collect();
        Fixed {
            summary,
            configuration,
            harpoon_targets: Value::Array(harpoon_targets),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_url_has_no_credentials_query_or_fragment() {
        assert_eq!(
            shown_url("https://bob:pw@api.corp:8443/v1/token?key=secret#frag"),
            "https://api.corp:8443/v1/token"
        );
        assert_eq!(
            host_of("http://user:pw@10.0.0.1:9000/mcp?t=x"),
            "10.0.0.1:9000"
        );
        assert_eq!(
            command_name(&["/usr/local/bin/server".into(), "--token=x".into()]),
            "server"
        );
    }
}
