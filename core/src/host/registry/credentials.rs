//! Each server's credentials, kept apart.
//!
//! The client's token store keeps a grant under its issuer and `resource` (RFC 8707) and hands
//! back, for a server URL, the newest grant whose `resource` covers that URL (the same origin,
//! and the URL's path at or below the resource's). Within one store, then, two servers would
//! share a grant whenever one's resource covers the other's URL: two config entries for one
//! URL (two accounts on one service), or a grant for an origin's root and a second server on
//! that origin, possibly behind another authorization server. The guide asks for tokens
//! "per issuing authorization server and resource", never mixed.
//!
//! So a host gives every server a partition of its token store of its own, named by the
//! server's [`ServerId`] (the host's name for it, never the self-reported `serverInfo.name`):
//! a grant saved by one server is never loaded for another, whatever their URLs. Within a
//! partition the store's own key (issuer and resource) still applies. [`store_name`] is the
//! partition's name where a name must be a file name.

use crate::host::{ServerId, ServerSpec, TransportSpec};

/// What identifies a server's credentials (never the tokens themselves).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    partition: ServerId,
    server_url: Option<String>,
    client_id: Option<String>,
    grant: Option<GrantIdentity>,
}

/// The server URL is shown without its query (a key may ride there).
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("partition", &self.partition)
            .field(
                "server_url",
                &self.server_url.as_deref().map(crate::host::redacted_url),
            )
            .field("client_id", &self.client_id)
            .field("grant", &self.grant)
            .finish()
    }
}

/// The issuer and resource of a grant a server obtained: what the token store keys it by
/// within the server's partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GrantIdentity {
    /// The authorization server's issuer.
    pub issuer: String,
    /// The `resource` the tokens are for.
    pub resource: String,
}

impl Credentials {
    pub(super) fn for_spec(spec: &ServerSpec) -> Credentials {
        let server_url = match &spec.transport {
            TransportSpec::Http { url, .. } => Some(url.clone()),
            TransportSpec::Stdio { .. } => None,
        };
        Credentials {
            partition: spec.id.clone(),
            server_url,
            client_id: spec.oauth.as_ref().and_then(|o| o.client_id.clone()),
            grant: None,
        }
    }

    /// The token store partition this server's grants live in: its id, and no other server's.
    pub fn partition(&self) -> &ServerId {
        &self.partition
    }

    /// The partition's name as a file name ([`store_name`]).
    pub fn store_name(&self) -> String {
        store_name(&self.partition)
    }

    /// HTTP: the MCP endpoint the grants are for (`None` on stdio, which has no authorization).
    pub fn server_url(&self) -> Option<&str> {
        self.server_url.as_deref()
    }

    /// The pre-registered OAuth client id of the spec's `oauth` block, if any.
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }

    /// The grant obtained by the last authorization of this server, if any.
    pub fn grant(&self) -> Option<&GrantIdentity> {
        self.grant.as_ref()
    }

    pub(super) fn set_grant(&mut self, grant: GrantIdentity) {
        self.grant = Some(grant);
    }
}

/// The name of `id`'s token store partition, safe as a file name on every platform and
/// distinct from every other id's even where file names ignore case (macOS, Windows): ASCII
/// lowercase letters, digits and `-` stand for themselves, `_` is written `__` and an
/// uppercase letter `_` and its lowercase (`GitHub_2` is `_git_hub__2`). The mapping is
/// one-to-one, so two servers never share a file.
pub fn store_name(id: &ServerId) -> String {
    let mut out = String::with_capacity(id.as_str().len() + 4);
    for c in id.as_str().chars() {
        match c {
            '_' => out.push_str("__"),
            c if c.is_ascii_uppercase() => {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(s: &str) -> ServerId {
        ServerId::new(s).unwrap()
    }

    #[test]
    fn store_names_escape_underscores_and_capitals() {
        assert_eq!(store_name(&id("github")), "github");
        assert_eq!(store_name(&id("GitHub_2")), "_git_hub__2");
        assert_eq!(store_name(&id("a-b")), "a-b");
    }

    #[test]
    fn ids_differing_in_case_get_names_differing_beyond_case() {
        let a = store_name(&id("github")).to_ascii_lowercase();
        let b = store_name(&id("GitHub")).to_ascii_lowercase();
        assert_ne!(a, b);
        // `_g` (an escaped capital) and `__g`-style sequences never meet.
        let c = store_name(&id("a_g")).to_ascii_lowercase();
        let d = store_name(&id("aG")).to_ascii_lowercase();
        assert_ne!(c, d);
    }

    proptest::proptest! {
        #[test]
        fn store_names_are_one_to_one_under_case_folding(
            a in "[a-zA-Z][a-zA-Z0-9_-]{0,12}",
            b in "[a-zA-Z][a-zA-Z0-9_-]{0,12}",
        ) {
            let (na, nb) = (store_name(&id(&a)), store_name(&id(&b)));
            proptest::prop_assert!(na
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'));
            proptest::prop_assert_eq!(a == b, na.eq_ignore_ascii_case(&nb));
        }
    }
}
