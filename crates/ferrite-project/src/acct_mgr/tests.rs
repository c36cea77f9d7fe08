use super::*;
use crate::verify::BoincCrypt;
use ferrite_proto::crypt::PrivateKey;
use rand::SeedableRng;

/// A verifier that accepts a signature equal to `"ok:" + md5 hex of the URL`.
fn fake() -> impl Fn(&str, &str, &str) -> bool {
    |_key: &str, md5: &str, sig: &str| sig.trim() == format!("ok:{md5}")
}

fn signed(url: &str) -> String {
    format!("ok:{}", ferrite_proto::crypt::md5_hex(url.as_bytes()))
}

fn view(url: &str, via_am: bool) -> ProjectView {
    ProjectView {
        url: url.into(),
        authenticator: "1_abc".into(),
        attached_via_acct_mgr: via_am,
        detach_when_done: false,
        ntasks: 3,
        has_am_share: false,
    }
}

fn reply(accounts: Vec<AmAccount>) -> AmReply {
    AmReply {
        signing_key: "KEY".into(),
        accounts,
        ..AmReply::default()
    }
}

fn account(url: &str) -> AmAccount {
    AmAccount {
        url: url.into(),
        url_signature: signed(url),
        authenticator: "1_abc".into(),
        ..AmAccount::default()
    }
}

#[test]
fn attaches_a_signed_project_and_refuses_a_forged_one() {
    let mut forged = account("http://evil.example/");
    forged.url_signature = signed("http://other.example/");
    let mut no_key = account("http://q.example/");
    no_key.authenticator.clear();
    let mut suspended = account("http://s.example/");
    suspended.suspend = Some(true);
    suspended.no_rsc = vec!["NVIDIA".into()];
    let r = reply(vec![
        account("http://p.example/"),
        forged,
        no_key,
        suspended,
    ]);
    let plan = plan_sync(&[], &r, "", true, &fake());
    assert!(plan.succeeded() && plan.key_ok);
    assert_eq!(
        plan.actions,
        vec![
            AmAction::Attach {
                url: "http://p.example/".into(),
                authenticator: "1_abc".into(),
                no_rsc: vec![],
                dont_request_more_work: None,
                suspend: false,
            },
            AmAction::Attach {
                url: "http://s.example/".into(),
                authenticator: "1_abc".into(),
                no_rsc: vec!["NVIDIA".into()],
                dont_request_more_work: None,
                suspend: true,
            },
        ]
    );
    assert!(plan
        .notes
        .iter()
        .any(|n| n.level == NoteLevel::Error
            && n.text == "Bad signature for URL http://evil.example/"));
    assert!(plan.notes.iter().any(|n| n
        .text
        .contains("missing authenticator for http://q.example/")));
}

#[test]
fn real_rsa_signature_of_the_url_is_checked() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(16);
    let key = PrivateKey::generate(&mut rng, 1024).expect("key");
    let public = key.public_key().to_text();
    let url = "http://127.0.0.1:8080/test/";
    let good = AmAccount {
        url: url.into(),
        url_signature: key.sign(url.as_bytes()).expect("sign"),
        authenticator: "k".into(),
        ..AmAccount::default()
    };
    let mut bad = good.clone();
    bad.url = "http://127.0.0.1:8080/other/".into();
    let r = AmReply {
        signing_key: public.clone(),
        accounts: vec![good, bad],
        ..AmReply::default()
    };
    let plan = plan_sync(&[], &r, &public, false, &BoincCrypt);
    assert_eq!(plan.actions.len(), 1);
    assert!(matches!(&plan.actions[0], AmAction::Attach { url: u, .. } if u == url));
}

#[test]
fn a_reply_without_a_key_or_with_another_key_changes_no_project() {
    let r = AmReply {
        accounts: vec![account("http://p.example/")],
        ..AmReply::default()
    };
    let plan = plan_sync(&[], &r, "", true, &fake());
    assert!(plan.succeeded(), "the contact itself succeeded");
    assert!(!plan.key_ok && plan.actions.is_empty());
    assert!(plan
        .notes
        .iter()
        .any(|n| n.text == "No signing key from account manager"));

    let r = reply(vec![account("http://p.example/")]);
    let plan = plan_sync(&[], &r, "OTHER KEY", true, &fake());
    assert!(!plan.key_ok && plan.actions.is_empty());
    assert!(plan
        .notes
        .iter()
        .any(|n| n.text.starts_with("Inconsistent signing key")));
}

#[test]
fn errors_fail_the_sync_and_flag_a_bad_password() {
    let r = AmReply {
        error_num: ERR_BAD_PASSWD,
        ..reply(vec![account("http://p.example/")])
    };
    let plan = plan_sync(&[], &r, "", false, &fake());
    assert_eq!(
        plan.failure,
        Some((ERR_BAD_PASSWD, "invalid password".into()))
    );
    assert!(plan.password_error);
    assert!(plan.actions.is_empty());
    assert_eq!(plan.notes[0].level, NoteLevel::Alert);
    let via_gui = plan_sync(&[], &r, "", true, &fake());
    assert!(!via_gui.password_error, "a GUI shows the error itself");
    let r = AmReply {
        error: "Account is closed".into(),
        ..AmReply::default()
    };
    let plan = plan_sync(&[], &r, "", true, &fake());
    assert_eq!(plan.failure, Some((0, "Account is closed".into())));
    assert_eq!(
        plan.notes[0].text,
        "Message from account manager: Account is closed"
    );
}

#[test]
fn settings_for_attached_projects() {
    let mut a = account("http://p.example");
    a.suspend = Some(false);
    a.resource_share = Some(40.0);
    a.update = true;
    a.detach_when_done = Some(true);
    a.abort_not_started = Some(true);
    a.no_rsc = vec!["CPU".into()];
    a.authenticator = "2_new".into();
    let mut b = account("http://q.example/");
    b.authenticator = "strongkey".into();
    let mut q = view("http://q.example/", true);
    q.has_am_share = true;
    let plan = plan_sync(
        &[view("http://p.example/", false), q],
        &reply(vec![a, b]),
        "KEY",
        false,
        &fake(),
    );
    assert_eq!(
        plan.actions,
        vec![
            AmAction::Change {
                url: "http://p.example/".into(),
                changes: ProjectChanges {
                    authenticator: Some("2_new".into()),
                    dont_request_more_work: true,
                    detach_when_done: true,
                    update: true,
                    resource_share: ShareChange::Set(40.0),
                    suspend: Some(false),
                    abort_not_started: true,
                    no_rsc: vec!["CPU".into()],
                },
            },
            AmAction::Change {
                url: "http://q.example/".into(),
                changes: ProjectChanges {
                    authenticator: None,
                    dont_request_more_work: false,
                    detach_when_done: false,
                    update: false,
                    resource_share: ShareChange::Restore,
                    suspend: None,
                    abort_not_started: false,
                    no_rsc: vec![],
                },
            },
        ]
    );
    assert!(plan
        .notes
        .iter()
        .any(|n| n.text == "Already attached to a different account"));
}

#[test]
fn detach_only_what_the_manager_attached() {
    let mut d1 = account("http://p.example/");
    d1.detach = true;
    let mut d2 = account("http://q.example/");
    d2.detach = true;
    let mut d3 = account("http://new.example/");
    d3.detach_when_done = Some(true);
    let plan = plan_sync(
        &[
            view("http://p.example/", true),
            view("http://q.example/", false),
        ],
        &reply(vec![d1, d2, d3]),
        "",
        true,
        &fake(),
    );
    assert_eq!(
        plan.actions,
        vec![AmAction::Detach {
            url: "http://p.example/".into()
        }]
    );
}

#[test]
fn finished_detach_when_done_projects_go_first() {
    let mut done = view("http://p.example/", true);
    done.detach_when_done = true;
    done.ntasks = 0;
    let mut busy = view("http://q.example/", true);
    busy.detach_when_done = true;
    let mut mine = view("http://r.example/", false);
    mine.detach_when_done = true;
    mine.ntasks = 0;
    let plan = plan_sync(
        &[done, busy, mine],
        &reply(vec![account("http://p.example/")]),
        "",
        true,
        &fake(),
    );
    assert_eq!(plan.detach_done, vec!["http://p.example/".to_owned()]);
    // The detached project is attached again as new (the manager still lists it).
    assert!(matches!(&plan.actions[0], AmAction::Attach { .. }));
}

#[test]
fn sync_clock_follows_repeat_sec_and_backs_off() {
    let mut c = SyncClock::default();
    assert!(c.due(1.0));
    c.started(1000.0);
    assert!(!c.due(1000.0 + 3600.0));
    c.succeeded(1000.0, 300.0);
    assert_eq!(c.next_rpc_time, 1300.0);
    assert!(!c.due(1300.0) && c.due(1300.5));
    c.succeeded(1000.0, 0.0);
    assert_eq!(c.next_rpc_time, 1000.0 + DEFAULT_SYNC_PERIOD);
    c.failed(0.0, 0.999_999);
    assert!((c.next_rpc_time - 600.0).abs() < 0.01);
    c.failed(0.0, 0.0);
    assert_eq!(c.next_rpc_time, 600.0, "1200 s at half");
    for _ in 0..20 {
        c.failed(0.0, 1.0);
    }
    assert_eq!(c.next_rpc_time, MAX_BACKOFF);
    c.succeeded(0.0, 60.0);
    assert_eq!(c.nfailures, 0);
}

#[test]
fn starvation_asks_a_dynamic_manager_after_ten_minutes_then_backs_off() {
    let mut c = SyncClock::default();
    assert!(!c.starved(0.0, false));
    assert!(!c.starved(60.0, true), "starvation begins");
    assert!(!c.starved(600.0, true));
    assert!(c.starved(660.0, true), "ten minutes later");
    assert!(!c.starved(720.0, true));
    assert!(c.starved(660.0 + 1200.0, true), "then 1200 s");
    assert!(!c.starved(2000.0, false), "work again resets");
    assert_eq!(c.first_starved, 0.0);
}

#[test]
fn am_prefs_apply_when_newer_or_dynamic() {
    assert!(use_am_prefs(false, 10.0, 5.0));
    assert!(!use_am_prefs(false, 5.0, 5.0));
    assert!(use_am_prefs(true, 1.0, 5.0));
}
