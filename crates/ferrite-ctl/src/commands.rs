//! The steps of `ferrite`'s commands that take more than a line: each reading command's
//! replies turned into its table or JSON, and each control command's request.

use anyhow::Context as _;
use ferrite_gui_rpc::{GuiRpcClient, ProjectAction, Request, ResultAction, RunMode};

use ferrite_proto::prefs::TEMP_LIMIT_MAX_C;
use ferrite_proto::prefs_edit::set_override_numbers;

use crate::model::{self, Project, Status, Task};
use crate::tables::{now, span, status_text, table, tasks_table, ProjectNames};
use crate::{control, exit, fetch, print_json, ModeValue, ModeWhich, ProjectOp, TaskOp};

/// `ferrite explain`: the scheduler's last decisions, with the names of the projects.
pub(crate) async fn explain(client: &mut GuiRpcClient, json: bool) -> anyhow::Result<()> {
    let body = fetch(client, &Request::FerriteExplain).await?;
    if !body.contains("<ferrite_explain>") {
        anyhow::bail!("this client does not explain its decisions (not Ferrite?)");
    }
    let pick = |tag: &str, keys: &[&str]| -> Vec<Vec<String>> {
        model::records(&body, tag)
            .iter()
            .map(|r| {
                keys.iter()
                    .map(|k| r.get(*k).cloned().unwrap_or_default())
                    .collect()
            })
            .collect()
    };
    let mut tasks = pick("task", &["name", "project", "decision", "reason"]);
    let mut fetches = pick("fetch", &["project", "resource", "verdict", "reason"]);
    let suspended = pick("suspended", &["what", "code", "reason"]);
    const THERMAL: [&str; 9] = [
        "cpu_limit",
        "cpu_temp",
        "cpu_sensor",
        "cpu_share",
        "gpu_limit",
        "gpu_temp",
        "gpu_sensor",
        "gpu_held",
        "reason",
    ];
    let thermal = pick("thermal", &THERMAL);
    let mut confinement = pick("confinement", &["result", "project", "reason"]);
    let top = model::records(&body, "ferrite_explain");
    let top = top.first();
    let confine_support = top
        .and_then(|r| r.get("confine_support").cloned())
        .unwrap_or_default();
    // cc_config `ferrite_checkpoint_grace`, as the dashboard shows it (absent from older
    // Ferrite daemons).
    let checkpoint_grace = top
        .and_then(|r| r.get("checkpoint_grace"))
        .and_then(|v| v.trim().parse::<f64>().ok());
    if json {
        let obj = |keys: &[&str], rows: &[Vec<String>]| -> Vec<serde_json::Value> {
            rows.iter()
                .map(|row| {
                    serde_json::Value::Object(
                        keys.iter()
                            .zip(row)
                            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String(v.clone())))
                            .collect(),
                    )
                })
                .collect()
        };
        return print_json(&serde_json::json!({
            "tasks": obj(&["name", "project", "decision", "reason"], &tasks),
            "fetch": obj(&["project", "resource", "verdict", "reason"], &fetches),
            "suspended": obj(&["what", "code", "reason"], &suspended),
            "thermal": obj(&THERMAL, &thermal),
            "confinement": obj(&["result", "project", "reason"], &confinement),
            "confine_support": confine_support,
            "checkpoint_grace": checkpoint_grace,
        }));
    }
    if body.contains("<pending/>") {
        println!("The scheduler has not run yet; try again in a second.");
        return Ok(());
    }
    let projects = Project::all(&fetch(client, &Request::GetProjectStatus).await?);
    let names = ProjectNames::new(&projects);
    for row in &mut tasks {
        row[1] = names.of(&row[1]).to_owned();
    }
    for row in &mut fetches {
        row[0] = names.of(&row[0]).to_owned();
    }
    for row in &mut confinement {
        row[1] = names.of(&row[1]).to_owned();
    }
    for s in &suspended {
        let what = if s[0] == "gpu" {
            "GPU computing"
        } else {
            "Computing"
        };
        println!(
            "{what} is suspended: {} (reason {}); tasks stay stopped whatever they show below.\n",
            s[2], s[1]
        );
    }
    for t in &thermal {
        if !t[8].is_empty() {
            println!("Temperature limit: {}.\n", t[8]);
        }
    }
    if projects.is_empty() {
        println!(
            "No project is attached: there is nothing to run and no work to ask for.\n\
             Attach one with `ferrite attach URL ACCOUNT_KEY`."
        );
        return Ok(());
    }
    if tasks.is_empty() {
        println!("No tasks: nothing runs or waits to run.");
    } else {
        print!(
            "{}",
            table(&["TASK", "PROJECT", "DECISION", "REASON"], &tasks)
        );
    }
    println!();
    if fetches.is_empty() {
        println!("No work-fetch decision was made for any project in the last pass.");
    } else {
        print!(
            "{}",
            table(&["PROJECT", "RESOURCE", "FETCH", "REASON"], &fetches)
        );
    }
    if let Some(secs) = checkpoint_grace {
        println!("\n{}", checkpoint_grace_text(secs));
    }
    if !confine_support.is_empty() {
        println!("\nApp confinement: {confine_support}.");
    }
    if !confinement.is_empty() {
        print!(
            "{}",
            table(&["TASK", "PROJECT", "CONFINEMENT"], &confinement)
        );
    }
    let host = fetch(client, &Request::GetHostInfo).await?;
    if !host.contains("<coproc_") {
        println!(
            "\nNo GPU is in use on this client (none detected, or GPUs turned off with \
             --no_gpus or <no_gpus>): only CPU work is asked for. See \
             `ferrited --detect_gpus`."
        );
    }
    Ok(())
}

/// What cc_config `ferrite_checkpoint_grace` (`secs`) does, in the dashboard's words.
fn checkpoint_grace_text(secs: f64) -> String {
    let what = "Suspending at checkpoint (cc_config ferrite_checkpoint_grace)";
    if secs > 0.0 {
        format!(
            "{what}: when computing or GPU computing is suspended for a reason that can wait, \
             a running task that checkpoints runs on for at most {} to its next checkpoint.",
            span(secs)
        )
    } else {
        format!("{what}: off; every suspension stops the tasks at once.")
    }
}

/// `ferrite status`: the modes, and how many projects and tasks.
pub(crate) async fn status(client: &mut GuiRpcClient, json: bool) -> anyhow::Result<()> {
    let cc = fetch(client, &Request::GetCcStatus).await?;
    let status = Status::parse(&cc).context("the reply has no <cc_status>")?;
    let projects = Project::all(&fetch(client, &Request::GetProjectStatus).await?);
    let tasks = Task::all(&fetch(client, &Request::GetResults { active_only: false }).await?);
    if json {
        return print_json(&serde_json::json!({
            "modes": status,
            "projects": projects.len(),
            "tasks": tasks.len(),
        }));
    }
    print!("{}", status_text(&status, projects.len(), &tasks));
    Ok(())
}

/// `ferrite tasks` without `--watch`: the tasks' table.
pub(crate) async fn tasks(
    client: &mut GuiRpcClient,
    active: bool,
    json: bool,
) -> anyhow::Result<()> {
    let body = fetch(
        client,
        &Request::GetResults {
            active_only: active,
        },
    )
    .await?;
    let mut tasks = Task::all(&body);
    if let Some(status) = Status::parse(&fetch(client, &Request::GetCcStatus).await?) {
        Task::note_network_suspension(&mut tasks, &status);
    }
    if json {
        return print_json(&tasks);
    }
    let projects = Project::all(&fetch(client, &Request::GetProjectStatus).await?);
    print!(
        "{}",
        tasks_table(&tasks, &ProjectNames::new(&projects), now())
    );
    Ok(())
}

/// `ferrite projects`: the projects' table.
pub(crate) async fn projects(client: &mut GuiRpcClient, json: bool) -> anyhow::Result<()> {
    let projects = Project::all(&fetch(client, &Request::GetProjectStatus).await?);
    if json {
        return print_json(&projects);
    }
    let rows: Vec<Vec<String>> = projects
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.master_url.clone(),
                p.user_name.clone(),
                format!("{:.0}", p.resource_share),
                format!("{:.2}", p.host_total_credit),
                p.status(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &["PROJECT", "URL", "USER", "SHARE", "HOST CREDIT", "STATUS"],
            &rows
        )
    );
    Ok(())
}

/// `ferrite prefs get`: the preferences in force, or the override file's.
pub(crate) async fn prefs_get(
    client: &mut GuiRpcClient,
    override_file: bool,
    json: bool,
) -> anyhow::Result<()> {
    let request = if override_file {
        Request::GetGlobalPrefsOverride
    } else {
        Request::GetGlobalPrefsWorking
    };
    let body = fetch(client, &request).await?;
    if json {
        let leaves = model::prefs(&body).context("the reply has no <global_preferences>")?;
        return print_json(&leaves);
    }
    print!("{}", body.trim_start());
    Ok(())
}

/// `ferrite prefs set`: the override file sent, then read again by the client.
pub(crate) async fn prefs_set(
    client: &mut GuiRpcClient,
    file: &std::path::Path,
    json: bool,
) -> anyhow::Result<()> {
    let doc =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    if model::prefs(&doc).is_none() {
        anyhow::bail!("{} holds no <global_preferences> document", file.display());
    }
    let raw = doc.trim().to_owned();
    client
        .call_expect_success(&Request::SetGlobalPrefsOverride { raw })
        .await
        .context("set_global_prefs_override")?;
    control(client, &Request::ReadGlobalPrefsOverride, json).await?;
    Ok(())
}

/// `ferrite prefs limits`: the temperature limits set in the client's override file (its
/// other values kept), which the client then reads again.
pub(crate) async fn prefs_limits(
    client: &mut GuiRpcClient,
    cpu: Option<f64>,
    gpu: Option<f64>,
    json: bool,
) -> anyhow::Result<()> {
    let mut values = Vec::new();
    for (name, option, v) in [
        ("ferrite_cpu_temp_limit", "--cpu-temp-limit", cpu),
        ("ferrite_gpu_temp_limit", "--gpu-temp-limit", gpu),
    ] {
        let Some(v) = v else { continue };
        if !(0.0..=TEMP_LIMIT_MAX_C).contains(&v) {
            return Err(exit::usage(format!(
                "{option} takes °C from 0 (no limit) to {TEMP_LIMIT_MAX_C}"
            )));
        }
        values.push((name, v));
    }
    let body = client.call(&Request::GetGlobalPrefsOverride).await?;
    if body.contains("<unauthorized/>") {
        return Err(ferrite_gui_rpc::ClientError::Unauthorized.into());
    }
    // No override file yet: the client answers with an error element instead.
    let current = if model::prefs(&body).is_some() {
        body.trim()
    } else {
        ""
    };
    let raw = set_override_numbers(current, &values)
        .context("the client's override file cannot be edited")?;
    client
        .call_expect_success(&Request::SetGlobalPrefsOverride {
            raw: raw.trim().to_owned(),
        })
        .await
        .context("set_global_prefs_override")?;
    control(client, &Request::ReadGlobalPrefsOverride, json).await?;
    Ok(())
}

/// The request of `ferrite mode` (`at_checkpoint`: `--at-checkpoint`, only with `run never`).
pub(crate) fn mode_request(
    which: &ModeWhich,
    mode: &ModeValue,
    for_secs: Option<f64>,
    at_checkpoint: bool,
) -> anyhow::Result<Request> {
    if at_checkpoint && !matches!((which, mode), (ModeWhich::Run, ModeValue::Never)) {
        return Err(exit::usage(
            "--at-checkpoint goes with `mode run never` only",
        ));
    }
    let mode = match mode {
        ModeValue::Always => RunMode::Always,
        ModeValue::Auto => RunMode::Auto,
        ModeValue::Never => RunMode::Never,
        ModeValue::Restore => RunMode::Restore,
    };
    let duration = for_secs.unwrap_or(0.0);
    if !(duration >= 0.0 && duration.is_finite()) {
        return Err(exit::usage("--for takes a number of seconds, 0 or more"));
    }
    let request = match which {
        ModeWhich::Run => Request::SetRunMode {
            mode,
            duration,
            at_checkpoint,
        },
        ModeWhich::Gpu => Request::SetGpuMode { mode, duration },
        ModeWhich::Network => Request::SetNetworkMode { mode, duration },
    };
    Ok(request)
}

/// The request of `ferrite task`.
pub(crate) fn task_request(url: &str, name: &str, op: &TaskOp) -> Request {
    let op = match op {
        TaskOp::Suspend => ResultAction::Suspend,
        TaskOp::Resume => ResultAction::Resume,
        TaskOp::Abort => ResultAction::Abort,
    };
    Request::ResultOp {
        op,
        project_url: url.to_owned(),
        name: name.to_owned(),
    }
}

/// The request of `ferrite project`.
pub(crate) fn project_request(url: &str, op: &ProjectOp) -> Request {
    let op = match op {
        ProjectOp::Suspend => ProjectAction::Suspend,
        ProjectOp::Resume => ProjectAction::Resume,
        ProjectOp::Update => ProjectAction::Update,
        ProjectOp::Reset => ProjectAction::Reset,
        ProjectOp::Detach => ProjectAction::Detach,
        ProjectOp::Nomorework => ProjectAction::NoMoreWork,
        ProjectOp::Allowmorework => ProjectAction::AllowMoreWork,
        ProjectOp::DetachWhenDone => ProjectAction::DetachWhenDone,
        ProjectOp::DontDetachWhenDone => ProjectAction::DontDetachWhenDone,
    };
    Request::ProjectOp {
        op,
        project_url: url.to_owned(),
    }
}
