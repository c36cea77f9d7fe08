//! Prints GUI RPC figures: request parsing cost, session handling cost, and loopback round
//! trips through the whole server (one connection, then many at once) with a dispatcher that
//! answers at once. Run with `cargo bench -p ferrite-gui-rpc --bench rpc`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ferrite_gui_rpc::auth::Password;
use ferrite_gui_rpc::request::parse_request;
use ferrite_gui_rpc::session::{ServerVersion, Session};
use ferrite_gui_rpc::{GuiRpcClient, GuiRpcServer, Request, ServerConfig, TcpConfig};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn per_op(label: &str, iterations: u32, mut f: impl FnMut()) {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    let each = start.elapsed() / iterations;
    println!("{label:<48} {:>10.2} µs/op", each.as_secs_f64() * 1e6);
}

fn doc(op: &str) -> String {
    format!("<boinc_gui_rpc_request>\n{op}\n</boinc_gui_rpc_request>\n")
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let set_run_mode =
        doc("<set_run_mode>\n<never/>\n  <duration>60.000000</duration>\n</set_run_mode>");
    let get_state = doc("<get_state/>");
    let mut big = String::from("<set_cc_config>\n<cc_config>\n<log_flags>\n");
    while big.len() < 60_000 {
        big.push_str("<task>1</task>\n<file_xfer>1</file_xfer>\n<sched_ops>0</sched_ops>\n");
    }
    big.push_str("</log_flags>\n</cc_config>\n</set_cc_config>");
    let set_cc_config = doc(&big);

    per_op("parse <get_state/>", 200_000, || {
        black_box(parse_request(black_box(&get_state)).ok());
    });
    per_op("parse boinccmd set_run_mode", 200_000, || {
        black_box(parse_request(black_box(&set_run_mode)).ok());
    });
    per_op("parse set_cc_config (60 KB)", 2_000, || {
        black_box(parse_request(black_box(&set_cc_config)).ok());
    });
    let mut session = Session::new(Password::Disabled, true, ServerVersion::default());
    per_op(
        "session.handle set_run_mode (gate + parse)",
        200_000,
        || {
            black_box(session.handle(black_box(&set_run_mode), String::new));
        },
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut config = ServerConfig::new(Password::Disabled);
        config.tcp = Some(TcpConfig::local(0));
        let (tx, mut rx) = mpsc::channel::<ferrite_gui_rpc::Call>(256);
        tokio::spawn(async move {
            while let Some(call) = rx.recv().await {
                let _ = call.reply.send("<seqno>40</seqno>\n".into());
            }
        });
        let shutdown = CancellationToken::new();
        let server = GuiRpcServer::start(config, tx, shutdown.clone()).await?;
        let addr = server.tcp_addr().ok_or("no address")?;

        let mut client = GuiRpcClient::connect_tcp(addr).await?;
        let n = 20_000;
        let mut latencies = Vec::with_capacity(n);
        let start = Instant::now();
        for _ in 0..n {
            let t = Instant::now();
            client.call(&Request::GetMessageCount).await?;
            latencies.push(t.elapsed());
        }
        let total = start.elapsed();
        latencies.sort_unstable();
        println!(
            "loopback round trip, 1 connection: {:>10.0} calls/s  p50 {:.1} µs  p99 {:.1} µs",
            n as f64 / total.as_secs_f64(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99)
        );

        let connections = 32;
        let per_connection = 2_000;
        let start = Instant::now();
        let tasks: Vec<_> = (0..connections)
            .map(|_| {
                tokio::spawn(async move {
                    let mut client = GuiRpcClient::connect_tcp(addr).await?;
                    for _ in 0..per_connection {
                        client.call(&Request::GetMessageCount).await?;
                    }
                    Ok::<_, ferrite_gui_rpc::ClientError>(())
                })
            })
            .collect();
        for t in tasks {
            t.await??;
        }
        let total = start.elapsed();
        println!(
            "loopback, {connections} connections at once:   {:>10.0} calls/s",
            f64::from(connections * per_connection) / total.as_secs_f64()
        );
        shutdown.cancel();
        server.wait().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}
