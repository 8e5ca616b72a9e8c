//! The restart policy of one stdio MCP server's child process: which child is current (its
//! generation), when a crashed or unstartable child is started again, and when a restart the
//! binding asked for (an `initialize` deadline, [`super::stdio::StdioOutput::Restart`]) starts its
//! replacement.
//!
//! The rules:
//! - A child that exits on its own, or cannot be started, is started again after a backoff: the
//!   `n`-th restart in a row waits a jittered share of `min(200 ms * 2^(n-1), 30 s)`
//!   ([`RESTART_BACKOFF`], equal jitter as in [`crate::backoff`]).
//! - A child that ran at least [`HEALTHY_RUN`] (30 s) before it exited was healthy: the backoff
//!   starts over (its restart waits the first delay again).
//! - A requested restart kills the running child; its exit starts the replacement at once, with
//!   no backoff. With no child running, the replacement starts at once.
//! - Each start attempt gets a new generation; only the current child's output and exit count.
//!
//! [`Supervisor`] is sans-IO: it reads no clock (every input takes `now`) and draws its jitter
//! from a seed the caller gives. [`super::Tunnel`] owns one per stdio channel.

use crate::backoff::{Backoff, Jitter};
use crate::time::{Duration, Instant};

/// The backoff between restarts of a stdio child: 200 ms, doubling, at most 30 s.
pub const RESTART_BACKOFF: Backoff = Backoff {
    initial: Duration::from_millis(200),
    max: Duration::from_secs(30),
    multiplier: 2,
};

/// A child that ran this long before exiting restarts without a grown backoff.
pub const HEALTHY_RUN: Duration = Duration::from_secs(30);

/// What a child's exit means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// A restart was requested: start the replacement now.
    Replace,
    /// The child died on its own: a restart is scheduled ([`Supervisor::restart_at`]).
    Crashed,
    /// Not the current child (an earlier generation, or no child): nothing to do.
    Stale,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    generation: u64,
    started: Instant,
}

/// The restart policy of one stdio channel's child. See the [module documentation](self).
#[derive(Debug)]
pub struct Supervisor {
    backoff: Backoff,
    jitter: Jitter,
    /// Restarts in a row since the last healthy run.
    attempts: u32,
    /// The last generation handed out.
    generation: u64,
    /// The start attempt not yet reported (spawned or failed).
    starting: Option<u64>,
    running: Option<Run>,
    /// A restart was requested: the next exit of the running child starts a replacement.
    restarting: bool,
    restart_at: Option<Instant>,
}

impl Supervisor {
    /// A supervisor whose child is not started yet; `seed` seeds its jitter.
    pub fn new(seed: u64) -> Self {
        Supervisor {
            backoff: RESTART_BACKOFF,
            jitter: Jitter::new(seed),
            attempts: 0,
            generation: 0,
            starting: None,
            running: None,
            restarting: false,
            restart_at: None,
        }
    }

    /// A start attempt begins: the generation of the child to start. A scheduled restart is
    /// taken by it.
    pub fn begin_start(&mut self) -> u64 {
        self.restart_at = None;
        self.generation += 1;
        self.starting = Some(self.generation);
        self.generation
    }

    /// Whether a start attempt is under way (begun, not yet reported).
    pub fn is_starting(&self) -> bool {
        self.starting.is_some()
    }

    /// The child of `generation` started at `now`; false when that is not the attempt under way
    /// (a late report: nothing changes).
    pub fn started(&mut self, now: Instant, generation: u64) -> bool {
        if self.starting != Some(generation) {
            return false;
        }
        self.starting = None;
        self.running = Some(Run {
            generation,
            started: now,
        });
        true
    }

    /// The child of `generation` could not be started: a restart is scheduled after a backoff.
    /// False when that is not the attempt under way (nothing changes).
    pub fn start_failed(&mut self, now: Instant, generation: u64) -> bool {
        if self.starting != Some(generation) {
            return false;
        }
        self.starting = None;
        self.schedule_restart(now);
        true
    }

    /// A restart is requested: the generation of the running child to kill (its exit then
    /// starts the replacement), or `None` when no child runs.
    pub fn request_restart(&mut self) -> Option<u64> {
        let run = self.running?;
        self.restarting = true;
        Some(run.generation)
    }

    /// The running child's generation, if one runs.
    pub fn current(&self) -> Option<u64> {
        self.running.map(|r| r.generation)
    }

    /// Whether `generation` was ever handed out.
    pub fn issued(&self, generation: u64) -> bool {
        generation >= 1 && generation <= self.generation
    }

    /// The child of `generation` exited (its stdout closed) at `now`.
    pub fn exited(&mut self, now: Instant, generation: u64) -> Exit {
        let Some(run) = self.running.filter(|r| r.generation == generation) else {
            return Exit::Stale;
        };
        self.running = None;
        if now.saturating_duration_since(run.started) >= HEALTHY_RUN {
            self.attempts = 0;
        }
        if std::mem::take(&mut self.restarting) {
            return Exit::Replace;
        }
        self.schedule_restart(now);
        Exit::Crashed
    }

    /// When the next start is due (after a crash or a failed start), if one is scheduled.
    pub fn restart_at(&self) -> Option<Instant> {
        self.restart_at
    }

    /// Whether a scheduled start is due at `now`.
    pub fn restart_due(&self, now: Instant) -> bool {
        self.restart_at.is_some_and(|t| t <= now)
    }

    fn schedule_restart(&mut self, now: Instant) {
        self.attempts = self.attempts.saturating_add(1);
        let delay = self.backoff.delay(self.attempts, self.jitter.next_u64());
        self.restart_at = Some(now.checked_add(delay).unwrap_or(now));
    }
}
