//! Storage faults: a full disk while the state is saved and while a file downloads, a data
//! directory that turns read-only, and the traces of a power cut in the state files. The
//! daemon keeps the last good state, says what is wrong (log and GUI RPC messages), asks for
//! no work while nothing more can be stored, and carries on by itself once space returns.
//!
//! The small disks are tmpfs mounts (the tests run as root in CI); a test that cannot mount
//! one says so and does nothing else.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrite_e2e::inspect::{load_state as load, result_names};
use ferrite_e2e::testproject::{
    all_reported, client_dir_in, find_named, reported, set_executable, start_client, status,
    Server, Tmpfs,
};
use ferrite_e2e::{boinccmd, fixture_data_dir, free_port, skip, Proc, STATE_SAVED};

const T: Duration = Duration::from_secs(30);

/// Preferences that let BOINC use a small disk whole.
const SMALL_DISK_PREFS: &str = "<disk_min_free_gb>0</disk_min_free_gb>\n\
     <disk_max_used_pct>100</disk_max_used_pct>\n<disk_max_used_gb>0</disk_max_used_gb>";

/// A tmpfs of `size` at `base/data`, or `None` when it cannot be mounted: test `test` is
/// then skipped (a failure under CI, which runs as root).
fn small_disk(test: &str, base: &Path, size: &str) -> Option<(Tmpfs, PathBuf)> {
    let dir = base.join("data");
    fs::create_dir_all(&dir).expect("mkdir");
    match Tmpfs::mount(&dir, &format!("size={size}")) {
        Ok(m) => Some((m, dir)),
        Err(e) => {
            skip(
                test,
                &format!("cannot mount a {size} tmpfs ({e}); run as root to test a full disk"),
            );
            None
        }
    }
}

/// Fills the file system holding `dir` with a file `dir/filler`, to the last byte.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = fs::File::create(&path).expect("filler");
    let chunk = vec![0u8; 64 << 10];
    let mut small = vec![0u8; 512];
    loop {
        if f.write_all(&chunk).is_err() {
            break;
        }
    }
    // The last bits, a little at a time.
    while f.write_all(&small).is_ok() {}
    small.clear();
    let _ = f.sync_all();
    path
}

/// The GUI RPC event log, as boinccmd prints it.
fn messages(port: u16) -> String {
    boinccmd(port, Some("pw"), &["--get_messages"]).stdout
}

#[test]
fn a_full_disk_stops_work_fetch_keeps_the_last_good_state_and_recovers_by_itself() {
    if !ferrite_e2e::peer_or_skip(
        "a_full_disk_stops_work_fetch_keeps_the_last_good_state_and_recovers_by_itself",
        &["boinccmd"],
    ) {
        return;
    }
    let base = tempfile::tempdir().expect("tmp");
    let Some((_mount, data)) = small_disk(
        "a_full_disk_stops_work_fetch_keeps_the_last_good_state_and_recovers_by_itself",
        base.path(),
        "16m",
    ) else {
        return;
    };
    let server = Server::start(base.path(), &["--jobs", "3"]);
    let dir = client_dir_in(&data, "", SMALL_DISK_PREFS);
    let port = free_port();
    // Attached, but with the network off until the disk is full.
    fs::write(
        dir.join("cc_config.xml"),
        "<cc_config>\n<options>\n<ncpus>4</ncpus>\n</options>\n</cc_config>\n",
    )
    .expect("cc_config");
    let mut client = start_client(&dir, port, Some(&server.url));
    let saves = client.output().matches(STATE_SAVED).count();
    let out = boinccmd(port, Some("pw"), &["--set_network_mode", "never"]);
    assert_eq!(out.code, 0, "{out:?}");
    // The mode change is saved; with the network off nothing else changes, so the file on
    // disk from then on is the last good state.
    client.wait_for_count(STATE_SAVED, saves + 1, T);
    let filler = fill(&data);
    let good = fs::read_to_string(dir.join("client_state.xml")).expect("a saved state");

    // The network comes back on a full disk: the attach goes on, but no work is asked for.
    let out = boinccmd(port, Some("pw"), &["--set_network_mode", "auto"]);
    assert_eq!(out.code, 0, "{out:?}");
    let t0 = Instant::now();
    while !client.output().contains("not asking for work") {
        assert!(
            t0.elapsed() < T,
            "no word of the full disk:\n{}",
            client.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The attach's scheduler request, made on the full disk, has had its answer: whatever
    // that request could have fetched is in the server's count by now.
    let said = client.output().find("not asking for work").expect("said");
    ferrite_e2e::inspect::wait_until("a scheduler request on the full disk", T, || {
        let after = client.output()[said..].to_owned();
        after.contains("Scheduler request completed") || after.contains("Scheduler request failed")
    });
    let s = status(&server.url);
    assert_eq!(
        s["results_sent"],
        0,
        "work fetched on a full disk: {s}\n{}",
        client.output()
    );
    let log = client.output();
    assert!(log.contains("saving the state failed"), "{log}");
    assert!(log.contains("disk full"), "{log}");
    let msgs = messages(port);
    assert!(
        msgs.contains("not asking for work") && msgs.contains("saving the state failed"),
        "GUI RPC messages say why: {msgs}"
    );
    assert_eq!(
        fs::read_to_string(dir.join("client_state.xml")).expect("state"),
        good,
        "the last good state is kept"
    );
    assert!(!dir.join("client_state_next.xml").exists(), "no torn file");

    // Space returns: the daemon notices by itself; the jobs come, run and are reported once.
    fs::remove_file(&filler).expect("rm filler");
    let s = server.wait_until(&client, T, "jobs after space returned", all_reported(3));
    assert_eq!(s["duplicate_reports"], 0);
    for (name, exit) in reported(&s) {
        assert_eq!(exit, 0, "{name}: {s}");
    }
    let log = client.output();
    assert!(log.contains("disk space is available again"), "{log}");
    assert!(log.contains("state file saved again"), "{log}");
    drop(client);
    assert_eq!(load(&dir, "client_state.xml").projects.len(), 1);
}

#[test]
fn a_download_that_fills_the_disk_resumes_by_itself_when_space_returns() {
    if !ferrite_e2e::peer_or_skip(
        "a_download_that_fills_the_disk_resumes_by_itself_when_space_returns",
        &["boinccmd"],
    ) {
        return;
    }
    let base = tempfile::tempdir().expect("tmp");
    let Some((_mount, data)) = small_disk(
        "a_download_that_fills_the_disk_resumes_by_itself_when_space_returns",
        base.path(),
        "16m",
    ) else {
        return;
    };
    // One job with a 4 MiB input, fetched at 1 MB/s; the disk fills up while it comes.
    let input = base.path().join("input.txt");
    fs::write(&input, vec![b'x'; 4 << 20]).expect("input");
    let app = base.path().join("wc.sh");
    fs::write(
        &app,
        "#!/bin/sh\nwc -c < in > out\necho 0 > boinc_finish_called\nexit 0\n",
    )
    .expect("app");
    set_executable(&app);
    let server = Server::start_raw(
        base.path(),
        &base.path().join("server"),
        &["--app", &format!("wc={}", app.display()), "--jobs", "1"],
    );
    let dir = client_dir_in(
        &data,
        "",
        &format!("{SMALL_DISK_PREFS}\n<max_bytes_sec_down>1000000</max_bytes_sec_down>"),
    );
    let port = free_port();
    let mut client = start_client(&dir, port, Some(&server.url));
    client.wait_for("Started download of wc_wu_0_in", T);
    // Part of the input is on disk when the disk fills.
    ferrite_e2e::inspect::wait_until("part of the input on disk", T, || {
        find_named(&dir, "wc_wu_0_in.part")
            .and_then(|p| fs::metadata(p).ok())
            .is_some_and(|m| m.len() > 0)
    });
    let filler = fill(&data);
    client.wait_for("the disk is full", T);
    let log = client.output();
    assert!(
        log.contains("trying again in 10 s"),
        "a full disk is not the server's fault: no backoff:\n{log}"
    );
    client.wait_for("not asking for work", T);
    let msgs = messages(port);
    assert!(
        msgs.contains("the disk is full"),
        "GUI RPC messages: {msgs}"
    );

    // Space returns: the download resumes where it stopped and the job completes, with
    // nobody's help.
    fs::remove_file(&filler).expect("rm filler");
    let t0 = Instant::now();
    let s = server.wait_until(&client, T, "the job after space returned", all_reported(1));
    let log = client.output();
    assert_eq!(reported(&s)[0].1, 0, "{s}\n{log}");
    assert!(
        log.contains("Finished download of wc_wu_0_in (resumed at byte "),
        "resumed, not restarted:\n{log}"
    );
    let out = server.data.join("results/wc_wu_0_0/wc_wu_0_0_out");
    assert_eq!(
        fs::read_to_string(out).expect("output").trim(),
        (4u64 << 20).to_string(),
        "the whole input arrived"
    );
    eprintln!(
        "download on a full disk: job reported {:.1} s after space returned",
        t0.elapsed().as_secs_f64()
    );
}

/// Sets or clears the immutable attribute of `dir` (`chattr`): nothing can be created or
/// removed in it, not even by root. False when the file system does not support it.
fn immutable(dir: &Path, on: bool) -> bool {
    std::process::Command::new("chattr")
        .arg(if on { "+i" } else { "-i" })
        .arg(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn a_data_directory_that_turns_unwritable_keeps_the_last_good_state_and_saves_again_by_itself() {
    if !ferrite_e2e::peer_or_skip("a_data_directory_that_turns_unwritable_keeps_the_last_good_state_and_saves_again_by_itself", &["boinccmd"]) {
        return;
    }
    // A file system cannot be remounted read-only under a running daemon (its lock file is
    // open for writing), so the directory is made immutable instead: every save fails the
    // same way. (A data directory on a read-only file system at start-up is refused with a
    // clear error: `daemon.rs`, unwritable_data_directory_is_a_clear_error.)
    let base = tempfile::tempdir().expect("tmp");
    let Some((_mount, data)) = small_disk(
        "a_data_directory_that_turns_unwritable_keeps_the_last_good_state_and_saves_again_by_itself",
        base.path(),
        "16m",
    ) else {
        return;
    };
    let fixture = fixture_data_dir("02_tasks_running");
    ferrite_e2e::copy_dir(fixture.path(), &data).expect("copy");
    fs::write(data.join("gui_rpc_auth.cfg"), "pw\n").expect("pw");
    let port = free_port();
    let mut p = ferrite_e2e::ferrited_with_gui_rpc(&data, port);
    p.wait_for("entering main loop", T);
    p.wait_for(STATE_SAVED, T);
    if !immutable(&data, true) {
        skip(
            "a_data_directory_that_turns_unwritable_keeps_the_last_good_state_and_saves_again_by_itself",
            "chattr +i is not supported on this file system",
        );
        return;
    }
    // The state file as it is once nothing can be renamed over it is the last good state
    // (read after chattr: the running tasks' progress may have been saved again meanwhile).
    let good = fs::read_to_string(data.join("client_state.xml")).expect("state");
    // A change to save: the volunteer suspends a project.
    let url = load(&data, "client_state.xml").projects[0]
        .project
        .master_url
        .clone();
    let out = boinccmd(port, Some("pw"), &["--project", &url, "suspend"]);
    assert_eq!(out.code, 0, "{out:?}");
    p.wait_for("saving the state failed", T);
    let log = p.output();
    assert!(log.contains("Operation not permitted"), "says why: {log}");
    assert!(log.contains("the last good state is kept"), "{log}");
    assert!(messages(port).contains("saving the state failed"));
    assert_eq!(
        fs::read_to_string(data.join("client_state.xml")).expect("state"),
        good,
        "the last good state is untouched"
    );

    // Writable again: the retry saves by itself.
    assert!(immutable(&data, false));
    p.wait_for("state file saved again", T);
    let saved = load(&data, "client_state.xml");
    assert!(
        saved.projects[0].project.suspended_via_gui,
        "the change made meanwhile is saved"
    );
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
}

/// Starts ferrited on `dir` and returns its output once its main loop runs; stops it.
fn start_and_stop(dir: &Path) -> String {
    let d = dir.to_str().expect("utf-8");
    let mut p = Proc::ferrited(&["--dir", d, "--skip_cpu_benchmarks", "--no_gpus"]);
    p.wait_for("entering main loop", T);
    let out = p.output();
    p.signal(libc::SIGTERM);
    assert!(p.wait(T).success(), "{}", p.output());
    out
}

#[test]
fn a_power_cut_during_a_save_loses_nothing() {
    // 1. The new generation was written and synced, the cut came before the renames: the
    //    complete client_state_next.xml is the newest state.
    let dir = fixture_data_dir("02_tasks_running");
    let text = fs::read_to_string(dir.path().join("client_state.xml")).expect("read");
    let full = load(dir.path(), "client_state.xml");
    let names = result_names(&full);
    assert!(names.len() >= 2, "{names:?}");
    // The older current file lacks the last task.
    let last = names.last().expect("a result").clone();
    let older = drop_result(&text, &last);
    fs::write(dir.path().join("client_state_next.xml"), &text).expect("next");
    fs::write(dir.path().join("client_state.xml"), &older).expect("current");
    let out = start_and_stop(dir.path());
    assert!(
        out.contains("loaded state from client_state_next.xml"),
        "{out}"
    );
    assert_eq!(result_names(&load(dir.path(), "client_state.xml")), names);
    assert!(!dir.path().join("client_state_next.xml").exists());

    // 2. The cut came while client_state_next.xml was written: it is cut short, and the
    //    current file is the last good state.
    let dir = fixture_data_dir("02_tasks_running");
    fs::write(
        dir.path().join("client_state_next.xml"),
        &text[..text.len() * 2 / 3],
    )
    .expect("torn next");
    let out = start_and_stop(dir.path());
    assert!(out.contains("client_state_next.xml not used"), "{out}");
    assert!(out.contains("cut short"), "says why: {out}");
    assert!(
        !out.contains("loaded state from"),
        "the current file is used: {out}"
    );
    assert_eq!(result_names(&load(dir.path(), "client_state.xml")), names);

    // 3. Both the next and the current file were cut short (a file system that lost its
    //    last writes): the previous generation is used.
    let dir = fixture_data_dir("02_tasks_running");
    fs::write(dir.path().join("client_state_prev.xml"), &text).expect("prev");
    fs::write(dir.path().join("client_state_next.xml"), &text[..100]).expect("torn next");
    fs::write(dir.path().join("client_state.xml"), &text[..text.len() / 2]).expect("torn");
    let out = start_and_stop(dir.path());
    assert!(
        out.contains("loaded state from client_state_prev.xml"),
        "{out}"
    );
    assert_eq!(result_names(&load(dir.path(), "client_state.xml")), names);
}

/// `text` without the `<result>` element named `name`.
fn drop_result(text: &str, name: &str) -> String {
    let needle = format!("<name>{name}</name>");
    let at = text.find(&needle).expect("result in the text");
    let start = text[..at].rfind("<result>").expect("result start");
    let end = text[at..].find("</result>").expect("result end") + at + "</result>".len();
    format!("{}{}", &text[..start], &text[end..])
}
