//! The proxy a GUI sets (`boinccmd --set_proxy_settings`, BOINC Manager's options) carries the
//! daemon's scheduler requests when `cc_config.xml` names none.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferrite_e2e::{boinccmd, ferrited_with_gui_rpc, fixture_data_dir, free_port};

/// A stand-in HTTP proxy on loopback: records each request line, answers 502, stops by itself.
fn fake_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(90) {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            if reader.read_line(&mut line).is_ok() && !line.is_empty() {
                out.lock().expect("lock").push(line.trim_end().to_owned());
            }
            let mut stream = reader.into_inner();
            let _ = stream.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (port, seen)
}

#[test]
fn a_proxy_set_through_gui_rpc_carries_the_scheduler_requests() {
    if !ferrite_e2e::peer_or_skip(
        "a_proxy_set_through_gui_rpc_carries_the_scheduler_requests",
        &["boinccmd"],
    ) {
        return;
    }
    let (proxy_port, seen) = fake_proxy();
    let dir = fixture_data_dir("02_tasks_running");
    let port = free_port();
    let _d = ferrited_with_gui_rpc(dir.path(), port);
    let proxy = proxy_port.to_string();
    let set = boinccmd(
        port,
        Some("testpw"),
        &[
            "--set_proxy_settings",
            "127.0.0.1",
            &proxy,
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
        ],
    );
    assert_eq!(set.code, 0, "{}{}", set.stdout, set.stderr);
    let got = boinccmd(port, Some("testpw"), &["--get_proxy_settings"]);
    assert!(got.stdout.contains("127.0.0.1"), "{}", got.stdout);
    let update = boinccmd(
        port,
        Some("testpw"),
        &["--project", "http://127.0.0.1:18080/", "update"],
    );
    assert_eq!(update.code, 0, "{}{}", update.stdout, update.stderr);
    let start = Instant::now();
    loop {
        let lines = seen.lock().expect("lock").clone();
        if lines
            .iter()
            .any(|l| l.starts_with("POST http://127.0.0.1:18080/cgi"))
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no scheduler request went through the proxy; it saw {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
