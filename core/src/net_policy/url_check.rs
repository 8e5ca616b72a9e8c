//! The URL, address and redirect checks of [`NetPolicy`].

use core::net::{IpAddr, SocketAddr};

use url::{Host, Url};

use super::addr::{blocked_range, BlockedRange, Embedding};
use super::{
    same_origin, CheckedHost, CheckedUrl, IconRejected, NetPolicy, RejectReason, Subject,
    UrlPurpose, UrlRejected,
};

/// How much of a URL an error message repeats.
const SHOWN_URL_CHARS: usize = 200;

/// The URL as an error message shows it: a password masked (in the normalized form), and cut
/// after [`SHOWN_URL_CHARS`] characters.
pub(super) fn shown(given: &str, parsed: Option<&Url>) -> String {
    let text = match parsed {
        Some(u) if u.password().is_some() => {
            let mut masked = u.clone();
            // Cannot fail: a URL with a password has a host.
            let _ = masked.set_password(Some("***"));
            masked.to_string()
        }
        _ => given.to_owned(),
    };
    if text.chars().count() > SHOWN_URL_CHARS {
        let mut cut: String = text.chars().take(SHOWN_URL_CHARS).collect();
        cut.push('…');
        cut
    } else {
        text
    }
}

/// Whether `text` holds an ASCII control character or an ASCII space.
pub(super) fn has_control_or_space(text: &str) -> bool {
    text.bytes().any(|b| b <= b' ' || b == 0x7f)
}

/// Whether a (lowercase, ASCII) domain is `localhost` or under it (RFC 6761), ignoring
/// trailing dots.
pub(crate) fn is_localhost_name(name: &str) -> bool {
    name.split('.').rev().find(|label| !label.is_empty()) == Some("localhost")
}

/// Whether `addr` is the local host itself: loopback, directly or as IPv4-mapped (not an IPv4
/// loopback address carried to another machine by NAT64 or 6to4). Plain `http` may go only here.
fn is_own_loopback(addr: IpAddr) -> bool {
    blocked_range(addr).is_some_and(|b| {
        b.range == BlockedRange::Loopback
            && b.embedded.is_none_or(|e| e.form == Embedding::Ipv4Mapped)
    })
}

impl NetPolicy {
    /// Checks a URL before anything connects to it (or, for
    /// [`UrlPurpose::AuthorizationUrl`], before it is opened in a browser).
    ///
    /// Parses with the WHATWG rules, then, in this order: the scheme (`https`; `http` only to
    /// loopback in development mode; anything else refused by name), no userinfo, a host, the
    /// address of an IP literal host or the loopback names `localhost`/`*.localhost`, and last
    /// `http` to a host that is not loopback. Text with control characters or whitespace is
    /// refused before parsing. The module docs hold the rules and what the policy flags open.
    ///
    /// When the host is a name, [`CheckedUrl::needs_resolution`] is `true`: the driver must
    /// resolve it, check each address with [`check_resolved`](Self::check_resolved) and connect
    /// to one that passed.
    pub fn check_url(&self, url: &str, purpose: UrlPurpose) -> Result<CheckedUrl, UrlRejected> {
        let fail = |reason, parsed: Option<&Url>| UrlRejected {
            purpose,
            subject: Subject::Url(shown(url, parsed)),
            reason,
        };
        if has_control_or_space(url) {
            return Err(fail(RejectReason::ControlOrWhitespace, None));
        }
        let parsed = Url::parse(url).map_err(|e| fail(RejectReason::Unparsable(e), None))?;
        match self.vet(&parsed, purpose, None) {
            Ok((host, port)) => Ok(CheckedUrl {
                given: url.to_owned(),
                url: parsed,
                purpose,
                host,
                port,
            }),
            Err(reason) => Err(fail(reason, Some(&parsed))),
        }
    }

    /// Checks one address a name resolved to (or any address the driver is about to connect
    /// to), for a URL of `purpose`: the DNS rebinding defence.
    ///
    /// The address ranges alone; prefer [`check_resolved`](Self::check_resolved), which also
    /// knows the URL (so it can hold a loopback name and plain `http` to loopback addresses)
    /// and names the URL in its error.
    pub fn check_addr(&self, addr: IpAddr, purpose: UrlPurpose) -> Result<(), UrlRejected> {
        self.vet_addr(addr, purpose).map_err(|reason| UrlRejected {
            purpose,
            subject: Subject::Addr(addr),
            reason,
        })
    }

    /// Checks one address the host of `url` resolved to, and returns the socket address to
    /// connect to.
    ///
    /// The address must pass [`check_addr`](Self::check_addr) for the URL's purpose; when the
    /// host is a loopback name (`localhost`, `*.localhost`) or the scheme is `http`, it must
    /// also be loopback. For a URL whose host is an IP literal, the only address that passes is
    /// that literal.
    pub fn check_resolved(
        &self,
        url: &CheckedUrl,
        addr: IpAddr,
    ) -> Result<SocketAddr, UrlRejected> {
        let fail = |reason| UrlRejected {
            purpose: url.purpose,
            subject: Subject::Resolved {
                url: shown(&url.given, Some(&url.url)),
                addr,
            },
            reason,
        };
        let must_be_loopback = match &url.host {
            CheckedHost::Addr(expected) if *expected != addr => {
                return Err(fail(RejectReason::NotTheUrlsAddress {
                    expected: *expected,
                    addr,
                }));
            }
            CheckedHost::Addr(_) => false,
            CheckedHost::Name(name) => is_localhost_name(name),
        } || url.url.scheme() == "http";
        self.vet_addr(addr, url.purpose).map_err(fail)?;
        if must_be_loopback && !is_own_loopback(addr) {
            return Err(fail(RejectReason::ResolvedNotLoopback { addr }));
        }
        Ok(SocketAddr::new(addr, url.port))
    }

    /// Checks one redirect hop: resolves `location` (relative or absolute) against `from`, and
    /// applies [`check_url`](Self::check_url)'s rules to the result, for `purpose`.
    ///
    /// Also refused: a downgrade from `https` to `http` (even to loopback in development mode),
    /// and for [`UrlPurpose::Icon`] a hop that leaves `from`'s origin. Nothing here follows a
    /// redirect: the caller decides, hop by hop, and a hop this refuses ends the chain.
    ///
    /// The returned URL's [`as_given`](CheckedUrl::as_given) is the absolute URL the
    /// `Location` resolved to.
    pub fn check_redirect(
        &self,
        from: &CheckedUrl,
        location: &str,
        purpose: UrlPurpose,
    ) -> Result<CheckedUrl, UrlRejected> {
        let fail = |reason, to: Option<&Url>| UrlRejected {
            purpose,
            subject: Subject::Redirect {
                from: shown(&from.given, Some(&from.url)),
                to: to.map_or_else(|| shown(location, None), |u| shown(u.as_str(), Some(u))),
            },
            reason,
        };
        if has_control_or_space(location) {
            return Err(fail(RejectReason::ControlOrWhitespace, None));
        }
        let target = from
            .url
            .join(location)
            .map_err(|e| fail(RejectReason::Unparsable(e), None))?;
        match self.vet(&target, purpose, Some(from)) {
            Ok((host, port)) => Ok(CheckedUrl {
                given: target.as_str().to_owned(),
                url: target,
                purpose,
                host,
                port,
            }),
            Err(reason) => Err(fail(reason, Some(&target))),
        }
    }

    /// The rules shared by [`check_url`](Self::check_url) and
    /// [`check_redirect`](Self::check_redirect), on a parsed URL: the host and port to connect
    /// to, or why not.
    pub(super) fn vet(
        &self,
        url: &Url,
        purpose: UrlPurpose,
        redirect_from: Option<&CheckedUrl>,
    ) -> Result<(CheckedHost, u16), RejectReason> {
        let is_http = match url.scheme() {
            "https" => false,
            "http" => true,
            other => {
                return Err(RejectReason::SchemeNotAllowed {
                    scheme: other.to_owned(),
                })
            }
        };
        if let Some(from) = redirect_from {
            if is_http && from.url.scheme() == "https" {
                return Err(RejectReason::Downgrade);
            }
            if purpose == UrlPurpose::Icon && !same_origin(&from.url, url) {
                return Err(RejectReason::Icon(IconRejected::CrossOrigin {
                    expected: from.url.origin().ascii_serialization(),
                }));
            }
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(RejectReason::Userinfo);
        }
        let (host, loopback) = match url.host() {
            None | Some(Host::Domain("")) => return Err(RejectReason::NoHost),
            Some(Host::Domain(name)) => {
                let loopback = is_localhost_name(name);
                if loopback && !self.allow_loopback_http {
                    return Err(RejectReason::LoopbackName {
                        name: name.to_owned(),
                    });
                }
                (CheckedHost::Name(name.to_owned()), loopback)
            }
            Some(Host::Ipv4(a)) => self.vet_literal(IpAddr::V4(a), purpose)?,
            Some(Host::Ipv6(a)) => self.vet_literal(IpAddr::V6(a), purpose)?,
        };
        if is_http && !loopback {
            return Err(RejectReason::InsecureHttp);
        }
        let port = url
            .port_or_known_default()
            .unwrap_or(if is_http { 80 } else { 443 });
        Ok((host, port))
    }

    fn vet_literal(
        &self,
        addr: IpAddr,
        purpose: UrlPurpose,
    ) -> Result<(CheckedHost, bool), RejectReason> {
        self.vet_addr(addr, purpose)?;
        Ok((CheckedHost::Addr(addr), is_own_loopback(addr)))
    }

    fn vet_addr(&self, addr: IpAddr, purpose: UrlPurpose) -> Result<(), RejectReason> {
        match blocked_range(addr) {
            None => Ok(()),
            Some(b) if self.permits(b.range, purpose) => Ok(()),
            Some(blocked) => Err(RejectReason::BlockedAddress { addr, blocked }),
        }
    }

    /// Whether the policy lets a destination in `range` through for `purpose`.
    fn permits(&self, range: BlockedRange, purpose: UrlPurpose) -> bool {
        match range {
            BlockedRange::Loopback => self.allow_loopback_http,
            r if r.is_private_network() => {
                self.allow_private || purpose == UrlPurpose::AuthorizationUrl
            }
            _ => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn localhost_names_are_recognized_by_label() {
        for n in [
            "localhost",
            "localhost.",
            "a.localhost",
            "a.b.localhost..",
            "localhost..",
        ] {
            assert!(is_localhost_name(n), "{n}");
        }
        for n in [
            "localhost.example",
            "notlocalhost",
            "localhostx",
            "example.com",
            "",
        ] {
            assert!(!is_localhost_name(n), "{n}");
        }
    }

    #[test]
    fn shown_masks_a_password_and_cuts_long_urls() {
        let u = Url::parse("https://me:secret@example.com/").unwrap();
        assert_eq!(
            shown("https://me:secret@example.com/", Some(&u)),
            "https://me:***@example.com/"
        );
        let long = format!("https://example.com/{}", "a".repeat(500));
        assert_eq!(shown(&long, None).chars().count(), SHOWN_URL_CHARS + 1);
    }

    #[test]
    fn the_whatwg_parser_reads_numeric_hosts_as_addresses() {
        let p = NetPolicy::development();
        for u in [
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://127.1/",
        ] {
            let c = p.check_url(u, UrlPurpose::ResourceMetadata).unwrap();
            assert_eq!(
                c.host(),
                &CheckedHost::Addr("127.0.0.1".parse().unwrap()),
                "{u}"
            );
        }
    }
}
