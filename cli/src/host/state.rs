//! What `mcpwire host` remembers between runs: the approved command lines of local servers
//! (SEP-1024) and the tools approved "always". Both are plain JSON files in the state
//! directory, written whole (to a temporary file, then renamed), mode 0600 on unix. Neither
//! holds a secret: a command line is kept as its SHA-256 and its program's name, a tool as its
//! definition's SHA-256.

use std::path::{Path, PathBuf};

use mcpwire_core::host::consent::{CommandApprovals, ToolApprovals};
use serde::{de::DeserializeOwned, Serialize};

const COMMANDS: &str = "command-approvals.json";
const TOOLS: &str = "tool-approvals.json";

/// The state directory: `--state-dir`, else `$XDG_STATE_HOME/mcpwire/host`, else
/// `~/.local/state/mcpwire/host` (`%LOCALAPPDATA%\mcpwire\host` on Windows).
pub(crate) fn state_dir(given: Option<&Path>) -> PathBuf {
    if let Some(dir) = given {
        return dir.to_path_buf();
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = if cfg!(windows) {
        env("LOCALAPPDATA")
    } else {
        env("XDG_STATE_HOME")
            .filter(|p| p.is_absolute())
            .or_else(|| env("HOME").map(|h| h.join(".local").join("state")))
    };
    base.unwrap_or_else(|| PathBuf::from("."))
        .join("mcpwire")
        .join("host")
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not what mcpwire host writes ({source}); move it away to start afresh")]
    Parse {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn read<T: DeserializeOwned + Default>(path: &Path) -> Result<T, StateError> {
    let shown = || path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| StateError::Parse {
            path: shown(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(StateError::Read {
            path: shown(),
            source,
        }),
    }
}

fn write<T: Serialize>(path: &Path, value: &T) -> Result<(), StateError> {
    let err = |source| StateError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let bytes =
        serde_json::to_vec_pretty(value).map_err(|e| err(std::io::Error::other(e.to_string())))?;
    let tmp = path.with_extension("json.tmp");
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp).map_err(err)?;
        std::io::Write::write_all(&mut file, &bytes).map_err(err)?;
        file.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)
}

/// The remembered approvals.
pub(crate) struct State {
    dir: PathBuf,
    pub commands: CommandApprovals,
    pub tools: ToolApprovals,
}

impl State {
    pub(crate) fn load(dir: PathBuf) -> Result<State, StateError> {
        Ok(State {
            commands: read(&dir.join(COMMANDS))?,
            tools: read(&dir.join(TOOLS))?,
            dir,
        })
    }

    pub(crate) fn save_commands(&self) -> Result<(), StateError> {
        write(&self.dir.join(COMMANDS), &self.commands)
    }

    pub(crate) fn save_tools(&self, tools: &ToolApprovals) -> Result<(), StateError> {
        write(&self.dir.join(TOOLS), tools)
    }
}
