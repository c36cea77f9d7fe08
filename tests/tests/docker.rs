//! Docker/Podman detection: with a `podman` on its `PATH` that reports a version and runs
//! the hello-world container (a stand-in script: Podman cannot pull images without a
//! network), `ferrited` reports `<docker_version>` and `<docker_type>` 2 in `get_host_info`,
//! as the official client does; without one it reports neither. The same stand-in, which
//! records its calls, shows the clean-up of BOINC containers and images.

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

/// A fake `podman` in `dir` that records its calls in `dir/calls`, runs hello-world and
/// lists a stale BOINC container and image, the ones of `project`'s job `dock_wu_0_0`, and a
/// container and image of the volunteer's own.
fn recording_podman(dir: &std::path::Path, project_esc: &str) -> std::path::PathBuf {
    let calls = dir.join("calls");
    let podman = dir.join("podman");
    fs::write(
        &podman,
        format!(
            "#!/bin/sh\necho \"$*\" >> {calls}\ncase \"$1\" in\n\
             --version) echo 'podman version 4.3.1';;\n\
             run) echo 'Hello from Docker!';;\n\
             ps) echo 'CONTAINER ID  IMAGE  COMMAND  CREATED  STATUS  PORTS  NAMES'\n\
                 echo '6d4877e0d071  localhost/boinc__old__wu:latest  ./work  2 days ago  Exited (0)  boinc__old__wu_0'\n\
                 echo '7d4877e0d071  localhost/boinc__{esc}__dock_wu_0:latest  ./work  1 s ago  Up 1 s  boinc__{esc}__dock_wu_0_0'\n\
                 echo 'bf4ce6e19182  localhost/mine:latest  ./counter.sh  9 s ago  Up 9 s  competent_ishizaka';;\n\
             images) echo 'REPOSITORY  TAG  IMAGE ID  CREATED  SIZE'\n\
                 echo 'localhost/boinc__old__wu  latest  cbc1  2 days ago  121 MB'\n\
                 echo 'localhost/boinc__{esc}__dock_wu_0  latest  cbc2  1 s ago  121 MB'\n\
                 echo 'localhost/mine  latest  cbc3  1 day ago  1 MB';;\n\
             esac\nexit 0\n",
            calls = calls.display(),
            esc = project_esc.to_lowercase(),
        ),
    )
    .expect("podman");
    set_executable(&podman);
    podman
}

#[test]
fn boinc_containers_and_images_of_ended_jobs_are_removed_and_others_left_alone() {
    use ferrite_e2e::testproject::{self, client_dir, Server};
    let tmp = tempfile::tempdir().expect("tmp");
    let app = tmp.path().join("docker_wrapper.sh");
    fs::write(
        &app,
        "#!/bin/sh\nsleep 1\necho \"container $(cat in)\" > out\necho 0 > boinc_finish_called\n",
    )
    .expect("app");
    set_executable(&app);
    let server = Server::start_raw(
        tmp.path(),
        &tmp.path().join("server"),
        &[
            "--app",
            &format!("dock={},docker", app.display()),
            "--jobs",
            "1",
        ],
    );
    let esc = ferrite_proto::account::escape_project_url(&server.url);
    let fake = tmp.path().join("fakebin");
    fs::create_dir_all(&fake).expect("mkdir");
    recording_podman(&fake, &esc);
    let dir = client_dir(tmp.path(), "");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, Some(&fake));
    cmd.arg("--no_gpus")
        .args(["--attach_project", &server.url, testproject::KEY]);
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));
    let calls = || fs::read_to_string(fake.join("calls")).unwrap_or_default();
    // At start-up no job runs: every BOINC container and image goes, nothing else.
    let at_start = calls();
    let c = esc.to_lowercase();
    for want in [
        "ps --all".to_owned(),
        "rm -f boinc__old__wu_0".to_owned(),
        format!("rm -f boinc__{c}__dock_wu_0_0"),
        "images".to_owned(),
        "image rm boinc__old__wu".to_owned(),
        format!("image rm boinc__{c}__dock_wu_0"),
    ] {
        assert!(at_start.lines().any(|l| l == want), "{want}: {at_start}");
    }
    assert!(
        !at_start.contains("competent_ishizaka") && !at_start.contains("rm mine"),
        "{at_start}"
    );
    assert!(client
        .output()
        .contains("Removed unused Podman container: boinc__old__wu_0"));
    let rounds_at_start = at_start.lines().filter(|l| *l == "ps --all").count();

    // The Docker job runs and ends: another clean-up round follows.
    testproject::nudge_until_reported(
        &server,
        &client,
        port,
        (1, Duration::from_secs(90)),
        "the Docker job",
        true,
    );
    let t0 = std::time::Instant::now();
    while calls().lines().filter(|l| *l == "ps --all").count() <= rounds_at_start {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no clean-up after the job ended: {}\n{}",
            calls(),
            client.output()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}

#[test]
fn several_clients_allowed_means_no_clean_up() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fake = tmp.path().join("fakebin");
    fs::create_dir_all(&fake).expect("mkdir");
    recording_podman(&fake, "p");
    let dir = ferrite_e2e::testproject::client_dir(
        tmp.path(),
        "<allow_multiple_clients>1</allow_multiple_clients>",
    );
    let port = free_port();
    let mut cmd = Proc::ferrited_command(&dir, port, Some(&fake));
    cmd.arg("--no_gpus");
    let mut client = Proc::spawn(cmd);
    client.wait_for("entering main loop", Duration::from_secs(60));
    let calls = fs::read_to_string(fake.join("calls")).unwrap_or_default();
    assert!(calls.contains("--version"), "podman was looked at: {calls}");
    assert!(
        !calls
            .lines()
            .any(|l| l == "ps --all" || l.starts_with("rm ") || l.starts_with("image rm ")),
        "{calls}"
    );
    client.signal(libc::SIGTERM);
    assert!(
        client.wait(Duration::from_secs(30)).success(),
        "{}",
        client.output()
    );
}
