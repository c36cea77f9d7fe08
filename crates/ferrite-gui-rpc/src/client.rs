//! A GUI RPC client, for the `ferrite` CLI and for tests: connect over TCP or a Unix socket,
//! authenticate, send requests and read replies.

use std::io;
use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, ToSocketAddrs, UnixStream};

use crate::auth;
use crate::framing::{FrameBuffer, TERMINATOR};
use crate::reply;
use crate::request::Request;
use crate::xml;

/// The official client's receive timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Replies can be large (`get_state` with many tasks); refuse absurd ones.
const MAX_REPLY_BYTES: usize = 256 * 1024 * 1024;

/// Errors talking to a GUI RPC server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be made.
    #[error("cannot connect to the GUI RPC server")]
    Connect(#[source] io::Error),
    /// Reading or writing failed.
    #[error("GUI RPC connection failed")]
    Io(#[source] io::Error),
    /// No complete reply within the timeout.
    #[error("no reply from the GUI RPC server within {0:?}")]
    Timeout(Duration),
    /// The server closed the connection before replying.
    #[error("the GUI RPC server closed the connection")]
    Closed,
    /// The reply is not a `<boinc_gui_rpc_reply>` document.
    #[error("malformed GUI RPC reply")]
    Malformed,
    /// Authentication was refused, or the op needs it (`<unauthorized/>`).
    #[error("authentication error")]
    Unauthorized,
    /// The server answered `<error>text</error>`.
    #[error("GUI RPC error: {0}")]
    Server(String),
    /// The server answered `<status>N</status>` with N ≠ 0.
    #[error("GUI RPC failed with status {0}")]
    Status(i32),
}

#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// A connection to a GUI RPC server.
#[derive(Debug)]
pub struct GuiRpcClient {
    /// The transport.
    stream: Stream,
    /// Received bytes not yet part of a complete reply.
    frames: FrameBuffer,
    /// Per-reply timeout.
    timeout: Duration,
    /// The size of the last reply: room for one as long is made before reading the next, so
    /// a reply of megabytes is read in place in a few large reads.
    last_reply: usize,
}

/// The least room made for each read.
const READ_ROOM: usize = 64 * 1024;

impl GuiRpcClient {
    /// Connects over TCP (e.g. `("127.0.0.1", 31416)`).
    pub async fn connect_tcp(addr: impl ToSocketAddrs) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(ClientError::Connect)?;
        let _ = stream.set_nodelay(true);
        Ok(Self::new(Stream::Tcp(stream)))
    }

    /// Connects to a Unix socket.
    pub async fn connect_unix(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(ClientError::Connect)?;
        Ok(Self::new(Stream::Unix(stream)))
    }

    fn new(stream: Stream) -> Self {
        Self {
            stream,
            frames: FrameBuffer::new(MAX_REPLY_BYTES),
            timeout: DEFAULT_TIMEOUT,
            last_reply: 0,
        }
    }

    /// Changes the per-reply timeout.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// `auth1` then `auth2` with `md5(nonce + password)`.
    pub async fn authorize(&mut self, password: &str) -> Result<(), ClientError> {
        let body = self.call_raw(AUTH1_OP).await?;
        let nonce = auth1_nonce(&body).ok_or(ClientError::Malformed)?;
        let body = self.call_raw(&auth2_op(nonce, password)).await?;
        check_authorized(&body)
    }

    /// Sends a typed request and returns the reply body (between the reply tags).
    pub async fn call(&mut self, request: &Request) -> Result<String, ClientError> {
        self.call_raw(&request.to_xml()).await
    }

    /// Sends a request that answers with data; a refusal (`<unauthorized/>`, an `<error>`
    /// answer) is the error ([`check_data`]).
    pub async fn call_data(&mut self, request: &Request) -> Result<String, ClientError> {
        let body = self.call(request).await?;
        check_data(body)
    }

    /// Sends a request that should answer `<success/>`, mapping the other answers to errors.
    pub async fn call_expect_success(&mut self, request: &Request) -> Result<(), ClientError> {
        let body = self.call(request).await?;
        check_success(&body)
    }

    /// Sends `op_xml` (the op element) wrapped in `<boinc_gui_rpc_request>` and returns the
    /// reply body.
    pub async fn call_raw(&mut self, op_xml: &str) -> Result<String, ClientError> {
        let mut message = Vec::with_capacity(op_xml.len() + 64);
        message.extend_from_slice(b"<boinc_gui_rpc_request>\n");
        message.extend_from_slice(op_xml.as_bytes());
        message.extend_from_slice(b"</boinc_gui_rpc_request>\n");
        message.push(TERMINATOR);
        let mut reply = self.exchange(&message).await?;
        // Cut the envelope off in place (a reply can be megabytes).
        let body = reply::unframe(&reply).ok_or(ClientError::Malformed)?;
        let start = body.as_ptr() as usize - reply.as_ptr() as usize;
        let end = start + body.len();
        reply.truncate(end);
        reply.drain(..start);
        Ok(reply)
    }

    /// Sends raw bytes (terminator included) and returns the next whole reply, without its
    /// terminator.
    pub async fn exchange(&mut self, bytes: &[u8]) -> Result<String, ClientError> {
        let reply = self.exchange_bytes(bytes).await?;
        Ok(String::from_utf8(reply)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    /// Sends raw bytes (terminator included) and returns the next whole reply as it came,
    /// without its terminator (no check that it is text).
    pub async fn exchange_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, ClientError> {
        match &mut self.stream {
            Stream::Tcp(s) => s.write_all(bytes).await,
            Stream::Unix(s) => s.write_all(bytes).await,
        }
        .map_err(ClientError::Io)?;
        tokio::time::timeout(self.timeout, self.read_reply())
            .await
            .map_err(|_| ClientError::Timeout(self.timeout))?
    }

    async fn read_reply(&mut self) -> Result<Vec<u8>, ClientError> {
        loop {
            match self.frames.next_request() {
                Ok(Some(reply)) => {
                    self.last_reply = reply.len();
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(_) => return Err(ClientError::Malformed),
            }
            let room = READ_ROOM.max(self.last_reply.saturating_sub(self.frames.len()) + 1);
            let n = match &mut self.stream {
                Stream::Tcp(s) => self.frames.read_from(s, room).await,
                Stream::Unix(s) => self.frames.read_from(s, room).await,
            }
            .map_err(ClientError::Io)?;
            if n == 0 {
                return Err(ClientError::Closed);
            }
        }
    }
}

/// The first request of the authentication exchange.
pub const AUTH1_OP: &str = "<auth1/>\n";

/// The nonce of an `auth1` reply (the body, or the whole reply).
pub fn auth1_nonce(reply: &str) -> Option<&str> {
    between(reply, "<nonce>", "</nonce>").map(str::trim)
}

/// The `auth2` request answering `nonce` with `password` (`md5(nonce + password)`).
pub fn auth2_op(nonce: &str, password: &str) -> String {
    let hash = auth::nonce_hash(nonce, password);
    format!("<auth2>\n<nonce_hash>{hash}</nonce_hash>\n</auth2>\n")
}

/// Interprets an `auth2` reply: `<authorized/>` is `Ok`.
pub fn check_authorized(reply: &str) -> Result<(), ClientError> {
    if reply.contains("<authorized/>") {
        Ok(())
    } else {
        Err(ClientError::Unauthorized)
    }
}

/// The text of a reply body that is an `<error>` answer (unescaped, trimmed); `None` for
/// any other body, including data that holds an `<error>` element further in.
pub fn error_text(body: &str) -> Option<String> {
    let rest = body.trim_start().strip_prefix("<error>")?;
    let text = &rest[..rest.find("</error>")?];
    Some(xml::unescape(text.trim()).into_owned())
}

/// Interprets a reply body that answers with data: `<unauthorized/>` and an `<error>`
/// answer are refusals (as [`check_success`] reads them); anything else is the data.
pub fn check_data(body: String) -> Result<String, ClientError> {
    if body.contains("<unauthorized/>") {
        return Err(ClientError::Unauthorized);
    }
    if body.trim_start().starts_with("<error>") {
        check_success(&body)?;
    }
    Ok(body)
}

/// Interprets a generic result body: `<success/>` (or `<status>0</status>`) is `Ok`.
pub fn check_success(body: &str) -> Result<(), ClientError> {
    if body.contains("<success/>") {
        return Ok(());
    }
    if body.contains("<unauthorized/>") {
        return Err(ClientError::Unauthorized);
    }
    if let Some(text) = between(body, "<error>", "</error>") {
        let text = xml::unescape(text.trim()).into_owned();
        if text.contains("unauthorized") || text.contains("Missing authenticator") {
            return Err(ClientError::Unauthorized);
        }
        return Err(ClientError::Server(text));
    }
    if let Some(code) = between(body, "<status>", "</status>") {
        return match code.trim().parse::<i32>() {
            Ok(0) => Ok(()),
            Ok(n) => Err(ClientError::Status(n)),
            Err(_) => Err(ClientError::Malformed),
        };
    }
    Err(ClientError::Malformed)
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_results() {
        assert!(check_success("<success/>\n").is_ok());
        assert!(check_success("<status>0</status>\n").is_ok());
        assert!(matches!(
            check_success("<status>-108</status>\n"),
            Err(ClientError::Status(-108))
        ));
        assert!(matches!(
            check_success("<unauthorized/>\n"),
            Err(ClientError::Unauthorized)
        ));
        assert!(matches!(
            check_success("<error>No such file</error>\n"),
            Err(ClientError::Server(t)) if t == "No such file"
        ));
        assert!(matches!(check_success(""), Err(ClientError::Malformed)));
    }

    #[test]
    fn data_replies_and_their_refusals() {
        let data = "<cc_status>\n<error>inside</error>\n</cc_status>\n".to_owned();
        assert_eq!(check_data(data.clone()).ok(), Some(data.clone()));
        assert_eq!(
            error_text(&data),
            None,
            "an <error> inside data is not a refusal"
        );
        assert!(matches!(
            check_data("<unauthorized/>\n".into()),
            Err(ClientError::Unauthorized)
        ));
        assert!(matches!(
            check_data("\n<error>no such project</error>\n".into()),
            Err(ClientError::Server(t)) if t == "no such project"
        ));
        assert!(matches!(
            check_data("<error>Missing authenticator</error>\n".into()),
            Err(ClientError::Unauthorized)
        ));
        assert_eq!(
            error_text("<error> a &lt; b </error>\n").as_deref(),
            Some("a < b")
        );
        assert_eq!(error_text("<error>cut"), None);
    }

    #[test]
    fn the_authentication_exchange() {
        let reply = "<boinc_gui_rpc_reply>\n<nonce>1.5</nonce>\n</boinc_gui_rpc_reply>\n";
        assert_eq!(auth1_nonce(reply), Some("1.5"));
        assert_eq!(auth1_nonce("<unauthorized/>"), None);
        assert_eq!(
            auth2_op("1.5", "pw"),
            format!(
                "<auth2>\n<nonce_hash>{}</nonce_hash>\n</auth2>\n",
                auth::nonce_hash("1.5", "pw")
            )
        );
        assert!(check_authorized("<authorized/>\n").is_ok());
        assert!(matches!(
            check_authorized("<unauthorized/>\n"),
            Err(ClientError::Unauthorized)
        ));
    }
}
