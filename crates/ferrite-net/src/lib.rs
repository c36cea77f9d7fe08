//! HTTP transfers for Ferrite.
