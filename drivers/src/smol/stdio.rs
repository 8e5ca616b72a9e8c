//! One stdio MCP server per channel on async-process: the child, its pipes, its restarts.
//!
//! The core's [`StdioBinding`] decides what to write and what the child's frames mean; this
//! module only starts the child (argv, no shell), pumps bytes between its pipes and the loop
//! with three tasks (stdin writer, stdout reader, stderr logger), copies stderr to the log
//! (redacted by the logger), and restarts the child with backoff after a crash. Dropping a
//! child's tasks and handle kills it (`kill_on_drop`); async-process reaps it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire_core::backoff::{Backoff, Jitter};
use mcpwire_core::tunnel::stdio::{StdioBinding, StdioConfig};
use smol::channel::{self, Sender};
use smol::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use smol::process::{Child, Command, Stdio};
use smol::Task;

use super::Completion;
use crate::tunnel_run::log::{Level, Logger};

/// The longest stderr line logged (the rest of the line is dropped).
const MAX_STDERR_LINE: usize = 4096;
/// A child that ran this long before exiting restarts without a grown backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(30);

struct Running {
    generation: u64,
    child: Child,
    stdin: Sender<Vec<u8>>,
    started: Instant,
    _tasks: Vec<Task<()>>,
}

/// The child process behind one stdio channel.
pub struct StdioChannel {
    /// The channel name.
    pub name: String,
    index: usize,
    argv: Vec<String>,
    /// The core's binding for this child.
    pub binding: StdioBinding,
    running: Option<Running>,
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

impl StdioChannel {
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

    /// Starts the child; on failure the caller fails the waiting commands and retries later.
    pub fn start(&mut self, tx: &Sender<Completion>, log: &Arc<Logger>) -> std::io::Result<()> {
        self.restart_at = None;
        let (program, args) = self
            .argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("empty command"))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        self.generation += 1;
        let generation = self.generation;
        let index = self.index;
        let (stdin_tx, stdin_rx) = channel::unbounded::<Vec<u8>>();
        let mut tasks = Vec::new();
        if let Some(mut stdin) = child.stdin.take() {
            tasks.push(smol::spawn(async move {
                while let Ok(frame) = stdin_rx.recv().await {
                    if stdin.write_all(&frame).await.is_err() || stdin.flush().await.is_err() {
                        return; // the child is gone; the stdout reader reports its exit
                    }
                }
            }));
        }
        if let Some(mut stdout) = child.stdout.take() {
            let tx = tx.clone();
            tasks.push(smol::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match stdout.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let bytes = buf.get(..n).unwrap_or_default().to_vec();
                            let c = Completion::StdioOut {
                                chan: index,
                                generation,
                                bytes,
                            };
                            if tx.send(c).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = tx
                    .send(Completion::StdioExit {
                        chan: index,
                        generation,
                    })
                    .await;
            }));
        }
        if let Some(stderr) = child.stderr.take() {
            let log = Arc::clone(log);
            let name = self.name.clone();
            tasks.push(smol::spawn(async move {
                stderr_loop(stderr, &log, &name).await;
            }));
        }
        for frame in self.pending.drain(..) {
            let _ = stdin_tx.try_send(frame);
        }
        self.running = Some(Running {
            generation,
            child,
            stdin: stdin_tx,
            started: Instant::now(),
            _tasks: tasks,
        });
        Ok(())
    }

    /// Writes a frame to the child, or keeps it for the next child while none runs.
    pub fn write(&mut self, frame: Vec<u8>) {
        match &self.running {
            Some(r) => {
                let _ = r.stdin.try_send(frame);
            }
            None => self.pending.push(frame),
        }
    }

    /// The binding asked for a restart: kill the child; its exit starts the replacement.
    /// False when no child runs (the caller starts the replacement at once).
    pub fn request_restart(&mut self) -> bool {
        match &mut self.running {
            Some(r) => {
                self.restarting = true;
                let _ = r.child.kill();
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

    /// The running child's stdout closed: kills it (async-process reaps it). Returns true when
    /// this was a requested restart (start the replacement now), false for a crash (restart
    /// later, with backoff).
    pub fn exited(&mut self, now: Instant) -> bool {
        if let Some(mut r) = self.running.take() {
            let _ = r.child.kill();
            if now.duration_since(r.started) >= HEALTHY_RUN {
                self.attempts = 0;
            }
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
        if let Some(mut r) = self.running.take() {
            let _ = r.child.kill();
        }
    }
}

async fn stderr_loop(stderr: impl smol::io::AsyncRead + Unpin, log: &Logger, channel: &str) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(MAX_STDERR_LINE as u64);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            // Over-long line: drop the rest of it.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                let mut chunk = (&mut reader).take(MAX_STDERR_LINE as u64);
                match chunk.read_until(b'\n', &mut rest).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) if rest.ends_with(b"\n") => break,
                    Ok(_) => {}
                }
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if !text.is_empty() {
            log.log(
                Level::Info,
                "stdio server stderr",
                &[("channel", &channel), ("line", &text)],
            );
        }
    }
}
