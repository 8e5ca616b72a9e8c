//! What a running tunnel reports about itself: the counters and readiness the driver publishes
//! after every step ([`Status`], a snapshot of [`Metrics`]), and their Prometheus text
//! ([`Metrics::prometheus`]). Serving them (the CLI's `/healthz`, `/readyz` and `/metrics`) is
//! the embedder's part.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use mcpwire_core::tunnel::cloudflare::{combine_readiness, CompanionState};
use mcpwire_core::tunnel::{Health, NotReady, Readiness};

use super::activity::Activity;

/// What the health endpoints report: counters the driver keeps and the engine's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Polls sent.
    pub polls: u64,
    /// Polls that failed.
    pub poll_errors: u64,
    /// Finished commands by outcome.
    pub commands: BTreeMap<&'static str, u64>,
    /// Response POSTs sent again after a failed attempt.
    pub delivery_retries: u64,
    /// When the last poll succeeded (Unix seconds).
    pub last_successful_poll: Option<f64>,
    /// Commands admitted and not finished.
    pub in_flight: usize,
    /// Commands waiting for a forward slot.
    pub queued: usize,
    /// Forwards running.
    pub forwards_in_flight: usize,
    /// Response POSTs in flight.
    pub posts_in_flight: usize,
    /// `None` when ready, else why not.
    pub not_ready: Option<String>,
    /// Harpoon's `call_target` calls by label, status class and outcome.
    pub harpoon_calls: BTreeMap<HarpoonKey, HarpoonSeries>,
    /// Commands the polls carried.
    pub commands_polled: u64,
    /// Polled items dropped before admission (an unknown `command_type`, or not decodable).
    pub commands_invalid: u64,
    /// Failed polls by the Go client's `error_kind` (`timeout`, `other`).
    pub poll_errors_by_kind: BTreeMap<&'static str, u64>,
    /// How long polls took, answered with a 2xx (`[0]`) or not (`[1]`), in seconds.
    pub poll_latency: [Histogram; 2],
    /// Commands admitted and not finished, at most (`--control-plane.max-inflight`).
    pub queue_capacity: usize,
    /// Forwards running at once, at most (`--mcp.max-concurrent-requests`).
    pub worker_capacity: usize,
    /// Why `/readyz` stays 503 whatever the engine says (a failed start-up probe).
    pub startup_problem: Option<String>,
    /// The tunnel id, for the Go client's `tunnel_id` labels.
    pub tunnel_id: String,
    /// Commands for unserved channels, by channel and command type (at most
    /// `MAX_CHANNEL_SERIES` channels; the rest under `__other__`).
    pub unsupported_channels: BTreeMap<(String, &'static str), u64>,
    /// `command_end_to_end_latency_milliseconds` (`latency_type="poll_to_response"`), by
    /// request kind, method, channel and the status posted (at most `MAX_LATENCY_SERIES`
    /// label sets; past them the method is `__other__`).
    pub command_latency: BTreeMap<LatencyKey, Histogram>,
    /// `commands_age_seconds`: from a command's `created_at` to its admission.
    pub commands_age: Histogram,
    /// How long the engine waits before the next poll after a failed one (cleared by a
    /// successful poll), in milliseconds.
    pub poll_backoff_ms: Option<u64>,
    /// The cloudflared companion's state, when one runs.
    pub companion: Option<String>,
    /// `mcpwire_tunnel_added_latency_milliseconds`: what the tunnel adds to a command sent to
    /// an HTTP server, its poll-to-response time less the forward's own (admission, queueing,
    /// the response POST).
    pub added_latency: Histogram,
}

/// The labels of a `command_end_to_end_latency_milliseconds` series.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LatencyKey {
    /// `call`, `notification` or `session_termination`.
    pub request_kind: &'static str,
    /// The JSON-RPC method (empty for a session termination).
    pub request_method: String,
    /// The channel.
    pub channel: String,
    /// The `resp_code` posted.
    pub status: u16,
    /// `poll_to_response` or `enqueue_to_response`.
    pub latency_type: &'static str,
}

/// The most label sets `command_end_to_end_latency_milliseconds` keeps (methods come from the
/// commands).
pub const MAX_LATENCY_SERIES: usize = 256;

/// The upper bounds of `command_end_to_end_latency_milliseconds`'s buckets: the
/// OpenTelemetry SDK's defaults, as the Go client exports them.
pub const COMMAND_LATENCY_BUCKETS_MS: [f64; 15] = POLL_LATENCY_BUCKETS_S;

/// The most channels `command_unsupported_channel_total` names (the control plane chooses
/// them; past this, `__other__`).
pub const MAX_CHANNEL_SERIES: usize = 32;

/// The upper bounds of `commands_poll_latency_seconds`'s buckets: the OpenTelemetry SDK's
/// default boundaries, which the Go client's histogram uses as they are (in seconds).
pub const POLL_LATENCY_BUCKETS_S: [f64; 15] = [
    0.0, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0, 750.0, 1000.0, 2500.0, 5000.0, 7500.0,
    10000.0,
];

/// The labels of Harpoon's series: the target's label (unregistered ones folded), the status
/// class (`2xx` ... or `none`) and the outcome.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HarpoonKey {
    /// The target's label, or `__unknown__`.
    pub label: String,
    /// `1xx` ... `5xx`, or `none` when no answer came.
    pub status_class: &'static str,
    /// How the call ended.
    pub outcome: &'static str,
}

/// The upper bounds of `harpoon_call_latency_milliseconds`'s buckets.
pub const LATENCY_BUCKETS_MS: [f64; 14] = [
    5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0,
    120000.0,
];

/// The upper bounds of `harpoon_response_size_bytes`'s buckets.
pub const SIZE_BUCKETS_BYTES: [f64; 10] = [
    256.0, 1024.0, 4096.0, 16384.0, 65536.0, 102400.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
];

/// A Prometheus histogram: cumulative counts at fixed upper bounds, a sum and a count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Observations at or below each bound of the metric's bucket list.
    pub buckets: Vec<u64>,
    /// The sum of the observations.
    pub sum: f64,
    /// How many observations.
    pub count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], value: f64) {
        if self.buckets.len() != bounds.len() {
            self.buckets = vec![0; bounds.len()];
        }
        for (n, bound) in self.buckets.iter_mut().zip(bounds) {
            if value <= *bound {
                *n += 1;
            }
        }
        self.sum += value;
        self.count += 1;
    }

    fn lines(&self, labels: &str, bounds: &[f64], out: &mut Vec<(String, String)>) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, bound) in bounds.iter().enumerate() {
            let n = self.buckets.get(i).copied().unwrap_or(0);
            out.push((
                format!("_bucket{{{labels}{sep}le=\"{bound}\"}}"),
                n.to_string(),
            ));
        }
        out.push((
            format!("_bucket{{{labels}{sep}le=\"+Inf\"}}"),
            self.count.to_string(),
        ));
        let braced = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        out.push((format!("_sum{braced}"), self.sum.to_string()));
        out.push((format!("_count{braced}"), self.count.to_string()));
    }
}

/// One label set's counter and histograms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HarpoonSeries {
    /// Calls.
    pub calls: u64,
    /// Their latency in milliseconds.
    pub latency_ms: Histogram,
    /// Their answers' body sizes in bytes.
    pub response_bytes: Histogram,
}

impl HarpoonSeries {
    /// Counts one call that took `latency_ms` and received `bytes`.
    pub fn observe(&mut self, latency_ms: f64, bytes: u64) {
        self.calls += 1;
        self.latency_ms.observe(&LATENCY_BUCKETS_MS, latency_ms);
        // Sizes are far below 2^53, where f64 stops being exact.
        #[allow(clippy::cast_precision_loss)]
        self.response_bytes
            .observe(&SIZE_BUCKETS_BYTES, bytes as f64);
    }
}

impl Metrics {
    /// Counts one finished command.
    pub fn count(&mut self, outcome: &'static str) {
        *self.commands.entry(outcome).or_default() += 1;
    }

    /// Records a command's latency from its poll's arrival to its terminal POST's answer.
    pub fn command_latency(
        &mut self,
        request_kind: &'static str,
        method: &str,
        channel: &str,
        status: u16,
        latency_type: &'static str,
        took: std::time::Duration,
    ) {
        let mut key = LatencyKey {
            request_kind,
            request_method: method.to_owned(),
            channel: channel.to_owned(),
            status,
            latency_type,
        };
        if !self.command_latency.contains_key(&key)
            && self.command_latency.len() >= MAX_LATENCY_SERIES
        {
            "__other__".clone_into(&mut key.request_method);
        }
        // Whole milliseconds, as the Go client records them.
        #[allow(clippy::cast_precision_loss)]
        let ms = took.as_millis() as f64;
        self.command_latency
            .entry(key)
            .or_default()
            .observe(&COMMAND_LATENCY_BUCKETS_MS, ms);
    }

    /// Records the time the tunnel added to one forwarded command.
    pub fn added_latency(&mut self, added: std::time::Duration) {
        self.added_latency
            .observe(&COMMAND_LATENCY_BUCKETS_MS, added.as_secs_f64() * 1000.0);
    }

    /// Records how long a command waited in the control plane's queue.
    pub fn command_age(&mut self, age: std::time::Duration) {
        self.commands_age
            .observe(&POLL_LATENCY_BUCKETS_S, age.as_secs_f64());
    }

    /// Counts one command for a channel this client does not serve.
    pub fn unsupported_channel(&mut self, channel: &str, command_type: &'static str) {
        let named: std::collections::BTreeSet<&str> = self
            .unsupported_channels
            .keys()
            .map(|(c, _)| c.as_str())
            .collect();
        let name = if named.contains(channel) || named.len() < MAX_CHANNEL_SERIES {
            channel
        } else {
            "__other__"
        };
        *self
            .unsupported_channels
            .entry((name.to_owned(), command_type))
            .or_default() += 1;
    }

    /// Counts one poll that took `took`, `failed` unless a 2xx answered it.
    pub fn poll_ended(&mut self, took: std::time::Duration, failed: bool) {
        self.poll_latency[usize::from(failed)].observe(&POLL_LATENCY_BUCKETS_S, took.as_secs_f64());
    }

    /// Marks a successful poll now.
    pub fn polled_now(&mut self) {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.last_successful_poll = Some(t.as_secs_f64());
    }

    /// Copies the engine's gauges and readiness, with the cloudflared companion's state when
    /// one runs.
    pub fn update(&mut self, health: &Health, companion: Option<CompanionState>, stopping: bool) {
        self.in_flight = health.in_flight;
        self.queued = health.queued_forwards;
        self.forwards_in_flight = health.forwards_in_flight;
        self.posts_in_flight = health.posts_in_flight;
        self.companion = companion.map(|c| {
            match c {
                CompanionState::Starting => "starting",
                CompanionState::Ready => "ready",
                CompanionState::Unready => "unready",
                CompanionState::Exited => "exited",
            }
            .to_owned()
        });
        self.not_ready = if stopping {
            Some("shutting down".to_owned())
        } else if let Some(problem) = &self.startup_problem {
            Some(problem.clone())
        } else {
            match &combine_readiness(health.readiness.clone(), companion) {
                Readiness::Ready => None,
                Readiness::NotReady(why) => Some(not_ready_text(why)),
            }
        };
    }

    /// The Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, lines: &[(String, String)]| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in lines {
                let _ = writeln!(s, "{name}{labels} {value}");
            }
        };
        let one = |v: String| vec![(String::new(), v)];
        // Harpoon's series carry the Go tunnel-client's names, so its dashboards keep working.
        let mut calls = Vec::new();
        let mut latency = Vec::new();
        let mut sizes = Vec::new();
        for (k, series) in &self.harpoon_calls {
            let labels = format!(
                "label=\"{}\",status_class=\"{}\",outcome=\"{}\"",
                escape_label(&k.label),
                k.status_class,
                k.outcome
            );
            calls.push((format!("{{{labels}}}"), series.calls.to_string()));
            series
                .latency_ms
                .lines(&labels, &LATENCY_BUCKETS_MS, &mut latency);
            series
                .response_bytes
                .lines(&labels, &SIZE_BUCKETS_BYTES, &mut sizes);
        }
        metric(
            "mcpwire_tunnel_polls_total",
            "counter",
            "Poll requests sent to the control plane.",
            &one(self.polls.to_string()),
        );
        metric(
            "mcpwire_tunnel_poll_errors_total",
            "counter",
            "Poll requests that failed.",
            &one(self.poll_errors.to_string()),
        );
        let by_outcome: Vec<(String, String)> = self
            .commands
            .iter()
            .map(|(k, v)| (format!("{{outcome=\"{k}\"}}"), v.to_string()))
            .collect();
        metric(
            "mcpwire_tunnel_commands_total",
            "counter",
            "Commands finished, by outcome.",
            &by_outcome,
        );
        metric(
            "mcpwire_tunnel_commands_in_flight",
            "gauge",
            "Commands admitted and not finished.",
            &one(self.in_flight.to_string()),
        );
        metric(
            "mcpwire_tunnel_forward_queue",
            "gauge",
            "Commands waiting for a forward slot.",
            &one(self.queued.to_string()),
        );
        metric(
            "mcpwire_tunnel_forwards_in_flight",
            "gauge",
            "Forwards to MCP servers running.",
            &one(self.forwards_in_flight.to_string()),
        );
        metric(
            "mcpwire_tunnel_response_posts_in_flight",
            "gauge",
            "Response POSTs in flight.",
            &one(self.posts_in_flight.to_string()),
        );
        metric(
            "mcpwire_tunnel_delivery_retries_total",
            "counter",
            "Response POSTs sent again after a failed attempt.",
            &one(self.delivery_retries.to_string()),
        );
        metric(
            "mcpwire_tunnel_last_successful_poll_timestamp_seconds",
            "gauge",
            "Unix time of the last successful poll (0 before the first).",
            &one(format!("{:.3}", self.last_successful_poll.unwrap_or(0.0))),
        );
        // The Go tunnel-client's name for the same gauge (its `health
        // --require-control-plane-poll` and existing dashboards read it).
        metric(
            "commands_poll_last_successful_timestamp_seconds",
            "gauge",
            "Unix time of the last successful poll (0 before the first; the Go client's name).",
            &one(format!("{:.3}", self.last_successful_poll.unwrap_or(0.0))),
        );
        // More of the Go client's names, for the same counts (dashboards and alerts written for
        // it): poll cycles and errors, the queue waiting for a forward slot, the forwards
        // running (its dispatcher's worker pool).
        metric(
            "commands_poll_cycles_total",
            "counter",
            "Poll requests sent (the Go client's name).",
            &one(self.polls.to_string()),
        );
        let by_kind: Vec<(String, String)> = ["other", "timeout"]
            .iter()
            .map(|k| {
                let n = self.poll_errors_by_kind.get(k).copied().unwrap_or(0);
                (format!("{{error_kind=\"{k}\"}}"), n.to_string())
            })
            .collect();
        metric(
            "commands_poll_errors_total",
            "counter",
            "Poll requests that failed, by error kind (the Go client's name).",
            &by_kind,
        );
        let mut latency_lines = Vec::new();
        for (i, error) in ["false", "true"].iter().enumerate() {
            self.poll_latency[i].lines(
                &format!("error=\"{error}\""),
                &POLL_LATENCY_BUCKETS_S,
                &mut latency_lines,
            );
        }
        metric(
            "commands_poll_latency_seconds",
            "histogram",
            "Latency in seconds of completed poll requests (the Go client's name and buckets).",
            &latency_lines,
        );
        metric(
            "commands_polled_total",
            "counter",
            "Commands the polls carried (the Go client's name).",
            &one(self.commands_polled.to_string()),
        );
        metric(
            "commands_enqueued_total",
            "counter",
            "Polled commands admitted (the Go client's name).",
            &one(self
                .commands_polled
                .saturating_sub(self.commands_invalid)
                .to_string()),
        );
        metric(
            "commands_queue_drops_total",
            "counter",
            "Polled items dropped before admission, by reason (the Go client's name).",
            &[(
                "{drop_reason=\"invalid_command_type\"}".to_owned(),
                self.commands_invalid.to_string(),
            )],
        );
        let tunnel = escape_label(&self.tunnel_id);
        let unsupported: Vec<(String, String)> = self
            .unsupported_channels
            .iter()
            .map(|((channel, kind), n)| {
                (
                    format!(
                        "{{tunnel_id=\"{tunnel}\",channel=\"{}\",command_type=\"{kind}\"}}",
                        escape_label(channel)
                    ),
                    n.to_string(),
                )
            })
            .collect();
        let mut latency_series = Vec::new();
        for (k, h) in &self.command_latency {
            let labels = format!(
                "request_kind=\"{}\",request_method=\"{}\",channel=\"{}\",tunnel_id=\"{tunnel}\",tunnel_service_status=\"{}\",latency_type=\"{}\"",
                k.request_kind,
                escape_label(&k.request_method),
                escape_label(&k.channel),
                k.status,
                k.latency_type
            );
            h.lines(&labels, &COMMAND_LATENCY_BUCKETS_MS, &mut latency_series);
        }
        if !latency_series.is_empty() {
            metric(
                "command_end_to_end_latency_milliseconds",
                "histogram",
                "Milliseconds to a command's terminal response's delivery, from the poll response that carried it (poll_to_response) or from its created_at (enqueue_to_response) (the Go client's name).",
                &latency_series,
            );
        }
        let mut added_lines = Vec::new();
        self.added_latency
            .lines("", &COMMAND_LATENCY_BUCKETS_MS, &mut added_lines);
        metric(
            "mcpwire_tunnel_added_latency_milliseconds",
            "histogram",
            "Milliseconds the tunnel added to a command forwarded to an HTTP server: its poll-to-response time less the forward's own.",
            &added_lines,
        );
        let mut age_lines = Vec::new();
        self.commands_age
            .lines("", &POLL_LATENCY_BUCKETS_S, &mut age_lines);
        metric(
            "commands_age_seconds",
            "histogram",
            "Seconds between a command's enqueue (its created_at) and its admission by the poller (the Go client's name and buckets).",
            &age_lines,
        );
        if !unsupported.is_empty() {
            metric(
                "command_unsupported_channel_total",
                "counter",
                "Polled commands answered with a failure because their channel is not served (the Go client's name).",
                &unsupported,
            );
        }
        metric(
            "commands_queue_capacity",
            "gauge",
            "Commands admitted and not finished, at most (the Go client's name).",
            &one(self.queue_capacity.to_string()),
        );
        metric(
            "dispatcher_worker_pool_capacity",
            "gauge",
            "Forwards to MCP servers running at once, at most (the Go client's name).",
            &one(self.worker_capacity.to_string()),
        );
        metric(
            "liveness",
            "gauge",
            "1 while the tunnel client process is live (the Go client's name).",
            &one("1".to_owned()),
        );
        metric(
            "readiness",
            "gauge",
            "1 when /readyz answers 200 (the Go client's name).",
            &one(u8::from(self.not_ready.is_none()).to_string()),
        );
        metric(
            "commands_queue_length",
            "gauge",
            "Commands waiting for a forward slot (the Go client's name).",
            &one(self.queued.to_string()),
        );
        metric(
            "dispatcher_worker_pool_occupancy",
            "gauge",
            "Forwards to MCP servers running (the Go client's name).",
            &one(self.forwards_in_flight.to_string()),
        );
        metric(
            "mcpwire_tunnel_ready",
            "gauge",
            "1 when /readyz answers 200.",
            &one(u8::from(self.not_ready.is_none()).to_string()),
        );
        if !calls.is_empty() {
            metric(
                "harpoon_call_total",
                "counter",
                "Harpoon call_target invocations, by target label, status class and outcome.",
                &calls,
            );
            metric(
                "harpoon_call_latency_milliseconds",
                "histogram",
                "Latency of Harpoon call_target invocations in milliseconds.",
                &latency,
            );
            metric(
                "harpoon_response_size_bytes",
                "histogram",
                "Body size of the answers Harpoon's call_target received, in bytes.",
                &sizes,
            );
        }
        s
    }
}

/// A label value in the exposition format: `\\`, `"` and newlines escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn not_ready_text(why: &NotReady) -> String {
    match why {
        NotReady::NoSuccessfulPoll => "no successful poll yet".to_owned(),
        NotReady::OperatorAction { status } => format!(
            "the control plane refuses this client (HTTP {status}): check the API key and tunnel id"
        ),
        NotReady::PollFailing {
            consecutive_failures,
        } => format!("the last {consecutive_failures} polls failed"),
        NotReady::ForwardsFailing { recent_failures } => {
            format!("the last {recent_failures} forwards to the MCP server failed")
        }
        NotReady::Companion { state } => state
            .not_ready_reason()
            .unwrap_or("cloudflared is not ready")
            .to_owned(),
        _ => "not ready".to_owned(),
    }
}

/// The snapshot shared between the driver and the listener, and the feeds of what the tunnel
/// did lately ([`Activity`]).
#[derive(Debug, Default)]
pub struct Status {
    metrics: Mutex<Metrics>,
    activity: Arc<Activity>,
}

impl Status {
    /// A fresh, not-ready status.
    pub fn new() -> Arc<Self> {
        let s = Status::default();
        s.publish(Metrics {
            not_ready: Some(not_ready_text(&NotReady::NoSuccessfulPoll)),
            ..Metrics::default()
        });
        Arc::new(s)
    }

    /// Replaces the snapshot.
    pub fn publish(&self, m: Metrics) {
        *self.metrics.lock().unwrap_or_else(PoisonError::into_inner) = m;
    }

    /// The recent commands and Harpoon calls, filled by the running tunnel's report stream.
    pub fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// A copy of the snapshot.
    pub fn get(&self) -> Metrics {
        self.metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_text_names_every_required_series() {
        let mut m = Metrics {
            polls: 3,
            ..Metrics::default()
        };
        m.count("completed");
        m.count("expired");
        let text = m.prometheus();
        for needle in [
            "mcpwire_tunnel_polls_total 3",
            "mcpwire_tunnel_poll_errors_total 0",
            "mcpwire_tunnel_commands_total{outcome=\"completed\"} 1",
            "mcpwire_tunnel_commands_total{outcome=\"expired\"} 1",
            "mcpwire_tunnel_commands_in_flight 0",
            "mcpwire_tunnel_forward_queue 0",
            "mcpwire_tunnel_delivery_retries_total 0",
            "mcpwire_tunnel_last_successful_poll_timestamp_seconds",
            "# TYPE commands_poll_last_successful_timestamp_seconds gauge",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
