//! A virtual X display for GUI tests: an `Xvfb` server on a free display number, screenshots
//! with `xwd` (decoded here: 24/32-bit TrueColor ZPixmap, as Xvfb serves), written as PNG,
//! a recording GUI RPC proxy that keeps every request a GUI sent, and the accessibility
//! tree (AT-SPI) of a GTK program on that display: which widgets show, with what text.

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::{run_bounded, Proc};

/// Whether `Xvfb`, `xdotool` and `xwd` are installed (`.ci/run` installs them).
pub fn x_tools_installed() -> bool {
    crate::installed(&["Xvfb", "xdotool", "xwd"])
}

/// An `Xvfb` server (1024×768, 24 bits), stopped when dropped.
#[derive(Debug)]
pub struct Xvfb {
    _proc: Proc,
    /// `:N`.
    pub display: String,
}

impl Xvfb {
    /// Starts Xvfb on the first free display number from 90 on (a number whose lock file
    /// exists, or whose server fails to start, is skipped); at most 40 tries.
    pub fn start() -> Xvfb {
        for n in 90..130 {
            if Path::new(&format!("/tmp/.X{n}-lock")).exists() {
                continue;
            }
            let mut cmd = Command::new("Xvfb");
            cmd.arg(format!(":{n}"))
                .args(["-screen", "0", "1024x768x24", "-nolisten", "tcp"]);
            let mut proc = Proc::spawn(cmd);
            let socket = format!("/tmp/.X11-unix/X{n}");
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(20) {
                if proc.has_exited() {
                    break;
                }
                // The display is ours once its lock file names our server: another test
                // binary's Xvfb may have taken the same number a moment before (ours then
                // exits), and its socket is already there.
                // And it is ready once a client gets an answer from it: a socket left by a
                // server killed earlier can be there before ours has made its own.
                let lock = fs::read_to_string(format!("/tmp/.X{n}-lock")).unwrap_or_default();
                if Path::new(&socket).exists() && lock.trim() == proc.pid().to_string() {
                    let x = Xvfb {
                        _proc: proc,
                        display: format!(":{n}"),
                    };
                    if x.xdotool(&["getdisplaygeometry"]).is_some() {
                        return x;
                    }
                    proc = x._proc;
                }
                thread::sleep(Duration::from_millis(100));
            }
        }
        panic!("no free X display for Xvfb in :90..:129");
    }

    /// Runs `xdotool args` on this display; its stdout, or `None` when it failed.
    pub fn xdotool(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("xdotool")
            .args(args)
            .env("DISPLAY", &self.display)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The ids of the windows whose name matches regular expression `name`.
    pub fn windows(&self, name: &str) -> Vec<String> {
        self.xdotool(&["search", "--name", name])
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// A window's name.
    pub fn window_name(&self, id: &str) -> String {
        self.xdotool(&["getwindowname", id])
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// A window's position and size on the screen: (x, y, width, height).
    pub fn geometry(&self, id: &str) -> Option<(usize, usize, usize, usize)> {
        let out = self.xdotool(&["getwindowgeometry", "--shell", id])?;
        let field = |k: &str| -> Option<usize> {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.trim().parse::<i64>().ok())
                .map(|v| v.max(0) as usize)
        };
        Some((field("X")?, field("Y")?, field("WIDTH")?, field("HEIGHT")?))
    }

    /// What the display is doing, for a failure's message: whether it answers a client and
    /// what its server printed.
    pub fn describe(&self) -> String {
        let answers = self.xdotool(&["getdisplaygeometry"]).is_some();
        format!(
            "Xvfb {} (pid {}): {}; its output:\n{}",
            self.display,
            self._proc.pid(),
            if answers {
                "answering"
            } else {
                "NOT answering"
            },
            self._proc.output()
        )
    }

    /// Starts the GUI program `make()` builds on this display and waits (at most 60 s) until
    /// it has a window. A program that ends before that because it could not open the
    /// display (GTK: "Unable to initialize GTK+") is started once more, the display's state
    /// printed; any other early end, or a second failure, panics with both outputs.
    pub fn spawn_gui(&self, make: impl Fn() -> Command) -> Proc {
        let mut first_output = None;
        for _ in 0..2 {
            let mut p = Proc::spawn(make());
            let pid = p.pid().to_string();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(60) {
                if self
                    .xdotool(&["search", "--pid", &pid])
                    .is_some_and(|w| !w.trim().is_empty())
                {
                    return p;
                }
                if p.has_exited() {
                    break;
                }
                thread::sleep(Duration::from_millis(200));
            }
            let out = p.output();
            let cannot_open =
                out.contains("Unable to initialize GTK") || out.contains("cannot open display");
            assert!(
                cannot_open && first_output.is_none(),
                "the GUI program did not show a window within 60 s or ended;\n\
                 its output:\n{out}\nan earlier try's:\n{}\n{}",
                first_output.unwrap_or_default(),
                self.describe()
            );
            eprintln!(
                "the GUI program could not open {}; starting it again. {}",
                self.display,
                self.describe()
            );
            first_output = Some(out);
        }
        unreachable!("the loop returns or panics");
    }

    /// Takes a screenshot of the whole screen.
    pub fn screenshot(&self) -> Image {
        let out = Command::new("xwd")
            .args(["-root", "-silent"])
            .env("DISPLAY", &self.display)
            .output()
            .expect("run xwd");
        assert!(out.status.success(), "xwd failed");
        Image::from_xwd(&out.stdout).expect("xwd output")
    }
}

/// Whether a D-Bus session bus and the AT-SPI tools (`dbus-daemon`, `at-spi-bus-launcher`,
/// Python's `pyatspi` for Debian's `/usr/bin/python3`) are installed (`.ci/run` installs them).
pub fn accessibility_installed() -> bool {
    crate::installed(&["dbus-daemon"])
        && Path::new("/usr/libexec/at-spi-bus-launcher").exists()
        && Command::new("/usr/bin/python3")
            .args(["-c", "import pyatspi"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
}

/// Prints the showing widgets of the program whose process id is `argv[1]`, one a line:
/// window title, role, name and (for text fields) the text, tab-separated.
const ATSPI_PROBE: &str = r#"
import sys, pyatspi
pid = int(sys.argv[1])
def clean(s):
    return (s or "").replace("\t", " ").replace("\n", " ")
def showing(a):
    try:
        return a.getState().contains(pyatspi.STATE_SHOWING)
    except Exception:
        return False
def walk(a, title, depth):
    for i in range(a.childCount):
        c = a.getChildAtIndex(i)
        if c is None or not showing(c):
            continue
        role = c.getRoleName()
        text = ""
        if role in ("text", "password text", "entry"):
            try:
                text = c.queryText().getText(0, -1)
            except Exception:
                pass
        print("\t".join([clean(title), clean(role), clean(c.name), clean(text)]))
        if depth < 40:
            walk(c, title, depth + 1)
desktop = pyatspi.Registry.getDesktop(0)
for i in range(desktop.childCount):
    app = desktop.getChildAtIndex(i)
    try:
        if app is None or app.get_process_id() != pid:
            continue
    except Exception:
        continue
    for j in range(app.childCount):
        w = app.getChildAtIndex(j)
        if w is not None and showing(w):
            print("\t".join([clean(w.name), clean(w.getRoleName()), clean(w.name), ""]))
            walk(w, w.name, 0)
"#;

/// A private D-Bus session bus on an X display: GTK programs started with [`env`](Self::env)
/// publish their widgets on the accessibility bus it starts on demand (`at-spi-bus-launcher`,
/// which ends with it), and [`widgets`](Self::widgets) reads them. Stopped when dropped.
#[derive(Debug)]
pub struct Accessibility {
    _bus: Proc,
    address: String,
    display: String,
}

/// A widget on screen, as the accessibility tree describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widget {
    /// The title of its top-level window.
    pub window: String,
    /// Its role: `label`, `push button`, `text`, `table cell`, `frame`, `dialog`...
    pub role: String,
    /// Its name (a label's or button's text).
    pub name: String,
    /// A text field's content (empty for other roles).
    pub text: String,
}

impl Accessibility {
    /// Starts the bus for display `x`, its runtime files under `dir`.
    pub fn start(x: &Xvfb, dir: &Path) -> Accessibility {
        let runtime = dir.join("a11y-runtime");
        fs::create_dir_all(&runtime).expect("runtime dir");
        let mut cmd = Command::new("dbus-daemon");
        cmd.args(["--session", "--nofork", "--nopidfile", "--print-address"])
            .env("DISPLAY", &x.display)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("HOME", dir);
        let mut bus = Proc::spawn(cmd);
        bus.wait_for("unix:", Duration::from_secs(20));
        let address = bus
            .output()
            .lines()
            .find(|l| l.starts_with("unix:"))
            .expect("the bus prints its address")
            .trim()
            .to_owned();
        Accessibility {
            _bus: bus,
            address,
            display: x.display.clone(),
        }
    }

    /// Puts `cmd` on this bus with the GTK accessibility bridge on.
    pub fn env(&self, cmd: &mut Command) {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env_remove("NO_AT_BRIDGE");
    }

    /// The showing widgets of process `pid` (empty when it has none yet; a widget that does
    /// not answer is left out). Panics when the tree cannot be read within 30 s.
    pub fn widgets(&self, pid: i32) -> Vec<Widget> {
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-c", ATSPI_PROBE, &pid.to_string()])
            .env("DISPLAY", &self.display)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address);
        let (out, _) = run_bounded(cmd, Duration::from_secs(30));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                Some(Widget {
                    window: f.next()?.to_owned(),
                    role: f.next()?.to_owned(),
                    name: f.next()?.to_owned(),
                    text: f.next().unwrap_or("").to_owned(),
                })
            })
            .collect()
    }
}

/// An RGB image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Row-major RGB, 3 bytes a pixel.
    pub rgb: Vec<u8>,
}

fn be32(b: &[u8], i: usize) -> Option<usize> {
    let s = b.get(i * 4..i * 4 + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize)
}

impl Image {
    /// Decodes an `xwd` dump of a 24- or 32-bit-per-pixel TrueColor ZPixmap.
    pub fn from_xwd(b: &[u8]) -> Option<Image> {
        let header_size = be32(b, 0)?;
        let (width, height) = (be32(b, 4)?, be32(b, 5)?);
        let byte_order = be32(b, 7)?;
        let bits_per_pixel = be32(b, 11)?;
        let bytes_per_line = be32(b, 12)?;
        let (rmask, gmask, bmask) = (be32(b, 14)?, be32(b, 15)?, be32(b, 16)?);
        let ncolors = be32(b, 19)?;
        if bits_per_pixel != 32 && bits_per_pixel != 24 {
            return None;
        }
        let bpp = bits_per_pixel / 8;
        let start = header_size + ncolors * 12;
        let mut rgb = Vec::with_capacity(width * height * 3);
        for y in 0..height {
            let row =
                b.get(start + y * bytes_per_line..start + y * bytes_per_line + width * bpp)?;
            for px in row.chunks_exact(bpp) {
                let mut v = 0usize;
                for (k, byte) in px.iter().enumerate() {
                    let shift = if byte_order == 0 {
                        8 * k
                    } else {
                        8 * (bpp - 1 - k)
                    };
                    v |= (*byte as usize) << shift;
                }
                let chan = |mask: usize| -> u8 {
                    if mask == 0 {
                        return 0;
                    }
                    ((v & mask) >> mask.trailing_zeros()) as u8
                };
                rgb.extend_from_slice(&[chan(rmask), chan(gmask), chan(bmask)]);
            }
        }
        Some(Image { width, height, rgb })
    }

    /// How many distinct colours the image has (a blank screen has one).
    pub fn distinct_colours(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        for px in self.rgb.chunks_exact(3) {
            seen.insert([px[0], px[1], px[2]]);
        }
        seen.len()
    }

    /// How many distinct colours the rectangle at (`x`, `y`) of `w`×`h` has (clipped to the
    /// image).
    pub fn distinct_colours_in(&self, x: usize, y: usize, w: usize, h: usize) -> usize {
        let mut seen = std::collections::HashSet::new();
        for row in y..(y + h).min(self.height) {
            for col in x..(x + w).min(self.width) {
                let i = (row * self.width + col) * 3;
                seen.insert([self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]);
            }
        }
        seen.len()
    }

    /// The fraction of pixels that differ between two images of the same size.
    pub fn difference(&self, other: &Image) -> f64 {
        if self.width != other.width || self.height != other.height {
            return 1.0;
        }
        let n = self
            .rgb
            .chunks_exact(3)
            .zip(other.rgb.chunks_exact(3))
            .filter(|(a, b)| a != b)
            .count();
        n as f64 / (self.width * self.height).max(1) as f64
    }

    /// Writes the image as an 8-bit RGB PNG.
    pub fn write_png(&self, path: &Path) -> std::io::Result<()> {
        let mut raw = Vec::with_capacity(self.rgb.len() + self.height);
        for row in self.rgb.chunks_exact(self.width * 3) {
            raw.push(0);
            raw.extend_from_slice(row);
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&raw)?;
        let idat = z.finish()?;
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&(self.width as u32).to_be_bytes());
        ihdr.extend_from_slice(&(self.height as u32).to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        for (kind, data) in [
            (b"IHDR", &ihdr[..]),
            (b"IDAT", &idat[..]),
            (b"IEND", &[][..]),
        ] {
            png.extend_from_slice(&(data.len() as u32).to_be_bytes());
            png.extend_from_slice(kind);
            png.extend_from_slice(data);
            let mut crc = flate2::Crc::new();
            crc.update(kind);
            crc.update(data);
            png.extend_from_slice(&crc.sum().to_be_bytes());
        }
        fs::write(path, png)
    }
}

/// A loopback TCP proxy in front of a GUI RPC server that records every request a GUI sends
/// (the text between 0x03 terminators). Stops when dropped.
#[derive(Debug)]
pub struct RecordingProxy {
    /// The port GUIs connect to.
    pub port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl RecordingProxy {
    /// Starts a proxy to `127.0.0.1:target`.
    pub fn start(target: u16) -> RecordingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (reqs, stopped) = (requests.clone(), stop.clone());
        thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        if let Ok(server) = TcpStream::connect(("127.0.0.1", target)) {
                            pipe(client, server, reqs.clone(), stopped.clone());
                        }
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        RecordingProxy {
            port,
            requests,
            stop,
        }
    }

    /// The requests so far, in order of arrival.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Waits until a request after the first `after` contains `needle`; false after `limit`.
    pub fn wait_for(&self, after: usize, needle: &str, limit: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if self
                .requests()
                .iter()
                .skip(after)
                .any(|r| r.contains(needle))
            {
                return true;
            }
            thread::sleep(Duration::from_millis(200));
        }
        false
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies both ways between a GUI and the server, recording the GUI's requests. Each
/// direction ends when its side closes, or within a second of the proxy stopping.
fn pipe(
    client: TcpStream,
    server: TcpStream,
    reqs: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) {
    let timeout = Some(Duration::from_secs(1));
    for s in [&client, &server] {
        let _ = s.set_read_timeout(timeout);
    }
    let (Ok(mut c_read), Ok(mut s_write)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let stop2 = stop.clone();
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        let mut pending = Vec::new();
        while !stop2.load(Ordering::Relaxed) {
            match c_read.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(i) = pending.iter().position(|b| *b == 3) {
                        let msg: Vec<u8> = pending.drain(..=i).collect();
                        if let Ok(mut r) = reqs.lock() {
                            r.push(String::from_utf8_lossy(&msg[..msg.len() - 1]).into_owned());
                        }
                    }
                    if s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            match s_read.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if c_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        let _ = c_write.shutdown(Shutdown::Write);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xwd_pixels_decode_and_png_is_written() {
        // A 2×1 xwd: header of 25 words + "x\0" name, no colormap, 32 bpp LSB first.
        let mut b = Vec::new();
        let header_size = 100 + 4;
        let words = [
            header_size,
            7,
            2,
            24,
            2,
            1,
            0,
            0,
            32,
            0,
            32,
            32,
            8,
            4,
            0xff0000,
            0xff00,
            0xff,
            8,
            256,
            0,
            2,
            1,
            0,
            0,
            0,
        ];
        for w in words {
            b.extend_from_slice(&(w as u32).to_be_bytes());
        }
        b.extend_from_slice(b"x\0\0\0");
        b.extend_from_slice(&[0x30, 0x20, 0x10, 0, 0xff, 0xff, 0xff, 0]);
        let img = Image::from_xwd(&b).expect("decode");
        assert_eq!((img.width, img.height), (2, 1));
        assert_eq!(img.rgb, [0x10, 0x20, 0x30, 0xff, 0xff, 0xff]);
        assert_eq!(img.distinct_colours(), 2);
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("a.png");
        img.write_png(&p).expect("png");
        let png = fs::read(&p).expect("read");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert!(png.ends_with(&[0xae, 0x42, 0x60, 0x82]), "IEND's CRC");
    }
}
