//! Public-API tests.
