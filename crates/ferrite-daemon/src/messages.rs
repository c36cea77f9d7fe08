//! The event log GUIs read with `get_messages` and the notices of `get_notices`.
//!
//! A `tracing` layer ([`MessageLayer`]) copies every log line that passes the daemon's filter
//! into a bounded buffer, like the official client's message list: sequence numbers from 1,
//! the newest [`MAX_MESSAGES`] kept. Only lines logged on the [`NOTICE_TARGET`] target are user
//! alerts and also become client notices, as only the official client's `MSG_USER_ALERT`
//! messages do; warnings are ordinary lines and errors are `MSG_INTERNAL_ERROR` lines.
//! Scheduler messages of priority `notice` and project news (RSS) items are added with
//! [`MessageLog::add_notice`]. Every line and notice passes through [`redact`] first.
//!
//! The buffer is process-wide because logging starts before the daemon exists. Its writers:
//! the tracing layer (every line any code logs, notices on [`NOTICE_TARGET`]), the news feeds
//! (`notices.rs`: [`MessageLog::add_notice`]), scheduler replies (`daemon/projects/reply.rs`: a
//! project's scheduler notices withdrawn), a reload (`setup.rs`: the configuration's notices
//! withdrawn) and GUI RPC's project names (`rpc/`, which also reads it for its replies).

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use ferrite_gui_rpc::Body;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Messages kept (`MAX_SAVED_MESSAGES` in the official client).
pub const MAX_MESSAGES: usize = 2000;
/// Notices kept; older ones are dropped and every GUI told to refresh its list.
pub const MAX_NOTICES: usize = 200;
/// The tracing target of user alerts: `warn!(target: NOTICE_TARGET, …)` is logged, shown in
/// the event log with the user-alert priority and added as a client notice.
pub const NOTICE_TARGET: &str = "ferrite::notice";
/// Notices older than this are dropped (the official client's 30 days).
pub const NOTICE_MAX_AGE: f64 = 30.0 * 86_400.0;
/// A scheduler notice with the same text as a kept one is shown again only after this long.
pub const SCHEDULER_NOTICE_REPEAT: f64 = 7.0 * 86_400.0;

/// `MSG_INFO`.
pub const PRI_INFO: i32 = 1;
/// `MSG_USER_ALERT`.
pub const PRI_USER_ALERT: i32 = 2;
/// `MSG_INTERNAL_ERROR`.
pub const PRI_INTERNAL_ERROR: i32 = 3;

/// One event-log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// 1, 2, 3, … in order of arrival.
    pub seqno: u64,
    /// Project name (or URL) the line is about; empty for general lines.
    pub project: String,
    /// `PRI_*`.
    pub priority: i32,
    /// Unix time, whole seconds.
    pub time: i64,
    /// The text.
    pub body: String,
}

/// One notice (`NOTICE` in the official client).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Notice {
    /// 1, 2, 3, … in order of arrival (set when added).
    pub seqno: u64,
    /// Title (project news items have one).
    pub title: String,
    /// The text (HTML allowed for news items).
    pub description: String,
    /// When the notice was written (a news item's `pubDate`).
    pub create_time: f64,
    /// When the client got it.
    pub arrival_time: f64,
    /// Project the notice is about; empty for general ones.
    pub project_name: String,
    /// `client` for the client's own alerts, `scheduler` for scheduler messages, empty for
    /// project news.
    pub category: String,
    /// "More" link.
    pub link: String,
    /// Left out of `get_notices_public`.
    pub is_private: bool,
}

impl Notice {
    /// A client notice (a user alert).
    pub fn client(project: &str, text: &str, t: f64) -> Notice {
        Notice {
            description: text.to_owned(),
            create_time: t,
            arrival_time: t,
            project_name: project.to_owned(),
            category: "client".to_owned(),
            ..Notice::default()
        }
    }

    fn same_text(&self, other: &Notice) -> bool {
        self.title == other.title && self.description == other.description
    }
}

/// A kept event-log line, already in its `get_messages` form: a reply is the entries after
/// a sequence number, shared (not copied) one after the other.
#[derive(Debug)]
struct Entry {
    seqno: u64,
    /// `<msg>…</msg>\n` with translation markers dropped (what GUIs ask for).
    xml: Bytes,
    /// The same with the markers kept, only when that differs (`translatable`).
    marked: Option<Bytes>,
}

impl Entry {
    fn new(m: &Message) -> Entry {
        let mut xml = String::with_capacity(m.body.len() + m.project.len() + 110);
        write_msg(&mut xml, m, false);
        let marked = has_markers(&m.body).then(|| {
            let mut t = String::with_capacity(xml.len() + 8);
            write_msg(&mut t, m, true);
            Bytes::from(t.into_bytes().into_boxed_slice())
        });
        Entry {
            seqno: m.seqno,
            xml: Bytes::from(xml.into_bytes().into_boxed_slice()),
            marked,
        }
    }

    fn xml(&self, translatable: bool) -> &Bytes {
        match &self.marked {
            Some(m) if translatable => m,
            _ => &self.xml,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    messages: VecDeque<Entry>,
    next_seqno: u64,
    notices: VecDeque<Notice>,
    next_notice: u64,
    /// Bumped whenever notices are dropped: a connection that last read an older generation
    /// must be told to clear its list (the official refresh rule).
    generation: u64,
    /// Generation each connection last read, by connection id.
    seen: HashMap<u64, u64>,
    /// Each attached project's name by master URL (only projects that have one).
    names: HashMap<String, String>,
}

/// The bounded message and notice store.
#[derive(Debug, Default)]
pub struct MessageLog {
    inner: Mutex<Inner>,
}

impl MessageLog {
    /// The process-wide log the [`MessageLayer`] fills.
    pub fn global() -> &'static MessageLog {
        static LOG: OnceLock<MessageLog> = OnceLock::new();
        LOG.get_or_init(MessageLog::default)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the names of the attached projects, as (master URL, name) pairs; a pair with an
    /// empty name is left out. A line or notice logged about a project by its master URL
    /// then shows the project's name, as the official client's lines (`msg_printf(project,
    /// …)`: the project's name, or its master URL while it has none) do.
    pub fn set_project_names<'a>(&self, names: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let names = names
            .into_iter()
            .filter(|(_, name)| !name.is_empty())
            .map(|(url, name)| (url.to_owned(), name.to_owned()))
            .collect();
        self.lock().names = names;
    }

    /// What a line about `project` (a master URL or a name) shows as its project: the name
    /// of the project with that master URL when it has one, else `project` itself.
    pub fn project_name(&self, project: &str) -> String {
        if project.is_empty() {
            return String::new();
        }
        let g = self.lock();
        g.names
            .get(project)
            .map_or_else(|| project.to_owned(), Clone::clone)
    }

    /// Adds an event-log line (redacted); `project` may be the project's master URL (see
    /// [`project_name`](Self::project_name)).
    pub fn push(&self, project: &str, priority: i32, time: f64, body: &str) {
        let mut g = self.lock();
        g.next_seqno += 1;
        let seqno = g.next_seqno;
        let project = g
            .names
            .get(project)
            .map_or(project, String::as_str)
            .to_owned();
        let entry = Entry::new(&Message {
            seqno,
            project,
            priority,
            time: time as i64,
            body: redact(body),
        });
        g.messages.push_back(entry);
        while g.messages.len() > MAX_MESSAGES {
            g.messages.pop_front();
        }
    }

    /// Adds a notice unless one with the same title and text is kept (a scheduler notice
    /// comes back after [`SCHEDULER_NOTICE_REPEAT`], replacing the old one); drops notices
    /// older than [`NOTICE_MAX_AGE`] relative to the new one's arrival. Returns whether it was
    /// added.
    pub fn add_notice(&self, mut n: Notice) -> bool {
        n.title = redact(&n.title);
        n.description = redact(&n.description);
        n.link = redact(&n.link);
        let mut g = self.lock();
        let min_time = n.arrival_time - NOTICE_MAX_AGE;
        let before = g.notices.len();
        g.notices.retain(|o| {
            o.arrival_time >= min_time && (o.create_time == 0.0 || o.create_time >= min_time)
        });
        let mut removed = g.notices.len() != before;
        let repeat = if n.category == "scheduler" {
            SCHEDULER_NOTICE_REPEAT
        } else {
            0.0
        };
        let mut keep_old = false;
        g.notices.retain(|o| {
            if !o.same_text(&n) {
                return true;
            }
            if n.create_time > o.create_time + repeat {
                removed = true;
                false
            } else {
                keep_old = true;
                true
            }
        });
        if removed {
            g.generation += 1;
        }
        if keep_old {
            return false;
        }
        g.next_notice += 1;
        n.seqno = g.next_notice;
        g.notices.push_back(n);
        if g.notices.len() > MAX_NOTICES {
            g.notices.pop_front();
            g.generation += 1;
        }
        true
    }

    /// Removes the notices whose text mentions `what` (the official client withdraws the
    /// notices about `cc_config.xml` once the file has been read to its end).
    pub fn remove_notices_mentioning(&self, what: &str) {
        let mut g = self.lock();
        let before = g.notices.len();
        g.notices.retain(|n| !n.description.contains(what));
        if g.notices.len() != before {
            g.generation += 1;
        }
    }

    /// Removes the notices of `project_name` in `category` (the official client clears a
    /// project's scheduler notices when a work request brings none).
    pub fn remove_notices(&self, project_name: &str, category: &str) {
        let mut g = self.lock();
        let before = g.notices.len();
        g.notices
            .retain(|n| !(n.project_name == project_name && n.category == category));
        if g.notices.len() != before {
            g.generation += 1;
        }
    }

    /// Highest message sequence number (0 when empty).
    pub fn last_seqno(&self) -> u64 {
        self.lock().next_seqno
    }

    /// The `get_messages` reply: `<msgs>` with the messages whose sequence number is above
    /// `after`, oldest first (the same text [`msgs_xml`] writes for them).
    pub fn msgs_after(&self, after: i64, translatable: bool) -> Body {
        let g = self.lock();
        // Sequence numbers are consecutive: the first one wanted is found by arithmetic.
        let first = g.messages.front().map_or(0, |e| e.seqno);
        let skip = u64::try_from(after.saturating_add(1))
            .unwrap_or(0)
            .saturating_sub(first);
        let skip = usize::try_from(skip).unwrap_or(usize::MAX);
        let mut body = Body::with_capacity(g.messages.len().saturating_sub(skip) + 2);
        body.push(Bytes::from_static(MSGS_OPEN.as_bytes()));
        for e in g.messages.iter().skip(skip) {
            body.push(e.xml(translatable).clone());
        }
        body.push(Bytes::from_static(MSGS_CLOSE.as_bytes()));
        body
    }

    /// Whether connection `conn` has read notices before (and is therefore remembered until
    /// [`forget_connection`](Self::forget_connection)).
    pub fn knows_connection(&self, conn: u64) -> bool {
        self.lock().seen.contains_key(&conn)
    }

    /// Notices for connection `conn` above `after` (`public`: private ones left out). The
    /// flag says the GUI must clear its list first (then every notice is returned).
    pub fn notices_for(&self, conn: u64, after: i64, public: bool) -> (bool, Vec<Notice>) {
        let mut g = self.lock();
        let generation = g.generation;
        let refresh = g
            .seen
            .insert(conn, generation)
            .is_some_and(|s| s < generation);
        let after = if refresh { 0 } else { after };
        let list = g
            .notices
            .iter()
            .filter(|n| i64::try_from(n.seqno).unwrap_or(i64::MAX) > after)
            .filter(|n| !(public && n.is_private))
            .cloned()
            .collect();
        (refresh, list)
    }

    /// Forgets a closed connection.
    pub fn forget_connection(&self, conn: u64) {
        self.lock().seen.remove(&conn);
    }
}

const MSGS_OPEN: &str = "<msgs>\n";
const MSGS_CLOSE: &str = "</msgs>\n";

/// Whether a body holds translation markers (`_("…")`), which `get_messages` drops unless
/// the GUI asks for translatable text.
fn has_markers(body: &str) -> bool {
    body.contains("_(\"") || body.contains("\")")
}

/// Appends one `<msg>` of `get_messages`.
fn write_msg(s: &mut String, m: &Message, translatable: bool) {
    s.push_str("<msg>\n <project>");
    s.push_str(&ferrite_gui_rpc::escape(&m.project));
    let _ = write!(
        s,
        "</project>\n <pri>{}</pri>\n <seqno>{}</seqno>\n <body><![CDATA[\n",
        m.priority, m.seqno
    );
    let body = if translatable || !has_markers(&m.body) {
        std::borrow::Cow::Borrowed(m.body.as_str())
    } else {
        std::borrow::Cow::Owned(m.body.replace("_(\"", "").replace("\")", ""))
    };
    if body.contains("]]>") {
        s.push_str(&cdata(&body));
    } else {
        s.push_str(&body);
    }
    let _ = write!(s, "\n]]></body>\n <time>{}</time>\n</msg>\n", m.time);
}

/// Writes `<msgs>` for `get_messages` from messages given one by one (the log keeps its
/// lines in this form already: [`MessageLog::msgs_after`]).
pub fn msgs_xml(messages: &[Message], translatable: bool) -> String {
    let size: usize = messages
        .iter()
        .map(|m| m.body.len() + m.project.len() + 110)
        .sum();
    let mut s = String::with_capacity(16 + size);
    s.push_str(MSGS_OPEN);
    for m in messages {
        write_msg(&mut s, m, translatable);
    }
    s.push_str(MSGS_CLOSE);
    s
}

/// Writes `<notices>` for `get_notices` / `get_notices_public`.
pub fn notices_xml(refresh: bool, notices: &[Notice]) -> String {
    let mut s = String::with_capacity(64 + notices.len() * 300);
    s.push_str("<notices>\n");
    if refresh {
        s.push_str(
            "<notice>\n   <title></title>\n   <description><![CDATA[\n\n]]></description>\n   \
             <create_time>0.000000</create_time>\n   <arrival_time>0.000000</arrival_time>\n   \
             <is_private>0</is_private>\n   <project_name></project_name>\n   \
             <category></category>\n   <link><![CDATA[]]></link>\n   <seqno>-1</seqno>\n</notice>\n",
        );
    }
    for n in notices {
        let _ = write!(
            s,
            "<notice>\n   <title>{}</title>\n   <description><![CDATA[\n{}\n]]></description>\n   \
             <create_time>{:.6}</create_time>\n   <arrival_time>{:.6}</arrival_time>\n   \
             <is_private>{}</is_private>\n   <project_name>{}</project_name>\n   \
             <category>{}</category>\n   <link><![CDATA[{}]]></link>\n   <seqno>{}</seqno>\n</notice>\n",
            ferrite_gui_rpc::escape(&n.title),
            cdata(&n.description),
            n.create_time,
            n.arrival_time,
            u8::from(n.is_private),
            ferrite_gui_rpc::escape(&n.project_name),
            ferrite_gui_rpc::escape(&n.category),
            cdata(&n.link),
            n.seqno
        );
    }
    s.push_str("</notices>\n");
    s
}

fn cdata(text: &str) -> String {
    text.replace("]]>", "]]]]><![CDATA[>")
}

/// Copies log events into [`MessageLog::global`].
#[derive(Debug, Default, Clone, Copy)]
pub struct MessageLayer;

impl<S: Subscriber> Layer<S> for MessageLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut v = Fields::default();
        event.record(&mut v);
        let notice = event.metadata().target() == NOTICE_TARGET;
        let priority = match *event.metadata().level() {
            Level::ERROR => PRI_INTERNAL_ERROR,
            _ if notice => PRI_USER_ALERT,
            _ => PRI_INFO,
        };
        let mut body = v.message;
        if !v.rest.is_empty() {
            if !body.is_empty() {
                body.push(' ');
            }
            body.push_str(&v.rest);
        }
        if priority == PRI_INTERNAL_ERROR {
            body.insert_str(0, "[error] ");
        }
        let t = crate::clock::now();
        let log = MessageLog::global();
        v.project = log.project_name(&v.project);
        if notice && v.category == "scheduler" {
            log.push(
                &v.project,
                priority,
                t,
                &format!("Message from server: {body}"),
            );
            let mut n = Notice::client(&v.project, &body, t);
            n.category = v.category;
            log.add_notice(n);
        } else {
            log.push(&v.project, priority, t, &body);
            if notice {
                log.add_notice(Notice::client(&v.project, &body, t));
            }
        }
    }
}

/// Names whose values are secrets wherever they appear as `name=value` (URL queries, log
/// fields) or `<name>value</name>` (XML).
const SECRET_NAMES: [&str; 6] = [
    "passwd_hash",
    "authenticator",
    "account_key",
    "gui_rpc_password",
    "password",
    "opaque_auth",
];

/// The text with every secret value replaced by `[hidden]`: the values of [`SECRET_NAMES`]
/// after `name=` (up to `&`, whitespace or a quote) and inside `<name>…</name>`.
pub fn redact(text: &str) -> String {
    if !SECRET_NAMES.iter().any(|n| text.contains(n)) {
        return text.to_owned();
    }
    let mut out = text.to_owned();
    for name in SECRET_NAMES {
        let key = format!("{name}=");
        let mut from = 0;
        while let Some(i) = out[from..].find(&key) {
            let start = from + i + key.len();
            let end = out[start..]
                .find(|c: char| c == '&' || c == '"' || c == '\'' || c.is_whitespace() || c == '<')
                .map_or(out.len(), |e| start + e);
            if end > start {
                out.replace_range(start..end, "[hidden]");
            }
            from = start + "[hidden]".len().min(out.len() - start);
        }
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let mut from = 0;
        while let Some(i) = out[from..].find(&open) {
            let start = from + i + open.len();
            let Some(e) = out[start..].find(&close) else {
                break;
            };
            out.replace_range(start..start + e, "[hidden]");
            from = start + "[hidden]".len() + close.len();
        }
    }
    out
}

/// The fields of one event: the message, the `project` and `category` fields, and the others
/// as `k=v`.
#[derive(Default)]
struct Fields {
    message: String,
    project: String,
    category: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            "project" => self.project = value.to_owned(),
            "category" => self.category = value.to_owned(),
            name => {
                if !self.rest.is_empty() {
                    self.rest.push(' ');
                }
                let _ = write!(self.rest, "{name}={value}");
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            "project" => self.project = format!("{value:?}"),
            "category" => self.category = format!("{value:?}"),
            name => {
                if !self.rest.is_empty() {
                    self.rest.push(' ');
                }
                let _ = write!(self.rest, "{name}={value:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_numbered_bounded_and_filtered_by_seqno() {
        let log = MessageLog::default();
        for i in 0..(MAX_MESSAGES + 5) {
            log.push("", PRI_INFO, 1e9, &format!("line {i}"));
        }
        assert_eq!(log.last_seqno(), (MAX_MESSAGES + 5) as u64);
        let all = log.msgs_after(0, false).to_text();
        assert_eq!(all.matches("<msg>").count(), MAX_MESSAGES);
        assert!(all.starts_with("<msgs>\n<msg>\n <project></project>\n <pri>1</pri>\n <seqno>6</seqno>\n <body><![CDATA[\nline 5\n"), "{}", &all[..200]);
        let tail = log.msgs_after((MAX_MESSAGES + 3) as i64, false).to_text();
        let bodies: Vec<&str> = tail
            .split("<![CDATA[\n")
            .skip(1)
            .filter_map(|b| b.split('\n').next())
            .collect();
        assert_eq!(
            bodies,
            [
                format!("line {}", MAX_MESSAGES + 3),
                format!("line {}", MAX_MESSAGES + 4)
            ]
        );
        assert_eq!(
            log.msgs_after(i64::MAX, false).to_text(),
            "<msgs>\n</msgs>\n"
        );
        assert_eq!(log.msgs_after(-5, false).to_text(), all);
        assert_eq!(
            MessageLog::default().msgs_after(0, true).to_text(),
            "<msgs>\n</msgs>\n"
        );
    }

    #[test]
    fn the_log_replies_as_the_message_writer_does() {
        let log = MessageLog::default();
        let mut kept = Vec::new();
        for i in 0..50 {
            let (project, body) = match i % 5 {
                0 => ("", format!("Starting task wu_{i}_0")),
                1 => (
                    "Project <1> & co",
                    format!("Scheduler request completed: got {i} new tasks"),
                ),
                2 => (
                    "P",
                    format!("_(\"Suspending computation\") - user request {i}"),
                ),
                3 => ("P", format!("odd ]]> body {i}")),
                _ => ("", String::new()),
            };
            let (pri, t) = (1 + i % 3, 1.7e9 + f64::from(i) * 1.5);
            log.push(project, pri, t, &body);
            kept.push(Message {
                seqno: u64::from(i as u32 + 1),
                project: project.to_owned(),
                priority: pri,
                time: t as i64,
                body,
            });
        }
        for translatable in [false, true] {
            for after in [0, 1, 17, 49, 50, 51] {
                let want: Vec<Message> = kept
                    .iter()
                    .filter(|m| m.seqno as i64 > after)
                    .cloned()
                    .collect();
                assert_eq!(
                    log.msgs_after(after, translatable).to_text(),
                    msgs_xml(&want, translatable),
                    "after {after}, translatable {translatable}"
                );
            }
        }
    }

    #[test]
    fn notices_are_numbered_and_dropping_notices_asks_for_a_refresh() {
        let log = MessageLog::default();
        log.push("P", PRI_USER_ALERT, 1e9, "a line is not a notice");
        assert!(log.notices_for(7, 0, true).1.is_empty());
        assert!(log.add_notice(Notice::client("P", "alert", 1e9)));
        let (refresh, n) = log.notices_for(7, 0, true);
        assert!(!refresh);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].description, "alert");
        assert_eq!(n[0].seqno, 1);
        assert!(log.notices_for(7, 1, false).1.is_empty());
        for i in 0..MAX_NOTICES {
            log.add_notice(Notice::client("", &format!("more {i}"), 1e9));
        }
        let (refresh, n) = log.notices_for(7, 1, false);
        assert!(
            refresh,
            "connection 7 saw the list before notices were dropped"
        );
        assert_eq!(n.len(), MAX_NOTICES);
        let xml = notices_xml(refresh, &n);
        assert!(
            xml.starts_with("<notices>\n<notice>\n   <title></title>"),
            "{xml}"
        );
        assert!(xml.contains("<seqno>-1</seqno>"));
        // A connection that never read notices gets no refresh marker.
        assert!(!log.knows_connection(8));
        assert!(!log.notices_for(8, 0, false).0);
        assert!(log.knows_connection(8));
        log.forget_connection(8);
        assert!(!log.knows_connection(8));
    }

    #[test]
    fn repeated_notices_are_kept_once_and_scheduler_ones_come_back_after_a_week() {
        let log = MessageLog::default();
        let sched = |t: f64| Notice {
            description: "Server is down".into(),
            create_time: t,
            arrival_time: t,
            project_name: "P".into(),
            category: "scheduler".into(),
            ..Notice::default()
        };
        let t0 = 1.79e9;
        assert!(log.add_notice(sched(t0)));
        assert!(
            !log.add_notice(sched(t0 + 3600.0)),
            "same text within a week"
        );
        let news = Notice {
            title: "News".into(),
            description: "text".into(),
            create_time: t0 - 100.0,
            arrival_time: t0,
            project_name: "P".into(),
            ..Notice::default()
        };
        assert!(log.add_notice(news.clone()));
        assert!(
            !log.add_notice(news.clone()),
            "a re-fetched item is not added again"
        );
        assert_eq!(log.notices_for(1, 0, false).1.len(), 2);
        assert!(log.add_notice(sched(t0 + SCHEDULER_NOTICE_REPEAT + 1.0)));
        let n = log.notices_for(1, 0, false).1;
        assert_eq!(n.len(), 2, "the new scheduler notice replaced the old one");
        assert_eq!(n[1].seqno, 3);
        log.remove_notices("P", "scheduler");
        log.remove_notices_mentioning("cc_config.xml");
        let (refresh, n) = log.notices_for(1, 3, false);
        assert!(refresh);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].title, "News");
        // Thirty days later the old notices are gone.
        assert!(log.add_notice(Notice::client("", "later", t0 + NOTICE_MAX_AGE + 10.0)));
        let n = log.notices_for(1, 0, false).1;
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].description, "later");
    }

    #[test]
    fn secrets_are_redacted() {
        let url = "web RPC http://p.org/lookup_account.php?email_addr=a%40b&passwd_hash=0123abcd&x=1: cannot connect";
        let r = redact(url);
        assert!(!r.contains("0123abcd"), "{r}");
        assert!(r.contains("passwd_hash=[hidden]&x=1"), "{r}");
        let xml =
            "<account_out><authenticator>k3y</authenticator></account_out> authenticator=k3y2 end";
        let r = redact(xml);
        assert_eq!(
            r,
            "<account_out><authenticator>[hidden]</authenticator></account_out> authenticator=[hidden] end"
        );
        assert_eq!(
            redact("GUI RPC password is empty"),
            "GUI RPC password is empty"
        );
        let log = MessageLog::default();
        log.push("", PRI_INFO, 1e9, url);
        assert!(!log.msgs_after(0, false).to_text().contains("0123abcd"));
        log.add_notice(Notice::client("", url, 1e9));
        assert!(!log.notices_for(1, 0, false).1[0]
            .description
            .contains("0123abcd"));
    }

    #[test]
    fn msgs_xml_has_the_official_layout() {
        let m = Message {
            seqno: 1,
            project: String::new(),
            priority: 1,
            time: 1795332972,
            body: "Starting BOINC client version 7.20.5 for x86_64-pc-linux-gnu".into(),
        };
        assert_eq!(
            msgs_xml(&[m], false),
            "<msgs>\n<msg>\n <project></project>\n <pri>1</pri>\n <seqno>1</seqno>\n \
             <body><![CDATA[\nStarting BOINC client version 7.20.5 for x86_64-pc-linux-gnu\n]]></body>\n \
             <time>1795332972</time>\n</msg>\n</msgs>\n"
        );
    }

    #[test]
    fn msgs_xml_drops_translation_markers_unless_asked_and_splits_cdata_ends() {
        let m = Message {
            seqno: 2,
            project: "A & B".into(),
            priority: 2,
            time: 7,
            body: "_(\"Suspended\") on ]]> purpose".into(),
        };
        let plain = msgs_xml(std::slice::from_ref(&m), false);
        assert!(plain.contains("<project>A &amp; B</project>"), "{plain}");
        assert!(
            plain.contains("<![CDATA[\nSuspended on ]]]]><![CDATA[> purpose\n]]>"),
            "{plain}"
        );
        let marked = msgs_xml(&[m], true);
        assert!(
            marked.contains("<![CDATA[\n_(\"Suspended\") on ]]]]><![CDATA[> purpose\n]]>"),
            "{marked}"
        );
    }

    #[test]
    fn a_line_about_a_project_by_its_url_shows_the_project_name() {
        let log = MessageLog::default();
        let url = "http://einstein.example/";
        log.set_project_names([(url, "Einstein@Home"), ("http://new.example/", "")]);
        log.push(url, PRI_INFO, 1e9, "Finished upload of a_0");
        log.push(
            "http://new.example/",
            PRI_INFO,
            1e9,
            "fetching the master page",
        );
        log.push("Einstein@Home", PRI_INFO, 1e9, "Sending scheduler request");
        log.push("", PRI_INFO, 1e9, "general line");
        let all = log.msgs_after(0, false).to_text();
        let projects: Vec<&str> = all
            .split("<project>")
            .skip(1)
            .filter_map(|x| x.split("</project>").next())
            .collect();
        assert_eq!(
            projects,
            ["Einstein@Home", "http://new.example/", "Einstein@Home", ""]
        );
        assert_eq!(log.project_name(url), "Einstein@Home");
        assert_eq!(
            log.project_name("http://other.example/"),
            "http://other.example/"
        );
        // A renamed project: the names are replaced as a whole.
        log.set_project_names([(url, "E@H")]);
        assert_eq!(log.project_name(url), "E@H");
        log.set_project_names([]);
        assert_eq!(log.project_name(url), url);
    }
}
