//! What a target answers, rewritten so that tunnel-service never learns a private URL: an
//! absolute URL that equals a registered target (compared as [`Registry::find_url`] does)
//! becomes `harpoon://<label>`:
//!
//! - in the `Location`, `Content-Location` and `Link` headers ([`rewrite_header`]);
//! - in every string of a JSON body, object keys included ([`rewrite_json`], [`rewrite_body`]).
//!   When several targets share the URL, the one whose OAuth role matches the member's name
//!   wins (`issuer`, `token_endpoint`, `registration_endpoint`, `revocation_endpoint`,
//!   `introspection_endpoint`, `jwks_uri`; `authorization_servers` holds issuers), otherwise
//!   the first registered. The top-level `resource` of a Protected Resource Metadata document
//!   (an object that also has a member only RFC 9728 defines: `authorization_servers`,
//!   `bearer_methods_supported`, `resource_name`, `resource_documentation`) is left alone (it
//!   names the MCP server, which the service knows); anywhere else `resource` is rewritten.
//!
//! A body that is not JSON passes unchanged, and so does a JSON body with nothing to rewrite
//! (byte for byte). A body with a JSON content type that does not parse (truncated, nested too
//! deep) has every registered URL replaced in its text, as written and with `/` escaped as
//! `\/` ([`rewrite_text`]), so that no such body carries one out.

use serde_json::Value;

use super::targets::{Registry, Target, TargetSource};

/// The scheme of a rewritten URL.
pub const SCHEME: &str = "harpoon://";

/// The OAuth role a JSON member's name asks for.
fn role_for_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "issuer" | "authorization_servers" => "issuer",
        "token_endpoint" => "token_endpoint",
        "registration_endpoint" => "registration_endpoint",
        "revocation_endpoint" => "revocation_endpoint",
        "introspection_endpoint" => "introspection_endpoint",
        "jwks_uri" => "jwks_uri",
        _ => return None,
    })
}

/// The target `url` is rewritten to, under the member named `key` (if any).
fn pick<'a>(registry: &'a Registry, url: &str, key: Option<&str>) -> Option<&'a Target> {
    let mut first = None;
    let want = key.and_then(role_for_key);
    for t in registry.find_url(url) {
        if let (Some(want), TargetSource::OauthDiscovery { role }) = (want, t.source()) {
            if role == want {
                return Some(t);
            }
        }
        first.get_or_insert(t);
    }
    first
}

fn replacement(registry: &Registry, s: &str, key: Option<&str>) -> Option<String> {
    pick(registry, s.trim(), key).map(|t| format!("{SCHEME}{}", t.label()))
}

/// Rewrites every string of `value` (see the module docs); how many were rewritten.
pub fn rewrite_json(registry: &Registry, value: &mut Value) -> usize {
    if registry.is_empty() {
        return 0;
    }
    let mut n = 0;
    let prm = value.as_object().is_some_and(|m| {
        [
            "authorization_servers",
            "bearer_methods_supported",
            "resource_name",
            "resource_documentation",
        ]
        .iter()
        .any(|k| m.contains_key(*k))
    });
    walk(registry, value, None, prm, &mut n);
    n
}

/// Replaces every registered URL in `text` (longest first; as written, and with `/` written
/// `\/` as JSON may) by `harpoon://<label>`; `None` when none occurs.
#[must_use]
pub fn rewrite_text(registry: &Registry, text: &[u8]) -> Option<Vec<u8>> {
    let mut targets: Vec<&Target> = registry.iter().collect();
    targets.sort_by_key(|t| std::cmp::Reverse(t.url().len()));
    let mut out = text.to_vec();
    let mut changed = false;
    for t in targets {
        let to = format!("{SCHEME}{}", t.label()).into_bytes();
        for from in [t.url().to_owned(), t.url().replace('/', "\\/")] {
            let from = from.into_bytes();
            if from.is_empty() {
                continue;
            }
            let mut next = Vec::with_capacity(out.len());
            let mut i = 0;
            while i < out.len() {
                if out.get(i..i + from.len()) == Some(from.as_slice()) {
                    next.extend_from_slice(&to);
                    i += from.len();
                    changed = true;
                } else if let Some(b) = out.get(i) {
                    next.push(*b);
                    i += 1;
                }
            }
            out = next;
        }
    }
    changed.then_some(out)
}

/// `prm`: `value` is the top-level object of a Protected Resource Metadata document (its
/// `resource` is kept).
fn walk(registry: &Registry, value: &mut Value, key: Option<&str>, prm: bool, n: &mut usize) {
    match value {
        Value::String(s) => {
            if let Some(r) = replacement(registry, s, key) {
                *s = r;
                *n += 1;
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(registry, item, key, false, n);
            }
        }
        Value::Object(map) => {
            let renamed: Vec<(String, String)> = map
                .keys()
                .filter_map(|k| replacement(registry, k, None).map(|r| (k.clone(), r)))
                .collect();
            for (old, new) in renamed {
                if let Some(v) = map.remove(&old) {
                    *n += 1;
                    // A clash with an existing member keeps both values under the new name.
                    match map.get_mut(&new) {
                        Some(existing) => {
                            let prev = existing.take();
                            *existing = Value::Array(vec![prev, v]);
                        }
                        None => {
                            map.insert(new, v);
                        }
                    }
                }
            }
            for (k, v) in map.iter_mut() {
                if prm && k == "resource" && v.is_string() {
                    continue;
                }
                walk(registry, v, Some(k), false, n);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A JSON content type: `application/json` or any `+json` type.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// A response body: rewritten when it is JSON (by its content type) with something to
/// rewrite, otherwise `None` (send it as it came).
#[must_use]
pub fn rewrite_body(
    registry: &Registry,
    content_type: Option<&str>,
    body: &[u8],
) -> Option<Vec<u8>> {
    if registry.is_empty() || !content_type.is_some_and(is_json) {
        return None;
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return rewrite_text(registry, body);
    };
    if rewrite_json(registry, &mut value) == 0 {
        return None;
    }
    serde_json::to_vec(&value).ok()
}

/// A response header's value, rewritten when it is `Location`, `Content-Location` or `Link`
/// and names a registered URL; `None` to keep it as it came.
#[must_use]
pub fn rewrite_header(registry: &Registry, name: &str, value: &str) -> Option<String> {
    if registry.is_empty() {
        return None;
    }
    if name.eq_ignore_ascii_case("location") || name.eq_ignore_ascii_case("content-location") {
        return replacement(registry, value, None);
    }
    if !name.eq_ignore_ascii_case("link") {
        return None;
    }
    // `<uri-reference>; params, <...>; ...`: each bracketed URI is looked at.
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    let mut changed = false;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..=open]);
        let uri = &rest[open + 1..close];
        match replacement(registry, uri, None) {
            Some(r) => {
                out.push_str(&r);
                changed = true;
            }
            None => out.push_str(uri),
        }
        rest = &rest[close..];
        out.push('>');
        rest = &rest[1..];
    }
    out.push_str(rest);
    changed.then_some(out)
}
