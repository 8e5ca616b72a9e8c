//! What both drivers say about commands: one log line per finished command, the engine's
//! events as log lines, and the counters behind `/metrics`. No I/O beyond the logger.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use mcpwire_core::http::ResponseHead;
use mcpwire_core::tunnel::engine::{Event, PostAnswer, Stage};
use mcpwire_core::tunnel::harpoon::server::{CallResult, ResetReason};
use mcpwire_core::tunnel::harpoon::HarpoonEvent;
use mcpwire_core::tunnel::wire::RespType;
use mcpwire_core::tunnel::{self, CommandId, Forwarded, TunnelFailure};

use super::activity::{unix_ms_now, Activity, CommandRecord, HarpoonCallRecord};
use super::log::{Level, Logger};
use super::status::{HarpoonKey, Metrics};

/// What the log line of a command's outcome says about it.
struct CmdInfo {
    cmd: CommandId,
    channel: String,
    method: String,
    started: Instant,
    failure: Option<TunnelFailure>,
    post_retries: u32,
    /// How long the forward took, once its response ended (HTTP forwards).
    forward: Option<std::time::Duration>,
}

/// The driver-independent bookkeeping of a running tunnel: counters and per-command context.
/// The start-up line saying what TLS trusts (and a warning when the system's store is empty).
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) fn trust(log: &Logger, roots: &crate::net::tls::Roots) {
    let source = if roots.bundled { "bundled" } else { "system" };
    log.log(
        Level::Info,
        "tls trust",
        &[
            ("roots", &source),
            ("system", &roots.system),
            ("ca_bundle", &roots.extra),
        ],
    );
    if let Some(problem) = &roots.system_problem {
        let instead = if roots.bundled {
            "the bundled Mozilla roots are trusted instead"
        } else {
            "only --ca-bundle is trusted"
        };
        log.log(
            Level::Warn,
            "the system's trust store gave no certificate",
            &[("problem", problem), ("then", &instead)],
        );
    }
}

pub struct Report {
    log: Arc<Logger>,
    /// The counters and gauges published to the health listener.
    pub metrics: Metrics,
    info: BTreeMap<String, CmdInfo>,
    /// The request id of each command with a forward, for what comes by [`CommandId`].
    ids: BTreeMap<CommandId, String>,
    post_failed: BTreeSet<CommandId>,
    /// Where finished commands and Harpoon calls go for an operator's page.
    pub activity: Arc<Activity>,
    /// Why the last poll got no answer (the driver's words, and whether it timed out), until
    /// its event is logged.
    poll_cause: Option<(String, bool)>,
}

impl Report {
    /// Fresh counters writing to `log`.
    pub fn new(log: Arc<Logger>) -> Self {
        Report {
            log,
            metrics: Metrics::default(),
            info: BTreeMap::new(),
            ids: BTreeMap::new(),
            post_failed: BTreeSet::new(),
            activity: Arc::default(),
            poll_cause: None,
        }
    }

    /// Logs a tunnel event and counts it: the engine's, a forward's start or local refusal, a
    /// stdio child's restart, exit or dropped frame.
    pub fn tunnel_event(&mut self, e: tunnel::Event) {
        match e {
            tunnel::Event::Engine(e) => self.event(e),
            tunnel::Event::ForwardStarted {
                cmd,
                request_id,
                channel,
                what,
            } => self.forward_started(cmd, request_id, channel, what),
            tunnel::Event::ForwardRefused {
                request_id,
                failure,
            } => self.note_failure(&request_id, failure),
            tunnel::Event::StdioRestarting { channel } => self.log.log(
                Level::Warn,
                "restarting stdio server (initialize deadline passed)",
                &[("channel", &channel)],
            ),
            tunnel::Event::StdioExited { channel } => self.log.log(
                Level::Warn,
                "stdio server exited; its commands fail with transport_closed and it restarts",
                &[("channel", &channel)],
            ),
            tunnel::Event::StdioDiscarded { channel, reason } => self.log.log(
                Level::Debug,
                "stdio frame discarded",
                &[("channel", &channel), ("reason", &format!("{reason:?}"))],
            ),
            tunnel::Event::Harpoon(e) => self.harpoon(e),
            other => self.log.log(
                Level::Debug,
                "tunnel event",
                &[("event", &format!("{other:?}"))],
            ),
        }
    }

    /// Logs and counts what Harpoon reports: by label, status, outcome, sizes and header
    /// classes, never a URL, a header value or a body.
    fn harpoon(&mut self, e: HarpoonEvent) {
        match e {
            HarpoonEvent::Call(call) => {
                let latency_ms = call.latency.as_secs_f64() * 1000.0;
                let key = HarpoonKey {
                    label: call.label.clone(),
                    status_class: call.status_class(),
                    outcome: call.result.as_str(),
                };
                self.metrics
                    .harpoon_calls
                    .entry(key)
                    .or_default()
                    .observe(latency_ms, call.response_bytes);
                let level = match call.result {
                    CallResult::Answered => Level::Info,
                    _ => Level::Warn,
                };
                self.activity.harpoon_calls.push(HarpoonCallRecord {
                    at_unix_ms: unix_ms_now(),
                    label: call.label.clone(),
                    status: call.status,
                    outcome: call.result.as_str(),
                    duration_ms: u64::try_from(call.latency.as_millis()).unwrap_or(u64::MAX),
                    response_bytes: call.response_bytes,
                });
                let status = call
                    .status
                    .map_or_else(|| "-".to_owned(), |s| s.to_string());
                self.log.log(
                    level,
                    "harpoon call",
                    &[
                        ("label", &call.label),
                        ("status", &status),
                        ("outcome", &call.result.as_str()),
                        ("duration_ms", &call.latency.as_millis()),
                        ("response_bytes", &call.response_bytes),
                        ("redirects", &call.redirects),
                    ],
                );
            }
            HarpoonEvent::HeadersDropped { label, classes } => {
                let classes: Vec<&str> = classes.iter().map(|c| c.as_str()).collect();
                self.log.log(
                    Level::Info,
                    "harpoon dropped request headers",
                    &[("label", &label), ("classes", &classes.join(","))],
                );
            }
            HarpoonEvent::ConnectionReset { reason } => {
                let reason = match reason {
                    ResetReason::MaxAge => "max_age",
                    ResetReason::Deadline => "deadline",
                };
                self.log.log(
                    Level::Debug,
                    "harpoon connection reset",
                    &[("reason", &reason)],
                );
            }
            other => self.log.log(
                Level::Debug,
                "harpoon event",
                &[("event", &format!("{other:?}"))],
            ),
        }
    }

    /// A forward starts: remember its channel, method and start for its outcome line.
    fn forward_started(
        &mut self,
        cmd: CommandId,
        request_id: String,
        channel: String,
        what: Forwarded,
    ) {
        let method = match what {
            Forwarded::JsonRpc { method } => method.unwrap_or_else(|| "-".into()),
            Forwarded::SessionTermination => "session_termination".into(),
        };
        self.ids.insert(cmd, request_id.clone());
        self.info.insert(
            request_id,
            CmdInfo {
                cmd,
                channel,
                method,
                started: Instant::now(),
                failure: None,
                post_retries: 0,
                forward: None,
            },
        );
    }

    /// A forward's response ended: its own duration, for the tunnel's added latency.
    pub fn forward_ended(&mut self, cmd: CommandId) {
        if let Some(info) = self.ids.get(&cmd).and_then(|id| self.info.get_mut(id)) {
            info.forward = Some(info.started.elapsed());
        }
    }

    /// A forward failed (the tunnel answers the command with `failure`): kept for its
    /// outcome.
    pub fn forward_failed(&mut self, cmd: CommandId, failure: &TunnelFailure) {
        if let Some(id) = self.ids.get(&cmd).cloned() {
            self.note_failure(&id, *failure);
        }
    }

    /// A response POST starts; counts it as a retry when the command's last attempt failed.
    pub fn post_started(&mut self, cmd: CommandId) {
        if self.post_failed.remove(&cmd) {
            self.metrics.delivery_retries += 1;
            if let Some(info) = self.ids.get(&cmd).and_then(|id| self.info.get_mut(id)) {
                info.post_retries += 1;
            }
        }
    }

    /// A response POST ended with `result` (the answer's head, or a transport failure); the
    /// attempt failed unless the core classifies its answer otherwise ([`PostAnswer::of`]).
    pub fn post_ended(&mut self, cmd: CommandId, result: &Result<ResponseHead, (bool, String)>) {
        let failed = result
            .as_ref()
            .map_or(true, |h| PostAnswer::of(h.status) == PostAnswer::Failed);
        if failed {
            self.post_failed.insert(cmd);
        }
        if let Err((_, cause)) = result {
            self.log
                .log(Level::Warn, "response post failed", &[("cause", cause)]);
        }
    }

    /// Why the poll that just failed got no answer (and whether it ran out of time), for its
    /// `poll failed` line and the error's kind.
    pub fn poll_cause(&mut self, cause: String, timed_out: bool) {
        self.poll_cause = Some((cause, timed_out));
    }

    /// Remembers why a command failed, for its outcome line.
    fn note_failure(&mut self, request_id: &str, failure: TunnelFailure) {
        if let Some(info) = self.info.get_mut(request_id) {
            info.failure = Some(failure);
        }
    }

    fn outcome(
        &mut self,
        request_id: &str,
        outcome: &'static str,
        resp_code: Option<u16>,
        level: Level,
        detail: &[(&str, &dyn std::fmt::Display)],
    ) {
        self.metrics.count(outcome);
        let info = self.info.remove(request_id);
        if let Some(i) = &info {
            self.ids.remove(&i.cmd);
            self.post_failed.remove(&i.cmd);
        }
        let (channel, method, ms) = match &info {
            Some(i) => (
                i.channel.as_str(),
                i.method.as_str(),
                i.started.elapsed().as_millis(),
            ),
            None => ("-", "-", 0),
        };
        let failure_of = info.as_ref().and_then(|i| i.failure.as_ref());
        let failure = failure_of.map_or("-", |f| f.source().as_str());
        self.activity.commands.push(CommandRecord {
            at_unix_ms: unix_ms_now(),
            request_id: request_id.to_owned(),
            channel: channel.to_owned(),
            method: method.to_owned(),
            outcome,
            resp_code,
            failure_source: failure_of.map(|f| f.source().as_str()),
            failure_kind: failure_of
                .and_then(TunnelFailure::transport_error_kind)
                .map(|k| k.as_str()),
            duration_ms: u64::try_from(ms).unwrap_or(u64::MAX),
            post_retries: info.as_ref().map_or(0, |i| i.post_retries),
        });
        let mut fields: Vec<(&str, &dyn std::fmt::Display)> = vec![
            ("request_id", &request_id),
            ("channel", &channel),
            ("method", &method),
            ("duration_ms", &ms),
            ("outcome", &outcome),
        ];
        fields.extend_from_slice(detail);
        if failure != "-" {
            fields.push(("failure", &failure));
        }
        self.log.log(level, "command", &fields);
    }

    /// Logs an engine event and counts it.
    fn event(&mut self, e: Event) {
        match e {
            Event::Polled { commands } => {
                self.metrics.polled_now();
                self.metrics.poll_backoff_ms = None;
                self.metrics.commands_polled += commands as u64;
                self.log
                    .log(Level::Debug, "polled", &[("commands", &commands)]);
            }
            Event::PollFailed {
                status,
                code,
                retry_in,
            } => {
                self.metrics.poll_errors += 1;
                let cause = self.poll_cause.take();
                let kind = match (&status, &cause) {
                    (None, Some((_, true))) => "timeout",
                    _ => "other",
                };
                *self.metrics.poll_errors_by_kind.entry(kind).or_default() += 1;
                let cause = cause.map(|(c, _)| c);
                let status = status.map_or_else(|| "transport".to_owned(), |s| s.to_string());
                let code = code.unwrap_or_else(|| "-".into());
                let retry = retry_in.as_millis();
                self.metrics.poll_backoff_ms = Some(u64::try_from(retry).unwrap_or(u64::MAX));
                let mut fields: Vec<(&str, &dyn std::fmt::Display)> =
                    vec![("status", &status), ("code", &code)];
                if let Some(c) = &cause {
                    fields.push(("cause", c));
                }
                fields.push(("retry_in_ms", &retry));
                self.log.log(Level::Warn, "poll failed", &fields);
            }
            Event::OperatorActionRequired { status, code } => {
                let code = code.unwrap_or_else(|| "-".into());
                self.log.log(
                    Level::Error,
                    "the control plane refuses this client: check the API key and tunnel id",
                    &[("status", &status), ("code", &code)],
                );
            }
            Event::UnknownCommandType {
                request_id,
                command_type,
            } => {
                self.metrics.commands_invalid += 1;
                self.outcome(
                    &request_id,
                    "skipped",
                    None,
                    Level::Warn,
                    &[("command_type", &command_type)],
                );
            }
            Event::MalformedCommand { request_id, reason } => {
                self.metrics.commands_invalid += 1;
                let rid = request_id.unwrap_or_else(|| "-".into());
                self.log.log(
                    Level::Warn,
                    "malformed command",
                    &[("request_id", &rid), ("reason", &reason)],
                );
            }
            Event::Expired { request_id, stage } => {
                let stage = match stage {
                    Stage::BeforeForward => "before_forward",
                    Stage::DuringForward => "during_forward",
                    Stage::DuringDelivery => "during_delivery",
                };
                self.outcome(
                    &request_id,
                    "expired",
                    None,
                    Level::Info,
                    &[("stage", &stage)],
                );
            }
            Event::Completed {
                request_id,
                resp_type,
                resp_code,
                since_receipt,
                since_created,
            } => {
                if let Some(info) = self.info.get(&request_id) {
                    let kind = match resp_type {
                        RespType::NotifyAck => "notification",
                        RespType::SessionTerminationResponse => "session_termination",
                        _ => "call",
                    };
                    let method = if kind == "call" || kind == "notification" {
                        info.method.as_str()
                    } else {
                        ""
                    };
                    let channel = info.channel.clone();
                    let method = method.to_owned();
                    if let Some(forward) = info.forward {
                        self.metrics
                            .added_latency(since_receipt.saturating_sub(forward));
                    }
                    self.metrics.command_latency(
                        kind,
                        &method,
                        &channel,
                        resp_code,
                        "poll_to_response",
                        since_receipt,
                    );
                    if let Some(since_created) = since_created {
                        self.metrics.command_latency(
                            kind,
                            &method,
                            &channel,
                            resp_code,
                            "enqueue_to_response",
                            since_created,
                        );
                    }
                }
                let outcome = if resp_code < 400 {
                    "completed"
                } else {
                    "failed"
                };
                let rt = resp_type.as_str();
                self.outcome(
                    &request_id,
                    outcome,
                    Some(resp_code),
                    Level::Info,
                    &[("resp_type", &rt), ("resp_code", &resp_code)],
                );
            }
            Event::AlreadyFulfilled { request_id } => {
                self.outcome(&request_id, "already_fulfilled", None, Level::Info, &[]);
            }
            Event::DeliveryFailed { request_id, status } => {
                let status = status.map_or_else(|| "transport".to_owned(), |s| s.to_string());
                self.outcome(
                    &request_id,
                    "delivery_failed",
                    None,
                    Level::Warn,
                    &[("status", &status)],
                );
            }
            Event::CommandAge { age, .. } => self.metrics.command_age(age),
            Event::UnsupportedChannel {
                request_id,
                channel,
                command_type,
            } => {
                self.metrics.unsupported_channel(&channel, command_type);
                self.log.log(
                    Level::Warn,
                    "command for a channel this client does not serve: answered with a failure",
                    &[
                        ("request_id", &request_id),
                        ("channel", &channel),
                        ("command_type", &command_type),
                    ],
                );
            }
            Event::ConnectionTtlReached { request_id } => {
                self.log.log(
                    Level::Info,
                    "MCP connection TTL reached; stopping response forwarding (a timeout failure is posted)",
                    &[("request_id", &request_id)],
                );
            }
            Event::NotificationDropped { request_id, status } => {
                let status = status.map_or_else(|| "transport".to_owned(), |s| s.to_string());
                self.log.log(
                    Level::Warn,
                    "notification not delivered",
                    &[("request_id", &request_id), ("status", &status)],
                );
            }
            Event::ToolRejected {
                request_id,
                channel,
                tool,
                reason,
            } => {
                self.log.log(
                    Level::Warn,
                    "tool has invalid x-mcp-header annotations; its calls carry no Mcp-Param headers",
                    &[
                        ("request_id", &request_id),
                        ("channel", &channel),
                        ("tool", &tool),
                        ("reason", &reason),
                    ],
                );
            }
            other => {
                self.log.log(
                    Level::Debug,
                    "engine event",
                    &[("event", &format!("{other:?}"))],
                );
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tunnel::log::tests::Sink;
    use mcpwire_core::http::Headers;
    use mcpwire_core::tunnel::failure::FailureSource;
    use mcpwire_core::tunnel::DiscardReason;

    fn answered(status: u16) -> Result<ResponseHead, (bool, String)> {
        Ok(ResponseHead {
            status,
            headers: Headers::new(),
        })
    }

    /// The next POST of a command counts as a delivery retry only after an attempt the core
    /// calls failed ([`PostAnswer::Failed`], or no answer at all): not after a `2xx` or a `404`.
    #[test]
    fn unsupported_channels_are_counted_with_the_go_clients_labels_and_bounded() {
        let log = Logger::new(Level::Debug, false, Vec::new(), Box::new(Sink::default()));
        let mut r = Report::new(Arc::new(log));
        r.metrics.tunnel_id = "tunnel_x".to_owned();
        let unsupported = |channel: String| {
            tunnel::Event::Engine(Event::UnsupportedChannel {
                request_id: "r".to_owned(),
                channel,
                command_type: "jsonrpc",
            })
        };
        r.tunnel_event(unsupported("nowhere".to_owned()));
        r.tunnel_event(unsupported("nowhere".to_owned()));
        let text = r.metrics.prometheus();
        assert!(
            text.contains(
                "command_unsupported_channel_total{tunnel_id=\"tunnel_x\",channel=\"nowhere\",command_type=\"jsonrpc\"} 2\n"
            ),
            "{text}"
        );
        // The control plane names the channels: past the bound they fold into one series.
        for i in 0..100 {
            r.tunnel_event(unsupported(format!("c{i}")));
        }
        let channels: std::collections::BTreeSet<&str> = r
            .metrics
            .unsupported_channels
            .keys()
            .map(|(c, _)| c.as_str())
            .collect();
        assert_eq!(
            channels.len(),
            crate::tunnel::status::MAX_CHANNEL_SERIES + 1
        );
        assert!(channels.contains("__other__"));
    }

    #[test]
    fn poll_errors_are_counted_by_the_go_clients_error_kind() {
        let log = Logger::new(Level::Debug, false, Vec::new(), Box::new(Sink::default()));
        let mut r = Report::new(Arc::new(log));
        let failed = |status| {
            tunnel::Event::Engine(Event::PollFailed {
                status,
                code: None,
                retry_in: std::time::Duration::from_secs(1),
            })
        };
        r.poll_cause("timed out (cp.example:443)".to_owned(), true);
        r.tunnel_event(failed(None));
        r.poll_cause("connection refused (cp.example:443)".to_owned(), false);
        r.tunnel_event(failed(None));
        r.tunnel_event(failed(Some(503)));
        assert_eq!(r.metrics.poll_errors_by_kind.get("timeout"), Some(&1));
        assert_eq!(r.metrics.poll_errors_by_kind.get("other"), Some(&2));
        let text = r.metrics.prometheus();
        assert!(
            text.contains("commands_poll_errors_total{error_kind=\"timeout\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("commands_poll_errors_total{error_kind=\"other\"} 2\n"),
            "{text}"
        );
    }

    /// Every finished command reaches the activity feed as its log line says it: the forward's
    /// failure (source and kind), its response POST retries and its code; an HTTP forward's
    /// own time is taken out of the added latency.
    #[test]
    fn finished_commands_reach_the_activity_feed_with_their_failure_and_retries() {
        use mcpwire_core::tunnel::failure::{transport_failure, TransportStage};
        let log = Logger::new(Level::Error, false, Vec::new(), Box::new(std::io::sink()));
        let mut r = Report::new(Arc::new(log));
        let started = |r: &mut Report, cmd: u64, id: &str| {
            r.tunnel_event(tunnel::Event::ForwardStarted {
                cmd: CommandId(cmd),
                request_id: id.into(),
                channel: "main".into(),
                what: Forwarded::JsonRpc {
                    method: Some("tools/call".into()),
                },
            });
        };
        let completed = |id: &str, code: u16, ms: u64| {
            tunnel::Event::Engine(Event::Completed {
                request_id: id.into(),
                resp_type: RespType::JsonrpcResponse,
                resp_code: code,
                since_receipt: std::time::Duration::from_millis(ms),
                since_created: None,
            })
        };
        started(&mut r, 1, "ok");
        r.forward_ended(CommandId(1));
        r.post_started(CommandId(1));
        r.post_ended(CommandId(1), &answered(503));
        r.post_started(CommandId(1));
        r.post_ended(CommandId(1), &answered(200));
        r.tunnel_event(completed("ok", 200, 40));
        started(&mut r, 2, "refused");
        let failure = transport_failure(
            TransportStage::Connect,
            Some(std::io::ErrorKind::ConnectionRefused),
        );
        r.forward_failed(CommandId(2), &failure);
        r.tunnel_event(completed("refused", 502, 5));
        let got = r.activity.commands.after(0);
        let view: Vec<_> = got
            .items
            .iter()
            .map(|(_, c)| {
                (
                    c.request_id.as_str(),
                    c.outcome,
                    c.resp_code,
                    c.failure_source,
                    c.failure_kind,
                    c.post_retries,
                )
            })
            .collect();
        assert_eq!(
            view,
            [
                ("ok", "completed", Some(200), None, None, 1),
                (
                    "refused",
                    "failed",
                    Some(502),
                    Some("connect"),
                    Some("connection_refused"),
                    0
                ),
            ]
        );
        // Only the forward whose response ended has an added latency: at most its 40 ms.
        assert_eq!(r.metrics.added_latency.count, 1);
        assert!(
            r.metrics.added_latency.sum <= 40.0,
            "{}",
            r.metrics.added_latency.sum
        );
        // Nothing is kept for a finished command.
        assert!(r.info.is_empty() && r.ids.is_empty() && r.post_failed.is_empty());
    }

    #[test]
    fn a_delivery_retry_is_counted_only_after_a_failed_post_attempt() {
        let log = Logger::new(Level::Error, false, Vec::new(), Box::new(std::io::sink()));
        let mut r = Report::new(Arc::new(log));
        let cmd = CommandId(1);
        for (result, retry) in [
            (answered(202), false),
            (answered(404), false),
            (answered(503), true),
            (answered(400), true),
            (
                Err((false, "connection refused (127.0.0.1:9)".to_owned())),
                true,
            ),
        ] {
            let before = r.metrics.delivery_retries;
            r.post_started(cmd);
            r.post_ended(cmd, &result);
            r.post_started(cmd);
            let counted = r.metrics.delivery_retries - before;
            assert_eq!(counted, u64::from(retry), "{result:?}");
        }
    }

    /// The tunnel's own events are logged with the lines the drivers wrote when they composed
    /// the engine and the stdio bindings themselves (text, level and fields).
    #[test]
    fn tunnel_events_are_logged_as_the_drivers_logged_them() {
        let sink = Sink::default();
        let log = Logger::new(Level::Debug, false, Vec::new(), Box::new(sink.clone()));
        let mut r = Report::new(Arc::new(log));
        let channel = || "main".to_owned();
        r.tunnel_event(tunnel::Event::StdioRestarting { channel: channel() });
        r.tunnel_event(tunnel::Event::StdioExited { channel: channel() });
        r.tunnel_event(tunnel::Event::StdioDiscarded {
            channel: channel(),
            reason: DiscardReason::LateResponse,
        });
        r.tunnel_event(tunnel::Event::ForwardStarted {
            cmd: CommandId(1),
            request_id: "r1".into(),
            channel: channel(),
            what: Forwarded::JsonRpc {
                method: Some("tools/call".into()),
            },
        });
        r.tunnel_event(tunnel::Event::ForwardRefused {
            request_id: "r1".into(),
            failure: TunnelFailure::before_response(FailureSource::ClientInternal, None),
        });
        r.tunnel_event(tunnel::Event::Engine(Event::Completed {
            request_id: "r1".into(),
            resp_type: RespType::JsonrpcResponse,
            resp_code: 502,
            since_receipt: std::time::Duration::from_millis(12),
            since_created: None,
        }));
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        // Each line without its timestamp.
        let lines: Vec<&str> = text
            .lines()
            .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest))
            .collect();
        assert_eq!(
            lines[..3],
            [
                "WARN  restarting stdio server (initialize deadline passed) channel=main",
                "WARN  stdio server exited; its commands fail with transport_closed and it restarts channel=main",
                "DEBUG stdio frame discarded channel=main reason=LateResponse",
            ]
        );
        assert!(
            lines[3].starts_with(
                "INFO  command request_id=r1 channel=main method=tools/call duration_ms="
            ),
            "{}",
            lines[3]
        );
        assert!(lines[3].contains(" outcome=failed"), "{}", lines[3]);
        assert!(
            lines[3].ends_with(" failure=client_internal"),
            "{}",
            lines[3]
        );
        assert_eq!(lines.len(), 4);
    }

    /// A Harpoon call is one log line by label, status and outcome (no URL, no header value)
    /// and one observation in each of the Go tunnel-client's three series.
    #[test]
    fn harpoon_calls_are_logged_and_counted_under_the_go_clients_names() {
        use mcpwire_core::tunnel::harpoon::headers::DroppedClass;
        use mcpwire_core::tunnel::harpoon::server::CallRecord;
        use std::time::Duration;

        let sink = Sink::default();
        let log = Logger::new(Level::Debug, false, Vec::new(), Box::new(sink.clone()));
        let mut r = Report::new(Arc::new(log));
        let call = |result, status, ms, bytes| {
            tunnel::Event::Harpoon(HarpoonEvent::Call(CallRecord {
                label: "api".into(),
                status,
                result,
                latency: Duration::from_millis(ms),
                response_bytes: bytes,
                redirects: 1,
            }))
        };
        r.tunnel_event(tunnel::Event::Harpoon(HarpoonEvent::HeadersDropped {
            label: "api".into(),
            classes: vec![DroppedClass::Cookie, DroppedClass::Forwarding],
        }));
        r.tunnel_event(call(CallResult::Answered, Some(200), 7, 300));
        r.tunnel_event(call(CallResult::Answered, Some(201), 40, 5000));
        r.tunnel_event(call(CallResult::TooLarge, Some(200), 3, 2_000_000));
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest))
            .collect();
        assert_eq!(
            lines,
            [
                "INFO  harpoon dropped request headers label=api classes=cookie,forwarding",
                "INFO  harpoon call label=api status=200 outcome=success duration_ms=7 response_bytes=300 redirects=1",
                "INFO  harpoon call label=api status=201 outcome=success duration_ms=40 response_bytes=5000 redirects=1",
                "WARN  harpoon call label=api status=200 outcome=response_too_large duration_ms=3 response_bytes=2000000 redirects=1",
            ]
        );
        let prom = r.metrics.prometheus();
        let ok = "label=\"api\",status_class=\"2xx\",outcome=\"success\"";
        for needle in [
            "# TYPE harpoon_call_total counter".to_owned(),
            format!("harpoon_call_total{{{ok}}} 2"),
            "harpoon_call_total{label=\"api\",status_class=\"2xx\",outcome=\"response_too_large\"} 1"
                .to_owned(),
            "# TYPE harpoon_call_latency_milliseconds histogram".to_owned(),
            format!("harpoon_call_latency_milliseconds_bucket{{{ok},le=\"5\"}} 0"),
            format!("harpoon_call_latency_milliseconds_bucket{{{ok},le=\"10\"}} 1"),
            format!("harpoon_call_latency_milliseconds_bucket{{{ok},le=\"50\"}} 2"),
            format!("harpoon_call_latency_milliseconds_bucket{{{ok},le=\"+Inf\"}} 2"),
            format!("harpoon_call_latency_milliseconds_sum{{{ok}}} 47"),
            format!("harpoon_call_latency_milliseconds_count{{{ok}}} 2"),
            "# TYPE harpoon_response_size_bytes histogram".to_owned(),
            format!("harpoon_response_size_bytes_bucket{{{ok},le=\"256\"}} 0"),
            format!("harpoon_response_size_bytes_bucket{{{ok},le=\"1024\"}} 1"),
            format!("harpoon_response_size_bytes_bucket{{{ok},le=\"16384\"}} 2"),
            format!("harpoon_response_size_bytes_sum{{{ok}}} 5300"),
        ] {
            assert!(prom.contains(&needle), "missing {needle} in\n{prom}");
        }
    }

    /// Without Harpoon calls its series are absent (no empty histogram headers).
    #[test]
    fn no_harpoon_series_without_calls() {
        assert!(!Metrics::default().prometheus().contains("harpoon_"));
    }
}
