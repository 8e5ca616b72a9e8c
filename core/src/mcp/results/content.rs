//! The content a tool result or a prompt message carries (`ContentBlock`), its `Annotations`,
//! icons, and the contents of a resource (`TextResourceContents` / `BlobResourceContents`).

use serde_json::Value;

use super::resources::Resource;
use super::wire::{list, number, string, At, Obj, Out, Read};
use super::ResultErrorKind;
use crate::mcp::meta::{Icon, JsonObject};

/// The sender or recipient of messages and data (schema `Role`). A value this schema does not
/// define is kept as sent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// `"user"`.
    User,
    /// `"assistant"`.
    Assistant,
    /// A value this schema does not define, kept as sent.
    Other(String),
}

impl Role {
    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Other(s) => s,
        }
    }

    /// Reads the wire spelling.
    pub fn from_wire(s: &str) -> Self {
        match s {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => Role::Other(other.to_owned()),
        }
    }

    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        string(v, at).map(|s| Role::from_wire(&s))
    }
}

/// Hints for the client about how to use or show an object (schema `Annotations`). Values are
/// kept as sent: a `priority` outside `0..=1` is not refused.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations {
    /// `audience`: who the data is meant for (absent and empty read the same).
    pub audience: Vec<Role>,
    /// `priority`: how important the data is, from 0 (optional) to 1 (effectively required).
    pub priority: Option<f64>,
    /// `lastModified`: an ISO 8601 timestamp, as sent (not parsed).
    pub last_modified: Option<String>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl Annotations {
    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        Ok(Annotations {
            audience: o.opt_list("audience", Role::read)?,
            priority: o.optional("priority", number)?,
            last_modified: o.opt_string("lastModified")?,
            other: o.rest(),
        })
    }

    /// The annotations as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        out.nonempty_list("audience", &self.audience, |r| Value::from(r.as_str()));
        out.opt("priority", self.priority);
        out.opt_str("lastModified", &self.last_modified);
        out.done()
    }
}

/// Reads an icon (schema `Icon`, the type [`Implementation`](crate::mcp::meta::Implementation)
/// also uses).
fn read_icon(v: &Value, at: &At<'_>) -> Read<Icon> {
    let mut o = Obj::new(v, at)?;
    Ok(Icon {
        src: o.req_string("src")?,
        mime_type: o.opt_string("mimeType")?,
        sizes: o.optional("sizes", |v, at| list(v, at, string))?,
        theme: o.opt_string("theme")?,
        other: o.rest(),
    })
}

/// Writes an icon.
fn write_icon(icon: &Icon) -> Value {
    let mut out = Out::new(&icon.other);
    out.put("src", icon.src.as_str());
    out.opt_str("mimeType", &icon.mime_type);
    out.opt("sizes", icon.sizes.clone());
    out.opt_str("theme", &icon.theme);
    out.done()
}

/// `name`, `title` and `description`, which tools, prompts, their arguments, resources and
/// templates share (schema `BaseMetadata`, plus `description`).
pub(super) type Names = (String, Option<String>, Option<String>);

/// Reads `name` (required), `title` and `description`.
pub(super) fn read_names(o: &mut Obj<'_, '_>) -> Read<Names> {
    Ok((
        o.req_string("name")?,
        o.opt_string("title")?,
        o.opt_string("description")?,
    ))
}

/// Writes `name`, `title` and `description`.
pub(super) fn write_names(
    out: &mut Out,
    name: &str,
    title: &Option<String>,
    desc: &Option<String>,
) {
    out.put("name", name);
    out.opt_str("title", title);
    out.opt_str("description", desc);
}

/// Reads the optional `annotations` member.
pub(super) fn read_annotations(o: &mut Obj<'_, '_>) -> Read<Option<Annotations>> {
    o.optional("annotations", Annotations::read)
}

/// Writes the optional `annotations` member.
pub(super) fn write_annotations(out: &mut Out, a: &Option<Annotations>) {
    out.opt("annotations", a.as_ref().map(Annotations::to_value));
}

/// Reads the optional `icons` member.
pub(super) fn read_icons(o: &mut Obj<'_, '_>) -> Read<Vec<Icon>> {
    o.opt_list("icons", read_icon)
}

/// Writes the `icons` member unless there are none.
pub(super) fn write_icons(out: &mut Out, icons: &[Icon]) {
    out.nonempty_list("icons", icons, write_icon);
}

/// A `text` content block (schema `TextContent`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TextContent {
    /// `text`.
    pub text: String,
    /// `annotations`.
    pub annotations: Option<Annotations>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

/// An `image` or `audio` content block: the two share one shape (schema `ImageContent` and
/// `AudioContent`), told apart by [`ContentBlock::Image`] and [`ContentBlock::Audio`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BinaryContent {
    /// `data`: the base64-encoded bytes, as sent (not decoded).
    pub data: String,
    /// `mimeType`.
    pub mime_type: String,
    /// `annotations`.
    pub annotations: Option<Annotations>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

/// The schema's `ImageContent`.
pub type ImageContent = BinaryContent;
/// The schema's `AudioContent`.
pub type AudioContent = BinaryContent;
/// The schema's `ResourceLink`: a [`Resource`] carried as a `resource_link` content block.
pub type ResourceLink = Resource;

/// A `resource` content block: a resource's contents embedded in a result (schema
/// `EmbeddedResource`).
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddedResource {
    /// `resource`: the contents.
    pub resource: ResourceContents,
    /// `annotations`.
    pub annotations: Option<Annotations>,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

/// One piece of content in a tool result or a prompt message (schema `ContentBlock`).
///
/// A block whose `type` this schema does not define is kept as [`ContentBlock::Unknown`], so a
/// newer server's block never fails the whole result. A block of a known `type` must have that
/// type's required members with the right JSON types.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // Blocks are read once and kept in a Vec; boxing buys nothing.
pub enum ContentBlock {
    /// `"type": "text"`.
    Text(TextContent),
    /// `"type": "image"`.
    Image(ImageContent),
    /// `"type": "audio"`.
    Audio(AudioContent),
    /// `"type": "resource_link"`: a link to a resource the server can read.
    ResourceLink(ResourceLink),
    /// `"type": "resource"`: a resource's contents, embedded.
    Resource(EmbeddedResource),
    /// A block of a `type` this schema does not define, verbatim.
    Unknown(Value),
}

impl ContentBlock {
    /// The block's `type` (`"text"`, ...; for an unknown block, the `type` it was sent with).
    pub fn kind(&self) -> &str {
        match self {
            ContentBlock::Text(_) => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::ResourceLink(_) => "resource_link",
            ContentBlock::Resource(_) => "resource",
            ContentBlock::Unknown(v) => v.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// The text of a `text` block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(t) => Some(&t.text),
            _ => None,
        }
    }

    /// The block's annotations (`None` for an unknown block).
    pub fn annotations(&self) -> Option<&Annotations> {
        match self {
            ContentBlock::Text(t) => t.annotations.as_ref(),
            ContentBlock::Image(b) | ContentBlock::Audio(b) => b.annotations.as_ref(),
            ContentBlock::ResourceLink(r) => r.annotations.as_ref(),
            ContentBlock::Resource(e) => e.annotations.as_ref(),
            ContentBlock::Unknown(_) => None,
        }
    }

    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        let kind = o.req_string("type")?;
        Ok(match kind.as_str() {
            "text" => ContentBlock::Text(TextContent {
                text: o.req_string("text")?,
                annotations: read_annotations(&mut o)?,
                meta: o.meta()?,
                other: o.rest(),
            }),
            "image" => ContentBlock::Image(read_binary(&mut o)?),
            "audio" => ContentBlock::Audio(read_binary(&mut o)?),
            "resource_link" => ContentBlock::ResourceLink(Resource::read_fields(&mut o)?),
            "resource" => ContentBlock::Resource(EmbeddedResource {
                resource: o.required("resource", ResourceContents::read)?,
                annotations: read_annotations(&mut o)?,
                meta: o.meta()?,
                other: o.rest(),
            }),
            _ => ContentBlock::Unknown(v.clone()),
        })
    }

    /// The block as JSON.
    pub fn to_value(&self) -> Value {
        let (mut out, kind) = match self {
            ContentBlock::Text(t) => {
                let mut out = Out::new(&t.other);
                out.put("text", t.text.as_str());
                write_annotations(&mut out, &t.annotations);
                out.meta(&t.meta);
                (out, "text")
            }
            ContentBlock::Image(b) => (write_binary(b), "image"),
            ContentBlock::Audio(b) => (write_binary(b), "audio"),
            ContentBlock::ResourceLink(r) => {
                let mut out = Out::new(&r.other);
                r.write_fields(&mut out);
                (out, "resource_link")
            }
            ContentBlock::Resource(e) => {
                let mut out = Out::new(&e.other);
                out.put("resource", e.resource.to_value());
                write_annotations(&mut out, &e.annotations);
                out.meta(&e.meta);
                (out, "resource")
            }
            ContentBlock::Unknown(v) => return v.clone(),
        };
        out.put("type", kind);
        out.done()
    }
}

fn read_binary(o: &mut Obj<'_, '_>) -> Read<BinaryContent> {
    Ok(BinaryContent {
        data: o.req_string("data")?,
        mime_type: o.req_string("mimeType")?,
        annotations: read_annotations(o)?,
        meta: o.meta()?,
        other: o.rest(),
    })
}

fn write_binary(b: &BinaryContent) -> Out {
    let mut out = Out::new(&b.other);
    out.put("data", b.data.as_str());
    out.put("mimeType", b.mime_type.as_str());
    write_annotations(&mut out, &b.annotations);
    out.meta(&b.meta);
    out
}

/// What a resource holds: text, or base64-encoded bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResourceBody {
    /// `text` (schema `TextResourceContents`).
    Text(String),
    /// `blob`: base64-encoded bytes, as sent (not decoded) (schema `BlobResourceContents`).
    Blob(String),
}

/// The contents of a resource or sub-resource (schema `TextResourceContents` or
/// `BlobResourceContents`): one element of a `resources/read` result, or the `resource` of an
/// embedded resource. A member carrying both `text` and `blob` reads as text (its `blob` kept
/// in [`ResourceContents::other`]); one with neither is refused.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceContents {
    /// `uri`.
    pub uri: String,
    /// `mimeType`.
    pub mime_type: Option<String>,
    /// `text` or `blob`.
    pub body: ResourceBody,
    /// `_meta`, verbatim.
    pub meta: Option<JsonObject>,
    /// Members this schema does not name, kept as sent.
    pub other: JsonObject,
}

impl ResourceContents {
    /// The text, when the resource is text.
    pub fn text(&self) -> Option<&str> {
        match &self.body {
            ResourceBody::Text(t) => Some(t),
            ResourceBody::Blob(_) => None,
        }
    }

    /// The base64 text of the bytes, when the resource is binary.
    pub fn blob(&self) -> Option<&str> {
        match &self.body {
            ResourceBody::Blob(b) => Some(b),
            ResourceBody::Text(_) => None,
        }
    }

    pub(super) fn read(v: &Value, at: &At<'_>) -> Read<Self> {
        let mut o = Obj::new(v, at)?;
        let uri = o.req_string("uri")?;
        let mime_type = o.opt_string("mimeType")?;
        let body = match o.opt_string("text")? {
            Some(text) => ResourceBody::Text(text),
            None => match o.opt_string("blob")? {
                Some(blob) => ResourceBody::Blob(blob),
                None => return Err(at.bad(ResultErrorKind::NeitherOf("text", "blob"))),
            },
        };
        // With `text` present, `blob` was never taken: it stays in `other`.
        let meta = o.meta()?;
        let other = o.rest();
        Ok(ResourceContents {
            uri,
            mime_type,
            body,
            meta,
            other,
        })
    }

    /// The contents as JSON.
    pub fn to_value(&self) -> Value {
        let mut out = Out::new(&self.other);
        out.put("uri", self.uri.as_str());
        out.opt_str("mimeType", &self.mime_type);
        match &self.body {
            ResourceBody::Text(t) => out.put("text", t.as_str()),
            ResourceBody::Blob(b) => out.put("blob", b.as_str()),
        }
        out.meta(&self.meta);
        out.done()
    }
}

serde_via_value!(item Annotations);
serde_via_value!(item ContentBlock);
serde_via_value!(item ResourceContents);
