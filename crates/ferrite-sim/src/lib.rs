//! The Ferrite emulator.
