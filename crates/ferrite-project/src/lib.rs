//! Project protocol logic.
