//! Transcript tests for multi round-trip requests (`basic/patterns/mrtr.mdx`) and the
//! elicitation answers carried in them, driven by the spec's own examples
//! (`fixtures/mcp/examples/`, copied from `shared/spec/mcp-2026-07-28/examples/`).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use mcpwire_core::jsonrpc::Id;
use mcpwire_core::mcp::elicitation::{AnswerError, SensitiveCategory, UrlConsent};
use mcpwire_core::mcp::mrtr::{
    classify_result, InputCapabilities, InputRequiredError, InputRequiredResult, MrtrError,
    MrtrRound, ResultKind, DEFAULT_MAX_ROUNDS,
};
use mcpwire_core::mcp::{ElicitAnswer, ElicitationRequest, InputAnswer, InputRequest};
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

const INPUT_REQUIRED: &str =
    include_str!("../../fixtures/mcp/examples/InputRequiredResult-elicitation-sampling-state.json");
const STATE_ONLY: &str =
    include_str!("../../fixtures/mcp/examples/InputRequiredResult-state-only.json");
const INPUT_RESPONSES: &str =
    include_str!("../../fixtures/mcp/examples/InputResponses-elicitation-sampling.json");
const CALL_TOOL: &str = include_str!("../../fixtures/mcp/examples/CallToolRequest.json");
const SAMPLING_RESULT: &str = include_str!("../../fixtures/mcp/examples/CreateMessageResult.json");
const ROOTS_RESULT: &str = include_str!("../../fixtures/mcp/examples/ListRootsResult.json");

fn all_caps() -> InputCapabilities {
    InputCapabilities {
        elicitation_form: true,
        elicitation_url: true,
        sampling: true,
        sampling_tools: true,
        roots: true,
    }
}

fn form_only() -> InputCapabilities {
    InputCapabilities {
        elicitation_form: true,
        ..InputCapabilities::default()
    }
}

/// The `params` JSON text of the spec's `tools/call` example.
fn call_tool_params() -> String {
    #[derive(Deserialize)]
    struct Req<'a> {
        #[serde(borrow)]
        params: &'a RawValue,
    }
    let r: Req<'_> = serde_json::from_str(CALL_TOOL).unwrap();
    r.params.get().to_owned()
}

fn round(caps: InputCapabilities) -> MrtrRound {
    MrtrRound::new(
        Id::from("call-tool-example"),
        "tools/call",
        &call_tool_params(),
        caps,
    )
    .unwrap()
}

fn parsed(json: &str) -> InputRequiredResult {
    InputRequiredResult::parse(json).unwrap()
}

fn accept(v: Value) -> InputAnswer {
    InputAnswer::Elicitation(ElicitAnswer::Accept(v.as_object().unwrap().clone()))
}

fn form_request(key: &str, state: Option<&str>) -> String {
    let mut s = format!(
        r#"{{"resultType":"input_required","inputRequests":{{"{key}":{{"method":"elicitation/create",
        "params":{{"message":"m","requestedSchema":{{"type":"object","properties":{{"ok":{{"type":"boolean"}}}},"required":["ok"]}}}}}}}}"#
    );
    if let Some(state) = state {
        s.push_str(&format!(r#","requestState":{state}"#));
    }
    s.push('}');
    s
}

#[derive(Deserialize)]
struct RetryParams {
    #[serde(rename = "inputResponses", default)]
    input_responses: Option<Map<String, Value>>,
    #[serde(rename = "requestState", default)]
    request_state: Option<Box<RawValue>>,
}

fn retry_params(json: &str) -> RetryParams {
    serde_json::from_str(json).unwrap()
}

/// basic/patterns/mrtr.mdx, "InputRequiredResult": the spec example parses into keyed input
/// requests, in order, with `requestState` kept as received.
#[test]
fn spec_example_input_required_result_parses() {
    let r = parsed(INPUT_REQUIRED);
    let keys: Vec<&str> = r.input_requests().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["github_login", "capital_of_france"]);
    assert!(matches!(
        r.input_requests()[0].1,
        InputRequest::Elicitation(ElicitationRequest::Form(_))
    ));
    let InputRequest::Sampling(s) = &r.input_requests()[1].1 else {
        panic!("sampling request");
    };
    assert!(!s.uses_tools);
    assert_eq!(s.params["maxTokens"], 100);
    assert_eq!(
        r.request_state_json(),
        Some(r#""eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0""#)
    );
}

/// basic/index.mdx "resultType" (digest §2): absent means complete; `input_required` is parsed;
/// an unknown value is invalid.
#[test]
fn absent_result_type_is_complete_and_unknown_is_invalid() {
    assert!(matches!(
        classify_result("tools/call", r#"{"content":[]}"#).unwrap(),
        ResultKind::Complete
    ));
    assert!(matches!(
        classify_result("tools/call", r#"{"resultType":"complete","content":[]}"#).unwrap(),
        ResultKind::Complete
    ));
    assert!(matches!(
        classify_result("prompts/get", INPUT_REQUIRED).unwrap(),
        ResultKind::InputRequired(_)
    ));
    assert_eq!(
        classify_result("tools/call", r#"{"resultType":"task"}"#).unwrap_err(),
        InputRequiredError::UnknownResultType("task".into())
    );
    assert!(matches!(
        classify_result("tools/call", "[1]").unwrap_err(),
        InputRequiredError::Json(_)
    ));
}

/// basic/patterns/mrtr.mdx, "Supported Requests": servers MUST NOT send InputRequiredResult on
/// any request other than tools/call, prompts/get and resources/read.
#[test]
fn input_required_on_other_methods_is_a_protocol_error() {
    for method in [
        "tools/list",
        "server/discover",
        "resources/list",
        "completion/complete",
    ] {
        assert_eq!(
            classify_result(method, INPUT_REQUIRED).unwrap_err(),
            InputRequiredError::NotAllowedForMethod(method.into())
        );
        assert_eq!(
            MrtrRound::new(Id::from(1), method, "{}", all_caps()).unwrap_err(),
            MrtrError::MethodNotEligible(method.into())
        );
    }
    for method in ["tools/call", "prompts/get", "resources/read"] {
        assert!(MrtrRound::new(Id::from(1), method, "{}", all_caps()).is_ok());
    }
}

/// basic/patterns/mrtr.mdx, "Server Requirements" 5: at least one of inputRequests or
/// requestState.
#[test]
fn input_required_without_requests_or_state_is_refused() {
    assert_eq!(
        InputRequiredResult::parse(r#"{"resultType":"input_required"}"#).unwrap_err(),
        InputRequiredError::Empty
    );
}

/// schema.json `InputRequiredResult.requestState` is a string.
#[test]
fn request_state_must_be_a_string() {
    for state in ["null", "5", "{}", "[\"a\"]"] {
        let json = format!(r#"{{"resultType":"input_required","requestState":{state}}}"#);
        assert_eq!(
            InputRequiredResult::parse(&json).unwrap_err(),
            InputRequiredError::RequestStateNotString,
            "{state}"
        );
    }
}

/// basic/patterns/mrtr.mdx, "Server Requirements" 2: values MUST be ElicitRequest,
/// CreateMessageRequest or ListRootsRequest; keys MUST be unique.
#[test]
fn unknown_input_method_and_duplicate_keys_are_refused() {
    let bad = r#"{"resultType":"input_required","inputRequests":{"k":{"method":"tools/call","params":{}}}}"#;
    assert_eq!(
        InputRequiredResult::parse(bad).unwrap_err(),
        InputRequiredError::UnknownInputMethod {
            key: "k".into(),
            method: "tools/call".into()
        }
    );
    let dup = r#"{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"},"k":{"method":"roots/list"}}}"#;
    assert!(matches!(
        InputRequiredResult::parse(dup).unwrap_err(),
        InputRequiredError::InputRequestsNotObject(_)
    ));
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 1-3 and the InputResponses example: the retry
/// resends the original params with `inputResponses` under the same keys and `requestState`
/// unchanged, under a new id.
#[test]
fn retry_resends_original_params_with_input_responses_and_request_state() {
    let mut r = round(all_caps());
    let events = r.handle_input_required(parsed(INPUT_REQUIRED)).unwrap();
    let keys: Vec<&str> = events.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["github_login", "capital_of_france"]);
    r.answer("github_login", accept(json!({"name": "octocat"})))
        .unwrap();
    r.answer(
        "capital_of_france",
        InputAnswer::Sampling(serde_json::from_str(SAMPLING_RESULT).unwrap()),
    )
    .unwrap();
    let retry = r.build_retry(Id::from(2), None).unwrap();
    assert_eq!(retry.id(), &Id::from(2));
    assert_eq!(retry.method(), "tools/call");
    insta::assert_snapshot!("mrtr_retry_request_body", retry.body());

    let body: Value = serde_json::from_str(retry.body()).unwrap();
    let original: Value = serde_json::from_str(CALL_TOOL).unwrap();
    assert_eq!(body["params"]["name"], original["params"]["name"]);
    assert_eq!(body["params"]["arguments"], original["params"]["arguments"]);
    assert_eq!(body["params"]["_meta"], original["params"]["_meta"]);
    let expected: Value = serde_json::from_str(INPUT_RESPONSES).unwrap();
    assert_eq!(body["params"]["inputResponses"], expected);
    assert_eq!(
        retry_params(retry.params_json())
            .request_state
            .unwrap()
            .get(),
        r#""eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0""#
    );
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 2: the client MUST echo back the exact value
/// of requestState, without parsing or modifying it (escapes and all).
#[test]
fn request_state_is_echoed_byte_exact() {
    let state = r#""a\/b\u00e9\ud83d\ude00 \"q\" \n""#;
    let mut r = round(form_only());
    r.handle_input_required(parsed(&form_request("k", Some(state))))
        .unwrap();
    r.answer("k", accept(json!({"ok": true}))).unwrap();
    let retry = r.build_retry(Id::from(2), None).unwrap();
    assert!(retry
        .params_json()
        .ends_with(&format!(r#","requestState":{state}}}"#)));
    assert_eq!(
        retry_params(retry.params_json())
            .request_state
            .unwrap()
            .get(),
        state
    );
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 2: without requestState in the result the
/// retry MUST NOT include one.
#[test]
fn retry_omits_request_state_when_none_was_sent() {
    let mut r = round(form_only());
    r.handle_input_required(parsed(&form_request("k", None)))
        .unwrap();
    r.answer("k", accept(json!({"ok": false}))).unwrap();
    let retry = r.build_retry(Id::from(2), None).unwrap();
    assert!(!retry.params_json().contains("requestState"));
    assert!(retry_params(retry.params_json()).request_state.is_none());
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 1: with no inputRequests the client MAY
/// retry immediately (the load-shedding case), echoing only requestState.
#[test]
fn state_only_result_allows_immediate_retry_without_input_responses() {
    let mut r = round(InputCapabilities::default());
    let events = r.handle_input_required(parsed(STATE_ONLY)).unwrap();
    assert!(events.is_empty());
    let retry = r.build_retry(Id::from(2), None).unwrap();
    let p = retry_params(retry.params_json());
    assert!(p.input_responses.is_none());
    assert_eq!(
        p.request_state.unwrap().get(),
        r#""eyJwcm9ncmVzcyI6IjUwJSIsInN0YXRlIjoicHJvY2Vzc2luZyJ9""#
    );
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 1: the client MUST construct the requested
/// inputs before retrying, so every key must be answered.
#[test]
fn every_input_request_must_be_answered_before_retry() {
    let mut r = round(all_caps());
    r.handle_input_required(parsed(INPUT_REQUIRED)).unwrap();
    r.answer("github_login", accept(json!({"name": "octocat"})))
        .unwrap();
    assert_eq!(r.unanswered(), ["capital_of_france"]);
    assert_eq!(
        r.build_retry(Id::from(2), None).unwrap_err(),
        MrtrError::MissingAnswers(vec!["capital_of_france".into()])
    );
}

/// basic/patterns/mrtr.mdx, "InputResponses": keys correspond to the keys in InputRequests,
/// so an answer under another key is refused.
#[test]
fn answer_to_unknown_key_is_refused() {
    let mut r = round(all_caps());
    r.handle_input_required(parsed(INPUT_REQUIRED)).unwrap();
    assert_eq!(
        r.answer("nope", InputAnswer::Elicitation(ElicitAnswer::Decline))
            .unwrap_err(),
        MrtrError::UnknownKey("nope".into())
    );
}

/// basic/patterns/mrtr.mdx, "InputResponses": each value is the result for its request kind.
#[test]
fn answer_of_the_wrong_kind_is_refused() {
    let mut r = round(all_caps());
    r.handle_input_required(parsed(INPUT_REQUIRED)).unwrap();
    assert!(matches!(
        r.answer(
            "capital_of_france",
            InputAnswer::Elicitation(ElicitAnswer::Cancel)
        )
        .unwrap_err(),
        MrtrError::AnswerKindMismatch { .. }
    ));
    assert!(matches!(
        r.answer(
            "capital_of_france",
            InputAnswer::Sampling(json!({"role": "assistant"}))
        )
        .unwrap_err(),
        MrtrError::BadResult { .. }
    ));
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 3: the JSON-RPC id MUST differ between the
/// initial request and the retry (and between retries).
#[test]
fn retry_needs_a_new_id() {
    let mut r = round(InputCapabilities::default());
    r.handle_input_required(parsed(STATE_ONLY)).unwrap();
    assert_eq!(
        r.build_retry(Id::from("call-tool-example"), None)
            .unwrap_err(),
        MrtrError::IdReused(Id::from("call-tool-example"))
    );
    r.build_retry(Id::from(2), None).unwrap();
    r.handle_input_required(parsed(STATE_ONLY)).unwrap();
    assert_eq!(
        r.build_retry(Id::from(2), None).unwrap_err(),
        MrtrError::IdReused(Id::from(2))
    );
    assert_eq!(r.build_retry(Id::from(3), None).unwrap().id(), &Id::from(3));
}

/// basic/patterns/mrtr.mdx, "Server Requirements" 7 and client/sampling.mdx "Capabilities":
/// a sampling request is honoured only when the host declared `sampling`.
#[test]
fn sampling_request_needs_declared_sampling_capability() {
    let mut r = round(form_only());
    let e = r.handle_input_required(parsed(INPUT_REQUIRED)).unwrap_err();
    assert_eq!(
        e,
        MrtrError::UndeclaredCapability {
            key: "capital_of_france".into(),
            capability: "sampling"
        }
    );
    assert!(r.is_finished());
}

/// client/sampling.mdx, "Tools in Sampling": tool-enabled sampling needs `sampling.tools`.
#[test]
fn sampling_with_tools_needs_sampling_tools_capability() {
    let json = r#"{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage",
        "params":{"messages":[],"maxTokens":5,"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}}}"#;
    let mut caps = all_caps();
    caps.sampling_tools = false;
    let mut r = round(caps);
    assert_eq!(
        r.handle_input_required(parsed(json)).unwrap_err(),
        MrtrError::UndeclaredCapability {
            key: "s".into(),
            capability: "sampling.tools"
        }
    );
    assert!(round(all_caps())
        .handle_input_required(parsed(json))
        .is_ok());
}

/// client/roots.mdx, "Capabilities": a roots request is honoured only when the host declared
/// `roots`; the answer's roots are `file://` URIs.
#[test]
fn roots_request_needs_declared_roots_capability() {
    let json = r#"{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}"#;
    assert_eq!(
        round(form_only())
            .handle_input_required(parsed(json))
            .unwrap_err(),
        MrtrError::UndeclaredCapability {
            key: "r".into(),
            capability: "roots"
        }
    );
    let mut r = round(all_caps());
    r.handle_input_required(parsed(json)).unwrap();
    assert!(matches!(
        r.answer(
            "r",
            InputAnswer::Roots(json!({"roots":[{"uri":"https://x"}]}))
        )
        .unwrap_err(),
        MrtrError::BadResult { .. }
    ));
    r.answer(
        "r",
        InputAnswer::Roots(serde_json::from_str(ROOTS_RESULT).unwrap()),
    )
    .unwrap();
    let retry = r.build_retry(Id::from(2), None).unwrap();
    assert_eq!(
        retry_params(retry.params_json()).input_responses.unwrap()["r"]["roots"][0]["uri"],
        "file:///home/user/projects/myproject"
    );
}

/// client/elicitation.mdx, "Capabilities": servers MUST NOT send elicitation requests with
/// modes the client does not support.
#[test]
fn elicitation_mode_needs_declared_mode() {
    let url = r#"{"resultType":"input_required","inputRequests":{"u":{"method":"elicitation/create",
        "params":{"mode":"url","message":"m","url":"https://mcp.example.com/x"}}}}"#;
    assert_eq!(
        round(form_only())
            .handle_input_required(parsed(url))
            .unwrap_err(),
        MrtrError::UndeclaredCapability {
            key: "u".into(),
            capability: "elicitation.url"
        }
    );
    let url_only = InputCapabilities {
        elicitation_url: true,
        ..InputCapabilities::default()
    };
    assert_eq!(
        round(url_only)
            .handle_input_required(parsed(&form_request("f", None)))
            .unwrap_err(),
        MrtrError::UndeclaredCapability {
            key: "f".into(),
            capability: "elicitation.form"
        }
    );
}

/// basic/patterns/mrtr.mdx, "Server Requirements" 8 and digest §17.5: servers may ask again and
/// again; the client stops after a round limit (default 10).
#[test]
fn round_limit_stops_endless_input_required() {
    let mut r = round(InputCapabilities::default());
    for n in 1..=DEFAULT_MAX_ROUNDS {
        r.handle_input_required(parsed(STATE_ONLY)).unwrap();
        assert_eq!(r.rounds(), n);
        r.build_retry(Id::from(i64::from(n) + 1), None).unwrap();
    }
    assert_eq!(
        r.handle_input_required(parsed(STATE_ONLY)).unwrap_err(),
        MrtrError::RoundLimitExceeded { limit: 10 }
    );
    assert!(r.is_finished());

    let mut r = round(InputCapabilities::default()).with_max_rounds(1);
    r.handle_input_required(parsed(STATE_ONLY)).unwrap();
    r.build_retry(Id::from(2), None).unwrap();
    assert_eq!(
        r.handle_input_required(parsed(STATE_ONLY)).unwrap_err(),
        MrtrError::RoundLimitExceeded { limit: 1 }
    );
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 2 and 4: each retry carries only the latest
/// round's answers and state; a second round without requestState sends none.
#[test]
fn each_round_carries_only_its_own_answers_and_state() {
    let mut r = round(form_only());
    r.handle_input_required(parsed(&form_request("first", Some(r#""S1""#))))
        .unwrap();
    r.answer("first", accept(json!({"ok": true}))).unwrap();
    let one = r.build_retry(Id::from(2), None).unwrap();
    assert_eq!(
        retry_params(one.params_json()).request_state.unwrap().get(),
        r#""S1""#
    );
    r.handle_input_required(parsed(&form_request("second", None)))
        .unwrap();
    r.answer("second", accept(json!({"ok": false}))).unwrap();
    let two = r.build_retry(Id::from(3), None).unwrap();
    let p = retry_params(two.params_json());
    assert!(p.request_state.is_none());
    let keys: Vec<&String> = p.input_responses.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["second"]);
}

/// basic/patterns/mrtr.mdx, "Client Requirements" 4: inputRequests and requestState MUST NOT
/// be used for any other request, including parallel ones.
#[test]
fn parallel_requests_do_not_share_answers_or_state() {
    let mut a = round(form_only());
    let mut b = MrtrRound::new(
        Id::from(10),
        "resources/read",
        r#"{"uri":"file:///x","_meta":{}}"#,
        form_only(),
    )
    .unwrap();
    a.handle_input_required(parsed(&form_request("k", Some(r#""A""#))))
        .unwrap();
    b.handle_input_required(parsed(&form_request("k", None)))
        .unwrap();
    a.answer("k", accept(json!({"ok": true}))).unwrap();
    assert_eq!(b.unanswered(), ["k"]);
    b.answer("k", InputAnswer::Elicitation(ElicitAnswer::Decline))
        .unwrap();
    let ra = a.build_retry(Id::from(2), None).unwrap();
    let rb = b.build_retry(Id::from(11), None).unwrap();
    assert!(!rb.body().contains(r#""A""#));
    assert_eq!(
        retry_params(rb.params_json()).input_responses.unwrap()["k"],
        json!({"action": "decline"})
    );
    assert_eq!(
        retry_params(ra.params_json()).input_responses.unwrap()["k"],
        json!({"action": "accept", "content": {"ok": true}})
    );
    assert_eq!(rb.method(), "resources/read");
}

/// Digest §8 "Caching" and client guide "Responding to elicitation": results of retries that
/// carry inputResponses/requestState MUST NOT be cached.
#[test]
fn retry_is_never_cacheable() {
    let mut r = round(InputCapabilities::default());
    r.handle_input_required(parsed(STATE_ONLY)).unwrap();
    assert!(!r.build_retry(Id::from(2), None).unwrap().cacheable());
}

/// client/elicitation.mdx, "Form Mode Security" 2 and client guide: the response is validated
/// against the schema before it is returned to the server.
#[test]
fn elicitation_answer_is_validated_before_retry() {
    let mut r = round(all_caps());
    r.handle_input_required(parsed(INPUT_REQUIRED)).unwrap();
    assert_eq!(
        r.answer("github_login", accept(json!({"login": "octocat"})))
            .unwrap_err(),
        MrtrError::Answer {
            key: "github_login".into(),
            source: AnswerError::MissingRequired {
                field: "name".into()
            }
        }
    );
    assert_eq!(r.unanswered(), ["github_login", "capital_of_france"]);
}

/// client/elicitation.mdx, "Safe URL Handling" 2-3: URL mode is surfaced with the full URL and
/// `requires_consent`; accepting needs the consent recorded for that URL and sends no content.
#[test]
fn url_elicitation_accept_needs_recorded_consent() {
    let json = r#"{"resultType":"input_required","inputRequests":{"u":{"method":"elicitation/create",
        "params":{"mode":"url","message":"Connect","url":"https://mcp.example.com/connect?x=1"}}},
        "requestState":"st"}"#;
    let mut r = round(all_caps());
    let events = r.handle_input_required(parsed(json)).unwrap();
    let InputRequest::Elicitation(ElicitationRequest::Url(u)) = &events[0].request else {
        panic!("url elicitation");
    };
    assert!(u.requires_consent);
    assert_eq!(u.url, "https://mcp.example.com/connect?x=1");
    assert!(matches!(
        r.answer("u", accept(json!({}))).unwrap_err(),
        MrtrError::Answer {
            source: AnswerError::ContentForUrl,
            ..
        }
    ));
    r.answer(
        "u",
        InputAnswer::Elicitation(ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&u.url))),
    )
    .unwrap();
    let retry = r.build_retry(Id::from(2), None).unwrap();
    assert_eq!(
        retry_params(retry.params_json()).input_responses.unwrap()["u"],
        json!({"action": "accept"})
    );
}

/// client/elicitation.mdx, "Form Mode Security" 1 / client guide: a form asking for secrets is
/// flagged suspicious in the event the host sees.
#[test]
fn suspicious_form_is_flagged_in_the_event() {
    let json = r#"{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create",
        "params":{"message":"Sign in","requestedSchema":{"type":"object","properties":{
        "username":{"type":"string"},"password":{"type":"string"}}}}}}}"#;
    let events = round(form_only())
        .handle_input_required(parsed(json))
        .unwrap();
    let InputRequest::Elicitation(ElicitationRequest::Form(f)) = &events[0].request else {
        panic!("form elicitation");
    };
    assert_eq!(f.suspicious.len(), 1);
    assert_eq!(f.suspicious[0].field.as_deref(), Some("password"));
    assert_eq!(f.suspicious[0].category, SensitiveCategory::Password);
}

/// Digest §8 rule 5: the retry resends the original params with a fresh `_meta`; stale
/// inputResponses/requestState in the original params are not resent.
#[test]
fn fresh_meta_replaces_original_meta_and_stale_fields_are_dropped() {
    let params = r#"{"name":"t","_meta":{"old":1},"inputResponses":{"x":{}},"requestState":"old"}"#;
    let mut r = MrtrRound::new(Id::from(1), "tools/call", params, all_caps()).unwrap();
    r.handle_input_required(parsed(STATE_ONLY)).unwrap();
    let retry = r
        .build_retry(
            Id::from(2),
            Some(r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#),
        )
        .unwrap();
    assert_eq!(
        retry.params_json(),
        r#"{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"requestState":"eyJwcm9ncmVzcyI6IjUwJSIsInN0YXRlIjoicHJvY2Vzc2luZyJ9"}"#
    );
    assert!(matches!(
        r.build_retry(Id::from(3), None).unwrap_err(),
        MrtrError::WrongPhase(_)
    ));
}

/// Secrets stay out of Debug: requestState and the retry body are shown by size only.
#[test]
fn debug_output_hides_request_state_and_answers() {
    let mut r = round(form_only());
    let result = parsed(&form_request("k", Some(r#""SECRET-STATE""#)));
    assert!(!format!("{result:?}").contains("SECRET-STATE"));
    r.handle_input_required(result).unwrap();
    r.answer("k", accept(json!({"ok": true}))).unwrap();
    let retry = r.build_retry(Id::from(2), None).unwrap();
    assert!(!format!("{retry:?}").contains("SECRET-STATE"));
    assert!(!format!("{r:?}").contains("SECRET-STATE"));
}

/// Spells `s` as a JSON string literal, choosing per character between the literal character
/// and an escape (driven by `choices`), so the same value has many texts.
fn spell(s: &str, choices: &[bool]) -> String {
    let mut out = String::from("\"");
    for (i, c) in s.chars().enumerate() {
        let escape = choices
            .get(i % choices.len().max(1))
            .copied()
            .unwrap_or(false);
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if escape => out.push_str("\\/"),
            c if (c as u32) < 0x20 || escape => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

proptest! {
    /// basic/patterns/mrtr.mdx, "Client Requirements" 2: for any requestState text (any
    /// string, any spelling of it), the retry carries exactly that text.
    #[test]
    fn request_state_text_is_byte_identical_in_retry(
        value in any::<String>(),
        choices in proptest::collection::vec(any::<bool>(), 1..8),
        pad in "[ \t\n]{0,3}",
    ) {
        let text = spell(&value, &choices);
        let json = format!(r#"{{"resultType":"input_required","requestState":{pad}{text}{pad}}}"#);
        let result = InputRequiredResult::parse(&json).unwrap();
        prop_assert_eq!(result.request_state_json(), Some(text.as_str()));
        let mut r = round(InputCapabilities::default());
        r.handle_input_required(result).unwrap();
        let retry = r.build_retry(Id::from(2), None).unwrap();
        let suffix = format!(r#","requestState":{text}}}"#);
        prop_assert!(retry.params_json().ends_with(&suffix));
        let p = retry_params(retry.params_json());
        let state = p.request_state.unwrap();
        prop_assert_eq!(state.get(), text.as_str());
    }

    /// basic/patterns/mrtr.mdx, "InputResponses": the retry's inputResponses keys equal the
    /// inputRequests keys, whatever the keys are.
    #[test]
    fn input_responses_keys_equal_input_requests_keys(
        keys in proptest::collection::btree_set(any::<String>(), 0..6),
        decline in any::<bool>(),
    ) {
        let mut requests = Map::new();
        for (i, k) in keys.iter().enumerate() {
            let req = if i % 2 == 0 {
                json!({"method":"roots/list"})
            } else {
                json!({"method":"elicitation/create","params":{"message":"m",
                    "requestedSchema":{"type":"object","properties":{}}}})
            };
            requests.insert(k.clone(), req);
        }
        let json = json!({"resultType":"input_required","inputRequests":requests,"requestState":"s"});
        let mut r = round(all_caps());
        let events = r.handle_input_required(parsed(&json.to_string())).unwrap();
        let asked: BTreeSet<String> = events.iter().map(|e| e.key.clone()).collect();
        prop_assert_eq!(&asked, &keys);
        for e in &events {
            let answer = match e.request {
                InputRequest::Roots => InputAnswer::Roots(json!({"roots":[]})),
                _ if decline => InputAnswer::Elicitation(ElicitAnswer::Decline),
                _ => InputAnswer::Elicitation(ElicitAnswer::Accept(Map::new())),
            };
            r.answer(&e.key, answer).unwrap();
        }
        let retry = r.build_retry(Id::from("retry"), None).unwrap();
        let p = retry_params(retry.params_json());
        let answered: BTreeSet<String> = match p.input_responses {
            Some(m) => m.keys().cloned().collect(),
            None => BTreeSet::new(),
        };
        prop_assert_eq!(answered, keys);
    }
}

/// basic/patterns/mrtr.mdx with client/elicitation.mdx "Capabilities": the input types a round
/// accepts are exactly those the request's `_meta` declared (`{}` elicitation = form mode).
#[test]
fn input_capabilities_follow_the_declared_client_capabilities() {
    use mcpwire_core::mcp::mrtr::InputCapabilities;
    use mcpwire_core::mcp::ClientCapabilities;
    let none = InputCapabilities::from(&ClientCapabilities::none());
    assert_eq!(none, InputCapabilities::default());
    let form: ClientCapabilities = serde_json::from_str(r#"{"elicitation":{}}"#).unwrap();
    let c = InputCapabilities::from(&form);
    assert!(c.elicitation_form && !c.elicitation_url && !c.sampling && !c.roots);
    let all: ClientCapabilities = serde_json::from_str(
        r#"{"elicitation":{"form":{},"url":{}},"sampling":{"tools":{}},"roots":{}}"#,
    )
    .unwrap();
    let c = InputCapabilities::from(&all);
    assert!(c.elicitation_form && c.elicitation_url && c.sampling && c.sampling_tools && c.roots);
}
