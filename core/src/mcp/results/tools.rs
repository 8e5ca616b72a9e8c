//! `tools/list` ([`ListToolsResult`], [`Tool`], [`ToolAnnotations`]) and `tools/call`
//! ([`CallToolResult`], [`ToolError`]).

use std::fmt;

use serde_json::Value;

use super::content::{read_icons, read_names, write_icons, write_names, ContentBlock};
use super::wire::{object, At, Obj, Out, Read};
use crate::mcp::meta::{Icon, JsonObject};

/// What a tool says about its behaviour (schema `ToolAnnotations`). Every member is a hint: a
/// client never decides on them for a server it does not trust. The `is_*` methods apply the
/// spec's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolAnnotations {
    /// `title`: a display name.
    pub title: Option<String>,
    /// `readOnlyHint`: the tool does not modify its environment (default `false`).
    pub read_only_hint: Option<bool>,
    /// `destructiveHint`: the tool may perform destructive updates, not only additive ones
    /// (default `true`; meaningful only when not read-only).
    pub destructive_hint: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments has no further effect
    /// (default `false`; meaningful only when not read-only).
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint`: the tool may interact with an open world of external entities (default
    /// `true`).
    pub open_world_hint: Option<bool>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl ToolAnnotations {
    /// `readOnlyHint`, `false` when absent.
    pub fn is_read_only(&self) -> bool {
        self.read_only_hint.unwrap_or(false)
    }

    /// `destructiveHint`, `true` when absent; `false` for a read-only tool.
    pub fn is_destructive(&self) -> bool {
        !self.is_read_only() && self.destructive_hint.unwrap_or(true)
    }

    /// `idempotentHint`, `false` when absent; `true` for a read-only tool (it has no effect to
    /// repeat).
    pub fn is_idempotent(&self) -> bool {
        self.is_read_only() || self.idempotent_hint.unwrap_or(false)
    }

    /// `openWorldHint`, `true` when absent.
    pub fn is_open_world(&self) -> bool {
        self.open_world_hint.unwrap_or(true)
    }

    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        Ok(ToolAnnotations {
            title: o.opt_string("title")?,
            read_only_hint: o.opt_bool("readOnlyHint")?,
            destructive_hint: o.opt_bool("destructiveHint")?,
            idempotent_hint: o.opt_bool("idempotentHint")?,
            open_world_hint: o.opt_bool("openWorldHint")?,
            other: o.rest(),
        })
    }

    /// The annotations as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        out.opt_str("title", &self.title);
        out.opt("readOnlyHint", self.read_only_hint);
        out.opt("destructiveHint", self.destructive_hint);
        out.opt("idempotentHint", self.idempotent_hint);
        out.opt("openWorldHint", self.open_world_hint);
        out.done()
    }
}

/// A tool the client can call (schema `Tool`). The schemas are kept verbatim: `inputSchema`
/// must be an object, and nothing else in it is checked here (`x-mcp-header` annotations are
/// `crate::mcp::headers`' business).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tool {
    /// `name`: what `tools/call` names.
    pub name: String,
    /// `title`: a display name.
    pub title: Option<String>,
    /// `description`, for the model.
    pub description: Option<String>,
    /// `inputSchema`: the JSON Schema of the arguments.
    pub input_schema: JsonObject,
    /// `outputSchema`: the JSON Schema of `structuredContent`.
    pub output_schema: Option<JsonObject>,
    /// `annotations`.
    pub annotations: Option<ToolAnnotations>,
    /// `icons` (absent and empty read the same).
    pub icons: Vec<Icon>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent (a `2025-11-25` tool's `execution`).
    pub other: JsonObject,
}

impl Tool {
    /// The name to show a person: `title`, else `annotations.title`, else `name` (the spec's
    /// precedence).
    pub fn display_name(&self) -> &str {
        self.title
            .as_deref()
            .or_else(|| self.annotations.as_ref()?.title.as_deref())
            .unwrap_or(&self.name)
    }

    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        let (name, title, description) = read_names(&mut o)?;
        Ok(Tool {
            name,
            title,
            description,
            input_schema: o.required("inputSchema", object)?,
            output_schema: o.opt_object("outputSchema")?,
            annotations: o.optional("annotations", ToolAnnotations::read)?,
            icons: read_icons(&mut o)?,
            meta: o.meta()?,
            other: o.rest(),
        })
    }

    /// The tool as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        write_names(&mut out, &self.name, &self.title, &self.description);
        out.put("inputSchema", Value::Object(self.input_schema.clone()));
        out.opt_object("outputSchema", &self.output_schema);
        out.opt(
            "annotations",
            self.annotations.as_ref().map(ToolAnnotations::to_value),
        );
        write_icons(&mut out, &self.icons);
        out.meta(&self.meta);
        out.done()
    }
}

list_result! {
    /// The result of `tools/list` (schema `ListToolsResult`): one page of tools.
    ListToolsResult, "tools/list", tools: Tool = "tools"
}

/// The result of `tools/call` (schema `CallToolResult`). A tool's own failure is a result
/// with `isError: true` ([`CallToolResult::into_result`] makes it an error); a failure to call
/// it at all is a JSON-RPC error, not a result.
#[derive(Clone)]
pub struct CallToolResult {
    /// `content`: the unstructured result, for the model.
    pub content: Vec<ContentBlock>,
    /// `structuredContent`: any JSON value (an explicit `null` is kept as `Some(Null)`), which
    /// conforms to the tool's `outputSchema` when it has one.
    pub structured_content: Option<Value>,
    /// `isError`: the tool failed (absent means `false`).
    pub is_error: bool,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
    raw: Value,
}

impl CallToolResult {
    /// The text of the `text` blocks, in order, joined with `"\n"` (other blocks are left
    /// out; no text blocks give `""`).
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        texts.join("\n")
    }

    /// The result, or a [`ToolError`] carrying it when `isError` is true.
    pub fn into_result(self) -> Result<CallToolResult, ToolError> {
        if self.is_error {
            Err(ToolError {
                result: Box::new(self),
            })
        } else {
            Ok(self)
        }
    }

    fn read(o: &mut Obj<'_, '_>) -> Read<Self> {
        Ok(CallToolResult {
            content: o.req_list("content", ContentBlock::read)?,
            // Any JSON value, `null` included.
            structured_content: o.take("structuredContent").cloned(),
            is_error: o.opt_bool("isError")?.unwrap_or(false),
            meta: o.meta()?,
            other: o.rest(),
            raw: Value::Null,
        })
    }

    fn write(&self, out: &mut Out) {
        out.list("content", &self.content, ContentBlock::to_value);
        out.opt("structuredContent", self.structured_content.clone());
        out.flag("isError", self.is_error);
        out.meta(&self.meta);
    }
}

result_impls!(
    CallToolResult,
    "tools/call",
    content,
    structured_content,
    is_error,
    meta
);

/// A tool reported that it failed (`isError: true`): the result is still there, for the model
/// to see. `Display` shows the result's text.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolError {
    result: Box<CallToolResult>,
}

impl ToolError {
    /// The result the tool answered.
    pub fn result(&self) -> &CallToolResult {
        &self.result
    }

    /// The result the tool answered, taken out.
    pub fn into_result(self) -> CallToolResult {
        *self.result
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.result.text();
        if text.is_empty() {
            f.write_str("the tool reported an error (without text)")
        } else {
            write!(f, "the tool reported an error: {text}")
        }
    }
}

impl std::error::Error for ToolError {}

serde_via_value!(item ToolAnnotations);
serde_via_value!(item Tool);
