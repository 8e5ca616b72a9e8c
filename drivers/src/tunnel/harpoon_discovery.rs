//! Harpoon's OAuth discovery at start-up, for both drivers: the core's
//! [`MetadataDiscovery`] says what to fetch, a driver fetches it (each document under the URL
//! policy, its host resolved once and every address checked, as the authorization flow's
//! fetches are), and what it found is registered in the Harpoon configuration before the
//! tunnel starts. Discovery never stops the tunnel: what went wrong is logged (without the
//! authorization server's URLs), and the configured targets are served either way.

use std::net::IpAddr;
use std::time::Duration;

use mcpwire_core::tunnel::harpoon::discovery::{discovered_targets, MetadataDiscovery};
use mcpwire_core::tunnel::harpoon::TargetSpec;

use super::config::{HarpoonDiscovery, TunnelConfig};
use super::log::{Level, Logger};
use crate::net::guard::system_lookup;

/// How long one discovery fetch may take, connecting and reading included.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The discovery to run, when the configuration asks for one and has a Harpoon to add to; a
/// discovery whose server URL cannot be used is logged and skipped.
pub(crate) fn begin(
    config: &TunnelConfig,
    log: &Logger,
) -> Option<(HarpoonDiscovery, MetadataDiscovery)> {
    let wanted = config.harpoon_discovery.clone()?;
    if config.harpoon.is_none() {
        log.log(
            Level::Warn,
            "harpoon oauth discovery skipped: Harpoon is not configured",
            &[],
        );
        return None;
    }
    if config.unix_sockets.contains_key(&wanted.server_url) {
        log.log(
            Level::Warn,
            "harpoon oauth discovery skipped: the main MCP server is reached over a Unix socket, \
             which discovery does not use (register the targets with --harpoon.target instead)",
            &[],
        );
        return None;
    }
    match MetadataDiscovery::new(&wanted.server_url, wanted.policy) {
        Ok(d) => Some((wanted, d.with_server_headers(config.discovery_headers()))),
        Err(e) => {
            log.log(
                Level::Warn,
                "harpoon oauth discovery skipped",
                &[("reason", &e)],
            );
            None
        }
    }
}

/// Addresses of `host` from the system's resolver (empty when it does not resolve).
fn resolve(host: &str) -> Vec<IpAddr> {
    system_lookup(host, 443).unwrap_or_default()
}

/// The targets `d`'s documents give under `wanted`'s host filter (resolving host names:
/// blocking).
pub(crate) fn found(wanted: &HarpoonDiscovery, d: &MetadataDiscovery) -> Vec<TargetSpec> {
    discovered_targets(d.metadata(), &wanted.filter, resolve)
}

/// Registers `specs` in the configuration's Harpoon and logs the outcome: each problem, then
/// the labels registered (never a URL). A label taken by a configured target is skipped.
pub(crate) fn register(
    config: &mut TunnelConfig,
    d: &MetadataDiscovery,
    specs: Vec<TargetSpec>,
    log: &Logger,
) {
    for problem in d.problems() {
        log.log(
            Level::Warn,
            "harpoon oauth discovery",
            &[("problem", problem)],
        );
    }
    let Some(harpoon) = config.harpoon.as_mut() else {
        return;
    };
    let mut labels = Vec::new();
    for spec in specs {
        let label = spec.label.clone();
        match harpoon.registry.register(spec) {
            Ok(_) => labels.push(label),
            Err(e) => log.log(
                Level::Warn,
                "harpoon oauth discovery: target not registered",
                &[("reason", &e)],
            ),
        }
    }
    log.log(
        Level::Info,
        "harpoon oauth discovery done",
        &[
            ("authorization_servers", &d.metadata().len()),
            ("registered", &labels.len()),
            ("labels", &labels.join(",")),
        ],
    );
}

/// The blocking driver's fetch of one discovery request: the MCP server's probe on an
/// ordinary agent (only its head is read), a document on an agent of its own whose resolver
/// connects only to addresses the URL policy let through.
#[cfg(feature = "blocking")]
pub(crate) fn fetch_blocking(
    tls: &ureq::tls::TlsConfig,
    proxies: &mcpwire_core::net_policy::proxy::ProxyRoute,
    fetch: &mcpwire_core::tunnel::harpoon::discovery::DiscoveryFetch,
    policy: mcpwire_core::net_policy::NetPolicy,
) -> Result<(mcpwire_core::http::ResponseHead, Vec<u8>), String> {
    use crate::net::guard::Guarded;
    use crate::net::ureq as http;
    use mcpwire_core::net_policy::FetchGuard;
    use mcpwire_core::tunnel::harpoon::discovery::MAX_DOCUMENT_BYTES;

    let Some(purpose) = fetch.purpose else {
        let agent = http::mcp_agent(tls.clone());
        let proxy = proxies.for_url(&fetch.request.url);
        let response = http::send_via(&agent, proxy, &fetch.request, Some(FETCH_TIMEOUT))
            .map_err(|e| ureq_cause(&e))?;
        return Ok((http::head_of(&response), Vec::new()));
    };
    let guard = FetchGuard { policy, purpose };
    let url = guard
        .check_url(&fetch.request.url)
        .map_err(|e| e.reason.to_string())?;
    let guarded = Guarded {
        guard,
        url,
        lookup: system_lookup,
    };
    let config = ureq::Agent::config_builder()
        .tls_config(tls.clone())
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(FETCH_TIMEOUT))
        .user_agent(concat!("mcpwire/", env!("CARGO_PKG_VERSION")))
        .build();
    let refused = http::Refusal::default();
    let agent = http::guarded_agent(config, guarded, std::sync::Arc::clone(&refused));
    let proxy = proxies.for_url(&fetch.request.url);
    let mut response = match http::send_via(&agent, proxy, &fetch.request, Some(FETCH_TIMEOUT)) {
        Ok(r) => r,
        Err(e) => {
            let rejected = refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            return Err(match rejected {
                Some(r) => r.reason.to_string(),
                None => ureq_cause(&e),
            });
        }
    };
    let head = http::head_of(&response);
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_DOCUMENT_BYTES)
        .read_to_vec()
        .map_err(|_| format!("the body is unreadable or over {MAX_DOCUMENT_BYTES} bytes"))?;
    Ok((head, body))
}

/// What went wrong, in words that hold no URL (ureq's own text may quote one).
#[cfg(feature = "blocking")]
fn ureq_cause(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => format!("the exchange failed: {}", io.kind()),
        ureq::Error::HostNotFound => "the host name did not resolve".to_owned(),
        ureq::Error::Timeout(_) => "timed out".to_owned(),
        ureq::Error::ConnectionFailed => "cannot connect".to_owned(),
        _ => "the request failed".to_owned(),
    }
}

/// The smol driver's fetch of one discovery request (see [`fetch_blocking`]): a document's
/// host resolved once on smol's blocking pool and every address checked, then a connection of
/// its own to a checked address.
#[cfg(feature = "smol")]
pub(crate) async fn fetch_smol(
    tls: &std::sync::Arc<futures_rustls::rustls::ClientConfig>,
    proxies: &mcpwire_core::net_policy::proxy::ProxyRoute,
    fetch: &mcpwire_core::tunnel::harpoon::discovery::DiscoveryFetch,
    policy: mcpwire_core::net_policy::NetPolicy,
) -> Result<(mcpwire_core::http::ResponseHead, Vec<u8>), String> {
    use crate::mcp::smol::describe;
    use crate::net::guard::{Guarded, PinError};
    use crate::net::hyper_smol as http;
    use mcpwire_core::net_policy::FetchGuard;
    use mcpwire_core::tunnel::harpoon::discovery::MAX_DOCUMENT_BYTES;
    use smol::future::FutureExt as _;

    let work = async {
        let Some(purpose) = fetch.purpose else {
            let proxy = proxies.for_url(&fetch.request.url);
            let exchange = http::send_within_via(tls, proxy, &fetch.request, FETCH_TIMEOUT)
                .await
                .map_err(|e| describe(&e))?;
            return Ok((exchange.head.clone(), Vec::new()));
        };
        let guard = FetchGuard { policy, purpose };
        let url = guard
            .check_url(&fetch.request.url)
            .map_err(|e| e.reason.to_string())?;
        let guarded = Guarded {
            guard,
            url,
            lookup: system_lookup,
        };
        // Through a proxy, the proxy resolves the checked URL's host and does its own egress
        // filtering (as with the blocking driver's guarded resolver).
        let proxy = proxies.for_url(&fetch.request.url);
        let addrs = match proxy {
            Some(_) => Vec::new(),
            None => match smol::unblock(move || guarded.pin()).await {
                Ok(addrs) => addrs,
                Err(PinError::Refused(r)) => return Err(r.reason.to_string()),
                Err(PinError::Resolve(cause)) => return Err(cause),
            },
        };
        let mut exchange = http::send_to_via(tls, proxy, &fetch.request, &addrs, FETCH_TIMEOUT)
            .await
            .map_err(|e| describe(&e))?;
        let body = exchange
            .read_to_vec(MAX_DOCUMENT_BYTES)
            .await
            .map_err(|_| format!("the body is unreadable or over {MAX_DOCUMENT_BYTES} bytes"))?;
        Ok((exchange.head.clone(), body))
    };
    work.or(async {
        smol::Timer::after(FETCH_TIMEOUT).await;
        Err("timed out".to_owned())
    })
    .await
}
