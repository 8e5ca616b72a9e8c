//! The tool search behind `search_tools`: the query language ([`query`]), the words
//! ([`tokenizer`]) and the ranking ([`bm25`]).
//!
//! Results come in a fixed order: for words, by score (highest first), then server id, then
//! exposed name; for `regex:`, by server id, then exposed name; for `select:`, in the order
//! named. Each result carries the tool's full definition, for the host to load.

pub mod bm25;
pub mod query;
pub mod tokenizer;

use serde_json::{json, Value};

pub use query::{Query, QueryKind, SearchError};

use super::present::ToolDefinition;
use crate::host::ServerId;
use crate::mcp::results::Tool;

/// One tool found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchHit<'a> {
    /// Its exposed name.
    pub exposed: &'a str,
    /// Its server.
    pub server: &'a ServerId,
    /// The tool as its server listed it.
    pub tool: &'a Tool,
    /// The BM25 score for a words query; 1 for `select:` and `regex:`, which do not rank.
    pub score: f64,
}

impl<'a> SearchHit<'a> {
    /// Its definition as the model takes it (the exposed name, the description, the schema).
    pub fn definition(&self) -> ToolDefinition<'a> {
        ToolDefinition {
            name: self.exposed,
            description: self.tool.description.as_deref(),
            input_schema: &self.tool.input_schema,
        }
    }
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchResults<'a> {
    /// The kind of query that ran.
    pub kind: QueryKind,
    /// The tools, in result order (at most the limit).
    pub hits: Vec<SearchHit<'a>>,
    /// For `select:`, the names the catalog does not have, in the order given.
    pub unknown: Vec<String>,
}

impl SearchResults<'_> {
    /// The answer to give the model as `search_tools`' result: `{"tools": [{"name",
    /// "server", "title"?, "description"?, "input_schema"}], "unknown": [...]}` (`unknown`
    /// only when some name was unknown).
    pub fn to_model_value(&self) -> Value {
        let tools: Vec<Value> = self
            .hits
            .iter()
            .map(|h| {
                let mut o = serde_json::Map::new();
                o.insert("name".into(), h.exposed.into());
                o.insert("server".into(), h.server.as_str().into());
                if let Some(title) = &h.tool.title {
                    o.insert("title".into(), title.as_str().into());
                }
                if let Some(d) = &h.tool.description {
                    o.insert("description".into(), d.as_str().into());
                }
                o.insert(
                    "input_schema".into(),
                    Value::Object(h.tool.input_schema.clone()),
                );
                Value::Object(o)
            })
            .collect();
        if self.unknown.is_empty() {
            json!({ "tools": tools })
        } else {
            json!({ "tools": tools, "unknown": self.unknown })
        }
    }
}

/// Whether `re` matches any field of a tool: its exposed name, its original name, its titles,
/// its description or a parameter name.
pub(crate) fn regex_matches(re: &regex_lite::Regex, exposed: &str, tool: &Tool) -> bool {
    re.is_match(exposed)
        || re.is_match(&tool.name)
        || tool.title.as_deref().is_some_and(|t| re.is_match(t))
        || tool
            .annotations
            .as_ref()
            .and_then(|a| a.title.as_deref())
            .is_some_and(|t| re.is_match(t))
        || tool.description.as_deref().is_some_and(|d| re.is_match(d))
        || bm25::parameters(tool).is_some_and(|p| p.keys().any(|k| re.is_match(k)))
}
