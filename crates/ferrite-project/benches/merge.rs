//! Merging a scheduler reply into the client state: a reply with thousands of jobs (a broken
//! or hostile server: the HTTP layer accepts replies of up to 64 MiB) is merged in linear
//! time. Name lookups were linear scans once, so 16,000 jobs took seven seconds of a release
//! build. Prints the time of 3,000 and of 12,000 jobs: linear merging keeps their ratio near
//! 4, quadratic merging near 16. The test `a_reply_with_thousands_of_jobs_is_merged_in_linear_time`
//! checks what such a merge does; the figures are this bench's.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use ferrite_project::reply::{apply_reply, ApplyOptions};
use ferrite_proto::client_state::ClientState;
use ferrite_proto::sched_reply::SchedulerReply;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A reply carrying `n` copies of the one-job fixture's job, each under its own names.
fn reply_with(n: usize) -> SchedulerReply {
    let one = fixture("sched_reply_one_job_unsigned.xml");
    let start = one
        .find("<file_info>\n    <name>wu_unsigned_in</name>")
        .expect("the fixture's first file_info");
    let end = one.find("</scheduler_reply>").expect("the fixture's end");
    let (head, job) = (&one[..start], &one[start..end]);
    let mut text = String::from(head);
    for i in 0..n {
        text.push_str(&job.replace("wu_unsigned", &format!("wu{i}")));
    }
    text.push_str("</scheduler_reply>\n");
    SchedulerReply::parse(&text, "sched_reply.xml")
        .expect("the reply parses")
        .value
}

fn merge(c: &mut Criterion) {
    let state = ClientState::parse(&fixture("state_02_tasks_running.xml"), "state")
        .expect("the state parses")
        .value;
    let mut g = c.benchmark_group("apply_reply");
    g.sample_size(10);
    for n in [3_000, 12_000] {
        let reply = reply_with(n);
        g.bench_function(format!("{n} jobs"), |b| {
            b.iter_batched(
                || state.clone(),
                |mut state| {
                    let out = apply_reply(
                        &mut state,
                        "http://127.0.0.1:18080/",
                        &reply,
                        1.7e9,
                        &ApplyOptions::default(),
                        &|_: &str, _: &str, _: &str| true,
                    );
                    black_box(out.map(|o| o.refusals.len()).unwrap_or(0))
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, merge);
criterion_main!(benches);
