//! BOINC GUI RPC protocol.
