//! Process file descriptors: a process pinned by a descriptor (a reused pid cannot take its
//! place), signalled through it, and waited for (it turns readable when the process exits).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// A pidfd (pidfd_open(2)): the process it was opened for, for as long as it is held.
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    /// A pidfd for the process `pid` now.
    ///
    /// # Errors
    ///
    /// `ESRCH` when there is no such process (`InvalidInput` for a pid that is not positive),
    /// and pidfd_open(2)'s others (`ENOSYS` before Linux 5.3).
    pub fn open(pid: i32) -> io::Result<Pidfd> {
        let pid = (pid > 0)
            .then(|| Pid::from_raw(pid))
            .flatten()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a process id"))?;
        Ok(Pidfd(pidfd_open(pid, PidfdFlags::empty())?))
    }

    /// Sends the signal numbered `signal` (`libc::SIGKILL`, say) to the process.
    ///
    /// # Errors
    ///
    /// `ESRCH` when the process has exited and been reaped; `EINVAL` for a number that is not a
    /// named signal (real-time signals included); `EPERM`.
    pub fn send_signal(&self, signal: i32) -> io::Result<()> {
        let signal = Signal::from_named_raw(signal)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        Ok(pidfd_send_signal(&self.0, signal)?)
    }

    /// Whether the process has exited (a zombie has); does not wait.
    pub fn has_exited(&self) -> bool {
        self.wait(Duration::ZERO)
    }

    /// Blocks up to `timeout` until the process exits; whether it did. For callers off an async
    /// runtime ([`Pidfd::exited_within`] is the async one).
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            // No deadline the clock can hold: no timeout.
            let left = left.and_then(|d| Timespec::try_from(d).ok());
            let mut fds = [PollFd::new(&self.0, PollFlags::IN)];
            match poll(&mut fds, left.as_ref()) {
                Ok(0) => return false,
                Ok(_) => return true,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return false,
            }
        }
    }

    /// Waits up to `timeout` for the process to exit without blocking the executor (the pidfd
    /// is registered with tokio's reactor); whether it did.
    #[cfg(feature = "tokio")]
    pub async fn exited_within(self, timeout: Duration) -> bool {
        use tokio::io::Interest;
        use tokio::io::unix::AsyncFd;
        // Not registered (no reactor to register with): not seen to exit; callers check the
        // process itself then.
        // SAFETY: the AsyncFd owns the descriptor, which stays open and the same until the
        // AsyncFd is dropped.
        let registered = unsafe { AsyncFd::register_with_interest(self.0, Interest::READABLE) };
        let Ok(fd) = registered else {
            return false;
        };
        tokio::time::timeout(timeout, fd.readable()).await.is_ok()
    }
}

impl AsFd for Pidfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl From<Pidfd> for OwnedFd {
    fn from(pidfd: Pidfd) -> OwnedFd {
        pidfd.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pidfd_waits_gives_up_at_its_timeout_and_signals() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pidfd = Pidfd::open(i32::try_from(child.id()).unwrap()).unwrap();
        assert!(!pidfd.has_exited());
        assert!(!pidfd.wait(Duration::from_millis(50)));
        pidfd.send_signal(libc::SIGKILL).unwrap();
        let started = Instant::now();
        assert!(pidfd.wait(Duration::from_secs(20)));
        assert!(started.elapsed() < Duration::from_secs(5));
        // A zombie has exited.
        assert!(pidfd.has_exited());
        child.wait().unwrap();
        assert_eq!(
            pidfd.send_signal(libc::SIGKILL).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
        assert_eq!(
            pidfd.send_signal(0).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            Pidfd::open(0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            Pidfd::open(-1).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
