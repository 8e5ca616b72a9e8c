//! A bounded pool of worker threads, each with its own HTTP agent, and per-job cancellation.
//!
//! A job runs on one worker with that worker's [`ureq::Agent`]. Cancelling a job that has not
//! started makes the worker skip it; cancelling a running job shuts its agent down, which
//! closes the job's connection at once (a blocked read or write fails), and the worker takes a
//! fresh agent for its next job. Each job has its own [`JobCtl`], so a late cancel can never hit
//! the next job of the same worker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

/// Makes the agent a worker uses (again after a cancellation shut the previous one down).
pub type AgentFactory = Arc<dyn Fn() -> ureq::Agent + Send + Sync>;

/// The work of one job: it gets the worker's agent and its own control block.
pub type Work = Box<dyn FnOnce(&ureq::Agent, &JobCtl) + Send>;

/// The cancellation handle of one job.
#[derive(Default)]
pub struct JobCtl {
    cancelled: AtomicBool,
    running: Mutex<Option<ureq::Agent>>,
}

impl JobCtl {
    /// A fresh handle.
    pub fn new() -> Arc<Self> {
        Arc::new(JobCtl::default())
    }

    /// Cancels the job: it is skipped if not started; if running, its connection is closed.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let agent = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(agent) = agent {
            agent.shutdown();
        }
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Marks the job as running on `agent`; false when it was cancelled before it started.
    fn start(&self, agent: &ureq::Agent) -> bool {
        let mut slot = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_cancelled() {
            return false;
        }
        *slot = Some(agent.clone());
        true
    }

    /// Marks the job as finished; true when a cancellation shut the agent down meanwhile.
    fn finish(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.is_cancelled()
    }
}

struct Job {
    ctl: Arc<JobCtl>,
    work: Work,
}

/// A fixed set of worker threads fed by a bounded queue.
pub struct Pool {
    tx: SyncSender<Job>,
}

/// The queue is full: the caller reports the job as failed instead of blocking.
#[derive(Debug)]
pub struct QueueFull;

impl Pool {
    /// Starts `threads` workers (at least one) named `name-N`; at most `queue` jobs wait.
    pub fn new(name: &str, threads: usize, queue: usize, agents: AgentFactory) -> Pool {
        let (tx, rx) = mpsc::sync_channel::<Job>(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        for n in 0..threads.max(1) {
            let rx = Arc::clone(&rx);
            let agents = Arc::clone(&agents);
            let spawned = thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn(move || worker(&rx, &agents));
            // A worker that cannot be spawned only lowers the pool's width; with none at all
            // jobs wait in the queue, and the engine's deadlines still end them.
            drop(spawned);
        }
        Pool { tx }
    }

    /// Queues a job without blocking.
    pub fn submit(&self, ctl: Arc<JobCtl>, work: Work) -> Result<(), QueueFull> {
        match self.tx.try_send(Job { ctl, work }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Err(QueueFull),
        }
    }
}

fn worker(rx: &Mutex<Receiver<Job>>, agents: &AgentFactory) {
    let mut agent = agents();
    loop {
        let job = {
            let guard = rx.lock().unwrap_or_else(PoisonError::into_inner);
            guard.recv()
        };
        let Ok(job) = job else {
            return; // the pool was dropped
        };
        if !job.ctl.start(&agent) {
            continue;
        }
        (job.work)(&agent, &job.ctl);
        if job.ctl.finish() {
            agent = agents();
        }
    }
}
