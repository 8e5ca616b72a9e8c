//! `InputRequiredResult`: arbitrary bytes through the parser, then, for every accepted result,
//! a full MRTR round answered from the input's first byte. The retry must be valid JSON that
//! carries `requestState` byte-exact (or none when none was sent) and answers exactly the
//! keys that were asked.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use libfuzzer_sys::fuzz_target;
use mcpwire_core::jsonrpc::Id;
use mcpwire_core::mcp::elicitation::UrlConsent;
use mcpwire_core::mcp::mrtr::{
    classify_result, InputCapabilities, InputRequiredResult, MrtrRound, ResultKind,
};
use mcpwire_core::mcp::{ElicitAnswer, ElicitationRequest, InputAnswer, InputRequest};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

const ALL: InputCapabilities = InputCapabilities {
    elicitation_form: true,
    elicitation_url: true,
    sampling: true,
    sampling_tools: true,
    roots: true,
};

fn answer_for(request: &InputRequest, seed: u8) -> InputAnswer {
    match request {
        InputRequest::Elicitation(ElicitationRequest::Url(u)) if seed & 1 == 0 => {
            InputAnswer::Elicitation(ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&u.url)))
        }
        InputRequest::Elicitation(ElicitationRequest::Form(f)) if seed & 1 == 0 => {
            // The schema's defaults as content: may or may not validate.
            let content: Map<String, Value> = f
                .schema
                .properties
                .iter()
                .filter_map(|(k, p)| p.default.clone().map(|d| (k.clone(), d)))
                .collect();
            InputAnswer::Elicitation(ElicitAnswer::Accept(content))
        }
        InputRequest::Elicitation(_) if seed & 2 == 0 => {
            InputAnswer::Elicitation(ElicitAnswer::Decline)
        }
        InputRequest::Elicitation(_) => InputAnswer::Elicitation(ElicitAnswer::Cancel),
        InputRequest::Sampling(_) => InputAnswer::Sampling(json!({
            "role": "assistant",
            "content": {"type": "text", "text": "ok"},
            "model": "m"
        })),
        _ => InputAnswer::Roots(json!({"roots": [{"uri": "file:///tmp"}]})),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // input_required is refused on methods that do not allow it.
    assert!(!matches!(
        classify_result("tools/list", text),
        Ok(ResultKind::InputRequired(_))
    ));
    let Ok(result) = InputRequiredResult::parse(text) else {
        return;
    };
    let state = result.request_state_json().map(str::to_owned);
    if let Some(s) = &state {
        assert!(
            text.contains(s.as_str()),
            "requestState is a slice of the input"
        );
    }
    let mut round =
        MrtrRound::new(Id::from(1), "tools/call", r#"{"name":"t","_meta":{}}"#, ALL).unwrap();
    let events = round.handle_input_required(result).unwrap();
    let asked: BTreeSet<String> = events.iter().map(|e| e.key.clone()).collect();
    assert_eq!(asked.len(), events.len(), "keys are unique");
    for (i, event) in events.iter().enumerate() {
        let s = seed.rotate_left(i as u32 % 8);
        if round
            .answer(&event.key, answer_for(&event.request, s))
            .is_err()
        {
            // An invalid form answer is refused; declining always works.
            round
                .answer(&event.key, InputAnswer::Elicitation(ElicitAnswer::Decline))
                .unwrap();
        }
    }
    assert!(round.unanswered().is_empty());
    let retry = round.build_retry(Id::from(2), None).unwrap();
    assert!(!retry.cacheable());
    let body: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(retry.body()).expect("retry body is a JSON object");
    assert_eq!(body.get("id").map(|r| r.get()), Some("2"));
    assert_eq!(body.get("method").map(|r| r.get()), Some("\"tools/call\""));
    assert_eq!(
        body.get("params").map(|r| r.get()),
        Some(retry.params_json())
    );
    let params: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(retry.params_json()).unwrap();
    assert_eq!(params.get("name").map(|r| r.get()), Some("\"t\""));
    assert_eq!(
        params.get("requestState").map(|r| r.get()),
        state.as_deref(),
        "requestState is resent byte-exact, or not at all"
    );
    let answered: BTreeSet<String> = match params.get("inputResponses") {
        Some(raw) => serde_json::from_str::<Map<String, Value>>(raw.get())
            .unwrap()
            .keys()
            .cloned()
            .collect(),
        None => BTreeSet::new(),
    };
    assert_eq!(answered, asked);
});
