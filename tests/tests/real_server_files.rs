//! Files a real BOINC project server (BOINC server 8.3, the kit that `BOINC_SERVER_KIT`
//! names; see `ferrite_e2e::boinc_server`) describes beyond a job's inputs and outputs, and
//! what Ferrite does with them: an output the result template marks `<gzip_when_done/>`
//! reaches the upload directory compressed, and the project's own files
//! (`project_files.xml`: a logo linked as `stat_icon`) are downloaded, verified, linked in
//! the project directory and kept. The server and the data directory are the judges.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{boinccmd, free_port, Proc};

/// How long a handful of short jobs may take on a loaded 2-core machine, benchmarks and
/// downloads included.
const JOBS_LIMIT: Duration = Duration::from_secs(150);

/// Preferences that let tasks run on a busy, shared machine.
const PREFS: &str = "<global_preferences>\n<suspend_cpu_usage>0</suspend_cpu_usage>\n\
                     <run_if_user_active>1</run_if_user_active>\n</global_preferences>\n";

/// A volunteer's `ferrited` on a data directory of its own, attached from the command line.
struct Client {
    proc: Proc,
    dir: tempfile::TempDir,
    port: u16,
}

impl Client {
    fn attached(server: &BoincServer) -> Client {
        Client::attached_with(server, &[])
    }

    /// Attached, with more command-line options.
    fn attached_with(server: &BoincServer, extra: &[&str]) -> Client {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password");
        fs::write(dir.path().join("global_prefs_override.xml"), PREFS).expect("prefs");
        let mut args = vec!["--attach_project", server.url(), server.account_key()];
        args.extend_from_slice(extra);
        let proc = start(dir.path(), port, &args);
        Client { proc, dir, port }
    }

    /// "Update" on the project.
    fn update(&self, server: &BoincServer) {
        let _ = boinccmd(
            self.port,
            Some("pw"),
            &["--project", server.url(), "update"],
        );
    }

    /// The project's directory in the data directory.
    fn project_dir(&self) -> PathBuf {
        let projects = self.dir.path().join("projects");
        fs::read_dir(&projects)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map_or(projects, |e| e.path())
    }

    fn state(&self) -> String {
        fs::read_to_string(self.dir.path().join("client_state.xml")).unwrap_or_default()
    }

    fn stop(&mut self) {
        self.proc.signal(libc::SIGTERM);
        let status = self.proc.wait(Duration::from_secs(60));
        assert!(
            status.success(),
            "ferrited exited with {status}:\n{}",
            self.output()
        );
    }

    fn restart(&mut self) {
        self.proc = start(self.dir.path(), self.port, &[]);
    }

    fn output(&self) -> String {
        self.proc.output()
    }
}

fn start(dir: &Path, port: u16, extra: &[&str]) -> Proc {
    let d = dir.to_str().expect("utf-8");
    let port = port.to_string();
    let mut args = vec!["--dir", d, "--gui_rpc_port", &port];
    args.extend_from_slice(extra);
    let mut p = Proc::ferrited(&args);
    p.wait_for("entering main loop", Duration::from_secs(60));
    p
}

/// Waits until `cond` holds, polling every half second; panics with `context` after `limit`.
fn wait(what: &str, limit: Duration, mut cond: impl FnMut() -> bool, context: impl Fn() -> String) {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "timed out after {limit:?} waiting for {what}\n{}",
        context()
    );
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The MD5 of `path`, by `md5sum`.
fn md5_of(path: &Path) -> String {
    let out = std::process::Command::new("md5sum")
        .arg(path)
        .output()
        .expect("md5sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The text between the first `<tag>` and `</tag>` of `xml`.
fn element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(xml[start..end].trim())
}

/// An output marked `<gzip_when_done/>` is compressed when the task ends: the upload
/// handler stores a gzip file that decompresses to the app's upper-case text, the size and
/// MD5 reported are the compressed file's, and the result is valid. The client stops
/// between the compression and the upload (`--exit_before_upload`) and starts again: the
/// file is compressed once, and the start-up check accepts it as it is.
#[test]
fn a_gzip_when_done_output_reaches_the_server_compressed() {
    if !ferrite_e2e::peer_or_skip(
        "a_gzip_when_done_output_reaches_the_server_compressed",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 0,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("gzip_when_done", &opts) else {
        return;
    };
    let template = "<output_template>\n<file_info>\n<name><OUTFILE_0/></name>\n\
        <generated_locally/>\n<upload_when_present/>\n<gzip_when_done/>\n\
        <max_nbytes>1000000</max_nbytes>\n<url><UPLOAD_URL/></url>\n</file_info>\n<result>\n\
        <file_ref>\n<file_name><OUTFILE_0/></file_name>\n<open_name>out</open_name>\n\
        </file_ref>\n</result>\n</output_template>\n";
    server.add_job_with_result_template("gz_job", template);
    let mut client = Client::attached_with(&server, &["--exit_before_upload"]);
    let status = client.proc.wait(JOBS_LIMIT);
    assert!(status.success(), "{status}:\n{}", client.output());
    assert!(
        client.output().contains("(--exit_before_upload)"),
        "{}",
        client.output()
    );
    client.restart();
    server.wait_valid(
        1,
        (JOBS_LIMIT, Duration::from_secs(30)),
        |s| client.update(s),
        || format!("--- ferrited ---\n{}", client.output()),
    );
    let uploaded: Vec<PathBuf> = files_under(&server.project_dir().join("upload"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("gz_job"))
        .collect();
    assert_eq!(uploaded.len(), 1, "{uploaded:?}");
    let bytes = fs::read(&uploaded[0]).expect("read the upload");
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "not gzip: {bytes:?}");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .expect("gunzip the upload");
    assert_eq!(text, "THE QUICK BROWN FOX GZ_JOB JUMPS OVER THE LAZY DOG\n");
    // The report describes the compressed file the server holds.
    let doc = server.query("select xml_doc_out from result");
    let doc = &doc[0][0];
    let nbytes: f64 = element(doc, "nbytes")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no <nbytes> in {doc}"));
    assert_eq!(nbytes, bytes.len() as f64, "{doc}");
    assert_eq!(
        element(doc, "md5_cksum"),
        Some(md5_of(&uploaded[0]).as_str()),
        "{doc}"
    );
}

/// The project's own files (`project_files.xml`, here a logo linked as `stat_icon`): the
/// scheduler reply lists them, the client downloads and verifies the file, writes the link
/// file the Manager reads, and keeps both once the job is reported and acknowledged (the
/// garbage collection of files) and across a restart, without downloading it again.
#[test]
fn project_files_are_downloaded_linked_and_kept() {
    if !ferrite_e2e::peer_or_skip(
        "project_files_are_downloaded_linked_and_kept",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 1,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("project_files", &opts) else {
        return;
    };
    let logo: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
    let staged = server.project_dir().join("download/logo_181.png");
    fs::write(&staged, &logo).expect("stage the logo");
    let md5 = md5_of(&staged);
    fs::write(
        server.project_dir().join("project_files.xml"),
        format!(
            "<file_info>\n    <name>logo_181.png</name>\n    \
             <url>{}download/logo_181.png</url>\n    <nbytes>{}</nbytes>\n    \
             <md5_cksum>{md5}</md5_cksum>\n</file_info>\n<project_files>\n    <file_ref>\n        \
             <file_name>logo_181.png</file_name>\n        <open_name>stat_icon</open_name>\n    \
             </file_ref>\n</project_files>\n",
            server.url(),
            logo.len()
        ),
    )
    .expect("write project_files.xml");
    let mut client = Client::attached(&server);
    let link_text = |c: &Client| fs::read_to_string(c.project_dir().join("stat_icon")).ok();
    wait(
        "the logo and its stat_icon link",
        JOBS_LIMIT,
        || link_text(&client).is_some(),
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.access_log(),
                client.output()
            )
        },
    );
    let pdir = client.project_dir();
    let esc = pdir
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        link_text(&client).as_deref(),
        Some(format!("<soft_link>projects/{esc}/logo_181.png</soft_link>\n").as_str())
    );
    assert_eq!(fs::read(pdir.join("logo_181.png")).expect("the logo"), logo);
    // The job runs, is reported and acknowledged: its files go, the logo stays.
    server.wait_valid(
        1,
        (JOBS_LIMIT, Duration::from_secs(30)),
        |s| client.update(s),
        || format!("--- ferrited ---\n{}", client.output()),
    );
    let mut pressed = Instant::now();
    wait(
        "the reported task to be removed",
        JOBS_LIMIT,
        || {
            if pressed.elapsed() > Duration::from_secs(20) {
                client.update(&server);
                pressed = Instant::now();
            }
            let s = client.state();
            !s.is_empty() && !s.contains("<result>")
        },
        || format!("{}\n--- ferrited ---\n{}", client.state(), client.output()),
    );
    let state = client.state();
    assert!(state.contains("<name>logo_181.png</name>"), "{state}");
    assert!(
        element(&state, "project_files").is_some_and(|p| p.contains("<open_name>stat_icon")),
        "{state}"
    );
    assert_eq!(fs::read(pdir.join("logo_181.png")).expect("the logo"), logo);
    // A restart keeps them, and the next reply does not fetch the logo again.
    client.stop();
    client.restart();
    let posts = |s: &BoincServer| {
        s.access_log()
            .lines()
            .filter(|l| l.contains("POST /test_cgi/cgi "))
            .count()
    };
    let before = posts(&server);
    client.update(&server);
    wait(
        "a scheduler request after the restart",
        JOBS_LIMIT,
        || posts(&server) > before && client.output().contains("Scheduler request completed"),
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.access_log(),
                client.output()
            )
        },
    );
    assert_eq!(fs::read(pdir.join("logo_181.png")).expect("the logo"), logo);
    assert!(link_text(&client).is_some());
    let gets = server
        .access_log()
        .lines()
        .filter(|l| l.contains("GET ") && l.contains("/logo_181.png "))
        .count();
    assert_eq!(gets, 1, "{}", server.access_log());
}

/// A second output the result template marks `<optional/>`, which the app never writes:
/// the task uploads the first, is reported as a success and ends valid, as with the
/// official client (which clears the missing optional file's upload URLs); it does not wait
/// for the missing file for ever.
#[test]
fn a_missing_optional_output_does_not_hold_the_report() {
    if !ferrite_e2e::peer_or_skip(
        "a_missing_optional_output_does_not_hold_the_report",
        &["boinccmd"],
    ) {
        return;
    }
    let opts = ServerOptions {
        jobs: 0,
        cpu_time: 1,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up("optional_output", &opts) else {
        return;
    };
    let template = "<output_template>\n<file_info>\n<name><OUTFILE_0/></name>\n\
        <generated_locally/>\n<upload_when_present/>\n<max_nbytes>1000000</max_nbytes>\n\
        <url><UPLOAD_URL/></url>\n</file_info>\n<file_info>\n<name><OUTFILE_1/></name>\n\
        <generated_locally/>\n<upload_when_present/>\n<max_nbytes>1000000</max_nbytes>\n\
        <url><UPLOAD_URL/></url>\n</file_info>\n<result>\n<file_ref>\n\
        <file_name><OUTFILE_0/></file_name>\n<open_name>out</open_name>\n</file_ref>\n\
        <file_ref>\n<file_name><OUTFILE_1/></file_name>\n<open_name>never_written</open_name>\n\
        <optional/>\n</file_ref>\n</result>\n</output_template>\n";
    server.add_job_with_result_template("opt_job", template);
    let client = Client::attached(&server);
    let mut pressed = Instant::now();
    server.wait_until(
        "the result to be reported",
        JOBS_LIMIT,
        |s| {
            if pressed.elapsed() > Duration::from_secs(30) {
                client.update(s);
                pressed = Instant::now();
            }
            s.query("select count(*) from result where server_state = 5")
                .first()
                .and_then(|r| r.first())
                .is_some_and(|n| n == "1")
        },
        || {
            format!(
                "{}\n--- ferrited ---\n{}",
                server.scheduler_log(),
                client.output()
            )
        },
    );
    let r = server.query("select outcome, exit_status from result");
    assert_eq!(r[0], ["1", "0"], "{r:?}\n{}", client.output());
    let uploaded: Vec<PathBuf> = files_under(&server.project_dir().join("upload"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("opt_job"))
        .collect();
    assert_eq!(uploaded.len(), 1, "{uploaded:?}");
}
