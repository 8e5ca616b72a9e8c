//! A stdio MCP server's child on std threads: spawning it (argv, no shell), pumping bytes
//! between its pipes and the driver loop, copying its stderr to the log (redacted), killing
//! and reaping it. The channel's bookkeeping (generations, pending frames, restarts with
//! backoff) is the core's ([`mcpwire_core::tunnel::Tunnel`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Sender, SyncSender};
use std::sync::Arc;
use std::thread;

use super::Completion;
use crate::tunnel::driver_core::stdio::{
    self as shared, log_output_line, StdioSpawn, MAX_STDERR_LINE,
};
use crate::tunnel::log::Logger;

/// A running child: its handle and its stdin writer thread's queue.
pub struct StdioChild {
    child: Child,
    stdin: Sender<Vec<u8>>,
}

impl StdioChild {
    /// Starts the child with three threads: stdin writer, stdout reader (reporting on `tx`),
    /// stderr logger.
    pub fn spawn(
        spawn: &StdioSpawn<'_>,
        tx: &SyncSender<Completion>,
        log: &Arc<Logger>,
    ) -> std::io::Result<Self> {
        let mut child = Command::new(spawn.program)
            .args(spawn.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (id, name) = (spawn.child, spawn.name);
        let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>();
        if let Some(stdin) = child.stdin.take() {
            thread_named(&format!("stdio-in-{name}"), move || {
                write_loop(stdin, &stdin_rx)
            });
        }
        if let Some(mut stdout) = child.stdout.take() {
            let tx = tx.clone();
            thread_named(&format!("stdio-out-{name}"), move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match stdout.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let bytes = buf.get(..n).unwrap_or_default().to_vec();
                            let c = Completion::StdioOut { child: id, bytes };
                            if tx.send(c).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = tx.send(Completion::StdioExit { child: id });
            });
        }
        if let Some(stderr) = child.stderr.take() {
            let log = Arc::clone(log);
            let name = name.to_owned();
            thread_named(&format!("stdio-err-{name}"), move || {
                stderr_loop(stderr, &log, &name)
            });
        }
        Ok(StdioChild {
            child,
            stdin: stdin_tx,
        })
    }
}

impl shared::StdioChild for StdioChild {
    fn send(&self, frame: Vec<u8>) {
        let _ = self.stdin.send(frame);
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
    }

    fn reap(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn thread_named(name: &str, f: impl FnOnce() + Send + 'static) {
    let _ = thread::Builder::new().name(name.to_owned()).spawn(f);
}

fn write_loop(mut stdin: ChildStdin, frames: &mpsc::Receiver<Vec<u8>>) {
    while let Ok(frame) = frames.recv() {
        if stdin
            .write_all(&frame)
            .and_then(|()| stdin.flush())
            .is_err()
        {
            return; // the child is gone; its exit is reported by the stdout reader
        }
    }
}

/// Calls `each` with every line of `pipe`, cut at `max` bytes (the rest of an over-long line
/// is dropped), until it ends or fails.
pub fn for_each_line(pipe: impl Read, max: usize, mut each: impl FnMut(&[u8])) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(max as u64);
        match limited.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            // Over-long line: drop the rest of it.
            let _ = reader.skip_until(b'\n');
        }
        each(&line);
    }
}

fn stderr_loop(stderr: impl Read, log: &Logger, channel: &str) {
    for_each_line(stderr, MAX_STDERR_LINE, |line| {
        log_output_line(log, "stdio server stderr", ("channel", channel), line);
    });
}
