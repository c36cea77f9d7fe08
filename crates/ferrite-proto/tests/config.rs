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
            ferrite_cpu_temp_limit: pcts[6],
            ferrite_gpu_temp_limit: pcts[5],
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

// ---------------------------------------------------------------- cc_config

use ferrite_proto::account::{self, AccountFile};
use ferrite_proto::app_config::{AppConfig, AppConfigApp, AppVersionConfig, GpuVersions};
use ferrite_proto::cc_config::{
    CcConfig, CcOptions, ConfigCoproc, ExcludeGpu, LogFlags, ProxyInfo,
};
use ferrite_proto::job_log::{DailyXferHistory, JobLogRecord, TimeStatsEvent, TimeStatsEventKind};
use ferrite_proto::statistics::{DailyStatistics, ProjectStatistics};

#[test]
fn cc_config_fixtures_parse_and_round_trip() {
    for name in ["cc_config.xml", "cc_config_rpc.xml"] {
        let parsed = CcConfig::parse(&fixture(name), name).expect(name);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let c = parsed.value;
        assert!(c.log_flags.task && c.log_flags.file_xfer && c.log_flags.sched_ops);
        assert!(c.log_flags.sched_op_debug);
        assert!(!c.log_flags.cpu_sched_debug);
        assert!(c.options.dont_contact_ref_site && c.options.no_info_fetch);
        let expected = CcConfig {
            log_flags: LogFlags {
                sched_op_debug: true,
                ..LogFlags::default()
            },
            options: CcOptions {
                dont_contact_ref_site: true,
                no_info_fetch: true,
                ..CcOptions::default()
            },
        };
        assert_eq!(c, expected);
        let again = CcConfig::parse(&c.to_xml(), "w").expect("re-parse");
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        assert_eq!(again.value, c);
    }
}

#[test]
fn cc_config_defaults_match_boinc() {
    let o = CcOptions::default();
    assert_eq!(o.max_file_xfers, 8);
    assert_eq!(o.max_file_xfers_per_project, 2);
    assert_eq!(o.http_transfer_timeout, 300);
    assert_eq!(o.http_transfer_timeout_bps, 10);
    assert_eq!(o.ncpus, -1);
    assert_eq!(o.max_overdue_days, -1.0);
    assert_eq!(o.rec_half_life_days, 10.0);
    assert_eq!(o.save_stats_days, 30);
    assert_eq!(o.max_event_log_lines, 2000);
    assert_eq!(o.force_auth, "default");
    assert_eq!(o.process_priority, -1);
    let f = LogFlags::default();
    let on: Vec<&str> = LogFlags::NAMES
        .iter()
        .copied()
        .filter(|n| f.get(n) == Some(true))
        .collect();
    assert_eq!(on, ["file_xfer", "sched_ops", "task"]);
    assert_eq!(LogFlags::NAMES.len(), 42);
    // A missing or empty file means the defaults.
    assert_eq!(
        CcConfig::parse("<cc_config/>", "e").expect("empty").value,
        CcConfig::default()
    );
}

#[test]
fn cc_config_typed_options() {
    let text = r#"<cc_config>
<log_flags><cpu_sched_debug/><work_fetch_debug>1</work_fetch_debug><future_debug>1</future_debug></log_flags>
<options>
  <alt_platform>i686-pc-linux-gnu</alt_platform>
  <alt_platform>x86_64-pc-linux-musl</alt_platform>
  <coproc><type>miner_asic</type><count>2</count><peak_flops>1e10</peak_flops><device_nums>3 5</device_nums><non_gpu/></coproc>
  <coproc><type>fpga</type><count>2</count></coproc>
  <coproc><count>1</count></coproc>
  <coproc><type>CPU</type><count>1</count></coproc>
  <exclude_gpu><url>Einstein.PHYS.uwm.edu</url><device_num>1</device_num><type>NVIDIA</type><app>brp</app></exclude_gpu>
  <exclude_gpu><url>http://a.org/</url></exclude_gpu>
  <exclude_gpu><device_num>0</device_num></exclude_gpu>
  <ignore_nvidia_dev>1</ignore_nvidia_dev>
  <ignore_cuda_dev>2</ignore_cuda_dev>
  <ignore_ati_dev>0</ignore_ati_dev>
  <exclusive_app>game.exe</exclusive_app>
  <exclusive_app>boincmgr</exclusive_app>
  <exclusive_gpu_app>blender</exclusive_gpu_app>
  <exit_when_idle/>
  <force_auth>NTLM</force_auth>
  <ncpus>3</ncpus>
  <max_overdue_days>2.5</max_overdue_days>
  <rec_half_life_days>0</rec_half_life_days>
  <proxy_info><http_server_name>proxy.lan</http_server_name><http_server_port>3128</http_server_port><http_user_name>me</http_user_name></proxy_info>
  <ignore_tty>pts/3</ignore_tty>
  <device_name>crunchbox</device_name>
  <dont_use_podman>1</dont_use_podman>
  <client_version_check_url>http://old/</client_version_check_url>
  <max_file_xfers>many</max_file_xfers>
  <warp_drive>1</warp_drive>
</options>
</cc_config>"#;
    let parsed = CcConfig::parse(text, "cc_config.xml").expect("parses");
    let c = &parsed.value;
    assert!(c.log_flags.cpu_sched_debug && c.log_flags.work_fetch_debug);
    let o = &c.options;
    assert_eq!(
        o.alt_platforms,
        ["i686-pc-linux-gnu", "x86_64-pc-linux-musl"]
    );
    assert_eq!(
        o.coprocs,
        [
            ConfigCoproc {
                rsc_type: "miner_asic".into(),
                count: 2,
                peak_flops: 1e10,
                device_nums: vec![3, 5],
                non_gpu: true,
            },
            ConfigCoproc {
                rsc_type: "fpga".into(),
                count: 2,
                peak_flops: 0.0,
                device_nums: vec![0, 1],
                non_gpu: false,
            },
        ]
    );
    assert_eq!(
        o.exclude_gpus,
        [
            ExcludeGpu {
                url: "http://einstein.phys.uwm.edu/".into(),
                device_num: Some(1),
                rsc_type: Some("NVIDIA".into()),
                app: Some("brp".into()),
            },
            ExcludeGpu {
                url: "http://a.org/".into(),
                ..ExcludeGpu::default()
            },
        ]
    );
    assert_eq!(o.ignore_nvidia_dev, [1, 2]);
    assert_eq!(o.ignore_ati_dev, [0]);
    assert_eq!(o.exclusive_apps, ["game.exe"]);
    assert_eq!(o.exclusive_gpu_apps, ["blender"]);
    assert!(
        o.exit_when_idle && o.report_results_immediately,
        "exit_when_idle implies it"
    );
    assert_eq!(o.force_auth, "ntlm");
    assert_eq!(o.ncpus, 3);
    assert_eq!(o.max_overdue_days, 2.5);
    assert_eq!(o.rec_half_life_days, 10.0);
    let proxy = o.proxy_info.as_ref().expect("proxy");
    assert!(proxy.use_http_proxy && proxy.use_http_auth && !proxy.use_socks_proxy);
    assert_eq!(
        (proxy.http_server_name.as_str(), proxy.http_server_port),
        ("proxy.lan", 3128)
    );
    assert!(proxy.present());
    assert_eq!(o.ignore_tty, ["pts/3"]);
    assert_eq!(o.device_name, "crunchbox");
    assert!(o.dont_use_docker);
    assert_eq!(o.max_file_xfers, 8, "unparsable value keeps the default");
    let warned: Vec<&str> = parsed.warnings.iter().map(|w| w.element.as_str()).collect();
    assert_eq!(
        warned,
        [
            "future_debug",
            "coproc",
            "coproc",
            "exclude_gpu",
            "exclusive_app",
            "rec_half_life_days",
            "max_file_xfers",
            "warp_drive"
        ]
    );
    let again = CcConfig::parse(&c.to_xml(), "w").expect("re-parse");
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(&again.value, c);
}

#[test]
fn cc_config_not_xml_is_an_error() {
    let err = CcConfig::parse("<cc_config>\n<options>\n</cc_config>", "cc_config.xml")
        .expect_err("mismatched");
    assert!(err.to_string().starts_with("cc_config.xml:3:"), "{err}");
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_.]{0,12}"
}

prop_compose! {
    fn proxy()(
        names in proptest::array::uniform7("[a-z0-9.&]{0,10}"),
        ports in (0i32..65536, 0i32..65536),
        flags in proptest::array::uniform5(any::<bool>()),
    ) -> ProxyInfo {
        ProxyInfo {
            use_http_proxy: flags[0] || !names[1].is_empty(),
            use_socks_proxy: flags[1] || !names[0].is_empty(),
            use_http_auth: flags[2] || !names[4].is_empty(),
            socks_server_name: names[0].clone(),
            socks_server_port: ports.0,
            http_server_name: names[1].clone(),
            http_server_port: ports.1,
            socks5_user_name: names[2].clone(),
            socks5_user_passwd: names[3].clone(),
            socks5_remote_dns: flags[3],
            http_user_name: names[4].clone(),
            http_user_passwd: names[5].clone(),
            no_proxy: names[6].clone(),
            no_autodetect: flags[4],
        }
    }
}

prop_compose! {
    fn cc_config()(
        flags in proptest::collection::vec(any::<bool>(), 42),
        bools in proptest::collection::vec(any::<bool>(), 37),
        ints in proptest::array::uniform10(-1i32..100_000),
        dbls in proptest::array::uniform5((-1000i32..1_000_000).prop_map(|m| f64::from(m) / 1000.0)),
        lists in proptest::array::uniform6(proptest::collection::vec(name(), 0..3)),
        devs in proptest::array::uniform4(proptest::collection::vec(0i32..8, 0..3)),
        coprocs in proptest::collection::vec(
            (name(), 0i32..8, 0u32..1_000_000, proptest::collection::vec(0i32..8, 0..4), any::<bool>()),
            0..3),
        excl in proptest::collection::vec(
            ("[a-z]{1,8}", proptest::option::of(0i32..8), proptest::option::of(name()), proptest::option::of(name())),
            0..3),
        proxy in proptest::option::of(proxy()),
        device_name in "[a-z]{0,8}",
        force_auth in "[a-z]{1,8}",
    ) -> CcConfig {
        let mut lf = LogFlags::default();
        let mut text = String::from("<cc_config><log_flags>");
        for (n, v) in LogFlags::NAMES.iter().zip(&flags) {
            text.push_str(&format!("<{n}>{}</{n}>", u8::from(*v)));
        }
        text.push_str("</log_flags></cc_config>");
        if let Ok(p) = CcConfig::parse(&text, "gen") {
            lf = p.value.log_flags;
        }
        let b = |i: usize| bools[i];
        CcConfig {
            log_flags: lf,
            options: CcOptions {
                abort_jobs_on_exit: b(0),
                allow_gui_rpc_get: b(1),
                allow_multiple_clients: b(2),
                allow_remote_gui_rpc: b(3),
                alt_platforms: lists[0].clone(),
                coprocs: coprocs.into_iter().map(|(t, count, f, nums, non_gpu)| ConfigCoproc {
                    rsc_type: format!("x{t}"),
                    count,
                    peak_flops: f64::from(f),
                    device_nums: nums,
                    non_gpu,
                }).collect(),
                device_name,
                disallow_attach: b(4),
                dont_check_file_sizes: b(5),
                dont_contact_ref_site: b(6),
                dont_suspend_nci: b(7),
                dont_use_vbox: b(8),
                dont_use_wsl: b(9),
                dont_use_docker: b(10),
                disallowed_wsls: lists[1].clone(),
                exclude_gpus: excl.into_iter().map(|(host, d, t, a)| ExcludeGpu {
                    url: format!("http://{host}.org/"),
                    device_num: d,
                    rsc_type: t,
                    app: a,
                }).collect(),
                exclusive_apps: lists[2].clone(),
                exclusive_gpu_apps: lists[3].clone(),
                exit_after_finish: b(11),
                exit_before_start: b(12),
                exit_when_idle: b(13),
                fetch_minimal_work: b(14),
                fetch_on_update: b(15),
                force_auth,
                http_1_0: b(16),
                http_transfer_timeout: ints[0],
                http_transfer_timeout_bps: ints[1],
                ignore_nvidia_dev: devs[0].clone(),
                ignore_ati_dev: devs[1].clone(),
                ignore_intel_dev: devs[2].clone(),
                ignore_apple_dev: devs[3].clone(),
                ignore_tty: lists[4].clone(),
                lower_client_priority: b(17),
                max_event_log_lines: ints[2],
                max_file_xfers: ints[3],
                max_file_xfers_per_project: ints[4],
                max_overdue_days: dbls[0],
                max_stderr_file_size: dbls[1].abs(),
                max_stdout_file_size: dbls[2].abs(),
                max_tasks_reported: ints[5],
                ncpus: ints[6],
                no_alt_platform: b(18),
                no_disk_usage: b(19),
                no_gpus: b(20),
                no_info_fetch: b(21),
                no_opencl: b(22),
                no_priority_change: b(23),
                no_rdp_check: b(24),
                os_random_only: b(25),
                prioritize_gpu: b(26),
                process_priority: ints[7] % 6,
                process_priority_special: ints[8] % 6,
                proxy_info: proxy,
                rec_half_life_days: if dbls[3] > 0.0 { dbls[3] } else { 10.0 },
                report_results_immediately: b(27) || b(13),
                run_apps_manually: b(28),
                save_stats_days: ints[9],
                simple_gui_only: b(29),
                skip_cpu_benchmarks: b(30),
                start_delay: dbls[4],
                stderr_head: b(31),
                suppress_net_info: b(32),
                unsigned_apps_ok: b(33),
                use_all_gpus: b(34),
                use_certs: b(35),
                use_certs_only: b(36),
                vbox_window: lists[5].is_empty(),
                ferrite_metrics_port: if b(0) { 9187 } else { 0 },
                ferrite_confine_apps: !b(1),
                ferrite_unconfined_projects: if b(2) {
                    vec!["https://p.example/".into()]
                } else {
                    Vec::new()
                },
                ferrite_checkpoint_grace: if b(3) { 0.0 } else { 300.0 },
            },
        }
    }
}

proptest! {
    #[test]
    fn cc_config_write_then_parse_is_identity(c in cc_config()) {
        let xml = c.to_xml();
        let back = CcConfig::parse(&xml, "c").expect("parses");
        prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        prop_assert_eq!(back.value, c);
    }
}

// ---------------------------------------------------------------- app_config

#[test]
fn app_config_reads_every_element() {
    let text = r#"<app_config>
   <app>
      <name>einstein_O3</name>
      <max_concurrent>2</max_concurrent>
      <gpu_versions>
          <gpu_usage>0.5</gpu_usage>
          <cpu_usage>0.4</cpu_usage>
      </gpu_versions>
      <fraction_done_exact/>
      <report_results_immediately>1</report_results_immediately>
   </app>
   <app><name>other</name><gpu_versions><gpu_usage>-1</gpu_usage><cpu_usage>0</cpu_usage></gpu_versions></app>
   <app_version>
       <app_name>einstein_O3</app_name>
       <plan_class>cuda101</plan_class>
       <avg_ncpus>2</avg_ncpus>
       <ngpus>0.5</ngpus>
       <cmdline>--nthreads 2</cmdline>
   </app_version>
   <project_max_concurrent>4</project_max_concurrent>
   <report_results_immediately/>
   <hyperdrive/>
</app_config>"#;
    let parsed = AppConfig::parse(text, "app_config.xml").expect("parses");
    let c = &parsed.value;
    let app = c.app("einstein_O3").expect("app");
    assert_eq!(app.max_concurrent, 2);
    assert_eq!(
        app.gpu_versions,
        Some(GpuVersions {
            gpu_usage: 0.5,
            cpu_usage: 0.4
        })
    );
    assert!(app.gpu_versions.is_some_and(|g| g.applies()));
    assert!(app.fraction_done_exact && app.report_results_immediately);
    let other = c.app("other").expect("other");
    assert!(
        !other.gpu_versions.is_some_and(|g| g.applies()),
        "0 cpu_usage disables it"
    );
    let v = c.app_version("einstein_O3", "cuda101").expect("version");
    assert_eq!(
        (v.avg_ncpus, v.ngpus, v.cmdline.as_str()),
        (2.0, 0.5, "--nthreads 2")
    );
    assert!(
        c.app_version("einstein_O3", "").is_none(),
        "plan class matches exactly"
    );
    assert_eq!(c.project_max_concurrent, 4);
    assert!(c.report_immediately("anything"));
    let warned: Vec<&str> = parsed.warnings.iter().map(|w| w.element.as_str()).collect();
    assert_eq!(warned, ["gpu_usage", "hyperdrive"]);
    let again = AppConfig::parse(&c.to_xml(), "w").expect("re-parse");
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(&again.value, c);
}

#[test]
fn app_config_bad_values() {
    let text = "<app_config><project_max_concurrent>0</project_max_concurrent><app><name>a</name><max_concurrent>-3</max_concurrent></app></app_config>";
    let parsed = AppConfig::parse(text, "a.xml").expect("parses");
    assert_eq!(parsed.value.project_max_concurrent, 0);
    assert_eq!(parsed.value.apps[0].max_concurrent, 0);
    assert_eq!(parsed.warnings.len(), 2);
    assert!(AppConfig::parse("<app_config><app>", "a.xml").is_err());
}

prop_compose! {
    fn app_config()(
        apps in proptest::collection::vec(
            (name(), 0i32..16, proptest::option::of((1u32..4000, 0u32..4000)), any::<bool>(), any::<bool>()),
            0..4),
        versions in proptest::collection::vec(
            (name(), "[a-z0-9_]{0,8}", "[a-z0-9 -]{0,12}", 0u32..16_000, 0u32..4000),
            0..3),
        pmc in 0i32..10,
        rri in any::<bool>(),
    ) -> AppConfig {
        AppConfig {
            apps: apps.into_iter().map(|(name, mc, g, fde, rri)| AppConfigApp {
                name,
                max_concurrent: mc,
                gpu_versions: g.map(|(gu, cu)| GpuVersions {
                    gpu_usage: f64::from(gu) / 1000.0,
                    cpu_usage: f64::from(cu) / 1000.0,
                }),
                fraction_done_exact: fde,
                report_results_immediately: rri,
            }).collect(),
            app_versions: versions.into_iter().map(|(app_name, plan_class, cmdline, n, g)| AppVersionConfig {
                app_name,
                plan_class,
                cmdline: cmdline.trim().to_owned(),
                avg_ncpus: f64::from(n) / 1000.0,
                ngpus: f64::from(g) / 1000.0,
            }).collect(),
            project_max_concurrent: pmc,
            report_results_immediately: rri,
        }
    }
}

proptest! {
    #[test]
    fn app_config_write_then_parse_is_identity(c in app_config()) {
        let xml = c.to_xml();
        let back = AppConfig::parse(&xml, "a").expect("parses");
        prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        prop_assert_eq!(back.value, c);
    }
}

// ---------------------------------------------------------------- account, statistics, logs

#[test]
fn account_fixture_round_trips_byte_for_byte() {
    let text = fixture("account_127.0.0.1_18080.xml");
    let parsed = AccountFile::parse(&text, "account").expect("parses");
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let a = &parsed.value;
    assert_eq!(a.master_url, "http://127.0.0.1:18080/");
    assert_eq!(a.authenticator, "0123456789abcdef0123456789abcdef");
    assert_eq!(a.project_name, "Fixture Project");
    assert_eq!(a.prefs("").resource_share, Some(100.0));
    assert_eq!(a.to_xml(), text, "written exactly as BOINC wrote it");
    assert_eq!(
        account::account_file_name(&a.master_url),
        "account_127.0.0.1_18080.xml"
    );
}

#[test]
fn account_with_gui_urls_and_without_url() {
    let a = AccountFile {
        master_url: "https://p.org/".into(),
        authenticator: "k".into(),
        project_name: String::new(),
        project_prefs: "<resource_share>5</resource_share>\n<venue name=\"w\"><resource_share>7</resource_share></venue>\n".into(),
        gui_urls: Some("<gui_urls>\n<gui_url><name>Forum</name><url>https://p.org/forum</url></gui_url>\n</gui_urls>".into()),
    };
    let xml = a.to_xml();
    let back = AccountFile::parse(&xml, "a").expect("parses").value;
    assert_eq!(back, a);
    assert_eq!(back.prefs("w").resource_share, Some(7.0));
    let err = AccountFile::parse(
        "<account>\n<authenticator>x</authenticator>\n</account>",
        "acc.xml",
    )
    .expect_err("no url");
    assert!(
        matches!(&err, XmlError::MissingElement { element, line: 1, .. } if element == "master_url"),
        "{err}"
    );
}

#[test]
fn statistics_fixture_round_trips() {
    let text = fixture("statistics_127.0.0.1_18080.xml");
    let parsed = ProjectStatistics::parse(&text, "stats").expect("parses");
    assert!(parsed.warnings.is_empty());
    let s = parsed.value;
    assert_eq!(s.master_url, "http://127.0.0.1:18080/");
    assert_eq!(s.daily.len(), 1);
    assert_eq!(s.daily[0].day, 1_795_305_600.0);
    assert_eq!(s.to_xml(), text, "written exactly as BOINC wrote it");
}

#[test]
fn statistics_record_replaces_today_and_trims() {
    let mut s = ProjectStatistics {
        master_url: "http://p/".into(),
        daily: (0..40)
            .map(|d| DailyStatistics {
                day: f64::from(d) * 86_400.0,
                ..DailyStatistics::default()
            })
            .collect(),
    };
    let today = DailyStatistics {
        day: 39.0 * 86_400.0,
        user_total_credit: 5.0,
        ..DailyStatistics::default()
    };
    s.record(today, 30);
    assert_eq!(s.daily.len(), 31);
    assert_eq!(s.daily[0].day, 9.0 * 86_400.0);
    assert_eq!(s.daily.last().map(|d| d.user_total_credit), Some(5.0));
}

#[test]
fn job_log_fixture_lines_parse_and_format_identically() {
    let text = fixture("job_log_127.0.0.1_18080.txt");
    let (records, bad) = JobLogRecord::parse_log(&text);
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(records.len(), 2);
    let r = &records[1];
    assert_eq!(r.time, 1_795_334_303.0);
    assert_eq!(r.est_runtime_uncorrected, 10.0);
    assert_eq!(r.fpops_est, 1e10);
    assert_eq!(r.name, "wu_long_0");
    assert_eq!(r.elapsed_time, 120.203464);
    assert_eq!(r.exit_status, 0);
    let formatted: String = records.iter().map(|r| format!("{r}\n")).collect();
    assert_eq!(formatted, text);
    assert!(JobLogRecord::parse_line("123 ue 1 ct").is_err());
    assert!(JobLogRecord::parse_line("abc ue 1 nm x").is_err());
    assert!(
        JobLogRecord::parse_line("123 ue 1 ct 2").is_err(),
        "no name"
    );
    let future = JobLogRecord::parse_line("5 zz 9 nm a es -1").expect("unknown key skipped");
    assert_eq!(future.exit_status, -1);
}

#[test]
fn time_stats_log_and_daily_xfer_history() {
    let text = fixture("time_stats_log");
    let events: Vec<TimeStatsEvent> = text
        .lines()
        .map(|l| TimeStatsEvent::parse_line(l).expect(l))
        .collect();
    assert_eq!(events[0].event, TimeStatsEventKind::PowerOn);
    assert_eq!(events[1].event, TimeStatsEventKind::NetUnknown);
    assert_eq!(events[2].event, TimeStatsEventKind::ProcStop);
    let formatted: String = events.iter().map(|e| format!("{e}\n")).collect();
    assert_eq!(formatted, text);
    assert!(TimeStatsEvent::parse_line("1 power_on extra").is_err());

    let text = fixture("daily_xfer_history.xml");
    let h = DailyXferHistory::parse(&text, "dx").expect("parses").value;
    assert_eq!(h.days.len(), 1);
    assert_eq!(
        (h.days[0].when, h.days[0].up, h.days[0].down),
        (20779, 38455.0, 10147.0)
    );
    assert_eq!(h.to_xml(), text);
    assert_eq!(h.totals(20779, 1), (38455.0, 10147.0));
    assert_eq!(h.totals(20780, 1), (0.0, 0.0));
}

// ---------------------------------------------------------------- init_data.xml

use ferrite_proto::init_data::{AppInitData, SHM_KEY_MMAP};

#[test]
fn init_data_fixtures_parse_and_write_back() {
    for name in ["init_data_slot0.xml", "init_data_slot1.xml"] {
        let text = fixture(name);
        let parsed = AppInitData::parse(&text, name).expect(name);
        assert!(parsed.warnings.is_empty(), "{name}: {:?}", parsed.warnings);
        let d = &parsed.value;
        assert_eq!((d.major_version, d.minor_version, d.release), (7, 20, 5));
        assert_eq!(d.app_version, 200);
        assert_eq!((d.userid, d.teamid, d.hostid), (42, 0, 7));
        assert_eq!(d.app_name, "fixture_app");
        assert_eq!(d.user_name, "fixture_user");
        assert_eq!(
            d.project_dir,
            "/var/lib/boinc-client/projects/127.0.0.1_18080"
        );
        assert_eq!(d.shm_key, SHM_KEY_MMAP);
        assert_eq!(d.client_pid, 32467);
        assert_eq!(d.checkpoint_period, 60.0);
        assert_eq!(
            (d.gpu_type.as_str(), d.gpu_device_num, d.gpu_usage),
            ("", -1, 0.0)
        );
        assert_eq!(d.rsc_fpops_bound, 1e12);
        assert_eq!(d.computation_deadline, 1_795_937_483.0);
        assert_eq!(d.host_info.p_ncpus, 2);
        assert_eq!(d.host_info.domain_name, "host.example");
        assert!(d.proxy_info.as_ref().is_some_and(|p| !p.present()));
        assert_eq!(d.global_prefs.work_buf_min_days, 0.01);
        assert!(d.global_prefs.override_file_present);
        assert_eq!(d.app_files, ["fixture_app_2.00.sh"]);

        // Written back, the file differs from BOINC 7.20.5's only by the three niu_* lines
        // that newer clients write.
        let ours = d.to_xml();
        let niu = [
            "   <niu_max_ncpus_pct>100.000000</niu_max_ncpus_pct>",
            "   <niu_cpu_usage_limit>100.000000</niu_cpu_usage_limit>",
            "   <niu_suspend_cpu_usage>0.000000</niu_suspend_cpu_usage>",
        ];
        let without: Vec<&str> = ours.lines().filter(|l| !niu.contains(l)).collect();
        assert_eq!(ours.lines().count() - without.len(), 3, "{ours}");
        assert_eq!(without.join("\n") + "\n", text);

        let again = AppInitData::parse(&ours, "w").expect("re-parse");
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        assert_eq!(&again.value, d);
    }
}

#[test]
fn init_data_optional_parts_round_trip() {
    let d = AppInitData {
        app_name: "a & b".into(),
        plan_class: "cuda".into(),
        acct_mgr_url: "https://am.example/".into(),
        project_preferences: "<color>red</color>\n<project_specific><x>1</x></project_specific>\n"
            .into(),
        team_name: "Team <One>".into(),
        gpu_type: "NVIDIA".into(),
        gpu_device_num: 1,
        gpu_opencl_dev_index: 1,
        gpu_usage: 0.5,
        proxy_info: Some(ProxyInfo {
            use_http_proxy: true,
            http_server_name: "proxy.lan".into(),
            http_server_port: 3128,
            ..ProxyInfo::default()
        }),
        ..AppInitData::default()
    };
    let xml = d.to_xml();
    assert!(
        xml.contains("<project_preferences>\n<color>red</color>\n"),
        "{xml}"
    );
    assert!(
        xml.contains("<team_name>Team &lt;One&gt;</team_name>"),
        "{xml}"
    );
    let back = AppInitData::parse(&xml, "d").expect("parses");
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    assert_eq!(back.value, d);
    let none = AppInitData::default().to_xml();
    assert!(!none.contains("<proxy_info>") && !none.contains("<project_preferences>"));
    assert!(none.starts_with("<app_init_data>\n<major_version>0</major_version>\n"));
}

#[test]
fn override_subset_writer_and_network_prefs_file() {
    let over = fixture("global_prefs_override.xml");
    let mut p = GlobalPrefs::default();
    let applied = p.apply_override(&over, "o", NOW).expect("applies").value;
    let written = p.to_override_xml(&applied.present);
    assert_eq!(
        written,
        "<global_preferences>\n   <run_if_user_active>1</run_if_user_active>\n   <suspend_cpu_usage>0.000000</suspend_cpu_usage>\n   <work_buf_min_days>0.010000</work_buf_min_days>\n   <work_buf_additional_days>0.010000</work_buf_additional_days>\n   <max_ncpus_pct>100.000000</max_ncpus_pct>\n</global_preferences>\n"
    );
    let mut q = GlobalPrefs::default();
    let again = q.apply_override(&written, "w", NOW).expect("applies").value;
    assert_eq!(again.present, applied.present);
    assert_eq!(q, p);
    assert_eq!(p.to_override_xml(&Default::default()), "");

    let body = "\n<mod_time>5</mod_time>\n<disk_interval>7</disk_interval>\n";
    let file = prefs::network_prefs_file(body, "http://p.org/", "http://p.org/cgi");
    let parsed = GlobalPrefs::parse_network(&file, "g", "", NOW)
        .expect("parses")
        .value
        .0;
    assert_eq!(parsed.source_project, "http://p.org/");
    assert_eq!(parsed.source_scheduler, "http://p.org/cgi");
    assert_eq!(parsed.disk_interval, 7.0);
    let tagged = "<source_project>http://q/</source_project>\n";
    let file = prefs::network_prefs_file(tagged, "http://p.org/", "x");
    assert_eq!(file.matches("<source_project>").count(), 1);
    assert!(file.contains("http://q/"));
}
