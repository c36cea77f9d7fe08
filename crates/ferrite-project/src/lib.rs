//! Project protocol logic (overview below is filled in as modules land).

pub mod attach;
pub mod files;
pub mod master;
pub mod names;
pub mod reply;
pub mod request;
pub mod verify;
