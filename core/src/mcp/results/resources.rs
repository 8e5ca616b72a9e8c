//! `resources/list` ([`ListResourcesResult`], [`Resource`]), `resources/templates/list`
//! ([`ListResourceTemplatesResult`], [`ResourceTemplate`]) and `resources/read`
//! ([`ReadResourceResult`]).

use serde_json::Value;

use super::content::{
    read_annotations, read_icons, read_names, write_annotations, write_icons, write_names,
    Annotations, ResourceContents,
};
use super::wire::{unsigned, At, Obj, Out, Read};
use super::{read_cache_scope, read_ttl, ttl_of, write_cache_hints};
use crate::mcp::discover::CacheScopeHint;
use crate::mcp::meta::{Icon, JsonObject};

/// A resource the server can read (schema `Resource`); also the body of a `resource_link`
/// content block (schema `ResourceLink`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// `uri`, as sent (not parsed).
    pub uri: String,
    /// `name`.
    pub name: String,
    /// `title`: a display name.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `mimeType`.
    pub mime_type: Option<String>,
    /// `size`: the raw content's size in bytes (before base64 encoding).
    pub size: Option<u64>,
    /// `annotations`.
    pub annotations: Option<Annotations>,
    /// `icons` (absent and empty read the same).
    pub icons: Vec<Icon>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl Resource {
    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        Resource::read_fields(&mut Obj::new(v, at)?)
    }

    /// Reads the members (the caller may have taken others, such as a block's `type`).
    pub(super) fn read_fields(o: &mut Obj<'_, '_>) -> Read<Self> {
        let (name, title, description) = read_names(o)?;
        Ok(Resource {
            uri: o.req_string("uri")?,
            name,
            title,
            description,
            mime_type: o.opt_string("mimeType")?,
            size: o.optional("size", unsigned)?,
            annotations: read_annotations(o)?,
            icons: read_icons(o)?,
            meta: o.meta()?,
            other: o.rest(),
        })
    }

    /// Writes the typed members (`other` is the caller's [`Out::new`]).
    pub(super) fn write_fields(&self, out: &mut Out) {
        out.put("uri", self.uri.as_str());
        write_names(out, &self.name, &self.title, &self.description);
        out.opt_str("mimeType", &self.mime_type);
        out.opt("size", self.size);
        write_annotations(out, &self.annotations);
        write_icons(out, &self.icons);
        out.meta(&self.meta);
    }

    /// The resource as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        self.write_fields(&mut out);
        out.done()
    }
}

/// A template for resources the server can read (schema `ResourceTemplate`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceTemplate {
    /// `uriTemplate`: an RFC 6570 URI template, as sent (not parsed).
    pub uri_template: String,
    /// `name`.
    pub name: String,
    /// `title`: a display name.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `mimeType`, when every matching resource has the same.
    pub mime_type: Option<String>,
    /// `annotations`.
    pub annotations: Option<Annotations>,
    /// `icons` (absent and empty read the same).
    pub icons: Vec<Icon>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl ResourceTemplate {
    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        let (name, title, description) = read_names(&mut o)?;
        Ok(ResourceTemplate {
            uri_template: o.req_string("uriTemplate")?,
            name,
            title,
            description,
            mime_type: o.opt_string("mimeType")?,
            annotations: read_annotations(&mut o)?,
            icons: read_icons(&mut o)?,
            meta: o.meta()?,
            other: o.rest(),
        })
    }

    /// The template as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        out.put("uriTemplate", self.uri_template.as_str());
        write_names(&mut out, &self.name, &self.title, &self.description);
        out.opt_str("mimeType", &self.mime_type);
        write_annotations(&mut out, &self.annotations);
        write_icons(&mut out, &self.icons);
        out.meta(&self.meta);
        out.done()
    }
}

list_result! {
    /// The result of `resources/list` (schema `ListResourcesResult`): one page of resources.
    ListResourcesResult, "resources/list", resources: Resource = "resources"
}

list_result! {
    /// The result of `resources/templates/list` (schema `ListResourceTemplatesResult`): one
    /// page of resource templates.
    ListResourceTemplatesResult, "resources/templates/list",
    resource_templates: ResourceTemplate = "resourceTemplates"
}

/// The result of `resources/read` (schema `ReadResourceResult`).
#[derive(Clone)]
pub struct ReadResourceResult {
    /// `contents`: the resource and its sub-resources.
    pub contents: Vec<ResourceContents>,
    /// `ttlMs` as sent: how long the result may be cached (`2026-07-28`; see
    /// [`ReadResourceResult::ttl`]).
    pub ttl_ms: Option<i64>,
    /// `cacheScope` as sent (`2026-07-28`).
    pub cache_scope: Option<CacheScopeHint>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
    raw: Value,
}

impl ReadResourceResult {
    /// How long the result stays fresh after receipt: `ttlMs` read by the cache's rule
    /// (absent or negative is zero).
    pub fn ttl(&self) -> std::time::Duration {
        ttl_of(self.ttl_ms)
    }

    fn read(o: &mut Obj<'_, '_>) -> Read<Self> {
        Ok(ReadResourceResult {
            contents: o.req_list("contents", ResourceContents::read)?,
            ttl_ms: read_ttl(o)?,
            cache_scope: read_cache_scope(o)?,
            meta: o.meta()?,
            other: o.rest(),
            raw: Value::Null,
        })
    }

    fn write(&self, out: &mut Out) {
        out.list("contents", &self.contents, ResourceContents::to_value);
        write_cache_hints(out, self.ttl_ms, &self.cache_scope);
        out.meta(&self.meta);
    }
}

result_impls!(
    ReadResourceResult,
    "resources/read",
    contents,
    ttl_ms,
    cache_scope,
    meta
);

serde_via_value!(item Resource);
serde_via_value!(item ResourceTemplate);
