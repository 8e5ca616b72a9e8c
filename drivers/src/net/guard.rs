//! The DNS rebinding defence for the fetches the core guards (`Client::fetch_guard`: the
//! authorization flow's, to URLs a server chose): the host is resolved once, every address is
//! checked under the fetch's policy and purpose, and the connection goes to a checked
//! address, never to the name again. Both drivers use it; each connects in its own way (the
//! blocking driver through a ureq resolver, the smol driver to the addresses directly).

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use mcpwire_core::net_policy::{CheckedHost, CheckedUrl, FetchGuard, UrlRejected};

/// Resolves a host name (ASCII, as [`CheckedHost::Name`] holds it) and port to addresses.
pub(crate) type Lookup = fn(&str, u16) -> io::Result<Vec<IpAddr>>;

/// The system's resolver (`getaddrinfo`, through std's [`ToSocketAddrs`]).
pub(crate) fn system_lookup(host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
    Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// A guarded fetch, its URL checked: where the request goes and how its host is resolved.
#[derive(Clone, Debug)]
pub(crate) struct Guarded {
    /// The policy and purpose.
    pub guard: FetchGuard,
    /// The request's URL as the guard checked it (the request is sent to its serialization).
    pub url: CheckedUrl,
    /// How the host name is resolved (the system's resolver; the tests' own).
    pub lookup: Lookup,
}

/// Why a guarded fetch has nowhere to connect.
#[derive(Debug)]
pub(crate) enum PinError {
    /// The policy refused every address the name resolved to.
    Refused(UrlRejected),
    /// The name did not resolve (or resolved to nothing).
    Resolve(String),
}

impl Guarded {
    /// Resolves the host (an IP literal is not resolved) and keeps the addresses the policy
    /// lets through: where the connection may go, in order. Blocks while the name resolves.
    pub(crate) fn pin(&self) -> Result<Vec<SocketAddr>, PinError> {
        let resolved = match self.url.host() {
            CheckedHost::Name(name) if self.url.needs_resolution() => {
                (self.lookup)(name, self.url.port())
                    .map_err(|e| PinError::Resolve(format!("{name} did not resolve: {e}")))?
            }
            _ => Vec::new(),
        };
        let addrs = self
            .guard
            .connect_addrs(&self.url, resolved)
            .map_err(PinError::Refused)?;
        if addrs.is_empty() {
            return Err(PinError::Resolve(format!(
                "{} resolved to no address",
                self.url.host()
            )));
        }
        Ok(addrs)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mcpwire_core::net_policy::{NetPolicy, UrlPurpose};

    fn guarded(policy: NetPolicy, url: &str, lookup: Lookup) -> Guarded {
        let guard = FetchGuard {
            policy,
            purpose: UrlPurpose::ResourceMetadata,
        };
        Guarded {
            guard,
            url: guard.check_url(url).unwrap(),
            lookup,
        }
    }

    fn to_loopback(_: &str, _: u16) -> io::Result<Vec<IpAddr>> {
        Ok(vec![IpAddr::from([127, 0, 0, 1])])
    }

    #[test]
    fn a_name_resolving_to_loopback_is_refused_by_the_strict_policy() {
        let g = guarded(NetPolicy::strict(), "https://rebind.test/prm", to_loopback);
        let Err(PinError::Refused(e)) = g.pin() else {
            panic!("not refused")
        };
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
    }

    #[test]
    fn localhost_resolves_to_loopback_and_passes_in_development_mode() {
        let g = guarded(
            NetPolicy::development(),
            "http://localhost:4000/prm",
            system_lookup,
        );
        let addrs = g.pin().unwrap();
        assert!(!addrs.is_empty());
        assert!(addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 4000));
    }
}
