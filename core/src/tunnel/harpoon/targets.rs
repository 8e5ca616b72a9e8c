//! Harpoon's targets: the exact URLs tunnel-service may have the tunnel client call, each under
//! a label. A call names a label and goes to that target's URL and nowhere else (no path or
//! query from the caller). A redirect is followed only to another registered URL, and a
//! response's URLs are rewritten to `harpoon://<label>`. Both compare URLs the way
//! [`Registry::find_url`] does.
//!
//! Validation, with an error naming the entry ([`TargetError`]):
//!
//! - a label matches `^[a-z0-9][a-z0-9_-]{0,63}$` and is unique;
//! - a URL is absolute, with a scheme and a host, and is `https`, or `http` with plaintext
//!   allowed (`--harpoon.allow-plaintext-http`);
//! - no path segment is `.` or `..`, checked after unescaping (`%2e%2E` is `..`), on the URL
//!   as written: a WHATWG parser would resolve such segments away before they could be seen;
//! - at most [`MAX_TARGETS`] targets.
//!
//! URLs are compared with the scheme and host lowercased and everything else as written. The
//! original spelling is kept, and a call goes to it.
//!
//! The forms a person writes ([`TargetSpec::parse`]):
//!
//! ```text
//! --harpoon.target 'label=idp-token,url=https://idp.internal/oauth/token,desc="The IdP, token endpoint"'
//! HARPOON_TARGETS='label=a,url=https://a.internal/x; label=b,url=https://b.internal/y'
//! ```

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

/// The most targets one tunnel client registers.
pub const MAX_TARGETS: usize = 10_000;

/// Where a target came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSource {
    /// A `--harpoon.target` flag, `HARPOON_TARGETS` or the YAML config.
    Config,
    /// The main MCP server's OAuth metadata, with the endpoint's role (`token`, `jwks`, ...).
    OauthDiscovery {
        /// The metadata field it was found under (`token_endpoint`, `jwks_uri`, ...).
        role: String,
    },
}

impl TargetSource {
    /// The source as `list_targets` names it.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            TargetSource::Config => "config",
            TargetSource::OauthDiscovery { .. } => "oauth_discovery",
        }
    }
}

/// A target as configured, before validation.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetSpec {
    /// What a call names; `^[a-z0-9][a-z0-9_-]{0,63}$`.
    pub label: String,
    /// The exact URL a call goes to.
    pub url: String,
    /// What `list_targets` says the target is.
    pub description: String,
    /// Where it came from.
    pub source: TargetSource,
    /// Free-form tags `list_targets` filters by.
    pub tags: Vec<String>,
}

/// A URL may carry credentials or private names: `Debug` shows the label only.
impl fmt::Debug for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TargetSpec")
            .field("label", &self.label)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// A registered target.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    label: String,
    url: String,
    key: String,
    description: String,
    source: TargetSource,
    tags: Vec<String>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("label", &self.label)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// What a call names.
    #[must_use]
    pub fn label(&self) -> &str {
        &self.label
    }
    /// The URL as registered (its original spelling): where a call goes. Never logged, never
    /// shown to the service.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
    /// What `list_targets` says the target is.
    #[must_use]
    pub fn description(&self) -> &str {
        &self.description
    }
    /// Where it came from.
    #[must_use]
    pub fn source(&self) -> &TargetSource {
        &self.source
    }
    /// Its tags: lowercased, sorted, without repeats; a discovered target's include `oauth`
    /// and its role with dashes (`token-endpoint`).
    #[must_use]
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// Its category as `list_targets` shows it: `oauth` for a discovered endpoint, `custom`
    /// for one from the config.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self.source {
            TargetSource::Config => "custom",
            TargetSource::OauthDiscovery { .. } => "oauth",
        }
    }

    /// Whether it is an authorization server's token endpoint (tagged `token-endpoint`).
    #[must_use]
    pub fn is_token_endpoint(&self) -> bool {
        self.tags.iter().any(|t| t == "token-endpoint")
    }
}

/// Why a target was refused. Each names the entry: its label, or its place among the entries
/// when the label itself is the problem. The URL is never quoted (it may be private).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TargetError {
    /// The label does not match the pattern.
    #[error("harpoon target {entry}: the label must match ^[a-z0-9][a-z0-9_-]{{0,63}}$ (lower-case letters, digits, '_' and '-', at most 64, starting with a letter or digit)")]
    BadLabel {
        /// The entry's place and its label as written.
        entry: String,
    },
    /// Another target has this label.
    #[error("harpoon target '{label}': the label is registered already (labels are unique)")]
    DuplicateLabel {
        /// The target's label.
        label: String,
    },
    /// The URL is not absolute, has no host, or does not parse.
    #[error("harpoon target '{label}': the URL must be absolute, with a scheme and a host (https://host/path)")]
    NotAbsolute {
        /// The target's label.
        label: String,
    },
    /// The scheme is neither `https` nor an allowed `http`.
    #[error("harpoon target '{label}': the URL's scheme must be https (or http with --harpoon.allow-plaintext-http)")]
    Scheme {
        /// The target's label.
        label: String,
    },
    /// A `.` or `..` path segment.
    #[error(
        "harpoon target '{label}': the URL's path has a '.' or '..' segment (after unescaping)"
    )]
    DotSegment {
        /// The target's label.
        label: String,
    },
    /// [`MAX_TARGETS`] are registered already.
    #[error("harpoon target '{label}': at most {MAX_TARGETS} targets may be registered")]
    TooMany {
        /// The target's label.
        label: String,
    },
    /// A `--harpoon.target` or `HARPOON_TARGETS` value that does not parse.
    #[error("harpoon target {entry}: {problem}")]
    Syntax {
        /// Which value (`--harpoon.target #2`, `HARPOON_TARGETS entry #3`).
        entry: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The registered targets, in the order they were registered. Targets live for the process.
#[derive(Clone, Default)]
pub struct Registry {
    allow_plaintext: bool,
    targets: Vec<Target>,
    by_label: BTreeMap<String, usize>,
    /// The comparison form of each URL, with the targets registered under it.
    by_key: BTreeMap<String, Vec<usize>>,
}

/// `Debug` shows the labels, never a URL.
impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("allow_plaintext", &self.allow_plaintext)
            .field("labels", &self.by_label.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// An empty registry; `allow_plaintext` admits `http` URLs.
    #[must_use]
    pub fn new(allow_plaintext: bool) -> Self {
        Registry {
            allow_plaintext,
            ..Registry::default()
        }
    }

    /// Validates `spec` and registers it.
    ///
    /// # Errors
    /// [`TargetError`] naming the entry; nothing is registered then.
    pub fn register(&mut self, spec: TargetSpec) -> Result<&Target, TargetError> {
        let label = spec.label.trim().to_owned();
        if !valid_label(&label) {
            return Err(TargetError::BadLabel {
                entry: format!("#{} ('{}')", self.targets.len() + 1, printable(&label)),
            });
        }
        if self.by_label.contains_key(&label) {
            return Err(TargetError::DuplicateLabel { label });
        }
        let url = spec.url.trim().to_owned();
        let key = check_url(&url, self.allow_plaintext).map_err(|e| e.for_label(&label))?;
        if self.targets.len() >= MAX_TARGETS {
            return Err(TargetError::TooMany { label });
        }
        let at = self.targets.len();
        self.by_label.insert(label.clone(), at);
        self.by_key.entry(key.clone()).or_default().push(at);
        self.targets.push(Target {
            label,
            url,
            key,
            description: spec.description.trim().to_owned(),
            tags: normalize_tags(spec.tags, &spec.source),
            source: spec.source,
        });
        Ok(&self.targets[at])
    }

    /// The target registered under `label`.
    #[must_use]
    pub fn get(&self, label: &str) -> Option<&Target> {
        self.by_label.get(label).map(|&i| &self.targets[i])
    }

    /// The targets whose URL is `url` (scheme and host compared lowercased, the rest as
    /// written), in registration order: none for a URL that is not registered, or that a
    /// registration would refuse.
    pub fn find_url<'a>(&'a self, url: &str) -> impl Iterator<Item = &'a Target> + 'a {
        let found = check_url(url, self.allow_plaintext)
            .ok()
            .and_then(|key| self.by_key.get(&key));
        found.into_iter().flatten().map(move |&i| &self.targets[i])
    }

    /// Every target, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Target> {
        self.targets.iter()
    }

    /// How many targets are registered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// No targets: the `harpoon` channel is not declared.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Whether `http` URLs are admitted.
    #[must_use]
    pub fn allows_plaintext(&self) -> bool {
        self.allow_plaintext
    }
}

fn normalize_tags(tags: Vec<String>, source: &TargetSource) -> Vec<String> {
    let mut out: Vec<String> = tags
        .into_iter()
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    if let TargetSource::OauthDiscovery { role } = source {
        out.push("oauth".to_owned());
        out.push(role.trim().to_ascii_lowercase().replace('_', "-"));
    }
    out.sort();
    out.dedup();
    out
}

/// `^[a-z0-9][a-z0-9_-]{0,63}$`.
#[must_use]
pub fn valid_label(label: &str) -> bool {
    let b = label.as_bytes();
    matches!(b.first(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.len() <= 64
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// A URL's problem, before the label is known.
enum UrlProblem {
    NotAbsolute,
    Scheme,
    DotSegment,
}

impl UrlProblem {
    fn for_label(self, label: &str) -> TargetError {
        let label = label.to_owned();
        match self {
            UrlProblem::NotAbsolute => TargetError::NotAbsolute { label },
            UrlProblem::Scheme => TargetError::Scheme { label },
            UrlProblem::DotSegment => TargetError::DotSegment { label },
        }
    }
}

/// Checks `url` as written and returns its comparison form: `scheme://authority` with the
/// scheme and host lowercased, then the rest unchanged.
fn check_url(url: &str, allow_plaintext: bool) -> Result<String, UrlProblem> {
    let (scheme, rest) = url.split_once("://").ok_or(UrlProblem::NotAbsolute)?;
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "https" => {}
        "http" if allow_plaintext => {}
        s if s.is_empty()
            || !s
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')) =>
        {
            return Err(UrlProblem::NotAbsolute)
        }
        _ => return Err(UrlProblem::Scheme),
    }
    // Whitespace or control characters have no place in a URL a person registers.
    if url.bytes().any(|c| c.is_ascii_control() || c == b' ') {
        return Err(UrlProblem::NotAbsolute);
    }
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hostport) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let host = match hostport.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => hostport.split(':').next().unwrap_or_default(),
    };
    if host.is_empty() {
        return Err(UrlProblem::NotAbsolute);
    }
    // The whole URL must parse as well (a bad port, a bad IPv6 literal, a bad escape in the
    // host).
    let parsed = url::Url::parse(url).map_err(|_| UrlProblem::NotAbsolute)?;
    if !parsed.has_host() {
        return Err(UrlProblem::NotAbsolute);
    }
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    let path = tail.get(..path_end).unwrap_or_default();
    if path.split(['/', '\\']).any(is_dot_segment) {
        return Err(UrlProblem::DotSegment);
    }
    Ok(format!(
        "{scheme}://{userinfo}{}{tail}",
        hostport.to_ascii_lowercase()
    ))
}

/// `.` or `..`, with any of their dots percent-encoded (`%2e`, `%2E`).
pub(crate) fn is_dot_segment(segment: &str) -> bool {
    let s = segment.to_ascii_lowercase().replace("%2e", ".");
    s == "." || s == ".."
}

/// A label as shown in an error: control characters escaped, at most 80 characters.
fn printable(s: &str) -> String {
    s.chars().take(80).flat_map(char::escape_debug).collect()
}

impl TargetSpec {
    /// One `--harpoon.target` value: `key=value` pairs separated by commas, the keys `label`,
    /// `url` and `desc` (or `description`). A value in double quotes may hold commas, `=` and
    /// `;`; inside quotes `\"` is a quote and `\\` a backslash. `entry` names the value in an
    /// error (such as `--harpoon.target #2`).
    ///
    /// # Errors
    /// [`TargetError::Syntax`] saying what is wrong.
    pub fn parse(value: &str, entry: &str) -> Result<TargetSpec, TargetError> {
        let syntax = |problem: String| TargetError::Syntax {
            entry: entry.to_owned(),
            problem,
        };
        let mut label = None;
        let mut url = None;
        let mut description = None;
        for (key, value) in pairs(value).map_err(&syntax)? {
            let slot = match key.as_str() {
                "label" => &mut label,
                "url" => &mut url,
                "desc" | "description" => &mut description,
                other => {
                    return Err(syntax(format!(
                        "unknown key '{}' (the keys are label, url and desc)",
                        printable(other)
                    )))
                }
            };
            if slot.replace(value).is_some() {
                return Err(syntax(format!("'{key}' is given twice")));
            }
        }
        let label = label.ok_or_else(|| syntax("no label= in it".into()))?;
        let url =
            url.ok_or_else(|| syntax(format!("target '{}' has no url=", printable(&label))))?;
        Ok(TargetSpec {
            label,
            url,
            description: description.unwrap_or_default(),
            source: TargetSource::Config,
            tags: Vec::new(),
        })
    }

    /// `HARPOON_TARGETS`: entries of [`TargetSpec::parse`]'s form separated by `;` or
    /// newlines (outside quotes); blank entries are skipped.
    ///
    /// # Errors
    /// The first entry's [`TargetError::Syntax`], naming it by its place.
    pub fn parse_list(value: &str) -> Result<Vec<TargetSpec>, TargetError> {
        let mut out = Vec::new();
        for (i, entry) in split_entries(value).iter().enumerate() {
            if entry.trim().is_empty() {
                continue;
            }
            out.push(TargetSpec::parse(
                entry,
                &format!("HARPOON_TARGETS entry #{}", i + 1),
            )?);
        }
        Ok(out)
    }

    /// This spec in [`TargetSpec::parse`]'s form, every value quoted.
    #[must_use]
    pub fn to_flag(&self) -> String {
        format!(
            "label={},url={},desc={}",
            quote(&self.label),
            quote(&self.url),
            quote(&self.description)
        )
    }
}

pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The `key=value` pairs of one entry.
fn pairs(entry: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = entry.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        loop {
            match chars.next() {
                Some('=') => break,
                Some(',') | None => {
                    return Err(format!(
                        "'{}' has no '=' (pairs are key=value, separated by commas)",
                        printable(key.trim())
                    ))
                }
                Some(c) => key.push(c),
            }
        }
        let key = key.trim().to_owned();
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c @ ('"' | '\\')) => value.push(c),
                        Some(c) => {
                            value.push('\\');
                            value.push(c);
                        }
                        None => return Err(format!("the value of '{key}' has no closing quote")),
                    },
                    Some(c) => value.push(c),
                    None => return Err(format!("the value of '{key}' has no closing quote")),
                }
            }
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            match chars.next() {
                Some(',') | None => {}
                Some(_) => {
                    return Err(format!(
                        "after the quoted value of '{key}' comes something other than a comma"
                    ))
                }
            }
        } else {
            for c in chars.by_ref() {
                if c == ',' {
                    break;
                }
                value.push(c);
            }
            value = value.trim().to_owned();
        }
        out.push((key, value));
    }
    Ok(out)
}

/// Splits at `;` and newlines outside double quotes (a `\` inside quotes escapes the next
/// character).
fn split_entries(value: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let (mut quoted, mut escaped) = (false, false);
    for c in value.chars() {
        if quoted {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
            }
        } else if c == '"' {
            quoted = true;
        } else if c == ';' || c == '\n' || c == '\r' {
            out.push(String::new());
            continue;
        }
        if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}
