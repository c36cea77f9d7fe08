//! What a project's web server sends besides scheduler replies, and the per-project files
//! written from it: the master page (its scheduler URLs and title go into the state, which
//! must save and load again unchanged), `get_project_config.php` and the account web RPC
//! replies, the account file, `statistics_*.xml`, `job_log_*.txt`, `daily_xfer_history.xml`.
//!
//! Input: byte 0 picks the document; the rest is its text.
#![no_main]

use std::sync::OnceLock;

use ferrite_project::attach::{parse_account_reply, parse_project_config, rpc_base};
use ferrite_project::master::{apply_master_page, parse_master_page, scheduler_url};
use ferrite_proto::account::AccountFile;
use ferrite_proto::client_state::ClientState;
use ferrite_proto::job_log::{DailyXferHistory, JobLogRecord};
use ferrite_proto::statistics::ProjectStatistics;
use libfuzzer_sys::fuzz_target;

const STATE: &str =
    include_str!("../../crates/ferrite-project/tests/fixtures/state_02_tasks_running.xml");

fn base() -> &'static ClientState {
    static S: OnceLock<ClientState> = OnceLock::new();
    S.get_or_init(|| match ClientState::parse(STATE, "client_state.xml") {
        Ok(p) => p.value,
        Err(e) => panic!("fixture: {e}"),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match sel % 7 {
        0 => {
            let Ok(page) = parse_master_page(text) else {
                return;
            };
            let mut state = base().clone();
            let Some(ps) = state.projects.first_mut() else {
                return;
            };
            if sel & 0x80 != 0 {
                ps.project.project_name.clear();
            }
            apply_master_page(&mut ps.project, &page);
            for attempt in 0..=page.scheduler_urls.len() {
                let _ = scheduler_url(&ps.project, attempt, 0.999);
            }
            let want = ps.project.clone();
            let saved = state.to_xml();
            let again = match ClientState::parse(&saved, "client_state.xml") {
                Ok(p) => p.value,
                Err(e) => panic!("the state after a master page does not load again: {e}"),
            };
            let Some(got) = again.projects.first() else {
                panic!("the project is lost on reload");
            };
            assert_eq!(
                want.scheduler_urls, got.project.scheduler_urls,
                "scheduler URLs change on reload"
            );
            assert_eq!(
                want.project_name, got.project.project_name,
                "project name changes on reload"
            );
        }
        1 => {
            let _ = parse_account_reply(text);
        }
        2 => {
            if let Ok(cfg) = parse_project_config(text) {
                let _ = rpc_base("http://127.0.0.1/p/", Some(&cfg));
            }
        }
        3 => {
            if let Ok(a) = AccountFile::parse(text, "account.xml") {
                let xml = a.value.to_xml();
                if let Err(e) = AccountFile::parse(&xml, "account.xml") {
                    panic!("a written account file does not parse again: {e}\n{xml}");
                }
            }
        }
        4 => {
            if let Ok(s) = ProjectStatistics::parse(text, "statistics.xml") {
                let xml = s.value.to_xml();
                if let Err(e) = ProjectStatistics::parse(&xml, "statistics.xml") {
                    panic!("a written statistics file does not parse again: {e}\n{xml}");
                }
            }
        }
        5 => {
            let (good, _bad) = JobLogRecord::parse_log(text);
            for r in good {
                let line = r.to_string();
                if let Err(e) = JobLogRecord::parse_line(line.trim_end()) {
                    panic!("a written job log line does not parse again: {e:?}\n{line}");
                }
            }
        }
        _ => {
            if let Ok(h) = DailyXferHistory::parse(text, "daily_xfer_history.xml") {
                let xml = h.value.to_xml();
                if let Err(e) = DailyXferHistory::parse(&xml, "daily_xfer_history.xml") {
                    panic!("a written transfer history does not parse again: {e}\n{xml}");
                }
            }
        }
    }
});
