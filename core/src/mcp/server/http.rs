//! Streamable HTTP pieces of the server: the DNS-rebinding checks of `Host` and `Origin`,
//! `Accept` and `Content-Type`, and the responses the core writes.

use crate::http::Headers;
use crate::jsonrpc::{ErrorObject, Id};

use super::config::OriginPolicy;
use super::Output;
use super::{ExchangeId, HttpOutput};

/// Whether `host` (a `Host` value, `name[:port]`, IPv6 in brackets) names loopback.
fn is_loopback_host(host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inside, after)) if after.is_empty() || valid_port(after) => {
                return inside == "::1";
            }
            _ => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) if valid_port(&format!(":{port}")) => name.to_owned(),
            Some(_) => return false,
            None => host.clone(),
        }
    };
    name == "localhost" || name == "127.0.0.1"
}

fn valid_port(colon_port: &str) -> bool {
    colon_port
        .strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Why a request's `Host` or `Origin` is refused (`403`).
pub(super) fn check_host_origin(policy: &OriginPolicy, h: &Headers) -> Result<(), String> {
    let mut hosts = h.get_all("Host");
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err("more than one Host header".into());
    }
    if !policy.any_host {
        let Some(host) = host else {
            return Err("no Host header".into());
        };
        let allowed = (policy.allow_loopback && is_loopback_host(host))
            || policy
                .allowed_hosts
                .iter()
                .any(|a| a.eq_ignore_ascii_case(host.trim()));
        if !allowed {
            return Err(format!(
                "Host {host:?} is not allowed (DNS rebinding protection)"
            ));
        }
    }
    let mut origins = h.get_all("Origin");
    if let Some(origin) = origins.next() {
        if origins.next().is_some() {
            return Err("more than one Origin header".into());
        }
        let origin = origin.trim();
        let loopback = policy.allow_loopback
            && ["http://", "https://"].iter().any(|scheme| {
                origin
                    .get(..scheme.len())
                    .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
                    && origin.get(scheme.len()..).is_some_and(is_loopback_host)
            });
        let listed = policy
            .allowed_origins
            .iter()
            .any(|a| a.eq_ignore_ascii_case(origin));
        if !loopback && !listed {
            return Err(format!(
                "Origin {origin:?} is not allowed (DNS rebinding protection)"
            ));
        }
    }
    Ok(())
}

/// What an `Accept` header allows: (JSON, SSE). No header allows both.
pub(super) fn accepts(h: &Headers) -> (bool, bool) {
    let mut any = false;
    let (mut json, mut sse) = (false, false);
    for value in h.get_all("Accept") {
        any = true;
        for item in value.split(',') {
            let media = item
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            match media.as_str() {
                "*/*" => {
                    json = true;
                    sse = true;
                }
                "application/*" | "application/json" => json = true,
                "text/*" | "text/event-stream" => sse = true,
                _ => {}
            }
        }
    }
    if any {
        (json, sse)
    } else {
        (true, true)
    }
}

/// Whether a `Content-Type` is JSON (absent counts as JSON).
pub(super) fn is_json_content(h: &Headers) -> bool {
    match h.get("Content-Type") {
        None => true,
        Some(v) => v
            .split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json")),
    }
}

pub(super) fn header_list(pairs: &[(&str, &str)]) -> Headers {
    let mut h = Headers::new();
    for (n, v) in pairs {
        // Names and values are the core's own constants or checked ids: never refused.
        let _ = h.append(*n, *v);
    }
    h
}

/// A JSON-RPC error response as the whole HTTP response.
pub(super) fn error_response(
    x: ExchangeId,
    status: u16,
    id: Option<&Id>,
    error: &ErrorObject,
    extra: &[(&str, &str)],
) -> Output {
    let body = crate::jsonrpc::error_response(id, error).into_bytes();
    let mut headers = header_list(&[("Content-Type", "application/json")]);
    for (n, v) in extra {
        let _ = headers.append(*n, *v);
    }
    Output::Http(
        x,
        HttpOutput::Response {
            status,
            headers,
            body,
        },
    )
}

/// A response without body.
pub(super) fn status_only(x: ExchangeId, status: u16, extra: &[(&str, &str)]) -> Output {
    Output::Http(
        x,
        HttpOutput::Response {
            status,
            headers: header_list(extra),
            body: Vec::new(),
        },
    )
}

/// The headers of an SSE response.
pub(super) fn stream_headers(session: Option<&str>) -> Headers {
    let mut h = header_list(&[
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("X-Accel-Buffering", "no"),
    ]);
    if let Some(s) = session {
        let _ = h.append(crate::mcp::headers::SESSION_ID_HEADER, s);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        header_list(pairs)
    }

    #[test]
    fn loopback_hosts_and_origins_pass_others_do_not() {
        let p = OriginPolicy::default();
        for host in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:3000",
            "[::1]",
            "LOCALHOST",
        ] {
            assert_eq!(
                check_host_origin(&p, &h(&[("Host", host)])),
                Ok(()),
                "{host}"
            );
        }
        for host in [
            "evil.example.com",
            "localhost.evil.com",
            "127.0.0.1.nip.io",
            "[::2]:1",
            "localhost:x",
            "[::1]x",
        ] {
            assert!(
                check_host_origin(&p, &h(&[("Host", host)])).is_err(),
                "{host}"
            );
        }
        assert!(check_host_origin(&p, &h(&[])).is_err());
        assert_eq!(
            check_host_origin(
                &p,
                &h(&[("Host", "localhost:1"), ("Origin", "http://127.0.0.1:5")])
            ),
            Ok(())
        );
        assert!(check_host_origin(
            &p,
            &h(&[
                ("Host", "localhost:1"),
                ("Origin", "http://evil.example.com")
            ])
        )
        .is_err());
        assert!(check_host_origin(&p, &h(&[("Host", "localhost:1"), ("Origin", "null")])).is_err());
        let open = OriginPolicy {
            any_host: true,
            allowed_origins: vec!["https://app.example".into()],
            ..OriginPolicy::default()
        };
        assert_eq!(
            check_host_origin(
                &open,
                &h(&[("Host", "mcp.example"), ("Origin", "https://app.example")])
            ),
            Ok(())
        );
    }

    #[test]
    fn accept_lists_are_read() {
        assert_eq!(accepts(&h(&[])), (true, true));
        assert_eq!(
            accepts(&h(&[("Accept", "application/json, text/event-stream")])),
            (true, true)
        );
        assert_eq!(
            accepts(&h(&[("Accept", "application/json")])),
            (true, false)
        );
        assert_eq!(
            accepts(&h(&[("Accept", "text/event-stream;q=1")])),
            (false, true)
        );
        assert_eq!(accepts(&h(&[("Accept", "*/*")])), (true, true));
        assert_eq!(accepts(&h(&[("Accept", "text/html")])), (false, false));
    }
}
