//! The error object of the CNI spec, which plugins print on failure.
