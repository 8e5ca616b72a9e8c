//! The blocking client's end of a stdio server's stdin and stdout.
//!
//! - [`Polled`] (unix): the loop's own thread does everything. Both pipes are non-blocking; the
//!   loop waits in `poll(2)` for the child's stdout, for room in its stdin while bytes wait to be
//!   written, and for a wake-up socket that a [`Waker`] (a `Canceller`) writes to. A request and
//!   its answer cost no hand-off between threads.
//! - [`Threads`] (everywhere): one thread writes stdin and one reads stdout, reporting what it
//!   reads over the loop's channel. Used where `poll(2)` is missing, and kept testable on unix through
//!   [`super::McpClient::connect_stdio_with_pipe_threads`].
//!
//! Either way a child that stops reading its stdin never blocks the loop: its timers still fire.

use std::io::{Read, Write};
use std::process::{ChildStdin, ChildStdout};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
#[cfg(unix)]
use std::sync::Arc;

use super::{spawn, Input};

/// Bytes read from stdout at once.
const CHUNK: usize = 64 * 1024;

/// How the loop talks to the child's stdin and stdout.
pub(super) enum Pipes {
    #[cfg(unix)]
    Polled(Polled),
    Threads(Threads),
}

impl Pipes {
    /// Sends one message line (the newline is added here).
    pub(super) fn send(&mut self, line: String) {
        match self {
            #[cfg(unix)]
            Pipes::Polled(p) => p.send(line),
            Pipes::Threads(t) => t.send(line),
        }
    }

    /// Closes the child's stdin once what was sent is written (as far as it goes without
    /// blocking, for [`Polled`]).
    pub(super) fn close_stdin(&mut self) {
        match self {
            #[cfg(unix)]
            Pipes::Polled(p) => p.close_stdin(),
            Pipes::Threads(t) => t.stdin = None,
        }
    }
}

/// Wakes a loop waiting in [`Polled::wait`] (nothing to do for [`Threads`]: the loop waits on
/// its channel there).
#[derive(Clone, Debug, Default)]
pub(super) struct Waker {
    #[cfg(unix)]
    socket: Option<Arc<std::os::unix::net::UnixStream>>,
}

impl Waker {
    /// Call after sending to the loop's channel.
    pub(super) fn wake(&self) {
        #[cfg(unix)]
        if let Some(socket) = &self.socket {
            // Full means a wake-up is pending already.
            let _ = (&**socket).write(&[1]);
        }
    }
}

/// A writer and a reader thread (see the module docs).
pub(super) struct Threads {
    stdin: Option<Sender<String>>,
}

impl Threads {
    pub(super) fn start(
        stdin: ChildStdin,
        stdout: ChildStdout,
        tx: SyncSender<Input>,
    ) -> std::io::Result<Threads> {
        let (stdin_tx, stdin_rx) = mpsc::channel::<String>();
        spawn("mcp-stdio-in", move || write_lines(stdin, &stdin_rx))?;
        spawn("mcp-stdio-out", move || read_stdout(stdout, &tx))?;
        Ok(Threads {
            stdin: Some(stdin_tx),
        })
    }

    fn send(&mut self, line: String) {
        if let Some(stdin) = &self.stdin {
            // A closed pipe shows up as the stdout reader's end.
            let _ = stdin.send(line);
        }
    }
}

fn write_lines(mut stdin: ChildStdin, lines: &Receiver<String>) {
    while let Ok(mut line) = lines.recv() {
        line.push('\n');
        if stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .is_err()
        {
            return; // the child is gone; the stdout reader reports it
        }
    }
}

/// Reports what the child writes to its stdout (the core cuts the lines), then its end.
fn read_stdout(mut stdout: impl Read, tx: &SyncSender<Input>) {
    let mut chunk = vec![0; CHUNK];
    loop {
        let n = match stdout.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let bytes = chunk.get(..n).unwrap_or_default().to_vec();
        if tx.send(Input::Stdout(bytes)).is_err() {
            return; // the client is gone
        }
    }
    let _ = tx.send(Input::StdioClosed);
}

#[cfg(unix)]
pub(super) use polled::Polled;

#[cfg(unix)]
mod polled {
    use std::io::{ErrorKind, Read, Write};
    use std::os::unix::net::UnixStream;
    use std::process::{ChildStdin, ChildStdout};
    use std::sync::Arc;
    use std::time::Duration;

    use rustix::event::{poll, PollFd, PollFlags, Timespec};

    use super::{Waker, CHUNK};

    /// How many chunks one wake-up reads at most before the loop looks at the clock again.
    const READS_PER_WAKE: usize = 16;

    /// The pipes driven by the loop's thread with `poll(2)` (see the module docs).
    pub(crate) struct Polled {
        stdin: Option<ChildStdin>,
        /// Bytes for stdin not written yet, from `written` on.
        unsent: Vec<u8>,
        written: usize,
        stdout: Option<ChildStdout>,
        /// What the last wait read from stdout, for the loop to hand to the core.
        pub(crate) read: Vec<u8>,
        chunk: Box<[u8]>,
        /// Readable when a [`Waker`] wrote to its end.
        wake: UnixStream,
    }

    impl Polled {
        /// Makes both pipes non-blocking. On an error they are handed back, for [`super::Threads`].
        pub(crate) fn start(
            stdin: ChildStdin,
            stdout: ChildStdout,
        ) -> Result<(Polled, Waker), (ChildStdin, ChildStdout)> {
            let set_up = || -> std::io::Result<(UnixStream, UnixStream)> {
                rustix::io::ioctl_fionbio(&stdin, true)?;
                rustix::io::ioctl_fionbio(&stdout, true)?;
                let (wake, waker) = UnixStream::pair()?;
                wake.set_nonblocking(true)?;
                waker.set_nonblocking(true)?;
                Ok((wake, waker))
            };
            let Ok((wake, waker)) = set_up() else {
                // Blocking again for the threads (best effort: they only block longer).
                let _ = rustix::io::ioctl_fionbio(&stdin, false);
                let _ = rustix::io::ioctl_fionbio(&stdout, false);
                return Err((stdin, stdout));
            };
            let polled = Polled {
                stdin: Some(stdin),
                unsent: Vec::new(),
                written: 0,
                stdout: Some(stdout),
                read: Vec::new(),
                chunk: vec![0; CHUNK].into_boxed_slice(),
                wake,
            };
            let waker = Waker {
                socket: Some(Arc::new(waker)),
            };
            Ok((polled, waker))
        }

        pub(crate) fn send(&mut self, line: String) {
            if self.stdin.is_none() {
                return; // the child is gone; its stdout's end reports it
            }
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            if self.unsent.is_empty() {
                self.unsent = bytes;
                self.written = 0;
            } else {
                self.unsent.extend_from_slice(&bytes);
            }
            self.flush();
        }

        /// Writes what waits, as far as the pipe takes it now.
        fn flush(&mut self) {
            let Some(stdin) = &mut self.stdin else {
                return;
            };
            while self.written < self.unsent.len() {
                match stdin.write(&self.unsent[self.written..]) {
                    Ok(0) => break,
                    Ok(n) => self.written += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        // The child closed its stdin: nothing more goes there.
                        self.stdin = None;
                        break;
                    }
                }
            }
            if self.written >= self.unsent.len() || self.stdin.is_none() {
                self.unsent.clear();
                self.written = 0;
            }
        }

        pub(crate) fn close_stdin(&mut self) {
            self.flush();
            self.stdin = None;
            self.unsent = Vec::new();
            self.written = 0;
        }

        /// Waits up to `timeout` for the child's stdout, for room in its stdin (while bytes
        /// wait) or for a [`Waker`]; writes what it can and appends what stdout gave to
        /// [`Polled::read`]. `true` once stdout ended (reported once).
        pub(crate) fn wait(&mut self, timeout: Duration) -> bool {
            let pending = self.stdin.is_some() && self.written < self.unsent.len();
            let (woke, readable, writable) = {
                let mut fds = Vec::with_capacity(3);
                fds.push(PollFd::new(&self.wake, PollFlags::IN));
                // Where each pipe sits in `fds`, when it is polled at all.
                let out_at = self.stdout.as_ref().map(|stdout| {
                    fds.push(PollFd::new(stdout, PollFlags::IN));
                    fds.len() - 1
                });
                let in_at = self.stdin.as_ref().filter(|_| pending).map(|stdin| {
                    fds.push(PollFd::new(stdin, PollFlags::OUT));
                    fds.len() - 1
                });
                // `timeout` is at most the loop's longest sleep; a bigger one waits until woken.
                let limit = Timespec::try_from(timeout).ok();
                if poll(&mut fds, limit.as_ref()).is_err() {
                    return false; // interrupted: the loop looks at the clock and comes back
                }
                let ready = |at: Option<usize>| {
                    at.and_then(|i| fds.get(i))
                        .is_some_and(|fd| !fd.revents().is_empty())
                };
                (ready(Some(0)), ready(out_at), ready(in_at))
            };
            if woke {
                let mut sink = [0u8; 64];
                while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
            }
            if writable {
                self.flush();
            }
            readable && self.read_stdout()
        }

        /// Reads what stdout has (a bounded amount) into [`Polled::read`]; `true` when it ended.
        fn read_stdout(&mut self) -> bool {
            let Polled {
                stdout,
                read,
                chunk,
                ..
            } = self;
            for _ in 0..READS_PER_WAKE {
                let Some(out) = stdout else {
                    return false;
                };
                match out.read(chunk) {
                    Ok(0) => {}
                    Ok(n) => {
                        read.extend_from_slice(chunk.get(..n).unwrap_or_default());
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                    Err(_) => {}
                }
                // The end of stdout (or an error reading it, which ends it too).
                *stdout = None;
                return true;
            }
            false
        }
    }
}
