//! Ferrite's scheduling core. Pure code: no I/O, no clock, no tokio.
