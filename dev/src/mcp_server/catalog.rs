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

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use mcpwire_core::jsonrpc::{code, ErrorObject, Id};
use mcpwire_core::mcp::subscription::{ACKNOWLEDGED_METHOD, SUBSCRIPTION_ID_KEY};
use mcpwire_core::mcp::{Era, SubscriptionFilter};
use serde_json::{json, Map, Value};

use super::{invalid_params, lock, Answer, McpServer, Sink};

/// The prompt's name.
pub const PROMPT_NAME: &str = "greet";
/// The resource's URI.
pub const GREETING_URI: &str = "mcpwire-dev://greeting";
/// The resource template (RFC 6570 level 1): `{name}` is one path segment.
pub const GREETING_TEMPLATE: &str = "mcpwire-dev://greeting/{name}";
/// The resource's text.
pub const GREETING_TEXT: &str = "Hello from mcpwire's reference server!";
/// A second resource, listed on a second page of `resources/list` (so paging is exercised).
pub const MOTTO_URI: &str = "mcpwire-dev://motto";
/// Its text.
pub const MOTTO_TEXT: &str = "Bytes at the edge, decisions in the middle.";
/// The `nextCursor` of the first `resources/list` page.
pub(super) const RESOURCES_PAGE_2: &str = "resources-page-2";
/// How often a subscription checks whether its client went away or the server stopped.
const LISTEN_TICK: Duration = Duration::from_millis(50);

/// What a subscription's listen loop is sent.
#[derive(Debug)]
enum Push {
    /// A change notification to forward.
    Change(Value),
    /// End the subscription gracefully ([`McpServer::end_subscriptions`]).
    End,
}

/// The open subscriptions: where `touch` sends each change.
#[derive(Debug, Default)]
pub(super) struct Subscribers {
    next: u64,
    open: BTreeMap<u64, (SubscriptionFilter, Sender<Push>)>,
}

/// Removes its subscription from the server when the listen request ends, however it ends.
struct Registration<'s> {
    server: &'s McpServer,
    key: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        lock(&self.server.subscribers).open.remove(&self.key);
    }
}

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

/// `resources/list`: two pages of one resource each.
pub(super) fn list_resources(era: Era, params: &Value) -> Answer {
    match params.get("cursor") {
        None | Some(Value::Null) => {
            let mut page = modern_list(
                era,
                "resources",
                json!([{
                    "uri": GREETING_URI,
                    "name": "greeting",
                    "description": "The reference server's greeting.",
                    "mimeType": "text/plain"
                }]),
            );
            if let Answer::Result(r) = &mut page {
                r["nextCursor"] = json!(RESOURCES_PAGE_2);
            }
            page
        }
        Some(Value::String(c)) if c == RESOURCES_PAGE_2 => modern_list(
            era,
            "resources",
            json!([{
                "uri": MOTTO_URI,
                "name": "motto",
                "mimeType": "text/plain"
            }]),
        ),
        Some(_) => invalid_params("Invalid params: unknown cursor"),
    }
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

fn admits(filter: &SubscriptionFilter, note: &Value) -> bool {
    match note.get("method").and_then(Value::as_str) {
        Some("notifications/tools/list_changed") => filter.tools_list_changed,
        Some("notifications/prompts/list_changed") => filter.prompts_list_changed,
        Some("notifications/resources/list_changed") => filter.resources_list_changed,
        Some("notifications/resources/updated") => note
            .pointer("/params/uri")
            .and_then(Value::as_str)
            .is_some_and(|u| filter.resource_subscriptions.iter().any(|s| s == u)),
        _ => false,
    }
}

impl McpServer {
    /// Ends every open subscription as a server does on its own initiative: each gets the
    /// graceful-closure result for its listen request, then its stream ends. Returns how many
    /// were told.
    pub fn end_subscriptions(&self) -> usize {
        if let Some(responder) = lock(&self.responder).as_ref() {
            return responder.end_listens();
        }
        let subs = std::mem::take(&mut lock(&self.subscribers).open);
        subs.into_values()
            .filter(|(_, tx)| tx.send(Push::End).is_ok())
            .count()
    }

    /// The `touch` tool: sends one change to the subscriptions that asked for it.
    pub(super) fn touch(&self, args: &Map<String, Value>) -> Answer {
        let list = args.get("list").and_then(Value::as_str);
        let uri = args.get("uri").and_then(Value::as_str);
        let note = match (list, uri) {
            (Some(l @ ("tools" | "prompts" | "resources")), None) => {
                json!({"jsonrpc": "2.0", "method": format!("notifications/{l}/list_changed"), "params": {}})
            }
            (None, Some(u)) if resource_text(u).is_some() => json!({
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": u}
            }),
            (None, Some(u)) => return invalid_params(format!("Invalid params: no resource {u}")),
            _ => {
                return invalid_params(
                    "Invalid params: touch takes list (tools, prompts or resources) or uri, one of them",
                )
            }
        };
        let mut subs = lock(&self.subscribers);
        let mut delivered = 0;
        subs.open.retain(|_, (filter, tx)| {
            if !admits(filter, &note) {
                return true;
            }
            let sent = tx.send(Push::Change(note.clone())).is_ok();
            delivered += usize::from(sent);
            sent
        });
        Answer::Result(json!({
            "content": [{"type": "text", "text": format!("notified {delivered} subscription(s)")}],
            "structuredContent": {"delivered": delivered}
        }))
    }

    /// `subscriptions/listen`: acknowledges, then forwards changes until the client goes away
    /// or cancels (no answer), or the server ends it or stops (the graceful closure result).
    pub(super) fn listen(&self, id: &Id, params: &Value, sink: &mut dyn Sink) -> Answer {
        let requested: SubscriptionFilter = match params.get("notifications") {
            None | Some(Value::Null) => SubscriptionFilter::default(),
            Some(n) => match serde_json::from_value(n.clone()) {
                Ok(f) => f,
                Err(e) => {
                    return invalid_params(format!(
                        "Invalid params: notifications is not a subscription filter: {e}"
                    ))
                }
            },
        };
        let accepted = SubscriptionFilter {
            resource_subscriptions: requested
                .resource_subscriptions
                .iter()
                .filter(|u| resource_text(u).is_some())
                .cloned()
                .collect(),
            ..requested
        };
        let sid = serde_json::to_value(id).unwrap_or(Value::Null);
        let (tx, rx): (Sender<Push>, Receiver<Push>) = mpsc::channel();
        let _registration = {
            let mut subs = lock(&self.subscribers);
            let key = subs.next;
            subs.next += 1;
            subs.open.insert(key, (accepted.clone(), tx));
            Registration { server: self, key }
        };
        let ack = json!({
            "jsonrpc": "2.0",
            "method": ACKNOWLEDGED_METHOD,
            "params": {"_meta": {SUBSCRIPTION_ID_KEY: sid}, "notifications": accepted}
        });
        if !sink.notify(&ack) {
            return Answer::Nothing;
        }
        // The graceful closure: a result for the listen request, naming the subscription.
        let closure = || Answer::Result(json!({"_meta": {SUBSCRIPTION_ID_KEY: sid}}));
        loop {
            if sink.cancelled() {
                return Answer::Nothing;
            }
            if self.shutdown.is_stopped() {
                return closure();
            }
            match rx.recv_timeout(LISTEN_TICK) {
                Ok(Push::End) => return closure(),
                Ok(Push::Change(mut note)) => {
                    if let Some(p) = note.get_mut("params").and_then(Value::as_object_mut) {
                        p.insert("_meta".to_owned(), json!({SUBSCRIPTION_ID_KEY: sid}));
                    }
                    if !sink.notify(&note) {
                        return Answer::Nothing;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Answer::Nothing,
            }
        }
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

    #[test]
    fn resources_list_has_two_pages_and_refuses_an_unknown_cursor() {
        let Answer::Result(first) = list_resources(Era::Modern, &json!({})) else {
            panic!("first page");
        };
        assert_eq!(first["resources"][0]["uri"], GREETING_URI);
        let Answer::Result(second) =
            list_resources(Era::Modern, &json!({"cursor": first["nextCursor"]}))
        else {
            panic!("second page");
        };
        assert_eq!(second["resources"][0]["uri"], MOTTO_URI);
        assert!(second.get("nextCursor").is_none());
        assert!(matches!(
            list_resources(Era::Legacy, &json!({"cursor": "page-9"})),
            Answer::Error(200, e) if e.code == code::INVALID_PARAMS
        ));
    }

    #[test]
    fn a_subscription_admits_only_what_it_asked_for() {
        let f = SubscriptionFilter {
            tools_list_changed: true,
            resource_subscriptions: vec![GREETING_URI.into()],
            ..SubscriptionFilter::default()
        };
        let note = |m: &str, uri: Option<&str>| json!({"method": m, "params": uri.map(|u| json!({"uri": u})).unwrap_or(json!({}))});
        assert!(admits(&f, &note("notifications/tools/list_changed", None)));
        assert!(!admits(
            &f,
            &note("notifications/prompts/list_changed", None)
        ));
        assert!(!admits(
            &f,
            &note("notifications/resources/list_changed", None)
        ));
        assert!(admits(
            &f,
            &note("notifications/resources/updated", Some(GREETING_URI))
        ));
        assert!(!admits(
            &f,
            &note(
                "notifications/resources/updated",
                Some("mcpwire-dev://greeting/Ada")
            )
        ));
    }
}
