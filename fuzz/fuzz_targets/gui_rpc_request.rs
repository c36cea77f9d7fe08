//! Bytes from a GUI RPC connection: split into requests at 0x03 (in chunks as reads would
//! deliver them), each handed to the connection's protocol state machine as the server
//! does, and parsed into a typed request. A typed request written as a document (what
//! Ferrite's own client sends) must parse again into the same request.
//!
//! Input: byte 0 picks the read size, the password and whether the peer is local; the
//! rest is the stream.
#![no_main]

use ferrite_gui_rpc::auth::Password;
use ferrite_gui_rpc::framing::FrameBuffer;
use ferrite_gui_rpc::request::parse_request;
use ferrite_gui_rpc::session::{Action, Session};
use ferrite_gui_rpc::{Request, ServerVersion};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(sel & 0x0f) + 1;
    let password = if sel & 0x10 != 0 {
        Password::Required("secret".to_owned())
    } else {
        Password::Disabled
    };
    let limit = if sel & 0x40 != 0 { 64 } else { 100_000 };
    let mut session = Session::new(password, sel & 0x20 != 0, ServerVersion::default());
    let mut frames = FrameBuffer::new(limit);
    'read: for piece in stream.chunks(chunk) {
        frames.push(piece);
        loop {
            match frames.next_request() {
                Ok(Some(request)) => {
                    let text = String::from_utf8_lossy(&request);
                    let action = session.handle(&text, || "1234.5678".to_owned());
                    if let Action::Reply { close: true, .. } = action {
                        break 'read;
                    }
                    if let Ok(req) = parse_request(&text) {
                        let doc = req.to_document();
                        let once = match parse_request(&doc) {
                            Ok(r) => r,
                            Err(e) => panic!("a written request does not parse again: {e}\n{doc}"),
                        };
                        assert_eq!(req.op_name(), once.op_name(), "{doc}");
                        let doc2 = once.to_document();
                        // Whole documents (cc_config, prefs override, proxy, app_config)
                        // pass through verbatim and unchecked: one that is not well-formed
                        // (an unterminated CDATA section, an unclosed tag) swallows the
                        // closing tags around it, as the forgiving reader means to.
                        let raw_document = matches!(
                            once,
                            Request::SetCcConfig { .. }
                                | Request::SetGlobalPrefsOverride { .. }
                                | Request::SetProxySettings { .. }
                                | Request::SetAppConfig { .. }
                        );
                        match parse_request(&doc2) {
                            Ok(_) if raw_document => {}
                            Ok(twice) => assert_eq!(
                                once, twice,
                                "request changes on a second round trip\n{doc2}"
                            ),
                            Err(e) => {
                                panic!("a rewritten request does not parse again: {e}\n{doc2}")
                            }
                        }
                    }
                }
                Ok(None) => break,
                Err(_) => break 'read,
            }
        }
    }
});
