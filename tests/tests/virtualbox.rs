//! VirtualBox: with a `VBoxManage` on its `PATH` (a stand-in script), `ferrited` reports
//! `<virtualbox_version>` in `get_host_info` and in its scheduler requests, as the official
//! client does; with `dont_use_vbox` in `cc_config.xml` it does not look. A VirtualBox app
//! (plan class `vbox…`) that says the CPU's virtualisation extensions are off sets
//! `<p_vm_extensions_disabled>`, which the next request and `get_host_info` carry.

use std::fs;
use std::path::Path;
use std::time::Duration;

use ferrite_e2e::testproject::{self, client_dir_in, set_executable, Server};
use ferrite_e2e::{free_port, gui_rpc, Proc};

const VERSION: &str = "7.0.14r161095";

/// A folder holding a fake `VBoxManage` that prints [`VERSION`].
fn fake_vboxmanage(dir: &Path) -> std::path::PathBuf {
    let bin_dir = dir.join("fakebin");
    fs::create_dir_all(&bin_dir).expect("mkdir");
    let p = bin_dir.join("VBoxManage");
    fs::write(
        &p,
        format!("#!/bin/sh\n[ \"$1\" = --version ] && echo {VERSION}\n"),
    )
    .expect("VBoxManage");
    set_executable(&p);
    bin_dir
}

/// Starts ferrited on `dir` with `fakebin` first on its PATH, attached to `server`.
fn start(dir: &Path, fakebin: &Path, port: u16, server: &Server) -> Proc {
    let mut cmd = Proc::ferrited_command(dir, port, Some(fakebin));
    cmd.arg("--no_gpus")
        .args(["--attach_project", &server.url, testproject::KEY]);
    let mut p = Proc::spawn(cmd);
    p.wait_for("entering main loop", Duration::from_secs(60));
    p
}

fn request_text(dir: &Path, server: &Server) -> String {
    let esc = ferrite_proto::account::escape_project_url(&server.url);
    fs::read_to_string(dir.join(format!("sched_request_{esc}.xml"))).unwrap_or_default()
}

#[test]
fn virtualbox_is_reported_and_a_vbox_app_can_say_vm_extensions_are_off() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fakebin = fake_vboxmanage(tmp.path());
    // A VirtualBox app whose VM cannot start: vboxwrapper's message, then an error exit.
    let app = tmp.path().join("vboxwrapper.sh");
    fs::write(
        &app,
        "#!/bin/sh\necho 'ERR_CPU_VM_EXTENSIONS_DISABLED: VT-x is disabled in the BIOS' >&2\nexit 1\n",
    )
    .expect("app");
    set_executable(&app);
    let server = Server::start_raw(
        tmp.path(),
        &tmp.path().join("server"),
        &[
            "--app",
            &format!("lhc={},vbox64_mt_mcore", app.display()),
            "--jobs",
            "2",
        ],
    );
    let dir = client_dir_in(&tmp.path().join("client"), "", "");
    let port = free_port();
    let mut client = start(&dir, &fakebin, port, &server);
    let host = gui_rpc(port, Some("pw"), "<get_host_info/>\n");
    assert!(
        host.contains(&format!(
            "<virtualbox_version>{VERSION}</virtualbox_version>"
        )),
        "{host}"
    );
    assert!(
        host.contains("<p_vm_extensions_disabled>0</p_vm_extensions_disabled>"),
        "{host}"
    );
    assert!(client
        .output()
        .contains(&format!("VirtualBox version: {VERSION}")));
    // Both jobs fail (the app exits 1) and are reported; the client learnt from the first.
    testproject::nudge_until_reported(
        &server,
        &client,
        port,
        (2, Duration::from_secs(90)),
        "the VirtualBox jobs",
        true,
    );
    let req = request_text(&dir, &server);
    assert!(
        req.contains(&format!(
            "<virtualbox_version>{VERSION}</virtualbox_version>"
        )),
        "{req}"
    );
    assert!(
        req.contains("<p_vm_extensions_disabled>1</p_vm_extensions_disabled>"),
        "{req}"
    );
    let host = gui_rpc(port, Some("pw"), "<get_host_info/>\n");
    assert!(
        host.contains("<p_vm_extensions_disabled>1</p_vm_extensions_disabled>"),
        "{host}"
    );
    assert!(
        client
            .output()
            .contains("Vbox app stderr indicates CPU VM extensions disabled"),
        "{}",
        client.output()
    );
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}

#[test]
fn dont_use_vbox_means_virtualbox_is_not_looked_for() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fakebin = fake_vboxmanage(tmp.path());
    let server = Server::start(tmp.path(), &["--jobs", "0"]);
    let dir = client_dir_in(
        &tmp.path().join("client"),
        "<dont_use_vbox>1</dont_use_vbox>",
        "",
    );
    let port = free_port();
    let mut client = start(&dir, &fakebin, port, &server);
    let host = gui_rpc(port, Some("pw"), "<get_host_info/>\n");
    assert!(!host.contains("<virtualbox_version>"), "{host}");
    let t0 = std::time::Instant::now();
    while request_text(&dir, &server).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{}",
            client.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let req = request_text(&dir, &server);
    assert!(
        req.contains("<host_info>") && !req.contains("<virtualbox_version>"),
        "{req}"
    );
    assert!(client.output().contains("dont_use_vbox"));
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}
