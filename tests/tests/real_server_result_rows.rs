//! What BOINC's own project server (the kit, see `ferrite_e2e::boinc_server`) records of the
//! same jobs run by the official client and by Ferrite: a normal job, one whose app exits
//! with an error (`-early_exit`) and one whose app crashes (`-early_crash`). The `result`
//! rows (outcome, client state, exit status, whether elapsed and CPU time are there, the
//! shape of `stderr_out`) and the uploaded output are compared; the test prints the table
//! of differences and fails on any not listed, with its reason, in docs/migrate.md
//! ("The server's record of a finished task"), and on a listed one that no longer occurs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use ferrite_e2e::boinc_server::{BoincServer, ServerOptions};
use ferrite_e2e::{boinccmd, free_port, OfficialClient, Proc};

const LIMIT: Duration = Duration::from_secs(300);

/// The jobs each client runs: (kind, command line).
const JOBS: [(&str, &str); 3] = [
    ("normal", "-cpu_time 1"),
    ("exit", "-cpu_time 1 -early_exit"),
    ("crash", "-cpu_time 1 -early_crash"),
];

/// Same preferences for both clients: work whatever the machine's load.
fn client_dir(dir: &Path) {
    fs::create_dir_all(dir).expect("mkdir");
    fs::write(dir.join("gui_rpc_auth.cfg"), "pw\n").expect("password");
    fs::write(
        dir.join("global_prefs_override.xml"),
        "<global_preferences>\n<run_if_user_active>1</run_if_user_active>\n\
         <suspend_cpu_usage>0</suspend_cpu_usage>\n</global_preferences>\n",
    )
    .expect("prefs");
}

/// Text from MariaDB's `hex()`.
fn unhex(s: &str) -> String {
    let bytes: Vec<u8> = (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `stderr_out` with what depends on the client's version and on the app's own output
/// taken out: the client version becomes `V`, each `<stderr_txt>`'s text `…`.
fn shape(stderr_out: &str) -> String {
    let mut s = stderr_out.to_owned();
    if let (Some(a), Some(b)) = (
        s.find("<core_client_version>"),
        s.find("</core_client_version>"),
    ) {
        s.replace_range(a + "<core_client_version>".len()..b, "V");
    }
    let mut out = String::new();
    let mut rest = s.as_str();
    while let Some(a) = rest.find("<stderr_txt>") {
        let open = a + "<stderr_txt>".len();
        out.push_str(&rest[..open]);
        match rest[open..].find("</stderr_txt>") {
            Some(b) => {
                out.push('…');
                rest = &rest[open + b..];
            }
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out.trim().replace('\n', "⏎")
}

/// The text of the first `<tag>` in `xml`, trimmed ("" when absent).
fn element<'a>(xml: &'a str, tag: &str) -> &'a str {
    xml.split_once(&format!("<{tag}>"))
        .and_then(|(_, r)| r.split_once(&format!("</{tag}>")))
        .map_or("", |(v, _)| v.trim())
}

/// What the server recorded of the job `wu`: column → value.
fn row(server: &BoincServer, wu: &str) -> BTreeMap<String, String> {
    let r = server.query(&format!(
        "select r.outcome, r.client_state, r.exit_status, r.elapsed_time > 0, \
         r.cpu_time > 0, r.validate_state, hex(r.stderr_out), hex(r.xml_doc_out) \
         from result r where r.name like '{wu}\\_%'"
    ));
    let r = r.first().unwrap_or_else(|| panic!("no result of {wu}"));
    // The output as the client described it in its report (the file deleter removes the
    // file itself once the job is assimilated): size and MD5 of each file.
    let doc = unhex(&r[7]);
    let uploaded: Vec<String> = doc
        .split("<file_info>")
        .skip(1)
        .map(|f| format!("{} {}", element(f, "nbytes"), element(f, "md5_cksum")))
        .collect();
    let uploaded = if uploaded.is_empty() {
        "none".to_owned()
    } else {
        uploaded.join(", ")
    };
    let mut m = BTreeMap::new();
    for (i, col) in [
        "outcome",
        "client_state",
        "exit_status",
        "elapsed_time > 0",
        "cpu_time > 0",
        "validate_state",
    ]
    .iter()
    .enumerate()
    {
        m.insert((*col).to_owned(), r[i].clone());
    }
    m.insert("stderr_out".into(), shape(&unhex(&r[6])));
    m.insert("uploaded output".into(), uploaded.trim().to_owned());
    m
}

/// Whether the results of `prefix`'s jobs are all over on the server, the successful ones
/// validated.
fn all_over(server: &BoincServer, prefix: &str) -> bool {
    server
        .query(&format!(
            "select count(*) from result where name like '{prefix}\\_%' and server_state = 5 \
             and (outcome <> 1 or validate_state <> 0)"
        ))
        .first()
        .and_then(|r| r.first())
        .and_then(|n| n.parse::<usize>().ok())
        == Some(JOBS.len())
}

/// Presses "Update" every 15 s until `done`, at most [`LIMIT`].
fn nudge_until(
    port: u16,
    url: &str,
    what: &str,
    context: impl Fn() -> String,
    mut done: impl FnMut() -> bool,
) {
    let t0 = Instant::now();
    let mut last = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < LIMIT,
            "timed out waiting for {what}\n{}",
            context()
        );
        if last.elapsed() > Duration::from_secs(15) {
            let _ = boinccmd(port, Some("pw"), &["--project", url, "update"]);
            last = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A row of the difference table: (job, column).
type Row = (String, String);

/// The table in docs/migrate.md: rows `| job | column | why |` of the section; those whose
/// reason says "depends on timing" may also be equal in a run.
fn documented() -> (BTreeSet<Row>, BTreeSet<Row>) {
    let text = fs::read_to_string(ferrite_e2e::workspace_root().join("docs/migrate.md"))
        .expect("docs/migrate.md");
    let section = text
        .split("### The server's record of a finished task")
        .nth(1)
        .expect("docs/migrate.md has a section 'The server's record of a finished task'");
    let section = section.split("\n#").next().unwrap_or(section);
    let (mut all, mut timing) = (BTreeSet::new(), BTreeSet::new());
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 3 || !cells[1].starts_with('`') {
            continue;
        }
        let d = (cells[0].to_owned(), cells[1].trim_matches('`').to_owned());
        if cells[2].contains("depends on timing") {
            timing.insert(d.clone());
        }
        all.insert(d);
    }
    (all, timing)
}

#[test]
fn the_server_records_the_same_results_from_both_clients() {
    if !ferrite_e2e::peer_or_skip(
        "the_server_records_the_same_results_from_both_clients",
        &["boinc", "boinccmd"],
    ) {
        return;
    }
    let test = "the_server_records_the_same_results_from_both_clients";
    let opts = ServerOptions {
        jobs: 0,
        ..ServerOptions::default()
    };
    let Some(server) = BoincServer::up(test, &opts) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");

    // The official client first, on its own jobs.
    for (kind, cmd) in JOBS {
        server.add_job_with_command_line(&format!("off_{kind}"), cmd);
    }
    let off_dir = tmp.path().join("official");
    client_dir(&off_dir);
    let official = OfficialClient::start(&off_dir);
    let _ = official.boinccmd(&["--set_run_mode", "auto"]);
    let _ = official.boinccmd(&["--set_network_mode", "auto"]);
    let (ok, out) = official.boinccmd(&["--project_attach", server.url(), server.account_key()]);
    assert!(ok, "the official client did not attach: {out}");
    nudge_until(
        official.port(),
        server.url(),
        "the official client's results",
        || server.scheduler_log(),
        || all_over(&server, "off"),
    );
    let _ = official.quit();

    // Then Ferrite, on the same host, with the same preferences and the same jobs.
    for (kind, cmd) in JOBS {
        server.add_job_with_command_line(&format!("fer_{kind}"), cmd);
    }
    let dir = tmp.path().join("ferrite");
    client_dir(&dir);
    let port = free_port();
    let mut client = Proc::ferrited(&[
        "--dir",
        dir.to_str().expect("utf-8"),
        "--gui_rpc_port",
        &port.to_string(),
        "--attach_project",
        server.url(),
        server.account_key(),
    ]);
    client.wait_for("entering main loop", Duration::from_secs(60));
    nudge_until(
        port,
        server.url(),
        "Ferrite's results",
        || client.output(),
        || all_over(&server, "fer"),
    );
    drop(client);

    let mut found = BTreeSet::new();
    let mut table = String::from("| job | column | official | Ferrite |\n|---|---|---|---|\n");
    for (kind, _) in JOBS {
        let off = row(&server, &format!("off_{kind}"));
        let ours = row(&server, &format!("fer_{kind}"));
        for (col, a) in &off {
            let b = ours.get(col).cloned().unwrap_or_default();
            if *a != b {
                table.push_str(&format!("| {kind} | `{col}` | {a} | {b} |\n"));
                found.insert((kind.to_owned(), col.clone()));
            }
        }
        eprintln!("{kind}: official {off:?}\n{kind}: Ferrite {ours:?}");
    }
    eprintln!("differences:\n{table}");
    let (listed, timing) = documented();
    let unlisted: Vec<_> = found.difference(&listed).collect();
    let stale: Vec<_> = listed
        .difference(&found)
        .filter(|d| !timing.contains(*d))
        .collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "differences not in docs/migrate.md: {unlisted:?}; listed there but gone: {stale:?}\n{table}"
    );
}
