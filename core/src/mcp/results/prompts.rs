//! `prompts/list` ([`ListPromptsResult`], [`Prompt`], [`PromptArgument`]) and `prompts/get`
//! ([`GetPromptResult`], [`PromptMessage`]).

use serde_json::Value;

use super::content::{read_icons, read_names, write_icons, write_names, ContentBlock, Role};
use super::wire::{At, Obj, Out, Read};
use crate::mcp::meta::{Icon, JsonObject};

/// An argument a prompt takes (schema `PromptArgument`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptArgument {
    /// `name`.
    pub name: String,
    /// `title`: a display name.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `required`: the argument must be given (absent means `false`).
    pub required: bool,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl PromptArgument {
    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        let (name, title, description) = read_names(&mut o)?;
        Ok(PromptArgument {
            name,
            title,
            description,
            required: o.opt_bool("required")?.unwrap_or(false),
            other: o.rest(),
        })
    }

    /// The argument as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        write_names(&mut out, &self.name, &self.title, &self.description);
        out.flag("required", self.required);
        out.done()
    }
}

/// A prompt or prompt template the server offers (schema `Prompt`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prompt {
    /// `name`: what `prompts/get` names.
    pub name: String,
    /// `title`: a display name.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `arguments` (absent and empty read the same).
    pub arguments: Vec<PromptArgument>,
    /// `icons` (absent and empty read the same).
    pub icons: Vec<Icon>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl Prompt {
    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        let (name, title, description) = read_names(&mut o)?;
        Ok(Prompt {
            name,
            title,
            description,
            arguments: o.opt_list("arguments", PromptArgument::read)?,
            icons: read_icons(&mut o)?,
            meta: o.meta()?,
            other: o.rest(),
        })
    }

    /// The prompt as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        write_names(&mut out, &self.name, &self.title, &self.description);
        out.nonempty_list("arguments", &self.arguments, PromptArgument::to_value);
        write_icons(&mut out, &self.icons);
        out.meta(&self.meta);
        out.done()
    }
}

list_result! {
    /// The result of `prompts/list` (schema `ListPromptsResult`): one page of prompts.
    ListPromptsResult, "prompts/list", prompts: Prompt = "prompts"
}

/// One message of a prompt (schema `PromptMessage`).
#[derive(Clone, Debug, PartialEq)]
pub struct PromptMessage {
    /// `role`.
    pub role: Role,
    /// `content`: one block.
    pub content: ContentBlock,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl PromptMessage {
    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        Ok(PromptMessage {
            role: o.required("role", Role::read)?,
            content: o.required("content", ContentBlock::read)?,
            other: o.rest(),
        })
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        out.put("role", self.role.as_str());
        out.put("content", self.content.to_value());
        out.done()
    }
}

/// The result of `prompts/get` (schema `GetPromptResult`).
#[derive(Clone)]
pub struct GetPromptResult {
    /// `description`.
    pub description: Option<String>,
    /// `messages`.
    pub messages: Vec<PromptMessage>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
    raw: Value,
}

impl GetPromptResult {
    fn read(o: &mut Obj<'_, '_>) -> Read<Self> {
        Ok(GetPromptResult {
            description: o.opt_string("description")?,
            messages: o.req_list("messages", PromptMessage::read)?,
            meta: o.meta()?,
            other: o.rest(),
            raw: Value::Null,
        })
    }

    fn write(&self, out: &mut Out) {
        out.opt_str("description", &self.description);
        out.list("messages", &self.messages, PromptMessage::to_value);
        out.meta(&self.meta);
    }
}

result_impls!(GetPromptResult, "prompts/get", description, messages, meta);

serde_via_value!(item PromptArgument);
serde_via_value!(item Prompt);
serde_via_value!(item PromptMessage);
