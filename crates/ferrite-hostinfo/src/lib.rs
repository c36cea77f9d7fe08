//! Host detection.
