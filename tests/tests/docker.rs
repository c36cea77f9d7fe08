//! Docker/Podman detection: with a `podman` on its `PATH` that reports a version and runs
//! the hello-world container (a stand-in script: Podman cannot pull images without a
//! network), `ferrited` reports `<docker_version>` and `<docker_type>` 2 in `get_host_info`,
//! as the official client does; without one it reports neither.

use std::fs;
use std::process::Command;
use std::time::Duration;

use ferrite_e2e::testproject::set_executable;
use ferrite_e2e::{bin, free_port, gui_rpc, Proc};

fn host_info_with_path(path_dir: Option<&std::path::Path>) -> String {
    let dir = tempfile::tempdir().expect("tmp");
    fs::write(dir.path().join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    let port = free_port();
    let mut cmd = Command::new(bin("ferrited"));
    cmd.args(["--dir", dir.path().to_str().expect("utf-8")])
        .args([
            "--gui_rpc_port",
            &port.to_string(),
            "--skip_cpu_benchmarks",
            "--no_gpus",
        ])
        .env("NO_COLOR", "1");
    let base = std::env::var("PATH").unwrap_or_default();
    match path_dir {
        Some(d) => cmd.env("PATH", format!("{}:{base}", d.display())),
        // A PATH with the usual tools but no container engine.
        None => cmd.env("PATH", "/nonexistent"),
    };
    let mut p = Proc::spawn(cmd);
    p.wait_for("GUI RPC listening on TCP", Duration::from_secs(60));
    let reply = gui_rpc(port, Some("pw"), "<get_host_info/>\n");
    p.signal(libc::SIGTERM);
    assert!(p.wait(Duration::from_secs(30)).success(), "{}", p.output());
    reply
}

#[test]
fn podman_is_reported_when_it_can_run_containers() {
    let fake = tempfile::tempdir().expect("tmp");
    let podman = fake.path().join("podman");
    fs::write(
        &podman,
        "#!/bin/sh\ncase \"$1\" in\n--version) echo 'podman version 4.3.1';;\n\
         run) echo 'Hello from Docker!';;\nesac\n",
    )
    .expect("podman");
    set_executable(&podman);
    let reply = host_info_with_path(Some(fake.path()));
    assert!(
        reply.contains("<docker_version>4.3.1</docker_version>")
            && reply.contains("<docker_type>2</docker_type>"),
        "{reply}"
    );

    let reply = host_info_with_path(None);
    assert!(!reply.contains("<docker_version>"), "{reply}");
}
