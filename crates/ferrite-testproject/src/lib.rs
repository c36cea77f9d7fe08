//! A loopback BOINC project server.
