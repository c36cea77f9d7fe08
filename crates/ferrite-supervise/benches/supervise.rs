//! Supervisor overhead bench (filled in below).
fn main() {}
