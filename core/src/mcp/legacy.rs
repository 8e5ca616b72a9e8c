//! The legacy era (`2025-11-25` and earlier): the `initialize` handshake and, on Streamable
//! HTTP, the session (`mcp-2025-11-25/basic/lifecycle.mdx`, `basic/transports.mdx`).
//!
//! [`LegacySession`] is a sans-IO state machine. Its inputs are response bodies (the JSON text
//! of one JSON-RPC message), response headers and HTTP statuses; its outputs are request texts
//! with the headers to send ([`Outgoing`]). On stdio the headers are simply not used.
//!
//! 1. [`LegacySession::initialize`] builds the `initialize` request: `protocolVersion`
//!    [`LEGACY_PROTOCOL_VERSION`], the client's capabilities and `clientInfo`
//!    ("Initialization").
//! 2. [`LegacySession::handle_initialize_response`] reads the `InitializeResult`. The server
//!    answers with the version it chose; a version this client does not know is refused
//!    ([`LegacyError::UnsupportedVersion`]: "If the client does not support the version in the
//!    server's response, it SHOULD disconnect"). An `Mcp-Session-Id` response header is kept
//!    (it must be visible ASCII, 0x21-0x7E). The output is `notifications/initialized`.
//! 3. Every later request or notification ([`LegacySession::request`],
//!    [`LegacySession::notification`]) carries `Mcp-Session-Id` (when the server gave one) and
//!    `MCP-Protocol-Version: <negotiated>` ("Session Management", "Protocol Version Header").
//! 4. A `404 Not Found` to a request that carried the current session id means the session
//!    ended: [`LegacySession::handle_status`] returns to the idle phase, and the client sends a
//!    new `initialize` without a session id, then resends with a new request id.
//!
//! The session id is a credential for the session: it is never printed by `Debug` or in an
//! error.

use std::fmt;

use serde_json::{Map, Value};

use super::discover::ServerCapabilities;
use super::headers::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use super::meta::{request_text, ClientCapabilities, Implementation, JsonObject};
use super::LEGACY_PROTOCOL_VERSION;
use crate::http::Headers;
use crate::jsonrpc::{Id, Message, VERSION};

/// The `initialize` method.
pub const INITIALIZE: &str = "initialize";
/// The notification that ends the handshake.
pub const INITIALIZED: &str = "notifications/initialized";

/// The legacy versions this client accepts from a server, newest first.
pub const KNOWN_LEGACY_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// One message to send: its JSON text, and the HTTP headers that go with it (unused on stdio).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The JSON-RPC message text.
    pub body: String,
    /// `Content-Type`, `Accept`, and once initialized `Mcp-Session-Id` and
    /// `MCP-Protocol-Version`.
    pub headers: Headers,
}

/// What the server answered to `initialize`.
#[derive(Clone, Debug, PartialEq)]
pub struct Negotiated {
    /// The protocol version the server chose (one of [`KNOWN_LEGACY_VERSIONS`]).
    pub protocol_version: String,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's self-reported identity (`None` if absent or malformed: display only).
    pub server_info: Option<Implementation>,
    /// The server's instructions.
    pub instructions: Option<String>,
}

/// The phase of the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing sent yet, or the session ended: send `initialize`.
    Idle,
    /// `initialize` sent, waiting for its response.
    Initializing,
    /// Handshake done: requests may be sent.
    Ready,
}

/// What an HTTP status means for the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStatus {
    /// Not a session matter.
    Unaffected,
    /// `404` to a request with the current session id: the session ended. The session is now
    /// idle: initialize again, then resend the request with a new id.
    Expired,
    /// `404` to a request with an older session id (the session was already renewed): resend
    /// with a new id and the current headers.
    Stale,
}

/// Why the legacy handshake failed or a request could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LegacyError {
    /// A response arrived while no `initialize` was outstanding (caller error).
    #[error("no initialize request is outstanding")]
    NotInitializing,
    /// A request was built before the handshake finished (caller error).
    #[error("the legacy handshake has not finished: send initialize first")]
    NotReady,
    /// The text is not a JSON-RPC response.
    #[error("initialize response is not a JSON-RPC response: {0}")]
    Malformed(String),
    /// The response answers another request (caller error: route by id).
    #[error("response id {got} does not answer the initialize request {expected}")]
    UnexpectedId {
        /// The initialize request's id.
        expected: Id,
        /// The id in the response.
        got: String,
    },
    /// The server refused `initialize`.
    #[error("the server refused initialize: {code} {message}")]
    Rejected {
        /// The error code.
        code: i64,
        /// The error message (at most 512 characters).
        message: String,
        /// The error data, if any (may name the versions a modern-only server supports).
        data: Option<String>,
    },
    /// A required member of the `InitializeResult` is absent or of the wrong type.
    #[error("InitializeResult member {0:?} is missing or invalid")]
    InvalidResult(&'static str),
    /// The server chose a version this client does not speak: disconnect.
    #[error("the server chose protocol version {offered:?}; this client speaks {known:?}")]
    UnsupportedVersion {
        /// The server's version.
        offered: String,
        /// The versions this client knows.
        known: Vec<String>,
    },
    /// The `Mcp-Session-Id` header is not visible ASCII (its value is not repeated).
    #[error("the server's Mcp-Session-Id header is not visible ASCII (0x21-0x7E)")]
    InvalidSessionId,
    /// Params are neither an object nor `null` (caller error).
    #[error("params of {0:?} must be a JSON object")]
    ParamsNotObject(String),
}

enum State {
    Idle,
    Initializing(Id),
    Ready(Box<Negotiated>),
}

/// The legacy handshake and session of one server.
pub struct LegacySession {
    client_info: Implementation,
    capabilities: ClientCapabilities,
    state: State,
    session_id: Option<String>,
    /// The session id before the last `initialize`, still redacted from error text.
    previous_session_id: Option<String>,
}

impl fmt::Debug for LegacySession {
    /// The session id is replaced by `<redacted>`: it is a credential for the session.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LegacySession")
            .field("client_info", &self.client_info)
            .field("capabilities", &self.capabilities)
            .field("phase", &self.phase())
            .field("negotiated", &self.negotiated())
            .field(
                "session_id",
                &self.session_id.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

fn base_headers() -> Headers {
    let mut h = Headers::new();
    // Constant, valid names and values: these cannot fail.
    let _ = h.append("Content-Type", "application/json");
    let _ = h.append("Accept", "application/json, text/event-stream");
    h
}

impl LegacySession {
    /// `text` with every occurrence of the current session id replaced.
    fn redact(&self, text: String) -> String {
        let mut text = text;
        for sid in [&self.session_id, &self.previous_session_id]
            .into_iter()
            .flatten()
        {
            if !sid.is_empty() && text.contains(sid.as_str()) {
                text = text.replace(sid.as_str(), "<session id>");
            }
        }
        text
    }
}

fn session_id_ok(v: &str) -> bool {
    !v.is_empty() && v.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

fn object_params(method: &str, params: Value) -> Result<Option<JsonObject>, LegacyError> {
    match params {
        Value::Null => Ok(None),
        Value::Object(m) => Ok(Some(m)),
        _ => Err(LegacyError::ParamsNotObject(method.to_owned())),
    }
}

impl LegacySession {
    /// A session for a client with this identity and these capabilities (what the host
    /// supports; in the legacy era they are declared once, at `initialize`).
    pub fn new(client_info: Implementation, capabilities: ClientCapabilities) -> Self {
        LegacySession {
            client_info,
            capabilities,
            state: State::Idle,
            session_id: None,
            previous_session_id: None,
        }
    }

    /// The phase of the handshake.
    pub fn phase(&self) -> Phase {
        match self.state {
            State::Idle => Phase::Idle,
            State::Initializing(_) => Phase::Initializing,
            State::Ready(_) => Phase::Ready,
        }
    }

    /// What the server answered to `initialize`, once ready.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        match &self.state {
            State::Ready(n) => Some(n),
            _ => None,
        }
    }

    /// Whether the server gave a session id.
    pub fn has_session(&self) -> bool {
        self.session_id.is_some()
    }

    /// The `initialize` request with id `id`. Starts (or restarts) the handshake: any session id
    /// is dropped, as a new session is requested without one.
    pub fn initialize(&mut self, id: Id) -> Outgoing {
        let mut params = Map::new();
        params.insert(
            "protocolVersion".to_owned(),
            Value::from(LEGACY_PROTOCOL_VERSION),
        );
        params.insert("capabilities".to_owned(), self.capabilities.to_value());
        params.insert(
            "clientInfo".to_owned(),
            serde_json::to_value(&self.client_info).unwrap_or(Value::Null),
        );
        let body = request_text(&id, INITIALIZE, Some(&params));
        if let Some(old) = self.session_id.take() {
            self.previous_session_id = Some(old);
        }
        self.state = State::Initializing(id);
        Outgoing {
            body,
            headers: base_headers(),
        }
    }

    /// Reads the response to `initialize` (its JSON text, and the HTTP response headers; empty
    /// on stdio). On success the session is ready and the output is
    /// `notifications/initialized`. A refusal or an unknown version returns to [`Phase::Idle`];
    /// a message that is not the awaited response leaves the state as it was.
    ///
    /// Text taken from the response into an error has the current session id replaced with
    /// `<session id>`: errors are logged, and the session id works like a credential.
    pub fn handle_initialize_response(
        &mut self,
        headers: &Headers,
        body: &str,
    ) -> Result<Outgoing, LegacyError> {
        let State::Initializing(expected) = &self.state else {
            return Err(LegacyError::NotInitializing);
        };
        let message =
            Message::parse(body).map_err(|e| LegacyError::Malformed(self.redact(e.to_string())))?;
        let result = match message {
            Message::Response { id, result } if &id == expected => result,
            Message::Error { id, error } if id.as_ref().is_none_or(|id| id == expected) => {
                // The server's own text may echo the session id: redact it before keeping it.
                let message = self
                    .redact(error.message.clone())
                    .chars()
                    .take(512)
                    .collect();
                let data = error
                    .data
                    .as_ref()
                    .map(|d| self.redact(d.to_string()).chars().take(512).collect());
                self.state = State::Idle;
                return Err(LegacyError::Rejected {
                    code: error.code,
                    message,
                    data,
                });
            }
            Message::Response { id, .. } | Message::Error { id: Some(id), .. } => {
                return Err(LegacyError::UnexpectedId {
                    expected: expected.clone(),
                    got: id.to_string(),
                })
            }
            _ => {
                return Err(LegacyError::Malformed(
                    "a request or notification, not the initialize response".to_owned(),
                ))
            }
        };
        let negotiated = match parse_initialize_result(result.get()) {
            Ok(n) => n,
            Err(e) => {
                self.state = State::Idle;
                return Err(e);
            }
        };
        let session_id = match headers.get(SESSION_ID_HEADER) {
            None => None,
            Some(v) if session_id_ok(v) => Some(v.to_owned()),
            Some(_) => {
                self.state = State::Idle;
                return Err(LegacyError::InvalidSessionId);
            }
        };
        self.session_id = session_id;
        self.state = State::Ready(Box::new(negotiated));
        self.notification(INITIALIZED, Value::Null)
    }

    /// The headers every message after `initialize` carries: `Content-Type`, `Accept`,
    /// `Mcp-Session-Id` (when the server gave one) and `MCP-Protocol-Version`.
    pub fn session_headers(&self) -> Result<Headers, LegacyError> {
        let State::Ready(n) = &self.state else {
            return Err(LegacyError::NotReady);
        };
        let mut h = base_headers();
        if let Some(sid) = &self.session_id {
            h.set(SESSION_ID_HEADER, sid.clone())
                .map_err(|_| LegacyError::InvalidSessionId)?;
        }
        h.set(PROTOCOL_VERSION_HEADER, n.protocol_version.clone())
            .map_err(|_| LegacyError::InvalidResult("protocolVersion"))?;
        Ok(h)
    }

    /// A request in the session (params `null` are omitted).
    pub fn request(&self, id: &Id, method: &str, params: Value) -> Result<Outgoing, LegacyError> {
        let headers = self.session_headers()?;
        let params = object_params(method, params)?;
        Ok(Outgoing {
            body: request_text(id, method, params.as_ref()),
            headers,
        })
    }

    /// A notification in the session (params `null` are omitted).
    pub fn notification(&self, method: &str, params: Value) -> Result<Outgoing, LegacyError> {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            jsonrpc: &'static str,
            method: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            params: Option<JsonObject>,
        }
        let headers = self.session_headers()?;
        let params = object_params(method, params)?;
        let body = serde_json::to_string(&Out {
            jsonrpc: VERSION,
            method,
            params,
        })
        .unwrap_or_default();
        Ok(Outgoing { body, headers })
    }

    /// What an HTTP status of a response means for the session; `sent` are the headers of the
    /// request it answers. A `404` to the current session id ends the session.
    pub fn handle_status(&mut self, status: u16, sent: &Headers) -> SessionStatus {
        if status != 404 {
            return SessionStatus::Unaffected;
        }
        let Some(sent_sid) = sent.get(SESSION_ID_HEADER) else {
            return SessionStatus::Unaffected;
        };
        if self.session_id.as_deref() == Some(sent_sid) {
            self.session_id = None;
            self.state = State::Idle;
            SessionStatus::Expired
        } else {
            SessionStatus::Stale
        }
    }
}

/// Reads an `InitializeResult`; only versions in [`KNOWN_LEGACY_VERSIONS`] are accepted.
fn parse_initialize_result(json: &str) -> Result<Negotiated, LegacyError> {
    let v: Value = serde_json::from_str(json).map_err(|e| LegacyError::Malformed(e.to_string()))?;
    let Value::Object(m) = v else {
        return Err(LegacyError::InvalidResult("result"));
    };
    let protocol_version = m
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or(LegacyError::InvalidResult("protocolVersion"))?
        .to_owned();
    if !KNOWN_LEGACY_VERSIONS.contains(&protocol_version.as_str()) {
        return Err(LegacyError::UnsupportedVersion {
            offered: protocol_version.chars().take(64).collect(),
            known: KNOWN_LEGACY_VERSIONS
                .iter()
                .map(|v| (*v).to_owned())
                .collect(),
        });
    }
    let capabilities = match m.get("capabilities") {
        Some(c @ Value::Object(_)) => serde_json::from_value(c.clone())
            .map_err(|_| LegacyError::InvalidResult("capabilities"))?,
        _ => return Err(LegacyError::InvalidResult("capabilities")),
    };
    let server_info = m
        .get("serverInfo")
        .and_then(|s| serde_json::from_value(s.clone()).ok());
    let instructions = m
        .get("instructions")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Negotiated {
        protocol_version,
        capabilities,
        server_info,
        instructions,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const INIT_REQUEST: &str =
        include_str!("../../../fixtures/mcp/examples/legacy-2025-11-25/initialize-request.json");
    const INIT_RESPONSE: &str = include_str!(
        "../../../fixtures/mcp/examples/legacy-2025-11-25/initialize-result-response.json"
    );
    const INITIALIZED_NOTE: &str = include_str!(
        "../../../fixtures/mcp/examples/legacy-2025-11-25/initialized-notification.json"
    );
    const INIT_ERROR: &str = include_str!(
        "../../../fixtures/mcp/examples/legacy-2025-11-25/initialize-error-unsupported-version.json"
    );

    fn session() -> LegacySession {
        LegacySession::new(
            Implementation::new("mcpwire", "0.1.0"),
            ClientCapabilities::none().with_elicitation_form(),
        )
    }

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (n, v) in pairs {
            h.append(*n, *v).unwrap();
        }
        h
    }

    fn response(version: &str) -> String {
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"}
        }})
        .to_string()
    }

    fn ready(sid: Option<&str>) -> LegacySession {
        let mut s = session();
        s.initialize(Id::from(1));
        let h = sid.map_or_else(Headers::new, |v| headers(&[("mcp-session-id", v)]));
        s.handle_initialize_response(&h, &response("2025-11-25"))
            .unwrap();
        s
    }

    /// mcp-2025-11-25/basic/lifecycle.mdx, "Initialization": the spec's initialize request is
    /// reproduced from the same capabilities and clientInfo.
    #[test]
    fn initialize_request_reproduces_the_spec_example() {
        let spec: Value = serde_json::from_str(INIT_REQUEST).unwrap();
        let params = &spec["params"];
        let mut s = LegacySession::new(
            serde_json::from_value(params["clientInfo"].clone()).unwrap(),
            serde_json::from_value(params["capabilities"].clone()).unwrap(),
        );
        let out = s.initialize(Id::from(1));
        assert_eq!(serde_json::from_str::<Value>(&out.body).unwrap(), spec);
        assert_eq!(s.phase(), Phase::Initializing);
        assert!(!out.headers.contains(SESSION_ID_HEADER));
        assert!(!out.headers.contains(PROTOCOL_VERSION_HEADER));
    }

    /// mcp-2025-11-25/basic/lifecycle.mdx, "Initialization": the exact initialize request.
    #[test]
    fn initialize_request_body_snapshot() {
        let out = session().initialize(Id::from(1));
        insta::assert_snapshot!(out.body);
    }

    /// mcp-2025-11-25/basic/lifecycle.mdx, "Initialization": after the result, the client
    /// sends notifications/initialized.
    #[test]
    fn initialize_result_is_followed_by_the_initialized_notification() {
        let mut s = session();
        s.initialize(Id::from(1));
        let out = s
            .handle_initialize_response(&Headers::new(), INIT_RESPONSE)
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&out.body).unwrap(),
            serde_json::from_str::<Value>(INITIALIZED_NOTE).unwrap()
        );
        assert_eq!(s.phase(), Phase::Ready);
        let n = s.negotiated().unwrap();
        assert_eq!(n.protocol_version, "2025-11-25");
        assert_eq!(n.server_info.as_ref().unwrap().name, "ExampleServer");
        assert_eq!(
            n.capabilities.resources.as_ref().unwrap().subscribe,
            Some(true)
        );
        assert!(n.capabilities.other.contains_key("tasks"));
        assert_eq!(
            n.instructions.as_deref(),
            Some("Optional instructions for the client")
        );
    }

    /// mcp-2025-11-25/basic/lifecycle.mdx, "Version Negotiation": an older known version the
    /// server chose is accepted, an unknown one refused.
    #[test]
    fn only_versions_the_client_knows_are_accepted() {
        let mut s = session();
        s.initialize(Id::from(1));
        s.handle_initialize_response(&Headers::new(), &response("2025-03-26"))
            .unwrap();
        assert_eq!(s.negotiated().unwrap().protocol_version, "2025-03-26");

        let mut s = session();
        s.initialize(Id::from(1));
        let e = s
            .handle_initialize_response(&Headers::new(), &response("2099-01-01"))
            .unwrap_err();
        assert_eq!(
            e,
            LegacyError::UnsupportedVersion {
                offered: "2099-01-01".into(),
                known: KNOWN_LEGACY_VERSIONS
                    .iter()
                    .map(|v| (*v).to_owned())
                    .collect()
            }
        );
        assert_eq!(s.phase(), Phase::Idle);
        assert_eq!(
            s.request(&Id::from(2), "tools/list", Value::Null),
            Err(LegacyError::NotReady)
        );
    }

    /// mcp-2025-11-25/basic/lifecycle.mdx, "Error Handling": a refused initialize is a typed
    /// error carrying the server's data.
    #[test]
    fn refused_initialize_is_a_typed_error() {
        let mut s = session();
        s.initialize(Id::from(1));
        let e = s
            .handle_initialize_response(&Headers::new(), INIT_ERROR)
            .unwrap_err();
        let LegacyError::Rejected { code, data, .. } = e else {
            panic!("expected Rejected")
        };
        assert_eq!(code, -32602);
        assert!(data.unwrap().contains("2024-11-05"));
        assert_eq!(s.phase(), Phase::Idle);
    }

    /// Module rule: only the response to the initialize id completes the handshake.
    #[test]
    fn a_response_to_another_id_does_not_complete_the_handshake() {
        let mut s = session();
        s.initialize(Id::from(7));
        assert!(matches!(
            s.handle_initialize_response(&Headers::new(), &response("2025-11-25")),
            Err(LegacyError::UnexpectedId { .. })
        ));
        assert_eq!(s.phase(), Phase::Initializing);
        let mut idle = session();
        assert_eq!(
            idle.handle_initialize_response(&Headers::new(), &response("2025-11-25")),
            Err(LegacyError::NotInitializing)
        );
        assert!(matches!(
            s.handle_initialize_response(&Headers::new(), "not json"),
            Err(LegacyError::Malformed(_))
        ));
        let missing =
            json!({"jsonrpc": "2.0", "id": 7, "result": {"protocolVersion": "2025-11-25"}});
        assert_eq!(
            s.handle_initialize_response(&Headers::new(), &missing.to_string()),
            Err(LegacyError::InvalidResult("capabilities"))
        );
    }

    /// mcp-2025-11-25/basic/transports.mdx, "Session Management" and "Protocol Version
    /// Header": every later request carries the session id and the negotiated version.
    #[test]
    fn later_requests_carry_the_session_id_and_the_negotiated_version() {
        let s = ready(Some("1868a90c"));
        let out = s.request(&Id::from(2), "tools/list", Value::Null).unwrap();
        assert_eq!(out.headers.get("mcp-session-id"), Some("1868a90c"));
        assert_eq!(out.headers.get("mcp-protocol-version"), Some("2025-11-25"));
        assert_eq!(
            out.headers.get("accept"),
            Some("application/json, text/event-stream")
        );
        assert_eq!(
            out.body,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#
        );
        let n = s
            .notification("notifications/cancelled", json!({"requestId": 2}))
            .unwrap();
        assert_eq!(n.headers.get("mcp-session-id"), Some("1868a90c"));
        assert!(matches!(
            s.request(&Id::from(3), "tools/call", json!([1])),
            Err(LegacyError::ParamsNotObject(_))
        ));
    }

    /// mcp-2025-11-25/basic/transports.mdx, "Session Management": a server may assign no
    /// session; then no session header is sent, the version header still is.
    #[test]
    fn without_a_session_id_only_the_version_header_is_added() {
        let s = ready(None);
        let out = s.request(&Id::from(2), "tools/list", json!({})).unwrap();
        assert!(!out.headers.contains(SESSION_ID_HEADER));
        assert_eq!(out.headers.get(PROTOCOL_VERSION_HEADER), Some("2025-11-25"));
        insta::assert_snapshot!(format!("{}\n{:?}", out.body, out.headers.to_multimap()));
    }

    /// mcp-2025-11-25/basic/transports.mdx, "Session Management": session ids are visible
    /// ASCII, and are never printed.
    #[test]
    fn session_id_must_be_visible_ascii_and_is_never_printed() {
        let mut s = session();
        s.initialize(Id::from(1));
        assert_eq!(
            s.handle_initialize_response(
                &headers(&[(SESSION_ID_HEADER, "a b")]),
                &response("2025-11-25")
            ),
            Err(LegacyError::InvalidSessionId)
        );
        let s = ready(Some("secret-session-123"));
        let debug = format!("{s:?}");
        assert!(!debug.contains("secret-session-123"));
        assert!(debug.contains("<redacted>"));
    }

    /// mcp-2025-11-25/basic/transports.mdx, "Session Management" item 4: a 404 to a request
    /// with the session id means start a new session with a new initialize, without the id.
    #[test]
    fn not_found_with_the_session_id_means_reinitialize() {
        let mut s = ready(Some("old"));
        let sent = s.request(&Id::from(2), "tools/list", Value::Null).unwrap();
        assert_eq!(
            s.handle_status(200, &sent.headers),
            SessionStatus::Unaffected
        );
        assert_eq!(s.handle_status(404, &sent.headers), SessionStatus::Expired);
        assert_eq!(s.phase(), Phase::Idle);
        assert!(!s.has_session());
        let init = s.initialize(Id::from(3));
        assert!(!init.headers.contains(SESSION_ID_HEADER));
        s.handle_initialize_response(
            &headers(&[(SESSION_ID_HEADER, "new")]),
            &response("2025-11-25").replace("\"id\":1", "\"id\":3"),
        )
        .unwrap();
        // A late 404 for the old session does not end the new one.
        assert_eq!(s.handle_status(404, &sent.headers), SessionStatus::Stale);
        assert_eq!(s.phase(), Phase::Ready);
        // A 404 without a session id is not a session matter.
        assert_eq!(
            s.handle_status(404, &Headers::new()),
            SessionStatus::Unaffected
        );
    }
}
