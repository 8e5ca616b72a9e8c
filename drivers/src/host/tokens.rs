//! Each server's grants, apart ([`ServerTokens`]): a token store partition per server id.
//!
//! A [`TokenStore`] keys a grant by its issuer and resource and finds one for a server URL by
//! whether the grant's resource covers that URL. That is right for one server, not for many:
//! two config entries for one URL (two accounts), or a grant for an origin's root and another
//! server on that origin, would share a grant. So the host gives each server a store of its
//! own: [`MemoryTokens`] (a [`MemoryStore`] per server) or [`FileTokens`] (a [`FileStore`]
//! file per server, named by the core's
//! [`store_name`](mcpwire_core::host::registry::store_name), distinct even where file names
//! ignore case).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use mcpwire_core::host::registry::store_name;
use mcpwire_core::host::ServerId;

use crate::mcp::{FileStore, MemoryStore, StoreError, TokenStore};

/// Where a host keeps its servers' grants: one partition per server, so that a grant one
/// server obtained is never loaded for another, whatever their URLs.
pub trait ServerTokens: Send + Sync {
    /// The token store of `server`'s partition.
    fn store_for(&self, server: &ServerId) -> Result<Arc<dyn TokenStore>, StoreError>;
}

/// Grants in memory, a [`MemoryStore`] per server, for one process.
#[derive(Default)]
pub struct MemoryTokens {
    stores: Mutex<BTreeMap<ServerId, Arc<MemoryStore>>>,
}

impl MemoryTokens {
    /// No grants yet.
    pub fn new() -> Self {
        MemoryTokens::default()
    }

    /// `server`'s store (made on first use).
    pub fn store(&self, server: &ServerId) -> Arc<MemoryStore> {
        let mut stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(stores.entry(server.clone()).or_default())
    }
}

impl std::fmt::Debug for MemoryTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_map().entries(stores.iter()).finish()
    }
}

impl ServerTokens for MemoryTokens {
    fn store_for(&self, server: &ServerId) -> Result<Arc<dyn TokenStore>, StoreError> {
        Ok(self.store(server))
    }
}

/// Grants in files, one [`FileStore`] per server in one directory (`DIR/<name>.json`, the
/// name from the server id, each `0600` in a `0700` directory like every file store), shared
/// by every process that uses the directory.
#[derive(Clone, Debug)]
pub struct FileTokens {
    dir: PathBuf,
}

impl FileTokens {
    /// The partitions in `dir` (created when a grant is first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileTokens { dir: dir.into() }
    }

    /// The partitions in the user's data directory: `servers/` beside the client's own token
    /// store (`$XDG_DATA_HOME/mcpwire/servers/`, else `~/.local/share/mcpwire/servers/`;
    /// `%APPDATA%\mcpwire\servers\` on Windows).
    pub fn in_data_dir() -> Result<Self, StoreError> {
        let client_store = FileStore::in_data_dir()?;
        let base = client_store
            .path()
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Ok(FileTokens::new(base.join("servers")))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `server`'s file store.
    pub fn store(&self, server: &ServerId) -> FileStore {
        FileStore::new(self.dir.join(format!("{}.json", store_name(server))))
    }
}

impl ServerTokens for FileTokens {
    fn store_for(&self, server: &ServerId) -> Result<Arc<dyn TokenStore>, StoreError> {
        Ok(Arc::new(self.store(server)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(s: &str) -> ServerId {
        ServerId::new(s).unwrap()
    }

    #[test]
    fn each_server_gets_its_own_memory_store_and_keeps_it() {
        let t = MemoryTokens::new();
        let a1 = t.store(&id("a"));
        let a2 = t.store(&id("a"));
        let b = t.store(&id("b"));
        assert!(Arc::ptr_eq(&a1, &a2));
        assert!(!Arc::ptr_eq(&a1, &b));
    }

    #[test]
    fn file_partitions_differ_even_for_ids_that_differ_only_in_case() {
        let t = FileTokens::new("/tmp/x");
        let a = t.store(&id("GitHub"));
        let b = t.store(&id("github"));
        assert_eq!(b.path(), Path::new("/tmp/x/github.json"));
        assert_ne!(
            a.path().to_string_lossy().to_ascii_lowercase(),
            b.path().to_string_lossy().to_ascii_lowercase()
        );
    }
}
