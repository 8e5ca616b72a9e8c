//! Reconnecting a failed server by itself, with bounded exponential backoff.
//!
//! A host that serves other clients (the `host serve` gateway) keeps going when one of its
//! servers breaks: the server's tools are unavailable, and the registry schedules its next
//! attempt. The delay before the `n`th consecutive retry is the tunnel's own
//! [`Backoff`] (equal jitter in `[d/2, d]`, `d = min(initial * multiplier^(n-1), max)`), its
//! jitter drawn from a seed the driver gives, so replicas that lost one server at once do not
//! come back at once. What is worth retrying is [`FailureKind::retries`]: a server that
//! could not be reached, timed out, exited or answered an error may come back; one whose
//! command cannot start, whose config is unusable, whose user must log in or that shares no
//! protocol version with us will not, until a person acts.
//!
//! The registry only decides: [`Registry::poll_timeout`](super::Registry::poll_timeout) names
//! the next reconnect ([`TimeoutReason::Reconnect`](super::TimeoutReason::Reconnect)),
//! [`Registry::due_reconnects`](super::Registry::due_reconnects) says which servers are due,
//! and the driver calls [`Registry::connect`](super::Registry::connect) for each, as for any
//! connect. A ready server resets its count; a server the host disconnected or removed is never
//! reconnected by itself.

use crate::backoff::Backoff;
use crate::time::{Duration, Instant};

use super::failure::FailureKind;

/// When a failed server is connected again by itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// The delay before each retry. Default: 1 s doubling up to 60 s.
    pub backoff: Backoff,
    /// After this many consecutive failed attempts the server stays failed until the host
    /// connects it again. `None` (the default): it is retried for as long as the host runs.
    pub max_failures: Option<u32>,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            backoff: Backoff {
                initial: Duration::from_secs(1),
                max: Duration::from_secs(60),
                multiplier: 2,
            },
            max_failures: None,
        }
    }
}

impl FailureKind {
    /// Whether connecting again may succeed without anyone changing anything: `true` for a
    /// timeout, an unreachable or unanswering server, a server that exited, broke the protocol or answered an
    /// error, and a local shortage; `false` for a command that cannot start, a bad config,
    /// authorization (a person must log in) and an incompatible server.
    pub fn retries(self) -> bool {
        match self {
            FailureKind::TimedOut { .. }
            | FailureKind::Unreachable
            | FailureKind::NoAnswer
            | FailureKind::Exited
            | FailureKind::Server
            | FailureKind::Local => true,
            FailureKind::Spawn
            | FailureKind::Config
            | FailureKind::Authorization
            | FailureKind::Incompatible => false,
        }
    }
}

/// A server's reconnect state ([`Registry::reconnect_state`](super::Registry::reconnect_state)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconnectState {
    /// Its consecutive failed attempts since it was last ready.
    pub failures: u32,
    /// When it is connected again by itself; `None` while connecting, or when it is not to be
    /// retried (its failure does not retry, or [`ReconnectPolicy::max_failures`] was reached).
    pub due: Option<Instant>,
}

/// The registry's reconnect settings and jitter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Reconnect {
    pub(super) policy: ReconnectPolicy,
    seed: u64,
    draws: u64,
}

impl Reconnect {
    pub(super) fn new(policy: ReconnectPolicy, seed: u64) -> Reconnect {
        Reconnect {
            policy,
            seed,
            draws: 0,
        }
    }

    /// Schedules the retry after one more failure of `kind` at `now`.
    pub(super) fn after_failure(
        &mut self,
        retry: &mut ReconnectState,
        kind: FailureKind,
        now: Instant,
    ) {
        retry.failures = retry.failures.saturating_add(1);
        let given_up = self
            .policy
            .max_failures
            .is_some_and(|max| retry.failures >= max);
        retry.due = if kind.retries() && !given_up {
            let random = crate::backoff::Jitter::new(self.seed.wrapping_add(self.draws)).next_u64();
            self.draws = self.draws.wrapping_add(1);
            let delay = self.policy.backoff.delay(retry.failures, random);
            Some(crate::backoff::saturating_add(now, delay))
        } else {
            None
        };
    }
}
