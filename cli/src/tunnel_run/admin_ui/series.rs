//! The admin UI's charts: the `/metrics` counters sampled once a second over the last minutes,
//! turned into per-second rates, percentiles and gauges. The same [`Metrics`] snapshot that
//! `/metrics` prints, so the charts and a scrape never disagree.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use mcpwire::tunnel::activity::unix_ms_now;
use mcpwire::tunnel::status::COMMAND_LATENCY_BUCKETS_MS;
use mcpwire::tunnel::{Metrics, Status};
use serde_json::{json, Value};

/// How often the counters are sampled.
pub const EVERY: Duration = Duration::from_secs(1);
/// Samples kept: five minutes.
pub const KEPT: usize = 300;

/// One sample of the counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// When (Unix milliseconds).
    pub at_unix_ms: u64,
    /// Finished commands by outcome, since start.
    pub commands: BTreeMap<String, u64>,
    /// Commands admitted and not finished.
    pub in_flight: usize,
    /// Commands waiting for a forward slot.
    pub queued: usize,
    /// Forwards running.
    pub forwards: usize,
    /// `poll_to_response` latency over every label set: cumulative counts per bucket bound
    /// and the total count.
    pub latency_buckets: Vec<u64>,
    /// How many latencies were observed.
    pub latency_count: u64,
    /// The latency the tunnel added (`mcpwire_tunnel_added_latency_milliseconds`): cumulative
    /// counts per bucket bound.
    pub added_buckets: Vec<u64>,
    /// How many added latencies were observed.
    pub added_count: u64,
}

impl Sample {
    /// The sample of `m` taken at `at_unix_ms`.
    pub fn of(m: &Metrics, at_unix_ms: u64) -> Self {
        let mut buckets = vec![0u64; COMMAND_LATENCY_BUCKETS_MS.len()];
        let mut count = 0;
        for (key, h) in &m.command_latency {
            if key.latency_type != "poll_to_response" {
                continue;
            }
            for (total, n) in buckets.iter_mut().zip(&h.buckets) {
                *total += n;
            }
            count += h.count;
        }
        Sample {
            at_unix_ms,
            commands: m
                .commands
                .iter()
                .map(|(k, n)| ((*k).to_owned(), *n))
                .collect(),
            in_flight: m.in_flight,
            queued: m.queued,
            forwards: m.forwards_in_flight,
            latency_buckets: buckets,
            latency_count: count,
            added_buckets: m.added_latency.buckets.clone(),
            added_count: m.added_latency.count,
        }
    }
}

/// The samples of the last [`KEPT`] seconds.
#[derive(Debug, Default)]
pub struct Series {
    samples: Mutex<VecDeque<Sample>>,
}

impl Series {
    /// Samples `status` every [`EVERY`] on a background thread, while the series is in use.
    pub fn start(status: Arc<Status>) -> Arc<Self> {
        let series = Arc::new(Series::default());
        series.push(Sample::of(&status.get(), unix_ms_now()));
        let weak: Weak<Series> = Arc::downgrade(&series);
        let _ = std::thread::Builder::new()
            .name("admin-ui-sampler".into())
            .spawn(move || loop {
                std::thread::sleep(EVERY);
                let Some(series) = weak.upgrade() else { break };
                series.push(Sample::of(&status.get(), unix_ms_now()));
            });
        series
    }

    /// Adds a sample, dropping the oldest past [`KEPT`].
    pub fn push(&self, s: Sample) {
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() == KEPT {
            samples.pop_front();
        }
        samples.push_back(s);
    }

    /// The charts' data: per interval between two samples, its end time, commands per second
    /// by outcome, the latency percentiles of the commands that finished in it, and the
    /// gauges.
    pub fn json(&self) -> Value {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        let points: Vec<Value> = samples
            .iter()
            .zip(samples.iter().skip(1))
            .map(|(a, b)| interval(a, b))
            .collect();
        json!({
            "every_ms": EVERY.as_millis() as u64,
            "latency_bounds_ms": COMMAND_LATENCY_BUCKETS_MS,
            "points": points,
        })
    }
}

fn interval(a: &Sample, b: &Sample) -> Value {
    let secs = (b.at_unix_ms.saturating_sub(a.at_unix_ms) as f64 / 1000.0).max(0.001);
    let rates: serde_json::Map<String, Value> = b
        .commands
        .iter()
        .map(|(k, n)| {
            let before = a.commands.get(k).copied().unwrap_or(0);
            (k.clone(), json!(n.saturating_sub(before) as f64 / secs))
        })
        .collect();
    let quantiles = |after: &[u64], before: &[u64], count: u64| {
        let deltas: Vec<u64> = after
            .iter()
            .zip(before.iter().chain(std::iter::repeat(&0)))
            .map(|(x, y)| x.saturating_sub(*y))
            .collect();
        let p = |q| percentile(&deltas, count, q);
        json!({"p50": p(0.5), "p95": p(0.95), "p99": p(0.99), "count": count})
    };
    json!({
        "at_unix_ms": b.at_unix_ms,
        "commands_per_second": rates,
        "latency_ms": quantiles(
            &b.latency_buckets,
            &a.latency_buckets,
            b.latency_count.saturating_sub(a.latency_count),
        ),
        "added_latency_ms": quantiles(
            &b.added_buckets,
            &a.added_buckets,
            b.added_count.saturating_sub(a.added_count),
        ),
        "in_flight": b.in_flight,
        "queued": b.queued,
        "forwards": b.forwards,
    })
}

/// The `q` quantile of `count` observations whose cumulative counts at
/// [`COMMAND_LATENCY_BUCKETS_MS`] are `cumulative`, interpolated within its bucket (as
/// Prometheus's `histogram_quantile` does); `None` without observations. Past the last bound,
/// the last bound.
pub fn percentile(cumulative: &[u64], count: u64, q: f64) -> Option<f64> {
    if count == 0 {
        return None;
    }
    let rank = q * count as f64;
    let mut lower_bound = 0.0;
    let mut lower_count = 0u64;
    for (bound, n) in COMMAND_LATENCY_BUCKETS_MS.iter().zip(cumulative) {
        if *n as f64 >= rank && *n > lower_count {
            let within = (rank - lower_count as f64) / (*n - lower_count) as f64;
            return Some(lower_bound + (bound - lower_bound) * within.clamp(0.0, 1.0));
        }
        lower_bound = *bound;
        lower_count = *n;
    }
    COMMAND_LATENCY_BUCKETS_MS.last().copied()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mcpwire::tunnel::status::{Histogram, LatencyKey};

    fn metrics_with(latencies_ms: &[f64], completed: u64) -> Metrics {
        let mut m = Metrics::default();
        for _ in 0..completed {
            m.count("completed");
        }
        let mut h = Histogram {
            buckets: vec![0; COMMAND_LATENCY_BUCKETS_MS.len()],
            ..Histogram::default()
        };
        for v in latencies_ms {
            for (n, bound) in h.buckets.iter_mut().zip(COMMAND_LATENCY_BUCKETS_MS) {
                if *v <= bound {
                    *n += 1;
                }
            }
            h.count += 1;
            h.sum += v;
        }
        for v in latencies_ms {
            m.added_latency(Duration::from_secs_f64(v / 10_000.0));
        }
        m.command_latency.insert(
            LatencyKey {
                request_kind: "call",
                request_method: "tools/call".into(),
                channel: "main".into(),
                status: 200,
                latency_type: "poll_to_response",
            },
            h,
        );
        m
    }

    #[test]
    fn an_interval_gives_rates_and_percentiles_of_what_finished_in_it() {
        let a = Sample::of(&metrics_with(&[3.0; 10], 10), 1_000);
        // 10 more commands in two seconds, nine at 20 ms and one at 800 ms.
        let mut later = vec![3.0; 10];
        later.extend([20.0; 9]);
        later.push(800.0);
        let b = Sample::of(&metrics_with(&later, 20), 3_000);
        let v = interval(&a, &b);
        assert_eq!(v["commands_per_second"]["completed"], json!(5.0));
        assert_eq!(v["latency_ms"]["count"], json!(10));
        // Nine of ten in (10, 25]: the median interpolates inside that bucket.
        let p50 = v["latency_ms"]["p50"].as_f64().unwrap();
        assert!(p50 > 10.0 && p50 <= 25.0, "{p50}");
        // The slowest is in (750, 1000].
        let p99 = v["latency_ms"]["p99"].as_f64().unwrap();
        assert!(p99 > 750.0 && p99 <= 1000.0, "{p99}");
        // The added latency (a tenth of each here) has its own percentiles.
        assert_eq!(v["added_latency_ms"]["count"], json!(10));
        let added = v["added_latency_ms"]["p99"].as_f64().unwrap();
        assert!(added > 75.0 && added <= 100.0, "{added}");
    }

    #[test]
    fn percentiles_need_observations_and_stop_at_the_last_bound() {
        assert_eq!(percentile(&[0; 15], 0, 0.5), None);
        let all_below: Vec<u64> = vec![0; 15];
        // Every observation above the last bound.
        assert_eq!(percentile(&all_below, 4, 0.5), Some(10000.0));
    }
}
