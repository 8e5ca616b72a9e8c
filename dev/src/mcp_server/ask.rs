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

impl McpServer {
    /// The `ask` tool: an MRTR elicitation (`form`: `name`, the default; `profile`, a form with
    /// integer, enum, boolean and number fields and defaults; `login`, a form asking for a
    /// password; `url`, a URL-mode elicitation of a page on this server), completed on the
    /// retry carrying `inputResponses`. Each answer is recorded in
    /// [`Stats::elicitation_answers`].
    pub(super) fn ask(
        &self,
        params: &Value,
        args: &Map<String, Value>,
        caps: Option<&ClientCapabilities>,
        sink: &dyn Sink,
    ) -> Answer {
        let form = match args.get("form") {
            None | Some(Value::Null) => "name",
            Some(Value::String(f)) if ASK_FORMS.contains(&f.as_str()) => f.as_str(),
            Some(_) => {
                return invalid_params(format!(
                    "Invalid params: form must be one of {}",
                    ASK_FORMS.join(", ")
                ))
            }
        };
        let default_question = match form {
            "profile" => "Tell us about yourself.",
            "login" => "Log in to the demo service.",
            "url" => "Authorize the demo service on its page.",
            _ => "What is your name?",
        };
        let question = match args.get("question") {
            None | Some(Value::Null) => default_question.to_owned(),
            Some(Value::String(q)) => q.clone(),
            Some(_) => return invalid_params("Invalid params: question must be a string"),
        };
        let url_mode = form == "url";
        let supported = caps.is_some_and(if url_mode {
            ClientCapabilities::supports_elicitation_url
        } else {
            ClientCapabilities::supports_elicitation_form
        });
        if !supported {
            let mode = if url_mode { "url" } else { "form" };
            return Answer::Error(
                400,
                ErrorObject {
                    code: code::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message: format!(
                        "Missing required client capability: ask needs elicitation ({mode} mode)"
                    ),
                    data: Some(json!({"requiredCapabilities": {"elicitation": {mode: {}}}})),
                },
            );
        }
        let key = form;
        let state = format!("{ASK_STATE_PREFIX}{form}/{}", hex(question.as_bytes()));
        let answer = params
            .get("inputResponses")
            .and_then(|r| r.get(key))
            .filter(|_| params.get("requestState").is_some());
        if let Some(answer) = answer {
            if params.get("requestState").and_then(Value::as_str) != Some(state.as_str()) {
                return invalid_params(
                    "Invalid params: requestState is not one this server issued for this question",
                );
            }
            let action = answer.get("action").and_then(Value::as_str);
            let content = answer.get("content");
            lock(&self.stats)
                .elicitation_answers
                .push(ElicitationAnswer {
                    form: form.to_owned(),
                    action: action.unwrap_or("(none)").to_owned(),
                    content: content.cloned(),
                });
            match (form, action) {
                ("name", Some("accept")) => {
                    if let Some(name) = content.and_then(|c| c.get("name")).and_then(Value::as_str)
                    {
                        return Answer::Result(json!({
                            "content": [{"type": "text", "text": format!("Hello, {name}!")}],
                            "structuredContent": {"name": name}
                        }));
                    }
                }
                ("name", Some("decline" | "cancel")) => {
                    return Answer::Result(json!({
                        "content": [{"type": "text", "text": "No name given."}]
                    }))
                }
                ("url", Some("accept")) => {
                    return Answer::Result(json!({
                        "content": [{"type": "text", "text": "Consent recorded: finish on the page."}]
                    }))
                }
                (_, Some("accept")) => {
                    if let Some(c) = content.filter(|c| c.is_object()) {
                        return Answer::Result(json!({
                            "content": [{"type": "text", "text": format!("Received {c}")}],
                            "structuredContent": c
                        }));
                    }
                }
                (_, Some(a @ ("decline" | "cancel"))) => {
                    let word = if a == "decline" {
                        "Declined"
                    } else {
                        "Cancelled"
                    };
                    return Answer::Result(json!({
                        "content": [{"type": "text", "text": format!("{word}.")}]
                    }));
                }
                // An unusable answer: ask again, as the MRTR rules suggest.
                _ => {}
            }
        }
        let host = sink
            .request_headers()
            .and_then(|h| h.get("Host"))
            .unwrap_or("127.0.0.1");
        let request = ask_request(form, &question, &format!("http://{host}"));
        Answer::Result(json!({
            "resultType": "input_required",
            "inputRequests": {
                key: {"method": "elicitation/create", "params": request}
            },
            "requestState": state
        }))
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
