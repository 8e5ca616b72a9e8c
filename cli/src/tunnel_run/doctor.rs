//! `mcpwire tunnel doctor`: checks a `tunnel run` configuration (the same flags, variables and
//! config file) before the long-lived client starts, each check `ok`, `warn` or `fail` with what
//! to do; exit 0 when all pass, 1 when the worst is a warning, 2 when one fails. Secrets are
//! never printed: the API key is reported present, with where it came from.

use std::net::TcpListener;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use mcpwire::tunnel::{TargetKind, TunnelConfig};

use super::config::{self, RunArgs, RunConfig};
use super::go_compat;

/// The flags of `mcpwire tunnel doctor`: `tunnel run`'s, plus `--json`.
#[derive(Args, Debug, Clone)]
pub struct DoctorArgs {
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// The configuration to check, as `tunnel run` takes it.
    #[command(flatten)]
    pub run: RunArgs,
}

/// A check's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Passed.
    Ok,
    /// Works, but worth a look.
    Warn,
    /// `tunnel run` would not work.
    Fail,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
        }
    }
}

/// One check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// e.g. `control_plane`, `mcp.main`.
    pub id: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// What was found, and what to do when it is not ok.
    pub summary: String,
}

fn check(id: impl Into<String>, verdict: Verdict, summary: impl Into<String>) -> Check {
    Check {
        id: id.into(),
        verdict,
        summary: summary.into(),
    }
}

/// Where `name` is on `PATH` (or `name` itself when it holds a `/` and is a file).
fn find_program(name: &str, path: Option<&str>) -> Option<String> {
    let is_file = |p: &std::path::Path| p.is_file();
    if name.contains('/') {
        return is_file(std::path::Path::new(name)).then(|| name.to_owned());
    }
    path.unwrap_or("")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| is_file(p))
        .map(|p| p.display().to_string())
}

fn control_plane(tunnel: &TunnelConfig) -> Check {
    use mcpwire::tunnel::blocking::MetadataAnswer;
    let base = &tunnel.engine.base_url;
    match mcpwire::tunnel::blocking::check_control_plane(tunnel) {
        Ok(MetadataAnswer { status: 200, .. }) => check(
            "control_plane",
            Verdict::Ok,
            format!("{base} answers GET /v1/tunnels/{{id}} with 200: the key is accepted for this tunnel"),
        ),
        Ok(MetadataAnswer {
            status: status @ (401 | 403),
            code,
            ..
        }) => check(
            "control_plane",
            Verdict::Fail,
            format!(
                "{base} refuses the API key for this tunnel ({status}{}): check that the key is a \
                 runtime key with Tunnels Read and Use for this tunnel id",
                code.map(|c| format!(" {c}")).unwrap_or_default()
            ),
        ),
        Ok(MetadataAnswer {
            status: 404, code, ..
        }) => check(
            "control_plane",
            Verdict::Fail,
            format!(
                "{base} does not know this tunnel (404{}): check --control-plane.tunnel-id and \
                 --control-plane.base-url",
                code.map(|c| format!(" {c}")).unwrap_or_default()
            ),
        ),
        Ok(MetadataAnswer { status, code, .. }) => check(
            "control_plane",
            Verdict::Warn,
            format!(
                "{base} answers GET /v1/tunnels/{{id}} with {status}{}: polls may still work; \
                 retry later",
                code.map(|c| format!(" {c}")).unwrap_or_default()
            ),
        ),
        Err(cause) => check(
            "control_plane",
            Verdict::Fail,
            format!(
                "cannot reach the control plane: {cause}: check --control-plane.base-url, the \
                 network, proxies and --ca-bundle"
            ),
        ),
    }
}

fn mcp_http(channel: &str, url: &str) -> Check {
    let id = format!("mcp.{channel}");
    // A query may carry a token: the report names the URL without it.
    let shown = url.split('?').next().unwrap_or(url);
    let options = mcpwire::mcp::ClientOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
        ..mcpwire::mcp::ClientOptions::default()
    };
    let result = mcpwire::mcp::blocking::McpClient::connect_http(url, options)
        .and_then(|client| client.list_tools(None).map(|_| client));
    match result {
        Ok(client) => {
            let era = client.era();
            let version = era
                .as_ref()
                .and_then(|e| e.protocol_version.clone())
                .unwrap_or_else(|| "an unknown version".to_owned());
            let which = match era.map(|e| e.era) {
                Some(mcpwire_core::mcp::era::Era::Legacy) => "legacy",
                _ => "modern",
            };
            check(
                id,
                Verdict::Ok,
                format!("{shown} speaks MCP {version} ({which}) and lists its tools"),
            )
        }
        Err(e) => check(
            id,
            Verdict::Fail,
            format!("no MCP answer: {e}: check --mcp.server-url and that the server runs"),
        ),
    }
}

/// A server the MCP client cannot reach on its own (a Unix socket, a client certificate of
/// its entry's own): the tunnel's start-up probe, sent the way the tunnel sends its forwards.
fn mcp_own_transport(tunnel: &TunnelConfig, channel: &str, url: &str) -> Check {
    let id = format!("mcp.{channel}");
    let shown = url.split('?').next().unwrap_or(url);
    let how = match tunnel.unix_sockets.get(url) {
        Some(path) => format!("over the Unix socket {}", path.display()),
        None => "with its own client certificate".to_owned(),
    };
    match mcpwire::tunnel::blocking::check_mcp_server(tunnel, url) {
        Ok(status) if status < 500 => check(
            id,
            Verdict::Ok,
            format!(
                "{shown} is up {how}: it answers the start-up probe (HTTP {status}); its MCP \
                 era is not checked on this transport"
            ),
        ),
        Ok(status) => check(
            id,
            Verdict::Warn,
            format!("{shown} answers {how} with HTTP {status}: check the server's logs"),
        ),
        Err(e) => check(
            id,
            Verdict::Fail,
            format!(
                "no answer {how}: {e}: check the entry's unix-socket=/client-cert= and that \
                 the server runs"
            ),
        ),
    }
}

fn mcp_stdio(channel: &str, argv: &[String], path: Option<&str>) -> Check {
    let id = format!("mcp.{channel}");
    let Some(program) = argv.first() else {
        return check(id, Verdict::Fail, "the command is empty");
    };
    match find_program(program, path) {
        Some(found) => check(
            id,
            Verdict::Ok,
            format!("stdio command {program:?} found at {found}"),
        ),
        None => check(
            id,
            Verdict::Fail,
            format!(
                "stdio command {program:?} is not found on PATH: install it, or give its full \
                 path in --mcp.command"
            ),
        ),
    }
}

fn cloudflared(config: &RunConfig, path: Option<&str>) -> Check {
    let Some(cf) = &config.tunnel.cloudflared else {
        return check("cloudflared", Verdict::Ok, "not used");
    };
    let Some(found) = find_program(&cf.path, path) else {
        return check(
            "cloudflared",
            Verdict::Fail,
            format!(
                "{:?} is not found: install cloudflared, or set --cloudflared.path",
                cf.path
            ),
        );
    };
    let version = std::process::Command::new(&found)
        .arg("--version")
        .env_clear()
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .filter(|v| !v.is_empty());
    match version {
        Some(v) => check("cloudflared", Verdict::Ok, format!("{found}: {v}")),
        None => check(
            "cloudflared",
            Verdict::Warn,
            format!("{found} did not say its version (--version)"),
        ),
    }
}

fn health_listener(config: &RunConfig) -> Check {
    if let Some(path) = &config.health_unix_socket {
        #[cfg(unix)]
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return check(
                "health_listener",
                Verdict::Fail,
                format!(
                    "unix socket {path} is already accepting connections: stop the client \
                     listening there, or change --health.unix-socket"
                ),
            );
        }
        return check(
            "health_listener",
            Verdict::Ok,
            format!("unix socket {path} (a stale socket there is replaced at start)"),
        );
    }
    let addr = config.health_addr;
    match TcpListener::bind(addr) {
        Ok(l) => {
            drop(l);
            let what = if addr.port() == 0 {
                format!("{addr} can be bound (a free port at each start)")
            } else {
                format!("{addr} can be bound")
            };
            check("health_listener", Verdict::Ok, what)
        }
        Err(e) => check(
            "health_listener",
            Verdict::Fail,
            format!(
                "{addr} cannot be bound ({e}): stop what listens there, or change \
                 --health.listen-addr"
            ),
        ),
    }
}

/// Every check of `args`, in order (the configuration first: when it does not resolve, the
/// rest cannot run).
pub fn checks(
    args: &RunArgs,
    env: &dyn Fn(&str) -> Option<String>,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Vec<Check> {
    let mut out = Vec::new();
    let config = match config::resolve(args, env, read_file) {
        Ok(c) => c,
        Err(e) => {
            out.push(check("config", Verdict::Fail, e.to_string()));
            return out;
        }
    };
    out.push(match &config.config_source {
        Some(s) => check(
            "config",
            Verdict::Ok,
            format!(
                "{} (chosen by {}) and the flags and environment load",
                s.path, s.chosen_by
            ),
        ),
        None => check(
            "config",
            Verdict::Ok,
            "flags and environment load (no config file)",
        ),
    });
    for warning in &config.warnings {
        if !warning.contains("is not in the Go client's form") {
            out.push(check("ignored_setting", Verdict::Warn, warning.clone()));
        }
    }
    let id = &config.tunnel.engine.tunnel_id;
    out.push(if go_compat::is_go_tunnel_id(id) {
        check("tunnel_id", Verdict::Ok, id.clone())
    } else {
        check(
            "tunnel_id",
            Verdict::Warn,
            format!(
                "{id} is not in the Go client's form (tunnel_ and 32 lowercase letters or \
                 digits): check it against the tunnel's page"
            ),
        )
    });
    out.push(check(
        "api_key",
        Verdict::Ok,
        format!(
            "present (from {}); its value is never shown",
            config.api_key_origin
        ),
    ));
    out.push(control_plane(&config.tunnel));
    let path = env("PATH");
    for target in &config.tunnel.targets {
        out.push(match &target.kind {
            TargetKind::Http { url } if config.tunnel.own_transports().contains(url) => {
                mcp_own_transport(&config.tunnel, &target.channel, url)
            }
            TargetKind::Http { url } => mcp_http(&target.channel, url),
            TargetKind::Stdio { argv } => mcp_stdio(&target.channel, argv, path.as_deref()),
        });
    }
    out.push(cloudflared(&config, path.as_deref()));
    out.push(health_listener(&config));
    out
}

/// The report as text: one `CHECK` line each, then `RESULT`.
#[must_use]
pub fn render(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut text = String::new();
    for c in checks {
        text.push_str(&format!(
            "CHECK {:<width$}  {:<4}  {}\n",
            c.id,
            c.verdict.as_str(),
            c.summary
        ));
    }
    let worst = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Ok);
    let named: Vec<&str> = checks
        .iter()
        .filter(|c| c.verdict == worst && worst != Verdict::Ok)
        .map(|c| c.id.as_str())
        .collect();
    match worst {
        Verdict::Ok => text.push_str("RESULT ok\n"),
        _ => text.push_str(&format!(
            "RESULT {}: {}\n",
            worst.as_str(),
            named.join(", ")
        )),
    }
    text
}

/// Runs `mcpwire tunnel doctor`.
pub fn run(args: &DoctorArgs) -> ExitCode {
    let read_file = |p: &str| std::fs::read_to_string(p);
    let checks = checks(&args.run, &|k| std::env::var(k).ok(), &read_file);
    let worst = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Ok);
    if args.json {
        let report = serde_json::json!({
            "checks": checks.iter().map(|c| serde_json::json!({
                "id": c.id, "status": c.verdict.as_str(), "summary": c.summary,
            })).collect::<Vec<_>>(),
            "result": worst.as_str(),
        });
        println!("{report}");
    } else {
        print!("{}", render(&checks));
    }
    match worst {
        Verdict::Ok => ExitCode::SUCCESS,
        Verdict::Warn => ExitCode::from(1),
        Verdict::Fail => ExitCode::from(2),
    }
}
