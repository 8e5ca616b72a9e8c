//! The authorization endpoint: the request's checks, the consent page and its answer, the
//! code and the redirect back (see the parent module's docs).

use super::*;

impl AuthServer {
    /// `/oauth/authorize`: `GET` the request, `POST` the consent page's answer.
    pub(super) fn authorize(&self, req: &Request, res: &mut dyn Respond) {
        let answer = match req.method.as_str() {
            "GET" => self.authorization_request(req),
            "POST" => self.consent_answer(req),
            _ => Err(OAuthError::new(
                405,
                "invalid_request",
                "GET (the request) or POST (the consent page's answer) only",
            )),
        };
        match answer {
            Ok(Step::Redirect(location)) => {
                let h = headers(&[("Location", &location), ("Cache-Control", "no-store")]);
                let _ = res.send(302, &h, b"");
            }
            Ok(Step::Page(html)) => {
                let h = headers(&[
                    ("Content-Type", "text/html; charset=utf-8"),
                    ("Cache-Control", "no-store"),
                    ("X-Frame-Options", "DENY"),
                ]);
                let _ = res.send(200, &h, html.as_bytes());
            }
            Err(e) => send_error(res, &e),
        }
    }

    /// `GET /oauth/authorize`: the checks of the module docs, in order.
    fn authorization_request(&self, req: &Request) -> Result<Step, OAuthError> {
        let (p, repeated) = form(req.query.as_bytes())?;
        let resource = self.resource().ok_or_else(OAuthError::not_ready)?;
        let issuer = self.issuer().ok_or_else(OAuthError::not_ready)?;
        // Without a known client and one of its redirect URIs, nothing is redirected.
        if repeated
            .iter()
            .any(|k| k == "client_id" || k == "redirect_uri")
        {
            return Err(OAuthError::request(
                "client_id and redirect_uri are sent at most once",
            ));
        }
        let client_id = p
            .get("client_id")
            .ok_or_else(|| OAuthError::request("client_id is required"))?;
        let redirect_uri = p
            .get("redirect_uri")
            .ok_or_else(|| OAuthError::request("redirect_uri is required"))?;
        let client_name = {
            let state = lock(&self.state);
            let client = state.clients.get(client_id).ok_or_else(|| {
                OAuthError::new(400, "invalid_client", "client_id is not registered here")
            })?;
            if !client
                .redirect_uris
                .iter()
                .any(|u| super::redirect_matches(u, redirect_uri))
            {
                return Err(OAuthError::request(
                    "redirect_uri is not one the client registered (compared exactly, but for \
                     the port of a loopback IP address)",
                ));
            }
            client.name.clone()
        };
        // From here on, errors go back to the client through its redirect URI.
        let state_param = p.get("state").cloned().unwrap_or_default();
        let back = |error: &str, description: &str| {
            Ok(Step::Redirect(redirect_to(
                redirect_uri,
                &[
                    ("error", error),
                    ("error_description", description),
                    ("state", &state_param),
                    ("iss", &issuer),
                ],
            )))
        };
        if let Some(k) = repeated.first() {
            return back("invalid_request", &format!("{k} is sent more than once"));
        }
        if p.get("response_type").map(String::as_str) != Some("code") {
            return back(
                "unsupported_response_type",
                "this server answers response_type=code only",
            );
        }
        match p.get("code_challenge_method").map(String::as_str) {
            Some("S256") => {}
            None => {
                return back(
                    "invalid_request",
                    "PKCE is required: code_challenge_method=S256",
                )
            }
            Some(_) => return back("invalid_request", "the only PKCE method is S256"),
        }
        let challenge = p.get("code_challenge").cloned().unwrap_or_default();
        if !is_s256_challenge(&challenge) {
            return back(
                "invalid_request",
                "code_challenge must be an S256 challenge (43 base64url characters)",
            );
        }
        if state_param.is_empty() {
            return back("invalid_request", "state is required");
        }
        match p.get("resource") {
            Some(r) if *r == resource => {}
            Some(_) => {
                return back(
                    "invalid_target",
                    &format!("resource is not this server's ({resource})"),
                )
            }
            None => {
                return back(
                    "invalid_target",
                    &format!("resource is required ({resource})"),
                )
            }
        }
        let scope = match p.get("scope").map(|s| scopes(s)) {
            None => SCOPE_MCP.to_owned(),
            Some(list) if list.is_empty() => SCOPE_MCP.to_owned(),
            Some(list) => {
                if let Some(bad) = list.iter().find(|s| !SCOPES_SUPPORTED.contains(s)) {
                    return back("invalid_scope", &format!("unknown scope {bad:?}"));
                }
                list.join(" ")
            }
        };
        let approval = Approval {
            client_id: client_id.clone(),
            redirect_uri: redirect_uri.clone(),
            code_challenge: challenge,
            state: state_param.clone(),
            scope,
            expires: Instant::now() + CONSENT_LIFETIME,
        };
        lock(&self.state).stats.authorization_requests += 1;
        if self.config.auto_approve {
            return self.approve(approval).map(Step::Redirect);
        }
        let consent = secure_token("mcpconsent_")?;
        let page = consent_page(
            client_name.as_deref().unwrap_or(client_id),
            &approval,
            &resource,
            &consent,
        );
        let mut state = lock(&self.state);
        room(&mut state.consents, |a| a.expires)?;
        state.consents.insert(consent, approval);
        state.stats.consent_pages += 1;
        Ok(Step::Page(page))
    }

    /// `POST /oauth/authorize`: the consent page's answer.
    fn consent_answer(&self, req: &Request) -> Result<Step, OAuthError> {
        let (p, _) = form(&req.body)?;
        let issuer = self.issuer().ok_or_else(OAuthError::not_ready)?;
        let id = p.get("consent").map(String::as_str).unwrap_or_default();
        let approval = lock(&self.state)
            .consents
            .remove(id)
            .filter(|a| a.expires > Instant::now())
            .ok_or_else(|| {
                OAuthError::request("this consent page is unknown, answered or expired")
            })?;
        match p.get("decision").map(String::as_str) {
            Some("allow") => self.approve(approval).map(Step::Redirect),
            _ => {
                lock(&self.state).stats.denials += 1;
                Ok(Step::Redirect(redirect_to(
                    &approval.redirect_uri,
                    &[
                        ("error", "access_denied"),
                        ("error_description", "the user denied the request"),
                        ("state", &approval.state),
                        ("iss", &issuer),
                    ],
                )))
            }
        }
    }

    /// Issues a code for `approval`: the redirect with `code`, `state` and `iss`.
    fn approve(&self, mut approval: Approval) -> Result<String, OAuthError> {
        let issuer = self.issuer().ok_or_else(OAuthError::not_ready)?;
        let code = secure_token("mcpcode_")?;
        approval.expires = Instant::now() + CODE_LIFETIME;
        let location = redirect_to(
            &approval.redirect_uri,
            &[
                ("code", &code),
                ("state", &approval.state),
                ("iss", &issuer),
            ],
        );
        let mut state = lock(&self.state);
        room(&mut state.codes, |a| a.expires)?;
        state.stats.codes_issued += 1;
        let scopes = &mut state.stats.granted_scopes;
        if scopes.len() >= 64 {
            scopes.remove(0);
        }
        scopes.push(approval.scope.clone());
        state.codes.insert(code, approval);
        Ok(location)
    }
}

/// What the authorization endpoint answers: a redirect or a page.
pub(super) enum Step {
    Redirect(String),
    Page(String),
}

/// `redirect_uri` with `pairs` added to its query (empty values left out).
pub(super) fn redirect_to(redirect_uri: &str, pairs: &[(&str, &str)]) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if !v.is_empty() {
            q.append_pair(k, v);
        }
    }
    let sep = if redirect_uri.contains('?') { '&' } else { '?' };
    format!("{redirect_uri}{sep}{}", q.finish())
}

pub(super) fn consent_page(client: &str, a: &Approval, resource: &str, consent: &str) -> String {
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Authorize {client}</title></head>\n\
<body>\n<h1>Authorize {client}</h1>\n\
<p>The application <b>{client}</b> asks to use the MCP server <code>{resource}</code> on your behalf, with the scope <code>{scope}</code>.</p>\n\
<p>You will be sent back to <code>{redirect}</code>.</p>\n\
<form method=\"post\" action=\"{AUTHORIZE_PATH}\">\n\
<input type=\"hidden\" name=\"consent\" value=\"{consent}\">\n\
<button type=\"submit\" name=\"decision\" value=\"allow\">Allow</button>\n\
<button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button>\n\
</form>\n</body></html>\n",
        client = html_escape(client),
        resource = html_escape(resource),
        scope = html_escape(&a.scope),
        redirect = html_escape(&a.redirect_uri),
        consent = html_escape(consent),
    )
}
