//! The token endpoint: client authentication, the code exchange (PKCE, redirect URI,
//! resource) and refresh with rotation (see the parent module's docs).

use base64::Engine as _;
use mcpwire_core::auth::PkceVerifier;

use super::*;

impl AuthServer {
    /// `POST /oauth/token`.
    pub(super) fn token(&self, req: &Request) -> Result<(u16, Value), OAuthError> {
        let form_type = req
            .headers
            .get("content-type")
            .and_then(|v| v.split(';').next())
            .map(|v| {
                v.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            });
        if form_type != Some(true) {
            return Err(OAuthError::request(
                "the body must be application/x-www-form-urlencoded",
            ));
        }
        let (p, repeated) = form(&req.body)?;
        if let Some(k) = repeated.first() {
            return Err(OAuthError::request(format!("{k} is sent more than once")));
        }
        let grant_type = match p.get("grant_type").map(String::as_str) {
            Some(g @ ("authorization_code" | "refresh_token")) => g,
            Some(other) => {
                return Err(OAuthError::new(
                    400,
                    "unsupported_grant_type",
                    format!("grant_type {other:?} is not served here"),
                ))
            }
            None => return Err(OAuthError::request("grant_type is required")),
        };
        let client_id = self.client_authentication(&req.headers, &p)?;
        let resource = self.resource().ok_or_else(OAuthError::not_ready)?;
        match p.get("resource") {
            Some(r) if *r == resource => {}
            Some(_) => {
                return Err(OAuthError::new(
                    400,
                    "invalid_target",
                    format!("resource is not this server's ({resource})"),
                ))
            }
            None => {
                return Err(OAuthError::new(
                    400,
                    "invalid_target",
                    format!("resource is required ({resource})"),
                ))
            }
        }
        if grant_type == "authorization_code" {
            self.exchange_code(&client_id, &p)
        } else {
            self.refresh(&client_id, &p)
        }
    }

    /// The client, authenticated: `client_secret_basic` with HTTP Basic, a public client by
    /// `client_id`.
    fn client_authentication(
        &self,
        h: &Headers,
        p: &BTreeMap<String, String>,
    ) -> Result<String, OAuthError> {
        let invalid = |d: &str| OAuthError::new(401, "invalid_client", d);
        let basic = h
            .get("authorization")
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, creds)| creds.trim());
        let state = lock(&self.state);
        if let Some(creds) = basic {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(creds)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| invalid("the Basic credentials are not base64 of id:secret"))?;
            let (id, secret) = decoded
                .split_once(':')
                .ok_or_else(|| invalid("the Basic credentials are not id:secret"))?;
            let decode = |s: &str| {
                url::form_urlencoded::parse(format!("x={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            let (id, secret) = (decode(id), decode(secret));
            if p.get("client_id").is_some_and(|c| *c != id) {
                return Err(OAuthError::request(
                    "client_id differs from the Basic credentials",
                ));
            }
            return match state.clients.get(&id).and_then(|c| c.secret.as_deref()) {
                Some(expected) if same_secret(expected, &secret) => Ok(id),
                _ => Err(invalid("unknown client or wrong secret")),
            };
        }
        let id = p
            .get("client_id")
            .ok_or_else(|| invalid("no client authentication and no client_id"))?;
        match state.clients.get(id) {
            Some(c) if c.secret.is_none() => Ok(id.clone()),
            Some(_) => Err(invalid(
                "this client authenticates with client_secret_basic",
            )),
            None => Err(invalid("client_id is not registered here")),
        }
    }

    fn exchange_code(
        &self,
        client_id: &str,
        p: &BTreeMap<String, String>,
    ) -> Result<(u16, Value), OAuthError> {
        let required = |k: &str| {
            p.get(k)
                .ok_or_else(|| OAuthError::request(format!("{k} is required")))
        };
        let code = required("code")?;
        let redirect_uri = required("redirect_uri")?;
        let verifier = required("code_verifier")?;
        let mut state = lock(&self.state);
        // A code is spent by any attempt to use it.
        let approval = state
            .codes
            .remove(code)
            .filter(|a| a.expires > Instant::now())
            .ok_or_else(|| OAuthError::grant("the code is unknown, used or expired"))?;
        if approval.client_id != client_id {
            return Err(OAuthError::grant("the code was issued to another client"));
        }
        if approval.redirect_uri != *redirect_uri {
            return Err(OAuthError::grant(
                "redirect_uri differs from the authorization request's",
            ));
        }
        let verifier = PkceVerifier::new(verifier.as_str())
            .map_err(|e| OAuthError::grant(format!("code_verifier: {e}")))?;
        if verifier.challenge() != approval.code_challenge {
            return Err(OAuthError::grant(
                "code_verifier does not match the code_challenge",
            ));
        }
        let refresh = state.clients.get(client_id).is_some_and(|c| c.refresh);
        let out = self.issue(&mut state, client_id, &approval.scope, refresh)?;
        state.stats.tokens_issued += 1;
        Ok((200, out))
    }

    fn refresh(
        &self,
        client_id: &str,
        p: &BTreeMap<String, String>,
    ) -> Result<(u16, Value), OAuthError> {
        let token = p
            .get("refresh_token")
            .ok_or_else(|| OAuthError::request("refresh_token is required"))?;
        let mut state = lock(&self.state);
        let now = Instant::now();
        match state.refresh.get(token) {
            Some(t) if t.expires > now && t.client_id == client_id => {}
            Some(t) if t.client_id != client_id => {
                return Err(OAuthError::grant(
                    "the refresh token was issued to another client",
                ))
            }
            _ => {
                return Err(OAuthError::grant(
                    "the refresh token is unknown, used (rotated) or expired",
                ))
            }
        }
        let old = state
            .refresh
            .remove(token)
            .ok_or_else(|| OAuthError::grant("the refresh token is unknown"))?;
        let scope = match p.get("scope") {
            None => old.scope.clone(),
            Some(s) => {
                let asked = scopes(s);
                let had = scopes(&old.scope);
                if let Some(bad) = asked.iter().find(|a| !had.contains(a)) {
                    // The spent token is given back: a refused request spends nothing.
                    state.refresh.insert(token.clone(), old);
                    return Err(OAuthError::new(
                        400,
                        "invalid_scope",
                        format!("{bad:?} was not granted to this refresh token"),
                    ));
                }
                asked.join(" ")
            }
        };
        let out = self.issue(&mut state, client_id, &scope, true)?;
        state.stats.refreshes += 1;
        Ok((200, out))
    }

    /// A token response: a new access token, and a new refresh token when `refresh`.
    fn issue(
        &self,
        state: &mut State,
        client_id: &str,
        scope: &str,
        refresh: bool,
    ) -> Result<Value, OAuthError> {
        let now = Instant::now();
        let access = secure_token("mcpat_")?;
        room(&mut state.access, |t| t.expires)?;
        let ttl = self.config.token_ttl;
        state.access.insert(
            access.clone(),
            Token {
                client_id: client_id.to_owned(),
                scope: scope.to_owned(),
                expires: now + ttl,
            },
        );
        let mut out = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": ttl.as_secs(),
            "scope": scope,
        });
        if refresh {
            let token = secure_token("mcprt_")?;
            room(&mut state.refresh, |t| t.expires)?;
            state.refresh.insert(
                token.clone(),
                Token {
                    client_id: client_id.to_owned(),
                    scope: scope.to_owned(),
                    expires: now + REFRESH_LIFETIME,
                },
            );
            out["refresh_token"] = json!(token);
        }
        Ok(out)
    }
}
