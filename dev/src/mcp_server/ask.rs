//! The `ask` tool: MRTR elicitations (a form asking for a name, a profile form, a login form
//! with a password field, a URL-mode page on this server) and the answers it received.

use super::*;
/// The prefix of the `ask` tool's `requestState`. Tampering with the state can only change the
/// question asked, so it carries no integrity protection (the MRTR rules allow that).
pub(super) const ASK_STATE_PREFIX: &str = "ask/v1/";

/// The path of the page the `ask` tool's URL-mode elicitation points at (on the server's own
/// HTTP address). A client must only show that URL, never open or fetch it itself: every `GET`
/// of it is counted in [`Stats::elicit_url_fetches`].
pub const ELICIT_URL_PATH: &str = "/elicit/consent";

/// The forms the `ask` tool can ask (its `form` argument).
pub const ASK_FORMS: [&str; 4] = ["name", "profile", "login", "url"];

/// One answer the `ask` tool received on an MRTR retry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElicitationAnswer {
    /// Which form was asked (one of [`ASK_FORMS`]).
    pub form: String,
    /// `accept`, `decline`, `cancel`, or what else the client sent.
    pub action: String,
    /// The content sent with it, if any.
    pub content: Option<Value>,
}

/// The `elicitation/create` params of `form` (one of [`ASK_FORMS`]); `base` is the server's
/// own `http://HOST:PORT` for the URL mode.
pub(super) fn ask_request(form: &str, question: &str, base: &str) -> Value {
    let schema = |properties: Value, required: Value| json!({"type": "object", "properties": properties, "required": required});
    match form {
        "profile" => json!({
            "mode": "form",
            "message": question,
            "requestedSchema": schema(json!({
                "name": {"type": "string", "title": "Name", "description": "Your full name"},
                "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150, "default": 30},
                "color": {"type": "string", "title": "Favourite colour", "enum": ["red", "green", "blue"], "default": "green"},
                "newsletter": {"type": "boolean", "title": "Newsletter", "default": false},
                "height": {"type": "number", "title": "Height in metres", "minimum": 0}
            }), json!(["name", "age", "color"]))
        }),
        "login" => json!({
            "mode": "form",
            "message": question,
            "requestedSchema": schema(json!({
                "username": {"type": "string", "title": "User name"},
                "password": {"type": "string", "title": "Password"}
            }), json!(["username", "password"]))
        }),
        "url" => json!({
            "mode": "url",
            "message": question,
            "url": format!("{base}{ELICIT_URL_PATH}?session=demo"),
            "elicitationId": "ask-url-1"
        }),
        _ => json!({
            "mode": "form",
            "message": question,
            "requestedSchema": schema(
                json!({"name": {"type": "string", "title": "Name"}}),
                json!(["name"])
            )
        }),
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
