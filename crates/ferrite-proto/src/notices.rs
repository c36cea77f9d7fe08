//! Project notices: the `<rss_feeds>` a scheduler reply names (also the layout of
//! `notices/feeds.xml` and `notices/feeds_<project>.xml`), and the RSS 2.0 feeds themselves
//! (`<rss><channel><item>…`), as the official client reads them (`client/cs_notice.cpp`).

use crate::account::escape_project_url;
use crate::xml::{Parsed, Tag, XmlError, XmlReader, XmlWriter};

/// One project news feed (`<rss_feed>`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RssFeed {
    /// Where the feed is fetched from.
    pub url: String,
    /// Seconds between fetches.
    pub poll_interval: f64,
    /// Unix time of the next fetch (0: as soon as possible).
    pub next_poll_time: f64,
}

impl RssFeed {
    /// The URL without its query string: what the feed's file names are made from.
    pub fn url_base(&self) -> &str {
        self.url.split('?').next().unwrap_or("")
    }

    /// The cached feed under the data directory: `notices/<escaped URL base>.xml`.
    pub fn file_name(&self) -> String {
        let mut e = escape_project_url(self.url_base());
        e.truncate(128);
        format!("notices/{e}.xml")
    }

    /// Reads `<rss_feed>`; `None` when the URL or the poll interval is missing (the official
    /// client drops such a feed).
    pub fn read(r: &mut XmlReader<'_>, tag: &Tag<'_>) -> Result<Option<Self>, XmlError> {
        let mut f = Self::default();
        if tag.is_empty() {
            return Ok(None);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "url" => f.url = r.string(&c)?,
                "poll_interval" => f.poll_interval = r.num_or(&c, 0.0)?,
                "next_poll_time" => f.next_poll_time = r.num_or(&c, 0.0)?,
                _ => r.unknown(&c, "rss_feed")?,
            }
        }
        Ok((!f.url.is_empty() && f.poll_interval > 0.0).then_some(f))
    }

    /// Writes `<rss_feed>`.
    pub fn write(&self, w: &mut XmlWriter) {
        w.open("rss_feed")
            .text("url", &self.url)
            .f64("poll_interval", self.poll_interval)
            .f64("next_poll_time", self.next_poll_time)
            .close("rss_feed");
    }
}

/// The file name of a project's feed list: `notices/feeds_<escaped master URL>.xml`.
pub fn project_feed_list_file(master_url: &str) -> String {
    format!("notices/feeds_{}.xml", escape_project_url(master_url))
}

/// The client's list of every feed.
pub const FEED_LIST_FILE: &str = "notices/feeds.xml";

/// Parses an `<rss_feeds>` element (from a scheduler reply or a feed list file). An empty
/// text is an empty list.
pub fn parse_rss_feeds(text: &str, file: &str) -> Result<Parsed<Vec<RssFeed>>, XmlError> {
    if text.trim().is_empty() {
        return Ok(Parsed {
            value: Vec::new(),
            warnings: Vec::new(),
        });
    }
    crate::xml::parse_document(text, file, "rss_feeds", |r, tag| {
        let mut feeds = Vec::new();
        if tag.is_empty() {
            return Ok(feeds);
        }
        while let Some(c) = r.next_child()? {
            match c.name() {
                "rss_feed" => feeds.extend(RssFeed::read(r, &c)?),
                _ => r.unknown(&c, "rss_feeds")?,
            }
        }
        Ok(feeds)
    })
}

/// Writes a feed list as the official client does: nothing at all for no feeds.
pub fn rss_feeds_xml(feeds: &[RssFeed]) -> String {
    if feeds.is_empty() {
        return String::new();
    }
    let mut w = XmlWriter::new();
    w.open("rss_feeds");
    for f in feeds {
        f.write(&mut w);
    }
    w.close("rss_feeds");
    w.finish()
}

/// One news item of an RSS feed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RssItem {
    /// `<title>`.
    pub title: String,
    /// `<description>` (HTML, as sent).
    pub description: String,
    /// `<link>`.
    pub link: String,
    /// `<guid>`.
    pub guid: String,
    /// `<pubDate>` as Unix time; 0 when missing or unreadable.
    pub create_time: f64,
}

/// Reads the items of an RSS 2.0 document (`<rss><channel><item>…`). Elements other than the
/// item fields (namespaced extensions, channel metadata) are skipped without warnings.
pub fn parse_rss(text: &str, file: &str) -> Result<Vec<RssItem>, XmlError> {
    let mut r = XmlReader::new(text, file);
    let root = r.root("rss")?;
    let mut items = Vec::new();
    if root.is_empty() {
        return Ok(items);
    }
    while let Some(c) = r.next_child()? {
        if c.name() != "channel" || c.is_empty() {
            r.skip(&c)?;
            continue;
        }
        while let Some(i) = r.next_child()? {
            if i.name() != "item" || i.is_empty() {
                r.skip(&i)?;
                continue;
            }
            let mut item = RssItem::default();
            while let Some(f) = r.next_child()? {
                match f.name() {
                    "title" => item.title = cdata_text(r.string(&f)?),
                    "description" => item.description = cdata_text(r.string(&f)?),
                    "link" => item.link = cdata_text(r.string(&f)?),
                    "guid" => item.guid = cdata_text(r.string(&f)?),
                    "pubDate" => item.create_time = parse_rfc822(&r.string(&f)?).unwrap_or(0.0),
                    _ => r.skip(&f)?,
                }
            }
            items.push(item);
        }
    }
    Ok(items)
}

/// The text of a value that may be wrapped in CDATA sections.
fn cdata_text(s: String) -> String {
    if !s.contains("<![CDATA[") {
        return s;
    }
    s.replace("<![CDATA[", "")
        .replace("]]>", "")
        .trim()
        .to_owned()
}

/// Parses an RFC 822 date as RSS uses it (`Wed, 25 Nov 2026 12:00:00 +0000`, `… GMT`), to
/// Unix time.
pub fn parse_rfc822(s: &str) -> Option<f64> {
    let s = s.trim();
    let s = s.split_once(',').map_or(s, |(_, rest)| rest).trim();
    let mut it = s.split_whitespace();
    let day: i64 = it.next()?.parse().ok()?;
    let month = it.next()?.get(..3)?.to_ascii_lowercase();
    let month = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    .iter()
    .position(|m| *m == month)? as i64
        + 1;
    let mut year: i64 = it.next()?.parse().ok()?;
    if year < 100 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    let mut hms = it.next()?.split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let m: i64 = hms.next()?.parse().ok()?;
    let sec: i64 = hms.next().map_or(Some(0), |x| x.parse().ok())?;
    let offset = match it.next() {
        None => 0,
        Some(z) if z.starts_with('+') || z.starts_with('-') => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let digits = z.get(1..5)?;
            let zh: i64 = digits.get(..2)?.parse().ok()?;
            let zm: i64 = digits.get(2..)?.parse().ok()?;
            sign * (zh * 3600 + zm * 60)
        }
        Some(z) => match z.to_ascii_uppercase().as_str() {
            "EDT" => -4 * 3600,
            "EST" | "CDT" => -5 * 3600,
            "CST" | "MDT" => -6 * 3600,
            "MST" | "PDT" => -7 * 3600,
            "PST" => -8 * 3600,
            _ => 0,
        },
    };
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some((days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec - offset) as f64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Writes an RSS 2.0 feed of `items` (the loopback test project serves one).
pub fn rss_xml(title: &str, link: &str, items: &[RssItem]) -> String {
    let mut w = XmlWriter::new();
    w.raw("<rss version=\"2.0\">\n");
    w.open("channel").text("title", title).text("link", link);
    for i in items {
        w.open("item")
            .text("title", &i.title)
            .text("link", &i.link)
            .text("guid", &i.guid)
            .text("description", &i.description)
            .text("pubDate", &rfc822(i.create_time))
            .close("item");
    }
    w.close("channel");
    w.raw("</rss>\n");
    w.finish()
}

/// Formats Unix time as an RFC 822 date in GMT.
pub fn rfc822(t: f64) -> String {
    let secs = t as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (inverse of days_from_civil).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let wday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(m - 1) as usize];
    format!(
        "{wday}, {d:02} {month} {y} {:02}:{:02}:{:02} GMT",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_descs_round_trip_and_drop_incomplete_ones() {
        let text = "<rss_feeds>\n<rss_feed>\n<url>https://p.org/notices.php?x=1&amp;y=2</url>\n\
                    <poll_interval>86400</poll_interval>\n</rss_feed>\n\
                    <rss_feed><url>https://p.org/no_interval</url></rss_feed>\n</rss_feeds>\n";
        let feeds = parse_rss_feeds(text, "r").expect("parse").value;
        assert_eq!(feeds.len(), 1);
        assert_eq!(feeds[0].url, "https://p.org/notices.php?x=1&y=2");
        assert_eq!(feeds[0].url_base(), "https://p.org/notices.php");
        assert_eq!(feeds[0].file_name(), "notices/p.org_notices.php.xml");
        let again = parse_rss_feeds(&rss_feeds_xml(&feeds), "w")
            .expect("parse")
            .value;
        assert_eq!(again, feeds);
        assert_eq!(rss_feeds_xml(&[]), "");
        assert!(parse_rss_feeds("", "e").expect("parse").value.is_empty());
        assert_eq!(
            project_feed_list_file("http://127.0.0.1:8080/p/"),
            "notices/feeds_127.0.0.1_8080_p.xml"
        );
    }

    #[test]
    fn rss_items_are_read_with_cdata_and_dates() {
        let text = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<rss version=\"2.0\" \
            xmlns:atom=\"http://www.w3.org/2005/Atom\">\n<channel>\n<title>P news</title>\n\
            <atom:link href=\"x\" rel=\"self\"/>\n<item>\n<title>New app</title>\n\
            <link>https://p.org/forum_thread.php?id=1</link>\n<guid>g1</guid>\n\
            <description><![CDATA[We released <b>v2</b>.]]></description>\n\
            <pubDate>Wed, 25 Nov 2026 12:00:00 +0000</pubDate>\n</item>\n\
            <item><title>Two</title><pubDate>Tue, 24 Nov 2026 13:00:00 +0100</pubDate></item>\n\
            </channel>\n</rss>\n";
        let items = parse_rss(text, "feed").expect("parse");
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].title, "New app");
        assert_eq!(items[0].description, "We released <b>v2</b>.");
        assert_eq!(items[0].guid, "g1");
        assert_eq!(items[0].create_time, 1_795_608_000.0);
        assert_eq!(items[1].create_time, 1_795_608_000.0 - 86_400.0);
    }

    #[test]
    fn rfc822_dates_round_trip() {
        for t in [0.0, 951_782_400.0, 1_795_608_000.0, 4_102_444_799.0] {
            assert_eq!(parse_rfc822(&rfc822(t)), Some(t), "{}", rfc822(t));
        }
        assert_eq!(rfc822(1_795_608_000.0), "Wed, 25 Nov 2026 12:00:00 GMT");
        assert_eq!(
            parse_rfc822("25 Nov 2026 12:00 EST"),
            Some(1_795_608_000.0 + 5.0 * 3600.0)
        );
        assert_eq!(parse_rfc822("yesterday"), None);
    }

    #[test]
    fn written_feeds_read_back() {
        let items = vec![RssItem {
            title: "A & B".into(),
            description: "<p>text</p>".into(),
            link: "http://127.0.0.1:1/x".into(),
            guid: "1".into(),
            create_time: 1_795_608_000.0,
        }];
        assert_eq!(
            parse_rss(&rss_xml("T", "http://l/", &items), "f").expect("parse"),
            items
        );
    }
}
