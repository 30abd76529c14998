//! The helpers themselves: the fake plugin is found and answers, processes and files are what the
//! helpers say, namespaces come and go (ignored unless run as root), Go programs build offline.

mod fake_plugin;
mod files;
mod go;
mod netns;
mod process;
