//! What [`Config::resources_and_prompts`](super::Config::resources_and_prompts) adds to the
//! reference server: one prompt ([`PROMPT_NAME`], with a required argument), two resources
//! ([`GREETING_URI`], and [`MOTTO_URI`] on a second page of `resources/list`) and one resource
//! template ([`GREETING_TEMPLATE`]), `subscriptions/listen`
//! (2026-07-28, `basic/patterns/subscriptions.mdx`) and the `touch` tool that makes the server
//! announce a change to every subscription that asked for it.
//!
//! A subscription is acknowledged at once (`notifications/subscriptions/acknowledged`, the
//! kinds it asked for, less resource URIs this server cannot read), then carries each change
//! announced by `touch`, every message with the listen id in
//! `_meta["io.modelcontextprotocol/subscriptionId"]`. It ends when the client goes away or
//! cancels it (nothing more is sent), or when the server ends it
//! ([`McpServer::end_subscriptions`], or stopping: a `complete` result for the listen request,
//! the graceful closure; on HTTP a stop also closes the connections, so that result may not
//! arrive).

use mcpwire_core::jsonrpc::{code, ErrorObject};
use mcpwire_core::mcp::Era;
use serde_json::{json, Map, Value};

use super::{invalid_params, lock, Answer, McpServer};

/// The prompt's name.
pub const PROMPT_NAME: &str = "greet";
/// The resource's URI.
pub const GREETING_URI: &str = "mcpwire-dev://greeting";
/// The resource template (RFC 6570 level 1): `{name}` is one path segment.
pub const GREETING_TEMPLATE: &str = "mcpwire-dev://greeting/{name}";
/// The resource's text.
pub const GREETING_TEXT: &str = "Hello from mcpwire's reference server!";
/// A second resource (on a second page of `resources/list`, so paging is exercised).
pub const MOTTO_URI: &str = "mcpwire-dev://motto";
/// Its text.
pub const MOTTO_TEXT: &str = "Bytes at the edge, decisions in the middle.";

fn modern_list(era: Era, member: &str, items: Value) -> Answer {
    let mut result = json!({ member: items });
    if era == Era::Modern {
        // Required members of a modern list result (schema.json); the same for every caller.
        result["ttlMs"] = json!(0);
        result["cacheScope"] = json!("public");
    }
    Answer::Result(result)
}

/// `prompts/list`.
pub(super) fn list_prompts(era: Era) -> Answer {
    modern_list(
        era,
        "prompts",
        json!([{
            "name": PROMPT_NAME,
            "title": "Greet someone",
            "description": "Asks for a warm greeting of name, in the style given.",
            "arguments": [
                {"name": "name", "description": "Who to greet.", "required": true},
                {"name": "style", "description": "How: warm (the default) or formal."}
            ]
        }]),
    )
}

/// `prompts/get`.
pub(super) fn get_prompt(params: &Value) -> Answer {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return invalid_params("Invalid params: prompts/get needs a string params.name");
    };
    if name != PROMPT_NAME {
        return invalid_params(format!("Invalid params: unknown prompt {name}"));
    }
    let empty = Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return invalid_params("Invalid params: arguments must be an object"),
    };
    let Some(who) = args.get("name").and_then(Value::as_str) else {
        return invalid_params("Invalid params: prompt greet needs a string argument name");
    };
    let style = match args.get("style") {
        None | Some(Value::Null) => "warm",
        Some(Value::String(s)) if s == "warm" || s == "formal" => s.as_str(),
        Some(_) => return invalid_params("Invalid params: style must be warm or formal"),
    };
    Answer::Result(json!({
        "description": format!("A {style} greeting for {who}"),
        "messages": [{
            "role": "user",
            "content": {"type": "text", "text": format!("Please greet {who} in a {style} way.")}
        }]
    }))
}

/// `resources/list` (the core serves it one resource per page, so clients page through it).
pub(super) fn list_resources(era: Era) -> Answer {
    modern_list(
        era,
        "resources",
        json!([
            {
                "uri": GREETING_URI,
                "name": "greeting",
                "description": "The reference server's greeting.",
                "mimeType": "text/plain"
            },
            {"uri": MOTTO_URI, "name": "motto", "mimeType": "text/plain"}
        ]),
    )
}

/// `resources/templates/list`.
pub(super) fn list_templates(era: Era) -> Answer {
    modern_list(
        era,
        "resourceTemplates",
        json!([{
            "uriTemplate": GREETING_TEMPLATE,
            "name": "personal-greeting",
            "description": "A greeting for name.",
            "mimeType": "text/plain"
        }]),
    )
}

/// The text of a resource this server has: the greeting, or an instance of the template.
pub(super) fn resource_text(uri: &str) -> Option<String> {
    if uri == GREETING_URI {
        return Some(GREETING_TEXT.to_owned());
    }
    if uri == MOTTO_URI {
        return Some(MOTTO_TEXT.to_owned());
    }
    let name = uri.strip_prefix(GREETING_URI)?.strip_prefix('/')?;
    (!name.is_empty() && !name.contains(['/', '?', '#'])).then(|| format!("Hello, {name}!"))
}

/// `resources/read`: an unknown URI is `-32602` with `data.uri` (`server/resources.mdx`).
pub(super) fn read_resource(era: Era, params: &Value) -> Answer {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return invalid_params("Invalid params: resources/read needs a string params.uri");
    };
    let Some(text) = resource_text(uri) else {
        return Answer::Error(
            200,
            ErrorObject {
                code: code::INVALID_PARAMS,
                message: "Resource not found".to_owned(),
                data: Some(json!({"uri": uri})),
            },
        );
    };
    let mut result = json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]});
    if era == Era::Modern {
        result["ttlMs"] = json!(0);
        result["cacheScope"] = json!("public");
    }
    Answer::Result(result)
}

/// The `touch` tool's definition.
pub(super) fn touch_definition() -> Value {
    json!({
        "name": "touch",
        "description": "Announces a change to every subscription that asked for it: list (tools, prompts or resources) or uri (a resource updated).",
        "inputSchema": {"type": "object", "properties": {
            "list": {"type": "string", "enum": ["tools", "prompts", "resources"]},
            "uri": {"type": "string"}
        }}
    })
}

impl McpServer {
    /// Ends every open subscription as a server does on its own initiative: each gets the
    /// graceful-closure result for its listen request, then its stream ends. Returns how many
    /// were told.
    pub fn end_subscriptions(&self) -> usize {
        lock(&self.responder)
            .as_ref()
            .map_or(0, |responder| responder.end_listens())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn template_instances_are_one_non_empty_path_segment() {
        assert_eq!(resource_text(GREETING_URI).as_deref(), Some(GREETING_TEXT));
        assert_eq!(
            resource_text("mcpwire-dev://greeting/Ada").as_deref(),
            Some("Hello, Ada!")
        );
        for bad in [
            "mcpwire-dev://greeting/",
            "mcpwire-dev://greeting/a/b",
            "mcpwire-dev://greetings",
            "mcpwire-dev://greetingAda",
            "file:///etc/passwd",
        ] {
            assert_eq!(resource_text(bad), None, "{bad}");
        }
    }
}
