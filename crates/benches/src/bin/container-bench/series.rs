//! A series of timed operations of several steps each (create, start, stop, remove), run one at
//! a time or with several in flight, and its statistics.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use benches::Phase;

/// The steps' and the whole operation's latencies, and the series' wall time.
pub(crate) struct Series {
    steps: &'static [&'static str],
    each: Vec<Vec<Duration>>,
    total: Vec<Duration>,
    pub(crate) wall: Duration,
}

impl Series {
    pub(crate) fn new(steps: &'static [&'static str]) -> Series {
        Series {
            steps,
            each: vec![Vec::new(); steps.len()],
            total: Vec::new(),
            wall: Duration::ZERO,
        }
    }

    /// One operation's step times; its total is their sum.
    pub(crate) fn push(&mut self, steps: &[Duration]) {
        for (all, d) in self.each.iter_mut().zip(steps) {
            all.push(*d);
        }
        self.total.push(steps.iter().sum());
    }

    /// Operations run one after another: the wall time is the sum of their totals.
    pub(crate) fn close_sequential(&mut self) {
        self.wall = self.total.iter().sum();
    }

    /// The mean of one step (or of the total, for `"total"`), ms.
    pub(crate) fn mean_ms(&self, step: &str) -> f64 {
        let all = if step == "total" {
            &self.total
        } else {
            match self.steps.iter().position(|s| *s == step) {
                Some(i) => &self.each[i],
                None => return f64::NAN,
            }
        };
        if all.is_empty() {
            return f64::NAN;
        }
        benches::ms(all.iter().sum::<Duration>() / all.len() as u32)
    }

    pub(crate) fn len(&self) -> usize {
        self.total.len()
    }

    /// Per step and in total: mean, p50, p95, p99, max (ms); operations per second from the
    /// wall time.
    pub(crate) fn json(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (step, all) in self.steps.iter().zip(&self.each) {
            out.insert((*step).to_owned(), latency(all));
        }
        out.insert("total".to_owned(), latency(&self.total));
        let per_s = if self.wall.is_zero() {
            0.0
        } else {
            (self.total.len() as f64 / self.wall.as_secs_f64() * 1e3).round() / 1e3
        };
        out.insert("ops".to_owned(), json!(self.total.len()));
        out.insert("wall_s".to_owned(), json!(benches::ms(self.wall) / 1e3));
        out.insert("per_s".to_owned(), json!(per_s));
        Value::Object(out)
    }
}

fn latency(all: &[Duration]) -> Value {
    let s = benches::stats(&Phase::of_latencies(all.to_vec()), "per_s");
    json!({"mean_ms": s["mean_ms"], "p50_ms": s["p50_ms"], "p95_ms": s["p95_ms"],
           "p99_ms": s["p99_ms"], "max_ms": s["max_ms"]})
}

/// Runs `op(i)` for `i` in `0..n` with `concurrency` in flight, each returning its step times,
/// into `series`; the first error is returned after the phase.
pub(crate) async fn run_concurrent<F, Fut, const K: usize>(
    series: &mut Series,
    n: usize,
    concurrency: usize,
    op: F,
) -> Result<(), String>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<[Duration; K], String>> + Send + 'static,
{
    let steps = std::sync::Arc::new(Mutex::new(Vec::with_capacity(n)));
    let first_error = Mutex::new(None);
    let op = std::sync::Arc::new(op);
    let out = std::sync::Arc::clone(&steps);
    let phase = benches::run_phase(
        n,
        concurrency,
        move |i| {
            let (op, out) = (std::sync::Arc::clone(&op), std::sync::Arc::clone(&out));
            async move {
                let took = op(i).await?;
                out.lock().map_err(|_| "poisoned")?.push(took);
                Ok(())
            }
        },
        &|_| None,
        &first_error,
    )
    .await;
    for took in steps.lock().map_err(|_| "poisoned")?.iter() {
        series.push(took);
    }
    series.wall = phase.wall;
    match first_error
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
