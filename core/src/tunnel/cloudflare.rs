//! Managed `cloudflared`: the decisions a client makes around its bundled Cloudflare companion,
//! as pure functions (`protocol.md`, "Managed Cloudflare runtime fetch").
//!
//! - [`runtime_request`] builds `GET /v1/tunnels/{id}/cloudflare/runtime` with the headers every
//!   control-plane request carries; [`parse_runtime_response`] reads its answer into a
//!   [`ManagedRuntime`] or a [`RuntimeError`] typed by blame. A `401`/`403` is an authorization
//!   failure that never falls back to another credential; a `429`/`5xx`/transport failure may be
//!   retried a few times at start-up ([`fetch_retry_in`]).
//! - The token reaches the child only through its environment ([`companion_env`]); the argv
//!   ([`companion_args`]) holds no secret, and inherited credentials are kept from the child
//!   ([`keep_from_child_env`]).
//! - Readiness: the companion's loopback `GET /ready` ([`ready_from_probe`]) drives a small
//!   [`CompanionState`] ([`after_probe`]); [`combine_readiness`] folds it into the client's
//!   verdict, so `/readyz` says not ready until the companion is, and after it dies.
//!
//! Nothing here reads a clock, the network or the environment; the driver does.

use crate::time::{Duration, SystemTime};
use std::fmt;

use super::engine::{
    common_headers, tunnel_base_url, Config, ConfigError, NotReady, Readiness, Secret,
};
use super::wire::ApiErrorResponse;
use crate::backoff::{self, Backoff};
use crate::http::{Method, Request, ResponseHead};

/// The environment variable `cloudflared tunnel run` reads its token from.
pub const TOKEN_ENV: &str = "TUNNEL_TOKEN";
/// The environment variable that turns cloudflared's remote management diagnostics on or off.
pub const DIAGNOSTICS_ENV: &str = "TUNNEL_MANAGEMENT_DIAGNOSTICS";
/// The path of cloudflared's readiness endpoint on its `--metrics` listener.
pub const READY_PATH: &str = "/ready";
/// The most attempts of the runtime fetch at start-up (the first included).
pub const MAX_FETCH_ATTEMPTS: u32 = 4;

/// `GET {base}/v1/tunnels/{tunnel_id}/cloudflare/runtime` with the common control-plane headers
/// (the API key as `Authorization: Bearer`, client name and version, wire version, instance id,
/// server info).
pub fn runtime_request(config: &Config) -> Result<Request, ConfigError> {
    Ok(Request {
        method: Method::Get,
        url: format!("{}/cloudflare/runtime", tunnel_base_url(config)),
        headers: common_headers(config)?,
        body: Vec::new(),
    })
}

/// The non-secret metadata of the managed Cloudflare tunnel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudflareTunnel {
    /// Cloudflare's tunnel id.
    pub tunnel_id: String,
    /// The managed tunnel's name.
    pub name: String,
    /// The Cloudflare account id.
    pub account_id: String,
    /// When Cloudflare created it, if known.
    pub created_at: Option<String>,
}

/// What a successful runtime fetch gives: metadata and the token (kept in memory only; its
/// `Debug` is redacted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedRuntime {
    /// The tunnel's metadata.
    pub tunnel: CloudflareTunnel,
    /// The runtime token for `cloudflared`.
    pub token: Secret,
}

/// Why the runtime fetch gave no token. No variant ever holds the token or the response body.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeError {
    /// `401`/`403`: the API key may not use this tunnel. Operator action; no fallback.
    Unauthorized {
        /// The status.
        status: u16,
        /// The tunnel-service error code, if any.
        code: Option<String>,
    },
    /// `404`: the tunnel has no managed Cloudflare runtime material.
    NotProvisioned {
        /// The tunnel-service error code, if any.
        code: Option<String>,
    },
    /// `429` or `5xx`: the service cannot answer now.
    Unavailable {
        /// The status.
        status: u16,
        /// The tunnel-service error code, if any.
        code: Option<String>,
        /// The server's `Retry-After` (on `429`/`503`), capped.
        retry_after: Option<Duration>,
    },
    /// Another status (`400 invalid_tunnel_id_format`, ...).
    Rejected {
        /// The status.
        status: u16,
        /// The tunnel-service error code, if any.
        code: Option<String>,
    },
    /// A `200` whose body is not a valid runtime response.
    Malformed {
        /// What is wrong (never the value).
        reason: &'static str,
    },
    /// The request failed before a response arrived.
    Transport {
        /// The transport's description (no secret: URL and error kind only).
        detail: String,
    },
}

impl RuntimeError {
    /// Whether another attempt may help (`429`, `5xx`, transport failures).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            RuntimeError::Unavailable { .. } | RuntimeError::Transport { .. }
        )
    }
}

fn code_text(code: Option<&String>) -> String {
    code.map(|c| format!(", code {c}")).unwrap_or_default()
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Unauthorized { status, code } => write!(
                f,
                "the control plane refused the managed Cloudflare runtime fetch (HTTP {status}{}): \
                 check that the API key may use this tunnel; no other credential is tried \
                 (give --cloudflared.token to use a static token instead)",
                code_text(code.as_ref())
            ),
            RuntimeError::NotProvisioned { code } => write!(
                f,
                "this tunnel has no managed Cloudflare runtime (HTTP 404{}): provision one, or give \
                 --cloudflared.token",
                code_text(code.as_ref())
            ),
            RuntimeError::Unavailable { status, code, .. } => write!(
                f,
                "the managed Cloudflare runtime is unavailable (HTTP {status}{})",
                code_text(code.as_ref())
            ),
            RuntimeError::Rejected { status, code } => write!(
                f,
                "the control plane rejected the managed Cloudflare runtime fetch (HTTP {status}{})",
                code_text(code.as_ref())
            ),
            RuntimeError::Malformed { reason } => write!(
                f,
                "the managed Cloudflare runtime response is malformed: {reason}"
            ),
            RuntimeError::Transport { detail } => write!(
                f,
                "the managed Cloudflare runtime fetch failed before a response: {detail}"
            ),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// Why a Cloudflare tunnel token cannot be used (the caller, or the operator, gave a bad one).
/// Its `Display` never repeats the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is empty.
    #[error("the token is empty")]
    Empty,
    /// The token holds a byte that is not printable ASCII.
    #[error("the token holds spaces, control or non-ASCII characters")]
    NotPrintable,
}

/// Checks a Cloudflare tunnel token (static or fetched): non-empty, printable ASCII without
/// spaces (it travels in an environment variable). The reason never repeats the value.
pub fn validate_token(token: &str) -> Result<(), TokenError> {
    if token.is_empty() {
        return Err(TokenError::Empty);
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::NotPrintable);
    }
    Ok(())
}

fn required_text(
    obj: &serde_json::Value,
    key: &str,
    missing: &'static str,
) -> Result<String, RuntimeError> {
    match obj.get(key).and_then(serde_json::Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s.to_owned()),
        _ => Err(RuntimeError::Malformed { reason: missing }),
    }
}

/// Reads the runtime endpoint's answer. `wall` and `retry_after_cap` judge a `Retry-After`.
///
/// Only a `200` with `cloudflare_tunnel.{tunnel_id, name, account_id}` as non-empty strings and
/// a valid `runtime_token` is a success; errors never echo the body (it is secret-bearing).
pub fn parse_runtime_response(
    head: &ResponseHead,
    body: &[u8],
    wall: SystemTime,
    retry_after_cap: Duration,
) -> Result<ManagedRuntime, RuntimeError> {
    let code = || ApiErrorResponse::parse(body).and_then(|e| e.error.code);
    match head.status {
        200 => {}
        401 | 403 => {
            return Err(RuntimeError::Unauthorized {
                status: head.status,
                code: code(),
            })
        }
        404 => return Err(RuntimeError::NotProvisioned { code: code() }),
        429 | 500..=599 => {
            let retry_after = if matches!(head.status, 429 | 503) {
                backoff::retry_after_from_headers(&head.headers, wall, retry_after_cap)
            } else {
                None
            };
            return Err(RuntimeError::Unavailable {
                status: head.status,
                code: code(),
                retry_after,
            });
        }
        status => {
            return Err(RuntimeError::Rejected {
                status,
                code: code(),
            })
        }
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| RuntimeError::Malformed {
            reason: "the body is not JSON",
        })?;
    let tunnel = value
        .get("cloudflare_tunnel")
        .filter(|t| t.is_object())
        .ok_or(RuntimeError::Malformed {
            reason: "cloudflare_tunnel is missing or not an object",
        })?;
    let tunnel = CloudflareTunnel {
        tunnel_id: required_text(
            tunnel,
            "tunnel_id",
            "cloudflare_tunnel.tunnel_id is missing or empty",
        )?,
        name: required_text(tunnel, "name", "cloudflare_tunnel.name is missing or empty")?,
        account_id: required_text(
            tunnel,
            "account_id",
            "cloudflare_tunnel.account_id is missing or empty",
        )?,
        created_at: tunnel
            .get("created_at")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    };
    let token = value
        .get("runtime_token")
        .and_then(serde_json::Value::as_str)
        .ok_or(RuntimeError::Malformed {
            reason: "runtime_token is missing or not a string",
        })?;
    if token.is_empty() {
        return Err(RuntimeError::Malformed {
            reason: "runtime_token is empty",
        });
    }
    validate_token(token).map_err(|_| RuntimeError::Malformed {
        reason: "runtime_token holds spaces, control or non-ASCII characters",
    })?;
    Ok(ManagedRuntime {
        tunnel,
        token: Secret::new(token),
    })
}

/// The wait before fetch attempt `attempt + 1` after `error` on attempt `attempt` (1 = the
/// first), or `None` to give up: not retryable, or [`MAX_FETCH_ATTEMPTS`] reached.
pub fn fetch_retry_in(error: &RuntimeError, attempt: u32, random: u64) -> Option<Duration> {
    if !error.is_retryable() || attempt >= MAX_FETCH_ATTEMPTS {
        return None;
    }
    let retry_after = match error {
        RuntimeError::Unavailable { retry_after, .. } => *retry_after,
        _ => None,
    };
    let policy = Backoff {
        initial: Duration::from_millis(500),
        max: Duration::from_secs(8),
        multiplier: 2,
    };
    Some(backoff::retry_delay(&policy, attempt, random, retry_after))
}

/// The companion's arguments (after the program): no secret, no auto-update, metrics and
/// readiness on `metrics_addr` (a loopback `IP:PORT`), then `run`.
pub fn companion_args(metrics_addr: &str) -> Vec<String> {
    [
        "tunnel",
        "--no-autoupdate",
        "--metrics",
        metrics_addr,
        "run",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// The variables set in the companion's environment: the token, and remote management
/// diagnostics off (they would expose `/metrics` and `/debug/pprof` remotely).
pub fn companion_env(token: &Secret) -> Vec<(&'static str, String)> {
    vec![
        (TOKEN_ENV, token.expose().to_owned()),
        (DIAGNOSTICS_ENV, "false".to_owned()),
    ]
}

/// Whether an inherited variable is kept from the companion: the variables
/// [`companion_env`] sets (in any case, so one value wins), the tunnel API key's variables, the
/// static-token variable, and `extra` (e.g. the variable named by `env:VAR`).
pub fn keep_from_child_env(name: &str, extra: &[&str]) -> bool {
    [
        TOKEN_ENV,
        DIAGNOSTICS_ENV,
        "CLOUDFLARED_TUNNEL_TOKEN",
        "CONTROL_PLANE_API_KEY",
        "OPENAI_API_KEY",
    ]
    .iter()
    .chain(extra)
    .any(|k| k.eq_ignore_ascii_case(name))
}

/// Whether one answer of the companion's `GET /ready` says it is ready: `200`, and when the
/// body reports `readyConnections`, at least one.
pub fn ready_from_probe(status: u16, body: &[u8]) -> bool {
    if status != 200 {
        return false;
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => match v.get("readyConnections") {
            Some(n) => n.as_u64().is_some_and(|n| n > 0),
            None => true,
        },
        Err(_) => true,
    }
}

/// Where the companion stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompanionState {
    /// Started, never ready yet.
    Starting,
    /// The last probe said ready.
    Ready,
    /// It was ready; the last probe said not (or failed).
    Unready,
    /// The process is gone.
    Exited,
}

impl CompanionState {
    /// Why `/readyz` is not ready in this state (`None` when ready).
    pub fn not_ready_reason(self) -> Option<&'static str> {
        match self {
            CompanionState::Starting => Some("cloudflared is starting"),
            CompanionState::Ready => None,
            CompanionState::Unready => Some("cloudflared has no ready connection"),
            CompanionState::Exited => Some("cloudflared exited"),
        }
    }
}

/// The state after a probe answered `ready` (a failed probe is `false`). An exited companion
/// stays exited; one that was never ready stays starting until its first ready probe.
pub fn after_probe(state: CompanionState, ready: bool) -> CompanionState {
    match (state, ready) {
        (CompanionState::Exited, _) => CompanionState::Exited,
        (_, true) => CompanionState::Ready,
        (CompanionState::Starting, false) => CompanionState::Starting,
        (_, false) => CompanionState::Unready,
    }
}

/// The client's readiness with a managed companion: not ready while the companion is not,
/// whatever the engine says; otherwise the engine's verdict.
pub fn combine_readiness(engine: Readiness, companion: Option<CompanionState>) -> Readiness {
    match companion {
        Some(state) if state != CompanionState::Ready => {
            Readiness::NotReady(NotReady::Companion { state })
        }
        _ => engine,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::http::Headers;
    use crate::time::UNIX_EPOCH;

    const TOKEN: &str = "eyJhIjoiYWNjdCIsInQiOiJ0dW4iLCJzIjoic2VjcmV0In0=";

    fn head(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
        let mut h = Headers::new();
        for (n, v) in headers {
            h.append(*n, *v).unwrap();
        }
        ResponseHead { status, headers: h }
    }

    fn parse(
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<ManagedRuntime, RuntimeError> {
        parse_runtime_response(
            &head(status, headers),
            body.as_bytes(),
            UNIX_EPOCH,
            Duration::from_secs(60),
        )
    }

    fn good_body(token: &str) -> String {
        serde_json::json!({
            "cloudflare_tunnel": {"tunnel_id": "cf-1", "name": "n", "account_id": "a", "created_at": null},
            "runtime_token": token
        })
        .to_string()
    }

    #[test]
    fn the_runtime_request_is_a_get_on_the_plural_path_with_the_common_headers() {
        let config = Config::new(
            "https://cp.example/",
            "tun/1",
            Secret::new("sk-key"),
            "inst",
        );
        let req = runtime_request(&config).unwrap();
        assert_eq!(req.method, Method::Get);
        assert_eq!(
            req.url,
            "https://cp.example/v1/tunnels/tun%2F1/cloudflare/runtime"
        );
        assert_eq!(req.headers.get("Authorization"), Some("Bearer sk-key"));
        assert_eq!(
            req.headers.get("X-Tunnel-Client-Wire-Protocol-Version"),
            Some(crate::tunnel::WIRE_PROTOCOL_VERSION)
        );
        assert_eq!(req.headers.get("X-Tunnel-Client-Instance-Id"), Some("inst"));
        assert!(req.body.is_empty());
    }

    #[test]
    fn a_200_with_metadata_and_token_gives_the_token() {
        let rt = parse(200, &[("Cache-Control", "no-store")], &good_body(TOKEN)).unwrap();
        assert_eq!(rt.token.expose(), TOKEN);
        assert_eq!(rt.tunnel.tunnel_id, "cf-1");
        assert_eq!(rt.tunnel.created_at, None);
        assert!(!format!("{rt:?}").contains(TOKEN));
    }

    #[test]
    fn unauthorized_is_its_own_error_not_retried_and_never_a_fallback() {
        for status in [401, 403] {
            let e = parse(
                status,
                &[],
                r#"{"error":{"message":"no","code":"tunnel_use_forbidden"}}"#,
            )
            .unwrap_err();
            assert_eq!(
                e,
                RuntimeError::Unauthorized {
                    status,
                    code: Some("tunnel_use_forbidden".into())
                }
            );
            assert!(!e.is_retryable());
            assert_eq!(fetch_retry_in(&e, 1, 0), None);
            let text = e.to_string();
            assert!(
                text.contains(&format!("HTTP {status}")) && text.contains("no other credential"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_404_means_not_provisioned_and_other_4xx_are_rejections() {
        assert_eq!(
            parse(404, &[], "{}").unwrap_err(),
            RuntimeError::NotProvisioned { code: None }
        );
        let e = parse(
            400,
            &[],
            r#"{"error":{"message":"m","code":"invalid_tunnel_id_format"}}"#,
        )
        .unwrap_err();
        assert!(matches!(e, RuntimeError::Rejected { status: 400, .. }));
        assert!(!e.is_retryable());
    }

    #[test]
    fn busy_and_server_errors_retry_a_few_times_honouring_retry_after() {
        let e = parse(503, &[("Retry-After", "5")], "").unwrap_err();
        assert_eq!(
            e,
            RuntimeError::Unavailable {
                status: 503,
                code: None,
                retry_after: Some(Duration::from_secs(5))
            }
        );
        let wait = fetch_retry_in(&e, 1, 7).unwrap();
        assert!(wait >= Duration::from_secs(5), "{wait:?}");
        assert!(fetch_retry_in(&e, MAX_FETCH_ATTEMPTS - 1, 7).is_some());
        assert_eq!(fetch_retry_in(&e, MAX_FETCH_ATTEMPTS, 7), None);
        // A 500 carries no Retry-After for us.
        let e = parse(500, &[("Retry-After", "5")], "").unwrap_err();
        assert!(matches!(
            e,
            RuntimeError::Unavailable {
                retry_after: None,
                ..
            }
        ));
        let t = RuntimeError::Transport {
            detail: "connection refused".into(),
        };
        assert!(fetch_retry_in(&t, 1, 0).is_some());
    }

    #[test]
    fn a_malformed_200_is_refused_without_echoing_the_body() {
        let cases = [
            ("not json".to_owned(), "not JSON"),
            (r#"{"runtime_token":"abc"}"#.to_owned(), "cloudflare_tunnel"),
            (
                serde_json::json!({"cloudflare_tunnel": {"tunnel_id": "", "name": "n", "account_id": "a"}, "runtime_token": TOKEN}).to_string(),
                "tunnel_id",
            ),
            (
                serde_json::json!({"cloudflare_tunnel": {"tunnel_id": "t", "name": "n", "account_id": "a"}}).to_string(),
                "runtime_token is missing",
            ),
            (good_body(""), "runtime_token is empty"),
            (good_body("abc def-secret"), "spaces"),
        ];
        for (body, needle) in cases {
            let e = parse(200, &[], &body).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(needle), "{text}");
            assert!(!text.contains("secret") && !text.contains(TOKEN), "{text}");
            assert!(!e.is_retryable());
        }
    }

    #[test]
    fn the_token_travels_in_the_environment_only() {
        let token = Secret::new(TOKEN);
        let args = companion_args("127.0.0.1:4567");
        assert_eq!(
            args,
            [
                "tunnel",
                "--no-autoupdate",
                "--metrics",
                "127.0.0.1:4567",
                "run"
            ]
        );
        assert!(args.iter().all(|a| !a.contains(TOKEN)));
        let env = companion_env(&token);
        assert!(env.contains(&(TOKEN_ENV, TOKEN.to_owned())));
        assert!(env.contains(&(DIAGNOSTICS_ENV, "false".to_owned())));
    }

    #[test]
    fn inherited_credentials_are_kept_from_the_child() {
        for name in [
            "TUNNEL_TOKEN",
            "tunnel_token",
            "CLOUDFLARED_TUNNEL_TOKEN",
            "CONTROL_PLANE_API_KEY",
            "OPENAI_API_KEY",
            "TUNNEL_MANAGEMENT_DIAGNOSTICS",
        ] {
            assert!(keep_from_child_env(name, &[]), "{name}");
        }
        assert!(keep_from_child_env("MY_KEY", &["MY_KEY"]));
        assert!(!keep_from_child_env("PATH", &[]));
        assert!(!keep_from_child_env("HOME", &["MY_KEY"]));
    }

    #[test]
    fn static_tokens_are_checked_like_fetched_ones() {
        assert!(validate_token(TOKEN).is_ok());
        assert!(validate_token("").is_err());
        assert!(validate_token("a b").is_err());
        assert!(validate_token("a\u{0}b").is_err());
        assert!(validate_token("tök").is_err());
    }

    #[test]
    fn ready_means_200_with_a_ready_connection() {
        assert!(ready_from_probe(
            200,
            br#"{"status":200,"readyConnections":2,"connectorId":"x"}"#
        ));
        assert!(!ready_from_probe(
            200,
            br#"{"status":503,"readyConnections":0}"#
        ));
        assert!(!ready_from_probe(
            503,
            br#"{"status":503,"readyConnections":0}"#
        ));
        assert!(ready_from_probe(200, b""));
        assert!(!ready_from_probe(500, b"ok"));
    }

    #[test]
    fn companion_state_is_starting_until_ready_and_exit_is_final() {
        use CompanionState::*;
        assert_eq!(after_probe(Starting, false), Starting);
        assert_eq!(after_probe(Starting, true), Ready);
        assert_eq!(after_probe(Ready, false), Unready);
        assert_eq!(after_probe(Unready, true), Ready);
        assert_eq!(after_probe(Exited, true), Exited);
        assert_eq!(Ready.not_ready_reason(), None);
        assert!(Exited.not_ready_reason().unwrap().contains("exited"));
    }

    #[test]
    fn readyz_waits_for_the_companion_and_otherwise_follows_the_engine() {
        let engine_not_ready = Readiness::NotReady(NotReady::NoSuccessfulPoll);
        assert_eq!(combine_readiness(Readiness::Ready, None), Readiness::Ready);
        assert_eq!(
            combine_readiness(Readiness::Ready, Some(CompanionState::Ready)),
            Readiness::Ready
        );
        assert_eq!(
            combine_readiness(engine_not_ready.clone(), Some(CompanionState::Ready)),
            engine_not_ready
        );
        for state in [
            CompanionState::Starting,
            CompanionState::Unready,
            CompanionState::Exited,
        ] {
            assert_eq!(
                combine_readiness(Readiness::Ready, Some(state)),
                Readiness::NotReady(NotReady::Companion { state })
            );
        }
    }
}
