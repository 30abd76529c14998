//! Telling systemd how the daemon is doing (the `sd_notify` protocol of a `Type=notify` unit):
//! `READY=1` once the socket serves, `STATUS=` while the last run's sandboxes are recovered,
//! `WATCHDOG=1` at half the unit's `WatchdogSec`, `STOPPING=1` when shutdown begins.
//!
//! Outside systemd (no `NOTIFY_SOCKET`) every call does nothing. Plugins never see the variable:
//! they run with an empty environment.

use std::time::Duration;

use sd_notify::NotifyState;

/// Sends `states`; a failure is logged, never fatal (the daemon serves either way).
fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

/// The socket serves: `READY=1`, with what recovery is doing.
pub(crate) fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A new `STATUS=` line for `systemctl status`.
pub(crate) fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// Shutdown has begun.
pub(crate) fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("shutting down")]);
}

/// When the unit sets `WatchdogSec` (for this process), a task that sends `WATCHDOG=1` at half
/// that interval for as long as the runtime runs it; a daemon whose runtime is stuck stops
/// sending, and systemd restarts it.
pub(crate) fn spawn_watchdog() -> Option<tokio::task::JoinHandle<()>> {
    let interval = sd_notify::watchdog_enabled()?;
    let every = (interval / 2).max(Duration::from_millis(100));
    tracing::info!(
        interval_ms = interval.as_millis(),
        "systemd watchdog: pinging at half the interval"
    );
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        loop {
            ticks.tick().await;
            send(&[NotifyState::Watchdog]);
        }
    }))
}
