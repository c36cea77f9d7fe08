//! The glue: `Daemon` methods that borrow several parts at once (the state, the options, a
//! part's owner, the event sender, the HTTP tasks) and hand each part what it needs. The
//! parts whose glue is here never name `Daemon` (`tests/architecture.rs` checks it): their
//! methods take what they read as arguments and return what the glue must do.

mod acct_mgr;
mod host;
mod notices;
mod pass;
mod persist;
mod projects;
mod rpc;
mod setup;
mod startup;
mod thermal;
mod trickle;
mod web;
