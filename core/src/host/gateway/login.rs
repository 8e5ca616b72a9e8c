//! An upstream sign-in needed mid-session, as the downstream client sees it: a URL-mode
//! elicitation carrying the authorization URL ([`LoginElicitation`]). The gateway never
//! opens a browser itself: the person opens the link from their client, signs in, and the
//! authorization server redirects to the gateway's own loopback callback (the driver's
//! listener), which finishes the flow; the call then goes on.
//!
//! This is what URL mode is for: the spec keeps it off the client's own authorization to its
//! server, and the downstream client's authorization to the gateway is not involved; the
//! gateway is obtaining "third-party authorization on behalf of the user" (the upstream
//! server's), and the URL, its `state` and PKCE challenge never pass through the model.
//!
//! Both eras take the same `ElicitRequestURLParams`; 2025-11-25 also requires an
//! `elicitationId`, which the driver draws (core has no randomness) and passes to
//! [`LoginElicitation::params`]. A client that did not declare `elicitation.url` gets a
//! tool error saying how to sign in outside it ([`LoginElicitation::new`]).

use serde_json::{json, Value};

use super::ToolRefusal;
use crate::host::ServerId;
use crate::mcp::elicitation::{ElicitationError, ElicitationRequest};
use crate::mcp::meta::ClientCapabilities;

/// The URL-mode elicitation asking the person to sign in to one upstream server.
#[derive(Clone, Debug, PartialEq)]
pub struct LoginElicitation {
    server: ServerId,
    url: String,
    message: String,
    request: ElicitationRequest,
}

/// What the person did with the sign-in link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginAnswer {
    /// They agreed to open it: wait for the callback (the flow's own deadline applies).
    Accepted,
}

impl LoginElicitation {
    /// The sign-in of server `server` at `authorization_url`, for a downstream client that
    /// declared `client`. `how_else` says how to sign in without the client (e.g.
    /// `run "mcpwire host --config FILE servers" on a terminal`), for the tool error a client
    /// without `elicitation.url` gets. A URL the client side would refuse (not
    /// `scheme://host...`) is refused here too.
    pub fn new(
        server: &ServerId,
        authorization_url: &str,
        client: &ClientCapabilities,
        how_else: &str,
    ) -> Result<LoginElicitation, ToolRefusal> {
        if !client.supports_elicitation_url() {
            return Err(ToolRefusal::LoginNeeded {
                server: server.clone(),
                why: format!(
                    "this client cannot show a sign-in link (it declared no elicitation.url \
                     capability), and mcpwire does not open a browser on its own; sign in \
                     outside it ({how_else}); this call waits for that sign-in (a few \
                     minutes at most) and then runs, but its result cannot reach this client, \
                     so check what it did before calling the tool again"
                ),
            });
        }
        let message = format!(
            "mcpwire needs you to sign in to {server} before this call can go on. Open the link \
             to sign in with {server}'s authorization server; mcpwire receives the result on its \
             own loopback address, and the call continues when you are done."
        );
        let params = json!({"mode": "url", "message": message, "url": authorization_url});
        let request =
            ElicitationRequest::parse(&params.to_string()).map_err(|e: ElicitationError| {
                ToolRefusal::LoginNeeded {
                    server: server.clone(),
                    why: format!("its authorization URL cannot be shown as a sign-in link ({e})"),
                }
            })?;
        Ok(LoginElicitation {
            server: server.clone(),
            url: authorization_url.to_owned(),
            message,
            request,
        })
    }

    /// The server to sign in to.
    pub fn server(&self) -> &ServerId {
        &self.server
    }

    /// The authorization URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The text the person reads.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The request as the client side reads it (URL mode, with its host and warnings).
    pub fn request(&self) -> &ElicitationRequest {
        &self.request
    }

    /// The `ElicitRequestURLParams`: with `elicitation_id` for 2025-11-25 (where it is
    /// required), without for 2026-07-28 (whose schema has none).
    pub fn params(&self, elicitation_id: Option<&str>) -> Value {
        let mut p = json!({"mode": "url", "message": self.message, "url": self.url});
        if let Some(id) = elicitation_id {
            p["elicitationId"] = id.into();
        }
        p
    }

    /// Reads the client's `ElicitResult`: accept goes on (the flow waits for its callback);
    /// decline, cancel and anything else are a tool error, and the sign-in is dropped.
    pub fn read_answer(&self, result: &Value) -> Result<LoginAnswer, ToolRefusal> {
        let refused = |why: String| ToolRefusal::LoginNeeded {
            server: self.server.clone(),
            why,
        };
        match result.get("action").and_then(Value::as_str) {
            Some("accept") => Ok(LoginAnswer::Accepted),
            Some("decline") => Err(refused(
                "you declined to sign in, so the call did not go through".to_owned(),
            )),
            Some("cancel") => Err(refused(
                "the sign-in was cancelled without an answer, so the call did not go through"
                    .to_owned(),
            )),
            _ => Err(refused(
                "the answer to the sign-in request could not be read, so the call did not go \
                 through"
                    .to_owned(),
            )),
        }
    }
}
