//! Plugin results of every version (0.1.0 to 1.1.0) and conversions between them.
