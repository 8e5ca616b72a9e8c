//! What the benchmark's Rust clients share: their command line, the loop's bounds, the check of
//! each answer and the one line each prints (the same fields as `ts/client.mjs`).
//!
//! ```text
//! CLIENT http  URL                N [WARMUP] [TIME_LIMIT_S] [CONCURRENCY]
//! CLIENT stdio "PROGRAM ARGS..."  N [WARMUP] [TIME_LIMIT_S] [CONCURRENCY]
//! ```
//!
//! The stdio command is split on whitespace and started without a shell. Every client makes
//! WARMUP calls (default 200), then N timed calls of `tools/call echo` with
//! `{"text": "bench"}`, and checks each answer's first text block. The timed loop stops early
//! (and says so) once TIME_LIMIT_S (default 120) has passed.
//!
//! CONCURRENCY (default 1) is how many calls are in flight on the one client (one connection,
//! or one child process). At 1 the calls are made one at a time by the main thread or task, as
//! before this argument existed. Above 1, CONCURRENCY workers share the one client; each makes
//! calls one after another while a [`Window`] still hands out calls, so CONCURRENCY calls are
//! outstanding until the last ones; the warm-up calls are made the same way. How the workers
//! run is each client's usual way (threads, joined futures, tasks: see each binary).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The tool called and its argument text, checked in every answer.
pub const TOOL: &str = "echo";
/// The text sent and expected back.
pub const TEXT: &str = "bench";

/// Where the client connects.
#[derive(Debug, Clone)]
pub enum Target {
    /// A Streamable HTTP endpoint.
    Http(String),
    /// A program and its arguments, started without a shell.
    Stdio(String, Vec<String>),
}

/// The command line of a benchmark client.
#[derive(Debug, Clone)]
pub struct Args {
    pub target: Target,
    pub n: u64,
    pub warmup: u64,
    pub time_limit: Duration,
    /// Calls in flight at once (1: one at a time).
    pub concurrency: usize,
}

impl Args {
    /// Parses `TRANSPORT TARGET N [WARMUP] [TIME_LIMIT_S]` (after the program name).
    pub fn parse(args: &[String]) -> Result<Args, String> {
        let usage = "usage: CLIENT http|stdio URL|COMMAND N [WARMUP] [TIME_LIMIT_S] [CONCURRENCY]";
        let (transport, target, n) = match args {
            [t, target, n, ..] => (t.as_str(), target.as_str(), n),
            _ => return Err(usage.into()),
        };
        let number = |s: &str, what: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("{what} must be a whole number, not {s:?}; {usage}"))
        };
        let target = match transport {
            "http" => Target::Http(target.to_owned()),
            "stdio" => {
                let mut words = target.split_whitespace().map(str::to_owned);
                let program = words.next().ok_or("the stdio command is empty")?;
                Target::Stdio(program, words.collect())
            }
            other => return Err(format!("unknown transport {other:?}; {usage}")),
        };
        Ok(Args {
            target,
            n: number(n, "N")?,
            warmup: args.get(3).map_or(Ok(200), |s| number(s, "WARMUP"))?,
            time_limit: Duration::from_secs(
                args.get(4).map_or(Ok(120), |s| number(s, "TIME_LIMIT_S"))?,
            ),
            concurrency: match args.get(5).map_or(Ok(1), |s| number(s, "CONCURRENCY"))? {
                0 => return Err(format!("CONCURRENCY must be at least 1; {usage}")),
                c => usize::try_from(c).map_err(|_| "CONCURRENCY is too large")?,
            },
        })
    }

    /// The command line of this process, parsed, or the usage and exit code 2.
    pub fn from_env() -> Args {
        let args: Vec<String> = std::env::args().skip(1).collect();
        match Args::parse(&args) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    }

    pub fn transport(&self) -> &'static str {
        match self.target {
            Target::Http(_) => "http",
            Target::Stdio(..) => "stdio",
        }
    }
}

/// The arguments of every call.
pub fn arguments() -> serde_json::Value {
    serde_json::json!({ "text": TEXT })
}

/// Checks a `tools/call` result (as JSON): not an error, first text block is [`TEXT`].
pub fn check_result(result: &serde_json::Value) -> Result<(), String> {
    if result["isError"] == serde_json::Value::Bool(true) {
        return Err(format!("the tool failed: {result}"));
    }
    match result["content"][0]["text"].as_str() {
        Some(TEXT) => Ok(()),
        _ => Err(format!("unexpected result: {result}")),
    }
}

/// The timed loop's clock: counts calls and stops at N or at the time limit.
#[derive(Debug)]
pub struct Timed {
    start: Instant,
    cpu_start: Duration,
    limit: Duration,
    pub done: u64,
}

impl Timed {
    pub fn start(limit: Duration) -> Timed {
        Timed {
            start: Instant::now(),
            cpu_start: cpu_time(),
            limit,
            done: 0,
        }
    }

    /// The CPU time (user and system, every thread) the process used since the start.
    pub fn cpu(&self) -> Duration {
        cpu_time().saturating_sub(self.cpu_start)
    }

    /// Whether another call is to be made (fewer than `n` done and time left).
    pub fn more(&self, n: u64) -> bool {
        self.done < n && self.start.elapsed() < self.limit
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The window of a concurrent run of `n` calls timed by this clock (the same start and
    /// time limit).
    pub fn window(&self, n: u64) -> Window {
        Window {
            start: self.start,
            limit: self.limit,
            n,
            claimed: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }
}

/// The calls of a concurrent run, shared by its workers: each worker asks for a call with
/// [`Window::claim`], makes it, reports it with [`Window::done`], and asks again. It hands out
/// `n` calls in all, none once the time limit has passed.
#[derive(Debug)]
pub struct Window {
    start: Instant,
    limit: Duration,
    n: u64,
    claimed: AtomicU64,
    done: AtomicU64,
}

impl Window {
    /// A window of `n` calls with no time limit (the warm-up).
    pub fn untimed(n: u64) -> Window {
        Window {
            start: Instant::now(),
            limit: Duration::MAX,
            n,
            claimed: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }

    /// Whether the asking worker is to make another call (and counts it as started).
    pub fn claim(&self) -> bool {
        self.start.elapsed() < self.limit && self.claimed.fetch_add(1, Ordering::Relaxed) < self.n
    }

    /// One call claimed has been made and its answer checked.
    pub fn done(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// How many calls have been made.
    pub fn calls_done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
}

/// The CPU time (user and system) of this process's threads, the ones that ended included,
/// from `/proc/self/stat` (in clock ticks of 10 ms: Linux's `USER_HZ` is 100). Its children
/// (a stdio server) are not counted.
pub fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // The fields after the command name, which ends with the last ')': state is
            // field 3, utime 14, stime 15.
            let rest = s.get(s.rfind(')')? + 1..)?.to_owned();
            let fields: Vec<u64> = rest
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|f| f.parse().ok())
                .collect();
            Some(fields.iter().sum::<u64>())
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`), in KiB.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Prints the result line the script reads:
/// `client=C transport=T version=V n=N secs=S calls_per_s=R cpu_ms=M rss_kib=K complete=yes|no
/// concurrency=C` (`cpu_ms`: the client process's CPU time during the timed calls).
pub fn report(client: &str, args: &Args, version: &str, timed: &Timed) {
    let secs = timed.elapsed().as_secs_f64();
    let rate = if secs > 0.0 {
        timed.done as f64 / secs
    } else {
        0.0
    };
    println!(
        "client={client} transport={} version={version} n={} secs={secs:.3} calls_per_s={rate:.1} cpu_ms={} rss_kib={} complete={} concurrency={}",
        args.transport(),
        timed.done,
        timed.cpu().as_millis(),
        peak_rss_kib(),
        if timed.done == args.n { "yes" } else { "no" },
        args.concurrency,
    );
}

/// Ends the process with `message` on stderr and exit code 1.
pub fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
