//! Public-API tests of crio-lite: the daemon through its real socket, with a fake CNI side and
//! fake namespaces (plain files). Tests with the real ocicni live with the coordinator's e2e suite.

mod api;
mod authority;
mod cli_docs;
mod clients;
mod config;
mod containers;
mod e2e;
mod e2e_support;
mod faults;
mod hostile_layers;
mod http;
mod images;
mod lifecycle;
mod logs;
mod notify;
mod pod_init_escape;
mod privileged;
mod recovery;
mod request_checks;
mod service;
mod streams;
mod support;
