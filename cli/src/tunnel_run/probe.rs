//! `mcpwire tunnel health`: a probe of a running tunnel client's health listener for container
//! health checks and scripts, as the Go client's `health` command: `/healthz`, `/readyz`, and
//! with `--require-control-plane-poll` one successful poll (`/metrics`'
//! `commands_poll_last_successful_timestamp_seconds`), optionally the process behind a pid.
//! Exit 0 when all pass, 2 when one fails or the listener cannot be located.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

/// The flags of `mcpwire tunnel health`.
#[derive(Args, Debug, Clone, Default)]
pub struct HealthArgs {
    /// The health listener's base URL (or its /healthz or /readyz URL)
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// A file holding the base URL (what `tunnel run --health.url-file` writes)
    #[arg(long = "url-file", value_name = "PATH")]
    pub url_file: Option<String>,
    /// The health listener's port on 127.0.0.1
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Require at least one successful control-plane poll
    #[arg(long = "require-control-plane-poll")]
    pub require_control_plane_poll: bool,
    /// Check that this process is running too
    #[arg(long, value_name = "PID", conflicts_with = "pid_file")]
    pub pid: Option<u32>,
    /// Check that the process in this file (what `tunnel run --pid.file` writes) is running
    #[arg(long = "pid-file", value_name = "PATH")]
    pub pid_file: Option<String>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// One check: its name, whether it passed, and what it saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// e.g. `Healthz`.
    pub name: &'static str,
    /// Passed.
    pub ok: bool,
    /// What was seen (a status, a value, an error).
    pub detail: String,
}

/// Where the listener is: its base URL, or why it cannot be found.
pub fn base_url(
    args: &HealthArgs,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<String, String> {
    let given = [
        args.url.is_some(),
        args.url_file.is_some(),
        args.port.is_some(),
    ]
    .iter()
    .filter(|g| **g)
    .count();
    if given != 1 {
        return Err("choose exactly one of --url, --url-file or --port".to_owned());
    }
    let raw = if let Some(url) = &args.url {
        url.clone()
    } else if let Some(path) = &args.url_file {
        read_file(path).map_err(|e| format!("cannot read {path}: {e}"))?
    } else {
        format!("http://127.0.0.1:{}", args.port.unwrap_or(0))
    };
    let mut base = raw.trim().trim_end_matches('/').to_owned();
    for suffix in ["/healthz", "/readyz", "/metrics"] {
        if let Some(b) = base.strip_suffix(suffix) {
            base = b.to_owned();
        }
    }
    if base.starts_with("http+unix://") {
        unix_socket_of(&base)?;
        return Ok(base);
    }
    if !(base.starts_with("http://") || base.starts_with("https://"))
        || base.len() <= "http://".len()
    {
        return Err(format!(
            "{base:?} is not an http:// (or http+unix://) URL of a health listener"
        ));
    }
    Ok(base)
}

/// The value of the first sample of `name` in Prometheus text.
#[must_use]
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

/// The socket path and request path of an `http+unix://<base64url path>/...` URL.
fn unix_socket_of(url: &str) -> Result<(String, String), String> {
    use base64::Engine as _;
    let rest = url.strip_prefix("http+unix://").unwrap_or(url);
    let (encoded, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|_| format!("{url:?} does not name a socket (base64url after http+unix://)"))?;
    let socket = String::from_utf8(bytes)
        .map_err(|_| format!("{url:?} does not name a socket path in UTF-8"))?;
    Ok((
        socket,
        if path.is_empty() {
            "/".to_owned()
        } else {
            path.to_owned()
        },
    ))
}

/// `GET path` over the Unix socket, as HTTP/1.0 (so that no server answers in chunks; the
/// answer ends when the connection closes).
#[cfg(unix)]
fn get_unix(socket: &str, path: &str) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let mut conn = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("cannot connect to {socket}: {e}"))?;
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    conn.take(4 * 1024 * 1024)
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| "the answer is not HTTP".to_owned())?;
    Ok((status, body.to_owned()))
}

fn get(agent: &ureq::Agent, url: &str) -> Result<(u16, String), String> {
    if url.starts_with("http+unix://") {
        let (socket, path) = unix_socket_of(url)?;
        #[cfg(unix)]
        return get_unix(&socket, &path);
        #[cfg(not(unix))]
        return Err(format!("{socket}{path}: Unix sockets need a Unix system"));
    }
    let mut response = agent.get(url).call().map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(4 * 1024 * 1024)
        .read_to_string()
        .unwrap_or_default();
    Ok((status, body))
}

/// Whether `pid` names a running process (Linux: its `/proc` entry).
fn running(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Runs the checks against `base`.
pub fn checks(
    base: &str,
    args: &HealthArgs,
    read_file: &dyn Fn(&str) -> std::io::Result<String>,
) -> Vec<Check> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(2)))
        .proxy(None)
        .build()
        .into();
    let mut out = Vec::new();
    for (name, path) in [("Healthz", "/healthz"), ("Readyz", "/readyz")] {
        let url = format!("{base}{path}");
        out.push(match get(&agent, &url) {
            Ok((200, _)) => Check {
                name,
                ok: true,
                detail: format!("200 {url}"),
            },
            Ok((status, body)) => Check {
                name,
                ok: false,
                detail: format!("{status} {url} {}", body.trim()),
            },
            Err(e) => Check {
                name,
                ok: false,
                detail: format!("{url}: {e}"),
            },
        });
    }
    if args.require_control_plane_poll {
        let url = format!("{base}/metrics");
        let gauge = "commands_poll_last_successful_timestamp_seconds";
        out.push(match get(&agent, &url) {
            Ok((200, text)) => match metric_value(&text, gauge) {
                Some(v) if v > 0.0 => Check {
                    name: "Control-plane poll",
                    ok: true,
                    detail: format!("last_success_unix_seconds={v:.0}"),
                },
                Some(_) => Check {
                    name: "Control-plane poll",
                    ok: false,
                    detail: "no successful control-plane poll yet".to_owned(),
                },
                None => Check {
                    name: "Control-plane poll",
                    ok: false,
                    detail: format!("{url} has no {gauge}"),
                },
            },
            Ok((status, _)) => Check {
                name: "Control-plane poll",
                ok: false,
                detail: format!("{status} {url}"),
            },
            Err(e) => Check {
                name: "Control-plane poll",
                ok: false,
                detail: format!("{url}: {e}"),
            },
        });
    }
    let pid = match (&args.pid, &args.pid_file) {
        (Some(pid), _) => Some(Ok(*pid)),
        (None, Some(path)) => Some(
            read_file(path)
                .map_err(|e| format!("cannot read {path}: {e}"))
                .and_then(|t| {
                    t.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("{path} does not hold a process id"))
                }),
        ),
        (None, None) => None,
    };
    match pid {
        None => {}
        Some(Ok(pid)) => out.push(Check {
            name: "Process",
            ok: running(pid),
            detail: if running(pid) {
                format!("pid={pid} running")
            } else {
                format!("pid={pid} not running")
            },
        }),
        Some(Err(e)) => out.push(Check {
            name: "Process",
            ok: false,
            detail: e,
        }),
    }
    out
}

/// Runs `mcpwire tunnel health`: 0 when every check passes, else 2.
pub fn run(args: &HealthArgs) -> ExitCode {
    let read_file = |p: &str| std::fs::read_to_string(p);
    let base = match base_url(args, &read_file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return ExitCode::from(2);
        }
    };
    let checks = checks(&base, args, &read_file);
    let ok = checks.iter().all(|c| c.ok);
    if args.json {
        let report = serde_json::json!({
            "base_url": base,
            "checks": checks.iter().map(|c| serde_json::json!({
                "name": c.name, "ok": c.ok, "detail": c.detail,
            })).collect::<Vec<_>>(),
            "result": if ok { "ok" } else { "fail" },
        });
        println!("{report}");
    } else {
        println!("Base URL: {base}");
        for c in &checks {
            let verdict = if c.ok { "PASS" } else { "FAIL" };
            println!("{}: {verdict} | {}", c.name, c.detail);
        }
        println!("Result: {}", if ok { "OK" } else { "FAIL" });
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_base_url_comes_from_one_locator() {
        let none = |_: &str| Err(std::io::Error::other("no"));
        let args = |url: Option<&str>, file: Option<&str>, port: Option<u16>| HealthArgs {
            url: url.map(str::to_owned),
            url_file: file.map(str::to_owned),
            port,
            ..HealthArgs::default()
        };
        assert_eq!(
            base_url(&args(Some("http://127.0.0.1:9/readyz"), None, None), &none).unwrap(),
            "http://127.0.0.1:9"
        );
        assert_eq!(
            base_url(&args(None, None, Some(8080)), &none).unwrap(),
            "http://127.0.0.1:8080"
        );
        let file = |_: &str| Ok("http://127.0.0.1:7\n".to_owned());
        assert_eq!(
            base_url(&args(None, Some("/u"), None), &file).unwrap(),
            "http://127.0.0.1:7"
        );
        assert!(base_url(&args(None, None, None), &none).is_err());
        assert!(base_url(&args(Some("x"), None, Some(1)), &none).is_err());
        assert!(base_url(&args(None, Some("/u"), None), &none)
            .unwrap_err()
            .starts_with("cannot read /u"));
    }

    #[test]
    fn metric_values_are_read_by_exact_name() {
        let text = "# HELP a x\n# TYPE a gauge\nab 3\na 1.5\na{l=\"v\"} 2\n";
        assert_eq!(metric_value(text, "a"), Some(1.5));
        assert_eq!(metric_value(text, "ab"), Some(3.0));
        assert_eq!(metric_value(text, "c"), None);
    }
}
