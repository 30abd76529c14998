//! The stop protocol, as CRI-O's `internal/oci` runs it: the container's stop signal, sent again
//! to an init that had no handler for it yet, SIGKILL once the grace period is over, and the
//! wait for conmon to record the exit.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::error::{Error, Result};
use crate::record::SignalDisposition;
use crate::runtime::{Runtime, Status};

/// How long a SIGKILLed container may take to be reported gone.
pub const KILL_WAIT: Duration = Duration::from_secs(30);

/// While a first signal is lost, the wait is cut in slices this long to look for the handler
/// between them.
const HANDLER_LOOK: Duration = Duration::from_millis(5);

/// The signal a container is stopped with: a standard signal or a real-time one, by number.
///
/// `Default` is SIGTERM, what a container whose image names none is stopped with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopSignal(i32);

impl Default for StopSignal {
    fn default() -> StopSignal {
        StopSignal(Signal::SIGTERM as i32)
    }
}

impl StopSignal {
    /// SIGKILL, which no process can catch.
    pub const KILL: StopSignal = StopSignal(Signal::SIGKILL as i32);

    /// The signal an image's `StopSignal` names, as images write it: `SIGTERM`, `TERM`,
    /// `sigquit`, `15`, `SIGRTMIN+3`, `RTMAX-1`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSignal`] when `text` names no signal.
    pub fn parse(text: &str) -> Result<StopSignal> {
        let text = text.trim();
        let invalid = || Error::InvalidSignal {
            signal: text.to_owned(),
        };
        if let Ok(n) = text.parse::<i32>() {
            return StopSignal::from_number(n).ok_or_else(invalid);
        }
        let upper = text.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(rt) = name
            .strip_prefix("RTMIN")
            .or_else(|| name.strip_prefix("RTMAX"))
        {
            let (base, sign) = if name.starts_with("RTMIN") {
                (libc::SIGRTMIN(), 1)
            } else {
                (libc::SIGRTMAX(), -1)
            };
            let offset = match rt {
                "" => 0,
                _ => rt
                    .strip_prefix(if sign > 0 { '+' } else { '-' })
                    .and_then(|n| n.parse::<i32>().ok())
                    .ok_or_else(invalid)?,
            };
            return base
                .checked_add(sign * offset)
                .and_then(StopSignal::from_number)
                .ok_or_else(invalid);
        }
        format!("SIG{name}")
            .parse::<Signal>()
            .map(|s| StopSignal(s as i32))
            .map_err(|_| invalid())
    }

    /// The signal numbered `n`: a standard signal, or a real-time one from SIGRTMIN to
    /// SIGRTMAX (those the C library keeps for itself excluded); `None` for any other number.
    pub fn from_number(n: i32) -> Option<StopSignal> {
        let ok = Signal::try_from(n).is_ok() || (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n);
        ok.then_some(StopSignal(n))
    }

    /// Its number.
    pub fn number(self) -> i32 {
        self.0
    }
}

/// How [`Runtime::stop`] ended a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopOutcome {
    /// It exited on its stop signal within the grace period, or had exited already.
    Exited,
    /// It was SIGKILLed: at once (no grace period) or when the grace period ran out.
    Killed,
}

impl Runtime {
    /// Stops a container as CRI-O does: `signal`, then SIGKILL when it has not exited after
    /// `timeout` (at once for zero, the way to stop a container that was created and never
    /// started), and waits up to [`KILL_WAIT`] for conmon to record the exit
    /// ([`Runtime::exit_details`] then says how it ended).
    ///
    /// `pid` is the container's process (its init) as the caller knows it: when it is the init
    /// of its PID namespace and has no handler for `signal` yet, the kernel drops the signal, so
    /// the signal is sent again once the handler is there, rather than the container sitting out
    /// its whole grace period until SIGKILL (`top` installs its handler a moment after exec).
    ///
    /// A container that exited meanwhile, or that the runtime no longer knows, is stopped
    /// already.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] or [`Error::Timeout`] when the runtime cannot signal a container that
    /// still runs; [`Error::NotExited`] when it has not exited [`KILL_WAIT`] after SIGKILL.
    pub async fn stop(
        &self,
        id: &str,
        pid: Option<i32>,
        signal: StopSignal,
        timeout: Duration,
    ) -> Result<StopOutcome> {
        if !timeout.is_zero() {
            if self.wait_after_signal(id, pid, signal, timeout).await? {
                return Ok(StopOutcome::Exited);
            }
            tracing::info!(container = %id, "did not stop in {timeout:?}: killing it");
        }
        self.signal(id, StopSignal::KILL).await?;
        self.wait(id, KILL_WAIT).await?;
        Ok(StopOutcome::Killed)
    }

    /// Sends `signal`; a container that has exited meanwhile is not an error. A SIGKILL is
    /// marked first, so that its exit is not taken for the OOM killer's.
    async fn signal(&self, id: &str, signal: StopSignal) -> Result<()> {
        if signal == StopSignal::KILL {
            crate::cgroup::oom::note_killed(id, &self.container_dir(id));
        }
        let Err(e) = self.kill_number(id, signal.number()).await else {
            return Ok(());
        };
        if matches!(e, Error::NotFound { .. }) || self.exit_code(id).is_ok() {
            return Ok(());
        }
        // runc refuses to signal a container whose process is gone but not yet reaped.
        match self.state(id).await {
            Ok(s) if s.status == Status::Stopped => Ok(()),
            _ => Err(e),
        }
    }

    /// Sends the stop signal and waits up to `timeout` for the container to exit; whether it
    /// did. The signal is sent again when the init that dropped it has installed its handler.
    async fn wait_after_signal(
        &self,
        id: &str,
        pid: Option<i32>,
        first: StopSignal,
        timeout: Duration,
    ) -> Result<bool> {
        let disposition = || pid.and_then(|p| SignalDisposition::of(p, first.number()));
        // Dropped if no handler was there before the signal nor after it (a handler that came
        // in between may have taken it: no second signal then).
        let dropped_before = disposition().is_some_and(|d| d.dropped());
        self.signal(id, first).await?;
        let mut lost = dropped_before && disposition().is_some_and(|d| d.dropped());
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        while lost {
            if self.wait(id, left().min(HANDLER_LOOK)).await.is_ok() {
                return Ok(true);
            }
            if left().is_zero() {
                return Ok(false);
            }
            if disposition().is_some_and(|d| d.caught) {
                tracing::debug!(container = %id, signal = first.number(), "the handler is there now: signalling again");
                lost = false;
                self.signal(id, first).await?;
            }
        }
        Ok(self.wait(id, left()).await.is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_signals_parse_as_images_write_them() {
        let rtmin = libc::SIGRTMIN();
        let rtmax = libc::SIGRTMAX();
        for (text, want) in [
            ("SIGTERM", Some(15)),
            ("TERM", Some(15)),
            ("sigquit", Some(3)),
            (" SIGINT ", Some(2)),
            ("9", Some(9)),
            ("SIGRTMIN", Some(rtmin)),
            ("SIGRTMIN+3", Some(rtmin + 3)),
            ("rtmin+3", Some(rtmin + 3)),
            ("SIGRTMAX-2", Some(rtmax - 2)),
            ("RTMAX", Some(rtmax)),
            ("SIGWHAT", None),
            ("999", None),
            ("0", None),
            ("-9", None),
            ("SIGRTMIN-1", None),
            ("SIGRTMAX+1", None),
            ("SIGRTMIN+99", None),
            ("SIGRTMIN+", None),
            ("", None),
        ] {
            assert_eq!(
                StopSignal::parse(text).ok().map(StopSignal::number),
                want,
                "{text:?}"
            );
        }
        let err = StopSignal::parse("SIGWHAT").unwrap_err().to_string();
        assert_eq!(err, "stop signal \"SIGWHAT\" is not a signal");
    }

    #[test]
    fn numbers_are_signals_the_kernel_delivers() {
        assert_eq!(StopSignal::default().number(), 15);
        assert_eq!(StopSignal::from_number(9), Some(StopSignal::KILL));
        let rtmin = libc::SIGRTMIN();
        assert!(StopSignal::from_number(rtmin).is_some());
        assert!(StopSignal::from_number(libc::SIGRTMAX()).is_some());
        // The C library's own real-time signals (32, 33 with glibc) are not a container's.
        assert!(StopSignal::from_number(rtmin - 1).is_none());
        assert!(StopSignal::from_number(0).is_none());
        assert!(StopSignal::from_number(libc::SIGRTMAX() + 1).is_none());
    }
}
