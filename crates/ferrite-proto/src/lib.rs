//! BOINC's XML documents, as Ferrite reads and writes them.
//!
//! Each document has wire handling (reading with [`xml::XmlReader`], writing with
//! [`xml::XmlWriter`]) kept apart from its domain types. Reading returns the domain value plus
//! warnings ([`xml::Parsed`]): unknown tags are ignored, out-of-range values clamped; only a
//! document that is not XML or lacks a mandatory element is an error, and the error names the
//! file, the element and the line.

pub mod xml;

pub mod host;

pub mod client_state;
pub mod sched_reply;
pub mod sched_request;

pub mod account;
pub mod acct_mgr;
pub mod app_config;
pub mod app_info;
pub mod cc_config;
pub mod crypt;
pub mod gpu_control;
pub mod init_data;
pub mod job_log;
pub mod notices;
pub mod nvc_config;
pub mod prefs;
pub mod prefs_edit;
pub mod statistics;
pub mod version;
