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

use mcpwire_core::tunnel::config_file::{self as core_file, FileValues};
pub use mcpwire_core::tunnel::config_file::{key_for_variable, FileValue};

use super::config::ConfigError;

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

/// The values of a config file, by the variable each key stands for (the parsing is the
/// core's `tunnel::config_file`).
#[derive(Clone, Debug, Default)]
pub struct FileLayer {
    /// Where it came from.
    pub source: Option<ConfigSource>,
    values: FileValues,
}

impl FileLayer {
    /// The value standing for variable `var`.
    #[must_use]
    pub fn get(&self, var: &str) -> Option<&FileValue> {
        self.values.get(var)
    }

    /// Every value read, by variable.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, &FileValue)> {
        self.values.iter()
    }

    /// How a value of this layer is named in messages: `key (FILE line N)`.
    #[must_use]
    pub fn origin(&self, value: &FileValue) -> String {
        let path = self.source.as_ref().map_or("", |s| s.path.as_str());
        format!("{} ({path} line {})", value.key, value.line)
    }
}

/// Reads `text` (the file at `source`) into a layer; `env` and `read_file` resolve its
/// `env:`/`file:` references.
pub fn parse(
    source: &ConfigSource,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<FileLayer, ConfigError> {
    let values = core_file::parse(&source.path, text, env, read_file)
        .map_err(|e| ConfigError(e.to_string()))?;
    Ok(FileLayer {
        source: Some(source.clone()),
        values,
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
