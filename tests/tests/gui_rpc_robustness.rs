//! Robustness of `ferrited`'s GUI RPC server against hostile or broken local peers: malformed
//! XML, unterminated requests, oversized requests, many idle connections and random bytes.
//! After each abuse the daemon must still answer `boinccmd` and `ferrite`, and at the end it
//! must exit cleanly on SIGTERM.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use ferrite_e2e::{
    boinccmd_bounded, ferrite_bounded, ferrited_with_gui_rpc, fixture_data_dir, free_port, gui_rpc,
    Proc,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PW: Option<&str> = Some("testpw");
/// Bound on every single wait for the server.
const T: Duration = Duration::from_secs(15);

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(T)).expect("read timeout");
    s.set_write_timeout(Some(T)).expect("write timeout");
    s
}

/// How a connection ended after we sent something.
#[derive(Debug, PartialEq)]
enum End {
    /// The server sent these bytes (possibly several replies), then closed.
    Closed(Vec<u8>),
    /// The server reset the connection (it closed with our bytes still unread).
    Reset(Vec<u8>),
}

/// Reads until the server closes; panics if it neither closes nor resets within [`T`].
fn read_until_closed(s: &mut TcpStream) -> End {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return End::Closed(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return End::Reset(got),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!(
                    "the server neither replied nor closed within {:?}; got {:?}",
                    start.elapsed(),
                    String::from_utf8_lossy(&got)
                )
            }
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

/// Reads one reply (up to and including 0x03), bounded by [`T`].
fn read_reply(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    while !got.ends_with(&[3]) {
        let n = s.read(&mut buf).expect("a reply within the timeout");
        assert!(
            n > 0,
            "closed before a reply: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The daemon still answers: a raw authorised request, `boinccmd` and `ferrite status`.
fn still_answers(port: u16, dir: &std::path::Path) {
    let cc = gui_rpc(port, PW, "<get_cc_status/>\n");
    assert!(cc.contains("<cc_status>"), "{cc}");
    let out = boinccmd_bounded(port, PW, &["--get_cc_status"], T);
    assert_eq!(out.code, 0, "boinccmd: {}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("CPU status"), "{}", out.stdout);
    let host = format!("127.0.0.1:{port}");
    let cwd = tempfile::tempdir().expect("tempdir");
    let data = dir.to_str().expect("utf-8");
    let out = ferrite_bounded(cwd.path(), &["--host", &host, "--dir", data, "status"], T);
    assert_eq!(out.code, 0, "ferrite status: {}", out.stderr);
    assert!(out.stdout.contains("tasks      3"), "{}", out.stdout);
}

fn stop(mut daemon: Proc) {
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait(Duration::from_secs(20));
    let log = daemon.output();
    assert!(status.success(), "ferrited exited with {status}:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn malformed_unterminated_and_oversized_requests_leave_the_daemon_serving() {
    if !ferrite_e2e::peer_or_skip(
        "malformed_unterminated_and_oversized_requests_leave_the_daemon_serving",
        &["boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let daemon = ferrited_with_gui_rpc(dir.path(), port);

    // Malformed XML, framed: the server answers (an error) or closes; never hangs; the
    // same connection, if still open, serves a good request next.
    for bad in [
        &b"<boinc_gui_rpc_request>\n<get_state>\n</boinc_gui_rpc_request>\n\x03"[..],
        b"<<<>>></\x03",
        b"<boinc_gui_rpc_request><get_cc_status/>\x03",
        b"\x03",
        b"<boinc_gui_rpc_request>\n<\xff\xfe\x00 &bogus; <![CDATA[\n</boinc_gui_rpc_request>\n\x03",
    ] {
        let mut s = connect(port);
        s.write_all(bad).expect("send");
        s.write_all(b"<boinc_gui_rpc_request>\n<get_cc_status/>\n</boinc_gui_rpc_request>\n\x03")
            .expect("send");
        s.shutdown(Shutdown::Write).expect("shutdown");
        match read_until_closed(&mut s) {
            End::Closed(got) | End::Reset(got) => {
                let text = String::from_utf8_lossy(&got);
                // Whatever came back is whole, framed replies.
                for reply in text.split_terminator('\u{3}') {
                    assert!(
                        reply.contains("<boinc_gui_rpc_reply>"),
                        "not a reply to {:?}: {reply:?}",
                        String::from_utf8_lossy(bad)
                    );
                }
            }
        }
    }
    still_answers(port, dir.path());

    // A request without its terminator, then the peer closes: no reply, the server closes.
    let mut s = connect(port);
    s.write_all(b"<boinc_gui_rpc_request>\n<get_state/>\n</boinc_gui_rpc_request>\n")
        .expect("send");
    s.shutdown(Shutdown::Write).expect("shutdown");
    assert_eq!(read_until_closed(&mut s), End::Closed(Vec::new()));

    // 10 MB without a terminator: the server stops reading and closes the connection.
    let mut s = connect(port);
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0usize;
    let refused = loop {
        if sent >= 10 * 1024 * 1024 {
            break false;
        }
        match s.write(&chunk) {
            Ok(n) => sent += n,
            Err(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
                    "write failed with {e} after {sent} bytes"
                );
                break true;
            }
        }
    };
    if !refused {
        // Everything fitted in the socket buffers; the server must still close.
        let _ = s.shutdown(Shutdown::Write);
        match read_until_closed(&mut s) {
            End::Closed(got) | End::Reset(got) => assert!(got.is_empty(), "replied to junk"),
        }
    }
    assert!(
        sent < 10 * 1024 * 1024,
        "the server read all 10 MB of an unterminated request"
    );
    still_answers(port, dir.path());
    stop(daemon);
}

/// 300 idle local sockets, more than the server's connection limit (256): new clients still
/// get in, because at the limit the server closes the connection quiet the longest.
#[test]
fn three_hundred_idle_connections_do_not_lock_out_clients() {
    if !ferrite_e2e::peer_or_skip(
        "three_hundred_idle_connections_do_not_lock_out_clients",
        &["boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let daemon = ferrited_with_gui_rpc(dir.path(), port);

    let idle: Vec<TcpStream> = (0..300).map(|_| connect(port)).collect();
    // Some of them have said half a request.
    for s in idle.iter().step_by(3) {
        let mut s = s;
        s.write_all(b"<boinc_gui_rpc_request>\n<get_")
            .expect("send");
    }
    still_answers(port, dir.path());
    // The two most recent idle ones (neither sent half a request) were not closed to make
    // room: each answers a whole request.
    for (i, mut s) in idle.into_iter().enumerate().skip(298) {
        s.write_all(b"<boinc_gui_rpc_request>\n<get_cc_status/>\n</boinc_gui_rpc_request>\n\x03")
            .unwrap_or_else(|e| panic!("idle connection {i} was closed: {e}"));
        let reply = read_reply(&mut s);
        assert!(
            reply.contains("<cc_status>"),
            "idle connection {i} got: {reply}"
        );
    }
    stop(daemon);
}

/// 1,000 connections, far past the limit: the event log says so in one line for the whole
/// burst, not one per connection closed (which would push the rest of the log out).
#[test]
fn a_thousand_connections_log_one_line_per_burst() {
    ferrite_e2e::raise_nofile(1200);
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let daemon = ferrited_with_gui_rpc(dir.path(), port);
    let idle: Vec<TcpStream> = (0..1000).map(|_| connect(port)).collect();
    still_answers(port, dir.path());
    let msgs = gui_rpc(port, PW, "<get_messages><seqno>0</seqno></get_messages>");
    let lines = msgs.matches("too many GUI RPC connections").count();
    assert!(lines >= 1, "the closings are not logged at all: {msgs}");
    assert!(lines <= 3, "{lines} lines about closed connections");
    drop(idle);
    stop(daemon);
}

#[test]
fn random_bytes_on_many_connections_leave_the_daemon_serving() {
    if !ferrite_e2e::peer_or_skip(
        "random_bytes_on_many_connections_leave_the_daemon_serving",
        &["boinccmd"],
    ) {
        return;
    }
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let daemon = ferrited_with_gui_rpc(dir.path(), port);

    let mut rng = ChaCha8Rng::seed_from_u64(0x00fe_2217e);
    for round in 0..60 {
        let len = rng.gen_range(1024..16 * 1024);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        // Every other connection: random text shaped like requests, to reach the parser.
        if round % 2 == 1 {
            const PIECES: &[&str] = &[
                "<boinc_gui_rpc_request>",
                "</boinc_gui_rpc_request>",
                "<get_state/>",
                "<auth1/>",
                "<auth2><nonce_hash>",
                "<set_run_mode><never/><duration>",
                "<project_attach><project_url>",
                "<![CDATA[",
                "&amp;",
                "&#x0;",
                "\u{3}",
                "\n",
            ];
            bytes.clear();
            while bytes.len() < len {
                if rng.gen_bool(0.8) {
                    let piece = PIECES[rng.gen_range(0..PIECES.len())];
                    bytes.extend_from_slice(piece.as_bytes());
                } else {
                    bytes.push(rng.gen());
                }
            }
        }
        let mut s = connect(port);
        // The server may close before taking everything: that is fine.
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(Shutdown::Write);
        let start = Instant::now();
        let _ = read_until_closed(&mut s);
        assert!(start.elapsed() < T, "round {round}: no close");
    }
    still_answers(port, dir.path());
    stop(daemon);
}
