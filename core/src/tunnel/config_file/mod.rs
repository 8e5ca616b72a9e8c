//! The Go tunnel-client's YAML config file (`config_version: 1`, the keys of its
//! `pkg/runtimeconfig/file_config.go`), read into values keyed by the environment variable each
//! key stands for, so that a driver resolves flags, the environment and the file from one
//! table (flags beat the environment, which beats the file, which beats the defaults).
//!
//! Unknown keys, wrong types, a second document, a duplicate key, a reference that does not
//! resolve, or more values than [`MAX_FILE_BYTES`] and the alias budget allow are a
//! [`ConfigFileError`] naming the file, the line and the key; a value is never repeated in a
//! message, since it may be a secret. Choosing the file (`--config`, profiles) and reading it
//! are the driver's: this module takes its text, and reads `env:`/`file:` references through
//! the functions it is given.

mod schema;
mod yaml;

use std::collections::BTreeMap;

pub use schema::key_for_variable;
use schema::{Kind, KEYS};
use yaml::{parse_yaml, Node, Value};

use crate::tunnel::harpoon::targets::quote;

/// The largest config file read (a profile is a few hundred bytes).
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// A config file that cannot be used: which file, where, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFileError {
    /// The file, as it was named.
    pub path: String,
    /// The line (1-based), when the problem has one.
    pub line: Option<usize>,
    /// The key, e.g. `mcp.server_urls[1].url` (empty for the file as a whole).
    pub key: String,
    /// What is wrong, never quoting a value.
    pub message: String,
}

impl std::fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid config file {}", self.path)?;
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigFileError {}

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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileValues {
    values: BTreeMap<&'static str, FileValue>,
}

impl FileValues {
    /// The value standing for variable `var`.
    #[must_use]
    pub fn get(&self, var: &str) -> Option<&FileValue> {
        self.values.get(var)
    }

    /// Every value read, by variable.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &FileValue)> {
        self.values.iter().map(|(k, v)| (*k, v))
    }

    /// Whether the file set nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

struct Loader<'a> {
    path: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
    read_file: &'a dyn Fn(&str) -> std::io::Result<String>,
    values: BTreeMap<&'static str, FileValue>,
}

impl Loader<'_> {
    fn err(&self, line: usize, key: &str, message: &str) -> ConfigFileError {
        ConfigFileError {
            path: self.path.to_owned(),
            line: Some(line),
            key: key.to_owned(),
            message: message.to_owned(),
        }
    }

    fn scalar<'n>(&self, key: &str, node: &'n Node) -> Result<&'n str, ConfigFileError> {
        match &node.value {
            Value::Scalar(s) => Ok(s),
            _ => Err(self.err(node.line, key, "expected a single value")),
        }
    }

    /// Resolves an `env:VAR` or `file:PATH` reference (the value itself otherwise).
    fn reference(&self, key: &str, line: usize, raw: &str) -> Result<String, ConfigFileError> {
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

    fn section(&mut self, prefix: &str, node: &Node) -> Result<(), ConfigFileError> {
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
    ) -> Result<Vec<(&'n str, usize, &'n Node)>, ConfigFileError> {
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
    ) -> Result<(), ConfigFileError> {
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

    fn entry(&self, kind: Kind, key: &str, item: &Node) -> Result<String, ConfigFileError> {
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

/// Reads `text`, the file at `path` (named in messages), into its values; `env` and
/// `read_file` resolve its `env:`/`file:` references.
///
/// # Errors
/// A file that is too large, not YAML, not one mapping, or that holds an unknown key, a
/// value of the wrong type, a duplicate key or a reference that does not resolve: the error
/// names the file, the line and the key.
pub fn parse(
    path: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<FileValues, ConfigFileError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(ConfigFileError {
            path: path.to_owned(),
            line: None,
            key: String::new(),
            message: format!("it is larger than {MAX_FILE_BYTES} bytes"),
        });
    }
    let mut loader = Loader {
        path,
        env,
        read_file,
        values: BTreeMap::new(),
    };
    let root = parse_yaml(text).map_err(|e| loader.err(e.line, "", &e.message))?;
    if let Some(root) = root {
        loader.section("", &root)?;
    }
    Ok(FileValues {
        values: loader.values,
    })
}

#[cfg(test)]
mod tests;
