//! A downstream `tools/call` to its upstream: [`route_call`].
//!
//! The name the client calls is one of:
//! - `search_tools`: answered by the gateway itself ([`Routed::Search`]; the driver runs
//!   [`Catalog::search`] and answers [`super::search_result`]);
//! - `call_tool`, whose `name` argument is an exposed name and `arguments` its arguments;
//! - an exposed name (`<server>__<tool>`, as listed).
//!
//! The meta-tools are served whatever the presentation (a client that kept them from an
//! earlier listing still works); they never clash with an exposed name (every exposed name
//! holds `__` or is 64 bytes long).
//!
//! # Errors, as the spec's tools page sorts them
//!
//! A name that is not a tool at all, or arguments that are not an object, is a protocol
//! error ([`RouteError::UnknownTool`], [`RouteError::InvalidArguments`]: JSON-RPC `-32602`),
//! as for any server. Everything the model can act on is a tool error ([`ToolRefusal`],
//! `isError: true`): `call_tool` naming an unknown tool, bad meta-tool arguments, and a
//! tool whose server is unavailable. An unavailable server's tools stay listed (the catalog
//! keeps what it last listed), so their names route, and the call says
//! `server X is unavailable: <reason>; its tools come back when it reconnects`. A name of a
//! server that never listed tools does not route; when it starts with `<id>__` of an
//! unavailable server, the error says that server is unavailable instead of "unknown tool".

use serde_json::Value;

use super::{Availability, ToolRefusal, Upstreams};
use crate::host::catalog::naming::SEPARATOR;
use crate::host::catalog::{Catalog, MetaCall, CALL_TOOL, SEARCH_TOOLS};
use crate::host::consent::ToolCall;
use crate::host::{ServerId, Trust};
use crate::jsonrpc::{code, ErrorObject};
use crate::mcp::meta::JsonObject;
use crate::mcp::results::Tool;

/// Where a downstream `tools/call` goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Routed {
    /// `search_tools`: the gateway answers from its catalog.
    Search {
        /// The query, as given.
        query: String,
        /// The most results.
        limit: usize,
    },
    /// An upstream tool (through the consent policy first: [`super::consent`]).
    Call(Box<UpstreamCall>),
}

/// One call of an upstream tool, as it will be sent.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamCall {
    /// The server.
    pub server: ServerId,
    /// The host's trust in it.
    pub trust: Trust,
    /// The tool, as the server listed it (its `name` is what goes upstream).
    pub tool: Tool,
    /// The name the downstream client called it by (or gave `call_tool`).
    pub exposed: String,
    /// The arguments, exactly as they will be sent (an object).
    pub arguments: Value,
    /// Whether it came through `call_tool`.
    pub via_call_tool: bool,
}

impl UpstreamCall {
    /// The call as the consent policy weighs it.
    pub fn as_tool_call(&self) -> ToolCall<'_> {
        ToolCall {
            server: &self.server,
            trust: self.trust,
            tool: &self.tool,
            exposed_name: &self.exposed,
            arguments: &self.arguments,
        }
    }
}

/// A `tools/call` the gateway answers without calling upstream.
#[derive(Clone, Debug, PartialEq)]
pub enum RouteError {
    /// The name is no tool the gateway lists: a JSON-RPC error (`-32602`).
    UnknownTool {
        /// The name.
        name: String,
        /// Why, for a person (which server is down, or what to call instead).
        detail: String,
    },
    /// The arguments are not a JSON object: a JSON-RPC error (`-32602`).
    InvalidArguments {
        /// The tool called.
        name: String,
        /// The JSON type given.
        got: &'static str,
    },
    /// A tool error (`isError: true`), for the model to act on.
    Refused(ToolRefusal),
}

impl RouteError {
    /// The JSON-RPC error to answer, for a protocol error; `None` for a tool error (answer
    /// [`ToolRefusal::to_call_result`] instead).
    pub fn to_error_object(&self) -> Option<ErrorObject> {
        match self {
            RouteError::UnknownTool { name, detail } => Some(ErrorObject {
                code: code::INVALID_PARAMS,
                message: format!("Unknown tool: {name} ({detail})"),
                data: None,
            }),
            RouteError::InvalidArguments { name, got } => Some(ErrorObject {
                code: code::INVALID_PARAMS,
                message: format!("the arguments of {name} must be a JSON object, got {got}"),
                data: None,
            }),
            RouteError::Refused(_) => None,
        }
    }
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

/// Routes a downstream `tools/call` of `name` with `arguments` (absent: `{}`).
pub fn route_call(
    catalog: &Catalog,
    upstreams: &Upstreams,
    name: &str,
    arguments: Option<&Value>,
) -> Result<Routed, RouteError> {
    let empty = Value::Object(JsonObject::new());
    let arguments = arguments.unwrap_or(&empty);
    if !arguments.is_object() {
        return Err(RouteError::InvalidArguments {
            name: name.to_owned(),
            got: type_name(arguments),
        });
    }
    match MetaCall::parse(name, arguments) {
        Err(e) => Err(RouteError::Refused(ToolRefusal::BadMetaCall {
            message: e.to_string(),
        })),
        Ok(Some(MetaCall::SearchTools { query, limit })) => Ok(Routed::Search { query, limit }),
        Ok(Some(MetaCall::CallTool { name, arguments })) => {
            if name == SEARCH_TOOLS || name == CALL_TOOL {
                return Err(RouteError::Refused(ToolRefusal::MetaToolThroughCallTool {
                    name,
                }));
            }
            match upstream(catalog, upstreams, &name, Value::Object(arguments), true) {
                Ok(call) => Ok(Routed::Call(Box::new(call))),
                Err(Missing::Unknown { .. }) => {
                    Err(RouteError::Refused(ToolRefusal::UnknownTool { name }))
                }
                Err(Missing::Refused(r)) => Err(RouteError::Refused(r)),
            }
        }
        Ok(None) => match upstream(catalog, upstreams, name, arguments.clone(), false) {
            Ok(call) => Ok(Routed::Call(Box::new(call))),
            Err(Missing::Unknown { detail }) => Err(RouteError::UnknownTool {
                name: name.to_owned(),
                detail,
            }),
            Err(Missing::Refused(r)) => Err(RouteError::Refused(r)),
        },
    }
}

enum Missing {
    Unknown { detail: String },
    Refused(ToolRefusal),
}

fn upstream(
    catalog: &Catalog,
    upstreams: &Upstreams,
    name: &str,
    arguments: Value,
    via_call_tool: bool,
) -> Result<UpstreamCall, Missing> {
    let Some((server, tool)) = catalog.route(name) else {
        // Not listed: perhaps a tool of a server that is down and never listed its tools.
        if let Some((id, reason)) = unavailable_prefix(upstreams, name) {
            return Err(Missing::Refused(ToolRefusal::Unavailable {
                server: id.clone(),
                reason: reason.to_owned(),
            }));
        }
        return Err(Missing::Unknown {
            detail: "tools/list gives the exposed names; search_tools finds tools".to_owned(),
        });
    };
    let Some(up) = upstreams.get(server) else {
        return Err(Missing::Refused(ToolRefusal::Unavailable {
            server: server.clone(),
            reason: "it is no longer in the config".to_owned(),
        }));
    };
    if let Availability::Unavailable { reason } = &up.availability {
        return Err(Missing::Refused(ToolRefusal::Unavailable {
            server: server.clone(),
            reason: reason.clone(),
        }));
    }
    Ok(UpstreamCall {
        server: server.clone(),
        trust: up.trust,
        tool: tool.clone(),
        exposed: name.to_owned(),
        arguments,
        via_call_tool,
    })
}

/// The server whose id is `name`'s prefix before `__` (the longest such id), if it is
/// unavailable.
fn unavailable_prefix<'a>(upstreams: &'a Upstreams, name: &str) -> Option<(&'a ServerId, &'a str)> {
    let (id, up) = upstreams
        .iter()
        .filter(|(id, _)| {
            name.strip_prefix(id.as_str())
                .is_some_and(|rest| rest.starts_with(SEPARATOR))
        })
        .max_by_key(|(id, _)| id.as_str().len())?;
    match &up.availability {
        Availability::Unavailable { reason } => Some((id, reason.as_str())),
        Availability::Ready => None,
    }
}
