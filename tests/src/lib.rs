//! End-to-end tests live in `tests/`; this library holds their shared helpers.
