//! Integration tests on real captured BOINC data (copied into `tests/fixtures`).
#![allow(clippy::unwrap_used)]

use ferrite_project::master::parse_master_page;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn master_page_fixture_gives_one_deduplicated_url_and_title() {
    let m = parse_master_page(&fixture("master_page.html")).unwrap();
    assert_eq!(m.scheduler_urls, ["http://127.0.0.1:18080/cgi"]);
    assert_eq!(m.project_name.as_deref(), Some("Fixture Project"));
}
