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
use std::sync::Arc;

use super::{spawn, Input};
use crate::mcp::session::StdioFlush;

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
        // Polled: queued here, written by the flusher once the session is let go.
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
    pub(super) fn flush(&self) {
        #[cfg(unix)]
        if let Stdin::Polled(p) = self {
            p.flush();
        }
    }

    /// What writes the queued lines after the session is let go ([`Stdin::send`] only queues
    /// them, when polled).
    pub(super) fn flusher(&self) -> Option<Arc<dyn StdioFlush>> {
        match self {
            #[cfg(unix)]
            Stdin::Polled(p) => Some(Arc::new(p.clone())),
            Stdin::Threads(_) => None,
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
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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
        let kick = Kicker::Socket(Arc::new(kicker));
        let writer = Writer(Arc::new(Queue {
            pipe: Mutex::new(Pipe {
                stdin: Some(Arc::new(stdin)),
                unsent: Vec::new(),
                written: 0,
                busy: false,
                full: false,
                closing: false,
            }),
            kick: kick.clone(),
        }));
        let reader = Reader {
            stdout: Some(stdout),
            room: Some(room),
            chunk: vec![0; CHUNK].into_boxed_slice(),
            wake,
        };
        Ok((Stdin::Polled(writer), Stdout::Polled(reader), kick))
    }

    /// The non-blocking stdin and the bytes it did not take yet, shared by whoever holds the
    /// session (it queues lines) and whoever writes them, after letting go of the session: a
    /// child woken by a write may run at once, and it must not find the session held while
    /// its answer comes back. One thread writes at a time, from the front, so lines keep the
    /// order they were queued in (a cancel never overtakes its request).
    #[derive(Clone)]
    pub(crate) struct Writer(Arc<Queue>);

    struct Queue {
        pipe: Mutex<Pipe>,
        /// Wakes whoever waits in [`Reader::wait`], to watch for room when the pipe is full.
        kick: Kicker,
    }

    struct Pipe {
        stdin: Option<Arc<ChildStdin>>,
        /// Bytes for stdin not written yet, from `written` on.
        unsent: Vec<u8>,
        written: usize,
        /// A thread is writing (it has taken the bytes it writes out of `unsent`, and comes
        /// back for what was queued meanwhile).
        busy: bool,
        /// The pipe was full: the rest waits for room (the loop watches for it).
        full: bool,
        /// Closed once what waits is written (or the pipe is full).
        closing: bool,
    }

    /// How one write ended.
    enum Wrote {
        All,
        Full,
        Gone,
    }

    impl crate::mcp::session::StdioFlush for Writer {
        fn flush(&self) {
            Writer::flush(self);
        }
    }

    impl Writer {
        fn pipe(&self) -> MutexGuard<'_, Pipe> {
            self.0.pipe.lock().unwrap_or_else(PoisonError::into_inner)
        }

        /// Queues one line; [`Writer::flush`] writes it.
        pub(crate) fn send(&self, line: String) {
            let mut p = self.pipe();
            if p.stdin.is_none() {
                return; // the child is gone; its stdout's end reports it
            }
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            if p.unsent.is_empty() {
                p.unsent = bytes;
                p.written = 0;
            } else {
                p.unsent.extend_from_slice(&bytes);
            }
        }

        /// Bytes wait for room in a full pipe.
        pub(crate) fn pending(&self) -> bool {
            let p = self.pipe();
            p.stdin.is_some() && p.full && p.written < p.unsent.len()
        }

        /// Writes what waits, as far as the pipe takes it now; never blocks. A thread that
        /// finds another writing leaves its lines to that one.
        pub(crate) fn flush(&self) {
            let mut p = self.pipe();
            if p.busy {
                return;
            }
            loop {
                let Some(stdin) = p.stdin.clone() else {
                    p.unsent = Vec::new();
                    p.written = 0;
                    return;
                };
                if p.written >= p.unsent.len() {
                    p.unsent.clear();
                    p.written = 0;
                    p.full = false;
                    if p.closing {
                        p.stdin = None;
                    }
                    return;
                }
                let bytes = std::mem::take(&mut p.unsent);
                let from = std::mem::take(&mut p.written);
                p.busy = true;
                drop(p);
                let (n, wrote) = write_some(&stdin, bytes.get(from..).unwrap_or_default());
                p = self.pipe();
                p.busy = false;
                // What is left of these bytes goes first, then what was queued meanwhile.
                let queued = std::mem::replace(&mut p.unsent, bytes);
                p.written = from + n;
                p.unsent.extend_from_slice(&queued);
                match wrote {
                    Wrote::All => {}
                    Wrote::Gone => {
                        // The child closed its stdin: nothing more goes there.
                        p.stdin = None;
                    }
                    Wrote::Full if p.closing => p.stdin = None,
                    Wrote::Full => {
                        p.full = true;
                        drop(p);
                        // Whoever waits for input watches for room from now on.
                        self.0.kick.kick();
                        return;
                    }
                }
            }
        }

        /// Closes the child's stdin once what was queued is written, as far as it goes
        /// without blocking.
        pub(crate) fn close(&self) {
            self.pipe().closing = true;
            self.flush();
        }
    }

    /// Writes `bytes` as far as the pipe takes them: how many went, and why it stopped.
    fn write_some(stdin: &ChildStdin, bytes: &[u8]) -> (usize, Wrote) {
        let mut n = 0;
        let mut out = stdin;
        while n < bytes.len() {
            match out.write(bytes.get(n..).unwrap_or_default()) {
                Ok(0) => return (n, Wrote::Full),
                Ok(k) => n += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return (n, Wrote::Full),
                Err(_) => return (n, Wrote::Gone),
            }
        }
        (n, Wrote::All)
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

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::{polled, Stdin, Stdout};

    /// `sh -c SCRIPT` with both pipes, split by [`polled::start`].
    fn child(script: &str) -> (Child, polled::Writer, polled::Reader) {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let Ok((Stdin::Polled(w), Stdout::Polled(r), _)) = polled(stdin, stdout) else {
            panic!("polled pipes");
        };
        (child, w, r)
    }

    /// Reads the child's stdout (writing what waits whenever there is room) until `want`
    /// bytes came or 10 s passed.
    fn read_back(w: &polled::Writer, r: &mut polled::Reader, want: usize) -> Vec<u8> {
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while got.len() < want && Instant::now() < end {
            let woke = r.wait(Duration::from_millis(50), w.pending(), &mut got);
            if woke.room {
                w.flush();
            }
        }
        got
    }

    #[test]
    fn lines_sent_from_many_threads_arrive_whole_and_each_threads_in_order() {
        let (mut ch, w, mut r) = child("cat");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        w.send(format!(
                            "{{\"t\":{t},\"i\":{i},\"pad\":\"{}\"}}",
                            "x".repeat(i)
                        ));
                        w.flush();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let want: usize = (0..4)
            .map(|t: usize| {
                (0..500)
                    .map(|i: usize| format!("{{\"t\":{t},\"i\":{i},\"pad\":\"\"}}\n").len() + i)
                    .sum::<usize>()
            })
            .sum();
        let got = read_back(&w, &mut r, want);
        assert_eq!(got.len(), want, "every byte sent came back");
        let mut next = [0usize; 4];
        for line in String::from_utf8(got).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a whole line");
            let (t, i) = (
                v["t"].as_u64().unwrap() as usize,
                v["i"].as_u64().unwrap() as usize,
            );
            assert_eq!(i, next[t], "thread {t}'s lines in the order sent");
            next[t] += 1;
        }
        assert_eq!(next, [500; 4]);
        let _ = ch.kill();
        let _ = ch.wait();
    }

    #[test]
    fn a_full_pipe_never_blocks_the_sender_and_the_rest_goes_once_there_is_room() {
        // The child reads nothing for a while: far more than a pipe holds is sent meanwhile.
        let (mut ch, w, mut r) = child("sleep 1; cat");
        let line = "y".repeat(1023);
        let started = Instant::now();
        for _ in 0..1024 {
            w.send(line.clone());
            w.flush();
        }
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "sending to a full pipe returned at once"
        );
        assert!(w.pending(), "what the pipe did not take waits for room");
        let got = read_back(&w, &mut r, 1024 * 1024);
        assert_eq!(got.len(), 1024 * 1024);
        assert!(got
            .chunks(1024)
            .all(|c| c[..1023] == *line.as_bytes() && c[1023] == b'\n'));
        assert!(!w.pending());
        let _ = ch.kill();
        let _ = ch.wait();
    }

    #[test]
    fn close_ends_the_childs_stdin_after_what_was_queued() {
        let (mut ch, w, mut r) = child("cat; echo end");
        w.send("last".into());
        r.close(); // the reader's duplicate of stdin, for watching for room
        w.close();
        w.send("after close".into());
        w.flush();
        let got = read_back(&w, &mut r, "last\nend\n".len());
        assert_eq!(String::from_utf8(got).unwrap(), "last\nend\n");
        let _ = ch.wait();
    }
}
