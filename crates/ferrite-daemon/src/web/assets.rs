//! The dashboard's static files, built into the binary: plain HTML, CSS and JavaScript with
//! no library and nothing fetched from elsewhere (the Content-Security-Policy says so too).

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::guard::Access;
use super::{gate, App};

/// The page.
pub const INDEX_HTML: &str = include_str!("dashboard/index.html");
/// The script.
pub const APP_JS: &str = include_str!("dashboard/app.js");
/// The style sheet.
pub const STYLE_CSS: &str = include_str!("dashboard/style.css");

/// Every file under `/assets/`: name, media type, content.
pub const FILES: [(&str, &str, &str); 2] = [
    ("app.js", "text/javascript; charset=utf-8", APP_JS),
    ("style.css", "text/css; charset=utf-8", STYLE_CSS),
];

/// Only this server's own files and API; no inline script, no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

pub(super) async fn index(State(app): State<App>, headers: HeaderMap) -> Response {
    serve(&app, &headers, "text/html; charset=utf-8", INDEX_HTML)
}

pub(super) async fn file(
    State(app): State<App>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, mime, body)) => serve(&app, &headers, mime, body),
        None => (StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}

fn serve(app: &App, headers: &HeaderMap, mime: &'static str, body: &'static str) -> Response {
    if let Some(r) = gate(app, Access::Static, None, headers) {
        return r;
    }
    let mut r = ([(header::CONTENT_TYPE, mime)], body).into_response();
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    r
}
