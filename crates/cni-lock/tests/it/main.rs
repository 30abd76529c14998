//! Public-API tests for cni-lock: in one process, across threads and across processes.

mod api;
mod churn;
mod file_lock;
mod multiproc;
mod support;
