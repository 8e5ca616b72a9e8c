//! Upstream prompts and resources, passed through: [`Prompts`] and [`Resources`].
//!
//! # Prompts: prefixed names
//!
//! A prompt name, like a tool name, is unique only within its server, so prompts are exposed
//! as `<server>__<prompt>` by the same rules as tools ([`crate::host::catalog::naming`]:
//! the candidate, a hash suffix when shortened or shared, never parsed back: [`Prompts`]
//! keeps the map from each exposed name to its (server, prompt)).
//!
//! # Resources: URIs kept, routed by a map
//!
//! A resource URI is not a name the gateway may choose. The spec makes it the resource's
//! identifier (RFC 3986) with a meaning of its own: an `https://` URI is one "the client is
//! able to fetch … directly from the web", `file://` ones "behave like a filesystem"; the
//! same URIs come back in places the gateway does not rewrite: `resource_link` and embedded
//! resources in tool results, prompt messages, `notifications/resources/updated`, and
//! `subscriptions/listen`'s `resourceSubscriptions`. Rewriting every URI would break the
//! first and need every result rewritten for the rest. So a URI goes downstream **as the
//! server sent it**, and a `resources/read` is routed by which server listed it
//! ([`Resources::route`]). Resource templates go downstream as sent too, and a URI no server
//! listed is routed by the templates it matches (RFC 6570: literals must match, an
//! expression matches what its operator can expand to).
//!
//! Only a URI that two servers list (`file:///README.md` is common) cannot be routed that
//! way. Each of them is then exposed in the gateway's own form,
//! `mcpwire://<server>/<the server's URI, percent-encoded>` ([`UriForm::Prefixed`]; a custom
//! scheme per RFC 3986, as the spec allows), as tool names sharing a candidate all get a
//! suffix. The verbatim URI then answers an error naming both forms. A URI an upstream sends
//! that is itself in the `mcpwire:` scheme is always prefixed, so the form reads back one
//! way. The prefixed form of any server's URI is accepted at any time.
//!
//! Templates are untrusted input: one that is not valid RFC 6570, or whose pattern would
//! exceed the size limit, matches nothing.

use std::collections::{BTreeMap, BTreeSet};

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};

use crate::host::catalog::naming::{Names, ToolKey};
use crate::host::ServerId;
use crate::jsonrpc::{code, ErrorObject};
use crate::mcp::results::{Prompt, Resource, ResourceTemplate};

/// The gateway's URI scheme for a resource two servers share.
pub const SCHEME: &str = "mcpwire";

/// Everything but RFC 3986's unreserved characters is encoded.
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The most bytes a compiled template pattern may take.
const TEMPLATE_SIZE_LIMIT: usize = 64 * 1024;

/// The upstream prompts under their exposed names.
#[derive(Clone, Debug, Default)]
pub struct Prompts {
    names: Names,
    /// Each server's prompts, sorted by name, names unique.
    servers: BTreeMap<ServerId, Vec<Prompt>>,
}

impl Prompts {
    /// No prompts.
    pub fn new() -> Prompts {
        Prompts::default()
    }

    /// Replaces server `server`'s prompts (one `prompts/list`, all pages); a name listed
    /// twice keeps its first prompt. Returns whether the downstream list changed (and
    /// `notifications/prompts/list_changed` is due).
    pub fn set_server_prompts(&mut self, server: ServerId, mut prompts: Vec<Prompt>) -> bool {
        prompts.sort_by(|a, b| a.name.cmp(&b.name));
        prompts.dedup_by(|later, kept| later.name == kept.name);
        let old: Vec<String> = self
            .servers
            .get(&server)
            .map(|p| p.iter().map(|p| p.name.clone()).collect())
            .unwrap_or_default();
        if self.servers.get(&server) == Some(&prompts) {
            return false;
        }
        let new: Vec<String> = prompts.iter().map(|p| p.name.clone()).collect();
        self.names.replace(&server, &old, &new);
        self.servers.insert(server, prompts);
        true
    }

    /// Removes server `server`'s prompts; returns whether it had any.
    pub fn remove_server(&mut self, server: &ServerId) -> bool {
        let Some(old) = self.servers.remove(server) else {
            return false;
        };
        let old: Vec<String> = old.into_iter().map(|p| p.name).collect();
        self.names.replace(server, &old, &[]);
        !old.is_empty()
    }

    /// The exposed name of server `server`'s prompt `prompt`.
    pub fn exposed_name(&self, server: &ServerId, prompt: &str) -> Option<&str> {
        self.names.exposed(&ToolKey {
            server: server.clone(),
            tool: prompt.to_owned(),
        })
    }

    /// What `prompts/list` gives downstream: servers by id, each server's prompts by name,
    /// under their exposed names (`icons` and `_meta` left out, as for tools).
    pub fn list(&self) -> Vec<Prompt> {
        let mut out = Vec::new();
        for (server, prompts) in &self.servers {
            for p in prompts {
                if let Some(name) = self.exposed_name(server, &p.name) {
                    out.push(Prompt {
                        name: name.to_owned(),
                        title: p.title.clone(),
                        description: p.description.clone(),
                        arguments: p.arguments.clone(),
                        icons: Vec::new(),
                        meta: None,
                        other: Default::default(),
                    });
                }
            }
        }
        out
    }

    /// The server and prompt an exposed name stands for (`prompts/get` goes there under the
    /// prompt's own name).
    pub fn route(&self, exposed: &str) -> Option<(&ServerId, &Prompt)> {
        let key = self.names.route(exposed)?;
        let (server, prompts) = self.servers.get_key_value(&key.server)?;
        let i = prompts
            .binary_search_by(|p| p.name.as_str().cmp(&key.tool))
            .ok()?;
        Some((server, &prompts[i]))
    }
}

/// How a resource's URI is exposed downstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UriForm {
    /// As the server sent it.
    Verbatim,
    /// As `mcpwire://<server>/<percent-encoded URI>`.
    Prefixed,
}

/// The gateway's form of server `server`'s URI `uri`.
pub fn prefixed_uri(server: &ServerId, uri: &str) -> String {
    format!("{SCHEME}://{server}/{}", utf8_percent_encode(uri, ENCODE))
}

/// Whether `uri` is in the gateway's scheme (compared without case, as RFC 3986 does).
fn is_own_scheme(uri: &str) -> bool {
    uri.get(..SCHEME.len() + 1)
        .is_some_and(|s| s.eq_ignore_ascii_case("mcpwire:"))
}

/// A `resources/read` (or subscription) the gateway cannot route.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceRouteError {
    /// No server lists the URI or a template it matches.
    #[error("Resource not found: no server lists {uri} or a resource template it matches")]
    NotFound {
        /// The URI asked for.
        uri: String,
    },
    /// Several servers list the URI (or templates it matches).
    #[error("{uri} belongs to more than one server ({}); read it as {}", .servers.iter().map(ServerId::as_str).collect::<Vec<_>>().join(", "), .servers.iter().map(|s| prefixed_uri(s, .uri)).collect::<Vec<_>>().join(" or "))]
    Ambiguous {
        /// The URI asked for.
        uri: String,
        /// The servers, by id.
        servers: Vec<ServerId>,
    },
    /// A `mcpwire:` URI that does not read as `mcpwire://<server>/<encoded URI>`.
    #[error("{uri} is not a resource URI of the gateway (mcpwire://<server>/<percent-encoded URI>): {problem}")]
    BadPrefixed {
        /// The URI asked for.
        uri: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// A `mcpwire:` URI naming a server the gateway does not have.
    #[error(
        "Resource not found: {uri} names server {server:?}, which is not in the gateway's config"
    )]
    UnknownServer {
        /// The URI asked for.
        uri: String,
        /// The server it names.
        server: String,
    },
}

impl ResourceRouteError {
    /// The JSON-RPC error to answer: `-32602` (the spec's "resource not found"), with the URI
    /// in `data`.
    pub fn to_error_object(&self) -> ErrorObject {
        let uri = match self {
            ResourceRouteError::NotFound { uri }
            | ResourceRouteError::Ambiguous { uri, .. }
            | ResourceRouteError::BadPrefixed { uri, .. }
            | ResourceRouteError::UnknownServer { uri, .. } => uri,
        };
        ErrorObject {
            code: code::INVALID_PARAMS,
            message: self.to_string(),
            data: Some(json!({ "uri": uri })),
        }
    }
}

/// Reads `mcpwire://<server>/<percent-encoded URI>`: `None` for a URI of another scheme.
pub fn parse_prefixed(uri: &str) -> Option<Result<(ServerId, String), ResourceRouteError>> {
    if !is_own_scheme(uri) {
        return None;
    }
    let bad = |problem| {
        Some(Err(ResourceRouteError::BadPrefixed {
            uri: uri.to_owned(),
            problem,
        }))
    };
    let Some(rest) = uri
        .get(SCHEME.len() + 1..)
        .and_then(|r| r.strip_prefix("//"))
    else {
        return bad("no `//` after the scheme");
    };
    let Some((server, encoded)) = rest.split_once('/') else {
        return bad("no `/` after the server id");
    };
    let Ok(server) = ServerId::new(server) else {
        return bad("the part after `//` is not a server id");
    };
    // An empty part is the form of an empty URI: a server may list one, and its form must read
    // back like any other (found by the fuzz target).
    // Only the gateway's own encoding reads back: everything but unreserved characters
    // encoded, so the form of a URI is unique.
    if !encoded
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b))
    {
        return bad("the URI after the server id is not percent-encoded");
    }
    let Ok(decoded) = percent_decode_str(encoded).decode_utf8() else {
        return bad("the percent-encoded URI is not UTF-8");
    };
    if prefixed_uri(&server, &decoded) != uri {
        return bad("the URI after the server id is not encoded as the gateway encodes it");
    }
    Some(Ok((server, decoded.into_owned())))
}

/// An RFC 6570 template as a pattern of the URIs it can expand to (`None`: not a valid
/// template, or too big).
fn template_pattern(template: &str) -> Option<regex_lite::Regex> {
    let mut re = String::from("(?s)^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        re.push_str(&regex_lite::escape(&rest[..open]));
        let after = &rest[open + 1..];
        let close = after.find('}')?;
        let expr = &after[..close];
        if expr.contains('{') {
            return None;
        }
        let (op, vars) = match expr.chars().next()? {
            c @ ('+' | '#' | '.' | '/' | ';' | '?' | '&') => (Some(c), &expr[1..]),
            '=' | ',' | '!' | '@' | '|' => return None,
            _ => (None, expr),
        };
        let valid_vars = !vars.is_empty()
            && vars.split(',').all(|v| {
                let name = v
                    .strip_suffix('*')
                    .unwrap_or_else(|| v.split(':').next().unwrap_or(v));
                !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'%')
            });
        if !valid_vars {
            return None;
        }
        re.push_str(match op {
            None => "[^/?#]*",
            Some('+') => ".*",
            Some('#') => "(?:#.*)?",
            Some('.') => r"(?:\.[^/?#]*)*",
            Some('/') => "(?:/[^/?#]*)*",
            Some(';') => "(?:;[^/?#]*)*",
            Some('?') => r"(?:\?[^#]*)?",
            _ => "(?:&[^#]*)?",
        });
        rest = &after[close + 1..];
    }
    re.push_str(&regex_lite::escape(rest));
    re.push('$');
    regex_lite::RegexBuilder::new(&re)
        .size_limit(TEMPLATE_SIZE_LIMIT)
        .build()
        .ok()
}

#[derive(Clone, Debug, Default)]
struct ServerResources {
    /// Sorted by URI, URIs unique.
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    patterns: Vec<Option<regex_lite::Regex>>,
}

/// The upstream resources and templates, and where each URI goes.
#[derive(Clone, Debug, Default)]
pub struct Resources {
    servers: BTreeMap<ServerId, ServerResources>,
    /// URI → the servers that list it.
    owners: BTreeMap<String, BTreeSet<ServerId>>,
}

impl Resources {
    /// No resources.
    pub fn new() -> Resources {
        Resources::default()
    }

    /// Replaces server `server`'s resources and templates (`resources/list` and
    /// `resources/templates/list`, all pages; a URI listed twice keeps its first). Returns
    /// whether what goes downstream changed (`notifications/resources/list_changed` is due):
    /// a URI another server shares becomes prefixed for both.
    pub fn set_server_resources(
        &mut self,
        server: ServerId,
        mut resources: Vec<Resource>,
        templates: Vec<ResourceTemplate>,
    ) -> bool {
        let before = (self.list_resources(), self.list_templates());
        resources.sort_by(|a, b| a.uri.cmp(&b.uri));
        resources.dedup_by(|later, kept| later.uri == kept.uri);
        self.forget(&server);
        for r in &resources {
            self.owners
                .entry(r.uri.clone())
                .or_default()
                .insert(server.clone());
        }
        let patterns = templates
            .iter()
            .map(|t| template_pattern(&t.uri_template))
            .collect();
        self.servers.insert(
            server,
            ServerResources {
                resources,
                templates,
                patterns,
            },
        );
        before != (self.list_resources(), self.list_templates())
    }

    /// Removes server `server`'s resources; returns whether what goes downstream changed.
    pub fn remove_server(&mut self, server: &ServerId) -> bool {
        let before = (self.list_resources(), self.list_templates());
        self.forget(server);
        self.servers.remove(server);
        before != (self.list_resources(), self.list_templates())
    }

    fn forget(&mut self, server: &ServerId) {
        if let Some(old) = self.servers.get(server) {
            for r in &old.resources {
                if let Some(set) = self.owners.get_mut(&r.uri) {
                    set.remove(server);
                    if set.is_empty() {
                        self.owners.remove(&r.uri);
                    }
                }
            }
        }
    }

    /// How server `server`'s URI `uri` is exposed.
    pub fn uri_form(&self, server: &ServerId, uri: &str) -> UriForm {
        let shared = self
            .owners
            .get(uri)
            .is_some_and(|o| o.len() > 1 && o.contains(server));
        if shared || is_own_scheme(uri) {
            UriForm::Prefixed
        } else {
            UriForm::Verbatim
        }
    }

    /// Server `server`'s URI `uri` as the downstream client knows it: for `resources/read`
    /// results' `contents[].uri` and `notifications/resources/updated`.
    pub fn exposed_uri(&self, server: &ServerId, uri: &str) -> String {
        match self.uri_form(server, uri) {
            UriForm::Verbatim => uri.to_owned(),
            UriForm::Prefixed => prefixed_uri(server, uri),
        }
    }

    /// What `resources/list` gives downstream: servers by id, each server's resources by
    /// URI, under their exposed URIs (`icons` and `_meta` left out).
    pub fn list_resources(&self) -> Vec<Resource> {
        let mut out = Vec::new();
        for (server, s) in &self.servers {
            for r in &s.resources {
                out.push(Resource {
                    uri: self.exposed_uri(server, &r.uri),
                    icons: Vec::new(),
                    meta: None,
                    other: Default::default(),
                    ..r.clone()
                });
            }
        }
        out
    }

    /// What `resources/templates/list` gives downstream: every server's templates as sent
    /// (`icons` and `_meta` left out), servers by id.
    pub fn list_templates(&self) -> Vec<ResourceTemplate> {
        let mut out = Vec::new();
        for s in self.servers.values() {
            for t in &s.templates {
                out.push(ResourceTemplate {
                    icons: Vec::new(),
                    meta: None,
                    other: Default::default(),
                    ..t.clone()
                });
            }
        }
        out
    }

    /// Where a downstream `resources/read` (or subscription) of `uri` goes: the server, and
    /// the URI as that server knows it.
    pub fn route(&self, uri: &str) -> Result<(ServerId, String), ResourceRouteError> {
        if let Some(parsed) = parse_prefixed(uri) {
            let (server, inner) = parsed?;
            if !self.servers.contains_key(&server) {
                return Err(ResourceRouteError::UnknownServer {
                    uri: uri.to_owned(),
                    server: server.to_string(),
                });
            }
            return Ok((server, inner));
        }
        let ambiguous = |servers: Vec<ServerId>| ResourceRouteError::Ambiguous {
            uri: uri.to_owned(),
            servers,
        };
        if let Some(owners) = self.owners.get(uri) {
            let mut it = owners.iter();
            return match (it.next(), it.next()) {
                (Some(one), None) => Ok((one.clone(), uri.to_owned())),
                _ => Err(ambiguous(owners.iter().cloned().collect())),
            };
        }
        let matching: Vec<ServerId> = self
            .servers
            .iter()
            .filter(|(_, s)| s.patterns.iter().flatten().any(|p| p.is_match(uri)))
            .map(|(id, _)| id.clone())
            .collect();
        match matching.as_slice() {
            [one] => Ok((one.clone(), uri.to_owned())),
            [] => Err(ResourceRouteError::NotFound {
                uri: uri.to_owned(),
            }),
            _ => Err(ambiguous(matching)),
        }
    }

    /// A `resources/read` result of server `server`, with each `contents[].uri` as the
    /// downstream client knows it.
    pub fn rewrite_read_result(&self, server: &ServerId, result: &mut Value) {
        let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) else {
            return;
        };
        for c in contents {
            if let Some(Value::String(uri)) = c.get_mut("uri") {
                let exposed = self.exposed_uri(server, uri);
                *uri = exposed;
            }
        }
    }
}
