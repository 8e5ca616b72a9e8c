//! What the gateway lists downstream (`tools/list`), what `search_tools` answers, and when
//! the downstream client is told the list changed.
//!
//! Below the discovery threshold ([`crate::host::catalog::present`]) the downstream client
//! gets every upstream tool under its exposed name (`<server>__<tool>`, the catalog's
//! [`naming`](crate::host::catalog::naming)); above it only `search_tools` and `call_tool`
//! (and the tools pinned with `--pin`), so the client's context holds two definitions
//! whatever the servers list, and the model loads the ones it needs with `search_tools`,
//! whose result is those tools' definitions in the `Tool` shape of `tools/list`.
//!
//! # What a downstream definition holds
//!
//! [`downstream_tool`]: the exposed name, `title`, `description`, `inputSchema` and
//! `outputSchema` as the server sent them (the gateway passes `structuredContent` through,
//! so the client may check it against the schema). `annotations` go downstream only for a
//! **trusted** server: a downstream host believes its server's hints (an untrusted tool's
//! `readOnlyHint: true` could spare a prompt there), and the gateway vouches only for what
//! its user trusts; an untrusted server's tool keeps only `annotations.title`. `icons`,
//! `_meta` and members this schema does not name (a 2025-11-25 tool's `execution`, which
//! would announce task support the gateway does not carry) are left out.
//!
//! # `notifications/tools/list_changed`
//!
//! [`list_changed`] compares what was listed with what would be listed now: names and
//! definitions, in order. An upstream that reconnects with the same tools, a server's
//! `list_changed` that changed nothing, a server that goes down while its tools stay listed
//! (calls then say it is unavailable): none of these is a change downstream. Under
//! progressive discovery the list is the meta-tools and the pins, so upstream changes reach
//! the client only through `search_tools`, and its prompt cache stays valid.

use serde_json::{json, Value};

use super::Upstreams;
use crate::host::catalog::{
    Catalog, Entry, Presentation, PresentationConfig, PresentationDecision, SearchResults,
    ToolDefinition,
};
use crate::host::Trust;
use crate::mcp::results::{Tool, ToolAnnotations};

/// The tools the gateway lists downstream, in order, with the presentation decision.
#[derive(Clone, Debug, PartialEq)]
pub struct ExposedTools {
    /// All tools or progressive discovery, and the token numbers behind it.
    pub decision: PresentationDecision,
    /// The definitions, in the order `tools/list` gives them: under progressive discovery
    /// `search_tools`, `call_tool`, then the pinned tools; else every tool, servers by id and
    /// each server's tools by name.
    pub tools: Vec<Tool>,
}

impl ExposedTools {
    /// What the gateway lists for `catalog` under `config`.
    pub fn new(
        catalog: &Catalog,
        config: &PresentationConfig,
        upstreams: &Upstreams,
    ) -> ExposedTools {
        let decision = catalog.presentation(config);
        let shown = |e: &Entry<'_>| downstream_tool(e.exposed, e.tool, upstreams.trust(e.server));
        let tools = match decision.presentation {
            Presentation::AllTools => catalog.entries().map(|e| shown(&e)).collect(),
            Presentation::ProgressiveDiscovery => {
                let mut tools = vec![
                    meta_tool(&ToolDefinition::search_tools()),
                    meta_tool(&ToolDefinition::call_tool()),
                ];
                tools.extend(catalog.entries().filter(|e| e.pinned).map(|e| shown(&e)));
                tools
            }
        };
        ExposedTools { decision, tools }
    }

    /// The exposed names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_str())
    }

    /// The `tools` array of a `tools/list` result (the engine paginates it).
    pub fn to_value(&self) -> Value {
        Value::Array(self.tools.iter().map(Tool::to_value).collect())
    }
}

/// Whether `notifications/tools/list_changed` must go downstream: what would be listed now
/// (`next`) differs from what was listed (`previous`) in a name or a definition.
pub fn list_changed(previous: &ExposedTools, next: &ExposedTools) -> bool {
    previous.tools != next.tools
}

fn meta_tool(d: &ToolDefinition<'_>) -> Tool {
    Tool {
        name: d.name.to_owned(),
        description: d.description.map(str::to_owned),
        input_schema: d.input_schema.clone(),
        ..Tool::default()
    }
}

/// One upstream tool as the downstream client sees it (see the module docs for what is
/// kept): under its exposed name, with annotations only when the server is trusted.
pub fn downstream_tool(exposed: &str, tool: &Tool, trust: Trust) -> Tool {
    let annotations = match trust {
        Trust::Trusted => tool.annotations.clone(),
        Trust::Untrusted => tool
            .annotations
            .as_ref()
            .and_then(|a| a.title.clone())
            .map(|title| ToolAnnotations {
                title: Some(title),
                ..ToolAnnotations::default()
            }),
    };
    Tool {
        name: exposed.to_owned(),
        title: tool.title.clone(),
        description: tool.description.clone(),
        input_schema: tool.input_schema.clone(),
        output_schema: tool.output_schema.clone(),
        annotations,
        icons: Vec::new(),
        meta: None,
        other: Default::default(),
    }
}

/// The `CallToolResult` of a `search_tools` call: the tools found, as downstream
/// definitions ([`downstream_tool`]) with their server, in `structuredContent.tools` and as
/// the same JSON in one text block (for clients that give the model only text). Names a
/// `select:` query gave that no tool has are listed in `unknown`.
pub fn search_result(results: &SearchResults<'_>, upstreams: &Upstreams) -> Value {
    let tools: Vec<Value> = results
        .hits
        .iter()
        .map(|hit| {
            let mut def =
                downstream_tool(hit.exposed, hit.tool, upstreams.trust(hit.server)).to_value();
            if let Value::Object(o) = &mut def {
                o.insert("server".into(), hit.server.as_str().into());
            }
            def
        })
        .collect();
    let mut structured = json!({ "tools": tools });
    if !results.unknown.is_empty() {
        structured["unknown"] = json!(results.unknown);
    }
    let note = if tools.is_empty() {
        "no tool matches; try other words, `regex:PATTERN` or `select:NAME`"
    } else {
        "call one with call_tool {\"name\": <its name>, \"arguments\": {...}}"
    };
    let text = format!("{structured}\n{note}");
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": false,
    })
}
