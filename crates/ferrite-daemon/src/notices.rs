//! Project news (RSS) feeds and the list of BOINC projects: the two things the official
//! client fetches for its GUIs besides project work.
//!
//! **Feeds.** A scheduler reply may name the project's news feeds (`<rss_feeds>`). As the
//! official client (`client/cs_notice.cpp`), Ferrite keeps each project's set in
//! `notices/feeds_<project>.xml` and the union in `notices/feeds.xml`, fetches each feed when
//! its `poll_interval` has passed (one fetch at a time, never while the network is
//! suspended), keeps the fetched document as `notices/<feed>.xml`, and adds its items of the
//! last 30 days as project notices (category empty, the project's name, title, link). Feeds
//! a new reply leaves out are dropped with their files. At start-up the kept feed files are
//! read again, so the notices survive a restart. With `no_info_fetch` (command line or
//! cc_config) no feed is fetched or read again, as in the official client;
//! `dont_contact_ref_site` does not stop them.
//!
//! **Project list.** `all_projects_list.xml` is fetched from BOINC's project list URL every
//! 14 days (a failed fetch is tried again a day later), off with `no_info_fetch` or
//! `dont_contact_ref_site`, and written through a temporary file. Until one has been fetched,
//! `get_all_projects_list` answers with the list compiled into Ferrite ([`BUNDLED_LIST`]).
//!
//! [`Feeds`] is the bookkeeping and the feed files; it says which fetches are due
//! ([`Feeds::due_fetches`]) and takes their results ([`Feeds::info_fetched`]). The glue in
//! `daemon/notices.rs` starts the fetches, whose results come back to the main loop as
//! events.

use std::fs;
use std::path::Path;

use ferrite_proto::cc_config::CcOptions;
use ferrite_proto::notices::{
    parse_rss, parse_rss_feeds, project_feed_list_file, rss_feeds_xml, RssFeed, FEED_LIST_FILE,
};
use tracing::debug;

use crate::messages::{MessageLog, Notice, NOTICE_MAX_AGE};

/// BOINC's project list, as the official client fetches it.
pub const PROJECT_LIST_URL: &str = "https://boinc.berkeley.edu/project_list.php";
/// Replaces [`PROJECT_LIST_URL`]; for tests only (they serve the list on loopback).
pub const PROJECT_LIST_URL_ENV: &str = "FERRITE_PROJECT_LIST_URL";
/// How often the project list is fetched (`ALL_PROJECTS_LIST_CHECK_PERIOD`).
pub const PROJECT_LIST_PERIOD: f64 = 14.0 * 86_400.0;
/// After a failed fetch, the next try is this long later.
pub const PROJECT_LIST_RETRY: f64 = 86_400.0;
/// The project list file in the data directory.
pub const PROJECT_LIST_FILE: &str = "all_projects_list.xml";
const PROJECT_LIST_TEMP: &str = "all_projects_list_temp.xml";

/// A small project list (names, URLs, areas, descriptions: public facts) served until the
/// first fetched list arrives, so the attach wizard is never empty.
pub const BUNDLED_LIST: &str = include_str!("../data/all_projects_list.xml");

/// One feed and the project that named it.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedEntry {
    /// The project's master URL.
    pub project_url: String,
    /// The project's name (notices carry it).
    pub project_name: String,
    /// The feed.
    pub feed: RssFeed,
}

/// Every project's feeds and when each is fetched next.
#[derive(Debug, Default)]
pub struct Feeds {
    entries: Vec<FeedEntry>,
    in_flight: Option<String>,
    /// Only this source's feeds are fetched (an account manager that sent
    /// `no_project_notices`: its own feeds, none of the projects').
    pub only_from: Option<String>,
    /// The project list is being fetched.
    pub project_list_in_flight: bool,
}

impl Feeds {
    /// Sets the feeds project `url` names now; returns whether its set changed (a feed added
    /// or removed, or a poll interval changed). Feeds that stay keep their next poll time.
    pub fn set_project(&mut self, url: &str, name: &str, feeds: Vec<RssFeed>) -> bool {
        let old: Vec<FeedEntry> = self
            .entries
            .iter()
            .filter(|e| e.project_url == url)
            .cloned()
            .collect();
        let mut changed = old.len() != feeds.len();
        self.entries.retain(|e| e.project_url != url);
        for mut f in feeds {
            match old.iter().find(|o| o.feed.url == f.url) {
                Some(o) => {
                    changed |= o.feed.poll_interval != f.poll_interval;
                    f.next_poll_time = o.feed.next_poll_time;
                }
                None => changed = true,
            }
            self.entries.push(FeedEntry {
                project_url: url.to_owned(),
                project_name: name.to_owned(),
                feed: f,
            });
        }
        changed
    }

    /// A project's feeds.
    pub fn project(&self, url: &str) -> Vec<RssFeed> {
        self.entries
            .iter()
            .filter(|e| e.project_url == url)
            .map(|e| e.feed.clone())
            .collect()
    }

    /// Every feed once (the first project naming a URL owns it).
    pub fn all(&self) -> Vec<&FeedEntry> {
        let mut out: Vec<&FeedEntry> = Vec::new();
        for e in &self.entries {
            if !out.iter().any(|o| o.feed.url == e.feed.url) {
                out.push(e);
            }
        }
        out
    }

    /// The next feed to fetch at `now`, if one is due and none is being fetched; its next
    /// poll time moves a poll interval on (as the official client, whatever the outcome).
    pub fn due(&mut self, now: f64) -> Option<FeedEntry> {
        if self.in_flight.is_some() {
            return None;
        }
        let only = self.only_from.as_deref();
        let url = self
            .all()
            .into_iter()
            .find(|e| now > e.feed.next_poll_time && only.is_none_or(|u| e.project_url == u))?
            .feed
            .url
            .clone();
        let mut picked = None;
        for e in self.entries.iter_mut().filter(|e| e.feed.url == url) {
            e.feed.next_poll_time = now + e.feed.poll_interval;
            picked.get_or_insert_with(|| e.clone());
        }
        self.in_flight = Some(url);
        picked
    }

    /// The fetch of `url` ended; returns its entry if the feed is still wanted.
    pub fn fetched(&mut self, url: &str) -> Option<FeedEntry> {
        if self.in_flight.as_deref() == Some(url) {
            self.in_flight = None;
        }
        self.entries.iter().find(|e| e.feed.url == url).cloned()
    }
}

/// What an information fetch brought back.
#[derive(Debug)]
pub enum InfoFetched {
    /// A news feed: its URL and the document, or a BOINC error code.
    Feed(String, Result<String, i32>),
    /// The project list, or a BOINC error code.
    ProjectList(Result<String, i32>),
}

/// The project list `get_all_projects_list` serves from data directory `dir`: the fetched
/// file when there is a usable one, else [`BUNDLED_LIST`]. Starts at `<projects>`.
pub fn project_list(dir: &Path) -> String {
    let text = fs::read_to_string(dir.join(PROJECT_LIST_FILE)).unwrap_or_default();
    let text = if text.contains("</projects>") {
        text
    } else {
        BUNDLED_LIST.to_owned()
    };
    let start = text.find("<projects").unwrap_or(0);
    let mut s = text[start..].trim_end().to_owned();
    s.push('\n');
    s
}

/// Whether the project list is due at `t`, last checked at `last` (0: never).
pub fn project_list_due_at(last: f64, t: f64) -> bool {
    last == 0.0 || t - last >= PROJECT_LIST_PERIOD
}

/// The check time to record after a fetch at `t`: `t` when it worked; otherwise a time that
/// makes the list due again a day later.
pub fn project_list_checked(ok: bool, t: f64) -> f64 {
    if ok {
        t
    } else {
        t - PROJECT_LIST_PERIOD + PROJECT_LIST_RETRY
    }
}

/// Project notices for the items of an RSS document fetched at `t` (older than 30 days left
/// out), oldest first; `None` when the document is not RSS.
pub fn feed_notices(text: &str, entry: &FeedEntry, t: f64) -> Option<Vec<Notice>> {
    let items = parse_rss(text, &entry.feed.file_name()).ok()?;
    let mut out: Vec<Notice> = items
        .into_iter()
        .filter(|i| i.create_time >= t - NOTICE_MAX_AGE)
        .map(|i| Notice {
            title: i.title,
            description: i.description,
            create_time: i.create_time,
            arrival_time: t,
            project_name: entry.project_name.clone(),
            category: String::new(),
            link: i.link,
            ..Notice::default()
        })
        .collect();
    out.sort_by(|a, b| a.create_time.total_cmp(&b.create_time));
    Some(out)
}

/// What the information fetches want started now.
#[derive(Debug, Default, PartialEq)]
pub struct InfoDue {
    /// A news feed to fetch.
    pub feed: Option<FeedEntry>,
    /// The project list, from this URL.
    pub project_list: Option<String>,
}

impl Feeds {
    /// At start-up: each project's feed list (`projects`: master URL and name), and the
    /// notices of the feeds kept in `dir` from earlier fetches. Not with `no_info_fetch`,
    /// as the official client.
    pub fn load(
        &mut self,
        dir: &Path,
        options: &CcOptions,
        projects: impl IntoIterator<Item = (String, String)>,
        t: f64,
    ) {
        if options.no_info_fetch {
            return;
        }
        for (url, name) in projects {
            let file = project_feed_list_file(&url);
            let Ok(text) = fs::read_to_string(dir.join(&file)) else {
                continue;
            };
            let Ok(feeds) = parse_rss_feeds(&text, &file) else {
                continue;
            };
            self.set_project(&url, &name, feeds.value);
        }
        for e in self.all() {
            if let Ok(text) = fs::read_to_string(dir.join(e.feed.file_name())) {
                for n in feed_notices(&text, e, t).unwrap_or_default() {
                    MessageLog::global().add_notice(n);
                }
            }
        }
    }

    /// A scheduler reply named project `url`'s feeds (`text`: its `<rss_feeds>` element);
    /// the feed lists in `dir` follow, and the files of feeds no longer named go.
    pub fn reply_named(&mut self, dir: &Path, url: &str, name: &str, text: &str) {
        let feeds = match parse_rss_feeds(text, "scheduler reply <rss_feeds>") {
            Ok(p) => p.value,
            Err(e) => {
                debug!(target: "ferrite::notice_debug", "unusable <rss_feeds>: {e}");
                return;
            }
        };
        let before: Vec<RssFeed> = self.project(url);
        if self.set_project(url, name, feeds) {
            let now_urls: Vec<String> = self.all().iter().map(|e| e.feed.url.clone()).collect();
            for gone in before.iter().filter(|f| !now_urls.contains(&f.url)) {
                let _ = fs::remove_file(dir.join(gone.file_name()));
            }
            self.write_lists(dir, url);
        }
    }

    /// Project `url` was detached: its feeds and their files in `dir` go.
    pub fn forget(&mut self, dir: &Path, url: &str) {
        let before = self.project(url);
        if before.is_empty() {
            return;
        }
        self.set_project(url, "", Vec::new());
        let _ = fs::remove_file(dir.join(project_feed_list_file(url)));
        for f in &before {
            if !self.all().iter().any(|e| e.feed.url == f.url) {
                let _ = fs::remove_file(dir.join(f.file_name()));
            }
        }
        self.write_lists(dir, url);
    }

    fn write_lists(&self, dir: &Path, url: &str) {
        let notices = dir.join("notices");
        if let Err(e) = fs::create_dir_all(&notices) {
            debug!(target: "ferrite::notice_debug", "cannot make {}: {e}", notices.display());
            return;
        }
        let project = self.project(url);
        let path = dir.join(project_feed_list_file(url));
        let _ = if project.is_empty() {
            fs::remove_file(path)
        } else {
            fs::write(path, rss_feeds_xml(&project))
        };
        let all: Vec<RssFeed> = self.all().into_iter().map(|e| e.feed.clone()).collect();
        let _ = fs::write(dir.join(FEED_LIST_FILE), rss_feeds_xml(&all));
    }

    /// The fetches to start at `t` (the network allowed), the project list last checked at
    /// `list_checked`; both are marked in flight.
    pub fn due_fetches(&mut self, options: &CcOptions, list_checked: f64, t: f64) -> InfoDue {
        let feed = self.feed_due(options, t);
        let project_list = self.project_list_due(options, list_checked, t).then(|| {
            self.project_list_in_flight = true;
            std::env::var(PROJECT_LIST_URL_ENV)
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| PROJECT_LIST_URL.to_owned())
        });
        InfoDue { feed, project_list }
    }

    /// The feed to fetch now, if any. None with `no_info_fetch`: as the official client
    /// (which polls its RSS feed operation only without it), project news is not fetched,
    /// though the feeds a scheduler reply names are still kept. `dont_contact_ref_site`
    /// leaves news alone (it stops the project list only).
    fn feed_due(&mut self, options: &CcOptions, t: f64) -> Option<FeedEntry> {
        if options.no_info_fetch {
            return None;
        }
        self.due(t)
    }

    fn project_list_due(&self, options: &CcOptions, list_checked: f64, t: f64) -> bool {
        if self.project_list_in_flight || options.no_info_fetch || options.dont_contact_ref_site {
            return false;
        }
        project_list_due_at(list_checked, t)
    }

    /// An information fetch ended at `t`: a feed's document is kept in `dir` and its new
    /// items become notices; a project list replaces `all_projects_list.xml`. Returns the
    /// project list's new check time after a project list fetch.
    pub fn info_fetched(&mut self, dir: &Path, done: InfoFetched, t: f64) -> Option<f64> {
        match done {
            InfoFetched::Feed(url, result) => {
                let entry = self.fetched(&url)?;
                let text = match result {
                    Ok(text) => text,
                    Err(code) => {
                        debug!(target: "ferrite::notice_debug", "fetch of {url} failed: {code}");
                        return None;
                    }
                };
                let _ = fs::create_dir_all(dir.join("notices"));
                let _ = fs::write(dir.join(entry.feed.file_name()), &text);
                match feed_notices(&text, &entry, t) {
                    Some(list) => {
                        let n = list
                            .into_iter()
                            .filter(|n| MessageLog::global().add_notice(n.clone()))
                            .count();
                        debug!(target: "ferrite::notice_debug", "{url}: {n} new notices");
                    }
                    None => debug!(target: "ferrite::notice_debug", "{url}: not an RSS feed"),
                }
                None
            }
            InfoFetched::ProjectList(result) => {
                self.project_list_in_flight = false;
                let ok = match result {
                    Ok(text) if text.contains("</projects>") => {
                        let tmp = dir.join(PROJECT_LIST_TEMP);
                        fs::write(&tmp, &text)
                            .and_then(|()| fs::rename(&tmp, dir.join(PROJECT_LIST_FILE)))
                            .is_ok()
                    }
                    Ok(_) => false,
                    Err(code) => {
                        debug!("project list fetch failed: {code}");
                        false
                    }
                };
                Some(project_list_checked(ok, t))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(url: &str, every: f64) -> RssFeed {
        RssFeed {
            url: url.into(),
            poll_interval: every,
            next_poll_time: 0.0,
        }
    }

    #[test]
    fn only_the_managers_feeds_when_it_hides_project_notices() {
        let mut f = Feeds::default();
        f.set_project("P", "Proj", vec![feed("p", 100.0)]);
        f.set_project("AM", "Manager", vec![feed("am", 100.0)]);
        f.only_from = Some("AM".into());
        let e = f.due(10.0).expect("the manager's feed");
        assert_eq!(e.feed.url, "am");
        f.fetched("am");
        assert!(f.due(11.0).is_none(), "the project's feed is not fetched");
    }

    #[test]
    fn feeds_are_polled_on_their_interval_one_at_a_time() {
        let mut f = Feeds::default();
        assert!(f.set_project("P", "Proj", vec![feed("a", 100.0), feed("b", 50.0)]));
        let first = f.due(10.0).expect("a is due");
        assert_eq!(first.feed.url, "a");
        assert!(f.due(10.0).is_none(), "one fetch at a time");
        assert_eq!(f.fetched("a").map(|e| e.project_name), Some("Proj".into()));
        assert_eq!(f.due(10.0).map(|e| e.feed.url), Some("b".into()));
        f.fetched("b");
        assert!(f.due(60.0).is_none(), "b is next due after 60");
        assert_eq!(f.due(60.5).map(|e| e.feed.url), Some("b".into()));
        f.fetched("b");
        assert_eq!(f.due(110.5).map(|e| e.feed.url), Some("a".into()));
        f.fetched("a");
        // The same set again changes nothing and keeps the schedule.
        assert!(!f.set_project("P", "Proj", vec![feed("a", 100.0), feed("b", 50.0)]));
        assert_eq!(f.due(111.0).map(|e| e.feed.url), Some("b".into()));
        f.fetched("b");
        assert!(f.due(112.0).is_none(), "a is next due after 210.5");
        // A changed interval or a dropped feed is a change.
        assert!(f.set_project("P", "Proj", vec![feed("a", 200.0)]));
        assert_eq!(f.project("P").len(), 1);
        assert!(f.set_project("P", "Proj", Vec::new()));
        assert!(f.all().is_empty());
    }

    #[test]
    fn a_shared_feed_is_fetched_once() {
        let mut f = Feeds::default();
        f.set_project("P", "P1", vec![feed("same", 100.0)]);
        f.set_project("Q", "Q1", vec![feed("same", 100.0)]);
        assert_eq!(f.all().len(), 1);
        assert!(f.due(1.0).is_some());
        f.fetched("same");
        assert!(f.due(2.0).is_none());
    }

    #[test]
    fn feed_items_become_project_notices_oldest_first_recent_only() {
        let t = 1_795_608_000.0;
        let items = vec![
            ferrite_proto::notices::RssItem {
                title: "New".into(),
                description: "d2".into(),
                create_time: t - 10.0,
                ..Default::default()
            },
            ferrite_proto::notices::RssItem {
                title: "Old".into(),
                create_time: t - 40.0 * 86_400.0,
                ..Default::default()
            },
            ferrite_proto::notices::RssItem {
                title: "Earlier".into(),
                create_time: t - 3600.0,
                ..Default::default()
            },
        ];
        let text = ferrite_proto::notices::rss_xml("T", "http://x/", &items);
        let entry = FeedEntry {
            project_url: "http://x/".into(),
            project_name: "X".into(),
            feed: feed("http://x/rss", 60.0),
        };
        let n = feed_notices(&text, &entry, t).expect("rss");
        assert_eq!(
            n.iter().map(|n| n.title.as_str()).collect::<Vec<_>>(),
            ["Earlier", "New"]
        );
        assert!(n
            .iter()
            .all(|n| n.category.is_empty() && n.project_name == "X"));
        assert_eq!(n[1].arrival_time, t);
        assert!(feed_notices("<html/>", &entry, t).is_none());
    }

    #[test]
    fn the_project_list_is_fetched_every_14_days_and_a_day_after_a_failure() {
        let t = 1_795_608_000.0;
        assert!(project_list_due_at(0.0, t), "never fetched: due at once");
        let done = project_list_checked(true, t);
        assert!(!project_list_due_at(done, t + 13.9 * 86_400.0));
        assert!(project_list_due_at(done, t + 14.0 * 86_400.0));
        let failed = project_list_checked(false, t);
        assert!(!project_list_due_at(failed, t + 86_399.0));
        assert!(project_list_due_at(failed, t + 86_400.0));
    }

    #[test]
    fn due_fetches_follow_the_options_and_one_project_list_is_fetched_at_a_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = 1_795_608_000.0;
        let mut f = Feeds::default();
        f.set_project("P", "Proj", vec![feed("a", 100.0)]);
        let mut o = CcOptions {
            no_info_fetch: true,
            ..CcOptions::default()
        };
        assert_eq!(f.due_fetches(&o, 0.0, t), InfoDue::default());
        o.no_info_fetch = false;
        o.dont_contact_ref_site = true;
        let due = f.due_fetches(&o, 0.0, t);
        assert_eq!(due.feed.map(|e| e.feed.url).as_deref(), Some("a"));
        assert_eq!(due.project_list, None, "dont_contact_ref_site");
        o.dont_contact_ref_site = false;
        assert!(f.due_fetches(&o, 0.0, t).project_list.is_some());
        assert_eq!(
            f.due_fetches(&o, 0.0, t).project_list,
            None,
            "one at a time"
        );
        let list = "<projects>\n<project><name>X</name></project>\n</projects>\n";
        let done = InfoFetched::ProjectList(Ok(list.to_owned()));
        assert_eq!(f.info_fetched(dir.path(), done, t), Some(t));
        assert!(project_list(dir.path()).contains("<name>X</name>"));
        assert!(!f.project_list_in_flight);
        let failed = InfoFetched::ProjectList(Err(-113));
        assert_eq!(
            f.info_fetched(dir.path(), failed, t),
            Some(project_list_checked(false, t))
        );
        let feed_done = InfoFetched::Feed("a".into(), Err(-113));
        assert_eq!(f.info_fetched(dir.path(), feed_done, t), None);
    }

    #[test]
    fn the_bundled_list_is_served_until_a_list_was_fetched() {
        let d = tempfile::tempdir().expect("tempdir");
        let bundled = project_list(d.path());
        assert!(bundled.starts_with("<projects>"), "{bundled}");
        assert!(bundled.matches("<project>").count() >= 10);
        // BOINC Manager's account manager wizard takes the first listed manager as selected
        // and ends (a null entry) when there is none, so the list always names some.
        assert!(
            bundled.contains(
                "<account_manager>\n    <name>Science United</name>\n    <url>https://scienceunited.org/</url>"
            ),
            "{bundled}"
        );
        fs::write(
            d.path().join(PROJECT_LIST_FILE),
            "<projects>\n<project><name>Only</name></project>\n</projects>\n",
        )
        .expect("write");
        assert!(project_list(d.path()).contains("Only"));
        fs::write(d.path().join(PROJECT_LIST_FILE), "<projects><cut").expect("write");
        assert_eq!(project_list(d.path()), bundled);
    }
}
