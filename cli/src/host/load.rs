//! Finding and reading the config files: the file system's half of
//! [`mcpwire_core::host::config`] (which parses and interpolates).

use std::path::{Path, PathBuf};

use mcpwire_core::host::config::{
    self, known_locations, ConfigError, ConfigFile, Dirs, Entry, Location, Os, Permissions, Scope,
    Vars,
};
use mcpwire_core::host::{TransportSpec, Trust};

/// What was read.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The files read, with the application whose file it is when it was found (not given).
    pub read: Vec<(PathBuf, Option<Location>)>,
    /// Other known files that exist but were not read (only when none was given).
    pub also_found: Vec<Location>,
    /// The servers that loaded, in file order (a later file's id that repeats an earlier
    /// one is an error: ids are the host's names).
    pub entries: Vec<Entry>,
    /// Problems: malformed entries, missing variables, unreadable env files.
    pub errors: Vec<String>,
    /// The files' `permissions` rules, all together.
    pub permissions: Permissions,
}

/// A failure that stops the command: no file to read, or a file that could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no MCP config file given and none found; looked for:\n{looked}\npass one with --config FILE (the `mcpServers` layout of Claude Desktop, Claude Code or Cursor, or VS Code's `servers`)"
    )]
    NoneFound { looked: String },
}

fn this_os() -> Os {
    if cfg!(windows) {
        Os::Windows
    } else if cfg!(target_os = "macos") {
        Os::MacOs
    } else {
        Os::Linux
    }
}

fn home_dir() -> String {
    std::env::var("HOME")
        .or_else(|_| std::env::var("USERPROFILE"))
        .unwrap_or_default()
}

/// The known locations on this machine, most specific first.
pub(crate) fn locations(working_dir: &Path) -> Vec<Location> {
    let home = home_dir();
    let working = working_dir.to_string_lossy().into_owned();
    let appdata = std::env::var("APPDATA").ok();
    let xdg = std::env::var("XDG_CONFIG_HOME").ok();
    known_locations(
        this_os(),
        &Dirs {
            home: &home,
            working_dir: &working,
            appdata: appdata.as_deref(),
            xdg_config_home: xdg.as_deref(),
        },
    )
}

/// Reads the given files, or, when none is given, the first known file that holds servers
/// (else the first that exists: a `~/.claude.json` without servers does not hide the others).
///
/// A project's file found on its own (one a cloned repository may have brought) cannot raise
/// its servers' trust nor allow calls: its `trust` and `permissions.allow` are ignored, with a
/// warning (its `ask` and `deny` rules, which only ask more, are kept). A local server without
/// `cwd` runs in the working directory, and its command line is approved with it.
pub(crate) fn load(given: &[PathBuf]) -> Result<Loaded, LoadError> {
    let working_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut loaded = Loaded::default();
    let env = |name: &str| std::env::var(name).ok();
    let home = home_dir();
    let parse = |path: &Path| -> Result<ConfigFile, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let vars = Vars::from_fn(&env)
            .with_workspace_folder(working_dir.to_string_lossy().into_owned())
            .with_user_home(home.clone());
        Ok(config::parse_bytes(
            &path.display().to_string(),
            &bytes,
            &vars,
        ))
    };
    let mut files: Vec<(PathBuf, Option<Location>, ConfigFile)> = Vec::new();
    if given.is_empty() {
        let known = locations(&working_dir);
        let existing: Vec<Location> = known
            .iter()
            .filter(|l| Path::new(&l.path).is_file())
            .cloned()
            .collect();
        if existing.is_empty() {
            let looked = known
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n");
            return Err(LoadError::NoneFound { looked });
        }
        let mut chosen = None;
        for (i, l) in existing.iter().enumerate() {
            let file = parse(Path::new(&l.path))?;
            if !file.effective().is_empty() || !file.errors.is_empty() {
                chosen = Some((i, file));
                break;
            }
        }
        let (i, file) = match chosen {
            Some(c) => c,
            None => (0, parse(Path::new(&existing[0].path))?),
        };
        loaded.also_found = existing
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, l)| l.clone())
            .collect();
        let l = existing[i].clone();
        files.push((PathBuf::from(&l.path), Some(l), file));
    } else {
        for p in given {
            let file = parse(p)?;
            files.push((p.clone(), None, file));
        }
    }
    for (path, location, file) in files {
        let name = path.display().to_string();
        let project = location.as_ref().is_some_and(|l| l.scope == Scope::Project);
        loaded
            .errors
            .extend(file.errors.iter().map(ConfigError::to_string));
        for entry in file.effective() {
            let mut entry = entry.clone();
            if loaded.entries.iter().any(|e| e.spec.id == entry.spec.id) {
                loaded.errors.push(format!(
                    "{name}:{}: server \"{}\": this id is already defined by an earlier file; ids name servers, so the second is left out",
                    entry.position, entry.spec.id
                ));
                continue;
            }
            if project && entry.spec.trust == Trust::Trusted {
                entry.spec.trust = Trust::Untrusted;
                loaded.errors.push(format!(
                    "{name}:{}: server \"{}\": `trust` is ignored in a project's file found on its own (a repository cannot vouch for its own servers); pass the file with --config to use it",
                    entry.position, entry.spec.id
                ));
            }
            if let TransportSpec::Stdio { cwd, .. } = &mut entry.spec.transport {
                if cwd.is_none() {
                    *cwd = Some(working_dir.to_string_lossy().into_owned());
                }
            }
            if let Some(env_file) = entry.env_file.clone() {
                match read_env_file(&path, &env_file) {
                    Ok(pairs) => entry.apply_env_file(pairs),
                    Err(e) => {
                        loaded.errors.push(format!(
                            "{name}:{}: server \"{}\": envFile {env_file}: {e}",
                            entry.position, entry.spec.id
                        ));
                        continue;
                    }
                }
            }
            loaded.entries.push(entry);
        }
        let p = file.permissions;
        if project && !p.allow.is_empty() {
            loaded.errors.push(format!(
                "{name}: its {} `permissions.allow` rule(s) are ignored in a project's file found on its own; pass the file with --config to use them",
                p.allow.len()
            ));
        } else {
            loaded.permissions.allow.extend(p.allow);
        }
        loaded.permissions.ask.extend(p.ask);
        loaded.permissions.deny.extend(p.deny);
        loaded.permissions.billing.extend(p.billing);
        loaded.read.push((path, location));
    }
    Ok(loaded)
}

/// Reads an `envFile` (relative to the config file's folder when relative).
fn read_env_file(config: &Path, env_file: &str) -> Result<Vec<(String, String)>, String> {
    let path = Path::new(env_file);
    let path = if path.is_relative() {
        config.parent().unwrap_or(Path::new(".")).join(path)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read it: {e}"))?;
    config::parse_env_file(&text).map_err(|e| e.to_string())
}
