use super::*;
use ferrite_gui_rpc::Request;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

async fn http(addr: SocketAddr, request: &[u8]) -> String {
    http_from(std::net::Ipv4Addr::LOCALHOST.into(), addr, request).await
}

/// One request and its whole reply, sent from source address `from` (a loopback address
/// other than 127.0.0.1 is only bindable on Linux).
async fn http_from(from: std::net::IpAddr, addr: SocketAddr, request: &[u8]) -> String {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(from, 0))
        .expect("bind the source");
    let mut s = socket.connect(addr).await.expect("connect");
    s.write_all(request).await.expect("send");
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("reply within 10 s")
        .expect("read");
    String::from_utf8(out).expect("utf-8")
}

fn sources(metrics: watch::Receiver<String>, calls: Option<mpsc::Sender<Call>>) -> Sources {
    Sources {
        metrics,
        calls,
        data_dir: None,
        usage: None,
    }
}

async fn start_local(
    secret: Option<&str>,
    loopback_policy: bool,
    calls: Option<mpsc::Sender<Call>>,
) -> (WebServer, watch::Sender<String>) {
    let (tx, rx) = watch::channel(String::from("# TYPE x gauge\nx 1\n# EOF\n"));
    let server = WebServer::start_with_policy(
        "127.0.0.1:0".parse().expect("addr"),
        Policy::new(loopback_policy, secret.map(str::to_owned)),
        sources(rx, calls),
        Limits::default(),
    )
    .await
    .expect("starts");
    (server, tx)
}

/// A stand-in for the main loop: answers every call with its op name and whether the peer
/// was authorised, and counts the calls.
fn fake_loop() -> (mpsc::Sender<Call>, JoinHandle<Vec<String>>) {
    let (tx, mut rx) = mpsc::channel::<Call>(8);
    let task = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(call) = rx.recv().await {
            seen.push(call.request.op_name().to_owned());
            let _ = call.reply.send(
                format!(
                    "<op>{}</op>\n<client>{}</client>\n",
                    call.request.op_name(),
                    call.peer.client_name.unwrap_or_default()
                )
                .into(),
            );
        }
        seen
    });
    (tx, task)
}

fn post(path: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra}\
         Content-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn serves_metrics_and_404_elsewhere() {
    let (tx, rx) = watch::channel(String::new());
    let server = WebServer::start(
        "127.0.0.1:0".parse().expect("addr"),
        None,
        sources(rx, None),
        Limits::default(),
    )
    .await
    .expect("starts");
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    let early = http(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
    assert!(early.contains(" 503 "), "{early}");

    tx.send_replace("# TYPE x gauge\nx 1\n# EOF\n".to_owned());
    let ok = http(
        addr,
        b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: application/openmetrics-text\r\n\r\n",
    )
    .await;
    let (head, body) = ok.split_once("\r\n\r\n").expect("head and body");
    assert!(
        head.starts_with("HTTP/1.") && head.contains(" 200 OK"),
        "{head}"
    );
    let head_lc = head.to_ascii_lowercase();
    assert!(
        head_lc.contains(&format!("content-type: {}", metrics::CONTENT_TYPE)),
        "{head}"
    );
    assert!(head_lc.contains("content-length: 25"), "{head}");
    assert!(head_lc.contains("cache-control: no-store"), "{head}");
    assert!(!head_lc.contains("access-control"), "no CORS: {head}");
    assert_eq!(body, "# TYPE x gauge\nx 1\n# EOF\n");

    // Without asking for OpenMetrics: the classic text format.
    let plain = http(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
    assert!(
        plain.contains(metrics::CONTENT_TYPE_TEXT)
            && plain.ends_with("\r\n\r\n# TYPE x gauge\nx 1\n"),
        "{plain}"
    );

    // The latest text is served; a query string is ignored.
    tx.send_replace("# TYPE x gauge\nx 2\n# EOF\n".to_owned());
    let newer = http(
        addr,
        b"GET /metrics?x=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(newer.ends_with("x 2\n"), "{newer}");

    let head_only = http(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n").await;
    assert!(head_only.contains(" 200 OK"), "{head_only}");
    assert!(head_only.ends_with("\r\n\r\n"), "{head_only}");

    let other = http(addr, b"GET /other HTTP/1.0\r\n\r\n").await;
    assert!(other.contains(" 404 "), "{other}");
    let post = http(addr, b"POST /metrics HTTP/1.0\r\n\r\n").await;
    assert!(post.contains(" 405 "), "{post}");
    let junk = http(addr, b"hello\r\n\r\n").await;
    assert!(junk.contains(" 400 "), "{junk}");
    // DNS rebinding: a page of another site reaching the port under its own name.
    let rebound = http(
        addr,
        b"GET /metrics HTTP/1.0\r\nHost: evil.example:80\r\n\r\n",
    )
    .await;
    assert!(rebound.contains(" 403 "), "{rebound}");

    server.stop().await;
    assert!(TcpStream::connect(addr).await.is_err(), "closed after stop");
}

#[tokio::test]
async fn refuses_non_loopback_addresses_without_a_secret() {
    let (_tx, rx) = watch::channel(String::from("x"));
    for a in ["0.0.0.0:0", "192.0.2.1:0", "[::]:0"] {
        let err = WebServer::start(
            a.parse().expect("addr"),
            None,
            sources(rx.clone(), None),
            Limits::default(),
        )
        .await
        .expect_err(a);
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{a}");
        let err = WebServer::start(
            a.parse().expect("addr"),
            Some(String::new()),
            sources(rx.clone(), None),
            Limits::default(),
        )
        .await
        .expect_err(a);
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{a}");
    }
}

#[tokio::test]
async fn a_remote_policy_needs_the_bearer_secret() {
    let (server, _tx) = start_local(Some("s3cret"), false, None).await;
    let addr = server.local_addr();
    let anon = http(addr, b"GET /metrics HTTP/1.0\r\nHost: host.example\r\n\r\n").await;
    assert!(anon.contains(" 401 "), "{anon}");
    assert!(
        anon.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{anon}"
    );
    let wrong = http(
        addr,
        b"GET /metrics HTTP/1.0\r\nHost: host.example\r\nAuthorization: Bearer nope\r\n\r\n",
    )
    .await;
    assert!(wrong.contains(" 401 "), "{wrong}");
    let right = http(
        addr,
        b"GET /metrics HTTP/1.0\r\nHost: host.example\r\nAuthorization: Bearer s3cret\r\n\r\n",
    )
    .await;
    assert!(right.ends_with("x 1\n"), "{right}");
    // The page itself holds no data: it loads, and asks for the secret.
    let page = http(addr, b"GET / HTTP/1.0\r\nHost: host.example\r\n\r\n").await;
    assert!(
        page.contains(" 200 OK") && page.contains("<title>Ferrite</title>"),
        "{page}"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_api_forwards_gui_rpc_requests_and_guards_actions() {
    let (calls, seen) = fake_loop();
    let (server, _tx) = start_local(Some("pw"), true, Some(calls)).await;
    let addr = server.local_addr();
    let hdr = "X-Ferrite-Dashboard: 1\r\n";

    // A read: no password needed on loopback.
    let read = http(
        addr,
        &post(
            "/api/rpc",
            hdr,
            "<boinc_gui_rpc_request><get_results/></boinc_gui_rpc_request>",
        ),
    )
    .await;
    assert!(read.contains(" 200 OK"), "{read}");
    assert!(
        read.contains("<boinc_gui_rpc_reply>\n<op>get_results</op>\n<client>Ferrite dashboard</client>\n</boinc_gui_rpc_reply>"),
        "{read}"
    );
    assert!(read.contains("application/xml"), "{read}");

    // An action without the password, with a wrong one, then with it.
    let suspend = "<boinc_gui_rpc_request><suspend_result><project_url>http://p/</project_url>\
                   <name>r1</name></suspend_result></boinc_gui_rpc_request>";
    let anon = http(addr, &post("/api/rpc", hdr, suspend)).await;
    assert!(anon.contains(" 401 "), "{anon}");
    let wrong = http(
        addr,
        &post(
            "/api/rpc",
            &format!("{hdr}Authorization: Bearer px\r\n"),
            suspend,
        ),
    )
    .await;
    assert!(wrong.contains(" 401 "), "{wrong}");
    let ok = http(
        addr,
        &post(
            "/api/rpc",
            &format!("{hdr}Authorization: Bearer pw\r\n"),
            suspend,
        ),
    )
    .await;
    assert!(ok.contains("<op>suspend_result</op>"), "{ok}");

    // What a cross-site form could send: no custom header, or another Origin.
    let form = http(addr, &post("/api/rpc", "", suspend)).await;
    assert!(form.contains(" 403 "), "{form}");
    let cross = http(
        addr,
        &post(
            "/api/rpc",
            &format!("{hdr}Authorization: Bearer pw\r\nOrigin: http://evil.example\r\n"),
            suspend,
        ),
    )
    .await;
    assert!(cross.contains(" 403 "), "{cross}");
    let same = http(
        addr,
        &post(
            "/api/rpc",
            &format!("{hdr}Authorization: Bearer pw\r\nOrigin: http://127.0.0.1\r\n"),
            suspend,
        ),
    )
    .await;
    assert!(same.contains("<op>suspend_result</op>"), "{same}");
    // A preflight gets no CORS permission.
    let preflight = http(
        addr,
        b"OPTIONS /api/rpc HTTP/1.0\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n\
          Access-Control-Request-Method: POST\r\n\r\n",
    )
    .await;
    assert!(
        !preflight
            .to_ascii_lowercase()
            .contains("access-control-allow"),
        "{preflight}"
    );
    // Not a request at all.
    let bad = http(
        addr,
        &post("/api/rpc", hdr, "<boinc_gui_rpc_request><nonsense/>"),
    )
    .await;
    assert!(bad.contains(" 400 "), "{bad}");
    // Too large a body.
    let huge = format!(
        "<boinc_gui_rpc_request><get_state/>{}</boinc_gui_rpc_request>",
        " ".repeat(100_000)
    );
    let big = http(addr, &post("/api/rpc", hdr, &huge)).await;
    assert!(big.contains(" 413 "), "{big}");

    server.stop().await;
    let seen = seen.await.expect("fake loop");
    assert_eq!(seen, ["get_results", "suspend_result", "suspend_result"]);
}

#[tokio::test]
async fn static_files_are_built_in_and_locked_down() {
    let (server, _tx) = start_local(None, true, None).await;
    let addr = server.local_addr();
    let page = http(addr, b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n").await;
    let lc = page.to_ascii_lowercase();
    assert!(lc.contains("content-type: text/html"), "{page}");
    assert!(
        lc.contains("content-security-policy: default-src 'none'"),
        "{page}"
    );
    assert!(lc.contains("x-frame-options: deny"), "{page}");
    // Nothing from another host: every script and style sheet is one of ours.
    for tag in ["src=\"", "href=\""] {
        for part in page.split(tag).skip(1) {
            assert!(part.starts_with("/assets/"), "{tag}{part}");
        }
    }
    for (name, mime, body) in assets::FILES {
        let r = http(
            addr,
            format!("GET /assets/{name} HTTP/1.0\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(r.contains(" 200 OK") && r.ends_with(body), "{name}");
        assert!(r.contains(mime), "{name}");
        // No address of another host (the SVG namespace is a name, not a fetch).
        let rest = body.replace("http://www.w3.org/2000/svg", "");
        assert!(
            !rest.contains("http://") && !rest.contains("https://"),
            "{name}"
        );
    }
    let missing = http(addr, b"GET /assets/nope.js HTTP/1.0\r\n\r\n").await;
    assert!(missing.contains(" 404 "), "{missing}");
    server.stop().await;
}

#[tokio::test]
async fn oversized_and_idle_clients_do_not_block_others() {
    let (_tx, rx) = watch::channel(String::from("# EOF\n"));
    let limits = Limits {
        header_timeout: Duration::from_millis(300),
        max_connections: 4,
        ..Limits::default()
    };
    let server = WebServer::start(
        "127.0.0.1:0".parse().expect("addr"),
        None,
        sources(rx, None),
        limits,
    )
    .await
    .expect("starts");
    let addr = server.local_addr();

    let mut big = b"GET /metrics HTTP/1.0\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 20_000));
    big.extend_from_slice(b"\r\n\r\n");
    let refused = http(addr, &big).await;
    assert!(refused.contains(" 431 "), "{refused}");

    // Two silent clients hold connections; others are still served meanwhile.
    let mut idle1 = TcpStream::connect(addr).await.expect("connect");
    let _idle2 = TcpStream::connect(addr).await.expect("connect");
    for _ in 0..3 {
        let ok = http(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
        assert!(ok.contains(" 200 OK"), "{ok}");
    }
    // The silent one is dropped after the timeout.
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), idle1.read_to_end(&mut out))
        .await
        .expect("closed by the server")
        .expect("read");
    assert!(!String::from_utf8_lossy(&out).contains(" 200 "));
    server.stop().await;
}

#[test]
fn requests_reach_the_parser_the_gui_rpc_server_uses() {
    // The dashboard's op documents are GUI RPC documents: the same parser takes them.
    let r = ferrite_gui_rpc::request::parse_request(
        "<boinc_gui_rpc_request>\n<set_run_mode><never/><duration>3600</duration></set_run_mode>\n</boinc_gui_rpc_request>\n",
    )
    .expect("parses");
    assert_eq!(
        r,
        Request::SetRunMode {
            mode: ferrite_gui_rpc::RunMode::Never,
            duration: 3600.0,
            at_checkpoint: false,
        }
    );
}

/// Raises this process's soft limit on open files to at least `want` (within the hard
/// limit), for tests that hold many sockets.
fn raise_nofile(want: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write `lim`.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
    assert!(
        lim.rlim_cur >= want,
        "the hard limit on open files ({}) is below {want}",
        lim.rlim_max
    );
}

#[tokio::test]
async fn a_scrape_gets_through_a_thousand_idle_and_slow_connections() {
    raise_nofile(1500);
    let (_tx, rx) = watch::channel(String::from("ferrite_up 1\n# EOF\n"));
    let server = WebServer::start(
        "127.0.0.1:0".parse().expect("addr"),
        None,
        sources(rx, None),
        Limits::default(),
    )
    .await
    .expect("starts");
    let addr = server.local_addr();
    // 1,000 connections, far past the limit of 64: every other one silent, the others
    // sending half a request head and no more.
    let mut flood = Vec::new();
    for i in 0..1000 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        if i % 2 == 1 {
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").await;
        }
        flood.push(s);
    }
    // While they are all held, real scrapes are served.
    for _ in 0..3 {
        let ok = http(addr, b"GET /metrics HTTP/1.0\r\n\r\n").await;
        assert!(
            ok.contains(" 200 OK") && ok.contains("ferrite_up 1"),
            "{ok:?}"
        );
    }
    drop(flood);
    server.stop().await;
}

/// Without a GUI RPC password, a loopback bind lets a local peer act unasked, as GUI RPC
/// does; a peer from elsewhere in 127.0.0.0/8 is no local client to GUI RPC (nor to the
/// official client), so it gets nothing but the page.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn only_the_peers_gui_rpc_counts_as_local_act_without_a_password() {
    let (calls, seen) = fake_loop();
    let (server, _tx) = start_local(None, true, Some(calls)).await;
    let addr = server.local_addr();
    let hdr = "X-Ferrite-Dashboard: 1\r\n";
    let read = "<boinc_gui_rpc_request><get_results/></boinc_gui_rpc_request>";
    let act = "<boinc_gui_rpc_request><set_run_mode><never/><duration>0</duration>\
               </set_run_mode></boinc_gui_rpc_request>";
    let local: std::net::IpAddr = "127.0.0.1".parse().expect("ip");
    let other: std::net::IpAddr = "127.0.0.2".parse().expect("ip");

    let r = http_from(local, addr, &post("/api/rpc", hdr, act)).await;
    assert!(r.contains("<op>set_run_mode</op>"), "{r}");
    let r = http_from(local, addr, &post("/api/rpc", hdr, read)).await;
    assert!(r.contains("<op>get_results</op>"), "{r}");

    for body in [act, read] {
        let r = http_from(other, addr, &post("/api/rpc", hdr, body)).await;
        assert!(r.contains(" 401 "), "{body}: {r}");
    }
    let scrape = b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    let r = http_from(other, addr, scrape).await;
    assert!(r.contains(" 401 "), "{r}");
    let r = http_from(local, addr, scrape).await;
    assert!(r.ends_with("x 1\n"), "{r}");
    let page = http_from(other, addr, b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").await;
    assert!(page.contains(" 200 OK"), "{page}");

    server.stop().await;
    assert_eq!(
        seen.await.expect("loop"),
        ["set_run_mode", "get_results"],
        "the other peer's calls never reached the loop"
    );
}
