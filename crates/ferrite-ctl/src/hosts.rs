//! Many clients at once: `ferrite --hosts FILE status|tasks` asks every host of a hosts file
//! (all at the same time, each bounded by a timeout) and prints one table across them.
//!
//! The file is either boinctui's configuration (`<boinctui_cfg><srv><host>…</host>
//! <port>…</port><pwd>…</pwd></srv>…`) or plain lines `HOST[:PORT] [PASSWORD]` (`#` starts a
//! comment), the form BoincTasks' computer list exports to.

use std::time::Duration;

use anyhow::Context as _;
use ferrite_gui_rpc::{GuiRpcClient, Request};
use serde::Serialize;

use crate::model::{Project, Status, Task};
use crate::tables::{span, table, ProjectNames};

/// How long one host may take to answer everything asked.
const PER_HOST: Duration = Duration::from_secs(10);

/// One entry of a hosts file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostEntry {
    /// Host name or address.
    pub host: String,
    /// GUI RPC port.
    pub port: u16,
    /// Password (empty: none).
    #[serde(skip)]
    pub password: String,
}

impl HostEntry {
    fn label(&self) -> String {
        if self.port == ferrite_gui_rpc::server::DEFAULT_PORT {
            self.host.clone()
        } else if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Reads a hosts file (boinctui's XML or plain lines).
pub fn parse_hosts(text: &str) -> anyhow::Result<Vec<HostEntry>> {
    if text.trim_start().starts_with('<') {
        return Ok(parse_boinctui(text));
    }
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let spec = words.next().unwrap_or_default();
        let password = words.collect::<Vec<_>>().join(" ");
        let (host, port) =
            crate::host_port(spec).with_context(|| format!("line {}: {spec:?}", n + 1))?;
        out.push(HostEntry {
            host,
            port,
            password,
        });
    }
    Ok(out)
}

fn parse_boinctui(text: &str) -> Vec<HostEntry> {
    let field = |block: &str, tag: &str| -> Option<String> {
        let open = format!("<{tag}>");
        let i = block.find(&open)? + open.len();
        let j = block[i..].find(&format!("</{tag}>"))? + i;
        Some(ferrite_gui_rpc::unescape(block[i..j].trim()).into_owned())
    };
    text.split("<srv>")
        .skip(1)
        .filter_map(|block| {
            let block = block.split("</srv>").next().unwrap_or("");
            let host = field(block, "host")?;
            let port = field(block, "port")
                .and_then(|p| p.parse().ok())
                .unwrap_or(ferrite_gui_rpc::server::DEFAULT_PORT);
            Some(HostEntry {
                host,
                port,
                password: field(block, "pwd").unwrap_or_default(),
            })
        })
        .collect()
}

/// What one host answered.
#[derive(Debug, Serialize)]
pub struct HostReport {
    /// The host.
    pub host: String,
    /// Why it could not be asked (`None`: it answered).
    pub error: Option<String>,
    /// Its modes.
    pub status: Option<Status>,
    /// Attached projects.
    pub projects: usize,
    /// Its tasks.
    #[serde(skip)]
    pub tasks: Vec<Task>,
    /// Project names by URL.
    #[serde(skip)]
    names: Vec<Project>,
}

async fn ask(entry: &HostEntry) -> anyhow::Result<(Status, Vec<Project>, Vec<Task>)> {
    let mut client = GuiRpcClient::connect_tcp((entry.host.as_str(), entry.port))
        .await
        .with_context(|| format!("cannot connect to {}", entry.label()))?;
    if !entry.password.is_empty() {
        client
            .authorize(&entry.password)
            .await
            .context("authorization failed")?;
    }
    let cc = crate::fetch(&mut client, &Request::GetCcStatus).await?;
    let status = Status::parse(&cc).context("the reply has no <cc_status>")?;
    let projects = Project::all(&crate::fetch(&mut client, &Request::GetProjectStatus).await?);
    let tasks =
        Task::all(&crate::fetch(&mut client, &Request::GetResults { active_only: false }).await?);
    Ok((status, projects, tasks))
}

/// Asks every host at once.
pub async fn gather(entries: &[HostEntry]) -> Vec<HostReport> {
    let asks = entries.iter().map(|e| async move {
        let r = tokio::time::timeout(PER_HOST, ask(e)).await;
        let host = e.label();
        match r {
            Ok(Ok((status, projects, tasks))) => HostReport {
                host,
                error: None,
                status: Some(status),
                projects: projects.len(),
                tasks,
                names: projects,
            },
            Ok(Err(err)) => HostReport {
                host,
                error: Some(short_error(&err)),
                status: None,
                projects: 0,
                tasks: Vec::new(),
                names: Vec::new(),
            },
            Err(_) => HostReport {
                host,
                error: Some(format!("no answer within {} s", PER_HOST.as_secs())),
                status: None,
                projects: 0,
                tasks: Vec::new(),
                names: Vec::new(),
            },
        }
    });
    futures_util::future::join_all(asks).await
}

/// The first and the last line of an error's chain ("cannot connect to …: Connection
/// refused").
fn short_error(e: &anyhow::Error) -> String {
    let root = e.root_cause().to_string();
    let top = e.to_string();
    if root == top {
        top
    } else {
        format!("{top}: {root}")
    }
}

/// `status` across hosts: one row per host.
pub fn status_table(reports: &[HostReport]) -> String {
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| match (&r.error, &r.status) {
            (None, Some(s)) => {
                let mode = |m: &crate::model::Mode| match &m.suspend_reason {
                    Some(why) => format!("{} ({why})", m.current),
                    None => m.current.clone(),
                };
                let running = r.tasks.iter().filter(|t| t.status == "running").count();
                vec![
                    r.host.clone(),
                    "ok".to_owned(),
                    mode(&s.cpu),
                    mode(&s.gpu),
                    mode(&s.network),
                    r.projects.to_string(),
                    r.tasks.len().to_string(),
                    running.to_string(),
                ]
            }
            (err, _) => vec![
                r.host.clone(),
                err.clone().unwrap_or_else(|| "no status".to_owned()),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
        })
        .collect();
    table(
        &[
            "HOST",
            "STATE",
            "COMPUTING",
            "GPU",
            "NETWORK",
            "PROJECTS",
            "TASKS",
            "RUNNING",
        ],
        &rows,
    )
}

/// `tasks` across hosts: one row per task, hosts that did not answer as one row each.
pub fn tasks_table(reports: &[HostReport]) -> String {
    let mut rows = Vec::new();
    for r in reports {
        if let Some(e) = &r.error {
            rows.push(vec![
                r.host.clone(),
                format!("({e})"),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            continue;
        }
        let names = ProjectNames::new(&r.names);
        for t in &r.tasks {
            rows.push(vec![
                r.host.clone(),
                t.name.clone(),
                names.of(&t.project_url).to_owned(),
                t.status.clone(),
                format!("{:.1}%", t.fraction_done * 100.0),
                span(t.elapsed_time),
                span(t.estimated_remaining),
            ]);
        }
    }
    table(
        &[
            "HOST",
            "TASK",
            "PROJECT",
            "STATUS",
            "DONE",
            "ELAPSED",
            "REMAINING",
        ],
        &rows,
    )
}

/// The tasks of every host as JSON rows.
pub fn tasks_json(reports: &[HostReport]) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = reports
        .iter()
        .flat_map(|r| {
            r.tasks.iter().map(move |t| {
                serde_json::json!({
                    "host": r.host,
                    "name": t.name,
                    "project_url": t.project_url,
                    "status": t.status,
                    "fraction_done": t.fraction_done,
                })
            })
        })
        .collect();
    let errors: Vec<serde_json::Value> = reports
        .iter()
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| serde_json::json!({"host": r.host, "error": e}))
        })
        .collect();
    serde_json::json!({ "tasks": rows, "errors": errors })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_boinctui_configuration() {
        let cfg = "<boinctui_cfg>\n<srv>\n<host>127.0.0.1</host>\n<port>31416</port>\n<pwd>a&amp;b</pwd>\n</srv>\n<srv>\n<host>farm2</host>\n<port>40000</port>\n</srv>\n<line_limit>500</line_limit>\n</boinctui_cfg>\n";
        let h = parse_hosts(cfg).expect("parse");
        assert_eq!(
            h,
            vec![
                HostEntry {
                    host: "127.0.0.1".into(),
                    port: 31416,
                    password: "a&b".into()
                },
                HostEntry {
                    host: "farm2".into(),
                    port: 40000,
                    password: String::new()
                },
            ]
        );
        assert_eq!(h[1].label(), "farm2:40000");
    }

    #[test]
    fn reads_plain_lines() {
        let h = parse_hosts("# farm\nnode1 pw one\n[::1]:4000\n\nnode3:31417 x # comment\n")
            .expect("parse");
        assert_eq!(h.len(), 3);
        assert_eq!(h[0].password, "pw one");
        assert_eq!(h[1].host, "::1");
        assert_eq!(h[1].port, 4000);
        assert_eq!(h[1].label(), "[::1]:4000");
        assert_eq!(h[2].port, 31417);
        assert!(parse_hosts("node:notaport\n").is_err());
    }

    #[tokio::test]
    async fn a_host_that_is_not_there_is_a_row_with_its_error() {
        // Port 9 on loopback: nothing listens (discard is not run here).
        let reports = gather(&[HostEntry {
            host: "127.0.0.1".into(),
            port: 9,
            password: String::new(),
        }])
        .await;
        assert_eq!(reports.len(), 1);
        assert!(reports[0].error.is_some());
        let t = status_table(&reports);
        assert!(
            t.contains("127.0.0.1:9") && t.contains("cannot connect"),
            "{t}"
        );
    }
}
