//! Public-API tests for ocicni, one module per area.

mod netns;
