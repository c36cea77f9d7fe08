//! The event log GUIs read with `get_messages` and the client notices of `get_notices`.
//!
//! A `tracing` layer ([`MessageLayer`]) copies every log line that passes the daemon's filter
//! into a bounded buffer, like the official client's message list: sequence numbers from 1,
//! the newest [`MAX_MESSAGES`] kept. Warnings and errors are user alerts and also become client
//! notices (the official client turns `MSG_USER_ALERT` messages into notices).
//!
//! The buffer is process-wide because logging starts before the daemon exists.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Messages kept (`MAX_SAVED_MESSAGES` in the official client).
pub const MAX_MESSAGES: usize = 2000;
/// Notices kept; older ones are dropped and every GUI told to refresh its list.
pub const MAX_NOTICES: usize = 200;

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

/// One client notice.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// 1, 2, 3, … in order of arrival.
    pub seqno: u64,
    /// The text.
    pub description: String,
    /// Unix time.
    pub create_time: f64,
    /// Project the notice is about; empty for general ones.
    pub project_name: String,
    /// `client` for the daemon's own notices.
    pub category: &'static str,
    /// Left out of `get_notices_public`.
    pub is_private: bool,
}

#[derive(Debug, Default)]
struct Inner {
    messages: VecDeque<Message>,
    next_seqno: u64,
    notices: VecDeque<Notice>,
    next_notice: u64,
    /// Bumped whenever notices are dropped: a connection that last read an older generation
    /// must be told to clear its list (the official refresh rule).
    generation: u64,
    /// Generation each connection last read, by connection id.
    seen: HashMap<u64, u64>,
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

    /// Adds a line; user alerts and errors also become notices.
    pub fn push(&self, project: &str, priority: i32, time: f64, body: &str) {
        let mut g = self.lock();
        g.next_seqno += 1;
        let seqno = g.next_seqno;
        g.messages.push_back(Message {
            seqno,
            project: project.to_owned(),
            priority,
            time: time as i64,
            body: body.to_owned(),
        });
        while g.messages.len() > MAX_MESSAGES {
            g.messages.pop_front();
        }
        if priority >= PRI_USER_ALERT {
            g.next_notice += 1;
            let seqno = g.next_notice;
            g.notices.push_back(Notice {
                seqno,
                description: body.to_owned(),
                create_time: time,
                project_name: project.to_owned(),
                category: "client",
                is_private: false,
            });
            if g.notices.len() > MAX_NOTICES {
                g.notices.pop_front();
                g.generation += 1;
            }
        }
    }

    /// Highest message sequence number (0 when empty).
    pub fn last_seqno(&self) -> u64 {
        self.lock().next_seqno
    }

    /// Messages with a sequence number above `after`, oldest first.
    pub fn messages_after(&self, after: i64) -> Vec<Message> {
        self.lock()
            .messages
            .iter()
            .filter(|m| i64::try_from(m.seqno).unwrap_or(i64::MAX) > after)
            .cloned()
            .collect()
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

/// Writes `<msgs>` for `get_messages`.
pub fn msgs_xml(messages: &[Message], translatable: bool) -> String {
    let mut s = String::with_capacity(64 + messages.len() * 160);
    s.push_str("<msgs>\n");
    for m in messages {
        let body = if translatable {
            m.body.clone()
        } else {
            m.body.replace("_(\"", "").replace("\")", "")
        };
        let _ = write!(
            s,
            "<msg>\n <project>{}</project>\n <pri>{}</pri>\n <seqno>{}</seqno>\n \
             <body><![CDATA[\n{}\n]]></body>\n <time>{}</time>\n</msg>\n",
            ferrite_gui_rpc::escape(&m.project),
            m.priority,
            m.seqno,
            cdata(&body),
            m.time
        );
    }
    s.push_str("</msgs>\n");
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
            "<notice>\n   <title></title>\n   <description><![CDATA[\n{}\n]]></description>\n   \
             <create_time>{:.6}</create_time>\n   <arrival_time>{:.6}</arrival_time>\n   \
             <is_private>{}</is_private>\n   <project_name>{}</project_name>\n   \
             <category>{}</category>\n   <link><![CDATA[]]></link>\n   <seqno>{}</seqno>\n</notice>\n",
            cdata(&n.description),
            n.create_time,
            n.create_time,
            u8::from(n.is_private),
            ferrite_gui_rpc::escape(&n.project_name),
            n.category,
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
        let priority = match *event.metadata().level() {
            Level::ERROR => PRI_INTERNAL_ERROR,
            Level::WARN => PRI_USER_ALERT,
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
        MessageLog::global().push(&v.project, priority, crate::now(), &body);
    }
}

/// The fields of one event: the message, a `project` field, and the others as `k=v`.
#[derive(Default)]
struct Fields {
    message: String,
    project: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            "project" => self.project = value.to_owned(),
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
        let all = log.messages_after(0);
        assert_eq!(all.len(), MAX_MESSAGES);
        assert_eq!(all[0].seqno, 6);
        let tail = log.messages_after((MAX_MESSAGES + 3) as i64);
        assert_eq!(
            tail.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
            [
                format!("line {}", MAX_MESSAGES + 3),
                format!("line {}", MAX_MESSAGES + 4)
            ]
        );
    }

    #[test]
    fn alerts_become_notices_and_dropping_notices_asks_for_a_refresh() {
        let log = MessageLog::default();
        log.push("P", PRI_INFO, 1e9, "info only");
        log.push("P", PRI_USER_ALERT, 1e9, "alert");
        let (refresh, n) = log.notices_for(7, 0, true);
        assert!(!refresh);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].description, "alert");
        assert_eq!(n[0].seqno, 1);
        assert!(log.notices_for(7, 1, false).1.is_empty());
        for _ in 0..MAX_NOTICES {
            log.push("", PRI_USER_ALERT, 1e9, "more");
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
}
