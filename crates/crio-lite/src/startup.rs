//! Where the time goes between the process starting and the socket answering.
//!
//! Each phase of a start ([`Timeline::mark`]) is timed, and once the socket serves one info line
//! says how long the start took and which phase took what, so a slow start (a plugin that answers
//! VERSION slowly, a large store to recover) names its cause, and `cargo xtask bench` can print it
//! beside containerd's start.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// The phases of one start, in order.
#[derive(Debug)]
pub(crate) struct Timeline {
    started: Instant,
    last: Instant,
    phases: Vec<(&'static str, Duration)>,
}

impl Timeline {
    /// A timeline starting now.
    pub(crate) fn new() -> Timeline {
        Timeline::since(Instant::now())
    }

    /// A timeline that started at `started` (the process's first instruction of ours).
    pub(crate) fn since(started: Instant) -> Timeline {
        Timeline {
            started,
            last: started,
            phases: Vec::new(),
        }
    }

    /// Ends the phase called `name`: what ran since the last mark.
    pub(crate) fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases.push((name, now - self.last));
        self.last = now;
    }

    /// The whole start so far.
    pub(crate) fn total(&self) -> Duration {
        self.last - self.started
    }

    /// `name 1.2 ms, name 3.4 ms, ...`.
    pub(crate) fn summary(&self) -> String {
        let mut out = String::new();
        for (i, (name, took)) in self.phases.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{name} {:.1} ms", took.as_secs_f64() * 1e3);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_to_the_total_and_are_named_in_order() {
        let t0 = Instant::now();
        let mut t = Timeline::since(t0);
        std::thread::sleep(Duration::from_millis(2));
        t.mark("first");
        t.mark("second");
        let sum: Duration = t.phases.iter().map(|(_, d)| *d).sum();
        assert_eq!(sum, t.total());
        assert!(t.total() >= Duration::from_millis(2));
        let s = t.summary();
        assert!(s.starts_with("first "), "{s}");
        assert!(s.contains(", second "), "{s}");
    }
}
