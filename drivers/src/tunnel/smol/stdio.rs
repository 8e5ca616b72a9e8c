//! A stdio MCP server's child on async-process: spawning it (argv, no shell) and pumping bytes
//! between its pipes and the loop with three tasks (stdin writer, stdout reader, stderr
//! logger; the logger redacts). Dropping a child's tasks and handle kills it
//! (`kill_on_drop`); async-process reaps it. The channel's bookkeeping (generations, pending
//! frames, restarts with backoff) is the core's ([`mcpwire_core::tunnel::Tunnel`]).

use std::sync::Arc;

use smol::channel::{self, Sender};
use smol::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use smol::process::{Child, Command, Stdio};
use smol::Task;

use super::Completion;
use crate::tunnel::driver_core::stdio::{
    self as shared, log_output_line, StdioSpawn, MAX_STDERR_LINE,
};
use crate::tunnel::log::Logger;

/// A running child: its handle, its stdin writer task's queue, and its pipe tasks.
pub struct StdioChild {
    child: Child,
    stdin: Sender<Vec<u8>>,
    _tasks: Vec<Task<()>>,
}

impl StdioChild {
    /// Starts the child with three tasks: stdin writer, stdout reader (reporting on `tx`),
    /// stderr logger.
    pub fn spawn(
        spawn: &StdioSpawn<'_>,
        tx: &Sender<Completion>,
        log: &Arc<Logger>,
    ) -> std::io::Result<Self> {
        let mut child = Command::new(spawn.program)
            .args(spawn.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let id = spawn.child;
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
                            let c = Completion::StdioOut { child: id, bytes };
                            if tx.send(c).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = tx.send(Completion::StdioExit { child: id }).await;
            }));
        }
        if let Some(stderr) = child.stderr.take() {
            let log = Arc::clone(log);
            let name = spawn.name.to_owned();
            tasks.push(smol::spawn(async move {
                for_each_line(stderr, MAX_STDERR_LINE, |line| {
                    log_output_line(&log, "stdio server stderr", ("channel", &name), line);
                })
                .await;
            }));
        }
        Ok(StdioChild {
            child,
            stdin: stdin_tx,
            _tasks: tasks,
        })
    }
}

impl shared::StdioChild for StdioChild {
    fn send(&self, frame: Vec<u8>) {
        let _ = self.stdin.try_send(frame);
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
    }

    fn reap(mut self) {
        let _ = self.child.kill();
    }
}

/// Calls `each` with every line of `pipe`, cut at `max` bytes (the rest of an over-long line
/// is dropped), until it ends or fails.
pub async fn for_each_line(pipe: impl AsyncRead + Unpin, max: usize, mut each: impl FnMut(&[u8])) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut reader).take(max as u64);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            // Over-long line: drop the rest of it.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                let mut chunk = (&mut reader).take(max as u64);
                match chunk.read_until(b'\n', &mut rest).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) if rest.ends_with(b"\n") => break,
                    Ok(_) => {}
                }
            }
        }
        each(&line);
    }
}
