//! Shared test helpers: a leaf-level comparison of two XML documents.
#![allow(dead_code)]

use std::collections::HashMap;

use quick_xml::events::Event;
use quick_xml::Reader;

/// Elements compared as one opaque value (their inner source, white space removed).
const OPAQUE: &[&str] = &[
    "code_sign_key",
    "code_sign_key_signature",
    "file_signature",
    "xml_signature",
    "stderr_out",
    "global_preferences",
    "working_global_preferences",
    "project_preferences",
    "gui_urls",
    "rss_feeds",
    "persistent_file_xfer",
    "proxy_info",
    "coproc_opencl",
    "opencl_cpu_prop",
    "msg_from_host",
    "trickle_down",
    "user_keywords",
    "client_opaque",
];

/// Marker value of a `<flag/>`.
pub const FLAG: &str = "<flag>";

/// The (path, value) leaves of a document: numbers normalised to six decimals, text trimmed,
/// opaque blocks with all white space removed; `rename` maps element names (e.g. `file_info`
/// → `file`) before building paths.
pub fn leaves(xml: &str, rename: &dyn Fn(&str, usize) -> String) -> Vec<(String, String)> {
    let mut r = Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut had_child = Vec::<bool>::new();
    let mut out = Vec::new();
    loop {
        let pos = r.buffer_position() as usize;
        let ev = r.read_event().expect("well-formed XML");
        match ev {
            Event::Start(s) => {
                let raw_name = String::from_utf8_lossy(s.name().as_ref()).into_owned();
                let name = rename(&raw_name, stack.len());
                if let Some(h) = had_child.last_mut() {
                    *h = true;
                }
                if OPAQUE.contains(&raw_name.as_str()) {
                    // Capture the inner source up to the matching end tag.
                    let start = r.buffer_position() as usize;
                    let end_span = r.read_to_end(s.name()).expect("end");
                    let inner = &xml[start..end_span.start as usize];
                    let v: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
                    stack.push(name);
                    out.push((stack.join("/"), v));
                    stack.pop();
                    continue;
                }
                let _ = pos;
                stack.push(name);
                had_child.push(false);
                text.clear();
            }
            Event::Empty(s) => {
                let raw_name = String::from_utf8_lossy(s.name().as_ref()).into_owned();
                let name = rename(&raw_name, stack.len());
                if let Some(h) = had_child.last_mut() {
                    *h = true;
                }
                stack.push(name);
                out.push((stack.join("/"), FLAG.to_owned()));
                stack.pop();
            }
            Event::Text(t) => text.push_str(&t.unescape().expect("text")),
            Event::CData(c) => text.push_str(&String::from_utf8_lossy(&c.into_inner())),
            Event::End(_) => {
                let leaf = !had_child.pop().unwrap_or(true);
                if leaf {
                    out.push((stack.join("/"), normalise(&text)));
                }
                stack.pop();
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

fn normalise(v: &str) -> String {
    let t = v.trim();
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => format!("{f:.6}"),
        _ => t.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// Whether a leaf value means "nothing" (absent is equivalent for BOINC).
pub fn is_default(v: &str) -> bool {
    v.is_empty() || v.parse::<f64>().is_ok_and(|f| f == 0.0)
}

/// Checks that every leaf of `original` is in `ours` (as a multiset), except leaves whose
/// value is empty or zero (absent means the same to BOINC) and paths in `ignored`.
/// Returns the leaves that are missing.
pub fn missing_leaves(
    original: &[(String, String)],
    ours: &[(String, String)],
    ignored: &[&str],
) -> Vec<(String, String)> {
    let mut have: HashMap<(&str, &str), usize> = HashMap::new();
    for (p, v) in ours {
        *have.entry((p.as_str(), v.as_str())).or_default() += 1;
    }
    let mut missing = Vec::new();
    for (p, v) in original {
        if ignored.iter().any(|i| p.ends_with(i)) {
            continue;
        }
        match have.get_mut(&(p.as_str(), v.as_str())) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                // A flag written `<x>1</x>` and `<x/>` are the same thing.
                if v == "1.000000" {
                    if let Some(n) = have.get_mut(&(p.as_str(), FLAG)) {
                        if *n > 0 {
                            *n -= 1;
                            continue;
                        }
                    }
                }
                if !is_default(v) {
                    missing.push((p.clone(), v.clone()));
                }
            }
        }
    }
    missing
}
