//! Contract tests: the wire fixtures in `fixtures/tunnel/` against the tunnel OpenAPI contract
//! (`fixtures/spec/tunnel/openapi.json`, vendored: see `fixtures/spec/README.md`) and against mcpwire-core's decoders and encoders.
//!
//! - every `good/` fixture validates against its component schema and decodes with mcpwire-core
//!   to the values listed here;
//! - every `bad/` fixture is rejected by the schema, by the decoder, or by both, or decodes
//!   fail-open where the contract says so; each expectation says exactly which;
//! - a fixture file without an expectation (or an expectation without a file) fails the walk;
//! - every `tunnel_failure` our `failure::synthesize` can produce validates against
//!   `x-tunnel-failure-schema`, and `ResponsePayload::to_json` output validates against
//!   `TunnelResponsePayload`.
//!
//! Every file read is in the repository: the contract is the copy in `fixtures/spec/tunnel/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jsonschema::{Draft, Registry, Validator};
use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::{Id, Message};
use mcpwire_core::tunnel::failure::{
    synthesize, FailureSource, TransportErrorKind, SYNTHESIZED_RESP_CODE,
};
use mcpwire_core::tunnel::headers::filter_response_headers;
use mcpwire_core::tunnel::response_timeout::ResponseTimeout;
use mcpwire_core::tunnel::wire::{
    decode_poll_body, ApiErrorResponse, CommandKind, DecodeError, PolledCommand, RespType,
    ResponseAck, ResponsePayload,
};
use mcpwire_core::tunnel::TunnelFailure;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The base URI the OpenAPI document is registered under (never fetched).
const OPENAPI_URI: &str = "https://mcpwire.invalid/fixtures/spec/tunnel/openapi.json";

/// Where `x-tunnel-failure-schema` sits in the OpenAPI document.
const FAILURE_SCHEMA_POINTER: &str =
    "/components/schemas/TunnelResponsePayload/properties/resp_json/x-tunnel-failure-schema";

// ---------------------------------------------------------------------------------------------
// Locating the contract and building validators
// ---------------------------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The vendored spec files (`fixtures/spec/`), laid out as the spec folder they come from.
fn spec_dir() -> PathBuf {
    repo_root().join("fixtures/spec")
}

fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures/tunnel")
}

/// The validators this file needs, built once from the OpenAPI document.
struct Contract {
    openapi: Value,
    poll: Validator,
    poll_command: Validator,
    payload: Validator,
    ack: Validator,
    api_error: Validator,
    failure: Validator,
}

fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let path = spec_dir().join("tunnel/openapi.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let openapi: Value = serde_json::from_str(&text).expect("openapi.json is JSON");
        // OpenAPI 3.1 schema objects are JSON Schema 2020-12. Register the whole document as a
        // resource, then compile a small root schema whose `$ref` points into its components.
        let registry = Registry::new()
            .draft(Draft::Draft202012)
            .add(OPENAPI_URI, openapi.clone())
            .expect("the OpenAPI base URI is valid")
            .prepare()
            .expect("the OpenAPI document indexes as a JSON Schema resource");
        let by_pointer = |pointer: &str| {
            jsonschema::options()
                .with_draft(Draft::Draft202012)
                .with_registry(&registry)
                .offline()
                .build(&json!({ "$ref": format!("{OPENAPI_URI}#{pointer}") }))
                .unwrap_or_else(|e| panic!("cannot compile a validator for {pointer}: {e}"))
        };
        let component = |name: &str| by_pointer(&format!("/components/schemas/{name}"));
        let failure_schema = openapi
            .pointer(FAILURE_SCHEMA_POINTER)
            .expect("openapi.json publishes x-tunnel-failure-schema")
            .clone();
        let failure = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .offline()
            .build(&failure_schema)
            .expect("x-tunnel-failure-schema compiles");
        Contract {
            poll: component("PolledCommandList"),
            poll_command: by_pointer(
                "/components/schemas/PolledCommandList/properties/commands/items",
            ),
            payload: component("TunnelResponsePayload"),
            ack: component("TunnelResponseAck"),
            api_error: component("APIErrorResponse"),
            failure,
            openapi,
        }
    })
}

/// `Ok` or every validation error, one per line.
fn check(v: &Validator, instance: &Value) -> Result<(), String> {
    let errors: Vec<String> = v
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

fn read_json(path: &Path) -> (Vec<u8>, Value) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    (bytes, value)
}

// ---------------------------------------------------------------------------------------------
// Summaries of decoded values, compared against the expectations below
// ---------------------------------------------------------------------------------------------

fn summarize_timeout(t: &ResponseTimeout) -> Value {
    match t {
        ResponseTimeout::Absent => json!("absent"),
        ResponseTimeout::Valid(d) => json!({ "valid_ns": d.as_nanos() as u64 }),
        ResponseTimeout::Invalid(e) => json!({ "invalid": format!("{e:?}") }),
    }
}

fn summarize_command(c: &Result<PolledCommand, DecodeError>) -> Value {
    match c {
        Ok(c) => {
            let kind = match &c.kind {
                CommandKind::JsonRpc(_) => json!("jsonrpc"),
                CommandKind::SessionTermination => json!("session_termination"),
                CommandKind::Unknown(t) => json!({ "unknown": t }),
            };
            json!({
                "request_id": c.request_id,
                "shard_token": c.shard_token,
                "channel": c.channel,
                "created_at": c.created_at,
                "response_timeout": summarize_timeout(&c.response_timeout),
                "headers": c.headers.to_multimap(),
                "kind": kind,
            })
        }
        Err(DecodeError::NoRequestId { index, .. }) => {
            json!({ "error": "no_request_id", "index": index })
        }
        Err(DecodeError::Command(m)) => {
            json!({ "error": "command", "request_id": m.request_id })
        }
        Err(other) => json!({ "error": other.to_string() }),
    }
}

/// A `summarize_command` value for an `Ok` command, with the usual defaults filled in.
fn cmd(
    request_id: &str,
    shard: &str,
    channel: &str,
    kind: Value,
    timeout: Value,
    headers: Value,
) -> Value {
    json!({
        "request_id": request_id,
        "shard_token": shard,
        "channel": channel,
        "created_at": "2026-01-01T00:00:00Z",
        "response_timeout": timeout,
        "headers": headers,
        "kind": kind,
    })
}

fn ns(secs: u64) -> Value {
    json!({ "valid_ns": secs * 1_000_000_000 })
}

fn invalid(e: &str) -> Value {
    json!({ "invalid": e })
}

// ---------------------------------------------------------------------------------------------
// Expectations, one per fixture file
// ---------------------------------------------------------------------------------------------

/// What a poll-envelope fixture must do.
struct PollExpect {
    /// Whether `PolledCommandList` accepts the whole envelope.
    schema_accepts: bool,
    /// Indices of commands the command schema (`commands.items`) rejects on their own.
    schema_rejects_commands: &'static [usize],
    /// `decode_poll_body`'s result: `None` for an envelope error, else one summary per command.
    decoded: Option<Value>,
}

/// What a response payload's `resp_json` is.
enum Shape {
    /// A JSON-RPC result for this id.
    Result(Id),
    /// A JSON-RPC notification with this method.
    Notify(&'static str),
    /// No `resp_json`.
    NoBody,
    /// A target JSON-RPC error preserved verbatim (not `-32603`, no `tunnel_failure`).
    TargetError(i64),
    /// A synthesized failure that our `synthesize` reproduces exactly for this id.
    Synthesized(Option<Id>, TunnelFailure),
}

/// What a response-payload fixture must do.
struct RespExpect {
    /// Whether `TunnelResponsePayload` accepts it.
    schema_accepts: bool,
    /// For payloads with `error.data.tunnel_failure`: whether `x-tunnel-failure-schema` accepts it.
    failure_schema_accepts: Option<bool>,
    /// For schema-valid payloads: the `resp_type` and the shape of `resp_json`.
    good: Option<(RespType, Shape)>,
}

enum Expect {
    Poll(PollExpect),
    Response(RespExpect),
    Ack,
    ApiError {
        kind: &'static str,
        code: Option<&'static str>,
        param: Option<&'static str>,
    },
}

fn good_poll(decoded: Value) -> Expect {
    Expect::Poll(PollExpect {
        schema_accepts: true,
        schema_rejects_commands: &[],
        decoded: Some(decoded),
    })
}

fn good_resp(resp_type: RespType, shape: Shape) -> Expect {
    let failure = matches!(shape, Shape::Synthesized(..)).then_some(true);
    Expect::Response(RespExpect {
        schema_accepts: true,
        failure_schema_accepts: failure,
        good: Some((resp_type, shape)),
    })
}

fn synthesized(id: Option<Id>, f: TunnelFailure) -> Expect {
    good_resp(RespType::JsonrpcResponse, Shape::Synthesized(id, f))
}

/// Every fixture file, by path relative to `fixtures/tunnel/`, and what it must do.
fn expectations() -> BTreeMap<&'static str, Expect> {
    use FailureSource as S;
    use TransportErrorKind as K;
    let ping = json!("jsonrpc");
    let mut m = BTreeMap::new();

    // --- good: poll envelopes -----------------------------------------------------------------
    m.insert(
        "good/poll_command_envelope.json",
        good_poll(json!([
            {
                "request_id": "cmd_fixture_jsonrpc", "shard_token": "fixture:jsonrpc",
                "channel": "harpoon", "created_at": "2026-06-12T12:13:14.000Z",
                "response_timeout": "absent", "headers": {"x-test": ["alpha"]}, "kind": "jsonrpc"
            },
            {
                "request_id": "cmd_fixture_session_end", "shard_token": "fixture:session",
                "channel": "main", "created_at": "2026-06-12T12:15:16.000Z",
                "response_timeout": "absent", "headers": {}, "kind": "session_termination"
            }
        ])),
    );
    m.insert(
        "good/poll_jsonrpc_request.json",
        good_poll(json!([cmd(
            "req_123",
            "opaque-shard-token",
            "main",
            ping.clone(),
            ns(30),
            json!({"Mcp-Session-Id": ["session_123"]})
        )])),
    );
    m.insert(
        "good/poll_jsonrpc_notification.json",
        good_poll(json!([{
            "request_id": "req_notify", "shard_token": "shard-n", "channel": "main",
            "created_at": "2026-01-01T00:00:01Z", "response_timeout": "absent",
            "headers": {}, "kind": "jsonrpc"
        }])),
    );
    m.insert(
        "good/poll_session_termination.json",
        good_poll(json!([{
            "request_id": "req_end", "shard_token": "shard-end", "channel": "main",
            "created_at": "2026-01-01T00:00:02Z", "response_timeout": ns(5),
            "headers": {"Mcp-Session-Id": ["session_123"]}, "kind": "session_termination"
        }])),
    );
    m.insert(
        "good/poll_response_timeout_variants.json",
        good_poll(json!([
            cmd(
                "req_ms",
                "s1",
                "main",
                ping.clone(),
                json!({"valid_ns": 4_500_000_000u64}),
                json!({})
            ),
            cmd("req_zero", "s2", "main", ping.clone(), ns(0), json!({})),
            cmd(
                "req_null",
                "s3",
                "main",
                ping.clone(),
                json!("absent"),
                json!({})
            ),
            cmd(
                "req_absent",
                "s4",
                "main",
                ping.clone(),
                json!("absent"),
                json!({})
            ),
            cmd(
                "req_units",
                "s5",
                "main",
                json!("session_termination"),
                ns(7200),
                json!({"Mcp-Session-Id": ["session_9"]})
            ),
        ])),
    );
    m.insert(
        "good/poll_channel_absent.json",
        good_poll(json!([
            cmd(
                "req_no_channel",
                "shard-nc",
                "main",
                ping.clone(),
                json!("absent"),
                json!({})
            ),
            cmd(
                "req_no_channel_end",
                "shard-nc2",
                "main",
                json!("session_termination"),
                json!("absent"),
                json!({"Mcp-Session-Id": ["session_x"]})
            ),
        ])),
    );
    m.insert(
        "good/poll_unknown_extra_fields.json",
        good_poll(json!([cmd(
            "req_future",
            "shard-f",
            "harpoon",
            ping.clone(),
            json!("absent"),
            json!({})
        )])),
    );
    m.insert(
        "good/poll_multi_valued_headers.json",
        good_poll(json!([cmd(
            "req_headers",
            "shard-h",
            "main",
            ping.clone(),
            json!("absent"),
            // An empty value list contributes no header; repeated values stay separate, in order.
            json!({
                "Accept": ["application/json", "text/event-stream"],
                "Mcp-Protocol-Version": ["2025-11-25"],
                "Mcp-Session-Id": ["session_123"],
                "X-Forwarded-For": ["203.0.113.1", "198.51.100.7", "192.0.2.9"]
            })
        )])),
    );
    m.insert("good/poll_empty.json", good_poll(json!([])));

    // --- good: response envelopes -------------------------------------------------------------
    m.insert(
        "good/jsonrpc_notify_response.json",
        good_resp(
            RespType::JsonrpcNotify,
            Shape::Notify("notifications/progress"),
        ),
    );
    m.insert(
        "good/response_jsonrpc_result.json",
        good_resp(
            RespType::JsonrpcResponse,
            Shape::Result(Id::from("rpc_123")),
        ),
    );
    m.insert(
        "good/response_jsonrpc_notify.json",
        good_resp(
            RespType::JsonrpcNotify,
            Shape::Notify("notifications/progress"),
        ),
    );
    m.insert(
        "good/response_notify_ack.json",
        good_resp(RespType::NotifyAck, Shape::NoBody),
    );
    m.insert(
        "good/response_session_termination.json",
        good_resp(RespType::SessionTerminationResponse, Shape::NoBody),
    );
    m.insert(
        "good/response_target_error_capability.json",
        good_resp(RespType::JsonrpcResponse, Shape::TargetError(-32003)),
    );
    m.insert(
        "good/response_target_error_version.json",
        good_resp(RespType::JsonrpcResponse, Shape::TargetError(-32004)),
    );
    m.insert(
        "good/response_synthesized_target_http.json",
        synthesized(
            Some(Id::from("rpc_1")),
            TunnelFailure::target_http(503, Some(K::HttpStatus)),
        ),
    );
    m.insert(
        "good/response_synthesized_dns.json",
        synthesized(
            Some(Id::from("rpc_2")),
            TunnelFailure::before_response(S::Dns, Some(K::Dns)),
        ),
    );
    m.insert(
        "good/response_synthesized_tls.json",
        synthesized(
            Some(Id::Number(3)),
            TunnelFailure::before_response(S::Tls, Some(K::Tls)),
        ),
    );
    m.insert(
        "good/response_synthesized_connect.json",
        synthesized(
            Some(Id::Number(4)),
            TunnelFailure::before_response(S::Connect, Some(K::ConnectionRefused)),
        ),
    );
    m.insert(
        "good/response_synthesized_transport_closed.json",
        synthesized(
            Some(Id::from("rpc_123")),
            TunnelFailure::before_response(S::TransportClosed, Some(K::ClosedPipe)),
        ),
    );
    m.insert(
        "good/response_synthesized_timeout.json",
        synthesized(
            Some(Id::Number(6)),
            TunnelFailure::before_response(S::Timeout, Some(K::Timeout)),
        ),
    );
    m.insert(
        "good/response_synthesized_protocol.json",
        synthesized(
            Some(Id::Number(7)),
            TunnelFailure::protocol(K::MalformedJson),
        ),
    );
    m.insert(
        "good/response_synthesized_client_internal.json",
        synthesized(
            None,
            TunnelFailure::before_response(S::ClientInternal, None),
        ),
    );

    // --- good: acknowledgement and API error --------------------------------------------------
    m.insert("good/ack_ok.json", Expect::Ack);
    m.insert(
        "good/api_error.json",
        Expect::ApiError {
            kind: "invalid_request_error",
            code: Some("pending_request_not_found"),
            param: None,
        },
    );
    m.insert(
        "good/api_error_minimal.json",
        Expect::ApiError {
            kind: "server_error",
            code: None,
            param: None,
        },
    );

    // --- bad: poll envelopes ------------------------------------------------------------------
    m.insert(
        "bad/poll_envelope_without_commands.json",
        Expect::Poll(PollExpect {
            schema_accepts: false,
            schema_rejects_commands: &[],
            decoded: None,
        }),
    );
    m.insert(
        "bad/poll_command_without_request_id.json",
        // The bad command is rejected alone; the next one still decodes.
        Expect::Poll(PollExpect {
            schema_accepts: false,
            schema_rejects_commands: &[0],
            decoded: Some(json!([
                {"error": "no_request_id", "index": 0},
                cmd("req_ok", "shard-2", "main", ping.clone(), json!("absent"), json!({})),
            ])),
        }),
    );
    m.insert(
        "bad/poll_jsonrpc_not_an_object.json",
        Expect::Poll(PollExpect {
            schema_accepts: false,
            schema_rejects_commands: &[0, 1, 2],
            decoded: Some(json!([
                {"error": "command", "request_id": "req_array"},
                {"error": "command", "request_id": "req_string"},
                {"error": "command", "request_id": "req_missing"},
            ])),
        }),
    );
    m.insert(
        "bad/poll_response_timeout_malformed.json",
        // The schema's pattern rejects every command but the overflowing one (command 8 matches
        // `^[0-9]+(?:ns|us|ms|s|m|h)$`: a pattern cannot bound magnitude). The decoder fails open
        // for all of them: each command decodes, with an invalid (no-deadline) timeout.
        Expect::Poll(PollExpect {
            schema_accepts: false,
            schema_rejects_commands: &[0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15],
            decoded: Some(Value::Array(
                [
                    "BadUnit",    // 4.5s
                    "NoDigits",   // -1s
                    "NoDigits",   // +1s
                    "BadUnit",    // 1m30s
                    "NoDigits",   // " 1s"
                    "BadUnit",    // "1s "
                    "BadUnit",    // 1e3s
                    "BadUnit",    // 30d
                    "Overflow",   // 999999999999999999999999h
                    "BadUnit",    // 30S
                    "NoDigits",   // ""
                    "NoDigits",   // s
                    "NotAString", // 30
                    "NotAString", // true
                    "NotAString", // {"s": 1}
                    "NotAString", // ["1s"]
                ]
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    cmd(
                        &format!("req_rt_{i}"),
                        &format!("shard-{i}"),
                        "main",
                        json!("jsonrpc"),
                        invalid(e),
                        json!({}),
                    )
                })
                .collect(),
            )),
        }),
    );
    m.insert(
        "bad/poll_unknown_command_type.json",
        // The schema's oneOf matches neither command; the decoder keeps it as Unknown (never
        // reinterpreted as JSON-RPC even though it carries a `jsonrpc` member).
        Expect::Poll(PollExpect {
            schema_accepts: false,
            schema_rejects_commands: &[0],
            decoded: Some(json!([cmd(
                "req_future_type",
                "shard-1",
                "main",
                json!({"unknown": "stream_resume"}),
                json!("absent"),
                json!({})
            )])),
        }),
    );
    m.insert(
        "bad/poll_command_type_absent.json",
        // Without `command_type` both oneOf branches match (neither requires it), so the schema
        // rejects the command; the decoder fails open to the `jsonrpc` default.
        Expect::Poll(PollExpect {
            schema_accepts: false,
            schema_rejects_commands: &[0],
            decoded: Some(json!([cmd(
                "req_legacy",
                "shard-1",
                "main",
                ping.clone(),
                json!("absent"),
                json!({})
            )])),
        }),
    );

    // --- bad: response envelopes --------------------------------------------------------------
    let rejected = || {
        Expect::Response(RespExpect {
            schema_accepts: false,
            failure_schema_accepts: None,
            good: None,
        })
    };
    m.insert("bad/response_shard_token_in_body.json", rejected());
    m.insert("bad/response_unknown_field.json", rejected());
    m.insert("bad/response_missing_resp_code.json", rejected());
    // `resp_json` is opaque to the payload schema, so these pass it; the nested
    // x-tunnel-failure-schema rejects their provenance.
    let bad_failure = || {
        Expect::Response(RespExpect {
            schema_accepts: true,
            failure_schema_accepts: Some(false),
            good: None,
        })
    };
    m.insert(
        "bad/response_failure_target_http_without_status.json",
        bad_failure(),
    );
    m.insert(
        "bad/response_failure_transport_closed_received.json",
        bad_failure(),
    );
    m.insert(
        "bad/response_failure_status_without_target_http.json",
        bad_failure(),
    );
    m.insert(
        "bad/response_failure_status_not_an_error.json",
        bad_failure(),
    );
    m
}

// ---------------------------------------------------------------------------------------------
// Running the expectations
// ---------------------------------------------------------------------------------------------

fn run_poll(name: &str, bytes: &[u8], value: &Value, e: &PollExpect) {
    let c = contract();
    let verdict = check(&c.poll, value);
    assert_eq!(
        verdict.is_ok(),
        e.schema_accepts,
        "{name}: PolledCommandList verdict: {verdict:?}"
    );
    if let Some(commands) = value.get("commands").and_then(Value::as_array) {
        for (i, command) in commands.iter().enumerate() {
            let verdict = check(&c.poll_command, command);
            let expect_reject = e.schema_rejects_commands.contains(&i);
            assert_eq!(
                verdict.is_err(),
                expect_reject,
                "{name}: command {i} schema verdict: {verdict:?}"
            );
        }
    }
    let decoded = decode_poll_body(bytes);
    match (&e.decoded, decoded) {
        (None, Err(DecodeError::Envelope(_))) => {}
        (None, other) => panic!("{name}: expected an envelope error, got {other:?}"),
        (Some(_), Err(err)) => panic!("{name}: expected commands, got {err}"),
        (Some(expected), Ok(commands)) => {
            let got = Value::Array(commands.iter().map(summarize_command).collect());
            assert_eq!(&got, expected, "{name}: decoded commands");
            // Every decoded JSON-RPC payload is exactly the fixture's `jsonrpc` member, and
            // every command keeps a non-empty channel.
            for (i, command) in commands.iter().enumerate() {
                let Ok(command) = command else { continue };
                assert!(!command.channel.is_empty(), "{name}: command {i} channel");
                if let CommandKind::JsonRpc(raw) = &command.kind {
                    let payload: Value = serde_json::from_str(raw.get()).unwrap();
                    assert_eq!(
                        Some(&payload),
                        value.pointer(&format!("/commands/{i}/jsonrpc")),
                        "{name}: command {i} payload preserved"
                    );
                }
            }
        }
    }
}

fn run_response(name: &str, value: &Value, e: &RespExpect) {
    let c = contract();
    let verdict = check(&c.payload, value);
    assert_eq!(
        verdict.is_ok(),
        e.schema_accepts,
        "{name}: TunnelResponsePayload verdict: {verdict:?}"
    );
    let failure = value.pointer("/resp_json/error/data/tunnel_failure");
    match (failure, e.failure_schema_accepts) {
        (None, None) => {}
        (Some(f), Some(accepts)) => {
            let verdict = check(&c.failure, f);
            assert_eq!(
                verdict.is_ok(),
                accepts,
                "{name}: x-tunnel-failure-schema verdict: {verdict:?}"
            );
            if !accepts {
                assert!(
                    !all_failures().iter().any(|ours| &ours.to_json() == f),
                    "{name}: TunnelFailure's constructors can build this invalid provenance"
                );
            }
        }
        (f, expect) => panic!(
            "{name}: tunnel_failure present: {}, expectation: {expect:?}",
            f.is_some()
        ),
    }
    let Some((resp_type, shape)) = &e.good else {
        return;
    };

    // `resp_type` decodes (absent means jsonrpc_response).
    let got_type: RespType = match value.get("resp_type") {
        Some(t) => serde_json::from_value(t.clone()).unwrap(),
        None => RespType::JsonrpcResponse,
    };
    assert_eq!(got_type, *resp_type, "{name}: resp_type");

    // Our encoder reproduces the fixture from its parts.
    let resp_json = value.get("resp_json").filter(|v| !v.is_null());
    let payload = ResponsePayload {
        request_id: value["request_id"].as_str().unwrap().to_owned(),
        channel: value["channel"].as_str().unwrap().to_owned(),
        resp_json: resp_json.map(|v| RawValue::from_string(v.to_string()).unwrap()),
        resp_headers: serde_json::from_value(value["resp_headers"].clone()).unwrap(),
        resp_code: u16::try_from(value["resp_code"].as_u64().unwrap()).unwrap(),
        resp_type: got_type,
    };
    let encoded: Value = serde_json::from_slice(&payload.to_json()).unwrap();
    assert_eq!(
        &encoded, value,
        "{name}: ResponsePayload::to_json round trip"
    );

    match shape {
        Shape::NoBody => assert!(resp_json.is_none(), "{name}: an ack carries no resp_json"),
        Shape::Result(id) => {
            let text = resp_json.unwrap().to_string();
            match Message::parse(&text).unwrap() {
                Message::Response { id: got, .. } => assert_eq!(&got, id, "{name}: id"),
                other => panic!("{name}: expected a result, got {other:?}"),
            }
        }
        Shape::Notify(method) => {
            let text = resp_json.unwrap().to_string();
            match Message::parse(&text).unwrap() {
                Message::Notification { method: got, .. } => assert_eq!(got, *method),
                other => panic!("{name}: expected a notification, got {other:?}"),
            }
        }
        Shape::TargetError(code) => {
            let text = resp_json.unwrap().to_string();
            match Message::parse(&text).unwrap() {
                Message::Error { error, .. } => {
                    assert_eq!(error.code, *code, "{name}: code preserved");
                    assert_ne!(error.code, -32603);
                    let data = error.data.expect("target error data preserved");
                    assert_eq!(Some(&data), value.pointer("/resp_json/error/data"));
                    assert!(data.get("tunnel_failure").is_none());
                }
                other => panic!("{name}: expected an error, got {other:?}"),
            }
        }
        Shape::Synthesized(id, failure) => {
            let ours = synthesize(id.as_ref(), failure);
            let ours_json: Value = serde_json::from_str(ours.resp_json.get()).unwrap();
            assert_eq!(
                Some(&ours_json),
                resp_json,
                "{name}: synthesize reproduces resp_json"
            );
            assert_eq!(
                u64::from(ours.resp_code),
                value["resp_code"].as_u64().unwrap()
            );
            assert_eq!(ours.resp_code, SYNTHESIZED_RESP_CODE);
        }
    }
}

fn run_fixture(rel: &str, expect: &Expect) {
    let path = fixtures_dir().join(rel);
    let (bytes, value) = read_json(&path);
    let c = contract();
    match expect {
        Expect::Poll(e) => run_poll(rel, &bytes, &value, e),
        Expect::Response(e) => run_response(rel, &value, e),
        Expect::Ack => {
            check(&c.ack, &value).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let ack: ResponseAck = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(ack.status, "ok");
        }
        Expect::ApiError { kind, code, param } => {
            check(&c.api_error, &value).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let parsed = ApiErrorResponse::parse(&bytes).expect("API error body decodes");
            assert_eq!(parsed.error.kind.as_deref(), Some(*kind), "{rel}: type");
            assert_eq!(parsed.error.code.as_deref(), *code, "{rel}: code");
            assert_eq!(parsed.error.param.as_deref(), *param, "{rel}: param");
            assert_eq!(
                Some(parsed.error.message.as_str()),
                value.pointer("/error/message").and_then(Value::as_str)
            );
        }
    }
}

/// Every fixture file under `good/` and `bad/`, as `good/<name>.json`.
fn fixture_files() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for group in ["good", "bad"] {
        let dir = fixtures_dir().join(group);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().expect("UTF-8 fixture name");
            out.insert(format!("{group}/{name}"));
        }
    }
    out
}

/// Every `TunnelFailure` our constructors can build from the sources, kinds and statuses that
/// matter (all of them, and every status from 0 to 1000 plus the extremes).
fn all_failures() -> &'static [TunnelFailure] {
    static ALL: OnceLock<Vec<TunnelFailure>> = OnceLock::new();
    ALL.get_or_init(|| {
        let kinds: Vec<Option<TransportErrorKind>> = std::iter::once(None)
            .chain(TransportErrorKind::ALL.into_iter().map(Some))
            .collect();
        let mut out = Vec::new();
        for &kind in &kinds {
            for source in FailureSource::ALL {
                out.push(TunnelFailure::before_response(source, kind));
            }
            for status in (0..=1000).chain([u16::MAX]) {
                out.push(TunnelFailure::target_http(status, kind));
            }
        }
        for kind in TransportErrorKind::ALL {
            out.push(TunnelFailure::protocol(kind));
        }
        out
    })
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn every_fixture_file_has_an_expectation_and_every_expectation_a_file() {
    let files = fixture_files();
    let expected: BTreeSet<String> = expectations().keys().map(|k| (*k).to_owned()).collect();
    let uncovered: Vec<_> = files.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&files).collect();
    assert!(
        uncovered.is_empty(),
        "fixture files with no expectation in tests/fixtures.rs: {uncovered:?}"
    );
    assert!(
        missing.is_empty(),
        "expectations whose fixture file is missing: {missing:?}"
    );
}

#[test]
fn every_fixture_is_explained_in_the_readme() {
    let readme = std::fs::read_to_string(fixtures_dir().join("README.md")).unwrap();
    for file in fixture_files() {
        let name = file.rsplit('/').next().unwrap();
        assert!(
            readme.contains(name),
            "fixtures/tunnel/README.md does not mention {name}"
        );
    }
}

#[test]
fn good_fixtures_validate_against_the_contract_and_decode_to_the_expected_values() {
    let all = expectations();
    let good: Vec<_> = all.iter().filter(|(k, _)| k.starts_with("good/")).collect();
    assert!(
        good.len() >= 25,
        "the good fixture set shrank: {}",
        good.len()
    );
    for (rel, expect) in good {
        run_fixture(rel, expect);
    }
}

#[test]
fn bad_fixtures_are_rejected_or_fail_open_exactly_as_expected() {
    let all = expectations();
    let bad: Vec<_> = all.iter().filter(|(k, _)| k.starts_with("bad/")).collect();
    assert!(bad.len() >= 10, "the bad fixture set shrank: {}", bad.len());
    for (rel, expect) in bad {
        run_fixture(rel, expect);
    }
}

#[test]
fn the_contract_copies_are_identical_to_the_vendored_spec() {
    for name in ["poll_command_envelope.json", "jsonrpc_notify_response.json"] {
        let ours = std::fs::read(fixtures_dir().join("good").join(name)).unwrap();
        let theirs = std::fs::read(spec_dir().join("tunnel").join(name)).unwrap();
        assert_eq!(
            ours, theirs,
            "fixtures/tunnel/good/{name} drifted from the vendored spec copy fixtures/spec/tunnel/{name}"
        );
    }
}

#[test]
fn validators_are_not_vacuous() {
    let c = contract();
    assert!(check(&c.poll, &json!({})).is_err());
    assert!(check(&c.poll_command, &json!({"command_type": "jsonrpc"})).is_err());
    assert!(check(&c.payload, &json!({})).is_err());
    assert!(check(&c.payload, &json!({"request_id": "r", "resp_code": 200})).is_ok());
    assert!(check(&c.ack, &json!({"status": "nope"})).is_err());
    assert!(check(&c.api_error, &json!({"error": {}})).is_err());
    assert!(check(
        &c.failure,
        &json!({"version": 0, "source": "dns", "upstream_response_received": false})
    )
    .is_err());
    assert!(check(&c.failure, &json!({"version": 2, "source": "future", "upstream_response_received": false, "extra": 1})).is_ok(),
        "readers tolerate future versions, sources and fields");
    assert_eq!(
        c.openapi.pointer("/openapi").and_then(Value::as_str),
        Some("3.1.0"),
        "the validators assume OpenAPI 3.1 (JSON Schema 2020-12) schema objects"
    );
}

#[test]
fn every_synthesized_tunnel_failure_matches_the_failure_schema() {
    let c = contract();
    let ids = [None, Some(Id::Number(0)), Some(Id::from("rpc"))];
    for (n, failure) in all_failures().iter().enumerate() {
        let id = &ids[n % ids.len()];
        let s = synthesize(id.as_ref(), failure);
        let resp: Value = serde_json::from_str(s.resp_json.get()).unwrap();
        let tf = resp.pointer("/error/data/tunnel_failure").unwrap();
        check(&c.failure, tf).unwrap_or_else(|e| panic!("{failure:?} -> {tf}: {e}"));
        // And the whole synthesized payload validates as a response envelope.
        let payload = ResponsePayload {
            request_id: "req".into(),
            channel: "main".into(),
            resp_json: Some(s.resp_json),
            resp_headers: BTreeMap::new(),
            resp_code: s.resp_code,
            resp_type: RespType::JsonrpcResponse,
        };
        let v: Value = serde_json::from_slice(&payload.to_json()).unwrap();
        check(&c.payload, &v).unwrap_or_else(|e| panic!("{failure:?}: {e}"));
    }
}

#[test]
fn response_payload_to_json_matches_the_schema_for_every_resp_type() {
    let c = contract();
    let mut upstream = Headers::new();
    for (n, v) in [
        ("Content-Type", "application/json"),
        ("Connection", "keep-alive, X-Hop"),
        ("X-Hop", "1"),
        ("Mcp-Session-Id", "s1"),
        ("WWW-Authenticate", "Bearer a"),
        ("www-authenticate", "DPoP b"),
        ("Set-Cookie", "secret=1"),
    ] {
        upstream.append(n, v).unwrap();
    }
    let resp_headers = filter_response_headers(&upstream);
    let bodies = [
        None,
        Some(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        Some(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#),
    ];
    for resp_type in [
        RespType::JsonrpcResponse,
        RespType::JsonrpcNotify,
        RespType::NotifyAck,
        RespType::SessionTerminationResponse,
    ] {
        for body in bodies {
            let payload = ResponsePayload {
                request_id: "req_1".into(),
                channel: "harpoon".into(),
                resp_json: body.map(|b| RawValue::from_string(b.to_owned()).unwrap()),
                resp_headers: resp_headers.clone(),
                resp_code: 200,
                resp_type,
            };
            let v: Value = serde_json::from_slice(&payload.to_json()).unwrap();
            check(&c.payload, &v).unwrap_or_else(|e| panic!("{resp_type:?}: {e}"));
            assert!(v.get("shard_token").is_none());
            assert_eq!(v["resp_type"], resp_type.as_str());
        }
    }
}
