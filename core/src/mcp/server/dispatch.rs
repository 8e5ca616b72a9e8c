//! Between the core and an [`Application`]: [`serve_with`] drains the server's events through
//! the trait, and the small rules both sides share (which capability an input needs, the
//! resource-not-found error of each era).

use serde_json::{json, Value};

use crate::jsonrpc::{code, ErrorObject};
use crate::mcp::era::Era;
use crate::time::Instant;

use super::{
    Application, Call, CallContext, InputRequest, Reply, Server, ServerEvent, TransportKind,
};

/// The most completion values one answer carries (`server/utilities/completion.mdx`).
const MAX_COMPLETION_VALUES: usize = 100;

fn list<T>(items: Result<Vec<T>, ErrorObject>, key: &str, to_value: fn(&T) -> Value) -> Reply {
    match items {
        Ok(items) => Reply::Result(json!({ key: items.iter().map(to_value).collect::<Vec<_>>() })),
        Err(e) => Reply::Error(e),
    }
}

pub(super) fn serve_with<A: Application + ?Sized>(server: &mut Server, app: &mut A, now: Instant) {
    // Bounded: each round either answers a request or consumes one event; events that a reply
    // creates (none do at once today) are served in the same call.
    let mut budget = 1_000_000usize;
    while let Some(event) = server.poll_event() {
        budget = budget.saturating_sub(1);
        if budget == 0 {
            break;
        }
        match event {
            ServerEvent::Request(incoming) => {
                let rid = incoming.context.request;
                let mut cx = CallContext::new(incoming.context);
                let reply = match &incoming.call {
                    Call::ListTools => list(app.list_tools(&cx), "tools", |t| t.to_value()),
                    Call::CallTool { name, arguments } => {
                        if cx.era == Era::Modern && cx.transport == TransportKind::Http {
                            let tool = app.tool(&cx, name);
                            if !matches!(
                                server.check_tool_headers(now, rid, tool.as_ref()),
                                Ok(true)
                            ) {
                                continue;
                            }
                        }
                        app.call_tool(&mut cx, name, arguments)
                    }
                    Call::ListResources => {
                        list(app.list_resources(&cx), "resources", |r| r.to_value())
                    }
                    Call::ListResourceTemplates => {
                        list(app.list_resource_templates(&cx), "resourceTemplates", |r| {
                            r.to_value()
                        })
                    }
                    Call::ReadResource { uri } => app.read_resource(&mut cx, uri),
                    Call::Subscribe { uri } => match app.subscribe(&cx, uri) {
                        Ok(()) => Reply::Result(json!({})),
                        Err(e) => Reply::Error(e),
                    },
                    Call::Unsubscribe { uri } => match app.unsubscribe(&cx, uri) {
                        Ok(()) => Reply::Result(json!({})),
                        Err(e) => Reply::Error(e),
                    },
                    Call::ListPrompts => list(app.list_prompts(&cx), "prompts", |p| p.to_value()),
                    Call::GetPrompt { name, arguments } => app.get_prompt(&mut cx, name, arguments),
                    Call::Complete(request) => match app.complete(&cx, request) {
                        Ok(c) => {
                            let total = c.values.len();
                            let values: Vec<String> =
                                c.values.into_iter().take(MAX_COMPLETION_VALUES).collect();
                            let mut completion = json!({"values": values});
                            if let Some(m) = completion.as_object_mut() {
                                if let Some(t) = c.total {
                                    m.insert("total".into(), json!(t));
                                }
                                if c.has_more || total > MAX_COMPLETION_VALUES {
                                    m.insert("hasMore".into(), json!(true));
                                }
                            }
                            Reply::Result(json!({"completion": completion}))
                        }
                        Err(e) => Reply::Error(e),
                    },
                    Call::Listen { uris } => match app.accept_resource_subscriptions(&cx, uris) {
                        Ok(accepted) => Reply::resource_subscriptions(accepted),
                        Err(e) => Reply::Error(e),
                    },
                    Call::Other { method, params } => app.other(&mut cx, method, params),
                };
                let notices = cx.take_notices();
                // Errors here are the application's slips (a progress without token, an
                // input on a list); the client has its answer either way.
                let _ = server.respond_with_notices(now, rid, notices, reply);
            }
            ServerEvent::Cancelled { request, .. } => app.cancelled(request),
            ServerEvent::SessionClosed { session, .. } => app.session_closed(&session),
            ServerEvent::SessionOpened { session } => app.session_opened(&session),
        }
    }
}

pub(super) fn required_capability(input: &InputRequest) -> Option<Value> {
    match input.method.as_str() {
        "elicitation/create" => {
            let mode = input
                .params
                .get("mode")
                .and_then(Value::as_str)
                .unwrap_or("form");
            Some(json!({"elicitation": {mode: {}}}))
        }
        "sampling/createMessage" => Some(json!({"sampling": {}})),
        "roots/list" => Some(json!({"roots": {}})),
        _ => None,
    }
}

/// The error for a resource that does not exist: `-32602` in `2026-07-28` (SEP-2164), `-32002`
/// before; `data.uri` names it either way.
pub fn resource_not_found(era: Era, uri: &str) -> ErrorObject {
    ErrorObject {
        code: match era {
            Era::Modern => code::INVALID_PARAMS,
            Era::Legacy => -32002,
        },
        message: format!("Resource not found: {uri}"),
        data: Some(json!({"uri": uri})),
    }
}
