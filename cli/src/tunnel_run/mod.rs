//! `mcpwire tunnel run`: the tunnel client on the network, a drop-in for the Go tunnel-client.
//!
//! [`config`] resolves flags and environment variables into the library's
//! [`TunnelConfig`](mcpwire::tunnel::TunnelConfig) plus this command's own settings; [`health`]
//! serves `/healthz`, `/readyz` and `/metrics` from the driver's [`Status`]; the driver chosen
//! with `--driver` (the `mcpwire` crate's `tunnel::blocking` or `tunnel::smol`) runs the
//! tunnel, writing redacted one-line logs; [`signals`] stops it on SIGINT/SIGTERM.

pub mod admin_ui;
pub mod config;
pub mod config_file;
pub mod doctor;
pub mod go_compat;
pub mod health;
pub mod init;
pub mod probe;
pub mod signals;

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;

use mcpwire::tunnel::log::{Level, Logger};
use mcpwire::tunnel::Status;

use self::config::{Driver, RunArgs};

/// Runs `mcpwire tunnel run`: exit 0 after a signal and the grace period, 2 for a bad setting,
/// 1 when the client cannot start.
pub fn run(args: &RunArgs) -> ExitCode {
    let read_file = |p: &str| std::fs::read_to_string(p);
    let config = match config::resolve(args, &|k| std::env::var(k).ok(), &read_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return ExitCode::from(2);
        }
    };
    let mut secrets = vec![config.tunnel.engine.api_key.expose().to_owned()];
    secrets.extend(config.secrets.0.iter().cloned());
    let log = match &config.log_file {
        // Standard output, as the Go client logs (start-up errors before the logger exists go to
        // standard error).
        None => Logger::new(
            config.log_level,
            config.log_json,
            secrets,
            Box::new(std::io::stdout()),
        ),
        Some(path) => match open_private_append(path) {
            Ok(file) => Logger::new(config.log_level, config.log_json, secrets, Box::new(file)),
            Err(e) => {
                eprintln!(
                    "mcpwire: invalid --log.file {path:?}: cannot open it for appending: {e}"
                );
                return ExitCode::from(2);
            }
        },
    };
    let log = match &config.admin_ui {
        Some(ui) => log.keeping_recent(ui.log_lines),
        None => log,
    };
    let log = Arc::new(log);
    if let Some(source) = &config.config_source {
        log.log(
            Level::Info,
            "config file",
            &[("path", &source.path), ("chosen_by", &source.chosen_by)],
        );
    }
    for warning in &config.warnings {
        log.log(Level::Warn, warning, &[]);
    }
    let _pid_file = match &config.pid_file {
        None => None,
        Some(path) => match RemoveOnDrop::write(path, &format!("{}\n", std::process::id())) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("mcpwire: invalid --pid.file {path:?}: cannot write it: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let status = Status::new();
    let (addr, url, _socket) = match listen(&config, &status, &log) {
        Ok(bound) => bound,
        Err(message) => {
            eprintln!("mcpwire: {message}");
            return ExitCode::from(2);
        }
    };
    log.log(Level::Info, "health listener", &[("addr", &addr)]);
    let _url_file = match &config.health_url_file {
        None => None,
        Some(path) => match RemoveOnDrop::write(path, &format!("{url}\n")) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("mcpwire: invalid --health.url-file {path:?}: cannot write it: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let tunnel = config.tunnel;
    fetch_metadata(&tunnel, &log);
    let configured = config.log_level;
    let signal_log = Arc::clone(&log);
    let on_start = move |stopper| signals::watch(stopper, signal_log, configured);
    let result = match config.driver {
        Driver::Blocking => {
            mcpwire::tunnel::blocking::run(tunnel, Arc::clone(&log), status, on_start)
        }
        Driver::Smol => mcpwire::tunnel::smol::run(tunnel, Arc::clone(&log), status, on_start),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log.log(
                Level::Error,
                "the tunnel client stopped on an error",
                &[("error", &e)],
            );
            ExitCode::FAILURE
        }
    }
}

/// Starts the health listener: on `--health.unix-socket` when given (as the Go client, the
/// listen address is then ignored), else on `--health.listen-addr`. Its address for the log,
/// its base URL for the URL file, and the socket to remove at exit.
fn listen(
    config: &config::RunConfig,
    status: &Arc<Status>,
    log: &Arc<Logger>,
) -> Result<(String, String, Option<RemoveOnDrop>), String> {
    let served = |addr: &str| {
        let admin = config.admin_ui.as_ref().map(|ui| {
            let fixed = admin_ui::overview::Fixed::of(config, addr, ui.show_harpoon_urls);
            admin_ui::AdminUi::new(
                ui.allow_remote,
                ui.allowed_hosts.clone(),
                Arc::clone(status),
                Arc::clone(log),
                fixed,
            )
        });
        health::Served::new(Arc::clone(status), admin)
    };
    if let Some(path) = &config.health_unix_socket {
        #[cfg(unix)]
        {
            let invalid = |why: String| format!("invalid --health.unix-socket {path:?}: {why}");
            health::prepare_unix_socket(std::path::Path::new(path)).map_err(invalid)?;
            let listener = std::os::unix::net::UnixListener::bind(path)
                .map_err(|e| invalid(format!("cannot listen there: {e}")))?;
            health::serve_unix(listener, served(path))
                .map_err(|e| invalid(format!("cannot serve there: {e}")))?;
            return Ok((
                path.clone(),
                health::unix_url(path),
                Some(RemoveOnDrop(path.clone())),
            ));
        }
        #[cfg(not(unix))]
        return Err(format!(
            "invalid --health.unix-socket {path:?}: Unix sockets need a Unix system"
        ));
    }
    let listener = TcpListener::bind(config.health_addr).map_err(|e| {
        format!(
            "invalid --health.listen-addr {}: cannot listen there: {e}",
            config.health_addr
        )
    })?;
    let addr = listener
        .local_addr()
        .map_or_else(|_| config.health_addr.to_string(), |a| a.to_string());
    health::serve(listener, served(&addr)).map_err(|e| {
        format!(
            "invalid --health.listen-addr {}: cannot serve there: {e}",
            config.health_addr
        )
    })?;
    if config.admin_ui.is_some() {
        log.log(
            Level::Info,
            "admin UI",
            &[("url", &format!("http://{addr}/"))],
        );
    }
    Ok((addr.clone(), format!("http://{addr}"), None))
}

/// The Go client's start-up metadata fetch (`GET /v1/tunnels/{id}`), beside the first polls
/// and never blocking them: its line says which tunnel the key reaches (name and description),
/// or why the fetch failed (a warning: polling goes on, and `/readyz` does not depend on it).
fn fetch_metadata(tunnel: &mcpwire::tunnel::TunnelConfig, log: &Arc<Logger>) {
    let (tunnel, thread_log) = (tunnel.clone(), Arc::clone(log));
    let spawned = std::thread::Builder::new()
        .name("tunnel-metadata".to_owned())
        .spawn(move || {
            let id = tunnel.engine.tunnel_id.as_str();
            match mcpwire::tunnel::blocking::check_control_plane(&tunnel) {
                Ok(a) if (200..300).contains(&a.status) => {
                    let name = a.name.unwrap_or_else(|| "-".to_owned());
                    let description = a.description.unwrap_or_else(|| "-".to_owned());
                    thread_log.log(
                        Level::Info,
                        "tunnel metadata fetched",
                        &[
                            ("tunnel_id", &id),
                            ("name", &name),
                            ("description", &description),
                        ],
                    );
                }
                Ok(a) => {
                    let code = a.code.unwrap_or_else(|| "-".to_owned());
                    thread_log.log(
                        Level::Warn,
                        "tunnel metadata fetch failed",
                        &[("status_code", &a.status), ("error_code", &code)],
                    );
                }
                Err(e) => thread_log.log(
                    Level::Warn,
                    "tunnel metadata fetch failed",
                    &[("error", &e)],
                ),
            }
        });
    if let Err(e) = spawned {
        log.log(
            Level::Warn,
            "tunnel metadata fetch not started",
            &[("error", &e)],
        );
    }
}

/// Opens `path` for appending, created readable by its owner only.
fn open_private_append(path: &str) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// A file this process wrote (its pid, the health URL), removed when the command returns.
struct RemoveOnDrop(String);

impl RemoveOnDrop {
    /// Writes `text` to `path` whole: to a temporary file beside it, then renamed over it, so
    /// that a reader never sees half of it.
    fn write(path: &str, text: &str) -> std::io::Result<Self> {
        let tmp = format!("{path}.{}.tmp", std::process::id());
        std::fs::write(&tmp, text)?;
        if let Err(e) = std::fs::rename(&tmp, path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(Self(path.to_owned()))
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
