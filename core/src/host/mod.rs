//! The host's side of MCP: many servers at once, and the safety decisions the client guide
//! puts on the host ("Host and Client Responsibilities"): which servers run, which tools the
//! model sees and under which names, and which calls need a person's approval.
//!
//! Everything here is pure: a driver reads the files, starts the servers and asks the person;
//! these modules decide.
//!
//! - [`config`]: the config files people already have (`mcpServers`, VS Code's `servers`),
//!   read into [`ServerSpec`]s;
//! - [`catalog`]: every server's tools under collision-free exposed names, the token estimate,
//!   progressive discovery and the tool search;
//! - [`consent`]: the per-call policy (ask, allow, deny), provenance of result text between
//!   servers, and the approval of local commands;
//! - [`registry`]: the servers a host has, each with its own state, kept apart.
//! - [`gateway`]: what `mcpwire host serve` shows its downstream client and where each of its
//!   requests goes (the listing, routing, consent as elicitation, pass-through, sign-in).

use std::collections::BTreeMap;
use std::fmt;

pub mod catalog;
pub mod config;
pub mod consent;
pub mod gateway;
pub mod registry;

/// A server's id, chosen by the host (a config file's key), never taken from the server's
/// self-reported `serverInfo.name`. It matches `^[a-zA-Z][a-zA-Z0-9_-]*$`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(String);

/// A string that is not a valid [`ServerId`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{id:?} is not a valid server id: {reason} (an id starts with an ASCII letter and holds only ASCII letters, digits, `_` and `-`)")]
pub struct InvalidServerId {
    /// The string as given.
    pub id: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl ServerId {
    /// The id, if `id` matches `^[a-zA-Z][a-zA-Z0-9_-]*$`.
    pub fn new(id: &str) -> Result<ServerId, InvalidServerId> {
        let bad = |reason| InvalidServerId {
            id: id.to_owned(),
            reason,
        };
        let mut chars = id.chars();
        match chars.next() {
            None => return Err(bad("it is empty")),
            Some(c) if !c.is_ascii_alphabetic() => {
                return Err(bad("it does not start with an ASCII letter"))
            }
            Some(_) => {}
        }
        if chars.any(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
            return Err(bad(
                "it holds a character other than a letter, digit, `_` or `-`",
            ));
        }
        Ok(ServerId(id.to_owned()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl std::str::FromStr for ServerId {
    type Err = InvalidServerId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ServerId::new(s)
    }
}

/// A server id is written as its string (approval files key on it); reading one back checks
/// the pattern again.
impl serde::Serialize for ServerId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ServerId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        ServerId::new(&id).map_err(serde::de::Error::custom)
    }
}

/// How much the host believes a server. Only a trusted server's tool annotations
/// (`readOnlyHint` and the rest) are believed (the guide's MUST); an untrusted server's every
/// call asks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trust {
    /// The default: annotations ignored, every call asks unless the user's rules say otherwise.
    #[default]
    Untrusted,
    /// The user trusts this server: its annotations are believed.
    Trusted,
}

/// One server as a config file describes it: how to reach it, and what the host knows about
/// it beforehand. Values are as they will be used (interpolation done).
#[derive(Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The config's key for it.
    pub id: ServerId,
    /// How to reach it.
    pub transport: TransportSpec,
    /// The `oauth` block, if any.
    pub oauth: Option<OAuthSpec>,
    /// The host's trust in it (from the config, else [`Trust::Untrusted`]).
    pub trust: Trust,
    /// The config entry is there but switched off (`disabled: true`).
    pub disabled: bool,
}

/// How a server is reached.
#[derive(Clone, PartialEq, Eq)]
pub enum TransportSpec {
    /// A local command, started without a shell; the server speaks newline-delimited JSON-RPC
    /// on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment (values may be secrets: never shown, only names).
        env: BTreeMap<String, String>,
        /// Its working directory, if set.
        cwd: Option<String>,
    },
    /// Streamable HTTP at `url`.
    Http {
        /// The MCP endpoint.
        url: String,
        /// Headers sent with every request (values may be secrets: never shown, only names).
        headers: BTreeMap<String, String>,
    },
}

/// A config entry's `oauth` block: what the authorization flow needs beforehand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OAuthSpec {
    /// `clientId`: a pre-registered client id.
    pub client_id: Option<String>,
    /// `callbackPort`: the loopback port of the redirect URI.
    pub callback_port: Option<u16>,
    /// `scopes`: the scopes to ask for.
    pub scopes: Vec<String>,
}

impl fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerSpec")
            .field("id", &self.id)
            .field("transport", &self.transport)
            .field("oauth", &self.oauth)
            .field("trust", &self.trust)
            .field("disabled", &self.disabled)
            .finish()
    }
}

/// Shows names of environment variables and headers, never their values (they carry secrets).
impl fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            TransportSpec::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", &redacted_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// Bytes as lower-case hexadecimal (the host's fingerprints and name suffixes).
pub(crate) fn lower_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// A URL to show (`Debug`, error messages): without its user info, query and fragment, where
/// a token may ride (`?api_key=...`); a URL that does not parse shows only its scheme.
pub fn redacted_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let hidden = !u.username().is_empty() || u.password().is_some();
            let _ = u.set_username("");
            let _ = u.set_password(None);
            let query = u.query().is_some();
            u.set_query(None);
            u.set_fragment(None);
            let mut shown = u.to_string();
            if query {
                shown.push_str("?<redacted>");
            }
            if hidden {
                shown.push_str(" (user info redacted)");
            }
            shown
        }
        Err(_) => match url.split_once(':') {
            Some((scheme, _)) if scheme.chars().all(|c| c.is_ascii_alphanumeric()) => {
                format!("{scheme}:<unparsed>")
            }
            _ => "<unparsed>".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ids_follow_the_pattern() {
        for ok in ["a", "github", "my-server_2", "Z9"] {
            assert_eq!(ServerId::new(ok).map(|i| i.to_string()), Ok(ok.to_owned()));
        }
        for bad in ["", "9lives", "_x", "-x", "a b", "a.b", "a/b", "ü", "a\n"] {
            assert!(ServerId::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn debug_shows_names_of_secrets_not_values() {
        let mut env = BTreeMap::new();
        env.insert("API_KEY".to_owned(), "sk-secret-value".to_owned());
        let mut headers = BTreeMap::new();
        headers.insert("Authorization".to_owned(), "Bearer tok-123".to_owned());
        let stdio = TransportSpec::Stdio {
            command: "npx".into(),
            args: vec!["server".into()],
            env,
            cwd: None,
        };
        let http = TransportSpec::Http {
            url: "https://user:pw-secret@example.com/mcp?api_key=key-secret#frag".into(),
            headers,
        };
        let shown = format!("{stdio:?} {http:?}");
        assert!(shown.contains("API_KEY") && shown.contains("Authorization"));
        assert!(
            shown.contains("https://example.com/mcp?<redacted>"),
            "{shown}"
        );
        assert!(
            !["sk-secret", "tok-123", "pw-secret", "key-secret", "frag"]
                .iter()
                .any(|s| shown.contains(s)),
            "{shown}"
        );
    }
}
