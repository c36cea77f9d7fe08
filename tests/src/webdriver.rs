//! A headless Chromium driven through `chromedriver` (Debian packages `chromium` and
//! `chromium-driver`) over the W3C WebDriver protocol: plain JSON over HTTP/1.1 on loopback,
//! which needs no more than the few calls below.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::{free_port, installed};

/// The key W3C WebDriver names element references with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Whether `chromium` and `chromedriver` are installed (`.ci/run` installs them).
pub fn chromium_installed() -> bool {
    installed(&["chromium", "chromedriver"])
}

/// A running `chromedriver` with one browser session; both end on drop.
#[derive(Debug)]
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `chromedriver` on a free loopback port and a headless Chromium with a fresh
    /// profile and nothing that talks to the network on its own, `width` × `height` pixels.
    pub fn start(width: u32, height: u32) -> Browser {
        assert!(
            chromium_installed(),
            "chromium and chromedriver are not installed: apt-get install chromium \
             chromium-driver (.ci/run does)"
        );
        let port = free_port();
        // chromedriver may leave a connection made before it is ready unanswered: wait for
        // its word that it listens (its output is drained until it ends).
        let mut driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stdout = driver.stdout.take().expect("chromedriver output");
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("started successfully") {
                    let _ = ready_tx.send(());
                }
            }
        });
        let profile = tempfile::tempdir().expect("profile dir");
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromedriver did not start");
        let status = b.call("GET", "/status", None);
        assert!(
            status.as_ref().is_ok_and(|v| v["ready"] == true),
            "chromedriver not ready: {status:?}"
        );
        let dir = b._profile.path().to_str().expect("utf-8").to_owned();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage",
                    format!("--user-data-dir={dir}"),
                    format!("--window-size={width},{height}"),
                ],
            },
        }}});
        let v = b
            .call("POST", "/session", Some(&caps))
            .unwrap_or_else(|e| panic!("no browser session: {e}"));
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {v}"))
            .to_owned();
        b
    }

    /// One WebDriver command: its `value`, or the error it answered.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let body = body.map(Value::to_string).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        );
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        // Read the head, then as many bytes as Content-Length says: chromedriver does not
        // always close the connection after its reply.
        let mut out = Vec::new();
        let mut chunk = [0u8; 16384];
        let (split, length, chunked) = loop {
            let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed before the reply".into());
            }
            out.extend_from_slice(&chunk[..n]);
            if let Some(split) = out.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&out[..split]).to_ascii_lowercase();
                let length = head.lines().find_map(|l| {
                    l.strip_prefix("content-length:")
                        .and_then(|v| v.trim().parse::<usize>().ok())
                });
                break (split, length, head.contains("transfer-encoding: chunked"));
            }
        };
        let want = |out: &[u8]| match length {
            Some(n) => out.len() >= split + 4 + n,
            None => chunked && out.ends_with(b"0\r\n\r\n"),
        };
        while !want(&out) {
            let n = s.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&chunk[..n]);
        }
        let rest = &out[split + 4..];
        let body = if chunked {
            dechunk(rest)
        } else {
            rest[..length.unwrap_or(rest.len()).min(rest.len())].to_vec()
        };
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out)))?;
        if v["value"]["error"].is_string() {
            return Err(format!(
                "{}: {}",
                v["value"]["error"], v["value"]["message"]
            ));
        }
        Ok(v["value"].clone())
    }

    fn session_call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.session_call("POST", "/url", Some(&json!({ "url": url })))
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Runs `script` (a function body; `return` gives the value) in the page.
    pub fn execute(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            Some(&json!({ "script": script, "args": [] })),
        )
        .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Runs `script` until it returns `true`; panics with `what` after `timeout`.
    pub fn wait_for(&self, what: &str, script: &str, timeout: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if self.execute(script) == Value::Bool(true) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let page = self.execute("return document.body ? document.body.innerText : ''");
        panic!("timed out waiting for {what}; the page says:\n{page}");
    }

    /// Clicks the first element matching a CSS selector.
    pub fn click(&self, css: &str) -> Result<(), String> {
        let el = self.session_call(
            "POST",
            "/element",
            Some(&json!({ "using": "css selector", "value": css })),
        )?;
        let id = el[ELEMENT]
            .as_str()
            .ok_or_else(|| format!("no element reference in {el}"))?
            .to_owned();
        self.session_call("POST", &format!("/element/{id}/click"), Some(&json!({})))
            .map(|_| ())
    }

    /// Accepts the open `confirm()` dialog, if one is open: whether one was.
    pub fn accept_dialog(&self) -> bool {
        self.session_call("POST", "/alert/accept", Some(&json!({})))
            .is_ok()
    }

    /// Chooses `value` in the first `<select>` matching a CSS selector (as a user would,
    /// firing its change event).
    pub fn select(&self, css: &str, value: &str) {
        let css_js = serde_json::to_string(css).expect("json");
        let value_js = serde_json::to_string(value).expect("json");
        let done = self.execute(&format!(
            "const s = document.querySelector({css_js}); if (!s) return false; \
             s.value = {value_js}; s.dispatchEvent(new Event('change')); return s.value === {value_js};"
        ));
        assert_eq!(done, Value::Bool(true), "select {value} in {css}");
    }

    /// Types `text` into the first element matching a CSS selector.
    pub fn type_into(&self, css: &str, text: &str) {
        let el = self
            .session_call(
                "POST",
                "/element",
                Some(&json!({ "using": "css selector", "value": css })),
            )
            .unwrap_or_else(|e| panic!("find {css}: {e}"));
        let id = el[ELEMENT].as_str().expect("element reference").to_owned();
        self.session_call(
            "POST",
            &format!("/element/{id}/value"),
            Some(&json!({ "text": text })),
        )
        .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    /// A PNG of the whole window, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        let v = self
            .session_call("GET", "/screenshot", None)
            .unwrap_or_else(|e| panic!("screenshot: {e}"));
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64 text"))
            .expect("base64");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(path, png).expect("write screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.session_call("DELETE", "", None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The body of a chunked HTTP reply.
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&rest[..eol]);
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        let after = &rest[eol + 2..];
        if n == 0 || after.len() < n {
            break;
        }
        out.extend_from_slice(&after[..n]);
        rest = after[n..].strip_prefix(b"\r\n").unwrap_or(&after[n..]);
    }
    out
}
