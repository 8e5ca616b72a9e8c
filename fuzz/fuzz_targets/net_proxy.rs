//! The proxy routing policy (`net_policy::proxy`) on arbitrary input.
//!
//! Input layout, read as UTF-8 (lossily), up to four lines: a proxy URL, a `NO_PROXY` value, a
//! request URL, a host name.
//!
//! Invariants checked on every run:
//! - nothing panics: `ProxyUrl::parse`, `NoProxy::parse`, `NoProxy::skips`,
//!   `ProxyRoute::for_url`, `ProxyRoute::from_environment`;
//! - a parsed proxy's `Display` and `Debug` never hold its password, and its URL with
//!   credentials parses back to the same proxy;
//! - an explicit route takes every request through its proxy; an environment route never
//!   proxies `localhost` or a loopback address, nor a host `NO_PROXY` skips;
//! - `NO_PROXY=*` skips everything, an empty `NO_PROXY` nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::net_policy::proxy::{NoProxy, ProxyRoute, ProxyUrl};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let proxy_raw = lines.next().unwrap_or("");
    let no_proxy_raw = lines.next().unwrap_or("");
    let url = lines.next().unwrap_or("");
    let host = lines.next().unwrap_or("");

    let no_proxy = NoProxy::parse(no_proxy_raw);
    let _ = no_proxy.skips(host, 443);
    assert!(NoProxy::parse("*").skips(host, 1));
    assert!(!NoProxy::parse("").skips(host, 1));

    let Ok(proxy) = ProxyUrl::parse(proxy_raw) else {
        return;
    };
    if let Some(password) = proxy.password() {
        // (A password that happens to be part of `http://host:port` itself proves nothing.)
        let shown = format!("ProxyUrl(http://{}:{})", proxy.host(), proxy.port());
        if password.len() >= 3 && !shown.contains(password) {
            assert!(
                !proxy.to_string().contains(password),
                "Display shows the password"
            );
            assert!(
                !format!("{proxy:?}").contains(password),
                "Debug shows the password"
            );
        }
    }
    let again = ProxyUrl::parse(&proxy.with_credentials()).expect("its own URL parses");
    assert_eq!(again, proxy);

    let explicit = ProxyRoute::Explicit(proxy.clone());
    if !url.is_empty() {
        assert_eq!(explicit.for_url(url), Some(&proxy));
    }
    let env = |name: &str| match name {
        "HTTPS_PROXY" | "HTTP_PROXY" => Some(proxy_raw.to_owned()),
        "NO_PROXY" => Some(no_proxy_raw.to_owned()),
        _ => None,
    };
    let Ok(route) = ProxyRoute::from_environment(&env) else {
        return;
    };
    if let Some(chosen) = route.for_url(url) {
        assert_eq!(chosen, &proxy);
        let parsed = mcpwire_core::net_policy::Url::parse(url).expect("a proxied URL parses");
        let h = parsed.host_str().unwrap_or("");
        let bare = h.trim_start_matches('[').trim_end_matches(']');
        assert!(!bare.eq_ignore_ascii_case("localhost"), "localhost proxied");
        assert!(
            bare.parse::<std::net::IpAddr>()
                .map_or(true, |ip| !ip.is_loopback()),
            "a loopback address proxied"
        );
        let port = parsed.port_or_known_default().unwrap_or(0);
        assert!(!no_proxy.skips(h, port), "a NO_PROXY host proxied");
    }
    for loopback in ["http://127.0.0.1:9/", "https://[::1]/", "http://localhost/"] {
        assert!(route.for_url(loopback).is_none());
    }
});
