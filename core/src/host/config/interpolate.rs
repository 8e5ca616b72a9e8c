//! `${...}` interpolation in config values, the forms the hosts use:
//!
//! | form | value | from |
//! | --- | --- | --- |
//! | `${VAR}` | the environment variable `VAR` | Claude Code (`.mcp.json`) |
//! | `${VAR:-default}` | `VAR`, or `default` when it is unset or empty (as in POSIX shells) | Claude Code |
//! | `${env:VAR}` | the environment variable `VAR` | VS Code, Cursor |
//! | `${workspaceFolder}`, `${userHome}` | what the host says they are | VS Code, Cursor |
//! | `${input:id}` | the answer to the file's input `id`, if the host has one | VS Code |
//!
//! `VAR` is `[A-Za-z_][A-Za-z0-9_]*`. A `$` not followed by `{` is kept as it is (`$VAR` is not
//! expanded, as in Claude Code). A default is taken literally up to the first `}`; a `${`
//! inside one (`${A:-${B}}`) is refused rather than half-expanded.
//!
//! Where the hosts differ, this is stricter: an unset variable with no default is an error
//! naming it (Claude Code passes the text `${VAR}` on, VS Code substitutes an empty string),
//! since a server started with a literal `${GITHUB_TOKEN}` as its token fails later and more
//! obscurely. `${env:VAR:-default}` is accepted too.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use super::error::cut;

/// What interpolation reads: the environment (passed in, never read by core), the workspace
/// folder and home directory, and answers to a VS Code file's `inputs`.
///
/// The workspace folder is also the project whose `projects.<path>.mcpServers` a Claude Code
/// `~/.claude.json` holds (its "local" scope).
///
/// `Debug` shows which variables were given answers and the folders, never a value.
pub struct Vars<'a> {
    env: Env<'a>,
    workspace_folder: Option<String>,
    user_home: Option<String>,
    inputs: BTreeMap<String, String>,
}

enum Env<'a> {
    Map(BTreeMap<String, String>),
    Lookup(&'a dyn Fn(&str) -> Option<String>),
}

impl<'a> Vars<'a> {
    /// No environment at all: every `${VAR}` without a default is an error.
    pub fn none() -> Vars<'static> {
        Vars::from_map(BTreeMap::new())
    }

    /// The environment as a map (e.g. collected from `std::env::vars()` by a driver).
    pub fn from_map(env: BTreeMap<String, String>) -> Vars<'static> {
        Vars {
            env: Env::Map(env),
            workspace_folder: None,
            user_home: None,
            inputs: BTreeMap::new(),
        }
    }

    /// The environment through a function (e.g. `&|name| std::env::var(name).ok()` in a
    /// driver; on Windows, where names are case-insensitive, the function decides).
    pub fn from_fn(lookup: &'a dyn Fn(&str) -> Option<String>) -> Vars<'a> {
        Vars {
            env: Env::Lookup(lookup),
            workspace_folder: None,
            user_home: None,
            inputs: BTreeMap::new(),
        }
    }

    /// `${workspaceFolder}`: the project's folder, also the key of a Claude Code
    /// `~/.claude.json`'s `projects` entry.
    pub fn with_workspace_folder(mut self, folder: impl Into<String>) -> Self {
        self.workspace_folder = Some(folder.into());
        self
    }

    /// `${userHome}`: the user's home directory.
    pub fn with_user_home(mut self, home: impl Into<String>) -> Self {
        self.user_home = Some(home.into());
        self
    }

    /// The answer to the VS Code input `id` (`${input:id}`), once the host has asked for it.
    pub fn with_input(mut self, id: impl Into<String>, value: impl Into<String>) -> Self {
        self.inputs.insert(id.into(), value.into());
        self
    }

    /// The workspace folder, if given.
    pub fn workspace_folder(&self) -> Option<&str> {
        self.workspace_folder.as_deref()
    }

    fn env(&self, name: &str) -> Option<String> {
        match &self.env {
            Env::Map(map) => map.get(name).cloned(),
            Env::Lookup(f) => f(name),
        }
    }
}

impl fmt::Debug for Vars<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env = match &self.env {
            Env::Map(map) => format!("{} variables", map.len()),
            Env::Lookup(_) => "a lookup function".to_owned(),
        };
        f.debug_struct("Vars")
            .field("env", &env)
            .field("workspace_folder", &self.workspace_folder)
            .field("user_home", &self.user_home)
            .field("inputs", &self.inputs.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a value could not be interpolated. Names variables, never values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpolationError {
    /// `${VAR}` or `${env:VAR}` unset, with no default. `name` is as written in the braces.
    #[error("${{{name}}} is not set")]
    Missing {
        /// `VAR` or `env:VAR`.
        name: String,
    },
    /// `${workspaceFolder}` or `${userHome}` that the host did not provide.
    #[error("${{{name}}} was not provided")]
    NotProvided {
        /// `workspaceFolder` or `userHome`.
        name: &'static str,
    },
    /// `${input:id}` with no answer.
    #[error("${{input:{id}}} has no answer")]
    NeedsInput {
        /// The input's id.
        id: String,
    },
    /// None of the supported forms (cut to 40 characters).
    #[error("${{{reference}}} is not a supported form")]
    Unsupported {
        /// What is inside the braces.
        reference: String,
    },
    /// `${` without `}`.
    #[error("`${{` is not closed")]
    Unterminated,
}

/// `text` with every `${...}` replaced. Borrows when there is nothing to replace (any text
/// without `$` comes back as it is).
pub fn interpolate<'t>(text: &'t str, vars: &Vars<'_>) -> Result<Cow<'t, str>, InterpolationError> {
    if !text.contains("${") {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let inner_and_after = &rest[start + 2..];
        let Some(end) = inner_and_after.find('}') else {
            return Err(InterpolationError::Unterminated);
        };
        let inner = &inner_and_after[..end];
        out.push_str(&resolve(inner, vars)?);
        rest = &inner_and_after[end + 1..];
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

/// The value of one `${inner}`.
fn resolve(inner: &str, vars: &Vars<'_>) -> Result<String, InterpolationError> {
    let unsupported = || InterpolationError::Unsupported {
        reference: cut(inner, 40),
    };
    if inner.contains("${") {
        return Err(unsupported());
    }
    match inner {
        "workspaceFolder" => {
            return vars
                .workspace_folder
                .clone()
                .ok_or(InterpolationError::NotProvided {
                    name: "workspaceFolder",
                })
        }
        "userHome" => {
            return vars
                .user_home
                .clone()
                .ok_or(InterpolationError::NotProvided { name: "userHome" })
        }
        _ => {}
    }
    if let Some(id) = inner.strip_prefix("input:") {
        if id.is_empty() {
            return Err(unsupported());
        }
        return vars
            .inputs
            .get(id)
            .cloned()
            .ok_or_else(|| InterpolationError::NeedsInput { id: id.to_owned() });
    }
    let (prefixed, body) = match inner.strip_prefix("env:") {
        Some(body) => (true, body),
        None => (false, inner),
    };
    let (name, default) = match body.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (body, None),
    };
    if !is_var_name(name) {
        return Err(unsupported());
    }
    match (vars.env(name), default) {
        (Some(value), None) => Ok(value),
        (Some(value), Some(_)) if !value.is_empty() => Ok(value),
        (_, Some(default)) => Ok(default.to_owned()),
        (None, None) => Err(InterpolationError::Missing {
            name: if prefixed {
                format!("env:{name}")
            } else {
                name.to_owned()
            },
        }),
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`: the names POSIX shells expand.
fn is_var_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vars() -> Vars<'static> {
        let mut env = BTreeMap::new();
        env.insert("TOKEN".to_owned(), "t0k".to_owned());
        env.insert("EMPTY".to_owned(), String::new());
        Vars::from_map(env)
            .with_workspace_folder("/work/p")
            .with_user_home("/home/u")
            .with_input("api-key", "k3y")
    }

    fn run(text: &str) -> Result<String, InterpolationError> {
        interpolate(text, &vars()).map(Cow::into_owned)
    }

    #[test]
    fn every_supported_form_expands() {
        assert_eq!(run("Bearer ${TOKEN}").unwrap(), "Bearer t0k");
        assert_eq!(run("${env:TOKEN}").unwrap(), "t0k");
        assert_eq!(run("${UNSET:-fallback}").unwrap(), "fallback");
        assert_eq!(run("${EMPTY:-fallback}").unwrap(), "fallback");
        assert_eq!(run("${TOKEN:-fallback}").unwrap(), "t0k");
        assert_eq!(run("${UNSET:-}").unwrap(), "");
        assert_eq!(run("${env:UNSET:-d}").unwrap(), "d");
        assert_eq!(run("${workspaceFolder}/.env").unwrap(), "/work/p/.env");
        assert_eq!(run("${userHome}/x").unwrap(), "/home/u/x");
        assert_eq!(run("${input:api-key}").unwrap(), "k3y");
        assert_eq!(run("a${TOKEN}b${TOKEN}c").unwrap(), "at0kbt0kc");
        // An empty variable without a default is set: it expands to nothing.
        assert_eq!(run("[${EMPTY}]").unwrap(), "[]");
    }

    #[test]
    fn dollar_without_brace_is_literal() {
        assert_eq!(run("$TOKEN and $ and $$").unwrap(), "$TOKEN and $ and $$");
        assert_eq!(run("$${TOKEN}").unwrap(), "$t0k");
        assert!(matches!(
            interpolate("no vars", &vars()),
            Ok(Cow::Borrowed(_))
        ));
    }

    #[test]
    fn problems_name_the_variable() {
        assert_eq!(
            run("${NOPE}"),
            Err(InterpolationError::Missing {
                name: "NOPE".into()
            })
        );
        assert_eq!(
            run("${env:NOPE}"),
            Err(InterpolationError::Missing {
                name: "env:NOPE".into()
            })
        );
        assert_eq!(
            run("${input:other}"),
            Err(InterpolationError::NeedsInput { id: "other".into() })
        );
        assert_eq!(run("${TOKEN"), Err(InterpolationError::Unterminated));
        for bad in ["${}", "${config:x}", "${9X}", "${A B}", "${input:}"] {
            assert!(
                matches!(run(bad), Err(InterpolationError::Unsupported { .. })),
                "{bad}"
            );
        }
        // Nested: refused, not half-expanded.
        assert!(matches!(
            run("${A:-${TOKEN}}"),
            Err(InterpolationError::Unsupported { .. })
        ));
        let bare = Vars::none();
        assert_eq!(
            interpolate("${workspaceFolder}", &bare),
            Err(InterpolationError::NotProvided {
                name: "workspaceFolder"
            })
        );
        assert_eq!(
            interpolate("${userHome}", &bare),
            Err(InterpolationError::NotProvided { name: "userHome" })
        );
    }

    #[test]
    fn values_are_not_expanded_again() {
        let mut env = BTreeMap::new();
        env.insert("A".to_owned(), "${B}".to_owned());
        env.insert("B".to_owned(), "secret".to_owned());
        let vars = Vars::from_map(env);
        assert_eq!(interpolate("${A}", &vars).unwrap(), "${B}");
    }

    #[test]
    fn lookup_function_is_used() {
        let lookup = |name: &str| (name == "HOME").then(|| "/h".to_owned());
        let vars = Vars::from_fn(&lookup);
        assert_eq!(interpolate("${HOME}", &vars).unwrap(), "/h");
        assert!(interpolate("${OTHER}", &vars).is_err());
    }

    #[test]
    fn debug_shows_no_values() {
        let shown = format!("{:?}", vars());
        assert!(
            shown.contains("api-key") && shown.contains("/work/p"),
            "{shown}"
        );
        assert!(!shown.contains("t0k") && !shown.contains("k3y"), "{shown}");
    }
}
