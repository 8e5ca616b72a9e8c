//! The blocking client's ends of a stdio server's stdin and stdout, in two halves: the writer
//! ([`Stdin`], used by whoever holds the session: a request line goes out on the caller's own
//! thread) and the reader ([`Stdout`], the loop's).
//!
//! - **Polled** (unix): both pipes are non-blocking. A line is written as far as the pipe takes
//!   it at once; the rest waits in [`Stdin`] and the loop writes it when `poll(2)` says there is
//!   room. The loop waits in `poll(2)` for the child's stdout, for that room, and for a wake-up
//!   socket a [`Kicker`] writes to. An answer costs no hand-off to another thread before the
//!   loop has it.
//! - **Threads** (everywhere): one thread writes stdin and one reads stdout, reporting what it
//!   reads over the loop's channel. Used where `poll(2)` is missing, and kept testable on unix
//!   through [`super::McpClient::connect_stdio_with_pipe_threads`].
//!
//! Either way a child that stops reading its stdin never blocks anyone: the lines wait.

use std::io::{Read, Write};
use std::process::{ChildStdin, ChildStdout};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
#[cfg(unix)]
use std::sync::Arc;

use super::{spawn, Input};

/// Bytes read from stdout at once.
const CHUNK: usize = 64 * 1024;

/// The writing half (see the module docs).
pub(super) enum Stdin {
    #[cfg(unix)]
    Polled(polled::Writer),
    Threads(Option<Sender<String>>),
}

impl Stdin {
    /// Sends one message line (the newline is added here).
    pub(super) fn send(&mut self, line: String) {
        match self {
            #[cfg(unix)]
            Stdin::Polled(p) => p.send(line),
            Stdin::Threads(Some(t)) => {
                // A closed pipe shows up as the stdout reader's end.
                let _ = t.send(line);
            }
            Stdin::Threads(None) => {}
        }
    }

    /// Writes what waits, as far as the pipe takes it now.
    pub(super) fn flush(&mut self) {
        #[cfg(unix)]
        if let Stdin::Polled(p) = self {
            p.flush();
        }
    }

    /// Whether bytes wait for room in the pipe.
    pub(super) fn pending(&self) -> bool {
        match self {
            #[cfg(unix)]
            Stdin::Polled(p) => p.pending(),
            Stdin::Threads(_) => false,
        }
    }

    /// Closes the child's stdin once what was sent is written (as far as it goes without
    /// blocking, when polled).
    pub(super) fn close(&mut self) {
        match self {
            #[cfg(unix)]
            Stdin::Polled(p) => p.close(),
            Stdin::Threads(t) => *t = None,
        }
    }
}

/// The reading half, the loop's (see the module docs).
pub(super) enum Stdout {
    #[cfg(unix)]
    Polled(polled::Reader),
    /// The reader thread reports over the loop's channel.
    Threads,
}

/// Wakes a loop waiting in [`Stdout`]'s `poll(2)`, or on its channel.
#[derive(Clone, Debug)]
pub(super) enum Kicker {
    #[cfg(unix)]
    Socket(Arc<std::os::unix::net::UnixStream>),
    Channel(SyncSender<Input>),
}

impl Kicker {
    pub(super) fn kick(&self) {
        match self {
            #[cfg(unix)]
            Kicker::Socket(socket) => {
                // Full means a wake-up is pending already.
                let _ = (&**socket).write(&[1]);
            }
            Kicker::Channel(tx) => {
                // Full means the loop has plenty to wake up for.
                let _ = tx.try_send(Input::Kick);
            }
        }
    }
}

/// Starts the writer and reader threads (see the module docs).
pub(super) fn threads(
    stdin: ChildStdin,
    stdout: ChildStdout,
    tx: SyncSender<Input>,
) -> std::io::Result<(Stdin, Stdout)> {
    let (stdin_tx, stdin_rx) = mpsc::channel::<String>();
    spawn("mcp-stdio-in", move || write_lines(stdin, &stdin_rx))?;
    spawn("mcp-stdio-out", move || read_stdout(stdout, &tx))?;
    Ok((Stdin::Threads(Some(stdin_tx)), Stdout::Threads))
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
pub(super) use polled::start as polled;

#[cfg(unix)]
mod polled {
    use std::io::{ErrorKind, Read, Write};
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::process::{ChildStdin, ChildStdout};
    use std::sync::Arc;
    use std::time::Duration;

    use rustix::event::{poll, PollFd, PollFlags, Timespec};

    use super::{Kicker, Stdin, Stdout, CHUNK};

    /// How many chunks one wake-up reads at most before the loop looks at the clock again.
    const READS_PER_WAKE: usize = 16;

    /// Makes both pipes non-blocking and splits them into the writer, the reader and the
    /// reader's kicker. On an error they are handed back, for the threads.
    pub(crate) fn start(
        stdin: ChildStdin,
        stdout: ChildStdout,
    ) -> Result<(Stdin, Stdout, Kicker), (ChildStdin, ChildStdout)> {
        let set_up = || -> std::io::Result<(UnixStream, UnixStream, OwnedFd)> {
            rustix::io::ioctl_fionbio(&stdin, true)?;
            rustix::io::ioctl_fionbio(&stdout, true)?;
            let (wake, kicker) = UnixStream::pair()?;
            wake.set_nonblocking(true)?;
            kicker.set_nonblocking(true)?;
            let room = stdin.as_fd().try_clone_to_owned()?;
            Ok((wake, kicker, room))
        };
        let Ok((wake, kicker, room)) = set_up() else {
            // Blocking again for the threads (best effort: they only block longer).
            let _ = rustix::io::ioctl_fionbio(&stdin, false);
            let _ = rustix::io::ioctl_fionbio(&stdout, false);
            return Err((stdin, stdout));
        };
        let writer = Writer {
            stdin: Some(stdin),
            unsent: Vec::new(),
            written: 0,
        };
        let reader = Reader {
            stdout: Some(stdout),
            room: Some(room),
            chunk: vec![0; CHUNK].into_boxed_slice(),
            wake,
        };
        Ok((
            Stdin::Polled(writer),
            Stdout::Polled(reader),
            Kicker::Socket(Arc::new(kicker)),
        ))
    }

    /// The non-blocking stdin and the bytes it did not take yet.
    pub(crate) struct Writer {
        stdin: Option<ChildStdin>,
        /// Bytes for stdin not written yet, from `written` on.
        unsent: Vec<u8>,
        written: usize,
    }

    impl Writer {
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

        pub(crate) fn pending(&self) -> bool {
            self.stdin.is_some() && self.written < self.unsent.len()
        }

        /// Writes what waits, as far as the pipe takes it now.
        pub(crate) fn flush(&mut self) {
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

        pub(crate) fn close(&mut self) {
            self.flush();
            self.stdin = None;
            self.unsent = Vec::new();
            self.written = 0;
        }
    }

    /// The non-blocking stdout, a duplicate of stdin's descriptor (to wait for room in it) and
    /// the wake-up socket.
    pub(crate) struct Reader {
        stdout: Option<ChildStdout>,
        room: Option<OwnedFd>,
        chunk: Box<[u8]>,
        /// Readable when a [`Kicker`] wrote to its end.
        wake: UnixStream,
    }

    /// What one wait saw.
    pub(crate) struct Woke {
        /// stdin has room for the bytes that wait.
        pub(crate) room: bool,
        /// stdout ended (reported once).
        pub(crate) closed: bool,
    }

    impl Reader {
        /// Waits up to `timeout` for the child's stdout, for room in its stdin (when
        /// `pending`), or for a kick; appends what stdout gave to `read`.
        pub(crate) fn wait(
            &mut self,
            timeout: Duration,
            pending: bool,
            read: &mut Vec<u8>,
        ) -> Woke {
            let (woke, readable, room) = {
                let mut fds = Vec::with_capacity(3);
                fds.push(PollFd::new(&self.wake, PollFlags::IN));
                // Where each pipe sits in `fds`, when it is polled at all.
                let out_at = self.stdout.as_ref().map(|stdout| {
                    fds.push(PollFd::new(stdout, PollFlags::IN));
                    fds.len() - 1
                });
                let in_at = self.room.as_ref().filter(|_| pending).map(|room| {
                    fds.push(PollFd::new(room, PollFlags::OUT));
                    fds.len() - 1
                });
                // `timeout` is at most the loop's longest sleep; a bigger one waits until woken.
                let limit = Timespec::try_from(timeout).ok();
                if poll(&mut fds, limit.as_ref()).is_err() {
                    // Interrupted: the loop looks at the clock and comes back.
                    return Woke {
                        room: false,
                        closed: false,
                    };
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
            let closed = readable && self.read_stdout(read);
            Woke { room, closed }
        }

        /// Reads what stdout has (a bounded amount) into `read`; `true` when it ended.
        fn read_stdout(&mut self, read: &mut Vec<u8>) -> bool {
            for _ in 0..READS_PER_WAKE {
                let Some(out) = &mut self.stdout else {
                    return false;
                };
                match out.read(&mut self.chunk) {
                    Ok(0) => {}
                    Ok(n) => {
                        read.extend_from_slice(self.chunk.get(..n).unwrap_or_default());
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                    Err(_) => {}
                }
                // The end of stdout (or an error reading it, which ends it too).
                self.stdout = None;
                return true;
            }
            false
        }

        /// Lets go of the stdin duplicate (the child sees its stdin's end once the writer
        /// closes it too).
        pub(crate) fn close(&mut self) {
            self.room = None;
        }
    }
}
