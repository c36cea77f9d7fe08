//! Measures host detection (without benchmarks) on this machine and, with `--cpu`, runs the
//! CPU benchmarks once and prints their figures.
//!
//! `cargo bench -p ferrite-hostinfo --bench detect [-- --cpu]`

use std::time::{Duration, Instant};

use ferrite_hostinfo::{HostDetector, HostProbeConfig};

fn main() {
    let data_dir = std::env::temp_dir();
    let det = HostDetector::new(HostProbeConfig::new(&data_dir));

    // Cold first call (files not yet in the page cache of this process's view, libc init).
    let t = Instant::now();
    let first = det.detect_host();
    let cold = t.elapsed();

    let runs = 50u32;
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let found = det.detect_host();
            let e = t.elapsed();
            std::hint::black_box(found);
            e
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    let max = times[times.len() - 1];
    println!(
        "detect_host: first {cold:?}, median {median:?}, max {max:?} over {runs} runs (p_ncpus {}, m_nbytes {:.0}, os {} / {})",
        first.host.p_ncpus, first.host.m_nbytes, first.host.os_name, first.host.os_version
    );

    let t = Instant::now();
    let gpus = det.probe_gpus();
    println!(
        "probe_gpus (no driver here): {:?}, status {:?}",
        t.elapsed(),
        gpus.status
    );

    let t = Instant::now();
    let p = det.platforms();
    println!("platforms: {:?} in {:?}", p, t.elapsed());

    if std::env::args().any(|a| a == "--cpu") {
        let ncpus = first.host.p_ncpus;
        let r = ferrite_hostinfo::run_benchmarks(ncpus, Duration::from_secs(8));
        println!(
            "run_benchmarks({ncpus} CPUs, 8 s): p_fpops {:.3e} ({:.1} Whetstone passes), p_iops {:.3e} ({:.0} Dhrystone loops), p_membw {:.3e} B/s, CPU share {:.2}, elapsed {:?}",
            r.p_fpops, r.fp_passes, r.p_iops, r.int_loops, r.p_membw, r.cpu_share, r.elapsed
        );
    }
}
