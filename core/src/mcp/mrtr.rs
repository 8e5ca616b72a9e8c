//! Multi round-trip requests (`basic/patterns/mrtr.mdx`): a server answers `tools/call`,
//! `prompts/get` or `resources/read` with `resultType: "input_required"`, the client gathers the
//! inputs it asks for and retries the original request with a new id.
//!
//! - [`classify_result`] tells a complete result from an [`InputRequiredResult`] and refuses
//!   `input_required` on any other method;
//! - [`InputRequiredResult::parse`] reads the result: `inputRequests` (typed
//!   [`InputRequest`]s, keyed) and `requestState`, kept as the exact JSON text received;
//! - [`MrtrRound`] is the state of one original request across its rounds: it checks each input
//!   request against the capabilities the host declared, hands the requests out as
//!   [`InputRequestEvent`]s, takes the host's [`InputAnswer`]s (every key must be answered,
//!   elicitation answers are validated), and builds the retry ([`RetryRequest`]): the original
//!   params plus `inputResponses` and the byte-exact `requestState`, under the new id the caller
//!   supplies, never cacheable. A round limit (default [`DEFAULT_MAX_ROUNDS`]) stops a server
//!   that never finishes.
//!
//! Nothing is shared between rounds of different requests: each original request has its own
//! [`MrtrRound`], and each round's answers and state go only into that round's retry.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::jsonrpc::Id;
use crate::mcp::elicitation::{
    self, AnswerError, ElicitAnswer, ElicitationError, ElicitationRequest,
};

/// The `resultType` of an interim result that asks for input.
pub const INPUT_REQUIRED: &str = "input_required";

/// The `resultType` of a final result (also assumed when `resultType` is absent).
pub const COMPLETE: &str = "complete";

/// The only methods a server may answer with `input_required`.
pub const ELIGIBLE_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// How many `input_required` rounds one request may go through before the client gives up
/// (the spec sets no limit).
pub const DEFAULT_MAX_ROUNDS: u32 = 10;

/// Method name of a sampling input request.
pub const SAMPLING_METHOD: &str = "sampling/createMessage";

/// Method name of a roots input request.
pub const ROOTS_METHOD: &str = "roots/list";

/// Whether a server may answer `method` with `input_required`.
pub fn input_required_allowed(method: &str) -> bool {
    ELIGIBLE_METHODS.contains(&method)
}

/// Why a result is not a usable `InputRequiredResult` (the server broke the protocol).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputRequiredError {
    /// The result is not a JSON object, or its members have the wrong JSON types.
    #[error("result is not a valid JSON object: {0}")]
    Json(String),
    /// `resultType` is something other than `"input_required"` (for [`InputRequiredResult::parse`]).
    #[error("resultType is {0:?}, not \"input_required\"")]
    NotInputRequired(String),
    /// `resultType` is a value this client does not know, which the spec says is invalid.
    #[error("unknown resultType {0:?}")]
    UnknownResultType(String),
    /// `input_required` came back on a method that does not allow it.
    #[error("the server answered {0} with input_required, which only tools/call, prompts/get and resources/read allow")]
    NotAllowedForMethod(String),
    /// Neither `inputRequests` nor `requestState` is present.
    #[error("an input_required result must carry inputRequests or requestState")]
    Empty,
    /// `requestState` is present but not a JSON string.
    #[error("requestState must be a string")]
    RequestStateNotString,
    /// `inputRequests` is not a JSON object, or has a key twice.
    #[error("inputRequests is not a JSON object with unique keys: {0}")]
    InputRequestsNotObject(String),
    /// An input request is not `{method, params}` of the right shape.
    #[error("input request {key:?} is malformed: {reason}")]
    BadInputRequest {
        /// The input request key.
        key: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// An input request has a method other than elicitation, sampling or roots.
    #[error("input request {key:?} has method {method:?}, which is not an input request")]
    UnknownInputMethod {
        /// The input request key.
        key: String,
        /// The method found.
        method: String,
    },
    /// An elicitation input request is malformed.
    #[error("elicitation input request {key:?}: {source}")]
    Elicitation {
        /// The input request key.
        key: String,
        /// What is wrong.
        source: ElicitationError,
    },
}

/// Why an [`MrtrRound`] step failed. [`MrtrError::blame`] says whose fault it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MrtrError {
    /// The original request's method cannot get `input_required` (caller misuse).
    #[error("{0} cannot be answered with input_required; only tools/call, prompts/get and resources/read can")]
    MethodNotEligible(String),
    /// The original params (or the fresh `_meta`) are not a JSON object (caller misuse).
    #[error("request params are not a JSON object with unique keys: {0}")]
    BadParams(String),
    /// The server asked for an input whose capability the host did not declare (peer fault).
    #[error("input request {key:?} needs the {capability} capability, which this client did not declare")]
    UndeclaredCapability {
        /// The input request key.
        key: String,
        /// The capability (`elicitation.form`, `elicitation.url`, `sampling`, `sampling.tools`, `roots`).
        capability: &'static str,
    },
    /// The server asked for input more times than the round limit allows (peer fault).
    #[error("the server asked for input more than {limit} times for one request")]
    RoundLimitExceeded {
        /// The limit.
        limit: u32,
    },
    /// A step was called in the wrong phase (caller misuse).
    #[error("MRTR step out of order: {0}")]
    WrongPhase(&'static str),
    /// An answer names a key the server did not ask for (caller misuse).
    #[error("no input request has the key {0:?}")]
    UnknownKey(String),
    /// The retry was requested before every input request was answered (caller misuse).
    #[error("input requests not answered yet: {0:?}")]
    MissingAnswers(Vec<String>),
    /// The answer is for a different kind of input request (caller misuse).
    #[error("input request {key:?} needs {expected} answer")]
    AnswerKindMismatch {
        /// The input request key.
        key: String,
        /// What kind of answer it needs.
        expected: &'static str,
    },
    /// An elicitation answer does not fit its request (caller misuse).
    #[error("answer to {key:?}: {source}")]
    Answer {
        /// The input request key.
        key: String,
        /// What is wrong.
        source: AnswerError,
    },
    /// A sampling or roots answer is not a valid result (caller misuse).
    #[error("answer to {key:?} is not a valid result: {reason}")]
    BadResult {
        /// The input request key.
        key: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The new id was already used by this request's earlier attempts (caller misuse).
    #[error("id {0} was already used by this request; every retry needs a new id")]
    IdReused(Id),
}

/// Whose fault an [`MrtrError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The server broke the protocol.
    Peer,
    /// The caller misused the API.
    Caller,
}

impl MrtrError {
    /// Whose fault this error is.
    pub fn blame(&self) -> Blame {
        match self {
            MrtrError::UndeclaredCapability { .. } | MrtrError::RoundLimitExceeded { .. } => {
                Blame::Peer
            }
            _ => Blame::Caller,
        }
    }
}

/// A sampling (`sampling/createMessage`) input request.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingRequest {
    /// The request params (`messages`, `maxTokens`, ...), for the host's LLM.
    pub params: Value,
    /// Whether it carries `tools` or `toolChoice` (needs the `sampling.tools` capability).
    pub uses_tools: bool,
}

/// One server-to-client request inside `inputRequests`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// `elicitation/create`: form or URL mode.
    Elicitation(ElicitationRequest),
    /// `sampling/createMessage`.
    Sampling(SamplingRequest),
    /// `roots/list`.
    Roots,
}

impl InputRequest {
    /// The request's method name.
    pub fn method(&self) -> &'static str {
        match self {
            InputRequest::Elicitation(_) => elicitation::METHOD,
            InputRequest::Sampling(_) => SAMPLING_METHOD,
            InputRequest::Roots => ROOTS_METHOD,
        }
    }

    fn parse(key: &str, raw: &RawValue) -> Result<Self, InputRequiredError> {
        let bad = |reason| InputRequiredError::BadInputRequest {
            key: key.to_owned(),
            reason,
        };
        let members = raw_members(raw.get()).map_err(|_| bad("not a JSON object"))?;
        let member = |name: &str| members.iter().find(|(k, _)| k == name).map(|(_, v)| &**v);
        let method: String = member("method")
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .ok_or_else(|| bad("no string \"method\""))?;
        let params = member("params");
        match method.as_str() {
            elicitation::METHOD => {
                let params = params.ok_or_else(|| bad("elicitation/create needs params"))?;
                ElicitationRequest::parse(params.get())
                    .map(InputRequest::Elicitation)
                    .map_err(|source| InputRequiredError::Elicitation {
                        key: key.to_owned(),
                        source,
                    })
            }
            SAMPLING_METHOD => {
                let p = params
                    .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                    .and_then(|v| match v {
                        Value::Object(o) => Some(o),
                        _ => None,
                    })
                    .ok_or_else(|| bad("sampling/createMessage needs params"))?;
                if !p.get("messages").is_some_and(Value::is_array) {
                    return Err(bad("sampling/createMessage needs a \"messages\" array"));
                }
                Ok(InputRequest::Sampling(SamplingRequest {
                    uses_tools: p.contains_key("tools") || p.contains_key("toolChoice"),
                    params: Value::Object(p),
                }))
            }
            ROOTS_METHOD => match params {
                Some(p) if !p.get().starts_with('{') => {
                    Err(bad("roots/list params must be an object"))
                }
                _ => Ok(InputRequest::Roots),
            },
            _ => Err(InputRequiredError::UnknownInputMethod {
                key: key.to_owned(),
                method,
            }),
        }
    }
}

/// A JSON object read as its members in order (a repeated key is an error), each value kept
/// as raw text.
struct RawMembers(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for RawMembers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawMembers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawMembers, A::Error> {
                let mut seen = BTreeSet::new();
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    let value: Box<RawValue> = map.next_value()?;
                    out.push((key, value));
                }
                Ok(RawMembers(out))
            }
        }
        d.deserialize_map(V)
    }
}

pub(crate) fn raw_members(json: &str) -> Result<Vec<(String, Box<RawValue>)>, String> {
    serde_json::from_str::<RawMembers>(json)
        .map(|m| m.0)
        .map_err(|e| e.to_string())
}

/// `params_json` (a JSON object) with its `_meta` member replaced by `meta_json` (appended when
/// absent); every other member keeps its raw text and place, so `requestState` stays byte-exact.
/// Used to resend an MRTR retry after the protocol version or capabilities changed.
pub fn splice_meta(params_json: &str, meta_json: &str) -> Result<String, MrtrError> {
    let members = raw_members(params_json).map_err(MrtrError::BadParams)?;
    raw_members(meta_json).map_err(MrtrError::BadParams)?;
    let mut out = String::from("{");
    let mut meta_written = false;
    for (key, value) in &members {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&json_string(key));
        out.push(':');
        if key == "_meta" {
            out.push_str(meta_json.trim());
            meta_written = true;
        } else {
            out.push_str(value.get());
        }
    }
    if !meta_written {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str("\"_meta\":");
        out.push_str(meta_json.trim());
    }
    out.push('}');
    Ok(out)
}

/// Deserializes a present member (even `null`) as `Some(raw)`.
fn raw_present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct ResultTypeOnly {
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
}

#[derive(Deserialize)]
struct WireInputRequired<'a> {
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
    #[serde(
        rename = "inputRequests",
        default,
        borrow,
        deserialize_with = "raw_present"
    )]
    input_requests: Option<&'a RawValue>,
    #[serde(
        rename = "requestState",
        default,
        borrow,
        deserialize_with = "raw_present"
    )]
    request_state: Option<&'a RawValue>,
}

fn require_object(json: &str) -> Result<(), InputRequiredError> {
    // serde reads a struct from a JSON array too; a result is an object only.
    if json.trim_start().starts_with('{') {
        Ok(())
    } else {
        Err(InputRequiredError::Json(
            "a result must be a JSON object".to_owned(),
        ))
    }
}

/// An `InputRequiredResult`: the input requests (keyed, in the order received) and the
/// opaque `requestState`, kept as the exact JSON text the server sent.
#[derive(Clone)]
pub struct InputRequiredResult {
    input_requests: Vec<(String, InputRequest)>,
    request_state: Option<Box<RawValue>>,
}

impl fmt::Debug for InputRequiredResult {
    /// Shows the size of `requestState`, not its contents (the client must not inspect it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputRequiredResult")
            .field("input_requests", &self.input_requests)
            .field(
                "request_state_bytes",
                &self.request_state.as_ref().map(|r| r.get().len()),
            )
            .finish()
    }
}

impl InputRequiredResult {
    /// Reads the `result` member of a response whose `resultType` is `"input_required"`.
    pub fn parse(result_json: &str) -> Result<Self, InputRequiredError> {
        require_object(result_json)?;
        let wire: WireInputRequired<'_> = serde_json::from_str(result_json)
            .map_err(|e| InputRequiredError::Json(e.to_string()))?;
        match wire.result_type.as_deref() {
            Some(INPUT_REQUIRED) => {}
            Some(other) => return Err(InputRequiredError::NotInputRequired(other.to_owned())),
            None => return Err(InputRequiredError::NotInputRequired(COMPLETE.to_owned())),
        }
        if wire.input_requests.is_none() && wire.request_state.is_none() {
            return Err(InputRequiredError::Empty);
        }
        let request_state = match wire.request_state {
            None => None,
            Some(raw) if raw.get().starts_with('"') => Some(raw.to_owned()),
            Some(_) => return Err(InputRequiredError::RequestStateNotString),
        };
        let mut input_requests = Vec::new();
        if let Some(raw) = wire.input_requests {
            let members =
                raw_members(raw.get()).map_err(InputRequiredError::InputRequestsNotObject)?;
            for (key, value) in members {
                let request = InputRequest::parse(&key, &value)?;
                input_requests.push((key, request));
            }
        }
        Ok(InputRequiredResult {
            input_requests,
            request_state,
        })
    }

    /// The input requests, keyed, in the order the server listed them.
    pub fn input_requests(&self) -> &[(String, InputRequest)] {
        &self.input_requests
    }

    /// The exact JSON text of `requestState` as received (a JSON string literal, quotes
    /// included), or `None` when the server sent none.
    pub fn request_state_json(&self) -> Option<&str> {
        self.request_state.as_deref().map(RawValue::get)
    }
}

/// What a `result` is, by its `resultType`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ResultKind {
    /// A final result (`resultType` absent or `"complete"`).
    Complete,
    /// An interim result asking for input.
    InputRequired(InputRequiredResult),
}

/// Classifies the `result` of a response to `method`: absent `resultType` means complete;
/// `input_required` is parsed, and refused on methods other than [`ELIGIBLE_METHODS`];
/// any other `resultType` is invalid.
pub fn classify_result(method: &str, result_json: &str) -> Result<ResultKind, InputRequiredError> {
    require_object(result_json)?;
    let only: ResultTypeOnly =
        serde_json::from_str(result_json).map_err(|e| InputRequiredError::Json(e.to_string()))?;
    match only.result_type.as_deref() {
        None | Some(COMPLETE) => Ok(ResultKind::Complete),
        Some(INPUT_REQUIRED) if !input_required_allowed(method) => {
            Err(InputRequiredError::NotAllowedForMethod(method.to_owned()))
        }
        Some(INPUT_REQUIRED) => {
            InputRequiredResult::parse(result_json).map(ResultKind::InputRequired)
        }
        Some(other) => Err(InputRequiredError::UnknownResultType(other.to_owned())),
    }
}

/// The input-request capabilities the host declared in `_meta` for this request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputCapabilities {
    /// `elicitation.form` (or an empty `elicitation` object).
    pub elicitation_form: bool,
    /// `elicitation.url`.
    pub elicitation_url: bool,
    /// `sampling`.
    pub sampling: bool,
    /// `sampling.tools`.
    pub sampling_tools: bool,
    /// `roots`.
    pub roots: bool,
}

impl From<&crate::mcp::meta::ClientCapabilities> for InputCapabilities {
    /// What the request's `_meta` actually declared, so the check cannot drift from it
    /// (an empty `elicitation` object means form mode, as `meta` reads it).
    fn from(c: &crate::mcp::meta::ClientCapabilities) -> Self {
        InputCapabilities {
            elicitation_form: c.supports_elicitation_form(),
            elicitation_url: c.supports_elicitation_url(),
            sampling: c.sampling.is_some(),
            sampling_tools: c.sampling.as_ref().is_some_and(|s| s.tools.is_some()),
            roots: c.roots.is_some(),
        }
    }
}

impl InputCapabilities {
    /// The capability `request` needs, if this declaration lacks it.
    fn missing_for(&self, request: &InputRequest) -> Option<&'static str> {
        match request {
            InputRequest::Elicitation(ElicitationRequest::Form(_)) if !self.elicitation_form => {
                Some("elicitation.form")
            }
            InputRequest::Elicitation(ElicitationRequest::Url(_)) if !self.elicitation_url => {
                Some("elicitation.url")
            }
            InputRequest::Sampling(_) if !self.sampling => Some("sampling"),
            InputRequest::Sampling(s) if s.uses_tools && !self.sampling_tools => {
                Some("sampling.tools")
            }
            InputRequest::Roots if !self.roots => Some("roots"),
            _ => None,
        }
    }
}

/// One input request to show the host, under the server's key.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequestEvent {
    /// The server's key; answer with the same key.
    pub key: String,
    /// What is asked (form elicitations carry their `suspicious` flags, URL elicitations
    /// `requires_consent`).
    pub request: InputRequest,
}

/// The host's answer to one input request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputAnswer {
    /// An answer to `elicitation/create`.
    Elicitation(ElicitAnswer),
    /// A `CreateMessageResult` for `sampling/createMessage`.
    Sampling(Value),
    /// A `ListRootsResult` for `roots/list`.
    Roots(Value),
}

/// Checks a `CreateMessageResult`: `role`, `content` and a string `model`.
fn check_sampling_result(v: &Value) -> Result<(), &'static str> {
    let o = v
        .as_object()
        .ok_or("a CreateMessageResult must be an object")?;
    if !matches!(
        o.get("role").and_then(Value::as_str),
        Some("assistant" | "user")
    ) {
        return Err("role must be \"assistant\" or \"user\"");
    }
    if !o
        .get("content")
        .is_some_and(|c| c.is_object() || c.is_array())
    {
        return Err("content must be a content block or an array of them");
    }
    if !o.get("model").is_some_and(Value::is_string) {
        return Err("model must be a string");
    }
    Ok(())
}

/// Checks a `ListRootsResult`: `roots`, each with a `file://` `uri`.
fn check_roots_result(v: &Value) -> Result<(), &'static str> {
    let roots = v
        .get("roots")
        .and_then(Value::as_array)
        .ok_or("a ListRootsResult needs a \"roots\" array")?;
    for root in roots {
        let uri = root
            .get("uri")
            .and_then(Value::as_str)
            .ok_or("every root needs a string \"uri\"")?;
        if !uri.starts_with("file://") {
            return Err("a root uri must be a file:// URI");
        }
    }
    Ok(())
}

/// The retry of an original request: a new request to send (never cacheable).
#[derive(Clone)]
pub struct RetryRequest {
    id: Id,
    method: String,
    params: String,
    body: String,
}

impl fmt::Debug for RetryRequest {
    /// Shows sizes only: the body carries the user's answers and the server's state.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryRequest")
            .field("id", &self.id)
            .field("method", &self.method)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

impl RetryRequest {
    /// The new id.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// The original request's method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The JSON text of `params`: the original members, then `inputResponses`, then
    /// `requestState`.
    pub fn params_json(&self) -> &str {
        &self.params
    }

    /// The whole JSON-RPC request text.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Always `false`: the result of a retry carrying `inputResponses`/`requestState` must
    /// not be cached.
    pub fn cacheable(&self) -> bool {
        false
    }
}

enum Phase {
    /// The original request or a retry is in flight.
    AwaitingResult,
    /// Input requests were surfaced; answers are being collected.
    Collecting {
        requests: Vec<(String, InputRequest)>,
        answers: Vec<Option<String>>,
        request_state: Option<Box<RawValue>>,
    },
    /// The request completed or the exchange was abandoned.
    Finished,
}

/// The MRTR state of one original request across its rounds.
pub struct MrtrRound {
    method: String,
    /// The original params' members in order, each value's JSON text.
    params: Vec<(String, Box<str>)>,
    capabilities: InputCapabilities,
    used_ids: Vec<Id>,
    max_rounds: u32,
    rounds: u32,
    phase: Phase,
}

impl fmt::Debug for MrtrRound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MrtrRound")
            .field("method", &self.method)
            .field("rounds", &self.rounds)
            .field("max_rounds", &self.max_rounds)
            .field("used_ids", &self.used_ids)
            .finish_non_exhaustive()
    }
}

fn json_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn id_json(id: &Id) -> String {
    match id {
        Id::Number(n) => n.to_string(),
        Id::String(s) => json_string(s),
    }
}

impl MrtrRound {
    /// Starts tracking the original request `original_id` / `method` with its `params` JSON
    /// text, for a host that declared `capabilities`. Any `inputResponses`/`requestState` in
    /// `params` are dropped: each retry carries only its own round's.
    pub fn new(
        original_id: Id,
        method: &str,
        params_json: &str,
        capabilities: InputCapabilities,
    ) -> Result<Self, MrtrError> {
        if !input_required_allowed(method) {
            return Err(MrtrError::MethodNotEligible(method.to_owned()));
        }
        let params = raw_members(params_json).map_err(MrtrError::BadParams)?;
        let params = params
            .into_iter()
            .filter(|(k, _)| k != "inputResponses" && k != "requestState")
            .map(|(k, v)| (k, Box::<str>::from(v)))
            .collect();
        Ok(MrtrRound {
            method: method.to_owned(),
            params,
            capabilities,
            used_ids: vec![original_id],
            max_rounds: DEFAULT_MAX_ROUNDS,
            rounds: 0,
            phase: Phase::AwaitingResult,
        })
    }

    /// [`MrtrRound::new`] for params the caller wrote itself and holds as their members in
    /// order (unique keys, each value's JSON text), so they are not read again. The caller
    /// checked [`input_required_allowed`] for `method`.
    pub(crate) fn from_members(
        original_id: Id,
        method: &str,
        mut params: Vec<(String, Box<str>)>,
        capabilities: InputCapabilities,
    ) -> Self {
        params.retain(|(k, _)| k != "inputResponses" && k != "requestState");
        MrtrRound {
            method: method.to_owned(),
            params,
            capabilities,
            used_ids: vec![original_id],
            max_rounds: DEFAULT_MAX_ROUNDS,
            rounds: 0,
            phase: Phase::AwaitingResult,
        }
    }

    /// Sets the round limit (the number of `input_required` results accepted).
    pub fn with_max_rounds(mut self, max_rounds: u32) -> Self {
        self.max_rounds = max_rounds;
        self
    }

    /// Replaces the declared capabilities (after `-32021` the retry declares more); later
    /// rounds are checked against them.
    pub fn set_capabilities(&mut self, capabilities: InputCapabilities) {
        self.capabilities = capabilities;
    }

    /// How many `input_required` results this request has received.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The method of the original request.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Takes an `input_required` result for the request in flight and returns the input
    /// requests to surface to the host. Fails (and abandons the request) past the round limit
    /// or when the server asks for an input the host did not declare.
    pub fn handle_input_required(
        &mut self,
        result: InputRequiredResult,
    ) -> Result<Vec<InputRequestEvent>, MrtrError> {
        if !matches!(self.phase, Phase::AwaitingResult) {
            return Err(MrtrError::WrongPhase(
                "an input_required result arrived while no request was in flight",
            ));
        }
        self.rounds = self.rounds.saturating_add(1);
        if self.rounds > self.max_rounds {
            self.phase = Phase::Finished;
            return Err(MrtrError::RoundLimitExceeded {
                limit: self.max_rounds,
            });
        }
        for (key, request) in &result.input_requests {
            if let Some(capability) = self.capabilities.missing_for(request) {
                self.phase = Phase::Finished;
                return Err(MrtrError::UndeclaredCapability {
                    key: key.clone(),
                    capability,
                });
            }
        }
        let events = result
            .input_requests
            .iter()
            .map(|(key, request)| InputRequestEvent {
                key: key.clone(),
                request: request.clone(),
            })
            .collect();
        self.phase = Phase::Collecting {
            answers: vec![None; result.input_requests.len()],
            requests: result.input_requests,
            request_state: result.request_state,
        };
        Ok(events)
    }

    /// Records the host's answer to the input request `key` (a later answer to the same key
    /// replaces the earlier one). Elicitation answers are validated against their request.
    pub fn answer(&mut self, key: &str, answer: InputAnswer) -> Result<(), MrtrError> {
        let Phase::Collecting {
            requests, answers, ..
        } = &mut self.phase
        else {
            return Err(MrtrError::WrongPhase(
                "no input requests are waiting for answers",
            ));
        };
        let index = requests
            .iter()
            .position(|(k, _)| k == key)
            .ok_or_else(|| MrtrError::UnknownKey(key.to_owned()))?;
        let request = requests.get(index).map(|(_, r)| r);
        let mismatch = |expected| MrtrError::AnswerKindMismatch {
            key: key.to_owned(),
            expected,
        };
        let json = match (request, &answer) {
            (Some(InputRequest::Elicitation(req)), InputAnswer::Elicitation(a)) => {
                req.answer(a).map_err(|source| MrtrError::Answer {
                    key: key.to_owned(),
                    source,
                })?
            }
            (Some(InputRequest::Sampling(_)), InputAnswer::Sampling(v)) => {
                check_sampling_result(v).map_err(|reason| MrtrError::BadResult {
                    key: key.to_owned(),
                    reason,
                })?;
                v.clone()
            }
            (Some(InputRequest::Roots), InputAnswer::Roots(v)) => {
                check_roots_result(v).map_err(|reason| MrtrError::BadResult {
                    key: key.to_owned(),
                    reason,
                })?;
                v.clone()
            }
            (Some(InputRequest::Elicitation(_)), _) => return Err(mismatch("an elicitation")),
            (Some(InputRequest::Sampling(_)), _) => return Err(mismatch("a sampling")),
            (Some(InputRequest::Roots), _) => return Err(mismatch("a roots")),
            (None, _) => return Err(MrtrError::UnknownKey(key.to_owned())),
        };
        if let Some(slot) = answers.get_mut(index) {
            *slot = Some(json.to_string());
        }
        Ok(())
    }

    /// The keys of the input requests not answered yet.
    pub fn unanswered(&self) -> Vec<&str> {
        match &self.phase {
            Phase::Collecting {
                requests, answers, ..
            } => requests
                .iter()
                .zip(answers)
                .filter(|(_, a)| a.is_none())
                .map(|((k, _), _)| k.as_str())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Builds the retry under `new_id` (which must differ from every id this request used):
    /// the original params, with `_meta` replaced by `fresh_meta` when given, then
    /// `inputResponses` (same keys as the input requests; omitted when there were none) and
    /// `requestState` byte-exact (omitted when the server sent none). Every input request
    /// must have been answered.
    pub fn build_retry(
        &mut self,
        new_id: Id,
        fresh_meta: Option<&str>,
    ) -> Result<RetryRequest, MrtrError> {
        let Phase::Collecting {
            requests,
            answers,
            request_state,
        } = &self.phase
        else {
            return Err(MrtrError::WrongPhase("no input_required round is open"));
        };
        let missing: Vec<String> = requests
            .iter()
            .zip(answers)
            .filter(|(_, a)| a.is_none())
            .map(|((k, _), _)| k.clone())
            .collect();
        if !missing.is_empty() {
            return Err(MrtrError::MissingAnswers(missing));
        }
        if self.used_ids.contains(&new_id) {
            return Err(MrtrError::IdReused(new_id));
        }
        let fresh_meta = match fresh_meta {
            None => None,
            Some(m) => {
                // Checked for shape only; spliced in as given.
                raw_members(m).map_err(MrtrError::BadParams)?;
                Some(m.trim())
            }
        };

        let mut params = String::from("{");
        let mut push = |key: &str, value: &str| {
            if params.len() > 1 {
                params.push(',');
            }
            params.push_str(&json_string(key));
            params.push(':');
            params.push_str(value);
        };
        let mut meta_written = false;
        for (key, value) in &self.params {
            match (key.as_str(), fresh_meta) {
                ("_meta", Some(m)) => {
                    push(key, m);
                    meta_written = true;
                }
                _ => push(key, value),
            }
        }
        if let (false, Some(m)) = (meta_written, fresh_meta) {
            push("_meta", m);
        }
        if !requests.is_empty() {
            let mut responses = String::from("{");
            for ((key, _), answer) in requests.iter().zip(answers) {
                if responses.len() > 1 {
                    responses.push(',');
                }
                responses.push_str(&json_string(key));
                responses.push(':');
                responses.push_str(answer.as_deref().unwrap_or("null"));
            }
            responses.push('}');
            push("inputResponses", &responses);
        }
        if let Some(state) = request_state {
            push("requestState", state.get());
        }
        params.push('}');

        let body = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":{},\"params\":{}}}",
            id_json(&new_id),
            json_string(&self.method),
            params
        );
        self.used_ids.push(new_id.clone());
        self.phase = Phase::AwaitingResult;
        Ok(RetryRequest {
            id: new_id,
            method: self.method.clone(),
            params,
            body,
        })
    }

    /// Marks the request finished (a final result or an error arrived); later steps fail.
    pub fn finish(&mut self) {
        self.phase = Phase::Finished;
    }

    /// Whether the request is finished or abandoned.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Internal: the splicer keeps member order and raw text of the original params.
    /// basic/patterns/mrtr.mdx, "Client Requirements": the retry resends the original params.
    #[test]
    fn original_params_are_kept_verbatim_and_in_order() {
        let params = r#"{"name":"x","arguments":{"b":1.50,"a":"\u00e9"},"_meta":{}}"#;
        let m = raw_members(params).unwrap();
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["name", "arguments", "_meta"]);
        assert_eq!(m[1].1.get(), r#"{"b":1.50,"a":"\u00e9"}"#);
    }

    /// Internal: a JSON object with a repeated key is refused rather than silently merged.
    #[test]
    fn duplicate_member_keys_are_refused() {
        assert!(raw_members(r#"{"a":1,"a":2}"#).is_err());
        assert!(raw_members("[1,2]").is_err());
    }
}
