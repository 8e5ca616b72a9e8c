//! Method routing between the core and the [`Application`] (skeleton).

use serde_json::{json, Value};

use crate::jsonrpc::{code, ErrorObject};
use crate::mcp::era::Era;
use crate::time::Instant;

use super::{Application, InputRequest, Server};

pub(super) fn serve_with<A: Application + ?Sized>(server: &mut Server, app: &mut A, now: Instant) {
    let _ = (server, app, now);
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

pub(super) fn resource_not_found(era: Era, uri: &str) -> ErrorObject {
    ErrorObject {
        code: match era {
            Era::Modern => code::INVALID_PARAMS,
            Era::Legacy => -32002,
        },
        message: format!("Resource not found: {uri}"),
        data: Some(json!({"uri": uri})),
    }
}
