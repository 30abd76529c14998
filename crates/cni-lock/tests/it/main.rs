//! Public-API tests for cni-lock: in one process, across threads and across processes.

mod api;
mod churn;
mod multiproc;
mod support;
