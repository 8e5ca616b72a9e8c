//! The Go tunnel-client's YAML config file and profiles, as the third layer of `tunnel run`'s
//! settings: flags beat the environment, which beats the file, which beats the defaults.
//!
//! The file is chosen by `--config` / `TUNNEL_CLIENT_CONFIG` (a path), `--profile` /
//! `TUNNEL_CLIENT_PROFILE` (a name in the profile directory: `--profile-dir`,
//! `TUNNEL_CLIENT_PROFILE_DIR`, else `$XDG_CONFIG_HOME/tunnel-client`, else
//! `~/.config/tunnel-client`) or `--profile-file` / `TUNNEL_CLIENT_PROFILE_FILE` (a path ending
//! in `.yaml`); at most one of them. Its keys are the Go client's (`config_version: 1`), each
//! standing for the environment variable the Go client maps it to, so that the rest of the
//! resolution reads one table. Unknown keys, wrong types, a second document or a duplicate key
//! stop start-up with the file, the line and the key; a value is never repeated when it may be
//! a secret.

use std::collections::{BTreeMap, HashMap};

use saphyr_parser::{Event, Parser, ScalarStyle};

use super::config::ConfigError;

/// The largest config file read (a profile is a few hundred bytes).
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// How deeply YAML collections may nest (the schema needs four levels).
const MAX_DEPTH: usize = 16;

/// The most values a file may expand to, aliases included (a few aliases nested can stand for
/// billions of values).
const MAX_NODES: usize = 100_000;

/// Which file holds the configuration, and how it was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSource {
    /// The file's path.
    pub path: String,
    /// The profile's name, when the file is a profile.
    pub profile: Option<String>,
    /// How it was chosen, e.g. `--profile dev` or `TUNNEL_CLIENT_CONFIG`.
    pub chosen_by: String,
}

/// The flags that choose the file (the environment variables are read through `env`).
#[derive(Clone, Debug, Default)]
pub struct SourceFlags<'a> {
    /// `--config`.
    pub config: Option<&'a str>,
    /// `--profile`.
    pub profile: Option<&'a str>,
    /// `--profile-file`.
    pub profile_file: Option<&'a str>,
    /// `--profile-dir`.
    pub profile_dir: Option<&'a str>,
}

fn trimmed(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// Checks a profile name: letters, digits, `.`, `_`, `-`, starting with a letter or digit, at
/// most 128 characters (the Go client's rule), so that it maps to exactly one file.
pub fn validate_profile_name(name: &str) -> Result<(), ConfigError> {
    let ok = name.len() <= 128
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError(format!(
            "invalid profile name {name:?}: use letters, digits, '.', '_' or '-' \
             (starting with a letter or digit, at most 128 characters)"
        )))
    }
}

fn expand_home(path: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    if path == "~" || path.starts_with("~/") {
        let home = trimmed(env("HOME")).ok_or_else(|| {
            ConfigError(format!(
                "cannot expand {path:?}: the HOME environment variable is not set"
            ))
        })?;
        return Ok(format!("{home}{}", path.get(1..).unwrap_or("")));
    }
    Ok(path.to_owned())
}

/// The directory of named profiles: `explicit` (`--profile-dir`), else
/// `TUNNEL_CLIENT_PROFILE_DIR`, else `$XDG_CONFIG_HOME/tunnel-client`, else
/// `$HOME/.config/tunnel-client`.
pub fn profile_dir(
    explicit: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    if let Some(dir) = explicit.map(str::trim).filter(|d| !d.is_empty()) {
        return expand_home(dir, env);
    }
    if let Some(dir) = trimmed(env("TUNNEL_CLIENT_PROFILE_DIR")) {
        return expand_home(&dir, env);
    }
    if let Some(xdg) = trimmed(env("XDG_CONFIG_HOME")) {
        return Ok(format!("{}/tunnel-client", expand_home(&xdg, env)?));
    }
    if let Some(home) = trimmed(env("HOME")) {
        return Ok(format!("{home}/.config/tunnel-client"));
    }
    Err(ConfigError(
        "cannot find the profile directory: set --profile-dir, TUNNEL_CLIENT_PROFILE_DIR, \
         XDG_CONFIG_HOME or HOME"
            .to_owned(),
    ))
}

/// The path of profile `name` in `dir`.
pub fn profile_path(name: &str, dir: &str) -> Result<String, ConfigError> {
    validate_profile_name(name)?;
    Ok(format!("{}/{name}.yaml", dir.trim_end_matches('/')))
}

fn profile_file_source(
    path: &str,
    chosen_by: String,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ConfigSource, ConfigError> {
    let path = expand_home(path, env)?;
    let base = path.rsplit('/').next().unwrap_or(&path);
    let Some(name) = base.strip_suffix(".yaml") else {
        return Err(ConfigError(format!(
            "invalid {chosen_by} {path:?}: a profile file's name ends with .yaml"
        )));
    };
    validate_profile_name(name)?;
    Ok(ConfigSource {
        profile: Some(name.to_owned()),
        path,
        chosen_by,
    })
}

/// Which file to read, if any: a flag beats every variable; two choices at one level are an
/// error (as in the Go client).
pub fn select_source(
    flags: &SourceFlags<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ConfigSource>, ConfigError> {
    let named = [
        ("--config", flags.config),
        ("--profile", flags.profile),
        ("--profile-file", flags.profile_file),
        ("--profile-dir", flags.profile_dir),
    ];
    for (flag, value) in named {
        if value.is_some_and(|v| v.trim().is_empty()) {
            return Err(ConfigError(format!("invalid {flag}: the value is empty")));
        }
    }
    let given: Vec<&str> = named[..3]
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(f, _)| *f)
        .collect();
    if given.len() > 1 {
        return Err(ConfigError(format!(
            "{} and {} cannot be used together: give one config file or profile",
            given[0], given[1]
        )));
    }
    if let Some(path) = flags.config {
        return Ok(Some(ConfigSource {
            path: expand_home(path.trim(), env)?,
            profile: None,
            chosen_by: "--config".to_owned(),
        }));
    }
    if let Some(name) = flags.profile {
        let name = name.trim();
        let dir = profile_dir(flags.profile_dir, env)?;
        return Ok(Some(ConfigSource {
            path: profile_path(name, &dir)?,
            profile: Some(name.to_owned()),
            chosen_by: format!("--profile {name}"),
        }));
    }
    if let Some(path) = flags.profile_file {
        return profile_file_source(path.trim(), "--profile-file".to_owned(), env).map(Some);
    }
    let vars = [
        "TUNNEL_CLIENT_CONFIG",
        "TUNNEL_CLIENT_PROFILE",
        "TUNNEL_CLIENT_PROFILE_FILE",
    ];
    let set: Vec<(&str, String)> = vars
        .iter()
        .filter_map(|v| trimmed(env(v)).map(|value| (*v, value)))
        .collect();
    if set.len() > 1 {
        return Err(ConfigError(format!(
            "{} and {} cannot both be set: give one config file or profile",
            set[0].0, set[1].0
        )));
    }
    let Some((var, value)) = set.into_iter().next() else {
        return Ok(None);
    };
    match var {
        "TUNNEL_CLIENT_CONFIG" => Ok(Some(ConfigSource {
            path: expand_home(&value, env)?,
            profile: None,
            chosen_by: var.to_owned(),
        })),
        "TUNNEL_CLIENT_PROFILE" => {
            let dir = profile_dir(flags.profile_dir, env)?;
            Ok(Some(ConfigSource {
                path: profile_path(&value, &dir)?,
                chosen_by: format!("{var}={value}"),
                profile: Some(value),
            }))
        }
        _ => profile_file_source(&value, var.to_owned(), env).map(Some),
    }
}

// ---------------------------------------------------------------------------------------------
// YAML, as a small tree whose every node keeps its line.

#[derive(Clone, Debug)]
enum Value {
    Null,
    Scalar(String),
    Map(Vec<(String, usize, Node)>),
    Seq(Vec<Node>),
}

#[derive(Clone, Debug)]
struct Node {
    value: Value,
    line: usize,
    /// How many values this node stands for, itself included.
    size: usize,
}

/// A YAML problem at a line.
struct YamlError {
    line: usize,
    message: String,
}

struct Reader<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    anchors: HashMap<usize, Node>,
    /// Values read so far, aliases expanded.
    total: usize,
}

impl<'a> Reader<'a> {
    fn next(&mut self) -> Result<(Event<'a>, usize), YamlError> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => Ok((event, span.start.line())),
            Some(Err(e)) => Err(YamlError {
                line: e.marker().line(),
                message: format!("not valid YAML: {}", e.info()),
            }),
            None => Err(YamlError {
                line: 0,
                message: "not valid YAML: the file ends early".to_owned(),
            }),
        }
    }

    /// Counts `size` more values; too many is an error.
    fn count(&mut self, size: usize, line: usize) -> Result<(), YamlError> {
        self.total = self.total.saturating_add(size);
        if self.total > MAX_NODES {
            return Err(YamlError {
                line,
                message: format!(
                    "the file expands to more than {MAX_NODES} values (aliases included)"
                ),
            });
        }
        Ok(())
    }

    fn remember(&mut self, anchor: usize, node: &Node) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
    }

    fn node(&mut self, event: Event<'a>, line: usize, depth: usize) -> Result<Node, YamlError> {
        if depth > MAX_DEPTH {
            return Err(YamlError {
                line,
                message: format!("collections nest deeper than {MAX_DEPTH} levels"),
            });
        }
        match event {
            Event::Scalar(text, style, anchor, _) => {
                let null = style == ScalarStyle::Plain
                    && matches!(text.as_ref(), "" | "~" | "null" | "Null" | "NULL");
                let node = Node {
                    value: if null {
                        Value::Null
                    } else {
                        Value::Scalar(text.into_owned())
                    },
                    line,
                    size: 1,
                };
                self.count(1, line)?;
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let (event, at) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(event, at, depth + 1)?);
                }
                let size = 1 + items.iter().map(|n| n.size).sum::<usize>();
                self.count(1, line)?;
                let node = Node {
                    value: Value::Seq(items),
                    line,
                    size,
                };
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::MappingStart(anchor, _) => {
                let mut entries: Vec<(String, usize, Node)> = Vec::new();
                loop {
                    let (event, at) = self.next()?;
                    let key = match event {
                        Event::MappingEnd => break,
                        Event::Scalar(text, ..) => text.into_owned(),
                        _ => {
                            return Err(YamlError {
                                line: at,
                                message: "a mapping key must be a plain name".to_owned(),
                            })
                        }
                    };
                    if entries.iter().any(|(k, ..)| *k == key) {
                        return Err(YamlError {
                            line: at,
                            message: format!("key {key:?} appears twice in one mapping"),
                        });
                    }
                    let (event, value_line) = self.next()?;
                    let value = self.node(event, value_line, depth + 1)?;
                    entries.push((key, at, value));
                }
                let size = 1 + entries.iter().map(|(_, _, n)| n.size).sum::<usize>();
                self.count(1, line)?;
                let node = Node {
                    value: Value::Map(entries),
                    line,
                    size,
                };
                self.remember(anchor, &node);
                Ok(node)
            }
            Event::Alias(id) => {
                let size = self.anchors.get(&id).map(|n| n.size).ok_or(YamlError {
                    line,
                    message: "an alias names an anchor that is not defined before it".to_owned(),
                })?;
                // Counted before the copy: the budget bounds the memory aliases take.
                self.count(size, line)?;
                self.anchors.get(&id).cloned().ok_or(YamlError {
                    line,
                    message: "an alias names an anchor that is not defined before it".to_owned(),
                })
            }
            _ => Err(YamlError {
                line,
                message: "not valid YAML here".to_owned(),
            }),
        }
    }
}

/// Parses one YAML document (`None` for an empty file).
fn parse_yaml(text: &str) -> Result<Option<Node>, YamlError> {
    let mut reader = Reader {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        total: 0,
    };
    let mut root = None;
    loop {
        let (event, line) = reader.next()?;
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => return Ok(root),
            Event::DocumentStart(_) => {
                let (event, at) = reader.next()?;
                if root.is_some() {
                    // A trailing `---` with nothing after it is harmless; a second document
                    // with values would be ignored by the Go client, so it is refused here.
                    let empty = matches!(event, Event::DocumentEnd)
                        || matches!(&event, Event::Scalar(t, ScalarStyle::Plain, ..) if t.is_empty());
                    if empty {
                        continue;
                    }
                    return Err(YamlError {
                        line,
                        message: "the file holds more than one YAML document (the Go client reads \
                                  only the first: put everything in one)"
                            .to_owned(),
                    });
                }
                if matches!(event, Event::DocumentEnd) {
                    root = Some(Node {
                        value: Value::Null,
                        line: at,
                        size: 1,
                    });
                } else {
                    root = Some(reader.node(event, at, 0)?);
                }
            }
            _ => {
                return Err(YamlError {
                    line,
                    message: "not valid YAML here".to_owned(),
                })
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The schema: each key of the Go client's file and the variable it stands for.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A string (a number is taken as written).
    Text,
    /// A string that may be `env:VAR` or `file:PATH`, resolved when the file is read (the Go
    /// client resolves these keys at load).
    Reference,
    /// `true` or `false`.
    Bool,
    /// A whole number.
    Int,
    /// A list of strings.
    List,
    /// A mapping of header names to values (`env:`/`file:` allowed in values).
    Headers,
    /// `mcp.server_urls`: mappings with `url` and optional `channel`, `unix_socket`,
    /// `http_proxy`, `client_cert`, `client_key`.
    ServerUrls,
    /// `mcp.commands`: mappings with `command` and optional `channel`.
    Commands,
    /// `harpoon.targets`: mappings with `label`, `url` and optional `description`,
    /// `unix_socket`.
    HarpoonTargets,
}

/// `(key, variable, kind)`: the Go client's file schema (`pkg/runtimeconfig/file_config.go`).
const KEYS: &[(&str, &str, Kind)] = &[
    ("ca_bundle", "CA_BUNDLE", Kind::Text),
    ("http_proxy", "TUNNEL_CLIENT_HTTP_PROXY", Kind::Text),
    (
        "control_plane.base_url",
        "CONTROL_PLANE_BASE_URL",
        Kind::Reference,
    ),
    (
        "control_plane.url_path",
        "CONTROL_PLANE_URL_PATH",
        Kind::Reference,
    ),
    (
        "control_plane.tunnel_id",
        "CONTROL_PLANE_TUNNEL_ID",
        Kind::Text,
    ),
    (
        "control_plane.organization_id",
        "CONTROL_PLANE_ORGANIZATION_ID",
        Kind::Text,
    ),
    ("control_plane.api_key", "CONTROL_PLANE_API_KEY", Kind::Text),
    (
        "control_plane.client_cert",
        "CONTROL_PLANE_CLIENT_CERT",
        Kind::Text,
    ),
    (
        "control_plane.client_key",
        "CONTROL_PLANE_CLIENT_KEY",
        Kind::Text,
    ),
    (
        "control_plane.http_proxy",
        "CONTROL_PLANE_HTTP_PROXY",
        Kind::Text,
    ),
    (
        "control_plane.max_inflight_requests",
        "CONTROL_PLANE_MAX_INFLIGHT_REQUESTS",
        Kind::Int,
    ),
    (
        "control_plane.poll_timeout",
        "CONTROL_PLANE_POLL_TIMEOUT",
        Kind::Text,
    ),
    (
        "control_plane.poll_deadline_guardrail",
        "CONTROL_PLANE_POLL_DEADLINE_GUARDRAIL",
        Kind::Text,
    ),
    (
        "control_plane.poll_channels",
        "CONTROL_PLANE_POLL_CHANNELS",
        Kind::List,
    ),
    (
        "control_plane.extra_headers",
        "CONTROL_PLANE_EXTRA_HEADERS",
        Kind::Headers,
    ),
    ("log.level", "LOG_LEVEL", Kind::Text),
    ("log.format", "LOG_FORMAT", Kind::Text),
    ("log.file", "LOG_FILE", Kind::Text),
    ("log.http_raw_unsafe", "LOG_HTTP_RAW_UNSAFE", Kind::Bool),
    ("health.listen_addr", "HEALTH_LISTEN_ADDR", Kind::Reference),
    ("health.unix_socket", "HEALTH_UNIX_SOCKET", Kind::Reference),
    ("health.url_file", "HEALTH_URL_FILE", Kind::Text),
    ("admin_ui.allow_remote", "ALLOW_REMOTE_UI", Kind::Bool),
    ("admin_ui.open_browser", "OPEN_WEB_UI", Kind::Bool),
    (
        "admin_ui.log_buffer_events",
        "ADMIN_UI_LOG_BUFFER_EVENTS",
        Kind::Int,
    ),
    ("process.pid_file", "PID_FILE", Kind::Text),
    ("cloudflared.token", "CLOUDFLARED_TUNNEL_TOKEN", Kind::Text),
    ("cloudflared.managed", "CLOUDFLARED_MANAGED", Kind::Bool),
    ("cloudflared.path", "CLOUDFLARED_PATH", Kind::Text),
    (
        "cloudflared.ready_timeout",
        "CLOUDFLARED_READY_TIMEOUT",
        Kind::Text,
    ),
    ("mcp.server_urls", "MCP_SERVER_URL", Kind::ServerUrls),
    ("mcp.commands", "MCP_COMMAND", Kind::Commands),
    ("mcp.http_proxy", "MCP_HTTP_PROXY", Kind::Text),
    ("mcp.client_cert", "MCP_CLIENT_CERT", Kind::Text),
    ("mcp.client_key", "MCP_CLIENT_KEY", Kind::Text),
    ("mcp.extra_headers", "MCP_EXTRA_HEADERS", Kind::Headers),
    (
        "mcp.discovery_extra_headers",
        "MCP_DISCOVERY_EXTRA_HEADERS",
        Kind::Headers,
    ),
    (
        "mcp.startup_wait_timeout",
        "MCP_STARTUP_WAIT_TIMEOUT",
        Kind::Text,
    ),
    (
        "mcp.connection_max_ttl",
        "MCP_CONNECTION_MAX_TTL",
        Kind::Text,
    ),
    (
        "mcp.max_concurrent_requests",
        "MCP_MAX_CONCURRENT_REQUESTS",
        Kind::Int,
    ),
    ("harpoon.targets", "HARPOON_TARGETS", Kind::HarpoonTargets),
    (
        "harpoon.allow_plaintext_http",
        "HARPOON_ALLOW_PLAINTEXT_HTTP",
        Kind::Bool,
    ),
    (
        "harpoon.max_response_bytes",
        "HARPOON_MAX_RESPONSE_BYTES",
        Kind::Int,
    ),
    ("harpoon.max_redirects", "HARPOON_MAX_REDIRECTS", Kind::Int),
    ("harpoon.http_proxy", "HARPOON_HTTP_PROXY", Kind::Text),
    (
        "harpoon.additional_transports",
        "HARPOON_ADDITIONAL_TRANSPORTS",
        Kind::List,
    ),
    (
        "harpoon.capture_payloads",
        "HARPOON_CAPTURE_PAYLOADS",
        Kind::Bool,
    ),
    (
        "harpoon.hosts_include_suffix",
        "HARPOON_HOSTS_INCLUDE_SUFFIX",
        Kind::List,
    ),
    (
        "harpoon.hosts_include_regex",
        "HARPOON_HOSTS_INCLUDE_REGEX",
        Kind::List,
    ),
    (
        "harpoon.hosts_include_loopback",
        "HARPOON_HOSTS_INCLUDE_LOOPBACK",
        Kind::Bool,
    ),
    (
        "harpoon.hosts_include_private",
        "HARPOON_HOSTS_INCLUDE_PRIVATE",
        Kind::Bool,
    ),
    ("proxy.check_interval", "PROXY_CHECK_INTERVAL", Kind::Text),
];

/// The file key a variable is read from, if the file has one.
#[must_use]
pub fn key_for_variable(var: &str) -> Option<&'static str> {
    KEYS.iter().find(|(_, v, _)| *v == var).map(|(k, ..)| *k)
}

/// One value of the file: the key's text (lists and entries one item each), where it is.
/// `Debug` shows the key and line, not the values (a file may hold a literal key).
#[derive(Clone, PartialEq, Eq)]
pub struct FileValue {
    /// The key, e.g. `control_plane.tunnel_id`.
    pub key: &'static str,
    /// Its line (1-based).
    pub line: usize,
    /// The value; a list's items, or a collection's entries in the variable's entry form
    /// (`channel=main,url=…`, `label="…",url="…",desc="…"`, `Name: value`), one each.
    pub items: Vec<String>,
}

impl std::fmt::Debug for FileValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FileValue({} line {}, {} item(s))",
            self.key,
            self.line,
            self.items.len()
        )
    }
}

/// The values of a config file, by the variable each key stands for.
#[derive(Clone, Debug, Default)]
pub struct FileLayer {
    /// Where it came from.
    pub source: Option<ConfigSource>,
    values: BTreeMap<&'static str, FileValue>,
}

impl FileLayer {
    /// The value standing for variable `var`.
    #[must_use]
    pub fn get(&self, var: &str) -> Option<&FileValue> {
        self.values.get(var)
    }

    /// Every value read, by variable.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, &FileValue)> {
        self.values.iter().map(|(k, v)| (*k, v))
    }

    /// How a value of this layer is named in messages: `key (FILE line N)`.
    #[must_use]
    pub fn origin(&self, value: &FileValue) -> String {
        let path = self.source.as_ref().map_or("", |s| s.path.as_str());
        format!("{} ({path} line {})", value.key, value.line)
    }
}

struct Loader<'a> {
    path: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
    read_file: &'a dyn Fn(&str) -> std::io::Result<String>,
    values: BTreeMap<&'static str, FileValue>,
}

impl Loader<'_> {
    fn err(&self, line: usize, key: &str, message: &str) -> ConfigError {
        if key.is_empty() {
            ConfigError(format!(
                "invalid config file {} line {line}: {message}",
                self.path
            ))
        } else {
            ConfigError(format!(
                "invalid config file {} line {line}: {key}: {message}",
                self.path
            ))
        }
    }

    fn scalar<'n>(&self, key: &str, node: &'n Node) -> Result<&'n str, ConfigError> {
        match &node.value {
            Value::Scalar(s) => Ok(s),
            _ => Err(self.err(node.line, key, "expected a single value")),
        }
    }

    /// Resolves an `env:VAR` or `file:PATH` reference (the value itself otherwise).
    fn reference(&self, key: &str, line: usize, raw: &str) -> Result<String, ConfigError> {
        let raw = raw.trim();
        let lower = raw.to_ascii_lowercase();
        let resolved = if lower.starts_with("env:") {
            let var = raw.get(4..).unwrap_or("").trim();
            if var.is_empty() {
                return Err(self.err(line, key, "env: needs a variable name"));
            }
            (self.env)(var)
                .map(|v| v.trim().to_owned())
                .ok_or_else(|| {
                    self.err(
                        line,
                        key,
                        &format!("environment variable {var:?} is not set"),
                    )
                })?
        } else if lower.starts_with("file:") {
            let path = raw.get(5..).unwrap_or("").trim();
            if path.is_empty() {
                return Err(self.err(line, key, "file: needs a path"));
            }
            (self.read_file)(path)
                .map_err(|e| self.err(line, key, &format!("cannot read file {path:?}: {e}")))?
                .trim()
                .to_owned()
        } else {
            raw.to_owned()
        };
        if resolved.is_empty() {
            return Err(self.err(line, key, "the value is empty"));
        }
        Ok(resolved)
    }

    fn set(&mut self, key: &'static str, var: &'static str, line: usize, items: Vec<String>) {
        self.values.insert(var, FileValue { key, line, items });
    }

    fn section(&mut self, prefix: &str, node: &Node) -> Result<(), ConfigError> {
        let entries = match &node.value {
            Value::Map(entries) => entries,
            Value::Null => return Ok(()),
            _ => {
                let what = if prefix.is_empty() {
                    "the file must be a mapping of keys to values"
                } else {
                    "expected a mapping of keys to values"
                };
                return Err(self.err(node.line, prefix, what));
            }
        };
        for (name, line, value) in entries {
            let key = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            if key == "config_version" {
                match &value.value {
                    Value::Scalar(v) if v.trim() == "1" => continue,
                    _ => {
                        return Err(self.err(
                            *line,
                            &key,
                            "mcpwire reads config_version 1 (the Go tunnel-client's)",
                        ))
                    }
                }
            }
            if let Some(&(k, var, kind)) = KEYS.iter().find(|(k, ..)| *k == key) {
                self.leaf(k, var, kind, *line, value)?;
                continue;
            }
            let inner = format!("{key}.");
            if KEYS.iter().any(|(k, ..)| k.starts_with(&inner)) {
                self.section(&key, value)?;
                continue;
            }
            let known: Vec<&str> = KEYS
                .iter()
                .filter_map(|(k, ..)| {
                    let rest = if prefix.is_empty() {
                        Some(*k)
                    } else {
                        k.strip_prefix(prefix).and_then(|r| r.strip_prefix('.'))
                    }?;
                    Some(rest.split('.').next().unwrap_or(rest))
                })
                .fold(Vec::new(), |mut acc, k| {
                    if !acc.contains(&k) {
                        acc.push(k);
                    }
                    acc
                });
            let known = if prefix.is_empty() {
                let mut k = vec!["config_version"];
                k.extend(known);
                k
            } else {
                known
            };
            return Err(self.err(
                *line,
                &key,
                &format!("unknown key (known here: {})", known.join(", ")),
            ));
        }
        Ok(())
    }

    fn fields<'n>(
        &self,
        key: &str,
        node: &'n Node,
        allowed: &[&str],
    ) -> Result<Vec<(&'n str, usize, &'n Node)>, ConfigError> {
        let Value::Map(entries) = &node.value else {
            return Err(self.err(
                node.line,
                key,
                &format!("each entry is a mapping with {}", allowed.join(", ")),
            ));
        };
        let mut out = Vec::new();
        for (name, line, value) in entries {
            if !allowed.contains(&name.as_str()) {
                return Err(self.err(
                    *line,
                    &format!("{key}.{name}"),
                    &format!("unknown key (known here: {})", allowed.join(", ")),
                ));
            }
            if !matches!(value.value, Value::Null) {
                out.push((name.as_str(), *line, value));
            }
        }
        Ok(out)
    }

    fn leaf(
        &mut self,
        key: &'static str,
        var: &'static str,
        kind: Kind,
        line: usize,
        node: &Node,
    ) -> Result<(), ConfigError> {
        if matches!(node.value, Value::Null) {
            return Ok(());
        }
        let items = match kind {
            Kind::Text => vec![self.scalar(key, node)?.to_owned()],
            Kind::Reference => {
                let raw = self.scalar(key, node)?;
                vec![self.reference(key, node.line, raw)?]
            }
            Kind::Bool => {
                let v = self.scalar(key, node)?;
                match v.trim().to_ascii_lowercase().as_str() {
                    "true" | "yes" | "on" => vec!["true".to_owned()],
                    "false" | "no" | "off" => vec!["false".to_owned()],
                    _ => return Err(self.err(node.line, key, "expected true or false")),
                }
            }
            Kind::Int => {
                let v = self.scalar(key, node)?;
                match v.trim().parse::<u64>() {
                    Ok(n) => vec![n.to_string()],
                    Err(_) => return Err(self.err(node.line, key, "expected a whole number")),
                }
            }
            Kind::List => {
                let Value::Seq(list) = &node.value else {
                    return Err(self.err(node.line, key, "expected a list"));
                };
                list.iter()
                    .map(|n| self.scalar(key, n).map(str::to_owned))
                    .collect::<Result<_, _>>()?
            }
            Kind::Headers => {
                let Value::Map(entries) = &node.value else {
                    return Err(self.err(
                        node.line,
                        key,
                        "expected a mapping of header names to values",
                    ));
                };
                let mut out = Vec::new();
                for (name, at, value) in entries {
                    let v = match &value.value {
                        Value::Scalar(s) => s,
                        _ => {
                            return Err(self.err(
                                *at,
                                &format!("{key}.{name}"),
                                "expected a header value",
                            ))
                        }
                    };
                    out.push(format!("{name}: {v}"));
                }
                out
            }
            Kind::ServerUrls | Kind::Commands | Kind::HarpoonTargets => {
                let Value::Seq(list) = &node.value else {
                    return Err(self.err(node.line, key, "expected a list of entries"));
                };
                let mut out = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let entry_key = format!("{key}[{}]", i + 1);
                    out.push(self.entry(kind, &entry_key, item)?);
                }
                out
            }
        };
        self.set(key, var, line, items);
        Ok(())
    }

    fn entry(&self, kind: Kind, key: &str, item: &Node) -> Result<String, ConfigError> {
        let allowed: &[&str] = match kind {
            Kind::ServerUrls => &[
                "channel",
                "url",
                "unix_socket",
                "http_proxy",
                "client_cert",
                "client_key",
            ],
            Kind::Commands => &["channel", "command"],
            _ => &["label", "url", "description", "unix_socket"],
        };
        let fields = self.fields(key, item, allowed)?;
        let mut parts: Vec<String> = Vec::new();
        let required: &[&str] = match kind {
            Kind::ServerUrls => &["url"],
            Kind::Commands => &["command"],
            _ => &["label", "url"],
        };
        for need in required {
            if !fields.iter().any(|(n, ..)| n == need) {
                return Err(self.err(item.line, key, &format!("the entry needs {need}")));
            }
        }
        // The entry forms of the variables: channel first, then the rest in schema order.
        for name in allowed {
            let Some((_, line, node)) = fields.iter().find(|(n, ..)| n == name) else {
                continue;
            };
            let field = format!("{key}.{name}");
            let raw = self.scalar(&field, node)?;
            let value = match (kind, *name) {
                (_, "url") | (Kind::Commands, "command") | (_, "unix_socket") => {
                    self.reference(&field, *line, raw)?
                }
                _ => raw.trim().to_owned(),
            };
            if value.contains(['\n', '\r']) {
                return Err(self.err(*line, &field, "the value spans more than one line"));
            }
            let part = match (kind, *name) {
                (Kind::HarpoonTargets, "label") => format!("label={}", quote(&value)),
                (Kind::HarpoonTargets, "url") => format!("url={}", quote(&value)),
                (Kind::HarpoonTargets, "description") => format!("desc={}", quote(&value)),
                (Kind::HarpoonTargets, _) => format!("unix-socket={}", quote(&value)),
                (_, n) => format!("{}={value}", n.replace('_', "-")),
            };
            parts.push(part);
        }
        Ok(parts.join(","))
    }
}

fn quote(s: &str) -> String {
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

/// Reads `text` (the file at `source`) into a layer; `env` and `read_file` resolve its
/// `env:`/`file:` references.
pub fn parse(
    source: &ConfigSource,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<FileLayer, ConfigError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(ConfigError(format!(
            "invalid config file {}: it is larger than {MAX_FILE_BYTES} bytes",
            source.path
        )));
    }
    let mut loader = Loader {
        path: &source.path,
        env,
        read_file,
        values: BTreeMap::new(),
    };
    let root = parse_yaml(text).map_err(|e| loader.err(e.line, "", &e.message))?;
    if let Some(root) = root {
        loader.section("", &root)?;
    }
    Ok(FileLayer {
        source: Some(source.clone()),
        values: loader.values,
    })
}

/// Chooses, reads and parses the config file (an empty layer without one).
pub fn load(
    flags: &SourceFlags<'_>,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<FileLayer, ConfigError> {
    let Some(source) = select_source(flags, env)? else {
        return Ok(FileLayer::default());
    };
    let text = read_file(&source.path).map_err(|e| {
        let hint = if source.profile.is_some() && e.kind() == std::io::ErrorKind::NotFound {
            " (create it with `mcpwire tunnel init`)"
        } else {
            ""
        };
        ConfigError(format!(
            "cannot read config file {} (chosen by {}): {e}{hint}",
            source.path, source.chosen_by
        ))
    })?;
    parse(&source, &text, env, read_file)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn src() -> ConfigSource {
        ConfigSource {
            path: "/etc/t.yaml".to_owned(),
            profile: None,
            chosen_by: "--config".to_owned(),
        }
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn no_file(_: &str) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file",
        ))
    }

    fn parse_text(text: &str) -> Result<FileLayer, ConfigError> {
        parse(&src(), text, &env_of(&[("KEY", "sk-1")]), &no_file)
    }

    #[test]
    fn keys_map_to_variables_with_their_lines() {
        let layer = parse_text(
            "config_version: 1\ncontrol_plane:\n  tunnel_id: \"tunnel_x\"\n  max_inflight_requests: 7\n\
             log:\n  level: debug\nmcp:\n  server_urls:\n    - channel: main\n      url: http://127.0.0.1:1/mcp\n",
        )
        .unwrap();
        let v = layer.get("CONTROL_PLANE_TUNNEL_ID").unwrap();
        assert_eq!(
            (v.key, v.line, v.items.clone()),
            ("control_plane.tunnel_id", 3, vec!["tunnel_x".to_owned()])
        );
        assert_eq!(
            layer.origin(v),
            "control_plane.tunnel_id (/etc/t.yaml line 3)"
        );
        assert_eq!(
            layer
                .get("CONTROL_PLANE_MAX_INFLIGHT_REQUESTS")
                .unwrap()
                .items,
            ["7"]
        );
        assert_eq!(layer.get("LOG_LEVEL").unwrap().items, ["debug"]);
        assert_eq!(
            layer.get("MCP_SERVER_URL").unwrap().items,
            ["channel=main,url=http://127.0.0.1:1/mcp"]
        );
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = parse_text("control_plane:\n  tunel_id: x\n").unwrap_err().0;
        assert!(e.starts_with("invalid config file /etc/t.yaml line 2: control_plane.tunel_id: unknown key (known here: base_url, url_path, tunnel_id"), "{e}");
        let e = parse_text("log:\n  level: [a]\n").unwrap_err().0;
        assert_eq!(
            e,
            "invalid config file /etc/t.yaml line 2: log.level: expected a single value"
        );
        let e = parse_text("mcp:\n  max_concurrent_requests: lots\n")
            .unwrap_err()
            .0;
        assert_eq!(e, "invalid config file /etc/t.yaml line 2: mcp.max_concurrent_requests: expected a whole number");
        let e = parse_text("config_version: 2\n").unwrap_err().0;
        assert!(
            e.contains("line 1: config_version: mcpwire reads config_version 1"),
            "{e}"
        );
        let e = parse_text("log:\n  level: a\n  level: b\n").unwrap_err().0;
        assert!(e.contains("line 3: key \"level\" appears twice"), "{e}");
        let e = parse_text("a: 1\n---\nb: 2\n").unwrap_err().0;
        assert!(e.contains("more than one YAML document"), "{e}");
        let e = parse_text("log: [unterminated\n").unwrap_err().0;
        assert!(e.contains("not valid YAML"), "{e}");
        let e = parse_text("- a\n").unwrap_err().0;
        assert!(e.contains("the file must be a mapping"), "{e}");
        let e = parse_text("mcp:\n  commands:\n    - channel: x\n")
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "invalid config file /etc/t.yaml line 3: mcp.commands[1]: the entry needs command"
        );
        let e = parse_text("mcp:\n  server_urls:\n    - url: env:NOPE\n")
            .unwrap_err()
            .0;
        assert_eq!(e, "invalid config file /etc/t.yaml line 3: mcp.server_urls[1].url: environment variable \"NOPE\" is not set");
    }

    #[test]
    fn references_resolve_and_secrets_stay_references() {
        let layer =
            parse_text("control_plane:\n  api_key: env:KEY\n  base_url: env:KEY\n").unwrap();
        // api_key is resolved later (with the flag's and the variable's own references).
        assert_eq!(
            layer.get("CONTROL_PLANE_API_KEY").unwrap().items,
            ["env:KEY"]
        );
        assert_eq!(layer.get("CONTROL_PLANE_BASE_URL").unwrap().items, ["sk-1"]);
    }

    #[test]
    fn nulls_empty_files_aliases_and_collections() {
        assert!(parse_text("").unwrap().values().next().is_none());
        assert!(parse_text("# only a comment\n")
            .unwrap()
            .values()
            .next()
            .is_none());
        let layer = parse_text("log:\n  level:\nhealth: ~\n").unwrap();
        assert!(layer.get("LOG_LEVEL").is_none());
        let layer = parse_text(
            "harpoon:\n  targets:\n    - label: a\n      url: https://a.example/t\n      description: 'x, \"y\"; z'\n  hosts_include_suffix: [corp.example, b.example]\ncontrol_plane:\n  extra_headers:\n    X-A: one\n  poll_channels: &c [main]\nmcp:\n  commands:\n    - command: server --x\n",
        )
        .unwrap();
        assert_eq!(
            layer.get("HARPOON_TARGETS").unwrap().items,
            [r#"label="a",url="https://a.example/t",desc="x, \"y\"; z""#]
        );
        assert_eq!(
            layer.get("HARPOON_HOSTS_INCLUDE_SUFFIX").unwrap().items,
            ["corp.example", "b.example"]
        );
        assert_eq!(
            layer.get("CONTROL_PLANE_EXTRA_HEADERS").unwrap().items,
            ["X-A: one"]
        );
        assert_eq!(
            layer.get("MCP_COMMAND").unwrap().items,
            ["command=server --x"]
        );
        assert_eq!(
            layer.get("CONTROL_PLANE_POLL_CHANNELS").unwrap().items,
            ["main"]
        );
    }

    #[test]
    fn aliases_expand_within_a_budget_and_a_trailing_empty_document_is_fine() {
        let layer = parse_text(
            "control_plane:\n  poll_channels: &c [main, tools]\nharpoon:\n  hosts_include_suffix: *c\n---\n",
        )
        .unwrap();
        assert_eq!(
            layer.get("HARPOON_HOSTS_INCLUDE_SUFFIX").unwrap().items,
            ["main", "tools"]
        );
        // Nine levels of ten aliases each would stand for 10^9 values: refused early, quickly.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let started = std::time::Instant::now();
        let e = parse_text(&bomb).unwrap_err().0;
        assert!(e.contains("expands to more than 100000 values"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let e = parse_text("log:\n  level: info\n---\nlog:\n  level: debug\n")
            .unwrap_err()
            .0;
        assert!(e.contains("more than one YAML document"), "{e}");
    }

    #[test]
    fn every_schema_key_is_reachable() {
        for (key, var, _) in KEYS {
            assert_eq!(key_for_variable(var), Some(*key));
        }
    }

    #[test]
    fn source_selection_follows_the_go_rules() {
        let none = env_of(&[]);
        let home = env_of(&[("HOME", "/home/u")]);
        let xdg = env_of(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/x")]);
        let flags = |c, p, f, d| SourceFlags {
            config: c,
            profile: p,
            profile_file: f,
            profile_dir: d,
        };
        assert_eq!(
            select_source(&flags(None, None, None, None), &none).unwrap(),
            None
        );
        let s = select_source(&flags(Some("/c.yaml"), None, None, None), &none)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.path.as_str(), s.chosen_by.as_str()),
            ("/c.yaml", "--config")
        );
        let s = select_source(&flags(None, Some("dev"), None, None), &home)
            .unwrap()
            .unwrap();
        assert_eq!(s.path, "/home/u/.config/tunnel-client/dev.yaml");
        let s = select_source(&flags(None, Some("dev"), None, None), &xdg)
            .unwrap()
            .unwrap();
        assert_eq!(s.path, "/x/tunnel-client/dev.yaml");
        let s = select_source(&flags(None, Some("dev"), None, Some("~/p")), &home)
            .unwrap()
            .unwrap();
        assert_eq!(s.path, "/home/u/p/dev.yaml");
        let s = select_source(&flags(None, None, Some("~/a/b.yaml"), None), &home)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.path.as_str(), s.profile.as_deref()),
            ("/home/u/a/b.yaml", Some("b"))
        );
        let e = select_source(&flags(None, None, Some("/a/b.yml"), None), &home)
            .unwrap_err()
            .0;
        assert!(e.contains("ends with .yaml"), "{e}");
        let e = select_source(&flags(Some("/c"), Some("p"), None, None), &home)
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "--config and --profile cannot be used together: give one config file or profile"
        );
        let e = select_source(&flags(None, Some("../x"), None, None), &home)
            .unwrap_err()
            .0;
        assert!(e.starts_with("invalid profile name \"../x\""), "{e}");
        let both = env_of(&[
            ("TUNNEL_CLIENT_CONFIG", "/c"),
            ("TUNNEL_CLIENT_PROFILE", "p"),
        ]);
        let e = select_source(&flags(None, None, None, None), &both)
            .unwrap_err()
            .0;
        assert!(
            e.starts_with("TUNNEL_CLIENT_CONFIG and TUNNEL_CLIENT_PROFILE cannot both be set"),
            "{e}"
        );
        // A flag beats every variable.
        let s = select_source(&flags(Some("/f.yaml"), None, None, None), &both)
            .unwrap()
            .unwrap();
        assert_eq!(s.path, "/f.yaml");
        let p = env_of(&[
            ("TUNNEL_CLIENT_PROFILE", "p"),
            ("TUNNEL_CLIENT_PROFILE_DIR", "/d"),
        ]);
        let s = select_source(&flags(None, None, None, None), &p)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.path.as_str(), s.chosen_by.as_str()),
            ("/d/p.yaml", "TUNNEL_CLIENT_PROFILE=p")
        );
    }

    #[test]
    fn a_missing_profile_says_how_to_create_it() {
        let home = env_of(&[("HOME", "/home/u")]);
        let flags = SourceFlags {
            profile: Some("dev"),
            ..SourceFlags::default()
        };
        let e = load(&flags, &home, &no_file).unwrap_err().0;
        assert!(e.starts_with("cannot read config file /home/u/.config/tunnel-client/dev.yaml (chosen by --profile dev): no such file"), "{e}");
        assert!(e.ends_with("(create it with `mcpwire tunnel init`)"), "{e}");
    }
}
