//! The project's master page: where BOINC advertises its scheduler URLs
//! (`client/scheduler_op.cpp: parse_master_file`), and what a successful fetch changes in
//! the project record.
//!
//! Both forms are recognised, line by line as BOINC does: every
//! `<scheduler>URL</scheduler>` of a line first, then every
//! `<link rel="boinc_scheduler" href="URL">` of that line (exact attribute order and double
//! quotes; the URL ends at the first `"` or white space). Duplicates are dropped, first
//! occurrence order kept.

use ferrite_proto::client_state::Project;
use ferrite_proto::xml::unescape;

/// What a master page says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterPage {
    /// Scheduler URLs in the order to use them (never empty when parsing succeeded).
    pub scheduler_urls: Vec<String>,
    /// The page's `<title>`, a project name to show until the first scheduler reply gives
    /// the real one; `None` for the stock page's placeholder ([`PLACEHOLDER_TITLE`]).
    pub project_name: Option<String>,
}

/// Why a master page is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterError {
    /// No scheduler URL in the page (BOINC's `ERR_XML_PARSE`, a master-fetch failure).
    #[error("no scheduler URL found in the master page")]
    NoSchedulerUrl,
}

const SCHED_OPEN: &str = "<scheduler>";
const SCHED_CLOSE: &str = "</scheduler>";
const LINK_PREFIX: &str = "<link rel=\"boinc_scheduler\" href=\"";

/// Scans a master page.
pub fn parse_master_page(text: &str) -> Result<MasterPage, MasterError> {
    let mut urls: Vec<String> = Vec::new();
    let mut push = |u: String| {
        if !u.is_empty() && !urls.contains(&u) {
            urls.push(u);
        }
    };
    for line in text.lines() {
        let mut rest = line;
        while let Some(at) = rest.find(SCHED_OPEN) {
            let body = &rest[at + SCHED_OPEN.len()..];
            let Some(end) = body.find(SCHED_CLOSE) else {
                break;
            };
            push(unescape(body[..end].trim()).into_owned());
            rest = &body[end + SCHED_CLOSE.len()..];
        }
        let mut rest = line;
        while let Some(at) = rest.find(LINK_PREFIX) {
            let body = &rest[at + LINK_PREFIX.len()..];
            let end = body
                .find(|c: char| c == '"' || c.is_whitespace())
                .unwrap_or(body.len());
            push(unescape(body[..end].trim()).into_owned());
            rest = &body[end..];
        }
    }
    if urls.is_empty() {
        return Err(MasterError::NoSchedulerUrl);
    }
    let project_name = title(text);
    Ok(MasterPage {
        scheduler_urls: urls,
        project_name,
    })
}

/// The title of a stock project's master page: BOINC's `html/project.sample/project.inc`
/// defines the project name as this text until the project's owner changes it. It names no
/// project, so it is never shown as one (the official client takes names only from the
/// scheduler reply and the attach request).
pub const PLACEHOLDER_TITLE: &str = "REPLACE WITH PROJECT NAME";

fn title(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title>")? + "<title>".len();
    let end = start + lower[start..].find("</title>")?;
    let t = unescape(text.get(start..end)?.trim()).into_owned();
    (!t.is_empty() && !t.eq_ignore_ascii_case(PLACEHOLDER_TITLE)).then_some(t)
}

/// Applies a successful master fetch to the project record: failures reset, URL list
/// replaced, fetch no longer pending. If any URL is new, RPC backoff is cleared too. Returns
/// whether the list gained a URL. A page title becomes the project name only while the
/// project has none.
pub fn apply_master_page(project: &mut Project, page: &MasterPage) -> bool {
    let changed = page
        .scheduler_urls
        .iter()
        .any(|u| !project.scheduler_urls.contains(u));
    project.master_fetch_failures = 0;
    project.master_url_fetch_pending = false;
    project.scheduler_urls = page.scheduler_urls.clone();
    if changed {
        project.min_rpc_time = 0.0;
        project.nrpc_failures = 0;
    }
    if project.project_name.is_empty() {
        if let Some(n) = &page.project_name {
            project.project_name = n.clone();
        }
    }
    changed
}

/// A failed master fetch (HTTP error or no URL): counts the failure and ends the pending
/// fetch, as BOINC does; without URLs the pending RPC is dropped too. The caller then
/// applies the RPC backoff (`ferrite-sched`).
pub fn master_fetch_failed(project: &mut Project) {
    project.master_fetch_failures = project.master_fetch_failures.saturating_add(1);
    project.master_url_fetch_pending = false;
    if project.scheduler_urls.is_empty() {
        project.sched_rpc_pending = None;
    }
}

/// The URL to try for attempt `attempt` (0 for each new RPC) with the client's start-up
/// random `url_random` in `[0, 1)` (`client/project.cpp: get_scheduler_url`); `None` once
/// every URL was tried or there is none.
pub fn scheduler_url(project: &Project, attempt: usize, url_random: f64) -> Option<&str> {
    let n = project.scheduler_urls.len();
    if n == 0 || attempt >= n {
        return None;
    }
    let r = if url_random.is_finite() {
        url_random.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let offset = ((r * n as f64).floor() as usize).min(n - 1);
    project
        .scheduler_urls
        .get((attempt + offset) % n)
        .map(String::as_str)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_one_line_many_tags_and_order() {
        let page = "<scheduler>http://a/cgi</scheduler><scheduler> http://b/cgi </scheduler>\n\
                    <link rel=\"boinc_scheduler\" href=\"http://c/cgi\">\n\
                    x <link rel=\"boinc_scheduler\" href=\"http://a/cgi\"> <link rel=\"boinc_scheduler\" href=\"http://d/cgi?x=1&amp;y=2\">\n";
        let m = parse_master_page(page).unwrap();
        assert_eq!(
            m.scheduler_urls,
            [
                "http://a/cgi",
                "http://b/cgi",
                "http://c/cgi",
                "http://d/cgi?x=1&y=2"
            ]
        );
        assert_eq!(m.project_name, None);
    }

    #[test]
    fn the_stock_placeholder_title_is_no_project_name() {
        let stock = "<html><head><title>REPLACE WITH PROJECT NAME</title></head>\n\
                     <link rel=\"boinc_scheduler\" href=\"http://s/cgi\">\n";
        assert_eq!(parse_master_page(stock).unwrap().project_name, None);
        let named = "<title> Test &amp; Kit </title><scheduler>http://s/</scheduler>";
        assert_eq!(
            parse_master_page(named).unwrap().project_name.as_deref(),
            Some("Test & Kit")
        );
        let mut p = Project::default();
        apply_master_page(&mut p, &parse_master_page(stock).unwrap());
        assert_eq!(p.project_name, "");
    }

    #[test]
    fn scheduler_tags_of_a_line_come_before_its_links() {
        let page =
            "<link rel=\"boinc_scheduler\" href=\"http://l/\"><scheduler>http://s/</scheduler>";
        let m = parse_master_page(page).unwrap();
        assert_eq!(m.scheduler_urls, ["http://s/", "http://l/"]);
    }

    #[test]
    fn other_attribute_orders_and_quotes_are_not_boinc_links() {
        let page = "<link href=\"http://x/\" rel=\"boinc_scheduler\">\n<link rel='boinc_scheduler' href='http://y/'>";
        assert_eq!(parse_master_page(page), Err(MasterError::NoSchedulerUrl));
        assert_eq!(parse_master_page(""), Err(MasterError::NoSchedulerUrl));
        assert_eq!(
            parse_master_page("<scheduler></scheduler><scheduler>unclosed"),
            Err(MasterError::NoSchedulerUrl)
        );
    }

    #[test]
    fn apply_replaces_list_and_resets_backoff_only_when_new() {
        let mut p = Project {
            scheduler_urls: vec!["http://s/".into()],
            min_rpc_time: 100.0,
            nrpc_failures: 3,
            master_fetch_failures: 2,
            master_url_fetch_pending: true,
            ..Project::default()
        };
        let same = MasterPage {
            scheduler_urls: vec!["http://s/".into()],
            project_name: Some("P".into()),
        };
        assert!(!apply_master_page(&mut p, &same));
        assert_eq!((p.min_rpc_time, p.nrpc_failures), (100.0, 3));
        assert_eq!(p.master_fetch_failures, 0);
        assert!(!p.master_url_fetch_pending);
        assert_eq!(p.project_name, "P");
        let new = MasterPage {
            scheduler_urls: vec!["http://t/".into()],
            project_name: Some("Other".into()),
        };
        assert!(apply_master_page(&mut p, &new));
        assert_eq!((p.min_rpc_time, p.nrpc_failures), (0.0, 0));
        assert_eq!(p.scheduler_urls, ["http://t/"]);
        assert_eq!(p.project_name, "P", "a known name is kept");
    }

    #[test]
    fn failed_fetch_counts_and_drops_pending_rpc_without_urls() {
        let mut p = Project {
            master_url_fetch_pending: true,
            sched_rpc_pending: Some(ferrite_proto::client_state::RpcReason::Init),
            ..Project::default()
        };
        master_fetch_failed(&mut p);
        assert_eq!(p.master_fetch_failures, 1);
        assert!(!p.master_url_fetch_pending);
        assert_eq!(p.sched_rpc_pending, None);
    }

    #[test]
    fn url_rotation() {
        let p = Project {
            scheduler_urls: vec!["a".into(), "b".into(), "c".into()],
            ..Project::default()
        };
        assert_eq!(scheduler_url(&p, 0, 0.5), Some("b"));
        assert_eq!(scheduler_url(&p, 1, 0.5), Some("c"));
        assert_eq!(scheduler_url(&p, 2, 0.5), Some("a"));
        assert_eq!(scheduler_url(&p, 3, 0.5), None);
        assert_eq!(scheduler_url(&p, 0, f64::NAN), Some("a"));
        assert_eq!(scheduler_url(&p, 0, 0.9999), Some("c"));
    }
}
