//! Where grants live between runs ([`TokenStore`]): in memory ([`MemoryStore`]) or in a file
//! ([`FileStore`]), and the lock that makes a refresh single-flight across threads and
//! processes ([`TokenStore::lock`]): two processes that find their access token expired at
//! once do not both spend the one rotating refresh token (the loser would get
//! `invalid_grant`, and some identity providers then revoke the whole token family).
//!
//! The file store keeps, per grant: the resource and issuer, the absolute expiry, the access
//! and refresh tokens, the client registration and the authorization server's metadata, so a
//! restart refreshes instead of logging in again. The file (`tokens.json`, JSON, `0600`, in a
//! `0700` directory) is written whole to a temporary file and renamed over the old one;
//! read-modify-write is serialized by a lock file beside it (`tokens.json.write-lock`); the
//! refresh lock is a third file (`tokens.json.refresh-lock`).

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use mcpwire_core::auth::{discovery, Grant};
use serde::{Deserialize, Serialize};

/// Keeps grants between runs. Keyed by the MCP server's URL: a grant is for the server whose
/// URL its `resource` covers.
pub trait TokenStore: Send + Sync {
    /// The grant kept for `server_url`, if any.
    fn load(&self, server_url: &str) -> Option<Grant>;
    /// Keeps `grant` (replacing the one for the same issuer and resource).
    fn save(&self, grant: &Grant) -> Result<(), StoreError>;
    /// Takes the refresh lock (waiting for another holder, in this process or another);
    /// dropping the returned value releases it.
    fn lock(&self) -> Result<Box<dyn StoreLock>, StoreError>;
}

/// A held refresh lock; dropping it releases the lock.
pub trait StoreLock: Send {}

/// Why a grant could not be kept or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The store's file is not what this version writes.
    #[error("{path}: not a token store this version can read: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// No place for the store: neither `XDG_DATA_HOME` nor `HOME` (nor `APPDATA`) is set.
    #[error("no data directory for the token store (set XDG_DATA_HOME or HOME)")]
    NoDataDir,
}

// ---------------------------------------------------------------------------------------------

/// An in-process lock that can be released from another thread (a `MutexGuard` cannot).
#[derive(Default)]
struct Semaphore {
    held: Mutex<bool>,
    freed: Condvar,
}

struct SemaphoreGuard(Arc<Semaphore>);

impl StoreLock for SemaphoreGuard {}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        *self.0.held.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.0.freed.notify_one();
    }
}

impl Semaphore {
    fn acquire(self: &Arc<Self>) -> SemaphoreGuard {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held {
            held = self
                .freed
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *held = true;
        SemaphoreGuard(Arc::clone(self))
    }
}

/// Grants in memory, for one process (shared by the clients given the same `Arc`).
#[derive(Default)]
pub struct MemoryStore {
    grants: Mutex<Vec<Grant>>,
    refresh: Arc<Semaphore>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.grants.lock().map_or(0, |g| g.len());
        f.debug_struct("MemoryStore").field("grants", &n).finish()
    }
}

impl TokenStore for MemoryStore {
    fn load(&self, server_url: &str) -> Option<Grant> {
        let grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        find(&grants, server_url).cloned()
    }

    fn save(&self, grant: &Grant) -> Result<(), StoreError> {
        let mut grants = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        upsert(&mut grants, grant);
        Ok(())
    }

    fn lock(&self) -> Result<Box<dyn StoreLock>, StoreError> {
        Ok(Box::new(self.refresh.acquire()))
    }
}

/// The newest grant whose resource covers `server_url`.
fn find<'a>(grants: &'a [Grant], server_url: &str) -> Option<&'a Grant> {
    grants
        .iter()
        .rev()
        .find(|g| discovery::resource_matches(&g.resource, server_url))
}

fn upsert(grants: &mut Vec<Grant>, grant: &Grant) {
    grants.retain(|g| !(g.issuer == grant.issuer && g.resource == grant.resource));
    grants.push(grant.clone());
}

// ---------------------------------------------------------------------------------------------

/// The file's format.
#[derive(Serialize, Deserialize)]
struct StoreFile {
    /// 1.
    version: u32,
    grants: Vec<Grant>,
}

const FORMAT_VERSION: u32 = 1;

/// Grants in a file (see the module docs), shared by every process that opens it.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

struct FileLock(File);

impl StoreLock for FileLock {}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.0);
    }
}

impl FileStore {
    /// A store in the file at `path` (created when first written).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileStore { path: path.into() }
    }

    /// The store in the user's data directory: `$XDG_DATA_HOME/mcpwire/tokens.json`, else
    /// `~/.local/share/mcpwire/tokens.json` (`%APPDATA%\mcpwire\tokens.json` on Windows).
    pub fn in_data_dir() -> Result<Self, StoreError> {
        Ok(FileStore::new(default_path()?))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every grant in the store.
    pub fn list(&self) -> Result<Vec<Grant>, StoreError> {
        self.read()
    }

    /// Removes the grants whose resource covers `server_url`; how many there were.
    pub fn remove(&self, server_url: &str) -> Result<usize, StoreError> {
        let _w = self.file_lock("write-lock")?;
        let mut grants = self.read()?;
        let before = grants.len();
        grants.retain(|g| !discovery::resource_matches(&g.resource, server_url));
        let removed = before - grants.len();
        if removed > 0 {
            self.write(&grants)?;
        }
        Ok(removed)
    }

    fn io(&self, path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
        let path = path.to_owned();
        move |source| StoreError::Io {
            path: path.clone(),
            source,
        }
    }

    fn read(&self) -> Result<Vec<Grant>, StoreError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(&self.path)(e)),
        };
        let file: StoreFile = serde_json::from_str(&text).map_err(|e| StoreError::Format {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        if file.version != FORMAT_VERSION {
            return Err(StoreError::Format {
                path: self.path.clone(),
                detail: format!("version {} (this one reads {FORMAT_VERSION})", file.version),
            });
        }
        Ok(file.grants)
    }

    /// Writes the whole file: a temporary file (`0600`) renamed over the old one.
    fn write(&self, grants: &[Grant]) -> Result<(), StoreError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(self.io(dir))?;
        let tmp = self
            .path
            .with_extension(format!("tmp.{}", std::process::id()));
        let text = serde_json::to_vec_pretty(&StoreFile {
            version: FORMAT_VERSION,
            grants: grants.to_vec(),
        })
        .map_err(|e| StoreError::Format {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        let mut f = private_file(&tmp).map_err(self.io(&tmp))?;
        f.write_all(&text).map_err(self.io(&tmp))?;
        f.sync_all().map_err(self.io(&tmp))?;
        fs::rename(&tmp, &self.path).map_err(self.io(&self.path))
    }

    /// Locks the file beside the store with this suffix (created `0600`).
    fn file_lock(&self, suffix: &str) -> Result<FileLock, StoreError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(self.io(dir))?;
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{suffix}"));
        let path = PathBuf::from(name);
        let f = private_file_keep(&path).map_err(self.io(&path))?;
        fs4::FileExt::lock(&f).map_err(self.io(&path))?;
        Ok(FileLock(f))
    }
}

impl TokenStore for FileStore {
    fn load(&self, server_url: &str) -> Option<Grant> {
        let grants = self.read().ok()?;
        find(&grants, server_url).cloned()
    }

    fn save(&self, grant: &Grant) -> Result<(), StoreError> {
        let _w = self.file_lock("write-lock")?;
        let mut grants = self.read()?;
        upsert(&mut grants, grant);
        self.write(&grants)
    }

    fn lock(&self) -> Result<Box<dyn StoreLock>, StoreError> {
        Ok(Box::new(self.file_lock("refresh-lock")?))
    }
}

fn default_path() -> Result<PathBuf, StoreError> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = if cfg!(windows) {
        var("APPDATA")
    } else {
        var("XDG_DATA_HOME").or_else(|| var("HOME").map(|h| h.join(".local").join("share")))
    };
    Ok(base
        .ok_or(StoreError::NoDataDir)?
        .join("mcpwire")
        .join("tokens.json"))
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    fs::create_dir_all(dir)
}

/// A new file, truncated, readable by the user only.
fn private_file(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.mode(0o600);
    }
    o.open(path)
}

/// A file kept as it is (a lock file), created readable by the user only.
fn private_file_keep(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.mode(0o600);
    }
    o.open(path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mcpwire_core::auth::metadata::AuthorizationServerMetadata;
    use mcpwire_core::auth::{ClientRegistration, RegistrationKind, TokenEndpointAuth, Tokens};

    fn grant(resource: &str, token: &str) -> Grant {
        Grant {
            resource: resource.into(),
            issuer: "https://as".into(),
            server_metadata: AuthorizationServerMetadata::parse(br#"{"issuer":"https://as"}"#)
                .unwrap(),
            client: ClientRegistration {
                client_id: "c".into(),
                client_secret: None,
                auth_method: TokenEndpointAuth::None,
                kind: RegistrationKind::Dynamic,
            },
            tokens: Tokens {
                access_token: token.into(),
                refresh_token: Some("RT".into()),
                expires_at: Some(1_900_000_000),
                scope: None,
            },
            requested_scope: None,
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "mcpwire-store-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn the_memory_store_keys_by_issuer_and_resource() {
        let store = MemoryStore::default();
        store.save(&grant("https://mcp.example/mcp", "A")).unwrap();
        store.save(&grant("https://other.example", "B")).unwrap();
        store.save(&grant("https://mcp.example/mcp", "C")).unwrap();
        let g = store.load("https://mcp.example/mcp").unwrap();
        assert_eq!(g.tokens.access_token.expose(), "C");
        assert!(store.load("https://third.example/mcp").is_none());
    }

    #[test]
    fn the_file_store_persists_everything_a_restart_needs_with_private_permissions() {
        let dir = temp_dir("persist");
        let path = dir.join("sub").join("tokens.json");
        let store = FileStore::new(&path);
        assert!(store.load("https://mcp.example/mcp").is_none());
        store.save(&grant("https://mcp.example/mcp", "A")).unwrap();
        store.save(&grant("https://other.example", "B")).unwrap();
        let again = FileStore::new(&path);
        let g = again.load("https://mcp.example/mcp").unwrap();
        assert_eq!(g.tokens.access_token.expose(), "A");
        assert_eq!(g.tokens.expires_at, Some(1_900_000_000));
        assert_eq!(g.tokens.refresh_token.as_ref().unwrap().expose(), "RT");
        assert_eq!(g.server_metadata.issuer, "https://as");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            let dmode = fs::metadata(path.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(dmode, 0o700);
        }
        assert_eq!(again.list().unwrap().len(), 2);
        assert_eq!(again.remove("https://mcp.example/mcp").unwrap(), 1);
        assert!(again.load("https://mcp.example/mcp").is_none());
        assert!(again.load("https://other.example").is_some());
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn a_damaged_store_file_is_a_clear_error() {
        let dir = temp_dir("damaged");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.json");
        fs::write(&path, "{not json").unwrap();
        let e = FileStore::new(&path)
            .save(&grant("https://x", "A"))
            .unwrap_err();
        assert!(matches!(e, StoreError::Format { .. }), "{e}");
        assert!(e.to_string().contains("tokens.json"), "{e}");
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn the_refresh_lock_is_exclusive_across_handles_and_threads() {
        let dir = temp_dir("lock");
        let path = dir.join("tokens.json");
        let a = FileStore::new(&path);
        let b = FileStore::new(&path);
        let held = a.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let _g = b.lock().unwrap();
            tx.send(()).unwrap();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "not while held"
        );
        drop(held);
        rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        t.join().unwrap();
        // The memory store's lock too, released from another thread.
        let m = Arc::new(MemoryStore::default());
        let g = m.lock().unwrap();
        let m2 = Arc::clone(&m);
        let t = std::thread::spawn(move || drop(m2.lock().unwrap()));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished());
        std::thread::spawn(move || drop(g)).join().unwrap();
        t.join().unwrap();
        let _ = fs::remove_dir_all(dir);
    }
}
