//! The news feeds' and the project list's fetches: started over the projects' HTTP client,
//! their results applied to the feeds and the state.

use crate::event::Event;
use crate::notices::{InfoDue, InfoFetched, PROJECT_LIST_FILE};
use crate::Daemon;

impl Daemon {
    /// At start-up: the feeds kept from earlier runs ([`crate::notices::Feeds::load`]). The
    /// project list is due at once when the file is missing.
    pub(crate) fn load_feeds(&mut self, t: f64) {
        if !self.dir.join(PROJECT_LIST_FILE).exists() {
            self.state.all_projects_list_check_time = 0.0;
        }
        let projects = self
            .state
            .projects
            .iter()
            .map(|p| (p.project.master_url.clone(), p.project.project_name.clone()));
        self.feeds
            .load(&self.dir, &self.config.cc.options, projects, t);
    }

    /// A scheduler reply named project `url`'s feeds (`text`: its `<rss_feeds>` element).
    pub(crate) fn project_feeds(&mut self, url: &str, name: &str, text: &str) {
        self.feeds.reply_named(&self.dir, url, name, text);
    }

    /// Project `url` was detached: its feeds and their files go.
    pub(crate) fn forget_feeds(&mut self, url: &str) {
        self.feeds.forget(&self.dir, url);
    }

    /// One turn: start a due feed fetch and a due project list fetch (network allowed).
    pub(crate) fn tick_info(&mut self, t: f64) {
        if !self.network_allowed(t) {
            return;
        }
        let Some(http) = self.shared_http() else {
            return;
        };
        let InfoDue { feed, project_list } = self.feeds.due_fetches(
            &self.config.cc.options,
            self.state.all_projects_list_check_time,
            t,
        );
        if let Some(e) = feed {
            tracing::debug!(target: "ferrite::notice_debug", "start fetch from {}", e.feed.url);
            let events = self.events.clone();
            let http = http.clone();
            self.http_tasks.spawn(async move {
                let result = http.get_text(&e.feed.url).await.map_err(|e| e.boinc_code());
                let _ = events
                    .send(Event::Info(InfoFetched::Feed(e.feed.url, result)))
                    .await;
            });
        }
        if let Some(url) = project_list {
            tracing::debug!("fetching the project list from {url}");
            let events = self.events.clone();
            self.http_tasks.spawn(async move {
                let result = http.get_text(&url).await.map_err(|e| e.boinc_code());
                let _ = events
                    .send(Event::Info(InfoFetched::ProjectList(result)))
                    .await;
            });
        }
    }

    /// An information fetch ended.
    pub(crate) fn info_fetched(&mut self, done: InfoFetched, t: f64) {
        if let Some(checked) = self.feeds.info_fetched(&self.dir, done, t) {
            self.state.all_projects_list_check_time = checked;
            self.save.mark_dirty(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Daemon;

    #[test]
    fn no_info_fetch_stops_project_news_fetches_and_dont_contact_ref_site_does_not() {
        let feeds = "<rss_feeds>\n<rss_feed>\n<url>http://p.example/notices.php</url>\n\
                     <poll_interval>86400</poll_interval>\n</rss_feed>\n</rss_feeds>\n";
        for (no_info_fetch, ref_site, fetched) in [
            (true, false, false),
            (false, true, true),
            (false, false, true),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let opts = crate::cli::Options {
                no_info_fetch,
                ..crate::test_options(dir.path())
            };
            let mut d = Daemon::start(opts, crate::logging::init()).expect("daemon");
            d.config.cc.options.dont_contact_ref_site = ref_site;
            d.project_feeds("http://p.example/", "P", feeds);
            assert_eq!(d.feeds.all().len(), 1, "the reply's feeds are kept");
            assert_eq!(
                d.feeds
                    .due_fetches(
                        &d.config.cc.options,
                        crate::clock::now(),
                        crate::clock::now()
                    )
                    .feed
                    .is_some(),
                fetched,
                "no_info_fetch {no_info_fetch}, dont_contact_ref_site {ref_site}"
            );
        }
    }
}
