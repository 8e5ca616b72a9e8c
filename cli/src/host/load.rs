//! Finding and reading the config files: the file system's half of
//! [`mcpwire_core::host::config`] (which parses and interpolates).

use std::path::{Path, PathBuf};

use mcpwire_core::host::config::{
    self, known_locations, ConfigError, Dirs, Entry, Location, Os, Permissions, Vars,
};

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

/// Reads the given files, or the first known file that exists when none is given.
pub(crate) fn load(given: &[PathBuf]) -> Result<Loaded, LoadError> {
    let working_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut loaded = Loaded::default();
    let files: Vec<(PathBuf, Option<Location>)> = if given.is_empty() {
        let known = locations(&working_dir);
        let mut existing = known
            .iter()
            .filter(|l| Path::new(&l.path).is_file())
            .cloned();
        let Some(first) = existing.next() else {
            let looked = known
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n");
            return Err(LoadError::NoneFound { looked });
        };
        loaded.also_found = existing.collect();
        vec![(PathBuf::from(&first.path), Some(first))]
    } else {
        given.iter().map(|p| (p.clone(), None)).collect()
    };
    let env = |name: &str| std::env::var(name).ok();
    let home = home_dir();
    for (path, location) in files {
        let bytes = std::fs::read(&path).map_err(|source| LoadError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let name = path.display().to_string();
        let vars = Vars::from_fn(&env)
            .with_workspace_folder(working_dir.to_string_lossy().into_owned())
            .with_user_home(home.clone());
        let file = config::parse_bytes(&name, &bytes, &vars);
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
        loaded.permissions.allow.extend(p.allow);
        loaded.permissions.ask.extend(p.ask);
        loaded.permissions.deny.extend(p.deny);
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
