//! Temperature limits end to end: `ferrited` reads a fake sysfs tree (`FERRITE_SYS_ROOT`),
//! holds the apps' CPU share over the CPU limit of `global_prefs_override.xml`, and says why
//! in its log, in `ferrite explain` and in `get_cc_status`.

use std::fs;
use std::time::{Duration, Instant};

use ferrite_e2e::{ferrite_bounded, free_port, Proc};

fn package_temp(sys: &std::path::Path, milli: u32) {
    let hw = sys.join("class/hwmon/hwmon2");
    fs::create_dir_all(&hw).expect("mkdir");
    fs::write(hw.join("name"), "coretemp\n").expect("name");
    fs::write(hw.join("temp1_label"), "Package id 0\n").expect("label");
    fs::write(hw.join("temp1_input"), format!("{milli}\n")).expect("input");
    // A hotter sensor that is not the package's: never read.
    let acpi = sys.join("class/thermal/thermal_zone0");
    fs::create_dir_all(&acpi).expect("mkdir");
    fs::write(acpi.join("type"), "acpitz\n").expect("type");
    fs::write(acpi.join("temp"), "120000\n").expect("temp");
}

#[test]
fn a_hot_package_is_held_and_explained() {
    let data = tempfile::tempdir().expect("data");
    let sys = tempfile::tempdir().expect("sys");
    package_temp(sys.path(), 60_000);
    fs::write(
        data.path().join("global_prefs_override.xml"),
        "<global_preferences>\n<ferrite_cpu_temp_limit>80</ferrite_cpu_temp_limit>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n<niu_suspend_cpu_usage>0</niu_suspend_cpu_usage>\n\
         </global_preferences>\n",
    )
    .expect("override");
    let port = free_port();
    let mut cmd = Proc::ferrited_command(data.path(), port, None);
    cmd.arg("--no_gpus").env("FERRITE_SYS_ROOT", sys.path());
    let mut d = Proc::spawn(cmd);
    d.wait_for("GUI RPC listening on TCP", Duration::from_secs(30));
    d.wait_for(
        "CPU temperature limit 80 °C: reading sensor coretemp Package id 0",
        Duration::from_secs(10),
    );
    let host = format!("127.0.0.1:{port}");
    let explain = |json: bool| {
        let mut args = vec!["--host", host.as_str()];
        if json {
            args.push("--json");
        }
        args.push("explain");
        let out = ferrite_bounded(data.path(), &args, Duration::from_secs(30));
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout
    };
    let v: serde_json::Value = serde_json::from_str(&explain(true)).expect("JSON");
    assert_eq!(v["thermal"][0]["cpu_share"], "100", "{v}");
    assert_eq!(v["thermal"][0]["reason"], "", "{v}");

    package_temp(sys.path(), 95_000);
    d.wait_for(
        "CPU at 95 °C over the limit of 80 °C: lowering the apps' CPU share",
        Duration::from_secs(10),
    );
    let t0 = Instant::now();
    loop {
        let v: serde_json::Value = serde_json::from_str(&explain(true)).expect("JSON");
        let share: f64 = v["thermal"][0]["cpu_share"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(100.0);
        if share < 60.0 {
            let reason = v["thermal"][0]["reason"].as_str().unwrap_or_default();
            assert!(
                reason.starts_with("CPU at 95 °C (limit 80 °C): apps held to"),
                "{v}"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "share stays {share}: {v}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let status = ferrite_bounded(
        data.path(),
        &["--host", &host, "--json", "status"],
        Duration::from_secs(30),
    );
    assert_eq!(status.code, 0, "{}", status.stderr);
    // get_cc_status's task_suspend_reason 64, which `ferrite status` names.
    assert!(status.stdout.contains("CPU throttle"), "{}", status.stdout);
}
