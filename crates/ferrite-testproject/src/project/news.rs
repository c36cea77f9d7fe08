//! The project's news feed (`notices.rss`, named in every scheduler reply as the project's
//! `<rss_feeds>`) and a project list (`project_list.php`, the layout of BOINC's
//! `all_projects_list.xml`) naming this project and the account manager under `/am/`, so
//! clients (and BOINC Manager's wizards) can be pointed at them offline.

use std::sync::OnceLock;

use ferrite_proto::notices::{rss_xml, RssItem};

use super::{lock, now, Project};
use ferrite_proto::xml::escape;

/// Seconds between fetches of the feed that the scheduler replies ask for.
pub const FEED_POLL_INTERVAL: f64 = 3600.0;

/// When this process first served news: the items' dates, stable across fetches.
fn news_epoch() -> f64 {
    static T: OnceLock<f64> = OnceLock::new();
    *T.get_or_init(|| now().floor())
}

impl Project {
    /// The feed's URL.
    pub fn feed_url(&self) -> String {
        format!("{}notices.rss", self.base_url)
    }

    /// The `<rss_feeds>` element of a scheduler reply.
    pub fn rss_feeds(&self) -> String {
        format!(
            "<rss_feeds>\n<rss_feed>\n<url>{}</url>\n<poll_interval>{FEED_POLL_INTERVAL}</poll_interval>\n</rss_feed>\n</rss_feeds>\n",
            escape(&self.feed_url())
        )
    }

    /// `notices.rss`: two news items, an hour apart.
    pub fn news_feed(&self) -> String {
        {
            let mut state = lock(&self.state);
            state.counters.feed_fetches += 1;
        }
        let t = news_epoch();
        let name = &self.args.name;
        let items = [
            RssItem {
                title: format!("Welcome to {name}"),
                description: format!(
                    "<p>{name} is a loopback test project: its jobs run a small shell app.</p>"
                ),
                link: format!("{}forum_thread.php?id=1", self.base_url),
                guid: "news-1".into(),
                create_time: t - 3600.0,
            },
            RssItem {
                title: "New work available".into(),
                description: "Fresh jobs are ready for every host.".into(),
                link: format!("{}forum_thread.php?id=2", self.base_url),
                guid: "news-2".into(),
                create_time: t,
            },
        ];
        rss_xml(name, &self.base_url, &items)
    }

    /// `project_list.php`: an `all_projects_list.xml` naming this project, one more and the
    /// account manager under `/am/`.
    pub fn project_list(&self) -> String {
        {
            let mut state = lock(&self.state);
            state.counters.project_list_fetches += 1;
        }
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<projects>\n<project>\n    <name>{name}</name>\n    \
             <id>1</id>\n    <url>{url}</url>\n    <web_url>{url}</web_url>\n    \
             <general_area>Testing</general_area>\n    <specific_area>Loopback test project</specific_area>\n    \
             <description><![CDATA[A BOINC project served on this computer for tests.]]></description>\n    \
             <home>Ferrite tests</home>\n    <platforms>\n        <name>x86_64-pc-linux-gnu</name>\n    \
             </platforms>\n</project>\n<project>\n    <name>Second Test Project</name>\n    <id>2</id>\n    \
             <url>{url}second/</url>\n    <web_url>{url}second/</web_url>\n    \
             <general_area>Testing</general_area>\n    <specific_area>Another entry</specific_area>\n    \
             <description><![CDATA[A second entry of the test list.]]></description>\n    \
             <home>Ferrite tests</home>\n    <platforms>\n        <name>x86_64-pc-linux-gnu</name>\n    \
             </platforms>\n</project>\n<account_manager>\n    <name>{am_name}</name>\n    \
             <url>{url}am/</url>\n    <description><![CDATA[The account manager served under /am/ \
             of this test project.]]></description>\n</account_manager>\n</projects>\n",
            name = escape(&self.args.name),
            url = escape(&self.base_url),
            am_name = escape(crate::acct_mgr::AM_NAME),
        )
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use ferrite_proto::notices::{parse_rss, parse_rss_feeds};

    use crate::config::Args;
    use crate::project::Project;

    #[test]
    fn the_feed_named_in_replies_is_served_with_two_items() {
        let d = tempfile::tempdir().expect("tempdir");
        let args = Args::parse_from(["ferrite-testproject", "--jobs", "0"]);
        let p = Project::new(args, d.path().join("data"), "http://127.0.0.1:1/".into())
            .expect("project");
        let feeds = parse_rss_feeds(&p.rss_feeds(), "r").expect("feeds").value;
        assert_eq!(feeds.len(), 1);
        assert_eq!(feeds[0].url, "http://127.0.0.1:1/notices.rss");
        let items = parse_rss(&p.news_feed(), "f").expect("rss");
        assert_eq!(items.len(), 2);
        assert!(items[0].create_time < items[1].create_time);
        assert_eq!(
            items,
            parse_rss(&p.news_feed(), "f").expect("rss"),
            "stable"
        );
        let list = p.project_list();
        assert!(list.contains("<url>http://127.0.0.1:1/</url>") && list.contains("</projects>"));
        assert!(
            list.contains("<account_manager>\n    <name>Ferrite test AM</name>\n    <url>http://127.0.0.1:1/am/</url>"),
            "{list}"
        );
    }
}
