//! The tool catalog: every server's tools under collision-free exposed names, how many tokens
//! their definitions take, whether the model gets them all or searches for them, and the
//! search (the client guide's "How to present tools to the model").
//!
//! A driver keeps one [`Catalog`] per host. After each `tools/list` (which the client caches
//! with its TTL and refetches on `notifications/tools/list_changed`) it hands the server's
//! tools to [`Catalog::set_server_tools`]; the catalog memoizes them (an unchanged list costs
//! a comparison), renames what must be renamed ([`naming`]), and rebuilds that server's part of
//! the search index only ([`search::bm25`]). When a server goes,
//! [`Catalog::remove_server`].
//!
//! For the model:
//! - [`Catalog::model_tools`] decides, from the token estimate ([`tokens`]) and a
//!   [`PresentationConfig`], between all tools and progressive discovery ([`present`]), and
//!   gives the tools array in each provider's shape;
//! - [`MetaCall::parse`] reads a call of `search_tools` or `call_tool`;
//!   [`Catalog::search`] answers the first and [`Catalog::route`] the second (and a direct
//!   call of an exposed name);
//! - [`Catalog::anthropic_tool_search`] and [`Catalog::openai_tool_search`] give the whole
//!   catalog deferred, for the providers' own tool search.
//!
//! Order is fixed everywhere: servers by id, each server's tools by name (as the server sent
//! it, compared as strings); identical catalogs give identical output, byte for byte, whatever
//! order they were built in.

pub mod naming;
pub mod present;
pub mod search;
pub mod tokens;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

pub use naming::is_valid_name;
pub use present::{
    AnthropicToolSearch, DiscoveryThreshold, MetaCall, MetaCallError, ModelTools, Presentation,
    PresentationConfig, PresentationDecision, ThresholdError, ToolDefinition, CALL_TOOL,
    SEARCH_TOOLS,
};
pub use search::{Query, QueryKind, SearchError, SearchHit, SearchResults};
pub use tokens::TokenEstimate;

use naming::{Names, ToolKey};
use search::bm25::{CorpusStats, ServerIndex};
use search::query;

use super::ServerId;
use crate::mcp::results::Tool;

/// Every server's tools, their exposed names, and the search index over them.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    servers: BTreeMap<ServerId, ServerTools>,
    names: Names,
    stats: CorpusStats,
    /// Pinned tools: server → tool names as the servers send them.
    pins: BTreeMap<ServerId, BTreeSet<String>>,
}

/// One server's part.
#[derive(Clone, Debug, Default)]
struct ServerTools {
    /// Sorted by name, names unique.
    tools: Vec<Tool>,
    /// Each tool's exposed name.
    exposed: Vec<String>,
    /// Each tool's definition length with an empty name (the exposed name adds its length:
    /// it needs no escaping).
    base_bytes: Vec<u64>,
    index: ServerIndex,
}

impl ServerTools {
    fn position(&self, tool: &str) -> Option<usize> {
        self.tools
            .binary_search_by(|t| t.name.as_str().cmp(tool))
            .ok()
    }
}

/// One tool of the catalog.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry<'a> {
    /// The name the model calls it by.
    pub exposed: &'a str,
    /// Its server.
    pub server: &'a ServerId,
    /// The tool as the server listed it.
    pub tool: &'a Tool,
    /// Its definition's token estimate ([`tokens`]).
    pub tokens: u64,
    /// Always given to the model, even under progressive discovery.
    pub pinned: bool,
}

impl<'a> Entry<'a> {
    /// Its definition as the model takes it.
    pub fn definition(&self) -> ToolDefinition<'a> {
        ToolDefinition {
            name: self.exposed,
            description: self.tool.description.as_deref(),
            input_schema: &self.tool.input_schema,
        }
    }
}

/// A tool whose exposed name changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameChange {
    /// Its server.
    pub server: ServerId,
    /// Its name as the server sent it.
    pub tool: String,
    /// Its exposed name before (`None`: it is new).
    pub old: Option<String>,
    /// Its exposed name now (`None`: it is gone).
    pub new: Option<String>,
}

/// What [`Catalog::set_server_tools`] or [`Catalog::remove_server`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatalogUpdate {
    /// Every tool that appeared, went or was renamed, in (server, tool) order: the server's
    /// own, and any other server's whose name a collision changed ([`naming`]).
    pub names: Vec<NameChange>,
    /// Names the server listed more than once; the first of each was kept. In name order.
    pub duplicates: Vec<String>,
}

impl CatalogUpdate {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.duplicates.is_empty()
    }
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// Replaces server `server`'s tools with `tools` (one `tools/list`, all pages). Tools
    /// are kept sorted by name; a name listed twice keeps its first tool. A list equal to the
    /// one the catalog has changes nothing. Only this server's part of the index is rebuilt.
    pub fn set_server_tools(&mut self, server: ServerId, mut tools: Vec<Tool>) -> CatalogUpdate {
        // Stable: of equal names, the first listed comes first and is the one kept.
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let mut duplicates = Vec::new();
        tools.dedup_by(|later, kept| {
            let same = later.name == kept.name;
            if same && duplicates.last() != Some(&later.name) {
                duplicates.push(later.name.clone());
            }
            same
        });
        if self.servers.get(&server).is_some_and(|s| s.tools == tools) {
            return CatalogUpdate {
                names: Vec::new(),
                duplicates,
            };
        }
        let old_names: Vec<String> = match self.servers.get(&server) {
            Some(old) => {
                self.stats.remove(&old.index);
                old.tools.iter().map(|t| t.name.clone()).collect()
            }
            None => Vec::new(),
        };
        let new_names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let index = ServerIndex::build(server.as_str(), &tools);
        self.stats.add(&index);
        let changes = self.names.replace(&server, &old_names, &new_names);
        let exposed: Vec<String> = tools
            .iter()
            .map(|t| {
                let key = ToolKey {
                    server: server.clone(),
                    tool: t.name.clone(),
                };
                self.names.exposed(&key).unwrap_or_default().to_owned()
            })
            .collect();
        let base_bytes = tools
            .iter()
            .map(|t| {
                ToolDefinition {
                    name: "",
                    description: t.description.as_deref(),
                    input_schema: &t.input_schema,
                }
                .byte_len()
            })
            .collect();
        let entry = ServerTools {
            tools,
            exposed,
            base_bytes,
            index,
        };
        self.servers.insert(server.clone(), entry);
        let names = self.apply(changes, &server);
        CatalogUpdate { names, duplicates }
    }

    /// Removes server `server` and its tools (its pins stay, for when it comes back).
    pub fn remove_server(&mut self, server: &ServerId) -> CatalogUpdate {
        let Some(old) = self.servers.remove(server) else {
            return CatalogUpdate::default();
        };
        self.stats.remove(&old.index);
        let old_names: Vec<String> = old.tools.iter().map(|t| t.name.clone()).collect();
        let changes = self.names.replace(server, &old_names, &[]);
        CatalogUpdate {
            names: self.apply(changes, server),
            duplicates: Vec::new(),
        }
    }

    /// Writes other servers' renamed tools into their entries (server `done`'s are already
    /// right), and makes the public form of the changes.
    fn apply(&mut self, changes: Vec<naming::Renamed>, done: &ServerId) -> Vec<NameChange> {
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            if &c.key.server != done {
                if let (Some(s), Some(new)) = (self.servers.get_mut(&c.key.server), &c.new) {
                    if let Some(i) = s.position(&c.key.tool) {
                        s.exposed[i].clone_from(new);
                    }
                }
            }
            out.push(NameChange {
                server: c.key.server,
                tool: c.key.tool,
                old: c.old,
                new: c.new,
            });
        }
        out
    }

    /// The server and tool an exposed name stands for.
    pub fn route(&self, exposed: &str) -> Option<(&ServerId, &Tool)> {
        let key = self.names.route(exposed)?;
        let (server, tools) = self.servers.get_key_value(&key.server)?;
        let i = tools.position(&key.tool)?;
        Some((server, &tools.tools[i]))
    }

    /// The exposed name of server `server`'s tool `tool`.
    pub fn exposed_name(&self, server: &ServerId, tool: &str) -> Option<&str> {
        let s = self.servers.get(server)?;
        let i = s.position(tool)?;
        Some(&s.exposed[i])
    }

    /// The servers, by id.
    pub fn servers(&self) -> impl Iterator<Item = &ServerId> {
        self.servers.keys()
    }

    /// How many tools, all servers together.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there is no tool.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every tool: servers by id, each server's tools by name.
    pub fn entries(&self) -> impl Iterator<Item = Entry<'_>> {
        self.servers
            .iter()
            .flat_map(move |(id, s)| (0..s.tools.len()).map(move |i| self.entry(id, s, i)))
    }

    /// Server `server`'s tools, by name (none for a server the catalog does not have).
    pub fn server_entries<'a>(&'a self, server: &ServerId) -> impl Iterator<Item = Entry<'a>> {
        self.servers
            .get_key_value(server)
            .into_iter()
            .flat_map(move |(id, s)| (0..s.tools.len()).map(move |i| self.entry(id, s, i)))
    }

    fn entry<'a>(&'a self, id: &'a ServerId, s: &'a ServerTools, i: usize) -> Entry<'a> {
        let tool = &s.tools[i];
        let exposed = s.exposed[i].as_str();
        Entry {
            exposed,
            server: id,
            tool,
            tokens: tokens::tokens_for_bytes(s.base_bytes[i] + exposed.len() as u64),
            pinned: self.is_pinned(id, &tool.name),
        }
    }

    /// Pins server `server`'s tool `tool` (its name as the server sends it): under
    /// progressive discovery it is still given to the model. A pin may name a tool the
    /// server does not (yet) list; it applies when the tool appears. Returns whether it was
    /// not pinned before.
    pub fn pin(&mut self, server: &ServerId, tool: &str) -> bool {
        self.pins
            .entry(server.clone())
            .or_default()
            .insert(tool.to_owned())
    }

    /// Unpins it; returns whether it was pinned.
    pub fn unpin(&mut self, server: &ServerId, tool: &str) -> bool {
        let Some(tools) = self.pins.get_mut(server) else {
            return false;
        };
        let was = tools.remove(tool);
        if tools.is_empty() {
            self.pins.remove(server);
        }
        was
    }

    /// Whether server `server`'s tool `tool` is pinned.
    pub fn is_pinned(&self, server: &ServerId, tool: &str) -> bool {
        self.pins.get(server).is_some_and(|t| t.contains(tool))
    }

    /// The token estimate of every tool's definition ([`tokens`]).
    pub fn token_estimate(&self) -> TokenEstimate {
        let mut estimate = TokenEstimate::default();
        for s in self.servers.values() {
            for (bytes, name) in s.base_bytes.iter().zip(&s.exposed) {
                let bytes = bytes + name.len() as u64;
                estimate.tools += 1;
                estimate.bytes += bytes;
                estimate.tokens += tokens::tokens_for_bytes(bytes);
            }
        }
        estimate
    }

    /// All tools, or progressive discovery, for `config`.
    pub fn presentation(&self, config: &PresentationConfig) -> PresentationDecision {
        PresentationDecision::decide(self.token_estimate().tokens, config)
    }

    /// The tools array for the model under `config`: every tool, or `search_tools`,
    /// `call_tool` and the pinned tools.
    pub fn model_tools(&self, config: &PresentationConfig) -> ModelTools<'_> {
        let decision = self.presentation(config);
        let tools = match decision.presentation {
            Presentation::AllTools => self.entries().map(|e| e.definition()).collect(),
            Presentation::ProgressiveDiscovery => {
                let mut tools = vec![ToolDefinition::search_tools(), ToolDefinition::call_tool()];
                tools.extend(self.entries().filter(|e| e.pinned).map(|e| e.definition()));
                tools
            }
        };
        ModelTools { decision, tools }
    }

    /// The whole catalog for the Anthropic Messages API's own tool search: its tool search
    /// tool first, then every tool, deferred (`"defer_loading": true`) unless pinned.
    pub fn anthropic_tool_search(&self, variant: AnthropicToolSearch) -> Value {
        let mut tools = vec![variant.entry()];
        tools.extend(self.entries().map(|e| e.definition().anthropic(!e.pinned)));
        Value::Array(tools)
    }

    /// The whole catalog for the OpenAI Responses API's own tool search: `{"type":
    /// "tool_search"}` first, then every tool, deferred unless pinned.
    pub fn openai_tool_search(&self) -> Value {
        let mut tools = vec![json!({"type": "tool_search"})];
        tools.extend(
            self.entries()
                .map(|e| e.definition().openai_responses(!e.pinned)),
        );
        Value::Array(tools)
    }

    /// Runs a `search_tools` query ([`search::query`]) for at most `limit` results (from 1
    /// to [`query::MAX_LIMIT`]; `select:` gives every tool it names whatever the limit).
    pub fn search(&self, query: &str, limit: usize) -> Result<SearchResults<'_>, SearchError> {
        let limit = query::check_limit(limit as u64)?;
        match query::parse(query)? {
            Query::Select(names) => Ok(self.select(names)),
            Query::Regex(re) => Ok(self.regex(&re, limit)),
            Query::Words(words) => Ok(self.bm25(&words, limit)),
        }
    }

    fn hit<'a>(
        &'a self,
        id: &'a ServerId,
        s: &'a ServerTools,
        i: usize,
        score: f64,
    ) -> SearchHit<'a> {
        SearchHit {
            exposed: &s.exposed[i],
            server: id,
            tool: &s.tools[i],
            score,
        }
    }

    fn select(&self, names: Vec<String>) -> SearchResults<'_> {
        let mut hits = Vec::new();
        let mut unknown = Vec::new();
        for name in names {
            let found = self.names.route(&name).and_then(|key| {
                let (id, s) = self.servers.get_key_value(&key.server)?;
                Some(self.hit(id, s, s.position(&key.tool)?, 1.0))
            });
            match found {
                Some(hit) => hits.push(hit),
                None => unknown.push(name),
            }
        }
        SearchResults {
            kind: QueryKind::Select,
            hits,
            unknown,
        }
    }

    fn regex(&self, re: &regex_lite::Regex, limit: usize) -> SearchResults<'_> {
        let mut hits = Vec::new();
        for (id, s) in &self.servers {
            let mut found: Vec<SearchHit<'_>> = (0..s.tools.len())
                .filter(|&i| search::regex_matches(re, &s.exposed[i], &s.tools[i]))
                .map(|i| self.hit(id, s, i, 1.0))
                .collect();
            found.sort_by(|a, b| a.exposed.cmp(b.exposed));
            hits.extend(found);
            if hits.len() >= limit {
                break;
            }
        }
        hits.truncate(limit);
        SearchResults {
            kind: QueryKind::Regex,
            hits,
            unknown: Vec::new(),
        }
    }

    fn bm25(&self, words: &[String], limit: usize) -> SearchResults<'_> {
        let terms = self.stats.terms(words);
        let avgdl = self.stats.average_length();
        let mut found: Vec<SearchHit<'_>> = Vec::new();
        let mut scores: Vec<f64> = Vec::new();
        if !terms.is_empty() {
            for (id, s) in &self.servers {
                scores.clear();
                scores.resize(s.index.len(), 0.0);
                s.index.score(&terms, avgdl, &mut scores);
                for (i, &score) in scores.iter().enumerate() {
                    if score > 0.0 {
                        found.push(self.hit(id, s, i, score));
                    }
                }
            }
        }
        // Score first (highest), then server id, then exposed name: a total order, since
        // exposed names are unique.
        let order = |a: &SearchHit<'_>, b: &SearchHit<'_>| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.server.cmp(b.server))
                .then_with(|| a.exposed.cmp(b.exposed))
        };
        if found.len() > limit {
            found.select_nth_unstable_by(limit - 1, order);
            found.truncate(limit);
        }
        found.sort_by(order);
        SearchResults {
            kind: QueryKind::Words,
            hits: found,
            unknown: Vec::new(),
        }
    }
}
