//! Preferences and configuration documents: real files from a BOINC 7.20.5 data directory
//! and GUI RPC captures, bad input, merge semantics, and write-then-parse identity.

use ferrite_proto::prefs::{self, GlobalPrefs, NetworkPrefsStatus, OverrideStatus, TimeSpan};
use ferrite_proto::xml::XmlError;
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/config/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const NOW: f64 = 1_795_335_489.0;

fn no_venue(_: &str) -> Option<String> {
    None
}

// ---------------------------------------------------------------- global prefs

#[test]
fn prefs_fixtures_round_trip() {
    for name in [
        "global_prefs_override.xml",
        "global_prefs_working_rpc.xml",
        "global_prefs_legacy.xml",
        "global_prefs_emulator.xml",
    ] {
        let text = fixture(name);
        let first = GlobalPrefs::parse(&text, name).expect(name);
        assert!(first.warnings.is_empty(), "{name}: {:?}", first.warnings);
        let written = first.value.to_xml();
        let second = GlobalPrefs::parse(&written, "written").expect("re-parse");
        assert_eq!(first.value, second.value, "{name}:\n{written}");
        assert!(second.warnings.is_empty(), "{:?}", second.warnings);
    }
}

#[test]
fn working_prefs_from_gui_rpc_match_the_defaults() {
    // A client without global_prefs.xml reports its defaults; BOINC 7.20.5 wrote
    // vm_max_used_pct 75 where newer clients default to 100.
    let p = GlobalPrefs::parse(&fixture("global_prefs_working_rpc.xml"), "rpc")
        .expect("parses")
        .value;
    let expected = GlobalPrefs {
        vm_max_used_pct: 75.0,
        niu_max_ncpus_pct: 100.0,
        niu_suspend_cpu_usage: 25.0,
        ..GlobalPrefs::default()
    };
    assert_eq!(p, expected);
}

#[test]
fn writer_uses_boinc_order_and_layout() {
    let p = GlobalPrefs::default();
    let xml = p.to_xml();
    let lines: Vec<&str> = xml.lines().collect();
    assert_eq!(lines[0], "<global_preferences>");
    assert_eq!(lines[1], "   <source_project></source_project>");
    assert_eq!(lines[2], "   <mod_time>0.000000</mod_time>");
    assert_eq!(lines[5], "   <run_on_batteries>0</run_on_batteries>");
    let names: Vec<&str> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| {
            l.trim()
                .trim_start_matches('<')
                .split('>')
                .next()
                .unwrap_or("")
        })
        .collect();
    let order = [
        "source_project",
        "mod_time",
        "battery_charge_min_pct",
        "battery_max_temperature",
        "run_on_batteries",
        "run_if_user_active",
        "run_gpu_if_user_active",
        "suspend_if_no_recent_input",
        "suspend_cpu_usage",
        "start_hour",
        "end_hour",
        "net_start_hour",
        "net_end_hour",
        "leave_apps_in_memory",
        "confirm_before_connecting",
        "hangup_if_dialed",
        "dont_verify_images",
        "work_buf_min_days",
        "work_buf_additional_days",
        "max_ncpus_pct",
        "niu_max_ncpus_pct",
        "niu_cpu_usage_limit",
        "niu_suspend_cpu_usage",
        "cpu_scheduling_period_minutes",
        "disk_interval",
        "disk_max_used_gb",
        "disk_max_used_pct",
        "disk_min_free_gb",
        "vm_max_used_pct",
        "ram_max_used_busy_pct",
        "ram_max_used_idle_pct",
        "idle_time_to_run",
        "max_bytes_sec_up",
        "max_bytes_sec_down",
        "cpu_usage_limit",
        "daily_xfer_limit_mb",
        "daily_xfer_period_days",
        "override_file_present",
        "network_wifi_only",
    ];
    assert_eq!(names, order);
    assert_eq!(*lines.last().unwrap_or(&""), "</global_preferences>");
}

#[test]
fn booleans_omitted_from_a_prefs_file_are_false() {
    let p = GlobalPrefs::parse_network(&fixture("global_prefs_legacy.xml"), "g", "", NOW)
        .expect("parses")
        .value
        .0;
    assert!(p.run_if_user_active, "given as <run_if_user_active/>");
    assert!(p.leave_apps_in_memory && p.hangup_if_dialed);
    assert!(
        !p.confirm_before_connecting,
        "omitted → false, not its default true"
    );
    assert!(!p.run_on_batteries && !p.dont_verify_images);
    assert!(p.network_wifi_only, "omitted → true");
    assert_eq!(p.max_cpus, 4);
    assert_eq!(p.cpu_scheduling_period_minutes, 1.0);
    assert_eq!(p.disk_min_free_gb, 2.0);
    assert_eq!(p.mod_time, 1_170_192_285.0);
    assert_eq!(p.max_bytes_sec_up, 200_000.0);
    // Untouched doubles keep their defaults; niu_* follow the in-use values.
    assert_eq!(p.work_buf_additional_days, 0.5);
    assert_eq!(
        p.niu_max_ncpus_pct, 100.0,
        "max_ncpus_pct 0 (all CPUs) carried over as 100"
    );
    assert_eq!(p.niu_suspend_cpu_usage, 25.0);
}

#[test]
fn matching_venue_resets_to_defaults_and_wins() {
    let text = r#"<global_preferences>
<mod_time>100</mod_time>
<source_project>http://p/</source_project>
<work_buf_min_days>3</work_buf_min_days>
<confirm_before_connecting>1</confirm_before_connecting>
<venue name="work">
  <max_ncpus_pct>10</max_ncpus_pct>
</venue>
<venue name="home">
  <max_ncpus_pct>50</max_ncpus_pct>
  <run_on_batteries/>
</venue>
<disk_interval>999</disk_interval>
</global_preferences>"#;
    let home = GlobalPrefs::parse_network(text, "g", "home", NOW)
        .expect("parses")
        .value;
    assert!(home.1.found_venue);
    let p = home.0;
    assert_eq!(p.max_ncpus_pct, 50.0);
    assert!(p.run_on_batteries);
    assert_eq!(
        p.work_buf_min_days, 0.1,
        "top-level value before the venue was reset"
    );
    assert!(
        !p.confirm_before_connecting,
        "booleans quirk again at the venue"
    );
    assert_eq!(
        p.disk_interval, 60.0,
        "top-level after the matching venue is ignored"
    );
    assert_eq!(p.mod_time, 100.0, "mod_time is outside venues");
    assert_eq!(p.source_project, "http://p/");

    let none = GlobalPrefs::parse_network(text, "g", "school", NOW)
        .expect("parses")
        .value;
    assert!(!none.1.found_venue);
    assert_eq!(none.0.max_ncpus_pct, 0.0, "non-matching venues are skipped");
    assert_eq!(none.0.work_buf_min_days, 3.0);
    assert_eq!(none.0.disk_interval, 999.0);
    assert!(none.0.confirm_before_connecting);
}

#[test]
fn future_mod_time_is_clamped_to_now() {
    let text = "<global_preferences><mod_time>9999999999</mod_time></global_preferences>";
    let parsed = GlobalPrefs::parse_network(text, "g", "", NOW).expect("parses");
    assert_eq!(parsed.value.0.mod_time, NOW);
    assert_eq!(parsed.warnings.len(), 1);
    assert!(parsed.warnings[0].message.contains("future"));
}

#[test]
fn wrong_types_are_warned_and_leave_the_value_alone() {
    let text = "<global_preferences>\n<max_ncpus_pct>lots</max_ncpus_pct>\n<disk_interval>\n</disk_interval>\n<run_if_user_active>maybe</run_if_user_active>\n<daily_xfer_period_days>abc</daily_xfer_period_days>\n</global_preferences>";
    let parsed = GlobalPrefs::parse(text, "bad.xml").expect("no error for bad values");
    let p = parsed.value;
    assert_eq!(p.max_ncpus_pct, 0.0);
    assert_eq!(p.disk_interval, 60.0);
    assert_eq!(p.daily_xfer_period_days, 0);
    assert!(p.run_if_user_active, "unknown boolean text taken as true");
    let lines: Vec<usize> = parsed.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [2, 3, 5, 6], "{:?}", parsed.warnings);
    assert_eq!(&*parsed.warnings[0].file, "bad.xml");
    assert_eq!(parsed.warnings[0].element, "max_ncpus_pct");
}

#[test]
fn out_of_range_values_are_clamped_with_warnings() {
    let text = "<global_preferences>
<max_ncpus_pct>150</max_ncpus_pct>
<niu_max_ncpus_pct>0</niu_max_ncpus_pct>
<work_buf_min_days>-1</work_buf_min_days>
<cpu_usage_limit>0</cpu_usage_limit>
<niu_cpu_usage_limit>250</niu_cpu_usage_limit>
<cpu_scheduling_period_minutes>0</cpu_scheduling_period_minutes>
<max_bytes_sec_up>-5</max_bytes_sec_up>
<daily_xfer_limit_mb>-3</daily_xfer_limit_mb>
<max_cpus>-2</max_cpus>
<ram_max_used_busy_pct>0</ram_max_used_busy_pct>
</global_preferences>";
    let parsed = GlobalPrefs::parse(text, "r.xml").expect("parses");
    let p = parsed.value;
    assert_eq!(p.max_ncpus_pct, 100.0);
    assert_eq!(p.niu_max_ncpus_pct, 100.0);
    assert_eq!(p.work_buf_min_days, 0.0);
    assert_eq!(p.cpu_usage_limit, 100.0, "0 is refused, default kept");
    assert_eq!(p.niu_cpu_usage_limit, 100.0);
    assert_eq!(p.cpu_scheduling_period_minutes, 60.0);
    assert_eq!(p.max_bytes_sec_up, 0.0);
    assert_eq!(p.daily_xfer_limit_mb, 0.0);
    assert_eq!(p.max_cpus, 0);
    assert_eq!(p.ram_max_used_busy_pct, 100.0, "0 means 100");
    let warned: Vec<&str> = parsed.warnings.iter().map(|w| w.element.as_str()).collect();
    assert_eq!(
        warned,
        [
            "max_ncpus_pct",
            "niu_max_ncpus_pct",
            "work_buf_min_days",
            "cpu_usage_limit",
            "niu_cpu_usage_limit",
            "cpu_scheduling_period_minutes",
            "max_bytes_sec_up",
            "daily_xfer_limit_mb",
            "max_cpus",
        ]
    );
}

#[test]
fn unknown_future_elements_are_warned_and_skipped() {
    let text = "<global_preferences>\n<quantum_mode>1</quantum_mode>\n<solar><w>5</w></solar>\n<disk_interval>30</disk_interval>\n</global_preferences>";
    let parsed = GlobalPrefs::parse(text, "f.xml").expect("parses");
    assert_eq!(parsed.value.disk_interval, 30.0);
    let w: Vec<(String, usize)> = parsed
        .warnings
        .iter()
        .map(|w| (w.element.clone(), w.line))
        .collect();
    assert_eq!(w, [("quantum_mode".to_owned(), 2), ("solar".to_owned(), 3)]);
    assert_eq!(parsed.warnings[0].dedup_key().1, "quantum_mode");
}

#[test]
fn non_xml_prefs_is_an_error_with_line() {
    let err = GlobalPrefs::parse("<global_preferences>\n<a>1</b>\n", "x.xml").expect_err("bad");
    match &err {
        XmlError::Malformed { line, file, .. } => {
            assert_eq!(*line, 2);
            assert_eq!(&**file, "x.xml");
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = GlobalPrefs::parse("just text", "y.xml").expect_err("not xml");
    assert!(err.to_string().starts_with("y.xml:1:"), "{err}");
}

#[test]
fn day_prefs_parse_check_and_write() {
    let text = "<global_preferences>
<start_hour>9</start_hour><end_hour>17</end_hour>
<day_prefs><day_of_week>0</day_of_week><start_hour>0</start_hour><end_hour>24</end_hour></day_prefs>
<day_prefs><day_of_week>3</day_of_week><net_start_hour>22</net_start_hour><net_end_hour>6</net_end_hour></day_prefs>
<day_prefs><day_of_week>4</day_of_week><start_hour>5</start_hour><end_hour>5</end_hour></day_prefs>
<day_prefs><day_of_week>9</day_of_week><start_hour>1</start_hour><end_hour>2</end_hour></day_prefs>
</global_preferences>";
    let parsed = GlobalPrefs::parse(text, "d.xml").expect("parses");
    assert_eq!(
        parsed.warnings.len(),
        1,
        "day 9 is refused: {:?}",
        parsed.warnings
    );
    let p = parsed.value;
    assert!(!p.cpu_suspended_at(20.0, 0), "Sunday: all day");
    assert!(p.cpu_suspended_at(20.0, 1), "Monday: 9-17");
    assert!(
        p.cpu_suspended_at(20.0, 4),
        "Thursday start==end is ignored"
    );
    assert!(!p.net_suspended_at(23.0, 3));
    assert!(p.net_suspended_at(12.0, 3));
    assert!(!p.net_suspended_at(12.0, 2));
    assert_eq!(
        p.net_times.week[3],
        Some(TimeSpan {
            start_hour: 22.0,
            end_hour: 6.0
        })
    );
    let xml = p.to_xml();
    assert!(xml.contains(
        "   <day_prefs>\n      <day_of_week>0</day_of_week>\n      <start_hour>0.00</start_hour>\n      <end_hour>24.00</end_hour>\n   </day_prefs>\n"
    ), "{xml}");
    let again = GlobalPrefs::parse(&xml, "w").expect("re-parse").value;
    assert_eq!(again, p);
}

#[test]
fn override_applies_only_present_elements() {
    let network = fixture("global_prefs_legacy.xml");
    let over = fixture("global_prefs_override.xml");
    let w = prefs::working_prefs(Some(&network), Some(&over), "", &no_venue, NOW);
    assert_eq!(w.network, NetworkPrefsStatus::Parsed { found_venue: false });
    let OverrideStatus::Applied(set) = &w.override_file else {
        panic!("override not applied: {:?}", w.override_file);
    };
    assert_eq!(set.len(), 5);
    let p = &w.prefs;
    // From the override.
    assert_eq!(p.suspend_cpu_usage, 0.0);
    assert_eq!(p.max_ncpus_pct, 100.0);
    assert_eq!(p.work_buf_min_days, 0.01);
    assert_eq!(p.work_buf_additional_days, 0.01);
    // From the network prefs, untouched by the override.
    assert_eq!(p.disk_interval, 180.0);
    assert_eq!(p.max_cpus, 4);
    assert!(!p.confirm_before_connecting);
    assert!(p.override_file_present);
    // The override's not-in-use fallback.
    assert_eq!(p.niu_max_ncpus_pct, 100.0);
    assert_eq!(p.niu_suspend_cpu_usage, 0.0);
}

#[test]
fn override_without_niu_resets_them_to_the_in_use_values() {
    let network = "<global_preferences><max_ncpus_pct>100</max_ncpus_pct><niu_max_ncpus_pct>25</niu_max_ncpus_pct><cpu_usage_limit>90</cpu_usage_limit><niu_cpu_usage_limit>30</niu_cpu_usage_limit></global_preferences>";
    let alone = prefs::working_prefs(Some(network), None, "", &no_venue, NOW);
    assert_eq!(alone.prefs.niu_max_ncpus_pct, 25.0);
    assert_eq!(alone.prefs.niu_cpu_usage_limit, 30.0);
    assert!(!alone.prefs.override_file_present);
    let over = "<global_preferences><max_ncpus_pct>80</max_ncpus_pct></global_preferences>";
    let w = prefs::working_prefs(Some(network), Some(over), "", &no_venue, NOW);
    assert_eq!(w.prefs.max_ncpus_pct, 80.0);
    assert_eq!(w.prefs.niu_max_ncpus_pct, 80.0, "reset to the in-use value");
    assert_eq!(
        w.prefs.niu_cpu_usage_limit, 90.0,
        "reset to the in-use value"
    );
    assert_eq!(w.prefs.usable_cpus(10, -1, false), 8);
}

#[test]
fn override_host_venue_selects_the_network_venue_and_its_venues_are_ignored() {
    let network = r#"<global_preferences><source_project>http://p/</source_project>
<disk_interval>10</disk_interval>
<venue name="home"><disk_interval>20</disk_interval></venue>
<venue name="work"><disk_interval>30</disk_interval></venue>
</global_preferences>"#;
    let over = r#"<global_preferences><host_venue>home</host_venue>
<venue name="home"><max_ncpus_pct>5</max_ncpus_pct></venue>
</global_preferences>"#;
    let project = |url: &str| (url == "http://p/").then(|| "work".to_owned());
    let w = prefs::working_prefs(Some(network), Some(over), "", &project, NOW);
    assert_eq!(w.host_venue, "home");
    assert!(w.venue_from_override);
    assert_eq!(w.prefs.disk_interval, 20.0);
    assert_eq!(
        w.prefs.max_ncpus_pct, 0.0,
        "venues in the override are ignored"
    );

    // Without a forced venue, the source project's venue wins and the file is re-parsed.
    let w = prefs::working_prefs(Some(network), None, "", &project, NOW);
    assert_eq!(w.host_venue, "work");
    assert_eq!(w.prefs.disk_interval, 30.0);
    assert_eq!(w.network, NetworkPrefsStatus::Parsed { found_venue: true });
}

#[test]
fn unparsable_network_prefs_fall_back_to_defaults() {
    let w = prefs::working_prefs(Some("<global_preferences><x>"), None, "", &no_venue, NOW);
    assert!(matches!(
        w.network,
        NetworkPrefsStatus::Unparsable(XmlError::Truncated { .. })
    ));
    assert_eq!(w.prefs, GlobalPrefs::default());
    let w = prefs::working_prefs(None, Some("<oops"), "", &no_venue, NOW);
    assert_eq!(w.network, NetworkPrefsStatus::Missing);
    assert!(matches!(w.override_file, OverrideStatus::Unparsable(_)));
    assert_eq!(w.prefs, GlobalPrefs::default());
}

fn hours() -> impl Strategy<Value = f64> {
    (0u32..=96).prop_map(|q| f64::from(q) / 4.0)
}

fn milli(max: u32) -> impl Strategy<Value = f64> {
    (0..=max * 1000).prop_map(|m| f64::from(m) / 1000.0)
}

fn span() -> impl Strategy<Value = Option<TimeSpan>> {
    proptest::option::of(
        (hours(), hours()).prop_filter_map("start == end is dropped", |(s, e)| {
            (s != e).then_some(TimeSpan {
                start_hour: s,
                end_hour: e,
            })
        }),
    )
}

prop_compose! {
    fn time_prefs()(s in hours(), e in hours(), week in proptest::array::uniform7(span()))
        -> prefs::TimePrefs {
        prefs::TimePrefs { window: TimeSpan { start_hour: s, end_hour: e }, week }
    }
}

prop_compose! {
    fn global_prefs()(
        bools in proptest::array::uniform12(any::<bool>()),
        pcts in proptest::array::uniform8(milli(100)),
        days in proptest::array::uniform6(milli(1000)),
        mod_time in 0u32..2_000_000_000,
        ints in (0i32..64, 0i32..365),
        cpu_limit in (1u32..=100_000).prop_map(|m| f64::from(m) / 1000.0),
        niu_pcts in proptest::array::uniform2((1u32..=100_000).prop_map(|m| f64::from(m) / 1000.0)),
        cpu_times in time_prefs(),
        net_times in time_prefs(),
        source in "[a-z:/.&<]{0,20}",
        bytes in (milli(1_000_000), milli(1_000_000)),
        nz in proptest::array::uniform3((1u32..=100_000).prop_map(|m| f64::from(m) / 1000.0)),
    ) -> GlobalPrefs {
        GlobalPrefs {
            mod_time: f64::from(mod_time),
            source_project: source,
            source_scheduler: String::new(),
            host_specific: bools[0],
            run_on_batteries: bools[1],
            run_if_user_active: bools[2],
            run_gpu_if_user_active: bools[3],
            idle_time_to_run: days[0],
            suspend_if_no_recent_input: days[1],
            suspend_cpu_usage: pcts[7],
            niu_suspend_cpu_usage: pcts[1],
            cpu_times,
            net_times,
            leave_apps_in_memory: bools[4],
            confirm_before_connecting: bools[5],
            hangup_if_dialed: bools[6],
            dont_verify_images: bools[7],
            work_buf_min_days: days[2],
            work_buf_additional_days: days[3],
            max_ncpus_pct: pcts[2],
            niu_max_ncpus_pct: niu_pcts[0],
            max_cpus: ints.0,
            cpu_scheduling_period_minutes: nz[2],
            disk_interval: days[5],
            disk_max_used_gb: pcts[3],
            disk_max_used_pct: pcts[4],
            disk_min_free_gb: pcts[5],
            vm_max_used_pct: pcts[6],
            ram_max_used_busy_pct: nz[0],
            ram_max_used_idle_pct: nz[1],
            max_bytes_sec_up: bytes.0,
            max_bytes_sec_down: bytes.1,
            cpu_usage_limit: cpu_limit,
            niu_cpu_usage_limit: niu_pcts[1],
            daily_xfer_limit_mb: days[2],
            daily_xfer_period_days: ints.1,
            network_wifi_only: bools[8],
            battery_charge_min_pct: pcts[0],
            battery_max_temperature: pcts[1],
            override_file_present: bools[9],
        }
    }
}

proptest! {
    #[test]
    fn global_prefs_write_then_parse_is_identity(p in global_prefs()) {
        let xml = p.to_xml();
        let back = GlobalPrefs::parse(&xml, "p").expect("parses");
        prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        prop_assert_eq!(back.value, p);
    }
}
