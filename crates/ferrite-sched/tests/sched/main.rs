//! Integration tests of the scheduling core: the seed documents' scenarios driven in virtual
//! time, work-fetch decisions, and property tests.

mod driver;
mod fetching;
mod finishing;
mod gpu_control;
mod max_concurrent;
mod memory;
mod multithread;
mod properties;
mod running;
mod scenarios;
