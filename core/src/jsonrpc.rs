//! JSON-RPC 2.0 as MCP uses it: ids, the four message shapes, the error object and the
//! standard and MCP-specific error codes.
//!
//! Ids are a string or an integer, never `null`; the only place a `null` id is accepted is an
//! error response (JSON-RPC's answer to a request whose id could not be read). Messages are
//! classified by their members, without copying params or results: those stay as the raw JSON
//! text they arrived as, so a forwarded payload is preserved exactly.

use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// JSON-RPC's `"2.0"` version tag.
pub const VERSION: &str = "2.0";

/// Standard JSON-RPC and MCP error codes.
pub mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error on the receiver; also the tunnel's synthesized-failure code.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// MCP (2025-11-25): URL elicitation required.
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
    /// MCP 2026-07-28: the HTTP headers do not match the body, or are missing or malformed.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// MCP 2026-07-28: a required client capability was not declared.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// MCP 2026-07-28: the requested protocol version is not supported (`data.supported`).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// MCP capability error, preserved verbatim by the tunnel.
    pub const CAPABILITY_ERROR: i64 = -32003;
    /// MCP version error, preserved verbatim by the tunnel.
    pub const VERSION_ERROR: i64 = -32004;
}

/// A JSON-RPC request id: a string or an integer (MCP forbids `null` and fractions).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    /// An integer id (any integer JSON gives exactly: the whole `i64` and `u64` ranges).
    Number(i128),
    /// A string id.
    String(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Number(i128::from(n))
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::String(s.to_owned())
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Id::String(s)
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Number(n) => match i64::try_from(*n) {
                Ok(small) => s.serialize_i64(small),
                Err(_) => s.serialize_i128(*n),
            },
            Id::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON-RPC id (a string or an integer)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id::String(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Id, E> {
                Ok(Id::String(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id::Number(i128::from(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                Ok(Id::Number(i128::from(v)))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Id, E> {
                Err(E::custom(
                    "JSON-RPC id must be a string or an integer, not a fraction",
                ))
            }
        }
        d.deserialize_any(V)
    }
}

/// The `error` member of a JSON-RPC error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Extra information defined by the sender; absent and `null` are kept apart.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub data: Option<Value>,
}

/// Deserializes a present member (even `null`) as `Some`, so `"data": null` survives a round trip.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The shape of one JSON-RPC message, classified by its members.
#[derive(Debug)]
pub enum Message<'a> {
    /// A request: has `method` and an `id`.
    Request {
        /// The request id.
        id: Id,
        /// The method name.
        method: String,
        /// The raw `params`, if present.
        params: Option<&'a RawValue>,
    },
    /// A notification: has `method` and no `id`.
    Notification {
        /// The method name.
        method: String,
        /// The raw `params`, if present.
        params: Option<&'a RawValue>,
    },
    /// A successful response: has `result` and an `id`.
    Response {
        /// The id of the request answered.
        id: Id,
        /// The raw `result`.
        result: &'a RawValue,
    },
    /// An error response: has `error`; the id may be `null` (unknown request).
    Error {
        /// The id of the request answered, `None` for `id: null`.
        id: Option<Id>,
        /// The error object.
        error: ErrorObject,
    },
}

/// Why bytes are not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Not JSON, or not a JSON object.
    #[error("not a JSON-RPC message: {0}")]
    Json(String),
    /// `jsonrpc` is missing or is not `"2.0"`.
    #[error("JSON-RPC message has no \"jsonrpc\": \"2.0\" member")]
    Version,
    /// The `id` member is not a string or an integer (or is `null` outside an error response).
    #[error("JSON-RPC id is not a string or an integer")]
    BadId,
    /// The members do not form a request, notification, response or error.
    #[error("JSON-RPC message is none of request, notification, response or error: {0}")]
    Shape(&'static str),
}

/// Deserializes a present member (even `null`) as `Some(raw)`.
fn raw_present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Members<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "raw_present")]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

impl<'a> Message<'a> {
    /// Classifies a JSON text as a JSON-RPC message, borrowing `params`/`result` from it.
    pub fn parse(json: &'a str) -> Result<Self, MessageError> {
        // serde reads a struct from a JSON array too; a JSON-RPC message is an object only.
        if !json.trim_start().starts_with('{') {
            return Err(MessageError::Json(
                "a JSON-RPC message must be a JSON object".to_owned(),
            ));
        }
        let m: Members<'a> =
            serde_json::from_str(json).map_err(|e| MessageError::Json(e.to_string()))?;
        match m.jsonrpc.map(RawValue::get) {
            Some("\"2.0\"") => {}
            _ => return Err(MessageError::Version),
        }
        let id = match m.id {
            None => None,
            Some(raw) if raw.get() == "null" => Some(None),
            Some(raw) => Some(Some(
                serde_json::from_str::<Id>(raw.get()).map_err(|_| MessageError::BadId)?,
            )),
        };
        match (m.method, m.result, m.error) {
            (Some(method), None, None) => match id {
                None => Ok(Message::Notification {
                    method,
                    params: m.params,
                }),
                Some(Some(id)) => Ok(Message::Request {
                    id,
                    method,
                    params: m.params,
                }),
                Some(None) => Err(MessageError::BadId),
            },
            (None, Some(result), None) => match id {
                Some(Some(id)) => Ok(Message::Response { id, result }),
                _ => Err(MessageError::Shape("a result needs a string or integer id")),
            },
            (None, None, Some(error)) => {
                let error: ErrorObject = serde_json::from_str(error.get()).map_err(|_| {
                    MessageError::Shape("error member is not {code, message, data?}")
                })?;
                // `JSONRPCErrorResponse` requires only `jsonrpc` and `error`: a missing id is read
                // like `id: null` (a request the server could not identify).
                Ok(Message::Error {
                    id: id.flatten(),
                    error,
                })
            }
            (None, None, None) => Err(MessageError::Shape("no method, result or error")),
            _ => Err(MessageError::Shape(
                "more than one of method, result and error",
            )),
        }
    }

    /// The id, for requests, responses and errors with a known id.
    pub fn id(&self) -> Option<&Id> {
        match self {
            Message::Request { id, .. } | Message::Response { id, .. } => Some(id),
            Message::Error { id, .. } => id.as_ref(),
            Message::Notification { .. } => None,
        }
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            _ => None,
        }
    }
}

/// Builds the JSON text of a request: `{"jsonrpc":"2.0","id":..,"method":..,"params":..}`, in
/// that member order, `params` omitted when `None`.
pub fn request_text<P: Serialize + ?Sized>(id: &Id, method: &str, params: Option<&P>) -> String {
    #[derive(Serialize)]
    struct Out<'a, P: Serialize + ?Sized> {
        jsonrpc: &'static str,
        id: &'a Id,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a P>,
    }
    // Ids, strings and already-valid JSON values (a map or raw text) always serialize.
    serde_json::to_string(&Out {
        jsonrpc: VERSION,
        id,
        method,
        params,
    })
    .unwrap_or_default()
}

/// Builds the JSON text of an error response.
pub fn error_response(id: Option<&Id>, error: &ErrorObject) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        id: Option<&'a Id>,
        error: &'a ErrorObject,
    }
    // Serializing these owned, string-keyed values cannot fail.
    serde_json::to_string(&Out {
        jsonrpc: VERSION,
        id,
        error,
    })
    .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn id_is_string_or_integer_never_null_or_fraction() {
        assert_eq!(serde_json::from_str::<Id>("7").ok(), Some(Id::Number(7)));
        assert_eq!(
            serde_json::from_str::<Id>("\"a\"").ok(),
            Some(Id::from("a"))
        );
        assert!(serde_json::from_str::<Id>("null").is_err());
        assert!(serde_json::from_str::<Id>("1.5").is_err());
        assert!(serde_json::from_str::<Id>("true").is_err());
        // The whole u64 range is kept exactly, and written back the same.
        let big = serde_json::from_str::<Id>("18446744073709551615").unwrap();
        assert_eq!(big, Id::Number(18_446_744_073_709_551_615));
        assert_eq!(serde_json::to_string(&big).unwrap(), "18446744073709551615");
        assert_eq!(serde_json::to_string(&Id::Number(-7)).unwrap(), "-7");
        // Beyond u64, JSON numbers are no longer exact integers here: refused, not rounded.
        assert!(serde_json::from_str::<Id>("18446744073709551616").is_err());
    }

    #[test]
    fn classifies_the_four_shapes() {
        let r = Message::parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#);
        assert!(matches!(
            r,
            Ok(Message::Request {
                id: Id::Number(1),
                ..
            })
        ));
        let n = Message::parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(n, Ok(Message::Notification { .. })));
        let ok = Message::parse(r#"{"jsonrpc":"2.0","id":"x","result":{"a":1}}"#);
        match ok {
            Ok(Message::Response { id, result }) => {
                assert_eq!(id, Id::from("x"));
                assert_eq!(result.get(), r#"{"a":1}"#);
            }
            other => panic!("unexpected {other:?}"),
        }
        let e = Message::parse(
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32003,"message":"m","data":null}}"#,
        );
        match e {
            Ok(Message::Error { id, error }) => {
                assert_eq!(id, Some(Id::Number(2)));
                assert_eq!(error.code, code::CAPABILITY_ERROR);
                assert_eq!(error.data, Some(Value::Null), "a null data member is kept");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn null_id_is_accepted_only_on_error_responses() {
        assert!(matches!(
            Message::parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}"#),
            Ok(Message::Error { id: None, .. })
        ));
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).err(),
            Some(MessageError::BadId)
        );
        assert!(Message::parse(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#).is_err());
    }

    /// schema.json `JSONRPCErrorResponse`: `required: ["error", "jsonrpc"]`; server-everything
    /// answers an unknown session this way (fixtures/mcp/server-everything).
    #[test]
    fn error_response_without_an_id_member_is_an_error_with_no_id() {
        let m =
            Message::parse(r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request"}}"#);
        assert!(matches!(m, Ok(Message::Error { id: None, .. })), "{m:?}");
    }

    #[test]
    fn rejects_missing_version_and_mixed_shapes() {
        assert_eq!(
            Message::parse(r#"{"id":1,"method":"x"}"#).err(),
            Some(MessageError::Version)
        );
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#).err(),
            Some(MessageError::Version)
        );
        assert!(Message::parse(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#).is_err());
        assert!(Message::parse(r#"{"jsonrpc":"2.0","id":1}"#).is_err());
        assert!(Message::parse(r#"[1]"#).is_err());
        // serde would read the members of a struct from an array; an array is never a message.
        assert!(Message::parse(r#"["2.0", 1, "tools/list"]"#).is_err());
        assert!(Message::parse(r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#).is_err());
    }

    #[test]
    fn error_response_keeps_id_code_message_and_data() {
        let err = ErrorObject {
            code: -32603,
            message: "Bad Gateway".into(),
            data: None,
        };
        assert_eq!(
            error_response(Some(&Id::from("r")), &err),
            r#"{"jsonrpc":"2.0","id":"r","error":{"code":-32603,"message":"Bad Gateway"}}"#
        );
        assert_eq!(
            error_response(None, &err),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Bad Gateway"}}"#
        );
    }
}
