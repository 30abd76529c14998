//! The helpers themselves: the fake plugin is found and answers, processes and files are what the
//! helpers say, namespaces come and go (ignored unless run as root), Go programs build offline,
//! test images are what they claim and the local registry serves what was pushed.

mod fake_plugin;
mod files;
mod go;
mod images;
mod netns;
mod process;
mod registry;
