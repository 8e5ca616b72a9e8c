//! What the model is given: all tools, or progressive discovery through two fixed meta-tools,
//! in the shapes the model providers take.
//!
//! The client guide ("How to present tools to the model") suggests switching once tool
//! definitions take more than about 1 to 5% of the context window. [`PresentationConfig`]
//! holds the window and the share ([`DiscoveryThreshold`], 3% unless set); above it the tools
//! array becomes exactly [`SEARCH_TOOLS`] and [`CALL_TOOL`] followed by the pinned tools, so
//! it stays the same whatever the model loads (the prompt cache stays valid). The meta-tools'
//! definitions are constants: the same bytes for every catalog.
//!
//! Provider shapes ([`ToolDefinition`]):
//! - Anthropic Messages API: `{"name", "description", "input_schema"}`, with
//!   `"defer_loading": true` for a deferred tool and Anthropic's own tool search tool as an
//!   entry of the array ([`AnthropicToolSearch`]), as documented at
//!   <https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool>;
//! - OpenAI Chat Completions: `{"type": "function", "function": {"name", "description",
//!   "parameters"}}`;
//! - OpenAI Responses API: `{"type": "function", "name", "description", "parameters",
//!   "strict": false}` (functions there are strict unless told, and strict mode refuses most
//!   MCP schemas: <https://developers.openai.com/api/docs/guides/migrate-to-responses>), with
//!   `"defer_loading": true` and a `{"type": "tool_search"}` entry for OpenAI's own tool
//!   search (<https://developers.openai.com/api/docs/guides/tools-tool-search>).

use std::fmt;
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use super::search::query::{DEFAULT_LIMIT, MAX_LIMIT};
use crate::mcp::meta::JsonObject;

/// The name of the search meta-tool.
pub const SEARCH_TOOLS: &str = "search_tools";
/// The name of the call meta-tool.
pub const CALL_TOOL: &str = "call_tool";

const SEARCH_TOOLS_DESCRIPTION: &str = "Search the tools of every connected server and load \
the definitions of those you need. The query is one of: words describing the task, ranked by \
BM25 over tool names, titles, descriptions and parameter names (e.g. `create issue`); \
`select:NAME,NAME` to load tools by their exact names; or `regex:PATTERN`, a case-insensitive \
regular expression matched against the same fields. Returns each tool's name, server, \
description and input schema. Call a tool found here with call_tool.";

const CALL_TOOL_DESCRIPTION: &str = "Call a tool found with search_tools, by its exact name, \
with arguments that match its input schema.";

/// One tool definition as a model gets it: a name, an optional description and the JSON
/// Schema of its arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToolDefinition<'a> {
    /// The name the model calls (an exposed name, or a meta-tool's).
    pub name: &'a str,
    /// What it does.
    pub description: Option<&'a str>,
    /// Its arguments' schema.
    pub input_schema: &'a JsonObject,
}

impl<'a> ToolDefinition<'a> {
    /// The `search_tools` meta-tool: `{query, limit?}`.
    pub fn search_tools() -> ToolDefinition<'static> {
        static SCHEMA: OnceLock<JsonObject> = OnceLock::new();
        ToolDefinition {
            name: SEARCH_TOOLS,
            description: Some(SEARCH_TOOLS_DESCRIPTION),
            input_schema: SCHEMA.get_or_init(|| {
                object(json!({
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": "string",
                            "description": "Words, `select:NAME,NAME` or `regex:PATTERN`."
                        },
                        "limit": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIMIT,
                            "description": format!("The most tools to return (default {DEFAULT_LIMIT}).")
                        }
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }))
            }),
        }
    }

    /// The `call_tool` meta-tool: `{name, arguments}`.
    pub fn call_tool() -> ToolDefinition<'static> {
        static SCHEMA: OnceLock<JsonObject> = OnceLock::new();
        ToolDefinition {
            name: CALL_TOOL,
            description: Some(CALL_TOOL_DESCRIPTION),
            input_schema: SCHEMA.get_or_init(|| {
                object(json!({
                    "type": "object",
                    "properties": {
                        "name": {
                            "type": "string",
                            "description": "The tool's exact name, as search_tools gave it."
                        },
                        "arguments": {
                            "type": "object",
                            "description": "The tool's arguments (default {})."
                        }
                    },
                    "required": ["name"],
                    "additionalProperties": false
                }))
            }),
        }
    }

    /// The Anthropic Messages API tool object; `defer` adds `"defer_loading": true`.
    pub fn anthropic(&self, defer: bool) -> Value {
        let mut o = Map::new();
        o.insert("name".into(), self.name.into());
        if let Some(d) = self.description {
            o.insert("description".into(), d.into());
        }
        o.insert(
            "input_schema".into(),
            Value::Object(self.input_schema.clone()),
        );
        if defer {
            o.insert("defer_loading".into(), true.into());
        }
        Value::Object(o)
    }

    /// The OpenAI Chat Completions function tool.
    pub fn openai_chat(&self) -> Value {
        let mut f = Map::new();
        f.insert("name".into(), self.name.into());
        if let Some(d) = self.description {
            f.insert("description".into(), d.into());
        }
        f.insert(
            "parameters".into(),
            Value::Object(self.input_schema.clone()),
        );
        json!({"type": "function", "function": Value::Object(f)})
    }

    /// The OpenAI Responses API function tool; `defer` adds `"defer_loading": true`.
    pub fn openai_responses(&self, defer: bool) -> Value {
        let mut o = Map::new();
        o.insert("type".into(), "function".into());
        o.insert("name".into(), self.name.into());
        if let Some(d) = self.description {
            o.insert("description".into(), d.into());
        }
        o.insert(
            "parameters".into(),
            Value::Object(self.input_schema.clone()),
        );
        o.insert("strict".into(), false.into());
        if defer {
            o.insert("defer_loading".into(), true.into());
        }
        Value::Object(o)
    }

    /// The length of [`ToolDefinition::anthropic`] without deferral, as compact JSON: what
    /// [`super::tokens`] estimates from.
    pub fn byte_len(&self) -> u64 {
        let mut counter = ByteCounter(0);
        // Writing to a counter cannot fail, and serializing a `Value` has no error case.
        let _ = serde_json::to_writer(&mut counter, &self.anthropic(false));
        counter.0
    }
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Anthropic's server-side tool search tool, in one of its two variants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnthropicToolSearch {
    /// `tool_search_tool_regex_20251119`: Claude writes Python `re.search` patterns.
    #[default]
    Regex,
    /// `tool_search_tool_bm25_20251119`: Claude writes natural-language queries.
    Bm25,
}

impl AnthropicToolSearch {
    /// The entry for the `tools` array (it is never deferred itself).
    pub fn entry(self) -> Value {
        match self {
            AnthropicToolSearch::Regex => json!({
                "type": "tool_search_tool_regex_20251119",
                "name": "tool_search_tool_regex"
            }),
            AnthropicToolSearch::Bm25 => json!({
                "type": "tool_search_tool_bm25_20251119",
                "name": "tool_search_tool_bm25"
            }),
        }
    }
}

/// The share of the context window above which tool definitions are no longer all given:
/// from 1% to 5% (the guide's range), 3% unless set. Kept in basis points (hundredths of a
/// percent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiscoveryThreshold {
    basis_points: u16,
}

/// A threshold outside 1–5%.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("a discovery threshold of {percent}% is outside the range the client guide gives: from 1% to 5% of the context window")]
pub struct ThresholdError {
    /// The share asked for, in percent.
    pub percent: f64,
}

impl DiscoveryThreshold {
    /// The smallest share, in percent.
    pub const MIN_PERCENT: f64 = 1.0;
    /// The largest share, in percent.
    pub const MAX_PERCENT: f64 = 5.0;
    /// The default: 3%.
    pub const DEFAULT: DiscoveryThreshold = DiscoveryThreshold { basis_points: 300 };

    /// `percent`% of the context window (rounded to a hundredth of a percent), if it is
    /// from 1 to 5.
    pub fn from_percent(percent: f64) -> Result<DiscoveryThreshold, ThresholdError> {
        if !(Self::MIN_PERCENT..=Self::MAX_PERCENT).contains(&percent) {
            return Err(ThresholdError { percent });
        }
        // In 100..=500, so the cast is exact.
        let basis_points = (percent * 100.0).round() as u16;
        Ok(DiscoveryThreshold { basis_points })
    }

    /// The share, in percent.
    pub fn percent(self) -> f64 {
        f64::from(self.basis_points) / 100.0
    }

    /// The number of tokens that share of `context_window` tokens is (rounded down).
    pub fn limit(self, context_window: u64) -> u64 {
        let limit = u128::from(context_window) * u128::from(self.basis_points) / 10_000;
        u64::try_from(limit).unwrap_or(u64::MAX)
    }
}

impl Default for DiscoveryThreshold {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for DiscoveryThreshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent())
    }
}

/// How the host decides what the model is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PresentationConfig {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// The share of it tool definitions may take before progressive discovery.
    pub threshold: DiscoveryThreshold,
}

impl PresentationConfig {
    /// A context window of `context_window` tokens, with the default threshold.
    pub fn new(context_window: u64) -> PresentationConfig {
        PresentationConfig {
            context_window,
            threshold: DiscoveryThreshold::DEFAULT,
        }
    }

    /// The same with threshold `threshold`.
    pub fn with_threshold(self, threshold: DiscoveryThreshold) -> PresentationConfig {
        PresentationConfig { threshold, ..self }
    }
}

/// What the model is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Presentation {
    /// Every tool's definition.
    AllTools,
    /// `search_tools` and `call_tool`, then the pinned tools.
    ProgressiveDiscovery,
}

/// The decision, with the numbers behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PresentationDecision {
    /// What the model is given.
    pub presentation: Presentation,
    /// The estimate for all tools' definitions.
    pub total_tokens: u64,
    /// The threshold in tokens: progressive discovery when `total_tokens` is above it.
    pub limit_tokens: u64,
}

impl PresentationDecision {
    /// Decides for definitions of `total_tokens` under `config`.
    pub fn decide(total_tokens: u64, config: &PresentationConfig) -> PresentationDecision {
        let limit_tokens = config.threshold.limit(config.context_window);
        let presentation = if total_tokens > limit_tokens {
            Presentation::ProgressiveDiscovery
        } else {
            Presentation::AllTools
        };
        PresentationDecision {
            presentation,
            total_tokens,
            limit_tokens,
        }
    }
}

/// The tools array for the model, in order, with the decision that made it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelTools<'a> {
    /// The decision.
    pub decision: PresentationDecision,
    /// The definitions, in order: under progressive discovery `search_tools`, `call_tool`,
    /// then the pinned tools; else every tool. Tools are in catalog order (servers by id,
    /// each server's tools by name).
    pub tools: Vec<ToolDefinition<'a>>,
}

impl ModelTools<'_> {
    /// The array for the Anthropic Messages API's `tools`.
    pub fn anthropic(&self) -> Value {
        Value::Array(self.tools.iter().map(|t| t.anthropic(false)).collect())
    }

    /// The array for OpenAI Chat Completions' `tools`.
    pub fn openai_chat(&self) -> Value {
        Value::Array(self.tools.iter().map(ToolDefinition::openai_chat).collect())
    }

    /// The array for the OpenAI Responses API's `tools`.
    pub fn openai_responses(&self) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|t| t.openai_responses(false))
                .collect(),
        )
    }
}

/// A call of a meta-tool by the model, its arguments checked.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaCall {
    /// `search_tools`.
    SearchTools {
        /// The query, as given (see [`super::search::query`]).
        query: String,
        /// The most results (the default when not given).
        limit: usize,
    },
    /// `call_tool`.
    CallTool {
        /// The exposed name to call.
        name: String,
        /// Its arguments (`{}` when not given).
        arguments: JsonObject,
    },
}

/// A meta-tool call with bad arguments. The messages are written for the model, so it can
/// correct the call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetaCallError {
    /// The arguments are not a JSON object.
    #[error("{tool}: the arguments must be a JSON object, got {got}")]
    NotAnObject {
        /// The meta-tool.
        tool: &'static str,
        /// The JSON type given.
        got: &'static str,
    },
    /// The arguments are text that is not JSON.
    #[error("{tool}: the arguments are not valid JSON: {reason}")]
    BadJson {
        /// The meta-tool.
        tool: &'static str,
        /// What the parser said.
        reason: String,
    },
    /// A required member is absent.
    #[error("{tool}: `{member}` is missing ({expected})")]
    Missing {
        /// The meta-tool.
        tool: &'static str,
        /// The member.
        member: &'static str,
        /// What it should be.
        expected: &'static str,
    },
    /// A member has the wrong type.
    #[error("{tool}: `{member}` must be {expected}, got {got}")]
    WrongType {
        /// The meta-tool.
        tool: &'static str,
        /// The member.
        member: &'static str,
        /// What it should be.
        expected: &'static str,
        /// The JSON type given.
        got: &'static str,
    },
    /// `limit` is outside its range.
    #[error("{tool}: `limit` must be from 1 to {max}, got {given}")]
    LimitOutOfRange {
        /// The meta-tool.
        tool: &'static str,
        /// The limit given.
        given: u64,
        /// The most accepted.
        max: usize,
    },
    /// A member the meta-tool does not take.
    #[error("{tool}: unknown argument `{member}` (it takes {takes})")]
    UnknownMember {
        /// The meta-tool.
        tool: &'static str,
        /// The member given.
        member: String,
        /// What it takes.
        takes: &'static str,
    },
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl MetaCall {
    /// The model called tool `name` with `arguments`: the meta-call, if `name` is a
    /// meta-tool's (`Ok(None)` for any other name, which is an exposed name or unknown).
    /// A member that is `null` counts as absent.
    pub fn parse(name: &str, arguments: &Value) -> Result<Option<MetaCall>, MetaCallError> {
        let tool = match name {
            SEARCH_TOOLS => SEARCH_TOOLS,
            CALL_TOOL => CALL_TOOL,
            _ => return Ok(None),
        };
        let Value::Object(args) = arguments else {
            return Err(MetaCallError::NotAnObject {
                tool,
                got: type_name(arguments),
            });
        };
        let takes = if tool == SEARCH_TOOLS {
            "`query` and `limit`"
        } else {
            "`name` and `arguments`"
        };
        let allowed: &[&str] = if tool == SEARCH_TOOLS {
            &["query", "limit"]
        } else {
            &["name", "arguments"]
        };
        // Object keys come sorted, so the first unknown one reported is deterministic.
        if let Some(member) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(MetaCallError::UnknownMember {
                tool,
                member: member.clone(),
                takes,
            });
        }
        let get = |member: &str| args.get(member).filter(|v| !v.is_null());
        if tool == SEARCH_TOOLS {
            let query = match get("query") {
                None => {
                    return Err(MetaCallError::Missing {
                        tool,
                        member: "query",
                        expected: "a string",
                    })
                }
                Some(Value::String(q)) => q.clone(),
                Some(other) => {
                    return Err(MetaCallError::WrongType {
                        tool,
                        member: "query",
                        expected: "a string",
                        got: type_name(other),
                    })
                }
            };
            let limit = match get("limit") {
                None => DEFAULT_LIMIT,
                Some(v) => match v.as_u64() {
                    Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => n as usize,
                    Some(n) => {
                        return Err(MetaCallError::LimitOutOfRange {
                            tool,
                            given: n,
                            max: MAX_LIMIT,
                        })
                    }
                    None => {
                        return Err(MetaCallError::WrongType {
                            tool,
                            member: "limit",
                            expected: "an integer from 1 to 50",
                            got: if v.is_number() {
                                "a negative or fractional number"
                            } else {
                                type_name(v)
                            },
                        })
                    }
                },
            };
            Ok(Some(MetaCall::SearchTools { query, limit }))
        } else {
            let name = match get("name") {
                None => {
                    return Err(MetaCallError::Missing {
                        tool,
                        member: "name",
                        expected: "a tool's exact name, as search_tools gave it",
                    })
                }
                Some(Value::String(n)) => n.clone(),
                Some(other) => {
                    return Err(MetaCallError::WrongType {
                        tool,
                        member: "name",
                        expected: "a string",
                        got: type_name(other),
                    })
                }
            };
            let arguments = match get("arguments") {
                None => JsonObject::new(),
                Some(Value::Object(a)) => a.clone(),
                Some(other) => {
                    return Err(MetaCallError::WrongType {
                        tool,
                        member: "arguments",
                        expected: "an object",
                        got: type_name(other),
                    })
                }
            };
            Ok(Some(MetaCall::CallTool { name, arguments }))
        }
    }

    /// The same for arguments given as JSON text (OpenAI's function calls carry them so).
    pub fn parse_json(name: &str, arguments: &str) -> Result<Option<MetaCall>, MetaCallError> {
        let tool = match name {
            SEARCH_TOOLS => SEARCH_TOOLS,
            CALL_TOOL => CALL_TOOL,
            _ => return Ok(None),
        };
        let value: Value = serde_json::from_str(arguments).map_err(|e| MetaCallError::BadJson {
            tool,
            reason: e.to_string(),
        })?;
        MetaCall::parse(name, &value)
    }
}
