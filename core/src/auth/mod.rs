//! MCP authorization, client side (`basic/authorization/`): the OAuth 2.1 flow as a step
//! function ([`Flow`]), the documents it reads ([`metadata`]), where it looks for them
//! ([`discovery`]), what it leaves behind for the token store ([`Grant`]), and the pieces:
//! `WWW-Authenticate` challenges ([`www_authenticate`]), PKCE and `state` ([`pkce`]),
//! credentials that never print ([`Secret`]).
//!
//! stdio servers are out of scope: they get their credentials from the environment.

pub mod discovery;
mod error;
mod flow;
mod grant;
pub mod metadata;
pub mod pkce;
mod secret;
pub mod www_authenticate;

pub use error::{AuthError, Blame, RefreshFailure};
pub use flow::{
    ClientSetup, Entropy, FetchId, FetchPurpose, Flow, FlowConfig, FlowOutput, PreRegistered,
    RedirectRejected, MAX_REDIRECTS,
};
pub use grant::{
    scope_union, unix_seconds, ClientRegistration, Grant, RegistrationKind, TokenEndpointAuth,
    Tokens, REFRESH_AHEAD,
};
pub use secret::Secret;
