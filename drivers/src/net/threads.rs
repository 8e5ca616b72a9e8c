//! A bounded pool of worker threads, each with its own HTTP agent, and per-job cancellation.
//!
//! A job runs on one worker with that worker's [`ureq::Agent`]. Cancelling a job that has not
//! started makes the worker skip it; cancelling a running job shuts its agent down, which
//! closes the job's connection at once (a blocked read or write fails), and the worker takes a
//! fresh agent for its next job. Each job has its own [`JobCtl`], so a late cancel can never hit
//! the next job of the same worker.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

/// Makes the agent a worker uses (again after a cancellation shut the previous one down).
pub type AgentFactory<A = ureq::Agent> = Arc<dyn Fn() -> A + Send + Sync>;

/// The work of one job: it gets the worker's agent and its own control block.
pub type Work<A = ureq::Agent> = Box<dyn FnOnce(&A, &JobCtl) + Send>;

/// What a worker holds: one agent, or a set of them (one per kind of destination). A job
/// runs on the primary one unless it [switches](JobCtl::switch_to); after a cancellation the
/// worker makes the whole set again.
pub trait Agents: Send + 'static {
    /// The agent a job starts on.
    fn primary(&self) -> &ureq::Agent;
}

impl Agents for ureq::Agent {
    fn primary(&self) -> &ureq::Agent {
        self
    }
}

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

    /// The running job goes on on `agent` (one it made for itself) instead of the worker's: a
    /// cancellation shuts that one down from now on. `false` when the job was cancelled
    /// already (it must stop).
    pub fn switch_to(&self, agent: &ureq::Agent) -> bool {
        self.start(agent)
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

struct Job<A> {
    ctl: Arc<JobCtl>,
    work: Work<A>,
}

/// At most `threads` worker threads fed by a bounded queue, started as the work needs them: a
/// job that finds no idle worker starts one (up to the width), so steady sequential work keeps
/// one worker (and its kept-alive connection) and a burst grows the pool.
pub struct Pool<A: Agents = ureq::Agent> {
    tx: SyncSender<Job<A>>,
    workers: Arc<Workers<A>>,
}

/// What the workers share: the queue's end, how many exist and how many wait for a job.
struct Workers<A> {
    rx: Mutex<Receiver<Job<A>>>,
    agents: AgentFactory<A>,
    name: String,
    width: usize,
    started: AtomicUsize,
    idle: AtomicUsize,
    /// Jobs in the queue, not taken by a worker yet.
    queued: AtomicUsize,
}

/// The queue is full: the caller reports the job as failed instead of blocking.
#[derive(Debug)]
pub struct QueueFull;

impl<A: Agents> Pool<A> {
    /// A pool of at most `threads` workers (at least one) named `name-N`; at most `queue` jobs
    /// wait. No worker starts before the first job.
    pub fn new(name: &str, threads: usize, queue: usize, agents: AgentFactory<A>) -> Pool<A> {
        let (tx, rx) = mpsc::sync_channel::<Job<A>>(queue.max(1));
        let workers = Arc::new(Workers {
            rx: Mutex::new(rx),
            agents,
            name: name.to_owned(),
            width: threads.max(1),
            started: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
        });
        Pool { tx, workers }
    }

    /// Queues a job without blocking, starting a worker when none is idle.
    pub fn submit(&self, ctl: Arc<JobCtl>, work: Work<A>) -> Result<(), QueueFull> {
        self.workers.queued.fetch_add(1, Ordering::SeqCst);
        match self.tx.try_send(Job { ctl, work }) {
            Ok(()) => {
                self.grow();
                Ok(())
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.workers.queued.fetch_sub(1, Ordering::SeqCst);
                Err(QueueFull)
            }
        }
    }

    /// Starts one more worker when more jobs wait than workers do, and the width allows it (a
    /// worker that just started counts as idle before it takes a job: counting jobs, not only
    /// idle workers, starts enough for a burst).
    fn grow(&self) {
        let w = &self.workers;
        if w.queued.load(Ordering::SeqCst) <= w.idle.load(Ordering::SeqCst) {
            return;
        }
        let n = w.started.fetch_add(1, Ordering::SeqCst);
        if n >= w.width {
            w.started.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let workers = Arc::clone(w);
        let spawned = thread::Builder::new()
            .name(format!("{}-{n}", w.name))
            .spawn(move || worker(&workers));
        // A worker that cannot be spawned only lowers the pool's width; with none at all jobs
        // wait in the queue, and the engine's deadlines still end them.
        if spawned.is_err() {
            w.started.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn worker<A: Agents>(workers: &Workers<A>) {
    let mut agent = (workers.agents)();
    loop {
        workers.idle.fetch_add(1, Ordering::SeqCst);
        let job = {
            let guard = workers.rx.lock().unwrap_or_else(PoisonError::into_inner);
            guard.recv()
        };
        workers.idle.fetch_sub(1, Ordering::SeqCst);
        if job.is_ok() {
            workers.queued.fetch_sub(1, Ordering::SeqCst);
        }
        let Ok(job) = job else {
            return; // the pool was dropped
        };
        if !job.ctl.start(agent.primary()) {
            continue;
        }
        (job.work)(&agent, &job.ctl);
        if job.ctl.finish() {
            agent = (workers.agents)();
        }
    }
}
