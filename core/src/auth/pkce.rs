//! PKCE (RFC 7636) with the `S256` method, and the OAuth `state` value.
//!
//! The MCP authorization spec requires PKCE and `S256` ("Security Considerations",
//! "Authorization Code Protection", after OAuth 2.1 sections 4.1.1 and 7.5.2), and says clients
//! SHOULD send and verify `state` ("Open Redirection").
//!
//! Nothing here draws a random number: the caller passes the random bytes (the driver reads the
//! operating system's generator), as everywhere in the core.
//!
//! - [`PkceVerifier::from_random`] turns 32 random bytes into a 43-character code verifier, the
//!   construction RFC 7636 section 4.1 recommends: base64url of 32 octets, without padding.
//! - [`PkceVerifier::new`] takes a verifier from elsewhere (one kept across a restart) and checks
//!   section 4.1's rules: 43 to 128 characters, each `ALPHA / DIGIT / "-" / "." / "_" / "~"`.
//! - [`PkceVerifier::challenge`] is section 4.2's `S256` transformation,
//!   `BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))`, sent as `code_challenge` with
//!   `code_challenge_method=S256` ([`PKCE_METHOD_S256`]).
//! - [`OAuthState::from_random`] makes a `state` value from 16 or 32 random bytes, and
//!   [`OAuthState::matches`] compares the value that comes back on the redirect.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use super::Secret;

/// The `code_challenge_method` of [`PkceVerifier::challenge`] (RFC 7636 section 4.2). The only
/// method this crate offers: `plain` gives no protection against an interceptor who reads the
/// authorization request.
pub const PKCE_METHOD_S256: &str = "S256";

/// The shortest code verifier RFC 7636 section 4.1 allows, in characters.
pub const PKCE_VERIFIER_MIN_LEN: usize = 43;

/// The longest code verifier RFC 7636 section 4.1 allows, in characters.
pub const PKCE_VERIFIER_MAX_LEN: usize = 128;

/// Why a string is not a valid code verifier (RFC 7636 section 4.1). The verifier itself is
/// never repeated: it is a secret until the token request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PkceError {
    /// Shorter than 43 characters.
    #[error(
        "PKCE code verifier is {len} characters long; RFC 7636 section 4.1 requires at least \
         {PKCE_VERIFIER_MIN_LEN} (use PkceVerifier::from_random with 32 random bytes)"
    )]
    TooShort {
        /// The length that was given, in bytes.
        len: usize,
    },
    /// Longer than 128 characters.
    #[error(
        "PKCE code verifier is {len} characters long; RFC 7636 section 4.1 allows at most \
         {PKCE_VERIFIER_MAX_LEN}"
    )]
    TooLong {
        /// The length that was given, in bytes.
        len: usize,
    },
    /// A character outside `A-Z a-z 0-9 - . _ ~`.
    #[error(
        "PKCE code verifier has a character outside A-Z, a-z, 0-9, '-', '.', '_', '~' at byte \
         {offset} (RFC 7636 section 4.1)"
    )]
    InvalidCharacter {
        /// Where the first such character starts, in bytes.
        offset: usize,
    },
}

/// Whether `b` is an RFC 3986 `unreserved` character, the code verifier's alphabet.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// A PKCE code verifier (RFC 7636 section 4.1): kept by the client for the token request, its
/// [`challenge`](Self::challenge) sent in the authorization request. `Debug` does not show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkceVerifier(Secret);

impl PkceVerifier {
    /// The verifier of 32 random bytes: their base64url encoding without padding, 43
    /// characters (RFC 7636 section 4.1's recommendation). The bytes must come from a
    /// cryptographically secure generator; the caller reads it.
    pub fn from_random(bytes: [u8; 32]) -> Self {
        Self(Secret::new(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// A verifier given as text (kept from an earlier run, or made by another component),
    /// checked against RFC 7636 section 4.1: 43 to 128 characters from `A-Z a-z 0-9 - . _ ~`.
    /// The check cannot tell whether the text has enough entropy; [`Self::from_random`] does.
    pub fn new(verifier: impl Into<String>) -> Result<Self, PkceError> {
        let verifier = Secret::new(verifier);
        let text = verifier.expose();
        if let Some(offset) = text.bytes().position(|b| !is_unreserved(b)) {
            return Err(PkceError::InvalidCharacter { offset });
        }
        // All ASCII from here, so bytes are characters.
        let len = text.len();
        if len < PKCE_VERIFIER_MIN_LEN {
            return Err(PkceError::TooShort { len });
        }
        if len > PKCE_VERIFIER_MAX_LEN {
            return Err(PkceError::TooLong { len });
        }
        Ok(Self(verifier))
    }

    /// The verifier, for the token request's `code_verifier` parameter.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// The `code_challenge` of the authorization request:
    /// `BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))`, without padding, 43 characters
    /// (RFC 7636 section 4.2, method `S256`).
    pub fn challenge(&self) -> String {
        URL_SAFE_NO_PAD.encode(Sha256::digest(self.0.expose().as_bytes()))
    }

    /// The `code_challenge_method` that goes with [`Self::challenge`]: always
    /// [`PKCE_METHOD_S256`].
    pub fn method(&self) -> &'static str {
        PKCE_METHOD_S256
    }
}

/// The OAuth `state` parameter of one authorization request (RFC 6749 section 10.12, OAuth 2.1
/// section 7.12.2): an unguessable value the client sends in the authorization request and
/// expects back, unchanged, on the redirect, so a redirect the client did not start is
/// discarded. `Debug` does not show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthState(Secret);

impl OAuthState {
    /// The state value of `N` random bytes (`N` is 16 or 32, checked when the call compiles),
    /// as base64url without padding: 22 or 43 characters, all URL-safe. The bytes must come
    /// from a cryptographically secure generator; the caller reads it.
    ///
    /// ```
    /// # use mcpwire_core::auth::OAuthState;
    /// assert_eq!(OAuthState::from_random([7u8; 16]).expose().len(), 22);
    /// assert_eq!(OAuthState::from_random([7u8; 32]).expose().len(), 43);
    /// ```
    ///
    /// Fewer bytes do not compile:
    ///
    /// ```compile_fail
    /// # use mcpwire_core::auth::OAuthState;
    /// let weak = OAuthState::from_random([7u8; 8]);
    /// ```
    pub fn from_random<const N: usize>(bytes: [u8; N]) -> Self {
        const {
            assert!(
                N == 16 || N == 32,
                "OAuthState::from_random takes 16 or 32 random bytes"
            )
        };
        Self(Secret::new(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// The value, for the authorization request's `state` parameter.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// Whether the `state` that came back on the redirect is this one.
    ///
    /// Constant-time-ish: the lengths are compared first (the length is no secret: it is 22 or
    /// 43 for every value this type makes), then every byte pair is XORed and the results ORed
    /// together in one pass with no early exit, so the time taken does not depend on how long
    /// a prefix of a forged value is right (as `==` on strings, which stops at the first
    /// difference, would). "-ish" because nothing stops an optimizer from reintroducing a
    /// branch; the `state` check has no need for more, since an attacker gets one try per
    /// authorization request.
    pub fn matches(&self, received: &str) -> bool {
        let expected = self.0.expose().as_bytes();
        let received = received.as_bytes();
        if expected.len() != received.len() {
            return false;
        }
        let diff = expected
            .iter()
            .zip(received)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 7636 Appendix B: the octets of the example verifier.
    const APPENDIX_B_OCTETS: [u8; 32] = [
        116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212, 37,
        77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
    ];
    const APPENDIX_B_VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const APPENDIX_B_CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn rfc7636_appendix_b_verifier_from_its_octets() {
        let v = PkceVerifier::from_random(APPENDIX_B_OCTETS);
        assert_eq!(v.expose(), APPENDIX_B_VERIFIER);
        assert_eq!(v.challenge(), APPENDIX_B_CHALLENGE);
        assert_eq!(v.method(), "S256");
    }

    #[test]
    fn rfc7636_appendix_b_challenge_of_the_given_verifier() {
        let v = PkceVerifier::new(APPENDIX_B_VERIFIER).unwrap();
        assert_eq!(v.challenge(), APPENDIX_B_CHALLENGE);
        assert_eq!(v, PkceVerifier::from_random(APPENDIX_B_OCTETS));
    }

    #[test]
    fn verifier_length_bounds_are_43_and_128() {
        assert_eq!(
            PkceVerifier::new("a".repeat(42)),
            Err(PkceError::TooShort { len: 42 })
        );
        assert!(PkceVerifier::new("a".repeat(43)).is_ok());
        assert!(PkceVerifier::new("~._-".repeat(32)).is_ok());
        assert_eq!(
            PkceVerifier::new("a".repeat(129)),
            Err(PkceError::TooLong { len: 129 })
        );
        assert_eq!(PkceVerifier::new(""), Err(PkceError::TooShort { len: 0 }));
    }

    #[test]
    fn verifier_refuses_characters_outside_unreserved() {
        for (text, offset) in [
            (format!("{}+", "a".repeat(50)), 50),
            (format!("/{}", "a".repeat(50)), 0),
            (format!("{}={}", "a".repeat(43), "a"), 43),
            (format!("{} {}", "a".repeat(20), "a".repeat(30)), 20),
            (format!("{}é{}", "a".repeat(21), "a".repeat(30)), 21),
            // The charset is checked before the length, so a short bad value names the byte.
            ("a%".to_owned(), 1),
        ] {
            assert_eq!(
                PkceVerifier::new(text.clone()),
                Err(PkceError::InvalidCharacter { offset }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn verifier_errors_never_show_the_verifier() {
        let text = format!("{}!", "Zq".repeat(30));
        let e = PkceVerifier::new(text).unwrap_err();
        assert!(!e.to_string().contains("ZqZq"), "{e}");
        assert!(e.to_string().contains("RFC 7636"), "{e}");
        let v = PkceVerifier::from_random(APPENDIX_B_OCTETS);
        assert!(!format!("{v:?}").contains(APPENDIX_B_VERIFIER));
    }

    #[test]
    fn state_is_base64url_of_the_bytes() {
        assert_eq!(
            OAuthState::from_random([0u8; 16]).expose(),
            "AAAAAAAAAAAAAAAAAAAAAA"
        );
        let s = OAuthState::from_random([0xffu8; 32]);
        assert_eq!(s.expose().len(), 43);
        // 256 one bits: 42 sextets of `_` (63), then 1111 padded with two zero bits (`8`).
        assert_eq!(s.expose(), format!("{}8", "_".repeat(42)));
        assert!(!format!("{s:?}").contains("___"));
    }

    #[test]
    fn state_matches_only_the_same_value() {
        let s = OAuthState::from_random(APPENDIX_B_OCTETS);
        assert!(s.matches(APPENDIX_B_VERIFIER));
        assert!(!s.matches(""));
        assert!(!s.matches(&APPENDIX_B_VERIFIER[..42]));
        assert!(!s.matches(&format!("{APPENDIX_B_VERIFIER}k")));
        let mut last_off = APPENDIX_B_VERIFIER.to_owned();
        last_off.pop();
        last_off.push('j');
        assert!(!s.matches(&last_off));
        assert!(!s.matches(&APPENDIX_B_VERIFIER.to_ascii_uppercase()));
    }

    proptest! {
        #[test]
        fn any_32_bytes_make_a_valid_verifier_and_challenge(bytes in any::<[u8; 32]>()) {
            let v = PkceVerifier::from_random(bytes);
            prop_assert_eq!(v.expose().len(), 43);
            prop_assert_eq!(PkceVerifier::new(v.expose()), Ok(v.clone()));
            let c = v.challenge();
            prop_assert_eq!(c.len(), 43);
            prop_assert!(c.bytes().all(is_unreserved));
        }

        #[test]
        fn new_accepts_exactly_the_rfc7636_alphabet_and_lengths(text in "[A-Za-z0-9._~+/ -]{0,140}") {
            let valid = (43..=128).contains(&text.len()) && text.bytes().all(is_unreserved);
            prop_assert_eq!(PkceVerifier::new(text).is_ok(), valid);
        }

        #[test]
        fn state_matches_itself_and_nothing_else(bytes in any::<[u8; 16]>(), other in "[A-Za-z0-9_-]{0,30}") {
            let s = OAuthState::from_random(bytes);
            let text = s.expose().to_owned();
            prop_assert!(s.matches(&text));
            prop_assert_eq!(s.matches(&other), other == text);
        }
    }
}
