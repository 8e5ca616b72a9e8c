//! MCP authorization, client side (`basic/authorization/`), without I/O: the OAuth 2.1 flow
//! as a step function ([`Flow`]) and its pieces.
//!
//! - [`Flow`]: from a `401` (or a `403 insufficient_scope`, or a token about to expire) to a
//!   [`Grant`]: discovery, registration, the PKCE authorization, `iss`, tokens, refresh;
//! - [`metadata`]: the documents it reads (RFC 9728, RFC 8414, token, registration and
//!   authorization responses);
//! - [`discovery`]: where it looks for them, and whether a resource names the server;
//! - [`Grant`]: what a finished authorization leaves behind, for the token store;
//! - [`www_authenticate`]: RFC 9110 challenge parsing and the `Bearer` view
//!   ([`BearerChallenge`]: `resource_metadata`, `scope`, `error`);
//! - [`pkce`]: the PKCE `S256` code verifier and challenge (RFC 7636) and the `state` value,
//!   both made from random bytes the caller supplies;
//! - [`secret`]: [`Secret`], a string that `Debug` and `Display` never show.
//!
//! stdio servers are out of scope: they get their credentials from the environment.

pub mod client_assertion;
pub mod discovery;
mod error;
mod flow;
mod grant;
pub mod metadata;
pub mod pkce;
pub mod secret;
pub mod www_authenticate;

pub use client_assertion::{AssertionError, AssertionKey};
pub use error::{AuthError, Blame, RefreshFailure};
pub use flow::{
    ClientCredentials, ClientCredentialsAuth, ClientSetup, Entropy, FetchId, FetchPurpose, Flow,
    FlowConfig, FlowOutput, PreRegistered, RedirectRejected, MAX_REDIRECTS,
};
pub use grant::{
    scope_union, unix_seconds, ClientRegistration, Grant, RegistrationKind, TokenEndpointAuth,
    Tokens, REFRESH_AHEAD,
};
pub use pkce::{OAuthState, PkceError, PkceVerifier, PKCE_METHOD_S256};
pub use secret::Secret;
pub use www_authenticate::{
    bearer, challenges_from_headers, parse_challenges, BearerChallenge, Challenge, ChallengeError,
    Expected, MAX_CHALLENGE_BYTES, WWW_AUTHENTICATE,
};
