//! One stdio MCP server per channel, as both drivers keep it: the core's [`StdioBinding`], the
//! child's generation, frames waiting for a child, and restarts with backoff. The runtime only
//! spawns the child (argv, no shell), pumps its pipes and kills it ([`StdioChild`]).

use std::time::{Duration, Instant};

use mcpwire_core::backoff::{Backoff, Jitter};
use mcpwire_core::tunnel::stdio::{StdioBinding, StdioConfig};

use crate::tunnel::log::{Level, Logger};

/// The longest stderr line logged (the rest of the line is dropped).
pub const MAX_STDERR_LINE: usize = 4096;
/// A child that ran this long before exiting restarts without a grown backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(30);

/// A running child, as the runtime holds it.
pub trait StdioChild {
    /// Hands a frame to the child's stdin writer (lost if the child is gone: its exit is
    /// reported by the stdout reader).
    fn send(&self, frame: Vec<u8>);
    /// Kills the child; its stdout reader then reports its exit.
    fn kill(&mut self);
    /// Kills the child and lets the runtime reap it.
    fn reap(self);
}

/// What the runtime needs to start a channel's child.
pub struct StdioSpawn<'a> {
    /// The program (argv\[0\]).
    pub program: &'a str,
    /// The rest of argv.
    pub args: &'a [String],
    /// The channel name (for thread names and logs).
    pub name: &'a str,
    /// The channel's index, for [`super::Completion::StdioOut`] and
    /// [`super::Completion::StdioExit`].
    pub chan: usize,
    /// The child's generation, for the same completions.
    pub generation: u64,
}

struct Running<C> {
    generation: u64,
    child: C,
    started: Instant,
}

/// The child process behind one stdio channel.
pub struct StdioChannel<C> {
    /// The channel name.
    pub name: String,
    index: usize,
    argv: Vec<String>,
    /// The core's binding for this child.
    pub binding: StdioBinding,
    running: Option<Running<C>>,
    generation: u64,
    /// Frames written while no child runs (sent to the next one).
    pending: Vec<Vec<u8>>,
    /// When the next start is due (after a crash or a failed start).
    pub restart_at: Option<Instant>,
    /// The binding asked for a restart: the next exit starts a replacement at once.
    restarting: bool,
    attempts: u32,
    backoff: Backoff,
    jitter: Jitter,
}

impl<C: StdioChild> StdioChannel<C> {
    /// A channel whose child is not started yet.
    pub fn new(
        name: String,
        index: usize,
        argv: Vec<String>,
        config: StdioConfig,
        seed: u64,
    ) -> Self {
        StdioChannel {
            name,
            index,
            argv,
            binding: StdioBinding::new(config),
            running: None,
            generation: 0,
            pending: Vec::new(),
            restart_at: None,
            restarting: false,
            attempts: 0,
            backoff: Backoff {
                initial: Duration::from_millis(200),
                max: Duration::from_secs(30),
                multiplier: 2,
            },
            jitter: Jitter::new(seed),
        }
    }

    /// Starts the child with `spawn`; on failure the caller fails the waiting commands and
    /// retries later.
    pub fn start(
        &mut self,
        spawn: impl FnOnce(StdioSpawn<'_>) -> std::io::Result<C>,
    ) -> std::io::Result<()> {
        self.restart_at = None;
        let (program, args) = self
            .argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("empty command"))?;
        let generation = self.generation + 1;
        let child = spawn(StdioSpawn {
            program,
            args,
            name: &self.name,
            chan: self.index,
            generation,
        })?;
        self.generation = generation;
        for frame in self.pending.drain(..) {
            child.send(frame);
        }
        self.running = Some(Running {
            generation,
            child,
            started: Instant::now(),
        });
        Ok(())
    }

    /// Writes a frame to the child, or keeps it for the next child while none runs.
    pub fn write(&mut self, frame: Vec<u8>) {
        match &self.running {
            Some(r) => r.child.send(frame),
            None => self.pending.push(frame),
        }
    }

    /// The binding asked for a restart: kill the child; its exit starts the replacement.
    /// False when no child runs (the caller starts the replacement at once).
    pub fn request_restart(&mut self) -> bool {
        match &mut self.running {
            Some(r) => {
                self.restarting = true;
                r.child.kill();
                true
            }
            None => false,
        }
    }

    /// Whether `generation` is the running child's.
    pub fn is_current(&self, generation: u64) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| r.generation == generation)
    }

    /// The running child's stdout closed: reaps it. Returns true when this was a requested
    /// restart (start the replacement now), false for a crash (restart later, with backoff).
    pub fn exited(&mut self, now: Instant) -> bool {
        if let Some(r) = self.running.take() {
            if now.duration_since(r.started) >= HEALTHY_RUN {
                self.attempts = 0;
            }
            r.child.reap();
        }
        if std::mem::take(&mut self.restarting) {
            return true;
        }
        self.schedule_restart(now);
        false
    }

    /// A start failed or the child crashed: forget frames meant for it, retry after a backoff.
    pub fn schedule_restart(&mut self, now: Instant) {
        self.pending.clear();
        self.attempts = self.attempts.saturating_add(1);
        let delay = self.backoff.delay(self.attempts, self.jitter.next_u64());
        self.restart_at = Some(now.checked_add(delay).unwrap_or(now));
    }

    /// Stops the child (shutdown).
    pub fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.child.reap();
        }
    }
}

/// Logs one line a child wrote on stdout or stderr (trailing white space trimmed, blank lines
/// skipped; the logger redacts): `message` with `field` and the line.
pub fn log_output_line(log: &Logger, message: &str, field: (&str, &str), line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    if !text.is_empty() {
        let (name, value) = field;
        log.log(Level::Info, message, &[(name, &value), ("line", &text)]);
    }
}
