//! Ferrite's client emulator: reads the official BOINC emulator's scenario folders, emulates
//! the same world (host and project availability, project servers that make jobs and refuse
//! ones they think cannot meet their deadline, seeded randomness) and runs the client policy on
//! it in virtual time, reporting the official figures of merit.
//!
//! ```no_run
//! use ferrite_sim::{run, Scenario, SimOptions};
//! let scenario = Scenario::load(std::path::Path::new("scenario_dir"))?;
//! let report = run(&scenario, &SimOptions { duration: 864_000.0, ..SimOptions::default() })?;
//! println!("{}", report.human());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod core;
pub mod engine;
pub mod metrics;
pub mod model;
pub mod policy;
pub mod random;
pub mod scenario;
pub mod server;
pub mod state;
pub mod workload;

pub use engine::{run, OptionsError, SimOptions, START_TIME};
pub use metrics::{ProjectReport, Report};
pub use scenario::{Scenario, ScenarioError};
