//! The main loop never stalls: while `ferrited` takes in a scheduler reply of many thousand
//! new tasks (reading it, applying it, saving the state, the passes that follow), a GUI
//! polling it every 50 ms gets every answer within 250 ms. A small loopback HTTP responder
//! plays the project's scheduler; its download URLs point at a closed port, so the new
//! tasks' input files stay pending.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use ferrite_e2e::{ferrited_with_gui_rpc, free_port, GuiRpcSession, Proc};
use ferrite_proto::account::account_file_name;
use ferrite_proto::client_state::synthetic;

/// New tasks in the reply: about 9 MB of XML, a reply a big project sends a many-core host.
const TASKS: usize = 10_000;
/// The longest a GUI RPC answer may take, for a loop that never stalls (a bound wide enough
/// for a loaded CI machine and a debug build, not a benchmark). This bound is the behaviour
/// under test (GUI RPC answers within 250 ms while the loop works through a large state).
const ANSWER_BOUND: Duration = Duration::from_millis(250);

/// A scheduler reply with `n` new tasks of the synthetic project's app: per task an input
/// file, a workunit, an output file and a result, in the official layout.
fn reply_text(url: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * 900);
    s.push_str("<scheduler_reply>\n<scheduler_version>800</scheduler_version>\n");
    s.push_str("<request_delay>7</request_delay>\n");
    for t in 0..n {
        let wu = format!("big_wu_{t:08}");
        s.push_str(&format!(
            "<file_info>\n    <name>{wu}_in</name>\n    \
             <url>http://127.0.0.1:9/download/{wu}_in</url>\n    \
             <md5_cksum>{t:032x}</md5_cksum>\n    <nbytes>36</nbytes>\n</file_info>\n\
             <workunit>\n    <rsc_fpops_est>3600000000000</rsc_fpops_est>\n    \
             <name>{wu}</name>\n    <app_name>app0</app_name>\n<file_ref>\n    \
             <file_name>{wu}_in</file_name>\n    <open_name>in</open_name>\n</file_ref>\n\
             </workunit>\n\
             <file_info>\n    <name>{wu}_0_out</name>\n    <url>{url}upload</url>\n    \
             <max_nbytes>100000</max_nbytes>\n</file_info>\n\
             <result>\n<report_deadline>4102444800</report_deadline>\n<wu_name>{wu}</wu_name>\n\
             <name>{wu}_0</name>\n<file_ref>\n    <file_name>{wu}_0_out</file_name>\n    \
             <open_name>out</open_name>\n</file_ref>\n<platform>x86_64-pc-linux-gnu</platform>\n\
             <version_num>100</version_num>\n<plan_class></plan_class>\n</result>\n"
        ));
    }
    s.push_str("</scheduler_reply>\n");
    s
}

/// Reads one HTTP request (head and `Content-Length` body); its first line.
fn read_request(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())
                .flatten()
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    head.lines().next().map(str::to_owned)
}

/// Serves `reply` to every scheduler POST (`/cgi`) and 404 to anything else, for at most
/// `max_requests` connections.
fn serve(listener: TcpListener, reply: String, max_requests: usize) {
    for stream in listener.incoming().take(max_requests) {
        let Ok(mut s) = stream else { continue };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let Some(line) = read_request(&mut s) else {
            continue;
        };
        let (status, body) = if line.starts_with("POST /cgi") {
            ("200 OK", reply.as_str())
        } else {
            ("404 Not Found", "")
        };
        let _ = write!(
            s,
            "HTTP/1.1 {status}\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(body.as_bytes());
    }
}

/// `op` on the GUI's connection; a call that gets no answer (10 s) fails with the daemon's
/// output.
fn call(gui: &mut GuiRpcSession, op: &str, daemon: &Proc) -> String {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gui.call(op))).unwrap_or_else(|_| {
        panic!(
            "{op}: no answer within 10 s; daemon output:\n{}",
            daemon.output()
        )
    })
}

/// The number of `<result>` elements in a `get_results` reply.
fn results_in(reply: &str) -> usize {
    reply.matches("<result>").count()
}

#[test]
#[ignore = "the main loop still stalls on a reply of 10,000 tasks in a debug build: no turn \
            does both a batch and a pass any more, a pass leaves the save's copy of the state \
            to the next turn, and the new results' heads are written batch by batch, but a pass over 10,000 tasks alone \
            still takes 100-400 ms (the scheduler's world is built afresh each pass) and the \
            last batch of the reply 110-190 ms; at load average 1 the slowest \
            get_cc_status of a run took 0.19-0.59 s, get_results 0.08-0.16 s; run with \
            --ignored to see the slow turns"]
fn gui_rpc_answers_within_250_ms_while_a_reply_of_ten_thousand_tasks_is_taken_in() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the scheduler");
    let url = format!("http://{}/", listener.local_addr().expect("address"));
    let reply = reply_text(&url, TASKS);
    thread::spawn(move || serve(listener, reply, 1_000));

    // A data directory holding one attached project (its apps, no tasks) whose scheduler is
    // the responder, with its account file and a GUI RPC password.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = synthetic(1, 0);
    {
        let p = &mut state.projects[0].project;
        p.master_url = url.clone();
        p.scheduler_urls = vec![format!("{url}cgi")];
        p.min_rpc_time = 0.0;
    }
    std::fs::write(dir.path().join("client_state.xml"), state.to_xml()).expect("state file");
    std::fs::write(
        dir.path().join(account_file_name(&url)),
        format!(
            "<account>\n<master_url>{url}</master_url>\n\
             <authenticator>0123456789abcdef</authenticator>\n</account>\n"
        ),
    )
    .expect("account file");
    std::fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password file");
    let port = free_port();
    let daemon = ferrited_with_gui_rpc(dir.path(), port);

    let mut gui = GuiRpcSession::open(port, "pw");
    // The GUI's update button: a scheduler RPC at once.
    let r = gui.call(&format!(
        "<project_update>\n<project_url>{url}</project_url>\n</project_update>\n"
    ));
    assert!(r.contains("<success/>"), "{r}");

    // A Manager's poll, every 50 ms, until the reply's tasks are all listed and then for
    // five seconds more (the save and the passes that follow the reply).
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut slowest = Duration::ZERO;
    let mut calls = 0u32;
    let mut all_in_since: Option<Instant> = None;
    while all_in_since.is_none_or(|t| t.elapsed() < Duration::from_secs(5)) {
        assert!(
            Instant::now() < deadline,
            "the reply's {TASKS} tasks were not listed within 90 s; daemon output:\n{}",
            daemon.output()
        );
        let t0 = Instant::now();
        let status = call(&mut gui, "<get_cc_status/>\n", &daemon);
        let took = t0.elapsed();
        assert!(status.contains("<cc_status>"), "{status}");
        calls += 1;
        slowest = slowest.max(took);
        assert!(
            took < ANSWER_BOUND,
            "get_cc_status took {took:?} (call {calls}); daemon output:\n{}",
            daemon.output()
        );
        if all_in_since.is_none() && calls % 10 == 0 {
            let t0 = Instant::now();
            let n = results_in(&call(&mut gui, "<get_results/>\n", &daemon));
            let took = t0.elapsed();
            assert!(
                took < ANSWER_BOUND,
                "get_results ({n} results) took {took:?}; daemon output:\n{}",
                daemon.output()
            );
            if n >= TASKS {
                all_in_since = Some(Instant::now());
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
    eprintln!("{calls} get_cc_status calls, the slowest {slowest:?}");
}
