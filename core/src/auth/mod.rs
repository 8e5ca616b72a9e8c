//! OAuth 2.1 authorization for MCP (`basic/authorization/`), without I/O: the pieces a client
//! needs to answer a `401`/`403` and run the authorization code flow.
//!
//! - [`www_authenticate`]: RFC 9110 challenge parsing and the `Bearer` view
//!   ([`BearerChallenge`]: `resource_metadata`, `scope`, `error`);
//! - [`pkce`]: the PKCE `S256` code verifier and challenge (RFC 7636) and the `state` value,
//!   both made from random bytes the caller supplies;
//! - [`secret`]: [`Secret`], a string that `Debug` and `Display` never show.

pub mod pkce;
pub mod secret;
pub mod www_authenticate;

pub use pkce::{OAuthState, PkceError, PkceVerifier, PKCE_METHOD_S256};
pub use secret::Secret;
pub use www_authenticate::{
    bearer, challenges_from_headers, parse_challenges, BearerChallenge, Challenge, ChallengeError,
    Expected, MAX_CHALLENGE_BYTES, WWW_AUTHENTICATE,
};
