//! `mcpwire client`'s OAuth side: logging in when an HTTP server asks (a `401`), the token
//! store, and the `login`, `logout` and `auth status` commands.
//!
//! Authorization is on for `--url` servers unless `--bearer` gives a token or `--no-auth`
//! turns it off. The browser step prints the authorization URL on stderr and waits on
//! `http://127.0.0.1:<--callback-port>/callback` for the browser to come back
//! (`--authorize-with redirect` instead follows the authorization server's redirect itself,
//! for servers that approve without a person: scripts, test setups). Grants are kept in the
//! token store (`--token-store PATH`, default `$XDG_DATA_HOME/mcpwire/tokens.json` or
//! `~/.local/share/mcpwire/tokens.json`, mode 0600), so the next run reuses or refreshes the
//! token instead of logging in again. No token is ever printed.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use mcpwire::mcp::{
    Authorization, FileStore, FollowRedirect, Grant, LoopbackBrowser, PreRegistered, Secret,
    UserAgent,
};
use mcpwire_dev::ApiKey;

use super::Failure;

/// How the browser step is done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(super) enum AuthorizeWith {
    /// Print the URL; wait for the browser on the loopback callback.
    #[default]
    Browser,
    /// Follow the authorization server's redirect without a person (servers that approve at
    /// once).
    Redirect,
}

/// The OAuth options of `mcpwire client`.
#[derive(Args, Debug, Default)]
pub(super) struct AuthOptions {
    /// OAuth: a pre-registered client id (else a Client ID Metadata Document URL or dynamic
    /// registration is used).
    #[arg(long, global = true, value_name = "ID")]
    pub client_id: Option<String>,
    /// OAuth: the pre-registered client's secret, from env:VAR or file:PATH.
    #[arg(long, global = true, value_name = "env:VAR|file:PATH")]
    pub client_secret: Option<String>,
    /// OAuth: the HTTPS URL of this client's Client ID Metadata Document, used as client id
    /// where the authorization server supports them.
    #[arg(long, global = true, value_name = "URL")]
    pub client_metadata_url: Option<String>,
    /// OAuth: the loopback port of the redirect URI (http://127.0.0.1:PORT/callback; 0 picks
    /// a free one).
    #[arg(long, global = true, value_name = "PORT", default_value_t = 0)]
    pub callback_port: u16,
    /// OAuth: the scope to ask for (default: what the server's challenge or metadata names).
    #[arg(long, global = true, value_name = "SCOPE")]
    pub scope: Option<String>,
    /// OAuth: where grants are kept (default: the user's data directory).
    #[arg(long, global = true, value_name = "PATH")]
    pub token_store: Option<PathBuf>,
    /// OAuth: how the browser step is done.
    #[arg(long, global = true, value_enum, default_value_t = AuthorizeWith::Browser)]
    pub authorize_with: AuthorizeWith,
    /// OAuth: open the authorization URL in the default browser too (it is always printed).
    #[arg(long, global = true)]
    pub open: bool,
    /// OAuth: allow http:// to loopback addresses for the server's authorization URLs
    /// (development servers on this machine).
    #[arg(long, global = true)]
    pub allow_http_loopback: bool,
    /// Do not log in when the server asks (a 401 fails the command).
    #[arg(long, global = true)]
    pub no_auth: bool,
}

/// `mcpwire client auth ...`.
#[derive(Subcommand, Debug)]
pub(super) enum AuthCommand {
    /// The grants in the token store: server, issuer, scopes, expiry (never a token).
    Status,
}

impl AuthOptions {
    /// The token store.
    pub(super) fn store(&self) -> Result<FileStore, Failure> {
        match &self.token_store {
            Some(p) => Ok(FileStore::new(p)),
            None => FileStore::in_data_dir().map_err(|e| Failure(format!("token store: {e}"))),
        }
    }

    /// The library's authorization options.
    pub(super) fn authorization(&self) -> Result<Authorization, Failure> {
        let user_agent: Arc<dyn UserAgent> = match self.authorize_with {
            AuthorizeWith::Browser => Arc::new(LoopbackBrowser::new().with_show(|url| {
                eprintln!(
                    "mcpwire client: the server asks for a login. Open this URL in a browser:"
                );
                eprintln!("  {url}");
                eprintln!(
                    "mcpwire client: waiting for the browser to come back (5 minutes at most)"
                );
            })),
            AuthorizeWith::Redirect => Arc::new(FollowRedirect),
        };
        let mut auth = Authorization::new(user_agent, Arc::new(self.store()?));
        auth.callback_port = self.callback_port;
        auth.scope = self.scope.clone();
        auth.allow_http_loopback = self.allow_http_loopback;
        auth.client.client_name = "mcpwire".to_owned();
        auth.client.metadata_document_url = self.client_metadata_url.clone();
        if self.client_secret.is_some() && self.client_id.is_none() {
            return Err(Failure::from("--client-secret needs --client-id"));
        }
        let secret = match &self.client_secret {
            None => None,
            Some(source) if source.starts_with("env:") || source.starts_with("file:") => {
                let key = ApiKey::from_source(source)
                    .map_err(|e| Failure(format!("--client-secret: {e}")))?;
                Some(Secret::new(key.expose()))
            }
            Some(_) => {
                return Err(Failure::from(
                    "--client-secret takes env:VAR or file:PATH (a secret on the command line would show in the process list)",
                ))
            }
        };
        if let Some(id) = &self.client_id {
            auth.client.pre_registered = Some(PreRegistered {
                client_id: id.clone(),
                client_secret: secret,
                issuer: None,
            });
        }
        Ok(auth)
    }
}

/// One grant as `auth status` shows it.
pub(super) fn describe(grant: &Grant, now_unix: u64) -> String {
    let expiry = match grant.tokens.expires_at {
        None => "no expiry given".to_owned(),
        Some(at) if at <= now_unix => format!(
            "expired {} ago{}",
            human(now_unix - at),
            if grant.tokens.refresh_token.is_some() {
                " (a refresh token is kept)"
            } else {
                ""
            }
        ),
        Some(at) => format!("expires in {}", human(at - now_unix)),
    };
    let scope = grant.tokens.scope.as_deref().unwrap_or("(none named)");
    format!(
        "{}\n  issuer: {}\n  client: {} ({:?})\n  scope: {scope}\n  token: {expiry}",
        grant.resource, grant.issuer, grant.client.client_id, grant.client.kind
    )
}

fn human(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_on_the_command_line_is_refused() {
        let opts = AuthOptions {
            client_id: Some("c".into()),
            client_secret: Some("hunter2".into()),
            token_store: Some(std::env::temp_dir().join("mcpwire-cli-auth-test.json")),
            ..AuthOptions::default()
        };
        let e = opts.authorization().unwrap_err();
        assert!(e.0.contains("env:VAR or file:PATH"), "{}", e.0);
        let opts = AuthOptions {
            client_secret: Some("env:X".into()),
            token_store: Some(std::env::temp_dir().join("mcpwire-cli-auth-test.json")),
            ..AuthOptions::default()
        };
        assert!(opts
            .authorization()
            .unwrap_err()
            .0
            .contains("needs --client-id"));
    }

    #[test]
    fn status_shows_no_token() {
        let g: Grant = serde_json::from_value(serde_json::json!({
            "resource": "https://mcp.example/mcp", "issuer": "https://as.example",
            "server_metadata": {"issuer": "https://as.example", "authorization_endpoint": null,
                "token_endpoint": null, "registration_endpoint": null, "scopes_supported": null,
                "response_types_supported": null, "grant_types_supported": null,
                "token_endpoint_auth_methods_supported": null, "code_challenge_methods_supported": null,
                "authorization_response_iss_parameter_supported": false,
                "client_id_metadata_document_supported": false, "raw": {}},
            "client": {"client_id": "c1", "auth_method": "none", "kind": "dynamic"},
            "tokens": {"access_token": "AT-SECRET", "refresh_token": "RT-SECRET", "expires_at": 1000, "scope": "a b"}
        }))
        .unwrap();
        let text = describe(&g, 400);
        assert!(text.contains("expires in 10 min"), "{text}");
        assert!(text.contains("scope: a b"));
        assert!(!text.contains("AT-SECRET") && !text.contains("RT-SECRET"));
        assert!(describe(&g, 2000).contains("expired 16 min ago (a refresh token is kept)"));
    }
}
