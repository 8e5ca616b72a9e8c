//! The authorization flow's inputs: arbitrary bytes as each document it reads (Protected
//! Resource Metadata, authorization server metadata, token, registration and error
//! responses, the redirect's query), then a whole flow whose every fetch is answered with
//! fuzzer-chosen statuses, headers and bodies and whose browser step gets a fuzzer-chosen
//! query. Nothing may panic; the flow must end (authorized, failed, or waiting for the
//! browser) within a bounded number of steps, and no output's `Debug` may show a token.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mcpwire_core::auth::metadata::{
    AuthorizationResponse, AuthorizationServerMetadata, ClientRegistrationResponse,
    OAuthErrorResponse, ProtectedResourceMetadata, TokenResponse,
};
use mcpwire_core::auth::{BearerChallenge, Entropy, Flow, FlowConfig, FlowOutput, Secret};
use mcpwire_core::http::Headers;
use mcpwire_core::time::{Duration, Instant, UNIX_EPOCH};

#[derive(Arbitrary, Debug)]
struct Answer {
    status: u16,
    location: Option<String>,
    body: Vec<u8>,
    /// Replace the body with a plausible document of this kind (0..=4), filled from `body`.
    shape: u8,
}

fn plausible(a: &Answer) -> Vec<u8> {
    let s = String::from_utf8_lossy(&a.body).into_owned();
    let v = match a.shape % 6 {
        0 => {
            serde_json::json!({"resource": "https://mcp.example.com/mcp", "authorization_servers": [s]})
        }
        1 => {
            serde_json::json!({"issuer": s, "authorization_endpoint": "https://a.example/authorize",
            "token_endpoint": "https://a.example/token", "registration_endpoint": "https://a.example/register",
            "code_challenge_methods_supported": ["S256"]})
        }
        2 => serde_json::json!({"client_id": s}),
        3 => {
            serde_json::json!({"access_token": "TOKEN-SECRET", "token_type": "Bearer", "expires_in": a.status, "refresh_token": s})
        }
        4 => serde_json::json!({"error": s}),
        _ => return a.body.clone(),
    };
    v.to_string().into_bytes()
}

/// A secret of the same byte length as `s` and a different value.
fn same_length_other(s: &Secret) -> Secret {
    let fill = if s.expose().bytes().all(|b| b == b'a') {
        "b"
    } else {
        "a"
    };
    Secret::new(fill.repeat(s.len()))
}

fuzz_target!(|data: &[u8]| {
    let _ = ProtectedResourceMetadata::parse(data);
    let _ = AuthorizationServerMetadata::parse(data);
    if let Ok(t) = TokenResponse::parse(data) {
        // Redaction means the tokens influence the text by their length only: the same
        // response with other tokens of the same length shows the same. (A plain "the text
        // does not contain the token" fails on tokens that happen to be substrings of other
        // fields, `arer` in `Bearer`.)
        let mut other = t.clone();
        other.access_token = same_length_other(&t.access_token);
        other.refresh_token = t.refresh_token.as_ref().map(same_length_other);
        assert_eq!(format!("{t:?}"), format!("{other:?}"));
    }
    let _ = ClientRegistrationResponse::parse(data);
    let _ = OAuthErrorResponse::parse(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = AuthorizationResponse::from_query(text);
    }

    let mut u = Unstructured::new(data);
    let Ok(challenge_text) = String::arbitrary(&mut u) else {
        return;
    };
    let Ok(answers) = Vec::<Answer>::arbitrary(&mut u) else {
        return;
    };
    let Ok(query) = String::arbitrary(&mut u) else {
        return;
    };
    let challenge = BearerChallenge::from_headers([challenge_text.as_str()])
        .ok()
        .flatten();
    let mut flow = Flow::new(
        FlowConfig::new("https://mcp.example.com/mcp", "http://127.0.0.1:9/callback"),
        None,
    );
    let now = Instant::now();
    let entropy = Entropy {
        verifier: [1; 32],
        state: [2; 16],
    };
    let _ = flow.handle_unauthorized(now, UNIX_EPOCH, challenge.as_ref(), entropy);
    let mut answers = answers.into_iter();
    for step in 0..200u64 {
        let t = now + Duration::from_millis(step);
        let Some(out) = flow.poll_output() else { break };
        let shown = format!("{out:?}");
        assert!(!shown.contains("TOKEN-SECRET"), "{shown}");
        match out {
            FlowOutput::Fetch { id, .. } => match answers.next() {
                Some(a) => {
                    let mut h = Headers::new();
                    if let Some(l) = &a.location {
                        let _ = h.append("location", l.clone());
                    }
                    flow.handle_response(t, UNIX_EPOCH, id, a.status, &h, &plausible(&a));
                }
                None => flow.handle_fetch_failed(t, id, "fuzz: no more answers"),
            },
            FlowOutput::OpenAuthorizationUrl { .. } => {
                let _ = flow.handle_redirect(t, UNIX_EPOCH, &query);
            }
            _ => {}
        }
    }
    if let Some(deadline) = flow.poll_timeout() {
        flow.handle_timeout(deadline);
    }
});
