//! `client_state.xml` with 20 projects and 10,000 tasks: parse (text → domain) and
//! serialize (domain → text). Targets: parse under 100 ms, serialize well under 50 ms.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrite_proto::client_state::{synthetic, ClientState};

fn bench(c: &mut Criterion) {
    let state = synthetic(20, 10_000);
    let xml = state.to_xml();
    eprintln!(
        "state file: {} projects, {} results, {} files, {:.1} MB",
        state.projects.len(),
        state.results().count(),
        state.projects.iter().map(|p| p.files.len()).sum::<usize>(),
        xml.len() as f64 / 1e6
    );
    // On a shared machine wall time includes waiting for a CPU; also print on-CPU time
    // per operation (Linux: this thread's run time from /proc), which load does not inflate.
    if let Some(ms) = cpu_ms_per_op(5, || {
        let parsed = ClientState::parse(black_box(&xml), "client_state.xml");
        black_box(parsed.map(|p| p.value.projects.len()).unwrap_or(0));
    }) {
        eprintln!("parse: {ms:.1} ms on-CPU per operation");
    }
    if let Some(ms) = cpu_ms_per_op(10, || {
        black_box(state.to_xml().len());
    }) {
        eprintln!("serialize: {ms:.1} ms on-CPU per operation");
    }
    let mut g = c.benchmark_group("client_state_20p_10k_tasks");
    g.throughput(Throughput::Bytes(xml.len() as u64));
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(8));
    g.bench_function("parse", |b| {
        b.iter(|| {
            let parsed = ClientState::parse(black_box(&xml), "client_state.xml");
            black_box(parsed.map(|p| p.value.projects.len()).unwrap_or(0))
        })
    });
    g.bench_function("serialize", |b| b.iter(|| black_box(state.to_xml()).len()));
    g.finish();
}

/// This thread's time on a CPU, in nanoseconds (first field of `schedstat`).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn cpu_ms_per_op(n: u32, mut f: impl FnMut()) -> Option<f64> {
    f();
    let start = thread_cpu_ns()?;
    for _ in 0..n {
        f();
    }
    let end = thread_cpu_ns()?;
    Some((end - start) as f64 / 1e6 / f64::from(n))
}

criterion_group!(benches, bench);
criterion_main!(benches);
