//! Which HTTP proxy a request goes through, as the Go tunnel-client decides it: an explicit
//! proxy (`--http-proxy`, `--control-plane.http-proxy`, `--mcp.http-proxy`) carries every
//! request of its route, `NO_PROXY` included; without one, the environment's `HTTPS_PROXY` /
//! `HTTP_PROXY` (upper case first, then lower case) carry `https` / `http` requests except those
//! `NO_PROXY` names and those to loopback (`localhost`, `127.0.0.0/8`, `::1`), which Go's
//! `net/http` never proxies from the environment.
//!
//! A [`ProxyUrl`] keeps its credentials out of every `Display` and `Debug` form; the drivers
//! send them as `Proxy-Authorization: Basic`.

use core::fmt;
use core::net::IpAddr;

use base64::Engine as _;

use super::IpNet;

/// A proxy URL that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyUrlError {
    /// Not a URL with a host.
    #[error("expected a proxy URL such as http://proxy.internal:3128")]
    Malformed,
    /// A scheme other than `http` (an `https://` proxy is not supported yet).
    #[error("the proxy's scheme must be http (got {0:?}; a TLS connection to the proxy itself is not supported)")]
    Scheme(String),
    /// A path, query or fragment after the host.
    #[error("a proxy URL has no path, query or fragment")]
    Path,
}

/// An HTTP proxy: `http://[user[:password]@]host[:port]` (port 80 by default).
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    host: String,
    port: u16,
    /// `user:password`, percent-decoded.
    credentials: Option<String>,
}

impl ProxyUrl {
    /// Parses a proxy URL; a value without a scheme is read as `http://` (as Go does).
    pub fn parse(raw: &str) -> Result<ProxyUrl, ProxyUrlError> {
        let raw = raw.trim();
        let with_scheme = if raw.contains("://") {
            raw.to_owned()
        } else {
            format!("http://{raw}")
        };
        let url = url::Url::parse(&with_scheme).map_err(|_| ProxyUrlError::Malformed)?;
        if url.scheme() != "http" {
            return Err(ProxyUrlError::Scheme(url.scheme().to_owned()));
        }
        if !(url.path().is_empty() || url.path() == "/")
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(ProxyUrlError::Path);
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or(ProxyUrlError::Malformed)?
            .to_owned();
        let port = url.port().unwrap_or(80);
        let decode = |s: &str| percent_decode(s).ok_or(ProxyUrlError::Malformed);
        let credentials = if url.username().is_empty() && url.password().is_none() {
            None
        } else {
            let user = decode(url.username())?;
            let pass = decode(url.password().unwrap_or(""))?;
            Some(format!("{user}:{pass}"))
        };
        Ok(ProxyUrl {
            host,
            port,
            credentials,
        })
    }

    /// The proxy's host (an IPv6 address in brackets).
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The proxy's port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `Basic …` for `Proxy-Authorization`, when the URL has credentials. A secret.
    #[must_use]
    pub fn authorization(&self) -> Option<String> {
        self.credentials.as_ref().map(|c| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(c.as_bytes())
            )
        })
    }

    /// The password, when there is one (for the log redactor).
    #[must_use]
    pub fn password(&self) -> Option<&str> {
        self.credentials
            .as_deref()
            .and_then(|c| c.split_once(':'))
            .map(|(_, p)| p)
            .filter(|p| !p.is_empty())
    }

    /// The URL with its credentials, for an HTTP client that reads them from the URL itself
    /// (never for a log line: use `Display`).
    #[must_use]
    pub fn with_credentials(&self) -> String {
        match &self.credentials {
            None => format!("http://{}:{}", self.host, self.port),
            Some(c) => {
                let (user, pass) = c.split_once(':').unwrap_or((c, ""));
                format!(
                    "http://{}:{}@{}:{}",
                    crate::tunnel::engine::config::encode_component(user),
                    crate::tunnel::engine::config::encode_component(pass),
                    self.host,
                    self.port
                )
            }
        }
    }
}

/// `http://host:port`, never the credentials.
impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}:{}", self.host, self.port)
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let creds = if self.credentials.is_some() {
            " (credentials redacted)"
        } else {
            ""
        };
        write!(f, "ProxyUrl(http://{}:{}{creds})", self.host, self.port)
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// One `NO_PROXY` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Skip {
    /// `*`: nothing is proxied.
    All,
    /// An address range (`10.0.0.0/8`).
    Net(IpNet),
    /// One address, on one port or on every port.
    Ip { ip: IpAddr, port: Option<u16> },
    /// A name and its subdomains (`corp.example`), or only the subdomains (`.corp.example`,
    /// `*.corp.example`); with a port, only that port.
    Domain {
        name: String,
        subdomains_only: bool,
        port: Option<u16>,
    },
}

/// `host[:port]`, `[v6]:port` or a bare host, as Go's `net.SplitHostPort` reads a `NO_PROXY`
/// entry: `(host, port)`.
fn split_host_port(entry: &str) -> (&str, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            let port = tail.strip_prefix(':').and_then(|p| p.parse().ok());
            return (host, port);
        }
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse::<u16>() {
            Ok(p) => (host, Some(p)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

/// The hosts `NO_PROXY` keeps off the proxy, with Go's `httpproxy` rules: a comma-separated
/// list of names (`corp.example` matches it and its subdomains; `.corp.example` and
/// `*.corp.example` only the subdomains), addresses (`10.0.0.5`, `[::2]`, each optionally with
/// `:port`), CIDR ranges; `*` for all. Case does not matter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoProxy(Vec<Skip>);

impl NoProxy {
    /// Parses a `NO_PROXY` value (entries that cannot be read are skipped, as Go does).
    #[must_use]
    pub fn parse(raw: &str) -> NoProxy {
        let mut out = Vec::new();
        for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let entry = entry.to_ascii_lowercase();
            if entry == "*" {
                out.push(Skip::All);
                continue;
            }
            if entry.contains('/') {
                if let Ok(net) = entry.parse::<IpNet>() {
                    out.push(Skip::Net(net));
                }
                continue;
            }
            let (host, port) = split_host_port(&entry);
            if let Ok(ip) = host.parse::<IpAddr>() {
                out.push(Skip::Ip { ip, port });
                continue;
            }
            let host = host.strip_prefix('*').unwrap_or(host);
            let subdomains_only = host.starts_with('.');
            let name = host.trim_start_matches('.').to_owned();
            if name.is_empty() {
                continue;
            }
            out.push(Skip::Domain {
                name,
                subdomains_only,
                port,
            });
        }
        NoProxy(out)
    }

    /// Whether `host:port` is kept off the proxy.
    #[must_use]
    pub fn skips(&self, host: &str, port: u16) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        self.0.iter().any(|skip| match skip {
            Skip::All => true,
            Skip::Net(net) => ip.is_some_and(|ip| net.contains(&ip)),
            Skip::Ip { ip: want, port: p } => ip == Some(*want) && p.is_none_or(|p| p == port),
            Skip::Domain {
                name,
                subdomains_only,
                port: want,
            } => {
                if want.is_some_and(|p| p != port) || ip.is_some() {
                    return false;
                }
                let sub = host
                    .strip_suffix(name.as_str())
                    .is_some_and(|rest| rest.ends_with('.'));
                sub || (!subdomains_only && host == *name)
            }
        })
    }
}

/// How one route's requests reach their servers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ProxyRoute {
    /// Straight to the server.
    #[default]
    Direct,
    /// Every request through this proxy (an explicit proxy setting: `NO_PROXY` does not
    /// apply, as in the Go client).
    Explicit(ProxyUrl),
    /// The environment's proxies.
    Environment {
        /// For `http` requests (`HTTP_PROXY`).
        http: Option<ProxyUrl>,
        /// For `https` requests (`HTTPS_PROXY`).
        https: Option<ProxyUrl>,
        /// `NO_PROXY`.
        no_proxy: NoProxy,
    },
}

/// Whether `host` is what Go's `net/http` never proxies from the environment: `localhost` (any
/// case) or a loopback address (`127.0.0.0/8`, `::1`).
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl ProxyRoute {
    /// The environment's proxy settings (`HTTPS_PROXY`, `https_proxy`, `HTTP_PROXY`,
    /// `http_proxy`, `NO_PROXY`, `no_proxy`); `Direct` when neither proxy is set. The error
    /// names the variable (never its value, which may hold credentials).
    pub fn from_environment(
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProxyRoute, (&'static str, ProxyUrlError)> {
        let read =
            |names: [&'static str; 2]| -> Result<Option<ProxyUrl>, (&'static str, ProxyUrlError)> {
                for name in names {
                    if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
                        return ProxyUrl::parse(&v).map(Some).map_err(|e| (name, e));
                    }
                }
                Ok(None)
            };
        let https = read(["HTTPS_PROXY", "https_proxy"])?;
        let http = read(["HTTP_PROXY", "http_proxy"])?;
        if https.is_none() && http.is_none() {
            return Ok(ProxyRoute::Direct);
        }
        let no_proxy = ["NO_PROXY", "no_proxy"]
            .iter()
            .find_map(|n| env(n).filter(|v| !v.trim().is_empty()))
            .map(|v| NoProxy::parse(&v))
            .unwrap_or_default();
        Ok(ProxyRoute::Environment {
            http,
            https,
            no_proxy,
        })
    }

    /// The proxy for a request to `url` (`None`: straight to the server).
    #[must_use]
    pub fn for_url(&self, url: &str) -> Option<&ProxyUrl> {
        match self {
            ProxyRoute::Direct => None,
            ProxyRoute::Explicit(p) => Some(p),
            ProxyRoute::Environment {
                http,
                https,
                no_proxy,
            } => {
                let parsed = url::Url::parse(url).ok()?;
                let host = parsed.host_str()?;
                let port = parsed.port_or_known_default()?;
                if is_loopback(host) || no_proxy.skips(host, port) {
                    return None;
                }
                match parsed.scheme() {
                    "https" => https.as_ref(),
                    "http" => http.as_ref(),
                    _ => None,
                }
            }
        }
    }

    /// The proxies' passwords, for the log redactor.
    #[must_use]
    pub fn passwords(&self) -> Vec<String> {
        let proxies: Vec<&ProxyUrl> = match self {
            ProxyRoute::Direct => Vec::new(),
            ProxyRoute::Explicit(p) => vec![p],
            ProxyRoute::Environment { http, https, .. } => {
                http.iter().chain(https.iter()).collect()
            }
        };
        proxies
            .into_iter()
            .flat_map(|p| {
                p.password()
                    .map(str::to_owned)
                    .into_iter()
                    .chain(p.authorization())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn proxy_urls_parse_and_never_show_their_credentials() {
        let p = ProxyUrl::parse("http://me:s%40cret@proxy.corp:3128").unwrap();
        assert_eq!((p.host(), p.port()), ("proxy.corp", 3128));
        assert_eq!(p.to_string(), "http://proxy.corp:3128");
        assert!(!format!("{p:?}").contains("cret"));
        assert_eq!(p.password(), Some("s@cret"));
        assert_eq!(p.authorization().unwrap(), "Basic bWU6c0BjcmV0");
        assert_eq!(p.with_credentials(), "http://me:s%40cret@proxy.corp:3128");
        assert_eq!(
            ProxyUrl::parse("proxy:8080").unwrap().to_string(),
            "http://proxy:8080"
        );
        assert_eq!(ProxyUrl::parse("http://proxy").unwrap().port(), 80);
        assert!(matches!(
            ProxyUrl::parse("https://p:1"),
            Err(ProxyUrlError::Scheme(_))
        ));
        assert!(matches!(
            ProxyUrl::parse("socks5://p:1"),
            Err(ProxyUrlError::Scheme(_))
        ));
        assert_eq!(ProxyUrl::parse("http://p:1/x"), Err(ProxyUrlError::Path));
        assert_eq!(ProxyUrl::parse("http://"), Err(ProxyUrlError::Malformed));
    }

    #[test]
    fn no_proxy_follows_the_go_rules() {
        let n = NoProxy::parse(
            "Corp.Example, .svc.local, 10.0.0.0/8, 192.168.1.5, api.x:8443, [::2], *.wild.example, \
             172.16.9.9:8080, [::3]:80",
        );
        assert!(n.skips("a.wild.example", 443));
        assert!(!n.skips("wild.example", 443));
        assert!(n.skips("172.16.9.9", 8080));
        assert!(!n.skips("172.16.9.9", 443));
        assert!(n.skips("[::3]", 80));
        assert!(!n.skips("[::3]", 81));
        assert!(n.skips("A.CORP.EXAMPLE", 1));
        assert!(n.skips("corp.example", 443));
        assert!(n.skips("a.corp.example", 443));
        assert!(!n.skips("notcorp.example", 443));
        assert!(n.skips("db.svc.local", 80));
        assert!(!n.skips("svc.local", 80));
        assert!(n.skips("10.2.3.4", 80));
        assert!(n.skips("192.168.1.5", 80));
        assert!(!n.skips("192.168.1.6", 80));
        assert!(n.skips("api.x", 8443));
        assert!(!n.skips("api.x", 443));
        assert!(n.skips("[::2]", 80));
        assert!(NoProxy::parse("*").skips("anything", 1));
        assert!(!NoProxy::parse("").skips("anything", 1));
    }

    #[test]
    fn routes_pick_by_scheme_and_keep_loopback_direct_from_the_environment() {
        let env = |k: &str| match k {
            "HTTPS_PROXY" => Some("http://p:1".to_owned()),
            "http_proxy" => Some("p2:2".to_owned()),
            "no_proxy" => Some("skip.example".to_owned()),
            _ => None,
        };
        let route = ProxyRoute::from_environment(&env).unwrap();
        assert_eq!(route.for_url("https://a.example/x").unwrap().port(), 1);
        assert_eq!(route.for_url("http://a.example/x").unwrap().port(), 2);
        assert!(route.for_url("https://skip.example/").is_none());
        assert!(route.for_url("https://127.0.0.1:9/").is_none());
        assert!(route.for_url("http://localhost:9/").is_none());
        assert!(route.for_url("http://[::1]:9/").is_none());
        assert!(route.for_url("http://LOCALHOST:9/").is_none());
        // Only `localhost` itself: Go proxies a subdomain of it from the environment.
        assert_eq!(route.for_url("http://app.localhost:9/").unwrap().port(), 2);
        // An explicit proxy carries everything, loopback and NO_PROXY names included.
        let explicit = ProxyRoute::Explicit(ProxyUrl::parse("http://p:3").unwrap());
        assert_eq!(explicit.for_url("http://127.0.0.1:9/").unwrap().port(), 3);
        assert_eq!(
            ProxyRoute::from_environment(&|_| None).unwrap(),
            ProxyRoute::Direct
        );
        let bad = |k: &str| (k == "HTTPS_PROXY").then(|| "https://p:1".to_owned());
        assert_eq!(
            ProxyRoute::from_environment(&bad).unwrap_err().0,
            "HTTPS_PROXY"
        );
    }
}
