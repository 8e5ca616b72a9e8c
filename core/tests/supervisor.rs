//! The stdio restart supervisor (`tunnel::supervisor`): backoff that doubles from 200 ms to
//! 30 s, its reset after a 30 s healthy run, replacement at once, and reports about other
//! generations. The instants are the test's own (the core reads no clock).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use mcpwire_core::tunnel::supervisor::{Exit, HEALTHY_RUN};
use mcpwire_core::tunnel::Supervisor;
fn delay(s: &Supervisor, now: Instant) -> Duration {
    s.restart_at().unwrap().duration_since(now)
}

fn start(s: &mut Supervisor, now: Instant) -> u64 {
    let g = s.begin_start();
    assert!(s.started(now, g));
    g
}

#[test]
fn a_crash_restarts_after_a_backoff_that_doubles_up_to_30_s() {
    let t0 = Instant::now();
    let mut s = Supervisor::new(7);
    let mut now = t0;
    let mut ceilings = Vec::new();
    for _ in 0..12 {
        let g = start(&mut s, now);
        now += Duration::from_secs(1);
        assert_eq!(s.exited(now, g), Exit::Crashed);
        let d = delay(&s, now);
        ceilings.push(d);
        now += d;
        assert!(s.restart_due(now));
    }
    // Equal jitter: each delay lies in [ceiling/2, ceiling].
    let expect = [
        200u64, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000,
    ];
    for (d, c) in ceilings.iter().zip(expect) {
        let c = Duration::from_millis(c);
        assert!(*d <= c && *d >= c / 2, "{d:?} not in [{:?}, {c:?}]", c / 2);
    }
}

#[test]
fn a_child_that_ran_30_s_restarts_with_the_first_delay_again() {
    let mut now = Instant::now();
    let mut s = Supervisor::new(1);
    for _ in 0..5 {
        let g = start(&mut s, now);
        assert_eq!(s.exited(now, g), Exit::Crashed);
        now += delay(&s, now);
    }
    let g = start(&mut s, now);
    now += HEALTHY_RUN;
    assert_eq!(s.exited(now, g), Exit::Crashed);
    assert!(delay(&s, now) <= Duration::from_millis(200));
}

#[test]
fn a_child_that_ran_less_than_30_s_keeps_the_grown_backoff() {
    let mut now = Instant::now();
    let mut s = Supervisor::new(1);
    for _ in 0..3 {
        let g = start(&mut s, now);
        now += HEALTHY_RUN - Duration::from_millis(1);
        assert_eq!(s.exited(now, g), Exit::Crashed);
        now += delay(&s, now);
    }
    let g = start(&mut s, now);
    assert!(
        s.restart_at().is_none(),
        "a start takes the scheduled restart"
    );
    assert_eq!(s.exited(now, g), Exit::Crashed);
    assert!(delay(&s, now) >= Duration::from_millis(800));
}

#[test]
fn a_requested_restart_replaces_the_child_at_once_without_backoff() {
    let now = Instant::now();
    let mut s = Supervisor::new(1);
    let g = start(&mut s, now);
    assert_eq!(s.request_restart(), Some(g));
    assert_eq!(s.exited(now, g), Exit::Replace);
    assert!(s.restart_at().is_none());
    let g2 = start(&mut s, now);
    assert!(g2 > g);
    // The next crash starts the backoff at its first step.
    assert_eq!(s.exited(now, g2), Exit::Crashed);
    assert!(delay(&s, now) <= Duration::from_millis(200));
}

#[test]
fn a_restart_requested_with_no_child_running_says_so() {
    let mut s = Supervisor::new(1);
    assert_eq!(s.request_restart(), None);
}

#[test]
fn a_failed_start_schedules_a_restart_and_a_start_takes_the_schedule() {
    let now = Instant::now();
    let mut s = Supervisor::new(1);
    let g = s.begin_start();
    assert!(s.is_starting());
    assert!(s.start_failed(now, g));
    assert!(!s.is_starting());
    assert!(s.restart_at().is_some());
    assert!(!s.restart_due(now));
    s.begin_start();
    assert!(s.restart_at().is_none());
}

#[test]
fn reports_for_another_generation_change_nothing() {
    let now = Instant::now();
    let mut s = Supervisor::new(1);
    let g = start(&mut s, now);
    assert!(!s.started(now, g + 1));
    assert!(!s.start_failed(now, g));
    assert_eq!(s.exited(now, g + 1), Exit::Stale);
    assert_eq!(s.current(), Some(g));
    assert!(s.issued(g) && !s.issued(g + 1) && !s.issued(0));
    assert_eq!(s.exited(now, g), Exit::Crashed);
    assert_eq!(s.exited(now, g), Exit::Stale);
}
