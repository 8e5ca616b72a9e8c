//! The start-up probe of the main MCP server (`--mcp.startup-wait-timeout`), run by both drivers
//! before the first poll: the policy is the core's [`StartupProbe`]; here are what both drivers
//! share (which server, the log lines, what `/readyz` says meanwhile), and each driver's own way
//! to send an attempt and classify its failure.

use mcpwire_core::tunnel::startup_probe::{ProbeOutcome, StartupProbe};
use mcpwire_core::tunnel::{wire, TargetKind};

use super::config::TunnelConfig;
use super::log::{Level, Logger};
use super::status::{Metrics, Status};

/// The probe to run, when the configuration asks for a start-up wait and the main channel is a
/// Streamable HTTP server (a stdio server is started by the tunnel itself: nothing to wait for).
pub(crate) fn begin(
    config: &TunnelConfig,
    log: &Logger,
    status: &Status,
    now: std::time::Instant,
) -> Option<StartupProbe> {
    let wait = config.startup_wait?;
    let main = config
        .targets
        .iter()
        .find(|t| t.channel == wire::DEFAULT_CHANNEL);
    let url = match main.map(|t| &t.kind) {
        Some(TargetKind::Http { url }) => url,
        Some(TargetKind::Stdio { .. }) => {
            log.log(
                Level::Info,
                "mcp startup probe skipped: the main channel is a stdio server",
                &[],
            );
            return None;
        }
        None => {
            log.log(
                Level::Info,
                "mcp startup probe skipped: the main channel is not configured",
                &[],
            );
            return None;
        }
    };
    let probe = StartupProbe::new(url, &config.discovery_headers(), wait, now);
    let shown = probe.shown_url().to_owned();
    let wait_ms = wait.as_millis();
    log.log(
        Level::Info,
        "waiting for the MCP server before the first control-plane poll",
        &[("target", &shown), ("timeout_ms", &wait_ms)],
    );
    publish(status, &probe);
    Some(probe)
}

/// What `/readyz` says while the probe runs.
pub(crate) fn publish(status: &Status, probe: &StartupProbe) {
    status.publish(Metrics {
        not_ready: probe.not_ready_reason(),
        ..Metrics::default()
    });
}

/// Logs a retry after a failed attempt.
pub(crate) fn retrying(log: &Logger, probe: &StartupProbe) {
    if let (false, Some(cause)) = (probe.is_done(), probe.last_cause()) {
        let attempt = probe.attempts();
        log.log(
            Level::Warn,
            "retrying MCP startup probe",
            &[("attempt", &attempt), ("error", &cause)],
        );
    }
}

/// Logs how the probe ended; the reason `/readyz` keeps giving when it failed.
pub(crate) fn end(log: &Logger, probe: &StartupProbe) -> Option<String> {
    match probe.outcome() {
        Some(ProbeOutcome::Ready { status, attempts }) => {
            log.log(
                Level::Info,
                "mcp startup probe done: the server answers",
                &[("status", status), ("attempts", attempts)],
            );
            None
        }
        Some(ProbeOutcome::Failed { reason, attempts }) => {
            log.log(
                Level::Error,
                "mcp startup probe failed; starting the control-plane poller anyway (/readyz stays 503)",
                &[("error", reason), ("attempts", attempts)],
            );
            Some(reason.clone())
        }
        None => None,
    }
}
