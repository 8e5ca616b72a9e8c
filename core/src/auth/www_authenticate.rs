//! `WWW-Authenticate` challenges (RFC 9110 section 11.6.1), and the `Bearer` view MCP reads
//! from them (RFC 6750 section 3, RFC 9728 section 5.1).
//!
//! An MCP server answers an unauthorized request with `401` (or `403` for missing scopes) and a
//! `WWW-Authenticate` header whose `Bearer` challenge carries `resource_metadata` (where its
//! Protected Resource Metadata is) and `scope` (the scopes to request); a client MUST be able
//! to parse it (`basic/authorization/authorization-server-discovery.mdx`, "Protected Resource
//! Metadata Discovery Requirements"; `basic/authorization/index.mdx`, "Scope Selection
//! Strategy" and "Scope Challenge Handling").
//!
//! # The grammar (RFC 9110 sections 11.2, 11.3, 11.6.1, 5.6)
//!
//! ```text
//! WWW-Authenticate = #challenge
//! challenge        = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//! auth-scheme      = token
//! auth-param       = token BWS "=" BWS ( token / quoted-string )
//! token68          = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
//! quoted-string    = DQUOTE *( qdtext / quoted-pair ) DQUOTE
//! quoted-pair      = "\" ( HTAB / SP / VCHAR / obs-text )
//! ```
//!
//! One comma separates both challenges and the parameters of one challenge, so [`parse_challenges`]
//! decides what each list element is the way the grammar does:
//! - right after a scheme and its space, a token68 is tried first: a run of token68
//!   characters (with its trailing `=`s) followed by optional whitespace and then a comma or the
//!   end of the value is the challenge's token68 (`Negotiate abc==`); anything else there must
//!   be a parameter (`realm="x"`);
//! - after a comma, a token followed by optional whitespace and `=` is another parameter of the
//!   current challenge; any other token starts a new challenge (`Basic realm="x", Bearer
//!   scope="a"`).
//!
//! What the parser accepts beyond the letter of the grammar, and what it refuses:
//! - Empty list elements (`, ,`) are skipped, as RFC 9110 section 5.6.1 asks of recipients;
//!   optional whitespace (SP or HTAB) is accepted around every comma and, as BWS, around `=`.
//!   A horizontal tab is accepted where the grammar has the `1*SP` after a scheme.
//! - A parameter after a comma that directly follows a scheme (`Bearer, scope="a"`) is taken as
//!   a parameter of that challenge: no other reading makes sense of it.
//! - Parameter values are the same whether sent as a token or as a quoted-string (section
//!   11.2); quoted-pairs are unescaped (`\"` is `"`, `\\` is `\`, `\x` is `x`). Non-ASCII text
//!   (`obs-text`) is kept inside quoted-strings and refused elsewhere.
//! - Each header field value is parsed on its own, in order, and the challenges of all of them
//!   come out in one list. A value must begin with a challenge: a parameter at the start of a
//!   value is [`ChallengeError::ParamWithoutScheme`], even when an earlier value ended with a
//!   challenge (no server splits one challenge over two field lines; reading one that way would
//!   attach parameters to the wrong scheme).
//! - Refused with a typed [`ChallengeError`] that names the value, the byte offset and what was
//!   expected there: control characters (anything below 0x20 but HTAB, and DEL) anywhere, an
//!   unterminated quoted-string, a parameter without a scheme, a parameter after a token68, a
//!   parameter name given twice in one challenge (compared case-insensitively; section 11.2
//!   says each may occur only once), and more than [`MAX_CHALLENGE_BYTES`] in all.
//!
//! Schemes and parameter names are kept as received and compared case-insensitively
//! ([`Challenge::is_scheme`], [`Challenge::param`]).

use std::fmt;

use crate::http::Headers;

/// The header name (compare it case-insensitively, as [`Headers`] does).
pub const WWW_AUTHENTICATE: &str = "WWW-Authenticate";

/// The most bytes [`parse_challenges`] reads, summed over all the values it is given: 16 KiB,
/// far above any real challenge list, low enough that a hostile server cannot make the client
/// allocate much.
pub const MAX_CHALLENGE_BYTES: usize = 16 * 1024;

/// The `Bearer` scheme (RFC 6750 section 3).
pub const BEARER: &str = "Bearer";

/// One authentication challenge: a scheme with either a token68 or a list of parameters (or
/// neither).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// The auth-scheme as received (`Bearer`, `basic`, ...). Schemes are case-insensitive:
    /// compare with [`Challenge::is_scheme`].
    pub scheme: String,
    /// The token68 of a challenge that has one (`Negotiate abc==`), as received. A challenge
    /// with a token68 has no parameters.
    pub token68: Option<String>,
    /// The auth-params in the order received: names as received, values unquoted and
    /// unescaped. No two names are equal ignoring ASCII case.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// Whether this challenge's scheme is `scheme`, ignoring ASCII case (RFC 9110 section
    /// 11.1).
    pub fn is_scheme(&self, scheme: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
    }

    /// The value of parameter `name`, the name compared ignoring ASCII case (RFC 9110 section
    /// 11.2).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the parser expected where it stopped (see [`ChallengeError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expected {
    /// An auth-scheme (a token such as `Bearer`) at the start of a header value.
    Scheme,
    /// After a comma: another parameter (`name=value`) of the current challenge, or the scheme
    /// of a new one.
    SchemeOrParam,
    /// After a scheme: a space (before its token68 or parameters), a comma or the end.
    AfterScheme,
    /// After a scheme and its space: a token68 or a parameter `name=value`.
    Token68OrParam,
    /// `=` after a parameter name.
    Equals,
    /// A parameter value: a token or a quoted-string.
    ParamValue,
    /// A comma or the end of the value, after a parameter value or a token68.
    CommaOrEnd,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::Scheme => "an authentication scheme (a token such as `Bearer`)",
            Expected::SchemeOrParam => {
                "a parameter `name=value` or the scheme of a new challenge after the comma"
            }
            Expected::AfterScheme => "a space, a comma or the end of the value after the scheme",
            Expected::Token68OrParam => "a token68 or a parameter `name=value` after the scheme",
            Expected::Equals => "`=` after the parameter name",
            Expected::ParamValue => "a parameter value (a token or a \"quoted-string\")",
            Expected::CommaOrEnd => "a comma or the end of the value",
        })
    }
}

/// Why `WWW-Authenticate` values could not be parsed.
///
/// `value` is the 0-based index of the header field value in the order given (the `n`-th
/// `WWW-Authenticate` line), `offset` a byte offset into that value. Names quoted in errors
/// are cut to 64 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChallengeError {
    /// The values hold more than [`MAX_CHALLENGE_BYTES`] bytes together.
    #[error("WWW-Authenticate values exceed {limit} bytes in total; refusing to parse them")]
    TooLong {
        /// The bound, [`MAX_CHALLENGE_BYTES`].
        limit: usize,
    },
    /// A control character (below 0x20 but HTAB, or 0x7F), which no part of the grammar allows.
    #[error("WWW-Authenticate value {value}, byte {offset}: control character 0x{byte:02X}")]
    ControlCharacter {
        /// Which value.
        value: usize,
        /// Where the character is.
        offset: usize,
        /// The character.
        byte: u8,
    },
    /// A character that cannot stand where it is.
    #[error("WWW-Authenticate value {value}, byte {offset}: expected {expected}, found {found:?}")]
    UnexpectedCharacter {
        /// Which value.
        value: usize,
        /// Where the character is.
        offset: usize,
        /// The character.
        found: char,
        /// What could have stood there.
        expected: Expected,
    },
    /// The value ends where something more is required (a parameter value after `=`).
    #[error("WWW-Authenticate value {value} ends at byte {offset}: expected {expected}")]
    UnexpectedEnd {
        /// Which value.
        value: usize,
        /// The value's length.
        offset: usize,
        /// What was still required.
        expected: Expected,
    },
    /// A quoted-string without its closing `"` (or ending in a lone `\`).
    #[error(
        "WWW-Authenticate value {value}: the quoted-string opened at byte {offset} is never \
         closed (expected a closing '\"')"
    )]
    UnterminatedQuotedString {
        /// Which value.
        value: usize,
        /// Where the opening `"` is.
        offset: usize,
    },
    /// A value starts with a parameter, so it belongs to no challenge (`realm="x"` with no
    /// scheme before it).
    #[error(
        "WWW-Authenticate value {value}, byte {offset}: parameter {name:?} comes before any \
         authentication scheme (expected a scheme such as `Bearer` first)"
    )]
    ParamWithoutScheme {
        /// Which value.
        value: usize,
        /// Where the parameter name starts.
        offset: usize,
        /// The parameter name.
        name: String,
    },
    /// A parameter follows a challenge that has a token68; a challenge has one or the other.
    #[error(
        "WWW-Authenticate value {value}, byte {offset}: a parameter follows the token68 of the \
         {scheme:?} challenge (a challenge carries a token68 or parameters, not both)"
    )]
    ParamAfterToken68 {
        /// Which value.
        value: usize,
        /// Where the parameter name starts.
        offset: usize,
        /// The challenge's scheme.
        scheme: String,
    },
    /// A parameter name occurs twice in one challenge (ignoring case), which RFC 9110 section
    /// 11.2 forbids: there is no telling which value the server meant.
    #[error(
        "WWW-Authenticate value {value}, byte {offset}: parameter {name:?} occurs twice in the \
         {scheme:?} challenge (RFC 9110 section 11.2 allows each name once per challenge)"
    )]
    DuplicateParam {
        /// Which value.
        value: usize,
        /// Where the second occurrence starts.
        offset: usize,
        /// The challenge's scheme.
        scheme: String,
        /// The parameter name, as spelled the second time.
        name: String,
    },
}

impl ChallengeError {
    /// `(value, offset)`: which header field value (0-based) and which byte of it the error is
    /// about; `None` for [`ChallengeError::TooLong`].
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            ChallengeError::TooLong { .. } => None,
            ChallengeError::ControlCharacter { value, offset, .. }
            | ChallengeError::UnexpectedCharacter { value, offset, .. }
            | ChallengeError::UnexpectedEnd { value, offset, .. }
            | ChallengeError::UnterminatedQuotedString { value, offset }
            | ChallengeError::ParamWithoutScheme { value, offset, .. }
            | ChallengeError::ParamAfterToken68 { value, offset, .. }
            | ChallengeError::DuplicateParam { value, offset, .. } => Some((*value, *offset)),
        }
    }
}

/// Parses `WWW-Authenticate` header field values (each item one field line's value, in the
/// order received) into their challenges, in order. See the [module docs](self) for what is
/// accepted. No values, or only empty ones, give an empty list.
///
/// ```
/// use mcpwire_core::auth::parse_challenges;
///
/// let challenges = parse_challenges([
///     r#"Basic realm="x", Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="a b""#,
///     "Negotiate abc==",
/// ])
/// .unwrap();
/// assert_eq!(challenges.len(), 3);
/// assert!(challenges[1].is_scheme("bearer"));
/// assert_eq!(challenges[1].param("Scope"), Some("a b"));
/// assert_eq!(challenges[2].token68.as_deref(), Some("abc=="));
/// ```
pub fn parse_challenges<'a>(
    values: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Challenge>, ChallengeError> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for (index, value) in values.into_iter().enumerate() {
        total = total.saturating_add(value.len());
        if total > MAX_CHALLENGE_BYTES {
            return Err(ChallengeError::TooLong {
                limit: MAX_CHALLENGE_BYTES,
            });
        }
        Parser::new(value, index).parse_into(&mut out)?;
    }
    Ok(out)
}

/// The challenges of every `WWW-Authenticate` header in `headers` (see [`parse_challenges`]).
pub fn challenges_from_headers(headers: &Headers) -> Result<Vec<Challenge>, ChallengeError> {
    parse_challenges(headers.get_all(WWW_AUTHENTICATE))
}

/// Whether `b` is an RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether `b` may appear in a token68 before its trailing `=`s.
fn is_token68_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `name` cut to 64 characters, for an error message.
fn clip(name: &str) -> String {
    name.chars().take(64).collect()
}

/// A cursor over one header field value.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// The value's index among the values given.
    value: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, value: usize) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            value,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn at(&self, pos: usize) -> Option<u8> {
        self.bytes.get(pos).copied()
    }

    /// The end of the run of bytes matching `pred` that starts at `from`.
    fn run_end(&self, from: usize, pred: impl Fn(u8) -> bool) -> usize {
        let mut end = from;
        while self.at(end).is_some_and(&pred) {
            end += 1;
        }
        end
    }

    fn slice(&self, from: usize, to: usize) -> &'a str {
        // Every position the parser stops at is an ASCII byte or the end, so a char boundary;
        // `get` keeps that an invariant rather than a panic.
        self.text.get(from..to).unwrap_or_default()
    }

    fn skip_ows(&mut self) {
        self.pos = self.run_end(self.pos, is_ows);
    }

    /// Skips whitespace and commas: the empty list elements before the next element.
    fn skip_empty_elements(&mut self) {
        self.pos = self.run_end(self.pos, |b| is_ows(b) || b == b',');
    }

    /// The error for what stands at `pos`: an unexpected character, or the end.
    fn unexpected(&self, pos: usize, expected: Expected) -> ChallengeError {
        match self.text.get(pos..).and_then(|rest| rest.chars().next()) {
            Some(found) => ChallengeError::UnexpectedCharacter {
                value: self.value,
                offset: pos,
                found,
                expected,
            },
            None => ChallengeError::UnexpectedEnd {
                value: self.value,
                offset: pos,
                expected,
            },
        }
    }

    /// Parses the whole value, appending its challenges to `out`.
    fn parse_into(&mut self, out: &mut Vec<Challenge>) -> Result<(), ChallengeError> {
        if let Some((offset, &byte)) = self
            .bytes
            .iter()
            .enumerate()
            .find(|&(_, &b)| (b < 0x20 && b != b'\t') || b == 0x7f)
        {
            return Err(ChallengeError::ControlCharacter {
                value: self.value,
                offset,
                byte,
            });
        }
        // The challenge of this value that parameters after a comma belong to.
        let mut current: Option<Challenge> = None;
        loop {
            self.skip_empty_elements();
            if self.peek().is_none() {
                out.extend(current);
                return Ok(());
            }
            let start = self.pos;
            let end = self.run_end(start, is_tchar);
            if end == start {
                let expected = if current.is_some() {
                    Expected::SchemeOrParam
                } else {
                    Expected::Scheme
                };
                return Err(self.unexpected(start, expected));
            }
            let name = self.slice(start, end);
            let equals = self.run_end(end, is_ows);
            if self.at(equals) == Some(b'=') {
                let Some(challenge) = current.as_mut() else {
                    return Err(ChallengeError::ParamWithoutScheme {
                        value: self.value,
                        offset: start,
                        name: clip(name),
                    });
                };
                if challenge.token68.is_some() {
                    return Err(ChallengeError::ParamAfterToken68 {
                        value: self.value,
                        offset: start,
                        scheme: clip(&challenge.scheme),
                    });
                }
                self.pos = equals + 1;
                self.param_value(challenge, name, start)?;
            } else {
                out.extend(current.take());
                self.pos = end;
                let mut challenge = Challenge {
                    scheme: name.to_owned(),
                    ..Challenge::default()
                };
                self.after_scheme(&mut challenge)?;
                current = Some(challenge);
            }
        }
    }

    /// After a scheme: nothing (a comma or the end), or a space and then a token68 or the first
    /// parameter.
    fn after_scheme(&mut self, challenge: &mut Challenge) -> Result<(), ChallengeError> {
        let scheme_end = self.pos;
        self.skip_ows();
        if matches!(self.peek(), None | Some(b',')) {
            return Ok(());
        }
        if self.pos == scheme_end {
            return Err(self.unexpected(self.pos, Expected::AfterScheme));
        }
        let start = self.pos;
        // A token68, if one ends the element here.
        let body_end = self.run_end(start, is_token68_char);
        let token68_end = self.run_end(body_end, |b| b == b'=');
        let after_token68 = self.run_end(token68_end, is_ows);
        if body_end > start && matches!(self.at(after_token68), None | Some(b',')) {
            challenge.token68 = Some(self.slice(start, token68_end).to_owned());
            self.pos = after_token68;
            return Ok(());
        }
        // Otherwise the first parameter (`name==` cannot start one: it is a token68 with more
        // after it, reported as such below).
        let name_end = self.run_end(start, is_tchar);
        let equals = self.run_end(name_end, is_ows);
        if name_end > start && self.at(equals) == Some(b'=') && self.at(equals + 1) != Some(b'=') {
            self.pos = equals + 1;
            let name = self.slice(start, name_end);
            return self.param_value(challenge, name, start);
        }
        Err(if name_end == start && body_end == start {
            self.unexpected(start, Expected::Token68OrParam)
        } else if name_end > body_end {
            // A token that is no token68 (`a!b`), not followed by `=`.
            self.unexpected(equals, Expected::Equals)
        } else {
            // A token68 (`abc/def`, `abc==`) followed by more than a comma.
            self.unexpected(after_token68, Expected::CommaOrEnd)
        })
    }

    /// After `name` and its `=`: the value (after BWS), then OWS and a comma or the end.
    fn param_value(
        &mut self,
        challenge: &mut Challenge,
        name: &str,
        name_offset: usize,
    ) -> Result<(), ChallengeError> {
        self.skip_ows();
        let value = match self.peek() {
            Some(b'"') => self.quoted_string()?,
            Some(b) if is_tchar(b) => {
                let start = self.pos;
                self.pos = self.run_end(start, is_tchar);
                self.slice(start, self.pos).to_owned()
            }
            _ => return Err(self.unexpected(self.pos, Expected::ParamValue)),
        };
        if challenge
            .params
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            return Err(ChallengeError::DuplicateParam {
                value: self.value,
                offset: name_offset,
                scheme: clip(&challenge.scheme),
                name: clip(name),
            });
        }
        challenge.params.push((name.to_owned(), value));
        self.skip_ows();
        match self.peek() {
            None | Some(b',') => Ok(()),
            Some(_) => Err(self.unexpected(self.pos, Expected::CommaOrEnd)),
        }
    }

    /// A quoted-string starting at the current `"`, unescaped.
    fn quoted_string(&mut self) -> Result<String, ChallengeError> {
        let open = self.pos;
        let mut out = String::new();
        let mut segment = open + 1;
        let mut i = open + 1;
        loop {
            match self.at(i) {
                None => {
                    return Err(ChallengeError::UnterminatedQuotedString {
                        value: self.value,
                        offset: open,
                    })
                }
                Some(b'"') => {
                    out.push_str(self.slice(segment, i));
                    self.pos = i + 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    out.push_str(self.slice(segment, i));
                    segment = i + 1;
                    i += match self.at(i + 1) {
                        None => {
                            return Err(ChallengeError::UnterminatedQuotedString {
                                value: self.value,
                                offset: open,
                            })
                        }
                        // The escaped ASCII character is copied with the next segment and
                        // skipped here, so an escaped `"` or `\` is not read again.
                        Some(b) if b.is_ascii() => 2,
                        // An escaped non-ASCII character: its bytes are never `"` or `\`,
                        // so they are simply copied with the next segment.
                        Some(_) => 1,
                    };
                }
                Some(_) => i += 1,
            }
        }
    }
}

/// The `Bearer` challenge of a response, as MCP reads it: the parameters of RFC 6750 section 3
/// and RFC 9728 section 5.1. Values are as received (unquoted); nothing is validated here
/// (`resource_metadata` is a URL the discovery step checks before fetching it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BearerChallenge {
    /// `realm` (RFC 6750 section 3): the protection space, for display.
    pub realm: Option<String>,
    /// `scope` (RFC 6750 section 3) as received: space-delimited scope tokens. The MCP spec
    /// makes them authoritative for the current operation ("Scope Selection Strategy"); see
    /// [`BearerChallenge::scopes`].
    pub scope: Option<String>,
    /// `error` (RFC 6750 section 3.1): `invalid_request`, `invalid_token`,
    /// `insufficient_scope`, or another code.
    pub error: Option<String>,
    /// `error_description`: text for a developer, not for the end user.
    pub error_description: Option<String>,
    /// `error_uri`: a page about the error.
    pub error_uri: Option<String>,
    /// `resource_metadata` (RFC 9728 section 5.1): the URL of the server's Protected Resource
    /// Metadata document.
    pub resource_metadata: Option<String>,
}

impl BearerChallenge {
    /// The Bearer view of `challenge`, or `None` when its scheme is not `Bearer` (ignoring
    /// case). A Bearer challenge that carries a token68 instead of parameters (RFC 6750 defines
    /// none) gives a view with every field `None`.
    pub fn from_challenge(challenge: &Challenge) -> Option<Self> {
        if !challenge.is_scheme(BEARER) {
            return None;
        }
        let get = |name: &str| challenge.param(name).map(str::to_owned);
        Some(Self {
            realm: get("realm"),
            scope: get("scope"),
            error: get("error"),
            error_description: get("error_description"),
            error_uri: get("error_uri"),
            resource_metadata: get("resource_metadata"),
        })
    }

    /// Parses `WWW-Authenticate` values (see [`parse_challenges`]) and returns the view of
    /// their first `Bearer` challenge; `Ok(None)` when there is none.
    pub fn from_headers<'a>(
        values: impl IntoIterator<Item = &'a str>,
    ) -> Result<Option<Self>, ChallengeError> {
        parse_challenges(values).map(|challenges| bearer(&challenges))
    }

    /// The scope tokens of [`Self::scope`], split on spaces (RFC 6749 section 3.3's
    /// `scope-token *( SP scope-token )`; runs of spaces and leading or trailing ones are
    /// tolerated), in order, duplicates kept. Empty when there is no `scope`.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scope
            .as_deref()
            .unwrap_or_default()
            .split(' ')
            .filter(|s| !s.is_empty())
    }

    /// Whether `error` is `insufficient_scope` (RFC 6750 section 3.1): the token is valid but
    /// lacks scopes, the cue for step-up authorization ("Step-Up Authorization Flow").
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// Whether `error` is `invalid_token` (RFC 6750 section 3.1): expired, revoked or
    /// malformed; refresh it or authorize again.
    pub fn is_invalid_token(&self) -> bool {
        self.error.as_deref() == Some("invalid_token")
    }

    /// Whether `error` is `invalid_request` (RFC 6750 section 3.1): the request itself was
    /// malformed; authorizing again will not help.
    pub fn is_invalid_request(&self) -> bool {
        self.error.as_deref() == Some("invalid_request")
    }
}

/// The view of the first `Bearer` challenge in `challenges` (see
/// [`BearerChallenge::from_challenge`]), if there is one.
pub fn bearer(challenges: &[Challenge]) -> Option<BearerChallenge> {
    challenges.iter().find_map(BearerChallenge::from_challenge)
}

#[cfg(test)]
mod tests;
