//! The `mcpwire dev` subcommands: their flags, help texts and what running them does.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};

use mcpwire_dev::auth_server::AuthConfig;
use mcpwire_dev::control_plane::{self, ControlPlane};
use mcpwire_dev::mcp_server::{self, EraMode, McpServer};
use mcpwire_dev::ApiKey;

/// `mcpwire dev ...`.
#[derive(Subcommand, Debug)]
pub enum DevCommand {
    /// A reference MCP server (2026-07-28, and the legacy initialize era) with tools that
    /// exercise the tunnel path.
    #[command(long_about = MCP_SERVER_ABOUT)]
    McpServer(McpServerArgs),
    /// A local Secure MCP Tunnel control plane: the tunnel endpoints for tunnel clients and an
    /// MCP endpoint for MCP clients.
    #[command(long_about = CONTROL_PLANE_ABOUT)]
    ControlPlane(ControlPlaneArgs),
}

const MCP_SERVER_ABOUT: &str = "\
A reference MCP server for trying the tunnel path and for tests. It speaks MCP 2026-07-28
(stateless: every request carries _meta) and, unless --era modern, the legacy 2025-11-25 era
(initialize, notifications/initialized, Mcp-Session-Id sessions ended by DELETE) on the same
endpoint: a request with _meta[\"io.modelcontextprotocol/protocolVersion\"] is served as
2026-07-28, initialize opens a legacy session.

Over HTTP (--listen) the endpoint is /mcp: POST only (GET is 405), JSON responses, SSE when a
tool streams progress; 2026-07-28 requests must carry MCP-Protocol-Version, Mcp-Method,
Mcp-Name and Mcp-Param-* headers that match the body (-32020 otherwise; an unsupported version
is -32022 with data.supported). With --stdio it reads and writes newline-delimited JSON-RPC.

Tools: echo {text, response_headers}; slow {ms}; progress {steps, interval_ms} (needs _meta.progressToken);
fail {code, message, data, http_status, raw_body} (a JSON-RPC error, by default code 4217);
tenant {region} (region is mirrored in Mcp-Param-Region); ask {question, form} (MRTR: answers
input_required with an elicitation, completes on the retry with inputResponses; form is name
(the default), profile (integer, enum, boolean and number fields with defaults), login (asks
for a password) or url (a URL-mode elicitation of /elicit/consent on this server));
headers (returns the HTTP headers received).

With --resources-and-prompts it also serves the prompt greet {name, style}, the resources
mcpwire-dev://greeting and mcpwire-dev://motto (resources/list has two pages), the resource
template mcpwire-dev://greeting/{name}, subscriptions/listen (2026-07-28: acknowledged at once,
then the changes asked for) and the tool touch {list | uri}, which announces a change (tools,
prompts or resources list; a resource updated) to every subscription that asked for it.

With --auth (HTTP only) the endpoint is an OAuth-protected resource with its own loopback
authorization server on the same listener, so a client's whole login flow runs on one machine:
  POST /mcp without a valid bearer token   401, WWW-Authenticate: Bearer
                                           resource_metadata=\"http://ADDR/.well-known/oauth-protected-resource/mcp\",
                                           scope=\"mcp\" (and error=\"invalid_token\" for a bad one)
  GET  /.well-known/oauth-protected-resource/mcp    resource http://ADDR/mcp (exactly),
                                           authorization_servers [http://ADDR/oauth]
  GET  /.well-known/oauth-authorization-server/oauth   RFC 8414 metadata of the issuer
                                           http://ADDR/oauth (S256 PKCE, iss in responses,
                                           scopes mcp, mcp:admin, offline_access)
  POST /oauth/register                     dynamic registration (redirect_uris: https, or http
                                           to a loopback host; auth none or client_secret_basic)
  GET  /oauth/authorize                    checks client_id, redirect_uri (exact), response_type
                                           code, PKCE S256 (required), state, resource (this
                                           server's /mcp), scope; then a consent page whose Allow
                                           button POSTs back and redirects with code, state, iss
                                           (or, with --auth-auto-approve, that redirect at once)
  POST /oauth/token                        authorization_code (code_verifier, redirect_uri and
                                           resource checked) and refresh_token (rotated: a used
                                           refresh token is invalid_grant)
Errors are RFC 6749 JSON ({\"error\": \"invalid_grant\", \"error_description\": ...}). Every MCP
request needs the scope mcp; the extra tool admin_echo {text} needs mcp:admin (403
insufficient_scope, scope=\"mcp:admin\", otherwise), so a client's step-up can be tried. Tokens are
random, held in memory, and access tokens live --auth-token-ttl seconds.

The address is printed on stdout as 'listening on http://ADDR/mcp'. Loopback addresses only.";

const CONTROL_PLANE_ABOUT: &str = "\
A local Secure MCP Tunnel control plane, so a tunnel client (mcpwire tunnel run, or the Go
tunnel-client) can be tried with no outside service, and any MCP client can reach an MCP server
through it.

Tunnel clients (Authorization: Bearer <--api-key>) use the contract's endpoints:
  GET  /v1/tunnels/{id}                      metadata
  GET  /v1/tunnels/{id}/cloudflare/runtime   404 unless --cloudflare-runtime-token
  GET  /v1/tunnels/{id}/poll                 long poll: 200 with commands, or 204
  POST /v1/tunnels/{id}/response             200, 404 for unknown request ids, 401, 413 ...
MCP clients (no key) use POST /v1/mcp/{id} (and DELETE with Mcp-Session-Id to end a session):
each request becomes a command for the tunnel client's next poll, on ?channel= (default main),
and its answer comes back as the HTTP response (SSE when the tunnel client relayed
notifications). The header X-Mcpwire-Response-Timeout (e.g. 30s) sets the command's
response_timeout, copied verbatim; --response-timeout sets a default.

Test hooks live under /admin/ (same bearer key): POST /admin/tunnels/{id}/commands queues raw
commands at once; GET /admin/tunnels/{id}/responses lists every response POST received;
GET /admin/tunnels/{id}/polls and /pending; POST /admin/faults injects statuses with
Retry-After (e.g. {\"endpoint\":\"response\",\"status\":429,\"retry_after\":\"1\",\"count\":2});
POST /admin/settings {\"poll_batch\":30}; POST /admin/cloudflare-runtime.

The address is printed on stdout as 'listening on http://ADDR'. Loopback addresses only.";

/// The era choice of `dev mcp-server`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum EraArg {
    /// 2026-07-28 requests by their _meta, and legacy sessions after initialize.
    #[default]
    Dual,
    /// 2026-07-28 only (initialize is refused with -32022).
    Modern,
    /// The legacy initialize era only.
    Legacy,
}

/// Flags of `mcpwire dev mcp-server`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("transport").required(true).args(["listen", "stdio"])))]
pub struct McpServerArgs {
    /// Serve Streamable HTTP on ADDR (a loopback address; port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Serve newline-delimited JSON-RPC on stdin and stdout.
    #[arg(long)]
    pub stdio: bool,
    /// Which eras to answer.
    #[arg(long, value_enum, default_value_t = EraArg::Dual)]
    pub era: EraArg,
    /// Answer the legacy era only (the same as --era legacy).
    #[arg(long, conflicts_with = "era")]
    pub legacy: bool,
    /// The longest sleep the slow tool accepts, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    pub max_slow_ms: u64,
    /// Also serve a prompt, a resource, a resource template, subscriptions/listen and the
    /// touch tool (without it: tools only).
    #[arg(long)]
    pub resources_and_prompts: bool,
    /// Require OAuth bearer tokens on /mcp and serve the Protected Resource Metadata and a
    /// loopback authorization server (issuer http://ADDR/oauth) on the same listener.
    #[arg(long, conflicts_with = "stdio")]
    pub auth: bool,
    /// With --auth: approve every valid authorization request at once (a 302 to the client's
    /// redirect URI with the code) instead of showing the consent page.
    #[arg(long, requires = "auth", conflicts_with = "stdio")]
    pub auth_auto_approve: bool,
    /// With --auth: how long an access token lives, in seconds (its expires_in; default 3600).
    #[arg(long, value_name = "SECS", requires = "auth", conflicts_with = "stdio",
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub auth_token_ttl: Option<u64>,
    /// With --auth: the host name the authorization server's documents use (issuer and
    /// endpoints on the listener's port), so that it looks like a separate host from the
    /// protected resource; localhost only (the listener is on loopback).
    #[arg(long, value_name = "HOST", requires = "auth", conflicts_with = "stdio",
          value_parser = ["localhost"])]
    pub auth_issuer_host: Option<String>,
}

/// Flags of `mcpwire dev control-plane`.
#[derive(Args, Debug)]
pub struct ControlPlaneArgs {
    /// Listen on ADDR (a loopback address; port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// The tunnel clients' API key: env:VAR, file:PATH, or the key itself.
    #[arg(long, value_name = "SOURCE")]
    pub api_key: String,
    /// The response_timeout of MCP requests without an X-Mcpwire-Response-Timeout header
    /// (the contract's grammar, e.g. 30s or 4500ms).
    #[arg(long, value_name = "DURATION")]
    pub response_timeout: Option<String>,
    /// The longest a poll waits for commands, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub max_poll_wait_ms: u64,
    /// How long an MCP request without a valid response_timeout waits for the tunnel client, in
    /// milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 120_000)]
    pub mcp_wait_ms: u64,
    /// Added to a command's response_timeout before it is dropped, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    pub expiry_grace_ms: u64,
    /// Polls return up to N commands whatever their limit (1 to 1000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub poll_batch: Option<u16>,
    /// Serve a managed Cloudflare runtime with this token: env:VAR, file:PATH, or the token.
    #[arg(long, value_name = "SOURCE")]
    pub cloudflare_runtime_token: Option<String>,
}

/// Runs a `dev` subcommand; returns when it ends (stdio input closed) or never (HTTP).
pub fn run(command: DevCommand) -> ExitCode {
    match command {
        DevCommand::McpServer(args) => run_mcp_server(args),
        DevCommand::ControlPlane(args) => run_control_plane(args),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("mcpwire: {message}");
    ExitCode::FAILURE
}

fn loopback_only(addr: SocketAddr, flag: &str) -> Result<(), ExitCode> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(fail(&format!(
            "{flag} {addr}: the dev servers listen on loopback addresses only (127.0.0.1, ::1)"
        )))
    }
}

fn serve_forever(line: &str) -> ! {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    loop {
        std::thread::park();
    }
}

fn run_mcp_server(args: McpServerArgs) -> ExitCode {
    let era = match (args.legacy, args.era) {
        (true, _) | (_, EraArg::Legacy) => EraMode::Legacy,
        (_, EraArg::Modern) => EraMode::Modern,
        (_, EraArg::Dual) => EraMode::Dual,
    };
    let config = mcp_server::Config {
        era,
        max_slow: Duration::from_millis(args.max_slow_ms),
        resources_and_prompts: args.resources_and_prompts,
        auth: args.auth.then(|| AuthConfig {
            auto_approve: args.auth_auto_approve,
            token_ttl: args
                .auth_token_ttl
                .map_or(AuthConfig::default().token_ttl, Duration::from_secs),
            issuer_host: args.auth_issuer_host.clone(),
        }),
        ..mcp_server::Config::default()
    };
    match args.listen {
        Some(addr) => {
            if let Err(code) = loopback_only(addr, "--listen") {
                return code;
            }
            match McpServer::start_http(config, addr) {
                Ok(handle) => {
                    let mut line = format!("listening on {}", handle.url());
                    if let Some(issuer) = handle.server().auth().and_then(|a| a.issuer()) {
                        line.push_str(&format!("\nauthorization server: {issuer}"));
                    }
                    serve_forever(&line)
                }
                Err(e) => fail(&format!("--listen {addr}: cannot listen: {e}")),
            }
        }
        None => {
            let server = McpServer::new(config);
            let stdin = std::io::stdin();
            match server.serve_process_stdio(stdin.lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&format!("stdio: {e}")),
            }
        }
    }
}

fn run_control_plane(args: ControlPlaneArgs) -> ExitCode {
    if let Err(code) = loopback_only(args.listen, "--listen") {
        return code;
    }
    let api_key = match ApiKey::from_source(&args.api_key) {
        Ok(k) => k,
        Err(e) => return fail(&format!("--api-key: {e}")),
    };
    let cloudflare = match args
        .cloudflare_runtime_token
        .as_deref()
        .map(ApiKey::from_source)
    {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(e)) => return fail(&format!("--cloudflare-runtime-token: {e}")),
    };
    if let Some(t) = &args.response_timeout {
        if let Err(e) = mcpwire_core::tunnel::response_timeout::parse(t) {
            return fail(&format!(
                "--response-timeout {t:?}: {e} (one integer and a unit: ns, us, ms, s, m or h)"
            ));
        }
    }
    let mut config = control_plane::Config::new(api_key);
    config.response_timeout = args.response_timeout;
    config.max_poll_wait = Duration::from_millis(args.max_poll_wait_ms);
    config.mcp_wait = Duration::from_millis(args.mcp_wait_ms);
    config.expiry_grace = Duration::from_millis(args.expiry_grace_ms);
    config.cloudflare_runtime_token = cloudflare;
    match ControlPlane::start(config, args.listen) {
        Ok(handle) => {
            handle
                .plane()
                .set_poll_batch(args.poll_batch.map(usize::from));
            let line = format!(
                "listening on {} (MCP clients: {})",
                handle.base_url(),
                handle.mcp_url("{tunnel_id}")
            );
            serve_forever(&line)
        }
        Err(e) => fail(&format!("--listen {}: cannot listen: {e}", args.listen)),
    }
}
