//! One server's entry: `{"command": ..., "args": [...], "env": {...}}` or
//! `{"type": "http", "url": ..., "headers": {...}}`, plus the `oauth` block and our own
//! `trust` and `disabled`, into a [`ServerSpec`]. Every problem in the entry is collected, so a
//! person fixes them all at once; an entry with any problem is not loaded.

use std::collections::BTreeMap;

use jsonc_parser::ast::{ObjectProp, Value};

use super::error::{cut, ConfigErrorKind as K};
use super::interpolate::{interpolate, InterpolationError, Vars};
use super::json::{self, Lines, Members};
use super::{Entry, Input, Section};
use crate::host::{OAuthSpec, ServerId, ServerSpec, TransportSpec, Trust};

/// What reading an entry needs from the file around it.
pub(super) struct Context<'r, 'v> {
    pub(super) lines: &'r Lines<'r>,
    pub(super) vars: &'r Vars<'v>,
    /// The file's VS Code `inputs`, for their descriptions in "needs input" errors.
    pub(super) inputs: &'r [Input],
}

/// The problems found, each at a byte offset.
pub(super) type Problems = Vec<(usize, K)>;

enum Transport {
    Stdio,
    Http,
}

/// The entry `prop` (key: the server's id) of `section`, at `position`.
pub(super) fn read(
    cx: &Context<'_, '_>,
    prop: &ObjectProp<'_>,
    section: Section,
    position: super::Position,
) -> Result<Entry, Problems> {
    let mut problems = Problems::new();
    let name = json::key(prop);
    let id = ServerId::new(name)
        .map_err(|e| problems.push((prop.range.start, e.into())))
        .ok();
    let Value::Object(object) = &prop.value else {
        problems.push((
            json::start(&prop.value),
            K::WrongType {
                field: format!("{}.{name}", section.path()),
                expected: "an object",
                found: json::kind(&prop.value),
            },
        ));
        return Err(problems);
    };
    let members = Members::of(object);
    for (dup, other) in &members.duplicates {
        problems.push((
            dup.range.start,
            K::DuplicateKey {
                field: json::key(dup).to_owned(),
                other: cx.lines.position(*other),
            },
        ));
    }
    let mut r = EntryReader {
        cx,
        members: &members,
        problems,
    };

    let transport = r.transport(prop.range.start);
    let mut env_file = None;
    let transport = match transport {
        Some(Transport::Stdio) => {
            env_file = r.expanded_string("envFile");
            r.stdio()
        }
        Some(Transport::Http) => r.http(),
        None => None,
    };
    let oauth = r.oauth();
    let trust = r.trust();
    let disabled = r.boolean("disabled").unwrap_or(false);

    match (id, transport, r.problems.is_empty()) {
        (Some(id), Some(transport), true) => Ok(Entry {
            spec: ServerSpec {
                id,
                transport,
                oauth,
                trust,
                disabled,
            },
            env_file,
            position,
            section,
        }),
        _ => Err(r.problems),
    }
}

struct EntryReader<'e, 'o, 'a, 'r, 'v> {
    cx: &'e Context<'r, 'v>,
    members: &'e Members<'o, 'a>,
    problems: Problems,
}

impl<'o, 'a> EntryReader<'_, 'o, 'a, '_, '_> {
    fn get(&self, field: &str) -> Option<&'o ObjectProp<'a>> {
        self.members.get(field)
    }

    fn wrong(&mut self, value: &Value<'_>, field: &str, expected: &'static str) {
        self.problems.push((
            json::start(value),
            K::WrongType {
                field: field.to_owned(),
                expected,
                found: json::kind(value),
            },
        ));
    }

    /// `field` if it is a string, as written (no interpolation), with its offset.
    fn raw_string(&mut self, field: &str) -> Option<(&'o str, usize)> {
        let prop = self.get(field)?;
        match &prop.value {
            Value::StringLit(s) => Some((s.value.as_ref(), s.range.start)),
            other => {
                self.wrong(other, field, "a string");
                None
            }
        }
    }

    /// `text` (at `offset`, the value of `field`) with its `${...}` replaced.
    fn expand(&mut self, text: &str, offset: usize, field: &str) -> Option<String> {
        match interpolate(text, self.cx.vars) {
            Ok(value) => Some(value.into_owned()),
            Err(e) => {
                let field = field.to_owned();
                let kind = match e {
                    InterpolationError::Missing { name } => K::MissingVariable { name, field },
                    InterpolationError::NotProvided { name } => K::NotProvided { name, field },
                    InterpolationError::NeedsInput { id } => K::NeedsInput {
                        description: self
                            .cx
                            .inputs
                            .iter()
                            .find(|i| i.id == id)
                            .and_then(|i| i.description.clone()),
                        id,
                        field,
                    },
                    InterpolationError::Unsupported { reference } => {
                        K::UnsupportedVariable { reference, field }
                    }
                    InterpolationError::Unterminated => K::UnterminatedVariable { field },
                };
                self.problems.push((offset, kind));
                None
            }
        }
    }

    fn expanded_string(&mut self, field: &str) -> Option<String> {
        let (text, offset) = self.raw_string(field)?;
        self.expand(text, offset, field)
    }

    fn boolean(&mut self, field: &str) -> Option<bool> {
        let prop = self.get(field)?;
        match &prop.value {
            Value::BooleanLit(b) => Some(b.value),
            other => {
                self.wrong(other, field, "true or false");
                None
            }
        }
    }

    /// The transport, from `type` or, without one, from which of `command` and `url` is
    /// there.
    fn transport(&mut self, entry_start: usize) -> Option<Transport> {
        // A duplicated key counts as there (its duplication is reported already).
        let has_command = self.members.has("command");
        let has_url = self.members.has("url");
        let Some((ty, offset)) = self.raw_string("type") else {
            if self.members.has("type") {
                return None; // not a string, or duplicated: reported
            }
            return match (has_command, has_url) {
                (true, false) => Some(Transport::Stdio),
                (false, true) => Some(Transport::Http),
                (true, true) => {
                    self.problems.push((entry_start, K::AmbiguousTransport));
                    None
                }
                (false, false) => {
                    self.problems.push((entry_start, K::NoTransport));
                    None
                }
            };
        };
        // "http" is VS Code's and Claude Code's word; "streamable-http" (Claude Code's docs, Cursor),
        // "streamableHttp" (Cline) and "streamable_http" (mcpo) are the others in real files.
        let normalized: String = ty
            .chars()
            .filter(|c| !matches!(c, '-' | '_'))
            .flat_map(char::to_lowercase)
            .collect();
        let (transport, field, name) = match normalized.as_str() {
            "stdio" => (Transport::Stdio, "command", "stdio"),
            "http" | "streamablehttp" => (Transport::Http, "url", "http"),
            "sse" => {
                self.problems.push((offset, K::SseUnsupported));
                return None;
            }
            _ => {
                self.problems
                    .push((offset, K::UnknownType { found: cut(ty, 40) }));
                return None;
            }
        };
        if !self.members.has(field) {
            self.problems.push((
                offset,
                K::MissingField {
                    field,
                    transport: name,
                },
            ));
            return None;
        }
        Some(transport)
    }

    fn stdio(&mut self) -> Option<TransportSpec> {
        let command = match self.raw_string("command") {
            Some((text, offset)) => match self.expand(text, offset, "command") {
                Some(command) if command.trim().is_empty() => {
                    self.problems.push((
                        offset,
                        K::Empty {
                            field: "command".to_owned(),
                        },
                    ));
                    None
                }
                command => command,
            },
            None => None,
        };
        let args = self.args();
        let env = self.string_map("env", true);
        let cwd = self.expanded_string("cwd");
        Some(TransportSpec::Stdio {
            command: command?,
            args: args?,
            env: env?,
            cwd,
        })
    }

    fn args(&mut self) -> Option<Vec<String>> {
        let Some(prop) = self.get("args") else {
            return Some(Vec::new());
        };
        let Value::Array(array) = &prop.value else {
            self.wrong(&prop.value, "args", "an array of strings");
            return None;
        };
        let mut args = Vec::with_capacity(array.elements.len());
        let mut ok = true;
        for (i, element) in array.elements.iter().enumerate() {
            let field = format!("args[{i}]");
            match element {
                Value::StringLit(s) => match self.expand(&s.value, s.range.start, &field) {
                    Some(arg) => args.push(arg),
                    None => ok = false,
                },
                other => {
                    self.wrong(other, &field, "a string");
                    ok = false;
                }
            }
        }
        ok.then_some(args)
    }

    /// `env` or `headers`: an object of strings, each interpolated. For `env`, numbers and
    /// booleans are taken as their text (VS Code's schema allows numbers; `"DEBUG": true`
    /// is common).
    fn string_map(&mut self, field: &str, scalars: bool) -> Option<BTreeMap<String, String>> {
        let Some(prop) = self.get(field) else {
            return Some(BTreeMap::new());
        };
        let Value::Object(object) = &prop.value else {
            self.wrong(&prop.value, field, "an object of strings");
            return None;
        };
        let members = Members::of(object);
        let mut ok = true;
        for (dup, other) in &members.duplicates {
            self.problems.push((
                dup.range.start,
                K::DuplicateKey {
                    field: format!("{field}.{}", json::key(dup)),
                    other: self.cx.lines.position(*other),
                },
            ));
            ok = false;
        }
        let mut map = BTreeMap::new();
        for member in &members.unique {
            let name = json::key(member);
            let path = format!("{field}.{name}");
            let value = match &member.value {
                Value::StringLit(s) => self.expand(&s.value, s.range.start, &path),
                Value::NumberLit(n) if scalars => Some(n.value.to_owned()),
                Value::BooleanLit(b) if scalars => Some(b.value.to_string()),
                Value::NullKeyword(n) if scalars => {
                    // VS Code reads null as "remove this variable from the inherited
                    // environment"; a ServerSpec only adds variables.
                    self.problems.push((
                        n.range.start,
                        K::InvalidValue {
                            field: path,
                            expected: "a string (null, to remove an inherited variable, is not supported)",
                        },
                    ));
                    None
                }
                other => {
                    self.wrong(other, &path, "a string");
                    None
                }
            };
            match value {
                Some(value) => {
                    map.insert(name.to_owned(), value);
                }
                None => ok = false,
            }
        }
        ok.then_some(map)
    }

    fn http(&mut self) -> Option<TransportSpec> {
        let url = match self.raw_string("url") {
            Some((text, offset)) => self
                .expand(text, offset, "url")
                .and_then(|url| self.check_url(url, offset)),
            None => None,
        };
        let headers = self.string_map("headers", false);
        Some(TransportSpec::Http {
            url: url?,
            headers: headers?,
        })
    }

    /// `url` if it is an absolute http(s) URL with a host. Only the reason is reported, never
    /// the URL (a token in its query or user info is common).
    fn check_url(&mut self, url: String, offset: usize) -> Option<String> {
        let reason = match url::Url::parse(&url) {
            Err(e) => e.to_string(),
            Ok(parsed) if !matches!(parsed.scheme(), "http" | "https") => {
                format!("its scheme is `{}`", cut(parsed.scheme(), 20))
            }
            Ok(parsed) if parsed.host().is_none() => "it has no host".to_owned(),
            Ok(_) => return Some(url),
        };
        self.problems.push((
            offset,
            K::InvalidUrl {
                field: "url".to_owned(),
                reason,
            },
        ));
        None
    }

    /// The `oauth` block: `clientId`, `callbackPort`, `scopes` (an array, or one string of
    /// space-separated scopes as Claude Code writes it). Its other keys are ignored.
    fn oauth(&mut self) -> Option<OAuthSpec> {
        let prop = self.get("oauth")?;
        let Value::Object(object) = &prop.value else {
            self.wrong(&prop.value, "oauth", "an object");
            return None;
        };
        let members = Members::of(object);
        for (dup, other) in &members.duplicates {
            self.problems.push((
                dup.range.start,
                K::DuplicateKey {
                    field: format!("oauth.{}", json::key(dup)),
                    other: self.cx.lines.position(*other),
                },
            ));
        }
        let mut spec = OAuthSpec::default();
        if let Some(p) = members.get("clientId") {
            match &p.value {
                Value::StringLit(s) => spec.client_id = Some(s.value.to_string()),
                other => self.wrong(other, "oauth.clientId", "a string"),
            }
        }
        if let Some(p) = members.get("callbackPort") {
            match &p.value {
                Value::NumberLit(n) => match n.value.parse::<u16>() {
                    Ok(port) if port != 0 => spec.callback_port = Some(port),
                    _ => self.problems.push((
                        n.range.start,
                        K::InvalidValue {
                            field: "oauth.callbackPort".to_owned(),
                            expected: "a port number from 1 to 65535",
                        },
                    )),
                },
                other => self.wrong(other, "oauth.callbackPort", "a number"),
            }
        }
        if let Some(p) = members.get("scopes") {
            match &p.value {
                Value::StringLit(s) => {
                    spec.scopes = s.value.split_whitespace().map(str::to_owned).collect();
                }
                Value::Array(array) => {
                    for (i, element) in array.elements.iter().enumerate() {
                        match element {
                            Value::StringLit(s) => spec.scopes.push(s.value.to_string()),
                            other => self.wrong(other, &format!("oauth.scopes[{i}]"), "a string"),
                        }
                    }
                }
                other => self.wrong(other, "oauth.scopes", "an array of strings"),
            }
        }
        Some(spec)
    }

    /// Our own `trust`: `"trusted"` or `"untrusted"` (the default).
    fn trust(&mut self) -> Trust {
        match self.raw_string("trust") {
            None => Trust::Untrusted,
            Some(("trusted", _)) => Trust::Trusted,
            Some(("untrusted", _)) => Trust::Untrusted,
            Some((_, offset)) => {
                self.problems.push((
                    offset,
                    K::InvalidValue {
                        field: "trust".to_owned(),
                        expected: "\"trusted\" or \"untrusted\"",
                    },
                ));
                Trust::Untrusted
            }
        }
    }
}
